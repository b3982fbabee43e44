/* SPDX-License-Identifier: MIT */
/* Gated linear attention (rove_gla_forward, rove_gla_recurrent) against the double
 * oracles of oracle/gla_oracle.c: shapes, tails, chunk sizes, rotate flags, decays from
 * none to very strong, state continuity across calls, thread counts, aliasing, and every
 * rejected input. Links the public librove.so. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gla_oracle.h"
#include "testutil.h"

#define TOL 1e-5       /* library vs oracle, relative to the max |expected| */
#define CPLX_TOL 1e-10 /* complex oracle vs real oracle (both double) */
#define SENTINEL 777.25f

enum { D_RANDOM = 0, D_STRONG, D_ZERO, D_TINY, D_MIXED, D_HUGE, D_N };
static const char *const decay_name[D_N] = {"random", "strong", "zero", "tiny", "mixed", "huge"};

typedef struct {
  int B, T, H, K, V, r; /* r = 0: rotary_dim default */
  int pairing;
  uint32_t rot;
  int chunk, threads;
  int angles;     /* selective angles given */
  int decay;      /* D_* */
  int pair_equal; /* g equal within rotation pairs (for the complex oracle) */
  int init;       /* an initial state */
} gcase;

typedef struct {
  float *q, *k, *v, *g, *s0, *out, *s1;
  double *ang, *start;
  int64_t nk, nv, ns, na;
} gdata;

static gcase base_case(int B, int T, int H, int K, int V) {
  gcase c;
  memset(&c, 0, sizeof c);
  c.B = B, c.T = T, c.H = H, c.K = K, c.V = V;
  c.rot = ROVE_ROTATE_ROVE;
  c.chunk = 64;
  c.threads = 1;
  c.angles = 1;
  c.init = 1;
  return c;
}

static void describe(const gcase *c, char *buf, size_t n) {
  snprintf(buf, n,
           "B=%d T=%d H=%d K=%d V=%d r=%d pair=%d rot=0x%x chunk=%d thr=%d ang=%d decay=%s "
           "init=%d isa=%s",
           c->B, c->T, c->H, c->K, c->V, c->r, c->pairing, c->rot, c->chunk, c->threads, c->angles,
           decay_name[c->decay], c->init, rove_isa_name(rove_best_isa()));
}

static rove_gla_config config_of(const gcase *c) {
  rove_gla_config cfg;
  rove_gla_config_init(&cfg, c->H, c->K, c->V);
  cfg.rotary_dim = c->r;
  cfg.pairing = (rove_pairing)c->pairing;
  cfg.rotate = c->rot;
  cfg.chunk = c->chunk;
  cfg.n_threads = c->threads;
  return cfg;
}

static int32_t half_of(const gcase *c) { return (c->r ? c->r : c->K) / 2; }

static float decay_value(rove_rng *g, int decay, int64_t t) {
  switch (decay) {
    case D_STRONG: return rove_rng_uniform(g, -25.0f, -15.0f);
    case D_ZERO: return 0.0f;
    case D_TINY: return -rove_rng_uniform(g, 0.0f, 1e-6f);
    case D_MIXED: /* strong bursts, then long stretches of almost no decay */
      return t % 37 < 3 ? rove_rng_uniform(g, -30.0f, -10.0f) : -rove_rng_uniform(g, 0.0f, 1e-3f);
    case D_HUGE: { /* far past exp's range, down to -FLT_MAX (sums overflow to -inf) */
      const float u = rove_rng_uniform(g, 0.0f, 1.0f);
      return u < 0.2f ? -FLT_MAX : u < 0.4f ? -1e30f : u < 0.6f ? -100.0f : u < 0.8f ? -0.1f : 0.0f;
    }
    default: return -rove_rng_uniform(g, 0.0f, 1.0f);
  }
}

