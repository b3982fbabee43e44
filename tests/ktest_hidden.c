/* SPDX-License-Identifier: MIT */
/* Keys a query row cannot see must not affect it (docs/DESIGN.md §1, visibility), kernel by
 * kernel: attn_tile and attn_rows of every ISA of the registry, scalar included, each run
 * on clean data and again with NaN / Inf / 3e38 in the K and V rows of the hidden keys
 * (and in V rows past nk): the rows that cannot see them must come out bit for bit the
 * same. ISA iteration and skips: ktest_util.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ktest_util.h"
/* ktest_util.h first: cmocka needs its standard headers before it */
#include "kernels/mask.h"

/* ---- hidden garbage: keys a row cannot see must not affect it (issue 13, item 9) ----- */

/* Query rows at duplicated positions: even rows at P0, odd rows elsewhere, so keys hidden
 * from the even rows can be visible to the odd ones (mixed groups). g: key j holds garbage
 * (K and V) iff it is hidden from P0; with pad, V rows past nk of the tile hold NaN too.
 * The even rows must come out bit for bit as with clean data (a hidden pair adds nothing),
 * on the flash tile (after a clean unmasked tile) and on the row kernel. */
static int hid_visible(int64_t qp, int64_t kp, int32_t causal, int32_t window) {
  const int64_t diff = qp - kp;
  if (causal && diff < 0) return 0;
  return window == 0 || (diff < 0 ? -diff : diff) < window;
}

typedef struct {
  int32_t d, nq, nk, causal, window, p0;
  float garbage;
  int pad;
} hid_case;

static void hid_positions(const hid_case *c, int32_t *qp, int32_t *kp) {
  for (int32_t i = 0; i < c->nq; i++)
    qp[i] = i % 2 == 0 ? c->p0 : (int32_t)(c->nk - 1 - 3 * i % c->nk);
  for (int32_t j = 0; j < c->nk; j++) kp[j] = j;
}

/* One run of the tile kernel: a clean unmasked tile (positions far before), then the
 * masked tile whose hidden keys hold c->garbage when dirty. o, m, l: [tile_q] rows. */
static void hid_tile_run(const rove_kernels *kn, const hid_case *c, const float *q,
                         const float *k, const float *v, int dirty, float *o, float *m, float *l) {
  const int32_t d = c->d, tq = kn->tile_q, tk = kn->tile_kv;
  int32_t qp[512], kp[512], kp0[512];
  hid_positions(c, qp, kp);
  for (int32_t j = 0; j < tk; j++) kp0[j] = -1000 + j;
  float *kb = malloc(sizeof(float) * (size_t)(tk * d));
  float *vb = malloc(sizeof(float) * (size_t)(tk * d));
  float *kr = malloc(sizeof(float) * (size_t)((c->nk > tk ? c->nk : tk) * d));
  float *s = malloc(sizeof(float) * (size_t)(tq * tk));
  assert_true(kb && vb && kr && s);
  const rove_rot none = {NULL, NULL, d / 2, ROVE_PAIRING_HALF, 0, 0, 0};
  memset(o, 0, sizeof(float) * (size_t)(tq * d));
  for (int32_t i = 0; i < tq; i++) m[i] = -INFINITY, l[i] = 0.0f;
  rove_tile_args t = {.q = q, .nq = c->nq, .d = d, .q_pos = qp, .o = o, .m = m, .l = l,
                      .scratch = s, .causal = c->causal, .window = c->window};
  /* clean first tile, every key visible, its keys at half scale: its scores are smaller,
   * so the rows' maxima m are low enough that the masked tile's visible scores pass them
   * (the lazy maximum's fast path and general path both run, kernels.h), and a hidden
   * garbage key that sends another row of the panel past its m + SLACK must leave this
   * row's m, l and o alone */
  for (int32_t x = 0; x < tk * d; x++) kr[x] = 0.5f * k[x];
  kn->pack_k(kb, kr, d, tk, d, &none, 1.0f);
  memcpy(vb, v, sizeof(float) * (size_t)(tk * d));
  t.k = kb, t.v = vb, t.nk = tk, t.k_pos = kp0, t.mask = 0;
  kn->attn_tile(&t);
  /* the masked tile */
  memcpy(kr, k, sizeof(float) * (size_t)(c->nk * d));
  memset(vb, 0, sizeof(float) * (size_t)(tk * d));
  memcpy(vb, v, sizeof(float) * (size_t)(c->nk * d));
  for (int32_t j = 0; dirty && j < tk; j++) {
    const int bad = j >= c->nk ? c->pad : !hid_visible(c->p0, kp[j], c->causal, c->window);
    for (int32_t x = 0; bad && x < d; x++) {
      if (j < c->nk) kr[j * d + x] = c->garbage;
      vb[j * d + x] = j < c->nk ? c->garbage : NAN;
    }
  }
  kn->pack_k(kb, kr, d, c->nk, d, &none, 1.0f);
  for (int32_t j = c->nk; dirty && c->pad && j < tk; j++) /* NaN V rows past nk */
    for (int32_t x = 0; x < d; x++) vb[j * d + x] = NAN;
  t.k = kb, t.v = vb, t.nk = c->nk, t.k_pos = kp, t.mask = 1;
  kn->attn_tile(&t);
  free(kb), free(vb), free(kr), free(s);
}

