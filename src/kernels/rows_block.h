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

/* One block of keys: nb <= 64 keys in nr runs of `run` consecutive rows (run = BLK for
 * rows that are all consecutive; a paged call's block size, 16 or 32, else): keys
 * [i run, i run + run) of the block at k[i] (stride ks elements, type kt, Q8 scales
 * ksc[i]), their values at v[i] (vs, vt, vsc[i]); positions kp (read only on masked calls);
 * pfk / pfv: prefetch the K / V rows ahead (rows read in place, not rows in scratch);
 * kn[i] / vn[i], kscn[i] / vscn[i] (the paced prefetch; kn / vn also the bursts'): the
 * K / V rows and Q8 scales of the same keys of the block read next (NULL for none). */
#define ROVE_ROWS_RUNS (ROVE_ROWS_BLOCK >> ROVE_ROWS_RUN_SHIFT)
typedef struct rove_rows_blk {
  const void *k[ROVE_ROWS_RUNS], *v[ROVE_ROWS_RUNS], *kn[ROVE_ROWS_RUNS], *vn[ROVE_ROWS_RUNS];
  const float *ksc[ROVE_ROWS_RUNS], *vsc[ROVE_ROWS_RUNS];
  const float *kscn[ROVE_ROWS_RUNS], *vscn[ROVE_ROWS_RUNS];
  int64_t ks, vs;
  int32_t kt, vt;
  int32_t run, run_shift, nr; /* run = 2^run_shift */
  const int32_t *kp;
  int32_t nb, pfk, pfv;
} rove_rows_blk;

/* Keys j0 .. j0 + b->nb - 1 of call t as b's runs, read in place (types, strides and
 * scales as t's), and the rows of the block read next: this call's keys from
 * j0 + ROVE_ROWS_BLOCK, or after its last block the rows of the call that follows
 * (t->k_next ...: with t->next_nk, its keys' runs through the block table; else its
 * first run, the others guessed consecutive without blocks). kin / vin = 0: no next rows
 * for K / V (rows that the kernel will widen into scratch). Called once per block and KV
 * head: over a q8 pool of blocks of 16 (12 x 64, one thread, Zen 4) it took 6 % of the
 * row kernel's samples (`perf`), 4.5 % with each run's entries formed in one place and
 * nothing formed that is then cleared (the same pointers: a throwaway program compared
 * both versions on 5.7 million random blocks). */
/* Run i's entries (next: those of the rows read next) at row r of k, v (strides ks, vs
 * elements of ke, ve bytes; r * ks first, as the caller's checks bound it: a one-row call
 * may have any stride) and of the Q8 scales ksc, vsc; NULL for a NULL base. */
static inline void rove_rows_place_run(rove_rows_blk *b, int32_t i, int64_t r, const void *k,
                                       const void *v, const float *ksc, const float *vsc,
                                       int64_t ks, int64_t ke, int64_t vs, int64_t ve,
                                       int32_t nblk, int next) {
  const void **pk = next ? b->kn : b->k, **pv = next ? b->vn : b->v;
  const float **sk = next ? b->kscn : b->ksc, **sv = next ? b->vscn : b->vsc;
  pk[i] = k ? (const char *)k + r * ks * ke : NULL;
  pv[i] = v ? (const char *)v + r * vs * ve : NULL;
  sk[i] = ksc ? ksc + r * nblk : NULL;
  sv[i] = vsc ? vsc + r * nblk : NULL;
}
static inline void rove_rows_blk_place(const rove_rows_args *t, rove_rows_blk *b, int32_t j0,
                                       int kin, int vin) {
  const int32_t blk = ROVE_ROWS_BLOCK, nblk = rove_q8_blocks(t->d);
  const int64_t ks = t->ks, vs = t->vs, ke = rove_dtype_size(t->k_type), ve = rove_dtype_size(t->v_type);
  /* runs: the block size, at most BLK, and at most the alignment of j_base (the call's
   * blocks from j0 = a multiple of BLK start where the pool's blocks do, up to j_base) */
  int64_t size = t->blocks ? (int64_t)1 << t->block_shift : blk;
  if (t->blocks && t->j_base && (t->j_base & -t->j_base) < size) size = t->j_base & -t->j_base;
  b->run = size < blk ? (int32_t)size : blk;
  b->run_shift = __builtin_ctz((unsigned)b->run);
  b->nr = (b->nb + b->run - 1) / b->run;
  b->ks = t->ks, b->vs = t->vs, b->kt = t->k_type, b->vt = t->v_type;
  for (int32_t i = 0; i < ROVE_ROWS_RUNS; i++) {
    b->k[i] = b->v[i] = b->kn[i] = b->vn[i] = NULL;
    b->ksc[i] = b->vsc[i] = b->kscn[i] = b->vscn[i] = NULL;
  }
  for (int32_t i = 0; i < b->nr; i++)
    rove_rows_place_run(b, i, rove_rows_row(t, j0 + i * b->run), t->k, t->v, t->k_scale,
                        t->v_scale, ks, ke, vs, ve, nblk, 0);
  if (!kin && !vin) return;
  /* the next rows, K only with kin, V only with vin */
  const void *kx = kin ? t->k : NULL, *vx = vin ? t->v : NULL;
  const float *kxs = kin ? t->k_scale : NULL, *vxs = vin ? t->v_scale : NULL;
  if (j0 + blk < t->nk) { /* this call's next block: its keys' runs */
    const int32_t next = t->nk - j0 - blk;
    for (int32_t i = 0, j = 0; i < ROVE_ROWS_RUNS && j < blk && j < next; i++, j += b->run)
      rove_rows_place_run(b, i, rove_rows_row(t, j0 + blk + j), kx, vx, kxs, vxs, ks, ke, vs, ve,
                          nblk, 1);
    return;
  }
  kx = kin ? t->k_next : NULL, vx = vin ? t->v_next : NULL;
  kxs = kin ? t->k_scale_next : NULL, vxs = vin ? t->v_scale_next : NULL;
  if (t->blocks && t->next_nk > 0) { /* the next call's key next_j + j: row r of its head */
    for (int32_t i = 0, j = 0; i < ROVE_ROWS_RUNS && j < blk && j < t->next_nk; i++, j += b->run)
      rove_rows_place_run(b, i, rove_rows_row(t, (int64_t)t->next_j + j - t->j_base), kx, vx,
                          kxs, vxs, ks, ke, vs, ve, nblk, 1);
    return;
  }
  /* the hint's first row; without blocks the others as if consecutive */
  for (int32_t i = 0, j = 0; i < (t->blocks ? 1 : ROVE_ROWS_RUNS) && j < blk; i++, j += b->run)
    rove_rows_place_run(b, i, j, kx, vx, kxs, vxs, ks, ke, vs, ve, nblk, 1);
}

