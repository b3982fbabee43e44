/* SPDX-License-Identifier: MIT */
/* The KV cache (rotated K/V in the global frame): equivalences with plain attention,
 * context shift, truncate, and bad input. Links the public librove.so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rove_oracle.h"
#include "testutil.h"

typedef struct {
  int B, T, H, Hkv, d;
  uint32_t rotate;
  int yarn;
} shape;

typedef struct {
  rove_plan *p;
  float *q, *k, *v; /* [B][T][heads][d] */
} seq;

/* Rotary placement LAST for the plans made while this is > 0: this many rotated dims at
 * the end of each head (INTERLEAVED pairing, DeepSeek style). 0: FIRST, r = head_dim. */
static int g_last_rdim;

static void make_seq(seq *s, const shape *sh, uint64_t seed) {
  rove_attention_config c;
  rove_attention_config_init(&c, sh->H, sh->Hkv, sh->d);
  c.rotate = sh->rotate;
  if (g_last_rdim > 0) {
    c.rope.placement = ROVE_ROTARY_LAST;
    c.rope.rotary_dim = g_last_rdim;
    c.rope.pairing = ROVE_PAIRING_INTERLEAVED;
  }
  if (sh->yarn) {
    c.rope.scaling = ROVE_SCALING_YARN;
    c.rope.factor = 4.0;
    c.rope.original_max_position = 64;
  }
  assert_int_equal(rove_plan_create(&c, &s->p), ROVE_OK);
  rove_rng rng;
  rove_rng_seed(&rng, seed);
  const int64_t nq = (int64_t)sh->B * sh->T * sh->H * sh->d, nk = (int64_t)sh->B * sh->T * sh->Hkv * sh->d;
  s->q = malloc(sizeof(float) * nq);
  s->k = malloc(sizeof(float) * nk);
  s->v = malloc(sizeof(float) * nk);
  assert_true(s->q && s->k && s->v);
  rove_rng_fill(&rng, s->q, nq, -1.5f, 1.5f);
  rove_rng_fill(&rng, s->k, nk, -1.5f, 1.5f);
  rove_rng_fill(&rng, s->v, nk, -1.0f, 1.0f);
}

static void free_seq(seq *s) {
  rove_plan_destroy(s->p);
  free(s->q), free(s->k), free(s->v);
}

/* Full causal attention over the whole sequence (positions 0..T-1). */
static float *full_forward(const seq *s, const shape *sh) {
  float *out = malloc(sizeof(float) * (size_t)sh->B * sh->T * sh->H * sh->d);
  rove_attention_args a = {.batch = sh->B, .q_len = sh->T, .kv_len = sh->T, .q = s->q, .k = s->k,
                           .v = s->v, .out = out};
  assert_int_equal(rove_attention_forward(s->p, &a), ROVE_OK);
  return out;
}

/* Rows [t0, t0+n) of every batch of a [B][T][w] tensor, as a dense [B][n][w] copy. */
static float *rows(const float *x, const shape *sh, int w, int t0, int n) {
  float *r = malloc(sizeof(float) * (size_t)sh->B * n * w);
  for (int b = 0; b < sh->B; b++)
    memcpy(r + (size_t)b * n * w, x + ((size_t)b * sh->T + t0) * w, sizeof(float) * (size_t)n * w);
  return r;
}

/* Prefill P tokens, then decode the rest in steps of `step`; compare every new row with
 * the full forward. */
