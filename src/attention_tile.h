/* SPDX-License-Identifier: MIT */
/* Internal: the per-task helpers of one attention call (attention_tile.c), shared by the
 * prefill phases (attention.c) and streaming decode (attention_decode.c), which both call
 * down into them and never into each other. */
#ifndef ROVE_ATTENTION_TILE_H
#define ROVE_ATTENTION_TILE_H

#include "attention_internal.h"

/* Table task t in [0, n_tables): fills a chunk of the key or query cos/sin table. */
void rove_fwd_table_task(int64_t t, int tid, void *vctx);

/* One query tile of one (batch, head); q-task index = (b * H + h) * n_qt + (n_qt - 1 - tile). */
typedef struct rove_qtile {
  int64_t b, h, kvh, kvbh, i0, row0; /* kvh: the head's KV head; kvbh = b * Hkv + kvh */
  int32_t nq;
} rove_qtile;
rove_qtile rove_fwd_qtile(const rove_fwd *f, int64_t qtask);
/* Pack the rotated, scaled query rows of q into qbuf; o = 0, m = -inf, l = 0. */
void rove_fwd_begin(const rove_fwd *f, const rove_qtile *q, float *qbuf, float *o, float *m, float *l);
/* O / l, the inverse rotation by the query positions (ROTATE_O) and LSE of a query tile,
 * into the caller's out / lse (a typed out is finished in o, which this overwrites, and
 * rounded from there). */
void rove_fwd_finish(const rove_fwd *f, const rove_qtile *q, float *o, const float *m,
                     const float *l);
/* Phase 3 (split-KV): merge the partial (o, m, l) of q-task t exactly, then finish it. */
void rove_fwd_merge_task(int64_t t, int tid, void *vctx);

#endif
