/* SPDX-License-Identifier: MIT */
/* Streaming decode: attention when each (batch, head) has a single query tile.
 *
 * Pre-packing K and V (phase 1) would write and re-read every key once more for nothing:
 * each key is used by one query tile per head. Here a task owns one (batch, key split)
 * and walks its keys; results go to the partial buffer and phase 3 merges the splits.
 *
 * Rows path (f->rows: a GQA group's query rows, group * q_len, fit one attn_rows call).
 * The row kernel reads K and V row-major in place, so nothing is repacked or copied: a KV
 * cache's rows (stored rotated, head-major [b][kv head][cap][d]) as they are, the caller's
 * ([b][token][kv head][d]) rotated by the kernel as it reads them (krot / vrot). Keys are
 * taken in runs of ROWS_RUN tiles; within a run each KV head's keys are walked front to
 * back (two streams at a time, contiguous for a cache), one call per stretch of tiles of
 * the same visibility class. Where a token's rows of all KV heads lie closer together
 * than consecutive tokens' (the caller's [token][kv head][d]), a run is one tile: the
 * KV heads then consume each token's rows together instead of one 4 KB-strided stream
 * per head (32:8 x 128 / 8192 keys and 12 x 64 / 4096, one thread on a Sapphire Rapids
 * core: 1.15-1.42x, BENCHMARKS.md session 15). A paged pool with blocks of at most a
 * tile is walked the same way, one tile per run: a pool block holds the rows of every KV
 * head for its tokens ([block][kv head][bs][d]), so the heads inside a tile read its
 * blocks' K and V front to back, where one head at a time read a 4 KB run per block and
 * then jumped (blocks of 16, one thread, alternated: 12 x 64 1.07-1.08x -> 1.01-1.02x the
 * contiguous cache's time, 32:8 x 128 1.06x -> 1.01-1.02x; BENCHMARKS.md session 20). Each call then names the next
 * call's keys through the block table (hint_paged), so the kernel prefetches all of its
 * runs, not only the first. For bf16 / f16 pools (fp32 too on a Zen 5) of blocks under a
 * tile in MHA decode, and on a Zen 5 for groups of 4 fp32 rows (rows_heads_walk), one
 * attn_rows_heads call takes every KV head of the tile, the pool's blocks front to back,
 * with the walk's rows requested ahead where walk_ahead says (docs/architecture.md,
 * "Every KV head of a tile in one call").
 * Tile path (more rows): per key tile, K is packed and V copied into scratch for the flash
 * tile kernel, which is then run against the query tile of every head of the group. */
#include <string.h>

#include "attention_tile.h"

#define ROWS_RUN 16 /* key tiles per run */

/* Paged caches with blocks of at most PAGED_PREFETCH_ROWS tokens, for a row kernel that
 * does not prefetch the next call's rows (kernels.h: rows_next = 0): prefetch the block
 * PAGED_AHEAD blocks ahead of the one the row kernel reads (larger blocks: its own).
 * Measured (bench/paged_decode, 32 sequences, 12 x 64, blocks of 16): 1 and 2 blocks
 * ahead alike (1.23-1.36x the contiguous time, against 1.75x without), 4 worse. A kernel
 * with rows_next = 1 that reads the rows in place is handed the next block instead (AVX2,
 * Zen 3, BENCHMARKS.md session 11: 1.28x for 12 x 64, 1.13x for 32:8 x 128). */
#define PAGED_AHEAD 1
#define PAGED_PREFETCH_ROWS 32

/* The per-thread scratch of the rows path (sizes in choose_schedule). */
typedef struct rows_scratch {
  float *q, *o, *m, *l; /* every head's rows: [H][q_len][d], [H][q_len] */
  int32_t *qpos;        /* [group * q_len]: position of each row of a GQA group */
  float *ks;            /* the row kernel's scratch, ROVE_ROWS_SCRATCH(d) floats */
} rows_scratch;

