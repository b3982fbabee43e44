/* SPDX-License-Identifier: MIT */
/* Portable reference conversions between fp32 rows and the storage types (to_f32,
 * from_f32, kernels.h), element by element through the definitions of dtype.h. */
#include "kernels-scalar.h"

void rove_to_f32__scalar(float *dst, int64_t dst_stride, const void *src, int64_t stride,
                         const float *scale, int64_t n, int32_t d, int32_t type) {
  const int32_t nb = rove_q8_blocks(d);
  for (int64_t j = 0; j < n; j++) {
    float *o = dst + j * dst_stride;
    switch (type) {
      case ROVE_DTYPE_BF16: {
        const uint16_t *x = (const uint16_t *)src + j * stride;
        for (int32_t i = 0; i < d; i++) o[i] = rove_bf16_to_f32(x[i]);
        break;
      }
      case ROVE_DTYPE_F16: {
        const uint16_t *x = (const uint16_t *)src + j * stride;
        for (int32_t i = 0; i < d; i++) o[i] = rove_f16_to_f32(x[i]);
        break;
      }
      case ROVE_DTYPE_Q8: {
        const int8_t *x = (const int8_t *)src + j * stride;
        const float *sc = scale + j * nb;
        for (int32_t i = 0; i < d; i++) o[i] = (float)x[i] * sc[i / ROVE_Q8_BLOCK];
        break;
      }
      default:
        memcpy(o, (const float *)src + j * stride, sizeof(float) * (size_t)d);
    }
  }
}

/* One Q8 block of n <= ROVE_Q8_BLOCK values; returns 1 if one is not finite. */
static int q8_block(int8_t *q, float *scale, const float *x, int32_t n) {
  float a = 0.0f;
  int bad = 0;
  for (int32_t i = 0; i < n; i++) {
    bad |= !isfinite(x[i]);
    a = fmaxf(a, fabsf(x[i]));
  }
  if (bad) a = 0.0f; /* the rows are rejected; store something harmless */
  float inv;
  rove_q8_scale(a, scale, &inv);
  for (int32_t i = 0; i < n; i++) {
    float r = bad ? 0.0f : rintf(x[i] * inv);
    r = r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r;
    q[i] = (int8_t)r;
  }
  return bad;
}

int rove_from_f32__scalar(void *dst, int64_t stride, float *scale, const float *src,
                          int64_t src_stride, int64_t n, int32_t d, int32_t type) {
  const int32_t nb = rove_q8_blocks(d);
  int bad = 0;
  for (int64_t j = 0; j < n; j++) {
    const float *x = src + j * src_stride;
    switch (type) {
      case ROVE_DTYPE_BF16: {
        uint16_t *o = (uint16_t *)dst + j * stride;
        for (int32_t i = 0; i < d; i++) {
          o[i] = rove_f32_to_bf16(x[i]);
          bad |= isfinite(x[i]) && (o[i] & 0x7f80u) == 0x7f80u;
        }
        break;
      }
      case ROVE_DTYPE_F16: {
        uint16_t *o = (uint16_t *)dst + j * stride;
        for (int32_t i = 0; i < d; i++) {
          o[i] = rove_f32_to_f16(x[i]);
          bad |= isfinite(x[i]) && (o[i] & 0x7c00u) == 0x7c00u;
        }
        break;
      }
      case ROVE_DTYPE_Q8: {
        int8_t *o = (int8_t *)dst + j * stride;
        for (int32_t b = 0; b < nb; b++) {
          const int32_t i0 = b * ROVE_Q8_BLOCK, m = d - i0 < ROVE_Q8_BLOCK ? d - i0 : ROVE_Q8_BLOCK;
          bad |= q8_block(o + i0, scale + j * nb + b, x + i0, m);
        }
        break;
      }
      default:
        memcpy((float *)dst + j * stride, x, sizeof(float) * (size_t)d);
    }
  }
  return bad;
}
