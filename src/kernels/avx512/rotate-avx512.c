/* SPDX-License-Identifier: MIT */
/* AVX-512 rotation of head rows (Q, V, output) and rotate-and-pack of K.
 *
 * Pairs (docs/DESIGN.md §1): HALF pairs x[k] with x[k + half], INTERLEAVED pairs x[2k] with
 * x[2k+1]; R maps (a, b) -> (a cos - b sin, a sin + b cos), the inverse negates sin.
 * rot_mul scales the rotated dims [first, first + 2*half), pass_mul the others (every dim
 * when there is no rotation). Rows are strided views into user memory: every load and store
 * is masked to the row's own floats, never past them. dst == src is allowed: each step
 * loads all it reads before it stores, and steps touch disjoint floats. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels-avx512.h"

static inline __mmask16 tail16(int32_t n) { /* lanes 0 .. n-1 (n <= 16) */
  return (__mmask16)(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
}

/* Source rows are strided views (one head of a token row, the next row a few KB on) that
 * come from L3 or memory with little help from the hardware prefetchers. Each row is
 * requested ROVE_PREFETCH_ROWS rows ahead, also past the last row of the call: callers
 * walk K and V in consecutive chunks, so those are the next call's rows. A prefetch never
 * faults, so the address is formed as an integer and may lie past the buffer. Not when
 * rot->cached: GLA reads whole token runs it requests itself, and writes back from
 * scratch rows 16 KB apart, where 16 rows ahead is no row of the call at all. */
#define ROVE_PREFETCH_ROWS 16
static inline void prefetch_row(const float *x, int64_t rows_ahead, int64_t stride, int32_t d) {
  const uintptr_t p = (uintptr_t)x + (uintptr_t)rows_ahead * (uintptr_t)stride * sizeof(float);
  for (int32_t i = 0; i < d; i += 16)
    _mm_prefetch((const char *)(p + 4u * (uintptr_t)i), _MM_HINT_T0);
}

/* y[0..n) = x[0..n) * mul. */
static void scale_span(float *y, const float *x, int32_t n, float mul) {
  const __m512 m = _mm512_set1_ps(mul);
  int32_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), m));
  if (i < n) {
    const __mmask16 k = tail16(n - i);
    _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), m));
  }
}

#define ROVE_LOAD(masked, m, p) ((masked) ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p))
#define ROVE_STORE(masked, m, p, v) \
  ((masked) ? _mm512_mask_storeu_ps(p, m, v) : _mm512_storeu_ps(p, v))

/* HALF pairing, pairs k .. k+15 (lanes m): a from x[k..], b from x[k+half..]. rm and sm
 * are rot_mul and +-rot_mul (the sign of sin). Full steps are unmasked. */
static inline __attribute__((always_inline)) void half_step(
    float *y, const float *x, int32_t half, const float *c, const float *s, __m512 rm,
    __m512 sm, int32_t k, __mmask16 m, const int masked) {
  const __m512 a = ROVE_LOAD(masked, m, x + k), b = ROVE_LOAD(masked, m, x + k + half);
  const __m512 cs = _mm512_mul_ps(ROVE_LOAD(masked, m, c + k), rm);
  const __m512 sn = _mm512_mul_ps(ROVE_LOAD(masked, m, s + k), sm);
  ROVE_STORE(masked, m, y + k, _mm512_fmsub_ps(a, cs, _mm512_mul_ps(b, sn)));
  ROVE_STORE(masked, m, y + k + half, _mm512_fmadd_ps(a, sn, _mm512_mul_ps(b, cs)));
}

static void rotate_half(float *y, const float *x, int32_t half, const float *c,
                        const float *s, float rot_mul, float sgn) {
  const __m512 rm = _mm512_set1_ps(rot_mul), sm = _mm512_set1_ps(sgn);
  int32_t k = 0;
  for (; k + 16 <= half; k += 16) half_step(y, x, half, c, s, rm, sm, k, 0xFFFF, 0);
  if (k < half) half_step(y, x, half, c, s, rm, sm, k, tail16(half - k), 1);
}

/* INTERLEAVED pairing, pairs k .. k+7 (16 floats). With cos/sin duplicated to both lanes
 * of a pair, cd = [c0 c0 c1 c1 ..], sd = [-s0 s0 -s1 s1 ..] and the pair-swapped row
 * xs = [b0 a0 b1 a1 ..]:  y = x * cd + xs * sd  gives (a c - b s, b c + a s). */
