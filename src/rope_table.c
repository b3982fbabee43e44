/* SPDX-License-Identifier: MIT */
/* cos/sin tables for a set of positions.
 *
 * The angle p * w_k is formed in double and reduced mod 2 pi before cos/sin, then stored
 * as float: at positions >= 16k a float product would already lose whole radians.
 *
 * Every entry is one function of its position p, whoever asks and however the positions
 * come (default or explicit, in one call or in chunks, a cache append or an attention
 * call): with p = b + j, b = p rounded down to a multiple of ROPE_BLOCK (0 <= j < 32),
 * the angle addition formulas in double
 *   cos(pw) = cos(bw) cos(jw) - sin(bw) sin(jw),  sin(pw) = sin(bw) cos(jw) + cos(bw) sin(jw)
 * from one libm sin/cos of b w per block (reused while consecutive entries share b) and
 * the plan's table of cos(jw), sin(jw). As accurate as one libm call per entry (the
 * double error, ~1e-16, is far below float rounding; not bitwise the same: an entry
 * within ~1e-16 of a float rounding boundary may round the other way, 1 ulp; j = 0 is
 * libm's value exactly). Runs of positions (the default, a cache's appends, a varlen
 * sequence) cost one libm call per 32 positions; scattered ones one per entry, as
 * before. Explicit positions and the defaults give the same bits, so a K row stored by
 * an append equals the one an attention call rotates on the fly. */
#include <math.h>

#include "rope.h"

#define ROPE_BLOCK ROVE_ROPE_BLOCK
#define ROPE_MAX_HALF 512 /* ROVE_MAX_HEAD_DIM / 2 */
_Static_assert(2 * ROPE_MAX_HALF >= ROVE_MAX_HEAD_DIM, "a table row's pairs fit c0, s0");
_Static_assert((ROPE_BLOCK & (ROPE_BLOCK - 1)) == 0, "p & (ROPE_BLOCK - 1) is p mod it");

static const double two_pi = 6.283185307179586476925286766559;

void rove_rope_steps(double *step, const double *inv_freq, int32_t half) {
  for (int32_t j = 0; j < ROPE_BLOCK; j++)
    for (int32_t k = 0; k < half; k++) {
      step[(2 * j) * half + k] = cos(j * inv_freq[k]);
      step[(2 * j + 1) * half + k] = sin(j * inv_freq[k]);
    }
}

void rove_rope_table(float *cos_t, float *sin_t, const double *inv_freq, int32_t half,
                     const double *step, const int32_t *pos, int64_t pos0, int64_t n) {
  double c0[ROPE_MAX_HALF], s0[ROPE_MAX_HALF];
  int64_t base = 0;
  int have = 0; /* c0, s0 hold the block at base */
  for (int64_t i = 0; i < n; i++) {
    const int64_t p = pos ? (int64_t)pos[i] : pos0 + i;
    const int64_t j = p & (ROPE_BLOCK - 1), b = p - j; /* floor: j >= 0 for p < 0 too */
    if (!have || b != base) {
      for (int32_t k = 0; k < half; k++) {
        const double t = fmod((double)b * inv_freq[k], two_pi);
        c0[k] = cos(t);
        s0[k] = sin(t);
      }
      base = b, have = 1;
    }
    float *c = cos_t + i * half, *s = sin_t + i * half;
    const double *cj = step + (2 * j) * half, *sj = cj + half;
    for (int32_t k = 0; k < half; k++) {
      c[k] = (float)(c0[k] * cj[k] - s0[k] * sj[k]);
      s[k] = (float)(s0[k] * cj[k] + c0[k] * sj[k]);
    }
  }
}
