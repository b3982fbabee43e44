/* SPDX-License-Identifier: MIT */
/* Double-precision oracles for gated linear attention (rove_gla_forward /
 * rove_gla_recurrent), written straight from the math in rove.h; they share no code with
 * the library. Slow on purpose. */
#ifndef ROVE_GLA_ORACLE_H
#define ROVE_GLA_ORACLE_H

#include "rove.h"

/* The real recurrence, per batch row and head, in double:
 *   S = diag(exp(g_t)) S + k~_t v~_t^T,   o_t = R_t^{-1} (scale S^T q~_t)
 * with the rotations of config @p c (rotary_dim 0 = key_dim, scale 0 = 1/sqrt(key_dim))
 * applied in double from cos/sin of the double angles (when a->angles is given).
 * a->out and a->final_state are ignored; out: [B][T][H][V]; final_state: NULL or
 * [B][H][K][V]. Returns 0, or -1 on a bad argument / allocation failure. */
int rove_oracle_gla(const rove_gla_config *c, const rove_gla_args *a, double *out,
                    double *final_state);

/* Gradients of rove_oracle_gla's output and final state for the upstream gradients dout
 * ([B][T][H][V]) and d_final (NULL = 0, [B][H][K][V]), by reverse mode through the same
 * recurrence in double, all states kept: with H_t = dLoss/dS_t = scale q~_t do~_t^T +
 * diag(e^{g_{t+1}}) H_{t+1} (H_{T-1} gets d_final), dq~_t = scale S_t do~_t, dk~_t = H_t v~_t,
 * dv~_t = H_t^T k~_t and dg_t = e^{g_t} * sum_j S_{t-1}[.][j] H_t[.][j] (directly, not
 * through the q dq - k dk identity the library uses); d_init = diag(e^{g_0}) H_0; the
 * angle gradients from each rotation of the token (and the output's, read from the
 * oracle's own forward). Outputs in the layouts of the inputs; d_init and d_angles may be
 * NULL. Returns 0, or -1 on a bad argument / allocation failure. */
int rove_oracle_gla_backward(const rove_gla_config *c, const rove_gla_args *a, const float *dout,
                             const float *d_final, double *dq, double *dk, double *dv, double *dg,
                             double *d_init, double *d_angles);

/* The same output from the complex recurrence (the "RoPE trick"): q and k enter
 * unrotated; rotated pair p of a key becomes z = x_a + i x_b (HALF: a = p, b = p + r/2;
 * INTERLEAVED: a = 2p, b = 2p + 1) and the state carries the rotation as a transition
 * diag(alpha_t e^{i omega_t}), omega_t = theta_t - theta_{t-1}. The real inner product of
 * a pair is split as Re(z_q conj(z_k) e^{i Delta}) = (z_q conj(z_k) e^{i Delta} +
 * conj(z_q) z_k e^{-i Delta}) / 2, so each rotated pair is two complex modes (transitions
 * e^{+i omega} and e^{-i omega}); with V and O rotation each value pair is one complex
 * value u = v_a + i v_b whose transition is e^{-i omega} (R_t^{-1} R_s = e^{-i(theta_t -
 * theta_s)}). Unrotated dims are real modes. Exact when g is equal within every rotated
 * key pair (checked). Q and K must be rotated both or neither, V and O likewise.
 * @p start_angles: NULL (0) or [B][H][r/2], theta_{-1} of each (batch, head): the angle
 * from which token 0's transition starts; the real initial state is converted to the
 * complex one at that angle, so the result does not depend on it.
 * Returns 0, or -1 on a bad argument, unequal pair decays or unsupported rotate flags. */
int rove_oracle_gla_complex(const rove_gla_config *c, const rove_gla_args *a,
                            const double *start_angles, double *out);

#endif
