/* SPDX-License-Identifier: MIT */
/* rove_gla_backward against the double oracle of oracle/gla_oracle.c
 * (rove_oracle_gla_backward), which is itself checked first against central finite
 * differences of the double forward oracle (rove_oracle_gla) for L = sum dout * out +
 * sum d_final * final_state, for every input: q, k, v, g, the initial state, the angles.
 * Library cases: shapes and tails (T not a multiple of the chunk, chunk 16..128), every
 * rotation combination (none, RoPE, RoVE, V only, O only, angles absent), both pairings,
 * partial rotary, decays from none to -FLT_MAX, with and without an initial state and a
 * final-state gradient, batch > 1; bitwise identical gradients for 1 and 2 threads;
 * guarded outputs (no write outside); bad input. Links the public librove.so. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gla_oracle.h"
#include "testutil.h"

#define TOL 2e-5 /* dq, dk, dv, d_init, d_angles vs oracle, relative to max |expected| */
/* dg comes from the identity dLoss/db_u = q~_u dq~_u - k~_u dk~_u summed from the end
 * (rove.h), whose terms cancel where decays are strong: its error is bounded by float
 * rounding times the sum of the terms' sizes, not by |dg|. The test bound: DG_REL max
 * |dg| + DG_SUM * max over (b, h) of sum_u 2 (|q_u| |dq_u| + |k_u| |dk_u|) (max norms;
 * the 2 covers the rotation of a pair). */
#define DG_REL 2e-5
#define DG_SUM 1e-7
#define ANG_SUM 1e-6
#define FD_TOL 1e-5 /* oracle gradients vs finite differences */

/* big-k, big-k-block: keys of ~1e14 (values a model never makes, but finite) with decays
 * whose chunk (-0.92 per token: ~-59 over 64) or 16-token block (-3.7 per token) sums to
 * just above -60, where the backward's e^{b_t} e^{-b_s} forms would pass float's range:
 * it must fall back to a form that does not (gla_bwd_body.h, gb_fallbacks). */
enum { D_RANDOM = 0, D_STRONG, D_ZERO, D_MIXED, D_HUGE, D_BIGK, D_BIGK_BLOCK, D_N };
static const char *const decay_name[D_N] = {"random", "strong", "zero",       "mixed",
                                            "huge",   "big-k",  "big-k-block"};

typedef struct {
  int B, T, H, K, V, r, pairing;
  uint32_t rot;
  int angles, init, dfinal, chunk, decay;
} bcase;

typedef struct {
  float *q, *k, *v, *g, *s0, *dout, *dfin, *out;
  double *ang;
  int64_t nk, nv, ns, na;
} bdata;

static int32_t half_of(const bcase *c) { return (c->r ? c->r : c->K) / 2; }

static float decay_value(rove_rng *g, int decay, int64_t t) {
  switch (decay) {
    case D_STRONG: return rove_rng_uniform(g, -25.0f, -15.0f);
    case D_ZERO: return 0.0f;
    case D_MIXED:
      return t % 23 < 2 ? rove_rng_uniform(g, -30.0f, -10.0f) : -rove_rng_uniform(g, 0.0f, 1e-3f);
    case D_HUGE: {
      const float u = rove_rng_uniform(g, 0.0f, 1.0f);
      return u < 0.15f ? -FLT_MAX : u < 0.3f ? -1e30f : u < 0.5f ? -0.1f : u < 0.7f ? -0.01f : 0.0f;
    }
    case D_BIGK: return rove_rng_uniform(g, -0.93f, -0.91f);
    case D_BIGK_BLOCK: return rove_rng_uniform(g, -3.72f, -3.66f);
    default: return -rove_rng_uniform(g, 0.0f, 1.0f);
  }
}

