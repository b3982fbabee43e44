/* SPDX-License-Identifier: MIT */
/* gla_kernel_bench: the GLA chunk kernels alone (gla_kernels.h: the forward's `chunk`, the
 * backward's `bwd_state` and `bwd_grads`) on one head's chunk that stays in L1/L2, against the
 * single-core FMA peak measured in the same run: the kernels' own ceiling and their
 * bwd / fwd ratio, to set beside the end-to-end figures of ab_gla (issue 16's <= 3).
 *
 *   gla_kernel_bench [d ...]           (default: 64 128; key_dim = value_dim = d)
 *
 * Chunk n = 64 rows (the plan's default), log decays in [-0.05, 0] (the fast paths, as in
 * ab_gla). Nominal multiply-adds per chunk, with B = 16-row blocks and the causal
 * products taken block-wise (pairs: sum over blocks b of 16 x 16 b = n (n + 16) / 2 = T):
 *   forward  q S (n dk dv) + state update (n dk dv) + scores (T dk) + scores . v (T dv)
 *   bwd_state  state update (n dk dv)
 *   bwd_grads  v . do (T dv, shared by dq and dk) + S do (n dk dv) + D . k (T dk)   (dq)
 *              + H v, k^T H, H update (3 n dk dv) + k . q (T dk)
 *              + D . q, A . do (T dk + T dv)                                   (dk, dv)
 * GFLOP/s = 2 x those / time; medians of ROUNDS passes of REPS chunks (thread CPU time). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "fma_peak.h"
#include "isa_registry.h"
#include "kernels/gla_kernels.h"
#include "kernels/kernels.h"

enum { N = 64, ROUNDS = 15, REPS = 200 };

static float *fill(size_t n, unsigned *seed, float lo, float hi) {
  float *x = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
  if (!x) exit(2);
  for (size_t i = 0; i < n; i++) {
    *seed = *seed * 1103515245u + 12345u;
    x[i] = lo + (hi - lo) * (float)((*seed >> 8) & 0xFFFF) / 65536.0f;
  }
  return x;
}

typedef struct {
  const rove_gla_kernels *g;
  rove_gla_chunk fc;
  rove_gla_bwd_chunk bc;
  float *s0, *s, *h; /* the state each pass starts from, and the ones the kernels move */
  int64_t sn;
} setup;

/* Median seconds per chunk of kernel `which` (0 chunk, 1 bwd_state, 2 bwd_grads). The
 * states are reset before each chunk (a copy of dk x dv floats each, included in the time:
 * small against a chunk). */
static double time_kernel(setup *st, int which) {
  double t[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    const double t0 = bench_cpu_now();
    for (int i = 0; i < REPS; i++) {
      memcpy(st->s, st->s0, (size_t)st->sn * sizeof(float));
      if (which == 0)
        st->g->chunk(&st->fc);
      else if (which == 1)
        st->g->bwd_state(&st->bc);
      else
        memcpy(st->h, st->s0, (size_t)st->sn * sizeof(float)), st->g->bwd_grads(&st->bc);
    }
    t[r] = (bench_cpu_now() - t0) / REPS;
  }
  return bench_median(t, ROUNDS);
}

int main(int argc, char **argv) {
  int dims[8] = {64, 128}, nd = 2;
  if (argc > 1) {
    nd = 0;
    for (int i = 1; i < argc && nd < 8; i++) {
      dims[nd] = atoi(argv[i]);
      if (dims[nd] < 2 || dims[nd] > 1024) {
        fprintf(stderr, "gla_kernel_bench: d in 2 .. 1024\n");
        return 2;
      }
      nd++;
    }
  }
  printf("# GLA chunk kernels alone: one head, chunk %d rows, key_dim = value_dim = d, "
         "decays in [-0.05, 0]; GFLOP/s from the nominal multiply-adds (see the source)\n",
         N);
  printf("| ISA | d | FMA peak GFLOP/s | fwd us | fwd %% peak | state us | grads us | bwd %% peak | "
         "bwd/fwd time | bwd/fwd flops |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int isa = ROVE_ISA_COUNT - 1; isa >= ROVE_ISA_SCALAR; isa--) {
    const rove_kernels *kn = rove_kernels_for((rove_isa)isa);
    if (!kn) {
      printf("| %s | - | skipped: not on this CPU | | | | | | | |\n", rove_isa_name((rove_isa)isa));
      continue;
    }
    const double peak = rove_fma_peak_gflops((rove_isa)isa);
    for (int di = 0; di < nd; di++) {
      const int32_t d = dims[di];
      unsigned seed = 11;
      const size_t nk = (size_t)N * d;
      float *q = fill(nk, &seed, -0.5f, 0.5f), *k = fill(nk, &seed, -0.5f, 0.5f);
      float *v = fill(nk, &seed, -0.5f, 0.5f), *g = fill(nk, &seed, -0.05f, 0.0f);
      float *dout = fill(nk, &seed, -0.5f, 0.5f), *o = fill(nk, &seed, 0, 1);
      float *dq = fill(nk, &seed, 0, 1), *dkey = fill(nk, &seed, 0, 1);
      float *dval = fill(nk, &seed, 0, 1);
      setup st;
      st.g = &kn->gla;
      st.sn = (int64_t)d * d;
      st.s0 = fill((size_t)st.sn, &seed, -0.5f, 0.5f), st.s = fill((size_t)st.sn, &seed, 0, 1);
      st.h = fill((size_t)st.sn, &seed, 0, 1);
      const int64_t wf = rove_gla_work_floats(N, d), wb = rove_gla_bwd_work_floats(N, d, d);
      float *wfw = fill((size_t)wf, &seed, 0, 1), *wbw = fill((size_t)wb, &seed, 0, 1);
      st.fc = (rove_gla_chunk){N, d, d, q, k, g, v, st.s, o, wfw};
      st.bc = (rove_gla_bwd_chunk){N, d, d, q, k, g, v, dout, st.s, st.h, dq, dkey, dval, wbw};
      const double T = N * (N + 16) / 2.0, ss = (double)N * d * d;
      const double mf = 2 * ss + 2 * T * d, mq = ss, mk = 4 * ss + 5 * T * d;
      const double tf = time_kernel(&st, 0), tq = time_kernel(&st, 1), tk = time_kernel(&st, 2);
      const double gf = 2e-9 * mf / tf, gb = 2e-9 * (mq + mk) / (tq + tk);
      char pf[16] = "-", pb[16] = "-";
      if (peak > 0) {
        snprintf(pf, sizeof pf, "%.1f", 100.0 * gf / peak);
        snprintf(pb, sizeof pb, "%.1f", 100.0 * gb / peak);
      }
      printf("| %s | %d | %.1f | %.2f | %s | %.2f | %.2f | %s | %.2f | %.2f |\n",
             rove_isa_name((rove_isa)isa), d, peak, 1e6 * tf, pf, 1e6 * tq, 1e6 * tk, pb,
             (tq + tk) / tf, (mq + mk) / mf);
      free(q), free(k), free(v), free(g), free(dout), free(o), free(dq), free(dkey), free(dval);
      free(st.s0), free(st.s), free(st.h), free(wfw), free(wbw);
    }
  }
  return 0;
}
