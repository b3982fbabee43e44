/* SPDX-License-Identifier: MIT */
/* The KV cache: K and V stored already rotated into the global frame.
 *
 * Layout: k, v [batch][n_kv_heads][capacity][head_dim] elements of the cache's type
 * (head-major, so attention streams each head's keys and values front to back); for Q8
 * also kscale, vscale [batch][n_kv_heads][capacity][rove_q8_blocks(head_dim)] floats;
 * pos [batch][capacity]. Tokens 0 .. len-1 of every batch row are valid. Rows are rotated
 * in fp32 and rounded once to the type (typed appends and shifts go through a per-thread
 * fp32 buffer of CACHE_CHUNK rows); rows past len are scratch: a failed append may leave
 * them written, which nothing can observe. With ROVE_ROTATE_K the stored key is
 * m * R_{p_j} k_j (m: the YaRN factor), with ROVE_ROTATE_V the stored value is R_{p_j} v_j,
 * so attention over the cache only rotates the queries and the output. A context shift
 * by D rotates the stored rows by R_D: R_D R_p = R_{p+D}, and m commutes with rotations. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"
#include "cache_rows.h"
#include "kv_cache_internal.h"
#include "selective.h"

#define CACHE_CHUNK ROVE_CACHE_CHUNK /* tokens per append task / rows per shift step */

struct rove_kv_cache {
  const rove_plan *p;
  int32_t batch, cap, len;
  int32_t type; /* rove_dtype of the stored K and V */
  int angles; /* the stored K/V were rotated by explicit angles (append_angles); set by
                 the first append into an empty cache, which fixes the kind for the rest */
  int64_t hstride, bstride; /* elements between heads (capacity * head_dim), between batches */
  void *k, *v;
  float *kscale, *vscale; /* Q8 only, else NULL */
  int32_t *pos;
};