static void make_data(const bcase *c, bdata *d, uint64_t seed) {
  rove_rng g;
  rove_rng_seed(&g, seed);
  const int64_t rows = (int64_t)c->B * c->T * c->H;
  d->nk = rows * c->K, d->nv = rows * c->V, d->ns = (int64_t)c->B * c->H * c->K * c->V;
  d->na = rows * half_of(c);
  d->q = malloc(sizeof(float) * (size_t)d->nk), d->k = malloc(sizeof(float) * (size_t)d->nk);
  d->g = malloc(sizeof(float) * (size_t)d->nk), d->v = malloc(sizeof(float) * (size_t)d->nv);
  d->dout = malloc(sizeof(float) * (size_t)d->nv), d->out = malloc(sizeof(float) * (size_t)d->nv);
  d->s0 = malloc(sizeof(float) * (size_t)d->ns), d->dfin = malloc(sizeof(float) * (size_t)d->ns);
  d->ang = malloc(sizeof(double) * (size_t)(d->na + 1));
  assert_true(d->q && d->k && d->g && d->v && d->dout && d->out && d->s0 && d->dfin && d->ang);
  rove_rng_fill(&g, d->q, d->nk, -1.0f, 1.0f);
  rove_rng_fill(&g, d->k, d->nk, -1.0f, 1.0f);
  rove_rng_fill(&g, d->v, d->nv, -1.0f, 1.0f);
  rove_rng_fill(&g, d->dout, d->nv, -1.0f, 1.0f);
  rove_rng_fill(&g, d->s0, d->ns, -1.0f, 1.0f);
  rove_rng_fill(&g, d->dfin, d->ns, -1.0f, 1.0f);
  for (int64_t i = 0; i < d->nk; i++)
    d->g[i] = decay_value(&g, c->decay, i / ((int64_t)c->H * c->K));
  if (c->decay == D_BIGK || c->decay == D_BIGK_BLOCK)
    for (int64_t i = 0; i < d->nk; i++) d->k[i] *= 1e14f;
  for (int64_t i = 0; i < d->na; i++) d->ang[i] = rove_rng_uniform(&g, -3e4f, 3e4f);
}

static void free_data(bdata *d) {
  free(d->q), free(d->k), free(d->g), free(d->v), free(d->dout), free(d->out), free(d->s0);
  free(d->dfin), free(d->ang);
}

static rove_gla_config config_of(const bcase *c, int threads) {
  rove_gla_config cfg;
  rove_gla_config_init(&cfg, c->H, c->K, c->V);
  cfg.rotary_dim = c->r, cfg.pairing = (rove_pairing)c->pairing, cfg.rotate = c->rot;
  cfg.chunk = c->chunk, cfg.n_threads = threads;
  return cfg;
}

static rove_gla_args args_of(const bcase *c, const bdata *d) {
  rove_gla_args a;
  memset(&a, 0, sizeof a);
  a.batch = c->B, a.seq_len = c->T;
  a.q = d->q, a.k = d->k, a.v = d->v, a.g = d->g;
  a.angles = c->angles ? d->ang : NULL;
  a.initial_state = c->init ? d->s0 : NULL;
  a.out = d->out;
  return a;
}

static void describe(const bcase *c, char *buf, size_t n) {
  snprintf(buf, n,
           "B=%d T=%d H=%d K=%d V=%d r=%d pair=%d rot=0x%x ang=%d init=%d dfin=%d "
           "chunk=%d decay=%s isa=%s",
           c->B, c->T, c->H, c->K, c->V, c->r, c->pairing, c->rot, c->angles, c->init, c->dfinal,
           c->chunk, decay_name[c->decay], rove_isa_name(rove_best_isa()));
}

/* ---- the oracle against finite differences -------------------------------------------- */

/* L = sum dout * out + sum dfin * final_state by the double forward oracle. */
static double loss(const rove_gla_config *cfg, const rove_gla_args *a, const bdata *d, double *out,
                   double *fin, int dfinal) {
  assert_int_equal(rove_oracle_gla(cfg, a, out, fin), 0);
  double L = 0.0;
  for (int64_t i = 0; i < d->nv; i++) L += d->dout[i] * out[i];
  if (dfinal)
    for (int64_t i = 0; i < d->ns; i++) L += d->dfin[i] * fin[i];
  return L;
}

/* Central differences over every element of a float tensor x (n), step h on the float
 * grid, against the oracle gradient want. Returns the max error relative to max |want|. */
static double fd_float(const rove_gla_config *cfg, const rove_gla_args *a, const bdata *d, float *x,
                       int64_t n, const double *want, float h, int dfinal, double *o, double *f) {
  double mx = 1e-30, err = 0.0;
  for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(want[i]));
  for (int64_t i = 0; i < n; i++) {
    const float x0 = x[i];
    float hi = x0 + h, lo = x0 - h;
    if (x == d->g && hi > 0.0f) hi = 0.0f; /* decays stay <= 0 */
    x[i] = hi;
    const double Lp = loss(cfg, a, d, o, f, dfinal);
    x[i] = lo;
    const double Lm = loss(cfg, a, d, o, f, dfinal);
    x[i] = x0;
    err = fmax(err, fabs((Lp - Lm) / ((double)hi - (double)lo) - want[i]));
  }
  return err / mx;
}

