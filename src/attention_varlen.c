/* SPDX-License-Identifier: MIT */
/* rove_attention_varlen: packed sequences of different lengths, each attending only its
 * own keys (rove.h). Sequence s is the batch-1 call over its slice of the packed tensors:
 * q / out rows cu_q[s] .. cu_q[s+1]-1, k / v rows cu_k[s] .. cu_k[s+1]-1 (token strides
 * as given), its slices of the positions and angles, and its LSE at lse + cu_q[s] with
 * the heads total_q apart. All sequences are validated and get their workspace
 * (rove_fwd_init_team) before the first one runs, so a failure writes nothing; then the
 * sequences run in order in groups (see below), every phase of a group (tables, packs,
 * query tiles, merges) as one parallel loop over its sequences' tasks
 * (rove_fwd_run_many). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"

#define GROUP_TASKS 8 /* query-tile tasks per thread that make a group of sequences */

/* cu[0] = 0, non-decreasing; *total = cu[n]. */
static int check_cu(const int32_t *cu, int32_t n, int64_t *total) {
  if (!cu || cu[0] != 0) return 0;
  for (int32_t s = 0; s < n; s++)
    if (cu[s + 1] < cu[s]) return 0;
  *total = cu[n];
  return 1;
}

/* Extents (bytes) of the packed tensors, and the no-overlap rule across sequences. */
static rove_status check_packed(const rove_plan *p, const rove_varlen_args *a, int64_t tq,
                                int64_t tk) {
  const int64_t d = p->cfg.head_dim, wq = p->cfg.n_heads * d, wk = p->cfg.n_kv_heads * d;
  int64_t s, eq = 0, ek = 0, ev = 0, eo = 0;
  rove_status st = ROVE_OK;
  if (tq > 0 && st == ROVE_OK) st = rove_tensor_extent(a->q_stride, wq, tq, &s, &eq);
  if (tq > 0 && st == ROVE_OK) st = rove_tensor_extent(a->out_stride, wq, tq, &s, &eo);
  if (tk > 0 && st == ROVE_OK) st = rove_tensor_extent(a->k_stride, wk, tk, &s, &ek);
  if (tk > 0 && st == ROVE_OK) st = rove_tensor_extent(a->v_stride, wk, tk, &s, &ev);
  if (st != ROVE_OK) return st;
  int64_t el = 0;
  if (!rove_mul_i64(tq, p->cfg.n_heads, &el) || el > INT64_MAX / 4) return ROVE_ERR_SIZE_OVERFLOW;
  const size_t bq = (size_t)eq * 4, bo = (size_t)eo * 4, bk = (size_t)ek * 4, bv = (size_t)ev * 4,
               bl = (size_t)el * 4;
  if (bo && (rove_overlap(a->out, bo, a->q, bq) || (bk && rove_overlap(a->out, bo, a->k, bk)) ||
             (bv && rove_overlap(a->out, bo, a->v, bv))))
    return ROVE_ERR_INVALID_ARGUMENT;
  if (a->lse && bl &&
      (rove_overlap(a->lse, bl, a->q, bq) || rove_overlap(a->lse, bl, a->out, bo) ||
       (bk && rove_overlap(a->lse, bl, a->k, bk)) || (bv && rove_overlap(a->lse, bl, a->v, bv))))
    return ROVE_ERR_INVALID_ARGUMENT;
  return ROVE_OK;
}

/* The batch-1 call of sequence s (lse left NULL: its layout is varlen's, set after init). */
static rove_attention_args seq_args(const rove_plan *p, const rove_varlen_args *a, int32_t s) {
  const int64_t d = p->cfg.head_dim, H = p->cfg.n_heads, Hkv = p->cfg.n_kv_heads;
  const int64_t q0 = a->cu_seqlens_q[s], k0 = a->cu_seqlens_k[s];
  const int64_t qs = a->q_stride ? a->q_stride : H * d, os = a->out_stride ? a->out_stride : H * d;
  const int64_t ks = a->k_stride ? a->k_stride : Hkv * d, vs = a->v_stride ? a->v_stride : Hkv * d;
  const int64_t aw = Hkv * p->half;
  rove_attention_args b;
  memset(&b, 0, sizeof b);
  b.batch = 1;
  b.q_len = a->cu_seqlens_q[s + 1] - a->cu_seqlens_q[s];
  b.kv_len = a->cu_seqlens_k[s + 1] - a->cu_seqlens_k[s];
  b.q = a->q ? a->q + q0 * qs : NULL;
  b.out = a->out ? a->out + q0 * os : NULL;
  b.k = a->k ? a->k + k0 * ks : NULL;
  b.v = a->v ? a->v + k0 * vs : NULL;
  b.q_stride = a->q_stride, b.k_stride = a->k_stride, b.v_stride = a->v_stride;
  b.out_stride = a->out_stride;
  b.q_pos = a->q_pos ? a->q_pos + q0 : NULL;
  b.kv_pos = a->kv_pos ? a->kv_pos + k0 : NULL;
  b.q_angles = a->q_angles ? a->q_angles + q0 * aw : NULL;
  b.kv_angles = a->kv_angles ? a->kv_angles + k0 * aw : NULL;
  return b;
}

