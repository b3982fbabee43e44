/* SPDX-License-Identifier: MIT */
/* cos/sin tables for a set of positions.
 *
 * The angle p * w_k is formed in double and reduced mod 2 pi before cos/sin, then stored
 * as float: at positions >= 16k a float product would already lose whole radians.
 *
 * Contiguous positions p0 + i (the default) avoid one libm call per entry: within a block
 * of ROPE_BLOCK positions starting at p, the angle addition formulas in double
 *   cos((p+j)w) = cos(pw) cos(jw) - sin(pw) sin(jw),  sin((p+j)w) = sin(pw) cos(jw) + cos(pw) sin(jw)
 * give float values as accurate as one libm call per entry (the double error, ~1e-16,
 * is far below float rounding; not bitwise the same: an entry within ~1e-16 of a float
 * rounding boundary may round the other way, 1 ulp) from one sin/cos per block start and
 * a per-call table of cos(jw), sin(jw). */
#include <math.h>

#include "rope.h"

#define ROPE_BLOCK ROVE_ROPE_BLOCK
#define ROPE_MAX_HALF 512 /* ROVE_MAX_HEAD_DIM / 2 */

static const double two_pi = 6.283185307179586476925286766559;

static void table_direct(float *cos_t, float *sin_t, const double *inv_freq, int32_t half,
                         const int32_t *pos, int64_t pos0, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    double p = pos ? (double)pos[i] : (double)(pos0 + i);
    float *c = cos_t + i * half, *s = sin_t + i * half;
    for (int32_t k = 0; k < half; k++) {
      double t = fmod(p * inv_freq[k], two_pi);
      c[k] = (float)cos(t);
      s[k] = (float)sin(t);
    }
  }
}

void rove_rope_steps(double *step, const double *inv_freq, int32_t half) {
  for (int32_t j = 0; j < ROPE_BLOCK; j++)
    for (int32_t k = 0; k < half; k++) {
      step[(2 * j) * half + k] = cos(j * inv_freq[k]);
      step[(2 * j + 1) * half + k] = sin(j * inv_freq[k]);
    }
}

/* Contiguous positions pos0 .. pos0+n-1 through the angle addition formulas; step: the
 * plan's rove_rope_steps table. */
static void table_blocked(float *cos_t, float *sin_t, const double *inv_freq, int32_t half,
                          const double *step, int64_t pos0, int64_t n) {
  double c0[ROPE_MAX_HALF], s0[ROPE_MAX_HALF];
  for (int64_t b = 0; b < n; b += ROPE_BLOCK) {
    for (int32_t k = 0; k < half; k++) {
      double t = fmod((double)(pos0 + b) * inv_freq[k], two_pi);
      c0[k] = cos(t);
      s0[k] = sin(t);
    }
    const int64_t m = n - b < ROPE_BLOCK ? n - b : ROPE_BLOCK;
    for (int64_t j = 0; j < m; j++) {
      float *c = cos_t + (b + j) * half, *s = sin_t + (b + j) * half;
      const double *cj = step + (2 * j) * half, *sj = cj + half;
      for (int32_t k = 0; k < half; k++) {
        c[k] = (float)(c0[k] * cj[k] - s0[k] * sj[k]);
        s[k] = (float)(s0[k] * cj[k] + c0[k] * sj[k]);
      }
    }
  }
}

void rove_rope_table(float *cos_t, float *sin_t, const double *inv_freq, int32_t half,
                     const double *step, const int32_t *pos, int64_t pos0, int64_t n) {
  if (pos || n < 2 * ROPE_BLOCK || half > ROPE_MAX_HALF)
    table_direct(cos_t, sin_t, inv_freq, half, pos, pos0, n);
  else
    table_blocked(cos_t, sin_t, inv_freq, half, step, pos0, n);
}
