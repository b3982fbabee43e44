/* SPDX-License-Identifier: MIT */
/* The attention layer (src/layer.c, src/layer_cached.c): rove_layer_forward against naive
 * double-precision projections around the oracle attention (also with attention sinks);
 * the cached forward (prefill, then decode token by token) against one full forward; bad
 * input. Links librove.so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rove_oracle.h"
#include "testutil.h"

enum { BQ = 1, BK = 2, BV = 4, BO = 8, ALL_BIASES = 15 };

typedef struct {
  int H, Hkv, d, d_model, batch, n;
  uint32_t rotate;
  int biases;       /* BQ | BK | BV | BO */
  int pos_kind;     /* 0: NULL, 1: increasing per row (offset, stride), 2: shuffled */
  int threads;
  rove_pairing pairing;
  int window;
} lcase;

typedef struct {
  lcase c;
  rove_attention_config cfg;
  rove_plan *plan;
  rove_layer *layer;
  rove_layer_weights w;
  float *wq, *wk, *wv, *wo, *bias[4]; /* bq, bk, bv, bo */
  float *sinks;                       /* [H] or NULL */
  float *x;
  int32_t *pos;
  int64_t rows, qw, kvw;              /* batch * n, H * d, Hkv * d */
} lproblem;

/* Rotary placement LAST for the problems made while this is > 0: this many rotated dims at
 * the end of each head (DeepSeek MLA). 0: FIRST, r = head_dim. */
static int g_last_rdim;
/* Attention sinks (a logit per head) in the problems made while this is set. */
static int g_sinks;

static float *rand_buf(rove_rng *r, int64_t n, float lo, float hi) {
  float *p = malloc(sizeof(float) * (size_t)n);
  assert_non_null(p);
  rove_rng_fill(r, p, n, lo, hi);
  return p;
}

static void make_positions(lproblem *pr, rove_rng *rng) {
  const lcase *c = &pr->c;
  if (c->pos_kind == 0) return;
  pr->pos = malloc(sizeof(int32_t) * (size_t)pr->rows);
  assert_non_null(pr->pos);
  for (int b = 0; b < c->batch; b++) {
    int32_t *p = pr->pos + (int64_t)b * c->n;
    for (int i = 0; i < c->n; i++) p[i] = (b % 2 ? -40 : 1000 + 7 * b) + (b % 2 ? 2 : 3) * i;
    for (int j = c->n - 1; c->pos_kind == 2 && j > 0; j--) {
      int r = (int)(rove_rng_u64(rng) % (uint64_t)(j + 1));
      int32_t t = p[j];
      p[j] = p[r];
      p[r] = t;
    }
  }
}

/* Random weights (scale 1/sqrt(d_model)), biases, input, positions; plan and layer. */
static void make_problem(lproblem *pr, const lcase *c, uint64_t seed) {
  memset(pr, 0, sizeof *pr);
  pr->c = *c;
  rove_rng rng;
  rove_rng_seed(&rng, seed);
  pr->qw = (int64_t)c->H * c->d;
  pr->kvw = (int64_t)c->Hkv * c->d;
  pr->rows = (int64_t)c->batch * c->n;
  const float s = 1.0f / sqrtf((float)c->d_model);
  pr->wq = rand_buf(&rng, pr->qw * c->d_model, -s, s);
  pr->wk = rand_buf(&rng, pr->kvw * c->d_model, -s, s);
  pr->wv = rand_buf(&rng, pr->kvw * c->d_model, -s, s);
  pr->wo = rand_buf(&rng, pr->qw * c->d_model, -s, s);
  const int64_t blen[4] = {pr->qw, pr->kvw, pr->kvw, c->d_model};
  for (int i = 0; i < 4; i++)
    if (c->biases & (1 << i)) pr->bias[i] = rand_buf(&rng, blen[i], -0.5f, 0.5f);
  pr->x = rand_buf(&rng, pr->rows * c->d_model, -1.0f, 1.0f);
  make_positions(pr, &rng);
  if (g_sinks) pr->sinks = rand_buf(&rng, c->H, -1.0f, 2.0f);
  pr->w = (rove_layer_weights){.d_model = c->d_model, .wq = pr->wq, .wk = pr->wk, .wv = pr->wv,
                               .wo = pr->wo, .bq = pr->bias[0], .bk = pr->bias[1],
                               .bv = pr->bias[2], .bo = pr->bias[3], .sinks = pr->sinks};
  rove_attention_config_init(&pr->cfg, c->H, c->Hkv, c->d);
  pr->cfg.rotate = c->rotate;
  pr->cfg.n_threads = c->threads;
  pr->cfg.rope.pairing = c->pairing;
  pr->cfg.window = c->window;
  if (g_last_rdim > 0) {
    pr->cfg.rope.placement = ROVE_ROTARY_LAST;
    pr->cfg.rope.rotary_dim = g_last_rdim;
  }
  assert_int_equal(rove_plan_create(&pr->cfg, &pr->plan), ROVE_OK);
  assert_int_equal(rove_layer_create(pr->plan, &pr->w, &pr->layer), ROVE_OK);
}

