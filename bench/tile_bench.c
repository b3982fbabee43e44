/* SPDX-License-Identifier: MIT */
/* tile_bench: the flash tile kernel (attn_tile) alone, on data that stays in L1/L2, against
 * the single-core FMA peak measured in the same run: the kernel's own ceiling, to set
 * beside the end-to-end prefill figures (rove bench / rove_bench).
 *
 *   tile_bench [d ...]                 (default: 64 128)
 *
 * For each vector ISA this CPU runs (and scalar): one packed query tile (tile_q rows,
 * in L1) against NT key tiles (tile_kv keys each, packed K and rotated V: NT = 8, 256 KB
 * at d = 64, in L2), the accumulators reset per pass, one thread. Cases:
 *   full      every pair visible (mask 0): the interior tiles of a causal prefill
 *   diagonal  mask 1, causal: a query tile at positions 0 .. tile_q-1 against the key
 *             tiles at positions 0 .. (the masked tiles on a causal prefill's diagonal;
 *             about half of their pairs are visible)
 * GFLOP/s count 4 nq nk d per tile (S = Q K^T and P V, two flops per multiply-add) for
 * full tiles, and only the visible pairs for diagonal ones ("useful" GFLOP/s); % of peak
 * is of the FMA peak of the same ISA measured now (fma_peak.c). Medians of ROUNDS timed
 * passes (CPU time of this thread). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "fma_peak.h"
#include "isa_registry.h"
#include "kernels/attn_bwd_kernels.h"
#include "kernels/kernels.h"

enum { NT = 8, ROUNDS = 15 };

static float *fill(size_t n, unsigned *seed) {
  float *x = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
  if (!x) exit(2);
  for (size_t i = 0; i < n; i++) {
    *seed = *seed * 1103515245u + 12345u;
    x[i] = (float)((*seed >> 8) & 0xFFFF) / 65536.0f - 0.5f;
  }
  return x;
}

/* Seconds per pass (median) of one query tile over its key tiles: NT full tiles, or
 * (diagonal) the ceil(tile_q / tile_kv) masked tiles a causal prefill's query tile at
 * positions 0 .. tile_q-1 meets on its diagonal (keys at positions 0, 1, ...); *useful =
 * the flops of the visible pairs. */
static double time_tiles(const rove_kernels *kn, int32_t d, int diagonal, double *useful) {
  const int32_t tq = kn->tile_q, tk = kn->tile_kv, nt = diagonal ? (tq + tk - 1) / tk : NT;
  unsigned seed = 7;
  float *q = fill((size_t)tq * d, &seed), *kraw = fill((size_t)NT * tk * d, &seed);
  float *kp = fill((size_t)NT * tk * d, &seed), *v = fill((size_t)NT * tk * d, &seed);
  float *o = fill((size_t)tq * d, &seed), *m = fill((size_t)tq, &seed), *l = fill((size_t)tq, &seed);
  float *scr = fill((size_t)tq * tk, &seed);
  int32_t *qp = malloc(sizeof(int32_t) * (size_t)tq);
  int32_t *kpos = malloc(sizeof(int32_t) * (size_t)NT * (size_t)tk);
  if (!qp || !kpos) exit(2);
  const rove_rot none = {0};
  for (int t = 0; t < NT; t++) /* packed K: this ISA's private tile layout */
    kn->pack_k(kp + (size_t)t * tk * d, kraw + (size_t)t * tk * d, d, tk, d, &none, 1.0f);
  for (int32_t i = 0; i < tq; i++) qp[i] = i; /* query i sees keys at positions <= i */
  for (int32_t j = 0; j < NT * tk; j++) kpos[j] = j;
  double visible = 0;
  for (int32_t i = 0; i < tq; i++) visible += diagonal ? i + 1 : (double)tk * nt;
  *useful = 4.0 * visible * d;
  rove_tile_args a = {.q = q, .nq = tq, .nk = tk, .d = d, .q_pos = qp,
                      .mask = diagonal, .causal = 1, .o = o, .m = m, .l = l, .scratch = scr};
  double t[ROUNDS];
  for (int r = -2; r < ROUNDS; r++) { /* two warm-up passes */
    for (int32_t i = 0; i < tq; i++) m[i] = -INFINITY, l[i] = 0.0f;
    memset(o, 0, sizeof(float) * (size_t)tq * d);
    const double t0 = bench_cpu_now();
    for (int rep = 0; rep < 16; rep++)
      for (int k = 0; k < nt; k++) {
        a.k = kp + (size_t)k * tk * d;
        a.v = v + (size_t)k * tk * d;
        a.k_pos = kpos + (size_t)k * tk;
        kn->attn_tile(&a);
      }
    if (r >= 0) t[r] = (bench_cpu_now() - t0) / 16;
  }
  const double med = bench_median(t, ROUNDS);
  free(q), free(kraw), free(kp), free(v), free(o), free(m), free(l), free(scr), free(qp), free(kpos);
  return med;
}

/* Seconds per call (median) of the backward tile (attn_bwd) on one full block, 64 query
 * rows x ROVE_BWD_TK keys, every pair visible, dq, dk and dv all asked for: five block
 * products, 10 nq nk d flops. */
