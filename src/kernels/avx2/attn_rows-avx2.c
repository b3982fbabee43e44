/* SPDX-License-Identifier: MIT */
/* AVX2 + FMA decode row kernel (attn_rows, kernels.h): nq <= 16 query rows against keys
 * and values read in place (row-major, any token stride; nothing is packed or copied).
 *
 * Per block of up to 64 keys:
 *   1. scores, per query row and 8 keys: one ymm accumulator per key takes
 *      q[c..c+7] * k_j[c..c+7] over d (q held in registers 32 floats at a time, K loaded
 *      straight from its rows), then a tree reduces the 8 accumulators to one vector of
 *      8 scores (4 cross-lane permutes, 3 horizontal adds). Rows after the first re-read
 *      the block's keys from L1. Scores go to the row's scratch [64].
 *   2. softcap; keys past nk and, on calls the driver marks, invisible pairs become -inf
 *      (selected, whatever their K rows hold); online softmax per row:
 *      m' = max(m, max s), alpha = exp(m - m'), p = 2^((s - m') log2 e) (masked keys give
 *      exactly 0), l = alpha l + sum p. A NaN score of a visible key (or a +inf one,
 *      exp(inf - inf)) poisons the row as softmax-scalar.h does: o, l NaN, m = +inf.
 *   3. O = alpha O + P V: rows in panels of 2, d in sections of 32 floats (4 ymm, the last
 *      section masked); per key one load of its V section and a broadcast FMA per row.
 *      When a key of the block is hidden from a row of the panel, its V row is and-ed with
 *      the pair's visibility (a hidden pair adds +0 even if V holds NaN or Inf).
 * The caller's K/V (krot / vrot) are first rotated block by block into scratch [64][d] by
 * this ISA's rotate kernel and read from there.
 * Typed rows (bf16, f16, q8) of one type, not to be rotated (a cache's), are read in place
 * when d % 32 == 0: each
 * K or V load of steps 1 and 3 widens 8 elements (bf16: zero-extend and shift by 16; f16:
 * vcvtph2ps; q8: sign-extend, convert, times the row's scale of that 32-float section,
 * which is exactly one Q8 block), so the stored bytes stream from memory once, prefetched
 * like fp32 rows. Other head_dims widen each block into scratch first (rove_rows_fp32). */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#include "../mask.h"
#include "exp-avx2.h"
#include "rotate-avx2.h"

#define BLK ROVE_ROWS_BLOCK
#define PR 2 /* query rows per P V panel: 2 x 4 ymm accumulators */
#define INLINE static inline __attribute__((always_inline))

/* Software prefetch into L2, once per 16 keys by the first query row: the K rows of these
 * 16 keys and the next 16, the V rows of these 16 (the reasons and measurements are in
 * attn_rows-avx512.c, which does the same). */
#define PF_K_ROWS 32
#define PF_V_ROWS 16

/* Prefetch the row_bytes of rows [0, n) from p (stride in bytes); addresses formed as
 * integers may lie past the buffer (harmless). always_inline, or gcc drops the calls. */
INLINE void prefetch_bytes(const void *p, int64_t n, int64_t stride, int64_t row_bytes) {
  for (int64_t j = 0; j < n; j++) {
    const uintptr_t a = (uintptr_t)p + (uintptr_t)j * (uintptr_t)stride;
    for (int64_t c = 0; c < row_bytes; c += 64) _mm_prefetch((const char *)(a + (uintptr_t)c), _MM_HINT_T2);
  }
}

/* ---- typed rows (a cache's bf16 / f16 / q8, widened as they are loaded) ---- */

/* 8 elements of type T at element i of p, as floats (Q8: times the block's scale sc). */
INLINE __m256 load8(const void *p, int64_t i, const int T, float sc) {
  if (T == ROVE_DTYPE_BF16) {
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  if (T == ROVE_DTYPE_F16)
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
  if (T == ROVE_DTYPE_Q8) {
    const __m128i b = _mm_loadl_epi64((const __m128i *)((const int8_t *)p + i));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), _mm256_set1_ps(sc));
  }
  return _mm256_loadu_ps((const float *)p + i);
}

/* The element size of T in bytes. */
#define ESZ(T) ((T) == ROVE_DTYPE_Q8 ? 1 : (T) == ROVE_DTYPE_F32 ? 4 : 2)

