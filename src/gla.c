/* GLA driver: argument checks, per-thread scratch, rotation of the token rows of one
 * head into the scratch, the loop over (batch row, head group), and the chunked forward.
 *
 * Work is split over batch rows and groups of heads only (the steps of one head form a
 * recurrence). A task walks the sequence in steps of `rows` tokens and, in each step, its
 * heads one after the other; each head's result depends only on its own inputs (the
 * scratch is fully rewritten before use), never on the thread, the group or what ran
 * before, so the output is bitwise identical for any thread count. Tensor rows of token t
 * of batch row b, head h start at ((b T + t) H + h) * width; the state of (b, h) at
 * (b H + h) dk dv. All checks come before anything is written. */
#include <string.h>

#include "gla_internal.h"
#include "selective.h"

#define SCAN_PARTS 64                /* parallel parts of the g / angle checks */
#define SERIAL_MACS (1 << 20)        /* smaller calls run on the calling thread */
#define GROUP_STATE_FLOATS (1 << 18) /* states of one task's heads: 1 MiB at most */

/* ---- argument checks ------------------------------------------------------------------- */

typedef struct {
  const float *g;
  const double *angles; /* NULL: not checked */
  int64_t ng, na;
  int bad[SCAN_PARTS];
} scan_ctx;

/* Nonzero when some x[i] is not finite or > 0 (x - x is 0 exactly for finite x, NaN
 * otherwise). Branch-free, so that the compiler vectorises it. */
static int bad_decays(const float *x, int64_t n) {
  int bad = 0;
  for (int64_t i = 0; i < n; i++) bad |= (x[i] > 0.0f) | ((x[i] - x[i]) != 0.0f);
  return bad;
}

static int bad_angles(const double *x, int64_t n) {
  int bad = 0;
  for (int64_t i = 0; i < n; i++) bad |= (x[i] - x[i]) != 0.0;
  return bad;
}

/* Part i of g and of the angles. */
static void scan_task(int64_t i, int tid, void *vctx) {
  (void)tid;
  scan_ctx *c = vctx;
  const int64_t pg = (c->ng + SCAN_PARTS - 1) / SCAN_PARTS,
                pa = (c->na + SCAN_PARTS - 1) / SCAN_PARTS;
  const int64_t g0 = i * pg, g1 = g0 + pg < c->ng ? g0 + pg : c->ng;
  int bad = g1 > g0 && bad_decays(c->g + g0, g1 - g0);
  if (c->angles) {
    const int64_t a0 = i * pa, a1 = a0 + pa < c->na ? a0 + pa : c->na;
    bad |= a1 > a0 && bad_angles(c->angles + a0, a1 - a0);
  }
  c->bad[i] = bad;
}

static int overlap(const void *a, int64_t a_bytes, const void *b, int64_t b_bytes) {
  return a && b && rove_overlap(a, (size_t)a_bytes, b, (size_t)b_bytes);
}

