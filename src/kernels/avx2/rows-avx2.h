/* SPDX-License-Identifier: MIT */
/* Internal to the AVX2 row kernel (attn_rows-avx2.c) and its GQA group path
 * (attn_rows_g4-avx2.c): how rows of each type are loaded and widened, the score
 * reduction, and the group path's interface. */
#ifndef ROVE_ROWS_AVX2_H
#define ROVE_ROWS_AVX2_H

#include <immintrin.h>
#include <stddef.h>

#include "../rows_block.h"

#define BLK ROVE_ROWS_BLOCK
#define INLINE static inline __attribute__((always_inline))

/* Prefetch the row_bytes of rows [0, n) from p (stride in bytes); addresses formed as
 * integers may lie past the buffer (harmless). always_inline, or gcc drops the calls. */
INLINE void prefetch_bytes(const void *p, int64_t n, int64_t stride, int64_t row_bytes) {
  for (int64_t j = 0; j < n; j++) {
    const uintptr_t a = (uintptr_t)p + (uintptr_t)j * (uintptr_t)stride;
    for (int64_t c = 0; c < row_bytes; c += 64) _mm_prefetch((const char *)(a + (uintptr_t)c), _MM_HINT_T2);
  }
}

#define ESZ ROVE_ESZ

/* 8 elements of type T at element i of p, as floats (Q8: times the block's scale sc). */
INLINE __m256 load8(const void *p, int64_t i, const int T, float sc) {
  if (T == ROVE_DTYPE_BF16) {
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  if (T == ROVE_DTYPE_F16)
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
  if (T == ROVE_DTYPE_Q8) {
    const __m128i b = _mm_loadl_epi64((const __m128i *)((const int8_t *)p + i));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), _mm256_set1_ps(sc));
  }
  return _mm256_loadu_ps((const float *)p + i);
}

/* load8 of the vector at element i of a row of d elements, masked (the last section): fp32
 * reads the lanes of mk; typed rows (d % 8 == 0) read whole vectors before d, 0 past it. */
INLINE __m256 load8m(const void *p, int64_t i, int32_t d, __m256i mk, const int T,
                     const float *sc, const int masked) {
  /* only a masked section reaches past d, where the Q8 block would not exist */
  const float f = T == ROVE_DTYPE_Q8 && (!masked || i < d) ? sc[i / ROVE_Q8_BLOCK] : 0.0f;
  if (!masked) return load8(p, i, T, f);
  if (T == ROVE_DTYPE_F32) return _mm256_maskload_ps((const float *)p + i, mk);
  return i < d ? load8(p, i, T, f) : _mm256_setzero_ps();
}

/* Sum of the 8 lanes of each acc[s], slot s landing in element 4 (s % 2) + s / 2:
 * 128-bit halves of slot pairs added (lane 0: slot 2i, lane 1: slot 2i + 1), then two
 * rounds of hadd: element 4L + f holds slot 2f + L. */
INLINE __m256 reduce8(const __m256 acc[8]) {
  __m256 w[4];
  for (int i = 0; i < 4; i++)
    w[i] = _mm256_add_ps(_mm256_permute2f128_ps(acc[2 * i], acc[2 * i + 1], 0x20),
                         _mm256_permute2f128_ps(acc[2 * i], acc[2 * i + 1], 0x31));
  return _mm256_hadd_ps(_mm256_hadd_ps(w[0], w[1]), _mm256_hadd_ps(w[2], w[3]));
}

/* Slot of the accumulator that reduce8 returns in lane e. */
#define SLOT(e) (2 * ((e) % 4) + (e) / 4)

/* Lanes [r KEYS, r KEYS + KEYS) of s (row r of a group of 8 / KEYS rows) to dst, which has
 * room for KEYS floats (the keys past the block's nb are ignored later). */
static inline void store_row(float *dst, __m256 s, int32_t r, int32_t keys) {
  if (keys == 8) {
    _mm256_storeu_ps(dst, s);
  } else {
    const __m128 h = r * keys < 4 ? _mm256_castps256_ps128(s) : _mm256_extractf128_ps(s, 1);
    if (keys == 4)
      _mm_storeu_ps(dst, h);
    else if (r % 2 == 0)
      _mm_storel_pi((__m64 *)(void *)dst, h);
    else
      _mm_storeh_pi((__m64 *)(void *)dst, h);
  }
}

/* ---- The GQA group path: 4 query rows, every key of the block visible to each ----
 * Used for a row group of 4 (a GQA group's rows share each K and V row read) when the
 * block has no hidden pair and head_dim is a whole number of cache lines of K / V rows
 * (g4_fits). The row kernel's steps in tighter loops: one call per block and row group,
 * d walked a cache line at a time, and the next block's rows prefetched a line per line
 * read (the K line beside the scores' reads of the same line, the V line beside P V's). */

/* Elements of type T in a 64-byte cache line. */
#define LINE_ELEMS(T) (64 / ESZ(T))

static inline int g4_fits(int32_t d, int32_t kt, int32_t vt) {
  return d % LINE_ELEMS(kt) == 0 && d % LINE_ELEMS(vt) == 0 && d % 16 == 0;
}

/* The group path's two steps per (K type, V type): scores of 4 rows against a block's nb
 * keys into scratch rows [4][BLK], then P V into o [4][d] (arguments: g4_scores_body and
 * g4_pv in attn_rows_g4-avx2.c). */
typedef struct rove_g4_fns {
  void (*scores)(const float *q, int32_t d, const char *k, int64_t kb, const float *ksc,
                 int32_t nblk, int32_t nb, float *dst, const char *kn);
  void (*pv)(float *o, int32_t d, const char *v, int64_t vb, const float *vsc, int32_t nblk,
             int32_t nb, const float *p, const float *alpha, const char *vn);
} rove_g4_fns;
extern const rove_g4_fns rove_rows_g4__avx2[ROVE_DTYPE_COUNT][ROVE_DTYPE_COUNT];

#endif
