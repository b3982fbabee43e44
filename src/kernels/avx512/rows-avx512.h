/* SPDX-License-Identifier: MIT */
/* Internal to the AVX-512 row kernel (attn_rows-avx512.c, its scores in
 * attn_rows_scores-avx512.c) and its GQA group path
 * (attn_rows_g4-avx512.c): their shared definitions and the group path's interface. */
#ifndef ROVE_ROWS_AVX512_H
#define ROVE_ROWS_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "../rows_block.h"

#define BLK ROVE_ROWS_BLOCK
#define INLINE static inline __attribute__((always_inline))

/* Sum of the 16 lanes of each acc[s], the sum of slot s landing in lane 4 (s % 4) + s / 4:
 *   pairs of slots  -> 256-bit halves added  (8 vectors: lanes 0-7 slot 2i, 8-15 slot 2i+1)
 *   pairs of those  -> 128-bit lanes added   (4 vectors: 128-bit lane L = slot 4i + L)
 *   floats 0,1 + 2,3 within the lanes, then 0 + 1: element 4L + f holds slot L + 4f. */
INLINE __m512 reduce16(const __m512 acc[16]) {
  __m512 w[8], x[4], y[2];
  for (int i = 0; i < 8; i++)
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * i], acc[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(acc[2 * i], acc[2 * i + 1], 0xEE));
  for (int i = 0; i < 4; i++)
    x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0xDD));
  for (int i = 0; i < 2; i++)
    y[i] = _mm512_add_ps(_mm512_shuffle_ps(x[2 * i], x[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(x[2 * i], x[2 * i + 1], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], 0x88), _mm512_shuffle_ps(y[0], y[1], 0xDD));
}

/* Slot of the accumulator that reduce16 returns in lane e. */
#define SLOT(e) ((e) / 4 + 4 * ((e) % 4))

/* Keep the loads of K in source order (key by key, each key's vectors in address order):
 * an empty volatile asm that takes the loaded vector pins it to a register at its place
 * among the asms, which keep their order, and keeps the load out of the FMA. That does
 * not forbid hoisting a later load above it; gcc 12 and clang 14 at -O3 emit the loads
 * key by key with it (not a language guarantee). Without it gcc -O3 interleaves the
 * unrolled keys (the first vector of 7 keys, then the second of each ...), a walk 256
 * bytes apart that a Zen 4's hardware prefetchers do not follow: without software
 * prefetch, K alone read at half the speed. The walk of attn_rows_heads relies on them;
 * with the software prefetch of the other paths the order measured the same
 * (docs/performance.md, "The order of the K loads"). The GQA group path's scores
 * (attn_rows_g4-avx512.c) use it to keep each pair of keys' loads side by side, line c of
 * key 0 then line c of key 1. No arithmetic changes. */
#define ROVE_IN_ORDER(v) __asm__ volatile("" : "+v"(v))

/* ---- The GQA group path: P V of 4 query rows that see every key of the block ----
 * Used, on CPUs without the paced preference (AMD), for a panel of 4 rows (a GQA group's
 * rows share each V row read) each of which sees every key of the block, over fp32 V,
 * when d % 32 == 0 (attn_rows-avx512.c block()). O = alpha O + P V for the 4 rows
 * o [4][d] over the nb keys of one run: V rows at v (stride vb bytes), p the scratch rows
 * [4][BLK] from the run's first key; vn: the next block's V rows of this run (run rows;
 * NULL for none) and linear (they are contiguous and the call longer than a block or
 * paged), for the prefetch (attn_rows_g4-avx512.c; l1: prefetch_line's). */
void rove_rows_g4_pv_f32__avx512(float *o, int32_t d, const char *v, int64_t vb, int32_t nb,
                                 int32_t run, const float *p, const float *alpha,
                                 const char *vn, int linear, int l1);

