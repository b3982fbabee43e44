/* SPDX-License-Identifier: MIT */
/* rove_gla_backward: the driver of the two backward sweeps (the chunk algebra is in
 * kernels/gla_kernels.h, its loops in kernels/gla_bwd_body.h).
 *
 * One task per (batch row b, group of G heads h0 .. h0+G-1), the whole sequence:
 *   1. forward sweep, chunk by chunk from the initial states: the chunk's k~, v~, g and
 *      do~ = R_t do (ROTATE_O; o = R_t^{-1} o~) of the G heads are loaded, the bwd_dq
 *      kernel writes each head's dq~ (the gradient at q~ = scale R_t q) and advances its
 *      S; dq~ is parked in the user's dq rows. After the last chunk S is S_T.
 *   2. backward sweep, last chunk first, from H = d_final_state: q~ is loaded too, the
 *      bwd_dkv kernel writes each head's dk~, dv~ and moves its H to the chunk start;
 *      then token by token from the end: dg_t = sum_{u >= t} (q~_u dq~_u - k~_u dk~_u) +
 *      [S_T * dS_T summed over the value dim] (a double carry per head and key channel),
 *      the angle gradients, and the gradients rotated back: dq = scale R^{-1} dq~,
 *      dk = R^{-1} dk~, dv = R^{-1} dv~.
 *   3. d_initial_state = H.
 * Tensor rows of token t of (b, h) start at ((b T + t) H + h) * width, so the G heads'
 * rows of one token are one contiguous run: chunks are read and written token by token,
 * a run per tensor (as the forward's gla_rows.c does; per-head tasks read 256-byte pieces
 * 3 KB apart and took ~1.5x as long to load at 12 x 64). Only this task touches the rows
 * and states of its heads, and each head's result depends on its own rows only, so the
 * result does not depend on the threads or the grouping.
 * Per-thread scratch (floats, 64-byte parts): cos, sin [C][G][half]; q, k, g, dq, dk
 * [G][C][dk]; v, do, dv [G][C][dv]; S [G][dk][dv]; carry [G][dk] doubles; the kernel
 * work (one head at a time); and, while they fit in TABLE_CACHE_FLOATS, cos and sin
 * [T][G][half] of the whole sequence. */
#include <string.h>

#include "gla_internal.h"
#include "selective.h"

#define SERIAL_MACS (1 << 20) /* smaller calls run on the calling thread */
/* The forward sweep keeps the cos/sin tables of the whole sequence for the backward sweep
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
  int64_t cache_floats; /* tables of the whole sequence per thread (0: not kept) */
  int64_t scratch_floats;
  float *scratch;
} gb_call;

typedef struct {
  float *cos_t, *sin_t, *q, *k, *g, *dq, *dk, *v, *dout, *dv, *s, *work;
  float *cos_all, *sin_all; /* the kept tables [T][G][half], or NULL */
  double *carry;
} gb_scratch;

/* Floats of one head's chunk rows, states and tables. */
static int64_t head_floats(const rove_gla_plan *p) {
  const int64_t C = p->cfg.chunk, dk = p->cfg.key_dim, dv = p->cfg.value_dim;
  return C * (5 * dk + 3 * dv + 2 * p->half) + dk * dv + 2 * dk;
}

static int64_t scratch_floats(const rove_gla_plan *p, int32_t G, int64_t cache_floats) {
  const int64_t C = p->cfg.chunk, dk = p->cfg.key_dim, dv = p->cfg.value_dim;
  return 2 * cache_floats + 2 * rove_gla_round16(C * G * p->half) +
         5 * rove_gla_round16(G * C * dk) + 3 * rove_gla_round16(G * C * dv) +
         rove_gla_round16(G * dk * dv) + rove_gla_round16(2 * G * dk) +
         rove_gla_round16(rove_gla_bwd_work_floats(C, dk, dv));
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
  w.carry = (double *)(w.s + rove_gla_round16(G * dk * dv));
  w.work = w.s + rove_gla_round16(G * dk * dv) + rove_gla_round16(2 * G * dk);
  float *kept = w.work + rove_gla_round16(rove_gla_bwd_work_floats(C, dk, dv));
  w.cos_all = c->cache_floats ? kept : NULL;
  w.sin_all = c->cache_floats ? kept + c->cache_floats : NULL;
  return w;
}

/* Row index (token t of batch row b, head h) of the [B][T][H] tensors. */
static int64_t row_of(const gb_call *c, int64_t b, int64_t h, int64_t t) {
  return (b * c->a->seq_len + t) * c->p->cfg.n_heads + h;
}

