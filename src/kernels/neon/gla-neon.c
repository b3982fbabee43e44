/* SPDX-License-Identifier: MIT */
/* NEON GLA kernels (algorithm and layouts in gla_kernels.h).
 *
 * GEMM register tile: MR = 4 rows x 4 q registers (16 floats) of C, one broadcast of A and
 * four loads of B per inner step; columns past the last multiple of 4 go through a scalar
 * loop (NEON has no masked loads). Exponentials are vectorised over key channels (4 per
 * register; the input rows' tails go through a small buffer). The diagonal block keeps
 * four registers per key channel and skips those above column t (they are zero). */
#include <arm_neon.h>
#include <string.h>

#include "kernels-neon.h"
#include "exp-neon.h"

#define MR 4
#define NVMAX 4
#define ROVE_AI __attribute__((always_inline))

static inline ROVE_AI void tile(float *c, int64_t ldc, const float *a, int64_t lda, const float *b,
                                int64_t ldb, int32_t l, const int mr, const int nv, int acc) {
  float32x4_t s[MR][NVMAX];
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nv; j++) s[i][j] = acc ? vld1q_f32(c + i * ldc + 4 * j) : vdupq_n_f32(0.0f);
  for (int32_t p = 0; p < l; p++) {
    float32x4_t bv[NVMAX];
    for (int j = 0; j < nv; j++) bv[j] = vld1q_f32(b + p * ldb + 4 * j);
    for (int i = 0; i < mr; i++) {
      const float32x4_t av = vld1q_dup_f32(a + i * lda + p);
      for (int j = 0; j < nv; j++) s[i][j] = vfmaq_f32(s[i][j], av, bv[j]);
    }
  }
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nv; j++) vst1q_f32(c + i * ldc + 4 * j, s[i][j]);
}

#define TILE_NV(mr)                                                 \
  switch (nv) {                                                     \
    case 1: tile(ci, ldc, ai, lda, bj, ldb, l, mr, 1, acc); break;  \
    case 2: tile(ci, ldc, ai, lda, bj, ldb, l, mr, 2, acc); break;  \
    case 3: tile(ci, ldc, ai, lda, bj, ldb, l, mr, 3, acc); break;  \
    default: tile(ci, ldc, ai, lda, bj, ldb, l, mr, 4, acc); break; \
  }

/* c[m][n] (row stride ldc) = (acc ? c : 0) + a[m][l] b[l][n]. */
static void gemm(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb,
                 int32_t m, int32_t l, int32_t n, int acc) {
  const int32_t n4 = n / 4 * 4;
  for (int32_t j0 = 0; j0 < n4; j0 += 4 * NVMAX) {
    const int nv = (n4 - j0 < 4 * NVMAX ? n4 - j0 : 4 * NVMAX) / 4;
    const float *bj = b + j0;
    int32_t i = 0;
    for (; i + MR <= m; i += MR) {
      float *ci = c + i * ldc + j0;
      const float *ai = a + i * lda;
      TILE_NV(MR)
    }
    for (; i < m; i++) {
      float *ci = c + i * ldc + j0;
      const float *ai = a + i * lda;
      TILE_NV(1)
    }
  }
  for (int32_t i = 0; i < m; i++) /* columns n4 .. n-1 */
    for (int32_t j = n4; j < n; j++) {
      float x = acc ? c[i * ldc + j] : 0.0f;
      for (int32_t p = 0; p < l; p++) x += a[i * lda + p] * b[p * ldb + j];
      c[i * ldc + j] = x;
    }
}

/* x[0 .. min(n,4)-1], zeros after. */
static inline float32x4_t load_part(const float *x, int32_t n) {
  if (n >= 4) return vld1q_f32(x);
  float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  memcpy(t, x, (size_t)n * sizeof(float));
  return vld1q_f32(t);
}

/* Block t0 .. t0+15, 4 key channels per pass: qo, qi, eg, kx, eG, R += G (see
 * gla_kernels.h). Within the block e^{P_t} and e^{X_s} are running products of e^{g}
 * (at most 16 factors, each <= 1); e^{R} and e^{G} come from the sums. */