static void make_data(const gcase *c, gdata *d, uint64_t seed) {
  rove_rng g;
  rove_rng_seed(&g, seed);
  const int64_t rows = (int64_t)c->B * c->T * c->H, half = half_of(c);
  d->nk = rows * c->K, d->nv = rows * c->V, d->ns = (int64_t)c->B * c->H * c->K * c->V;
  d->na = rows * half;
  d->q = malloc(sizeof(float) * (size_t)d->nk);
  d->k = malloc(sizeof(float) * (size_t)d->nk);
  d->g = malloc(sizeof(float) * (size_t)d->nk);
  d->v = malloc(sizeof(float) * (size_t)d->nv);
  d->out = malloc(sizeof(float) * (size_t)d->nv);
  d->s0 = malloc(sizeof(float) * (size_t)d->ns);
  d->s1 = malloc(sizeof(float) * (size_t)d->ns);
  d->ang = malloc(sizeof(double) * (size_t)(d->na + 1));
  d->start = malloc(sizeof(double) * (size_t)((int64_t)c->B * c->H * half + 1));
  assert_true(d->q && d->k && d->g && d->v && d->out && d->s0 && d->s1 && d->ang && d->start);
  rove_rng_fill(&g, d->q, d->nk, -1.0f, 1.0f);
  rove_rng_fill(&g, d->k, d->nk, -1.0f, 1.0f);
  rove_rng_fill(&g, d->v, d->nv, -1.0f, 1.0f);
  rove_rng_fill(&g, d->s0, d->ns, -1.0f, 1.0f);
  for (int64_t i = 0; i < d->nk; i++)
    d->g[i] = decay_value(&g, c->decay, i / ((int64_t)c->H * c->K));
  if (c->pair_equal) /* copy the first dim's decay to its partner */
    for (int64_t row = 0; row < rows; row++)
      for (int32_t p = 0; p < half; p++) {
        const int32_t a = c->pairing == ROVE_PAIRING_HALF ? p : 2 * p;
        const int32_t b = c->pairing == ROVE_PAIRING_HALF ? p + (int32_t)half : 2 * p + 1;
        d->g[row * c->K + b] = d->g[row * c->K + a];
      }
  /* a random walk per (batch, head, pair), started far from 0 */
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t h = 0; h < c->H; h++)
      for (int64_t p = 0; p < half; p++) {
        double th = rove_rng_uniform(&g, -3e4f, 3e4f);
        d->start[(b * c->H + h) * half + p] = rove_rng_uniform(&g, -10.0f, 10.0f);
        for (int64_t t = 0; t < c->T; t++) {
          th += rove_rng_uniform(&g, -2.0f, 2.0f);
          d->ang[((b * c->T + t) * c->H + h) * half + p] = th;
        }
      }
}

static void free_data(gdata *d) {
  free(d->q), free(d->k), free(d->g), free(d->v), free(d->out), free(d->s0), free(d->s1);
  free(d->ang), free(d->start);
}

static rove_gla_args args_of(const gcase *c, const gdata *d) {
  rove_gla_args a;
  memset(&a, 0, sizeof a);
  a.batch = c->B, a.seq_len = c->T;
  a.q = d->q, a.k = d->k, a.v = d->v, a.g = d->g;
  a.angles = c->angles ? d->ang : NULL;
  a.initial_state = c->init ? d->s0 : NULL;
  a.final_state = d->s1;
  a.out = d->out;
  return a;
}

/* Run the library (recurrent or chunked) into d->out / d->s1. */
static rove_status run(const gcase *c, gdata *d, int recurrent) {
  const rove_gla_config cfg = config_of(c);
  rove_gla_plan *p = NULL;
  rove_status st = rove_gla_plan_create(&cfg, &p);
  if (st != ROVE_OK) return st;
  const rove_gla_args a = args_of(c, d);
  st = recurrent ? rove_gla_recurrent(p, &a) : rove_gla_forward(p, &a);
  rove_gla_plan_destroy(p);
  return st;
}

static double worst[2]; /* largest error of the current test: chunked, recurrent */

static void report(const char *test) {
  printf("  %s: max rel err chunked %.3g, recurrent %.3g (isa %s)\n", test, worst[0], worst[1],
         rove_isa_name(rove_best_isa()));
  worst[0] = worst[1] = 0;
}

/* Both library paths against the real oracle (out and final state). */
static void check_case(const gcase *c, uint64_t seed) {
  char buf[256];
  describe(c, buf, sizeof buf);
  gdata d;
  make_data(c, &d, seed);
  const rove_gla_config cfg = config_of(c);
  const rove_gla_args a = args_of(c, &d);
  double *want = malloc(sizeof(double) * (size_t)d.nv),
         *wstate = malloc(sizeof(double) * (size_t)d.ns);
  assert_true(want && wstate);
  assert_int_equal(rove_oracle_gla(&cfg, &a, want, wstate), 0);
  for (int rec = 0; rec < 2; rec++) {
    const rove_status st = run(c, &d, rec);
    if (st != ROVE_OK)
      fail_msg("%s %s: %s", rec ? "recurrent" : "chunked", buf, rove_status_string(st));
    const double e = rove_max_rel_err_fd(d.out, want, d.nv),
                 es = rove_max_rel_err_fd(d.s1, wstate, d.ns);
    worst[rec] = fmax(worst[rec], fmax(e, es));
    if (!(e <= TOL) || !(es <= TOL))
      fail_msg("%s %s: out err %.3g, state err %.3g (tol %g)", rec ? "recurrent" : "chunked", buf,
               e, es, TOL);
  }
  free(want), free(wstate);
  free_data(&d);
}