static rows_scratch rows_carve(const rove_fwd *f, int tid) {
  const int64_t rows = f->p->cfg.n_heads * f->q_len, d = f->p->cfg.head_dim;
  const int64_t hrows = (rows + 15) / 16 * 16;
  rows_scratch s;
  s.ks = f->scratch + (int64_t)tid * f->scratch_floats; /* 64-byte aligned */
  s.q = s.ks + (ROVE_ROWS_SCRATCH(d) + 15) / 16 * 16;
  s.o = s.q + rows * d;
  s.m = s.o + rows * d;
  s.l = s.m + hrows;
  s.qpos = (int32_t *)(s.l + hrows); /* group * q_len <= rows <= hrows entries */
  return s;
}

/* Begin every head's rows of batch b (rotated, scaled queries; o = 0, m = -inf, l = 0). */
static void rows_begin(const rove_fwd *f, int64_t b, const rows_scratch *s) {
  const int64_t H = f->p->cfg.n_heads, d = f->p->cfg.head_dim, nq = f->q_len;
  for (int64_t h = 0; h < H; h++) {
    const rove_qtile q = rove_fwd_qtile(f, b * H + h);
    rove_fwd_begin(f, &q, s->q + h * nq * d, s->o + h * nq * d, s->m + h * nq, s->l + h * nq);
  }
}

/* Store every head's (o, m, l) rows into its partial slot of this split. */
static void rows_store(const rove_fwd *f, int64_t b, int64_t split, const rows_scratch *s) {
  const int64_t H = f->p->cfg.n_heads, d = f->p->cfg.head_dim, nq = f->q_len;
  const int64_t pr = f->partial_rows; /* = nq on the rows path */
  for (int64_t h = 0; h < H; h++) {
    float *slot = f->partial + ((b * H + h) * f->n_splits + split) * f->partial_floats;
    memcpy(slot, s->o + h * nq * d, sizeof(float) * (size_t)(nq * d));
    memcpy(slot + pr * d, s->m + h * nq, sizeof(float) * (size_t)nq);
    memcpy(slot + pr * d + pr, s->l + h * nq, sizeof(float) * (size_t)nq);
  }
}

/* Visibility class of key tile kt of batch b for query positions [qmin, qmax]. */
static int tile_class(const rove_fwd *f, int64_t b, int64_t kt, int32_t qmin, int32_t qmax) {
  const int64_t tk = f->p->kern->tile_kv, j0 = kt * tk;
  int32_t kmin, kmax;
  rove_pos_range(f->kpos + b * f->kpos_bstride + j0, f->kv_len - j0 < tk ? f->kv_len - j0 : tk,
                 &kmin, &kmax);
  return rove_classify(qmin, qmax, kmin, kmax, f->p->cfg.causal, f->p->cfg.window);
}

/* Point t at the rows of KV head kvh's GQA group (query, o, m, l). */
static void rows_group(rove_rows_args *t, const rows_scratch *s, int64_t kvh) {
  const int64_t r0 = kvh * t->nq, d = t->d;
  t->q = s->q + r0 * d;
  t->o = s->o + r0 * d;
  t->m = s->m + r0;
  t->l = s->l + r0;
}

/* Keys [j0, j1) of KV head kvh of batch b through the row kernel, read in place: the
 * cache's rows as stored, the caller's rotated (and K times m) as the kernel reads them. */
static void rows_piece(const rove_fwd *f, rove_rows_args *t, int64_t b, int64_t kvh, int64_t j0,
                       int64_t j1, int cls, int paged, int32_t heads);

/* Name the rows from token j of KV head h of batch b as those of the call after this one
 * (rove_rows_args.k_next ..., a prefetch hint); hint_none: no such call. */
static void hint_rows(const rove_fwd *f, rove_rows_args *t, int64_t b, int64_t h, int64_t j) {
  const int64_t ke = rove_fwd_kelem(f, b, h, j), ve = rove_fwd_velem(f, b, h, j);
  t->k_next = rove_fwd_raw(f->k, f->k_type, ke);
  t->v_next = rove_fwd_raw(f->v, f->v_type, ve);
  t->k_scale_next = rove_fwd_scale(f, f->kscale, ke);
  t->v_scale_next = rove_fwd_scale(f, f->vscale, ve);
  t->next_nk = 0;
}
static void hint_none(rove_rows_args *t) {
  t->k_next = t->v_next = NULL;
  t->k_scale_next = t->v_scale_next = NULL;
  t->next_nk = 0;
}