static void test_oracle_fd(void **state) {
  (void)state;
  static const uint32_t rots[] = {ROVE_ROTATE_ROVE, ROVE_ROTATE_ROPE,
                                  ROVE_ROTATE_V | ROVE_ROTATE_O};
  for (int ri = 0; ri < 3; ri++) {
    bcase c = {2, 5, 2, 4, 6, 0, ri == 1, rots[ri], 1, 1, 1, 16, D_RANDOM};
    bdata d;
    make_data(&c, &d, 10 + ri);
    for (int64_t i = 0; i < d.na; i++) d.ang[i] = fmod(d.ang[i], 6.0); /* FD step vs angle size */
    const rove_gla_config cfg = config_of(&c, 1);
    rove_gla_args a = args_of(&c, &d);
    double *dq = malloc(sizeof(double) * (size_t)(3 * d.nk + d.nv + d.ns + d.na + 2 * d.nv + d.ns));
    assert_non_null(dq);
    double *dk = dq + d.nk, *dg = dk + d.nk, *dv = dg + d.nk, *di = dv + d.nv, *da = di + d.ns;
    double *o = da + d.na, *f = o + d.nv;
    assert_int_equal(rove_oracle_gla_backward(&cfg, &a, d.dout, d.dfin, dq, dk, dv, dg, di, da), 0);
    const float h = 1.0f / 2048;
    double e[6];
    e[0] = fd_float(&cfg, &a, &d, d.q, d.nk, dq, h, 1, o, f);
    e[1] = fd_float(&cfg, &a, &d, d.k, d.nk, dk, h, 1, o, f);
    e[2] = fd_float(&cfg, &a, &d, d.v, d.nv, dv, h, 1, o, f);
    e[3] = fd_float(&cfg, &a, &d, d.g, d.nk, dg, h, 1, o, f);
    e[4] = fd_float(&cfg, &a, &d, d.s0, d.ns, di, h, 1, o, f);
    double mx = 1e-30, err = 0.0;
    for (int64_t i = 0; i < d.na; i++) mx = fmax(mx, fabs(da[i]));
    for (int64_t i = 0; i < d.na; i++) {
      const double x0 = d.ang[i], hh = 1e-5;
      d.ang[i] = x0 + hh;
      const double Lp = loss(&cfg, &a, &d, o, f, 1);
      d.ang[i] = x0 - hh;
      const double Lm = loss(&cfg, &a, &d, o, f, 1);
      d.ang[i] = x0;
      err = fmax(err, fabs((Lp - Lm) / (2 * hh) - da[i]));
    }
    e[5] = err / mx;
    printf("  oracle vs FD rot=0x%x: dq %.2g dk %.2g dv %.2g dg %.2g dinit %.2g dangles %.2g\n",
           c.rot, e[0], e[1], e[2], e[3], e[4], e[5]);
    for (int i = 0; i < 6; i++) assert_true(e[i] <= FD_TOL);
    free(dq);
    free_data(&d);
  }
}

/* ---- the library against the oracle --------------------------------------------------- */

typedef struct {
  float *dq, *dk, *dv, *dg, *di;
  double *da;
} lgrads;

static rove_status lib_backward(const bcase *c, bdata *d, int threads, lgrads *r) {
  const rove_gla_config cfg = config_of(c, threads);
  rove_gla_plan *p = NULL;
  rove_status st = rove_gla_plan_create(&cfg, &p);
  if (st != ROVE_OK) return st;
  rove_gla_args a = args_of(c, d);
  a.final_state = NULL;
  st = rove_gla_forward(p, &a);
  if (st == ROVE_OK) {
    rove_gla_grads g;
    memset(&g, 0, sizeof g);
    g.dout = d->dout, g.d_final_state = c->dfinal ? d->dfin : NULL;
    g.dq = r->dq, g.dk = r->dk, g.dv = r->dv, g.dg = r->dg, g.d_initial_state = r->di;
    g.d_angles = c->angles && c->rot ? r->da : NULL;
    st = rove_gla_backward(p, &a, &g);
    volatile float x = FLT_MIN; /* the caller's floating-point mode is back (no flush) */
    x = x / 8.0f;
    assert_true(x != 0.0f);
  }
  rove_gla_plan_destroy(p);
  return st;
}

