/* SPDX-License-Identifier: MIT */
/* The steps of ring prefill. Rank r of P holds at step s (0 .. P-1) the K/V block of rank
 * (r - s) mod P. Each step:
 *   1. post MPI_Irecv of the next block (from r - 1) into the free buffer and MPI_Isend of
 *      the held block (to r + 1) (not at the last step: each block makes P - 1 hops);
 *   2. attend this rank's queries over the held block, in pieces of at most
 *      RMPI_PIECE_ROWS query rows of one batch row (rove_attention_forward, batch 1,
 *      global positions, LSE), each merged into the running double-precision result; a
 *      piece whose queries provably see no key of the block is skipped (may_see), and
 *      between pieces MPI_Testall lets MPI move the transfer on;
 *   3. wait for both transfers; the received block (its length from MPI_Get_count) is
 *      held next.
 * Reading a buffer while it is being sent is allowed (MPI-3), so the held block is
 * attended while it travels on; the buffer being received into is never touched. */
#include <string.h>

#include "mpi_ring.h"

/* Views into a block buffer holding len tokens per batch row. */
typedef struct {
  const float *k, *v;
  const int32_t *pos;
  int32_t len;
} block;

static block view(const rmpi_ring *r, const void *buf, int32_t len) {
  const int64_t n = (int64_t)r->a->batch * len;
  block b;
  b.k = buf;
  b.v = b.k + n * r->row_kv;
  b.pos = (const int32_t *)(b.v + n * r->row_kv);
  b.len = len;
  return b;
}

/* Copy this rank's K, V (at their strides) and positions into block buffer 0. */
static void pack_own(const rmpi_ring *r) {
  const rove_attention_args *a = r->a;
  const int64_t n = (int64_t)a->batch * a->kv_len, w = r->row_kv;
  float *k = r->blk[0], *v = k + n * w;
  int32_t *pos = (int32_t *)(v + n * w);
  for (int64_t t = 0; t < n; t++) {
    memcpy(k + t * w, a->k + t * r->ks, sizeof(float) * (size_t)w);
    memcpy(v + t * w, a->v + t * r->vs, sizeof(float) * (size_t)w);
  }
  if (n > 0) memcpy(pos, a->kv_pos, sizeof(int32_t) * (size_t)n);
}

static void min_max(const int32_t *x, int64_t n, int64_t *lo, int64_t *hi) {
  int64_t a = INT64_MAX, b = INT64_MIN;
  for (int64_t i = 0; i < n; i++) {
    if (x[i] < a) a = x[i];
    if (x[i] > b) b = x[i];
  }
  *lo = a, *hi = b;
}

/* Can any query with position in [q0, q1] see any key with position in [k0, k1]? The
 * distances P - p lie in [q0 - k1, q1 - k0] (int64: no overflow); visible needs
 * (!causal || P - p >= 0) and (window == 0 || |P - p| < window) (docs/DESIGN.md §1). */
static int may_see(const rmpi_ring *r, int64_t q0, int64_t q1, int64_t k0, int64_t k1) {
  const int64_t lo = q0 - k1, hi = q1 - k0, w = r->window;
  if (r->causal && hi < 0) return 0;
  if (w > 0 && (lo >= w || hi <= -w)) return 0;
  return 1;
}

/* Attend every query piece over block b, merging as it goes; drives the transfers in
 * reqs (when *pending) with MPI_Testall between pieces. Returns the first failure of a
 * local call (later pieces are then skipped) or ROVE_ERR_INTERNAL for an MPI error. */
static rove_status attend_block(rmpi_ring *r, block b, MPI_Request *reqs, MPI_Status *sts,
                                int *pending, rove_status *local) {
  const rove_attention_args *a = r->a;
  if (b.len == 0 || a->q_len == 0) return ROVE_OK;
  for (int32_t bi = 0; bi < a->batch; bi++) {
    int64_t k0, k1;
    min_max(b.pos + (int64_t)bi * b.len, b.len, &k0, &k1);
    for (int32_t i0 = 0; i0 < a->q_len && *local == ROVE_OK; i0 += r->piece_rows) {
      const int32_t n = a->q_len - i0 < r->piece_rows ? a->q_len - i0 : r->piece_rows;
      const int32_t *qp = a->q_pos + (int64_t)bi * a->q_len + i0;
      int64_t q0, q1;
      min_max(qp, n, &q0, &q1);
      if (!may_see(r, q0, q1, k0, k1)) continue;
      rove_attention_args x;
      memset(&x, 0, sizeof x);
      x.batch = 1, x.q_len = n, x.kv_len = b.len;
      x.q = a->q + ((int64_t)bi * a->q_len + i0) * r->qs, x.q_stride = r->qs;
      x.k = b.k + (int64_t)bi * b.len * r->row_kv;
      x.v = b.v + (int64_t)bi * b.len * r->row_kv;
      x.q_pos = qp, x.kv_pos = b.pos + (int64_t)bi * b.len;
      x.out = r->piece_out, x.lse = r->piece_lse;
      *local = rove_attention_forward(r->p, &x);
      if (*local != ROVE_OK) break;
      rmpi_acc_add(&r->acc, bi, i0, n, r->piece_out, r->piece_lse);
      if (*pending) {
        int done = 0;
        if (MPI_Testall(2, reqs, &done, sts) != MPI_SUCCESS) return ROVE_ERR_INTERNAL;
        if (done) *pending = 0;
      }
    }
  }
  return ROVE_OK;
}

rove_status rmpi_ring_steps(rmpi_ring *r, int *mpi_err) {
  const int P = r->size, next = (r->rank + 1) % P, prev = (r->rank + P - 1) % P;
  const int64_t max_tokens = (int64_t)r->a->batch * r->max_len; /* <= INT_MAX: checked */
  rove_status local = ROVE_OK;
  *mpi_err = 0;
  pack_own(r);
  int held = 0;
  int32_t len = r->a->kv_len;
  for (int s = 0; s < P; s++) {
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status sts[2];
    int pending = s < P - 1;
    if (pending) {
      const int n_send = (int)((int64_t)r->a->batch * len);
      if (MPI_Irecv(r->blk[1 - held], (int)max_tokens, r->tok, prev, 0, r->comm, &reqs[1]) !=
              MPI_SUCCESS ||
          MPI_Isend(r->blk[held], n_send, r->tok, next, 0, r->comm, &reqs[0]) != MPI_SUCCESS) {
        *mpi_err = 1;
        return ROVE_ERR_INTERNAL;
      }
    }
    if (attend_block(r, view(r, r->blk[held], len), reqs, sts, &pending, &local) != ROVE_OK) {
      *mpi_err = 1;
      return ROVE_ERR_INTERNAL;
    }
    if (s == P - 1) break;
    if (pending && MPI_Waitall(2, reqs, sts) != MPI_SUCCESS) {
      *mpi_err = 1;
      return ROVE_ERR_INTERNAL;
    }
    int count = 0;
    if (MPI_Get_count(&sts[1], r->tok, &count) != MPI_SUCCESS || count == MPI_UNDEFINED ||
        count % r->a->batch != 0 || count / r->a->batch > r->max_len) {
      *mpi_err = 1;
      return ROVE_ERR_INTERNAL;
    }
    len = count / r->a->batch;
    held = 1 - held;
  }
  return local;
}