/* Per-lane masks of the first n lanes of the 4 vectors of a 32-float section from c. */
static void section_masks(__m256i mk[4], int32_t n) {
  for (int x = 0; x < 4; x++) mk[x] = rove_avx2_lanes(n - 8 * x);
}

/* Sum of the 8 lanes of each acc[s], slot s landing in element 4 (s % 2) + s / 2:
 * 128-bit halves of slot pairs added (lane 0: slot 2i, lane 1: slot 2i + 1), then two
 * rounds of hadd: element 4L + f holds slot 2f + L. */
INLINE __m256 reduce8(const __m256 acc[8]) {
  __m256 w[4];
  for (int i = 0; i < 4; i++)
    w[i] = _mm256_add_ps(_mm256_permute2f128_ps(acc[2 * i], acc[2 * i + 1], 0x20),
                         _mm256_permute2f128_ps(acc[2 * i], acc[2 * i + 1], 0x31));
  return _mm256_hadd_ps(_mm256_hadd_ps(w[0], w[1]), _mm256_hadd_ps(w[2], w[3]));
}

/* Scores of row q against the n <= 8 keys at k (stride ks) into s[0..8) (lanes past n:
 * repeats of key n - 1). Slot s accumulates key 4 (s % 2) + s / 2, so they come out in order. */
static void scores8(float *out, const float *q, const float *k, int64_t ks, int32_t d, int32_t n) {
  __m256 acc[8];
  const float *row[8];
#pragma GCC unroll 8
  for (int s = 0; s < 8; s++) {
    const int32_t j = 4 * (s % 2) + s / 2;
    row[s] = k + (int64_t)(j < n ? j : n - 1) * ks;
    acc[s] = _mm256_setzero_ps();
  }
  int32_t c = 0;
  for (; c + 32 <= d; c += 32) {
    const __m256 q0 = _mm256_loadu_ps(q + c), q1 = _mm256_loadu_ps(q + c + 8);
    const __m256 q2 = _mm256_loadu_ps(q + c + 16), q3 = _mm256_loadu_ps(q + c + 24);
#pragma GCC unroll 8
    for (int s = 0; s < 8; s++) {
      const float *kr = row[s] + c;
      acc[s] = _mm256_fmadd_ps(q0, _mm256_loadu_ps(kr), acc[s]);
      acc[s] = _mm256_fmadd_ps(q1, _mm256_loadu_ps(kr + 8), acc[s]);
      acc[s] = _mm256_fmadd_ps(q2, _mm256_loadu_ps(kr + 16), acc[s]);
      acc[s] = _mm256_fmadd_ps(q3, _mm256_loadu_ps(kr + 24), acc[s]);
    }
  }
  for (; c < d; c += 8) { /* d % 32 left: 8 floats at a time, the last masked */
    const __m256i mk = rove_avx2_lanes(d - c);
    const __m256 qc = _mm256_maskload_ps(q + c, mk);
#pragma GCC unroll 8
    for (int s = 0; s < 8; s++)
      acc[s] = _mm256_fmadd_ps(qc, _mm256_maskload_ps(row[s] + c, mk), acc[s]);
  }
  _mm256_storeu_ps(out, reduce8(acc));
}

/* scores8 for typed K rows (d % 32 == 0): key j at element j * ks of k, Q8 scales of
 * row j at ksc + j * nblk (one per 32-float section). */
