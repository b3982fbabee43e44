/* GLA kernel conformance: the chunk and steps kernels of every SIMD table (AVX2, AVX-512,
 * NEON) against the scalar ones over key/value dims below, at and above the vector
 * widths, every chunk length, several chunks in a row (the state carried), decays from
 * none to very strong, misaligned rows, and canaries around every buffer (inputs must
 * stay unchanged too). An ISA this CPU/build lacks is reported as skipped; with none at
 * all the run exits 77. */
#define _POSIX_C_SOURCE 200112L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
/* testutil.h first: cmocka needs its standard headers before it */
#include "kernels/kernels.h"

#define TOL 2e-6 /* relative to the max |scalar result| of a case */
#define GUARD 32
static const uint32_t canary = 0x7FC0B0B0u;

static int n_fail;
static double worst;

/* ---- guarded buffers: 64-byte aligned base, `mis` floats of misalignment ---------------- */

typedef struct {
  float *p, *base;
  int64_t n, pre;
} gbuf;

static float *gb_alloc(gbuf *g, int64_t n, int mis) {
  void *b = NULL;
  g->pre = GUARD + mis, g->n = n;
  assert_int_equal(posix_memalign(&b, 64, sizeof(float) * (size_t)(g->pre + n + GUARD)), 0);
  g->base = b;
  for (int64_t i = 0; i < g->pre + n + GUARD; i++) memcpy(g->base + i, &canary, 4);
  g->p = g->base + g->pre;
  return g->p;
}

static int gb_intact(const gbuf *g) {
  for (int64_t i = 0; i < g->pre + g->n + GUARD; i++) {
    if (i == g->pre) i += g->n;
    if (i >= g->pre + g->n + GUARD) break;
    uint32_t u;
    memcpy(&u, g->base + i, 4);
    if (u != canary) return 0;
  }
  return 1;
}

static void gb_free(gbuf *g) { free(g->base), g->base = g->p = NULL; }

static float decay(rove_rng *r, int kind) {
  switch (kind) {
    case 1: return rove_rng_uniform(r, -25.0f, -15.0f);
    case 2: return 0.0f;
    case 3:
      return rove_rng_uniform(r, 0.0f, 1.0f) < 0.1f ? -40.0f : -rove_rng_uniform(r, 0.0f, 1e-3f);
    default: return -rove_rng_uniform(r, 0.0f, 1.0f);
  }
}

/* max |got - want| / max |want| over n floats; NaN -> inf. */
static double rel_err(const float *got, const float *want, int64_t n) {
  double mx = 1e-30, err = 0;
  for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs((double)want[i]));
  for (int64_t i = 0; i < n; i++) {
    const double e = fabs((double)got[i] - (double)want[i]);
    err = isnan(e) ? INFINITY : fmax(err, e);
  }
  return err / mx;
}

static void check(double e, const char *what, int n, int dk, int dv, int kind) {
  worst = fmax(worst, e);
  if (!(e <= TOL) && n_fail++ < 15)
    printf("  FAIL %s n=%d dk=%d dv=%d decay=%d: rel err %.3g\n", what, n, dk, dv, kind, e);
}

/* The inputs of `rows` token rows and a state; each run gets its own copies. */
typedef struct {
  float *q, *k, *g, *v, *s;
} gla_in;

static void in_make(gla_in *x, rove_rng *r, int64_t rows, int dk, int dv, int kind) {
  x->q = malloc(sizeof(float) * (size_t)(rows * dk));
  x->k = malloc(sizeof(float) * (size_t)(rows * dk));
  x->g = malloc(sizeof(float) * (size_t)(rows * dk));
  x->v = malloc(sizeof(float) * (size_t)(rows * dv));
  x->s = malloc(sizeof(float) * (size_t)dk * dv);
  assert_true(x->q && x->k && x->g && x->v && x->s);
  rove_rng_fill(r, x->q, rows * dk, -0.3f, 0.3f);
  rove_rng_fill(r, x->k, rows * dk, -1.0f, 1.0f);
  rove_rng_fill(r, x->v, rows * dv, -1.0f, 1.0f);
  rove_rng_fill(r, x->s, (int64_t)dk * dv, -1.0f, 1.0f);
  for (int64_t i = 0; i < rows * dk; i++) x->g[i] = decay(r, kind);
}

static void in_free(gla_in *x) { free(x->q), free(x->k), free(x->g), free(x->v), free(x->s); }

