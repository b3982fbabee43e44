/* SPDX-License-Identifier: MIT */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rove_test_isa_gate(void) {
  const char *want = getenv("ROVE_TEST_REQUIRE_ISA");
  if (!want || !*want) return;
  rove_isa isa = ROVE_ISA_AUTO;
  if (rove_isa_parse(want, &isa) != ROVE_OK || isa == ROVE_ISA_AUTO || !rove_isa_available(isa)) {
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

#if defined(__SANITIZE_ADDRESS__)
#define TESTUTIL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TESTUTIL_ASAN 1
#endif
#endif

void rove_fill_bits(float *x, int64_t n, uint32_t bits) {
  for (int64_t i = 0; i < n; i++) memcpy(x + i, &bits, 4);
}

int rove_has_bits(const float *x, uint32_t bits) {
  uint32_t u;
  memcpy(&u, x, 4);
  return u == bits;
}

float *rove_guarded_alloc_tight(rove_guarded *g, int64_t n, int misalign, int tight) {
#if !defined(TESTUTIL_ASAN)
  tight = 0;
#endif
  g->pre = ROVE_GUARD_FLOATS + misalign;
  g->post = tight ? 0 : ROVE_GUARD_FLOATS;
  g->n = n;
  void *b = NULL;
  assert_int_equal(posix_memalign(&b, 64, (size_t)(g->pre + n + g->post) * sizeof(float)), 0);
  g->base = b;
  rove_fill_bits(g->base, g->pre + n + g->post, ROVE_GUARD_CANARY);
  g->data = g->base + g->pre;
  return g->data;
}

float *rove_guarded_alloc(rove_guarded *g, int64_t n, int misalign) {
  return rove_guarded_alloc_tight(g, n, misalign, 0);
}

int rove_guarded_check(const rove_guarded *g, int64_t *before, int64_t *after) {
  int64_t b = 0, a = 0;
  for (int64_t i = 0; i < g->pre && !b; i++)
    if (!rove_has_bits(g->base + i, ROVE_GUARD_CANARY)) b = g->pre - i;
  for (int64_t i = 0; i < g->post && !a; i++)
    if (!rove_has_bits(g->data + g->n + i, ROVE_GUARD_CANARY)) a = i + 1;
  if (before) *before = b;
  if (after) *after = a;
  return !a && !b;
}

int rove_guarded_intact(const rove_guarded *g) { return rove_guarded_check(g, NULL, NULL); }

void rove_guarded_free(rove_guarded *g) {
  free(g->base);
  g->base = g->data = NULL;
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

float *rove_out_over(int64_t n, const void *src, size_t n_src, void **copy) {
  char *o = malloc((size_t)n * sizeof(float) + n_src); /* 16-byte aligned */
  if (!o) return NULL;
  for (int64_t i = 0; i < n; i++) ((float *)o)[i] = 321.0f;
  *copy = o + (size_t)n * sizeof(float) - 8;
  memcpy(*copy, src, n_src);
  return (float *)o;
}

int rove_out_over_untouched(const float *out, int64_t n) {
  for (int64_t i = 0; i < n - 2; i++)
    if (out[i] != 321.0f) return 0;
  return 1;
}

size_t rove_test_dtype_size(rove_dtype t) {
  return t == ROVE_DTYPE_F32 ? 4 : t == ROVE_DTYPE_Q8 ? 1 : 2;
}
