/* SPDX-License-Identifier: MIT */
/* Selective RoPE through the public API: rove_selective_temperatures, rove_selective_angles
 * (RoPE as the phi = 1 case, chunking, long runs against a compensated-sum oracle, thread
 * and ISA independence), bad input for every argument with outputs left untouched, and
 * the reference's rotation: a ROVE_ROTATE_ROPE plan with explicit angles equals rotating
 * only q and k (the Selective-RoPE reference), the default RoVE plan does not.
 * rove_selective_phase is tested in test_selective_phase.c. Links librove.so only. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "selective_oracle.h"
#include "testutil.h"

#define SENTINEL (-777.25)

static double *dalloc(int64_t n) {
  double *p = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  assert_non_null(p);
  return p;
}
static float *falloc(int64_t n) {
  float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  assert_non_null(p);
  return p;
}
static void dfill(double *x, int64_t n, double v) {
  for (int64_t i = 0; i < n; i++) x[i] = v;
}
static void ffill(float *x, int64_t n, float v) {
  for (int64_t i = 0; i < n; i++) x[i] = v;
}
static int dsame(const double *a, const double *b, int64_t n) {
  return memcmp(a, b, sizeof(double) * (size_t)n) == 0;
}
static int dall(const double *x, int64_t n, double v) {
  for (int64_t i = 0; i < n; i++)
    if (x[i] != v) return 0;
  return 1;
}

/* ---- temperatures ------------------------------------------------------------------- */

static void test_temperatures_are_rope_freqs(void **state) {
  (void)state;
  static const int32_t pairs[] = {1, 2, 3, 16, 32, 64, ROVE_MAX_HEAD_DIM / 2};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    const int32_t P = pairs[i];
    double t[ROVE_MAX_HEAD_DIM / 2], w[ROVE_MAX_HEAD_DIM / 2], o[ROVE_MAX_HEAD_DIM / 2];
    rove_rope_config c;
    rove_rope_config_init(&c);
    c.theta = 500000.0;
    assert_int_equal(rove_rope_inv_freq(&c, 2 * P, w, NULL), ROVE_OK);
    assert_int_equal(rove_selective_temperatures(P, t), ROVE_OK);
    assert_true(dsame(t, w, P)); /* bit for bit */
    rove_oracle_selective_temperatures(P, o);
    for (int32_t k = 0; k < P; k++) assert_true(fabs(t[k] - o[k]) <= 1e-14 * o[k]);
  }
  double t[4] = {SENTINEL, SENTINEL, SENTINEL, SENTINEL};
  assert_int_equal(rove_selective_temperatures(4, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_selective_temperatures(0, t), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_selective_temperatures(-3, t), ROVE_ERR_INVALID_ARGUMENT);
  assert_true(dall(t, 4, SENTINEL));
}

/* ---- angles ------------------------------------------------------------------------- */

/* The specification, literally: sequential double sum, one multiply. */
static void plain_angles(int32_t B, int32_t T, int32_t H, int32_t P, const float *phi,
                         const double *temp, const double *cin, double *cout, double *angles) {
  const int64_t row = (int64_t)H * P;
  for (int64_t b = 0; b < B; b++)
    for (int64_t j = 0; j < row; j++) {
      double c = cin ? cin[b * row + j] : 0.0;
      for (int64_t t = 0; t < T; t++) {
        const int64_t at = (b * T + t) * row + j;
        c += (double)phi[at];
        angles[at] = temp[j % P] * c;
      }
      if (cout) cout[b * row + j] = c;
    }
}

