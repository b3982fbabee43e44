/* SPDX-License-Identifier: MIT */
/* ab_backward: the attention backward of two librove builds, timed in one process,
 * alternately, each beside its own forward.
 *
 * The same idea as ab_decode: a shared host's speed moves between runs by more than a
 * kernel change, so two builds of librove.so are loaded (dlopen, each with its own
 * symbols) and timed in turn, round after round, on the same inputs. Each round times,
 * for A and then for B, the forward with LSE (rove_attention_forward) and then the
 * backward of that call (rove_attention_backward). It prints per build the median
 * forward and backward times, the median of the per-round ratios bwd / fwd (issue 16's
 * target: <= 2.5), and the backward's GFLOP/s counted as FlashAttention-2 does (2.5 x
 * the forward's 4 n^2 d h flops, halved when causal) beside the single-core FMA peak of
 * the plan's ISA, measured in the same run (fma_peak.c, built into this program with its
 * two calls into librove renamed to ab_cpu_features / ab_isa_name, which ask build A: a
 * third copy of librove linked in would take over the two builds' own calls).
 *
 *   ab_backward LIB_A LIB_B [n heads kv_heads head_dim threads rounds]
 *   (defaults 1024 12 12 64 1 9). AB_ROTATE=rope | none: that plan (default RoVE);
 *   AB_ROTATE_B: another for build B (AB_ROTATE=rope AB_ROTATE_B=rove with one build twice:
 *   the RoVE / RoPE ratio, as "bwd B / A"); AB_FULL (set to anything): not causal.
 *
 * Example: build/bench/ab_backward /tmp/base/build/librove.so build/librove.so 1024 8 8 128 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "bench_dl.h"
#include "fma_peak.h"
#include "rove.h"

typedef struct lib {
  void *h;
  void (*config_init)(rove_attention_config *, int32_t, int32_t, int32_t);
  rove_status (*plan_create)(const rove_attention_config *, rove_plan **);
  rove_status (*forward)(const rove_plan *, const rove_attention_args *);
  rove_status (*backward)(const rove_plan *, const rove_attention_args *,
                          const rove_attention_grads *);
  void (*plan_destroy)(rove_plan *);
  rove_isa (*plan_isa)(const rove_plan *);
  rove_plan *plan;
} lib;

static uint32_t (*a_cpu_features)(void);
static const char *(*a_isa_name)(rove_isa);
/* fma_peak.c's calls (renamed by the build, see CMakeLists.txt) */
uint32_t ab_cpu_features(void) { return a_cpu_features(); }
const char *ab_isa_name(rove_isa isa) { return a_isa_name(isa); }

