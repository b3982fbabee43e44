/* SPDX-License-Identifier: MIT */
/* The GLA backward sweeps (gla_kernels.h, gla_bwd_body.h) for neon: the generic body compiled with this ISA's flags (the vectoriser makes vector FMAs of fmaf) and its exp. */
#include <math.h>
#include "kernels-neon.h"

#define ROVE_GLA_MADD(a, b, c) fmaf(a, b, c)
#include "../gla_bwd_body.h"

void rove_gla_bwd_state_f32__neon(const rove_gla_bwd_chunk *c) {
  rove_gla_bwd_state_body(c, rove_exp_f32__neon);
}

void rove_gla_bwd_grads_f32__neon(const rove_gla_bwd_chunk *c) {
  rove_gla_bwd_grads_body(c, rove_exp_f32__neon);
}

void rove_gla_bwd_dg_f32__neon(double *carry, float *dg, const float *q, const float *dq,
                               const float *k, const float *dk, int32_t n) {
  rove_gla_dg_body(carry, dg, q, dq, k, dk, n);
}
