/* SPDX-License-Identifier: MIT */
/* KV-cache operation sequences: create (storage f32, bf16, f16 or q8, or an invalid type),
 * then up to 16 of append / append_angles / attention / shift / truncate / reset /
 * positions, with fuzzed sizes, positions (int32 edges), deltas, angles, NaN/Inf/huge K and
 * V rows, append inputs and attention q / out of fuzzed element types (f32, bf16, f16, or
 * an invalid one).
 * The harness keeps a model of the cache (length, kind, every position, which rows hold a
 * non-finite value) and checks after each call: a valid status; the length and positions
 * the model predicts (a failed call changes nothing); appending past the capacity and
 * shifting out of int32 are SIZE_OVERFLOW; mixing append kinds and shifting an angle
 * cache fail; attention outputs untouched on failure, 0 / -inf for a query that sees no
 * key, finite where every visible key is finite (fp32 out); an angle cache attended
 * without q_angles by a plan rotating Q or O is refused. Typed storage (sometimes given
 * values near 50000, F16's edge after a rotation): an append or a shift may be refused
 * (INVALID_ARGUMENT, nothing changed) only when a value could be out of the type's range
 * after rotation (|x| >= 1000) or, for q8, is not finite. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#define H "fuzz_kv_cache"
#define MAX_CAP 24

/* fp32 -> bf16 / f16 bit patterns (truncating: any pattern is a fair input) and back. */
static uint16_t to_half_bits(float f, rove_dtype t) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (t == ROVE_DTYPE_BF16) return (uint16_t)(u >> 16);
  const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  const int e = (int)(a >> 23) - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u); /* overflow: inf */
  if (e <= 0) return (uint16_t)sign;              /* underflow: 0 */
  return (uint16_t)(sign | (uint32_t)e << 10 | (a >> 13 & 0x3ffu));
}
static float from_half_bits(uint16_t h, rove_dtype t) {
  if (t == ROVE_DTYPE_BF16) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  const int e = h >> 10 & 31, m = h & 0x3ff;
  const float mag = e == 31 ? (m ? NAN : INFINITY)
                    : e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 0x400), e - 25);
  return h & 0x8000 ? -mag : mag;
}

/* A fuzzed tensor type: mostly F32 / BF16 / F16, sometimes Q8 or out of range (invalid for
 * a tensor). */
static rove_dtype fz_tensor_type(fz_reader *rd) {
  const uint8_t b = fz_u8(rd);
  return b >= 250 ? (rove_dtype)(b % 2 ? ROVE_DTYPE_Q8 : 7) : (rove_dtype)(b % 3);
}

typedef struct model {
  int32_t batch, cap, len;
  rove_dtype type;              /* storage */
  uint8_t big;                  /* a typed cache took a row with |x| >= 1000 since its last
                                 * reset: a shift may be refused (its rotation may not fit) */
  int kind;                     /* 0 empty, 1 positions, 2 angles */
  int32_t pos[2][MAX_CAP];      /* [batch][cap] */
  uint8_t bad[2][MAX_CAP];      /* K or V row not finite */
} model;

static void check_positions(const rove_kv_cache *c, const model *m) {
  FZ_CHECK(H, rove_kv_cache_length(c) == m->len, "cache length differs from the model");
  int32_t *p = fz_canary_alloc((size_t)(m->batch * (m->len ? m->len : 1)) * sizeof *p);
  rove_status st = rove_kv_cache_positions(c, p);
  fz_check_status(H, st);
  FZ_CHECK(H, st == ROVE_OK, "rove_kv_cache_positions failed");
  for (int32_t b = 0; b < m->batch; b++)
    for (int32_t j = 0; j < m->len; j++)
      FZ_CHECK(H, p[b * m->len + j] == m->pos[b][j], "cached position differs from the model");
  free(p);
}

static int want_kind_of(int angles) { return angles ? 2 : 1; }

