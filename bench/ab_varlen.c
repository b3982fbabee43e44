/* SPDX-License-Identifier: MIT */
/* ab_varlen: varlen prefill against the dense call of the same work, for two librove
 * builds, timed in one process, alternately.
 *
 * Issue 17's varlen target is a ratio of two calls (rove_attention_varlen over packed
 * sequences / rove_attention_forward over one sequence of the same causal work), and a
 * change to either side moves it by a few per cent, less than this shared host's drift
 * between two runs minutes apart. So each build (dlopen, its own symbols) gets its own
 * plan; each round times A's varlen, A's dense, B's varlen, B's dense on the same data;
 * it prints the medians, each build's ratio and A / B of each call.
 *
 *   ab_varlen LIB_A LIB_B [set threads rounds]
 *   (defaults long 1 9; set long: bench_varlen.py's 8 sequences of 64..4096 tokens,
 *   short: its 64 of 16..256; 12 x 64 heads, causal, fp32, each build writing into its
 *   own output buffers allocated once). AB_ROTATE=rope: RoPE plans, AB_ROTATE=none: no
 *   rotation (default RoVE). AB_HUGE=1: inputs and outputs on transparent huge pages.
 * The lengths are numpy's default_rng(2026).integers(lo, hi + 1, count), as in
 * python/bench/bench_varlen.py; the dense n is sqrt(sum of len^2), rounded. */
#define _DEFAULT_SOURCE /* madvise */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench_clock.h"
#include "bench_dl.h"
#include "rove.h"

static const int32_t LONG_SET[8] = {3499, 785, 170, 2644, 1537, 1948, 385, 1558};
static const int32_t SHORT_SET[64] = {
    221, 59,  22,  170, 104, 128, 35,  105, 171, 101, 216, 206, 185, 234, 189, 58,
    222, 173, 39,  87,  55,  249, 191, 237, 84,  169, 161, 197, 44,  140, 171, 215,
    174, 124, 126, 97,  53,  82,  51,  70,  221, 142, 38,  119, 81,  175, 216, 19,
    128, 123, 254, 104, 55,  63,  131, 159, 94,  120, 175, 88,  248, 66,  241, 226};

typedef struct lib {
  void *h;
  rove_status (*varlen)(const rove_plan *, const rove_varlen_args *);
  rove_status (*forward)(const rove_plan *, const rove_attention_args *);
  void (*plan_destroy)(rove_plan *);
  rove_plan *plan;
  float *out_varlen, *out_dense;
} lib;

/* AB_HUGE=1: every input and output on transparent huge pages (2 MB aligned, madvise),
 * to tell the TLB's share of the strided row passes from the rest. */