static void alloc_grads(const bdata *d, lgrads *r) {
  r->dq = malloc(sizeof(float) * (size_t)(3 * d->nk + d->nv + d->ns));
  r->da = malloc(sizeof(double) * (size_t)(d->na + 1));
  assert_true(r->dq && r->da);
  r->dk = r->dq + d->nk, r->dg = r->dk + d->nk, r->dv = r->dg + d->nk, r->di = r->dv + d->nv;
}

static double worst[6];

/* The angle gradients likewise: a token's four rotations (q, k, v, o) contribute terms
 * that cancel where the token mostly sees itself (RoVE's self term does not depend on the
 * angle), so the bound is TOL max |d_angle| + DG_SUM * 2 (|q||dq| + |k||dk| + |v||dv| +
 * |o||do|) of the token (max norms). Returns the error as a fraction of it. */
static double angle_err(const bcase *c, const bdata *d, const double *da, const double *want,
                        const double *wq, const double *wk, const double *wv) {
  const int64_t half = half_of(c), rows = (int64_t)c->B * c->T * c->H;
  double mx = 1e-30, worst_frac = 0.0;
  for (int64_t i = 0; i < rows * half; i++) mx = fmax(mx, fabs(want[i]));
  for (int64_t r = 0; r < rows; r++) {
    double q = 0, dq = 0, k = 0, dk = 0, v = 0, dv = 0, o = 0, dout = 0;
    for (int32_t j = 0; j < c->K; j++) {
      q = fmax(q, fabs(d->q[r * c->K + j])), k = fmax(k, fabs(d->k[r * c->K + j]));
      dq = fmax(dq, fabs(wq[r * c->K + j])), dk = fmax(dk, fabs(wk[r * c->K + j]));
    }
    for (int32_t j = 0; j < c->V; j++) {
      v = fmax(v, fabs(d->v[r * c->V + j])), dv = fmax(dv, fabs(wv[r * c->V + j]));
      o = fmax(o, fabs(d->out[r * c->V + j])), dout = fmax(dout, fabs(d->dout[r * c->V + j]));
    }
    const double bound = TOL * mx + ANG_SUM * 2.0 * (q * dq + k * dk + v * dv + o * dout);
    for (int64_t p = 0; p < half; p++) {
      const double e = fabs(da[r * half + p] - want[r * half + p]);
      worst_frac = e != e ? INFINITY : fmax(worst_frac, e / bound);
    }
  }
  return worst_frac * TOL; /* reported and checked against TOL like the others */
}

/* The error of dg against the bound above, as a fraction of it (<= 1 passes). */
static double dg_err(const bcase *c, const bdata *d, const float *dg, const double *want,
                     const double *wq, const double *wk) {
  double mx = 1e-30, err = 0.0, sum_max = 0.0;
  for (int64_t i = 0; i < d->nk; i++) {
    mx = fmax(mx, fabs(want[i]));
    const double e = fabs((double)dg[i] - want[i]);
    err = e != e ? INFINITY : fmax(err, e);
  }
  for (int64_t bh = 0; bh < (int64_t)c->B * c->H; bh++) {
    double sum = 0.0;
    for (int64_t t = 0; t < c->T; t++) {
      const int64_t row = ((bh / c->H) * c->T + t) * c->H + bh % c->H;
      double q = 0, dq = 0, k = 0, dk = 0;
      for (int32_t j = 0; j < c->K; j++) {
        q = fmax(q, fabs(d->q[row * c->K + j])), k = fmax(k, fabs(d->k[row * c->K + j]));
        dq = fmax(dq, fabs(wq[row * c->K + j])), dk = fmax(dk, fabs(wk[row * c->K + j]));
      }
      sum += 2.0 * (q * dq + k * dk);
    }
    sum_max = fmax(sum_max, sum);
  }
  return err / (DG_REL * mx + DG_SUM * sum_max);
}

