/* SPDX-License-Identifier: MIT */
/* rove_gla_backward: the driver of the two backward sweeps (the chunk algebra is in
 * kernels/gla_kernels.h, its loops in kernels/gla_bwd_body.h).
 *
 * One task per (sequence b: a batch row or, with cu_seqlens, a packed sequence; group of
 * G heads h0 .. h0+G-1), the whole sequence:
 *   1. state sweep, chunk by chunk from the initial states: the chunk's k~, v~ and g of
 *      the G heads are loaded and the bwd_state kernel moves each head's S past it; S
 *      before each chunk is kept (the chunk-start states, G dk dv floats a chunk). After
 *      the last chunk S is S_T.
 *   2. gradient sweep, last chunk first, from H = d_final_state: q~ (= scale R_t q), k~,
 *      v~, g and do~ = R_t do (ROTATE_O; o = R_t^{-1} o~) are loaded, the bwd_grads kernel
 *      takes the kept S of the chunk and writes each head's dq~, dk~, dv~ and moves its H
 *      to the chunk start; then token by token from the end: dg_t = sum_{u >= t} (q~_u
 *      dq~_u - k~_u dk~_u) + [S_T * dS_T summed over the value dim] (a double carry per
 *      head and key channel), the angle gradients, and the gradients rotated back into
 *      the user's rows: dq = scale R^{-1} dq~, dk = R^{-1} dk~, dv = R^{-1} dv~.
 *   3. d_initial_state = H.
 * When the chunk-start states of the whole sequence pass the plan's bwd_keep_floats, the
 * sequence is cut into segments of M chunks (M states fit): the state sweep keeps only
 * each segment's first state, and each segment, last first, runs the state sweep again
 * from it (keeping its M states) before its gradient sweep. Same values, one more pass
 * of the state sweep.
 * Tensor rows of token t of (b, h) start at ((b T + t) H + h) * width, so the G heads'
 * rows of one token are one contiguous run: chunks are read and written token by token,
 * a run per tensor (as the forward's gla_rows.c does; per-head tasks read 256-byte pieces
 * 3 KB apart and took ~1.5x as long to load at 12 x 64). Only this task touches the rows
 * and states of its heads, and each head's result depends on its own rows only, so the
 * result does not depend on the threads or the grouping.
 * Per-thread scratch (floats, 64-byte parts): cos, sin [C][G][half]; q, k, g, dq, dk
 * [G][C][dk]; v, do, dv [G][C][dv]; S, H [G][dk][dv]; carry [G][dk] doubles; the kernel
 * work (one head at a time); the kept states [M][G][dk][dv] and, with segments, the
 * segment starts [segments][G][dk][dv]; and, while they fit in TABLE_CACHE_FLOATS, cos and
 * sin [T][G][half] of the whole sequence. */
#include <stdlib.h>
#include <string.h>

#include "gla_internal.h"
#include "selective.h"

#define SERIAL_MACS (1 << 20) /* smaller calls run on the calling thread */
/* The state sweep keeps the cos/sin tables of the whole sequence for the gradient sweep
 * (one sincos per angle: computed twice they took ~15 % of the backward at 12 x 64, 4096
 * tokens) while they fit in this many floats per thread; longer sequences compute them
 * again. */
#define TABLE_CACHE_FLOATS (1 << 22)
#define GROUP_FLOATS (1 << 19) /* rows and states of one task's heads: 2 MiB at most */
#define PREFETCH_TOKENS 4      /* token runs requested ahead of the one being loaded */

typedef struct {
  const rove_gla_plan *p;
  const rove_gla_args *a;
  const rove_gla_grads *g;
  int rot_q, rot_k, rot_v, rot_o, rot_any;
  int32_t group;        /* heads per task */
  int64_t chunks;       /* chunks of the longest sequence */
  int64_t seg_chunks;   /* M: chunks per segment (all of them: one segment) */
  const int32_t *order; /* sequence of task slot i / groups (NULL: i / groups) */
  int64_t state_floats; /* G dk dv rounded up to 16: one kept state of the group */
  int64_t cache_floats; /* tables of the whole sequence per thread (0: not kept) */
  int64_t scratch_floats;
  float *scratch;
} gb_call;

