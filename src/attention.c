/* SPDX-License-Identifier: MIT */
/* The attention driver: the parallel phases of rove_attention_forward (validation and
 * workspace: attention_setup.c; the per-task helpers the phases share with streaming
 * decode, incl. the phase 0 table task and the phase 3 merge: attention_tile.c).
 *
 * Phase 0 (tables): cos/sin [rows][r/2] for the key positions and the query positions
 *   (the query table is a view into the key table for default positions, q_len <= kv_len);
 *   with explicit angles (Selective RoPE) [batch][rows][n_kv_heads][r/2].
 * Phase 1 (pack, parallel over batch x kv head x chunks of key tiles): K rotated (times the
 *   YaRN factor m) into the ISA's packed-K layout, V rotated into [kv_pad][d] (zero rows
 *   past kv_len). Each KV head is rotated once, however many query heads read it (GQA).
 * Phase 2 (attend, parallel over batch x heads x query tiles; within a head the heaviest
 *   causal tiles first): pack the query tile (rotated, times m * scale), run the flash tile over every
 *   key tile that is not fully masked (mask only on tiles that need it), then finish.
 *   With few query tiles (decode) the keys of each tile are split and phase 3 merges the
 *   parts exactly by their LSE; with a single query tile per head, phases 1-2 are replaced
 *   by streaming tasks that rotate each K/V tile into L1 right before use
 *   (attention_decode.c), so K and V are read once.
 * Every task writes a disjoint part of the output, and the task split depends only on the
 * shapes, so results are bitwise identical for any thread count.
 * Workspace: O((q_len + kv_len) * d) per call (with explicit angles the tables add
 * batch * (q_len + kv_len) * n_kv_heads * r floats, the size of K itself), plus
 * O(tile_q * (d + tile_kv)) per thread. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"
#include "attention_tile.h"

/* Phase 1 task: up to ROVE_PACK_TILES key tiles of one (batch, kv head). */
static void pack_task(int64_t task, int tid, void *vctx) {
  (void)tid;
  rove_fwd *f = vctx;
  const rove_plan *p = f->p;
  const rove_kernels *kn = p->kern;
  const int32_t d = p->cfg.head_dim, hkv = p->cfg.n_kv_heads, tk = kn->tile_kv;
  const int64_t chunk = task % f->n_kchunks, bh = task / f->n_kchunks;
  const int64_t b = bh / hkv, kvh = bh % hkv;
  const int64_t j0 = chunk * ROVE_PACK_TILES * tk;
  const int64_t nj = (j0 + ROVE_PACK_TILES * tk < f->kv_len ? ROVE_PACK_TILES * tk : f->kv_len - j0);
  rove_rot rk = rove_fwd_krot(f, b, kvh, j0, p->cfg.rotate & ROVE_ROTATE_K);
  rove_rot rv = rove_fwd_krot(f, b, kvh, j0, p->cfg.rotate & ROVE_ROTATE_V);
  float *kdst = f->kpack + bh * f->kv_pad * d + j0 * d;
  float *vdst = f->vpack + bh * f->kv_pad * d + j0 * d;
  /* fp32 rows are read in place; typed K rows are widened into vdst (free until V goes
   * there), typed V rows into vdst and rotated there in place */
  int64_t ks, vs;
  const float *krows = rove_fwd_rows_f32(f, 0, b, kvh, j0, nj, vdst, &ks);
  kn->pack_k(kdst, krows, ks, nj, d, &rk, f->k_mul);
  const float *vrows = rove_fwd_rows_f32(f, 1, b, kvh, j0, nj, vdst, &vs);
  if (vrows != vdst || rv.cos) kn->rotate(vdst, d, vrows, vs, nj, d, &rv, 1.0f, 1.0f, 0);
  if (j0 + nj == f->kv_len && f->kv_pad > f->kv_len) /* zero the padding rows of V */
    memset(vdst + nj * d, 0, sizeof(float) * (size_t)((f->kv_pad - f->kv_len) * d));
  /* The key tiles' position ranges are per batch row, shared by its KV heads: written by
   * the KV head 0 task only (several tasks writing the same words would be a data race). */
  for (int64_t t = 0; kvh == 0 && t < (nj + tk - 1) / tk; t++) {
    int64_t kt = j0 / tk + t, nk = nj - t * tk < tk ? nj - t * tk : tk;
    rove_pos_range(f->kpos + b * f->kpos_bstride + kt * tk, nk, &f->kmin[b * f->n_kt + kt],
                   &f->kmax[b * f->n_kt + kt]);
  }
}

