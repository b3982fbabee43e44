/* SPDX-License-Identifier: MIT */
/* The GLA backward sweeps (gla_kernels.h, gla_bwd_body.h) for avx2: the generic body
 * compiled with this ISA's flags (fmaf becomes vector FMAs) and its exp, with the small
 * matrix products register-blocked: 4 rows x 16 columns (8 ymm sums), each B row loaded
 * once per 4 rows, the column tail through maskload / maskstore (masked-off lanes are
 * neither read nor written). */
#include <immintrin.h>
#include <math.h>

#include "kernels-avx2.h"

#define ROVE_GLA_MADD(a, b, c) fmaf(a, b, c)

/* Lanes 0 .. w-1 on (w clamped to 0..8). */
static __m256i mask_of(int32_t w) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(w < 0 ? 0 : w > 8 ? 8 : w), idx);
}

/* gb_gemm_generic's contract (gla_bwd_body.h). */
static void gemm_avx2(float *C, int64_t ldc, const float *A, int64_t ars, int64_t acs,
                      const float *B, int64_t ldb, int32_t m, int32_t l, int32_t nc, int acc) {
  for (int32_t j0 = 0; j0 < nc; j0 += 16) {
    const __m256i m0 = mask_of(nc - j0), m1 = mask_of(nc - j0 - 8);
    int32_t i = 0;
    for (; i + 4 <= m; i += 4) {
      __m256 c[4][2];
      for (int r = 0; r < 4; r++) {
        float *cr = C + (i + r) * ldc + j0;
        c[r][0] = acc ? _mm256_maskload_ps(cr, m0) : _mm256_setzero_ps();
        c[r][1] = acc ? _mm256_maskload_ps(cr + 8, m1) : _mm256_setzero_ps();
      }
      const float *a = A + i * ars;
      for (int32_t p = 0; p < l; p++) {
        const float *b = B + p * ldb + j0;
        const __m256 b0 = _mm256_maskload_ps(b, m0), b1 = _mm256_maskload_ps(b + 8, m1);
        for (int r = 0; r < 4; r++) {
          const __m256 x = _mm256_broadcast_ss(a + r * ars + p * acs);
          c[r][0] = _mm256_fmadd_ps(x, b0, c[r][0]);
          c[r][1] = _mm256_fmadd_ps(x, b1, c[r][1]);
        }
      }
      for (int r = 0; r < 4; r++) {
        float *cr = C + (i + r) * ldc + j0;
        _mm256_maskstore_ps(cr, m0, c[r][0]);
        _mm256_maskstore_ps(cr + 8, m1, c[r][1]);
      }
    }
    for (; i < m; i++) {
      float *cr = C + i * ldc + j0;
      __m256 c0 = acc ? _mm256_maskload_ps(cr, m0) : _mm256_setzero_ps();
      __m256 c1 = acc ? _mm256_maskload_ps(cr + 8, m1) : _mm256_setzero_ps();
      for (int32_t p = 0; p < l; p++) {
        const float *b = B + p * ldb + j0;
        const __m256 x = _mm256_broadcast_ss(A + i * ars + p * acs);
        c0 = _mm256_fmadd_ps(x, _mm256_maskload_ps(b, m0), c0);
        c1 = _mm256_fmadd_ps(x, _mm256_maskload_ps(b + 8, m1), c1);
      }
      _mm256_maskstore_ps(cr, m0, c0);
      _mm256_maskstore_ps(cr + 8, m1, c1);
    }
  }
}
#define ROVE_GLA_GEMM_IMPL gemm_avx2

#include "../gla_bwd_body.h"

void rove_gla_bwd_dq_f32__avx2(const rove_gla_bwd_chunk *c) {
  rove_gla_bwd_dq_body(c, rove_exp_f32__avx2);
}

void rove_gla_bwd_dkv_f32__avx2(const rove_gla_bwd_chunk *c) {
  rove_gla_bwd_dkv_body(c, rove_exp_f32__avx2);
}
