/* SPDX-License-Identifier: MIT */
/* Gated linear attention kernels: one chunk of the chunked forward, and token steps of
 * the recurrence, for one (batch, head). The driver (src/gla.c, src/gla_recurrent.c) has
 * already rotated q, k, v, folded the scale into q and packed the rows densely.
 *
 * Recurrence (per head; state S [dk][dv], b_t = sum_{u<=t} g_u per key channel):
 *   S_t = diag(e^{g_t}) S_{t-1} + k_t v_t^T,      o_t = S_t^T q_t
 *
 * Chunk of n rows (n a multiple of 16, n <= ROVE_GLA_MAX_CHUNK; rows past the caller's
 * tokens are padding with q = k = v = g = 0, which changes nothing). With S the state
 * before the chunk and b_t the cumulative log decay from the chunk start:
 *   o_t = (q_t e^{b_t})^T S + sum_{s<=t} (q_t . k_s e^{b_t - b_s}) v_s
 *   S  <- diag(e^{b_{n-1}}) S + sum_s (k_s e^{b_{n-1} - b_s}) v_s^T
 * Numerical stability: b is never subtracted from a cumulative b (that cancels) and no
 * exponent is ever positive. The chunk is walked in sub-blocks of 16 rows; per block,
 * every exponent is a sum of g's of one sign, formed inside the block:
 *   P_t = sum of g from the block start to t (inclusive)      -> e^{P_t} <= 1
 *   X_s = sum of g from s+1 to the block end                   -> e^{X_s} <= 1
 *   G   = the block's total, R = total of the blocks before     -> e^{G}, e^{R} <= 1
 * Query block i against earlier keys uses the reference point r_i = b at the end of
 * block i-1: e^{b_t - b_s} = e^{b_t - r_i} e^{r_i - b_s}, both factors <= 1. The keys
 * "decayed to r_i" are kept transposed in kdT[dk][n] (column s = k_s e^{r_i - b_s}) and
 * brought forward block by block: kdT *= e^{G_i}, the new block's columns are k_s e^{X_s}.
 * Inside the diagonal 16 x 16 block e^{b_t - b_s} is the running product of e^{g_u},
 * u = s+1..t (each key column of dT[dk][16] is multiplied by e^{g_t} as t advances): no
 * reference point at all. After the last block kdT holds k_s e^{b_{n-1} - b_s}, the keys
 * of the state update.
 * The scalar kernel forms e^{P_t}, e^{X_s}, e^{G}, e^{R} as exp of the sums; the SIMD
 * kernels take e^{P_t} and e^{X_s} as running products of e^{g} inside the block (at most
 * 16 factors <= 1: one exp per element instead of three, within a few ulp). Values below the float range flush to 0 (or denormals):
 * a product of factors <= 1 never overflows, and inf - inf never occurs, so g = -FLT_MAX
 * (sums reaching -inf) is fine.
 *
 * Work buffer (floats; every part starts on a 16-float boundary when the buffer does):
 *   qi [n][ld] (q_t e^{b_t}), qo [16][ld] (q_t e^{P_t}), qb [16][ld] (spare: a copy of
 *   the block's q), kx [16][ld] (k_s e^{X_s}), eg [16][ld] (e^{g_t}) with ld = dk rounded
 *   up to 16, kdT [ld][n], arow [16][n] (scores of one query block), dT [ld][16] (the
 *   diagonal block's keys, transposed), r [ld] (R), eG [ld]; see rove_gla_work_floats.
 *   Each ISA may use the parts in its own way (AVX-512 fills kdT and dT by register
 *   transposes and keeps the diagonal block's keys in registers).
 * Only q, k, g, v rows 0..n-1, s, o, work are touched. work must be 64-byte aligned; no
 * alignment is required of the other buffers (the driver's are 64-byte aligned); dk, dv
 * are any sizes >= 1.
 */
#ifndef ROVE_GLA_KERNELS_H
#define ROVE_GLA_KERNELS_H

#include <stdint.h>

