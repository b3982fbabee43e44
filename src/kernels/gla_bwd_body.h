/* SPDX-License-Identifier: MIT */
/* The body of the two GLA backward sweeps (gla_kernels.h has the math), written once in
 * C for the loop vectoriser: every inner loop runs over contiguous channels, keys or
 * value dims with no reduction, so vectorising changes no rounding. Each ISA's file
 * defines ROVE_GLA_MADD(a, b, c) (a * b + c: a multiply and an add in the scalar
 * reference, fmaf in the SIMD files, which their -mfma flags turn into vector FMAs) and
 * includes this to define its kernels with its own exp slot.
 *
 * Ranges of g (per key channel, in double, each a sum of g of one sign):
 *   cs[t] = g_0 + .. + g_t            (chunk start to t)
 *   rs[s] = g_{s+1} + .. + g_{n-1}    (after s to the chunk end)
 *   Y[s]  = g_{s+1} + .. + g_{t0-1}   (dq: key s to the start t0 of the query block)
 *   Z[t]  = g_{L0} + .. + g_t         (dk, dv: start L0 of the block after the key
 *                                      block to query t)
 * Y and Z are carried from block to block by adding a block total (same sign, no
 * cancellation). For s in block J < block I of t: e^{b_t - b_s} = e^{Y_s} e^{sum_{t0..t}}
 * (dq) or e^{Z_t} e^{sum_{s+1..s0+15}} (dkv); inside one block: running products of e^{g}.
 *
 * Work layout (64-byte parts): cs, rs, YZ [n][dk] doubles, tot [dk] doubles; fac, kd, eg, hv, kend, blk
 * [n][dk]; D [16][n], A [n][16]; acc, sd, Kw, KT, bet, Kb [16][dk]; xT [dv][n] (v or do
 * transposed), sT [dv][dk] (S or H transposed); Ad [16][16]; DT [n][n]. */
#ifndef ROVE_GLA_BWD_BODY_H
#define ROVE_GLA_BWD_BODY_H

#include <string.h>

#include "gla_kernels.h"

#define GB_BLK ROVE_GLA_BLOCK

typedef struct {
  double *cs, *rs, *yz, *tot;
  float *fac, *kd, *eg, *hv, *kend, *blk;
  float *D, *A;
  float *acc, *sd, *Kw, *KT, *bet, *Kb;
  float *xT, *sT, *Ad;
  float *DT; /* [n][n]: v_s . do_t of the fast forms (gb_dt) */
} gb_work;

static inline gb_work gb_work_at(float *w, int64_t n, int64_t dk, int64_t dv) {
  const int64_t nk = rove_gla_round16(n * dk), bk = rove_gla_round16(16 * dk);
  gb_work p;
  p.cs = (double *)w;
  p.rs = p.cs + nk;
  p.yz = p.rs + nk;
  p.tot = p.yz + nk;
  float *f = w + 6 * nk + rove_gla_round16(2 * dk);
  p.fac = f, f += nk;
  p.kd = f, f += nk;
  p.eg = f, f += nk;
  p.hv = f, f += nk;
  p.kend = f, f += nk;
  p.blk = f, f += nk;
  p.D = f, f += 16 * n;
  p.A = f, f += 16 * n;
  p.acc = f, f += bk;
  p.sd = f, f += bk;
  p.Kw = f, f += bk;
  p.KT = f, f += bk;
  p.bet = f, f += bk;
  p.Kb = f, f += bk;
  p.xT = f, f += rove_gla_round16(dv * n);
  p.sT = f, f += rove_gla_round16(dv * dk);
  p.Ad = f, f += 256;
  p.DT = f;
  return p;
}

/* C[i][0..nc) (row stride ldc) = (acc ? C : 0) + sum_p A(i, p) B[p][0..nc) for i < m, p < l,
 * with A(i, p) = A[i * ars + p * acs] (a plain or a transposed operand) and B's rows ldb
 * apart. Each sum runs over p in order. */
static inline void gb_gemm_generic(float *C, int64_t ldc, const float *A, int64_t ars, int64_t acs,
                                   const float *B, int64_t ldb, int32_t m, int32_t l, int32_t nc,
                                   int acc) {
  for (int32_t i = 0; i < m; i++) {
    float *restrict ci = C + i * ldc;
    if (!acc) memset(ci, 0, (size_t)nc * sizeof(float));
    for (int32_t p = 0; p < l; p++) {
      const float a = A[i * ars + p * acs];
      const float *restrict bp = B + p * ldb;
      for (int32_t j = 0; j < nc; j++) ci[j] = ROVE_GLA_MADD(a, bp[j], ci[j]);
    }
  }
}

/* An ISA file may define ROVE_GLA_GEMM_IMPL (register-blocked intrinsics, same contract)
 * before including this. */
#ifndef ROVE_GLA_GEMM_IMPL
#define ROVE_GLA_GEMM_IMPL gb_gemm_generic
#endif

