/* SPDX-License-Identifier: MIT */
/* Token-by-token GLA (decode): S = diag(e^{g_t}) S + k~_t v~_t^T, o_t = R_t^{-1} S^T q~_t.
 * Same driver as the chunked forward (gla.c): rows are rotated and stored in steps of
 * STEP_ROWS tokens (fewer for a shorter call, such as a decode step: the scratch holds a
 * step's rows of every head of a group), the kernel runs the recurrence over each step's
 * rows in order. */
#include "gla_internal.h"

#define STEP_ROWS 64

static void step_rows(const gla_call *c, const gla_head *h, float *s, int32_t n, int32_t np) {
  (void)np;
  const rove_gla_plan *p = c->p;
  p->kern->gla.steps(s, h->o, h->q, h->k, h->v, h->g, n, p->cfg.key_dim, p->cfg.value_dim, h->work);
}

rove_status rove_gla_recurrent(const rove_gla_plan *p, const rove_gla_args *a) {
  const int64_t t = a && a->seq_len > 0 ? rove_gla_round16(a->seq_len) : STEP_ROWS;
  return rove_gla_run(p, a, t < STEP_ROWS ? (int32_t)t : STEP_ROWS, 0, step_rows);
}
