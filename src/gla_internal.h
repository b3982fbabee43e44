/* Internal: the GLA plan and the parts of the driver shared by the chunked forward
 * (gla.c) and the recurrence (gla_recurrent.c). */
#ifndef ROVE_GLA_INTERNAL_H
#define ROVE_GLA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/gla_kernels.h"
#include "kernels/kernels.h"
#include "plan.h"

struct rove_gla_plan {
  rove_gla_config cfg;        /* validated; rotary_dim, scale, n_threads, isa resolved */
  int32_t half;               /* rotary_dim / 2 */
  const rove_kernels *kern;   /* rotate kernel of the chosen ISA */
  const rove_gla_kernels *gk; /* GLA kernels of the chosen ISA */
  rove_pool *pool;            /* workspace blocks reused across calls */
};

/* Per-thread scratch of one call. A task runs a group of consecutive heads of one batch
 * row through the sequence, `rows` tokens at a time, head after head within each step:
 * the step's rows of the whole group are then close together in memory (measured 25 %
 * faster at 12 heads x 4096 tokens than a task per head walking its own strided rows). */
typedef struct gla_scratch {
  float *cos_t, *sin_t; /* [rows][half]: the table of the head being run */
  float *q, *k, *g;     /* [rows][dk] of one head: q rotated and scaled, k rotated */
  float *v, *o;         /* [rows][dv] of one head */
  float *s;             /* [group][dk][dv]: the group's states (without final_state) */
  float *work;          /* kernel work, rove_gla_work_floats(rows, dk) */
} gla_scratch;

typedef struct gla_call gla_call;
/* Runs n token rows (np with padding) of one head through the recurrence, state s. */
typedef void (*gla_rows_fn)(const gla_call *c, gla_scratch *ws, float *s, int32_t n, int32_t np);

/* One validated call. */
struct gla_call {
  const rove_gla_plan *p;
  const rove_gla_args *a;
  int32_t rows;                   /* token rows per step (multiple of 16) */
  int32_t pad;                    /* pad each step's rows to a multiple of 16 */
  int32_t group;                  /* heads per task (a divisor of n_heads) */
  int rot_q, rot_k, rot_v, rot_o; /* which rotations apply (angles given and flag set) */
  int64_t state_floats;           /* states in the scratch: 0 with final_state */
  int64_t scratch_floats;         /* per thread */
  float *scratch;                 /* threads * scratch_floats */
  gla_rows_fn run;
};

/* Validate the call, allocate the scratch, and run every (batch row, head group) through
 * the sequence on the plan's threads, `rows` tokens per step (padded to a multiple of
 * 16 when pad), each step of each head through run. Outputs untouched on failure. */
rove_status rove_gla_run(const rove_gla_plan *p, const rove_gla_args *a, int32_t rows, int32_t pad,
                         gla_rows_fn run);

#endif
