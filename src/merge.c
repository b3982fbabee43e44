/* SPDX-License-Identifier: MIT */
/* rove_merge_partials(_sinks): the exact LSE merge of partial attentions (rove.h has the
 * math). One pass over the rows of (batch, head, query): the parts' LSEs give the weights
 * e^{L_p - max}, their output rows are summed in double in part order, then divided and
 * rounded once. An attention sink s_h joins the maximum and adds e^{s_h - max} to the
 * denominator only (its value is zero), once, after the parts. Row r = (b, h, i) of the LSE arrays is ((b H) + h) q_len + i; its output
 * row starts at ((b q_len + i) H + h) head_dim. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rove.h"
#include "util.h"

static rove_status check(int32_t n_parts, const float *const *outs, const float *const *lses,
                         int32_t batch, int32_t q_len, int32_t n_heads, int32_t head_dim,
                         const float *sinks, const float *out, const float *lse,
                         int64_t *rows) {
  if (n_parts < 1 || !outs || !lses || !out) return ROVE_ERR_INVALID_ARGUMENT;
  if (batch <= 0 || q_len <= 0 || n_heads <= 0 || head_dim <= 0 || head_dim > ROVE_MAX_HEAD_DIM)
    return ROVE_ERR_INVALID_ARGUMENT;
  for (int32_t p = 0; p < n_parts; p++)
    if (!outs[p] || !lses[p]) return ROVE_ERR_INVALID_ARGUMENT;
  int64_t n_out;
  if (!rove_mul_i64((int64_t)batch * q_len, n_heads, rows) ||
      !rove_mul_i64(*rows, head_dim, &n_out) || n_out > INT64_MAX / 8)
    return ROVE_ERR_SIZE_OVERFLOW;
  const int64_t ob = n_out * 4, lb = *rows * 4;
  for (int32_t p = 0; p < n_parts; p++) {
    const int in_place_o = p == 0 && outs[0] == out, in_place_l = p == 0 && lses[0] == lse;
    if (!in_place_o && rove_overlap(out, (size_t)ob, outs[p], (size_t)ob))
      return ROVE_ERR_INVALID_ARGUMENT;
    if (rove_overlap(out, (size_t)ob, lses[p], (size_t)lb)) return ROVE_ERR_INVALID_ARGUMENT;
    if (!in_place_l && rove_overlap(lse, (size_t)lb, lses[p], (size_t)lb))
      return ROVE_ERR_INVALID_ARGUMENT;
    if (rove_overlap(lse, (size_t)lb, outs[p], (size_t)ob)) return ROVE_ERR_INVALID_ARGUMENT;
  }
  if (rove_overlap(out, (size_t)ob, lse, (size_t)lb)) return ROVE_ERR_INVALID_ARGUMENT;
  if (sinks) { /* finite, and read for every row: no output over them */
    const size_t sb = (size_t)n_heads * sizeof(float);
    for (int32_t h = 0; h < n_heads; h++)
      if (!isfinite(sinks[h])) return ROVE_ERR_INVALID_ARGUMENT;
    if (rove_overlap(out, (size_t)ob, sinks, sb) || rove_overlap(lse, (size_t)lb, sinks, sb))
      return ROVE_ERR_INVALID_ARGUMENT;
  }
  /* the pointer arrays are read again for every row, after earlier rows were written */
  const size_t pb = (size_t)n_parts * sizeof(const float *);
  if (rove_overlap(out, (size_t)ob, outs, pb) || rove_overlap(out, (size_t)ob, lses, pb) ||
      rove_overlap(lse, (size_t)lb, outs, pb) || rove_overlap(lse, (size_t)lb, lses, pb))
    return ROVE_ERR_INVALID_ARGUMENT;
  return ROVE_OK;
}

rove_status rove_merge_partials_sinks(int32_t n_parts, const float *const *outs,
                                      const float *const *lses, int32_t batch, int32_t q_len,
                                      int32_t n_heads, int32_t head_dim, const float *sinks,
                                      float *out, float *lse) {
  int64_t rows = 0;
  const rove_status st =
      check(n_parts, outs, lses, batch, q_len, n_heads, head_dim, sinks, out, lse, &rows);
  if (st != ROVE_OK) return st;
  double acc[ROVE_MAX_HEAD_DIM];
  const int64_t H = n_heads, L = q_len, d = head_dim;
  for (int64_t r = 0; r < rows; r++) {
    const int64_t b = r / (H * L), h = (r / L) % H, i = r % L;
    const int64_t e = ((b * L + i) * H + h) * d;
    double m = sinks ? (double)sinks[h] : -INFINITY;
    int nan = 0;
    for (int32_t p = 0; p < n_parts; p++) {
      const float x = lses[p][r];
      if (x != x)
        nan = 1;
      else if (x > m)
        m = x;
    }
    float *o = out + e;
    if (nan || m == INFINITY) { /* +inf: an infinite logit, as NaN as the forward's */
      for (int64_t c = 0; c < d; c++) o[c] = NAN;
      if (lse) lse[r] = NAN;
      continue;
    }
    if (m == -INFINITY) {
      memset(o, 0, (size_t)d * sizeof(float));
      if (lse) lse[r] = -INFINITY;
      continue;
    }
    double sum = sinks ? exp((double)sinks[h] - m) : 0.0;
    memset(acc, 0, (size_t)d * sizeof(double));
    for (int32_t p = 0; p < n_parts; p++) {
      const float x = lses[p][r];
      if (x == -INFINITY) continue;
      const double w = exp((double)x - m);
      const float *op = outs[p] + e;
      sum += w;
      for (int64_t c = 0; c < d; c++) acc[c] += w * op[c];
    }
    for (int64_t c = 0; c < d; c++) o[c] = (float)(acc[c] / sum);
    if (lse) lse[r] = (float)(m + log(sum));
  }
  return ROVE_OK;
}

rove_status rove_merge_partials(int32_t n_parts, const float *const *outs, const float *const *lses,
                                int32_t batch, int32_t q_len, int32_t n_heads, int32_t head_dim,
                                float *out, float *lse) {
  return rove_merge_partials_sinks(n_parts, outs, lses, batch, q_len, n_heads, head_dim, NULL,
                                   out, lse);
}
