/* SPDX-License-Identifier: MIT */
/* GLA kernel conformance: the chunk, steps and backward (bwd_dq, bwd_dkv, bwd_dg) kernels
 * of every SIMD table of the registry against the scalar ones over key/value dims below,
 * at and above the vector widths, every chunk length, several chunks in a row (the state
 * carried), decays from none to very strong, misaligned rows, and canaries around every
 * buffer (inputs must stay unchanged too). ISA iteration and skips (exit 77 without a
 * SIMD ISA): ktest_util.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gla_internal.h"
#include "ktest_util.h"
/* ktest_util.h first: cmocka needs its standard headers before it */

#define TOL 2e-6 /* relative to the max |scalar result| of a case */

static float decay(rove_rng *r, int kind) {
  switch (kind) {
    case 1: return rove_rng_uniform(r, -25.0f, -15.0f);
    case 2: return 0.0f;
    case 3:
      return rove_rng_uniform(r, 0.0f, 1.0f) < 0.1f ? -40.0f : -rove_rng_uniform(r, 0.0f, 1e-3f);
    default: return -rove_rng_uniform(r, 0.0f, 1.0f);
  }
}

/* The inputs of `rows` token rows and a state; each run gets its own copies. */
typedef struct {
  float *q, *k, *g, *v, *s;
} gla_in;

static void in_make(gla_in *x, rove_rng *r, int64_t rows, int dk, int dv, int kind) {
  x->q = malloc(sizeof(float) * (size_t)(rows * dk));
  x->k = malloc(sizeof(float) * (size_t)(rows * dk));
  x->g = malloc(sizeof(float) * (size_t)(rows * dk));
  x->v = malloc(sizeof(float) * (size_t)(rows * dv));
  x->s = malloc(sizeof(float) * (size_t)dk * dv);
  assert_true(x->q && x->k && x->g && x->v && x->s);
  rove_rng_fill(r, x->q, rows * dk, -0.3f, 0.3f);
  rove_rng_fill(r, x->k, rows * dk, -1.0f, 1.0f);
  rove_rng_fill(r, x->v, rows * dv, -1.0f, 1.0f);
  rove_rng_fill(r, x->s, (int64_t)dk * dv, -1.0f, 1.0f);
  for (int64_t i = 0; i < rows * dk; i++) x->g[i] = decay(r, kind);
}

static void in_free(gla_in *x) { free(x->q), free(x->k), free(x->g), free(x->v), free(x->s); }

/* Run `chunks` chunks of n rows (chunk kernel) or the same rows through the steps kernel
 * with kernel table kn, in guarded, misaligned buffers; o gets every output row, s the
 * final state. Fails the case when a canary or an input changed. */
static void run(const rove_gla_kernels *kn, int steps, const gla_in *x, int chunks, int n, int dk,
                int dv, float *o, float *s, int mis) {
  const int64_t rows = (int64_t)chunks * n;
  rove_guarded bq, bk, bg, bv, bs, bo, bw;
  float *q = kt_alloc(&bq, rows * dk, mis, 1), *k = kt_alloc(&bk, rows * dk, (mis + 1) % 16, 1);
  float *g = kt_alloc(&bg, rows * dk, (mis + 2) % 16, 1),
        *v = kt_alloc(&bv, rows * dv, (mis + 3) % 16, 1);
  float *st = kt_alloc(&bs, (int64_t)dk * dv, (mis + 5) % 16, 1),
        *out = kt_alloc(&bo, rows * dv, (mis + 7) % 16, 1);
  float *w = kt_alloc(&bw, rove_gla_work_floats(n, dk), 0, 1); /* the contract: 64-byte aligned */
  memcpy(q, x->q, sizeof(float) * (size_t)(rows * dk));
  memcpy(k, x->k, sizeof(float) * (size_t)(rows * dk));
  memcpy(g, x->g, sizeof(float) * (size_t)(rows * dk));
  memcpy(v, x->v, sizeof(float) * (size_t)(rows * dv));
  memcpy(st, x->s, sizeof(float) * (size_t)dk * dv);
  for (int c = 0; c < chunks; c++) {
    const int64_t r0 = (int64_t)c * n;
    if (steps) {
      kn->steps(st, out + r0 * dv, q + r0 * dk, k + r0 * dk, v + r0 * dv, g + r0 * dk, n, dk, dv,
                w);
    } else {
      const rove_gla_chunk ch = {n,           dk,          dv, q + r0 * dk,   k + r0 * dk,
                                 g + r0 * dk, v + r0 * dv, st, out + r0 * dv, w};
      kn->chunk(&ch);
    }
  }
  memcpy(o, out, sizeof(float) * (size_t)(rows * dv));
  memcpy(s, st, sizeof(float) * (size_t)dk * dv);
  kt_check(&bq, "q"), kt_check(&bk, "k"), kt_check(&bg, "g"), kt_check(&bv, "v");
  kt_check(&bs, "state"), kt_check(&bo, "out"), kt_check(&bw, "work");
  if (memcmp(q, x->q, sizeof(float) * (size_t)(rows * dk))) kt_fail("q was modified");
  if (memcmp(k, x->k, sizeof(float) * (size_t)(rows * dk))) kt_fail("k was modified");
  if (memcmp(g, x->g, sizeof(float) * (size_t)(rows * dk))) kt_fail("g was modified");
  if (memcmp(v, x->v, sizeof(float) * (size_t)(rows * dv))) kt_fail("v was modified");
  rove_guarded_free(&bq), rove_guarded_free(&bk), rove_guarded_free(&bg), rove_guarded_free(&bv);
  rove_guarded_free(&bs), rove_guarded_free(&bo), rove_guarded_free(&bw);
}

