/* SPDX-License-Identifier: MIT */
/* GLA driver, the token rows of a step: the per-thread scratch, and moving one step of a
 * head group between the user tensors and the scratch (gla_internal.h has the layouts).
 *
 * Tensor rows of token t of batch row b, head h start at ((b T + t) H + h) * width (of
 * packed sequences, at token cu_seqlens[s] + t of the one row), so
 * the rows of the group's heads for one token are adjacent: a step is read and written
 * token by token, each token's group rows as one contiguous run (per tensor), and one
 * call of the rotate kernel per tensor and token scatters the heads to their own rows of
 * the scratch. Each row is rotated with its own cos/sin exactly as a pass over one head
 * would: only the order of the work differs, never a value.
 *
 * Memory: the step's inputs come from DRAM once (no reuse), so the load is bound by
 * how many cache misses are in flight. The token runs PREFETCH_TOKENS ahead are
 * requested (into L2) while a token is rotated, which keeps the line fill buffers busy;
 * measured on an AMD EPYC (one thread, 12 heads x 64, 4096 tokens, chunk 64) they take
 * the loads of a call from ~9 to ~6.5 ms (prefetches into L1, or 2 or 8 tokens ahead,
 * did less). Prefetching the next step from inside the chunk kernel was slower: the
 * prefetches stall the kernel while the miss buffers are full. */
#include <string.h>

#include "gla_internal.h"
#include "selective.h"

#define PREFETCH_TOKENS 4

int64_t rove_gla_scratch_floats(const rove_gla_plan *p, int32_t rows, int32_t sub,
                                int64_t state_floats) {
  const int64_t dk = p->cfg.key_dim, dv = p->cfg.value_dim, hr = (int64_t)sub * rows;
  const int64_t tab = rove_gla_round16(hr * p->half);
  return 2 * tab + 3 * rove_gla_round16(hr * dk) + 2 * rove_gla_round16(hr * dv) +
         rove_gla_round16(state_floats) + rove_gla_work_floats(rows, dk);
}

gla_scratch rove_gla_scratch_at(const gla_call *c, int tid) {
  const int64_t dk = c->p->cfg.key_dim, dv = c->p->cfg.value_dim;
  const int64_t hr = (int64_t)c->sub * c->rows, tab = rove_gla_round16(hr * c->p->half);
  gla_scratch w;
  w.cos_t = c->scratch + tid * c->scratch_floats;
  w.sin_t = w.cos_t + tab;
  w.q = w.sin_t + tab;
  w.k = w.q + rove_gla_round16(hr * dk);
  w.g = w.k + rove_gla_round16(hr * dk);
  w.v = w.g + rove_gla_round16(hr * dk);
  w.o = w.v + rove_gla_round16(hr * dv);
  w.s = w.o + rove_gla_round16(hr * dv);
  w.work = w.s + rove_gla_round16(c->state_floats);
  return w;
}

gla_head rove_gla_head(const gla_call *c, const gla_scratch *ws, int32_t j) {
  const int64_t rk = (int64_t)j * c->rows * c->p->cfg.key_dim;
  const int64_t rv = (int64_t)j * c->rows * c->p->cfg.value_dim;
  const gla_head h = {ws->q + rk, ws->k + rk, ws->g + rk, ws->v + rv, ws->o + rv, ws->work};
  return h;
}

/* Row index (token row t of the call, head h) of the [B T][H] tensors. */
static int64_t row_of(const gla_call *c, int32_t h, int64_t t) {
  return t * c->p->cfg.n_heads + h;
}

/* The inputs of heads h .. h+G-1 at tensor row r (token t, head h). */
static void prefetch_token(const gla_call *c, int64_t r, int64_t G) {
  const rove_gla_args *a = c->a;
  const int64_t dk = c->p->cfg.key_dim, dv = c->p->cfg.value_dim;
  const int64_t w = c->p->half;
  rove_gla_prefetch_span(a->q + r * dk, G * dk * (int64_t)sizeof(float));
  rove_gla_prefetch_span(a->k + r * dk, G * dk * (int64_t)sizeof(float));
  rove_gla_prefetch_span(a->g + r * dk, G * dk * (int64_t)sizeof(float));
  rove_gla_prefetch_span(a->v + r * dv, G * dv * (int64_t)sizeof(float));
  if (c->rot_q | c->rot_k | c->rot_v | c->rot_o)
    rove_gla_prefetch_span(a->angles + r * w, G * w * (int64_t)sizeof(double));
}

/* The rotation of the heads' rows of token i of the step (tables [sub][half] at row i of
 * the step's tables), or none. */
