/* SPDX-License-Identifier: MIT */
/* rove_attention_forward's validation, sizes and workspace (see attention.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"
#include "selective.h"

rove_status rove_tensor_extent(int64_t stride, int64_t width, int64_t rows, int64_t *resolved,
                               int64_t *extent) {
  if (stride == 0) stride = width;
  if (stride < width) return ROVE_ERR_INVALID_ARGUMENT;
  int64_t e;
  if (!rove_mul_i64(rows - 1, stride, &e) || !rove_add_i64(e, width, &e) ||
      e > INT64_MAX / (int64_t)sizeof(float))
    return ROVE_ERR_SIZE_OVERFLOW;
  *resolved = stride;
  *extent = e;
  return ROVE_OK;
}

/* The caller's K or V: token, head and batch strides resolved (rove_attention_args: a head
 * stride of 0 puts the heads of a token side by side, so a token row is n_kv_heads *
 * head_dim wide; a head stride >= head_dim puts them apart, and a token row is head_dim
 * wide; a batch stride of 0 is kv_len token strides, refused with the heads apart and
 * batch > 1) and the element extent
 *   (batch - 1) bs + (n_kv_heads - 1) hs + (kv_len - 1) ts + head_dim
 * (with the defaults: (batch kv_len - 1) ts + n_kv_heads head_dim, as before). */
static rove_status kv_extent(const rove_fwd *f, const rove_attention_args *a, int64_t tstride,
                             int64_t bstride, int64_t *ts, int64_t *bs, int64_t *extent) {
  const int64_t d = f->p->cfg.head_dim, hkv = f->p->cfg.n_kv_heads, hs = a->kv_head_stride;
  const int64_t row = hs ? d : hkv * d; /* the dense width of a token row */
  if (tstride == 0) tstride = row;
  if (tstride < row || hs < 0 || (hs && hs < d) || bstride < 0) return ROVE_ERR_INVALID_ARGUMENT;
  if (hs && bstride == 0 && a->batch > 1) return ROVE_ERR_INVALID_ARGUMENT; /* outer axis unknown */
  int64_t e, t;
  if (bstride == 0 && !rove_mul_i64(a->kv_len, tstride, &bstride)) return ROVE_ERR_SIZE_OVERFLOW;
  if (!rove_mul_i64(a->batch - 1, bstride, &e) || !rove_mul_i64(hkv - 1, hs ? hs : d, &t) ||
      !rove_add_i64(e, t, &e) || !rove_mul_i64(a->kv_len - 1, tstride, &t) ||
      !rove_add_i64(e, t, &e) || !rove_add_i64(e, d, &e) || e > INT64_MAX / (int64_t)sizeof(float))
    return ROVE_ERR_SIZE_OVERFLOW;
  *ts = tstride;
  *bs = bstride;
  *extent = e;
  return ROVE_OK;
}

/* Strides, extents and the no-overlap rule for the output tensors (K/V only when they are
 * the caller's: a cache's are the library's own): out and lse overlap no array the call
 * reads, positions and angles included (they are read per batch row and tile, while other
 * tasks already write), nor each other. */
