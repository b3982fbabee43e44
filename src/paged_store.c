/* SPDX-License-Identifier: MIT */
/* New tokens into a pool the caller owns (rove_paged_store, rove.h): the external-memory
 * counterpart of rove_paged_append, as vLLM's reshape_and_cache is of its paged kernels.
 *
 * Two phases, so that nothing is half-written when a value does not fit the pool's type:
 *  1. stage: every KV head's K and V rows of the n new tokens, rotated into the global
 *     frame and rounded to the pool's type exactly as rove_paged_append does
 *     (rove_cache_store: K m R_p k, V R_p v with ROVE_ROTATE_V), into a staging buffer
 *     laid out as one head-major block of n rows: [n_kv_heads][n][head_dim] elements
 *     (Q8: then [n_kv_heads][n][rove_q8_blocks] scales, the row at element e owning those
 *     at e / head_dim * rove_q8_blocks, as rove_cache_store expects);
 *  2. scatter (only when every value fitted): each staged row copied to its slot's row of
 *     the pool, slot = block * block_size + row, in the pool's layout; its position into
 *     the pool's pos.
 * Both phases run in chunks of ROVE_CACHE_CHUNK tokens, one task per chunk. The staging
 * costs one extra copy of the new rows; the store of a decode step is small next to its
 * attention, and a prefill's next to its projections. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"
#include "cache_rows.h"
#include "paged_internal.h"
#include "rope.h"
#include "selective.h"

typedef struct {
  const rove_plan *p;
  const rove_paged_kv *kv;
  rove_paged_geom g;
  int32_t n;
  const int64_t *slots;
  const void *k, *v;
  int64_t ks, vs;
  int32_t in_type;
  const int32_t *pos;
  const double *angles; /* NULL or [n][n_kv_heads][half] */
  int64_t tab_w;        /* table floats per token: half, or n_kv_heads * half with angles */
  char *stage_k, *stage_v;          /* [n_kv_heads][n][head_dim] of the pool's type */
  float *scale_k, *scale_v;         /* Q8: [n_kv_heads][n][q8_blocks], else NULL */
  float *scratch;                   /* per thread: cos, sin [chunk][tab_w], rows [chunk][d] */
  int64_t thread_floats;
  int *bad;                         /* [task] */
} store_ctx;

static int64_t chunk_lo(int64_t t) { return t * ROVE_CACHE_CHUNK; }
static int64_t chunk_hi(const store_ctx *s, int64_t t) {
  const int64_t hi = (t + 1) * ROVE_CACHE_CHUNK;
  return hi < s->n ? hi : s->n;
}

/* Phase 1, tokens [lo, hi): the rotation table, then every head's K and V rows of each run
 * of stored tokens. */
static void stage_task(int64_t t, int tid, void *vctx) {
  store_ctx *s = vctx;
  const rove_plan *p = s->p;
  const int32_t d = p->cfg.head_dim, half = p->half, hkv = p->cfg.n_kv_heads;
  const int64_t lo = chunk_lo(t), n = chunk_hi(s, t) - lo, w = s->tab_w;
  float *cs = s->scratch + (int64_t)tid * s->thread_floats, *sn = cs + ROVE_CACHE_CHUNK * w;
  float *rowbuf = sn + ROVE_CACHE_CHUNK * w;
  if (s->angles)
    rove_angle_table(p->kern, cs, sn, s->angles + lo * w, n * w);
  else
    rove_rope_table(cs, sn, p->inv_freq, half, p->rope_step, s->pos + lo, 0, n);
  const uint32_t rot = p->cfg.rotate;
  const int on_k = (rot & ROVE_ROTATE_K) != 0, on_v = (rot & ROVE_ROTATE_V) != 0;
  const int64_t esz = rove_dtype_size(s->in_type);
  const int32_t type = s->kv->type;
  /* runs of stored tokens: a padding token (negative slot) is neither read nor checked,
   * so its garbage cannot fail the call */
  for (int64_t a = 0; a < n;) {
    if (s->slots[lo + a] < 0) {
      a++;
      continue;
    }
    int64_t b = a + 1;
    while (b < n && s->slots[lo + b] >= 0) b++;
    const int64_t i = lo + a, m = b - a;
    for (int32_t h = 0; h < hkv; h++) {
      const int64_t off = a * w + (s->angles ? (int64_t)h * half : 0);
      const rove_rot rk = rove_plan_rot(p, on_k ? cs + off : NULL, on_k ? sn + off : NULL, w);
      const rove_rot rv = rove_plan_rot(p, on_v ? cs + off : NULL, on_v ? sn + off : NULL, w);
      const int64_t dst = ((int64_t)h * s->n + i) * d;
      const char *xk = (const char *)s->k + (i * s->ks + (int64_t)h * d) * esz;
      const char *xv = (const char *)s->v + (i * s->vs + (int64_t)h * d) * esz;
      s->bad[t] |= rove_cache_store(p, type, s->stage_k, s->scale_k, dst, xk, s->in_type, s->ks,
                                    m, &rk, (float)p->attn_factor, rowbuf);
      s->bad[t] |= rove_cache_store(p, type, s->stage_v, s->scale_v, dst, xv, s->in_type, s->vs,
                                    m, &rv, 1.0f, rowbuf);
    }
    a = b;
  }
}

