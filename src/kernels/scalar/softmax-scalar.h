/* SPDX-License-Identifier: MIT */
/* The reference online-softmax update, the one version used by the scalar flash tile
 * (attn_tile-scalar.c) and the scalar decode row kernel (attn_rows-scalar.c).
 *
 * One query row q against nb keys (key j at k + j * ks, value j at v + j * vs, position
 * kp[j]) with running max m, sum l and accumulator o[d]:
 *   s_j = q . k_j (softcap: c tanh(s_j / c)), -inf when masked
 *   m' = max(m, max_j s_j);  alpha = exp(m - m');  p_j = exp(s_j - m')
 *   l = alpha l + sum_j p_j;  o = alpha o + sum_j p_j v_j
 * A row that sees no visible key among the nb is left as it is (m = -inf, l = 0, o = 0
 * until its first visible key). s: nb floats of scratch.
 *
 * Hidden keys (masked by causality or the window) never touch the row: their score is
 * -inf by selection (K is not read) and their V row is not multiplied in (0 * NaN would be
 * NaN), so whatever their K/V rows hold cannot reach the result. A NaN score of a visible
 * key (NaN in q or its K row) poisons the row: o = NaN in every dim, l = NaN, m = +inf,
 * the state a +inf score reaches by itself (exp(inf - inf) = NaN). Every later update,
 * split merge and the finish keep it NaN (m = +inf survives fmaxf; alpha = exp(inf - x)
 * multiplies o and l). Every ISA's attn_tile and attn_rows end in this same state. */
#ifndef ROVE_SOFTMAX_SCALAR_H
#define ROVE_SOFTMAX_SCALAR_H

#include <math.h>
#include <stdint.h>

#include "../mask.h"

static inline float rove_scalar_dot(const float *a, const float *b, int32_t d) {
  float acc = 0.0f;
  for (int32_t i = 0; i < d; i++) acc += a[i] * b[i];
  return acc;
}

/* The softcap c tanh(x / c) of the reference, evaluated in double and rounded once: x / c
 * is a normal double for every float x and c > 0 (a float division underflows to a
 * denormal, losing bits, once c > 2^126 |x|), and the double tanh is far below float
 * rounding, so the result is the correctly rounded value (up to a double rounding) for
 * every x and c; tiny x / c gives x itself. NaN stays NaN, +-inf gives +-c. */
static inline float rove_scalar_softcap(float x, float c) {
  return (float)((double)c * tanh((double)x / (double)c));
}

typedef struct rove_scalar_keys {
  const float *k, *v;
  int64_t ks, vs;
  const int32_t *kp; /* read only when mask */
  int32_t nb, mask, causal, window;
  float softcap;
} rove_scalar_keys;

static inline int rove_scalar_hidden(const rove_scalar_keys *b, int32_t qp, int32_t j) {
  return b->mask && !rove_visible(qp, b->kp[j], b->causal, b->window);
}

/* The poisoned state of a row (see the top of the file). */
static inline void rove_scalar_poison(int32_t d, float *o, float *m, float *l) {
  for (int32_t c = 0; c < d; c++) o[c] = NAN;
  *l = NAN;
  *m = INFINITY;
}

static inline void rove_scalar_softmax_row(const float *q, int32_t qp, const rove_scalar_keys *b,
                                           int32_t d, float *o, float *m, float *l, float *s) {
  float row_max = -INFINITY;
  int nan = 0;
  for (int32_t j = 0; j < b->nb; j++) {
    float x = -INFINITY; /* hidden: -inf by selection, K not read */
    if (!rove_scalar_hidden(b, qp, j)) {
      x = rove_scalar_dot(q, b->k + j * b->ks, d);
      if (b->softcap > 0.0f) x = rove_scalar_softcap(x, b->softcap);
      nan |= x != x;
    }
    s[j] = x;
    row_max = fmaxf(row_max, x);
  }
  if (nan) {
    rove_scalar_poison(d, o, m, l);
    return;
  }
  if (row_max == -INFINITY) return; /* nothing visible among these keys */
  const float m_new = fmaxf(*m, row_max);
  const float alpha = expf(*m - m_new); /* exp(-inf) = 0 on the first visible keys */
  float sum = 0.0f;
  for (int32_t j = 0; j < b->nb; j++) {
    s[j] = expf(s[j] - m_new);
    sum += s[j];
  }
  for (int32_t c = 0; c < d; c++) o[c] *= alpha;
  for (int32_t j = 0; j < b->nb; j++) {
    if (rove_scalar_hidden(b, qp, j)) continue; /* p = 0 exactly, and V may be garbage */
    const float *v = b->v + j * b->vs;
    for (int32_t c = 0; c < d; c++) o[c] += s[j] * v[c];
  }
  *l = *l * alpha + sum;
  *m = m_new;
}

#endif
