/* The NEON kernel table (fp32, 128-bit FMA). NEON is baseline on aarch64, so dispatch.c
 * selects it whenever it is compiled in (unless ROVE_ISA caps the choice). */
#include "rotate-neon.h"

void rove_rotate_f32__neon(float *dst, int64_t dst_stride, const float *src,
                           int64_t src_stride, int64_t n, int32_t d, const rove_rot *rot,
                           float rot_mul, float pass_mul, int inverse);
void rove_pack_k_f32__neon(float *dst, const float *src, int64_t src_stride, int64_t n,
                           int32_t d, const rove_rot *rot, float rot_mul);
void rove_attn_tile_f32__neon(const rove_tile_args *t);
void rove_finish_f32__neon(float *out, int64_t out_stride, float *lse, const float *o,
                           const float *m, const float *l, int32_t nq, int32_t d,
                           const rove_rot *rot);

const rove_kernels rove_kernels_neon = {
    .isa = ROVE_ISA_NEON,
    .tile_q = ROVE_NEON_TILE_Q,
    .tile_kv = ROVE_NEON_TILE_KV,
    .rotate = rove_rotate_f32__neon,
    .pack_k = rove_pack_k_f32__neon,
    .attn_tile = rove_attn_tile_f32__neon,
    .finish = rove_finish_f32__neon,
};
