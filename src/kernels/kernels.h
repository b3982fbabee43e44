/* SPDX-License-Identifier: MIT */
/* The kernel table: what every ISA provides to the drivers (one table per ISA, listed in
 * the ISA registry, src/isa_registry.c).
 *
 * The driver (src/attention.c) works per (batch, kv head) and per (batch, head, query
 * tile); the kernels see one head at a time:
 *
 *   (1) rotate / pack_k : rotate-and-pack rows of Q (scale and m folded in), K and V.
 *   (2) attn_tile       : S = Q K^T on one tile, mask, online softmax update, O += P V.
 *   (3) finish          : O / l, inverse rotation by the query position, store, LSE.
 *   (4) attn_rows       : decode: a few query rows against row-major K/V read in place.
 *
 * Memory layouts (floats, row-major):
 *   packed Q   [nq][d]                      (driver scratch, one query tile)
 *   packed V   [kv_pad][d]                  (rotated V of one (batch, kv head); kv_pad =
 *                                           kv_len rounded up to tile_kv, rows past
 *                                           kv_len are zero, so a tile may read whole
 *                                           tile_kv rows of V)
 *   packed K   ceil(kv_len/tile_kv) tiles of tile_kv*d floats each; the layout inside a
 *              tile is private to the ISA (scalar: [tile_kv][d] rows). Rows past kv_len
 *              are zero. Tile t starts at t*tile_kv*d.
 *   O acc      [tile_q][d], row max m[tile_q], row sum l[tile_q]: o = sum_j p_j v_j and
 *              l = sum_j p_j with p_j = exp(s_j - m), so o / l is the output and m + ln l
 *              the LSE for any m. m is the maximum of the row's visible scores so far, or
 *              (the lazy maximum of the x86 tiles) a value at most ROVE_SOFTMAX_SLACK
 *              below it: a row whose visible scores in a tile stay within m + SLACK
 *              keeps m (no rescale of o and l, p <= e^SLACK); one that goes past takes
 *              m = its maximum. Decided row by row: a row's result depends only on the
 *              keys it sees.
 *   cos / sin  [n][r/2] per token row, float (angles formed in double, see rope_table.c)
 *
 * Alignment: buffers the driver owns (packed Q/K/V, o/m/l, scratch) start on 64-byte
 * boundaries when tile_q and tile_kv are multiples of 16. User tensors (rotate's src and
 * dst rows, finish's out, lse) and the cos/sin rows have no alignment guarantee.
 */
#ifndef ROVE_KERNELS_H
#define ROVE_KERNELS_H

#include <stdint.h>

#include "rove.h"
#include "dtype.h"
#include "attn_bwd_kernels.h"
#include "gla_kernels.h"
#include "selective_kernels.h"

/* Rotation of n token rows: row i uses cos[i*stride + k], sin[i*stride + k] (k < half).
 * stride 0 means half (a table per token); explicit angles per (token, KV head) use
 * stride n_kv_heads * half.
 *
 * The r = 2*half rotated dims of a row of d floats are the block [first, first + r)
 * (rove_rotary_placement: first = 0 for ROVE_ROTARY_FIRST, d - r for ROVE_ROTARY_LAST);
 * the pairs of rove_pairing are formed inside that block, i.e. pair k of HALF is
 * (x[first + k], x[first + k + half]) and of INTERLEAVED (x[first + 2k], x[first + 2k + 1]).
 * Dims [0, first) and [first + r, d) pass through. Every kernel handles a row as the
 * pass-through run [0, first) followed by the FIRST-placed row x + first of d - first
 * floats, so first == 0 is exactly the former code path. first + r <= d. */
typedef struct rove_rot {
  const float *cos, *sin; /* NULL: no rotation (every dim is multiplied by pass_mul) */
  int32_t half;           /* r/2 */
  int32_t pairing;        /* rove_pairing */
  int64_t stride;         /* floats between rows' tables; 0 = half */
  int32_t first;          /* first rotated dim: 0 (FIRST) or d - r (LAST); unread when cos is NULL */
  int32_t cached;         /* 1: the source rows are in cache or already requested by the caller
                             (GLA's token runs, scratch rows): rotate prefetches nothing */
} rove_rot;
static inline int64_t rove_rot_stride(const rove_rot *r) { return r->stride ? r->stride : r->half; }

/* dst_i = rot_mul * R_i^{+-1} src_i on the r rotated dims [first, first + r), pass_mul *
 * src_i on the other dims (when rot->cos is NULL every dim gets pass_mul). dst == src is allowed (in place). */