static float *filled(size_t n, unsigned seed) {
  float *x = malloc(n * sizeof *x);
  if (!x) {
    fprintf(stderr, "ab_backward: out of memory\n");
    exit(2);
  }
  srand(seed);
  for (size_t i = 0; i < n; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
  return x;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: ab_backward LIB_A LIB_B [n H Hkv d threads rounds]\n");
    return 2;
  }
  const int n = argc > 3 ? atoi(argv[3]) : 1024, H = argc > 4 ? atoi(argv[4]) : 12;
  const int Hk = argc > 5 ? atoi(argv[5]) : H, d = argc > 6 ? atoi(argv[6]) : 64;
  const int thr = argc > 7 ? atoi(argv[7]) : 1, rounds = argc > 8 ? atoi(argv[8]) : 9;
  if (n <= 0 || H <= 0 || Hk <= 0 || d <= 0 || thr <= 0 || rounds <= 0 || H % Hk) {
    fprintf(stderr, "ab_backward: sizes must be positive and heads a multiple of kv_heads\n");
    return 2;
  }
  const char *rot[2] = {getenv("AB_ROTATE") ? getenv("AB_ROTATE") : "rove", NULL};
  rot[1] = getenv("AB_ROTATE_B") ? getenv("AB_ROTATE_B") : rot[0];
  uint32_t mode[2];
  for (int i = 0; i < 2; i++) {
    mode[i] = !strcmp(rot[i], "rope") ? ROVE_ROTATE_ROPE : !strcmp(rot[i], "none") ? 0u
                                                                              : ROVE_ROTATE_ROVE;
    if (mode[i] == ROVE_ROTATE_ROVE && strcmp(rot[i], "rove")) {
      fprintf(stderr, "ab_backward: AB_ROTATE=%s: rove, rope or none\n", rot[i]);
      return 2;
    }
  }
  const int causal = getenv("AB_FULL") == NULL;
  const size_t nq = (size_t)n * H * d, nkv = (size_t)n * Hk * d;
  float *q = filled(nq, 1), *k = filled(nkv, 2), *v = filled(nkv, 3), *dout = filled(nq, 4);
  float *o = filled(nq, 5), *lse = filled((size_t)n * H, 6), *dq = filled(nq, 7);
  float *dk = filled(nkv, 8), *dv = filled(nkv, 9);
  lib L[2];
  for (int i = 0; i < 2; i++) {
    L[i].h = bench_open(argv[1 + i], "ab_backward");
    L[i].config_init = bench_sym(L[i].h, "rove_attention_config_init", "ab_backward");
    L[i].plan_create = bench_sym(L[i].h, "rove_plan_create", "ab_backward");
    L[i].forward = bench_sym(L[i].h, "rove_attention_forward", "ab_backward");
    L[i].backward = bench_sym(L[i].h, "rove_attention_backward", "ab_backward");
    L[i].plan_destroy = bench_sym(L[i].h, "rove_plan_destroy", "ab_backward");
    L[i].plan_isa = bench_sym(L[i].h, "rove_plan_isa", "ab_backward");
    rove_attention_config c;
    L[i].config_init(&c, H, Hk, d);
    c.n_threads = thr;
    c.rotate = mode[i];
    c.causal = causal;
    if (i == 0) {
      a_cpu_features = bench_sym(L[i].h, "rove_cpu_features", "ab_backward");
      a_isa_name = bench_sym(L[i].h, "rove_isa_name", "ab_backward");
    }
    if (L[i].plan_create(&c, &L[i].plan)) {
      fprintf(stderr, "ab_backward: plan_create failed for %s\n", argv[1 + i]);
      return 2;
    }
  }
  double *t[2][3]; /* [build][fwd, bwd, bwd / fwd] */
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      if (!(t[i][j] = malloc(sizeof(double) * (size_t)rounds))) {
        fprintf(stderr, "ab_backward: out of memory\n");
        return 2;
      }
  const rove_attention_args a = {.batch = 1, .q_len = n, .kv_len = n, .q = q, .k = k, .v = v,
                                 .out = o, .lse = lse};
  const rove_attention_grads g = {.dout = dout, .dq = dq, .dk = dk, .dv = dv};
  for (int r = -1; r < rounds; r++) /* one warm-up round */
    for (int i = 0; i < 2; i++) {
      const double t0 = bench_now();
      const rove_status sf = L[i].forward(L[i].plan, &a);
      const double t1 = bench_now();
      const rove_status sb = sf == ROVE_OK ? L[i].backward(L[i].plan, &a, &g) : ROVE_OK;
      const double t2 = bench_now();
      if (sf != ROVE_OK || sb != ROVE_OK) {
        fprintf(stderr, "ab_backward: %s: rove_attention_%s failed with status %d\n",
                argv[1 + i], sf != ROVE_OK ? "forward" : "backward", (int)(sf ? sf : sb));
        return 1;
      }
      if (r >= 0) t[i][0][r] = t1 - t0, t[i][1][r] = t2 - t1, t[i][2][r] = (t2 - t1) / (t1 - t0);
    }
  /* FlashAttention-2's count: forward 4 n^2 d h (2 products), halved when causal; the
   * backward 2.5x that */
  const double fwd_flops = 4.0 * n * (double)n * d * H * (causal ? 0.5 : 1.0);
  const rove_isa isa = L[0].plan_isa(L[0].plan);
  const double peak = rove_fma_peak_gflops(isa) * thr; /* 0: no vector FMA loop (scalar) */
  printf("backward %d x %d:%d x %d, %s, %d thread(s), %d rounds, medians; FMA peak %.1f "
         "GFLOP/s (%s, %d core(s), measured now):\n", n, H, Hk, d, causal ? "causal" : "full",
         thr, rounds, peak, a_isa_name(isa), thr);
  double mb[2];
  for (int i = 0; i < 2; i++) {
    const double f = bench_median(t[i][0], rounds), b = bench_median(t[i][1], rounds);
    const double ratio = bench_median(t[i][2], rounds);
    mb[i] = b;
    const double gf = 2.5 * fwd_flops / b * 1e-9;
    printf("  %c  fwd %8.2f ms  bwd %8.2f ms  bwd/fwd %5.2f  bwd %6.1f GFLOP/s = %4.1f %% of "
           "peak  (%s, %s)\n", 'A' + i, f * 1e3, b * 1e3, ratio, gf,
           peak > 0 ? 100 * gf / peak : 0.0, rot[i], argv[1 + i]);
  }
  printf("  bwd A / B %.3f, B / A %.3f\n", mb[0] / mb[1], mb[1] / mb[0]);
  for (int i = 0; i < 2; i++) {
    L[i].plan_destroy(L[i].plan);
    dlclose(L[i].h);
    for (int j = 0; j < 3; j++) free(t[i][j]);
  }
  free(q), free(k), free(v), free(dout), free(o), free(lse), free(dq), free(dk), free(dv);
  return 0;
}
