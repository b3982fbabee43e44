/* SPDX-License-Identifier: MIT */
/* rove_rope_config's field table (include/rove.h): every field a scaling does not read
 * must keep its default, every field it reads takes a valid non-default value; placement
 * is validated; the bounds on m (<= 1000) and on w_k (w_k * 2^31 finite) hold at their
 * edges, where attention stays finite; a plan keeps its own copy of both LongRoPE factor
 * sets and rove_plan_config gives a config that recreates the same plan; LongRoPE's m
 * reaches attention. Links the public librove.so only. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define HD 64 /* head_dim of every config here; r = 64, 32 pairs */
#define NP (HD / 2)
#define SENT (-31.5)

/* ---- the table ------------------------------------------------------------------------ */

enum field {
  F_FACTOR, F_L0, F_BETA_FAST, F_BETA_SLOW, F_TRUNCATE, F_MSCALE_PAIR, F_ATTN, F_LOW, F_HIGH,
  F_FREQ, F_LONG, F_MAXPOS, N_FIELDS
};
static const char *const k_field_names[N_FIELDS] = {
    "factor", "original_max_position", "beta_fast", "beta_slow", "truncate",
    "mscale+mscale_all_dim", "attention_factor", "low_freq_factor", "high_freq_factor",
    "freq_factors", "long_freq_factors", "max_position"};
#define N_SCALINGS 6
static const char *const k_scaling_names[N_SCALINGS] = {"NONE", "LINEAR", "NTK", "YARN",
                                                        "LLAMA3", "LONGROPE"};
/* rove.h's table, transcribed: 1 = the scaling reads the field. */
static const int k_reads[N_SCALINGS][N_FIELDS] = {
    /*           fac L0 bf bs tr ms at lo hi ff lf mp */
    /* NONE */   {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0},
    /* LINEAR */ {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0},
    /* NTK */    {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0},
    /* YARN */   {1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0},
    /* LLAMA3 */ {1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0},
    /* LONGROPE */ {1, 1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1},
};

static double g_short[NP], g_long[NP], g_other[NP];

static void fill_sets(void) {
  for (int k = 0; k < NP; k++) {
    g_short[k] = 1.0 + 0.01 * k;
    g_long[k] = 1.0 + 0.5 * k;
    g_other[k] = 2.0 - 0.01 * k;
  }
}

/* A valid config of each scaling, every field it does not need at its default. */
static rove_rope_config base_config(rove_scaling sc) {
  rove_rope_config c;
  rove_rope_config_init(&c);
  c.scaling = sc;
  if (sc != ROVE_SCALING_NONE) c.factor = 4.0;
  if (sc == ROVE_SCALING_YARN || sc == ROVE_SCALING_LLAMA3 || sc == ROVE_SCALING_LONGROPE)
    c.original_max_position = 4096;
  if (sc == ROVE_SCALING_LONGROPE) c.freq_factors = g_short;
  return c;
}

/* A valid non-default value of field f (as a scaling that reads it would accept). */
static void set_field(rove_rope_config *c, enum field f) {
  switch (f) {
    case F_FACTOR: c->factor = c->factor == 2.0 ? 3.0 : 2.0; break;
    case F_L0: c->original_max_position = c->original_max_position == 2048 ? 1024 : 2048; break;
    case F_BETA_FAST: c->beta_fast = 16.0; break;
    case F_BETA_SLOW: c->beta_slow = 2.0; break;
    case F_TRUNCATE: c->truncate = 0; break;
    case F_MSCALE_PAIR: c->mscale = 1.0, c->mscale_all_dim = 0.5; break;
    case F_ATTN: c->attention_factor = 1.5; break;
    case F_LOW: c->low_freq_factor = 2.0; break;
    case F_HIGH: c->high_freq_factor = 8.0; break;
    case F_FREQ: c->freq_factors = c->freq_factors ? g_other : g_short; break;
    case F_LONG: c->long_freq_factors = g_long; break;
    case F_MAXPOS: /* LONGROPE: beyond L0, so the long set is required */
      c->max_position = 100000;
      if (!c->long_freq_factors) c->long_freq_factors = g_long;
      break;
    default: break;
  }
}