/* Plain operands: A[i][p] with row stride lda. */
static inline void gb_gemm(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                           int64_t ldb, int32_t m, int32_t l, int32_t nc, int acc) {
  ROVE_GLA_GEMM_IMPL(C, ldc, A, lda, 1, B, ldb, m, l, nc, acc);
}

/* Transposed A: A(i, p) = A[p][i] with row stride lda. */
static inline void gb_gemm_tn(float *C, int64_t ldc, const float *A, int64_t lda, const float *B,
                              int64_t ldb, int32_t m, int32_t l, int32_t nc, int acc) {
  ROVE_GLA_GEMM_IMPL(C, ldc, A, 1, lda, B, ldb, m, l, nc, acc);
}

/* dst[c][r] = src[r][c] for r < rows, c < cols (src row stride ls, dst row stride ld).
 * An ISA file may define ROVE_GLA_TRANSPOSE_IMPL (same contract; a move, no rounding). */
static inline void gb_transpose(float *dst, int64_t ld, const float *src, int64_t ls, int32_t rows,
                                int32_t cols) {
#ifdef ROVE_GLA_TRANSPOSE_IMPL
  ROVE_GLA_TRANSPOSE_IMPL(dst, ld, src, ls, rows, cols);
#else
  for (int32_t r = 0; r < rows; r++)
    for (int32_t c = 0; c < cols; c++) dst[c * ld + r] = src[r * ls + c];
#endif
}

/* y[i] = exp((float)x[i]) for i < m (x is a sum of g's: <= 0, or -inf past float). */
static inline void gb_exp(float *y, const double *x, int64_t m,
                          void (*expv)(float *, const float *, int64_t)) {
  for (int64_t i = 0; i < m; i++) y[i] = (float)x[i];
  expv(y, y, m);
}

/* y[i] = exp(-(float)x[i]) for i < m (only where -x <= GB_FAST_SUM: no overflow). */
static inline void gb_exp_neg(float *y, const double *x, int64_t m,
                              void (*expv)(float *, const float *, int64_t)) {
  for (int64_t i = 0; i < m; i++) y[i] = (float)-x[i];
  expv(y, y, m);
}

/* z[i] = x[i] * y[i] for i < m. */
static inline void gb_mul(float *restrict z, const float *x, const float *y, int64_t m) {
  for (int64_t i = 0; i < m; i++) z[i] = x[i] * y[i];
}

/* Whether x[0..m) are all finite (x - x is 0 for a finite x, NaN otherwise; branch-free,
 * so that it vectorises). */
static inline int gb_all_finite(const float *x, int64_t m) {
  int ok = 1;
  for (int64_t i = 0; i < m; i++) ok &= (x[i] - x[i]) == 0.0f;
  return ok;
}

/* Bound of the fast paths: where a range of g sums to >= -GB_FAST_SUM on every channel,
 * e^{b_t - b_s} is taken as e^{b_t} e^{-b_s} with both factors formed from the sums
 * (e^{-b} <= e^{GB_FAST_SUM} ~ 1.1e26 is far from float overflow). Each factor has the
 * relative error of one float exp of an argument of magnitude <= GB_FAST_SUM (~60 ulp of
 * 1 at worst), and every term of a product is rescaled back to its own size, so a sum's
 * error stays eps times the sum of its terms' magnitudes, as in the direct form. */
#define GB_FAST_SUM 60.0
/* gb_fallbacks: a factor e^{-b} <= e^{60} times an input of more than ~3e12 passes float's
 * range where the exact result does not. So each sweep takes the whole-chunk form, then
 * the block form with the e^{P} e^{-P} blocks, then the block form with running products
 * only (no factor above 1: the forward's care), the first whose outputs are all finite.
 * Inputs holding Inf or NaN end on the last form, which is the reference's. */

/* Whether the whole chunk takes the fast path: b_{n-1} = cs[n-1] >= -GB_FAST_SUM on
 * every channel (b is non-increasing, as g <= 0, so then every b_t is). */
static inline int gb_chunk_fast(const rove_gla_bwd_chunk *c, const gb_work *w) {
  const double *last = w->cs + (int64_t)(c->n - 1) * c->dk;
  int fast = 1;
  for (int32_t k = 0; k < c->dk; k++) fast &= last[k] >= -GB_FAST_SUM;
  return fast;
}

/* Zero the entries above the diagonal of the 16 x 16 block at column col0 of 16 rows
 * (row stride ld): x[i][col0 + s] = 0 for s > i (upper) or s < i (lower). */
static inline void gb_mask_block(float *x, int64_t ld, int32_t col0, int upper) {
  for (int32_t i = 0; i < GB_BLK; i++) {
    float *row = x + i * ld + col0;
    if (upper)
      for (int32_t s = i + 1; s < GB_BLK; s++) row[s] = 0.0f;
    else
      for (int32_t s = 0; s < i; s++) row[s] = 0.0f;
  }
}

