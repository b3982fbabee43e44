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
 * band up). It is the exp of the accuracy test (rove_exp_f32__avx2) and of the softcap;
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

/* 2^t for the softmax, t in log2 units (the caller folds (s - m) log2 e into one FMA).
 * n = round(t), f = t - n in [-1/2, 1/2] (exact), 2^f a degree-6 polynomial (Chebyshev
 * interpolation on [-1/2, 1/2], 0.32 ulp before rounding), 2^n built as the float with
 * exponent field n + 127 and multiplied in. t is clamped below at -127, where that float
 * is +0: so -inf (masked keys) gives exactly 0, as does t <= -126.5 (n = -127); for
 * t in (-126.5, -126) the product is a denormal. NaN gives 0. No upper clamp: the
 * softmax has t <= 0 (up to rounding). Accuracy: 0.99 ulp at most over every float in
 * [-126, 0]. */
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