static void test_shapes(void **state) {
  (void)state;
  static const int kv[][2] = {{16, 16}, {32, 64}, {64, 32}, {8, 8},
                              {24, 40}, {2, 6},   {64, 64}, {80, 48}};
  for (size_t i = 0; i < sizeof kv / sizeof *kv; i++) {
    gcase c = base_case(2, 70, 2, kv[i][0], kv[i][1]);
    c.rot = kv[i][1] >= kv[i][0] ? ROVE_ROTATE_ROVE : ROVE_ROTATE_ROPE;
    check_case(&c, 100 + i);
    c.pairing = ROVE_PAIRING_INTERLEAVED, c.init = 0;
    check_case(&c, 200 + i);
  }
  report("shapes");
}

static void test_seq_tails(void **state) {
  (void)state;
  static const int lens[] = {1, 2, 15, 16, 17, 63, 64, 65, 127, 129, 200};
  for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
    for (int chunk = 16; chunk <= 128; chunk *= 2) {
      gcase c = base_case(1, lens[i], 2, 16, 24);
      c.chunk = chunk;
      c.init = (int)(i % 2);
      check_case(&c, 300 + i * 8 + (uint64_t)chunk);
    }
  report("seq_tails");
}

static void test_rotate_flags(void **state) {
  (void)state;
  for (uint32_t rot = 0; rot <= ROVE_ROTATE_ROVE; rot++)
    for (int pairing = 0; pairing < 2; pairing++) {
      gcase c = base_case(1, 40, 2, 16, 20);
      c.rot = rot, c.pairing = pairing, c.r = rot & 1 ? 8 : 0; /* partial rotary dim too */
      check_case(&c, 400 + rot * 2 + (uint64_t)pairing);
    }
  gcase c = base_case(1, 40, 2, 16, 16); /* no angles: nothing rotates */
  c.angles = 0;
  check_case(&c, 450);
  report("rotate_flags");
}

static void test_decays(void **state) {
  (void)state;
  for (int decay = 0; decay < D_N; decay++)
    for (int chunk = 16; chunk <= 128; chunk *= 4) {
      gcase c = base_case(1, 300, 2, 32, 32);
      c.decay = decay, c.chunk = chunk;
      check_case(&c, 500 + (uint64_t)decay * 8 + (uint64_t)chunk);
    }
  report("decays");
}

/* GLA flushes subnormal results to zero inside its tasks (strong decays made every FMA on
 * them a microcode assist: 12x slower) and gives the caller's thread its floating-point
 * mode back: a subnormal result is still made here after the calls, on 1 and 2 threads,
 * and the results stay within the oracle's tolerance (check_case). */
static void test_caller_keeps_subnormals(void **state) {
  (void)state;
  for (int threads = 1; threads <= 2; threads++) {
    gcase c = base_case(2, 200, 4, 32, 32);
    c.decay = D_STRONG, c.threads = threads;
    check_case(&c, 900 + (uint64_t)threads);
    volatile float x = FLT_MIN;
    x = x / 8.0f;
    assert_true(x != 0.0f && x == FLT_MIN / 8.0f);
  }
  report("caller keeps subnormals");
}

static void test_long(void **state) {
  (void)state;
  gcase c = base_case(1, 1100, 2, 64, 64);
  c.decay = D_TINY; /* the state keeps everything: the hardest case for accumulation */
  check_case(&c, 600);
  c.decay = D_RANDOM, c.chunk = 128, c.threads = 2;
  check_case(&c, 601);
  report("long");
}

/* The complex (RoPE-trick) oracle equals the real one when g is equal within pairs; the
 * library matches both. */