rove_status rove_attention_varlen(const rove_plan *p, const rove_varlen_args *a) {
  if (!p || !a || a->n_seqs <= 0 || !a->q || !a->k || !a->v || !a->out)
    return ROVE_ERR_INVALID_ARGUMENT;
  int64_t tq = 0, tk = 0;
  if (!check_cu(a->cu_seqlens_q, a->n_seqs, &tq) || !check_cu(a->cu_seqlens_k, a->n_seqs, &tk))
    return ROVE_ERR_INVALID_ARGUMENT;
  if (!a->q_angles != !a->kv_angles) return ROVE_ERR_INVALID_ARGUMENT;
  rove_status st = check_packed(p, a, tq, tk);
  if (st != ROVE_OK) return st;
  const int32_t n = a->n_seqs;
  rove_fwd *f = calloc((size_t)n, sizeof *f);
  rove_attention_args *args = calloc((size_t)n, sizeof *args);
  size_t *bytes = calloc((size_t)n, sizeof *bytes);
  int64_t *tasks = calloc((size_t)n, sizeof *tasks);
  int32_t *group_end = calloc((size_t)n, sizeof *group_end);
  if (!f || !args || !bytes || !tasks || !group_end) {
    free(f), free(args), free(bytes), free(tasks), free(group_end);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  /* 1. every sequence with queries and keys validated and sized (nothing allocated); its
   * query-tile tasks, and the tasks of all its phases for the team size: a group's tasks
   * run in one team (rove_fwd_run_many) */
  const int32_t full = rove_team_size(p->cfg.n_threads, INT64_MAX);
  const int64_t H = p->cfg.n_heads, Hkv = p->cfg.n_kv_heads, d = p->cfg.head_dim;
  int64_t all = 0;
  for (int32_t s = 0; s < n && st == ROVE_OK; s++) {
    args[s] = seq_args(p, a, s);
    if (args[s].q_len == 0 || args[s].kv_len == 0) continue; /* nothing / no keys */
    st = rove_fwd_init_team(&f[s], p, &args[s], NULL, NULL, full, NULL, &bytes[s]);
    const rove_fwd *x = &f[s];
    tasks[s] = H * x->n_qt * (x->streaming ? 1 : x->n_splits);
    all += x->n_tables + (x->streaming ? x->n_splits : Hkv * x->n_kchunks) + tasks[s] + H * x->n_qt;
  }
  /* sized for the whole team above; again for a smaller one when the call's tasks cannot
   * occupy it (per-thread scratch serves the team that can run, no more) */
  const int32_t team = rove_team_size(p->cfg.n_threads, all);
  for (int32_t s = 0; s < n && st == ROVE_OK && team < full; s++) {
    if (args[s].q_len == 0 || args[s].kv_len == 0) continue;
    st = rove_fwd_init_team(&f[s], p, &args[s], NULL, NULL, team, NULL, &bytes[s]);
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
    free(f), free(args), free(bytes), free(tasks), free(group_end);
    return st;
  }
  /* 3. nothing can fail from here on: the sequences without keys, then the groups */
  const int64_t os = a->out_stride ? a->out_stride : H * d;
  for (int32_t s = 0; s < n; s++) {
    const int64_t q0 = a->cu_seqlens_q[s], lq = args[s].q_len;
    if (lq == 0 || args[s].kv_len > 0) continue;
    for (int64_t r = 0; r < lq; r++) memset(a->out + (q0 + r) * os, 0, (size_t)(H * d) * 4);
    for (int64_t h = 0; a->lse && h < H; h++)
      for (int64_t r = 0; r < lq; r++) a->lse[h * tq + q0 + r] = -INFINITY;
  }
  for (int32_t g0 = 0; g0 < n;) {
    const int32_t g1 = group_end[g0];
    int32_t m = 0; /* the group's calls, f[g0 .. g0+m-1] */
    size_t at = 0;
    for (int32_t s = g0; s < g1; s++) {
      if (args[s].q_len == 0 || args[s].kv_len == 0) continue;
      size_t need = 0;
      rove_fwd_init_team(&f[g0 + m], p, &args[s], NULL, NULL, team, block + at, &need); /* ok */
      at += bytes[s];
      args[s].lse = a->lse ? a->lse + a->cu_seqlens_q[s] : NULL; /* f[g0 + m].a is &args[s] */
      f[g0 + m++].lse_hstride = tq;
    }
    rove_fwd_run_many(f + g0, m);
    g0 = g1;
  }
  rove_pool_put(p->pool, block, got);
  free(bytes), free(tasks), free(group_end);
  free(f), free(args);
  return ROVE_OK;
}
