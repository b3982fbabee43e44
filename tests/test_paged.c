/* SPDX-License-Identifier: MIT */
/* The paged KV cache and batched decode (rove_paged_*): against one contiguous
 * rove_kv_cache per sequence holding the same tokens (bitwise for block sizes that are
 * multiples of 64, and of 16 and more on AVX2 / AVX-512; else to 2e-6), for RoVE / RoPE / none, causal and not, windows,
 * softcap, GQA, every storage type, explicit angles, 1..16 query rows per sequence, block
 * sizes 1 .. 128, tokens appended in interleaved chunks so that blocks scatter; the
 * caller's block tables (rove_paged_attention) equal the cache's own call; 1 vs 2 threads
 * bitwise; fork / copy-on-write with divergent continuations; shift per sequence (a
 * sharing sibling keeps its rows); pool exhaustion, bad block tables and bad input ->
 * statuses with nothing changed; random operation sequences against a reference model
 * (raw K/V and positions per sequence, attended with rove_attention_forward). Links the
 * public librove.so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MAXS 5

typedef struct {
  uint32_t rot;
  int causal, window, H, Hkv, d, bs;
  float softcap;
  rove_dtype type;
  int angles;
  int sinks; /* attention sinks, one logit per head */
} pcase;

static rove_plan *make_plan(const pcase *c, int threads) {
  rove_attention_config cfg;
  rove_attention_config_init(&cfg, c->H, c->Hkv, c->d);
  cfg.rotate = c->rot, cfg.causal = c->causal, cfg.window = c->window, cfg.softcap = c->softcap;
  cfg.n_threads = threads;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&cfg, &p), ROVE_OK);
  return p;
}

static float *randf(rove_rng *r, int64_t n) {
  float *x = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  assert_non_null(x);
  rove_rng_fill(r, x, n, -1, 1);
  return x;
}

static double *randa(rove_rng *r, int64_t n) {
  double *x = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  assert_non_null(x);
  for (int64_t i = 0; i < n; i++) x[i] = rove_rng_uniform(r, -40, 40);
  return x;
}

/* Sequences of lengths len[s] with query rows nq[s]: the same tokens in one contiguous
 * cache per sequence and in a paged cache (appended in interleaved chunks). */
typedef struct {
  int n;
  int32_t len[MAXS], nq[MAXS], seq[MAXS], cu[MAXS + 1];
  float *k[MAXS], *v[MAXS], *q;
  double *ka[MAXS], *qa;
  float *sk; /* [H] sinks */
  rove_kv_cache *kc[MAXS];
  rove_paged_cache *pc;
} world;

static void build(const pcase *c, const rove_plan *p, world *w, int n, const int32_t *len,
                  const int32_t *nq, uint64_t seed) {
  rove_rng r;
  rove_rng_seed(&r, seed);
  const int64_t wkv = (int64_t)c->Hkv * c->d, aw = (int64_t)c->Hkv * c->d / 2;
  memset(w, 0, sizeof *w);
  w->n = n;
  int64_t blocks = 0;
  for (int s = 0; s < n; s++) blocks += (len[s] + c->bs - 1) / c->bs;
  assert_int_equal(rove_paged_cache_create(p, c->type, c->bs, (int32_t)blocks + 3, MAXS, &w->pc),
                   ROVE_OK);
  for (int s = 0; s < n; s++) {
    w->len[s] = len[s], w->nq[s] = nq[s], w->cu[s + 1] = w->cu[s] + nq[s];
    w->k[s] = randf(&r, len[s] * wkv), w->v[s] = randf(&r, len[s] * wkv);
    w->ka[s] = randa(&r, len[s] * aw);
    assert_int_equal(rove_kv_cache_create_typed(p, 1, len[s] > 0 ? len[s] : 1, c->type, &w->kc[s]),
                     ROVE_OK);
    if (len[s] > 0) {
      const rove_status st =
          c->angles ? rove_kv_cache_append_angles(w->kc[s], len[s], w->k[s], 0, w->v[s], 0, NULL, w->ka[s])
                    : rove_kv_cache_append(w->kc[s], len[s], w->k[s], 0, w->v[s], 0, NULL);
      assert_int_equal(st, ROVE_OK);
    }
    assert_int_equal(rove_paged_seq_create(w->pc, &w->seq[s]), ROVE_OK);
  }
  /* interleaved chunks of 1 .. 40 tokens, so each sequence's blocks lie apart */
  int32_t done[MAXS] = {0};
  for (int left = 1; left;) {
    left = 0;
    for (int s = 0; s < n; s++) {
      if (done[s] == len[s]) continue;
      int32_t m = 1 + (int32_t)(rove_rng_u64(&r) % 40);
      if (m > len[s] - done[s]) m = len[s] - done[s];
      assert_int_equal(rove_paged_append(w->pc, w->seq[s], m, w->k[s] + done[s] * wkv, 0,
                                         w->v[s] + done[s] * wkv, 0, ROVE_DTYPE_F32, NULL,
                                         c->angles ? w->ka[s] + done[s] * aw : NULL),
                       ROVE_OK);
      done[s] += m;
      left = 1;
    }
  }
  for (int s = 0; s < n; s++) assert_int_equal(rove_paged_seq_length(w->pc, w->seq[s]), len[s]);
  w->q = randf(&r, (int64_t)w->cu[n] * c->H * c->d);
  w->qa = randa(&r, (int64_t)w->cu[n] * aw);
  w->sk = randf(&r, c->H);
  for (int h = 0; h < c->H; h++) w->sk[h] *= 3.0f;
}

static void unbuild(world *w) {
  for (int s = 0; s < w->n; s++) {
    free(w->k[s]), free(w->v[s]), free(w->ka[s]);
    rove_kv_cache_destroy(w->kc[s]);
  }
  free(w->q), free(w->qa), free(w->sk);
  rove_paged_cache_destroy(w->pc);
}

static rove_paged_args pargs(const pcase *c, const world *w, float *out, float *lse) {
  rove_paged_args a;
  memset(&a, 0, sizeof a);
  a.n_seqs = w->n, a.cu_seqlens_q = w->cu, a.q = w->q, a.out = out, a.lse = lse;
  a.q_angles = c->angles ? w->qa : NULL;
  a.sinks = c->sinks ? w->sk : NULL;
  return a;
}

/* Per sequence: the contiguous cache's output and LSE in the packed layouts. */
static void reference(const pcase *c, const world *w, float *out, float *lse) {
  const int64_t wq = (int64_t)c->H * c->d, tq = w->cu[w->n], aw = (int64_t)c->Hkv * c->d / 2;
  for (int s = 0; s < w->n; s++) {
    if (w->nq[s] == 0) continue;
    float *l = malloc(sizeof(float) * (size_t)(c->H * w->nq[s]));
    rove_attention_args a;
    memset(&a, 0, sizeof a);
    a.batch = 1, a.q_len = w->nq[s], a.q = w->q + w->cu[s] * wq, a.out = out + w->cu[s] * wq;
    a.lse = l, a.q_angles = c->angles ? w->qa + w->cu[s] * aw : NULL;
    a.sinks = c->sinks ? w->sk : NULL;
    assert_int_equal(rove_kv_cache_attention(w->kc[s], &a), ROVE_OK);
    for (int h = 0; h < c->H; h++)
      memcpy(lse + h * tq + w->cu[s], l + h * w->nq[s], sizeof(float) * (size_t)w->nq[s]);
    free(l);
  }
}