/* phi = 1 with carry p0 - 1 gives (p0 + t) * inv_freq (theta 500000) bit for bit. */
static void test_phi_one_is_rope(void **state) {
  (void)state;
  enum { B = 2, T = 70, H = 3, P = 32 };
  static const double p0[B] = {1000000.0, -7.0};
  double w[P], carry[B * H * P], cout[B * H * P];
  rove_rope_config c;
  rove_rope_config_init(&c);
  c.theta = 500000.0;
  assert_int_equal(rove_rope_inv_freq(&c, 2 * P, w, NULL), ROVE_OK);
  float *phi = falloc(B * T * H * P);
  double *ang = dalloc(B * T * H * P);
  ffill(phi, B * T * H * P, 1.0f);
  for (int b = 0; b < B; b++) dfill(carry + b * H * P, H * P, p0[b] - 1.0);
  assert_int_equal(rove_selective_angles(B, T, H, P, phi, NULL, carry, cout, ang), ROVE_OK);
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int h = 0; h < H; h++)
        for (int k = 0; k < P; k++) {
          const double want = (p0[b] + t) * w[k];
          const double got = ang[((b * T + t) * H + h) * P + k];
          assert_memory_equal(&got, &want, sizeof got);
        }
  for (int b = 0; b < B; b++) assert_true(dall(cout + b * H * P, H * P, p0[b] + T - 1.0));
  free(phi);
  free(ang);
}

/* One call == the plain loop == the same tokens in chunks passing the carry on (in place). */
static void check_chunks(int32_t B, int32_t T, int32_t H, int32_t P, const int32_t *cuts,
                         int n_cuts, uint64_t seed) {
  const int64_t row = (int64_t)H * P, n = (int64_t)B * T * row;
  rove_rng rng;
  rove_rng_seed(&rng, seed);
  float *phi = falloc(n);
  double *a1 = dalloc(n), *a2 = dalloc(n), *ref = dalloc(n), *temp = dalloc(P);
  double *cin = dalloc(B * row), *c1 = dalloc(B * row), *cref = dalloc(B * row);
  rove_rng_fill(&rng, phi, n, -0.5f, 2.0f);
  for (int32_t k = 0; k < P; k++) temp[k] = rove_rng_uniform(&rng, 0.001f, 1.5f);
  for (int64_t j = 0; j < B * row; j++) cin[j] = rove_rng_uniform(&rng, -100.0f, 100.0f);
  plain_angles(B, T, H, P, phi, temp, cin, cref, ref);
  assert_int_equal(rove_selective_angles(B, T, H, P, phi, temp, cin, c1, a1), ROVE_OK);
  assert_true(dsame(a1, ref, n));
  assert_true(dsame(c1, cref, B * row));
  /* chunks: phi/angles of rows b are not contiguous across chunks, so copy per chunk */
  double *carry = dalloc(B * row);
  memcpy(carry, cin, sizeof(double) * (size_t)(B * row));
  for (int32_t ci = 0, t0 = 0; ci <= n_cuts; ci++) {
    const int32_t t1 = ci < n_cuts ? cuts[ci] : T, len = t1 - t0;
    float *pc = falloc((int64_t)B * len * row);
    double *ac = dalloc((int64_t)B * len * row);
    for (int32_t b = 0; b < B; b++)
      memcpy(pc + (int64_t)b * len * row, phi + ((int64_t)b * T + t0) * row,
             sizeof(float) * (size_t)(len * row));
    assert_int_equal(rove_selective_angles(B, len, H, P, pc, temp, carry, carry, ac), ROVE_OK);
    for (int32_t b = 0; b < B; b++)
      memcpy(a2 + ((int64_t)b * T + t0) * row, ac + (int64_t)b * len * row,
             sizeof(double) * (size_t)(len * row));
    free(pc);
    free(ac);
    t0 = t1;
  }
  assert_true(dsame(a2, ref, n));
  assert_true(dsame(carry, cref, B * row));
  free(phi), free(a1), free(a2), free(ref), free(temp), free(cin), free(c1), free(cref);
  free(carry);
}

static void test_chunks_equal_one_call(void **state) {
  (void)state;
  static const int32_t cuts[] = {1, 2, 39, 40, 77};
  check_chunks(2, 100, 3, 20, cuts, 5, 11);   /* row 60: one block */
  check_chunks(4, 300, 8, 80, cuts, 5, 12);   /* row 640: two blocks, threads */
  check_chunks(1, 90, 1, 1, cuts, 5, 13);     /* row 1 */
  check_chunks(3, 50, 7, 3, cuts + 2, 1, 14); /* odd row 21 */
}

