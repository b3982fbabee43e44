/* SPDX-License-Identifier: MIT */
/* Selective RoPE through the public API: rove_selective_temperatures, rove_selective_angles
 * (RoPE as the phi = 1 case, chunking, long runs against a compensated-sum oracle, thread
 * and ISA independence) and rove_selective_phase (against a double oracle, in pieces with
 * conv_state, gate and gain semantics), and bad input for every argument with outputs left
 * untouched. Links the public librove.so only. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "selective_oracle.h"
#include "testutil.h"

#define SENTINEL (-777.25)
#define SENTINEL_F (-555.5f)

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
static int fsame(const float *a, const float *b, int64_t n) {
  return memcmp(a, b, sizeof(float) * (size_t)n) == 0;
}
static int dall(const double *x, int64_t n, double v) {
  for (int64_t i = 0; i < n; i++)
    if (x[i] != v) return 0;
  return 1;
}
static int fall(const float *x, int64_t n, float v) {
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

/* ---- phase ---------------------------------------------------------------------------- */

enum { PH = 3, PD = 42, PP = 10 }; /* heads, in_dim (not a multiple of 4), pairs */

typedef struct {
  float w[PH * PP * PD], gain[PH * PP], conv_w[PH * PP * 4], conv_b[PH * PP];
  float gate_w[PH * PD], gate_b[PH];
  rove_selective_phase_weights p;
} phase_net;

static void net_init(phase_net *n, uint64_t seed) {
  rove_rng rng;
  rove_rng_seed(&rng, seed);
  rove_rng_fill(&rng, n->w, PH * PP * PD, -1.0f, 1.0f);
  rove_rng_fill(&rng, n->gain, PH * PP, 0.5f, 2.0f);
  rove_rng_fill(&rng, n->conv_w, PH * PP * 4, -1.0f, 1.0f);
  rove_rng_fill(&rng, n->conv_b, PH * PP, -0.5f, 0.5f);
  rove_rng_fill(&rng, n->gate_w, PH * PD, -2.0f, 2.0f);
  rove_rng_fill(&rng, n->gate_b, PH, -1.0f, 1.0f);
  n->p = (rove_selective_phase_weights){PH, PD, PP, n->w, n->gain, n->conv_w, n->conv_b,
                                        n->gate_w, n->gate_b};
}

/* x rows at stride xs (>= PH * PD), filled with random values in the heads' part. */
static float *make_x(int32_t B, int32_t T, int64_t xs, uint64_t seed) {
  rove_rng rng;
  rove_rng_seed(&rng, seed);
  float *x = falloc((int64_t)B * T * xs);
  rove_rng_fill(&rng, x, (int64_t)B * T * xs, -3.0f, 3.0f);
  return x;
}

static void expect_close_to_oracle(const rove_selective_phase_weights *w, int32_t B, int32_t T,
                                   const float *x, int64_t xs, const float *st_in,
                                   const float *phi) {
  const int64_t n = (int64_t)B * T * w->n_heads * w->n_pairs;
  double *o = dalloc(n);
  assert_int_equal(rove_oracle_selective_phase(w, B, T, x, xs, st_in, o), 0);
  const double err = rove_max_rel_err_fd(phi, o, n);
  if (err > 1e-5) print_message("phase: relative error %.3g\n", err);
  assert_true(err <= 1e-5);
  free(o);
}

static void test_phase_vs_oracle(void **state) {
  (void)state;
  enum { B = 2, T = 17 };
  const int64_t xs = PH * PD + 5, n = B * T * PH * PP, ns = B * PH * PP * 3;
  phase_net net;
  net_init(&net, 1);
  float *x = make_x(B, T, xs, 2), *phi = falloc(n), *st = falloc(ns), *st0 = falloc(ns);
  rove_rng rng;
  rove_rng_seed(&rng, 3);
  rove_rng_fill(&rng, st0, ns, -1.0f, 1.0f);
  memcpy(st, st0, sizeof(float) * (size_t)ns);
  assert_int_equal(rove_selective_phase(&net.p, B, T, x, xs, st, phi), ROVE_OK);
  expect_close_to_oracle(&net.p, B, T, x, xs, st0, phi);
  assert_int_equal(rove_selective_phase(&net.p, B, T, x, xs, NULL, phi), ROVE_OK);
  expect_close_to_oracle(&net.p, B, T, x, xs, NULL, phi);
  free(x), free(phi), free(st), free(st0);
}

/* The new state holds the last three z: feeding tokens in pieces == one call, bit for bit;
 * a fresh sequence (NULL state) == a zero state. */
