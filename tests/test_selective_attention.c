/* SPDX-License-Identifier: MIT */
/* Softmax attention with explicit Selective RoPE angles (rove_attention_args.q_angles /
 * kv_angles, rove_rotate_angles, rove_kv_cache_append_angles), against the double oracle,
 * which honours the same angle fields. Links the public librove.so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rove_oracle.h"
#include "testutil.h"

typedef struct {
  int B, H, Hkv, d, r, q_len, kv_len, causal, threads;
  uint32_t rotate;
  rove_pairing pairing;
  double angle_range; /* angles uniform in [-range, range] */
} scase;

typedef struct {
  rove_attention_config cfg;
  rove_attention_args a;
  float *q, *k, *v, *out, *lse;
  double *qang, *kang;
  int64_t nq, nk, nqa, nka;
} sproblem;

static double *random_angles(rove_rng *rng, int64_t n, double range) {
  double *x = malloc(sizeof(double) * (size_t)n);
  assert_non_null(x);
  for (int64_t i = 0; i < n; i++)
    x[i] = range * (2.0 * ((double)(rove_rng_u64(rng) >> 11) / 9007199254740992.0) - 1.0);
  return x;
}

static void make(sproblem *pr, const scase *c, uint64_t seed) {
  memset(pr, 0, sizeof *pr);
  rove_rng rng;
  rove_rng_seed(&rng, seed);
  rove_attention_config_init(&pr->cfg, c->H, c->Hkv, c->d);
  pr->cfg.rotate = c->rotate;
  pr->cfg.causal = c->causal;
  pr->cfg.n_threads = c->threads;
  pr->cfg.rope.rotary_dim = c->r;
  pr->cfg.rope.pairing = c->pairing;
  pr->nq = (int64_t)c->B * c->q_len * c->H * c->d;
  pr->nk = (int64_t)c->B * c->kv_len * c->Hkv * c->d;
  pr->nqa = (int64_t)c->B * c->q_len * c->Hkv * (c->r / 2);
  pr->nka = (int64_t)c->B * c->kv_len * c->Hkv * (c->r / 2);
  pr->q = malloc(sizeof(float) * (size_t)pr->nq);
  pr->out = malloc(sizeof(float) * (size_t)pr->nq);
  pr->k = malloc(sizeof(float) * (size_t)pr->nk);
  pr->v = malloc(sizeof(float) * (size_t)pr->nk);
  pr->lse = malloc(sizeof(float) * (size_t)(c->B * c->H * c->q_len));
  assert_true(pr->q && pr->out && pr->k && pr->v && pr->lse);
  rove_rng_fill(&rng, pr->q, pr->nq, -2.0f, 2.0f);
  rove_rng_fill(&rng, pr->k, pr->nk, -2.0f, 2.0f);
  rove_rng_fill(&rng, pr->v, pr->nk, -1.0f, 1.0f);
  pr->qang = random_angles(&rng, pr->nqa, c->angle_range);
  pr->kang = random_angles(&rng, pr->nka, c->angle_range);
  pr->a = (rove_attention_args){.batch = c->B, .q_len = c->q_len, .kv_len = c->kv_len,
                                .q = pr->q, .k = pr->k, .v = pr->v, .out = pr->out,
                                .lse = pr->lse, .q_angles = pr->qang, .kv_angles = pr->kang};
}

static void unmake(sproblem *pr) {
  free(pr->q), free(pr->out), free(pr->k), free(pr->v), free(pr->lse);
  free(pr->qang), free(pr->kang);
}

/* Library vs oracle (direct form, and the convolution form for RoVE). shared: the queries
 * use the key angle array itself (self-attention, q_len == kv_len: the driver then reads
 * the query rows from the key table). */
