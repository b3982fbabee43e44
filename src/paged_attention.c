/* SPDX-License-Identifier: MIT */
/* Batched decode over a paged KV pool (rove_paged_attention, rove.h).
 *
 * Sequence s is the batch-1 KV-cache call over its own keys: a view (rove_kv_view) whose
 * token j lives in block table[j / block_size], row j % block_size, of the pool laid out
 * [n_blocks][n_kv_heads][block_size][head_dim] (head-major), or [n_blocks][block_size]
 * [n_kv_heads][head_dim] (token-major: the view's head and token strides swapped). The
 * attention driver reads keys through
 * rove_fwd_kelem / rove_fwd_run_len, so the row kernel reads each block's rows in place
 * (calls split at block boundaries) and the tile paths gather them block by block: no
 * copy of K or V. The positions of a sequence's keys are gathered into one int32 array
 * (4 bytes per key next to the 2 n_kv_heads head_dim elements of K and V it reads) for
 * the masks. All calls go through rove_fwd_calls: validated and sized before any runs,
 * short sequences grouped into one parallel loop, long ones split over key ranges. */
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"
#include "paged_internal.h"

rove_status rove_paged_check_pool(const rove_plan *p, const rove_paged_kv *kv, rove_paged_geom *g) {
  if (!kv || !kv->k || !kv->v || kv->n_blocks <= 0 || kv->block_size <= 0 ||
      kv->block_size > 65536 || (kv->block_size & (kv->block_size - 1)) || (int)kv->type < 0 ||
      kv->type >= ROVE_DTYPE_COUNT)
    return ROVE_ERR_INVALID_ARGUMENT;
  if (kv->type == ROVE_DTYPE_Q8 && (!kv->k_scale || !kv->v_scale)) return ROVE_ERR_INVALID_ARGUMENT;
  if (kv->layout != ROVE_PAGED_HEAD_MAJOR && kv->layout != ROVE_PAGED_TOKEN_MAJOR)
    return ROVE_ERR_INVALID_ARGUMENT;
  const int64_t block = (int64_t)kv->block_size * p->cfg.n_kv_heads * p->cfg.head_dim; /* < 2^63 */
  if (kv->block_stride != 0 && kv->block_stride < block) return ROVE_ERR_INVALID_ARGUMENT;
  /* the row kernels find a Q8 row's scales from its element offset (dense head rows) */
  if (kv->type == ROVE_DTYPE_Q8 &&
      (kv->layout == ROVE_PAGED_TOKEN_MAJOR || (kv->block_stride != 0 && kv->block_stride != block)))
    return ROVE_ERR_UNSUPPORTED;
  const int64_t stride = kv->block_stride ? kv->block_stride : block;
  int64_t elems;
  if (!rove_mul_i64(kv->n_blocks - 1, stride, &elems) || !rove_add_i64(elems, block, &elems) ||
      elems > INT64_MAX / 8)
    return ROVE_ERR_SIZE_OVERFLOW;
  int32_t sh = 0;
  while ((1 << sh) < kv->block_size) sh++;
  *g = (rove_paged_geom){.shift = sh, .block_elems = block, .block_stride = stride,
                         .pool_bytes = elems * rove_dtype_size(kv->type)};
  return ROVE_OK;
}

/* Extents of q / out / lse (elements of sizes eq_sz / eo_sz), and no output overlapping
 * an array the call reads: q, the pool (K, V, Q8 scales, positions), cu_seqlens_q, the
 * caller's seq_lens and block tables, q_pos, q_angles (all read per group or task, while
 * other tasks already write). */