/* Sizes, then overlaps, then the contents of g and the angles. */
static rove_status check_args(const rove_gla_plan *p, const rove_gla_args *a, int use_angles) {
  if (!p || !a || !a->q || !a->k || !a->v || !a->g || !a->out) return ROVE_ERR_INVALID_ARGUMENT;
  if (a->batch <= 0 || a->seq_len <= 0) return ROVE_ERR_INVALID_ARGUMENT;
  const rove_gla_config *c = &p->cfg;
  int64_t rows, nk, nv, ns, na;
  if (!rove_mul_i64((int64_t)a->batch * a->seq_len, c->n_heads, &rows) ||
      !rove_mul_i64(rows, c->key_dim, &nk) || !rove_mul_i64(rows, c->value_dim, &nv) ||
      !rove_mul_i64((int64_t)a->batch * c->n_heads, (int64_t)c->key_dim * c->value_dim, &ns) ||
      !rove_mul_i64(rows, p->half, &na))
    return ROVE_ERR_SIZE_OVERFLOW;
  const int64_t lim =
      (int64_t)((uint64_t)SIZE_MAX / 8 < (uint64_t)INT64_MAX / 8 ? (uint64_t)SIZE_MAX / 8
                                                                 : (uint64_t)INT64_MAX / 8);
  if (nk > lim || nv > lim || ns > lim || na > lim) return ROVE_ERR_SIZE_OVERFLOW;
  const int64_t bk = nk * 4, bv = nv * 4, bs = ns * 4, ba = use_angles ? na * 8 : 0;
  const double *ang = use_angles ? a->angles : NULL;
  const void *in[6] = {a->q, a->k, a->v, a->g, ang, a->initial_state};
  const int64_t in_bytes[6] = {bk, bk, bv, bk, ba, bs};
  for (int i = 0; i < 6; i++)
    if (overlap(a->out, bv, in[i], in_bytes[i])) return ROVE_ERR_INVALID_ARGUMENT;
  if (a->final_state) {
    for (int i = 0; i < 5; i++)
      if (overlap(a->final_state, bs, in[i], in_bytes[i])) return ROVE_ERR_INVALID_ARGUMENT;
    if (overlap(a->final_state, bs, a->out, bv)) return ROVE_ERR_INVALID_ARGUMENT;
    if (a->final_state != a->initial_state && overlap(a->final_state, bs, a->initial_state, bs))
      return ROVE_ERR_INVALID_ARGUMENT;
  }
  scan_ctx sc;
  memset(&sc, 0, sizeof sc);
  sc.g = a->g, sc.angles = ang, sc.ng = nk, sc.na = na;
  rove_parallel_for(nk + na >= SERIAL_MACS ? c->n_threads : 1, SCAN_PARTS, scan_task, &sc);
  for (int i = 0; i < SCAN_PARTS; i++)
    if (sc.bad[i]) return ROVE_ERR_INVALID_ARGUMENT;
  return ROVE_OK;
}

/* ---- rows of one head ---------------------------------------------------------------- */

/* Row index (token t of batch row b, head h) of the [B][T][H] tensors. */
static int64_t row_of(const gla_call *c, int32_t b, int32_t h, int64_t t) {
  return ((int64_t)b * c->a->seq_len + t) * c->p->cfg.n_heads + h;
}

static void zero_rows(float *x, int64_t width, int32_t n, int32_t np) {
  if (np > n) memset(x + n * width, 0, (size_t)((np - n) * width) * sizeof(float));
}

/* cos/sin of tokens t0 .. t0+n-1 of head h: [n][half] (a table per head stays in L1
 * while its rows are rotated; one for the whole group would not). */
static void load_table(const gla_call *c, gla_scratch *ws, int32_t b, int32_t h, int64_t t0,
                       int32_t n) {
  if (!(c->rot_q | c->rot_k | c->rot_v | c->rot_o)) return;
  const int64_t w = c->p->half, r0 = row_of(c, b, h, t0);
  for (int32_t i = 0; i < n; i++)
    rove_angle_table(c->p->cfg.isa, ws->cos_t + i * w, ws->sin_t + i * w,
                     c->a->angles + (r0 + (int64_t)i * c->p->cfg.n_heads) * c->p->half, w);
}

/* The rotation with the table in ws (that of the head being loaded / stored). */
static rove_rot rot_of(const gla_call *c, const gla_scratch *ws, int on) {
  rove_rot r = {NULL, NULL, c->p->half, (int32_t)c->p->cfg.pairing, 0};
  if (on) r.cos = ws->cos_t, r.sin = ws->sin_t;
  return r;
}

