/* SPDX-License-Identifier: MIT */
/* GLA driver: argument checks, the loop over (batch row, head group), and the chunked
 * forward (the rows of a step are moved in gla_rows.c).
 *
 * Work is split over batch rows and groups of heads only (the steps of one head form a
 * recurrence). A task walks the sequence in steps of `rows` tokens: it loads the step's
 * rows of its heads, runs the heads one after the other, stores the outputs. Each head's
 * result depends only on its own inputs (the scratch is fully rewritten before use),
 * never on the thread, the group or what ran before, so the output is bitwise identical
 * for any thread count. Tensor rows of token t
 * of batch row b, head h start at ((b T + t) H + h) * width; the state of (b, h) at
 * (b H + h) dk dv. Packed sequences (cu_seqlens) are the same with sequence s in place of
 * batch row b, starting at token cu_seqlens[s] of the one row. All checks come before
 * anything is written. */
#include <stdlib.h>
#include <string.h>

#include "gla_internal.h"

#define SCAN_PARTS 64                /* parallel parts of the g / angle checks */
#define SERIAL_MACS (1 << 20)        /* smaller calls run on the calling thread */
#define GROUP_STATE_FLOATS (1 << 18) /* states of one task's heads: 1 MiB at most */
#define SUB_FLOATS (1 << 19)         /* rows of one load of a step: 2 MiB at most */

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

rove_status rove_gla_check_inputs(const rove_gla_plan *p, const rove_gla_args *a, int use_angles,
                                  rove_gla_bytes *by) {
  if (!p || !a || !a->q || !a->k || !a->v || !a->g) return ROVE_ERR_INVALID_ARGUMENT;
  if (a->batch <= 0 || a->seq_len <= 0) return ROVE_ERR_INVALID_ARGUMENT;
  if (a->cu_seqlens) { /* packed sequences of one row, ending at seq_len */
    int64_t total = 0;
    if (a->batch != 1 || a->n_seqs < 1 || !rove_check_cu(a->cu_seqlens, a->n_seqs, &total) ||
        total != a->seq_len)
      return ROVE_ERR_INVALID_ARGUMENT;
  } else if (a->n_seqs != 0) {
    return ROVE_ERR_INVALID_ARGUMENT; /* n_seqs without cu_seqlens would be ignored */
  }
  const rove_gla_config *c = &p->cfg;
  int64_t rows, nk, nv, ns, na;
  if (!rove_mul_i64((int64_t)a->batch * a->seq_len, c->n_heads, &rows) ||
      !rove_mul_i64(rows, c->key_dim, &nk) || !rove_mul_i64(rows, c->value_dim, &nv) ||
      !rove_mul_i64(rove_gla_n_seqs(a) * c->n_heads, (int64_t)c->key_dim * c->value_dim, &ns) ||
      !rove_mul_i64(rows, p->half, &na))
    return ROVE_ERR_SIZE_OVERFLOW;
  const int64_t lim =
      (int64_t)((uint64_t)SIZE_MAX / 8 < (uint64_t)INT64_MAX / 8 ? (uint64_t)SIZE_MAX / 8
                                                                 : (uint64_t)INT64_MAX / 8);
  if (nk > lim || nv > lim || ns > lim || na > lim) return ROVE_ERR_SIZE_OVERFLOW;
  by->k = nk * 4, by->v = nv * 4, by->s = ns * 4, by->angles = use_angles ? na * 8 : 0;
  by->cu = a->cu_seqlens ? ((int64_t)a->n_seqs + 1) * 4 : 0;
  return ROVE_OK;
}

/* Longest first, equal lengths by index (a total order: qsort's instability is moot). */
typedef struct {
  int64_t len;
  int32_t s;
} seq_len_at;
static int longest_first(const void *x, const void *y) {
  const seq_len_at *a = x, *b = y;
  if (a->len != b->len) return a->len > b->len ? -1 : 1;
  return (a->s > b->s) - (a->s < b->s);
}

