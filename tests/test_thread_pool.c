/* SPDX-License-Identifier: MIT */
/* librove's own thread pool (src/threads.c), through the public API: every threaded call
 * must give the bits of a one-thread call, whatever the team, after a fork, across
 * dlclose/dlopen, with more threads than CPUs, and in many small calls back to back (the
 * pool's spin and sleep paths; ctest also runs this suite with ROVE_SPIN_US=0).
 * rove_default_threads follows OMP_NUM_THREADS as libgomp reads it. (Thread creation
 * under resource limits: test_thread_limits.c; concurrent calls on one plan:
 * test_properties.c.) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

enum { H = 8, D = 16, N = 300 };
#define ELEMS ((size_t)N * H * D)

typedef struct data {
  float q[ELEMS], k[ELEMS], v[ELEMS], ref[ELEMS], out[ELEMS];
} data;

static data *make_data(void) {
  data *x = malloc(sizeof *x);
  assert_non_null(x);
  rove_rng r;
  rove_rng_seed(&r, 77);
  rove_rng_fill(&r, x->q, (int64_t)ELEMS, -1, 1);
  rove_rng_fill(&r, x->k, (int64_t)ELEMS, -1, 1);
  rove_rng_fill(&r, x->v, (int64_t)ELEMS, -1, 1);
  return x;
}

static rove_attention_args args_of(data *x, float *out) {
  rove_attention_args a = {0};
  a.batch = 1, a.q_len = N, a.kv_len = N, a.q = x->q, a.k = x->k, a.v = x->v, a.out = out;
  return a;
}

static rove_plan *plan_of(int32_t threads) {
  rove_attention_config c;
  rove_attention_config_init(&c, H, H, D);
  c.n_threads = threads;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  return p;
}

/* x->ref = the one-thread forward */
static void reference(data *x) {
  rove_plan *p = plan_of(1);
  rove_attention_args a = args_of(x, x->ref);
  assert_int_equal(rove_attention_forward(p, &a), ROVE_OK);
  rove_plan_destroy(p);
}

/* A forward on `threads` threads equals the reference, bitwise; 0 when it does. */
static int threaded_matches(data *x, int32_t threads) {
  rove_attention_config c;
  rove_attention_config_init(&c, H, H, D);
  c.n_threads = threads;
  rove_plan *p = NULL;
  if (rove_plan_create(&c, &p) != ROVE_OK) return 1;
  memset(x->out, 0, sizeof x->out);
  rove_attention_args a = args_of(x, x->out);
  const rove_status st = rove_attention_forward(p, &a);
  rove_plan_destroy(p);
  if (st != ROVE_OK) return 2;
  return memcmp(x->out, x->ref, sizeof x->ref) != 0 ? 3 : 0;
}

static void test_team_sizes(void **state) {
  (void)state;
  data *x = make_data();
  reference(x);
  /* 64 is more threads than this machine's CPUs: the pool then never spins */
  const int32_t teams[] = {2, 3, 2, 7, 64, 2};
  for (size_t i = 0; i < sizeof teams / sizeof teams[0]; i++)
    assert_int_equal(threaded_matches(x, teams[i]), 0);
  free(x);
}

/* Many small calls back to back: one-token decode steps on a 2-thread cache. */
static void test_small_calls_back_to_back(void **state) {
  (void)state;
  rove_attention_config c;
  rove_attention_config_init(&c, H, H, D);
  float kv[2 * H * D], q[H * D], o1[H * D], o2[H * D];
  rove_rng r;
  rove_rng_seed(&r, 5);
  rove_kv_cache *cache[2] = {NULL, NULL};
  rove_plan *p[2] = {NULL, NULL}; /* a cache borrows its plan */
  for (int m = 0; m < 2; m++) {
    c.n_threads = m ? 2 : 1;
    assert_int_equal(rove_plan_create(&c, &p[m]), ROVE_OK);
    assert_int_equal(rove_kv_cache_create(p[m], 1, 512, &cache[m]), ROVE_OK);
  }
  for (int t = 0; t < 400; t++) {
    rove_rng_fill(&r, kv, 2 * H * D, -1, 1);
    rove_rng_fill(&r, q, H * D, -1, 1);
    for (int m = 0; m < 2; m++) {
      assert_int_equal(rove_kv_cache_append(cache[m], 1, kv, 0, kv + H * D, 0, NULL), ROVE_OK);
      rove_attention_args a = {0};
      a.batch = 1, a.q_len = 1, a.q = q, a.out = m ? o2 : o1;
      assert_int_equal(rove_kv_cache_attention(cache[m], &a), ROVE_OK);
    }
    assert_memory_equal(o1, o2, sizeof o1);
    if (t % 97 == 0) usleep(2000); /* past the spin: the workers sleep, then wake */
  }
  for (int m = 0; m < 2; m++) rove_kv_cache_destroy(cache[m]), rove_plan_destroy(p[m]);
}