static inline __attribute__((always_inline)) void interleaved_step(
    float *y, const float *x, const float *c, const float *s, __m512 rm, __m512 sm,
    int32_t k, __mmask16 mp, __mmask16 mx, const int masked) {
  const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m512 xv = ROVE_LOAD(masked, mx, x + 2 * k);
#define ROVE_LOAD8(p) \
  _mm512_castps256_ps512(masked ? _mm256_maskz_loadu_ps((__mmask8)mp, p) : _mm256_loadu_ps(p))
  const __m512 c8 = ROVE_LOAD8(c + k), s8 = ROVE_LOAD8(s + k);
#undef ROVE_LOAD8
  const __m512 cd = _mm512_mul_ps(_mm512_permutexvar_ps(dup, c8), rm);
  const __m512 sd = _mm512_mul_ps(_mm512_permutexvar_ps(dup, s8), sm);
  const __m512 xs = _mm512_permute_ps(xv, 0xB1); /* swap the two floats of each pair */
  ROVE_STORE(masked, mx, y + 2 * k, _mm512_fmadd_ps(xv, cd, _mm512_mul_ps(xs, sd)));
}

static void rotate_interleaved(float *y, const float *x, int32_t half, const float *c,
                               const float *s, float rot_mul, float sgn) {
  const __m512 rm = _mm512_set1_ps(rot_mul);
  const __m512 alt = _mm512_set_ps(1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1);
  const __m512 sm = _mm512_mul_ps(_mm512_set1_ps(sgn), alt);
  int32_t k = 0;
  for (; k + 8 <= half; k += 8) interleaved_step(y, x, c, s, rm, sm, k, 0xFF, 0xFFFF, 0);
  if (k < half)
    interleaved_step(y, x, c, s, rm, sm, k, tail16(half - k), tail16(2 * (half - k)), 1);
}

/* One row: the pass-through dims before the rotated block (rot->first, kernels.h), the
 * rotated dims, then the pass-through dims after them. c, s are this row's [half] tables. */
static void rotate_row(float *y, const float *x, int32_t d, const rove_rot *rot, const float *c,
                       const float *s, float rot_mul, float pass_mul, int inverse) {
  if (rot->first) { /* ROVE_ROTARY_LAST */
    const int32_t f = rot->first;
    scale_span(y, x, f, pass_mul);
    y += f, x += f, d -= f;
  }
  const float sgn = inverse ? -rot_mul : rot_mul;
  if (rot->pairing == ROVE_PAIRING_HALF)
    rotate_half(y, x, rot->half, c, s, rot_mul, sgn);
  else
    rotate_interleaved(y, x, rot->half, c, s, rot_mul, sgn);
  const int32_t r = 2 * rot->half;
  if (r < d) scale_span(y + r, x + r, d - r, pass_mul);
}

void rove_rotate_f32__avx512(float *dst, int64_t dst_stride, const float *src,
                             int64_t src_stride, int64_t n, int32_t d, const rove_rot *rot,
                             float rot_mul, float pass_mul, int inverse) {
  const int pf = src_stride != 0 && !rot->cached;
  for (int64_t i = 0; i < n && i < ROVE_PREFETCH_ROWS && pf; i++)
    prefetch_row(src, i, src_stride, d);
  for (int64_t i = 0; i < n; i++) {
    float *y = dst + i * dst_stride;
    const float *x = src + i * src_stride;
    if (pf) prefetch_row(x, ROVE_PREFETCH_ROWS, src_stride, d);
    if (!rot->cos)
      scale_span(y, x, d, pass_mul);
    else
      rotate_row(y, x, d, rot, rot->cos + i * rove_rot_stride(rot), rot->sin + i * rove_rot_stride(rot), rot_mul,
                 pass_mul, inverse);
  }
}

/* Transpose a [16][d] block of rows (row stride ld) into columns j0 .. j0+15 of a packed
 * tile [d][TK]. Each 16x16 sub-block is transposed in registers:
 *   1. unpack lo/hi ps of rows (2i, 2i+1): 2x2 blocks inside each 128-bit lane;
 *   2. unpack lo/hi pd of those: vector 4g + perm[e] now holds, in 128-bit lane L,
 *      column 4L+e of rows 4g .. 4g+3 (perm = {0, 2, 1, 3});
 *   3. two rounds of 128-bit lane shuffles gather lane L of the four row groups g into
 *      one vector: column 4L+e of all 16 rows.
 * The d % 16 tail dims are copied one float at a time. */