typedef struct {
  float *cos_t, *sin_t, *q, *k, *g, *dq, *dk, *v, *dout, *dv, *s, *h, *work;
  float *kept;              /* [M][G][dk][dv]: S before each chunk of the segment */
  float *seg_first;         /* [segments][G][dk][dv], with segments only */
  float *cos_all, *sin_all; /* the kept tables [T][G][half], or NULL */
  double *carry;
} gb_scratch;

/* The sequence of a task: its index (the state row), first token row, length, chunks. */
typedef struct {
  int64_t b, start, len, chunks;
} gb_seq;

/* Floats of one head's chunk rows, states and tables. */
static int64_t head_floats(const rove_gla_plan *p) {
  const int64_t C = p->cfg.chunk, dk = p->cfg.key_dim, dv = p->cfg.value_dim;
  return C * (5 * dk + 3 * dv + 2 * p->half) + 2 * dk * dv + 2 * dk;
}

/* Segments of a sequence of the given chunks (of the longest: the scratch's count). */
static int64_t segments(const gb_call *c, int64_t chunks) {
  return (chunks + c->seg_chunks - 1) / c->seg_chunks;
}

static int64_t scratch_floats(const gb_call *c) {
  const rove_gla_plan *p = c->p;
  const int64_t C = p->cfg.chunk, dk = p->cfg.key_dim, dv = p->cfg.value_dim, G = c->group;
  const int64_t nseg = segments(c, c->chunks);
  return 2 * c->cache_floats + 2 * rove_gla_round16(C * G * p->half) +
         5 * rove_gla_round16(G * C * dk) + 3 * rove_gla_round16(G * C * dv) +
         2 * c->state_floats + rove_gla_round16(2 * G * dk) +
         rove_gla_round16(rove_gla_bwd_work_floats(C, dk, dv)) +
         (c->seg_chunks + (nseg > 1 ? nseg : 0)) * c->state_floats;
}

static gb_scratch scratch_at(const gb_call *c, int tid) {
  const int64_t C = c->p->cfg.chunk, dk = c->p->cfg.key_dim, dv = c->p->cfg.value_dim;
  const int64_t G = c->group;
  const int64_t tab = rove_gla_round16(C * G * c->p->half), ck = rove_gla_round16(G * C * dk),
                cv = rove_gla_round16(G * C * dv);
  gb_scratch w;
  w.cos_t = c->scratch + tid * c->scratch_floats;
  w.sin_t = w.cos_t + tab;
  w.q = w.sin_t + tab;
  w.k = w.q + ck;
  w.g = w.k + ck;
  w.dq = w.g + ck;
  w.dk = w.dq + ck;
  w.v = w.dk + ck;
  w.dout = w.v + cv;
  w.dv = w.dout + cv;
  w.s = w.dv + cv;
  w.h = w.s + c->state_floats;
  w.carry = (double *)(w.h + c->state_floats);
  w.work = w.h + c->state_floats + rove_gla_round16(2 * G * dk);
  w.kept = w.work + rove_gla_round16(rove_gla_bwd_work_floats(C, dk, dv));
  float *next = w.kept + c->seg_chunks * c->state_floats;
  w.seg_first = segments(c, c->chunks) > 1 ? next : NULL;
  if (w.seg_first) next += segments(c, c->chunks) * c->state_floats;
  w.cos_all = c->cache_floats ? next : NULL;
  w.sin_all = c->cache_floats ? next + c->cache_floats : NULL;
  return w;
}

/* Row index (token t of sequence sq, head h) of the [B T][H] tensors. */
static int64_t row_of(const gb_call *c, const gb_seq *sq, int64_t h, int64_t t) {
  return (sq->start + t) * c->p->cfg.n_heads + h;
}

/* The rotation of the G heads' rows of token i of the chunk (tables [C][G][half]), or
 * none: rows j = 0 .. G-1 of one rotate call are the heads. */
