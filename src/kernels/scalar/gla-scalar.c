/* SPDX-License-Identifier: MIT */
/* Portable reference GLA kernels: the truth every SIMD GLA kernel is tested against.
 * The algorithm and the work layout are described in gla_kernels.h. */
#include <math.h>
#include <string.h>

#include "kernels-scalar.h"

/* c[m][n] (row stride ldc) = (acc ? c : 0) + a[m][l] b[l][n]. */
static void gemm(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb,
                 int32_t m, int32_t l, int32_t n, int acc) {
  for (int32_t i = 0; i < m; i++) {
    float *ci = c + i * ldc;
    if (!acc) memset(ci, 0, (size_t)n * sizeof(float));
    for (int32_t p = 0; p < l; p++) {
      const float aip = a[i * lda + p];
      const float *bp = b + p * ldb;
      for (int32_t j = 0; j < n; j++) ci[j] += aip * bp[j];
    }
  }
}

/* Block of rows t0 .. t0+15: qo = q e^{P}, qi = qo e^{R}, eg = e^{g}, kx = k e^{X},
 * eG = e^{G}, then R += G (see gla_kernels.h). */
static void block_prep(const rove_gla_chunk *c, const rove_gla_work *w, int32_t t0) {
  const int32_t dk = c->dk;
  const int64_t ld = w->ld;
  for (int32_t k = 0; k < dk; k++) {
    const float er = expf(w->r[k]);
    float p = 0.0f;
    for (int32_t t = 0; t < ROVE_GLA_BLOCK; t++) {
      const int64_t i = (int64_t)(t0 + t) * dk + k;
      p += c->g[i];
      const float qo = c->q[i] * expf(p);
      w->qo[t * ld + k] = qo;
      w->qi[(t0 + t) * ld + k] = qo * er;
      w->eg[t * ld + k] = expf(c->g[i]);
    }
    float x = 0.0f;
    for (int32_t s = ROVE_GLA_BLOCK - 1; s >= 0; s--) {
      const int64_t i = (int64_t)(t0 + s) * dk + k;
      w->kx[s * ld + k] = c->k[i] * expf(x);
      x += c->g[i];
    }
    w->eG[k] = expf(p);
    w->r[k] += p;
  }
}

/* Scores of the diagonal block: arow[t][t0 + s] = q_t . k_s e^{b_t - b_s} for s <= t,
 * 0 above, with dT[k][s] = k_s e^{b_t - b_s} kept as a running product. */
static void diag(const rove_gla_chunk *c, const rove_gla_work *w, int32_t t0) {
  const int32_t dk = c->dk, n = c->n;
  memset(w->dT, 0, (size_t)dk * ROVE_GLA_BLOCK * sizeof(float));
  for (int32_t t = 0; t < ROVE_GLA_BLOCK; t++) {
    const float *qt = c->q + (int64_t)(t0 + t) * dk, *kt = c->k + (int64_t)(t0 + t) * dk;
    float a[ROVE_GLA_BLOCK] = {0};
    for (int32_t k = 0; k < dk; k++) {
      float *d = w->dT + k * ROVE_GLA_BLOCK;
      const float e = w->eg[t * w->ld + k];
      for (int32_t s = 0; s < t; s++) d[s] *= e;
      d[t] = kt[k];
      for (int32_t s = 0; s <= t; s++) a[s] += qt[k] * d[s];
    }
    memcpy(w->arow + (int64_t)t * n + t0, a, sizeof a);
  }
}

/* kdT: columns 0..t0-1 brought from r_i to r_{i+1} (times e^{G}), block i's keys added. */
static void advance_keys(const rove_gla_chunk *c, const rove_gla_work *w, int32_t t0) {
  const int32_t dk = c->dk, n = c->n;
  for (int32_t k = 0; k < dk; k++) {
    float *row = w->kdT + (int64_t)k * n;
    for (int32_t s = 0; s < t0; s++) row[s] *= w->eG[k];
    for (int32_t s = 0; s < ROVE_GLA_BLOCK; s++) row[t0 + s] = w->kx[s * w->ld + k];
  }
}

void rove_gla_chunk_f32__scalar(const rove_gla_chunk *c) {
  const int32_t n = c->n, dk = c->dk, dv = c->dv;
  const rove_gla_work w = rove_gla_work_at(c->work, n, dk);
  memset(w.r, 0, (size_t)dk * sizeof(float));
  for (int32_t t0 = 0; t0 < n; t0 += ROVE_GLA_BLOCK) {
    block_prep(c, &w, t0);
    if (t0 > 0) gemm(w.arow, n, w.qo, w.ld, w.kdT, n, ROVE_GLA_BLOCK, dk, t0, 0);
    diag(c, &w, t0);
    gemm(c->o + (int64_t)t0 * dv, dv, w.arow, n, c->v, dv, ROVE_GLA_BLOCK, t0 + ROVE_GLA_BLOCK, dv,
         0);
    advance_keys(c, &w, t0);
  }
  /* inter-chunk part with the old state, then the state update */
  gemm(c->o, dv, w.qi, w.ld, c->s, dv, n, dk, dv, 1);
  for (int32_t k = 0; k < dk; k++) {
    const float e = expf(w.r[k]);
    for (int32_t j = 0; j < dv; j++) c->s[(int64_t)k * dv + j] *= e;
  }
  gemm(c->s, dv, w.kdT, n, c->v, dv, dk, n, dv, 1);
}

void rove_gla_steps_f32__scalar(float *s, float *o, const float *q, const float *k, const float *v,
                                const float *g, int32_t n, int32_t dk, int32_t dv, float *work) {
  for (int32_t t = 0; t < n; t++) {
    const float *qt = q + (int64_t)t * dk, *kt = k + (int64_t)t * dk;
    const float *vt = v + (int64_t)t * dv;
    float *ot = o + (int64_t)t * dv;
    for (int32_t i = 0; i < dk; i++) work[i] = expf(g[(int64_t)t * dk + i]);
    memset(ot, 0, (size_t)dv * sizeof(float));
    for (int32_t i = 0; i < dk; i++) {
      float *row = s + (int64_t)i * dv;
      const float a = work[i], ki = kt[i], qi = qt[i];
      for (int32_t j = 0; j < dv; j++) {
        row[j] = a * row[j] + ki * vt[j];
        ot[j] += qi * row[j];
      }
    }
  }
}

