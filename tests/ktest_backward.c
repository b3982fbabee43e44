/* SPDX-License-Identifier: MIT */
/* The backward tile (attn_bwd, src/kernels/attn_bwd_kernels.h) of every ISA against the
 * scalar one: nq in {1, 2, 5, 7, 33, 64}, nk in {1, 2, 9, 11, 13, 64} (every remainder of
 * the AVX2 tile's 6-row blocks), head_dim in {8, 64, 80, 100, 128}, plain / causal mask
 * with positions / sliding window / softcap, rows with lse -inf (dead: no contribution),
 * NaN and inf in the K and V columns of keys no query sees and in the q and do rows of
 * rows with lse -inf (must not reach any gradient), each of dq / dk / dv alone and all
 * together, accumulating onto
 * non-zero gradients, and guarded outputs. The LSE is the rows' true log-sum-exp over the
 * block (computed in double), so P is a real softmax. Tolerance 2e-5 of the size of the
 * terms a gradient sums (dS = P (dP - D) cancels; see make_inputs): FMA and the ISA's exp
 * against a multiply-add and libm's expf. ISA iteration and
 * skips: ktest_util.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ktest_util.h"
/* ktest_util.h first: cmocka needs its standard headers before it */
#include "kernels/mask.h"

#define TOL 2e-5

typedef struct {
  int32_t nq, nk, d, variant; /* 0 plain, 1 causal mask, 2 window + mask, 3 softcap + mask */
  int dead, garbage, which;   /* which: bit 0 dq, 1 dk, 2 dv */
} bcase;

/* The tile's inputs (everything but the outputs and scratch). */
typedef struct {
  float *q, *dout, *lse, *D, *k, *kT, *vT;
  int32_t *qp, *kp;
  double scale[3]; /* the size of the terms each gradient sums (dq, dk, dv): see below */
  rove_bwd_tile t;
} tinputs;

