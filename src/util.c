/* SPDX-License-Identifier: MIT */
/* Checked integer arithmetic, aligned allocation, the overlap test. (The thread pool is
 * threads.c.) */
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
  if (!a || !b) return 0; /* an absent (optional) buffer overlaps nothing */
  uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
  return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}
