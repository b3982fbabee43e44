/* SPDX-License-Identifier: MIT */
/* The GLA backward sweeps (gla_kernels.h, gla_bwd_body.h) for avx512: the generic body
 * compiled with this ISA's flags (fmaf becomes vector FMAs) and its exp, with the small
 * matrix products register-blocked: 4 rows x 64 columns (16 zmm sums), each B row loaded
 * once per 4 rows, the column tail masked (masked loads do not touch what they skip); the
 * transposes 8 x 8 in ymm registers (transpose-avx2.h). */
#include <immintrin.h>
#include <math.h>

#include "../avx2/transpose-avx2.h" /* AVX-512 CPUs have AVX2: 8 x 8 ymm transposes */
#include "kernels-avx512.h"

#define ROVE_GLA_MADD(a, b, c) fmaf(a, b, c)

static __mmask16 mask_of(int32_t w) {
  return w >= 16 ? (__mmask16)0xFFFF : w <= 0 ? (__mmask16)0 : (__mmask16)((1u << w) - 1);
}

#define GB_MR 4
#define GB_NV 4
#define GB_AI __attribute__((always_inline))

/* C[mr][nv vectors] (+)= A(i, p) B[p][.] for p < l; mr and nv are constants after
 * inlining; the last vector of a row goes through the mask `last` (all lanes when the
 * width is a multiple of 16). 4 x 4 zmm = 16 sums: enough independent FMAs to cover the
 * FMA latency on both ports, four B loads and four broadcasts per 16 FMAs. */
static inline GB_AI void tile(float *C, int64_t ldc, const float *A, int64_t ars, int64_t acs,
                              const float *B, int64_t ldb, int32_t l, const int mr, const int nv,
                              __mmask16 last, int acc) {
  __m512 c[GB_MR][GB_NV];
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nv; j++)
      c[i][j] =
          acc ? _mm512_maskz_loadu_ps(j < nv - 1 ? (__mmask16)0xFFFF : last, C + i * ldc + 16 * j)
              : _mm512_setzero_ps();
  for (int32_t p = 0; p < l; p++) {
    const float *bp = B + p * ldb;
    __m512 b[GB_NV];
    for (int j = 0; j < nv; j++)
      b[j] = _mm512_maskz_loadu_ps(j < nv - 1 ? (__mmask16)0xFFFF : last, bp + 16 * j);
    for (int i = 0; i < mr; i++) {
      const __m512 x = _mm512_set1_ps(A[i * ars + p * acs]);
      for (int j = 0; j < nv; j++) c[i][j] = _mm512_fmadd_ps(x, b[j], c[i][j]);
    }
  }
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nv; j++)
      _mm512_mask_storeu_ps(C + i * ldc + 16 * j, j < nv - 1 ? (__mmask16)0xFFFF : last, c[i][j]);
}

#define GB_TILE_NV(mr)                                                         \
  switch (nv) {                                                                \
    case 1: tile(ci, ldc, ai, ars, acs, bj, ldb, l, mr, 1, last, acc); break;  \
    case 2: tile(ci, ldc, ai, ars, acs, bj, ldb, l, mr, 2, last, acc); break;  \
    case 3: tile(ci, ldc, ai, ars, acs, bj, ldb, l, mr, 3, last, acc); break;  \
    default: tile(ci, ldc, ai, ars, acs, bj, ldb, l, mr, 4, last, acc); break; \
  }

/* gb_gemm_generic's contract (gla_bwd_body.h): blocks of 4 rows x 64 columns, then the
 * rows left one at a time; each sum over p in order, as the generic loop. */
static void gemm_avx512(float *C, int64_t ldc, const float *A, int64_t ars, int64_t acs,
                        const float *B, int64_t ldb, int32_t m, int32_t l, int32_t nc, int acc) {
  for (int32_t j0 = 0; j0 < nc; j0 += 16 * GB_NV) {
    const int32_t w = nc - j0 < 16 * GB_NV ? nc - j0 : 16 * GB_NV;
    const int nv = (w + 15) / 16;
    const __mmask16 last = mask_of(w - 16 * (nv - 1));
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
#define ROVE_GLA_GEMM_IMPL gemm_avx512
#define ROVE_GLA_TRANSPOSE_IMPL rove_avx2_transpose

#include "../gla_bwd_body.h"

void rove_gla_bwd_state_f32__avx512(const rove_gla_bwd_chunk *c) {
  rove_gla_bwd_state_body(c, rove_exp_f32__avx512);
}

void rove_gla_bwd_grads_f32__avx512(const rove_gla_bwd_chunk *c) {
  rove_gla_bwd_grads_body(c, rove_exp_f32__avx512);
}

void rove_gla_bwd_dg_f32__avx512(double *carry, float *dg, const float *q, const float *dq,
                                 const float *k, const float *dk, int32_t n) {
  rove_gla_dg_body(carry, dg, q, dq, k, dk, n);
}
