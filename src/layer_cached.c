/* SPDX-License-Identifier: MIT */
/* rove_layer_forward_cached: the attention layer over a KV cache (prefill and decode).
 *
 * Same projections as rove_layer_forward (layer.c) for the n new tokens; their K and V
 * views are appended to the cache (rotated there, once), their Q view attends over the
 * whole cache, then the output projection. If anything fails after the append, the cache is
 * truncated back to its old length, so a failed call leaves it unchanged. */
#include "kv_cache_internal.h"
#include "layer_internal.h"

/* The cache must hold K/V rows of the layer's shape: its plan is the layer's plan or one
 * with the same n_heads, n_kv_heads and head_dim. */
static int same_shape(const rove_plan *a, const rove_plan *b) {
  return a == b || (a->cfg.n_heads == b->cfg.n_heads && a->cfg.n_kv_heads == b->cfg.n_kv_heads &&
                    a->cfg.head_dim == b->cfg.head_dim);
}

rove_status rove_layer_forward_cached(const rove_layer *l, rove_kv_cache *cache, int32_t n,
                                      const float *x, const int32_t *pos, float *y) {
  if (!l || !cache || n <= 0) return ROVE_ERR_INVALID_ARGUMENT;
  const rove_plan *cp = rove_kv_cache_plan(cache);
  const int32_t batch = rove_kv_cache_batch_internal(cache);
  if (!cp || batch <= 0 || !same_shape(l->p, cp)) return ROVE_ERR_INVALID_ARGUMENT;
  const int32_t old_len = rove_kv_cache_length(cache);
  if ((int64_t)old_len + n > rove_kv_cache_capacity(cache)) return ROVE_ERR_SIZE_OVERFLOW;
  rove_layer_work w;
  rove_status st = rove_layer_work_init(l, (int64_t)batch * n, x, y, &w);
  if (st != ROVE_OK) return st;
  rove_layer_project_qkv(l, x, &w);
  rove_attention_args a = rove_layer_views(l, &w, batch, n);
  st = rove_kv_cache_append(cache, n, a.k, a.k_stride, a.v, a.v_stride, pos);
  if (st == ROVE_OK) {
    a.k = a.v = NULL;
    a.k_stride = a.v_stride = 0;
    a.kv_len = 0;
    a.q_pos = pos; /* NULL: the positions just appended */
    st = rove_kv_cache_attention(cache, &a);
    if (st == ROVE_OK) rove_layer_project_out(l, &w, y);
    else rove_kv_cache_truncate(cache, old_len);
  }
  rove_layer_work_release(&w);
  return st;
}
