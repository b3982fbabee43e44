/* SPDX-License-Identifier: MIT */
/* New tokens into a pool the caller owns (rove_paged_store, rove.h): the external-memory
 * counterpart of rove_paged_append, as vLLM's reshape_and_cache is of its paged kernels.
 * Rows are rotated into the global frame and rounded to the pool's type exactly as
 * rove_paged_append does (rove_cache_store_rows: K m R_p k, V R_p v with ROVE_ROTATE_V).
 *
 * Nothing may be half-written when a value does not fit the pool's type. A scan of the
 * inputs first bounds every rotated value (cannot_fail); when none can fail (an F32 pool,
 * or finite inputs far inside the type's range: the usual case) the rows go straight to
 * their slots, a run of consecutive slots within one block per call. Otherwise two phases:
 *  1. stage: the rows into a staging buffer laid out as one head-major block of n rows,
 *     [n_kv_heads][n][head_dim] elements (Q8: then [n_kv_heads][n][rove_q8_blocks]
 *     scales, the row at element e owning those at e / head_dim * rove_q8_blocks);
 *  2. scatter (only when every value fitted): each staged row copied to its slot's row.
 * Everything runs in chunks of ROVE_CACHE_CHUNK tokens, one task per chunk; positions go
 * to the pool's pos with the rows. */
#include <math.h>
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
  int direct;                       /* rows straight to their slots (cannot_fail) */
  char *stage_k, *stage_v;          /* [n_kv_heads][n][head_dim] of the pool's type */
  float *scale_k, *scale_v;         /* Q8: [n_kv_heads][n][q8_blocks], else NULL */
  float *scratch;                   /* per thread: cos, sin [chunk][tab_w], rows [chunk][d] */
  int64_t thread_floats;
  int *bad;                         /* [task] */
  int16_t *top;                     /* [task]: cannot_fail's scan of the chunk */
} store_ctx;

static int64_t chunk_lo(int64_t t) { return t * ROVE_CACHE_CHUNK; }
static int64_t chunk_hi(const store_ctx *s, int64_t t) {
  const int64_t hi = (t + 1) * ROVE_CACHE_CHUNK;
  return hi < s->n ? hi : s->n;
}

/* The pool's arrays: the caller's writable memory (rove_paged_kv is const for readers). */
static char *wr(const void *p) { return (char *)(uintptr_t)p; }

/* The element offset in K (V) of slot `slot`'s row of KV head h: blocks block_stride
 * elements apart, within one the row [h][row] head-major or [row][h] token-major. A Q8
 * pool is dense and head-major, so its row's scales are those of row offset / head_dim. */
static int64_t pool_row(const store_ctx *s, int64_t slot, int32_t h) {
  const int64_t bs = s->kv->block_size, hkv = s->p->cfg.n_kv_heads;
  const int64_t blk = slot >> s->g.shift, row = slot & (bs - 1);
  const int64_t r = s->kv->layout == ROVE_PAGED_TOKEN_MAJOR ? row * hkv + h : h * bs + row;
  return blk * s->g.block_stride + r * s->p->cfg.head_dim;
}

/* Tokens [i, i + m) (rows a.. of the chunk's table) of every head: to the staging block,
 * or (direct) to the pool, where they are consecutive slots of one block. */
