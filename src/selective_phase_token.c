/* SPDX-License-Identifier: MIT */
/* The arithmetic of the Selective RoPE phase network (include/rove.h, docs/DESIGN.md §1):
 * the token pass (normalise, project, gate) and the head pass (conv or first difference,
 * activation, exp(bias), gate). Everything is evaluated in double from the float inputs;
 * dot products use four partial sums combined in a fixed order, so a result never depends
 * on the thread that computes it. z is rounded to float where it is stored (it is what the
 * conv state holds), phi once at the end. */
#include <math.h>
#include <stddef.h>

#include "selective.h"

/* sum_i a[i] * b[i] in double, four partial sums combined in a fixed order. */
static double dot_fd(const float *a, const double *b, int64_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += (double)a[i] * b[i];
    s1 += (double)a[i + 1] * b[i + 1];
    s2 += (double)a[i + 2] * b[i + 2];
    s3 += (double)a[i + 3] * b[i + 3];
  }
  for (; i < n; i++) s0 += (double)a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

/* out[j] = <m[j], v> for the rows of m [rows][n]. */
static void matvec(const float *m, int64_t rows, int64_t n, const double *v, double *out) {
  for (int64_t j = 0; j < rows; j++) out[j] = dot_fd(m + j * n, v, n);
}

static double sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }

/* u_h = x_h / sqrt(||x_h||^2 + eps) for each of the H groups of in_dim. */
static void normalise(const rove_selective_phase_weights *w, const float *x, double *u) {
  const int64_t D = w->in_dim;
  for (int64_t h = 0; h < w->n_heads; h++) {
    const float *xh = x + h * D;
    double s0 = 0.0, s1 = 0.0;
    int64_t i = 0;
    for (; i + 2 <= D; i += 2) {
      s0 += (double)xh[i] * xh[i];
      s1 += (double)xh[i + 1] * xh[i + 1];
    }
    if (i < D) s0 += (double)xh[i] * xh[i];
    const double inv = 1.0 / sqrt((s0 + s1) + (double)w->norm_eps);
    for (i = 0; i < D; i++) u[h * D + i] = (double)xh[i] * inv;
  }
}

void rove_phase_token(const rove_phase_run *r, const float *x, double *scratch, float *z_out,
                      double *gate_out) {
  const rove_selective_phase_weights *w = r->w;
  double *u = scratch, *mid = scratch + r->d;
  normalise(w, x, u);
  if (w->projection == ROVE_PHASE_PROJ_LOW_RANK) {
    matvec(w->proj_down, w->proj_rank, r->d, u, mid);
    for (int64_t j = 0; j < r->hp; j++)
      z_out[j] = (float)dot_fd(w->proj_up + j * w->proj_rank, mid, w->proj_rank);
  } else {
    const int64_t P = w->n_pairs, D = w->in_dim;
    for (int64_t j = 0; j < r->hp; j++) /* j = h * P + k reads head h's part of u */
      z_out[j] = (float)(r->scale[j] * dot_fd(w->proj_w + j * D, u + (j / P) * D, D));
  }
  if (w->gate == ROVE_PHASE_GATE_NONE) return;
  const float *gw = w->gate_w;
  if (w->gate == ROVE_PHASE_GATE_STANDARD) {
    matvec(gw, r->n_gate, r->d, u, gate_out);
  } else { /* LOW_RANK, GLA: through gate_down (u is no longer needed: reuse it) */
    matvec(w->gate_down, w->gate_rank, r->d, u, mid);
    matvec(gw, r->n_gate, w->gate_rank, mid, gate_out);
  }
  for (int64_t j = 0; j < r->n_gate; j++)
    gate_out[j] = sigmoid(gate_out[j] + (w->gate_b ? (double)w->gate_b[j] : 0.0));
}

void rove_phase_head(const rove_phase_run *r, int64_t h, int64_t n, float *rows,
                     const double *gates, float *hist) {
  const rove_selective_phase_weights *w = r->w;
  const int64_t P = w->n_pairs, S = r->state_len, W = w->conv_width;
  const int per_pair_gate = w->gate == ROVE_PHASE_GATE_GLA;
  for (int64_t t = 0; t < n; t++) {
    float *row = rows + t * r->hp + h * P;
    const double *g = gates ? gates + t * r->n_gate + (per_pair_gate ? h * P : h) : NULL;
    for (int64_t k = 0; k < P; k++) {
      const int64_t hk = h * P + k;
      const float z = row[k];
      float *hz = S ? hist + k * S : NULL; /* z(t - S) .. z(t - 1); no history: never read */
      double y;
      if (w->skip_conv) {
        y = (double)z - hz[0]; /* exact: both floats */
        hz[0] = z;
      } else {
        const float *cw = w->conv_w + hk * W;
        y = w->conv_b ? (double)w->conv_b[hk] : 0.0;
        for (int64_t j = 0; j < S; j++) y += (double)cw[j] * hz[j];
        y += (double)cw[W - 1] * z;
        for (int64_t j = 0; j + 1 < S; j++) hz[j] = hz[j + 1];
        if (S > 0) hz[S - 1] = z;
        if (w->conv_act == ROVE_PHASE_ACT_SILU) y = y * sigmoid(y);
      }
      if (r->exp_b) y += r->exp_b[hk];
      if (g) y *= g[per_pair_gate ? k : 0];
      row[k] = (float)y;
    }
  }
}
