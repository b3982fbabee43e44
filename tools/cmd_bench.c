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

/* The per-pair CPU-time ratios of every row of one ISA, pooled by thread kind (0: one
 * thread, 1: the multi-threaded rows): the summary ratio after the table, whose many
 * pairs make it steadier than any one row's. */
#define BENCH_POOL (16 * CLI_MAX_PAIRS)
typedef struct bench_pool {
  double r[2][BENCH_POOL];
  int n[2];
  int32_t threads; /* of the multi-threaded rows */
} bench_pool;

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Quantile q of v[0..n-1] (sorted in place), linear between order statistics. */
static double pool_quantile(double *v, int n, double q) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  const double pos = q * (n - 1);
  const int i = (int)pos;
  return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[n - 1];
}

static void print_pool(rove_isa isa, bench_pool *p) {
  for (int k = 0; k < 2; k++) {
    if (p->n[k] == 0) continue;
    const double med = pool_quantile(p->r[k], p->n[k], 0.5);
    printf("RoVE/RoPE time ratio, %s, %d thread%s, all shapes: %.3f CPU time (median of %d "
           "interleaved pairs; quartiles %.3f .. %.3f)\n",
           rove_isa_name(isa), k ? (int)p->threads : 1, k && p->threads > 1 ? "s" : "", med,
           p->n[k], pool_quantile(p->r[k], p->n[k], 0.25), pool_quantile(p->r[k], p->n[k], 0.75));
  }
}

/* Wall-clock budget of one table row's timed pairs: rows whose runs are short get more
 * pairs than --runs (up to CLI_MAX_PAIRS), which steadies their ratio. */
#define BENCH_ROW_BUDGET_MS 400.0

/* The two plans (0: RoVE, 1: RoPE) of a row on the same tensors, for cli_time_ab. */
typedef struct bench_timed {
  rove_plan *plans[2];
  rove_attention_args a;
} bench_timed;

static int timed_forward(void *ctx, int which) {
  bench_timed *t = ctx;
  rove_status st = rove_attention_forward(t->plans[which], &t->a);
  if (st == ROVE_OK) return 0;
  fprintf(stderr, "rove bench: forward failed: %s\n", rove_status_string(st));
  return -1;
}

/* One table row: n tokens, head dim d, on isa with the given threads. */
static int bench_row(const bench_opts *o, int32_t n, int32_t d, rove_isa isa, int32_t threads,
                     const bench_bufs *b, bench_pool *pool) {
  bench_timed bt = {{NULL, NULL},
                    {.batch = 1, .q_len = n, .kv_len = n, .q = b->q, .k = b->k, .v = b->v,
                     .out = b->out}};
  rove_plan **plans = bt.plans;
  rove_attention_config c;
  rove_attention_config_init(&c, o->heads, o->heads, d);
  c.isa = isa;
  c.n_threads = threads;
  rove_status st = ROVE_OK;
  for (int j = 0; j < 2 && st == ROVE_OK; j++) {
    c.rotate = j == 0 ? ROVE_ROTATE_ROVE : ROVE_ROTATE_ROPE;
    st = rove_plan_create(&c, &plans[j]);
  }
  cli_ab_time t = {0};
  int rc = st == ROVE_OK ? cli_time_ab(timed_forward, &bt, o->runs, BENCH_ROW_BUDGET_MS, &t) : -1;
  const double *ms = t.ms;
  if (st != ROVE_OK) fprintf(stderr, "rove bench: plan failed: %s\n", rove_status_string(st));
  if (rc == 0) {
    const int k = rove_plan_threads(plans[0]) > 1;
    if (k) pool->threads = rove_plan_threads(plans[0]);
    for (int p = 0; p < t.pairs && pool->n[k] < BENCH_POOL; p++)
      pool->r[k][pool->n[k]++] = t.cpu_ratio[p];
    const double gflops = 2.0 * n * (double)n * d * o->heads / (ms[0] * 1e6);
    static double peaks[ROVE_ISA_COUNT]; /* measured once per ISA */
    if (peaks[isa] == 0) peaks[isa] = rove_fma_peak_gflops(isa);
    const double peak = peaks[isa];
    char pct[16] = "-";
    if (peak > 0) snprintf(pct, sizeof pct, "%.1f", 100.0 * gflops / (peak * rove_plan_threads(plans[0])));
    printf("| n=%d %dx%d causal | %d | %s | %.2f | %.2f | %.3f | %.3f .. %.3f | %.3f | %d | %.1f | %s |\n",
           n, o->heads, d, rove_plan_threads(plans[0]), rove_isa_name(isa), ms[0], ms[1],
           t.cpu.median, t.cpu.q1, t.cpu.q3, t.wall.median, t.pairs, gflops, pct);
  }
  rove_plan_destroy(plans[0]);
  rove_plan_destroy(plans[1]);
  return rc;
}

