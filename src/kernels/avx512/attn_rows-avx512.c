/* SPDX-License-Identifier: MIT */
/* AVX-512 decode row kernel (attn_rows, kernels.h): nq <= 16 query rows against keys and
 * values read in place (row-major, any token stride; nothing is packed or copied).
 *
 * Per block of up to 64 keys:
 *   1. scores, per query row and 16 keys: one zmm accumulator per key takes
 *      q[c..c+15] * k_j[c..c+15] over d (q held in registers 64 floats at a time, K loaded
 *      straight from its rows), then a transpose-style tree reduces the 16 accumulators to
 *      one vector of 16 scores (30 shuffles + 15 adds instead of 16 horizontal sums).
 *      Rows after the first re-read the block's keys from L1.
 *   2. softcap; mask (keys past nk and, on calls the driver marks, invisible pairs) to -inf;
 *      online softmax per row: m' = max(m, max s), alpha = exp(m - m'), p = exp(s - m'),
 *      l = alpha l + sum p; p goes to scratch [row][64]. Hidden keys are masked out by
 *      selection (never computed from K); a NaN score of a visible key (or a +inf one)
 *      poisons the row as softmax-scalar.h does: o, l NaN, m = +inf.
 *   3. O = alpha O + P V: query rows in panels of up to 4, d in sections of 64 floats
 *      (4 zmm, the last section masked); per key one load of its V section and one
 *      broadcast FMA per row and vector. V needs no transpose. When a key is hidden from a
 *      row of the panel, the FMAs are masked per pair (a hidden V row adds nothing, even
 *      NaN or Inf).
 * So each key and value is read from memory once per call, by 4 + 4 zmm loads at d = 64.
 * The caller's K/V (krot / vrot) are first rotated block by block into scratch [64][d]
 * (rotate_rows, the math of rotate-scalar.c) and read from there. */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#include "kernels-avx512.h"
#include "../mask.h"
#include "exp-avx512.h"

#define BLK ROVE_ROWS_BLOCK
#define PR 4 /* query rows per P V panel: 4 x 4 zmm accumulators */
#define INLINE static inline __attribute__((always_inline))

/* Software prefetch, issued once per group of 16 keys (by the first query row): the K rows
 * of this group and the next and the V rows of this group, into L2 (prefetcht2). Measured
 * on Zen 4 (1 x 4096 x 12 x 64, 24 MB of K and V): without it the kernel reads at 35-40 %
 * of a plain read of the same bytes, with it at 90-100 %, whether the rows are a cache's
 * (contiguous) or the caller's (3 KB apart) and whether they come from L3 or DRAM.
 * Re-requesting the current group's K rows matters (the hardware prefetchers do not follow
 * the interleaved K and V streams); into L1 instead of L2 it is worse for rows 3 KB apart
 * (their lines fall into few L1 sets). The cost: about 30 % when K and V sit in L2. */
#define PF_K_ROWS 32
#define PF_V_ROWS 16

/* Prefetch the d floats of rows [j0, j0 + n) from p (stride in floats). Addresses are
 * formed as integers: they may lie past the buffer, where prefetches are harmless.
 * always_inline: a function of prefetches alone has no visible effect to gcc and its calls
 * are dropped. */
INLINE void prefetch_rows(const float *p, int64_t j0, int64_t n, int64_t stride, int32_t d) {
  for (int64_t j = j0; j < j0 + n; j++) {
    const uintptr_t a = (uintptr_t)p + (uintptr_t)j * (uintptr_t)stride * sizeof(float);
    for (int32_t c = 0; c < d; c += 16)
      _mm_prefetch((const char *)(a + 4 * (uintptr_t)c), _MM_HINT_T2);
  }
}

static inline __mmask16 lanes(int32_t n) { /* lanes 0 .. n-1, n clamped to [0, 16] */
  return (__mmask16)(n >= 16 ? 0xFFFFu : n <= 0 ? 0u : (1u << n) - 1u);
}

/* Sum of the 16 lanes of each acc[s], the sum of slot s landing in lane 4 (s % 4) + s / 4:
 *   pairs of slots  -> 256-bit halves added  (8 vectors: lanes 0-7 slot 2i, 8-15 slot 2i+1)
 *   pairs of those  -> 128-bit lanes added   (4 vectors: 128-bit lane L = slot 4i + L)
 *   floats 0,1 + 2,3 within the lanes, then 0 + 1: element 4L + f holds slot L + 4f. */
