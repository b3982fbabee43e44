/* SPDX-License-Identifier: MIT */
/* NEON decode row kernel (attn_rows, kernels.h): nq <= 16 query rows against keys and
 * values read in place (row-major, any token stride; nothing is packed or copied).
 *
 * Per block of up to 64 keys:
 *   1. scores, per query row and 8 keys: one q-register accumulator per key takes
 *      q[c..c+3] * k_j[c..c+3] over d (q held in registers 16 floats at a time, K loaded
 *      straight from its rows), then pairwise adds (FADDP) reduce 4 accumulators to one
 *      vector of 4 scores in key order; d % 4 (0 or 2) is added in scalar. Rows after the
 *      first re-read the block's keys from L1. Scores go to the row's scratch [64].
 *   2. softcap; keys past nk and, on calls the driver marks, invisible pairs become -inf;
 *      online softmax per row: m' = max(m, max s), alpha = exp(m - m'),
 *      p = 2^((s - m') log2 e) (masked keys give exactly 0), l = alpha l + sum p. Hidden
 *      keys' scores are -inf by selection; a NaN score of a visible key (or +inf) poisons
 *      the row as softmax-scalar.h does: o, l NaN, m = +inf.
 *   3. O = alpha O + P V: rows in panels of 4, d in sections of 16 floats (4 registers),
 *      then 4 floats, then a scalar pair; per key one load of the V section and a
 *      by-scalar FMA per row and vector. When a key is hidden from a row of the panel, V
 *      rows are and-ed with the pair's visibility (a hidden pair adds +0, even for NaN).
 * The caller's K/V (krot / vrot) are first rotated block by block into scratch [64][d] by
 * this ISA's rotate kernel and read from there. */
#include <arm_neon.h>
#include <math.h>
#include <stddef.h>

#include "../mask.h"
#include "exp-neon.h"
#include "rotate-neon.h"

#define BLK ROVE_ROWS_BLOCK
#define PR 4 /* query rows per P V panel: 4 x 4 q-register accumulators */
#define INLINE static inline __attribute__((always_inline))

/* Software prefetch into L2, once per 16 keys by the first query row: the K rows of these
 * 16 keys and the next 16, the V rows of these 16. This mirrors attn_rows-avx512.c, where
 * it was measured (on x86; not measured on an aarch64 machine). */
#define PF_K_ROWS 32
#define PF_V_ROWS 16

/* Prefetch the d floats of rows [0, n) from p (stride in floats), one per 64-byte line;
 * addresses formed as integers may lie past the buffer (a prefetch never faults).
 * always_inline, or gcc drops the calls (a function of prefetches has no visible effect). */
INLINE void prefetch_rows(const float *p, int64_t n, int64_t stride, int32_t d) {
  for (int64_t j = 0; j < n; j++) {
    const uintptr_t a = (uintptr_t)p + (uintptr_t)j * (uintptr_t)stride * sizeof(float);
    for (int32_t c = 0; c < d; c += 16)
      __builtin_prefetch((const void *)(a + 4 * (uintptr_t)c), 0, 2);
  }
}

/* Scores of row q against the n <= 8 keys at k (stride ks) into out[0..8) (lanes past n:
 * repeats of key n - 1). */
