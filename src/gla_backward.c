/* SPDX-License-Identifier: MIT */
/* rove_gla_backward: the driver of the two backward sweeps (the chunk algebra is in
 * kernels/gla_kernels.h, its loops in kernels/gla_bwd_body.h).
 *
 * One task per (batch row b, head h), the whole sequence:
 *   1. forward sweep, chunk by chunk from the initial state: the chunk's k~, v~, g and
 *      do~ = R_t do (ROTATE_O; o = R_t^{-1} o~) are loaded, the bwd_dq kernel writes dq~
 *      (the gradient at q~ = scale R_t q) and advances S; dq~ is parked in the user's dq
 *      rows. After the last chunk S is the final state S_T.
 *   2. backward sweep, last chunk first, from H = d_final_state: q~ is loaded too, the
 *      bwd_dkv kernel writes dk~, dv~ and moves H to the chunk start; then token by token
 *      from the end: dg_t = sum_{u >= t} (q~_u dq~_u - k~_u dk~_u) + [S_T * dS_T summed
 *      over the value dim] (a double carry per key channel), the angle gradients, and the
 *      gradients rotated back: dq = scale R^{-1} dq~, dk = R^{-1} dk~, dv = R^{-1} dv~.
 *   3. d_initial_state = H.
 * Tensor rows of token t of (b, h) start at ((b T + t) H + h) * width. Only this task
 * touches the rows and states of (b, h), so the result does not depend on the threads.
 * Per-thread scratch (floats, 64-byte parts): cos, sin [C][half]; q, k, g, dq, dk [C][dk];
 * v, do, dv [C][dv]; S [dk][dv]; carry [dk] doubles; the kernel work; and, while they fit
 * in TABLE_CACHE_FLOATS, cos and sin [T][half] of the whole sequence. */
#include <string.h>

#include "gla_internal.h"
#include "selective.h"

#define SERIAL_MACS (1 << 20) /* smaller calls run on the calling thread */
/* The forward sweep keeps the cos/sin tables of the whole sequence for the backward sweep
 * (one sincos per angle: computed twice they took ~15 % of the backward at 12 x 64, 4096
 * tokens) while they fit in this many floats per thread; longer sequences compute them
 * again. */
#define TABLE_CACHE_FLOATS (1 << 22)

typedef struct {
  const rove_gla_plan *p;
  const rove_gla_args *a;
  const rove_gla_grads *g;
  int rot_q, rot_k, rot_v, rot_o;
  int64_t cache_floats; /* tables of the whole sequence per thread (0: not kept) */
  int64_t scratch_floats;
  float *scratch;
} gb_call;

typedef struct {
  float *cos_t, *sin_t, *q, *k, *g, *dq, *dk, *v, *dout, *dv, *s, *work;
  float *cos_all, *sin_all; /* the kept tables [T][half], or NULL */
  double *carry;
} gb_scratch;

static int64_t scratch_floats(const rove_gla_plan *p, int64_t cache_floats) {
  const int64_t C = p->cfg.chunk, dk = p->cfg.key_dim, dv = p->cfg.value_dim;
  return 2 * cache_floats + 2 * rove_gla_round16(C * p->half) + 5 * rove_gla_round16(C * dk) +
         3 * rove_gla_round16(C * dv) + rove_gla_round16(dk * dv) + rove_gla_round16(2 * dk) +
         rove_gla_round16(rove_gla_bwd_work_floats(C, dk, dv));
}

static gb_scratch scratch_at(const gb_call *c, int tid) {
  const int64_t C = c->p->cfg.chunk, dk = c->p->cfg.key_dim, dv = c->p->cfg.value_dim;
  const int64_t tab = rove_gla_round16(C * c->p->half), ck = rove_gla_round16(C * dk),
                cv = rove_gla_round16(C * dv);
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
  w.carry = (double *)(w.s + rove_gla_round16(dk * dv));
  w.work = w.s + rove_gla_round16(dk * dv) + rove_gla_round16(2 * dk);
  float *kept = w.work + rove_gla_round16(rove_gla_bwd_work_floats(C, dk, dv));
  w.cos_all = c->cache_floats ? kept : NULL;
  w.sin_all = c->cache_floats ? kept + c->cache_floats : NULL;
  return w;
}

/* Row index (token t of batch row b, head h) of the [B][T][H] tensors. */
static int64_t row_of(const gb_call *c, int64_t b, int64_t h, int64_t t) {
  return (b * c->a->seq_len + t) * c->p->cfg.n_heads + h;
}

/* The rotation of rows 0.. of the chunk (tables in ws), or none. */
static rove_rot rot_of(const gb_call *c, const gb_scratch *ws, int on) {
  rove_rot r = {NULL, NULL, c->p->half, (int32_t)c->p->cfg.pairing, c->p->half, 0};
  if (on) r.cos = ws->cos_t, r.sin = ws->sin_t;
  return r;
}

