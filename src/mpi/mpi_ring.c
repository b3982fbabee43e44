/* SPDX-License-Identifier: MIT */
/* rove_mpi_ring_attention (rove_mpi.h): the driver of ring prefill.
 *   1. local validation (no communication);
 *   2. MPI_Comm_dup, then agreement 1 (one MPI_Allreduce): the ranks' statuses, the
 *      largest shard (it sizes the receive buffers), and batch and the plan's fingerprint,
 *      which must match;
 *   3. buffers (two K/V blocks, the double accumulator, one piece), agreement 2 on their
 *      allocation;
 *   4. the P ring steps (mpi_ring_steps.c), agreement 3 on the local attention calls;
 *   5. the merged result, with the attention sinks merged in as one more part (LSE
 *      sinks[h], output 0), written to out / lse, only when every rank succeeded. The
 *      local calls run without sinks: each would add e^{sinks[h]} once per block. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_ring.h"
#include "rove_mpi.h"

/* Step 1: this rank's arguments. Fills the shape fields of r and the plan key. */
static rove_status check_local(rmpi_ring *r, int64_t *key) {
  const rove_attention_args *a = r->a;
  *key = 0;
  if (!r->p || !a) return ROVE_ERR_INVALID_ARGUMENT;
  *key = rmpi_plan_key(r->p, &r->H, &r->Hkv, &r->d, &r->causal, &r->window);
  if (*key < 0) return ROVE_ERR_INVALID_ARGUMENT;
  if (a->batch <= 0 || a->q_len < 0 || a->kv_len < 0) return ROVE_ERR_INVALID_ARGUMENT;
  if (a->q_angles || a->kv_angles || a->kv_head_stride || a->k_batch_stride || a->v_batch_stride)
    return ROVE_ERR_UNSUPPORTED;
  const int has_q = a->q_len > 0, has_kv = a->kv_len > 0;
  if (has_q && (!a->q || !a->q_pos || !a->out)) return ROVE_ERR_INVALID_ARGUMENT;
  if (has_kv && (!a->k || !a->v || !a->kv_pos)) return ROVE_ERR_INVALID_ARGUMENT;
  r->row_q = (int64_t)r->H * r->d, r->row_kv = (int64_t)r->Hkv * r->d;
  if (a->q_stride < 0 || a->out_stride < 0 || a->k_stride < 0 || a->v_stride < 0)
    return ROVE_ERR_INVALID_ARGUMENT;
  r->qs = a->q_stride ? a->q_stride : r->row_q, r->os = a->out_stride ? a->out_stride : r->row_q;
  r->ks = a->k_stride ? a->k_stride : r->row_kv, r->vs = a->v_stride ? a->v_stride : r->row_kv;
  if (r->qs < r->row_q || r->os < r->row_q || r->ks < r->row_kv || r->vs < r->row_kv)
    return ROVE_ERR_INVALID_ARGUMENT;
  const int64_t nq = (int64_t)a->batch * a->q_len, nk = (int64_t)a->batch * a->kv_len;
  const int64_t bq = rmpi_span_bytes(nq, r->qs, r->row_q, 4),
                bo = rmpi_span_bytes(nq, r->os, r->row_q, 4),
                bk = rmpi_span_bytes(nk, r->ks, r->row_kv, 4),
                bv = rmpi_span_bytes(nk, r->vs, r->row_kv, 4);
  int64_t bl;
  if (bq < 0 || bo < 0 || bk < 0 || bv < 0 || !rmpi_mul(nq, r->H, &bl) || !rmpi_mul(bl, 4, &bl))
    return ROVE_ERR_SIZE_OVERFLOW;
  /* sinks: checked on every rank, a rank without queries (which does not read them
   * further) too */
  const rove_status sk = rmpi_check_sinks(a->sinks, r->H, has_q ? a->out : NULL, bo,
                                          has_q ? a->lse : NULL, bl);
  if (sk != ROVE_OK || !has_q) return sk; /* no outputs: nothing can overlap */
  const void *in[5] = {a->q, a->k, a->v, a->q_pos, a->kv_pos};
  const int64_t in_b[5] = {bq, bk, bv, nq * 4, nk * 4};
  for (int i = 0; i < 5; i++)
    if (rmpi_overlap(a->out, bo, in[i], in_b[i]) || rmpi_overlap(a->lse, bl, in[i], in_b[i]))
      return ROVE_ERR_INVALID_ARGUMENT;
  if (rmpi_overlap(a->out, bo, a->lse, bl)) return ROVE_ERR_INVALID_ARGUMENT;
  return ROVE_OK;
}

