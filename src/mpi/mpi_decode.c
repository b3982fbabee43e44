/* SPDX-License-Identifier: MIT */
/* rove_mpi_cache_attention (rove_mpi.h): one decode step over a KV cache sharded across
 * the ranks.
 *   1. MPI_Comm_dup; local validation; buffers; agreement (one MPI_Allreduce: statuses,
 *      and batch, q_len, root and the plan's fingerprint must match);
 *   2. MPI_Bcast from root of the queries and their positions, one message of
 *      batch * q_len tokens laid out [q: tokens][n_heads][head_dim] floats, [pos: tokens]
 *      int32;
 *   3. each rank: rove_kv_cache_attention over its slice (an empty slice is not called:
 *      its partial is LSE -inf), turned into one record per query row and head,
 *      [L, status, O[0 .. head_dim)] in double, in the output's row order
 *      ((b q_len + i) n_heads + h);
 *   4. MPI_Reduce of the records to root with a non-commutative MPI_Op (rmpi_record_merge):
 *      the merges follow the rank order, so the bits depend on the rank count only;
 *   5. root merges in its attention sinks (if any: one more record [sinks[h], 0, 0 ..]),
 *      rounds once to float and MPI_Bcasts [status int32][lse [batch][n_heads][q_len]]
 *      [out [batch][q_len][n_heads][head_dim]] (4-byte words), so every rank returns the
 *      same status and, where it asked for them, the same outputs. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"
#include "rove_mpi.h"

typedef struct {
  int32_t H, Hkv, d, causal, window;
  int64_t row, qs, os;  /* H d; token strides of q (root) and out */
  int64_t tokens, rows; /* batch q_len; tokens H */
  int rank, size, root;
  float *bc;      /* the broadcast queries and positions */
  float *lo, *ll; /* this slice's output and LSE */
  double *rec;    /* [rows][d + 2] */
  float *res;     /* [1 + rows + tokens row] words */
  MPI_Datatype tok, rec_t, word;
  MPI_Op op;
  MPI_Comm comm_dup; /* the call's private duplicate */
} dec;

/* The user function of the reduction: inout[i] = in[i] (+) inout[i] per record. */
static void merge_op(void *in, void *inout, int *len, MPI_Datatype *type) {
  int bytes = 0;
  MPI_Type_size(*type, &bytes);
  const int w = bytes / (int)sizeof(double);
  for (int i = 0; i < *len; i++)
    rmpi_record_merge((const double *)in + (int64_t)i * w, (double *)inout + (int64_t)i * w, w - 2);
}

static rove_status check_local(dec *x, const rove_plan *p, const rove_kv_cache *c,
                               const rove_attention_args *a, int64_t *key) {
  *key = 0;
  if (!p || !c || !a) return ROVE_ERR_INVALID_ARGUMENT;
  *key = rmpi_plan_key(p, &x->H, &x->Hkv, &x->d, &x->causal, &x->window);
  if (*key < 0) return ROVE_ERR_INVALID_ARGUMENT;
  /* the cache must hold K and V as p would have stored them: its own plan, or one with
   * the same fingerprint (a cache of another plan would give a silently wrong answer) */
  const rove_plan *cp = rove_kv_cache_plan(c);
  if (cp != p) {
    int32_t h, hk, d, causal, window;
    if (rmpi_plan_key(cp, &h, &hk, &d, &causal, &window) != *key) return ROVE_ERR_INVALID_ARGUMENT;
  }
  if (a->batch <= 0 || a->q_len <= 0 || a->k || a->v || a->kv_pos || a->kv_len != 0 ||
      a->k_stride || a->v_stride || a->kv_head_stride || a->k_batch_stride || a->v_batch_stride)
    return ROVE_ERR_INVALID_ARGUMENT;
  if (x->root < 0 || x->root >= x->size) return ROVE_ERR_INVALID_ARGUMENT;
  if (a->q_angles || a->kv_angles) return ROVE_ERR_UNSUPPORTED;
  const int is_root = x->rank == x->root;
  if (is_root && (!a->q || !a->q_pos || !a->out)) return ROVE_ERR_INVALID_ARGUMENT;
  x->row = (int64_t)x->H * x->d;
  if (a->q_stride < 0 || a->out_stride < 0) return ROVE_ERR_INVALID_ARGUMENT;
  x->qs = a->q_stride ? a->q_stride : x->row, x->os = a->out_stride ? a->out_stride : x->row;
  if (x->qs < x->row || x->os < x->row) return ROVE_ERR_INVALID_ARGUMENT;
  x->tokens = (int64_t)a->batch * a->q_len;
  int64_t words;
  if (!rmpi_mul(x->tokens, x->H, &x->rows) || x->rows > INT_MAX || x->tokens > INT_MAX ||
      !rmpi_mul(x->tokens, x->row, &words) || !rmpi_add(words, 1 + x->rows, &words) ||
      words > INT_MAX)
    return ROVE_ERR_SIZE_OVERFLOW;
  const int64_t bq = rmpi_span_bytes(x->tokens, x->qs, x->row, 4),
                bo = rmpi_span_bytes(x->tokens, x->os, x->row, 4), bl = x->rows * 4;
  if (bq < 0 || bo < 0) return ROVE_ERR_SIZE_OVERFLOW;
  const float *q = is_root ? a->q : NULL;
  const int32_t *qp = is_root ? a->q_pos : NULL;
  if (rmpi_overlap(a->out, bo, q, bq) || rmpi_overlap(a->out, bo, qp, x->tokens * 4) ||
      rmpi_overlap(a->lse, bl, q, bq) || rmpi_overlap(a->lse, bl, qp, x->tokens * 4) ||
      rmpi_overlap(a->out, bo, a->lse, bl))
    return ROVE_ERR_INVALID_ARGUMENT;
  /* sinks are read on root only, like q (there: finite, no output over them) */
  return is_root ? rmpi_check_sinks(a->sinks, x->H, a->out, bo, a->lse, bl) : ROVE_OK;
}