static void free_problem(lproblem *pr) {
  rove_layer_destroy(pr->layer);
  rove_plan_destroy(pr->plan);
  free(pr->wq), free(pr->wk), free(pr->wv), free(pr->wo), free(pr->x), free(pr->pos);
  free(pr->sinks);
  for (int i = 0; i < 4; i++) free(pr->bias[i]);
}

/* y[r][o] = sum_i x[r][i] W[o][i] + b[o], in double. */
static void ref_linear_f(const float *x, int64_t rows, int64_t in, const float *W, const float *b,
                         int64_t out, double *y) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t o = 0; o < out; o++) {
      double acc = b ? b[o] : 0.0;
      for (int64_t i = 0; i < in; i++) acc += (double)x[r * in + i] * W[o * in + i];
      y[r * out + o] = acc;
    }
}

static float *to_float(const double *a, int64_t n) {
  float *f = malloc(sizeof(float) * (size_t)n);
  assert_non_null(f);
  for (int64_t i = 0; i < n; i++) f[i] = (float)a[i];
  return f;
}

/* Reference y [rows][d_model]: naive projections, the oracle attention, naive output. */
static double *reference(const lproblem *pr) {
  const lcase *c = &pr->c;
  const int64_t rows = pr->rows, dm = c->d_model;
  double *q = malloc(sizeof(double) * (size_t)(rows * pr->qw));
  double *k = malloc(sizeof(double) * (size_t)(rows * pr->kvw));
  double *v = malloc(sizeof(double) * (size_t)(rows * pr->kvw));
  double *att = malloc(sizeof(double) * (size_t)(rows * pr->qw));
  double *y = malloc(sizeof(double) * (size_t)(rows * dm));
  assert_true(q && k && v && att && y);
  ref_linear_f(pr->x, rows, dm, pr->wq, pr->bias[0], pr->qw, q);
  ref_linear_f(pr->x, rows, dm, pr->wk, pr->bias[1], pr->kvw, k);
  ref_linear_f(pr->x, rows, dm, pr->wv, pr->bias[2], pr->kvw, v);
  float *qf = to_float(q, rows * pr->qw), *kf = to_float(k, rows * pr->kvw),
        *vf = to_float(v, rows * pr->kvw);
  double inv_freq[ROVE_MAX_HEAD_DIM / 2], m = 1.0;
  assert_int_equal(rove_rope_inv_freq(&pr->cfg.rope, c->d, inv_freq, &m), ROVE_OK);
  rove_attention_args a = {.batch = c->batch, .q_len = c->n, .kv_len = c->n, .q = qf, .k = kf,
                           .v = vf, .q_pos = pr->pos, .kv_pos = pr->pos, .sinks = pr->sinks};
  assert_int_equal(rove_oracle_attention(&pr->cfg, inv_freq, m, &a, att, NULL), 0);
  for (int64_t r = 0; r < rows; r++) /* y = att Wo^T + bo */
    for (int64_t o = 0; o < dm; o++) {
      double acc = pr->bias[3] ? pr->bias[3][o] : 0.0;
      for (int64_t i = 0; i < pr->qw; i++) acc += att[r * pr->qw + i] * pr->wo[o * pr->qw + i];
      y[r * dm + o] = acc;
    }
  free(q), free(k), free(v), free(att), free(qf), free(kf), free(vf);
  return y;
}

