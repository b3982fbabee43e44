/* Portable reference decode row kernel (attn_rows, kernels.h): nq query rows against nk
 * keys and values read in place, key j at k + j * ks, value j at v + j * vs.
 *
 * The keys are walked in blocks of ROVE_ROWS_BLOCK; per block and query row, the online
 * softmax update of attn_tile-scalar.c with running max m and sum l:
 *   m' = max(m, max_j s_j);  alpha = exp(m - m');  p_j = exp(s_j - m')
 *   l = alpha l + sum_j p_j;  o = alpha o + sum_j p_j v_j
 * A row that sees no key of a block is left as it is (m = -inf, l = 0, o = 0 until its
 * first visible key). With krot / vrot, each block's keys / values are first rotated into
 * scratch by the reference rotation. */
#include <math.h>
#include <stddef.h>

#include "../kernels.h"
#include "../mask.h"

static float dot(const float *a, const float *b, int32_t d) {
  float acc = 0.0f;
  for (int32_t i = 0; i < d; i++) acc += a[i] * b[i];
  return acc;
}

/* One block of keys for query row r: nb keys at k (stride ks), values at v (stride vs),
 * positions kp; s: nb floats of scratch. */
typedef struct blk {
  const float *k, *v;
  int64_t ks, vs;
  const int32_t *kp;
  int32_t nb;
} blk;

static void row_block(const rove_rows_args *t, int32_t r, const blk *b, float *s) {
  const int32_t d = t->d;
  const float *q = t->q + (int64_t)r * d;
  float row_max = -INFINITY;
  for (int32_t j = 0; j < b->nb; j++) {
    float x = -INFINITY;
    if (!t->mask || rove_visible(t->q_pos[r], b->kp[j], t->causal, t->window)) {
      x = dot(q, b->k + j * b->ks, d);
      if (t->softcap > 0.0f) x = t->softcap * tanhf(x / t->softcap);
    }
    s[j] = x;
    row_max = fmaxf(row_max, x);
  }
  if (row_max == -INFINITY) return; /* nothing visible in this block */
  const float m_new = fmaxf(t->m[r], row_max);
  const float alpha = expf(t->m[r] - m_new); /* exp(-inf) = 0 on the first visible block */
  float sum = 0.0f;
  for (int32_t j = 0; j < b->nb; j++) {
    s[j] = expf(s[j] - m_new);
    sum += s[j];
  }
  float *o = t->o + (int64_t)r * d;
  for (int32_t c = 0; c < d; c++) o[c] *= alpha;
  for (int32_t j = 0; j < b->nb; j++) {
    const float *v = b->v + j * b->vs;
    for (int32_t c = 0; c < d; c++) o[c] += s[j] * v[c];
  }
  t->l[r] = t->l[r] * alpha + sum;
  t->m[r] = m_new;
}

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
    blk b = {t->k + j0 * t->ks, t->v + j0 * t->vs, t->ks, t->vs, kp,
             t->nk - j0 < ROVE_ROWS_BLOCK ? t->nk - j0 : ROVE_ROWS_BLOCK};
    if (t->krot && t->krot->cos)
      b.k = rotated(kscr, t->k, t->ks, j0, b.nb, d, t->krot, t->k_mul), b.ks = d;
    if (t->vrot && t->vrot->cos)
      b.v = rotated(vscr, t->v, t->vs, j0, b.nb, d, t->vrot, 1.0f), b.vs = d;
    for (int32_t r = 0; r < t->nq; r++) row_block(t, r, &b, t->scratch);
  }
}