/* rove_rope_inv_freq and rove_plan_create both give `want`; on failure neither output is
 * written. */
static void check_both(const rove_rope_config *rc, rove_status want, const char *what) {
  double w[NP + 1], m = SENT;
  for (int k = 0; k <= NP; k++) w[k] = SENT;
  rove_status st = rove_rope_inv_freq(rc, HD, w, &m);
  if (st != want)
    fail_msg("rove_rope_inv_freq(%s): %s, want %s", what, rove_status_string(st),
             rove_status_string(want));
  if (want != ROVE_OK) {
    for (int k = 0; k <= NP; k++)
      if (w[k] != SENT) fail_msg("rove_rope_inv_freq(%s) wrote inv_freq on failure", what);
    if (m != SENT) fail_msg("rove_rope_inv_freq(%s) wrote m on failure", what);
  }
  rove_attention_config c;
  rove_attention_config_init(&c, 2, 1, HD);
  c.rope = *rc;
  c.n_threads = 1;
  rove_plan *const untouched = (rove_plan *)(uintptr_t)0x5EED;
  rove_plan *p = untouched;
  st = rove_plan_create(&c, &p);
  if (st != want) {
    if (st == ROVE_OK) rove_plan_destroy(p);
    fail_msg("rove_plan_create(%s): %s, want %s", what, rove_status_string(st),
             rove_status_string(want));
  }
  if (want == ROVE_OK)
    rove_plan_destroy(p);
  else if (p != untouched)
    fail_msg("rove_plan_create(%s) wrote *out on failure", what);
}

static void test_field_table(void **state) {
  (void)state;
  fill_sets();
  char what[160];
  for (int s = 0; s < N_SCALINGS; s++) {
    rove_rope_config c = base_config((rove_scaling)s);
    snprintf(what, sizeof what, "%s base", k_scaling_names[s]);
    check_both(&c, ROVE_OK, what);
    for (int f = 0; f < N_FIELDS; f++) {
      c = base_config((rove_scaling)s);
      set_field(&c, (enum field)f);
      snprintf(what, sizeof what, "%s with %s set (%s)", k_scaling_names[s], k_field_names[f],
               k_reads[s][f] ? "read: accepted" : "not read: refused");
      check_both(&c, k_reads[s][f] ? ROVE_OK : ROVE_ERR_INVALID_ARGUMENT, what);
    }
  }
}

/* The unread-field check compares with the defaults exactly: NaN, -inf and the members of
 * a pair one at a time are refused as well. */