#include "rove.h"

#define ROVE_GLA_BLOCK 16      /* rows of a sub-block */
#define ROVE_GLA_MAX_CHUNK 128 /* largest chunk a plan accepts */

typedef struct rove_gla_chunk {
  int32_t n, dk, dv;      /* rows (multiple of 16), key dim, value dim */
  const float *q, *k, *g; /* [n][dk]: q already scaled */
  const float *v;         /* [n][dv] */
  float *s;               /* [dk][dv] state, updated in place */
  float *o;               /* [n][dv] output rows */
  float *work;            /* rove_gla_work_floats(n, dk) floats */
} rove_gla_chunk;

static inline int64_t rove_gla_round16(int64_t x) { return (x + 15) / 16 * 16; }

/* Floats of the chunk kernel's work buffer (also enough for the steps kernel). */
static inline int64_t rove_gla_work_floats(int64_t n, int64_t dk) {
  const int64_t rk = rove_gla_round16(dk);
  return n * rk + 4 * 16 * rk + rk * n + 16 * n + rk * 16 + 2 * rk;
}

/* Offsets of the work buffer parts (floats), for the kernels of every ISA. */
typedef struct rove_gla_work {
  float *qi, *qo, *qb, *kx, *eg, *kdT, *arow, *dT, *r, *eG;
  int64_t ld; /* row stride of qi, qo, qb, kx, eg: dk rounded up to 16 */
} rove_gla_work;

static inline rove_gla_work rove_gla_work_at(float *w, int64_t n, int64_t dk) {
  const int64_t rk = rove_gla_round16(dk);
  rove_gla_work p;
  p.qi = w;
  p.qo = p.qi + n * rk;
  p.qb = p.qo + 16 * rk;
  p.kx = p.qb + 16 * rk;
  p.eg = p.kx + 16 * rk;
  p.kdT = p.eg + 16 * rk;
  p.arow = p.kdT + rk * n;
  p.dT = p.arow + 16 * n;
  p.r = p.dT + rk * 16;
  p.eG = p.r + rk;
  p.ld = rk;
  return p;
}

/* One chunk (see above). */
typedef void (*rove_gla_chunk_fn)(const rove_gla_chunk *c);

/* n tokens of the recurrence: for t < n, S = diag(e^{g_t}) S + k_t v_t^T, then
 * o_t = S^T q_t. q, k, g rows [n][dk], v, o rows [n][dv]; work holds dk floats. */
typedef void (*rove_gla_steps_fn)(float *s, float *o, const float *q, const float *k,
                                  const float *v, const float *g, int32_t n, int32_t dk, int32_t dv,
                                  float *work);

/* ---- backward (rove_gla_backward; the body is gla_bwd_body.h) ---------------------------
 * The driver runs two sweeps per (batch, head), both in the rotated frame (q scaled):
 *   state sweep, chunk by chunk from the initial state: S_t, kept at each chunk start
 *   gradient sweep, last chunk first, from H = d final_state: with S before the chunk,
 *     dq_t = S_t do_t,  dk_t = H_t v_t,  dv_t = H_t^T k_t
 * with the adjoint state H_t = dLoss/dS_t = q_t do_t^T + diag(e^{g_{t+1}}) H_{t+1}.
 * Inside a chunk of n rows (b_t = g_0 + .. + g_t from the chunk start, B = b_{n-1}):
 *   S   <- diag(e^B) S + sum_s (k_s e^{B - b_s}) v_s^T                       (bwd_state)
 *   dq_t = e^{b_t} (S do_t) + sum_{s<=t} (do_t . v_s) k_s e^{b_t - b_s}      (bwd_grads)
 *   dk_s = e^{B - b_s} (H v_s) + sum_{t>=s} (do_t . v_s) q_t e^{b_t - b_s}
 *   dv_s = (k_s e^{B - b_s})^T H + sum_{t>=s} (q_t . k_s e^{b_t - b_s}) do_t
 *   H   <- diag(e^B) H + sum_t (q_t e^{b_t}) do_t^T
 * (products elementwise over the key channel). As in the forward, every exponent is a sum
 * of g over one range of tokens, formed as such (never a difference of cumulative sums,
 * which would absorb a small decay next to a huge one, e.g. g = -FLT_MAX), so none is
 * positive: pairs in different 16-row blocks split e^{b_t - b_s} at a block boundary into
 * two factors <= 1, pairs in one block use running products of e^{g}; where a chunk's (or
 * a block's) decays sum to >= -60, e^{b_t - b_s} = e^{b_t} e^{-b_s} instead (plain matrix
 * products), unless that overflows (gla_bwd_body.h: gb_fallbacks). The sums are formed
 * in double, rounded to float and exponentiated with the ISA's exp. dg is not formed
 * here: the driver takes it from dq and dk (rove.h). */
