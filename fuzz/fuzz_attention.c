/* SPDX-License-Identifier: MIT */
/* Plan creation from an arbitrary config (every rope field, 0.2 ones included), then
 * rove_attention_forward on small fuzzed shapes, strides, positions (int32 edges),
 * windows, softcaps, explicit angles, attention sinks (finite, huge or not finite) and
 * LSE, with NaN/Inf/huge values in K and V rows.
 * Invariants: a valid status; outputs untouched on failure; stride gaps never written; a
 * query with no visible key gets 0 and LSE -inf (with sinks: exactly its head's sink); a
 * non-finite sink is refused; K/V laid out again with their heads apart (head and batch
 * strides) give the same bits, bad strides a refusal; a query whose visible keys are finite
 * (and whose logits cannot overflow) gets a finite output and LSE; rove_plan_config works
 * for every plan. Then rove_attention_backward of a successful forward with an LSE: it
 * succeeds, writes every gradient element (d_sinks too, with sinks), gives 0 to fully
 * masked queries and unseen keys, and finite gradients for finite inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#define H "fuzz_attention"

static int64_t fz_stride(fz_reader *r, int64_t dense) {
  uint8_t b = fz_u8(r);
  if (b < 150) return 0;
  if (b < 230) return dense + (b % 4);
  if (b < 240) return dense - 1; /* too small: rejected */
  if (b < 250) return -1;
  return INT64_MAX;
}

/* Exact element count of a [rows][width] tensor with a token stride (0 = dense). */
static size_t fz_extent(int64_t rows, int64_t width, int64_t stride) {
  int64_t s = stride > width ? stride : width;
  return rows > 0 ? (size_t)((rows - 1) * s + width) : 0;
}

