/* SPDX-License-Identifier: MIT */
/* rove_attention_varlen: packed sequences of different lengths, each attending only its
 * own keys (rove.h). Sequence s is the batch-1 call over its slice of the packed tensors:
 * q / out rows cu_q[s] .. cu_q[s+1]-1, k / v rows cu_k[s] .. cu_k[s+1]-1 (token strides
 * as given), its slices of the positions and angles, and its LSE at lse + cu_q[s] with
 * the heads total_q apart. The calls are validated, sized and run together by
 * rove_fwd_calls (attention_calls.c). */
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"
#include "kernels/dtype.h"

/* Extents (bytes, elements of each tensor's type; the LSE is fp32) of the packed tensors,
 * and the no-overlap rule across sequences: out and lse overlap no array the call reads
 * (the cu arrays, positions and angles too: a later group reads its slices after earlier
 * groups wrote their outputs), nor each other. */
static rove_status check_packed(const rove_plan *p, const rove_varlen_args *a,
                                const rove_tensor_types *t, int64_t tq, int64_t tk) {
  const int64_t d = p->cfg.head_dim, wq = p->cfg.n_heads * d, wk = p->cfg.n_kv_heads * d;
  int64_t s, eq = 0, ek = 0, ev = 0, eo = 0;
  rove_status st = ROVE_OK;
  if (tq > 0 && st == ROVE_OK) st = rove_tensor_extent(a->q_stride, wq, tq, &s, &eq);
  if (tq > 0 && st == ROVE_OK) st = rove_tensor_extent(a->out_stride, wq, tq, &s, &eo);
  if (tk > 0 && st == ROVE_OK) st = rove_tensor_extent(a->k_stride, wk, tk, &s, &ek);
  if (tk > 0 && st == ROVE_OK) st = rove_tensor_extent(a->v_stride, wk, tk, &s, &ev);
  if (st != ROVE_OK) return st;
  int64_t el = 0;
  if (!rove_mul_i64(tq, p->cfg.n_heads, &el) || el > INT64_MAX / 4) return ROVE_ERR_SIZE_OVERFLOW;
  /* the element counts fit int64 / 4 (rove_tensor_extent), so bytes fit size_t */
  const size_t bq = (size_t)eq * (size_t)rove_dtype_size(t->q);
  const size_t bo = (size_t)eo * (size_t)rove_dtype_size(t->out);
  const size_t bk = (size_t)ek * (size_t)rove_dtype_size(t->k);
  const size_t bv = (size_t)ev * (size_t)rove_dtype_size(t->v);
  const size_t bl = (size_t)el * sizeof(float);
  const size_t aw = (size_t)p->cfg.n_kv_heads * (size_t)p->half * sizeof(double);
  const size_t bcu = rove_span_bytes((int64_t)a->n_seqs + 1, sizeof(int32_t));
  const rove_span in[10] = {{bq ? a->q : NULL, bq},
                           {bk ? a->k : NULL, bk},
                           {bv ? a->v : NULL, bv},
                           {a->cu_seqlens_q, bcu},
                           {a->cu_seqlens_k, bcu},
                           {a->q_pos, rove_span_bytes(tq, sizeof(int32_t))},
                           {a->kv_pos, rove_span_bytes(tk, sizeof(int32_t))},
                           {a->q_angles, rove_span_bytes(tq, aw)},
                           {a->kv_angles, rove_span_bytes(tk, aw)},
                           {a->sinks, (size_t)p->cfg.n_heads * sizeof(float)}};
  if (bo && rove_overlap_any(a->out, bo, in, 10)) return ROVE_ERR_INVALID_ARGUMENT;
  if (a->lse && bl && (rove_overlap_any(a->lse, bl, in, 10) || rove_overlap(a->lse, bl, a->out, bo)))
    return ROVE_ERR_INVALID_ARGUMENT;
  return ROVE_OK;
}

/* Element e of a tensor of type t (NULL stays NULL). */
static const void *at(const void *x, rove_dtype t, int64_t e) {
  return x ? (const char *)x + e * rove_dtype_size(t) : NULL;
}

/* The batch-1 call of sequence s (lse left NULL: its layout is varlen's, set after init).
 * Strides count elements of each tensor's own type. */
