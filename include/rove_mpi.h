/* SPDX-License-Identifier: MIT */
/**
 * @file rove_mpi.h
 * @brief librove_mpi: exact context-parallel RoVE attention over MPI (optional part of
 *        librove, built when CMake finds MPI; docs/mpi.md has the design).
 *
 * Two ways to spread one sequence's attention over the ranks of an MPI communicator:
 * - **Ring prefill** (rove_mpi_ring_attention): each rank holds a shard of the tokens (its
 *   queries, keys and values with their global positions). The K/V shards travel around
 *   the ring of ranks, one step per rank; at each step every rank attends its queries
 *   over the block it holds and merges the partial result exactly by its LSE.
 * - **Sharded-cache decode** (rove_mpi_cache_attention): each rank owns a slice of the
 *   KV cache; a step's query rows are broadcast from a root, every rank attends them over
 *   its slice, and the partials are merged exactly (a fixed-order MPI reduction).
 *
 * Both are exact: the LSE merge L = ln sum_p e^{L_p}, O = sum_p e^{L_p - L} O_p of
 * partial attentions over disjoint key sets equals attention over their union, and with
 * RoVE every partial output is already in its query's frame (R_{P_i}^{-1} is linear), so
 * the result equals one process's rove_attention_forward over the whole sequence,
 * restricted to the rank's queries, to float rounding (the partials are merged in double
 * and rounded once).
 *
 * Conventions (as in rove.h, plus):
 * - Every function but rove_mpi_split_positions is **collective** over @p comm: every
 *   rank of @p comm must call it with the same communicator and the same root, in the
 *   same order relative to its other collective calls on @p comm. MPI must be
 *   initialised (and not finalised). MPI is called from the calling thread only (librove's
 *   worker threads never call it): MPI_THREAD_FUNNELED suffices when that is the main
 *   thread, MPI_THREAD_SERIALIZED otherwise.
 * - Errors are agreed on: each rank validates its own arguments, then one MPI_Allreduce
 *   combines the ranks' statuses and a MIN/MAX check of every size and plan setting that
 *   must match (batch, heads, head_dim, the plan's rotations, mask, scale, softcap and
 *   frequencies, the root), **before** any communication whose size depends on them. So
 *   every rank returns the same status and a bad argument on one rank never deadlocks
 *   the others (the largest status code wins when ranks fail differently; a mismatch
 *   across ranks is ::ROVE_ERR_INVALID_ARGUMENT). Failures after that point (memory, a
 *   local attention call) are agreed on the same way before any output is written, so
 *   outputs stay untouched on every rank when the call fails anywhere.
 * - @p comm == MPI_COMM_NULL, an intercommunicator, or MPI not initialised:
 *   ::ROVE_ERR_INVALID_ARGUMENT without any communication (pass it on every rank).
 * - librove_mpi never sends on @p comm itself: each call works on a private duplicate
 *   (MPI_Comm_dup, freed before it returns) whose error handler is MPI_ERRORS_RETURN, so
 *   messages of the caller can never match librove's and an MPI error inside the call is
 *   ::ROVE_ERR_INTERNAL rather than the caller's handler. (MPI_Comm_dup itself runs on
 *   @p comm and reports its errors through @p comm's handler.) After an MPI error the
 *   state of the communication is undefined: a rank that saw none may still be waiting.
 * - Positions are always explicit (global int32 positions, any order): contiguous,
 *   zig-zag or any other assignment of tokens to ranks is just a position array
 *   (rove_mpi_split_positions makes the two usual ones).
 * - Selective RoPE (explicit angles) is not supported here (::ROVE_ERR_UNSUPPORTED).
 *   Attention sinks are: merged once into the exact merge of the ranks' parts, as one
 *   more part of LSE sinks[h] and output 0. Query, key, value and output tensors are
 *   float32 (these entry points take no rove_tensor_types); typed KV caches (bf16, f16,
 *   q8) are read.
 * - Nothing is printed; the library links librove.so and MPI, and librove.so itself does
 *   not depend on MPI.
 */
