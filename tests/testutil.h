/* Shared test helpers: ISA gate, seeded RNG, guarded buffers. */
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
typedef struct { uint64_t s; } rove_rng;
void rove_rng_seed(rove_rng *r, uint64_t seed);
uint64_t rove_rng_u64(rove_rng *r);
float rove_rng_uniform(rove_rng *r, float lo, float hi);
void rove_rng_fill(rove_rng *r, float *x, int64_t n, float lo, float hi);

/* A float buffer with canaries on both sides and a deliberately odd start (misaligned
 * by `misalign` floats from a 64-byte boundary). */
typedef struct {
  float *data;   /* n usable floats */
  int64_t n;
  void *base;
  int64_t pre;   /* canary floats before data */
} rove_guarded;
void rove_guarded_alloc(rove_guarded *g, int64_t n, int misalign);
int rove_guarded_intact(const rove_guarded *g); /* 1 if both canaries are unchanged */
void rove_guarded_free(rove_guarded *g);

/* max_i |a_i - b_i| / max(max_i |b_i|, tiny) over n floats vs doubles. */
double rove_max_rel_err_fd(const float *a, const double *b, int64_t n);
double rove_max_rel_err_ff(const float *a, const float *b, int64_t n);

#endif