static rove_attention_args seq_args(const rove_plan *p, const rove_varlen_args *a,
                                    const rove_tensor_types *t, int32_t s) {
  const int64_t d = p->cfg.head_dim, H = p->cfg.n_heads, Hkv = p->cfg.n_kv_heads;
  const int64_t q0 = a->cu_seqlens_q[s], k0 = a->cu_seqlens_k[s];
  const int64_t qs = a->q_stride ? a->q_stride : H * d, os = a->out_stride ? a->out_stride : H * d;
  const int64_t ks = a->k_stride ? a->k_stride : Hkv * d, vs = a->v_stride ? a->v_stride : Hkv * d;
  const int64_t aw = Hkv * p->half;
  rove_attention_args b;
  memset(&b, 0, sizeof b);
  b.batch = 1;
  b.q_len = a->cu_seqlens_q[s + 1] - a->cu_seqlens_q[s];
  b.kv_len = a->cu_seqlens_k[s + 1] - a->cu_seqlens_k[s];
  /* only a non-empty slice gets a pointer (the calls skip empty ones): its first element
   * lies inside the tensor's extent, which check_packed bounded by INT64_MAX bytes */
  if (b.q_len > 0) b.q = at(a->q, t->q, q0 * qs), b.out = (float *)at(a->out, t->out, q0 * os);
  if (b.kv_len > 0) b.k = at(a->k, t->k, k0 * ks), b.v = at(a->v, t->v, k0 * vs);
  b.q_stride = a->q_stride, b.k_stride = a->k_stride, b.v_stride = a->v_stride;
  b.out_stride = a->out_stride;
  b.q_pos = a->q_pos ? a->q_pos + q0 : NULL;
  b.kv_pos = a->kv_pos ? a->kv_pos + k0 : NULL;
  b.q_angles = a->q_angles ? a->q_angles + q0 * aw : NULL;
  b.kv_angles = a->kv_angles ? a->kv_angles + k0 * aw : NULL;
  b.sinks = a->sinks;
  return b;
}

rove_status rove_attention_varlen_typed(const rove_plan *p, const rove_varlen_args *a,
                                        const rove_tensor_types *types) {
  if (!p || !a || a->n_seqs <= 0) return ROVE_ERR_INVALID_ARGUMENT;
  /* the types first: the extents below count elements of them */
  if (types && (!rove_dtype_is_tensor(types->q) || !rove_dtype_is_tensor(types->k) ||
                !rove_dtype_is_tensor(types->v) || !rove_dtype_is_tensor(types->out)))
    return ROVE_ERR_INVALID_ARGUMENT;
  static const rove_tensor_types all_f32 = {ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_F32,
                                            ROVE_DTYPE_F32};
  const rove_tensor_types *t = types ? types : &all_f32; /* the element sizes */
  int64_t tq = 0, tk = 0;
  if (!rove_check_cu(a->cu_seqlens_q, a->n_seqs, &tq) || !rove_check_cu(a->cu_seqlens_k, a->n_seqs, &tk))
    return ROVE_ERR_INVALID_ARGUMENT;
  /* q and out may be NULL only when no sequence has queries, k and v when none has keys */
  if ((tq > 0 && (!a->q || !a->out)) || (tk > 0 && (!a->k || !a->v))) return ROVE_ERR_INVALID_ARGUMENT;
  if (!a->q_angles != !a->kv_angles) return ROVE_ERR_INVALID_ARGUMENT;
  rove_status st = check_packed(p, a, t, tq, tk);
  if (st == ROVE_OK) st = rove_check_sinks(p, a->sinks);
  if (st != ROVE_OK) return st;
  rove_attention_args *args = calloc((size_t)a->n_seqs, sizeof *args);
  if (!args) return ROVE_ERR_OUT_OF_MEMORY;
  for (int32_t s = 0; s < a->n_seqs; s++) args[s] = seq_args(p, a, t, s);
  st = rove_fwd_calls(p, a->n_seqs, args, NULL, types, a->lse, a->cu_seqlens_q, tq);
  free(args);
  return st;
}

rove_status rove_attention_varlen(const rove_plan *p, const rove_varlen_args *a) {
  return rove_attention_varlen_typed(p, a, NULL);
}