/* The row kernel reads K and V rows in place and prefetches the next call's itself. */
static int rows_own(const rove_fwd *f) {
  const int64_t d = f->p->cfg.head_dim;
  return f->p->kern->rows_next && ROVE_ROWS_IN_PLACE(f->k_type, d) &&
         ROVE_ROWS_IN_PLACE(f->v_type, d);
}

/* A paged cache whose keys the row kernel reads in place, in one call over the blocks
 * (blocks of at least 16 tokens, rows stored rotated; see rows_call). */
static int paged_in_place(const rove_fwd *f) {
  return f->blocks && rows_own(f) && f->kv_rotated && f->block_shift >= ROVE_ROWS_RUN_SHIFT &&
         f->vs == f->ks && f->block_stride % f->ks == 0;
}

/* ... in paged form (paged_in_place): the call after this one reads keys from j (a tile
 * start) of KV head h through the same block table; the kernel finds each run. */
static void hint_paged(const rove_fwd *f, rove_rows_args *t, int64_t b, int64_t h, int64_t j) {
  (void)b; /* a paged call has batch 1 */
  const int64_t e = h * f->kv_hstride, tk = f->p->kern->tile_kv;
  t->k_next = rove_fwd_raw(f->k, f->k_type, e);
  t->v_next = rove_fwd_raw(f->v, f->v_type, e);
  t->k_scale_next = rove_fwd_scale(f, f->kscale, e);
  t->v_scale_next = rove_fwd_scale(f, f->vscale, e);
  t->next_j = (int32_t)j;
  t->next_nk = (int32_t)(f->kv_len - j < tk ? f->kv_len - j : tk);
}

/* ... over a paged cache's blocks: one call over all of them (rove_rows_args.blocks) for
 * a kernel that reads them in place and prefetches their rows itself (blocks of at least
 * 16 tokens: the same arithmetic as the contiguous cache, bit for bit); else split at the
 * block boundaries (a block size that is a multiple of the row kernel's 64-key block keeps
 * its blocks, and so the contiguous cache's results bit for bit). One call per block cost
 * 1.10-1.13x the contiguous cache's time at blocks of 16 (12 x 64, 32 sequences,
 * bench/paged_decode, Sapphire Rapids): each call's fixed work (the softmax and the O
 * rescale of a 64-key block) was spent on 16 keys. */
static void rows_call(const rove_fwd *f, rove_rows_args *t, int64_t b, int64_t kvh, int64_t j0,
                      int64_t j1, int cls) {
  const int64_t bs = f->blocks ? (int64_t)1 << f->block_shift : 0, d = f->p->cfg.head_dim;
  if (!f->blocks || (paged_in_place(f) && j0 % 16 == 0)) {
    rows_piece(f, t, b, kvh, j0, j1, cls, f->blocks != NULL, 0);
    return;
  }
  const int own = rows_own(f);
  /* Paged, split: each block is a call of its own, which names the next block of the
   * sequence as its k_next / v_next (the last one keeps the hint rows_runs gave); for a
   * kernel that takes no such hint, the rows of the block PAGED_AHEAD blocks on are
   * prefetched here (the kernel's own prefetch runs ahead in memory, which past a
   * block's end is another block). */
  const rove_rows_args hint = *t;
  const int64_t row_bytes = d * rove_dtype_size(f->k_type);
  for (int64_t j = j0, n; j < j1; j += n) {
    n = rove_fwd_run_len(f, j, j1 - j);
    if (j + n < j1)
      hint_rows(f, t, b, kvh, j + n);
    else
      t->k_next = hint.k_next, t->v_next = hint.v_next, t->k_scale_next = hint.k_scale_next,
      t->v_scale_next = hint.v_scale_next, t->next_j = hint.next_j, t->next_nk = hint.next_nk;
    const int64_t ahead = (j & ~(bs - 1)) + PAGED_AHEAD * bs;
    if (!own && ahead < j1 && bs <= PAGED_PREFETCH_ROWS) {
      const char *pk = rove_fwd_raw(f->k, f->k_type, rove_fwd_kelem(f, b, kvh, ahead));
      const char *pv = rove_fwd_raw(f->v, f->v_type, rove_fwd_velem(f, b, kvh, ahead));
      const int64_t m = j1 - ahead < bs ? j1 - ahead : bs;
      /* the block's m rows of this KV head, rs bytes apart: one piece when contiguous
       * (head-major), else row by row (token-major) */
      const int64_t rs = f->ks * rove_dtype_size(f->k_type), dense = rs == row_bytes;
      const int64_t pieces = dense ? 1 : m, bytes = dense ? m * row_bytes : row_bytes;
      for (int64_t r = 0; r < pieces; r++)
        for (int64_t x = 0; x < bytes; x += 64) {
          __builtin_prefetch(pk + r * rs + x, 0, 3);
          __builtin_prefetch(pv + r * rs + x, 0, 3);
        }
    }
    rows_piece(f, t, b, kvh, j, j + n, cls, 0, 0);
  }
}

