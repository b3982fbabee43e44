/* SPDX-License-Identifier: MIT */
/* Internal: the paged pool's checks and the batched call over it (paged_attention.c),
 * shared by rove_paged_attention (the caller's block tables, checked there) and
 * rove_paged_cache_attention (the cache's own tables). */
#ifndef ROVE_PAGED_INTERNAL_H
#define ROVE_PAGED_INTERNAL_H

#include "plan.h"

/* The pool's fields valid: *shift = log2(block_size), *pool_bytes = bytes of K (= V). */
rove_status rove_paged_check_pool(const rove_plan *p, const rove_paged_kv *kv, int32_t *shift,
                                  int64_t *pool_bytes);

/* a over the pool with sequence s's keys lens[s], its block table tables[s] (entries
 * trusted: in range, no repeats); a->seq_lens / block_tables are not read. types: NULL
 * or q / out element types (k, v must be F32). */
rove_status rove_paged_run(const rove_plan *p, const rove_paged_kv *kv, const rove_paged_args *a,
                           const rove_tensor_types *types, const int32_t *const *tables,
                           const int32_t *lens);

#endif
