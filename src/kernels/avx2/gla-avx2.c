/* SPDX-License-Identifier: MIT */
/* AVX2 GLA kernels (algorithm and layouts in gla_kernels.h).
 *
 * GEMM register tile: MR = 4 rows x up to 3 ymm (24 floats) of C, 12 accumulators, one
 * broadcast of A and three loads of B per inner step; a last column vector that is not
 * full is masked (vmaskmov, whose stores are slow on some cores: never used for full
 * vectors). The state's decay is applied as the update's tile loads it. Exponentials are
 * vectorised over key channels (8 per ymm). The diagonal block keeps two ymm per key
 * channel and skips the upper one while t < 8 (it is zero); the block's keys reach kdT
 * through 8 x 8 register transposes. */
#include <immintrin.h>
#include <string.h>

#include "kernels-avx2.h"
#include "exp-avx2.h"
#include "transpose-avx2.h"

#define MR 4
#define NVMAX 3
#define ROVE_AI __attribute__((always_inline))

/* Lanes i < n set (n clamped to 0..8). */
static inline __m256i tail_mask(int64_t n) {
  const int32_t m = n >= 8 ? 8 : (int32_t)n;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* c[mr][nv ymm] = (acc ? c (row i times rs[i] when rs) : 0) + a[mr][l] b[l][nv ymm]; mr,
 * nv and masked are constants after inlining. Only a masked tile (n % 8 != 0) uses
 * vmaskmov on its last column vector: masked stores are slow on some cores (on AMD Zen 4
 * a loop of them took 40 % of the kernel's time). */
static inline ROVE_AI void tile(float *c, int64_t ldc, const float *a, int64_t lda, const float *b,
                                int64_t ldb, int32_t l, const int mr, const int nv,
                                const int masked, __m256i last, int acc, const float *rs) {
  __m256 s[MR][NVMAX];
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nv; j++) {
      const int plain = j < nv - 1 || !masked;
      s[i][j] = !acc   ? _mm256_setzero_ps()
                : plain ? _mm256_loadu_ps(c + i * ldc + 8 * j)
                        : _mm256_maskload_ps(c + i * ldc + 8 * j, last);
      if (acc && rs) s[i][j] = _mm256_mul_ps(s[i][j], _mm256_broadcast_ss(rs + i));
    }
  for (int32_t p = 0; p < l; p++) {
    __m256 bv[NVMAX];
    const float *bp = b + p * ldb;
    for (int j = 0; j < nv; j++)
      bv[j] = j < nv - 1 || !masked ? _mm256_loadu_ps(bp + 8 * j)
                                    : _mm256_maskload_ps(bp + 8 * j, last);
    for (int i = 0; i < mr; i++) {
      const __m256 av = _mm256_broadcast_ss(a + i * lda + p);
      for (int j = 0; j < nv; j++) s[i][j] = _mm256_fmadd_ps(av, bv[j], s[i][j]);
    }
  }
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nv; j++) {
      if (j < nv - 1 || !masked)
        _mm256_storeu_ps(c + i * ldc + 8 * j, s[i][j]);
      else
        _mm256_maskstore_ps(c + i * ldc + 8 * j, last, s[i][j]);
    }
}

#define TILE_NV(mr)                                                              \
  switch (2 * nv + masked) {                                                     \
    case 2: tile(ci, ldc, ai, lda, bj, ldb, l, mr, 1, 0, last, acc, ri); break;  \
    case 3: tile(ci, ldc, ai, lda, bj, ldb, l, mr, 1, 1, last, acc, ri); break;  \
    case 4: tile(ci, ldc, ai, lda, bj, ldb, l, mr, 2, 0, last, acc, ri); break;  \
    case 5: tile(ci, ldc, ai, lda, bj, ldb, l, mr, 2, 1, last, acc, ri); break;  \
    case 6: tile(ci, ldc, ai, lda, bj, ldb, l, mr, 3, 0, last, acc, ri); break;  \
    default: tile(ci, ldc, ai, lda, bj, ldb, l, mr, 3, 1, last, acc, ri); break; \
  }