/* How far ahead attn_rows_heads requests the pool's rows (rove_rows_args.walk_ahead), on
 * AMD family 0x1A on (plan rows_zen5, where the row kernel also prefetches into L1); none
 * elsewhere (a Zen 4's bf16 / f16 walk, session 24, is unchanged). Measured on a Zen 5 (2
 * vCPUs; pools of blocks of 16 / 32, paged / contiguous time; docs/performance.md,
 * "Session 40"):
 *  - a GQA group of 4 rows (fp32): 16 KB. 32:8 x 128, one thread: 1.04-1.11x / 0.96-1.02x
 *    (the per-head calls before: 1.20-1.21x / 1.12-1.14x); 8-32 KB within the spread.
 *  - one row (MHA): 8 KB. 12 x 64, one thread: fp32 0.97x / 0.93x (none: 1.14-1.15x /
 *    1.05x with the L1 prefetch; 4 KB 1.01-1.03x / 0.92-0.93x), bf16 0.97x / 0.95x (none:
 *    1.43-1.67x with L2; 4 KB 1.02x / 0.99x, 16 KB 1.09x / 1.07x); two threads, fp32 0.90x /
 *    0.87x. */
static int32_t walk_ahead(const rove_fwd *f, int64_t rows) {
  if (!f->p->rows_zen5) return 0;
  return rows == 4 ? 16384 : 8192;
}

/* paged: the keys through rove_rows_args.blocks (row 0 of block 0 of KV head kvh as k / v,
 * the block's rows counted in rows of ks elements); else rows [j0, j1) contiguous.
 * heads > 0 (paged, t at KV head kvh's rows): KV heads kvh .. kvh + heads - 1 in one
 * attn_rows_heads call (rows_heads_walk). */
static void rows_piece(const rove_fwd *f, rove_rows_args *t, int64_t b, int64_t kvh, int64_t j0,
                       int64_t j1, int cls, int paged, int32_t heads) {
  const uint32_t rot = f->p->cfg.rotate;
  const rove_rot rk = rove_fwd_krot(f, b, kvh, j0, rot & ROVE_ROTATE_K);
  const rove_rot rv = rove_fwd_krot(f, b, kvh, j0, rot & ROVE_ROTATE_V);
  const int64_t ke = paged ? kvh * f->kv_hstride : rove_fwd_kelem(f, b, kvh, j0);
  const int64_t ve = paged ? kvh * f->kv_hstride : rove_fwd_velem(f, b, kvh, j0);
  t->blocks = paged ? f->blocks : NULL;
  t->block_shift = paged ? f->block_shift : 0;
  t->j_base = paged ? (int32_t)j0 : 0;
  t->block_rows = paged ? f->block_stride / f->ks : 0;
  t->k = rove_fwd_raw(f->k, f->k_type, ke);
  t->v = rove_fwd_raw(f->v, f->v_type, ve);
  t->k_type = f->k_type;
  t->v_type = f->v_type;
  t->k_scale = rove_fwd_scale(f, f->kscale, ke);
  t->v_scale = rove_fwd_scale(f, f->vscale, ve);
  t->ks = f->ks;
  t->vs = f->vs;
  t->k_pos = f->kpos + b * f->kpos_bstride + j0;
  t->nk = (int32_t)(j1 - j0);
  t->mask = cls == 2;
  t->krot = &rk;
  t->vrot = &rv;
  t->k_mul = f->k_mul;
  t->walk_ahead = heads > 0 ? walk_ahead(f, t->nq) : 0;
  if (heads > 0)
    f->p->kern->attn_rows_heads(t, heads, f->kv_hstride);
  else
    f->p->kern->attn_rows(t);
}

