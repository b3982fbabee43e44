/* SPDX-License-Identifier: MIT */
/* ab_decode: cache decode of two librove builds, timed in one process, alternately.
 *
 * On a shared, noisy host two benchmark runs minutes apart can differ by more than the
 * change being measured. This loads two builds of librove.so (dlopen, each with its own
 * symbols), gives each its own plan and KV cache of the same shape and contents, and
 * times one decode step of A, then of B, round after round, next to a pure read of the
 * same number of bytes (the bandwidth reference, also in the same rounds, on as many
 * threads as the plans; on 2 MB pages for a cache, as the cache's K and V are:
 * bench_pages.h). It prints the
 * median per build, ns per key and KV head, and the read reference as a fraction.
 *
 *   ab_decode LIB_A LIB_B [heads kv_heads head_dim keys type threads rounds]
 *   (defaults 32 8 128 8192 f32 1 15; type f32 | bf16 | f16 | q8 for a cache of that type,
 *   plain: rove_attention_forward over the caller's fp32 K/V [keys][kv_heads][head_dim],
 *   rotated as they are read). AB_ROTATE=rope: a RoPE plan, AB_ROTATE=none: no rotation
 *   (default RoVE). AB_ISA=A,B: the ISA of each plan by name (rove_isa_parse, e.g.
 *   AB_ISA=avx2,avx512 with the same build twice: two kernels of one build, alternated).
 *
 * Example: build/bench/ab_decode /tmp/old/librove.so build/librove.so 32 8 128 32768
 * Between steps it walks 64 MB of other memory, so a cache larger than the L3 is read from
 * DRAM as in a model with other layers; AB_NOFLUSH=1 leaves that out. */
#define _DEFAULT_SOURCE /* madvise (bench_pages.h) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "bench_dl.h"
#include "bench_pages.h"
#include "rove.h"

typedef struct lib {
  void *h;
  void (*config_init)(rove_attention_config *, int32_t, int32_t, int32_t);
  rove_status (*plan_create)(const rove_attention_config *, rove_plan **);
  rove_status (*cache_create)(const rove_plan *, int32_t, int32_t, rove_dtype, rove_kv_cache **);
  rove_status (*append)(rove_kv_cache *, int32_t, const float *, int64_t, const float *, int64_t,
                        const int32_t *);
  rove_status (*attend)(const rove_kv_cache *, const rove_attention_args *);
  rove_status (*forward)(const rove_plan *, const rove_attention_args *);
  void (*cache_destroy)(rove_kv_cache *);
  void (*plan_destroy)(rove_plan *);
  rove_plan *plan;
  rove_kv_cache *cache;
} lib;


/* Sum of every 8th float of n floats: touches each 32-byte piece, so every cache line. */
static float read_all(const float *x, size_t n) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i + 32 <= n; i += 32) s0 += x[i], s1 += x[i + 8], s2 += x[i + 16], s3 += x[i + 24];
  return s0 + s1 + s2 + s3;
}

static volatile float sink;

/* read_all of n floats on `threads` threads (the calling one included), each over its own
 * contiguous part: the read reference of a decode step on as many threads. (Before
 * session 44 the reference was read on one thread whatever the plans' count, so the
 * two-thread "% of read" figures of earlier sessions were against a one-thread read.) */
typedef struct {
  const float *x;
  size_t n;
  float sum;
} read_part;

static void *read_part_run(void *v) {
  read_part *r = v;
  r->sum = read_all(r->x, r->n);
  return NULL;
}