/* c[m][n] (row stride ldc) = (acc ? c : 0) + a[m][l] b[l][n]; with acc and rs, row i of
 * c is multiplied by rs[i] first (the state's decay, fused into its update). */
static void gemm(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb,
                 int32_t m, int32_t l, int32_t n, int acc, const float *rs) {
  for (int32_t j0 = 0; j0 < n; j0 += 8 * NVMAX) {
    const int32_t nn = n - j0 < 8 * NVMAX ? n - j0 : 8 * NVMAX;
    const int nv = (nn + 7) / 8, masked = nn % 8 != 0;
    const __m256i last = tail_mask(nn - 8 * (nv - 1));
    const float *bj = b + j0;
    int32_t i = 0;
    for (; i + MR <= m; i += MR) {
      float *ci = c + i * ldc + j0;
      const float *ai = a + i * lda, *ri = rs ? rs + i : NULL;
      TILE_NV(MR)
    }
    for (; i < m; i++) {
      float *ci = c + i * ldc + j0;
      const float *ai = a + i * lda, *ri = rs ? rs + i : NULL;
      TILE_NV(1)
    }
  }
}

/* Block t0 .. t0+15, 8 key channels per pass: qo, qi, eg, kx, eG, R += G (see
 * gla_kernels.h). Within the block e^{P_t} and e^{X_s} are running products of e^{g}
 * (at most 16 factors, each <= 1); e^{R} and e^{G} come from the sums. */
static void block_prep(const rove_gla_chunk *c, const rove_gla_work *w, int32_t t0) {
  const int32_t dk = c->dk;
  const int64_t ld = w->ld;
  for (int32_t k = 0; k < dk; k += 8) {
    const __m256i m = tail_mask(dk - k);
    const __m256 r = _mm256_load_ps(w->r + k), er = rove_exp256(r);
    __m256 p = _mm256_setzero_ps(), ep = _mm256_set1_ps(1.0f);
    for (int32_t t = 0; t < ROVE_GLA_BLOCK; t++) {
      const int64_t i = (int64_t)(t0 + t) * dk + k;
      const __m256 g = _mm256_maskload_ps(c->g + i, m), eg = rove_exp256(g);
      p = _mm256_add_ps(p, g);
      ep = _mm256_mul_ps(ep, eg);
      const __m256 qo = _mm256_mul_ps(_mm256_maskload_ps(c->q + i, m), ep);
      _mm256_store_ps(w->qo + t * ld + k, qo);
      _mm256_store_ps(w->qi + (t0 + t) * ld + k, _mm256_mul_ps(qo, er));
      _mm256_store_ps(w->eg + t * ld + k, eg);
    }
    __m256 ex = _mm256_set1_ps(1.0f);
    for (int32_t s = ROVE_GLA_BLOCK - 1; s >= 0; s--) {
      const __m256 kv = _mm256_maskload_ps(c->k + (int64_t)(t0 + s) * dk + k, m);
      _mm256_store_ps(w->kx + s * ld + k, _mm256_mul_ps(kv, ex));
      ex = _mm256_mul_ps(ex, _mm256_load_ps(w->eg + s * ld + k));
    }
    _mm256_store_ps(w->eG + k, rove_exp256(p));
    _mm256_store_ps(w->r + k, _mm256_add_ps(r, p));
  }
}

/* Diagonal block scores (see the scalar kernel), four key channels at a time held in
 * registers: D[j][0..1] = the 16 key columns of channel k + j. Step t decays them by
 * e^{g_t} and inserts k_t in column t; the upper half is zero (and skipped) while t < 8.
 * The partial scores of each channel group are added into arow. */
