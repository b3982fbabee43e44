/* SPDX-License-Identifier: MIT */
/* rove_merge_partials: attention over disjoint key sets (each its own rove_attention_forward
 * with its LSE) merged equals one call over all keys, for RoVE / RoPE / no rotation,
 * causal with parts no query sees (LSE -inf), GQA, batch 2, 1 to 5 parts, in place;
 * rows -inf in every part; NaN LSEs; bad input. rove_merge_partials_sinks: parts without
 * sinks merged with them equal one call with the sinks over all keys. Links librove.so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { B = 2, LQ = 7, LK = 61, H = 4, HKV = 2, D = 32 };

static float *alloc_f(int64_t n) {
  float *x = malloc(sizeof(float) * (size_t)n);
  assert_non_null(x);
  return x;
}

/* Attention of all queries (positions LK - LQ + i) over keys [j0, j1) of k, v (with the
 * attention sinks g_sinks when set). */
static const float *g_sinks;
static void partial(const rove_plan *p, const float *q, const float *k, const float *v, int j0,
                    int j1, float *out, float *lse) {
  const int n = j1 - j0;
  float *kp = alloc_f((int64_t)B * n * HKV * D), *vp = alloc_f((int64_t)B * n * HKV * D);
  int32_t *qpos = malloc(sizeof(int32_t) * B * LQ),
          *kpos = malloc(sizeof(int32_t) * (size_t)(B * n));
  assert_true(qpos && kpos);
  for (int b = 0; b < B; b++) {
    memcpy(kp + (int64_t)b * n * HKV * D, k + ((int64_t)b * LK + j0) * HKV * D,
           sizeof(float) * (size_t)(n * HKV * D));
    memcpy(vp + (int64_t)b * n * HKV * D, v + ((int64_t)b * LK + j0) * HKV * D,
           sizeof(float) * (size_t)(n * HKV * D));
    for (int i = 0; i < LQ; i++) qpos[b * LQ + i] = LK - LQ + i;
    for (int j = 0; j < n; j++) kpos[b * n + j] = j0 + j;
  }
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = B, a.q_len = LQ, a.kv_len = n, a.q = q, a.k = kp, a.v = vp, a.out = out;
  a.q_pos = qpos, a.kv_pos = kpos, a.lse = lse, a.sinks = g_sinks;
  assert_int_equal(rove_attention_forward(p, &a), ROVE_OK);
  free(kp), free(vp), free(qpos), free(kpos);
}

static void check_split(uint32_t rot, const int *cuts, int n_parts, uint64_t seed,
                        const float *sinks) {
  rove_attention_config c;
  rove_attention_config_init(&c, H, HKV, D);
  c.rotate = rot, c.causal = 1;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  rove_rng r;
  rove_rng_seed(&r, seed);
  const int64_t nq = (int64_t)B * LQ * H * D, nk = (int64_t)B * LK * HKV * D, nl = B * H * LQ;
  float *q = alloc_f(nq), *k = alloc_f(nk), *v = alloc_f(nk);
  rove_rng_fill(&r, q, nq, -2, 2), rove_rng_fill(&r, k, nk, -2, 2), rove_rng_fill(&r, v, nk, -1, 1);
  float *want = alloc_f(nq), *wlse = alloc_f(nl);
  g_sinks = sinks; /* the truth: one call with the sinks; the parts: without */
  partial(p, q, k, v, 0, LK, want, wlse);
  g_sinks = NULL;
  float *outs[8], *lses[8];
  for (int i = 0; i < n_parts; i++) {
    outs[i] = alloc_f(nq), lses[i] = alloc_f(nl);
    partial(p, q, k, v, cuts[i], cuts[i + 1], outs[i], lses[i]);
  }
  float *got = alloc_f(nq), *glse = alloc_f(nl);
  assert_int_equal(sinks ? rove_merge_partials_sinks(n_parts, (const float *const *)outs,
                                                     (const float *const *)lses, B, LQ, H, D,
                                                     sinks, got, glse)
                         : rove_merge_partials(n_parts, (const float *const *)outs,
                                               (const float *const *)lses, B, LQ, H, D, got, glse),
                   ROVE_OK);
  const double e = rove_max_rel_err_ff(got, want, nq);
  double el = 0;
  for (int64_t i = 0; i < nl; i++)
    el = fmax(el, wlse[i] == -INFINITY ? (glse[i] == -INFINITY ? 0 : INFINITY)
                                       : fabs((double)glse[i] - wlse[i]));
  print_message("  rot 0x%x, %d parts%s: out err %.2g, lse err %.2g\n", rot, n_parts,
                sinks ? " (sinks)" : "", e, el);
  assert_true(e < 2e-6 && el < 2e-5);
  /* in place into part 0: the same bits */
  assert_int_equal(rove_merge_partials_sinks(n_parts, (const float *const *)outs,
                                             (const float *const *)lses, B, LQ, H, D, sinks,
                                             outs[0], lses[0]),
                   ROVE_OK);
  assert_memory_equal(outs[0], got, sizeof(float) * (size_t)nq);
  assert_memory_equal(lses[0], glse, sizeof(float) * (size_t)nl);
  for (int i = 0; i < n_parts; i++) free(outs[i]), free(lses[i]);
  free(q), free(k), free(v), free(want), free(wlse), free(got), free(glse);
  rove_plan_destroy(p);
}

