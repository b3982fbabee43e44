/* SPDX-License-Identifier: MIT */
/* AVX-512 decode row kernel (attn_rows, kernels.h): nq <= 16 query rows against keys and
 * values read in place (row-major, any token stride; nothing is packed or copied), fp32 or
 * a cache's bf16 / f16 / q8 rows (K and V each of its own type), any head_dim.
 *
 * Per block of up to 64 keys:
 *   1. scores, the query rows in groups of RG = 4, 2 or 1 (what is left), each group over
 *      the block's keys 16 / RG at a time: 16 zmm accumulators hold those keys x the RG
 *      rows, each takes q_r[c..c+15] * k_j[c..c+15] over d. Each K vector is loaded (and
 *      widened) once and used by the RG rows, so a GQA group's 4 rows share every K read;
 *      the q vectors of a section (64 floats, 32 for RG = 4) stay in registers. A
 *      transpose-style tree then reduces the 16 accumulators to one vector of 16 scores
 *      (30 shuffles + 15 adds instead of 16 horizontal sums), stored into each row's
 *      scratch [64]. Groups after the first re-read the block's keys from L1. On AMD a
 *      group of 4 rows against dense fp32 K at d = 64 or 128 takes the GQA group path's
 *      scores instead, 16 keys a call (attn_rows_g4-avx512.c: two keys a line at a time,
 *      in 256-bit halves; the same bits).
 *   2. softcap; keys past nk and, on calls the driver marks, invisible pairs become -inf
 *      (selected, whatever their K rows hold; 16-key groups no row sees are not scored);
 *      online softmax per row: m' = max(m, max s), alpha = exp(m - m'), p = exp(s - m'),
 *      l = alpha l + sum p, p into the row's scratch. A NaN score of a visible key (or a
 *      +inf one) poisons the row as softmax-scalar.h does: o, l NaN, m = +inf.
 *   3. O = alpha O + P V: query rows in panels of up to 4, d in sections of 64 floats
 *      (4 zmm, masked past d); per key one load (and widening) of its V section and one
 *      broadcast FMA per row and vector. V needs no transpose. When a key is hidden from a
 *      row of the panel, the FMAs are masked per pair (a hidden V row adds nothing, even
 *      NaN or Inf). On AMD a panel of 4 rows over fp32 V that sees every key of the
 *      block takes the GQA group path instead (attn_rows_g4-avx512.c: the same
 *      arithmetic, sections of 32 floats; see block()).
 * So each key and value is read from memory once per call (from L1 again for rows past the
 * first group or panel). Typed rows are widened as they are loaded, 16 elements at a time:
 * bf16 zero-extended and shifted by 16, f16 by vcvtph2ps, q8 sign-extended, converted and
 * multiplied by the scale of its 32-element block; loads past d are masked (AVX512BW),
 * so every head_dim reads in place. The caller's K/V (krot / vrot) are first widened and
 * rotated block by block into scratch [64][d] (rotate_rows, the math of rotate-scalar.c)
 * and read from there as fp32. */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#include "kernels-avx512.h"
#include "rows-avx512.h"
#include "exp-avx512.h"

#define PR 4 /* query rows per P V panel: 4 x 4 zmm accumulators */

