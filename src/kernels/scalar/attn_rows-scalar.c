/* SPDX-License-Identifier: MIT */
/* Portable reference decode row kernel (attn_rows, kernels.h): nq query rows against nk
 * keys and values read in place, key j at k + j * ks, value j at v + j * vs.
 *
 * The keys are walked in blocks of ROVE_ROWS_BLOCK; per block and query row, the reference
 * online softmax update of softmax-scalar.h (shared with attn_tile-scalar.c). Typed rows
 * (bf16, f16, q8) are first widened into scratch; with krot / vrot, each block's fp32 keys
 * / values are rotated into scratch by the reference rotation. */
#include <stddef.h>

#include "kernels-scalar.h"
#include "softmax-scalar.h"

/* The n rows at x (stride xs) rotated by table rows j0.. of *rot into dst [n][d]
 * (rot->cos NULL: copied; dst == x is fine); returns dst. */
static const float *rotated(float *dst, const float *x, int64_t xs, int32_t j0, int32_t n,
                            int32_t d, const rove_rot *rot, float mul) {
  rove_rot r = *rot;
  if (r.cos) r.cos += j0 * rove_rot_stride(&r), r.sin += j0 * rove_rot_stride(&r);
  rove_rotate_f32__scalar(dst, d, x, xs, n, d, &r, mul, 1.0f, 0);
  return dst;
}

void rove_attn_rows_f32__scalar(const rove_rows_args *t) {
  const int32_t d = t->d;
  float *kscr = t->scratch + ROVE_ROWS_MAX * ROVE_ROWS_BLOCK, *vscr = kscr + ROVE_ROWS_BLOCK * d;
  for (int32_t j0 = 0; j0 < t->nk; j0 += ROVE_ROWS_BLOCK) {
    const int32_t *kp = t->mask ? t->k_pos + j0 : NULL;
    const int32_t nb = t->nk - j0 < ROVE_ROWS_BLOCK ? t->nk - j0 : ROVE_ROWS_BLOCK;
    rove_scalar_keys b = {NULL, NULL, 0, 0, kp, nb, t->mask, t->causal, t->window, t->softcap};
    b.k = rove_rows_fp32(t, t->k, t->ks, t->k_scale, t->k_type, j0, nb, kscr, rove_to_f32__scalar, &b.ks);
    b.v = rove_rows_fp32(t, t->v, t->vs, t->v_scale, t->v_type, j0, nb, vscr, rove_to_f32__scalar, &b.vs);
    if (t->krot && t->krot->cos)
      b.k = rotated(kscr, b.k, b.ks, j0, nb, d, t->krot, t->k_mul), b.ks = d;
    if (t->vrot && t->vrot->cos)
      b.v = rotated(vscr, b.v, b.vs, j0, nb, d, t->vrot, 1.0f), b.vs = d;
    for (int32_t r = 0; r < t->nq; r++)
      rove_scalar_softmax_row(t->q + (int64_t)r * d, t->mask ? t->q_pos[r] : 0, &b, d,
                              t->o + (int64_t)r * d, t->m + r, t->l + r, t->scratch);
  }
}