static rove_status check_tensors(rove_fwd *f, const rove_attention_args *a) {
  const rove_attention_config *c = &f->p->cfg;
  const int64_t wq = (int64_t)c->n_heads * c->head_dim, wkv = (int64_t)c->n_kv_heads * c->head_dim;
  int64_t qrows, krows, eq, ek, ev, eo, el;
  if (!rove_mul_i64(a->batch, a->q_len, &qrows) || !rove_mul_i64(a->batch, a->kv_len, &krows))
    return ROVE_ERR_SIZE_OVERFLOW;
  rove_status st = rove_tensor_extent(a->q_stride, wq, qrows, &f->qs, &eq);
  ek = ev = 0;
  f->ks = f->vs = wkv;
  if (st == ROVE_OK && !f->kv_rotated)
    st = kv_extent(f, a, a->k_stride, a->k_batch_stride, &f->ks, &f->k_bstride, &ek);
  if (st == ROVE_OK && !f->kv_rotated)
    st = kv_extent(f, a, a->v_stride, a->v_batch_stride, &f->vs, &f->v_bstride, &ev);
  f->kv_hstride = a->kv_head_stride ? a->kv_head_stride : c->head_dim;
  if (st == ROVE_OK) st = rove_tensor_extent(a->out_stride, wq, qrows, &f->os, &eo);
  if (st != ROVE_OK) return st;
  f->q_extent = eq;
  f->k_extent = ek;
  f->v_extent = ev;
  f->o_extent = eo;
  if (!rove_mul_i64(qrows, c->n_heads, &el) || el > INT64_MAX / (int64_t)sizeof(float))
    return ROVE_ERR_SIZE_OVERFLOW;
  /* byte extents (elements of each tensor's type; the lse is fp32) */
  const size_t bq = (size_t)eq * (size_t)rove_dtype_size(f->q_type);
  const size_t bk = (size_t)ek * (size_t)rove_dtype_size(f->k_type);
  const size_t bv = (size_t)ev * (size_t)rove_dtype_size(f->v_type);
  const size_t bo = (size_t)eo * (size_t)rove_dtype_size(f->out_type), bl = (size_t)el * sizeof(float);
  const size_t aw = (size_t)c->n_kv_heads * (size_t)f->p->half * sizeof(double);
  const rove_span in[8] = {{a->q, bq},
                           {a->k, bk},
                           {a->v, bv},
                           {a->q_pos, rove_span_bytes(qrows, sizeof(int32_t))},
                           {a->kv_pos, rove_span_bytes(krows, sizeof(int32_t))},
                           {a->q_angles, rove_span_bytes(qrows, aw)},
                           {a->kv_angles, rove_span_bytes(krows, aw)},
                           {a->sinks, (size_t)c->n_heads * sizeof(float)}};
  if (rove_overlap_any(a->out, bo, in, 8)) return ROVE_ERR_INVALID_ARGUMENT;
  if (a->lse && (rove_overlap_any(a->lse, bl, in, 8) || rove_overlap(a->lse, bl, a->out, bo)))
    return ROVE_ERR_INVALID_ARGUMENT;
  return ROVE_OK;
}

rove_status rove_check_sinks(const rove_plan *p, const float *sinks) {
  if (!sinks) return ROVE_OK;
  for (int32_t h = 0; h < p->cfg.n_heads; h++)
    if (!isfinite(sinks[h])) return ROVE_ERR_INVALID_ARGUMENT;
  return ROVE_OK;
}

/* Explicit angles (Selective RoPE): both or neither for caller K/V; with a cache only
 * q_angles (the cache holds K/V rotated already). Finite, checked before anything runs. */
static rove_status check_angles(rove_fwd *f, const rove_attention_args *a) {
  f->angles = a->q_angles != NULL;
  f->tab_w = f->p->half;
  if (f->kv_rotated ? a->kv_angles != NULL : (a->q_angles == NULL) != (a->kv_angles == NULL))
    return ROVE_ERR_INVALID_ARGUMENT;
  if (!f->angles) return ROVE_OK;
  int64_t nq, nk;
  f->tab_w = (int64_t)f->p->cfg.n_kv_heads * f->p->half;
  if (!rove_mul_i64(f->batch * f->q_len, f->tab_w, &nq) ||
      !rove_mul_i64(f->batch * f->kv_len, f->tab_w, &nk) || nq > INT64_MAX / 8 || nk > INT64_MAX / 8)
    return ROVE_ERR_SIZE_OVERFLOW;
  const int kv_checked = a->kv_angles == a->q_angles && nk <= nq; /* self-attention: one array */
  if (!rove_angles_finite(a->q_angles, nq) ||
      (a->kv_angles && !kv_checked && !rove_angles_finite(a->kv_angles, nk)))
    return ROVE_ERR_INVALID_ARGUMENT;
  return ROVE_OK;
}

/* Which tables exist and how big they are; returns the table float count or -1. Tables
 * hold tab_w floats per token row (see rove_fwd); explicit angles are per batch row. */
