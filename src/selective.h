/* Internal: Selective RoPE helpers shared by the attention driver, rove_rotate_angles,
 * the KV cache and GLA (implemented in selective_angles.c / selective_table.c). */
#ifndef ROVE_SELECTIVE_H
#define ROVE_SELECTIVE_H

#include <stdint.h>

#include "kernels/selective_kernels.h"
#include "rove.h"

/* temp[k] = 1 / 500000^(2k/r), r = 2 n_pairs, computed exactly as rove_rope_inv_freq
 * computes w_k for theta 500000 and no scaling. */
void rove_selective_temp_default(int32_t n_pairs, double *temp);

/* cos_t[i] = (float)cos(angles[i]), sin_t[i] = (float)sin(angles[i]) for i < n, the
 * angle reduced in double (so huge angles keep float accuracy). Uses the vectorised kernel
 * of @p isa when it has one (reduction by pi/2 in double, within 1 float ulp of libm up to
 * |angle| = 2^40, libm beyond); the scalar one rounds libm's double cos/sin. */
void rove_angle_table(rove_isa isa, float *cos_t, float *sin_t, const double *angles,
                      int64_t n);

/* The angle accumulation kernel of @p isa (ROVE_ISA_AUTO: the best here). */
rove_angle_accum_fn rove_angle_accum_of(rove_isa isa);

/* Nonzero when every angles[i], i < n, is finite. */
int rove_angles_finite(const double *angles, int64_t n);

#endif
