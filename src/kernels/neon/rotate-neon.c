/* SPDX-License-Identifier: MIT */
/* NEON rotation of Q/V rows (rove_rotate_f32__neon) and rotate-and-pack of K rows
 * (rove_pack_k_f32__neon).
 *
 * Pair k of a row is (x[k], x[k+half]) for HALF pairing and (x[2k], x[2k+1]) for
 * INTERLEAVED; R maps (a, b) -> (a c - b s, a s + b c), the inverse negates s. cos and sin
 * are scaled by rot_mul first, exactly as the scalar reference does. Every loop reads and
 * writes a row only inside its d floats (4-lane bodies, scalar tails), and each element is
 * read before it is written, so dst == src works.
 *
 * Packed-K layout (private to NEON): a tile of 64 keys is 4 groups of 16 keys; a group is
 * [d][16] floats (dim-major), so the Q K^T microkernel loads the 16 keys of one dim as four
 * q registers. Key j, dim c sits at (j / 16) * 16 d + c * 16 + j % 16. */
#include <arm_neon.h>
#include <string.h>

#include "rotate-neon.h"

#define KG ROVE_NEON_KGROUP

/* HALF pairing: a and b are contiguous runs, so 4 pairs per vector with no shuffle. */
static void rot_half(float *y, const float *x, int32_t half, const float *c, const float *s,
                     float cm, float sm) {
  int32_t k = 0;
  for (; k + 4 <= half; k += 4) {
    const float32x4_t a = vld1q_f32(x + k), b = vld1q_f32(x + half + k);
    const float32x4_t cs = vmulq_n_f32(vld1q_f32(c + k), cm);
    const float32x4_t sn = vmulq_n_f32(vld1q_f32(s + k), sm);
    vst1q_f32(y + k, vfmsq_f32(vmulq_f32(a, cs), b, sn));        /* a c - b s */
    vst1q_f32(y + half + k, vfmaq_f32(vmulq_f32(b, cs), a, sn)); /* b c + a s */
  }
  for (; k < half; k++) {
    const float a = x[k], b = x[half + k], cs = c[k] * cm, sn = s[k] * sm;
    y[k] = a * cs - b * sn;
    y[half + k] = a * sn + b * cs;
  }
}

/* INTERLEAVED pairing: ld2 splits 4 pairs into a vector of a's and one of b's, st2 joins
 * them again, so the arithmetic is the same as for HALF pairing. */
static void rot_inter(float *y, const float *x, int32_t half, const float *c, const float *s,
                      float cm, float sm) {
  int32_t k = 0;
  for (; k + 4 <= half; k += 4) {
    const float32x4x2_t ab = vld2q_f32(x + 2 * k);
    const float32x4_t cs = vmulq_n_f32(vld1q_f32(c + k), cm);
    const float32x4_t sn = vmulq_n_f32(vld1q_f32(s + k), sm);
    float32x4x2_t out;
    out.val[0] = vfmsq_f32(vmulq_f32(ab.val[0], cs), ab.val[1], sn);
    out.val[1] = vfmaq_f32(vmulq_f32(ab.val[1], cs), ab.val[0], sn);
    vst2q_f32(y + 2 * k, out);
  }
  for (; k < half; k++) {
    const float a = x[2 * k], b = x[2 * k + 1], cs = c[k] * cm, sn = s[k] * sm;
    y[2 * k] = a * cs - b * sn;
    y[2 * k + 1] = a * sn + b * cs;
  }
}

/* y[i] = x[i] * mul for i in [0, n). */
static void scale_run(float *y, const float *x, int32_t n, float mul) {
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4);
    vst1q_f32(y + i, vmulq_n_f32(a, mul));
    vst1q_f32(y + i + 4, vmulq_n_f32(b, mul));
  }
  if (i + 4 <= n) {
    vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(x + i), mul));
    i += 4;
  }
  for (; i < n; i++) y[i] = x[i] * mul;
}

void rove_neon_rotate_row(float *y, const float *x, int32_t d, const rove_rot *rot,
                          const float *c, const float *s, float rot_mul, float pass_mul,
                          int inverse) {
  if (!c) {
    scale_run(y, x, d, pass_mul);
    return;
  }
  if (rot->first) { /* ROVE_ROTARY_LAST: the leading pass-through dims (kernels.h) */
    const int32_t f = rot->first;
    scale_run(y, x, f, pass_mul);
    y += f, x += f, d -= f;
  }
  const float sm = inverse ? -rot_mul : rot_mul;
  if (rot->pairing == ROVE_PAIRING_HALF)
    rot_half(y, x, rot->half, c, s, rot_mul, sm);
  else
    rot_inter(y, x, rot->half, c, s, rot_mul, sm);
  scale_run(y + 2 * rot->half, x + 2 * rot->half, d - 2 * rot->half, pass_mul);
}