static void prefill_then_decode(const shape *sh, int P, int step) {
  seq s;
  make_seq(&s, sh, 7 + (uint64_t)P);
  float *ref = full_forward(&s, sh);
  rove_kv_cache *c = NULL;
  assert_int_equal(rove_kv_cache_create(s.p, sh->B, sh->T, &c), ROVE_OK);
  const int wq = sh->H * sh->d, wk = sh->Hkv * sh->d;
  double worst = 0;
  for (int t0 = 0; t0 < sh->T;) {
    const int n = t0 == 0 ? P : (sh->T - t0 < step ? sh->T - t0 : step);
    float *k = rows(s.k, sh, wk, t0, n), *v = rows(s.v, sh, wk, t0, n), *q = rows(s.q, sh, wq, t0, n);
    float *out = malloc(sizeof(float) * (size_t)sh->B * n * wq), *want = rows(ref, sh, wq, t0, n);
    assert_int_equal(rove_kv_cache_append(c, n, k, 0, v, 0, NULL), ROVE_OK);
    rove_attention_args a = {.batch = sh->B, .q_len = n, .q = q, .out = out};
    assert_int_equal(rove_kv_cache_attention(c, &a), ROVE_OK);
    double e = rove_max_rel_err_ff(out, want, (int64_t)sh->B * n * wq);
    worst = e > worst ? e : worst;
    free(k), free(v), free(q), free(out), free(want);
    t0 += n;
  }
  print_message("  B=%d T=%d H=%d/%d d=%d rot=0x%x yarn=%d prefill %d step %d: max rel err %.3g\n",
                sh->B, sh->T, sh->H, sh->Hkv, sh->d, sh->rotate, sh->yarn, P, step, worst);
  assert_true(worst <= 1e-5);
  assert_int_equal(rove_kv_cache_length(c), sh->T);
  rove_kv_cache_destroy(c);
  free(ref);
  free_seq(&s);
}

static void test_decode_equals_prefill(void **state) {
  (void)state;
  const shape shapes[] = {{1, 300, 4, 4, 64, ROVE_ROTATE_ROVE, 0}, {2, 200, 8, 2, 32, ROVE_ROTATE_ROVE, 1},
                          {1, 257, 6, 1, 80, ROVE_ROTATE_ROVE, 0}, {1, 300, 4, 4, 64, ROVE_ROTATE_ROPE, 0},
                          {2, 150, 4, 2, 128, ROVE_ROTATE_ROPE, 1}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    prefill_then_decode(&shapes[i], 100, 1);
    prefill_then_decode(&shapes[i], 37, 5);
  }
}

/* Append at positions 0..T-1, shift [0, T) by D: same outputs as appending at D..D+T-1. */
static void test_shift_equals_shifted_positions(void **state) {
  (void)state;
  const shape sh = {2, 120, 4, 2, 64, ROVE_ROTATE_ROVE, 1};
  const int32_t deltas[] = {1000, -777, 1 << 20};
  seq s;
  make_seq(&s, &sh, 11);
  const int wq = sh.H * sh.d, n = sh.B * sh.T;
  int32_t *pos = malloc(sizeof(int32_t) * n), *qpos = malloc(sizeof(int32_t) * n);
  float *o1 = malloc(sizeof(float) * n * wq), *o2 = malloc(sizeof(float) * n * wq);
  for (size_t di = 0; di < sizeof deltas / sizeof deltas[0]; di++) {
    const int32_t D = deltas[di];
    for (int i = 0; i < n; i++) pos[i] = D + i % sh.T;
    rove_kv_cache *a = NULL, *b = NULL;
    assert_int_equal(rove_kv_cache_create(s.p, sh.B, sh.T + 5, &a), ROVE_OK);
    assert_int_equal(rove_kv_cache_create(s.p, sh.B, sh.T, &b), ROVE_OK);
    assert_int_equal(rove_kv_cache_append(a, sh.T, s.k, 0, s.v, 0, NULL), ROVE_OK);
    assert_int_equal(rove_kv_cache_shift(a, 0, sh.T, D), ROVE_OK);
    assert_int_equal(rove_kv_cache_append(b, sh.T, s.k, 0, s.v, 0, pos), ROVE_OK);
    assert_int_equal(rove_kv_cache_positions(a, qpos), ROVE_OK);
    assert_memory_equal(qpos, pos, sizeof(int32_t) * (size_t)n);
    rove_attention_args x = {.batch = sh.B, .q_len = sh.T, .q = s.q, .out = o1};
    assert_int_equal(rove_kv_cache_attention(a, &x), ROVE_OK);
    x.out = o2;
    assert_int_equal(rove_kv_cache_attention(b, &x), ROVE_OK);
    double e = rove_max_rel_err_ff(o1, o2, (int64_t)n * wq);
    print_message("  shift by %d: max rel err %.3g\n", D, e);
    assert_true(e <= 1e-5);
    rove_kv_cache_destroy(a);
    rove_kv_cache_destroy(b);
  }
  free(pos), free(qpos), free(o1), free(o2);
  free_seq(&s);
}

