/* SPDX-License-Identifier: MIT */
/* Timing, seeded data, and comparison with the oracle for the `rove` tool. */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rove_oracle.h"

double cli_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

double cli_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The q-quantile of all n values (a sorted copy; NaN if the copy cannot be made). */
double cli_quantile(const double *v, int n, double q) {
  if (n <= 0) return 0.0;
  double *tmp = malloc((size_t)n * sizeof(double));
  if (!tmp) return NAN;
  memcpy(tmp, v, (size_t)n * sizeof(double));
  qsort(tmp, (size_t)n, sizeof(double), cmp_double);
  const double pos = (q < 0.0 ? 0.0 : q > 1.0 ? 1.0 : q) * (n - 1);
  const int i = (int)pos;
  const double r = i + 1 < n ? tmp[i] + (pos - i) * (tmp[i + 1] - tmp[i]) : tmp[n - 1];
  free(tmp);
  return r;
}

/* The median of all n values (the mean of the middle two for even n). */
double cli_median(const double *v, int n) { return cli_quantile(v, n, 0.5); }

static int time_one(cli_run_fn run, void *ctx, int which, double *wall, double *cpu) {
  const double t0 = cli_now_ms(), c0 = cli_cpu_ms();
  const int rc = run(ctx, which);
  *cpu = cli_cpu_ms() - c0;
  *wall = cli_now_ms() - t0;
  return rc;
}

static cli_ab_ratio ratio_stats(double t[2][CLI_MAX_PAIRS], int pairs) {
  double r[CLI_MAX_PAIRS];
  for (int p = 0; p < pairs; p++) r[p] = t[1][p] > 0.0 ? t[0][p] / t[1][p] : 1.0;
  return (cli_ab_ratio){cli_median(r, pairs), cli_quantile(r, pairs, 0.25),
                        cli_quantile(r, pairs, 0.75)};
}

int cli_time_ab(cli_run_fn run, void *ctx, int min_pairs, double budget_ms, cli_ab_time *out) {
  double wall[2][CLI_MAX_PAIRS], cpu[2][CLI_MAX_PAIRS], w, c, spent = 0.0;
  if (min_pairs < 1) min_pairs = 1;
  if (min_pairs > CLI_MAX_PAIRS) min_pairs = CLI_MAX_PAIRS;
  if (time_one(run, ctx, 0, &w, &c) != 0 || time_one(run, ctx, 1, &w, &c) != 0) return -1;
  int pairs = 0;
  while (pairs < CLI_MAX_PAIRS && (pairs < min_pairs || spent < budget_ms)) {
    const int p = pairs++;
    for (int j = 0; j < 2; j++) {
      const int which = (p + j) % 2; /* AB on even pairs, BA on odd ones */
      if (time_one(run, ctx, which, &wall[which][p], &cpu[which][p]) != 0) return -1;
    }
    spent += wall[0][p] + wall[1][p];
  }
  out->pairs = pairs;
  for (int j = 0; j < 2; j++) {
    out->ms[j] = cli_median(wall[j], pairs);
    out->best_ms[j] = cli_quantile(wall[j], pairs, 0.0);
  }
  out->wall = ratio_stats(wall, pairs);
  out->cpu = ratio_stats(cpu, pairs);
  for (int p = 0; p < pairs; p++) out->cpu_ratio[p] = cpu[1][p] > 0.0 ? cpu[0][p] / cpu[1][p] : 1.0;
  return 0;
}

/* splitmix64: small, fast, and the same sequence everywhere. */
void cli_rng_seed(cli_rng *r, uint64_t seed) { r->s = seed; }

uint64_t cli_rng_next(cli_rng *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void cli_fill_uniform(cli_rng *r, float *x, int64_t n) {
  /* 24 random bits -> k / 2^23 - 1 in [-1, 1), exactly representable in float */
  for (int64_t i = 0; i < n; i++)
    x[i] = (float)((double)(cli_rng_next(r) >> 40) * (1.0 / 8388608.0) - 1.0);
}

int32_t cli_rng_int(cli_rng *r, int32_t lo, int32_t hi) {
  const uint64_t span = (uint64_t)((int64_t)hi - lo) + 1;
  return (int32_t)((int64_t)lo + (int64_t)(cli_rng_next(r) % span));
}

int cli_oracle(const rove_attention_config *c, const rove_attention_args *a, double *ref,
               double *ref_lse) {
  const int32_t r = c->rope.rotary_dim ? c->rope.rotary_dim : c->head_dim;
  double *inv_freq = malloc((size_t)(r > 1 ? r / 2 : 1) * sizeof(double));
  double m = 1.0;
  if (!inv_freq) {
    fprintf(stderr, "rove: out of memory for the oracle\n");
    return -1;
  }
  rove_status st = rove_rope_inv_freq(&c->rope, c->head_dim, inv_freq, &m);
  if (st != ROVE_OK) {
    fprintf(stderr, "rove: rove_rope_inv_freq failed: %s\n", rove_status_string(st));
    free(inv_freq);
    return -1;
  }
  int rc = rove_oracle_attention(c, inv_freq, m, a, ref, ref_lse);
  free(inv_freq);
  if (rc != 0) fprintf(stderr, "rove: the oracle rejected the case (or ran out of memory)\n");
  return rc;
}

double cli_max_rel_err(const float *out, int64_t out_stride, const double *ref, int64_t rows,
                       int64_t width) {
  double ref_max = 0.0, err = 0.0;
  for (int64_t i = 0; i < rows * width; i++) ref_max = fmax(ref_max, fabs(ref[i]));
  for (int64_t t = 0; t < rows; t++) {
    for (int64_t e = 0; e < width; e++) {
      const double o = (double)out[t * out_stride + e];
      if (!isfinite(o)) return INFINITY;
      err = fmax(err, fabs(o - ref[t * width + e]));
    }
  }
  return ref_max > 0.0 ? err / ref_max : err;
}

double cli_lse_err(const float *lse, const double *ref, int64_t n) {
  double err = 0.0;
  for (int64_t i = 0; i < n; i++) {
    const double l = (double)lse[i];
    if (isinf(ref[i]) || isinf(l) || isnan(l)) {
      if (!(l == ref[i])) return INFINITY;
      continue;
    }
    err = fmax(err, fabs(l - ref[i]) / fmax(1.0, fabs(ref[i])));
  }
  return err;
}

int cli_check_memory(const char *cmd, double bytes, const char *shrink) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0; /* unknown: let the allocations decide */
  const double have = (double)pages * (double)page;
  if (bytes <= 0.8 * have) return 0;
  fprintf(stderr, "rove %s: this run needs about %.1f GB of memory, this machine has %.1f GB; "
          "use smaller %s\n", cmd, bytes / 1e9, have / 1e9, shrink);
  return -1;
}