static void check_case_mode(const scase *c, uint64_t seed, int shared) {
  sproblem pr;
  make(&pr, c, seed);
  if (shared) pr.a.q_angles = pr.kang;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&pr.cfg, &p), ROVE_OK);
  assert_int_equal(rove_attention_forward(p, &pr.a), ROVE_OK);
  double *ref = malloc(sizeof(double) * (size_t)pr.nq);
  double *lse = malloc(sizeof(double) * (size_t)(c->B * c->H * c->q_len));
  double inv_freq[ROVE_MAX_HEAD_DIM / 2], m;
  assert_int_equal(rove_rope_inv_freq(&pr.cfg.rope, c->d, inv_freq, &m), ROVE_OK);
  assert_int_equal(rove_oracle_attention(&pr.cfg, inv_freq, m, &pr.a, ref, lse), 0);
  const double err = rove_max_rel_err_fd(pr.out, ref, pr.nq);
  if (err > 2e-5)
    fail_msg("H %d/%d d %d r %d q %d kv %d rot %u: rel err %.3g", c->H, c->Hkv, c->d, c->r,
             c->q_len, c->kv_len, c->rotate, err);
  for (int64_t i = 0; i < (int64_t)c->B * c->H * c->q_len; i++) {
    if (isinf(lse[i])) assert_true(isinf(pr.lse[i]) && pr.lse[i] < 0);
    else assert_true(fabs(pr.lse[i] - lse[i]) <= 1e-4 * (1.0 + fabs(lse[i])));
  }
  if ((c->rotate & (ROVE_ROTATE_V | ROVE_ROTATE_O)) == (ROVE_ROTATE_V | ROVE_ROTATE_O)) {
    assert_int_equal(rove_oracle_attention_conv(&pr.cfg, inv_freq, m, &pr.a, ref), 0);
    assert_true(rove_max_rel_err_fd(pr.out, ref, pr.nq) <= 2e-5);
  }
  free(ref), free(lse);
  rove_plan_destroy(p);
  unmake(&pr);
}

static void check_case(const scase *c, uint64_t seed) {
  check_case_mode(c, seed, 0);
  if (c->q_len == c->kv_len) check_case_mode(c, seed, 1);
}

static void shapes_vs_oracle(void **state) {
  (void)state;
  const scase cases[] = {
      /* B H Hkv d r q kv causal thr rotate pairing range */
      {2, 4, 2, 64, 64, 37, 37, 1, 0, ROVE_ROTATE_ROVE, ROVE_PAIRING_HALF, 50.0},
      {1, 4, 4, 32, 16, 130, 200, 1, 2, ROVE_ROTATE_ROVE, ROVE_PAIRING_INTERLEAVED, 1e4},
      {2, 6, 2, 80, 80, 1, 300, 1, 0, ROVE_ROTATE_ROVE, ROVE_PAIRING_HALF, 1e6},
      {1, 8, 1, 128, 128, 3, 150, 0, 1, ROVE_ROTATE_ROPE, ROVE_PAIRING_HALF, 10.0},
      {1, 2, 2, 96, 64, 200, 70, 0, 0, ROVE_ROTATE_ROVE, ROVE_PAIRING_INTERLEAVED, 3.0},
      {1, 2, 1, 320, 320, 70, 70, 1, 0, ROVE_ROTATE_ROVE, ROVE_PAIRING_HALF, 30.0}, /* d > 256 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], 100 + i);
}

static void every_flag_combination(void **state) {
  (void)state;
  for (uint32_t rot = 0; rot < 16; rot++) {
    scase c = {1, 4, 2, 64, 48, 20, 90, 1, 0, rot, ROVE_PAIRING_HALF, 100.0};
    check_case(&c, 7 + rot);
    c.q_len = 1; /* decode path */
    check_case(&c, 70 + rot);
  }
}