/* No carry in: the sum starts at 0; no carry out is fine. */
static void test_defaults(void **state) {
  (void)state;
  enum { B = 2, T = 9, H = 2, P = 5 };
  const int64_t n = B * T * H * P;
  rove_rng rng;
  rove_rng_seed(&rng, 5);
  float phi[B * T * H * P];
  double a[B * T * H * P], ref[B * T * H * P], temp[P];
  rove_rng_fill(&rng, phi, n, -1.0f, 1.0f);
  assert_int_equal(rove_selective_temperatures(P, temp), ROVE_OK);
  plain_angles(B, T, H, P, phi, temp, NULL, NULL, ref);
  assert_int_equal(rove_selective_angles(B, T, H, P, phi, NULL, NULL, NULL, a), ROVE_OK);
  assert_true(dsame(a, ref, n));
}

/* 10^6 steps of random phi: within 1e-6 relative of a compensated-sum oracle. */
static void test_long_run(void **state) {
  (void)state;
  enum { T = 1000000, P = 2 };
  rove_rng rng;
  rove_rng_seed(&rng, 99);
  float *phi = falloc((int64_t)T * P);
  double *a = dalloc((int64_t)T * P), *o = dalloc((int64_t)T * P);
  double cin[P] = {0.25, 3.0}, c1[P], c2[P];
  rove_rng_fill(&rng, phi, (int64_t)T * P, 0.0f, 2.0f);
  assert_int_equal(rove_selective_angles(1, T, 1, P, phi, NULL, cin, c1, a), ROVE_OK);
  assert_int_equal(rove_oracle_selective_angles(1, T, 1, P, phi, NULL, cin, c2, o), 0);
  double worst = 0.0;
  for (int64_t i = 0; i < (int64_t)T * P; i++) {
    const double e = fabs(a[i] - o[i]) / fabs(o[i]);
    worst = e > worst ? e : worst;
  }
  print_message("long run: max relative error %.3g after %d steps (angle %.6g)\n", worst, T,
                a[(int64_t)T * P - 2]);
  assert_true(worst <= 1e-6);
  for (int k = 0; k < P; k++) assert_true(fabs(c1[k] - c2[k]) <= 1e-9 * fabs(c2[k]));
  free(phi), free(a), free(o);
}

/* ---- angles: bad input ---------------------------------------------------------------- */

typedef struct {
  int32_t B, T, H, P;
  float phi[24];
  double temp[2], cin[12], cout[12], ang[24];
} angle_case;

static void angle_case_init(angle_case *c) {
  c->B = 2, c->T = 2, c->H = 3, c->P = 2;
  ffill(c->phi, 24, 0.5f);
  c->temp[0] = 1.0, c->temp[1] = 0.5;
  dfill(c->cin, 12, 1.0);
  dfill(c->cout, 12, SENTINEL);
  dfill(c->ang, 24, SENTINEL);
}

static void expect_angles_fail(angle_case *c, const float *phi, const double *temp,
                               const double *cin, double *cout, double *ang, rove_status want) {
  assert_int_equal(rove_selective_angles(c->B, c->T, c->H, c->P, phi, temp, cin, cout, ang), want);
  assert_true(dall(c->ang, 24, SENTINEL));
  assert_true(dall(c->cout, 12, SENTINEL));
}

static void test_angles_bad_pointers_and_sizes(void **state) {
  (void)state;
  angle_case c;
  angle_case_init(&c);
  expect_angles_fail(&c, NULL, c.temp, c.cin, c.cout, c.ang, ROVE_ERR_INVALID_ARGUMENT);
  expect_angles_fail(&c, c.phi, c.temp, c.cin, c.cout, NULL, ROVE_ERR_INVALID_ARGUMENT);
  int32_t *dims[4] = {&c.B, &c.T, &c.H, &c.P};
  static const int32_t bad[] = {0, -1, INT32_MIN};
  for (int d = 0; d < 4; d++)
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      angle_case_init(&c);
      *dims[d] = bad[i];
      expect_angles_fail(&c, c.phi, c.temp, c.cin, c.cout, c.ang, ROVE_ERR_INVALID_ARGUMENT);
    }
  /* element counts past int64, or past int64 bytes: refused before anything is read */
  static const int32_t big[][4] = {{INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX},
                                   {INT32_MAX, INT32_MAX, 4, 1},
                                   {INT32_MAX, INT32_MAX, 2, 1},
                                   {1, INT32_MAX, INT32_MAX, 4},
                                   {INT32_MAX, 1, INT32_MAX, 3}};
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
    angle_case_init(&c);
    c.B = big[i][0], c.T = big[i][1], c.H = big[i][2], c.P = big[i][3];
    expect_angles_fail(&c, c.phi, c.temp, c.cin, c.cout, c.ang, ROVE_ERR_SIZE_OVERFLOW);
  }
}