/* A RoPE-mode cache with explicit query positions equals the oracle's RoPE attention. */
static void test_rope_cache_equals_oracle(void **state) {
  (void)state;
  const shape sh = {1, 90, 4, 2, 64, ROVE_ROTATE_ROPE, 0};
  seq s;
  make_seq(&s, &sh, 5);
  rove_kv_cache *c = NULL;
  assert_int_equal(rove_kv_cache_create(s.p, 1, 100, &c), ROVE_OK);
  assert_int_equal(rove_kv_cache_append(c, 60, s.k, 0, s.v, 0, NULL), ROVE_OK);
  assert_int_equal(rove_kv_cache_append(c, 30, s.k + 60 * 2 * 64, 0, s.v + 60 * 2 * 64, 0, NULL), ROVE_OK);
  int32_t qpos[3] = {89, 10, -5}; /* all keys, the first 11, none (output 0, LSE -inf) */
  float out[3 * 4 * 64], lse[4 * 3];
  rove_attention_args a = {.batch = 1, .q_len = 3, .q = s.q, .out = out, .q_pos = qpos, .lse = lse};
  assert_int_equal(rove_kv_cache_attention(c, &a), ROVE_OK);
  rove_attention_config cfg;
  assert_int_equal(rove_plan_config(s.p, &cfg), ROVE_OK);
  double inv_freq[32], m, ref[3 * 4 * 64], rlse[12];
  assert_int_equal(rove_rope_inv_freq(&cfg.rope, 64, inv_freq, &m), ROVE_OK);
  rove_attention_args o = {.batch = 1, .q_len = 3, .kv_len = 90, .q = s.q, .k = s.k, .v = s.v, .q_pos = qpos};
  assert_int_equal(rove_oracle_attention(&cfg, inv_freq, m, &o, ref, rlse), 0);
  assert_true(rove_max_rel_err_fd(out, ref, 3 * 4 * 64) <= 2e-5);
  for (int i = 0; i < 12; i++)
    assert_true(isinf(rlse[i]) ? (isinf(lse[i]) && lse[i] < 0) : fabs(lse[i] - rlse[i]) <= 2e-5 * fmax(1, fabs(rlse[i])));
  rove_kv_cache_destroy(c);
  free_seq(&s);
}

/* The same equivalences with the rotated dims last (16 or 32 of each head): decode through
 * the cache equals the full forward, shift equals appending at shifted positions, and the
 * cache (RoPE and RoVE, YaRN) equals the oracle. */