/* Angles p * w_k (what phi = 1 accumulates to) give the position-based RoPE result. */
static void position_angles_equal_rope(void **state) {
  (void)state;
  const scase c = {2, 4, 2, 64, 64, 50, 120, 1, 0, ROVE_ROTATE_ROVE, ROVE_PAIRING_HALF, 0.0};
  sproblem pr;
  make(&pr, &c, 5);
  pr.cfg.rope.theta = 500000.0;
  double w[32];
  assert_int_equal(rove_rope_inv_freq(&pr.cfg.rope, c.d, w, NULL), ROVE_OK);
  for (int b = 0; b < c.B; b++)
    for (int t = 0; t < c.kv_len; t++)
      for (int h = 0; h < c.Hkv; h++)
        for (int k = 0; k < 32; k++) {
          pr.kang[(((int64_t)b * c.kv_len + t) * c.Hkv + h) * 32 + k] = (double)t * w[k];
          if (t >= c.kv_len - c.q_len)
            pr.qang[(((int64_t)b * c.q_len + t - (c.kv_len - c.q_len)) * c.Hkv + h) * 32 + k] =
                (double)t * w[k];
        }
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&pr.cfg, &p), ROVE_OK);
  assert_int_equal(rove_attention_forward(p, &pr.a), ROVE_OK);
  float *ref = malloc(sizeof(float) * (size_t)pr.nq);
  rove_attention_args a = pr.a;
  a.q_angles = a.kv_angles = NULL;
  a.out = ref;
  a.lse = NULL;
  assert_int_equal(rove_attention_forward(p, &a), ROVE_OK);
  assert_true(rove_max_rel_err_ff(pr.out, ref, pr.nq) <= 2e-6);
  free(ref);
  rove_plan_destroy(p);
  unmake(&pr);
}

/* Results do not depend on the thread count, with angles too. */
static void threads_bitwise(void **state) {
  (void)state;
  scase c = {2, 4, 2, 64, 64, 150, 150, 1, 1, ROVE_ROTATE_ROVE, ROVE_PAIRING_HALF, 1e3};
  sproblem pr;
  make(&pr, &c, 9);
  float *one = malloc(sizeof(float) * (size_t)pr.nq);
  for (int threads = 1; threads <= 2; threads++) {
    pr.cfg.n_threads = threads;
    rove_plan *p = NULL;
    assert_int_equal(rove_plan_create(&pr.cfg, &p), ROVE_OK);
    pr.a.out = threads == 1 ? one : pr.out;
    assert_int_equal(rove_attention_forward(p, &pr.a), ROVE_OK);
    rove_plan_destroy(p);
  }
  assert_memory_equal(one, pr.out, sizeof(float) * (size_t)pr.nq);
  free(one);
  unmake(&pr);
}

/* Prefill + token-by-token decode through a cache filled with append_angles equals one
 * forward with the same angles. */
