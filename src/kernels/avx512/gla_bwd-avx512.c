/* SPDX-License-Identifier: MIT */
/* The GLA backward sweeps (gla_kernels.h, gla_bwd_body.h) for avx512: the generic body
 * compiled with this ISA's flags (fmaf becomes vector FMAs) and its exp, with the small
 * matrix products register-blocked: 4 rows x 32 columns (8 zmm sums), each B row loaded
 * once per 4 rows, the column tail masked (masked loads do not touch what they skip). */
#include <immintrin.h>
#include <math.h>

#include "kernels-avx512.h"

#define ROVE_GLA_MADD(a, b, c) fmaf(a, b, c)

static __mmask16 mask_of(int32_t w) {
  return w >= 16 ? (__mmask16)0xFFFF : w <= 0 ? (__mmask16)0 : (__mmask16)((1u << w) - 1);
}

/* gb_gemm_generic's contract (gla_bwd_body.h). */
static void gemm_avx512(float *C, int64_t ldc, const float *A, int64_t ars, int64_t acs,
                        const float *B, int64_t ldb, int32_t m, int32_t l, int32_t nc, int acc) {
  for (int32_t j0 = 0; j0 < nc; j0 += 32) {
    const __mmask16 m0 = mask_of(nc - j0), m1 = mask_of(nc - j0 - 16);
    int32_t i = 0;
    for (; i + 4 <= m; i += 4) {
      __m512 c[4][2];
      for (int r = 0; r < 4; r++) {
        float *cr = C + (i + r) * ldc + j0;
        c[r][0] = acc ? _mm512_maskz_loadu_ps(m0, cr) : _mm512_setzero_ps();
        c[r][1] = acc ? _mm512_maskz_loadu_ps(m1, cr + 16) : _mm512_setzero_ps();
      }
      const float *a = A + i * ars;
      for (int32_t p = 0; p < l; p++) {
        const float *b = B + p * ldb + j0;
        const __m512 b0 = _mm512_maskz_loadu_ps(m0, b), b1 = _mm512_maskz_loadu_ps(m1, b + 16);
        for (int r = 0; r < 4; r++) {
          const __m512 x = _mm512_set1_ps(a[r * ars + p * acs]);
          c[r][0] = _mm512_fmadd_ps(x, b0, c[r][0]);
          c[r][1] = _mm512_fmadd_ps(x, b1, c[r][1]);
        }
      }
      for (int r = 0; r < 4; r++) {
        float *cr = C + (i + r) * ldc + j0;
        _mm512_mask_storeu_ps(cr, m0, c[r][0]);
        _mm512_mask_storeu_ps(cr + 16, m1, c[r][1]);
      }
    }
    for (; i < m; i++) {
      float *cr = C + i * ldc + j0;
      __m512 c0 = acc ? _mm512_maskz_loadu_ps(m0, cr) : _mm512_setzero_ps();
      __m512 c1 = acc ? _mm512_maskz_loadu_ps(m1, cr + 16) : _mm512_setzero_ps();
      for (int32_t p = 0; p < l; p++) {
        const float *b = B + p * ldb + j0;
        const __m512 x = _mm512_set1_ps(A[i * ars + p * acs]);
        c0 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m0, b), c0);
        c1 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m1, b + 16), c1);
      }
      _mm512_mask_storeu_ps(cr, m0, c0);
      _mm512_mask_storeu_ps(cr + 16, m1, c1);
    }
  }
}
#define ROVE_GLA_GEMM_IMPL gemm_avx512

#include "../gla_bwd_body.h"

void rove_gla_bwd_dq_f32__avx512(const rove_gla_bwd_chunk *c) {
  rove_gla_bwd_dq_body(c, rove_exp_f32__avx512);
}

void rove_gla_bwd_dkv_f32__avx512(const rove_gla_bwd_chunk *c) {
  rove_gla_bwd_dkv_body(c, rove_exp_f32__avx512);
}
