/* SPDX-License-Identifier: MIT */
/* Selective RoPE kernels: angle accumulation, the angle -> cos/sin table, the angle
 * gradients of a row, and the dot products of the phase network.
 *
 * (a) accum: one token row of n elements (the contiguous (head, pair) entries of one token):
 *       c[i] += (double)phi[i];   out[i] = temp[i] * c[i]
 *     temp is already expanded to one entry per element (temp[i] = temp_k of the pair of
 *     element i). Two IEEE operations per element, no contraction possible, so every ISA
 *     gives bit-identical results (the tests check it). out may not alias c, phi or temp.
 *
 * (b) sincos: cos_t[i] = cos(angles[i]), sin_t[i] = sin(angles[i]) as float, for double
 *     angles of any magnitude. Scalar: libm cos/sin of the double angle, rounded to float
 *     (the reference). SIMD: Cody-Waite reduction by pi/2 in double (three-part pi/2, FMA,
 *     so the first step is exact), then polynomials in double on [-pi/4, pi/4]; results
 *     within 1 float ulp of the correctly rounded value (the double result is within
 *     ~1e-11 of the truth before rounding). Elements with |angle| > ROVE_SINCOS_BOUND, or
 *     not finite, go through the scalar libm path (NaN for inf/NaN).
 *
 * No alignment is required of any pointer; nothing past element n-1 is read or written.
 */
#ifndef ROVE_SELECTIVE_KERNELS_H
#define ROVE_SELECTIVE_KERNELS_H

#include <stdint.h>
#include <string.h>

#include "rove.h"

/* Up to here the SIMD reduction is exact enough for float results: the first Cody-Waite
 * step is exact while k (pi/2 count) < 2^52 and |a - k C1| < 2; the lost part of pi/2
 * (5.6e-50 per k) is invisible. 2^40 (1.1e12) leaves wide margins and is tested. */
#define ROVE_SINCOS_BOUND 1099511627776.0

typedef void (*rove_angle_accum_fn)(double *c, double *out, const float *phi,
                                    const double *temp, int64_t n);
typedef void (*rove_sincos_fn)(float *cos_t, float *sin_t, const double *angles, int64_t n);

/* (c) pair_grads: the angle gradients of one row (a backward's d angles). A pair
 *     (y_a, y_b) = R(t) (x_a, x_b) has d y / d t = (-y_b, y_a), so with g = dLoss / d y,
 *     dLoss / d t = g_b y_a - g_a y_b. Adds sign times that (sign -1 for an inverse
 *     rotation) for the `half` pairs of one row to out[half]; the rotated dims start at
 *     `first`, paired (k, k + half) or, interleaved, (2k, 2k + 1). A zero gradient
 *     component adds nothing (it may meet a NaN of a key no query sees). Every ISA's
 *     kernel is rove_pair_grads_body compiled with its flags: the same double operations
 *     per pair (no contraction: -ffp-contract=off), so the same bits. */
typedef void (*rove_pair_grads_fn)(int32_t half, int32_t first, int interleaved, const float *g,
                                   const float *y, double *out, double sign);

/* y, or +0 where g is 0 (a float select on the bits, which vectorises). */
static inline float rove_zero_unless(float y, float g) {
  uint32_t b;
  memcpy(&b, &y, sizeof b);
  b &= 0u - (uint32_t)(g != 0.0f);
  memcpy(&y, &b, sizeof b);
  return y;
}

/* One pair's term g_b y_a - g_a y_b in double (float products are exact there); 0.0 is
 * added first, so with y replaced by +0 where its g is 0 the value is the same bit for
 * bit as skipping the += / -= would give (0.0 + x and x - (+-0) leave every sum of that
 * form as it was). */
static inline double rove_pair_term(float ga, float gb, float ya, float yb) {
  return (0.0 + (double)gb * rove_zero_unless(ya, gb)) - (double)ga * rove_zero_unless(yb, ga);
}

static inline void rove_pair_grads_body(int32_t half, int32_t first, int interleaved,
                                        const float *g, const float *y, double *restrict out,
                                        double sign) {
  const float *gf = g + first, *yf = y + first;
  if (interleaved)
    for (int32_t k = 0; k < half; k++)
      out[k] += sign * rove_pair_term(gf[2 * k], gf[2 * k + 1], yf[2 * k], yf[2 * k + 1]);
  else
    for (int32_t k = 0; k < half; k++)
      out[k] += sign * rove_pair_term(gf[k], gf[k + half], yf[k], yf[k + half]);
}

/* (d) phase_dots: the projections of the phase network (selective_phase_token.c), many
 *     dot products of float weight rows with double vectors at once:
 *       out[t * os + j] = sum_i (double)m[j * ms + i] * v[t * vs + i],  t < nt, j < rows
 *     over i < n. Each product is rounded to double, then added (multiply, then add: no
 *     FMA; the library builds with -ffp-contract=off) into one of 8 partial sums, s_l over
 *     the i with i % 8 == l in increasing i (all s_l start at +0); the result is
 *     ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)).
 *     So every ISA, blocking and token grouping gives the same bits (a SIMD kernel's
 *     lanes are the s_l; a masked tail adds +0, which leaves a sum that started at +0 as
 *     it was). Used with n up to in_dim * n_heads and rows up to n_heads * n_pairs. out may
 *     not overlap m or v. */
typedef void (*rove_phase_dots_fn)(double *out, int64_t os, const float *m, int64_t ms,
                                   int64_t rows, const double *v, int64_t vs, int64_t nt,
                                   int64_t n);

/* The portable phase_dots (the scalar and NEON kernels compile it with their flags). */
static inline void rove_phase_dots_body(double *restrict out, int64_t os,
                                        const float *restrict m, int64_t ms, int64_t rows,
                                        const double *restrict v, int64_t vs, int64_t nt,
                                        int64_t n) {
  for (int64_t t = 0; t < nt; t++)
    for (int64_t j = 0; j < rows; j++) {
      const float *mj = m + j * ms;
      const double *vt = v + t * vs;
      double s[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) s[l] += (double)mj[i + l] * vt[i + l];
      for (int l = 0; i + l < n; l++) s[l] += (double)mj[i + l] * vt[i + l];
      out[t * os + j] = ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
    }
}

/* Scalar libm path for one element (the reference and the SIMD kernels' fallback). */
void rove_sincos1_f32(double angle, float *cos_out, float *sin_out);

/* Each ISA's kernels are slots angle_accum, sincos, pair_grads and phase_dots of its table
 * (kernels.h). */

#endif