static void test_unread_fields_edge_values(void **state) {
  (void)state;
  fill_sets();
  char what[160];
  for (int s = 0; s < N_SCALINGS; s++) {
    const rove_scaling sc = (rove_scaling)s;
    /* Refused whether the scaling reads the field (invalid value) or not (not the
     * default), except a lone high_freq_factor, which LLAMA3 reads (1 and 6 differ). */
    const struct {
      const char *name;
      int refused;
    } cases[] = {
        {"beta_fast NaN", 1}, {"beta_slow -inf", 1}, {"truncate 2", 1},
        {"mscale alone", 1}, {"mscale_all_dim alone", 1},
        {"attention_factor NaN", 1}, {"attention_factor -1", 1},
        {"low_freq_factor NaN", 1}, {"high_freq_factor 6", sc != ROVE_SCALING_LLAMA3},
        {"max_position -1", 1}, {"original_max_position -1", 1},
        {"factor NaN", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      rove_rope_config c = base_config(sc);
      switch (i) {
        case 0: c.beta_fast = NAN; break;
        case 1: c.beta_slow = -INFINITY; break;
        case 2: c.truncate = 2; break;
        case 3: c.mscale = 1.0; break;
        case 4: c.mscale_all_dim = 1.0; break;
        case 5: c.attention_factor = NAN; break;
        case 6: c.attention_factor = -1.0; break;
        case 7: c.low_freq_factor = NAN; break;
        case 8: c.high_freq_factor = 6.0; break;
        case 9: c.max_position = -1; break;
        case 10: c.original_max_position = -1; break;
        case 11: c.factor = NAN; break;
        default: break;
      }
      snprintf(what, sizeof what, "%s with %s", k_scaling_names[s], cases[i].name);
      check_both(&c, cases[i].refused ? ROVE_ERR_INVALID_ARGUMENT : ROVE_OK, what);
    }
  }
}

static void test_placement(void **state) {
  (void)state;
  rove_rope_config c;
  const int bad[] = {-1, 2, 99, INT32_MIN, INT32_MAX};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rove_rope_config_init(&c);
    c.placement = (rove_rotary_placement)bad[i];
    char what[64];
    snprintf(what, sizeof what, "placement %d", bad[i]);
    check_both(&c, ROVE_ERR_INVALID_ARGUMENT, what);
  }
  rove_rope_config_init(&c);
  c.placement = ROVE_ROTARY_LAST;
  check_both(&c, ROVE_OK, "placement LAST");
  c.rotary_dim = 16;
  check_both(&c, ROVE_OK, "placement LAST, r 16");
  /* Placement does not change the frequencies. */
  double w_first[NP], w_last[NP];
  c.placement = ROVE_ROTARY_FIRST;
  assert_int_equal(rove_rope_inv_freq(&c, HD, w_first, NULL), ROVE_OK);
  c.placement = ROVE_ROTARY_LAST;
  assert_int_equal(rove_rope_inv_freq(&c, HD, w_last, NULL), ROVE_OK);
  assert_memory_equal(w_first, w_last, 8 * sizeof(double));
}

/* ---- bounds --------------------------------------------------------------------------- */

static void test_m_bounds(void **state) {
  (void)state;
  fill_sets();
  const rove_scaling with_m[] = {ROVE_SCALING_YARN, ROVE_SCALING_LONGROPE};
  for (int i = 0; i < 2; i++) {
    rove_rope_config c = base_config(with_m[i]);
    double w[NP], m = 0.0;
    c.attention_factor = 1000.0; /* the bound is inclusive */
    assert_int_equal(rove_rope_inv_freq(&c, HD, w, &m), ROVE_OK);
    assert_true(m == 1000.0);
    c.attention_factor = DBL_MIN; /* any positive value below it */
    assert_int_equal(rove_rope_inv_freq(&c, HD, w, &m), ROVE_OK);
    assert_true(m == DBL_MIN);
    const double bad[] = {nextafter(1000.0, INFINITY), 1e20, 1e39, DBL_MAX, INFINITY, NAN,
                          -DBL_MIN, -1.0};
    for (size_t j = 0; j < sizeof bad / sizeof bad[0]; j++) {
      c.attention_factor = bad[j];
      char what[96];
      snprintf(what, sizeof what, "%s attention_factor %g", k_scaling_names[with_m[i]], bad[j]);
      check_both(&c, ROVE_ERR_INVALID_ARGUMENT, what);
    }
  }
  /* Derived m: YaRN's mscale ratio can exceed 1000 or be inf / inf; LongRoPE's is inf for
   * L0 = 1. */
  rove_rope_config c = base_config(ROVE_SCALING_YARN);
  c.factor = 40.0;
  c.mscale = 1e5;
  c.mscale_all_dim = 1e-3; /* m = 36878 */
  check_both(&c, ROVE_ERR_INVALID_ARGUMENT, "yarn mscale ratio > 1000");
  c.mscale = 2.6e3; /* m = (0.1 * 2.6e3 * ln 40 + 1) / 1.000369 = 959.8: accepted */
  check_both(&c, ROVE_OK, "yarn mscale ratio 959");
  c.factor = 1e300;
  c.mscale = c.mscale_all_dim = 1e308; /* 0.1 * 1e308 * 690.8 = inf, inf / inf */
  check_both(&c, ROVE_ERR_INVALID_ARGUMENT, "yarn mscale inf / inf");
  c.mscale = c.mscale_all_dim = 1e300; /* both finite: m = 1 */
  double w[NP], m = 0.0;
  assert_int_equal(rove_rope_inv_freq(&c, HD, w, &m), ROVE_OK);
  assert_true(fabs(m - 1.0) < 1e-15);
  c = base_config(ROVE_SCALING_LONGROPE);
  c.original_max_position = 1;
  check_both(&c, ROVE_ERR_INVALID_ARGUMENT, "longrope L0 1 (ln L0 = 0)");
}

