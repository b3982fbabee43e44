/* SPDX-License-Identifier: MIT */
/* rove_exp_f32__avx2: the softmax exp of the AVX2 kernels over an array, for the accuracy
 * test. Lanes above 88.37 (outside the range the softmax sees, clamped by rove_exp256)
 * and NaN lanes are recomputed with libm so that the whole float range is right.
 * dst == src is fine. */
#include <math.h>
#include <string.h>

#include "kernels-avx2.h"
#include "exp-avx2.h"

/* exp of 8 lanes from in[] into out[] (both 8 floats, may alias). */
static inline __attribute__((always_inline)) void exp8(float *out, const float *in) {
  const __m256 x = _mm256_loadu_ps(in);
  const __m256 y = rove_exp256(x);
  /* lanes above 88.37 or NaN (rove_exp256 gives 0 for NaN; here NaN propagates) */
  const int big = _mm256_movemask_ps(_mm256_cmp_ps(x, _mm256_set1_ps(88.37f), _CMP_NLE_UQ));
  if (!big) {
    _mm256_storeu_ps(out, y);
    return;
  }
  float xs[8], ys[8];
  _mm256_storeu_ps(xs, x);
  _mm256_storeu_ps(ys, y);
  for (int l = 0; l < 8; l++)
    if (big >> l & 1) ys[l] = expf(xs[l]);
  memcpy(out, ys, sizeof ys);
}

void rove_exp_f32__avx2(float *dst, const float *src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) exp8(dst + i, src + i);
  if (i < n) { /* tail through a zero-padded copy: never touch past n */
    float buf[8] = {0};
    memcpy(buf, src + i, (size_t)(n - i) * sizeof(float));
    exp8(buf, buf);
    memcpy(dst + i, buf, (size_t)(n - i) * sizeof(float));
  }
}
