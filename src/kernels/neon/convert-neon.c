/* SPDX-License-Identifier: MIT */
/* NEON (aarch64 baseline) conversions between fp32 rows and the storage types (to_f32,
 * from_f32, kernels.h), 8 elements at a time, bit for bit the definitions of dtype.h:
 *   F16   FCVTL / FCVTN (vcvt_f32_f16, vcvt_f16_f32): IEEE conversions in the FPCR's
 *         rounding mode, round-to-nearest-even with subnormals kept under Linux's default
 *         FPCR (FZ = 0, AHP = 0: IEEE half, |x| >= 65520 -> inf)
 *   BF16  the 16-bit shift, and round-to-nearest-even on the integer pattern
 *   Q8    per block of 32: max |x| by FMAX (exact in any order), q = FCVTNS(x * inv)
 *         (vcvtnq_s32_f32: round to nearest, ties to even, whatever the FPCR), clamped and
 *         narrowed to int8; dequant (float)q * s
 * Row tails (d % 8, a short last Q8 block) go through the scalar definitions. */
#include <arm_neon.h>

#include "../scalar/kernels-scalar.h"
#include "kernels-neon.h"

void rove_to_f32__neon(float *dst, int64_t dst_stride, const void *src, int64_t stride,
                       const float *scale, int64_t n, int32_t d, int32_t type) {
  const int32_t nb = rove_q8_blocks(d), d8 = d / 8 * 8;
  for (int64_t j = 0; j < n; j++) {
    float *o = dst + j * dst_stride;
    if (type == ROVE_DTYPE_F16) {
      const uint16_t *x = (const uint16_t *)src + j * stride;
      int32_t i = 0;
      for (; i < d8; i += 8) {
        const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(x + i));
        vst1q_f32(o + i, vcvt_f32_f16(vget_low_f16(h)));
        vst1q_f32(o + i + 4, vcvt_high_f32_f16(h));
      }
      for (; i < d; i++) o[i] = rove_f16_to_f32(x[i]);
    } else if (type == ROVE_DTYPE_BF16) {
      const uint16_t *x = (const uint16_t *)src + j * stride;
      int32_t i = 0;
      for (; i < d8; i += 8) {
        const uint16x8_t h = vld1q_u16(x + i);
        vst1q_f32(o + i, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)));
        vst1q_f32(o + i + 4, vreinterpretq_f32_u32(vshll_high_n_u16(h, 16)));
      }
      for (; i < d; i++) o[i] = rove_bf16_to_f32(x[i]);
    } else if (type == ROVE_DTYPE_Q8) {
      const int8_t *x = (const int8_t *)src + j * stride;
      const float *sc = scale + j * nb;
      int32_t i = 0;
      for (; i < d8; i += 8) { /* 8 | 32: one block */
        const int16x8_t w = vmovl_s8(vld1_s8(x + i));
        const float s = sc[i / ROVE_Q8_BLOCK];
        vst1q_f32(o + i, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))), s));
        vst1q_f32(o + i + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(w)), s));
      }
      for (; i < d; i++) o[i] = (float)x[i] * sc[i / ROVE_Q8_BLOCK];
    } else {
      memcpy(o, (const float *)src + j * stride, sizeof(float) * (size_t)d);
    }
  }
}

/* 4 floats to bf16 patterns (in the 32-bit lanes); *bad |= lanes where a finite value
 * rounded to inf. */
static inline uint32x4_t bf16x4(float32x4_t v, uint32x4_t *bad) {
  const uint32x4_t x = vreinterpretq_u32_f32(v);
  const uint32x4_t ax = vandq_u32(x, vdupq_n_u32(0x7fffffffu)), inf = vdupq_n_u32(0x7f800000u);
  const uint32x4_t e = vdupq_n_u32(0x7f80u), hi = vshrq_n_u32(x, 16);
  const uint32x4_t r = vshrq_n_u32(
      vaddq_u32(x, vaddq_u32(vdupq_n_u32(0x7fffu), vandq_u32(hi, vdupq_n_u32(1u)))), 16);
  *bad = vorrq_u32(*bad, vandq_u32(vcltq_u32(ax, inf), vceqq_u32(vandq_u32(r, e), e)));
  return vbslq_u32(vcgtq_u32(ax, inf), vorrq_u32(hi, vdupq_n_u32(0x40u)), r);
}