static void test_complex_oracle(void **state) {
  (void)state;
  static const uint32_t rots[] = {ROVE_ROTATE_ROPE, ROVE_ROTATE_ROVE, 0};
  for (int pairing = 0; pairing < 2; pairing++)
    for (int i = 0; i < 3; i++)
      for (int init = 0; init < 2; init++) {
        gcase c = base_case(2, 50, 2, 12, 16);
        c.rot = rots[i], c.pairing = pairing, c.init = init, c.pair_equal = 1;
        c.r = init ? 8 : 0;
        char buf[256];
        describe(&c, buf, sizeof buf);
        gdata d;
        make_data(&c, &d, 700 + (uint64_t)(pairing * 8 + i * 2 + init));
        const rove_gla_config cfg = config_of(&c);
        const rove_gla_args a = args_of(&c, &d);
        double *w1 = malloc(sizeof(double) * (size_t)d.nv),
               *w2 = malloc(sizeof(double) * (size_t)d.nv);
        assert_true(w1 && w2);
        assert_int_equal(rove_oracle_gla(&cfg, &a, w1, NULL), 0);
        assert_int_equal(rove_oracle_gla_complex(&cfg, &a, init ? d.start : NULL, w2), 0);
        double mx = 1e-30, err = 0;
        for (int64_t j = 0; j < d.nv; j++)
          mx = fmax(mx, fabs(w1[j])), err = fmax(err, fabs(w1[j] - w2[j]));
        if (!(err / mx <= CPLX_TOL)) fail_msg("complex vs real oracle %s: %.3g", buf, err / mx);
        assert_int_equal(run(&c, &d, 0), ROVE_OK);
        const double e = rove_max_rel_err_fd(d.out, w2, d.nv);
        if (!(e <= TOL)) fail_msg("library vs complex oracle %s: %.3g", buf, e);
        free(w1), free(w2);
        free_data(&d);
      }
}

static void test_complex_oracle_rejects(void **state) {
  (void)state;
  gcase c = base_case(1, 8, 1, 8, 8);
  gdata d;
  make_data(&c, &d, 750); /* pair_equal off: decays differ within pairs */
  const rove_gla_config cfg = config_of(&c);
  rove_gla_args a = args_of(&c, &d);
  double *w = malloc(sizeof(double) * (size_t)d.nv);
  assert_non_null(w);
  assert_int_equal(rove_oracle_gla_complex(&cfg, &a, NULL, w), -1);
  rove_gla_config q_only = cfg;
  q_only.rotate = ROVE_ROTATE_Q;
  a.g = NULL;
  assert_int_equal(rove_oracle_gla_complex(&q_only, &a, NULL, w), -1);
  free(w);
  free_data(&d);
}

/* Tokens [t0, t0+n) of a [B][T][w] tensor (w = H * dim) as a new [B][n][w] one. */
static void *slice(const void *src, size_t elem, int B, int T, int64_t w, int t0, int n) {
  char *dst = malloc(elem * (size_t)((int64_t)B * n * w));
  assert_non_null(dst);
  for (int b = 0; b < B; b++)
    memcpy(dst + elem * (size_t)((int64_t)b * n * w),
           (const char *)src + elem * (size_t)(((int64_t)b * T + t0) * w), elem * (size_t)(n * w));
  return dst;
}

/* Run tokens [t0, t0+n) with the state in `st` (updated in place: final == initial) and
 * write their outputs into the full-length out. */
static void run_piece(const rove_gla_plan *p, const gcase *c, const gdata *d, int t0, int n,
                      float *st, float *out, int recurrent) {
  const int64_t wk = (int64_t)c->H * c->K, wv = (int64_t)c->H * c->V,
                wa = (int64_t)c->H * half_of(c);
  rove_gla_args a;
  memset(&a, 0, sizeof a);
  a.batch = c->B, a.seq_len = n;
  float *q = slice(d->q, 4, c->B, c->T, wk, t0, n), *k = slice(d->k, 4, c->B, c->T, wk, t0, n);
  float *g = slice(d->g, 4, c->B, c->T, wk, t0, n), *v = slice(d->v, 4, c->B, c->T, wv, t0, n);
  double *ang = slice(d->ang, 8, c->B, c->T, wa, t0, n);
  float *o = malloc(sizeof(float) * (size_t)(c->B * n * wv));
  assert_non_null(o);
  a.q = q, a.k = k, a.v = v, a.g = g, a.angles = ang, a.out = o;
  a.initial_state = st, a.final_state = st;
  assert_int_equal(recurrent ? rove_gla_recurrent(p, &a) : rove_gla_forward(p, &a), ROVE_OK);
  for (int b = 0; b < c->B; b++)
    memcpy(out + ((int64_t)b * c->T + t0) * wv, o + (int64_t)b * n * wv,
           sizeof(float) * (size_t)(n * wv));
  free(q), free(k), free(g), free(v), free(ang), free(o);
}