static rove_status alloc_buffers(dec *x) {
  rove_status st = rmpi_unit_type((x->row + 1) * 4, &x->tok);
  if (st == ROVE_OK) st = rmpi_unit_type(((int64_t)x->d + 2) * 8, &x->rec_t);
  if (st == ROVE_OK) st = rmpi_unit_type(4, &x->word);
  if (st != ROVE_OK) return st;
  if (MPI_Op_create(merge_op, 0, &x->op) != MPI_SUCCESS) {
    x->op = MPI_OP_NULL;
    return ROVE_ERR_INTERNAL;
  }
  x->bc = rmpi_alloc(x->tokens * (x->row + 1) * 4);
  x->lo = rmpi_alloc(x->tokens * x->row * 4), x->ll = rmpi_alloc(x->rows * 4);
  x->rec = rmpi_alloc(x->rows * ((int64_t)x->d + 2) * 8);
  x->res = rmpi_alloc((1 + x->rows + x->tokens * x->row) * 4);
  if (!x->bc || !x->lo || !x->ll || !x->rec || !x->res) return ROVE_ERR_OUT_OF_MEMORY;
  return ROVE_OK;
}

static void free_buffers(dec *x) {
  free(x->bc), free(x->lo), free(x->ll), free(x->rec), free(x->res);
  rmpi_free_type(&x->tok), rmpi_free_type(&x->rec_t), rmpi_free_type(&x->word);
  if (x->op != MPI_OP_NULL) MPI_Op_free(&x->op);
}

/* Step 3: this slice's partial as records (L = -inf for an empty slice or a failure). */
static void local_records(dec *x, const rove_kv_cache *c, const rove_attention_args *a) {
  const int64_t d = x->d, H = x->H, L = a->q_len;
  rove_status st = ROVE_OK;
  if (rove_kv_cache_length(c) > 0) {
    rove_attention_args y;
    memset(&y, 0, sizeof y);
    y.batch = a->batch, y.q_len = a->q_len, y.q = x->bc;
    y.q_pos = (const int32_t *)(x->bc + x->tokens * x->row);
    y.out = x->lo, y.lse = x->ll;
    st = rove_kv_cache_attention(c, &y);
  }
  const int have = rove_kv_cache_length(c) > 0 && st == ROVE_OK;
  for (int64_t t = 0; t < x->tokens; t++)
    for (int64_t h = 0; h < H; h++) {
      double *r = x->rec + (t * H + h) * (d + 2);
      const int64_t b = t / L, i = t % L;
      r[0] = have ? (double)x->ll[(b * H + h) * L + i] : -INFINITY;
      r[1] = (double)st;
      for (int64_t k = 0; k < d; k++) r[2 + k] = have ? (double)x->lo[(t * H + h) * d + k] : 0.0;
    }
}

