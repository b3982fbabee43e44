/* SPDX-License-Identifier: MIT */
/* `rove demo`, toy decoder section: two residual attention layers (h += layer(h); d_model =
 * heads * dim, GPT-2-small by default) with seeded random weights. A prompt is prefilled
 * through one KV cache per layer, then tokens are decoded one at a time, each step's input
 * being the previous step's output row scaled to unit RMS. Reports prompt tokens/s and decode
 * steps/s for RoVE and plain RoPE, and checks every decode output against one full-sequence
 * rove_layer_forward pass over the same inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "demo_decoder.h"

#define DEC_LAYERS 2
#define DEC_REPS 2          /* generations per mode; the faster one is reported */
#define DEC_TOLERANCE 1e-4  /* decode vs full forward, relative to the outputs' max */

typedef struct dec_model {
  rove_plan *plan;
  rove_layer *layer[DEC_LAYERS];
  rove_kv_cache *cache[DEC_LAYERS];
} dec_model;

typedef struct dec_data {
  int64_t dm, total;  /* d_model; prompt + steps tokens */
  float *w[DEC_LAYERS][4]; /* wq, wk, wv, wo: [dm][dm] each */
  float *inputs;      /* [total][dm]: every token fed to the first layer */
  float *outputs;     /* [total][dm]: last layer's output, cached path */
  float *full;        /* [total][dm]: the same from full-sequence forwards */
  float *y;           /* [total][dm] scratch */
} dec_data;

typedef struct dec_result {
  double prompt_ms, decode_ms, err_all, err_last;
} dec_result;

static int fail_status(const char *what, rove_status st) {
  fprintf(stderr, "rove demo: %s failed: %s\n", what, rove_status_string(st));
  return -1;
}

static void free_data(dec_data *d) {
  for (int l = 0; l < DEC_LAYERS; l++)
    for (int i = 0; i < 4; i++) free(d->w[l][i]);
  free(d->inputs), free(d->outputs), free(d->full), free(d->y);
}

/* Weights uniform in +-1/sqrt(d_model); prompt inputs uniform with unit RMS. */
static int make_data(const demo_decoder_opts *o, dec_data *d) {
  d->dm = (int64_t)o->heads * o->dim;
  d->total = (int64_t)o->prompt + o->steps;
  const size_t wbytes = sizeof(float) * (size_t)(d->dm * d->dm);
  const size_t xbytes = sizeof(float) * (size_t)(d->total * d->dm);
  cli_rng rng;
  cli_rng_seed(&rng, o->seed ^ 0x9e3779b97f4a7c15ull);
  for (int l = 0; l < DEC_LAYERS; l++)
    for (int i = 0; i < 4; i++) {
      if (!(d->w[l][i] = malloc(wbytes))) return -1;
      cli_fill_uniform(&rng, d->w[l][i], d->dm * d->dm);
      for (int64_t j = 0; j < d->dm * d->dm; j++) d->w[l][i][j] /= sqrtf((float)d->dm);
    }
  d->inputs = malloc(xbytes), d->outputs = malloc(xbytes), d->full = malloc(xbytes);
  d->y = malloc(xbytes);
  if (!d->inputs || !d->outputs || !d->full || !d->y) return -1;
  cli_fill_uniform(&rng, d->inputs, (int64_t)o->prompt * d->dm);
  for (int64_t j = 0; j < (int64_t)o->prompt * d->dm; j++) d->inputs[j] *= sqrtf(3.0f);
  return 0;
}

static void model_destroy(dec_model *m) {
  for (int l = 0; l < DEC_LAYERS; l++) {
    rove_kv_cache_destroy(m->cache[l]);
    rove_layer_destroy(m->layer[l]);
  }
  rove_plan_destroy(m->plan);
}

static int model_create(const demo_decoder_opts *o, const dec_data *d, uint32_t rotate,
                        dec_model *m) {
  rove_attention_config c;
  rove_attention_config_init(&c, o->heads, o->heads, o->dim);
  c.rotate = rotate;
  c.isa = o->isa;
  c.n_threads = o->threads;
  rove_status st = rove_plan_create(&c, &m->plan);
  if (st != ROVE_OK) return fail_status("rove_plan_create", st);
  for (int l = 0; l < DEC_LAYERS; l++) {
    const rove_layer_weights w = {.d_model = (int32_t)d->dm, .wq = d->w[l][0], .wk = d->w[l][1],
                                  .wv = d->w[l][2], .wo = d->w[l][3]};
    st = rove_layer_create(m->plan, &w, &m->layer[l]);
    if (st != ROVE_OK) return fail_status("rove_layer_create", st);
    st = rove_kv_cache_create(m->plan, 1, (int32_t)d->total, &m->cache[l]);
    if (st != ROVE_OK) return fail_status("rove_kv_cache_create", st);
  }
  return 0;
}

/* h = x, then h += layer(h) for each layer, over n tokens: through the caches (cached) or
 * as one full-sequence forward per layer. */
static int model_forward(const dec_model *m, int cached, int32_t n, const float *x, float *h,
                         float *y, int64_t dm) {
  memcpy(h, x, sizeof(float) * (size_t)(n * dm));
  for (int l = 0; l < DEC_LAYERS; l++) {
    rove_status st = cached ? rove_layer_forward_cached(m->layer[l], m->cache[l], n, h, NULL, y)
                            : rove_layer_forward(m->layer[l], 1, n, h, NULL, y);
    if (st != ROVE_OK)
      return fail_status(cached ? "rove_layer_forward_cached" : "rove_layer_forward", st);
    for (int64_t i = 0; i < n * dm; i++) h[i] += y[i];
  }
  return 0;
}