/* Rows t0 .. t0+n-1 of head h = h0 + j into ws (rotated, q scaled); rows n .. np-1 zero. */
static void load_rows(const gla_call *c, gla_scratch *ws, int32_t b, int32_t h0, int32_t j,
                      int64_t t0, int32_t n, int32_t np) {
  const rove_gla_plan *p = c->p;
  const rove_gla_args *a = c->a;
  const int32_t H = p->cfg.n_heads, dk = p->cfg.key_dim, dv = p->cfg.value_dim;
  const int64_t r0 = row_of(c, b, h0 + j, t0);
  const rove_rot rq = rot_of(c, ws, c->rot_q), rk = rot_of(c, ws, c->rot_k);
  const rove_rot rv = rot_of(c, ws, c->rot_v);
  const float sc = p->cfg.scale;
  p->kern->rotate(ws->q, dk, a->q + r0 * dk, (int64_t)H * dk, n, dk, &rq, sc, sc, 0);
  p->kern->rotate(ws->k, dk, a->k + r0 * dk, (int64_t)H * dk, n, dk, &rk, 1.0f, 1.0f, 0);
  p->kern->rotate(ws->v, dv, a->v + r0 * dv, (int64_t)H * dv, n, dv, &rv, 1.0f, 1.0f, 0);
  for (int32_t i = 0; i < n; i++)
    memcpy(ws->g + (int64_t)i * dk, a->g + (r0 + (int64_t)i * H) * dk, (size_t)dk * sizeof(float));
  zero_rows(ws->q, dk, n, np);
  zero_rows(ws->k, dk, n, np);
  zero_rows(ws->g, dk, n, np);
  zero_rows(ws->v, dv, n, np);
}

/* ws->o rows 0..n-1 (unrotated with ROTATE_O) to out rows t0 .. t0+n-1 of head h0 + j. */
static void store_rows(const gla_call *c, const gla_scratch *ws, int32_t b, int32_t h0, int32_t j,
                       int64_t t0, int32_t n) {
  const rove_gla_plan *p = c->p;
  const int32_t dv = p->cfg.value_dim;
  const rove_rot ro = rot_of(c, ws, c->rot_o);
  p->kern->rotate(c->a->out + row_of(c, b, h0 + j, t0) * dv, (int64_t)p->cfg.n_heads * dv, ws->o,
                  dv, n, dv, &ro, 1.0f, 1.0f, 1);
}

/* ---- the parallel loop over (batch row, head group) ------------------------------------ */

/* Per thread: tables, one head's rows, the states when there is no final_state to run
 * them in (state_floats), the kernel's work. */
static int64_t scratch_floats(const rove_gla_plan *p, int32_t rows, int64_t state_floats) {
  const int64_t dk = p->cfg.key_dim, dv = p->cfg.value_dim;
  const int64_t tab = rove_gla_round16((int64_t)rows * p->half);
  return 2 * tab + 3 * rove_gla_round16(rows * dk) + 2 * rove_gla_round16(rows * dv) +
         rove_gla_round16(state_floats) + rove_gla_work_floats(rows, dk);
}

static gla_scratch scratch_at(const gla_call *c, int tid) {
  const int64_t dk = c->p->cfg.key_dim, dv = c->p->cfg.value_dim, rows = c->rows;
  const int64_t tab = rove_gla_round16(rows * c->p->half);
  gla_scratch w;
  w.cos_t = c->scratch + tid * c->scratch_floats;
  w.sin_t = w.cos_t + tab;
  w.q = w.sin_t + tab;
  w.k = w.q + rove_gla_round16(rows * dk);
  w.g = w.k + rove_gla_round16(rows * dk);
  w.v = w.g + rove_gla_round16(rows * dk);
  w.o = w.v + rove_gla_round16(rows * dv);
  w.s = w.o + rove_gla_round16(rows * dv);
  w.work = w.s + rove_gla_round16(c->state_floats);
  return w;
}

/* Task i: batch row b, heads h0 .. h0+group-1, the whole sequence. The recurrence runs
 * on the states in place in final_state when there is one (after copying initial_state
 * there unless it is the same buffer: a decode step then moves no state around), else
 * in the thread's scratch. Only this task touches these heads' states. */
