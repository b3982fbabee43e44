/* SPDX-License-Identifier: MIT */
/* Checked integer arithmetic, aligned allocation, overlap test, the OpenMP loop. */
#include <stdint.h>
#include <stdlib.h>

#include "rove.h"
#include "util.h"

int rove_mul_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
int rove_add_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }

void *rove_alloc(size_t bytes) {
  if (bytes == 0 || bytes > (size_t)INT64_MAX - 64) return NULL;
  size_t rounded = (bytes + 63) & ~(size_t)63;
  return aligned_alloc(64, rounded);
}

void rove_free(void *p) { free(p); }

int rove_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes) {
  uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
  return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

#ifdef _OPENMP
#include <omp.h>
#endif

int32_t rove_team_size(int32_t n_threads, int64_t n) {
#ifdef _OPENMP
  int64_t t = n_threads < ROVE_MAX_THREADS ? n_threads : ROVE_MAX_THREADS;
  if (t > n) t = n; /* a thread without a task would only cost its creation */
  return t > 1 ? (int32_t)t : 1;
#else
  (void)n_threads, (void)n;
  return 1;
#endif
}

void rove_parallel_for(int32_t n_threads, int64_t n, void (*body)(int64_t i, int tid, void *ctx),
                       void *ctx) {
#ifdef _OPENMP
  const int32_t nt = rove_team_size(n_threads, n);
  if (nt > 1) {
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int64_t i = 0; i < n; i++) body(i, omp_get_thread_num(), ctx);
    return;
  }
#else
  (void)n_threads;
#endif
  for (int64_t i = 0; i < n; i++) body(i, 0, ctx);
}

/* Up to this many threads (after rove_team_size) take the blocked schedule (a counter per
 * thread on the stack); more fall back to rove_parallel_for. */
#define ROVE_BLOCKED_MAX_THREADS 64

void rove_parallel_for_blocked(int32_t n_threads, int64_t n,
                               void (*body)(int64_t i, int tid, void *ctx), void *ctx) {
#ifdef _OPENMP
  const int32_t nb = rove_team_size(n_threads, n);
  if (nb > 1 && nb <= ROVE_BLOCKED_MAX_THREADS) {
    /* Block r = [r n / nb, (r + 1) n / nb): its next index, one cache line per block. */
    _Alignas(64) struct {
      int64_t next, end;
      char pad[64 - 2 * sizeof(int64_t)];
    } blk[ROVE_BLOCKED_MAX_THREADS];
    for (int32_t r = 0; r < nb; r++) {
      blk[r].next = n * r / nb;
      blk[r].end = n * (r + 1) / nb;
    }
#pragma omp parallel num_threads(nb)
    {
      const int tid = omp_get_thread_num();
      /* Own block first, then help the others in order (taking from their front). */
      for (int32_t k = 0; k < nb; k++) {
        const int32_t r = (int32_t)((tid + k) % nb);
        for (;;) {
          const int64_t i = __atomic_fetch_add(&blk[r].next, 1, __ATOMIC_RELAXED);
          if (i >= blk[r].end) break;
          body(i, tid, ctx);
        }
      }
    }
    return;
  }
#endif
  rove_parallel_for(n_threads, n, body, ctx);
}