static void cache_with_angles(void **state) {
  (void)state;
  const scase c = {2, 6, 2, 64, 64, 1, 80, 1, 0, ROVE_ROTATE_ROVE, ROVE_PAIRING_HALF, 300.0};
  sproblem pr;
  make(&pr, &c, 11);
  const int T = c.kv_len, prompt = 60, hd = c.Hkv * c.d, ha = c.Hkv * 32;
  /* full-sequence queries and their angles = the key angles (self-attention) */
  float *q = malloc(sizeof(float) * (size_t)(c.B * T * c.H * c.d));
  float *ref = malloc(sizeof(float) * (size_t)(c.B * T * c.H * c.d));
  rove_rng rng;
  rove_rng_seed(&rng, 3);
  rove_rng_fill(&rng, q, (int64_t)c.B * T * c.H * c.d, -2.0f, 2.0f);
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&pr.cfg, &p), ROVE_OK);
  rove_attention_args full = {.batch = c.B, .q_len = T, .kv_len = T, .q = q, .k = pr.k,
                              .v = pr.v, .out = ref, .q_angles = pr.kang, .kv_angles = pr.kang};
  assert_int_equal(rove_attention_forward(p, &full), ROVE_OK);
  rove_kv_cache *cache = NULL;
  assert_int_equal(rove_kv_cache_create(p, c.B, T, &cache), ROVE_OK);
  /* batch-major inputs: gather each step's rows per batch */
  float *kk = malloc(sizeof(float) * (size_t)(c.B * T * hd)), *vv = malloc(sizeof(float) * (size_t)(c.B * T * hd));
  double *aa = malloc(sizeof(double) * (size_t)(c.B * T * ha));
  float *qq = malloc(sizeof(float) * (size_t)(c.B * c.H * c.d)), *oo = malloc(sizeof(float) * (size_t)(c.B * c.H * c.d));
  double *qa = malloc(sizeof(double) * (size_t)(c.B * ha));
  for (int t0 = 0; t0 < T;) {
    const int n = t0 == 0 ? prompt : 1;
    for (int b = 0; b < c.B; b++) {
      memcpy(kk + (int64_t)b * n * hd, pr.k + ((int64_t)b * T + t0) * hd, sizeof(float) * (size_t)(n * hd));
      memcpy(vv + (int64_t)b * n * hd, pr.v + ((int64_t)b * T + t0) * hd, sizeof(float) * (size_t)(n * hd));
      memcpy(aa + (int64_t)b * n * ha, pr.kang + ((int64_t)b * T + t0) * ha, sizeof(double) * (size_t)(n * ha));
    }
    assert_int_equal(rove_kv_cache_append_angles(cache, n, kk, 0, vv, 0, NULL, aa), ROVE_OK);
    const int t = t0 + n - 1; /* attend with the newest token's query */
    for (int b = 0; b < c.B; b++) {
      memcpy(qq + (int64_t)b * c.H * c.d, q + ((int64_t)b * T + t) * c.H * c.d, sizeof(float) * (size_t)(c.H * c.d));
      memcpy(qa + (int64_t)b * ha, pr.kang + ((int64_t)b * T + t) * ha, sizeof(double) * (size_t)ha);
    }
    rove_attention_args dec = {.batch = c.B, .q_len = 1, .q = qq, .out = oo, .q_angles = qa};
    assert_int_equal(rove_kv_cache_attention(cache, &dec), ROVE_OK);
    for (int b = 0; b < c.B; b++)
      assert_true(rove_max_rel_err_ff(oo + (int64_t)b * c.H * c.d,
                                      ref + ((int64_t)b * T + t) * c.H * c.d, c.H * c.d) <= 1e-5);
    t0 += n;
  }
  rove_kv_cache_destroy(cache);
  rove_plan_destroy(p);
  free(q), free(ref), free(kk), free(vv), free(aa), free(qq), free(oo), free(qa);
  unmake(&pr);
}

/* rove_rotate_angles against the oracle rotation, with GQA-shared angles; inverse undoes. */
static void rotate_angles(void **state) {
  (void)state;
  rove_attention_config cfg;
  rove_attention_config_init(&cfg, 6, 2, 80);
  cfg.rope.rotary_dim = 64;
  cfg.rope.pairing = ROVE_PAIRING_INTERLEAVED;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&cfg, &p), ROVE_OK);
  const int T = 300, H = 6, d = 80, stride = H * d + 5;
  rove_rng rng;
  rove_rng_seed(&rng, 21);
  float *x = malloc(sizeof(float) * (size_t)(T * stride)), *x0 = malloc(sizeof(float) * (size_t)(T * stride));
  rove_rng_fill(&rng, x, (int64_t)T * stride, -1.0f, 1.0f);
  memcpy(x0, x, sizeof(float) * (size_t)(T * stride));
  for (int angle_heads = 1; angle_heads <= 6; angle_heads++) {
    if (H % angle_heads) continue;
    double *ang = random_angles(&rng, (int64_t)T * angle_heads * 32, 1e5);
    assert_int_equal(rove_rotate_angles(p, x, T, H, stride, ang, angle_heads, 0), ROVE_OK);
    double worst = 0.0;
    for (int t = 0; t < T; t++)
      for (int h = 0; h < H; h++) {
        double y[80];
        for (int e = 0; e < d; e++) y[e] = x0[(int64_t)t * stride + h * d + e];
        rove_oracle_rotate_angles(y, d, 64, ROVE_PAIRING_INTERLEAVED,
                                  ang + ((int64_t)t * angle_heads + h / (H / angle_heads)) * 32, +1);
        for (int e = 0; e < d; e++) {
          const double err = fabs(x[(int64_t)t * stride + h * d + e] - y[e]);
          worst = err > worst ? err : worst;
        }
      }
    assert_true(worst <= 1e-6);
    for (int t = 0; t < T; t++) /* the padding between tokens is untouched */
      for (int e = H * d; e < stride; e++) assert_true(x[(int64_t)t * stride + e] == x0[(int64_t)t * stride + e]);
    assert_int_equal(rove_rotate_angles(p, x, T, H, stride, ang, angle_heads, 1), ROVE_OK);
    assert_true(rove_max_rel_err_ff(x, x0, (int64_t)T * stride) <= 1e-6);
    memcpy(x, x0, sizeof(float) * (size_t)(T * stride));
    free(ang);
  }
  free(x), free(x0);
  rove_plan_destroy(p);
}