/* Splitting the sequence into calls that pass the state on equals one call; so does a
 * recurrent decode after a chunked prefill. */
static void test_state_continuity(void **state) {
  (void)state;
  gcase c = base_case(2, 150, 2, 16, 24);
  c.chunk = 32;
  gdata d;
  make_data(&c, &d, 800);
  assert_int_equal(run(&c, &d, 0), ROVE_OK);
  const rove_gla_config cfg = config_of(&c);
  rove_gla_plan *p = NULL;
  assert_int_equal(rove_gla_plan_create(&cfg, &p), ROVE_OK);
  float *out = malloc(sizeof(float) * (size_t)d.nv), *st = malloc(sizeof(float) * (size_t)d.ns);
  assert_true(out && st);
  static const int cuts[][4] = {{0, 37, 101, 150}, {0, 1, 2, 150}, {0, 64, 128, 150}};
  for (int i = 0; i < 3; i++) {
    memcpy(st, d.s0, sizeof(float) * (size_t)d.ns);
    for (int j = 0; j < 3; j++)
      run_piece(p, &c, &d, cuts[i][j], cuts[i][j + 1] - cuts[i][j], st, out, 0);
    const double e = rove_max_rel_err_ff(out, d.out, d.nv),
                 es = rove_max_rel_err_ff(st, d.s1, d.ns);
    if (!(e <= TOL && es <= TOL)) fail_msg("split %d: out err %.3g state err %.3g", i, e, es);
  }
  memcpy(st, d.s0, sizeof(float) * (size_t)d.ns); /* prefill 100, then decode 1 by 1 */
  run_piece(p, &c, &d, 0, 100, st, out, 0);
  for (int t = 100; t < 150; t++) run_piece(p, &c, &d, t, 1, st, out, 1);
  const double e = rove_max_rel_err_ff(out, d.out, d.nv), es = rove_max_rel_err_ff(st, d.s1, d.ns);
  if (!(e <= TOL && es <= TOL)) fail_msg("prefill + decode: out err %.3g state err %.3g", e, es);
  rove_gla_plan_destroy(p);
  free(out), free(st);
  free_data(&d);
}

/* Bitwise identical for 1, 2 and 3 threads (both paths), and final_state may be
 * initial_state itself. */
static void test_threads_and_alias(void **state) {
  (void)state;
  gcase c = base_case(2, 130, 3, 64, 64);
  gdata d;
  make_data(&c, &d, 900);
  float *ref = malloc(sizeof(float) * (size_t)d.nv), *sref = malloc(sizeof(float) * (size_t)d.ns);
  assert_true(ref && sref);
  for (int rec = 0; rec < 2; rec++) {
    c.threads = 1;
    assert_int_equal(run(&c, &d, rec), ROVE_OK);
    memcpy(ref, d.out, sizeof(float) * (size_t)d.nv);
    memcpy(sref, d.s1, sizeof(float) * (size_t)d.ns);
    for (c.threads = 2; c.threads <= 3; c.threads++) {
      memset(d.out, 0, sizeof(float) * (size_t)d.nv);
      assert_int_equal(run(&c, &d, rec), ROVE_OK);
      assert_memory_equal(ref, d.out, sizeof(float) * (size_t)d.nv);
      assert_memory_equal(sref, d.s1, sizeof(float) * (size_t)d.ns);
    }
    /* aliasing: the state is read before it is written, per (batch, head) */
    float *s0 = malloc(sizeof(float) * (size_t)d.ns);
    assert_non_null(s0);
    memcpy(s0, d.s0, sizeof(float) * (size_t)d.ns);
    float *keep = d.s1;
    d.s1 = d.s0;
    assert_int_equal(run(&c, &d, rec), ROVE_OK);
    assert_memory_equal(ref, d.out, sizeof(float) * (size_t)d.nv);
    assert_memory_equal(sref, d.s0, sizeof(float) * (size_t)d.ns);
    memcpy(d.s0, s0, sizeof(float) * (size_t)d.ns);
    d.s1 = keep;
    free(s0);
  }
  free(ref), free(sref);
  free_data(&d);
}

