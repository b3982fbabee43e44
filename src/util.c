/* SPDX-License-Identifier: MIT */
/* Checked integer arithmetic, aligned allocation, the overlap test. (The thread pool is
 * threads.c.) */
#define _DEFAULT_SOURCE /* madvise */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "rove.h"
#include "util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define MXCSR_FTZ 0x8000u
uint64_t rove_flush_subnormals_begin(void) {
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | MXCSR_FTZ);
  return saved;
}
void rove_flush_subnormals_end(uint64_t saved) { _mm_setcsr((unsigned)saved); }
#elif defined(__aarch64__)
#define FPCR_FZ (UINT64_C(1) << 24)
uint64_t rove_flush_subnormals_begin(void) {
  uint64_t saved;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(saved));
  __asm__ __volatile__("msr fpcr, %0" : : "r"(saved | FPCR_FZ));
  return saved;
}
void rove_flush_subnormals_end(uint64_t saved) { __asm__ __volatile__("msr fpcr, %0" : : "r"(saved)); }
#else
uint64_t rove_flush_subnormals_begin(void) { return 0; }
void rove_flush_subnormals_end(uint64_t saved) { (void)saved; }
#endif

int rove_mul_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
int rove_add_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }

void *rove_alloc(size_t bytes) {
  if (bytes == 0 || bytes > (size_t)INT64_MAX - 64) return NULL;
  size_t rounded = (bytes + 63) & ~(size_t)63;
  return aligned_alloc(64, rounded);
}

/* Buffers of at least LARGE_PAGE bytes (K and V of a KV cache or a paged pool) start on a
 * 2 MB boundary and ask for transparent huge pages (madvise; a system whose THP setting
 * is "never" ignores it, "always" gives them anyway). Decode walks them once per step, a
 * TLB walk per 4 KB page otherwise (Sapphire Rapids, BENCHMARKS.md session 17): a paged
 * pool's 4 KB blocks of 16 tokens (a 64-byte-aligned pool put each on two pages) took
 * 12 x 64 decode to 1.07-1.10x the contiguous cache's time, 0.997x with huge pages; the
 * contiguous cache itself decodes 1.03-1.18x faster with them. A huge page is backed
 * whole at its first write, so resident memory grows in 2 MB steps. */
#define LARGE_PAGE ((size_t)2 << 20)
void *rove_alloc_large(size_t bytes) {
  if (bytes < LARGE_PAGE) return rove_alloc(bytes);
  if (bytes > (size_t)INT64_MAX - LARGE_PAGE) return NULL;
  const size_t rounded = (bytes + LARGE_PAGE - 1) & ~(LARGE_PAGE - 1);
  void *p = aligned_alloc(LARGE_PAGE, rounded);
#ifdef MADV_HUGEPAGE
  if (p) (void)madvise(p, rounded, MADV_HUGEPAGE); /* a hint: failure changes nothing */
#endif
  return p;
}

void rove_free(void *p) { free(p); }

int rove_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes) {
  if (!a || !b) return 0; /* an absent (optional) buffer overlaps nothing */
  const uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
  const uintptr_t a1 = a_bytes > UINTPTR_MAX - a0 ? UINTPTR_MAX : a0 + a_bytes;
  const uintptr_t b1 = b_bytes > UINTPTR_MAX - b0 ? UINTPTR_MAX : b0 + b_bytes;
  return a0 < b1 && b0 < a1;
}

size_t rove_span_bytes(int64_t count, size_t es) {
  if (count <= 0) return 0;
  return (uint64_t)count > SIZE_MAX / es ? SIZE_MAX : (size_t)count * es;
}

int rove_check_cu(const int32_t *cu, int32_t n, int64_t *total) {
  if (!cu || cu[0] != 0) return 0;
  for (int32_t s = 0; s < n; s++)
    if (cu[s + 1] < cu[s]) return 0;
  *total = cu[n];
  return 1;
}

int rove_overlap_any(const void *out, size_t bytes, const rove_span *in, int n) {
  for (int i = 0; i < n; i++)
    if (rove_overlap(out, bytes, in[i].p, in[i].bytes)) return 1;
  return 0;
}