static rove_rot rot_token(const gb_call *c, const gb_scratch *ws, int32_t i, int on) {
  /* rotary dims first; the rows are requested by prefetch_token or sit in the scratch */
  rove_rot r = {NULL, NULL, c->p->half, (int32_t)c->p->cfg.pairing, 0, 0, 1};
  if (on)
    r.cos = ws->cos_t + (int64_t)i * c->group * c->p->half,
    r.sin = ws->sin_t + (int64_t)i * c->group * c->p->half;
  return r;
}

/* The input runs of the G heads at tensor row r (grads: q and do too). */
static void prefetch_token(const gb_call *c, int64_t r, int grads) {
  const rove_gla_args *a = c->a;
  const int64_t dk = c->p->cfg.key_dim, dv = c->p->cfg.value_dim, G = c->group;
  if (grads) rove_gla_prefetch_span(a->q + r * dk, G * dk * (int64_t)sizeof(float));
  rove_gla_prefetch_span(a->k + r * dk, G * dk * (int64_t)sizeof(float));
  rove_gla_prefetch_span(a->g + r * dk, G * dk * (int64_t)sizeof(float));
  rove_gla_prefetch_span(a->v + r * dv, G * dv * (int64_t)sizeof(float));
  if (grads) rove_gla_prefetch_span(c->g->dout + r * dv, G * dv * (int64_t)sizeof(float));
}

/* Rows n .. np-1 of each head's [C][width] block zero. */
static void zero_pad(const gb_call *c, float *x, int64_t width, int32_t n, int32_t np) {
  if (np <= n) return;
  const int64_t C = c->p->cfg.chunk;
  for (int32_t j = 0; j < c->group; j++)
    memset(x + ((int64_t)j * C + n) * width, 0, (size_t)((np - n) * width) * sizeof(float));
}

/* Tokens t0 .. t0+n-1 of the group's heads: the tables (formed when make_tables, else
 * only pointed at in the kept tables), k~, v~, g and (grads) q~, do~ into each head's
 * [C][width] rows; rows n .. np-1 zero. */
static void load_chunk(const gb_call *c, gb_scratch *ws, const gb_seq *sq, int64_t h0,
                       int64_t t0, int32_t n, int32_t np, int grads, int make_tables) {
  const rove_gla_plan *p = c->p;
  const rove_gla_args *a = c->a;
  const int64_t dk = p->cfg.key_dim, dv = p->cfg.value_dim, H = p->cfg.n_heads, w = p->half;
  const int64_t C = p->cfg.chunk, G = c->group, hk = C * dk, hv = C * dv;
  const int64_t r0 = row_of(c, sq, h0, t0);
  if (ws->cos_all) ws->cos_t = ws->cos_all + t0 * G * w, ws->sin_t = ws->sin_all + t0 * G * w;
  const float sc = p->cfg.scale;
  for (int32_t i = 0; i < n && i < PREFETCH_TOKENS; i++) prefetch_token(c, r0 + i * H, grads);
  for (int32_t i = 0; i < n; i++) {
    if (i + PREFETCH_TOKENS < n) prefetch_token(c, r0 + (i + PREFETCH_TOKENS) * H, grads);
    const int64_t r = r0 + i * H;
    if (make_tables)
      rove_angle_table(p->kern, ws->cos_t + i * G * w, ws->sin_t + i * G * w, a->angles + r * w,
                       G * w);
    const rove_rot rk = rot_token(c, ws, i, c->rot_k), rv = rot_token(c, ws, i, c->rot_v);
    p->kern->rotate(ws->k + i * dk, hk, a->k + r * dk, dk, G, (int32_t)dk, &rk, 1.0f, 1.0f, 0);
    p->kern->rotate(ws->v + i * dv, hv, a->v + r * dv, dv, G, (int32_t)dv, &rv, 1.0f, 1.0f, 0);
    if (grads) {
      const rove_rot rq = rot_token(c, ws, i, c->rot_q), ro = rot_token(c, ws, i, c->rot_o);
      p->kern->rotate(ws->q + i * dk, hk, a->q + r * dk, dk, G, (int32_t)dk, &rq, sc, sc, 0);
      p->kern->rotate(ws->dout + i * dv, hv, c->g->dout + r * dv, dv, G, (int32_t)dv, &ro, 1.0f,
                      1.0f, 0);
    }
    for (int64_t j = 0; j < G; j++)
      memcpy(ws->g + j * hk + i * dk, a->g + (r + j) * dk, (size_t)dk * sizeof(float));
  }
  if (grads) zero_pad(c, ws->q, dk, n, np), zero_pad(c, ws->dout, dv, n, np);
  zero_pad(c, ws->k, dk, n, np);
  zero_pad(c, ws->g, dk, n, np);
  zero_pad(c, ws->v, dv, n, np);
}