/* Software prefetch into L2 (prefetcht2; into L1, prefetcht0, with t->prefetch_l1: the
 * plan's choice on a Zen 5, prefetch_line in rows-avx512.h), two ways (see block()):
 *  - paced: while a block is read, the next block's rows, one line per line read;
 *  - bursts, once per 16 keys during the first row group's scores (rove_rows_burst,
 *    rows_block.h): the K rows of these 16 keys and of the next 16, the V rows of these
 *    16, then the K and V rows of the same 16 keys a block (or a call) ahead (a burst of
 *    a whole block's rows at its start measured slower).
 * Each prefetch holds one of the core's few line-fill buffers until its line arrives. On
 * a Sapphire Rapids core a burst (192 prefetches at 32:8 x 128) stalls the loads behind
 * it, a sixth to a fifth of GQA decode's time even with the rows in L2, and paced
 * prefetch took GQA decode (32:8 x 128) 1.09-1.37x and MHA decode (12 x 64) 1.0-1.3x
 * faster (BENCHMARKS.md, session 15). On AMD cores the bursts measured faster for MHA
 * decode of fp32 rows (AVX2 on a Zen 3, attn_rows-avx2.c; on a Zen 4, 12 x 64, 65536
 * keys, 24.4 ns per key and head against 26.3 paced), and slower for GQA (a Zen 4, 32:8 x
 * 128: 1.3x the paced time) and for typed rows (see block()). The rows a block or a call
 * ahead, added in session 21, and the bursts for a paged pool's calls (paced before) are
 * measured in BENCHMARKS.md, session 21. Without any software prefetch the kernel reads
 * at 35-40 % of a plain read of the same bytes (Zen 4, 1 x 4096 x 12 x 64): the hardware
 * prefetchers do not follow the interleaved K and V streams. Typed rows request only the
 * lines their bytes occupy; Q8 rows also their scales, a stream of its own (without it a
 * q8 cache took 0.79 ms at 1 x 4096 x 12 x 64 on a Zen 5, with it 0.51-0.55, measured
 * when the bursts requested them; since session 21 Q8 rows are always paced, and the
 * paced prefetch requests the next block's scales, kscn / vscn). */

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
    prefetch_bytes(xi + PF_ROT * xs, 1, 0, 4 * (int64_t)d, 0);
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


/* Step 1: the scores of every row against the keys of b into scratch rows [r][64] (key
 * groups of 16 no row sees are skipped: their lanes stay garbage, step 2 selects -inf).
 * paced: after each scores call of the first row group, the next block's K rows at the
 * same indices (b->kn) are prefetched (the GQA group path's scores request them during
 * the call instead); else a burst per 16 keys (rove_rows_burst). */
static void block_scores(const rove_rows_args *t, const rove_rows_blk *b, uint64_t any,
                         int paced) {
  const int32_t d = t->d, nblk = rove_q8_blocks(d);
  const int64_t ke = ESZ(b->kt);
  const int l1 = t->prefetch_l1;
  for (int32_t r0 = 0, RG; r0 < t->nq; r0 += RG) {
    RG = t->nq - r0 >= 4 ? 4 : t->nq - r0 >= 2 ? 2 : 1;
    const int32_t keys = 16 / RG;
    const int rg = RG == 4 ? 2 : RG - 1;
    const rove_rows_scores_fn f = rove_rows_scores_tab__avx512[b->kt][rg];
    /* dense rows at d = 64 or 128: the fixed-offset form for KEYS real keys */
    const int dense = b->ks == d && (d == 64 || d == 128);
    const rove_rows_scores_dense_fn fd =
        dense ? rove_rows_scores_dense_tab__avx512[b->kt][rg][d == 128] : NULL;
    /* the GQA group path's scores (attn_rows_g4-avx512.c) for dense fp32 rows on CPUs
     * without the paced preference: the next block's K requested beside the reads */
    const int g4 = fd && RG == 4 && !t->paced && b->kt == ROVE_DTYPE_F32;
    for (int32_t j = 0; j < b->nb; j += 16) {
      if (!(any >> j & 0xFFFFu)) continue;
      const int32_t i = j >> b->run_shift, ji = j & (b->run - 1); /* run i, its key ji */
      const char *kj = (const char *)b->k[i] + ji * b->ks * ke;
      const float *kscj = b->ksc[i] ? b->ksc[i] + (int64_t)ji * nblk : NULL;
      /* the next block's K rows, as many as these scores read (first row group only) */
      const char *kn = r0 == 0 && paced && b->kn[i] ? (const char *)b->kn[i] + ji * b->ks * ke : NULL;
      if (r0 == 0 && !paced) { /* a burst, see block() */
        rove_rows_pf pf[ROVE_ROWS_BURST];
        rove_rows_burst(b, i, ji, pf);
        for (int e = 0; e < ROVE_ROWS_BURST; e++)
          if (pf[e].a) prefetch_bytes((const void *)pf[e].a, pf[e].n, pf[e].stride, 4 * d, l1);
      }
      const int32_t n16 = b->nb - j < 16 ? b->nb - j : 16;
      if (g4) { /* the group path: the 16 keys in one call, which requests kn itself */
        rove_rows_g4_scores_f32__avx512(t->q + (int64_t)r0 * d, (const float *)kj, kn, d, n16,
                                        t->scratch + r0 * BLK + j, l1);
        continue;
      }
      for (int32_t jj = 0; jj < n16; jj += keys) {
        const int32_t n = n16 - jj < keys ? n16 - jj : keys;
        const char *kr = kj + jj * b->ks * ke;
        const float *kscr = kscj ? kscj + (int64_t)jj * nblk : NULL;
        const float *qr = t->q + (int64_t)r0 * d;
        const char *knr = kn ? kn + jj * b->ks * ke : NULL;
        const __m512 s = fd && n == keys ? fd(qr, kr, kscr) : f(qr, d, kr, b->ks, kscr, nblk, n);
        if (knr) prefetch_bytes(knr, keys, b->ks * ke, d * ke, l1);
        /* lanes [r keys, r keys + n) of s are row r0 + r's keys j + jj .. */
        for (int32_t r = 0; r < RG; r++)
          _mm512_mask_storeu_ps(t->scratch + (r0 + r) * BLK + j + jj - r * keys,
                                (__mmask16)(lanes(n) << (r * keys)), s);
      }
    }
  }
}