static void test_angles_bad_values(void **state) {
  (void)state;
  angle_case c;
  const float fbad[] = {NAN, INFINITY, -INFINITY};
  const double dbad[] = {NAN, INFINITY, -INFINITY};
  const int at[] = {0, 11, 23};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      angle_case_init(&c);
      c.phi[at[j]] = fbad[i];
      expect_angles_fail(&c, c.phi, c.temp, c.cin, c.cout, c.ang, ROVE_ERR_INVALID_ARGUMENT);
      angle_case_init(&c);
      c.temp[j % 2] = dbad[i];
      expect_angles_fail(&c, c.phi, c.temp, c.cin, c.cout, c.ang, ROVE_ERR_INVALID_ARGUMENT);
      angle_case_init(&c);
      c.cin[at[j] % 12] = dbad[i];
      expect_angles_fail(&c, c.phi, c.temp, c.cin, c.cout, c.ang, ROVE_ERR_INVALID_ARGUMENT);
    }
  /* outputs overlapping inputs or each other (carry_out == carry_in is fine) */
  angle_case_init(&c);
  expect_angles_fail(&c, c.phi, c.temp, c.cin, c.cout, c.cout, ROVE_ERR_INVALID_ARGUMENT);
  double ac[40];
  dfill(ac, 40, SENTINEL);
  assert_int_equal(rove_selective_angles(2, 2, 3, 2, c.phi, c.temp, ac + 4, NULL, ac),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_selective_angles(2, 2, 3, 2, c.phi, c.temp, c.cin, ac, ac + 6),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_selective_angles(2, 2, 3, 2, c.phi, c.temp, ac, ac + 1, c.ang),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_true(dall(ac, 40, SENTINEL));
  assert_true(dall(c.ang, 24, SENTINEL));
  /* a NaN just past phi is never read */
  float phi25[25];
  memcpy(phi25, c.phi, sizeof c.phi);
  phi25[24] = NAN;
  assert_int_equal(rove_selective_angles(2, 2, 3, 2, phi25, c.temp, c.cin, c.cin, c.ang), ROVE_OK);
}

/* ---- the reference's rotation (issue 13 item 5) --------------------------------------- */

/* The Selective-RoPE reference rotates q and k only, HALF pairing over the whole head:
 * [x0, x1] -> [x0 cos - x1 sin, x0 sin + x1 cos] with x0 the first head_dim/2 dims, then
 * causal softmax attention (flash_attn, scale 1/sqrt(head_dim)); v and the output are not
 * rotated. Written here from that description, in double. */
