/* SPDX-License-Identifier: MIT */
/* The GLA backward sweeps (gla_kernels.h, gla_bwd_body.h) for avx2: the generic body
 * compiled with this ISA's flags (fmaf becomes vector FMAs) and its exp, with the small
 * matrix products register-blocked and the transposes done 8 x 8 in registers.
 *
 * Product tile: 4 rows x 24 columns (3 ymm, 12 sums: enough independent FMAs to cover
 * the FMA latency on both ports), one broadcast of A and three loads of B per step. Only
 * the last column vector of a row may be partial; it alone goes through vmaskmov
 * (masked-off lanes are neither read nor written), as masked stores are slow on AMD
 * cores. */
#include <immintrin.h>
#include <math.h>

#include "kernels-avx2.h"
#include "transpose-avx2.h"

#define ROVE_GLA_MADD(a, b, c) fmaf(a, b, c)
#define GB_MR 4
#define GB_NV 3
#define GB_AI __attribute__((always_inline))

/* Lanes 0 .. w-1 on (w clamped to 0..8). */
static inline __m256i mask_of(int32_t w) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(w < 0 ? 0 : w > 8 ? 8 : w), idx);
}

static inline GB_AI __m256 load_v(const float *x, int plain, __m256i last) {
  return plain ? _mm256_loadu_ps(x) : _mm256_maskload_ps(x, last);
}

/* C[mr][nv vectors] (+)= A(i, p) B[p][.] for p < l; mr, nv and masked are constants after
 * inlining (masked: the last vector is partial, lanes `last`). */
static inline GB_AI void tile(float *C, int64_t ldc, const float *A, int64_t ars, int64_t acs,
                              const float *B, int64_t ldb, int32_t l, const int mr, const int nv,
                              const int masked, __m256i last, int acc) {
  __m256 c[GB_MR][GB_NV];
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nv; j++)
      c[i][j] = acc ? load_v(C + i * ldc + 8 * j, j < nv - 1 || !masked, last)
                    : _mm256_setzero_ps();
  for (int32_t p = 0; p < l; p++) {
    const float *bp = B + p * ldb;
    __m256 b[GB_NV];
    for (int j = 0; j < nv; j++) b[j] = load_v(bp + 8 * j, j < nv - 1 || !masked, last);
    for (int i = 0; i < mr; i++) {
      const __m256 x = _mm256_broadcast_ss(A + i * ars + p * acs);
      for (int j = 0; j < nv; j++) c[i][j] = _mm256_fmadd_ps(x, b[j], c[i][j]);
    }
  }
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nv; j++) {
      float *ci = C + i * ldc + 8 * j;
      if (j < nv - 1 || !masked)
        _mm256_storeu_ps(ci, c[i][j]);
      else
        _mm256_maskstore_ps(ci, last, c[i][j]);
    }
}

#define GB_TILE_NV(mr)                                                            \
  switch (2 * nv + masked) {                                                      \
    case 2: tile(ci, ldc, ai, ars, acs, bj, ldb, l, mr, 1, 0, last, acc); break;  \
    case 3: tile(ci, ldc, ai, ars, acs, bj, ldb, l, mr, 1, 1, last, acc); break;  \
    case 4: tile(ci, ldc, ai, ars, acs, bj, ldb, l, mr, 2, 0, last, acc); break;  \
    case 5: tile(ci, ldc, ai, ars, acs, bj, ldb, l, mr, 2, 1, last, acc); break;  \
    case 6: tile(ci, ldc, ai, ars, acs, bj, ldb, l, mr, 3, 0, last, acc); break;  \
    default: tile(ci, ldc, ai, ars, acs, bj, ldb, l, mr, 3, 1, last, acc); break; \
  }

/* gb_gemm_generic's contract (gla_bwd_body.h). */
static void gemm_avx2(float *C, int64_t ldc, const float *A, int64_t ars, int64_t acs,
                      const float *B, int64_t ldb, int32_t m, int32_t l, int32_t nc, int acc) {
  for (int32_t j0 = 0; j0 < nc; j0 += 8 * GB_NV) {
    const int32_t w = nc - j0 < 8 * GB_NV ? nc - j0 : 8 * GB_NV;
    const int nv = (w + 7) / 8, masked = w % 8 != 0;
    const __m256i last = mask_of(w - 8 * (nv - 1));
    const float *bj = B + j0;
    int32_t i = 0;
    for (; i + GB_MR <= m; i += GB_MR) {
      float *ci = C + i * ldc + j0;
      const float *ai = A + i * ars;
      GB_TILE_NV(GB_MR)
    }
    for (; i < m; i++) {
      float *ci = C + i * ldc + j0;
      const float *ai = A + i * ars;
      GB_TILE_NV(1)
    }
  }
}
#define ROVE_GLA_GEMM_IMPL gemm_avx2
#define ROVE_GLA_TRANSPOSE_IMPL rove_avx2_transpose

#include "../gla_bwd_body.h"

void rove_gla_bwd_state_f32__avx2(const rove_gla_bwd_chunk *c) {
  rove_gla_bwd_state_body(c, rove_exp_f32__avx2);
}

void rove_gla_bwd_grads_f32__avx2(const rove_gla_bwd_chunk *c) {
  rove_gla_bwd_grads_body(c, rove_exp_f32__avx2);
}

void rove_gla_bwd_dg_f32__avx2(double *carry, float *dg, const float *q, const float *dq,
                               const float *k, const float *dk, int32_t n) {
  rove_gla_dg_body(carry, dg, q, dq, k, dk, n);
}
