/* SPDX-License-Identifier: MIT */
/* Decode-shaped attention: one or a few query tiles against long key sequences, where the
 * driver streams the keys and splits them across tasks, merging the parts by their LSE
 * (src/attention_decode.c): through the row kernel when a GQA group's query rows fit one
 * call (group * q_len <= 16), else through the flash tile. Both through
 * rove_attention_forward (K/V rotated on the fly) and through a KV cache (K/V read in
 * place). Checked against the oracle, and bit for bit across thread counts. Links the
 * public librove.so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rove_oracle.h"
#include "testutil.h"

typedef struct {
  int H, Hkv, d, q_len, kv_len, causal, window, threads;
  uint32_t rotate;
  int explicit_pos; /* 1: shuffled key positions, queries at scattered positions */
  float softcap;
  int batch;        /* 0 = 1 */
  int cache;        /* 1: the keys go through a KV cache (capacity kv_len + 7) */
} dcase;

typedef struct {
  rove_attention_config cfg;
  rove_attention_args a;
  float *q, *k, *v, *out, *lse;
  int32_t *qpos, *kpos;
} dproblem;

static int batch_of(const dcase *c) { return c->batch ? c->batch : 1; }

/* Rotary placement LAST for the problems made while this is > 0: the last rotated dims of
 * each head, this many of them (capped at head_dim), with YaRN (m != 1) so that the scaled
 * dims are checked to be the rotated ones. 0: the defaults (FIRST, r = head_dim). */
static int g_last_rdim;

static void make_positions(dproblem *pr, const dcase *c, rove_rng *rng) {
  const int B = batch_of(c);
  pr->kpos = malloc(sizeof(int32_t) * (size_t)(B * c->kv_len));
  pr->qpos = malloc(sizeof(int32_t) * (size_t)(B * c->q_len));
  assert_true(pr->kpos && pr->qpos);
  for (int b = 0; b < B; b++) {
    int32_t *kp = pr->kpos + b * c->kv_len, *qp = pr->qpos + b * c->q_len;
    for (int j = 0; j < c->kv_len; j++) kp[j] = 1000 + 3 * j + b;
    for (int j = c->kv_len - 1; j > 0; j--) { /* shuffle */
      int r = (int)(rove_rng_u64(rng) % (uint64_t)(j + 1));
      int32_t t = kp[j];
      kp[j] = kp[r];
      kp[r] = t;
    }
    for (int i = 0; i < c->q_len; i++) qp[i] = 1000 + (int32_t)(rove_rng_u64(rng) % (uint64_t)(3 * c->kv_len));
    qp[0] = 0; /* sees no key when causal: output 0, LSE -inf */
  }
  pr->a.q_pos = pr->qpos;
  pr->a.kv_pos = pr->kpos;
}

static void make_problem(dproblem *pr, const dcase *c, uint64_t seed) {
  memset(pr, 0, sizeof *pr);
  rove_rng rng;
  rove_rng_seed(&rng, seed);
  rove_attention_config_init(&pr->cfg, c->H, c->Hkv, c->d);
  pr->cfg.rotate = c->rotate;
  pr->cfg.causal = c->causal;
  pr->cfg.window = c->window;
  pr->cfg.softcap = c->softcap;
  pr->cfg.n_threads = c->threads;
  if (g_last_rdim > 0) {
    pr->cfg.rope.placement = ROVE_ROTARY_LAST;
    pr->cfg.rope.rotary_dim = g_last_rdim < c->d ? g_last_rdim : c->d;
    pr->cfg.rope.pairing = (c->kv_len + c->q_len) % 2 ? ROVE_PAIRING_INTERLEAVED : ROVE_PAIRING_HALF;
    pr->cfg.rope.scaling = ROVE_SCALING_YARN;
    pr->cfg.rope.factor = 4.0;
    pr->cfg.rope.original_max_position = 1024;
  }
  const int64_t B = batch_of(c);
  const int64_t nq = B * c->q_len * c->H * c->d, nk = B * c->kv_len * c->Hkv * c->d;
  pr->q = malloc(sizeof(float) * nq);
  pr->k = malloc(sizeof(float) * nk);
  pr->v = malloc(sizeof(float) * nk);
  pr->out = malloc(sizeof(float) * nq);
  pr->lse = malloc(sizeof(float) * B * c->q_len * c->H);
  assert_true(pr->q && pr->k && pr->v && pr->out && pr->lse);
  rove_rng_fill(&rng, pr->q, nq, -2.0f, 2.0f);
  rove_rng_fill(&rng, pr->k, nk, -2.0f, 2.0f);
  rove_rng_fill(&rng, pr->v, nk, -1.0f, 1.0f);
  pr->a = (rove_attention_args){.batch = (int32_t)B, .q_len = c->q_len, .kv_len = c->kv_len,
                                .q = pr->q, .k = pr->k, .v = pr->v, .out = pr->out, .lse = pr->lse};
  if (c->explicit_pos) make_positions(pr, c, &rng);
}