/* Step 2 for row r: its scores s (scratch row) become p (zero past the visible keys, up to
 * the next multiple of 16); vis: rove_rows_visible. Returns alpha. */
static float row_softmax(const rove_rows_args *t, int32_t r, int32_t nb, float *s, uint64_t vis) {
  const int nv = (nb + 15) / 16;
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  __m512 x[BLK / 16], mx = ninf;
  __mmask16 nan = 0;
  for (int v = 0; v < nv; v++) {
    const __mmask16 mk = (__mmask16)(vis >> (16 * v));
    x[v] = _mm512_loadu_ps(s + 16 * v);
    if (t->softcap > 0.0f) x[v] = rove_softcap512(x[v], t->softcap); /* exp-avx512.h */
    x[v] = _mm512_mask_mov_ps(ninf, mk, x[v]); /* hidden keys, lanes past nb: -inf */
    nan |= _mm512_cmp_ps_mask(x[v], x[v], _CMP_UNORD_Q);
    mx = _mm512_max_ps(mx, x[v]);
  }
  const float row_max = _mm512_reduce_max_ps(mx);
  if (nan || row_max == INFINITY) { /* poisoned: o, l NaN, m = +inf */
    for (int v = 0; v < nv; v++) _mm512_storeu_ps(s + 16 * v, _mm512_setzero_ps());
    t->l[r] = NAN;
    t->m[r] = INFINITY;
    return NAN;
  }
  if (row_max == -INFINITY) { /* nothing visible: o, m, l stay, p = 0 */
    for (int v = 0; v < nv; v++) _mm512_storeu_ps(s + 16 * v, _mm512_setzero_ps());
    return 1.0f;
  }
  const float m_old = t->m[r], m_new = fmaxf(m_old, row_max);
  const __m512 sub = _mm512_set1_ps(m_new);
  __m512 sum = _mm512_setzero_ps();
  for (int v = 0; v < nv; v++) {
    const __mmask16 mk = (__mmask16)(vis >> (16 * v));
    const __m512 pv = rove_exp512_nonpos_maskz(mk, _mm512_sub_ps(x[v], sub));
    _mm512_storeu_ps(s + 16 * v, pv);
    sum = _mm512_add_ps(sum, pv);
  }
  const float alpha =
      m_old == -INFINITY ? 0.0f : _mm512_cvtss_f32(rove_exp512_ps(_mm512_set1_ps(m_old - m_new)));
  t->l[r] = t->l[r] * alpha + _mm512_reduce_add_ps(sum);
  t->m[r] = m_new;
  return alpha;
}

