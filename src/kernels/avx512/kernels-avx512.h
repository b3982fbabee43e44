/* SPDX-License-Identifier: MIT */
/* Declarations of every avx512 kernel (one macro, kernels.h) and the AVX-512 tile
 * geometry, shared by the packer, the flash tile and the table.
 *
 * Packed K tile (private to this ISA): the tile's TK keys transposed, [d][TK] floats, so
 * row c holds dimension c of keys 0..TK-1 and one zmm load gives 16 keys. Rows past the
 * last key (n .. TK-1) are zero. The flash tile walks query rows in panels of MR rows. */
#ifndef ROVE_KERNELS_AVX512_H
#define ROVE_KERNELS_AVX512_H

#include "../kernels.h"

ROVE_DECLARE_KERNELS(avx512)
/* The one AVX-512 kernel with no slot in every table (kernels.h: attn_rows_heads). */
void rove_attn_rows_heads_f32__avx512(const rove_rows_args *t, int32_t n_heads,
                                      int64_t head_elems);

#define ROVE_AVX512_TK 64 /* keys per tile: 4 zmm of scores per query row */
#define ROVE_AVX512_TQ 96 /* queries per tile: 16 panels of MR rows */
#define ROVE_AVX512_MR 6  /* query rows per register panel: 6 x 4 = 24 zmm accumulators */

#endif