static void test_w_bounds(void **state) {
  (void)state;
  /* w_0 = 1 / f_0: 1 / 1e-298 = 1e298, times 2^31 = 2.1e307, finite: accepted;
   * 1e-299 gives 2.1e308 > DBL_MAX and 1e-300 (issue 13) more: refused. */
  double f[NP];
  for (int k = 0; k < NP; k++) f[k] = 1.0;
  rove_rope_config c;
  rove_rope_config_init(&c);
  c.freq_factors = f;
  f[0] = 1e-298;
  check_both(&c, ROVE_OK, "freq_factors 1e-298");
  f[0] = 1e-299;
  check_both(&c, ROVE_ERR_INVALID_ARGUMENT, "freq_factors 1e-299");
  f[0] = 1e-300;
  check_both(&c, ROVE_ERR_INVALID_ARGUMENT, "freq_factors 1e-300");
  f[0] = DBL_MIN;
  check_both(&c, ROVE_ERR_INVALID_ARGUMENT, "freq_factors DBL_MIN");
  /* The same bound through LINEAR's 1/s and LongRoPE's chosen set. */
  rove_rope_config_init(&c);
  c.scaling = ROVE_SCALING_LINEAR;
  c.factor = 1e-298;
  check_both(&c, ROVE_OK, "linear 1e-298");
  c.factor = 1e-300;
  check_both(&c, ROVE_ERR_INVALID_ARGUMENT, "linear 1e-300");
  fill_sets();
  c = base_config(ROVE_SCALING_LONGROPE);
  double lng[NP];
  memcpy(lng, g_long, sizeof lng);
  lng[0] = 1e-300;
  c.long_freq_factors = lng;
  c.max_position = 4097;
  check_both(&c, ROVE_ERR_INVALID_ARGUMENT, "longrope long set 1e-300, chosen");
  c.max_position = 4096; /* the short set serves: the long one is valid (finite, > 0) */
  check_both(&c, ROVE_OK, "longrope long set 1e-300, not chosen");
}

/* Attention at the edges of what is accepted stays finite: m = 1000 (logits scaled by
 * 1e6) and w_0 = 1e298 with positions INT32_MIN / INT32_MAX. */
static void run_finite(const rove_rope_config *rc, const char *what) {
  enum { H = 2, L = 5, W = H * HD };
  rove_attention_config c;
  rove_attention_config_init(&c, H, H, HD);
  c.rope = *rc;
  c.n_threads = 1;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  float q[L * W], k[L * W], v[L * W], out[L * W], lse[H * L];
  rove_rng g;
  rove_rng_seed(&g, 13);
  rove_rng_fill(&g, q, L * W, -1, 1);
  rove_rng_fill(&g, k, L * W, -1, 1);
  rove_rng_fill(&g, v, L * W, -1, 1);
  const int32_t pos[L] = {INT32_MIN, -1, 0, INT32_MAX - 1, INT32_MAX};
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = 1;
  a.q_len = a.kv_len = L;
  a.q = q, a.k = k, a.v = v, a.out = out, a.lse = lse;
  a.q_pos = pos, a.kv_pos = pos;
  assert_int_equal(rove_attention_forward(p, &a), ROVE_OK);
  for (int i = 0; i < L * W; i++)
    if (!isfinite(out[i])) fail_msg("%s: out[%d] = %g", what, i, out[i]);
  for (int i = 0; i < H * L; i++)
    if (!isfinite(lse[i])) fail_msg("%s: lse[%d] = %g", what, i, lse[i]);
  rove_plan_destroy(p);
}

