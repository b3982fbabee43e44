/* SPDX-License-Identifier: MIT */
/* AVX2 flash tile: S = Q K^T, mask, online softmax, O = alpha O + P V.
 *
 * The tile (nq <= 96 query rows, nk <= 64 keys) is processed in blocks of 6 query rows.
 * For a block, with groups of 16 keys (the packed-K layout, see rotate-avx2.c):
 *   1. scores: a 6x16 microkernel per group keeps 12 ymm accumulators (6 rows x 2 key
 *      vectors); per dim it loads 2 key vectors and broadcasts 6 query values (8 loads
 *      per 12 FMAs, 15 of the 16 ymm registers). Scores go to the scratch rows [6][64],
 *      and a lane-wise running max per row is kept on the way out of the registers.
 *   2. softmax: per row m' = max(m, max_j s_j), alpha = exp(m - m'), p_j = exp(s_j - m'),
 *      l = alpha l + sum_j p_j (p overwrites s in place).
 *   3. P V: O is walked in chunks of 16 dims; a 6x16 block of O sits in 12 accumulators
 *      (loaded once and scaled by alpha), every key adds p_rj * V[j][chunk], then the block
 *      is stored: O is read and written once per tile, not once per key.
 * Masked tiles: each group of 16 keys is classified against the block's 6 queries from
 * their position ranges: hidden groups are skipped in both products, fully visible ones
 * run unmasked, and mixed ones get a bias row (0 visible, -inf hidden) that selects -inf
 * into the scores of hidden pairs and a keep row that masks their V rows out of P V. So
 * nothing in a hidden key's K or V row (NaN, Inf, 3e38) can reach a row that cannot see
 * it. Keys past nk are hidden too (their K/V rows are zero and would otherwise get
 * exp(0 - m)); P V stops at nk.
 * A row with no visible key in the tile is left untouched (alpha 1, p 0). A NaN score of a
 * visible key (or a +inf one: exp(inf - inf)) makes its p NaN, hence o and l NaN, and m is
 * then set to +inf: the poisoned row of softmax-scalar.h. */
#include <immintrin.h>
#include <math.h>

#include "../mask.h"
#include "exp-avx2.h"
#include "rotate-avx2.h"
#include "tile-avx2.h"

/* Key positions of a masked tile: padded to the tile for whole-vector loads, and the
 * position range of each group of 16 (over its keys < nk). */
typedef struct tile_pos {
  int32_t kp[TK], kmin[TK / KG], kmax[TK / KG];
} tile_pos;

/* Bias rows of group g for R queries: 0 where key j is visible to query r (and j < nk),
 * else -inf (the rule of rove_visible in 32-bit lanes: |P - p| is exact as an unsigned
 * value); keep rows: the same as all-ones / zero bits. Returns whether any key of the
 * group is visible. */
static int group_bias(float *s, float *keep, uint16_t *kall, uint16_t *kany,
                      const int32_t *qpos, int R, const int32_t *kp, int32_t g, int32_t nk,
                      int32_t causal, int32_t window) {
  const __m256i flip = _mm256_set1_epi32(INT32_MIN);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i wf = _mm256_xor_si256(_mm256_set1_epi32(window), flip), vnk = _mm256_set1_epi32(nk);
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  unsigned all = 0xFFFFu, some = 0;
  for (int r = 0; r < R; r++) {
    const __m256i q = _mm256_set1_epi32(qpos[r]);
    unsigned row = 0; /* bit i: key 16g + i visible to row r */
    for (int32_t j = g * KG; j < (g + 1) * KG; j += 8) {
      const __m256i k = _mm256_loadu_si256((const __m256i *)(kp + j));
      const __m256i after = _mm256_cmpgt_epi32(k, q); /* key position > query position */
      __m256i vis = _mm256_cmpgt_epi32(vnk, _mm256_add_epi32(iota, _mm256_set1_epi32(j)));
      if (causal) vis = _mm256_andnot_si256(after, vis);
      if (window > 0) {
        const __m256i d1 = _mm256_sub_epi32(q, k), d2 = _mm256_sub_epi32(k, q);
        const __m256i dist = _mm256_blendv_epi8(d1, d2, after);
        vis = _mm256_and_si256(vis, _mm256_cmpgt_epi32(wf, _mm256_xor_si256(dist, flip)));
      }
      _mm256_storeu_ps(s + r * TK + j, _mm256_andnot_ps(_mm256_castsi256_ps(vis), ninf));
      _mm256_storeu_si256((__m256i *)(keep + r * TK + j), vis);
      row |= (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(vis)) << (j - g * KG);
    }
    all &= row, some |= row;
  }
  *kall = (uint16_t)all, *kany = (uint16_t)some;
  return some != 0;
}

