/* SPDX-License-Identifier: MIT */
/* rove_attention_varlen: packed sequences of different lengths (queries < keys, one
 * query, no queries, no keys) against the double oracle per sequence and bitwise against
 * one rove_attention_forward per sequence (outputs and the [n_heads][total_q] LSE), for
 * RoVE / RoPE / none, causal and not, windows, softcap, GQA, explicit positions, explicit
 * angles, padded token strides; bitwise for 1 and 2 threads; outputs untouched on every
 * rejected input (bad cu arrays, overlap across sequences, a non-finite angle or sink);
 * attention sinks (also on sequences without keys: LSE = the sink); bf16 / fp16
 * tensors (rove_attention_varlen_typed) bitwise against rove_attention_forward_typed per
 * sequence, and its bad types. Links the public librove.so. */
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
  int sinks; /* attention sinks: one logit per head (H <= 8) */
} vcase;

typedef struct {
  int32_t cq[NS + 1], ck[NS + 1];
  int64_t tq, tk, qs, ks;
  float *q, *k, *v, *out, *lse;
  int32_t *qp, *kp;
  double *qa, *ka;
  float sk[8];
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
  rove_rng_fill(&r, x->sk, 8, -2, 3);
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
  if (c->sinks) a.sinks = x->sk;
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
  if (c->sinks) a.sinks = x->sk;
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
    if (LK[s] == 0) { /* no keys: 0 and -inf (with sinks: the head's sink) */
      for (int i = 0; i < LQ[s]; i++)
        for (int64_t e = 0; e < w; e++) assert_true(x.out[(x.cq[s] + i) * x.qs + e] == 0.0f);
      for (int h = 0; h < c->H; h++)
        for (int i = 0; i < LQ[s]; i++)
          assert_true(x.lse[h * x.tq + x.cq[s] + i] == (c->sinks ? x.sk[h] : -INFINITY));
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
      "  rot 0x%x causal %d window %d H %d:%d d %d pos %d ang %d sinks %d: max |err| vs oracle %.2g\n",
      c->rot, c->causal, c->window, c->H, c->Hkv, c->d, c->positions, c->angles, c->sinks, worst);
  assert_true(worst < 2e-5);
  rove_plan_destroy(p);
  unmake(&x);
}

static void test_against_calls_and_oracle(void **state) {
  (void)state;
  static const vcase cases[] = {
      {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 32, 0, 0, 0, 0.0f, 0},
      {ROVE_ROTATE_ROPE, 0, 0, 2, 2, 16, 0, 0, 3, 0.0f, 0},
      {0, 1, 9, 4, 1, 32, 1, 0, 0, 0.0f, 0},
      {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 64, 1, 0, 5, 30.0f, 0},
      {ROVE_ROTATE_ROVE, 0, 12, 2, 1, 16, 1, 0, 0, 0.0f, 0},
      {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 32, 1, 1, 0, 0.0f, 0},
      {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 32, 0, 0, 0, 0.0f, 1},
      {ROVE_ROTATE_ROPE, 1, 9, 4, 1, 64, 1, 0, 5, 30.0f, 1},
      {ROVE_ROTATE_ROVE, 0, 0, 2, 2, 16, 1, 1, 0, 0.0f, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], 100 + i);
}