static void test_placement_last(void **state) {
  (void)state;
  const shape shapes[] = {{1, 130, 4, 4, 64, ROVE_ROTATE_ROVE, 1}, {2, 90, 8, 2, 96, ROVE_ROTATE_ROPE, 0}};
  g_last_rdim = 16;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    prefill_then_decode(&shapes[i], 50, 1);
    prefill_then_decode(&shapes[i], 37, 5);
  }
  g_last_rdim = 32;
  test_shift_equals_shifted_positions(state);
  for (int v = 0; v < 2; v++) { /* the cache against the oracle */
    const shape sh = {1, 90, 4, 2, 64, v ? ROVE_ROTATE_ROVE : ROVE_ROTATE_ROPE, v};
    seq s;
    make_seq(&s, &sh, 15 + (uint64_t)v);
    rove_kv_cache *c = NULL;
    assert_int_equal(rove_kv_cache_create(s.p, 1, 100, &c), ROVE_OK);
    assert_int_equal(rove_kv_cache_append(c, 90, s.k, 0, s.v, 0, NULL), ROVE_OK);
    assert_int_equal(rove_kv_cache_shift(c, 0, 90, 500), ROVE_OK); /* positions 500..589 */
    int32_t qpos[3] = {589, 510, 400}, kpos[90];
    for (int j = 0; j < 90; j++) kpos[j] = 500 + j;
    float out[3 * 4 * 64], lse[4 * 3];
    rove_attention_args a = {.batch = 1, .q_len = 3, .q = s.q, .out = out, .q_pos = qpos, .lse = lse};
    assert_int_equal(rove_kv_cache_attention(c, &a), ROVE_OK);
    rove_attention_config cfg;
    assert_int_equal(rove_plan_config(s.p, &cfg), ROVE_OK);
    assert_int_equal(cfg.rope.placement, ROVE_ROTARY_LAST);
    double inv_freq[32], m, ref[3 * 4 * 64], rlse[12];
    assert_int_equal(rove_rope_inv_freq(&cfg.rope, 64, inv_freq, &m), ROVE_OK);
    rove_attention_args o = {.batch = 1, .q_len = 3, .kv_len = 90, .q = s.q, .k = s.k, .v = s.v,
                             .q_pos = qpos, .kv_pos = kpos};
    assert_int_equal(rove_oracle_attention(&cfg, inv_freq, m, &o, ref, rlse), 0);
    const double e = rove_max_rel_err_fd(out, ref, 3 * 4 * 64);
    print_message("  LAST r=32 cache (shifted) vs oracle, rot=0x%x yarn=%d: max rel err %.3g\n",
                  sh.rotate, sh.yarn, e);
    assert_true(e <= 2e-5);
    for (int i = 0; i < 12; i++)
      assert_true(isinf(rlse[i]) ? (isinf(lse[i]) && lse[i] < 0)
                                 : fabs(lse[i] - rlse[i]) <= 2e-5 * fmax(1, fabs(rlse[i])));
    rove_kv_cache_destroy(c);
    free_seq(&s);
  }
  { /* explicit angles (Selective RoPE): append_angles + q_angles against the oracle */
    const shape sh = {1, 70, 4, 2, 64, ROVE_ROTATE_ROVE, 0};
    seq s;
    make_seq(&s, &sh, 17);
    rove_rng g;
    rove_rng_seed(&g, 18);
    static double ang[70 * 2 * 16], qang[2 * 2 * 16];
    for (int i = 0; i < 70 * 2 * 16; i++) ang[i] = 100.0 * (rove_rng_uniform(&g, 0, 1) - 0.5);
    memcpy(qang, ang + 68 * 2 * 16, sizeof qang); /* the last two tokens query */
    rove_kv_cache *c = NULL;
    assert_int_equal(rove_kv_cache_create(s.p, 1, 70, &c), ROVE_OK);
    assert_int_equal(rove_kv_cache_append_angles(c, 40, s.k, 0, s.v, 0, NULL, ang), ROVE_OK);
    assert_int_equal(rove_kv_cache_append_angles(c, 30, s.k + 40 * 2 * 64, 0, s.v + 40 * 2 * 64, 0,
                                                 NULL, ang + 40 * 2 * 16),
                     ROVE_OK);
    float out[2 * 4 * 64];
    const float *q = s.q + 68 * 4 * 64;
    rove_attention_args a = {.batch = 1, .q_len = 2, .q = q, .out = out, .q_angles = qang};
    assert_int_equal(rove_kv_cache_attention(c, &a), ROVE_OK);
    rove_attention_config cfg;
    assert_int_equal(rove_plan_config(s.p, &cfg), ROVE_OK);
    double inv_freq[32], m, ref[2 * 4 * 64];
    assert_int_equal(rove_rope_inv_freq(&cfg.rope, 64, inv_freq, &m), ROVE_OK);
    rove_attention_args o = {.batch = 1, .q_len = 2, .kv_len = 70, .q = q, .k = s.k, .v = s.v,
                             .q_angles = qang, .kv_angles = ang};
    assert_int_equal(rove_oracle_attention(&cfg, inv_freq, m, &o, ref, NULL), 0);
    const double e = rove_max_rel_err_fd(out, ref, 2 * 4 * 64);
    print_message("  LAST r=32 cache with explicit angles vs oracle: max rel err %.3g\n", e);
    assert_true(e <= 2e-5);
    rove_kv_cache_destroy(c);
    free_seq(&s);
  }
  g_last_rdim = 0;
}