/* o, m, l of query tile q over the pre-packed key tiles [kt0, kt1). */
static void attend_range(const rove_fwd *f, const rove_qtile *q, int64_t kt0, int64_t kt1,
                         float *qbuf, float *s, float *o, float *m, float *l) {
  const rove_plan *p = f->p;
  const int32_t d = p->cfg.head_dim, tk = p->kern->tile_kv;
  rove_fwd_begin(f, q, qbuf, o, m, l);
  const int32_t *qpos = f->qpos + q->b * f->qpos_bstride + q->i0;
  int32_t qmin, qmax;
  rove_pos_range(qpos, q->nq, &qmin, &qmax);
  rove_tile_args t = {.q = qbuf, .d = d, .q_pos = qpos, .nq = q->nq, .causal = p->cfg.causal,
                      .window = p->cfg.window, .softcap = p->cfg.softcap, .o = o, .m = m,
                      .l = l, .scratch = s};
  const int32_t *kmin = f->kmin + q->b * f->n_kt, *kmax = f->kmax + q->b * f->n_kt;
  for (int64_t kt = kt0; kt < kt1; kt++) {
    int c = rove_classify(qmin, qmax, kmin[kt], kmax[kt], p->cfg.causal, p->cfg.window);
    if (c == 0) continue;
    t.k = f->kpack + q->kvbh * f->kv_pad * d + kt * tk * d;
    t.v = f->vpack + q->kvbh * f->kv_pad * d + kt * tk * d;
    t.nk = (int32_t)(f->kv_len - kt * tk < tk ? f->kv_len - kt * tk : tk);
    t.k_pos = f->kpos + q->b * f->kpos_bstride + kt * tk;
    t.mask = c == 2;
    p->kern->attn_tile(&t);
  }
}

/* Phase 2 task: query tile `task / n_splits` over its share of the key tiles. Without a
 * split it finishes the tile; with one it leaves (o, m, l) in the partial buffer. */
static void attend_task(int64_t task, int tid, void *vctx) {
  rove_fwd *f = vctx;
  const int64_t d = f->p->cfg.head_dim, tq = f->p->kern->tile_q;
  const rove_qtile q = rove_fwd_qtile(f, task / f->n_splits);
  const int64_t split = task % f->n_splits;
  const int64_t kt0 = f->n_kt * split / f->n_splits, kt1 = f->n_kt * (split + 1) / f->n_splits;
  float *ws = f->scratch + (int64_t)tid * f->scratch_floats;
  float *qbuf = ws, *s = qbuf + tq * d, *o = s + tq * f->p->kern->tile_kv;
  if (f->n_splits > 1) o = f->partial + task * f->partial_floats;
  float *m = o + tq * d, *l = m + tq;
  attend_range(f, &q, kt0, kt1, qbuf, s, o, m, l);
  if (f->n_splits == 1) rove_fwd_finish(f, &q, o, m, l);
}

/* Below this many multiply-adds (QK^T and PV, ignoring masks) a call runs on the calling
 * thread: waking a team costs more than the work (a decode step over a short cache). */
#define ROVE_MIN_PARALLEL_MACS (1 << 20)

void rove_fwd_run(rove_fwd *f) {
  const rove_plan *p = f->p;
  const double macs = 2.0 * f->batch * p->cfg.n_heads * (double)f->q_len * f->kv_len * p->cfg.head_dim;
  const int32_t nt = macs < ROVE_MIN_PARALLEL_MACS ? 1 : p->cfg.n_threads;
  const int64_t qtasks = (int64_t)f->batch * p->cfg.n_heads * f->n_qt;
  rove_parallel_for(nt, f->n_tables, rove_fwd_table_task, f);
  if (f->streaming) {
    rove_parallel_for(nt, (int64_t)f->batch * f->n_splits, rove_fwd_stream_task, f);
  } else {
    rove_parallel_for_blocked(nt, (int64_t)f->batch * p->cfg.n_kv_heads * f->n_kchunks, pack_task, f);
    rove_parallel_for_blocked(nt, qtasks * f->n_splits, attend_task, f);
  }
  if (f->streaming || f->n_splits > 1) rove_parallel_for(nt, qtasks, rove_fwd_merge_task, f);
  rove_fwd_release(f);
}

/* ---- several calls as one (rove_attention_varlen) ----------------------------------- */

typedef void (*task_fn)(int64_t i, int tid, void *ctx);