static int store_run(const store_ctx *s, int64_t i, int64_t m, int64_t a, const float *cs,
                     const float *sn, float *rowbuf) {
  const rove_plan *p = s->p;
  const rove_paged_kv *kv = s->kv;
  const int32_t d = p->cfg.head_dim, half = p->half, hkv = p->cfg.n_kv_heads;
  const uint32_t rot = p->cfg.rotate;
  const int on_k = (rot & ROVE_ROTATE_K) != 0, on_v = (rot & ROVE_ROTATE_V) != 0;
  const int64_t esz = rove_dtype_size(s->in_type), w = s->tab_w;
  const int tm = kv->layout == ROVE_PAGED_TOKEN_MAJOR;
  char *bk = s->direct ? wr(kv->k) : s->stage_k, *bv = s->direct ? wr(kv->v) : s->stage_v;
  float *sk = s->direct ? (float *)wr(kv->k_scale) : s->scale_k;
  float *sv = s->direct ? (float *)wr(kv->v_scale) : s->scale_v;
  const int64_t ds = s->direct && tm ? (int64_t)hkv * d : d; /* elements between its rows */
  int bad = 0;
  for (int32_t h = 0; h < hkv; h++) {
    const int64_t off = a * w + (s->angles ? (int64_t)h * half : 0);
    const rove_rot rk = rove_plan_rot(p, on_k ? cs + off : NULL, on_k ? sn + off : NULL, w);
    const rove_rot rv = rove_plan_rot(p, on_v ? cs + off : NULL, on_v ? sn + off : NULL, w);
    /* staged: row h n + i; direct: the pool's row of slot i (the run's next slots follow,
     * ds elements apart) */
    const int64_t dst = s->direct ? pool_row(s, s->slots[i], h) : ((int64_t)h * s->n + i) * d;
    const char *xk = (const char *)s->k + (i * s->ks + (int64_t)h * d) * esz;
    const char *xv = (const char *)s->v + (i * s->vs + (int64_t)h * d) * esz;
    bad |= rove_cache_store_rows(p, kv->type, bk, sk, dst, ds, xk, s->in_type, s->ks, m, &rk,
                                 (float)p->attn_factor, rowbuf);
    bad |= rove_cache_store_rows(p, kv->type, bv, sv, dst, ds, xv, s->in_type, s->vs, m, &rv,
                                 1.0f, rowbuf);
  }
  if (s->direct && kv->pos)
    for (int64_t j = 0; j < m; j++) ((int32_t *)wr(kv->pos))[s->slots[i + j]] = s->pos[i + j];
  return bad;
}

/* Tokens [lo, hi) of chunk t: the rotation table, then each run of stored tokens (padding
 * tokens, slot < 0: their K and V are neither read nor checked; their positions or angles
 * feed the table, unused): staged, any run; direct, consecutive slots within one block. */
static void rows_task(int64_t t, int tid, void *vctx) {
  store_ctx *s = vctx;
  const rove_plan *p = s->p;
  const int64_t lo = chunk_lo(t), n = chunk_hi(s, t) - lo, w = s->tab_w;
  const int64_t bmask = s->kv->block_size - 1;
  float *cs = s->scratch + (int64_t)tid * s->thread_floats, *sn = cs + ROVE_CACHE_CHUNK * w;
  float *rowbuf = sn + ROVE_CACHE_CHUNK * w;
  if (s->angles)
    rove_angle_table(p->kern, cs, sn, s->angles + lo * w, n * w);
  else
    rove_rope_table(cs, sn, p->inv_freq, p->half, p->rope_step, s->pos + lo, 0, n);
  const int64_t *sl = s->slots + lo;
  for (int64_t a = 0; a < n;) {
    if (sl[a] < 0) {
      a++;
      continue;
    }
    int64_t b = a + 1;
    if (s->direct)
      while (b < n && sl[b] == sl[b - 1] + 1 && (sl[b] & bmask) != 0) b++;
    else
      while (b < n && sl[b] >= 0) b++;
    s->bad[t] |= store_run(s, lo + a, b - a, a, cs, sn, rowbuf);
    a = b;
  }
}

/* 16-bit words of any input (an fp32's halves included): reading them aliases. */
typedef int16_t __attribute__((may_alias)) i16_alias;

/* max(t, the magnitude bits of u[0], u[step], ... u[(n - 1) step]); inlined with step a
 * constant, so that the loop vectorises. */
static inline __attribute__((always_inline)) int16_t max_words(const i16_alias *u, int64_t n,
                                                               int step, int16_t t) {
  for (int64_t e = 0; e < n; e++) {
    const int16_t a = (int16_t)(u[e * step] & 0x7fff);
    t = a > t ? a : t;
  }
  return t;
}

/* The largest |x| of chunk t's stored tokens, from 16-bit magnitude words (their bit order
 * is the magnitudes'): BF16 and F16 elements, or the high half of each fp32 (sign,
 * exponent, 7 mantissa bits; little-endian), so that gcc vectorises the loop with the
 * baseline ISA (SSE2 has a 16-bit integer max, no 32-bit one). */
