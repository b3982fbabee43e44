/* SPDX-License-Identifier: MIT */
/* Selective RoPE kernels (src/kernels/selective_kernels.h) of every table of the registry:
 * angle accumulation bit-identical to scalar; cos/sin of double angles within 2e-7 absolute
 * and 1 float ulp of libm's double cos/sin over a sweep (0, tiny, the pi/4 octant borders,
 * near multiples of pi/2, random angles up to 1e12, past the SIMD bound, inf/NaN), every
 * length 0..37 for the tails, misaligned pointers, canaries on both sides of every buffer,
 * and each element's result independent of its place in the array. The scalar kernels are
 * checked against libm too. The phase network's dot products: every ISA bit-identical to
 * scalar and to the documented order of the sum, every tail and block shape. ISA
 * iteration and skips (exit 77 without a SIMD ISA): ktest_util.h. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ktest_util.h"
/* ktest_util.h first: cmocka needs its standard headers before it */
#include "selective.h"

#define ABS_TOL 2e-7
#define ULP_TOL 1.0
#define PI 3.14159265358979323846

/* Guarded buffers of doubles / floats: misalignment in floats (4 bytes). */
static double *alloc_d(rove_guarded *g, int64_t n, int mis) {
  return (double *)(void *)kt_alloc(g, 2 * n, mis, 1);
}

static void check_free(rove_guarded *g, const char *what) {
  kt_check(g, what);
  rove_guarded_free(g);
}

/* ---- accumulation ---------------------------------------------------------------------- */

static void accum_case(const rove_kernels *kn, int64_t n, int mis, rove_rng *rng) {
  const size_t nd = (size_t)n * sizeof(double);
  kt_ctx("accum n=%lld mis=%d", (long long)n, mis);
  rove_guarded gc, go, gp, gt; /* misaligned by mis doubles (+1, +2), phi by mis + 1 floats */
  double *c = alloc_d(&gc, n, 2 * mis), *out = alloc_d(&go, n, 2 * mis + 2);
  float *phi = kt_alloc(&gp, n, mis + 1, 1);
  double *temp = alloc_d(&gt, n, 2 * mis + 4);
  double *c_ref = malloc(nd + 8), *o_ref = malloc(nd + 8);
  assert_non_null(c_ref);
  assert_non_null(o_ref);
  for (int64_t i = 0; i < n; i++) {
    c[i] = c_ref[i] = (double)rove_rng_uniform(rng, -1e6f, 1e6f) / 3.0;
    temp[i] = (double)rove_rng_uniform(rng, 1e-6f, 2.0f) / 7.0;
  }
  const rove_angle_accum_fn f = kn->angle_accum, ref = kt_ref()->angle_accum;
  for (int step = 0; step < 3; step++) { /* three tokens in a row, as the driver calls it */
    for (int64_t i = 0; i < n; i++) phi[i] = rove_rng_uniform(rng, -3.0f, 3.0f);
    ref(c_ref, o_ref, phi, temp, n);
    f(c, out, phi, temp, n);
    if (memcmp(c, c_ref, nd)) kt_fail("token %d: carry differs from scalar", step);
    if (memcmp(out, o_ref, nd)) kt_fail("token %d: angles differ from scalar", step);
  }
  check_free(&gc, "carry"), check_free(&go, "out"), check_free(&gp, "phi"), check_free(&gt, "temp");
  free(c_ref), free(o_ref);
}

static void test_accum(const rove_kernels *kn) {
  rove_rng rng;
  rove_rng_seed(&rng, 1);
  static const int64_t extra[] = {63, 64, 65, 100, 513};
  for (int mis = 0; mis < 4; mis++) {
    for (int64_t n = 0; n <= 37; n++) accum_case(kn, n, mis, &rng);
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) accum_case(kn, extra[i], mis, &rng);
  }
}

/* ---- sincos ----------------------------------------------------------------------------- */

#define MAX_ANGLES 16384