static void do_append(fz_reader *rd, rove_kv_cache *c, model *m, int64_t kvw, int32_t n_kv,
                      int32_t half, int angles) {
  int32_t n = fz_range(rd, 1, 6);
  if (fz_u8(rd) >= 250) n = fz_range(rd, -1, 0);
  int64_t nn = n > 0 ? n : 1, rows = m->batch * nn;
  int64_t stride = fz_u8(rd) < 200 ? 0 : kvw + fz_range(rd, 0, 2);
  int64_t s = stride ? stride : kvw;
  size_t e = (size_t)((rows - 1) * s + kvw);
  float *k = fz_alloc(e * sizeof *k), *v = fz_alloc(e * sizeof *v);
  /* now and then values near F16's edge on a typed cache: a later shift may not fit */
  const float amp = m->type != ROVE_DTYPE_F32 && fz_u8(rd) >= 224 ? 50000.0f : 2.0f;
  fz_fill_f32(rd, k, e, amp);
  fz_fill_f32(rd, v, e, amp);
  uint8_t *kh = fz_alloc(e), *vh = fz_alloc(e);
  fz_specials_f32(rd, k, e, kh);
  fz_specials_f32(rd, v, e, vh);
  int32_t *pos = NULL;
  if (fz_bool(rd)) {
    pos = malloc((size_t)rows * sizeof *pos);
    int32_t base = fz_pos(rd);
    int mode = fz_u8(rd) % 3;
    for (int64_t i = 0; i < rows; i++)
      pos[i] = mode == 0 ? fz_pos(rd) : mode == 1 ? (int32_t)(base + (i % nn < 4 ? i % nn : 0))
                                                  : (int32_t)(m->len + i % nn);
  }
  double *ang = NULL;
  int bad_angle = 0;
  if (angles) {
    /* [batch][n][n_kv_heads][half] */
    size_t an = (size_t)rows * (size_t)n_kv * (size_t)half;
    ang = malloc((an ? an : 1) * sizeof *ang);
    fz_fill_f64(rd, ang, an, 5.0);
    bad_angle = fz_specials_f64(rd, ang, an, NULL);
  }
  /* the input type (plain appends): K and V converted to it, their bad rows re-derived */
  const rove_dtype it = angles ? ROVE_DTYPE_F32 : fz_tensor_type(rd);
  const int typed_in = it == ROVE_DTYPE_BF16 || it == ROVE_DTYPE_F16;
  uint16_t *k16 = NULL, *v16 = NULL;
  float maxabs = 0.0f;
  int nonfinite = 0;
  for (size_t i = 0; i < e; i++) {
    if (typed_in) {
      if (!k16) k16 = fz_alloc(e * 2), v16 = fz_alloc(e * 2);
      k16[i] = to_half_bits(k[i], it), v16[i] = to_half_bits(v[i], it);
      k[i] = from_half_bits(k16[i], it), v[i] = from_half_bits(v16[i], it);
      kh[i] = !isfinite(k[i]) || fabsf(k[i]) > 1e30f, vh[i] = !isfinite(v[i]) || fabsf(v[i]) > 1e30f;
    }
    nonfinite |= !isfinite(k[i]) || !isfinite(v[i]);
    if (isfinite(k[i])) maxabs = fmaxf(maxabs, fabsf(k[i]));
    if (isfinite(v[i])) maxabs = fmaxf(maxabs, fabsf(v[i]));
  }
  int32_t len0 = m->len;
  rove_status st;
  if (angles)
    st = rove_kv_cache_append_angles(c, n, k, stride, v, stride, pos, ang);
  else if (it == ROVE_DTYPE_F32 && fz_bool(rd))
    st = rove_kv_cache_append(c, n, k, stride, v, stride, pos);
  else
    st = rove_kv_cache_append_typed(c, n, typed_in ? (const void *)k16 : k, stride,
                                    typed_in ? (const void *)v16 : v, stride, pos, it);
  fz_check_status(H, st);
  if (!angles && !typed_in && it != ROVE_DTYPE_F32)
    FZ_CHECK(H, st == ROVE_ERR_INVALID_ARGUMENT, "append of an invalid input type accepted");
  /* typed storage refuses values it cannot hold; such a refusal changes nothing */
  const int may_refuse = m->type != ROVE_DTYPE_F32 &&
                         (maxabs >= 1000.0f || (m->type == ROVE_DTYPE_Q8 && nonfinite));
  if (st == ROVE_ERR_INVALID_ARGUMENT && n > 0 && !bad_angle && (typed_in || it == ROVE_DTYPE_F32) &&
      !(m->len > 0 && m->kind != want_kind_of(angles)))
    FZ_CHECK(H, may_refuse, "typed cache refused representable values");
  int want_kind = want_kind_of(angles);
  if (n <= 0 || bad_angle) FZ_CHECK(H, st != ROVE_OK, "append: bad n or angle accepted");
  if (m->len > 0 && m->kind != want_kind) FZ_CHECK(H, st != ROVE_OK, "append kinds mixed");
  if (n > 0 && (int64_t)m->len + n > m->cap && (typed_in || it == ROVE_DTYPE_F32))
    FZ_CHECK(H, st == ROVE_ERR_SIZE_OVERFLOW || (st != ROVE_OK && m->len > 0 && m->kind != want_kind),
             "append past the capacity is not SIZE_OVERFLOW");
  if (st == ROVE_OK) {
    for (int32_t b = 0; b < m->batch; b++)
      for (int32_t i = 0; i < n; i++) {
        int32_t p;
        if (pos) p = pos[b * nn + i];
        else {
          int64_t last = len0 + i > 0 ? (int64_t)(i > 0 ? m->pos[b][len0 + i - 1]
                                                         : m->pos[b][len0 - 1]) : -1;
          FZ_CHECK(H, last < INT32_MAX, "a default position past INT32_MAX was accepted");
          p = (int32_t)(last + 1);
        }
        m->pos[b][len0 + i] = p;
        uint8_t bad = 0;
        for (int64_t x = 0; x < kvw; x++)
          bad |= kh[(size_t)((b * nn + i) * s + x)] | vh[(size_t)((b * nn + i) * s + x)];
        m->bad[b][len0 + i] = bad | (amp > 2.0f); /* past the logit bound fz_logit_bound takes */
      }
    m->len = len0 + n;
    m->kind = want_kind;
    if (m->type != ROVE_DTYPE_F32 && maxabs >= 1000.0f) m->big = 1;
  }
  free(k);
  free(v);
  free(k16);
  free(v16);
  free(kh);
  free(vh);
  free(pos);
  free(ang);
}