/* Angle gradients of one row (rotary dims first; the pair_grads kernel,
 * selective_kernels.h). */
static void add_pair_grads(const rove_gla_plan *p, const float *gy, const float *y, double *out,
                           double sign) {
  p->kern->pair_grads(p->half, 0, p->cfg.pairing == ROVE_PAIRING_INTERLEAVED, gy, y, out, sign);
}

/* Token rows i = n-1 .. 0 of the chunk at t0 after the bwd_grads kernels: dg from the
 * carries, the angle gradients; then the gradients rotated back into the user's rows,
 * token by token (a rotate call per token and tensor, its rows the G heads: each writes
 * one contiguous run, as load_chunk reads them). */
static void finish_chunk(const gb_call *c, gb_scratch *ws, const gb_seq *sq, int64_t h0,
                         int64_t t0, int32_t n) {
  const rove_gla_plan *p = c->p;
  const rove_gla_grads *g = c->g;
  const int32_t dk = p->cfg.key_dim, dv = p->cfg.value_dim, w = p->half, G = c->group;
  const int64_t C = p->cfg.chunk, H = p->cfg.n_heads;
  const float sc = p->cfg.scale;
  for (int32_t i = n - 1; i >= 0; i--) {
    const int64_t r = row_of(c, sq, h0, t0 + i);
    for (int32_t j = 0; j < G; j++) {
      const int64_t x = j * C + i, rj = r + j;
      float *dgr = g->dg + rj * dk;
      const float *q = ws->q + x * dk, *dq = ws->dq + x * dk, *k = ws->k + x * dk,
                  *dkt = ws->dk + x * dk;
      p->kern->gla.bwd_dg(ws->carry + (int64_t)j * dk, dgr, q, dq, k, dkt, dk);
      if (g->d_angles) {
        double *da = g->d_angles + rj * w;
        memset(da, 0, (size_t)w * sizeof(double));
        if (c->rot_q) add_pair_grads(p, dq, q, da, 1.0);
        if (c->rot_k) add_pair_grads(p, dkt, k, da, 1.0);
        if (c->rot_v) add_pair_grads(p, ws->dv + x * dv, ws->v + x * dv, da, 1.0);
        if (c->rot_o) add_pair_grads(p, g->dout + rj * dv, c->a->out + rj * dv, da, -1.0);
      }
    }
  }
  const int64_t r0 = row_of(c, sq, h0, t0), hk = C * dk, hv = C * dv;
  for (int32_t i = 0; i < n; i++) {
    const rove_rot rq = rot_token(c, ws, i, c->rot_q), rk = rot_token(c, ws, i, c->rot_k);
    const rove_rot rv = rot_token(c, ws, i, c->rot_v);
    const int64_t r = r0 + i * H;
    p->kern->rotate(g->dq + r * dk, dk, ws->dq + i * dk, hk, G, dk, &rq, sc, sc, 1);
    p->kern->rotate(g->dk + r * dk, dk, ws->dk + i * dk, hk, G, dk, &rk, 1.0f, 1.0f, 1);
    p->kern->rotate(g->dv + r * dv, dv, ws->dv + i * dv, hv, G, dv, &rv, 1.0f, 1.0f, 1);
  }
}

/* The kernel call of head j of the group on the loaded chunk (np rows); s: the group's
 * states before the chunk. */