static void free_problem(dproblem *pr) {
  free(pr->q), free(pr->k), free(pr->v), free(pr->out), free(pr->lse), free(pr->qpos), free(pr->kpos);
}

/* The problem through rove_attention_forward, or appended to a KV cache and attended there
 * (the cache's default query positions are its last q_len positions, as the plain call's). */
static void run(const dproblem *pr, const dcase *c) {
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&pr->cfg, &p), ROVE_OK);
  if (!c->cache) {
    assert_int_equal(rove_attention_forward(p, &pr->a), ROVE_OK);
  } else {
    rove_kv_cache *kc = NULL;
    assert_int_equal(rove_kv_cache_create(p, pr->a.batch, c->kv_len + 7, &kc), ROVE_OK);
    assert_int_equal(rove_kv_cache_append(kc, c->kv_len, pr->k, 0, pr->v, 0, pr->kpos), ROVE_OK);
    rove_attention_args a = pr->a;
    a.k = a.v = NULL;
    a.kv_pos = NULL;
    a.kv_len = 0;
    assert_int_equal(rove_kv_cache_attention(kc, &a), ROVE_OK);
    rove_kv_cache_destroy(kc);
  }
  rove_plan_destroy(p);
}

static void check_against_oracle(const dcase *c) {
  dproblem pr;
  make_problem(&pr, c, 1234 + (uint64_t)c->kv_len);
  run(&pr, c);
  const int64_t rows = (int64_t)batch_of(c) * c->q_len * c->H, n = rows * c->d;
  double *ref = malloc(sizeof(double) * n), *lse = malloc(sizeof(double) * rows);
  double inv_freq[ROVE_MAX_HEAD_DIM / 2], m;
  assert_int_equal(rove_rope_inv_freq(&pr.cfg.rope, c->d, inv_freq, &m), ROVE_OK);
  assert_int_equal(rove_oracle_attention(&pr.cfg, inv_freq, m, &pr.a, ref, lse), 0);
  double err = rove_max_rel_err_fd(pr.out, ref, n);
  print_message("  %s B=%d H=%d Hkv=%d d=%d q=%d kv=%d causal=%d window=%d softcap=%g pos=%d "
                "placement=%s r=%d: max rel err %.3g\n", c->cache ? "cache" : "plain", batch_of(c),
                c->H, c->Hkv, c->d, c->q_len, c->kv_len, c->causal, c->window, c->softcap,
                c->explicit_pos, pr.cfg.rope.placement == ROVE_ROTARY_LAST ? "last" : "first",
                pr.cfg.rope.rotary_dim, err);
  assert_true(err <= 2e-5);
  for (int64_t i = 0; i < rows; i++) { /* lse [b][h][t], out [b][t][h][d] */
    if (isinf(lse[i])) {
      const int64_t b = i / (c->H * c->q_len), h = i / c->q_len % c->H, t = i % c->q_len;
      const float *o = pr.out + ((b * c->q_len + t) * c->H + h) * c->d;
      assert_true(isinf(pr.lse[i]) && pr.lse[i] < 0);
      for (int x = 0; x < c->d; x++) assert_true(o[x] == 0.0f);
    } else {
      assert_true(fabs(pr.lse[i] - lse[i]) <= 2e-5 * fmax(1.0, fabs(lse[i])));
    }
  }
  free(ref), free(lse);
  free_problem(&pr);
}

