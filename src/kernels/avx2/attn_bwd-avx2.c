/* SPDX-License-Identifier: MIT */
/* The backward tile (attn_bwd_kernels.h) for avx2: the generic body of attn_bwd_body.h
 * compiled with this ISA's flags, multiply-adds as fmaf (the vectoriser makes vector FMAs),
 * with its exp. */
#include "kernels-avx2.h"

#define ROVE_BWD_MADD(a, b, c) fmaf(a, b, c)
#include "../attn_bwd_body.h"

void rove_attn_bwd_f32__avx2(const rove_bwd_tile *t) { rove_attn_bwd_body(t, rove_exp_f32__avx2); }
