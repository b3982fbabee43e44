/* SPDX-License-Identifier: MIT */
/* layer_loop: the GPT-2-small attention layer (d_model 768, 12 heads x 64, RoVE) called
 * alone in a loop, nothing else timed in between (rove_bench's layer rows interleave the
 * layer with its parts, whose OpenBLAS threads may still spin when the layer starts).
 *   layer_loop [threads, default 2]
 * Prints the median of 15 rove_layer_forward calls at n = 1024 and of 60 one-token
 * rove_layer_forward_cached steps over 4096 cached tokens (the cache truncated back after
 * each step), wall clock. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_clock.h"
#include "rove.h"

enum { DM = 768, H = 12, D = 64, W = H * D, N = 1024, KV = 4096, CALLS = 15, STEPS = 60 };


int main(int argc, char **argv) {
  const int thr = argc > 1 ? atoi(argv[1]) : 2;
  rove_attention_config c;
  rove_attention_config_init(&c, H, H, D);
  c.n_threads = thr;
  rove_plan *p = NULL;
  rove_layer *l = NULL;
  rove_kv_cache *cache = NULL;
  float *w = malloc(sizeof(float) * 4 * W * DM), *x = malloc(sizeof(float) * KV * DM);
  float *y = malloc(sizeof(float) * KV * DM);
  if (!w || !x || !y || rove_plan_create(&c, &p) != ROVE_OK) return 1;
  for (long i = 0; i < 4L * W * DM; i++) w[i] = (float)((i * 2654435761u) % 1000) * 3.6e-5f - 0.018f;
  for (long i = 0; i < (long)KV * DM; i++) x[i] = (float)((i * 40503u) % 1000) * 2e-3f - 1.0f;
  const rove_layer_weights lw = {.d_model = DM, .wq = w, .wk = w + W * DM, .wv = w + 2 * W * DM,
                                 .wo = w + 3 * W * DM};
  if (rove_layer_create(p, &lw, &l) != ROVE_OK || rove_kv_cache_create(p, 1, KV + 1, &cache) != ROVE_OK)
    return 1;
  double t[CALLS], s[STEPS];
  for (int i = 0; i < CALLS; i++) {
    const double t0 = bench_now();
    if (rove_layer_forward(l, 1, N, x, NULL, y) != ROVE_OK) return 1;
    t[i] = bench_now() - t0;
  }
  if (rove_layer_forward_cached(l, cache, KV, x, NULL, y) != ROVE_OK) return 1;
  for (int i = 0; i < STEPS; i++) {
    const double t0 = bench_now();
    if (rove_layer_forward_cached(l, cache, 1, x, NULL, y) != ROVE_OK) return 1;
    s[i] = bench_now() - t0;
    rove_kv_cache_truncate(cache, KV);
  }
  qsort(t, CALLS, sizeof *t, bench_cmp_double);
  qsort(s, STEPS, sizeof *s, bench_cmp_double);
  printf("threads %d: layer forward n=%d %.2f ms, cached decode step over %d tokens %.3f ms "
         "(medians of %d and %d calls)\n", thr, N, t[CALLS / 2] * 1e3, KV, s[STEPS / 2] * 1e3,
         CALLS, STEPS);
  rove_kv_cache_destroy(cache);
  rove_layer_destroy(l);
  rove_plan_destroy(p);
  free(w), free(x), free(y);
  return 0;
}
