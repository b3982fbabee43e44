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

/* ---- the phase network, from the equations of the reference module (SelectiveRoPE in
 * selective_rope/modules/rotary.py of the official code; docs/DESIGN.md §1): whole
 * arrays per batch row, every step in double, no float rounding anywhere. */

static double odot(const float *a, const double *v, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += (double)a[i] * v[i];
  return s;
}

/* y = M v for an nn.Linear weight M [rows][n]. */
static void olinear(const float *m, int64_t rows, int64_t n, const double *v, double *y) {
  for (int64_t j = 0; j < rows; j++) y[j] = odot(m + j * n, v, n);
}

static double osigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }

/* z [H*P] and the gate of one token (gate [H or H*P], untouched without a gate). */
static void phase_token(const rove_selective_phase_weights *w, const float *x, double *u,
                        double *mid, double *z, double *gate) {
  const int64_t H = w->n_heads, D = w->in_dim, P = w->n_pairs, d = H * D, hp = H * P;
  for (int64_t h = 0; h < H; h++) { /* fla l2_norm: x / sqrt(sum x^2 + eps), per head */
    double ss = 0.0;
    for (int64_t i = 0; i < D; i++) ss += (double)x[h * D + i] * x[h * D + i];
    for (int64_t i = 0; i < D; i++) u[h * D + i] = x[h * D + i] / sqrt(ss + w->norm_eps);
  }
  if (w->projection == ROVE_PHASE_PROJ_LOW_RANK) { /* Linear(d, R) then Linear(R, H*P) */
    olinear(w->proj_down, w->proj_rank, d, u, mid);
    olinear(w->proj_up, hp, w->proj_rank, mid, z);
  } else { /* ChunkedLinear: scalar[h] * F.normalize(weight[h], dim=in) */
    for (int64_t h = 0; h < H; h++)
      for (int64_t k = 0; k < P; k++) {
        const float *col = w->proj_w + (h * P + k) * D;
        double nn = 0.0;
        for (int64_t i = 0; i < D; i++) nn += (double)col[i] * col[i];
        nn = sqrt(nn);
        const double g = w->proj_gain ? w->proj_gain[h] : 1.0;
        z[h * P + k] = g * odot(col, u + h * D, D) / (nn > 1e-12 ? nn : 1e-12);
      }
  }
  if (w->gate == ROVE_PHASE_GATE_NONE) return;
  const int64_t ng = w->gate == ROVE_PHASE_GATE_GLA ? hp : H;
  if (w->gate == ROVE_PHASE_GATE_STANDARD) {
    olinear(w->gate_w, ng, d, u, gate);
  } else {
    olinear(w->gate_down, w->gate_rank, d, u, mid);
    olinear(w->gate_w, ng, w->gate_rank, mid, gate);
  }
  for (int64_t j = 0; j < ng; j++) gate[j] = osigmoid(gate[j] + (w->gate_b ? w->gate_b[j] : 0.0));
}

int rove_oracle_selective_phase(const rove_selective_phase_weights *w, int32_t batch,
                                int32_t seq_len, const float *x, int64_t x_stride,
                                const float *conv_state, double *phi) {
  const int64_t H = w->n_heads, P = w->n_pairs, T = seq_len, hp = H * P, d = H * w->in_dim;
  const int64_t W = w->skip_conv ? 2 : w->conv_width, S = W - 1; /* skip_conv: width 2 */
  const int64_t xs = x_stride ? x_stride : d;
  const int64_t rank = w->proj_rank > w->gate_rank ? w->proj_rank : w->gate_rank;
  double *u = malloc(sizeof(double) * (size_t)d), *mid = malloc(sizeof(double) * (size_t)rank);
  double *z = malloc(sizeof(double) * (size_t)((T + S) * hp)); /* S history rows first */
  double *gate = malloc(sizeof(double) * (size_t)(T * hp));
  if (!u || !mid || !z || !gate) {
    free(u), free(mid), free(z), free(gate);
    return -1;
  }
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t j = 0; j < S; j++) /* history z(-S) .. z(-1) */
      for (int64_t c = 0; c < hp; c++)
        z[j * hp + c] = conv_state ? conv_state[(b * hp + c) * S + j] : 0.0;
    for (int64_t t = 0; t < T; t++)
      phase_token(w, x + (b * T + t) * xs, u, mid, z + (S + t) * hp, gate + t * hp);
    for (int64_t t = 0; t < T; t++)
      for (int64_t c = 0; c < hp; c++) {
        const double *zc = z + t * hp + c; /* zc[j * hp] = z(t - S + j) */
        double y;
        if (w->skip_conv) { /* phi - [0, phi[:-1]] along time */
          y = zc[hp] - zc[0];
        } else { /* ShortConvolution: depthwise causal conv, then the activation */
          y = w->conv_b ? w->conv_b[c] : 0.0;
          for (int64_t j = 0; j < W; j++) y += (double)w->conv_w[c * W + j] * zc[j * hp];
          if (w->conv_act == ROVE_PHASE_ACT_SILU) y = y * osigmoid(y);
        }
        if (w->exp_bias) y += exp((double)w->exp_bias[c]); /* phi + exp(phi_bias) */
        if (w->gate == ROVE_PHASE_GATE_GLA) y *= gate[t * hp + c];
        else if (w->gate != ROVE_PHASE_GATE_NONE) y *= gate[t * hp + c / P];
        phi[(b * T + t) * hp + c] = y;
      }
  }
  free(u), free(mid), free(z), free(gate);
  return 0;
}
