/* SPDX-License-Identifier: MIT */
/* The backward tile (attn_bwd_kernels.h) for avx512: the generic body of attn_bwd_body.h
 * compiled with this ISA's flags, multiply-adds as fmaf (the vectoriser makes vector FMAs),
 * with its exp; the five block products register-blocked with intrinsics in the forward
 * tile's shape (scores_6_4, pv_6_4: 6 rows x 4 zmm = 24 sums, each 64-float row of the
 * other operand loaded once per 6 rows). S and dP as product_avx512 (6 rows x the 64
 * keys); the dq / dk / dv sums as acc_avx512 for d % 16 == 0 (6 output rows x up to 64
 * dims), branch-free unless a weight of the call is zero and an input row is not finite;
 * P with the exp inline (p_avx512); dS = P (dP - D) with a vector compare instead of a
 * branch per element. The same structure as attn_bwd-avx2.c, at twice the width. */
#include <immintrin.h>

#include "exp-avx512.h"
#include "kernels-avx512.h"

#define ROVE_BWD_MADD(a, b, c) fmaf(a, b, c)
#define RB 6 /* rows per register block: 6 x 4 zmm = 24 sums, as the forward tile */
#define ROVE_INLINE static inline __attribute__((always_inline))

/* rows[r][0..64) = a[r][.] . bT[.][0..64) for R rows of a: the 24 sums stay in registers,
 * each bT row (4 zmm) is loaded once per R rows and each a[r][c] broadcast once per 64
 * keys. Each sum runs over c in order (rove_bwd_product's order). */
ROVE_INLINE void product_block(float *rows, const float *a, const float *bT, int32_t d,
                               const int R) {
  __m512 s[RB][4];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) s[r][0] = s[r][1] = s[r][2] = s[r][3] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int32_t c = 0; c < d; c++) {
    const float *b = bT + (int64_t)c * 64;
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
    const __m512 b2 = _mm512_loadu_ps(b + 32), b3 = _mm512_loadu_ps(b + 48);
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      const __m512 x = _mm512_set1_ps(a[(int64_t)r * d + c]);
      s[r][0] = _mm512_fmadd_ps(x, b0, s[r][0]);
      s[r][1] = _mm512_fmadd_ps(x, b1, s[r][1]);
      s[r][2] = _mm512_fmadd_ps(x, b2, s[r][2]);
      s[r][3] = _mm512_fmadd_ps(x, b3, s[r][3]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < 4; v++) _mm512_storeu_ps(rows + r * 64 + 16 * v, s[r][v]);
}

/* rows[i][0..64) = a[i][.] . bT[.][0..64) (attn_bwd_body.h's rove_bwd_product): blocks of
 * 6 rows, then one of nq % 6. bT ([d][64], 32 KB at d = 128) stays in L1 while the row
 * blocks stream through it. */
static void product_avx512(float *rows, const float *a, const float *bT, int32_t nq, int32_t d) {
  int32_t i = 0;
  for (; i + RB <= nq; i += RB) product_block(rows + i * 64, a + (int64_t)i * d, bT, d, RB);
  float *ri = rows + i * 64;
  const float *ai = a + (int64_t)i * d;
  switch (nq - i) {
    case 5: product_block(ri, ai, bT, d, 5); break;
    case 4: product_block(ri, ai, bT, d, 4); break;
    case 3: product_block(ri, ai, bT, d, 3); break;
    case 2: product_block(ri, ai, bT, d, 2); break;
    case 1: product_block(ri, ai, bT, d, 1); break;
    default: break;
  }
}
#define ROVE_BWD_PRODUCT_IMPL(rows, a, bT, nq, d) product_avx512(rows, a, bT, nq, d)

/* dst[o][0..d) += sum_n w(o, n) src[n][0..d), w(o, n) = W[o * wo + n * wn], skipping zero
 * weights (rove_bwd_acc's contract), for d % 16 == 0; the generic loop otherwise. */
static void acc_avx512(float *dst, const float *W, int64_t wo, int64_t wn, const float *src,
                       int32_t n_out, int32_t n_in, int32_t d);
#define ROVE_BWD_ACC_IMPL(dst, W, wo, wn, src, n_out, n_in, d)     \
  ((d) % 16 == 0 ? acc_avx512(dst, W, wo, wn, src, n_out, n_in, d) \
                 : rove_bwd_acc(dst, W, wo, wn, src, n_out, n_in, d))

/* dS = P (dP - D) where P != 0 (unordered compare: a NaN P keeps its NaN), else +0: the
 * same operations as rove_bwd_ds (a subtraction, then a product), so the same bits. */
