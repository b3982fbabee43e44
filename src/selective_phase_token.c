/* SPDX-License-Identifier: MIT */
/* The arithmetic of the Selective RoPE phase network (include/rove.h, docs/DESIGN.md §1):
 * the token pass (normalise, project, gate) and the head pass (conv or first difference,
 * activation, exp(bias), gate). Everything is evaluated in double from the float inputs;
 * the projections' dot products are the phase_dots kernel's (selective_kernels.h: eight
 * partial sums combined in a fixed order, the same bits on every ISA and for any grouping
 * of tokens), so a result never depends on the thread that computes it. z is rounded to
 * float where it is stored (it is what the conv state holds), phi once at the end. */
#include <math.h>
#include <stddef.h>

#include "selective.h"

static double sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }

/* u_h = x_h / sqrt(||x_h||^2 + eps) for each of the H groups of in_dim. */
static void normalise(const rove_selective_phase_weights *w, const float *x, double *u) {
  const int64_t D = w->in_dim;
  for (int64_t h = 0; h < w->n_heads; h++) {
    const float *xh = x + h * D;
    double s[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}; /* 8 sums: the loop vectorises */
    int64_t i = 0;
    for (; i + 8 <= D; i += 8)
      for (int l = 0; l < 8; l++) s[l] += (double)xh[i + l] * xh[i + l]; /* exact squares */
    for (int l = 0; i + l < D; l++) s[l] += (double)xh[i + l] * xh[i + l];
    const double ss = ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
    const double inv = 1.0 / sqrt(ss + (double)w->norm_eps);
    for (i = 0; i < D; i++) u[h * D + i] = (double)xh[i] * inv;
  }
}

#define CHUNK 256 /* rows per pass through the stack buffer of dots_to_float */

/* z[t * zs + j] = (float)(scale[j] * <m[j], v[t]>) (scale NULL: 1) for j < rows and the nt
 * tokens, through the phase_dots kernel into a stack buffer, CHUNK rows at a time. */
static void dots_to_float(const rove_phase_run *r, float *z, int64_t zs, const float *m,
                          int64_t ms, int64_t rows, const double *v, int64_t vs, int64_t nt,
                          int64_t n, const double *scale) {
  double buf[ROVE_PHASE_GROUP * CHUNK];
  for (int64_t j0 = 0; j0 < rows; j0 += CHUNK) {
    const int64_t nr = rows - j0 < CHUNK ? rows - j0 : CHUNK;
    r->dots(buf, CHUNK, m + j0 * ms, ms, nr, v, vs, nt, n);
    for (int64_t t = 0; t < nt; t++)
      for (int64_t j = 0; j < nr; j++)
        z[t * zs + j0 + j] = (float)(scale ? scale[j0 + j] * buf[t * CHUNK + j]
                                           : buf[t * CHUNK + j]);
  }
}

void rove_phase_tokens(const rove_phase_run *r, int64_t nt, const float *x, int64_t xs,
                       double *scratch, float *z_out, double *gate_out) {
  const rove_selective_phase_weights *w = r->w;
  const int64_t d = r->d, hp = r->hp, ng = r->n_gate, ms = r->mid;
  double *u = scratch, *mid = scratch + nt * d; /* u [nt][d], mid [nt][r->mid] */
  for (int64_t t = 0; t < nt; t++) normalise(w, x + t * xs, u + t * d);
  if (w->projection == ROVE_PHASE_PROJ_LOW_RANK) {
    r->dots(mid, ms, w->proj_down, d, w->proj_rank, u, d, nt, d);
    dots_to_float(r, z_out, hp, w->proj_up, w->proj_rank, hp, mid, ms, nt, w->proj_rank, NULL);
  } else { /* head h: rows h * P .. h * P + P - 1 of proj_w read head h's part of u */
    const int64_t P = w->n_pairs, D = w->in_dim;
    for (int64_t h = 0; h < w->n_heads; h++)
      dots_to_float(r, z_out + h * P, hp, w->proj_w + h * P * D, D, P, u + h * D, d, nt, D,
                    r->scale + h * P);
  }
  if (w->gate == ROVE_PHASE_GATE_NONE) return;
  const float *gw = w->gate_w;
  if (w->gate == ROVE_PHASE_GATE_STANDARD) {
    r->dots(gate_out, ng, gw, d, ng, u, d, nt, d);
  } else { /* LOW_RANK, GLA: through gate_down */
    r->dots(mid, ms, w->gate_down, d, w->gate_rank, u, d, nt, d);
    r->dots(gate_out, ng, gw, w->gate_rank, ng, mid, ms, nt, w->gate_rank);
  }
  for (int64_t t = 0; t < nt; t++)
    for (int64_t j = 0; j < ng; j++) {
      double *g = gate_out + t * ng + j;
      *g = sigmoid(*g + (w->gate_b ? (double)w->gate_b[j] : 0.0));
    }
}