/* Step 3: the buffers, sized by the largest shard of any rank. */
static rove_status alloc_buffers(rmpi_ring *r) {
  const rove_attention_args *a = r->a;
  int64_t tokens, words, bytes;
  if (!rmpi_mul(a->batch, r->max_len, &tokens) || tokens > INT_MAX ||
      !rmpi_add(2 * r->row_kv, 1, &words) || !rmpi_mul(tokens, words, &bytes) ||
      !rmpi_mul(bytes, 4, &bytes))
    return ROVE_ERR_SIZE_OVERFLOW;
  rove_status st = rmpi_unit_type(words * 4, &r->tok);
  if (st != ROVE_OK) return st;
  r->piece_rows = a->q_len < RMPI_PIECE_ROWS ? a->q_len : RMPI_PIECE_ROWS;
  st = rmpi_acc_init(&r->acc, a->batch, a->q_len, r->H, r->d);
  if (st != ROVE_OK) return st;
  r->blk[0] = rmpi_alloc(bytes), r->blk[1] = rmpi_alloc(bytes);
  r->piece_out = rmpi_alloc((int64_t)r->piece_rows * r->row_q * 4);
  r->piece_lse = rmpi_alloc((int64_t)r->piece_rows * r->H * 4);
  if (!r->blk[0] || !r->blk[1] || !r->piece_out || !r->piece_lse) return ROVE_ERR_OUT_OF_MEMORY;
  return ROVE_OK;
}

static void free_buffers(rmpi_ring *r) {
  free(r->blk[0]), free(r->blk[1]), free(r->piece_out), free(r->piece_lse);
  rmpi_acc_free(&r->acc);
  rmpi_free_type(&r->tok);
}

rove_status rove_mpi_ring_attention(const rove_plan *p, const rove_attention_args *a,
                                    MPI_Comm comm) {
  rove_status st = rmpi_check_comm(comm);
  if (st != ROVE_OK) return st; /* nothing to communicate over */
  rmpi_ring r;
  memset(&r, 0, sizeof r);
  r.p = p, r.a = a, r.tok = MPI_DATATYPE_NULL, r.comm = MPI_COMM_NULL;
  int64_t key = 0;
  const rove_status local = check_local(&r, &key);
  st = rmpi_open(comm, &r.comm, &r.rank, &r.size);
  if (st != ROVE_OK) return st;

  rmpi_agree g = {.status = local, .n_max = 1, .n_same = 2};
  g.max[0] = local == ROVE_OK ? a->kv_len : 0;
  g.same[0] = local == ROVE_OK ? a->batch : 0;
  g.same[1] = key;
  st = rmpi_agree_run(r.comm, &g);
  if (st == ROVE_OK) {
    r.max_len = (int32_t)g.max[0];
    st = rmpi_agree_status(r.comm, alloc_buffers(&r));
  }
  if (st == ROVE_OK) {
    int mpi_err = 0;
    st = rmpi_ring_steps(&r, &mpi_err);
    if (!mpi_err) st = rmpi_agree_status(r.comm, st);
  }
  if (st == ROVE_OK && a->q_len > 0) { /* sinks: once, after every block's part */
    rmpi_acc_sinks(&r.acc, a->sinks);
    rmpi_acc_write(&r.acc, a->out, r.os, a->lse);
  }
  free_buffers(&r);
  rmpi_close(&r.comm);
  return st;
}