static void check_forward(const lcase *c, uint64_t seed) {
  lproblem pr;
  make_problem(&pr, c, seed);
  const int64_t ny = pr.rows * c->d_model;
  rove_guarded y;
  rove_guarded_alloc(&y, ny, 3);
  for (int64_t i = 0; i < ny; i++) y.data[i] = NAN; /* y is output only: nothing of it may survive */
  assert_int_equal(rove_layer_forward(pr.layer, c->batch, c->n, pr.x, pr.pos, y.data), ROVE_OK);
  assert_true(rove_guarded_intact(&y));
  double *ref = reference(&pr);
  const double err = rove_max_rel_err_fd(y.data, ref, ny);
  if (err > 2e-5)
    print_error("H %d Hkv %d d %d d_model %d batch %d n %d rotate %u biases %d pos %d: err %.3e\n",
                c->H, c->Hkv, c->d, c->d_model, c->batch, c->n, (unsigned)c->rotate, c->biases,
                c->pos_kind, err);
  assert_true(err <= 2e-5);
  free(ref);
  rove_guarded_free(&y);
  free_problem(&pr);
}

/* ---- rove_layer_forward vs the reference ------------------------------------------------ */

static void test_forward_mha(void **state) {
  (void)state;
  const lcase c = {4, 4, 16, 48, 1, 37, ROVE_ROTATE_ROVE, 0, 0, 1, ROVE_PAIRING_HALF, 0};
  check_forward(&c, 1);
}

static void test_forward_biases_gqa_batch2(void **state) {
  (void)state;
  const lcase c = {6, 2, 32, 64, 2, 45, ROVE_ROTATE_ROVE, ALL_BIASES, 0, 2, ROVE_PAIRING_HALF, 0};
  check_forward(&c, 2);
}

static void test_forward_rope_partial_biases(void **state) {
  (void)state;
  const lcase c = {8, 2, 16, 40, 2, 33, ROVE_ROTATE_ROPE, BQ | BO, 0, 1,
                   ROVE_PAIRING_INTERLEAVED, 0};
  check_forward(&c, 3);
}

static void test_forward_explicit_positions(void **state) {
  (void)state;
  const lcase rove = {4, 2, 32, 56, 2, 29, ROVE_ROTATE_ROVE, BK | BV, 2, 2, ROVE_PAIRING_HALF, 0};
  check_forward(&rove, 4);
  const lcase rope = {4, 2, 32, 56, 2, 29, ROVE_ROTATE_ROPE, BV, 2, 1, ROVE_PAIRING_HALF, 0};
  check_forward(&rope, 5);
  const lcase incr = {3, 3, 16, 24, 3, 20, ROVE_ROTATE_ROVE, ALL_BIASES, 1, 2, ROVE_PAIRING_HALF, 0};
  check_forward(&incr, 6);
}

static void test_forward_mqa_window_long(void **state) {
  (void)state;
  const lcase c = {4, 1, 64, 96, 1, 150, ROVE_ROTATE_ROVE, ALL_BIASES, 0, 2, ROVE_PAIRING_HALF, 50};
  check_forward(&c, 7);
}

/* One token: the projections are matrix-vector products (sgemv), without biases. */
static void test_forward_one_token(void **state) {
  (void)state;
  const lcase c = {4, 2, 16, 48, 1, 1, ROVE_ROTATE_ROVE, 0, 0, 1, ROVE_PAIRING_HALF, 0};
  check_forward(&c, 9);
}

/* The layer keeps its own copy of the weights. */
static void test_weights_are_copied(void **state) {
  (void)state;
  const lcase c = {2, 2, 16, 32, 1, 9, ROVE_ROTATE_ROVE, ALL_BIASES, 0, 1, ROVE_PAIRING_HALF, 0};
  lproblem pr;
  make_problem(&pr, &c, 8);
  const size_t ny = (size_t)(pr.rows * c.d_model);
  float *y1 = malloc(sizeof(float) * ny), *y2 = malloc(sizeof(float) * ny);
  assert_true(y1 && y2);
  assert_int_equal(rove_layer_forward(pr.layer, 1, c.n, pr.x, NULL, y1), ROVE_OK);
  for (int64_t i = 0; i < pr.qw * c.d_model; i++) pr.wq[i] = pr.wo[i] = NAN;
  for (int i = 0; i < 4; i++) pr.bias[i][0] = NAN;
  assert_int_equal(rove_layer_forward(pr.layer, 1, c.n, pr.x, NULL, y2), ROVE_OK);
  assert_memory_equal(y1, y2, sizeof(float) * ny);
  free(y1), free(y2);
  free_problem(&pr);
}