static void reference_qk_attention(int32_t T, int32_t H, int32_t d, const float *q,
                                   const float *k, const float *v, const double *angles,
                                   double *out) {
  const int32_t P = d / 2;
  double *qr = malloc(sizeof(double) * (size_t)(T * H * d));
  double *kr = malloc(sizeof(double) * (size_t)(T * H * d));
  assert_non_null(qr), assert_non_null(kr);
  for (int32_t t = 0; t < T; t++)
    for (int32_t h = 0; h < H; h++)
      for (int32_t j = 0; j < P; j++) {
        const int64_t at = ((int64_t)t * H + h) * d, a = ((int64_t)t * H + h) * P + j;
        const double c = cos(angles[a]), sn = sin(angles[a]);
        qr[at + j] = q[at + j] * c - q[at + P + j] * sn;
        qr[at + P + j] = q[at + j] * sn + q[at + P + j] * c;
        kr[at + j] = k[at + j] * c - k[at + P + j] * sn;
        kr[at + P + j] = k[at + j] * sn + k[at + P + j] * c;
      }
  double *sc = malloc(sizeof(double) * (size_t)T);
  assert_non_null(sc);
  for (int32_t i = 0; i < T; i++)
    for (int32_t h = 0; h < H; h++) {
      double mx = -INFINITY, sum = 0.0;
      for (int32_t j = 0; j <= i; j++) {
        double s = 0.0;
        for (int32_t e = 0; e < d; e++)
          s += qr[((int64_t)i * H + h) * d + e] * kr[((int64_t)j * H + h) * d + e];
        sc[j] = s / sqrt((double)d);
        mx = fmax(mx, sc[j]);
      }
      for (int32_t j = 0; j <= i; j++) sum += (sc[j] = exp(sc[j] - mx));
      for (int32_t e = 0; e < d; e++) {
        double o = 0.0;
        for (int32_t j = 0; j <= i; j++) o += sc[j] * v[((int64_t)j * H + h) * d + e];
        out[((int64_t)i * H + h) * d + e] = o / sum;
      }
    }
  free(qr), free(kr), free(sc);
}

static double attention_with_angles(uint32_t rotate, int32_t T, int32_t H, int32_t d,
                                    const float *q, const float *k, const float *v,
                                    const double *angles, const double *want) {
  rove_attention_config c;
  rove_attention_config_init(&c, H, H, d);
  if (rotate) c.rotate = rotate;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  float *out = falloc((int64_t)T * H * d);
  const rove_attention_args a = {.batch = 1, .q_len = T, .kv_len = T, .q = q, .k = k, .v = v,
                                 .out = out, .q_angles = angles, .kv_angles = angles};
  assert_int_equal(rove_attention_forward(p, &a), ROVE_OK);
  const double err = rove_max_rel_err_fd(out, want, (int64_t)T * H * d);
  rove_plan_destroy(p);
  free(out);
  return err;
}

/* rove_selective_angles_backward against a direct long-double reference of its sums, and
 * against central differences of rove_selective_angles (the map is linear in phi and
 * carry_in, so the differences are exact up to rounding); chunked backward calls chain;
 * bad input. */