static rove_status check_tensors(const rove_plan *p, const rove_paged_kv *kv, int64_t pool_bytes,
                                 const rove_paged_args *a, int64_t tq, int64_t eq_sz,
                                 int64_t eo_sz) {
  if (tq == 0) return ROVE_OK;
  const int64_t wq = (int64_t)p->cfg.n_heads * p->cfg.head_dim;
  int64_t s, eq, eo, el;
  rove_status st = rove_tensor_extent(a->q_stride, wq, tq, &s, &eq);
  if (st == ROVE_OK) st = rove_tensor_extent(a->out_stride, wq, tq, &s, &eo);
  if (st != ROVE_OK) return st;
  if (!rove_mul_i64(tq, p->cfg.n_heads, &el) || el > INT64_MAX / 4) return ROVE_ERR_SIZE_OVERFLOW;
  const size_t bq = (size_t)(eq * eq_sz), bo = (size_t)(eo * eo_sz), bl = (size_t)el * 4;
  const size_t bp = (size_t)pool_bytes;
  const int64_t tokens = (int64_t)kv->n_blocks * kv->block_size; /* fits: check_pool */
  const size_t bsc = kv->type == ROVE_DTYPE_Q8
                         ? rove_span_bytes(tokens * p->cfg.n_kv_heads,
                                           (size_t)rove_q8_blocks(p->cfg.head_dim) * sizeof(float))
                         : 0;
  const size_t aw = (size_t)p->cfg.n_kv_heads * (size_t)p->half * sizeof(double);
  const rove_span in[12] = {
      {a->q, bq},
      {kv->k, bp},
      {kv->v, bp},
      {bsc ? kv->k_scale : NULL, bsc},
      {bsc ? kv->v_scale : NULL, bsc},
      {kv->pos, rove_span_bytes(tokens, sizeof(int32_t))},
      {a->cu_seqlens_q, rove_span_bytes((int64_t)a->n_seqs + 1, sizeof(int32_t))},
      {a->seq_lens, rove_span_bytes(a->n_seqs, sizeof(int32_t))},
      {a->block_tables, rove_span_bytes((int64_t)a->n_seqs * (a->max_blocks > 0 ? a->max_blocks : 0),
                                        sizeof(int32_t))},
      {a->q_pos, rove_span_bytes(tq, sizeof(int32_t))},
      {a->q_angles, rove_span_bytes(tq, aw)},
      {a->sinks, (size_t)p->cfg.n_heads * sizeof(float)}};
  if (rove_overlap_any(a->out, bo, in, 12)) return ROVE_ERR_INVALID_ARGUMENT;
  if (a->lse && (rove_overlap_any(a->lse, bl, in, 12) || rove_overlap(a->lse, bl, a->out, bo)))
    return ROVE_ERR_INVALID_ARGUMENT;
  return ROVE_OK;
}

