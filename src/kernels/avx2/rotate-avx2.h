/* SPDX-License-Identifier: MIT */
/* Shared by the AVX2 kernel files: tile sizes, kernel prototypes, the one-row rotation and
 * a row prefetch. */
#ifndef ROVE_ROTATE_AVX2_H
#define ROVE_ROTATE_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#include "kernels-avx2.h"

#define ROVE_AVX2_TILE_Q 96  /* query rows per tile (16 blocks of 6): K and V stream */
                             /* from L2/L3 once per 96 query rows */
#define ROVE_AVX2_TILE_KV 64 /* keys per tile: 4 groups of 16 */
#define ROVE_AVX2_KGROUP 16  /* keys per packed-K group (two ymm) */

/* Rows are strided views into user memory (a token's heads are one row apart), which the
 * hardware prefetchers pick up late, so the row kernels fetch the lines of a row a few
 * rows ahead. Prefetches never fault, so fetching past a buffer is harmless; the address
 * is formed as an integer, since a pointer past the end of an array would be undefined. */
static inline void rove_avx2_prefetch_row(const float *base, int64_t row, int64_t stride,
                                          int32_t d) {
  const uintptr_t p = (uintptr_t)base + (uintptr_t)row * (uintptr_t)stride * sizeof(float);
  for (int32_t c = 0; c < d; c += 16)
    _mm_prefetch((const char *)(p + sizeof(float) * (uintptr_t)c), _MM_HINT_T0);
}

/* One row of the rotation, inlined into every row loop (the per-row work is a few dozen
 * instructions; a call and its set-up per row cost as much again).
 * Pair k of a row is (x[k], x[k+half]) for HALF pairing and (x[2k], x[2k+1]) for
 * INTERLEAVED; R maps (a, b) -> (a c - b s, a s + b c), the inverse negates s. cos and sin
 * are scaled by rot_mul first, exactly as the scalar reference does. Tails use masked
 * loads and stores, which neither read nor write the lanes past the row's d floats (nor
 * fault on them); every step loads what it reads before it stores, so y == x works. */
#define ROVE_ROT_INLINE static inline __attribute__((always_inline))

/* The first n lanes (n <= 8). */
ROVE_ROT_INLINE __m256i rove_avx2_lanes(int32_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

ROVE_ROT_INLINE __m256 rove_avx2_load(const float *p, int masked, __m256i mk) {
  return masked ? _mm256_maskload_ps(p, mk) : _mm256_loadu_ps(p);
}

ROVE_ROT_INLINE void rove_avx2_store(float *p, __m256 v, int masked, __m256i mk) {
  if (masked)
    _mm256_maskstore_ps(p, mk, v);
  else
    _mm256_storeu_ps(p, v);
}

/* HALF pairing, the 8 pairs from k (the lanes of mk when masked): contiguous runs of a
 * and of b, so no shuffle. cm, sm: rot_mul and +-rot_mul. */
ROVE_ROT_INLINE void rove_avx2_half8(float *y, const float *x, int32_t half, const float *c,
                                     const float *s, __m256 cm, __m256 sm, int32_t k,
                                     int masked, __m256i mk) {
  const __m256 a = rove_avx2_load(x + k, masked, mk);
  const __m256 b = rove_avx2_load(x + half + k, masked, mk);
  const __m256 cs = _mm256_mul_ps(rove_avx2_load(c + k, masked, mk), cm);
  const __m256 sn = _mm256_mul_ps(rove_avx2_load(s + k, masked, mk), sm);
  rove_avx2_store(y + k, _mm256_fmsub_ps(a, cs, _mm256_mul_ps(b, sn)), masked, mk);
  rove_avx2_store(y + half + k, _mm256_fmadd_ps(a, sn, _mm256_mul_ps(b, cs)), masked, mk);
}

/* INTERLEAVED pairing, the 4 pairs from k (8 floats; the lanes of mk when masked). With
 * C = (c0 c0 c1 c1 ..) and S = (-s0 s0 -s1 s1 ..), y = x C + swap(x) S, where swap
 * exchanges a and b within each pair. sm holds (-sm, sm) lane pairs. */
ROVE_ROT_INLINE void rove_avx2_inter4(float *y, const float *x, const float *c, const float *s,
                                      __m256 cm, __m256 sm, int32_t k, int masked, __m256i mk) {
  const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0); /* one mask lane per pair */
  const __m128i mk4 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(mk, even));
  const __m128 c4 = masked ? _mm_maskload_ps(c + k, mk4) : _mm_loadu_ps(c + k);
  const __m128 s4 = masked ? _mm_maskload_ps(s + k, mk4) : _mm_loadu_ps(s + k);
  const __m256 cs = _mm256_mul_ps(_mm256_permutevar8x32_ps(_mm256_castps128_ps256(c4), dup), cm);
  const __m256 sn = _mm256_mul_ps(_mm256_permutevar8x32_ps(_mm256_castps128_ps256(s4), dup), sm);
  const __m256 v = rove_avx2_load(x + 2 * k, masked, mk);
  const __m256 sw = _mm256_permute_ps(v, 0xB1); /* (b0 a0 b1 a1 ..) */
  rove_avx2_store(y + 2 * k, _mm256_fmadd_ps(v, cs, _mm256_mul_ps(sw, sn)), masked, mk);
}

