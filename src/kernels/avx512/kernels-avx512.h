/* The AVX-512 kernels (private to this ISA) and their tile geometry, shared by the packer,
 * the flash tile and the table.
 *
 * Packed K tile (private to this ISA): the tile's TK keys transposed, [d][TK] floats, so
 * row c holds dimension c of keys 0..TK-1 and one zmm load gives 16 keys. Rows past the
 * last key (n .. TK-1) are zero. The flash tile walks query rows in panels of MR rows. */
#ifndef ROVE_KERNELS_AVX512_H
#define ROVE_KERNELS_AVX512_H

#include "../kernels.h"

#define ROVE_AVX512_TK 64 /* keys per tile: 4 zmm of scores per query row */
#define ROVE_AVX512_TQ 96 /* queries per tile: 16 panels of MR rows */
#define ROVE_AVX512_MR 6  /* query rows per register panel: 6 x 4 = 24 zmm accumulators */

void rove_rotate_f32__avx512(float *dst, int64_t dst_stride, const float *src,
                             int64_t src_stride, int64_t n, int32_t d, const rove_rot *rot,
                             float rot_mul, float pass_mul, int inverse);
void rove_pack_k_f32__avx512(float *dst, const float *src, int64_t src_stride, int64_t n,
                             int32_t d, const rove_rot *rot, float rot_mul);
void rove_attn_tile_f32__avx512(const rove_tile_args *t);
void rove_finish_f32__avx512(float *out, int64_t out_stride, float *lse, const float *o,
                             const float *m, const float *l, int32_t nq, int32_t d,
                             const rove_rot *rot);

#endif
