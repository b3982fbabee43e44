/* SPDX-License-Identifier: MIT */
/* Internal: storing and re-rotating rows of a KV cache's storage (cache_rows.c), shared
 * by the contiguous cache (kv_cache.c) and the paged pool (paged_cache.c). Storage rows
 * are head_dim elements of the cache's type, contiguous; for Q8 the row at element e owns
 * the rove_q8_blocks(head_dim) fp32 scales at scale + e / head_dim * rove_q8_blocks. */
#ifndef ROVE_CACHE_ROWS_H
#define ROVE_CACHE_ROWS_H

#include "plan.h"

#define ROVE_CACHE_CHUNK 256 /* rows per append task / per shift step */

/* Rotate n source rows (elements of in_type at x, ss elements apart) by r, the rotated
 * dims times mul, and store them rounded to `type` at element dst of buf (scale: buf's Q8
 * scales, else NULL). rowbuf: [n][head_dim] fp32 scratch, used unless both types are
 * F32. Returns 1 when a rotated value does not fit the type (nothing else is reported;
 * the rows are written regardless). */
int rove_cache_store(const rove_plan *p, int32_t type, void *buf, float *scale, int64_t dst,
                     const void *x, int32_t in_type, int64_t ss, int64_t n, const rove_rot *r,
                     float mul, float *rowbuf);
/* rove_cache_store with the stored rows ds elements apart (ds = head_dim for Q8, whose
 * scales are found from the element offset). */
int rove_cache_store_rows(const rove_plan *p, int32_t type, void *buf, float *scale, int64_t dst,
                          int64_t ds, const void *x, int32_t in_type, int64_t ss, int64_t n,
                          const rove_rot *r, float mul, float *rowbuf);

/* Rotate n <= ROVE_CACHE_CHUNK stored rows at element e of buf by r. fp32 rows in place;
 * typed rows are widened into rowbuf [n][head_dim], rotated and rounded back, or, with
 * sink set (the check pass: ROVE_CACHE_CHUNK rows of the type, then their Q8 scales),
 * rounded into sink and not stored. Returns 1 when a rotated row does not fit the type. */
int rove_cache_rotate(const rove_plan *p, int32_t type, void *buf, float *scale, int64_t e,
                      int64_t n, const rove_rot *r, float *rowbuf, void *sink);

/* What a context shift by delta needs: the rotation R_delta (a table of ROVE_CACHE_CHUNK
 * identical rows, so the row-indexed kernels can use it), and for typed storage the fp32
 * row buffer and the check pass's sink of rove_cache_rotate. */
typedef struct rove_cache_shift_ws {
  void *block; /* one allocation holding all of it */
  rove_rot r;
  float *rowbuf;
  void *sink;
} rove_cache_shift_ws;

/* Returns 0 when the allocation fails (nothing to release then). */
int rove_cache_shift_begin(const rove_plan *p, int32_t type, int32_t delta, rove_cache_shift_ws *w);
void rove_cache_shift_end(rove_cache_shift_ws *w);

#endif
