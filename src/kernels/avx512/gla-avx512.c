/* SPDX-License-Identifier: MIT */
/* AVX-512 GLA kernels (algorithm and layouts in gla_kernels.h).
 *
 * The chunk's matrix products run through one register-tiled GEMM: MR rows x up to four
 * zmm columns (64 floats) of C in registers, one broadcast of A and up to four loads of B
 * per step of the inner dimension, the last column vector masked. The per-block
 * exponentials are vectorised over key channels (16 per zmm, masked tail); the diagonal
 * block keeps one zmm per key channel (its 16 key columns). The state's decay is applied
 * as the update's tile loads it. */
#include <immintrin.h>
#include <string.h>

#include "kernels-avx512.h"
#include "exp-avx512.h"

#define MR 4    /* rows of a GEMM register tile */
#define NVMAX 4 /* zmm columns of a GEMM register tile */
#define ROVE_AI __attribute__((always_inline))

static inline __mmask16 tail_mask(int64_t n) {
  return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* c[mr][nv zmm] = (acc ? c (row i times rs[i] when rs) : 0) + a[mr][l] b[l][nv zmm]; mr
 * and nv are constants after inlining. */
static inline ROVE_AI void tile(float *c, int64_t ldc, const float *a, int64_t lda, const float *b,
                                int64_t ldb, int32_t l, const int mr, const int nv, __mmask16 last,
                                int acc, const float *rs) {
  __m512 s[MR][NVMAX];
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nv; j++) {
      s[i][j] = !acc         ? _mm512_setzero_ps()
                : j < nv - 1 ? _mm512_loadu_ps(c + i * ldc + 16 * j)
                             : _mm512_maskz_loadu_ps(last, c + i * ldc + 16 * j);
      if (acc && rs) s[i][j] = _mm512_mul_ps(s[i][j], _mm512_set1_ps(rs[i]));
    }
  for (int32_t p = 0; p < l; p++) {
    __m512 bv[NVMAX];
    const float *bp = b + p * ldb;
    for (int j = 0; j < nv; j++)
      bv[j] = j < nv - 1 ? _mm512_loadu_ps(bp + 16 * j) : _mm512_maskz_loadu_ps(last, bp + 16 * j);
    for (int i = 0; i < mr; i++) {
      const __m512 av = _mm512_set1_ps(a[i * lda + p]);
      for (int j = 0; j < nv; j++) s[i][j] = _mm512_fmadd_ps(av, bv[j], s[i][j]);
    }
  }
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nv; j++) {
      if (j < nv - 1)
        _mm512_storeu_ps(c + i * ldc + 16 * j, s[i][j]);
      else
        _mm512_mask_storeu_ps(c + i * ldc + 16 * j, last, s[i][j]);
    }
}

#define TILE_NV(mr)                                                           \
  switch (nv) {                                                               \
    case 1: tile(ci, ldc, ai, lda, bj, ldb, l, mr, 1, last, acc, ri); break;  \
    case 2: tile(ci, ldc, ai, lda, bj, ldb, l, mr, 2, last, acc, ri); break;  \
    case 3: tile(ci, ldc, ai, lda, bj, ldb, l, mr, 3, last, acc, ri); break;  \
    default: tile(ci, ldc, ai, lda, bj, ldb, l, mr, 4, last, acc, ri); break; \
  }

/* c[m][n] (row stride ldc) = (acc ? c : 0) + a[m][l] b[l][n]; with acc and rs, row i of
 * c is multiplied by rs[i] first (the state's decay, fused into its update). */