/* cs of the chunk (every path needs it). */
static inline void gb_prefix(const rove_gla_bwd_chunk *c, const gb_work *w) {
  const int32_t n = c->n, dk = c->dk;
  for (int32_t k = 0; k < dk; k++) w->cs[k] = c->g[k];
  for (int32_t t = 1; t < n; t++)
    for (int32_t k = 0; k < dk; k++)
      w->cs[(int64_t)t * dk + k] = w->cs[(int64_t)(t - 1) * dk + k] + c->g[(int64_t)t * dk + k];
}

/* rs of the chunk (the state update and the dk, dv block paths). */
static inline void gb_suffix(const rove_gla_bwd_chunk *c, const gb_work *w) {
  const int32_t n = c->n, dk = c->dk;
  for (int32_t k = 0; k < dk; k++) w->rs[(int64_t)(n - 1) * dk + k] = 0.0;
  for (int32_t t = n - 2; t >= 0; t--)
    for (int32_t k = 0; k < dk; k++)
      w->rs[(int64_t)t * dk + k] =
          w->rs[(int64_t)(t + 1) * dk + k] + c->g[(int64_t)(t + 1) * dk + k];
}

/* eg rows t0 .. t0+15 = e^{g} (the running products of a block's slow path). */
static inline void gb_block_eg(const rove_gla_bwd_chunk *c, const gb_work *w, int32_t t0,
                               void (*expv)(float *, const float *, int64_t)) {
  const int64_t e0 = (int64_t)t0 * c->dk, m = (int64_t)GB_BLK * c->dk;
  for (int64_t i = 0; i < m; i++) w->eg[e0 + i] = c->g[e0 + i];
  expv(w->eg + e0, w->eg + e0, m);
}

/* State-like [dk][dv] x scaled by rows: x[k][.] *= e[k]. */
static inline void gb_scale_rows(float *x, const float *e, int32_t dk, int32_t dv) {
  for (int32_t k = 0; k < dk; k++)
    for (int32_t j = 0; j < dv; j++) x[(int64_t)k * dv + j] *= e[k];
}

/* The block of rows t0 .. t0+15: P_t = g_{t0} + .. + g_t (double), blk[i] = e^{P_{t0+i}}.
 * When every channel's block total is >= -GB_FAST_SUM, e^{b_t - b_s} = e^{P_t} e^{-P_s}
 * (GB_FAST_SUM): then also
 * fac rows t0.. = e^{-P} and 1 is returned (the block's pairs become one matrix product);
 * else 0 (running products of e^{g}: a huge decay in the block, e.g. -FLT_MAX). */
static inline int gb_block_sums(const rove_gla_bwd_chunk *c, const gb_work *w, int32_t t0,
                                void (*expv)(float *, const float *, int64_t)) {
  const int32_t dk = c->dk;
  float *en = w->fac + (int64_t)t0 * dk;
  for (int32_t k = 0; k < dk; k++) w->tot[k] = 0.0;
  for (int32_t i = 0; i < GB_BLK; i++) {
    const float *gi = c->g + (int64_t)(t0 + i) * dk;
    float *restrict b = w->blk + (int64_t)i * dk, *restrict e = en + (int64_t)i * dk;
    for (int32_t k = 0; k < dk; k++) {
      w->tot[k] += gi[k];
      b[k] = (float)w->tot[k], e[k] = (float)-w->tot[k];
    }
  }
  int fast = 1;
  for (int32_t k = 0; k < dk; k++) fast &= w->tot[k] >= -GB_FAST_SUM;
  expv(w->blk, w->blk, (int64_t)GB_BLK * dk);
  if (fast) expv(en, en, (int64_t)GB_BLK * dk);
  return fast;
}

/* dq of the chunk in 16-row blocks (any decays; cs formed); a block's pairs
 * take the e^{P_t} e^{-P_s} form only with allow_fast. */