static rove_rot rot_of(const gla_call *c, const gla_scratch *ws, int32_t i, int on) {
  const int64_t at = (int64_t)i * c->sub * c->p->half;
  /* rotary dims first; the rows are requested by the loads' own prefetch */
  rove_rot r = {NULL, NULL, c->p->half, (int32_t)c->p->cfg.pairing, 0, 0, 1};
  if (on) r.cos = ws->cos_t + at, r.sin = ws->sin_t + at;
  return r;
}

/* Rows n .. np-1 of the [rows][width] blocks of heads 0 .. G-1 zero. */
static void zero_pad(const gla_call *c, float *x, int64_t width, int32_t G, int32_t n, int32_t np) {
  if (np <= n) return;
  for (int32_t j = 0; j < G; j++)
    memset(x + ((int64_t)j * c->rows + n) * width, 0, (size_t)((np - n) * width) * sizeof(float));
}

/* Token i of the step (tensor row r: token t, head h): the tables, then q (rotated and
 * scaled), k, v (rotated) and g of heads h .. h+G-1. */
static void load_token(const gla_call *c, gla_scratch *ws, int64_t r, int32_t i, int32_t G) {
  const rove_gla_plan *p = c->p;
  const rove_gla_args *a = c->a;
  const int32_t S = c->sub, dk = p->cfg.key_dim, dv = p->cfg.value_dim;
  const int64_t hk = (int64_t)c->rows * dk, hv = (int64_t)c->rows * dv, w = p->half;
  if (c->rot_q | c->rot_k | c->rot_v | c->rot_o)
    rove_angle_table(p->kern, ws->cos_t + i * S * w, ws->sin_t + i * S * w,
                     a->angles + r * w, G * w);
  const rove_rot rq = rot_of(c, ws, i, c->rot_q), rk = rot_of(c, ws, i, c->rot_k);
  const rove_rot rv = rot_of(c, ws, i, c->rot_v);
  const float sc = p->cfg.scale;
  p->kern->rotate(ws->q + (int64_t)i * dk, hk, a->q + r * dk, dk, G, dk, &rq, sc, sc, 0);
  p->kern->rotate(ws->k + (int64_t)i * dk, hk, a->k + r * dk, dk, G, dk, &rk, 1.0f, 1.0f, 0);
  p->kern->rotate(ws->v + (int64_t)i * dv, hv, a->v + r * dv, dv, G, dv, &rv, 1.0f, 1.0f, 0);
  for (int32_t j = 0; j < G; j++)
    memcpy(ws->g + j * hk + (int64_t)i * dk, a->g + (r + j) * dk, (size_t)dk * sizeof(float));
}

void rove_gla_load_step(const gla_call *c, gla_scratch *ws, int32_t h, int32_t G, int64_t t0,
                        int32_t n, int32_t np) {
  const int32_t dk = c->p->cfg.key_dim, dv = c->p->cfg.value_dim;
  const int64_t r0 = row_of(c, h, t0), H = c->p->cfg.n_heads;
  for (int32_t i = 0; i < n && i < PREFETCH_TOKENS; i++) prefetch_token(c, r0 + i * H, G);
  for (int32_t i = 0; i < n; i++) {
    if (i + PREFETCH_TOKENS < n) prefetch_token(c, r0 + (i + PREFETCH_TOKENS) * H, G);
    load_token(c, ws, r0 + i * H, i, G);
  }
  zero_pad(c, ws->q, dk, G, n, np);
  zero_pad(c, ws->k, dk, G, n, np);
  zero_pad(c, ws->g, dk, G, n, np);
  zero_pad(c, ws->v, dv, G, n, np);
}

/* Row by row (one rotate call per head row, with no prefetch: a single call over the
 * group would prefetch ahead along the scratch stride, far past the rows it reads). */
void rove_gla_store_step(const gla_call *c, const gla_scratch *ws, int32_t h, int32_t G,
                         int64_t t0, int32_t n) {
  const rove_gla_plan *p = c->p;
  const int32_t dv = p->cfg.value_dim;
  const int64_t hv = (int64_t)c->rows * dv;
  for (int32_t i = 0; i < n; i++) {
    rove_rot ro = rot_of(c, ws, i, c->rot_o);
    float *dst = c->a->out + row_of(c, h, t0 + i) * dv;
    for (int32_t j = 0; j < G; j++) {
      p->kern->rotate(dst + (int64_t)j * dv, 0, ws->o + j * hv + (int64_t)i * dv, 0, 1, dv, &ro,
                      1.0f, 1.0f, 1);
      if (ro.cos) ro.cos += p->half, ro.sin += p->half;
    }
  }
}
