/* SPDX-License-Identifier: MIT */
/* librove_mpi's plumbing: checked sizes, the overlap test, the private communicator of a
 * call (MPI_Comm_dup + MPI_ERRORS_RETURN) and the one-allreduce agreement on statuses and
 * sizes that every collective runs before it sends anything whose size depends on them.
 *
 * Agreement vector (int64, MPI_MAX): [status, max[0..n_max), same[0], -same[0], ...].
 * max(x) over the ranks and max(-x) = -min(x) come out of one reduction, so a value that
 * differs between ranks is seen by every rank alike and each returns the same status. */
#include <limits.h>
#include <stdlib.h>

#include "mpi_internal.h"

/* librove's own checked arithmetic and overlap test (src/util.h) are hidden symbols of
 * librove.so, and librove_mpi uses only its public API: hence these three small copies. */
int rmpi_mul(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
int rmpi_add(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }

int64_t rmpi_span_bytes(int64_t n, int64_t stride, int64_t width, int64_t elem) {
  if (n <= 0) return 0;
  int64_t t;
  if (!rmpi_mul(n - 1, stride, &t) || !rmpi_add(t, width, &t) || !rmpi_mul(t, elem, &t)) return -1;
  return t;
}

int rmpi_overlap(const void *a, int64_t na, const void *b, int64_t nb) {
  if (!a || !b || na <= 0 || nb <= 0) return 0;
  const uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
  return a0 < b0 + (uintptr_t)nb && b0 < a0 + (uintptr_t)na;
}

void *rmpi_alloc(int64_t n) {
  if (n < 0 || (uint64_t)n > (uint64_t)SIZE_MAX) return NULL;
  return malloc(n > 0 ? (size_t)n : 1);
}

rove_status rmpi_check_comm(MPI_Comm comm) {
  int init = 0, fin = 0, inter = 0;
  if (MPI_Initialized(&init) != MPI_SUCCESS || !init) return ROVE_ERR_INVALID_ARGUMENT;
  if (MPI_Finalized(&fin) != MPI_SUCCESS || fin) return ROVE_ERR_INVALID_ARGUMENT;
  if (comm == MPI_COMM_NULL) return ROVE_ERR_INVALID_ARGUMENT;
  if (MPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return ROVE_ERR_INVALID_ARGUMENT;
  return ROVE_OK;
}

rove_status rmpi_open(MPI_Comm comm, MPI_Comm *dup, int *rank, int *size) {
  *dup = MPI_COMM_NULL;
  if (MPI_Comm_dup(comm, dup) != MPI_SUCCESS) {
    *dup = MPI_COMM_NULL;
    return ROVE_ERR_INTERNAL;
  }
  if (MPI_Comm_set_errhandler(*dup, MPI_ERRORS_RETURN) != MPI_SUCCESS ||
      MPI_Comm_rank(*dup, rank) != MPI_SUCCESS || MPI_Comm_size(*dup, size) != MPI_SUCCESS) {
    rmpi_close(dup);
    return ROVE_ERR_INTERNAL;
  }
  return ROVE_OK;
}

void rmpi_close(MPI_Comm *dup) {
  if (*dup != MPI_COMM_NULL) MPI_Comm_free(dup);
  *dup = MPI_COMM_NULL;
}

rove_status rmpi_agree_run(MPI_Comm dup, rmpi_agree *g) {
  int64_t v[1 + RMPI_AGREE_MAX * 3];
  int n = 0;
  v[n++] = (int64_t)g->status;
  for (int i = 0; i < g->n_max; i++) v[n++] = g->max[i];
  for (int i = 0; i < g->n_same; i++) v[n++] = g->same[i], v[n++] = -g->same[i];
  if (MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, MPI_MAX, dup) != MPI_SUCCESS)
    return ROVE_ERR_INTERNAL;
  n = 1;
  for (int i = 0; i < g->n_max; i++) g->max[i] = v[n++];
  int differ = 0;
  for (int i = 0; i < g->n_same; i++, n += 2) differ |= v[n] != -v[n + 1];
  if (v[0] != ROVE_OK) return (rove_status)v[0];
  return differ ? ROVE_ERR_INVALID_ARGUMENT : ROVE_OK;
}

rove_status rmpi_agree_status(MPI_Comm dup, rove_status local) {
  rmpi_agree g = {.status = local};
  return rmpi_agree_run(dup, &g);
}

rove_status rmpi_unit_type(int64_t bytes, MPI_Datatype *t) {
  *t = MPI_DATATYPE_NULL;
  if (bytes <= 0 || bytes > INT_MAX) return ROVE_ERR_SIZE_OVERFLOW;
  if (MPI_Type_contiguous((int)bytes, MPI_BYTE, t) != MPI_SUCCESS) {
    *t = MPI_DATATYPE_NULL;
    return ROVE_ERR_INTERNAL;
  }
  if (MPI_Type_commit(t) != MPI_SUCCESS) {
    rmpi_free_type(t);
    return ROVE_ERR_INTERNAL;
  }
  return ROVE_OK;
}

void rmpi_free_type(MPI_Datatype *t) {
  if (*t != MPI_DATATYPE_NULL) MPI_Type_free(t);
  *t = MPI_DATATYPE_NULL;
}
