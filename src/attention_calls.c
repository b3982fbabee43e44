/* SPDX-License-Identifier: MIT */
/* Several batch-1 attention calls as one (rove_attention_varlen, rove_paged_attention):
 * every call is validated and gets its workspace (rove_fwd_init_team) before the first
 * one runs, so a failure writes nothing; then the calls run in order in groups, every
 * phase of a group (tables, packs, query tiles, merges) as one parallel loop over its
 * calls' tasks (rove_fwd_run_many). Each call's results are those of its own
 * rove_fwd_run, bit for bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"

#define GROUP_TASKS 8 /* query-tile tasks per thread that make a group of calls */

static int64_t call_keys(const rove_attention_args *a, const rove_kv_view *kv) {
  return kv ? kv->len : a->kv_len;
}

rove_status rove_fwd_calls(const rove_plan *p, int32_t n, rove_attention_args *args,
                           const rove_kv_view *kv, const rove_tensor_types *types, float *lse,
                           const int32_t *cu_q, int64_t total_q) {
  rove_fwd *f = calloc((size_t)n, sizeof *f);
  size_t *bytes = calloc((size_t)n, sizeof *bytes);
  int64_t *tasks = calloc((size_t)n, sizeof *tasks);
  int32_t *group_end = calloc((size_t)n, sizeof *group_end);
  if (!f || !bytes || !tasks || !group_end) {
    free(f), free(bytes), free(tasks), free(group_end);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  /* 1. every call with queries and keys validated and sized (nothing allocated); its
   * query-tile tasks, and the tasks of all its phases for the team size: a group's tasks
   * run in one team (rove_fwd_run_many) */
  const int32_t full = rove_team_size(p->cfg.n_threads, INT64_MAX);
  const int64_t H = p->cfg.n_heads, Hkv = p->cfg.n_kv_heads, d = p->cfg.head_dim;
  int64_t all = 0;
  rove_status st = ROVE_OK;
  for (int32_t s = 0; s < n && st == ROVE_OK; s++) {
    if (args[s].q_len == 0 || call_keys(&args[s], kv ? &kv[s] : NULL) == 0) continue;
    st = rove_fwd_init_team(&f[s], p, &args[s], kv ? &kv[s] : NULL, types, full, NULL, &bytes[s]);
    const rove_fwd *x = &f[s];
    tasks[s] = H * x->n_qt * (x->streaming ? 1 : x->n_splits);
    all += x->n_tables + (x->streaming ? x->n_splits : Hkv * x->n_kchunks) + tasks[s] + H * x->n_qt;
  }
  /* sized for the whole team above; again for a smaller one when the tasks cannot occupy
   * it (per-thread scratch serves the team that can run, no more) */
  const int32_t team = rove_team_size(p->cfg.n_threads, all);
  for (int32_t s = 0; s < n && st == ROVE_OK && team < full; s++) {
    if (args[s].q_len == 0 || call_keys(&args[s], kv ? &kv[s] : NULL) == 0) continue;
    st = rove_fwd_init_team(&f[s], p, &args[s], kv ? &kv[s] : NULL, types, team, NULL, &bytes[s]);
  }
  for (int32_t s = 0; s < n; s++) bytes[s] = (bytes[s] + 63) & ~(size_t)63;
  /* 2. groups, in order: a group closes once its query-tile tasks can keep every thread
   * busy (GROUP_TASKS per thread). A long sequence so runs on its own, its packed K/V
   * still in cache when its tiles read them (measured: 8 sequences of 170 .. 3499 tokens,
   * 12 x 64, 2 threads: 171 ms as one group, 137 ms one by one); short ones (decode rows,
   * short prompts) share a team. One workspace block of the largest group's size, taken
   * before anything is written, serves every group in turn. */
  size_t block_bytes = 0;
  for (int32_t g0 = 0; g0 < n && st == ROVE_OK;) {
    int32_t g1 = g0;
    int64_t t = 0;
    size_t sum = 0;
    while (g1 < n && t < (int64_t)GROUP_TASKS * full) t += tasks[g1], sum += bytes[g1], g1++;
    group_end[g0] = g1;
    if (sum > block_bytes) block_bytes = sum;
    g0 = g1;
  }
  char *block = NULL;
  size_t got = 0;
  if (st == ROVE_OK && block_bytes > 0) {
    block = rove_pool_get(p->pool, block_bytes, &got);
    if (!block) st = ROVE_ERR_OUT_OF_MEMORY;
  }
  if (st != ROVE_OK) {
    free(f), free(bytes), free(tasks), free(group_end);
    return st;
  }
  /* 3. nothing can fail from here on: the calls without keys (0 is all-zero bits in
   * every output type; the LSE is -inf, or the head's sink: its only term), then the
   * groups */
  const size_t oe = (size_t)rove_dtype_size(types ? types->out : ROVE_DTYPE_F32);
  for (int32_t s = 0; s < n; s++) {
    const int64_t lq = args[s].q_len, os = args[s].out_stride ? args[s].out_stride : H * d;
    if (lq == 0 || call_keys(&args[s], kv ? &kv[s] : NULL) > 0) continue;
    for (int64_t r = 0; r < lq; r++)
      memset((char *)args[s].out + (size_t)(r * os) * oe, 0, (size_t)(H * d) * oe);
    for (int64_t h = 0; lse && h < H; h++)
      for (int64_t r = 0; r < lq; r++)
        lse[h * total_q + cu_q[s] + r] = args[s].sinks ? args[s].sinks[h] : -INFINITY;
  }
  for (int32_t g0 = 0; g0 < n;) {
    const int32_t g1 = group_end[g0];
    int32_t m = 0; /* the group's calls, f[g0 .. g0+m-1] */
    size_t at = 0;
    for (int32_t s = g0; s < g1; s++) {
      const rove_kv_view *v = kv ? &kv[s] : NULL;
      if (args[s].q_len == 0 || call_keys(&args[s], v) == 0) continue;
      size_t need = 0;
      rove_fwd_init_team(&f[g0 + m], p, &args[s], v, types, team, block + at, &need); /* ok */
      at += bytes[s];
      /* the LSE rows are the packed layout's (set after init, whose checks assume a
       * batch-1 call's own [heads][q_len]); f[g0 + m].a is &args[s] */
      args[s].lse = lse ? lse + cu_q[s] : NULL;
      f[g0 + m++].lse_hstride = total_q;
    }
    rove_fwd_run_many(f + g0, m);
    g0 = g1;
  }
  rove_pool_put(p->pool, block, got);
  free(bytes), free(tasks), free(group_end);
  free(f);
  return ROVE_OK;
}