/* After fork the child has only the forking thread: its threaded calls must work (the
 * pool is made anew) and give the same bits; the parent's pool goes on working. */
static void test_fork(void **state) {
  (void)state;
  data *x = make_data();
  reference(x);
  assert_int_equal(threaded_matches(x, 2), 0); /* the parent has a pool with a worker */
  fflush(NULL);
  const pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int rc = threaded_matches(x, 2);
    if (!rc) rc = threaded_matches(x, 4) ? 4 : 0;
    _exit(rc);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  assert_int_equal(threaded_matches(x, 2), 0);
  free(x);
}

#ifdef ROVE_TEST_LIB_COPY
/* Whether a file of this path is mapped in this process (/proc/self/maps). */
static int mapped(const char *path) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return 0;
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, path) != NULL;
  fclose(f);
  return found;
}

/* Threads of this process (/proc/self/status). */
static int thread_count(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int n = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Threads: %d", &n) == 1) break;
  fclose(f);
  return n;
}
#endif

/* dlclose stops and joins the pool's workers (none may run unloaded code), and a library
 * loaded again works. Uses its own copy of librove.so (RTLD_LOCAL: not the one this test
 * links, which stays loaded). */
static void test_dlclose(void **state) {
  (void)state;
#ifdef ROVE_TEST_LIB_COPY
  data *x = make_data();
  reference(x);
  const int threads_before = thread_count();
  for (int round = 0; round < 2; round++) {
    void *h = dlopen(ROVE_TEST_LIB_COPY, RTLD_NOW | RTLD_LOCAL);
    if (!h) fail_msg("dlopen %s: %s", ROVE_TEST_LIB_COPY, dlerror());
    rove_status (*cfg_create)(const rove_attention_config *, rove_plan **);
    rove_status (*fwd)(const rove_plan *, const rove_attention_args *);
    void (*destroy)(rove_plan *);
    void (*cfg_init)(rove_attention_config *, int32_t, int32_t, int32_t);
    *(void **)&cfg_create = dlsym(h, "rove_plan_create");
    *(void **)&fwd = dlsym(h, "rove_attention_forward");
    *(void **)&destroy = dlsym(h, "rove_plan_destroy");
    *(void **)&cfg_init = dlsym(h, "rove_attention_config_init");
    assert_true(cfg_create && fwd && destroy && cfg_init);
    rove_attention_config c;
    cfg_init(&c, H, H, D);
    c.n_threads = 2;
    rove_plan *p = NULL;
    assert_int_equal(cfg_create(&c, &p), ROVE_OK);
    memset(x->out, 0, sizeof x->out);
    rove_attention_args a = args_of(x, x->out);
    assert_int_equal(fwd(p, &a), ROVE_OK);
    destroy(p);
    assert_memory_equal(x->out, x->ref, sizeof x->ref);
    assert_int_equal(dlclose(h), 0);
    /* It is gone (it would not be if something in it kept it loaded). */
    if (mapped(ROVE_TEST_LIB_COPY)) fail_msg("%s still mapped after dlclose", ROVE_TEST_LIB_COPY);
    /* and its pool's worker was joined (a thread left in unmapped code crashes on waking) */
    assert_int_equal(thread_count(), threads_before);
  }
  free(x);
#else
  skip();
#endif
}

/* The layer's projections run as column slices on the pool (src/layer.c), one slice per
 * thread. OpenBLAS's sgemm rounds differently for different column partitions (so the
 * layer was never bitwise across thread counts, with OpenBLAS's own threads either): every
 * thread count agrees with one thread to float rounding, for a prefill and for cached
 * decode steps (sgemv slices), and repeats its own bits exactly. */
static void assert_close(const float *a, const float *b, size_t n) {
  const double err = rove_max_rel_err_ff(a, b, (int64_t)n);
  if (!(err <= 1e-5)) fail_msg("max relative error %g against one thread", err);
}

