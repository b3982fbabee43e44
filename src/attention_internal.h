/* SPDX-License-Identifier: MIT */
/* Internal: the state of one rove_attention_forward call (see attention.c). */
#ifndef ROVE_ATTENTION_INTERNAL_H
#define ROVE_ATTENTION_INTERNAL_H

#include "kernels/mask.h"
#include "plan.h"

#define ROVE_PACK_TILES 4   /* key tiles per pack task */
#define ROVE_TABLE_ROWS 256 /* table rows per table task */
/* Split-KV: when there are fewer than ROVE_SPLIT_TASKS query tiles in a call (decode),
 * the keys of each are split into up to that many / tiles parts of >= ROVE_SPLIT_MIN_TILES
 * key tiles each, merged exactly by their LSE. The split depends only on the shapes,
 * never on the thread count. */
#define ROVE_SPLIT_TASKS 64
#define ROVE_SPLIT_MIN_TILES 4

typedef struct rove_fwd {
  const rove_plan *p;
  const rove_attention_args *a;
  int32_t batch;
  int64_t q_len, kv_len;
  int64_t lse_hstride;             /* floats between a batch row's heads' LSE rows: q_len
                                      (rove_attention_varlen: its total_q) */
  int64_t qs, ks, vs, os;          /* token strides, resolved */
  /* Keys and values: the caller's tensors, or a KV cache's (already rotated: kv_rotated,
   * no key tables, k_mul 1). Token j of KV head h of batch b starts at
   * k + b * k_bstride + h * kv_hstride + j * ks (v likewise with v_bstride and vs). */
  const void *k, *v;               /* rows of k_type / v_type elements */
  int64_t k_bstride, v_bstride, kv_hstride;
  /* elements spanned by the caller's q, k, v and out (from element 0 to the end of the
   * last row; checked by rove_fwd_init; k and v 0 with a cache) */
  int64_t q_extent, k_extent, v_extent, o_extent;
  int kv_rotated;
  /* A paged cache (batch 1): token j lives in block blocks[j >> block_shift], row
   * j & (block_size - 1); a block holds every KV head, block_stride elements apart. NULL:
   * contiguous as above. */
  const int32_t *blocks;
  int32_t block_shift;
  int64_t block_stride;
  /* Element types (rove_dtype) of q, k, v, out: the caller's (rove_attention_forward_typed;
   * F32, BF16, F16) or a cache's (K and V also Q8). Strides and offsets count elements. */
  int32_t q_type, k_type, v_type, out_type;
  const float *kscale, *vscale;    /* Q8: rove_q8_blocks(d) scales per stored row */
  float k_mul;                     /* multiplies the rotated dims of K: m, or 1 if stored */
  int64_t n_qt, n_kt, kv_pad;      /* query tiles, key tiles, kv_len rounded up to tiles */
  int64_t n_kchunks;               /* pack tasks per (batch, kv head) */
  /* Positions: row b starts at pos + b * bstride (bstride 0: shared default positions). */
  const int32_t *qpos, *kpos;
  int64_t qpos_bstride, kpos_bstride;
  /* cos/sin tables, [rows][tab_w]: a row per token of tab_w = half floats for positions,
   * or tab_w = n_kv_heads * half for explicit angles ([token][kv head][half], angles = 1).
   * The batch stride is 0 when positions are shared. */
  float *kcos, *ksin, *qcos, *qsin;
  int64_t tab_w;
  int angles;
  int64_t ktab_bstride, qtab_bstride;  /* floats */
  int64_t k_tab_batches, q_tab_batches; /* 0 when a table is not needed or is a view */
  int64_t n_ktab_tasks, n_tables;
  /* Workspace. */
  float *kpack, *vpack;            /* [batch*Hkv][kv_pad*d] each */
  int32_t *kmin, *kmax;            /* [batch][n_kt] position range of each key tile */
  float *scratch;                  /* n_threads * scratch_floats */
  int64_t scratch_floats;
  int64_t n_splits;                /* key splits per query tile (1 = no split) */
  int streaming;                   /* decode: pack K/V tiles on the fly (attention_decode.c) */
  int32_t team;                    /* scratch for at least this many threads (0: own need) */
  char *ws_block;                  /* the caller's workspace (rove_fwd_init_team), or NULL */
  size_t *ws_bytes;                /* set: the caller sizes / provides the workspace */
  float *partial;                  /* split-KV: [qtask][split] of (o [pr][d], m [pr], l [pr]) */
  int64_t partial_rows;            /* pr: tile_q, or q_len on the rows path (slots packed) */
  int64_t partial_floats;          /* one slot, pr d + 2 pr rounded up to 16 */
  void *block;                     /* the whole workspace, from the plan's pool */
  size_t block_bytes;
  /* ---- decode (attention_decode.c; chosen by choose_schedule) ---- */
  int rows;                        /* streaming through attn_rows: group * q_len <= ROVE_ROWS_MAX */
} rove_fwd;

