/* SPDX-License-Identifier: MIT */
/* One fixed workload per case, for instruction counts under callgrind (scripts/icount.sh):
 * argv[1] = setup | prefill1024 | prefill2048_128_gqa | decode4096 | decode_cache4096 |
 * decode_cache_gqa2048 (32:8 x 128, the GQA row kernel; _bf16, _f16, _q8: that cache type) |
 * gla4096 | backward512 | backward512_128 (a causal RoVE forward with LSE, then its
 * backward; prefill512 / prefill512_128 do the same set-up and forward without the
 * backward call, so the difference is the backward alone),
 * argv[2] = the rove_isa value. One thread. The inputs are filled with rand(), so
 * "setup" (fill only) is the part to subtract. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rove.h"
static float *rnd(size_t n, unsigned seed) { float *x = malloc(n * 4); srand(seed); for (size_t i = 0; i < n; i++) x[i] = (float)rand() / RAND_MAX * 2 - 1; return x; }
int main(int argc, char **argv) {
  const char *cs = argv[1]; int isa = atoi(argv[2]);
  int H = 12, Hk = 12, d = 64, nq = 1024, nk = 1024, cache = 0, gla = 0;
  if (!strcmp(cs, "prefill2048_128_gqa")) { d = 128; Hk = 3; nq = nk = 2048; }
  if (!strcmp(cs, "decode_cache4096")) { nq = 1; nk = 4096; cache = 1; }
  if (!strcmp(cs, "decode4096")) { nq = 1; nk = 4096; }
  if (!strncmp(cs, "decode_cache_gqa2048", 20)) { H = 32; Hk = 8; d = 128; nq = 1; nk = 2048; cache = 1; }
  const rove_dtype ctype = strstr(cs, "_bf16") ? ROVE_DTYPE_BF16 : strstr(cs, "_f16") ? ROVE_DTYPE_F16
                           : strstr(cs, "_q8") ? ROVE_DTYPE_Q8 : ROVE_DTYPE_F32;
  if (!strcmp(cs, "gla4096")) gla = 1;
  /* backward512* and the prefill512* cases it is compared with */
  const int bwd = !strncmp(cs, "backward512", 11), pair = bwd || !strncmp(cs, "prefill512", 10);
  if (pair) {
    nq = nk = 512;
    if (strstr(cs, "_128")) H = Hk = 8, d = 128;
  }
  if (gla) {
    int T = 4096, K = 64; rove_gla_config c; rove_gla_config_init(&c, 12, K, K); c.isa = isa; c.n_threads = 1; c.rotate = ROVE_ROTATE_ROVE;
    rove_gla_plan *p; if (rove_gla_plan_create(&c, &p)) return 1;
    size_t n = (size_t)T * 12 * K; float *q = rnd(n, 1), *k = rnd(n, 2), *v = rnd(n, 3), *g = rnd(n, 4), *o = malloc(n * 4);
    for (size_t i = 0; i < n; i++) g[i] = g[i] < 0 ? g[i] * 0.1f : -g[i] * 0.1f;
    double *ang = calloc(n / 2, 8);
    rove_gla_args a = {.batch = 1, .seq_len = T, .q = q, .k = k, .v = v, .g = g, .angles = ang, .out = o};
    return rove_gla_forward(p, &a);
  }
  rove_attention_config c; rove_attention_config_init(&c, H, Hk, d); c.isa = isa; c.n_threads = 1;
  rove_plan *p; if (rove_plan_create(&c, &p)) return 1;
  float *q = rnd((size_t)nq * H * d, 1), *k = rnd((size_t)nk * Hk * d, 2), *v = rnd((size_t)nk * Hk * d, 3), *o = malloc((size_t)nq * H * d * 4);
  if (cache) {
    rove_kv_cache *kc; rove_kv_cache_create_typed(p, 1, nk, ctype, &kc); rove_kv_cache_append(kc, nk, k, 0, v, 0, NULL);
    rove_attention_args b = {.batch = 1, .q_len = 1, .q = q, .out = o};
    for (int r = 0; r < 5; r++) if (rove_kv_cache_attention(kc, &b)) return 1;
    return 0;
  }
  if (!strcmp(cs, "setup")) return 0;
  float *lse = pair ? malloc((size_t)nq * H * 4) : NULL;
  rove_attention_args a = {.batch = 1, .q_len = nq, .kv_len = nk, .q = q, .k = k, .v = v, .out = o,
                           .lse = lse};
  if (!pair) return rove_attention_forward(p, &a);
  float *dout = rnd((size_t)nq * H * d, 4), *dq = malloc((size_t)nq * H * d * 4);
  float *dk = malloc((size_t)nk * Hk * d * 4), *dv = malloc((size_t)nk * Hk * d * 4);
  if (rove_attention_forward(p, &a)) return 1;
  rove_attention_grads g = {.dout = dout, .dq = dq, .dk = dk, .dv = dv};
  return bwd ? rove_attention_backward(p, &a, &g) : 0;
}
