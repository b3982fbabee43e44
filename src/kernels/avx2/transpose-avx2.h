/* SPDX-License-Identifier: MIT */
/* 8 x 8 float transposes in ymm registers for the AVX2 GLA kernels (static inline: each
 * file that uses them includes this). */
#ifndef ROVE_TRANSPOSE_AVX2_H
#define ROVE_TRANSPOSE_AVX2_H

#include <immintrin.h>
#include <stdint.h>

/* dst[i][0..7] (row stride ld) = column i of the 8 x 8 tile r (row j = r[j]): 32-bit,
 * then 64-bit interleaves inside 128-bit lanes, then a swap of the lanes. */
static inline __attribute__((always_inline)) void rove_avx2_transpose8(float *dst, int64_t ld,
                                                                       const __m256 *r) {
  __m256 t[8], u[8];
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int j = 0; j < 8; j += 4) { /* u[j + e], lane L: column 4L + e of rows j .. j+3 */
    u[j] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int e = 0; e < 4; e++) {
    _mm256_storeu_ps(dst + e * ld, _mm256_permute2f128_ps(u[e], u[4 + e], 0x20));
    _mm256_storeu_ps(dst + (4 + e) * ld, _mm256_permute2f128_ps(u[e], u[4 + e], 0x31));
  }
}

/* dst[c][r] = src[r][c] for r < rows, c < cols (src row stride ls, dst row stride ld):
 * 8 x 8 tiles through registers, the edges one float at a time. */
static inline void rove_avx2_transpose(float *dst, int64_t ld, const float *src, int64_t ls,
                                       int32_t rows, int32_t cols) {
  const int32_t r8 = rows & ~7, c8 = cols & ~7;
  for (int32_t r = 0; r < r8; r += 8)
    for (int32_t c = 0; c < c8; c += 8) {
      __m256 x[8];
      for (int j = 0; j < 8; j++) x[j] = _mm256_loadu_ps(src + (r + j) * ls + c);
      rove_avx2_transpose8(dst + c * ld + r, ld, x);
    }
  for (int32_t r = 0; r < rows; r++)
    for (int32_t c = r < r8 ? c8 : 0; c < cols; c++) dst[c * ld + r] = src[r * ls + c];
}

#endif