static inline void rove_pos_range(const int32_t *pos, int64_t n, int32_t *lo, int32_t *hi) {
  int32_t a = pos[0], b = pos[0];
  for (int64_t i = 1; i < n; i++) {
    a = pos[i] < a ? pos[i] : a;
    b = pos[i] > b ? pos[i] : b;
  }
  *lo = a;
  *hi = b;
}

/* Keys and values held by a KV cache (rotated, with their positions): token j of head h
 * of batch b at k + b * bstride + h * hstride + j * tstride (v likewise). */
typedef struct rove_kv_view {
  const void *k, *v;       /* elements of type (rove_dtype) */
  int64_t bstride, hstride, tstride; /* in elements */
  int32_t type;
  const float *kscale, *vscale; /* Q8: the scales of the row at element e: e / d * blocks */
  int32_t len;             /* valid tokens per batch */
  const int32_t *pos;      /* positions: token j of batch b at pos[b * pos_bstride + j] */
  int64_t pos_bstride;
  /* Paged (batch 1; NULL: contiguous): token j in block blocks[j >> block_shift], row
   * j & (2^block_shift - 1), at k + blocks[..] * block_stride + h * hstride + row *
   * tstride; pos is then the sequence's positions gathered into one array. */
  const int32_t *blocks;
  int32_t block_shift;
  int64_t block_stride;
} rove_kv_view;

/* Resolve a token stride (0 = the dense width; below it ROVE_ERR_INVALID_ARGUMENT) and the
 * element extent of rows tokens of width elements (checked: ROVE_ERR_SIZE_OVERFLOW, also
 * when the extent in floats would not fit int64 bytes). */
rove_status rove_tensor_extent(int64_t stride, int64_t width, int64_t rows, int64_t *resolved,
                               int64_t *extent);

/* ROVE_OK for NULL or n_heads finite sinks, else ROVE_ERR_INVALID_ARGUMENT. */
rove_status rove_check_sinks(const rove_plan *p, const float *sinks);

/* Validate p and a (a->k/v/kv_len/kv_pos, or kv when non-NULL) with the element types of
 * the caller's tensors (types NULL: all fp32; with kv its k and v are not read), compute
 * sizes (checked), allocate the workspace. On failure nothing is allocated and no output
 * was touched. */
rove_status rove_fwd_init(rove_fwd *f, const rove_plan *p, const rove_attention_args *a,
                          const rove_kv_view *kv, const rove_tensor_types *types);
/* Run the phases of an initialised call and release it. */
void rove_fwd_run(rove_fwd *f);
/* rove_fwd_init with per-thread scratch for at least `team` threads (0: what the call's
 * own tasks can use), for calls whose tasks run in one team with other calls' tasks.
 * With `bytes` set the workspace is the caller's: block NULL only validates the call and
 * stores the workspace size in *bytes (nothing is allocated, f cannot run); a block of
 * at least that size is used as the workspace (never returned to the pool). */
rove_status rove_fwd_init_team(rove_fwd *f, const rove_plan *p, const rove_attention_args *a,
                               const rove_kv_view *kv, const rove_tensor_types *types,
                               int32_t team, void *block, size_t *bytes);
/* Run n initialised calls as one: each phase's tasks of every call in one parallel loop
 * (the calls were initialised with rove_fwd_init_team for the plan's team); releases their
 * workspaces. Each call's results are those of rove_fwd_run. */
void rove_fwd_run_many(rove_fwd *f, int32_t n);
void rove_fwd_release(rove_fwd *f);
/* n batch-1 calls (args[s]; kv NULL or [n] views; types NULL or the tensors' element
 * types, as rove_fwd_init) validated and given one workspace before any runs, then run in
 * groups (attention_calls.c); call s's LSE rows go to lse + cu_q[s] with total_q floats
 * between heads (lse NULL: none). A call without queries is skipped, one without keys
 * gets out 0 and LSE -inf. */
rove_status rove_fwd_calls(const rove_plan *p, int32_t n, rove_attention_args *args,
                           const rove_kv_view *kv, const rove_tensor_types *types, float *lse,
                           const int32_t *cu_q, int64_t total_q);