#ifndef ROVE_MPI_H
#define ROVE_MPI_H

#include <mpi.h>
#include <stdint.h>

#include "rove.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------ */
/** @name Splitting a sequence over ranks */
/**@{*/

/** How rove_mpi_split_positions assigns the tokens 0 .. n-1 of a sequence to P ranks. */
typedef enum rove_mpi_split {
  /** Rank r takes tokens floor(r n / P) .. floor((r + 1) n / P) - 1: one contiguous
   *  range each (sizes differ by at most one). Causal attention is unbalanced with it:
   *  the last rank's queries see every key, the first rank's only its own (the ring then
   *  takes about P^2 / (2P - 1) ~ P/2 times less than one rank, not P). */
  ROVE_MPI_SPLIT_CONTIGUOUS = 0,
  /** Zig-zag (load-balanced causal): the sequence is cut into 2P chunks, chunk c =
   *  tokens floor(c n / 2P) .. floor((c + 1) n / 2P) - 1, and rank r takes chunks r and
   *  2P - 1 - r, in that order. Every rank then has the same causal work (to one token),
   *  and so does every step of the ring: half of each (query shard x key block) tile is
   *  visible. */
  ROVE_MPI_SPLIT_ZIGZAG = 1
} rove_mpi_split;

/**
 * The global positions of rank @p rank's tokens when a sequence of @p seq_len tokens at
 * positions pos0 .. pos0 + seq_len - 1 is split over @p n_ranks ranks as @p kind says.
 * Token t of the sequence has position pos0 + t; the rank's shard holds its tokens in the
 * order written to @p pos, so its q/k/v rows are the sequence's rows pos[i] - pos0. Local
 * (not collective; no MPI call): every rank may call it for any rank.
 * @param pos  NULL (only the count is wanted) or out: at least @p cap positions
 * @param cap  entries @p pos can hold (ignored when @p pos is NULL)
 * @param n    out: the number of tokens of the rank (possibly 0 when seq_len is below the
 *             chunk count: n_ranks, or 2 n_ranks for zig-zag)
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (NULL @p n, seq_len < 0, n_ranks < 1, rank
 *         outside 0 .. n_ranks-1, an unknown kind, @p cap too small); ROVE_ERR_SIZE_OVERFLOW
 *         (pos0 + seq_len - 1 above INT32_MAX, or, for zig-zag, 2 n_ranks above
 *         INT32_MAX). @p pos and @p n untouched on failure.
 */
ROVE_API rove_status rove_mpi_split_positions(rove_mpi_split kind, int32_t seq_len, int32_t n_ranks,
                                              int32_t rank, int32_t pos0, int32_t *pos, int32_t cap,
                                              int32_t *n);
/**@}*/

/* ------------------------------------------------------------------------------------ */
/** @name Ring prefill (context parallelism) */
/**@{*/