/* One case: kernel table kn against scalar. */
static void compare(const rove_gla_kernels *kn, int steps, int chunks, int n, int dk, int dv,
                    int kind, uint64_t seed) {
  rove_rng r;
  rove_rng_seed(&r, seed);
  gla_in x;
  const int64_t rows = (int64_t)chunks * n;
  in_make(&x, &r, rows, dk, dv, kind);
  float *o1 = malloc(sizeof(float) * (size_t)(rows * dv)),
        *o2 = malloc(sizeof(float) * (size_t)(rows * dv));
  float *s1 = malloc(sizeof(float) * (size_t)dk * dv),
        *s2 = malloc(sizeof(float) * (size_t)dk * dv);
  assert_true(o1 && o2 && s1 && s2);
  kt_ctx("%s n=%d dk=%d dv=%d decay=%d chunks=%d", steps ? "steps" : "chunk", n, dk, dv, kind,
         chunks);
  run(&kt_ref()->gla, steps, &x, chunks, n, dk, dv, o1, s1, 0);
  run(kn, steps, &x, chunks, n, dk, dv, o2, s2, (int)(seed % 16));
  kt_cmp(o2, 0, o1, 0, 1, (int32_t)(rows * dv), TOL, "out");
  kt_cmp(s2, 0, s1, 0, 1, dk * dv, TOL, "state");
  free(o1), free(o2), free(s1), free(s2);
  in_free(&x);
}

static const int dims[] = {1,  2,  3,  4,  5,  7,  8,  9,  15, 16, 17,
                           24, 31, 32, 33, 48, 63, 64, 65, 80, 96, 128};
#define N_DIMS ((int)(sizeof dims / sizeof *dims))

static void test_chunk(const rove_kernels *table) {
  const rove_gla_kernels *kn = &table->gla;
  uint64_t seed = 1;
  for (int i = 0; i < N_DIMS; i++) /* every dk x a few dv, and the reverse */
    for (int j = i % 3; j < N_DIMS; j += 5) {
      compare(kn, 0, 2, 16 * (1 + (i + j) % 8), dims[i], dims[j], (i + j) % 4, seed++);
      compare(kn, 0, 2, 16 * (1 + (i + j) % 8), dims[j], dims[i], (i + j + 1) % 4, seed++);
    }
  for (int n = 16; n <= ROVE_GLA_MAX_CHUNK; n += 16)
    for (int kind = 0; kind < 4; kind++) compare(kn, 0, 3, n, 64, 64, kind, seed++);
  compare(kn, 0, 1, 128, 256, 200, 0, seed++);
  printf("  %s chunk: max rel err %.3g\n", kt_isa(), kt_worst());
}