INLINE void scores8_typed(float *out, const float *q, const void *k, int64_t ks,
                          const float *ksc, int32_t nblk, int32_t d, int32_t n, const int T) {
  __m256 acc[8];
  const char *row[8];
  const float *sc[8];
#pragma GCC unroll 8
  for (int s = 0; s < 8; s++) {
    const int64_t j = 4 * (s % 2) + s / 2, jj = j < n ? j : n - 1;
    row[s] = (const char *)k + jj * ks * ESZ(T);
    sc[s] = T == ROVE_DTYPE_Q8 ? ksc + jj * nblk : NULL;
    acc[s] = _mm256_setzero_ps();
  }
  for (int32_t c = 0; c < d; c += 32) {
    const __m256 q0 = _mm256_loadu_ps(q + c), q1 = _mm256_loadu_ps(q + c + 8);
    const __m256 q2 = _mm256_loadu_ps(q + c + 16), q3 = _mm256_loadu_ps(q + c + 24);
#pragma GCC unroll 8
    for (int s = 0; s < 8; s++) {
      const float f = T == ROVE_DTYPE_Q8 ? sc[s][c / 32] : 0.0f;
      acc[s] = _mm256_fmadd_ps(q0, load8(row[s], c, T, f), acc[s]);
      acc[s] = _mm256_fmadd_ps(q1, load8(row[s], c + 8, T, f), acc[s]);
      acc[s] = _mm256_fmadd_ps(q2, load8(row[s], c + 16, T, f), acc[s]);
      acc[s] = _mm256_fmadd_ps(q3, load8(row[s], c + 24, T, f), acc[s]);
    }
  }
  _mm256_storeu_ps(out, reduce8(acc));
}
typedef void (*scores_typed_fn)(float *out, const float *q, const void *k, int64_t ks,
                                const float *ksc, int32_t nblk, int32_t d, int32_t n);
#define SCORES_FN(T, name)                                                                   \
  static __attribute__((noinline)) void scores8_##name(float *out, const float *q,           \
                                                       const void *k, int64_t ks,            \
                                                       const float *ksc, int32_t nblk,       \
                                                       int32_t d, int32_t n) {               \
    scores8_typed(out, q, k, ks, ksc, nblk, d, n, T);                                        \
  }
SCORES_FN(ROVE_DTYPE_BF16, bf16) SCORES_FN(ROVE_DTYPE_F16, f16) SCORES_FN(ROVE_DTYPE_Q8, q8)
static const scores_typed_fn scores_typed_tab[ROVE_DTYPE_COUNT] = {
    NULL, scores8_bf16, scores8_f16, scores8_q8};

/* One block of keys: nb <= 64 keys at k (stride ks elements), values at v (stride vs),
 * positions kp (read only on masked calls); pf: prefetch rows ahead (not for rows in
 * scratch). type: fp32 (k, v are floats) or a typed cache's rows read in place (d % 32
 * == 0; Q8 scales ksc / vsc, nblk per row). */
typedef struct blk {
  const void *k, *v;
  int64_t ks, vs;
  const int32_t *kp;
  int32_t nb, pf;
  int32_t type, nblk;
  const float *ksc, *vsc;
} blk;

/* Bit j: key j of the block (j < nb) is visible to row r. */
static uint64_t visible_bits(const rove_rows_args *t, int32_t r, const blk *b) {
  if (!t->mask) return b->nb == 64 ? ~0ull : (1ull << b->nb) - 1ull;
  uint64_t bits = 0;
  for (int32_t j = 0; j < b->nb; j++)
    bits |= (uint64_t)rove_visible(t->q_pos[r], b->kp[j], t->causal, t->window) << j;
  return bits;
}

/* Steps 1-2 for row r and the keys of b; s: the row's scratch (p on return,
 * zero up to the next multiple of 8); vis: visible_bits. Returns alpha. */
