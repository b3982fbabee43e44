/* SPDX-License-Identifier: MIT */
/* ab_gla: the GLA backward of two librove builds, timed in one process, alternately, each
 * beside its own forward (the idea of ab_backward, for rove_gla_forward / _backward).
 *
 * Each round times, for build A and then build B, rove_gla_forward and then
 * rove_gla_backward of that call on the same inputs (log decays in [-0.05, 0], the
 * range bench_gla_backward.py uses). It prints per build the median forward and backward
 * times and the median of the per-round ratios bwd / fwd (issue 16's target: <= 3).
 *
 *   ab_gla LIB_A LIB_B [T heads key_dim value_dim threads rounds]
 *   (defaults 4096 12 64 64 1 9). AB_ANGLES (set to anything): selective angles with
 *   RoVE rotations (q, k, v, o), d_angles asked for too; else no rotation. AB_THREADS_B:
 *   another thread count for build B (one build twice, threads 1 and AB_THREADS_B=2: the
 *   two-thread scaling of the forward and of the backward, as "A / B").
 *
 * Example: build/bench/ab_gla /tmp/base/librove.so build/librove.so 4096 8 128 128 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "bench_dl.h"
#include "rove.h"

typedef struct lib {
  void *h;
  void (*config_init)(rove_gla_config *, int32_t, int32_t, int32_t);
  rove_status (*plan_create)(const rove_gla_config *, rove_gla_plan **);
  rove_status (*forward)(const rove_gla_plan *, const rove_gla_args *);
  rove_status (*backward)(const rove_gla_plan *, const rove_gla_args *, const rove_gla_grads *);
  void (*plan_destroy)(rove_gla_plan *);
  rove_gla_plan *plan;
} lib;

static void *alloc_or_die(size_t bytes) {
  void *p = malloc(bytes);
  if (!p) {
    fprintf(stderr, "ab_gla: out of memory\n");
    exit(2);
  }
  return p;
}

/* n floats uniform in [lo, hi). */
static float *filled(size_t n, unsigned seed, float lo, float hi) {
  float *x = alloc_or_die(n * sizeof *x);
  srand(seed);
  for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * ((float)rand() / ((float)RAND_MAX + 1));
  return x;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: ab_gla LIB_A LIB_B [T H key_dim value_dim threads rounds]\n");
    return 2;
  }
  const int T = argc > 3 ? atoi(argv[3]) : 4096, H = argc > 4 ? atoi(argv[4]) : 12;
  const int K = argc > 5 ? atoi(argv[5]) : 64, V = argc > 6 ? atoi(argv[6]) : K;
  const int thr = argc > 7 ? atoi(argv[7]) : 1, rounds = argc > 8 ? atoi(argv[8]) : 9;
  if (T <= 0 || H <= 0 || K <= 0 || V <= 0 || thr <= 0 || rounds <= 0 || K % 2) {
    fprintf(stderr, "ab_gla: sizes must be positive, key_dim even\n");
    return 2;
  }
  const int angles = getenv("AB_ANGLES") != NULL;
  const int thr_b = getenv("AB_THREADS_B") ? atoi(getenv("AB_THREADS_B")) : thr;
  if (thr_b <= 0) {
    fprintf(stderr, "ab_gla: AB_THREADS_B must be positive\n");
    return 2;
  }
  const size_t nk = (size_t)T * H * K, nv = (size_t)T * H * V, na = (size_t)T * H * (K / 2);
  float *q = filled(nk, 1, -0.5f, 0.5f), *k = filled(nk, 2, -0.5f, 0.5f);
  float *v = filled(nv, 3, -0.5f, 0.5f), *g = filled(nk, 4, -0.05f, 0.0f);
  float *dout = filled(nv, 5, -0.5f, 0.5f), *o = filled(nv, 6, 0, 1);
  float *dq = filled(nk, 7, 0, 1), *dk = filled(nk, 8, 0, 1), *dg = filled(nk, 9, 0, 1);
  float *dv = filled(nv, 10, 0, 1);
  double *ang = NULL, *dang = NULL;
  if (angles) {
    ang = alloc_or_die(na * sizeof *ang), dang = alloc_or_die(na * sizeof *dang);
    srand(11);
    for (size_t i = 0; i < na; i++) ang[i] = 6.0 * rand() / RAND_MAX - 3.0;
  }
  lib L[2];
  for (int i = 0; i < 2; i++) {
    L[i].h = bench_open(argv[1 + i], "ab_gla");
    L[i].config_init = bench_sym(L[i].h, "rove_gla_config_init", "ab_gla");
    L[i].plan_create = bench_sym(L[i].h, "rove_gla_plan_create", "ab_gla");
    L[i].forward = bench_sym(L[i].h, "rove_gla_forward", "ab_gla");
    L[i].backward = bench_sym(L[i].h, "rove_gla_backward", "ab_gla");
    L[i].plan_destroy = bench_sym(L[i].h, "rove_gla_plan_destroy", "ab_gla");
    rove_gla_config c;
    L[i].config_init(&c, H, K, V);
    c.n_threads = i == 0 ? thr : thr_b;
    c.rotate = angles ? ROVE_ROTATE_ROVE : 0;
    const rove_status st = L[i].plan_create(&c, &L[i].plan);
    if (st != ROVE_OK) { /* e.g. value_dim < key_dim with AB_ANGLES (v and o are rotated) */
      fprintf(stderr, "ab_gla: %s: rove_gla_plan_create failed with status %d\n", argv[1 + i],
              (int)st);
      return 2;
    }
  }
  double *t[2][3]; /* [build][fwd, bwd, bwd / fwd] */
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) t[i][j] = alloc_or_die(sizeof(double) * (size_t)rounds);
  const rove_gla_args a = {
      .batch = 1, .seq_len = T, .q = q, .k = k, .v = v, .g = g, .angles = ang, .out = o};
  const rove_gla_grads gr = {
      .dout = dout, .dq = dq, .dk = dk, .dg = dg, .dv = dv, .d_angles = dang};
  for (int r = -1; r < rounds; r++) /* one warm-up round */
    for (int i = 0; i < 2; i++) {
      const double t0 = bench_now();
      const rove_status sf = L[i].forward(L[i].plan, &a);
      const double t1 = bench_now();
      const rove_status sb = sf == ROVE_OK ? L[i].backward(L[i].plan, &a, &gr) : ROVE_OK;
      const double t2 = bench_now();
      if (sf != ROVE_OK || sb != ROVE_OK) {
        fprintf(stderr, "ab_gla: %s: rove_gla_%s failed with status %d\n", argv[1 + i],
                sf != ROVE_OK ? "forward" : "backward", (int)(sf ? sf : sb));
        return 1;
      }
      if (r >= 0) t[i][0][r] = t1 - t0, t[i][1][r] = t2 - t1, t[i][2][r] = (t2 - t1) / (t1 - t0);
    }
  printf("GLA backward T %d x %d heads x %d/%d, %s, %d thread(s) (B: %d), %d rounds, medians:\n", T,
         H, K, V, angles ? "selective angles, RoVE" : "no rotation", thr, thr_b, rounds);
  double mb[2], mf[2];
  for (int i = 0; i < 2; i++) {
    const double f = bench_median(t[i][0], rounds), b = bench_median(t[i][1], rounds);
    mb[i] = b, mf[i] = f;
    printf("  %c  fwd %8.2f ms  bwd %8.2f ms  bwd/fwd %5.2f  (%s)\n", 'A' + i, f * 1e3, b * 1e3,
           bench_median(t[i][2], rounds), argv[1 + i]);
  }
  printf("  fwd A / B %.3f; bwd A / B %.3f, B / A %.3f\n", mf[0] / mf[1], mb[0] / mb[1],
         mb[1] / mb[0]);
  for (int i = 0; i < 2; i++) {
    L[i].plan_destroy(L[i].plan);
    dlclose(L[i].h);
    for (int j = 0; j < 3; j++) free(t[i][j]);
  }
  free(q), free(k), free(v), free(g), free(dout), free(o), free(dq), free(dk), free(dg);
  free(dv), free(ang), free(dang);
  return 0;
}