/* Point b's runs (K: r = b->k, sc = b->ksc; V likewise) at consecutive fp32 rows x,
 * stride xs (rows the kernel widened or rotated into scratch): run i at x + i run xs. */
static inline void rove_rows_blk_at(const rove_rows_blk *b, const void **r, const float **sc,
                                    const float *x, int64_t xs) {
  for (int32_t i = 0; i < b->nr; i++) r[i] = x + (int64_t)i * b->run * xs, sc[i] = NULL;
}

/* The fp32 rows of a 16-key burst (the MHA decode prefetch on AMD cores: attn_rows-avx2.c,
 * attn_rows-avx512.c; their callers take it for fp32 rows only) for keys j = i run + ji
 * .. j + 15 of b (run i, its key ji), nearest first:
 *   0: K of these keys (as many of the 16 as the block has);
 *   1: K of the next 16: the rest of this run, else the next run, else (the block ends)
 *      the first of the block or call read next (kn[0]);
 *   2: V of these keys;
 *   3, 4: K and V of the same 16 keys of the block or call read next (kn[i], vn[i]: a
 *      block, or a call, ahead; at a block's last 16 keys entry 1 repeats part of entry 3
 *      of its first: the repeats measured faster, docs/performance.md).
 * Entry e: pf[e].n rows from address pf[e].a (0: none), pf[e].stride bytes apart.
 * Addresses are integers: rows of the block or call read next may lie past its buffer
 * (its length is not known here), which a prefetch may name but a pointer may not.
 * Nothing for K without b->pfk, for V without b->pfv. The order counts: the far entries
 * first measured 12 % slower (Zen 4, 12 x 64, 32768 keys). */
typedef struct rove_rows_pf {
  uintptr_t a;
  int64_t stride;
  int32_t n;
} rove_rows_pf;
#define ROVE_ROWS_BURST 5
static inline rove_rows_pf rove_rows_pf_at(const void *x, int64_t row, int64_t stride,
                                           int32_t n) {
  return (rove_rows_pf){x ? (uintptr_t)x + (uintptr_t)row * (uintptr_t)stride : 0, stride, n};
}
static inline void rove_rows_burst(const rove_rows_blk *b, int32_t i, int32_t ji,
                                   rove_rows_pf pf[ROVE_ROWS_BURST]) {
  const int64_t kb = b->ks * (int64_t)sizeof(float), vb = b->vs * (int64_t)sizeof(float);
  const int32_t j = i * b->run + ji, here = b->nb - j < 16 ? b->nb - j : 16;
  const int32_t after = b->nb - j - 16; /* keys of the block past these 16 */
  pf[0] = rove_rows_pf_at(b->k[i], ji, kb, here);
  if (after > 0 && ji + 16 < b->run)
    pf[1] = rove_rows_pf_at(b->k[i], ji + 16, kb, after < 16 ? after : 16);
  else if (after > 0) /* j + 16 starts run i + 1 */
    pf[1] = rove_rows_pf_at(b->k[i + 1], 0, kb, after < 16 ? after : 16);
  else
    pf[1] = rove_rows_pf_at(b->kn[0], 0, kb, 16);
  pf[2] = rove_rows_pf_at(b->v[i], ji, vb, here);
  pf[3] = rove_rows_pf_at(b->kn[i], ji, kb, 16);
  pf[4] = rove_rows_pf_at(b->vn[i], ji, vb, 16);
  if (!b->pfk) pf[0].a = pf[1].a = pf[3].a = 0;
  if (!b->pfv) pf[2].a = pf[4].a = 0;
}

/* Keys in run i of b (the last run may be short). */
static inline int32_t rove_rows_blk_len(const rove_rows_blk *b, int32_t i) {
  const int32_t j = i * b->run;
  return b->nb - j < b->run ? b->nb - j : b->run;
}

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
