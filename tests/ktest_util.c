/* SPDX-License-Identifier: MIT */
/* The kernel-test harness (ktest_util.h). */
#include "ktest_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- failure context ---------------------------------------------------------------- */

static int n_fail;
static double worst;
static char ctx[320];
static const char *isa_label = "all";

void kt_ctx(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx, sizeof ctx, fmt, ap);
  va_end(ap);
}

void kt_fail(const char *fmt, ...) {
  static int all = -1; /* ROVE_KTEST_VERBOSE=1 prints every failure, else the first 15 */
  if (all < 0) all = getenv("ROVE_KTEST_VERBOSE") && strcmp(getenv("ROVE_KTEST_VERBOSE"), "1") == 0;
  if (n_fail++ >= 15 && !all) return;
  va_list ap;
  va_start(ap, fmt);
  printf("  FAIL [%s %s] ", isa_label, ctx);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
}

int kt_failures(void) { return n_fail; }
double kt_worst(void) { return worst; }

double kt_cmp(const float *got, int64_t gs, const float *want, int64_t ws, int64_t n, int32_t d,
              double tol, const char *what) {
  double mx = 1e-30, err = 0;
  int64_t bi = -1, bc = 0;
  for (int64_t i = 0; i < n; i++)
    for (int32_t c = 0; c < d; c++) mx = fmax(mx, fabs((double)want[i * ws + c]));
  for (int64_t i = 0; i < n; i++)
    for (int32_t c = 0; c < d; c++) {
      const double g = got[i * gs + c], w = want[i * ws + c];
      const double e = isnan(g) || isnan(w) ? INFINITY : fabs(g - w);
      if (e > err || bi < 0) err = e, bi = i, bc = c;
    }
  worst = fmax(worst, err / mx);
  if (bi >= 0 && err > tol * mx)
    kt_fail("%s: rel err %.3g > %.1g at row %lld col %lld: got %.9g want %.9g (max|want| %.4g)",
            what, err / mx, tol, (long long)bi, (long long)bc, got[bi * gs + bc],
            want[bi * ws + bc], mx);
  return err / mx;
}

/* ---- guarded buffers ---------------------------------------------------------------- */

float *kt_alloc(rove_guarded *g, int64_t n, int mis, int post) {
  return rove_guarded_alloc_tight(g, n, mis, !post);
}

void kt_check(const rove_guarded *g, const char *what) {
  int64_t before, after;
  if (rove_guarded_check(g, &before, &after)) return;
  if (before) kt_fail("%s: written %lld floats before the buffer", what, (long long)before);
  if (after) kt_fail("%s: written %lld floats past the end", what, (long long)after);
}

int64_t kt_rows_len(int64_t n, int64_t stride, int32_t d) {
  return n > 0 ? (n - 1) * stride + d : 0;
}

float *kt_rows_alloc(rove_guarded *g, int64_t n, int64_t stride, int32_t d, int mis, int post) {
  float *p = kt_alloc(g, kt_rows_len(n, stride, d), mis, post);
  rove_fill_bits(p, g->n, KT_SENTINEL);
  return p;
}

void kt_rows_fill(rove_rng *r, float *x, int64_t n, int64_t stride, int32_t d, float amp) {
  for (int64_t i = 0; i < n; i++) rove_rng_fill(r, x + i * stride, d, -amp, amp);
}

void kt_gaps_check(const float *x, int64_t n, int64_t stride, int32_t d, const char *what) {
  for (int64_t i = 0; i + 1 < n; i++)
    for (int64_t c = d; c < stride; c++)
      if (!rove_has_bits(x + i * stride + c, KT_SENTINEL)) {
        kt_fail("%s: gap after row %lld written at column %lld", what, (long long)i, (long long)c);
        return;
      }
}

/* ---- ISA iteration ------------------------------------------------------------------ */

