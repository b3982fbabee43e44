/* SPDX-License-Identifier: MIT */
/* Selective RoPE and gated linear attention (issue 7), 12 heads x 64, batch 1.
 *
 * gla/<isa>: rove_gla_forward (chunked, chunk 64; also chunk 16 at n = 4096) over n tokens with selective angles and
 *   RoVE rotations (q, k, v and the output), from a zero state. items_per_second = tokens/s.
 *   Counters: gla_ms; step_us = one rove_gla_recurrent decode step (state in, state out),
 *   which does not depend on n. Compared in the report with prefill/<isa> (softmax
 *   attention, causal) at the same n: linear against quadratic growth.
 * selective/<isa>: what explicit angles cost in softmax attention: causal RoVE prefill of
 *   n tokens with positions (attn_pos_ms) and with per-token angles (attn_angles_ms), and
 *   rove_selective_angles producing those angles from increments (angles_ms: wall clock,
 *   as it has no thread setting and runs on rove_default_threads()). Counter
 *   ratio = (angles_ms + attn_angles_ms) / attn_pos_ms. phase_ms: rove_selective_phase
 *   producing the increments from a layer input of H*D features with the reference's
 *   defaults (low-rank projection of rank 16, conv width 4, no activation, no gate;
 *   wall clock on the default threads).
 * One thread: CPU time; more: wall clock (see rb_pair). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

enum { H = 12, D = 64, P = D / 2 };

static double elapsed(int32_t thr, double t0, double c0) {
  return thr > 1 ? rb_now() - t0 : rb_cpu_now() - c0;
}

/* phi ~ 1 +- 0.5 per token accumulated into angles (the same for every call). */
static double *make_angles(int32_t n, uint64_t seed) {
  float *phi = rb_alloc_floats((size_t)n * H * P);
  double *angles = malloc(sizeof(double) * (size_t)n * H * P);
  if (phi && angles) {
    rb_fill_uniform(phi, (size_t)n * H * P, seed);
    for (size_t i = 0; i < (size_t)n * H * P; i++) phi[i] = 1.0f + 0.5f * phi[i];
    if (rove_selective_angles(1, n, H, P, phi, NULL, NULL, NULL, angles) != ROVE_OK) {
      free(angles);
      angles = NULL;
    }
  }
  free(phi);
  return angles;
}

/* The reference's default phase network over d = H*D inputs: random weights (fixed seeds). */
typedef struct {
  float *down, *up, *conv;
  rove_selective_phase_weights w;
} phase_net;

static int phase_net_init(phase_net *p) {
  enum { RANK = 16 };
  p->down = rb_alloc_floats((size_t)RANK * H * D);
  p->up = rb_alloc_floats((size_t)H * P * RANK);
  p->conv = rb_alloc_floats((size_t)H * P * 4);
  if (!p->down || !p->up || !p->conv) return -1;
  rb_fill_uniform(p->down, (size_t)RANK * H * D, 7), rb_fill_uniform(p->up, (size_t)H * P * RANK, 8);
  rb_fill_uniform(p->conv, (size_t)H * P * 4, 9);
  rove_selective_phase_weights_init(&p->w, H, D, P);
  p->w.proj_rank = RANK, p->w.proj_down = p->down, p->w.proj_up = p->up, p->w.conv_w = p->conv;
  return 0;
}

typedef struct {
  float *q, *k, *v, *g, *out, *state;
  double *angles;
} gla_bufs;

static int gla_alloc(gla_bufs *b, int32_t n) {
  const size_t e = (size_t)n * H * D;
  b->q = rb_alloc_floats(e), b->k = rb_alloc_floats(e), b->v = rb_alloc_floats(e);
  b->g = rb_alloc_floats(e), b->out = rb_alloc_floats(e);
  b->state = rb_alloc_floats((size_t)H * D * D);
  b->angles = make_angles(n, 5);
  if (!b->q || !b->k || !b->v || !b->g || !b->out || !b->state || !b->angles) return -1;
  rb_fill_uniform(b->q, e, 1), rb_fill_uniform(b->k, e, 2), rb_fill_uniform(b->v, e, 3);
  rb_fill_uniform(b->g, e, 4);
  for (size_t i = 0; i < e; i++) b->g[i] = -0.05f * (b->g[i] + 1.0f); /* in (-0.1, 0] */
  memset(b->state, 0, sizeof(float) * (size_t)H * D * D);
  return 0;
}