static void expect_close(const float *got, const float *want, int64_t n, int bitwise) {
  if (bitwise) {
    assert_memory_equal(got, want, sizeof(float) * (size_t)n);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    if (isinf(want[i])) {
      assert_true(got[i] == want[i]);
      continue;
    }
    const double e = fabs((double)got[i] - want[i]);
    if (e > 2e-6 * (1.0 + fabs((double)want[i])))
      fail_msg("element %lld: %.9g vs %.9g", (long long)i, (double)got[i], (double)want[i]);
  }
}

static void run_case(const pcase *c, int n, const int32_t *len, const int32_t *nq, uint64_t seed) {
  rove_plan *p = make_plan(c, 2);
  world w;
  build(c, p, &w, n, len, nq, seed);
  const int64_t tq = w.cu[n], wq = (int64_t)c->H * c->d;
  float *out = malloc(sizeof(float) * (size_t)(tq * wq)), *lse = malloc(sizeof(float) * (size_t)(tq * c->H));
  float *ref = malloc(sizeof(float) * (size_t)(tq * wq)), *rlse = malloc(sizeof(float) * (size_t)(tq * c->H));
  float *ext = malloc(sizeof(float) * (size_t)(tq * wq)), *else_ = malloc(sizeof(float) * (size_t)(tq * c->H));
  reference(c, &w, ref, rlse);
  rove_paged_args a = pargs(c, &w, out, lse);
  assert_int_equal(rove_paged_cache_attention(w.pc, w.seq, &a), ROVE_OK);
  /* bitwise: blocks that are multiples of the row kernel's 64-key block, and on AVX2 /
   * AVX-512 blocks of 16 and more that its row kernel reads in place (one call over the
   * blocks, rove_rows_args.blocks: fp32 rows, or typed rows of whole vectors) */
  const rove_isa isa = rove_best_isa();
  const int bitwise = c->bs % 64 == 0 ||
                      (c->bs >= 16 && (isa == ROVE_ISA_AVX2 || isa == ROVE_ISA_AVX512) &&
                       (c->type == ROVE_DTYPE_F32 || c->d % 8 == 0));
  expect_close(out, ref, tq * wq, bitwise);
  expect_close(lse, rlse, tq * c->H, bitwise);
  /* the caller's block tables and lengths: the same bits */
  int32_t tables[MAXS * 1600], lens[MAXS], nb;
  for (int s = 0; s < n; s++) {
    assert_int_equal(rove_paged_seq_block_table(w.pc, w.seq[s], tables + s * 1600, 1600, &nb), ROVE_OK);
    assert_int_equal(nb, (len[s] + c->bs - 1) / c->bs);
    lens[s] = len[s];
  }
  rove_paged_kv kv;
  assert_int_equal(rove_paged_cache_view(w.pc, &kv), ROVE_OK);
  rove_paged_args e = pargs(c, &w, ext, else_);
  e.seq_lens = lens, e.block_tables = tables, e.max_blocks = 1600;
  assert_int_equal(rove_paged_attention(p, &kv, &e), ROVE_OK);
  assert_memory_equal(ext, out, sizeof(float) * (size_t)(tq * wq));
  assert_memory_equal(else_, lse, sizeof(float) * (size_t)(tq * c->H));
  /* the same pool token-major (flash-attn's order, read in place): the same bits; Q8 pools
   * are refused that way */
  {
    const size_t es = rove_test_dtype_size(c->type);
    const size_t row = es * (size_t)c->d;
    const size_t bytes = (size_t)kv.n_blocks * (size_t)c->bs * (size_t)c->Hkv * row;
    char *tk = malloc(bytes), *tv = malloc(bytes);
    assert_true(tk && tv);
    for (int64_t b = 0; b < kv.n_blocks; b++)
      for (int64_t h = 0; h < c->Hkv; h++)
        for (int64_t r = 0; r < c->bs; r++) {
          const size_t hm = (size_t)(((b * c->Hkv + h) * c->bs + r)) * row;
          const size_t tmo = (size_t)(((b * c->bs + r) * c->Hkv + h)) * row;
          memcpy(tk + tmo, (const char *)kv.k + hm, row);
          memcpy(tv + tmo, (const char *)kv.v + hm, row);
        }
    rove_paged_kv tm = kv;
    tm.k = tk, tm.v = tv, tm.layout = ROVE_PAGED_TOKEN_MAJOR;
    memset(ext, 0, sizeof(float) * (size_t)(tq * wq));
    if (c->type == ROVE_DTYPE_Q8) {
      assert_int_equal(rove_paged_attention(p, &tm, &e), ROVE_ERR_UNSUPPORTED);
    } else {
      assert_int_equal(rove_paged_attention(p, &tm, &e), ROVE_OK);
      assert_memory_equal(ext, out, sizeof(float) * (size_t)(tq * wq));
      assert_memory_equal(else_, lse, sizeof(float) * (size_t)(tq * c->H));
    }
    tm.layout = 2;
    assert_int_equal(rove_paged_attention(p, &tm, &e), ROVE_ERR_INVALID_ARGUMENT);
    /* K and V interleaved per block ([n_blocks][2][block], FlashInfer's 5-D caches) in
     * either layout, through block_stride: the same bits; Q8 pools are dense only */
    const size_t blk = bytes / (size_t)kv.n_blocks; /* bytes of one block */
    char *kvb = malloc(2 * bytes);
    assert_non_null(kvb);
    for (int layout = 0; layout < 2; layout++) {
      for (int64_t b = 0; b < kv.n_blocks; b++) {
        memcpy(kvb + (size_t)(2 * b) * blk, (layout ? tk : (const char *)kv.k) + (size_t)b * blk, blk);
        memcpy(kvb + (size_t)(2 * b + 1) * blk, (layout ? tv : (const char *)kv.v) + (size_t)b * blk, blk);
      }
      rove_paged_kv il = kv;
      il.k = kvb, il.v = kvb + blk, il.layout = layout;
      il.block_stride = (int64_t)(2 * blk / es);
      memset(ext, 0, sizeof(float) * (size_t)(tq * wq));
      if (c->type == ROVE_DTYPE_Q8) {
        assert_int_equal(rove_paged_attention(p, &il, &e), ROVE_ERR_UNSUPPORTED);
        continue;
      }
      assert_int_equal(rove_paged_attention(p, &il, &e), ROVE_OK);
      assert_memory_equal(ext, out, sizeof(float) * (size_t)(tq * wq));
      assert_memory_equal(else_, lse, sizeof(float) * (size_t)(tq * c->H));
      il.block_stride = (int64_t)(blk / es) - 1; /* below a block */
      assert_int_equal(rove_paged_attention(p, &il, &e), ROVE_ERR_INVALID_ARGUMENT);
    }
    if (c->type != ROVE_DTYPE_Q8) { /* a stride one element past a block: not a multiple of
                                      * a row's step, so to float rounding (rove.h) */
      const size_t st = blk + es;
      char *gk = calloc((size_t)kv.n_blocks, st), *gv = calloc((size_t)kv.n_blocks, st);
      assert_true(gk && gv);
      for (int64_t b = 0; b < kv.n_blocks; b++) {
        memcpy(gk + (size_t)b * st, (const char *)kv.k + (size_t)b * blk, blk);
        memcpy(gv + (size_t)b * st, (const char *)kv.v + (size_t)b * blk, blk);
      }
      rove_paged_kv gp = kv;
      gp.k = gk, gp.v = gv, gp.block_stride = (int64_t)(st / es);
      float *glse = malloc(sizeof(float) * (size_t)(tq * c->H));
      assert_non_null(glse);
      e.lse = glse;
      assert_int_equal(rove_paged_attention(p, &gp, &e), ROVE_OK);
      expect_close(ext, out, tq * wq, c->bs % 64 == 0);
      expect_close(glse, lse, tq * c->H, c->bs % 64 == 0);
      e.lse = else_;
      free(gk), free(gv), free(glse);
    }
    kv.block_stride = (int64_t)(blk / es); /* dense, named: as 0 */
    memset(ext, 0, sizeof(float) * (size_t)(tq * wq));
    assert_int_equal(rove_paged_attention(p, &kv, &e), ROVE_OK);
    assert_memory_equal(ext, out, sizeof(float) * (size_t)(tq * wq));
    kv.block_stride = 0;
    free(kvb);
    free(tk), free(tv);
  }
  free(out), free(lse), free(ref), free(rlse), free(ext), free(else_);
  unbuild(&w);
  rove_plan_destroy(p);
}