static void check_case(const bcase *c, uint64_t seed) {
  char buf[256];
  describe(c, buf, sizeof buf);
  bdata d;
  make_data(c, &d, seed);
  lgrads r;
  alloc_grads(&d, &r);
  const rove_status st = lib_backward(c, &d, 1, &r);
  if (st != ROVE_OK) fail_msg("%s: %s", buf, rove_status_string(st));
  const rove_gla_config cfg = config_of(c, 1);
  rove_gla_args a = args_of(c, &d);
  double *w = malloc(sizeof(double) * (size_t)(3 * d.nk + d.nv + d.ns + d.na + 1));
  assert_non_null(w);
  double *wk = w + d.nk, *wg = wk + d.nk, *wv = wg + d.nk, *wi = wv + d.nv, *wa = wi + d.ns;
  const int ang = c->angles && c->rot;
  assert_int_equal(rove_oracle_gla_backward(&cfg, &a, d.dout, c->dfinal ? d.dfin : NULL, w, wk, wv,
                                            wg, wi, ang ? wa : NULL),
                   0);
  double e[6] = {
      rove_max_rel_err_fd(r.dq, w, d.nk),  rove_max_rel_err_fd(r.dk, wk, d.nk),
      rove_max_rel_err_fd(r.dv, wv, d.nv), dg_err(c, &d, r.dg, wg, w, wk),
      rove_max_rel_err_fd(r.di, wi, d.ns), ang ? angle_err(c, &d, r.da, wa, w, wk, wv) : 0.0};
  for (int i = 0; i < 6; i++) worst[i] = fmax(worst[i], e[i]);
  for (int i = 0; i < 6; i++)
    if (!(e[i] <= (i == 3 ? 1.0 : TOL)))
      fail_msg(
          "%s: errors dq %.3g dk %.3g dv %.3g dg %.3g (of its bound) dinit %.3g dangles %.3g (x "
          "TOL of its bound)",
          buf, e[0], e[1], e[2], e[3], e[4], e[5]);
  free(w), free(r.dq), free(r.da);
  free_data(&d);
}

static void report(const char *test) {
  printf(
      "  %s: max rel err dq %.2g dk %.2g dv %.2g dg %.2g (of its bound) dinit %.2g dangles %.2g (x "
      "TOL of its bound) (isa %s)\n",
      test, worst[0], worst[1], worst[2], worst[3], worst[4], worst[5],
      rove_isa_name(rove_best_isa()));
  memset(worst, 0, sizeof worst);
}

static void test_shapes_tails(void **state) {
  (void)state;
  static const int shp[][5] = {{1, 1, 1, 4, 4},     {2, 37, 3, 8, 6},   {1, 100, 2, 16, 16},
                               {1, 130, 1, 64, 64}, {2, 65, 2, 32, 48}, {1, 50, 2, 2, 2},
                               {1, 77, 1, 24, 40}};
  static const int chunks[] = {16, 32, 64, 128};
  for (size_t i = 0; i < sizeof shp / sizeof *shp; i++)
    for (int ci = 0; ci < 4; ci++) {
      const uint32_t rot = shp[i][4] >= shp[i][3] ? ROVE_ROTATE_ROVE : ROVE_ROTATE_ROPE;
      bcase c = {shp[i][0], shp[i][1], shp[i][2], shp[i][3], shp[i][4],  0,       0,
                 rot,       1,         1,         1,         chunks[ci], D_RANDOM};
      check_case(&c, 100 + i * 4 + ci);
    }
  report("shapes, tails and chunks");
}

static void test_rotations(void **state) {
  (void)state;
  static const uint32_t rots[] = {0,
                                  ROVE_ROTATE_ROPE,
                                  ROVE_ROTATE_ROVE,
                                  ROVE_ROTATE_V,
                                  ROVE_ROTATE_O,
                                  ROVE_ROTATE_V | ROVE_ROTATE_O,
                                  ROVE_ROTATE_Q};
  for (int ri = 0; ri < 7; ri++)
    for (int pi = 0; pi < 2; pi++)
      for (int partial = 0; partial < 2; partial++) {
        bcase c = {2, 45, 2, 16, 16, partial ? 8 : 0, pi, rots[ri], 1, ri % 2, pi, 16, D_RANDOM};
        check_case(&c, 300 + ri * 4 + pi * 2 + partial);
      }
  bcase none = {1, 40, 2, 16, 16, 0, 0, ROVE_ROTATE_ROVE, 0, 1, 1, 16, D_RANDOM};
  check_case(&none, 399); /* rotate flags but no angles: no rotation */
  report("rotations");
}

static void test_decays(void **state) {
  (void)state;
  for (int dcy = 0; dcy < D_N; dcy++)
    for (int init = 0; init < 2; init++) {
      bcase c = {1, 150, 2, 16, 16, 0, 0, ROVE_ROTATE_ROVE, 1, init, 1 - init, 64, dcy};
      check_case(&c, 500 + dcy * 2 + init);
    }
  report("decays");
}

