#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rove_test_isa_gate(void) {
  const char *want = getenv("ROVE_TEST_REQUIRE_ISA");
  if (!want || !*want) return;
  rove_isa isa = ROVE_ISA_AUTO;
  for (int i = ROVE_ISA_SCALAR; i <= ROVE_ISA_NEON; i++)
    if (strcmp(want, rove_isa_name((rove_isa)i)) == 0) isa = (rove_isa)i;
  if (isa == ROVE_ISA_AUTO || !rove_isa_available(isa)) {
    printf("SKIPPED: ISA '%s' is not available on this CPU/build\n", want);
    exit(77);
  }
  if (rove_best_isa() != isa) {
    printf("FAIL: ROVE_ISA=%s but rove_best_isa() = %s\n", want, rove_isa_name(rove_best_isa()));
    exit(1);
  }
}

void rove_rng_seed(rove_rng *r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ull + 1; }
uint64_t rove_rng_u64(rove_rng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 0x2545F4914F6CDD1Dull;
}
float rove_rng_uniform(rove_rng *r, float lo, float hi) {
  double u = (double)(rove_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
  return (float)(lo + (hi - lo) * u);
}
void rove_rng_fill(rove_rng *r, float *x, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; i++) x[i] = rove_rng_uniform(r, lo, hi);
}

#define CANARY 64
static const uint32_t canary_bits = 0x7FC0DEADu; /* a NaN pattern nobody writes */

void rove_guarded_alloc(rove_guarded *g, int64_t n, int misalign) {
  g->pre = CANARY + misalign;
  g->n = n;
  g->base = malloc((size_t)(g->pre + n + CANARY) * sizeof(float));
  assert_non_null(g->base);
  uint32_t *w = (uint32_t *)g->base;
  for (int64_t i = 0; i < g->pre + n + CANARY; i++) w[i] = canary_bits;
  g->data = (float *)g->base + g->pre;
  memset(g->data, 0, (size_t)n * sizeof(float));
}
int rove_guarded_intact(const rove_guarded *g) {
  const uint32_t *w = (const uint32_t *)g->base;
  for (int64_t i = 0; i < g->pre; i++)
    if (w[i] != canary_bits) return 0;
  for (int64_t i = g->pre + g->n; i < g->pre + g->n + CANARY; i++)
    if (w[i] != canary_bits) return 0;
  return 1;
}
void rove_guarded_free(rove_guarded *g) {
  free(g->base);
  g->base = NULL;
  g->data = NULL;
}

double rove_max_rel_err_fd(const float *a, const double *b, int64_t n) {
  double mx = 1e-30, err = 0;
  for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(b[i]));
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - b[i]);
    if (e != e) return INFINITY;
    err = fmax(err, e);
  }
  return err / mx;
}
double rove_max_rel_err_ff(const float *a, const float *b, int64_t n) {
  double mx = 1e-30, err = 0;
  for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs((double)b[i]));
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - (double)b[i]);
    if (e != e) return INFINITY;
    err = fmax(err, e);
  }
  return err / mx;
}
