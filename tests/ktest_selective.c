/* Selective RoPE kernels (src/kernels/selective_kernels.h) of every compiled-in ISA:
 * angle accumulation bit-identical to scalar; cos/sin of double angles within 2e-7 absolute
 * and 1 float ulp of libm's double cos/sin over a sweep (0, tiny, the pi/4 octant borders,
 * near multiples of pi/2, random angles up to 1e12, past the SIMD bound, inf/NaN), every
 * length 0..37 for the tails, misaligned pointers, canaries on both sides of every buffer,
 * and each element's result independent of its place in the array. The scalar kernels are
 * checked against libm too. An ISA this CPU/build lacks is reported skipped; with no SIMD
 * ISA at all the run exits 77. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
/* testutil.h first: cmocka needs its standard headers before it */
#include "kernels/kernels.h"
#include "selective.h"

#define ABS_TOL 2e-7
#define ULP_TOL 1.0
#define PAD 64            /* canary bytes on each side */
#define CANARY_BYTE 0xA5u
#define PI 3.14159265358979323846

/* ---- guarded buffers: `bytes` usable at 64-byte boundary + mis bytes ------------------- */

typedef struct {
  unsigned char *base;
  size_t pre, bytes;
} gbuf;

static void *gb_alloc(gbuf *g, size_t bytes, size_t mis) {
  g->pre = PAD + mis;
  g->bytes = bytes;
  const size_t total = (g->pre + bytes + PAD + 63) / 64 * 64;
  g->base = aligned_alloc(64, total);
  assert_non_null(g->base);
  memset(g->base, CANARY_BYTE, total);
  return g->base + g->pre;
}

static void gb_check_free(gbuf *g) {
  for (size_t i = 0; i < g->pre; i++) assert_int_equal(g->base[i], CANARY_BYTE);
  for (size_t i = 0; i < PAD; i++) assert_int_equal(g->base[g->pre + g->bytes + i], CANARY_BYTE);
  free(g->base);
}

/* ---- which ISA ------------------------------------------------------------------------ */

static int compiled_in(rove_isa isa) { return rove_kernels_for(isa) != NULL; }

/* The ISA under test, or skip() (reported as skipped, never passed). */
static rove_isa need_isa(void **state) {
  const rove_isa isa = *(const rove_isa *)*state;
  if (!compiled_in(isa)) {
    printf("  SKIPPED %s: not compiled into this build\n", rove_isa_name(isa));
    skip();
  }
  if (!rove_isa_available(isa)) {
    printf("  SKIPPED %s: this CPU cannot run it\n", rove_isa_name(isa));
    skip();
  }
  return isa;
}

/* ---- accumulation ---------------------------------------------------------------------- */

static void accum_case(rove_isa isa, int64_t n, size_t mis, rove_rng *rng) {
  const size_t nd = (size_t)n * sizeof(double), nf = (size_t)n * sizeof(float);
  gbuf gc, go, gp, gt;
  double *c = gb_alloc(&gc, nd, mis * 8), *out = gb_alloc(&go, nd, mis * 8 + 8);
  float *phi = gb_alloc(&gp, nf, mis * 4 + 4);
  double *temp = gb_alloc(&gt, nd, mis * 8 + 16);
  double *c_ref = malloc(nd + 8), *o_ref = malloc(nd + 8);
  assert_non_null(c_ref);
  assert_non_null(o_ref);
  for (int64_t i = 0; i < n; i++) {
    c[i] = c_ref[i] = (double)rove_rng_uniform(rng, -1e6f, 1e6f) / 3.0;
    temp[i] = (double)rove_rng_uniform(rng, 1e-6f, 2.0f) / 7.0;
  }
  const rove_angle_accum_fn f = rove_kernels_for(isa)->angle_accum;
  for (int step = 0; step < 3; step++) { /* three tokens in a row, as the driver calls it */
    for (int64_t i = 0; i < n; i++) phi[i] = rove_rng_uniform(rng, -3.0f, 3.0f);
    rove_angle_accum__scalar(c_ref, o_ref, phi, temp, n);
    f(c, out, phi, temp, n);
    assert_memory_equal(c, c_ref, nd);
    assert_memory_equal(out, o_ref, nd);
  }
  gb_check_free(&gc), gb_check_free(&go), gb_check_free(&gp), gb_check_free(&gt);
  free(c_ref), free(o_ref);
}

