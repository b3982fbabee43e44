/* SPDX-License-Identifier: MIT */
/* Shared test helpers: ISA gate, seeded RNG, guarded buffers, error metrics. Linked by
 * the API suites (against librove.so) and, through the kernel-test harness ktest_util.h,
 * by the kernel tests. */
#ifndef ROVE_TESTUTIL_H
#define ROVE_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off */
#include <cmocka.h>
/* clang-format on */

#include "rove.h"

/* Call first in main(): when ROVE_TEST_REQUIRE_ISA names an ISA this CPU/build lacks,
 * prints why and exits 77 (ctest: skipped). */
void rove_test_isa_gate(void);

/* xorshift64* generator; uniform floats in [lo, hi). */
typedef struct {
  uint64_t s;
} rove_rng;
void rove_rng_seed(rove_rng *r, uint64_t seed);
uint64_t rove_rng_u64(rove_rng *r);
float rove_rng_uniform(rove_rng *r, float lo, float hi);
void rove_rng_fill(rove_rng *r, float *x, int64_t n, float lo, float hi);

/* Guarded buffers (the one implementation; ktest_util.h adds failure messages): n usable
 * floats at a deliberately odd start (64-byte boundary + `misalign` floats), between
 * ROVE_GUARD_FLOATS canary floats on each side. The data starts filled with the canary
 * (a NaN pattern nobody computes) as well. Any type fits: a buffer of n doubles is one of
 * 2n floats. */
#define ROVE_GUARD_FLOATS 32 /* 128 bytes: keeps the 64-byte alignment of misalign 0 */
#define ROVE_GUARD_CANARY 0x7FC0B0B0u
typedef struct {
  float *data; /* n usable floats */
  int64_t n;
  float *base;       /* the allocation */
  int64_t pre, post; /* canary floats before / after data */
} rove_guarded;
float *rove_guarded_alloc(rove_guarded *g, int64_t n, int misalign); /* returns g->data */
/* As rove_guarded_alloc, but with tight != 0 under AddressSanitizer no canary follows the
 * data: it ends where the allocation ends, so ASan sees any access past it (without ASan
 * the canary is always there). */
float *rove_guarded_alloc_tight(rove_guarded *g, int64_t n, int misalign, int tight);
/* 1 if both canaries are unchanged. Else 0, with *before = how far before the data the
 * farthest overwritten canary float lies and *after = how far past the end the nearest
 * one lies (1: the float right after the data), 0 for an intact side; either may be NULL. */
int rove_guarded_check(const rove_guarded *g, int64_t *before, int64_t *after);
int rove_guarded_intact(const rove_guarded *g);
void rove_guarded_free(rove_guarded *g);
/* Bit patterns (NaN payloads survive only when compared by their bits). */
void rove_fill_bits(float *x, int64_t n, uint32_t bits);
int rove_has_bits(const float *x, uint32_t bits);

/* An output of n floats (filled with 321.0f) whose last 8 bytes are the first 8 of a copy
 * of the n_src bytes at src (the rest right after it): an output that overlaps that one
 * input array and nothing else (8-byte aligned for even n, for arrays of doubles). *copy:
 * where the copy lies; free the result with free(). */
float *rove_out_over(int64_t n, const void *src, size_t n_src, void **copy);
/* 1 if the first n - 2 floats of an rove_out_over output are still 321.0f. */
int rove_out_over_untouched(const float *out, int64_t n);
/* Bytes of one stored element of t (Q8: the int8, its scales apart). */
size_t rove_test_dtype_size(rove_dtype t);

/* max_i |a_i - b_i| / max(max_i |b_i|, tiny) over n floats vs doubles. */
double rove_max_rel_err_fd(const float *a, const double *b, int64_t n);
double rove_max_rel_err_ff(const float *a, const float *b, int64_t n);

#endif
