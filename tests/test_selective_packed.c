/* SPDX-License-Identifier: MIT */
/* Selective RoPE over packed sequences (varlen): rove_selective_angles_packed, its
 * backward and rove_selective_phase_packed equal the batch-1 calls on each sequence alone,
 * bit for bit (angles, carries, d_phi, d_carry_in; phi and conv states, with a conv of
 * width 4, SiLU and a GLA gate, and with skip_conv), for sequences of lengths 0, 1, 2 and
 * longer than a block; d_temp equals the sum of the per-sequence d_temps to rounding; bad
 * cu_seqlens are refused with the outputs untouched. Links librove.so only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { H = 3, P = 4, HP = H * P, D = 8, DM = H * D, R = 5, NS = 6 };
static const int32_t LENS[NS] = {0, 70, 1, 2, 0, 133};

static void cu_of(int32_t *cu) {
  cu[0] = 0;
  for (int s = 0; s < NS; s++) cu[s + 1] = cu[s] + LENS[s];
}

static float *falloc(int64_t n) {
  float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
  assert_non_null(p);
  return p;
}
static double *dalloc(int64_t n) {
  double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
  assert_non_null(p);
  return p;
}

static void test_angles_packed(void **state) {
  (void)state;
  int32_t cu[NS + 1];
  cu_of(cu);
  const int64_t T = cu[NS], n = T * HP;
  rove_rng r;
  rove_rng_seed(&r, 11);
  float *phi = falloc(n), *dphi0 = falloc(n), *dphi1 = falloc(n);
  double *temp = dalloc(P), *c0 = dalloc(NS * HP), *dang = dalloc(n), *dco = dalloc(NS * HP);
  rove_rng_fill(&r, phi, n, -1, 1);
  for (int k = 0; k < P; k++) temp[k] = 0.5 + k;
  for (int64_t i = 0; i < NS * HP; i++) c0[i] = rove_rng_uniform(&r, -3, 3);
  for (int64_t i = 0; i < n; i++) dang[i] = rove_rng_uniform(&r, -1, 1);
  for (int64_t i = 0; i < NS * HP; i++) dco[i] = rove_rng_uniform(&r, -1, 1);
  double *a0 = dalloc(n), *a1 = dalloc(n), *co0 = dalloc(NS * HP), *co1 = dalloc(NS * HP);
  double *dci0 = dalloc(NS * HP), *dci1 = dalloc(NS * HP), *dt1 = dalloc(P);
  double dt0[P] = {0};
  for (int s = 0; s < NS; s++) { /* each sequence alone */
    const int64_t t0 = cu[s], L = LENS[s];
    if (L == 0) { /* a call needs tokens: the carry passes through, d_carry_in = d_carry_out */
      memcpy(co0 + s * HP, c0 + s * HP, sizeof(double) * HP);
      memcpy(dci0 + s * HP, dco + s * HP, sizeof(double) * HP);
      continue;
    }
    assert_int_equal(rove_selective_angles(1, (int32_t)L, H, P, phi + t0 * HP, temp, c0 + s * HP,
                                           co0 + s * HP, a0 + t0 * HP),
                     ROVE_OK);
    double dts[P];
    assert_int_equal(rove_selective_angles_backward(1, (int32_t)L, H, P, phi + t0 * HP, temp,
                                                    c0 + s * HP, dang + t0 * HP, dco + s * HP,
                                                    dphi0 + t0 * HP, dci0 + s * HP, dts),
                     ROVE_OK);
    for (int k = 0; k < P; k++) dt0[k] += dts[k];
  }
  assert_int_equal(rove_selective_angles_packed(NS, cu, H, P, phi, temp, c0, co1, a1), ROVE_OK);
  assert_memory_equal(a0, a1, sizeof(double) * (size_t)n);
  assert_memory_equal(co0, co1, sizeof(double) * NS * HP);
  assert_int_equal(rove_selective_angles_packed_backward(NS, cu, H, P, phi, temp, c0, dang, dco,
                                                         dphi1, dci1, dt1),
                   ROVE_OK);
  assert_memory_equal(dphi0, dphi1, sizeof(float) * (size_t)n);
  assert_memory_equal(dci0, dci1, sizeof(double) * NS * HP);
  for (int k = 0; k < P; k++) assert_true(fabs(dt0[k] - dt1[k]) <= 1e-12 * (1 + fabs(dt0[k])));
  /* carry_out may be carry_in (in place) */
  double *cin = dalloc(NS * HP);
  memcpy(cin, c0, sizeof(double) * NS * HP);
  assert_int_equal(rove_selective_angles_packed(NS, cu, H, P, phi, temp, cin, cin, a1), ROVE_OK);
  assert_memory_equal(co0, cin, sizeof(double) * NS * HP);
  /* bad cu_seqlens: refused, angles and carries untouched */
  int32_t bad[NS + 1];
  for (int c = 0; c < 5; c++) {
    memcpy(bad, cu, sizeof bad);
    int32_t ns = NS;
    if (c == 0) bad[0] = 1;
    if (c == 1) bad[2] = bad[1] - 1;
    if (c == 2) ns = 0;
    if (c == 3) memset(bad, 0, sizeof bad); /* no tokens at all */
    const int32_t *cp = c == 4 ? NULL : bad;
    for (int64_t i = 0; i < n; i++) a1[i] = 7.0;
    for (int64_t i = 0; i < NS * HP; i++) co1[i] = 7.0;
    assert_int_equal(rove_selective_angles_packed(ns, cp, H, P, phi, temp, c0, co1, a1),
                     ROVE_ERR_INVALID_ARGUMENT);
    assert_int_equal(rove_selective_angles_packed_backward(ns, cp, H, P, phi, temp, c0, dang, dco,
                                                           dphi1, dci1, dt1),
                     ROVE_ERR_INVALID_ARGUMENT);
    for (int64_t i = 0; i < n; i++) assert_true(a1[i] == 7.0);
    for (int64_t i = 0; i < NS * HP; i++) assert_true(co1[i] == 7.0);
  }
  /* an output over cu_seqlens */
  assert_int_equal(rove_selective_angles_packed(NS, cu, H, P, phi, temp, c0, (double *)(void *)cu, a1),
                   ROVE_ERR_INVALID_ARGUMENT);
  free(phi), free(dphi0), free(dphi1), free(temp), free(c0), free(dang), free(dco), free(a0);
  free(a1), free(co0), free(co1), free(dci0), free(dci1), free(dt1), free(cin);
}

