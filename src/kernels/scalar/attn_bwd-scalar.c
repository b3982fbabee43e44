/* SPDX-License-Identifier: MIT */
/* The backward tile (attn_bwd_kernels.h) for scalar: the generic body of attn_bwd_body.h
 * with a separate multiply and add (the reference; -ffp-contract is off in C11 builds). */
#include "kernels-scalar.h"

#define ROVE_BWD_MADD(a, b, c) ((a) * (b) + (c))
#include "../attn_bwd_body.h"

void rove_attn_bwd_f32__scalar(const rove_bwd_tile *t) { rove_attn_bwd_body(t, rove_exp_f32__scalar); }
