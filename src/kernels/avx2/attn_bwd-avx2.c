/* SPDX-License-Identifier: MIT */
/* The backward tile (attn_bwd_kernels.h) for avx2: the generic body of attn_bwd_body.h
 * compiled with this ISA's flags, multiply-adds as fmaf (the vectoriser makes vector FMAs),
 * with its exp; the S and dP products register-blocked with intrinsics (the generic loop
 * spills its accumulators): 2 rows x 32 keys = 8 ymm sums per pass, each key vector
 * loaded once per 2 rows; the dq / dk / dv sums likewise (2 output rows x 32 dims) for
 * d % 32 == 0, branch-free when no weight of the call is zero; dS = P (dP - D) with a
 * vector compare instead of a branch per element. */
#include <immintrin.h>

#include "kernels-avx2.h"

#define ROVE_BWD_MADD(a, b, c) fmaf(a, b, c)

/* rows[i][0..64) = a[i][.] . bT[.][0..64) (attn_bwd_body.h's rove_bwd_product) */
static void product_avx2(float *rows, const float *a, const float *bT, int32_t nq, int32_t d) {
  for (int32_t i = 0; i < nq; i += 2) {
    const int two = i + 1 < nq;
    const float *a0 = a + (int64_t)i * d, *a1 = two ? a0 + d : a0;
    for (int32_t j0 = 0; j0 < 64; j0 += 32) {
      __m256 s0[4], s1[4];
      for (int v = 0; v < 4; v++) s0[v] = s1[v] = _mm256_setzero_ps();
      for (int32_t c = 0; c < d; c++) {
        const float *b = bT + (int64_t)c * 64 + j0;
        const __m256 x0 = _mm256_set1_ps(a0[c]), x1 = _mm256_set1_ps(a1[c]);
        for (int v = 0; v < 4; v++) {
          const __m256 bv = _mm256_loadu_ps(b + 8 * v);
          s0[v] = _mm256_fmadd_ps(x0, bv, s0[v]);
          s1[v] = _mm256_fmadd_ps(x1, bv, s1[v]);
        }
      }
      for (int v = 0; v < 4; v++) {
        _mm256_storeu_ps(rows + (int64_t)i * 64 + j0 + 8 * v, s0[v]);
        if (two) _mm256_storeu_ps(rows + (int64_t)(i + 1) * 64 + j0 + 8 * v, s1[v]);
      }
    }
  }
}
#define ROVE_BWD_PRODUCT_IMPL(rows, a, bT, nq, d) product_avx2(rows, a, bT, nq, d)

/* dst[o][0..d) += sum_n w(o, n) src[n][0..d), w(o, n) = W[o * wo + n * wn], skipping zero
 * weights (rove_bwd_acc's contract), for d % 32 == 0: 2 output rows x 32 dims = 8 ymm sums
 * per pass (fixed trip counts, so they stay in registers), each src vector loaded once
 * per 2 rows; an odd last row by the generic loop. */
static void acc_avx2(float *dst, const float *W, int64_t wo, int64_t wn, const float *src,
                     int32_t n_out, int32_t n_in, int32_t d);
#define ROVE_BWD_ACC_IMPL(dst, W, wo, wn, src, n_out, n_in, d)                              \
  ((d) % 32 == 0 ? acc_avx2(dst, W, wo, wn, src, n_out, n_in, d)                             \
                 : rove_bwd_acc(dst, W, wo, wn, src, n_out, n_in, d))

/* dS = P (dP - D) where P != 0 (unordered compare: a NaN P keeps its NaN), else +0: the
 * same operations as rove_bwd_ds (a subtraction, then a product), so the same bits. */
static inline void ds_avx2(float *g, const float *p, float D) {
  const __m256 vd = _mm256_set1_ps(D), zero = _mm256_setzero_ps();
  for (int32_t j = 0; j < 64; j += 8) {
    const __m256 pv = _mm256_loadu_ps(p + j);
    const __m256 x = _mm256_mul_ps(pv, _mm256_sub_ps(_mm256_loadu_ps(g + j), vd));
    _mm256_storeu_ps(g + j, _mm256_and_ps(_mm256_cmp_ps(pv, zero, _CMP_NEQ_UQ), x));
  }
}
#define ROVE_BWD_DS_IMPL(g, p, D) ds_avx2(g, p, D)

#include "../attn_bwd_body.h"

#if ROVE_BWD_TK != 64
#error "product_avx2 assumes 64 keys per block"
#endif

/* Whether any of the n_out x n_in weights W[o * wo + n * wn] is zero (or -0), reading
 * along whichever of wo, wn is 1 eight at a time. */