static void test_threads(void **state) {
  (void)state;
  const vcase c = {ROVE_ROTATE_ROVE, 1, 0, 8, 2, 64, 0, 0, 0, 0.0f, 1};
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

/* Long sequences (over 1000 keys and enough query tiles not to split keys: each a group of
 * its own) among short ones (sharing a group): bitwise the per-sequence calls, for 1 and
 * 2 threads. */
static void test_long_among_short(void **state) {
  (void)state;
  enum { N = 4, H = 8, HKV = 2, D = 32 };
  static const int32_t lq[N] = {1100, 5, 1030, 17}, lk[N] = {1100, 40, 1100, 17};
  int32_t cq[N + 1] = {0}, ck[N + 1] = {0};
  for (int s = 0; s < N; s++) cq[s + 1] = cq[s] + lq[s], ck[s + 1] = ck[s] + lk[s];
  const int64_t wq = H * D, wk = HKV * D, tq = cq[N], tk = ck[N];
  float *q = malloc(sizeof(float) * (size_t)(tq * wq)), *k = malloc(sizeof(float) * (size_t)(tk * wk));
  float *v = malloc(sizeof(float) * (size_t)(tk * wk)), *out = malloc(sizeof(float) * (size_t)(tq * wq));
  float *lse = malloc(sizeof(float) * (size_t)(tq * H)), *o1 = malloc(sizeof(float) * (size_t)(tq * wq));
  float *l1 = malloc(sizeof(float) * (size_t)(tq * H)), *os = malloc(sizeof(float) * (size_t)(1100 * wq));
  float *ls = malloc(sizeof(float) * (size_t)(1100 * H));
  assert_true(q && k && v && out && lse && o1 && l1 && os && ls);
  rove_rng r;
  rove_rng_seed(&r, 31);
  rove_rng_fill(&r, q, tq * wq, -1, 1);
  rove_rng_fill(&r, k, tk * wk, -1, 1);
  rove_rng_fill(&r, v, tk * wk, -1, 1);
  for (int t = 1; t <= 2; t++) {
    rove_attention_config cfg;
    rove_attention_config_init(&cfg, H, HKV, D);
    cfg.n_threads = t;
    rove_plan *p = NULL;
    assert_int_equal(rove_plan_create(&cfg, &p), ROVE_OK);
    rove_varlen_args a;
    memset(&a, 0, sizeof a);
    a.n_seqs = N, a.cu_seqlens_q = cq, a.cu_seqlens_k = ck;
    a.q = q, a.k = k, a.v = v, a.out = out, a.lse = lse;
    assert_int_equal(rove_attention_varlen(p, &a), ROVE_OK);
    if (t == 1) {
      memcpy(o1, out, sizeof(float) * (size_t)(tq * wq));
      memcpy(l1, lse, sizeof(float) * (size_t)(tq * H));
      for (int s = 0; s < N; s++) {
        rove_attention_args b;
        memset(&b, 0, sizeof b);
        b.batch = 1, b.q_len = lq[s], b.kv_len = lk[s];
        b.q = q + cq[s] * wq, b.k = k + ck[s] * wk, b.v = v + ck[s] * wk, b.out = os, b.lse = ls;
        assert_int_equal(rove_attention_forward(p, &b), ROVE_OK);
        assert_memory_equal(os, out + cq[s] * wq, sizeof(float) * (size_t)(lq[s] * wq));
        for (int h = 0; h < H; h++)
          assert_memory_equal(ls + h * lq[s], lse + h * tq + cq[s], sizeof(float) * (size_t)lq[s]);
      }
    } else {
      assert_memory_equal(o1, out, sizeof(float) * (size_t)(tq * wq));
      assert_memory_equal(l1, lse, sizeof(float) * (size_t)(tq * H));
    }
    rove_plan_destroy(p);
  }
  free(q), free(k), free(v), free(out), free(lse), free(o1), free(l1), free(os), free(ls);
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
  const vcase c = {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 32, 1, 1, 0, 0.0f, 0};
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
  { /* out or lse over any other array the call reads (a later group reads its slices
     * after earlier groups wrote): the cu arrays, positions, angles */
    const int64_t no = x.tq * x.qs, nl = 4 * x.tq, na = 2 * 16;
    const void *src[7] = {x.cq, x.ck, x.qp, x.kp, x.qa, x.ka, x.sk};
    const size_t bytes[7] = {sizeof x.cq, sizeof x.ck, sizeof(int32_t) * (size_t)x.tq,
                             sizeof(int32_t) * (size_t)x.tk, sizeof(double) * (size_t)(x.tq * na),
                             sizeof(double) * (size_t)(x.tk * na), sizeof(float) * 4};
    for (int i = 0; i < 7; i++)
      for (int lse = 0; lse < 2; lse++) {
        void *copy;
        float *o = rove_out_over(lse ? nl : no, src[i], bytes[i], &copy);
        assert_non_null(o);
        a = good;
        switch (i) {
          case 0: a.cu_seqlens_q = copy; break;
          case 1: a.cu_seqlens_k = copy; break;
          case 2: a.q_pos = copy; break;
          case 3: a.kv_pos = copy; break;
          case 4: a.q_angles = copy; break;
          case 5: a.kv_angles = copy; break;
          default: a.sinks = copy; break;
        }
        if (lse)
          a.lse = o;
        else
          a.out = o;
        if (rove_attention_varlen(p, &a) != inv) fail_msg("%s over input %d accepted", lse ? "lse" : "out", i);
        assert_true(rove_out_over_untouched(o, lse ? nl : no));
        for (int64_t j = 0; j < no; j++) assert_true(x.out[j] == 321.0f);
        free(o);
      }
    a = good;
  }
  const double keep = x.ka[x.ck[4] * 2 * 16 + 3];
  x.ka[x.ck[4] * 2 * 16 + 3] = NAN; /* in the fifth sequence: nothing of the first four written */
  a = good;
  expect(p, &a, inv, &x, "NaN angle in a later sequence");
  x.ka[x.ck[4] * 2 * 16 + 3] = keep;
  a = good, a.sinks = x.sk;
  x.sk[3] = INFINITY; /* a sink must be finite */
  expect(p, &a, inv, &x, "infinite sink");
  x.sk[3] = 0.5f;
  a = good;
  assert_int_equal(rove_attention_varlen(p, &a), ROVE_OK);
  rove_plan_destroy(p);
  unmake(&x);
}

/* ---- typed tensors ------------------------------------------------------------------ */

/* A bf16 / f16 bit pattern of a value in about (-2, 2), any sign (x in [-1, 1]): the top
 * half of the float for bf16; for f16, exponent 13..15 with 10 random mantissa bits. */
static uint16_t half_bits(float x, rove_dtype t, rove_rng *r) {
  if (t == ROVE_DTYPE_BF16) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)(u >> 16);
  }
  const uint16_t sign = x < 0 ? 0x8000u : 0u, ex = (uint16_t)(13 + rove_rng_u64(r) % 3);
  return (uint16_t)(sign | ex << 10 | (rove_rng_u64(r) & 0x3FFu));
}

