/* SPDX-License-Identifier: MIT */
/* The AVX2 + FMA kernel table (selected when the CPU has both; see src/isa_registry.c). */
#include "rotate-avx2.h"

const rove_kernels rove_kernels_avx2 = {
    .isa = ROVE_ISA_AVX2,
    .tile_q = ROVE_AVX2_TILE_Q,
    .tile_kv = ROVE_AVX2_TILE_KV,
    .rotate = rove_rotate_f32__avx2,
    .pack_k = rove_pack_k_f32__avx2,
    .attn_tile = rove_attn_tile_f32__avx2,
    .attn_rows = rove_attn_rows_f32__avx2,
    .rows_next = 1,
    .exp = rove_exp_f32__avx2,
    .to_f32 = rove_to_f32__avx2,
    .from_f32 = rove_from_f32__avx2,
    .angle_accum = rove_angle_accum_f32__avx2,
    .sincos = rove_sincos_f32__avx2,
    .pair_grads = rove_pair_grads_f64__avx2,
    .phase_dots = rove_phase_dots_f64__avx2,
    .gla = {.chunk = rove_gla_chunk_f32__avx2, .steps = rove_gla_steps_f32__avx2,
            .bwd_state = rove_gla_bwd_state_f32__avx2,
            .bwd_grads = rove_gla_bwd_grads_f32__avx2,
            .bwd_dg = rove_gla_bwd_dg_f32__avx2},
    .attn_bwd = rove_attn_bwd_f32__avx2,
};
