/* SPDX-License-Identifier: MIT */
/* The phase network's dot products, AVX-512 (kernels/selective_kernels.h, phase_dots).
 *
 * The 8 partial sums s_l of one (token, row) pair are the 8 lanes of one zmm. A block of
 * up to 4 tokens x 4 rows keeps 16 such sums in registers: each step of 8 elements
 * widens 8 weights of each row once (vcvtps2pd) and loads 8 doubles of each token once,
 * then does one multiply and one add per (token, row): no FMA, so the bits are the
 * scalar body's. The tail (n % 8 elements) loads with a mask (zeros: products +0). The
 * reduction adds the upper 4 lanes onto the lower ones, then the upper 2 of those, then
 * the last two: ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)). */
#include <immintrin.h>

#include "kernels-avx512.h"

#define TT 4 /* tokens per block */
#define RR 4 /* rows per block */

static inline double reduce8(__m512d s) {
  const __m256d a = _mm256_add_pd(_mm512_castpd512_pd256(s), _mm512_extractf64x4_pd(s, 1));
  const __m128d b = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
  return _mm_cvtsd_f64(_mm_add_sd(b, _mm_unpackhi_pd(b, b)));
}

/* One block of nt <= TT tokens x nr <= RR rows (constants after inlining). */
static inline __attribute__((always_inline)) void block(double *out, int64_t os,
                                                        const float *m, int64_t ms,
                                                        const double *v, int64_t vs,
                                                        int64_t n, int nt, int nr) {
  __m512d s[TT][RR];
  for (int t = 0; t < nt; t++)
    for (int r = 0; r < nr; r++) s[t][r] = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m512d w[RR], x[TT];
    for (int r = 0; r < nr; r++) w[r] = _mm512_cvtps_pd(_mm256_loadu_ps(m + r * ms + i));
    for (int t = 0; t < nt; t++) x[t] = _mm512_loadu_pd(v + t * vs + i);
    for (int t = 0; t < nt; t++)
      for (int r = 0; r < nr; r++) s[t][r] = _mm512_add_pd(s[t][r], _mm512_mul_pd(w[r], x[t]));
  }
  if (i < n) {
    const __mmask8 k = (__mmask8)((1u << (n - i)) - 1u);
    __m512d w[RR], x[TT];
    for (int r = 0; r < nr; r++)
      w[r] = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, m + r * ms + i));
    for (int t = 0; t < nt; t++) x[t] = _mm512_maskz_loadu_pd(k, v + t * vs + i);
    for (int t = 0; t < nt; t++)
      for (int r = 0; r < nr; r++) s[t][r] = _mm512_add_pd(s[t][r], _mm512_mul_pd(w[r], x[t]));
  }
  for (int t = 0; t < nt; t++)
    for (int r = 0; r < nr; r++) out[t * os + r] = reduce8(s[t][r]);
}

void rove_phase_dots_f64__avx512(double *out, int64_t os, const float *m, int64_t ms,
                                 int64_t rows, const double *v, int64_t vs, int64_t nt,
                                 int64_t n) {
  for (int64_t t = 0; t < nt; t += TT) {
    const int bt = nt - t < TT ? (int)(nt - t) : TT;
    for (int64_t j = 0; j < rows; j += RR) {
      const int br = rows - j < RR ? (int)(rows - j) : RR;
      double *o = out + t * os + j;
      const float *mj = m + j * ms;
      const double *vt = v + t * vs;
      switch ((bt - 1) * RR + (br - 1)) { /* every (tokens, rows) shape its own code */
#define SHAPE(T, R) \
  case (T - 1) * RR + (R - 1): block(o, os, mj, ms, vt, vs, n, T, R); break;
        SHAPE(1, 1) SHAPE(1, 2) SHAPE(1, 3) SHAPE(1, 4)
        SHAPE(2, 1) SHAPE(2, 2) SHAPE(2, 3) SHAPE(2, 4)
        SHAPE(3, 1) SHAPE(3, 2) SHAPE(3, 3) SHAPE(3, 4)
        SHAPE(4, 1) SHAPE(4, 2) SHAPE(4, 3) SHAPE(4, 4)
#undef SHAPE
        default: break;
      }
    }
  }
}