/* H, Hkv, d, q_len, kv_len, causal, window, threads, rotate, explicit_pos, softcap, batch, cache */
static const dcase oracle_cases[] = {
    {12, 12, 64, 1, 4096, 1, 0, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 0}, /* split keys, one query */
    {12, 12, 64, 1, 4096, 1, 0, 0, ROVE_ROTATE_ROPE, 0, 0, 0, 0},
    {8, 2, 128, 4, 3000, 1, 0, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 0},  /* GQA: 16 rows per call */
    {4, 1, 64, 3, 2500, 1, 300, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 0}, /* MQA; most splits masked */
    {6, 3, 32, 5, 2049, 0, 0, 0, ROVE_ROTATE_ROVE, 1, 0, 0, 0},   /* unsorted positions */
    {6, 3, 32, 5, 2049, 1, 700, 0, ROVE_ROTATE_ROVE, 1, 0, 0, 0}, /* masked query, window */
    {2, 2, 64, 40, 2048, 1, 0, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 0},  /* tile path, split keys */
    {2, 1, 80, 1, 1, 1, 0, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 0},      /* a single key */
    {12, 4, 64, 4, 1500, 1, 0, 0, ROVE_ROTATE_ROVE, 0, 30, 0, 0}, /* GQA 12:4, softcap */
    {3, 3, 256, 16, 700, 1, 0, 0, ROVE_ROTATE_ROVE, 0, 0, 2, 0},  /* 16 rows, d 256, batch 2 */
    {3, 3, 80, 17, 700, 1, 0, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 0},   /* 17 rows: tile path */
    {5, 1, 96, 2, 999, 0, 50, 0, ROVE_ROTATE_ROVE, 1, 0, 2, 0},   /* 2-sided window */
    /* the same kinds through a KV cache (rows read in place, capacity > length) */
    {12, 12, 64, 1, 4096, 1, 0, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 1},
    {8, 2, 128, 4, 3000, 1, 0, 0, ROVE_ROTATE_ROPE, 0, 0, 2, 1},
    {4, 1, 64, 3, 2500, 1, 300, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 1},
    {6, 3, 32, 5, 2049, 1, 700, 0, ROVE_ROTATE_ROVE, 1, 0, 2, 1},
    {12, 4, 80, 4, 1500, 1, 0, 0, ROVE_ROTATE_ROVE, 0, 30, 0, 1},
    {3, 3, 64, 20, 700, 1, 0, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 1},   /* tile path */
    {2, 1, 80, 1, 1, 1, 0, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 1},
};

static void test_decode_vs_oracle(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof oracle_cases / sizeof oracle_cases[0]; i++)
    check_against_oracle(&oracle_cases[i]);
}

/* Every oracle case again with the rotated dims last (DeepSeek MLA style: 64 of each
 * head's dims, or 16 of the small heads), through rove_attention_forward and the KV cache,
 * the row kernel and the tile paths; plus DeepSeek's own head shape (192 = 128 + 64). */
static void test_decode_last_vs_oracle(void **state) {
  (void)state;
  const dcase deepseek[] = {{8, 8, 192, 1, 2100, 1, 0, 0, ROVE_ROTATE_ROPE, 0, 0, 0, 0},
                            {8, 8, 192, 2, 2100, 1, 0, 0, ROVE_ROTATE_ROVE, 1, 0, 0, 1},
                            {4, 1, 192, 20, 1000, 1, 0, 0, ROVE_ROTATE_ROPE, 0, 0, 0, 1}};
  for (int pass = 0; pass < 2; pass++) {
    g_last_rdim = pass == 0 ? 64 : 16;
    for (size_t i = (size_t)pass; i < sizeof oracle_cases / sizeof oracle_cases[0]; i += 1 + (size_t)pass)
      check_against_oracle(&oracle_cases[i]); /* r = 16: every other case */
  }
  g_last_rdim = 64;
  for (size_t i = 0; i < sizeof deepseek / sizeof deepseek[0]; i++) check_against_oracle(&deepseek[i]);
  g_last_rdim = 0;
}

static void test_decode_threads_bitwise(void **state) {
  (void)state;
  const dcase shapes[] = {{12, 12, 64, 1, 4096, 1, 0, 1, ROVE_ROTATE_ROVE, 0, 0, 0, 0},
                          {8, 2, 64, 40, 2048, 1, 0, 1, ROVE_ROTATE_ROVE, 0, 0, 0, 0},
                          {6, 3, 32, 5, 2049, 1, 700, 1, ROVE_ROTATE_ROVE, 1, 0, 0, 0},
                          {12, 12, 64, 1, 4096, 1, 0, 1, ROVE_ROTATE_ROVE, 0, 0, 0, 1},
                          {12, 4, 64, 4, 3000, 1, 0, 1, ROVE_ROTATE_ROVE, 1, 20, 2, 1}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    dcase c = shapes[s];
    dproblem one;
    make_problem(&one, &c, 99);
    run(&one, &c);
    for (int t = 2; t <= 3; t++) {
      c.threads = t;
      dproblem more;
      make_problem(&more, &c, 99);
      run(&more, &c);
      const size_t n = (size_t)batch_of(&c) * (size_t)c.q_len * (size_t)c.H;
      assert_memory_equal(one.out, more.out, n * (size_t)c.d * sizeof(float));
      assert_memory_equal(one.lse, more.lse, n * sizeof(float));
      free_problem(&more);
    }
    free_problem(&one);
  }
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode_vs_oracle),
      cmocka_unit_test(test_decode_last_vs_oracle),
      cmocka_unit_test(test_decode_threads_bitwise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
