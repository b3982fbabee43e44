/* SPDX-License-Identifier: MIT */
/* AVX-512 flash tile: S = Q K^T, mask, online softmax, O = alpha O + P V.
 *
 * Query rows are taken in register panels of MR = 6 rows (tail panels: 1..5 rows, each a
 * separate unrolled instance). For one panel:
 *   1. scores  s[r][v] (16 keys per zmm, up to 4 zmm = TK keys) = sum_c q[r][c] Kt[c][..]
 *      over the packed tile Kt [d][TK]: per dim c, 4 K loads + 6 broadcasts feed 24 FMAs;
 *   2. softcap, mask (keys past nk and, on tiles the driver marks, invisible pairs) to -inf;
 *      key vectors no row of the panel can see are neither computed nor accumulated;
 *   3. online softmax per row: m' = max(m, max_j s), alpha = exp(m - m'),
 *      p = exp(s - m'), l = alpha l + sum p; p goes to scratch [MR][TK]; with the lazy
 *      maximum (kernels.h): m' = m, alpha = 1 while every max_j s <= m + SLACK;
 *   4. O[r][c..c+63] = alpha O + sum_j p[r][j] V[j][c..c+63]: 6 x 4 zmm accumulators,
 *      per key 4 V loads + 6 broadcasts; d is walked in blocks of 64 floats, the last
 *      block may be 1..4 vectors with a masked last vector (any d).
 * A row with no visible key so far keeps m = -inf, l = 0, o = 0 (its exponent offset is
 * taken as 0, so no inf - inf appears).
 * Hidden pairs (masked, or keys past nk) never touch a row: their scores are masked out
 * of the max and their p is exactly 0 by selection (maskz), and on a panel where some key
 * is hidden from some row, P V adds a key into a row only where the pair is visible (a
 * masked FMA), so NaN, Inf or 3e38 in a hidden key's K or V row cannot reach the row. A
 * NaN score of a visible key (or +inf, exp(inf - inf)) makes p, hence o and l, NaN, and
 * m is set to +inf: the poisoned row of softmax-scalar.h. */
#include <immintrin.h>
#include <math.h>

#include "../mask.h"
#include "exp-avx512.h"
#include "kernels-avx512.h"

#define TK ROVE_AVX512_TK
#define MR ROVE_AVX512_MR
#define INLINE static inline __attribute__((always_inline))

static inline __mmask16 lanes(int32_t n) { /* lanes 0 .. n-1, n clamped to [0, 16] */
  return (__mmask16)(n >= 16 ? 0xFFFFu : n <= 0 ? 0u : (1u << n) - 1u);
}

/* rove_visible for 16 keys at once. Causal without a window is kp <= qp, exact in int32;
 * with a window the difference qp - kp is formed in int64 lanes, as rove_visible does. */
static inline __mmask16 visible16(__m512i kp, int32_t qp, int32_t causal, int32_t window) {
  if (window == 0) return causal ? _mm512_cmple_epi32_mask(kp, _mm512_set1_epi32(qp)) : 0xFFFF;
  const __m512i q = _mm512_set1_epi64(qp), w = _mm512_set1_epi64(window);
  const __m512i lo = _mm512_sub_epi64(q, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(kp)));
  const __m512i hi = _mm512_sub_epi64(q, _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(kp, 1)));
  __mmask8 mlo, mhi;
  if (causal) {
    const __m512i z = _mm512_setzero_si512();
    mlo = _mm512_cmpge_epi64_mask(lo, z) & _mm512_cmplt_epi64_mask(lo, w);
    mhi = _mm512_cmpge_epi64_mask(hi, z) & _mm512_cmplt_epi64_mask(hi, w);
  } else {
    mlo = _mm512_cmplt_epi64_mask(_mm512_abs_epi64(lo), w);
    mhi = _mm512_cmplt_epi64_mask(_mm512_abs_epi64(hi), w);
  }
  return (__mmask16)(mlo | (mhi << 8));
}