typedef struct rove_gla_bwd_chunk {
  int32_t n, dk, dv;      /* rows (multiple of 16, <= ROVE_GLA_MAX_CHUNK), key dim, value dim */
  const float *q, *k, *g; /* [n][dk]: q already scaled (unread by bwd_state) */
  const float *v, *dout;  /* [n][dv] (dout unread by bwd_state) */
  float *s;               /* [dk][dv] S before the chunk: bwd_state moves it past the chunk,
                             bwd_grads only reads it */
  float *h;               /* [dk][dv] bwd_grads: H after the chunk -> before it */
  float *dq, *dkey;       /* [n][dk] out (bwd_grads) */
  float *dval;            /* [n][dv] out (bwd_grads) */
  float *work;            /* rove_gla_bwd_work_floats(n, dk, dv) floats, 64-byte aligned */
} rove_gla_bwd_chunk;

/* One chunk of either sweep (see above); rows n.. of padding are q = k = v = g = do = 0. */
typedef void (*rove_gla_bwd_fn)(const rove_gla_bwd_chunk *c);

/* Floats of the backward work buffer: three [n][dk] and one [dk] double arrays, then float parts
 * (gla_bwd_body.h lays them out). */
static inline int64_t rove_gla_bwd_work_floats(int64_t n, int64_t dk, int64_t dv) {
  const int64_t nk = rove_gla_round16(n * dk);
  return 6 * nk + rove_gla_round16(2 * dk) + 6 * nk + 2 * 16 * n + 6 * rove_gla_round16(16 * dk) +
         rove_gla_round16(dv * n) + rove_gla_round16(dv * dk) + 256 + n * n;
}

/* dg of one token row of one head, from the end of the sequence back (gla_backward.c):
 * carry[e] += q[e] dq[e] - k[e] dk[e] in double, dg[e] = (float)carry[e], e < n. q is
 * the scaled, rotated query row, dq its gradient, k / dk the same for the key. */
typedef void (*rove_gla_dg_fn)(double *carry, float *dg, const float *q, const float *dq,
                               const float *k, const float *dk, int32_t n);

/* The loop of every ISA's rove_gla_dg_fn, compiled with its flags (the vectoriser widens
 * it; each element is the same double expression, no contraction (-ffp-contract=off), so the
 * bits do not depend on the ISA). */
static inline void rove_gla_dg_body(double *restrict carry, float *restrict dg,
                                    const float *restrict q, const float *restrict dq,
                                    const float *restrict k, const float *restrict dk,
                                    int32_t n) {
  for (int32_t e = 0; e < n; e++) {
    carry[e] += (double)q[e] * dq[e] - (double)k[e] * dk[e];
    dg[e] = (float)carry[e];
  }
}

/* The GLA sub-table of an ISA's kernel table (kernels.h, slot gla). */
typedef struct rove_gla_kernels {
  rove_gla_chunk_fn chunk;
  rove_gla_steps_fn steps;
  rove_gla_bwd_fn bwd_state, bwd_grads; /* the chunk of each backward sweep */
  rove_gla_dg_fn bwd_dg;           /* the backward's dg row */
} rove_gla_kernels;

#endif
