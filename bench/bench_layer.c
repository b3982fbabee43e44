/* SPDX-License-Identifier: MIT */
/* The attention layer (issue 4 targets), RoVE, 12 heads x 64, d_model 768.
 *
 * layer/<isa>: rove_layer_forward against the sum of its parts timed separately in the
 *   same loop: the QKV sgemm, attention on strided views of its output, the output sgemm
 *   (one cblas_sgemm each on OpenBLAS's own threads, the plan's count: what a program
 *   would do without the layer; the layer runs column slices on librove's pool instead,
 *   src/layer.c). OpenBLAS's idle threads may still spin when the next layer call starts,
 *   which the layer's time then pays. Counters: layer_ms, parts_ms, ratio = layer / parts
 *   (target <= 1.10).
 * layer_decode/<isa>: one decode step of rove_layer_forward_cached against a cache of kv
 *   tokens (truncated back after each step). Counters: step_ms; parts_ms = its parts timed
 *   separately (QKV sgemv, append, cached attention, output sgemv); ratio = step / parts;
 *   cache_step_ms = the RoVE cache's own step (append the new K/V + attention of one
 *   query); bare_ms = the bare decode kernel: attention of one query over a cache of the
 *   same tokens under a plan without any rotation; cache_vs_bare = cache_step / bare.
 *   Each timed call starts with K/V, weights and activations out of the caches (a 64 MB
 *   buffer is read before it, untimed). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

int openblas_get_parallel(void);          /* OpenBLAS: 0 sequential, 1 pthreads, 2 OpenMP */
void openblas_set_num_threads(int n);

enum { DM = 768, H = 12, D = 64, W = H * D, QKV = 3 * W };

typedef struct {
  rove_plan *plan;
  rove_layer *layer;
  float *w, *x, *y, *qkv, *att;
} layer_setup;

static int setup(layer_setup *s, rove_isa isa, int32_t thr, int32_t n) {
  rove_attention_config c;
  rove_attention_config_init(&c, H, H, D);
  c.isa = isa;
  c.n_threads = thr;
  if (rove_plan_create(&c, &s->plan) != ROVE_OK) return -1;
  s->w = rb_alloc_floats((size_t)4 * W * DM); /* wq, wk, wv ([QKV][DM] together), wo */
  s->x = rb_alloc_floats((size_t)n * DM);
  s->y = rb_alloc_floats((size_t)n * DM);
  s->qkv = rb_alloc_floats((size_t)n * QKV);
  s->att = rb_alloc_floats((size_t)n * W);
  if (!s->w || !s->x || !s->y || !s->qkv || !s->att) return -1;
  rb_fill_uniform(s->w, (size_t)4 * W * DM, 7);
  for (size_t i = 0; i < (size_t)4 * W * DM; i++) s->w[i] *= 0.036f; /* ~1/sqrt(768) */
  rb_fill_uniform(s->x, (size_t)n * DM, 8);
  const rove_layer_weights lw = {.d_model = DM, .wq = s->w, .wk = s->w + W * DM,
                                 .wv = s->w + 2 * W * DM, .wo = s->w + 3 * W * DM};
  return rove_layer_create(s->plan, &lw, &s->layer) == ROVE_OK ? 0 : -1;
}

static void teardown(layer_setup *s) {
  rove_layer_destroy(s->layer);
  rove_plan_destroy(s->plan);
  free(s->w), free(s->x), free(s->y), free(s->qkv), free(s->att);
}

/* OpenBLAS threads of the parts' sgemms: the plan's count. */
static int blas_threads(int32_t thr) { return thr; }

/* The parts of one forward, as the layer runs them (no biases). */
static void parts(const layer_setup *s, int32_t n, int32_t thr) {
  if (openblas_get_parallel() == 1) openblas_set_num_threads(blas_threads(thr));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, QKV, DM, 1.0f, s->x, DM, s->w, DM,
              0.0f, s->qkv, QKV);
  const rove_attention_args a = {.batch = 1, .q_len = n, .kv_len = n, .q = s->qkv,
                                 .k = s->qkv + W, .v = s->qkv + 2 * W, .out = s->att,
                                 .q_stride = QKV, .k_stride = QKV, .v_stride = QKV};
  rove_attention_forward(s->plan, &a);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, DM, W, 1.0f, s->att, W,
              s->w + 3 * W * DM, W, 0.0f, s->y, DM);
}

static double elapsed(int32_t thr, double t0, double c0) {
  return thr > 1 ? rb_now() - t0 : rb_cpu_now() - c0;
}