/* The sweep of angles (returns the count). */
static int64_t make_angles(double *a) {
  int64_t n = 0;
  static const double fixed[] = {0.0,
                                 -0.0,
                                 5e-324,
                                 -5e-324,
                                 1e-300,
                                 1e-20,
                                 -1e-20,
                                 1e-8,
                                 -1e-8,
                                 0.1,
                                 -0.5,
                                 1.0,
                                 2.0,
                                 3.0,
                                 100.0,
                                 1e3,
                                 1e6,
                                 1e9,
                                 -1e9,
                                 1e12,
                                 ROVE_SINCOS_BOUND,
                                 -ROVE_SINCOS_BOUND,
                                 2e12,
                                 1e15,
                                 1e300,
                                 -1e300,
                                 DBL_MAX,
                                 1e9 + 0.5,
                                 123456789.123};
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
    if (!(isnan(c) && isnan(s))) kt_fail("angle %g: cos %.9g sin %.9g, want NaN", a, c, s);
    return;
  }
  const double cw = cos(a), sw = sin(a);
  const double ec = fabs((double)c - cw), es = fabs((double)s - sw);
  const double uc = ulps(c, cw), us = ulps(s, sw);
  if (!(ec <= ABS_TOL && es <= ABS_TOL && uc <= ULP_TOL && us <= ULP_TOL))
    kt_fail("angle %.17g: cos %.9g (libm %.17g, %.2f ulp) sin %.9g (libm %.17g, %.2f ulp)", a, c,
            cw, uc, s, sw, us);
  worst_ulp = fmax(worst_ulp, fmax(uc, us));
}

/* angles[off .. off+n) through the kernel, in guarded misaligned buffers; checks against
 * libm and against `single` (each element computed alone). */
static void sincos_case(rove_sincos_fn f, const double *angles, int64_t n, int mis,
                        const float *single_c, const float *single_s) {
  kt_ctx("sincos n=%lld mis=%d", (long long)n, mis);
  rove_guarded ga, gc, gs; /* misaligned by mis doubles, mis + 1 and mis floats */
  double *a = alloc_d(&ga, n, 2 * mis);
  float *c = kt_alloc(&gc, n, mis + 1, 1), *s = kt_alloc(&gs, n, mis, 1);
  if (n) memcpy(a, angles, (size_t)n * 8);
  f(c, s, a, n);
  for (int64_t i = 0; i < n; i++) {
    check_value(a[i], c[i], s[i]);
    if (memcmp(c + i, single_c + i, 4) || memcmp(s + i, single_s + i, 4))
      kt_fail("angle %lld (%.17g): cos/sin %.9g %.9g in the array, %.9g %.9g alone", (long long)i,
              a[i], c[i], s[i], single_c[i], single_s[i]);
  }
  check_free(&ga, "angles"), check_free(&gc, "cos"), check_free(&gs, "sin");
}

static void test_sincos(const rove_kernels *kn) {
  const rove_sincos_fn f = kn->sincos;
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
      sincos_case(f, a + start, len, (int)((start + len) % 4), c1 + start, s1 + start);
  printf("  %s: %lld angles, worst error %.3f float ulp\n", kt_isa(), (long long)n, worst_ulp);
  free(a), free(c1), free(s1);
}

/* rove_angle_table goes through the sincos slot of the table it is given. */
static void test_table_dispatch(const rove_kernels *kn) {
  double a[13];
  float c[13], s[13], c2[13], s2[13];
  for (int i = 0; i < 13; i++) a[i] = 0.37 * i - 2.0 + 1e6 * (i % 3);
  rove_angle_table(kn, c, s, a, 13);
  kn->sincos(c2, s2, a, 13);
  assert_memory_equal(c, c2, sizeof c);
  assert_memory_equal(s, s2, sizeof s);
  rove_angle_table(kn, c, s, a, 0); /* n = 0 touches nothing */
}

/* ---- angle gradients of a row (pair_grads) ---------------------------------------------- */

/* One row of d = first + 2 half + 3 floats, out accumulated over three rows with both
 * signs; the bits must equal the scalar kernel's. A pair's term is g_b y_a - g_a y_b, so
 * pairs k % 4 == 1 get g_b = 0 and y_a = NaN, pairs k % 4 == 3 g_a = 0 and y_b = Inf: the
 * zero gradient component must hide them. */