/* Register blocks of up to 6 rows x 4 vectors are held in 24 named accumulators a<r><v>
 * (gcc keeps named locals in registers, while a 2-D array of them round-trips through the
 * stack). Blocks smaller than 6 x 4 (mr, nv constant per instance) drop the unused ones. */
#define ROVE_ROW(X, r) X(r, 0) X(r, 1) X(r, 2) X(r, 3)
#define ROVE_ALL(X) \
  ROVE_ROW(X, 0) ROVE_ROW(X, 1) ROVE_ROW(X, 2) ROVE_ROW(X, 3) ROVE_ROW(X, 4) ROVE_ROW(X, 5)
#define ROVE_ON(r, v) ((r) < mr && (v) < nv)
#define ROVE_DECL(r, v) __m512 a##r##v = _mm512_setzero_ps();
#define ROVE_FMA(r, v, x, y) if (ROVE_ON(r, v)) { a##r##v = _mm512_fmadd_ps(x, y##v, a##r##v); }
#define ROVE_FMA_ROW(r, x, y) \
  { ROVE_FMA(r, 0, x, y) ROVE_FMA(r, 1, x, y) ROVE_FMA(r, 2, x, y) ROVE_FMA(r, 3, x, y) }
#define ROVE_LOAD4(y, ld)                                                       \
  const __m512 y##0 = ld(0), y##1 = nv > 1 ? ld(1) : y##0, y##2 = nv > 2 ? ld(2) : y##0, \
               y##3 = nv > 3 ? ld(3) : y##0;

/* Step 1: s[r][v] = sum_c q[r][c] Kt[c][16v ..] for mr rows x nv key vectors. */
INLINE void scores_body(float *s, const float *q, int32_t d, const float *k, const int mr,
                        const int nv) {
  ROVE_ALL(ROVE_DECL)
  for (int32_t c = 0; c < d; c++) {
#define ROVE_K(v) _mm512_loadu_ps(k + (int64_t)c * TK + 16 * (v))
    ROVE_LOAD4(kv, ROVE_K)
#undef ROVE_K
#define ROVE_Q(r)                                                        \
  if ((r) < mr) {                                                        \
    const __m512 qb = _mm512_set1_ps(q[(int64_t)(r) * d + c]);           \
    ROVE_FMA_ROW(r, qb, kv)                                              \
  }
    ROVE_Q(0) ROVE_Q(1) ROVE_Q(2) ROVE_Q(3) ROVE_Q(4) ROVE_Q(5)
#undef ROVE_Q
  }
#define ROVE_OUT(r, v) if (ROVE_ON(r, v)) { _mm512_storeu_ps(s + ((r) * 4 + (v)) * 16, a##r##v); }
  ROVE_ALL(ROVE_OUT)
#undef ROVE_OUT
}

/* The register-blocked loops are separate (not inlined) functions, one per shape, so each
 * gets the whole register file: 24 accumulators + 4 operands + 1 broadcast of 32 zmm. */
typedef void (*scores_fn)(float *s, const float *q, int32_t d, const float *k);
#define ROVE_SCORES(mr, nv)                                                                 \
  static __attribute__((noinline)) void scores_##mr##_##nv(float *s, const float *q, int32_t d, \
                                                           const float *k) {                  \
    scores_body(s, q, d, k, mr, nv);                                                        \
  }
#define ROVE_SCORES_ROW(mr) \
  ROVE_SCORES(mr, 1) ROVE_SCORES(mr, 2) ROVE_SCORES(mr, 3) ROVE_SCORES(mr, 4)
ROVE_SCORES_ROW(1) ROVE_SCORES_ROW(2) ROVE_SCORES_ROW(3)
ROVE_SCORES_ROW(4) ROVE_SCORES_ROW(5) ROVE_SCORES_ROW(6)
#define ROVE_SCORES_FNS(mr) {scores_##mr##_1, scores_##mr##_2, scores_##mr##_3, scores_##mr##_4}
static const scores_fn scores_tab[MR][4] = {ROVE_SCORES_FNS(1), ROVE_SCORES_FNS(2),
                                            ROVE_SCORES_FNS(3), ROVE_SCORES_FNS(4),
                                            ROVE_SCORES_FNS(5), ROVE_SCORES_FNS(6)};