static void test_angles_backward(void **state) {
  (void)state;
  enum { B = 2, T = 37, H = 3, K = 5, ROW = H * K };
  const int64_t n = (int64_t)B * T * ROW;
  rove_rng g;
  rove_rng_seed(&g, 4242);
  float *phi = malloc(sizeof(float) * n), *dphi = malloc(sizeof(float) * n);
  double *da = malloc(sizeof(double) * n), *ang = malloc(sizeof(double) * n);
  double temp[K], cin[B * ROW], dco[B * ROW], dci[B * ROW], dtemp[K];
  assert_true(phi && dphi && da && ang);
  rove_rng_fill(&g, phi, n, -0.5f, 1.5f);
  for (int64_t i = 0; i < n; i++) da[i] = rove_rng_uniform(&g, -1, 1);
  for (int k = 0; k < K; k++) temp[k] = 0.1 + 0.3 * k;
  for (int i = 0; i < B * ROW; i++) cin[i] = rove_rng_uniform(&g, -5, 5), dco[i] = rove_rng_uniform(&g, -1, 1);
  assert_int_equal(rove_selective_angles_backward(B, T, H, K, phi, temp, cin, da, dco, dphi, dci, dtemp), ROVE_OK);
  /* reference */
  double worst = 0.0;
  long double rt[K] = {0};
  for (int b = 0; b < B; b++)
    for (int j = 0; j < ROW; j++) {
      long double r = dco[b * ROW + j], c = cin[b * ROW + j];
      for (int t = 0; t < T; t++) c += phi[((int64_t)b * T + t) * ROW + j], rt[j % K] += (long double)da[((int64_t)b * T + t) * ROW + j] * c;
      for (int t = T - 1; t >= 0; t--) {
        r += (long double)temp[j % K] * da[((int64_t)b * T + t) * ROW + j];
        const double e = fabs((double)dphi[((int64_t)b * T + t) * ROW + j] - (double)r) / fmax(1.0, fabsl(r));
        worst = fmax(worst, e);
      }
      assert_true(fabs(dci[b * ROW + j] - (double)r) <= 1e-12 * fmax(1.0, fabsl(r)));
    }
  assert_true(worst <= 1.2e-7); /* d_phi: one rounding to float */
  for (int k = 0; k < K; k++) assert_true(fabs(dtemp[k] - (double)rt[k]) <= 1e-10 * fmax(1.0, fabsl(rt[k])));
  /* central differences of L = sum d_angles . angles + d_carry_out . carry_out */
  double co[B * ROW];
  for (int trial = 0; trial < 20; trial++) {
    const int64_t e = (int64_t)(rove_rng_u64(&g) % (uint64_t)n);
    const float x0 = phi[e], h = 0.25f;
    double L[2];
    for (int sgn = 0; sgn < 2; sgn++) {
      phi[e] = sgn ? x0 - h : x0 + h;
      assert_int_equal(rove_selective_angles(B, T, H, K, phi, temp, cin, co, ang), ROVE_OK);
      double l = 0.0;
      for (int64_t i = 0; i < n; i++) l += da[i] * ang[i];
      for (int i = 0; i < B * ROW; i++) l += dco[i] * co[i];
      L[sgn] = l;
    }
    phi[e] = x0;
    const double fd = (L[0] - L[1]) / (2.0 * h);
    assert_true(fabs(fd - dphi[e]) <= 1e-5 * fmax(1.0, fabs(fd)));
  }
  /* two chunks chained backwards equal one call */
  const int T1 = 15;
  float *dphi2 = malloc(sizeof(float) * n);
  double cmid[B * ROW], dmid[B * ROW], dci2[B * ROW];
  float *phi1 = malloc(sizeof(float) * B * T1 * ROW), *phi2 = malloc(sizeof(float) * B * (T - T1) * ROW);
  double *da1 = malloc(sizeof(double) * B * T1 * ROW), *da2 = malloc(sizeof(double) * B * (T - T1) * ROW);
  float *dp1 = malloc(sizeof(float) * B * T1 * ROW), *dp2 = malloc(sizeof(float) * B * (T - T1) * ROW);
  double *a1 = malloc(sizeof(double) * B * T1 * ROW);
  assert_true(dphi2 && phi1 && phi2 && da1 && da2 && dp1 && dp2 && a1);
  for (int b = 0; b < B; b++) {
    memcpy(phi1 + (int64_t)b * T1 * ROW, phi + (int64_t)b * T * ROW, sizeof(float) * T1 * ROW);
    memcpy(phi2 + (int64_t)b * (T - T1) * ROW, phi + ((int64_t)b * T + T1) * ROW, sizeof(float) * (T - T1) * ROW);
    memcpy(da1 + (int64_t)b * T1 * ROW, da + (int64_t)b * T * ROW, sizeof(double) * T1 * ROW);
    memcpy(da2 + (int64_t)b * (T - T1) * ROW, da + ((int64_t)b * T + T1) * ROW, sizeof(double) * (T - T1) * ROW);
  }
  assert_int_equal(rove_selective_angles(B, T1, H, K, phi1, temp, cin, cmid, a1), ROVE_OK);
  assert_int_equal(rove_selective_angles_backward(B, T - T1, H, K, phi2, temp, cmid, da2, dco, dp2, dmid, NULL), ROVE_OK);
  assert_int_equal(rove_selective_angles_backward(B, T1, H, K, phi1, temp, cin, da1, dmid, dp1, dci2, NULL), ROVE_OK);
  for (int b = 0; b < B; b++) {
    assert_memory_equal(dp1 + (int64_t)b * T1 * ROW, dphi + (int64_t)b * T * ROW, sizeof(float) * T1 * ROW);
    assert_memory_equal(dp2 + (int64_t)b * (T - T1) * ROW, dphi + ((int64_t)b * T + T1) * ROW, sizeof(float) * (T - T1) * ROW);
  }
  assert_memory_equal(dci2, dci, sizeof dci);
  /* bad input */
  assert_int_equal(rove_selective_angles_backward(B, T, H, K, NULL, temp, cin, da, dco, dphi, dci, dtemp), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_selective_angles_backward(B, T, H, K, phi, temp, cin, NULL, dco, dphi, dci, dtemp), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_selective_angles_backward(B, T, H, K, phi, temp, cin, da, dco, NULL, dci, dtemp), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_selective_angles_backward(0, T, H, K, phi, temp, cin, da, dco, dphi, dci, dtemp), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_selective_angles_backward(B, T, H, K, phi, temp, cin, da, dco, (float *)phi, dci, dtemp), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_selective_angles_backward(B, T, H, K, phi, temp, cin, da, dco, dphi, (double *)cin, dtemp), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_selective_angles_backward(B, T, H, K, phi, temp, cin, da, dco, dphi, dci, (double *)temp), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_selective_angles_backward(INT32_MAX, INT32_MAX, H, K, phi, temp, cin, da, dco, dphi, dci, dtemp), ROVE_ERR_SIZE_OVERFLOW);
  const float keep = phi[3];
  phi[3] = NAN;
  memset(dci2, 0x55, sizeof dci2);
  assert_int_equal(rove_selective_angles_backward(B, T, H, K, phi, temp, cin, da, dco, dphi2, dci2, NULL), ROVE_ERR_INVALID_ARGUMENT);
  for (int i = 0; i < B * ROW; i++) assert_true(rove_has_bits((const float *)&dci2[i], 0x55555555u));
  phi[3] = keep;
  print_message("  angles backward: d_phi worst %.3g against long double; FD, chunks, bad input ok\n", worst);
  free(phi), free(dphi), free(da), free(ang), free(dphi2), free(phi1), free(phi2), free(da1);
  free(da2), free(dp1), free(dp2), free(a1);
}

