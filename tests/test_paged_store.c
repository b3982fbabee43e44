/* SPDX-License-Identifier: MIT */
/* rove_paged_store (new tokens into the caller's pool): against librove's own pool
 * (rove_paged_append of the same tokens in other chunks) byte for byte, rows, Q8 scales and
 * positions, in both layouts, for every storage type, fp32 and bf16 input, RoVE and RoPE,
 * YaRN (m != 1) with interleaved pairs, V near the type's range (the staged path), K and V
 * interleaved in one buffer (block_stride), explicit angles, GQA, block sizes 1 and 16, padding slots, 1 and 2 threads; then
 * rove_paged_attention over the stored pool equals rove_paged_cache_attention bitwise.
 * Bad input (NULLs, slots past the pool or repeated, strides, non-finite angles, values the
 * type cannot hold in a later chunk than the first, overlaps, a token-major Q8 pool) ->
 * statuses with the pool untouched. Links the public librove.so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { NSEQ = 3, MAXB = 128 };

typedef struct {
  uint32_t rot;
  int H, Hkv, d, bs, angles, threads;
  rove_dtype type, in_type;
  int32_t layout;
  int yarn;       /* YaRN (attention factor m != 1), interleaved pairs */
  int interleave; /* K and V blocks interleaved in one buffer (block_stride = 2 blocks) */
  int big;        /* V near the type's range: the staged path (rove_paged_store cannot bound
                     the rotated values inside it), which still fits */
} scase;

static rove_plan *make_plan(const scase *c, int threads) {
  rove_attention_config cfg;
  rove_attention_config_init(&cfg, c->H, c->Hkv, c->d);
  cfg.rotate = c->rot, cfg.n_threads = threads;
  if (c->yarn) {
    cfg.rope.scaling = ROVE_SCALING_YARN;
    cfg.rope.factor = 4.0;
    cfg.rope.original_max_position = 64;
    cfg.rope.pairing = ROVE_PAIRING_INTERLEAVED;
  }
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&cfg, &p), ROVE_OK);
  return p;
}

/* bf16 bits of x (round to nearest even; the inputs here are finite) */
static void to_bf16(uint16_t *dst, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &x[i], 4);
    dst[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
}

/* A caller's pool of the cache's shape, filled with a byte pattern. */
typedef struct {
  rove_paged_kv kv;
  char *k, *v; /* v: k + one block when interleaved */
  float *ks, *vs;
  int32_t *pos;
  size_t row, bytes, sbytes, step; /* step: bytes from one block to the next */
} pool;

/* Row r (in rows of head_dim elements) of block b of base. */
static char *row_at(const pool *o, char *base, int64_t b, int64_t r) {
  return base + (size_t)b * o->step + (size_t)r * o->row;
}

static void pool_make(pool *o, const scase *c, int32_t n_blocks) {
  memset(o, 0, sizeof *o);
  const int64_t rows = (int64_t)n_blocks * c->bs * c->Hkv;
  o->row = rove_test_dtype_size(c->type) * (size_t)c->d;
  o->bytes = (size_t)rows * o->row;
  o->step = o->bytes / (size_t)n_blocks;
  if (c->interleave) {
    o->k = malloc(2 * o->bytes), o->v = o->k ? o->k + o->step : NULL;
    o->step *= 2;
    o->kv.block_stride = (int64_t)(o->step / rove_test_dtype_size(c->type));
  } else {
    o->k = malloc(o->bytes), o->v = malloc(o->bytes);
  }
  o->pos = malloc(sizeof(int32_t) * (size_t)n_blocks * (size_t)c->bs);
  assert_true(o->k && o->v && o->pos);
  for (int64_t b = 0; b < n_blocks; b++) {
    memset(o->k + (size_t)b * o->step, 0x5a, o->step / (c->interleave ? 2 : 1));
    memset(o->v + (size_t)b * o->step, 0xa5, o->step / (c->interleave ? 2 : 1));
  }
  memset(o->pos, 0x77, sizeof(int32_t) * (size_t)n_blocks * (size_t)c->bs);
  o->kv.k = o->k, o->kv.v = o->v, o->kv.pos = o->pos;
  o->kv.type = c->type, o->kv.block_size = c->bs, o->kv.n_blocks = n_blocks, o->kv.layout = c->layout;
  if (c->type == ROVE_DTYPE_Q8) {
    o->sbytes = sizeof(float) * (size_t)rows * (size_t)((c->d + ROVE_Q8_BLOCK - 1) / ROVE_Q8_BLOCK);
    o->ks = malloc(o->sbytes), o->vs = malloc(o->sbytes);
    assert_true(o->ks && o->vs);
    memset(o->ks, 0x33, o->sbytes), memset(o->vs, 0x44, o->sbytes);
    o->kv.k_scale = o->ks, o->kv.v_scale = o->vs;
  }
}

