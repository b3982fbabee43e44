/* SPDX-License-Identifier: MIT */
/* rove_attention_varlen: packed sequences of different lengths (queries < keys, one
 * query, no queries, no keys) against the double oracle per sequence and bitwise against
 * one rove_attention_forward per sequence (outputs and the [n_heads][total_q] LSE), for
 * RoVE / RoPE / none, causal and not, windows, softcap, GQA, explicit positions, explicit
 * angles, padded token strides; bitwise for 1 and 2 threads; outputs untouched on every
 * rejected input (bad cu arrays, overlap across sequences, a non-finite angle). Links the
 * public librove.so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rove_oracle.h"
#include "testutil.h"

#define NS 6
static const int32_t LQ[NS] = {7, 1, 0, 13, 40, 5};
static const int32_t LK[NS] = {7, 30, 5, 0, 40, 70};

typedef struct {
  uint32_t rot;
  int causal, window, H, Hkv, d, positions, angles, pad;
  float softcap;
} vcase;

typedef struct {
  int32_t cq[NS + 1], ck[NS + 1];
  int64_t tq, tk, qs, ks;
  float *q, *k, *v, *out, *lse;
  int32_t *qp, *kp;
  double *qa, *ka;
} vdata;

static void make(const vcase *c, vdata *x, uint64_t seed) {
  rove_rng r;
  rove_rng_seed(&r, seed);
  x->cq[0] = x->ck[0] = 0;
  for (int s = 0; s < NS; s++) x->cq[s + 1] = x->cq[s] + LQ[s], x->ck[s + 1] = x->ck[s] + LK[s];
  x->tq = x->cq[NS], x->tk = x->ck[NS];
  x->qs = (int64_t)c->H * c->d + c->pad, x->ks = (int64_t)c->Hkv * c->d + c->pad;
  x->q = malloc(sizeof(float) * (size_t)(x->tq * x->qs));
  x->k = malloc(sizeof(float) * (size_t)(x->tk * x->ks));
  x->v = malloc(sizeof(float) * (size_t)(x->tk * x->ks));
  x->out = malloc(sizeof(float) * (size_t)(x->tq * x->qs));
  x->lse = malloc(sizeof(float) * (size_t)(x->tq * c->H));
  x->qp = malloc(sizeof(int32_t) * (size_t)x->tq), x->kp = malloc(sizeof(int32_t) * (size_t)x->tk);
  const int64_t half = c->d / 2, na = c->Hkv * half;
  x->qa = malloc(sizeof(double) * (size_t)(x->tq * na + 1));
  x->ka = malloc(sizeof(double) * (size_t)(x->tk * na + 1));
  assert_true(x->q && x->k && x->v && x->out && x->lse && x->qp && x->kp && x->qa && x->ka);
  rove_rng_fill(&r, x->q, x->tq * x->qs, -1, 1);
  rove_rng_fill(&r, x->k, x->tk * x->ks, -1, 1);
  rove_rng_fill(&r, x->v, x->tk * x->ks, -1, 1);
  for (int s = 0; s < NS; s++) { /* positions: an offset per sequence, keys unordered */
    const int32_t base = 1000 * s + (int32_t)(rove_rng_u64(&r) % 500);
    for (int j = 0; j < LK[s]; j++) x->kp[x->ck[s] + j] = base + (j * 7) % (LK[s] ? LK[s] : 1);
    for (int i = 0; i < LQ[s]; i++) x->qp[x->cq[s] + i] = base + LK[s] - LQ[s] + i;
  }
  for (int64_t i = 0; i < x->tq * na; i++) x->qa[i] = rove_rng_uniform(&r, -50, 50);
  for (int64_t i = 0; i < x->tk * na; i++) x->ka[i] = rove_rng_uniform(&r, -50, 50);
}

static void unmake(vdata *x) {
  free(x->q), free(x->k), free(x->v), free(x->out), free(x->lse), free(x->qp), free(x->kp);
  free(x->qa), free(x->ka);
}

static rove_attention_config config(const vcase *c, int threads) {
  rove_attention_config cfg;
  rove_attention_config_init(&cfg, c->H, c->Hkv, c->d);
  cfg.rotate = c->rot, cfg.causal = c->causal, cfg.window = c->window, cfg.softcap = c->softcap;
  cfg.n_threads = threads;
  return cfg;
}