static void test_layer_threads(void **state) {
  (void)state;
  enum { DM = 320, LH = 5, LD = 64, LN = 96 }; /* 5 slices of 64 columns at most */
  rove_rng r;
  rove_rng_seed(&r, 9);
  const size_t nw = (size_t)LH * LD * DM;
  float *w = malloc(4 * nw * sizeof(float)), *x = malloc((size_t)LN * DM * sizeof(float));
  float *y1 = malloc((size_t)LN * DM * sizeof(float)), *y = malloc((size_t)LN * DM * sizeof(float));
  float *b = malloc(3 * (size_t)LH * LD * sizeof(float));
  assert_true(w && x && y1 && y && b);
  rove_rng_fill(&r, w, (int64_t)(4 * nw), -0.1f, 0.1f);
  rove_rng_fill(&r, x, (int64_t)LN * DM, -1, 1);
  rove_rng_fill(&r, b, 3 * LH * LD, -0.1f, 0.1f);
  const rove_layer_weights lw = {.d_model = DM, .wq = w, .wk = w + nw, .wv = w + 2 * nw,
                                 .wo = w + 3 * nw, .bq = b, .bk = b + LH * LD, .bv = b + 2 * LH * LD};
  const int32_t teams[] = {1, 2, 3, 4, 7};
  for (size_t t = 0; t < sizeof teams / sizeof teams[0]; t++) {
    rove_attention_config c;
    rove_attention_config_init(&c, LH, LH, LD);
    c.n_threads = teams[t];
    rove_plan *p = NULL;
    rove_layer *l = NULL;
    rove_kv_cache *kv = NULL;
    assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
    assert_int_equal(rove_layer_create(p, &lw, &l), ROVE_OK);
    float *out = t == 0 ? y1 : y;
    assert_int_equal(rove_layer_forward(l, 1, LN, x, NULL, out), ROVE_OK);
    if (t) assert_close(y, y1, (size_t)LN * DM);
    float *again = malloc((size_t)LN * DM * sizeof(float));
    assert_non_null(again);
    assert_int_equal(rove_layer_forward(l, 1, LN, x, NULL, again), ROVE_OK);
    assert_memory_equal(again, out, (size_t)LN * DM * sizeof(float));
    free(again);
    /* cached: a prompt of LN - 8 tokens, then 8 one-token steps (sgemv slices) */
    assert_int_equal(rove_kv_cache_create(p, 1, LN, &kv), ROVE_OK);
    assert_int_equal(rove_layer_forward_cached(l, kv, LN - 8, x, NULL, out), ROVE_OK);
    for (int s = 0; s < 8; s++)
      assert_int_equal(rove_layer_forward_cached(l, kv, 1, x + (LN - 8 + s) * DM, NULL,
                                                 out + (LN - 8 + s) * DM), ROVE_OK);
    if (t) assert_close(y, y1, (size_t)LN * DM);
    rove_kv_cache_destroy(kv);
    rove_layer_destroy(l);
    rove_plan_destroy(p);
  }
  free(w), free(x), free(y1), free(y), free(b);
}

/* pthread_cancel of a thread whose threaded call waits for its team (a team larger than
 * the CPUs: the caller sleeps on a condition variable, a cancellation point): the call
 * completes first (librove's calls are not cancellation points), the thread ends at its
 * next one, and the pool serves the next calls. Before the fix the caller's stack, which
 * holds the job, unwound under the running workers, and the next thread, on that reused
 * stack, overwrote it: a worker crashed (4 runs in 5 in review) or results went wrong. */
enum { CN = 1536, CH = 8, CD = 64 };
typedef struct cancel_ctx {
  rove_plan *plan;
  rove_attention_args a;
  int calls; /* atomic */
} cancel_ctx;

static void *cancelled_loop(void *arg) {
  cancel_ctx *c = arg;
  for (;;) {
    if (rove_attention_forward(c->plan, &c->a) != ROVE_OK) return NULL;
    __atomic_add_fetch(&c->calls, 1, __ATOMIC_RELAXED);
    pthread_testcancel();
  }
}

