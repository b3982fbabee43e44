/* SPDX-License-Identifier: MIT */
/* Layer calls from many threads at once: OpenBLAS serves a fixed number of concurrent
 * calls per process (Debian's 0.3.21: past its buffer table the process ends or its heap
 * is corrupted), and each layer call runs up to 32 single-threaded slices at once, so a
 * few dozen concurrent layer calls overran it. The library keeps at most 64 slices inside
 * OpenBLAS across the process. This suite interposes cblas_sgemm / cblas_sgemv (defined
 * here, so the dynamic linker binds librove's calls to them; each forwards to OpenBLAS
 * via RTLD_NEXT), counts the calls running at once, and checks: never more than 64, 64
 * reached (so the bound was tested; a build without threads: at most one per caller),
 * and every thread's output bitwise the serial call's. Links the public librove.so.
 * The overlap is made, not hoped for: until 64 calls run at once (or 5 s pass), each
 * entering call waits for more to arrive (slow thread creation under a sanitizer
 * otherwise staggers the layer calls); without the bound the calls arriving meanwhile
 * pass 64 (127 seen). */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

/* ---- the interposer: Debian's cblas.h types (enums as int, blasint = int) ---------- */
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *,
                         int, float, float *, int);
typedef void (*sgemv_fn)(int, int, int, int, float, const float *, int, const float *, int, float,
                         float *, int);
#ifdef ROVE_TEST_NO_THREADS
#define GATHER 0 /* no pool: nothing to gather */
#else
#define GATHER 64
#endif
static atomic_int running, most, gathered;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void enter(void) {
  const int now = atomic_fetch_add(&running, 1) + 1;
  int m = atomic_load(&most);
  while (now > m && !atomic_compare_exchange_weak(&most, &m, now)) {
  }
  const struct timespec tick = {0, 100000}; /* 0.1 ms */
  for (const double t0 = now_s(); !atomic_load(&gathered);) {
    if (atomic_load(&running) >= GATHER || now_s() - t0 > 5.0) atomic_store(&gathered, 1);
    nanosleep(&tick, NULL);
  }
  const struct timespec ts = {0, 1000000}; /* 1 ms */
  nanosleep(&ts, NULL);
}

void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc) {
  static sgemm_fn real;
  if (!real) real = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
  enter();
  real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  atomic_fetch_sub(&running, 1);
}

void cblas_sgemv(int order, int ta, int m, int n, float alpha, const float *a, int lda,
                 const float *x, int incx, float beta, float *y, int incy) {
  static sgemv_fn real;
  if (!real) real = (sgemv_fn)dlsym(RTLD_NEXT, "cblas_sgemv");
  enter();
  real(order, ta, m, n, alpha, a, lda, x, incx, beta, y, incy);
  atomic_fetch_sub(&running, 1);
}

/* ---- the test ------------------------------------------------------------------------ */
static float *uniform(rove_rng *r, int64_t n, float lo, float hi) {
  float *x = malloc(sizeof(float) * (size_t)n);
  assert_non_null(x);
  rove_rng_fill(r, x, n, lo, hi);
  return x;
}

enum { H = 8, D = 128, DM = 1024, N = 64, CALLERS = 6, THREADS = 32 };

typedef struct {
  const rove_layer *l;
  const float *x;
  float *y;
  rove_status st;
} caller;

static void *call(void *arg) {
  caller *c = arg;
  c->st = rove_layer_forward(c->l, 1, N, c->x, NULL, c->y);
  return NULL;
}

static void test_concurrent_layer_calls(void **state) {
  (void)state;
  rove_attention_config cfg;
  rove_attention_config_init(&cfg, H, H, D);
  cfg.n_threads = THREADS;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&cfg, &p), ROVE_OK);
  rove_rng r;
  rove_rng_seed(&r, 17);
  float *w = uniform(&r, (int64_t)H * D * DM, -0.03f, 0.03f), *x = uniform(&r, (int64_t)N * DM, -1, 1);
  rove_layer_weights lw = {.d_model = DM, .wq = w, .wk = w, .wv = w, .wo = w};
  rove_layer *l = NULL;
  assert_int_equal(rove_layer_create(p, &lw, &l), ROVE_OK);
  float *ref = malloc(sizeof(float) * N * DM), *y = malloc(sizeof(float) * CALLERS * N * DM);
  assert_true(ref && y);
  atomic_store(&gathered, 1); /* the serial call: no gathering */
  assert_int_equal(rove_layer_forward(l, 1, N, x, NULL, ref), ROVE_OK);
  atomic_store(&most, 0);
  atomic_store(&gathered, 0);
  caller c[CALLERS];
  pthread_t t[CALLERS];
  for (int i = 0; i < CALLERS; i++) {
    c[i] = (caller){l, x, y + (size_t)i * N * DM, ROVE_ERR_INTERNAL};
    assert_int_equal(pthread_create(&t[i], NULL, call, &c[i]), 0);
  }
  for (int i = 0; i < CALLERS; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
  const int m = atomic_load(&most);
  int ok = 1, same = 1;
  for (int i = 0; i < CALLERS; i++) {
    ok &= c[i].st == ROVE_OK;
    same &= memcmp(c[i].y, ref, sizeof(float) * N * DM) == 0;
  }
  free(y), free(ref), free(w), free(x); /* before any assertion: nothing leaks on failure */
  rove_layer_destroy(l);
  rove_plan_destroy(p);
  print_message("  %d layer calls of %d threads: at most %d OpenBLAS calls at once\n", CALLERS,
                THREADS, m);
  assert_true(ok);
  assert_true(same); /* every output bitwise the serial call's */
  assert_true(m <= 64);
#ifdef ROVE_TEST_NO_THREADS
  assert_true(m <= CALLERS); /* no pool: each call's slices run one after another */
#else
  assert_true(m == 64); /* the calls did overlap: the bound was exercised */
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_concurrent_layer_calls)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
