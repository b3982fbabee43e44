/* SPDX-License-Identifier: MIT */
/* AVX2 rotation of Q/V rows (rove_rotate_f32__avx2) and rotate-and-pack of K rows
 * (rove_pack_k_f32__avx2). The one-row rotation (pairings, tails, in place) is
 * rove_avx2_rotate_row in rotate-avx2.h; rows are strided views into user memory and are
 * only ever touched inside their d floats.
 *
 * Packed-K layout (private to AVX2): a tile of 64 keys is 4 groups of 16 keys; a group is
 * [d][16] floats (dim-major), so the Q.K^T microkernel loads 16 keys of one dim with two
 * 8-float loads. Key j, dim c sits at (j / 16) * 16 d + c * 16 + j % 16, and a group is
 * 64 d contiguous bytes, read front to back. */
#include <immintrin.h>
#include <string.h>

#include "rotate-avx2.h"

#define AHEAD 4 /* rows between a prefetch and the use of the row */

void rove_rotate_f32__avx2(float *dst, int64_t dst_stride, const float *src,
                           int64_t src_stride, int64_t n, int32_t d, const rove_rot *rot,
                           float rot_mul, float pass_mul, int inverse) {
  for (int64_t i = 0; i < n; i++) {
    if (n > 1 && !rot->cached) rove_avx2_prefetch_row(src, i + AHEAD, src_stride, d);
    const float *c = rot->cos ? rot->cos + i * rove_rot_stride(rot) : NULL;
    const float *s = rot->cos ? rot->sin + i * rove_rot_stride(rot) : NULL;
    rove_avx2_rotate_row(dst + i * dst_stride, src + i * src_stride, d, rot, c, s, rot_mul,
                         pass_mul, inverse);
  }
}

/* Transpose the 8x8 block rows[r][c0 .. c0+8) (row stride ld) into out[cc * 16 + r]. */
static void transpose8_store(float *out, const float *rows, int32_t ld) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(rows + (int64_t)i * ld);
  for (int i = 0; i < 8; i += 2) { /* interleave row pairs */
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) { /* 4-row columns within each 128-bit lane */
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; i++) { /* join the rows 0-3 and 4-7 halves of each column */
    _mm256_storeu_ps(out + i * 16, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(out + (i + 4) * 16, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

/* Where the 8 lanes of keys j0 .. j0+7 (j0 a multiple of 8) start in the packed layout. */
static float *lanes_of(float *dst, int64_t j0, int32_t d) {
  return dst + (j0 / ROVE_AVX2_KGROUP) * ROVE_AVX2_KGROUP * (int64_t)d + j0 % ROVE_AVX2_KGROUP;
}

/* Rows j0 .. j0+7 of the packed tile(s): rotate into tmp (zero rows past n), transpose. */
static void pack8(float *dst, float *tmp, const float *src, int64_t src_stride, int64_t j0,
                  int64_t n, int32_t d, const rove_rot *rot, float rot_mul) {
  for (int64_t r = 0; r < 8; r++) {
    float *y = tmp + r * d;
    const int64_t j = j0 + r;
    if (j >= n) {
      memset(y, 0, (size_t)d * sizeof(float));
      continue;
    }
    const float *c = rot->cos ? rot->cos + j * rove_rot_stride(rot) : NULL;
    const float *s = rot->cos ? rot->sin + j * rove_rot_stride(rot) : NULL;
    rove_avx2_prefetch_row(src, j + 8, src_stride, d); /* the next block's row */
    rove_avx2_rotate_row(y, src + j * src_stride, d, rot, c, s, rot_mul, 1.0f, 0);
  }
  float *g = lanes_of(dst, j0, d);
  int32_t c = 0;
  for (; c + 8 <= d; c += 8) transpose8_store(g + c * ROVE_AVX2_KGROUP, tmp + c, d);
  for (; c < d; c++)
    for (int r = 0; r < 8; r++) g[c * ROVE_AVX2_KGROUP + r] = tmp[r * d + c];
}

void rove_pack_k_f32__avx2(float *dst, const float *src, int64_t src_stride, int64_t n,
                           int32_t d, const rove_rot *rot, float rot_mul) {
  float tmp[8 * ROVE_MAX_HEAD_DIM] __attribute__((aligned(32)));
  const int64_t padded = (n + ROVE_AVX2_TILE_KV - 1) / ROVE_AVX2_TILE_KV * ROVE_AVX2_TILE_KV;
  for (int64_t j0 = 0; j0 < padded; j0 += 8) {
    if (j0 >= n) { /* whole block of padding rows: zero its 8 lanes of every dim */
      float *g = lanes_of(dst, j0, d);
      for (int32_t c = 0; c < d; c++) memset(g + c * ROVE_AVX2_KGROUP, 0, 8 * sizeof(float));
      continue;
    }
    pack8(dst, tmp, src, src_stride, j0, n, d, rot, rot_mul);
  }
}
