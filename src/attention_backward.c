/* SPDX-License-Identifier: MIT */
/* rove_attention_backward: dq, dk, dv of rove_attention_forward, flash style (P is
 * recomputed from the forward's LSE block by block; no n x n matrix).
 *
 * The forward (docs/DESIGN.md §1), with q^_i = scale * M R_{P_i} q_i (M: m on the rotated
 * dims, 1 on the others; plain scale * q without ROTATE_Q), k~_j = M R_{p_j} k_j, v~_j =
 * R_{p_j} v_j (ROTATE_V), r_ij = q^_i . k~_j, s_ij = c tanh(r_ij / c) (softcap c, else
 * s = r), a_ij = exp(s_ij - lse_i) over the visible keys, o~_i = sum_j a_ij v~_j and
 * o_i = R_{P_i}^-1 o~_i (ROTATE_O). Rotations are orthogonal, so with do~_i = R_{P_i} do_i:
 *   D_i    = do_i . o_i  (= do~_i . o~_i), less dlse_i when the LSE has an upstream
 *            gradient (g->d_lse: lse_i = log sum_j e^{s_ij}, d lse_i / d s_ij = a_ij)
 *   dS_ij  = a_ij (do~_i . v~_j - D_i),   dR_ij = dS_ij (1 - (s_ij / c)^2)  (softcap)
 *   dv~_j  = sum_i a_ij do~_i,             dv_j = R_{p_j}^-1 dv~_j
 *   dk~_j  = sum_i dR_ij q^_i,             dk_j = R_{p_j}^-1 M dk~_j
 *   dq^_i  = sum_j dR_ij k~_j,             dq_i = scale R_{P_i}^-1 M dq^_i
 * GQA: the sums over i run over every query head of the KV head's group.
 *
 * Phases (each parallel, every task writing disjoint rows, task split by shape only, so
 * results are bitwise identical for any thread count; no atomics):
 *   0. the forward's cos/sin tables (rove_fwd_init, rove_fwd_table_task);
 *   1. rotate (batch x blocks of 64 positions, every head): q^, k~, v~ and do~ into
 *      [batch*heads][len][d] buffers, D_i, and k~, v~ again as transposed key blocks
 *      [d][ROVE_BWD_TK] (the tile's S and dP read them);
 *   2. key groups (batch x KV head x n_kg groups of ROVE_BWD_TK-key blocks): per set of
 *      KEY_SET blocks, dk, dv over every query block of every query head of the group
 *      (the kernel table's attn_bwd tile, src/kernels/attn_bwd_kernels.h; the set's
 *      tiles side by side for each query block), the tile also adding the block's dq^
 *      terms into the key group's own partial dq buffer (a query block's rows zeroed at
 *      the group's first tile there, and marked);
 *   3. query blocks (batch x KV head x ROVE_BWD_TQ queries): dq of each query head = the
 *      partials of the groups that marked the block, summed in group order, then rotated
 *      back (a causal call's early query blocks are touched by the first groups only: the
 *      other partial rows are neither zeroed nor read; 1.03x at 1024 x 8 x 128 on two
 *      threads).
 * Explicit angles (Selective RoPE): d psi of the key angles in phase 2 and d phi of the
 * query angles in phase 3, from the rotated-frame gradients before the inverse rotation
 * (add_pair_grads), summed over a GQA group in order.
 * Tiles whose position ranges see no pair are skipped (rove_classify), so causal and
 * windowed calls do about half / a band of the work. 5 block products per tile (S, dP,
 * dk, dv, dq) against the forward's 2; dq needs no atomics: each key group owns a partial
 * buffer, so the sum order is fixed by the shapes.
 * Workspace: (q_len * n_heads * (2 + n_kg) + kv_len * n_kv_heads * 4) * d floats per batch
 * row (n_kg = 4 .. 32 / (batch * n_kv_heads)), a byte per (key group, query block), plus a
 * tile's scratch and a key set's accumulators per thread (and the forward's validation
 * workspace). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"
#include "selective.h"
#include "attention_tile.h"

/* Key blocks whose tiles phase 2 runs side by side for each query block (key_blocks): the
 * query side is read from memory once per set. At 2, a set's key side (k~, k~^T, v~^T, dk,
 * dv: 5 blocks of 64 x d floats each) and one query block fit a 512 KB L2 at d = 128. */
