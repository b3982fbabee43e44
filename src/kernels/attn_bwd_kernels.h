/* SPDX-License-Identifier: MIT */
/* The backward tile of rove_attention_backward (src/attention_backward.c has the math):
 * one block of nq query rows against one block of nk <= ROVE_BWD_TK keys of one head,
 * all rows already rotated (q^ = scale M R q, k~ = M R k, v~ = R v, do~ = R do):
 *   S = q^ k~^T (softcap: s = c tanh(S / c)),  P = exp(min(s - lse, 0)) (0 where not
 *   visible or where lse = -inf; the clamp keeps P <= 1 when rounding puts s above lse),  dP = do~ v~^T,  dS = P (dP - D) (softcap: times 1 - (s / c)^2)
 *   dk += dS^T q^,   dv += P^T do~,   dq += dS k~        (each only when non-NULL)
 * Layouts (floats, row-major): q, dout [nq][d]; k [nk][d] (for dq); kT, vT [d][ROVE_BWD_TK]
 * (the block transposed, columns past nk zero); dk, dv [nk][d]; dq [nq][d]; lse, D [nq];
 * scratch ROVE_BWD_SCRATCH floats. Positions are read only when mask != 0. Kernels may
 * differ from the scalar one by rounding only (FMA, their exp), and in the sign of a zero:
 * a zero weight may add its +-0 product when every input row it would multiply is finite
 * (AVX2, AVX-512), which changes no sum except a -0 one into +0 (the driver's sums start at +0). */
#ifndef ROVE_ATTN_BWD_KERNELS_H
#define ROVE_ATTN_BWD_KERNELS_H

#include <stdint.h>

#define ROVE_BWD_TK 64 /* keys per block (the transposed blocks' row length) */
#define ROVE_BWD_TQ 64 /* query rows per block, at most */
#define ROVE_BWD_SCRATCH (3 * ROVE_BWD_TQ * ROVE_BWD_TK)

typedef struct rove_bwd_tile {
  const float *q, *dout, *lse, *D;
  const float *k, *kT, *vT;
  int32_t nq, nk, d;
  const int32_t *q_pos, *k_pos;
  int32_t mask, causal, window;
  float softcap;
  float *dq, *dk, *dv;
  float *scratch;
} rove_bwd_tile;
typedef void (*rove_attn_bwd_fn)(const rove_bwd_tile *t);

#endif