INLINE __m512 reduce16(const __m512 acc[16]) {
  __m512 w[8], x[4], y[2];
  for (int i = 0; i < 8; i++)
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * i], acc[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(acc[2 * i], acc[2 * i + 1], 0xEE));
  for (int i = 0; i < 4; i++)
    x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0xDD));
  for (int i = 0; i < 2; i++)
    y[i] = _mm512_add_ps(_mm512_shuffle_ps(x[2 * i], x[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(x[2 * i], x[2 * i + 1], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], 0x88), _mm512_shuffle_ps(y[0], y[1], 0xDD));
}

/* Scores of query row q against the n <= 16 keys at k (stride ks): lane j = q . k_j (lanes
 * past n hold repeats of key n - 1). Slot s accumulates key 4 (s % 4) + s / 4, so that
 * reduce16 returns the keys in order. */
static __m512 scores16(const float *q, const float *k, int64_t ks, int32_t d, int32_t n) {
  __m512 acc[16];
  const float *row[16];
#pragma GCC unroll 16
  for (int s = 0; s < 16; s++) {
    const int32_t j = 4 * (s % 4) + s / 4;
    row[s] = k + (int64_t)(j < n ? j : n - 1) * ks;
    acc[s] = _mm512_setzero_ps();
  }
  int32_t c = 0;
  for (; c + 64 <= d; c += 64) {
    const __m512 q0 = _mm512_loadu_ps(q + c), q1 = _mm512_loadu_ps(q + c + 16);
    const __m512 q2 = _mm512_loadu_ps(q + c + 32), q3 = _mm512_loadu_ps(q + c + 48);
#pragma GCC unroll 16
    for (int s = 0; s < 16; s++) {
      const float *kr = row[s] + c;
      acc[s] = _mm512_fmadd_ps(q0, _mm512_loadu_ps(kr), acc[s]);
      acc[s] = _mm512_fmadd_ps(q1, _mm512_loadu_ps(kr + 16), acc[s]);
      acc[s] = _mm512_fmadd_ps(q2, _mm512_loadu_ps(kr + 32), acc[s]);
      acc[s] = _mm512_fmadd_ps(q3, _mm512_loadu_ps(kr + 48), acc[s]);
    }
  }
  for (; c < d; c += 16) { /* d % 64 left: 16 floats at a time, the last masked */
    const __mmask16 mk = lanes(d - c);
    const __m512 qc = _mm512_maskz_loadu_ps(mk, q + c);
#pragma GCC unroll 16
    for (int s = 0; s < 16; s++)
      acc[s] = _mm512_fmadd_ps(qc, _mm512_maskz_loadu_ps(mk, row[s] + c), acc[s]);
  }
  return reduce16(acc);
}

/* Rotation of the caller's rows (krot / vrot): rows [0, n) of x (stride xs, table rows
 * j0..) into dst [n][d] as mul R x on the rotated dims [first, first + r) and x on the
 * others (the math of rotate-scalar.c: (a, b) -> (a c - b s, a s + b c) with c, s times
 * mul). Each row is
 * requested PF_ROT rows ahead into L2 (measured at 1 x 4096 x 12 x 64 through
 * rove_attention_forward: 16 rows ahead 2.5 ms, 48 rows 2.25, 96 rows 2.4-2.7). */
#define PF_ROT 48

/* HALF pairing of one row: a = x[k..], b = x[k + half..], 16 pairs a step (the last
 * masked); cs, sn = cos, sin times mul. */
INLINE void rot_half(float *y, const float *x, const float *c, const float *s, int32_t half,
                     __m512 mul) {
  for (int32_t k = 0; k < half; k += 16) {
    const __mmask16 mk = lanes(half - k);
    const __m512 a = _mm512_maskz_loadu_ps(mk, x + k), b = _mm512_maskz_loadu_ps(mk, x + half + k);
    const __m512 cs = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, c + k), mul);
    const __m512 sn = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, s + k), mul);
    _mm512_mask_storeu_ps(y + k, mk, _mm512_fmsub_ps(a, cs, _mm512_mul_ps(b, sn)));
    _mm512_mask_storeu_ps(y + half + k, mk, _mm512_fmadd_ps(a, sn, _mm512_mul_ps(b, cs)));
  }
}

/* INTERLEAVED pairing of one row, 8 pairs (16 floats) a step: with cos and sin duplicated
 * to both floats of a pair, y = x * (c, c) + swap(x) * (-s, s), swap exchanging a and b. */
