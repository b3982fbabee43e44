/* SPDX-License-Identifier: MIT */
/* rove_selective_phase with fuzzed options (projection low-rank / per head and its rank,
 * skip_conv, conv width 1..ROVE_PHASE_MAX_CONV_WIDTH and out of range, activation, conv
 * bias, exp bias, the four gates and their rank), tiny finite weights, sometimes a
 * required weight missing or an unused one set, strides and conv states.
 * Invariants: a valid status; a required weight NULL is rejected; phi and conv_state
 * untouched on failure; on success finite phi, and feeding the tokens in two pieces with
 * the conv state gives the same phi and final state bit for bit, and so does the batch
 * as packed sequences (rove_selective_phase_packed). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#define H "fuzz_selective_phase"
#define MAX_WEIGHTS 12

static float *weights[MAX_WEIGHTS];
static int n_weights;

static const float *fz_weight(fz_reader *rd, int64_t n, float amp) {
  float *w = malloc((size_t)(n > 0 ? n : 1) * sizeof *w);
  fz_fill_f32(rd, w, (size_t)(n > 0 ? n : 0), amp);
  weights[n_weights++] = w;
  return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader rd;
  fz_init(&rd, data, size);
  n_weights = 0;
  int32_t nh = fz_range(&rd, 1, 2), in_dim = fz_range(&rd, 1, 4), np = fz_range(&rd, 1, 4);
  rove_selective_phase_weights w;
  rove_selective_phase_weights_init(&w, nh, in_dim, np);
  if (fz_u8(&rd) >= 250) w.in_dim = fz_range(&rd, -1, 0);
  const int64_t d = (int64_t)nh * in_dim;
  int missing = 0; /* a required weight left NULL */
  static const float eps[] = {1e-6f, 1e-12f, 1.0f, 0.0f, -1.0f, NAN};
  if (fz_u8(&rd) >= 220) w.norm_eps = eps[fz_u8(&rd) % 6];

  w.projection = (rove_phase_projection)(fz_u8(&rd) >= 250 ? 2 : fz_range(&rd, 0, 1));
  if (w.projection == ROVE_PHASE_PROJ_LOW_RANK) {
    if (fz_bool(&rd)) w.proj_rank = fz_range(&rd, 0, 4);
    int64_t rk = w.proj_rank > 0 ? w.proj_rank : 1;
    if (fz_u8(&rd) < 250) w.proj_down = fz_weight(&rd, rk * d, 1.0f); else missing = 1;
    if (fz_u8(&rd) < 250) w.proj_up = fz_weight(&rd, (int64_t)nh * np * rk, 1.0f); else missing = 1;
  } else {
    if (fz_u8(&rd) < 250) w.proj_w = fz_weight(&rd, (int64_t)nh * np * in_dim, 1.0f); else missing = 1;
    if (fz_bool(&rd)) w.proj_gain = fz_weight(&rd, nh, 2.0f);
  }
  w.skip_conv = fz_u8(&rd) >= 200 ? (fz_u8(&rd) >= 250 ? 2 : 1) : 0;
  if (!w.skip_conv) {
    static const int32_t widths[] = {4, 4, 1, 2, 3, 5, 8, ROVE_PHASE_MAX_CONV_WIDTH, 0,
                                     ROVE_PHASE_MAX_CONV_WIDTH + 1};
    w.conv_width = fz_pick_i32(&rd, widths, 10);
    if (fz_bool(&rd)) w.conv_act = (rove_phase_activation)(fz_u8(&rd) >= 250 ? 2 : 1);
    int64_t cw = w.conv_width > 0 ? w.conv_width : 1;
    if (fz_u8(&rd) < 250) w.conv_w = fz_weight(&rd, (int64_t)nh * np * cw, 1.0f); else missing = 1;
    if (fz_bool(&rd)) w.conv_b = fz_weight(&rd, (int64_t)nh * np, 1.0f);
  }
  if (fz_bool(&rd)) w.exp_bias = fz_weight(&rd, (int64_t)nh * np, 2.0f);
  w.gate = (rove_phase_gate)(fz_u8(&rd) >= 250 ? 4 : fz_range(&rd, 0, 3));
  if (w.gate == ROVE_PHASE_GATE_LOW_RANK || w.gate == ROVE_PHASE_GATE_GLA) {
    if (fz_bool(&rd)) w.gate_rank = fz_range(&rd, 0, 3);
    int64_t gr = w.gate_rank > 0 ? w.gate_rank : 1;
    if (fz_u8(&rd) < 250) w.gate_down = fz_weight(&rd, gr * d, 1.0f); else missing = 1;
    int64_t rows = w.gate == ROVE_PHASE_GATE_GLA ? (int64_t)nh * np : nh;
    if (fz_u8(&rd) < 250) w.gate_w = fz_weight(&rd, rows * gr, 1.0f); else missing = 1;
    if (fz_bool(&rd)) w.gate_b = fz_weight(&rd, rows, 1.0f);
  } else if (w.gate == ROVE_PHASE_GATE_STANDARD) {
    if (fz_u8(&rd) < 250) w.gate_w = fz_weight(&rd, (int64_t)nh * d, 1.0f); else missing = 1;
    if (fz_bool(&rd)) w.gate_b = fz_weight(&rd, nh, 1.0f);
  }
  /* an unused weight set: must be rejected (never silently ignored) */
  int unused = 0;
  if (fz_u8(&rd) >= 245) {
    unused = 1;
    if (w.projection == ROVE_PHASE_PROJ_LOW_RANK) w.proj_w = fz_weight(&rd, (int64_t)nh * np * in_dim, 1.0f);
    else w.proj_down = fz_weight(&rd, 16 * d, 1.0f);
  }

  int32_t batch = fz_range(&rd, 1, 2), seq = fz_range(&rd, 1, 10);
  if (fz_u8(&rd) >= 250) seq = fz_range(&rd, -1, 0);
  int64_t ns = seq > 0 ? seq : 1;
  uint8_t sb = fz_u8(&rd);
  int64_t stride = sb < 170 ? 0 : sb < 245 ? d + sb % 3 : d - 1;
  int bad_stride = stride != 0 && stride < d;
  int64_t s = stride && !bad_stride ? stride : d;
  size_t xn = (size_t)((batch * ns - 1) * s + d);
  float *x = malloc(xn * sizeof *x);
  fz_fill_f32(&rd, x, xn, fz_bool(&rd) ? 2.0f : 1e-20f);
  size_t pn = (size_t)(batch * ns * nh * np);
  float *phi = fz_canary_alloc(pn * sizeof *phi);
  int32_t sl = rove_selective_phase_state_len(&w);
  int use_state = fz_bool(&rd) && sl > 0;
  size_t cn = (size_t)(batch * nh * np) * (size_t)(sl > 0 ? sl : 1);
  float *state = NULL, *state0 = NULL;
  if (use_state) {
    state = malloc(cn * sizeof *state);
    fz_fill_f32(&rd, state, cn, 1.0f);
    state0 = malloc(cn * sizeof *state0);
    memcpy(state0, state, cn * sizeof *state);
  }
  rove_status st = rove_selective_phase(&w, batch, seq, x, stride, state, phi);
  fz_check_status(H, st);
  if (missing || unused || bad_stride || seq <= 0 || w.in_dim <= 0)
    FZ_CHECK(H, st != ROVE_OK, "a missing/unused weight, bad stride or size was accepted");
  if (st != ROVE_OK) {
    FZ_CHECK(H, fz_untouched(phi, pn * sizeof *phi), "phi written on failure");
    if (state) FZ_CHECK(H, memcmp(state, state0, cn * sizeof *state) == 0, "conv_state changed on failure");
  } else {
    for (size_t i = 0; i < pn; i++) FZ_CHECK(H, isfinite(phi[i]), "finite weights gave non-finite phi");
    /* two pieces with the state carried: the same bits (batch 1 keeps the split simple) */
    if (batch == 1 && ns >= 2 && sl >= 0) {
      int32_t s1 = fz_range(&rd, 1, seq - 1);
      float *st2 = fz_alloc(cn * sizeof *st2);
      if (state0) memcpy(st2, state0, cn * sizeof *st2);
      float *phi2 = malloc(pn * sizeof *phi2);
      size_t n1 = (size_t)s1 * (size_t)(nh * np);
      rove_status a1 = rove_selective_phase(&w, 1, s1, x, stride, st2, phi2);
      rove_status a2 = rove_selective_phase(&w, 1, seq - s1, x + (size_t)s1 * (size_t)s, stride,
                                            st2, phi2 + n1);
      FZ_CHECK(H, a1 == ROVE_OK && a2 == ROVE_OK, "pieces failed where one call passed");
      FZ_CHECK(H, memcmp(phi2, phi, pn * sizeof *phi) == 0, "pieces differ from one call");
      if (state && sl > 0)
        FZ_CHECK(H, memcmp(st2, state, cn * sizeof *state) == 0, "pieces' final state differs");
      free(st2);
      free(phi2);
    }
    /* the batch rows as packed sequences (rove_selective_phase_packed): the same bits */
    {
      const int32_t cu[3] = {0, (int32_t)ns, (int32_t)(2 * ns)};
      float *st3 = state0 ? malloc(cn * sizeof *st3) : NULL;
      if (st3) memcpy(st3, state0, cn * sizeof *st3);
      float *phi3 = malloc(pn * sizeof *phi3);
      rove_status a3 = rove_selective_phase_packed(&w, batch, cu, x, stride, st3, phi3);
      FZ_CHECK(H, a3 == ROVE_OK, "packed refused what the batch call took");
      if (a3 == ROVE_OK) {
        FZ_CHECK(H, memcmp(phi3, phi, pn * sizeof *phi) == 0, "packed phi differs");
        if (st3 && sl > 0)
          FZ_CHECK(H, memcmp(st3, state, cn * sizeof *state) == 0, "packed state differs");
      }
      free(st3);
      free(phi3);
    }
  }
  free(x);
  free(phi);
  free(state);
  free(state0);
  for (int i = 0; i < n_weights; i++) free(weights[i]);
  return 0;
}