static void group_task(int64_t i, int tid, void *vctx) {
  const gla_call *c = vctx;
  const rove_gla_args *a = c->a;
  gla_scratch ws = scratch_at(c, tid);
  const int32_t per_b = c->p->cfg.n_heads / c->group;
  const int32_t b = (int32_t)(i / per_b), h0 = (int32_t)(i % per_b) * c->group;
  const int64_t kv = (int64_t)c->p->cfg.key_dim * c->p->cfg.value_dim, T = a->seq_len;
  const int64_t s0 = ((int64_t)b * c->p->cfg.n_heads + h0) * kv, sn = (int64_t)c->group * kv;
  float *st = a->final_state ? a->final_state + s0 : ws.s;
  if (!a->initial_state)
    memset(st, 0, (size_t)sn * sizeof(float));
  else if (a->initial_state != a->final_state)
    memcpy(st, a->initial_state + s0, (size_t)sn * sizeof(float));
  for (int64_t t0 = 0; t0 < T; t0 += c->rows) {
    const int32_t n = (int32_t)(T - t0 < c->rows ? T - t0 : c->rows);
    const int32_t np = c->pad ? (int32_t)rove_gla_round16(n) : n;
    for (int32_t j = 0; j < c->group; j++) {
      load_table(c, &ws, b, h0 + j, t0, n);
      load_rows(c, &ws, b, h0, j, t0, n, np);
      c->run(c, &ws, st + j * kv, n, np);
      store_rows(c, &ws, b, h0, j, t0, n);
    }
  }
}

/* Heads per task: all of them while that leaves a task per thread and the group's states
 * fit in GROUP_STATE_FLOATS, else the largest such divisor of n_heads (the result of a
 * head does not depend on its group: only the memory order does). */
static int32_t group_size(const rove_gla_plan *p, int32_t batch, int32_t threads) {
  const int32_t H = p->cfg.n_heads;
  const int64_t kv = (int64_t)p->cfg.key_dim * p->cfg.value_dim;
  int32_t g = H;
  while (g > 1 && ((int64_t)batch * (H / g) < threads || g * kv > GROUP_STATE_FLOATS)) {
    do g--;
    while (H % g != 0);
  }
  return g;
}

rove_status rove_gla_run(const rove_gla_plan *p, const rove_gla_args *a, int32_t rows, int32_t pad,
                         gla_rows_fn run) {
  const int use_angles = p && a && a->angles && p->cfg.rotate;
  rove_status st = check_args(p, a, use_angles);
  if (st != ROVE_OK) return st;
  gla_call c;
  memset(&c, 0, sizeof c);
  c.p = p, c.a = a, c.run = run, c.rows = rows, c.pad = pad;
  c.rot_q = use_angles && (p->cfg.rotate & ROVE_ROTATE_Q);
  c.rot_k = use_angles && (p->cfg.rotate & ROVE_ROTATE_K);
  c.rot_v = use_angles && (p->cfg.rotate & ROVE_ROTATE_V);
  c.rot_o = use_angles && (p->cfg.rotate & ROVE_ROTATE_O);
  const double macs =
      (double)a->batch * p->cfg.n_heads * a->seq_len * p->cfg.key_dim * p->cfg.value_dim;
  int32_t threads = macs < SERIAL_MACS ? 1 : p->cfg.n_threads;
  c.group = group_size(p, a->batch, threads);
  const int64_t tasks = (int64_t)a->batch * (p->cfg.n_heads / c.group);
  if (threads > tasks) threads = (int32_t)tasks;
  c.state_floats = a->final_state ? 0 : (int64_t)c.group * p->cfg.key_dim * p->cfg.value_dim;
  c.scratch_floats = scratch_floats(p, c.rows, c.state_floats);
  size_t size = 0;
  c.scratch = rove_pool_get(p->pool, (size_t)(threads * c.scratch_floats) * sizeof(float), &size);
  if (!c.scratch) return ROVE_ERR_OUT_OF_MEMORY;
  rove_parallel_for(threads, tasks, group_task, &c);
  rove_pool_put(p->pool, c.scratch, size);
  return ROVE_OK;
}

/* ---- the chunked forward --------------------------------------------------------------- */

static void chunk_rows(const gla_call *c, gla_scratch *ws, float *s, int32_t n, int32_t np) {
  (void)n;
  const rove_gla_plan *p = c->p;
  const rove_gla_chunk ch = {np, p->cfg.key_dim, p->cfg.value_dim, ws->q, ws->k, ws->g, ws->v,
                             s,  ws->o,          ws->work};
  p->gk->chunk(&ch);
}

rove_status rove_gla_forward(const rove_gla_plan *p, const rove_gla_args *a) {
  return rove_gla_run(p, a, p ? p->cfg.chunk : 16, 1, chunk_rows);
}