static void make_inputs(const bcase *c, rove_rng *g, tinputs *in) {
  const int32_t nq = c->nq, nk = c->nk, d = c->d, TK = ROVE_BWD_TK;
  in->q = malloc(sizeof(float) * (size_t)(nq * d));
  in->dout = malloc(sizeof(float) * (size_t)(nq * d));
  in->k = malloc(sizeof(float) * (size_t)(nk * d));
  float *v = malloc(sizeof(float) * (size_t)(nk * d));
  in->kT = calloc((size_t)(d * TK), sizeof(float));
  in->vT = calloc((size_t)(d * TK), sizeof(float));
  in->lse = malloc(sizeof(float) * (size_t)nq);
  in->D = malloc(sizeof(float) * (size_t)nq);
  in->qp = malloc(sizeof(int32_t) * (size_t)nq);
  in->kp = malloc(sizeof(int32_t) * (size_t)nk);
  assert_true(in->q && in->dout && in->k && v && in->kT && in->vT && in->lse && in->D &&
              in->qp && in->kp);
  const float amp = sqrtf(8.0f / sqrtf((float)d));
  rove_rng_fill(g, in->q, (int64_t)nq * d, -amp, amp);
  rove_rng_fill(g, in->dout, (int64_t)nq * d, -1.0f, 1.0f);
  rove_rng_fill(g, in->k, (int64_t)nk * d, -amp, amp);
  rove_rng_fill(g, v, (int64_t)nk * d, -1.0f, 1.0f);
  for (int32_t j = 0; j < nk; j++) in->kp[j] = 100 + j;
  for (int32_t i = 0; i < nq; i++) in->qp[i] = 100 + (int32_t)(rove_rng_u64(g) % (uint64_t)(nk + 4)) - 2;
  const int mask = c->variant >= 1; /* the softcap variant masks too (garbage keys meet the tanh) */
  const int32_t window = c->variant == 2 ? 5 : 0;
  const float cap = c->variant == 3 ? 3.0f : 0.0f;
  /* keys no query sees (with a mask): garbage K / V columns */
  if (mask && c->garbage)
    for (int32_t j = 0; j < nk; j++) {
      int seen = 0;
      for (int32_t i = 0; i < nq; i++) seen |= rove_visible(in->qp[i], in->kp[j], 1, window);
      if (!seen)
        for (int32_t e = 0; e < d; e++)
          in->k[(int64_t)j * d + e] = (e % 2) ? NAN : INFINITY, v[(int64_t)j * d + e] = NAN;
    }
  for (int32_t e = 0; e < d; e++)
    for (int32_t j = 0; j < nk; j++)
      in->kT[e * TK + j] = in->k[(int64_t)j * d + e], in->vT[e * TK + j] = v[(int64_t)j * d + e];
  double rowq[ROVE_BWD_TQ] = {0}, colk[ROVE_BWD_TK] = {0}, colv[ROVE_BWD_TK] = {0};
  in->scale[0] = in->scale[1] = in->scale[2] = 0.0;
  /* the true LSE over the visible keys (double), D = a row's do . o with o the softmax
   * mix of the visible V rows */
  for (int32_t i = 0; i < nq; i++) {
    double s[ROVE_BWD_TK], mx = -INFINITY, l = 0.0;
    for (int32_t j = 0; j < nk; j++) {
      s[j] = -INFINITY;
      if (mask && !rove_visible(in->qp[i], in->kp[j], 1, window)) continue;
      double a = 0.0;
      for (int32_t e = 0; e < d; e++) a += (double)in->q[(int64_t)i * d + e] * in->k[(int64_t)j * d + e];
      if (cap > 0.0f) a = cap * tanh(a / cap);
      s[j] = a, mx = fmax(mx, a);
    }
    double o_dot = 0.0;
    for (int32_t j = 0; j < nk; j++)
      if (s[j] > -INFINITY) l += exp(s[j] - mx);
    for (int32_t j = 0; j < nk; j++) {
      if (s[j] == -INFINITY) continue;
      const double w = exp(s[j] - mx) / l;
      for (int32_t e = 0; e < d; e++) o_dot += w * v[(int64_t)j * d + e] * in->dout[(int64_t)i * d + e];
    }
    const int dead = c->dead && i % 3 == 1;
    in->lse[i] = (dead || l == 0.0) ? -INFINITY : (float)(mx + log(l));
    in->D[i] = (float)o_dot;
    /* dS_ij = P_ij (dP_ij - D_i) cancels (one key: dP = D exactly, dS = 0 up to rounding),
     * so gradients are compared against the size of what they sum, not against their
     * value: per row / key, sum of P_ij (|dP_ij| + |D_i|) times the largest |q_i|, |k_j|
     * (dk, dq), or of P_ij times the largest |do_i| (dv) */
    for (int32_t j = 0; j < nk && in->lse[i] > -INFINITY; j++) {
      if (s[j] == -INFINITY) continue;
      const double P = exp(s[j] - mx) / l;
      double dP = 0.0, qm = 0.0, km = 0.0, dm = 0.0;
      for (int32_t e = 0; e < d; e++) {
        dP += (double)in->dout[(int64_t)i * d + e] * v[(int64_t)j * d + e];
        qm = fmax(qm, fabs(in->q[(int64_t)i * d + e])), km = fmax(km, fabs(in->k[(int64_t)j * d + e]));
        dm = fmax(dm, fabs(in->dout[(int64_t)i * d + e]));
      }
      const double m = P * (fabs(dP) + fabs(o_dot));
      rowq[i] += m * km, colk[j] += m * qm, colv[j] += P * dm;
    }
  }
  /* rows with lse -inf (dead, or no visible key) contribute nothing, whatever their q and
   * do hold: garbage there too (dk's and dv's zero weights meet it) */
  for (int32_t i = 0; c->garbage && i < nq; i++)
    if (in->lse[i] == -INFINITY)
      for (int32_t e = 0; e < d; e++)
        in->q[(int64_t)i * d + e] = (e % 2) ? INFINITY : NAN,
                              in->dout[(int64_t)i * d + e] = (e % 3) ? NAN : -INFINITY;
  for (int32_t i = 0; i < nq; i++) in->scale[0] = fmax(in->scale[0], rowq[i]);
  for (int32_t j = 0; j < nk; j++)
    in->scale[1] = fmax(in->scale[1], colk[j]), in->scale[2] = fmax(in->scale[2], colv[j]);
  free(v);
  in->t = (rove_bwd_tile){.q = in->q, .dout = in->dout, .lse = in->lse, .D = in->D,
                          .k = in->k, .kT = in->kT, .vT = in->vT, .nq = nq, .nk = nk, .d = d,
                          .q_pos = in->qp, .k_pos = in->kp, .mask = mask, .causal = 1,
                          .window = window, .softcap = cap};
}

static void free_inputs(tinputs *in) {
  free(in->q), free(in->dout), free(in->lse), free(in->D), free(in->k), free(in->kT);
  free(in->vT), free(in->qp), free(in->kp);
}

/* Run kn's tile on in with the gradients chosen by which, accumulating onto start values
 * init (the same for every ISA); outputs into g[3] (guarded). */