static void scan_task(int64_t t, int tid, void *vctx) {
  (void)tid;
  store_ctx *s = vctx;
  const int64_t width = (int64_t)s->p->cfg.n_kv_heads * s->p->cfg.head_dim;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "scan_task reads the high half of an fp32 as the second 16-bit word"
#endif
  const int f32 = s->in_type == ROVE_DTYPE_F32, step = f32 ? 2 : 1;
  int16_t t16 = 0;
  for (int64_t i = chunk_lo(t); i < chunk_hi(s, t); i++) {
    if (s->slots[i] < 0) continue;
    for (int kv = 0; kv < 2; kv++) {
      const int64_t at = i * (kv ? s->vs : s->ks) * step + (f32 ? 1 : 0);
      const i16_alias *u = (const i16_alias *)(kv ? s->v : s->k) + at;
      t16 = f32 ? max_words(u, width, 2, t16) : max_words(u, width, 1, t16);
    }
  }
  s->top[t] = t16;
}

/* Whether no stored token's rotated rows can fail to fit the pool's type (rove_kv_cache_
 * create_typed): an F32 pool never fails; otherwise the largest finite input magnitude M
 * bounds every rotated value by 2 M max(m, 1) (a pair rotates as a c - b s, |c|, |s| <= 1;
 * K's rotated dims times m), with margin for the fp32 rounding, and that bound must lie
 * inside the type's range (F16 65504, BF16 3e38, Q8 1e38 and no NaN or infinity: Q8 stores
 * finite values only; F16 and BF16 store NaN and infinities as such). The scan runs one
 * task per chunk, as the stores do. */
static int cannot_fail(store_ctx *s, int64_t tasks) {
  const int32_t type = s->kv->type;
  if (type == ROVE_DTYPE_F32) return 1;
  rove_parallel_for(s->p->cfg.n_threads, tasks, scan_task, s);
  int16_t t16 = 0;
  for (int64_t t = 0; t < tasks; t++) t16 = s->top[t] > t16 ? s->top[t] : t16;
  /* a word of all-ones exponent is an infinity or a NaN: unbounded */
  const uint32_t special = s->in_type == ROVE_DTYPE_F16 ? 0x7c00u : 0x7f80u;
  const int f32 = s->in_type == ROVE_DTYPE_F32;
  const uint32_t b = (uint32_t)t16;
  float big;
  if (b >= special) {
    big = INFINITY;
  } else if (s->in_type == ROVE_DTYPE_F16) { /* (1024 + f) 2^(e - 25), or f 2^-24 */
    big = (float)ldexp((b >> 10) ? 1024 + (b & 0x3ff) : (b & 0x3ff),
                       (b >> 10) ? (int)(b >> 10) - 25 : -24);
  } else { /* BF16 exact; fp32 below the next high half (one more mantissa step) */
    const uint32_t bits = (b + (uint32_t)f32) << 16;
    memcpy(&big, &bits, sizeof big);
  }
  const int nonfinite = isinf(big);
  const double m = s->p->attn_factor > 1 ? s->p->attn_factor : 1.0;
  const double bound = 2.001 * (double)big * m;
  if (type == ROVE_DTYPE_Q8) return !nonfinite && bound < 1e38; /* also no NaN: inf above */
  return bound < (type == ROVE_DTYPE_F16 ? 65504.0 : 3e38);
}

