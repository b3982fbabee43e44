/* SPDX-License-Identifier: MIT */
/* paged_store: the cost of writing new tokens into a paged pool.
 *   paged_store [heads kv_heads head_dim threads dtype]   (defaults: 32 8 128 1 bf16)
 * Two shapes of a serving step, each timed in one interleaved loop (ROUNDS rounds,
 * medians, wall clock):
 *   decode   32 sequences x 1 new token (one row each, scattered over the pool)
 *   prefill  one sequence x 4096 new tokens (blocks of 16 in scattered order)
 * and three ways of doing it:
 *   store    rove_paged_store into a caller's pool (head-major, blocks of 16, on 2 MB
 *            pages as librove's own pool: bench_pages.h), one call
 *   append   rove_paged_append into librove's pool (rove_paged_cache) of the same shape:
 *            decode one call per sequence, prefill one call (then truncated back)
 *   copy     memcpy of the fp32 K and V inputs into a buffer: the bytes moved with no
 *            rotation or rounding, a lower bound (not the same work)
 * Before each timed call the caches are flushed (a 64 MB write) and the inputs read back
 * in, as a projection would leave them: inputs warm, pools cold, for every way alike.
 * Prints each median in microseconds, and the store and append medians per token. */
#define _DEFAULT_SOURCE /* madvise (bench_pages.h) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "bench_pages.h"
#include "rove.h"

enum { ROUNDS = 15, BS = 16, NSEQ = 32, PREFILL = 4096 };

static void die(const char *what, rove_status st) {
  fprintf(stderr, "paged_store: %s: %s\n", what, rove_status_string(st));
  exit(1);
}

static size_t esize(rove_dtype t) { return t == ROVE_DTYPE_F32 ? 4 : t == ROVE_DTYPE_Q8 ? 1 : 2; }

/* Flush the caches (a write of `flush`), then warm the n tokens' K and V. */
static void prepare(char *flush, size_t fbytes, const float *k, const float *v, int64_t n) {
  memset(flush, (int)(fbytes & 0x7f), fbytes);
  float acc = 0;
  for (int64_t i = 0; i < n; i += 16) acc += k[i] + v[i];
  __asm__ volatile("" : : "x"(acc), "r"(flush) : "memory");
}

static double median(double *x, int n) {
  qsort(x, (size_t)n, sizeof *x, bench_cmp_double);
  return x[n / 2];
}