static inline void gb_dq_blocks(const rove_gla_bwd_chunk *c, const gb_work *wp,
                                void (*expv)(float *, const float *, int64_t), int allow_fast) {
  const int32_t n = c->n, dk = c->dk, dv = c->dv;
  const gb_work w = *wp;
  gb_transpose(w.xT, n, c->v, dv, n, dv);   /* vT [dv][n] */
  gb_transpose(w.sT, dk, c->s, dv, dk, dv); /* ST [dv][dk] */
  for (int32_t t0 = 0; t0 < n; t0 += GB_BLK) {
    const float *dot = c->dout + (int64_t)t0 * dv;
    /* D[i][s] = do_{t0+i} . v_s for s < t0 + 16 (row stride n) */
    gb_gemm(w.D, n, dot, dv, w.xT, n, GB_BLK, dv, t0 + GB_BLK, 0);
    /* P_t = g_{t0} + .. + g_t: blk = e^{P}, fac (rows t0..) = e^{-P} on the fast path */
    const int fast = gb_block_sums(c, &w, t0, expv) && allow_fast;
    if (t0 > 0) {
      /* Y[s] = g_{s+1} + .. + g_{t0-1}: the earlier keys gain the previous block's total,
       * the previous block's keys get their sums to its end */
      const int32_t p0 = t0 - GB_BLK;
      for (int32_t k = 0; k < dk; k++) w.tot[k] = 0.0;
      for (int32_t s = t0 - 1; s >= p0; s--) {
        double *restrict y = w.yz + (int64_t)s * dk;
        const float *gs = c->g + (int64_t)s * dk;
        for (int32_t k = 0; k < dk; k++) y[k] = w.tot[k], w.tot[k] += gs[k];
      }
      for (int32_t s = 0; s < p0; s++) {
        double *restrict y = w.yz + (int64_t)s * dk;
        for (int32_t k = 0; k < dk; k++) y[k] += w.tot[k];
      }
      gb_exp(w.fac, w.yz, (int64_t)t0 * dk, expv);
      gb_mul(w.kd, c->k, w.fac, (int64_t)t0 * dk);
    }
    if (fast) {
      /* e^{b_t - b_s} = e^{P_t} e^{-P_s} inside the block too: one product over the
       * earlier keys and the block's own (D masked above the diagonal) */
      const float *en = w.fac + (int64_t)t0 * dk, *kb = c->k + (int64_t)t0 * dk;
      for (int64_t i = 0; i < (int64_t)GB_BLK * dk; i++) w.kd[(int64_t)t0 * dk + i] = kb[i] * en[i];
      for (int32_t i = 0; i < GB_BLK; i++)
        for (int32_t s = i + 1; s < GB_BLK; s++) w.D[(int64_t)i * n + t0 + s] = 0.0f;
      gb_gemm(w.acc, dk, w.D, n, w.kd, dk, GB_BLK, t0 + GB_BLK, dk, 0);
      for (int64_t i = 0; i < (int64_t)GB_BLK * dk; i++) w.acc[i] *= w.blk[i];
    } else {
      if (t0 > 0) {
        gb_gemm(w.acc, dk, w.D, n, w.kd, dk, GB_BLK, t0, dk, 0);
        for (int64_t i = 0; i < (int64_t)GB_BLK * dk; i++) w.acc[i] *= w.blk[i];
      } else {
        memset(w.acc, 0, (size_t)GB_BLK * dk * sizeof(float));
      }
      /* the block itself: Kw[s] = k_s e^{b_t - b_s}, a running product as t advances */
      gb_block_eg(c, &w, t0, expv);
      for (int32_t i = 0; i < GB_BLK; i++) {
        const float *e = w.eg + (int64_t)(t0 + i) * dk;
        for (int32_t s = 0; s < i; s++) {
          float *restrict kw = w.Kw + (int64_t)s * dk;
          for (int32_t k = 0; k < dk; k++) kw[k] *= e[k];
        }
        memcpy(w.Kw + (int64_t)i * dk, c->k + (int64_t)(t0 + i) * dk, (size_t)dk * sizeof(float));
        float *restrict a = w.acc + (int64_t)i * dk;
        for (int32_t s = 0; s <= i; s++) {
          const float d = w.D[(int64_t)i * n + t0 + s];
          const float *restrict kw = w.Kw + (int64_t)s * dk;
          for (int32_t k = 0; k < dk; k++) a[k] = ROVE_GLA_MADD(d, kw[k], a[k]);
        }
      }
    }
    /* the state before the chunk: acc += e^{cs_t} (S do_t) */
    gb_gemm(w.sd, dk, dot, dv, w.sT, dk, GB_BLK, dv, dk, 0);
    gb_exp(w.blk, w.cs + (int64_t)t0 * dk, (int64_t)GB_BLK * dk, expv);
    float *restrict dq = c->dq + (int64_t)t0 * dk;
    for (int64_t i = 0; i < (int64_t)GB_BLK * dk; i++)
      dq[i] = ROVE_GLA_MADD(w.blk[i], w.sd[i], w.acc[i]);
  }
}

/* The products v_s . do_t that dq and dk share (the fast forms): DT[s][t] for the 16-row
 * key blocks s0 and t >= s0, zero below the diagonal inside a block (t < s); rows s, row
 * stride n. Each is the dot product over the value dims in order, as the block path's
 * do_t . v_s. */
static inline void gb_dt(const rove_gla_bwd_chunk *c, const gb_work *w) {
  const int32_t n = c->n, dv = c->dv;
  gb_transpose(w->xT, n, c->dout, dv, n, dv); /* doT [dv][n] */
  for (int32_t s0 = 0; s0 < n; s0 += GB_BLK) {
    float *d = w->DT + (int64_t)s0 * n;
    gb_gemm(d + s0, n, c->v + (int64_t)s0 * dv, dv, w->xT + s0, n, GB_BLK, dv, n - s0, 0);
    gb_mask_block(d, n, s0, 0);
  }
}