/* Phase 2, tokens [lo, hi): each staged row to its slot (negative slots: skipped). */
static void scatter_task(int64_t t, int tid, void *vctx) {
  (void)tid;
  const store_ctx *s = vctx;
  const rove_paged_kv *kv = s->kv;
  const int32_t d = s->p->cfg.head_dim, hkv = s->p->cfg.n_kv_heads, bs = kv->block_size;
  const int32_t nsc = kv->type == ROVE_DTYPE_Q8 ? rove_q8_blocks(d) : 0;
  const size_t esz = (size_t)rove_dtype_size(kv->type), row_bytes = (size_t)d * esz;
  /* the pool is the caller's writable memory; rove_paged_kv is const for the readers */
  char *pk = (char *)(uintptr_t)kv->k, *pv = (char *)(uintptr_t)kv->v;
  float *sk = (float *)(uintptr_t)kv->k_scale, *sv = (float *)(uintptr_t)kv->v_scale;
  int32_t *ppos = (int32_t *)(uintptr_t)kv->pos;
  const int token_major = kv->layout == ROVE_PAGED_TOKEN_MAJOR;
  for (int64_t i = chunk_lo(t); i < chunk_hi(s, t); i++) {
    const int64_t slot = s->slots[i];
    if (slot < 0) continue;
    const int64_t blk = slot >> s->g.shift, row = slot & (bs - 1);
    if (ppos) ppos[slot] = s->pos[i];
    for (int32_t h = 0; h < hkv; h++) {
      /* the row within its block, in rows of head_dim elements: head-major [h][row],
       * token-major [row][h]; blocks block_stride elements apart */
      const int64_t r = token_major ? row * hkv + h : (int64_t)h * bs + row;
      const size_t dst = (size_t)(blk * s->g.block_stride) * esz + (size_t)r * row_bytes;
      const int64_t src = (int64_t)h * s->n + i; /* staged row */
      memcpy(pk + dst, s->stage_k + (size_t)src * row_bytes, row_bytes);
      memcpy(pv + dst, s->stage_v + (size_t)src * row_bytes, row_bytes);
      if (nsc) { /* a Q8 pool is dense: its scale rows follow the element rows */
        const int64_t sr = blk * hkv * bs + r;
        memcpy(sk + sr * nsc, s->scale_k + src * nsc, sizeof(float) * (size_t)nsc);
        memcpy(sv + sr * nsc, s->scale_v + src * nsc, sizeof(float) * (size_t)nsc);
      }
    }
  }
}

static int cmp_i64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Every slot below the pool's token count, and no slot twice (two tokens racing for one
 * row would leave either). Returns a status; OUT_OF_MEMORY when the sort's copy fails. */