static void test_phase_pieces(void **state) {
  (void)state;
  enum { B = 2, T = 23 };
  static const int32_t cuts[] = {1, 2, 7, 8};
  const int64_t xs = PH * PD, row = PH * PP, n = B * T * row, ns = B * row * 3;
  phase_net net;
  net_init(&net, 7);
  float *x = make_x(B, T, xs, 8), *p1 = falloc(n), *p2 = falloc(n), *s1 = falloc(ns);
  float *s2 = falloc(ns);
  ffill(s1, ns, 0.0f);
  ffill(s2, ns, 0.0f);
  assert_int_equal(rove_selective_phase(&net.p, B, T, x, 0, s1, p1), ROVE_OK);
  assert_int_equal(rove_selective_phase(&net.p, B, T, x, 0, NULL, p2), ROVE_OK);
  assert_true(fsame(p1, p2, n));
  for (int32_t ci = 0, t0 = 0; ci <= 4; ci++) {
    const int32_t t1 = ci < 4 ? cuts[ci] : T, len = t1 - t0;
    float *xc = falloc((int64_t)B * len * xs), *pc = falloc((int64_t)B * len * row);
    for (int32_t b = 0; b < B; b++)
      memcpy(xc + (int64_t)b * len * xs, x + ((int64_t)b * T + t0) * xs,
             sizeof(float) * (size_t)(len * xs));
    assert_int_equal(rove_selective_phase(&net.p, B, len, xc, 0, s2, pc), ROVE_OK);
    for (int32_t b = 0; b < B; b++)
      memcpy(p2 + ((int64_t)b * T + t0) * row, pc + (int64_t)b * len * row,
             sizeof(float) * (size_t)(len * row));
    free(xc), free(pc);
    t0 = t1;
  }
  assert_true(fsame(p1, p2, n));
  assert_true(fsame(s1, s2, ns));
  free(x), free(p1), free(p2), free(s1), free(s2);
}

/* Both gate pointers NULL: factor 1. gate_b alone (0): sigmoid(0) = 1/2. gain NULL: 1. */
static void test_phase_gate_and_gain(void **state) {
  (void)state;
  enum { B = 1, T = 6 };
  const int64_t n = B * T * PH * PP;
  phase_net net;
  net_init(&net, 21);
  float *x = make_x(B, T, PH * PD, 22), *a = falloc(n), *b = falloc(n);
  net.p.gate_w = NULL, net.p.gate_b = NULL;
  assert_int_equal(rove_selective_phase(&net.p, B, T, x, 0, NULL, a), ROVE_OK);
  expect_close_to_oracle(&net.p, B, T, x, 0, NULL, a);
  const float zero_b[PH] = {0.0f, 0.0f, 0.0f};
  net.p.gate_b = zero_b;
  assert_int_equal(rove_selective_phase(&net.p, B, T, x, 0, NULL, b), ROVE_OK);
  for (int64_t i = 0; i < n; i++) assert_true(b[i] == a[i] * 0.5f);
  net.p.gate_w = net.gate_w, net.p.gate_b = NULL; /* gate_w alone: gate_b = 0 */
  assert_int_equal(rove_selective_phase(&net.p, B, T, x, 0, NULL, b), ROVE_OK);
  expect_close_to_oracle(&net.p, B, T, x, 0, NULL, b);
  net.p.gate_b = net.gate_b;
  ffill(net.gain, PH * PP, 1.0f);
  assert_int_equal(rove_selective_phase(&net.p, B, T, x, 0, NULL, a), ROVE_OK);
  net.p.gain = NULL;
  assert_int_equal(rove_selective_phase(&net.p, B, T, x, 0, NULL, b), ROVE_OK);
  assert_true(fsame(a, b, n));
  free(x), free(a), free(b);
}

/* A zero weight row gives z = 0 and a zero input u = 0 (no NaN): phi = silu(conv_b) * gate. */
static void test_phase_zero_rows(void **state) {
  (void)state;
  phase_net net;
  net_init(&net, 31);
  ffill(net.w, PP * PD, 0.0f); /* every row of head 0 */
  float x[PH * PD], phi[PH * PP];
  rove_rng rng;
  rove_rng_seed(&rng, 32);
  rove_rng_fill(&rng, x, PH * PD, -1.0f, 1.0f);
  ffill(x + PD, PD, 0.0f); /* head 1's input */
  net.p.conv_b = NULL;
  assert_int_equal(rove_selective_phase(&net.p, 1, 1, x, 0, NULL, phi), ROVE_OK);
  assert_true(fall(phi, PP, 0.0f));
  assert_true(fall(phi + PP, PP, 0.0f));
  net.p.conv_b = net.conv_b;
  assert_int_equal(rove_selective_phase(&net.p, 1, 1, x, 0, NULL, phi), ROVE_OK);
  for (int k = 0; k < PP; k++) { /* head 1: u = 0, so the gate is sigmoid(gate_b) */
    const double y = net.conv_b[PP + k], g = 1.0 / (1.0 + exp(-(double)net.gate_b[1]));
    assert_true(fabs(phi[PP + k] - y / (1.0 + exp(-y)) * g) <= 1e-7);
  }
  expect_close_to_oracle(&net.p, 1, 1, x, 0, NULL, phi);
}

