/* SPDX-License-Identifier: MIT */
/* rove_attention_backward with hostile arguments (fuzz_attention calls it only with the
 * valid, dense arguments of a successful forward): forward and gradient strides dense,
 * padded, too small, negative or overflowing; out and lse from a forward or garbage;
 * positions and explicit angles; angle gradients with and without angles; gradients that
 * alias q, k, out, lse, dout, positions or angles; a NULL lse.
 * Invariants: a valid status; every bad call refused with no gradient written; a
 * successful call writes every gradient element and never a stride gap. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#define H "fuzz_backward"

#define HUGE_STRIDE (INT64_MAX / 2) /* its byte extent overflows with a second row */

/* A row stride: 0 (dense), the dense width plus 0..2, one too small, -1 or HUGE_STRIDE. */
static int64_t stride_of(fz_reader *r, int64_t dense) {
  uint8_t b = fz_u8(r);
  if (b < 180) return 0;
  if (b < 240) return dense + (b % 3);
  if (b < 250) return dense - 1; /* too small */
  return b % 2 ? -1 : HUGE_STRIDE;
}

/* Whether librove must refuse stride s over rows of width w: too small (negative
 * included) always, HUGE_STRIDE when a second row makes the extent overflow. */
static int bad_stride(int64_t s, int64_t w, int64_t rows) {
  return s != 0 && (s < w || (s == HUGE_STRIDE && rows > 1));
}