rove_status rove_kv_cache_create_typed(const rove_plan *p, int32_t batch, int32_t capacity,
                                       rove_dtype type, rove_kv_cache **out) {
  if (!p || !out || batch <= 0 || capacity <= 0 || (int)type < 0 || type >= ROVE_DTYPE_COUNT)
    return ROVE_ERR_INVALID_ARGUMENT;
  const int32_t d = p->cfg.head_dim;
  int64_t width = (int64_t)p->cfg.n_kv_heads * d, rows, elems, scales;
  if (!rove_mul_i64(batch, capacity, &rows) || !rove_mul_i64(rows, width, &elems) ||
      elems > INT64_MAX / 8 || !rove_mul_i64(rows * p->cfg.n_kv_heads, rove_q8_blocks(d), &scales) ||
      scales > INT64_MAX / 8)
    return ROVE_ERR_SIZE_OVERFLOW;
  rove_kv_cache *c = calloc(1, sizeof *c);
  if (!c) return ROVE_ERR_OUT_OF_MEMORY;
  *c = (rove_kv_cache){.p = p, .batch = batch, .cap = capacity, .type = type,
                       .hstride = (int64_t)capacity * d, .bstride = rows / batch * width};
  const size_t bytes = (size_t)elems * (size_t)rove_dtype_size(type);
  c->k = rove_alloc_large(bytes);
  c->v = rove_alloc_large(bytes);
  c->pos = rove_alloc((size_t)rows * sizeof(int32_t));
  int ok = c->k && c->v && c->pos;
  if (ok && type == ROVE_DTYPE_Q8) {
    c->kscale = rove_alloc((size_t)scales * sizeof(float));
    c->vscale = rove_alloc((size_t)scales * sizeof(float));
    ok = c->kscale && c->vscale;
  }
  if (!ok) {
    rove_kv_cache_destroy(c);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  *out = c;
  return ROVE_OK;
}

rove_status rove_kv_cache_create(const rove_plan *p, int32_t batch, int32_t capacity,
                                 rove_kv_cache **out) {
  return rove_kv_cache_create_typed(p, batch, capacity, ROVE_DTYPE_F32, out);
}

void rove_kv_cache_destroy(rove_kv_cache *c) {
  if (!c) return;
  rove_free(c->k);
  rove_free(c->v);
  rove_free(c->kscale);
  rove_free(c->vscale);
  rove_free(c->pos);
  free(c);
}

rove_dtype rove_kv_cache_type(const rove_kv_cache *c) { return c ? (rove_dtype)c->type : ROVE_DTYPE_F32; }
int32_t rove_kv_cache_length(const rove_kv_cache *c) { return c ? c->len : 0; }
int32_t rove_kv_cache_batch_internal(const rove_kv_cache *c) { return c ? c->batch : 0; }
const rove_plan *rove_kv_cache_plan(const rove_kv_cache *c) { return c ? c->p : NULL; }
int32_t rove_kv_cache_capacity(const rove_kv_cache *c) { return c ? c->cap : 0; }

/* ---- append ------------------------------------------------------------------------ */

typedef struct {
  rove_kv_cache *c;
  int32_t n;
  const void *k, *v;    /* in_type elements, token strides ks / vs */
  int64_t ks, vs;
  int32_t in_type;
  const double *angles; /* NULL, or [batch][n][n_kv_heads][half] (Selective RoPE) */
  int64_t tab_w;        /* table floats per token: half, or n_kv_heads * half with angles */
  float *tab;           /* per thread: cos [rows][tab_w], then sin, then (typed caches or
                           inputs) fp32 rows [rows][head_dim] */
  int64_t rows;         /* min(n, CACHE_CHUNK) */
  int64_t chunks;
  int64_t thread_floats; /* floats of tab per thread */
  int *bad;             /* [task]: a rotated value the cache's type cannot hold */
} append_ctx;

/* One chunk of new tokens of one batch row: table rows, then rotate every head into place. */
static void append_task(int64_t t, int tid, void *vctx) {
  append_ctx *a = vctx;
  rove_kv_cache *c = a->c;
  const rove_plan *p = c->p;
  const int32_t d = p->cfg.head_dim, half = p->half, hkv = p->cfg.n_kv_heads;
  const int64_t b = t / a->chunks, t0 = (t % a->chunks) * CACHE_CHUNK, w = a->tab_w;
  const int64_t n = a->n - t0 < CACHE_CHUNK ? a->n - t0 : CACHE_CHUNK;
  const int64_t tok = c->len + t0; /* first cache token written */
  float *cs = a->tab + (int64_t)tid * a->thread_floats, *sn = cs + a->rows * w;
  float *rowbuf = sn + a->rows * w; /* typed caches: [rows][d] */
  if (a->angles)
    rove_angle_table(p->kern, cs, sn, a->angles + (b * a->n + t0) * w, n * w);
  else
    rove_rope_table(cs, sn, p->inv_freq, half, p->rope_step, c->pos + b * c->cap + tok, 0,
                    n);
  const uint32_t rot = p->cfg.rotate;
  const int64_t src = b * a->n + t0;
  for (int32_t h = 0; h < hkv; h++) {
    const int64_t off = a->angles ? (int64_t)h * half : 0;
    const int on_k = (rot & ROVE_ROTATE_K) != 0, on_v = (rot & ROVE_ROTATE_V) != 0;
    const rove_rot rk = rove_plan_rot(p, on_k ? cs + off : NULL, on_k ? sn + off : NULL, w);
    const rove_rot rv = rove_plan_rot(p, on_v ? cs + off : NULL, on_v ? sn + off : NULL, w);
    const int64_t dst = b * c->bstride + h * c->hstride + tok * d;
    for (int which = 0; which < 2; which++) { /* K, then V */
      const rove_rot *r = which ? &rv : &rk;
      const float mul = which ? 1.0f : (float)p->attn_factor;
      const int64_t ss = which ? a->vs : a->ks, e = src * ss + (int64_t)h * d;
      const void *x = (const char *)(which ? a->v : a->k) + e * rove_dtype_size(a->in_type);
      a->bad[t] |= rove_cache_store(p, c->type, which ? c->v : c->k, which ? c->vscale : c->kscale,
                                    dst, x, a->in_type, ss, n, r, mul, rowbuf);
    }
  }
}

/* Positions of the new tokens; default: continue each row. Checked before any write. */
static rove_status new_positions(const rove_kv_cache *c, int32_t n, const int32_t *pos,
                                 int32_t *dst) {
  for (int64_t b = 0; b < c->batch; b++) {
    int64_t next = c->len ? (int64_t)c->pos[b * c->cap + c->len - 1] + 1 : 0;
    if (!pos && next + n - 1 > INT32_MAX) return ROVE_ERR_SIZE_OVERFLOW;
    for (int64_t i = 0; i < n; i++) dst[b * n + i] = pos ? pos[b * n + i] : (int32_t)(next + i);
  }
  return ROVE_OK;
}

static rove_status append(rove_kv_cache *c, int32_t n_tokens, const void *k, int64_t k_stride,
                          const void *v, int64_t v_stride, const int32_t *pos,
                          const double *angles, rove_dtype in_type) {
  if (!c || !k || !v || n_tokens <= 0) return ROVE_ERR_INVALID_ARGUMENT;
  if (!rove_dtype_is_tensor(in_type)) return ROVE_ERR_INVALID_ARGUMENT;
  const int64_t width = (int64_t)c->p->cfg.n_kv_heads * c->p->cfg.head_dim;
  const int64_t tab_w = angles ? (int64_t)c->p->cfg.n_kv_heads * c->p->half : c->p->half;
  if (k_stride == 0) k_stride = width;
  if (v_stride == 0) v_stride = width;
  if (k_stride < width || v_stride < width) return ROVE_ERR_INVALID_ARGUMENT;
  const int64_t stride = k_stride > v_stride ? k_stride : v_stride;
  int64_t rows, extent, tab; /* the larger input's element extent must be addressable */
  if (!rove_mul_i64(c->batch, n_tokens, &rows) || !rove_mul_i64(rows - 1, stride, &extent) ||
      !rove_add_i64(extent, width, &extent) || extent > INT64_MAX / 8 ||
      !rove_mul_i64(rows, tab_w, &tab) || tab > INT64_MAX / 8)
    return ROVE_ERR_SIZE_OVERFLOW;
  if ((int64_t)c->len + n_tokens > c->cap) return ROVE_ERR_SIZE_OVERFLOW;
  if (c->len > 0 && c->angles != (angles != NULL)) return ROVE_ERR_INVALID_ARGUMENT; /* mixed */
  if (angles && !rove_angles_finite(angles, tab)) return ROVE_ERR_INVALID_ARGUMENT;
  /* one table of up to CACHE_CHUNK rows per thread the append runs */
  const int64_t trows = n_tokens < CACHE_CHUNK ? n_tokens : CACHE_CHUNK;
  const int64_t chunks = (n_tokens + CACHE_CHUNK - 1) / CACHE_CHUNK;
  const int64_t tasks = c->batch * chunks;
  const int32_t threads = rove_team_size(c->p->cfg.n_threads, tasks);
  const int typed = c->type != ROVE_DTYPE_F32 || in_type != ROVE_DTYPE_F32;
  const int64_t per_thread = 2 * trows * tab_w + (typed ? trows * c->p->cfg.head_dim : 0);
  float *table = rove_alloc((size_t)threads * (size_t)per_thread * sizeof(float));
  int32_t *newpos = rove_alloc((size_t)rows * sizeof(int32_t));
  int *bad = calloc((size_t)tasks, sizeof(int));
  rove_status st = table && newpos && bad ? new_positions(c, n_tokens, pos, newpos) : ROVE_ERR_OUT_OF_MEMORY;
  if (st == ROVE_OK) {
    /* rows and positions past len are invisible until len moves: a rejected append
     * leaves the cache as it was */
    for (int64_t b = 0; b < c->batch; b++)
      memcpy(c->pos + b * c->cap + c->len, newpos + b * n_tokens, sizeof(int32_t) * (size_t)n_tokens);
    append_ctx a = {c, n_tokens, k, v, k_stride, v_stride, in_type, angles, tab_w, table, trows,
                    chunks, per_thread, bad};
    rove_parallel_for(c->p->cfg.n_threads, tasks, append_task, &a);
    int any = 0;
    for (int64_t t = 0; t < tasks; t++) any |= bad[t];
    if (any) {
      st = ROVE_ERR_INVALID_ARGUMENT;
    } else {
      c->len += n_tokens;
      c->angles = angles != NULL;
    }
  }
  rove_free(table);
  rove_free(newpos);
  free(bad);
  return st;
}

rove_status rove_kv_cache_append(rove_kv_cache *c, int32_t n_tokens, const float *k,
                                 int64_t k_stride, const float *v, int64_t v_stride,
                                 const int32_t *pos) {
  return append(c, n_tokens, k, k_stride, v, v_stride, pos, NULL, ROVE_DTYPE_F32);
}

rove_status rove_kv_cache_append_typed(rove_kv_cache *c, int32_t n_tokens, const void *k,
                                       int64_t k_stride, const void *v, int64_t v_stride,
                                       const int32_t *pos, rove_dtype in_type) {
  return append(c, n_tokens, k, k_stride, v, v_stride, pos, NULL, in_type);
}

rove_status rove_kv_cache_append_angles(rove_kv_cache *c, int32_t n_tokens, const float *k,
                                        int64_t k_stride, const float *v, int64_t v_stride,
                                        const int32_t *pos, const double *angles) {
  if (!angles) return ROVE_ERR_INVALID_ARGUMENT;
  return append(c, n_tokens, k, k_stride, v, v_stride, pos, angles, ROVE_DTYPE_F32);
}

/* ---- attention --------------------------------------------------------------------- */

rove_status rove_kv_cache_attention_typed(const rove_kv_cache *c, const rove_attention_args *a,
                                          const rove_tensor_types *types) {
  if (!c || !a || a->batch != c->batch || c->len <= 0 || a->q_len <= 0) return ROVE_ERR_INVALID_ARGUMENT;
  /* keys rotated by angles need queries rotated by angles (the reverse is allowed: angles
   * pos * w_k on a position cache are just positions) */
  if (c->angles && !a->q_angles && (c->p->cfg.rotate & (ROVE_ROTATE_Q | ROVE_ROTATE_O)))
    return ROVE_ERR_INVALID_ARGUMENT;
  rove_attention_args args = *a;
  int32_t *qpos = NULL;
  if (!a->q_pos) { /* the queries are the newest q_len cached tokens */
    if (a->q_len > c->len) return ROVE_ERR_INVALID_ARGUMENT;
    qpos = rove_alloc(sizeof(int32_t) * (size_t)c->batch * (size_t)a->q_len);
    if (!qpos) return ROVE_ERR_OUT_OF_MEMORY;
    for (int64_t b = 0; b < c->batch; b++)
      memcpy(qpos + b * a->q_len, c->pos + b * c->cap + c->len - a->q_len,
             sizeof(int32_t) * (size_t)a->q_len);
    args.q_pos = qpos;
  }
  const rove_kv_view view = {.k = c->k, .v = c->v, .bstride = c->bstride, .hstride = c->hstride,
                             .tstride = c->p->cfg.head_dim, .type = c->type,
                             .kscale = c->kscale, .vscale = c->vscale, .len = c->len,
                             .pos = c->pos, .pos_bstride = c->cap};
  rove_fwd f;
  rove_status st = rove_fwd_init(&f, c->p, &args, &view, types);
  if (st == ROVE_OK) rove_fwd_run(&f);
  rove_free(qpos);
  return st;
}

rove_status rove_kv_cache_attention(const rove_kv_cache *c, const rove_attention_args *a) {
  return rove_kv_cache_attention_typed(c, a, NULL);
}

/* ---- shift, truncate, positions ------------------------------------------------------ */

/* Rotate tokens [start, end) of every (batch, head) of buf (K or V; scale: its Q8 scales)
 * by R_delta (rove_cache_rotate: with sink set nothing is stored and the result says
 * whether a rotated row does not fit the type). */
static int rotate_rows(const rove_kv_cache *c, void *buf, float *scale, int32_t start, int32_t end,
                       const rove_cache_shift_ws *w, void *sink) {
  const rove_plan *p = c->p;
  const int32_t d = p->cfg.head_dim, hkv = p->cfg.n_kv_heads;
  int bad = 0;
  for (int64_t bh = 0; bh < (int64_t)c->batch * hkv; bh++) {
    const int64_t e0 = (bh / hkv) * c->bstride + (bh % hkv) * c->hstride + (int64_t)start * d;
    for (int64_t i = 0; i < end - start; i += CACHE_CHUNK) {
      const int64_t n = end - start - i < CACHE_CHUNK ? end - start - i : CACHE_CHUNK;
      bad |= rove_cache_rotate(p, c->type, buf, scale, e0 + i * d, n, &w->r, w->rowbuf, sink);
    }
  }
  return bad;
}

rove_status rove_kv_cache_shift(rove_kv_cache *c, int32_t start, int32_t end, int32_t delta) {
  if (!c || start < 0 || start > end || end > c->len) return ROVE_ERR_INVALID_ARGUMENT;
  if (c->len > 0 && c->angles) return ROVE_ERR_UNSUPPORTED; /* no R_delta for angle-rotated tokens */
  for (int64_t b = 0; b < c->batch; b++)
    for (int64_t j = start; j < end; j++) {
      int64_t q = (int64_t)c->pos[b * c->cap + j] + delta;
      if (q < INT32_MIN || q > INT32_MAX) return ROVE_ERR_SIZE_OVERFLOW;
    }
  if (start == end || delta == 0) return ROVE_OK;
  rove_cache_shift_ws w;
  if (!rove_cache_shift_begin(c->p, c->type, delta, &w)) return ROVE_ERR_OUT_OF_MEMORY;
  const int on_k = (c->p->cfg.rotate & ROVE_ROTATE_K) != 0, on_v = (c->p->cfg.rotate & ROVE_ROTATE_V) != 0;
  /* Typed: a first pass checks that every rotated row still fits the type (F16 near
   * 65504), so that a rejected shift changes nothing. */
  if (w.sink && ((on_k && rotate_rows(c, c->k, c->kscale, start, end, &w, w.sink)) ||
                 (on_v && rotate_rows(c, c->v, c->vscale, start, end, &w, w.sink)))) {
    rove_cache_shift_end(&w);
    return ROVE_ERR_INVALID_ARGUMENT;
  }
  if (on_k) rotate_rows(c, c->k, c->kscale, start, end, &w, NULL);
  if (on_v) rotate_rows(c, c->v, c->vscale, start, end, &w, NULL);
  for (int64_t b = 0; b < c->batch; b++)
    for (int64_t j = start; j < end; j++) c->pos[b * c->cap + j] += delta;
  rove_cache_shift_end(&w);
  return ROVE_OK;
}

rove_status rove_kv_cache_truncate(rove_kv_cache *c, int32_t length) {
  if (!c || length < 0 || length > c->len) return ROVE_ERR_INVALID_ARGUMENT;
  c->len = length;
  return ROVE_OK;
}

rove_status rove_kv_cache_reset(rove_kv_cache *c) { return rove_kv_cache_truncate(c, 0); }

rove_status rove_kv_cache_positions(const rove_kv_cache *c, int32_t *pos) {
  if (!c || !pos) return ROVE_ERR_INVALID_ARGUMENT;
  for (int64_t b = 0; b < c->batch; b++)
    memcpy(pos + b * c->len, c->pos + b * c->cap, sizeof(int32_t) * (size_t)c->len);
  return ROVE_OK;
}
