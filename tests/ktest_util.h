/* SPDX-License-Identifier: MIT */
/* The kernel-test harness (tests/ktest_*.c link the static rove_internal and this):
 *
 *  - ISA iteration: kt_main runs every test of a suite once per ISA of the registry after
 *    scalar (src/isa_registry.c), each against the scalar table. It prints one line per
 *    ISA ("<suite>: %-6s compiled in and available: tested against <what>", "... compiled
 *    in, but this CPU cannot run it: skipped", "... not compiled into this build:
 *    skipped"); the cases of an ISA that cannot run here are reported as skipped, never
 *    passed. With no SIMD ISA available the program exits 77 (ctest: skipped), unless
 *    ROVE_KTEST_SELF=1, which also runs scalar against itself (harness sanity).
 *  - Failure context: kt_ctx sets a printf-style description of the case at hand; every
 *    kt_fail message carries it (and the ISA). The first 15 failures of a test are
 *    printed (all with ROVE_KTEST_VERBOSE=1); a test with any failure fails.
 *  - Guarded buffers (testutil.h's, with failure messages): canaries on both sides, a
 *    deliberate misalignment, strided rows whose gaps hold a sentinel.
 */
#ifndef ROVE_KTEST_UTIL_H
#define ROVE_KTEST_UTIL_H

#include "testutil.h"
/* testutil.h first: cmocka needs its standard headers before it */
#include "isa_registry.h"
#include "kernels/kernels.h"

/* ---- suites ------------------------------------------------------------------------- */

/* A test gets the table under test (the scalar one for a test run once); it reports
 * problems with kt_fail (or cmocka's asserts). */
typedef void (*kt_fn)(const rove_kernels *kn);
typedef struct {
  const char *name; /* the cmocka case is "<isa>_<name>" */
  kt_fn fn;
} kt_test;

typedef struct {
  const char *name;    /* program name: prefix of the ISA lines */
  const char *against; /* "tested against <against>" in the ISA lines */
  const kt_test *per_isa;
  int n_per_isa;
  const kt_test *once; /* run once, before the ISAs (e.g. over every table); may be NULL */
  int n_once;
  int with_scalar; /* 1: the scalar table is tested as well (last; the tests compare it
                          with something other than itself), not only under ROVE_KTEST_SELF */
} kt_suite;

/* main() of a kernel test: ISA gate, ISA lines, skip logic, the (ISA x test) cases. */
int kt_main(const kt_suite *s);

/* The reference table (scalar) and the label of the ISA under test ("avx2",
 * "scalar(self)", ...; "all" in a test run once). */
const rove_kernels *kt_ref(void);
const char *kt_isa(void);

/* ---- failure context ---------------------------------------------------------------- */

void kt_ctx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "  FAIL [<isa> <context>] <message>"; counts the failure. */
void kt_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int kt_failures(void);

/* got vs want over n rows of d floats at strides gs / ws: fails (with the worst element)
 * when max |got - want| > tol * max |want| or anything is NaN. Returns the relative
 * error; kt_worst() is the largest one since the test began. */
double kt_cmp(const float *got, int64_t gs, const float *want, int64_t ws, int64_t n, int32_t d,
              double tol, const char *what);
double kt_worst(void);

/* ---- guarded buffers ---------------------------------------------------------------- */

#define KT_SENTINEL 0x7FA5A5A5u /* a NaN pattern nobody computes: the gaps of strided rows */

/* n floats at (64-byte boundary + mis floats) between canaries; with post == 0 under ASan
 * the data ends where its allocation ends instead (rove_guarded_alloc_tight). */
float *kt_alloc(rove_guarded *g, int64_t n, int mis, int post);
/* kt_fail when a canary of g was overwritten ("<what>: written k floats before the
 * buffer" / "past the end"). */
void kt_check(const rove_guarded *g, const char *what);

/* n rows of d floats, `stride` apart: the gaps hold KT_SENTINEL. */
int64_t kt_rows_len(int64_t n, int64_t stride, int32_t d);
float *kt_rows_alloc(rove_guarded *g, int64_t n, int64_t stride, int32_t d, int mis, int post);
void kt_rows_fill(rove_rng *r, float *x, int64_t n, int64_t stride, int32_t d, float amp);
/* kt_fail when a gap between the rows no longer holds the sentinel. */
void kt_gaps_check(const float *x, int64_t n, int64_t stride, int32_t d, const char *what);

#endif