static int64_t plan_tables(rove_fwd *f, const rove_attention_args *a) {
  const uint32_t rot = f->p->cfg.rotate;
  const int64_t w = f->tab_w;
  const int need_k = !f->kv_rotated && (rot & (ROVE_ROTATE_K | ROVE_ROTATE_V)) != 0;
  const int need_q = (rot & (ROVE_ROTATE_Q | ROVE_ROTATE_O)) != 0;
  const int kv_own = a->kv_pos || f->angles, q_own = a->q_pos || f->angles;
  f->k_tab_batches = need_k ? (kv_own ? a->batch : 1) : 0;
  f->ktab_bstride = kv_own ? f->kv_len * w : 0;
  /* the query table is a view into the key table when the queries are the last q_len
   * keys: default positions, or the same angle array in self-attention (q_len == kv_len) */
  const int same_angles = f->angles && a->q_angles == a->kv_angles && f->q_len == f->kv_len;
  const int q_is_view = need_q && need_k && f->q_len <= f->kv_len &&
                        ((!q_own && !kv_own) || same_angles);
  f->q_tab_batches = (need_q && !q_is_view) ? (q_own ? a->batch : 1) : 0;
  f->qtab_bstride = q_own ? f->q_len * w : 0;
  int64_t krows, qrows, total;
  if (!rove_mul_i64(f->k_tab_batches, f->kv_len, &krows) ||
      !rove_mul_i64(f->q_tab_batches, f->q_len, &qrows) || !rove_add_i64(krows, qrows, &total) ||
      !rove_mul_i64(total, 2 * w, &total))
    return -1;
  f->n_ktab_tasks = (krows + ROVE_TABLE_ROWS - 1) / ROVE_TABLE_ROWS;
  f->n_tables = f->n_ktab_tasks + (qrows + ROVE_TABLE_ROWS - 1) / ROVE_TABLE_ROWS;
  return total;
}

/* Tiles, the decode schedule (streaming, key splits) and the per-thread scratch size.
 * Everything here depends on the shapes only, never on the thread count. */
static void choose_schedule(rove_fwd *f) {
  const rove_plan *p = f->p;
  const int64_t d = p->cfg.head_dim, tq = p->kern->tile_q, tk = p->kern->tile_kv;
  f->n_qt = (f->q_len + tq - 1) / tq;
  f->n_kt = (f->kv_len + tk - 1) / tk;
  f->kv_pad = f->n_kt * tk;
  f->n_kchunks = (f->n_kt + ROVE_PACK_TILES - 1) / ROVE_PACK_TILES;
  f->streaming = f->n_qt == 1;
  /* Streaming with the row kernel when a GQA group's query rows fit one call. */
  const int64_t H = p->cfg.n_heads, group = H / p->cfg.n_kv_heads;
  f->rows = f->streaming && group * f->q_len <= ROVE_ROWS_MAX;
  /* Independent work items before splitting keys; all <= batch * n_heads * q_len. */
  const int64_t items = (int64_t)f->batch * (f->streaming ? 1 : p->cfg.n_heads * f->n_qt);
  f->n_splits = 1;
  if (items < ROVE_SPLIT_TASKS) {
    f->n_splits = ROVE_SPLIT_TASKS / items;
    if (f->n_splits > f->n_kt / ROVE_SPLIT_MIN_TILES) f->n_splits = f->n_kt / ROVE_SPLIT_MIN_TILES;
    if (f->n_splits < 1) f->n_splits = 1;
  }
  /* The rows path keeps q_len rows per slot, not a tile's: a decode step's slots (one row
   * each) are then 576 bytes apart at d = 128, not ~49 KB (96 rows on AVX2 / AVX-512), so
   * a split's stores and the merge's reads of every head's slots stay dense (32:8 x 128,
   * 9216 keys, one thread, Zen 4: 1.04-1.06x; docs/performance.md, "Decode splits"). */
  f->partial_rows = f->rows ? f->q_len : tq;
  f->partial_floats = (f->partial_rows * d + 2 * f->partial_rows + 15) / 16 * 16;
  /* qbuf, s, o, m, l (attend) | every head's qbuf, s, K and V tiles (stream) | the row
   * kernel's scratch, every head's q and o rows, m, l and a GQA group's row positions
   * (rows; attention_decode.c) | o, m, l (merge) */
  const int64_t attend = 2 * tq * d + 2 * tq + tq * tk;
  const int64_t stream = H * tq * d + tq * tk + 2 * tk * d;
  const int64_t hrows = f->rows ? (H * f->q_len + 15) / 16 * 16 : 0; /* q_len <= 16 here */
  const int64_t rows = (ROVE_ROWS_SCRATCH(d) + 15) / 16 * 16 + 2 * hrows * d + 3 * hrows;
  f->scratch_floats = ((f->rows ? rows : f->streaming ? stream : attend) + 15) / 16 * 16;
  const int64_t merge = (tq * d + 2 * tq + 15) / 16 * 16; /* o, m, l of a merged tile */
  if (f->scratch_floats < merge) f->scratch_floats = merge;
}

