/* Selective RoPE tables: cos/sin of explicit (double) angles, and the default
 * temperatures. Angles are reduced mod 2 pi in double before cos/sin, so a float table
 * stays accurate for angles far beyond what a float could hold. */
#include <math.h>

#include "selective.h"

static const double two_pi = 6.283185307179586476925286766559;

void rove_selective_temp_default(int32_t n_pairs, double *temp) {
  const int32_t r = 2 * n_pairs;
  /* the formula of rope_freq.c for theta 500000: w_k = theta^(-2k/r) */
  for (int32_t k = 0; k < n_pairs; k++) temp[k] = pow(500000.0, -(2.0 * k) / r);
}

void rove_angle_table(rove_isa isa, float *cos_t, float *sin_t, const double *angles,
                      int64_t n) {
  (void)isa;
  for (int64_t i = 0; i < n; i++) {
    const double t = fmod(angles[i], two_pi);
    cos_t[i] = (float)cos(t);
    sin_t[i] = (float)sin(t);
  }
}

int rove_angles_finite(const double *angles, int64_t n) {
  int ok = 1;
  for (int64_t i = 0; i < n; i++) ok &= isfinite(angles[i]) != 0;
  return ok;
}