static void transpose16_into_tile(float *tile, int32_t j0, const float *rows, int32_t ld,
                                  int32_t d) {
  const int64_t TK = ROVE_AVX512_TK;
  static const int perm[4] = {0, 2, 1, 3};
  int32_t c = 0;
  for (; c + 16 <= d; c += 16) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(rows + (int64_t)i * ld + c);
    for (int i = 0; i < 16; i += 2) {
      t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4)
      for (int h = 0; h < 2; h++) {
        const __m512d a = _mm512_castps_pd(t[i + h]), b = _mm512_castps_pd(t[i + 2 + h]);
        r[i + h] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        r[i + 2 + h] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
      }
    for (int e = 0; e < 4; e++) {
      const __m512 g0 = r[perm[e]], g1 = r[4 + perm[e]], g2 = r[8 + perm[e]], g3 = r[12 + perm[e]];
      const __m512 alo = _mm512_shuffle_f32x4(g0, g1, 0x88);
      const __m512 ahi = _mm512_shuffle_f32x4(g0, g1, 0xDD);
      const __m512 blo = _mm512_shuffle_f32x4(g2, g3, 0x88);
      const __m512 bhi = _mm512_shuffle_f32x4(g2, g3, 0xDD);
      t[e] = _mm512_shuffle_f32x4(alo, blo, 0x88);      /* lane 0: column e      */
      t[e + 8] = _mm512_shuffle_f32x4(alo, blo, 0xDD);  /* lane 2: column 8 + e  */
      t[e + 4] = _mm512_shuffle_f32x4(ahi, bhi, 0x88);  /* lane 1: column 4 + e  */
      t[e + 12] = _mm512_shuffle_f32x4(ahi, bhi, 0xDD); /* lane 3: column 12 + e */
    }
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(tile + (c + i) * TK + j0, t[i]);
  }
  for (; c < d; c++)
    for (int i = 0; i < 16; i++) tile[c * TK + j0 + i] = rows[(int64_t)i * ld + c];
}

/* Packed K: tile t of TK keys is [d][TK] (see kernels-avx512.h). Keys are rotated 16 at a
 * time into a row-major scratch block (rows past n zeroed), which is then transposed into
 * the tile; for d > 256 the block is one row at a time so the scratch stays 16 KB. */
void rove_pack_k_f32__avx512(float *dst, const float *src, int64_t src_stride, int64_t n,
                             int32_t d, const rove_rot *rot, float rot_mul) {
  const int64_t TK = ROVE_AVX512_TK, padded = (n + TK - 1) / TK * TK;
  float tmp[16 * 256] __attribute__((aligned(64)));
  for (int64_t j0 = 0; j0 < padded; j0 += 16) {
    float *tile = dst + j0 / TK * TK * d;
    const int32_t jt = (int32_t)(j0 % TK);
    const int32_t nr = (int32_t)(n - j0 < 0 ? 0 : n - j0 < 16 ? n - j0 : 16); /* real rows */
    rove_rot r = *rot;
    if (r.cos && nr > 0) r.cos += j0 * rove_rot_stride(&r), r.sin += j0 * rove_rot_stride(&r);
    if (d <= 256) {
      if (nr > 0)
        rove_rotate_f32__avx512(tmp, d, src + j0 * src_stride, src_stride, nr, d, &r, rot_mul,
                                1.0f, 0);
      memset(tmp + (int64_t)nr * d, 0, sizeof(float) * (size_t)((16 - nr) * d));
      transpose16_into_tile(tile, jt, tmp, d, d);
      continue;
    }
    for (int32_t i = 0; i < 16; i++) {
      if (i < nr) {
        rove_rotate_f32__avx512(tmp, d, src + (j0 + i) * src_stride, src_stride, 1, d, &r,
                                rot_mul, 1.0f, 0);
        if (r.cos) r.cos += rove_rot_stride(&r), r.sin += rove_rot_stride(&r);
      } else {
        memset(tmp, 0, sizeof(float) * (size_t)d);
      }
      for (int32_t c = 0; c < d; c++) tile[c * TK + jt + i] = tmp[c];
    }
  }
}
