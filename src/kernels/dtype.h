/* SPDX-License-Identifier: MIT */
/* Element types (rove_dtype): sizes and the scalar definition of every conversion. The
 * SIMD conversion kernels (convert-<isa>.c) give these results bit for bit (NaN payloads
 * aside: a NaN stays a NaN, quiet).
 *
 *   BF16  the top 16 bits of the fp32 pattern after round-to-nearest-even; NaN -> quiet NaN
 *   F16   IEEE binary16 round-to-nearest-even, subnormals kept; |x| >= 65520 -> +-inf
 *   Q8    per block of ROVE_Q8_BLOCK dims: a = max |x|; scale = a / 127 (fp32);
 *         q = rint(x * (127 / a)) in [-127, 127]; widened as (float)q * scale.
 *         Blocks with a < ROVE_Q8_TINY store scale 0 and q 0 (127 / a would overflow);
 *         when 127 * scale rounds to inf (a near FLT_MAX) scale is the next float down. */
#ifndef ROVE_DTYPE_H
#define ROVE_DTYPE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "rove.h"

#define ROVE_Q8_TINY 0x1p-100f

/* Bytes per element (Q8: the int8 part; its scales are separate). */
static inline int64_t rove_dtype_size(int32_t t) {
  return t == ROVE_DTYPE_F32 ? 4 : t == ROVE_DTYPE_Q8 ? 1 : 2;
}
/* A type a caller's tensor may have (F32, BF16, F16); Q8 exists only as cache storage. */
static inline int rove_dtype_is_tensor(int32_t t) {
  return t == ROVE_DTYPE_F32 || t == ROVE_DTYPE_BF16 || t == ROVE_DTYPE_F16;
}
/* Q8 scales per row of d elements. */
static inline int32_t rove_q8_blocks(int32_t d) { return (d + ROVE_Q8_BLOCK - 1) / ROVE_Q8_BLOCK; }

static inline uint32_t rove_f32_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  return x;
}
static inline float rove_bits_f32(uint32_t x) {
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

static inline uint16_t rove_f32_to_bf16(float f) {
  uint32_t x = rove_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}
static inline float rove_bf16_to_f32(uint16_t h) { return rove_bits_f32((uint32_t)h << 16); }

static inline uint16_t rove_f32_to_f16(float f) {
  const uint32_t b = rove_f32_bits(f), sign = (b >> 16) & 0x8000u, x = b & 0x7fffffffu;
  if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((x >> 13) & 0x3ffu)); /* NaN */
  if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (and inf): inf */
  if (x < 0x38800000u) {                                    /* below 2^-14: subnormal */
    if (x <= 0x33000000u) return (uint16_t)sign;           /* <= 2^-25: ties to 0 */
    const uint32_t m = (x & 0x7fffffu) | 0x800000u, shift = 126u - (x >> 23);
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (r & 1u))) r++;
    return (uint16_t)(sign | r);
  }
  uint32_t r = (x - 0x38000000u) >> 13; /* rebias 127 -> 15 */
  const uint32_t rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
  return (uint16_t)(sign | r);
}
static inline float rove_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return rove_bits_f32(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u));
  if (e) return rove_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
  const float f = (float)m * 0x1p-24f; /* exact: m < 2^10 */
  return sign ? -f : f;
}

/* Q8 scale and multiplier of a block whose largest magnitude is a (finite). */
static inline void rove_q8_scale(float a, float *scale, float *inv) {
  if (a < ROVE_Q8_TINY) {
    *scale = 0.0f;
    *inv = 0.0f;
  } else {
    *scale = a / 127.0f;
    /* near FLT_MAX, 127 * scale can round to inf: take the next float down */
    if (!isfinite(127.0f * *scale)) *scale = nextafterf(*scale, 0.0f);
    *inv = 127.0f / a;
  }
}

#endif