static float read_threads(const float *x, size_t n, int threads) {
  enum { MAX_READERS = 64 };
  pthread_t t[MAX_READERS];
  read_part part[MAX_READERS];
  int started[MAX_READERS] = {0};
  threads = threads < 1 ? 1 : threads > MAX_READERS ? MAX_READERS : threads;
  const size_t per = n / (size_t)threads / 32 * 32; /* whole 32-float pieces each */
  for (int i = 0; i < threads; i++) {
    part[i] = (read_part){x + per * (size_t)i, i == threads - 1 ? n - per * (size_t)i : per, 0};
    if (i) started[i] = pthread_create(&t[i], NULL, read_part_run, &part[i]) == 0;
  }
  float s = read_all(part[0].x, part[0].n);
  for (int i = 1; i < threads; i++) {
    if (started[i])
      pthread_join(t[i], NULL);
    else
      read_part_run(&part[i]); /* (no thread: read here, so the whole buffer is read) */
    s += part[i].sum;
  }
  return s;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: ab_decode LIB_A LIB_B [H Hkv d keys type threads rounds]\n");
    return 2;
  }
  const int H = argc > 3 ? atoi(argv[3]) : 32, Hk = argc > 4 ? atoi(argv[4]) : 8;
  const int d = argc > 5 ? atoi(argv[5]) : 128, nk = argc > 6 ? atoi(argv[6]) : 8192;
  const char *ty = argc > 7 ? argv[7] : "f32";
  const int thr = argc > 8 ? atoi(argv[8]) : 1, rounds = argc > 9 ? atoi(argv[9]) : 15;
  const int plain = !strcmp(ty, "plain");
  const char *rot = getenv("AB_ROTATE") ? getenv("AB_ROTATE") : "rove";
  const int rope = !strcmp(rot, "rope"), none = !strcmp(rot, "none");
  const rove_dtype type = !strcmp(ty, "bf16") ? ROVE_DTYPE_BF16
                          : !strcmp(ty, "f16") ? ROVE_DTYPE_F16
                          : !strcmp(ty, "q8")  ? ROVE_DTYPE_Q8
                                               : ROVE_DTYPE_F32;
  if (!plain && type == ROVE_DTYPE_F32 && strcmp(ty, "f32")) {
    fprintf(stderr, "ab_decode: unknown type %s (f32, bf16, f16, q8, plain)\n", ty);
    return 2;
  }
  if (H <= 0 || Hk <= 0 || d <= 0 || nk <= 0 || thr <= 0 || rounds <= 0 || H % Hk) {
    fprintf(stderr, "ab_decode: sizes must be positive and heads a multiple of kv_heads\n");
    return 2;
  }
  const size_t nkv = (size_t)nk * (size_t)Hk * (size_t)d;
  float *k = malloc(nkv * 4), *v = malloc(nkv * 4), *q = malloc((size_t)H * d * 4);
  float *o = malloc((size_t)H * d * 4);
  if (!k || !v || !q || !o) return 2;
  srand(1);
  for (size_t i = 0; i < nkv; i++) k[i] = (float)rand() / RAND_MAX - 0.5f, v[i] = (float)rand() / RAND_MAX - 0.5f;
  for (int i = 0; i < H * d; i++) q[i] = (float)rand() / RAND_MAX - 0.5f;
  lib L[2];
  for (int i = 0; i < 2; i++) {
    L[i].h = bench_open(argv[1 + i], "ab_decode");
    L[i].config_init = bench_sym(L[i].h, "rove_attention_config_init", "ab_decode");
    L[i].plan_create = bench_sym(L[i].h, "rove_plan_create", "ab_decode");
    L[i].cache_create = bench_sym(L[i].h, "rove_kv_cache_create_typed", "ab_decode");
    L[i].append = bench_sym(L[i].h, "rove_kv_cache_append", "ab_decode");
    L[i].attend = bench_sym(L[i].h, "rove_kv_cache_attention", "ab_decode");
    L[i].forward = bench_sym(L[i].h, "rove_attention_forward", "ab_decode");
    L[i].cache_destroy = bench_sym(L[i].h, "rove_kv_cache_destroy", "ab_decode");
    L[i].plan_destroy = bench_sym(L[i].h, "rove_plan_destroy", "ab_decode");
    rove_attention_config c;
    L[i].config_init(&c, H, Hk, d);
    c.n_threads = thr;
    if (getenv("AB_ISA")) { /* "A,B": this plan's ISA is the i-th name */
      rove_status (*parse)(const char *, rove_isa *) =
          bench_sym(L[i].h, "rove_isa_parse", "ab_decode");
      char names[64];
      const int len = snprintf(names, sizeof names, "%s", getenv("AB_ISA"));
      char *comma = strchr(names, ',');
      if (len >= (int)sizeof names || !comma) {
        fprintf(stderr, "ab_decode: AB_ISA must be two ISA names, A,B\n");
        return 2;
      }
      *comma = 0;
      const char *name = i ? comma + 1 : names;
      if (parse(name, &c.isa)) {
        fprintf(stderr, "ab_decode: unknown ISA name '%s' in AB_ISA\n", name);
        return 2;
      }
    }
    if (rope) c.rotate = ROVE_ROTATE_ROPE;
    if (none) c.rotate = 0;
    const char *(*status_string)(rove_status) =
        bench_sym(L[i].h, "rove_status_string", "ab_decode");
    rove_status st = L[i].plan_create(&c, &L[i].plan);
    if (!st) st = L[i].cache_create(L[i].plan, 1, nk, type, &L[i].cache);
    if (!st) st = L[i].append(L[i].cache, nk, k, 0, v, 0, NULL);
    if (st) {
      fprintf(stderr, "ab_decode: set-up failed for %s: %s\n", argv[1 + i], status_string(st));
      return 2;
    }
  }
  /* the read reference: as many bytes as one step reads, in a buffer of its own on the
   * same kind of pages as those bytes: 2 MB pages as a cache's (bench_pages.h), the
   * caller's malloc'd K and V in plain mode */
  const size_t esz = type == ROVE_DTYPE_F32 ? 4 : type == ROVE_DTYPE_Q8 ? 1 : 2;
  const size_t scales = (size_t)nk * (size_t)Hk * (size_t)((d + 31) / 32); /* Q8, per tensor */
  const size_t bytes = 2 * nkv * esz + (type == ROVE_DTYPE_Q8 ? 2 * scales * 4 : 0);
  const size_t rf = (bytes + 3) / 4;
  float *ref = plain ? malloc(rf * 4) : bench_alloc_huge(rf * 4);
  if (!ref) return 2;
  for (size_t i = 0; i < rf; i++) ref[i] = (float)(i & 7);
  /* flush: walk 64 MB of something else between steps so each step reads from DRAM
   * when the cache is larger than the L3 (as it is in a model, with the other layers) */
  const int do_flush = getenv("AB_NOFLUSH") == NULL; /* AB_NOFLUSH=1: data stays cached */
  const size_t fl = do_flush ? (size_t)16 << 20 : 0;
  float *flush = malloc(fl * 4 + 4);
  if (!flush) return 2;
  for (size_t i = 0; i < fl; i++) flush[i] = 1.0f;
  double *t[3];
  for (int i = 0; i < 3; i++)
    if (!(t[i] = malloc(sizeof(double) * (size_t)rounds))) return 2;
  rove_attention_args a = {.batch = 1, .q_len = 1, .q = q, .out = o};
  /* plain: the query at the last position, as a decode step (bottom-right causal) */
  rove_attention_args pa = {.batch = 1, .q_len = 1, .kv_len = nk, .q = q, .k = k, .v = v, .out = o};
  for (int r = -2; r < rounds; r++) /* two warm-up rounds */
    for (int i = 0; i < 3; i++) {
      if (do_flush) sink = read_all(flush, fl);
      const double t0 = bench_now();
      if (i < 2) {
        if (plain ? L[i].forward(L[i].plan, &pa) : L[i].attend(L[i].cache, &a)) return 1;
      } else {
        sink = read_threads(ref, rf, thr);
      }
      if (r >= 0) t[i][r] = bench_now() - t0;
    }
  const double per = 1e9 / ((double)nk * Hk);
  const double ma = bench_median(t[0], rounds), mb = bench_median(t[1], rounds);
  const double mr = bench_median(t[2], rounds);
  printf("shape %d:%d x %d, %d keys, %s %s, %s, %d thread(s), %d rounds%s%s, medians:\n", H,
         Hk, d, nk, ty, plain ? "K/V" : "cache", none ? "no rotation" : rope ? "RoPE" : "RoVE",
         thr, rounds, getenv("AB_ISA") ? ", AB_ISA=" : "",
         getenv("AB_ISA") ? getenv("AB_ISA") : "");
  printf("  read  %8.3f ms  %6.1f ns/key/kvhead  %5.1f GB/s\n", mr * 1e3, mr * per, bytes / mr * 1e-9);
  printf("  A     %8.3f ms  %6.1f ns/key/kvhead  %5.1f %% of read  (%s)\n", ma * 1e3, ma * per,
         100 * mr / ma, argv[1]);
  printf("  B     %8.3f ms  %6.1f ns/key/kvhead  %5.1f %% of read  (%s)\n", mb * 1e3, mb * per,
         100 * mr / mb, argv[2]);
  printf("  A / B %.3f\n", ma / mb);
  for (int i = 0; i < 2; i++) {
    L[i].cache_destroy(L[i].cache);
    L[i].plan_destroy(L[i].plan);
    dlclose(L[i].h);
  }
  for (int i = 0; i < 3; i++) free(t[i]);
  free(flush), free(ref), free(k), free(v), free(q), free(o);
  return 0;
}
