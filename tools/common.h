/* SPDX-License-Identifier: MIT */
/* Shared helpers of the `rove` command-line tool: argument parsing, usage text, timing,
 * seeded random data, and the comparison of library outputs with the oracle. */
#ifndef ROVE_CLI_COMMON_H
#define ROVE_CLI_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rove.h"

/* Exit codes: 0 success, 1 a check failed or a library call returned an error,
 * 2 bad command line. */
enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };

/* fp32 outputs must be within this of the oracle, relative to the output's max magnitude
 * (docs/DESIGN.md §4). */
#define CLI_TOLERANCE 2e-5

/* ---- command line ------------------------------------------------------------------- */

void cli_print_usage(FILE *f);
/* Print "rove <cmd>: <message>" and a usage hint on stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* One option of a subcommand. A FLAG takes no value; the others take one, given either
 * as the next argument or after '=' (--n 256, --n=256). A DTYPE is one storage type
 * (cli_dtype_from_name); DTYPES a set of them, "all" or a comma-separated list, stored as
 * a mask of bits 1u << type. */
typedef enum {
  CLI_OPT_FLAG,
  CLI_OPT_I32,
  CLI_OPT_U64,
  CLI_OPT_ISA,
  CLI_OPT_DTYPE,
  CLI_OPT_DTYPES
} cli_opt_kind;
typedef struct cli_opt {
  const char *name;   /* "--n" */
  cli_opt_kind kind;
  void *dst;          /* int*, int32_t*, uint64_t*, rove_isa*, rove_dtype* or uint32_t* */
  int64_t lo, hi;     /* inclusive range for I32 */
} cli_opt;

/* Parse argv[0..argc-1] (the arguments after the subcommand) against @p opts.
 * Returns 0, 1 if help was requested (usage printed), or CLI_EXIT_USAGE after printing
 * an error for an unknown option, a missing, non-numeric or out-of-range value. */
int cli_parse_opts(const char *cmd, int argc, char **argv, const cli_opt *opts, size_t n_opts);
/* cli_parse_opts, and bit i of *seen set when opts[i] was given (n_opts <= 32), so that a
 * command can refuse an option its chosen mode would not read. */
int cli_parse_opts_seen(const char *cmd, int argc, char **argv, const cli_opt *opts,
                        size_t n_opts, uint32_t *seen);
/* Whether the option called @p name was given (its bit in @p seen). */
int cli_seen(uint32_t seen, const cli_opt *opts, size_t n_opts, const char *name);

/* "auto", "scalar", "avx2", "avx512", "neon" (any case). Returns 0, or -1 if unknown. */
int cli_isa_from_name(const char *s, rove_isa *out);

/* A storage type by any name rove_dtype_parse takes ("f32", "bf16", "f16", "q8", "fp32",
 * ..., any case). Returns 0, or -1 if unknown. */
int cli_dtype_from_name(const char *s, rove_dtype *out);

/* Bytes of K and V one token takes in a KV cache of type t with kv_heads x head_dim per
 * token (Q8: its int8 values and one fp32 scale per ROVE_Q8_BLOCK dims of each head row). */
double cli_kv_bytes_per_token(rove_dtype t, int32_t kv_heads, int32_t head_dim);

/* ---- timing and statistics ------------------------------------------------------------ */

double cli_now_ms(void);                 /* CLOCK_MONOTONIC, milliseconds */
double cli_cpu_ms(void);                 /* CLOCK_PROCESS_CPUTIME_ID (all threads), ms */
double cli_median(const double *v, int n); /* n >= 1; v is not modified */
/* 0 if a run needing about `bytes` of memory fits this machine (at most 80 % of its
 * physical memory); else prints "rove CMD: needs about ... (what to shrink)" and returns
 * -1, so that a large shape is refused instead of being killed by the kernel midway. */
int cli_check_memory(const char *cmd, double bytes, const char *shrink);
/* The q-quantile (0 <= q <= 1, linear between order statistics) of v[0..n-1], n <= 64. */
double cli_quantile(const double *v, int n, double q);

/* Interleaved A/B timing, for a time ratio that holds on a busy machine: one untimed run
 * of each, then `pairs` pairs of runs back to back, alternating which runs first (AB, BA,
 * AB, ...), so the two of a pair see the same machine state (other processes, clock,
 * caches). The ratio is the median of the per-pair ratios t_A / t_B, its spread their
 * quartiles, for wall-clock time and for the process's CPU time (all threads): on a
 * machine shared with other busy processes, the wall clock of a run also counts the
 * time the run spent descheduled, which CPU time does not. run(ctx, which) does one run of A (which 0) or B (1) and returns 0, or -1
 * when it failed (reason printed). At least min_pairs pairs (1 .. CLI_MAX_PAIRS), then more
 * while the timed pairs so far took less than budget_ms (0: exactly min_pairs), up to
 * CLI_MAX_PAIRS: short cases get more pairs. */
#define CLI_MAX_PAIRS 64
typedef int (*cli_run_fn)(void *ctx, int which);
typedef struct cli_ab_ratio {
  double median, q1, q3; /* median and quartiles over the pairs of t_A / t_B */
} cli_ab_ratio;
typedef struct cli_ab_time {
  int pairs;
  double ms[2];      /* median wall-clock time of A and of B [ms] */
  double best_ms[2]; /* fastest run of each (wall clock) */
  cli_ab_ratio wall, cpu;
  double cpu_ratio[CLI_MAX_PAIRS]; /* each pair's t_A / t_B of CPU time */
} cli_ab_time;
int cli_time_ab(cli_run_fn run, void *ctx, int min_pairs, double budget_ms, cli_ab_time *out);

/* ---- seeded data ---------------------------------------------------------------------- */

typedef struct cli_rng {
  uint64_t s;
} cli_rng;
void cli_rng_seed(cli_rng *r, uint64_t seed);
uint64_t cli_rng_next(cli_rng *r);
/* n floats uniform in [-1, 1]. */
void cli_fill_uniform(cli_rng *r, float *x, int64_t n);
/* Uniform integer in [lo, hi]. */
int32_t cli_rng_int(cli_rng *r, int32_t lo, int32_t hi);

/* ---- the oracle ----------------------------------------------------------------------- */

/* Oracle output of config @p c on the tensors of @p a (dense ref[rows][n_heads*d], and
 * ref_lse[batch][n_heads][q_len] when not NULL), with the frequencies and attention
 * factor taken from rove_rope_inv_freq. Prints the reason and returns -1 on failure. */
int cli_oracle(const rove_attention_config *c, const rove_attention_args *a, double *ref,
               double *ref_lse);

/* max |out - ref| / max |ref| over rows x width (out has token stride out_stride, ref is
 * dense). Absolute when ref is all zero. NaN or a non-finite output gives +inf. */
double cli_max_rel_err(const float *out, int64_t out_stride, const double *ref, int64_t rows,
                       int64_t width);

/* max |lse - ref| / max(1, |ref|); -inf must match -inf exactly (else +inf). */
double cli_lse_err(const float *lse, const double *ref, int64_t n);

#endif