int rove_gla_seq_order(const rove_gla_args *a, int32_t **order) {
  *order = NULL;
  if (!a->cu_seqlens || a->n_seqs < 2) return 1;
  int sorted = 1; /* already longest first: no array */
  for (int32_t s = 1; s < a->n_seqs && sorted; s++)
    sorted = rove_gla_seq_len(a, s) <= rove_gla_seq_len(a, s - 1);
  if (sorted) return 1;
  seq_len_at *t = malloc(sizeof *t * (size_t)a->n_seqs);
  int32_t *o = malloc(sizeof *o * (size_t)a->n_seqs);
  if (!t || !o) {
    free(t);
    free(o);
    return 0;
  }
  for (int32_t s = 0; s < a->n_seqs; s++) t[s].len = rove_gla_seq_len(a, s), t[s].s = s;
  qsort(t, (size_t)a->n_seqs, sizeof *t, longest_first);
  for (int32_t s = 0; s < a->n_seqs; s++) o[s] = t[s].s;
  free(t);
  *order = o;
  return 1;
}

rove_status rove_gla_check_contents(const rove_gla_plan *p, const rove_gla_args *a,
                                    int use_angles, const rove_gla_bytes *by) {
  scan_ctx sc;
  memset(&sc, 0, sizeof sc);
  sc.g = a->g, sc.angles = use_angles ? a->angles : NULL, sc.ng = by->k / 4;
  sc.na = by->angles / 8;
  rove_parallel_for(sc.ng + sc.na >= SERIAL_MACS ? p->cfg.n_threads : 1, SCAN_PARTS, scan_task,
                    &sc);
  for (int i = 0; i < SCAN_PARTS; i++)
    if (sc.bad[i]) return ROVE_ERR_INVALID_ARGUMENT;
  return ROVE_OK;
}

/* Sizes, then overlaps, then the contents of g and the angles. */
static rove_status check_args(const rove_gla_plan *p, const rove_gla_args *a, int use_angles) {
  if (a && !a->out) return ROVE_ERR_INVALID_ARGUMENT;
  rove_gla_bytes by;
  rove_status st = rove_gla_check_inputs(p, a, use_angles, &by);
  if (st != ROVE_OK) return st;
  const double *ang = use_angles ? a->angles : NULL;
  const void *in[7] = {a->q, a->k, a->v, a->g, ang, a->cu_seqlens, a->initial_state};
  const int64_t in_bytes[7] = {by.k, by.k, by.v, by.k, by.angles, by.cu, by.s};
  for (int i = 0; i < 7; i++)
    if (overlap(a->out, by.v, in[i], in_bytes[i])) return ROVE_ERR_INVALID_ARGUMENT;
  if (a->final_state) {
    for (int i = 0; i < 6; i++)
      if (overlap(a->final_state, by.s, in[i], in_bytes[i])) return ROVE_ERR_INVALID_ARGUMENT;
    if (overlap(a->final_state, by.s, a->out, by.v)) return ROVE_ERR_INVALID_ARGUMENT;
    if (a->final_state != a->initial_state && overlap(a->final_state, by.s, a->initial_state, by.s))
      return ROVE_ERR_INVALID_ARGUMENT;
  }
  return rove_gla_check_contents(p, a, use_angles, &by);
}

/* ---- the parallel loop over (batch row, head group) ------------------------------------ */

/* Task i: sequence b (a batch row, or a packed sequence), heads h0 .. h0+group-1, the
 * whole sequence. The recurrence runs on the states in place in final_state when there
 * is one (after copying initial_state there unless it is the same buffer: a decode step
 * then moves no state around), else in the thread's scratch. Only this task touches
 * these heads' states. */
