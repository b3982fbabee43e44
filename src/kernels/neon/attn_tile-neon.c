/* SPDX-License-Identifier: MIT */
/* NEON flash tile: S = Q K^T, mask, online softmax, O = alpha O + P V.
 *
 * The tile (nq <= 32 query rows, nk <= 64 keys) is processed in blocks of 4 query rows.
 * For a block, with groups of 16 keys (the packed-K layout, see rotate-neon.c):
 *   1. scores: a 4x16 microkernel per group keeps 16 accumulators (4 rows x 4 key
 *      vectors); per 4 dims it loads one q vector per row and 4 key vectors per dim, and
 *      multiplies by lanes (tile-neon.h). Scores go to the scratch rows [4][64], and a
 *      lane-wise running max per row is kept on the way out of the registers.
 *   2. softmax: per row m' = max(m, max_j s_j), alpha = exp(m - m'), p_j = exp(s_j - m'),
 *      l = alpha l + sum_j p_j (p overwrites s in place); exp(x) = 2^(x log2 e).
 *   3. P V: O is walked in chunks of 16 dims; a 4x16 block of O sits in 16 accumulators
 *      (loaded once and scaled by alpha), every key adds p_rj * V[j][chunk], then the block
 *      is stored: O is read and written once per tile, not once per key.
 * Masked tiles: a bias row (0 visible, -inf hidden) and a keep row (its bits) are written
 * first, so hidden groups of 16 keys are skipped in both products, hidden pairs of the
 * others get the bias (-inf) selected as their score and their V row masked out of P V:
 * nothing in a hidden key's K or V row (NaN, Inf, 3e38) reaches a row that cannot see it.
 * Keys past nk are hidden as well (their K/V rows are zero and would otherwise get
 * exp(0 - m)): they get probability 0 on every path. A row with no visible key in the tile
 * is left as it is (alpha 1, p 0). A visible NaN score (or +inf: exp(inf - inf)) poisons
 * the row as softmax-scalar.h does: o, l NaN, m = +inf. */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "exp-neon.h"
#include "rotate-neon.h"
#include "tile-neon.h"

/* Bias rows for a masked block: s[r][j] = 0 if key j is visible to query r (and j < nk),
 * else -inf, for the whole groups up to nk. The rule of rove_visible (mask.h) in 32-bit
 * lanes: "key after query" is a signed compare, and the distance |P - p| < 2^32 is exact
 * as the unsigned difference taken in the right order. Returns bit g set when group g has
 * a visible key. */
static unsigned make_bias(float *s, float *keep, const int32_t *qpos, int R, const int32_t *kp,
                          int32_t nk, int32_t causal, int32_t window) {
  const int32_t nv = (nk + KG - 1) / KG * (KG / 4); /* whole groups: QK adds 16 at a time */
  static const int32_t iota_[4] = {0, 1, 2, 3};
  const int32x4_t iota = vld1q_s32(iota_), vnk = vdupq_n_s32(nk);
  const uint32x4_t win = vdupq_n_u32((uint32_t)window);
  const uint32x4_t ninf = vreinterpretq_u32_f32(vdupq_n_f32(-INFINITY));
  unsigned live = 0;
  for (int r = 0; r < R; r++) {
    const int32x4_t q = vdupq_n_s32(qpos[r]);
    for (int32_t h = 0; h < nv; h++) {
      const int32x4_t k = vld1q_s32(kp + 4 * h);
      const uint32x4_t after = vcgtq_s32(k, q); /* key position > query position */
      uint32x4_t vis = vcltq_s32(vaddq_s32(iota, vdupq_n_s32(4 * h)), vnk);
      if (causal) vis = vbicq_u32(vis, after);
      if (window > 0) {
        const uint32x4_t ku = vreinterpretq_u32_s32(k), qu = vreinterpretq_u32_s32(q);
        const uint32x4_t dist = vbslq_u32(after, vsubq_u32(ku, qu), vsubq_u32(qu, ku));
        vis = vandq_u32(vis, vcltq_u32(dist, win));
      }
      vst1q_f32(s + r * TK + 4 * h, vreinterpretq_f32_u32(vbicq_u32(ninf, vis)));
      vst1q_u32((uint32_t *)(keep + r * TK + 4 * h), vis);
      if (vmaxvq_u32(vis)) live |= 1u << (h / 4);
    }
  }
  return live;
}