rove_status rove_paged_run(const rove_plan *p, const rove_paged_kv *kv, const rove_paged_args *a,
                           const rove_tensor_types *types, const int32_t *const *tables,
                           const int32_t *lens) {
  rove_paged_geom g;
  int64_t tq;
  rove_status st = rove_paged_check_pool(p, kv, &g);
  if (st != ROVE_OK) return st;
  const int32_t shift = g.shift;
  if (types && (!rove_dtype_is_tensor(types->q) || !rove_dtype_is_tensor(types->out) ||
                types->k != ROVE_DTYPE_F32 || types->v != ROVE_DTYPE_F32))
    return ROVE_ERR_INVALID_ARGUMENT;
  const int64_t qe = rove_dtype_size(types ? types->q : ROVE_DTYPE_F32);
  const int64_t oe = rove_dtype_size(types ? types->out : ROVE_DTYPE_F32);
  const int32_t n = a->n_seqs;
  /* q and out may be NULL when no sequence has query rows (as rove_attention_varlen's) */
  if (n <= 0 || !rove_check_cu(a->cu_seqlens_q, n, &tq) || (tq > 0 && (!a->q || !a->out)))
    return ROVE_ERR_INVALID_ARGUMENT;
  st = check_tensors(p, kv, g.pool_bytes, a, tq, qe, oe);
  if (st == ROVE_OK) st = rove_check_sinks(p, a->sinks);
  if (st != ROVE_OK) return st;
  /* keys whose positions are gathered: those of sequences with queries */
  int64_t keys = 0;
  for (int32_t s = 0; s < n; s++) {
    const int64_t nq = a->cu_seqlens_q[s + 1] - a->cu_seqlens_q[s];
    if (lens[s] < 0 || (!a->q_pos && nq > lens[s])) return ROVE_ERR_INVALID_ARGUMENT;
    if (nq > 0) keys += lens[s];
  }
  rove_attention_args *args = calloc((size_t)n, sizeof *args);
  rove_kv_view *views = calloc((size_t)n, sizeof *views);
  int32_t *kpos = malloc(sizeof(int32_t) * (size_t)(keys > 0 ? keys : 1));
  int32_t *qpos = a->q_pos ? NULL : malloc(sizeof(int32_t) * (size_t)(tq > 0 ? tq : 1));
  if (!args || !views || !kpos || (!a->q_pos && !qpos)) {
    free(args), free(views), free(kpos), free(qpos);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  const int64_t d = p->cfg.head_dim, bs = kv->block_size, H = p->cfg.n_heads;
  const int64_t qs = a->q_stride ? a->q_stride : H * d, os = a->out_stride ? a->out_stride : H * d;
  const int64_t aw = (int64_t)p->cfg.n_kv_heads * p->half;
  /* head h's row r of a block: head-major at h bs d + r d, token-major at h d + r Hkv d */
  const int tm = kv->layout == ROVE_PAGED_TOKEN_MAJOR;
  const int64_t hkv = p->cfg.n_kv_heads;
  int64_t at = 0;
  for (int32_t s = 0; s < n; s++) {
    const int64_t q0 = a->cu_seqlens_q[s], nq = a->cu_seqlens_q[s + 1] - q0, len = lens[s];
    if (nq == 0) continue;
    int32_t *kp = kpos + at;
    for (int64_t j = 0; j < len; j++)
      kp[j] = kv->pos ? kv->pos[(int64_t)tables[s][j >> shift] * bs + (j & (bs - 1))] : (int32_t)j;
    if (qpos) memcpy(qpos + q0, kp + len - nq, sizeof(int32_t) * (size_t)nq);
    at += len;
    rove_attention_args *b = &args[s];
    b->batch = 1;
    b->q_len = (int32_t)nq;
    b->q = (const float *)((const char *)a->q + q0 * qs * qe); /* elements of types->q */
    b->out = (float *)((char *)a->out + q0 * os * oe);
    b->q_stride = a->q_stride;
    b->out_stride = a->out_stride;
    b->q_pos = (a->q_pos ? a->q_pos : qpos) + q0;
    b->q_angles = a->q_angles ? a->q_angles + q0 * aw : NULL;
    b->sinks = a->sinks;
    views[s] = (rove_kv_view){.k = kv->k, .v = kv->v, .hstride = tm ? d : bs * d,
                              .tstride = tm ? hkv * d : d,
                              .type = kv->type, .kscale = kv->k_scale, .vscale = kv->v_scale,
                              .len = (int32_t)len, .pos = kp, .pos_bstride = len,
                              .blocks = tables[s], .block_shift = shift,
                              .block_stride = g.block_stride};
  }
  st = rove_fwd_calls(p, n, args, views, types, a->lse, a->cu_seqlens_q, tq);
  free(args), free(views), free(kpos), free(qpos);
  return st;
}

rove_status rove_paged_attention_typed(const rove_plan *p, const rove_paged_kv *kv,
                                       const rove_paged_args *a, const rove_tensor_types *types) {
  /* q and out: checked by rove_paged_run (NULL allowed when there are no query rows);
   * block_tables NULL only with max_blocks 0 (then every sequence has 0 keys) */
  if (!p || !kv || !a || a->n_seqs <= 0 || !a->seq_lens || a->max_blocks < 0 ||
      (!a->block_tables && a->max_blocks > 0))
    return ROVE_ERR_INVALID_ARGUMENT;
  rove_paged_geom g;
  rove_status st = rove_paged_check_pool(p, kv, &g);
  if (st != ROVE_OK) return st;
  const int32_t shift = g.shift;
  /* every table entry a sequence reads: in range, and no block twice in one sequence
   * (a bitmap over the pool, set then cleared per sequence) */
  const int32_t n = a->n_seqs;
  const int32_t **tables = malloc(sizeof *tables * (size_t)n);
  uint64_t *seen = calloc(((size_t)kv->n_blocks + 63) / 64, sizeof *seen);
  if (!tables || !seen) {
    free(tables), free(seen);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  for (int32_t s = 0; s < n && st == ROVE_OK; s++) {
    const int64_t len = a->seq_lens[s];
    const int64_t nb = len > 0 ? ((len - 1) >> shift) + 1 : 0;
    tables[s] = a->block_tables ? a->block_tables + (int64_t)s * a->max_blocks : NULL;
    if (len < 0 || nb > a->max_blocks) st = ROVE_ERR_INVALID_ARGUMENT;
    int64_t i = 0;
    for (; i < nb && st == ROVE_OK; i++) {
      const int32_t blk = tables[s][i];
      if (blk < 0 || blk >= kv->n_blocks || (seen[blk / 64] >> (blk % 64) & 1))
        st = ROVE_ERR_INVALID_ARGUMENT;
      else
        seen[blk / 64] |= 1ull << (blk % 64);
    }
    while (i-- > 0) { /* clear what this sequence set */
      const int32_t blk = tables[s][i];
      if (blk >= 0 && blk < kv->n_blocks) seen[blk / 64] &= ~(1ull << (blk % 64));
    }
  }
  if (st == ROVE_OK) st = rove_paged_run(p, kv, a, types, tables, a->seq_lens);
  free(tables), free(seen);
  return st;
}

rove_status rove_paged_attention(const rove_plan *p, const rove_paged_kv *kv,
                                 const rove_paged_args *a) {
  return rove_paged_attention_typed(p, kv, a, NULL);
}