/* dq of the chunk when it is fast (gb_chunk_fast), DT formed (gb_dt): with
 * Kn_s = k_s e^{-b_s},
 *   dq_t = e^{b_t} (S do_t + sum_{s<=t} (do_t . v_s) Kn_s),
 * by 16-row query blocks, each over the keys up to its diagonal (DT's columns of the
 * block over the rows up to it, as a transposed operand). */
static inline void gb_dq_fast(const rove_gla_bwd_chunk *c, const gb_work *wp,
                              void (*expv)(float *, const float *, int64_t)) {
  const int32_t n = c->n, dk = c->dk, dv = c->dv;
  const gb_work w = *wp;
  const int64_t nk = (int64_t)n * dk;
  gb_exp_neg(w.fac, w.cs, nk, expv);        /* e^{-b} */
  gb_mul(w.kd, c->k, w.fac, nk);            /* Kn */
  gb_exp(w.eg, w.cs, nk, expv);             /* e^{b} */
  gb_transpose(w.sT, dk, c->s, dv, dk, dv); /* ST [dv][dk] */
  for (int32_t t0 = 0; t0 < n; t0 += GB_BLK) {
    const float *dot = c->dout + (int64_t)t0 * dv;
    gb_gemm_tn(w.acc, dk, w.DT + t0, n, w.kd, dk, GB_BLK, t0 + GB_BLK, dk, 0);
    gb_gemm(w.acc, dk, dot, dv, w.sT, dk, GB_BLK, dv, dk, 1);
    gb_mul(c->dq + (int64_t)t0 * dk, w.acc, w.eg + (int64_t)t0 * dk, (int64_t)GB_BLK * dk);
  }
}

/* dq of the chunk from S before it (c->s, unchanged): the fastest form whose result is
 * finite (gb_fallbacks), each overwriting every dq row; fast: gb_chunk_fast, DT formed.
 * Returns whether the whole-chunk fast form gave it: fac, kd and eg then hold e^{-b},
 * Kn = k e^{-b} and e^{b}, which gb_dkv_fast takes as they are. */
static inline int gb_dq(const rove_gla_bwd_chunk *c, const gb_work *w,
                        void (*expv)(float *, const float *, int64_t), int fast) {
  const int64_t m = (int64_t)c->n * c->dk;
  if (fast) {
    gb_dq_fast(c, w, expv);
    if (gb_all_finite(c->dq, m)) return 1;
  }
  gb_dq_blocks(c, w, expv, 1);
  if (!gb_all_finite(c->dq, m)) gb_dq_blocks(c, w, expv, 0);
  return 0;
}

/* The state sweep's chunk: S <- diag(e^{cs_{n-1}}) S + sum_s (k_s e^{rs_s}) v_s^T (the
 * forward's state update; only k, g, v are read). */
static inline void rove_gla_bwd_state_body(const rove_gla_bwd_chunk *c,
                                           void (*expv)(float *, const float *, int64_t)) {
  const int32_t n = c->n, dk = c->dk, dv = c->dv;
  const gb_work w = gb_work_at(c->work, n, dk, dv);
  gb_prefix(c, &w);
  gb_suffix(c, &w);
  gb_exp(w.fac, w.rs, (int64_t)n * dk, expv);
  gb_mul(w.kend, c->k, w.fac, (int64_t)n * dk);
  gb_exp(w.blk, w.cs + (int64_t)(n - 1) * dk, dk, expv);
  gb_scale_rows(c->s, w.blk, dk, dv);
  gb_gemm_tn(c->s, dv, w.kend, dk, c->v, dv, dk, n, dv, 1);
}

/* dk, dv of the chunk in 16-row blocks (any decays; cs and rs formed), H not moved yet
 * (gb_dkv_advance); a block's pairs take the e^{P_t} e^{-P_s} form only with allow_fast. */
