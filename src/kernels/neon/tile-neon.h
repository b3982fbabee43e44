/* SPDX-License-Identifier: MIT */
/* The two register-blocked microkernels of the NEON flash tile (attn_tile-neon.c), kept in
 * a header so that each is instantiated (always_inline) for a constant row count R and, on
 * the fast paths, a constant head dim D.
 *
 * Both use the by-element FMA (vfmaq_laneq_f32): a q register holds 4 values of a row
 * (4 dims of a query, or 4 probabilities), and each lane multiplies a whole vector of the
 * other operand, so no broadcast loads are needed. With R = 4 rows and 16 keys (or 16
 * output dims) a step keeps 16 accumulators, 4 row vectors and 4 operand vectors: 24 of
 * the 32 vector registers. */
#ifndef ROVE_TILE_NEON_H
#define ROVE_TILE_NEON_H

#include <arm_neon.h>
#include <stdint.h>

#include "exp-neon.h"
#include "rotate-neon.h"

#define RB 4                  /* query rows per block */
#define TK ROVE_NEON_TILE_KV  /* keys per tile = scratch row stride */
#define KG ROVE_NEON_KGROUP   /* keys per packed-K group */
#define ROVE_INLINE static inline __attribute__((always_inline))

/* One block of up to RB query rows of a tile. */
typedef struct rove_nblk {
  const float *q, *k, *v; /* q: R rows (stride d); k: packed K tile; v: V tile [64][d] */
  float *s;               /* R rows of TK: bias, then scores, then probabilities */
  float *o, *m, *l;       /* this block's rows of the accumulators */
  int32_t d, nk;
  int32_t g0, g1;         /* groups [g0, g1) hold every visible key */
  int32_t gtail;          /* unmasked tile: the partial last group (bias row set), or -1 */
  unsigned live;          /* bit g: group g has a visible key */
  int32_t masked;         /* masked tile (bias rows on every group) */
  unsigned pvkeep;        /* bit g: P V of group g is masked per (row, key) by keep: every
                             group of a masked tile, the partial last one of an unmasked tile
                             (P V runs to nk rounded up to 4) */
  const float *keep;      /* R rows of TK, all-ones bits where key j is visible to row r
                             (and j < nk), else 0; written for the groups of pvkeep */
  float softcap;
  float alpha[RB];        /* per row: the rescale of O by this tile's softmax update */
  float32x4_t rmax[RB];   /* per row: lane-wise max of this tile's scores so far */
} rove_nblk;

/* acc[r][h] += kk[h] * lane L of qv[r] for the R rows and 4 key vectors (L a literal). */
#define ROVE_QK_STEP(L)                                                       \
  do {                                                                        \
    const float *kc_ = kg + (int64_t)(c + (L)) * KG;                          \
    const float32x4_t k0_ = vld1q_f32(kc_), k1_ = vld1q_f32(kc_ + 4);         \
    const float32x4_t k2_ = vld1q_f32(kc_ + 8), k3_ = vld1q_f32(kc_ + 12);    \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                     \
      acc[r][0] = vfmaq_laneq_f32(acc[r][0], k0_, qv[r], (L));                \
      acc[r][1] = vfmaq_laneq_f32(acc[r][1], k1_, qv[r], (L));                \
      acc[r][2] = vfmaq_laneq_f32(acc[r][2], k2_, qv[r], (L));                \
      acc[r][3] = vfmaq_laneq_f32(acc[r][3], k3_, qv[r], (L));                \
    }                                                                         \
  } while (0)

/* Scores of R rows against the 16 keys of group g (packed [D][16]), written to
 * s[r][16g ..] after softcap; on masked tiles or the partial last group a hidden key's
 * score is the bias itself (-inf, selected: not computed from K, so NaN, Inf or 3e38 in
 * its row cannot make it NaN); the running row maxima b->rmax[r] take the new scores in
 * (FMAX: a NaN score of a visible key stays in them). */