static void test_bounds_attention_finite(void **state) {
  (void)state;
  fill_sets();
  rove_rope_config c = base_config(ROVE_SCALING_YARN);
  c.attention_factor = 1000.0;
  run_finite(&c, "yarn m = 1000");
  c = base_config(ROVE_SCALING_LONGROPE);
  c.attention_factor = 1000.0;
  run_finite(&c, "longrope m = 1000");
  double f[NP];
  for (int k = 0; k < NP; k++) f[k] = 1.0;
  f[0] = 1e-298;
  rove_rope_config_init(&c);
  c.freq_factors = f;
  run_finite(&c, "w_0 = 1e298");
}

/* ---- the plan's copy of the factor sets --------------------------------------------- */

enum { PH = 2, PL = 6, PW = PH * HD };

static void forward(const rove_plan *p, const float *q, const float *k, const float *v,
                    float *out) {
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = 1;
  a.q_len = a.kv_len = PL;
  a.q = q, a.k = k, a.v = v, a.out = out;
  /* positions beyond L0 (4096), as max_position says */
  static const int32_t pos[PL] = {9000, 9001, 9003, 9010, 9100, 9999};
  a.q_pos = pos, a.kv_pos = pos;
  assert_int_equal(rove_attention_forward(p, &a), ROVE_OK);
}

static void test_plan_copies_factor_sets(void **state) {
  (void)state;
  fill_sets();
  double shrt[NP], lng[NP];
  memcpy(shrt, g_short, sizeof shrt);
  memcpy(lng, g_long, sizeof lng);
  rove_attention_config c;
  rove_attention_config_init(&c, PH, PH, HD);
  c.n_threads = 1;
  c.rope = base_config(ROVE_SCALING_LONGROPE);
  c.rope.freq_factors = shrt;
  c.rope.long_freq_factors = lng;
  c.rope.max_position = 10000;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  float q[PL * PW], k[PL * PW], v[PL * PW], out1[PL * PW], out2[PL * PW], out3[PL * PW];
  rove_rng g;
  rove_rng_seed(&g, 29);
  rove_rng_fill(&g, q, PL * PW, -1, 1);
  rove_rng_fill(&g, k, PL * PW, -1, 1);
  rove_rng_fill(&g, v, PL * PW, -1, 1);
  forward(p, q, k, v, out1);
  /* The plan's config points at the plan's own copies, equal to the user's sets. */
  rove_attention_config back;
  assert_int_equal(rove_plan_config(p, &back), ROVE_OK);
  assert_non_null(back.rope.freq_factors);
  assert_non_null(back.rope.long_freq_factors);
  assert_true(back.rope.freq_factors != shrt && back.rope.long_freq_factors != lng);
  assert_memory_equal(back.rope.freq_factors, g_short, sizeof shrt);
  assert_memory_equal(back.rope.long_freq_factors, g_long, sizeof lng);
  assert_int_equal(back.rope.max_position, 10000);
  assert_int_equal(back.rope.scaling, ROVE_SCALING_LONGROPE);
  /* The user's arrays may change (or go away) after creation: the plan does not see it. */
  for (int i = 0; i < NP; i++) shrt[i] = lng[i] = 1e6;
  forward(p, q, k, v, out2);
  assert_memory_equal(out1, out2, sizeof out1);
  /* The returned config recreates the same plan: same config, same output bit for bit. */
  rove_plan *p2 = NULL;
  assert_int_equal(rove_plan_create(&back, &p2), ROVE_OK);
  rove_attention_config back2;
  assert_int_equal(rove_plan_config(p2, &back2), ROVE_OK);
  assert_memory_equal(back2.rope.freq_factors, g_short, sizeof shrt);
  assert_memory_equal(back2.rope.long_freq_factors, g_long, sizeof lng);
  forward(p2, q, k, v, out3);
  assert_memory_equal(out1, out3, sizeof out1);
  double w1[NP], w2[NP], m1, m2;
  assert_int_equal(rove_rope_inv_freq(&back.rope, HD, w1, &m1), ROVE_OK);
  assert_int_equal(rove_rope_inv_freq(&back2.rope, HD, w2, &m2), ROVE_OK);
  assert_memory_equal(w1, w2, sizeof w1);
  assert_true(m1 == m2);
  rove_plan_destroy(p2);
  rove_plan_destroy(p);
  /* Only a short set: no long copy; only freq_factors on another scaling likewise. */
  memcpy(shrt, g_short, sizeof shrt);
  c.rope.long_freq_factors = NULL;
  c.rope.max_position = 0;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  assert_int_equal(rove_plan_config(p, &back), ROVE_OK);
  assert_null(back.rope.long_freq_factors);
  assert_memory_equal(back.rope.freq_factors, g_short, sizeof shrt);
  rove_plan_destroy(p);
  c.rope = base_config(ROVE_SCALING_YARN);
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  assert_int_equal(rove_plan_config(p, &back), ROVE_OK);
  assert_null(back.rope.freq_factors);
  assert_null(back.rope.long_freq_factors);
  rove_plan_destroy(p);
}

