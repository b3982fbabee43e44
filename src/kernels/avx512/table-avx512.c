/* SPDX-License-Identifier: MIT */
/* The AVX-512 kernel table (F + DQ + VL + BW; the registry checks the CPU and the OS
 * zmm state). Tile sizes and the packed-K layout are described in kernels-avx512.h. */
#include "kernels-avx512.h"

const rove_kernels rove_kernels_avx512 = {
    .isa = ROVE_ISA_AVX512,
    .tile_q = ROVE_AVX512_TQ,
    .tile_kv = ROVE_AVX512_TK,
    .rotate = rove_rotate_f32__avx512,
    .pack_k = rove_pack_k_f32__avx512,
    .attn_tile = rove_attn_tile_f32__avx512,
    .attn_rows = rove_attn_rows_f32__avx512,
    .rows_next = 1,
    .attn_rows_heads = rove_attn_rows_heads_f32__avx512,
    .exp = rove_exp_f32__avx512,
    .to_f32 = rove_to_f32__avx512,
    .from_f32 = rove_from_f32__avx512,
    .angle_accum = rove_angle_accum_f32__avx512,
    .sincos = rove_sincos_f32__avx512,
    .pair_grads = rove_pair_grads_f64__avx512,
    .phase_dots = rove_phase_dots_f64__avx512,
    .gla = {.chunk = rove_gla_chunk_f32__avx512, .steps = rove_gla_steps_f32__avx512,
            .bwd_state = rove_gla_bwd_state_f32__avx512,
            .bwd_grads = rove_gla_bwd_grads_f32__avx512,
            .bwd_dg = rove_gla_bwd_dg_f32__avx512},
    .attn_bwd = rove_attn_bwd_f32__avx512,
};
