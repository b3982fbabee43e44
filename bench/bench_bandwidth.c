/* SPDX-License-Identifier: MIT */
/* bandwidth/read: the read-bandwidth reference for decode. Sums a buffer of 64-bit words
 * (integer adds: the compiler vectorises the reduction; an AVX2 build of the loop is used
 * where the CPU has it), on 1 or more threads (one contiguous chunk per thread).
 * 24 MB is about the K+V of a 4k cache of 12 x 64 (fits the L3 of many CPUs); 256 MB is
 * larger than any L3, like the K+V of a 32k cache (192 MB). Reports bytes_per_second.
 * One thread: CPU time; more: wall clock (see rb_pair), which for bandwidth/read includes
 * creating the threads (tens of microseconds per call).
 *
 * The threads are plain pthreads made for each call, not an OpenMP team: idle OpenMP
 * workers spin (libgomp's default policy) and would take the cores librove's own pool
 * needs right after the reference, in the same loop. rb_read_seconds times the read
 * itself: from a barrier that all threads have reached to the last one's end. */
#define _DEFAULT_SOURCE /* madvise (bench_pages.h) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"
#include "bench_pages.h"

static inline __attribute__((always_inline)) uint64_t sum_body(const uint64_t *p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; i++) s += p[i];
  return s;
}

static uint64_t sum_default(const uint64_t *p, size_t n) { return sum_body(p, n); }

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint64_t *p, size_t n) {
  return sum_body(p, n);
}
#endif

typedef uint64_t (*sum_fn)(const uint64_t *p, size_t n);

static sum_fn pick_sum(void) {
#if defined(__x86_64__) || defined(__i386__)
  if (rove_cpu_features() & ROVE_CPU_AVX2) return sum_avx2;
#endif
  return sum_default;
}

#define RB_MAX_READ_THREADS 256

typedef struct read_part {
  sum_fn fn;
  const uint64_t *p;
  size_t n;
  pthread_barrier_t *start;
  double t0, t1; /* wall clock after the barrier, at the end */
  uint64_t sum;
} read_part;

static void *read_part_run(void *arg) {
  read_part *r = arg;
  pthread_barrier_wait(r->start);
  r->t0 = rb_now();
  r->sum = r->fn(r->p, r->n);
  r->t1 = rb_now();
  return NULL;
}

/* Sums p[0, n) on `threads` threads (the caller is one); *seconds: the read's wall time. */
static uint64_t sum_threads(sum_fn fn, const uint64_t *p, size_t n, int threads,
                            double *seconds) {
  if (threads > RB_MAX_READ_THREADS) threads = RB_MAX_READ_THREADS;
  if (threads <= 1) {
    const double t0 = rb_cpu_now();
    const uint64_t s = fn(p, n);
    *seconds = rb_cpu_now() - t0;
    return s;
  }
  read_part part[RB_MAX_READ_THREADS];
  pthread_t tid[RB_MAX_READ_THREADS];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)threads);
  int made = 1;
  for (int t = 0; t < threads; t++) {
    const size_t lo = n * (size_t)t / (size_t)threads, hi = n * (size_t)(t + 1) / (size_t)threads;
    part[t] = (read_part){fn, p + lo, hi - lo, &start, 0, 0, 0};
  }
  for (; made < threads; made++)
    if (pthread_create(&tid[made], NULL, read_part_run, &part[made]) != 0) {
      fprintf(stderr, "rove_bench: pthread_create failed\n");
      exit(1);
    }
  read_part_run(&part[0]);
  uint64_t total = part[0].sum;
  double t0 = part[0].t0, t1 = part[0].t1;
  for (int t = 1; t < threads; t++) {
    pthread_join(tid[t], NULL);
    total += part[t].sum;
    if (part[t].t0 < t0) t0 = part[t].t0;
    if (part[t].t1 > t1) t1 = part[t].t1;
  }
  pthread_barrier_destroy(&start);
  *seconds = t1 - t0;
  return total;
}

uint64_t rb_read_sum(const void *buf, size_t bytes, int threads, double *seconds) {
  static sum_fn fn;
  if (!fn) fn = pick_sum();
  return sum_threads(fn, buf, bytes / sizeof(uint64_t), threads, seconds);
}

static void bm_read(rbs_state *st, void *user) {
  (void)user;
  const size_t bytes = (size_t)rbs_range(st, 0) << 20;
  const int thr = (int)rbs_range(st, 1);
  const size_t n = bytes / sizeof(uint64_t);
  uint64_t *buf = bench_alloc_huge(n * sizeof *buf); /* 2 MB pages, as a KV cache's */
  if (!buf) {
    rbs_skip_with_error(st, "out of memory");
    return;
  }
  for (size_t i = 0; i < n; i++) buf[i] = i * 0x9E3779B97F4A7C15ull;
  const sum_fn fn = pick_sum();
  uint64_t acc = 0;
  while (rbs_keep_running(st)) {
    double seconds;
    acc += sum_threads(fn, buf, n, thr, &seconds);
    rbs_do_not_optimize(&acc);
  }
  rbs_set_bytes_processed(st, rbs_iterations(st) * (int64_t)bytes);
  free(buf);
}

static const char *const ARG_NAMES[] = {"MB", "thr"};
static rb_pair pairs[2]; /* [smoke] */

void rb_register_bandwidth(int smoke) {
  rb_pair *p = &pairs[smoke];
  snprintf(p->name, sizeof p->name, "%s", smoke ? "smoke/bandwidth/read" : "bandwidth/read");
  p->fn = bm_read;
  p->arg_names = ARG_NAMES;
  p->n_args = 2;
  p->unit = RBS_US;
  if (smoke) {
    const int64_t a[2] = {1, 1};
    rb_pair_add(p, a, 1);
    return;
  }
  static const int64_t sizes[] = {24, 256};
  for (int t = 0; t < rb_cfg.n_threads; t++)
    for (int s = 0; s < 2; s++) {
      const int64_t a[2] = {sizes[s], rb_cfg.threads[t]};
      rb_pair_add(p, a, rb_cfg.threads[t]);
    }
}