static inline void ds_avx512(float *g, const float *p, float D) {
  const __m512 vd = _mm512_set1_ps(D), zero = _mm512_setzero_ps();
  for (int32_t j = 0; j < 64; j += 16) {
    const __m512 pv = _mm512_loadu_ps(p + j);
    const __m512 x = _mm512_mul_ps(pv, _mm512_sub_ps(_mm512_loadu_ps(g + j), vd));
    _mm512_storeu_ps(g + j, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(pv, zero, _CMP_NEQ_UQ), x));
  }
}
#define ROVE_BWD_DS_IMPL(g, p, D) ds_avx512(g, p, D)

/* p[j] = exp(min(p[j] - lse, 0)) for j < nk, 16 at a time up to the next multiple of 16
 * (p has TK floats; the body zeroes p[nk ..] after): min(0, x) keeps a NaN x (the second
 * operand is returned when one is NaN) and gives x > 0 -> +0, as rove_bwd_p's test does;
 * rove_exp512_ps is what rove_exp_f32__avx512 computes, NaN in, NaN out. One pass over
 * the row instead of the generic two (clamp, then the array exp). */
static inline void p_avx512(float *p, float lse, int32_t nk,
                            void (*expv)(float *, const float *, int64_t)) {
  (void)expv;
  const __m512 vl = _mm512_set1_ps(lse), zero = _mm512_setzero_ps();
  for (int32_t j = 0; j < nk; j += 16) {
    const __m512 x = _mm512_min_ps(zero, _mm512_sub_ps(_mm512_loadu_ps(p + j), vl));
    _mm512_storeu_ps(p + j, rove_exp512_ps(x));
  }
}
#define ROVE_BWD_P_IMPL(p, lse, nk, expv) p_avx512(p, lse, nk, expv)

#include "../attn_bwd_body.h"

#if ROVE_BWD_TK != 64
#error "product_avx512 assumes 64 keys per block"
#endif

/* Whether any of the n_out x n_in weights W[o * wo + n * wn] is zero (or -0), reading
 * along whichever of wo, wn is 1, sixteen at a time (masked tail). */
static int any_zero_weight(const float *W, int64_t wo, int64_t wn, int32_t n_out, int32_t n_in) {
  const int by_o = wo == 1; /* contiguous along o (dk, dv), else along n (dq: wn == 1) */
  const int32_t lines = by_o ? n_in : n_out, len = by_o ? n_out : n_in;
  const int64_t step = by_o ? wn : wo;
  const __m512 zero = _mm512_setzero_ps();
  __mmask16 hit = 0;
  for (int32_t l = 0; l < lines; l++) {
    const float *w = W + l * step;
    for (int32_t i = 0; i < len; i += 16) {
      const __mmask16 m = len - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (len - i)) - 1u);
      hit |= _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, w + i), zero, _CMP_EQ_OQ);
    }
  }
  return hit != 0;
}

/* R output rows x NV zmm (16 NV dims from c0) over the n_in inputs. BYROW: the weights
 * of an output row are contiguous (dq: wo = TK, wn = 1), else those of an input row are
 * (dk, dv: wo = 1, wn = TK); constant strides keep the 6 weight addresses immediates.
 * SKIP: a zero weight adds nothing (the contract), tested per weight; without SKIP (no
 * weight is zero, checked first) the loop has no branch. The sums run in the same order
 * either way: each output over n in order. */
ROVE_INLINE void acc_block(float *x, const float *W, const float *src, int32_t n_in, int32_t d,
                           int32_t c0, const int R, const int NV, const int BYROW, const int SKIP) {
  const int64_t wo = BYROW ? ROVE_BWD_TK : 1, wn = BYROW ? 1 : ROVE_BWD_TK;
  __m512 a[RB][4];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) a[r][v] = _mm512_loadu_ps(x + (int64_t)r * d + c0 + 16 * v);
  const float *w = W;
#pragma GCC unroll 2
  for (int32_t n = 0; n < n_in; n++, w += wn) {
    const float *y = src + (int64_t)n * d + c0;
    __m512 yv[4];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) yv[v] = _mm512_loadu_ps(y + 16 * v);
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      if (SKIP && w[r * wo] == 0.0f) continue;
      const __m512 b = _mm512_set1_ps(w[r * wo]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) a[r][v] = _mm512_fmadd_ps(b, yv[v], a[r][v]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) _mm512_storeu_ps(x + (int64_t)r * d + c0 + 16 * v, a[r][v]);
}

