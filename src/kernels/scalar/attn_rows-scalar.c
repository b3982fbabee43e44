/* SPDX-License-Identifier: MIT */
/* Portable reference decode row kernel (attn_rows, kernels.h): nq query rows against nk
 * keys and values read in place, key j at k + j * ks, value j at v + j * vs.
 *
 * The keys are walked in blocks of ROVE_ROWS_BLOCK; per block and query row, the reference
 * online softmax update of softmax-scalar.h (shared with attn_tile-scalar.c). With krot /
 * vrot, each block's keys / values are first rotated into scratch by the reference
 * rotation. */
#include <stddef.h>

#include "kernels-scalar.h"
#include "softmax-scalar.h"

/* Rows j0 .. j0 + n - 1 of x (stride xs) rotated by rows j0.. of *rot into dst [n][d]
 * (rot->cos NULL: copied); returns dst. */
static const float *rotated(float *dst, const float *x, int64_t xs, int32_t j0, int32_t n,
                            int32_t d, const rove_rot *rot, float mul) {
  rove_rot r = *rot;
  if (r.cos) r.cos += j0 * rove_rot_stride(&r), r.sin += j0 * rove_rot_stride(&r);
  rove_rotate_f32__scalar(dst, d, x + j0 * xs, xs, n, d, &r, mul, 1.0f, 0);
  return dst;
}

void rove_attn_rows_f32__scalar(const rove_rows_args *t) {
  const int32_t d = t->d;
  float *kscr = t->scratch + ROVE_ROWS_MAX * ROVE_ROWS_BLOCK, *vscr = kscr + ROVE_ROWS_BLOCK * d;
  for (int32_t j0 = 0; j0 < t->nk; j0 += ROVE_ROWS_BLOCK) {
    const int32_t *kp = t->mask ? t->k_pos + j0 : NULL;
    rove_scalar_keys b = {t->k + j0 * t->ks, t->v + j0 * t->vs, t->ks, t->vs, kp,
                          t->nk - j0 < ROVE_ROWS_BLOCK ? t->nk - j0 : ROVE_ROWS_BLOCK,
                          t->mask, t->causal, t->window, t->softcap};
    if (t->krot && t->krot->cos)
      b.k = rotated(kscr, t->k, t->ks, j0, b.nb, d, t->krot, t->k_mul), b.ks = d;
    if (t->vrot && t->vrot->cos)
      b.v = rotated(vscr, t->v, t->vs, j0, b.nb, d, t->vrot, 1.0f), b.vs = d;
    for (int32_t r = 0; r < t->nq; r++)
      rove_scalar_softmax_row(t->q + (int64_t)r * d, t->mask ? t->q_pos[r] : 0, &b, d,
                              t->o + (int64_t)r * d, t->m + r, t->l + r, t->scratch);
  }
}
