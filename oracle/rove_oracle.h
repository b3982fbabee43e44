/* SPDX-License-Identifier: MIT */
/* A naive double-precision attention oracle: the truth the public API is tested against.
 * Materialises the score row, two-pass softmax, rotations evaluated in double straight
 * from docs/DESIGN.md §1. Slow on purpose; shares no code with the library. */
#ifndef ROVE_ORACLE_H
#define ROVE_ORACLE_H

#include <stdint.h>

#include "rove.h"

/* Attention of docs/DESIGN.md §1 for config @p c (rotary_dim 0 = head_dim, scale 0 =
 * 1/sqrt(head_dim)) on the tensors of @p a (strides and positions honoured; a->out and
 * a->lse are ignored). inv_freq[r/2] and the attention factor m are inputs (take them from
 * rove_rope_inv_freq, which has its own tests).
 * out: [batch][q_len][n_heads][head_dim] dense; lse: NULL or [batch][n_heads][q_len].
 * Returns 0, or -1 on a bad argument / allocation failure. */
int rove_oracle_attention(const rove_attention_config *c, const double *inv_freq, double m,
                          const rove_attention_args *a, double *out, double *lse);

/* The same output through the attentive-convolution form
 *   y_i = sum_j a_ij R_{p_j - P_i} v_j
 * valid when c->rotate has V and O (RoVE). Same arguments as above; lse not produced. */
int rove_oracle_attention_conv(const rove_attention_config *c, const double *inv_freq,
                               double m, const rove_attention_args *a, double *out);

/* Both forms honour a->q_angles / a->kv_angles (Selective RoPE) in place of pos * w_k,
 * and a->sinks (one more logit per query head, of a zero value, in every softmax row). */

/* Both forms honour c->rope.placement: the r rotated dims are 0..r-1 (FIRST) or
 * d-r..d-1 (LAST), the pairs formed inside that block (docs/DESIGN.md §1). */

/* Rotate one head vector x[d] (double) in place by the angles angles[r/2] (sign -1 for the
 * inverse), with rotary dim r and the given pairing, the rotated dims first. */
void rove_oracle_rotate_angles(double *x, int32_t d, int32_t r, rove_pairing pairing,
                               const double *angles, int sign);

/* Rotate one head vector x[d] (double) in place by angle set pos * inv_freq (sign -1 for
 * the inverse), with rotary dim r and the given pairing, the rotated dims first. */
void rove_oracle_rotate(double *x, int32_t d, int32_t r, rove_pairing pairing,
                        const double *inv_freq, double pos, int sign);

/* The two above with the rotated block where @p placement puts it: dims 0..r-1 (FIRST)
 * or d-r..d-1 (LAST). */
void rove_oracle_rotate_angles_placed(double *x, int32_t d, int32_t r, rove_pairing pairing,
                                      rove_rotary_placement placement, const double *angles,
                                      int sign);
void rove_oracle_rotate_placed(double *x, int32_t d, int32_t r, rove_pairing pairing,
                               rove_rotary_placement placement, const double *inv_freq,
                               double pos, int sign);

#endif
