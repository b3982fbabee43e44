/* SPDX-License-Identifier: MIT */
/* rove_selective_angles_backward (include/rove.h, "Selective RoPE").
 *
 * The forward, per (batch row, row entry j = head * n_pairs + k): c_t = c_in + sum_{s<=t}
 * phi_s and angles_t = temp_k c_t, carry_out = c_{T-1}. With g_t = temp_k dangles_t
 * (dLoss / d c_t) plus d_carry_out at t = T-1:
 *   d phi_s  = sum_{t>=s} g_t            (a reverse running sum, in double)
 *   d c_in   = d phi_0                   (c_in enters every c_t)
 *   d temp_k = sum over batch, tokens and heads of dangles_t c_t
 * Layouts as the forward's: [batch][seq_len][row] and [batch][row] (packed: sequence b is
 * tokens cu[b] .. cu[b+1]-1 of one row, carry row b). Each (batch row,
 * entry) is one reverse sweep over the tokens; d_temp is summed afterwards over batch,
 * head and token in that fixed order (one thread: the call is O(batch seq_len row), a
 * fraction of the attention it feeds). */
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "util.h"
#include "selective.h"

static int finite_f(const float *v, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, v + i, sizeof u);
    if ((u & 0x7F800000u) == 0x7F800000u) return 0;
  }
  return 1;
}

/* rove_selective_angles_backward (cu NULL: batch rows of seq_len tokens) and its packed
 * form (cu: batch sequences, seq_len tokens in all, sequence b tokens cu[b] .. cu[b+1]-1
 * with carry row b). */
static rove_status angles_backward(int32_t batch, int32_t seq_len, const int32_t *cu,
                                   int32_t n_heads, int32_t n_pairs, const float *phi,
                                   const double *temp, const double *carry_in,
                                   const double *d_angles, const double *d_carry_out,
                                   float *d_phi, double *d_carry_in, double *d_temp) {
  if (!phi || !d_angles || !d_phi || batch <= 0 || seq_len <= 0 || n_heads <= 0 || n_pairs <= 0)
    return ROVE_ERR_INVALID_ARGUMENT;
  int64_t row, bt, total, carry;
  if (!rove_mul_i64(n_heads, n_pairs, &row) || !rove_mul_i64(cu ? 1 : batch, seq_len, &bt) ||
      !rove_mul_i64(bt, row, &total) || !rove_mul_i64(batch, row, &carry) ||
      total > INT64_MAX / (int64_t)sizeof(double))
    return ROVE_ERR_SIZE_OVERFLOW;
  const size_t nf = (size_t)total * sizeof(float), nd = (size_t)total * sizeof(double);
  const size_t nc = (size_t)carry * sizeof(double), nt = (size_t)n_pairs * sizeof(double);
  const size_t ncu = cu ? ((size_t)batch + 1) * sizeof(int32_t) : 0;
  /* outputs must not overlap an input or each other */
  const void *in[6] = {phi, temp, carry_in, d_angles, d_carry_out, cu};
  const size_t inb[6] = {nf, temp ? nt : 0, carry_in ? nc : 0, nd, d_carry_out ? nc : 0, ncu};
  void *out[3] = {d_phi, d_carry_in, d_temp};
  const size_t outb[3] = {nf, d_carry_in ? nc : 0, d_temp ? nt : 0};
  for (int o = 0; o < 3; o++) {
    for (int i = 0; i < 6; i++)
      if (rove_overlap(out[o], outb[o], in[i], inb[i])) return ROVE_ERR_INVALID_ARGUMENT;
    for (int o2 = 0; o2 < o; o2++)
      if (rove_overlap(out[o], outb[o], out[o2], outb[o2])) return ROVE_ERR_INVALID_ARGUMENT;
  }
  double *tp = NULL;
  if (!temp) {
    tp = rove_alloc((size_t)n_pairs * sizeof(double));
    if (!tp) return ROVE_ERR_OUT_OF_MEMORY;
    rove_selective_temp_default(n_pairs, tp);
    temp = tp;
  }
  /* the forward's rules for its inputs */
  if (!rove_angles_finite(temp, n_pairs) || (carry_in && !rove_angles_finite(carry_in, carry)) ||
      !finite_f(phi, total)) {
    rove_free(tp);
    return ROVE_ERR_INVALID_ARGUMENT;
  }
  double *dt = NULL;
  if (d_temp) {
    dt = calloc((size_t)carry, sizeof(double)); /* per (batch, entry) partial sums */
    if (!dt) {
      rove_free(tp);
      return ROVE_ERR_OUT_OF_MEMORY;
    }
  }
  for (int64_t b = 0; b < batch; b++) {
    const int64_t t0 = rove_seq_start(cu, b, seq_len), len = rove_seq_len(cu, b, seq_len);
    for (int64_t j = 0; j < row; j++) {
      const double tk = temp[j % n_pairs];
      const double *da = d_angles + t0 * row + j;
      const float *ph = phi + t0 * row + j;
      float *dp = d_phi + t0 * row + j;
      double r = d_carry_out ? d_carry_out[b * row + j] : 0.0;
      for (int64_t t = len - 1; t >= 0; t--) {
        r += tk * da[t * row];
        dp[t * row] = (float)r;
      }
      if (d_carry_in) d_carry_in[b * row + j] = r;
      if (dt) { /* d temp_k: sum_t dangles_t c_t, c_t recomputed forward in double */
        double c = carry_in ? carry_in[b * row + j] : 0.0, s = 0.0;
        for (int64_t t = 0; t < len; t++) {
          c += (double)ph[t * row];
          s += da[t * row] * c;
        }
        dt[b * row + j] = s;
      }
    }
  }
  if (d_temp) {
    for (int32_t k = 0; k < n_pairs; k++) d_temp[k] = 0.0;
    for (int64_t b = 0; b < batch; b++)
      for (int64_t j = 0; j < row; j++) d_temp[j % n_pairs] += dt[b * row + j];
    free(dt);
  }
  rove_free(tp);
  return ROVE_OK;
}

rove_status rove_selective_angles_backward(int32_t batch, int32_t seq_len, int32_t n_heads,
                                           int32_t n_pairs, const float *phi, const double *temp,
                                           const double *carry_in, const double *d_angles,
                                           const double *d_carry_out, float *d_phi,
                                           double *d_carry_in, double *d_temp) {
  return angles_backward(batch, seq_len, NULL, n_heads, n_pairs, phi, temp, carry_in, d_angles,
                         d_carry_out, d_phi, d_carry_in, d_temp);
}

rove_status rove_selective_angles_packed_backward(int32_t n_seqs, const int32_t *cu_seqlens,
                                                  int32_t n_heads, int32_t n_pairs,
                                                  const float *phi, const double *temp,
                                                  const double *carry_in,
                                                  const double *d_angles,
                                                  const double *d_carry_out, float *d_phi,
                                                  double *d_carry_in, double *d_temp) {
  int64_t total = 0;
  if (n_seqs <= 0 || !rove_check_cu(cu_seqlens, n_seqs, &total) || total <= 0)
    return ROVE_ERR_INVALID_ARGUMENT;
  return angles_backward(n_seqs, (int32_t)total, cu_seqlens, n_heads, n_pairs, phi, temp,
                         carry_in, d_angles, d_carry_out, d_phi, d_carry_in, d_temp);
}
