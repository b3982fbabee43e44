/* SPDX-License-Identifier: MIT */
/* rove_selective_phase through the public API: every option of the reference's phase
 * network (projection low-rank / per head, conv width, activation none / SiLU, skip_conv,
 * conv_b, exp(bias) after the activation, gates none / standard / low-rank / GLA) against
 * the double oracle written from the reference's equations; a hand-computed case that pins
 * where exp(bias) goes; a sequence in pieces (decode steps included) equal to one call bit
 * for bit, with a multi-threaded one call; the init defaults; and bad input for every
 * option and argument, with phi and conv_state left untouched. Links librove.so only. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "selective_oracle.h"
#include "testutil.h"

#define SENTINEL_F (-555.5f)

enum { H = 3, D = 10, P = 4, R = 5, RG = 3, WMAX = 6, HP = H * P, DM = H * D };

static float *falloc(int64_t n) {
  float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  assert_non_null(p);
  return p;
}
static int fall(const float *x, int64_t n, float v) {
  for (int64_t i = 0; i < n; i++)
    if (x[i] != v) return 0;
  return 1;
}

/* Every weight any option can use, random; opts() picks the ones an option set reads. */
typedef struct {
  float down[R * DM], up[HP * R], pw[HP * D], gain[H];
  float conv_w[HP * WMAX], conv_b[HP], exp_bias[HP];
  float gdown[RG * DM], gw_std[H * DM], gw_low[H * RG], gw_gla[HP * RG], gb[HP];
} weights;

static void weights_init(weights *n, uint64_t seed) {
  rove_rng rng;
  rove_rng_seed(&rng, seed);
  rove_rng_fill(&rng, n->down, R * DM, -1.0f, 1.0f);
  rove_rng_fill(&rng, n->up, HP * R, -1.0f, 1.0f);
  rove_rng_fill(&rng, n->pw, HP * D, -1.0f, 1.0f);
  rove_rng_fill(&rng, n->gain, H, 0.5f, 2.0f);
  rove_rng_fill(&rng, n->conv_w, HP * WMAX, -1.0f, 1.0f);
  rove_rng_fill(&rng, n->conv_b, HP, -0.5f, 0.5f);
  rove_rng_fill(&rng, n->exp_bias, HP, -1.0f, 1.0f);
  rove_rng_fill(&rng, n->gdown, RG * DM, -1.0f, 1.0f);
  rove_rng_fill(&rng, n->gw_std, H * DM, -2.0f, 2.0f);
  rove_rng_fill(&rng, n->gw_low, H * RG, -2.0f, 2.0f);
  rove_rng_fill(&rng, n->gw_gla, HP * RG, -2.0f, 2.0f);
  rove_rng_fill(&rng, n->gb, HP, -1.0f, 1.0f);
}

/* conv kinds: 0 width 4, 1 width 4 + SiLU, 2 width 1, 3 width 6 + conv_b + SiLU,
 * 4 skip_conv. */
enum { CONV_KINDS = 5 };

static rove_selective_phase_weights opts(const weights *n, rove_phase_projection proj,
                                         int use_gain, int conv, rove_phase_gate gate,
                                         int use_exp_bias, int gate_bias) {
  rove_selective_phase_weights w;
  rove_selective_phase_weights_init(&w, H, D, P);
  w.projection = proj;
  if (proj == ROVE_PHASE_PROJ_LOW_RANK) {
    w.proj_rank = R, w.proj_down = n->down, w.proj_up = n->up;
  } else {
    w.proj_w = n->pw, w.proj_gain = use_gain ? n->gain : NULL;
  }
  if (conv == 4) {
    w.skip_conv = 1;
  } else {
    static const int32_t width[] = {4, 4, 1, 6};
    w.conv_width = width[conv];
    w.conv_w = n->conv_w;
    w.conv_act = conv == 1 || conv == 3 ? ROVE_PHASE_ACT_SILU : ROVE_PHASE_ACT_NONE;
    w.conv_b = conv == 3 ? n->conv_b : NULL;
  }
  w.exp_bias = use_exp_bias ? n->exp_bias : NULL;
  w.gate = gate;
  if (gate == ROVE_PHASE_GATE_STANDARD) w.gate_w = n->gw_std;
  if (gate == ROVE_PHASE_GATE_LOW_RANK) w.gate_rank = RG, w.gate_down = n->gdown, w.gate_w = n->gw_low;
  if (gate == ROVE_PHASE_GATE_GLA) w.gate_rank = RG, w.gate_down = n->gdown, w.gate_w = n->gw_gla;
  if (gate != ROVE_PHASE_GATE_NONE && gate_bias) w.gate_b = n->gb;
  return w;
}