/* A paged pool of bf16 / f16 rows (and fp32 rows on a Zen 5: plan rows_zen5) in
 * blocks smaller than a tile, read in place, one query row per KV head (MHA decode),
 * head_dim <= 64 or 128, on a CPU without the paced preference (AMD): every KV head of a
 * tile in one attn_rows_heads call, which reads the pool's blocks front to back, one
 * stream at a time for the hardware prefetchers (kernels.h). Only where each key's row is
 * read in one piece: groups of rows (GQA, speculative rows) and other head dims read K by
 * sections, a walk the hardware prefetchers do not follow without the per-head calls'
 * software prefetch (32:8 x 128 bf16 blocks of 16: 1.77x the contiguous time this way,
 * against 1.03x). fp32 and q8 pools were slower this way on a Zen 4, fp32 faster on a
 * Zen 5 (docs/performance.md, "Every KV head of a tile in one call", "Session 38").
 * On a Zen 5 (rows_zen5) also groups of 4 rows over fp32 pools at d = 64 or 128
 * (measured: GQA 4:1 decode; MHA with 4 query rows and GQA 2:1 with 2 take it too, the
 * same bits), whose group path reads two keys side by side: with the walk's rows
 * requested 16 KB ahead (walk_ahead) it beats the per-head calls there. */
static int rows_heads_walk(const rove_fwd *f, int64_t rows) {
  const int32_t ty = f->k_type, d = (int32_t)f->p->cfg.head_dim;
  const int f32 = ty == ROVE_DTYPE_F32 && f->p->rows_zen5;
  return f->p->kern->attn_rows_heads && !f->p->rows_paced && ty == f->v_type &&
         f->kv_hstride >= f->ks && /* head-major: a token-major pool keeps per-head calls */
         ((rows == 1 && (d <= 64 || d == 128) &&
           (ty == ROVE_DTYPE_BF16 || ty == ROVE_DTYPE_F16 || f32)) ||
          (rows == 4 && (d == 64 || d == 128) && f32));
}

/* Key tiles [kt0, kt1) of batch b, in runs of ROWS_RUN tiles (1 for token-major rows,
 * and for a pool of blocks of at most a tile read in place: see the top of this file);
 * within a run KV head by KV head, one call per stretch of visible tiles of the same
 * visibility class; each call names the rows of the call after it (k_next, ...: a
 * prefetch hint; in paged form for such a pool). */