/**
 * Exact attention of this rank's queries over the keys of **all** ranks of @p comm, with
 * the plan's rotations (RoVE, RoPE, any ROVE_ROTATE_* combination), causal mask, window,
 * softcap, scale and GQA. Collective. The result on each rank equals
 * rove_attention_forward over the whole sequence (every rank's tokens, at their
 * positions) restricted to this rank's queries, to float rounding (the tests' cases
 * within 1e-6 relative; a zig-zag split of 4500 tokens up to 2e-6, as far from the
 * float64 oracle as the single-process call is); for a given rank count the result is
 * bitwise reproducible.
 *
 * @p a describes this rank's shard, in rove_attention_args' layouts and meanings:
 * - a->batch: > 0, the same on every rank (each batch row is its own sequence, split the
 *   same way on every rank: the rank holds a->q_len queries and a->kv_len keys of each).
 * - a->q_len >= 0, a->kv_len >= 0: this rank's query and key tokens per batch row; any
 *   sizes (uneven shards; 0 = this rank has no queries / no keys).
 * - a->q [batch][q_len][n_heads][head_dim], a->k and a->v [batch][kv_len][n_kv_heads]
 *   [head_dim], a->out [batch][q_len][n_heads][head_dim], with token strides q_stride,
 *   k_stride, v_stride, out_stride (0 = dense; otherwise at least the dense width: views
 *   into a fused QKV projection work).
 * - a->q_pos [batch][q_len] and a->kv_pos [batch][kv_len]: the tokens' **global**
 *   positions (required; any int32, any order, duplicates allowed). Visibility, rotation
 *   and the causal mask follow them exactly as in rove_attention_forward.
 * - a->lse: NULL or out [batch][n_heads][q_len]: ln sum_j e^{s_ij} over every visible key
 *   of every rank (-inf when none is visible; the output is then 0).
 * - a->sinks: NULL or [n_heads] finite logits, as in rove_attention_forward, applied to
 *   this rank's query rows (once, after the merge of every block's part; a row that sees
 *   no key gets output 0 and LSE sinks[h]); pass the same sinks on every rank.
 * - a->q_angles and a->kv_angles must be NULL and the K/V head and batch strides 0
 *   (ROVE_ERR_UNSUPPORTED otherwise).
 * Pointers of an empty tensor (q, q_pos, out, lse with q_len = 0; k, v, kv_pos with
 * kv_len = 0) may be NULL. Outputs must not overlap any input (checked).
 *
 * Schedule (docs/mpi.md): P = the size of @p comm steps. Rank r starts with its own K/V
 * block (copied once into a dense buffer with its positions); at step s it holds the
 * block of rank (r - s) mod P, posts MPI_Irecv of the next block from rank r - 1 and
 * MPI_Isend of the held one to rank r + 1 (two buffers), attends its queries over the held
 * block with rove_attention_forward (global positions, LSE) while the transfer runs
 * (calling MPI_Testall between pieces of at most 2048 query rows so that MPI progresses),
 * merges the piece into a double-precision running (max, sum, output) per query row, then
 * waits. A piece whose queries provably see no key of the block (causal: every key
 * position above every query position; a window: every distance at least the window) is
 * skipped, but the block is still passed on. Each block travels P - 1 hops; per step a
 * rank sends batch x (block tokens) x (2 n_kv_heads head_dim floats + 1 int32).
 * Memory per rank: two K/V blocks of the largest shard, the running result in double
 * (2x the size of out, plus two doubles per query row and head) and one piece's output.
 * Threads: each local attention call runs on the plan's threads (with several ranks per
 * node, give the plan n_threads = cores per rank).
 *
 * Statuses are agreed across ranks (see the file comment): three small MPI_Allreduce
 * calls per call (arguments and sizes, buffer allocation, the local attention calls) plus
 * the P - 1 ring steps.
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (NULL plan or args, a NULL tensor or
 *         position array of a non-empty shard, batch <= 0, q_len or kv_len < 0, a stride
 *         below the dense width, overlapping outputs, a non-finite sink or an output over
 *         the sinks, a bad communicator; on any rank, or batch or the plan's configuration
 *         differing between ranks);
 *         ROVE_ERR_UNSUPPORTED (explicit angles); ROVE_ERR_SIZE_OVERFLOW (a size that
 *         does not fit int64, size_t or an MPI count); ROVE_ERR_OUT_OF_MEMORY;
 *         ROVE_ERR_INTERNAL (an MPI call failed). The same status on every rank; outputs
 *         untouched on failure.
 */
ROVE_API rove_status rove_mpi_ring_attention(const rove_plan *p, const rove_attention_args *a,
                                             MPI_Comm comm);
/**@}*/

/* ------------------------------------------------------------------------------------ */
/** @name Sharded-cache decode */
/**@{*/

