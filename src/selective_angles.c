/* SPDX-License-Identifier: MIT */
/* rove_selective_temperatures and rove_selective_angles (include/rove.h, "Selective RoPE").
 *
 * Layout: phi and angles are [batch][seq_len][row] with row = n_heads * n_pairs (the
 * (head, pair) entries of one token, contiguous); carries are [batch][row]. Packed
 * sequences (rove_selective_angles_packed): one row of cu[n] tokens, sequence b its tokens
 * cu[b] .. cu[b+1]-1 with carry row b, run as a batch row of its own.
 *
 * Each task owns one batch row and a block of at most ANGLE_BLOCK consecutive row entries,
 * keeps their running sums c in a local array and walks the tokens in order, calling the
 * ISA's accumulation kernel once per token (c += phi; angle = temp * c, vectorised across
 * the block). Every sum is sequential over tokens in double whatever the ISA, the block
 * split or the thread count, so the angles are bit-identical in every case and chunked
 * calls that pass the carry on equal one call. */
#include <string.h>

#include "plan.h"
#include "util.h"
#include "selective.h"

#define ANGLE_BLOCK 512        /* row entries per task: 8 KiB of c + temp on the stack */
#define CHECK_CHUNK 65536      /* phi entries per task of the finiteness pass */
#define SERIAL_BELOW 32768     /* fewer entries than this: no threads */

rove_status rove_selective_temperatures(int32_t n_pairs, double *temp) {
  if (!temp || n_pairs <= 0) return ROVE_ERR_INVALID_ARGUMENT;
  rove_selective_temp_default(n_pairs, temp);
  return ROVE_OK;
}

typedef struct {
  int32_t seq_len, n_pairs;
  const int32_t *cu; /* packed sequences: sequence b is tokens cu[b] .. cu[b+1]-1 (NULL:
                        batch rows of seq_len tokens) */
  int64_t row, n_blocks, total;
  const float *phi;
  const double *temp, *carry_in;
  double *carry_out, *angles;
  rove_angle_accum_fn accum;
  int bad; /* set by the finiteness pass */
} angles_ctx;

/* Finiteness of one chunk of phi (exponent bits all ones = inf or NaN). */
static void check_task(int64_t i, int tid, void *arg) {
  (void)tid;
  angles_ctx *x = arg;
  const int64_t lo = i * CHECK_CHUNK;
  const int64_t hi = x->total - lo < CHECK_CHUNK ? x->total : lo + CHECK_CHUNK;
  uint32_t bad = 0;
  for (int64_t j = lo; j < hi; j++) {
    uint32_t u;
    memcpy(&u, x->phi + j, sizeof u);
    bad |= (uint32_t)((u & 0x7F800000u) == 0x7F800000u);
  }
  if (bad) __atomic_store_n(&x->bad, 1, __ATOMIC_RELAXED);
}

/* One (batch row or packed sequence, block of row entries) over its tokens. */
static void angles_task(int64_t i, int tid, void *arg) {
  (void)tid;
  const angles_ctx *x = arg;
  const int64_t b = i / x->n_blocks, j0 = (i % x->n_blocks) * ANGLE_BLOCK;
  const int64_t t0 = rove_seq_start(x->cu, b, x->seq_len), len = rove_seq_len(x->cu, b, x->seq_len);
  const int64_t n = x->row - j0 < ANGLE_BLOCK ? x->row - j0 : ANGLE_BLOCK;
  double c[ANGLE_BLOCK], tb[ANGLE_BLOCK];
  for (int64_t j = 0; j < n; j++) {
    tb[j] = x->temp[(j0 + j) % x->n_pairs]; /* temp expanded over the heads of the block */
    c[j] = x->carry_in ? x->carry_in[b * x->row + j0 + j] : 0.0;
  }
  for (int64_t t = 0; t < len; t++) {
    const int64_t off = (t0 + t) * x->row + j0;
    x->accum(c, x->angles + off, x->phi + off, tb, n);
  }
  if (x->carry_out) memcpy(x->carry_out + b * x->row + j0, c, (size_t)n * sizeof(double));
}

/* Sizes: row, the element count and its bytes (as doubles) must fit int64. */
static rove_status angle_sizes(int32_t batch, int32_t seq_len, int32_t n_heads, int32_t n_pairs,
                               int64_t *row, int64_t *total, int64_t *carry) {
  int64_t bt;
  if (!rove_mul_i64(n_heads, n_pairs, row) || !rove_mul_i64(batch, seq_len, &bt) ||
      !rove_mul_i64(bt, *row, total) || !rove_mul_i64(batch, *row, carry) ||
      *total > INT64_MAX / (int64_t)sizeof(double))
    return ROVE_ERR_SIZE_OVERFLOW;
  return ROVE_OK;
}

static int all_finite_d(const double *v, int64_t n) { return !v || rove_angles_finite(v, n); }

/* No output may overlap an input or the other output (carry_out == carry_in is allowed);
 * cu_bytes: the packed sequences' cu array (0 without). */
