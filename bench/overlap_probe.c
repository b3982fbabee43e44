/* SPDX-License-Identifier: MIT */
/* overlap_probe: can this core hide a decode kernel's arithmetic under its DRAM reads?
 *
 * A decode step streams every cached K and V row once and does a fixed amount of
 * arithmetic per row. If the hardware prefetcher keeps the rows coming while the core
 * computes, the step takes max(compute, read); if not, compute + read. This probe walks
 * the access pattern of librove's row kernel (keys in blocks of 64: the block's K rows,
 * then its V rows, 128 floats = 512 bytes each) with FMA work of W multiply-adds per
 * 8-float vector read (8 independent accumulators, nothing else), and prints per key:
 *   read     the same walk with W = 0 (a pure read of the bytes)
 *   cached   the walk over the first 1024 keys, repeated (K and V in L2 / L3: the compute)
 *   dram     the walk over all keys (256 MB, far past the L3)
 * and dram / max(read, cached): 1.0 is perfect overlap, (read + cached) / max(...) none.
 * A key is 32 vectors, so 32 W multiply-adds; one fp32 key and KV head of GQA 32:8 x 128
 * (4 query rows: 64 for the scores, 64 for P V) is W = 4.
 *
 *   overlap_probe [W ...]        (W even, 2..64; default 2 4 8; x86-64 with AVX2 + FMA,
 *                                 else exit 77)
 *
 * Measured on the 2-vCPU Zen 3 (BENCHMARKS.md, 2026-12-03, three runs): W = 4 computes
 * 31-42 ns per key cached and takes 1.14-1.25x the read from DRAM, so a kernel with that
 * much work per byte can read at 80-88 % of the bandwidth on that core.
 *
 * A second table (session 23) walks the same keys with W = 4 in the row kernel's order
 * and with its prefetch, to tell which of the two costs what from DRAM:
 *   order  seq: each row front to back (as above);
 *          kernel: K in groups of 4 keys section by section (32 floats of each of the 4
 *          rows, then the next 32: attn_rows-avx512.c scores_body, RG = 4), V in 4
 *          passes over the block's 64 rows, 32 floats of each row per pass (the GQA
 *          group path, attn_rows_g4-avx512.c);
 *   pf     none, or next: the next block's rows prefetched into L2 a line per line read
 *          (the paced prefetch of the row kernels).
 * K and V lie on 2 MB pages where the system gives them (bench_pages.h, as rove_alloc_large
 * asks for a KV cache's); the Zen 3 figures above were taken on 4 KB pages, before session 23. */
#define _DEFAULT_SOURCE /* madvise (bench_pages.h) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "bench_pages.h"

#if defined(__x86_64__)
#include <immintrin.h>

enum { ROW = 128, BLK = 64, CACHED_KEYS = 1024 };


/* The walk over keys [0, nk): per block, its K rows then its V rows, each row's 16
 * vectors loaded in order; w FMAs per vector into 8 accumulators. */
__attribute__((target("avx2,fma"), noinline)) static float walk(const float *k, const float *v,
                                                                size_t nk, int w) {
  __m256 a[8];
  for (int i = 0; i < 8; i++) a[i] = _mm256_setzero_ps();
  const __m256 c = _mm256_set1_ps(1.0001f);
  for (size_t b = 0; b < nk; b += BLK)
    for (int half = 0; half < 2; half++) {
      const float *x = (half ? v : k) + b * ROW;
      for (size_t j = 0; j < BLK * ROW; j += 32) {
        const __m256 x0 = _mm256_loadu_ps(x + j), x1 = _mm256_loadu_ps(x + j + 8);
        const __m256 x2 = _mm256_loadu_ps(x + j + 16), x3 = _mm256_loadu_ps(x + j + 24);
        if (w == 0) { /* the read: one add per vector keeps the loads alive */
          a[0] = _mm256_add_ps(a[0], x0), a[1] = _mm256_add_ps(a[1], x1);
          a[2] = _mm256_add_ps(a[2], x2), a[3] = _mm256_add_ps(a[3], x3);
        }
        for (int f = 0; f < w; f += 2) { /* 2 FMAs per vector per step: 8 chains */
          a[0] = _mm256_fmadd_ps(x0, c, a[0]), a[1] = _mm256_fmadd_ps(x1, c, a[1]);
          a[2] = _mm256_fmadd_ps(x2, c, a[2]), a[3] = _mm256_fmadd_ps(x3, c, a[3]);
          a[4] = _mm256_fmadd_ps(x0, c, a[4]), a[5] = _mm256_fmadd_ps(x1, c, a[5]);
          a[6] = _mm256_fmadd_ps(x2, c, a[6]), a[7] = _mm256_fmadd_ps(x3, c, a[7]);
        }
      }
    }
  __m256 s = a[0];
  for (int i = 1; i < 8; i++) s = _mm256_add_ps(s, a[i]);
  return _mm256_cvtss_f32(s);
}

/* The walk of the second table (see the top), W = 4, in 8-float vectors: order kern = 1
 * walks the row kernel's order, pf = 1 prefetches the next block a line per line read. */
