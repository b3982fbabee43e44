/* SPDX-License-Identifier: MIT */
/* Step 1 of the AVX-512 decode row kernel (attn_rows-avx512.c, which describes the whole
 * kernel): the scores of RG = 1, 2 or 4 query rows against the keys of a 16-key group,
 * K rows read in place in any storage type, as instances per type and RG (and, for keys
 * whose rows lie d = 64 or 128 elements apart, per d) in the tables of rows-avx512.h. */
#include <immintrin.h>
#include <stddef.h>

#include "kernels-avx512.h"
#include "rows-avx512.h"

/* One section of scores_body: the 16 * NX dims from c (masked: the last, past d). */
INLINE void scores_section(__m512 acc[16], const float *q, int32_t d, const char *const row[16],
                           const float *const sc[16], int32_t c, const int RG, const int T,
                           const int NX, const int masked) {
  const int KEYS = 16 / RG;
  __mmask16 mk[8];
  __m512 qv[4][8];
#pragma GCC unroll 8
  for (int x = 0; x < NX; x++) {
    mk[x] = masked ? lanes(d - c - 16 * x) : 0xFFFF;
#pragma GCC unroll 4
    for (int r = 0; r < RG; r++) {
      const float *qr = q + (int64_t)r * d + c + 16 * x;
      qv[r][x] = masked ? _mm512_maskz_loadu_ps(mk[x], qr) : _mm512_loadu_ps(qr);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < KEYS; j++)
#pragma GCC unroll 8
    for (int x = 0; x < NX; x++) {
      __m512 kv =
          load16(row[j], c + 16 * x, mk[x], T, q8_scale(sc[j], c + 16 * x, d, T, masked), masked);
      ROVE_IN_ORDER(kv);
#pragma GCC unroll 4
      for (int r = 0; r < RG; r++)
        acc[SLOT(r * KEYS + j)] = _mm512_fmadd_ps(qv[r][x], kv, acc[SLOT(r * KEYS + j)]);
    }
}

/* Scores of RG query rows (q, rows d floats apart) against KEYS = 16 / RG keys: key j at
 * element j * ks of k (type T, Q8 scales of key j at ksc + j * nblk); n <= KEYS keys are
 * real, the others repeat key n - 1. Lane e of the result: row e / KEYS, key e % KEYS.
 * d is walked in sections of W dims, every key's section before the next section; one row
 * at d = 128 takes the whole row as one section (8 q vectors, 16 accumulators), so that K
 * is read key by key, front to back (the walk of attn_rows_heads needs it): the same FMAs
 * in the same order into each key's accumulator as two sections of 64, so the same bits.
 * One row at d = 64 also names its single section (NX = 4) as a constant: with the
 * section loop of a runtime d, gcc keeps some of the 16 row pointers in xmm registers and
 * on the stack; q8 rows (compute-bound on one thread) took 1.06-1.07x the time that way
 * (docs/performance.md, "Loop alignment"). */
INLINE __m512 scores_body(const float *q, int32_t d, const void *k, int64_t ks,
                          const float *ksc, int32_t nblk, int32_t n, const int RG, const int T) {
  const int KEYS = 16 / RG, NX = RG == 4 ? 2 : 4, W = 16 * NX; /* W dims per section */
  __m512 acc[16];
  const char *row[16];
  const float *sc[16];
#pragma GCC unroll 16
  for (int j = 0; j < KEYS; j++) {
    const int64_t jj = j < n ? j : n - 1;
    row[j] = (const char *)k + jj * ks * ESZ(T);
    sc[j] = T == ROVE_DTYPE_Q8 ? ksc + jj * nblk : NULL;
  }
#pragma GCC unroll 16
  for (int s = 0; s < 16; s++) acc[s] = _mm512_setzero_ps();
  int32_t c = 0;
  if (RG == 1 && d == 128)
    scores_section(acc, q, d, row, sc, 0, RG, T, 8, 0);
  else if (RG == 1 && d == 64)
    scores_section(acc, q, d, row, sc, 0, RG, T, 4, 0);
  else {
    for (; c + W <= d; c += W) scores_section(acc, q, d, row, sc, c, RG, T, NX, 0);
    if (c < d) scores_section(acc, q, d, row, sc, c, RG, T, NX, 1);
  }
  return reduce16(acc);
}
#define SCORES_FN(RG, T, name)                                                                \
  static __attribute__((noinline)) __m512 scores_##RG##name(                                  \
      const float *q, int32_t d, const void *k, int64_t ks, const float *ksc, int32_t nblk,   \
      int32_t n) {                                                                            \
    return scores_body(q, d, k, ks, ksc, nblk, n, RG, T);                                     \
  }