/* ---- cached forward: prefill, then decode token by token -------------------------------- */

/* Rows [t0, t0 + cnt) of every batch row of src [batch][n][width] into dst [batch][cnt][width]. */
static void gather(void *dst, const void *src, size_t elem, int batch, int n, int t0, int cnt,
                   int64_t width) {
  for (int b = 0; b < batch; b++)
    memcpy((char *)dst + (size_t)((int64_t)b * cnt * width) * elem,
           (const char *)src + (size_t)(((int64_t)b * n + t0) * width) * elem,
           (size_t)((int64_t)cnt * width) * elem);
}

static void scatter(void *dst, const void *src, size_t elem, int batch, int n, int t0, int cnt,
                    int64_t width) {
  for (int b = 0; b < batch; b++)
    memcpy((char *)dst + (size_t)(((int64_t)b * n + t0) * width) * elem,
           (const char *)src + (size_t)((int64_t)b * cnt * width) * elem,
           (size_t)((int64_t)cnt * width) * elem);
}

/* One cached call on tokens [t0, t0 + cnt) of the problem; output rows go into y_all. */
static void cached_step(const lproblem *pr, rove_kv_cache *cache, int t0, int cnt, float *y_all) {
  const lcase *c = &pr->c;
  float *x = malloc(sizeof(float) * (size_t)((int64_t)c->batch * cnt * c->d_model));
  float *y = malloc(sizeof(float) * (size_t)((int64_t)c->batch * cnt * c->d_model));
  int32_t *pos = pr->pos ? malloc(sizeof(int32_t) * (size_t)c->batch * (size_t)cnt) : NULL;
  assert_true(x && y && (pos || !pr->pos));
  gather(x, pr->x, sizeof(float), c->batch, c->n, t0, cnt, c->d_model);
  if (pos) gather(pos, pr->pos, sizeof(int32_t), c->batch, c->n, t0, cnt, 1);
  assert_int_equal(rove_layer_forward_cached(pr->layer, cache, cnt, x, pos, y), ROVE_OK);
  assert_int_equal(rove_kv_cache_length(cache), t0 + cnt);
  scatter(y_all, y, sizeof(float), c->batch, c->n, t0, cnt, c->d_model);
  free(x), free(y), free(pos);
}

static void check_prefill_decode(const lcase *c, int prompt, uint64_t seed) {
  lproblem pr;
  make_problem(&pr, c, seed);
  const size_t ny = (size_t)(pr.rows * c->d_model);
  float *full = malloc(sizeof(float) * ny), *inc = malloc(sizeof(float) * ny);
  assert_true(full && inc);
  assert_int_equal(rove_layer_forward(pr.layer, c->batch, c->n, pr.x, pr.pos, full), ROVE_OK);
  rove_kv_cache *cache = NULL;
  assert_int_equal(rove_kv_cache_create(pr.plan, c->batch, c->n + 5, &cache), ROVE_OK);
  cached_step(&pr, cache, 0, prompt, inc);
  for (int t = prompt; t < c->n; t++) cached_step(&pr, cache, t, 1, inc);
  const double err = rove_max_rel_err_ff(inc, full, (int64_t)ny);
  if (err > 1e-5) print_error("prefill %d + decode to %d: err %.3e\n", prompt, c->n, err);
  assert_true(err <= 1e-5);
  rove_kv_cache_destroy(cache);
  free(full), free(inc);
  free_problem(&pr);
}