static rove_varlen_args vargs(const vcase *c, const vdata *x) {
  rove_varlen_args a;
  memset(&a, 0, sizeof a);
  a.n_seqs = NS, a.cu_seqlens_q = x->cq, a.cu_seqlens_k = x->ck;
  a.q = x->q, a.k = x->k, a.v = x->v, a.out = x->out, a.lse = x->lse;
  a.q_stride = a.out_stride = x->qs, a.k_stride = a.v_stride = x->ks;
  if (c->positions) a.q_pos = x->qp, a.kv_pos = x->kp;
  if (c->angles) a.q_angles = x->qa, a.kv_angles = x->ka;
  return a;
}

/* Sequence s as its own call: out rows into o (dense [LQ][H][d]), lse [H][LQ]. */
static rove_attention_args seq_call(const vcase *c, const vdata *x, int s, float *o, float *l) {
  const int64_t na = c->Hkv * (c->d / 2);
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = 1, a.q_len = LQ[s], a.kv_len = LK[s];
  a.q = x->q + x->cq[s] * x->qs, a.q_stride = x->qs;
  a.k = x->k + x->ck[s] * x->ks, a.v = x->v + x->ck[s] * x->ks, a.k_stride = a.v_stride = x->ks;
  a.out = o, a.lse = l;
  if (c->positions) a.q_pos = x->qp + x->cq[s], a.kv_pos = x->kp + x->ck[s];
  if (c->angles) a.q_angles = x->qa + x->cq[s] * na, a.kv_angles = x->ka + x->ck[s] * na;
  return a;
}

static void check_case(const vcase *c, uint64_t seed) {
  vdata x;
  make(c, &x, seed);
  rove_attention_config cfg = config(c, 1);
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&cfg, &p), ROVE_OK);
  rove_varlen_args a = vargs(c, &x);
  for (int64_t i = 0; i < x.tq * x.qs; i++) x.out[i] = 555.0f; /* padding stays */
  assert_int_equal(rove_attention_varlen(p, &a), ROVE_OK);
  double inv_freq[ROVE_MAX_HEAD_DIM / 2], m = 1.0;
  assert_int_equal(rove_rope_inv_freq(&cfg.rope, c->d, inv_freq, &m), ROVE_OK);
  const int64_t w = (int64_t)c->H * c->d;
  double worst = 0.0;
  for (int s = 0; s < NS; s++) {
    if (LQ[s] == 0) continue;
    float *o = malloc(sizeof(float) * (size_t)(LQ[s] * w)),
          *l = malloc(sizeof(float) * (size_t)(LQ[s] * c->H));
    double *ow = malloc(sizeof(double) * (size_t)(LQ[s] * w)),
           *lw = malloc(sizeof(double) * (size_t)(LQ[s] * c->H));
    assert_true(o && l && ow && lw);
    if (LK[s] == 0) { /* no keys: 0 and -inf */
      for (int i = 0; i < LQ[s]; i++)
        for (int64_t e = 0; e < w; e++) assert_true(x.out[(x.cq[s] + i) * x.qs + e] == 0.0f);
      for (int h = 0; h < c->H; h++)
        for (int i = 0; i < LQ[s]; i++) assert_true(x.lse[h * x.tq + x.cq[s] + i] == -INFINITY);
    } else {
      rove_attention_args b = seq_call(c, &x, s, o, l);
      assert_int_equal(rove_attention_forward(p, &b), ROVE_OK);
      b.out = NULL, b.lse = NULL;
      assert_int_equal(rove_oracle_attention(&cfg, inv_freq, m, &b, ow, lw), 0);
      for (int i = 0; i < LQ[s]; i++) {
        assert_memory_equal(o + i * w, x.out + (x.cq[s] + i) * x.qs, sizeof(float) * (size_t)w);
        for (int64_t e = 0; e < w; e++) worst = fmax(worst, fabs(o[i * w + e] - ow[i * w + e]));
        for (int h = 0; h < c->H; h++)
          assert_true(memcmp(&l[h * LQ[s] + i], &x.lse[h * x.tq + x.cq[s] + i], 4) == 0);
      }
    }
    free(o), free(l), free(ow), free(lw);
  }
  for (int64_t t = 0; t < x.tq; t++) /* the stride padding is never written */
    for (int64_t e = w; e < x.qs; e++) assert_true(x.out[t * x.qs + e] == 555.0f);
  print_message(
      "  rot 0x%x causal %d window %d H %d:%d d %d pos %d ang %d: max |err| vs oracle %.2g\n",
      c->rot, c->causal, c->window, c->H, c->Hkv, c->d, c->positions, c->angles, worst);
  assert_true(worst < 2e-5);
  rove_plan_destroy(p);
  unmake(&x);
}

