/* SPDX-License-Identifier: MIT */
/* Internal: the paged pool's checks and the batched call over it (paged_attention.c),
 * shared by rove_paged_attention (the caller's block tables, checked there) and
 * rove_paged_cache_attention (the cache's own tables). */
#ifndef ROVE_PAGED_INTERNAL_H
#define ROVE_PAGED_INTERNAL_H

#include "plan.h"

/* A checked pool's geometry. K and V share it. */
typedef struct rove_paged_geom {
  int32_t shift;        /* log2(block_size) */
  int64_t block_elems;  /* elements of one block of K (V): n_kv_heads block_size head_dim */
  int64_t block_stride; /* elements from one block of K (V) to the next: kv->block_stride,
                           or block_elems for 0 */
  int64_t pool_bytes;   /* bytes from K's (V's) first element to the end of its last block */
} rove_paged_geom;

/* The pool's fields valid (ROVE_ERR_UNSUPPORTED: a token-major or block-strided Q8 pool),
 * and its geometry. */
rove_status rove_paged_check_pool(const rove_plan *p, const rove_paged_kv *kv, rove_paged_geom *g);

/* a over the pool with sequence s's keys lens[s], its block table tables[s] (entries
 * trusted: in range, no repeats); a->seq_lens / block_tables are not read. types: NULL
 * or q / out element types (k, v must be F32). */
rove_status rove_paged_run(const rove_plan *p, const rove_paged_kv *kv, const rove_paged_args *a,
                           const rove_tensor_types *types, const int32_t *const *tables,
                           const int32_t *lens);

#endif