static int parse_bench(int argc, char **argv, bench_opts *o) {
  *o = (bench_opts){.max_n = 1024, .threads = 0, .runs = 7, .heads = 12, .isa = ROVE_ISA_AUTO};
  const cli_opt opts[] = {
      {"--max-n", CLI_OPT_I32, &o->max_n, 64, 16384},
      {"--threads", CLI_OPT_I32, &o->threads, 0, 1024},
      {"--runs", CLI_OPT_I32, &o->runs, 1, CLI_MAX_PAIRS},
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
    printf("librove %s, batch 1, MHA, causal; RoVE and RoPE timed in interleaved pairs (AB, BA, "
           "...; at least %d, more while a row has spent under %.0f ms): time = median wall clock of "
           "each; ratio = median of the per-pair ratios RoVE/RoPE of CPU time (all threads; "
           "not counting time descheduled), with their quartiles, and of wall-clock time; GFLOP/s "
           "count causal FLOPs as 2*n^2*d*heads; %% of peak = of the measured single-core FMA "
           "peak times threads\n\n",
           rove_version_string(), o.runs, BENCH_ROW_BUDGET_MS);
    printf("| shape | threads | ISA | RoVE ms | RoPE ms | ratio (CPU) | quartiles | ratio (wall) | "
           "pairs | GFLOP/s | %% of peak |\n");
    printf("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    static const int32_t dims[] = {64, 128};
    static bench_pool summary[ROVE_ISA_COUNT];
    rove_isa summary_isa[ROVE_ISA_COUNT];
    int n_summary = 0;
    /* Later rove_isa values are the more specialised ISAs: descending order, best first. */
    for (int i = ROVE_ISA_COUNT - 1; i >= ROVE_ISA_SCALAR && rc == 0; i--) {
      const rove_isa isa = (rove_isa)i;
      if ((o.isa != ROVE_ISA_AUTO && isa != o.isa) || !rove_isa_available(isa)) continue;
      const int32_t top = isa == ROVE_ISA_SCALAR && o.max_n > 256 ? 256 : o.max_n; /* scalar is slow */
      static bench_pool pool;
      pool.n[0] = pool.n[1] = 0;
      for (size_t j = 0; j < 2 && rc == 0; j++)
        for (int32_t n = 256; n <= top && rc == 0; n *= 2) {
          rc = bench_row(&o, n, dims[j], isa, 1, &b, &pool);
          if (rc == 0 && o.threads != 1 && (o.threads > 1 || rove_default_threads() > 1))
            rc = bench_row(&o, n, dims[j], isa, o.threads, &b, &pool);
        }
      if (rc == 0) summary[n_summary] = pool, summary_isa[n_summary++] = isa;
    }
    if (rc == 0) printf("\n");
    for (int i = 0; rc == 0 && i < n_summary; i++) print_pool(summary_isa[i], &summary[i]);
    rc = rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  }
  free(b.q), free(b.k), free(b.v), free(b.out);
  return rc;
}
