/* SPDX-License-Identifier: MIT */
/* Selective RoPE kernels, AVX2 + FMA (see kernels/selective_kernels.h).
 *
 * sincos of 4 doubles at a time:
 *   k = nearest integer to a * 2/pi, via the shifter S = 1.5 * 2^52: (a * 2/pi + S) has k
 *       in the low mantissa bits (two's complement mod 4 also for k < 0), and subtracting
 *       S again gives k as a double (both exact for |k| < 2^51);
 *   r = a - k pi/2 with pi/2 = C1 + C2 + C3 (Cody-Waite, three FMA steps; the first is
 *       exact because a - k C1 is a multiple of ulp(C1) below 2 in magnitude), |r| <= pi/4;
 *   sin r = r + r^3 P(r^2), cos r = 1 + r^2 Q(r^2): Taylor series to r^11 / r^12 in double
 *       (truncation <= 7e-12 on [-pi/4, pi/4], far below a float ulp);
 *   quadrant q = k mod 4: odd q swaps sin and cos; sin is negated for q = 2, 3 and cos for
 *       q = 1, 2 (sign bit from bit 1 of q and of q + 1).
 * Lanes with |a| > ROVE_SINCOS_BOUND (or NaN/inf) are redone with the scalar libm path.
 * Tails use masked loads and stores: an element's result does not depend on its index. */
#include <immintrin.h>

#include "kernels-avx2.h"

void rove_angle_accum_f32__avx2(double *c, double *out, const float *phi, const double *temp,
                            int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m256d s = _mm256_add_pd(_mm256_loadu_pd(c + i), _mm256_cvtps_pd(_mm_loadu_ps(phi + i)));
    _mm256_storeu_pd(c + i, s);
    _mm256_storeu_pd(out + i, _mm256_mul_pd(_mm256_loadu_pd(temp + i), s));
  }
  for (; i < n; i++) { /* same two operations per element as the vector lanes */
    const double s = c[i] + (double)phi[i];
    c[i] = s;
    out[i] = temp[i] * s;
  }
}

#define SHIFTER 6755399441055744.0 /* 1.5 * 2^52 */
#define TWO_OVER_PI 0x1.45f306dc9c883p-1
#define PIO2_1 0x1.921fb54442d18p+0   /* pi/2 = PIO2_1 + PIO2_2 + PIO2_3 + O(6e-50) */
#define PIO2_2 0x1.1a62633145c07p-54
#define PIO2_3 -0x1.f1976b7ed8fbcp-110

