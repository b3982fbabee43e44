/* SPDX-License-Identifier: MIT */
/* AVX2 + F16C conversions between fp32 rows and the storage types (to_f32, from_f32,
 * kernels.h), 8 elements at a time, bit for bit the definitions of dtype.h:
 *   F16   vcvtph2ps / vcvtps2ph with round-to-nearest-even (both exact IEEE conversions)
 *   BF16  the 16-bit shift, and round-to-nearest-even on the integer pattern
 *   Q8    per block of 32: max |x| by vmaxps (exact in any order), q = vcvtps2dq(x * inv)
 *         (round-to-nearest-even, the MXCSR default), packed to int8; dequant (float)q * s
 * Row tails (d % 8, a short last Q8 block) go through the scalar definitions. */
#include <immintrin.h>

#include "../scalar/kernels-scalar.h"
#include "kernels-avx2.h"

void rove_to_f32__avx2(float *dst, int64_t dst_stride, const void *src, int64_t stride,
                       const float *scale, int64_t n, int32_t d, int32_t type) {
  const int32_t nb = rove_q8_blocks(d), d8 = d / 8 * 8;
  for (int64_t j = 0; j < n; j++) {
    float *o = dst + j * dst_stride;
    if (type == ROVE_DTYPE_BF16 || type == ROVE_DTYPE_F16) {
      const uint16_t *x = (const uint16_t *)src + j * stride;
      int32_t i = 0;
      if (type == ROVE_DTYPE_F16) {
        for (; i < d8; i += 8)
          _mm256_storeu_ps(o + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
        for (; i < d; i++) o[i] = rove_f16_to_f32(x[i]);
      } else {
        for (; i < d8; i += 8) {
          const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
          _mm256_storeu_ps(o + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
        }
        for (; i < d; i++) o[i] = rove_bf16_to_f32(x[i]);
      }
    } else if (type == ROVE_DTYPE_Q8) {
      const int8_t *x = (const int8_t *)src + j * stride;
      const float *sc = scale + j * nb;
      int32_t i = 0;
      for (; i < d8; i += 8) {
        const __m256i w = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(x + i)));
        const __m256 s = _mm256_set1_ps(sc[i / ROVE_Q8_BLOCK]); /* 8 | 32: one block */
        _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_cvtepi32_ps(w), s));
      }
      for (; i < d; i++) o[i] = (float)x[i] * sc[i / ROVE_Q8_BLOCK];
    } else {
      memcpy(o, (const float *)src + j * stride, sizeof(float) * (size_t)d);
    }
  }
}

/* 8 floats to bf16 (the patterns in the low halves of the 32-bit lanes); *bad |= a finite
 * value rounded to inf. */
static inline __m256i bf16x8(__m256 v, __m256i *bad) {
  const __m256i x = _mm256_castps_si256(v), one = _mm256_set1_epi32(1);
  const __m256i ax = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i nan = _mm256_cmpgt_epi32(ax, inf);
  const __m256i r = _mm256_srli_epi32(
      _mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                                           _mm256_and_si256(_mm256_srli_epi32(x, 16), one))),
      16);
  const __m256i q = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  const __m256i e = _mm256_set1_epi32(0x7f80);
  const __m256i finite = _mm256_cmpgt_epi32(inf, ax);
  *bad = _mm256_or_si256(*bad, _mm256_and_si256(finite, _mm256_cmpeq_epi32(_mm256_and_si256(r, e), e)));
  return _mm256_blendv_epi8(r, q, nan);
}

/* Lanes of a (32-bit, values < 2^16) packed to 8 uint16 in order. */
static inline __m128i pack16(__m256i a) {
  return _mm_packus_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
}

/* One full Q8 block of 32 values; returns 1 if one is not finite (then q = 0, scale 0). */
static int q8_block32(int8_t *q, float *scale, const float *x) {
  const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(INFINITY);
  __m256 v[4], mx = _mm256_setzero_ps(), fin = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  for (int k = 0; k < 4; k++) {
    v[k] = _mm256_loadu_ps(x + 8 * k);
    const __m256 a = _mm256_and_ps(v[k], absm);
    fin = _mm256_and_ps(fin, _mm256_cmp_ps(a, inf, _CMP_LT_OQ)); /* false for NaN */
    mx = _mm256_max_ps(mx, a);
  }
  if (_mm256_movemask_ps(fin) != 0xff) {
    memset(q, 0, ROVE_Q8_BLOCK);
    *scale = 0.0f;
    return 1;
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
  float inv;
  rove_q8_scale(_mm_cvtss_f32(m4), scale, &inv);
  const __m256 iv = _mm256_set1_ps(inv);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  __m256i w[4];
  for (int k = 0; k < 4; k++)
    w[k] = _mm256_min_epi32(hi, _mm256_max_epi32(lo, _mm256_cvtps_epi32(_mm256_mul_ps(v[k], iv))));
  /* packs interleave 128-bit lanes: dwords come out as v0lo v1lo v2lo v3lo v0hi ... */
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(w[0], w[1]), _mm256_packs_epi32(w[2], w[3]));
  _mm256_storeu_si256((__m256i *)q,
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  return 0;
}

int rove_from_f32__avx2(void *dst, int64_t stride, float *scale, const float *src,
                        int64_t src_stride, int64_t n, int32_t d, int32_t type) {
  const int32_t nb = rove_q8_blocks(d), d8 = d / 8 * 8;
  int bad = 0;
  for (int64_t j = 0; j < n; j++) {
    const float *x = src + j * src_stride;
    if (type == ROVE_DTYPE_BF16 || type == ROVE_DTYPE_F16) {
      uint16_t *o = (uint16_t *)dst + j * stride;
      int32_t i = 0;
      if (type == ROVE_DTYPE_F16) {
        const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
        const __m256 big = _mm256_set1_ps(65520.0f), inf = _mm256_set1_ps(INFINITY);
        __m256 badv = _mm256_setzero_ps();
        for (; i < d8; i += 8) {
          const __m256 v = _mm256_loadu_ps(x + i), a = _mm256_and_ps(v, absm);
          badv = _mm256_or_ps(badv, _mm256_and_ps(_mm256_cmp_ps(a, big, _CMP_GE_OQ),
                                                  _mm256_cmp_ps(a, inf, _CMP_LT_OQ)));
          _mm_storeu_si128((__m128i *)(o + i),
                           _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
        bad |= _mm256_movemask_ps(badv) != 0;
      } else {
        __m256i badv = _mm256_setzero_si256();
        for (; i < d8; i += 8)
          _mm_storeu_si128((__m128i *)(o + i), pack16(bf16x8(_mm256_loadu_ps(x + i), &badv)));
        bad |= !_mm256_testz_si256(badv, badv);
      }
      if (i < d) bad |= rove_from_f32__scalar(o + i, 0, NULL, x + i, 0, 1, d - i, type);
    } else if (type == ROVE_DTYPE_Q8) {
      int8_t *o = (int8_t *)dst + j * stride;
      float *sc = scale + j * nb;
      for (int32_t b = 0; b < nb; b++) {
        const int32_t i0 = b * ROVE_Q8_BLOCK;
        if (d - i0 >= ROVE_Q8_BLOCK)
          bad |= q8_block32(o + i0, sc + b, x + i0);
        else /* the short last block */
          bad |= rove_from_f32__scalar(o + i0, 0, sc + b, x + i0, 0, 1, d - i0, type);
      }
    } else {
      memcpy((float *)dst + j * stride, x, sizeof(float) * (size_t)d);
    }
  }
  return bad;
}