/* Step 3 for R rows (p: their scratch rows) and the section of 64 floats from element c0
 * of o and of the value rows (type T, stride vs elements, nblk Q8 scales per row; vector
 * x has the lanes of mk[x], none past d): O = alpha O + sum_{j < nb} p_j V[j], the keys in
 * runs of 2^rs: key i 2^rs + u at row u of v[i] (Q8 scales vsc[i] + u nblk). keep: only
 * the visible pairs (bit j of vis[r]) are added (masked FMAs); keys no row sees are
 * skipped. */
INLINE void pv_body(float *o, int32_t d, int32_t c0, const void *const *v, int64_t vs,
                    const float *const *vsc, int32_t nblk, int32_t nb, int32_t rs,
                    const float *p, const float *alpha, const __mmask16 mk[4],
                    const uint64_t *vis, const char *const *pf, int64_t pfs, int l1, const int R,
                    const int keep, const int T, const int masked) {
  /* pf[i]: where key u of run i prefetches the next block's V lines, pf[i] + u pfs (NULL:
   * none); as many lines as this section reads of V[j] */
  const int64_t pfb = (int64_t)((d - c0 < 64 ? d - c0 : 64) * ESZ(T));
  __m512 acc[PR][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int x = 0; x < 4; x++)
      acc[r][x] = _mm512_mul_ps(load16(o + (int64_t)r * d, c0 + 16 * x, mk[x], ROVE_DTYPE_F32,
                                       0.0f, masked),
                                _mm512_set1_ps(alpha[r]));
  uint64_t any = 0;
  if (keep)
    for (int r = 0; r < R; r++) any |= vis[r];
  for (int32_t i = 0, j0 = 0; j0 < nb; i++, j0 += 1 << rs) { /* run i: keys j0 .. */
    const int32_t n = nb - j0 < 1 << rs ? nb - j0 : 1 << rs;
    for (int32_t u = 0; u < n; u++) {
      const int32_t j = j0 + u;
      if (pf[i])
        for (int64_t x = 0; x < pfb; x += 64)
          prefetch_line((uintptr_t)pf[i] + (uintptr_t)(u * pfs + x), l1);
      const char *vr = (const char *)v[i] + (int64_t)u * vs * ESZ(T);
      const float *sc = T == ROVE_DTYPE_Q8 ? vsc[i] + (int64_t)u * nblk : NULL;
      if (keep && !(any >> j & 1)) continue; /* hidden from every row: V[j] not read */
      __m512 vv[4];
#pragma GCC unroll 4
      for (int x = 0; x < 4; x++)
        vv[x] = load16(vr, c0 + 16 * x, mk[x], T, q8_scale(sc, c0 + 16 * x, d, T, masked), masked);
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        const __m512 pb = _mm512_set1_ps(p[r * BLK + j]);
        const __mmask16 k = keep ? (__mmask16)(0u - (unsigned)(vis[r] >> j & 1)) : 0xFFFF;
#pragma GCC unroll 4
        for (int x = 0; x < 4; x++)
          acc[r][x] = keep ? _mm512_mask3_fmadd_ps(pb, vv[x], acc[r][x], k)
                           : _mm512_fmadd_ps(pb, vv[x], acc[r][x]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int x = 0; x < 4; x++)
      if (masked)
        _mm512_mask_storeu_ps(o + (int64_t)r * d + c0 + 16 * x, mk[x], acc[r][x]);
      else
        _mm512_storeu_ps(o + (int64_t)r * d + c0 + 16 * x, acc[r][x]);
}

typedef void (*pv_fn)(float *o, int32_t d, int32_t c0, const void *const *v, int64_t vs,
                      const float *const *vsc, int32_t nblk, int32_t nb, int32_t rs,
                      const float *p, const float *alpha, const __mmask16 mk[4],
                      const uint64_t *vis, const char *const *pf, int64_t pfs, int l1);
#define PV_FN(R, keep, masked, T, name)                                                      \
  static __attribute__((noinline)) void pv_##R##keep##masked##name(                          \
      float *o, int32_t d, int32_t c0, const void *const *v, int64_t vs,                    \
      const float *const *vsc, int32_t nblk, int32_t nb, int32_t rs, const float *p,         \
      const float *alpha, const __mmask16 mk[4], const uint64_t *vis, const char *const *pf, \
      int64_t pfs, int l1) {                                                                 \
    pv_body(o, d, c0, v, vs, vsc, nblk, nb, rs, p, alpha, mk, vis, pf, pfs, l1, R, keep, T,  \
            masked);                                                                         \
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

/* Step 3 of a block for every row, over its runs [i0, i1): O = alpha O + P V for run 0, O =
 * 1 O + P V after it (o * 1 is exact, so the runs in order, in one call or several, give
 * the same bits as one pass over the block). keep (masked FMAs) is decided over the whole
 * block. Prefetch of the next block's V rows (b->vn) with paced, or in the group path,
 * as block() describes; none where b->vn is NULL. Panels of 4 rows that see every key of
 * the block take the GQA group path (attn_rows_g4-avx512.c) on CPUs without the paced
 * preference (AMD), for fp32 V. */
static void block_pv(const rove_rows_args *t, const rove_rows_blk *b, const float *alpha,
                     const uint64_t *vis, int paced, int32_t i0, int32_t i1) {
  static const float ones[PR] = {1.0f, 1.0f, 1.0f, 1.0f};
  const int32_t d = t->d, nblk = rove_q8_blocks(d), sh = i0 * b->run;
  const int32_t nb = (i1 * b->run < b->nb ? i1 * b->run : b->nb) - sh; /* keys of the runs */
  const uint64_t all = rove_rows_all(b->nb);
  const int g4 = !t->paced && b->vt == ROVE_DTYPE_F32 && d % 32 == 0;
  /* contiguous V rows (a cache) in a call longer than a block or over a paged pool: both
   * P V loops prefetch the next block's V region in address order (see below) */
  const int v_linear = b->vs == d && (t->nk > BLK || t->blocks);
  for (int32_t r0 = 0; r0 < t->nq; r0 += PR) {
    const int R = t->nq - r0 < PR ? t->nq - r0 : PR;
    int keep = 0; /* some key is hidden from some row of the panel */
    for (int r = 0; r < R; r++) keep |= vis[r0 + r] != all;
    if (g4 && R == 4 && !keep) { /* the group path, run by run */
      for (int32_t i = i0; i < i1; i++)
        rove_rows_g4_pv_f32__avx512(t->o + (int64_t)r0 * d, d, b->v[i], b->vs * 4,
                                    rove_rows_blk_len(b, i), b->run,
                                    t->scratch + r0 * BLK + i * b->run, i ? ones : alpha + r0,
                                    r0 == 0 ? b->vn[i] : NULL, v_linear, t->prefetch_l1);
      continue;
    }
    /* contiguous V rows (a cache) of whole 64-element sections in a call longer than a
     * block or over a paged pool: section s prefetches the s-th of the d / 64 equal parts
     * of the next block's V region of each run (BLK rows, or a paged run's), in address
     * order (64 ESZ bytes per key; paged blocks of 16, 32:8 x 128: 1.04-1.06x the
     * contiguous cache against 1.07-1.13x row by row); else (a short call) the lines of
     * its own columns, row by row */
    const int64_t ve = ESZ(b->vt), part = 64 * ve;
    const int linear = v_linear && d % 64 == 0;
    uint64_t vr[PR]; /* the panel's visibility from key sh on */
    for (int r = 0; r < R; r++) vr[r] = vis[r0 + r] >> sh;
    for (int32_t c = 0; c < d; c += 64) {
      __mmask16 mk[4];
      for (int x = 0; x < 4; x++) mk[x] = lanes(d - c - 16 * x);
      const char *pf[ROVE_ROWS_RUNS] = {NULL};
      for (int32_t i = i0; i < i1; i++) {
        const char *vn = r0 == 0 && paced ? b->vn[i] : NULL;
        pf[i - i0] = !vn ? NULL : linear ? vn + (int64_t)(c / 64) * b->run * part : vn + c * ve;
      }
      pv_tab[b->vt][keep][d - c < 64][R - 1](t->o + (int64_t)r0 * d, d, c, b->v + i0, b->vs,
                                             b->vsc + i0, nblk, nb, b->run_shift,
                                             t->scratch + r0 * BLK + sh, i0 ? ones : alpha + r0,
                                             mk, vr, pf, linear ? part : b->vs * ve, t->prefetch_l1);
    }
  }
}

/* One block, every row. Prefetch (rows read in place), as on AVX2 (attn_rows-avx2.c):
 *  - paced, for every call where the CPU prefers it (t->paced: Intel), else for calls
 *    with a group of 4 rows (GQA decode) and calls of at most one block of a contiguous
 *    cache: while a block is read, the next block's rows (b->kn, b->vn: this call's, or
 *    after its last block the rows of the call that follows) are prefetched, its K rows
 *    beside the first row group's scores, its V rows beside the first panel's P V, as
 *    many lines as are read of this block's.
 *  - 16-key bursts (rove_rows_burst) for the blocks of the other calls: MHA decode of
 *    fp32 rows on AMD, over a contiguous cache or a paged pool. Typed rows (bf16, f16,
 *    q8: more work per byte) measured 1.05-1.13x faster paced (Zen 4, 12 x 64, 32768
 *    keys).
 * On AMD (not t->paced), panels of 4 rows that see every key of the block take P V through
 * the GQA group path (attn_rows_g4-avx512.c: run by run, sections of 32 floats, the next
 * block's V lines a key at a time) where V is fp32: on a Zen 4, 32:8 x 128, 32768 keys,
 * one thread, 1.02-1.04x faster than pv_body, and level with the AVX2 kernel (which had
 * been 6 % faster; BENCHMARKS.md, session 22); bf16 and f16 V measured 0.95-0.97x, so
 * they stay on pv_body. The same bits either way. */
static void block(const rove_rows_args *t, const rove_rows_blk *b) {
  float alpha[ROVE_ROWS_MAX];
  uint64_t vis[ROVE_ROWS_MAX], any = 0;
  const int32_t nblk = rove_q8_blocks(t->d);
  const int paced = t->paced || t->nq >= 4 || (t->nk <= BLK && !t->blocks) ||
                    b->kt != ROVE_DTYPE_F32 || b->vt != ROVE_DTYPE_F32;
  /* Q8 scales: their own contiguous rows (nblk floats per key) */
  for (int32_t i = 0; paced && i < b->nr; i++) {
    if (b->kscn[i]) prefetch_bytes(b->kscn[i], 1, 0, b->run * 4 * nblk, t->prefetch_l1);
    if (b->vscn[i]) prefetch_bytes(b->vscn[i], 1, 0, b->run * 4 * nblk, t->prefetch_l1);
  }
  for (int32_t r = 0; r < t->nq; r++) any |= vis[r] = rove_rows_visible(t, r, b);
  block_scores(t, b, any, paced);
  for (int32_t r = 0; r < t->nq; r++)
    alpha[r] = row_softmax(t, r, b->nb, t->scratch + r * BLK, vis[r]);
  block_pv(t, b, alpha, vis, paced, 0, b->nr);
}

void rove_attn_rows_f32__avx512(const rove_rows_args *t) {
  const int32_t d = t->d;
  const int rk = t->krot && t->krot->cos, rv = t->vrot && t->vrot->cos;
  float *kscr = t->scratch + ROVE_ROWS_MAX * BLK, *vscr = kscr + BLK * d;
  for (int32_t j0 = 0; j0 < t->nk; j0 += BLK) {
    rove_rows_blk b;
    b.nb = t->nk - j0 < BLK ? t->nk - j0 : BLK;
    b.kp = t->mask ? t->k_pos + j0 : NULL;
    b.pfk = !rk, b.pfv = !rv;
    /* rows as stored (read in place, any type; runs of a paged call's blocks) and the next
     * block's rows for the paced prefetch (none for rotated rows); rotated rows are
     * widened and rotated into scratch */
    rove_rows_blk_place(t, &b, j0, !rk, !rv);
    if (rk) {
      int64_t xs;
      const float *x = rove_rows_fp32(t, t->k, t->ks, t->k_scale, t->k_type, j0, b.nb, kscr,
                                      rove_to_f32__avx512, &xs);
      rotate_rows(kscr, x, xs, b.nb, d, t->krot, j0, t->k_mul);
      b.ks = d, b.kt = ROVE_DTYPE_F32;
      rove_rows_blk_at(&b, b.k, b.ksc, kscr, d);
    }
    if (rv) {
      int64_t xs;
      const float *x = rove_rows_fp32(t, t->v, t->vs, t->v_scale, t->v_type, j0, b.nb, vscr,
                                      rove_to_f32__avx512, &xs);
      rotate_rows(vscr, x, xs, b.nb, d, t->vrot, j0, 1.0f);
      b.vs = d, b.vt = ROVE_DTYPE_F32;
      rove_rows_blk_at(&b, b.v, b.vsc, vscr, d);
    }
    block(t, &b);
  }
}

/* ---- several KV heads per call (kernels.h, rove_attn_rows_heads_fn) ------------------- */

/* The walk of rows_heads over a tile: segment s < nr nh is K's run s / nh of head s % nh,
 * then V's likewise, then the next tile's K (kn: its runs, NULL for none). Each segment is
 * a run of one head's rows, contiguous in a head-major pool. Returns segment s's first
 * row, NULL past the known ones. */
static const char *walk_segment(const rove_rows_blk *b0, const void *const *kn, int32_t nh,
                                int64_t dk, int64_t dv, int32_t s) {
  const int32_t n = b0->nr * nh;
  if (s < n) return (const char *)b0->k[s / nh] + (s % nh) * dk;
  if ((s -= n) < n) return (const char *)b0->v[s / nh] + (s % nh) * dv;
  s -= n;
  return s / nh < ROVE_ROWS_RUNS && kn[s / nh] ? (const char *)kn[s / nh] + (s % nh) * dk : NULL;
}

/* Heads [0, nh) of one call: t0 at head 0; head g's rows he elements apart (kernels.h).
 * One working copy of the arguments and of the block, whose pointers move to head g for
 * each piece of work; the scratch holds nh * nq score rows, then nh * nq alphas.
 * Prefetch: with t0->walk_ahead > 0, as it reads each segment of the walk (walk_segment) it
 * requests the segment that many bytes ahead (rounded up to whole segments), through the
 * paced prefetch of block_scores and block_pv with the walk's rows in place of the next
 * block's; else none (the walk is front to back, and one core's hardware prefetchers
 * follow it for one row). The driver chooses the distance (attention_decode.c,
 * walk_ahead). */
static void rows_heads(const rove_rows_args *t0, int32_t nh, int64_t he) {
  const int32_t d = t0->d, nq = t0->nq, nblk = rove_q8_blocks(d);
  const int64_t dk = he * rove_dtype_size(t0->k_type), dv = he * rove_dtype_size(t0->v_type);
  const int64_t dsk = he / t0->ks * nblk, dsv = he / t0->vs * nblk; /* Q8 scales per head */
  float *const s0 = t0->scratch, *const alpha = s0 + (int64_t)nh * nq * BLK;
  rove_rows_args t = *t0;
  t.k_next = t.v_next = NULL, t.k_scale_next = t.v_scale_next = NULL, t.next_nk = 0;
  for (int32_t j0 = 0; j0 < t0->nk; j0 += BLK) {
    rove_rows_blk b0, b;
    b0.nb = t0->nk - j0 < BLK ? t0->nk - j0 : BLK;
    b0.kp = t0->mask ? t0->k_pos + j0 : NULL;
    b0.pfk = b0.pfv = 0;
    const int ahead = t0->walk_ahead > 0; /* the walk's rows requested, see above */
    rove_rows_blk_place(&t, &b0, j0, ahead, ahead); /* head 0's runs, the next tile's */
    const void *kn[ROVE_ROWS_RUNS];
    for (int32_t i = 0; i < ROVE_ROWS_RUNS; i++) kn[i] = b0.kn[i], b0.kn[i] = b0.vn[i] = NULL;
    const int64_t seg = (int64_t)b0.run * d * (int64_t)rove_dtype_size(t0->k_type);
    const int32_t hd = (int32_t)((t0->walk_ahead + seg - 1) / seg); /* segments ahead */
    b = b0;
    uint64_t vis[ROVE_ROWS_MAX], any = 0; /* the same keys and rows for every head */
    for (int32_t r = 0; r < nq; r++) any |= vis[r] = rove_rows_visible(&t, r, &b0);
    /* K: run by run, every head's scores of the run's keys (block_scores on the run's
     * 16-key groups; paced, with the walk's rows ahead as the next rows, or none) */
    for (int32_t i = 0; i < b0.nr; i++) {
      const uint64_t run = rove_rows_all(rove_rows_blk_len(&b0, i)) << (i * b0.run);
      for (int32_t g = 0; g < nh; g++) {
        t.q = t0->q + (int64_t)g * nq * d, t.scratch = s0 + (int64_t)g * nq * BLK;
        b.k[i] = (const char *)b0.k[i] + g * dk;
        b.ksc[i] = b0.ksc[i] ? b0.ksc[i] + g * dsk : NULL;
        if (ahead) b.kn[i] = walk_segment(&b0, kn, nh, dk, dv, i * nh + g + hd);
        block_scores(&t, &b, any & run, 1);
      }
    }
    for (int32_t g = 0; g < nh; g++) {
      t.m = t0->m + (int64_t)g * nq, t.l = t0->l + (int64_t)g * nq;
      t.scratch = s0 + (int64_t)g * nq * BLK;
      for (int32_t r = 0; r < nq; r++)
        alpha[g * nq + r] = row_softmax(&t, r, b0.nb, t.scratch + r * BLK, vis[r]);
    }
    for (int32_t i = 0; i < b0.nr; i++) /* V: run by run likewise */
      for (int32_t g = 0; g < nh; g++) {
        t.o = t0->o + (int64_t)g * nq * d, t.scratch = s0 + (int64_t)g * nq * BLK;
        b.v[i] = (const char *)b0.v[i] + g * dv;
        b.vsc[i] = b0.vsc[i] ? b0.vsc[i] + g * dsv : NULL;
        if (ahead) b.vn[i] = walk_segment(&b0, kn, nh, dk, dv, (b0.nr + i) * nh + g + hd);
        block_pv(&t, &b, alpha + g * nq, vis, 1, i, i + 1);
      }
  }
}

void rove_attn_rows_heads_f32__avx512(const rove_rows_args *t, int32_t n_heads,
                                      int64_t head_elems) {
  /* heads per pass: as many as the scratch holds score rows and alphas for (at d = 64 and
   * one row each, 141); a pass reads each pool block once for all of its heads, so fewer
   * passes keep the walk front to back (32 x 128 in two passes of 16: 1.25x the contiguous
   * time, in one 1.03x) */
  const int64_t step = ROVE_ROWS_SCRATCH(t->d) / ((int64_t)t->nq * (BLK + 1)); /* >= 1 */
  const int32_t nblk = rove_q8_blocks(t->d);
  const int64_t ke = rove_dtype_size(t->k_type), ve = rove_dtype_size(t->v_type);
  for (int32_t g0 = 0; g0 < n_heads; g0 += (int32_t)step) {
    rove_rows_args u = *t;
    u.k = (const char *)t->k + g0 * head_elems * ke;
    u.v = (const char *)t->v + g0 * head_elems * ve;
    u.k_scale = t->k_scale ? t->k_scale + g0 * (head_elems / t->ks) * nblk : NULL;
    u.v_scale = t->v_scale ? t->v_scale + g0 * (head_elems / t->vs) * nblk : NULL;
    u.q = t->q + (int64_t)g0 * t->nq * t->d;
    u.o = t->o + (int64_t)g0 * t->nq * t->d;
    u.m = t->m + (int64_t)g0 * t->nq;
    u.l = t->l + (int64_t)g0 * t->nq;
    rows_heads(&u, n_heads - g0 < step ? n_heads - g0 : (int32_t)step, head_elems);
  }
}