/* Many heads: a task loads the rows of a group of heads per step (token by token) and
 * keeps their states in its scratch without final_state. Groups of 12, 6, 4 and 2 heads
 * (1, 2, 3 and 5 threads), odd widths, a partial rotary dim and a padded last chunk give
 * the same bits, with and without final_state, and match the oracle. */
static void check_head_groups(gcase c, uint64_t seed) {
  check_case(&c, seed);
  gdata d;
  make_data(&c, &d, seed + 1);
  float *ref = malloc(sizeof(float) * (size_t)d.nv), *sref = malloc(sizeof(float) * (size_t)d.ns);
  assert_true(ref && sref);
  static const int threads[] = {1, 2, 3, 5};
  for (int rec = 0; rec < 2; rec++)
    for (size_t i = 0; i < sizeof threads / sizeof *threads; i++) {
      c.threads = threads[i];
      assert_int_equal(run(&c, &d, rec), ROVE_OK);
      if (i == 0) {
        memcpy(ref, d.out, sizeof(float) * (size_t)d.nv);
        memcpy(sref, d.s1, sizeof(float) * (size_t)d.ns);
      }
      assert_memory_equal(ref, d.out, sizeof(float) * (size_t)d.nv);
      assert_memory_equal(sref, d.s1, sizeof(float) * (size_t)d.ns);
      const rove_gla_config cfg = config_of(&c); /* again without final_state */
      rove_gla_plan *p = NULL;
      assert_int_equal(rove_gla_plan_create(&cfg, &p), ROVE_OK);
      rove_gla_args a = args_of(&c, &d);
      a.final_state = NULL;
      memset(d.out, 0, sizeof(float) * (size_t)d.nv);
      assert_int_equal(rec ? rove_gla_recurrent(p, &a) : rove_gla_forward(p, &a), ROVE_OK);
      assert_memory_equal(ref, d.out, sizeof(float) * (size_t)d.nv);
      rove_gla_plan_destroy(p);
    }
  free(ref), free(sref);
  free_data(&d);
}

static void test_head_groups(void **state) {
  (void)state;
  gcase c = base_case(1, 100, 12, 24, 40);
  c.r = 8, c.pairing = ROVE_PAIRING_INTERLEAVED, c.chunk = 32;
  check_head_groups(c, 950);
  c = base_case(1, 150, 6, 128, 128); /* a step's rows of 6 heads exceed the 2 MiB of one */
  c.chunk = 128;                      /* load: the heads are loaded three at a time */
  check_head_groups(c, 960);
  report("head_groups");
}

static int all_equal(const float *x, int64_t n, float v) {
  for (int64_t i = 0; i < n; i++)
    if (x[i] != v) return 0;
  return 1;
}

/* Every call with @p a must fail with @p want and leave out and final_state untouched. */
static void expect_fail(const rove_gla_plan *p, rove_gla_args *a, rove_status want,
                        const char *what, float *out, int64_t nout, float *fin, int64_t nfin) {
  for (int rec = 0; rec < 2; rec++) {
    for (int64_t i = 0; i < nout; i++) out[i] = SENTINEL;
    for (int64_t i = 0; i < nfin; i++) fin[i] = SENTINEL;
    const rove_status st = rec ? rove_gla_recurrent(p, a) : rove_gla_forward(p, a);
    if (st != want)
      fail_msg("%s (%s): got %s, want %s", what, rec ? "recurrent" : "chunked",
               rove_status_string(st), rove_status_string(want));
    if (!all_equal(out, nout, SENTINEL) || !all_equal(fin, nfin, SENTINEL))
      fail_msg("%s (%s): output written on failure", what, rec ? "recurrent" : "chunked");
  }
}

