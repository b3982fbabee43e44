/* SPDX-License-Identifier: MIT */
/* Vectorised exp for the NEON kernels (static inline: each NEON file includes it).
 *
 * rove_exp_neon: x = n ln2 + r with n = round(x log2 e) (FRINTN: to nearest, ties to even),
 * |r| <= ln2/2, exp(x) = 2^n e^r. ln2 is split into a 9-bit head (n * ln2_hi is exact for
 * |n| < 2^15) and a tail, so r carries no cancellation error. e^r is a degree-6 polynomial
 * (Chebyshev interpolation on [-0.3466, 0.3466], 0.34 ulp before rounding). With x clamped
 * to [-87.3, 88.37], n is in [-126, 127], so 2^n is a normal float built from its exponent
 * field (and at n = -126, r > 0, so the product stays normal).
 * Accuracy: under 2 ulp over [-87.3, 88.37]. x < -87.3, -inf and NaN give 0; x > 88.37 is
 * clamped (callers that need the overflow band fix it up).
 *
 * rove_exp2_neon: 2^t for the softmax, t in log2 units. n = round(t), f = t - n in
 * [-1/2, 1/2] (exact), 2^f a degree-6 polynomial (0.32 ulp before rounding), times 2^n
 * built as the float with exponent field n + 127. t is clamped below at -127 with FMAXNM
 * (which, unlike FMAX, returns the number when the other operand is NaN): at n = -127 that
 * float is +0, so -inf (masked keys) and NaN give exactly 0. No upper clamp: the softmax
 * has t <= 0. */
#ifndef ROVE_EXP_NEON_H
#define ROVE_EXP_NEON_H

#include <arm_neon.h>

static inline __attribute__((always_inline)) float32x4_t rove_exp_neon(float32x4_t x) {
  const float32x4_t lo = vdupq_n_f32(-87.3f), hi = vdupq_n_f32(88.37f);
  const float32x4_t xc = vminq_f32(vmaxq_f32(x, lo), hi);
  const float32x4_t n = vrndnq_f32(vmulq_n_f32(xc, 1.44269504f));
  float32x4_t r = vfmsq_f32(xc, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.394111663e-03f);
  p = vfmaq_f32(vdupq_n_f32(8.375132456e-03f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.166635126e-02f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.666641533e-01f), p, r);
  p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  const float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
  /* x >= -87.3 is false for smaller x, -inf and NaN: those lanes become +0 */
  return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(y), vcgeq_f32(x, lo)));
}

static inline __attribute__((always_inline)) float32x4_t rove_exp2_neon(float32x4_t t) {
  t = vmaxnmq_f32(t, vdupq_n_f32(-127.0f));
  const float32x4_t n = vrndnq_f32(t);
  const float32x4_t f = vsubq_f32(t, n);
  float32x4_t p = vdupq_n_f32(1.546144485e-04f);
  p = vfmaq_f32(vdupq_n_f32(1.340042800e-03f), p, f);
  p = vfmaq_f32(vdupq_n_f32(9.618056938e-03f), p, f);
  p = vfmaq_f32(vdupq_n_f32(5.550327152e-02f), p, f);
  p = vfmaq_f32(vdupq_n_f32(2.402265072e-01f), p, f);
  p = vfmaq_f32(vdupq_n_f32(6.931471825e-01f), p, f);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, f);
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

/* e^x - 1 for x <= 0, accurate to ~1 ulp relative however small |x| is (exp(x) - 1
 * would cancel). x = n ln2 + r as in rove_exp_neon (n in [-126, 0] with x clamped at
 * -87.3, where e^x - 1 is -1 in float); e^r - 1 = r + r^2 q(r), q a degree-5 polynomial
 * (Chebyshev interpolation of (e^r - 1 - r) / r^2 on [-0.3466, 0.3466], 0.03 ulp of
 * e^r - 1 before rounding); e^x - 1 = 2^n (e^r - 1) + (2^n - 1) in one FMA (2^n - 1 exact,
 * 2^n a normal float built from its exponent field). For x > -0.3466, n = 0 and r = x: no
 * cancellation. The same function as the AVX2 / AVX-512 rove_expm1_neg*. -inf gives -1;
 * NaN: anything. */
static inline __attribute__((always_inline)) float32x4_t rove_expm1_neg_neon(float32x4_t x) {
  const float32x4_t xc = vmaxq_f32(x, vdupq_n_f32(-87.3f));
  const float32x4_t n = vrndnq_f32(vmulq_n_f32(xc, 1.44269504f));
  float32x4_t r = vfmsq_f32(xc, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t q = vdupq_n_f32(1.989107986e-04f);
  q = vfmaq_f32(vdupq_n_f32(1.393373124e-03f), q, r);
  q = vfmaq_f32(vdupq_n_f32(8.333310485e-03f), q, r);
  q = vfmaq_f32(vdupq_n_f32(4.166646302e-02f), q, r);
  q = vfmaq_f32(vdupq_n_f32(1.666666716e-01f), q, r);
  q = vfmaq_f32(vdupq_n_f32(0.5f), q, r);
  const float32x4_t em = vfmaq_f32(r, vmulq_f32(r, r), q); /* e^r - 1 */
  const float32x4_t p2 = vreinterpretq_f32_s32(
      vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23)); /* 2^n */
  return vfmaq_f32(vsubq_f32(p2, vdupq_n_f32(1.0f)), p2, em);
}

/* The softcap c tanh(x / c) (c > 0 finite) of the attn_tile and attn_rows kernels, within
 * a few ulp of the correctly rounded value for every x and c (tests/ktest_softcap.c):
 *   y = x / c, a = |y|, u = e^{-2a} - 1, tanh a = -u / (2 + u), result sign(x) c tanh a;
 *   a < 2^-12 (y tiny, or denormal when c is huge): c tanh(x / c) rounds to x (the
 *   a^2/3 term is below 2^-25), so x is returned as it is.
 * A NaN score stays NaN (it fails a >= 2^-12); +-inf gives +-c. */
static inline __attribute__((always_inline)) float32x4_t rove_softcap_neon(float32x4_t x,
                                                                          float cap) {
  const float32x4_t a = vabsq_f32(vdivq_f32(x, vdupq_n_f32(cap)));
  const float32x4_t u = rove_expm1_neg_neon(vmulq_n_f32(a, -2.0f));
  const float32x4_t t = vdivq_f32(u, vaddq_f32(u, vdupq_n_f32(2.0f))); /* -tanh a */
  const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x80000000u));
  const float32x4_t c = vreinterpretq_f32_u32(
      vorrq_u32(vreinterpretq_u32_f32(vmulq_n_f32(t, -cap)), sign));
  return vbslq_f32(vcgeq_f32(a, vdupq_n_f32(0x1p-12f)), c, x);
}

#endif