/* Every output row of one column block of NV zmm: blocks of 6 rows, then the n_out % 6
 * rest; the inputs' columns of the block (n_in x 16 NV floats, 16 KB at NV = 4) stay in
 * L1 while every row block reads them; the weights are the stream. */
ROVE_INLINE void acc_cols(float *dst, const float *W, const float *src, int32_t n_out, int32_t n_in,
                          int32_t d, int32_t c0, const int NV, const int BYROW, const int SKIP) {
  const int64_t wo = BYROW ? ROVE_BWD_TK : 1;
  int32_t o = 0;
  for (; o + RB <= n_out; o += RB)
    acc_block(dst + (int64_t)o * d, W + o * wo, src, n_in, d, c0, RB, NV, BYROW, SKIP);
  float *x = dst + (int64_t)o * d;
  const float *w = W + o * wo;
  switch (n_out - o) {
    case 5: acc_block(x, w, src, n_in, d, c0, 5, NV, BYROW, SKIP); break;
    case 4: acc_block(x, w, src, n_in, d, c0, 4, NV, BYROW, SKIP); break;
    case 3: acc_block(x, w, src, n_in, d, c0, 3, NV, BYROW, SKIP); break;
    case 2: acc_block(x, w, src, n_in, d, c0, 2, NV, BYROW, SKIP); break;
    case 1: acc_block(x, w, src, n_in, d, c0, 1, NV, BYROW, SKIP); break;
    default: break;
  }
}

/* Column blocks of 64 dims, then a last one of 16, 32 or 48. */
ROVE_INLINE void acc_all(float *dst, const float *W, const float *src, int32_t n_out, int32_t n_in,
                         int32_t d, const int BYROW, const int SKIP) {
  int32_t c0 = 0;
  for (; c0 + 64 <= d; c0 += 64) acc_cols(dst, W, src, n_out, n_in, d, c0, 4, BYROW, SKIP);
  switch ((d - c0) / 16) {
    case 3: acc_cols(dst, W, src, n_out, n_in, d, c0, 3, BYROW, SKIP); break;
    case 2: acc_cols(dst, W, src, n_out, n_in, d, c0, 2, BYROW, SKIP); break;
    case 1: acc_cols(dst, W, src, n_out, n_in, d, c0, 1, BYROW, SKIP); break;
    default: break;
  }
}

/* Whether the n rows of src ([n][d], d % 16 == 0) are all finite: x - x is 0 for a finite
 * x and NaN for an Inf or a NaN. */
static int rows_finite(const float *src, int32_t n, int32_t d) {
  const __m512 zero = _mm512_setzero_ps();
  __mmask16 ok = 0xFFFF;
  for (int64_t i = 0; i < (int64_t)n * d; i += 16) {
    const __m512 x = _mm512_loadu_ps(src + i);
    ok &= _mm512_cmp_ps_mask(_mm512_sub_ps(x, x), zero, _CMP_EQ_OQ);
  }
  return ok == 0xFFFF;
}

/* A zero weight must add nothing: it multiplies the row of a hidden pair, which may hold
 * NaN or Inf. Weights are zero where P is (a hidden pair: the masked tiles; or an
 * underflow) and, for dS, where dP equals D or a softcap saturates. When the inputs are
 * all finite, adding w y = +-0 changes no sum (an addition of +-0 to x != -0 returns x; a
 * -0 sum may become +0, which attn_bwd_kernels.h allows), so the branch-free loop is
 * taken unless some weight is zero and some input row is not finite. The tile calls this
 * with (wo, wn) = (1, TK) for dk, dv and (TK, 1) for dq (attn_bwd_body.h). */
static void acc_avx512(float *dst, const float *W, int64_t wo, int64_t wn, const float *src,
                       int32_t n_out, int32_t n_in, int32_t d) {
  const int skip = any_zero_weight(W, wo, wn, n_out, n_in) && !rows_finite(src, n_in, d);
  if (wo == ROVE_BWD_TK && wn == 1) {
    if (skip)
      acc_all(dst, W, src, n_out, n_in, d, 1, 1);
    else
      acc_all(dst, W, src, n_out, n_in, d, 1, 0);
  } else if (wo == 1 && wn == ROVE_BWD_TK) {
    if (skip)
      acc_all(dst, W, src, n_out, n_in, d, 0, 1);
    else
      acc_all(dst, W, src, n_out, n_in, d, 0, 0);
  } else {
    rove_bwd_acc(dst, W, wo, wn, src, n_out, n_in, d);
  }
}

void rove_attn_bwd_f32__avx512(const rove_bwd_tile *t) {
  rove_attn_bwd_body(t, rove_exp_f32__avx512);
}