static void test_equals_contiguous(void **state) {
  (void)state;
  const pcase cases[] = {
      {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 64, 16, 0, ROVE_DTYPE_F32, 0, 0},
      {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 64, 64, 0, ROVE_DTYPE_F32, 0, 0},
      {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 64, 128, 0, ROVE_DTYPE_F32, 0, 0},
      {ROVE_ROTATE_ROVE, 1, 0, 4, 4, 32, 1, 0, ROVE_DTYPE_F32, 0, 0},
      {ROVE_ROTATE_ROPE, 1, 37, 8, 2, 64, 32, 0, ROVE_DTYPE_BF16, 0, 0},
      {ROVE_ROTATE_ROVE, 0, 0, 4, 1, 64, 64, 20.0f, ROVE_DTYPE_F16, 0, 0},
      {ROVE_ROTATE_ROVE, 1, 0, 6, 2, 64, 16, 0, ROVE_DTYPE_Q8, 0, 0},
      {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 64, 64, 0, ROVE_DTYPE_Q8, 0, 0},
      {0, 1, 0, 4, 2, 48, 8, 0, ROVE_DTYPE_F32, 0, 0},
      {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 64, 16, 0, ROVE_DTYPE_F32, 1, 0},
      {ROVE_ROTATE_ROVE, 1, 0, 32, 2, 32, 64, 0, ROVE_DTYPE_F32, 0, 0}, /* group 16: tile path */
      /* bf16 / f16 pools of blocks under 64 tokens in MHA decode: on an AVX-512 AMD core
       * the sequences of one query row put every KV head of a tile in one attn_rows_heads
       * call (the others stay per head), which must give the same bits: softcap, a window
       * (masked tiles), blocks of 32, d = 128 (one K section per key), and 150 heads at d =
       * 48, more than one pass of the scratch (110 heads) */
      {ROVE_ROTATE_ROVE, 1, 0, 4, 4, 64, 16, 0, ROVE_DTYPE_BF16, 0, 0},
      {ROVE_ROTATE_ROVE, 1, 0, 20, 20, 32, 16, 0, ROVE_DTYPE_F16, 0, 0},
      {ROVE_ROTATE_ROVE, 1, 0, 6, 6, 64, 16, 30.0f, ROVE_DTYPE_BF16, 0, 0},
      {ROVE_ROTATE_ROVE, 1, 100, 6, 6, 64, 32, 0, ROVE_DTYPE_F16, 0, 0},
      {ROVE_ROTATE_ROVE, 0, 0, 4, 4, 128, 16, 0, ROVE_DTYPE_BF16, 0, 0},
      {ROVE_ROTATE_ROPE, 1, 300, 150, 150, 48, 32, 0, ROVE_DTYPE_BF16, 0, 0},
      /* fp32 pools take the same call on a Zen 5 (plan rows_zen5), per head elsewhere */
      {ROVE_ROTATE_ROVE, 1, 0, 4, 4, 64, 16, 0, ROVE_DTYPE_F32, 0, 0},
      {ROVE_ROTATE_ROVE, 1, 0, 6, 6, 64, 16, 30.0f, ROVE_DTYPE_F32, 0, 0},
      {ROVE_ROTATE_ROVE, 1, 100, 6, 6, 64, 32, 0, ROVE_DTYPE_F32, 0, 0},
      {ROVE_ROTATE_ROVE, 0, 0, 4, 4, 128, 16, 0, ROVE_DTYPE_F32, 0, 0},
      {ROVE_ROTATE_ROPE, 1, 300, 150, 150, 48, 32, 0, ROVE_DTYPE_F32, 0, 0},
      /* attention sinks: per head, after the split merge */
      {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 64, 16, 0, ROVE_DTYPE_F32, 0, 1},
      {ROVE_ROTATE_ROPE, 1, 37, 8, 2, 64, 32, 0, ROVE_DTYPE_BF16, 0, 1},
      {ROVE_ROTATE_ROVE, 1, 0, 6, 2, 64, 64, 0, ROVE_DTYPE_Q8, 1, 1},
      {ROVE_ROTATE_ROVE, 1, 0, 32, 2, 32, 64, 0, ROVE_DTYPE_F32, 0, 1},
  };
  /* decode rows, speculative rows, a sequence without rows, a long one (split-KV) */
  const int32_t len[MAXS] = {1, 200, 77, 1500, 16};
  const int32_t nq[MAXS] = {1, 4, 0, 1, 16};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], MAXS, len, nq, 11 + i);
}

/* bf16 queries and outputs (rove_paged_*_typed) against rove_kv_cache_attention_typed per
 * sequence, bit for bit (blocks of 64), over an f16 pool. */
