/* SPDX-License-Identifier: MIT */
/* Internal: Selective RoPE helpers shared by the attention driver, rove_rotate_angles,
 * the KV cache and GLA (implemented in selective_angles.c / selective_table.c). */
#ifndef ROVE_SELECTIVE_H
#define ROVE_SELECTIVE_H

#include <stdint.h>

#include "kernels/kernels.h"
#include "rove.h"

/* temp[k] = 1 / 500000^(2k/r), r = 2 n_pairs, computed exactly as rove_rope_inv_freq
 * computes w_k for theta 500000 and no scaling. */
void rove_selective_temp_default(int32_t n_pairs, double *temp);

/* cos_t[i] = (float)cos(angles[i]), sin_t[i] = (float)sin(angles[i]) for i < n, the
 * angle reduced in double (so huge angles keep float accuracy), through the sincos slot
 * of the caller's table @p k (SIMD: reduction by pi/2 in double, within 1 float ulp of
 * libm up to |angle| = 2^40, libm beyond; scalar: libm's double cos/sin rounded). */
void rove_angle_table(const rove_kernels *k, float *cos_t, float *sin_t, const double *angles,
                      int64_t n);

/* Nonzero when every angles[i], i < n, is finite. */
int rove_angles_finite(const double *angles, int64_t n);

/* ---- the phase network (selective_phase.c drives, selective_phase_token.c computes) ----
 * One call runs in blocks of tokens: a token pass (parallel over groups of up to
 * ROVE_PHASE_GROUP consecutive tokens of one batch row, handed to the phase_dots kernel
 * together, so that it can read each weight once for several tokens) writes each token's z into its phi row (float, the value the
 * conv sees) and its gate values into a block buffer; a head pass (parallel over batch
 * row x head) walks the block's tokens in order through the conv (or first difference),
 * the activation, exp(bias) and the gate, overwriting z with phi. A token's results do
 * not depend on its group. */
#define ROVE_PHASE_GROUP 4
typedef struct rove_phase_run {
  const rove_selective_phase_weights *w;
  rove_phase_dots_fn dots; /* the table's phase_dots (the selected ISA's) */
  int64_t d;            /* input width H * in_dim */
  int64_t hp;           /* H * n_pairs: z and phi values per token */
  int64_t n_gate;       /* gate values per token: 0 (no gate), H or H * n_pairs (GLA) */
  int32_t state_len;    /* S: z history per channel (rove_selective_phase_state_len) */
  int32_t mid;          /* doubles of the rank-sized intermediate: max of the used ranks */
  const double *scale;  /* PER_HEAD: [hp] gain[h] / max(||w[h][k]||, 1e-12); else NULL */
  const double *exp_b;  /* [hp] exp(exp_bias) or NULL */
  /* With a conv (not skip_conv), width W: the bias [hp] (conv_b or 0) and the taps by tap,
   * [H][W][P] (taps[(h W + j) P + k] = conv_w[h P + k][j]); else NULL. */
  const double *conv_bias, *taps;
} rove_phase_run;

/* nt <= ROVE_PHASE_GROUP tokens, rows x + t * xs (d floats each): u from x, z rounded to
 * float into z_out [nt][hp], the sigmoid gates into gate_out [nt][n_gate] (not written
 * without a gate). scratch: nt * (d + mid) doubles. */
void rove_phase_tokens(const rove_phase_run *r, int64_t nt, const float *x, int64_t xs,
                       double *scratch, float *z_out, double *gate_out);

/* Head h over n tokens: rows[t * hp + h * P + k] holds z on entry and phi on return;
 * gates[t * n_gate + ...] (NULL without a gate); hist [P][S] the z history, oldest first,
 * updated; work: ROVE_PHASE_HEAD_WORK(r) doubles. */
#define ROVE_PHASE_HEAD_WORK(r) (((int64_t)(r)->state_len + 1) * (r)->w->n_pairs)
void rove_phase_head(const rove_phase_run *r, int64_t h, int64_t n, float *rows,
                     const double *gates, float *hist, double *work);

#endif