static void test_steps(const rove_kernels *table) {
  const rove_gla_kernels *kn = &table->gla;
  uint64_t seed = 1000;
  for (int i = 0; i < N_DIMS; i++)
    for (int j = i % 2; j < N_DIMS; j += 3)
      compare(kn, 1, 2, 1 + (i + j) % 9, dims[i], dims[j], (i + j) % 4, seed++);
  compare(kn, 1, 4, 33, 64, 64, 0, seed++);
  printf("  %s steps: max rel err %.3g\n", kt_isa(), kt_worst());
}

/* The backward sweeps (gla_kernels.h): `chunks` chunks of n rows through bwd_state (state
 * carried forward, the state before each chunk kept) and, last chunk first, bwd_grads
 * (from the kept state, adjoint carried backward), in guarded misaligned buffers (the work
 * buffer 64-byte aligned, as the contract says); dq, dk, dv of every row and both final
 * states come back. Inputs, and the kept states bwd_grads reads, must stay unchanged. */
static void run_bwd(const rove_gla_kernels *kn, const gla_in *x, const float *dout, int chunks,
                    int n, int dk, int dv, float *res, int mis) {
  const int64_t rows = (int64_t)chunks * n, nk = rows * dk, nv = rows * dv, ns = (int64_t)dk * dv;
  rove_guarded bq, bk, bg, bv, bd, bs, bh, bdq, bdk, bdv, bw, bkp;
  float *q = kt_alloc(&bq, nk, mis, 1), *k = kt_alloc(&bk, nk, (mis + 1) % 16, 1);
  float *g = kt_alloc(&bg, nk, (mis + 2) % 16, 1), *v = kt_alloc(&bv, nv, (mis + 3) % 16, 1);
  float *d = kt_alloc(&bd, nv, (mis + 4) % 16, 1), *st = kt_alloc(&bs, ns, (mis + 5) % 16, 1);
  float *h = kt_alloc(&bh, ns, (mis + 6) % 16, 1), *dq = kt_alloc(&bdq, nk, (mis + 7) % 16, 1);
  float *dk_ = kt_alloc(&bdk, nk, (mis + 9) % 16, 1), *dv_ = kt_alloc(&bdv, nv, (mis + 11) % 16, 1);
  float *w = kt_alloc(&bw, rove_gla_bwd_work_floats(n, dk, dv), 0, 1);
  float *kept = kt_alloc(&bkp, chunks * ns, (mis + 13) % 16, 1);
  float *kept_copy = malloc(sizeof(float) * (size_t)(chunks * ns));
  assert_true(kept_copy != NULL);
  memcpy(q, x->q, sizeof(float) * (size_t)nk), memcpy(k, x->k, sizeof(float) * (size_t)nk);
  memcpy(g, x->g, sizeof(float) * (size_t)nk), memcpy(v, x->v, sizeof(float) * (size_t)nv);
  memcpy(d, dout, sizeof(float) * (size_t)nv), memcpy(st, x->s, sizeof(float) * (size_t)ns);
  for (int64_t i = 0; i < ns; i++) h[i] = x->s[ns - 1 - i]; /* some adjoint after the end */
  for (int c = 0; c < chunks; c++) {
    const int64_t r0 = (int64_t)c * n;
    memcpy(kept + c * ns, st, sizeof(float) * (size_t)ns);
    const rove_gla_bwd_chunk ch = {n,           dk,   dv,   q + r0 * dk, k + r0 * dk,
                                   g + r0 * dk, v + r0 * dv, NULL, st,   NULL,
                                   NULL,        NULL, NULL, w};
    kn->bwd_state(&ch);
  }
  memcpy(kept_copy, kept, sizeof(float) * (size_t)(chunks * ns));
  for (int c = chunks - 1; c >= 0; c--) {
    const int64_t r0 = (int64_t)c * n;
    const rove_gla_bwd_chunk ch = {n,           dk,          dv,          q + r0 * dk,
                                   k + r0 * dk, g + r0 * dk, v + r0 * dv, d + r0 * dv,
                                   kept + c * ns, h,         dq + r0 * dk, dk_ + r0 * dk,
                                   dv_ + r0 * dv, w};
    kn->bwd_grads(&ch);
  }
  if (memcmp(kept, kept_copy, sizeof(float) * (size_t)(chunks * ns)))
    kt_fail("bwd_grads modified the state it reads");
  kt_check(&bkp, "kept states");
  rove_guarded_free(&bkp);
  free(kept_copy);
  float *o = res;
  memcpy(o, dq, sizeof(float) * (size_t)nk), o += nk;
  memcpy(o, dk_, sizeof(float) * (size_t)nk), o += nk;
  memcpy(o, dv_, sizeof(float) * (size_t)nv), o += nv;
  memcpy(o, st, sizeof(float) * (size_t)ns), o += ns;
  memcpy(o, h, sizeof(float) * (size_t)ns);
  kt_check(&bq, "q"), kt_check(&bk, "k"), kt_check(&bg, "g"), kt_check(&bv, "v");
  kt_check(&bd, "dout"), kt_check(&bs, "state"), kt_check(&bh, "adjoint");
  kt_check(&bdq, "dq"), kt_check(&bdk, "dk"), kt_check(&bdv, "dv"), kt_check(&bw, "work");
  if (memcmp(q, x->q, sizeof(float) * (size_t)nk) || memcmp(k, x->k, sizeof(float) * (size_t)nk) ||
      memcmp(g, x->g, sizeof(float) * (size_t)nk) || memcmp(v, x->v, sizeof(float) * (size_t)nv) ||
      memcmp(d, dout, sizeof(float) * (size_t)nv))
    kt_fail("an input was modified");
  rove_guarded_free(&bq), rove_guarded_free(&bk), rove_guarded_free(&bg), rove_guarded_free(&bv);
  rove_guarded_free(&bd), rove_guarded_free(&bs), rove_guarded_free(&bh);
  rove_guarded_free(&bdq), rove_guarded_free(&bdk), rove_guarded_free(&bdv), rove_guarded_free(&bw);
}