/* A masked block: per group, from the position ranges, skip it (none visible), take it
 * whole (all visible: no bias), or write its bias rows (mixed, or holding keys >= nk).
 * Hidden groups get -inf rows, as the softmax reads every group in [g0, g1). */
static void mask_block(rove_blk *b, const rove_tile_args *t, const int32_t *qpos,
                       const tile_pos *tp, float *keep) {
  int32_t qmin = qpos[0], qmax = qpos[0];
  for (int r = 1; r < b->R; r++) {
    qmin = qpos[r] < qmin ? qpos[r] : qmin;
    qmax = qpos[r] > qmax ? qpos[r] : qmax;
  }
  for (int32_t g = 0; g < (b->nk + KG - 1) / KG; g++) {
    int c = rove_classify(qmin, qmax, tp->kmin[g], tp->kmax[g], t->causal, t->window);
    if (c == 1 && (g + 1) * KG > b->nk) c = 2; /* a partial group needs its tail hidden */
    if (c == 1) b->live |= 1u << g;
    if (c == 2 && group_bias(b->s, keep, b->kall + g, b->kany + g, qpos, b->R, tp->kp, g, b->nk,
                             t->causal, t->window))
      b->live |= 1u << g, b->biased |= 1u << g, b->pvmask |= 1u << g;
    if (!(b->live >> g & 1))
      for (int r = 0; r < b->R; r++)
        for (int32_t j = g * KG; j < (g + 1) * KG; j += 8)
          _mm256_storeu_ps(b->s + r * TK + j, _mm256_set1_ps(-INFINITY));
  }
}

/* The driver walks key tiles in order, so the next tile's K and V (just past this one's
 * 64 rows) are pulled into L2 while this tile computes: row block i of n fetches the i-th
 * share of their lines. Prefetches never fault, so past the buffer end is harmless (the
 * addresses are integers: a pointer past the end would be undefined behaviour). */
static void prefetch_next(const rove_tile_args *t, int32_t i, int32_t n) {
  const int64_t bytes = (int64_t)TK * t->d * (int64_t)sizeof(float);
  const uintptr_t k = (uintptr_t)t->k + (uintptr_t)bytes, v = (uintptr_t)t->v + (uintptr_t)bytes;
  for (int64_t off = bytes * i / n / 64 * 64; off < bytes * (i + 1) / n; off += 64) {
    _mm_prefetch((const char *)(k + (uintptr_t)off), _MM_HINT_T1);
    _mm_prefetch((const char *)(v + (uintptr_t)off), _MM_HINT_T1);
  }
}

/* Unmasked tile with a partial last group g: bias row 0 for keys < nk, -inf past them. */
static void tail_bias(float *s, int R, int32_t nk) {
  const int32_t g = nk / KG;
  for (int r = 0; r < R; r++)
    for (int32_t j = g * KG; j < (g + 1) * KG; j++) s[r * TK + j] = j < nk ? 0.0f : -INFINITY;
}

/* Set up the block of rows [i, i + R): pointers, bias and keep rows, live groups, running
 * maxima. Returns 0 when no key of the tile is visible to these rows. */
