/* SPDX-License-Identifier: MIT */
/* The AVX2 row kernel's GQA group path (rows-avx2.h; used by attn_rows-avx2.c's block()):
 * 4 query rows against a block whose every key each of them sees. */
#include "rows-avx2.h"

/* One cache line of K in g4_scores_body: dims [c, c + U) of keys k0, k1 into acc. */
INLINE void g4_line(__m256 acc[8], const float *q, int32_t d, const char *k0, const char *k1,
                    const float *s0, const float *s1, int32_t c, const char *pf, int64_t kb,
                    const int T, const int PF) {
  if (PF) {
    _mm_prefetch(pf + c * ESZ(T), _MM_HINT_T2);
    _mm_prefetch(pf + kb + c * ESZ(T), _MM_HINT_T2);
  }
  for (int x = 0; x < LINE_ELEMS(T) / 8; x++) {
    const int32_t i = c + 8 * x;
    const float f0 = T == ROVE_DTYPE_Q8 ? s0[i / ROVE_Q8_BLOCK] : 0.0f;
    const float f1 = T == ROVE_DTYPE_Q8 ? s1[i / ROVE_Q8_BLOCK] : 0.0f;
    const __m256 a = load8(k0, i, T, f0), b = load8(k1, i, T, f1);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
      const __m256 qv = _mm256_loadu_ps(q + (int64_t)r * d + i);
      acc[SLOT(2 * r)] = _mm256_fmadd_ps(qv, a, acc[SLOT(2 * r)]);
      acc[SLOT(2 * r + 1)] = _mm256_fmadd_ps(qv, b, acc[SLOT(2 * r + 1)]);
    }
  }
}

/* Step 1 for 4 rows: q [4][d] against the nb keys at k (row stride kb bytes, Q8 scales
 * ksc, nblk per key), 2 keys at a time: 8 accumulators, row r and key i in SLOT(2 r + i),
 * each takes q_r[c..c+7] k_i[c..c+7] with q read as the FMA's memory operand; reduce8 then
 * gives lane e = row e / 2, key e % 2, stored into the scratch rows dst [4][BLK]. An odd
 * nb repeats its last key (the extra score lands past nb, ignored). kn: the next block's
 * K rows (same stride), one prefetch per line read; NULL for none (PF = 0). D: d as a
 * constant, the d loop unrolled (0: d at run time). */
INLINE void g4_scores_body(const float *q, int32_t d, const char *k, int64_t kb,
                           const float *ksc, int32_t nblk, int32_t nb, float *dst,
                           const char *kn, const int T, const int PF, const int32_t D) {
  const int U = LINE_ELEMS(T);
  for (int32_t j = 0; j < nb; j += 2) {
    const char *k0 = k + (int64_t)j * kb, *k1 = j + 1 < nb ? k0 + kb : k0;
    const float *s0 = T == ROVE_DTYPE_Q8 ? ksc + (int64_t)j * nblk : NULL;
    const float *s1 = T == ROVE_DTYPE_Q8 ? (j + 1 < nb ? s0 + nblk : s0) : NULL;
    const char *pf = PF ? kn + (int64_t)j * kb : NULL;
    __m256 acc[8];
#pragma GCC unroll 8
    for (int x = 0; x < 8; x++) acc[x] = _mm256_setzero_ps();
    if (D) {
#pragma GCC unroll 16
      for (int32_t c = 0; c < D; c += U) g4_line(acc, q, D, k0, k1, s0, s1, c, pf, kb, T, PF);
    } else {
      for (int32_t c = 0; c < d; c += U) g4_line(acc, q, d, k0, k1, s0, s1, c, pf, kb, T, PF);
    }
    const __m256 sv = reduce8(acc);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) store_row(dst + r * BLK + j, sv, r, 2);
  }
}

INLINE void g4_scores_pf(const float *q, int32_t d, const char *k, int64_t kb, const float *ksc,
                         int32_t nblk, int32_t nb, float *dst, const char *kn, const int T,
                         const int32_t D) {
  if (kn)
    g4_scores_body(q, d, k, kb, ksc, nblk, nb, dst, kn, T, 1, D);
  else
    g4_scores_body(q, d, k, kb, ksc, nblk, nb, dst, kn, T, 0, D);
}

/* Step 3 for 4 rows, the 16 floats from c of o [4][d]: O = alpha O + sum_{j < nb} p_j V[j]
 * (p: scratch rows [4][BLK]); per key one load (and widening) of its 2 vectors and a
 * broadcast FMA per row and vector. PF: one prefetch per key, at vn, vn + step, ..., the
 * step a line (LIN, a constant) or a row (vb). */
