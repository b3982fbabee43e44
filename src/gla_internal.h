/* SPDX-License-Identifier: MIT */
/* Internal: the GLA plan and the parts of the driver shared by the chunked forward
 * (gla.c) and the recurrence (gla_recurrent.c); the token rows of a step (gla_rows.c). */
#ifndef ROVE_GLA_INTERNAL_H
#define ROVE_GLA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/gla_kernels.h"
#include "kernels/kernels.h"
#include "plan.h"
#include "util.h"

struct rove_gla_plan {
  rove_gla_config cfg;        /* validated; rotary_dim, scale, n_threads, isa resolved */
  int32_t half;               /* rotary_dim / 2 */
  const rove_kernels *kern;   /* table of the chosen ISA: rotate and the gla sub-table */
  rove_pool *pool;            /* workspace blocks reused across calls */
  int64_t bwd_keep_floats;    /* rove_gla_backward: chunk-start states kept per thread (floats;
                                 ROVE_GLA_BWD_KEEP_FLOATS; tests lower it to run segments) */
};

/* 64 MiB per thread: the states of a whole 4096-token sequence of 12 heads x 64 x 64 (12 MiB)
 * or 8 x 128 x 128 (32 MiB) at chunk 64; longer sequences run in segments (gla_backward.c). */
#define ROVE_GLA_BWD_KEEP_FLOATS ((int64_t)1 << 24)

/* Per-thread scratch of one call. A task runs a group of consecutive heads of one batch
 * row through the sequence, `rows` tokens at a time. In a step, for each run of `sub`
 * heads of the group (all of them unless their rows would not fit in SUB_FLOATS): read
 * the step's token rows of these heads in token order (each token's heads are adjacent
 * in every tensor, so the reads are contiguous runs of sub * width floats), rotating them
 * into per-head scratch; run the heads one after the other; write the outputs back in
 * token order. Layouts (floats):
 *   cos_t, sin_t  [rows][sub][half]  tables of the step (token-major, as the angles)
 *   q, k, g       [sub][rows][dk]    q rotated and scaled, k rotated
 *   v, o          [sub][rows][dv]    v rotated; o before the inverse rotation */
typedef struct gla_scratch {
  float *cos_t, *sin_t;
  float *q, *k, *g;
  float *v, *o;
  float *s;    /* [group][dk][dv]: the group's states (without final_state) */
  float *work; /* kernel work, rove_gla_work_floats(rows, dk) */
} gla_scratch;

/* The rows of one head of a step inside the scratch ([rows][dk] or [rows][dv]). */
typedef struct gla_head {
  const float *q, *k, *g, *v;
  float *o, *work;
} gla_head;

typedef struct gla_call gla_call;
/* Runs n token rows (np with padding) of one head through the recurrence, state s. */
typedef void (*gla_rows_fn)(const gla_call *c, const gla_head *h, float *s, int32_t n, int32_t np);

/* One validated call. */
struct gla_call {
  const rove_gla_plan *p;
  const rove_gla_args *a;
  int32_t rows;                   /* token rows per step (multiple of 16) */
  int32_t pad;                    /* pad each step's rows to a multiple of 16 */
  int32_t group;                  /* heads per task (a divisor of n_heads) */
  int32_t sub;                    /* heads per load of a step (<= group) */
  int rot_q, rot_k, rot_v, rot_o; /* which rotations apply (angles given and flag set) */
  int64_t state_floats;           /* states in the scratch: 0 with final_state */
  int64_t scratch_floats;         /* per thread */
  float *scratch;                 /* threads * scratch_floats */
  const int32_t *order;           /* sequence of task slot i / groups (NULL: i / groups) */
  gla_rows_fn run;
};

/* The sequences of a call: its batch rows, or (cu_seqlens) the packed sequences of its one
 * row. Sequence s is tokens start .. start + len - 1 of the [batch * seq_len] token rows
 * of every tensor, and state row s of the states. */
static inline int64_t rove_gla_n_seqs(const rove_gla_args *a) {
  return a->cu_seqlens ? a->n_seqs : a->batch;
}
static inline int64_t rove_gla_seq_start(const rove_gla_args *a, int64_t s) {
  return rove_seq_start(a->cu_seqlens, s, a->seq_len);
}
static inline int64_t rove_gla_seq_len(const rove_gla_args *a, int64_t s) {
  return rove_seq_len(a->cu_seqlens, s, a->seq_len);
}

/* The order in which a call's tasks take the sequences: longest first (packed sequences,
 * so that a long one does not start last and leave the other threads idle), else in
 * order. *order is NULL (in order) or an array to free; 0 when it cannot be allocated. */
int rove_gla_seq_order(const rove_gla_args *a, int32_t **order);

/* Byte sizes of a call's tensors: q / k / g, v / out, a state, the angles (0 when unused). */
typedef struct rove_gla_bytes {
  int64_t k, v, s, angles, cu;
} rove_gla_bytes;

/* gla.c: the checks every GLA entry shares. Inputs: NULL plan / args / q, k, v, g, sizes
 * <= 0, bad cu_seqlens (INVALID_ARGUMENT), products past int64 / SIZE_MAX / 8
 * (SIZE_OVERFLOW); sets *by (the states' bytes count every sequence's).
 * Contents: g finite and <= 0, the angles finite when use_angles (the slowest check:
 * run it last). */
rove_status rove_gla_check_inputs(const rove_gla_plan *p, const rove_gla_args *a, int use_angles,
                                  rove_gla_bytes *by);
rove_status rove_gla_check_contents(const rove_gla_plan *p, const rove_gla_args *a,
                                    int use_angles, const rove_gla_bytes *by);

/* Validate the call, allocate the scratch, and run every (batch row, head group) through
 * the sequence on the plan's threads, `rows` tokens per step (padded to a multiple of
 * 16 when pad), each step of each head through run. Outputs untouched on failure. */
rove_status rove_gla_run(const rove_gla_plan *p, const rove_gla_args *a, int32_t rows, int32_t pad,
                         gla_rows_fn run);

/* gla_rows.c: scratch size and layout, loading and storing the rows of a step. */
int64_t rove_gla_scratch_floats(const rove_gla_plan *p, int32_t rows, int32_t sub,
                                int64_t state_floats);
gla_scratch rove_gla_scratch_at(const gla_call *c, int tid);
gla_head rove_gla_head(const gla_call *c, const gla_scratch *ws, int32_t j);

/* Tokens t0 .. t0+n-1 (of the call's token rows: a sequence's start included) of heads
 * h .. h+G-1 (G <= sub) into ws (tables, rotated and scaled rows); rows n .. np-1 of
 * every head zero. */
void rove_gla_load_step(const gla_call *c, gla_scratch *ws, int32_t h, int32_t G, int64_t t0,
                        int32_t n, int32_t np);
/* ws->o rows 0..n-1 of heads h .. h+G-1 (rotated back with ROTATE_O) to out at tokens
 * t0 .. t0+n-1 of the call's token rows. */
void rove_gla_store_step(const gla_call *c, const gla_scratch *ws, int32_t h, int32_t G,
                         int64_t t0, int32_t n);

/* Bytes [x, x + bytes) towards L2, one request per 64-byte line (the row loads of the
 * forward, gla_rows.c, and of the backward, gla_backward.c, run a few tokens ahead). */
static inline void rove_gla_prefetch_span(const void *x, int64_t bytes) {
  const uintptr_t end = (uintptr_t)x + (uintptr_t)bytes;
  for (uintptr_t l = (uintptr_t)x & ~(uintptr_t)63; l < end; l += 64)
    __builtin_prefetch((const void *)l, 0, 2);
}

#endif