/* n_rows x stride elements of type t from the floats x (F32: a copy). */
static void *typed_copy(const float *x, int64_t n, rove_dtype t, rove_rng *r) {
  if (t == ROVE_DTYPE_F32) {
    float *y = malloc(sizeof(float) * (size_t)n);
    assert_non_null(y);
    memcpy(y, x, sizeof(float) * (size_t)n);
    return y;
  }
  uint16_t *y = malloc(2 * (size_t)n);
  assert_non_null(y);
  for (int64_t i = 0; i < n; i++) y[i] = half_bits(x[i], t, r);
  return y;
}

static const void *elem(const void *x, rove_dtype t, int64_t e) {
  return (const char *)x + e * (t == ROVE_DTYPE_F32 ? 4 : 2);
}

/* Every sequence of the typed varlen call equals rove_attention_forward_typed on its
 * slices, bit for bit (out and LSE), for type mixes with padded token strides; the
 * stride padding of out is never written. */
static void test_typed(void **state) {
  (void)state;
  const vcase c = {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 32, 1, 0, 3, 0.0f, 0};
  static const rove_tensor_types mixes[] = {
      {ROVE_DTYPE_BF16, ROVE_DTYPE_BF16, ROVE_DTYPE_BF16, ROVE_DTYPE_BF16},
      {ROVE_DTYPE_F16, ROVE_DTYPE_F16, ROVE_DTYPE_F16, ROVE_DTYPE_F16},
      {ROVE_DTYPE_BF16, ROVE_DTYPE_F16, ROVE_DTYPE_F32, ROVE_DTYPE_F16},
      {ROVE_DTYPE_F32, ROVE_DTYPE_BF16, ROVE_DTYPE_BF16, ROVE_DTYPE_F32},
  };
  vdata x;
  make(&c, &x, 11);
  const int64_t w = (int64_t)c.H * c.d;
  for (int threads = 1; threads <= 2; threads++) {
    rove_attention_config cfg = config(&c, threads);
    rove_plan *p = NULL;
    assert_int_equal(rove_plan_create(&cfg, &p), ROVE_OK);
    for (size_t mi = 0; mi < sizeof mixes / sizeof *mixes; mi++) {
      const rove_tensor_types *ty = &mixes[mi];
      rove_rng r;
      rove_rng_seed(&r, 40 + mi);
      void *q = typed_copy(x.q, x.tq * x.qs, ty->q, &r), *k = typed_copy(x.k, x.tk * x.ks, ty->k, &r);
      void *v = typed_copy(x.v, x.tk * x.ks, ty->v, &r);
      const size_t oe = ty->out == ROVE_DTYPE_F32 ? 4 : 2;
      unsigned char *out = malloc(oe * (size_t)(x.tq * x.qs)), *o1 = malloc(oe * (size_t)(LQ[4] * w));
      float *l1 = malloc(sizeof(float) * (size_t)(LQ[4] * c.H));
      assert_true(out && o1 && l1);
      memset(out, 0x5A, oe * (size_t)(x.tq * x.qs));
      rove_varlen_args a = vargs(&c, &x);
      a.q = q, a.k = k, a.v = v, a.out = (float *)out;
      assert_int_equal(rove_attention_varlen_typed(p, &a, ty), ROVE_OK);
      for (int s = 0; s < NS; s++) {
        if (LQ[s] > 0 && LK[s] == 0) /* no keys: 0 (all-zero bits in every type) */
          for (int i = 0; i < LQ[s]; i++)
            for (size_t e = 0; e < oe * (size_t)w; e++)
              assert_int_equal(out[(size_t)((x.cq[s] + i) * x.qs) * oe + e], 0);
        if (LQ[s] == 0 || LK[s] == 0) continue;
        rove_attention_args b = seq_call(&c, &x, s, (float *)o1, l1);
        b.q = elem(q, ty->q, x.cq[s] * x.qs);
        b.k = elem(k, ty->k, x.ck[s] * x.ks), b.v = elem(v, ty->v, x.ck[s] * x.ks);
        b.out_stride = 0; /* o1: dense [LQ][H][d] of the out type */
        assert_int_equal(rove_attention_forward_typed(p, &b, ty), ROVE_OK);
        for (int i = 0; i < LQ[s]; i++) {
          assert_memory_equal(o1 + (size_t)(i * w) * oe, out + (size_t)((x.cq[s] + i) * x.qs) * oe,
                              oe * (size_t)w);
          for (int h = 0; h < c.H; h++)
            assert_true(memcmp(&l1[h * LQ[s] + i], &x.lse[h * x.tq + x.cq[s] + i], 4) == 0);
        }
      }
      for (int64_t t = 0; t < x.tq; t++) /* the stride padding is never written */
        for (int64_t e = w * (int64_t)oe; e < x.qs * (int64_t)oe; e++)
          assert_int_equal(out[t * x.qs * (int64_t)oe + e], 0x5A);
      free(q), free(k), free(v), free(out), free(o1), free(l1);
    }
    rove_plan_destroy(p);
  }
  unmake(&x);
}

