/* SPDX-License-Identifier: MIT */
/* rove_bench_shim: a small C API over Google Benchmark (1.7.1), so that librove's
 * benchmarks can be written in C.
 *
 * Usage:
 *   static void bm(rbs_state *st, void *user) {
 *     ... set up from rbs_range(st, 0) ...
 *     while (rbs_keep_running(st)) { work(); rbs_do_not_optimize(result); }
 *     rbs_counter_rate(st, "gflops", flops * (double)rbs_iterations(st) / 1e9);
 *   }
 *   int main(int argc, char **argv) {
 *     rbs_bench *b = rbs_register("name", bm, user);
 *     rbs_args(b, (int64_t[]){1024, 64}, 2);
 *     return rbs_main(argc, argv, 0.0);
 *   }
 *
 * The executable must be linked by the C++ driver (LINKER_LANGUAGE CXX). The state and
 * benchmark handles are only valid inside the calls that hand them out (the benchmark
 * function, resp. until rbs_main()). Nothing here is thread-safe except what Google
 * Benchmark itself allows (registration before rbs_main, one state per running thread).
 */
#ifndef ROVE_BENCH_SHIM_H
#define ROVE_BENCH_SHIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rbs_state rbs_state; /* a benchmark::State */
typedef struct rbs_bench rbs_bench; /* a registered benchmark::internal::Benchmark */

/** The body of a benchmark; @p user is the pointer given to rbs_register(). */
typedef void (*rbs_fn)(rbs_state *st, void *user);

/** Time unit of the console and JSON report. */
typedef enum rbs_unit { RBS_NS = 0, RBS_US, RBS_MS, RBS_S } rbs_unit;

/** Counter flags (combine with |). 0 = a plain value, reported as given. */
enum {
  RBS_COUNTER_RATE = 1,          /**< divided by the benchmark's duration (per second) */
  RBS_COUNTER_AVG_ITERATIONS = 2,/**< divided by the number of iterations */
  RBS_COUNTER_INVERT = 4,        /**< inverted last (e.g. seconds per item) */
  RBS_COUNTER_KIBI = 8           /**< 1k = 1024 in the console's suffixes (bytes) */
};

/* ---- registration (before rbs_main) ----------------------------------------------- */

/** Register @p fn under @p name (copied). @p user is passed through untouched and must
 *  outlive rbs_main(). Returns NULL only if @p name or @p fn is NULL. */
rbs_bench *rbs_register(const char *name, rbs_fn fn, void *user);
/** Add one argument list (one run of the benchmark per call); @p n values. */
void rbs_args(rbs_bench *b, const int64_t *args, int n);
/** Names of the arguments, shown in the benchmark name as "name:value". */
void rbs_arg_names(rbs_bench *b, const char *const *names, int n);
/** Measure wall-clock time (needed whenever the code runs on several threads). */
void rbs_use_real_time(rbs_bench *b);
/** Run at least @p seconds (overrides --benchmark_min_time for this benchmark). */
void rbs_min_time(rbs_bench *b, double seconds);
/** Run exactly @p n iterations (exclusive with rbs_min_time). */
void rbs_set_iterations(rbs_bench *b, int64_t n);
/** Repeat the whole measurement @p n times (overrides --benchmark_repetitions). */
void rbs_repetitions(rbs_bench *b, int n);
void rbs_time_unit(rbs_bench *b, rbs_unit unit);
/** Attach a key/value pair to the report's "context" (JSON) / header (console). */
void rbs_add_context(const char *key, const char *value);

/* ---- inside a benchmark ------------------------------------------------------------ */

/** The timed loop: while (rbs_keep_running(st)) { ... } */
int rbs_keep_running(rbs_state *st);
/** Like rbs_keep_running, counting @p n iterations per call (for tiny bodies). */
int rbs_keep_running_batch(rbs_state *st, int64_t n);
/** Stop / restart the timer inside the loop (about 1.4 us per pair: not for tiny bodies). */
void rbs_pause(rbs_state *st);
void rbs_resume(rbs_state *st);
/** Argument @p i of the current argument list. */
int64_t rbs_range(rbs_state *st, int i);
/** Iterations run so far (after the loop: the total). */
int64_t rbs_iterations(rbs_state *st);
/** Set counter @p name (RBS_COUNTER_* flags). Call after the loop. */
void rbs_counter(rbs_state *st, const char *name, double value, unsigned flags);
/** A counter reported as given. */
void rbs_counter_plain(rbs_state *st, const char *name, double value);
/** A counter reported as @p total / duration (per second). */
void rbs_counter_rate(rbs_state *st, const char *name, double total);
/** Totals over all iterations: reported as items_per_second / bytes_per_second. */
void rbs_set_items_processed(rbs_state *st, int64_t items);
void rbs_set_bytes_processed(rbs_state *st, int64_t bytes);
void rbs_set_label(rbs_state *st, const char *label);
/** Report this run as failed with @p msg; leave the loop at once (it runs no iteration
 *  if called before it). */
void rbs_skip_with_error(rbs_state *st, const char *msg);

/* ---- main -------------------------------------------------------------------------- */

/**
 * Parse the Google Benchmark flags (--benchmark_filter=REGEX, --benchmark_format=json,
 * --benchmark_out=FILE, --benchmark_out_format=json, --benchmark_min_time=SECONDS,
 * --benchmark_repetitions=N, --benchmark_list_tests, --help, ...) and run the
 * registered benchmarks that match the filter.
 * @param default_min_time  if > 0, used as --benchmark_min_time unless the command line
 *                          gives one
 * @return 0 when at least one benchmark matched (ran or was listed); 1 when the filter
 *         matched nothing; 2 for an unrecognised argument.
 */
int rbs_main(int argc, char **argv, double default_min_time);

/* ---- do-not-optimise barriers ------------------------------------------------------- */

#if defined(__GNUC__) || defined(__clang__)
/** The compiler must assume the memory at @p p is read and written here: keeps the
 *  stores that produced it and stops loads from being hoisted across the barrier. */
static inline void rbs_do_not_optimize(const void *p) {
  __asm__ __volatile__("" : : "r"(p) : "memory");
}
/** The compiler must assume @p v is used here (keeps the computation of a value). */
static inline void rbs_use_double(double v) {
  __asm__ __volatile__("" : : "m"(v) : "memory");
}
/** Every store before this point must really happen. */
static inline void rbs_clobber_memory(void) { __asm__ __volatile__("" : : : "memory"); }
#else
#error "rove_bench_shim.h needs GCC or Clang (inline asm barriers)"
#endif

#ifdef __cplusplus
}
#endif
#endif /* ROVE_BENCH_SHIM_H */
