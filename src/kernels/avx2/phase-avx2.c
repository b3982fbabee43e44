/* SPDX-License-Identifier: MIT */
/* The phase network's dot products, AVX2 (kernels/selective_kernels.h, phase_dots).
 *
 * The 8 partial sums s_l of one (token, row) pair are two ymm: s0..s3 and s4..s7. A block
 * of up to 2 tokens x 2 rows keeps 8 such ymm in registers (16 in all): each step of 8
 * elements widens 8 weights of each row once and loads 8 doubles of each token once, then
 * one multiply and one add per half: no FMA, so the bits are the scalar body's. The tail
 * (n % 8 elements) loads with a mask (zeros: products +0). The reduction adds the two
 * halves, then the upper pair onto the lower, then the last two:
 * ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)). */
#include <immintrin.h>

#include "kernels-avx2.h"

#define TT 2 /* tokens per block */
#define RR 2 /* rows per block */

static inline double reduce8(__m256d lo, __m256d hi) {
  const __m256d a = _mm256_add_pd(lo, hi);
  const __m128d b = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
  return _mm_cvtsd_f64(_mm_add_sd(b, _mm_unpackhi_pd(b, b)));
}

/* Lane masks of a tail of r = 1..7 elements: the lanes below r all ones (first half
 * elements 0..3, second half 4..7), as 64-bit lanes and as the 32-bit lanes of floats. */
static inline __m256i mask_lo(int r) {
  return _mm256_cmpgt_epi64(_mm256_set1_epi64x(r), _mm256_setr_epi64x(0, 1, 2, 3));
}
static inline __m256i mask_hi(int r) {
  return _mm256_cmpgt_epi64(_mm256_set1_epi64x(r), _mm256_setr_epi64x(4, 5, 6, 7));
}
static inline __m128i mask_f32(__m256i m64) { /* the low 32 bits of each 64-bit lane */
  return _mm256_castsi256_si128(
      _mm256_permutevar8x32_epi32(m64, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
}

/* One block of nt <= TT tokens x nr <= RR rows (constants after inlining). */
static inline __attribute__((always_inline)) void block(double *out, int64_t os,
                                                        const float *m, int64_t ms,
                                                        const double *v, int64_t vs,
                                                        int64_t n, int nt, int nr) {
  __m256d lo[TT][RR], hi[TT][RR];
  for (int t = 0; t < nt; t++)
    for (int r = 0; r < nr; r++) lo[t][r] = hi[t][r] = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256d wl[RR], wh[RR];
    for (int r = 0; r < nr; r++) {
      wl[r] = _mm256_cvtps_pd(_mm_loadu_ps(m + r * ms + i));
      wh[r] = _mm256_cvtps_pd(_mm_loadu_ps(m + r * ms + i + 4));
    }
    for (int t = 0; t < nt; t++) {
      const __m256d xl = _mm256_loadu_pd(v + t * vs + i);
      const __m256d xh = _mm256_loadu_pd(v + t * vs + i + 4);
      for (int r = 0; r < nr; r++) {
        lo[t][r] = _mm256_add_pd(lo[t][r], _mm256_mul_pd(wl[r], xl));
        hi[t][r] = _mm256_add_pd(hi[t][r], _mm256_mul_pd(wh[r], xh));
      }
    }
  }
  if (i < n) {
    const int rest = (int)(n - i);
    const __m256i kl = mask_lo(rest), kh = mask_hi(rest);
    const __m128i fl = mask_f32(kl), fh = mask_f32(kh);
    __m256d wl[RR], wh[RR];
    for (int r = 0; r < nr; r++) {
      wl[r] = _mm256_cvtps_pd(_mm_maskload_ps(m + r * ms + i, fl));
      wh[r] = _mm256_cvtps_pd(_mm_maskload_ps(m + r * ms + i + 4, fh));
    }
    for (int t = 0; t < nt; t++) {
      const __m256d xl = _mm256_maskload_pd(v + t * vs + i, kl);
      const __m256d xh = _mm256_maskload_pd(v + t * vs + i + 4, kh);
      for (int r = 0; r < nr; r++) {
        lo[t][r] = _mm256_add_pd(lo[t][r], _mm256_mul_pd(wl[r], xl));
        hi[t][r] = _mm256_add_pd(hi[t][r], _mm256_mul_pd(wh[r], xh));
      }
    }
  }
  for (int t = 0; t < nt; t++)
    for (int r = 0; r < nr; r++) out[t * os + r] = reduce8(lo[t][r], hi[t][r]);
}

void rove_phase_dots_f64__avx2(double *out, int64_t os, const float *m, int64_t ms,
                               int64_t rows, const double *v, int64_t vs, int64_t nt,
                               int64_t n) {
  for (int64_t t = 0; t < nt; t += TT) {
    const int bt = nt - t < TT ? (int)(nt - t) : TT;
    for (int64_t j = 0; j < rows; j += RR) {
      const int br = rows - j < RR ? (int)(rows - j) : RR;
      double *o = out + t * os + j;
      const float *mj = m + j * ms;
      const double *vt = v + t * vs;
      if (bt == 2 && br == 2) block(o, os, mj, ms, vt, vs, n, 2, 2);
      else if (bt == 2) block(o, os, mj, ms, vt, vs, n, 2, 1);
      else if (br == 2) block(o, os, mj, ms, vt, vs, n, 1, 2);
      else block(o, os, mj, ms, vt, vs, n, 1, 1);
    }
  }
}
