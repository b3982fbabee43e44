/* SPDX-License-Identifier: MIT */
/* Selective RoPE oracles (see selective_oracle.h). Slow and plain on purpose. */
#include "selective_oracle.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void rove_oracle_selective_temperatures(int32_t n_pairs, double *temp) {
  const long double ln_theta = logl(500000.0L);
  for (int32_t k = 0; k < n_pairs; k++)
    temp[k] = (double)expl(-(2.0L * k / (2.0L * n_pairs)) * ln_theta);
}

/* (hi, lo) += x exactly (Knuth's TwoSum, then renormalised). */
static void dd_add(double *hi, double *lo, double x) {
  const double s = *hi + x, bb = s - *hi;
  const double err = (*hi - (s - bb)) + (x - bb);
  const double l = *lo + err;
  *hi = s + l;
  *lo = l - (*hi - s);
}

/* temp * (hi + lo), rounded once (up to ~1 ulp): the exact product of temp and hi by fma. */
static double dd_scale(double temp, double hi, double lo) {
  const double p = temp * hi, e = fma(temp, hi, -p);
  return p + (e + temp * lo);
}

int rove_oracle_selective_angles(int32_t batch, int32_t seq_len, int32_t n_heads,
                                 int32_t n_pairs, const float *phi, const double *temp,
                                 const double *carry_in, double *carry_out, double *angles) {
  const int64_t row = (int64_t)n_heads * n_pairs;
  double *tt = malloc(sizeof(double) * (size_t)n_pairs);
  double *hi = malloc(sizeof(double) * (size_t)row), *lo = malloc(sizeof(double) * (size_t)row);
  if (!tt || !hi || !lo) {
    free(tt), free(hi), free(lo);
    return -1;
  }
  if (temp)
    memcpy(tt, temp, sizeof(double) * (size_t)n_pairs);
  else
    rove_oracle_selective_temperatures(n_pairs, tt);
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t j = 0; j < row; j++) {
      hi[j] = carry_in ? carry_in[b * row + j] : 0.0;
      lo[j] = 0.0;
    }
    for (int64_t t = 0; t < seq_len; t++)
      for (int64_t j = 0; j < row; j++) {
        const int64_t at = (b * seq_len + t) * row + j;
        dd_add(&hi[j], &lo[j], (double)phi[at]);
        angles[at] = dd_scale(tt[j % n_pairs], hi[j], lo[j]);
      }
    if (carry_out)
      for (int64_t j = 0; j < row; j++) carry_out[b * row + j] = hi[j] + lo[j];
  }
  free(tt), free(hi), free(lo);
  return 0;
}

static double odot(const float *a, const double *u, int32_t n) {
  double s = 0.0;
  for (int32_t i = 0; i < n; i++) s += (double)a[i] * u[i];
  return s;
}

/* z of every (token, pair) of head h in batch row b: z[t][k]. */
static void phase_z(const rove_selective_phase_weights *w, int64_t b, int64_t h, int32_t T,
                    const float *x, int64_t xs, double *u, double *z, double *gate) {
  const int32_t D = w->in_dim, P = w->n_pairs;
  for (int64_t t = 0; t < T; t++) {
    const float *xh = x + (b * T + t) * xs + h * D;
    double nrm = 0.0;
    for (int32_t i = 0; i < D; i++) nrm += (double)xh[i] * xh[i];
    nrm = sqrt(nrm);
    for (int32_t i = 0; i < D; i++) u[i] = xh[i] / (nrm > 1e-12 ? nrm : 1e-12);
    for (int32_t k = 0; k < P; k++) {
      const float *wr = w->w + (h * P + k) * D;
      double wn = 0.0;
      for (int32_t i = 0; i < D; i++) wn += (double)wr[i] * wr[i];
      wn = sqrt(wn);
      const double g = w->gain ? w->gain[h * P + k] : 1.0;
      z[t * P + k] = wn > 0.0 ? g * odot(wr, u, D) / wn : 0.0;
    }
    if (!w->gate_w && !w->gate_b) {
      gate[t] = 1.0;
    } else {
      double a = w->gate_b ? w->gate_b[h] : 0.0;
      if (w->gate_w) a += odot(w->gate_w + h * D, u, D);
      gate[t] = 1.0 / (1.0 + exp(-a));
    }
  }
}

int rove_oracle_selective_phase(const rove_selective_phase_weights *w, int32_t batch,
                                int32_t seq_len, const float *x, int64_t x_stride,
                                const float *conv_state, double *phi) {
  const int32_t H = w->n_heads, P = w->n_pairs, T = seq_len;
  const int64_t xs = x_stride ? x_stride : (int64_t)H * w->in_dim;
  double *u = malloc(sizeof(double) * (size_t)w->in_dim);
  double *z = malloc(sizeof(double) * (size_t)(T + 3) * (size_t)P); /* 3 history rows first */
  double *gate = malloc(sizeof(double) * (size_t)T);
  if (!u || !z || !gate) {
    free(u), free(z), free(gate);
    return -1;
  }
  for (int64_t b = 0; b < batch; b++)
    for (int64_t h = 0; h < H; h++) {
      for (int32_t k = 0; k < P; k++)
        for (int j = 0; j < 3; j++)
          z[j * P + k] = conv_state ? conv_state[((b * H + h) * P + k) * 3 + j] : 0.0;
      phase_z(w, b, h, T, x, xs, u, z + 3 * P, gate);
      for (int64_t t = 0; t < T; t++)
        for (int32_t k = 0; k < P; k++) {
          const int64_t hk = h * P + k;
          double y = w->conv_b ? w->conv_b[hk] : 0.0;
          for (int j = 0; j < 4; j++) y += (double)w->conv_w[hk * 4 + j] * z[(t + j) * P + k];
          const double silu = y / (1.0 + exp(-y));
          phi[((b * T + t) * H + h) * P + k] = silu * gate[t];
        }
    }
  free(u), free(z), free(gate);
  return 0;
}
