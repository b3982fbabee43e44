/* SPDX-License-Identifier: MIT */
/* AVX-512 (F/DQ/VL/BW) + F16C conversions between fp32 rows and the storage types (to_f32,
 * from_f32, kernels.h), 16 elements at a time, bit for bit the definitions of dtype.h:
 *   F16   vcvtph2ps / vcvtps2ph with round-to-nearest-even (both exact IEEE conversions)
 *   BF16  the 16-bit shift, and round-to-nearest-even on the integer pattern
 *   Q8    per block of 32 (two zmm): max |x| by vmaxps (exact in any order), q =
 *         vcvtps2dq(x * inv) (round-to-nearest-even, the MXCSR default), clamped and
 *         narrowed to int8; dequant (float)q * s
 * Row tails (d % 16) and a short last Q8 block use masked loads and stores: masked-off
 * lanes load as 0, which changes neither a block's max |x| nor its finiteness. */
#include <immintrin.h>

#include "kernels-avx512.h"

/* Lanes [0, n) of 16 (n <= 16). */
static inline __mmask16 lanes(int32_t n) { return (__mmask16)((1u << n) - 1u); }

/* 16 elements (masked: the lanes of mk, a row's tail) of row x of type `type` at element i
 * to fp32 at o + i. Whole vectors use plain loads and stores: on Zen 4 / 5 masked ones in
 * these loops cost ~12 % of a bf16 prefill (1024 x 12 x 64). */
static inline __attribute__((always_inline)) void to_f32_16(float *o, const void *x, int32_t i,
                                                            const float *sc, int32_t type,
                                                            __mmask16 mk, const int masked) {
  __m512 y;
  if (type == ROVE_DTYPE_F16 || type == ROVE_DTYPE_BF16) {
    const uint16_t *h = (const uint16_t *)x + i;
    const __m256i w = masked ? _mm256_maskz_loadu_epi16(mk, h) : _mm256_loadu_si256((const __m256i *)h);
    y = type == ROVE_DTYPE_F16
            ? _mm512_cvtph_ps(w)
            : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(w), 16));
  } else if (type == ROVE_DTYPE_Q8) { /* 16 | 32: one block */
    const int8_t *q = (const int8_t *)x + i;
    const __m128i w = masked ? _mm_maskz_loadu_epi8(mk, q) : _mm_loadu_si128((const __m128i *)q);
    y = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(w)),
                      _mm512_set1_ps(sc[i / ROVE_Q8_BLOCK]));
  } else {
    const float *f = (const float *)x + i;
    y = masked ? _mm512_maskz_loadu_ps(mk, f) : _mm512_loadu_ps(f);
  }
  if (masked)
    _mm512_mask_storeu_ps(o + i, mk, y);
  else
    _mm512_storeu_ps(o + i, y);
}

void rove_to_f32__avx512(float *dst, int64_t dst_stride, const void *src, int64_t stride,
                         const float *scale, int64_t n, int32_t d, int32_t type) {
  const int32_t nb = rove_q8_blocks(d);
  const int64_t es = rove_dtype_size(type);
  for (int64_t j = 0; j < n; j++) {
    float *o = dst + j * dst_stride;
    const void *x = (const char *)src + j * stride * es;
    const float *sc = type == ROVE_DTYPE_Q8 ? scale + j * nb : NULL;
    int32_t i = 0;
    for (; i + 16 <= d; i += 16) to_f32_16(o, x, i, sc, type, 0xFFFF, 0);
    if (i < d) to_f32_16(o, x, i, sc, type, lanes(d - i), 1);
  }
}

/* 16 floats to bf16 (the patterns in the low halves of the 32-bit lanes); *bad |= the lanes
 * where a finite value rounded to inf. */
static inline __m512i bf16x16(__m512 v, __mmask16 *bad) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i ax = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
  const __m512i inf = _mm512_set1_epi32(0x7f800000), e = _mm512_set1_epi32(0x7f80);
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(ax, inf), finite = _mm512_cmplt_epi32_mask(ax, inf);
  const __m512i hi = _mm512_srli_epi32(x, 16);
  const __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                           _mm512_and_si512(hi, _mm512_set1_epi32(1)))),
      16);
  *bad |= _mm512_mask_cmpeq_epi32_mask(finite, _mm512_and_si512(r, e), e);
  return _mm512_mask_blend_epi32(nan, r, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
}

