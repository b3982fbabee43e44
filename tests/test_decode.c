/* Decode-shaped attention: one or a few query tiles against long key sequences, where the
 * driver streams K/V tiles and splits the keys across tasks, merging the parts by their
 * LSE (src/attention_decode.c). Checked against the oracle, and bit for bit across
 * thread counts. Links the public librove.so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rove_oracle.h"
#include "testutil.h"

typedef struct {
  int H, Hkv, d, q_len, kv_len, causal, window, threads;
  uint32_t rotate;
  int explicit_pos; /* 1: shuffled key positions, queries at scattered positions */
} dcase;

typedef struct {
  rove_attention_config cfg;
  rove_attention_args a;
  float *q, *k, *v, *out, *lse;
  int32_t *qpos, *kpos;
} dproblem;

static void make_problem(dproblem *pr, const dcase *c, uint64_t seed) {
  memset(pr, 0, sizeof *pr);
  rove_rng rng;
  rove_rng_seed(&rng, seed);
  rove_attention_config_init(&pr->cfg, c->H, c->Hkv, c->d);
  pr->cfg.rotate = c->rotate;
  pr->cfg.causal = c->causal;
  pr->cfg.window = c->window;
  pr->cfg.n_threads = c->threads;
  const int64_t nq = (int64_t)c->q_len * c->H * c->d, nk = (int64_t)c->kv_len * c->Hkv * c->d;
  pr->q = malloc(sizeof(float) * nq);
  pr->k = malloc(sizeof(float) * nk);
  pr->v = malloc(sizeof(float) * nk);
  pr->out = malloc(sizeof(float) * nq);
  pr->lse = malloc(sizeof(float) * c->q_len * c->H);
  assert_true(pr->q && pr->k && pr->v && pr->out && pr->lse);
  rove_rng_fill(&rng, pr->q, nq, -2.0f, 2.0f);
  rove_rng_fill(&rng, pr->k, nk, -2.0f, 2.0f);
  rove_rng_fill(&rng, pr->v, nk, -1.0f, 1.0f);
  pr->a = (rove_attention_args){.batch = 1, .q_len = c->q_len, .kv_len = c->kv_len, .q = pr->q,
                                .k = pr->k, .v = pr->v, .out = pr->out, .lse = pr->lse};
  if (c->explicit_pos) {
    pr->kpos = malloc(sizeof(int32_t) * c->kv_len);
    pr->qpos = malloc(sizeof(int32_t) * c->q_len);
    assert_true(pr->kpos && pr->qpos);
    for (int j = 0; j < c->kv_len; j++) pr->kpos[j] = 1000 + 3 * j;
    for (int j = c->kv_len - 1; j > 0; j--) { /* shuffle */
      int r = (int)(rove_rng_u64(&rng) % (uint64_t)(j + 1));
      int32_t t = pr->kpos[j];
      pr->kpos[j] = pr->kpos[r];
      pr->kpos[r] = t;
    }
    for (int i = 0; i < c->q_len; i++) pr->qpos[i] = 1000 + (int32_t)(rove_rng_u64(&rng) % (uint64_t)(3 * c->kv_len));
    pr->qpos[0] = 0; /* sees no key when causal: output 0, LSE -inf */
    pr->a.q_pos = pr->qpos;
    pr->a.kv_pos = pr->kpos;
  }
}

static void free_problem(dproblem *pr) {
  free(pr->q), free(pr->k), free(pr->v), free(pr->out), free(pr->lse), free(pr->qpos), free(pr->kpos);
}

static void run(const dproblem *pr) {
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&pr->cfg, &p), ROVE_OK);
  assert_int_equal(rove_attention_forward(p, &pr->a), ROVE_OK);
  rove_plan_destroy(p);
}

static void check_against_oracle(const dcase *c) {
  dproblem pr;
  make_problem(&pr, c, 1234 + (uint64_t)c->kv_len);
  run(&pr);
  const int64_t n = (int64_t)c->q_len * c->H * c->d;
  double *ref = malloc(sizeof(double) * n), *lse = malloc(sizeof(double) * c->q_len * c->H);
  double inv_freq[ROVE_MAX_HEAD_DIM / 2], m;
  assert_int_equal(rove_rope_inv_freq(&pr.cfg.rope, c->d, inv_freq, &m), ROVE_OK);
  assert_int_equal(rove_oracle_attention(&pr.cfg, inv_freq, m, &pr.a, ref, lse), 0);
  double err = rove_max_rel_err_fd(pr.out, ref, n);
  print_message("  H=%d Hkv=%d d=%d q=%d kv=%d causal=%d window=%d pos=%d: max rel err %.3g\n", c->H,
                c->Hkv, c->d, c->q_len, c->kv_len, c->causal, c->window, c->explicit_pos, err);
  assert_true(err <= 2e-5);
  for (int i = 0; i < c->q_len * c->H; i++) {
    if (isinf(lse[i])) {
      assert_true(isinf(pr.lse[i]) && pr.lse[i] < 0);
    } else {
      assert_true(fabs(pr.lse[i] - lse[i]) <= 2e-5 * fmax(1.0, fabs(lse[i])));
    }
  }
  free(ref), free(lse);
  free_problem(&pr);
}

static void test_decode_vs_oracle(void **state) {
  (void)state;
  const dcase cases[] = {
      {12, 12, 64, 1, 4096, 1, 0, 0, ROVE_ROTATE_ROVE, 0},  /* split keys, one query */
      {12, 12, 64, 1, 4096, 1, 0, 0, ROVE_ROTATE_ROPE, 0},
      {8, 2, 128, 4, 3000, 1, 0, 0, ROVE_ROTATE_ROVE, 0},   /* GQA group shares K/V tiles */
      {4, 1, 64, 3, 2500, 1, 300, 0, ROVE_ROTATE_ROVE, 0},  /* MQA; most splits masked */
      {6, 3, 32, 5, 2049, 0, 0, 0, ROVE_ROTATE_ROVE, 1},    /* unsorted positions */
      {6, 3, 32, 5, 2049, 1, 700, 0, ROVE_ROTATE_ROVE, 1},  /* masked query, window */
      {2, 2, 64, 40, 2048, 1, 0, 0, ROVE_ROTATE_ROVE, 0},   /* two query tiles, split keys */
      {2, 1, 80, 1, 1, 1, 0, 0, ROVE_ROTATE_ROVE, 0},       /* a single key */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_against_oracle(&cases[i]);
}

static void test_decode_threads_bitwise(void **state) {
  (void)state;
  const dcase shapes[] = {{12, 12, 64, 1, 4096, 1, 0, 1, ROVE_ROTATE_ROVE, 0},
                          {8, 2, 64, 40, 2048, 1, 0, 1, ROVE_ROTATE_ROVE, 0},
                          {6, 3, 32, 5, 2049, 1, 700, 1, ROVE_ROTATE_ROVE, 1}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    dcase c = shapes[s];
    dproblem one;
    make_problem(&one, &c, 99);
    run(&one);
    for (int t = 2; t <= 3; t++) {
      c.threads = t;
      dproblem more;
      make_problem(&more, &c, 99);
      run(&more);
      const size_t n = (size_t)c.q_len * (size_t)c.H;
      assert_memory_equal(one.out, more.out, n * (size_t)c.d * sizeof(float));
      assert_memory_equal(one.lse, more.lse, n * sizeof(float));
      free_problem(&more);
    }
    free_problem(&one);
  }
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode_vs_oracle),
      cmocka_unit_test(test_decode_threads_bitwise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