/* The driver walks key tiles in order, so the next tile's K and V (just past this one's
 * 64 rows; prefetches never fault, so past the buffer end is harmless) are pulled toward
 * the cache while this tile computes: row block i of n fetches the i-th share of lines. */
static void prefetch_next(const rove_tile_args *t, int32_t i, int32_t n) {
  const int64_t bytes = (int64_t)TK * t->d * (int64_t)sizeof(float);
  const char *k = (const char *)(t->k) + bytes, *v = (const char *)(t->v) + bytes;
  for (int64_t off = bytes * i / n / 64 * 64; off < bytes * (i + 1) / n; off += 64) {
    __builtin_prefetch(k + off, 0, 2);
    __builtin_prefetch(v + off, 0, 2);
  }
}

/* Unmasked tile with a partial last group g: bias row 0 for keys < nk, -inf past them;
 * keep rows the same as bits. */
static void tail_bias(float *s, float *keep, int R, int32_t nk) {
  const int32_t g = nk / KG;
  for (int r = 0; r < R; r++)
    for (int32_t j = g * KG; j < (g + 1) * KG; j++) {
      s[r * TK + j] = j < nk ? 0.0f : -INFINITY;
      const uint32_t bits = j < nk ? ~0u : 0u;
      memcpy(keep + r * TK + j, &bits, sizeof bits);
    }
}

/* Set up the block of rows [i, i + R): pointers, bias rows, live groups, running maxima.
 * Returns 0 when no key of the tile is visible to these rows. */
static int init_block(rove_nblk *b, const rove_tile_args *t, int32_t i, int R, const int32_t *kp,
                      float *keep) {
  const int32_t d = t->d, nk = t->nk;
  *b = (rove_nblk){.q = t->q + (int64_t)i * d, .k = t->k, .v = t->v, .s = t->scratch + i * TK,
                   .o = t->o + (int64_t)i * d, .m = t->m + i, .l = t->l + i, .d = d, .nk = nk,
                   .gtail = -1, .masked = t->mask, .keep = keep, .softcap = t->softcap};
  if (t->mask) {
    b->live = make_bias(b->s, keep, t->q_pos + i, R, kp, nk, t->causal, t->window);
    b->pvkeep = b->live;
  } else {
    b->live = (1u << ((nk + KG - 1) / KG)) - 1u;
    if (nk % KG) {
      b->gtail = nk / KG;
      tail_bias(b->s, keep, R, nk);
      if (nk % 4) b->pvkeep = 1u << b->gtail; /* P V reads V rows nk .. nk4 - 1 */
    }
  }
  if (!b->live) return 0;
  b->g0 = __builtin_ctz(b->live);
  b->g1 = 32 - __builtin_clz(b->live);
  for (int r = 0; r < R; r++) b->rmax[r] = vdupq_n_f32(-INFINITY);
  return 1;
}

/* Online softmax update of the block's R rows over the keys [g0, g1) * 16:
 * p_j = 2^((s_j - m') log2 e), alpha = 2^((m - m') log2 e). s_j - m' <= 0 exactly, so no
 * p exceeds 1 whatever the size of the logits; hidden keys (-inf) give exactly 0. A row
 * with no visible key in this tile subtracts 0 instead of m' (so -inf - (-inf) never
 * happens): its p are all 0, alpha 1, and m, l stay as they are. A row whose maximum is
 * NaN (FMAX keeps a visible NaN score) or +inf is poisoned: alpha NaN, so o and l become
 * NaN, and m = +inf (the exp would map NaN to 0). The exp pass runs key vector by key
 * vector over the R rows: R independent chains. */
