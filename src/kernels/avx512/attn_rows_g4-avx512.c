/* SPDX-License-Identifier: MIT */
/* The AVX-512 row kernel's GQA group path (rows-avx512.h; used by attn_rows-avx512.c's
 * block_scores() and block_pv()) on CPUs without the paced preference (AMD):
 *  - scores of 4 query rows against 4 keys of fp32 rows d = 64 or 128 floats apart:
 *    two keys at a time, both read a line at a time side by side (line c of key 0, line
 *    c of key 1, then line c + 1 ...), q as the FMAs' memory operand, the next block's
 *    same two lines requested beside each pair of reads;
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
 * the buffer: harmless. */
INLINE void prefetch_128(const char *base, int64_t off) {
  const uintptr_t a = (uintptr_t)base + (uintptr_t)off;
  _mm_prefetch((const char *)a, _MM_HINT_T2);
  _mm_prefetch((const char *)(a + 64), _MM_HINT_T2);
}

/* Scores of 4 rows against 4 keys (rows D floats apart), D = 64 or 128 a constant: keys
 * (0, 1) then (2, 3), each pair line by line. Key j of row r accumulates in SLOT(4 r + j)
 * over d in order, as scores_body does (RG = 4: sections of 32 floats, every key's
 * section before the next section; per accumulator the same FMAs in the same order). The
 * q pointer passes an empty asm per pair so that gcc reads q from L1 as the FMAs' memory
 * operand instead of holding its 4 D / 16 vectors in registers (with 16 accumulators
 * they would spill). On a Zen 4 (`ab_decode` against the build before, alternated), in
 * place of scores_dense_body followed by the requests of the next block's 4 rows (16 at
 * d = 64, 32 at d = 128): 1.026 and 1.048x faster at 32:8 x 128, 1.056 and 1.092x at 32:8
 * x 64 (32768 keys, one thread); 0.98x at 8192 keys and on two threads. bf16 and f16 K
 * measured 0.91-0.94x this way (docs/performance.md, "Session 28"). */
INLINE __m512 g4_scores_body(const float *q, const float *k, const char *kn, const int D) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int s = 0; s < 16; s++) acc[s] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++) {
    const float *qq = q, *k0 = k + 2 * h * D, *k1 = k0 + D;
    __asm__ volatile("" : "+r"(qq));
#pragma GCC unroll 8
    for (int x = 0; x < D / 16; x++) {
      if (kn) { /* the same line of the next block's two keys (integer addresses) */
        const uintptr_t pa = (uintptr_t)kn + (uintptr_t)(2 * h * D + 16 * x) * 4;
        _mm_prefetch((const char *)pa, _MM_HINT_T2);
        _mm_prefetch((const char *)(pa + 4 * D), _MM_HINT_T2);
      }
      __m512 a = _mm512_loadu_ps(k0 + 16 * x), b = _mm512_loadu_ps(k1 + 16 * x);
      ROVE_IN_ORDER(a);
      ROVE_IN_ORDER(b);
#pragma GCC unroll 4
      for (int r = 0; r < 4; r++) {
        const __m512 qv = _mm512_loadu_ps(qq + r * D + 16 * x);
        acc[SLOT(4 * r + 2 * h)] = _mm512_fmadd_ps(qv, a, acc[SLOT(4 * r + 2 * h)]);
        acc[SLOT(4 * r + 2 * h + 1)] = _mm512_fmadd_ps(qv, b, acc[SLOT(4 * r + 2 * h + 1)]);
      }
    }
  }
  return reduce16(acc);
}

__m512 rove_rows_g4_scores_f32__avx512(const float *q, const float *k, const char *kn,
                                       int32_t d) {
  return d == 64 ? g4_scores_body(q, k, kn, 64) : g4_scores_body(q, k, kn, 128);
}

/* Step 3 for 4 rows, the 32 floats from c of o [4][d]: O = alpha O + sum_{j < nb} p_j V[j]
 * (p: scratch rows [4][BLK]; V row j at v + j vb bytes); per key one load of its 2
 * vectors and a broadcast FMA per row and vector. PF: key j prefetches the 128 bytes from
 * off + j step of pf (prefetch_128): the next run's V region read in address order (step
 * = 128), or row j's 32 floats from c (off = 4 c, step = the row stride). */
INLINE void g4_pv_section(float *o, int32_t d, int32_t c, const char *v, int64_t vb,
                          int32_t nb, const float *p, const float *alpha, const char *pf,
                          int64_t off, int64_t step, const int PF) {
  __m512 acc[4][2];
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++)
#pragma GCC unroll 2
    for (int x = 0; x < 2; x++)
      acc[r][x] = _mm512_mul_ps(_mm512_loadu_ps(o + (int64_t)r * d + c + 16 * x),
                                _mm512_set1_ps(alpha[r]));
#pragma GCC unroll 2
  for (int32_t j = 0; j < nb; j++) {
    if (PF) prefetch_128(pf, off + j * step);
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
                                 const char *vn, int linear) {
  for (int32_t c = 0; c < d; c += 32)
    if (vn && linear)
      g4_pv_section(o, d, c, v, vb, nb, p, alpha, vn, (int64_t)(c / 32) * run * 128, 128, 1);
    else if (vn)
      g4_pv_section(o, d, c, v, vb, nb, p, alpha, vn, 4 * (int64_t)c, vb, 1);
    else
      g4_pv_section(o, d, c, v, vb, nb, p, alpha, NULL, 0, 0, 0);
}