/* Rows of tokens t0 .. t0+n-1 of (b, h): the tables (with the kept tables: computed
 * there in the forward sweep, with_q 0, and only pointed at in the backward sweep), k~,
 * v~, g, do~ and (with_q) q~; rows n .. np-1 zero. */
static void load_chunk(const gb_call *c, gb_scratch *ws, int64_t b, int64_t h, int64_t t0,
                       int32_t n, int32_t np, int with_q) {
  const rove_gla_plan *p = c->p;
  const rove_gla_args *a = c->a;
  const int64_t dk = p->cfg.key_dim, dv = p->cfg.value_dim, H = p->cfg.n_heads, w = p->half;
  const int64_t r0 = row_of(c, b, h, t0);
  if (ws->cos_all) ws->cos_t = ws->cos_all + t0 * w, ws->sin_t = ws->sin_all + t0 * w;
  if ((c->rot_q | c->rot_k | c->rot_v | c->rot_o) && !(ws->cos_all && with_q))
    for (int32_t i = 0; i < n; i++)
      rove_angle_table(p->kern, ws->cos_t + i * w, ws->sin_t + i * w, a->angles + (r0 + i * H) * w,
                       w);
  const rove_rot rq = rot_of(c, ws, c->rot_q), rk = rot_of(c, ws, c->rot_k);
  const rove_rot rv = rot_of(c, ws, c->rot_v), ro = rot_of(c, ws, c->rot_o);
  const float sc = p->cfg.scale;
  if (with_q) p->kern->rotate(ws->q, dk, a->q + r0 * dk, H * dk, n, (int32_t)dk, &rq, sc, sc, 0);
  p->kern->rotate(ws->k, dk, a->k + r0 * dk, H * dk, n, (int32_t)dk, &rk, 1.0f, 1.0f, 0);
  p->kern->rotate(ws->v, dv, a->v + r0 * dv, H * dv, n, (int32_t)dv, &rv, 1.0f, 1.0f, 0);
  p->kern->rotate(ws->dout, dv, c->g->dout + r0 * dv, H * dv, n, (int32_t)dv, &ro, 1.0f, 1.0f, 0);
  for (int32_t i = 0; i < n; i++)
    memcpy(ws->g + i * dk, a->g + (r0 + i * H) * dk, (size_t)dk * sizeof(float));
  const size_t pk = (size_t)((np - n) * dk) * sizeof(float),
               pv = (size_t)((np - n) * dv) * sizeof(float);
  if (pk) {
    memset(ws->q + n * dk, 0, pk), memset(ws->k + n * dk, 0, pk), memset(ws->g + n * dk, 0, pk);
    memset(ws->v + n * dv, 0, pv), memset(ws->dout + n * dv, 0, pv);
  }
}

/* Angle gradients of one row (rotary dims first; rove_add_pair_grads). */
static void add_pair_grads(const rove_gla_plan *p, const float *gy, const float *y, double *out,
                           double sign) {
  rove_add_pair_grads(p->half, 0, p->cfg.pairing == ROVE_PAIRING_INTERLEAVED, gy, y, out, sign);
}

/* Token rows i = n-1 .. 0 of the chunk at t0 after the dkv kernel: dg from the carry,
 * the angle gradients, the gradients rotated back into the user's rows. */
static void finish_chunk(const gb_call *c, gb_scratch *ws, int64_t b, int64_t h, int64_t t0,
                         int32_t n) {
  const rove_gla_plan *p = c->p;
  const rove_gla_grads *g = c->g;
  const int32_t dk = p->cfg.key_dim, dv = p->cfg.value_dim, w = p->half;
  const float sc = p->cfg.scale;
  for (int32_t i = n - 1; i >= 0; i--) {
    const int64_t r = row_of(c, b, h, t0 + i);
    float *dq = g->dq + r * dk, *dgr = g->dg + r * dk;
    const float *q = ws->q + (int64_t)i * dk, *k = ws->k + (int64_t)i * dk;
    const float *dkt = ws->dk + (int64_t)i * dk, *dvt = ws->dv + (int64_t)i * dv;
    for (int32_t j = 0; j < dk; j++) {
      ws->carry[j] += (double)q[j] * dq[j] - (double)k[j] * dkt[j];
      dgr[j] = (float)ws->carry[j];
    }
    if (g->d_angles) {
      double *da = g->d_angles + r * w;
      memset(da, 0, (size_t)w * sizeof(double));
      if (c->rot_q) add_pair_grads(p, dq, q, da, 1.0);
      if (c->rot_k) add_pair_grads(p, dkt, k, da, 1.0);
      if (c->rot_v) add_pair_grads(p, dvt, ws->v + (int64_t)i * dv, da, 1.0);
      if (c->rot_o) add_pair_grads(p, g->dout + r * dv, c->a->out + r * dv, da, -1.0);
    }
  }
  /* the chunk's rows rotated back in three calls (rows H * width apart in the tensors) */
  const int64_t r0 = row_of(c, b, h, t0), H = p->cfg.n_heads;
  const rove_rot rq = rot_of(c, ws, c->rot_q), rk = rot_of(c, ws, c->rot_k);
  const rove_rot rv = rot_of(c, ws, c->rot_v);
  float *dq0 = g->dq + r0 * dk;
  p->kern->rotate(dq0, H * dk, dq0, H * dk, n, dk, &rq, sc, sc, 1);
  p->kern->rotate(g->dk + r0 * dk, H * dk, ws->dk, dk, n, dk, &rk, 1.0f, 1.0f, 1);
  p->kern->rotate(g->dv + r0 * dv, H * dv, ws->dv, dv, n, dv, &rv, 1.0f, 1.0f, 1);
}

