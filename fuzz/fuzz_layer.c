/* SPDX-License-Identifier: MIT */
/* The attention layer with tiny weights: rove_layer_create (fuzzed d_model, NULL or real
 * biases, sometimes a NULL matrix), rove_layer_forward and a sequence of
 * rove_layer_forward_cached calls (prefill, then decode steps) over a cache of the same
 * plan.
 * Invariants: a valid status; y untouched on failure and the cache length unchanged; on
 * success finite outputs (finite weights and inputs); a prefill through the cache equals
 * rove_layer_forward with the same default positions, to float rounding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#define H "fuzz_layer"

static float *fz_matrix(fz_reader *rd, int64_t n, float amp) {
  float *m = malloc((size_t)(n > 0 ? n : 1) * sizeof *m);
  fz_fill_f32(rd, m, (size_t)n, amp);
  return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader rd;
  fz_init(&rd, data, size);
  rove_attention_config rc;
  rove_plan *plan = fz_plan_from_input(&rd, H, &rc);
  if (!plan) return 0;
  rove_status st;
  double bound = fz_logit_bound(&rc, 4.0);

  const int64_t qd = (int64_t)rc.n_heads * rc.head_dim, kd = (int64_t)rc.n_kv_heads * rc.head_dim;
  rove_layer_weights w;
  memset(&w, 0, sizeof w);
  w.d_model = fz_range(&rd, 1, 8);
  if (fz_u8(&rd) >= 250) w.d_model = fz_range(&rd, -1, 0);
  int64_t dm = w.d_model > 0 ? w.d_model : 1;
  float amp = 1.0f / sqrtf((float)dm);
  float *wq = fz_matrix(&rd, qd * dm, amp), *wk = fz_matrix(&rd, kd * dm, amp);
  float *wv = fz_matrix(&rd, kd * dm, amp), *wo = fz_matrix(&rd, dm * qd, amp);
  float *bq = fz_bool(&rd) ? fz_matrix(&rd, qd, 0.5f) : NULL;
  float *bk = fz_bool(&rd) ? fz_matrix(&rd, kd, 0.5f) : NULL;
  float *bv = fz_bool(&rd) ? fz_matrix(&rd, kd, 0.5f) : NULL;
  float *bo = fz_bool(&rd) ? fz_matrix(&rd, dm, 0.5f) : NULL;
  w.wq = wq;
  w.wk = wk;
  w.wv = fz_u8(&rd) >= 250 ? NULL : wv;
  w.wo = wo;
  w.bq = bq;
  w.bk = bk;
  w.bv = bv;
  w.bo = bo;
  rove_layer *layer = (rove_layer *)(uintptr_t)0x1;
  st = rove_layer_create(plan, &w, &layer);
  fz_check_status(H, st);
  if (w.d_model <= 0 || !w.wv) FZ_CHECK(H, st != ROVE_OK, "bad d_model / NULL weight accepted");
  /* the layer keeps its own copies: the caller's weights may go now */
  free(wq);
  free(wk);
  free(wv);
  free(wo);
  free(bq);
  free(bk);
  free(bv);
  free(bo);
  if (st != ROVE_OK) {
    FZ_CHECK(H, layer == (rove_layer *)(uintptr_t)0x1, "layer_create wrote *out on failure");
    rove_plan_destroy(plan);
    return 0;
  }

  int32_t batch = fz_range(&rd, 1, 2), n = fz_range(&rd, 1, 6);
  if (fz_u8(&rd) >= 250) n = fz_range(&rd, -1, 0);
  int64_t nn = n > 0 ? n : 1;
  size_t xn = (size_t)(batch * nn * dm);
  float *x = fz_matrix(&rd, (int64_t)xn, 4.0f), *y = fz_canary_alloc(xn * sizeof *y);
  int32_t *pos = NULL;
  if (fz_u8(&rd) >= 180) {
    pos = malloc((size_t)(batch * nn) * sizeof *pos);
    for (int64_t i = 0; i < batch * nn; i++) pos[i] = fz_pos(&rd);
  }
  st = rove_layer_forward(layer, batch, n, x, pos, y);
  fz_check_status(H, st);
  if (n <= 0) FZ_CHECK(H, st != ROVE_OK, "layer_forward: n <= 0 accepted");
  int check_finite = bound < 1e30;
  if (st != ROVE_OK) FZ_CHECK(H, fz_untouched(y, xn * sizeof *y), "layer_forward wrote y on failure");
  else if (check_finite)
    for (size_t i = 0; i < xn; i++) FZ_CHECK(H, isfinite(y[i]), "layer_forward: non-finite y");

  /* the cache: prefill with the same tokens (default positions), then decode steps */
  rove_kv_cache *cache = NULL;
  int32_t cap = fz_range(&rd, 1, 12);
  if (rove_kv_cache_create(plan, batch, cap, &cache) == ROVE_OK) {
    int steps = fz_range(&rd, 1, 4);
    for (int s = 0; s < steps; s++) {
      int32_t m = s == 0 ? n : fz_range(&rd, 1, 2);
      int64_t mm = m > 0 ? m : 1;
      size_t cn = (size_t)(batch * mm * dm);
      const float *cx = x;
      float *xs = NULL;
      if (s > 0) cx = xs = fz_matrix(&rd, (int64_t)cn, 4.0f);
      float *cy = fz_canary_alloc(cn * sizeof *cy);
      int32_t len0 = rove_kv_cache_length(cache);
      rove_status sc = rove_layer_forward_cached(layer, cache, m, cx, NULL, cy);
      fz_check_status(H, sc);
      if (m > 0 && (int64_t)len0 + m > cap)
        FZ_CHECK(H, sc == ROVE_ERR_SIZE_OVERFLOW, "cached forward past the capacity not SIZE_OVERFLOW");
      if (sc != ROVE_OK) {
        FZ_CHECK(H, fz_untouched(cy, cn * sizeof *cy), "forward_cached wrote y on failure");
        FZ_CHECK(H, rove_kv_cache_length(cache) == len0, "forward_cached changed the cache on failure");
      } else {
        FZ_CHECK(H, rove_kv_cache_length(cache) == len0 + m, "forward_cached: cache length");
        if (check_finite)
          for (size_t i = 0; i < cn; i++) FZ_CHECK(H, isfinite(cy[i]), "forward_cached: non-finite y");
        if (s == 0 && !pos && st == ROVE_OK && bound < 50) /* no near-ties in softmax */
          for (size_t i = 0; i < cn; i++) {
            double tol = 2e-4 * (1.0 + fabs(y[i]));
            FZ_CHECK(H, fabs((double)cy[i] - y[i]) <= tol, "cached prefill != layer_forward");
          }
      }
      free(cy);
      free(xs);
      if (sc != ROVE_OK && s == 0) break;
    }
    rove_kv_cache_destroy(cache);
  }
  free(x);
  free(y);
  free(pos);
  rove_layer_destroy(layer);
  rove_plan_destroy(plan);
  return 0;
}