static void diag(const rove_gla_chunk *c, const rove_gla_work *w, int32_t t0) {
  const int32_t dk = c->dk, n = c->n;
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int32_t k = 0; k < dk; k += 4) {
    const int32_t nj = dk - k < 4 ? dk - k : 4;
    __m256 D[4][2];
    for (int j = 0; j < 4; j++) D[j][0] = D[j][1] = _mm256_setzero_ps();
    for (int32_t t = 0; t < ROVE_GLA_BLOCK; t++) {
      const float *qt = c->q + (int64_t)(t0 + t) * dk + k, *kt = c->k + (int64_t)(t0 + t) * dk + k;
      const float *eg = w->eg + t * w->ld + k;
      const __m256 sel = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_set1_epi32(t & 7), lanes));
      __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
      for (int j = 0; j < 4; j++) {
        if (j >= nj) break;
        const __m256 e = _mm256_broadcast_ss(eg + j), kk = _mm256_broadcast_ss(kt + j);
        const __m256 qq = _mm256_broadcast_ss(qt + j);
        D[j][0] = _mm256_mul_ps(D[j][0], e);
        if (t < 8) D[j][0] = _mm256_blendv_ps(D[j][0], kk, sel);
        lo = _mm256_fmadd_ps(qq, D[j][0], lo);
        if (t >= 8) {
          D[j][1] = _mm256_blendv_ps(_mm256_mul_ps(D[j][1], e), kk, sel);
          hi = _mm256_fmadd_ps(qq, D[j][1], hi);
        }
      }
      float *ar = w->arow + (int64_t)t * n + t0;
      if (k > 0)
        lo = _mm256_add_ps(lo, _mm256_loadu_ps(ar)),
        hi = _mm256_add_ps(hi, _mm256_loadu_ps(ar + 8));
      _mm256_storeu_ps(ar, lo);
      _mm256_storeu_ps(ar + 8, hi);
    }
  }
}

/* kdT columns 0..t0-1 times e^{G}; block columns t0..t0+15 = kx transposed (8 x 8 tiles;
 * rows dk .. ld-1 of kdT get kx's zero padding, never read). */
static void advance_keys(const rove_gla_chunk *c, const rove_gla_work *w, int32_t t0) {
  const int32_t dk = c->dk, n = c->n;
  for (int32_t k = 0; k < dk; k++) {
    float *row = w->kdT + (int64_t)k * n;
    const __m256 e = _mm256_broadcast_ss(w->eG + k);
    for (int32_t s = 0; s < t0; s += 8)
      _mm256_storeu_ps(row + s, _mm256_mul_ps(_mm256_loadu_ps(row + s), e));
  }
  for (int32_t k = 0; k < dk; k += 8)
    for (int32_t s = 0; s < ROVE_GLA_BLOCK; s += 8) {
      __m256 r[8];
      for (int j = 0; j < 8; j++) r[j] = _mm256_load_ps(w->kx + (s + j) * w->ld + k);
      rove_avx2_transpose8(w->kdT + (int64_t)k * n + t0 + s, n, r);
    }
}

void rove_gla_chunk_f32__avx2(const rove_gla_chunk *c) {
  const int32_t n = c->n, dk = c->dk, dv = c->dv;
  const rove_gla_work w = rove_gla_work_at(c->work, n, dk);
  memset(w.r, 0, (size_t)w.ld * sizeof(float));
  for (int32_t t0 = 0; t0 < n; t0 += ROVE_GLA_BLOCK) {
    block_prep(c, &w, t0);
    if (t0 > 0) gemm(w.arow, n, w.qo, w.ld, w.kdT, n, ROVE_GLA_BLOCK, dk, t0, 0, NULL);
    diag(c, &w, t0);
    gemm(c->o + (int64_t)t0 * dv, dv, w.arow, n, c->v, dv, ROVE_GLA_BLOCK, t0 + ROVE_GLA_BLOCK, dv,
         0, NULL);
    advance_keys(c, &w, t0);
  }
  gemm(c->o, dv, w.qi, w.ld, c->s, dv, n, dk, dv, 1, NULL);
  for (int32_t k = 0; k < dk; k += 8) /* eG = e^{b_{n-1}}: the state's decay */
    _mm256_store_ps(w.eG + k, rove_exp256(_mm256_load_ps(w.r + k)));
  gemm(c->s, dv, w.kdT, n, c->v, dv, dk, n, dv, 1, w.eG); /* S = diag(eG) S + kdT v */
}

