/* SPDX-License-Identifier: MIT */
/* The backward tile (attn_bwd_kernels.h) for avx512: the generic body of attn_bwd_body.h
 * compiled with this ISA's flags, multiply-adds as fmaf (the vectoriser makes vector FMAs),
 * with its exp; the S and dP products register-blocked with intrinsics (the generic loop
 * spills its accumulators): 4 rows x 64 keys = 16 zmm sums, each key vector loaded once
 * per 4 rows; the dq / dk / dv sums likewise (4 output rows x 64 dims) for d % 64 == 0. */
#include <immintrin.h>

#include "kernels-avx512.h"

#define ROVE_BWD_MADD(a, b, c) fmaf(a, b, c)

/* rows[i][0..64) = a[i][.] . bT[.][0..64) (attn_bwd_body.h's rove_bwd_product) */
static void product_avx512(float *rows, const float *a, const float *bT, int32_t nq, int32_t d) {
  int32_t i = 0;
  for (; i + 4 <= nq; i += 4) {
    __m512 s[4][4];
    for (int r = 0; r < 4; r++)
      for (int v = 0; v < 4; v++) s[r][v] = _mm512_setzero_ps();
    const float *ar = a + (int64_t)i * d;
    for (int32_t c = 0; c < d; c++) {
      const float *b = bT + (int64_t)c * 64;
      const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
      const __m512 b2 = _mm512_loadu_ps(b + 32), b3 = _mm512_loadu_ps(b + 48);
      for (int r = 0; r < 4; r++) {
        const __m512 x = _mm512_set1_ps(ar[(int64_t)r * d + c]);
        s[r][0] = _mm512_fmadd_ps(x, b0, s[r][0]);
        s[r][1] = _mm512_fmadd_ps(x, b1, s[r][1]);
        s[r][2] = _mm512_fmadd_ps(x, b2, s[r][2]);
        s[r][3] = _mm512_fmadd_ps(x, b3, s[r][3]);
      }
    }
    for (int r = 0; r < 4; r++)
      for (int v = 0; v < 4; v++) _mm512_storeu_ps(rows + (int64_t)(i + r) * 64 + 16 * v, s[r][v]);
  }
  for (; i < nq; i++) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    const float *ar = a + (int64_t)i * d;
    for (int32_t c = 0; c < d; c++) {
      const float *b = bT + (int64_t)c * 64;
      const __m512 x = _mm512_set1_ps(ar[c]);
      s0 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b), s0);
      s1 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b + 16), s1);
      s2 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b + 32), s2);
      s3 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b + 48), s3);
    }
    float *o = rows + (int64_t)i * 64;
    _mm512_storeu_ps(o, s0), _mm512_storeu_ps(o + 16, s1);
    _mm512_storeu_ps(o + 32, s2), _mm512_storeu_ps(o + 48, s3);
  }
}
#define ROVE_BWD_PRODUCT_IMPL(rows, a, bT, nq, d) product_avx512(rows, a, bT, nq, d)

/* dst[o][0..d) += sum_n w(o, n) src[n][0..d), w(o, n) = W[o * wo + n * wn], skipping zero
 * weights (rove_bwd_acc's contract), for d % 64 == 0: 4 output rows x 64 dims = 16 zmm
 * sums per pass (fixed trip counts, so they stay in registers), each src vector loaded
 * once per 4 rows; the last n_out % 4 rows by the generic loop. */
static void acc_avx512(float *dst, const float *W, int64_t wo, int64_t wn, const float *src,
                       int32_t n_out, int32_t n_in, int32_t d);
#define ROVE_BWD_ACC_IMPL(dst, W, wo, wn, src, n_out, n_in, d)                              \
  ((d) % 64 == 0 ? acc_avx512(dst, W, wo, wn, src, n_out, n_in, d)                           \
                 : rove_bwd_acc(dst, W, wo, wn, src, n_out, n_in, d))

#include "../attn_bwd_body.h"

#if ROVE_BWD_TK != 64
#error "product_avx512 assumes 64 keys per block"
#endif

