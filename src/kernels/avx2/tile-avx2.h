/* SPDX-License-Identifier: MIT */
/* The two register-blocked microkernels of the AVX2 flash tile (attn_tile-avx2.c), kept
 * in a header so that each is instantiated (always_inline) for a constant row count R
 * and, on the fast paths, a constant head dim D. */
#ifndef ROVE_TILE_AVX2_H
#define ROVE_TILE_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#include "exp-avx2.h"
#include "rotate-avx2.h"

#define RB 6                  /* query rows per block */
#define TK ROVE_AVX2_TILE_KV  /* keys per tile = scratch row stride */
#define KG ROVE_AVX2_KGROUP   /* keys per packed-K group */
#define ROVE_INLINE static inline __attribute__((always_inline))

/* One block of up to RB query rows of a tile. */
typedef struct rove_blk {
  const float *q, *k, *v; /* q: R rows (stride d); k: packed K tile; v: V tile [64][d] */
  float *s;               /* R rows of TK: bias, then scores, then probabilities */
  float *o, *m, *l;       /* this block's rows of the accumulators */
  int32_t d, nk, R;       /* R: rows in this block (1 .. RB) */
  int32_t g0, g1;         /* groups [g0, g1) hold every visible key */
  unsigned live;          /* bit g: group g has a visible key */
  unsigned biased;        /* bit g: group g has bias rows (0 / -inf) selected into its scores */
  unsigned pvmask;        /* bit g: group g is mixed, its P V is masked per (row, key) */
  int plain;              /* every group in [g0, g1) is live and unmasked: one P V loop */
  const float *keep;      /* R rows of TK: all-ones bits where key j is visible to row r
                             (written only for the groups of pvmask) */
  uint16_t kall[TK / KG]; /* groups of pvmask: bit i, key 16g + i is visible to every row */
  uint16_t kany[TK / KG]; /* ... to some row (neither: the key is skipped in P V) */
  float softcap;
  float alpha[8];         /* per row: the rescale of O by this tile's softmax update */
  float rmax[RB * 8];     /* per row: lane-wise max of this tile's scores so far */
} rove_blk;

/* Scores of R rows against the 16 keys of group g (packed [D][16]), written to
 * s[r][16g ..] after softcap (rove_softcap256, exp-avx2.h); for a group with bias rows (mixed mask, partial group) a
 * hidden key's score is the bias itself (-inf, selected by its sign bit: not computed from
 * K, so NaN, Inf or 3e38 in a hidden key's row cannot turn it into NaN), a visible one's
 * stays; the running row maxima b->rmax[r] (8 lanes each) take the new scores in. */
ROVE_INLINE void qk_group(rove_blk *b, int32_t g, const int R, const int32_t D) {
  const float *kg = b->k + (int64_t)g * KG * D, *q = b->q;
  float *s = b->s + g * KG;
  __m256 acc[RB][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int32_t c = 0; c < D; c++) {
    const __m256 k0 = _mm256_loadu_ps(kg + c * KG), k1 = _mm256_loadu_ps(kg + c * KG + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      const __m256 qb = _mm256_broadcast_ss(q + r * D + c);
      acc[r][0] = _mm256_fmadd_ps(qb, k0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(qb, k1, acc[r][1]);
    }
  }
  const int biased = b->biased >> g & 1;
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      float *dst = s + r * TK + 8 * h;
      if (b->softcap > 0.0f) acc[r][h] = rove_softcap256(acc[r][h], b->softcap);
      if (biased) {
        const __m256 bias = _mm256_loadu_ps(dst); /* +0 visible, -inf hidden */
        acc[r][h] = _mm256_blendv_ps(acc[r][h], bias, bias);
      }
      _mm256_storeu_ps(dst, acc[r][h]);
    }
    float *mx = b->rmax + 8 * r;
    _mm256_storeu_ps(mx, _mm256_max_ps(_mm256_loadu_ps(mx), _mm256_max_ps(acc[r][0], acc[r][1])));
  }
}

/* acc[r][..] += p_rj V[j][c ..] for the R rows; KEEP: only where keep[r][j] has its bits
 * set (V[j] is and-ed with it: a hidden pair adds +0, whatever V[j] holds, where p_rj = 0
 * times a NaN or Inf in V[j] would be NaN). */
