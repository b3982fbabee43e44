/* SPDX-License-Identifier: MIT */
/* `rove demo`: GPT-2-small attention (12 heads x 64, n = 1024, causal) through librove
 * with RoVE and with plain RoPE; both checked against the oracle and timed. Then a toy
 * decoder (demo_decoder.c): prompt prefill and token-by-token decode through attention
 * layers and KV caches (stored as --kv: f32, bf16, f16, q8), timed and checked against
 * full-sequence forwards. */
#include <math.h>
#include <stdlib.h>

#include "commands.h"
#include "common.h"
#include "demo_decoder.h"

#define DEMO_MAX_RUNS CLI_MAX_PAIRS

typedef struct demo_opts {
  int32_t n, heads, dim, threads, runs;
  int32_t prompt, steps; /* toy decoder */
  int decoder_only;
  uint64_t seed;
  rove_isa isa;
  rove_dtype kv; /* the toy decoder's KV cache type */
} demo_opts;

typedef struct demo_data {
  float *q, *k, *v, *out;
  double *ref;
  int64_t elems; /* n * heads * dim */
} demo_data;

typedef struct demo_result {
  double err, ms;
  rove_isa isa;
  int32_t threads;
} demo_result;

static int parse_demo(int argc, char **argv, demo_opts *o) {
  *o = (demo_opts){.n = 1024, .heads = 12, .dim = 64, .threads = 0, .runs = 21, .prompt = 512,
                   .steps = 128, .seed = 42, .isa = ROVE_ISA_AUTO, .kv = ROVE_DTYPE_F32};
  const cli_opt opts[] = {
      {"--n", CLI_OPT_I32, &o->n, 1, 262144},
      {"--heads", CLI_OPT_I32, &o->heads, 1, 256},
      {"--dim", CLI_OPT_I32, &o->dim, 2, ROVE_MAX_HEAD_DIM},
      {"--threads", CLI_OPT_I32, &o->threads, 0, ROVE_MAX_THREADS},
      {"--runs", CLI_OPT_I32, &o->runs, 1, DEMO_MAX_RUNS},
      {"--seed", CLI_OPT_U64, &o->seed, 0, 0},
      {"--isa", CLI_OPT_ISA, &o->isa, 0, 0},
      {"--prompt", CLI_OPT_I32, &o->prompt, 1, 65536},
      {"--steps", CLI_OPT_I32, &o->steps, 1, 65536},
      {"--decoder", CLI_OPT_FLAG, &o->decoder_only, 0, 0},
      {"--kv", CLI_OPT_DTYPE, &o->kv, 0, 0},
  };
  const size_t n = sizeof opts / sizeof opts[0];
  uint32_t seen;
  int rc = cli_parse_opts_seen("demo", argc, argv, opts, n, &seen);
  if (rc != 0) return rc;
  if (cli_seen(seen, opts, n, "--n") && o->decoder_only)
    return cli_usage_error("demo", "--n sets the attention part's length, which --decoder "
                           "leaves out (the decoder's lengths are --prompt and --steps)");
  if (o->dim % 2 != 0) return cli_usage_error("demo", "--dim must be even, got %d", (int)o->dim);
  return 0;
}

static void free_data(demo_data *d) {
  free(d->q);
  free(d->k);
  free(d->v);
  free(d->out);
  free(d->ref);
}

static int make_data(const demo_opts *o, demo_data *d) {
  d->elems = (int64_t)o->n * o->heads * o->dim;
  const size_t nf = (size_t)d->elems * sizeof(float);
  /* Q, K, V and out, the fp64 reference, and the library's packed K and V */
  if (cli_check_memory("demo", (4.0 * 4 + 8 + 2 * 4) * (double)d->elems,
                       "--n, --heads or --dim") != 0)
    return -1;
  d->q = malloc(nf);
  d->k = malloc(nf);
  d->v = malloc(nf);
  d->out = malloc(nf);
  d->ref = malloc((size_t)d->elems * sizeof(double));
  if (!d->q || !d->k || !d->v || !d->out || !d->ref) {
    fprintf(stderr, "rove demo: out of memory for n = %d\n", (int)o->n);
    return -1;
  }
  cli_rng rng;
  cli_rng_seed(&rng, o->seed);
  cli_fill_uniform(&rng, d->q, d->elems);
  cli_fill_uniform(&rng, d->k, d->elems);
  cli_fill_uniform(&rng, d->v, d->elems);
  return 0;
}