/* Bad types are rejected before anything is written; overlap is judged in bytes of the
 * types (a bf16 out reaching into q). */
static void test_typed_bad_input(void **state) {
  (void)state;
  const vcase c = {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 32, 0, 0, 0, 0.0f, 0};
  vdata x;
  make(&c, &x, 13);
  rove_attention_config cfg = config(&c, 1);
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&cfg, &p), ROVE_OK);
  const rove_varlen_args good = vargs(&c, &x);
  const rove_tensor_types f32 = {ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_F32};
  const rove_dtype bad[] = {ROVE_DTYPE_Q8, ROVE_DTYPE_COUNT, (rove_dtype)-1};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    for (int field = 0; field < 4; field++) {
      rove_tensor_types t = f32;
      rove_dtype *f[4] = {&t.q, &t.k, &t.v, &t.out};
      *f[field] = bad[i];
      for (int64_t e = 0; e < x.tq * x.qs; e++) x.out[e] = 321.0f;
      assert_int_equal(rove_attention_varlen_typed(p, &good, &t), ROVE_ERR_INVALID_ARGUMENT);
      for (int64_t e = 0; e < x.tq * x.qs; e++) assert_true(x.out[e] == 321.0f);
    }
  /* overlap in bytes of the types: bf16 q and out in one buffer, out right after q's
   * tq * qs elements (adjacent: accepted), then one element earlier (rejected, nothing
   * written) */
  rove_tensor_types t = {ROVE_DTYPE_BF16, ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_BF16};
  const int64_t n = x.tq * x.qs;
  uint16_t *buf = malloc(2 * (size_t)(2 * n + 1));
  assert_non_null(buf);
  rove_rng r;
  rove_rng_seed(&r, 5);
  for (int64_t e = 0; e < n; e++) buf[e] = half_bits(x.q[e], ROVE_DTYPE_BF16, &r);
  rove_varlen_args a = good;
  a.q = (const float *)buf, a.out = (float *)(buf + n);
  assert_int_equal(rove_attention_varlen_typed(p, &a, &t), ROVE_OK);
  for (int64_t e = 0; e <= n; e++) buf[n + e] = 0x7E7Eu;
  a.out = (float *)(buf + n - 1);
  assert_int_equal(rove_attention_varlen_typed(p, &a, &t), ROVE_ERR_INVALID_ARGUMENT);
  for (int64_t e = 0; e <= n; e++) assert_int_equal(buf[n + e], 0x7E7Eu);
  free(buf);
  /* NULL types: the F32 call, bit for bit */
  float *o1 = malloc(sizeof(float) * (size_t)(x.tq * x.qs));
  assert_non_null(o1);
  assert_int_equal(rove_attention_varlen(p, &good), ROVE_OK);
  memcpy(o1, x.out, sizeof(float) * (size_t)(x.tq * x.qs));
  assert_int_equal(rove_attention_varlen_typed(p, &good, NULL), ROVE_OK);
  assert_memory_equal(o1, x.out, sizeof(float) * (size_t)(x.tq * x.qs));
  assert_int_equal(rove_attention_varlen_typed(p, &good, &f32), ROVE_OK);
  assert_memory_equal(o1, x.out, sizeof(float) * (size_t)(x.tq * x.qs));
  free(o1);
  rove_plan_destroy(p);
  unmake(&x);
}

