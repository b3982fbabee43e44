/* SPDX-License-Identifier: MIT */
/* Shared by the NEON kernel files: the table's tile sizes and the one-row rotation. */
#ifndef ROVE_ROTATE_NEON_H
#define ROVE_ROTATE_NEON_H

#include <stdint.h>

#include "kernels-neon.h"

#define ROVE_NEON_TILE_Q 32  /* query rows per tile: 8 blocks of the 4-row microkernel */
#define ROVE_NEON_TILE_KV 64 /* keys per tile: 4 groups of 16 */
#define ROVE_NEON_KGROUP 16  /* keys per packed-K group (four q registers) */

/* y = rot_mul * R^{+-1} x on the rotated dims, pass_mul * x on the rest (one row; c and s
 * point at this row's r/2 cos and sin values, c == NULL: no rotation; the rotated block
 * starts at rot->first). y == x is allowed. */
void rove_neon_rotate_row(float *y, const float *x, int32_t d, const rove_rot *rot,
                          const float *c, const float *s, float rot_mul, float pass_mul,
                          int inverse);

#endif