static void gemm(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb,
                 int32_t m, int32_t l, int32_t n, int acc, const float *rs) {
  for (int32_t j0 = 0; j0 < n; j0 += 16 * NVMAX) {
    const int32_t nn = n - j0 < 16 * NVMAX ? n - j0 : 16 * NVMAX;
    const int nv = (nn + 15) / 16;
    const __mmask16 last = tail_mask(nn - 16 * (nv - 1));
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

/* In-register transpose of the 16 x 16 tile r (row i = r[i]) into dst rows (stride ld):
 * 32-bit then 64-bit interleaves inside 128-bit lanes, then two rounds of lane shuffles. */
static inline ROVE_AI void transpose16(float *dst, int64_t ld, const __m512 *r) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) { /* u[i + c], lane L: column 4L + c of rows i .. i+3 */
    const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 2]);
    const __m512d c = _mm512_castps_pd(t[i + 1]), d = _mm512_castps_pd(t[i + 3]);
    u[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
    u[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    u[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
    u[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
  }
  for (int c = 0; c < 4; c++) {
    const __m512 x0 = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 y0 = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512 x1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 y1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(3, 2, 3, 2));
    _mm512_storeu_ps(dst + (0 + c) * ld, _mm512_shuffle_f32x4(x0, x1, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_ps(dst + (4 + c) * ld, _mm512_shuffle_f32x4(x0, x1, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm512_storeu_ps(dst + (8 + c) * ld, _mm512_shuffle_f32x4(y0, y1, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_ps(dst + (12 + c) * ld, _mm512_shuffle_f32x4(y0, y1, _MM_SHUFFLE(3, 1, 3, 1)));
  }
}

/* Block t0 .. t0+15, 16 key channels per pass (masked tail, zeros past dk). Within the
 * block e^{P_t} and e^{X_s} are running products of e^{g} (at most 16 factors, each
 * <= 1: no exp of a sum is needed there); e^{R} and e^{G} come from the sums.
 * Writes qo = q e^{P}, qi = qo e^{R}, qb = q, eg = e^{g}, dT = the block's keys
 * transposed ([ld][16]), kdT columns t0.. = (k e^{X}) transposed, eG = e^{G}, R += G. */
static void block_prep(const rove_gla_chunk *c, const rove_gla_work *w, int32_t t0) {
  const int32_t dk = c->dk;
  const int64_t ld = w->ld;
  for (int32_t k = 0; k < dk; k += 16) {
    const __mmask16 m = tail_mask(dk - k);
    const __m512 r = _mm512_load_ps(w->r + k), er = rove_exp512_ps(r);
    __m512 p = _mm512_setzero_ps(), ep = _mm512_set1_ps(1.0f), kt[16];
    for (int32_t t = 0; t < ROVE_GLA_BLOCK; t++) {
      const int64_t i = (int64_t)(t0 + t) * dk + k;
      const __m512 g = _mm512_maskz_loadu_ps(m, c->g + i), q = _mm512_maskz_loadu_ps(m, c->q + i);
      const __m512 eg = rove_exp512_ps(g);
      p = _mm512_add_ps(p, g);
      ep = _mm512_mul_ps(ep, eg);
      const __m512 qo = _mm512_mul_ps(q, ep);
      _mm512_store_ps(w->qo + t * ld + k, qo);
      _mm512_store_ps(w->qi + (t0 + t) * ld + k, _mm512_mul_ps(qo, er));
      _mm512_store_ps(w->qb + t * ld + k, q);
      _mm512_store_ps(w->eg + t * ld + k, eg);
      kt[t] = _mm512_maskz_loadu_ps(m, c->k + i);
    }
    transpose16(w->dT + k * 16, 16, kt);
    __m512 ex = _mm512_set1_ps(1.0f); /* e^{X_s}, s from the block end down */
    for (int32_t s = ROVE_GLA_BLOCK - 1; s >= 0; s--) {
      kt[s] = _mm512_mul_ps(kt[s], ex);
      ex = _mm512_mul_ps(ex, _mm512_load_ps(w->eg + s * ld + k));
    }
    transpose16(w->kdT + (int64_t)k * c->n + t0, c->n, kt);
    _mm512_store_ps(w->eG + k, rove_exp512_ps(p));
    _mm512_store_ps(w->r + k, _mm512_add_ps(r, p));
  }
}

/* Diagonal block scores (see the scalar kernel), 16 key channels at a time held in
 * registers: D[j] = the 16 key columns of channel k + j. Step t decays the columns s < t
 * by e^{g_t} (a masked multiply); columns > t are not decayed yet and are masked out of
 * the scores. */
static void diag(const rove_gla_chunk *c, const rove_gla_work *w, int32_t t0) {
  const int32_t dk = c->dk, n = c->n;
  const int64_t ld = w->ld;
  for (int32_t k = 0; k < dk; k += 16) {
    __m512 D[16];
    for (int j = 0; j < 16; j++) D[j] = _mm512_load_ps(w->dT + (k + j) * 16);
    for (int32_t t = 0; t < ROVE_GLA_BLOCK; t++) {
      const __mmask16 lt = (__mmask16)((1u << t) - 1u), le = (__mmask16)((2u << t) - 1u);
      const float *eg = w->eg + t * ld + k, *qb = w->qb + t * ld + k;
      __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
      for (int j = 0; j < 16; j += 2) {
        D[j] = _mm512_mask_mul_ps(D[j], lt, D[j], _mm512_set1_ps(eg[j]));
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(qb[j]), D[j], a0);
        D[j + 1] = _mm512_mask_mul_ps(D[j + 1], lt, D[j + 1], _mm512_set1_ps(eg[j + 1]));
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(qb[j + 1]), D[j + 1], a1);
      }
      float *ar = w->arow + (int64_t)t * n + t0;
      __m512 a = _mm512_maskz_mov_ps(le, _mm512_add_ps(a0, a1));
      if (k > 0) a = _mm512_add_ps(a, _mm512_loadu_ps(ar));
      _mm512_storeu_ps(ar, a);
    }
  }
}

/* kdT columns 0..t0-1 brought forward by the block: times e^{G}. */
static void advance_keys(const rove_gla_chunk *c, const rove_gla_work *w, int32_t t0) {
  for (int32_t k = 0; k < c->dk; k++) {
    float *row = w->kdT + (int64_t)k * c->n;
    const __m512 e = _mm512_set1_ps(w->eG[k]);
    for (int32_t s = 0; s < t0; s += 16)
      _mm512_storeu_ps(row + s, _mm512_mul_ps(_mm512_loadu_ps(row + s), e));
  }
}

void rove_gla_chunk_f32__avx512(const rove_gla_chunk *c) {
  const int32_t n = c->n, dk = c->dk, dv = c->dv;
  const rove_gla_work w = rove_gla_work_at(c->work, n, dk);
  memset(w.r, 0, (size_t)w.ld * sizeof(float));
  for (int32_t t0 = 0; t0 < n; t0 += ROVE_GLA_BLOCK) {
    block_prep(c, &w, t0);
    if (t0 > 0) gemm(w.arow, n, w.qo, w.ld, w.kdT, n, ROVE_GLA_BLOCK, dk, t0, 0, NULL);
    diag(c, &w, t0);
    gemm(c->o + (int64_t)t0 * dv, dv, w.arow, n, c->v, dv, ROVE_GLA_BLOCK, t0 + ROVE_GLA_BLOCK, dv,
         0, NULL);
    if (t0 > 0) advance_keys(c, &w, t0);
  }
  gemm(c->o, dv, w.qi, w.ld, c->s, dv, n, dk, dv, 1, NULL);
  for (int32_t k = 0; k < dk; k += 16) /* eG = e^{b_{n-1}}: the state's decay */
    _mm512_store_ps(w.eG + k, rove_exp512_ps(_mm512_load_ps(w.r + k)));
  gemm(c->s, dv, w.kdT, n, c->v, dv, dk, n, dv, 1, w.eG); /* S = diag(eG) S + kdT v */
}

/* One token on the state columns j0 .. j0 + 16 nv (s, ot, vt offset by j0 already). */
static inline ROVE_AI void step_cols(float *s, int64_t dv, float *ot, const float *qt,
                                     const float *kt, const float *vt, const float *ea, int32_t dk,
                                     const int nv, __mmask16 last) {
  __m512 o[NVMAX], v[NVMAX];
  for (int j = 0; j < nv; j++) {
    v[j] = j < nv - 1 ? _mm512_loadu_ps(vt + 16 * j) : _mm512_maskz_loadu_ps(last, vt + 16 * j);
    o[j] = _mm512_setzero_ps();
  }
  for (int32_t i = 0; i < dk; i++) {
    const __m512 a = _mm512_set1_ps(ea[i]), kk = _mm512_set1_ps(kt[i]), qq = _mm512_set1_ps(qt[i]);
    float *row = s + i * dv;
    for (int j = 0; j < nv; j++) {
      __m512 r =
          j < nv - 1 ? _mm512_loadu_ps(row + 16 * j) : _mm512_maskz_loadu_ps(last, row + 16 * j);
      r = _mm512_fmadd_ps(a, r, _mm512_mul_ps(kk, v[j]));
      if (j < nv - 1)
        _mm512_storeu_ps(row + 16 * j, r);
      else
        _mm512_mask_storeu_ps(row + 16 * j, last, r);
      o[j] = _mm512_fmadd_ps(qq, r, o[j]);
    }
  }
  for (int j = 0; j < nv; j++) {
    if (j < nv - 1)
      _mm512_storeu_ps(ot + 16 * j, o[j]);
    else
      _mm512_mask_storeu_ps(ot + 16 * j, last, o[j]);
  }
}

void rove_gla_steps_f32__avx512(float *s, float *o, const float *q, const float *k, const float *v,
                                const float *g, int32_t n, int32_t dk, int32_t dv, float *work) {
  for (int32_t t = 0; t < n; t++) {
    const float *gt = g + (int64_t)t * dk;
    for (int32_t i = 0; i < dk; i += 16) {
      const __mmask16 m = tail_mask(dk - i);
      _mm512_mask_storeu_ps(work + i, m, rove_exp512_ps(_mm512_maskz_loadu_ps(m, gt + i)));
    }
    const float *qt = q + (int64_t)t * dk, *kt = k + (int64_t)t * dk, *vt = v + (int64_t)t * dv;
    float *ot = o + (int64_t)t * dv;
    for (int32_t j0 = 0; j0 < dv; j0 += 16 * NVMAX) {
      const int32_t nn = dv - j0 < 16 * NVMAX ? dv - j0 : 16 * NVMAX;
      const int nv = (nn + 15) / 16;
      const __mmask16 last = tail_mask(nn - 16 * (nv - 1));
      switch (nv) {
        case 1: step_cols(s + j0, dv, ot + j0, qt, kt, vt + j0, work, dk, 1, last); break;
        case 2: step_cols(s + j0, dv, ot + j0, qt, kt, vt + j0, work, dk, 2, last); break;
        case 3: step_cols(s + j0, dv, ot + j0, qt, kt, vt + j0, work, dk, 3, last); break;
        default: step_cols(s + j0, dv, ot + j0, qt, kt, vt + j0, work, dk, 4, last); break;
      }
    }
  }
}

