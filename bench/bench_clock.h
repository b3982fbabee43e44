/* SPDX-License-Identifier: MIT */
/* Wall-clock time, the calling thread's CPU time and medians for the plain-C benchmarks
 * (ab_decode, paged_decode, layer_loop, tile_bench, gla_kernel_bench). Needs
 * _POSIX_C_SOURCE >= 199309L before the first include. */
#ifndef ROVE_BENCH_CLOCK_H
#define ROVE_BENCH_CLOCK_H

#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Seconds of CPU time of the calling thread (other processes on the core do not count). */
static inline double bench_cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of x[0..n) (x is sorted in place; the upper one of an even n). */
static inline double bench_median(double *x, int n) {
  qsort(x, (size_t)n, sizeof *x, bench_cmp_double);
  return x[n / 2];
}

#endif
