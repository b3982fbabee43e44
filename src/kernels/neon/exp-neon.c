/* SPDX-License-Identifier: MIT */
/* rove_exp_f32__neon: the exp of the NEON kernels over an array, for the accuracy test.
 * Lanes above 88.37 (outside the range the kernels use, clamped by rove_exp_neon) and NaN
 * lanes are recomputed with libm so that the whole float range is right. dst == src is
 * fine. */
#include <math.h>
#include <string.h>

#include "kernels-neon.h"
#include "exp-neon.h"

/* exp of 4 lanes from in[] into out[] (both 4 floats, may alias). */
static void exp4(float *out, const float *in) {
  const float32x4_t x = vld1q_f32(in);
  const float32x4_t y = rove_exp_neon(x);
  /* lanes above 88.37 or NaN: not (x <= 88.37) */
  const uint32x4_t big = vmvnq_u32(vcleq_f32(x, vdupq_n_f32(88.37f)));
  if (vmaxvq_u32(big) == 0) {
    vst1q_f32(out, y);
    return;
  }
  float xs[4], ys[4];
  uint32_t bs[4];
  vst1q_f32(xs, x);
  vst1q_f32(ys, y);
  vst1q_u32(bs, big);
  for (int l = 0; l < 4; l++)
    if (bs[l]) ys[l] = expf(xs[l]);
  memcpy(out, ys, sizeof ys);
}

void rove_exp_f32__neon(float *dst, const float *src, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) exp4(dst + i, src + i);
  if (i < n) { /* tail through a zero-padded copy: never touch past n */
    float buf[4] = {0};
    memcpy(buf, src + i, (size_t)(n - i) * sizeof(float));
    exp4(buf, buf);
    memcpy(dst + i, buf, (size_t)(n - i) * sizeof(float));
  }
}
