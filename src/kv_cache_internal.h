/* SPDX-License-Identifier: MIT */
/* Internal: what other parts of the library may read of a KV cache (kv_cache.c). */
#ifndef ROVE_KV_CACHE_INTERNAL_H
#define ROVE_KV_CACHE_INTERNAL_H

#include "plan.h"

int32_t rove_kv_cache_batch_internal(const rove_kv_cache *c);      /* 0 for NULL */

#endif