ROVE_INLINE void qk_group(rove_nblk *b, int32_t g, const int R, const int32_t D) {
  const float *kg = b->k + (int64_t)g * KG * D, *q = b->q;
  float *s = b->s + g * KG;
  float32x4_t acc[RB][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = vdupq_n_f32(0.0f);
  int32_t c = 0;
#pragma GCC unroll 2
  for (; c + 4 <= D; c += 4) {
    float32x4_t qv[RB];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) qv[r] = vld1q_f32(q + r * D + c);
    ROVE_QK_STEP(0);
    ROVE_QK_STEP(1);
    ROVE_QK_STEP(2);
    ROVE_QK_STEP(3);
  }
  for (; c < D; c++) { /* D % 4 dims left (d is even: 0 or 2) */
    const float *kc = kg + (int64_t)c * KG;
    const float32x4_t k0 = vld1q_f32(kc), k1 = vld1q_f32(kc + 4);
    const float32x4_t k2 = vld1q_f32(kc + 8), k3 = vld1q_f32(kc + 12);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      const float qs = q[r * D + c];
      acc[r][0] = vfmaq_n_f32(acc[r][0], k0, qs);
      acc[r][1] = vfmaq_n_f32(acc[r][1], k1, qs);
      acc[r][2] = vfmaq_n_f32(acc[r][2], k2, qs);
      acc[r][3] = vfmaq_n_f32(acc[r][3], k3, qs);
    }
  }
  const int biased = b->masked || g == b->gtail;
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    float32x4_t mx = b->rmax[r];
#pragma GCC unroll 4
    for (int h = 0; h < 4; h++) {
      float *dst = s + r * TK + 4 * h;
      float32x4_t x = acc[r][h];
      if (b->softcap > 0.0f) x = rove_softcap_neon(x, b->softcap);
      if (biased) {
        const float32x4_t bias = vld1q_f32(dst); /* +0 visible, -inf hidden */
        x = vbslq_f32(vcltzq_f32(bias), bias, x);
      }
      vst1q_f32(dst, x);
      mx = vmaxq_f32(mx, x);
    }
    b->rmax[r] = mx;
  }
}

/* acc[r][h] += V[j + L][c + 4h ..] * lane L of pv[r] (probability of key j + L). */
#define ROVE_PV_STEP(L)                                                       \
  do {                                                                        \
    const float *vr_ = b->v + (int64_t)(j + (L)) * D + c;                     \
    float32x4_t vv_[4];                                                       \
    _Pragma("GCC unroll 4") for (int h = 0; h < C; h++) vv_[h] = vld1q_f32(vr_ + 4 * h); \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                       \
      _Pragma("GCC unroll 4") for (int h = 0; h < C; h++)                     \
        acc[r][h] = vfmaq_laneq_f32(acc[r][h], vv_[h], pv[r], (L));           \
  } while (0)

/* The same with V[j + L] and-ed with keep[r][j + L] per row: a hidden pair adds +0 (p = 0
 * times a NaN or Inf in V would be NaN). */
#define ROVE_PV_STEP_KEEP(L)                                                  \
  do {                                                                        \
    const float *vr_ = b->v + (int64_t)(j + (L)) * D + c;                     \
    uint32x4_t vv_[4];                                                        \
    _Pragma("GCC unroll 4") for (int h = 0; h < C; h++)                       \
      vv_[h] = vreinterpretq_u32_f32(vld1q_f32(vr_ + 4 * h));                 \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                     \
      const uint32x4_t k_ = vld1q_dup_u32((const uint32_t *)(b->keep + r * TK + j + (L))); \
      _Pragma("GCC unroll 4") for (int h = 0; h < C; h++)                     \
        acc[r][h] = vfmaq_laneq_f32(acc[r][h], vreinterpretq_f32_u32(vandq_u32(vv_[h], k_)), \
                                    pv[r], (L));                              \
    }                                                                         \
  } while (0)

/* O[r][c .. c + 4C) = alpha_r O[r][..] + sum_{j0 <= j < j1} p_rj V[j][..] for R rows with
 * the block in registers; j0 and j1 are multiples of 4. On a masked tile only the visible
 * pairs: groups without a visible key are skipped, the others masked by keep. */