static void check_phase(int skip) {
  int32_t cu[NS + 1];
  cu_of(cu);
  const int64_t T = cu[NS];
  rove_rng r;
  rove_rng_seed(&r, 21 + (uint64_t)skip);
  float down[R * DM], up[HP * R], conv_w[HP * 4], gdown[R * DM], gw[HP * R], gb[HP];
  rove_rng_fill(&r, down, R * DM, -0.3f, 0.3f), rove_rng_fill(&r, up, HP * R, -0.3f, 0.3f);
  rove_rng_fill(&r, conv_w, HP * 4, -1, 1), rove_rng_fill(&r, gdown, R * DM, -0.3f, 0.3f);
  rove_rng_fill(&r, gw, HP * R, -0.3f, 0.3f), rove_rng_fill(&r, gb, HP, -1, 1);
  rove_selective_phase_weights w;
  rove_selective_phase_weights_init(&w, H, D, P);
  w.proj_rank = R, w.proj_down = down, w.proj_up = up;
  if (skip) {
    w.skip_conv = 1;
  } else {
    w.conv_w = conv_w, w.conv_act = ROVE_PHASE_ACT_SILU;
  }
  w.gate = ROVE_PHASE_GATE_GLA, w.gate_rank = R, w.gate_down = gdown, w.gate_w = gw,
  w.gate_b = gb;
  const int32_t S = rove_selective_phase_state_len(&w);
  const int64_t xs = DM + 3; /* a padded token stride */
  float *x = falloc(T * xs), *phi0 = falloc(T * HP), *phi1 = falloc(T * HP);
  float *st0 = falloc(NS * HP * S), *st1 = falloc(NS * HP * S), *sin0 = falloc(NS * HP * S);
  rove_rng_fill(&r, x, T * xs, -1, 1), rove_rng_fill(&r, sin0, NS * HP * S, -1, 1);
  memcpy(st0, sin0, sizeof(float) * (size_t)(NS * HP * S));
  memcpy(st1, sin0, sizeof(float) * (size_t)(NS * HP * S));
  for (int s = 0; s < NS; s++)
    if (LENS[s] > 0)
      assert_int_equal(rove_selective_phase(&w, 1, LENS[s], x + (int64_t)cu[s] * xs, xs,
                                            st0 + s * HP * S, phi0 + (int64_t)cu[s] * HP),
                       ROVE_OK);
  assert_int_equal(rove_selective_phase_packed(&w, NS, cu, x, xs, st1, phi1), ROVE_OK);
  assert_memory_equal(phi0, phi1, sizeof(float) * (size_t)(T * HP));
  assert_memory_equal(st0, st1, sizeof(float) * (size_t)(NS * HP * S));
  /* no state: every sequence fresh */
  for (int s = 0; s < NS; s++)
    if (LENS[s] > 0)
      assert_int_equal(rove_selective_phase(&w, 1, LENS[s], x + (int64_t)cu[s] * xs, xs, NULL,
                                            phi0 + (int64_t)cu[s] * HP),
                       ROVE_OK);
  assert_int_equal(rove_selective_phase_packed(&w, NS, cu, x, xs, NULL, phi1), ROVE_OK);
  assert_memory_equal(phi0, phi1, sizeof(float) * (size_t)(T * HP));
  /* bad cu_seqlens: refused, phi and the state untouched */
  int32_t bad[NS + 1];
  memcpy(bad, cu, sizeof bad);
  bad[3] = bad[2] - 1;
  rove_fill_bits(phi1, T * HP, 0x7fc0beefu), rove_fill_bits(st1, NS * HP * S, 0x7fc0beefu);
  assert_int_equal(rove_selective_phase_packed(&w, NS, bad, x, xs, st1, phi1),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_selective_phase_packed(&w, 0, cu, x, xs, st1, phi1),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_selective_phase_packed(&w, NS, cu, x, xs, (float *)(void *)cu, phi1),
                   ROVE_ERR_INVALID_ARGUMENT);
  for (int64_t i = 0; i < T * HP; i++) assert_true(rove_has_bits(phi1 + i, 0x7fc0beefu));
  for (int64_t i = 0; i < NS * HP * S; i++) assert_true(rove_has_bits(st1 + i, 0x7fc0beefu));
  free(x), free(phi0), free(phi1), free(st0), free(st1), free(sin0);
}

static void test_phase_packed(void **state) {
  (void)state;
  check_phase(0);
  check_phase(1);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_angles_packed),
      cmocka_unit_test(test_phase_packed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