int main(int argc, char **argv) {
  const int H = argc > 1 ? atoi(argv[1]) : 32, Hkv = argc > 2 ? atoi(argv[2]) : 8;
  const int d = argc > 3 ? atoi(argv[3]) : 128, threads = argc > 4 ? atoi(argv[4]) : 1;
  rove_dtype type = ROVE_DTYPE_BF16;
  if (argc > 5 && rove_dtype_parse(argv[5], &type) != ROVE_OK) die("dtype", ROVE_ERR_INVALID_ARGUMENT);
  if (H <= 0 || Hkv <= 0 || d <= 0 || threads <= 0) die("arguments", ROVE_ERR_INVALID_ARGUMENT);
  rove_attention_config cfg;
  rove_attention_config_init(&cfg, H, Hkv, d);
  cfg.n_threads = threads;
  rove_plan *p = NULL;
  rove_status st = rove_plan_create(&cfg, &p);
  if (st != ROVE_OK) die("plan", st);
  const int64_t wkv = (int64_t)Hkv * d, n_blocks = PREFILL / BS + NSEQ + 8;
  const size_t esz = esize(type), block = (size_t)(BS * wkv) * esz;
  /* inputs: PREFILL tokens of K and V (fp32), their positions */
  float *k = malloc(sizeof(float) * (size_t)(PREFILL * wkv)), *v = malloc(sizeof(float) * (size_t)(PREFILL * wkv));
  int32_t *pos = malloc(sizeof(int32_t) * PREFILL);
  int64_t *slots = malloc(sizeof(int64_t) * PREFILL);
  char *copy = malloc(2 * sizeof(float) * (size_t)(PREFILL * wkv));
  const size_t fbytes = (size_t)64 << 20;
  char *flush = malloc(fbytes);
  if (!k || !v || !pos || !slots || !copy || !flush) die("inputs", ROVE_ERR_OUT_OF_MEMORY);
  for (int64_t i = 0; i < PREFILL * wkv; i++) k[i] = (float)((i * 7919) % 2001) * 1e-3f - 1, v[i] = -k[i];
  /* the caller's pool, and librove's of the same shape */
  rove_paged_kv kv;
  memset(&kv, 0, sizeof kv);
  char *pk = bench_alloc_huge((size_t)n_blocks * block), *pv = bench_alloc_huge((size_t)n_blocks * block);
  float *sk = NULL, *sv = NULL;
  if (type == ROVE_DTYPE_Q8) {
    const size_t sb = sizeof(float) * (size_t)(n_blocks * BS * Hkv) * (size_t)((d + ROVE_Q8_BLOCK - 1) / ROVE_Q8_BLOCK);
    sk = malloc(sb), sv = malloc(sb);
    if (!sk || !sv) die("scales", ROVE_ERR_OUT_OF_MEMORY);
  }
  if (!pk || !pv) die("pool", ROVE_ERR_OUT_OF_MEMORY);
  memset(pk, 0, (size_t)n_blocks * block), memset(pv, 0, (size_t)n_blocks * block);
  kv.k = pk, kv.v = pv, kv.k_scale = sk, kv.v_scale = sv, kv.type = type, kv.block_size = BS;
  kv.n_blocks = (int32_t)n_blocks;
  rove_paged_cache *c = NULL;
  st = rove_paged_cache_create(p, type, BS, (int32_t)n_blocks, NSEQ + 1, &c);
  if (st != ROVE_OK) die("cache", st);
  int32_t seq[NSEQ + 1];
  for (int s = 0; s <= NSEQ; s++)
    if ((st = rove_paged_seq_create(c, &seq[s])) != ROVE_OK) die("sequence", st);
  /* each decode sequence holds 5 tokens; a new one goes to row 5 of its own block */
  for (int s = 0; s < NSEQ; s++)
    if ((st = rove_paged_append(c, seq[s], 5, k, 0, v, 0, ROVE_DTYPE_F32, NULL, NULL)) != ROVE_OK)
      die("decode set-up", st);
  double t_store[2][ROUNDS], t_append[2][ROUNDS], t_copy[2][ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    for (int shape = 0; shape < 2; shape++) {
      const int32_t n = shape ? PREFILL : NSEQ;
      for (int32_t i = 0; i < n; i++) {
        /* decode: token i to row 5 of block 7 i + 3 (mod the pool); prefill: blocks in a
         * scattered order */
        const int64_t b = shape ? (i / BS * 41 + 11) % n_blocks : (7 * i + 3) % n_blocks;
        slots[i] = b * BS + (shape ? i % BS : 5);
        pos[i] = shape ? i : 5;
      }
      prepare(flush, fbytes, k, v, n * wkv);
      double t0 = bench_now();
      st = rove_paged_store(p, &kv, n, slots, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL);
      double t1 = bench_now();
      if (st != ROVE_OK) die("store", st);
      t_store[shape][r] = t1 - t0;
      prepare(flush, fbytes, k, v, n * wkv);
      t0 = bench_now();
      if (shape) {
        st = rove_paged_append(c, seq[NSEQ], n, k, 0, v, 0, ROVE_DTYPE_F32, pos, NULL);
      } else {
        for (int s = 0; s < NSEQ && st == ROVE_OK; s++)
          st = rove_paged_append(c, seq[s], 1, k + s * wkv, 0, v + s * wkv, 0, ROVE_DTYPE_F32, pos + s, NULL);
      }
      t1 = bench_now();
      if (st != ROVE_OK) die("append", st);
      t_append[shape][r] = t1 - t0;
      if (shape) {
        st = rove_paged_truncate(c, seq[NSEQ], 0);
      } else {
        for (int s = 0; s < NSEQ && st == ROVE_OK; s++) st = rove_paged_truncate(c, seq[s], 5);
      }
      if (st != ROVE_OK) die("truncate", st);
      prepare(flush, fbytes, k, v, n * wkv);
      t0 = bench_now();
      memcpy(copy, k, sizeof(float) * (size_t)(n * wkv));
      memcpy(copy + sizeof(float) * (size_t)(n * wkv), v, sizeof(float) * (size_t)(n * wkv));
      __asm__ volatile("" : : "r"(copy) : "memory"); /* the copy is "used" */
      t1 = bench_now();
      t_copy[shape][r] = t1 - t0;
    }
  }
  printf("# paged_store: %d x %d over %d kv heads, %s pool, blocks of %d, %d thread(s); medians of %d, us\n",
         H, d, Hkv, rove_dtype_name(type), BS, threads, ROUNDS);
  printf("%-8s %6s %10s %10s %10s %12s %12s\n", "shape", "tokens", "store", "append", "copy", "store/token",
         "append/tok");
  for (int shape = 0; shape < 2; shape++) {
    const int32_t n = shape ? PREFILL : NSEQ;
    const double s = median(t_store[shape], ROUNDS) * 1e6, a = median(t_append[shape], ROUNDS) * 1e6;
    printf("%-8s %6d %10.2f %10.2f %10.2f %12.4f %12.4f\n", shape ? "prefill" : "decode", n, s, a,
           median(t_copy[shape], ROUNDS) * 1e6, s / n, a / n);
  }
  rove_paged_cache_destroy(c);
  rove_plan_destroy(p);
  free(k), free(v), free(pos), free(slots), free(copy), free(flush), free(pk), free(pv), free(sk), free(sv);
  return 0;
}
