/* SPDX-License-Identifier: MIT */
/* Portable reference rotation: the truth every SIMD rotate/pack kernel is tested against.
 *
 * Pair k of a head vector x is (x[k], x[k+half]) for HALF pairing and (x[2k], x[2k+1])
 * for INTERLEAVED; R_t maps (a, b) -> (a cos t - b sin t, a sin t + b cos t), and the
 * inverse negates sin. The rotated block starts at dim rot->first (kernels.h): dims
 * [0, first) and first + 2*half .. d-1 are passed through (times pass_mul). */
#include <string.h>

#include "kernels-scalar.h"

static void rotate_row(float *y, const float *x, int32_t d, const rove_rot *rot, const float *c,
                       const float *s, float rot_mul, float pass_mul, int inverse) {
  const int32_t half = rot->half;
  const int32_t stride = rot->pairing == ROVE_PAIRING_HALF ? 1 : 2;  /* index of a */
  const int32_t off = rot->pairing == ROVE_PAIRING_HALF ? half : 1;  /* b = a + off */
  const float sign = inverse ? -1.0f : 1.0f;
  for (int32_t k = 0; k < half; k++) {
    const int32_t ia = k * stride, ib = ia + off;
    const float a = x[ia], b = x[ib];
    const float cs = c[k] * rot_mul, sn = s[k] * sign * rot_mul;
    y[ia] = a * cs - b * sn;
    y[ib] = a * sn + b * cs;
  }
  for (int32_t i = 2 * half; i < d; i++) y[i] = x[i] * pass_mul;
}

void rove_rotate_f32__scalar(float *dst, int64_t dst_stride, const float *src,
                             int64_t src_stride, int64_t n, int32_t d, const rove_rot *rot,
                             float rot_mul, float pass_mul, int inverse) {
  for (int64_t i = 0; i < n; i++) {
    float *y = dst + i * dst_stride;
    const float *x = src + i * src_stride;
    if (!rot->cos) {
      for (int32_t j = 0; j < d; j++) y[j] = x[j] * pass_mul;
      continue;
    }
    const int32_t f = rot->first; /* pass-through dims before the rotated block */
    for (int32_t j = 0; j < f; j++) y[j] = x[j] * pass_mul;
    rotate_row(y + f, x + f, d - f, rot, rot->cos + i * rove_rot_stride(rot),
               rot->sin + i * rove_rot_stride(rot), rot_mul, pass_mul, inverse);
  }
}

/* Scalar packed-K layout: [round_up(n, tile_kv)][d] rows, zero past n. */
void rove_pack_k_f32__scalar(float *dst, const float *src, int64_t src_stride, int64_t n,
                             int32_t d, const rove_rot *rot, float rot_mul) {
  rove_rotate_f32__scalar(dst, d, src, src_stride, n, d, rot, rot_mul, 1.0f, 0);
  const int64_t tile = rove_kernels_scalar.tile_kv;
  const int64_t padded = (n + tile - 1) / tile * tile;
  if (padded > n) memset(dst + n * d, 0, (size_t)((padded - n) * d) * sizeof(float));
}