static void test_long(void **state) {
  (void)state;
  if (getenv("ROVE_TEST_EMULATED")) { /* under an emulator or valgrind */
    print_message("  ROVE_TEST_EMULATED: the long cases left out\n");
    skip();
  }
  bcase c = {1, 1000, 1, 32, 32, 0, 0, ROVE_ROTATE_ROVE, 1, 1, 1, 64, D_RANDOM};
  check_case(&c, 600);
  c.decay = D_MIXED, c.chunk = 128;
  check_case(&c, 601);
  /* tables of the whole sequence past what the forward sweep keeps (4100 x 512 pairs x 2
   * floats > TABLE_CACHE_FLOATS): the backward sweep computes them again */
  bcase w = {1, 4100, 1, 1024, 2, 0, 0, ROVE_ROTATE_ROPE, 1, 1, 1, 64, D_RANDOM};
  check_case(&w, 602);
  report("long");
}

/* Bitwise identical for 1 and 2 threads (12 heads: both threads get work). */
static void test_threads(void **state) {
  (void)state;
  bcase c = {2, 300, 6, 32, 32, 0, 0, ROVE_ROTATE_ROVE, 1, 1, 1, 64, D_RANDOM};
  bdata d;
  make_data(&c, &d, 700);
  lgrads r1, r2;
  alloc_grads(&d, &r1), alloc_grads(&d, &r2);
  assert_int_equal(lib_backward(&c, &d, 1, &r1), ROVE_OK);
  assert_int_equal(lib_backward(&c, &d, 2, &r2), ROVE_OK);
  assert_memory_equal(r1.dq, r2.dq, sizeof(float) * (size_t)(3 * d.nk + d.nv + d.ns));
  assert_memory_equal(r1.da, r2.da, sizeof(double) * (size_t)d.na);
  free(r1.dq), free(r1.da), free(r2.dq), free(r2.da);
  free_data(&d);
}

/* Guarded gradients: every byte written inside, nothing outside, no NaN. */
static void test_guarded(void **state) {
  (void)state;
  bcase c = {1, 33, 2, 8, 8, 0, 0, ROVE_ROTATE_ROVE, 1, 1, 1, 16, D_RANDOM};
  bdata d;
  make_data(&c, &d, 800);
  rove_guarded gq, gk, gv, gg, gi;
  float *dq = rove_guarded_alloc(&gq, d.nk, 1), *dk = rove_guarded_alloc(&gk, d.nk, 3);
  float *dv = rove_guarded_alloc(&gv, d.nv, 2), *dg = rove_guarded_alloc(&gg, d.nk, 0);
  float *di = rove_guarded_alloc(&gi, d.ns, 1);
  const rove_gla_config cfg = config_of(&c, 1);
  rove_gla_plan *p = NULL;
  assert_int_equal(rove_gla_plan_create(&cfg, &p), ROVE_OK);
  rove_gla_args a = args_of(&c, &d);
  assert_int_equal(rove_gla_forward(p, &a), ROVE_OK);
  rove_gla_grads g = {d.dout, d.dfin, dq, dk, dg, dv, di, NULL};
  assert_int_equal(rove_gla_backward(p, &a, &g), ROVE_OK);
  assert_true(rove_guarded_intact(&gq) && rove_guarded_intact(&gk) && rove_guarded_intact(&gv));
  assert_true(rove_guarded_intact(&gg) && rove_guarded_intact(&gi));
  for (int64_t i = 0; i < d.nk; i++)
    assert_true(isfinite(dq[i]) && isfinite(dk[i]) && isfinite(dg[i]));
  rove_gla_plan_destroy(p);
  rove_guarded_free(&gq), rove_guarded_free(&gk), rove_guarded_free(&gv);
  rove_guarded_free(&gg), rove_guarded_free(&gi);
  free_data(&d);
}

static void expect(const rove_gla_plan *p, const rove_gla_args *a, const rove_gla_grads *g,
                   rove_status want, const float *dq, int64_t n, const char *what) {
  const rove_status st = rove_gla_backward(p, a, g);
  if (st != want)
    fail_msg("%s: got %s, want %s", what, rove_status_string(st), rove_status_string(want));
  for (int64_t i = 0; i < n; i++)
    if (dq[i] != 123.0f) fail_msg("%s: dq written on failure", what);
}