#define KEY_SET 2

typedef struct rove_bwd {
  rove_fwd f; /* validation, positions, rotation tables */
  const rove_attention_grads *g;
  int64_t dos, dqs, dks, dvs; /* token strides, resolved */
  float *qh, *kt, *vt, *dot;  /* q^, k~, v~, do~: [batch*heads][len][d] */
  float *kT, *vT;             /* k~, v~ by key block, transposed: [batch*Hkv][n_kb][d][TK] */
  float *D;                   /* [batch*n_heads][q_len] */
  float *scratch;             /* per thread: the tile's scratch, then a key set's dk, dv or dq */
  int64_t scratch_floats;
  int64_t n_kb, n_qb;
  /* dq in one pass: the key blocks of a (batch, KV head) are cut into n_kg groups (a
   * task each); a group adds its dq^ contributions into its own partial buffer dqp[g]
   * ([batch*heads][q_len][d]), and phase 3 sums the groups in order. */
  int64_t n_kg;
  float *dqp;
  /* [batch*Hkv][n_kg][n_qb]: 1 where key group kg added to query block qb's partial rows
   * (a causal or windowed call leaves most pairs of groups and blocks untouched: their
   * partial rows are neither zeroed nor summed) */
  unsigned char *touched;
  void *block;
  size_t block_bytes;
} rove_bwd;

/* rove_tensor_extent in bytes of floats. */
static rove_status grad_extent(int64_t stride, int64_t width, int64_t rows, int64_t *resolved,
                               size_t *bytes) {
  int64_t e;
  const rove_status st = rove_tensor_extent(stride, width, rows, resolved, &e);
  if (st == ROVE_OK) *bytes = (size_t)e * sizeof(float);
  return st;
}

/* Strides of dout / dq / dk / dv; the gradients must not overlap each other or any input. */
static rove_status check_grads(rove_bwd *w, const rove_attention_args *a,
                               const rove_attention_grads *g) {
  const rove_fwd *f = &w->f;
  const rove_attention_config *c = &f->p->cfg;
  const int64_t wq = (int64_t)c->n_heads * c->head_dim, wkv = (int64_t)c->n_kv_heads * c->head_dim;
  const int64_t qrows = a->batch * (int64_t)a->q_len, krows = a->batch * (int64_t)a->kv_len;
  size_t bdo, bdq, bdk, bdv;
  rove_status st = grad_extent(g->dout_stride, wq, qrows, &w->dos, &bdo);
  if (st == ROVE_OK) st = grad_extent(g->dq_stride, wq, qrows, &w->dqs, &bdq);
  if (st == ROVE_OK) st = grad_extent(g->dk_stride, wkv, krows, &w->dks, &bdk);
  if (st == ROVE_OK) st = grad_extent(g->dv_stride, wkv, krows, &w->dvs, &bdv);
  if (st != ROVE_OK) return st;
  /* inputs: q, k, v, out (extents from the forward's strides), lse, dout; angles and
   * positions below */
  const size_t bq = (size_t)f->q_extent * sizeof(float);
  const size_t bk = (size_t)f->k_extent * sizeof(float);
  const size_t bv = (size_t)f->v_extent * sizeof(float);
  const size_t bo = (size_t)f->o_extent * sizeof(float);
  const size_t bl = (size_t)(qrows * c->n_heads) * sizeof(float);
  /* angle gradients: only with explicit angles, [batch][len][n_kv_heads][r/2] doubles */
  if ((g->d_q_angles || g->d_kv_angles) && !f->angles) return ROVE_ERR_INVALID_ARGUMENT;
  const size_t aw = (size_t)c->n_kv_heads * (size_t)f->p->half * sizeof(double);
  const size_t baq = f->angles ? (size_t)qrows * aw : 0, bak = f->angles ? (size_t)krows * aw : 0;
  /* the sinks' gradient: only with sinks, [n_heads] floats */
  if (g->d_sinks && !a->sinks) return ROVE_ERR_INVALID_ARGUMENT;
  const size_t bs = (size_t)c->n_heads * sizeof(float);
  const void *in[12] = {a->q,    a->k,      a->v,         a->out,   a->lse,   g->dout,
                        a->q_angles, a->kv_angles, a->q_pos, a->kv_pos, a->sinks, g->d_lse};
  const size_t inb[12] = {bq, bk, bv, bo, bl, bdo, baq, bak, rove_span_bytes(qrows, sizeof(int32_t)),
                          rove_span_bytes(krows, sizeof(int32_t)), a->sinks ? bs : 0, bl};
  void *outs[6] = {g->dq, g->dk, g->dv, g->d_q_angles, g->d_kv_angles, g->d_sinks};
  const size_t outb[6] = {bdq, bdk, bdv, g->d_q_angles ? baq : 0, g->d_kv_angles ? bak : 0,
                          g->d_sinks ? bs : 0};
  for (int o = 0; o < 6; o++) {
    for (int i = 0; i < 12; i++)
      if (rove_overlap(outs[o], outb[o], in[i], inb[i])) return ROVE_ERR_INVALID_ARGUMENT;
    for (int o2 = 0; o2 < o; o2++)
      if (rove_overlap(outs[o], outb[o], outs[o2], outb[o2])) return ROVE_ERR_INVALID_ARGUMENT;
  }
  return ROVE_OK;
}

