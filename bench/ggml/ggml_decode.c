/* SPDX-License-Identifier: MIT */
/* ggml's flash_attn_ext at librove's decode shapes, for BENCHMARKS.md's side-by-side rows:
 * one query token over n cached keys, h query heads over kvh KV heads of head_dim d, the
 * cache in F32, F16 or Q8_0 (ggml's types), t threads. Prints the median of the timed
 * repetitions in ms. Not part of the build: scripts/bench-ggml.sh compiles it against a
 * ggml checkout the user provides (ggml is not a Debian 12 package).
 *
 *   ggml_decode n d h kvh type threads [reps]      type: f32 | f16 | q8_0
 *
 * Layout (ggml.h): q [d, 1, h], k and v [d, n, kvh] (v not transposed), no mask (every
 * key visible, as a decode step sees its whole cache), scale 1/sqrt(d). The K/V bytes are
 * the same as librove's cache of that type holds (q8_0: 34 bytes per 32 elements, librove's
 * Q8 36). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-cpu.h"
#include "ggml.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* uniform in [-a, a] from a 64-bit LCG (fixed seed: every run sees the same data) */
static float rnd(unsigned long long *s, float a) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return a * (2.0f * (float)((*s >> 40) & 0xFFFFFF) / 16777216.0f - 1.0f);
}

/* Fill tensor t (ne0 x rows) of type ty with uniform values in [-a, a]. */
static void fill(struct ggml_tensor *t, enum ggml_type ty, int64_t ne0, int64_t rows, float a,
                 unsigned long long *s) {
  float *tmp = malloc(sizeof(float) * (size_t)(ne0 * rows));
  if (!tmp) exit(1);
  for (int64_t i = 0; i < ne0 * rows; i++) tmp[i] = rnd(s, a);
  if (ty == GGML_TYPE_F32)
    memcpy(t->data, tmp, sizeof(float) * (size_t)(ne0 * rows));
  else if (ty == GGML_TYPE_F16)
    ggml_fp32_to_fp16_row(tmp, t->data, ne0 * rows);
  else
    ggml_quantize_chunk(ty, tmp, t->data, 0, rows, ne0, NULL);
  free(tmp);
}

int main(int argc, char **argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: %s n d h kvh f32|f16|q8_0 threads [reps]\n", argv[0]);
    return 2;
  }
  const int64_t n = atoll(argv[1]), d = atoll(argv[2]), h = atoll(argv[3]), kvh = atoll(argv[4]);
  const int threads = atoi(argv[6]), reps = argc > 7 ? atoi(argv[7]) : 50;
  enum ggml_type ty;
  if (!strcmp(argv[5], "f32"))
    ty = GGML_TYPE_F32;
  else if (!strcmp(argv[5], "f16"))
    ty = GGML_TYPE_F16;
  else if (!strcmp(argv[5], "q8_0"))
    ty = GGML_TYPE_Q8_0;
  else {
    fprintf(stderr, "unknown type %s\n", argv[5]);
    return 2;
  }
  if (n <= 0 || d <= 0 || h <= 0 || kvh <= 0 || h % kvh || threads <= 0 || reps <= 0) {
    fprintf(stderr, "bad shape\n");
    return 2;
  }
  const size_t kv_bytes = ggml_row_size(ty, d) * (size_t)(n * kvh);
  struct ggml_init_params ip = {
      .mem_size = 2 * kv_bytes + sizeof(float) * (size_t)(4 * d * h) + 64 * ggml_tensor_overhead() +
                  ggml_graph_overhead() + (64u << 20), /* + the work buffer compute_with_ctx takes */
      .mem_buffer = NULL,
      .no_alloc = false};
  struct ggml_context *ctx = ggml_init(ip);
  if (!ctx) return 1;
  struct ggml_tensor *q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, d, 1, h);
  struct ggml_tensor *k = ggml_new_tensor_3d(ctx, ty, d, n, kvh);
  struct ggml_tensor *v = ggml_new_tensor_3d(ctx, ty, d, n, kvh);
  unsigned long long s = 42;
  fill(q, GGML_TYPE_F32, d, h, 1.5f, &s);
  fill(k, ty, d, n * kvh, 1.5f, &s);
  fill(v, ty, d, n * kvh, 1.0f, &s);
  struct ggml_tensor *o = ggml_flash_attn_ext(ctx, q, k, v, NULL, 1.0f / sqrtf((float)d), 0.0f, 0.0f);
  ggml_flash_attn_ext_set_prec(o, GGML_PREC_F32);
  struct ggml_cgraph *gf = ggml_new_graph(ctx);
  ggml_build_forward_expand(gf, o);
  double *t = malloc(sizeof(double) * (size_t)reps);
  if (!t) return 1;
  for (int w = 0; w < 3; w++) ggml_graph_compute_with_ctx(ctx, gf, threads); /* warm-up */
  for (int r = 0; r < reps; r++) {
    const double t0 = now_ms();
    if (ggml_graph_compute_with_ctx(ctx, gf, threads) != GGML_STATUS_SUCCESS) return 1;
    t[r] = now_ms() - t0;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_double);
  const float *out = o->data;
  printf("ggml flash_attn_ext n=%lld d=%lld h=%lld kvh=%lld %s threads=%d: median %.3f ms "
         "(min %.3f, %d reps; K+V %.1f MB; out[0] %.6f)\n",
         (long long)n, (long long)d, (long long)h, (long long)kvh, argv[5], threads,
         t[reps / 2], t[0], reps, 2.0 * (double)kv_bytes / 1e6, (double)out[0]);
  free(t);
  ggml_free(ctx);
  return 0;
}