INLINE void rot_interleaved(float *y, const float *x, const float *c, const float *s,
                            int32_t half, __m512 mul) {
  const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m512 smul = _mm512_mul_ps(mul, _mm512_set_ps(1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1,
                                                       1, -1, 1, -1));
  for (int32_t k = 0; k < half; k += 8) {
    const __mmask16 mp = lanes(half - k) & 0xFF, mx = lanes(2 * (half - k));
    const __m512 v = _mm512_maskz_loadu_ps(mx, x + 2 * k);
    const __m512 cd = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(mp, c + k));
    const __m512 sd = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(mp, s + k));
    const __m512 sw = _mm512_mul_ps(_mm512_permute_ps(v, 0xB1), _mm512_mul_ps(sd, smul));
    _mm512_mask_storeu_ps(y + 2 * k, mx, _mm512_fmadd_ps(v, _mm512_mul_ps(cd, mul), sw));
  }
}

static void rotate_rows(float *dst, const float *x, int64_t xs, int32_t n, int32_t d,
                        const rove_rot *rot, int32_t j0, float mul) {
  const int64_t ts = rove_rot_stride(rot);
  const int32_t r = 2 * rot->half;
  const __m512 m = _mm512_set1_ps(mul);
  const int32_t f = rot->first; /* the rotated block is [f, f + r) (kernels.h) */
  for (int32_t i = 0; i < n; i++) {
    const float *xi = x + i * xs, *c = rot->cos + (j0 + i) * ts, *s = rot->sin + (j0 + i) * ts;
    float *y = dst + (int64_t)i * d;
    prefetch_rows(xi, PF_ROT, 1, xs, d);
    for (int32_t c0 = 0; c0 < f; c0 += 16) /* pass-through dims before the block (LAST) */
      _mm512_mask_storeu_ps(y + c0, lanes(f - c0), _mm512_maskz_loadu_ps(lanes(f - c0), xi + c0));
    if (rot->pairing == ROVE_PAIRING_HALF)
      rot_half(y + f, xi + f, c, s, rot->half, m);
    else
      rot_interleaved(y + f, xi + f, c, s, rot->half, m);
    for (int32_t c0 = f + r; c0 < d; c0 += 16) /* pass-through dims after it */
      _mm512_mask_storeu_ps(y + c0, lanes(d - c0), _mm512_maskz_loadu_ps(lanes(d - c0), xi + c0));
  }
}

/* One block of keys: nb <= 64 keys at k (stride ks), values at v (stride vs), positions
 * kp (read only on masked calls); pf: prefetch rows ahead (not for rows in scratch). */
typedef struct blk {
  const float *k, *v;
  int64_t ks, vs;
  const int32_t *kp;
  int32_t nb, pf;
} blk;

/* Which of the n keys from j are visible to row r (rove_visible, lane per key). */
static __mmask16 visible_bits(const rove_rows_args *t, const blk *b, int32_t r, int32_t j,
                              int32_t n) {
  unsigned bits = 0;
  for (int32_t i = 0; i < n; i++)
    bits |= (unsigned)rove_visible(t->q_pos[r], b->kp[j + i], t->causal, t->window) << i;
  return (__mmask16)bits;
}

/* Steps 1-2 for row r and the keys of b: p -> p[0 .. 16 nv), *vis: bit j set when key j is
 * visible to the row; returns alpha. */
