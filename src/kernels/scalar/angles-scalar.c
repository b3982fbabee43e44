/* SPDX-License-Identifier: MIT */
/* Selective RoPE reference kernels (see kernels/selective_kernels.h). */
#include <math.h>

#include "kernels-scalar.h"

void rove_angle_accum_f32__scalar(double *c, double *out, const float *phi, const double *temp,
                              int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const double s = c[i] + (double)phi[i]; /* the running sum, in double */
    c[i] = s;
    out[i] = temp[i] * s;
  }
}

/* libm reduces its argument exactly (any magnitude), so this is cos/sin of the exact
 * double angle rounded twice (double, then float): within half a float ulp plus ~1e-16. */
void rove_sincos1_f32(double angle, float *cos_out, float *sin_out) {
  *cos_out = (float)cos(angle);
  *sin_out = (float)sin(angle);
}

void rove_sincos_f32__scalar(float *cos_t, float *sin_t, const double *angles, int64_t n) {
  for (int64_t i = 0; i < n; i++) rove_sincos1_f32(angles[i], cos_t + i, sin_t + i);
}

void rove_pair_grads_f64__scalar(int32_t half, int32_t first, int interleaved, const float *g,
                                 const float *y, double *out, double sign) {
  rove_pair_grads_body(half, first, interleaved, g, y, out, sign);
}

void rove_phase_dots_f64__scalar(double *out, int64_t os, const float *m, int64_t ms,
                                 int64_t rows, const double *v, int64_t vs, int64_t nt,
                                 int64_t n) {
  rove_phase_dots_body(out, os, m, ms, rows, v, vs, nt, n);
}
