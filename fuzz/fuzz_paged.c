/* SPDX-License-Identifier: MIT */
/* Paged KV cache operation sequences: a fuzzed plan, a pool (storage f32 / bf16 / f16 /
 * q8, block size 1 .. 16 or an invalid one, 1 .. 12 blocks, 1 .. 4 sequence slots), then
 * up to 24 of create / fork / free / append (fuzzed lengths, positions, K/V sometimes
 * huge) / truncate / shift / attention over the cache / attention over the same pool with
 * the caller's block tables (sometimes corrupted: out of range, repeated).
 * The harness models each sequence (live, length, positions) and checks after each call:
 * a valid status; a failed call changes nothing (lengths, positions, free blocks); an
 * append or shift is POOL_EXHAUSTED exactly when the blocks it needs (new ones, copies of
 * shared ones) exceed the free ones; the blocks held by live sequences (distinct) plus the
 * free blocks are the pool; outputs untouched on failure; a corrupted table is
 * INVALID_ARGUMENT; the caller's tables (copied from the cache) give the cache's own
 * result bit for bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#define H "fuzz_paged"
#define MAXSEQ 4
#define MAXLEN 48
#define MAXBLK 12

typedef struct {
  int live;
  int32_t len, pos[MAXLEN];
} mseq;

typedef struct {
  rove_paged_cache *c;
  int32_t bs, n_blocks, max_seqs;
  mseq s[MAXSEQ];
  int32_t id[MAXSEQ];
} world;

/* The table of slot i (n entries) from the cache. */
static int32_t table_of(const world *w, int i, int32_t *t) {
  int32_t n = -1;
  fz_check_status(H, rove_paged_seq_block_table(w->c, w->id[i], t, MAXBLK, &n));
  return n;
}

/* How many live sequences hold block b. */
static int holders(const world *w, int32_t b) {
  int n = 0;
  for (int i = 0; i < MAXSEQ; i++) {
    if (!w->s[i].live) continue;
    int32_t t[MAXBLK];
    const int32_t m = table_of(w, i, t);
    for (int32_t j = 0; j < m; j++) n += t[j] == b;
  }
  return n;
}

/* The model against the cache: lengths, positions, block accounting. */
static void check_world(const world *w) {
  uint8_t held[MAXBLK] = {0};
  int32_t distinct = 0;
  for (int i = 0; i < MAXSEQ; i++) {
    if (!w->s[i].live) continue;
    FZ_CHECK(H, rove_paged_seq_length(w->c, w->id[i]) == w->s[i].len, "length differs from the model");
    int32_t pos[MAXLEN];
    FZ_CHECK(H, rove_paged_seq_positions(w->c, w->id[i], pos) == ROVE_OK, "positions refused");
    FZ_CHECK(H, memcmp(pos, w->s[i].pos, sizeof(int32_t) * (size_t)w->s[i].len) == 0,
             "positions differ from the model");
    int32_t t[MAXBLK];
    const int32_t n = table_of(w, i, t);
    FZ_CHECK(H, n == (w->s[i].len + w->bs - 1) / w->bs, "table length");
    for (int32_t j = 0; j < n; j++) {
      FZ_CHECK(H, t[j] >= 0 && t[j] < w->n_blocks, "table entry out of the pool");
      distinct += !held[t[j]], held[t[j]] = 1;
    }
  }
  FZ_CHECK(H, distinct + rove_paged_cache_free_blocks(w->c) == w->n_blocks, "blocks lost or doubled");
}