/* The rotation of the G heads' rows of token i of the chunk (tables [C][G][half]), or
 * none: rows j = 0 .. G-1 of one rotate call are the heads. */
static rove_rot rot_token(const gb_call *c, const gb_scratch *ws, int32_t i, int on) {
  rove_rot r = {NULL, NULL, c->p->half, (int32_t)c->p->cfg.pairing, 0, 0};
  if (on)
    r.cos = ws->cos_t + (int64_t)i * c->group * c->p->half,
    r.sin = ws->sin_t + (int64_t)i * c->group * c->p->half;
  return r;
}

/* The rotation of rows 0.. of head j's chunk (rows are tokens), or none. */
static rove_rot rot_head(const gb_call *c, const gb_scratch *ws, int32_t j, int on) {
  rove_rot r = {NULL, NULL, c->p->half, (int32_t)c->p->cfg.pairing, (int64_t)c->group * c->p->half,
                0};
  if (on) r.cos = ws->cos_t + (int64_t)j * c->p->half, r.sin = ws->sin_t + (int64_t)j * c->p->half;
  return r;
}

/* The input runs of the G heads at tensor row r (with_q: q too). */
static void prefetch_token(const gb_call *c, int64_t r, int with_q) {
  const rove_gla_args *a = c->a;
  const int64_t dk = c->p->cfg.key_dim, dv = c->p->cfg.value_dim, G = c->group;
  if (with_q) rove_gla_prefetch_span(a->q + r * dk, G * dk * (int64_t)sizeof(float));
  rove_gla_prefetch_span(a->k + r * dk, G * dk * (int64_t)sizeof(float));
  rove_gla_prefetch_span(a->g + r * dk, G * dk * (int64_t)sizeof(float));
  rove_gla_prefetch_span(a->v + r * dv, G * dv * (int64_t)sizeof(float));
  rove_gla_prefetch_span(c->g->dout + r * dv, G * dv * (int64_t)sizeof(float));
}

/* Rows n .. np-1 of each head's [C][width] block zero. */
static void zero_pad(const gb_call *c, float *x, int64_t width, int32_t n, int32_t np) {
  if (np <= n) return;
  const int64_t C = c->p->cfg.chunk;
  for (int32_t j = 0; j < c->group; j++)
    memset(x + ((int64_t)j * C + n) * width, 0, (size_t)((np - n) * width) * sizeof(float));
}

/* Tokens t0 .. t0+n-1 of the group's heads: the tables (with the kept tables: computed
 * there in the forward sweep, with_q 0, and only pointed at in the backward sweep), k~,
 * v~, g, do~ and (with_q) q~ into each head's [C][width] rows; rows n .. np-1 zero. */
static void load_chunk(const gb_call *c, gb_scratch *ws, int64_t b, int64_t h0, int64_t t0,
                       int32_t n, int32_t np, int with_q) {
  const rove_gla_plan *p = c->p;
  const rove_gla_args *a = c->a;
  const int64_t dk = p->cfg.key_dim, dv = p->cfg.value_dim, H = p->cfg.n_heads, w = p->half;
  const int64_t C = p->cfg.chunk, G = c->group, hk = C * dk, hv = C * dv;
  const int64_t r0 = row_of(c, b, h0, t0);
  if (ws->cos_all) ws->cos_t = ws->cos_all + t0 * G * w, ws->sin_t = ws->sin_all + t0 * G * w;
  const int tables = c->rot_any && !(ws->cos_all && with_q);
  const float sc = p->cfg.scale;
  for (int32_t i = 0; i < n && i < PREFETCH_TOKENS; i++) prefetch_token(c, r0 + i * H, with_q);
  for (int32_t i = 0; i < n; i++) {
    if (i + PREFETCH_TOKENS < n) prefetch_token(c, r0 + (i + PREFETCH_TOKENS) * H, with_q);
    const int64_t r = r0 + i * H;
    if (tables)
      rove_angle_table(p->kern, ws->cos_t + i * G * w, ws->sin_t + i * G * w, a->angles + r * w,
                       G * w);
    const rove_rot rq = rot_token(c, ws, i, c->rot_q), rk = rot_token(c, ws, i, c->rot_k);
    const rove_rot rv = rot_token(c, ws, i, c->rot_v), ro = rot_token(c, ws, i, c->rot_o);
    if (with_q)
      p->kern->rotate(ws->q + i * dk, hk, a->q + r * dk, dk, G, (int32_t)dk, &rq, sc, sc, 0);
    p->kern->rotate(ws->k + i * dk, hk, a->k + r * dk, dk, G, (int32_t)dk, &rk, 1.0f, 1.0f, 0);
    p->kern->rotate(ws->v + i * dv, hv, a->v + r * dv, dv, G, (int32_t)dv, &rv, 1.0f, 1.0f, 0);
    p->kern->rotate(ws->dout + i * dv, hv, c->g->dout + r * dv, dv, G, (int32_t)dv, &ro, 1.0f, 1.0f,
                    0);
    for (int64_t j = 0; j < G; j++)
      memcpy(ws->g + j * hk + i * dk, a->g + (r + j) * dk, (size_t)dk * sizeof(float));
  }
  if (with_q) zero_pad(c, ws->q, dk, n, np);
  zero_pad(c, ws->k, dk, n, np);
  zero_pad(c, ws->g, dk, n, np);
  zero_pad(c, ws->v, dv, n, np);
  zero_pad(c, ws->dout, dv, n, np);
}