static int init_block(rove_blk *b, const rove_tile_args *t, int32_t i, int R,
                      const tile_pos *tp, float *keep) {
  const int32_t d = t->d, nk = t->nk;
  /* Field by field, not a compound literal: that zero-fills the whole ~360-byte block
   * (rep stos, ~1 % of a prefill). Nothing reads the rest before writing it: alpha and
   * rmax are written below and in the softmax, kall / kany only for pvmask groups. */
  b->q = t->q + (int64_t)i * d, b->k = t->k, b->v = t->v, b->s = t->scratch + i * TK;
  b->o = t->o + (int64_t)i * d, b->m = t->m + i, b->l = t->l + i;
  b->d = d, b->nk = nk, b->R = R, b->softcap = t->softcap, b->keep = keep;
  b->live = b->biased = b->pvmask = 0u;
  if (t->mask) {
    mask_block(b, t, t->q_pos + i, tp, keep);
  } else {
    b->live = (1u << ((nk + KG - 1) / KG)) - 1u;
    if (nk % KG) {
      b->biased = 1u << (nk / KG);
      tail_bias(b->s, R, nk);
    }
  }
  if (!b->live) return 0;
  b->g0 = __builtin_ctz(b->live);
  b->g1 = 32 - __builtin_clz(b->live);
  b->plain = !b->pvmask && b->live == (1u << b->g1) - (1u << b->g0);
  for (int r = 0; r < R; r++) _mm256_storeu_ps(b->rmax + 8 * r, _mm256_set1_ps(-INFINITY));
  return 1;
}

/* Online softmax update of the block's R rows over the keys [g0, g1) * 16 (m' = m while
 * no score passes m + ROVE_SOFTMAX_SLACK: the lazy maximum).
 * p_j = 2^((s_j - m') log2e): the subtraction first, then the change of base. (One FMA,
 * s_j log2e - m' log2e with m' log2e rounded, would be an instruction cheaper, but its
 * error is |m'| 2^-24 in the exponent: past |m'| ~ 1e9 it overflows 2^t, and at 3e12 it
 * took every p of a row to 0, a fully masked answer for visible keys.) s_j - m' is exact
 * whenever s_j is within a factor of two of m' (Sterbenz), so a score equal to m' has p exactly 1.
 * The exp pass runs key vector by key vector over the R rows: R independent chains.
 * The exp maps NaN to 0, so a NaN t (a visible NaN score, or +inf - inf) is or-ed back in
 * as NaN bits (t is never NaN for finite scores: no bit changes then). */
ROVE_INLINE void softmax_block(rove_blk *b, const int R) {
  const float L2E = 1.44269504088896341f;
  const int32_t j0 = b->g0 * KG, j1 = b->g1 * KG;
  float negm[RB], diff[8] = {0};
  /* The lazy maximum (kernels.h, O acc), row by row: a row none of whose scores exceeds
   * its m + SLACK (one compare of its lane-wise maxima) keeps m (offset -m, diff 0:
   * alpha = 2^0 = 1 exactly); a row with m = -inf then has no visible score that is not
   * -inf or NaN, and its offset is -inf, as below. Only the rows in `over` take the
   * reduction and the new maximum; when there are none the alpha exp is skipped too. */
  unsigned over = 0; /* bit r: row r has a score past m_r + SLACK */
  for (int r = 0; r < R; r++)
    if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(b->rmax + 8 * r),
                                         _mm256_set1_ps(b->m[r] + ROVE_SOFTMAX_SLACK), _CMP_GT_OQ)))
      over |= 1u << r;
  for (int r = 0; r < R; r++) {
    if (!(over >> r & 1)) {
      negm[r] = b->m[r] == -INFINITY ? -INFINITY : -b->m[r];
      continue;
    }
    /* a score of the row passed m + SLACK > -inf: amax is above it (or NaN, which
     * poisons the row through negm, as a NaN score does) */
    const float amax = rove_hmax256(_mm256_loadu_ps(b->rmax + 8 * r)), mold = b->m[r];
    const float mnew = mold > amax ? mold : amax;
    negm[r] = -mnew;
    diff[r] = (mold - mnew) * L2E; /* -inf on the first tile: alpha 0 */
    b->m[r] = mnew;
  }
  _mm256_storeu_ps(b->alpha, over ? rove_exp2_256(_mm256_loadu_ps(diff)) : _mm256_set1_ps(1.0f));
  const __m256 l2e = _mm256_set1_ps(L2E);
  __m256 sum[RB];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) sum[r] = _mm256_setzero_ps();
  for (int32_t j = j0; j < j1; j += 8) {
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      float *s = b->s + r * TK + j;
      const __m256 t = _mm256_mul_ps(_mm256_add_ps(_mm256_loadu_ps(s), _mm256_broadcast_ss(negm + r)), l2e);
      const __m256 p = _mm256_or_ps(rove_exp2_256(t), _mm256_cmp_ps(t, t, _CMP_UNORD_Q));
      sum[r] = _mm256_add_ps(sum[r], p);
      _mm256_storeu_ps(s, p);
    }
  }
  for (int r = 0; r < R; r++) {
    b->l[r] = b->l[r] * b->alpha[r] + rove_hsum256(sum[r]);
    if (b->l[r] != b->l[r]) b->m[r] = INFINITY; /* poisoned: stays NaN through merges */
  }
}