static void block_prep(const rove_gla_chunk *c, const rove_gla_work *w, int32_t t0) {
  const int32_t dk = c->dk;
  const int64_t ld = w->ld;
  for (int32_t k = 0; k < dk; k += 4) {
    const int32_t m = dk - k;
    const float32x4_t r = vld1q_f32(w->r + k), er = rove_exp_neon(r);
    float32x4_t p = vdupq_n_f32(0.0f), ep = vdupq_n_f32(1.0f);
    for (int32_t t = 0; t < ROVE_GLA_BLOCK; t++) {
      const int64_t i = (int64_t)(t0 + t) * dk + k;
      const float32x4_t g = load_part(c->g + i, m), eg = rove_exp_neon(g);
      p = vaddq_f32(p, g);
      ep = vmulq_f32(ep, eg);
      const float32x4_t qo = vmulq_f32(load_part(c->q + i, m), ep);
      vst1q_f32(w->qo + t * ld + k, qo);
      vst1q_f32(w->qi + (t0 + t) * ld + k, vmulq_f32(qo, er));
      vst1q_f32(w->eg + t * ld + k, eg);
    }
    float32x4_t ex = vdupq_n_f32(1.0f);
    for (int32_t s = ROVE_GLA_BLOCK - 1; s >= 0; s--) {
      const float32x4_t kv = load_part(c->k + (int64_t)(t0 + s) * dk + k, m);
      vst1q_f32(w->kx + s * ld + k, vmulq_f32(kv, ex));
      ex = vmulq_f32(ex, vld1q_f32(w->eg + s * ld + k));
    }
    vst1q_f32(w->eG + k, rove_exp_neon(p));
    vst1q_f32(w->r + k, vaddq_f32(r, p));
  }
}

/* Diagonal block scores (see the scalar kernel), four key channels at a time held in
 * registers: D[j][0..3] = the 16 key columns of channel k + j. Step t decays them by
 * e^{g_t} and inserts k_t in column t; registers above column t are zero (skipped). The
 * partial scores of each channel group are added into arow. */
static void diag(const rove_gla_chunk *c, const rove_gla_work *w, int32_t t0) {
  const int32_t dk = c->dk, n = c->n;
  static const uint32_t lane_bits[4][4] = {
      {~0u, 0, 0, 0}, {0, ~0u, 0, 0}, {0, 0, ~0u, 0}, {0, 0, 0, ~0u}};
  for (int32_t k = 0; k < dk; k += 4) {
    const int32_t nj = dk - k < 4 ? dk - k : 4;
    float32x4_t D[4][4];
    for (int j = 0; j < 4; j++)
      for (int v = 0; v < 4; v++) D[j][v] = vdupq_n_f32(0.0f);
    for (int32_t t = 0; t < ROVE_GLA_BLOCK; t++) {
      const float *qt = c->q + (int64_t)(t0 + t) * dk + k, *kt = c->k + (int64_t)(t0 + t) * dk + k;
      const float *eg = w->eg + t * w->ld + k;
      const int top = t / 4; /* the register holding column t */
      const uint32x4_t sel = vld1q_u32(lane_bits[t & 3]);
      float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f),
                            vdupq_n_f32(0.0f)};
      for (int j = 0; j < 4; j++) {
        if (j >= nj) break;
        for (int v = 0; v < 4; v++) {
          if (v > top) break;
          D[j][v] = vmulq_n_f32(D[j][v], eg[j]);
          if (v == top) D[j][v] = vbslq_f32(sel, vdupq_n_f32(kt[j]), D[j][v]);
          acc[v] = vfmaq_n_f32(acc[v], D[j][v], qt[j]);
        }
      }
      float *ar = w->arow + (int64_t)t * n + t0;
      for (int v = 0; v < 4; v++)
        vst1q_f32(ar + 4 * v, k > 0 ? vaddq_f32(acc[v], vld1q_f32(ar + 4 * v)) : acc[v]);
    }
  }
}