static void rows_runs(const rove_fwd *f, rove_rows_args *t, const rows_scratch *s, int64_t b,
                      int64_t kt0, int64_t kt1, int32_t qmin, int32_t qmax) {
  const int64_t tk = f->p->kern->tile_kv, bs = (int64_t)1 << f->block_shift;
  const int inplace = paged_in_place(f);
  int64_t run = !f->blocks && f->kv_hstride < f->ks ? 1 : ROWS_RUN;
  if (inplace && bs <= tk) run = 1; /* blocks of at most a tile: KV heads inner per tile */
  /* blocks smaller than a tile: all KV heads of a tile in one call where it pays */
  const int heads = inplace && bs < tk && rows_heads_walk(f, t->nq);
  const int64_t hkv = f->p->cfg.n_kv_heads;
  void (*const hint)(const rove_fwd *, rove_rows_args *, int64_t, int64_t, int64_t) =
      inplace ? hint_paged : hint_rows;
  for (int64_t r0 = kt0; r0 < kt1; r0 += run) {
    const int64_t r1 = r0 + run < kt1 ? r0 + run : kt1;
    int cls[ROWS_RUN];
    for (int64_t kt = r0; kt < r1; kt++) cls[kt - r0] = tile_class(f, b, kt, qmin, qmax);
    if (heads) { /* run = 1: one tile, every KV head; no hints (the kernel prefetches
                  * only along its own walk, rove_rows_args.walk_ahead) */
      if (cls[0] != 0) {
        rows_group(t, s, 0);
        hint_none(t);
        rows_piece(f, t, b, 0, r0 * tk, r1 * tk < f->kv_len ? r1 * tk : f->kv_len, cls[0], 1,
                   (int32_t)hkv);
      }
      continue;
    }
    for (int64_t kvh = 0; kvh < hkv; kvh++) {
      rows_group(t, s, kvh);
      for (int64_t kt = r0, ke; kt < r1; kt = ke) {
        const int c = cls[kt - r0];
        for (ke = kt + 1; ke < r1 && cls[ke - r0] == c;) ke++;
        if (c == 0) continue;
        /* the hint for the kernel's prefetch: the next visible tile of this KV head, else
         * the next KV head's first, else the first tile of the next run, or of the next
         * split (the task that follows on one thread; another thread's on several, where
         * the prefetch is wasted but harmless), if it is visible. Without the next split's
         * hint each split began cold: 32:8 x 128, 9216 keys (36 splits of 4 tiles), one
         * thread on a Zen 4, 1.04-1.06x slower (docs/performance.md, "Decode splits"). */
        int64_t nt = ke;
        while (nt < r1 && cls[nt - r0] == 0) nt++;
        if (nt < r1) {
          hint(f, t, b, kvh, nt * tk);
        } else if (kvh + 1 < hkv) {
          for (nt = r0; cls[nt - r0] == 0;) nt++; /* this stretch is visible: nt <= kt */
          hint(f, t, b, kvh + 1, nt * tk);
        } else if (r1 < f->n_kt && tile_class(f, b, r1, qmin, qmax) != 0) {
          hint(f, t, b, 0, r1 * tk);
        } else {
          hint_none(t);
        }
        rows_call(f, t, b, kvh, kt * tk, ke * tk < f->kv_len ? ke * tk : f->kv_len, c);
      }
    }
  }
}

/* Rows path: key tiles [kt0, kt1) of batch b for every head, into split `split`. */
static void rows_task(const rove_fwd *f, int64_t b, int64_t split, int64_t kt0, int64_t kt1,
                      int tid) {
  const rove_plan *p = f->p;
  const int64_t group = p->cfg.n_heads / p->cfg.n_kv_heads, nr = group * f->q_len;
  const rows_scratch s = rows_carve(f, tid);
  const int32_t *qpos = f->qpos + b * f->qpos_bstride;
  int32_t qmin, qmax;
  rove_pos_range(qpos, f->q_len, &qmin, &qmax);
  for (int64_t r = 0; r < nr; r++) s.qpos[r] = qpos[r % f->q_len]; /* row = (head, token) */
  rows_begin(f, b, &s);
  rove_rows_args t = {.nq = (int32_t)nr, .d = p->cfg.head_dim, .q_pos = s.qpos,
                      .causal = p->cfg.causal, .window = p->cfg.window,
                      .softcap = p->cfg.softcap, .scratch = s.ks, .paced = p->rows_paced,
                      .prefetch_l1 = p->rows_zen5};
  rows_runs(f, &t, &s, b, kt0, kt1, qmin, qmax);
  rows_store(f, b, split, &s);
}

/* Tile path: begin the query tile of every head of batch b; returns head 0's partial. */
static float *begin_heads(const rove_fwd *f, int64_t b, int64_t split, float *qbufs) {
  const int64_t H = f->p->cfg.n_heads, d = f->p->cfg.head_dim, tq = f->p->kern->tile_q;
  const int64_t step = f->n_splits * f->partial_floats;
  float *part0 = f->partial + (b * H * f->n_splits + split) * f->partial_floats;
  for (int64_t h = 0; h < H; h++) {
    const rove_qtile q = rove_fwd_qtile(f, b * H + h);
    float *o = part0 + h * step;
    rove_fwd_begin(f, &q, qbufs + h * tq * d, o, o + tq * d, o + tq * d + tq);
  }
  return part0;
}

