/* SPDX-License-Identifier: MIT */
/* Internal: Selective RoPE helpers shared by the attention driver, rove_rotate_angles,
 * the KV cache and GLA (implemented in selective_angles.c / selective_table.c). */
#ifndef ROVE_SELECTIVE_H
#define ROVE_SELECTIVE_H

#include <stdint.h>

#include "kernels/kernels.h"
#include "rove.h"

/* temp[k] = 1 / 500000^(2k/r), r = 2 n_pairs, computed exactly as rove_rope_inv_freq
 * computes w_k for theta 500000 and no scaling. */
void rove_selective_temp_default(int32_t n_pairs, double *temp);

/* cos_t[i] = (float)cos(angles[i]), sin_t[i] = (float)sin(angles[i]) for i < n, the
 * angle reduced in double (so huge angles keep float accuracy), through the sincos slot
 * of the caller's table @p k (SIMD: reduction by pi/2 in double, within 1 float ulp of
 * libm up to |angle| = 2^40, libm beyond; scalar: libm's double cos/sin rounded). */
void rove_angle_table(const rove_kernels *k, float *cos_t, float *sin_t, const double *angles,
                      int64_t n);

/* Nonzero when every angles[i], i < n, is finite. */
int rove_angles_finite(const double *angles, int64_t n);

#endif
