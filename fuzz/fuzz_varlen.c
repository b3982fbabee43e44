/* SPDX-License-Identifier: MIT */
/* Varlen attention: a fuzzed plan, 1..5 packed sequences of fuzzed lengths (some empty,
 * some without keys), sometimes broken cu arrays, fuzzed positions, angles (sometimes
 * non-finite), strides, the LSE and sometimes bf16 / f16 tensors (the buffers' bytes
 * read as 2-byte elements); then rove_attention_varlen(_typed) and, for comparison, one
 * rove_attention_forward(_typed) per sequence.
 * Invariants: a valid status; bad cu arrays and non-finite angles are rejected; outputs
 * and LSE untouched on failure, the stride padding never written; on success every
 * sequence's rows and LSE are bitwise those of its own call (a sequence without keys: 0
 * and -inf), and the status agrees with the per-sequence calls'. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#define H "fuzz_varlen"
#define MAXS 5

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader rd;
  fz_init(&rd, data, size);
  rove_attention_config rc;
  rove_plan *plan = fz_plan_from_input(&rd, H, &rc);
  if (!plan) return 0;
  const int32_t ns = fz_range(&rd, 1, MAXS);
  int32_t cq[MAXS + 1] = {0}, ck[MAXS + 1] = {0};
  for (int32_t s = 0; s < ns; s++) {
    cq[s + 1] = cq[s] + (fz_u8(&rd) < 40 ? 0 : fz_range(&rd, 1, 12));
    ck[s + 1] = ck[s] + (fz_u8(&rd) < 30 ? 0 : fz_range(&rd, 1, 24));
  }
  int bad_cu = 0;
  if (fz_u8(&rd) >= 240) { /* break one array */
    int32_t *cu = fz_bool(&rd) ? cq : ck;
    const int32_t at = fz_range(&rd, 0, ns);
    cu[at] += fz_bool(&rd) ? 1 : -1;
    for (int32_t s = 0; s <= ns; s++)
      bad_cu |= (s == 0 && cu[0] != 0) || (s > 0 && cu[s] < cu[s - 1]);
  }
  const int64_t tq = cq[ns] > 0 ? cq[ns] : 1, tk = ck[ns] > 0 ? ck[ns] : 1;
  const int64_t d = rc.head_dim, wq = (int64_t)rc.n_heads * d, wk = (int64_t)rc.n_kv_heads * d;
  const int64_t pad = fz_bool(&rd) ? fz_range(&rd, 1, 3) : 0, qs = wq + pad, ks = wk + pad;
  const int64_t half = rc.rope.rotary_dim / 2, aw = rc.n_kv_heads * half;
  float *q = fz_alloc((size_t)(tq * qs) * 4), *k = fz_alloc((size_t)(tk * ks) * 4);
  float *v = fz_alloc((size_t)(tk * ks) * 4);
  fz_fill_f32(&rd, q, (size_t)(tq * qs), 2.0f);
  fz_fill_f32(&rd, k, (size_t)(tk * ks), 2.0f);
  fz_fill_f32(&rd, v, (size_t)(tk * ks), 2.0f);
  int32_t *qp = NULL, *kp = NULL;
  if (fz_bool(&rd)) qp = fz_pos_array(&rd, tq), kp = fz_pos_array(&rd, tk);
  double *qa = NULL, *ka = NULL;
  if (fz_u8(&rd) >= 200 && aw > 0) {
    qa = malloc((size_t)(tq * aw) * 8), ka = malloc((size_t)(tk * aw) * 8);
    fz_fill_f64(&rd, qa, (size_t)(tq * aw), 100.0);
    fz_fill_f64(&rd, ka, (size_t)(tk * aw), 100.0);
    fz_specials_f64(&rd, ka, (size_t)(tk * aw), NULL); /* rejected where a call reads them */
  }
  const int want_lse = fz_bool(&rd);
  /* element types (read last: older corpus inputs stay all-F32); 2-byte types use the
   * first half of each buffer's bytes */
  rove_tensor_types ty = {ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_F32};
  const int typed = fz_u8(&rd) >= 160;
  if (typed) {
    rove_dtype *f[4] = {&ty.q, &ty.k, &ty.v, &ty.out};
    for (int i = 0; i < 4; i++) *f[i] = (rove_dtype)fz_range(&rd, 0, 2); /* F32, BF16, F16 */
  }
  const int64_t oe = ty.out == ROVE_DTYPE_F32 ? 4 : 2;
  float *out = fz_canary_alloc((size_t)(tq * qs) * 4);
  float *lse = want_lse ? fz_canary_alloc((size_t)(tq * rc.n_heads) * 4) : NULL;
  rove_varlen_args a;
  memset(&a, 0, sizeof a);
  a.n_seqs = ns, a.cu_seqlens_q = cq, a.cu_seqlens_k = ck;
  a.q = q, a.k = k, a.v = v, a.out = out, a.lse = lse;
  a.q_stride = a.out_stride = pad ? qs : 0, a.k_stride = a.v_stride = pad ? ks : 0;
  a.q_pos = qp, a.kv_pos = kp, a.q_angles = qa, a.kv_angles = ka;
  const rove_status st = typed ? rove_attention_varlen_typed(plan, &a, &ty)
                                : rove_attention_varlen(plan, &a);
  fz_check_status(H, st);
  if (bad_cu) FZ_CHECK(H, st == ROVE_ERR_INVALID_ARGUMENT, "bad cu_seqlens accepted");
  if (st != ROVE_OK) {
    FZ_CHECK(H, fz_untouched(out, (size_t)(tq * qs) * 4), "out written on failure");
    if (lse)
      FZ_CHECK(H, fz_untouched(lse, (size_t)(tq * rc.n_heads) * 4), "lse written on failure");
  } else {
    const uint8_t *ob = (const uint8_t *)out;
    for (int64_t t = 0; t < cq[ns]; t++)
      FZ_CHECK(H, fz_untouched(ob + (t * qs + wq) * oe, (size_t)((qs - wq) * oe)), "padding written");
  }
  /* the per-sequence calls */
  rove_status per = ROVE_OK;
  for (int32_t s = 0; s < ns && !bad_cu; s++) {
    const int32_t lq = cq[s + 1] - cq[s], lk = ck[s + 1] - ck[s];
    if (lq == 0) continue;
    if (lk == 0) {
      if (st == ROVE_OK) {
        const uint8_t *ob = (const uint8_t *)out; /* 0 is all-zero bits in every type */
        for (int64_t i = 0; i < lq; i++)
          for (int64_t e = 0; e < wq * oe; e++)
            FZ_CHECK(H, ob[(cq[s] + i) * qs * oe + e] == 0, "no keys: output not 0");
        for (int64_t h = 0; lse && h < rc.n_heads; h++)
          for (int64_t i = 0; i < lq; i++)
            FZ_CHECK(H, lse[h * cq[ns] + cq[s] + i] == -INFINITY, "no keys: lse not -inf");
      }
      continue;
    }
    float *o = fz_canary_alloc((size_t)(lq * qs) * 4);
    float *l = fz_canary_alloc((size_t)(lq * rc.n_heads) * 4);
    rove_attention_args b;
    memset(&b, 0, sizeof b);
    b.batch = 1, b.q_len = lq, b.kv_len = lk;
    b.q = (const float *)((const char *)q + cq[s] * qs * (ty.q == ROVE_DTYPE_F32 ? 4 : 2));
    b.k = (const float *)((const char *)k + ck[s] * ks * (ty.k == ROVE_DTYPE_F32 ? 4 : 2));
    b.v = (const float *)((const char *)v + ck[s] * ks * (ty.v == ROVE_DTYPE_F32 ? 4 : 2));
    b.out = o, b.lse = l;
    b.q_stride = b.out_stride = a.q_stride, b.k_stride = b.v_stride = a.k_stride;
    b.q_pos = qp ? qp + cq[s] : NULL, b.kv_pos = kp ? kp + ck[s] : NULL;
    b.q_angles = qa ? qa + cq[s] * aw : NULL, b.kv_angles = ka ? ka + ck[s] * aw : NULL;
    const rove_status sb = typed ? rove_attention_forward_typed(plan, &b, &ty)
                                 : rove_attention_forward(plan, &b);
    if (sb != ROVE_OK) per = sb;
    if (sb == ROVE_OK && st == ROVE_OK) {
      for (int64_t i = 0; i < lq; i++)
        FZ_CHECK(H, memcmp((const char *)o + i * qs * oe, (const char *)out + (cq[s] + i) * qs * oe,
                           (size_t)(wq * oe)) == 0,
                 "varlen != its sequence's own call (out)");
      for (int64_t h = 0; lse && h < rc.n_heads; h++)
        FZ_CHECK(H, memcmp(l + h * lq, lse + h * cq[ns] + cq[s], (size_t)lq * 4) == 0,
                 "varlen != its sequence's own call (lse)");
    }
    free(o), free(l);
  }
  if (!bad_cu)
    FZ_CHECK(H, (st == ROVE_OK) == (per == ROVE_OK), "varlen and per-sequence statuses disagree");
  free(q), free(k), free(v), free(qp), free(kp), free(qa), free(ka), free(out), free(lse);
  rove_plan_destroy(plan);
  return 0;
}