static void test_splits(void **state) {
  (void)state;
  static const int one[] = {0, LK}, two[] = {0, 30, LK}, three[] = {0, 1, 40, LK};
  static const int late[] = {0, 50, 57, LK}; /* [57, 61): later than the first queries */
  static const int five[] = {0, 9, 10, 33, 55, LK};
  static const uint32_t rots[] = {ROVE_ROTATE_ROVE, ROVE_ROTATE_ROPE, 0};
  static const float sinks[H] = {0.5f, -2.0f, 3.0f, 40.0f}; /* the last outweighs all */
  for (int ri = 0; ri < 3; ri++) {
    check_split(rots[ri], one, 1, 1 + ri, NULL);
    check_split(rots[ri], two, 2, 10 + ri, NULL);
    check_split(rots[ri], three, 3, 20 + ri, NULL);
    check_split(rots[ri], late, 3, 30 + ri, NULL);
    check_split(rots[ri], five, 5, 40 + ri, NULL);
    check_split(rots[ri], one, 1, 50 + ri, sinks);
    check_split(rots[ri], late, 3, 60 + ri, sinks); /* parts no query sees: -inf */
    check_split(rots[ri], five, 5, 70 + ri, sinks);
  }
}

/* Hand-made rows: every part -inf (0 and -inf, whatever the rows hold), a NaN LSE, a
 * part with garbage under -inf. */
static void test_special_rows(void **state) {
  (void)state;
  float o0[2 * 4], o1[2 * 4], l0[2], l1[2], out[2 * 4], lse[2];
  for (int i = 0; i < 8; i++) o0[i] = NAN, o1[i] = (float)i;
  l0[0] = -INFINITY, l1[0] = -INFINITY; /* row 0: nothing visible anywhere */
  l0[1] = -INFINITY, l1[1] = 0.5f;      /* row 1: only part 1 (part 0 holds NaN) */
  const float *outs[2] = {o0, o1}, *lses[2] = {l0, l1};
  /* batch 1, q_len 2, 1 head, d 4: row r's output at r * 4 */
  assert_int_equal(rove_merge_partials(2, outs, lses, 1, 2, 1, 4, out, lse), ROVE_OK);
  for (int c = 0; c < 4; c++) assert_true(out[c] == 0.0f && out[4 + c] == o1[4 + c]);
  assert_true(lse[0] == -INFINITY && lse[1] == 0.5f);
  const float sink = 1.25f; /* with a sink: row 0 gets 0 and LSE = the sink, row 1 */
  assert_int_equal(rove_merge_partials_sinks(2, outs, lses, 1, 2, 1, 4, &sink, out, lse), ROVE_OK);
  const double w = 1.0 / (1.0 + exp(1.25 - 0.5)); /* part 1's share beside the sink */
  for (int c = 0; c < 4; c++)
    assert_true(out[c] == 0.0f && fabs(out[4 + c] - w * o1[4 + c]) < 1e-6);
  assert_true(lse[0] == 1.25f && fabs(lse[1] - (1.25 + log(1.0 + exp(0.5 - 1.25)))) < 1e-6);
  l1[1] = NAN;
  assert_int_equal(rove_merge_partials(2, outs, lses, 1, 2, 1, 4, out, NULL), ROVE_OK);
  for (int c = 0; c < 4; c++) assert_true(isnan(out[4 + c]));
  assert_int_equal(rove_merge_partials_sinks(2, outs, lses, 1, 2, 1, 4, &sink, out, NULL), ROVE_OK);
  for (int c = 0; c < 4; c++) assert_true(isnan(out[4 + c]));
}