static void pool_free(pool *o) {
  if (o->kv.block_stride == 0) free(o->v);
  free(o->k), free(o->ks), free(o->vs), free(o->pos);
}

/* the bytes of a pool, to check "untouched" */
typedef struct {
  char *k, *v, *ks, *vs, *pos;
} snap;

static void take(snap *s, const pool *o) {
  const size_t pb = sizeof(int32_t) * (size_t)o->kv.n_blocks * (size_t)o->kv.block_size;
  s->k = malloc(o->bytes), s->v = malloc(o->bytes), s->pos = malloc(pb);
  memcpy(s->k, o->k, o->bytes), memcpy(s->v, o->v, o->bytes), memcpy(s->pos, o->pos, pb);
  s->ks = s->vs = NULL;
  if (o->sbytes) {
    s->ks = malloc(o->sbytes), s->vs = malloc(o->sbytes);
    memcpy(s->ks, o->ks, o->sbytes), memcpy(s->vs, o->vs, o->sbytes);
  }
}

static void expect_untouched(const snap *s, const pool *o) {
  const size_t pb = sizeof(int32_t) * (size_t)o->kv.n_blocks * (size_t)o->kv.block_size;
  assert_memory_equal(s->k, o->k, o->bytes);
  assert_memory_equal(s->v, o->v, o->bytes);
  assert_memory_equal(s->pos, o->pos, pb);
  if (o->sbytes) {
    assert_memory_equal(s->ks, o->ks, o->sbytes);
    assert_memory_equal(s->vs, o->vs, o->sbytes);
  }
}

static void drop(snap *s) { free(s->k), free(s->v), free(s->ks), free(s->vs), free(s->pos); }