typedef void (*rove_rotate_fn)(float *dst, int64_t dst_stride, const float *src,
                               int64_t src_stride, int64_t n, int32_t d, const rove_rot *rot,
                               float rot_mul, float pass_mul, int inverse);

/* Rotate K rows like rove_rotate_fn (inverse 0, pass_mul 1) into the packed-K layout,
 * zero-filling rows n .. round_up(n, tile_kv)-1. */
typedef void (*rove_pack_k_fn)(float *dst, const float *src, int64_t src_stride, int64_t n,
                               int32_t d, const rove_rot *rot, float rot_mul);

/* The lazy maximum (O acc above): e^4 ~ 55 is the most a p may grow to, which costs that
 * factor of headroom below FLT_MAX in o and l (a row's sum of |v| over its visible keys
 * must stay below FLT_MAX / 55 ~ 6e36 for a finite output, docs/DESIGN.md), and leaves
 * the row maximum, its reductions and the rescale off the softmax's serial chain on
 * nearly every tile after the first. */
#define ROVE_SOFTMAX_SLACK 4.0f

/* One flash tile: nq packed query rows against nk keys starting at a packed K tile. */
typedef struct rove_tile_args {
  const float *q;       /* [nq][d] (tile_q rows are allocated; rows past nq are garbage) */
  const float *k;       /* packed K tile (tile_kv rows, zero past nk) */
  const float *v;       /* [nk][d] rotated V rows of this tile (tile_kv rows readable, zero past nk) */
  int32_t nq, nk, d;
  /* Positions of the nq queries / nk keys; when mask == 0 every pair is visible and the
   * kernel may ignore them. */
  const int32_t *q_pos, *k_pos;
  int32_t mask, causal, window;
  float softcap;        /* 0 = none */
  float *o, *m, *l;     /* accumulators: [nq][d], [nq], [nq] (m starts at -inf, l at 0;
                           tile_q rows allocated) */
  float *scratch;       /* tile_q * tile_kv floats */
} rove_tile_args;
typedef void (*rove_attn_tile_fn)(const rove_tile_args *t);

/* Decode: a few query rows against keys and values read in place (row-major, any token
 * stride), with the online softmax of attn_tile (same o, m, l contract). The keys are a KV
 * cache's rows (already m R_p k and R_p v) or the caller's, rotated as they are read.
 *   q      [nq][d] query rows, rotated and scaled (m * scale folded in), contiguous
 *   k, v   key j at k + j * ks, value j at v + j * vs (no alignment; only the d floats
 *          of each of the nk rows are read); with blocks, row R(j) of a paged pool
 *   krot, vrot  NULL, or the rotation of the rows (typed rows are widened first): key j is then used as
 *          k_mul R_j k_j on the rotated dims (k_j on the others) and value j as R_j v_j,
 *          R_j from row j of the table (as rove_rotate_fn with inverse 0; cos NULL: that
 *          tensor is used as stored)
 * Kernels walk the keys in blocks of their own choosing (the result is the same online
 * softmax up to rounding); nq <= ROVE_ROWS_MAX, any nk >= 1, any d. */