/* One Q8 block of n <= 32 values; returns 1 if one is not finite (then q = 0, scale 0). */
static int q8_block(int8_t *q, float *scale, const float *x, int32_t n) {
  const __mmask16 m0 = lanes(n < 16 ? n : 16), m1 = lanes(n > 16 ? n - 16 : 0);
  const __m512 v0 = _mm512_maskz_loadu_ps(m0, x), v1 = _mm512_maskz_loadu_ps(m1, x + 16);
  const __m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1), inf = _mm512_set1_ps(INFINITY);
  /* not (a < inf): inf or NaN (masked-off lanes are 0) */
  if ((__mmask16)(_mm512_cmp_ps_mask(a0, inf, _CMP_LT_OQ) &
                  _mm512_cmp_ps_mask(a1, inf, _CMP_LT_OQ)) != 0xffff) {
    memset(q, 0, (size_t)n);
    *scale = 0.0f;
    return 1;
  }
  float inv;
  rove_q8_scale(_mm512_reduce_max_ps(_mm512_max_ps(a0, a1)), scale, &inv);
  const __m512 iv = _mm512_set1_ps(inv);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  const __m512i w0 =
      _mm512_min_epi32(hi, _mm512_max_epi32(lo, _mm512_cvtps_epi32(_mm512_mul_ps(v0, iv))));
  const __m512i w1 =
      _mm512_min_epi32(hi, _mm512_max_epi32(lo, _mm512_cvtps_epi32(_mm512_mul_ps(v1, iv))));
  _mm512_mask_cvtepi32_storeu_epi8(q, m0, w0);
  _mm512_mask_cvtepi32_storeu_epi8(q + 16, m1, w1);
  return 0;
}

int rove_from_f32__avx512(void *dst, int64_t stride, float *scale, const float *src,
                          int64_t src_stride, int64_t n, int32_t d, int32_t type) {
  const int32_t nb = rove_q8_blocks(d);
  int bad = 0;
  for (int64_t j = 0; j < n; j++) {
    const float *x = src + j * src_stride;
    if (type == ROVE_DTYPE_F16) {
      uint16_t *o = (uint16_t *)dst + j * stride;
      const __m512 big = _mm512_set1_ps(65520.0f), inf = _mm512_set1_ps(INFINITY);
      __mmask16 badm = 0;
      for (int32_t i = 0; i < d; i += 16) {
        const int full = d - i >= 16; /* plain loads / stores but for the tail */
        const __mmask16 mk = lanes(full ? 16 : d - i);
        const __m512 v = full ? _mm512_loadu_ps(x + i) : _mm512_maskz_loadu_ps(mk, x + i);
        const __m512 a = _mm512_abs_ps(v);
        badm |= _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(a, big, _CMP_GE_OQ), a, inf, _CMP_LT_OQ);
        const __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        if (full)
          _mm256_storeu_si256((__m256i *)(o + i), h);
        else
          _mm256_mask_storeu_epi16(o + i, mk, h);
      }
      bad |= badm != 0;
    } else if (type == ROVE_DTYPE_BF16) {
      uint16_t *o = (uint16_t *)dst + j * stride;
      __mmask16 badm = 0;
      for (int32_t i = 0; i < d; i += 16) {
        const int full = d - i >= 16;
        const __mmask16 mk = lanes(full ? 16 : d - i);
        const __m512 v = full ? _mm512_loadu_ps(x + i) : _mm512_maskz_loadu_ps(mk, x + i);
        const __m256i h = _mm512_cvtepi32_epi16(bf16x16(v, &badm)); /* in register */
        if (full)
          _mm256_storeu_si256((__m256i *)(o + i), h);
        else
          _mm256_mask_storeu_epi16(o + i, mk, h);
      }
      bad |= badm != 0;
    } else if (type == ROVE_DTYPE_Q8) {
      int8_t *o = (int8_t *)dst + j * stride;
      float *sc = scale + j * nb;
      for (int32_t b = 0; b < nb; b++) {
        const int32_t i0 = b * ROVE_Q8_BLOCK;
        bad |= q8_block(o + i0, sc + b, x + i0, d - i0 < ROVE_Q8_BLOCK ? d - i0 : ROVE_Q8_BLOCK);
      }
    } else {
      memcpy((float *)dst + j * stride, x, sizeof(float) * (size_t)d);
    }
  }
  return bad;
}
