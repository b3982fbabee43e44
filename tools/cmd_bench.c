/* SPDX-License-Identifier: MIT */
/* `rove bench`: a quick sweep of causal prefill, RoVE against plain RoPE through the same
 * library (only the rotation flags differ), printed as a markdown table to paste into a
 * report. With --kv, also one decode step through KV caches of the given storage types
 * (the decode_cache cases of bench/, with each type's distance from an f32 cache). The
 * full suite with Google Benchmark is bench/ (scripts/bench.sh). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"
#include "fma_peak.h"

typedef struct {
  int32_t max_n, threads, runs, heads;
  rove_isa isa;
  uint32_t kv;    /* decode table: mask of 1u << rove_dtype (0: no decode table) */
  int32_t max_kv; /* its largest cache length */
  int decode_only;
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

/* ---- decode through KV caches (--kv) --------------------------------------------- */

#define BENCH_DECODE_DIM 64
#define BENCH_DECODE_MIN_KV 1024
/* Wall-clock budget of a decode row's timed pairs (decode steps are short: many pairs). */
#define BENCH_DECODE_BUDGET_MS 200.0

/* The two caches (0: RoVE, 1: RoPE) of a decode row, one query each, for cli_time_ab. */
typedef struct bench_cached {
  rove_kv_cache *cache[2];
  rove_attention_args a[2];
} bench_cached;

static int timed_decode(void *ctx, int which) {
  bench_cached *t = ctx;
  rove_status st = rove_kv_cache_attention(t->cache[which], &t->a[which]);
  if (st == ROVE_OK) return 0;
  fprintf(stderr, "rove bench: rove_kv_cache_attention failed: %s\n", rove_status_string(st));
  return -1;
}

/* A cache of type t under plan p holding the first n tokens of b->k / b->v. */
static rove_status filled_cache(const rove_plan *p, int32_t n, rove_dtype t, const bench_bufs *b,
                                rove_kv_cache **c) {
  rove_status st = rove_kv_cache_create_typed(p, 1, n, t, c);
  if (st == ROVE_OK) st = rove_kv_cache_append(*c, n, b->k, 0, b->v, 0, NULL);
  return st;
}

/* One decode table row: a step of one query (position n - 1) against n cached tokens of
 * type t, RoVE vs RoPE; the RoVE output also against an f32 cache's (max |out - f32|;
 * v is uniform in [-1, 1], so that is relative to max |v| too). out: [2][heads * d]. */
static int bench_decode_row(const bench_opts *o, int32_t n, rove_dtype t, rove_isa isa,
                            int32_t threads, const bench_bufs *b, float *out) {
  const int32_t d = BENCH_DECODE_DIM, width = o->heads * d;
  rove_plan *plans[2] = {NULL, NULL};
  bench_cached bc = {{NULL, NULL}, {{0}, {0}}};
  rove_kv_cache *ref = NULL;
  rove_attention_config c;
  rove_attention_config_init(&c, o->heads, o->heads, d);
  c.isa = isa;
  c.n_threads = threads;
  rove_status st = ROVE_OK;
  const char *what = "rove_plan_create";
  for (int j = 0; j < 2 && st == ROVE_OK; j++) {
    c.rotate = j == 0 ? ROVE_ROTATE_ROVE : ROVE_ROTATE_ROPE;
    st = rove_plan_create(&c, &plans[j]);
  }
  if (st == ROVE_OK) what = "rove_kv_cache_create_typed / append";
  for (int j = 0; j < 2 && st == ROVE_OK; j++) {
    st = filled_cache(plans[j], n, t, b, &bc.cache[j]);
    bc.a[j] = (rove_attention_args){.batch = 1, .q_len = 1, .q = b->q, .out = out + j * width};
  }
  double diff = 0.0; /* the RoVE output against an f32 cache's */
  if (st == ROVE_OK && t != ROVE_DTYPE_F32) {
    float *ref_out = b->out;
    rove_attention_args ra = bc.a[0];
    ra.out = ref_out;
    st = filled_cache(plans[0], n, ROVE_DTYPE_F32, b, &ref);
    if (st == ROVE_OK) st = rove_kv_cache_attention(ref, &ra);
    if (st == ROVE_OK) st = rove_kv_cache_attention(bc.cache[0], &bc.a[0]);
    what = "the f32 reference";
    for (int32_t e = 0; st == ROVE_OK && e < width; e++) {
      const double de = fabs((double)out[e] - ref_out[e]);
      diff = de == de ? fmax(diff, de) : INFINITY;
    }
    rove_kv_cache_destroy(ref);
  }
  int rc = -1;
  cli_ab_time tm = {0};
  if (st != ROVE_OK)
    fprintf(stderr, "rove bench: %s failed: %s\n", what, rove_status_string(st));
  else
    rc = cli_time_ab(timed_decode, &bc, o->runs, BENCH_DECODE_BUDGET_MS, &tm);
  if (rc == 0) {
    const double tok = cli_kv_bytes_per_token(t, o->heads, d);
    char dcol[24] = "-"; /* f32 is the reference */
    if (t != ROVE_DTYPE_F32) snprintf(dcol, sizeof dcol, "%.2e", diff);
    printf("| %d | %dx%d | %d | %s | %s | %.0f | %.1f | %.1f | %.3f | %.3f .. %.3f | %.3f | %d | "
           "%.1f | %s |\n",
           n, o->heads, d, rove_plan_threads(plans[0]), rove_isa_name(isa), rove_dtype_name(t),
           tok, tm.ms[0] * 1e3, tm.ms[1] * 1e3, tm.cpu.median, tm.cpu.q1, tm.cpu.q3,
           tm.wall.median, tm.pairs, tok * n / (tm.ms[0] * 1e6), dcol);
    fflush(stdout);
  }
  for (int j = 0; j < 2; j++) rove_kv_cache_destroy(bc.cache[j]), rove_plan_destroy(plans[j]);
  return rc;
}