/* One forward call; prints the error and returns -1 if the library fails. */
static int forward(const rove_plan *p, const rove_attention_args *a, const char *label) {
  rove_status st = rove_attention_forward(p, a);
  if (st == ROVE_OK) return 0;
  fprintf(stderr, "rove demo: rove_attention_forward (%s) failed: %s\n", label,
          rove_status_string(st));
  return -1;
}

/* Build the plan of one rotation mode and check it against the oracle; *plan stays open
 * for the timing. */
static void demo_config(const demo_opts *o, uint32_t rotate, int32_t threads,
                        rove_attention_config *c) {
  rove_attention_config_init(c, o->heads, o->heads, o->dim);
  c->rotate = rotate;
  c->causal = 1;
  c->isa = o->isa;
  c->n_threads = threads;
}

static int check_mode(const demo_opts *o, demo_data *d, uint32_t rotate, const char *label,
                      demo_result *res, rove_plan **plan) {
  rove_attention_config c;
  demo_config(o, rotate, o->threads, &c);
  rove_status st = rove_plan_create(&c, plan);
  if (st != ROVE_OK) {
    fprintf(stderr, "rove demo: rove_plan_create (%s, isa %s) failed: %s\n", label,
            rove_isa_name(o->isa), rove_status_string(st));
    return -1;
  }
  res->isa = rove_plan_isa(*plan);
  res->threads = rove_plan_threads(*plan);
  rove_attention_args a = {.batch = 1, .q_len = o->n, .kv_len = o->n, .q = d->q, .k = d->k,
                           .v = d->v, .out = d->out};
  for (int64_t i = 0; i < d->elems; i++) d->out[i] = NAN;
  int rc = forward(*plan, &a, label);
  if (rc == 0) rc = cli_oracle(&c, &a, d->ref, NULL);
  if (rc == 0) res->err = cli_max_rel_err(d->out, (int64_t)o->heads * o->dim, d->ref, o->n,
                                           (int64_t)o->heads * o->dim);
  return rc;
}

/* The two plans (0: RoVE, 1: RoPE) on the same tensors, for cli_time_ab. */
typedef struct demo_timed {
  const rove_plan *plan[2];
  rove_attention_args a;
} demo_timed;

static int timed_forward(void *ctx, int which) {
  demo_timed *t = ctx;
  return forward(t->plan[which], &t->a, which ? "RoPE" : "RoVE");
}

static void print_header(const demo_opts *o) {
  printf("rove demo: %sattention, batch 1, %d heads x %d, n = %d, causal\n",
         (o->heads == 12 && o->dim == 64) ? "GPT-2-small " : "", (int)o->heads, (int)o->dim,
         (int)o->n);
  printf("  q, k, v uniform in [-1, 1], seed %llu; RoPE theta 10000, half pairing\n",
         (unsigned long long)o->seed);
  printf("  checked against the double-precision oracle (max error relative to the output's\n"
         "  max magnitude, tolerance %.0e); RoVE and RoPE timed in %d interleaved pairs\n"
         "  (AB, BA, ...): time = median of each, ratio = median of the per-pair ratios\n\n",
         CLI_TOLERANCE, (int)o->runs);
  printf("%-5s %11s %10s %13s  %s\n", "mode", "time [ms]", "GFLOP/s", "max rel err", "check");
  fflush(stdout);
}

static int print_result(const demo_opts *o, const char *label, const demo_result *r) {
  const double flops = 2.0 * (double)o->n * o->n * o->dim * o->heads;
  const int pass = r->err <= CLI_TOLERANCE;
  printf("%-5s %11.3f %10.2f %13.3e  %s\n", label, r->ms, flops / (r->ms * 1e6), r->err,
         pass ? "PASS" : "FAIL");
  fflush(stdout);
  return pass;
}

/* The RoVE/RoPE ratio of one interleaved timing: CPU time (the headline: time spent
 * descheduled does not count), wall clock, the quartiles of the pair ratios. */
static void print_ratio(const char *what, const cli_ab_time *t) {
  printf("RoVE/RoPE time ratio%s: %.3f CPU time, %.3f wall clock (median of %d interleaved "
         "pairs;\n  quartiles of the pair ratios: CPU %.3f .. %.3f, wall %.3f .. %.3f)\n",
         what, t->cpu.median, t->wall.median, t->pairs, t->cpu.q1, t->cpu.q3, t->wall.q1,
         t->wall.q3);
}

