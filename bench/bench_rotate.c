/* SPDX-License-Identifier: MIT */
/* rotate/<isa>: rove_rotate alone, in place on x = [n][h][d] with default positions,
 * alternating forward and inverse rotation (so x stays bounded). Reports
 * bytes_per_second (x read + written) and items_per_second (tokens). One thread: CPU
 * time; more: wall clock (see rb_pair). */
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"

static const char *const ARG_NAMES[] = {"n", "d", "h", "thr"};
enum { N_ARGS = 4 };

static void bm_rotate(rbs_state *st, void *user) {
  const rove_isa isa = *(const rove_isa *)user;
  const int32_t n = (int32_t)rbs_range(st, 0), d = (int32_t)rbs_range(st, 1);
  const int32_t h = (int32_t)rbs_range(st, 2), thr = (int32_t)rbs_range(st, 3);
  rove_attention_config cfg;
  rove_attention_config_init(&cfg, h, h, d);
  cfg.isa = isa;
  cfg.n_threads = thr;
  rove_plan *plan = NULL;
  rove_status s = rove_plan_create(&cfg, &plan);
  const size_t count = (size_t)n * (size_t)h * (size_t)d;
  float *x = s == ROVE_OK ? rb_alloc_floats(count) : NULL;
  if (!x) {
    rbs_skip_with_error(st, s == ROVE_OK ? "out of memory" : rove_status_string(s));
    rove_plan_destroy(plan);
    return;
  }
  rb_fill_uniform(x, count, 4);
  int32_t inverse = 0;
  while (rbs_keep_running(st)) {
    s = rove_rotate(plan, x, n, h, 0, NULL, inverse);
    rbs_do_not_optimize(x);
    if (s != ROVE_OK) {
      rbs_skip_with_error(st, rove_status_string(s));
      break;
    }
    inverse ^= 1;
  }
  if (s == ROVE_OK) {
    const int64_t iters = rbs_iterations(st);
    rbs_set_bytes_processed(st, iters * 2 * (int64_t)(count * sizeof(float)));
    rbs_set_items_processed(st, iters * n);
    rbs_set_label(st, rove_isa_name(rove_plan_isa(plan)));
  }
  free(x);
  rove_plan_destroy(plan);
}

static rove_isa fam_isa[RB_N_ISAS];
static rb_pair pairs[2][RB_N_ISAS]; /* [smoke][isa] */

void rb_register_rotate(int smoke) {
  for (int i = 0; i < rb_cfg.n_isas; i++) {
    const rove_isa isa = rb_cfg.isas[i];
    rb_pair *p = &pairs[smoke][isa];
    snprintf(p->name, sizeof p->name, "%s/%s", smoke ? "smoke/rotate" : "rotate",
             rove_isa_name(isa));
    fam_isa[isa] = isa;
    p->fn = bm_rotate;
    p->user = &fam_isa[isa];
    p->arg_names = ARG_NAMES;
    p->n_args = N_ARGS;
    p->unit = RBS_US;
    if (smoke) {
      const int64_t a[N_ARGS] = {100, 64, 12, 1};
      rb_pair_add(p, a, 1);
      continue;
    }
    for (int t = 0; t < rb_cfg.n_threads; t++)
      for (int32_t n = 1024; n <= 16384; n *= 4) {
        const int64_t a[N_ARGS] = {n, 64, 12, rb_cfg.threads[t]};
        rb_pair_add(p, a, rb_cfg.threads[t]);
      }
  }
}