#define ROVE_ROWS_MAX 16   /* query rows per call */
#define ROVE_ROWS_BLOCK 64 /* keys per softmax block (scratch row length) */
/* Scratch floats of a call with head dim d: probabilities, then rotated K and V blocks. */
#define ROVE_ROWS_SCRATCH(d) (ROVE_ROWS_MAX * ROVE_ROWS_BLOCK + 2 * ROVE_ROWS_BLOCK * (int64_t)(d))
typedef struct rove_rows_args {
  const float *q;
  /* K and V rows of types k_type / v_type (rove_dtype): fp32 rows are read in place;
   * other types are widened as they are read (k_scale / v_scale: the Q8 scales of row 0,
   * ceil(d / ROVE_Q8_BLOCK) per row, rows contiguous; Q8 only comes from a cache) */
  const void *k, *v;
  int64_t ks, vs;       /* elements between consecutive keys / values (>= d) */
  /* Paged rows (NULL: key j is row j, as above). Key j of the call is row
   *   R(j) = blocks[J >> block_shift] * block_rows + (J & (2^block_shift - 1)),  J = j_base + j
   * of k and v: K at element R(j) ks of k, V at R(j) vs of v, Q8 scales at
   * R(j) rove_q8_blocks(d) of k_scale / v_scale (a paged pool: blocks of 2^block_shift
   * consecutive tokens, block_rows rows apart). block_shift >= ROVE_ROWS_RUN_SHIFT and
   * j_base % 16 == 0, so every 16 keys of the call from a multiple of 16 lie in one block
   * (rove_rows_row, rove_rows_run). */
  const int32_t *blocks;
  int32_t block_shift, j_base;
  int64_t block_rows;
  int32_t k_type, v_type;
  const float *k_scale, *v_scale;
  int32_t nq, nk, d;
  /* Positions of the nq queries / nk keys; read only when mask != 0 (as in attn_tile). */
  const int32_t *q_pos, *k_pos;
  int32_t mask, causal, window;
  float softcap;        /* 0 = none */
  const rove_rot *krot, *vrot; /* NULL: K / V as stored; else rows 0..nk-1 of a table */
  float k_mul;          /* with krot: multiplies the rotated dims of K (the YaRN m) */
  float *o, *m, *l;     /* accumulators [nq][d], [nq], [nq] (m starts at -inf, l at 0) */
  float *scratch;       /* ROVE_ROWS_SCRATCH(d) floats, 64-byte aligned */
  /* A hint, NULL for none: the first K / V rows (and their Q8 scales) of the call that
   * will follow this one (same types and strides), which a kernel may prefetch while it
   * reads its last block. Never read as data: a wrong hint costs memory traffic, not
   * correctness. */
  const void *k_next, *v_next;
  const float *k_scale_next, *v_scale_next;
  /* With blocks: next_nk > 0 says the call that follows reads keys next_j .. next_j +
   * next_nk - 1 of this call's block table (another KV head of the same pool, or later
   * keys); k_next / v_next (and the scale hints) are then its k / v, row 0 of block 0 of
   * its head as k / v here, and the kernel finds each of its runs through the table.
   * next_j is a multiple of ROVE_ROWS_BLOCK. next_nk = 0: k_next is a first row, as above. */
  int32_t next_j, next_nk;
  /* 1: prefetch at the pace of the reads in every call (the plan's choice for this CPU:
   * Intel cores); 0: the ISA's default (bursts for MHA decode of fp32 rows, faster on a
   * Zen 3 and a Zen 4; paced for GQA groups and typed rows).
   * Never changes a result. */
  int32_t paced;
  /* attn_rows_heads only: request the walk's rows this many bytes ahead of the reads (0:
   * none; see the ISA's rows_heads). Never changes a result. */
  int32_t walk_ahead;
  /* 1: software prefetch into L1 (prefetcht0) instead of L2 (prefetcht2), where the ISA's
   * kernel takes it (AVX-512: the plan's choice on an AMD Zen 5). Never changes a result. */
  int32_t prefetch_l1;
} rove_rows_args;
typedef void (*rove_attn_rows_fn)(const rove_rows_args *t);
/* The same for n_heads KV heads of one paged pool at once (a decode step's heads over a
 * tile of keys): head g (0 <= g < n_heads) reads K and V at element g * head_elems of t->k
 * and t->v (Q8 scales (head_elems / ks) * rove_q8_blocks(d) floats per head on), and owns
 * the query and accumulator rows t->q, t->o + g nq d and t->m, t->l + g nq; keys,
 * positions, blocks, mask and softmax cap are t's for every head. The rows must need no
 * rotation (krot, vrot NULL or without cos) and the prefetch hints are not read. The
 * walk takes each run of keys (a pool block) for every head before the next run, in K
 * and again in V, so a pool's block is read front to back: one stream at a time for the
 * hardware prefetchers, where a call per head keeps four K and four V streams of 16-key
 * blocks open. Results equal n_heads attn_rows calls, one per head, bit for bit. */
typedef void (*rove_attn_rows_heads_fn)(const rove_rows_args *t, int32_t n_heads,
                                        int64_t head_elems);
/* Rows of type `type` that a SIMD attn_rows kernel reads in place when they need no
 * rotation (else it widens them into scratch first): fp32, or whole 8-element vectors. */
#define ROVE_ROWS_IN_PLACE(type, d) ((type) == ROVE_DTYPE_F32 || (d) % 8 == 0)

/* Element conversion of n rows of d elements between fp32 and a rove_dtype (dtype.h has the
 * scalar definitions every ISA matches bit for bit). Typed row j starts at element
 * j * stride of src / dst (bytes = elements * rove_dtype_size; Q8 rows also own
 * rove_q8_blocks(d) fp32 scales at scale + j * rove_q8_blocks(d)).
 *   to_f32   dst[j * dst_stride + i] = stored value (bf16, f16: widened exactly; q8:
 *            (float)q * scale, one rounding)
 *   from_f32 rounds fp32 rows into the type (all rows written); returns 1 when a finite
 *            value rounded to a non-finite one or, for Q8, a value was not finite, else 0
 * ROVE_DTYPE_F32 is a copy. No alignment is assumed. */