static void test_cached_equals_full(void **state) {
  (void)state;
  const lcase rove = {6, 2, 32, 64, 2, 70, ROVE_ROTATE_ROVE, ALL_BIASES, 0, 2, ROVE_PAIRING_HALF, 0};
  check_prefill_decode(&rove, 40, 11);
  const lcase rope = {4, 4, 16, 48, 1, 50, ROVE_ROTATE_ROPE, BQ | BO, 0, 1, ROVE_PAIRING_HALF, 0};
  check_prefill_decode(&rope, 17, 12);
  const lcase pos = {4, 1, 32, 40, 2, 45, ROVE_ROTATE_ROVE, BV, 1, 2, ROVE_PAIRING_INTERLEAVED, 0};
  check_prefill_decode(&pos, 1, 13);
  const lcase win = {4, 2, 64, 64, 1, 300, ROVE_ROTATE_ROVE, 0, 0, 2, ROVE_PAIRING_HALF, 64};
  check_prefill_decode(&win, 200, 14);
}

/* The layer with the rotated dims last: forward against the reference (oracle attention
 * with placement LAST), and cached prefill + decode against the full forward. */
static void test_placement_last(void **state) {
  (void)state;
  g_last_rdim = 8;
  const lcase rove = {6, 2, 32, 64, 2, 45, ROVE_ROTATE_ROVE, ALL_BIASES, 2, 2, ROVE_PAIRING_INTERLEAVED, 0};
  check_forward(&rove, 21);
  const lcase rope = {4, 2, 32, 56, 2, 29, ROVE_ROTATE_ROPE, BV, 0, 1, ROVE_PAIRING_HALF, 0};
  check_forward(&rope, 22);
  lcase inc = rove; /* cached decode needs positions that grow along the sequence */
  inc.pos_kind = 1;
  check_prefill_decode(&inc, 20, 23);
  check_prefill_decode(&rope, 1, 24);
  g_last_rdim = 0;
}

/* Attention sinks (gpt-oss): forward against the reference, cached prefill + decode
 * against the full forward, and the sinks copied at create. */
static void test_sinks(void **state) {
  (void)state;
  g_sinks = 1;
  const lcase gqa = {8, 2, 32, 64, 2, 45, ROVE_ROTATE_ROPE, ALL_BIASES, 0, 2, ROVE_PAIRING_HALF, 16};
  check_forward(&gqa, 41);
  const lcase rove = {4, 4, 16, 48, 1, 37, ROVE_ROTATE_ROVE, BQ | BO, 2, 1, ROVE_PAIRING_HALF, 0};
  check_forward(&rove, 42);
  check_prefill_decode(&gqa, 20, 43);
  lproblem pr; /* the layer keeps its own copy */
  make_problem(&pr, &gqa, 44);
  const int64_t ny = pr.rows * gqa.d_model;
  float *y0 = malloc(sizeof(float) * (size_t)ny), *y1 = malloc(sizeof(float) * (size_t)ny);
  assert_true(y0 && y1);
  assert_int_equal(rove_layer_forward(pr.layer, gqa.batch, gqa.n, pr.x, NULL, y0), ROVE_OK);
  for (int h = 0; h < gqa.H; h++) pr.sinks[h] = NAN;
  assert_int_equal(rove_layer_forward(pr.layer, gqa.batch, gqa.n, pr.x, NULL, y1), ROVE_OK);
  assert_memory_equal(y0, y1, sizeof(float) * (size_t)ny);
  rove_layer *l = NULL; /* a non-finite sink: refused at create */
  assert_int_equal(rove_layer_create(pr.plan, &pr.w, &l), ROVE_ERR_INVALID_ARGUMENT);
  assert_null(l);
  free(y0), free(y1);
  free_problem(&pr);
  g_sinks = 0;
}