/* Positions decide the mask (explicit, shuffled, with a window), angles the rotation;
 * YaRN's m still multiplies q and k; q/k/v/out are strided views. */
static void positions_window_yarn_strides(void **state) {
  (void)state;
  const scase c = {2, 4, 2, 64, 64, 40, 90, 1, 0, ROVE_ROTATE_ROVE, ROVE_PAIRING_HALF, 200.0};
  sproblem pr;
  make(&pr, &c, 17);
  pr.cfg.window = 25;
  pr.cfg.rope.scaling = ROVE_SCALING_YARN;
  pr.cfg.rope.factor = 4.0;
  pr.cfg.rope.original_max_position = 64;
  rove_rng rng;
  rove_rng_seed(&rng, 19);
  int32_t qpos[2 * 40], kpos[2 * 90];
  for (int i = 0; i < 2 * 90; i++) kpos[i] = 500 + (int32_t)(rove_rng_u64(&rng) % 200);
  for (int i = 0; i < 2 * 40; i++) qpos[i] = 500 + (int32_t)(rove_rng_u64(&rng) % 220);
  /* strided copies: each token row padded by 3 floats */
  const int sq = c.H * c.d + 3, sk = c.Hkv * c.d + 3;
  float *q = calloc((size_t)(2 * 40 * sq), sizeof(float)), *k = calloc((size_t)(2 * 90 * sk), sizeof(float));
  float *v = calloc((size_t)(2 * 90 * sk), sizeof(float)), *out = calloc((size_t)(2 * 40 * sq), sizeof(float));
  for (int t = 0; t < 2 * 40; t++) memcpy(q + (int64_t)t * sq, pr.q + (int64_t)t * c.H * c.d, sizeof(float) * (size_t)(c.H * c.d));
  for (int t = 0; t < 2 * 90; t++) {
    memcpy(k + (int64_t)t * sk, pr.k + (int64_t)t * c.Hkv * c.d, sizeof(float) * (size_t)(c.Hkv * c.d));
    memcpy(v + (int64_t)t * sk, pr.v + (int64_t)t * c.Hkv * c.d, sizeof(float) * (size_t)(c.Hkv * c.d));
  }
  rove_attention_args a = pr.a;
  a.q = q, a.k = k, a.v = v, a.out = out, a.q_stride = a.out_stride = sq, a.k_stride = a.v_stride = sk;
  a.q_pos = qpos, a.kv_pos = kpos;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&pr.cfg, &p), ROVE_OK);
  assert_int_equal(rove_attention_forward(p, &a), ROVE_OK);
  double inv_freq[32], m;
  assert_int_equal(rove_rope_inv_freq(&pr.cfg.rope, c.d, inv_freq, &m), ROVE_OK);
  assert_true(m > 1.0);
  double *ref = malloc(sizeof(double) * (size_t)pr.nq);
  assert_int_equal(rove_oracle_attention(&pr.cfg, inv_freq, m, &a, ref, NULL), 0);
  for (int t = 0; t < 2 * 40; t++) memcpy(pr.out + (int64_t)t * c.H * c.d, out + (int64_t)t * sq, sizeof(float) * (size_t)(c.H * c.d));
  assert_true(rove_max_rel_err_fd(pr.out, ref, pr.nq) <= 2e-5);
  free(q), free(k), free(v), free(out), free(ref);
  rove_plan_destroy(p);
  unmake(&pr);
}