static void compare_bwd(const rove_gla_kernels *kn, int chunks, int n, int dk, int dv, int kind,
                        uint64_t seed) {
  rove_rng r;
  rove_rng_seed(&r, seed);
  gla_in x;
  const int64_t rows = (int64_t)chunks * n;
  in_make(&x, &r, rows, dk, dv, kind);
  float *dout = malloc(sizeof(float) * (size_t)(rows * dv));
  const int64_t nres = 2 * rows * dk + rows * dv + 2 * (int64_t)dk * dv;
  float *r1 = malloc(sizeof(float) * (size_t)nres), *r2 = malloc(sizeof(float) * (size_t)nres);
  assert_true(dout && r1 && r2);
  rove_rng_fill(&r, dout, rows * dv, -1.0f, 1.0f);
  kt_ctx("bwd n=%d dk=%d dv=%d decay=%d chunks=%d", n, dk, dv, kind, chunks);
  run_bwd(&kt_ref()->gla, &x, dout, chunks, n, dk, dv, r1, 0);
  run_bwd(kn, &x, dout, chunks, n, dk, dv, r2, (int)(seed % 16));
  const float *a = r2, *b = r1;
  kt_cmp(a, 0, b, 0, 1, (int32_t)(rows * dk), TOL, "dq"), a += rows * dk, b += rows * dk;
  kt_cmp(a, 0, b, 0, 1, (int32_t)(rows * dk), TOL, "dk"), a += rows * dk, b += rows * dk;
  kt_cmp(a, 0, b, 0, 1, (int32_t)(rows * dv), TOL, "dv"), a += rows * dv, b += rows * dv;
  kt_cmp(a, 0, b, 0, 1, dk * dv, TOL, "state"), a += dk * dv, b += dk * dv;
  kt_cmp(a, 0, b, 0, 1, dk * dv, TOL, "adjoint");
  free(dout), free(r1), free(r2);
  in_free(&x);
}

static void test_bwd(const rove_kernels *table) {
  const rove_gla_kernels *kn = &table->gla;
  uint64_t seed = 2000;
  for (int i = 0; i < N_DIMS; i += 2)
    for (int j = i % 3; j < N_DIMS; j += 7)
      compare_bwd(kn, 2, 16 * (1 + (i + j) % 8), dims[i], dims[j], (i + j) % 4, seed++);
  for (int n = 16; n <= ROVE_GLA_MAX_CHUNK; n += 48)
    for (int kind = 0; kind < 4; kind++) compare_bwd(kn, 3, n, 64, 64, kind, seed++);
  printf("  %s bwd: max rel err %.3g\n", kt_isa(), kt_worst());
}