static float *make_x(int32_t B, int32_t T, int64_t xs, uint64_t seed) {
  rove_rng rng;
  rove_rng_seed(&rng, seed);
  float *x = falloc((int64_t)B * T * xs);
  rove_rng_fill(&rng, x, (int64_t)B * T * xs, -3.0f, 3.0f);
  return x;
}

static void expect_close(const rove_selective_phase_weights *w, int32_t B, int32_t T,
                         const float *x, int64_t xs, const float *st_in, const float *phi,
                         double tol) {
  const int64_t n = (int64_t)B * T * HP;
  double *o = malloc(sizeof(double) * (size_t)n);
  assert_non_null(o);
  assert_int_equal(rove_oracle_selective_phase(w, B, T, x, xs, st_in, o), 0);
  const double err = rove_max_rel_err_fd(phi, o, n);
  if (err > tol)
    print_message("phase: proj %d conv_width %d skip %d act %d gate %d exp_bias %d: err %.3g\n",
                  w->projection, w->conv_width, w->skip_conv, w->conv_act, w->gate,
                  w->exp_bias != NULL, err);
  assert_true(err <= tol);
  free(o);
}

static void test_init_defaults(void **state) {
  (void)state;
  rove_selective_phase_weights w;
  memset(&w, 0x5a, sizeof w);
  rove_selective_phase_weights_init(&w, 2, 8, 4);
  assert_int_equal(w.n_heads, 2), assert_int_equal(w.in_dim, 8), assert_int_equal(w.n_pairs, 4);
  assert_true(w.norm_eps == 1e-6f);
  assert_int_equal(w.projection, ROVE_PHASE_PROJ_LOW_RANK);
  assert_int_equal(w.proj_rank, 16), assert_int_equal(w.gate_rank, 16);
  assert_int_equal(w.conv_width, 4), assert_int_equal(w.skip_conv, 0);
  assert_int_equal(w.conv_act, ROVE_PHASE_ACT_NONE), assert_int_equal(w.gate, ROVE_PHASE_GATE_NONE);
  assert_null(w.proj_down), assert_null(w.proj_up), assert_null(w.proj_w);
  assert_null(w.proj_gain), assert_null(w.conv_w), assert_null(w.conv_b);
  assert_null(w.exp_bias), assert_null(w.gate_down), assert_null(w.gate_w), assert_null(w.gate_b);
  assert_int_equal(rove_selective_phase_state_len(&w), 3);
  w.conv_width = 1;
  assert_int_equal(rove_selective_phase_state_len(&w), 0);
  w.skip_conv = 1;
  assert_int_equal(rove_selective_phase_state_len(&w), 1);
  assert_int_equal(rove_selective_phase_state_len(NULL), -1);
  rove_selective_phase_weights_init(NULL, 1, 1, 1); /* no-op */
}

/* Every combination of projection, conv kind, gate and exp_bias against the oracle, from a
 * random conv state and from a fresh one, with a token stride. */
