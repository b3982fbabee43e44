/* SPDX-License-Identifier: MIT */
/* rove_bench: configuration from the environment, and small helpers. */
#include "bench_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

rb_config rb_cfg;

/* Read a positive integer from the environment variable @p name (default @p def). */
static int env_int(const char *name, int32_t def, int32_t *out) {
  const char *s = getenv(name);
  if (!s || !*s) {
    *out = def;
    return 0;
  }
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v <= 0 || v > (1L << 30)) {
    fprintf(stderr, "rove_bench: %s=%s is not a positive integer\n", name, s);
    return -1;
  }
  *out = (int32_t)v;
  return 0;
}

static int parse_threads(void) {
  const char *s = getenv("ROVE_BENCH_THREADS");
  if (!s || !*s) s = "1,2";
  rb_cfg.n_threads = 0;
  while (*s) {
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || v <= 0 || v > 1024 || (*end && *end != ',') ||
        rb_cfg.n_threads == RB_MAX_THREADS) {
      fprintf(stderr, "rove_bench: ROVE_BENCH_THREADS wants up to %d counts like 1,2\n",
              RB_MAX_THREADS);
      return -1;
    }
    rb_cfg.threads[rb_cfg.n_threads++] = (int32_t)v;
    s = *end ? end + 1 : end;
  }
  return 0;
}

static int parse_isa_mask(void) {
  const char *s = getenv("ROVE_BENCH_ISAS");
  rb_cfg.isa_mask = 0;
  if (!s || !*s) {
    rb_cfg.isa_mask = ~0u;
    return 0;
  }
  while (*s) {
    size_t len = strcspn(s, ",");
    int found = 0;
    for (int i = ROVE_ISA_SCALAR; i < ROVE_ISA_COUNT; i++) {
      const char *name = rove_isa_name((rove_isa)i);
      if (strlen(name) == len && strncmp(s, name, len) == 0) {
        rb_cfg.isa_mask |= 1u << i;
        found = 1;
      }
    }
    if (!found) {
      fprintf(stderr, "rove_bench: ROVE_BENCH_ISAS: unknown ISA '%.*s' (", (int)len, s);
      for (int i = ROVE_ISA_SCALAR; i < ROVE_ISA_COUNT; i++)
        fprintf(stderr, "%s%s", i > ROVE_ISA_SCALAR ? ", " : "", rove_isa_name((rove_isa)i));
      fprintf(stderr, ")\n");
      return -1;
    }
    s += len;
    if (*s) s++;
  }
  return 0;
}

int rb_config_load(void) {
  memset(&rb_cfg, 0, sizeof rb_cfg);
  if (env_int("ROVE_BENCH_MAX_N", 16384, &rb_cfg.max_n) ||
      env_int("ROVE_BENCH_LOWER_MAX_N", 8192, &rb_cfg.lower_max_n) ||
      env_int("ROVE_BENCH_SCALAR_MAX_N", 1024, &rb_cfg.scalar_max_n) ||
      env_int("ROVE_BENCH_MAX_KV", 32768, &rb_cfg.max_kv) || parse_threads() ||
      parse_isa_mask())
    return -1;
  /* Later rove_isa values are the more specialised ISAs: descending order, best first. */
  for (int i = ROVE_ISA_COUNT - 1; i >= ROVE_ISA_SCALAR; i--)
    if (rove_isa_available((rove_isa)i) && (rb_cfg.isa_mask & (1u << i)))
      rb_cfg.isas[rb_cfg.n_isas++] = (rove_isa)i;
  if (rb_cfg.n_isas == 0) {
    fprintf(stderr, "rove_bench: ROVE_BENCH_ISAS leaves no ISA this build and CPU offer\n");
    return -1;
  }
  return 0;
}

double rb_peak_for(rove_isa isa) {
  if (isa == ROVE_ISA_SCALAR || isa == ROVE_ISA_AUTO) return rb_cfg.peak_best;
  if ((int)isa < RB_N_ISAS && rb_cfg.peak_gflops[isa] > 0) return rb_cfg.peak_gflops[isa];
  return rb_cfg.peak_best;
}

double rb_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double rb_cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

float *rb_alloc_floats(size_t n) {
  if (n == 0 || n > SIZE_MAX / sizeof(float) - 64) return NULL;
  size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
  return aligned_alloc(64, bytes);
}

void rb_fill_uniform(float *x, size_t n, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((double)(s >> 40) * (2.0 / 16777216.0) - 1.0);
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double rb_median(double *x, size_t n) {
  if (n == 0) return 0;
  qsort(x, n, sizeof *x, cmp_double);
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

int rb_samples_push(rb_samples *s, double x) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 256;
    double *v = realloc(s->v, cap * sizeof *v);
    if (!v) return -1;
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = x;
  return 0;
}

void rb_samples_free(rb_samples *s) {
  free(s->v);
  s->v = NULL;
  s->n = s->cap = 0;
}

rbs_bench *rb_family(const char *name, rbs_fn fn, void *user, const char *const *arg_names,
                     int n_args) {
  rbs_bench *b = rbs_register(name, fn, user);
  if (b && n_args > 0) rbs_arg_names(b, arg_names, n_args);
  return b;
}

void rb_pair_add(rb_pair *p, const int64_t *args, int32_t threads) {
  const int k = threads > 1;
  if (!p->fam[k]) {
    p->fam[k] = rb_family(p->name, p->fn, p->user, p->arg_names, p->n_args);
    if (!p->fam[k]) return;
    rbs_time_unit(p->fam[k], p->unit);
    if (k) rbs_use_real_time(p->fam[k]);
  }
  rbs_args(p->fam[k], args, p->n_args);
}
