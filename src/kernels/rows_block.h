/* SPDX-License-Identifier: MIT */
/* The ISA-independent part of the SIMD attn_rows kernels (avx2, avx512): one block of up
 * to ROVE_ROWS_BLOCK keys as the row kernels walk it, and which of its keys a query row
 * sees. */
#ifndef ROVE_ROWS_BLOCK_H
#define ROVE_ROWS_BLOCK_H

#include "kernels.h"
#include "mask.h"

/* The element size of rove_dtype T in bytes (a constant where T is). */
#define ROVE_ESZ(T) ((T) == ROVE_DTYPE_Q8 ? 1 : (T) == ROVE_DTYPE_F32 ? 4 : 2)

/* One block of keys: nb <= 64 keys at k (stride ks elements, type kt, Q8 scales ksc),
 * values at v (vs, vt, vsc), positions kp (read only on masked calls); pfk / pfv: prefetch
 * the K / V rows ahead (rows read in place, not rows in scratch); kn / vn, kscn / vscn
 * (paced prefetch): the K / V rows and Q8 scales of the block read next (NULL for
 * none). */
typedef struct rove_rows_blk {
  const void *k, *v, *kn, *vn;
  const float *kscn, *vscn;
  int64_t ks, vs;
  int32_t kt, vt;
  const float *ksc, *vsc;
  const int32_t *kp;
  int32_t nb, pfk, pfv;
} rove_rows_blk;

/* Bits 0 .. nb-1 set. */
static inline uint64_t rove_rows_all(int32_t nb) { return nb == 64 ? ~0ull : (1ull << nb) - 1ull; }

/* Bit j: key j of the block (j < nb) is visible to row r. */
static inline uint64_t rove_rows_visible(const rove_rows_args *t, int32_t r, const rove_rows_blk *b) {
  if (!t->mask) return rove_rows_all(b->nb);
  uint64_t bits = 0;
  for (int32_t j = 0; j < b->nb; j++)
    bits |= (uint64_t)rove_visible(t->q_pos[r], b->kp[j], t->causal, t->window) << j;
  return bits;
}

#endif