static void test_reference_rotates_qk_only(void **state) {
  (void)state;
  enum { T = 24, H = 2, d = 16, P = d / 2 };
  rove_rng rng;
  rove_rng_seed(&rng, 77);
  float *q = falloc(T * H * d), *k = falloc(T * H * d), *v = falloc(T * H * d);
  float *phi = falloc(T * H * P);
  rove_rng_fill(&rng, q, T * H * d, -1.0f, 1.0f);
  rove_rng_fill(&rng, k, T * H * d, -1.0f, 1.0f);
  rove_rng_fill(&rng, v, T * H * d, -1.0f, 1.0f);
  rove_rng_fill(&rng, phi, T * H * P, 0.0f, 3.0f);
  double *ang = dalloc(T * H * P), *want = dalloc(T * H * d);
  assert_int_equal(rove_selective_angles(1, T, H, P, phi, NULL, NULL, NULL, ang), ROVE_OK);
  reference_qk_attention(T, H, d, q, k, v, ang, want);
  const double rope = attention_with_angles(ROVE_ROTATE_ROPE, T, H, d, q, k, v, ang, want);
  const double dflt = attention_with_angles(0, T, H, d, q, k, v, ang, want);
  if (rope > 2e-5 || dflt < 0.05)
    print_message("reference rotation: ROPE err %.3g, default (RoVE) err %.3g\n", rope, dflt);
  assert_true(rope <= 2e-5); /* ROVE_ROTATE_ROPE + explicit angles = the reference */
  assert_true(dflt >= 0.05); /* the default also rotates V and O: a different answer */
  free(q), free(k), free(v), free(phi), free(ang), free(want);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_temperatures_are_rope_freqs),
      cmocka_unit_test(test_phi_one_is_rope),
      cmocka_unit_test(test_chunks_equal_one_call),
      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_long_run),
      cmocka_unit_test(test_angles_bad_pointers_and_sizes),
      cmocka_unit_test(test_angles_bad_values),
      cmocka_unit_test(test_reference_rotates_qk_only),
      cmocka_unit_test(test_angles_backward),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