/* Angle gradients of one row (rotary dims first; the pair_grads kernel,
 * selective_kernels.h). */
static void add_pair_grads(const rove_gla_plan *p, const float *gy, const float *y, double *out,
                           double sign) {
  p->kern->pair_grads(p->half, 0, p->cfg.pairing == ROVE_PAIRING_INTERLEAVED, gy, y, out, sign);
}

/* Token rows i = n-1 .. 0 of the chunk at t0 after the dkv kernels: dg from the carries,
 * the angle gradients, the gradients rotated back into the user's rows. */
static void finish_chunk(const gb_call *c, gb_scratch *ws, int64_t b, int64_t h0, int64_t t0,
                         int32_t n) {
  const rove_gla_plan *p = c->p;
  const rove_gla_grads *g = c->g;
  const int32_t dk = p->cfg.key_dim, dv = p->cfg.value_dim, w = p->half, G = c->group;
  const int64_t C = p->cfg.chunk, H = p->cfg.n_heads;
  const float sc = p->cfg.scale;
  for (int32_t i = n - 1; i >= 0; i--) {
    const int64_t r = row_of(c, b, h0, t0 + i);
    for (int32_t j = 0; j < G; j++) {
      const int64_t x = j * C + i, rj = r + j;
      float *dq = g->dq + rj * dk, *dgr = g->dg + rj * dk;
      const float *q = ws->q + x * dk, *k = ws->k + x * dk, *dkt = ws->dk + x * dk;
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
  /* the rows rotated back: dq in place in the user's rows (each token's G rows in one
   * call), dk and dv from each head's scratch rows (a call per head, rows are tokens) */
  const int64_t r0 = row_of(c, b, h0, t0);
  for (int32_t i = 0; i < n; i++) {
    const rove_rot rq = rot_token(c, ws, i, c->rot_q);
    float *dq = g->dq + (r0 + i * H) * dk;
    p->kern->rotate(dq, dk, dq, dk, G, dk, &rq, sc, sc, 1);
  }
  for (int32_t j = 0; j < G; j++) {
    const rove_rot rk = rot_head(c, ws, j, c->rot_k), rv = rot_head(c, ws, j, c->rot_v);
    p->kern->rotate(g->dk + (r0 + j) * dk, H * dk, ws->dk + j * C * dk, dk, n, dk, &rk, 1.0f, 1.0f,
                    1);
    p->kern->rotate(g->dv + (r0 + j) * dv, H * dv, ws->dv + j * C * dv, dv, n, dv, &rv, 1.0f, 1.0f,
                    1);
  }
}

/* The kernel call of head j of the group on the loaded chunk (np rows). */
static rove_gla_bwd_chunk head_chunk(const gb_call *c, const gb_scratch *ws, int32_t j,
                                     int32_t np) {
  const int64_t C = c->p->cfg.chunk, dk = c->p->cfg.key_dim, dv = c->p->cfg.value_dim;
  const int64_t ok = j * C * dk, ov = j * C * dv;
  const rove_gla_bwd_chunk ch = {
      np,          (int32_t)dk, (int32_t)dv,   ws->q + ok,          ws->k + ok,
      ws->g + ok,  ws->v + ov,  ws->dout + ov, ws->s + j * dk * dv, ws->dq + ok,
      ws->dk + ok, ws->dv + ov, ws->work};
  return ch;
}

static void group_task(int64_t i, int tid, void *vctx) {
  const gb_call *c = vctx;
  const rove_gla_plan *p = c->p;
  const rove_gla_args *a = c->a;
  const rove_gla_grads *g = c->g;
  gb_scratch ws = scratch_at(c, tid);
  const int32_t G = c->group, per_b = p->cfg.n_heads / G;
  const int64_t H = p->cfg.n_heads, b = i / per_b, h0 = (i % per_b) * G, T = a->seq_len;
  const int64_t C = p->cfg.chunk;
  const int32_t dk = p->cfg.key_dim, dv = p->cfg.value_dim;
  const int64_t kv = (int64_t)dk * dv, s0 = (b * H + h0) * kv, sn = G * kv;
  /* 1. forward sweep: dq~ into the user's dq rows, S to S_T */
  if (a->initial_state)
    memcpy(ws.s, a->initial_state + s0, (size_t)sn * sizeof(float));
  else
    memset(ws.s, 0, (size_t)sn * sizeof(float));
  for (int64_t t0 = 0; t0 < T; t0 += C) {
    const int32_t n = (int32_t)(T - t0 < C ? T - t0 : C), np = (int32_t)rove_gla_round16(n);
    load_chunk(c, &ws, b, h0, t0, n, np, 0);
    for (int32_t j = 0; j < G; j++) {
      const rove_gla_bwd_chunk ch = head_chunk(c, &ws, j, np);
      p->kern->gla.bwd_dq(&ch);
    }
    for (int32_t r = 0; r < n; r++) {
      float *dst = g->dq + row_of(c, b, h0, t0 + r) * dk;
      for (int32_t j = 0; j < G; j++)
        memcpy(dst + (int64_t)j * dk, ws.dq + (j * C + r) * dk, (size_t)dk * sizeof(float));
    }
  }
  /* the final state's own term of dg, then H = d_final_state */
  for (int64_t e = 0; e < (int64_t)G * dk; e++) {
    double t = 0.0;
    if (g->d_final_state)
      for (int32_t j = 0; j < dv; j++)
        t += (double)ws.s[e * dv + j] * g->d_final_state[s0 + e * dv + j];
    ws.carry[e] = t;
  }
  if (g->d_final_state)
    memcpy(ws.s, g->d_final_state + s0, (size_t)sn * sizeof(float));
  else
    memset(ws.s, 0, (size_t)sn * sizeof(float));
  /* 2. backward sweep */
  const int64_t last = (T - 1) / C * C;
  for (int64_t t0 = last; t0 >= 0; t0 -= C) {
    const int32_t n = (int32_t)(T - t0 < C ? T - t0 : C), np = (int32_t)rove_gla_round16(n);
    load_chunk(c, &ws, b, h0, t0, n, np, 1);
    for (int32_t j = 0; j < G; j++) {
      const rove_gla_bwd_chunk ch = head_chunk(c, &ws, j, np);
      p->kern->gla.bwd_dkv(&ch);
    }
    finish_chunk(c, &ws, b, h0, t0, n);
  }
  /* 3. */
  if (g->d_initial_state) memcpy(g->d_initial_state + s0, ws.s, (size_t)sn * sizeof(float));
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
  const void *in[9] = {a->q,
                       a->k,
                       a->v,
                       a->g,
                       use_angles ? a->angles : NULL,
                       a->initial_state,
                       g->dout,
                       g->d_final_state,
                       need_out ? a->out : NULL};
  const int64_t inb[9] = {by->k, by->k, by->v, by->k, by->angles, by->s, by->v, by->s, by->v};
  void *outs[6] = {g->dq, g->dk, g->dg, g->dv, g->d_initial_state, g->d_angles};
  const int64_t outb[6] = {by->k, by->k, by->k, by->v, by->s, by->angles};
  for (int o = 0; o < 6; o++) {
    for (int i = 0; i < 9; i++)
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
  c.group = group_size(p, a->batch, threads);
  const int64_t tasks = (int64_t)a->batch * (p->cfg.n_heads / c.group);
  threads = rove_team_size(threads, tasks);
  const int64_t tab = rove_gla_round16((int64_t)a->seq_len * c.group * p->half);
  c.cache_floats = c.rot_any && 2 * tab <= TABLE_CACHE_FLOATS ? tab : 0;
  c.scratch_floats = scratch_floats(p, c.group, c.cache_floats);
  size_t size = 0;
  c.scratch = rove_pool_get(p->pool, (size_t)(threads * c.scratch_floats) * sizeof(float), &size);
  if (!c.scratch) return ROVE_ERR_OUT_OF_MEMORY;
  rove_parallel_for(threads, tasks, group_task, &c);
  rove_pool_put(p->pool, c.scratch, size);
  return ROVE_OK;
}
