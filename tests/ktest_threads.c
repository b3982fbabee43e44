/* SPDX-License-Identifier: MIT */
/* The thread pool's loops (src/threads.c) directly, through the static rove_internal: not
 * per ISA (a plain cmocka suite). Every schedule runs each index exactly once, on tids
 * below rove_team_size, for task counts around the team size and the blocked schedule's
 * limit; rove_parallel_each runs once per team member with distinct tids; a loop started
 * from inside a body runs on that body's thread alone. The public behaviour (fork,
 * dlclose, limits) is tests/test_thread_pool.c and test_thread_limits.c. */
#define _DEFAULT_SOURCE /* usleep */
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
/* testutil.h first: cmocka needs its standard headers before it */
#include "util.h"

typedef struct count_ctx {
  int *hits;     /* [n]: times index i ran (atomic adds) */
  int team;      /* rove_team_size of the call: every tid below it */
  int bad_tid;   /* atomic: a tid at or above team was seen */
  int tid_seen[ROVE_MAX_THREADS]; /* atomic */
} count_ctx;

static void count_body(int64_t i, int tid, void *vctx) {
  count_ctx *c = vctx;
  __atomic_add_fetch(&c->hits[i], 1, __ATOMIC_RELAXED);
  if (tid < 0 || tid >= c->team) __atomic_store_n(&c->bad_tid, 1, __ATOMIC_RELAXED);
  else __atomic_store_n(&c->tid_seen[tid], 1, __ATOMIC_RELAXED);
}

static void check_loop(int blocked, int32_t threads, int64_t n) {
  count_ctx *c = calloc(1, sizeof *c);
  assert_non_null(c);
  c->hits = calloc((size_t)(n > 0 ? n : 1), sizeof(int));
  assert_non_null(c->hits);
  c->team = rove_team_size(threads, n);
  if (blocked) rove_parallel_for_blocked(threads, n, count_body, c);
  else rove_parallel_for(threads, n, count_body, c);
  for (int64_t i = 0; i < n; i++)
    if (c->hits[i] != 1)
      fail_msg("%s, %d threads, n %lld: index %lld ran %d times", blocked ? "blocked" : "dynamic",
               threads, (long long)n, (long long)i, c->hits[i]);
  if (c->bad_tid) fail_msg("a tid at or above the team size %d", c->team);
  free(c->hits);
  free(c);
}

static void test_every_index_once(void **state) {
  (void)state;
  const int32_t threads[] = {1, 2, 3, 4, 8, 63, 64, 65, 200};
  const int64_t ns[] = {0, 1, 2, 3, 7, 64, 65, 1000};
  for (int rep = 0; rep < 3; rep++)
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++)
      for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        check_loop(0, threads[t], ns[k]);
        check_loop(1, threads[t], ns[k]);
      }
}

typedef struct each_ctx {
  int calls;     /* atomic */
  int seen[ROVE_MAX_THREADS];
  int bad;       /* atomic: i != tid, or a tid ran twice */
} each_ctx;

static void each_body(int64_t i, int tid, void *vctx) {
  each_ctx *c = vctx;
  if (i != tid || __atomic_fetch_add(&c->seen[tid], 1, __ATOMIC_RELAXED) != 0)
    __atomic_store_n(&c->bad, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&c->calls, 1, __ATOMIC_RELAXED);
}

static void test_each_once_per_member(void **state) {
  (void)state;
  const int32_t threads[] = {1, 2, 3, 5, 16};
  for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
    each_ctx *c = calloc(1, sizeof *c);
    assert_non_null(c);
    rove_parallel_each(threads[t], each_body, c);
    if (c->bad) fail_msg("%d threads: a body ran with i != tid or twice on a tid", threads[t]);
    /* the team may be smaller than asked (threads that could not be made), never larger,
     * and its tids are 0 .. calls - 1 */
    if (c->calls < 1 || c->calls > rove_team_size(threads[t], threads[t]))
      fail_msg("%d threads: %d calls", threads[t], c->calls);
    for (int i = 0; i < c->calls; i++) assert_int_equal(c->seen[i], 1);
    free(c);
  }
}

/* A loop inside a body runs on the body's thread: every inner tid is 0. */
typedef struct nest_ctx {
  int inner_nonzero_tid; /* atomic */
  int inner_hits;        /* atomic */
} nest_ctx;

static void inner_body(int64_t i, int tid, void *vctx) {
  (void)i;
  nest_ctx *c = vctx;
  usleep(200); /* long enough that a team's workers, were there one, would take indices */
  if (tid != 0) __atomic_store_n(&c->inner_nonzero_tid, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&c->inner_hits, 1, __ATOMIC_RELAXED);
}

static void outer_body(int64_t i, int tid, void *vctx) {
  (void)i, (void)tid;
  rove_parallel_for(4, 10, inner_body, vctx);
}

static void test_nested_runs_alone(void **state) {
  (void)state;
  nest_ctx c = {0, 0};
  rove_parallel_for(4, 8, outer_body, &c);
  assert_int_equal(c.inner_hits, 80);
  assert_int_equal(c.inner_nonzero_tid, 0);
  /* also when the outer job runs without a team: one thread, one index, each on one */
  nest_ctx d = {0, 0};
  rove_parallel_for(1, 8, outer_body, &d);
  rove_parallel_for(4, 1, outer_body, &d);
  rove_parallel_for_blocked(1, 3, outer_body, &d);
  rove_parallel_each(1, outer_body, &d);
  assert_int_equal(d.inner_hits, 130);
  assert_int_equal(d.inner_nonzero_tid, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_index_once),
      cmocka_unit_test(test_each_once_per_member),
      cmocka_unit_test(test_nested_runs_alone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