/* Angle gradients of one row with the plan's rotated dims (the pair_grads kernel,
 * selective_kernels.h). */
static void add_pair_grads(const rove_plan *p, const float *g, const float *y, double *out,
                           double sign) {
  p->kern->pair_grads(p->half, rove_plan_rot_first(p),
                      p->cfg.rope.pairing == ROVE_PAIRING_INTERLEAVED, g, y, out, sign);
}

/* out[c][j] = rows[j][c] for j < nj (<= ROVE_BWD_TK), c < d: blocks of 8 keys x 8 dims,
 * each read row piece contiguous and each written piece of a row of out contiguous (the
 * compiler keeps the 64 values in registers or L1; a per-element loop with a tail test
 * took ~10 instructions per value). */
static void transpose_rows(float *out, const float *rows, int64_t nj, int32_t d) {
  int64_t j0 = 0;
  for (; j0 + 8 <= nj; j0 += 8) {
    int32_t c0 = 0;
    for (; c0 + 8 <= d; c0 += 8) {
      float blk[8][8];
      for (int r = 0; r < 8; r++)
        for (int c = 0; c < 8; c++) blk[c][r] = rows[(j0 + r) * d + c0 + c];
      for (int c = 0; c < 8; c++)
        memcpy(out + (int64_t)(c0 + c) * ROVE_BWD_TK + j0, blk[c], sizeof blk[c]);
    }
    for (; c0 < d; c0++)
      for (int r = 0; r < 8; r++) out[(int64_t)c0 * ROVE_BWD_TK + j0 + r] = rows[(j0 + r) * d + c0];
  }
  for (; j0 < nj; j0++)
    for (int32_t c = 0; c < d; c++) out[(int64_t)c * ROVE_BWD_TK + j0] = rows[j0 * d + c];
}

/* Phase 1, one task per (batch, block of 64 positions): for every head, the block's q^
 * and do~ rows and D; for every KV head, its k~ and v~ rows and their transposed key
 * block. A block's cos / sin rows (shared by all heads unless the angles are explicit)
 * and its token rows (all heads side by side) are read together, so each is fetched
 * from memory once. */