/* Phase 2, tokens [lo, hi): each staged row to its slot (negative slots: skipped). */
static void scatter_task(int64_t t, int tid, void *vctx) {
  (void)tid;
  const store_ctx *s = vctx;
  const rove_paged_kv *kv = s->kv;
  const int32_t d = s->p->cfg.head_dim, hkv = s->p->cfg.n_kv_heads;
  const int32_t nsc = kv->type == ROVE_DTYPE_Q8 ? rove_q8_blocks(d) : 0;
  const size_t esz = (size_t)rove_dtype_size(kv->type), row_bytes = (size_t)d * esz;
  char *pk = wr(kv->k), *pv = wr(kv->v);
  float *sk = (float *)wr(kv->k_scale), *sv = (float *)wr(kv->v_scale);
  int32_t *ppos = (int32_t *)wr(kv->pos);
  for (int64_t i = chunk_lo(t); i < chunk_hi(s, t); i++) {
    const int64_t slot = s->slots[i];
    if (slot < 0) continue;
    if (ppos) ppos[slot] = s->pos[i];
    for (int32_t h = 0; h < hkv; h++) {
      const int64_t e = pool_row(s, slot, h), src = (int64_t)h * s->n + i; /* staged row */
      memcpy(pk + (size_t)e * esz, s->stage_k + (size_t)src * row_bytes, row_bytes);
      memcpy(pv + (size_t)e * esz, s->stage_v + (size_t)src * row_bytes, row_bytes);
      if (nsc) {
        const int64_t sr = e / d; /* Q8: dense, head-major */
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
  if (!p || !kv || n_tokens < 0 || !rove_dtype_is_tensor(in_type)) return ROVE_ERR_INVALID_ARGUMENT;
  rove_paged_geom g;
  rove_status st = rove_paged_check_pool(p, kv, &g);
  if (st != ROVE_OK || n_tokens == 0) return st; /* nothing to store: the arrays may be NULL */
  if (!slots || !k || !v || !pos) return ROVE_ERR_INVALID_ARGUMENT;
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

  /* per-thread tables and fp32 rows; unless direct, the staging: K and V rows, then K and
   * V scales */
  const int64_t tasks = (n_tokens + ROVE_CACHE_CHUNK - 1) / ROVE_CACHE_CHUNK;
  const int32_t threads = rove_team_size(p->cfg.n_threads, tasks);
  const int typed = kv->type != ROVE_DTYPE_F32 || in_type != ROVE_DTYPE_F32;
  const int64_t per_thread = 2 * ROVE_CACHE_CHUNK * tab_w + (typed ? (int64_t)ROVE_CACHE_CHUNK * d : 0);
  store_ctx s = {p, kv, g, n_tokens, slots, k, v, ks, vs, in_type, pos, angles, tab_w, 0,
                 NULL, NULL, NULL, NULL, NULL, per_thread, NULL, NULL};
  /* the scan's per-chunk maxima: not needed for an F32 pool (it never fails) */
  int16_t *top = kv->type == ROVE_DTYPE_F32 ? NULL : malloc(sizeof(int16_t) * (size_t)tasks);
  if (kv->type != ROVE_DTYPE_F32 && !top) return ROVE_ERR_OUT_OF_MEMORY;
  s.top = top;
  s.direct = cannot_fail(&s, tasks);
  free(top);
  const size_t row_bytes = s.direct ? 0 : ((size_t)stage_elems * (size_t)esz + 63) / 64 * 64;
  const size_t scale_bytes = s.direct ? 0 : ((size_t)rows * (size_t)nsc * sizeof(float) + 63) / 64 * 64;
  char *stage = s.direct ? NULL : rove_alloc(2 * row_bytes + 2 * scale_bytes);
  float *scratch = rove_alloc((size_t)threads * (size_t)per_thread * sizeof(float));
  int *bad = calloc((size_t)tasks, sizeof(int));
  if ((!s.direct && !stage) || !scratch || !bad) {
    rove_free(stage), rove_free(scratch), free(bad);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  if (stage) {
    s.stage_k = stage, s.stage_v = stage + row_bytes;
    s.scale_k = nsc ? (float *)(stage + 2 * row_bytes) : NULL;
    s.scale_v = nsc ? (float *)(stage + 2 * row_bytes + scale_bytes) : NULL;
  }
  s.scratch = scratch, s.bad = bad;
  rove_parallel_for(p->cfg.n_threads, tasks, rows_task, &s);
  int any = 0;
  for (int64_t t = 0; t < tasks; t++) any |= bad[t];
  /* direct: nothing can have failed (cannot_fail); staged: a value the pool's type cannot
   * hold leaves the pool untouched */
  if (any)
    st = ROVE_ERR_INVALID_ARGUMENT;
  else if (!s.direct)
    rove_parallel_for(p->cfg.n_threads, tasks, scatter_task, &s);
  rove_free(stage), rove_free(scratch), free(bad);
  return st;
}
