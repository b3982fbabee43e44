/* SPDX-License-Identifier: MIT */
/* Selective RoPE kernels, AArch64 NEON (see kernels/selective_kernels.h; the sincos method
 * is the one described in avx2/angles-avx2.c, on two float64x2 vectors at a time). The
 * sincos tail goes through a zero-padded local block, so an element's result does not
 * depend on its index. */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kernels-neon.h"

void rove_angle_accum_f32__neon(double *c, double *out, const float *phi, const double *temp,
                            int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t f = vld1q_f32(phi + i);
    const float64x2_t s0 = vaddq_f64(vld1q_f64(c + i), vcvt_f64_f32(vget_low_f32(f)));
    const float64x2_t s1 = vaddq_f64(vld1q_f64(c + i + 2), vcvt_high_f64_f32(f));
    vst1q_f64(c + i, s0);
    vst1q_f64(c + i + 2, s1);
    vst1q_f64(out + i, vmulq_f64(vld1q_f64(temp + i), s0));
    vst1q_f64(out + i + 2, vmulq_f64(vld1q_f64(temp + i + 2), s1));
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

/* Horner step: acc * x + c. */
static inline float64x2_t horner(float64x2_t acc, float64x2_t x, double c) {
  return vfmaq_f64(vdupq_n_f64(c), acc, x);
}

/* cos and sin of 2 angles (valid lanes: |a| <= ROVE_SINCOS_BOUND). */
static inline void sincos2(float64x2_t a, float32x2_t *cos_out, float32x2_t *sin_out) {
  const float64x2_t sh = vaddq_f64(vmulq_f64(a, vdupq_n_f64(TWO_OVER_PI)), vdupq_n_f64(SHIFTER));
  const float64x2_t k = vsubq_f64(sh, vdupq_n_f64(SHIFTER));
  float64x2_t r = vfmsq_f64(a, k, vdupq_n_f64(PIO2_1)); /* a - k C1, exact */
  r = vfmsq_f64(r, k, vdupq_n_f64(PIO2_2));
  r = vfmsq_f64(r, k, vdupq_n_f64(PIO2_3));
  const float64x2_t r2 = vmulq_f64(r, r);
  float64x2_t p = vdupq_n_f64(-1.0 / 39916800.0); /* sin r = r + r^3 P(r^2) */
  p = horner(p, r2, 1.0 / 362880.0);
  p = horner(p, r2, -1.0 / 5040.0);
  p = horner(p, r2, 1.0 / 120.0);
  p = horner(p, r2, -1.0 / 6.0);
  const float64x2_t s = vfmaq_f64(r, vmulq_f64(r, r2), p);
  float64x2_t q = vdupq_n_f64(1.0 / 479001600.0); /* cos r = 1 + r^2 Q(r^2) */
  q = horner(q, r2, -1.0 / 3628800.0);
  q = horner(q, r2, 1.0 / 40320.0);
  q = horner(q, r2, -1.0 / 720.0);
  q = horner(q, r2, 1.0 / 24.0);
  q = horner(q, r2, -0.5);
  const float64x2_t c = horner(q, r2, 1.0);
  /* quadrant q = k mod 4 from the low bits of the shifted value */
  const uint64x2_t qi = vreinterpretq_u64_f64(sh), one = vdupq_n_u64(1), two = vdupq_n_u64(2);
  const uint64x2_t swap = vtstq_u64(qi, one);
  const uint64x2_t sneg = vshlq_n_u64(vandq_u64(qi, two), 62);
  const uint64x2_t cneg = vshlq_n_u64(vandq_u64(vaddq_u64(qi, one), two), 62);
  const uint64x2_t sv = veorq_u64(vreinterpretq_u64_f64(vbslq_f64(swap, c, s)), sneg);
  const uint64x2_t cv = veorq_u64(vreinterpretq_u64_f64(vbslq_f64(swap, s, c)), cneg);
  *cos_out = vcvt_f32_f64(vreinterpretq_f64_u64(cv));
  *sin_out = vcvt_f32_f64(vreinterpretq_f64_u64(sv));
}

/* 4 elements; lanes with |a| > bound, inf or NaN are redone through libm. */
static inline void sincos_block4(float *cos_t, float *sin_t, const double *angles) {
  const float64x2_t a0 = vld1q_f64(angles), a1 = vld1q_f64(angles + 2);
  float32x2_t c0, s0, c1, s1;
  sincos2(a0, &c0, &s0);
  sincos2(a1, &c1, &s1);
  vst1q_f32(cos_t, vcombine_f32(c0, c1));
  vst1q_f32(sin_t, vcombine_f32(s0, s1));
  const float64x2_t bound = vdupq_n_f64(ROVE_SINCOS_BOUND);
  const uint64x2_t ok = vandq_u64(vcleq_f64(vabsq_f64(a0), bound), vcleq_f64(vabsq_f64(a1), bound));
  if (vgetq_lane_u64(ok, 0) && vgetq_lane_u64(ok, 1)) return;
  for (int j = 0; j < 4; j++)
    if (!(fabs(angles[j]) <= ROVE_SINCOS_BOUND))
      rove_sincos1_f32(angles[j], cos_t + j, sin_t + j);
}

void rove_sincos_f32__neon(float *cos_t, float *sin_t, const double *angles, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) sincos_block4(cos_t + i, sin_t + i, angles + i);
  if (i < n) { /* 1-3 left: through a zero-padded block */
    double a[4] = {0.0, 0.0, 0.0, 0.0};
    float c[4], s[4];
    const size_t rem = (size_t)(n - i);
    memcpy(a, angles + i, rem * sizeof(double));
    sincos_block4(c, s, a);
    memcpy(cos_t + i, c, rem * sizeof(float));
    memcpy(sin_t + i, s, rem * sizeof(float));
  }
}

void rove_pair_grads_f64__neon(int32_t half, int32_t first, int interleaved, const float *g,
                               const float *y, double *out, double sign) {
  rove_pair_grads_body(half, first, interleaved, g, y, out, sign);
}

void rove_phase_dots_f64__neon(double *out, int64_t os, const float *m, int64_t ms,
                               int64_t rows, const double *v, int64_t vs, int64_t nt,
                               int64_t n) {
  rove_phase_dots_body(out, os, m, ms, rows, v, vs, nt, n);
}