static void store_case(const scase *c, uint64_t seed) {
  rove_rng r;
  rove_rng_seed(&r, seed);
  rove_plan *p = make_plan(c, 1), *ps = make_plan(c, c->threads);
  const int32_t len[NSEQ] = {37, 1 + (int32_t)(rove_rng_u64(&r) % 70), 5};
  const int64_t wkv = (int64_t)c->Hkv * c->d, aw = (int64_t)c->Hkv * c->d / 2;
  int64_t total = 0, blocks = 0;
  for (int s = 0; s < NSEQ; s++) total += len[s], blocks += (len[s] + c->bs - 1) / c->bs;
  /* the tokens: K, V, positions (gaps), angles, in the order sequence by sequence */
  float *k = malloc(sizeof(float) * (size_t)(total * wkv)), *v = malloc(sizeof(float) * (size_t)(total * wkv));
  double *ang = malloc(sizeof(double) * (size_t)(total * aw));
  int32_t *pos = malloc(sizeof(int32_t) * (size_t)total);
  assert_true(k && v && ang && pos);
  rove_rng_fill(&r, k, total * wkv, -2, 2), rove_rng_fill(&r, v, total * wkv, -2, 2);
  if (c->big) { /* |v| <= 2 x: rotated below 2.83 x, above the bound 4 x <= the type's max */
    const float x = c->type == ROVE_DTYPE_F16 ? 2e4f : c->type == ROVE_DTYPE_BF16 ? 1e38f : 3e37f;
    for (int64_t i = 0; i < total * wkv; i++) v[i] *= x;
  }
  for (int64_t i = 0; i < total * aw; i++) ang[i] = rove_rng_uniform(&r, -30, 30);
  int64_t first[NSEQ + 1] = {0};
  for (int s = 0; s < NSEQ; s++) {
    first[s + 1] = first[s] + len[s];
    for (int32_t j = 0; j < len[s]; j++) pos[first[s] + j] = 3 * j + s + (j > 20 ? 100 : 0);
  }
  uint16_t *kb = NULL, *vb = NULL;
  if (c->in_type == ROVE_DTYPE_BF16) { /* bf16 input: both paths read the same bits */
    kb = malloc(2 * (size_t)(total * wkv)), vb = malloc(2 * (size_t)(total * wkv));
    assert_true(kb && vb);
    to_bf16(kb, k, total * wkv), to_bf16(vb, v, total * wkv);
  }
  const size_t isz = c->in_type == ROVE_DTYPE_BF16 ? 2 : 4;
  const char *kin = kb ? (const char *)kb : (const char *)k, *vin = vb ? (const char *)vb : (const char *)v;

  /* librove's pool: appended in interleaved chunks of 1..9 tokens, so blocks scatter */
  rove_paged_cache *pc = NULL;
  assert_int_equal(rove_paged_cache_create(p, c->type, c->bs, (int32_t)blocks + 2, NSEQ, &pc), ROVE_OK);
  int32_t seq[NSEQ], done[NSEQ] = {0};
  for (int s = 0; s < NSEQ; s++) assert_int_equal(rove_paged_seq_create(pc, &seq[s]), ROVE_OK);
  for (int left = 1; left;) {
    left = 0;
    for (int s = 0; s < NSEQ; s++) {
      int32_t m = 1 + (int32_t)(rove_rng_u64(&r) % 9);
      if (m > len[s] - done[s]) m = len[s] - done[s];
      if (m == 0) continue;
      const int64_t i0 = first[s] + done[s];
      assert_int_equal(rove_paged_append(pc, seq[s], m, kin + (size_t)(i0 * wkv) * isz, 0,
                                         vin + (size_t)(i0 * wkv) * isz, 0, c->in_type, pos + i0,
                                         c->angles ? ang + i0 * aw : NULL),
                       ROVE_OK);
      done[s] += m, left = 1;
    }
  }
  rove_paged_kv cv;
  assert_int_equal(rove_paged_cache_view(pc, &cv), ROVE_OK);
  int32_t tables[NSEQ * MAXB], nb;
  for (int s = 0; s < NSEQ; s++)
    assert_int_equal(rove_paged_seq_block_table(pc, seq[s], tables + s * MAXB, MAXB, &nb), ROVE_OK);

  /* the caller's pool: every token in one call (padding slots between sequences), or in
   * two calls split mid-sequence */
  pool o;
  pool_make(&o, c, cv.n_blocks);
  const int64_t n = total + NSEQ;
  int64_t *slots = malloc(sizeof(int64_t) * (size_t)n);
  float *k2 = malloc(sizeof(float) * (size_t)(n * wkv)), *v2 = malloc(sizeof(float) * (size_t)(n * wkv));
  double *a2 = malloc(sizeof(double) * (size_t)(n * aw));
  int32_t *p2 = malloc(sizeof(int32_t) * (size_t)n);
  assert_true(slots && k2 && v2 && a2 && p2);
  char *kin2 = (char *)k2, *vin2 = (char *)v2;
  int64_t t = 0;
  for (int s = NSEQ - 1; s >= 0; s--) { /* the sequences in another order */
    for (int32_t j = 0; j < len[s]; j++, t++) {
      const int64_t i = first[s] + j;
      slots[t] = (int64_t)tables[s * MAXB + j / c->bs] * c->bs + j % c->bs;
      memcpy(kin2 + (size_t)(t * wkv) * isz, kin + (size_t)(i * wkv) * isz, (size_t)wkv * isz);
      memcpy(vin2 + (size_t)(t * wkv) * isz, vin + (size_t)(i * wkv) * isz, (size_t)wkv * isz);
      memcpy(a2 + t * aw, ang + i * aw, sizeof(double) * (size_t)aw);
      p2[t] = pos[i];
    }
    slots[t] = -1 - s; /* padding: skipped */
    /* NaN K and V (all-ones bytes: NaN in fp32 and bf16) and NaN angles: neither read nor
     * checked, or a Q8 or F16 pool would refuse them, and their table rows unused */
    memset(kin2 + (size_t)(t * wkv) * isz, 0xff, (size_t)wkv * isz);
    memset(vin2 + (size_t)(t * wkv) * isz, 0xff, (size_t)wkv * isz);
    for (int64_t e = 0; e < aw; e++) a2[t * aw + e] = NAN;
    p2[t] = 0, t++;
  }
  const int32_t cut = (int32_t)(seed % 2 ? n / 2 : n);
  for (int32_t lo = 0; lo < n; lo = cut < n && lo < cut ? cut : (int32_t)n) {
    const int32_t hi = lo < cut ? cut : (int32_t)n;
    assert_int_equal(rove_paged_store(ps, &o.kv, hi - lo, slots + lo, kin2 + (size_t)(lo * wkv) * isz, 0,
                                      vin2 + (size_t)(lo * wkv) * isz, 0, c->in_type, p2 + lo,
                                      c->angles ? a2 + lo * aw : NULL),
                     ROVE_OK);
  }
  /* every row of every used block: the cache's bytes; other rows keep the pattern */
  const int tm = c->layout == ROVE_PAGED_TOKEN_MAJOR;
  const int64_t nsc = (c->d + ROVE_Q8_BLOCK - 1) / ROVE_Q8_BLOCK;
  for (int s = 0; s < NSEQ; s++)
    for (int32_t j = 0; j < len[s]; j++) {
      const int64_t b = tables[s * MAXB + j / c->bs], row = j % c->bs;
      assert_int_equal(o.pos[b * c->bs + row], cv.pos[b * c->bs + row]);
      for (int64_t h = 0; h < c->Hkv; h++) {
        const int64_t hm = (b * c->Hkv + h) * c->bs + row, mine = tm ? row * c->Hkv + h : h * c->bs + row;
        assert_memory_equal(row_at(&o, o.k, b, mine), (const char *)cv.k + (size_t)hm * o.row, o.row);
        assert_memory_equal(row_at(&o, o.v, b, mine), (const char *)cv.v + (size_t)hm * o.row, o.row);
        if (c->type == ROVE_DTYPE_Q8) { /* Q8: dense and head-major, scale rows as hm */
          assert_memory_equal(o.ks + hm * nsc, cv.k_scale + hm * nsc, sizeof(float) * (size_t)nsc);
          assert_memory_equal(o.vs + hm * nsc, cv.v_scale + hm * nsc, sizeof(float) * (size_t)nsc);
        }
      }
    }
  /* rows past each sequence's end in its last block: every head's K and V row untouched */
  for (int s = 0; s < NSEQ; s++)
    for (int32_t j = len[s]; j % c->bs; j++) {
      const int64_t b = tables[s * MAXB + j / c->bs], row = j % c->bs;
      for (int64_t h = 0; h < c->Hkv; h++) {
        const int64_t mine = tm ? row * c->Hkv + h : h * c->bs + row;
        const char *kr = row_at(&o, o.k, b, mine), *vr = row_at(&o, o.v, b, mine);
        for (size_t e = 0; e < o.row; e++) {
          assert_int_equal((uint8_t)kr[e], 0x5a);
          assert_int_equal((uint8_t)vr[e], 0xa5);
        }
      }
      assert_int_equal(o.pos[b * c->bs + row], 0x77777777);
    }

  /* attention over the caller's pool: the bits of the cache's own call */
  const int32_t cu[NSEQ + 1] = {0, 1, 3, 4}; /* 1, 2, 1 query rows */
  const int64_t wq = (int64_t)c->H * c->d;
  float *q = malloc(sizeof(float) * (size_t)(4 * wq)), *o1 = malloc(sizeof(float) * (size_t)(4 * wq));
  float *o2 = malloc(sizeof(float) * (size_t)(4 * wq));
  double *qa = malloc(sizeof(double) * (size_t)(4 * aw));
  assert_true(q && o1 && o2 && qa);
  rove_rng_fill(&r, q, 4 * wq, -1, 1);
  for (int64_t i = 0; i < 4 * aw; i++) qa[i] = rove_rng_uniform(&r, -30, 30);
  int32_t qpos[4] = {400, 401, 402, 403};
  rove_paged_args a;
  memset(&a, 0, sizeof a);
  a.n_seqs = NSEQ, a.cu_seqlens_q = cu, a.q = q, a.out = o1, a.q_pos = qpos;
  a.q_angles = c->angles ? qa : NULL;
  assert_int_equal(rove_paged_cache_attention(pc, seq, &a), ROVE_OK);
  a.out = o2, a.seq_lens = len, a.block_tables = tables, a.max_blocks = MAXB;
  assert_int_equal(rove_paged_attention(p, &o.kv, &a), ROVE_OK);
  assert_memory_equal(o1, o2, sizeof(float) * (size_t)(4 * wq));

  free(q), free(o1), free(o2), free(qa);
  free(slots), free(k2), free(v2), free(a2), free(p2);
  pool_free(&o);
  rove_paged_cache_destroy(pc);
  free(k), free(v), free(ang), free(pos), free(kb), free(vb);
  rove_plan_destroy(p), rove_plan_destroy(ps);
}