/* Threads that can hold a per-thread scratch in this call: the largest team of the phases
 * that use one (attend or stream, merge; rove_team_size caps each at its task count), not
 * n_threads: a one-token decode on a plan of 1000 threads carves a few. */
static int32_t scratch_threads(const rove_fwd *f, const rove_attention_args *a) {
  const int64_t qtasks = (int64_t)a->batch * f->p->cfg.n_heads * f->n_qt;
  int64_t tasks = f->streaming ? (int64_t)a->batch * f->n_splits : qtasks * f->n_splits;
  if ((f->streaming || f->n_splits > 1) && qtasks > tasks) tasks = qtasks; /* the merge */
  const int32_t own = rove_team_size(f->p->cfg.n_threads, tasks);
  return f->team > own ? f->team : own;
}

/* Sizes of the workspace blocks, all checked; then allocate them. */
static rove_status alloc_workspace(rove_fwd *f, const rove_attention_args *a,
                                   const rove_kv_view *kv) {
  const rove_plan *p = f->p;
  const int64_t d = p->cfg.head_dim, half = p->half;
  choose_schedule(f);
  const int64_t qtasks = (int64_t)a->batch * p->cfg.n_heads * f->n_qt;
  const int packed = !f->streaming, merged = f->streaming || f->n_splits > 1;
  int64_t bh, kp = 0, km = 0, sc, part = 0, tab = plan_tables(f, a), pos = 2 * (f->q_len + f->kv_len);
  if (tab < 0 || !rove_mul_i64(a->batch, p->cfg.n_kv_heads, &bh) ||
      (packed && (!rove_mul_i64(bh, f->kv_pad * d, &kp) || !rove_mul_i64(a->batch, 2 * f->n_kt, &km))) ||
      (merged && !rove_mul_i64(qtasks * f->n_splits, f->partial_floats, &part)) ||
      !rove_mul_i64(scratch_threads(f, a), f->scratch_floats, &sc) || kp > INT64_MAX / 8 ||
      tab > INT64_MAX / 8 || part > INT64_MAX / 8)
    return ROVE_ERR_SIZE_OVERFLOW;
  /* One block of 4-byte elements (float, int32), carved into 64-byte aligned parts
   * (every count is < INT64_MAX / 8). */
  size_t off[7], total = 0;
  const int64_t count[7] = {kp, kp, km, sc, pos, tab, part};
  for (int i = 0; i < 7; i++) {
    off[i] = total;
    const size_t bytes = ((size_t)count[i] * sizeof(float) + 63) & ~(size_t)63;
    if (bytes > SIZE_MAX / 2 - total) return ROVE_ERR_SIZE_OVERFLOW;
    total += bytes;
  }
  char *block;
  if (f->ws_bytes) { /* the caller's block (rove_fwd_init_team), or only the size */
    *f->ws_bytes = total;
    if (!f->ws_block) return ROVE_OK;
    block = f->ws_block;
  } else {
    block = rove_pool_get(p->pool, total, &f->block_bytes);
    if (!block) return ROVE_ERR_OUT_OF_MEMORY;
    f->block = block;
  }
  f->kpack = (float *)(block + off[0]);
  f->vpack = (float *)(block + off[1]);
  f->kmin = (int32_t *)(block + off[2]);
  f->scratch = (float *)(block + off[3]);
  int32_t *defpos = (int32_t *)(block + off[4]);
  float *tables = tab > 0 ? (float *)(block + off[5]) : NULL;
  f->partial = (float *)(block + off[6]);
  if (packed) f->kmax = f->kmin + a->batch * f->n_kt;
  /* Default positions: P_i = kv_len - q_len + i, p_j = j. */
  for (int64_t i = 0; i < f->q_len; i++) defpos[i] = (int32_t)(f->kv_len - f->q_len + i);
  for (int64_t j = 0; j < f->kv_len; j++) defpos[f->q_len + j] = (int32_t)j;
  f->qpos = a->q_pos ? a->q_pos : defpos;
  f->kpos = a->kv_pos ? a->kv_pos : defpos + f->q_len;
  f->qpos_bstride = a->q_pos ? f->q_len : 0;
  f->kpos_bstride = a->kv_pos ? f->kv_len : 0;
  if (kv) {
    f->kpos = kv->pos;
    f->kpos_bstride = kv->pos_bstride;
  }
  const int64_t kfloats = f->k_tab_batches * f->kv_len * f->tab_w;
  f->kcos = tables;
  f->ksin = tables ? tables + kfloats : NULL;
  if (f->q_tab_batches) {
    f->qcos = tables + 2 * kfloats;
    f->qsin = f->qcos + f->q_tab_batches * f->q_len * f->tab_w;
  } else if (f->kcos) { /* view: the queries are the last q_len keys (see plan_tables) */
    f->qcos = f->kcos + (f->kv_len - f->q_len) * half;
    f->qsin = f->ksin + (f->kv_len - f->q_len) * half;
  }
  return ROVE_OK;
}

