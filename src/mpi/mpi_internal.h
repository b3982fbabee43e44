/* SPDX-License-Identifier: MIT */
/* Internals of librove_mpi (never installed): checked sizes, the overlap test, the
 * communicator set-up and the cross-rank agreement (mpi_common.c), the fingerprint of a
 * plan (mpi_plan_key.c), and the exact double-precision merge of partial attentions
 * (mpi_merge.c). librove_mpi links only librove.so's public API, so the little it needs
 * of src/util.h is repeated here. */
#ifndef ROVE_MPI_INTERNAL_H
#define ROVE_MPI_INTERNAL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "rove.h"

/* ---- mpi_common.c: sizes ------------------------------------------------------------ */

/* Checked arithmetic: 1 and *out set, or 0 on overflow. */
int rmpi_mul(int64_t a, int64_t b, int64_t *out);
int rmpi_add(int64_t a, int64_t b, int64_t *out);
/* Bytes spanned by n rows of `width` elements of `elem` bytes, `stride` elements apart
 * (stride >= width): ((n - 1) stride + width) elem, 0 for n == 0; -1 on overflow. */
int64_t rmpi_span_bytes(int64_t n, int64_t stride, int64_t width, int64_t elem);
/* Do the byte ranges [a, a + na) and [b, b + nb) intersect? (never when either is NULL
 * or empty) */
int rmpi_overlap(const void *a, int64_t na, const void *b, int64_t nb);
/* malloc of n bytes (n >= 0; at least 1 byte), NULL on failure or n beyond size_t. */
void *rmpi_alloc(int64_t n);

/* ---- mpi_common.c: communicators and agreement --------------------------------------- */

/* ROVE_OK when MPI is initialised and not finalised and comm is an intracommunicator;
 * else ROVE_ERR_INVALID_ARGUMENT. Makes no communication (safe on every rank alike). */
rove_status rmpi_check_comm(MPI_Comm comm);
/* The call's private communicator: MPI_Comm_dup of comm with MPI_ERRORS_RETURN, and this
 * rank and the size. ROVE_ERR_INTERNAL when MPI fails (*dup is then MPI_COMM_NULL). */
rove_status rmpi_open(MPI_Comm comm, MPI_Comm *dup, int *rank, int *size);
void rmpi_close(MPI_Comm *dup); /* MPI_Comm_free unless MPI_COMM_NULL */

/* The agreement vector: what one MPI_Allreduce(MPI_MAX) over int64 combines.
 *   status                the ranks' local statuses; the largest code wins
 *   max[0 .. n_max)       values whose maximum over the ranks is wanted
 *   same[0 .. n_same)     values that must be equal on every rank, sent as the pair
 *                         (x, -x): after MPI_MAX the pair is (max x, -min x)
 * Values must lie in [-2^62, 2^62] (so that -x cannot overflow). */
#define RMPI_AGREE_MAX 16
typedef struct {
  rove_status status;
  int n_max, n_same;
  int64_t max[RMPI_AGREE_MAX];
  int64_t same[RMPI_AGREE_MAX];
} rmpi_agree;
/* Run the allreduce on dup; afterwards g->max holds the maxima and the return value is
 * the agreed status: the largest local status, else ROVE_ERR_INVALID_ARGUMENT when a
 * `same` value differs between ranks, else ROVE_OK. ROVE_ERR_INTERNAL if MPI fails. */
rove_status rmpi_agree_run(MPI_Comm dup, rmpi_agree *g);
/* The agreement of one status alone. */
rove_status rmpi_agree_status(MPI_Comm dup, rove_status local);

/* A contiguous datatype of `bytes` bytes (one token's record of a message), committed;
 * ROVE_ERR_SIZE_OVERFLOW when bytes exceeds INT_MAX, ROVE_ERR_INTERNAL when MPI fails. */
rove_status rmpi_unit_type(int64_t bytes, MPI_Datatype *t);
void rmpi_free_type(MPI_Datatype *t); /* unless MPI_DATATYPE_NULL */

/* ---- mpi_plan_key.c ------------------------------------------------------------------ */

/* A 62-bit fingerprint (>= 0) of everything in the plan that changes the math: heads,
 * head_dim, rotate flags, causal, window, scale, softcap, rotary dim, pairing, placement,
 * the inverse frequencies and the attention factor (not the ISA or the thread count).
 * Also writes the head counts and head_dim. -1 when the plan cannot be read. */
int64_t rmpi_plan_key(const rove_plan *p, int32_t *n_heads, int32_t *n_kv_heads, int32_t *head_dim,
                      int32_t *causal, int32_t *window);

/* ---- mpi_merge.c: the exact merge ---------------------------------------------------- */

/* The running merge of the partial attentions of q_len query rows (per batch row and
 * head) in double, online: per row (b, h, i) the largest LSE seen m, the sum
 * s = sum_p e^{L_p - m}, and o[d] = sum_p e^{L_p - m} O_p (rescaled when m grows).
 * Layouts: o [batch][q_len][heads][dim] as the output, m and s [batch][heads][q_len] as
 * the LSE. A NaN (or +inf) LSE makes the row NaN for good; -inf parts are skipped. */
typedef struct {
  int32_t batch, q_len, heads, dim;
  double *o, *m, *s;
} rmpi_acc;
/* Allocate (ROVE_ERR_OUT_OF_MEMORY / ROVE_ERR_SIZE_OVERFLOW) and set every row empty. */
rove_status rmpi_acc_init(rmpi_acc *acc, int32_t batch, int32_t q_len, int32_t heads, int32_t dim);
void rmpi_acc_free(rmpi_acc *acc);
/* Merge one piece: the n query rows i0 .. i0 + n - 1 of batch row b, with the output
 * out [n][heads][dim] and LSE lse [heads][n] of one rove_attention_forward (batch 1). */
void rmpi_acc_add(rmpi_acc *acc, int32_t b, int32_t i0, int32_t n, const float *out,
                  const float *lse);
/* Attention sinks (NULL: none): merge into every row of head h, once, after the pieces,
 * the part of a key with logit sinks[h] and value zero: LSE sinks[h], output 0. */
void rmpi_acc_sinks(rmpi_acc *acc, const float *sinks);
/* Write the merged result, rounded once: out [batch][q_len][heads][dim] (token stride
 * out_stride, > 0) and lse (NULL or [batch][heads][q_len]). Rows no part saw: 0, -inf. */
void rmpi_acc_write(const rmpi_acc *acc, float *out, int64_t out_stride, float *lse);
/* NULL sinks, or sinks [heads] all finite and not overlapping out (out_bytes) or lse
 * (lse_bytes): ROVE_OK, else ROVE_ERR_INVALID_ARGUMENT. */
rove_status rmpi_check_sinks(const float *sinks, int32_t heads, const void *out,
                             int64_t out_bytes, const void *lse, int64_t lse_bytes);

/* One record of the decode reduction: [L, status, O[0 .. dim)] in double. Merge record
 * a into b (b = a (+) b): the LSE merge, status = max. Bitwise symmetric in a and b. */
void rmpi_record_merge(const double *a, double *b, int32_t dim);
/* Merge an attention sink, the record [sink, 0, 0 ..] (LSE sink, output 0), into b. */
void rmpi_record_sink(double sink, double *b, int32_t dim);

#endif