/* ---- The GQA group path: scores of 4 query rows ----
 * Used on CPUs without the paced preference (AMD) by a group of 4 query rows against the
 * n <= 16 keys of a 16-key group of fp32 K rows d = 64 or 128 floats apart (a cache's, a
 * pool block's, or the caller's rows rotated into scratch), masked or not (the mask is
 * applied after the scores), also inside attn_rows_heads: q [4][d] against the n keys at
 * k; row r's score of key j into dst[r BLK + j]. The same FMAs in the same order into each
 * key's accumulator as scores_body with RG = 4 (attn_rows_scores-avx512.c), and the same
 * reduction tree, so the same bits. kn: the next block's rows of the same keys, requested
 * beside the reads (NULL: none; l1: prefetch_line's). */
void rove_rows_g4_scores_f32__avx512(const float *q, const float *k, const char *kn,
                                     int32_t d, int32_t n, float *dst, int l1);

/* ---- Loads and prefetches shared by the row kernel's files ---- */

/* Prefetch the line at integer address a: into L1 (prefetcht0) with l1, else into L2
 * (prefetcht2). rove_rows_args.prefetch_l1 chooses: on a Zen 5 L1 measured 1.04-1.11x
 * faster decode (docs/performance.md, "Session 40"); the other cores were tuned with L2. */
INLINE void prefetch_line(uintptr_t a, int l1) {
  if (l1)
    _mm_prefetch((const char *)a, _MM_HINT_T0);
  else
    _mm_prefetch((const char *)a, _MM_HINT_T2);
}

/* Prefetch the row_bytes of rows [0, n) from p (stride in bytes; prefetch_line's l1);
 * addresses formed as integers may lie past the buffer (harmless). always_inline: a
 * function of prefetches alone has no visible effect to gcc and its calls are dropped. */
INLINE void prefetch_bytes(const void *p, int64_t n, int64_t stride, int64_t row_bytes, int l1) {
  for (int64_t j = 0; j < n; j++) {
    const uintptr_t a = (uintptr_t)p + (uintptr_t)j * (uintptr_t)stride;
    for (int64_t c = 0; c < row_bytes; c += 64) prefetch_line(a + (uintptr_t)c, l1);
  }
}

static inline __mmask16 lanes(int32_t n) { /* lanes 0 .. n-1, n clamped to [0, 16] */
  return (__mmask16)(n >= 16 ? 0xFFFFu : n <= 0 ? 0u : (1u << n) - 1u);
}

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

/* The Q8 scale of element c of a row (scales sc, one per 32 elements), 0 past d (where
 * the load is masked off and the block would not exist). Only a masked section (the last,
 * past d) can reach past d: the others skip the test (with it, pv_body compared and
 * branched per vector and key; the same value either way). */
INLINE float q8_scale(const float *sc, int32_t c, int32_t d, const int T, const int masked) {
  return T == ROVE_DTYPE_Q8 && (!masked || c < d) ? sc[c / ROVE_Q8_BLOCK] : 0.0f;
}

/* ---- The row kernel's scores (attn_rows_scores-avx512.c) ----
 * Scores of RG query rows q [RG][d] against the n <= 16 / RG real keys from k (stride ks
 * elements of the table's type; Q8 scales ksc, nblk per row; the keys past n repeat key
 * n - 1): lane e = row e / (16 / RG), key e % (16 / RG). [type][0, 1, 2 for RG = 1, 2, 4]. */
typedef __m512 (*rove_rows_scores_fn)(const float *q, int32_t d, const void *k, int64_t ks,
                                      const float *ksc, int32_t nblk, int32_t n);
extern const rove_rows_scores_fn rove_rows_scores_tab__avx512[ROVE_DTYPE_COUNT][3];
/* The same for 16 / RG real keys whose rows lie d = 64 or 128 elements apart (the same
 * bits): [type][RG as above][0, 1 for d = 64, 128]. */
typedef __m512 (*rove_rows_scores_dense_fn)(const float *q, const void *k, const float *ksc);
extern const rove_rows_scores_dense_fn
    rove_rows_scores_dense_tab__avx512[ROVE_DTYPE_COUNT][3][2];

#endif