static int any_zero_weight(const float *W, int64_t wo, int64_t wn, int32_t n_out, int32_t n_in) {
  const int by_o = wo == 1; /* contiguous along o (dk, dv), else along n (dq: wn == 1) */
  const int32_t lines = by_o ? n_in : n_out, len = by_o ? n_out : n_in;
  const int64_t step = by_o ? wn : wo;
  const __m256 zero = _mm256_setzero_ps();
  __m256 hit = zero;
  for (int32_t l = 0; l < lines; l++) {
    const float *w = W + l * step;
    int32_t i = 0;
    for (; i + 8 <= len; i += 8)
      hit = _mm256_or_ps(hit, _mm256_cmp_ps(_mm256_loadu_ps(w + i), zero, _CMP_EQ_OQ));
    for (; i < len; i++)
      if (w[i] == 0.0f) return 1;
  }
  return _mm256_movemask_ps(hit) != 0;
}

/* Two output rows x 32 dims from c0 (8 ymm sums), over the n_in inputs; SKIP: a zero
 * weight adds nothing (the contract), tested per weight; without SKIP (no weight is zero,
 * checked first) the loop has no branch. The sums run in the same order either way. */
static inline __attribute__((always_inline)) void acc_rows2(float *x0, const float *w,
                                                             int64_t wo, int64_t wn,
                                                             const float *src, int32_t n_in,
                                                             int32_t d, int32_t c0,
                                                             const int SKIP) {
  float *x1 = x0 + d;
  __m256 a0 = _mm256_loadu_ps(x0), a1 = _mm256_loadu_ps(x0 + 8);
  __m256 a2 = _mm256_loadu_ps(x0 + 16), a3 = _mm256_loadu_ps(x0 + 24);
  __m256 b0 = _mm256_loadu_ps(x1), b1 = _mm256_loadu_ps(x1 + 8);
  __m256 b2 = _mm256_loadu_ps(x1 + 16), b3 = _mm256_loadu_ps(x1 + 24);
  for (int32_t n = 0; n < n_in; n++, w += wn) {
    const float *y = src + (int64_t)n * d + c0;
    const __m256 y0 = _mm256_loadu_ps(y), y1 = _mm256_loadu_ps(y + 8);
    const __m256 y2 = _mm256_loadu_ps(y + 16), y3 = _mm256_loadu_ps(y + 24);
    if (!SKIP || w[0] != 0.0f) {
      const __m256 x = _mm256_set1_ps(w[0]);
      a0 = _mm256_fmadd_ps(x, y0, a0), a1 = _mm256_fmadd_ps(x, y1, a1);
      a2 = _mm256_fmadd_ps(x, y2, a2), a3 = _mm256_fmadd_ps(x, y3, a3);
    }
    if (!SKIP || w[wo] != 0.0f) {
      const __m256 x = _mm256_set1_ps(w[wo]);
      b0 = _mm256_fmadd_ps(x, y0, b0), b1 = _mm256_fmadd_ps(x, y1, b1);
      b2 = _mm256_fmadd_ps(x, y2, b2), b3 = _mm256_fmadd_ps(x, y3, b3);
    }
  }
  _mm256_storeu_ps(x0, a0), _mm256_storeu_ps(x0 + 8, a1);
  _mm256_storeu_ps(x0 + 16, a2), _mm256_storeu_ps(x0 + 24, a3);
  _mm256_storeu_ps(x1, b0), _mm256_storeu_ps(x1 + 8, b1);
  _mm256_storeu_ps(x1 + 16, b2), _mm256_storeu_ps(x1 + 24, b3);
}

/* A weight is zero where P is (a hidden pair: masked tiles; or an underflow) and, for dS,
 * where dP equals D or a softcap saturates; calls without one take the branch-free loop
 * (most tiles of a causal call). callgrind, n = 512,
 * 12 x 64 causal, one thread: acc_avx2 90.1M -> 60.6M instructions, the tile body (which
 * inlines the dq call) 51.0M -> 36.3M. */
static void acc_avx2(float *dst, const float *W, int64_t wo, int64_t wn, const float *src,
                     int32_t n_out, int32_t n_in, int32_t d) {
  const int skip = any_zero_weight(W, wo, wn, n_out, n_in);
  int32_t o = 0;
  for (; o + 2 <= n_out; o += 2)
    for (int32_t c0 = 0; c0 < d; c0 += 32) {
      float *x0 = dst + (int64_t)o * d + c0;
      const float *w = W + (int64_t)o * wo;
      if (skip)
        acc_rows2(x0, w, wo, wn, src, n_in, d, c0, 1);
      else
        acc_rows2(x0, w, wo, wn, src, n_in, d, c0, 0);
    }
  if (o < n_out) rove_bwd_acc(dst + (int64_t)o * d, W + o * wo, wo, wn, src, n_out - o, n_in, d);
}

void rove_attn_bwd_f32__avx2(const rove_bwd_tile *t) { rove_attn_bwd_body(t, rove_exp_f32__avx2); }