static float row_softmax(const rove_rows_args *t, int32_t r, const blk *b, float *p,
                         uint64_t *vis) {
  const int nv = (b->nb + 15) / 16;
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  __m512 s[BLK / 16], mx = ninf;
  __mmask16 msk[BLK / 16], nan = 0;
  *vis = 0;
  for (int v = 0; v < nv; v++) {
    const int32_t n = b->nb - 16 * v < 16 ? b->nb - 16 * v : 16;
    msk[v] = t->mask ? visible_bits(t, b, r, 16 * v, n) : lanes(n);
    *vis |= (uint64_t)msk[v] << (16 * v);
    s[v] = ninf;
    if (!msk[v]) continue;
    const float *k = b->k + 16 * v * b->ks;
    if (r == 0 && b->pf) {
      prefetch_rows(k, 0, PF_K_ROWS, b->ks, t->d);
      prefetch_rows(b->v + 16 * v * b->vs, 0, PF_V_ROWS, b->vs, t->d);
    }
    s[v] = scores16(t->q + (int64_t)r * t->d, k, b->ks, t->d, n);
    if (t->softcap > 0.0f) s[v] = rove_softcap512(s[v], t->softcap); /* exp-avx512.h */
    mx = _mm512_mask_max_ps(mx, msk[v], mx, s[v]);
    nan |= _mm512_mask_cmp_ps_mask(msk[v], s[v], s[v], _CMP_UNORD_Q);
  }
  const float row_max = _mm512_reduce_max_ps(mx);
  if (nan || row_max == INFINITY) { /* poisoned: o, l NaN, m = +inf */
    for (int v = 0; v < nv; v++) _mm512_storeu_ps(p + 16 * v, _mm512_setzero_ps());
    t->l[r] = NAN;
    t->m[r] = INFINITY;
    return NAN;
  }
  if (row_max == -INFINITY) { /* nothing visible: o, m, l stay, p = 0 */
    for (int v = 0; v < nv; v++) _mm512_storeu_ps(p + 16 * v, _mm512_setzero_ps());
    return 1.0f;
  }
  const float m_old = t->m[r], m_new = fmaxf(m_old, row_max);
  const __m512 sub = _mm512_set1_ps(m_new);
  __m512 sum = _mm512_setzero_ps();
  for (int v = 0; v < nv; v++) {
    const __m512 pv = msk[v] ? rove_exp512_nonpos_maskz(msk[v], _mm512_sub_ps(s[v], sub))
                             : _mm512_setzero_ps();
    _mm512_storeu_ps(p + 16 * v, pv);
    sum = _mm512_add_ps(sum, pv);
  }
  const float alpha =
      m_old == -INFINITY ? 0.0f : _mm512_cvtss_f32(rove_exp512_ps(_mm512_set1_ps(m_old - m_new)));
  t->l[r] = t->l[r] * alpha + _mm512_reduce_add_ps(sum);
  t->m[r] = m_new;
  return alpha;
}

/* Step 3 for R rows (p: their scratch rows) and the section of 64 floats at c0 (masked:
 * vector x has the lanes of mk[x]): O = alpha O + sum_{j < nb} p_j V[j]. keep: only the
 * visible pairs (bit j of vis[r]) are added (masked FMAs); keys no row sees are skipped. */
