/* Portable reference flash tile: S = Q K^T for nq x nk, mask, online softmax, O += P V.
 *
 * Online softmax per query row i with running max m_i and sum l_i:
 *   m' = max(m_i, max_j s_ij);  alpha = exp(m_i - m');  p_ij = exp(s_ij - m')
 *   l_i = alpha l_i + sum_j p_ij;  o_i = alpha o_i + sum_j p_ij v_j
 * A row that has seen no visible key keeps m_i = -inf, l_i = 0, o_i = 0. */
#include <math.h>

#include "../kernels.h"
#include "../mask.h"

static float dot(const float *a, const float *b, int32_t d) {
  float acc = 0.0f;
  for (int32_t i = 0; i < d; i++) acc += a[i] * b[i];
  return acc;
}

void rove_attn_tile_f32__scalar(const rove_tile_args *t) {
  const int32_t d = t->d;
  float *s = t->scratch;
  for (int32_t i = 0; i < t->nq; i++) {
    float row_max = -INFINITY;
    for (int32_t j = 0; j < t->nk; j++) {
      float x = -INFINITY;
      if (!t->mask || rove_visible(t->q_pos[i], t->k_pos[j], t->causal, t->window)) {
        x = dot(t->q + (int64_t)i * d, t->k + (int64_t)j * d, d);
        if (t->softcap > 0.0f) x = t->softcap * tanhf(x / t->softcap);
      }
      s[j] = x;
      row_max = fmaxf(row_max, x);
    }
    if (row_max == -INFINITY) continue;  /* nothing visible in this tile */
    const float m_new = fmaxf(t->m[i], row_max);
    const float alpha = expf(t->m[i] - m_new);  /* exp(-inf) = 0 on the first visible tile */
    float sum = 0.0f;
    for (int32_t j = 0; j < t->nk; j++) {
      s[j] = expf(s[j] - m_new);
      sum += s[j];
    }
    float *o = t->o + (int64_t)i * d;
    for (int32_t c = 0; c < d; c++) o[c] *= alpha;
    for (int32_t j = 0; j < t->nk; j++) {
      const float *v = t->v + (int64_t)j * d;
      for (int32_t c = 0; c < d; c++) o[c] += s[j] * v[c];
    }
    t->l[i] = t->l[i] * alpha + sum;
    t->m[i] = m_new;
  }
}