rove_status rove_fwd_init(rove_fwd *f, const rove_plan *p, const rove_attention_args *a,
                          const rove_kv_view *kv, const rove_tensor_types *types) {
  return rove_fwd_init_team(f, p, a, kv, types, 0, NULL, NULL);
}

rove_status rove_fwd_init_team(rove_fwd *f, const rove_plan *p, const rove_attention_args *a,
                               const rove_kv_view *kv, const rove_tensor_types *types,
                               int32_t team, void *block, size_t *bytes) {
  memset(f, 0, sizeof *f);
  f->team = team;
  f->ws_block = block;
  f->ws_bytes = bytes;
  if (!p || !a || !a->q || !a->out || a->batch <= 0 || a->q_len <= 0) return ROVE_ERR_INVALID_ARGUMENT;
  if (types) {
    if (!rove_dtype_is_tensor(types->q) || !rove_dtype_is_tensor(types->out) ||
        (kv ? types->k != ROVE_DTYPE_F32 || types->v != ROVE_DTYPE_F32
            : !rove_dtype_is_tensor(types->k) || !rove_dtype_is_tensor(types->v)))
      return ROVE_ERR_INVALID_ARGUMENT;
    f->q_type = types->q;
    f->out_type = types->out;
    f->k_type = types->k;
    f->v_type = types->v;
  }
  if (kv ? (a->k || a->v || a->kv_pos || a->kv_len != 0 || a->k_stride || a->v_stride ||
            a->kv_head_stride || a->k_batch_stride || a->v_batch_stride || kv->len <= 0)
         : (!a->k || !a->v || a->kv_len <= 0))
    return ROVE_ERR_INVALID_ARGUMENT;
  f->p = p;
  f->a = a;
  f->batch = a->batch;
  f->q_len = a->q_len;
  f->lse_hstride = a->q_len;
  f->kv_len = kv ? kv->len : a->kv_len;
  f->k = kv ? kv->k : a->k;
  f->v = kv ? kv->v : a->v;
  f->kv_rotated = kv != NULL;
  f->k_mul = kv ? 1.0f : (float)p->attn_factor;
  rove_status st = check_tensors(f, a);
  if (st == ROVE_OK) st = check_angles(f, a);
  if (st == ROVE_OK) st = rove_check_sinks(p, a->sinks);
  if (st != ROVE_OK) return st;
  if (kv) {
    f->k_type = f->v_type = kv->type;
    f->kscale = kv->kscale;
    f->vscale = kv->vscale;
    f->ks = f->vs = kv->tstride;
    f->k_bstride = f->v_bstride = kv->bstride;
    f->kv_hstride = kv->hstride;
    f->blocks = kv->blocks;
    f->block_shift = kv->block_shift;
    f->block_stride = kv->block_stride;
    if (kv->blocks && a->batch != 1) return ROVE_ERR_INTERNAL; /* paged views are per sequence */
  } /* else the caller's strides, resolved by check_tensors */
  return alloc_workspace(f, a, kv);
}

void rove_fwd_release(rove_fwd *f) {
  rove_pool_put(f->p->pool, f->block, f->block_bytes);
  f->block = NULL;
}