static float row_softmax(const rove_rows_args *t, int32_t r, const blk *b, float *s,
                         uint64_t vis) {
  const int32_t nb = b->nb;
  const int nv = (nb + 7) / 8;
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  __m256 mx = ninf, nan = _mm256_setzero_ps();
  for (int v = 0; v < nv; v++) {
    const int32_t n = nb - 8 * v < 8 ? nb - 8 * v : 8;
    const int64_t esz = ESZ(b->type), rb = (int64_t)t->d * esz;
    const char *kb = (const char *)b->k + 8 * v * b->ks * esz;
    if (r == 0 && v % 2 == 0 && b->pf) {
      prefetch_bytes(kb, PF_K_ROWS, b->ks * esz, rb);
      prefetch_bytes((const char *)b->v + 8 * v * b->vs * esz, PF_V_ROWS, b->vs * esz, rb);
    }
    if (b->type == ROVE_DTYPE_F32)
      scores8(s + 8 * v, t->q + (int64_t)r * t->d, (const float *)kb, b->ks, t->d, n);
    else
      scores_typed_tab[b->type](s + 8 * v, t->q + (int64_t)r * t->d, kb, b->ks,
                                b->ksc ? b->ksc + 8 * v * b->nblk : NULL, b->nblk, t->d, n);
    __m256 x = _mm256_loadu_ps(s + 8 * v);
    if (t->softcap > 0.0f) x = rove_softcap256(x, t->softcap); /* exp-avx2.h */
    /* hidden keys and lanes past nb: -inf, selected (not computed from K) */
    const __m256i bits = _mm256_and_si256(_mm256_set1_epi32((int32_t)(vis >> (8 * v) & 0xFF)),
                                          lane_bit);
    x = _mm256_blendv_ps(ninf, x, _mm256_castsi256_ps(_mm256_cmpeq_epi32(bits, lane_bit)));
    _mm256_storeu_ps(s + 8 * v, x);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    mx = _mm256_max_ps(mx, x);
  }
  const float row_max = rove_hmax256(mx);
  if (_mm256_movemask_ps(nan) || row_max == INFINITY) { /* poisoned: o, l NaN, m = +inf */
    for (int v = 0; v < nv; v++) _mm256_storeu_ps(s + 8 * v, _mm256_setzero_ps());
    t->l[r] = NAN;
    t->m[r] = INFINITY;
    return NAN;
  }
  if (row_max == -INFINITY) { /* nothing visible: o, m, l stay, p = 0 */
    for (int v = 0; v < nv; v++) _mm256_storeu_ps(s + 8 * v, _mm256_setzero_ps());
    return 1.0f;
  }
  const float m_old = t->m[r], m_new = fmaxf(m_old, row_max);
  /* 2^((s - m') log2e): subtract first (s log2e - m' log2e in one FMA has an error of
   * |m'| 2^-24 in the exponent, which overflows 2^t past |m'| ~ 1e9). */
  const __m256 l2e = _mm256_set1_ps(1.44269504f), mv = _mm256_set1_ps(m_new);
  __m256 sum = _mm256_setzero_ps();
  for (int v = 0; v < nv; v++) {
    const __m256 p = rove_exp2_256(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(s + 8 * v), mv), l2e));
    _mm256_storeu_ps(s + 8 * v, p);
    sum = _mm256_add_ps(sum, p);
  }
  const float alpha =
      m_old == -INFINITY ? 0.0f : _mm256_cvtss_f32(rove_exp256(_mm256_set1_ps(m_old - m_new)));
  t->l[r] = t->l[r] * alpha + rove_hsum256(sum);
  t->m[r] = m_new;
  return alpha;
}

/* Step 3 for R rows (p: their scratch rows) and the 32-float section at o / v (masked:
 * vector x has the lanes of mk[x]): O = alpha O + sum_{j < nb} p_j V[j]. keep: the pairs
 * are masked by vis (bit j of vis[r]: key j visible to row r); keys no row sees are
 * skipped. */