static void rotate_task(int64_t task, int tid, void *vctx) {
  (void)tid;
  rove_bwd *w = vctx;
  const rove_fwd *f = &w->f;
  const rove_plan *p = f->p;
  const rove_kernels *kn = p->kern;
  const int32_t d = p->cfg.head_dim, H = p->cfg.n_heads, Hkv = p->cfg.n_kv_heads, G = H / Hkv;
  const int64_t n_rb = w->n_qb > w->n_kb ? w->n_qb : w->n_kb;
  const int64_t b = task / n_rb, i0 = task % n_rb * ROVE_BWD_TQ, j0 = task % n_rb * ROVE_BWD_TK;
  const int64_t Lq = f->q_len, Lk = f->kv_len;
  const int64_t ni = i0 >= Lq ? 0 : Lq - i0 < ROVE_BWD_TQ ? Lq - i0 : ROVE_BWD_TQ;
  const int64_t nj = j0 >= Lk ? 0 : Lk - j0 < ROVE_BWD_TK ? Lk - j0 : ROVE_BWD_TK;
  const float scale = p->cfg.scale, m = (float)p->attn_factor;
  const rove_attention_args *a = f->a;
  for (int64_t h = 0; ni > 0 && h < H; h++) {
    const int64_t t = b * H + h, kvh = h / G;
    rove_rot rq = rove_fwd_qrot(f, b, kvh, i0, p->cfg.rotate & ROVE_ROTATE_Q);
    rove_rot ro = rove_fwd_qrot(f, b, kvh, i0, p->cfg.rotate & ROVE_ROTATE_O);
    const float *q = a->q + (b * Lq + i0) * f->qs + h * d;
    const float *o = a->out + (b * Lq + i0) * f->os + h * d;
    const float *dout = w->g->dout + (b * Lq + i0) * w->dos + h * d;
    const float *dlse = w->g->d_lse ? w->g->d_lse + t * Lq + i0 : NULL;
    kn->rotate(w->qh + (t * Lq + i0) * d, d, q, f->qs, ni, d, &rq, scale * m, scale, 0);
    kn->rotate(w->dot + (t * Lq + i0) * d, d, dout, w->dos, ni, d, &ro, 1.0f, 1.0f, 0);
    for (int64_t i = 0; i < ni; i++) { /* D_i = do_i . o_i in double (one value per row) */
      const float *oi = o + i * f->os, *gi = dout + i * w->dos;
      /* four sums over c mod 4, so the additions do not wait on each other */
      double s[4] = {0.0, 0.0, 0.0, 0.0};
      int32_t c = 0;
      for (; c + 4 <= d; c += 4)
        for (int u = 0; u < 4; u++) s[u] += (double)oi[c + u] * gi[c + u];
      for (; c < d; c++) s[0] += (double)oi[c] * gi[c];
      const double dl = dlse ? (double)dlse[i] : 0.0;
      w->D[t * Lq + i0 + i] = (float)(((s[0] + s[1]) + (s[2] + s[3])) - dl);
    }
  }
  for (int64_t kvh = 0; nj > 0 && kvh < Hkv; kvh++) {
    const int64_t bk = b * Hkv + kvh, kb = j0 / ROVE_BWD_TK;
    rove_rot rk = rove_fwd_krot(f, b, kvh, j0, p->cfg.rotate & ROVE_ROTATE_K);
    rove_rot rv = rove_fwd_krot(f, b, kvh, j0, p->cfg.rotate & ROVE_ROTATE_V);
    float *kr = w->kt + (bk * Lk + j0) * d, *vr = w->vt + (bk * Lk + j0) * d;
    kn->rotate(kr, d, rove_fwd_krow(f, b, kvh, j0), f->ks, nj, d, &rk, f->k_mul, 1.0f, 0);
    kn->rotate(vr, d, rove_fwd_vrow(f, b, kvh, j0), f->vs, nj, d, &rv, 1.0f, 1.0f, 0);
    /* the transposed block [d][TK], zero past the last key */
    float *kT = w->kT + (bk * w->n_kb + kb) * d * ROVE_BWD_TK;
    float *vT = w->vT + (bk * w->n_kb + kb) * d * ROVE_BWD_TK;
    if (nj < ROVE_BWD_TK) {
      memset(kT, 0, sizeof(float) * (size_t)(d * ROVE_BWD_TK));
      memset(vT, 0, sizeof(float) * (size_t)(d * ROVE_BWD_TK));
    }
    transpose_rows(kT, kr, nj, d);
    transpose_rows(vT, vr, nj, d);
  }
}

/* The tile of query rows [i0, i0 + ni) of (batch row) task t = b * H + h against key
 * block kb of KV head bk; 0 when no pair of the two blocks is visible. */