static void test_cancel_during_a_call(void **state) {
  (void)state;
  const size_t n = (size_t)CN * CH * CD;
  float *q = malloc(4 * n), *k = malloc(4 * n), *v = malloc(4 * n), *ref = malloc(4 * n);
  float *out = malloc(4 * n);
  assert_true(q && k && v && ref && out);
  rove_rng r;
  rove_rng_seed(&r, 78);
  rove_rng_fill(&r, q, (int64_t)n, -1, 1);
  rove_rng_fill(&r, k, (int64_t)n, -1, 1);
  rove_rng_fill(&r, v, (int64_t)n, -1, 1);
  rove_attention_config cfg;
  rove_attention_config_init(&cfg, CH, CH, CD);
  cfg.n_threads = 1;
  rove_plan *one = NULL;
  assert_int_equal(rove_plan_create(&cfg, &one), ROVE_OK);
  rove_attention_args a = {.batch = 1, .q_len = CN, .kv_len = CN, .q = q, .k = k, .v = v,
                           .out = ref};
  assert_int_equal(rove_attention_forward(one, &a), ROVE_OK);
  rove_plan_destroy(one);
  cfg.n_threads = 64; /* more than the CPUs: the caller sleeps while its team works */
  a.out = out;
  for (int round = 0; round < 3; round++) {
    cancel_ctx c = {NULL, a, 0};
    assert_int_equal(rove_plan_create(&cfg, &c.plan), ROVE_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cancelled_loop, &c), 0);
    while (__atomic_load_n(&c.calls, __ATOMIC_RELAXED) < 1) usleep(1000);
    usleep(5000); /* inside the next call */
    assert_int_equal(pthread_cancel(t), 0);
    void *ret = NULL;
    assert_int_equal(pthread_join(t, &ret), 0);
    assert_true(ret == PTHREAD_CANCELED);
    assert_memory_equal(out, ref, 4 * n); /* the last call was whole */
    rove_plan_destroy(c.plan);
  }
  free(q), free(k), free(v), free(ref), free(out);
}

static void test_default_threads_env(void **state) {
  (void)state;
  const char *old = getenv("OMP_NUM_THREADS");
  char *saved = old ? strdup(old) : NULL;
  unsetenv("OMP_NUM_THREADS");
  const int32_t cpus = rove_default_threads();
  assert_true(cpus >= 1 && cpus <= ROVE_MAX_THREADS);
#ifdef ROVE_TEST_NO_THREADS
  assert_int_equal(cpus, 1);
#endif
  const struct {
    const char *s;
    int32_t want; /* 0: the CPU count */
  } cases[] = {{"3", 3},     {" 5 ", 5},  {"3,2", 3},    {"1", 1},     {"0", 0},
               {"-2", 0},    {"abc", 0},  {"4x", 0},     {"", 0},      {"+3", 3},
               {"3, 2", 3},  {"3 ,2", 3}, {" 3,", 0},    {"3,abc", 0}, {"3,0", 0},
               {"+ 3", 0},   {"3,2,", 0}, {"99999999999999", ROVE_MAX_THREADS}};
  /* (the answers of libgomp's omp_get_max_threads, 0 = its default) */
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    setenv("OMP_NUM_THREADS", cases[i].s, 1);
#ifdef ROVE_TEST_NO_THREADS
    const int32_t want = 1; /* a ROVE_ENABLE_THREADS=OFF build runs one thread */
#else
    const int32_t want = cases[i].want ? cases[i].want : cpus;
#endif
    if (rove_default_threads() != want)
      fail_msg("OMP_NUM_THREADS=\"%s\": %d threads, expected %d", cases[i].s,
               rove_default_threads(), want);
  }
  if (saved) setenv("OMP_NUM_THREADS", saved, 1);
  else unsetenv("OMP_NUM_THREADS");
  free(saved);
}

/* `test_thread_pool fork` runs the fork case alone (ctest: test_thread_pool.fork). Under
 * qemu-user (ROVE_TEST_NO_FORK_THREADS=1, set by tests/CMakeLists.txt when cross-built)
 * it is skipped (77): the emulator asserts when a child forked from a threaded process
 * creates threads (qemu's own limitation, seen as "cpu == current_cpu"), and the full
 * suite leaves it out there. */
int main(int argc, char **argv) {
  rove_test_isa_gate();
  const int no_fork = getenv("ROVE_TEST_NO_FORK_THREADS") != NULL;
  if (argc > 1 && strcmp(argv[1], "fork") == 0) {
    if (no_fork) {
      printf("test_fork: skipped (qemu-user cannot create threads in a child forked from a "
             "threaded process)\n");
      return 77;
    }
    const struct CMUnitTest only[] = {cmocka_unit_test(test_fork)};
    return cmocka_run_group_tests(only, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_team_sizes),  cmocka_unit_test(test_small_calls_back_to_back),
      cmocka_unit_test(test_dlclose),     cmocka_unit_test(test_layer_threads),
      cmocka_unit_test(test_default_threads_env), cmocka_unit_test(test_cancel_during_a_call),
      cmocka_unit_test(test_fork),
  };
  /* test_fork last, so that leaving it out is dropping the last entry */
  const size_t n = sizeof tests / sizeof tests[0] - (no_fork ? 1 : 0);
  return _cmocka_run_group_tests("tests", tests, n, NULL, NULL);
}
