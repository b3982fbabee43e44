/* SPDX-License-Identifier: MIT */
/* Internal to the AVX-512 row kernel (attn_rows-avx512.c) and its GQA group path
 * (attn_rows_g4-avx512.c): how rows of each type are loaded and widened, and the group
 * path's interface. */
#ifndef ROVE_ROWS_AVX512_H
#define ROVE_ROWS_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "../rows_block.h"

#define BLK ROVE_ROWS_BLOCK
#define INLINE static inline __attribute__((always_inline))

#define ESZ ROVE_ESZ

/* 16 elements of type T from element i of p as floats; Q8: times the block's scale sc.
 * masked: only the lanes of mk are read (the others are 0), for the section past d; else
 * plain loads (on Zen 4 masked loads in the P V loop cost a quarter of the GQA decode
 * time: 32:8 x 128, 8192 keys, 5.0 ms against 4.0). */
INLINE __m512 load16(const void *p, int64_t i, __mmask16 mk, const int T, float sc,
                     const int masked) {
  if (T == ROVE_DTYPE_BF16 || T == ROVE_DTYPE_F16) {
    const uint16_t *h = (const uint16_t *)p + i;
    const __m256i x = masked ? _mm256_maskz_loadu_epi16(mk, h) : _mm256_loadu_si256((const __m256i *)h);
    if (T == ROVE_DTYPE_F16) return _mm512_cvtph_ps(x);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(x), 16));
  }
  if (T == ROVE_DTYPE_Q8) {
    const int8_t *b = (const int8_t *)p + i;
    const __m128i x = masked ? _mm_maskz_loadu_epi8(mk, b) : _mm_loadu_si128((const __m128i *)b);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(x)), _mm512_set1_ps(sc));
  }
  return masked ? _mm512_maskz_loadu_ps(mk, (const float *)p + i) : _mm512_loadu_ps((const float *)p + i);
}

/* ---- The GQA group path: P V of 4 query rows that see every key of the block ----
 * Used, on CPUs without the paced preference (AMD), for a panel of 4 rows (a GQA group's
 * rows share each V row read) each of which sees every key of the block, over fp32 V,
 * when d % 32 == 0 (attn_rows-avx512.c block()). O = alpha O + P V for the 4 rows o [4][d] over the
 * nb keys of one run: V rows at v (stride vb bytes), p the scratch rows [4][BLK] from the
 * run's first key; vn: the next block's V rows of this run (run rows; NULL for none) and
 * linear (they are contiguous and the call longer than a block or paged), for the
 * prefetch (attn_rows_g4-avx512.c). */
void rove_rows_g4_pv_f32__avx512(float *o, int32_t d, const char *v, int64_t vb, int32_t nb,
                                 int32_t run, const float *p, const float *alpha,
                                 const char *vn, int linear);

#endif