static int tile_args(const rove_bwd *w, int64_t t, int64_t i0, int64_t ni, int64_t bk,
                     int64_t kb, rove_bwd_tile *a) {
  const rove_fwd *f = &w->f;
  const rove_plan *p = f->p;
  const int32_t d = p->cfg.head_dim;
  const int64_t b = t / p->cfg.n_heads, Lq = f->q_len, Lk = f->kv_len, j0 = kb * ROVE_BWD_TK;
  const int64_t nj = Lk - j0 < ROVE_BWD_TK ? Lk - j0 : ROVE_BWD_TK;
  const int32_t *qp = f->qpos + b * f->qpos_bstride + i0, *kp = f->kpos + b * f->kpos_bstride + j0;
  int32_t qlo, qhi, klo, khi;
  rove_pos_range(qp, ni, &qlo, &qhi);
  rove_pos_range(kp, nj, &klo, &khi);
  const int c = rove_classify(qlo, qhi, klo, khi, p->cfg.causal, p->cfg.window);
  if (c == 0) return 0;
  const int64_t tb = (bk * w->n_kb + kb) * d * ROVE_BWD_TK; /* transposed block */
  *a = (rove_bwd_tile){.q = w->qh + (t * Lq + i0) * d, .dout = w->dot + (t * Lq + i0) * d,
                       .lse = f->a->lse + t * Lq + i0, .D = w->D + t * Lq + i0,
                       .k = w->kt + (bk * Lk + j0) * d, .kT = w->kT + tb, .vT = w->vT + tb,
                       .nq = (int32_t)ni, .nk = (int32_t)nj, .d = d, .q_pos = qp, .k_pos = kp,
                       .mask = c == 2, .causal = p->cfg.causal, .window = p->cfg.window,
                       .softcap = p->cfg.softcap};
  return 1;
}

/* Phase 2, one task per (batch, KV head, key group): for each key block of the group, dk
 * and dv over every query block of every query head of the group in a fixed order, and
 * the block's dq^ contributions into the group's partial dq buffer (rows of a query block
 * zeroed at the group's first tile there, marked in touched). */
static void key_blocks(rove_bwd *w, int tid, int64_t bk, int64_t kb0, int64_t nb, float *dqp,
                       unsigned char *touched);

static void key_task(int64_t task, int tid, void *vctx) {
  rove_bwd *w = vctx;
  const rove_fwd *f = &w->f;
  const rove_plan *p = f->p;
  const int64_t bk = task / w->n_kg, kg = task % w->n_kg;
  const int64_t nq = (int64_t)f->batch * p->cfg.n_heads * f->q_len * p->cfg.head_dim;
  float *dqp = w->dqp + kg * nq;
  unsigned char *touched = w->touched + task * w->n_qb; /* task = bk * n_kg + kg */
  memset(touched, 0, (size_t)w->n_qb);
  const int64_t kb0 = w->n_kb * kg / w->n_kg, kb1 = w->n_kb * (kg + 1) / w->n_kg;
  for (int64_t kb = kb0; kb < kb1; kb += KEY_SET)
    key_blocks(w, tid, bk, kb, kb1 - kb < KEY_SET ? kb1 - kb : KEY_SET, dqp, touched);
}

/* Key blocks kb0 .. kb0 + nb - 1 (nb <= KEY_SET) of (batch, KV head) bk: for each query
 * block of each query head of the group, the tiles of the nb key blocks one after the
 * other, so the query side (q^, do~ and the partial dq rows) is read once per set
 * rather than once per key block. Each dk / dv still sums over (head, query block) in
 * order, and each partial dq row over the key blocks in order, as one block at a time
 * would. */