static rove_gla_bwd_chunk head_chunk(const gb_call *c, const gb_scratch *ws, int32_t j,
                                     int32_t np, float *s) {
  const int64_t C = c->p->cfg.chunk, dk = c->p->cfg.key_dim, dv = c->p->cfg.value_dim;
  const int64_t ok = j * C * dk, ov = j * C * dv, os = j * dk * dv;
  const rove_gla_bwd_chunk ch = {
      np,          (int32_t)dk, (int32_t)dv,   ws->q + ok,   ws->k + ok,   ws->g + ok,
      ws->v + ov,  ws->dout + ov, s + os,      ws->h + os,   ws->dq + ok,  ws->dk + ok,
      ws->dv + ov, ws->work};
  return ch;
}

/* Tokens of chunk i of sq: *t0 and the count (the last chunk may be short); *np rounded
 * up. */
static int32_t chunk_rows(const gb_call *c, const gb_seq *sq, int64_t i, int64_t *t0,
                          int32_t *np) {
  const int64_t C = c->p->cfg.chunk, T = sq->len;
  *t0 = i * C;
  const int32_t n = (int32_t)(T - *t0 < C ? T - *t0 : C);
  *np = (int32_t)rove_gla_round16(n);
  return n;
}

/* The state sweep over chunks c0 .. c1-1, moving ws->s: S before chunk i is copied to
 * keep[(i - c0) / every] when (i - c0) % every == 0. */
static void state_sweep(const gb_call *c, gb_scratch *ws, const gb_seq *sq, int64_t h0,
                        int64_t c0, int64_t c1, float *keep, int64_t every, int make_tables) {
  const int64_t sn = c->state_floats;
  for (int64_t i = c0; i < c1; i++) {
    if ((i - c0) % every == 0)
      memcpy(keep + (i - c0) / every * sn, ws->s, (size_t)sn * sizeof(float));
    int64_t t0;
    int32_t np;
    const int32_t n = chunk_rows(c, sq, i, &t0, &np);
    load_chunk(c, ws, sq, h0, t0, n, np, 0, make_tables);
    for (int32_t j = 0; j < c->group; j++) {
      const rove_gla_bwd_chunk ch = head_chunk(c, ws, j, np, ws->s);
      c->p->kern->gla.bwd_state(&ch);
    }
  }
}

/* The gradient sweep over chunks c1-1 .. c0 (their states kept from c0 on). */
static void grads_sweep(const gb_call *c, gb_scratch *ws, const gb_seq *sq, int64_t h0,
                        int64_t c0, int64_t c1) {
  for (int64_t i = c1 - 1; i >= c0; i--) {
    int64_t t0;
    int32_t np;
    const int32_t n = chunk_rows(c, sq, i, &t0, &np);
    load_chunk(c, ws, sq, h0, t0, n, np, 1, c->rot_any && !ws->cos_all);
    float *s = ws->kept + (i - c0) * c->state_floats;
    for (int32_t j = 0; j < c->group; j++) {
      const rove_gla_bwd_chunk ch = head_chunk(c, ws, j, np, s);
      c->p->kern->gla.bwd_grads(&ch);
    }
    finish_chunk(c, ws, sq, h0, t0, n);
  }
}