static void test_typed_queries(void **state) {
  (void)state;
  const pcase c = {ROVE_ROTATE_ROVE, 1, 0, 8, 2, 64, 64, 0, ROVE_DTYPE_F16, 0, 0};
  const int32_t len[3] = {300, 1, 90}, nq[3] = {2, 1, 5};
  rove_plan *p = make_plan(&c, 2);
  world w;
  build(&c, p, &w, 3, len, nq, 21);
  const int64_t tq = w.cu[3], wq = (int64_t)c.H * c.d;
  uint16_t *qh = malloc(sizeof(uint16_t) * (size_t)(tq * wq));
  uint16_t *out = malloc(sizeof(uint16_t) * (size_t)(tq * wq)), *ref = malloc(sizeof(uint16_t) * (size_t)(tq * wq));
  uint16_t *ext = malloc(sizeof(uint16_t) * (size_t)(tq * wq));
  for (int64_t i = 0; i < tq * wq; i++) { /* bf16 by truncation: any pattern is a fair input */
    uint32_t u;
    memcpy(&u, &w.q[i], 4);
    qh[i] = (uint16_t)(u >> 16);
  }
  const rove_tensor_types t = {ROVE_DTYPE_BF16, ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_BF16};
  for (int s = 0; s < 3; s++) {
    rove_attention_args a;
    memset(&a, 0, sizeof a);
    a.batch = 1, a.q_len = nq[s], a.q = (const float *)(qh + w.cu[s] * wq);
    a.out = (float *)(ref + w.cu[s] * wq);
    assert_int_equal(rove_kv_cache_attention_typed(w.kc[s], &a, &t), ROVE_OK);
  }
  rove_paged_args a = pargs(&c, &w, (float *)out, NULL);
  a.q = (const float *)qh;
  assert_int_equal(rove_paged_cache_attention_typed(w.pc, w.seq, &a, &t), ROVE_OK);
  assert_memory_equal(out, ref, sizeof(uint16_t) * (size_t)(tq * wq));
  int32_t tables[3][8], lens[3], n;
  for (int s = 0; s < 3; s++) {
    assert_int_equal(rove_paged_seq_block_table(w.pc, w.seq[s], tables[s], 8, &n), ROVE_OK);
    lens[s] = len[s];
  }
  rove_paged_kv kv;
  assert_int_equal(rove_paged_cache_view(w.pc, &kv), ROVE_OK);
  a.out = (float *)ext, a.seq_lens = lens, a.block_tables = &tables[0][0], a.max_blocks = 8;
  assert_int_equal(rove_paged_attention_typed(p, &kv, &a, &t), ROVE_OK);
  assert_memory_equal(ext, ref, sizeof(uint16_t) * (size_t)(tq * wq));
  const rove_tensor_types bad = {ROVE_DTYPE_BF16, ROVE_DTYPE_BF16, ROVE_DTYPE_F32, ROVE_DTYPE_BF16};
  assert_int_equal(rove_paged_attention_typed(p, &kv, &a, &bad), ROVE_ERR_INVALID_ARGUMENT);
  const rove_tensor_types q8 = {ROVE_DTYPE_Q8, ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_BF16};
  assert_int_equal(rove_paged_attention_typed(p, &kv, &a, &q8), ROVE_ERR_INVALID_ARGUMENT);
  free(qh), free(out), free(ref), free(ext);
  unbuild(&w);
  rove_plan_destroy(p);
}

static void test_threads(void **state) {
  (void)state;
  const pcase c = {ROVE_ROTATE_ROVE, 1, 0, 8, 2, 64, 32, 0, ROVE_DTYPE_F32, 0, 0};
  const int32_t len[MAXS] = {3000, 5, 700, 2048, 64}, nq[MAXS] = {1, 2, 3, 1, 5};
  float *outs[2], *lses[2];
  for (int t = 0; t < 2; t++) {
    rove_plan *p = make_plan(&c, t + 1);
    world w;
    build(&c, p, &w, MAXS, len, nq, 5);
    const int64_t tq = w.cu[MAXS];
    outs[t] = malloc(sizeof(float) * (size_t)(tq * c.H * c.d));
    lses[t] = malloc(sizeof(float) * (size_t)(tq * c.H));
    rove_paged_args a = pargs(&c, &w, outs[t], lses[t]);
    assert_int_equal(rove_paged_cache_attention(w.pc, w.seq, &a), ROVE_OK);
    if (t == 1) {
      assert_memory_equal(outs[0], outs[1], sizeof(float) * (size_t)(tq * c.H * c.d));
      assert_memory_equal(lses[0], lses[1], sizeof(float) * (size_t)(tq * c.H));
    }
    unbuild(&w);
    rove_plan_destroy(p);
  }
  free(outs[0]), free(outs[1]), free(lses[0]), free(lses[1]);
}

/* ---- a reference model: raw K / V rows and positions per sequence ------------------ */

typedef struct {
  int live;
  int32_t len;
  float *k, *v; /* [cap][Hkv][d] */
  int32_t *pos;
  int32_t id;
} mseq;

#define MCAP 400

static void model_append(mseq *m, int64_t w, const float *k, const float *v, int32_t n, int32_t p0) {
  memcpy(m->k + m->len * w, k, sizeof(float) * (size_t)(n * w));
  memcpy(m->v + m->len * w, v, sizeof(float) * (size_t)(n * w));
  for (int32_t i = 0; i < n; i++) m->pos[m->len + i] = p0 + i;
  m->len += n;
}

/* Attention of two query rows (positions after the newest) of every live sequence: the
 * paged cache against rove_attention_forward over the model's rows and positions. */
static void model_check(const rove_plan *p, const pcase *c, rove_paged_cache *pc, mseq *ms, int n,
                        rove_rng *r) {
  const int64_t wq = (int64_t)c->H * c->d;
  float q[2 * 8 * 64], out[2 * 8 * 64], ref[2 * 8 * 64];
  for (int s = 0; s < n; s++) {
    if (!ms[s].live) continue;
    assert_int_equal(rove_paged_seq_length(pc, ms[s].id), ms[s].len);
    int32_t pos[MCAP];
    assert_int_equal(rove_paged_seq_positions(pc, ms[s].id, pos), ROVE_OK);
    assert_memory_equal(pos, ms[s].pos, sizeof(int32_t) * (size_t)ms[s].len);
    if (ms[s].len == 0) continue;
    rove_rng_fill(r, q, 2 * wq, -1, 1);
    int32_t qp[2] = {ms[s].pos[ms[s].len - 1] + 1, ms[s].pos[ms[s].len - 1] + 2};
    const int32_t cu[2] = {0, 2};
    rove_paged_args a;
    memset(&a, 0, sizeof a);
    a.n_seqs = 1, a.cu_seqlens_q = cu, a.q = q, a.out = out, a.q_pos = qp;
    assert_int_equal(rove_paged_cache_attention(pc, &ms[s].id, &a), ROVE_OK);
    rove_attention_args f;
    memset(&f, 0, sizeof f);
    f.batch = 1, f.q_len = 2, f.kv_len = ms[s].len, f.q = q, f.k = ms[s].k, f.v = ms[s].v;
    f.out = ref, f.q_pos = qp, f.kv_pos = ms[s].pos;
    assert_int_equal(rove_attention_forward(p, &f), ROVE_OK);
    assert_true(rove_max_rel_err_ff(out, ref, 2 * wq) < 2e-5);
  }
}

/* Blocks held by live sequences (distinct) + free blocks = the pool. */
static void check_accounting(const rove_paged_cache *pc, const mseq *ms, int n, int32_t n_blocks) {
  char held[64] = {0};
  int32_t distinct = 0, t[64], nb;
  for (int s = 0; s < n; s++) {
    if (!ms[s].live) continue;
    assert_int_equal(rove_paged_seq_block_table(pc, ms[s].id, t, 64, &nb), ROVE_OK);
    for (int32_t i = 0; i < nb; i++) distinct += !held[t[i]], held[t[i]] = 1;
  }
  assert_int_equal(distinct + rove_paged_cache_free_blocks(pc), n_blocks);
}