static void gla_free(gla_bufs *b) {
  free(b->q), free(b->k), free(b->v), free(b->g), free(b->out), free(b->state), free(b->angles);
}

static void bm_gla(rbs_state *st, void *user) {
  const rove_isa isa = *(const rove_isa *)user;
  const int32_t n = (int32_t)rbs_range(st, 0), chunk = (int32_t)rbs_range(st, 1);
  const int32_t thr = (int32_t)rbs_range(st, 2);
  rove_gla_config c;
  rove_gla_config_init(&c, H, D, D);
  c.rotate = ROVE_ROTATE_ROVE;
  c.chunk = chunk;
  c.isa = isa;
  c.n_threads = thr;
  rove_gla_plan *plan = NULL;
  gla_bufs b = {0};
  if (rove_gla_plan_create(&c, &plan) != ROVE_OK || gla_alloc(&b, n) != 0) {
    rbs_skip_with_error(st, "setup failed");
  } else {
    const rove_gla_args full = {.batch = 1, .seq_len = n, .q = b.q, .k = b.k, .v = b.v, .g = b.g,
                                .angles = b.angles, .out = b.out};
    const rove_gla_args step = {.batch = 1, .seq_len = 1, .q = b.q, .k = b.k, .v = b.v, .g = b.g,
                                .angles = b.angles, .initial_state = b.state,
                                .final_state = b.state, .out = b.out};
    rb_samples tf = {0}, ts = {0};
    while (rbs_keep_running(st)) {
      double t0 = rb_now(), c0 = rb_cpu_now();
      rove_gla_forward(plan, &full);
      rb_samples_push(&tf, elapsed(thr, t0, c0));
      t0 = rb_now(), c0 = rb_cpu_now();
      for (int i = 0; i < 16; i++) rove_gla_recurrent(plan, &step);
      rb_samples_push(&ts, elapsed(thr, t0, c0) / 16);
      rbs_do_not_optimize(b.out);
    }
    rbs_counter_plain(st, "gla_ms", rb_median(tf.v, tf.n) * 1e3);
    rbs_counter_plain(st, "step_us", rb_median(ts.v, ts.n) * 1e6);
    rbs_set_items_processed(st, rbs_iterations(st) * n);
    rbs_set_label(st, rove_isa_name(rove_gla_plan_isa(plan)));
    rb_samples_free(&tf), rb_samples_free(&ts);
  }
  gla_free(&b);
  rove_gla_plan_destroy(plan);
}