static void test_truncate_and_reset(void **state) {
  (void)state;
  const shape sh = {1, 64, 2, 2, 32, ROVE_ROTATE_ROVE, 0};
  seq s;
  make_seq(&s, &sh, 3);
  rove_kv_cache *c = NULL;
  assert_int_equal(rove_kv_cache_create(s.p, 1, 64, &c), ROVE_OK);
  assert_int_equal(rove_kv_cache_capacity(c), 64);
  assert_ptr_equal(rove_kv_cache_plan(c), s.p); /* borrowed, the very pointer */
  assert_int_equal(rove_kv_cache_append(c, 40, s.k, 0, s.v, 0, NULL), ROVE_OK);
  assert_int_equal(rove_kv_cache_truncate(c, 30), ROVE_OK); /* drop a rejected draft */
  assert_int_equal(rove_kv_cache_append(c, 34, s.k + 30 * 64, 0, s.v + 30 * 64, 0, NULL), ROVE_OK);
  int32_t pos[64];
  assert_int_equal(rove_kv_cache_positions(c, pos), ROVE_OK);
  for (int i = 0; i < 64; i++) assert_int_equal(pos[i], i);
  float out1[64 * 64], out2[64 * 64];
  rove_attention_args a = {.batch = 1, .q_len = 64, .q = s.q, .out = out1};
  assert_int_equal(rove_kv_cache_attention(c, &a), ROVE_OK);
  assert_int_equal(rove_kv_cache_reset(c), ROVE_OK);
  assert_int_equal(rove_kv_cache_length(c), 0);
  assert_int_equal(rove_kv_cache_append(c, 64, s.k, 0, s.v, 0, NULL), ROVE_OK);
  a.out = out2;
  assert_int_equal(rove_kv_cache_attention(c, &a), ROVE_OK);
  assert_memory_equal(out1, out2, sizeof out1);
  rove_kv_cache_destroy(c);
  free_seq(&s);
}