static void head_task(int64_t i, int tid, void *vctx) {
  const gb_call *c = vctx;
  const rove_gla_plan *p = c->p;
  const rove_gla_args *a = c->a;
  const rove_gla_grads *g = c->g;
  gb_scratch ws = scratch_at(c, tid);
  const int64_t H = p->cfg.n_heads, b = i / H, h = i % H, T = a->seq_len, C = p->cfg.chunk;
  const int32_t dk = p->cfg.key_dim, dv = p->cfg.value_dim;
  const int64_t kv = (int64_t)dk * dv, s0 = i * kv;
  rove_gla_bwd_chunk ch = {0,       dk,   dv,    ws.q,  ws.k,  ws.g,   ws.v,
                           ws.dout, ws.s, ws.dq, ws.dk, ws.dv, ws.work};
  /* 1. forward sweep: dq~ into the user's dq rows, S to S_T */
  if (a->initial_state)
    memcpy(ws.s, a->initial_state + s0, (size_t)kv * sizeof(float));
  else
    memset(ws.s, 0, (size_t)kv * sizeof(float));
  for (int64_t t0 = 0; t0 < T; t0 += C) {
    const int32_t n = (int32_t)(T - t0 < C ? T - t0 : C), np = (int32_t)rove_gla_round16(n);
    load_chunk(c, &ws, b, h, t0, n, np, 0);
    ch.n = np;
    p->kern->gla.bwd_dq(&ch);
    for (int32_t r = 0; r < n; r++)
      memcpy(g->dq + row_of(c, b, h, t0 + r) * dk, ws.dq + (int64_t)r * dk,
             (size_t)dk * sizeof(float));
  }
  /* the final state's own term of dg, then H = d_final_state */
  for (int32_t k = 0; k < dk; k++) {
    double t = 0.0;
    if (g->d_final_state)
      for (int32_t j = 0; j < dv; j++)
        t += (double)ws.s[(int64_t)k * dv + j] * g->d_final_state[s0 + (int64_t)k * dv + j];
    ws.carry[k] = t;
  }
  if (g->d_final_state)
    memcpy(ws.s, g->d_final_state + s0, (size_t)kv * sizeof(float));
  else
    memset(ws.s, 0, (size_t)kv * sizeof(float));
  /* 2. backward sweep */
  const int64_t last = (T - 1) / C * C;
  for (int64_t t0 = last; t0 >= 0; t0 -= C) {
    const int32_t n = (int32_t)(T - t0 < C ? T - t0 : C), np = (int32_t)rove_gla_round16(n);
    load_chunk(c, &ws, b, h, t0, n, np, 1);
    ch.n = np;
    p->kern->gla.bwd_dkv(&ch);
    finish_chunk(c, &ws, b, h, t0, n);
  }
  /* 3. */
  if (g->d_initial_state) memcpy(g->d_initial_state + s0, ws.s, (size_t)kv * sizeof(float));
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
  st = check_grads(&c, use_angles, &by);
  if (st != ROVE_OK) return st;
  st = rove_gla_check_contents(p, a, use_angles, &by);
  if (st != ROVE_OK) return st;
  const double macs =
      (double)a->batch * p->cfg.n_heads * a->seq_len * p->cfg.key_dim * p->cfg.value_dim;
  const int64_t tasks = (int64_t)a->batch * p->cfg.n_heads;
  const int threads = rove_team_size(macs < SERIAL_MACS ? 1 : p->cfg.n_threads, tasks);
  const int64_t tab = rove_gla_round16((int64_t)a->seq_len * p->half);
  c.cache_floats = (c.rot_q | c.rot_k | c.rot_v | c.rot_o) && 2 * tab <= TABLE_CACHE_FLOATS ? tab
                                                                                            : 0;
  c.scratch_floats = scratch_floats(p, c.cache_floats);
  size_t size = 0;
  c.scratch = rove_pool_get(p->pool, (size_t)(threads * c.scratch_floats) * sizeof(float), &size);
  if (!c.scratch) return ROVE_ERR_OUT_OF_MEMORY;
  rove_parallel_for(threads, tasks, head_task, &c);
  rove_pool_put(p->pool, c.scratch, size);
  return ROVE_OK;
}