static void group_task_body(int64_t i, int tid, void *vctx) {
  const gb_call *c = vctx;
  const rove_gla_plan *p = c->p;
  const rove_gla_args *a = c->a;
  const rove_gla_grads *g = c->g;
  gb_scratch ws = scratch_at(c, tid);
  const int32_t G = c->group, per_b = p->cfg.n_heads / G;
  const int64_t H = p->cfg.n_heads, slot = i / per_b, h0 = (i % per_b) * G;
  gb_seq sq;
  sq.b = c->order ? c->order[slot] : slot;
  sq.start = rove_gla_seq_start(a, sq.b), sq.len = rove_gla_seq_len(a, sq.b);
  sq.chunks = (sq.len + p->cfg.chunk - 1) / p->cfg.chunk;
  const int32_t dk = p->cfg.key_dim, dv = p->cfg.value_dim;
  const int64_t kv = (int64_t)dk * dv, s0 = (sq.b * H + h0) * kv, sn = G * kv;
  const int64_t M = c->seg_chunks, nseg = segments(c, sq.chunks);
  /* 1. state sweep: every chunk's state kept, or (segments) each segment's first */
  if (a->initial_state)
    memcpy(ws.s, a->initial_state + s0, (size_t)sn * sizeof(float));
  else
    memset(ws.s, 0, (size_t)sn * sizeof(float));
  state_sweep(c, &ws, &sq, h0, 0, sq.chunks, nseg <= 1 ? ws.kept : ws.seg_first,
              nseg <= 1 ? 1 : M, c->rot_any);
  /* the final state's own term of dg, then H = d_final_state */
  for (int64_t e = 0; e < (int64_t)G * dk; e++) {
    double t = 0.0;
    if (g->d_final_state)
      for (int32_t j = 0; j < dv; j++)
        t += (double)ws.s[e * dv + j] * g->d_final_state[s0 + e * dv + j];
    ws.carry[e] = t;
  }
  if (g->d_final_state)
    memcpy(ws.h, g->d_final_state + s0, (size_t)sn * sizeof(float));
  else
    memset(ws.h, 0, (size_t)sn * sizeof(float));
  /* 2. gradient sweep, a segment at a time from the last */
  for (int64_t seg = nseg - 1; seg >= 0; seg--) {
    const int64_t c0 = seg * M, c1 = c0 + M < sq.chunks ? c0 + M : sq.chunks;
    if (nseg > 1) {
      memcpy(ws.s, ws.seg_first + seg * c->state_floats, (size_t)sn * sizeof(float));
      state_sweep(c, &ws, &sq, h0, c0, c1, ws.kept, 1, c->rot_any && !ws.cos_all);
    }
    grads_sweep(c, &ws, &sq, h0, c0, c1);
  }
  /* 3. */
  if (g->d_initial_state) memcpy(g->d_initial_state + s0, ws.h, (size_t)sn * sizeof(float));
}

/* group_task_body with subnormal results flushed to zero (util.h: strong decays). */
static void group_task(int64_t i, int tid, void *vctx) {
  const uint64_t fp = rove_flush_subnormals_begin();
  group_task_body(i, tid, vctx);
  rove_flush_subnormals_end(fp);
}

/* Heads per task: all of them while that leaves a task per thread and their rows and
 * states fit in GROUP_FLOATS, else the largest such divisor of n_heads. */
static int32_t group_size(const rove_gla_plan *p, int32_t batch, int threads) {
  const int32_t H = p->cfg.n_heads;
  const int64_t per_head = head_floats(p);
  int32_t g = H;
  while (g > 1 && ((int64_t)batch * (H / g) < threads || g * per_head > GROUP_FLOATS)) {
    do g--;
    while (H % g != 0);
  }
  return g;
}

static rove_status check_grads(const gb_call *c, int use_angles, const rove_gla_bytes *by) {
  const rove_gla_args *a = c->a;
  const rove_gla_grads *g = c->g;
  const int need_out = g->d_angles && c->rot_o;
  if (need_out && !a->out) return ROVE_ERR_INVALID_ARGUMENT;
  const void *in[10] = {a->q,
                        a->k,
                        a->v,
                        a->g,
                        use_angles ? a->angles : NULL,
                        a->initial_state,
                        g->dout,
                        g->d_final_state,
                        need_out ? a->out : NULL,
                        a->cu_seqlens};
  const int64_t inb[10] = {by->k, by->k,  by->v, by->k, by->angles,
                           by->s, by->v,  by->s, by->v, by->cu};
  void *outs[6] = {g->dq, g->dk, g->dg, g->dv, g->d_initial_state, g->d_angles};
  const int64_t outb[6] = {by->k, by->k, by->k, by->v, by->s, by->angles};
  for (int o = 0; o < 6; o++) {
    for (int i = 0; i < 10; i++)
      if (rove_overlap(outs[o], (size_t)outb[o], in[i], (size_t)inb[i]))
        return ROVE_ERR_INVALID_ARGUMENT;
    for (int o2 = 0; o2 < o; o2++)
      if (rove_overlap(outs[o], (size_t)outb[o], outs[o2], (size_t)outb[o2]))
        return ROVE_ERR_INVALID_ARGUMENT;
  }
  return ROVE_OK;
}