/* A cache keeps the kind of its first append: angles and positions do not mix. */
static void cache_kind_rules(void **state) {
  (void)state;
  const scase c = {1, 4, 2, 64, 64, 1, 12, 1, 0, ROVE_ROTATE_ROVE, ROVE_PAIRING_HALF, 5.0};
  sproblem pr;
  make(&pr, &c, 23);
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&pr.cfg, &p), ROVE_OK);
  rove_kv_cache *cache = NULL;
  assert_int_equal(rove_kv_cache_create(p, 1, 64, &cache), ROVE_OK);
  rove_attention_args q = {.batch = 1, .q_len = 1, .q = pr.q, .out = pr.out};
  /* angle cache */
  assert_int_equal(rove_kv_cache_append_angles(cache, 6, pr.k, 0, pr.v, 0, NULL, pr.kang), ROVE_OK);
  assert_int_equal(rove_kv_cache_append(cache, 6, pr.k, 0, pr.v, 0, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_length(cache), 6);
  assert_int_equal(rove_kv_cache_attention(cache, &q), ROVE_ERR_INVALID_ARGUMENT); /* no q_angles */
  assert_int_equal(rove_kv_cache_shift(cache, 0, 3, 5), ROVE_ERR_UNSUPPORTED);
  q.q_angles = pr.qang;
  assert_int_equal(rove_kv_cache_attention(cache, &q), ROVE_OK);
  /* emptied, it takes either kind again; a position cache refuses angles */
  assert_int_equal(rove_kv_cache_reset(cache), ROVE_OK);
  assert_int_equal(rove_kv_cache_append(cache, 12, pr.k, 0, pr.v, 0, NULL), ROVE_OK);
  assert_int_equal(rove_kv_cache_append_angles(cache, 6, pr.k, 0, pr.v, 0, NULL, pr.kang),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_shift(cache, 0, 3, 5), ROVE_OK);
  /* queries with angles pos * w_k on a position cache are the position path */
  double w[32];
  assert_int_equal(rove_rope_inv_freq(&pr.cfg.rope, c.d, w, NULL), ROVE_OK);
  int32_t pos[12];
  assert_int_equal(rove_kv_cache_positions(cache, pos), ROVE_OK);
  for (int h = 0; h < c.Hkv; h++)
    for (int k = 0; k < 32; k++) pr.qang[h * 32 + k] = (double)pos[11] * w[k];
  float ref[4 * 64];
  q.out = ref;
  q.q_angles = NULL;
  assert_int_equal(rove_kv_cache_attention(cache, &q), ROVE_OK);
  q.out = pr.out;
  q.q_angles = pr.qang;
  assert_int_equal(rove_kv_cache_attention(cache, &q), ROVE_OK);
  assert_true(rove_max_rel_err_ff(pr.out, ref, 4 * 64) <= 1e-6);
  rove_kv_cache_destroy(cache);
  rove_plan_destroy(p);
  unmake(&pr);
}