static double time_bwd_tile(const rove_kernels *kn, int32_t d, double *flops) {
  const int32_t nq = ROVE_BWD_TQ, nk = ROVE_BWD_TK;
  unsigned seed = 11;
  float *q = fill((size_t)nq * d, &seed), *dout = fill((size_t)nq * d, &seed);
  float *k = fill((size_t)nk * d, &seed), *kT = fill((size_t)nk * d, &seed);
  float *vT = fill((size_t)nk * d, &seed), *lse = fill((size_t)nq, &seed);
  float *D = fill((size_t)nq, &seed), *dq = fill((size_t)nq * d, &seed);
  float *dk = fill((size_t)nk * d, &seed), *dv = fill((size_t)nk * d, &seed);
  float *scr = fill(ROVE_BWD_SCRATCH, &seed);
  for (int32_t i = 0; i < nq; i++) lse[i] = 4.0f; /* above almost every score (the clamp takes the rest) */
  *flops = 10.0 * nq * nk * d;
  const rove_bwd_tile a = {.q = q, .dout = dout, .lse = lse, .D = D, .k = k, .kT = kT, .vT = vT,
                           .nq = nq, .nk = nk, .d = d, .dq = dq, .dk = dk, .dv = dv,
                           .scratch = scr};
  double t[ROUNDS];
  for (int r = -2; r < ROUNDS; r++) {
    const double t0 = bench_cpu_now();
    for (int rep = 0; rep < 16; rep++) kn->attn_bwd(&a);
    if (r >= 0) t[r] = (bench_cpu_now() - t0) / 16;
  }
  const double med = bench_median(t, ROUNDS);
  free(q), free(dout), free(k), free(kT), free(vT), free(lse), free(D), free(dq), free(dk);
  free(dv), free(scr);
  return med;
}

int main(int argc, char **argv) {
  int32_t dims[8] = {64, 128}, nd = 2;
  if (argc > 1) {
    nd = 0;
    for (int i = 1; i < argc && nd < 8; i++) dims[nd++] = (int32_t)atoi(argv[i]);
  }
  typedef struct bwd_row {
    const char *isa;
    int32_t d;
    double peak, gflops, ratio;
  } bwd_row;
  bwd_row bwd[ROVE_ISA_COUNT * 8];
  int nb = 0;
  printf("# tile_bench: attn_tile alone (one query tile x %d key tiles in L1/L2, 1 thread); "
         "medians of %d\n", NT, ROUNDS);
  printf("| ISA | tile | d | FMA peak GFLOP/s | full GFLOP/s | full %% peak | diagonal useful "
         "GFLOP/s | diagonal %% peak | diagonal time per key tile / full |\n");
  printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int isa = ROVE_ISA_COUNT - 1; isa >= ROVE_ISA_SCALAR; isa--) {
    const rove_kernels *kn = rove_kernels_for((rove_isa)isa);
    if (!kn) {
      printf("| %s | - | - | skipped: not on this CPU or not built | | | | | |\n",
             rove_isa_name((rove_isa)isa));
      continue;
    }
    const double peak = rove_fma_peak_gflops((rove_isa)isa); /* 0 for scalar */
    for (int i = 0; i < nd; i++) {
      const int32_t d = dims[i];
      if (d < 2 || d > ROVE_MAX_HEAD_DIM || d % 2) {
        fprintf(stderr, "tile_bench: head_dim %d is not even in 2..%d\n", d, ROVE_MAX_HEAD_DIM);
        return 2;
      }
      double fl_full, fl_diag;
      const double tf = time_tiles(kn, d, 0, &fl_full), td = time_tiles(kn, d, 1, &fl_diag);
      const double gf = fl_full / tf * 1e-9, gd = fl_diag / td * 1e-9;
      char pf[16] = "-", pd[16] = "-";
      if (peak > 0) {
        snprintf(pf, sizeof pf, "%.1f", 100.0 * gf / peak);
        snprintf(pd, sizeof pd, "%.1f", 100.0 * gd / peak);
      }
      printf("| %s | %dx%d | %d | %.1f | %.1f | %s | %.1f | %s | %.2f |\n",
             rove_isa_name((rove_isa)isa), kn->tile_q, kn->tile_kv, d, peak, gf, pf, gd, pd,
             (td / ((kn->tile_q + kn->tile_kv - 1) / kn->tile_kv)) / (tf / NT));
      /* the backward tile, and its time per (query, key) pair over the forward's */
      double fl_bwd;
      const double tb = time_bwd_tile(kn, d, &fl_bwd), gb = fl_bwd / tb * 1e-9;
      bwd[nb++] = (bwd_row){rove_isa_name((rove_isa)isa), d, peak, gb,
                            (tb / (ROVE_BWD_TQ * ROVE_BWD_TK)) / (tf / ((double)NT * kn->tile_q * kn->tile_kv))};
    }
  }
  printf("\n# the backward tile (attn_bwd) alone: %d query rows x %d keys, all visible, dq dk dv "
         "(5 block products, 10 nq nk d flops); bwd/fwd: its time per (query, key) pair over "
         "the full forward tile's above\n", ROVE_BWD_TQ, ROVE_BWD_TK);
  printf("| ISA | d | FMA peak GFLOP/s | bwd GFLOP/s | bwd %% peak | bwd/fwd per pair |\n");
  printf("|---|---:|---:|---:|---:|---:|\n");
  for (int i = 0; i < nb; i++) {
    char pb[16] = "-";
    if (bwd[i].peak > 0) snprintf(pb, sizeof pb, "%.1f", 100.0 * bwd[i].gflops / bwd[i].peak);
    printf("| %s | %d | %.1f | %.1f | %s | %.2f |\n", bwd[i].isa, bwd[i].d, bwd[i].peak,
           bwd[i].gflops, pb, bwd[i].ratio);
  }
  return 0;
}