static void print_trailer(const demo_result *rove, const demo_result *rope, const cli_ab_time *t,
                          const cli_ab_time *t1) {
  const demo_result *any = rove->isa != ROVE_ISA_AUTO ? rove : rope;
  if (t && t->pairs > 0) {
    printf("\n");
    if (t1 && t1->pairs > 0) print_ratio(" on 1 thread", t1);
    char what[48];
    snprintf(what, sizeof what, " on %d threads", (int)any->threads);
    print_ratio(t1 && t1->pairs > 0 ? what : "", t);
  }
  if (any->isa != ROVE_ISA_AUTO)
    printf("isa %s, threads %d (GFLOP/s count causal attention as 2*n^2*d*heads)\n",
           rove_isa_name(any->isa), (int)any->threads);
}

/* The attention section; returns 1 when both modes ran and passed. */
static int demo_attention(const demo_opts *o) {
  if (o->n > 8192)
    fprintf(stderr, "rove demo: note: the oracle is O(n^2) in double; n = %d takes a while\n",
            (int)o->n);
  demo_data d = {0};
  if (make_data(o, &d) != 0) {
    free_data(&d);
    return 0;
  }
  print_header(o);
  demo_result rove = {0}, rope = {0};
  rove_plan *plans[2] = {NULL, NULL};
  const int ran = check_mode(o, &d, ROVE_ROTATE_ROVE, "RoVE", &rove, &plans[0]) == 0 &&
                  check_mode(o, &d, ROVE_ROTATE_ROPE, "RoPE", &rope, &plans[1]) == 0;
  demo_timed timed = {{plans[0], plans[1]},
                      {.batch = 1, .q_len = o->n, .kv_len = o->n, .q = d.q, .k = d.k,
                       .v = d.v, .out = d.out}};
  cli_ab_time t = {0};
  const int timed_ok = ran && cli_time_ab(timed_forward, &timed, o->runs, 0.0, &t) == 0;
  rove.ms = t.ms[0], rope.ms = t.ms[1];
  int ok = timed_ok && print_result(o, "RoVE", &rove);
  ok = timed_ok && print_result(o, "RoPE", &rope) && ok;
  rove_plan_destroy(plans[0]);
  rove_plan_destroy(plans[1]);
  /* With several threads, a busy machine that deschedules one of them stalls the others
   * at the team's barriers (they spin or sleep: wall clock and CPU time both vary), so the
   * ratio is also timed on one thread, where the CPU time is the work itself. */
  cli_ab_time t1 = {0};
  int one_ok = 0;
  if (timed_ok && rove.threads > 1) {
    rove_plan *p1[2] = {NULL, NULL};
    one_ok = 1;
    for (int j = 0; j < 2 && one_ok; j++) {
      rove_attention_config c;
      demo_config(o, j == 0 ? ROVE_ROTATE_ROVE : ROVE_ROTATE_ROPE, 1, &c);
      one_ok = rove_plan_create(&c, &p1[j]) == ROVE_OK;
    }
    demo_timed timed1 = {{p1[0], p1[1]}, timed.a};
    one_ok = one_ok && cli_time_ab(timed_forward, &timed1, o->runs, 0.0, &t1) == 0;
    if (!one_ok) fprintf(stderr, "rove demo: the 1-thread timing failed\n");
    rove_plan_destroy(p1[0]);
    rove_plan_destroy(p1[1]);
    ok = ok && one_ok;
  }
  free_data(&d);
  print_trailer(&rove, &rope, timed_ok ? &t : NULL, one_ok ? &t1 : NULL);
  return ok;
}

int cmd_demo(int argc, char **argv) {
  demo_opts o;
  int rc = parse_demo(argc, argv, &o);
  if (rc != 0) return rc == 1 ? CLI_EXIT_OK : rc;
  if (!rove_isa_available(o.isa)) {
    fprintf(stderr, "rove demo: ISA %s is not available in this build or on this CPU "
            "(see 'rove info')\n", rove_isa_name(o.isa));
    return CLI_EXIT_FAIL;
  }
  int ok = 1;
  if (!o.decoder_only) {
    ok = demo_attention(&o);
    printf("\n");
  }
  const demo_decoder_opts dec = {.prompt = o.prompt, .steps = o.steps, .heads = o.heads,
                                 .dim = o.dim, .threads = o.threads, .seed = o.seed,
                                 .pairs = o.runs < 4 ? o.runs : 4, /* generations are long */
                                 .isa = o.isa, .kv = o.kv};
  ok = demo_decoder(&dec) == CLI_EXIT_OK && ok;
  printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