static void pair_case(const rove_kernels *kn, int32_t half, int32_t first, int inter, int mis,
                      rove_rng *rng) {
  const int64_t d = first + 2 * (int64_t)half + 3;
  kt_ctx("pair_grads half=%d first=%d interleaved=%d mis=%d", half, first, inter, mis);
  rove_guarded gg, gy, go;
  float *g = kt_alloc(&gg, d, mis, 1), *y = kt_alloc(&gy, d, mis + 3, 1);
  double *out = alloc_d(&go, half, 2 * mis);
  double *ref = malloc(sizeof(double) * (size_t)(half + 1));
  assert_non_null(ref);
  for (int32_t k = 0; k < half; k++) out[k] = ref[k] = (double)rove_rng_uniform(rng, -1.0f, 1.0f);
  for (int row = 0; row < 3; row++) {
    for (int64_t i = 0; i < d; i++) {
      g[i] = rove_rng_uniform(rng, -2.0f, 2.0f);
      y[i] = rove_rng_uniform(rng, -3.0f, 3.0f);
    }
    for (int32_t k = 0; k < half; k++) {
      const int64_t a = inter ? first + 2 * k : first + k, b = inter ? a + 1 : a + half;
      if (k % 4 == 1) g[b] = 0.0f, y[a] = NAN;
      if (k % 4 == 3) g[a] = 0.0f, y[b] = INFINITY;
    }
    const double sign = row == 1 ? -1.0 : 1.0;
    kt_ref()->pair_grads(half, first, inter, g, y, ref, sign);
    kn->pair_grads(half, first, inter, g, y, out, sign);
    if (memcmp(out, ref, sizeof(double) * (size_t)half)) kt_fail("row %d: differs from scalar", row);
  }
  for (int32_t k = 0; k < half; k++)
    if (!isfinite(out[k])) kt_fail("a zero gradient let a NaN / Inf through at pair %d", k);
  check_free(&gg, "g"), check_free(&gy, "y"), check_free(&go, "out");
  free(ref);
}

static void test_pair_grads(const rove_kernels *kn) {
  rove_rng rng;
  rove_rng_seed(&rng, 7);
  for (int inter = 0; inter < 2; inter++)
    for (int32_t first = 0; first < 3; first += 2)
      for (int32_t half = 1; half <= 70; half += half < 20 ? 1 : 9)
        pair_case(kn, half, first, inter, half % 4, &rng);
}

/* ---- the phase network's dot products (phase_dots) -------------------------------------- */

/* The documented sum (selective_kernels.h), written out here: 8 partial sums by i % 8,
 * then ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)). */
