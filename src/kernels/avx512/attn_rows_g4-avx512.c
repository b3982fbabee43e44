/* SPDX-License-Identifier: MIT */
/* The AVX-512 row kernel's GQA group path (rows-avx512.h; used by attn_rows-avx512.c's
 * block_scores() and block_pv()) on CPUs without the paced preference (AMD):
 *  - scores of 4 query rows against up to 16 keys of fp32 rows d = 64 or 128 floats
 *    apart: two keys at a time, both read a line at a time side by side (line c of key 0,
 *    line c of key 1, then line c + 1 ...) in 256-bit halves, q as the FMAs' memory
 *    operand, the next block's same two lines requested beside each pair of reads;
 *  - P V of 4 query rows over a run of a block's keys, every key visible to each row,
 *    fp32 V: one call per run, d in sections of 32 floats (8 accumulators, against
 *    pv_body's 64 and 16), and per key the lines of the next block's V rows that the
 *    section owns prefetched beside its read.
 * The arithmetic and its order are the row kernel's (scores_body with RG = 4, pv_body
 * with R = 4), so the results are the same bits; only the walk differs. Only fp32 K and V:
 * bf16 and f16 K and V measured slower this way (docs/performance.md). */
#include <immintrin.h>
#include <stdint.h>

#include "kernels-avx512.h"
#include "rows-avx512.h"

/* Prefetch the two lines from byte off of base: the 128 bytes there when off is a multiple
 * of 64 from a line-aligned base (a cache's rows). Integer addresses, which may lie past
 * the buffer: harmless. l1: prefetch_line's. */
INLINE void prefetch_128(const char *base, int64_t off, const int l1) {
  const uintptr_t a = (uintptr_t)base + (uintptr_t)off;
  prefetch_line(a, l1);
  prefetch_line(a + 64, l1);
}

/* Scores of 4 rows against 2 keys k0, k1 (k1 may be k0), fp32 rows of D = 64 or 128 floats
 * (a constant): both keys read a line at a time side by side, each line as two 256-bit
 * halves, and each accumulator of scores_body with RG = 4 (key j of row r over lanes 0-15 of
 * every 16 floats of d, in order) kept as its two 8-lane halves in ymm registers: per lane
 * the same FMAs in the same order. The halves' sum is reduce16's first level (the 256-bit
 * halves added) and the rest is reduce16's tree for 8 slots, so each score is the same
 * bits as scores_body's (a NaN score's sign and payload aside, which already differ between
 * scores_body's own forms: row_softmax turns any NaN row into the same poisoned row).
 * Returns element 4 r + j = row r, key j. q is read from L1 as the
 * FMAs' memory operand (an empty asm on its pointer keeps gcc from holding its vectors in
 * registers). kn: the rows to request beside the reads, a line per line read (k0's, then
 * D floats on: the next block's rows of the two keys, or rows_heads' walk ahead), NULL
 * for none; integer addresses, which may lie past the buffer.
 *
 * Why 256-bit halves (docs/performance.md, "Session 40"): on a Zen 5, 32:8 x 128, 32768
 * keys, one thread (`ab_decode`, alternated against the build before, whose 4 keys a call
 * with 512-bit loads read at 52-62 % of the read): 2 keys with 512-bit loads the same
 * speed; 4 keys with 256-bit loads 1.07-1.10x faster; 2 keys with 256-bit loads and
 * 512-bit FMAs 1.09-1.14x; this form 1.17-1.27x (65-72 % of the read), and 1.02x the
 * AVX2 kernel's scores in the same kernel. The arithmetic is the same in all of them: the
 * K stream's loads set the pace, not the FMAs. */
INLINE __m512 g4_pair(const float *q, const float *k0, const float *k1, const char *kn,
                      const int D, const int L1) {
  __m256 lo[8], hi[8]; /* slot r + 4 j: row r, key j */
#pragma GCC unroll 8
  for (int s = 0; s < 8; s++) lo[s] = hi[s] = _mm256_setzero_ps();
  const float *qq = q;
  __asm__ volatile("" : "+r"(qq));
#pragma GCC unroll 8
  for (int x = 0; x < D / 16; x++) {
    if (kn) { /* the same line of the next block's two keys (integer addresses) */
      const uintptr_t pa = (uintptr_t)kn + (uintptr_t)(16 * x) * 4;
      prefetch_line(pa, L1);
      prefetch_line(pa + 4 * D, L1);
    }
    __m256 a0 = _mm256_loadu_ps(k0 + 16 * x), a1 = _mm256_loadu_ps(k0 + 16 * x + 8);
    __m256 b0 = _mm256_loadu_ps(k1 + 16 * x), b1 = _mm256_loadu_ps(k1 + 16 * x + 8);
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(b0), "+v"(b1)); /* loads in order */
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
      const __m256 q0 = _mm256_loadu_ps(qq + r * D + 16 * x);
      const __m256 q1 = _mm256_loadu_ps(qq + r * D + 16 * x + 8);
      lo[r] = _mm256_fmadd_ps(q0, a0, lo[r]);
      hi[r] = _mm256_fmadd_ps(q1, a1, hi[r]);
      lo[r + 4] = _mm256_fmadd_ps(q0, b0, lo[r + 4]);
      hi[r + 4] = _mm256_fmadd_ps(q1, b1, hi[r + 4]);
    }
  }
  /* reduce16's levels for 8 slots: w[i] lanes 0-7 slot 2i's halves added, 8-15 slot
   * 2i + 1's; then 128-bit lane L of x[i] = slot 4 i + L; then floats 0,1 + 2,3 within the
   * lanes and 0 + 1: element 4 L + f holds slot L + 4 f */
  __m512 w[4], x[2];
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++)
    w[i] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_add_ps(lo[2 * i], hi[2 * i])),
                              _mm256_add_ps(lo[2 * i + 1], hi[2 * i + 1]), 1);
