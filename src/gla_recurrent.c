/* Token-by-token GLA (decode): S = diag(e^{g_t}) S + k~_t v~_t^T, o_t = R_t^{-1} S^T q~_t.
 * Same driver as the chunked forward (gla.c): rows are rotated and stored in steps of
 * STEP_ROWS tokens, the kernel runs the recurrence over each step's rows in order. */
#include "gla_internal.h"

#define STEP_ROWS 64

static void step_rows(const gla_call *c, gla_scratch *ws, float *s, int32_t n, int32_t np) {
  (void)np;
  const rove_gla_plan *p = c->p;
  p->gk->steps(s, ws->o, ws->q, ws->k, ws->v, ws->g, n, p->cfg.key_dim, p->cfg.value_dim, ws->work);
}

rove_status rove_gla_recurrent(const rove_gla_plan *p, const rove_gla_args *a) {
  return rove_gla_run(p, a, STEP_ROWS, 0, step_rows);
}