INLINE void pv_body(float *o, int32_t d, const float *v, int64_t vs, int32_t nb, const float *p,
                    const float *alpha, const __mmask16 mk[4], const uint64_t *vis, const int R,
                    const int masked, const int keep) {
#define LD(ptr, x) (masked ? _mm512_maskz_loadu_ps(mk[x], ptr) : _mm512_loadu_ps(ptr))
  __m512 acc[PR][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int x = 0; x < 4; x++)
      acc[r][x] = _mm512_mul_ps(LD(o + (int64_t)r * d + 16 * x, x), _mm512_set1_ps(alpha[r]));
  uint64_t any = 0;
  if (keep)
    for (int r = 0; r < R; r++) any |= vis[r];
  for (int32_t j = 0; j < nb; j++) {
    if (keep && !(any >> j & 1)) continue; /* hidden from every row: V[j] not read */
    const float *vr = v + (int64_t)j * vs;
    const __m512 v0 = LD(vr, 0), v1 = LD(vr + 16, 1), v2 = LD(vr + 32, 2), v3 = LD(vr + 48, 3);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      const __m512 pb = _mm512_set1_ps(p[r * BLK + j]);
      if (keep) {
        const __mmask16 k = (__mmask16)(0u - (unsigned)(vis[r] >> j & 1));
        acc[r][0] = _mm512_mask3_fmadd_ps(pb, v0, acc[r][0], k);
        acc[r][1] = _mm512_mask3_fmadd_ps(pb, v1, acc[r][1], k);
        acc[r][2] = _mm512_mask3_fmadd_ps(pb, v2, acc[r][2], k);
        acc[r][3] = _mm512_mask3_fmadd_ps(pb, v3, acc[r][3], k);
      } else {
        acc[r][0] = _mm512_fmadd_ps(pb, v0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(pb, v1, acc[r][1]);
        acc[r][2] = _mm512_fmadd_ps(pb, v2, acc[r][2]);
        acc[r][3] = _mm512_fmadd_ps(pb, v3, acc[r][3]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int x = 0; x < 4; x++) {
      float *dst = o + (int64_t)r * d + 16 * x;
      if (masked)
        _mm512_mask_storeu_ps(dst, mk[x], acc[r][x]);
      else
        _mm512_storeu_ps(dst, acc[r][x]);
    }
#undef LD
}

typedef void (*pv_fn)(float *o, int32_t d, const float *v, int64_t vs, int32_t nb,
                      const float *p, const float *alpha, const __mmask16 mk[4],
                      const uint64_t *vis);
#define PV_FN(R, masked, keep)                                                               \
  static __attribute__((noinline)) void pv_##R##_##masked##keep(                             \
      float *o, int32_t d, const float *v, int64_t vs, int32_t nb, const float *p,           \
      const float *alpha, const __mmask16 mk[4], const uint64_t *vis) {                      \
    pv_body(o, d, v, vs, nb, p, alpha, mk, vis, R, masked, keep);                            \
  }
PV_FN(1, 0, 0) PV_FN(2, 0, 0) PV_FN(3, 0, 0) PV_FN(4, 0, 0)
PV_FN(1, 1, 0) PV_FN(2, 1, 0) PV_FN(3, 1, 0) PV_FN(4, 1, 0)
PV_FN(1, 0, 1) PV_FN(2, 0, 1) PV_FN(3, 0, 1) PV_FN(4, 0, 1)
PV_FN(1, 1, 1) PV_FN(2, 1, 1) PV_FN(3, 1, 1) PV_FN(4, 1, 1)
static const pv_fn pv_tab[2][2][PR] = {
    {{pv_1_00, pv_2_00, pv_3_00, pv_4_00}, {pv_1_10, pv_2_10, pv_3_10, pv_4_10}},
    {{pv_1_01, pv_2_01, pv_3_01, pv_4_01}, {pv_1_11, pv_2_11, pv_3_11, pv_4_11}}};

/* One block, every row. */
static void block(const rove_rows_args *t, const blk *b) {
  float alpha[ROVE_ROWS_MAX];
  uint64_t vis[ROVE_ROWS_MAX];
  const int32_t d = t->d;
  const uint64_t all = b->nb == 64 ? ~0ull : (1ull << b->nb) - 1ull;
  for (int32_t r = 0; r < t->nq; r++)
    alpha[r] = row_softmax(t, r, b, t->scratch + r * BLK, vis + r);
  for (int32_t r0 = 0; r0 < t->nq; r0 += PR) {
    const int R = t->nq - r0 < PR ? t->nq - r0 : PR;
    float *o = t->o + (int64_t)r0 * d;
    const float *p = t->scratch + r0 * BLK;
    int keep = 0; /* some key is hidden from some row of the panel */
    for (int r = 0; r < R; r++) keep |= vis[r0 + r] != all;
    for (int32_t c = 0; c < d; c += 64) {
      const int masked = d - c < 64;
      __mmask16 mk[4];
      for (int x = 0; x < 4; x++) mk[x] = lanes(d - c - 16 * x);
      pv_tab[keep][masked][R - 1](o + c, d, b->v + c, b->vs, b->nb, p, alpha + r0, mk, vis + r0);
    }
  }
}

void rove_attn_rows_f32__avx512(const rove_rows_args *t) {
  const int32_t d = t->d;
  const int rk = t->krot && t->krot->cos, rv = t->vrot && t->vrot->cos;
  float *kscr = t->scratch + ROVE_ROWS_MAX * BLK, *vscr = kscr + BLK * d;
  for (int32_t j0 = 0; j0 < t->nk; j0 += BLK) {
    const int32_t *kp = t->mask ? t->k_pos + j0 : NULL;
    /* typed rows (a cache's bf16 / f16 / q8) are widened into scratch first */
    blk b = {NULL, NULL, 0, 0, kp, t->nk - j0 < BLK ? t->nk - j0 : BLK, 0};
    b.k = rove_rows_fp32(t, t->k, t->ks, t->k_scale, t->k_type, j0, b.nb, kscr, rove_to_f32__avx512, &b.ks);
    b.v = rove_rows_fp32(t, t->v, t->vs, t->v_scale, t->v_type, j0, b.nb, vscr, rove_to_f32__avx512, &b.vs);
    b.pf = !rk && !rv && t->k_type == ROVE_DTYPE_F32 && t->v_type == ROVE_DTYPE_F32;
    if (rk) rotate_rows(kscr, b.k, b.ks, b.nb, d, t->krot, j0, t->k_mul), b.k = kscr, b.ks = d;
    if (rv) rotate_rows(vscr, b.v, b.vs, b.nb, d, t->vrot, j0, 1.0f), b.v = vscr, b.vs = d;
    block(t, &b);
  }
}