void rove_rotate_f32__neon(float *dst, int64_t dst_stride, const float *src,
                           int64_t src_stride, int64_t n, int32_t d, const rove_rot *rot,
                           float rot_mul, float pass_mul, int inverse) {
  for (int64_t i = 0; i < n; i++) {
    const float *c = rot->cos ? rot->cos + i * rove_rot_stride(rot) : NULL;
    const float *s = rot->cos ? rot->sin + i * rove_rot_stride(rot) : NULL;
    rove_neon_rotate_row(dst + i * dst_stride, src + i * src_stride, d, rot, c, s, rot_mul,
                         pass_mul, inverse);
  }
}

/* Transpose the 4x4 block rows[r][0 .. 4) (row stride ld) into out[cc * 16 + r]. */
static void transpose4_store(float *out, const float *rows, int32_t ld) {
  const float32x4_t r0 = vld1q_f32(rows), r1 = vld1q_f32(rows + ld);
  const float32x4_t r2 = vld1q_f32(rows + 2 * ld), r3 = vld1q_f32(rows + 3 * ld);
  /* t0 = (r0[0] r1[0] r0[2] r1[2]), t1 = (r0[1] r1[1] r0[3] r1[3]), t2/t3 likewise */
  const float64x2_t t0 = vreinterpretq_f64_f32(vtrn1q_f32(r0, r1));
  const float64x2_t t1 = vreinterpretq_f64_f32(vtrn2q_f32(r0, r1));
  const float64x2_t t2 = vreinterpretq_f64_f32(vtrn1q_f32(r2, r3));
  const float64x2_t t3 = vreinterpretq_f64_f32(vtrn2q_f32(r2, r3));
  vst1q_f32(out, vreinterpretq_f32_f64(vtrn1q_f64(t0, t2)));
  vst1q_f32(out + KG, vreinterpretq_f32_f64(vtrn1q_f64(t1, t3)));
  vst1q_f32(out + 2 * KG, vreinterpretq_f32_f64(vtrn2q_f64(t0, t2)));
  vst1q_f32(out + 3 * KG, vreinterpretq_f32_f64(vtrn2q_f64(t1, t3)));
}

/* Where key j0 (a multiple of 4) starts in the packed layout. */
static float *group_at(float *dst, int64_t j0, int32_t d) {
  return dst + (j0 / KG) * KG * (int64_t)d + j0 % KG;
}

/* Keys j0 .. j0+3 of the packed tile(s): rotate into tmp (zero rows past n), transpose. */
static void pack4(float *dst, float *tmp, const float *src, int64_t src_stride, int64_t j0,
                  int64_t n, int32_t d, const rove_rot *rot, float rot_mul) {
  for (int64_t r = 0; r < 4; r++) {
    float *y = tmp + r * d;
    const int64_t j = j0 + r;
    if (j >= n) {
      memset(y, 0, (size_t)d * sizeof(float));
      continue;
    }
    const float *c = rot->cos ? rot->cos + j * rove_rot_stride(rot) : NULL;
    const float *s = rot->cos ? rot->sin + j * rove_rot_stride(rot) : NULL;
    rove_neon_rotate_row(y, src + j * src_stride, d, rot, c, s, rot_mul, 1.0f, 0);
  }
  float *g = group_at(dst, j0, d);
  int32_t c = 0;
  for (; c + 4 <= d; c += 4) transpose4_store(g + c * KG, tmp + c, d);
  for (; c < d; c++)
    for (int r = 0; r < 4; r++) g[c * KG + r] = tmp[r * d + c];
}

void rove_pack_k_f32__neon(float *dst, const float *src, int64_t src_stride, int64_t n,
                           int32_t d, const rove_rot *rot, float rot_mul) {
  float tmp[4 * ROVE_MAX_HEAD_DIM] __attribute__((aligned(16)));
  const int64_t padded = (n + ROVE_NEON_TILE_KV - 1) / ROVE_NEON_TILE_KV * ROVE_NEON_TILE_KV;
  for (int64_t j0 = 0; j0 < padded; j0 += 4) {
    if (j0 >= n) { /* four padding keys: zero their lanes of every dim */
      float *g = group_at(dst, j0, d);
      for (int32_t c = 0; c < d; c++) vst1q_f32(g + c * KG, vdupq_n_f32(0.0f));
      continue;
    }
    pack4(dst, tmp, src, src_stride, j0, n, d, rot, rot_mul);
  }
}
