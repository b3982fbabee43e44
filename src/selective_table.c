/* SPDX-License-Identifier: MIT */
/* Selective RoPE tables: cos/sin of explicit (double) angles through the per-ISA kernels of
 * the kernel table (slot sincos, see kernels/selective_kernels.h), and the default
 * temperatures. Angles are reduced in double
 * before cos/sin, so a float table stays accurate for angles far beyond what a float
 * could hold (the SIMD kernels: Cody-Waite by pi/2 up to 2^40, libm beyond). */
#include <math.h>
#include <string.h>

#include "selective.h"

void rove_selective_temp_default(int32_t n_pairs, double *temp) {
  const double r = 2.0 * n_pairs; /* (an int32 2 * n_pairs overflows past 2^30 pairs) */
  /* the formula of rope_freq.c (base_freqs) for theta 500000: w_k = theta^(-2k/r) */
  for (int32_t k = 0; k < n_pairs; k++) temp[k] = pow(500000.0, -(2.0 * k) / r);
}

void rove_angle_table(const rove_kernels *k, float *cos_t, float *sin_t, const double *angles,
                      int64_t n) {
  if (n > 0) k->sincos(cos_t, sin_t, angles, n);
}

/* Exponent bits all ones = inf or NaN; written on the bits so that the loop vectorises. */
int rove_angles_finite(const double *angles, int64_t n) {
  const uint64_t exp_mask = 0x7FF0000000000000ull;
  uint64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    uint64_t u;
    memcpy(&u, angles + i, sizeof u);
    bad |= (uint64_t)((u & exp_mask) == exp_mask);
  }
  return bad == 0;
}
