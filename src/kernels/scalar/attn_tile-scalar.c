/* SPDX-License-Identifier: MIT */
/* Portable reference flash tile: S = Q K^T for nq x nk, mask, online softmax, O += P V,
 * row by row with the reference update of softmax-scalar.h (packed K is [tile_kv][d] rows
 * in the scalar layout, V [nk][d]). */
#include "kernels-scalar.h"
#include "softmax-scalar.h"

void rove_attn_tile_f32__scalar(const rove_tile_args *t) {
  const int32_t d = t->d;
  const rove_scalar_keys b = {t->k, t->v, d, d, t->k_pos, t->nk, t->mask, t->causal, t->window,
                              t->softcap};
  for (int32_t i = 0; i < t->nq; i++)
    rove_scalar_softmax_row(t->q + (int64_t)i * d, t->mask ? t->q_pos[i] : 0, &b, d,
                            t->o + (int64_t)i * d, t->m + i, t->l + i, t->scratch);
}