static void key_blocks(rove_bwd *w, int tid, int64_t bk, int64_t kb0, int64_t nb, float *dqp,
                       unsigned char *touched) {
  const rove_fwd *f = &w->f;
  const rove_plan *p = f->p;
  const int32_t d = p->cfg.head_dim, H = p->cfg.n_heads, Hkv = p->cfg.n_kv_heads, G = H / Hkv;
  const int64_t b = bk / Hkv, kvh = bk % Hkv;
  const int64_t Lq = f->q_len, Lk = f->kv_len;
  float *ws = w->scratch + (int64_t)tid * w->scratch_floats;
  float *acc = ws + ROVE_BWD_SCRATCH; /* per block: dk [TK][d], then dv [TK][d] */
  memset(acc, 0, sizeof(float) * (size_t)(nb * 2 * ROVE_BWD_TK * d));
  for (int64_t h = kvh * G; h < (kvh + 1) * G; h++)
    for (int64_t i0 = 0; i0 < Lq; i0 += ROVE_BWD_TQ)
      for (int64_t s = 0; s < nb; s++) {
        rove_bwd_tile a;
        const int64_t t = b * H + h;
        const int64_t ni = Lq - i0 < ROVE_BWD_TQ ? Lq - i0 : ROVE_BWD_TQ;
        if (!tile_args(w, t, i0, ni, bk, kb0 + s, &a)) continue;
        if (!touched[i0 / ROVE_BWD_TQ]) { /* the group's first tile of this query block: */
          touched[i0 / ROVE_BWD_TQ] = 1;  /* its partial rows of every head start at 0 */
          for (int64_t hh = kvh * G; hh < (kvh + 1) * G; hh++)
            memset(dqp + ((b * H + hh) * Lq + i0) * d, 0, sizeof(float) * (size_t)(ni * d));
        }
        a.dk = acc + s * 2 * ROVE_BWD_TK * d, a.dv = a.dk + ROVE_BWD_TK * d;
        a.dq = dqp + (t * Lq + i0) * d, a.scratch = ws;
        p->kern->attn_bwd(&a);
      }
  for (int64_t s = 0; s < nb; s++) {
    const int64_t j0 = (kb0 + s) * ROVE_BWD_TK;
    const int64_t nj = Lk - j0 < ROVE_BWD_TK ? Lk - j0 : ROVE_BWD_TK;
    float *dk = acc + s * 2 * ROVE_BWD_TK * d, *dv = dk + ROVE_BWD_TK * d;
    if (w->g->d_kv_angles) { /* d psi_j from k~ = M R(psi) k and v~ = R(psi) v */
      const int32_t half = p->half;
      for (int64_t j = 0; j < nj; j++) {
        double *da = w->g->d_kv_angles + ((b * Lk + j0 + j) * Hkv + kvh) * half;
        memset(da, 0, sizeof(double) * (size_t)half);
        if (p->cfg.rotate & ROVE_ROTATE_K)
          add_pair_grads(p, dk + j * d, w->kt + (bk * Lk + j0 + j) * d, da, 1.0);
        if (p->cfg.rotate & ROVE_ROTATE_V)
          add_pair_grads(p, dv + j * d, w->vt + (bk * Lk + j0 + j) * d, da, 1.0);
      }
    }
    rove_rot rk = rove_fwd_krot(f, b, kvh, j0, p->cfg.rotate & ROVE_ROTATE_K);
    rove_rot rv = rove_fwd_krot(f, b, kvh, j0, p->cfg.rotate & ROVE_ROTATE_V);
    float *dko = w->g->dk + (b * Lk + j0) * w->dks + kvh * d;
    float *dvo = w->g->dv + (b * Lk + j0) * w->dvs + kvh * d;
    p->kern->rotate(dko, w->dks, dk, d, nj, d, &rk, f->k_mul, 1.0f, 1);
    p->kern->rotate(dvo, w->dvs, dv, d, nj, d, &rv, 1.0f, 1.0f, 1);
  }
}

/* Phase 3: query rows [i0, i0 + ROVE_BWD_TQ) of one (batch, KV head): dq of each query
 * head of the group from the key groups' partial sums; with explicit angles also d phi of
 * the rows (summed over the group's heads in order: q^ = scale M R(phi) q and the output
 * o = R(phi)^-1 o~, whose derivative is -J o). */
