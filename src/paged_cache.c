/* SPDX-License-Identifier: MIT */
/* librove's paged KV cache (rove.h): a pool of blocks, reference counted, and the block
 * tables of up to max_seqs sequences.
 *
 * Pool layout (rove.h, the interop contract): k, v [n_blocks][n_kv_heads][block_size]
 * [head_dim] elements of the type; Q8 scales [n_blocks][n_kv_heads][block_size][q8 blocks];
 * pos [n_blocks][block_size]. ref[b] counts the sequences whose tables hold block b; free
 * blocks (ref 0) are a stack. A sequence writes only into blocks it alone holds: an
 * append into a partly filled last block shared with a fork, and a shift over shared
 * blocks, first copy those blocks (copy-on-write). Rows of a block past a sequence's
 * length are scratch: an append writes there before it commits, which no other sequence
 * can observe (the block is its own).
 * Every mutating call checks everything, and takes every block and buffer it needs,
 * before it changes anything: a failure leaves the cache as it was. */
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"
#include "cache_rows.h"
#include "paged_internal.h"
#include "selective.h"

typedef struct paged_seq {
  int live, angles;  /* angles: the stored rows were rotated by explicit angles */
  int32_t len, nb;   /* tokens; blocks in the table (ceil(len / block_size)) */
  int32_t cap;       /* table capacity */
  int32_t *table;
} paged_seq;

struct rove_paged_cache {
  const rove_plan *p;
  int32_t type, bs, shift, n_blocks, max_seqs;
  int64_t block_elems;  /* n_kv_heads * bs * head_dim: elements of one K (or V) block */
  int64_t block_scales; /* Q8: n_kv_heads * bs * q8 blocks; else 0 */
  void *k, *v;
  float *kscale, *vscale;
  int32_t *pos;
  int32_t *ref;
  int32_t *free_stack, n_free;
  paged_seq *seqs;
};

