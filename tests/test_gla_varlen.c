/* SPDX-License-Identifier: MIT */
/* GLA over packed sequences (rove_gla_args.cu_seqlens, flash-linear-attention's
 * cu_seqlens): the forward, the recurrence and the backward of a packed call equal a
 * batch-1 call on each sequence alone, bit for bit (outputs, final states, every
 * gradient), for sequences of lengths 0, 1, around a chunk and long, with selective
 * angles and initial states, on 1, 2 and 3 threads; and every bad cu_seqlens is refused
 * with the outputs untouched. Links the public librove.so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { H = 3, K = 16, V = 24, R = 16, NS = 7 };
static const int32_t LENS[NS] = {65, 0, 1, 130, 64, 7, 33}; /* chunk 32: tails, exact fits */

typedef struct {
  int32_t cu[NS + 1];
  int64_t T;
  float *q, *k, *v, *g, *s0, *dout, *ds1;
  double *ang;
} packed;

static void make_packed(packed *x, uint64_t seed) {
  x->cu[0] = 0;
  for (int s = 0; s < NS; s++) x->cu[s + 1] = x->cu[s] + LENS[s];
  x->T = x->cu[NS];
  const int64_t nk = x->T * H * K, nv = x->T * H * V, ns = (int64_t)NS * H * K * V;
  x->q = malloc(sizeof(float) * (size_t)nk), x->k = malloc(sizeof(float) * (size_t)nk);
  x->g = malloc(sizeof(float) * (size_t)nk), x->v = malloc(sizeof(float) * (size_t)nv);
  x->dout = malloc(sizeof(float) * (size_t)nv), x->s0 = malloc(sizeof(float) * (size_t)ns);
  x->ds1 = malloc(sizeof(float) * (size_t)ns);
  x->ang = malloc(sizeof(double) * (size_t)(x->T * H * (R / 2)));
  assert_true(x->q && x->k && x->g && x->v && x->dout && x->s0 && x->ds1 && x->ang);
  rove_rng r;
  rove_rng_seed(&r, seed);
  rove_rng_fill(&r, x->q, nk, -1, 1), rove_rng_fill(&r, x->k, nk, -1, 1);
  rove_rng_fill(&r, x->v, nv, -1, 1), rove_rng_fill(&r, x->g, nk, -0.5f, 0);
  rove_rng_fill(&r, x->dout, nv, -1, 1), rove_rng_fill(&r, x->s0, ns, -1, 1);
  rove_rng_fill(&r, x->ds1, ns, -1, 1);
  for (int64_t i = 0; i < x->T * H * (R / 2); i++) x->ang[i] = rove_rng_uniform(&r, -20, 20);
}

static void free_packed(packed *x) {
  free(x->q), free(x->k), free(x->g), free(x->v), free(x->dout), free(x->s0), free(x->ds1);
  free(x->ang);
}

static rove_gla_plan *plan_of(int threads) {
  rove_gla_config c;
  rove_gla_config_init(&c, H, K, V);
  c.rotate = ROVE_ROTATE_ROVE, c.rotary_dim = R, c.chunk = 32, c.n_threads = threads;
  rove_gla_plan *p = NULL;
  assert_int_equal(rove_gla_plan_create(&c, &p), ROVE_OK);
  return p;
}

/* The args of tokens t0 .. t0+n-1 as one batch-1 call (states of sequence s), or of the
 * whole packed row (s < 0). */
static rove_gla_args args_of(const packed *x, int s, float *out, float *s1) {
  const int64_t t0 = s < 0 ? 0 : x->cu[s], n = s < 0 ? x->T : LENS[s];
  const int64_t st = s < 0 ? 0 : (int64_t)s * H * K * V;
  rove_gla_args a;
  memset(&a, 0, sizeof a);
  a.batch = 1, a.seq_len = (int32_t)n;
  a.q = x->q + t0 * H * K, a.k = x->k + t0 * H * K, a.g = x->g + t0 * H * K;
  a.v = x->v + t0 * H * V, a.angles = x->ang + t0 * H * (R / 2);
  a.initial_state = x->s0 + st, a.final_state = s1 + st, a.out = out + t0 * H * V;
  if (s < 0) a.cu_seqlens = x->cu, a.n_seqs = NS;
  return a;
}

