/* SPDX-License-Identifier: MIT */
/* selective_gla: Selective RoPE end to end with librove.
 *
 * 1. Increments phi from the layer input (rove_selective_phase: the reference phase
 *    network with its defaults - low-rank projection over the whole input, causal conv of
 *    width 4, no activation - and seeded random weights), accumulated into angles
 *    (rove_selective_angles).
 * 2. RoVE softmax attention with those angles in place of positions (the Selective-RoPE
 *    reference itself rotates only q and k: ROVE_ROTATE_ROPE).
 * 3. Gated linear attention rotated by the same angles: a chunked prefill of PROMPT tokens,
 *    then STEPS decode steps that carry the whole decode state (conv state of the phase
 *    network, angle carry, GLA state) from call to call; the decoded outputs are checked
 *    against one chunked call over all PROMPT + STEPS tokens.
 * Exits non-zero if a call fails or the two GLA paths disagree.
 *
 *   cc selective_gla.c $(pkg-config --cflags --libs rove) -lm -o selective_gla
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rove.h>

enum { H = 4, D = 64, P = D / 2, IN = 32, RANK = 16, PROMPT = 200, STEPS = 8, T = PROMPT + STEPS };

static float next_uniform(uint32_t *s) { /* seeded xorshift32: [-1, 1) */
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return (float)(*s >> 8) * (2.0f / 16777216.0f) - 1.0f;
}
static float *random_floats(size_t n, uint32_t seed, float scale) {
  float *x = malloc(n * sizeof(float));
  for (size_t i = 0; x && i < n; i++) x[i] = scale * next_uniform(&seed);
  return x;
}
static int check(rove_status st, const char *what) {
  if (st != ROVE_OK) fprintf(stderr, "selective_gla: %s failed: %s\n", what, rove_status_string(st));
  return st != ROVE_OK;
}

typedef struct {
  float *x, *q, *k, *v, *g; /* inputs of all T tokens: [T][H * IN], [T][H][D] x4 */
  rove_selective_phase_weights w;
} model;

/* Angles of tokens [t0, t0 + n) from their inputs, continuing conv_state and carry. */
static int angles_for(const model *m, int t0, int n, float *conv_state, double *carry,
                      double *angles) {
  float *phi = malloc(sizeof(float) * (size_t)n * H * P);
  int bad = !phi || check(rove_selective_phase(&m->w, 1, n, m->x + (size_t)t0 * H * IN, 0,
                                               conv_state, phi), "rove_selective_phase") ||
            check(rove_selective_angles(1, n, H, P, phi, NULL, carry, carry, angles),
                  "rove_selective_angles");
  free(phi);
  return bad;
}

static rove_gla_args gla_args(const model *m, int t0, int n, const double *angles, float *state,
                              float *out) {
  const size_t off = (size_t)t0 * H * D;
  return (rove_gla_args){.batch = 1, .seq_len = n, .q = m->q + off, .k = m->k + off,
                         .v = m->v + off, .g = m->g + off, .angles = angles,
                         .initial_state = state, .final_state = state, .out = out};
}

