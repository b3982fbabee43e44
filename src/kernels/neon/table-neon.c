/* SPDX-License-Identifier: MIT */
/* The NEON kernel table (fp32, 128-bit FMA). NEON is baseline on aarch64, so the registry
 * selects it whenever it is compiled in (unless ROVE_ISA caps the choice). */
#include "rotate-neon.h"

const rove_kernels rove_kernels_neon = {
    .isa = ROVE_ISA_NEON,
    .tile_q = ROVE_NEON_TILE_Q,
    .tile_kv = ROVE_NEON_TILE_KV,
    .rotate = rove_rotate_f32__neon,
    .pack_k = rove_pack_k_f32__neon,
    .attn_tile = rove_attn_tile_f32__neon,
    .attn_rows = rove_attn_rows_f32__neon,
    .exp = rove_exp_f32__neon,
    .to_f32 = rove_to_f32__neon,
    .from_f32 = rove_from_f32__neon,
    .angle_accum = rove_angle_accum_f32__neon,
    .sincos = rove_sincos_f32__neon,
    .pair_grads = rove_pair_grads_f64__neon,
    .phase_dots = rove_phase_dots_f64__neon,
    .gla = {.chunk = rove_gla_chunk_f32__neon, .steps = rove_gla_steps_f32__neon,
            .bwd_state = rove_gla_bwd_state_f32__neon,
            .bwd_grads = rove_gla_bwd_grads_f32__neon,
            .bwd_dg = rove_gla_bwd_dg_f32__neon},
    .attn_bwd = rove_attn_bwd_f32__neon,
};