static rove_status check_slots(const int64_t *slots, int32_t n, int64_t tokens) {
  int64_t *sorted = malloc(sizeof(int64_t) * (size_t)n);
  if (!sorted) return ROVE_ERR_OUT_OF_MEMORY;
  int32_t m = 0;
  rove_status st = ROVE_OK;
  for (int32_t i = 0; i < n && st == ROVE_OK; i++) {
    if (slots[i] >= tokens) st = ROVE_ERR_INVALID_ARGUMENT;
    if (slots[i] >= 0) sorted[m++] = slots[i];
  }
  if (st == ROVE_OK) {
    qsort(sorted, (size_t)m, sizeof(int64_t), cmp_i64);
    for (int32_t i = 1; i < m; i++)
      if (sorted[i] == sorted[i - 1]) st = ROVE_ERR_INVALID_ARGUMENT;
  }
  free(sorted);
  return st;
}

/* Whether K's and V's blocks share a byte. Their extents may interleave (a pool of [n_blocks]
 * [2][block] elements: k at the K half, v at the V half, blocks 2 blocks apart); with one
 * period S = block_stride bytes and blocks of B bytes, V's blocks sit at an offset r =
 * |v - k| mod S from K's in every period, and miss them iff B <= r <= S - B. */
static int kv_collide(const rove_paged_kv *kv, const rove_paged_geom *g) {
  const size_t esz = (size_t)rove_dtype_size(kv->type), span = (size_t)g->pool_bytes;
  if (!rove_overlap(kv->k, span, kv->v, span)) return 0;
  const uintptr_t a = (uintptr_t)kv->k, b = (uintptr_t)kv->v;
  const uint64_t S = (uint64_t)g->block_stride * esz, B = (uint64_t)g->block_elems * esz;
  const uint64_t r = (uint64_t)(a > b ? a - b : b - a) % S;
  return !(r >= B && r + B <= S);
}

/* The pool's arrays (written) against the inputs (read), and against each other (K and V:
 * kv_collide). */
static int overlaps(const rove_plan *p, const rove_paged_kv *kv, const rove_paged_geom *g, int32_t n,
                    const int64_t *slots, const void *k, int64_t ek, const void *v, int64_t ev,
                    int32_t in_type, const int32_t *pos, const double *angles, int64_t na) {
  const int64_t tokens = (int64_t)kv->n_blocks * kv->block_size; /* fits: check_pool */
  const size_t bsc = kv->type == ROVE_DTYPE_Q8
                         ? rove_span_bytes(tokens * p->cfg.n_kv_heads,
                                           (size_t)rove_q8_blocks(p->cfg.head_dim) * sizeof(float))
                         : 0;
  const size_t isz = (size_t)rove_dtype_size(in_type);
  const size_t pool_bytes = (size_t)g->pool_bytes;
  const rove_span out[5] = {{kv->k, pool_bytes},
                            {kv->v, pool_bytes},
                            {bsc ? kv->k_scale : NULL, bsc},
                            {bsc ? kv->v_scale : NULL, bsc},
                            {kv->pos, kv->pos ? rove_span_bytes(tokens, sizeof(int32_t)) : 0}};
  const rove_span in[5] = {{slots, rove_span_bytes(n, sizeof(int64_t))},
                           {k, rove_span_bytes(ek, isz)},
                           {v, rove_span_bytes(ev, isz)},
                           {pos, rove_span_bytes(n, sizeof(int32_t))},
                           {angles, rove_span_bytes(na, sizeof(double))}};
  for (int i = 0; i < 5; i++) {
    if (!out[i].p) continue;
    if (rove_overlap_any(out[i].p, out[i].bytes, in, 5)) return 1;
    for (int j = i + 1; j < 5; j++)
      if (i + j > 1 && rove_overlap(out[i].p, out[i].bytes, out[j].p, out[j].bytes)) return 1;
  }
  return kv_collide(kv, g);
}