/* forward (rec 0) and recurrence (rec 1): packed == per sequence, bitwise, any threads */
static void test_forward_equals_per_sequence(void **state) {
  (void)state;
  packed x;
  make_packed(&x, 4100);
  const int64_t nv = x.T * H * V, ns = (int64_t)NS * H * K * V;
  float *o0 = calloc((size_t)nv, sizeof(float)), *o1 = calloc((size_t)nv, sizeof(float));
  float *f0 = calloc((size_t)ns, sizeof(float)), *f1 = calloc((size_t)ns, sizeof(float));
  assert_true(o0 && o1 && f0 && f1);
  for (int rec = 0; rec < 2; rec++) {
    rove_gla_plan *p1 = plan_of(1);
    for (int s = 0; s < NS; s++) {
      rove_gla_args a = args_of(&x, s, o0, f0);
      if (LENS[s] == 0) { /* a call of its own needs tokens: an empty sequence keeps its state */
        memcpy(f0 + (int64_t)s * H * K * V, x.s0 + (int64_t)s * H * K * V,
               sizeof(float) * (size_t)(H * K * V));
        continue;
      }
      assert_int_equal(rec ? rove_gla_recurrent(p1, &a) : rove_gla_forward(p1, &a), ROVE_OK);
    }
    rove_gla_plan_destroy(p1);
    for (int threads = 1; threads <= 3; threads++) {
      rove_gla_plan *p = plan_of(threads);
      memset(o1, 0, sizeof(float) * (size_t)nv), memset(f1, 0, sizeof(float) * (size_t)ns);
      rove_gla_args a = args_of(&x, -1, o1, f1);
      assert_int_equal(rec ? rove_gla_recurrent(p, &a) : rove_gla_forward(p, &a), ROVE_OK);
      assert_memory_equal(o0, o1, sizeof(float) * (size_t)nv);
      assert_memory_equal(f0, f1, sizeof(float) * (size_t)ns);
      /* without final_state (states in the scratch): the same outputs */
      memset(o1, 0, sizeof(float) * (size_t)nv);
      a.final_state = NULL;
      assert_int_equal(rec ? rove_gla_recurrent(p, &a) : rove_gla_forward(p, &a), ROVE_OK);
      assert_memory_equal(o0, o1, sizeof(float) * (size_t)nv);
      rove_gla_plan_destroy(p);
    }
  }
  free(o0), free(o1), free(f0), free(f1);
  free_packed(&x);
}

typedef struct {
  float *dq, *dk, *dv, *dg, *ds0;
  double *da;
} grads;

static void alloc_grads(grads *g, int64_t T) {
  const int64_t nk = T * H * K, nv = T * H * V, ns = (int64_t)NS * H * K * V;
  g->dq = calloc((size_t)nk, 4), g->dk = calloc((size_t)nk, 4), g->dg = calloc((size_t)nk, 4);
  g->dv = calloc((size_t)nv, 4), g->ds0 = calloc((size_t)ns, 4);
  g->da = calloc((size_t)(T * H * (R / 2)), sizeof(double));
  assert_true(g->dq && g->dk && g->dg && g->dv && g->ds0 && g->da);
}

static void free_grads(grads *g) {
  free(g->dq), free(g->dk), free(g->dv), free(g->dg), free(g->ds0), free(g->da);
}

static rove_gla_grads grads_of(const packed *x, grads *g, int s) {
  const int64_t t0 = s < 0 ? 0 : x->cu[s], st = s < 0 ? 0 : (int64_t)s * H * K * V;
  rove_gla_grads r;
  memset(&r, 0, sizeof r);
  r.dout = x->dout + t0 * H * V, r.d_final_state = x->ds1 + st;
  r.dq = g->dq + t0 * H * K, r.dk = g->dk + t0 * H * K, r.dg = g->dg + t0 * H * K;
  r.dv = g->dv + t0 * H * V, r.d_initial_state = g->ds0 + st;
  r.d_angles = g->da + t0 * H * (R / 2);
  return r;
}