static void test_bad_input(void **state) {
  (void)state;
  bcase c = {1, 20, 2, 8, 8, 0, 0, ROVE_ROTATE_ROVE, 1, 1, 1, 16, D_RANDOM};
  bdata d;
  make_data(&c, &d, 900);
  lgrads r;
  alloc_grads(&d, &r);
  for (int64_t i = 0; i < d.nk; i++) r.dq[i] = 123.0f;
  const rove_gla_config cfg = config_of(&c, 1);
  rove_gla_plan *p = NULL;
  assert_int_equal(rove_gla_plan_create(&cfg, &p), ROVE_OK);
  rove_gla_args a = args_of(&c, &d);
  const rove_gla_grads good = {d.dout, d.dfin, r.dq, r.dk, r.dg, r.dv, r.di, r.da};
  rove_gla_grads g = good;
  const int64_t n = d.nk;
  expect(p, &a, NULL, ROVE_ERR_INVALID_ARGUMENT, r.dq, n, "NULL grads");
  expect(NULL, &a, &g, ROVE_ERR_INVALID_ARGUMENT, r.dq, n, "NULL plan");
  expect(p, NULL, &g, ROVE_ERR_INVALID_ARGUMENT, r.dq, n, "NULL args");
  g.dout = NULL;
  expect(p, &a, &g, ROVE_ERR_INVALID_ARGUMENT, r.dq, n, "NULL dout");
  g = good, g.dk = NULL;
  expect(p, &a, &g, ROVE_ERR_INVALID_ARGUMENT, r.dq, n, "NULL dk");
  g = good, g.dg = NULL;
  expect(p, &a, &g, ROVE_ERR_INVALID_ARGUMENT, r.dq, n, "NULL dg");
  g = good, g.dv = r.dk; /* overlaps dk */
  expect(p, &a, &g, ROVE_ERR_INVALID_ARGUMENT, r.dq, n, "dv overlaps dk");
  g = good, g.dk = (float *)d.q; /* overlaps an input */
  expect(p, &a, &g, ROVE_ERR_INVALID_ARGUMENT, r.dq, n, "dk overlaps q");
  g = good, g.d_initial_state = (float *)d.dfin;
  expect(p, &a, &g, ROVE_ERR_INVALID_ARGUMENT, r.dq, n, "d_init overlaps d_final");
  g = good;
  rove_gla_args b = a;
  b.out = NULL; /* needed for d_angles with ROTATE_O */
  expect(p, &b, &g, ROVE_ERR_INVALID_ARGUMENT, r.dq, n, "no out with d_angles");
  b = a, b.angles = NULL; /* d_angles without angles */
  expect(p, &b, &g, ROVE_ERR_INVALID_ARGUMENT, r.dq, n, "d_angles without angles");
  const float g0 = d.g[5];
  d.g[5] = 0.5f;
  expect(p, &a, &g, ROVE_ERR_INVALID_ARGUMENT, r.dq, n, "g > 0");
  d.g[5] = NAN;
  expect(p, &a, &g, ROVE_ERR_INVALID_ARGUMENT, r.dq, n, "g NaN");
  d.g[5] = g0;
  const double a0 = d.ang[3];
  d.ang[3] = INFINITY;
  expect(p, &a, &g, ROVE_ERR_INVALID_ARGUMENT, r.dq, n, "angle inf");
  d.ang[3] = a0;
  b = a, b.seq_len = 0;
  expect(p, &b, &g, ROVE_ERR_INVALID_ARGUMENT, r.dq, n, "seq_len 0");
  b = a, b.batch = INT32_MAX, b.seq_len = INT32_MAX;
  expect(p, &b, &g, ROVE_ERR_SIZE_OVERFLOW, r.dq, n, "size overflow");
  /* without out, d_angles NULL works; without ROTATE_O, out is not needed */
  b = a, b.out = NULL, g = good, g.d_angles = NULL;
  assert_int_equal(rove_gla_backward(p, &b, &g), ROVE_OK);
  rove_gla_plan_destroy(p);
  free(r.dq), free(r.da);
  free_data(&d);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_oracle_fd), cmocka_unit_test(test_shapes_tails),
      cmocka_unit_test(test_rotations), cmocka_unit_test(test_decays),
      cmocka_unit_test(test_long),      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_guarded),   cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