INLINE void g4_pv_section(float *o, int32_t d, int32_t c, const char *v, int64_t vb,
                          const float *vsc, int32_t nblk, int32_t nb, const float *p,
                          const float *alpha, const char *vn, const int T, const int LIN,
                          const int PF) {
  __m256 acc[4][2];
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++)
#pragma GCC unroll 2
    for (int x = 0; x < 2; x++)
      acc[r][x] = _mm256_mul_ps(_mm256_loadu_ps(o + (int64_t)r * d + c + 8 * x),
                                _mm256_set1_ps(alpha[r]));
  const float *sc = T == ROVE_DTYPE_Q8 ? vsc + c / ROVE_Q8_BLOCK : NULL;
  /* addresses from the key index (a pointer stepped past the last row would be out of its
   * object; the prefetch addresses may lie past the buffer, so they stay integers) */
#pragma GCC unroll 2
  for (int32_t j = 0; j < nb; j++) {
    const char *vr = v + c * ESZ(T) + (int64_t)j * vb;
    if (PF)
      _mm_prefetch((const char *)((uintptr_t)vn + (uintptr_t)(j * (LIN ? 64 : vb))), _MM_HINT_T2);
    const float f = T == ROVE_DTYPE_Q8 ? sc[(int64_t)j * nblk] : 0.0f;
    const __m256 v0 = load8(vr, 0, T, f), v1 = load8(vr, 8, T, f);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
      const __m256 pb = _mm256_broadcast_ss(p + r * BLK + j);
      acc[r][0] = _mm256_fmadd_ps(pb, v0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(pb, v1, acc[r][1]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++)
#pragma GCC unroll 2
    for (int x = 0; x < 2; x++) _mm256_storeu_ps(o + (int64_t)r * d + c + 8 * x, acc[r][x]);
}

/* P V over all of d: sections of 16 floats. The sections that start a line of a V row
 * prefetch as many lines of the next block's V rows as they read lines of this block's:
 * where the rows are contiguous (a cache), lines in address order, the section starting
 * the row's line L taking lines [L nb, L nb + nb) of the next nb rows' region (measured
 * on the Zen 3: 1.07-1.12x faster than the same lines row by row, which walks 8 pages at a
 * stride of a row); else line L of each next row. */
#define G4_FNS(T, name)                                                                       \
  static __attribute__((noinline)) void g4_scores##name(                                      \
      const float *q, int32_t d, const char *k, int64_t kb, const float *ksc, int32_t nblk,  \
      int32_t nb, float *dst, const char *kn) {                                               \
    /* head dims 64 and 128 with the d loop unrolled: 5-15 % fewer instructions */          \
    if (d == 128)                                                                             \
      g4_scores_pf(q, d, k, kb, ksc, nblk, nb, dst, kn, T, 128);                              \
    else if (d == 64)                                                                         \
      g4_scores_pf(q, d, k, kb, ksc, nblk, nb, dst, kn, T, 64);                               \
    else                                                                                      \
      g4_scores_pf(q, d, k, kb, ksc, nblk, nb, dst, kn, T, 0);                                \
  }                                                                                           \
  static __attribute__((noinline)) void g4_pv##name(                                          \
      float *o, int32_t d, const char *v, int64_t vb, const float *vsc, int32_t nblk,         \
      int32_t nb, const float *p, const float *alpha, const char *vn) {                       \
    const int64_t row = (int64_t)d * ESZ(T);                                                   \
    for (int32_t c = 0; c < d; c += 16)                                                       \
      if (vn && c % LINE_ELEMS(T) == 0 && vb == row)                                          \
        g4_pv_section(o, d, c, v, vb, vsc, nblk, nb, p, alpha, vn + c * ESZ(T) * nb, T, 1, 1);  \
      else if (vn && c % LINE_ELEMS(T) == 0)                                                  \
        g4_pv_section(o, d, c, v, vb, vsc, nblk, nb, p, alpha, vn + c * ESZ(T), T, 0, 1);     \
      else                                                                                    \
        g4_pv_section(o, d, c, v, vb, vsc, nblk, nb, p, alpha, NULL, T, 0, 0);                \
  }
G4_FNS(ROVE_DTYPE_F32, _f32) G4_FNS(ROVE_DTYPE_BF16, _bf16)
G4_FNS(ROVE_DTYPE_F16, _f16) G4_FNS(ROVE_DTYPE_Q8, _q8)
const rove_g4_fns rove_rows_g4__avx2[ROVE_DTYPE_COUNT][ROVE_DTYPE_COUNT] = {
#define G4_ROW(ks) {{g4_scores##ks, g4_pv_f32}, {g4_scores##ks, g4_pv_bf16},                  \
                    {g4_scores##ks, g4_pv_f16}, {g4_scores##ks, g4_pv_q8}}
    G4_ROW(_f32), G4_ROW(_bf16), G4_ROW(_f16), G4_ROW(_q8)
#undef G4_ROW
};