static void group_task_body(int64_t i, int tid, void *vctx) {
  const gla_call *c = vctx;
  const rove_gla_args *a = c->a;
  gla_scratch ws = rove_gla_scratch_at(c, tid);
  const int32_t per_b = c->p->cfg.n_heads / c->group;
  const int64_t slot = i / per_b;
  const int32_t b = c->order ? c->order[slot] : (int32_t)slot, h0 = (int32_t)(i % per_b) * c->group;
  const int64_t kv = (int64_t)c->p->cfg.key_dim * c->p->cfg.value_dim;
  const int64_t T = rove_gla_seq_len(a, b), start = rove_gla_seq_start(a, b);
  const int64_t s0 = ((int64_t)b * c->p->cfg.n_heads + h0) * kv, sn = (int64_t)c->group * kv;
  float *st = a->final_state ? a->final_state + s0 : ws.s;
  if (!a->initial_state)
    memset(st, 0, (size_t)sn * sizeof(float));
  else if (a->initial_state != a->final_state)
    memcpy(st, a->initial_state + s0, (size_t)sn * sizeof(float));
  for (int64_t t0 = 0; t0 < T; t0 += c->rows) {
    const int32_t n = (int32_t)(T - t0 < c->rows ? T - t0 : c->rows);
    const int32_t np = c->pad ? (int32_t)rove_gla_round16(n) : n;
    for (int32_t j0 = 0; j0 < c->group; j0 += c->sub) {
      const int32_t G = c->group - j0 < c->sub ? c->group - j0 : c->sub;
      rove_gla_load_step(c, &ws, h0 + j0, G, start + t0, n, np);
      for (int32_t j = 0; j < G; j++) {
        const gla_head hd = rove_gla_head(c, &ws, j);
        c->run(c, &hd, st + (j0 + j) * kv, n, np);
      }
      rove_gla_store_step(c, &ws, h0 + j0, G, start + t0, n);
    }
  }
}

/* group_task_body with subnormal results flushed to zero (util.h: strong decays). */
static void group_task(int64_t i, int tid, void *vctx) {
  const uint64_t fp = rove_flush_subnormals_begin();
  group_task_body(i, tid, vctx);
  rove_flush_subnormals_end(fp);
}

/* Heads per task: all of them while that leaves a task per thread and the group's states
 * fit in GROUP_STATE_FLOATS, else the largest such divisor of n_heads (the result of a
 * head does not depend on its group: only the memory order does, and long groups read
 * long contiguous runs: at 12 heads x 64, 4096 tokens, one thread, a group of 12 ran in
 * 25 ms, two tasks of 6 in 28 ms, six of 2 in 37 ms). */
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

/* Heads per load: the group in as few loads as keep each load's rows (rove_gla_scratch_floats
 * without the state and the kernel work) within SUB_FLOATS, the loads as even as possible. */
static int32_t sub_size(const rove_gla_plan *p, int32_t rows, int32_t group) {
  const int64_t per_head = rove_gla_scratch_floats(p, rows, 1, 0) -
                           rove_gla_work_floats(rows, p->cfg.key_dim);
  int64_t fit = SUB_FLOATS / per_head;
  if (fit < 1) fit = 1;
  const int64_t loads = (group + fit - 1) / fit;
  return (int32_t)((group + loads - 1) / loads);
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
  const int64_t seqs = rove_gla_n_seqs(a);
  c.group = group_size(p, (int32_t)seqs, threads);
  const int64_t tasks = seqs * (p->cfg.n_heads / c.group);
  threads = rove_team_size(threads, tasks); /* scratch for the threads that run */
  c.state_floats = a->final_state ? 0 : (int64_t)c.group * p->cfg.key_dim * p->cfg.value_dim;
  c.sub = sub_size(p, c.rows, c.group);
  c.scratch_floats = rove_gla_scratch_floats(p, c.rows, c.sub, c.state_floats);
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

/* ---- the chunked forward --------------------------------------------------------------- */

static void chunk_rows(const gla_call *c, const gla_head *h, float *s, int32_t n, int32_t np) {
  (void)n;
  const rove_gla_plan *p = c->p;
  const rove_gla_chunk ch = {np, p->cfg.key_dim, p->cfg.value_dim, h->q, h->k, h->g, h->v,
                             s,  h->o,           h->work};
  p->kern->gla.chunk(&ch);
}

rove_status rove_gla_forward(const rove_gla_plan *p, const rove_gla_args *a) {
  return rove_gla_run(p, a, p ? p->cfg.chunk : 16, 1, chunk_rows);
}