static void scores8(float *out, const float *q, const float *k, int64_t ks, int32_t d, int32_t n) {
  float32x4_t acc[8];
  const float *row[8];
#pragma GCC unroll 8
  for (int j = 0; j < 8; j++) {
    row[j] = k + (int64_t)(j < n ? j : n - 1) * ks;
    acc[j] = vdupq_n_f32(0.0f);
  }
  int32_t c = 0;
  for (; c + 16 <= d; c += 16) {
    const float32x4_t q0 = vld1q_f32(q + c), q1 = vld1q_f32(q + c + 4);
    const float32x4_t q2 = vld1q_f32(q + c + 8), q3 = vld1q_f32(q + c + 12);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
      const float *kr = row[j] + c;
      acc[j] = vfmaq_f32(acc[j], q0, vld1q_f32(kr));
      acc[j] = vfmaq_f32(acc[j], q1, vld1q_f32(kr + 4));
      acc[j] = vfmaq_f32(acc[j], q2, vld1q_f32(kr + 8));
      acc[j] = vfmaq_f32(acc[j], q3, vld1q_f32(kr + 12));
    }
  }
  for (; c + 4 <= d; c += 4) {
    const float32x4_t qc = vld1q_f32(q + c);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) acc[j] = vfmaq_f32(acc[j], qc, vld1q_f32(row[j] + c));
  }
  /* pairwise adds: (a0, a1) -> (a0[0]+a0[1], a0[2]+a0[3], a1[0]+a1[1], a1[2]+a1[3]), twice */
  vst1q_f32(out, vpaddq_f32(vpaddq_f32(acc[0], acc[1]), vpaddq_f32(acc[2], acc[3])));
  vst1q_f32(out + 4, vpaddq_f32(vpaddq_f32(acc[4], acc[5]), vpaddq_f32(acc[6], acc[7])));
  for (; c < d; c++)
    for (int j = 0; j < 8; j++) out[j] += q[c] * row[j][c];
}

/* One block of keys: nb <= 64 keys at k (stride ks), values at v (stride vs), positions
 * kp (read only on masked calls); pf: prefetch rows ahead (not for rows in scratch). */
typedef struct blk {
  const float *k, *v;
  int64_t ks, vs;
  const int32_t *kp;
  int32_t nb, pf;
} blk;

/* Steps 1-2 for row r and the keys of b; s: the row's scratch (p on return, zero
 * up to the next multiple of 8); *vis: bit j set when key j is visible. Returns alpha. */
static float row_softmax(const rove_rows_args *t, int32_t r, const blk *b, float *s,
                         uint64_t *vis) {
  const int32_t nb = b->nb;
  const int nv = (nb + 7) / 8;
  const float32x4_t ninf = vdupq_n_f32(-INFINITY);
  float32x4_t mx = ninf;
  *vis = 0;
  for (int v = 0; v < nv; v++) {
    const int32_t n = nb - 8 * v < 8 ? nb - 8 * v : 8;
    if (r == 0 && v % 2 == 0 && b->pf) {
      prefetch_rows(b->k + 8 * v * b->ks, PF_K_ROWS, b->ks, t->d);
      prefetch_rows(b->v + 8 * v * b->vs, PF_V_ROWS, b->vs, t->d);
    }
    scores8(s + 8 * v, t->q + (int64_t)r * t->d, b->k + 8 * v * b->ks, b->ks, t->d, n);
    for (int h = 0; h < 8; h += 4) {
      float32x4_t x = vld1q_f32(s + 8 * v + h);
      if (t->softcap > 0.0f) x = rove_softcap_neon(x, t->softcap); /* exp-neon.h */
      vst1q_f32(s + 8 * v + h, x);
    }
    for (int32_t i = 0; i < 8; i++) /* hidden keys and lanes past nb: -inf (selected) */
      if (i >= n ||
          (t->mask && !rove_visible(t->q_pos[r], b->kp[8 * v + i], t->causal, t->window)))
        s[8 * v + i] = -INFINITY;
      else
        *vis |= 1ull << (8 * v + i);
    /* FMAX: a NaN score of a visible key stays in the maximum */
    mx = vmaxq_f32(mx, vmaxq_f32(vld1q_f32(s + 8 * v), vld1q_f32(s + 8 * v + 4)));
  }
  const float row_max = vmaxvq_f32(mx);
  if (row_max != row_max || row_max == INFINITY) { /* poisoned: o, l NaN, m = +inf */
    for (int i = 0; i < 8 * nv; i += 4) vst1q_f32(s + i, vdupq_n_f32(0.0f));
    t->l[r] = NAN;
    t->m[r] = INFINITY;
    return NAN;
  }
  if (row_max == -INFINITY) { /* nothing visible: o, m, l stay, p = 0 */
    for (int i = 0; i < 8 * nv; i += 4) vst1q_f32(s + i, vdupq_n_f32(0.0f));
    return 1.0f;
  }
  const float m_old = t->m[r], m_new = fmaxf(m_old, row_max);
  const float32x4_t l2e = vdupq_n_f32(1.44269504f), mv = vdupq_n_f32(m_new);
  float32x4_t sum = vdupq_n_f32(0.0f);
  for (int i = 0; i < 8 * nv; i += 4) { /* 2^((s - m') log2e), subtraction first; -inf -> 0 */
    const float32x4_t p = rove_exp2_neon(vmulq_f32(vsubq_f32(vld1q_f32(s + i), mv), l2e));
    vst1q_f32(s + i, p);
    sum = vaddq_f32(sum, p);
  }
  const float alpha =
      m_old == -INFINITY ? 0.0f : vgetq_lane_f32(rove_exp_neon(vdupq_n_f32(m_old - m_new)), 0);
  t->l[r] = t->l[r] * alpha + vaddvq_f32(sum);
  t->m[r] = m_new;
  return alpha;
}