typedef struct {
  rove_isa isa;
  const rove_kernels *kern; /* NULL: not compiled in, or this CPU cannot run it */
  int compiled, self;
  char label[24];
} target;

typedef struct {
  const target *t;
  const kt_test *test;
} kcase;

const rove_kernels *kt_ref(void) { return rove_isa_desc_of(ROVE_ISA_SCALAR)->kern; }
const char *kt_isa(void) { return isa_label; }

/* One cmocka case: the table of its ISA, or skip() (reported as skipped, never passed). */
static void run_case(void **state) {
  const kcase *c = *state;
  n_fail = 0, worst = 0;
  isa_label = c->t ? c->t->label : "all";
  kt_ctx("%s", c->test->name);
  if (c->t && !c->t->kern) {
    printf("  SKIPPED %s %s: %s\n", isa_label, c->test->name,
           c->t->compiled ? "this CPU (or OS) cannot run it" : "ISA not compiled into this build");
    skip();
  }
  c->test->fn(c->t ? c->t->kern : kt_ref());
  if (n_fail) fail_msg("%s %s: %d failures", isa_label, c->test->name, n_fail);
}

static target make_target(rove_isa isa, int self) {
  target t = {isa, rove_kernels_for(isa), rove_isa_desc_of(isa)->kern != NULL, self, {0}};
  snprintf(t.label, sizeof t.label, "%s%s", rove_isa_name(isa), self ? "(self)" : "");
  return t;
}

int kt_main(const kt_suite *s) {
  rove_test_isa_gate();
  const char *env = getenv("ROVE_KTEST_SELF");
  const int self = env && strcmp(env, "1") == 0;
  static target targets[ROVE_ISA_COUNT];
  int nt = 0, available = 0;
  for (int i = ROVE_ISA_SCALAR + 1; i < ROVE_ISA_COUNT; i++) {
    const target t = targets[nt++] = make_target((rove_isa)i, 0);
    printf("%s: %-6s %s%s\n", s->name, t.label,
           t.kern       ? "compiled in and available: tested against "
           : t.compiled ? "compiled in, but this CPU cannot run it: skipped"
                        : "not compiled into this build: skipped",
           t.kern ? s->against : "");
    available += t.kern != NULL;
  }
  if (s->with_scalar || self) targets[nt++] = make_target(ROVE_ISA_SCALAR, !s->with_scalar);
  if (!available && !self) {
    printf(
        "SKIPPED: no SIMD kernel table is available here (none compiled in, or the CPU lacks "
        "them); nothing to compare with %s (ROVE_KTEST_SELF=1 runs %s)\n",
        s->against, s->with_scalar ? "the scalar tests anyway" : "scalar against itself");
    return 77;
  }
  const int n_cases = s->n_once + nt * s->n_per_isa;
  struct CMUnitTest *tests = calloc((size_t)n_cases, sizeof *tests);
  kcase *cases = calloc((size_t)n_cases, sizeof *cases);
  char(*names)[64] = calloc((size_t)n_cases, sizeof *names);
  if (!tests || !cases || !names) return 1;
  int n = 0;
  for (int j = 0; j < s->n_once; j++, n++) {
    cases[n] = (kcase){NULL, &s->once[j]};
    snprintf(names[n], sizeof names[n], "%s", s->once[j].name);
  }
  for (int i = 0; i < nt; i++)
    for (int j = 0; j < s->n_per_isa; j++, n++) {
      cases[n] = (kcase){&targets[i], &s->per_isa[j]};
      snprintf(names[n], sizeof names[n], "%s_%s", targets[i].label, s->per_isa[j].name);
    }
  for (int k = 0; k < n; k++)
    tests[k] = (struct CMUnitTest){names[k], run_case, NULL, NULL, &cases[k]};
  const int rc = _cmocka_run_group_tests(s->name, tests, (size_t)n, NULL, NULL);
  free(tests), free(cases), free(names);
  return rc;
}