typedef void (*rove_to_f32_fn)(float *dst, int64_t dst_stride, const void *src, int64_t stride,
                               const float *scale, int64_t n, int32_t d, int32_t type);
typedef int (*rove_from_f32_fn)(void *dst, int64_t stride, float *scale, const float *src,
                                int64_t src_stride, int64_t n, int32_t d, int32_t type);

/* The smallest paged block of a rows call (rove_rows_args.blocks): 16 keys. */
#define ROVE_ROWS_RUN_SHIFT 4

/* Row R(j) of key j of a rows call (rove_rows_args.blocks; j itself without blocks). */
static inline int64_t rove_rows_row(const rove_rows_args *t, int64_t j) {
  if (!t->blocks) return j;
  const int64_t J = t->j_base + j, mask = ((int64_t)1 << t->block_shift) - 1;
  return (int64_t)t->blocks[J >> t->block_shift] * t->block_rows + (J & mask);
}
/* How many of the n keys from key j are consecutive rows: to the end of j's block (all n
 * without blocks). */
static inline int32_t rove_rows_run(const rove_rows_args *t, int32_t j, int32_t n) {
  if (!t->blocks) return n;
  const int64_t size = (int64_t)1 << t->block_shift;
  const int64_t left = size - (((int64_t)t->j_base + j) & (size - 1));
  return n < left ? n : (int32_t)left;
}

/* For the attn_rows kernels: keys (or values) j0 .. j0 + nb - 1 of a rows call, of type
 * `type`, as fp32 rows *stride floats apart: the stored rows themselves for fp32 rows that
 * are consecutive, else widened (or gathered from their blocks) by the ISA's cvt into
 * scr [nb][d] (stride d; a rotation then runs in place). */
static inline const float *rove_rows_fp32(const rove_rows_args *t, const void *x, int64_t xs,
                                          const float *scale, int32_t type, int32_t j0,
                                          int32_t nb, float *scr, rove_to_f32_fn cvt,
                                          int64_t *stride) {
  if (type == ROVE_DTYPE_F32 && rove_rows_run(t, j0, nb) == nb) {
    *stride = xs;
    return (const float *)x + rove_rows_row(t, j0) * xs;
  }
  const int32_t d = t->d;
  for (int32_t i = 0, n; i < nb; i += n) {
    n = rove_rows_run(t, j0 + i, nb - i);
    const int64_t r = rove_rows_row(t, j0 + i);
    cvt(scr + (int64_t)i * d, d, (const char *)x + r * xs * rove_dtype_size(type), xs,
        scale ? scale + r * rove_q8_blocks(d) : NULL, n, d, type);
  }
  *stride = d;
  return scr;
}

/* Vectorised exp over an array (the exp the ISA's softmax uses, exposed for the accuracy
 * test): dst[i] = exp(src[i]), exp(-inf) = 0, results for src < -87.3 flush to 0 (or are
 * denormal-accurate). dst == src is fine. Scalar: libm expf. */
typedef void (*rove_exp_fn)(float *dst, const float *src, int64_t n);

/* One ISA's kernels: every slot is filled. A SIMD table names the scalar kernel for a slot
 * it does not accelerate (BLIS style: start from the reference, override what is faster).
 *
 * Coupling: tile_q, tile_kv, pack_k and attn_tile change together. pack_k writes K in the
 * ISA's private packed layout of tile_kv keys per tile, attn_tile reads exactly that
 * layout, and the driver sizes the packed K/V, query tiles and scratch from tile_q and
 * tile_kv. rotate, attn_rows, exp, to_f32, from_f32, angle_accum, sincos, pair_grads,
 * phase_dots, gla and attn_bwd are independent of them.
 * The finish of a query tile (O / l, inverse rotation, LSE) is one generic function over
 * the table's rotate slot (rove_finish_f32 below). The one slot that may be NULL is
 * attn_rows_heads: a walk order, not an operation, which the driver takes only where a
 * kernel offers it (else attn_rows head by head). */