ROVE_INLINE void softmax_block(rove_nblk *b, const int R) {
  const float L2E = 1.44269504088896341f;
  const int32_t j0 = b->g0 * KG, j1 = b->g1 * KG;
  float msub[RB], diff[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int poisoned[RB] = {0};
  for (int r = 0; r < R; r++) {
    const float amax = vmaxvq_f32(b->rmax[r]), mold = b->m[r];
    const float mnew = mold > amax ? mold : amax;
    msub[r] = 0.0f;
    if (amax != amax || amax == INFINITY) { /* alpha NaN below */
      poisoned[r] = 1;
      b->m[r] = INFINITY;
      continue;
    }
    if (amax == -INFINITY) continue; /* diff 0: alpha 1 */
    msub[r] = mnew;
    diff[r] = (mold - mnew) * L2E; /* -inf on the first visible tile: alpha 0 */
    b->m[r] = mnew;
  }
  vst1q_f32(b->alpha, rove_exp2_neon(vld1q_f32(diff)));
  for (int r = 0; r < R; r++)
    if (poisoned[r]) b->alpha[r] = NAN;
  float32x4_t sum[RB];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) sum[r] = vdupq_n_f32(0.0f);
  for (int32_t j = j0; j < j1; j += 4) {
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      float *s = b->s + r * TK + j;
      const float32x4_t x = vmulq_n_f32(vsubq_f32(vld1q_f32(s), vdupq_n_f32(msub[r])), L2E);
      const float32x4_t p = rove_exp2_neon(x);
      sum[r] = vaddq_f32(sum[r], p);
      vst1q_f32(s, p);
    }
  }
  for (int r = 0; r < R; r++) b->l[r] = b->l[r] * b->alpha[r] + vaddvq_f32(sum[r]);
}

/* One block: scores of the live groups, softmax, then O += P V over the keys up to the
 * last visible group (and at most nk rounded up to 4: V rows and probabilities past nk
 * are zero). */
ROVE_INLINE void run_block(rove_nblk *b, const int R, const int32_t D) {
  for (int32_t g = b->g0; g < b->g1; g++)
    if (b->live >> g & 1) qk_group(b, g, R, D);
  softmax_block(b, R);
  const int32_t nk4 = (b->nk + 3) & ~3;
  pv_block(b, b->g0 * KG, b->g1 * KG < nk4 ? b->g1 * KG : nk4, R, D);
}

/* Every block of the tile. D is a constant on the fast paths. */
ROVE_INLINE void run_tile(const rove_tile_args *t, const int32_t *kp, const int32_t D) {
  const int32_t nblk = (t->nq + RB - 1) / RB;
  float keep[RB * TK] __attribute__((aligned(16))); /* written on masked tiles, read there */
  for (int32_t i = 0; i < t->nq; i += RB) {
    rove_nblk b;
    prefetch_next(t, i / RB, nblk);
    const int R = t->nq - i < RB ? t->nq - i : RB;
    if (!init_block(&b, t, i, R, kp, keep)) continue;
    switch (R) { /* the row count becomes a constant of the microkernels */
      case 4: run_block(&b, 4, D); break;
      case 3: run_block(&b, 3, D); break;
      case 2: run_block(&b, 2, D); break;
      default: run_block(&b, 1, D); break;
    }
  }
}

static void tile_d64(const rove_tile_args *t, const int32_t *kp) { run_tile(t, kp, 64); }
static void tile_d128(const rove_tile_args *t, const int32_t *kp) { run_tile(t, kp, 128); }
static void tile_any(const rove_tile_args *t, const int32_t *kp) { run_tile(t, kp, t->d); }

void rove_attn_tile_f32__neon(const rove_tile_args *t) {
  int32_t kp[TK] = {0}; /* key positions padded to the tile, for whole-vector mask loads */
  if (t->mask)
    for (int32_t j = 0; j < t->nk; j++) kp[j] = t->k_pos[j];
  if (t->d == 64)
    tile_d64(t, kp);
  else if (t->d == 128)
    tile_d128(t, kp);
  else
    tile_any(t, kp);
}
