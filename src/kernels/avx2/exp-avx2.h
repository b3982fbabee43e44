/* SPDX-License-Identifier: MIT */
/* Vectorised exp for the AVX2 kernels (static inline: each AVX2 file includes it).
 *
 * Range reduction: x = n ln2 + r with n = round(x log2 e), |r| <= ln2/2, so
 * exp(x) = 2^n e^r. n is rounded by adding 1.5 * 2^23 (the float's ulp is then 1, so the
 * add rounds to nearest even and the integer n sits in the low mantissa bits); ln2 is
 * split into a 9-bit head (n * ln2_hi is exact for |n| < 2^15) and a tail, so r carries
 * no cancellation error. e^r is a degree-6 polynomial (Chebyshev interpolation on
 * [-0.3466, 0.3466], 0.34 ulp before rounding). 2^n is applied by adding n to the
 * exponent field of e^r: with x clamped to [-87.3, 88.37], n is in [-126, 127] and the
 * result stays a normal float (at n = -126, r > 0 so e^r >= 1).
 *
 * Accuracy: 1.08 ulp at most over every float in [-87.3, 0] (under 2 ulp up to 88.37).
 * x < -87.3, -inf and NaN give 0; x > 88.37 is clamped (rove_exp_f32__avx2 fixes that
 * band up). It is the exp of the accuracy test (rove_exp_f32__avx2);
 * the softmax uses rove_exp2_256 below (same design, argument in log2 units). */
#ifndef ROVE_EXP_AVX2_H
#define ROVE_EXP_AVX2_H

#include <immintrin.h>

static inline __attribute__((always_inline)) __m256 rove_exp256(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3f), hi = _mm256_set1_ps(88.37f);
  const __m256 magic = _mm256_set1_ps(12582912.0f); /* 1.5 * 2^23 */
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 j = _mm256_add_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504f)), magic);
  const __m256 n = _mm256_sub_ps(j, magic);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.394111663e-03f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.375132456e-03f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.166635126e-02f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.666641533e-01f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  /* bits(j) = bits(1.5 * 2^23) + n and the low 9 bits of bits(1.5 * 2^23) are zero, so
   * bits(j) << 23 == n << 23 (mod 2^32): add it to the exponent of p. */
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(j), 23);
  const __m256 y = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
  return _mm256_and_ps(y, _mm256_cmp_ps(x, lo, _CMP_GE_OQ));
}

/* 2^t for the softmax, t in log2 units (the caller forms (s - m) log2 e).
 * n = round(t), f = t - n in [-1/2, 1/2] (exact), 2^f a degree-6 polynomial (Chebyshev
 * interpolation on [-1/2, 1/2], 0.32 ulp before rounding), 2^n built as the float with
 * exponent field n + 127 and multiplied in. t is clamped below at -127, where that float
 * is +0: so -inf (masked keys) gives exactly 0, as does t <= -126.5 (n = -127); for
 * t in (-126.5, -126) the product is a denormal. NaN gives 0. No upper clamp: the
 * softmax has t <= ROVE_SOFTMAX_SLACK log2 e ~ 5.8 (the tile's lazy maximum, kernels.h;
 * t <= 0 in the row kernels), far below the exponent field's limit. Accuracy: 0.99 ulp
 * at most over every float in [-126, 0]; 0.97 ulp over samples of (0, 5.8]. */
static inline __attribute__((always_inline)) __m256 rove_exp2_256(__m256 t) {
  const __m256 magic = _mm256_set1_ps(12583039.0f); /* 1.5 * 2^23 + 127 */
  t = _mm256_max_ps(t, _mm256_set1_ps(-127.0f));
  const __m256 j = _mm256_add_ps(t, magic); /* low mantissa bits: n + 127 */
  const __m256 f = _mm256_sub_ps(t, _mm256_sub_ps(j, magic));
  __m256 p = _mm256_set1_ps(1.546144485e-04f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.340042800e-03f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.618056938e-03f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550327152e-02f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.402265072e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931471825e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  /* bits(1.5 * 2^23) has zero low 9 bits, so bits(j) << 23 == (n + 127) << 23 */
  return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(j), 23)));
}