static void test_options_vs_oracle(void **state) {
  (void)state;
  enum { B = 2, T = 9 };
  const int64_t xs = DM + 3, n = B * T * HP, ns = B * HP * (WMAX - 1);
  weights net;
  weights_init(&net, 1);
  float *x = make_x(B, T, xs, 2), *phi = falloc(n), *st = falloc(ns), *st0 = falloc(ns);
  rove_rng rng;
  rove_rng_seed(&rng, 3);
  rove_rng_fill(&rng, st0, ns, -1.0f, 1.0f);
  int cases = 0;
  for (int proj = 0; proj < 2; proj++)
    for (int conv = 0; conv < CONV_KINDS; conv++)
      for (int gate = 0; gate < 4; gate++)
        for (int eb = 0; eb < 2; eb++) {
          const rove_selective_phase_weights w =
              opts(&net, (rove_phase_projection)proj, eb, conv, (rove_phase_gate)gate, eb, 1);
          const int64_t len = (int64_t)B * HP * rove_selective_phase_state_len(&w);
          memcpy(st, st0, sizeof(float) * (size_t)ns);
          assert_int_equal(rove_selective_phase(&w, B, T, x, xs, st, phi), ROVE_OK);
          expect_close(&w, B, T, x, xs, st0, phi, 2e-6);
          if (len < ns) /* past this option's state: untouched */
            assert_memory_equal(st + len, st0 + len, sizeof(float) * (size_t)(ns - len));
          assert_int_equal(rove_selective_phase(&w, B, T, x, xs, NULL, phi), ROVE_OK);
          expect_close(&w, B, T, x, xs, NULL, phi, 2e-6);
          cases++;
        }
  assert_int_equal(cases, 2 * CONV_KINDS * 4 * 2);
  free(x), free(phi), free(st), free(st0);
}

/* One token, per-head projection w = e_0, gain 2, conv width 1 with weight 0.5: y = u_0.
 * exp(bias) is added after the activation and the gate multiplies last:
 * phi = (silu(u_0) + exp(b)) * sigmoid(g), not silu(u_0 + b) (the old placement). */
static void test_exp_bias_after_activation(void **state) {
  (void)state;
  rove_selective_phase_weights w;
  rove_selective_phase_weights_init(&w, 1, 2, 1);
  const float pw[2] = {3.0f, 0.0f}, gain[1] = {2.0f}, cw[1] = {0.5f}, eb[1] = {0.25f};
  const float gw[2] = {0.0f, 1.0f}, gb[1] = {-0.5f}, x[2] = {3.0f, 4.0f};
  w.projection = ROVE_PHASE_PROJ_PER_HEAD, w.proj_w = pw, w.proj_gain = gain;
  w.conv_width = 1, w.conv_w = cw, w.conv_act = ROVE_PHASE_ACT_SILU, w.exp_bias = eb;
  w.gate = ROVE_PHASE_GATE_STANDARD, w.gate_w = gw, w.gate_b = gb;
  float phi = 0.0f;
  assert_int_equal(rove_selective_phase(&w, 1, 1, x, 0, NULL, &phi), ROVE_OK);
  const double nrm = sqrt(25.0 + (double)1e-6f), u0 = 3.0 / nrm, u1 = 4.0 / nrm;
  const double y = 2.0 * 0.5 * u0, g = 1.0 / (1.0 + exp(-(u1 - 0.5)));
  const double want = (y / (1.0 + exp(-y)) + exp(0.25)) * g;
  assert_true(fabs(phi - want) <= 2e-7 * fabs(want));
  const double inside = (y + 0.25) / (1.0 + exp(-(y + 0.25))) * g;
  assert_true(fabs(want - inside) > 0.1);
}

/* Pieces (decode steps of one token among them) with a carried conv state equal one call
 * bit for bit, and so does the final state; a fresh sequence equals a zero state. The one
 * call is large enough to run on every thread. */