static void test_random_operations(void **state) {
  (void)state;
  const pcase c = {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 32, 16, 0, ROVE_DTYPE_F32, 0, 0};
  rove_plan *p = make_plan(&c, 2);
  const int64_t w = (int64_t)c.Hkv * c.d;
  const int32_t n_blocks = 40;
  enum { N = 6 };
  rove_paged_cache *pc;
  assert_int_equal(rove_paged_cache_create(p, ROVE_DTYPE_F32, 16, n_blocks, N, &pc), ROVE_OK);
  mseq ms[N];
  for (int s = 0; s < N; s++) {
    ms[s] = (mseq){0};
    ms[s].k = malloc(sizeof(float) * MCAP * (size_t)w), ms[s].v = malloc(sizeof(float) * MCAP * (size_t)w);
    ms[s].pos = malloc(sizeof(int32_t) * MCAP);
  }
  rove_rng r;
  rove_rng_seed(&r, 99);
  float k[60 * 2 * 32], v[60 * 2 * 32];
  int exhausted = 0, forks = 0, shifts = 0;
  for (int step = 0; step < 400; step++) {
    const int s = (int)(rove_rng_u64(&r) % N), op = (int)(rove_rng_u64(&r) % 10);
    mseq *m = &ms[s];
    if (!m->live) { /* create, or fork a live one */
      int parent = -1;
      for (int t = 0; t < N; t++)
        if (ms[t].live && rove_rng_u64(&r) % 2) parent = t;
      rove_status st = parent < 0 ? rove_paged_seq_create(pc, &m->id)
                                  : rove_paged_seq_fork(pc, ms[parent].id, &m->id);
      assert_int_equal(st, ROVE_OK);
      m->live = 1, m->len = 0;
      if (parent >= 0) {
        model_append(m, w, ms[parent].k, ms[parent].v, ms[parent].len, 0);
        memcpy(m->pos, ms[parent].pos, sizeof(int32_t) * (size_t)ms[parent].len);
        forks++;
      }
    } else if (op < 5) { /* append 1 .. 60 tokens */
      int32_t n = 1 + (int32_t)(rove_rng_u64(&r) % 60);
      if (m->len + n > MCAP) n = MCAP - m->len;
      if (n == 0) continue;
      rove_rng_fill(&r, k, n * w, -1, 1);
      rove_rng_fill(&r, v, n * w, -1, 1);
      const int32_t free0 = rove_paged_cache_free_blocks(pc);
      const rove_status st = rove_paged_append(pc, m->id, n, k, 0, v, 0, ROVE_DTYPE_F32, NULL, NULL);
      if (st == ROVE_ERR_POOL_EXHAUSTED) {
        assert_int_equal(rove_paged_cache_free_blocks(pc), free0);
        exhausted++;
      } else {
        assert_int_equal(st, ROVE_OK);
        model_append(m, w, k, v, n, m->len ? m->pos[m->len - 1] + 1 : 0);
      }
    } else if (op < 7) { /* truncate */
      const int32_t to = m->len ? (int32_t)(rove_rng_u64(&r) % (uint64_t)(m->len + 1)) : 0;
      assert_int_equal(rove_paged_truncate(pc, m->id, to), ROVE_OK);
      m->len = to;
    } else if (op < 8) { /* free */
      assert_int_equal(rove_paged_seq_free(pc, m->id), ROVE_OK);
      m->live = 0;
    } else if (m->len > 0) { /* shift a range: the model re-appends nothing, it moves positions
                              * and keeps raw rows, so the stored rows must follow R_delta */
      const int32_t a0 = (int32_t)(rove_rng_u64(&r) % (uint64_t)m->len);
      const int32_t a1 = a0 + (int32_t)(rove_rng_u64(&r) % (uint64_t)(m->len - a0 + 1));
      const int32_t delta = (int32_t)(rove_rng_u64(&r) % 200) - 100;
      const rove_status st = rove_paged_shift(pc, m->id, a0, a1, delta);
      if (st == ROVE_ERR_POOL_EXHAUSTED) {
        exhausted++;
      } else {
        assert_int_equal(st, ROVE_OK);
        for (int32_t j = a0; j < a1; j++) m->pos[j] += delta;
        shifts++;
      }
    }
    check_accounting(pc, ms, N, n_blocks);
    if (step % 10 == 9) model_check(p, &c, pc, ms, N, &r);
  }
  model_check(p, &c, pc, ms, N, &r);
  assert_true(forks > 5 && shifts > 5); /* the sequence exercised what it is for */
  assert_true(exhausted > 0);
  for (int s = 0; s < N; s++) {
    if (ms[s].live) assert_int_equal(rove_paged_seq_free(pc, ms[s].id), ROVE_OK);
    free(ms[s].k), free(ms[s].v), free(ms[s].pos);
  }
  assert_int_equal(rove_paged_cache_free_blocks(pc), n_blocks);
  rove_paged_cache_destroy(pc);
  rove_plan_destroy(p);
}

/* ---- fork / copy-on-write, shift of a sharing sibling ----------------------------------- */

/* Output of one decode row of sequence seq (its newest position + 1). */
static void decode_row(rove_paged_cache *pc, int32_t seq, const float *q, float *out) {
  int32_t pos[256];
  assert_int_equal(rove_paged_seq_positions(pc, seq, pos), ROVE_OK);
  int32_t qp = pos[rove_paged_seq_length(pc, seq) - 1] + 1;
  const int32_t cu[2] = {0, 1};
  rove_paged_args a;
  memset(&a, 0, sizeof a);
  a.n_seqs = 1, a.cu_seqlens_q = cu, a.q = q, a.out = out, a.q_pos = &qp;
  assert_int_equal(rove_paged_cache_attention(pc, &seq, &a), ROVE_OK);
}

