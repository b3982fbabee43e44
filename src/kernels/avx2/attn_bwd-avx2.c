/* SPDX-License-Identifier: MIT */
/* The backward tile (attn_bwd_kernels.h) for avx2: the generic body of attn_bwd_body.h
 * compiled with this ISA's flags, multiply-adds as fmaf (the vectoriser makes vector FMAs),
 * with its exp; the five block products register-blocked with intrinsics as the forward
 * tile's are (the generic loops spill their sums): blocks of 6 rows x 16 columns, 12 ymm
 * sums, each 16-float row of the other operand loaded once per 6 rows. S and dP as
 * product_avx2; the dq / dk / dv sums as acc_avx2 for d % 16 == 0, branch-free unless a
 * weight of the call is zero and an input row is not finite; P with the exp inline
 * (p_avx2); dS = P (dP - D) with a vector compare instead of a branch per element. */
#include <immintrin.h>

#include "exp-avx2.h"
#include "kernels-avx2.h"

#define ROVE_BWD_MADD(a, b, c) fmaf(a, b, c)
#define RB 6 /* rows per register block: 6 x 16 floats = 12 ymm sums, as the forward tile */
#define ROVE_INLINE static inline __attribute__((always_inline))

/* rows[i][g .. g + 16) = a[i][.] . bT[.][g ..] for R rows of a from row i: the 12 sums
 * stay in registers, each bT vector is loaded once per R rows and each a[i][c] broadcast
 * once per 16 keys. Each sum runs over c in order (rove_bwd_product's order). */
