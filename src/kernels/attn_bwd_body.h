/* SPDX-License-Identifier: MIT */
/* The body of the backward tile (attn_bwd_kernels.h), written once in C for the loop
 * vectoriser: every inner loop runs over contiguous keys (S, dP through the transposed
 * blocks) or contiguous dims (the three accumulations, axpy rows), with no reductions, so
 * vectorising changes no rounding. Each ISA's file defines ROVE_BWD_MADD(a, b, c) (a * b +
 * c: the scalar reference computes it as a multiply and an add, the SIMD files as fmaf,
 * which their -mfma flags turn into vector FMAs) and includes this to define its kernel
 * with its own exp slot.
 *
 * The SIMD files replace the two hot parts (the S / dP products and the dq / dk / dv
 * sums) with register-blocked intrinsics through ROVE_BWD_PRODUCT_IMPL / ROVE_BWD_ACC_IMPL,
 * and may replace the P and dS passes (ROVE_BWD_P_IMPL, ROVE_BWD_DS_IMPL); the plain loops
 * below are the scalar reference and their fallback for other head_dims.
 *
 * Scratch: S / P [nq][TK], dP / dS [nq][TK], and tanh(S / c) [nq][TK] under softcap. */
#ifndef ROVE_ATTN_BWD_BODY_H
#define ROVE_ATTN_BWD_BODY_H

#include <math.h>
#include <string.h>

#include "attn_bwd_kernels.h"
#include "mask.h"

/* rows[i][0..TK) = a[i][.] . bT[.][0..TK) for nq rows of a ([nq][d]); bT is [d][TK]. */
static inline void rove_bwd_product(float *rows, const float *a, const float *bT, int32_t nq,
                                    int32_t d) {
  for (int32_t i = 0; i < nq; i++) {
    float acc[ROVE_BWD_TK] = {0};
    const float *ai = a + (int64_t)i * d;
    for (int32_t c = 0; c < d; c++) {
      const float *restrict b = bT + (int64_t)c * ROVE_BWD_TK;
      for (int32_t j = 0; j < ROVE_BWD_TK; j++) acc[j] = ROVE_BWD_MADD(ai[c], b[j], acc[j]);
    }
    memcpy(rows + (int64_t)i * ROVE_BWD_TK, acc, sizeof acc);
  }
}

/* An ISA file may define ROVE_BWD_PRODUCT_IMPL (register-blocked intrinsics) before
 * including this; the generic loop otherwise. The results are the same up to FMA
 * rounding: each sum runs over c in order either way. */
#ifndef ROVE_BWD_PRODUCT_IMPL
#define ROVE_BWD_PRODUCT_IMPL rove_bwd_product
#endif

/* dst[o][0..d) += sum_n w(o, n) src[n][0..d) for o < n_out, n < n_in, with the weight
 * w(o, n) = W[o * wo + n * wn]; a zero weight is skipped (it may multiply a NaN of an
 * invisible row). Each output row is summed in order over n. */
static inline void rove_bwd_acc(float *dst, const float *W, int64_t wo, int64_t wn,
                                const float *src, int32_t n_out, int32_t n_in, int32_t d) {
  for (int32_t o = 0; o < n_out; o++) {
    float *restrict x = dst + (int64_t)o * d;
    for (int32_t n = 0; n < n_in; n++) {
      const float w = W[o * wo + n * wn];
      if (w == 0.0f) continue;
      const float *restrict y = src + (int64_t)n * d;
      for (int32_t c = 0; c < d; c++) x[c] = ROVE_BWD_MADD(w, y[c], x[c]);
    }
  }
}

/* An ISA file may define ROVE_BWD_ACC_IMPL (same contract as rove_bwd_acc) first. */
#ifndef ROVE_BWD_ACC_IMPL
#define ROVE_BWD_ACC_IMPL rove_bwd_acc
#endif

/* g[j] = P[j] (g[j] - D) where P[j] != 0 (NaN included), else 0, for j < TK. */
static inline void rove_bwd_ds(float *g, const float *p, float D) {
  for (int32_t j = 0; j < ROVE_BWD_TK; j++) g[j] = p[j] != 0.0f ? p[j] * (g[j] - D) : 0.0f;
}

/* An ISA file may define ROVE_BWD_DS_IMPL (same contract and bits) first: compilers keep
 * the conditional above as a compare and a branch per element (GCC 12 -O3: 17 % of an
 * AVX2 backward's time), where a vector compare and an and do it 8 or 16 at a time. */