static void test_accum(void **state) {
  const rove_isa isa = need_isa(state);
  rove_rng rng;
  rove_rng_seed(&rng, 1);
  static const int64_t extra[] = {63, 64, 65, 100, 513};
  for (size_t mis = 0; mis < 4; mis++) {
    for (int64_t n = 0; n <= 37; n++) accum_case(isa, n, mis, &rng);
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
      accum_case(isa, extra[i], mis, &rng);
  }
}

/* ---- sincos ----------------------------------------------------------------------------- */

#define MAX_ANGLES 16384

/* The sweep of angles (returns the count). */
static int64_t make_angles(double *a) {
  int64_t n = 0;
  static const double fixed[] = {0.0, -0.0, 5e-324, -5e-324, 1e-300, 1e-20, -1e-20, 1e-8, -1e-8,
                                 0.1, -0.5, 1.0, 2.0, 3.0, 100.0, 1e3, 1e6, 1e9, -1e9, 1e12,
                                 ROVE_SINCOS_BOUND, -ROVE_SINCOS_BOUND, 2e12, 1e15, 1e300, -1e300,
                                 DBL_MAX, 1e9 + 0.5, 123456789.123};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) a[n++] = fixed[i];
  /* octant borders k pi/4 (k <= 8, both signs) and their neighbours in ulps */
  for (int k = 1; k <= 8; k++)
    for (int sgn = -1; sgn <= 1; sgn += 2) {
      double x = sgn * k * (PI / 4);
      for (int j = 0; j < 3; j++) x = nextafter(x, -INFINITY);
      for (int j = 0; j < 7; j++, x = nextafter(x, INFINITY)) a[n++] = x;
    }
  /* the doubles nearest to multiples of pi/2, small and large */
  for (int k = 1; k <= 500; k++) a[n++] = k * (PI / 2);
  for (double k = 10; k < 6e11; k *= 3.7) a[n++] = k * (PI / 2), a[n++] = -k * (PI / 2);
  /* random angles in [-R, R] */
  rove_rng rng;
  rove_rng_seed(&rng, 7);
  static const double range[] = {1.0, 10.0, 1e3, 1e6, 1e9, 1e12};
  for (size_t r = 0; r < sizeof range / sizeof range[0]; r++)
    for (int i = 0; i < 2000; i++) {
      const double u = (double)(rove_rng_u64(&rng) >> 11) * 0x1p-53;
      a[n++] = (2.0 * u - 1.0) * range[r];
    }
  a[n++] = INFINITY;
  a[n++] = -INFINITY;
  a[n++] = NAN;
  assert_true(n <= MAX_ANGLES);
  return n;
}

/* Error of one float against libm's double value, in float ulps of that value. */
static double ulps(float got, double want) {
  const double w = fabs(want);
  const double ulp = w >= FLT_MIN ? ldexp(1.0, ilogb(w) - 23) : ldexp(1.0, -149);
  return fabs((double)got - want) / ulp;
}

static double worst_ulp;

static void check_value(double a, float c, float s) {
  if (!isfinite(a)) {
    assert_true(isnan(c) && isnan(s));
    return;
  }
  const double cw = cos(a), sw = sin(a);
  const double ec = fabs((double)c - cw), es = fabs((double)s - sw);
  const double uc = ulps(c, cw), us = ulps(s, sw);
  if (ec > ABS_TOL || es > ABS_TOL || uc > ULP_TOL || us > ULP_TOL)
    printf("  FAIL angle %.17g: cos %.9g (libm %.17g, %.2f ulp) sin %.9g (libm %.17g, %.2f ulp)\n",
           a, c, cw, uc, s, sw, us);
  assert_true(ec <= ABS_TOL && es <= ABS_TOL);
  assert_true(uc <= ULP_TOL && us <= ULP_TOL);
  worst_ulp = fmax(worst_ulp, fmax(uc, us));
}

/* angles[off .. off+n) through the kernel, in guarded misaligned buffers; checks against
 * libm and against `single` (each element computed alone). */