/* The backward's dg row (bwd_dg): carry and dg of 40 consecutive rows (the carry
 * accumulated) for every length 1..200, misaligned, with canaries; the same double
 * expression per element everywhere, so the bits must equal the scalar kernel's. */
static void test_dg(const rove_kernels *table) {
  rove_rng r;
  rove_rng_seed(&r, 4242);
  for (int32_t n = 1; n <= 200; n += n < 40 ? 1 : 13) {
    const int rows = 40, mis = n % 16;
    const int64_t nt = (int64_t)rows * n;
    float *in = malloc(sizeof(float) * (size_t)(4 * nt));
    assert_true(in != NULL);
    rove_rng_fill(&r, in, 4 * nt, -2.0f, 2.0f);
    float *dg[2];
    double *carry[2];
    rove_guarded bq, bdq, bk, bdk, bg[2], bc[2];
    float *q = kt_alloc(&bq, nt, mis, 1), *dq = kt_alloc(&bdq, nt, (mis + 3) % 16, 1);
    float *k = kt_alloc(&bk, nt, (mis + 5) % 16, 1), *dk = kt_alloc(&bdk, nt, (mis + 7) % 16, 1);
    memcpy(q, in, sizeof(float) * (size_t)nt), memcpy(dq, in + nt, sizeof(float) * (size_t)nt);
    memcpy(k, in + 2 * nt, sizeof(float) * (size_t)nt);
    memcpy(dk, in + 3 * nt, sizeof(float) * (size_t)nt);
    for (int t = 0; t < 2; t++) {
      const rove_gla_kernels *kn = t ? &table->gla : &kt_ref()->gla;
      dg[t] = kt_alloc(&bg[t], nt, (mis + 9 + t) % 16, 1);
      carry[t] = (double *)kt_alloc(&bc[t], 2 * (int64_t)n, 2 * t, 1); /* 8-byte steps */
      memset(carry[t], 0, sizeof(double) * (size_t)n);
      for (int i = rows - 1; i >= 0; i--) /* from the end, as the driver */
        kn->bwd_dg(carry[t], dg[t] + (int64_t)i * n, q + (int64_t)i * n, dq + (int64_t)i * n,
                   k + (int64_t)i * n, dk + (int64_t)i * n, n);
    }
    kt_ctx("dg n=%d", n);
    if (memcmp(dg[0], dg[1], sizeof(float) * (size_t)nt) ||
        memcmp(carry[0], carry[1], sizeof(double) * (size_t)n))
      kt_fail("dg or carry differs from the scalar kernel's bits");
    kt_check(&bq, "q"), kt_check(&bdq, "dq"), kt_check(&bk, "k"), kt_check(&bdk, "dk");
    for (int t = 0; t < 2; t++) kt_check(&bg[t], "dg"), kt_check(&bc[t], "carry");
    if (memcmp(q, in, sizeof(float) * (size_t)nt) ||
        memcmp(dk, in + 3 * nt, sizeof(float) * (size_t)nt))
      kt_fail("an input was modified");
    rove_guarded_free(&bq), rove_guarded_free(&bdq), rove_guarded_free(&bk);
    rove_guarded_free(&bdk);
    for (int t = 0; t < 2; t++) rove_guarded_free(&bg[t]), rove_guarded_free(&bc[t]);
    free(in);
  }
  printf("  %s bwd_dg: bitwise equal to scalar\n", kt_isa());
}


/* rove_gla_backward in segments (gla_backward.c): with the plan's bwd_keep_floats lowered
 * so that one, two or three chunk states fit, on 1 and 2 threads, every gradient equals
 * (bits) the run that keeps all states. 2 x 300 tokens x 4 heads, chunk 64 (5 chunks, the
 * last short), RoVE angles, initial state and d_final_state given. */
