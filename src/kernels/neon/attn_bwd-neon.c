/* SPDX-License-Identifier: MIT */
/* The backward tile (attn_bwd_kernels.h) for NEON: the generic body of attn_bwd_body.h with
 * multiply-adds as fmaf (vfmaq where the compiler vectorises), this ISA's exp, and
 * register-blocked intrinsics for the two hot parts (the generic loops spill their
 * accumulators):
 *   S and dP products: 2 rows x 32 keys = 16 q-register sums per pass, each key vector
 *                      loaded once per 2 rows;
 *   dq / dk / dv sums: 2 output rows x 32 dims for d % 32 == 0 (others: the generic loop),
 *                      each source vector loaded once per 2 rows, zero weights skipped.
 * 32 vector registers of 4 floats: 16 sums + 8 loaded vectors + 2 broadcasts. */
#include <arm_neon.h>

#include "kernels-neon.h"

#define ROVE_BWD_MADD(a, b, c) fmaf(a, b, c)

/* rows[i][0..64) = a[i][.] . bT[.][0..64) (attn_bwd_body.h's rove_bwd_product) */
static void product_neon(float *rows, const float *a, const float *bT, int32_t nq, int32_t d) {
  for (int32_t i = 0; i < nq; i += 2) {
    const int two = i + 1 < nq;
    const float *a0 = a + (int64_t)i * d, *a1 = two ? a0 + d : a0;
    for (int32_t j0 = 0; j0 < 64; j0 += 32) {
      float32x4_t s0[8], s1[8];
      for (int v = 0; v < 8; v++) s0[v] = s1[v] = vdupq_n_f32(0.0f);
      for (int32_t c = 0; c < d; c++) {
        const float *b = bT + (int64_t)c * 64 + j0;
        const float x0 = a0[c], x1 = a1[c];
        for (int v = 0; v < 8; v++) {
          const float32x4_t bv = vld1q_f32(b + 4 * v);
          s0[v] = vfmaq_n_f32(s0[v], bv, x0);
          s1[v] = vfmaq_n_f32(s1[v], bv, x1);
        }
      }
      for (int v = 0; v < 8; v++) {
        vst1q_f32(rows + (int64_t)i * 64 + j0 + 4 * v, s0[v]);
        if (two) vst1q_f32(rows + (int64_t)(i + 1) * 64 + j0 + 4 * v, s1[v]);
      }
    }
  }
}
#define ROVE_BWD_PRODUCT_IMPL(rows, a, bT, nq, d) product_neon(rows, a, bT, nq, d)

static void acc_neon(float *dst, const float *W, int64_t wo, int64_t wn, const float *src,
                     int32_t n_out, int32_t n_in, int32_t d);
#define ROVE_BWD_ACC_IMPL(dst, W, wo, wn, src, n_out, n_in, d)                              \
  ((d) % 32 == 0 ? acc_neon(dst, W, wo, wn, src, n_out, n_in, d)                             \
                 : rove_bwd_acc(dst, W, wo, wn, src, n_out, n_in, d))

#include "../attn_bwd_body.h"

#if ROVE_BWD_TK != 64
#error "product_neon assumes 64 keys per block"
#endif

/* dst[o][0..d) += sum_n w(o, n) src[n][0..d), w(o, n) = W[o * wo + n * wn] (rove_bwd_acc's
 * contract), d % 32 == 0; an odd last row by the generic loop. */
static void acc_neon(float *dst, const float *W, int64_t wo, int64_t wn, const float *src,
                     int32_t n_out, int32_t n_in, int32_t d) {
  int32_t o = 0;
  for (; o + 2 <= n_out; o += 2)
    for (int32_t c0 = 0; c0 < d; c0 += 32) {
      float *x0 = dst + (int64_t)o * d + c0, *x1 = x0 + d;
      float32x4_t a[8], b[8];
      for (int v = 0; v < 8; v++) a[v] = vld1q_f32(x0 + 4 * v), b[v] = vld1q_f32(x1 + 4 * v);
      const float *w = W + (int64_t)o * wo;
      for (int32_t n = 0; n < n_in; n++, w += wn) {
        const float *y = src + (int64_t)n * d + c0;
        const float w0 = w[0], w1 = w[wo];
        if (w0 == 0.0f && w1 == 0.0f) continue;
        float32x4_t yv[8];
        for (int v = 0; v < 8; v++) yv[v] = vld1q_f32(y + 4 * v);
        if (w0 != 0.0f)
          for (int v = 0; v < 8; v++) a[v] = vfmaq_n_f32(a[v], yv[v], w0);
        if (w1 != 0.0f)
          for (int v = 0; v < 8; v++) b[v] = vfmaq_n_f32(b[v], yv[v], w1);
      }
      for (int v = 0; v < 8; v++) vst1q_f32(x0 + 4 * v, a[v]), vst1q_f32(x1 + 4 * v, b[v]);
    }
  if (o < n_out) rove_bwd_acc(dst + (int64_t)o * d, W + o * wo, wo, wn, src, n_out - o, n_in, d);
}

void rove_attn_bwd_f32__neon(const rove_bwd_tile *t) { rove_attn_bwd_body(t, rove_exp_f32__neon); }