INLINE void pv_body(float *o, int32_t d, const void *v, int64_t vs, int32_t nb, const float *p,
                    const float *alpha, const __m256i mk[4], const uint64_t *vis,
                    const float *vsc, int32_t nblk, const int R, const int masked,
                    const int keep, const int T) {
#define LD(ptr, x) (masked ? _mm256_maskload_ps(ptr, mk[x]) : _mm256_loadu_ps(ptr))
  __m256 acc[PR][4];
#pragma GCC unroll 2
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int x = 0; x < 4; x++)
      acc[r][x] = _mm256_mul_ps(LD(o + (int64_t)r * d + 8 * x, x), _mm256_set1_ps(alpha[r]));
  uint64_t any = 0;
  if (keep)
    for (int r = 0; r < R; r++) any |= vis[r];
  for (int32_t j = 0; j < nb; j++) {
    if (keep && !(any >> j & 1)) continue; /* hidden from every row: V[j] not read */
    __m256 v0, v1, v2, v3;
    if (T == ROVE_DTYPE_F32) {
      const float *vr = (const float *)v + (int64_t)j * vs;
      v0 = LD(vr, 0), v1 = LD(vr + 8, 1), v2 = LD(vr + 16, 2), v3 = LD(vr + 24, 3);
    } else { /* typed rows: never masked (d % 32 == 0); Q8: one scale per section */
      const char *vr = (const char *)v + (int64_t)j * vs * ESZ(T);
      const float f = T == ROVE_DTYPE_Q8 ? vsc[(int64_t)j * nblk] : 0.0f;
      v0 = load8(vr, 0, T, f), v1 = load8(vr, 8, T, f), v2 = load8(vr, 16, T, f);
      v3 = load8(vr, 24, T, f);
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; r++) {
      const __m256 pb = _mm256_broadcast_ss(p + r * BLK + j);
      const __m256 kb = keep ? _mm256_castsi256_ps(_mm256_set1_epi32(-(int32_t)(vis[r] >> j & 1)))
                             : pb;
#define KEEP(x) (keep ? _mm256_and_ps(x, kb) : (x))
      acc[r][0] = _mm256_fmadd_ps(pb, KEEP(v0), acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(pb, KEEP(v1), acc[r][1]);
      acc[r][2] = _mm256_fmadd_ps(pb, KEEP(v2), acc[r][2]);
      acc[r][3] = _mm256_fmadd_ps(pb, KEEP(v3), acc[r][3]);
#undef KEEP
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int x = 0; x < 4; x++) {
      float *dst = o + (int64_t)r * d + 8 * x;
      if (masked)
        _mm256_maskstore_ps(dst, mk[x], acc[r][x]);
      else
        _mm256_storeu_ps(dst, acc[r][x]);
    }
#undef LD
}

typedef void (*pv_fn)(float *o, int32_t d, const void *v, int64_t vs, int32_t nb,
                      const float *p, const float *alpha, const __m256i mk[4],
                      const uint64_t *vis, const float *vsc, int32_t nblk);
#define PV_FN(R, masked, keep, T, name)                                                      \
  static __attribute__((noinline)) void pv_##R##_##masked##keep##name(                       \
      float *o, int32_t d, const void *v, int64_t vs, int32_t nb, const float *p,            \
      const float *alpha, const __m256i mk[4], const uint64_t *vis, const float *vsc,        \
      int32_t nblk) {                                                                        \
    pv_body(o, d, v, vs, nb, p, alpha, mk, vis, vsc, nblk, R, masked, keep, T);              \
  }
#define PV_F32(R, masked, keep) PV_FN(R, masked, keep, ROVE_DTYPE_F32, )
PV_F32(1, 0, 0) PV_F32(2, 0, 0) PV_F32(1, 1, 0) PV_F32(2, 1, 0)
PV_F32(1, 0, 1) PV_F32(2, 0, 1) PV_F32(1, 1, 1) PV_F32(2, 1, 1)
static const pv_fn pv_tab[2][2][PR] = {{{pv_1_00, pv_2_00}, {pv_1_10, pv_2_10}},
                                       {{pv_1_01, pv_2_01}, {pv_1_11, pv_2_11}}};
#define PV_TYPED(T, name)                                                                    \
  PV_FN(1, 0, 0, T, name) PV_FN(2, 0, 0, T, name) PV_FN(1, 0, 1, T, name) PV_FN(2, 0, 1, T, name)
PV_TYPED(ROVE_DTYPE_BF16, _bf16) PV_TYPED(ROVE_DTYPE_F16, _f16) PV_TYPED(ROVE_DTYPE_Q8, _q8)
/* [type][keep][R - 1] (typed rows are never masked sections) */
static const pv_fn pv_typed_tab[ROVE_DTYPE_COUNT][2][PR] = {
    {{NULL, NULL}, {NULL, NULL}},
    {{pv_1_00_bf16, pv_2_00_bf16}, {pv_1_01_bf16, pv_2_01_bf16}},
    {{pv_1_00_f16, pv_2_00_f16}, {pv_1_01_f16, pv_2_01_f16}},
    {{pv_1_00_q8, pv_2_00_q8}, {pv_1_01_q8, pv_2_01_q8}}};

