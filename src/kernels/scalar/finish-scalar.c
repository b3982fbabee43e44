/* Portable reference finish: out_i = R_{P_i}^{-1} (o_i / l_i), lse_i = m_i + ln l_i. */
#include <math.h>
#include <string.h>

#include "../kernels.h"

void rove_finish_f32__scalar(float *out, int64_t out_stride, float *lse, const float *o,
                             const float *m, const float *l, int32_t nq, int32_t d,
                             const rove_rot *rot) {
  for (int32_t i = 0; i < nq; i++) {
    float *y = out + i * out_stride;
    if (l[i] == 0.0f) {  /* no visible key */
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
    rove_rotate_f32__scalar(y, 0, o + (int64_t)i * d, 0, 1, d, &row, inv, inv, 1);
    if (lse) lse[i] = m[i] + logf(l[i]);
  }
}
