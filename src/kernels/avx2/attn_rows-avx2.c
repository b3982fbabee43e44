/* SPDX-License-Identifier: MIT */
/* AVX2 + FMA decode row kernel (attn_rows, kernels.h): nq <= 16 query rows against keys
 * and values read in place (row-major, any token stride; nothing is packed or copied),
 * fp32 or a cache's bf16 / f16 / q8 rows (K and V each of its own type).
 *
 * Per block of up to 64 keys:
 *   1. scores, the query rows in groups of RG rows (4, 2 or 1: what is left), each group
 *      over the block's keys 8 / RG at a time: 8 ymm accumulators hold those keys x the RG
 *      rows, each takes q_r[c..c+7] * k_j[c..c+7] over d, so each K vector is loaded (and
 *      widened) once for a GQA group's 4 rows. A tree then reduces the 8 accumulators to
 *      one vector of 8 scores (4 cross-lane permutes, 3 horizontal adds), stored into each
 *      row's scratch [64]. Groups after the first re-read the block's keys from L1.
 *   2. softcap; keys past nk and, on calls the driver marks, invisible pairs become -inf
 *      (selected, whatever their K rows hold; 16-key groups no row sees are not scored);
 *      online softmax per row: m' = max(m, max s), alpha = exp(m - m'),
 *      p = 2^((s - m') log2 e) (masked keys give exactly 0), l = alpha l + sum p. A NaN
 *      score of a visible key (or a +inf one, exp(inf - inf)) poisons the row as
 *      softmax-scalar.h does: o, l NaN, m = +inf.
 *   3. O = alpha O + P V: rows in panels of up to 4, d in sections of 32 floats (4 ymm)
 *      for panels of 1-2 rows, 16 floats (2 ymm) for 3-4 rows (8 accumulators either way);
 *      per key one load (and widening) of its V section and a broadcast FMA per row and
 *      vector, so a GQA group of 4 reads each V row once. When a key of the block is
 *      hidden from a row of the panel, its V row is and-ed with the pair's visibility (a
 *      hidden pair adds +0 even if V holds NaN or Inf).
 * A row group of 4 with every key of the block visible (a GQA group's decode step) takes
 * the g4 functions (attn_rows_g4-avx2.c): the same arithmetic in tighter loops (one call per block).
 * Prefetch into L2 (rows read in place), two ways:
 *  - paced, for the g4 path and for calls of at most one block of a contiguous cache:
 *    while a block is read, the next block's rows are prefetched, one line of the next
 *    block per line read of this one, so the prefetches keep pace with the reads; after a
 *    call's last block, the rows of the call that follows (rove_rows_args.k_next / v_next).
 *  - bursts, for the other blocks of longer calls and of a paged pool's calls with fp32
 *    rows (MHA decode): see block().
 * Measured on a Zen 3 (bench/ab_decode, 32:8 x 128, 8192 keys, one thread, alternating
 * rounds against the 16-key bursts and fp32's 1-row scores and 2-row panels that the g4
 * path and the paced prefetch replaced): 1.40-1.58x faster for fp32, 1.5x bf16, 1.3-1.4x
 * q8 (BENCHMARKS.md, session 11).
 * Typed rows are widened 8 elements at a time as they are loaded (bf16: zero-extend and
 * shift by 16; f16: vcvtph2ps; q8: sign-extend, convert, times the scale of its
 * 32-element block), so the stored bytes stream from memory once, prefetched like fp32
 * rows; that needs d % 8 == 0 (AVX2 has no masked 16-bit loads), other head_dims widen
 * each block into scratch first (rove_rows_fp32). The caller's K/V (krot / vrot) are
 * widened and rotated block by block into scratch [64][d] by this ISA's rotate kernel and
 * read from there as fp32. */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#include "exp-avx2.h"
#include "rotate-avx2.h"
#include "rows-avx2.h"

