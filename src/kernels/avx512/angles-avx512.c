/* SPDX-License-Identifier: MIT */
/* Selective RoPE kernels, AVX-512 (see kernels/selective_kernels.h; the sincos method is
 * the one described in avx2/angles-avx2.c, 8 doubles at a time, with mask registers for
 * the quadrant swap and for the tail). */
#include <immintrin.h>

#include "kernels-avx512.h"

void rove_angle_accum_f32__avx512(double *c, double *out, const float *phi, const double *temp,
                              int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m512d s = _mm512_add_pd(_mm512_loadu_pd(c + i), _mm512_cvtps_pd(_mm256_loadu_ps(phi + i)));
    _mm512_storeu_pd(c + i, s);
    _mm512_storeu_pd(out + i, _mm512_mul_pd(_mm512_loadu_pd(temp + i), s));
  }
  if (i < n) { /* masked tail: the same two operations per element */
    const __mmask8 m = (__mmask8)((1u << (n - i)) - 1u);
    __m512d s = _mm512_add_pd(_mm512_maskz_loadu_pd(m, c + i),
                              _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, phi + i)));
    _mm512_mask_storeu_pd(c + i, m, s);
    _mm512_mask_storeu_pd(out + i, m, _mm512_mul_pd(_mm512_maskz_loadu_pd(m, temp + i), s));
  }
}

#define SHIFTER 6755399441055744.0 /* 1.5 * 2^52 */
#define TWO_OVER_PI 0x1.45f306dc9c883p-1
#define PIO2_1 0x1.921fb54442d18p+0   /* pi/2 = PIO2_1 + PIO2_2 + PIO2_3 + O(6e-50) */
#define PIO2_2 0x1.1a62633145c07p-54
#define PIO2_3 -0x1.f1976b7ed8fbcp-110

/* cos and sin of 8 angles (valid lanes: |a| <= ROVE_SINCOS_BOUND). */
static inline void sincos8(__m512d a, __m256 *cos_out, __m256 *sin_out) {
  const __m512d sh = _mm512_add_pd(_mm512_mul_pd(a, _mm512_set1_pd(TWO_OVER_PI)),
                                   _mm512_set1_pd(SHIFTER));
  const __m512d k = _mm512_sub_pd(sh, _mm512_set1_pd(SHIFTER));
  __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(PIO2_1), a); /* exact */
  r = _mm512_fnmadd_pd(k, _mm512_set1_pd(PIO2_2), r);
  r = _mm512_fnmadd_pd(k, _mm512_set1_pd(PIO2_3), r);
  const __m512d r2 = _mm512_mul_pd(r, r);
  __m512d p = _mm512_set1_pd(-1.0 / 39916800.0); /* sin r = r + r^3 P(r^2) */
  p = _mm512_fmadd_pd(p, r2, _mm512_set1_pd(1.0 / 362880.0));
  p = _mm512_fmadd_pd(p, r2, _mm512_set1_pd(-1.0 / 5040.0));
  p = _mm512_fmadd_pd(p, r2, _mm512_set1_pd(1.0 / 120.0));
  p = _mm512_fmadd_pd(p, r2, _mm512_set1_pd(-1.0 / 6.0));
  const __m512d s = _mm512_fmadd_pd(_mm512_mul_pd(r, r2), p, r);
  __m512d q = _mm512_set1_pd(1.0 / 479001600.0); /* cos r = 1 + r^2 Q(r^2) */
  q = _mm512_fmadd_pd(q, r2, _mm512_set1_pd(-1.0 / 3628800.0));
  q = _mm512_fmadd_pd(q, r2, _mm512_set1_pd(1.0 / 40320.0));
  q = _mm512_fmadd_pd(q, r2, _mm512_set1_pd(-1.0 / 720.0));
  q = _mm512_fmadd_pd(q, r2, _mm512_set1_pd(1.0 / 24.0));
  q = _mm512_fmadd_pd(q, r2, _mm512_set1_pd(-0.5));
  const __m512d c = _mm512_fmadd_pd(q, r2, _mm512_set1_pd(1.0));
  /* quadrant q = k mod 4 from the low bits of the shifted value */
  const __m512i qi = _mm512_castpd_si512(sh), one = _mm512_set1_epi64(1);
  const __m512i two = _mm512_set1_epi64(2);
  const __mmask8 swap = _mm512_test_epi64_mask(qi, one);
  const __m512i sneg = _mm512_slli_epi64(_mm512_and_si512(qi, two), 62);
  const __m512i cneg = _mm512_slli_epi64(_mm512_and_si512(_mm512_add_epi64(qi, one), two), 62);
  const __m512i sv = _mm512_xor_si512(_mm512_castpd_si512(_mm512_mask_blend_pd(swap, s, c)), sneg);
  const __m512i cv = _mm512_xor_si512(_mm512_castpd_si512(_mm512_mask_blend_pd(swap, c, s)), cneg);
  *cos_out = _mm512_cvtpd_ps(_mm512_castsi512_pd(cv));
  *sin_out = _mm512_cvtpd_ps(_mm512_castsi512_pd(sv));
}

/* Lanes that need the libm path: |a| > bound, inf or NaN. */
static inline __mmask8 out_of_range(__m512d a) {
  return _mm512_cmp_pd_mask(_mm512_abs_pd(a), _mm512_set1_pd(ROVE_SINCOS_BOUND), _CMP_NLE_UQ);
}

static void fixup(float *cos_t, float *sin_t, const double *angles, unsigned bad) {
  for (int j = 0; j < 8; j++)
    if (bad & (1u << j)) rove_sincos1_f32(angles[j], cos_t + j, sin_t + j);
}

void rove_sincos_f32__avx512(float *cos_t, float *sin_t, const double *angles, int64_t n) {
  __m256 cv, sv;
  for (int64_t i = 0; i < n; i += 8) {
    const __mmask8 m = n - i >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (n - i)) - 1u);
    const __m512d a = _mm512_maskz_loadu_pd(m, angles + i);
    sincos8(a, &cv, &sv);
    _mm256_mask_storeu_ps(cos_t + i, m, cv);
    _mm256_mask_storeu_ps(sin_t + i, m, sv);
    const unsigned bad = (unsigned)(out_of_range(a) & m);
    if (bad) fixup(cos_t + i, sin_t + i, angles + i, bad);
  }
}

void rove_pair_grads_f64__avx512(int32_t half, int32_t first, int interleaved, const float *g,
                                 const float *y, double *out, double sign) {
  rove_pair_grads_body(half, first, interleaved, g, y, out, sign);
}