static void test_backward_equals_per_sequence(void **state) {
  (void)state;
  packed x;
  make_packed(&x, 4200);
  const int64_t nk = x.T * H * K, nv = x.T * H * V, ns = (int64_t)NS * H * K * V;
  float *out = calloc((size_t)nv, 4), *s1 = calloc((size_t)ns, 4);
  assert_true(out && s1);
  grads g0, g1;
  alloc_grads(&g0, x.T), alloc_grads(&g1, x.T);
  rove_gla_plan *p1 = plan_of(1);
  rove_gla_args pa = args_of(&x, -1, out, s1);
  assert_int_equal(rove_gla_forward(p1, &pa), ROVE_OK); /* out for ROTATE_O's d_angles */
  for (int s = 0; s < NS; s++) {
    if (LENS[s] == 0) { /* no tokens: d_initial_state is d_final_state */
      memcpy(g0.ds0 + (int64_t)s * H * K * V, x.ds1 + (int64_t)s * H * K * V,
             sizeof(float) * (size_t)(H * K * V));
      continue;
    }
    rove_gla_args a = args_of(&x, s, out, s1);
    a.final_state = NULL;
    rove_gla_grads gr = grads_of(&x, &g0, s);
    assert_int_equal(rove_gla_backward(p1, &a, &gr), ROVE_OK);
  }
  rove_gla_plan_destroy(p1);
  for (int threads = 1; threads <= 3; threads++) {
    rove_gla_plan *p = plan_of(threads);
    rove_gla_args a = pa;
    a.final_state = NULL;
    rove_gla_grads gr = grads_of(&x, &g1, -1);
    assert_int_equal(rove_gla_backward(p, &a, &gr), ROVE_OK);
    assert_memory_equal(g0.dq, g1.dq, sizeof(float) * (size_t)nk);
    assert_memory_equal(g0.dk, g1.dk, sizeof(float) * (size_t)nk);
    assert_memory_equal(g0.dg, g1.dg, sizeof(float) * (size_t)nk);
    assert_memory_equal(g0.dv, g1.dv, sizeof(float) * (size_t)nv);
    assert_memory_equal(g0.ds0, g1.ds0, sizeof(float) * (size_t)ns);
    assert_memory_equal(g0.da, g1.da, sizeof(double) * (size_t)(x.T * H * (R / 2)));
    rove_gla_plan_destroy(p);
  }
  free_grads(&g0), free_grads(&g1);
  free(out), free(s1);
  free_packed(&x);
}

/* Every element of x holds bits. */
static int all_bits(const float *x, int64_t n, uint32_t bits) {
  for (int64_t i = 0; i < n; i++)
    if (!rove_has_bits(x + i, bits)) return 0;
  return 1;
}

/* Bad cu_seqlens: INVALID_ARGUMENT, out and final_state untouched (forward, recurrence,
 * backward). */
static void test_bad_cu(void **state) {
  (void)state;
  packed x;
  make_packed(&x, 4300);
  const int64_t nv = x.T * H * V, ns = (int64_t)NS * H * K * V;
  float *out = malloc(sizeof(float) * (size_t)nv), *s1 = malloc(sizeof(float) * (size_t)ns);
  assert_true(out && s1);
  rove_gla_plan *p = plan_of(2);
  const rove_gla_args good = args_of(&x, -1, out, s1);
  int32_t cu[NS + 1];
  grads g;
  alloc_grads(&g, x.T);
  for (int c = 0; c < 9; c++) {
    rove_gla_args a = good;
    memcpy(cu, x.cu, sizeof cu);
    a.cu_seqlens = cu;
    switch (c) {
      case 0: a.batch = 2; break;                   /* packed sequences are one row */
      case 1: a.n_seqs = 0; break;                  /* no sequence */
      case 2: cu[0] = 1; break;                     /* not from 0 */
      case 3: cu[3] = cu[2] - 1; break;             /* decreasing */
      case 4: cu[NS] -= 1; break;                   /* not ending at seq_len */
      case 5: a.cu_seqlens = NULL; break;           /* n_seqs without cu_seqlens */
      case 6: a.out = (float *)(void *)cu; break;   /* out over cu_seqlens */
      case 7: a.final_state = (float *)(void *)cu; break; /* final state over it */
      case 8: a.seq_len += 1; break;                /* the row longer than the sequences */
      default: break;
    }
    rove_fill_bits(out, nv, 0x7fc0beefu), rove_fill_bits(s1, ns, 0x7fc0beefu);
    for (int fn = 0; fn < 3; fn++) {
      rove_status st;
      if (fn == 2) {
        rove_gla_grads gr = grads_of(&x, &g, -1);
        if (c == 6) gr.dq = (float *)(void *)cu, a.out = out; /* a gradient over cu_seqlens */
        if (c == 7) a.final_state = NULL, gr.dv = (float *)(void *)cu;
        rove_fill_bits(g.dq, x.T * H * K, 0x7fc0beefu);
        st = rove_gla_backward(p, &a, &gr);
        if (c != 6) assert_true(all_bits(g.dq, x.T * H * K, 0x7fc0beefu));
      } else {
        st = fn ? rove_gla_recurrent(p, &a) : rove_gla_forward(p, &a);
      }
      if (st != ROVE_ERR_INVALID_ARGUMENT) fail_msg("case %d fn %d: status %d", c, fn, (int)st);
      assert_true(all_bits(out, nv, 0x7fc0beefu) && all_bits(s1, ns, 0x7fc0beefu));
    }
  }
  free_grads(&g);
  rove_gla_plan_destroy(p);
  free(out), free(s1);
  free_packed(&x);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_forward_equals_per_sequence),
      cmocka_unit_test(test_backward_equals_per_sequence),
      cmocka_unit_test(test_bad_cu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