rove_status rove_paged_store(const rove_plan *p, const rove_paged_kv *kv, int32_t n_tokens,
                             const int64_t *slots, const void *k, int64_t k_stride,
                             const void *v, int64_t v_stride, rove_dtype in_type,
                             const int32_t *pos, const double *angles) {
  if (!p || !kv || !slots || !k || !v || !pos || n_tokens < 0 || !rove_dtype_is_tensor(in_type))
    return ROVE_ERR_INVALID_ARGUMENT;
  rove_paged_geom g;
  rove_status st = rove_paged_check_pool(p, kv, &g);
  if (st != ROVE_OK || n_tokens == 0) return st;
  const int32_t d = p->cfg.head_dim, hkv = p->cfg.n_kv_heads;
  const int64_t width = (int64_t)hkv * d;
  const int64_t tab_w = angles ? (int64_t)hkv * p->half : p->half;
  int64_t ks, vs, ek, ev, na, rows, stage_elems;
  st = rove_tensor_extent(k_stride, width, n_tokens, &ks, &ek);
  if (st == ROVE_OK) st = rove_tensor_extent(v_stride, width, n_tokens, &vs, &ev);
  if (st != ROVE_OK) return st;
  const int32_t nsc = kv->type == ROVE_DTYPE_Q8 ? rove_q8_blocks(d) : 0;
  const int64_t esz = rove_dtype_size(kv->type);
  if (!rove_mul_i64(n_tokens, tab_w, &na) || !rove_mul_i64(n_tokens, hkv, &rows) ||
      !rove_mul_i64(rows, d, &stage_elems) || stage_elems > INT64_MAX / 16)
    return ROVE_ERR_SIZE_OVERFLOW;
  if (angles) /* a skipped token's angles are not used */
    for (int32_t i = 0; i < n_tokens; i++)
      if (slots[i] >= 0 && !rove_angles_finite(angles + i * tab_w, tab_w)) return ROVE_ERR_INVALID_ARGUMENT;
  if (overlaps(p, kv, &g, n_tokens, slots, k, ek, v, ev, in_type, pos, angles, na))
    return ROVE_ERR_INVALID_ARGUMENT;
  st = check_slots(slots, n_tokens, (int64_t)kv->n_blocks * kv->block_size);
  if (st != ROVE_OK) return st;

  /* staging: K and V rows, then K and V scales; per-thread tables and fp32 rows */
  const int64_t tasks = (n_tokens + ROVE_CACHE_CHUNK - 1) / ROVE_CACHE_CHUNK;
  const int32_t threads = rove_team_size(p->cfg.n_threads, tasks);
  const int typed = kv->type != ROVE_DTYPE_F32 || in_type != ROVE_DTYPE_F32;
  const int64_t per_thread = 2 * ROVE_CACHE_CHUNK * tab_w + (typed ? (int64_t)ROVE_CACHE_CHUNK * d : 0);
  const size_t row_bytes = ((size_t)stage_elems * (size_t)esz + 63) / 64 * 64;
  const size_t scale_bytes = ((size_t)rows * (size_t)nsc * sizeof(float) + 63) / 64 * 64;
  char *stage = rove_alloc(2 * row_bytes + 2 * scale_bytes);
  float *scratch = rove_alloc((size_t)threads * (size_t)per_thread * sizeof(float));
  int *bad = calloc((size_t)tasks, sizeof(int));
  if (!stage || !scratch || !bad) {
    rove_free(stage), rove_free(scratch), free(bad);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  store_ctx s = {p, kv, g, n_tokens, slots, k, v, ks, vs, in_type, pos, angles, tab_w,
                 stage, stage + row_bytes,
                 nsc ? (float *)(stage + 2 * row_bytes) : NULL,
                 nsc ? (float *)(stage + 2 * row_bytes + scale_bytes) : NULL,
                 scratch, per_thread, bad};
  rove_parallel_for(p->cfg.n_threads, tasks, stage_task, &s);
  int any = 0;
  for (int64_t t = 0; t < tasks; t++) any |= bad[t];
  if (any)
    st = ROVE_ERR_INVALID_ARGUMENT; /* a value the pool's type cannot hold: nothing written */
  else
    rove_parallel_for(p->cfg.n_threads, tasks, scatter_task, &s);
  rove_free(stage), rove_free(scratch), free(bad);
  return st;
}
