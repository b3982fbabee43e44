/* SPDX-License-Identifier: MIT */
/* Per-task helpers of one attention call, used by the prefill phases (attention.c) and by
 * streaming decode (attention_decode.c): the phase 0 table task, the query tile (its
 * geometry, begin: packed rotated queries and fresh accumulators, finish), and the phase
 * 3 merge of split-KV partial results. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attention_tile.h"
#include "selective.h"

void rove_fwd_table_task(int64_t t, int tid, void *vctx) {
  (void)tid;
  rove_fwd *f = vctx;
  const int32_t half = f->p->half;
  const int is_k = t < f->n_ktab_tasks;
  const int64_t r0 = (is_k ? t : t - f->n_ktab_tasks) * ROVE_TABLE_ROWS;
  const int64_t rows = is_k ? f->k_tab_batches * f->kv_len : f->q_tab_batches * f->q_len;
  const int64_t n = rows - r0 < ROVE_TABLE_ROWS ? rows - r0 : ROVE_TABLE_ROWS;
  if (f->angles) { /* rows of tab_w angles, [batch][len][n_kv_heads][half] */
    const int64_t w = f->tab_w;
    const double *ang = (is_k ? f->a->kv_angles : f->a->q_angles) + r0 * w;
    rove_angle_table(f->p->kern, (is_k ? f->kcos : f->qcos) + r0 * w,
                     (is_k ? f->ksin : f->qsin) + r0 * w, ang, n * w);
  } else if (is_k) {
    const int32_t *pos = f->a->kv_pos ? f->a->kv_pos + r0 : NULL;
    rove_rope_table(f->kcos + r0 * half, f->ksin + r0 * half, f->p->inv_freq, half,
                    f->p->rope_step, pos, r0, n);
  } else {
    const int32_t *pos = f->a->q_pos ? f->a->q_pos + r0 : NULL;
    rove_rope_table(f->qcos + r0 * half, f->qsin + r0 * half, f->p->inv_freq, half,
                    f->p->rope_step, pos, f->kv_len - f->q_len + r0, n);
  }
}

/* Query tiles of one head are consecutive tasks; within a head the heaviest causal tiles
 * (the last ones) come first. Pack and attend run on rove_parallel_for_blocked, so a
 * thread attends mostly the heads it packed (its own cache, no lines moving between
 * cores; 2 threads at n = 1024: pack 1.18 -> 0.59 ms, attend 9.8 -> 9.3 ms). */
rove_qtile rove_fwd_qtile(const rove_fwd *f, int64_t qtask) {
  const rove_plan *p = f->p;
  const int64_t H = p->cfg.n_heads, bh = qtask / f->n_qt;
  const int64_t qt = f->n_qt - 1 - qtask % f->n_qt;
  rove_qtile q = {.b = bh / H, .h = bh % H, .i0 = qt * p->kern->tile_q};
  q.kvh = q.h / (H / p->cfg.n_kv_heads);
  q.kvbh = q.b * p->cfg.n_kv_heads + q.kvh;
  q.row0 = q.b * f->q_len + q.i0;
  q.nq = (int32_t)(f->q_len - q.i0 < p->kern->tile_q ? f->q_len - q.i0 : p->kern->tile_q);
  return q;
}

void rove_fwd_begin(const rove_fwd *f, const rove_qtile *q, float *qbuf, float *o, float *m,
                    float *l) {
  const rove_plan *p = f->p;
  const int32_t d = p->cfg.head_dim;
  const float scale = p->cfg.scale;
  rove_rot rq = rove_fwd_qrot(f, q->b, q->kvh, q->i0, p->cfg.rotate & ROVE_ROTATE_Q);
  const int64_t e = q->row0 * f->qs + q->h * d; /* element offset of the tile's first row */
  const float *src = qbuf;
  int64_t ss = d;
  if (f->q_type == ROVE_DTYPE_F32) /* else widen into qbuf, then rotate there in place */
    src = f->a->q + e, ss = f->qs;
  else
    p->kern->to_f32(qbuf, d, rove_fwd_raw(f->a->q, f->q_type, e), f->qs, NULL, q->nq, d, f->q_type);
  p->kern->rotate(qbuf, d, src, ss, q->nq, d, &rq, scale * (float)p->attn_factor, scale, 0);
  memset(o, 0, sizeof(float) * (size_t)q->nq * (size_t)d);
  for (int32_t i = 0; i < q->nq; i++) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
}

void rove_fwd_finish(const rove_fwd *f, const rove_qtile *q, float *o, const float *m,
                     const float *l) {
  const rove_plan *p = f->p;
  const int32_t d = p->cfg.head_dim;
  rove_rot ro = rove_fwd_qrot(f, q->b, q->kvh, q->i0, p->cfg.rotate & ROVE_ROTATE_O);
  float *lse = f->a->lse ? f->a->lse + q->b * p->cfg.n_heads * f->q_len + q->h * f->lse_hstride +
                               q->i0
                         : NULL;
  const int64_t e = q->row0 * f->os + q->h * d; /* element offset of the tile's first row */
  const float *sink = f->a->sinks ? f->a->sinks + q->h : NULL;
  if (f->out_type == ROVE_DTYPE_F32) {
    rove_finish_f32(p->kern, f->a->out + e, f->os, lse, o, m, l, q->nq, d, &ro, sink);
    return;
  }
  /* typed out: finish in place in o, then round once into the caller's rows (values
   * beyond the type's range become +-inf, as a cast would) */
  rove_finish_f32(p->kern, o, d, lse, o, m, l, q->nq, d, &ro, sink);
  p->kern->from_f32((char *)f->a->out + e * rove_dtype_size(f->out_type), f->os, NULL, o, d,
                    q->nq, d, f->out_type);
}

/* y += w x, element by element (restrict: vectorized without gcc's runtime alias check;
 * the same bits as the scalar loop, each element one multiply and one add). */
static void add_scaled(float *restrict y, const float *restrict x, float w, int64_t n) {
  for (int64_t c = 0; c < n; c++) y[c] += w * x[c];
}

/* Merge in split order (independent of the thread count):
 *   M = max_s m_s,  l = sum_s exp(m_s - M) l_s,  o = sum_s exp(m_s - M) o_s. */
void rove_fwd_merge_task(int64_t qtask, int tid, void *vctx) {
  rove_fwd *f = vctx;
  const int64_t d = f->p->cfg.head_dim, tq = f->p->kern->tile_q;
  const rove_qtile q = rove_fwd_qtile(f, qtask);
  const int64_t pr = f->partial_rows; /* a slot: o [pr][d], m [pr], l [pr] */
  const float *part = f->partial + qtask * f->n_splits * f->partial_floats;
  float *o = f->scratch + (int64_t)tid * f->scratch_floats, *m = o + tq * d, *l = m + tq;
  for (int32_t i = 0; i < q.nq; i++) {
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t sp = 0; sp < f->n_splits; sp++) mx = fmaxf(mx, part[sp * f->partial_floats + pr * d + i]);
    float *oi = o + i * d;
    memset(oi, 0, sizeof(float) * (size_t)d);
    for (int64_t sp = 0; mx > -INFINITY && sp < f->n_splits; sp++) {
      const float *ps = part + sp * f->partial_floats;
      if (ps[pr * d + i] == -INFINITY) continue;
      const float w = expf(ps[pr * d + i] - mx);
      sum += w * ps[pr * d + pr + i];
      add_scaled(oi, ps + i * d, w, d);
    }
    m[i] = mx;
    l[i] = sum;
  }
  rove_fwd_finish(f, &q, o, m, l);
}