#define PR 4 /* query rows per P V panel: 4 x 2 (or 2 x 4) ymm accumulators */

/* One section of scores_body: the 8 * NX dims from c (masked: the last, past d). */
INLINE void scores_section(__m256 acc[8], const float *q, int32_t d, const char *const row[8],
                           const float *const sc[8], int32_t c, const int RG, const int T,
                           const int masked) {
  const int KEYS = 8 / RG, NX = RG == 1 ? 4 : RG == 2 ? 2 : 1;
  __m256i mk[4];
  __m256 qv[4][4];
#pragma GCC unroll 4
  for (int x = 0; x < NX; x++) {
    mk[x] = rove_avx2_lanes(d - c - 8 * x);
#pragma GCC unroll 4
    for (int r = 0; r < RG; r++) {
      const float *qr = q + (int64_t)r * d + c + 8 * x;
      qv[r][x] = masked ? _mm256_maskload_ps(qr, mk[x]) : _mm256_loadu_ps(qr);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < KEYS; j++)
#pragma GCC unroll 4
    for (int x = 0; x < NX; x++) {
      const __m256 kv = load8m(row[j], c + 8 * x, d, mk[x], T, sc[j], masked);
#pragma GCC unroll 4
      for (int r = 0; r < RG; r++)
        acc[SLOT(r * KEYS + j)] = _mm256_fmadd_ps(qv[r][x], kv, acc[SLOT(r * KEYS + j)]);
    }
}

/* Scores of RG query rows (q, rows d floats apart) against KEYS = 8 / RG keys: key j at
 * element j * ks of k (type T, Q8 scales of key j at ksc + j * nblk); n <= KEYS keys are
 * real, the others repeat key n - 1. Lane e of the result: row e / KEYS, key e % KEYS. */
INLINE __m256 scores_body(const float *q, int32_t d, const void *k, int64_t ks,
                          const float *ksc, int32_t nblk, int32_t n, const int RG, const int T) {
  const int KEYS = 8 / RG, W = RG == 1 ? 32 : RG == 2 ? 16 : 8; /* W dims per section */
  __m256 acc[8];
  const char *row[8];
  const float *sc[8];
#pragma GCC unroll 8
  for (int j = 0; j < KEYS; j++) {
    const int64_t jj = j < n ? j : n - 1;
    row[j] = (const char *)k + jj * ks * ESZ(T);
    sc[j] = T == ROVE_DTYPE_Q8 ? ksc + jj * nblk : NULL;
  }
#pragma GCC unroll 8
  for (int s = 0; s < 8; s++) acc[s] = _mm256_setzero_ps();
  int32_t c = 0;
  for (; c + W <= d; c += W) scores_section(acc, q, d, row, sc, c, RG, T, 0);
  if (c < d) scores_section(acc, q, d, row, sc, c, RG, T, 1);
  return reduce8(acc);
}
typedef __m256 (*scores_fn)(const float *q, int32_t d, const void *k, int64_t ks,
                            const float *ksc, int32_t nblk, int32_t n);
#define SCORES_FN(RG, T, name)                                                                \
  static __attribute__((noinline)) __m256 scores_##RG##name(                                  \
      const float *q, int32_t d, const void *k, int64_t ks, const float *ksc, int32_t nblk,   \
      int32_t n) {                                                                            \
    return scores_body(q, d, k, ks, ksc, nblk, n, RG, T);                                     \
  }
#define SCORES_TYPE(T, name) SCORES_FN(1, T, name) SCORES_FN(2, T, name) SCORES_FN(4, T, name)
SCORES_TYPE(ROVE_DTYPE_F32, _f32) SCORES_TYPE(ROVE_DTYPE_BF16, _bf16)
SCORES_TYPE(ROVE_DTYPE_F16, _f16) SCORES_TYPE(ROVE_DTYPE_Q8, _q8)
/* [type][0, 1, 2 for RG = 1, 2, 4] */
static const scores_fn scores_tab[ROVE_DTYPE_COUNT][3] = {
    {scores_1_f32, scores_2_f32, scores_4_f32},
    {scores_1_bf16, scores_2_bf16, scores_4_bf16},
    {scores_1_f16, scores_2_f16, scores_4_f16},
    {scores_1_q8, scores_2_q8, scores_4_q8}};