/**
 * One decode step over a KV cache sharded across the ranks of @p comm: the query rows of
 * rank @p root are attended over the union of every rank's slice, exactly. Collective.
 * Each rank owns a ::rove_kv_cache holding its share of the tokens (created from @p p
 * and appended by the caller with the tokens' **global** positions; any split: uneven
 * slices, a rank with an empty cache, any storage type of rove_kv_cache_create_typed).
 * Each byte of K/V is read once, by the rank that holds it.
 *
 * Steps: the queries and their positions are broadcast from @p root (MPI_Bcast); each
 * rank attends them over its slice with rove_kv_cache_attention (LSE requested; an empty
 * cache contributes LSE -inf and is not called); the (LSE, output) records of all ranks
 * (in double) are reduced to @p root with a non-commutative user MPI_Op, so that the
 * order of the merges is fixed by the rank order and the result is bitwise reproducible
 * for a given rank count; @p root rounds the merged result once to float and broadcasts
 * it with the agreed status, so **every** rank gets the same bits (and the same status).
 * With one non-empty slice the result is bitwise that rank's rove_kv_cache_attention.
 * With every slice empty the call succeeds: output 0 and LSE -inf (no key is visible),
 * where rove_kv_cache_attention on one empty cache returns ROVE_ERR_INVALID_ARGUMENT.
 *
 * @p a, as in rove_kv_cache_attention: a->batch (> 0, equal to the caches' batch) and
 * a->q_len (> 0) must be the same on every rank; a->k, a->v, a->kv_pos must be NULL and
 * a->kv_len and the K/V strides 0; a->q_angles / a->kv_angles NULL (ROVE_ERR_UNSUPPORTED
 * otherwise: an angle cache cannot be used).
 * - a->sinks: NULL or [n_heads] finite logits, read on @p root only (like q): merged once
 *   into the result, as one more part of LSE sinks[h] and output 0 (every slice empty:
 *   output 0, LSE sinks[h]).
 * - a->q [batch][q_len][n_heads][head_dim] (token stride a->q_stride, 0 = dense) and
 *   a->q_pos [batch][q_len] (**required**: the queries' global positions; a cache's
 *   default, its last tokens, means nothing for a slice) are read on @p root only; other
 *   ranks may pass NULL.
 * - a->out [batch][q_len][n_heads][head_dim] (stride a->out_stride): required on
 *   @p root; on other ranks NULL (not written) or a buffer that receives the result too.
 * - a->lse: NULL or out [batch][n_heads][q_len] on any rank.
 * @p p is the plan the caches were created from (it sizes the messages; its configuration
 * must be the same on every rank). Every rank's @p c must come from @p p or from a plan
 * with the same configuration (rove_kv_cache_plan, compared by the fingerprint the ranks
 * agree on), and have the batch a->batch; either mismatch is ROVE_ERR_INVALID_ARGUMENT
 * on every rank (the batch only when that rank's cache is not empty).
 * Collectives per call: the argument agreement (MPI_Allreduce), MPI_Comm_dup, the query
 * broadcast, the record reduction and the result broadcast.
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (NULL plan, cache or args, q / q_pos / out
 *         NULL on root, batch or q_len <= 0, k / v / kv_pos set, root outside the
 *         communicator, a stride below the dense width, overlapping outputs; on any rank,
 *         or a size, the root or the plan differing between ranks, a cache from a plan
 *         of another configuration; a slice's attention
 *         rejecting the call; on root, a non-finite sink or an output over the sinks);
 *         ROVE_ERR_UNSUPPORTED (explicit angles);
 *         ROVE_ERR_SIZE_OVERFLOW; ROVE_ERR_OUT_OF_MEMORY; ROVE_ERR_INTERNAL (an MPI call
 *         failed). The same status on every rank; outputs untouched on failure.
 */
ROVE_API rove_status rove_mpi_cache_attention(const rove_plan *p, const rove_kv_cache *c,
                                              const rove_attention_args *a, int root,
                                              MPI_Comm comm);
/**@}*/

#ifdef __cplusplus
}
#endif
#endif /* ROVE_MPI_H */