/* Scores of the block's live groups. */
ROVE_INLINE void scores(rove_blk *b, const int R, const int32_t D) {
  for (int32_t g = b->g0; g < b->g1; g++)
    if (b->live >> g & 1) qk_group(b, g, R, D);
}

/* One block: scores, softmax, then O += P V over its visible keys. */
ROVE_INLINE void run_block(rove_blk *b, const int R, const int32_t D) {
  scores(b, R, D);
  softmax_block(b, R);
  const int32_t j1 = b->g1 * KG < b->nk ? b->g1 * KG : b->nk;
  pv_block(b, b->alpha, b->g0 * KG, j1, R, D);
}

/* Every block of the tile: scores, softmax, P V. D is a constant on the fast paths. */
ROVE_INLINE void run_tile(const rove_tile_args *t, const tile_pos *tp, const int32_t D) {
  const int32_t nblk = (t->nq + RB - 1) / RB;
  float keep[RB * TK] __attribute__((aligned(32))); /* written only where read */
  for (int32_t i = 0; i < t->nq; i += RB) {
    rove_blk b;
    prefetch_next(t, i / RB, nblk);
    const int R = t->nq - i < RB ? t->nq - i : RB;
    if (!init_block(&b, t, i, R, tp, keep)) continue;
    switch (R) { /* the row count becomes a constant of the microkernels */
      case 6: run_block(&b, 6, D); break;
      case 5: run_block(&b, 5, D); break;
      case 4: run_block(&b, 4, D); break;
      case 3: run_block(&b, 3, D); break;
      case 2: run_block(&b, 2, D); break;
      default: run_block(&b, 1, D); break;
    }
  }
}

static void tile_d64(const rove_tile_args *t, const tile_pos *tp) { run_tile(t, tp, 64); }
static void tile_d128(const rove_tile_args *t, const tile_pos *tp) { run_tile(t, tp, 128); }
static void tile_any(const rove_tile_args *t, const tile_pos *tp) { run_tile(t, tp, t->d); }

void rove_attn_tile_f32__avx2(const rove_tile_args *t) {
  tile_pos tp = {{0}, {0}, {0}};
  if (t->mask)
    for (int32_t j = 0; j < t->nk; j++) {
      const int32_t g = j / KG, p = t->k_pos[j];
      tp.kp[j] = p;
      tp.kmin[g] = j % KG == 0 || p < tp.kmin[g] ? p : tp.kmin[g];
      tp.kmax[g] = j % KG == 0 || p > tp.kmax[g] ? p : tp.kmax[g];
    }
  if (t->d == 64)
    tile_d64(t, &tp);
  else if (t->d == 128)
    tile_d128(t, &tp);
  else
    tile_any(t, &tp);
}