/* scores_body for one query row against 8 real keys of Q8 rows that lie D elements apart
 * (a cache's rows, or a pool block's), D = d = 64 or 128 a constant: every key row is then
 * a fixed offset from k and its scales one from ksc, where 8 row and 8 scale pointers did
 * not fit the registers (Zen 4 with AVX2, 12 x 64 and 32 x 128, one thread: decode
 * 1.35-1.41x faster). fp32, bf16 and f16 rows measured 0.90-0.97x this way and keep
 * scores_body. The same sections in the same order as scores_body, so the same bits. (Not
 * scores_body with constant arguments: gcc 12 then reports its dead masked tail section
 * as undefined behaviour, -Werror=aggressive-loop-optimizations.) */
INLINE __m256 scores_dense_q8(const float *q, const void *k, const float *ksc, const int D) {
  __m256 acc[8];
  const char *row[8];
  const float *sc[8];
#pragma GCC unroll 8
  for (int j = 0; j < 8; j++) {
    row[j] = (const char *)k + (int64_t)j * D;
    sc[j] = ksc + j * (D / ROVE_Q8_BLOCK);
  }
#pragma GCC unroll 8
  for (int s = 0; s < 8; s++) acc[s] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int c = 0; c < D; c += 32) scores_section(acc, q, D, row, sc, c, 1, ROVE_DTYPE_Q8, 0);
  return reduce8(acc);
}
typedef __m256 (*scores_dense_fn)(const float *q, const void *k, const float *ksc);
static __attribute__((noinline)) __m256 scores_d64_q8(const float *q, const void *k,
                                                      const float *ksc) {
  return scores_dense_q8(q, k, ksc, 64);
}
static __attribute__((noinline)) __m256 scores_d128_q8(const float *q, const void *k,
                                                       const float *ksc) {
  return scores_dense_q8(q, k, ksc, 128);
}

/* Step 1: the scores of rows [r_begin, nq) against the keys of b into scratch rows [r][64]
 * (16-key groups no row sees are skipped: their lanes stay garbage, step 2 selects -inf). */
static void block_scores(const rove_rows_args *t, const rove_rows_blk *b, uint64_t any,
                         int32_t r_begin, int burst) {
  const int32_t d = t->d, nblk = rove_q8_blocks(d);
  const int64_t ke = ESZ(b->kt);
  for (int32_t r0 = r_begin, RG; r0 < t->nq; r0 += RG) {
    RG = t->nq - r0 >= 4 ? 4 : t->nq - r0 >= 2 ? 2 : 1;
    const int32_t keys = 8 / RG;
    const scores_fn f = scores_tab[b->kt][RG == 4 ? 2 : RG - 1];
    /* one row over dense Q8 rows at d = 64 or 128: the fixed-offset form for 8 real keys */
    const scores_dense_fn fd =
        RG == 1 && b->kt == ROVE_DTYPE_Q8 && b->ks == d && (d == 64 || d == 128)
            ? (d == 64 ? scores_d64_q8 : scores_d128_q8)
            : NULL;
    for (int32_t j = 0; j < b->nb; j += 16) {
      if (!(any >> j & 0xFFFFu)) continue;
      const int32_t i = j >> b->run_shift, ji = j & (b->run - 1); /* run i, its key ji */
      const char *kj = (const char *)b->k[i] + ji * b->ks * ke;
      const float *kscj = b->ksc[i] ? b->ksc[i] + (int64_t)ji * nblk : NULL;
      /* the next block's K rows, as many as these scores read (first row group only) */
      const char *kn = r0 == 0 && b->kn[i] && !burst ? (const char *)b->kn[i] + ji * b->ks * ke : NULL;
      if (r0 == 0 && burst) { /* see block() */
        rove_rows_pf pf[ROVE_ROWS_BURST];
        rove_rows_burst(b, i, ji, pf);
        for (int e = 0; e < ROVE_ROWS_BURST; e++)
          if (pf[e].a) prefetch_bytes((const void *)pf[e].a, pf[e].n, pf[e].stride, 4 * d);
      }
      const int32_t n16 = b->nb - j < 16 ? b->nb - j : 16;
      for (int32_t jj = 0; jj < n16; jj += keys) {
        const int32_t n = n16 - jj < keys ? n16 - jj : keys;
        const char *kr = kj + jj * b->ks * ke;
        const float *kscr = kscj ? kscj + (int64_t)jj * nblk : NULL;
        const __m256 s = fd && n == 8 ? fd(t->q + (int64_t)r0 * d, kr, kscr)
                                      : f(t->q + (int64_t)r0 * d, d, kr, b->ks, kscr, nblk, n);
        if (kn) prefetch_bytes(kn + jj * b->ks * ke, keys, b->ks * ke, d * ke);
        for (int32_t r = 0; r < RG; r++) store_row(t->scratch + (r0 + r) * BLK + j + jj, s, r, keys);
      }
    }
  }
}