rove_status rove_paged_cache_create(const rove_plan *p, rove_dtype type, int32_t block_size,
                                    int32_t n_blocks, int32_t max_seqs, rove_paged_cache **out) {
  if (!p || !out || max_seqs <= 0) return ROVE_ERR_INVALID_ARGUMENT;
  rove_paged_kv probe = {.k = p, .v = p, .k_scale = (const float *)p, .v_scale = (const float *)p,
                         .type = type, .block_size = block_size, .n_blocks = n_blocks};
  rove_paged_geom g;
  rove_status st = rove_paged_check_pool(p, &probe, &g);
  if (st != ROVE_OK) return st;
  const int32_t shift = g.shift;
  const int64_t d = p->cfg.head_dim, rows = (int64_t)n_blocks * block_size * p->cfg.n_kv_heads;
  int64_t scales = 0;
  if (type == ROVE_DTYPE_Q8 && (!rove_mul_i64(rows, rove_q8_blocks((int32_t)d), &scales) ||
                                scales > INT64_MAX / 8))
    return ROVE_ERR_SIZE_OVERFLOW;
  rove_paged_cache *c = calloc(1, sizeof *c);
  if (!c) return ROVE_ERR_OUT_OF_MEMORY;
  *c = (rove_paged_cache){.p = p, .type = type, .bs = block_size, .shift = shift,
                          .n_blocks = n_blocks, .max_seqs = max_seqs,
                          .block_elems = (int64_t)p->cfg.n_kv_heads * block_size * d,
                          .block_scales = scales / n_blocks, .n_free = n_blocks};
  c->k = rove_alloc_large((size_t)g.pool_bytes);
  c->v = rove_alloc_large((size_t)g.pool_bytes);
  c->pos = rove_alloc(sizeof(int32_t) * (size_t)n_blocks * (size_t)block_size);
  c->ref = calloc((size_t)n_blocks, sizeof(int32_t));
  c->free_stack = malloc(sizeof(int32_t) * (size_t)n_blocks);
  c->seqs = calloc((size_t)max_seqs, sizeof(paged_seq));
  int ok = c->k && c->v && c->pos && c->ref && c->free_stack && c->seqs;
  if (ok && scales) {
    c->kscale = rove_alloc(sizeof(float) * (size_t)scales);
    c->vscale = rove_alloc(sizeof(float) * (size_t)scales);
    ok = c->kscale && c->vscale;
  }
  if (!ok) {
    rove_paged_cache_destroy(c);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  for (int32_t i = 0; i < n_blocks; i++) c->free_stack[i] = n_blocks - 1 - i; /* pops 0, 1, .. */
  *out = c;
  return ROVE_OK;
}

void rove_paged_cache_destroy(rove_paged_cache *c) {
  if (!c) return;
  for (int32_t s = 0; c->seqs && s < c->max_seqs; s++) free(c->seqs[s].table);
  free(c->seqs);
  rove_free(c->k);
  rove_free(c->v);
  rove_free(c->kscale);
  rove_free(c->vscale);
  rove_free(c->pos);
  free(c->ref);
  free(c->free_stack);
  free(c);
}

rove_status rove_paged_cache_view(const rove_paged_cache *c, rove_paged_kv *out) {
  if (!c || !out) return ROVE_ERR_INVALID_ARGUMENT;
  *out = (rove_paged_kv){.k = c->k, .v = c->v, .k_scale = c->kscale, .v_scale = c->vscale,
                         .pos = c->pos, .type = (rove_dtype)c->type, .block_size = c->bs,
                         .n_blocks = c->n_blocks, .layout = ROVE_PAGED_HEAD_MAJOR};
  return ROVE_OK;
}

int32_t rove_paged_cache_free_blocks(const rove_paged_cache *c) { return c ? c->n_free : 0; }

/* ---- sequences ------------------------------------------------------------------------ */

static paged_seq *get_seq(const rove_paged_cache *c, int32_t seq) {
  if (!c || seq < 0 || seq >= c->max_seqs || !c->seqs[seq].live) return NULL;
  return &c->seqs[seq];
}

static int32_t free_slot(const rove_paged_cache *c) {
  for (int32_t s = 0; s < c->max_seqs; s++)
    if (!c->seqs[s].live) return s;
  return -1;
}

/* Table capacity for at least nb blocks (contents kept); 0 on allocation failure. */
static int reserve(paged_seq *q, int32_t nb) {
  if (nb <= q->cap) return 1;
  int32_t cap = q->cap ? q->cap : 4;
  while (cap < nb) cap = cap > INT32_MAX / 2 ? nb : cap * 2;
  int32_t *t = realloc(q->table, sizeof(int32_t) * (size_t)cap);
  if (!t) return 0;
  q->table = t;
  q->cap = cap;
  return 1;
}

static int32_t take_block(rove_paged_cache *c) {
  const int32_t b = c->free_stack[--c->n_free];
  c->ref[b] = 1;
  return b;
}

static void drop_block(rove_paged_cache *c, int32_t b) {
  if (--c->ref[b] == 0) c->free_stack[c->n_free++] = b;
}

/* Block src copied into block dst (K, V, their scales, positions: all rows). */
static void copy_block(rove_paged_cache *c, int32_t dst, int32_t src) {
  const size_t esz = (size_t)rove_dtype_size(c->type), n = (size_t)c->block_elems * esz;
  memcpy((char *)c->k + (size_t)dst * n, (const char *)c->k + (size_t)src * n, n);
  memcpy((char *)c->v + (size_t)dst * n, (const char *)c->v + (size_t)src * n, n);
  if (c->kscale) {
    const size_t m = (size_t)c->block_scales;
    memcpy(c->kscale + (size_t)dst * m, c->kscale + (size_t)src * m, m * sizeof(float));
    memcpy(c->vscale + (size_t)dst * m, c->vscale + (size_t)src * m, m * sizeof(float));
  }
  memcpy(c->pos + (size_t)dst * (size_t)c->bs, c->pos + (size_t)src * (size_t)c->bs,
         sizeof(int32_t) * (size_t)c->bs);
}

rove_status rove_paged_seq_create(rove_paged_cache *c, int32_t *seq) {
  if (!c || !seq) return ROVE_ERR_INVALID_ARGUMENT;
  const int32_t s = free_slot(c);
  if (s < 0) return ROVE_ERR_POOL_EXHAUSTED;
  c->seqs[s] = (paged_seq){.live = 1};
  *seq = s;
  return ROVE_OK;
}

rove_status rove_paged_seq_fork(rove_paged_cache *c, int32_t parent, int32_t *child) {
  const paged_seq *pa = get_seq(c, parent);
  if (!pa || !child) return ROVE_ERR_INVALID_ARGUMENT;
  const int32_t s = free_slot(c);
  if (s < 0) return ROVE_ERR_POOL_EXHAUSTED;
  paged_seq q = {.live = 1, .angles = pa->angles, .len = pa->len, .nb = pa->nb};
  if (!reserve(&q, pa->nb)) return ROVE_ERR_OUT_OF_MEMORY;
  for (int32_t i = 0; i < pa->nb; i++) {
    q.table[i] = pa->table[i];
    c->ref[q.table[i]]++;
  }
  c->seqs[s] = q;
  *child = s;
  return ROVE_OK;
}

rove_status rove_paged_truncate(rove_paged_cache *c, int32_t seq, int32_t length) {
  paged_seq *q = get_seq(c, seq);
  if (!q || length < 0 || length > q->len) return ROVE_ERR_INVALID_ARGUMENT;
  const int32_t nb = length > 0 ? ((length - 1) >> c->shift) + 1 : 0;
  while (q->nb > nb) drop_block(c, q->table[--q->nb]);
  q->len = length;
  return ROVE_OK;
}

rove_status rove_paged_seq_free(rove_paged_cache *c, int32_t seq) {
  paged_seq *q = get_seq(c, seq);
  if (!q) return ROVE_ERR_INVALID_ARGUMENT;
  rove_paged_truncate(c, seq, 0);
  free(q->table);
  *q = (paged_seq){0};
  return ROVE_OK;
}

int32_t rove_paged_seq_length(const rove_paged_cache *c, int32_t seq) {
  const paged_seq *q = get_seq(c, seq);
  return q ? q->len : -1;
}

rove_status rove_paged_seq_block_table(const rove_paged_cache *c, int32_t seq, int32_t *table,
                                       int32_t cap, int32_t *n) {
  const paged_seq *q = get_seq(c, seq);
  if (!q || !n || (q->nb > 0 && !table) || cap < q->nb) return ROVE_ERR_INVALID_ARGUMENT;
  if (q->nb > 0) memcpy(table, q->table, sizeof(int32_t) * (size_t)q->nb);
  *n = q->nb;
  return ROVE_OK;
}

/* Position of token j of sequence q. */
static int32_t *token_pos(const rove_paged_cache *c, const paged_seq *q, int64_t j) {
  return c->pos + (int64_t)q->table[j >> c->shift] * c->bs + (j & (c->bs - 1));
}

rove_status rove_paged_seq_positions(const rove_paged_cache *c, int32_t seq, int32_t *pos) {
  const paged_seq *q = get_seq(c, seq);
  if (!q || (!pos && q->len > 0)) return ROVE_ERR_INVALID_ARGUMENT;
  for (int64_t j = 0; j < q->len; j++) pos[j] = *token_pos(c, q, j);
  return ROVE_OK;
}

/* ---- append ------------------------------------------------------------------------------ */

/* The new tokens [len, len + n) of one sequence are cut into pieces at every multiple of
 * piece = min(block_size, ROVE_CACHE_CHUNK) rows: a piece lies in one block. One task per
 * piece: its table rows, then every KV head's K and V rotated into the block. */
typedef struct {
  rove_paged_cache *c;
  const paged_seq *q;
  int32_t n, piece;
  const void *k, *v;
  int64_t ks, vs;
  int32_t in_type;
  const double *angles; /* NULL, or [n][n_kv_heads][half] */
  const int32_t *newpos; /* [n] */
  int64_t tab_w;        /* table floats per token: half, or n_kv_heads * half with angles */
  float *tab;           /* per thread: cos [piece][tab_w], sin, then fp32 rows [piece][d] */
  int64_t thread_floats;
  int *bad;             /* [task] */
} append_ctx;

static void append_task(int64_t t, int tid, void *vctx) {
  append_ctx *a = vctx;
  rove_paged_cache *c = a->c;
  const rove_plan *p = c->p;
  const int32_t d = p->cfg.head_dim, half = p->half, hkv = p->cfg.n_kv_heads;
  const int64_t len = a->q->len, P = a->piece, w = a->tab_w;
  const int64_t lo = (len / P + t) * P > len ? (len / P + t) * P : len; /* first token */
  const int64_t hi = (len / P + t + 1) * P < len + a->n ? (len / P + t + 1) * P : len + a->n;
  const int64_t n = hi - lo, i0 = lo - len; /* rows; first source row */
  float *cs = a->tab + (int64_t)tid * a->thread_floats, *sn = cs + P * w, *rowbuf = sn + P * w;
  if (a->angles)
    rove_angle_table(p->kern, cs, sn, a->angles + i0 * w, n * w);
  else
    rove_rope_table(cs, sn, p->inv_freq, half, p->rope_step, a->newpos + i0, 0, n);
  const int64_t blk = a->q->table[lo >> c->shift], row = lo & (c->bs - 1);
  const uint32_t rot = p->cfg.rotate;
  const int on_k = (rot & ROVE_ROTATE_K) != 0, on_v = (rot & ROVE_ROTATE_V) != 0;
  for (int32_t h = 0; h < hkv; h++) {
    const int64_t off = a->angles ? (int64_t)h * half : 0;
    const rove_rot rk = rove_plan_rot(p, on_k ? cs + off : NULL, on_k ? sn + off : NULL, w);
    const rove_rot rv = rove_plan_rot(p, on_v ? cs + off : NULL, on_v ? sn + off : NULL, w);
    const int64_t dst = blk * c->block_elems + ((int64_t)h * c->bs + row) * d;
    const int64_t esz = rove_dtype_size(a->in_type);
    const char *xk = (const char *)a->k + (i0 * a->ks + (int64_t)h * d) * esz;
    const char *xv = (const char *)a->v + (i0 * a->vs + (int64_t)h * d) * esz;
    a->bad[t] |= rove_cache_store(p, c->type, c->k, c->kscale, dst, xk, a->in_type, a->ks, n,
                                  &rk, (float)p->attn_factor, rowbuf);
    a->bad[t] |= rove_cache_store(p, c->type, c->v, c->vscale, dst, xv, a->in_type, a->vs, n,
                                  &rv, 1.0f, rowbuf);
  }
}

rove_status rove_paged_append(rove_paged_cache *c, int32_t seq, int32_t n_tokens, const void *k,
                              int64_t k_stride, const void *v, int64_t v_stride,
                              rove_dtype in_type, const int32_t *pos, const double *angles) {
  paged_seq *q = get_seq(c, seq);
  if (!q || !k || !v || n_tokens <= 0 || !rove_dtype_is_tensor(in_type))
    return ROVE_ERR_INVALID_ARGUMENT;
  const rove_plan *p = c->p;
  const int64_t width = (int64_t)p->cfg.n_kv_heads * p->cfg.head_dim;
  const int64_t tab_w = angles ? (int64_t)p->cfg.n_kv_heads * p->half : p->half;
  int64_t ks, vs, ek, ev, na;
  rove_status st = rove_tensor_extent(k_stride, width, n_tokens, &ks, &ek);
  if (st == ROVE_OK) st = rove_tensor_extent(v_stride, width, n_tokens, &vs, &ev);
  if (st != ROVE_OK) return st;
  if (!rove_mul_i64(n_tokens, tab_w, &na) || (int64_t)q->len + n_tokens > INT32_MAX)
    return ROVE_ERR_SIZE_OVERFLOW;
  if (q->len > 0 && q->angles != (angles != NULL)) return ROVE_ERR_INVALID_ARGUMENT; /* mixed */
  if (angles && !rove_angles_finite(angles, na)) return ROVE_ERR_INVALID_ARGUMENT;
  /* positions, then the blocks: new ones, and a copy of a shared partly filled last one */
  const int64_t next = q->len ? (int64_t)*token_pos(c, q, q->len - 1) + 1 : 0;
  if (!pos && next + n_tokens - 1 > INT32_MAX) return ROVE_ERR_SIZE_OVERFLOW;
  const int32_t nb = (int32_t)((((int64_t)q->len + n_tokens - 1) >> c->shift) + 1);
  const int cow = (q->len & (c->bs - 1)) != 0 && c->ref[q->table[q->nb - 1]] > 1;
  if (nb - q->nb + cow > c->n_free) return ROVE_ERR_POOL_EXHAUSTED;
  const int32_t piece = c->bs < ROVE_CACHE_CHUNK ? c->bs : ROVE_CACHE_CHUNK;
  const int64_t tasks = ((int64_t)q->len + n_tokens - 1) / piece - q->len / piece + 1;
  const int32_t threads = rove_team_size(p->cfg.n_threads, tasks);
  const int typed = c->type != ROVE_DTYPE_F32 || in_type != ROVE_DTYPE_F32;
  const int64_t per_thread = 2 * piece * tab_w + (typed ? (int64_t)piece * p->cfg.head_dim : 0);
  float *table = rove_alloc((size_t)threads * (size_t)per_thread * sizeof(float));
  int32_t *newpos = malloc(sizeof(int32_t) * (size_t)n_tokens);
  int *bad = calloc((size_t)tasks, sizeof(int));
  if (!table || !newpos || !bad || !reserve(q, nb)) {
    rove_free(table), free(newpos), free(bad);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  for (int64_t i = 0; i < n_tokens; i++) newpos[i] = pos ? pos[i] : (int32_t)(next + i);
  /* nothing can fail but a value the type cannot hold, which is rolled back below */
  const int32_t old_nb = q->nb, old_last = q->nb ? q->table[q->nb - 1] : -1;
  if (cow) {
    const int32_t b = take_block(c);
    copy_block(c, b, old_last);
    q->table[q->nb - 1] = b;
  }
  while (q->nb < nb) q->table[q->nb++] = take_block(c);
  for (int64_t i = 0; i < n_tokens; i++) *token_pos(c, q, q->len + i) = newpos[i];
  append_ctx a = {c, q, n_tokens, piece, k, v, ks, vs, in_type, angles, newpos, tab_w, table,
                  per_thread, bad};
  rove_parallel_for(p->cfg.n_threads, tasks, append_task, &a);
  int any = 0;
  for (int64_t t = 0; t < tasks; t++) any |= bad[t];
  if (any) { /* back to the blocks the sequence had; its rows past len were scratch */
    while (q->nb > old_nb) drop_block(c, q->table[--q->nb]);
    if (cow) {
      drop_block(c, q->table[q->nb - 1]);
      q->table[q->nb - 1] = old_last;
    }
    st = ROVE_ERR_INVALID_ARGUMENT;
  } else {
    if (cow) drop_block(c, old_last); /* the sequence now holds the copy instead */
    q->len += n_tokens;
    q->angles = angles != NULL;
  }
  rove_free(table), free(newpos), free(bad);
  return st;
}

/* ---- shift ----------------------------------------------------------------------------- */

/* Rotate tokens [start, end) of sequence q in buf (K or V) by R_delta, block by block
 * (rove_cache_rotate; sink set: the check pass, nothing stored). */
static int rotate_range(const rove_paged_cache *c, const paged_seq *q, void *buf, float *scale,
                        int64_t start, int64_t end, const rove_cache_shift_ws *w, void *sink) {
  const int32_t d = c->p->cfg.head_dim, hkv = c->p->cfg.n_kv_heads;
  int bad = 0;
  for (int64_t j = start, n; j < end; j += n) {
    const int64_t row = j & (c->bs - 1), left = c->bs - row;
    n = end - j < left ? end - j : left;
    if (n > ROVE_CACHE_CHUNK) n = ROVE_CACHE_CHUNK;
    const int64_t blk = q->table[j >> c->shift];
    for (int32_t h = 0; h < hkv; h++) {
      const int64_t e = blk * c->block_elems + ((int64_t)h * c->bs + row) * d;
      bad |= rove_cache_rotate(c->p, c->type, buf, scale, e, n, &w->r, w->rowbuf, sink);
    }
  }
  return bad;
}

rove_status rove_paged_shift(rove_paged_cache *c, int32_t seq, int32_t start, int32_t end,
                             int32_t delta) {
  paged_seq *q = get_seq(c, seq);
  if (!q || start < 0 || start > end || end > q->len) return ROVE_ERR_INVALID_ARGUMENT;
  if (q->len > 0 && q->angles) return ROVE_ERR_UNSUPPORTED; /* no R_delta for angle rows */
  for (int64_t j = start; j < end; j++) {
    const int64_t np = (int64_t)*token_pos(c, q, j) + delta;
    if (np < INT32_MIN || np > INT32_MAX) return ROVE_ERR_SIZE_OVERFLOW;
  }
  if (start == end || delta == 0) return ROVE_OK;
  const int32_t b0 = start >> c->shift, b1 = (end - 1) >> c->shift;
  int32_t shared = 0;
  for (int32_t b = b0; b <= b1; b++) shared += c->ref[q->table[b]] > 1;
  if (shared > c->n_free) return ROVE_ERR_POOL_EXHAUSTED;
  rove_cache_shift_ws w;
  if (!rove_cache_shift_begin(c->p, c->type, delta, &w)) return ROVE_ERR_OUT_OF_MEMORY;
  const int on_k = (c->p->cfg.rotate & ROVE_ROTATE_K) != 0, on_v = (c->p->cfg.rotate & ROVE_ROTATE_V) != 0;
  /* typed: check that every rotated row still fits (F16 near 65504) before any change */
  if (w.sink && ((on_k && rotate_range(c, q, c->k, c->kscale, start, end, &w, w.sink)) ||
                 (on_v && rotate_range(c, q, c->v, c->vscale, start, end, &w, w.sink)))) {
    rove_cache_shift_end(&w);
    return ROVE_ERR_INVALID_ARGUMENT;
  }
  for (int32_t b = b0; b <= b1; b++) /* copy-on-write: the other holders keep their rows */
    if (c->ref[q->table[b]] > 1) {
      const int32_t nb = take_block(c);
      copy_block(c, nb, q->table[b]);
      drop_block(c, q->table[b]);
      q->table[b] = nb;
    }
  if (on_k) rotate_range(c, q, c->k, c->kscale, start, end, &w, NULL);
  if (on_v) rotate_range(c, q, c->v, c->vscale, start, end, &w, NULL);
  for (int64_t j = start; j < end; j++) *token_pos(c, q, j) += delta;
  rove_cache_shift_end(&w);
  return ROVE_OK;
}

/* ---- attention --------------------------------------------------------------------------- */

rove_status rove_paged_cache_attention_typed(const rove_paged_cache *c, const int32_t *seqs,
                                             const rove_paged_args *a,
                                             const rove_tensor_types *types) {
  /* the cache supplies seq_lens, block_tables and their stride: set ones are refused */
  if (!c || !seqs || !a || a->n_seqs <= 0 || a->seq_lens || a->block_tables || a->max_blocks)
    return ROVE_ERR_INVALID_ARGUMENT;
  const int32_t n = a->n_seqs;
  const int rotates_q = (c->p->cfg.rotate & (ROVE_ROTATE_Q | ROVE_ROTATE_O)) != 0;
  for (int32_t s = 0; s < n; s++) {
    const paged_seq *q = get_seq(c, seqs[s]);
    /* keys rotated by angles need queries rotated by angles */
    if (!q || (q->angles && q->len > 0 && !a->q_angles && rotates_q))
      return ROVE_ERR_INVALID_ARGUMENT;
  }
  const int32_t **tables = malloc(sizeof *tables * (size_t)n);
  int32_t *lens = malloc(sizeof *lens * (size_t)n);
  if (!tables || !lens) {
    free(tables), free(lens);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  for (int32_t s = 0; s < n; s++) {
    tables[s] = c->seqs[seqs[s]].table;
    lens[s] = c->seqs[seqs[s]].len;
  }
  rove_paged_kv kv;
  rove_paged_cache_view(c, &kv);
  const rove_status st = rove_paged_run(c->p, &kv, a, types, tables, lens);
  free(tables), free(lens);
  return st;
}

rove_status rove_paged_cache_attention(const rove_paged_cache *c, const int32_t *seqs,
                                       const rove_paged_args *a) {
  return rove_paged_cache_attention_typed(c, seqs, a, NULL);
}