static int32_t *fz_positions(fz_reader *r, int64_t n) {
  if (fz_u8(r) < 100) return NULL;
  int32_t *p = fz_alloc((size_t)n * sizeof *p);
  int mode = fz_u8(r) % 4;
  int32_t base = fz_pos(r);
  for (int64_t i = 0; i < n; i++) {
    if (mode == 0) p[i] = fz_pos(r);
    else if (mode == 1) p[i] = (int32_t)((int64_t)base + i > INT32_MAX ? INT32_MAX : base + i);
    else if (mode == 2) p[i] = (int32_t)i;
    else p[i] = (int32_t)(i % 3) - 1;
  }
  return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader rd;
  fz_init(&rd, data, size);
  rove_attention_config rc;
  rove_plan *plan = fz_plan_from_input(&rd, H, &rc);
  if (!plan) return 0;
  rove_status st;
  FZ_CHECK(H, rove_plan_threads(plan) == 1, "plan does not run the 1 thread it was given");
  const double amp = 2.0;
  double bound = fz_logit_bound(&rc, amp);

  const int64_t hq = rc.n_heads, hkv = rc.n_kv_heads, d = rc.head_dim;
  const int32_t half = (rc.rope.rotary_dim > 0 ? rc.rope.rotary_dim : rc.head_dim) / 2;
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = fz_range(&rd, 1, 2);
  a.q_len = fz_range(&rd, 1, 6);
  a.kv_len = fz_range(&rd, 1, 9);
  if (fz_u8(&rd) >= 250) a.q_len = fz_range(&rd, -1, 0);
  if (fz_u8(&rd) >= 250) a.kv_len = fz_range(&rd, -1, 0);
  int bad_size = a.q_len <= 0 || a.kv_len <= 0;
  int64_t nq = bad_size ? 1 : a.q_len, nk = bad_size ? 1 : a.kv_len;
  int64_t qrows = a.batch * nq, krows = a.batch * nk;
  a.q_stride = fz_stride(&rd, hq * d);
  a.k_stride = fz_stride(&rd, hkv * d);
  a.v_stride = fz_stride(&rd, hkv * d);
  a.out_stride = fz_stride(&rd, hq * d);
  /* A stride below the dense width is invalid; INT64_MAX is valid for one row (nothing
   * follows it) and an overflow for more. */
  int bad_stride = (a.q_stride && a.q_stride < hq * d) || (a.k_stride && a.k_stride < hkv * d) ||
                   (a.v_stride && a.v_stride < hkv * d) ||
                   (a.out_stride && a.out_stride < hq * d) ||
                   (qrows > 1 && (a.q_stride == INT64_MAX || a.out_stride == INT64_MAX)) ||
                   (krows > 1 && (a.k_stride == INT64_MAX || a.v_stride == INT64_MAX));
  /* Buffers of exactly the extent the strides give (dense extent for invalid strides). */
#define FZ_USE(s) (bad_stride || (s) == INT64_MAX ? 0 : (s))
  int64_t qs = FZ_USE(a.q_stride), ks = FZ_USE(a.k_stride);
  int64_t vs = FZ_USE(a.v_stride), os = FZ_USE(a.out_stride);
#undef FZ_USE
  size_t q_n = fz_extent(qrows, hq * d, qs), k_n = fz_extent(krows, hkv * d, ks);
  size_t v_n = fz_extent(krows, hkv * d, vs), o_n = fz_extent(qrows, hq * d, os);
  float *q = fz_alloc(q_n * sizeof *q), *k = fz_alloc(k_n * sizeof *k);
  float *v = fz_alloc(v_n * sizeof *v);
  float *out = fz_canary_alloc(o_n * sizeof *out);
  fz_fill_f32(&rd, q, q_n, (float)amp);
  fz_fill_f32(&rd, k, k_n, (float)amp);
  fz_fill_f32(&rd, v, v_n, (float)amp);
  /* NaN/Inf/3e38 in K and V: remember which key rows hold one. */
  uint8_t *khit = fz_alloc(k_n), *vhit = fz_alloc(v_n);
  int nspecial = fz_specials_f32(&rd, k, k_n, khit) + fz_specials_f32(&rd, v, v_n, vhit);
  uint8_t *bad_key = fz_alloc((size_t)krows); /* [batch][kv_len]: K or V row not finite */
  if (nspecial) {
    int64_t kst = ks ? ks : hkv * d, vst = vs ? vs : hkv * d;
    for (size_t i = 0; i < k_n; i++)
      if (khit[i]) bad_key[i / (size_t)kst] = 1;
    for (size_t i = 0; i < v_n; i++)
      if (vhit[i]) bad_key[i / (size_t)vst] = 1;
  }
  int32_t *q_pos = fz_positions(&rd, qrows), *kv_pos = fz_positions(&rd, krows);
  float *lse = NULL;
  size_t lse_n = (size_t)(a.batch * hq * nq);
  if (fz_bool(&rd)) lse = fz_canary_alloc(lse_n * sizeof *lse);
  double *q_ang = NULL, *kv_ang = NULL;
  size_t qa_n = (size_t)(qrows * hkv * half), ka_n = (size_t)(krows * hkv * half);
  int ang_mode = fz_u8(&rd) % 8; /* 0: both, 1: only q (rejected), else none */
  int bad_angle = 0;
  if (ang_mode <= 1 && half > 0) {
    q_ang = fz_alloc(qa_n * sizeof *q_ang);
    fz_fill_f64(&rd, q_ang, qa_n, fz_bool(&rd) ? 4.0 : 1e6);
    bad_angle |= fz_specials_f64(&rd, q_ang, qa_n, NULL);
    if (ang_mode == 0) {
      kv_ang = fz_alloc(ka_n * sizeof *kv_ang);
      fz_fill_f64(&rd, kv_ang, ka_n, 4.0);
      bad_angle |= fz_specials_f64(&rd, kv_ang, ka_n, NULL);
    }
  }
  a.q = q;
  a.k = k;
  a.v = v;
  a.out = out;
  a.q_pos = q_pos;
  a.kv_pos = kv_pos;
  a.lse = lse;
  a.q_angles = q_ang;
  a.kv_angles = kv_ang;
  float *sinks = NULL; /* one logit per query head: small, huge, or NaN / Inf */
  int bad_sink = 0;
  if (fz_u8(&rd) < 80) {
    sinks = fz_alloc((size_t)hq * sizeof *sinks);
    fz_fill_f32(&rd, sinks, (size_t)hq, fz_bool(&rd) ? 4.0f : 1e30f);
    fz_specials_f32(&rd, sinks, (size_t)hq, NULL); /* NaN, Inf or 3e38 (finite) */
    for (int64_t h = 0; h < hq; h++) bad_sink |= !isfinite(sinks[h]);
  }
  a.sinks = sinks;
  if (fz_u8(&rd) >= 252) a.v = NULL; /* a NULL tensor */

  st = rove_attention_forward(plan, &a);
  fz_check_status(H, st);
  if (bad_size || bad_stride || a.v == NULL || (q_ang && !kv_ang))
    FZ_CHECK(H, st != ROVE_OK, "an invalid size/stride/NULL/angle pairing was accepted");
  if (bad_angle) FZ_CHECK(H, st != ROVE_OK, "a non-finite angle was accepted");
  if (bad_sink) FZ_CHECK(H, st != ROVE_OK, "a non-finite sink was accepted");
  if (st != ROVE_OK) {
    FZ_CHECK(H, fz_untouched(out, o_n * sizeof *out), "out written on failure");
    if (lse) FZ_CHECK(H, fz_untouched(lse, lse_n * sizeof *lse), "lse written on failure");
  } else {
    int64_t ost = os ? os : hq * d;
    for (int64_t b = 0; b < a.batch; b++)
      for (int64_t i = 0; i < nq; i++) {
        int32_t pi = q_pos ? q_pos[b * nq + i] : (int32_t)(nk - nq + i);
        int any_visible = 0, bad_visible = 0;
        for (int64_t j = 0; j < nk; j++) {
          int32_t pj = kv_pos ? kv_pos[b * nk + j] : (int32_t)j;
          if (fz_visible(rc.causal, rc.window, pi, pj)) {
            any_visible = 1;
            bad_visible |= bad_key[b * nk + j];
          }
        }
        const float *row = out + (b * nq + i) * ost;
        for (int64_t h = 0; h < hq; h++) {
          float l = lse ? lse[(b * hq + h) * nq + i] : 0.0f;
          for (int64_t e = 0; e < d; e++) {
            float y = row[h * d + e];
            FZ_CHECK(H, !fz_is_canary_f32(y), "an output element was not written");
            if (!any_visible) FZ_CHECK(H, y == 0.0f, "fully masked query: output not 0");
            else if (!bad_visible && bound < 1e30)
              FZ_CHECK(H, isfinite(y), "finite visible keys gave a non-finite output");
          }
          if (lse && !any_visible && !sinks)
            FZ_CHECK(H, isinf(l) && l < 0, "fully masked query: lse not -inf");
          if (lse && !any_visible && sinks)
            FZ_CHECK(H, l == sinks[h], "fully masked query: lse not the head's sink");
          if (lse && any_visible && !bad_visible && bound < 1e30)
            FZ_CHECK(H, isfinite(l), "finite visible keys gave a non-finite lse");
        }
        /* the gap after the dense width of each row is never written */
        if (ost > hq * d && b * nq + i + 1 < qrows)
          FZ_CHECK(H, fz_untouched(row + hq * d, (size_t)(ost - hq * d) * sizeof *row),
                   "out stride gap written");
      }
  }

  /* K and V laid out again with their heads apart (kv_head_stride, batch strides, fuzzed
   * paddings): the same bits, or a refusal with the output untouched for strides the
   * API rejects (a head or token stride below head_dim, a negative or huge batch
   * stride, a default batch stride with batch > 1). */
  if (st == ROVE_OK && fz_bool(&rd)) {
    const int64_t kst = ks ? ks : hkv * d, vst = vs ? vs : hkv * d;
    const int64_t tp = fz_range(&rd, 0, 3), hp = fz_range(&rd, 0, 5), bp = fz_range(&rd, 0, 7);
    const int64_t ts = d + tp, hs = nk * ts + hp, bsz = hkv * hs + bp;
    const size_t n = (size_t)((a.batch - 1) * bsz + (hkv - 1) * hs + (nk - 1) * ts + d);
    float *k2 = fz_alloc(n * sizeof *k2), *v2 = fz_alloc(n * sizeof *v2);
    for (int64_t b = 0; b < a.batch; b++)
      for (int64_t j = 0; j < nk; j++)
        for (int64_t h = 0; h < hkv; h++) {
          memcpy(k2 + b * bsz + h * hs + j * ts, k + (b * nk + j) * kst + h * d, (size_t)d * 4);
          memcpy(v2 + b * bsz + h * hs + j * ts, v + (b * nk + j) * vst + h * d, (size_t)d * 4);
        }
    float *out2 = fz_canary_alloc(o_n * sizeof *out2);
    rove_attention_args b2 = a;
    b2.k = k2, b2.v = v2, b2.out = out2, b2.lse = NULL;
    b2.k_stride = b2.v_stride = tp ? ts : 0;
    b2.kv_head_stride = hs;
    b2.k_batch_stride = b2.v_batch_stride = a.batch > 1 ? bsz : 0;
    const uint8_t mode = fz_u8(&rd);
    int bad = 0;
    if (mode >= 240) b2.kv_head_stride = d - 1, bad = 1;
    else if (mode >= 230) b2.k_stride = d - 1, bad = 1;
    else if (mode >= 220) b2.v_batch_stride = -1, bad = 1;
    else if (mode >= 210 && a.batch > 1) b2.k_batch_stride = INT64_MAX / 3, bad = 1;
    else if (mode >= 200 && a.batch > 1) b2.v_batch_stride = 0, bad = 1; /* outer axis unknown */
    rove_status s2 = rove_attention_forward(plan, &b2);
    fz_check_status(H, s2);
    if (bad) {
      FZ_CHECK(H, s2 != ROVE_OK, "a bad K/V head or batch stride was accepted");
      FZ_CHECK(H, fz_untouched(out2, o_n * sizeof *out2), "out written on a refused stride");
    } else {
      FZ_CHECK(H, s2 == ROVE_OK, "K/V with heads apart refused");
      if (s2 == ROVE_OK)
        FZ_CHECK(H, memcmp(out, out2, o_n * sizeof *out) == 0 || nspecial,
                 "K/V with heads apart gave other bits than the dense layout");
    }
    free(k2);
    free(v2);
    free(out2);
  }

  /* The backward of a successful forward with an LSE: same arguments, dense gradients.
   * It must succeed; every gradient element is written; a query with no visible key gets
   * dq = 0 and a key no query sees dk = dv = 0; with finite inputs and bounded logits
   * every gradient is finite. */
  if (st == ROVE_OK && lse && fz_bool(&rd)) {
    const size_t gq = (size_t)(qrows * hq * d), gk = (size_t)(krows * hkv * d);
    float *dout = fz_alloc(gq * sizeof *dout);
    fz_fill_f32(&rd, dout, gq, 1.0f);
    float *dq = fz_canary_alloc(gq * sizeof *dq), *dk = fz_canary_alloc(gk * sizeof *dk);
    float *dv = fz_canary_alloc(gk * sizeof *dv);
    float *dsk = sinks ? fz_canary_alloc((size_t)hq * sizeof *dsk) : NULL;
    rove_attention_grads g = {.dout = dout, .dq = dq, .dk = dk, .dv = dv, .d_sinks = dsk};
    rove_status bs = rove_attention_backward(plan, &a, &g);
    fz_check_status(H, bs);
    FZ_CHECK(H, bs == ROVE_OK, "backward of a successful forward failed");
    if (bs == ROVE_OK) {
      const int finite = !nspecial && bound < 1e30;
      for (int64_t b = 0; b < a.batch; b++) {
        for (int64_t i = 0; i < nq; i++) {
          int32_t pi = q_pos ? q_pos[b * nq + i] : (int32_t)(nk - nq + i);
          int any = 0;
          for (int64_t j = 0; j < nk; j++)
            any |= fz_visible(rc.causal, rc.window, pi, kv_pos ? kv_pos[b * nk + j] : (int32_t)j);
          for (int64_t e = 0; e < hq * d; e++) {
            const float x = dq[(b * nq + i) * hq * d + e];
            FZ_CHECK(H, !fz_is_canary_f32(x), "a dq element was not written");
            if (!any) FZ_CHECK(H, x == 0.0f, "fully masked query: dq not 0");
            if (finite) FZ_CHECK(H, isfinite(x), "finite inputs gave a non-finite dq");
          }
        }
        for (int64_t j = 0; j < nk; j++) {
          int32_t pj = kv_pos ? kv_pos[b * nk + j] : (int32_t)j;
          int seen = 0;
          for (int64_t i = 0; i < nq; i++)
            seen |= fz_visible(rc.causal, rc.window, q_pos ? q_pos[b * nq + i] : (int32_t)(nk - nq + i), pj);
          for (int64_t e = 0; e < hkv * d; e++) {
            const float x = dk[(b * nk + j) * hkv * d + e], y = dv[(b * nk + j) * hkv * d + e];
            FZ_CHECK(H, !fz_is_canary_f32(x) && !fz_is_canary_f32(y), "a dk/dv element was not written");
            if (!seen) FZ_CHECK(H, x == 0.0f && y == 0.0f, "a key no query sees: dk/dv not 0");
            if (finite) FZ_CHECK(H, isfinite(x) && isfinite(y), "finite inputs gave a non-finite dk/dv");
          }
        }
      }
      for (int64_t h = 0; dsk && h < hq; h++) {
        FZ_CHECK(H, !fz_is_canary_f32(dsk[h]), "a d_sinks element was not written");
        if (!nspecial && bound < 1e30) FZ_CHECK(H, isfinite(dsk[h]), "finite inputs gave a non-finite d_sinks");
      }
    }
    free(dsk);
    free(dout);
    free(dq);
    free(dk);
    free(dv);
  }

  free(q);
  free(k);
  free(v);
  free(out);
  free(khit);
  free(vhit);
  free(bad_key);
  free(q_pos);
  free(kv_pos);
  free(lse);
  free(q_ang);
  free(kv_ang);
  free(sinks);
  rove_plan_destroy(plan);
  return 0;
}