static void sincos_case(rove_sincos_fn f, const double *angles, int64_t n, size_t mis,
                        const float *single_c, const float *single_s) {
  gbuf ga, gc, gs;
  double *a = gb_alloc(&ga, (size_t)n * 8, mis * 8);
  float *c = gb_alloc(&gc, (size_t)n * 4, mis * 4 + 4), *s = gb_alloc(&gs, (size_t)n * 4, mis * 4);
  if (n) memcpy(a, angles, (size_t)n * 8);
  f(c, s, a, n);
  for (int64_t i = 0; i < n; i++) {
    check_value(a[i], c[i], s[i]);
    assert_memory_equal(c + i, single_c + i, 4);
    assert_memory_equal(s + i, single_s + i, 4);
  }
  gb_check_free(&ga), gb_check_free(&gc), gb_check_free(&gs);
}

static void test_sincos(void **state) {
  const rove_isa isa = need_isa(state);
  const rove_sincos_fn f = rove_kernels_for(isa)->sincos;
  double *a = malloc(MAX_ANGLES * sizeof(double));
  float *c1 = malloc(MAX_ANGLES * sizeof(float)), *s1 = malloc(MAX_ANGLES * sizeof(float));
  assert_true(a && c1 && s1);
  const int64_t n = make_angles(a);
  for (int64_t i = 0; i < n; i++) f(c1 + i, s1 + i, a + i, 1); /* one element per call */
  worst_ulp = 0.0;
  sincos_case(f, a, n, 0, c1, s1);
  sincos_case(f, a, n, 1, c1, s1);
  for (int64_t len = 0; len <= 37; len++) /* tails, from several starting points */
    for (int64_t start = 0; start + len <= n; start += 997)
      sincos_case(f, a + start, len, (size_t)(start + len) % 4, c1 + start, s1 + start);
  printf("  %s: %lld angles, worst error %.3f float ulp\n", rove_isa_name(isa), (long long)n,
         worst_ulp);
  free(a), free(c1), free(s1);
}

/* rove_angle_table dispatches to the ISA's kernel (and to scalar for AUTO-less callers). */
static void test_table_dispatch(void **state) {
  const rove_isa isa = need_isa(state);
  double a[13];
  float c[13], s[13], c2[13], s2[13];
  for (int i = 0; i < 13; i++) a[i] = 0.37 * i - 2.0 + 1e6 * (i % 3);
  rove_angle_table(isa, c, s, a, 13);
  rove_kernels_for(isa)->sincos(c2, s2, a, 13);
  assert_memory_equal(c, c2, sizeof c);
  assert_memory_equal(s, s2, sizeof s);
  rove_angle_table(isa, c, s, a, 0); /* n = 0 touches nothing */
}

int main(void) {
  rove_test_isa_gate();
  static rove_isa isas[] = {ROVE_ISA_AVX2, ROVE_ISA_AVX512, ROVE_ISA_NEON, ROVE_ISA_SCALAR};
  int available = 0;
  for (int i = 0; i < 3; i++) {
    const int in = compiled_in(isas[i]), runs = in && rove_isa_available(isas[i]);
    printf("ktest_selective: %-6s %s\n", rove_isa_name(isas[i]),
           runs ? "compiled in and available: tested"
           : in ? "compiled in, but this CPU cannot run it: skipped"
                : "not compiled into this build: skipped");
    available += runs;
  }
  if (!available) {
    printf("SKIPPED: no SIMD selective kernels are available here\n");
    return 77;
  }
  struct CMUnitTest tests[4 * 3];
  static char names[4 * 3][48];
  static const char *const what[3] = {"accum", "sincos", "table"};
  const CMUnitTestFunction fns[3] = {test_accum, test_sincos, test_table_dispatch};
  int nt = 0;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++, nt++) {
      snprintf(names[nt], sizeof names[nt], "%s_%s", rove_isa_name(isas[i]), what[j]);
      tests[nt] = (struct CMUnitTest){names[nt], fns[j], NULL, NULL, &isas[i]};
    }
  return _cmocka_run_group_tests("ktest_selective", tests, (size_t)nt, NULL, NULL);
}