static void run_tile(const rove_kernels *kn, const tinputs *in, int which, const float *init[3],
                     float *out[3], rove_guarded gd[3]) {
  const int64_t n[3] = {(int64_t)in->t.nq * in->t.d, (int64_t)in->t.nk * in->t.d,
                        (int64_t)in->t.nk * in->t.d};
  rove_guarded sg;
  float *scratch = kt_alloc(&sg, ROVE_BWD_SCRATCH, 0, 1);
  rove_fill_bits(scratch, sg.n, 0x7FC00007u); /* scratch starts as garbage */
  rove_bwd_tile t = in->t;
  t.scratch = scratch;
  for (int x = 0; x < 3; x++) {
    out[x] = kt_alloc(&gd[x], n[x], 1 + x, 1);
    memcpy(out[x], init[x], sizeof(float) * (size_t)n[x]);
  }
  t.dq = (which & 1) ? out[0] : NULL;
  t.dk = (which & 2) ? out[1] : NULL;
  t.dv = (which & 4) ? out[2] : NULL;
  kn->attn_bwd(&t);
  kt_check(&sg, "scratch");
  rove_guarded_free(&sg);
}

static void test_attn_bwd(const rove_kernels *kn) {
  const rove_kernels *ref = kt_ref();
  if (kn->attn_bwd == ref->attn_bwd) /* NEON today: its table names the scalar tile */
    print_message("  %s attn_bwd: this table names the scalar kernel (no %s tile yet)\n", kt_isa(),
                  kt_isa());
  /* row counts that leave every remainder of the AVX2 tile's 6-row blocks (1 .. 5) in the
   * S / dP products and the dq sums (nq) and the dk / dv sums (nk); dims with and without
   * the 16-dim blocks (d % 16 == 0), even and odd numbers of them */
  static const int32_t nqs[] = {1, 2, 5, 7, 33, 64}, nks[] = {1, 2, 9, 11, 13, 64},
                       ds[] = {8, 64, 80, 100, 128};
  enum { NQ = sizeof nqs / sizeof *nqs, NK = sizeof nks / sizeof *nks, ND = sizeof ds / sizeof *ds };
  rove_rng g;
  rove_rng_seed(&g, 0xbacc);
  int64_t cases = 0;
  double worst = 0.0;
  for (int a = 0; a < NQ; a++)
    for (int b = 0; b < NK; b++)
      for (int e = 0; e < ND; e++)
        for (int var = 0; var < 4; var++) {
          const bcase c = {nqs[a], nks[b], ds[e], var, (a + var) % 2, 1,
                           (int)(1 + (a + b + e + var) % 7)};
          tinputs in;
          make_inputs(&c, &g, &in);
          kt_ctx("attn_bwd nq=%d nk=%d d=%d variant=%d dead=%d which=%d", c.nq, c.nk, c.d,
                 c.variant, c.dead, c.which);
          const int64_t n[3] = {(int64_t)c.nq * c.d, (int64_t)c.nk * c.d, (int64_t)c.nk * c.d};
          float *init[3];
          for (int x = 0; x < 3; x++) {
            init[x] = malloc(sizeof(float) * (size_t)n[x]);
            assert_non_null(init[x]);
            rove_rng_fill(&g, init[x], n[x], -0.5f, 0.5f); /* accumulate onto these */
          }
          float *got[3], *want[3];
          rove_guarded gg[3], gw[3];
          run_tile(ref, &in, c.which, (const float **)init, want, gw);
          run_tile(kn, &in, c.which, (const float **)init, got, gg);
          static const char *names[3] = {"dq", "dk", "dv"};
          for (int x = 0; x < 3; x++) {
            /* compare the increments (init is common), so the tolerance is relative to
             * what the tile added */
            for (int64_t i = 0; i < n[x]; i++) got[x][i] -= init[x][i], want[x][i] -= init[x][i];
            if (!(c.which >> x & 1)) {
              for (int64_t i = 0; i < n[x]; i++)
                if (got[x][i] != 0.0f) {
                  kt_fail("%s written though off", names[x]);
                  break;
                }
            } else {
              double err = 0.0;
              int64_t at = 0;
              for (int64_t i = 0; i < n[x]; i++) {
                const double e = isnan(got[x][i]) || isnan(want[x][i]) ? INFINITY
                                                                      : fabs(got[x][i] - want[x][i]);
                if (e > err) err = e, at = i;
              }
              const double sc = fmax(in.scale[x], 1e-30);
              worst = fmax(worst, err / sc);
              if (!(err <= TOL * sc))
                kt_fail("%s: err %.3g > %.0e x %.3g (the size of its terms) at %lld: got %.9g "
                        "want %.9g", names[x], err, TOL, sc, (long long)at, got[x][at], want[x][at]);
            }
            kt_check(&gg[x], names[x]);
            rove_guarded_free(&gg[x]), rove_guarded_free(&gw[x]);
            free(init[x]);
          }
          free_inputs(&in);
          cases++;
        }
  print_message("  %s attn_bwd: %lld tiles, worst err %.3g of the terms' size\n", kt_isa(),
                (long long)cases, worst);
}

int main(void) {
  static const kt_test per_isa[] = {{"attn_bwd", test_attn_bwd}};
  const kt_suite s = {"ktest_backward", "scalar", per_isa, 1, NULL, 0, 0};
  return kt_main(&s);
}