#define SCORES_TYPE(T, name) SCORES_FN(1, T, name) SCORES_FN(2, T, name) SCORES_FN(4, T, name)
SCORES_TYPE(ROVE_DTYPE_F32, _f32) SCORES_TYPE(ROVE_DTYPE_BF16, _bf16)
SCORES_TYPE(ROVE_DTYPE_F16, _f16) SCORES_TYPE(ROVE_DTYPE_Q8, _q8)
/* [type][0, 1, 2 for RG = 1, 2, 4] */
const rove_rows_scores_fn rove_rows_scores_tab__avx512[ROVE_DTYPE_COUNT][3] = {
    {scores_1_f32, scores_2_f32, scores_4_f32},
    {scores_1_bf16, scores_2_bf16, scores_4_bf16},
    {scores_1_f16, scores_2_f16, scores_4_f16},
    {scores_1_q8, scores_2_q8, scores_4_q8}};

/* scores_body for RG query rows against KEYS = 16 / RG real keys whose rows lie D
 * elements apart (a cache's rows, or a pool block's), D = d = 64 or 128 a constant: every
 * key row is then a fixed offset from k and its Q8 scales one from ksc. With a pointer per
 * key (16 for one row, and 16 more for Q8 scales) gcc kept the accumulators of q8 rows on
 * the stack. The same sections in the same order as scores_body, so the same bits. (Not
 * scores_body with constant arguments: gcc 12 then reports its dead masked tail section
 * as undefined behaviour, -Werror=aggressive-loop-optimizations.) */
INLINE __m512 scores_dense_body(const float *q, const void *k, const float *ksc, const int D,
                                const int RG, const int T) {
  const int KEYS = 16 / RG, NX = RG == 4 ? 2 : 4, W = 16 * NX;
  __m512 acc[16];
  const char *row[16];
  const float *sc[16];
#pragma GCC unroll 16
  for (int j = 0; j < KEYS; j++) {
    row[j] = (const char *)k + (int64_t)j * D * ESZ(T);
    sc[j] = T == ROVE_DTYPE_Q8 ? ksc + j * (D / ROVE_Q8_BLOCK) : NULL;
  }
#pragma GCC unroll 16
  for (int s = 0; s < 16; s++) acc[s] = _mm512_setzero_ps();
  if (RG == 1) /* one section, as scores_body at d = 64 and 128 */
    scores_section(acc, q, D, row, sc, 0, 1, T, D / 16, 0);
  else
#pragma GCC unroll 1
    for (int c = 0; c < D; c += W) scores_section(acc, q, D, row, sc, c, RG, T, NX, 0);
  return reduce16(acc);
}
#define SCORES_DENSE_FN(RG, D, T, name)                                                       \
  static __attribute__((noinline)) __m512 scores_##RG##_d##D##name(                           \
      const float *q, const void *k, const float *ksc) {                                      \
    return scores_dense_body(q, k, ksc, D, RG, T);                                            \
  }
#define SCORES_DENSE_RG(RG, T, name) SCORES_DENSE_FN(RG, 64, T, name) SCORES_DENSE_FN(RG, 128, T, name)
#define SCORES_DENSE_TYPE(T, name)                                                            \
  SCORES_DENSE_RG(1, T, name) SCORES_DENSE_RG(2, T, name) SCORES_DENSE_RG(4, T, name)
SCORES_DENSE_TYPE(ROVE_DTYPE_F32, _f32) SCORES_DENSE_TYPE(ROVE_DTYPE_BF16, _bf16)
SCORES_DENSE_TYPE(ROVE_DTYPE_F16, _f16) SCORES_DENSE_TYPE(ROVE_DTYPE_Q8, _q8)
#define SCORES_DENSE_ROW(name)                                                                \
  {{scores_1_d64##name, scores_1_d128##name}, {scores_2_d64##name, scores_2_d128##name},      \
   {scores_4_d64##name, scores_4_d128##name}}
/* [type][0, 1, 2 for RG = 1, 2, 4][0, 1 for d = 64, 128] */
const rove_rows_scores_dense_fn rove_rows_scores_dense_tab__avx512[ROVE_DTYPE_COUNT][3][2] = {
    SCORES_DENSE_ROW(_f32), SCORES_DENSE_ROW(_bf16), SCORES_DENSE_ROW(_f16),
    SCORES_DENSE_ROW(_q8)};
