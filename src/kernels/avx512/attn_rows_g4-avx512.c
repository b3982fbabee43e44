/* SPDX-License-Identifier: MIT */
/* The AVX-512 row kernel's GQA group path (rows-avx512.h; used by attn_rows-avx512.c's
 * block()): P V of 4 query rows over a run of a block's keys, every key visible to each
 * row. The arithmetic and its order are the row kernel's (pv_body with R = 4), so the
 * results are the same bits; what differs is the walk: one call per run, d in sections
 * of 32 elements (8 accumulators, against pv_body's 64 and 16), and per key the lines of
 * the next block's V rows that the section owns prefetched beside its read. */
#include "kernels-avx512.h"
#include "rows-avx512.h"

/* Prefetch the lines that start in bytes [o0, o1) of base (offsets taken as if base were
 * line-aligned; integer addresses, which may lie past the buffer: harmless). */
INLINE void prefetch_span(const char *base, int64_t o0, int64_t o1) {
  for (int64_t a = (o0 + 63) & ~(int64_t)63; a < o1; a += 64)
    _mm_prefetch((const char *)((uintptr_t)base + (uintptr_t)a), _MM_HINT_T2);
}

/* Step 3 for 4 rows, the 32 floats from c of o [4][d]: O = alpha O + sum_{j < nb} p_j V[j]
 * (p: scratch rows [4][BLK]); per key one load (and widening) of its 2 vectors and a
 * broadcast FMA per row and vector (the 32 elements share one Q8 scale: c % 32 == 0). PF:
 * key j prefetches the lines that start in bytes [off + j step, off + j step + 32 ESZ) of
 * pf: the next run's V region read in address order (step = 32 ESZ), or row j's lines of
 * these 32 elements (off = c ESZ, step = the row stride). */
INLINE void g4_pv_section(float *o, int32_t d, int32_t c, const char *v, int64_t vb,
                          const float *vsc, int32_t nblk, int32_t nb, const float *p,
                          const float *alpha, const char *pf, int64_t off, int64_t step,
                          const int T, const int PF) {
  const int64_t span = 32 * ESZ(T);
  __m512 acc[4][2];
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++)
#pragma GCC unroll 2
    for (int x = 0; x < 2; x++)
      acc[r][x] = _mm512_mul_ps(_mm512_loadu_ps(o + (int64_t)r * d + c + 16 * x),
                                _mm512_set1_ps(alpha[r]));
  const float *sc = T == ROVE_DTYPE_Q8 ? vsc + c / ROVE_Q8_BLOCK : NULL;
  const char *vr = v;
#pragma GCC unroll 2
  for (int32_t j = 0; j < nb; j++, vr += vb) {
    if (PF) prefetch_span(pf, off + j * step, off + j * step + span);
    const float f = T == ROVE_DTYPE_Q8 ? sc[(int64_t)j * nblk] : 0.0f;
    const __m512 v0 = load16(vr, c, 0xFFFF, T, f, 0), v1 = load16(vr, c + 16, 0xFFFF, T, f, 0);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
      const __m512 pb = _mm512_set1_ps(p[r * BLK + j]);
      acc[r][0] = _mm512_fmadd_ps(pb, v0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(pb, v1, acc[r][1]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++)
#pragma GCC unroll 2
    for (int x = 0; x < 2; x++) _mm512_storeu_ps(o + (int64_t)r * d + c + 16 * x, acc[r][x]);
}

/* P V over all of d: sections of 32 elements. vn (the next block's V rows of this run,
 * NULL for none): where the rows are contiguous (a cache: vb = d ESZ), section s = c / 32
 * prefetches the s-th of the d / 32 equal parts of the next run's region (run rows), in
 * address order, 32 ESZ bytes per key (the row kernel's linear prefetch, attn_rows-avx512.c
 * block()); else row j's lines of the section's elements. */
#define G4_PV(T, name)                                                                        \
  static __attribute__((noinline)) void g4_pv##name(                                          \
      float *o, int32_t d, const char *v, int64_t vb, const float *vsc, int32_t nblk,         \
      int32_t nb, int32_t run, const float *p, const float *alpha, const char *vn) {          \
    const int64_t span = 32 * ESZ(T);                                                          \
    for (int32_t c = 0; c < d; c += 32) {                                                     \
      if (vn && vb == (int64_t)d * ESZ(T))                                                    \
        g4_pv_section(o, d, c, v, vb, vsc, nblk, nb, p, alpha, vn, (c / 32) * run * span,     \
                      span, T, 1);                                                            \
      else if (vn)                                                                            \
        g4_pv_section(o, d, c, v, vb, vsc, nblk, nb, p, alpha, vn, c * ESZ(T), vb, T, 1);     \
      else                                                                                    \
        g4_pv_section(o, d, c, v, vb, vsc, nblk, nb, p, alpha, NULL, 0, 0, T, 0);             \
    }                                                                                         \
  }
G4_PV(ROVE_DTYPE_F32, _f32) G4_PV(ROVE_DTYPE_BF16, _bf16)
G4_PV(ROVE_DTYPE_F16, _f16) G4_PV(ROVE_DTYPE_Q8, _q8)
/* [V type] */
const rove_g4_pv_fn rove_rows_g4_pv__avx512[ROVE_DTYPE_COUNT] = {g4_pv_f32, g4_pv_bf16,
                                                                 g4_pv_f16, g4_pv_q8};
