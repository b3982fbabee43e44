/* SPDX-License-Identifier: MIT */
/* The GLA backward sweeps (gla_kernels.h, gla_bwd_body.h) for scalar: the portable reference (a multiply and an add, libm exp): the truth the SIMD builds are tested against. */
#include "kernels-scalar.h"

#define ROVE_GLA_MADD(a, b, c) ((a) * (b) + (c))
#include "../gla_bwd_body.h"

void rove_gla_bwd_state_f32__scalar(const rove_gla_bwd_chunk *c) {
  rove_gla_bwd_state_body(c, rove_exp_f32__scalar);
}

void rove_gla_bwd_grads_f32__scalar(const rove_gla_bwd_chunk *c) {
  rove_gla_bwd_grads_body(c, rove_exp_f32__scalar);
}

void rove_gla_bwd_dg_f32__scalar(double *carry, float *dg, const float *q, const float *dq,
                                 const float *k, const float *dk, int32_t n) {
  rove_gla_dg_body(carry, dg, q, dq, k, dk, n);
}
