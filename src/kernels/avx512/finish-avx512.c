/* AVX-512 finish of a query tile: out_i = R_{P_i}^{-1} (o_i / l_i), lse_i = m_i + ln l_i.
 *
 * The division by l_i is folded into the inverse rotation as its rot_mul and pass_mul, so
 * each output row is one pass of the rotation kernel (masked to the row's d floats; the
 * output rows are strided views into user memory). A row that saw no visible key
 * (l_i == 0) is written as zeros with LSE -inf, never NaN. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels-avx512.h"

/* The output rows are strided views into user memory that are usually not cached: each
 * row is requested a few rows ahead, so the stores do not wait for their lines in turn. */
#define ROVE_FINISH_AHEAD 8
static inline void prefetch_out(const float *y, int32_t d) {
  for (int32_t c = 0; c < d; c += 16) _mm_prefetch((const char *)(y + c), _MM_HINT_T0);
}

void rove_finish_f32__avx512(float *out, int64_t out_stride, float *lse, const float *o,
                             const float *m, const float *l, int32_t nq, int32_t d,
                             const rove_rot *rot) {
  for (int32_t i = 0; i < nq && i < ROVE_FINISH_AHEAD; i++) prefetch_out(out + i * out_stride, d);
  for (int32_t i = 0; i < nq; i++) {
    float *y = out + i * out_stride;
    if (i + ROVE_FINISH_AHEAD < nq) prefetch_out(y + ROVE_FINISH_AHEAD * out_stride, d);
    if (l[i] == 0.0f) {
      memset(y, 0, (size_t)d * sizeof(float));
      if (lse) lse[i] = -INFINITY;
      continue;
    }
    const float inv = 1.0f / l[i];
    rove_rot row = *rot;
    if (row.cos) {
      row.cos += (int64_t)i * rove_rot_stride(&row);
      row.sin += (int64_t)i * rove_rot_stride(&row);
    }
    rove_rotate_f32__avx512(y, 0, o + (int64_t)i * d, 0, 1, d, &row, inv, inv, 1);
    if (lse) lse[i] = m[i] + logf(l[i]);
  }
}
