/* SPDX-License-Identifier: MIT */
/* Internal utilities (util.c, threads.c, workspace.c): checked arithmetic, aligned
 * allocation, the overlap test, the thread pool's loops, and the workspace pool. Below the drivers: includes
 * nothing of the plan. */
#ifndef ROVE_UTIL_H
#define ROVE_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* util.c: checked arithmetic (return 0 on overflow) and aligned allocation. */
int rove_mul_i64(int64_t a, int64_t b, int64_t *out);
int rove_add_i64(int64_t a, int64_t b, int64_t *out);
void *rove_alloc(size_t bytes); /* 64-byte aligned, NULL on failure or 0 bytes */
/* rove_alloc for the K and V of KV caches and paged pools: from 2 MB on, 2 MB-aligned
 * with transparent huge pages requested (util.c). Freed by rove_free. */
void *rove_alloc_large(size_t bytes);
void rove_free(void *p);
/* [lo, hi) byte ranges of two buffers overlap? (never when either is NULL; a range past
 * the end of the address space ends there) */
int rove_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes);
/* A caller's input array for the overlap rule: its start and the bytes it spans. */
typedef struct rove_span {
  const void *p;
  size_t bytes;
} rove_span;
/* Bytes of count elements of es bytes each; SIZE_MAX when that does not fit (no such
 * array exists, and an overlap test against it stays on the safe side); 0 for count <= 0. */
size_t rove_span_bytes(int64_t count, size_t es);
/* Cumulative lengths cu[0..n] (varlen attention, GLA's packed sequences): cu non-NULL,
 * cu[0] = 0, non-decreasing; *total = cu[n]. 0 if not. */
int rove_check_cu(const int32_t *cu, int32_t n, int64_t *total);
/* Sequence s of a call: packed (cu non-NULL) tokens cu[s] .. cu[s + 1] - 1 of its one row,
 * or batch row s of seq_len tokens (tokens s * seq_len ..). */
static inline int64_t rove_seq_start(const int32_t *cu, int64_t s, int64_t seq_len) {
  return cu ? cu[s] : s * seq_len;
}
static inline int64_t rove_seq_len(const int32_t *cu, int64_t s, int64_t seq_len) {
  return cu ? (int64_t)cu[s + 1] - cu[s] : seq_len;
}
/* Whether the output [out, out + bytes) overlaps any of the n inputs (never for NULL). */
int rove_overlap_any(const void *out, size_t bytes, const rove_span *in, int n);
/* Flush subnormal float results to zero on this thread until the matching end (x86:
 * MXCSR's FTZ bit; aarch64: FPCR's FZ; elsewhere nothing), returning the mode to restore.
 * GLA's chunk products e^{g} q, k e^{G - g} underflow into subnormals under strong
 * decays, where every FMA on them takes a microcode assist (a 12x slower forward); values
 * below FLT_MIN (1.2e-38) there are far below the float rounding of the results. Each task
 * sets it for itself and restores the caller's mode, so no thread keeps it. */
uint64_t rove_flush_subnormals_begin(void);
void rove_flush_subnormals_end(uint64_t saved);
/* The threads rove_parallel_for(n_threads, n, ...) and rove_parallel_for_blocked run: never
 * more than the n tasks, nor than ROVE_MAX_THREADS (1 without threads, or for n <= 1).
 * Every tid a body sees is below it, so per-thread workspace is sized by it (the team that
 * runs may be smaller: threads that could not be created). */
int32_t rove_team_size(int32_t n_threads, int64_t n);
/* Run body(i, tid, ctx) for i in [0, n) on up to rove_team_size(n_threads, n) threads
 * (threads.c; dynamic schedule: each thread takes the next index). A call from inside a
 * body runs on its thread alone. */
void rove_parallel_for(int32_t n_threads, int64_t n, void (*body)(int64_t i, int tid, void *ctx),
                       void *ctx);
/* rove_parallel_for with an affine schedule: thread t first runs the contiguous block
 * [t n / nt, (t + 1) n / nt) in order, then takes what is left of the others' blocks.
 * Consecutive tasks that share data (a head's pack, then its query tiles) stay on one
 * core: the packed K/V a thread writes is the K/V it reads, in its own cache, and the
 * next call's pack overwrites lines no other core holds. Which thread runs a task never
 * changes its result. */
void rove_parallel_for_blocked(int32_t n_threads, int64_t n,
                               void (*body)(int64_t i, int tid, void *ctx), void *ctx);

/* Run body(tid, tid, ctx) once on each thread of the team rove_parallel_for(n_threads,
 * n_threads, ...) would run (the team that could be made; the caller alone when that is
 * 1): per-thread set-up such as a thread-local setting of another library. */
void rove_parallel_each(int32_t n_threads, void (*body)(int64_t i, int tid, void *ctx), void *ctx);

/* workspace.c: a mutex-protected pool of freed workspace blocks. */
typedef struct rove_pool rove_pool;
rove_pool *rove_pool_create(void);
void rove_pool_destroy(rove_pool *p);
void *rove_pool_get(rove_pool *p, size_t bytes, size_t *size); /* NULL when out of memory */
void rove_pool_put(rove_pool *p, void *block, size_t size);

#endif