static void test_bad_config(void **state) {
  (void)state;
  rove_gla_config_init(NULL, 1, 2, 3); /* no-op */
  rove_gla_plan_destroy(NULL);
  assert_int_equal(rove_gla_plan_isa(NULL), ROVE_ISA_AUTO);
  rove_gla_config c;
  rove_gla_config_init(&c, 2, 16, 16);
  assert_int_equal(c.chunk, 64);
  assert_int_equal(c.rotate, ROVE_ROTATE_ROPE);
  rove_gla_plan *p = NULL;
  assert_int_equal(rove_gla_plan_create(NULL, &p), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_gla_plan_create(&c, NULL), ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_gla_plan_create(&c, &p), ROVE_OK);
  assert_int_not_equal(rove_gla_plan_isa(p), ROVE_ISA_AUTO);
  rove_gla_plan_destroy(p);
  rove_gla_config b;
#define EXPECT(stmt, st)                                                     \
  do {                                                                       \
    rove_gla_config_init(&b, 2, 16, 16);                                     \
    stmt;                                                                    \
    p = NULL;                                                                \
    const rove_status got = rove_gla_plan_create(&b, &p);                    \
    if (got != (st)) fail_msg("%s: got %s", #stmt, rove_status_string(got)); \
    rove_gla_plan_destroy(p);                                                \
  } while (0)
  EXPECT(b.n_heads = 0, ROVE_ERR_INVALID_ARGUMENT);
  EXPECT(b.key_dim = -1, ROVE_ERR_INVALID_ARGUMENT);
  EXPECT(b.value_dim = 0, ROVE_ERR_INVALID_ARGUMENT);
  EXPECT(b.scale = NAN, ROVE_ERR_INVALID_ARGUMENT);
  EXPECT(b.scale = INFINITY, ROVE_ERR_INVALID_ARGUMENT);
  EXPECT(b.rotate = 0x10, ROVE_ERR_INVALID_ARGUMENT);
  EXPECT(b.rotary_dim = 7, ROVE_ERR_INVALID_ARGUMENT);
  EXPECT(b.rotary_dim = 18, ROVE_ERR_INVALID_ARGUMENT);
  EXPECT(b.rotary_dim = -2, ROVE_ERR_INVALID_ARGUMENT);
  EXPECT(b.pairing = (rove_pairing)5, ROVE_ERR_INVALID_ARGUMENT);
  EXPECT(b.chunk = 48, ROVE_ERR_INVALID_ARGUMENT);
  EXPECT(b.chunk = 0, ROVE_OK); /* 0 = the default, 64 */
  EXPECT(b.chunk = 256, ROVE_ERR_INVALID_ARGUMENT);
  EXPECT(b.chunk = -64, ROVE_ERR_INVALID_ARGUMENT);
  EXPECT(b.n_threads = -1, ROVE_ERR_INVALID_ARGUMENT);
  EXPECT(b.isa = (rove_isa)99, ROVE_ERR_INVALID_ARGUMENT);
  EXPECT((b.key_dim = 15, b.rotate = ROVE_ROTATE_ROPE), ROVE_ERR_INVALID_ARGUMENT); /* odd */
  EXPECT((b.key_dim = 15, b.rotate = 0), ROVE_OK);
  EXPECT((b.key_dim = 15, b.rotary_dim = 14), ROVE_OK);
  EXPECT((b.value_dim = 8, b.rotate = ROVE_ROTATE_ROVE), ROVE_ERR_INVALID_ARGUMENT);
  EXPECT((b.value_dim = 8, b.rotate = ROVE_ROTATE_O), ROVE_ERR_INVALID_ARGUMENT);
  EXPECT((b.value_dim = 8, b.rotate = ROVE_ROTATE_ROVE, b.rotary_dim = 8), ROVE_OK);
  EXPECT((b.value_dim = 8, b.rotate = ROVE_ROTATE_ROPE), ROVE_OK);
  EXPECT(b.key_dim = ROVE_MAX_HEAD_DIM + 2, ROVE_ERR_UNSUPPORTED);
  EXPECT((b.value_dim = ROVE_MAX_HEAD_DIM + 1, b.rotate = 0), ROVE_ERR_UNSUPPORTED);
#undef EXPECT
}

static void test_bad_args(void **state) {
  (void)state;
  gcase c = base_case(2, 20, 2, 8, 8);
  gdata d;
  make_data(&c, &d, 1000);
  const rove_gla_config cfg = config_of(&c);
  rove_gla_plan *p = NULL;
  assert_int_equal(rove_gla_plan_create(&cfg, &p), ROVE_OK);
  const rove_gla_args good = args_of(&c, &d);
  rove_gla_args a = good;
  const rove_status INV = ROVE_ERR_INVALID_ARGUMENT;
#define FAIL(stmt, st)                                      \
  do {                                                      \
    a = good;                                               \
    stmt;                                                   \
    expect_fail(p, &a, st, #stmt, d.out, d.nv, d.s1, d.ns); \
  } while (0)
  for (int rec = 0; rec < 2; rec++) {
    assert_int_equal(rec ? rove_gla_recurrent(NULL, &a) : rove_gla_forward(NULL, &a), INV);
    assert_int_equal(rec ? rove_gla_recurrent(p, NULL) : rove_gla_forward(p, NULL), INV);
  }
  FAIL(a.q = NULL, INV);
  FAIL(a.k = NULL, INV);
  FAIL(a.v = NULL, INV);
  FAIL(a.g = NULL, INV);
  FAIL(a.out = NULL, INV);
  FAIL(a.batch = 0, INV);
  FAIL(a.seq_len = -3, INV);
  /* g: positive, NaN, -inf, +inf anywhere (here the last element) */
  const float bad_g[] = {1e-30f, NAN, -INFINITY, INFINITY};
  for (int i = 0; i < 4; i++) {
    const float keep = d.g[d.nk - 1];
    d.g[d.nk - 1] = bad_g[i];
    FAIL((void)0, INV);
    d.g[d.nk - 1] = keep;
  }
  d.g[5] = -FLT_MAX; /* finite: accepted */
  a = good;
  assert_int_equal(rove_gla_forward(p, &a), ROVE_OK);
  d.g[5] = -0.5f;
  const double bad_a[] = {NAN, INFINITY, -INFINITY};
  for (int i = 0; i < 3; i++) {
    const double keep = d.ang[d.na - 1];
    d.ang[d.na - 1] = bad_a[i];
    FAIL((void)0, INV);
    d.ang[d.na - 1] = keep;
  }
  /* overlaps: out with each input, final state with out / inputs / part of initial */
  FAIL(a.out = d.q, INV);
  FAIL(a.out = (float *)d.v + 3, INV);
  FAIL(a.out = d.s0, INV);
  FAIL(a.out = d.s1, INV);
  FAIL(a.out = (float *)d.ang, INV);
  FAIL(a.final_state = d.g, INV);
  FAIL(a.final_state = d.out + 1, INV);
  float *big = malloc(sizeof(float) * (size_t)(2 * d.ns));
  assert_non_null(big);
  memcpy(big, d.s0, sizeof(float) * (size_t)d.ns);
  FAIL((a.initial_state = big, a.final_state = big + 1), INV);
  free(big);
  /* overflowing sizes: nothing may be read (the tensors are far too small) */
  FAIL((a.batch = INT32_MAX, a.seq_len = INT32_MAX), ROVE_ERR_SIZE_OVERFLOW);
  rove_gla_config wide = cfg;
  wide.n_heads = INT32_MAX, wide.key_dim = ROVE_MAX_HEAD_DIM, wide.value_dim = ROVE_MAX_HEAD_DIM;
  wide.rotate = 0;
  rove_gla_plan *pw = NULL;
  assert_int_equal(rove_gla_plan_create(&wide, &pw), ROVE_OK);
  a = good;
  a.batch = 4;
  a.seq_len = INT32_MAX;
  expect_fail(pw, &a, ROVE_ERR_SIZE_OVERFLOW, "wide plan", d.out, d.nv, d.s1, d.ns);
  a.batch = 1024, a.seq_len = 1; /* rows * K fit, the state (2^61 floats) does not */
  expect_fail(pw, &a, ROVE_ERR_SIZE_OVERFLOW, "wide state", d.out, d.nv, d.s1, d.ns);
  rove_gla_plan_destroy(pw);
#undef FAIL
  /* angles are not read without rotation */
  rove_gla_config norot = cfg;
  norot.rotate = 0;
  rove_gla_plan *pn = NULL;
  assert_int_equal(rove_gla_plan_create(&norot, &pn), ROVE_OK);
  d.ang[0] = NAN;
  a = good;
  assert_int_equal(rove_gla_forward(pn, &a), ROVE_OK);
  rove_gla_plan_destroy(pn);
  rove_gla_plan_destroy(p);
  free_data(&d);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_seq_tails),
      cmocka_unit_test(test_rotate_flags),
      cmocka_unit_test(test_decays),
      cmocka_unit_test(test_caller_keeps_subnormals),
      cmocka_unit_test(test_long),
      cmocka_unit_test(test_complex_oracle),
      cmocka_unit_test(test_complex_oracle_rejects),
      cmocka_unit_test(test_state_continuity),
      cmocka_unit_test(test_threads_and_alias),
      cmocka_unit_test(test_head_groups),
      cmocka_unit_test(test_bad_config),
      cmocka_unit_test(test_bad_args),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