static void acc_avx512(float *dst, const float *W, int64_t wo, int64_t wn, const float *src,
                       int32_t n_out, int32_t n_in, int32_t d) {
  int32_t o = 0;
  for (; o + 4 <= n_out; o += 4)
    for (int32_t c0 = 0; c0 < d; c0 += 64) {
      float *x0 = dst + (int64_t)o * d + c0, *x1 = x0 + d, *x2 = x1 + d, *x3 = x2 + d;
      __m512 a0 = _mm512_loadu_ps(x0), a1 = _mm512_loadu_ps(x0 + 16);
      __m512 a2 = _mm512_loadu_ps(x0 + 32), a3 = _mm512_loadu_ps(x0 + 48);
      __m512 b0 = _mm512_loadu_ps(x1), b1 = _mm512_loadu_ps(x1 + 16);
      __m512 b2 = _mm512_loadu_ps(x1 + 32), b3 = _mm512_loadu_ps(x1 + 48);
      __m512 e0 = _mm512_loadu_ps(x2), e1 = _mm512_loadu_ps(x2 + 16);
      __m512 e2 = _mm512_loadu_ps(x2 + 32), e3 = _mm512_loadu_ps(x2 + 48);
      __m512 f0 = _mm512_loadu_ps(x3), f1 = _mm512_loadu_ps(x3 + 16);
      __m512 f2 = _mm512_loadu_ps(x3 + 32), f3 = _mm512_loadu_ps(x3 + 48);
      const float *w = W + (int64_t)o * wo;
      for (int32_t n = 0; n < n_in; n++, w += wn) {
        const float *y = src + (int64_t)n * d + c0;
        const __m512 y0 = _mm512_loadu_ps(y), y1 = _mm512_loadu_ps(y + 16);
        const __m512 y2 = _mm512_loadu_ps(y + 32), y3 = _mm512_loadu_ps(y + 48);
#define ROVE_ACC_ROW(k, s0, s1, s2, s3)                                                   \
  if (w[(k) * wo] != 0.0f) {                                                              \
    const __m512 x = _mm512_set1_ps(w[(k) * wo]);                                         \
    s0 = _mm512_fmadd_ps(x, y0, s0), s1 = _mm512_fmadd_ps(x, y1, s1);                     \
    s2 = _mm512_fmadd_ps(x, y2, s2), s3 = _mm512_fmadd_ps(x, y3, s3);                     \
  }
        ROVE_ACC_ROW(0, a0, a1, a2, a3)
        ROVE_ACC_ROW(1, b0, b1, b2, b3)
        ROVE_ACC_ROW(2, e0, e1, e2, e3)
        ROVE_ACC_ROW(3, f0, f1, f2, f3)
#undef ROVE_ACC_ROW
      }
      _mm512_storeu_ps(x0, a0), _mm512_storeu_ps(x0 + 16, a1);
      _mm512_storeu_ps(x0 + 32, a2), _mm512_storeu_ps(x0 + 48, a3);
      _mm512_storeu_ps(x1, b0), _mm512_storeu_ps(x1 + 16, b1);
      _mm512_storeu_ps(x1 + 32, b2), _mm512_storeu_ps(x1 + 48, b3);
      _mm512_storeu_ps(x2, e0), _mm512_storeu_ps(x2 + 16, e1);
      _mm512_storeu_ps(x2 + 32, e2), _mm512_storeu_ps(x2 + 48, e3);
      _mm512_storeu_ps(x3, f0), _mm512_storeu_ps(x3 + 16, f1);
      _mm512_storeu_ps(x3 + 32, f2), _mm512_storeu_ps(x3 + 48, f3);
    }
  if (o < n_out) rove_bwd_acc(dst + (int64_t)o * d, W + o * wo, wo, wn, src, n_out - o, n_in, d);
}

void rove_attn_bwd_f32__avx512(const rove_bwd_tile *t) { rove_attn_bwd_body(t, rove_exp_f32__avx512); }
