/* SPDX-License-Identifier: MIT */
/* GLA: plan creation from fuzzed configs, then rove_gla_forward, rove_gla_recurrent and
 * rove_gla_backward on the same fuzzed inputs (log decays g from 0 down to -FLT_MAX, sometimes positive or
 * non-finite; angles; initial/final states, in place or not; the batch as packed
 * sequences of fuzzed lengths, cu_seqlens sometimes hostile).
 * Invariants: a valid status; g > 0, non-finite g or (for a rotating plan) non-finite
 * angles are rejected; outputs and final state untouched on failure; both calls give the
 * same status, and on success finite outputs and states that agree to float rounding. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#define H "fuzz_gla"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader rd;
  fz_init(&rd, data, size);
  static const int32_t dims[] = {1, 2, 4, 8, 3, 6, 0, -1};
  static const int32_t chunks[] = {0, 16, 32, 64, 128, 0, 8, -16};
  static const double scales[] = {0, 0, 1, -0.5, 4, NAN, INFINITY, 1e30};
  rove_gla_config cfg;
  rove_gla_config_init(&cfg, fz_range(&rd, 1, 2), fz_pick_i32(&rd, dims, 8),
                       fz_pick_i32(&rd, dims, 8));
  if (fz_u8(&rd) >= 250) cfg.n_heads = fz_range(&rd, -1, 0);
  if (fz_bool(&rd)) cfg.rotate = fz_u8(&rd) & 0x1F;
  if (fz_u8(&rd) >= 128) cfg.rotary_dim = fz_range(&rd, -1, 9);
  if (fz_u8(&rd) >= 200) cfg.pairing = (rove_pairing)fz_range(&rd, 0, 2);
  cfg.chunk = fz_pick_i32(&rd, chunks, 8);
  if (fz_u8(&rd) >= 200) cfg.scale = (float)fz_pick_f64(&rd, scales, 8);
  cfg.isa = fz_u8(&rd) >= 200 ? ROVE_ISA_SCALAR : ROVE_ISA_AUTO;
  cfg.n_threads = 1;
  rove_gla_plan *plan = NULL;
  rove_status st = rove_gla_plan_create(&cfg, &plan);
  fz_check_status(H, st);
  if (st != ROVE_OK) return 0;

  const int64_t nh = cfg.n_heads, kd = cfg.key_dim, vd = cfg.value_dim;
  const int64_t r = cfg.rotary_dim > 0 ? cfg.rotary_dim : kd;
  rove_gla_args a;
  memset(&a, 0, sizeof a);
  a.batch = fz_range(&rd, 1, 2);
  a.seq_len = fz_range(&rd, 1, 40);
  if (fz_u8(&rd) >= 250) a.seq_len = fz_range(&rd, -1, 0);
  int bad = a.seq_len <= 0;
  int64_t tok = (int64_t)a.batch * (bad ? 1 : a.seq_len);
  size_t qk_n = (size_t)(tok * nh * kd), v_n = (size_t)(tok * nh * vd);
  size_t st_n = (size_t)(a.batch * nh * kd * vd), a_n = (size_t)(tok * nh * (r / 2));
  /* packed sequences (cu_seqlens): the batch's tokens as one row of a.batch sequences of
   * fuzzed lengths (the same buffers, a state per sequence); sometimes a hostile array
   * (not from 0, not ending at seq_len, decreasing), which must be refused */
  int32_t cu[3];
  if (!bad && fz_bool(&rd)) {
    const int32_t n = a.batch, total = a.batch * a.seq_len;
    cu[0] = 0, cu[1] = n == 2 ? fz_range(&rd, 0, total) : total, cu[2] = total;
    const uint8_t m = fz_u8(&rd);
    if (m >= 245) cu[0] = 1, bad = 1;
    else if (m >= 240) cu[n] = total - 1, bad = 1;
    else if (m >= 235 && n == 2) cu[1] = total + 1, bad = 1;
    a.seq_len = total, a.batch = 1, a.cu_seqlens = cu, a.n_seqs = n;
  }
  float *q = fz_alloc(qk_n * sizeof *q), *k = fz_alloc(qk_n * sizeof *k);
  float *v = fz_alloc(v_n * sizeof *v), *g = fz_alloc(qk_n * sizeof *g);
  fz_fill_f32(&rd, q, qk_n, 1.0f);
  fz_fill_f32(&rd, k, qk_n, 1.0f);
  fz_fill_f32(&rd, v, v_n, 2.0f);
  /* log decays: uniform in [-depth, 0], a few entries at hostile values */
  static const double depths[] = {0.0, 1e-3, 0.5, 2.0, 20.0, 88.0, 1e4, 1e30};
  float depth = (float)depths[fz_u8(&rd) % 8];
  fz_fill_f32(&rd, g, qk_n, depth);
  for (size_t i = 0; i < qk_n; i++) g[i] = -fabsf(g[i]);
  int odd = fz_u8(&rd) >= 160 ? fz_range(&rd, 1, 3) : 0;
  int bad_g = 0;
  static const double gvals[] = {0.0, -FLT_MAX, -1e-45, -INFINITY, 1e-30, NAN, INFINITY, -88.0};
  for (int i = 0; i < odd; i++) {
    float gv = (float)gvals[fz_u8(&rd) % 8];
    g[(size_t)fz_u32(&rd) % qk_n] = gv;
    if (!(isfinite(gv) && gv <= 0.0f)) bad_g = 1;
  }
  /* re-scan: an earlier hostile value may have been overwritten by a later one */
  bad_g = 0;
  for (size_t i = 0; i < qk_n; i++)
    if (!(isfinite(g[i]) && g[i] <= 0.0f)) bad_g = 1;
  double *ang = NULL;
  int bad_ang = 0;
  if (fz_bool(&rd) && r / 2 > 0) {
    ang = malloc(a_n * sizeof *ang);
    fz_fill_f64(&rd, ang, a_n, fz_bool(&rd) ? 3.0 : 1e7);
    bad_ang = fz_specials_f64(&rd, ang, a_n, NULL) && cfg.rotate != 0;
  }
  float *init = NULL;
  if (fz_bool(&rd)) {
    init = malloc(st_n * sizeof *init);
    fz_fill_f32(&rd, init, st_n, fz_bool(&rd) ? 1.0f : 100.0f);
  }
  int state_mode = fz_u8(&rd) % 3; /* 0: no final state, 1: separate, 2: in place */
  if (state_mode == 2 && !init) state_mode = 1;

  float *out[2], *fin[2], *init_copy[2];
  for (int c = 0; c < 2; c++) {
    out[c] = fz_canary_alloc(v_n * sizeof(float));
    init_copy[c] = NULL;
    fin[c] = NULL;
    if (init) {
      init_copy[c] = malloc(st_n * sizeof(float));
      memcpy(init_copy[c], init, st_n * sizeof(float));
    }
    if (state_mode == 1) fin[c] = fz_canary_alloc(st_n * sizeof(float));
    if (state_mode == 2) fin[c] = init_copy[c];
  }
  rove_status sc[2];
  for (int c = 0; c < 2; c++) {
    rove_gla_args ac = a;
    ac.q = q;
    ac.k = k;
    ac.v = v;
    ac.g = g;
    ac.angles = ang;
    ac.initial_state = init_copy[c];
    ac.final_state = fin[c];
    ac.out = out[c];
    sc[c] = c == 0 ? rove_gla_forward(plan, &ac) : rove_gla_recurrent(plan, &ac);
    fz_check_status(H, sc[c]);
    if (bad || bad_g || bad_ang) FZ_CHECK(H, sc[c] != ROVE_OK, "bad seq_len/cu/g/angles accepted");
    if (sc[c] != ROVE_OK) {
      FZ_CHECK(H, fz_untouched(out[c], v_n * sizeof(float)), "out written on failure");
      if (state_mode == 1)
        FZ_CHECK(H, fz_untouched(fin[c], st_n * sizeof(float)), "final state written on failure");
      if (state_mode == 2)
        FZ_CHECK(H, memcmp(fin[c], init, st_n * sizeof(float)) == 0,
                 "in-place state changed on failure");
    }
  }
  FZ_CHECK(H, sc[0] == sc[1], "forward and recurrent disagree on the status");
  if (sc[0] == ROVE_OK && isfinite(cfg.scale) && fabsf(cfg.scale) < 1e6f) {
    for (size_t i = 0; i < v_n; i++) {
      FZ_CHECK(H, isfinite(out[0][i]) && isfinite(out[1][i]), "finite inputs, non-finite out");
      double tol = 1e-3 * (1.0 + fabs(out[1][i])) * (1.0 + (init ? 1.0 : 0.0)) * a.seq_len;
      FZ_CHECK(H, fabs((double)out[0][i] - out[1][i]) <= tol, "forward != recurrent (out)");
    }
    if (fin[0])
      for (size_t i = 0; i < st_n; i++) {
        FZ_CHECK(H, isfinite(fin[0][i]) && isfinite(fin[1][i]), "non-finite final state");
        double tol = 1e-3 * (1.0 + fabs(fin[1][i])) * a.seq_len;
        FZ_CHECK(H, fabs((double)fin[0][i] - fin[1][i]) <= tol, "forward != recurrent (state)");
      }
  }
  /* the backward of the same call: the same verdict on bad input, gradients untouched on
   * failure, finite on success */
  {
    float *dout = fz_alloc(v_n * sizeof *dout), *dfin = fz_alloc(st_n * sizeof *dfin);
    fz_fill_f32(&rd, dout, v_n, 1.0f);
    fz_fill_f32(&rd, dfin, st_n, 1.0f);
    float *dq = fz_canary_alloc(qk_n * sizeof(float)), *dk = fz_canary_alloc(qk_n * sizeof(float));
    float *dg = fz_canary_alloc(qk_n * sizeof(float)), *dv = fz_canary_alloc(v_n * sizeof(float));
    float *ds = fz_canary_alloc(st_n * sizeof(float));
    double *da = ang ? fz_canary_alloc(a_n * sizeof(double)) : NULL;
    rove_gla_args ab = a;
    ab.q = q, ab.k = k, ab.v = v, ab.g = g, ab.angles = ang, ab.initial_state = init;
    ab.out = out[0];
    rove_gla_grads gr = {dout,
                         fz_bool(&rd) ? dfin : NULL,
                         dq,
                         dk,
                         dg,
                         dv,
                         fz_bool(&rd) ? ds : NULL,
                         ang && cfg.rotate ? da : NULL};
    const rove_status sb = rove_gla_backward(plan, &ab, &gr);
    fz_check_status(H, sb);
    if (bad || bad_g || bad_ang) FZ_CHECK(H, sb != ROVE_OK, "backward accepted bad input");
    if (sc[0] == ROVE_OK) FZ_CHECK(H, sb == ROVE_OK, "backward refused what forward took");
    if (sb != ROVE_OK) {
      FZ_CHECK(H,
               fz_untouched(dq, qk_n * sizeof(float)) && fz_untouched(dk, qk_n * sizeof(float)) &&
                   fz_untouched(dg, qk_n * sizeof(float)) &&
                   fz_untouched(dv, v_n * sizeof(float)) && fz_untouched(ds, st_n * sizeof(float)),
               "gradients written on failure");
    } else if (isfinite(cfg.scale) && fabsf(cfg.scale) < 1e6f) {
      for (size_t i = 0; i < qk_n; i++)
        FZ_CHECK(H, isfinite(dq[i]) && isfinite(dk[i]) && isfinite(dg[i]), "non-finite gradient");
      for (size_t i = 0; i < v_n; i++) FZ_CHECK(H, isfinite(dv[i]), "non-finite dv");
    }
    free(dout), free(dfin), free(dq), free(dk), free(dg), free(dv), free(ds), free(da);
  }
  for (int c = 0; c < 2; c++) {
    free(out[c]);
    if (state_mode == 1) free(fin[c]);
    free(init_copy[c]);
  }
  free(q);
  free(k);
  free(v);
  free(g);
  free(ang);
  free(init);
  rove_gla_plan_destroy(plan);
  return 0;
}