/* Head h over n tokens, channel k of the head in lane k of every step (the loops over k
 * vectorise): the head's conv taps come laid out by tap (r->taps), its history is laid
 * out so in work, and each channel's taps are still summed in the order of the reference
 * loop (bias, then oldest to newest, then z): y = b + sum_j cw[j] z(t - S + j) +
 * cw[W - 1] z(t). work: (S + 1) P doubles: history hz [S][P] (a ring: slot (first + j) % S
 * holds z(t - S + j)), then y [P]. */
void rove_phase_head(const rove_phase_run *r, int64_t h, int64_t n, float *rows,
                     const double *gates, float *hist, double *work) {
  const rove_selective_phase_weights *w = r->w;
  const int64_t P = w->n_pairs, S = r->state_len, W = w->skip_conv ? 0 : w->conv_width;
  const int per_pair_gate = w->gate == ROVE_PHASE_GATE_GLA;
  double *restrict hz = work, *restrict y = work + S * P;
  const double *restrict cw = W ? r->taps + h * W * P : NULL;
  const double *restrict bias = W ? r->conv_bias + h * P : NULL;
  for (int64_t k = 0; k < P; k++)
    for (int64_t j = 0; j < S; j++) hz[j * P + k] = hist[k * S + j];
  const double *exp_b = r->exp_b ? r->exp_b + h * P : NULL;
  int64_t first = 0; /* the ring slot of the oldest z */
  for (int64_t t = 0; t < n; t++) {
    float *restrict row = rows + t * r->hp + h * P;
    if (w->skip_conv) {
      for (int64_t k = 0; k < P; k++) {
        y[k] = (double)row[k] - hz[k]; /* exact: both floats */
        hz[k] = row[k];
      }
    } else {
      for (int64_t k = 0; k < P; k++) y[k] = bias[k];
      for (int64_t j = 0; j < S; j++) {
        const double *restrict hj = hz + ((first + j) % S) * P, *restrict cj = cw + j * P;
        for (int64_t k = 0; k < P; k++) y[k] += cj[k] * hj[k];
      }
      const double *restrict cz = cw + (W - 1) * P;
      for (int64_t k = 0; k < P; k++) y[k] += cz[k] * row[k];
      if (S > 0) { /* z(t) replaces the oldest */
        double *restrict ho = hz + first * P;
        for (int64_t k = 0; k < P; k++) ho[k] = row[k];
        first = first + 1 == S ? 0 : first + 1;
      }
      if (w->conv_act == ROVE_PHASE_ACT_SILU)
        for (int64_t k = 0; k < P; k++) y[k] = y[k] * sigmoid(y[k]);
    }
    if (exp_b)
      for (int64_t k = 0; k < P; k++) y[k] += exp_b[k];
    if (gates) {
      const double *g = gates + t * r->n_gate + (per_pair_gate ? h * P : h);
      if (per_pair_gate)
        for (int64_t k = 0; k < P; k++) y[k] *= g[k];
      else
        for (int64_t k = 0; k < P; k++) y[k] *= g[0];
    }
    for (int64_t k = 0; k < P; k++) row[k] = (float)y[k];
  }
  for (int64_t k = 0; k < P; k++) /* the history back, oldest first */
    for (int64_t j = 0; j < S; j++) hist[k * S + j] = (float)hz[((first + j) % S) * P + k];
}