#pragma GCC unroll 2
  for (int i = 0; i < 2; i++)
    x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0xDD));
  const __m512 y = _mm512_add_ps(_mm512_shuffle_ps(x[0], x[1], 0x44),
                                 _mm512_shuffle_ps(x[0], x[1], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_ps(y, y, 0x88), _mm512_shuffle_ps(y, y, 0xDD));
}

/* The n keys at k (rows D floats apart) two at a time (an odd last key paired with
 * itself), row r's scores into dst[r BLK + j]. */
INLINE void g4_scores_body(const float *q, const float *k, const char *kn, int32_t n,
                           float *dst, const int D, const int L1) {
  for (int32_t j = 0; j < n; j += 2) {
    const float *k0 = k + (int64_t)j * D, *k1 = j + 1 < n ? k0 + D : k0;
    const char *pf = kn ? kn + (int64_t)j * D * 4 : NULL;
    const __m512 s = g4_pair(q, k0, k1, pf, D, L1);
    const unsigned m = j + 1 < n ? 0x3u : 0x1u;
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) /* elements 4 r, 4 r + 1 to dst[r BLK + j ..] */
      _mm512_mask_storeu_ps(dst + r * BLK + j - 4 * r, (__mmask16)(m << (4 * r)), s);
  }
}

void rove_rows_g4_scores_f32__avx512(const float *q, const float *k, const char *kn,
                                     int32_t d, int32_t n, float *dst, int l1) {
  if (d == 64)
    l1 ? g4_scores_body(q, k, kn, n, dst, 64, 1) : g4_scores_body(q, k, kn, n, dst, 64, 0);
  else
    l1 ? g4_scores_body(q, k, kn, n, dst, 128, 1) : g4_scores_body(q, k, kn, n, dst, 128, 0);
}

/* Step 3 for 4 rows, the 32 floats from c of o [4][d]: O = alpha O + sum_{j < nb} p_j V[j]
 * (p: scratch rows [4][BLK]; V row j at v + j vb bytes); per key one load of its 2
 * vectors and a broadcast FMA per row and vector. PF: key j prefetches the 128 bytes from
 * off + j step of pf (prefetch_128, into L1 with L1): the next run's V region read in
 * address order (step = 128), or row j's 32 floats from c (off = 4 c, step = the row
 * stride). */
INLINE void g4_pv_section(float *o, int32_t d, int32_t c, const char *v, int64_t vb,
                          int32_t nb, const float *p, const float *alpha, const char *pf,
                          int64_t off, int64_t step, const int PF, const int L1) {
  __m512 acc[4][2];
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++)
#pragma GCC unroll 2
    for (int x = 0; x < 2; x++)
      acc[r][x] = _mm512_mul_ps(_mm512_loadu_ps(o + (int64_t)r * d + c + 16 * x),
                                _mm512_set1_ps(alpha[r]));
#pragma GCC unroll 2
  for (int32_t j = 0; j < nb; j++) {
    if (PF) prefetch_128(pf, off + j * step, L1);
    const float *vr = (const float *)(v + (int64_t)j * vb) + c;
    const __m512 v0 = _mm512_loadu_ps(vr), v1 = _mm512_loadu_ps(vr + 16);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
      const __m512 pb = _mm512_set1_ps(p[r * BLK + j]);
      acc[r][0] = _mm512_fmadd_ps(pb, v0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(pb, v1, acc[r][1]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++)
#pragma GCC unroll 2
    for (int x = 0; x < 2; x++) _mm512_storeu_ps(o + (int64_t)r * d + c + 16 * x, acc[r][x]);
}

/* P V over all of d (d % 32 == 0): sections of 32 floats. vn (the next block's V rows of
 * this run, NULL for none): with linear (contiguous rows, vb = 4 d, in a call longer than
 * a block or over a paged pool, as pv_body's linear prefetch in attn_rows-avx512.c
 * block()), section s = c / 32 prefetches the s-th of the d / 32 equal parts of the next
 * run's region (run rows) in address order, 128 bytes per key; else row j's lines of the
 * section's floats. */
void rove_rows_g4_pv_f32__avx512(float *o, int32_t d, const char *v, int64_t vb, int32_t nb,
                                 int32_t run, const float *p, const float *alpha,
                                 const char *vn, int linear, int l1) {
  for (int32_t c = 0; c < d; c += 32) {
    const int64_t part = (int64_t)(c / 32) * run * 128; /* linear: the section's part */
    if (!vn) /* the steps below are constants where they can be (a 128 step: 2 % faster) */
      g4_pv_section(o, d, c, v, vb, nb, p, alpha, NULL, 0, 0, 0, 0);
    else if (linear && l1)
      g4_pv_section(o, d, c, v, vb, nb, p, alpha, vn, part, 128, 1, 1);
    else if (linear)
      g4_pv_section(o, d, c, v, vb, nb, p, alpha, vn, part, 128, 1, 0);
    else if (l1)
      g4_pv_section(o, d, c, v, vb, nb, p, alpha, vn, 4 * (int64_t)c, vb, 1, 1);
    else
      g4_pv_section(o, d, c, v, vb, nb, p, alpha, vn, 4 * (int64_t)c, vb, 1, 0);
  }
}
