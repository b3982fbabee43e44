/* SPDX-License-Identifier: MIT */
/* Internal to the AVX-512 row kernel (attn_rows-avx512.c) and its GQA group path
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
 * paged), for the prefetch (attn_rows_g4-avx512.c). */
void rove_rows_g4_pv_f32__avx512(float *o, int32_t d, const char *v, int64_t vb, int32_t nb,
                                 int32_t run, const float *p, const float *alpha,
                                 const char *vn, int linear);

/* ---- The GQA group path: scores of 4 query rows ----
 * Used on CPUs without the paced preference (AMD) by a group of 4 query rows against 4 real
 * keys (the 1-3 keys left at the end of a 16-key group take scores_body) of fp32 K rows d =
 * 64 or 128 floats apart (a cache's, a pool block's, or the caller's rows rotated into
 * scratch), masked or not (the mask is applied after the scores), also inside
 * attn_rows_heads (which the driver takes only for one row of bf16 / f16; kernels.h):
 * q [4][d] against the 4 keys at k. Returns lane e =
 * row e / 4, key e % 4: the same FMAs in the same order into each key's accumulator as
 * scores_body with RG = 4 (attn_rows-avx512.c), and the same reduce16, so the same bits.
 * kn: the next block's rows of the same 4 keys, requested beside the reads (NULL: none). */
__m512 rove_rows_g4_scores_f32__avx512(const float *q, const float *k, const char *kn,
                                       int32_t d);

#endif