static void bm_layer(rbs_state *st, void *user) {
  const rove_isa isa = *(const rove_isa *)user;
  const int32_t n = (int32_t)rbs_range(st, 0), thr = (int32_t)rbs_range(st, 1);
  layer_setup s = {0};
  if (setup(&s, isa, thr, n) != 0) {
    rbs_skip_with_error(st, "setup failed");
    teardown(&s);
    return;
  }
  rb_samples tl = {0}, tp = {0};
  while (rbs_keep_running(st)) {
    double t0 = rb_now(), c0 = rb_cpu_now();
    rove_layer_forward(s.layer, 1, n, s.x, NULL, s.y);
    rb_samples_push(&tl, elapsed(thr, t0, c0));
    t0 = rb_now(), c0 = rb_cpu_now();
    parts(&s, n, thr);
    rb_samples_push(&tp, elapsed(thr, t0, c0));
    rbs_do_not_optimize(s.y);
  }
  const double ml = rb_median(tl.v, tl.n) * 1e3, mp = rb_median(tp.v, tp.n) * 1e3;
  rbs_counter_plain(st, "layer_ms", ml);
  rbs_counter_plain(st, "parts_ms", mp);
  rbs_counter_plain(st, "ratio", ml / mp);
  rbs_set_label(st, rove_isa_name(isa));
  rb_samples_free(&tl), rb_samples_free(&tp);
  teardown(&s);
}

/* The parts of one decode step, as rove_layer_forward_cached runs them (no biases):
 * QKV sgemv of the new token, append of its K and V, cached attention, output sgemv. */
static void decode_parts(const layer_setup *s, rove_kv_cache *cache, int32_t thr) {
  if (openblas_get_parallel() == 1) openblas_set_num_threads(blas_threads(thr));
  cblas_sgemv(CblasRowMajor, CblasNoTrans, QKV, DM, 1.0f, s->w, DM, s->x, 1, 0.0f, s->qkv, 1);
  rove_kv_cache_append(cache, 1, s->qkv + W, 0, s->qkv + 2 * W, 0, NULL);
  const rove_attention_args a = {.batch = 1, .q_len = 1, .q = s->qkv, .out = s->att};
  rove_kv_cache_attention(cache, &a);
  cblas_sgemv(CblasRowMajor, CblasNoTrans, DM, W, 1.0f, s->w + 3 * W * DM, W, s->att, 1, 0.0f,
              s->y, 1);
}

/* A cache of the same kv tokens under a plan without rotations: attention over it is the
 * bare decode kernel (no rotation of anything). */
static rove_kv_cache *bare_cache(rove_plan **bare, rove_isa isa, int32_t thr, int32_t kv,
                                 const float *k, const float *v) {
  rove_attention_config c;
  rove_attention_config_init(&c, H, H, D);
  c.isa = isa;
  c.n_threads = thr;
  c.rotate = 0;
  rove_kv_cache *cache = NULL;
  if (rove_plan_create(&c, bare) != ROVE_OK || rove_kv_cache_create(*bare, 1, kv, &cache) != ROVE_OK ||
      rove_kv_cache_append(cache, kv, k, 0, v, 0, NULL) != ROVE_OK) {
    rove_kv_cache_destroy(cache);
    return NULL;
  }
  return cache;
}

/* Medians (ms) of the timed variants of one decode step. */
typedef struct {
  rb_samples step, parts, cached, bare;
} decode_times;

/* Every timed call starts with its data out of the caches, as in a decoder whose other
 * layers' caches evict this one's: a buffer larger than any L3 is read (untimed) first. */
enum { EVICT_BYTES = 64 << 20 };
static uint64_t *evict_buf;
static void evict(int32_t thr) {
  if (!evict_buf && (evict_buf = (uint64_t *)rb_alloc_floats(EVICT_BYTES / 4)))
    memset(evict_buf, 1, EVICT_BYTES);
  if (evict_buf) {
    double seconds;
    uint64_t acc = rb_read_sum(evict_buf, EVICT_BYTES, thr, &seconds);
    rbs_do_not_optimize(&acc);
  }
}

static void decode_loop(rbs_state *st, const layer_setup *s, rove_kv_cache *cache,
                        const rove_kv_cache *bare, int32_t kv, int32_t thr, decode_times *t) {
  const rove_attention_args a = {.batch = 1, .q_len = 1, .q = s->x, .out = s->att};
  while (rbs_keep_running(st)) {
    evict(thr);
    double t0 = rb_now(), c0 = rb_cpu_now();
    rove_layer_forward_cached(s->layer, cache, 1, s->x, NULL, s->y);
    rb_samples_push(&t->step, elapsed(thr, t0, c0));
    rove_kv_cache_truncate(cache, kv);
    evict(thr);
    t0 = rb_now(), c0 = rb_cpu_now();
    decode_parts(s, cache, thr);
    rb_samples_push(&t->parts, elapsed(thr, t0, c0));
    rove_kv_cache_truncate(cache, kv);
    evict(thr);
    t0 = rb_now(), c0 = rb_cpu_now(); /* the RoVE cache's step: append + attention */
    rove_kv_cache_append(cache, 1, s->qkv + W, 0, s->qkv + 2 * W, 0, NULL);
    rove_kv_cache_attention(cache, &a);
    rb_samples_push(&t->cached, elapsed(thr, t0, c0));
    rove_kv_cache_truncate(cache, kv);
    evict(thr);
    t0 = rb_now(), c0 = rb_cpu_now();
    rove_kv_cache_attention(bare, &a);
    rb_samples_push(&t->bare, elapsed(thr, t0, c0));
    rbs_do_not_optimize(s->y);
  }
}

