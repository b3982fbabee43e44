/* SPDX-License-Identifier: MIT */
/* The reference exp slot: libm expf per element (the scalar softmax calls expf too). */
#include <math.h>

#include "kernels-scalar.h"

void rove_exp_f32__scalar(float *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = expf(src[i]);
}