/* e^x - 1 for x <= 0, accurate to ~1 ulp relative however small |x| is (where
 * exp(x) - 1 would cancel: at x = -1e-5 it keeps 24 bits, exp(x) - 1 keeps 7). Range
 * reduction as in rove_exp256: x = n ln2 + r, n = round(x log2 e) in [-126, 0] (x clamped
 * at -87.3, where e^x - 1 is -1 in float), |r| <= ln2/2 with ln2 split in head and tail.
 * Then e^r - 1 = r + r^2 q(r), q a degree-5 polynomial (Chebyshev interpolation of
 * (e^r - 1 - r) / r^2 on [-0.3466, 0.3466], 0.03 ulp of e^r - 1 before rounding), and
 * e^x - 1 = 2^n (e^r - 1) + (2^n - 1) in one FMA (2^n - 1 is exact). For n = 0, i.e.
 * x > -0.3466, that is e^r - 1 itself with r = x: no cancellation anywhere. 2^n is the
 * float with exponent field n + 127 (n >= -126: normal). -inf gives -1; NaN: anything. */
static inline __attribute__((always_inline)) __m256 rove_expm1_neg256(__m256 x) {
  const __m256 magic = _mm256_set1_ps(12583039.0f); /* 1.5 * 2^23 + 127 */
  const __m256 xc = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 j = _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504f), magic);
  const __m256 n = _mm256_sub_ps(j, magic); /* low mantissa bits of j: n + 127 */
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 q = _mm256_set1_ps(1.989107986e-04f);
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.393373124e-03f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(8.333310485e-03f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(4.166646302e-02f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.666666716e-01f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(0.5f));
  const __m256 em = _mm256_fmadd_ps(_mm256_mul_ps(r, r), q, r); /* e^r - 1 */
  /* bits(1.5 * 2^23) has zero low 9 bits, so bits(j) << 23 == (n + 127) << 23: 2^n */
  const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(j), 23));
  return _mm256_fmadd_ps(p2, em, _mm256_sub_ps(p2, _mm256_set1_ps(1.0f)));
}

/* The softcap c tanh(x / c) (c > 0 finite), within a few ulp of the correctly rounded
 * value for every float x and every c (tests/ktest_softcap.c):
 *   y = x / c, a = |y|, u = e^{-2a} - 1 (rove_expm1_neg256: no cancellation for small a),
 *   tanh a = (1 - e^{-2a}) / (1 + e^{-2a}) = -u / (2 + u), result sign(x) c tanh a;
 *   a < 2^-12 (y tiny, or denormal when c is huge): tanh a = a (1 - a^2/3 + ...) and
 *   a^2/3 < 2^-25, so c tanh(x / c) rounds to x itself: x is returned as it is (c y
 *   would carry the rounding of y, and all of its error when y is denormal).
 * A NaN score stays NaN (it fails a >= 2^-12 and is returned as it is); +-inf gives +-c. */
static inline __attribute__((always_inline)) __m256 rove_softcap256(__m256 x, float cap) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 a = _mm256_andnot_ps(sign, _mm256_div_ps(x, _mm256_set1_ps(cap)));
  const __m256 u = rove_expm1_neg256(_mm256_mul_ps(a, _mm256_set1_ps(-2.0f)));
  const __m256 t = _mm256_div_ps(u, _mm256_add_ps(u, _mm256_set1_ps(2.0f))); /* -tanh a */
  const __m256 c = _mm256_or_ps(_mm256_mul_ps(t, _mm256_set1_ps(-cap)), _mm256_and_ps(sign, x));
  return _mm256_blendv_ps(x, c, _mm256_cmp_ps(a, _mm256_set1_ps(0x1p-12f), _CMP_GE_OQ));
}

/* Horizontal max / sum of the 8 lanes. */
static inline float rove_hmax256(__m256 v) {
  __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  a = _mm_max_ps(a, _mm_movehl_ps(a, a));
  a = _mm_max_ss(a, _mm_movehdup_ps(a));
  return _mm_cvtss_f32(a);
}

static inline float rove_hsum256(__m256 v) {
  __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  a = _mm_add_ps(a, _mm_movehl_ps(a, a));
  a = _mm_add_ss(a, _mm_movehdup_ps(a));
  return _mm_cvtss_f32(a);
}

#endif
