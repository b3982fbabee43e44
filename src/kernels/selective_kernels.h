/* SPDX-License-Identifier: MIT */
/* Selective RoPE kernels: angle accumulation and the angle -> cos/sin table.
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

#include "rove.h"

/* Up to here the SIMD reduction is exact enough for float results: the first Cody-Waite
 * step is exact while k (pi/2 count) < 2^52 and |a - k C1| < 2; the lost part of pi/2
 * (5.6e-50 per k) is invisible. 2^40 (1.1e12) leaves wide margins and is tested. */
#define ROVE_SINCOS_BOUND 1099511627776.0

typedef void (*rove_angle_accum_fn)(double *c, double *out, const float *phi,
                                    const double *temp, int64_t n);
typedef void (*rove_sincos_fn)(float *cos_t, float *sin_t, const double *angles, int64_t n);

/* Scalar libm path for one element (the reference and the SIMD kernels' fallback). */
void rove_sincos1_f32(double angle, float *cos_out, float *sin_out);

/* Each ISA's kernels are slots angle_accum and sincos of its table (kernels.h). */

#endif