/* Empty tensors: NULL q / out with no queries at all, NULL k / v with no keys at all (the
 * sequences get 0 and LSE -inf); a NULL tensor that has tokens is rejected. A one-token
 * tensor may have any stride, and the empty sequence after it forms no pointer from it
 * (UBSan: no overflow in the offset). */
static void test_empty_tensors(void **state) {
  (void)state;
  const vcase c = {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 32, 0, 0, 0, 0.0f, 0};
  vdata x;
  make(&c, &x, 17);
  rove_attention_config cfg = config(&c, 1);
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&cfg, &p), ROVE_OK);
  const int32_t zero[3] = {0, 0, 0}, one[3] = {0, 1, 1}, three[3] = {0, 3, 3};
  rove_varlen_args a;
  memset(&a, 0, sizeof a);
  a.n_seqs = 2, a.cu_seqlens_q = zero, a.cu_seqlens_k = three, a.k = x.k, a.v = x.v;
  assert_int_equal(rove_attention_varlen(p, &a), ROVE_OK); /* no queries: nothing to do */
  a.cu_seqlens_q = one, a.cu_seqlens_k = zero, a.q = x.q, a.out = x.out, a.lse = x.lse;
  a.k = a.v = NULL;
  for (int64_t e = 0; e < 4 * 32; e++) x.out[e] = 9.0f;
  assert_int_equal(rove_attention_varlen(p, &a), ROVE_OK); /* no keys: 0 and -inf */
  for (int64_t e = 0; e < 4 * 32; e++) assert_true(x.out[e] == 0.0f);
  for (int h = 0; h < 4; h++) assert_true(x.lse[h] == -INFINITY);
  a.cu_seqlens_k = three;
  assert_int_equal(rove_attention_varlen(p, &a), ROVE_ERR_INVALID_ARGUMENT); /* keys, NULL k */
  a.k = x.k, a.v = x.v, a.q = NULL;
  assert_int_equal(rove_attention_varlen(p, &a), ROVE_ERR_INVALID_ARGUMENT); /* queries, NULL q */
  a.q = x.q;
  a.q_stride = a.out_stride = INT64_MAX / 2; /* one query token: any stride */
  assert_int_equal(rove_attention_varlen(p, &a), ROVE_OK);
  float o1[4 * 32], l1[4];
  rove_attention_args b;
  memset(&b, 0, sizeof b);
  b.batch = 1, b.q_len = 1, b.kv_len = 3, b.q = x.q, b.k = x.k, b.v = x.v, b.out = o1, b.lse = l1;
  assert_int_equal(rove_attention_forward(p, &b), ROVE_OK);
  assert_memory_equal(o1, x.out, sizeof o1);
  rove_plan_destroy(p);
  unmake(&x);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_against_calls_and_oracle),
                                     cmocka_unit_test(test_threads),
                                     cmocka_unit_test(test_long_among_short),
                                     cmocka_unit_test(test_bad_input),
                                     cmocka_unit_test(test_typed),
                                     cmocka_unit_test(test_typed_bad_input),
                                     cmocka_unit_test(test_empty_tensors)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