ROVE_INLINE void product_block(float *rows, const float *a, const float *bT, int32_t d,
                               int32_t g, const int R) {
  __m256 s[RB][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) s[r][0] = s[r][1] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int32_t c = 0; c < d; c++) {
    const __m256 b0 = _mm256_loadu_ps(bT + (int64_t)c * 64 + g);
    const __m256 b1 = _mm256_loadu_ps(bT + (int64_t)c * 64 + g + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      const __m256 x = _mm256_broadcast_ss(a + (int64_t)r * d + c);
      s[r][0] = _mm256_fmadd_ps(x, b0, s[r][0]);
      s[r][1] = _mm256_fmadd_ps(x, b1, s[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    _mm256_storeu_ps(rows + r * 64 + g, s[r][0]);
    _mm256_storeu_ps(rows + r * 64 + g + 8, s[r][1]);
  }
}

/* rows[i][0..64) = a[i][.] . bT[.][0..64) (attn_bwd_body.h's rove_bwd_product): for each
 * 16 keys, blocks of 6 rows and a last block of nq % 6. Keys outermost: a key group's
 * columns of bT (d lines of 64 bytes, 8 KB at d = 128) stay in L1 while every row block
 * reads them; a row block's rows of a are the stream. */
static void product_avx2(float *rows, const float *a, const float *bT, int32_t nq, int32_t d) {
  for (int32_t g = 0; g < 64; g += 16) {
    int32_t i = 0;
    for (; i + RB <= nq; i += RB) product_block(rows + i * 64, a + (int64_t)i * d, bT, d, g, RB);
    float *ri = rows + i * 64;
    const float *ai = a + (int64_t)i * d;
    switch (nq - i) {
    case 5: product_block(ri, ai, bT, d, g, 5); break;
    case 4: product_block(ri, ai, bT, d, g, 4); break;
    case 3: product_block(ri, ai, bT, d, g, 3); break;
    case 2: product_block(ri, ai, bT, d, g, 2); break;
    case 1: product_block(ri, ai, bT, d, g, 1); break;
    default: break;
    }
  }
}
#define ROVE_BWD_PRODUCT_IMPL(rows, a, bT, nq, d) product_avx2(rows, a, bT, nq, d)

/* dst[o][0..d) += sum_n w(o, n) src[n][0..d), w(o, n) = W[o * wo + n * wn], skipping zero
 * weights (rove_bwd_acc's contract), for d % 16 == 0: blocks of 6 output rows x 16 dims
 * (12 ymm sums), each src vector loaded once per 6 rows; the generic loop otherwise. */
static void acc_avx2(float *dst, const float *W, int64_t wo, int64_t wn, const float *src,
                     int32_t n_out, int32_t n_in, int32_t d);
#define ROVE_BWD_ACC_IMPL(dst, W, wo, wn, src, n_out, n_in, d)                              \
  ((d) % 16 == 0 ? acc_avx2(dst, W, wo, wn, src, n_out, n_in, d)                             \
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

/* p[j] = exp(min(p[j] - lse, 0)) for j < nk, 8 at a time up to the next multiple of 8 (p
 * has TK floats; the body zeroes p[nk ..] after): min(0, x) keeps a NaN x (the second
 * operand is returned when one is NaN) and gives x > 0 -> +0, as rove_bwd_p's test does;
 * rove_exp256 inline is what rove_exp_f32__avx2 computes on these x (all <= 0), except
 * that it gives 0 for NaN, so NaN lanes are put back. One pass over the row instead of the
 * generic two (clamp, then rove_exp_f32__avx2): 1-2 % of a backward's instructions
 * (callgrind, n = 512, d = 64 / 128). */
static inline void p_avx2(float *p, float lse, int32_t nk,
                          void (*expv)(float *, const float *, int64_t)) {
  (void)expv;
  const __m256 vl = _mm256_set1_ps(lse), zero = _mm256_setzero_ps();
  for (int32_t j = 0; j < nk; j += 8) {
    const __m256 x = _mm256_min_ps(zero, _mm256_sub_ps(_mm256_loadu_ps(p + j), vl));
    const __m256 y = rove_exp256(x);
    _mm256_storeu_ps(p + j, _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
  }
}
#define ROVE_BWD_P_IMPL(p, lse, nk, expv) p_avx2(p, lse, nk, expv)

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

/* R output rows x 16 dims from c0 (2R ymm sums) over the n_in inputs. BYROW: the weights
 * of an output row are contiguous (dq: wo = TK, wn = 1), else those of an input row are
 * (dk, dv: wo = 1, wn = TK); constant strides keep the 6 weight addresses immediates.
 * SKIP: a zero weight adds nothing (the contract), tested per weight; without SKIP (no
 * weight is zero, checked first) the loop has no branch. The sums run in the same order
 * either way: each output over n in order. */
ROVE_INLINE void acc_block(float *x, const float *W, const float *src, int32_t n_in, int32_t d,
                           int32_t c0, const int R, const int BYROW, const int SKIP) {
  const int64_t wo = BYROW ? ROVE_BWD_TK : 1, wn = BYROW ? 1 : ROVE_BWD_TK;
  __m256 a[RB][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    a[r][0] = _mm256_loadu_ps(x + (int64_t)r * d + c0);
    a[r][1] = _mm256_loadu_ps(x + (int64_t)r * d + c0 + 8);
  }
  const float *w = W;
#pragma GCC unroll 4
  for (int32_t n = 0; n < n_in; n++, w += wn) {
    const float *y = src + (int64_t)n * d + c0;
    const __m256 y0 = _mm256_loadu_ps(y), y1 = _mm256_loadu_ps(y + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      if (SKIP && w[r * wo] == 0.0f) continue;
      const __m256 v = _mm256_broadcast_ss(w + r * wo);
      a[r][0] = _mm256_fmadd_ps(v, y0, a[r][0]);
      a[r][1] = _mm256_fmadd_ps(v, y1, a[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    _mm256_storeu_ps(x + (int64_t)r * d + c0, a[r][0]);
    _mm256_storeu_ps(x + (int64_t)r * d + c0 + 8, a[r][1]);
  }
}

/* Every output row, 16 dims at a time: blocks of 6 rows, then the n_out % 6 rest. Dims
 * outermost: the inputs' 16 columns (n_in lines of 64 bytes) stay in L1 while every row
 * block reads them; the weights are the stream. */
ROVE_INLINE void acc_all(float *dst, const float *W, const float *src, int32_t n_out,
                         int32_t n_in, int32_t d, const int BYROW, const int SKIP) {
  const int64_t wo = BYROW ? ROVE_BWD_TK : 1;
  for (int32_t c0 = 0; c0 < d; c0 += 16) {
    int32_t o = 0;
    for (; o + RB <= n_out; o += RB)
      acc_block(dst + (int64_t)o * d, W + o * wo, src, n_in, d, c0, RB, BYROW, SKIP);
    float *x = dst + (int64_t)o * d;
    const float *w = W + o * wo;
    switch (n_out - o) {
    case 5: acc_block(x, w, src, n_in, d, c0, 5, BYROW, SKIP); break;
    case 4: acc_block(x, w, src, n_in, d, c0, 4, BYROW, SKIP); break;
    case 3: acc_block(x, w, src, n_in, d, c0, 3, BYROW, SKIP); break;
    case 2: acc_block(x, w, src, n_in, d, c0, 2, BYROW, SKIP); break;
    case 1: acc_block(x, w, src, n_in, d, c0, 1, BYROW, SKIP); break;
    default: break;
    }
  }
}

/* Whether the n rows of src ([n][d], d % 8 == 0) are all finite: x - x is 0 for a finite x
 * and NaN for an Inf or a NaN. */
static int rows_finite(const float *src, int32_t n, int32_t d) {
  const __m256 zero = _mm256_setzero_ps();
  __m256 ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  for (int64_t i = 0; i < (int64_t)n * d; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    ok = _mm256_and_ps(ok, _mm256_cmp_ps(_mm256_sub_ps(x, x), zero, _CMP_EQ_OQ));
  }
  return _mm256_movemask_ps(ok) == 0xff;
}

/* A zero weight must add nothing: it multiplies the row of a hidden pair, which may hold
 * NaN or Inf. Weights are zero where P is (a hidden pair: the masked tiles; or an
 * underflow) and, for dS, where dP equals D or a softcap saturates. When the inputs are
 * all finite, adding w y = +-0 changes no sum (an addition of +-0 to x != -0 returns x; a
 * -0 sum may become +0, which attn_bwd_kernels.h allows), so the branch-free loop is
 * taken unless some weight is zero and some input row is not finite. The tile calls this
 * with (wo, wn) = (1, TK) for dk, dv and (TK, 1) for dq (attn_bwd_body.h). */
static void acc_avx2(float *dst, const float *W, int64_t wo, int64_t wn, const float *src,
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

void rove_attn_bwd_f32__avx2(const rove_bwd_tile *t) { rove_attn_bwd_body(t, rove_exp_f32__avx2); }