static void test_fork_copy_on_write(void **state) {
  (void)state;
  const pcase c = {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 32, 16, 0, ROVE_DTYPE_F32, 0, 0};
  rove_plan *p = make_plan(&c, 1);
  const int64_t w = 64;
  rove_rng r;
  rove_rng_seed(&r, 3);
  float *k = randf(&r, 80 * w), *v = randf(&r, 80 * w), *k2 = randf(&r, 80 * w), *v2 = randf(&r, 80 * w);
  float q[128], o1[128], o2[128], want[128];
  rove_rng_fill(&r, q, 128, -1, 1);
  rove_paged_cache *pc;
  assert_int_equal(rove_paged_cache_create(p, ROVE_DTYPE_F32, 16, 10, 4, &pc), ROVE_OK);
  int32_t a, b;
  assert_int_equal(rove_paged_seq_create(pc, &a), ROVE_OK);
  assert_int_equal(rove_paged_append(pc, a, 40, k, 0, v, 0, ROVE_DTYPE_F32, NULL, NULL), ROVE_OK);
  assert_int_equal(rove_paged_cache_free_blocks(pc), 7);
  assert_int_equal(rove_paged_seq_fork(pc, a, &b), ROVE_OK);
  assert_int_equal(rove_paged_cache_free_blocks(pc), 7); /* shared, nothing copied */
  decode_row(pc, a, q, o1);
  decode_row(pc, b, q, o2);
  assert_memory_equal(o1, o2, sizeof o1);
  /* divergent continuations: the parent's append copies the shared partly filled block */
  assert_int_equal(rove_paged_append(pc, a, 10, k + 40 * w, 0, v + 40 * w, 0, ROVE_DTYPE_F32, NULL, NULL), ROVE_OK);
  assert_int_equal(rove_paged_cache_free_blocks(pc), 5); /* the copy and one new block */
  assert_int_equal(rove_paged_append(pc, b, 30, k2, 0, v2, 0, ROVE_DTYPE_F32, NULL, NULL), ROVE_OK);
  assert_int_equal(rove_paged_cache_free_blocks(pc), 3); /* b alone holds the old block now */
  int32_t ta[8], tb[8], na, nb;
  assert_int_equal(rove_paged_seq_block_table(pc, a, ta, 8, &na), ROVE_OK);
  assert_int_equal(rove_paged_seq_block_table(pc, b, tb, 8, &nb), ROVE_OK);
  assert_int_equal(na, 4), assert_int_equal(nb, 5);
  assert_int_equal(ta[0], tb[0]), assert_int_equal(ta[1], tb[1]);
  assert_int_not_equal(ta[2], tb[2]);
  /* each equals a contiguous cache of its own tokens */
  float *kb = malloc(sizeof(float) * 70 * (size_t)w), *vb = malloc(sizeof(float) * 70 * (size_t)w);
  memcpy(kb, k, sizeof(float) * 40 * (size_t)w), memcpy(kb + 40 * w, k2, sizeof(float) * 30 * (size_t)w);
  memcpy(vb, v, sizeof(float) * 40 * (size_t)w), memcpy(vb + 40 * w, v2, sizeof(float) * 30 * (size_t)w);
  const float *ks[2] = {k, kb}, *vs[2] = {v, vb};
  const int32_t lens[2] = {50, 70}, ids[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    rove_kv_cache *kc;
    assert_int_equal(rove_kv_cache_create(p, 1, 80, &kc), ROVE_OK);
    assert_int_equal(rove_kv_cache_append(kc, lens[i], ks[i], 0, vs[i], 0, NULL), ROVE_OK);
    rove_attention_args at;
    memset(&at, 0, sizeof at);
    int32_t qp = lens[i];
    at.batch = 1, at.q_len = 1, at.q = q, at.out = want, at.q_pos = &qp;
    assert_int_equal(rove_kv_cache_attention(kc, &at), ROVE_OK);
    decode_row(pc, ids[i], q, o1);
    assert_true(rove_max_rel_err_ff(o1, want, 128) < 2e-6);
    rove_kv_cache_destroy(kc);
  }
  /* truncate the child into the shared prefix and append: block 1 is copied */
  decode_row(pc, a, q, o2);
  assert_int_equal(rove_paged_truncate(pc, b, 20), ROVE_OK);
  assert_int_equal(rove_paged_cache_free_blocks(pc), 6);
  assert_int_equal(rove_paged_append(pc, b, 5, k2, 0, v2, 0, ROVE_DTYPE_F32, NULL, NULL), ROVE_OK);
  assert_int_equal(rove_paged_cache_free_blocks(pc), 5);
  decode_row(pc, a, q, o1);
  assert_memory_equal(o1, o2, sizeof o1); /* the parent kept its rows */
  /* shift the child over the shared block 0: copied, the parent unchanged */
  assert_int_equal(rove_paged_shift(pc, b, 0, 10, -7), ROVE_OK);
  assert_int_equal(rove_paged_cache_free_blocks(pc), 4);
  decode_row(pc, a, q, o1);
  assert_memory_equal(o1, o2, sizeof o1);
  /* the shifted child equals a contiguous cache shifted the same way */
  rove_kv_cache *kc;
  assert_int_equal(rove_kv_cache_create(p, 1, 80, &kc), ROVE_OK);
  assert_int_equal(rove_kv_cache_append(kc, 20, k, 0, v, 0, NULL), ROVE_OK);
  assert_int_equal(rove_kv_cache_append(kc, 5, k2, 0, v2, 0, NULL), ROVE_OK);
  assert_int_equal(rove_kv_cache_shift(kc, 0, 10, -7), ROVE_OK);
  rove_attention_args at;
  memset(&at, 0, sizeof at);
  int32_t qp = 25;
  at.batch = 1, at.q_len = 1, at.q = q, at.out = want, at.q_pos = &qp;
  assert_int_equal(rove_kv_cache_attention(kc, &at), ROVE_OK);
  decode_row(pc, b, q, o1); /* the same stored rows; block size 16 reorders the sums */
  assert_true(rove_max_rel_err_ff(o1, want, 128) < 2e-6);
  rove_kv_cache_destroy(kc);
  assert_int_equal(rove_paged_seq_free(pc, b), ROVE_OK);
  assert_int_equal(rove_paged_seq_free(pc, a), ROVE_OK);
  assert_int_equal(rove_paged_cache_free_blocks(pc), 10);
  free(k), free(v), free(k2), free(v2), free(kb), free(vb);
  rove_paged_cache_destroy(pc);
  rove_plan_destroy(p);
}

/* ---- exhaustion and bad input: statuses, nothing changed ----------------------------- */