static void query_task(int64_t task, int tid, void *vctx) {
  rove_bwd *w = vctx;
  const rove_fwd *f = &w->f;
  const rove_plan *p = f->p;
  const int32_t d = p->cfg.head_dim, H = p->cfg.n_heads, Hkv = p->cfg.n_kv_heads, G = H / Hkv;
  const int32_t half = p->half;
  const int64_t bk = task / w->n_qb, b = bk / Hkv, kvh = bk % Hkv, Lq = f->q_len;
  const int64_t i0 = task % w->n_qb * ROVE_BWD_TQ;
  const int64_t ni = Lq - i0 < ROVE_BWD_TQ ? Lq - i0 : ROVE_BWD_TQ;
  float *dq = w->scratch + (int64_t)tid * w->scratch_floats + ROVE_BWD_SCRATCH;
  double *dphi = w->g->d_q_angles ? w->g->d_q_angles + ((b * Lq + i0) * Hkv + kvh) * half : NULL;
  for (int64_t i = 0; dphi && i < ni; i++)
    memset(dphi + i * Hkv * half, 0, sizeof(double) * (size_t)half);
  rove_rot rq = rove_fwd_qrot(f, b, kvh, i0, p->cfg.rotate & ROVE_ROTATE_Q);
  const float scale = p->cfg.scale, m = (float)p->attn_factor;
  for (int64_t h = kvh * G; h < (kvh + 1) * G; h++) {
    const int64_t t = b * H + h;
    /* dq^ = the partial sums of the key groups that touched this query block, added in
     * group order (0 when none did: no key visible) */
    const int64_t nq = (int64_t)f->batch * H * Lq * d, off = (t * Lq + i0) * d;
    const unsigned char *touched = w->touched + bk * w->n_kg * w->n_qb + i0 / ROVE_BWD_TQ;
    int first = 1;
    for (int64_t kg = 0; kg < w->n_kg; kg++) {
      if (!touched[kg * w->n_qb]) continue;
      const float *src = w->dqp + kg * nq + off;
      if (first)
        memcpy(dq, src, sizeof(float) * (size_t)(ni * d)), first = 0;
      else
        for (int64_t e = 0; e < ni * d; e++) dq[e] += src[e];
    }
    if (first) memset(dq, 0, sizeof(float) * (size_t)(ni * d));
    for (int64_t i = 0; dphi && i < ni; i++) {
      double *da = dphi + i * Hkv * half;
      if (p->cfg.rotate & ROVE_ROTATE_Q)
        add_pair_grads(p, dq + i * d, w->qh + (t * Lq + i0 + i) * d, da, 1.0);
      if (p->cfg.rotate & ROVE_ROTATE_O)
        add_pair_grads(p, w->g->dout + (b * Lq + i0 + i) * w->dos + h * d,
                       f->a->out + (b * Lq + i0 + i) * f->os + h * d, da, -1.0);
    }
    p->kern->rotate(w->g->dq + (b * Lq + i0) * w->dqs + h * d, w->dqs, dq, d, ni, d, &rq,
                    scale * m, scale, 1);
  }
}

/* Attention sinks: out_i = o'_i / (l_i + e^{s_h}) (o'_i, l_i: the sums over the keys),
 * so d out_i / d s_h = -e^{s_h - lse_i} out_i and
 *   d s_h = -sum_{b, i} e^{s_h - lse_i} (do_i . out_i) = -sum_{b, i} e^{s_h - lse_i} D_i,
 * summed in double in (b, i) order on the calling thread (B H q_len terms). The other
 * gradients need nothing more: a_ij = exp(s_ij - lse_i) with the forward's LSE, which
 * holds the sink, and D_i is do_i . out_i as without sinks. With an LSE gradient
 * (d lse_i / d s_h = e^{s_h - lse_i}) D_i holds do_i . out_i - dlse_i, which adds
 * sum_i e^{s_h - lse_i} dlse_i. */
static void sink_grads(const rove_bwd *w, float *d_sinks) {
  const rove_fwd *f = &w->f;
  const int64_t B = f->batch, H = f->p->cfg.n_heads, Lq = f->q_len;
  for (int64_t h = 0; h < H; h++) {
    const double s = (double)f->a->sinks[h];
    double sum = 0.0;
    for (int64_t b = 0; b < B; b++) {
      const float *lse = f->a->lse + (b * H + h) * Lq, *D = w->D + (b * H + h) * Lq;
      for (int64_t i = 0; i < Lq; i++) sum += exp(s - (double)lse[i]) * (double)D[i];
    }
    d_sinks[h] = (float)-sum;
  }
}