/* Tile path: per key tile, pack K and copy V of every KV head into scratch, then the flash
 * tile against the query tile of each head of its group. */
static void tile_task(const rove_fwd *f, int64_t b, int64_t split, int64_t kt0, int64_t kt1,
                      int tid) {
  const rove_plan *p = f->p;
  const rove_kernels *kn = p->kern;
  const int32_t d = p->cfg.head_dim, tq = kn->tile_q, tk = kn->tile_kv;
  const int64_t H = p->cfg.n_heads, hkv = p->cfg.n_kv_heads, group = H / hkv;
  float *qbufs = f->scratch + (int64_t)tid * f->scratch_floats;
  float *s = qbufs + H * tq * d, *kbuf = s + (int64_t)tq * tk, *vbuf = kbuf + (int64_t)tk * d;
  float *part0 = begin_heads(f, b, split, qbufs);
  const int64_t step = f->n_splits * f->partial_floats;
  const int32_t *qpos = f->qpos + b * f->qpos_bstride;
  int32_t qmin, qmax;
  rove_pos_range(qpos, f->q_len, &qmin, &qmax);
  rove_tile_args t = {.d = d, .q_pos = qpos, .nq = (int32_t)f->q_len, .causal = p->cfg.causal,
                      .window = p->cfg.window, .softcap = p->cfg.softcap, .scratch = s,
                      .k = kbuf, .v = vbuf};
  for (int64_t kt = kt0; kt < kt1; kt++) {
    const int64_t j0 = kt * tk;
    const int c = tile_class(f, b, kt, qmin, qmax);
    if (c == 0) continue;
    t.nk = (int32_t)(f->kv_len - j0 < tk ? f->kv_len - j0 : tk);
    t.k_pos = f->kpos + b * f->kpos_bstride + j0;
    t.mask = c == 2;
    if (t.nk < tk)
      memset(vbuf + (int64_t)t.nk * d, 0, sizeof(float) * (size_t)(tk - t.nk) * (size_t)d);
    for (int64_t kvh = 0; kvh < hkv; kvh++) {
      const rove_rot rk = rove_fwd_krot(f, b, kvh, j0, p->cfg.rotate & ROVE_ROTATE_K);
      const rove_rot rv = rove_fwd_krot(f, b, kvh, j0, p->cfg.rotate & ROVE_ROTATE_V);
      /* typed K rows are widened into vbuf first (V goes there next; typed V is widened
       * there and rotated in place) */
      int64_t ks, vs;
      const float *krows = rove_fwd_rows_f32(f, 0, b, kvh, j0, t.nk, vbuf, &ks);
      kn->pack_k(kbuf, krows, ks, t.nk, d, &rk, f->k_mul);
      const float *vrows = rove_fwd_rows_f32(f, 1, b, kvh, j0, t.nk, vbuf, &vs);
      if (vrows != vbuf || rv.cos) kn->rotate(vbuf, d, vrows, vs, t.nk, d, &rv, 1.0f, 1.0f, 0);
      for (int64_t h = kvh * group; h < (kvh + 1) * group; h++) {
        float *o = part0 + h * step;
        t.q = qbufs + h * tq * d;
        t.o = o;
        t.m = o + tq * d;
        t.l = o + tq * d + tq;
        kn->attn_tile(&t);
      }
    }
  }
}

void rove_fwd_stream_task(int64_t task, int tid, void *vctx) {
  const rove_fwd *f = vctx;
  const int64_t split = task % f->n_splits, b = task / f->n_splits;
  const int64_t kt0 = f->n_kt * split / f->n_splits, kt1 = f->n_kt * (split + 1) / f->n_splits;
  if (f->rows)
    rows_task(f, b, split, kt0, kt1, tid);
  else
    tile_task(f, b, split, kt0, kt1, tid);
}