static void bm_selective(rbs_state *st, void *user) {
  const rove_isa isa = *(const rove_isa *)user;
  const int32_t n = (int32_t)rbs_range(st, 0), thr = (int32_t)rbs_range(st, 1);
  rove_attention_config c;
  rove_attention_config_init(&c, H, H, D);
  c.isa = isa;
  c.n_threads = thr;
  rove_plan *plan = NULL;
  const size_t e = (size_t)n * H * D;
  float *q = rb_alloc_floats(e), *k = rb_alloc_floats(e), *v = rb_alloc_floats(e);
  float *out = rb_alloc_floats(e), *phi = rb_alloc_floats((size_t)n * H * P);
  double *angles = make_angles(n, 6);
  phase_net net = {0};
  if (rove_plan_create(&c, &plan) != ROVE_OK || !q || !k || !v || !out || !phi || !angles ||
      phase_net_init(&net) != 0) {
    rbs_skip_with_error(st, "setup failed");
  } else {
    rb_fill_uniform(q, e, 1), rb_fill_uniform(k, e, 2), rb_fill_uniform(v, e, 3);
    rb_fill_uniform(phi, (size_t)n * H * P, 4);
    rove_attention_args a = {.batch = 1, .q_len = n, .kv_len = n, .q = q, .k = k, .v = v, .out = out};
    rb_samples tp = {0}, ta = {0}, tg = {0}, tf = {0};
    while (rbs_keep_running(st)) {
      a.q_angles = a.kv_angles = NULL;
      double t0 = rb_now(), c0 = rb_cpu_now();
      rove_attention_forward(plan, &a);
      rb_samples_push(&tp, elapsed(thr, t0, c0));
      a.q_angles = a.kv_angles = angles;
      t0 = rb_now(), c0 = rb_cpu_now();
      rove_attention_forward(plan, &a);
      rb_samples_push(&ta, elapsed(thr, t0, c0));
      t0 = rb_now(); /* wall clock: it runs on the library's default threads */
      rove_selective_angles(1, n, H, P, phi, NULL, NULL, NULL, angles);
      rb_samples_push(&tg, rb_now() - t0);
      t0 = rb_now(); /* the layer input: q's n x H*D floats */
      rove_selective_phase(&net.w, 1, n, q, 0, NULL, phi);
      rb_samples_push(&tf, rb_now() - t0);
      rbs_do_not_optimize(out);
    }
    const double mp = rb_median(tp.v, tp.n) * 1e3, ma = rb_median(ta.v, ta.n) * 1e3;
    const double mg = rb_median(tg.v, tg.n) * 1e3;
    rbs_counter_plain(st, "attn_pos_ms", mp);
    rbs_counter_plain(st, "attn_angles_ms", ma);
    rbs_counter_plain(st, "angles_ms", mg);
    rbs_counter_plain(st, "ratio", (ma + mg) / mp);
    rbs_counter_plain(st, "phase_ms", rb_median(tf.v, tf.n) * 1e3);
    rbs_set_label(st, rove_isa_name(rove_plan_isa(plan)));
    rb_samples_free(&tp), rb_samples_free(&ta), rb_samples_free(&tg), rb_samples_free(&tf);
  }
  free(q), free(k), free(v), free(out), free(phi), free(angles);
  free(net.down), free(net.up), free(net.conv);
  rove_plan_destroy(plan);
}

static const char *const ARG_NAMES[] = {"n", "thr"};
static const char *const GLA_ARG_NAMES[] = {"n", "chunk", "thr"};
static rove_isa fam_isa[RB_N_ISAS];
static rb_pair pairs[2][2][RB_N_ISAS]; /* [smoke][gla, selective][isa] */

static void add_family(rb_pair *p, const char *name, rbs_fn fn, rove_isa isa) {
  const int gla = fn == bm_gla;
  snprintf(p->name, sizeof p->name, "%s/%s", name, rove_isa_name(isa));
  p->fn = fn;
  p->user = &fam_isa[isa];
  p->arg_names = gla ? GLA_ARG_NAMES : ARG_NAMES;
  p->n_args = gla ? 3 : 2;
  p->unit = RBS_MS;
}

void rb_register_selective(int smoke) {
  for (int i = 0; i < rb_cfg.n_isas && i < (smoke ? RB_N_ISAS : 1); i++) { /* full: best ISA */
    const rove_isa isa = rb_cfg.isas[i];
    fam_isa[isa] = isa;
    rb_pair *pg = &pairs[smoke][0][isa], *ps = &pairs[smoke][1][isa];
    add_family(pg, smoke ? "smoke/gla" : "gla", bm_gla, isa);
    add_family(ps, smoke ? "smoke/selective" : "selective", bm_selective, isa);
    if (smoke) {
      rb_pair_add(pg, (const int64_t[]){100, 64, 1}, 1);
      rb_pair_add(ps, (const int64_t[]){100, 1}, 1);
      continue;
    }
    for (int t = 0; t < rb_cfg.n_threads; t++) {
      const int32_t thr = rb_cfg.threads[t];
      for (int32_t n = 1024; n <= rb_cfg.max_n; n *= 2) rb_pair_add(pg, (const int64_t[]){n, 64, thr}, thr);
      if (rb_cfg.max_n >= 4096) rb_pair_add(pg, (const int64_t[]){4096, 16, thr}, thr);
      for (int32_t n = 1024; n <= 4096 && n <= rb_cfg.max_n; n *= 4)
        rb_pair_add(ps, (const int64_t[]){n, thr}, thr);
    }
  }
}