rove_status rove_attention_backward(const rove_plan *p, const rove_attention_args *a,
                                    const rove_attention_grads *g) {
  if (!p || !a || !g || !a->lse || !g->dout || !g->dq || !g->dk || !g->dv)
    return ROVE_ERR_INVALID_ARGUMENT;
  rove_bwd w;
  memset(&w, 0, sizeof w);
  rove_status st = rove_fwd_init(&w.f, p, a, NULL, NULL);
  if (st != ROVE_OK) return st;
  st = check_grads(&w, a, g);
  const int32_t d = p->cfg.head_dim;
  const int64_t B = a->batch, H = p->cfg.n_heads, Hkv = p->cfg.n_kv_heads;
  int64_t nq = 0, nk = 0, nD = 0, nT = 0, nflags = 0, total = 0;
  w.n_kb = (a->kv_len + ROVE_BWD_TK - 1) / ROVE_BWD_TK;
  w.n_qb = (a->q_len + ROVE_BWD_TQ - 1) / ROVE_BWD_TQ;
  w.scratch_floats = (ROVE_BWD_SCRATCH + KEY_SET * 2 * ROVE_BWD_TK * d + 15) / 16 * 16;
  /* key groups: enough tasks for a team (>= 32 over batch x KV heads, >= 4 each), at
   * most one per key block; shapes only, never the thread count */
  w.n_kg = (32 + B * Hkv - 1) / (B * Hkv);
  if (w.n_kg < 4) w.n_kg = 4;
  if (w.n_kg > w.n_kb) w.n_kg = w.n_kb;
  const int32_t nt = p->cfg.n_threads;
  const int64_t kt = B * Hkv * w.n_kg, qt = B * Hkv * w.n_qb;
  const int64_t team = rove_team_size(nt, kt > qt ? kt : qt);
  if (st == ROVE_OK &&
      (!rove_mul_i64(B * H * a->q_len, d, &nq) || !rove_mul_i64(B * Hkv * a->kv_len, d, &nk) ||
       !rove_mul_i64(B * Hkv * w.n_kb, d * ROVE_BWD_TK, &nT) ||
       !rove_mul_i64(B * H, a->q_len, &nD) || nq > INT64_MAX / 64 || nk > INT64_MAX / 64 ||
       nT > INT64_MAX / 64 ||
       nq > INT64_MAX / 64 / w.n_kg || !rove_mul_i64(kt, w.n_qb, &nflags) ||
       nflags > INT64_MAX / 64 ||
       !rove_add_i64((2 + w.n_kg) * nq + 2 * nk + 2 * nT + nD + (nflags + 3) / 4,
                     team * w.scratch_floats + 80, &total) ||
       total > INT64_MAX / 8 || (uint64_t)total > SIZE_MAX / 8))
    st = ROVE_ERR_SIZE_OVERFLOW;
  if (st == ROVE_OK) {
    float *block = rove_pool_get(p->pool, (size_t)total * sizeof(float), &w.block_bytes);
    if (!block) st = ROVE_ERR_OUT_OF_MEMORY;
    w.block = block;
    w.qh = block, w.dot = w.qh + nq, w.kt = w.dot + nq, w.vt = w.kt + nk, w.kT = w.vt + nk;
    w.vT = w.kT + nT, w.dqp = w.vT + nT, w.D = w.dqp + w.n_kg * nq;
    float *flags = w.D + (nD + 15) / 16 * 16;
    w.touched = (unsigned char *)flags;
    w.scratch = flags + ((nflags + 3) / 4 + 15) / 16 * 16;
  }
  if (st != ROVE_OK) {
    rove_fwd_release(&w.f);
    return st;
  }
  w.g = g;
  rove_parallel_for(nt, w.f.n_tables, rove_fwd_table_task, &w.f);
  rove_parallel_for(nt, B * (w.n_qb > w.n_kb ? w.n_qb : w.n_kb), rotate_task, &w);
  if (g->d_sinks) sink_grads(&w, g->d_sinks);
  rove_parallel_for(nt, kt, key_task, &w);
  rove_parallel_for(nt, qt, query_task, &w);
  rove_pool_put(p->pool, w.block, w.block_bytes);
  rove_fwd_release(&w.f);
  return ROVE_OK;
}