/* Streaming decode (attention_decode.c): one (batch, key split) task of rove_fwd_run. */
void rove_fwd_stream_task(int64_t t, int tid, void *vctx);
/* Rotation of rows from table c/s at row offset off (floats), for KV head kvh. */
static inline rove_rot rove_fwd_rot(const rove_fwd *f, const float *c, const float *s,
                                    int64_t off, int64_t kvh, int on) {
  rove_rot r = rove_plan_rot(f->p, NULL, NULL, f->tab_w);
  if (on) {
    off += f->angles ? kvh * f->p->half : 0;
    r.cos = c + off;
    r.sin = s + off;
  }
  return r;
}
/* Element offsets of the K and V rows of token j of KV head h in batch b. */
static inline int64_t rove_fwd_kelem(const rove_fwd *f, int64_t b, int64_t h, int64_t j) {
  if (f->blocks)
    return (int64_t)f->blocks[j >> f->block_shift] * f->block_stride + h * f->kv_hstride +
           (j & (((int64_t)1 << f->block_shift) - 1)) * f->ks;
  return b * f->k_bstride + h * f->kv_hstride + j * f->ks;
}
static inline int64_t rove_fwd_velem(const rove_fwd *f, int64_t b, int64_t h, int64_t j) {
  if (f->blocks) return rove_fwd_kelem(f, b, h, j); /* a pool's K and V share the layout */
  return b * f->v_bstride + h * f->kv_hstride + j * f->vs;
}
/* How many of the n rows from token j are contiguous in memory (to the end of j's block
 * in a paged cache; all n otherwise). */
static inline int64_t rove_fwd_run_len(const rove_fwd *f, int64_t j, int64_t n) {
  if (!f->blocks) return n;
  const int64_t left = ((int64_t)1 << f->block_shift) - (j & (((int64_t)1 << f->block_shift) - 1));
  return n < left ? n : left;
}
/* The K and V rows of tokens j.. of KV head h in batch b (token stride ks / vs), when they
 * are fp32. */
static inline const float *rove_fwd_krow(const rove_fwd *f, int64_t b, int64_t h, int64_t j) {
  return (const float *)f->k + rove_fwd_kelem(f, b, h, j);
}
static inline const float *rove_fwd_vrow(const rove_fwd *f, int64_t b, int64_t h, int64_t j) {
  return (const float *)f->v + rove_fwd_velem(f, b, h, j);
}
/* Element e of x of type t, and the Q8 scales of the row at element e (NULL for other
 * types). */
static inline const void *rove_fwd_raw(const void *x, int32_t t, int64_t e) {
  return (const char *)x + e * rove_dtype_size(t);
}
static inline const float *rove_fwd_scale(const rove_fwd *f, const float *scale, int64_t e) {
  const int32_t d = f->p->cfg.head_dim;
  return scale ? scale + e / d * rove_q8_blocks(d) : NULL;
}
/* n rows of K (v = 0) or V (v = 1) from token j0 of KV head h of batch b as fp32 rows,
 * *stride floats apart: fp32 rows in place, typed rows widened into buf [n][d]. */
static inline const float *rove_fwd_rows_f32(const rove_fwd *f, int v, int64_t b, int64_t h,
                                             int64_t j0, int64_t n, float *buf, int64_t *stride) {
  const int64_t e = v ? rove_fwd_velem(f, b, h, j0) : rove_fwd_kelem(f, b, h, j0);
  const void *x = v ? f->v : f->k;
  const int32_t t = v ? f->v_type : f->k_type;
  *stride = v ? f->vs : f->ks;
  if (t == ROVE_DTYPE_F32 && rove_fwd_run_len(f, j0, n) == n) return (const float *)x + e;
  /* typed rows, or fp32 rows spread over blocks of a paged cache: gathered block by block */
  const int32_t d = f->p->cfg.head_dim;
  for (int64_t i = 0, r; i < n; i += r) {
    r = rove_fwd_run_len(f, j0 + i, n - i);
    const int64_t ei = v ? rove_fwd_velem(f, b, h, j0 + i) : rove_fwd_kelem(f, b, h, j0 + i);
    f->p->kern->to_f32(buf + i * d, d, rove_fwd_raw(x, t, ei), *stride,
                       rove_fwd_scale(f, v ? f->vscale : f->kscale, ei), r, d, t);
  }
  *stride = d;
  return buf;
}

/* Rotation of key rows j0.. of KV head kvh in batch b (on = whether it is enabled). */
static inline rove_rot rove_fwd_krot(const rove_fwd *f, int64_t b, int64_t kvh, int64_t j0,
                                     int on) {
  return rove_fwd_rot(f, f->kcos, f->ksin, b * f->ktab_bstride + j0 * f->tab_w, kvh,
                      on && !f->kv_rotated);
}
/* Rotation of query rows i0.. of batch b, for a query head of KV head kvh. */
static inline rove_rot rove_fwd_qrot(const rove_fwd *f, int64_t b, int64_t kvh, int64_t i0,
                                     int on) {
  return rove_fwd_rot(f, f->qcos, f->qsin, b * f->qtab_bstride + i0 * f->tab_w, kvh, on);
}

#endif