int main(void) {
  model m = {0};
  m.x = random_floats((size_t)T * H * IN, 1, 1.0f);
  m.q = random_floats((size_t)T * H * D, 2, 1.0f);
  m.k = random_floats((size_t)T * H * D, 3, 1.0f);
  m.v = random_floats((size_t)T * H * D, 4, 1.0f);
  m.g = random_floats((size_t)T * H * D, 5, 0.05f);
  float *down = random_floats((size_t)RANK * H * IN, 6, 0.5f);
  float *up = random_floats((size_t)H * P * RANK, 8, 0.5f);
  float *conv = random_floats((size_t)H * P * 4, 7, 0.5f);
  if (!m.x || !m.q || !m.k || !m.v || !m.g || !down || !up || !conv) return 1;
  for (size_t i = 0; i < (size_t)T * H * D; i++) m.g[i] = -fabsf(m.g[i]); /* log decays <= 0 */
  rove_selective_phase_weights_init(&m.w, H, IN, P); /* the reference's defaults */
  m.w.proj_rank = RANK, m.w.proj_down = down, m.w.proj_up = up, m.w.conv_w = conv;
  int bad = 0;

  /* 1 + 2: angles of the prompt, then RoVE softmax attention with them. */
  double *angles = malloc(sizeof(double) * T * H * P), carry[H * P] = {0};
  float conv_state[H * P * 3] = {0};
  float *att = malloc(sizeof(float) * PROMPT * H * D);
  bad |= angles_for(&m, 0, PROMPT, conv_state, carry, angles);
  rove_attention_config ac;
  rove_attention_config_init(&ac, H, H, D);
  rove_plan *plan = NULL;
  bad |= check(rove_plan_create(&ac, &plan), "rove_plan_create");
  const rove_attention_args aa = {.batch = 1, .q_len = PROMPT, .kv_len = PROMPT, .q = m.q,
                                  .k = m.k, .v = m.v, .out = att, .q_angles = angles,
                                  .kv_angles = angles};
  if (!bad) bad |= check(rove_attention_forward(plan, &aa), "rove_attention_forward");

  /* 3: GLA prefill (chunked), then decode steps (recurrent), carrying every state. */
  rove_gla_config gc;
  rove_gla_config_init(&gc, H, D, D);
  gc.rotate = ROVE_ROTATE_ROVE;
  rove_gla_plan *gla = NULL;
  bad |= check(rove_gla_plan_create(&gc, &gla), "rove_gla_plan_create");
  float *state = calloc((size_t)H * D * D, sizeof(float)), *out = malloc(sizeof(float) * T * H * D);
  rove_gla_args ga = gla_args(&m, 0, PROMPT, angles, state, out);
  if (!bad) bad |= check(rove_gla_forward(gla, &ga), "rove_gla_forward");
  for (int t = PROMPT; t < T && !bad; t++) {
    double *at = angles + (size_t)t * H * P;
    bad |= angles_for(&m, t, 1, conv_state, carry, at);
    ga = gla_args(&m, t, 1, at, state, out + (size_t)t * H * D);
    if (!bad) bad |= check(rove_gla_recurrent(gla, &ga), "rove_gla_recurrent");
  }

  /* The same T tokens in one call each: angles, then chunked GLA from a zero state. */
  double *angles1 = malloc(sizeof(double) * T * H * P), carry1[H * P] = {0};
  float *out1 = malloc(sizeof(float) * T * H * D);
  bad |= angles_for(&m, 0, T, NULL, carry1, angles1);
  ga = gla_args(&m, 0, T, angles1, NULL, out1);
  ga.final_state = NULL;
  if (!bad) bad |= check(rove_gla_forward(gla, &ga), "rove_gla_forward (one call)");
  double diff = 0.0, sum = 0.0;
  for (size_t i = 0; !bad && i < (size_t)T * H * D; i++) {
    diff = fmax(diff, fabs((double)out[i] - out1[i]));
    sum += out[i];
  }
  if (!bad) {
    printf("angles after %d tokens: head 0 pair 0 %.6f, pair %d %.3e\n", T, angles[(size_t)(T - 1) * H * P],
           P - 1, angles[(size_t)(T - 1) * H * P + P - 1]);
    printf("RoVE attention with selective angles: out[0] = %.6f\n", att[0]);
    printf("GLA prefill %d + %d decode steps: checksum %.6f, max diff to one call %.2e\n",
           PROMPT, STEPS, sum, diff);
  }
  bad |= !(diff <= 1e-4);
  rove_gla_plan_destroy(gla);
  rove_plan_destroy(plan);
  free(m.x), free(m.q), free(m.k), free(m.v), free(m.g), free(down), free(up), free(conv);
  free(angles), free(att), free(state), free(out), free(angles1), free(out1);
  return bad;
}
