/* SPDX-License-Identifier: MIT */
/* rove_rotate and rove_rotate_angles with fuzzed plans (pairing, placement, scaling),
 * token strides, positions (int32 edges) and angles.
 * Invariants: a valid status; x untouched on failure (and for non-finite angles, which
 * must be rejected); on success the stride gaps and the dims outside the rotary block
 * (placement FIRST: r..d-1, LAST: 0..d-r-1) are unchanged, every pair keeps its norm, and
 * rotating back (inverse) returns x to float rounding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#define H "fuzz_rotate"

/* Pair k of the rotary block: dims (lo, hi) relative to the block start. */
static void pair_dims(rove_pairing pairing, int32_t r, int32_t k, int32_t *lo, int32_t *hi) {
  if (pairing == ROVE_PAIRING_INTERLEAVED) {
    *lo = 2 * k;
    *hi = 2 * k + 1;
  } else {
    *lo = k;
    *hi = k + r / 2;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader rd;
  fz_init(&rd, data, size);
  rove_attention_config rc;
  rove_plan *plan = fz_plan_from_input(&rd, H, &rc);
  if (!plan) return 0;
  rove_status st;

  const int32_t d = rc.head_dim, r = rc.rope.rotary_dim > 0 ? rc.rope.rotary_dim : d;
  const int32_t off = rc.rope.placement == ROVE_ROTARY_LAST ? d - r : 0;
  int32_t n_tokens = fz_range(&rd, 1, 6);
  int32_t n_heads = fz_range(&rd, 1, 4);
  if (fz_u8(&rd) >= 250) n_tokens = fz_range(&rd, -1, 0);
  if (fz_u8(&rd) >= 250) n_heads = fz_range(&rd, -1, 0);
  int bad = n_tokens <= 0 || n_heads <= 0;
  int64_t nt = bad ? 1 : n_tokens, nh = bad ? 1 : n_heads, width = nh * d;
  uint8_t sb = fz_u8(&rd);
  int64_t stride = sb < 140 ? 0 : sb < 240 ? width + sb % 5 : width - 1;
  if (stride && stride < width) bad = 1;
  int64_t s = bad || !stride ? width : stride;
  size_t n = (size_t)((nt - 1) * s + width);
  float *x = fz_canary_alloc(n * sizeof *x);
  /* rows hold values, the gaps keep the canary */
  for (int64_t t = 0; t < nt; t++) fz_fill_f32(&rd, x + t * s, (size_t)width, 3.0f);
  float *x0 = malloc(n * sizeof *x0);
  memcpy(x0, x, n * sizeof *x);

  int32_t inverse = fz_u8(&rd) >= 245 ? fz_range(&rd, -1, 2) : fz_bool(&rd);
  if (inverse != 0 && inverse != 1) bad = 1;
  int use_angles = fz_bool(&rd);
  int32_t *pos = NULL;
  double *angles = NULL;
  int32_t angle_heads = 1;
  int bad_angle = 0;
  if (!use_angles) {
    if (fz_bool(&rd)) {
      pos = malloc((size_t)nt * sizeof *pos);
      for (int64_t t = 0; t < nt; t++) pos[t] = fz_pos(&rd);
    }
    st = rove_rotate(plan, x, n_tokens, n_heads, stride, pos, inverse);
  } else {
    static const int32_t ah[] = {1, 1, 2, 4, 3, 0, -1, 1};
    angle_heads = fz_pick_i32(&rd, ah, 8);
    if (angle_heads <= 0 || nh % angle_heads) bad = 1;
    int64_t na = (int64_t)nt * (angle_heads > 0 ? angle_heads : 1) * (r / 2);
    angles = malloc((size_t)na * sizeof *angles);
    fz_fill_f64(&rd, angles, (size_t)na, fz_bool(&rd) ? 10.0 : 1e9);
    bad_angle = fz_specials_f64(&rd, angles, (size_t)na, NULL);
    st = rove_rotate_angles(plan, x, n_tokens, n_heads, stride, angles, angle_heads, inverse);
  }
  fz_check_status(H, st);
  if (bad) FZ_CHECK(H, st != ROVE_OK, "invalid size/stride/inverse/angle_heads accepted");
  if (bad_angle) FZ_CHECK(H, st != ROVE_OK, "a non-finite angle was accepted");
  if (st != ROVE_OK) {
    FZ_CHECK(H, memcmp(x, x0, n * sizeof *x) == 0, "x changed on failure");
  } else {
    for (int64_t t = 0; t < nt; t++) {
      if (t + 1 < nt && s > width)
        FZ_CHECK(H, fz_untouched(x + t * s + width, (size_t)(s - width) * sizeof *x),
                 "stride gap written");
      for (int64_t h = 0; h < nh; h++) {
        const float *y = x + t * s + h * d, *y0 = x0 + t * s + h * d;
        for (int32_t e = 0; e < d; e++) {
          FZ_CHECK(H, isfinite(y[e]), "finite x gave a non-finite rotation");
          if (e < off || e >= off + r) FZ_CHECK(H, y[e] == y0[e], "a pass-through dim changed");
        }
        for (int32_t kk = 0; kk < r / 2; kk++) {
          int32_t lo, hi;
          pair_dims(rc.rope.pairing, r, kk, &lo, &hi);
          double n0 = (double)y0[off + lo] * y0[off + lo] + (double)y0[off + hi] * y0[off + hi];
          double n1 = (double)y[off + lo] * y[off + lo] + (double)y[off + hi] * y[off + hi];
          FZ_CHECK(H, fabs(n1 - n0) <= 1e-5 * (n0 + 1e-30) + 1e-30, "a pair lost its norm");
        }
      }
    }
    /* back: the inverse rotation returns x */
    rove_status back = use_angles ? rove_rotate_angles(plan, x, n_tokens, n_heads, stride,
                                                       angles, angle_heads, !inverse)
                                  : rove_rotate(plan, x, n_tokens, n_heads, stride, pos, !inverse);
    FZ_CHECK(H, back == ROVE_OK, "the inverse rotation failed");
    for (size_t i = 0; i < n; i++)
      FZ_CHECK(H, fabsf(x[i] - x0[i]) <= 1e-5f * 8.0f || (fz_is_canary_f32(x0[i]) && x[i] == x0[i]),
               "rotate then inverse-rotate did not return x");
  }
  free(x);
  free(x0);
  free(pos);
  free(angles);
  rove_plan_destroy(plan);
  return 0;
}