/* Reduce each of 8 vectors to one value: lane r of the result = op over the 16 lanes of
 * v[r] (lanes 8..15 are don't-care). A transpose-style tree: halves of pairs of vectors
 * (8 -> 4 vectors), then 128-bit lanes (-> 2), then floats inside the lanes (-> 1), then
 * one permute to pack the 8 results; 22 ops instead of 8 separate horizontal reductions. */
INLINE __m512 reduce8(const __m512 v[8], const int is_max) {
#define ROVE_OP(a, b) (is_max ? _mm512_max_ps(a, b) : _mm512_add_ps(a, b))
  __m512 w[4], x[2];
  for (int i = 0; i < 4; i++) /* w[i]: lanes 0-7 partial of v[2i], 8-15 of v[2i+1] */
    w[i] = ROVE_OP(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                   _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
  for (int i = 0; i < 2; i++) /* x[i]: 128-bit lane L holds 4 partials of v[4i + L] */
    x[i] = ROVE_OP(_mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0x88),
                   _mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0xDD));
  /* lane L: floats 0,1 partials of v[L], floats 2,3 partials of v[L + 4] */
  __m512 y = ROVE_OP(_mm512_shuffle_ps(x[0], x[1], 0x44), _mm512_shuffle_ps(x[0], x[1], 0xEE));
  y = ROVE_OP(y, _mm512_permute_ps(y, 0xB1)); /* float 0: v[L], float 2: v[L + 4] */
#undef ROVE_OP
  const __m512i pack = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 14, 10, 6, 2, 12, 8, 4, 0);
  return _mm512_permutexvar_ps(pack, y);
}

/* Steps 2-3 for one panel: softcap and online softmax of its scores sb [MR][4][16] (all
 * rows of the panel in one vector for m, l, alpha); p -> pbuf[r][TK] (0 where msk is
 * clear), alpha -> alpha[r]. */
INLINE void score_softmax(const rove_tile_args *t, int32_t i0, const __mmask16 msk[MR][4],
                          float *sb, float *pbuf, float *alpha, const int mr, const int nv) {
  __m512 red[8];
  float msub[16];
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  const __mmask16 rows = lanes(mr);
  /* the scores are read from sb where they are used (a local copy becomes a memcpy) */
#define ROVE_S(r, v) (sb + ((r) * 4 + (v)) * 16)
  if (t->softcap > 0.0f) /* rove_softcap512: exp-avx512.h */
    for (int r = 0; r < mr; r++)
      for (int v = 0; v < nv; v++)
        _mm512_storeu_ps(ROVE_S(r, v), rove_softcap512(_mm512_loadu_ps(ROVE_S(r, v)), t->softcap));
  /* The lazy maximum (kernels.h, O acc), decided row by row: a row none of whose visible
   * scores exceeds its m + ROVE_SOFTMAX_SLACK keeps its m (alpha = exp(0) = 1, p = exp(s -
   * m) <= e^SLACK); only the rows in `over` take m' = max(m, max_j s). Row by row, so
   * that what a row gets depends only on the keys it sees. After a row's first tile
   * nearly no panel has a row over: then the serial chain of the general path below (row
   * maxima -> two reductions -> alpha exp -> store and reload of m') is skipped, and the
   * exps start as soon as the scores are out. One compare per score vector (a NaN score
   * compares false: its p is NaN either way, and so is l). A row that has seen nothing
   * (m = -inf) is over as soon as it sees a score above -inf. */
  __mmask16 over = 0; /* bit r: row r has a visible score past m_r + SLACK */
  for (int r = 0; r < mr; r++) {
    const __m512 mr_ = _mm512_set1_ps(t->m[i0 + r] + ROVE_SOFTMAX_SLACK);
    __mmask16 o = 0;
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++)
      o |= _mm512_mask_cmp_ps_mask(msk[r][v], _mm512_loadu_ps(ROVE_S(r, v)), mr_, _CMP_GT_OQ);
    over |= (__mmask16)((o != 0) << r);
  }
  const __m512 mold = _mm512_mask_loadu_ps(ninf, rows, t->m + i0);
  __m512 mnew = mold, a = _mm512_set1_ps(1.0f);
  if (over) { /* the general update, for the rows in `over` only */
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++) { /* row maxima over the visible keys (-inf if none) */
      red[r] = ninf;
      if (r >= mr) continue;
#pragma GCC unroll 4
      for (int v = 0; v < nv; v++)
        red[r] = _mm512_mask_max_ps(red[r], msk[r][v], red[r], _mm512_loadu_ps(ROVE_S(r, v)));
    }
    /* rows not in `over` keep m: alpha = exp(0) = 1 exactly, as on the fast path */
    mnew = _mm512_mask_max_ps(mold, over, mold, reduce8(red, 1));
  }
  /* offset 0 where nothing was ever visible: all its p are masked (alpha = exp(-inf) = 0
   * when over, 1 otherwise: o and l are 0 either way) */
  const __mmask16 none = _mm512_cmp_ps_mask(mnew, ninf, _CMP_EQ_OQ);
  const __m512 sub = _mm512_mask_blend_ps(none, mnew, _mm512_setzero_ps());
  _mm512_storeu_ps(msub, sub);
  if (over) {
    _mm512_mask_storeu_ps(t->m + i0, rows, mnew);
    a = rove_exp512_ps(_mm512_sub_ps(mold, sub));
  }
  _mm512_storeu_ps(alpha, a);