static void test_bad_input(void **state) {
  (void)state;
  const shape sh = {2, 8, 2, 1, 16, ROVE_ROTATE_ROVE, 0};
  seq s;
  make_seq(&s, &sh, 1);
  rove_kv_cache *c = (rove_kv_cache *)(uintptr_t)0x1, *c0 = c;
  assert_int_equal(rove_kv_cache_create(NULL, 1, 8, &c), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_create(s.p, 0, 8, &c), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_create(s.p, 1, -1, &c), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_create(s.p, 1, 8, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_create(s.p, INT32_MAX, INT32_MAX, &c), ROVE_ERR_SIZE_OVERFLOW);
  assert_ptr_equal(c, c0);
  assert_int_equal(rove_kv_cache_create(s.p, 2, 8, &c), ROVE_OK);
  float out[2 * 8 * 32];
  rove_attention_args a = {.batch = 2, .q_len = 1, .q = s.q, .out = out};
  assert_int_equal(rove_kv_cache_attention(c, &a), ROVE_ERR_INVALID_ARGUMENT); /* empty */
  assert_int_equal(rove_kv_cache_append(c, 6, s.k, 0, s.v, 0, NULL), ROVE_OK);
  assert_int_equal(rove_kv_cache_append(c, 3, s.k, 0, s.v, 0, NULL), ROVE_ERR_SIZE_OVERFLOW);
  assert_int_equal(rove_kv_cache_length(c), 6);
  assert_int_equal(rove_kv_cache_append(c, 0, s.k, 0, s.v, 0, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_append(c, 1, NULL, 0, s.v, 0, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_append(c, 1, s.k, 8, s.v, 0, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_append(c, 1, s.k, INT64_MAX / 2, s.v, 0, NULL), ROVE_ERR_SIZE_OVERFLOW);
  a.q_len = 7; /* more queries than cached tokens, default positions */
  assert_int_equal(rove_kv_cache_attention(c, &a), ROVE_ERR_INVALID_ARGUMENT);
  a.q_len = 1;
  a.batch = 1;
  assert_int_equal(rove_kv_cache_attention(c, &a), ROVE_ERR_INVALID_ARGUMENT); /* batch */
  a.batch = 2;
  a.kv_len = 6;
  assert_int_equal(rove_kv_cache_attention(c, &a), ROVE_ERR_INVALID_ARGUMENT); /* kv given */
  a.kv_len = 0;
  a.k = s.k;
  assert_int_equal(rove_kv_cache_attention(c, &a), ROVE_ERR_INVALID_ARGUMENT);
  a.k = NULL;
  a.k_stride = 64; /* K/V strides belong to the cache: refused, never ignored */
  assert_int_equal(rove_kv_cache_attention(c, &a), ROVE_ERR_INVALID_ARGUMENT);
  a.k_stride = 0;
  a.v_stride = -7;
  assert_int_equal(rove_kv_cache_attention(c, &a), ROVE_ERR_INVALID_ARGUMENT);
  a.v_stride = 0;
  assert_int_equal(rove_kv_cache_attention(c, &a), ROVE_OK);
  assert_int_equal(rove_kv_cache_shift(c, 0, 7, 1), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_shift(c, 3, 2, 1), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_shift(c, 0, 6, INT32_MAX), ROVE_ERR_SIZE_OVERFLOW);
  int32_t pos[12];
  assert_int_equal(rove_kv_cache_positions(c, pos), ROVE_OK);
  for (int i = 0; i < 12; i++) assert_int_equal(pos[i], i % 6); /* unchanged */
  assert_int_equal(rove_kv_cache_shift(c, 2, 4, -10), ROVE_OK);
  assert_int_equal(rove_kv_cache_positions(c, pos), ROVE_OK);
  assert_int_equal(pos[2], -8);
  assert_int_equal(pos[9], -7);
  assert_int_equal(rove_kv_cache_truncate(c, 7), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_truncate(c, -1), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_truncate(NULL, 0), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_positions(c, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_length(NULL), 0);
  assert_int_equal(rove_kv_cache_capacity(NULL), 0);
  assert_null(rove_kv_cache_plan(NULL));
  assert_int_equal(rove_kv_cache_reset(NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_shift(NULL, 0, 0, 1), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_positions(NULL, pos), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_append(NULL, 1, s.k, 0, s.v, 0, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_attention(NULL, &a), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_attention(c, NULL), ROVE_ERR_INVALID_ARGUMENT);
  /* Default positions past INT32_MAX. */
  rove_kv_cache *e = NULL;
  int32_t big[2] = {INT32_MAX, INT32_MAX};
  assert_int_equal(rove_kv_cache_create(s.p, 2, 4, &e), ROVE_OK);
  assert_int_equal(rove_kv_cache_append(e, 1, s.k, 0, s.v, 0, big), ROVE_OK);
  assert_int_equal(rove_kv_cache_append(e, 1, s.k, 0, s.v, 0, NULL), ROVE_ERR_SIZE_OVERFLOW);
  assert_int_equal(rove_kv_cache_length(e), 1);
  rove_kv_cache_destroy(e);
  rove_kv_cache_destroy(c);
  rove_kv_cache_destroy(NULL);
  free_seq(&s);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode_equals_prefill),
      cmocka_unit_test(test_shift_equals_shifted_positions),
      cmocka_unit_test(test_rope_cache_equals_oracle),
      cmocka_unit_test(test_placement_last),
      cmocka_unit_test(test_truncate_and_reset),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