/* cos and sin of 4 angles (valid lanes: |a| <= ROVE_SINCOS_BOUND). */
static inline void sincos4(__m256d a, __m128 *cos_out, __m128 *sin_out) {
  const __m256d sh = _mm256_add_pd(_mm256_mul_pd(a, _mm256_set1_pd(TWO_OVER_PI)),
                                   _mm256_set1_pd(SHIFTER));
  const __m256d k = _mm256_sub_pd(sh, _mm256_set1_pd(SHIFTER));
  __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(PIO2_1), a);
  r = _mm256_fnmadd_pd(k, _mm256_set1_pd(PIO2_2), r);
  r = _mm256_fnmadd_pd(k, _mm256_set1_pd(PIO2_3), r);
  const __m256d r2 = _mm256_mul_pd(r, r);
  /* sin: P = -1/3! + r2/5! - r2^2/7! + r2^3/9! - r2^4/11! */
  __m256d p = _mm256_set1_pd(-1.0 / 39916800.0);
  p = _mm256_fmadd_pd(p, r2, _mm256_set1_pd(1.0 / 362880.0));
  p = _mm256_fmadd_pd(p, r2, _mm256_set1_pd(-1.0 / 5040.0));
  p = _mm256_fmadd_pd(p, r2, _mm256_set1_pd(1.0 / 120.0));
  p = _mm256_fmadd_pd(p, r2, _mm256_set1_pd(-1.0 / 6.0));
  const __m256d s = _mm256_fmadd_pd(_mm256_mul_pd(r, r2), p, r);
  /* cos: Q = -1/2! + r2/4! - r2^2/6! + r2^3/8! - r2^4/10! + r2^5/12! */
  __m256d q = _mm256_set1_pd(1.0 / 479001600.0);
  q = _mm256_fmadd_pd(q, r2, _mm256_set1_pd(-1.0 / 3628800.0));
  q = _mm256_fmadd_pd(q, r2, _mm256_set1_pd(1.0 / 40320.0));
  q = _mm256_fmadd_pd(q, r2, _mm256_set1_pd(-1.0 / 720.0));
  q = _mm256_fmadd_pd(q, r2, _mm256_set1_pd(1.0 / 24.0));
  q = _mm256_fmadd_pd(q, r2, _mm256_set1_pd(-0.5));
  const __m256d c = _mm256_fmadd_pd(q, r2, _mm256_set1_pd(1.0));
  /* quadrant from the low bits of the shifted value */
  const __m256i qi = _mm256_castpd_si256(sh), one = _mm256_set1_epi64x(1);
  const __m256i two = _mm256_set1_epi64x(2);
  const __m256d swap = _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(qi, one), one));
  const __m256d sneg = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_and_si256(qi, two), 62));
  const __m256d cneg = _mm256_castsi256_pd(
      _mm256_slli_epi64(_mm256_and_si256(_mm256_add_epi64(qi, one), two), 62));
  const __m256d sv = _mm256_xor_pd(_mm256_blendv_pd(s, c, swap), sneg);
  const __m256d cv = _mm256_xor_pd(_mm256_blendv_pd(c, s, swap), cneg);
  *cos_out = _mm256_cvtpd_ps(cv);
  *sin_out = _mm256_cvtpd_ps(sv);
}

/* Bit j set when lane j needs the libm path (|a| > bound, inf or NaN). */
static inline int out_of_range(__m256d a) {
  const __m256d abs = _mm256_andnot_pd(_mm256_set1_pd(-0.0), a);
  return _mm256_movemask_pd(
      _mm256_cmp_pd(abs, _mm256_set1_pd(ROVE_SINCOS_BOUND), _CMP_NLE_UQ));
}

static void fixup(float *cos_t, float *sin_t, const double *angles, int bad) {
  for (int j = 0; j < 4; j++)
    if (bad & (1 << j)) rove_sincos1_f32(angles[j], cos_t + j, sin_t + j);
}

void rove_sincos_f32__avx2(float *cos_t, float *sin_t, const double *angles, int64_t n) {
  __m128 cv, sv;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d a = _mm256_loadu_pd(angles + i);
    sincos4(a, &cv, &sv);
    _mm_storeu_ps(cos_t + i, cv);
    _mm_storeu_ps(sin_t + i, sv);
    const int bad = out_of_range(a);
    if (bad) fixup(cos_t + i, sin_t + i, angles + i, bad);
  }
  if (i < n) { /* 1-3 left: lanes j < rem active */
    const int rem = (int)(n - i);
    const __m256i idx = _mm256_set_epi64x(3, 2, 1, 0);
    const __m256i m64 = _mm256_cmpgt_epi64(_mm256_set1_epi64x(rem), idx);
    const __m128i m32 = _mm_cmpgt_epi32(_mm_set1_epi32(rem), _mm_set_epi32(3, 2, 1, 0));
    const __m256d a = _mm256_maskload_pd(angles + i, m64);
    sincos4(a, &cv, &sv);
    _mm_maskstore_ps(cos_t + i, m32, cv);
    _mm_maskstore_ps(sin_t + i, m32, sv);
    const int bad = out_of_range(a) & ((1 << rem) - 1);
    if (bad) fixup(cos_t + i, sin_t + i, angles + i, bad);
  }
}

void rove_pair_grads_f64__avx2(int32_t half, int32_t first, int interleaved, const float *g,
                               const float *y, double *out, double sign) {
  rove_pair_grads_body(half, first, interleaved, g, y, out, sign);
}