/* One full Q8 block of 32 values; returns 1 if one is not finite (then q = 0, scale 0). */
static int q8_block32(int8_t *q, float *scale, const float *x) {
  const float32x4_t inf = vdupq_n_f32(INFINITY);
  float32x4_t v[8], mx = vdupq_n_f32(0.0f);
  uint32x4_t fin = vdupq_n_u32(~0u);
  for (int k = 0; k < 8; k++) {
    v[k] = vld1q_f32(x + 4 * k);
    const float32x4_t a = vabsq_f32(v[k]);
    fin = vandq_u32(fin, vcltq_f32(a, inf)); /* false for inf and NaN */
    mx = vmaxq_f32(mx, a);
  }
  if (vminvq_u32(fin) == 0) {
    memset(q, 0, ROVE_Q8_BLOCK);
    *scale = 0.0f;
    return 1;
  }
  float inv;
  rove_q8_scale(vmaxvq_f32(mx), scale, &inv);
  const int32x4_t lo = vdupq_n_s32(-127), hi = vdupq_n_s32(127);
  int16x8_t h[4];
  for (int k = 0; k < 4; k++) {
    const int32x4_t w0 = vminq_s32(hi, vmaxq_s32(lo, vcvtnq_s32_f32(vmulq_n_f32(v[2 * k], inv))));
    const int32x4_t w1 =
        vminq_s32(hi, vmaxq_s32(lo, vcvtnq_s32_f32(vmulq_n_f32(v[2 * k + 1], inv))));
    h[k] = vcombine_s16(vmovn_s32(w0), vmovn_s32(w1));
  }
  vst1q_s8(q, vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1])));
  vst1q_s8(q + 16, vcombine_s8(vmovn_s16(h[2]), vmovn_s16(h[3])));
  return 0;
}

int rove_from_f32__neon(void *dst, int64_t stride, float *scale, const float *src,
                        int64_t src_stride, int64_t n, int32_t d, int32_t type) {
  const int32_t nb = rove_q8_blocks(d), d8 = d / 8 * 8;
  int bad = 0;
  for (int64_t j = 0; j < n; j++) {
    const float *x = src + j * src_stride;
    if (type == ROVE_DTYPE_BF16 || type == ROVE_DTYPE_F16) {
      uint16_t *o = (uint16_t *)dst + j * stride;
      uint32x4_t badv = vdupq_n_u32(0);
      int32_t i = 0;
      if (type == ROVE_DTYPE_F16) {
        const float32x4_t big = vdupq_n_f32(65520.0f), inf = vdupq_n_f32(INFINITY);
        for (; i < d8; i += 8) {
          const float32x4_t v0 = vld1q_f32(x + i), v1 = vld1q_f32(x + i + 4);
          const float32x4_t a0 = vabsq_f32(v0), a1 = vabsq_f32(v1);
          badv = vorrq_u32(badv, vandq_u32(vcgeq_f32(a0, big), vcltq_f32(a0, inf)));
          badv = vorrq_u32(badv, vandq_u32(vcgeq_f32(a1, big), vcltq_f32(a1, inf)));
          vst1q_u16(o + i, vreinterpretq_u16_f16(vcvt_high_f16_f32(vcvt_f16_f32(v0), v1)));
        }
      } else {
        for (; i < d8; i += 8) {
          const uint32x4_t r0 = bf16x4(vld1q_f32(x + i), &badv);
          const uint32x4_t r1 = bf16x4(vld1q_f32(x + i + 4), &badv);
          vst1q_u16(o + i, vcombine_u16(vmovn_u32(r0), vmovn_u32(r1)));
        }
      }
      bad |= vmaxvq_u32(badv) != 0;
      if (i < d) bad |= rove_from_f32__scalar(o + i, 0, NULL, x + i, 0, 1, d - i, type);
    } else if (type == ROVE_DTYPE_Q8) {
      int8_t *o = (int8_t *)dst + j * stride;
      float *sc = scale + j * nb;
      for (int32_t b = 0; b < nb; b++) {
        const int32_t i0 = b * ROVE_Q8_BLOCK;
        if (d - i0 >= ROVE_Q8_BLOCK)
          bad |= q8_block32(o + i0, sc + b, x + i0);
        else /* the short last block */
          bad |= rove_from_f32__scalar(o + i0, 0, sc + b, x + i0, 0, 1, d - i0, type);
      }
    } else {
      memcpy((float *)dst + j * stride, x, sizeof(float) * (size_t)d);
    }
  }
  return bad;
}