/* The decode table: every ISA (best first), n = 1024, 4096, ... up to --max-kv (scalar:
 * 4096), every type of the --kv mask, one thread and the multi-threaded count. */
static int bench_decode(const bench_opts *o) {
  const int32_t width = o->heads * BENCH_DECODE_DIM;
  const size_t nkv = (size_t)o->max_kv * (size_t)width;
  /* K and V as fp32, and the two caches of a type being timed (fp32 at most) */
  if (cli_check_memory("bench", 6.0 * sizeof(float) * (double)nkv, "--heads or --max-kv") != 0)
    return -1;
  bench_bufs b = {malloc(sizeof(float) * (size_t)width), malloc(sizeof(float) * nkv),
                  malloc(sizeof(float) * nkv), malloc(sizeof(float) * (size_t)width)};
  float *out = malloc(sizeof(float) * 2 * (size_t)width);
  int rc = 0;
  if (!b.q || !b.k || !b.v || !b.out || !out) {
    fprintf(stderr, "rove bench: out of memory for the decode table (--max-kv %d)\n",
            (int)o->max_kv);
    rc = -1;
  } else {
    cli_rng rng;
    cli_rng_seed(&rng, 43);
    cli_fill_uniform(&rng, b.q, width);
    cli_fill_uniform(&rng, b.k, (int64_t)nkv);
    cli_fill_uniform(&rng, b.v, (int64_t)nkv);
    printf("Decode step through KV caches (rove_kv_cache_attention; bench/'s decode_cache "
           "cases): one query at position n - 1 against n cached tokens, K and V stored as the "
           "given type (appended before timing), MHA %dx%d; RoVE and RoPE timed in interleaved "
           "pairs (at least %d, more while a row has spent under %.0f ms): time = median wall "
           "clock [us]; ratio = median of the per-pair ratios RoVE/RoPE of CPU time, with their "
           "quartiles, and of wall-clock time; bytes/token = K and V of one token as stored; GB/s = "
           "stored K and V bytes / RoVE time; vs f32 = max |out - out of an f32 cache| of the "
           "RoVE output (q, k, v uniform in [-1, 1])\n\n",
           (int)o->heads, BENCH_DECODE_DIM, (int)o->runs, BENCH_DECODE_BUDGET_MS);
    printf("| kv_len | shape | threads | ISA | KV type | bytes/token | RoVE us | RoPE us | "
           "ratio (CPU) | quartiles | ratio (wall) | pairs | GB/s | vs f32 |\n");
    printf("|---:|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    const int multi = o->threads != 1 && (o->threads > 1 || rove_default_threads() > 1);
    for (int i = ROVE_ISA_COUNT - 1; i >= ROVE_ISA_SCALAR && rc == 0; i--) {
      const rove_isa isa = (rove_isa)i;
      if ((o->isa != ROVE_ISA_AUTO && isa != o->isa) || !rove_isa_available(isa)) continue;
      const int32_t top = isa == ROVE_ISA_SCALAR && o->max_kv > 4096 ? 4096 : o->max_kv;
      for (int32_t n = BENCH_DECODE_MIN_KV; n <= top && rc == 0; n *= 4)
        for (int t = 0; t < ROVE_DTYPE_COUNT && rc == 0; t++) {
          if (!(o->kv & (1u << t))) continue;
          rc = bench_decode_row(o, n, (rove_dtype)t, isa, 1, &b, out);
          if (rc == 0 && multi) rc = bench_decode_row(o, n, (rove_dtype)t, isa, o->threads, &b, out);
        }
    }
  }
  free(b.q), free(b.k), free(b.v), free(b.out), free(out);
  return rc;
}

static int parse_bench(int argc, char **argv, bench_opts *o) {
  *o = (bench_opts){.max_n = 1024, .threads = 0, .runs = 7, .heads = 12, .isa = ROVE_ISA_AUTO,
                    .kv = 0, .max_kv = 16384};
  const cli_opt opts[] = {
      {"--max-n", CLI_OPT_I32, &o->max_n, 256, 16384},
      {"--threads", CLI_OPT_I32, &o->threads, 0, ROVE_MAX_THREADS},
      {"--runs", CLI_OPT_I32, &o->runs, 1, CLI_MAX_PAIRS},
      {"--heads", CLI_OPT_I32, &o->heads, 1, 256},
      {"--isa", CLI_OPT_ISA, &o->isa, 0, 0},
      {"--kv", CLI_OPT_DTYPES, &o->kv, 0, 0},
      {"--max-kv", CLI_OPT_I32, &o->max_kv, BENCH_DECODE_MIN_KV, 65536},
      {"--decode", CLI_OPT_FLAG, &o->decode_only, 0, 0},
  };
  const size_t n = sizeof opts / sizeof opts[0];
  uint32_t seen;
  int rc = cli_parse_opts_seen("bench", argc, argv, opts, n, &seen);
  if (rc != 0) return rc;
  /* an option the chosen tables would not read is refused, not ignored */
  if (cli_seen(seen, opts, n, "--max-kv") && !o->decode_only && o->kv == 0)
    return cli_usage_error("bench", "--max-kv sets the decode table's longest cache: give it "
                           "with --kv or --decode");
  if (cli_seen(seen, opts, n, "--max-n") && o->decode_only)
    return cli_usage_error("bench", "--max-n sets the prefill table, which --decode leaves out");
  if (o->decode_only && o->kv == 0) o->kv = (1u << ROVE_DTYPE_COUNT) - 1u;
  return 0;
}

/* The prefill table and its summary; returns 0 or -1 (reason printed). */
static int bench_prefill(const bench_opts *o) {
  int rc = 0;
  const int64_t max_elems = (int64_t)o->max_n * o->heads * 128;
  /* Q, K, V, out, and the library's packed K and V */
  if (cli_check_memory("bench", 6.0 * sizeof(float) * (double)max_elems, "--max-n or --heads") != 0)
    return -1;
  bench_bufs b = {malloc(sizeof(float) * max_elems), malloc(sizeof(float) * max_elems),
                  malloc(sizeof(float) * max_elems), malloc(sizeof(float) * max_elems)};
  if (!b.q || !b.k || !b.v || !b.out) {
    fprintf(stderr, "rove bench: out of memory\n");
    rc = -1;
  } else {
    cli_rng rng;
    cli_rng_seed(&rng, 42);
    cli_fill_uniform(&rng, b.q, max_elems);
    cli_fill_uniform(&rng, b.k, max_elems);
    cli_fill_uniform(&rng, b.v, max_elems);
    printf("Causal prefill, batch 1, MHA; RoVE and RoPE timed in interleaved pairs (AB, BA, "
           "...; at least %d, more while a row has spent under %.0f ms): time = median wall clock of "
           "each; ratio = median of the per-pair ratios RoVE/RoPE of CPU time (all threads; "
           "not counting time descheduled), with their quartiles, and of wall-clock time; GFLOP/s "
           "count causal FLOPs as 2*n^2*d*heads; %% of peak = of the measured single-core FMA "
           "peak times threads\n\n",
           o->runs, BENCH_ROW_BUDGET_MS);
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
      if ((o->isa != ROVE_ISA_AUTO && isa != o->isa) || !rove_isa_available(isa)) continue;
      const int32_t top = isa == ROVE_ISA_SCALAR && o->max_n > 256 ? 256 : o->max_n; /* scalar is slow */
      static bench_pool pool;
      pool.n[0] = pool.n[1] = 0;
      for (size_t j = 0; j < 2 && rc == 0; j++)
        for (int32_t n = 256; n <= top && rc == 0; n *= 2) {
          rc = bench_row(o, n, dims[j], isa, 1, &b, &pool);
          if (rc == 0 && o->threads != 1 && (o->threads > 1 || rove_default_threads() > 1))
            rc = bench_row(o, n, dims[j], isa, o->threads, &b, &pool);
        }
      if (rc == 0) summary[n_summary] = pool, summary_isa[n_summary++] = isa;
    }
    if (rc == 0) printf("\n");
    for (int i = 0; rc == 0 && i < n_summary; i++) print_pool(summary_isa[i], &summary[i]);
  }
  free(b.q), free(b.k), free(b.v), free(b.out);
  return rc;
}

int cmd_bench(int argc, char **argv) {
  bench_opts o;
  int rc = parse_bench(argc, argv, &o);
  if (rc != 0) return rc == 1 ? CLI_EXIT_OK : rc;
  if (o.isa != ROVE_ISA_AUTO && !rove_isa_available(o.isa)) {
    fprintf(stderr, "rove bench: ISA %s is not available here\n", rove_isa_name(o.isa));
    return CLI_EXIT_FAIL;
  }
  printf("librove %s\n\n", rove_version_string());
  if (!o.decode_only) rc = bench_prefill(&o);
  if (rc == 0 && o.kv) {
    if (!o.decode_only) printf("\n");
    rc = bench_decode(&o);
  }
  return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