static void hid_rows_run(const rove_kernels *kn, const hid_case *c, const float *q,
                         const float *k, const float *v, int dirty, float *o, float *m, float *l) {
  const int32_t d = c->d, ks = d + 3;
  int32_t qp[ROVE_ROWS_MAX], kp[512];
  hid_positions(c, qp, kp);
  float *kr = malloc(sizeof(float) * (size_t)(c->nk * ks));
  float *vr = malloc(sizeof(float) * (size_t)(c->nk * ks));
  float *s = aligned_alloc(64, sizeof(float) * (size_t)((ROVE_ROWS_SCRATCH(d) + 15) / 16 * 16));
  assert_true(kr && vr && s);
  for (int32_t j = 0; j < c->nk; j++) {
    const int bad = dirty && !hid_visible(c->p0, kp[j], c->causal, c->window);
    for (int32_t x = 0; x < ks; x++) {
      kr[j * ks + x] = x >= d ? NAN : bad ? c->garbage : k[j * d + x];
      vr[j * ks + x] = x >= d ? NAN : bad ? c->garbage : v[j * d + x];
    }
  }
  memset(o, 0, sizeof(float) * (size_t)(c->nq * d));
  for (int32_t i = 0; i < c->nq; i++) m[i] = -INFINITY, l[i] = 0.0f;
  rove_rows_args t = {.q = q, .k = kr, .v = vr, .ks = ks, .vs = ks, .nq = c->nq, .nk = c->nk,
                      .d = d, .q_pos = qp, .k_pos = kp, .mask = 1, .causal = c->causal,
                      .window = c->window, .o = o, .m = m, .l = l, .scratch = s};
  kn->attn_rows(&t);
  free(kr), free(vr), free(s);
}

typedef void (*hid_run_fn)(const rove_kernels *, const hid_case *, const float *, const float *,
                           const float *, int, float *, float *, float *);

static void hid_check(const rove_kernels *kn, const hid_case *c, hid_run_fn run, int rows_max) {
  const int32_t d = c->d, n = rows_max * d, nk = 512;
  rove_rng g;
  rove_rng_seed(&g, 1234 + (uint64_t)d * 7 + (uint64_t)c->nk);
  float *q = malloc(sizeof(float) * (size_t)n), *k = malloc(sizeof(float) * (size_t)(nk * d));
  float *v = malloc(sizeof(float) * (size_t)(nk * d));
  float *o0 = malloc(sizeof(float) * (size_t)n), *o1 = malloc(sizeof(float) * (size_t)n);
  float m0[512], l0[512], m1[512], l1[512];
  assert_true(q && k && v && o0 && o1);
  rove_rng_fill(&g, q, n, -0.3f, 0.3f);
  rove_rng_fill(&g, k, nk * d, -1.0f, 1.0f);
  rove_rng_fill(&g, v, nk * d, -1.0f, 1.0f);
  run(kn, c, q, k, v, 0, o0, m0, l0);
  run(kn, c, q, k, v, 1, o1, m1, l1);
  kt_ctx("d=%d nq=%d nk=%d causal=%d window=%d P0=%d garbage=%g pad=%d", d, c->nq, c->nk,
         c->causal, c->window, c->p0, c->garbage, c->pad);
  for (int32_t i = 0; i < c->nq; i += 2) {
    if (!(l0[i] > 0.0f)) kt_fail("row %d sees no key (bad case)", i);
    if (memcmp(o0 + i * d, o1 + i * d, sizeof(float) * (size_t)d) || m0[i] != m1[i] ||
        l0[i] != l1[i])
      kt_fail("row %d changed by hidden garbage: o[0] %g -> %g, m %g -> %g, l %g -> %g", i,
              o0[i * d], o1[i * d], m0[i], m1[i], l0[i], l1[i]);
  }
  free(q), free(k), free(v), free(o0), free(o1);
}

static void test_hidden_garbage(const rove_kernels *kn) {
  static const float garbage[] = {NAN, INFINITY, -INFINITY, 3e38f, -3e38f};
  static const int32_t dims[] = {32, 64, 80, 128, 130};
  const int32_t tq = kn->tile_q, tk = kn->tile_kv;
  for (size_t gi = 0; gi < sizeof garbage / sizeof *garbage; gi++)
    for (size_t di = 0; di < sizeof dims / sizeof *dims; di++) {
      const int32_t d = dims[di];
      /* flash tile: full and partial key tiles, causal and two-sided windows */
      const hid_case tiles[] = {{d, tq, tk, 1, 0, tk / 2, garbage[gi], 0},
                                {d, tq - 1, tk - 3, 1, 0, 9, garbage[gi], 1},
                                {d, tq, tk, 0, 11, tk / 3, garbage[gi], 0},
                                {d, 7, tk - 5, 1, 6, 20, garbage[gi], 1}};
      for (size_t i = 0; i < sizeof tiles / sizeof *tiles; i++)
        hid_check(kn, &tiles[i], hid_tile_run, tq);
      /* row kernel: several key blocks, 1..16 rows */
      const hid_case rows[] = {{d, 16, 150, 1, 0, 70, garbage[gi], 0},
                               {d, 5, 200, 0, 33, 100, garbage[gi], 0},
                               {d, 2, 64, 1, 20, 40, garbage[gi], 0},
                               {d, 1, 9, 1, 0, 4, garbage[gi], 0}};
      for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        hid_check(kn, &rows[i], hid_rows_run, ROVE_ROWS_MAX);
    }
}

int main(void) {
  static const kt_test per_isa[] = {{"hidden_garbage", test_hidden_garbage}};
  /* with_scalar: the scalar kernels are tested too (against their own clean run) */
  const kt_suite s = {"ktest_hidden", "their own clean run", per_isa,
                      (int)(sizeof per_isa / sizeof *per_isa), NULL, 0, 1};
  return kt_main(&s);
}