static void test_pieces_equal_one_call(void **state) {
  (void)state;
  enum { B = 2, T = 1100, NCUT = 7 }; /* two blocks of 1024 tokens, on 2+ threads */
  static const int32_t cuts[NCUT] = {1, 2, 3, 9, 100, 101, 1030};
  const int64_t row = HP, n = B * T * row, ns = B * row * (WMAX - 1);
  weights net;
  weights_init(&net, 7);
  float *x = make_x(B, T, DM, 8), *p1 = falloc(n), *p2 = falloc(n), *s1 = falloc(ns);
  float *s2 = falloc(ns);
  static const int kinds[][3] = {{0, 0, 0}, {1, 1, 1}, {0, 2, 3}, {1, 3, 2}, {0, 4, 3}, {1, 4, 0}};
  for (size_t kc = 0; kc < sizeof kinds / sizeof kinds[0]; kc++) {
    const rove_selective_phase_weights w =
        opts(&net, (rove_phase_projection)kinds[kc][0], 1, kinds[kc][1],
             (rove_phase_gate)kinds[kc][2], (int)(kc & 1), 1);
    memset(s1, 0, sizeof(float) * (size_t)ns), memset(s2, 0, sizeof(float) * (size_t)ns);
    assert_int_equal(rove_selective_phase(&w, B, T, x, 0, s1, p1), ROVE_OK);
    assert_int_equal(rove_selective_phase(&w, B, T, x, 0, NULL, p2), ROVE_OK);
    assert_memory_equal(p1, p2, sizeof(float) * (size_t)n);
    for (int32_t ci = 0, t0 = 0; ci <= NCUT; ci++) {
      const int32_t t1 = ci < NCUT ? cuts[ci] : T, len = t1 - t0;
      float *xc = falloc((int64_t)B * len * DM), *pc = falloc((int64_t)B * len * row);
      for (int32_t b = 0; b < B; b++)
        memcpy(xc + (int64_t)b * len * DM, x + ((int64_t)b * T + t0) * DM,
               sizeof(float) * (size_t)(len * DM));
      assert_int_equal(rove_selective_phase(&w, B, len, xc, 0, s2, pc), ROVE_OK);
      for (int32_t b = 0; b < B; b++)
        memcpy(p2 + ((int64_t)b * T + t0) * row, pc + (int64_t)b * len * row,
               sizeof(float) * (size_t)(len * row));
      free(xc), free(pc);
      t0 = t1;
    }
    assert_memory_equal(p1, p2, sizeof(float) * (size_t)n);
    assert_memory_equal(s1, s2, sizeof(float) * (size_t)ns);
    expect_close(&w, B, T, x, 0, NULL, p1, 2e-6);
  }
  free(x), free(p1), free(p2), free(s1), free(s2);
}

/* A zero input gives u = 0 (no NaN: eps), a zero per-head row gives z = 0. */
static void test_zero_input_and_rows(void **state) {
  (void)state;
  weights net;
  weights_init(&net, 31);
  memset(net.pw, 0, sizeof(float) * P * D); /* every row of head 0 */
  float x[DM], phi[HP];
  rove_rng rng;
  rove_rng_seed(&rng, 32);
  rove_rng_fill(&rng, x, DM, -1.0f, 1.0f);
  memset(x + D, 0, sizeof(float) * D); /* head 1's input */
  rove_selective_phase_weights w =
      opts(&net, ROVE_PHASE_PROJ_PER_HEAD, 1, 0, ROVE_PHASE_GATE_NONE, 0, 0);
  assert_int_equal(rove_selective_phase(&w, 1, 1, x, 0, NULL, phi), ROVE_OK);
  assert_true(fall(phi, 2 * P, 0.0f)); /* head 0: zero rows; head 1: zero input */
  w = opts(&net, ROVE_PHASE_PROJ_LOW_RANK, 0, 0, ROVE_PHASE_GATE_NONE, 0, 0);
  memset(x, 0, sizeof x);
  assert_int_equal(rove_selective_phase(&w, 1, 1, x, 0, NULL, phi), ROVE_OK);
  assert_true(fall(phi, HP, 0.0f));
}

/* Inputs of norm ~1e-3: the eps of fla's l2_norm (u = x / sqrt(||x||^2 + eps)) changes u
 * by a third, so the oracle agreement shows norm_eps is applied as the reference does, and
 * a smaller norm_eps gives a different phi. */
static void test_small_input_norm_eps(void **state) {
  (void)state;
  enum { B = 1, T = 5 };
  const int64_t n = B * T * HP;
  weights net;
  weights_init(&net, 51);
  float *x = make_x(B, T, DM, 52), *a = falloc(n), *b = falloc(n);
  for (int64_t i = 0; i < B * T * DM; i++) x[i] *= 3e-4f; /* ||x_h|| about 1e-3 */
  rove_selective_phase_weights w =
      opts(&net, ROVE_PHASE_PROJ_LOW_RANK, 0, 1, ROVE_PHASE_GATE_STANDARD, 0, 1);
  assert_int_equal(rove_selective_phase(&w, B, T, x, 0, NULL, a), ROVE_OK);
  expect_close(&w, B, T, x, 0, NULL, a, 2e-6);
  w.norm_eps = 1e-12f;
  assert_int_equal(rove_selective_phase(&w, B, T, x, 0, NULL, b), ROVE_OK);
  expect_close(&w, B, T, x, 0, NULL, b, 2e-6);
  assert_true(rove_max_rel_err_ff(a, b, n) > 0.05);
  free(x), free(a), free(b);
}

