/* SPDX-License-Identifier: MIT */
/* hello_rove: the smallest complete use of librove.
 *
 * Builds a RoVE attention plan for 4 heads of dimension 64, runs one causal forward pass
 * on seeded random data and prints the chosen ISA and a checksum of the output. Exits
 * non-zero if any call fails or the output is not finite.
 *
 *   cc hello_rove.c $(pkg-config --cflags --libs rove) -o hello_rove
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <rove.h>

enum { N_HEADS = 4, HEAD_DIM = 64, SEQ = 32 };

/* Seeded xorshift32: uniform floats in [-1, 1). */
static float next_uniform(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return (float)(*s >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

static int check(rove_status st, const char *what) {
  if (st != ROVE_OK) {
    fprintf(stderr, "hello_rove: %s failed: %s\n", what, rove_status_string(st));
    return 1;
  }
  return 0;
}

int main(void) {
  const size_t n = (size_t)SEQ * N_HEADS * HEAD_DIM;
  float *q = malloc(n * sizeof *q), *k = malloc(n * sizeof *k);
  float *v = malloc(n * sizeof *v), *out = malloc(n * sizeof *out);
  rove_plan *plan = NULL;
  int rc = 1;
  if (!q || !k || !v || !out) {
    fprintf(stderr, "hello_rove: out of memory\n");
    goto done;
  }
  uint32_t seed = 12345u;
  for (size_t i = 0; i < n; ++i) {
    q[i] = next_uniform(&seed);
    k[i] = next_uniform(&seed);
    v[i] = next_uniform(&seed);
  }

  /* Defaults: RoVE rotations (Q|K|V|O), causal, theta 10000, scale 1/sqrt(64). */
  rove_attention_config cfg;
  rove_attention_config_init(&cfg, N_HEADS, N_HEADS, HEAD_DIM);
  cfg.rotate = ROVE_ROTATE_ROVE;
  if (check(rove_plan_create(&cfg, &plan), "rove_plan_create")) goto done;

  rove_attention_args args = {0};
  args.batch = 1;
  args.q_len = SEQ;
  args.kv_len = SEQ;
  args.q = q;
  args.k = k;
  args.v = v;
  args.out = out;
  if (check(rove_attention_forward(plan, &args), "rove_attention_forward")) goto done;

  double sum = 0.0, abs_sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (!isfinite(out[i])) {
      fprintf(stderr, "hello_rove: non-finite output at %zu\n", i);
      goto done;
    }
    sum += out[i];
    abs_sum += fabs((double)out[i]);
  }
  printf("librove %s, isa %s, %d threads\n", rove_version_string(),
         rove_isa_name(rove_plan_isa(plan)), (int)rove_plan_threads(plan));
  printf("RoVE attention %d heads x %d, %d tokens: checksum %.6f (sum |y| %.6f)\n", N_HEADS,
         HEAD_DIM, SEQ, sum, abs_sum);
  rc = 0;

done:
  rove_plan_destroy(plan);
  free(q);
  free(k);
  free(v);
  free(out);
  return rc;
}