/* Capacity exceeded: status, the cache and y unchanged. */
static void test_cached_capacity(void **state) {
  (void)state;
  const lcase c = {4, 2, 16, 32, 2, 12, ROVE_ROTATE_ROVE, ALL_BIASES, 0, 1, ROVE_PAIRING_HALF, 0};
  lproblem pr;
  make_problem(&pr, &c, 21);
  rove_kv_cache *cache = NULL;
  assert_int_equal(rove_kv_cache_create(pr.plan, c.batch, 10, &cache), ROVE_OK);
  float *y = malloc(sizeof(float) * (size_t)(pr.rows * c.d_model));
  assert_non_null(y);
  assert_int_equal(rove_layer_forward_cached(pr.layer, cache, 12, pr.x, NULL, y), ROVE_ERR_SIZE_OVERFLOW);
  assert_int_equal(rove_kv_cache_length(cache), 0);
  cached_step(&pr, cache, 0, 9, y); /* x rows 0..8 of each batch row */
  for (int64_t i = 0; i < pr.rows * c.d_model; i++) y[i] = 12345.0f;
  int32_t before[2 * 9], after[2 * 9];
  assert_int_equal(rove_kv_cache_positions(cache, before), ROVE_OK);
  assert_int_equal(rove_layer_forward_cached(pr.layer, cache, 2, pr.x, NULL, y), ROVE_ERR_SIZE_OVERFLOW);
  assert_int_equal(rove_kv_cache_length(cache), 9);
  assert_int_equal(rove_kv_cache_positions(cache, after), ROVE_OK);
  assert_memory_equal(before, after, sizeof before);
  for (int64_t i = 0; i < pr.rows * c.d_model; i++) assert_true(y[i] == 12345.0f);
  assert_int_equal(rove_layer_forward_cached(pr.layer, cache, 1, pr.x, NULL, y), ROVE_OK);
  assert_int_equal(rove_kv_cache_length(cache), 10);
  rove_kv_cache_destroy(cache);
  free(y);
  free_problem(&pr);
}

/* ---- bad input ------------------------------------------------------------------------- */

static void test_bad_create(void **state) {
  (void)state;
  const lcase c = {4, 2, 16, 32, 1, 8, ROVE_ROTATE_ROVE, 0, 0, 1, ROVE_PAIRING_HALF, 0};
  lproblem pr;
  make_problem(&pr, &c, 31);
  rove_layer *l = NULL; /* must stay untouched */
  assert_int_equal(rove_layer_create(NULL, &pr.w, &l), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_create(pr.plan, NULL, &l), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_create(pr.plan, &pr.w, NULL), ROVE_ERR_INVALID_ARGUMENT);
  for (int i = 0; i < 4; i++) {
    rove_layer_weights w = pr.w;
    if (i == 0) w.wq = NULL;
    if (i == 1) w.wk = NULL;
    if (i == 2) w.wv = NULL;
    if (i == 3) w.wo = NULL;
    assert_int_equal(rove_layer_create(pr.plan, &w, &l), ROVE_ERR_INVALID_ARGUMENT);
  }
  rove_layer_weights w = pr.w;
  w.d_model = 0;
  assert_int_equal(rove_layer_create(pr.plan, &w, &l), ROVE_ERR_INVALID_ARGUMENT);
  w.d_model = -3;
  assert_int_equal(rove_layer_create(pr.plan, &w, &l), ROVE_ERR_INVALID_ARGUMENT);
  assert_null(l);
  rove_layer_destroy(NULL);
  free_problem(&pr);
}