/* Run `chunks` chunks of n rows (chunk kernel) or the same rows through the steps kernel
 * with kernel table kn, in guarded, misaligned buffers; o gets every output row, s the
 * final state. Returns 0 if a canary or an input changed. */
static int run(const rove_gla_kernels *kn, int steps, const gla_in *x, int chunks, int n, int dk,
               int dv, float *o, float *s, int mis) {
  const int64_t rows = (int64_t)chunks * n;
  gbuf bq, bk, bg, bv, bs, bo, bw;
  float *q = gb_alloc(&bq, rows * dk, mis), *k = gb_alloc(&bk, rows * dk, (mis + 1) % 16);
  float *g = gb_alloc(&bg, rows * dk, (mis + 2) % 16),
        *v = gb_alloc(&bv, rows * dv, (mis + 3) % 16);
  float *st = gb_alloc(&bs, (int64_t)dk * dv, (mis + 5) % 16),
        *out = gb_alloc(&bo, rows * dv, (mis + 7) % 16);
  float *w = gb_alloc(&bw, rove_gla_work_floats(n, dk), 0); /* the contract: 64-byte aligned */
  memcpy(q, x->q, sizeof(float) * (size_t)(rows * dk));
  memcpy(k, x->k, sizeof(float) * (size_t)(rows * dk));
  memcpy(g, x->g, sizeof(float) * (size_t)(rows * dk));
  memcpy(v, x->v, sizeof(float) * (size_t)(rows * dv));
  memcpy(st, x->s, sizeof(float) * (size_t)dk * dv);
  for (int c = 0; c < chunks; c++) {
    const int64_t r0 = (int64_t)c * n;
    if (steps) {
      kn->steps(st, out + r0 * dv, q + r0 * dk, k + r0 * dk, v + r0 * dv, g + r0 * dk, n, dk, dv,
                w);
    } else {
      const rove_gla_chunk ch = {n,           dk,          dv, q + r0 * dk,   k + r0 * dk,
                                 g + r0 * dk, v + r0 * dv, st, out + r0 * dv, w};
      kn->chunk(&ch);
    }
  }
  memcpy(o, out, sizeof(float) * (size_t)(rows * dv));
  memcpy(s, st, sizeof(float) * (size_t)dk * dv);
  int ok = gb_intact(&bq) && gb_intact(&bk) && gb_intact(&bg) && gb_intact(&bv) && gb_intact(&bs) &&
           gb_intact(&bo) && gb_intact(&bw);
  ok = ok && !memcmp(q, x->q, sizeof(float) * (size_t)(rows * dk)) &&
       !memcmp(k, x->k, sizeof(float) * (size_t)(rows * dk)) &&
       !memcmp(g, x->g, sizeof(float) * (size_t)(rows * dk)) &&
       !memcmp(v, x->v, sizeof(float) * (size_t)(rows * dv));
  gb_free(&bq), gb_free(&bk), gb_free(&bg), gb_free(&bv), gb_free(&bs), gb_free(&bo), gb_free(&bw);
  return ok;
}

/* One case: kernel table kn against scalar. */
static void compare(const rove_gla_kernels *kn, int steps, int chunks, int n, int dk, int dv,
                    int kind, uint64_t seed) {
  rove_rng r;
  rove_rng_seed(&r, seed);
  gla_in x;
  const int64_t rows = (int64_t)chunks * n;
  in_make(&x, &r, rows, dk, dv, kind);
  float *o1 = malloc(sizeof(float) * (size_t)(rows * dv)),
        *o2 = malloc(sizeof(float) * (size_t)(rows * dv));
  float *s1 = malloc(sizeof(float) * (size_t)dk * dv),
        *s2 = malloc(sizeof(float) * (size_t)dk * dv);
  assert_true(o1 && o2 && s1 && s2);
  const char *what = steps ? "steps" : "chunk";
  if (!run(&rove_gla_kernels_scalar, steps, &x, chunks, n, dk, dv, o1, s1, 0) ||
      !run(kn, steps, &x, chunks, n, dk, dv, o2, s2, (int)(seed % 16))) {
    if (n_fail++ < 15)
      printf("  FAIL %s n=%d dk=%d dv=%d: canary or input overwritten\n", what, n, dk, dv);
  }
  char buf[64];
  snprintf(buf, sizeof buf, "%s out", what);
  check(rel_err(o2, o1, rows * dv), buf, n, dk, dv, kind);
  snprintf(buf, sizeof buf, "%s state", what);
  check(rel_err(s2, s1, (int64_t)dk * dv), buf, n, dk, dv, kind);
  free(o1), free(o2), free(s1), free(s2);
  in_free(&x);
}