static void bad_input(void **state) {
  (void)state;
  scase c = {1, 4, 2, 64, 64, 5, 9, 1, 0, ROVE_ROTATE_ROVE, ROVE_PAIRING_HALF, 1.0};
  sproblem pr;
  make(&pr, &c, 13);
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&pr.cfg, &p), ROVE_OK);
  for (int64_t i = 0; i < pr.nq; i++) pr.out[i] = 7.0f;
  for (int64_t i = 0; i < (int64_t)c.B * c.H * c.q_len; i++) pr.lse[i] = 7.0f;
  rove_attention_args a = pr.a;
  a.kv_angles = NULL; /* one without the other */
  assert_int_equal(rove_attention_forward(p, &a), ROVE_ERR_INVALID_ARGUMENT);
  a = pr.a;
  a.q_angles = NULL;
  assert_int_equal(rove_attention_forward(p, &a), ROVE_ERR_INVALID_ARGUMENT);
  pr.kang[pr.nka - 1] = NAN;
  assert_int_equal(rove_attention_forward(p, &pr.a), ROVE_ERR_INVALID_ARGUMENT);
  pr.kang[pr.nka - 1] = 0.0;
  pr.qang[0] = INFINITY;
  assert_int_equal(rove_attention_forward(p, &pr.a), ROVE_ERR_INVALID_ARGUMENT);
  pr.qang[0] = 0.0;
  for (int64_t i = 0; i < pr.nq; i++) assert_true(pr.out[i] == 7.0f);
  for (int64_t i = 0; i < (int64_t)c.B * c.H * c.q_len; i++) assert_true(pr.lse[i] == 7.0f);
  /* cache: kv_angles must be NULL; append_angles needs finite angles */
  rove_kv_cache *cache = NULL;
  assert_int_equal(rove_kv_cache_create(p, 1, 16, &cache), ROVE_OK);
  assert_int_equal(rove_kv_cache_append_angles(cache, 9, pr.k, 0, pr.v, 0, NULL, NULL), ROVE_ERR_INVALID_ARGUMENT);
  pr.kang[3] = -INFINITY;
  assert_int_equal(rove_kv_cache_append_angles(cache, 9, pr.k, 0, pr.v, 0, NULL, pr.kang), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_length(cache), 0);
  pr.kang[3] = 0.0;
  assert_int_equal(rove_kv_cache_append_angles(cache, 9, pr.k, 0, pr.v, 0, NULL, pr.kang), ROVE_OK);
  rove_attention_args d = {.batch = 1, .q_len = 1, .q = pr.q, .out = pr.out, .q_angles = pr.qang,
                           .kv_angles = pr.kang};
  assert_int_equal(rove_kv_cache_attention(cache, &d), ROVE_ERR_INVALID_ARGUMENT);
  rove_kv_cache_destroy(cache);
  /* rotate_angles */
  float x[4 * 64];
  memset(x, 0, sizeof x);
  assert_int_equal(rove_rotate_angles(p, x, 1, 4, 0, NULL, 2, 0), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_rotate_angles(p, x, 1, 4, 0, pr.qang, 0, 0), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_rotate_angles(p, x, 1, 4, 0, pr.qang, 3, 0), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_rotate_angles(p, x, 1, 4, 0, pr.qang, 2, 2), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_rotate_angles(NULL, x, 1, 4, 0, pr.qang, 2, 0), ROVE_ERR_INVALID_ARGUMENT);
  pr.qang[1] = NAN;
  assert_int_equal(rove_rotate_angles(p, x, 1, 4, 0, pr.qang, 2, 0), ROVE_ERR_INVALID_ARGUMENT);
  for (int i = 0; i < 4 * 64; i++) assert_true(x[i] == 0.0f);
  assert_int_equal(rove_rotate_angles(p, x, INT32_MAX, INT32_MAX, 0, pr.qang, 1, 0), ROVE_ERR_SIZE_OVERFLOW);
  rove_plan_destroy(p);
  unmake(&pr);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(shapes_vs_oracle),       cmocka_unit_test(every_flag_combination),
      cmocka_unit_test(position_angles_equal_rope), cmocka_unit_test(threads_bitwise),
      cmocka_unit_test(cache_with_angles),      cmocka_unit_test(rotate_angles),
      cmocka_unit_test(positions_window_yarn_strides), cmocka_unit_test(cache_kind_rules),
      cmocka_unit_test(bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