#pragma GCC unroll 8
  for (int r = 0; r < 8; r++) {
    red[r] = _mm512_setzero_ps();
    if (r >= mr) continue;
    const __m512 b = _mm512_set1_ps(msub[r]);
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
      const __m512 x = _mm512_sub_ps(_mm512_loadu_ps(ROVE_S(r, v)), b);
      const __m512 p = rove_exp512_nonpos_maskz(msk[r][v], x);
      _mm512_storeu_ps(pbuf + r * TK + 16 * v, p);
      red[r] = _mm512_add_ps(red[r], p);
    }
  }
#undef ROVE_S
  const __m512 lsum = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(rows, t->l + i0), a, reduce8(red, 0));
  _mm512_mask_storeu_ps(t->l + i0, rows, lsum);
  const __mmask16 poisoned = rows & _mm512_cmp_ps_mask(lsum, lsum, _CMP_UNORD_Q);
  _mm512_mask_storeu_ps(t->m + i0, poisoned, _mm512_set1_ps(INFINITY));
}

/* Step 4 on one block of nv vectors of the O rows (the last one masked by tail if masked):
 * O[r] = alpha[r] O[r] + sum_{j < jend} p[r][j] V[j]. keep: only the visible pairs (bit j
 * of vis[r]) are added, by a masked FMA; keys no row sees are skipped. */