static void test_against_calls_and_oracle(void **state) {
  (void)state;
  static const vcase cases[] = {
      {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 32, 0, 0, 0, 0.0f},
      {ROVE_ROTATE_ROPE, 0, 0, 2, 2, 16, 0, 0, 3, 0.0f},
      {0, 1, 9, 4, 1, 32, 1, 0, 0, 0.0f},
      {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 64, 1, 0, 5, 30.0f},
      {ROVE_ROTATE_ROVE, 0, 12, 2, 1, 16, 1, 0, 0, 0.0f},
      {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 32, 1, 1, 0, 0.0f},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], 100 + i);
}

static void test_threads(void **state) {
  (void)state;
  const vcase c = {ROVE_ROTATE_ROVE, 1, 0, 8, 2, 64, 0, 0, 0, 0.0f};
  vdata x;
  make(&c, &x, 7);
  float *o1 = malloc(sizeof(float) * (size_t)(x.tq * x.qs)),
        *l1 = malloc(sizeof(float) * (size_t)(x.tq * c.H));
  assert_true(o1 && l1);
  for (int t = 1; t <= 2; t++) {
    rove_attention_config cfg = config(&c, t);
    rove_plan *p = NULL;
    assert_int_equal(rove_plan_create(&cfg, &p), ROVE_OK);
    rove_varlen_args a = vargs(&c, &x);
    assert_int_equal(rove_attention_varlen(p, &a), ROVE_OK);
    if (t == 1) {
      memcpy(o1, x.out, sizeof(float) * (size_t)(x.tq * x.qs));
      memcpy(l1, x.lse, sizeof(float) * (size_t)(x.tq * c.H));
    } else {
      assert_memory_equal(o1, x.out, sizeof(float) * (size_t)(x.tq * x.qs));
      assert_memory_equal(l1, x.lse, sizeof(float) * (size_t)(x.tq * c.H));
    }
    rove_plan_destroy(p);
  }
  free(o1), free(l1);
  unmake(&x);
}

static void expect(const rove_plan *p, const rove_varlen_args *a, rove_status want, const vdata *x,
                   const char *what) {
  for (int64_t i = 0; i < x->tq * x->qs; i++) x->out[i] = 321.0f;
  const rove_status st = rove_attention_varlen(p, a);
  if (st != want) fail_msg("%s: got %s", what, rove_status_string(st));
  for (int64_t i = 0; i < x->tq * x->qs; i++)
    if (x->out[i] != 321.0f) fail_msg("%s: out written on failure", what);
}

static void test_bad_input(void **state) {
  (void)state;
  const vcase c = {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 32, 1, 1, 0, 0.0f};
  vdata x;
  make(&c, &x, 9);
  rove_attention_config cfg = config(&c, 1);
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&cfg, &p), ROVE_OK);
  const rove_varlen_args good = vargs(&c, &x);
  rove_varlen_args a = good;
  const rove_status inv = ROVE_ERR_INVALID_ARGUMENT;
  assert_int_equal(rove_attention_varlen(NULL, &a), inv);
  assert_int_equal(rove_attention_varlen(p, NULL), inv);
  a.n_seqs = 0;
  expect(p, &a, inv, &x, "n_seqs 0");
  a = good, a.cu_seqlens_k = NULL;
  expect(p, &a, inv, &x, "NULL cu_seqlens_k");
  int32_t cu[NS + 1];
  memcpy(cu, x.cq, sizeof cu);
  cu[0] = 1;
  a = good, a.cu_seqlens_q = cu;
  expect(p, &a, inv, &x, "cu[0] != 0");
  memcpy(cu, x.cq, sizeof cu);
  cu[3] = cu[2] - 1;
  expect(p, &a, inv, &x, "decreasing cu");
  a = good, a.kv_angles = NULL;
  expect(p, &a, inv, &x, "one angle array");
  a = good, a.q_stride = 3;
  expect(p, &a, inv, &x, "stride below width");
  a = good, a.lse = x.out + 5; /* overlaps out */
  expect(p, &a, inv, &x, "lse overlaps out");
  a = good, a.k = x.out; /* out of every sequence against k of others */
  expect(p, &a, inv, &x, "out overlaps k");
  const double keep = x.ka[x.ck[4] * 2 * 16 + 3];
  x.ka[x.ck[4] * 2 * 16 + 3] = NAN; /* in the fifth sequence: nothing of the first four written */
  a = good;
  expect(p, &a, inv, &x, "NaN angle in a later sequence");
  x.ka[x.ck[4] * 2 * 16 + 3] = keep;
  assert_int_equal(rove_attention_varlen(p, &a), ROVE_OK);
  rove_plan_destroy(p);
  unmake(&x);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_against_calls_and_oracle),
                                     cmocka_unit_test(test_threads),
                                     cmocka_unit_test(test_bad_input)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