static void *buffer(size_t bytes) {
  if (!getenv("AB_HUGE") || strcmp(getenv("AB_HUGE"), "1")) return malloc(bytes);
  const size_t big = (size_t)2 << 20, rounded = (bytes + big - 1) / big * big;
  void *p = aligned_alloc(big, rounded);
  if (p) (void)madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

static float *uniform(size_t n, unsigned seed) {
  float *x = buffer(n * sizeof(float));
  srand(seed);
  for (size_t i = 0; x && i < n; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
  return x;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: ab_varlen LIB_A LIB_B [long|short threads rounds]\n");
    return 2;
  }
  const char *set = argc > 3 ? argv[3] : "long";
  const int thr = argc > 4 ? atoi(argv[4]) : 1, rounds = argc > 5 ? atoi(argv[5]) : 9;
  if ((strcmp(set, "long") && strcmp(set, "short")) || thr <= 0 || rounds <= 0) {
    fprintf(stderr, "ab_varlen: set is long or short; threads and rounds positive\n");
    return 2;
  }
  const int32_t *lens = strcmp(set, "long") ? SHORT_SET : LONG_SET;
  const int32_t n_seqs = strcmp(set, "long") ? 64 : 8;
  const char *rot = getenv("AB_ROTATE") ? getenv("AB_ROTATE") : "rove";
  const int rope = !strcmp(rot, "rope"), none = !strcmp(rot, "none");
  if (!rope && !none && strcmp(rot, "rove")) {
    fprintf(stderr, "ab_varlen: AB_ROTATE is rove, rope or none\n");
    return 2;
  }
  const int32_t H = 12, d = 64;
  int32_t cu[65] = {0};
  double sq = 0.0;
  for (int32_t s = 0; s < n_seqs; s++) cu[s + 1] = cu[s] + lens[s], sq += (double)lens[s] * lens[s];
  const int32_t total = cu[n_seqs], n_dense = (int32_t)lround(sqrt(sq));
  const size_t wv = (size_t)total * H * d, wd = (size_t)n_dense * H * d;
  float *q = uniform(wv, 1), *k = uniform(wv, 2), *v = uniform(wv, 3);
  float *qd = uniform(wd, 4), *kd = uniform(wd, 5), *vd = uniform(wd, 6);
  if (!q || !k || !v || !qd || !kd || !vd) return 2;
  lib L[2];
  for (int i = 0; i < 2; i++) {
    L[i].h = bench_open(argv[1 + i], "ab_varlen");
    void (*config_init)(rove_attention_config *, int32_t, int32_t, int32_t) =
        bench_sym(L[i].h, "rove_attention_config_init", "ab_varlen");
    rove_status (*plan_create)(const rove_attention_config *, rove_plan **) =
        bench_sym(L[i].h, "rove_plan_create", "ab_varlen");
    L[i].varlen = bench_sym(L[i].h, "rove_attention_varlen", "ab_varlen");
    L[i].forward = bench_sym(L[i].h, "rove_attention_forward", "ab_varlen");
    L[i].plan_destroy = bench_sym(L[i].h, "rove_plan_destroy", "ab_varlen");
    rove_attention_config c;
    config_init(&c, H, H, d);
    c.n_threads = thr;
    c.causal = 1;
    if (rope) c.rotate = ROVE_ROTATE_ROPE;
    if (none) c.rotate = 0;
    if (plan_create(&c, &L[i].plan)) return 2;
    L[i].out_varlen = buffer(wv * sizeof(float));
    L[i].out_dense = buffer(wd * sizeof(float));
    if (!L[i].out_varlen || !L[i].out_dense) return 2;
    memset(L[i].out_varlen, 0, wv * sizeof(float)), memset(L[i].out_dense, 0, wd * sizeof(float));
  }
  double *t[4];
  for (int i = 0; i < 4; i++)
    if (!(t[i] = malloc(sizeof(double) * (size_t)rounds))) return 2;
  for (int r = -1; r < rounds; r++) /* one warm-up round */
    for (int i = 0; i < 4; i++) {
      const lib *l = &L[i / 2];
      rove_varlen_args va = {.n_seqs = n_seqs, .cu_seqlens_q = cu, .cu_seqlens_k = cu,
                             .q = q, .k = k, .v = v, .out = l->out_varlen};
      rove_attention_args da = {.batch = 1, .q_len = n_dense, .kv_len = n_dense, .q = qd,
                                .k = kd, .v = vd, .out = l->out_dense};
      const double t0 = bench_now();
      if (i % 2 ? l->forward(l->plan, &da) : l->varlen(l->plan, &va)) return 1;
      if (r >= 0) t[i][r] = bench_now() - t0;
    }
  double m[4];
  for (int i = 0; i < 4; i++) m[i] = bench_median(t[i], rounds);
  printf("set %s: %d sequences, %d tokens, dense n %d; 12 x 64 causal %s, %d thread(s), "
         "%d rounds, medians:\n", set, n_seqs, total, n_dense,
         none ? "without rotation" : rope ? "RoPE" : "RoVE", thr, rounds);
  for (int i = 0; i < 2; i++)
    printf("  %c  varlen %8.2f ms  dense %8.2f ms  varlen rate / dense rate %.3f  (%s)\n",
           'A' + i, m[2 * i] * 1e3, m[2 * i + 1] * 1e3,
           (sq / m[2 * i]) / ((double)n_dense * n_dense / m[2 * i + 1]), argv[1 + i]);
  printf("  A / B  varlen %.3f  dense %.3f\n", m[0] / m[2], m[1] / m[3]);
  for (int i = 0; i < 2; i++) {
    L[i].plan_destroy(L[i].plan);
    free(L[i].out_varlen), free(L[i].out_dense);
    dlclose(L[i].h);
  }
  for (int i = 0; i < 4; i++) free(t[i]);
  free(q), free(k), free(v), free(qd), free(kd), free(vd);
  return 0;
}