/* One block, every row. */
static void block(const rove_rows_args *t, const blk *b) {
  float alpha[ROVE_ROWS_MAX];
  uint64_t vis[ROVE_ROWS_MAX];
  const int32_t d = t->d;
  const uint64_t all = b->nb == 64 ? ~0ull : (1ull << b->nb) - 1ull;
  for (int32_t r = 0; r < t->nq; r++) {
    vis[r] = visible_bits(t, r, b);
    alpha[r] = row_softmax(t, r, b, t->scratch + r * BLK, vis[r]);
  }
  for (int32_t r0 = 0; r0 < t->nq; r0 += PR) {
    const int R = t->nq - r0 < PR ? t->nq - r0 : PR;
    int keep = 0; /* some key is hidden from some row of the panel */
    for (int r = 0; r < R; r++) keep |= vis[r0 + r] != all;
    for (int32_t c = 0; c < d; c += 32) {
      __m256i mk[4];
      section_masks(mk, d - c);
      float *o = t->o + (int64_t)r0 * d + c;
      const float *p = t->scratch + r0 * BLK;
      if (b->type == ROVE_DTYPE_F32)
        pv_tab[keep][d - c < 32][R - 1](o, d, (const float *)b->v + c, b->vs, b->nb, p,
                                        alpha + r0, mk, vis + r0, NULL, 0);
      else
        pv_typed_tab[b->type][keep][R - 1](o, d, (const char *)b->v + c * ESZ(b->type), b->vs,
                                           b->nb, p, alpha + r0, mk, vis + r0,
                                           b->vsc ? b->vsc + c / 32 : NULL, b->nblk);
    }
  }
}

/* Rows [0, n) of x (stride xs) rotated by table rows j0.. of *rot into dst [n][d], by this
 * avx2's rotate kernel (k_mul on the rotated dims of K). */
static void rotate_rows(float *dst, const float *x, int64_t xs, int32_t n, int32_t d,
                        const rove_rot *rot, int32_t j0, float mul) {
  rove_rot r = *rot;
  r.cos += j0 * rove_rot_stride(&r);
  r.sin += j0 * rove_rot_stride(&r);
  rove_rotate_f32__avx2(dst, d, x, xs, n, d, &r, mul, 1.0f, 0);
}

void rove_attn_rows_f32__avx2(const rove_rows_args *t) {
  const int32_t d = t->d;
  const int rk = t->krot && t->krot->cos, rv = t->vrot && t->vrot->cos;
  float *kscr = t->scratch + ROVE_ROWS_MAX * BLK, *vscr = kscr + BLK * d;
  for (int32_t j0 = 0; j0 < t->nk; j0 += BLK) {
    const int32_t *kp = t->mask ? t->k_pos + j0 : NULL;
    blk b = {NULL, NULL, 0, 0, kp, t->nk - j0 < BLK ? t->nk - j0 : BLK, 0, 0, 0, NULL, NULL};
    const int fused = t->k_type != ROVE_DTYPE_F32 && t->k_type == t->v_type && d % 32 == 0 &&
                      !rk && !rv;
    if (fused) { /* typed rows read in place */
      const int64_t esz = rove_dtype_size(t->k_type), nblk = rove_q8_blocks(d);
      b.k = (const char *)t->k + j0 * t->ks * esz, b.ks = t->ks;
      b.v = (const char *)t->v + j0 * t->vs * esz, b.vs = t->vs;
      b.type = t->k_type, b.nblk = (int32_t)nblk, b.pf = 1;
      b.ksc = t->k_scale ? t->k_scale + j0 * nblk : NULL;
      b.vsc = t->v_scale ? t->v_scale + j0 * nblk : NULL;
      block(t, &b);
      continue;
    }
    /* other typed rows (d % 32 != 0, K and V of different types, the caller's rows to
     * rotate) are widened into scratch first */
    b.k = rove_rows_fp32(t, t->k, t->ks, t->k_scale, t->k_type, j0, b.nb, kscr, rove_to_f32__avx2, &b.ks);
    b.v = rove_rows_fp32(t, t->v, t->vs, t->v_scale, t->v_type, j0, b.nb, vscr, rove_to_f32__avx2, &b.vs);
    b.pf = !rk && !rv && t->k_type == ROVE_DTYPE_F32 && t->v_type == ROVE_DTYPE_F32;
    if (rk) rotate_rows(kscr, b.k, b.ks, b.nb, d, t->krot, j0, t->k_mul), b.k = kscr, b.ks = d;
    if (rv) rotate_rows(vscr, b.v, b.vs, b.nb, d, t->vrot, j0, 1.0f), b.v = vscr, b.vs = d;
    block(t, &b);
  }
}
