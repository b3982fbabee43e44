/* SPDX-License-Identifier: MIT */
/* KV-cache operation sequences: create, then up to 16 of append / append_angles /
 * attention / shift / truncate / reset / positions, with fuzzed sizes, positions (int32
 * edges), deltas, angles and NaN/Inf/huge K and V rows.
 * The harness keeps a model of the cache (length, kind, every position, which rows hold a
 * non-finite value) and checks after each call: a valid status; the length and positions
 * the model predicts (a failed call changes nothing); appending past the capacity and
 * shifting out of int32 are SIZE_OVERFLOW; mixing append kinds and shifting an angle
 * cache fail; attention outputs untouched on failure, 0 / -inf for a query that sees no
 * key, finite where every visible key is finite. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#define H "fuzz_kv_cache"
#define MAX_CAP 24

typedef struct model {
  int32_t batch, cap, len;
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

static void do_append(fz_reader *rd, rove_kv_cache *c, model *m, int64_t kvw, int32_t n_kv,
                      int32_t half, int angles) {
  int32_t n = fz_range(rd, 1, 6);
  if (fz_u8(rd) >= 250) n = fz_range(rd, -1, 0);
  int64_t nn = n > 0 ? n : 1, rows = m->batch * nn;
  int64_t stride = fz_u8(rd) < 200 ? 0 : kvw + fz_range(rd, 0, 2);
  int64_t s = stride ? stride : kvw;
  size_t e = (size_t)((rows - 1) * s + kvw);
  float *k = fz_alloc(e * sizeof *k), *v = fz_alloc(e * sizeof *v);
  fz_fill_f32(rd, k, e, 2.0f);
  fz_fill_f32(rd, v, e, 2.0f);
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
  int32_t len0 = m->len;
  rove_status st = angles ? rove_kv_cache_append_angles(c, n, k, stride, v, stride, pos, ang)
                          : rove_kv_cache_append(c, n, k, stride, v, stride, pos);
  fz_check_status(H, st);
  int want_kind = angles ? 2 : 1;
  if (n <= 0 || bad_angle) FZ_CHECK(H, st != ROVE_OK, "append: bad n or angle accepted");
  if (m->len > 0 && m->kind != want_kind) FZ_CHECK(H, st != ROVE_OK, "append kinds mixed");
  if (n > 0 && (int64_t)m->len + n > m->cap)
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
        m->bad[b][len0 + i] = bad;
      }
    m->len = len0 + n;
    m->kind = want_kind;
  }
  free(k);
  free(v);
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
  float *q = fz_alloc(qn * sizeof *q), *out = fz_canary_alloc(qn * sizeof *out);
  fz_fill_f32(rd, q, qn, 2.0f);
  int32_t *q_pos = NULL;
  if (fz_bool(rd)) {
    q_pos = malloc((size_t)rows * sizeof *q_pos);
    for (int64_t i = 0; i < rows; i++) q_pos[i] = fz_pos(rd);
  }
  float *lse = fz_bool(rd) ? fz_canary_alloc((size_t)(rows * hq) * sizeof(float)) : NULL;
  double *q_ang = NULL;
  if (m->kind == 2 || fz_u8(rd) >= 230) {
    size_t an = (size_t)(rows * hkv * half);
    q_ang = malloc((an ? an : 1) * sizeof *q_ang);
    fz_fill_f64(rd, q_ang, an, 5.0);
  }
  a.q = q;
  a.out = out;
  a.q_pos = q_pos;
  a.lse = lse;
  a.q_angles = q_ang;
  rove_status st = rove_kv_cache_attention(c, &a);
  fz_check_status(H, st);
  if (m->len == 0 || a.batch != m->batch || (!q_pos && a.q_len > m->len))
    FZ_CHECK(H, st != ROVE_OK, "cache attention: empty cache / batch / q_len accepted");
  if (st != ROVE_OK) {
    FZ_CHECK(H, fz_untouched(out, qn * sizeof *out), "cache attention wrote out on failure");
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
          float y = out[(b * nq + i) * hq * d + x];
          FZ_CHECK(H, !fz_is_canary_f32(y), "cache attention left an output unwritten");
          if (!any) FZ_CHECK(H, y == 0.0f, "cache attention: fully masked query not 0");
          else if (!badv && bound < 1e30)
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
  free(out);
  free(q_pos);
  free(lse);
  free(q_ang);
}

static void do_shift(fz_reader *rd, rove_kv_cache *c, model *m) {
  int32_t start = fz_range(rd, -1, m->len + 1), end = fz_range(rd, -1, m->len + 1);
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
  st = rove_kv_cache_create(plan, m.batch, cap_arg, &c);
  fz_check_status(H, st);
  if (cap_arg <= 0) FZ_CHECK(H, st != ROVE_OK, "cache of capacity <= 0 accepted");
  if (st != ROVE_OK) {
    FZ_CHECK(H, c == (rove_kv_cache *)(uintptr_t)0x1, "kv_cache_create wrote *out on failure");
    rove_plan_destroy(plan);
    return 0;
  }
  FZ_CHECK(H, rove_kv_cache_capacity(c) == m.cap, "capacity differs");
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
        break;
    }
    if (m.len == 0) m.kind = 0;
    check_positions(c, &m);
  }
  rove_kv_cache_destroy(c);
  rove_plan_destroy(plan);
  return 0;
}