static inline void gb_dkv_blocks(const rove_gla_bwd_chunk *c, const gb_work *wp,
                                 void (*expv)(float *, const float *, int64_t), int allow_fast) {
  const int32_t n = c->n, dk = c->dk, dv = c->dv;
  const gb_work w = *wp;
  gb_transpose(w.xT, n, c->dout, dv, n, dv); /* doT [dv][n] */
  gb_transpose(w.sT, dk, c->h, dv, dk, dv);  /* HT [dv][dk] */
  /* the adjoint after the chunk: dk_s = e^{rs_s} (H v_s), dv_s = (k_s e^{rs_s})^T H */
  gb_exp(w.fac, w.rs, (int64_t)n * dk, expv);
  for (int64_t i = 0; i < (int64_t)n * dk; i++) w.kend[i] = c->k[i] * w.fac[i];
  gb_gemm(w.hv, dk, c->v, dv, w.sT, dk, n, dv, dk, 0);
  for (int64_t i = 0; i < (int64_t)n * dk; i++) c->dkey[i] = w.fac[i] * w.hv[i];
  gb_gemm(c->dval, dv, w.kend, dk, c->h, dv, n, dk, dv, 0);
  for (int32_t s0 = n - GB_BLK; s0 >= 0; s0 -= GB_BLK) {
    const int32_t L0 = s0 + GB_BLK, L = n - L0;
    /* DT[s][t - s0] = v_s . do_t for t in [s0, n) (row stride n) */
    gb_gemm(w.D, n, c->v + (int64_t)s0 * dv, dv, w.xT + s0, n, GB_BLK, dv, n - s0, 0);
    if (L > 0) {
      /* Z[t] = g_{L0} + .. + g_t: the later queries gain the next block's total, that
       * block's queries get their sums from its start */
      for (int32_t k = 0; k < dk; k++) w.tot[k] = 0.0;
      for (int32_t t = L0; t < L0 + GB_BLK; t++) {
        double *restrict z = w.yz + (int64_t)t * dk;
        const float *gt = c->g + (int64_t)t * dk;
        for (int32_t k = 0; k < dk; k++) w.tot[k] += gt[k], z[k] = w.tot[k];
      }
      for (int32_t t = L0 + GB_BLK; t < n; t++) {
        double *restrict z = w.yz + (int64_t)t * dk;
        for (int32_t k = 0; k < dk; k++) z[k] += w.tot[k];
      }
      gb_exp(w.fac, w.yz + (int64_t)L0 * dk, (int64_t)L * dk, expv);
      const float *qL = c->q + (int64_t)L0 * dk;
      for (int64_t i = 0; i < (int64_t)L * dk; i++) w.kd[i] = qL[i] * w.fac[i]; /* Qd [L][dk] */
      /* bet[s] = e^{g_{s+1} + .. + g_{s0+15}}, Kb = k bet */
      for (int32_t k = 0; k < dk; k++) w.tot[k] = 0.0;
      for (int32_t s = GB_BLK - 1; s >= 0; s--) {
        float *restrict b = w.blk + (int64_t)s * dk;
        const float *gs = c->g + (int64_t)(s0 + s) * dk;
        for (int32_t k = 0; k < dk; k++) b[k] = (float)w.tot[k], w.tot[k] += gs[k];
      }
      expv(w.bet, w.blk, (int64_t)GB_BLK * dk);
      for (int64_t i = 0; i < (int64_t)GB_BLK * dk; i++)
        w.Kb[i] = c->k[(int64_t)s0 * dk + i] * w.bet[i];
      gb_transpose(w.KT, GB_BLK, w.Kb, dk, GB_BLK, dk); /* KbT [dk][16] */
      /* A[t][s] = Qd_t . Kb_s, then dv_s += sum_t A[t][s] do_t */
      gb_gemm(w.A, GB_BLK, w.kd, dk, w.KT, GB_BLK, L, dk, GB_BLK, 0);
      gb_gemm_tn(c->dval + (int64_t)s0 * dv, dv, w.A, GB_BLK, c->dout + (int64_t)L0 * dv, dv,
                 GB_BLK, L, dv, 1);
      /* dk_s += bet_s (sum_t DT[s][t] Qd_t) */
      gb_gemm(w.acc, dk, w.D + GB_BLK, n, w.kd, dk, GB_BLK, L, dk, 0);
      float *restrict dks = c->dkey + (int64_t)s0 * dk;
      for (int64_t i = 0; i < (int64_t)GB_BLK * dk; i++)
        dks[i] = ROVE_GLA_MADD(w.bet[i], w.acc[i], dks[i]);
    }
    /* the block itself (fac and blk are free again) */
    if (gb_block_sums(c, &w, s0, expv) && allow_fast) {
      /* e^{b_t - b_s} = e^{P_t} e^{-P_s}: Qp = q e^{P}, Kn = k e^{-P}; Ad = Qp Kn^T and
       * dk_s += e^{-P_s} sum_{t>=s} DT[s][t] Qp_t, both masked to t >= s */
      const float *en = w.fac + (int64_t)s0 * dk;
      const float *qb = c->q + (int64_t)s0 * dk, *kb = c->k + (int64_t)s0 * dk;
      for (int64_t i = 0; i < (int64_t)GB_BLK * dk; i++)
        w.Kw[i] = qb[i] * w.blk[i], w.Kb[i] = kb[i] * en[i];
      gb_transpose(w.KT, GB_BLK, w.Kb, dk, GB_BLK, dk);
      gb_gemm(w.Ad, GB_BLK, w.Kw, dk, w.KT, GB_BLK, GB_BLK, dk, GB_BLK, 0);
      for (int32_t t = 0; t < GB_BLK; t++)
        for (int32_t s = t + 1; s < GB_BLK; s++) w.Ad[t * GB_BLK + s] = 0.0f;
      gb_gemm_tn(c->dval + (int64_t)s0 * dv, dv, w.Ad, GB_BLK, c->dout + (int64_t)s0 * dv, dv,
                 GB_BLK, GB_BLK, dv, 1);
      for (int32_t s = 1; s < GB_BLK; s++)
        for (int32_t t = 0; t < s; t++) w.D[(int64_t)s * n + t] = 0.0f;
      gb_gemm(w.acc, dk, w.D, n, w.Kw, dk, GB_BLK, GB_BLK, dk, 0);
      float *restrict dks = c->dkey + (int64_t)s0 * dk;
      for (int64_t i = 0; i < (int64_t)GB_BLK * dk; i++)
        dks[i] = ROVE_GLA_MADD(en[i], w.acc[i], dks[i]);
      continue;
    }
    /* a huge decay in the block: scores Ad[t][s] = q_t . k_s e^{b_t - b_s} (s <= t), with
     * the keys decayed to t as a running product in KT [dk][16] (columns past t stay 0) */
    gb_block_eg(c, &w, s0, expv);
    memset(w.KT, 0, (size_t)dk * GB_BLK * sizeof(float));
    for (int32_t t = 0; t < GB_BLK; t++) {
      const float *e = w.eg + (int64_t)(s0 + t) * dk, *kt = c->k + (int64_t)(s0 + t) * dk;
      for (int32_t k = 0; k < dk; k++) {
        float *restrict kr = w.KT + (int64_t)k * GB_BLK;
        for (int32_t s = 0; s < GB_BLK; s++) kr[s] *= e[k];
      }
      for (int32_t k = 0; k < dk; k++) w.KT[(int64_t)k * GB_BLK + t] = kt[k];
      gb_gemm(w.Ad + t * GB_BLK, GB_BLK, c->q + (int64_t)(s0 + t) * dk, dk, w.KT, GB_BLK, 1, dk,
              GB_BLK, 0);
    }
    /* dv_s += sum_{t>=s} Ad[t][s] do_t; dk_s += sum_{t>=s} DT[s][t] q_t e^{b_t - b_s}, the
     * queries decayed back to s as a running product in Kw [16][dk] */
    gb_gemm_tn(c->dval + (int64_t)s0 * dv, dv, w.Ad, GB_BLK, c->dout + (int64_t)s0 * dv, dv, GB_BLK,
               GB_BLK, dv, 1); /* Ad is 0 above the diagonal */
    for (int32_t s = GB_BLK - 1; s >= 0; s--) {
      if (s < GB_BLK - 1) {
        const float *e = w.eg + (int64_t)(s0 + s + 1) * dk;
        for (int32_t t = s + 1; t < GB_BLK; t++) {
          float *restrict qw = w.Kw + (int64_t)t * dk;
          for (int32_t k = 0; k < dk; k++) qw[k] *= e[k];
        }
      }
      memcpy(w.Kw + (int64_t)s * dk, c->q + (int64_t)(s0 + s) * dk, (size_t)dk * sizeof(float));
      float *restrict dks = c->dkey + (int64_t)(s0 + s) * dk;
      for (int32_t t = s; t < GB_BLK; t++) {
        const float d = w.D[(int64_t)s * n + t];
        const float *restrict qw = w.Kw + (int64_t)t * dk;
        for (int32_t k = 0; k < dk; k++) dks[k] = ROVE_GLA_MADD(d, qw[k], dks[k]);
      }
    }
  }
}