/* Step 5 on root: the merged records, with root's attention sinks merged in last (one
 * more part: LSE sinks[h], output 0), rounded once, behind the agreed status. */
static void root_result(dec *x, int32_t q_len, const float *sinks) {
  const int64_t d = x->d, H = x->H, L = q_len;
  int32_t st = ROVE_OK;
  float *lse = x->res + 1, *out = lse + x->rows;
  for (int64_t t = 0; t < x->tokens; t++)
    for (int64_t h = 0; h < H; h++) {
      double *r = x->rec + (t * H + h) * (d + 2);
      if (sinks) rmpi_record_sink(sinks[h], r, x->d);
      if (r[1] > st) st = (int32_t)r[1];
      const int64_t b = t / L, i = t % L;
      float *o = out + (t * H + h) * d;
      const int nan = isnan(r[0]) || r[0] == INFINITY, none = r[0] == -INFINITY;
      lse[(b * H + h) * L + i] = nan ? NAN : (float)r[0];
      for (int64_t k = 0; k < d; k++) o[k] = nan ? NAN : none ? 0.0f : (float)r[2 + k];
    }
  memcpy(x->res, &st, sizeof st);
}

static void write_outputs(const dec *x, const rove_attention_args *a) {
  const float *lse = x->res + 1, *out = lse + x->rows;
  if (a->out)
    for (int64_t t = 0; t < x->tokens; t++)
      memcpy(a->out + t * x->os, out + t * x->row, sizeof(float) * (size_t)x->row);
  if (a->lse) memcpy(a->lse, lse, sizeof(float) * (size_t)x->rows);
}

/* Steps 2 to 5 after a successful agreement. */
static rove_status run(dec *x, const rove_kv_cache *c, const rove_attention_args *a) {
  if (x->rank == x->root) {
    for (int64_t t = 0; t < x->tokens; t++)
      memcpy(x->bc + t * x->row, a->q + t * x->qs, sizeof(float) * (size_t)x->row);
    memcpy(x->bc + x->tokens * x->row, a->q_pos, sizeof(int32_t) * (size_t)x->tokens);
  }
  if (MPI_Bcast(x->bc, (int)x->tokens, x->tok, x->root, x->comm_dup) != MPI_SUCCESS)
    return ROVE_ERR_INTERNAL;
  local_records(x, c, a);
  const void *send = x->rank == x->root ? MPI_IN_PLACE : (const void *)x->rec;
  if (MPI_Reduce(send, x->rec, (int)x->rows, x->rec_t, x->op, x->root, x->comm_dup) != MPI_SUCCESS)
    return ROVE_ERR_INTERNAL;
  if (x->rank == x->root) root_result(x, a->q_len, a->sinks);
  const int words = (int)(1 + x->rows + x->tokens * x->row);
  if (MPI_Bcast(x->res, words, x->word, x->root, x->comm_dup) != MPI_SUCCESS)
    return ROVE_ERR_INTERNAL;
  int32_t st;
  memcpy(&st, x->res, sizeof st);
  if (st == ROVE_OK) write_outputs(x, a);
  return (rove_status)st;
}

rove_status rove_mpi_cache_attention(const rove_plan *p, const rove_kv_cache *c,
                                     const rove_attention_args *a, int root, MPI_Comm comm) {
  rove_status st = rmpi_check_comm(comm);
  if (st != ROVE_OK) return st;
  dec x;
  memset(&x, 0, sizeof x);
  x.tok = x.rec_t = x.word = MPI_DATATYPE_NULL, x.op = MPI_OP_NULL, x.root = root;
  x.comm_dup = MPI_COMM_NULL;
  st = rmpi_open(comm, &x.comm_dup, &x.rank, &x.size);
  if (st != ROVE_OK) return st;
  int64_t key = 0;
  rove_status local = check_local(&x, p, c, a, &key);
  if (local == ROVE_OK) local = alloc_buffers(&x);
  rmpi_agree g = {.status = local, .n_same = 4};
  g.same[0] = local == ROVE_OK ? a->batch : 0;
  g.same[1] = local == ROVE_OK ? a->q_len : 0;
  g.same[2] = root, g.same[3] = key;
  st = rmpi_agree_run(x.comm_dup, &g);
  if (st == ROVE_OK) st = run(&x, c, a);
  free_buffers(&x);
  rmpi_close(&x.comm_dup);
  return st;
}