static void do_attention(fz_reader *rd, const rove_kv_cache *c, const model *m,
                         const rove_attention_config *rc, int32_t half, double bound) {
  const int64_t hq = rc->n_heads, hkv = rc->n_kv_heads, d = rc->head_dim;
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = m->batch;
  if (fz_u8(rd) >= 250) a.batch = m->batch + 1;
  a.q_len = fz_range(rd, 1, 4);
  int64_t nq = a.q_len, rows = (int64_t)a.batch * nq;
  size_t qn = (size_t)(rows * hq * d);
  /* q and out of fuzzed types (bf16 / f16: converted patterns; others: fp32 buffers) */
  rove_tensor_types tt = {fz_tensor_type(rd), ROVE_DTYPE_F32, ROVE_DTYPE_F32, fz_tensor_type(rd)};
  const int half_q = tt.q == ROVE_DTYPE_BF16 || tt.q == ROVE_DTYPE_F16;
  const int half_o = tt.out == ROVE_DTYPE_BF16 || tt.out == ROVE_DTYPE_F16;
  const size_t osz = half_o ? 2 : sizeof(float);
  float *q = fz_alloc(qn * sizeof *q);
  void *out = fz_canary_alloc(qn * osz);
  fz_fill_f32(rd, q, qn, 2.0f);
  uint16_t *q16 = half_q ? fz_alloc(qn * 2) : NULL;
  for (size_t i = 0; half_q && i < qn; i++) q16[i] = to_half_bits(q[i], tt.q);
  const int bad_types = !(tt.q <= ROVE_DTYPE_F16 && tt.out <= ROVE_DTYPE_F16);
  const int plain = !bad_types && tt.q == ROVE_DTYPE_F32 && tt.out == ROVE_DTYPE_F32 && fz_bool(rd);
  int32_t *q_pos = NULL;
  if (fz_bool(rd)) {
    q_pos = malloc((size_t)rows * sizeof *q_pos);
    for (int64_t i = 0; i < rows; i++) q_pos[i] = fz_pos(rd);
  }
  float *lse = fz_bool(rd) ? fz_canary_alloc((size_t)(rows * hq) * sizeof(float)) : NULL;
  double *q_ang = NULL;
  const uint8_t qa_byte = fz_u8(rd); /* an angle cache mostly gets q_angles, not always */
  if (m->kind == 2 ? qa_byte < 240 : qa_byte >= 230) {
    size_t an = (size_t)(rows * hkv * half);
    q_ang = malloc((an ? an : 1) * sizeof *q_ang);
    fz_fill_f64(rd, q_ang, an, 5.0);
  }
  a.q = half_q ? (const float *)(const void *)q16 : q;
  a.out = out;
  a.q_pos = q_pos;
  a.lse = lse;
  a.q_angles = q_ang;
  rove_status st = plain ? rove_kv_cache_attention(c, &a) : rove_kv_cache_attention_typed(c, &a, &tt);
  fz_check_status(H, st);
  if (bad_types) FZ_CHECK(H, st == ROVE_ERR_INVALID_ARGUMENT, "cache attention: a bad q / out type accepted");
  if (m->len == 0 || a.batch != m->batch || (!q_pos && a.q_len > m->len))
    FZ_CHECK(H, st != ROVE_OK, "cache attention: empty cache / batch / q_len accepted");
  if (m->kind == 2 && !q_ang && (rc->rotate & (ROVE_ROTATE_Q | ROVE_ROTATE_O)))
    FZ_CHECK(H, st == ROVE_ERR_INVALID_ARGUMENT, "angle cache attended without q_angles");
  if (st != ROVE_OK) {
    FZ_CHECK(H, fz_untouched(out, qn * osz), "cache attention wrote out on failure");
    if (lse) FZ_CHECK(H, fz_untouched(lse, (size_t)(rows * hq) * sizeof(float)), "lse written");
  } else {
    for (int32_t b = 0; b < a.batch; b++)
      for (int64_t i = 0; i < nq; i++) {
        int32_t pi = q_pos ? q_pos[b * nq + i] : m->pos[b][m->len - nq + i];
        int any = 0, badv = 0;
        for (int32_t j = 0; j < m->len; j++)
          if (fz_visible(rc->causal, rc->window, pi, m->pos[b][j])) {
            any = 1;
            badv |= m->bad[b][j];
          }
        for (int64_t x = 0; x < hq * d; x++) {
          const size_t at = (size_t)((b * nq + i) * hq * d + x);
          float y;
          if (half_o) {
            const uint16_t h = ((const uint16_t *)out)[at];
            y = from_half_bits(h, tt.out);
          } else {
            y = ((const float *)out)[at];
            FZ_CHECK(H, !fz_is_canary_f32(y), "cache attention left an output unwritten");
          }
          if (!any) FZ_CHECK(H, y == 0.0f, "cache attention: fully masked query not 0");
          else if (!badv && bound < 1e30 && !half_o) /* a half out may overflow to inf */
            FZ_CHECK(H, isfinite(y), "cache attention: finite visible keys, non-finite out");
        }
        if (lse)
          for (int64_t h = 0; h < hq; h++) {
            float l = lse[(b * hq + h) * nq + i];
            if (!any) FZ_CHECK(H, isinf(l) && l < 0, "cache attention: masked lse not -inf");
            else if (!badv && bound < 1e30) FZ_CHECK(H, isfinite(l), "non-finite lse");
          }
      }
  }
  free(q);
  free(q16);
  free(out);
  free(q_pos);
  free(lse);
  free(q_ang);
}

