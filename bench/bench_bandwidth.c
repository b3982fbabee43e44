/* SPDX-License-Identifier: MIT */
/* bandwidth/read: the read-bandwidth reference for decode. Sums a buffer of 64-bit words
 * (integer adds: the compiler vectorises the reduction; an AVX2 build of the loop is used
 * where the CPU has it), on 1 or more threads (OpenMP, one contiguous chunk per thread).
 * 24 MB is about the K+V of a 4k cache of 12 x 64 (fits the L3 of many CPUs); 256 MB is
 * larger than any L3, like the K+V of a 32k cache (192 MB). Reports bytes_per_second.
 * One thread: CPU time; more: wall clock (see rb_pair). */
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"

#ifdef _OPENMP
#include <omp.h>
#endif

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

static uint64_t sum_threads(sum_fn fn, const uint64_t *p, size_t n, int threads) {
  uint64_t total = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    const size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
    const size_t lo = n * t / nt, hi = n * (t + 1) / nt;
    total += fn(p + lo, hi - lo);
  }
#else
  (void)threads;
  total = fn(p, n);
#endif
  return total;
}

uint64_t rb_read_sum(const void *buf, size_t bytes, int threads) {
  static sum_fn fn;
  if (!fn) fn = pick_sum();
  return sum_threads(fn, buf, bytes / sizeof(uint64_t), threads);
}

static void bm_read(rbs_state *st, void *user) {
  (void)user;
  const size_t bytes = (size_t)rbs_range(st, 0) << 20;
  const int thr = (int)rbs_range(st, 1);
  const size_t n = bytes / sizeof(uint64_t);
  uint64_t *buf = aligned_alloc(64, n * sizeof *buf);
  if (!buf) {
    rbs_skip_with_error(st, "out of memory");
    return;
  }
  for (size_t i = 0; i < n; i++) buf[i] = i * 0x9E3779B97F4A7C15ull;
  const sum_fn fn = pick_sum();
  uint64_t acc = 0;
  while (rbs_keep_running(st)) {
    acc += sum_threads(fn, buf, n, thr);
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
