/* SPDX-License-Identifier: MIT */
/* paged_decode: batched decode of 32 sequences of different lengths (drawn from
 * 128 .. 16384 with a fixed seed), one query row each, in one call, against the read
 * bandwidth measured in the same loop.
 *   paged_decode [heads kv_heads head_dim threads dtype block_size...]
 *   (defaults: 12 12 64 1 f32 16 256; dtype f32 | bf16 | f16 | q8)
 * Timed in one interleaved loop (ROUNDS rounds; medians, wall clock):
 *   read        a sum of 64-bit words over a buffer of the K+V byte count, split over the
 *               threads, on 2 MB pages as the caches' K and V are (the read-bandwidth
 *               reference; bench_pages.h); read/4KB, printed only: the same on 4 KB pages
 *   contiguous  the 32 sequences each in its own rove_kv_cache, one
 *               rove_kv_cache_attention call per sequence
 *   paged/B     one rove_paged_cache_attention call over all 32 sequences, blocks of B
 *               tokens (B = 16384: one block per sequence, the contiguous layout through
 *               the paged path), filled in interleaved chunks so that blocks scatter
 *   tmajor/B    (PAGED_TOKEN_MAJOR=1 only) one rove_paged_attention call over a copy of
 *               paged/B's pool in flash-attn's token-major order ([n_blocks][block_size]
 *               [n_kv_heads][head_dim], ROVE_PAGED_TOKEN_MAJOR, on 2 MB pages), the
 *               cache's block tables passed in; not for q8
 * All caches hold the same tokens; K and V together are far larger than the L3, so
 * every call reads them from DRAM. Prints each median, GB/s of K+V bytes as stored, and
 * % of the read reference. */
#define _DEFAULT_SOURCE /* madvise (bench_pages.h) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "bench_pages.h"
#include "rove.h"

enum { NS = 32, ROUNDS = 9, MAXB = 8 };


/* ---- the read reference -------------------------------------------------------------- */
typedef struct {
  const uint64_t *p;
  size_t n;
  uint64_t sum;
} rd_part;

static void *rd_run(void *v) {
  rd_part *r = v;
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i + 4 <= r->n; i += 4) s0 += r->p[i], s1 += r->p[i + 1], s2 += r->p[i + 2], s3 += r->p[i + 3];
  r->sum = s0 + s1 + s2 + s3;
  return NULL;
}

static uint64_t read_buffer(const uint64_t *buf, size_t words, int threads) {
  pthread_t t[16];
  rd_part part[16];
  threads = threads < 1 ? 1 : threads > 16 ? 16 : threads; /* t[] and part[] hold 16 */
  for (int i = 0; i < threads; i++) {
    part[i] = (rd_part){buf + words / threads * i, words / threads, 0};
    if (i) pthread_create(&t[i], NULL, rd_run, &part[i]);
  }
  rd_run(&part[0]);
  uint64_t s = part[0].sum;
  for (int i = 1; i < threads; i++) pthread_join(t[i], NULL), s += part[i].sum;
  return s;
}

static void fill(float *x, int64_t n, uint64_t *st) {
  for (int64_t i = 0; i < n; i++) {
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((*st >> 40) & 0xffff) / 32768.0f - 1.0f;
  }
}