/* The stride the buffers are laid out with: s when it is usable, else dense. */
static int64_t layout_stride(int64_t s, int64_t w) {
  return s == 0 || s < w || s == HUGE_STRIDE ? w : s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader rd;
  fz_init(&rd, data, size);
  rove_attention_config rc;
  rove_plan *plan = fz_plan_from_input(&rd, H, &rc);
  if (!plan) return 0;
  const int64_t hq = rc.n_heads, hkv = rc.n_kv_heads, d = rc.head_dim;
  const int64_t half = (rc.rope.rotary_dim ? rc.rope.rotary_dim : rc.head_dim) / 2;
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = fz_range(&rd, 1, 2);
  a.q_len = fz_range(&rd, 1, 4);
  a.kv_len = fz_range(&rd, 1, 5);
  if (fz_u8(&rd) > 250) a.q_len = 0;
  const int64_t nq = a.q_len > 0 ? a.q_len : 1, nk = a.kv_len, qrows = a.batch * nq, krows = a.batch * nk;
  a.q_stride = stride_of(&rd, hq * d);
  a.k_stride = stride_of(&rd, hkv * d);
  a.v_stride = stride_of(&rd, hkv * d);
  a.out_stride = stride_of(&rd, hq * d);
  int bad_fwd_stride = 0;
  int64_t s[4] = {a.q_stride, a.k_stride, a.v_stride, a.out_stride}, w[4] = {hq * d, hkv * d, hkv * d, hq * d};
  int64_t rs[4];
  for (int i = 0; i < 4; i++) {
    if (bad_stride(s[i], w[i], i == 0 || i == 3 ? qrows : krows)) bad_fwd_stride = 1;
    rs[i] = layout_stride(s[i], w[i]);
  }
  size_t eq = (size_t)((qrows - 1) * rs[0] + w[0]), ek = (size_t)((krows - 1) * rs[1] + w[1]);
  size_t ev = (size_t)((krows - 1) * rs[2] + w[2]), eo = (size_t)((qrows - 1) * rs[3] + w[3]);
  float *q = fz_alloc(eq * 4), *k = fz_alloc(ek * 4), *v = fz_alloc(ev * 4), *out = fz_alloc(eo * 4);
  float *lse = fz_alloc((size_t)(qrows * hq) * 4);
  fz_fill_f32(&rd, q, eq, 2.0f);
  fz_fill_f32(&rd, k, ek, 2.0f);
  fz_fill_f32(&rd, v, ev, 2.0f);
  fz_specials_f32(&rd, k, ek, NULL);
  int32_t *qp = NULL, *kp = NULL;
  if (fz_bool(&rd)) qp = fz_pos_array(&rd, qrows), kp = fz_pos_array(&rd, krows);
  double *qa = NULL, *ka = NULL;
  const int angles = fz_u8(&rd) >= 200;
  if (angles) {
    qa = malloc((size_t)(qrows * hkv * half) * 8 + 8), ka = malloc((size_t)(krows * hkv * half) * 8 + 8);
    fz_fill_f64(&rd, qa, (size_t)(qrows * hkv * half), 4.0);
    fz_fill_f64(&rd, ka, (size_t)(krows * hkv * half), 4.0);
  }
  a.q = q, a.k = k, a.v = v, a.out = out, a.lse = lse, a.q_pos = qp, a.kv_pos = kp;
  a.q_angles = qa, a.kv_angles = ka;
  if (!bad_fwd_stride && a.q_len > 0 && fz_u8(&rd) < 220) {
    rove_status fs = rove_attention_forward(plan, &a);
    fz_check_status(H, fs);
  } else {
    fz_fill_f32(&rd, out, eo, 2.0f);
    fz_fill_f32(&rd, lse, (size_t)(qrows * hq), 5.0f);
  }
  /* gradients */
  rove_attention_grads g;
  memset(&g, 0, sizeof g);
  g.dout_stride = stride_of(&rd, hq * d);
  g.dq_stride = stride_of(&rd, hq * d);
  g.dk_stride = stride_of(&rd, hkv * d);
  g.dv_stride = stride_of(&rd, hkv * d);
  int bad_g_stride = 0;
  int64_t gs[4] = {g.dout_stride, g.dq_stride, g.dk_stride, g.dv_stride}, gr[4];
  for (int i = 0; i < 4; i++) {
    int64_t wi = i < 2 ? hq * d : hkv * d;
    if (bad_stride(gs[i], wi, i < 2 ? qrows : krows)) bad_g_stride = 1;
    gr[i] = layout_stride(gs[i], wi);
  }
  size_t edo = (size_t)((qrows - 1) * gr[0] + hq * d), edq = (size_t)((qrows - 1) * gr[1] + hq * d);
  size_t edk = (size_t)((krows - 1) * gr[2] + hkv * d), edv = (size_t)((krows - 1) * gr[3] + hkv * d);
  float *dout = fz_alloc(edo * 4);
  fz_fill_f32(&rd, dout, edo, 1.0f);
  float *dq = fz_canary_alloc(edq * 4), *dk = fz_canary_alloc(edk * 4), *dv = fz_canary_alloc(edv * 4);
  const size_t naq = (size_t)(qrows * hkv * half), nak = (size_t)(krows * hkv * half);
  double *dqa = NULL, *dka = NULL;
  if (fz_bool(&rd)) dqa = fz_canary_alloc(naq * 8);
  if (fz_bool(&rd)) dka = fz_canary_alloc(nak * 8);
  g.dout = dout, g.dq = dq, g.dk = dk, g.dv = dv, g.d_q_angles = dqa, g.d_kv_angles = dka;
  float *dl = NULL; /* the LSE's upstream gradient, dense [batch][hq][q_len] */
  if (fz_bool(&rd)) {
    dl = fz_alloc((size_t)(qrows * hq) * 4);
    fz_fill_f32(&rd, dl, (size_t)(qrows * hq), 1.0f);
  }
  g.d_lse = dl;
  /* aliasing */
  int alias = 0;
  const uint8_t am = fz_u8(&rd);
  rove_attention_args a2 = a;
  switch (am % 16) {
    case 1: g.dq = q, alias = edq * 4 <= eq * 4 ? 1 : 0; if (!alias) g.dq = dq; break;
    case 2: if (edv <= edk) g.dv = dk, alias = 1; break;
    case 3: if (edq <= edo) g.dq = (float *)dout, alias = 1; break;
    case 4: a2.lse = NULL, alias = 1; break;
    case 5: if (edk * 4 <= (size_t)(qrows * hq) * 4) g.dk = lse, alias = 1; break;
    case 6: if (dqa && edq * 4 <= naq * 8) g.dq = (float *)(void *)dqa, alias = 1; break;
    case 7: if (qp && edq * 4 <= (size_t)qrows * 4) g.dq = (float *)(void *)qp, alias = 1; break;
    case 8: if (edk <= eo) g.dk = out, alias = 1; break;
    case 9: if (qrows * hq > 0) g.d_lse = dq, alias = 1; break; /* an output as d_lse */
    default: break;
  }
  const int angle_grad_without = (dqa || dka) && !angles;
  rove_status st = rove_attention_backward(plan, &a2, &g);
  fz_check_status(H, st);
  if (alias || angle_grad_without || bad_g_stride || bad_fwd_stride || a.q_len <= 0)
    FZ_CHECK(H, st != ROVE_OK, "backward accepted a bad call");
  const int own_dq = g.dq == dq, own_dk = g.dk == dk, own_dv = g.dv == dv;
  if (st != ROVE_OK) {
    if (own_dq) FZ_CHECK(H, fz_untouched(dq, edq * 4), "dq written on failure");
    if (own_dk) FZ_CHECK(H, fz_untouched(dk, edk * 4), "dk written on failure");
    if (own_dv) FZ_CHECK(H, fz_untouched(dv, edv * 4), "dv written on failure");
    if (dqa && g.dq != (float *)(void *)dqa) FZ_CHECK(H, fz_untouched(dqa, naq * 8), "dqa written on failure");
    if (dka) FZ_CHECK(H, fz_untouched(dka, nak * 8), "dka written on failure");
  } else {
    for (int64_t r = 0; r < qrows; r++)
      for (int64_t x = 0; x < hq * d; x++) FZ_CHECK(H, !fz_is_canary_f32(dq[r * gr[1] + x]), "dq element unwritten");
    for (int64_t r = 0; r < krows; r++)
      for (int64_t x = 0; x < hkv * d; x++) {
        FZ_CHECK(H, !fz_is_canary_f32(dk[r * gr[2] + x]), "dk element unwritten");
        FZ_CHECK(H, !fz_is_canary_f32(dv[r * gr[3] + x]), "dv element unwritten");
      }
    for (int64_t r = 0; r + 1 < qrows; r++)
      if (gr[1] > hq * d) FZ_CHECK(H, fz_untouched(dq + r * gr[1] + hq * d, (size_t)(gr[1] - hq * d) * 4), "dq gap written");
  }
  free(q), free(k), free(v), free(out), free(lse), free(qp), free(kp), free(qa), free(ka);
  free(dout), free(dq), free(dk), free(dv), free(dqa), free(dka), free(dl);
  rove_plan_destroy(plan);
  return 0;
}