typedef struct rove_kernels {
  rove_isa isa;
  int32_t tile_q, tile_kv;
  rove_rotate_fn rotate;
  rove_pack_k_fn pack_k;
  rove_attn_tile_fn attn_tile;
  rove_attn_rows_fn attn_rows;
  /* 1: attn_rows prefetches rove_rows_args.k_next / v_next itself where it reads the rows
   * in place (ROVE_ROWS_IN_PLACE), so the driver need not prefetch the next paged block */
  int32_t rows_next;
  rove_attn_rows_heads_fn attn_rows_heads; /* NULL: none (see above) */
  rove_exp_fn exp;
  rove_to_f32_fn to_f32;
  rove_from_f32_fn from_f32;
  /* Selective RoPE (selective_kernels.h) and gated linear attention (gla_kernels.h). */
  rove_angle_accum_fn angle_accum;
  rove_sincos_fn sincos;
  rove_pair_grads_fn pair_grads; /* the backwards' d angles of a row */
  rove_phase_dots_fn phase_dots; /* the phase network's projections */
  rove_gla_kernels gla;
  /* The backward tile of rove_attention_backward (attn_bwd_kernels.h). */
  rove_attn_bwd_fn attn_bwd;
} rove_kernels;

/* Finish nq rows of a query tile (src/kernels/finish.c, one version for every ISA):
 * out_i = R_i^{-1} (o_i / l_i) through k->rotate (rotation only if rot->cos),
 * lse_i = m_i + ln l_i; a row with l_i == 0 gets 0 and -inf. lse may be NULL (contiguous
 * over i otherwise). Rows of out are out_stride floats apart. sink: NULL, or the head's
 * attention sink, which adds exp(*sink - m_i) to l_i (finish.c). */
void rove_finish_f32(const rove_kernels *k, float *out, int64_t out_stride, float *lse,
                     const float *o, const float *m, const float *l, int32_t nq, int32_t d,
                     const rove_rot *rot, const float *sink);

/* Kernels are named rove_<op>_f32__<isa>. Each ISA declares all of its kernels with this
 * one macro in its folder's kernels-<isa>.h, which every kernel file of the folder
 * includes; its table-<isa>.c defines rove_kernels_<isa>. */
#define ROVE_DECLARE_KERNELS(isa)                                                            \
  void rove_rotate_f32__##isa(float *dst, int64_t dst_stride, const float *src,              \
                              int64_t src_stride, int64_t n, int32_t d, const rove_rot *rot, \
                              float rot_mul, float pass_mul, int inverse);                   \
  void rove_pack_k_f32__##isa(float *dst, const float *src, int64_t src_stride, int64_t n,   \
                              int32_t d, const rove_rot *rot, float rot_mul);                \
  void rove_attn_tile_f32__##isa(const rove_tile_args *t);                                   \
  void rove_attn_rows_f32__##isa(const rove_rows_args *t);                                   \
  void rove_exp_f32__##isa(float *dst, const float *src, int64_t n);                         \
  void rove_to_f32__##isa(float *dst, int64_t dst_stride, const void *src, int64_t stride,   \
                          const float *scale, int64_t n, int32_t d, int32_t type);           \
  int rove_from_f32__##isa(void *dst, int64_t stride, float *scale, const float *src,        \
                           int64_t src_stride, int64_t n, int32_t d, int32_t type);          \
  void rove_angle_accum_f32__##isa(double *c, double *out, const float *phi,                 \
                                   const double *temp, int64_t n);                           \
  void rove_sincos_f32__##isa(float *cos_t, float *sin_t, const double *angles, int64_t n);  \
  void rove_pair_grads_f64__##isa(int32_t half, int32_t first, int interleaved, const float *g, \
                                  const float *y, double *out, double sign);                 \
  void rove_phase_dots_f64__##isa(double *out, int64_t os, const float *m, int64_t ms,       \
                                  int64_t rows, const double *v, int64_t vs, int64_t nt,     \
                                  int64_t n);                                                \
  void rove_gla_chunk_f32__##isa(const rove_gla_chunk *c);                                   \
  void rove_gla_steps_f32__##isa(float *s, float *o, const float *q, const float *k,         \
                                 const float *v, const float *g, int32_t n, int32_t dk,      \
                                 int32_t dv, float *work);                                   \
  void rove_attn_bwd_f32__##isa(const rove_bwd_tile *t);                                    \
  void rove_gla_bwd_state_f32__##isa(const rove_gla_bwd_chunk *c);                           \
  void rove_gla_bwd_grads_f32__##isa(const rove_gla_bwd_chunk *c);                           \
  void rove_gla_bwd_dg_f32__##isa(double *carry, float *dg, const float *q, const float *dq,  \
                                  const float *k, const float *dk, int32_t n);                \
  extern const rove_kernels rove_kernels_##isa;

#endif
