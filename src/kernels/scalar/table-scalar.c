/* SPDX-License-Identifier: MIT */
/* The scalar kernel table: every slot is the portable reference. */
#include "kernels-scalar.h"

const rove_kernels rove_kernels_scalar = {
    .isa = ROVE_ISA_SCALAR,
    .tile_q = 32,
    .tile_kv = 64,
    .rotate = rove_rotate_f32__scalar,
    .pack_k = rove_pack_k_f32__scalar,
    .attn_tile = rove_attn_tile_f32__scalar,
    .attn_rows = rove_attn_rows_f32__scalar,
    .exp = rove_exp_f32__scalar,
    .to_f32 = rove_to_f32__scalar,
    .from_f32 = rove_from_f32__scalar,
    .angle_accum = rove_angle_accum_f32__scalar,
    .sincos = rove_sincos_f32__scalar,
    .pair_grads = rove_pair_grads_f64__scalar,
    .phase_dots = rove_phase_dots_f64__scalar,
    .gla = {.chunk = rove_gla_chunk_f32__scalar, .steps = rove_gla_steps_f32__scalar,
            .bwd_state = rove_gla_bwd_state_f32__scalar,
            .bwd_grads = rove_gla_bwd_grads_f32__scalar,
            .bwd_dg = rove_gla_bwd_dg_f32__scalar},
    .attn_bwd = rove_attn_bwd_f32__scalar,
};