static void test_bad_forward(void **state) {
  (void)state;
  const lcase c = {4, 2, 16, 32, 2, 8, ROVE_ROTATE_ROVE, BO, 0, 1, ROVE_PAIRING_HALF, 0};
  lproblem pr;
  make_problem(&pr, &c, 32);
  const int64_t ny = pr.rows * c.d_model;
  float *y = malloc(sizeof(float) * (size_t)ny);
  float *xy = malloc(sizeof(float) * (size_t)(2 * ny)); /* x and an overlapping y */
  assert_true(y && xy);
  memcpy(xy, pr.x, sizeof(float) * (size_t)ny);
  for (int64_t i = 0; i < ny; i++) y[i] = -7.0f;
  const rove_layer *l = pr.layer;
  assert_int_equal(rove_layer_forward(NULL, 2, 8, pr.x, NULL, y), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward(l, 2, 8, NULL, NULL, y), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward(l, 2, 8, pr.x, NULL, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward(l, 2, 0, pr.x, NULL, y), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward(l, 0, 8, pr.x, NULL, y), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward(l, -1, 8, pr.x, NULL, y), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward(l, 2, -8, pr.x, NULL, y), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward(l, 2, 8, xy, NULL, xy), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward(l, 2, 8, xy, NULL, xy + ny - 1), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward(l, 2, 8, xy + ny - 1, NULL, xy), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward(l, INT32_MAX, INT32_MAX, pr.x, NULL, y), ROVE_ERR_SIZE_OVERFLOW);
  for (int64_t i = 0; i < ny; i++) assert_true(y[i] == -7.0f);
  assert_int_equal(rove_layer_forward(l, 2, 8, xy, NULL, xy + ny), ROVE_OK); /* adjacent is fine */
  free(y), free(xy);
  free_problem(&pr);
}

static void test_bad_cached(void **state) {
  (void)state;
  const lcase c = {4, 2, 16, 32, 2, 8, ROVE_ROTATE_ROVE, 0, 0, 1, ROVE_PAIRING_HALF, 0};
  lproblem pr;
  make_problem(&pr, &c, 33);
  const int64_t ny = pr.rows * c.d_model;
  float *y = malloc(sizeof(float) * (size_t)ny);
  assert_non_null(y);
  rove_kv_cache *cache = NULL;
  assert_int_equal(rove_kv_cache_create(pr.plan, 2, 16, &cache), ROVE_OK);
  const rove_layer *l = pr.layer;
  assert_int_equal(rove_layer_forward_cached(NULL, cache, 8, pr.x, NULL, y), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward_cached(l, NULL, 8, pr.x, NULL, y), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward_cached(l, cache, 0, pr.x, NULL, y), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward_cached(l, cache, 8, NULL, NULL, y), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward_cached(l, cache, 8, pr.x, NULL, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward_cached(l, cache, 8, pr.x, NULL, (float *)pr.x + 5),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_length(cache), 0);
  /* A cache of another plan shape (other n_kv_heads, or head_dim). */
  rove_attention_config other;
  rove_plan *p2 = NULL, *p3 = NULL;
  rove_attention_config_init(&other, 4, 4, 16);
  assert_int_equal(rove_plan_create(&other, &p2), ROVE_OK);
  rove_attention_config_init(&other, 2, 2, 32);
  assert_int_equal(rove_plan_create(&other, &p3), ROVE_OK);
  rove_kv_cache *c2 = NULL, *c3 = NULL;
  assert_int_equal(rove_kv_cache_create(p2, 2, 16, &c2), ROVE_OK);
  assert_int_equal(rove_kv_cache_create(p3, 2, 16, &c3), ROVE_OK);
  assert_int_equal(rove_layer_forward_cached(l, c2, 8, pr.x, NULL, y), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_layer_forward_cached(l, c3, 8, pr.x, NULL, y), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_length(c2), 0);
  /* Another plan object of the same shape is accepted. */
  rove_plan *p4 = NULL;
  assert_int_equal(rove_plan_create(&pr.cfg, &p4), ROVE_OK);
  rove_kv_cache *c4 = NULL;
  assert_int_equal(rove_kv_cache_create(p4, 2, 16, &c4), ROVE_OK);
  assert_int_equal(rove_layer_forward_cached(l, c4, 8, pr.x, NULL, y), ROVE_OK);
  assert_int_equal(rove_kv_cache_length(c4), 8);
  rove_kv_cache_destroy(c2), rove_kv_cache_destroy(c3), rove_kv_cache_destroy(c4);
  rove_plan_destroy(p2), rove_plan_destroy(p3), rove_plan_destroy(p4);
  rove_kv_cache_destroy(cache);
  free(y);
  free_problem(&pr);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_forward_mha),
      cmocka_unit_test(test_forward_biases_gqa_batch2),
      cmocka_unit_test(test_forward_rope_partial_biases),
      cmocka_unit_test(test_forward_explicit_positions),
      cmocka_unit_test(test_forward_mqa_window_long),
    cmocka_unit_test(test_forward_one_token),
      cmocka_unit_test(test_weights_are_copied),
      cmocka_unit_test(test_cached_equals_full),
      cmocka_unit_test(test_cached_capacity),
      cmocka_unit_test(test_sinks),
      cmocka_unit_test(test_placement_last),
      cmocka_unit_test(test_bad_create),
      cmocka_unit_test(test_bad_forward),
      cmocka_unit_test(test_bad_cached),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
