/* SPDX-License-Identifier: MIT */
/* Helpers of the MPI suites (tests/mpi/test_mpi_*.c, run by ctest through mpiexec with 2
 * and 4 ranks): MPI start-up, collective pass/fail, a whole sequence made identically on
 * every rank (so that each rank can compute the single-process reference itself), and the
 * gathering of a rank's shard from it.
 *
 * Collective checks: a cmocka assertion that fails on one rank only would make it leave
 * the test while the others still call collectives. So within a test, checks only record
 * failures (mt_check, with a message on stderr naming the rank), and mt_end() agrees on
 * them with one MPI_Allreduce before asserting, on every rank alike. */
#ifndef ROVE_MPI_TESTUTIL_H
#define ROVE_MPI_TESTUTIL_H

#include "rove_mpi.h"
#include "testutil.h"

extern int mt_rank, mt_size; /* in MPI_COMM_WORLD */

/* MPI_Init; ranks above 0 send cmocka's progress lines (stdout) to /dev/null, failures
 * (stderr) stay. Call first in main; mt_finish() after the tests (returns main's code). */
void mt_init(int *argc, char ***argv);
int mt_finish(int failed);

/* Record a failure unless cond (printf-style message, prefixed with the rank). */
void mt_check(int cond, const char *fmt, ...);
/* Agree on this test's checks over MPI_COMM_WORLD, then assert (every rank alike). */
void mt_end(void);

/* A whole sequence, the same bits on every rank: q [B][N][H][d], k, v [B][N][Hkv][d],
 * pos [B][N] (global positions; pos0 + t, or shuffled per batch row when shuffle). */
typedef struct {
  int B, N, H, Hkv, d;
  float *q, *k, *v;
  int32_t *pos;
} mt_seq;
void mt_seq_make(mt_seq *s, int B, int N, int H, int Hkv, int d, int32_t pos0, int shuffle,
                 uint64_t seed);
void mt_seq_free(mt_seq *s);

/* rove_attention_forward over the whole sequence (all queries, all keys, explicit
 * positions; sinks NULL or [H]): out [B][N][H][d], lse [B][H][N] (allocated). */
void mt_full_forward(const rove_plan *p, const mt_seq *s, const float *sinks, float **out,
                     float **lse);

/* A shard: n tokens (indices idx[0..n) into the sequence, the same for every batch row),
 * gathered dense: rows [B][n][heads][d] and positions [B][n]. NULL for n == 0. */
float *mt_gather(const float *x, int B, int N, int row, const int *idx, int n);
int32_t *mt_gather_pos(const mt_seq *s, const int *idx, int n);

/* Compare n_rows rows got [B][n][H][d] / lse [B][H][n] with the full reference at the
 * tokens idx: output max error relative to the max |reference| over the shard, LSE error
 * relative to max(1, |lse|) (-inf must match exactly). Records failures with `what`. */
void mt_compare(const char *what, const mt_seq *s, const int *idx, int n, const float *got,
                const float *got_lse, const float *ref, const float *ref_lse, double tol_out,
                double tol_lse);

/* The indices of rank r's tokens when N tokens are assigned by owner[t] (owner of token
 * t); writes them to idx (N entries) and returns their count. */
int mt_tokens_of(const int *owner, int N, int r, int *idx);

#endif