#define ROVE_PV_KEY(j, KEEP)                                                               \
  do {                                                                                     \
    const float *v_ = b->v + (int64_t)(j) * D + c;                                         \
    __m256 vv_[2];                                                                         \
    _Pragma("GCC unroll 2") for (int h = 0; h < C; h++)                                    \
      vv_[h] = tail ? _mm256_maskload_ps(v_, mk) : _mm256_loadu_ps(v_ + 8 * h);            \
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) {                                  \
      const __m256 p_ = _mm256_broadcast_ss(b->s + r * TK + (j));                          \
      const __m256 k_ = KEEP ? _mm256_broadcast_ss(b->keep + r * TK + (j)) : p_;          \
      _Pragma("GCC unroll 2") for (int h = 0; h < C; h++)                                  \
        acc[r][h] = _mm256_fmadd_ps(p_, KEEP ? _mm256_and_ps(vv_[h], k_) : vv_[h], acc[r][h]); \
    }                                                                                      \
  } while (0)

/* O[r][c .. c + 8C) = alpha_r O[r][..] + sum_{j0 <= j < j1} p_rj V[j][..] for R rows with
 * the block in registers, over the visible keys only: hidden groups are skipped, mixed
 * groups masked per pair (ROVE_PV_KEY); one plain loop when the block has neither.
 * tail: C == 1 and only the lanes of mk exist (end of the row). */
ROVE_INLINE void pv_chunk(const rove_blk *b, const float *alpha, int32_t c, int32_t j0,
                          int32_t j1, const int R, const int32_t D, const int C,
                          const int tail, __m256i mk) {
  __m256 acc[RB][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    const __m256 a = _mm256_set1_ps(alpha[r]);
    const float *o = b->o + r * D + c;
#pragma GCC unroll 2
    for (int h = 0; h < C; h++)
      acc[r][h] = _mm256_mul_ps(tail ? _mm256_maskload_ps(o, mk) : _mm256_loadu_ps(o + 8 * h), a);
  }
  if (b->plain) {
    for (int32_t j = j0; j < j1; j++) ROVE_PV_KEY(j, 0);
  } else {
    for (int32_t g = j0 / KG; g * KG < j1; g++) {
      if (!(b->live >> g & 1)) continue; /* no visible key: p = 0, V not read */
      const int32_t jb = (g + 1) * KG < j1 ? (g + 1) * KG : j1;
      if (b->pvmask >> g & 1) {
        for (int32_t j = g * KG; j < jb; j++) { /* per key: plain, masked or skipped */
          const unsigned bit = 1u << (j - g * KG);
          if (b->kall[g] & bit)
            ROVE_PV_KEY(j, 0);
          else if (b->kany[g] & bit)
            ROVE_PV_KEY(j, 1);
        }
      } else
        for (int32_t j = g * KG; j < jb; j++) ROVE_PV_KEY(j, 0);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    float *o = b->o + r * D + c;
#pragma GCC unroll 2
    for (int h = 0; h < C; h++) {
      if (tail)
        _mm256_maskstore_ps(o, mk, acc[r][h]);
      else
        _mm256_storeu_ps(o + 8 * h, acc[r][h]);
    }
  }
}
#undef ROVE_PV_KEY

/* P V for keys [j0, j1) over all D dims: chunks of 16, then 8, then a masked rest. */
ROVE_INLINE void pv_block(const rove_blk *b, const float *alpha, int32_t j0, int32_t j1,
                          const int R, const int32_t D) {
  const __m256i none = _mm256_setzero_si256();
  int32_t c = 0;
  for (; c + 16 <= D; c += 16) pv_chunk(b, alpha, c, j0, j1, R, D, 2, 0, none);
  if (c + 8 <= D) {
    pv_chunk(b, alpha, c, j0, j1, R, D, 1, 0, none);
    c += 8;
  }
  if (c < D) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32(D - c), lanes);
    pv_chunk(b, alpha, c, j0, j1, R, D, 1, 1, mk);
  }
}

#endif
