/* SPDX-License-Identifier: MIT */
/* Buffers on the same kind of pages as librove's KV caches, for the read references of the
 * decode benchmarks (ab_decode, paged_decode, rove_bench's bandwidth/read and
 * decode_cache). librove puts a cache's or a paged pool's K and V of 2 MB or more on a
 * 2 MB boundary and asks for transparent huge pages (rove_alloc_large, src/util.c); a
 * reference read over malloc'd memory runs on 4 KB pages instead, and a sequential read
 * is not the same speed on both: on a Zen 4 VM (session 24) 31 GB/s on 2 MB pages against
 * 20 GB/s on 4 KB pages, one thread. A reference slower than the cache's own memory
 * would overstate the share of the read bandwidth a decode step reaches (BENCHMARKS.md,
 * session 24). Needs _DEFAULT_SOURCE before the first include (madvise). */
#ifndef ROVE_BENCH_PAGES_H
#define ROVE_BENCH_PAGES_H

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#if defined(__linux__) && !defined(MADV_HUGEPAGE)
#error "bench_pages.h: define _DEFAULT_SOURCE before the first include (MADV_HUGEPAGE)"
#endif

/* bytes (rounded up to 2 MB) on a 2 MB boundary, transparent huge pages requested (a
 * hint: a system that refuses them gives 4 KB pages); free() releases it. NULL on
 * failure. */
static inline void *bench_alloc_huge(size_t bytes) {
  const size_t page = (size_t)2 << 20;
  if (bytes == 0 || bytes > SIZE_MAX - page) return NULL;
  const size_t rounded = (bytes + page - 1) / page * page;
  void *p = aligned_alloc(page, rounded);
#ifdef MADV_HUGEPAGE
  if (p) (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
}

#endif