#define CHECK(x)                                                              \
  do {                                                                        \
    rove_status s_ = (x);                                                     \
    if (s_ != ROVE_OK) {                                                      \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, rove_status_string(s_)); \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

int main(int argc, char **argv) {
  const int H = argc > 1 ? atoi(argv[1]) : 12, Hkv = argc > 2 ? atoi(argv[2]) : 12;
  const int d = argc > 3 ? atoi(argv[3]) : 64, thr = argc > 4 ? atoi(argv[4]) : 1;
  rove_dtype type = ROVE_DTYPE_F32;
  if (argc > 5 && rove_dtype_parse(argv[5], &type) != ROVE_OK) return 1;
  int32_t bsz[MAXB] = {16, 256};
  int nb = 2;
  if (argc > 6) {
    nb = 0;
    for (int i = 6; i < argc && nb < MAXB; i++) bsz[nb++] = atoi(argv[i]);
  }
  rove_attention_config c;
  rove_attention_config_init(&c, H, Hkv, d);
  c.n_threads = thr;
  rove_plan *p = NULL;
  CHECK(rove_plan_create(&c, &p));
  /* lengths: 128 .. 16384, fixed seed */
  int32_t len[NS], cu[NS + 1] = {0}, ids[MAXB][NS];
  uint64_t st = 12345;
  int64_t total = 0;
  for (int s = 0; s < NS; s++) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    len[s] = 128 + (int32_t)((st >> 33) % (16384 - 128 + 1));
    total += len[s];
    cu[s + 1] = s + 1;
  }
  const int64_t w = (int64_t)Hkv * d, chunk = 512;
  float *k = malloc(sizeof(float) * (size_t)(chunk * w)), *v = malloc(sizeof(float) * (size_t)(chunk * w));
  float *q = malloc(sizeof(float) * (size_t)(NS * H * d)), *out = malloc(sizeof(float) * (size_t)(NS * H * d));
  fill(q, NS * H * d, &st);
  rove_kv_cache *kc[NS];
  rove_paged_cache *pc[MAXB];
  for (int s = 0; s < NS; s++) CHECK(rove_kv_cache_create_typed(p, 1, len[s], type, &kc[s]));
  for (int b = 0; b < nb; b++) {
    const int32_t blocks = (int32_t)(total / bsz[b] + NS + 1);
    CHECK(rove_paged_cache_create(p, type, bsz[b], blocks, NS, &pc[b]));
    for (int s = 0; s < NS; s++) CHECK(rove_paged_seq_create(pc[b], &ids[b][s]));
  }
  /* the same tokens everywhere, appended round-robin in chunks (blocks scatter) */
  int32_t done[NS] = {0};
  for (int more = 1; more;) {
    more = 0;
    for (int s = 0; s < NS; s++) {
      const int32_t n = len[s] - done[s] < chunk ? len[s] - done[s] : (int32_t)chunk;
      if (n <= 0) continue;
      more = 1;
      fill(k, n * w, &st), fill(v, n * w, &st);
      CHECK(rove_kv_cache_append(kc[s], n, k, 0, v, 0, NULL));
      for (int b = 0; b < nb; b++)
        CHECK(rove_paged_append(pc[b], ids[b][s], n, k, 0, v, 0, ROVE_DTYPE_F32, NULL, NULL));
      done[s] += n;
    }
  }
  const double esz = type == ROVE_DTYPE_F32 ? 4 : type == ROVE_DTYPE_Q8 ? 1 + 4.0 / 32 : 2;
  const double bytes = 2.0 * (double)total * (double)w * esz;
  const size_t words = (size_t)(bytes / 8) / 4 * 4;
  /* the reference on 2 MB pages, as the caches' K and V (bench_pages.h); the same read
   * over 4 KB pages is printed beside it, not used for %read */
  uint64_t *buf = bench_alloc_huge(words * 8), *buf4k = malloc(words * 8);
  if (!buf || !buf4k) return 1;
  for (size_t i = 0; i < words; i++) buf[i] = i, buf4k[i] = i;
  double t_read[ROUNDS], t_read4k[ROUNDS], t_cont[ROUNDS], t_paged[MAXB][ROUNDS];
  /* token-major copies of each pool (PAGED_TOKEN_MAJOR=1) and the tables to read them */
  const int tmaj = getenv("PAGED_TOKEN_MAJOR") && atoi(getenv("PAGED_TOKEN_MAJOR")) &&
                   type != ROVE_DTYPE_Q8;
  double t_tm[MAXB][ROUNDS];
  rove_paged_kv tm[MAXB];
  int32_t *tabs[MAXB] = {NULL}, maxb[MAXB] = {0};
  for (int b = 0; tmaj && b < nb; b++) {
    rove_paged_kv hm;
    CHECK(rove_paged_cache_view(pc[b], &hm));
    const size_t es = type == ROVE_DTYPE_F32 ? 4 : 2, row = es * (size_t)d;
    const size_t pool = (size_t)hm.n_blocks * (size_t)bsz[b] * (size_t)Hkv * row;
    char *tk = bench_alloc_huge(pool), *tv = bench_alloc_huge(pool);
    if (!tk || !tv) return 1;
    for (size_t bl = 0; bl < (size_t)hm.n_blocks; bl++)
      for (size_t h = 0; h < (size_t)Hkv; h++)
        for (size_t r = 0; r < (size_t)bsz[b]; r++) {
          const size_t src = ((bl * Hkv + h) * bsz[b] + r) * row, dst = ((bl * bsz[b] + r) * Hkv + h) * row;
          memcpy(tk + dst, (const char *)hm.k + src, row);
          memcpy(tv + dst, (const char *)hm.v + src, row);
        }
    tm[b] = hm;
    tm[b].k = tk, tm[b].v = tv, tm[b].layout = ROVE_PAGED_TOKEN_MAJOR;
    maxb[b] = 16384 / bsz[b] + 1;
    tabs[b] = malloc(sizeof(int32_t) * (size_t)NS * (size_t)maxb[b]);
    for (int s = 0; s < NS; s++) {
      int32_t got;
      CHECK(rove_paged_seq_block_table(pc[b], ids[b][s], tabs[b] + s * maxb[b], maxb[b], &got));
    }
  }
  uint64_t sink = 0;
  rove_paged_args a;
  memset(&a, 0, sizeof a);
  a.n_seqs = NS, a.cu_seqlens_q = cu, a.q = q, a.out = out;
  for (int r = -1; r < ROUNDS; r++) { /* round -1 warms up */
    double t0 = bench_now();
    sink += read_buffer(buf, words, thr);
    if (r >= 0) t_read[r] = bench_now() - t0;
    t0 = bench_now();
    sink += read_buffer(buf4k, words, thr);
    if (r >= 0) t_read4k[r] = bench_now() - t0;
    t0 = bench_now();
    for (int s = 0; s < NS; s++) {
      rove_attention_args x;
      memset(&x, 0, sizeof x);
      x.batch = 1, x.q_len = 1, x.q = q + s * H * d, x.out = out + s * H * d;
      CHECK(rove_kv_cache_attention(kc[s], &x));
    }
    if (r >= 0) t_cont[r] = bench_now() - t0;
    for (int b = 0; b < nb; b++) {
      t0 = bench_now();
      CHECK(rove_paged_cache_attention(pc[b], ids[b], &a));
      if (r >= 0) t_paged[b][r] = bench_now() - t0;
      if (!tmaj) continue;
      rove_paged_args e = a;
      e.seq_lens = len, e.block_tables = tabs[b], e.max_blocks = maxb[b];
      t0 = bench_now();
      CHECK(rove_paged_attention(p, &tm[b], &e));
      if (r >= 0) t_tm[b][r] = bench_now() - t0;
    }
  }
  const double rd = bench_median(t_read, ROUNDS);
  printf("# paged_decode: %d sequences of 128..16384 keys (%lld in all), %dx%d over %d kv heads, "
         "%s cache, %d thread(s); K+V %.2f GB; medians of %d (sink %llu)\n",
         NS, (long long)total, H, d, Hkv, rove_dtype_name(type), thr, bytes * 1e-9, ROUNDS,
         (unsigned long long)(sink & 1));
  printf("%-14s %10s %8s %8s\n", "case", "ms", "GB/s", "%read");
  printf("%-14s %10.3f %8.2f %8.1f\n", "read", rd * 1e3, bytes / rd * 1e-9, 100.0);
  const double rd4 = bench_median(t_read4k, ROUNDS);
  printf("%-14s %10.3f %8.2f %8s   (the same read on 4 KB pages; not the reference)\n",
         "read/4KB", rd4 * 1e3, bytes / rd4 * 1e-9, "-");
  const double ct = bench_median(t_cont, ROUNDS);
  printf("%-14s %10.3f %8.2f %8.1f\n", "contiguous", ct * 1e3, bytes / ct * 1e-9, 100.0 * rd / ct);
  for (int b = 0; b < nb; b++) {
    const double pt = bench_median(t_paged[b], ROUNDS);
    char name[32];
    snprintf(name, sizeof name, "paged/%d", bsz[b]);
    printf("%-14s %10.3f %8.2f %8.1f   (paged / contiguous %.3f)\n", name, pt * 1e3, bytes / pt * 1e-9,
           100.0 * rd / pt, pt / ct);
    if (!tmaj) continue;
    const double tt = bench_median(t_tm[b], ROUNDS);
    snprintf(name, sizeof name, "tmajor/%d", bsz[b]);
    printf("%-14s %10.3f %8.2f %8.1f   (paged / contiguous %.3f)\n", name, tt * 1e3, bytes / tt * 1e-9,
           100.0 * rd / tt, tt / ct);
  }
  for (int s = 0; s < NS; s++) rove_kv_cache_destroy(kc[s]);
  for (int b = 0; b < nb; b++) rove_paged_cache_destroy(pc[b]);
  for (int b = 0; tmaj && b < nb; b++) free((void *)tm[b].k), free((void *)tm[b].v), free(tabs[b]);
  free(k), free(v), free(q), free(out), free(buf), free(buf4k);
  rove_plan_destroy(p);
  return 0;
}