/* H <- diag(e^{cs_{n-1}}) H + sum_t (q_t e^{cs_t}) do_t^T (after gb_dkv_blocks). */
static inline void gb_dkv_advance(const rove_gla_bwd_chunk *c, const gb_work *wp,
                                  void (*expv)(float *, const float *, int64_t)) {
  const int32_t n = c->n, dk = c->dk, dv = c->dv;
  const gb_work w = *wp;
  gb_exp(w.fac, w.cs, (int64_t)n * dk, expv);
  gb_mul(w.kend, c->q, w.fac, (int64_t)n * dk);
  gb_scale_rows(c->h, w.fac + (int64_t)(n - 1) * dk, dk, dv);
  gb_gemm_tn(c->h, dv, w.kend, dk, c->dout, dv, dk, n, dv, 1);
}

/* dk, dv of the chunk when it is fast (gb_chunk_fast), DT formed (gb_dt): with
 * Qp_t = q_t e^{b_t},
 * Kn_s = k_s e^{-b_s}, Kr_s = k_s e^{rs_s} (e^{rs_s} = e^{b_{n-1}} e^{-b_s}, rs_s = b_{n-1} -
 * b_s) and H the adjoint after the chunk,
 *   dk_s = e^{-b_s} sum_{t>=s} (v_s . do_t) Qp_t + e^{rs_s} (H v_s)
 *   dv_s = sum_{t>=s} (Qp_t . Kn_s) do_t + Kr_s^T H
 *   H   <- diag(e^{b_{n-1}}) H + sum_t Qp_t do_t^T,
 * by 16-row key blocks, each over the queries from its diagonal on (DT and AT masked
 * below it). Returns 0, with H untouched, when an output is not finite: a product grew
 * past float (|k| e^{-b} with huge inputs) where the block path's factors would not, or
 * the inputs hold Inf / NaN; the caller then runs the block path, which overwrites every
 * output. */