static int overlaps(const angles_ctx *x, int64_t carry, size_t cu_bytes) {
  const size_t na = (size_t)x->total * sizeof(double), nc = (size_t)carry * sizeof(double);
  const size_t np = (size_t)x->total * sizeof(float), nt = (size_t)x->n_pairs * sizeof(double);
  if (rove_overlap(x->angles, na, x->phi, np) || rove_overlap(x->angles, na, x->temp, nt) ||
      rove_overlap(x->angles, na, x->cu, cu_bytes) ||
      (x->carry_out && rove_overlap(x->carry_out, nc, x->cu, cu_bytes)))
    return 1;
  if (x->carry_in && rove_overlap(x->angles, na, x->carry_in, nc)) return 1;
  if (!x->carry_out) return 0;
  if (rove_overlap(x->carry_out, nc, x->angles, na) || rove_overlap(x->carry_out, nc, x->phi, np) ||
      rove_overlap(x->carry_out, nc, x->temp, nt))
    return 1;
  return x->carry_in && x->carry_in != x->carry_out &&
         rove_overlap(x->carry_out, nc, x->carry_in, nc);
}

/* rove_selective_angles (cu NULL: batch rows of seq_len tokens) and
 * rove_selective_angles_packed (cu: batch sequences of cu[batch] tokens in all, seq_len
 * the total). */
static rove_status angles_run(int32_t batch, int32_t seq_len, const int32_t *cu,
                              int32_t n_heads, int32_t n_pairs, const float *phi,
                              const double *temp, const double *carry_in, double *carry_out,
                              double *angles) {
  if (!phi || !angles || batch <= 0 || seq_len <= 0 || n_heads <= 0 || n_pairs <= 0)
    return ROVE_ERR_INVALID_ARGUMENT;
  angles_ctx x = {seq_len, n_pairs, cu, 0, 0, 0, phi, temp, carry_in, carry_out, angles, NULL, 0};
  int64_t carry = 0;
  /* packed: the sizes of one row of seq_len tokens, the carries of batch sequences */
  rove_status st = angle_sizes(cu ? 1 : batch, seq_len, n_heads, n_pairs, &x.row, &x.total, &carry);
  if (st == ROVE_OK && cu && !rove_mul_i64(batch, x.row, &carry)) st = ROVE_ERR_SIZE_OVERFLOW;
  if (st != ROVE_OK) return st;
  const size_t cu_bytes = cu ? ((size_t)batch + 1) * sizeof(int32_t) : 0;
  double temp_default[ROVE_MAX_HEAD_DIM / 2];
  double *temp_own = NULL;
  if (!temp) { /* the defaults, on the stack when they fit */
    temp_own = n_pairs <= ROVE_MAX_HEAD_DIM / 2 ? temp_default
                                               : rove_alloc((size_t)n_pairs * sizeof(double));
    if (!temp_own) return ROVE_ERR_OUT_OF_MEMORY;
    rove_selective_temp_default(n_pairs, temp_own);
    x.temp = temp_own;
  }
  st = ROVE_OK;
  if (!all_finite_d(x.temp, n_pairs) || !all_finite_d(carry_in, carry) ||
      overlaps(&x, carry, cu_bytes))
    st = ROVE_ERR_INVALID_ARGUMENT;
  const int32_t threads = x.total < SERIAL_BELOW ? 1 : rove_default_threads();
  if (st == ROVE_OK) {
    rove_parallel_for(threads, (x.total + CHECK_CHUNK - 1) / CHECK_CHUNK, check_task, &x);
    if (x.bad) st = ROVE_ERR_INVALID_ARGUMENT;
  }
  if (st == ROVE_OK) {
    x.accum = rove_kernels_for(rove_best_isa())->angle_accum;
    x.n_blocks = (x.row + ANGLE_BLOCK - 1) / ANGLE_BLOCK;
    rove_parallel_for(threads, (int64_t)batch * x.n_blocks, angles_task, &x);
  }
  if (temp_own && temp_own != temp_default) rove_free(temp_own);
  return st;
}

rove_status rove_selective_angles(int32_t batch, int32_t seq_len, int32_t n_heads,
                                  int32_t n_pairs, const float *phi, const double *temp,
                                  const double *carry_in, double *carry_out, double *angles) {
  return angles_run(batch, seq_len, NULL, n_heads, n_pairs, phi, temp, carry_in, carry_out,
                    angles);
}

rove_status rove_selective_angles_packed(int32_t n_seqs, const int32_t *cu_seqlens,
                                         int32_t n_heads, int32_t n_pairs, const float *phi,
                                         const double *temp, const double *carry_in,
                                         double *carry_out, double *angles) {
  int64_t total = 0;
  if (n_seqs <= 0 || !rove_check_cu(cu_seqlens, n_seqs, &total) || total <= 0)
    return ROVE_ERR_INVALID_ARGUMENT;
  return angles_run(n_seqs, (int32_t)total, cu_seqlens, n_heads, n_pairs, phi, temp, carry_in,
                    carry_out, angles);
}