rove_status rove_gla_backward(const rove_gla_plan *p, const rove_gla_args *a,
                              const rove_gla_grads *g) {
  if (!g || !g->dout || !g->dq || !g->dk || !g->dv || !g->dg) return ROVE_ERR_INVALID_ARGUMENT;
  const int use_angles = p && a && a->angles && p->cfg.rotate;
  if (g->d_angles && !use_angles) return ROVE_ERR_INVALID_ARGUMENT;
  rove_gla_bytes by;
  rove_status st = rove_gla_check_inputs(p, a, use_angles, &by);
  if (st != ROVE_OK) return st;
  gb_call c;
  memset(&c, 0, sizeof c);
  c.p = p, c.a = a, c.g = g;
  c.rot_q = use_angles && (p->cfg.rotate & ROVE_ROTATE_Q);
  c.rot_k = use_angles && (p->cfg.rotate & ROVE_ROTATE_K);
  c.rot_v = use_angles && (p->cfg.rotate & ROVE_ROTATE_V);
  c.rot_o = use_angles && (p->cfg.rotate & ROVE_ROTATE_O);
  c.rot_any = c.rot_q | c.rot_k | c.rot_v | c.rot_o;
  st = check_grads(&c, use_angles, &by);
  if (st != ROVE_OK) return st;
  st = rove_gla_check_contents(p, a, use_angles, &by);
  if (st != ROVE_OK) return st;
  const double macs =
      (double)a->batch * p->cfg.n_heads * a->seq_len * p->cfg.key_dim * p->cfg.value_dim;
  int threads = macs < SERIAL_MACS ? 1 : p->cfg.n_threads;
  const int64_t seqs = rove_gla_n_seqs(a);
  int64_t longest = 0; /* the scratch is sized for the longest sequence */
  for (int64_t s = 0; s < seqs; s++)
    if (rove_gla_seq_len(a, s) > longest) longest = rove_gla_seq_len(a, s);
  c.group = group_size(p, (int32_t)seqs, threads);
  const int64_t tasks = seqs * (p->cfg.n_heads / c.group);
  threads = rove_team_size(threads, tasks);
  const int64_t tab = rove_gla_round16(longest * c.group * p->half);
  c.cache_floats = c.rot_any && 2 * tab <= TABLE_CACHE_FLOATS ? tab : 0;
  /* the chunk-start states kept: all of them while they fit in bwd_keep_floats */
  c.chunks = (longest + p->cfg.chunk - 1) / p->cfg.chunk;
  c.state_floats = rove_gla_round16((int64_t)c.group * p->cfg.key_dim * p->cfg.value_dim);
  const int64_t fit = p->bwd_keep_floats / c.state_floats;
  c.seg_chunks = fit < 1 ? 1 : fit < c.chunks ? fit : c.chunks;
  c.scratch_floats = scratch_floats(&c);
  if (c.scratch_floats > (INT64_MAX / (int64_t)sizeof(float)) / threads ||
      (uint64_t)(threads * c.scratch_floats) > SIZE_MAX / sizeof(float))
    return ROVE_ERR_SIZE_OVERFLOW;
  size_t size = 0;
  int32_t *order = NULL;
  if (!rove_gla_seq_order(a, &order)) return ROVE_ERR_OUT_OF_MEMORY;
  c.order = order;
  c.scratch = rove_pool_get(p->pool, (size_t)(threads * c.scratch_floats) * sizeof(float), &size);
  if (!c.scratch) {
    free(order);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  rove_parallel_for(threads, tasks, group_task, &c);
  rove_pool_put(p->pool, c.scratch, size);
  free(order);
  return ROVE_OK;
}