/* kdT columns 0..t0-1 times e^{G}; block columns t0..t0+15 = kx transposed. */
static void advance_keys(const rove_gla_chunk *c, const rove_gla_work *w, int32_t t0) {
  const int32_t dk = c->dk, n = c->n;
  for (int32_t k = 0; k < dk; k++) {
    float *row = w->kdT + (int64_t)k * n;
    const float e = w->eG[k];
    for (int32_t s = 0; s < t0; s += 4) vst1q_f32(row + s, vmulq_n_f32(vld1q_f32(row + s), e));
    for (int32_t s = 0; s < ROVE_GLA_BLOCK; s++) row[t0 + s] = w->kx[s * w->ld + k];
  }
}

void rove_gla_chunk_f32__neon(const rove_gla_chunk *c) {
  const int32_t n = c->n, dk = c->dk, dv = c->dv;
  const rove_gla_work w = rove_gla_work_at(c->work, n, dk);
  memset(w.r, 0, (size_t)w.ld * sizeof(float));
  for (int32_t t0 = 0; t0 < n; t0 += ROVE_GLA_BLOCK) {
    block_prep(c, &w, t0);
    if (t0 > 0) gemm(w.arow, n, w.qo, w.ld, w.kdT, n, ROVE_GLA_BLOCK, dk, t0, 0);
    diag(c, &w, t0);
    gemm(c->o + (int64_t)t0 * dv, dv, w.arow, n, c->v, dv, ROVE_GLA_BLOCK, t0 + ROVE_GLA_BLOCK, dv,
         0);
    advance_keys(c, &w, t0);
  }
  gemm(c->o, dv, w.qi, w.ld, c->s, dv, n, dk, dv, 1);
  for (int32_t k = 0; k < dk; k += 4) /* eG = e^{b_{n-1}}: the state's decay */
    vst1q_f32(w.eG + k, rove_exp_neon(vld1q_f32(w.r + k)));
  for (int32_t k = 0; k < dk; k++) {
    float *row = c->s + (int64_t)k * dv;
    int32_t j = 0;
    for (; j + 4 <= dv; j += 4) vst1q_f32(row + j, vmulq_n_f32(vld1q_f32(row + j), w.eG[k]));
    for (; j < dv; j++) row[j] *= w.eG[k];
  }
  gemm(c->s, dv, w.kdT, n, c->v, dv, dk, n, dv, 1);
}

void rove_gla_steps_f32__neon(float *s, float *o, const float *q, const float *k, const float *v,
                              const float *g, int32_t n, int32_t dk, int32_t dv, float *work) {
  for (int32_t t = 0; t < n; t++) {
    const float *gt = g + (int64_t)t * dk;
    for (int32_t i = 0; i < dk; i += 4) {
      float e[4];
      vst1q_f32(e, rove_exp_neon(load_part(gt + i, dk - i)));
      memcpy(work + i, e, (size_t)(dk - i < 4 ? dk - i : 4) * sizeof(float));
    }
    const float *qt = q + (int64_t)t * dk, *kt = k + (int64_t)t * dk, *vt = v + (int64_t)t * dv;
    float *ot = o + (int64_t)t * dv;
    memset(ot, 0, (size_t)dv * sizeof(float));
    for (int32_t i = 0; i < dk; i++) {
      float *row = s + (int64_t)i * dv;
      const float a = work[i], ki = kt[i], qi = qt[i];
      int32_t j = 0;
      for (; j + 4 <= dv; j += 4) {
        float32x4_t r = vmulq_n_f32(vld1q_f32(row + j), a);
        r = vfmaq_n_f32(r, vld1q_f32(vt + j), ki);
        vst1q_f32(row + j, r);
        vst1q_f32(ot + j, vfmaq_n_f32(vld1q_f32(ot + j), r, qi));
      }
      for (; j < dv; j++) {
        row[j] = a * row[j] + ki * vt[j];
        ot[j] += qi * row[j];
      }
    }
  }
}