static double spec_dot(const float *m, const double *v, int64_t n) {
  double s[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  for (int64_t i = 0; i < n; i++) s[i % 8] += (double)m[i] * v[i];
  return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

/* nt tokens x rows rows of n elements, every stride wider than needed (gaps checked), m
 * and v misaligned, the buffers tight (ASan sees a read past the end). The bits must equal
 * the scalar kernel's and the spec's; the spec must be within 1e-13 of the exact sum (so
 * the kernels compute dot products at all). special = 1 puts NaN and Inf in some rows and
 * tokens: the NaN pattern must be the scalar's. */
static void dots_case(const rove_kernels *kn, int64_t n, int64_t rows, int64_t nt, int mis,
                      int special, rove_rng *rng) {
  kt_ctx("phase_dots n=%lld rows=%lld nt=%lld mis=%d special=%d", (long long)n,
         (long long)rows, (long long)nt, mis, special);
  const int64_t ms = n + mis % 3, vs = n + (mis + 1) % 3, os = rows + 2;
  rove_guarded gm, gv, go;
  float *m = kt_alloc(&gm, rows * ms, mis, 0);
  double *v = alloc_d(&gv, nt * vs, 2 * (mis % 2)); /* in floats: doubles stay aligned */
  double *out = alloc_d(&go, nt * os, 0);
  double *ref = malloc(sizeof(double) * (size_t)(nt * os + 1));
  assert_non_null(ref);
  rove_rng_fill(rng, m, rows * ms, -2.0f, 2.0f);
  for (int64_t i = 0; i < nt * vs; i++) v[i] = (double)rove_rng_uniform(rng, -3.0f, 3.0f) / 7.0;
  if (special && n > 0) {
    m[(rows / 2) * ms + n / 2] = NAN;
    v[(nt - 1) * vs + (n - 1)] = INFINITY;
  }
  for (int64_t i = 0; i < nt * os; i++) out[i] = ref[i] = -7.5; /* the gaps must keep it */
  kt_ref()->phase_dots(ref, os, m, ms, rows, v, vs, nt, n);
  kn->phase_dots(out, os, m, ms, rows, v, vs, nt, n);
  for (int64_t t = 0; t < nt; t++)
    for (int64_t j = 0; j < os; j++) {
      const double got = out[t * os + j], want = ref[t * os + j];
      if (j >= rows) {
        if (got != -7.5) kt_fail("token %lld: gap %lld written", (long long)t, (long long)j);
        continue;
      }
      const double spec = spec_dot(m + j * ms, v + t * vs, n);
      if (isnan(want) != isnan(got) || isnan(spec) != isnan(want) ||
          (!isnan(want) && (memcmp(&got, &want, sizeof got) || memcmp(&spec, &want, sizeof spec))))
        kt_fail("token %lld row %lld: %.17g, scalar %.17g, spec %.17g", (long long)t,
                (long long)j, got, want, spec);
      if (!special) {
        long double exact = 0.0L, mag = 0.0L;
        for (int64_t i = 0; i < n; i++) {
          const long double p = (long double)m[j * ms + i] * (long double)v[t * vs + i];
          exact += p, mag += fabsl(p);
        }
        if (fabsl((long double)spec - exact) > 1e-13L * mag)
          kt_fail("token %lld row %lld: spec %.17g far from the sum %.17Lg", (long long)t,
                  (long long)j, spec, exact);
      }
    }
  check_free(&gm, "m"), check_free(&gv, "v"), check_free(&go, "out");
  free(ref);
}

static void test_phase_dots(const rove_kernels *kn) {
  rove_rng rng;
  rove_rng_seed(&rng, 11);
  for (int64_t n = 0; n <= 19; n++) /* every tail, a few rows and tokens */
    for (int64_t nt = 1; nt <= 5; nt++)
      dots_case(kn, n, 1 + (n + nt) % 6, nt, (int)(n % 4), 0, &rng);
  static const int64_t sizes[][3] = {{64, 16, 4}, {129, 9, 7}, {128, 32, 1}, {4096, 16, 4},
                                     {16, 1024, 4}, {31, 17, 9}, {8, 5, 6}};
  for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++)
    for (int special = 0; special < 2; special++)
      dots_case(kn, sizes[c][0], sizes[c][1], sizes[c][2], (int)c % 4, special, &rng);
  double z = -1.0; /* nothing to sum: +0, and no row or token: nothing written */
  kn->phase_dots(&z, 1, NULL, 0, 1, NULL, 0, 1, 0);
  if (!(z == 0.0 && !signbit(z))) kt_fail("n = 0 gave %g, not +0", z);
  z = -1.0;
  kn->phase_dots(&z, 1, NULL, 0, 0, NULL, 0, 1, 0);
  kn->phase_dots(&z, 1, NULL, 0, 1, NULL, 0, 0, 0);
  if (z != -1.0) kt_fail("rows = 0 or nt = 0 wrote the output");
}

int main(void) {
  static const kt_test per_isa[] = {{"accum", test_accum},
                                    {"sincos", test_sincos},
                                    {"table", test_table_dispatch},
                                    {"pair_grads", test_pair_grads},
                                    {"phase_dots", test_phase_dots}};
  const kt_suite s = {"ktest_selective", "scalar and libm", per_isa, 5, NULL, 0, 1};
  return kt_main(&s);
}