static void bm_layer_decode(rbs_state *st, void *user) {
  const rove_isa isa = *(const rove_isa *)user;
  const int32_t kv = (int32_t)rbs_range(st, 0), thr = (int32_t)rbs_range(st, 1);
  layer_setup s = {0};
  rove_kv_cache *cache = NULL, *bare = NULL;
  rove_plan *bare_plan = NULL;
  float *k = rb_alloc_floats((size_t)kv * W), *v = rb_alloc_floats((size_t)kv * W);
  if (k && v) {
    rb_fill_uniform(k, (size_t)kv * W, 9);
    rb_fill_uniform(v, (size_t)kv * W, 10);
  }
  if (!k || !v || setup(&s, isa, thr, 1) != 0 || rove_kv_cache_create(s.plan, 1, kv + 1, &cache) != ROVE_OK ||
      rove_kv_cache_append(cache, kv, k, 0, v, 0, NULL) != ROVE_OK ||
      !(bare = bare_cache(&bare_plan, isa, thr, kv, k, v))) {
    rbs_skip_with_error(st, "setup failed");
  } else {
    decode_times t = {0};
    decode_loop(st, &s, cache, bare, kv, thr, &t);
    const double ms = rb_median(t.step.v, t.step.n) * 1e3, mp = rb_median(t.parts.v, t.parts.n) * 1e3;
    const double mc = rb_median(t.cached.v, t.cached.n) * 1e3, mb = rb_median(t.bare.v, t.bare.n) * 1e3;
    rbs_counter_plain(st, "step_ms", ms);
    rbs_counter_plain(st, "parts_ms", mp);
    rbs_counter_plain(st, "ratio", ms / mp);
    rbs_counter_plain(st, "cache_step_ms", mc);
    rbs_counter_plain(st, "bare_ms", mb);
    rbs_counter_plain(st, "cache_vs_bare", mc / mb);
    rbs_set_label(st, rove_isa_name(isa));
    rb_samples_free(&t.step), rb_samples_free(&t.parts), rb_samples_free(&t.cached), rb_samples_free(&t.bare);
  }
  rove_kv_cache_destroy(cache);
  rove_kv_cache_destroy(bare);
  rove_plan_destroy(bare_plan);
  free(k), free(v);
  teardown(&s);
}

static const char *const LAYER_ARGS[] = {"n", "thr"};
static const char *const DECODE_ARGS[] = {"kv", "thr"};
static rove_isa fam_isa[RB_N_ISAS];
static rb_pair pairs[2][2][RB_N_ISAS]; /* [smoke][layer, decode][isa] */

static void add_family(rb_pair *p, const char *name, rbs_fn fn, const char *const *args,
                       rove_isa isa) {
  snprintf(p->name, sizeof p->name, "%s/%s", name, rove_isa_name(isa));
  p->fn = fn;
  p->user = &fam_isa[isa];
  p->arg_names = args;
  p->n_args = 2;
  p->unit = RBS_MS;
}

void rb_register_layer(int smoke) {
  for (int i = 0; i < rb_cfg.n_isas && i < (smoke ? RB_N_ISAS : 1); i++) { /* full: best ISA */
    const rove_isa isa = rb_cfg.isas[i];
    fam_isa[isa] = isa;
    rb_pair *pl = &pairs[smoke][0][isa], *pd = &pairs[smoke][1][isa];
    add_family(pl, smoke ? "smoke/layer" : "layer", bm_layer, LAYER_ARGS, isa);
    add_family(pd, smoke ? "smoke/layer_decode" : "layer_decode", bm_layer_decode, DECODE_ARGS, isa);
    if (smoke) {
      rb_pair_add(pl, (const int64_t[]){64, 1}, 1);
      rb_pair_add(pd, (const int64_t[]){128, 1}, 1);
      continue;
    }
    for (int t = 0; t < rb_cfg.n_threads; t++) {
      const int32_t thr = rb_cfg.threads[t];
      rb_pair_add(pl, (const int64_t[]){1024, thr}, thr);
      rb_pair_add(pd, (const int64_t[]){4096, thr}, thr);
    }
  }
}