#define ROVE_MFMA(r, v, x, y, k) \
  if (ROVE_ON(r, v)) { a##r##v = _mm512_mask3_fmadd_ps(x, y##v, a##r##v, k); }
INLINE void pv_body(float *o, int32_t d, const float *v, int32_t jend, const float *pbuf,
                    const float *alpha, __mmask16 tail, const uint64_t *vis, const int mr,
                    const int nv, const int masked, const int keep) {
#define ROVE_LD(ptr, b) \
  (masked && (b) == nv - 1 ? _mm512_maskz_loadu_ps(tail, ptr) : _mm512_loadu_ps(ptr))
#define ROVE_O(r, b) (o + (int64_t)(r) * d + 16 * (b))
#define ROVE_INIT(r, b)                                                               \
  __m512 a##r##b = ROVE_ON(r, b)                                                      \
                       ? _mm512_mul_ps(ROVE_LD(ROVE_O(r, b), b), _mm512_set1_ps(alpha[r])) \
                       : _mm512_setzero_ps();
  ROVE_ALL(ROVE_INIT)
#undef ROVE_INIT
  uint64_t any = 0;
  if (keep)
    for (int r = 0; r < mr; r++) any |= vis[r];
  for (int32_t j = 0; j < jend; j++) {
    if (keep && !(any >> j & 1)) continue; /* hidden from every row: V[j] not read */
#define ROVE_V(b) ROVE_LD(v + (int64_t)j * d + 16 * (b), b)
    ROVE_LOAD4(vv, ROVE_V)
#undef ROVE_V
#define ROVE_P(r)                                                                   \
  if ((r) < mr) {                                                                   \
    const __m512 pb = _mm512_set1_ps(pbuf[(r) * TK + j]);                           \
    if (keep) {                                                                     \
      const __mmask16 kk = (__mmask16)(0u - (unsigned)(vis[r] >> j & 1));           \
      ROVE_MFMA(r, 0, pb, vv, kk) ROVE_MFMA(r, 1, pb, vv, kk)                       \
      ROVE_MFMA(r, 2, pb, vv, kk) ROVE_MFMA(r, 3, pb, vv, kk)                       \
    } else {                                                                        \
      ROVE_FMA_ROW(r, pb, vv)                                                       \
    }                                                                               \
  }
    ROVE_P(0) ROVE_P(1) ROVE_P(2) ROVE_P(3) ROVE_P(4) ROVE_P(5)
#undef ROVE_P
  }
#define ROVE_ST(r, b)                                                  \
  if (ROVE_ON(r, b)) {                                                 \
    if (masked && (b) == nv - 1)                                       \
      _mm512_mask_storeu_ps(ROVE_O(r, b), tail, a##r##b);              \
    else                                                               \
      _mm512_storeu_ps(ROVE_O(r, b), a##r##b);                         \
  }
  ROVE_ALL(ROVE_ST)
#undef ROVE_ST
#undef ROVE_O
#undef ROVE_LD
}

/* One instance per (mr, nb, keep): nb = 4 unmasked is the 64-float block; 1..4 masked the
 * tail; keep: pairs masked by vis. */
typedef void (*pv_fn)(float *o, int32_t d, const float *v, int32_t jend, const float *pbuf,
                      const float *alpha, __mmask16 tail, const uint64_t *vis);
#define ROVE_PV(mr, nb, masked, keep)                                                            \
  static __attribute__((noinline)) void pv_##mr##_##nb##_##masked##keep(                         \
      float *o, int32_t d, const float *v, int32_t jend, const float *pbuf, const float *alpha,   \
      __mmask16 tail, const uint64_t *vis) {                                                      \
    pv_body(o, d, v, jend, pbuf, alpha, tail, vis, mr, nb, masked, keep);                         \
  }
#define ROVE_PV_ROW(mr, k)                                                                 \
  ROVE_PV(mr, 4, 0, k) ROVE_PV(mr, 1, 1, k) ROVE_PV(mr, 2, 1, k) ROVE_PV(mr, 3, 1, k)      \
  ROVE_PV(mr, 4, 1, k)
ROVE_PV_ROW(1, 0) ROVE_PV_ROW(2, 0) ROVE_PV_ROW(3, 0) ROVE_PV_ROW(4, 0) ROVE_PV_ROW(5, 0)
ROVE_PV_ROW(6, 0) ROVE_PV_ROW(1, 1) ROVE_PV_ROW(2, 1) ROVE_PV_ROW(3, 1) ROVE_PV_ROW(4, 1)
ROVE_PV_ROW(5, 1) ROVE_PV_ROW(6, 1)
#define ROVE_PV_FNS(mr, k) \
  {pv_##mr##_4_0##k, pv_##mr##_1_1##k, pv_##mr##_2_1##k, pv_##mr##_3_1##k, pv_##mr##_4_1##k}
#define ROVE_PV_TAB(k) \
  {ROVE_PV_FNS(1, k), ROVE_PV_FNS(2, k), ROVE_PV_FNS(3, k), ROVE_PV_FNS(4, k), ROVE_PV_FNS(5, k), \
   ROVE_PV_FNS(6, k)}
static const pv_fn pv_tab[2][MR][5] = {ROVE_PV_TAB(0), ROVE_PV_TAB(1)};

/* Step 4 over all of d: full 64-float blocks, then a 1..4-vector masked tail block. vis:
 * NULL when every pair of the panel up to jend is visible, else its visibility bits. */
static void pv(const rove_tile_args *t, int32_t i0, int32_t jend, const float *pbuf,
               const float *alpha, int mr, const uint64_t *vis) {
  const int32_t d = t->d;
  const int keep = vis != NULL;
  float *o = t->o + (int64_t)i0 * d;
  int32_t c = 0;
  for (; c + 64 <= d; c += 64)
    pv_tab[keep][mr - 1][0](o + c, d, t->v + c, jend, pbuf, alpha, 0xFFFF, vis);
  if (c == d) return;
  const int32_t rem = d - c, nb = (rem + 15) / 16;
  pv_tab[keep][mr - 1][nb](o + c, d, t->v + c, jend, pbuf, alpha, lanes(rem - 16 * (nb - 1)), vis);
}

/* One panel between its stages: rows [i0, i0 + mr), its visibility masks, and what
 * stage 1 found (nv key vectors with a visible pair, jend keys covered, hidden pairs). */
typedef struct panel {
  int32_t i0, jend;
  int mr, nv, hidden;
  __mmask16 msk[MR][4];
  uint64_t vis[MR];
} panel;

/* The masks of a panel from msk (rows < mr): nv, jend, vis and hidden. */
static void panel_masks(const __mmask16 valid[4], int mr, panel *pn) {
  unsigned any = 0; /* bit v: some row of the panel sees a key of vector v */
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < 4; v++) any |= pn->msk[r][v] ? 1u << v : 0u;
  pn->jend = 0;
  if (!any) return;
  const int nv = pn->nv = 32 - __builtin_clz(any);
  pn->hidden = 0;
  uint64_t seen = 0; /* bit j: some row of the panel sees key j (only keys < nk are valid) */
  for (int r = 0; r < mr; r++) {
    pn->vis[r] = 0;
    for (int v = 0; v < nv; v++) {
      pn->vis[r] |= (uint64_t)pn->msk[r][v] << (16 * v);
      pn->hidden |= pn->msk[r][v] != valid[v];
    }
    seen |= pn->vis[r];
  }
  pn->jend = 64 - __builtin_clzll(seen); /* P V stops after the last key a row sees */
}

/* Stage 1 (step 1) for the panel of mr rows at query row i0: its masks and scores -> sb.
 * kp: key positions (when t->mask), valid: lanes < nk per key vector. jend = 0 when no
 * pair is visible (nothing computed; m, l, o stay as they are). Without t->mask every
 * panel has the masks the tile call filled in once (panel_masks over all MR rows). */
static void panel_scores(const rove_tile_args *t, int32_t i0, int mr, const __m512i kp[4],
                         const __mmask16 valid[4], float *sb, panel *pn) {
  pn->i0 = i0, pn->mr = mr;
  if (t->mask) {
    for (int r = 0; r < mr; r++)
      for (int v = 0; v < 4; v++)
        pn->msk[r][v] = valid[v] & visible16(kp[v], t->q_pos[i0 + r], t->causal, t->window);
    panel_masks(valid, mr, pn);
  }
  if (pn->jend > 0) scores_tab[mr - 1][pn->nv - 1](sb, t->q + (int64_t)i0 * t->d, t->d, t->k);
}

/* Stage 2 (steps 2-3) of a panel whose scores are in sb: p -> pbuf, alpha. */
INLINE void panel_softmax_mr(const rove_tile_args *t, const panel *pn, float *sb, float *pbuf,
                             float *alpha, const int mr) {
  switch (pn->nv) {
    case 1: score_softmax(t, pn->i0, pn->msk, sb, pbuf, alpha, mr, 1); break;
    case 2: score_softmax(t, pn->i0, pn->msk, sb, pbuf, alpha, mr, 2); break;
    case 3: score_softmax(t, pn->i0, pn->msk, sb, pbuf, alpha, mr, 3); break;
    default: score_softmax(t, pn->i0, pn->msk, sb, pbuf, alpha, mr, 4); break;
  }
}

static void panel_softmax(const rove_tile_args *t, const panel *pn, float *sb, float *pbuf,
                          float *alpha) {
  switch (pn->mr) {
    case 1: panel_softmax_mr(t, pn, sb, pbuf, alpha, 1); break;
    case 2: panel_softmax_mr(t, pn, sb, pbuf, alpha, 2); break;
    case 3: panel_softmax_mr(t, pn, sb, pbuf, alpha, 3); break;
    case 4: panel_softmax_mr(t, pn, sb, pbuf, alpha, 4); break;
    case 5: panel_softmax_mr(t, pn, sb, pbuf, alpha, 5); break;
    default: panel_softmax_mr(t, pn, sb, pbuf, alpha, 6); break;
  }
}

_Static_assert(ROVE_AVX512_TQ * TK >= 3 * MR * TK, "scratch holds pbuf and two score buffers");

/* Software-pipelined over panels, in the order
 *   scores(0), softmax(0), scores(1), PV(0), softmax(1), scores(2), PV(1), ...
 * so each panel's softmax (row maxima -> reductions -> exp -> sums: a serial chain of a
 * few hundred cycles that leaves the FMA ports idle when it sits between its own scores
 * and its own P V) lies between two FMA-bound loops it does not depend on, the previous
 * panel's P V and the next panel's scores, which the out-of-order core runs under it.
 * Each panel's arithmetic is unchanged (panels touch disjoint rows; a panel's own steps
 * keep their order), so the results are the same bits as panel after panel.
 * Scratch: pbuf [MR][TK], then two score buffers [MR][4][16]. */
void rove_attn_tile_f32__avx512(const rove_tile_args *t) {
  __m512i kp[4];
  __mmask16 valid[4];
  panel pn[2];
  float alpha[16];
  float *pbuf = t->scratch, *sb[2] = {pbuf + MR * TK, pbuf + 2 * MR * TK};
  if (t->nq <= 0) return; /* (the first panel's scores are issued before the loop) */
  for (int v = 0; v < 4; v++) {
    valid[v] = lanes(t->nk - 16 * v);
    kp[v] = t->mask ? _mm512_maskz_loadu_epi32(valid[v], t->k_pos + 16 * v)
                    : _mm512_setzero_si512();
  }
  if (!t->mask) /* every pair of every panel visible: the masks are valid[] for all rows */
    for (int b = 0; b < 2; b++) {
      for (int r = 0; r < MR; r++)
        for (int v = 0; v < 4; v++) pn[b].msk[r][v] = valid[v];
      panel_masks(valid, MR, &pn[b]);
    }
  int cur = 0;
  panel_scores(t, 0, t->nq < MR ? t->nq : MR, kp, valid, sb[0], &pn[0]);
  for (int32_t i0 = 0; i0 < t->nq; i0 += MR, cur ^= 1) {
    const panel *p = &pn[cur];
    if (p->jend > 0) panel_softmax(t, p, sb[cur], pbuf, alpha);
    const int32_t i1 = i0 + MR, mr1 = t->nq - i1 < MR ? t->nq - i1 : MR;
    if (i1 < t->nq) panel_scores(t, i1, mr1, kp, valid, sb[cur ^ 1], &pn[cur ^ 1]);
    if (p->jend > 0) pv(t, p->i0, p->jend, pbuf, alpha, p->mr, p->hidden ? p->vis : NULL);
  }
}