static void test_exhaustion(void **state) {
  (void)state;
  const pcase c = {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 32, 16, 0, ROVE_DTYPE_F16, 0, 0};
  rove_plan *p = make_plan(&c, 1);
  rove_rng r;
  rove_rng_seed(&r, 4);
  float *k = randf(&r, 100 * 64), *v = randf(&r, 100 * 64);
  float q[128], o1[128], o2[128];
  rove_rng_fill(&r, q, 128, -1, 1);
  rove_paged_cache *pc;
  assert_int_equal(rove_paged_cache_create(p, ROVE_DTYPE_F16, 16, 4, 2, &pc), ROVE_OK);
  int32_t a, b, x;
  assert_int_equal(rove_paged_seq_create(pc, &a), ROVE_OK);
  assert_int_equal(rove_paged_append(pc, a, 50, k, 0, v, 0, ROVE_DTYPE_F32, NULL, NULL), ROVE_OK);
  assert_int_equal(rove_paged_cache_free_blocks(pc), 0);
  decode_row(pc, a, q, o1);
  assert_int_equal(rove_paged_append(pc, a, 20, k, 0, v, 0, ROVE_DTYPE_F32, NULL, NULL),
                   ROVE_ERR_POOL_EXHAUSTED);
  assert_int_equal(rove_paged_seq_length(pc, a), 50);
  /* a fork's append into the shared partly filled block needs a copy: no block */
  assert_int_equal(rove_paged_seq_fork(pc, a, &b), ROVE_OK);
  assert_int_equal(rove_paged_append(pc, b, 1, k, 0, v, 0, ROVE_DTYPE_F32, NULL, NULL),
                   ROVE_ERR_POOL_EXHAUSTED);
  assert_int_equal(rove_paged_shift(pc, b, 0, 5, 3), ROVE_ERR_POOL_EXHAUSTED);
  assert_int_equal(rove_paged_seq_create(pc, &x), ROVE_ERR_POOL_EXHAUSTED); /* max_seqs 2 */
  assert_int_equal(rove_paged_seq_fork(pc, a, &x), ROVE_ERR_POOL_EXHAUSTED);
  decode_row(pc, a, q, o2);
  assert_memory_equal(o1, o2, sizeof o1);
  decode_row(pc, b, q, o2);
  assert_memory_equal(o1, o2, sizeof o1);
  /* f16 overflow on append: rejected, blocks and length as they were */
  assert_int_equal(rove_paged_truncate(pc, b, 10), ROVE_OK);
  assert_int_equal(rove_paged_seq_free(pc, a), ROVE_OK);
  const int32_t free0 = rove_paged_cache_free_blocks(pc);
  k[64 * 3 + 5] = 1e6f;
  assert_int_equal(rove_paged_append(pc, b, 30, k, 0, v, 0, ROVE_DTYPE_F32, NULL, NULL),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_cache_free_blocks(pc), free0);
  assert_int_equal(rove_paged_seq_length(pc, b), 10);
  k[64 * 3 + 5] = 0.5f;
  /* bad calls */
  assert_int_equal(rove_paged_append(pc, 7, 1, k, 0, v, 0, ROVE_DTYPE_F32, NULL, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_append(pc, b, 0, k, 0, v, 0, ROVE_DTYPE_F32, NULL, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_append(pc, b, 1, k, 3, v, 0, ROVE_DTYPE_F32, NULL, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_append(pc, b, 1, k, 0, v, 0, ROVE_DTYPE_Q8, NULL, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_truncate(pc, b, 11), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_shift(pc, b, 3, 11, 1), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_seq_free(pc, a), ROVE_ERR_INVALID_ARGUMENT); /* freed already */
  assert_int_equal(rove_paged_seq_length(pc, a), -1);
  assert_int_equal(rove_paged_seq_fork(pc, a, &x), ROVE_ERR_INVALID_ARGUMENT);
  int32_t t[1], n;
  assert_int_equal(rove_paged_seq_block_table(pc, b, t, 0, &n), ROVE_ERR_INVALID_ARGUMENT);
  rove_paged_cache *bad = NULL;
  assert_int_equal(rove_paged_cache_create(p, ROVE_DTYPE_F32, 24, 4, 2, &bad), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_cache_create(p, ROVE_DTYPE_F32, 16, 0, 2, &bad), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_cache_create(p, ROVE_DTYPE_F32, 16, 4, 0, &bad), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_cache_create(p, ROVE_DTYPE_COUNT, 16, 4, 2, &bad), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_cache_create(p, ROVE_DTYPE_F32, 1 << 17, 4, 2, &bad), ROVE_ERR_INVALID_ARGUMENT);
  assert_null(bad);
  {
    const pcase wide = {0, 1, 0, 1024, 1024, 256, 16, 0, ROVE_DTYPE_F32, 0, 0};
    rove_plan *pw = make_plan(&wide, 1);
    assert_int_equal(rove_paged_cache_create(pw, ROVE_DTYPE_F32, 65536, INT32_MAX, 2, &bad),
                     ROVE_ERR_SIZE_OVERFLOW);
    assert_null(bad);
    rove_plan_destroy(pw);
  }
  free(k), free(v);
  rove_paged_cache_destroy(pc);
  rove_plan_destroy(p);
}

static void test_bad_tables(void **state) {
  (void)state;
  const pcase c = {ROVE_ROTATE_ROVE, 1, 0, 4, 2, 32, 16, 0, ROVE_DTYPE_F32, 0, 0};
  rove_plan *p = make_plan(&c, 1);
  const int64_t pool = 8 * 2 * 16 * 32;
  rove_rng r;
  rove_rng_seed(&r, 6);
  float *k = randf(&r, pool), *v = randf(&r, pool), q[3 * 128];
  rove_rng_fill(&r, q, 3 * 128, -1, 1);
  rove_guarded g;
  float *out = rove_guarded_alloc(&g, 3 * 128, 1);
  rove_paged_kv kv = {.k = k, .v = v, .type = ROVE_DTYPE_F32, .block_size = 16, .n_blocks = 8};
  int32_t tables[2][3] = {{0, 1, 2}, {2, 5, 7}}, lens[2] = {40, 20}, cu[3] = {0, 1, 3};
  rove_paged_args a;
  memset(&a, 0, sizeof a);
  a.n_seqs = 2, a.cu_seqlens_q = cu, a.seq_lens = lens, a.block_tables = &tables[0][0];
  a.max_blocks = 3, a.q = q, a.out = out;
  assert_int_equal(rove_paged_attention(p, &kv, &a), ROVE_OK); /* block 2 shared: allowed */
  rove_fill_bits(out, 3 * 128, ROVE_GUARD_CANARY);
#define REJECT(st, stmt, undo)                                   \
  do {                                                           \
    stmt;                                                        \
    assert_int_equal(rove_paged_attention(p, &kv, &a), st);      \
    undo;                                                        \
    assert_true(rove_has_bits(out, ROVE_GUARD_CANARY));          \
  } while (0)
  REJECT(ROVE_ERR_INVALID_ARGUMENT, tables[0][2] = 8, tables[0][2] = 2);   /* out of range */
  REJECT(ROVE_ERR_INVALID_ARGUMENT, tables[1][1] = -1, tables[1][1] = 5);  /* negative */
  REJECT(ROVE_ERR_INVALID_ARGUMENT, tables[0][2] = 0, tables[0][2] = 2);   /* repeated */
  REJECT(ROVE_ERR_INVALID_ARGUMENT, lens[1] = 49, lens[1] = 20);           /* > max_blocks */
  REJECT(ROVE_ERR_INVALID_ARGUMENT, lens[1] = -1, lens[1] = 20);
  REJECT(ROVE_ERR_INVALID_ARGUMENT, lens[1] = 1, lens[1] = 20);            /* 2 rows, 1 key */
  REJECT(ROVE_ERR_INVALID_ARGUMENT, a.block_tables = NULL, a.block_tables = &tables[0][0]);
  float sk[4] = {0.5f, NAN, 1.0f, 2.0f};
  REJECT(ROVE_ERR_INVALID_ARGUMENT, a.sinks = sk, a.sinks = NULL); /* a non-finite sink */
  REJECT(ROVE_ERR_INVALID_ARGUMENT, a.sinks = out + 8, a.sinks = NULL); /* out over the sinks */
  sk[1] = -0.5f;
  { /* no keys at all: max_blocks 0 and block_tables NULL (an empty table) are accepted */
    int32_t l0[2] = {0, 0}, qp[3] = {5, 6, 7};
    const rove_paged_args a0 = a;
    a.seq_lens = l0, a.block_tables = NULL, a.max_blocks = 0, a.q_pos = qp;
    assert_int_equal(rove_paged_attention(p, &kv, &a), ROVE_OK);
    for (int i = 0; i < 3 * 128; i++) assert_true(out[i] == 0.0f);
    float lse[4 * 3];
    a.sinks = sk, a.lse = lse; /* no keys with sinks: output 0, LSE the head's sink */
    assert_int_equal(rove_paged_attention(p, &kv, &a), ROVE_OK);
    for (int i = 0; i < 3 * 128; i++) assert_true(out[i] == 0.0f);
    for (int i = 0; i < 4 * 3; i++) assert_true(lse[i] == sk[i / 3]);
    a.sinks = NULL, a.lse = NULL;
    l0[1] = 1; /* a key needs a table */
    assert_int_equal(rove_paged_attention(p, &kv, &a), ROVE_ERR_INVALID_ARGUMENT);
    a.max_blocks = 1; /* NULL with a non-zero stride */
    assert_int_equal(rove_paged_attention(p, &kv, &a), ROVE_ERR_INVALID_ARGUMENT);
    a = a0;
    rove_fill_bits(out, 3 * 128, ROVE_GUARD_CANARY);
  }
  REJECT(ROVE_ERR_INVALID_ARGUMENT, a.seq_lens = NULL, a.seq_lens = lens);
  REJECT(ROVE_ERR_INVALID_ARGUMENT, cu[1] = 4, cu[1] = 1);                 /* decreasing */
  REJECT(ROVE_ERR_INVALID_ARGUMENT, cu[0] = 1, cu[0] = 0);
  REJECT(ROVE_ERR_INVALID_ARGUMENT, kv.block_size = 12, kv.block_size = 16);
  REJECT(ROVE_ERR_INVALID_ARGUMENT, kv.type = ROVE_DTYPE_Q8, kv.type = ROVE_DTYPE_F32);
  REJECT(ROVE_ERR_INVALID_ARGUMENT, kv.k = NULL, kv.k = k);
  REJECT(ROVE_ERR_INVALID_ARGUMENT, a.out = (float *)q + 1, a.out = out);  /* overlaps q */
  REJECT(ROVE_ERR_INVALID_ARGUMENT, a.out = k + 100, a.out = out);         /* overlaps the pool */
  REJECT(ROVE_ERR_INVALID_ARGUMENT, a.n_seqs = 0, a.n_seqs = 2);
  REJECT(ROVE_ERR_INVALID_ARGUMENT, a.q = NULL, a.q = q);                  /* with rows */
  REJECT(ROVE_ERR_INVALID_ARGUMENT, a.out = NULL, a.out = out);
  { /* no query rows: q and out may be NULL; nothing is written, the tables still checked */
    int32_t cu0[3] = {0, 0, 0};
    const rove_paged_args a0 = a;
    a.cu_seqlens_q = cu0, a.q = NULL, a.out = NULL;
    assert_int_equal(rove_paged_attention(p, &kv, &a), ROVE_OK);
    tables[0][2] = 8;
    assert_int_equal(rove_paged_attention(p, &kv, &a), ROVE_ERR_INVALID_ARGUMENT);
    tables[0][2] = 2;
    a = a0;
    assert_true(rove_has_bits(out, ROVE_GUARD_CANARY));
  }
  { /* out or lse over any other array the call reads (each read per group or task, while
     * other tasks already write): tables, lengths, cu, q_pos, the pool's positions and Q8
     * scales; the same arrays elsewhere are accepted */
    int32_t qp3[3] = {39, 18, 19}, pos[8 * 16];
    float sc[8 * 2 * 16], l3[4 * 3];
    for (int i = 0; i < 8 * 16; i++) pos[i] = i;
    for (int i = 0; i < 8 * 2 * 16; i++) sc[i] = 0.01f;
    const void *src[7] = {tables, lens, cu, qp3, pos, sc, sc};
    const size_t bytes[7] = {sizeof tables, sizeof lens, sizeof cu, sizeof qp3,
                             sizeof pos, sizeof sc, sizeof sc};
    const rove_paged_args a0 = a;
    const rove_paged_kv kv0 = kv;
    for (int i = 0; i < 7; i++)
      for (int lse = 0; lse < 2; lse++) {
        void *copy;
        float *o = rove_out_over(lse ? 12 : 3 * 128, src[i], bytes[i], &copy);
        assert_non_null(o);
        a = a0, kv = kv0;
        if (i >= 5) kv.type = ROVE_DTYPE_Q8, kv.k_scale = kv.v_scale = sc;
        switch (i) {
          case 0: a.block_tables = copy; break;
          case 1: a.seq_lens = copy; break;
          case 2: a.cu_seqlens_q = copy; break;
          case 3: a.q_pos = copy; break;
          case 4: kv.pos = copy; break;
          case 5: kv.k_scale = copy; break;
          default: kv.v_scale = copy; break;
        }
        if (lse)
          a.lse = o;
        else
          a.out = o;
        if (rove_paged_attention(p, &kv, &a) != ROVE_ERR_INVALID_ARGUMENT)
          fail_msg("%s over input %d accepted", lse ? "lse" : "out", i);
        assert_true(rove_out_over_untouched(o, lse ? 12 : 3 * 128));
        assert_true(rove_has_bits(out, ROVE_GUARD_CANARY));
        free(o);
      }
    a = a0, kv = kv0;
    a.q_pos = qp3, a.lse = l3, kv.pos = pos;
    assert_int_equal(rove_paged_attention(p, &kv, &a), ROVE_OK);
    kv.type = ROVE_DTYPE_Q8, kv.k_scale = kv.v_scale = sc;
    assert_int_equal(rove_paged_attention(p, &kv, &a), ROVE_OK);
    a = a0, kv = kv0;
    rove_fill_bits(out, 3 * 128, ROVE_GUARD_CANARY);
  }
  assert_int_equal(rove_paged_attention(NULL, &kv, &a), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_attention(p, NULL, &a), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_attention(p, &kv, NULL), ROVE_ERR_INVALID_ARGUMENT);
  /* a sequence with rows and no keys (explicit positions): zeros and -inf */
  int32_t qp[3] = {5, 6, 7};
  float lse[4 * 3];
  lens[0] = 0, a.q_pos = qp, a.lse = lse;
  assert_int_equal(rove_paged_attention(p, &kv, &a), ROVE_OK);
  for (int i = 0; i < 128; i++) assert_true(out[i] == 0.0f);
  for (int h = 0; h < 4; h++) assert_true(isinf(lse[h * 3]) && lse[h * 3] < 0);
  /* the cache's call rejects the fields it supplies and unknown ids */
  rove_paged_cache *pc;
  assert_int_equal(rove_paged_cache_create(p, ROVE_DTYPE_F32, 16, 4, 2, &pc), ROVE_OK);
  int32_t s, ids[2] = {0, 1};
  assert_int_equal(rove_paged_seq_create(pc, &s), ROVE_OK);
  assert_int_equal(rove_paged_cache_attention(pc, ids, &a), ROVE_ERR_INVALID_ARGUMENT);
  a.seq_lens = NULL, a.block_tables = NULL;
  assert_int_equal(rove_paged_cache_attention(pc, ids, &a), ROVE_ERR_INVALID_ARGUMENT); /* id 1 */
  a.n_seqs = 1; /* a valid call on sequence 0 (no keys yet, one query row) ... */
  for (int32_t mb = -1; mb <= 4; mb += 5) { /* ... with a table stride and no table */
    a.max_blocks = mb;
    assert_int_equal(rove_paged_cache_attention(pc, ids, &a), ROVE_ERR_INVALID_ARGUMENT);
  }
  a.max_blocks = 0;
  assert_int_equal(rove_paged_cache_attention(pc, ids, &a), ROVE_OK);
  assert_true(rove_guarded_intact(&g));
  rove_paged_cache_destroy(pc);
  rove_guarded_free(&g);
  free(k), free(v);
  rove_plan_destroy(p);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_equals_contiguous), cmocka_unit_test(test_typed_queries),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_fork_copy_on_write), cmocka_unit_test(test_exhaustion),
      cmocka_unit_test(test_bad_tables), cmocka_unit_test(test_random_operations)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
