/* SPDX-License-Identifier: MIT */
/* rove_exp_f32__avx512: the inline vector exp of exp-avx512.h over an array, so the
 * accuracy test can sweep every float the softmax may feed it. The tail is handled with
 * masked loads and stores: nothing past src[n-1] / dst[n-1] is touched. */
#include "kernels-avx512.h"
#include "exp-avx512.h"

void rove_exp_f32__avx512(float *dst, const float *src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, rove_exp512_ps(_mm512_loadu_ps(src + i)));
  if (i < n) {
    const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(dst + i, m, rove_exp512_ps(_mm512_maskz_loadu_ps(m, src + i)));
  }
}