/* ---- bad input -------------------------------------------------------------------------- */

static float g_phi[2 * HP], g_st[HP * (WMAX - 1)];

static void expect_fail(const rove_selective_phase_weights *w, int32_t B, int32_t T,
                        const float *x, int64_t xs, float *st, float *phi, rove_status want) {
  assert_int_equal(rove_selective_phase(w, B, T, x, xs, st, phi), want);
  assert_true(fall(g_phi, 2 * HP, SENTINEL_F));
  assert_true(fall(g_st, HP * (WMAX - 1), SENTINEL_F));
}

static void test_bad_options(void **state) {
  (void)state;
  weights net;
  weights_init(&net, 41);
  float x[2 * DM];
  for (int i = 0; i < 2 * DM; i++) x[i] = 0.5f;
  for (int i = 0; i < 2 * HP; i++) g_phi[i] = SENTINEL_F;
  for (int i = 0; i < HP * (WMAX - 1); i++) g_st[i] = SENTINEL_F;
  const rove_status inv = ROVE_ERR_INVALID_ARGUMENT;
  const rove_selective_phase_weights low =
      opts(&net, ROVE_PHASE_PROJ_LOW_RANK, 0, 0, ROVE_PHASE_GATE_NONE, 0, 0);
  const rove_selective_phase_weights head =
      opts(&net, ROVE_PHASE_PROJ_PER_HEAD, 1, 0, ROVE_PHASE_GATE_NONE, 0, 0);
  const rove_selective_phase_weights skip =
      opts(&net, ROVE_PHASE_PROJ_LOW_RANK, 0, 4, ROVE_PHASE_GATE_NONE, 0, 0);
  rove_selective_phase_weights w;
  /* shape and eps */
  static const int32_t bad[] = {0, -1, INT32_MIN};
  for (int i = 0; i < 3; i++) {
    w = low, w.n_heads = bad[i], expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
    w = low, w.in_dim = bad[i], expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
    w = low, w.n_pairs = bad[i], expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
    w = low, w.proj_rank = bad[i], expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  }
  static const float eps_bad[] = {0.0f, -1e-6f, NAN, INFINITY};
  for (int i = 0; i < 4; i++) w = low, w.norm_eps = eps_bad[i], expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  /* enums out of range */
  w = low, w.projection = (rove_phase_projection)2, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = low, w.conv_act = (rove_phase_activation)2, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = low, w.gate = (rove_phase_gate)4, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = low, w.gate = (rove_phase_gate)-1, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = low, w.skip_conv = 2, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = low, w.skip_conv = -1, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  /* projection: required weights, weights of the other projection, unread rank */
  w = low, w.proj_down = NULL, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = low, w.proj_up = NULL, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = low, w.proj_w = net.pw, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = low, w.proj_gain = net.gain, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = head, w.proj_w = NULL, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = head, w.proj_down = net.down, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = head, w.proj_up = net.up, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = head, w.proj_rank = R, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  /* conv: width bounds, required weight; skip_conv forbids conv weights and options */
  static const int32_t wbad[] = {0, -1, ROVE_PHASE_MAX_CONV_WIDTH + 1, INT32_MAX};
  for (int i = 0; i < 4; i++) w = low, w.conv_width = wbad[i], expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = low, w.conv_w = NULL, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = skip, w.conv_w = net.conv_w, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = skip, w.conv_b = net.conv_b, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = skip, w.conv_act = ROVE_PHASE_ACT_SILU, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = skip, w.conv_width = 2, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  /* gates: required weights, unread weights and ranks */
  w = low, w.gate_w = net.gw_std, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = low, w.gate_b = net.gb, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = low, w.gate_down = net.gdown, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = low, w.gate_rank = RG, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = low, w.gate = ROVE_PHASE_GATE_STANDARD, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = opts(&net, ROVE_PHASE_PROJ_LOW_RANK, 0, 0, ROVE_PHASE_GATE_STANDARD, 0, 1);
  w.gate_down = net.gdown, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  w = opts(&net, ROVE_PHASE_PROJ_LOW_RANK, 0, 0, ROVE_PHASE_GATE_STANDARD, 0, 1);
  w.gate_rank = RG, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  for (int g = ROVE_PHASE_GATE_LOW_RANK; g <= ROVE_PHASE_GATE_GLA; g++) {
    const rove_selective_phase_weights ok =
        opts(&net, ROVE_PHASE_PROJ_LOW_RANK, 0, 0, (rove_phase_gate)g, 0, 1);
    w = ok, w.gate_down = NULL, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
    w = ok, w.gate_w = NULL, expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
    for (int i = 0; i < 3; i++) w = ok, w.gate_rank = bad[i], expect_fail(&w, 1, 2, x, 0, g_st, g_phi, inv);
  }
}

