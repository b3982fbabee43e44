/* NEON finish: out_i = R_{P_i}^{-1} (o_i / l_i) (the rotation only when rot->cos),
 * lse_i = m_i + ln l_i; a row that saw no visible key (l_i == 0) gets zeros and -inf.
 * The 1/l factor rides on the rotation's rot_mul/pass_mul, so each row is one pass. */
#include <math.h>
#include <string.h>

#include "rotate-neon.h"

void rove_finish_f32__neon(float *out, int64_t out_stride, float *lse, const float *o,
                           const float *m, const float *l, int32_t nq, int32_t d,
                           const rove_rot *rot) {
  for (int32_t i = 0; i < nq; i++) {
    float *y = out + i * out_stride;
    if (l[i] == 0.0f) {
      memset(y, 0, (size_t)d * sizeof(float));
      if (lse) lse[i] = -INFINITY;
      continue;
    }
    const float inv = 1.0f / l[i];
    const float *c = rot->cos ? rot->cos + (int64_t)i * rove_rot_stride(rot) : NULL;
    const float *s = rot->cos ? rot->sin + (int64_t)i * rove_rot_stride(rot) : NULL;
    rove_neon_rotate_row(y, o + (int64_t)i * d, d, rot, c, s, inv, inv, 1);
    if (lse) lse[i] = m[i] + logf(l[i]);
  }
}
