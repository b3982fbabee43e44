/* SPDX-License-Identifier: MIT */
/* `rove bench`: a quick sweep of causal prefill, RoVE against plain RoPE through the same
 * library (only the rotation flags differ), printed as a markdown table to paste into a
 * report. The full suite with Google Benchmark is bench/ (scripts/bench.sh). */
#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "common.h"
#include "fma_peak.h"

typedef struct {
  int32_t max_n, threads, runs, heads;
  rove_isa isa;
} bench_opts;

typedef struct {
  float *q, *k, *v, *out;
} bench_bufs;

/* Median time of `runs` forwards with each plan, alternating which runs first. */
static int time_pair(rove_plan *const plans[2], const rove_attention_args *a, int runs,
                     double ms[2]) {
  double t[2][64];
  for (int r = 0; r < runs; r++)
    for (int j = 0; j < 2; j++) {
      const int which = (r + j) % 2;
      const double t0 = cli_now_ms();
      rove_status st = rove_attention_forward(plans[which], a);
      t[which][r] = cli_now_ms() - t0;
      if (st != ROVE_OK) {
        fprintf(stderr, "rove bench: forward failed: %s\n", rove_status_string(st));
        return -1;
      }
    }
  ms[0] = cli_median(t[0], runs);
  ms[1] = cli_median(t[1], runs);
  return 0;
}

/* One table row: n tokens, head dim d, on isa with the given threads. */
static int bench_row(const bench_opts *o, int32_t n, int32_t d, rove_isa isa, int32_t threads,
                     const bench_bufs *b) {
  rove_plan *plans[2] = {NULL, NULL};
  rove_attention_config c;
  rove_attention_config_init(&c, o->heads, o->heads, d);
  c.isa = isa;
  c.n_threads = threads;
  rove_status st = ROVE_OK;
  for (int j = 0; j < 2 && st == ROVE_OK; j++) {
    c.rotate = j == 0 ? ROVE_ROTATE_ROVE : ROVE_ROTATE_ROPE;
    st = rove_plan_create(&c, &plans[j]);
  }
  rove_attention_args a = {.batch = 1, .q_len = n, .kv_len = n, .q = b->q, .k = b->k, .v = b->v,
                           .out = b->out};
  double ms[2];
  int rc = st == ROVE_OK ? time_pair(plans, &a, 1, ms) : -1; /* warm-up */
  if (rc == 0) rc = time_pair(plans, &a, o->runs, ms);
  if (st != ROVE_OK) fprintf(stderr, "rove bench: plan failed: %s\n", rove_status_string(st));
  if (rc == 0) {
    const double gflops = 2.0 * n * (double)n * d * o->heads / (ms[0] * 1e6);
    static double peaks[ROVE_ISA_COUNT]; /* measured once per ISA */
    if (peaks[isa] == 0) peaks[isa] = rove_fma_peak_gflops(isa);
    const double peak = peaks[isa];
    char pct[16] = "-";
    if (peak > 0) snprintf(pct, sizeof pct, "%.1f", 100.0 * gflops / (peak * rove_plan_threads(plans[0])));
    printf("| n=%d %dx%d causal | %d | %s | %.2f | %.2f | %.3f | %.1f | %s |\n", n, o->heads, d,
           rove_plan_threads(plans[0]), rove_isa_name(isa), ms[0], ms[1], ms[0] / ms[1], gflops, pct);
  }
  rove_plan_destroy(plans[0]);
  rove_plan_destroy(plans[1]);
  return rc;
}

static int parse_bench(int argc, char **argv, bench_opts *o) {
  *o = (bench_opts){.max_n = 2048, .threads = 0, .runs = 5, .heads = 12, .isa = ROVE_ISA_AUTO};
  const cli_opt opts[] = {
      {"--max-n", CLI_OPT_I32, &o->max_n, 64, 16384},
      {"--threads", CLI_OPT_I32, &o->threads, 0, 1024},
      {"--runs", CLI_OPT_I32, &o->runs, 1, 64},
      {"--heads", CLI_OPT_I32, &o->heads, 1, 256},
      {"--isa", CLI_OPT_ISA, &o->isa, 0, 0},
  };
  return cli_parse_opts("bench", argc, argv, opts, sizeof opts / sizeof opts[0]);
}

int cmd_bench(int argc, char **argv) {
  bench_opts o;
  int rc = parse_bench(argc, argv, &o);
  if (rc != 0) return rc == 1 ? CLI_EXIT_OK : rc;
  if (o.isa != ROVE_ISA_AUTO && !rove_isa_available(o.isa)) {
    fprintf(stderr, "rove bench: ISA %s is not available here\n", rove_isa_name(o.isa));
    return CLI_EXIT_FAIL;
  }
  const int64_t max_elems = (int64_t)o.max_n * o.heads * 128;
  bench_bufs b = {malloc(sizeof(float) * max_elems), malloc(sizeof(float) * max_elems),
                  malloc(sizeof(float) * max_elems), malloc(sizeof(float) * max_elems)};
  if (!b.q || !b.k || !b.v || !b.out) {
    fprintf(stderr, "rove bench: out of memory\n");
    rc = CLI_EXIT_FAIL;
  } else {
    cli_rng rng;
    cli_rng_seed(&rng, 42);
    cli_fill_uniform(&rng, b.q, max_elems);
    cli_fill_uniform(&rng, b.k, max_elems);
    cli_fill_uniform(&rng, b.v, max_elems);
    printf("librove %s, batch 1, MHA, causal; time = median of %d runs; GFLOP/s count causal "
           "FLOPs as 2*n^2*d*heads; %% of peak = of the measured single-core FMA peak times threads\n\n",
           rove_version_string(), o.runs);
    printf("| shape | threads | ISA | RoVE ms | RoPE ms | ratio | GFLOP/s | %% of peak |\n");
    printf("|---|---:|---|---:|---:|---:|---:|---:|\n");
    static const int32_t dims[] = {64, 128};
    /* Later rove_isa values are the more specialised ISAs: descending order, best first. */
    for (int i = ROVE_ISA_COUNT - 1; i >= ROVE_ISA_SCALAR && rc == 0; i--) {
      const rove_isa isa = (rove_isa)i;
      if ((o.isa != ROVE_ISA_AUTO && isa != o.isa) || !rove_isa_available(isa)) continue;
      const int32_t top = isa == ROVE_ISA_SCALAR && o.max_n > 512 ? 512 : o.max_n; /* scalar is slow */
      for (size_t j = 0; j < 2 && rc == 0; j++)
        for (int32_t n = 256; n <= top && rc == 0; n *= 2) {
          rc = bench_row(&o, n, dims[j], isa, 1, &b);
          if (rc == 0 && o.threads != 1 && (o.threads > 1 || rove_default_threads() > 1))
            rc = bench_row(&o, n, dims[j], isa, o.threads, &b);
        }
    }
    rc = rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  }
  free(b.q), free(b.k), free(b.v), free(b.out);
  return rc;
}