static void test_bad_arguments(void **state) {
  (void)state;
  weights net;
  weights_init(&net, 42);
  float x[2 * DM + 8];
  for (int i = 0; i < 2 * DM + 8; i++) x[i] = 0.5f;
  for (int i = 0; i < 2 * HP; i++) g_phi[i] = SENTINEL_F;
  for (int i = 0; i < HP * (WMAX - 1); i++) g_st[i] = SENTINEL_F;
  const rove_status inv = ROVE_ERR_INVALID_ARGUMENT, ovf = ROVE_ERR_SIZE_OVERFLOW;
  const rove_selective_phase_weights low =
      opts(&net, ROVE_PHASE_PROJ_LOW_RANK, 0, 0, ROVE_PHASE_GATE_NONE, 0, 0);
  rove_selective_phase_weights w;
  expect_fail(NULL, 1, 2, x, 0, g_st, g_phi, inv);
  expect_fail(&low, 1, 2, NULL, 0, g_st, g_phi, inv);
  expect_fail(&low, 1, 2, x, 0, g_st, NULL, inv);
  static const int32_t bad[] = {0, -1, INT32_MIN};
  for (int i = 0; i < 3; i++) {
    expect_fail(&low, bad[i], 2, x, 0, g_st, g_phi, inv);
    expect_fail(&low, 1, bad[i], x, 0, g_st, g_phi, inv);
  }
  expect_fail(&low, 1, 2, x, -1, g_st, g_phi, inv);
  expect_fail(&low, 1, 2, x, DM - 1, g_st, g_phi, inv);
  expect_fail(&low, 1, 2, x, 1, g_st, g_phi, inv);
  /* sizes past int64 (elements or bytes) */
  expect_fail(&low, INT32_MAX, INT32_MAX, x, INT64_MAX / 4, g_st, g_phi, ovf);
  expect_fail(&low, INT32_MAX, INT32_MAX, x, 0, g_st, g_phi, ovf);
  w = low, w.n_heads = INT32_MAX, w.in_dim = INT32_MAX;
  expect_fail(&w, INT32_MAX, 4, x, 0, g_st, g_phi, ovf);
  w = low, w.n_heads = INT32_MAX, w.n_pairs = INT32_MAX, w.in_dim = 3;
  expect_fail(&w, 1, 1, x, 0, g_st, g_phi, ovf);
  w = low, w.proj_rank = INT32_MAX, w.n_heads = INT32_MAX / 2;
  expect_fail(&w, 1, 1, x, 0, g_st, g_phi, ovf);
  /* outputs overlapping the input or each other */
  expect_fail(&low, 1, 2, x, 0, g_st, x + 3, inv);
  expect_fail(&low, 1, 2, x, 0, x + 1, g_phi, inv);
  expect_fail(&low, 1, 2, x, 0, g_phi + 1, g_phi, inv);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_init_defaults),
      cmocka_unit_test(test_options_vs_oracle),
      cmocka_unit_test(test_exp_bias_after_activation),
      cmocka_unit_test(test_pieces_equal_one_call),
      cmocka_unit_test(test_zero_input_and_rows),
      cmocka_unit_test(test_small_input_norm_eps),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
