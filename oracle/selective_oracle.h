/* SPDX-License-Identifier: MIT */
/* Selective RoPE oracles: angles with compensated (double-double) sums and the phase
 * network in double, written from the formulas of include/rove.h; no code shared with the
 * library. */
#ifndef ROVE_SELECTIVE_ORACLE_H
#define ROVE_SELECTIVE_ORACLE_H

#include <stdint.h>

#include "rove.h"

/* temp_k = 500000^(-2k/r), r = 2 n_pairs, as exp(-(2k/r) ln 500000) in long double. */
void rove_oracle_selective_temperatures(int32_t n_pairs, double *temp);

/* angles[b][t][h][k] = temp[k] * (carry_in[b][h][k] + sum_{s<=t} phi[b][s][h][k]) with the
 * sum kept as an unevaluated double-double (error ~1e-32 relative) and the product
 * rounded once. temp NULL: the oracle's temperatures; carry_in NULL: 0; carry_out NULL or
 * [batch][n_heads][n_pairs] (the rounded final sum). Returns 0, -1 on allocation failure. */
int rove_oracle_selective_angles(int32_t batch, int32_t seq_len, int32_t n_heads,
                                 int32_t n_pairs, const float *phi, const double *temp,
                                 const double *carry_in, double *carry_out, double *angles);

/* The phase network in double (no float rounding anywhere), written from the reference
 * module's equations: phi [batch][seq_len][H][P], from x rows at x_stride floats (0 =
 * dense), conv_state NULL (zeros) or [batch][H][P][S] oldest first (read only; S = 1 with
 * skip_conv, else conv_width - 1). The options and weights must be valid for
 * rove_selective_phase. Returns 0, -1 on allocation failure. */
int rove_oracle_selective_phase(const rove_selective_phase_weights *w, int32_t batch,
                                int32_t seq_len, const float *x, int64_t x_stride,
                                const float *conv_state, double *phi);

#endif