/* y[i] = x[i] * mul for i in [0, n). */
ROVE_ROT_INLINE void rove_avx2_scale_run(float *y, const float *x, int32_t n, float mul) {
  const __m256 vm = _mm256_set1_ps(mul);
  const __m256i none = _mm256_setzero_si256();
  int32_t i = 0;
  for (; i + 8 <= n; i += 8)
    rove_avx2_store(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vm), 0, none);
  if (i < n) {
    const __m256i mk = rove_avx2_lanes(n - i);
    rove_avx2_store(y + i, _mm256_mul_ps(_mm256_maskload_ps(x + i, mk), vm), 1, mk);
  }
}

/* y = rot_mul * R^{+-1} x on the rotated dims, pass_mul * x on the rest (one row; c and s
 * point at this row's r/2 values, NULL = no rotation). The rotated block starts at
 * rot->first: dims before it are a pass-through run, then the row from there on is
 * rotated as a FIRST-placed row (kernels.h). */
ROVE_ROT_INLINE void rove_avx2_rotate_row(float *y, const float *x, int32_t d,
                                          const rove_rot *rot, const float *c, const float *s,
                                          float rot_mul, float pass_mul, int inverse) {
  const int32_t half = rot->half;
  const float sgn = inverse ? -rot_mul : rot_mul;
  const __m256 cm = _mm256_set1_ps(rot_mul);
  const __m256i none = _mm256_setzero_si256();
  if (!c) {
    rove_avx2_scale_run(y, x, d, pass_mul);
    return;
  }
  if (rot->first) { /* ROVE_ROTARY_LAST: the leading pass-through dims */
    const int32_t f = rot->first;
    rove_avx2_scale_run(y, x, f, pass_mul);
    y += f, x += f, d -= f;
  }
  int32_t k = 0;
  if (rot->pairing == ROVE_PAIRING_HALF) {
    const __m256 sm = _mm256_set1_ps(sgn);
    for (; k + 8 <= half; k += 8) rove_avx2_half8(y, x, half, c, s, cm, sm, k, 0, none);
    if (k < half) rove_avx2_half8(y, x, half, c, s, cm, sm, k, 1, rove_avx2_lanes(half - k));
  } else {
    const __m256 sm = _mm256_setr_ps(-sgn, sgn, -sgn, sgn, -sgn, sgn, -sgn, sgn);
    for (; k + 4 <= half; k += 4) rove_avx2_inter4(y, x, c, s, cm, sm, k, 0, none);
    if (k < half) rove_avx2_inter4(y, x, c, s, cm, sm, k, 1, rove_avx2_lanes(2 * (half - k)));
  }
  if (2 * half < d) rove_avx2_scale_run(y + 2 * half, x + 2 * half, d - 2 * half, pass_mul);
}

#endif
