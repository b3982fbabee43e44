/* SPDX-License-Identifier: MIT */
/* The state of one ring-prefill call (rove_mpi_ring_attention), shared by its driver
 * (mpi_ring.c: validation, agreement, buffers, output) and its steps (mpi_ring_steps.c:
 * the exchange of K/V blocks and the attention over each).
 *
 * A K/V block (a rank's shard, as it travels) is one message, laid out as
 *   K [batch][len][n_kv_heads][head_dim] floats, V (same), pos [batch][len] int32
 * (dense, in that order), i.e. batch * len "tokens" of (2 n_kv_heads head_dim + 1) 4-byte
 * words; the message counts tokens of that size (the `tok` datatype), so the receiver
 * learns len from MPI_Get_count. */
#ifndef ROVE_MPI_RING_H
#define ROVE_MPI_RING_H

#include "mpi_internal.h"

/* Queries attended per rove_attention_forward call of a step; between two calls the
 * ring's transfers are driven by MPI_Testall. */
#define RMPI_PIECE_ROWS 2048

typedef struct {
  const rove_plan *p;
  const rove_attention_args *a;
  int32_t H, Hkv, d, causal, window;
  int64_t qs, ks, vs, os; /* token strides, 0 resolved to the dense width */
  int64_t row_q, row_kv;  /* H d and Hkv d floats */
  int rank, size;
  MPI_Comm comm;      /* the call's private duplicate */
  int32_t max_len;    /* the largest kv_len of any rank */
  void *blk[2];       /* two block buffers of max_len tokens per batch row */
  MPI_Datatype tok;   /* one token of a block message */
  int32_t piece_rows; /* min(q_len, RMPI_PIECE_ROWS) */
  float *piece_out;   /* [piece_rows][H][d] */
  float *piece_lse;   /* [H][piece_rows] */
  rmpi_acc acc;       /* the running merge of this rank's queries */
} rmpi_ring;

/* The P steps of the ring (after the agreement and the allocation). Returns ROVE_OK, the
 * first failing status of a local attention call (the ring still runs to its end, so the
 * other ranks are not left waiting), or ROVE_ERR_INTERNAL when an MPI call failed (*mpi_err
 * set: the ring was abandoned). */
rove_status rmpi_ring_steps(rmpi_ring *r, int *mpi_err);

#endif