static void test_bwd_segments(const rove_kernels *table) {
  (void)table;
  rove_isa isa;
  assert_int_equal(rove_isa_parse(kt_isa(), &isa), ROVE_OK);
  const int32_t B = 2, T = 300, H = 4, K = 32, V = 32, half = K / 2;
  const int64_t nk = (int64_t)B * T * H * K, nv = (int64_t)B * T * H * V, ns = (int64_t)B * H * K * V;
  const int64_t na = (int64_t)B * T * H * half;
  rove_rng r;
  rove_rng_seed(&r, 31337);
  float *in = malloc(sizeof(float) * (size_t)(3 * nk + 3 * nv + 2 * ns));
  double *ang = malloc(sizeof(double) * (size_t)na);
  assert_true(in && ang);
  float *q = in, *k = q + nk, *g = k + nk, *v = g + nk, *out = v + nv, *dout = out + nv;
  float *s0 = dout + nv, *dfin = s0 + ns;
  rove_rng_fill(&r, q, 2 * nk, -1.0f, 1.0f);
  rove_rng_fill(&r, g, nk, -0.3f, 0.0f);
  rove_rng_fill(&r, v, nv, -1.0f, 1.0f);
  rove_rng_fill(&r, dout, nv, -1.0f, 1.0f);
  rove_rng_fill(&r, s0, 2 * ns, -0.5f, 0.5f);
  for (int64_t i = 0; i < na; i++) ang[i] = 0.37 * (double)(i % 97) - 11.0;
  const int64_t per = 3 * nk + nv + ns; /* floats of one run's gradients */
  float *want = malloc(sizeof(float) * (size_t)per), *got = malloc(sizeof(float) * (size_t)per);
  double *wa = malloc(sizeof(double) * (size_t)na), *ga = malloc(sizeof(double) * (size_t)na);
  assert_true(want && got && wa && ga);
  for (int run = 0; run < 7; run++) {
    rove_gla_config cfg;
    rove_gla_config_init(&cfg, H, K, V);
    cfg.rotate = ROVE_ROTATE_ROVE, cfg.isa = isa, cfg.n_threads = run == 0 ? 1 : 1 + run % 2;
    rove_gla_plan *p = NULL;
    assert_int_equal(rove_gla_plan_create(&cfg, &p), ROVE_OK);
    /* run 0: every state kept; then 1, 2, 3 states of the group (2 threads: a group is 2
     * heads, 1 thread: all 4) */
    if (run > 0) p->bwd_keep_floats = (int64_t)((run + 1) / 2) * K * V * (cfg.n_threads == 1 ? 4 : 2);
    rove_gla_args a;
    memset(&a, 0, sizeof a);
    a.batch = B, a.seq_len = T, a.q = q, a.k = k, a.v = v, a.g = g, a.angles = ang;
    a.initial_state = s0, a.out = out;
    assert_int_equal(rove_gla_forward(p, &a), ROVE_OK);
    float *res = run == 0 ? want : got;
    double *da = run == 0 ? wa : ga;
    rove_gla_grads gr;
    memset(&gr, 0, sizeof gr);
    gr.dout = dout, gr.d_final_state = dfin;
    gr.dq = res, gr.dk = res + nk, gr.dg = res + 2 * nk, gr.dv = res + 3 * nk;
    gr.d_initial_state = res + 3 * nk + nv, gr.d_angles = da;
    assert_int_equal(rove_gla_backward(p, &a, &gr), ROVE_OK);
    rove_gla_plan_destroy(p);
    kt_ctx("bwd segments: run %d, %d thread(s)", run, cfg.n_threads);
    if (run > 0 && (memcmp(want, got, sizeof(float) * (size_t)per) ||
                    memcmp(wa, ga, sizeof(double) * (size_t)na)))
      kt_fail("gradients differ from the run that keeps every state");
  }
  free(in), free(ang), free(want), free(got), free(wa), free(ga);
  printf("  %s bwd segments: bitwise equal to keeping every state\n", kt_isa());
}

int main(void) {
  static const kt_test per_isa[] = {
      {"chunk", test_chunk}, {"steps", test_steps}, {"bwd", test_bwd}, {"bwd_dg", test_dg},
      {"bwd_segments", test_bwd_segments}};
  const kt_suite s = {"ktest_gla", "scalar", per_isa, 5, NULL, 0, 0};
  return kt_main(&s);
}