/* One token on state columns j0 .. j0 + 8 nv (s, ot, vt offset by j0 already); only a
 * masked call (columns % 8 != 0) uses vmaskmov on the last column vector. */
static inline ROVE_AI void step_cols(float *s, int64_t dv, float *ot, const float *qt,
                                     const float *kt, const float *vt, const float *ea, int32_t dk,
                                     const int nv, const int masked, __m256i last) {
  __m256 o[4], v[4];
  for (int j = 0; j < nv; j++) {
    v[j] = j < nv - 1 || !masked ? _mm256_loadu_ps(vt + 8 * j)
                                 : _mm256_maskload_ps(vt + 8 * j, last);
    o[j] = _mm256_setzero_ps();
  }
  for (int32_t i = 0; i < dk; i++) {
    const __m256 a = _mm256_broadcast_ss(ea + i), kk = _mm256_broadcast_ss(kt + i);
    const __m256 qq = _mm256_broadcast_ss(qt + i);
    float *row = s + i * dv;
    for (int j = 0; j < nv; j++) {
      const int plain = j < nv - 1 || !masked;
      __m256 r = plain ? _mm256_loadu_ps(row + 8 * j) : _mm256_maskload_ps(row + 8 * j, last);
      r = _mm256_fmadd_ps(a, r, _mm256_mul_ps(kk, v[j]));
      if (plain)
        _mm256_storeu_ps(row + 8 * j, r);
      else
        _mm256_maskstore_ps(row + 8 * j, last, r);
      o[j] = _mm256_fmadd_ps(qq, r, o[j]);
    }
  }
  for (int j = 0; j < nv; j++) {
    if (j < nv - 1 || !masked)
      _mm256_storeu_ps(ot + 8 * j, o[j]);
    else
      _mm256_maskstore_ps(ot + 8 * j, last, o[j]);
  }
}

#define STEP_NV(nv)                                                                        \
  if (masked)                                                                              \
    step_cols(s + j0, dv, ot + j0, qt, kt, vt + j0, work, dk, nv, 1, last);                \
  else                                                                                     \
    step_cols(s + j0, dv, ot + j0, qt, kt, vt + j0, work, dk, nv, 0, last);

void rove_gla_steps_f32__avx2(float *s, float *o, const float *q, const float *k, const float *v,
                              const float *g, int32_t n, int32_t dk, int32_t dv, float *work) {
  for (int32_t t = 0; t < n; t++) {
    const float *gt = g + (int64_t)t * dk;
    for (int32_t i = 0; i < dk; i += 8) { /* work holds dk floats: the tail is masked */
      const __m256i m = tail_mask(dk - i);
      const __m256 e = rove_exp256(_mm256_maskload_ps(gt + i, m));
      if (dk - i >= 8)
        _mm256_storeu_ps(work + i, e);
      else
        _mm256_maskstore_ps(work + i, m, e);
    }
    const float *qt = q + (int64_t)t * dk, *kt = k + (int64_t)t * dk, *vt = v + (int64_t)t * dv;
    float *ot = o + (int64_t)t * dv;
    for (int32_t j0 = 0; j0 < dv; j0 += 32) {
      const int32_t nn = dv - j0 < 32 ? dv - j0 : 32;
      const int nv = (nn + 7) / 8, masked = nn % 8 != 0;
      const __m256i last = tail_mask(nn - 8 * (nv - 1));
      switch (nv) {
        case 1: STEP_NV(1) break;
        case 2: STEP_NV(2) break;
        case 3: STEP_NV(3) break;
        default: STEP_NV(4) break;
      }
    }
  }
}