/* Phase tasks of n calls in one loop: task i belongs to the call s with off[s] <= i <
 * off[s + 1] (each call's own task order kept), run with fn[s] (NULL: none). */
typedef struct {
  rove_fwd *f;
  int32_t n;
  const int64_t *off;
  const task_fn *fn;
} many_ctx;

static void many_task(int64_t i, int tid, void *vctx) {
  const many_ctx *m = vctx;
  int32_t lo = 0, hi = m->n - 1; /* the last s with off[s] <= i */
  while (lo < hi) {
    const int32_t mid = (lo + hi + 1) / 2;
    if (m->off[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  m->fn[lo](i - m->off[lo], tid, &m->f[lo]);
}

/* One phase: count(f) tasks of each call through fn(f) (count 0 where fn is NULL). */
static void run_phase(rove_fwd *f, int32_t n, int64_t *off, task_fn *fn, int32_t nt,
                      int blocked) {
  off[0] = 0;
  for (int32_t s = 0; s < n; s++) off[s + 1] = off[s] + (fn[s] ? off[n + 1 + s] : 0);
  if (off[n] == 0) return;
  many_ctx m = {f, n, off, fn};
  (blocked ? rove_parallel_for_blocked : rove_parallel_for)(nt, off[n], many_task, &m);
}

void rove_fwd_run_many(rove_fwd *f, int32_t n) {
  if (n <= 0) return;
  const rove_plan *p = f[0].p;
  /* off: [n + 1] offsets, then [n] task counts; fn: [n] bodies. Small stack arrays for
   * small n, else one allocation (whose failure falls back to one call at a time). */
  int64_t off_s[2 * 16 + 1];
  task_fn fn_s[16];
  int64_t *off = n <= 16 ? off_s : malloc(sizeof(int64_t) * (size_t)(2 * n + 1));
  task_fn *fn = n <= 16 ? fn_s : malloc(sizeof(task_fn) * (size_t)n);
  if (!off || !fn) {
    if (n > 16) free(off), free(fn);
    for (int32_t s = 0; s < n; s++) rove_fwd_run(&f[s]);
    return;
  }
  int64_t *cnt = off + n + 1;
  double macs = 0.0;
  for (int32_t s = 0; s < n; s++)
    macs += 2.0 * f[s].batch * p->cfg.n_heads * (double)f[s].q_len * f[s].kv_len * p->cfg.head_dim;
  const int32_t nt = macs < ROVE_MIN_PARALLEL_MACS ? 1 : p->cfg.n_threads;
  for (int32_t s = 0; s < n; s++) fn[s] = rove_fwd_table_task, cnt[s] = f[s].n_tables;
  run_phase(f, n, off, fn, nt, 0);
  /* streaming calls' tasks and the others' packs (independent of each other) */
  for (int32_t s = 0; s < n; s++) {
    fn[s] = f[s].streaming ? rove_fwd_stream_task : pack_task;
    cnt[s] = f[s].streaming ? (int64_t)f[s].batch * f[s].n_splits
                            : (int64_t)f[s].batch * p->cfg.n_kv_heads * f[s].n_kchunks;
  }
  run_phase(f, n, off, fn, nt, 1);
  for (int32_t s = 0; s < n; s++) {
    fn[s] = f[s].streaming ? NULL : attend_task;
    cnt[s] = (int64_t)f[s].batch * p->cfg.n_heads * f[s].n_qt * f[s].n_splits;
  }
  run_phase(f, n, off, fn, nt, 1);
  for (int32_t s = 0; s < n; s++) {
    fn[s] = f[s].streaming || f[s].n_splits > 1 ? rove_fwd_merge_task : NULL;
    cnt[s] = (int64_t)f[s].batch * p->cfg.n_heads * f[s].n_qt;
  }
  run_phase(f, n, off, fn, nt, 0);
  for (int32_t s = 0; s < n; s++) rove_fwd_release(&f[s]);
  if (n > 16) free(off), free(fn);
}

rove_status rove_attention_forward_typed(const rove_plan *p, const rove_attention_args *a,
                                         const rove_tensor_types *types) {
  rove_fwd f;
  rove_status st = rove_fwd_init(&f, p, a, NULL, types);
  if (st == ROVE_OK) rove_fwd_run(&f);
  return st;
}

rove_status rove_attention_forward(const rove_plan *p, const rove_attention_args *a) {
  return rove_attention_forward_typed(p, a, NULL);
}
