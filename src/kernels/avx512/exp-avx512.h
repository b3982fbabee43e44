/* SPDX-License-Identifier: MIT */
/* Vectorised expf for AVX-512 (static inline: included only by files built with AVX-512).
 *
 * exp(x) = 2^n * exp(r), n = round(x / ln2), r = x - n ln2 in [-ln2/2, ln2/2].
 *   - r is formed with ln2 split in two floats (Cody-Waite); with FMA the first product
 *     n * ln2_hi is exact, so r carries ~1e-10 absolute error.
 *   - exp(r) is a degree-6 polynomial interpolating exp at the Chebyshev nodes of
 *     [-0.3466, 0.3466]: truncation error 2e-8 relative, below float rounding, so the
 *     result is within ~1-2 ulp (the Horner rounding dominates).
 *   - 2^n is applied with vscalefps, which handles the exponent range itself: results
 *     below FLT_MIN come out as correctly scaled denormals, below 2^-150 as 0, above
 *     FLT_MAX as +inf.
 * Inputs are clamped to [-104, 89] first (exp(-104) < 2^-150 rounds to 0, exp(89) > FLT_MAX
 * is inf), so -inf gives exactly 0 and no finite input gives NaN; NaN inputs stay NaN
 * (the clamps keep their second operand when it is NaN). */
#ifndef ROVE_EXP_AVX512_H
#define ROVE_EXP_AVX512_H

#include <immintrin.h>

/* exp(r) of the reduced argument, with n: exp(x) = scalef(result, n). x within [-104, 89]. */
static inline __m512 rove_exp512_reduced(__m512 x, __m512 *n_out) {
  const __m512 log2e = _mm512_set1_ps(1.44269504f);
  const __m512 ln2_hi = _mm512_set1_ps(0.693359375f);    /* 355/512: n*ln2_hi exact */
  const __m512 ln2_lo = _mm512_set1_ps(-2.12194440e-4f); /* ln2 - ln2_hi */
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, ln2_hi, x);
  r = _mm512_fnmadd_ps(n, ln2_lo, r);
  /* Horner, coefficients c6 .. c0 (c0 = c1 = 1, c2 = 1/2 are exact in the fit). */
  __m512 p = _mm512_set1_ps(1.394111081e-03f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.375127800e-03f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.166635126e-02f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.666641533e-01f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  *n_out = n;
  return _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
}

static inline __m512 rove_exp512_ps(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), _mm512_min_ps(_mm512_set1_ps(89.0f), x));
  __m512 n;
  const __m512 p = rove_exp512_reduced(x, &n);
  return _mm512_scalef_ps(p, n);
}

/* The softmax's exp: x <= ROVE_SOFTMAX_SLACK (the tile's lazy maximum, kernels.h; x <= 0
 * in the row kernel) or NaN in the lanes of k, anything in the others, which come out as
 * exactly 0 (masked keys carry -inf). Only the lower clamp is needed (it keeps the
 * reduction exact for absurdly negative finite x); results below 2^-150 round to 0.
 * Within ~1-2 ulp as rove_exp512_ps (0.92 ulp over samples of (0, 4]). */
static inline __m512 rove_exp512_nonpos_maskz(__mmask16 k, __m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  __m512 n;
  const __m512 p = rove_exp512_reduced(x, &n);
  return _mm512_maskz_scalef_ps(k, p, n);
}

/* e^x - 1 for x <= 0, accurate to ~1 ulp relative however small |x| is (exp(x) - 1
 * would cancel). x = n ln2 + r with n = round(x log2 e) in [-126, 0] (x clamped at -87.3,
 * where e^x - 1 is -1 in float) and r reduced as above; e^r - 1 = r + r^2 q(r), q a
 * degree-5 polynomial (Chebyshev interpolation of (e^r - 1 - r) / r^2 on [-0.3466, 0.3466],
 * 0.03 ulp of e^r - 1 before rounding); e^x - 1 = 2^n (e^r - 1) + (2^n - 1) in one FMA
 * (2^n - 1 exact). For x > -0.3466, n = 0 and r = x: no cancellation. The same
 * function as the AVX2 and NEON kernels' rove_expm1_neg*. -inf gives -1; NaN: anything. */
static inline __m512 rove_expm1_neg512(__m512 x) {
  const __m512 xc = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 q = _mm512_set1_ps(1.989107986e-04f);
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.393373124e-03f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(8.333310485e-03f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(4.166646302e-02f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.666666716e-01f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.5f));
  const __m512 em = _mm512_fmadd_ps(_mm512_mul_ps(r, r), q, r); /* e^r - 1 */
  const __m512 p2 = _mm512_scalef_ps(_mm512_set1_ps(1.0f), n); /* 2^n, normal */
  return _mm512_fmadd_ps(p2, em, _mm512_sub_ps(p2, _mm512_set1_ps(1.0f)));
}

/* The softcap c tanh(x / c) (c > 0 finite) of the attn_tile and attn_rows kernels, within
 * a few ulp of the correctly rounded value for every x and c (tests/ktest_softcap.c):
 *   y = x / c, a = |y|, u = e^{-2a} - 1, tanh a = -u / (2 + u), result sign(x) c tanh a;
 *   a < 2^-12 (y tiny, or denormal when c is huge): c tanh(x / c) rounds to x (the
 *   a^2/3 term is below 2^-25), so x is returned as it is.
 * A NaN score stays NaN (it fails a >= 2^-12); +-inf gives +-c. */
static inline __m512 rove_softcap512(__m512 x, float cap) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512 a = _mm512_andnot_ps(sign, _mm512_div_ps(x, _mm512_set1_ps(cap)));
  const __m512 u = rove_expm1_neg512(_mm512_mul_ps(a, _mm512_set1_ps(-2.0f)));
  const __m512 t = _mm512_div_ps(u, _mm512_add_ps(u, _mm512_set1_ps(2.0f))); /* -tanh a */
  const __m512 c = _mm512_or_ps(_mm512_mul_ps(t, _mm512_set1_ps(-cap)), _mm512_and_ps(sign, x));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(0x1p-12f), _CMP_GE_OQ), x, c);
}

#endif