static void test_store_equals_append(void **state) {
  (void)state;
  const rove_dtype types[4] = {ROVE_DTYPE_F32, ROVE_DTYPE_BF16, ROVE_DTYPE_F16, ROVE_DTYPE_Q8};
  const uint32_t rots[2] = {ROVE_ROTATE_K | ROVE_ROTATE_V, ROVE_ROTATE_K};
  const int bss[2] = {1, 16};
  uint64_t seed = 1;
  for (int ti = 0; ti < 4; ti++)
    for (int32_t layout = 0; layout < 2; layout++)
      for (int ri = 0; ri < 2; ri++)
        for (int bi = 0; bi < 2; bi++)
          for (int angles = 0; angles < 2; angles++) {
            if (layout == ROVE_PAGED_TOKEN_MAJOR && types[ti] == ROVE_DTYPE_Q8) continue;
            const int gqa = (int)(seed % 2);
            scase c = {rots[ri], gqa ? 4 : 2, 2, ti == 3 ? 40 : 32, bss[bi], angles,
                       1 + (int)(seed % 3 == 0), types[ti],
                       seed % 4 == 1 ? ROVE_DTYPE_BF16 : ROVE_DTYPE_F32, layout, seed % 3 == 2,
                       ti != 3 && seed % 5 < 2, ti > 0 && seed % 7 < 3};
            store_case(&c, seed++);
          }
}

