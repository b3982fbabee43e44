/* SPDX-License-Identifier: MIT */
/* `rove demo`, toy decoder section: two residual attention layers (h += layer(h); d_model =
 * heads * dim, GPT-2-small by default) with seeded random weights. A prompt is prefilled
 * through one KV cache per layer, then tokens are decoded one at a time, each step's input
 * being the previous step's output row scaled to unit RMS. Reports prompt tokens/s and decode
 * steps/s for RoVE and plain RoPE. The two modes generate in lockstep: each prefill and
 * each decode step of RoVE is timed right beside RoPE's (which goes first alternates), so
 * that a busy machine slows both alike and the ratio is a median over many close pairs
 * (4 prefill pairs and `steps` step pairs per generation). Every decode output is checked
 * against one full-sequence rove_layer_forward pass over the same inputs.
 *
 * The KV caches store K and V as o->kv. For a type other than f32, two more generations
 * with f32 caches run in the same lockstep (four runs: RoVE and RoPE, typed and f32; the
 * order of each round rotates through every arrangement), so the report can set the typed
 * caches' time beside f32's as medians of close pairs too, and give how far the typed
 * run's outputs are from the f32 run's (each run feeds its own outputs back, so that
 * includes the drift of a generation). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "demo_decoder.h"

#define DEC_LAYERS 2
#define DEC_PAIRS 16        /* most interleaved pairs of generations (one per mode each) */
#define DEC_PROMPT_REPS 4   /* prefills per mode in a generation pair (the last one is kept) */
#define DEC_TOLERANCE 1e-4  /* decode vs full forward, relative to the outputs' max */
#define DEC_RUNS 4          /* run k: mode k % 2 (0 RoVE, 1 RoPE), cache type k / 2 (0 o->kv,
                               1 f32; only with o->kv not f32) */

/* The check's tolerance for caches of type t. The full forward is fp32 throughout, so a
 * typed cache adds its rounding of K and V (rove_kv_cache_create_typed: at most 2^-8
 * relative per element for bf16, 2^-11 for f16, max|block| / 254 absolute for q8), carried
 * through the softmax, Wo and the second layer: the per-element bound (twice it for q8),
 * relative to the outputs' max. Measured
 * (shapes 1x2 .. 8x256, prompts of 1 .. 512 tokens; short contexts average the least):
 * at most 4.1e-4 (bf16), 5.8e-5 (f16), 1.6e-3 (q8); 5e-5, 7e-6, 1.4e-4 at the default
 * shape. */
static double dec_tolerance(rove_dtype t) {
  switch (t) {
    case ROVE_DTYPE_BF16: return 0x1p-8;
    case ROVE_DTYPE_F16: return 0x1p-11;
    case ROVE_DTYPE_Q8: return 2.0 / 254.0;
    default: return DEC_TOLERANCE;
  }
}

typedef struct dec_model {
  rove_plan *plan;
  rove_layer *layer[DEC_LAYERS];
  rove_kv_cache *cache[DEC_LAYERS];
} dec_model;

typedef struct dec_data {
  int64_t dm, total;  /* d_model; prompt + steps tokens */
  int runs;           /* 2 (f32 caches) or DEC_RUNS */
  float *w[DEC_LAYERS][4]; /* wq, wk, wv, wo: [dm][dm] each */
  float *inputs[DEC_RUNS];  /* per run, [total][dm]: every token fed to the first layer (the
                               prompt, then each step's input) */
  float *outputs[DEC_RUNS]; /* per run, [total][dm]: last layer's output, cached path */
  float *full;        /* [total][dm]: the same from full-sequence forwards */
  float *y;           /* [total][dm] scratch */
} dec_data;

typedef struct dec_result {
  double prompt_ms, decode_ms, err_all, err_last; /* times: median over the pairs */
} dec_result;

static rove_dtype run_type(const demo_decoder_opts *o, int k) {
  return k / 2 ? ROVE_DTYPE_F32 : o->kv;
}

