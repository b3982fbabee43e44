/* SPDX-License-Identifier: MIT */
/* rove_mpi_split_positions: which global positions a rank holds under the contiguous and
 * the zig-zag split (rove_mpi.h). Chunk c of k equal chunks of n tokens is the token
 * range [floor(c n / k), floor((c + 1) n / k)) (sizes differ by at most one), computed in
 * int64. Contiguous: k = P, rank r takes chunk r. Zig-zag: k = 2P, rank r takes chunks r
 * and 2P - 1 - r, in that order, so that under a causal mask each rank gets one early
 * (cheap) and one late (expensive) chunk and the same work. Local: no MPI call. */
#include "rove_mpi.h"

#include "mpi_internal.h"

static int64_t chunk_start(int64_t c, int64_t n, int64_t k) { return c * n / k; }

rove_status rove_mpi_split_positions(rove_mpi_split kind, int32_t seq_len, int32_t n_ranks,
                                     int32_t rank, int32_t pos0, int32_t *pos, int32_t cap,
                                     int32_t *n) {
  if (!n || seq_len < 0 || n_ranks < 1 || rank < 0 || rank >= n_ranks)
    return ROVE_ERR_INVALID_ARGUMENT;
  if (kind != ROVE_MPI_SPLIT_CONTIGUOUS && kind != ROVE_MPI_SPLIT_ZIGZAG)
    return ROVE_ERR_INVALID_ARGUMENT;
  if (seq_len > 0 && (int64_t)pos0 + seq_len - 1 > INT32_MAX) return ROVE_ERR_SIZE_OVERFLOW;
  const int zig = kind == ROVE_MPI_SPLIT_ZIGZAG;
  const int64_t k = zig ? 2 * (int64_t)n_ranks : n_ranks;
  if (k > INT32_MAX) return ROVE_ERR_SIZE_OVERFLOW;
  /* the rank's chunks: [c0, c0 + 1) and, for zig-zag, [c1, c1 + 1) */
  const int64_t c0 = rank, c1 = k - 1 - rank;
  const int64_t a0 = chunk_start(c0, seq_len, k), a1 = chunk_start(c0 + 1, seq_len, k);
  int64_t b0 = 0, b1 = 0;
  if (zig) b0 = chunk_start(c1, seq_len, k), b1 = chunk_start(c1 + 1, seq_len, k);
  const int64_t count = (a1 - a0) + (b1 - b0);
  if (pos) {
    if (cap < count) return ROVE_ERR_INVALID_ARGUMENT;
    int64_t w = 0;
    for (int64_t t = a0; t < a1; t++) pos[w++] = (int32_t)(pos0 + t);
    for (int64_t t = b0; t < b1; t++) pos[w++] = (int32_t)(pos0 + t);
  }
  *n = (int32_t)count;
  return ROVE_OK;
}