/* Step 3 for R rows (p: their scratch rows) and C vectors of 4 floats at o / v:
 * O = alpha O + sum_{j < nb} p_j V[j]. keep: V[j] is and-ed with the visibility of the pair
 * (bit j of vis[r]); keys no row sees are skipped. */
INLINE void pv_body(float *o, int32_t d, const float *v, int64_t vs, int32_t nb, const float *p,
                    const float *alpha, const uint64_t *vis, const int R, const int C,
                    const int keep) {
  float32x4_t acc[PR][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int x = 0; x < C; x++)
      acc[r][x] = vmulq_n_f32(vld1q_f32(o + (int64_t)r * d + 4 * x), alpha[r]);
  uint64_t any = 0;
  if (keep)
    for (int r = 0; r < R; r++) any |= vis[r];
  for (int32_t j = 0; j < nb; j++) {
    if (keep && !(any >> j & 1)) continue; /* hidden from every row: V[j] not read */
    const float *vr = v + (int64_t)j * vs;
    float32x4_t vv[4];
#pragma GCC unroll 4
    for (int x = 0; x < C; x++) vv[x] = vld1q_f32(vr + 4 * x);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      const float pr = p[r * BLK + j];
      const uint32x4_t k = vdupq_n_u32(keep ? 0u - (uint32_t)(vis[r] >> j & 1) : ~0u);
#pragma GCC unroll 4
      for (int x = 0; x < C; x++) {
        const uint32x4_t vk = vandq_u32(vreinterpretq_u32_f32(vv[x]), k);
        acc[r][x] = vfmaq_n_f32(acc[r][x], keep ? vreinterpretq_f32_u32(vk) : vv[x], pr);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int x = 0; x < C; x++) vst1q_f32(o + (int64_t)r * d + 4 * x, acc[r][x]);
}

typedef void (*pv_fn)(float *o, int32_t d, const float *v, int64_t vs, int32_t nb,
                      const float *p, const float *alpha, const uint64_t *vis);
#define PV_FN(R, C, keep)                                                                    \
  static __attribute__((noinline)) void pv_##R##_##C##keep(                                  \
      float *o, int32_t d, const float *v, int64_t vs, int32_t nb, const float *p,           \
      const float *alpha, const uint64_t *vis) {                                             \
    pv_body(o, d, v, vs, nb, p, alpha, vis, R, C, keep);                                     \
  }
PV_FN(1, 4, 0) PV_FN(2, 4, 0) PV_FN(3, 4, 0) PV_FN(4, 4, 0)
PV_FN(1, 1, 0) PV_FN(2, 1, 0) PV_FN(3, 1, 0) PV_FN(4, 1, 0)
PV_FN(1, 4, 1) PV_FN(2, 4, 1) PV_FN(3, 4, 1) PV_FN(4, 4, 1)
PV_FN(1, 1, 1) PV_FN(2, 1, 1) PV_FN(3, 1, 1) PV_FN(4, 1, 1)
static const pv_fn pv_tab[2][2][PR] = {
    {{pv_1_40, pv_2_40, pv_3_40, pv_4_40}, {pv_1_10, pv_2_10, pv_3_10, pv_4_10}},
    {{pv_1_41, pv_2_41, pv_3_41, pv_4_41}, {pv_1_11, pv_2_11, pv_3_11, pv_4_11}}};