static void test_bad_input(void **state) {
  (void)state;
  float o0[8], o1[8], l0[2], l1[2], out[8], lse[2] = {7.0f, 7.0f};
  for (int i = 0; i < 8; i++) o0[i] = o1[i] = 1.0f, out[i] = 7.0f;
  l0[0] = l0[1] = l1[0] = l1[1] = 0.0f;
  const float *outs[2] = {o0, o1}, *lses[2] = {l0, l1}, *bad[2] = {o0, NULL};
  const rove_status inv = ROVE_ERR_INVALID_ARGUMENT;
  assert_int_equal(rove_merge_partials(0, outs, lses, 1, 2, 1, 4, out, lse), inv);
  assert_int_equal(rove_merge_partials(2, NULL, lses, 1, 2, 1, 4, out, lse), inv);
  assert_int_equal(rove_merge_partials(2, bad, lses, 1, 2, 1, 4, out, lse), inv);
  assert_int_equal(rove_merge_partials(2, outs, lses, 0, 2, 1, 4, out, lse), inv);
  assert_int_equal(rove_merge_partials(2, outs, lses, 1, 2, 1, ROVE_MAX_HEAD_DIM + 1, out, lse),
                   inv);
  assert_int_equal(rove_merge_partials(2, outs, lses, 1, 2, 1, 4, NULL, lse), inv);
  assert_int_equal(rove_merge_partials(2, outs, lses, 1, 2, 1, 4, o1, lse), inv); /* not part 0 */
  assert_int_equal(rove_merge_partials(2, outs, lses, 1, 2, 1, 4, out, l1), inv);
  assert_int_equal(rove_merge_partials(2, outs, lses, 1, 2, 1, 4, out, (float *)o0), inv);
  assert_int_equal(rove_merge_partials(2, outs, lses, INT32_MAX, INT32_MAX, INT32_MAX, 4, out, lse),
                   ROVE_ERR_SIZE_OVERFLOW);
  { /* the pointer arrays inside out or lse (read again for every row): refused */
    union {
      float f[16];
      const float *p[4];
    } u;
    u.p[0] = o0, u.p[1] = o1;
    assert_int_equal(rove_merge_partials(2, u.p, lses, 1, 2, 1, 4, u.f, lse), inv);
    u.p[0] = l0, u.p[1] = l1;
    assert_int_equal(rove_merge_partials(2, outs, u.p, 1, 2, 1, 4, out, u.f), inv);
    assert_true(u.p[0] == l0 && u.p[1] == l1);
  }
  const float nan_sink = NAN, inf_sink = -INFINITY; /* sinks: finite, no output over them */
  assert_int_equal(rove_merge_partials_sinks(2, outs, lses, 1, 2, 1, 4, &nan_sink, out, lse), inv);
  assert_int_equal(rove_merge_partials_sinks(2, outs, lses, 1, 2, 1, 4, &inf_sink, out, lse), inv);
  assert_int_equal(rove_merge_partials_sinks(2, outs, lses, 1, 2, 1, 4, out + 3, out, lse), inv);
  assert_int_equal(rove_merge_partials_sinks(2, outs, lses, 1, 2, 1, 4, lse + 1, out, lse), inv);
  for (int i = 0; i < 8; i++) assert_true(out[i] == 7.0f);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_splits),
                                     cmocka_unit_test(test_special_rows),
                                     cmocka_unit_test(test_bad_input)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