/* ---- phase: bad input ------------------------------------------------------------------ */

static void expect_phase_fail(const rove_selective_phase_weights *w, int32_t B, int32_t T,
                              const float *x, int64_t xs, float *st, float *phi,
                              rove_status want, const float *st_buf, const float *phi_buf) {
  assert_int_equal(rove_selective_phase(w, B, T, x, xs, st, phi), want);
  assert_true(fall(phi_buf, 2 * PH * PP, SENTINEL_F));
  assert_true(fall(st_buf, PH * PP * 3, SENTINEL_F));
}

static void test_phase_bad_input(void **state) {
  (void)state;
  phase_net net;
  net_init(&net, 41);
  float x[2 * PH * PD + 8], phi[2 * PH * PP], st[PH * PP * 3];
  ffill(x, 2 * PH * PD + 8, 0.5f);
  ffill(phi, 2 * PH * PP, SENTINEL_F);
  ffill(st, PH * PP * 3, SENTINEL_F);
  const rove_status inv = ROVE_ERR_INVALID_ARGUMENT, ovf = ROVE_ERR_SIZE_OVERFLOW;
  expect_phase_fail(NULL, 1, 2, x, 0, st, phi, inv, st, phi);
  expect_phase_fail(&net.p, 1, 2, NULL, 0, st, phi, inv, st, phi);
  expect_phase_fail(&net.p, 1, 2, x, 0, st, NULL, inv, st, phi);
  rove_selective_phase_weights w = net.p;
  w.w = NULL;
  expect_phase_fail(&w, 1, 2, x, 0, st, phi, inv, st, phi);
  w = net.p, w.conv_w = NULL;
  expect_phase_fail(&w, 1, 2, x, 0, st, phi, inv, st, phi);
  static const int32_t bad[] = {0, -1, INT32_MIN};
  for (int i = 0; i < 3; i++) {
    expect_phase_fail(&net.p, bad[i], 2, x, 0, st, phi, inv, st, phi);
    expect_phase_fail(&net.p, 1, bad[i], x, 0, st, phi, inv, st, phi);
    w = net.p, w.n_heads = bad[i];
    expect_phase_fail(&w, 1, 2, x, 0, st, phi, inv, st, phi);
    w = net.p, w.in_dim = bad[i];
    expect_phase_fail(&w, 1, 2, x, 0, st, phi, inv, st, phi);
    w = net.p, w.n_pairs = bad[i];
    expect_phase_fail(&w, 1, 2, x, 0, st, phi, inv, st, phi);
  }
  expect_phase_fail(&net.p, 1, 2, x, -1, st, phi, inv, st, phi);
  expect_phase_fail(&net.p, 1, 2, x, PH * PD - 1, st, phi, inv, st, phi);
  expect_phase_fail(&net.p, 1, 2, x, 1, st, phi, inv, st, phi);
  /* sizes past int64 (elements or bytes) */
  expect_phase_fail(&net.p, INT32_MAX, INT32_MAX, x, INT64_MAX / 4, st, phi, ovf, st, phi);
  expect_phase_fail(&net.p, INT32_MAX, INT32_MAX, x, 0, st, phi, ovf, st, phi);
  w = net.p, w.n_heads = INT32_MAX, w.in_dim = INT32_MAX;
  expect_phase_fail(&w, INT32_MAX, 4, x, 0, st, phi, ovf, st, phi);
  w = net.p, w.n_heads = INT32_MAX, w.n_pairs = INT32_MAX, w.in_dim = 3;
  expect_phase_fail(&w, 1, 1, x, 0, st, phi, ovf, st, phi);
  /* outputs overlapping the input or each other */
  expect_phase_fail(&net.p, 1, 2, x, 0, st, x + 3, inv, st, phi);
  expect_phase_fail(&net.p, 1, 2, x, 0, x + 1, phi, inv, st, phi);
  expect_phase_fail(&net.p, 1, 2, x, 0, phi + 1, phi, inv, st, phi);
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
      cmocka_unit_test(test_phase_vs_oracle),
      cmocka_unit_test(test_phase_pieces),
      cmocka_unit_test(test_phase_gate_and_gain),
      cmocka_unit_test(test_phase_zero_rows),
      cmocka_unit_test(test_phase_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