/* Step 2 for row r: its scores s (scratch row) become p (zero past the visible keys, up to
 * the next multiple of 8); vis: rove_rows_visible. Returns alpha. */
static float row_softmax(const rove_rows_args *t, int32_t r, int32_t nb, float *s, uint64_t vis) {
  const int nv = (nb + 7) / 8;
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  __m256 mx = ninf, nan = _mm256_setzero_ps();
  for (int v = 0; v < nv; v++) {
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

/* Step 3 for R rows (p: their scratch rows) and the section of NX = 4 (R <= 2) or 2 vectors
 * from element c0 of o and of the value rows (type T, stride vs elements, nblk Q8 scales
 * per row; masked: the last section, vector x reads the lanes of mk[x]):
 * O = alpha O + sum_{j < nb} p_j V[j], the keys in runs of 2^rs: key i 2^rs + u at row u
 * of v[i] (Q8 scales vsc[i] + u nblk; pf[i]: the row whose lines it prefetches, NULL for
 * none). keep: the pairs are masked by vis (bit j of vis[r]: key j visible to row r); keys
 * no row sees are skipped. */
INLINE void pv_body(float *o, int32_t d, int32_t c0, const void *const *v, int64_t vs,
                    const float *const *vsc, int32_t nblk, int32_t nb, int32_t rs,
                    const float *p, const float *alpha, const __m256i mk[4],
                    const uint64_t *vis, const char *const *pf, const int R, const int keep,
                    const int T, const int masked) {
  const int NX = R <= 2 ? 4 : 2;
  /* cache lines of a row that this section starts (pf != NULL only where c0 starts one) */
  const int LINES = (NX * 8 * ESZ(T) + 63) / 64;
  __m256 acc[PR][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int x = 0; x < NX; x++)
      acc[r][x] = _mm256_mul_ps(rove_avx2_load(o + (int64_t)r * d + c0 + 8 * x, masked, mk[x]),
                                _mm256_set1_ps(alpha[r]));
  uint64_t any = 0;
  if (keep)
    for (int r = 0; r < R; r++) any |= vis[r];
  for (int32_t i = 0, j0 = 0; j0 < nb; i++, j0 += 1 << rs) { /* run i: keys j0 .. */
    const int32_t n = nb - j0 < 1 << rs ? nb - j0 : 1 << rs;
    for (int32_t u = 0; u < n; u++) {
      const int32_t j = j0 + u;
      if (keep && !(any >> j & 1)) continue; /* hidden from every row: V[j] not read */
      const int64_t row = (int64_t)u * vs * ESZ(T);
      if (pf[i])
        for (int x = 0; x < LINES; x++) _mm_prefetch(pf[i] + row + 64 * x, _MM_HINT_T2);
      const char *vr = (const char *)v[i] + row;
      const float *sc = T == ROVE_DTYPE_Q8 ? vsc[i] + (int64_t)u * nblk : NULL;
      __m256 vv[4];
#pragma GCC unroll 4
      for (int x = 0; x < NX; x++) vv[x] = load8m(vr, c0 + 8 * x, d, mk[x], T, sc, masked);
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        const __m256 pb = _mm256_broadcast_ss(p + r * BLK + j);
        const __m256 kb = keep ? _mm256_castsi256_ps(_mm256_set1_epi32(-(int32_t)(vis[r] >> j & 1)))
                               : pb;
#pragma GCC unroll 4
        for (int x = 0; x < NX; x++)
          acc[r][x] = _mm256_fmadd_ps(pb, keep ? _mm256_and_ps(vv[x], kb) : vv[x], acc[r][x]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int x = 0; x < NX; x++)
      rove_avx2_store(o + (int64_t)r * d + c0 + 8 * x, acc[r][x], masked, mk[x]);
}

typedef void (*pv_fn)(float *o, int32_t d, int32_t c0, const void *const *v, int64_t vs,
                      const float *const *vsc, int32_t nblk, int32_t nb, int32_t rs,
                      const float *p, const float *alpha, const __m256i mk[4],
                      const uint64_t *vis, const char *const *pf);
#define PV_FN(R, keep, masked, T, name)                                                      \
  static __attribute__((noinline)) void pv_##R##keep##masked##name(                          \
      float *o, int32_t d, int32_t c0, const void *const *v, int64_t vs,                    \
      const float *const *vsc, int32_t nblk, int32_t nb, int32_t rs, const float *p,         \
      const float *alpha, const __m256i mk[4], const uint64_t *vis, const char *const *pf) { \
    pv_body(o, d, c0, v, vs, vsc, nblk, nb, rs, p, alpha, mk, vis, pf, R, keep, T, masked);  \
  }
#define PV_R(keep, masked, T, name)                                                          \
  PV_FN(1, keep, masked, T, name) PV_FN(2, keep, masked, T, name)                            \
  PV_FN(3, keep, masked, T, name) PV_FN(4, keep, masked, T, name)
#define PV_TYPE(T, name) PV_R(0, 0, T, name) PV_R(0, 1, T, name) PV_R(1, 0, T, name) PV_R(1, 1, T, name)
PV_TYPE(ROVE_DTYPE_F32, _f32) PV_TYPE(ROVE_DTYPE_BF16, _bf16)
PV_TYPE(ROVE_DTYPE_F16, _f16) PV_TYPE(ROVE_DTYPE_Q8, _q8)
#define PV_4(k, m, name) {pv_1##k##m##name, pv_2##k##m##name, pv_3##k##m##name, pv_4##k##m##name}
#define PV_ROW(name) {{PV_4(0, 0, name), PV_4(0, 1, name)}, {PV_4(1, 0, name), PV_4(1, 1, name)}}
/* [type][keep][masked][R - 1] */
static const pv_fn pv_tab[ROVE_DTYPE_COUNT][2][2][PR] = {PV_ROW(_f32), PV_ROW(_bf16), PV_ROW(_f16),
                                                         PV_ROW(_q8)};

/* One block, every row. Row groups of 4 take the GQA group path where it applies (g4_fits,
 * no hidden pair). Paced prefetch: the next block's rows (b->kn, b->vn), its K rows beside
 * the first row group's scores, its V rows beside the first panel's P V. */
static void block(const rove_rows_args *t, const rove_rows_blk *b) {
  static const float ones[PR] = {1.0f, 1.0f, 1.0f, 1.0f};
  float alpha[ROVE_ROWS_MAX];
  uint64_t vis[ROVE_ROWS_MAX], any = 0;
  const int32_t d = t->d, nblk = rove_q8_blocks(d);
  const int64_t ke = ESZ(b->kt), ve = ESZ(b->vt);
  const uint64_t all = rove_rows_all(b->nb);
  const int g4 = t->nq >= 4 && g4_fits(d, b->kt, b->vt);
  /* Q8 scales: their own contiguous rows (nblk floats per key) */
  for (int32_t i = 0; i < b->nr; i++) {
    if (b->kscn[i]) prefetch_bytes(b->kscn[i], 1, 0, b->run * 4 * nblk);
    if (b->vscn[i]) prefetch_bytes(b->vscn[i], 1, 0, b->run * 4 * nblk);
  }
  for (int32_t r = 0; r < t->nq; r++) any |= vis[r] = rove_rows_visible(t, r, b);
  int32_t r0 = 0;
  if (g4 && any == all)
    for (; t->nq - r0 >= 4; r0 += 4)
      for (int32_t i = 0; i < b->nr; i++) { /* run by run */
        const int32_t j = i * b->run, n = rove_rows_blk_len(b, i);
        rove_rows_g4__avx2[b->kt][b->vt].scores(t->q + (int64_t)r0 * d, d, b->k[i], b->ks * ke,
                                                b->ksc[i], nblk, n, t->scratch + r0 * BLK + j,
                                                r0 == 0 ? b->kn[i] : NULL);
      }
  /* Blocks that no 4-row group takes (MHA decode, short groups, masked blocks) of calls
   * longer than a block or over a paged pool: bursts once per 16 keys (rove_rows_burst:
   * the K rows of these and the next 16 keys, the V rows of these 16, then the K and V
   * rows of the same 16 keys a block or a call ahead) instead of the paced prefetch, for
   * fp32 rows of fewer than 4 query rows (typed rows, more work per byte, measured
   * 1.15-1.28x faster paced: bf16 and q8, ROVE_ISA=avx2 on a Zen 4, 12 x 64, 32768 keys;
   * GQA groups that the g4 path does not take stay paced, as on AVX-512).
   * Measured on the Zen 3, 12 x 64 MHA: contiguous caches 4-7 % faster (bench/ab_decode),
   * the 32-sequence batch 71 -> 84 % of the read (bench/paged_decode), with the bursts of
   * that time (no rows a block or call ahead); paged blocks of 16, one short call each
   * then, 1.33-1.39x the contiguous time against 1.08-1.12x paced. With the rows a block
   * or a call ahead and typed rows paced (session 21; ROVE_ISA=avx2 on a Zen 4, 12 x 64,
   * 32768 keys, one thread, against the session-start build): fp32 1.23x faster, bf16
   * 1.48x; a pool of blocks of 16 (one tile per call since session 20) 1.02x the
   * contiguous time, against 0.93x before (BENCHMARKS.md, session 21). On an Intel
   * core (t->paced, Sapphire Rapids, ROVE_ISA=avx2) paced measured 1.08-1.3x faster for
   * MHA too (BENCHMARKS.md, session 15): each prefetch holds a line-fill buffer, and a
   * burst stalls the loads behind it. */
  const int burst = !t->paced && r0 == 0 && t->nq < 4 && (t->nk > BLK || t->blocks) &&
                    b->kt == ROVE_DTYPE_F32 && b->vt == ROVE_DTYPE_F32;
  block_scores(t, b, any, r0, burst);
  for (int32_t r = 0; r < t->nq; r++)
    alpha[r] = row_softmax(t, r, b->nb, t->scratch + r * BLK, vis[r]);
  for (r0 = 0; r0 < t->nq; r0 += PR) {
    const int R = t->nq - r0 < PR ? t->nq - r0 : PR;
    const int32_t w = R <= 2 ? 32 : 16; /* floats per section */
    int keep = 0; /* some key is hidden from some row of the panel */
    for (int r = 0; r < R; r++) keep |= vis[r0 + r] != all;
    /* the g4 path run by run: O = alpha O + the first run's P V, then O = 1 O + each next
     * run's (o * 1 is exact: the same bits as one pass over the block) */
    if (g4 && R == 4 && !keep) {
      for (int32_t i = 0; i < b->nr; i++) {
        const int32_t j = i * b->run, n = rove_rows_blk_len(b, i);
        rove_rows_g4__avx2[b->kt][b->vt].pv(t->o + (int64_t)r0 * d, d, b->v[i], b->vs * ve,
                                            b->vsc[i], nblk, n, t->scratch + r0 * BLK + j,
                                            i ? ones : alpha + r0, r0 == 0 && !burst ? b->vn[i] : NULL);
      }
      continue;
    }
    for (int32_t c = 0; c < d; c += w) {
      __m256i mk[4];
      for (int x = 0; x < 4; x++) mk[x] = rove_avx2_lanes(d - c - 8 * x);
      const char *pf[ROVE_ROWS_RUNS];
      for (int32_t i = 0; i < b->nr; i++) {
        const char *vn = r0 == 0 && !burst ? b->vn[i] : NULL;
        pf[i] = vn && c * ve % 64 == 0 ? (const char *)vn + c * ve : NULL;
      }
      pv_tab[b->vt][keep][d - c < w][R - 1](t->o + (int64_t)r0 * d, d, c, b->v, b->vs, b->vsc,
                                            nblk, b->nb, b->run_shift, t->scratch + r0 * BLK,
                                            alpha + r0, mk, vis + r0, pf);
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
  /* rows read in place: fp32, or typed when d % 8 == 0 (whole vectors), not to be rotated */
  const int kin = !rk && ROVE_ROWS_IN_PLACE(t->k_type, d);
  const int vin = !rv && ROVE_ROWS_IN_PLACE(t->v_type, d);
  float *kscr = t->scratch + ROVE_ROWS_MAX * BLK, *vscr = kscr + BLK * d;
  for (int32_t j0 = 0; j0 < t->nk; j0 += BLK) {
    rove_rows_blk b;
    b.nb = t->nk - j0 < BLK ? t->nk - j0 : BLK;
    b.kp = t->mask ? t->k_pos + j0 : NULL;
    b.pfk = kin, b.pfv = vin;
    /* rows read in place (runs of a paged call's blocks), and the rows of the next block,
     * prefetched while this one is read: this call's, or after its last block those of
     * the call that follows (the caller's hint) */
    rove_rows_blk_place(t, &b, j0, kin, vin);
    if (!kin) { /* widened (or gathered, and rotated) into scratch */
      int64_t xs;
      const float *x = rove_rows_fp32(t, t->k, t->ks, t->k_scale, t->k_type, j0, b.nb, kscr,
                                      rove_to_f32__avx2, &xs);
      if (rk) rotate_rows(kscr, x, xs, b.nb, d, t->krot, j0, t->k_mul), x = kscr, xs = d;
      b.ks = xs, b.kt = ROVE_DTYPE_F32;
      rove_rows_blk_at(&b, b.k, b.ksc, x, xs);
    }
    if (!vin) {
      int64_t xs;
      const float *x = rove_rows_fp32(t, t->v, t->vs, t->v_scale, t->v_type, j0, b.nb, vscr,
                                      rove_to_f32__avx2, &xs);
      if (rv) rotate_rows(vscr, x, xs, b.nb, d, t->vrot, j0, 1.0f), x = vscr, xs = d;
      b.vs = xs, b.vt = ROVE_DTYPE_F32;
      rove_rows_blk_at(&b, b.v, b.vsc, x, xs);
    }
    block(t, &b);
  }
}