/* LongRoPE's m reaches attention (it was silently dropped before 0.2): with r = head_dim
 * and RoPE rotation, a LONGROPE plan equals a NONE plan with the chosen set as
 * freq_factors and the logit scale times m^2 (m multiplies every dim of q and k). The
 * long set is chosen (max_position > L0), so the short set must not matter. */
static void test_longrope_m_reaches_attention(void **state) {
  (void)state;
  fill_sets();
  rove_attention_config a, b;
  rove_attention_config_init(&a, PH, PH, HD);
  a.n_threads = 1;
  a.rotate = ROVE_ROTATE_ROPE;
  a.rope = base_config(ROVE_SCALING_LONGROPE);
  a.rope.factor = 32.0;
  a.rope.long_freq_factors = g_long;
  a.rope.max_position = 10000;
  double w[NP], m = 0.0;
  assert_int_equal(rove_rope_inv_freq(&a.rope, HD, w, &m), ROVE_OK);
  const double want_m = sqrt(1.0 + log(32.0) / log(4096.0));
  assert_true(fabs(m - want_m) <= 1e-15 * want_m);
  b = a;
  rove_rope_config_init(&b.rope);
  b.rope.freq_factors = g_long;
  b.scale = (float)(m * m / sqrt((double)HD));
  float q[PL * PW], k[PL * PW], v[PL * PW], oa[PL * PW], ob[PL * PW], on[PL * PW];
  rove_rng g;
  rove_rng_seed(&g, 31);
  rove_rng_fill(&g, q, PL * PW, -2, 2);
  rove_rng_fill(&g, k, PL * PW, -2, 2);
  rove_rng_fill(&g, v, PL * PW, -1, 1);
  rove_plan *pa = NULL, *pb = NULL, *pn = NULL;
  assert_int_equal(rove_plan_create(&a, &pa), ROVE_OK);
  assert_int_equal(rove_plan_create(&b, &pb), ROVE_OK);
  forward(pa, q, k, v, oa);
  forward(pb, q, k, v, ob);
  const double err = rove_max_rel_err_ff(oa, ob, PL * PW);
  if (!(err < 2e-5)) fail_msg("LONGROPE vs NONE with scale m^2: rel err %g", err);
  /* ... and m matters: without it (scale 1/sqrt(d)) the outputs differ clearly. */
  b.scale = 0.0f;
  assert_int_equal(rove_plan_create(&b, &pn), ROVE_OK);
  forward(pn, q, k, v, on);
  const double diff = rove_max_rel_err_ff(oa, on, PL * PW);
  if (!(diff > 1e-2)) fail_msg("m = %g changed the output by only %g", m, diff);
  rove_plan_destroy(pa);
  rove_plan_destroy(pb);
  rove_plan_destroy(pn);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_field_table),
      cmocka_unit_test(test_unread_fields_edge_values),
      cmocka_unit_test(test_placement),
      cmocka_unit_test(test_m_bounds),
      cmocka_unit_test(test_w_bounds),
      cmocka_unit_test(test_bounds_attention_finite),
      cmocka_unit_test(test_plan_copies_factor_sets),
      cmocka_unit_test(test_longrope_m_reaches_attention),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
