/* SPDX-License-Identifier: MIT */
/* `rove check`: librove against the double-precision oracle over a sweep of shapes and
 * options, once per available ISA (the plan's config.isa selects it). */
#include <stdlib.h>

#include "check_cases.h"
#include "commands.h"
#include "common.h"

#define ALL_ISAS ((rove_isa)99) /* no --isa given */

typedef struct check_opts {
  rove_isa isa;
  int quick;
  int32_t threads;
} check_opts;

typedef struct check_tally {
  int passed, failed;
} check_tally;

static int parse_check(int argc, char **argv, check_opts *o) {
  *o = (check_opts){.isa = ALL_ISAS, .quick = 0, .threads = 0};
  const cli_opt opts[] = {
      {"--isa", CLI_OPT_ISA, &o->isa, 0, 0},
      {"--quick", CLI_OPT_FLAG, &o->quick, 0, 0},
      {"--threads", CLI_OPT_I32, &o->threads, 0, ROVE_MAX_THREADS},
  };
  return cli_parse_opts("check", argc, argv, opts, sizeof opts / sizeof opts[0]);
}

/* The ISAs to run, in order; prints a SKIPPED line for each one that is not here. */
static int select_isas(const check_opts *o, rove_isa *run) {
  int n = 0;
  for (int i = ROVE_ISA_SCALAR; i < ROVE_ISA_COUNT; i++) {
    const rove_isa isa = (rove_isa)i;
    if (o->isa == ROVE_ISA_AUTO && isa != rove_best_isa()) continue;
    if (o->isa != ALL_ISAS && o->isa != ROVE_ISA_AUTO && o->isa != isa) continue;
    if (rove_isa_available(isa)) {
      run[n++] = isa;
    } else {
      printf("SKIPPED isa=%s (not in this build of librove or not supported by this CPU)\n",
             rove_isa_name(isa));
    }
  }
  fflush(stdout);
  return n;
}

/* Library output of the case on one ISA compared with the oracle; prints the line. */
static int run_isa(const check_case *cc, rove_isa isa, int32_t threads, check_data *d,
                   const char *desc) {
  rove_attention_config c;
  check_case_config(cc, isa, threads, &c);
  rove_plan *p = NULL;
  rove_status st = rove_plan_create(&c, &p);
  if (st != ROVE_OK) {
    printf("FAIL %-6s %s  rove_plan_create: %s\n", rove_isa_name(isa), desc,
           rove_status_string(st));
    return 0;
  }
  if (rove_plan_isa(p) != isa) {
    printf("FAIL %-6s %s  the plan runs on %s\n", rove_isa_name(isa), desc,
           rove_isa_name(rove_plan_isa(p)));
    rove_plan_destroy(p);
    return 0;
  }
  check_data_poison(d);
  st = rove_attention_forward(p, &d->args);
  rove_plan_destroy(p);
  if (st != ROVE_OK) {
    printf("FAIL %-6s %s  rove_attention_forward: %s\n", rove_isa_name(isa), desc,
           rove_status_string(st));
    return 0;
  }
  const double err = cli_max_rel_err(d->out, d->out_stride, d->ref, d->out_rows, d->out_width);
  const double lse_err = cli_lse_err(d->lse, d->ref_lse, d->lse_n);
  const int pad_ok = check_data_padding_intact(d);
  const int ok = err <= CLI_TOLERANCE && lse_err <= CLI_TOLERANCE && pad_ok;
  printf("%-4s %-6s %s  err=%.2e lse=%.2e%s\n", ok ? "OK" : "FAIL", rove_isa_name(isa), desc,
         err, lse_err, pad_ok ? "" : "  (wrote into the padding between output rows)");
  return ok;
}

/* One case: data and oracle once, then every ISA. */
static void run_case(size_t idx, const rove_isa *isas, int n_isas, int32_t threads,
                     check_tally *t) {
  const check_case *cc = &check_cases[idx];
  char desc[160];
  check_case_describe(cc, desc, sizeof desc);
  check_data d;
  rove_attention_config c;
  check_case_config(cc, ROVE_ISA_AUTO, threads, &c);
  int rc = check_data_make(cc, 0x5EEDull + idx, &d);
  if (rc != 0) fprintf(stderr, "rove check: out of memory\n");
  if (rc == 0) rc = cli_oracle(&c, &d.args, d.ref, d.ref_lse);
  for (int i = 0; i < n_isas; i++) {
    if (rc != 0) {
      printf("FAIL %-6s %s  no oracle result\n", rove_isa_name(isas[i]), desc);
      t->failed++;
    } else if (run_isa(cc, isas[i], threads, &d, desc)) {
      t->passed++;
    } else {
      t->failed++;
    }
    fflush(stdout);
  }
  check_data_free(&d);
}

int cmd_check(int argc, char **argv) {
  check_opts o;
  int rc = parse_check(argc, argv, &o);
  if (rc != 0) return rc == 1 ? CLI_EXIT_OK : rc;
  rove_isa isas[ROVE_ISA_COUNT];
  const int n_isas = select_isas(&o, isas);
  check_tally t = {0, 0};
  const double t0 = cli_now_ms();
  for (size_t i = 0; i < check_n_cases && n_isas > 0; i++)
    if (!o.quick || check_cases[i].quick) run_case(i, isas, n_isas, o.threads, &t);
  printf("tolerance %.0e relative to the output's max magnitude (LSE: relative to max(1,|lse|)); "
         "%.1f s\n", CLI_TOLERANCE, (cli_now_ms() - t0) * 1e-3);
  printf("%d passed, %d failed\n", t.passed, t.failed);
  if (t.passed + t.failed == 0) { /* e.g. an ISA of another architecture: nothing checked */
    fprintf(stderr, "rove check: no available ISA to check\n");
    return CLI_EXIT_FAIL;
  }
  return t.failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
