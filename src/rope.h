/* SPDX-License-Identifier: MIT */
/* Internal: rope frequencies (rope_freq.c) and cos/sin tables (rope_table.c). */
#ifndef ROVE_ROPE_H
#define ROVE_ROPE_H

#include <stdint.h>

#include "rove.h"

/* rope_freq.c: validate the rope part of a config for head_dim (every field, rove.h's
 * table of unread fields included); writes the resolved rotary dim. Returns
 * INVALID_ARGUMENT / UNSUPPORTED as rove_rope_inv_freq documents. The bounds on derived
 * values (m <= 1000, w_k * 2^31 finite) are checked by rove_rope_inv_freq, which every
 * plan creation calls after this. */
rove_status rove_rope_validate(const rove_rope_config *c, int32_t head_dim, int32_t *rotary_dim);

/* rope_table.c: cos/sin [n][half] of angle fmod((double)pos_i * inv_freq[k], 2 pi),
 * pos_i = pos ? pos[i] : pos0 + i, each entry a function of pos_i alone (from its
 * 32-position block's start and the steps; see rope_table.c). step: the plan's
 * rove_rope_steps table for these frequencies. */
void rove_rope_table(float *cos_t, float *sin_t, const double *inv_freq, int32_t half,
                     const double *step, const int32_t *pos, int64_t pos0, int64_t n);

/* The steps of rove_rope_table: step[(2j) half + k] = cos(j w_k),
 * step[(2j + 1) half + k] = sin(j w_k) for j < ROVE_ROPE_BLOCK, ROVE_ROPE_STEPS(half)
 * doubles (a plan makes it once: 4096 libm calls at half = 64, which per 256-row table
 * task cost more than the table itself). */
#define ROVE_ROPE_BLOCK 32
#define ROVE_ROPE_STEPS(half) (2 * ROVE_ROPE_BLOCK * (size_t)(half))
void rove_rope_steps(double *step, const double *inv_freq, int32_t half);

#endif