/* dst = src scaled to unit RMS (the next decode input). */
static void unit_rms(float *dst, const float *src, int64_t n) {
  double ss = 0;
  for (int64_t i = 0; i < n; i++) ss += (double)src[i] * src[i];
  const float s = ss > 0 ? (float)(1.0 / sqrt(ss / (double)n)) : 1.0f;
  for (int64_t i = 0; i < n; i++) dst[i] = src[i] * s;
}

/* Prefill, then decode token by token; adds the timings to r (keeping the fastest). */
static int generate(const demo_decoder_opts *o, dec_model *m, dec_data *d, dec_result *r, int rep) {
  const int64_t dm = d->dm;
  for (int l = 0; l < DEC_LAYERS; l++) rove_kv_cache_reset(m->cache[l]);
  double t0 = cli_now_ms();
  if (model_forward(m, 1, o->prompt, d->inputs, d->outputs, d->y, dm) != 0) return -1;
  const double t1 = cli_now_ms();
  for (int64_t t = o->prompt; t < d->total; t++) {
    unit_rms(d->inputs + t * dm, d->outputs + (t - 1) * dm, dm);
    if (model_forward(m, 1, 1, d->inputs + t * dm, d->outputs + t * dm, d->y, dm) != 0) return -1;
  }
  const double t2 = cli_now_ms();
  if (rep == 0 || t1 - t0 < r->prompt_ms) r->prompt_ms = t1 - t0;
  if (rep == 0 || t2 - t1 < r->decode_ms) r->decode_ms = t2 - t1;
  return 0;
}

/* max |a - b| / max |b| over rows x dm floats. */
static double rel_err(const float *a, const float *b, int64_t n) {
  double mx = 0, e = 0;
  for (int64_t i = 0; i < n; i++) {
    mx = fmax(mx, fabs((double)b[i]));
    const double di = fabs((double)a[i] - b[i]);
    if (di != di) return INFINITY;
    e = fmax(e, di);
  }
  return mx > 0 ? e / mx : e;
}

static int run_mode(const demo_decoder_opts *o, dec_data *d, uint32_t rotate, dec_result *r) {
  dec_model m = {0};
  int rc = model_create(o, d, rotate, &m);
  for (int rep = 0; rc == 0 && rep < DEC_REPS; rep++) rc = generate(o, &m, d, r, rep);
  if (rc == 0) rc = model_forward(&m, 0, (int32_t)d->total, d->inputs, d->full, d->y, d->dm);
  if (rc == 0) {
    const int64_t p = (int64_t)o->prompt * d->dm, last = (d->total - 1) * d->dm;
    r->err_all = rel_err(d->outputs + p, d->full + p, (int64_t)o->steps * d->dm);
    r->err_last = rel_err(d->outputs + last, d->full + last, d->dm);
  }
  model_destroy(&m);
  return rc;
}

static void print_header(const demo_decoder_opts *o, int64_t dm) {
  printf("rove demo: toy decoder, %d layers, d_model %lld (%d heads x %d), batch 1, causal\n",
         DEC_LAYERS, (long long)dm, (int)o->heads, (int)o->dim);
  printf("  residual blocks h += layer(h); Wq, Wk, Wv, Wo uniform in +-1/sqrt(d_model), seed %llu\n",
         (unsigned long long)o->seed);
  printf("  a %d-token prompt prefilled through one KV cache per layer, then %d decode steps\n"
         "  (each step's input: the previous output row scaled to unit RMS); best of %d runs\n",
         (int)o->prompt, (int)o->steps, DEC_REPS);
  printf("  check: the decode outputs vs one full-sequence rove_layer_forward per layer over\n"
         "  the same inputs (max error relative to the outputs' max magnitude, tolerance %.0e)\n\n",
         DEC_TOLERANCE);
  printf("%-5s %15s %17s %10s %12s %12s  %s\n", "mode", "prompt [tok/s]", "decode [steps/s]",
         "step [ms]", "err (last)", "err (all)", "check");
  fflush(stdout);
}

static int print_row(const demo_decoder_opts *o, const char *label, const dec_result *r) {
  const int pass = r->err_all <= DEC_TOLERANCE && r->err_last <= DEC_TOLERANCE;
  printf("%-5s %15.1f %17.1f %10.3f %12.3e %12.3e  %s\n", label,
         o->prompt / (r->prompt_ms * 1e-3), o->steps / (r->decode_ms * 1e-3),
         r->decode_ms / o->steps, r->err_last, r->err_all, pass ? "PASS" : "FAIL");
  fflush(stdout);
  return pass;
}

int demo_decoder(const demo_decoder_opts *o) {
  dec_data d = {0};
  if (make_data(o, &d) != 0) {
    fprintf(stderr, "rove demo: out of memory for the toy decoder\n");
    free_data(&d);
    return CLI_EXIT_FAIL;
  }
  print_header(o, d.dm);
  dec_result rove = {0}, rope = {0};
  const int ok1 = run_mode(o, &d, ROVE_ROTATE_ROVE, &rove) == 0 && print_row(o, "RoVE", &rove);
  const int ok2 = run_mode(o, &d, ROVE_ROTATE_ROPE, &rope) == 0 && print_row(o, "RoPE", &rope);
  if (ok1 && ok2)
    printf("\nRoVE/RoPE time ratio: prompt %.3f, decode %.3f\n", rove.prompt_ms / rope.prompt_ms,
           rove.decode_ms / rope.decode_ms);
  free_data(&d);
  return ok1 && ok2 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