static int fail_status(const char *what, rove_status st) {
  fprintf(stderr, "rove demo: %s failed: %s\n", what, rove_status_string(st));
  return -1;
}

static void free_data(dec_data *d) {
  for (int l = 0; l < DEC_LAYERS; l++)
    for (int i = 0; i < 4; i++) free(d->w[l][i]);
  for (int j = 0; j < DEC_RUNS; j++) free(d->inputs[j]), free(d->outputs[j]);
  free(d->full), free(d->y);
}

/* Weights uniform in +-1/sqrt(d_model); prompt inputs uniform with unit RMS. */
static int make_data(const demo_decoder_opts *o, dec_data *d) {
  d->dm = (int64_t)o->heads * o->dim;
  d->total = (int64_t)o->prompt + o->steps;
  d->runs = o->kv != ROVE_DTYPE_F32 ? DEC_RUNS : 2;
  const size_t wbytes = sizeof(float) * (size_t)(d->dm * d->dm);
  const size_t xbytes = sizeof(float) * (size_t)(d->total * d->dm);
  if (cli_check_memory("demo", (double)DEC_LAYERS * 4 * (double)wbytes +
                                   (2.0 * d->runs + 2) * (double)xbytes * 2, /* + caches */
                       "--heads, --dim, --prompt or --steps") != 0)
    return -2;
  cli_rng rng;
  cli_rng_seed(&rng, o->seed ^ 0x9e3779b97f4a7c15ull);
  for (int l = 0; l < DEC_LAYERS; l++)
    for (int i = 0; i < 4; i++) {
      if (!(d->w[l][i] = malloc(wbytes))) return -1;
      cli_fill_uniform(&rng, d->w[l][i], d->dm * d->dm);
      for (int64_t j = 0; j < d->dm * d->dm; j++) d->w[l][i][j] /= sqrtf((float)d->dm);
    }
  for (int j = 0; j < d->runs; j++) {
    d->inputs[j] = malloc(xbytes), d->outputs[j] = malloc(xbytes);
    if (!d->inputs[j] || !d->outputs[j]) return -1;
  }
  d->full = malloc(xbytes), d->y = malloc(xbytes);
  if (!d->full || !d->y) return -1;
  const int64_t np = (int64_t)o->prompt * d->dm;
  cli_fill_uniform(&rng, d->inputs[0], np);
  for (int64_t j = 0; j < np; j++) d->inputs[0][j] *= sqrtf(3.0f);
  for (int j = 1; j < d->runs; j++) /* the same prompt */
    memcpy(d->inputs[j], d->inputs[0], sizeof(float) * (size_t)np);
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
                        rove_dtype kv, dec_model *m) {
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
    st = rove_kv_cache_create_typed(m->plan, 1, (int32_t)d->total, kv, &m->cache[l]);
    if (st != ROVE_OK) return fail_status("rove_kv_cache_create_typed", st);
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

/* Prefill run `which`'s prompt (its caches reset first). */
static int prefill(const demo_decoder_opts *o, dec_model *m, dec_data *d, int which) {
  for (int l = 0; l < DEC_LAYERS; l++) rove_kv_cache_reset(m->cache[l]);
  return model_forward(m, 1, o->prompt, d->inputs[which], d->outputs[which], d->y, d->dm);
}

/* Decode token t of run `which` (its input: the previous output row at unit RMS). */
static int decode_step(dec_model *m, dec_data *d, int which, int64_t t) {
  const int64_t dm = d->dm;
  float *in = d->inputs[which], *out = d->outputs[which];
  unit_rms(in + t * dm, out + (t - 1) * dm, dm);
  return model_forward(m, 1, 1, in + t * dm, out + t * dm, d->y, dm);
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

/* The pair ratios of one kind of time: median and quartiles. */
typedef struct dec_ratio {
  double median, q1, q3;
} dec_ratio;

/* a[n], b[n]: the two runs' times of n pairs; r: scratch [n] */
static dec_ratio ratio_stats(const double *a, const double *b, int64_t n, double *r) {
  for (int64_t k = 0; k < n; k++) r[k] = b[k] > 0.0 ? a[k] / b[k] : 1.0;
  return (dec_ratio){cli_median(r, (int)n), cli_quantile(r, (int)n, 0.25),
                     cli_quantile(r, (int)n, 0.75)};
}

/* ratio[0 prompt, 1 decode][0 CPU, 1 wall] */
typedef dec_ratio dec_ratios[2][2];

/* Times of every run, [run][kind: 0 CPU, 1 wall][sample] */
typedef struct dec_times {
  double *prompt[DEC_RUNS][2]; /* [pairs * DEC_PROMPT_REPS] */
  double *step[DEC_RUNS][2];   /* [pairs * steps]: one decode step (both layers) */
  double *gen_decode[DEC_RUNS]; /* [pairs]: wall time of a generation's decode steps */
  double *scratch;      /* [max(pairs * steps, pairs * DEC_PROMPT_REPS)] */
} dec_times;

static void times_free(dec_times *t) {
  for (int j = 0; j < DEC_RUNS; j++) {
    for (int k = 0; k < 2; k++) free(t->prompt[j][k]), free(t->step[j][k]);
    free(t->gen_decode[j]);
  }
  free(t->scratch);
}

static int times_alloc(dec_times *t, int runs, int np, int64_t steps) {
  memset(t, 0, sizeof *t);
  const size_t ns = (size_t)np * (size_t)(steps > 0 ? steps : 1), npr = (size_t)np * DEC_PROMPT_REPS;
  int ok = 1;
  for (int j = 0; j < runs; j++) {
    for (int k = 0; k < 2; k++) {
      ok &= (t->prompt[j][k] = calloc(npr, sizeof(double))) != NULL;
      ok &= (t->step[j][k] = calloc(ns, sizeof(double))) != NULL;
    }
    ok &= (t->gen_decode[j] = calloc((size_t)np, sizeof(double))) != NULL;
  }
  ok &= (t->scratch = calloc(ns > npr ? ns : npr, sizeof(double))) != NULL;
  if (!ok) times_free(t);
  return ok ? 0 : -1;
}

/* The i-th run of round c. Two runs: RoVE and RoPE, which goes first alternating. Four:
 * the cache types take turns going first (c % 2) and, within each type, the modes
 * ((c / 2) % 2), so that four rounds in a row hold every arrangement. */
static int round_run(int runs, int64_t c, int i) {
  if (runs == 2) return (int)((c + i) % 2);
  const int type = (int)((i / 2 + c % 2) % 2), mode = (int)((i % 2 + (c / 2) % 2) % 2);
  return type * 2 + mode;
}

/* Generation pair p of every run in lockstep: DEC_PROMPT_REPS prefill rounds (the last
 * one's caches are kept), then every decode step of the runs back to back. The order
 * changes with each round (round_run), so that a busy machine slows all runs alike and
 * every sample has partners taken within milliseconds of it. */
static int generate_pair(const demo_decoder_opts *o, dec_model *m, dec_data *d, int p,
                         dec_times *t) {
  for (int rep = 0; rep < DEC_PROMPT_REPS; rep++)
    for (int i = 0; i < d->runs; i++) {
      const int j = round_run(d->runs, (int64_t)p * DEC_PROMPT_REPS + rep, i);
      const double t0 = cli_now_ms(), c0 = cli_cpu_ms();
      if (prefill(o, &m[j], d, j) != 0) return -1;
      t->prompt[j][0][p * DEC_PROMPT_REPS + rep] = cli_cpu_ms() - c0;
      t->prompt[j][1][p * DEC_PROMPT_REPS + rep] = cli_now_ms() - t0;
    }
  for (int64_t s = 0; s < o->steps; s++)
    for (int i = 0; i < d->runs; i++) {
      const int j = round_run(d->runs, (int64_t)p * o->steps + s, i);
      const double t0 = cli_now_ms(), c0 = cli_cpu_ms();
      if (decode_step(&m[j], d, j, o->prompt + s) != 0) return -1;
      const double wall = cli_now_ms() - t0;
      t->step[j][0][p * o->steps + s] = cli_cpu_ms() - c0;
      t->step[j][1][p * o->steps + s] = wall;
      t->gen_decode[j][p] += wall;
    }
  return 0;
}

/* Every run: one untimed generation pair, o->pairs timed ones, then each run's check
 * against its full forward. Times: medians (prompt: of the prefills; decode: of the
 * generations' decode totals); ratios: medians of the per-pair ratios (prompt: prefill
 * pairs; decode: step pairs), RoVE/RoPE of each cache type (mode[type]) and, with four
 * runs, typed/f32 of each mode (types[mode]). */
static int run_all(const demo_decoder_opts *o, dec_data *d, dec_result r[DEC_RUNS],
                   dec_ratios mode[2], dec_ratios types[2]) {
  dec_model m[DEC_RUNS];
  memset(m, 0, sizeof m);
  const int np = o->pairs < 1 ? 1 : o->pairs > DEC_PAIRS ? DEC_PAIRS : o->pairs;
  dec_times t;
  if (times_alloc(&t, d->runs, np, o->steps) != 0) return -1;
  int rc = 0;
  for (int j = 0; j < d->runs && rc == 0; j++)
    rc = model_create(o, d, j % 2 ? ROVE_ROTATE_ROPE : ROVE_ROTATE_ROVE, run_type(o, j), &m[j]);
  if (rc == 0) rc = generate_pair(o, m, d, 0, &t); /* warm-up, overwritten below */
  for (int j = 0; j < d->runs; j++) t.gen_decode[j][0] = 0;
  for (int p = 0; p < np && rc == 0; p++) rc = generate_pair(o, m, d, p, &t);
  const int64_t nprompt = (int64_t)np * DEC_PROMPT_REPS, nsteps = (int64_t)np * o->steps;
  for (int j = 0; j < d->runs && rc == 0; j++) {
    r[j].prompt_ms = cli_median(memcpy(t.scratch, t.prompt[j][1], sizeof(double) * (size_t)nprompt),
                                (int)nprompt);
    r[j].decode_ms = cli_median(memcpy(t.scratch, t.gen_decode[j], sizeof(double) * (size_t)np), np);
    rc = model_forward(&m[j], 0, (int32_t)d->total, d->inputs[j], d->full, d->y, d->dm);
    if (rc != 0) break;
    const int64_t p0 = (int64_t)o->prompt * d->dm, last = (d->total - 1) * d->dm;
    r[j].err_all = rel_err(d->outputs[j] + p0, d->full + p0, (int64_t)o->steps * d->dm);
    r[j].err_last = rel_err(d->outputs[j] + last, d->full + last, d->dm);
  }
  const int64_t ns = nsteps > 0 ? nsteps : 1;
  for (int k = 0; rc == 0 && k < 2; k++)
    for (int a = 0; a < d->runs; a += 2) { /* a: RoVE run, a + 1 its RoPE run */
      mode[a / 2][0][k] = ratio_stats(t.prompt[a][k], t.prompt[a + 1][k], nprompt, t.scratch);
      mode[a / 2][1][k] = ratio_stats(t.step[a][k], t.step[a + 1][k], ns, t.scratch);
      if (d->runs < DEC_RUNS) continue;
      const int j = a / 2; /* mode j: typed run j against f32 run j + 2 */
      types[j][0][k] = ratio_stats(t.prompt[j][k], t.prompt[j + 2][k], nprompt, t.scratch);
      types[j][1][k] = ratio_stats(t.step[j][k], t.step[j + 2][k], ns, t.scratch);
    }
  times_free(&t);
  for (int j = 0; j < d->runs; j++) model_destroy(&m[j]);
  return rc;
}

/* K and V bytes of one cached token over all layers. */
static double token_bytes(const demo_decoder_opts *o, rove_dtype t) {
  return DEC_LAYERS * cli_kv_bytes_per_token(t, o->heads, o->dim);
}

static void print_header(const demo_decoder_opts *o, int64_t dm) {
  const int typed = o->kv != ROVE_DTYPE_F32;
  const char *tn = rove_dtype_name(o->kv);
  printf("rove demo: toy decoder, %d layers, d_model %lld (%d heads x %d), batch 1, causal\n",
         DEC_LAYERS, (long long)dm, (int)o->heads, (int)o->dim);
  printf("  residual blocks h += layer(h); Wq, Wk, Wv, Wo uniform in +-1/sqrt(d_model), seed %llu\n",
         (unsigned long long)o->seed);
  printf("  a %d-token prompt prefilled through one KV cache per layer, then %d decode steps\n"
         "  (each step's input: the previous output row scaled to unit RMS)\n",
         (int)o->prompt, (int)o->steps);
  printf("  KV caches: K and V stored as %s, %.0f bytes per cached token (%d layers)", tn,
         token_bytes(o, o->kv), DEC_LAYERS);
  if (typed)
    printf(";\n  and, for comparison, the same decoder with f32 caches (%.0f bytes per token, "
           "%.2fx)\n", token_bytes(o, ROVE_DTYPE_F32),
           token_bytes(o, ROVE_DTYPE_F32) / token_bytes(o, o->kv));
  else
    printf("\n");
  const int np = o->pairs < 1 ? 1 : o->pairs > DEC_PAIRS ? DEC_PAIRS : o->pairs;
  if (typed)
    printf("  RoVE and RoPE, each with both caches, generate in lockstep, %d generations each,\n"
           "  %d prefills per generation: each prefill and decode step of one run is timed\n"
           "  beside the other three (the order rotates); times = medians, ratios = medians of\n"
           "  the per-pair ratios (prefill pairs, step pairs)\n", np, DEC_PROMPT_REPS);
  else
    printf("  RoVE and RoPE generate in lockstep, %d generations each, %d prefills per\n"
           "  generation: each prefill and decode step of one mode is timed beside the other's;\n"
           "  times = medians, ratios = medians of the per-pair ratios (prefill pairs, step\n"
           "  pairs)\n", np, DEC_PROMPT_REPS);
  if (typed)
    printf("  check: the decode outputs vs one full-sequence rove_layer_forward per layer over\n"
           "  the same inputs (max error relative to the outputs' max magnitude); tolerance\n"
           "  %.1e with %s caches (twice their rounding of an element, which the fp32 full\n"
           "  forward does not share), %.0e with f32\n\n",
           dec_tolerance(o->kv), tn, DEC_TOLERANCE);
  else
    printf("  check: the decode outputs vs one full-sequence rove_layer_forward per layer over\n"
           "  the same inputs (max error relative to the outputs' max magnitude, tolerance %.0e)\n\n",
           DEC_TOLERANCE);
  printf("%-5s %-4s %15s %17s %10s %12s %12s  %s\n", "mode", "kv", "prompt [tok/s]",
         "decode [steps/s]", "step [ms]", "err (last)", "err (all)", "check");
  fflush(stdout);
}

static int print_row(const demo_decoder_opts *o, rove_dtype kv, const char *label,
                     const dec_result *r) {
  const double tol = dec_tolerance(kv);
  const int pass = r->err_all <= tol && r->err_last <= tol;
  printf("%-5s %-4s %15.1f %17.1f %10.3f %12.3e %12.3e  %s\n", label, rove_dtype_name(kv),
         o->prompt / (r->prompt_ms * 1e-3), o->steps / (r->decode_ms * 1e-3),
         r->decode_ms / o->steps, r->err_last, r->err_all, pass ? "PASS" : "FAIL");
  fflush(stdout);
  return pass;
}

static void print_ratios(const char *what, dec_ratios q, int pairs, int steps) {
  printf("%s time ratio: prompt %.3f, decode %.3f CPU time; prompt %.3f, decode %.3f "
         "wall clock\n  (medians of %d prefill pairs and %d step pairs; quartiles of the CPU "
         "pair ratios: prompt %.3f .. %.3f, decode %.3f .. %.3f)\n",
         what, q[0][0].median, q[1][0].median, q[0][1].median, q[1][1].median,
         pairs * DEC_PROMPT_REPS, pairs * steps, q[0][0].q1, q[0][0].q3, q[1][0].q1, q[1][0].q3);
}

/* max |a - b| over n floats (+inf for a NaN), and max |b| in *b_max. */
static double max_abs_diff(const float *a, const float *b, int64_t n, double *b_max) {
  double e = 0, mx = 0;
  for (int64_t i = 0; i < n; i++) {
    const double di = fabs((double)a[i] - b[i]);
    if (di != di) return INFINITY;
    e = fmax(e, di);
    mx = fmax(mx, fabs((double)b[i]));
  }
  if (b_max) *b_max = mx;
  return e;
}

/* The typed runs (0, 1) against the f32 runs (2, 3): how far the outputs moved. */
static void print_typed_diff(const demo_decoder_opts *o, const dec_data *d) {
  const char *tn = rove_dtype_name(o->kv);
  const int64_t dm = d->dm, p0 = (int64_t)o->prompt * dm;
  printf("\n%s KV caches against f32 ones (the same weights and prompt): max |%s - f32| of\n"
         "  the last layer's outputs over the prompt, the first decode step and all %d decode\n"
         "  steps (each run feeds its own outputs back: later steps include the drift), next\n"
         "  to the f32 outputs' max magnitude\n",
         tn, tn, (int)o->steps);
  printf("%-5s %12s %12s %12s %12s\n", "mode", "prompt", "first step", "all steps", "max |f32|");
  for (int j = 0; j < 2; j++) {
    double mx_prompt = 0, mx_steps = 0;
    const float *a = d->outputs[j], *b = d->outputs[j + 2];
    const double e_prompt = max_abs_diff(a, b, p0, &mx_prompt);
    const double e_first = max_abs_diff(a + p0, b + p0, dm, NULL);
    const double e_all = max_abs_diff(a + p0, b + p0, (int64_t)o->steps * dm, &mx_steps);
    printf("%-5s %12.3e %12.3e %12.3e %12.3f\n", j ? "RoPE" : "RoVE", e_prompt, e_first, e_all,
           fmax(mx_prompt, mx_steps));
  }
}

int demo_decoder(const demo_decoder_opts *o) {
  dec_data d = {0};
  const int made = make_data(o, &d);
  if (made != 0) {
    if (made == -1) fprintf(stderr, "rove demo: out of memory for the toy decoder\n");
    free_data(&d);
    return CLI_EXIT_FAIL;
  }
  const int typed = d.runs == DEC_RUNS;
  print_header(o, d.dm);
  dec_result r[DEC_RUNS];
  memset(r, 0, sizeof r);
  dec_ratios mode[2], types[2];
  memset(mode, 0, sizeof mode);
  memset(types, 0, sizeof types);
  const int ran = run_all(o, &d, r, mode, types) == 0;
  int ok = ran;
  for (int j = 0; j < d.runs && ran; j++)
    ok = print_row(o, run_type(o, j), j % 2 ? "RoPE" : "RoVE", &r[j]) && ok;
  const int np = o->pairs < 1 ? 1 : o->pairs > DEC_PAIRS ? DEC_PAIRS : o->pairs;
  if (ran) {
    const char *tn = rove_dtype_name(o->kv);
    char what[64];
    printf("\n");
    snprintf(what, sizeof what, "RoVE/RoPE%s%s%s", typed ? " (" : "", typed ? tn : "",
             typed ? " caches)" : "");
    print_ratios(what, mode[0], np, (int)o->steps);
    if (typed) {
      print_ratios("RoVE/RoPE (f32 caches)", mode[1], np, (int)o->steps);
      for (int j = 0; j < 2; j++) {
        snprintf(what, sizeof what, "%s/f32 caches (%s)", tn, j ? "RoPE" : "RoVE");
        print_ratios(what, types[j], np, (int)o->steps);
      }
      print_typed_diff(o, &d);
    }
  }
  free_data(&d);
  return ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