__attribute__((target("avx2,fma"), always_inline)) static inline void fma4(__m256 a[8],
                                                                          const float *x) {
  const __m256 c = _mm256_set1_ps(1.0001f);
  for (int h = 0; h < 4; h++) { /* 4 vectors (128 bytes), 4 FMAs each */
    const __m256 xv = _mm256_loadu_ps(x + 8 * h);
    a[h] = _mm256_fmadd_ps(xv, c, a[h]), a[h + 4] = _mm256_fmadd_ps(xv, c, a[h + 4]);
    a[h] = _mm256_fmadd_ps(xv, c, a[h]), a[h + 4] = _mm256_fmadd_ps(xv, c, a[h + 4]);
  }
}
__attribute__((target("avx2,fma"), noinline)) static float walk_order(const float *k,
                                                                      const float *v,
                                                                      size_t nk, int kern,
                                                                      int pf) {
  __m256 a[8];
  for (int i = 0; i < 8; i++) a[i] = _mm256_setzero_ps();
  for (size_t b = 0; b < nk; b += BLK) {
    const float *kb = k + b * ROW, *vb = v + b * ROW;
    const char *kn = (const char *)(kb + BLK * ROW), *vn = (const char *)(vb + BLK * ROW);
    for (int g = 0; g < BLK; g += 4) /* K: 4 keys (2 KB) at a time */
      for (int e = 0; e < 16; e++) { /* 16 pieces of 128 bytes */
        const int key = kern ? e % 4 : e / 4, sec = kern ? e / 4 : e % 4;
        fma4(a, kb + (size_t)(g + key) * ROW + 32 * sec);
        if (pf) /* the same 128 bytes of the next block */
          for (int l = 0; l < 2; l++)
            _mm_prefetch(kn + ((size_t)(g + key) * ROW + 32 * sec) * 4 + 64 * l, _MM_HINT_T2);
      }
    for (int e = 0; e < 4 * BLK; e++) { /* V: 64 rows x 4 pieces */
      const int row = kern ? e % BLK : e / 4, sec = kern ? e / BLK : e % 4;
      fma4(a, vb + (size_t)row * ROW + 32 * sec);
      if (pf) /* the next block's V region in address order, 128 bytes a piece */
        for (int l = 0; l < 2; l++) _mm_prefetch(vn + (size_t)e * 128 + 64 * l, _MM_HINT_T2);
    }
  }
  __m256 s = a[0];
  for (int i = 1; i < 8; i++) s = _mm256_add_ps(s, a[i]);
  return _mm256_cvtss_f32(s);
}

static volatile float sink;

static double median5(double *x) { return bench_median(x, 5); }

static double per_key_ns(const float *k, const float *v, size_t nk, int w, int reps) {
  const double t = bench_now();
  for (int r = 0; r < reps; r++) sink += walk(k, v, nk, w);
  return (bench_now() - t) * 1e9 / ((double)nk * reps);
}

int main(int argc, char **argv) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    printf("overlap_probe: skipped, this CPU has no AVX2 + FMA\n");
    return 77;
  }
  int ws[16] = {2, 4, 8}, nw = 3;
  if (argc > 1) {
    nw = 0;
    for (int i = 1; i < argc && nw < 16; i++) {
      ws[nw] = atoi(argv[i]);
      if (ws[nw] < 2 || ws[nw] > 64 || ws[nw] % 2) {
        fprintf(stderr, "overlap_probe: W must be even, 2..64\n");
        return 2;
      }
      nw++;
    }
  }
  const size_t nk = (size_t)256 << 10; /* 256 Ki keys: 128 MB of K and 128 MB of V */
  float *k = bench_alloc_huge(nk * ROW * sizeof(float)); /* 2 MB pages */
  float *v = bench_alloc_huge(nk * ROW * sizeof(float));
  if (!k || !v) {
    fprintf(stderr, "overlap_probe: out of memory\n");
    return 1;
  }
  memset(k, 0, nk * ROW * sizeof(float));
  memset(v, 0, nk * ROW * sizeof(float));
  printf("keys of 2 x 512 bytes, blocks of %d (K rows, then V rows); ns per key, median of 5\n",
         BLK);
  printf("%4s %12s %8s %8s %8s %22s\n", "W", "FMA per key", "read", "cached", "dram",
         "dram / max(read, cached)");
  for (int i = 0; i < nw; i++) {
    double rd[5], ca[5], dr[5];
    for (int r = 0; r < 5; r++) { /* interleaved, so that drift hits all three alike */
      rd[r] = per_key_ns(k, v, nk, 0, 1);
      ca[r] = per_key_ns(k, v, CACHED_KEYS, ws[i], 64);
      dr[r] = per_key_ns(k, v, nk, ws[i], 1);
    }
    const double mr = median5(rd), mc = median5(ca), md = median5(dr);
    printf("%4d %12d %8.1f %8.1f %8.1f %22.2f\n", ws[i], 32 * ws[i], mr, mc, md,
           md / (mr > mc ? mr : mc));
  }
  printf("\nW = 4 in the row kernel's order and with its prefetch (see the top); ns per key\n");
  printf("%8s %6s %8s %8s %8s\n", "order", "pf", "read", "dram", "dram/read");
  for (int kern = 0; kern < 2; kern++)
    for (int pf = 0; pf < 2; pf++) {
      double rd[5], dr[5];
      for (int r = 0; r < 5; r++) {
        rd[r] = per_key_ns(k, v, nk, 0, 1);
        const double t = bench_now();
        sink += walk_order(k, v, nk, kern, pf);
        dr[r] = (bench_now() - t) * 1e9 / (double)nk;
      }
      const double mr = median5(rd), md = median5(dr);
      printf("%8s %6s %8.1f %8.1f %8.2f\n", kern ? "kernel" : "seq", pf ? "next" : "none", mr, md,
             md / mr);
    }
  free(k), free(v);
  return 0;
}
#else
int main(void) {
  printf("overlap_probe: skipped, x86-64 only\n");
  return 77;
}
#endif