/* Bad input: statuses, and the pool untouched. */
static void test_store_errors(void **state) {
  (void)state;
  scase c = {ROVE_ROTATE_K | ROVE_ROTATE_V, 2, 2, 32, 16, 0, 2, ROVE_DTYPE_F16, ROVE_DTYPE_F32,
             ROVE_PAGED_HEAD_MAJOR, 0, 0, 0};
  rove_plan *p = make_plan(&c, 2);
  pool o;
  pool_make(&o, &c, 40); /* 640 slots */
  enum { N = 300 };      /* two chunks of staging */
  const int64_t wkv = 64;
  float *k = malloc(sizeof(float) * N * wkv), *v = malloc(sizeof(float) * N * wkv);
  int64_t slots[N];
  int32_t pos[N];
  double ang[N * 32];
  rove_rng r;
  rove_rng_seed(&r, 9);
  rove_rng_fill(&r, k, N * wkv, -1, 1), rove_rng_fill(&r, v, N * wkv, -1, 1);
  for (int i = 0; i < N; i++) slots[i] = 2 * i, pos[i] = i;
  for (int i = 0; i < N * 32; i++) ang[i] = 0.25;
  snap s0;
  take(&s0, &o);
  const rove_paged_kv *kv = &o.kv;
  assert_int_equal(rove_paged_store(NULL, kv, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_store(p, NULL, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_store(p, kv, N, NULL, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_store(p, kv, N, slots, NULL, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_store(p, kv, N, slots, k, 0, NULL, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_store(p, kv, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, NULL, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_store(p, kv, -1, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_store(p, kv, N, slots, k, 0, v, 0, ROVE_DTYPE_Q8, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_store(p, kv, N, slots, k, 63, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_store(p, kv, 0, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_OK);
  assert_int_equal(rove_paged_store(p, kv, 0, NULL, NULL, 0, NULL, 0, ROVE_DTYPE_F32, NULL, NULL), ROVE_OK);
  expect_untouched(&s0, &o);
  /* slots: past the pool, repeated (also far apart, in different chunks) */
  slots[N - 1] = 640;
  assert_int_equal(rove_paged_store(p, kv, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  slots[N - 1] = 4;
  assert_int_equal(rove_paged_store(p, kv, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  slots[N - 1] = 2 * (N - 1);
  /* non-finite angles */
  ang[N * 32 - 1] = NAN;
  assert_int_equal(rove_paged_store(p, kv, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, ang), ROVE_ERR_INVALID_ARGUMENT);
  ang[N * 32 - 1] = 0.25;
  /* a value F16 cannot hold in the last token (second chunk): nothing written */
  v[(N - 1) * wkv + 3] = 1e6f;
  assert_int_equal(rove_paged_store(p, kv, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  v[(N - 1) * wkv + 3] = 0.5f;
  /* overlaps: an input inside the pool, the pool's arrays over each other */
  assert_int_equal(rove_paged_store(p, kv, 4, slots, o.k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_store(p, kv, 4, slots, k, 0, v, 0, ROVE_DTYPE_F32, o.pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_paged_store(p, kv, 4, (const int64_t *)(const void *)o.v, k, 0, v, 0,
                                    ROVE_DTYPE_F32, pos, NULL),
                   ROVE_ERR_INVALID_ARGUMENT);
  rove_paged_kv same = o.kv;
  same.v = same.k;
  assert_int_equal(rove_paged_store(p, &same, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  same = o.kv, same.pos = (const int32_t *)(const void *)(o.k + 64);
  assert_int_equal(rove_paged_store(p, &same, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  /* bad pools */
  same = o.kv, same.block_size = 12;
  assert_int_equal(rove_paged_store(p, &same, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  same = o.kv, same.layout = 2;
  assert_int_equal(rove_paged_store(p, &same, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  /* block strides: below a block; K and V interleaved so that their blocks share bytes
   * (v half a block after k), or not (v one block after k: fine, tested above) */
  const int64_t blk = 2 * 16 * 32; /* elements of a block: Hkv x bs x d */
  same = o.kv, same.block_stride = blk - 1;
  assert_int_equal(rove_paged_store(p, &same, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  {
    char *il = malloc((size_t)(2 * blk * 2 * 20)); /* 20 blocks of f16 K and V */
    assert_non_null(il);
    memset(il, 0x5a, (size_t)(2 * blk * 2 * 20));
    rove_paged_kv ik = o.kv;
    ik.k = il, ik.v = il + blk, ik.n_blocks = 20, ik.pos = NULL, ik.block_stride = 2 * blk;
    assert_int_equal(rove_paged_store(p, &ik, 4, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
    ik.v = il + 3 * blk; /* one and a half blocks of f16 after k: V block b at K's 2b+1 */
    assert_int_equal(rove_paged_store(p, &ik, 4, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
    ik.v = il + 2 * blk; /* one block of f16 after k */
    assert_int_equal(rove_paged_store(p, &ik, 4, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_OK);
    free(il);
  }
  expect_untouched(&s0, &o);
  /* a Q8 pool: NaN cannot be stored; token-major is unsupported */
  scase c8 = c;
  c8.type = ROVE_DTYPE_Q8;
  pool o8;
  pool_make(&o8, &c8, 40);
  snap s8;
  take(&s8, &o8);
  k[(N - 2) * wkv] = NAN;
  assert_int_equal(rove_paged_store(p, &o8.kv, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  k[(N - 2) * wkv] = 0.5f;
  same = o8.kv, same.layout = ROVE_PAGED_TOKEN_MAJOR;
  assert_int_equal(rove_paged_store(p, &same, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_UNSUPPORTED);
  same = o8.kv, same.block_stride = 2 * blk;
  assert_int_equal(rove_paged_store(p, &same, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_UNSUPPORTED);
  same = o8.kv, same.v_scale = NULL;
  assert_int_equal(rove_paged_store(p, &same, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_ERR_INVALID_ARGUMENT);
  expect_untouched(&s8, &o8);
  /* and then it works, negative slots skipped */
  slots[0] = -1;
  assert_int_equal(rove_paged_store(p, kv, N, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL), ROVE_OK);
  assert_memory_equal(o.k, s0.k, o.row); /* slot 0: skipped */
  assert_memory_not_equal(o.k + 2 * o.row, s0.k + 2 * o.row, o.row);
  assert_int_equal(o.pos[2], 1);
  assert_int_equal(o.pos[0], 0x77777777);
  drop(&s0), drop(&s8);
  pool_free(&o), pool_free(&o8);
  free(k), free(v);
  rove_plan_destroy(p);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_store_equals_append),
                                     cmocka_unit_test(test_store_errors)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