/* The last d % 4 (0 or 2) dims of R rows, in scalar (hidden pairs skipped). */
static void pv_rest(float *o, int32_t d, int32_t c0, const float *v, int64_t vs, int32_t nb,
                    const float *p, const float *alpha, const uint64_t *vis, int R) {
  for (int r = 0; r < R; r++)
    for (int32_t c = c0; c < d; c++) {
      float acc = o[(int64_t)r * d + c] * alpha[r];
      for (int32_t j = 0; j < nb; j++)
        if (vis[r] >> j & 1) acc += p[r * BLK + j] * v[(int64_t)j * vs + c];
      o[(int64_t)r * d + c] = acc;
    }
}

/* One block, every row. */
static void block(const rove_rows_args *t, const blk *b) {
  float alpha[ROVE_ROWS_MAX];
  uint64_t vis[ROVE_ROWS_MAX];
  const int32_t d = t->d, nb = b->nb;
  const uint64_t all = nb == 64 ? ~0ull : (1ull << nb) - 1ull;
  for (int32_t r = 0; r < t->nq; r++)
    alpha[r] = row_softmax(t, r, b, t->scratch + r * BLK, vis + r);
  for (int32_t r0 = 0; r0 < t->nq; r0 += PR) {
    const int R = t->nq - r0 < PR ? t->nq - r0 : PR;
    float *o = t->o + (int64_t)r0 * d;
    const float *p = t->scratch + r0 * BLK, *v = b->v;
    const uint64_t *vr = vis + r0;
    int keep = 0; /* some key is hidden from some row of the panel */
    for (int r = 0; r < R; r++) keep |= vr[r] != all;
    int32_t c = 0;
    for (; c + 16 <= d; c += 16)
      pv_tab[keep][0][R - 1](o + c, d, v + c, b->vs, nb, p, alpha + r0, vr);
    for (; c + 4 <= d; c += 4)
      pv_tab[keep][1][R - 1](o + c, d, v + c, b->vs, nb, p, alpha + r0, vr);
    if (c < d) pv_rest(o, d, c, v, b->vs, nb, p, alpha + r0, vr, R);
  }
}

/* Rows [0, n) of x (stride xs) rotated by table rows j0.. of *rot into dst [n][d], by this
 * neon's rotate kernel (k_mul on the rotated dims of K). */
static void rotate_rows(float *dst, const float *x, int64_t xs, int32_t n, int32_t d,
                        const rove_rot *rot, int32_t j0, float mul) {
  rove_rot r = *rot;
  r.cos += j0 * rove_rot_stride(&r);
  r.sin += j0 * rove_rot_stride(&r);
  rove_rotate_f32__neon(dst, d, x, xs, n, d, &r, mul, 1.0f, 0);
}

void rove_attn_rows_f32__neon(const rove_rows_args *t) {
  const int32_t d = t->d;
  const int rk = t->krot && t->krot->cos, rv = t->vrot && t->vrot->cos;
  float *kscr = t->scratch + ROVE_ROWS_MAX * BLK, *vscr = kscr + BLK * d;
  for (int32_t j0 = 0; j0 < t->nk; j0 += BLK) {
    const int32_t *kp = t->mask ? t->k_pos + j0 : NULL;
    /* typed rows (a cache's bf16 / f16 / q8) are widened into scratch first */
    blk b = {NULL, NULL, 0, 0, kp, t->nk - j0 < BLK ? t->nk - j0 : BLK, 0};
    b.k = rove_rows_fp32(t, t->k, t->ks, t->k_scale, t->k_type, j0, b.nb, kscr, rove_to_f32__neon, &b.ks);
    b.v = rove_rows_fp32(t, t->v, t->vs, t->v_scale, t->v_type, j0, b.nb, vscr, rove_to_f32__neon, &b.vs);
    b.pf = !rk && !rv && !t->blocks && t->k_type == ROVE_DTYPE_F32 && t->v_type == ROVE_DTYPE_F32;
    if (rk) rotate_rows(kscr, b.k, b.ks, b.nb, d, t->krot, j0, t->k_mul), b.k = kscr, b.ks = d;
    if (rv) rotate_rows(vscr, b.v, b.vs, b.nb, d, t->vrot, j0, 1.0f), b.v = vscr, b.vs = d;
    block(t, &b);
  }
}