static void do_shift(fz_reader *rd, rove_kv_cache *c, model *m) {
  /* mostly a small range from start (two independent ends are mostly refused) */
  int32_t start = fz_range(rd, -1, m->len + 1);
  int32_t end = fz_u8(rd) < 200 ? start + fz_range(rd, 0, 4) : fz_range(rd, -1, m->len + 1);
  int32_t delta = fz_u8(rd) < 128 ? fz_range(rd, -8, 8) : fz_pos(rd);
  rove_status st = rove_kv_cache_shift(c, start, end, delta);
  fz_check_status(H, st);
  int bad_range = !(0 <= start && start <= end && end <= m->len);
  int overflow = 0;
  if (!bad_range)
    for (int32_t b = 0; b < m->batch; b++)
      for (int32_t j = start; j < end; j++) {
        int64_t p = (int64_t)m->pos[b][j] + delta;
        if (p < INT32_MIN || p > INT32_MAX) overflow = 1;
      }
  if (bad_range) FZ_CHECK(H, st == ROVE_ERR_INVALID_ARGUMENT, "shift: bad range not rejected");
  else if (m->kind == 2 && end > start) FZ_CHECK(H, st != ROVE_OK, "shift of an angle cache");
  else if (overflow) FZ_CHECK(H, st == ROVE_ERR_SIZE_OVERFLOW, "shift out of int32 not SIZE_OVERFLOW");
  else if (st == ROVE_ERR_INVALID_ARGUMENT)
    FZ_CHECK(H, m->big, "shift of a typed cache refused values its type holds");
  if (st == ROVE_OK)
    for (int32_t b = 0; b < m->batch; b++)
      for (int32_t j = start; j < end; j++) m->pos[b][j] += delta;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader rd;
  fz_init(&rd, data, size);
  rove_attention_config rc;
  rove_plan *plan = fz_plan_from_input(&rd, H, &rc);
  if (!plan) return 0;
  rove_status st;
  double bound = fz_logit_bound(&rc, 2.0);
  const int32_t half = (rc.rope.rotary_dim > 0 ? rc.rope.rotary_dim : rc.head_dim) / 2;
  const int64_t kvw = (int64_t)rc.n_kv_heads * rc.head_dim;

  model m;
  memset(&m, 0, sizeof m);
  m.batch = fz_range(&rd, 1, 2);
  m.cap = fz_range(&rd, 1, MAX_CAP);
  int32_t cap_arg = fz_u8(&rd) >= 250 ? fz_range(&rd, -1, 0) : m.cap;
  rove_kv_cache *c = (rove_kv_cache *)(uintptr_t)0x1;
  const uint8_t tb = fz_u8(&rd);
  m.type = tb >= 252 ? (rove_dtype)9 : (rove_dtype)(tb % 4); /* 9: an invalid type */
  st = m.type == ROVE_DTYPE_F32 && tb % 8 < 4 ? rove_kv_cache_create(plan, m.batch, cap_arg, &c)
                                            : rove_kv_cache_create_typed(plan, m.batch, cap_arg,
                                                                         m.type, &c);
  fz_check_status(H, st);
  if (cap_arg <= 0) FZ_CHECK(H, st != ROVE_OK, "cache of capacity <= 0 accepted");
  if ((int)m.type > ROVE_DTYPE_Q8) FZ_CHECK(H, st != ROVE_OK, "cache of an invalid type accepted");
  if (st != ROVE_OK) {
    FZ_CHECK(H, c == (rove_kv_cache *)(uintptr_t)0x1, "kv_cache_create wrote *out on failure");
    rove_plan_destroy(plan);
    return 0;
  }
  FZ_CHECK(H, rove_kv_cache_capacity(c) == m.cap, "capacity differs");
  FZ_CHECK(H, rove_kv_cache_type(c) == m.type, "storage type differs");
  int n_ops = fz_range(&rd, 1, 16);
  for (int op = 0; op < n_ops && rd.pos < rd.size; op++) {
    switch (fz_u8(&rd) % 8) {
      case 0: case 1: do_append(&rd, c, &m, kvw, rc.n_kv_heads, half, 0); break;
      case 2: do_append(&rd, c, &m, kvw, rc.n_kv_heads, half, 1); break;
      case 3: case 4: do_attention(&rd, c, &m, &rc, half, bound); break;
      case 5: do_shift(&rd, c, &m); break;
      case 6: {
        int32_t len = fz_range(&rd, -1, m.len + 1);
        st = rove_kv_cache_truncate(c, len);
        fz_check_status(H, st);
        FZ_CHECK(H, (st == ROVE_OK) == (len >= 0 && len <= m.len), "truncate status");
        if (st == ROVE_OK) m.len = len;
        break;
      }
      default:
        FZ_CHECK(H, rove_kv_cache_reset(c) == ROVE_OK, "reset failed");
        m.len = 0;
        m.big = 0;
        break;
    }
    if (m.len == 0) m.kind = 0;
    check_positions(c, &m);
  }
  rove_kv_cache_destroy(c);
  rove_plan_destroy(plan);
  return 0;
}