static inline int gb_dkv_fast(const rove_gla_bwd_chunk *c, const gb_work *wp,
                              void (*expv)(float *, const float *, int64_t), int have_exps) {
  const int32_t n = c->n, dk = c->dk, dv = c->dv;
  const gb_work w = *wp;
  const int64_t nk = (int64_t)n * dk;
  float *en = w.fac, *kn = w.kd, *qp = w.kend, *qpT = w.hv, *AT = w.A, *kr = w.blk, *ers = w.eg;
  if (!have_exps) { /* else left by gb_dq's fast form */
    gb_exp_neg(en, w.cs, nk, expv); /* e^{-b} */
    gb_mul(kn, c->k, en, nk);
    gb_exp(w.eg, w.cs, nk, expv); /* e^{b}, then e^{rs} in the same buffer */
  }
  gb_mul(qp, c->q, w.eg, nk);
  gb_exp(w.bet, w.cs + (int64_t)(n - 1) * dk, dk, expv); /* e^{b_{n-1}} */
  for (int32_t t = 0; t < n; t++) /* e^{rs_t} = e^{b_{n-1}} e^{-b_t}: in [e^-60, 1] */
    gb_mul(ers + (int64_t)t * dk, en + (int64_t)t * dk, w.bet, dk);
  gb_mul(kr, c->k, ers, nk);
  gb_transpose(w.sT, dk, c->h, dv, dk, dv); /* HT [dv][dk] */
  gb_transpose(qpT, n, qp, dk, n, dk);      /* QpT [dk][n] */
  int finite = 1;
  for (int32_t s0 = 0; s0 < n; s0 += GB_BLK) {
    const int32_t L = n - s0;
    const int64_t o = (int64_t)s0 * dk, m = (int64_t)GB_BLK * dk;
    const float *vb = c->v + (int64_t)s0 * dv;
    /* DT[s][t] = v_s . do_t (gb_dt), AT[s][t - s0] = Kn_s . Qp_t for t in [s0, n) */
    const float *dts = w.DT + (int64_t)s0 * n + s0;
    gb_gemm(AT, n, kn + o, dk, qpT + s0, n, GB_BLK, dk, L, 0);
    gb_mask_block(AT, n, 0, 0);
    gb_gemm(w.acc, dk, dts, n, qp + o, dk, GB_BLK, L, dk, 0);
    gb_gemm(w.sd, dk, vb, dv, w.sT, dk, GB_BLK, dv, dk, 0);
    float *restrict dks = c->dkey + o;
    for (int64_t i = 0; i < m; i++)
      dks[i] = ROVE_GLA_MADD(en[o + i], w.acc[i], ers[o + i] * w.sd[i]);
    float *dvb = c->dval + (int64_t)s0 * dv;
    gb_gemm(dvb, dv, AT, n, c->dout + (int64_t)s0 * dv, dv, GB_BLK, L, dv, 0);
    gb_gemm(dvb, dv, kr + o, dk, c->h, dv, GB_BLK, dk, dv, 1);
    finite &= gb_all_finite(dks, m) & gb_all_finite(dvb, (int64_t)GB_BLK * dv);
  }
  if (!finite) return 0;
  gb_scale_rows(c->h, w.bet, dk, dv);
  gb_gemm_tn(c->h, dv, qp, dk, c->dout, dv, dk, n, dv, 1);
  return 1;
}

/* The gradient sweep's chunk: dq from S before the chunk (c->s, read only), then dk, dv
 * from H after it (c->h), which moves to the chunk start. */
static inline void rove_gla_bwd_grads_body(const rove_gla_bwd_chunk *c,
                                           void (*expv)(float *, const float *, int64_t)) {
  const gb_work w = gb_work_at(c->work, c->n, c->dk, c->dv);
  gb_prefix(c, &w);
  const int fast = gb_chunk_fast(c, &w);
  if (fast) gb_dt(c, &w); /* v . do, for both fast forms */
  const int have_exps = gb_dq(c, &w, expv, fast);
  /* the fastest form whose result is finite (gb_fallbacks) */
  if (fast && gb_dkv_fast(c, &w, expv, have_exps)) return;
  const int64_t mk = (int64_t)c->n * c->dk, mv = (int64_t)c->n * c->dv;
  gb_suffix(c, &w);
  gb_dkv_blocks(c, &w, expv, 1);
  if (!(gb_all_finite(c->dkey, mk) && gb_all_finite(c->dval, mv))) gb_dkv_blocks(c, &w, expv, 0);
  gb_dkv_advance(c, &w, expv);
}

#endif