/* The GLA kernels of an ISA compiled into this build, else NULL. */
static const rove_gla_kernels *gla_kernels(rove_isa isa) {
  const rove_kernels *k = rove_kernels_for(isa);
  return k ? k->gla : NULL;
}

static const rove_gla_kernels *table_or_skip(rove_isa isa) {
  n_fail = 0, worst = 0;
  if (!gla_kernels(isa)) {
    printf("  SKIPPED %s: ISA not compiled into this build\n", rove_isa_name(isa));
    skip();
  }
  if (!rove_isa_available(isa)) {
    printf("  SKIPPED %s: this CPU (or OS) cannot run it\n", rove_isa_name(isa));
    skip();
  }
  return gla_kernels(isa);
}

static const int dims[] = {1,  2,  3,  4,  5,  7,  8,  9,  15, 16, 17,
                           24, 31, 32, 33, 48, 63, 64, 65, 80, 96, 128};
#define N_DIMS ((int)(sizeof dims / sizeof *dims))

static void test_chunk(void **state) {
  const rove_isa isa = *(const rove_isa *)*state;
  const rove_gla_kernels *kn = table_or_skip(isa);
  uint64_t seed = 1;
  for (int i = 0; i < N_DIMS; i++) /* every dk x a few dv, and the reverse */
    for (int j = i % 3; j < N_DIMS; j += 5) {
      compare(kn, 0, 2, 16 * (1 + (i + j) % 8), dims[i], dims[j], (i + j) % 4, seed++);
      compare(kn, 0, 2, 16 * (1 + (i + j) % 8), dims[j], dims[i], (i + j + 1) % 4, seed++);
    }
  for (int n = 16; n <= ROVE_GLA_MAX_CHUNK; n += 16)
    for (int kind = 0; kind < 4; kind++) compare(kn, 0, 3, n, 64, 64, kind, seed++);
  compare(kn, 0, 1, 128, 256, 200, 0, seed++);
  printf("  %s chunk: max rel err %.3g\n", rove_isa_name(isa), worst);
  assert_int_equal(n_fail, 0);
}

static void test_steps(void **state) {
  const rove_isa isa = *(const rove_isa *)*state;
  const rove_gla_kernels *kn = table_or_skip(isa);
  uint64_t seed = 1000;
  for (int i = 0; i < N_DIMS; i++)
    for (int j = i % 2; j < N_DIMS; j += 3)
      compare(kn, 1, 2, 1 + (i + j) % 9, dims[i], dims[j], (i + j) % 4, seed++);
  compare(kn, 1, 4, 33, 64, 64, 0, seed++);
  printf("  %s steps: max rel err %.3g\n", rove_isa_name(isa), worst);
  assert_int_equal(n_fail, 0);
}

int main(void) {
  rove_test_isa_gate();
  static rove_isa isas[] = {ROVE_ISA_AVX2, ROVE_ISA_AVX512, ROVE_ISA_NEON};
  int available = 0;
  for (int i = 0; i < 3; i++) {
    const int in = gla_kernels(isas[i]) != NULL, runs = in && rove_isa_available(isas[i]);
    printf("ktest_gla: %-6s %s\n", rove_isa_name(isas[i]),
           runs ? "compiled in and available: tested against scalar"
           : in ? "compiled in, but this CPU cannot run it: skipped"
                : "not compiled into this build: skipped");
    available += runs;
  }
  if (!available) {
    printf("SKIPPED: no SIMD GLA kernels are available here; nothing to compare with scalar\n");
    return 77;
  }
  struct CMUnitTest tests[6];
  static char names[6][32];
  int nt = 0;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++, nt++) {
      snprintf(names[nt], sizeof names[nt], "%s_%s", rove_isa_name(isas[i]), j ? "steps" : "chunk");
      tests[nt] = (struct CMUnitTest){names[nt], j ? test_steps : test_chunk, NULL, NULL, &isas[i]};
    }
  return _cmocka_run_group_tests("ktest_gla", tests, (size_t)nt, NULL, NULL);
}