ROVE_INLINE void pv_chunk(const rove_nblk *b, int32_t c, int32_t j0, int32_t j1, const int R,
                          const int32_t D, const int C) {
  float32x4_t acc[RB][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    const float *o = b->o + r * D + c;
#pragma GCC unroll 4
    for (int h = 0; h < C; h++) acc[r][h] = vmulq_n_f32(vld1q_f32(o + 4 * h), b->alpha[r]);
  }
  for (int32_t j = j0; j < j1; j += 4) {
    float32x4_t pv[RB];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) pv[r] = vld1q_f32(b->s + r * TK + j);
    if (!(b->live >> (j / KG) & 1)) continue; /* no visible key: p = 0, V not read */
    if (!(b->pvkeep >> (j / KG) & 1)) {
      ROVE_PV_STEP(0);
      ROVE_PV_STEP(1);
      ROVE_PV_STEP(2);
      ROVE_PV_STEP(3);
    } else {
      ROVE_PV_STEP_KEEP(0);
      ROVE_PV_STEP_KEEP(1);
      ROVE_PV_STEP_KEEP(2);
      ROVE_PV_STEP_KEEP(3);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    float *o = b->o + r * D + c;
#pragma GCC unroll 4
    for (int h = 0; h < C; h++) vst1q_f32(o + 4 * h, acc[r][h]);
  }
}

/* The last 2 dims of the rows (d % 4 == 2), in 2-lane registers: nothing past a row (on a
 * masked tile V rows are and-ed with keep, as in pv_chunk). */
ROVE_INLINE void pv_pair(const rove_nblk *b, int32_t c, int32_t j0, int32_t j1, const int R,
                         const int32_t D) {
  float32x2_t acc[RB];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) acc[r] = vmul_n_f32(vld1_f32(b->o + r * D + c), b->alpha[r]);
  for (int32_t j = j0; j < j1; j += 4) {
    if (!(b->live >> (j / KG) & 1)) continue;
    const float *v = b->v + (int64_t)j * D + c;
    const float32x2_t w0 = vld1_f32(v), w1 = vld1_f32(v + D);
    const float32x2_t w2 = vld1_f32(v + 2 * D), w3 = vld1_f32(v + 3 * D);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      const float32x4_t p = vld1q_f32(b->s + r * TK + j);
      float32x2_t v0 = w0, v1 = w1, v2 = w2, v3 = w3;
      if (b->pvkeep >> (j / KG) & 1) {
        const uint32_t *k = (const uint32_t *)(b->keep + r * TK + j);
#define ROVE_KEEP2(x, i) \
  x = vreinterpret_f32_u32(vand_u32(vreinterpret_u32_f32(x), vld1_dup_u32(k + (i))))
        ROVE_KEEP2(v0, 0); ROVE_KEEP2(v1, 1); ROVE_KEEP2(v2, 2); ROVE_KEEP2(v3, 3);
#undef ROVE_KEEP2
      }
      acc[r] = vfma_laneq_f32(acc[r], v0, p, 0);
      acc[r] = vfma_laneq_f32(acc[r], v1, p, 1);
      acc[r] = vfma_laneq_f32(acc[r], v2, p, 2);
      acc[r] = vfma_laneq_f32(acc[r], v3, p, 3);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) vst1_f32(b->o + r * D + c, acc[r]);
}

/* P V for keys [j0, j1) over all D dims: chunks of 16, then 4, then a last pair. */
ROVE_INLINE void pv_block(const rove_nblk *b, int32_t j0, int32_t j1, const int R,
                          const int32_t D) {
  int32_t c = 0;
  for (; c + 16 <= D; c += 16) pv_chunk(b, c, j0, j1, R, D, 4);
  for (; c + 4 <= D; c += 4) pv_chunk(b, c, j0, j1, R, D, 1);
  if (c < D) pv_pair(b, c, j0, j1, R, D); /* d is even: exactly 2 dims */
}

#endif