#ifndef ROVE_BWD_DS_IMPL
#define ROVE_BWD_DS_IMPL rove_bwd_ds
#endif

/* p[j] = exp(min(p[j] - lse, 0)) for j < nk (NaN stays NaN): s <= lse in exact
 * arithmetic; recomputed in another order s - lse can be > 0 (by ulps, or by far more for
 * logits of 1e16 where fp32 differences mean nothing), so it is clamped and P <= 1. */
static inline void rove_bwd_p(float *p, float lse, int32_t nk,
                              void (*expv)(float *, const float *, int64_t)) {
  for (int32_t j = 0; j < nk; j++) {
    const float x = p[j] - lse;
    p[j] = x > 0.0f ? 0.0f : x;
  }
  expv(p, p, nk);
}

/* An ISA file may define ROVE_BWD_P_IMPL (same contract, its exp inlined; it may write
 * p[nk .. TK), which the body zeroes after it) first. */
#ifndef ROVE_BWD_P_IMPL
#define ROVE_BWD_P_IMPL rove_bwd_p
#endif

static inline void rove_attn_bwd_body(const rove_bwd_tile *t,
                                      void (*expv)(float *, const float *, int64_t)) {
  const int32_t nq = t->nq, nk = t->nk, d = t->d, TK = ROVE_BWD_TK;
  const float cap = t->softcap;
  float *P = t->scratch, *dS = P + ROVE_BWD_TQ * TK, *th = dS + ROVE_BWD_TQ * TK;
  /* S = q^ k~^T over all TK columns (the zero columns past nk give 0) */
  ROVE_BWD_PRODUCT_IMPL(P, t->q, t->kT, nq, d);
  /* P = exp(s - lse) on the visible entries; dead rows (lse -inf) and masked entries 0 */
  for (int32_t i = 0; i < nq; i++) {
    float *p = P + (int64_t)i * TK;
    const float lse = t->lse[i];
    if (lse == -INFINITY) {
      for (int32_t j = 0; j < TK; j++) p[j] = 0.0f;
      continue;
    }
    if (cap > 0.0f) {
      float *h = th + (int64_t)i * TK;
      for (int32_t j = 0; j < nk; j++) h[j] = tanhf(p[j] / cap), p[j] = cap * h[j];
    }
    ROVE_BWD_P_IMPL(p, lse, nk, expv);
    for (int32_t j = nk; j < TK; j++) p[j] = 0.0f;
    if (t->mask)
      for (int32_t j = 0; j < nk; j++)
        if (!rove_visible(t->q_pos[i], t->k_pos[j], t->causal, t->window)) p[j] = 0.0f;
  }
  /* dP = do~ v~^T, then dS = P (dP - D) (x (1 - tanh^2) under softcap) */
  ROVE_BWD_PRODUCT_IMPL(dS, t->dout, t->vT, nq, d);
  for (int32_t i = 0; i < nq; i++) {
    float *p = P + (int64_t)i * TK, *g = dS + (int64_t)i * TK;
    const float Di = t->D[i];
    /* where P is 0, dS is 0 even if dP is not finite (garbage V of an invisible key) */
    ROVE_BWD_DS_IMPL(g, p, Di);
    if (cap > 0.0f && t->lse[i] != -INFINITY) {
      const float *h = th + (int64_t)i * TK;
      for (int32_t j = 0; j < nk; j++) /* a masked entry's tanh may be NaN: keep its 0 */
        if (g[j] != 0.0f) g[j] *= 1.0f - h[j] * h[j];
    }
  }
  /* accumulations (a zero weight adds nothing and is skipped, so a NaN or inf of an
   * invisible pair never reaches a gradient): dv_j += sum_i P_ij do_i, dk_j += sum_i
   * dS_ij q_i (weights by column: wo = 1, wn = TK), dq_i += sum_j dS_ij k_j (by row) */
  if (t->dv) ROVE_BWD_ACC_IMPL(t->dv, P, 1, TK, t->dout, nk, nq, d);
  if (t->dk) ROVE_BWD_ACC_IMPL(t->dk, dS, 1, TK, t->q, nk, nq, d);
  if (t->dq) ROVE_BWD_ACC_IMPL(t->dq, dS, TK, 1, t->k, nq, nk, d);
}

#endif