static void attend(world *w, const rove_plan *p, const rove_attention_config *rc, fz_reader *rd) {
  int32_t ids[MAXSEQ], slots[MAXSEQ], cu[MAXSEQ + 1] = {0}, n = 0;
  for (int i = 0; i < MAXSEQ; i++)
    if (w->s[i].live && fz_bool(rd)) {
      slots[n] = i, ids[n] = w->id[i];
      const int32_t rows = fz_range(rd, 0, 3);
      cu[n + 1] = cu[n] + rows;
      n++;
    }
  if (n == 0) return;
  const int64_t wq = (int64_t)rc->n_heads * rc->head_dim, tq = cu[n] > 0 ? cu[n] : 1;
  float *q = fz_alloc((size_t)(tq * wq) * 4);
  fz_fill_f32(rd, q, (size_t)(tq * wq), 2.0f);
  int32_t *qp = NULL;
  if (fz_bool(rd)) {
    qp = malloc((size_t)tq * 4);
    for (int64_t i = 0; i < tq; i++) qp[i] = fz_pos(rd);
  }
  float *out = fz_canary_alloc((size_t)(tq * wq) * 4), *lse = fz_canary_alloc((size_t)(tq * rc->n_heads) * 4);
  rove_paged_args a;
  memset(&a, 0, sizeof a);
  a.n_seqs = n, a.cu_seqlens_q = cu, a.q = q, a.out = out, a.lse = lse, a.q_pos = qp;
  const rove_status st = rove_paged_cache_attention(w->c, ids, &a);
  fz_check_status(H, st);
  int default_ok = 1; /* default positions need as many keys as rows */
  for (int32_t s = 0; s < n; s++) default_ok &= cu[s + 1] - cu[s] <= w->s[slots[s]].len;
  if (!qp && !default_ok) FZ_CHECK(H, st == ROVE_ERR_INVALID_ARGUMENT, "rows without keys accepted");
  if (st != ROVE_OK) {
    FZ_CHECK(H, fz_untouched(out, (size_t)(tq * wq) * 4), "out written on failure");
    FZ_CHECK(H, fz_untouched(lse, (size_t)(tq * rc->n_heads) * 4), "lse written on failure");
  }
  /* the caller's tables: the same bits, or INVALID when one is corrupted */
  int32_t tables[MAXSEQ][MAXBLK], lens[MAXSEQ];
  for (int32_t s = 0; s < n; s++) {
    memset(tables[s], 0, sizeof tables[s]);
    table_of(w, slots[s], tables[s]);
    lens[s] = w->s[slots[s]].len;
  }
  int corrupt = 0;
  if (fz_u8(rd) >= 200) {
    const int32_t s = fz_range(rd, 0, n - 1), nb = (lens[s] + w->bs - 1) / w->bs;
    if (nb > 0) {
      const int32_t at = fz_range(rd, 0, nb - 1);
      if (fz_bool(rd) || nb < 2)
        tables[s][at] = fz_bool(rd) ? -1 - fz_range(rd, 0, 5) : w->n_blocks + fz_range(rd, 0, 5);
      else
        tables[s][at] = tables[s][(at + 1) % nb];
      corrupt = 1;
    }
  }
  rove_paged_kv kv;
  FZ_CHECK(H, rove_paged_cache_view(w->c, &kv) == ROVE_OK, "view refused");
  float *out2 = fz_canary_alloc((size_t)(tq * wq) * 4), *lse2 = fz_canary_alloc((size_t)(tq * rc->n_heads) * 4);
  a.out = out2, a.lse = lse2, a.seq_lens = lens, a.block_tables = &tables[0][0], a.max_blocks = MAXBLK;
  const rove_status se = rove_paged_attention(p, &kv, &a);
  fz_check_status(H, se);
  if (corrupt) {
    FZ_CHECK(H, se == ROVE_ERR_INVALID_ARGUMENT, "a corrupted block table accepted");
    FZ_CHECK(H, fz_untouched(out2, (size_t)(tq * wq) * 4), "out written for a corrupted table");
  } else {
    FZ_CHECK(H, se == st, "the caller's tables and the cache's call disagree (status)");
    if (st == ROVE_OK) {
      FZ_CHECK(H, memcmp(out, out2, (size_t)(cu[n] * wq) * 4) == 0, "caller's tables != cache (out)");
      FZ_CHECK(H, memcmp(lse, lse2, (size_t)(cu[n] * rc->n_heads) * 4) == 0, "caller's tables != cache (lse)");
      /* the same pool token-major (flash-attn's order): the same bits, or refused for Q8 */
      const size_t es = kv.type == ROVE_DTYPE_F32 ? 4 : kv.type == ROVE_DTYPE_Q8 ? 1 : 2;
      const size_t row = es * (size_t)rc->head_dim, nkv = (size_t)rc->n_kv_heads;
      const size_t bs = (size_t)kv.block_size, pool = (size_t)kv.n_blocks * bs * nkv * row;
      char *tk = fz_alloc(pool), *tv = fz_alloc(pool);
      for (size_t b = 0; b < (size_t)kv.n_blocks; b++)
        for (size_t h = 0; h < nkv; h++)
          for (size_t r = 0; r < bs; r++) {
            memcpy(tk + ((b * bs + r) * nkv + h) * row, (const char *)kv.k + ((b * nkv + h) * bs + r) * row, row);
            memcpy(tv + ((b * bs + r) * nkv + h) * row, (const char *)kv.v + ((b * nkv + h) * bs + r) * row, row);
          }
      rove_paged_kv tm = kv;
      tm.k = tk, tm.v = tv, tm.layout = ROVE_PAGED_TOKEN_MAJOR;
      const rove_status stm = rove_paged_attention(p, &tm, &a);
      fz_check_status(H, stm);
      if (kv.type == ROVE_DTYPE_Q8) {
        FZ_CHECK(H, stm == ROVE_ERR_UNSUPPORTED, "a token-major Q8 pool accepted");
      } else {
        FZ_CHECK(H, stm == ROVE_OK, "a token-major pool refused");
        FZ_CHECK(H, memcmp(out, out2, (size_t)(cu[n] * wq) * 4) == 0, "token-major != head-major (out)");
        FZ_CHECK(H, memcmp(lse, lse2, (size_t)(cu[n] * rc->n_heads) * 4) == 0, "token-major != head-major (lse)");
      }
      free(tk), free(tv);
    }
  }
  free(q), free(qp), free(out), free(lse), free(out2), free(lse2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader rd;
  fz_init(&rd, data, size);
  rove_attention_config rc;
  rove_plan *plan = fz_plan_from_input(&rd, H, &rc);
  if (!plan) return 0;
  static const int32_t sizes[] = {1, 2, 4, 8, 16, 3, 0};
  world w;
  memset(&w, 0, sizeof w);
  w.bs = fz_pick_i32(&rd, sizes, 7);
  w.n_blocks = fz_range(&rd, 1, MAXBLK);
  w.max_seqs = fz_range(&rd, 1, MAXSEQ);
  const rove_dtype type = (rove_dtype)fz_range(&rd, 0, 4); /* 4: invalid */
  const rove_status cs = rove_paged_cache_create(plan, type, w.bs, w.n_blocks, w.max_seqs, &w.c);
  fz_check_status(H, cs);
  const int bad = w.bs == 0 || (w.bs & (w.bs - 1)) || type >= ROVE_DTYPE_COUNT;
  FZ_CHECK(H, (cs == ROVE_OK) == !bad, "pool parameters accepted / refused wrongly");
  if (cs != ROVE_OK) {
    rove_plan_destroy(plan);
    return 0;
  }
  const int64_t wkv = (int64_t)rc.n_kv_heads * rc.head_dim;
  float *k = fz_alloc((size_t)(MAXLEN * wkv) * 4), *v = fz_alloc((size_t)(MAXLEN * wkv) * 4);
  const int ops = fz_range(&rd, 1, 24);
  for (int op = 0; op < ops; op++) {
    const int i = fz_range(&rd, 0, MAXSEQ - 1), what = fz_range(&rd, 0, 7);
    mseq *m = &w.s[i];
    const int32_t free0 = rove_paged_cache_free_blocks(w.c);
    if (!m->live) { /* create, or fork a live slot */
      const int j = fz_range(&rd, 0, MAXSEQ - 1), fork = w.s[j].live && fz_bool(&rd);
      int live = 0;
      for (int t = 0; t < MAXSEQ; t++) live += w.s[t].live;
      const rove_status st = fork ? rove_paged_seq_fork(w.c, w.id[j], &w.id[i])
                                  : rove_paged_seq_create(w.c, &w.id[i]);
      fz_check_status(H, st);
      FZ_CHECK(H, (st == ROVE_ERR_POOL_EXHAUSTED) == (live >= w.max_seqs), "slot accounting");
      FZ_CHECK(H, st == ROVE_OK || st == ROVE_ERR_POOL_EXHAUSTED, "create / fork refused");
      if (st == ROVE_OK) {
        *m = fork ? w.s[j] : (mseq){0};
        m->live = 1;
      }
    } else if (what < 3) { /* append */
      const int32_t n = fz_range(&rd, 0, 12);
      if (m->len + n > MAXLEN) continue;
      fz_fill_f32(&rd, k, (size_t)(n > 0 ? n : 1) * (size_t)wkv, fz_u8(&rd) >= 240 ? 1e5f : 2.0f);
      fz_fill_f32(&rd, v, (size_t)(n > 0 ? n : 1) * (size_t)wkv, 2.0f);
      int32_t pos[12];
      const int explicit_pos = fz_bool(&rd);
      for (int32_t t = 0; t < n; t++) pos[t] = fz_pos(&rd);
      const int32_t nb = n > 0 ? (m->len + n + w.bs - 1) / w.bs : 0, ob = (m->len + w.bs - 1) / w.bs;
      int cow = 0;
      if (n > 0 && m->len % w.bs) {
        int32_t t[MAXBLK];
        table_of(&w, i, t);
        cow = holders(&w, t[ob - 1]) > 1;
      }
      const int64_t next = m->len ? (int64_t)m->pos[m->len - 1] + 1 : 0;
      const rove_status st = rove_paged_append(w.c, w.id[i], n, k, 0, v, 0, ROVE_DTYPE_F32,
                                               explicit_pos ? pos : NULL, NULL);
      fz_check_status(H, st);
      if (n > 0 && (explicit_pos || next + n - 1 <= INT32_MAX))
        FZ_CHECK(H, (st == ROVE_ERR_POOL_EXHAUSTED) == (nb - ob + cow > free0), "exhaustion mispredicted");
      if (type == ROVE_DTYPE_F32 && n > 0 && nb - ob + cow <= free0 && (explicit_pos || next + n - 1 <= INT32_MAX))
        FZ_CHECK(H, st == ROVE_OK, "an f32 append refused");
      if (st == ROVE_OK) {
        for (int32_t t = 0; t < n; t++) m->pos[m->len + t] = explicit_pos ? pos[t] : (int32_t)(next + t);
        m->len += n;
      } else {
        FZ_CHECK(H, rove_paged_cache_free_blocks(w.c) == free0, "a failed append took blocks");
      }
    } else if (what < 4) { /* truncate */
      const int32_t to = fz_range(&rd, 0, m->len + 1);
      const rove_status st = rove_paged_truncate(w.c, w.id[i], to);
      FZ_CHECK(H, (st == ROVE_OK) == (to <= m->len), "truncate bounds");
      if (st == ROVE_OK) m->len = to;
    } else if (what < 5) { /* free */
      FZ_CHECK(H, rove_paged_seq_free(w.c, w.id[i]) == ROVE_OK, "free refused");
      m->live = 0;
    } else if (what < 6) { /* shift */
      const int32_t a0 = fz_range(&rd, 0, m->len), a1 = fz_range(&rd, a0, m->len);
      const int32_t delta = fz_bool(&rd) ? fz_range(&rd, -50, 50) : fz_pos(&rd);
      int overflow = 0, shared = 0;
      for (int32_t j = a0; j < a1; j++) {
        const int64_t np = (int64_t)m->pos[j] + delta;
        overflow |= np < INT32_MIN || np > INT32_MAX;
      }
      if (a1 > a0) {
        int32_t t[MAXBLK];
        table_of(&w, i, t);
        for (int32_t b = a0 / w.bs; b <= (a1 - 1) / w.bs; b++) shared += holders(&w, t[b]) > 1;
      }
      const rove_status st = rove_paged_shift(w.c, w.id[i], a0, a1, delta);
      fz_check_status(H, st);
      if (overflow) FZ_CHECK(H, st == ROVE_ERR_SIZE_OVERFLOW, "shift out of int32 accepted");
      else if (a1 > a0 && delta != 0)
        FZ_CHECK(H, (st == ROVE_ERR_POOL_EXHAUSTED) == (shared > free0), "shift exhaustion mispredicted");
      if (st == ROVE_OK)
        for (int32_t j = a0; j < a1; j++) m->pos[j] += delta;
      else
        FZ_CHECK(H, rove_paged_cache_free_blocks(w.c) == free0, "a failed shift took blocks");
    } else {
      attend(&w, plan, &rc, &rd);
    }
    check_world(&w);
  }
  free(k), free(v);
  rove_paged_cache_destroy(w.c);
  rove_plan_destroy(plan);
  return 0;
}
