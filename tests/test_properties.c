/* SPDX-License-Identifier: MIT */
/* Property tests of docs/DESIGN.md §4 on the public API: rotation identities, RoVE = attentive
 * convolution, shift invariance, flag decomposition, bitwise thread invariance, concurrent
 * use of one plan, determinism, LSE merging. Links the public librove.so. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rove_oracle.h"
#include "testutil.h"

#define OUT_TOL 2e-5
#define ROT_TOL 1e-6

/* ---- helpers ------------------------------------------------------------------------- */

static rove_plan *make_plan(const rove_attention_config *c) {
  rove_plan *p = NULL;
  const rove_status st = rove_plan_create(c, &p);
  if (st != ROVE_OK) fail_msg("rove_plan_create: %s", rove_status_string(st));
  return p;
}

static void cfg(rove_attention_config *c, int H, int Hkv, int d, int r, int pairing,
                uint32_t rot, int causal, int window) {
  rove_attention_config_init(c, H, Hkv, d);
  c->rope.rotary_dim = r;
  c->rope.pairing = (rove_pairing)pairing;
  c->rotate = rot;
  c->causal = causal;
  c->window = window;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  assert_non_null(p);
  return p;
}

/* Dense problem with explicit positions (used or not). */
typedef struct {
  int B, Sq, Skv, H, Hkv, d;
  float *q, *k, *v;
  int32_t *qp, *kp;
  int64_t nq, nk, nl; /* float counts of q/out, k/v; lse count */
} prob;

static void prob_init(prob *p, int B, int Sq, int Skv, int H, int Hkv, int d, uint64_t seed) {
  memset(p, 0, sizeof *p);
  p->B = B, p->Sq = Sq, p->Skv = Skv, p->H = H, p->Hkv = Hkv, p->d = d;
  p->nq = (int64_t)B * Sq * H * d;
  p->nk = (int64_t)B * Skv * Hkv * d;
  p->nl = (int64_t)B * H * Sq;
  p->q = xmalloc((size_t)p->nq * sizeof(float));
  p->k = xmalloc((size_t)p->nk * sizeof(float));
  p->v = xmalloc((size_t)p->nk * sizeof(float));
  p->qp = xmalloc((size_t)B * Sq * sizeof(int32_t));
  p->kp = xmalloc((size_t)B * Skv * sizeof(int32_t));
  rove_rng g;
  rove_rng_seed(&g, seed);
  rove_rng_fill(&g, p->q, p->nq, -1.5f, 1.5f);
  rove_rng_fill(&g, p->k, p->nk, -1.5f, 1.5f);
  rove_rng_fill(&g, p->v, p->nk, -1.0f, 1.0f);
  /* default (bottom-right) positions made explicit */
  for (int b = 0; b < B; b++) {
    for (int i = 0; i < Sq; i++) p->qp[b * Sq + i] = Skv - Sq + i;
    for (int j = 0; j < Skv; j++) p->kp[b * Skv + j] = j;
  }
}

/* Random unsorted positions with duplicates around `centre` (per batch offset). */
static void prob_random_pos(prob *p, uint64_t seed, int64_t centre) {
  rove_rng g;
  rove_rng_seed(&g, seed);
  const int64_t span = p->Skv / 2 + 4;
  for (int b = 0; b < p->B; b++) {
    const int64_t c = centre + 37 * b;
    for (int i = 0; i < p->Sq; i++)
      p->qp[b * p->Sq + i] = (int32_t)(c - span + (int64_t)(rove_rng_u64(&g) % (uint64_t)(2 * span)));
    for (int j = 0; j < p->Skv; j++)
      p->kp[b * p->Skv + j] = (int32_t)(c - span + (int64_t)(rove_rng_u64(&g) % (uint64_t)(2 * span)));
  }
}

static void prob_free(prob *p) {
  free(p->q);
  free(p->k);
  free(p->v);
  free(p->qp);
  free(p->kp);
}

static rove_attention_args prob_args(const prob *p, float *out, float *lse, int use_pos) {
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = p->B;
  a.q_len = p->Sq;
  a.kv_len = p->Skv;
  a.q = p->q;
  a.k = p->k;
  a.v = p->v;
  a.out = out;
  a.lse = lse;
  if (use_pos) {
    a.q_pos = p->qp;
    a.kv_pos = p->kp;
  }
  return a;
}

static void forward_ok(const rove_plan *pl, const rove_attention_args *a) {
  const rove_status st = rove_attention_forward(pl, a);
  if (st != ROVE_OK) fail_msg("rove_attention_forward: %s", rove_status_string(st));
}

/* max |a-b| / max(1, |b|) over lse values, with -inf matching -inf exactly */
static double lse_err(const float *a, const float *b, int64_t n) {
  double err = 0;
  for (int64_t i = 0; i < n; i++) {
    if (isinf(b[i]) || isinf(a[i])) {
      if (a[i] != b[i]) return INFINITY;
      continue;
    }
    const double e = fabs((double)a[i] - (double)b[i]) / fmax(1.0, fabs((double)b[i]));
    if (e != e) return INFINITY;
    err = fmax(err, e);
  }
  return err;
}

static void assert_close(const char *what, double err, double tol) {
  if (!(err <= tol)) fail_msg("%s: error %g > %g (isa %s)", what, err, tol, rove_isa_name(rove_best_isa()));
}

/* ---- rove_rotate --------------------------------------------------------------------- */

static void test_rotate_position_zero_is_identity(void **state) {
  (void)state;
  for (int pairing = 0; pairing <= 1; pairing++)
    for (int ri = 0; ri < 3; ri++)
      for (int inverse = 0; inverse <= 1; inverse++) {
        const int d = 80, r = ri == 0 ? 0 : (ri == 1 ? 40 : 2), n = 6, H = 3;
        rove_attention_config c;
        cfg(&c, H, H, d, r, pairing, ROVE_ROTATE_ROVE, 1, 0);
        if (ri == 1) { /* YaRN plan: the plain rotation carries no attention factor */
          c.rope.scaling = ROVE_SCALING_YARN;
          c.rope.factor = 4;
          c.rope.original_max_position = 64;
        }
        rove_plan *p = make_plan(&c);
        float *x = xmalloc((size_t)n * H * d * sizeof(float));
        float *x0 = xmalloc((size_t)n * H * d * sizeof(float));
        rove_rng g;
        rove_rng_seed(&g, 11 + (uint64_t)ri);
        rove_rng_fill(&g, x, (int64_t)n * H * d, -2, 2);
        memcpy(x0, x, (size_t)n * H * d * sizeof(float));
        int32_t pos[6] = {0, 0, 0, 0, 0, 0};
        assert_int_equal(rove_rotate(p, x, n, H, 0, pos, inverse), ROVE_OK);
        assert_memory_equal(x, x0, (size_t)n * H * d * sizeof(float));
        /* NULL positions: token 0 is at position 0 */
        assert_int_equal(rove_rotate(p, x, 1, H, 0, NULL, inverse), ROVE_OK);
        assert_memory_equal(x, x0, (size_t)H * d * sizeof(float));
        free(x);
        free(x0);
        rove_plan_destroy(p);
      }
}

static void test_rotate_roundtrip(void **state) {
  (void)state;
  static const int32_t pos[8] = {0, 1, -1, 12345, 1 << 20, -(1 << 20) - 3, INT32_MAX, INT32_MIN};
  for (int pairing = 0; pairing <= 1; pairing++)
    for (int ri = 0; ri < 2; ri++) {
      const int d = 64, H = 2, n = 8;
      rove_attention_config c;
      cfg(&c, H, 1, d, ri ? 48 : 0, pairing, ROVE_ROTATE_ROVE, 1, 0);
      rove_plan *p = make_plan(&c);
      const int64_t nf = (int64_t)n * H * d;
      float *x = xmalloc((size_t)nf * sizeof(float)), *x0 = xmalloc((size_t)nf * sizeof(float));
      rove_rng g;
      rove_rng_seed(&g, 21);
      rove_rng_fill(&g, x, nf, -1, 1);
      memcpy(x0, x, (size_t)nf * sizeof(float));
      for (int order = 0; order <= 1; order++) {
        assert_int_equal(rove_rotate(p, x, n, H, 0, pos, order), ROVE_OK);
        assert_int_equal(rove_rotate(p, x, n, H, 0, pos, !order), ROVE_OK);
        assert_close("rotate/unrotate", rove_max_rel_err_ff(x, x0, nf), ROT_TOL);
      }
      /* R_a then R_b equals R_{a+b} */
      int32_t pa[8], pb[8], pab[8];
      for (int i = 0; i < n; i++) pa[i] = 1000 * i - 3000, pb[i] = 77 * i + 5, pab[i] = pa[i] + pb[i];
      float *y = xmalloc((size_t)nf * sizeof(float));
      memcpy(y, x0, (size_t)nf * sizeof(float));
      memcpy(x, x0, (size_t)nf * sizeof(float));
      assert_int_equal(rove_rotate(p, x, n, H, 0, pa, 0), ROVE_OK);
      assert_int_equal(rove_rotate(p, x, n, H, 0, pb, 0), ROVE_OK);
      assert_int_equal(rove_rotate(p, y, n, H, 0, pab, 0), ROVE_OK);
      assert_close("R_a R_b = R_(a+b)", rove_max_rel_err_ff(x, y, nf), ROT_TOL);
      free(x);
      free(x0);
      free(y);
      rove_plan_destroy(p);
    }
}

static void test_rotate_matches_oracle(void **state) {
  (void)state;
  static const int dims[] = {32, 80, 128};
  int32_t pos[9] = {3, -17, 0, 1 << 20, 999999, -5, INT32_MAX, INT32_MIN, 42};
  for (int di = 0; di < 3; di++)
    for (int pairing = 0; pairing <= 1; pairing++)
      for (int ri = 0; ri < 3; ri++)
        for (int inverse = 0; inverse <= 1; inverse++)
          for (int use_pos = 0; use_pos <= 1; use_pos++)
            for (int pad = 0; pad <= 1; pad++) {
              const int d = dims[di], H = 3, n = 9;
              const int r = ri == 0 ? 0 : (ri == 1 ? d / 2 : 2);
              rove_attention_config c;
              cfg(&c, H, 1, d, r, pairing, ROVE_ROTATE_ROVE, 1, 0);
              if (di == 1) { /* a scaled plan: frequencies change, no m in rotate */
                c.rope.scaling = ROVE_SCALING_YARN;
                c.rope.factor = 8;
                c.rope.original_max_position = 128;
              }
              rove_plan *p = make_plan(&c);
              double inv[ROVE_MAX_HEAD_DIM / 2];
              assert_int_equal(rove_rope_inv_freq(&c.rope, d, inv, NULL), ROVE_OK);
              const int64_t w = (int64_t)H * d, stride = pad ? w + 5 : w;
              rove_guarded gx;
              rove_guarded_alloc(&gx, n * stride, 3);
              rove_rng g;
              rove_rng_seed(&g, 31 + (uint64_t)(di * 100 + ri * 10 + pairing));
              rove_rng_fill(&g, gx.data, gx.n, -1, 1);
              float *x0 = xmalloc((size_t)gx.n * sizeof(float));
              memcpy(x0, gx.data, (size_t)gx.n * sizeof(float));
              assert_int_equal(rove_rotate(p, gx.data, n, H, pad ? stride : 0,
                                           use_pos ? pos : NULL, inverse),
                               ROVE_OK);
              assert_true(rove_guarded_intact(&gx));
              double *ref = xmalloc((size_t)(n * w) * sizeof(double));
              float *got = xmalloc((size_t)(n * w) * sizeof(float));
              for (int t = 0; t < n; t++) {
                for (int64_t e = w; e < stride; e++) /* gaps untouched */
                  assert_true(memcmp(&gx.data[t * stride + e], &x0[t * stride + e], sizeof(float)) == 0);
                for (int h = 0; h < H; h++) {
                  double *xr = ref + (t * H + h) * d;
                  for (int e = 0; e < d; e++) xr[e] = x0[t * stride + h * d + e];
                  rove_oracle_rotate(xr, d, r ? r : d, (rove_pairing)pairing, inv,
                                     use_pos ? (double)pos[t] : (double)t, inverse ? -1 : 1);
                }
                memcpy(got + t * w, gx.data + t * stride, (size_t)w * sizeof(float));
              }
              const double err = rove_max_rel_err_fd(got, ref, n * w);
              if (!(err <= ROT_TOL))
                fail_msg("rotate vs oracle: err %g d=%d r=%d pair=%d inv=%d pos=%d pad=%d", err,
                         d, r, pairing, inverse, use_pos, pad);
              /* dims r..d-1 pass through bit-exactly */
              const int rr = r ? r : d;
              for (int t = 0; t < n; t++)
                for (int h = 0; h < H; h++)
                  for (int e = rr; e < d; e++)
                    assert_true(got[(t * H + h) * d + e] == x0[t * stride + h * d + e]);
              free(x0);
              free(ref);
              free(got);
              rove_guarded_free(&gx);
              rove_plan_destroy(p);
            }
}

/* ---- attention properties ---------------------------------------------------------- */

/* A rotation's cos/sin depend on the position alone (docs/architecture.md, rotation
 * tables): default positions 0..n-1, the same positions given explicitly, in chunks
 * starting anywhere, or one at a time, and a cache append against the attention call
 * that rotates the same keys on the fly, all give the same bits. Before session 33,
 * explicit positions took one libm call per entry and defaults the block formulas, 1 ulp
 * apart in a few entries at long lengths (and a cache's keys could differ from the
 * forward's). n = 70000 at head_dim 128 reaches entries where the two round apart. */
static void test_rotation_depends_on_position_alone(void **state) {
  (void)state;
  const int32_t n = 70000, d = 128;
  rove_attention_config c;
  cfg(&c, 1, 1, d, 0, ROVE_PAIRING_HALF, ROVE_ROTATE_ROPE, 1, 0);
  rove_plan *p = make_plan(&c);
  float *x = xmalloc(sizeof(float) * (size_t)n * d), *y = xmalloc(sizeof(float) * (size_t)n * d);
  int32_t *pos = xmalloc(sizeof(int32_t) * (size_t)n);
  for (int64_t i = 0; i < (int64_t)n * d; i++) x[i] = 1.0f;
  for (int32_t i = 0; i < n; i++) pos[i] = i;
  memcpy(y, x, sizeof(float) * (size_t)n * d);
  assert_int_equal(rove_rotate(p, x, n, 1, 0, NULL, 0), ROVE_OK); /* defaults */
  assert_int_equal(rove_rotate(p, y, n, 1, 0, pos, 0), ROVE_OK);  /* explicit, one call */
  assert_memory_equal(x, y, sizeof(float) * (size_t)n * d);
  for (int64_t i = 0; i < (int64_t)n * d; i++) y[i] = 1.0f;
  for (int32_t t = 0; t < n;) { /* explicit, in chunks of 1 .. 97 starting anywhere */
    const int32_t m = (t * 7 + 1) % 97 + 1 < n - t ? (t * 7 + 1) % 97 + 1 : n - t;
    assert_int_equal(rove_rotate(p, y + (int64_t)t * d, m, 1, 0, pos + t, 0), ROVE_OK);
    t += m;
  }
  assert_memory_equal(x, y, sizeof(float) * (size_t)n * d);
  rove_plan_destroy(p);

  /* a cache's keys (appended 1 and 37 tokens at a time) and the forward's: same bits */
  const int32_t L = 300, H = 2;
  cfg(&c, H, H, 64, 0, ROVE_PAIRING_HALF, ROVE_ROTATE_ROVE, 1, 0);
  p = make_plan(&c);
  float *k = xmalloc(sizeof(float) * L * H * 64), *v = xmalloc(sizeof(float) * L * H * 64);
  float *q = xmalloc(sizeof(float) * 4 * H * 64), *o1 = xmalloc(sizeof(float) * 4 * H * 64);
  float *o2 = xmalloc(sizeof(float) * 4 * H * 64);
  for (int64_t i = 0; i < (int64_t)L * H * 64; i++)
    k[i] = sinf(0.37f * (float)i), v[i] = cosf(0.11f * (float)i);
  for (int64_t i = 0; i < 4 * H * 64; i++) q[i] = sinf(1.3f * (float)i);
  int32_t kpos[300], qpos[4];
  for (int32_t i = 0; i < L; i++) kpos[i] = 50000 + 3 * i;
  for (int32_t i = 0; i < 4; i++) qpos[i] = kpos[L - 4 + i];
  rove_kv_cache *kc = NULL;
  assert_int_equal(rove_kv_cache_create(p, 1, L, &kc), ROVE_OK);
  for (int32_t t = 0; t < L;) {
    const int32_t m = t % 2 ? 37 < L - t ? 37 : L - t : 1;
    assert_int_equal(rove_kv_cache_append(kc, m, k + (int64_t)t * H * 64, 0,
                                          v + (int64_t)t * H * 64, 0, kpos + t), ROVE_OK);
    t += m;
  }
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = 1, a.q_len = 4, a.q = q, a.out = o1, a.q_pos = qpos;
  assert_int_equal(rove_kv_cache_attention(kc, &a), ROVE_OK);
  a.kv_len = L, a.k = k, a.v = v, a.kv_pos = kpos, a.out = o2;
  assert_int_equal(rove_attention_forward(p, &a), ROVE_OK);
  assert_memory_equal(o1, o2, sizeof(float) * 4 * H * 64);
  rove_kv_cache_destroy(kc);
  rove_plan_destroy(p);
  free(x), free(y), free(pos), free(k), free(v), free(q), free(o1), free(o2);
}

static void test_rove_equals_convolution(void **state) {
  (void)state;
  struct {
    int B, Sq, Skv, H, Hkv, d, r, pairing, causal, window, pos;
    int64_t centre;
  } cs[] = {
      {1, 17, 40, 4, 2, 64, 0, 0, 1, 0, 0, 0},
      {2, 9, 33, 4, 1, 32, 16, 1, 0, 0, 1, 100},
      {1, 1, 150, 2, 2, 128, 0, 1, 1, 0, 0, 0},
      {1, 20, 60, 2, 1, 80, 40, 0, 0, 9, 1, -(1 << 20)},
      {1, 12, 30, 2, 2, 64, 0, 0, 1, 0, 1, INT32_MAX - 50},
      {2, 30, 30, 4, 4, 96, 64, 1, 1, 5, 1, 7},
      {1, 70, 100, 4, 2, 64, 0, 1, 1, 0, 1, 5000},
      {1, 1, 1100, 2, 1, 64, 32, 0, 1, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    rove_attention_config c;
    cfg(&c, cs[i].H, cs[i].Hkv, cs[i].d, cs[i].r, cs[i].pairing, ROVE_ROTATE_ROVE,
        cs[i].causal, cs[i].window);
    if (i == 3) { /* m != 1 must not leak into the value path */
      c.rope.scaling = ROVE_SCALING_YARN;
      c.rope.factor = 4;
      c.rope.original_max_position = 32;
    }
    rove_plan *p = make_plan(&c);
    double inv[ROVE_MAX_HEAD_DIM / 2], m;
    assert_int_equal(rove_rope_inv_freq(&c.rope, cs[i].d, inv, &m), ROVE_OK);
    prob pr;
    prob_init(&pr, cs[i].B, cs[i].Sq, cs[i].Skv, cs[i].H, cs[i].Hkv, cs[i].d, 40 + i);
    if (cs[i].pos) prob_random_pos(&pr, 50 + i, cs[i].centre);
    float *out = xmalloc((size_t)pr.nq * sizeof(float));
    double *conv = xmalloc((size_t)pr.nq * sizeof(double));
    double *direct = xmalloc((size_t)pr.nq * sizeof(double));
    rove_attention_args a = prob_args(&pr, out, NULL, cs[i].pos);
    forward_ok(p, &a);
    assert_int_equal(rove_oracle_attention_conv(&c, inv, m, &a, conv), 0);
    assert_int_equal(rove_oracle_attention(&c, inv, m, &a, direct, NULL), 0);
    double e = 0, mx = 1e-30;
    for (int64_t k = 0; k < pr.nq; k++) e = fmax(e, fabs(direct[k] - conv[k])), mx = fmax(mx, fabs(conv[k]));
    if (!(e / mx <= 1e-6)) fail_msg("oracle forms disagree: %g (case %zu)", e / mx, i);
    const double err = rove_max_rel_err_fd(out, conv, pr.nq);
    if (!(err <= OUT_TOL)) fail_msg("RoVE vs convolution form: %g (case %zu)", err, i);
    free(out);
    free(conv);
    free(direct);
    prob_free(&pr);
    rove_plan_destroy(p);
  }
  /* the convolution oracle refuses non-RoVE flags */
  rove_attention_config c;
  cfg(&c, 2, 2, 32, 0, 0, ROVE_ROTATE_ROPE, 1, 0);
  prob pr;
  prob_init(&pr, 1, 2, 2, 2, 2, 32, 1);
  double inv[16], o[128];
  assert_int_equal(rove_rope_inv_freq(&c.rope, 32, inv, NULL), ROVE_OK);
  rove_attention_args a = prob_args(&pr, NULL, NULL, 0);
  assert_int_equal(rove_oracle_attention_conv(&c, inv, 1.0, &a, o), -1);
  prob_free(&pr);
}

static void test_shift_invariance(void **state) {
  (void)state;
  static const int64_t shifts[] = {1000, -777, 1 << 20, 123456789};
  for (int rv = 0; rv <= 1; rv++)
    for (int mode = 0; mode < 3; mode++) {
      const int causal = mode != 1, window = mode == 2 ? 13 : (mode == 1 ? 40 : 0);
      rove_attention_config c;
      cfg(&c, 4, 2, 64, mode == 2 ? 48 : 0, mode % 2, rv ? ROVE_ROTATE_ROVE : ROVE_ROTATE_ROPE,
          causal, window);
      rove_plan *p = make_plan(&c);
      prob pr;
      prob_init(&pr, 2, rv ? 19 : 45, 57, 4, 2, 64, 60 + (uint64_t)mode);
      if (mode) prob_random_pos(&pr, 70 + (uint64_t)mode, 0);
      float *o0 = xmalloc((size_t)pr.nq * sizeof(float)), *o1 = xmalloc((size_t)pr.nq * sizeof(float));
      float *l0 = xmalloc((size_t)pr.nl * sizeof(float)), *l1 = xmalloc((size_t)pr.nl * sizeof(float));
      /* mode 0 uses NULL positions as the unshifted reference */
      rove_attention_args a = prob_args(&pr, o0, l0, mode != 0);
      forward_ok(p, &a);
      int32_t *q0 = xmalloc((size_t)pr.B * pr.Sq * sizeof(int32_t));
      int32_t *k0 = xmalloc((size_t)pr.B * pr.Skv * sizeof(int32_t));
      memcpy(q0, pr.qp, (size_t)pr.B * pr.Sq * sizeof(int32_t));
      memcpy(k0, pr.kp, (size_t)pr.B * pr.Skv * sizeof(int32_t));
      for (int s = 0; s < 4; s++) {
        for (int i = 0; i < pr.B * pr.Sq; i++) pr.qp[i] = (int32_t)(q0[i] + shifts[s]);
        for (int j = 0; j < pr.B * pr.Skv; j++) pr.kp[j] = (int32_t)(k0[j] + shifts[s]);
        rove_attention_args b = prob_args(&pr, o1, l1, 1);
        forward_ok(p, &b);
        char what[96];
        snprintf(what, sizeof what, "shift %lld rove=%d mode=%d out", (long long)shifts[s], rv, mode);
        assert_close(what, rove_max_rel_err_ff(o1, o0, pr.nq), OUT_TOL);
        snprintf(what, sizeof what, "shift %lld rove=%d mode=%d lse", (long long)shifts[s], rv, mode);
        assert_close(what, lse_err(l1, l0, pr.nl), 2e-5);
      }
      free(q0);
      free(k0);
      free(o0);
      free(o1);
      free(l0);
      free(l1);
      prob_free(&pr);
      rove_plan_destroy(p);
    }
}

/* attention(flags F) == rotate the inputs by hand with rove_rotate, attention with no
 * rotation, unrotate the output by hand. F = Q|K is "ordinary RoPE attention". */
static void test_flags_decompose_into_rotations(void **state) {
  (void)state;
  for (uint32_t rot = 0; rot < 16; rot++)
    for (int v = 0; v < 2; v++) {
      const int B = 2, Sq = (rot + (uint32_t)v) % 2 ? 70 : 11, Skv = 29, H = 4, Hkv = 2, d = 64;
      rove_attention_config c;
      cfg(&c, H, Hkv, d, v ? 32 : 0, v, rot, v ? 0 : 1, v ? 20 : 0);
      c.rope.scaling = v ? ROVE_SCALING_LINEAR : ROVE_SCALING_NONE; /* m = 1 either way */
      c.rope.factor = v ? 2 : 1; /* NONE does not read factor: it keeps its default */
      rove_plan *pf = make_plan(&c);
      c.rotate = 0;
      rove_plan *p0 = make_plan(&c);
      prob pr;
      prob_init(&pr, B, Sq, Skv, H, Hkv, d, 80 + rot);
      if (v) prob_random_pos(&pr, 90 + rot, -300);
      float *of = xmalloc((size_t)pr.nq * sizeof(float)), *o0 = xmalloc((size_t)pr.nq * sizeof(float));
      float *lf = xmalloc((size_t)pr.nl * sizeof(float)), *l0 = xmalloc((size_t)pr.nl * sizeof(float));
      /* v = 0: NULL positions in attention; pr.qp/kp hold the same defaults explicitly */
      rove_attention_args a = prob_args(&pr, of, lf, v);
      forward_ok(pf, &a);
      if (rot & ROVE_ROTATE_Q) assert_int_equal(rove_rotate(pf, pr.q, B * Sq, H, 0, pr.qp, 0), ROVE_OK);
      if (rot & ROVE_ROTATE_K) assert_int_equal(rove_rotate(pf, pr.k, B * Skv, Hkv, 0, pr.kp, 0), ROVE_OK);
      if (rot & ROVE_ROTATE_V) assert_int_equal(rove_rotate(pf, pr.v, B * Skv, Hkv, 0, pr.kp, 0), ROVE_OK);
      rove_attention_args b = prob_args(&pr, o0, l0, v);
      forward_ok(p0, &b);
      if (rot & ROVE_ROTATE_O) assert_int_equal(rove_rotate(pf, o0, B * Sq, H, 0, pr.qp, 1), ROVE_OK);
      char what[64];
      snprintf(what, sizeof what, "flags 0x%x v%d out", rot, v);
      assert_close(what, rove_max_rel_err_ff(of, o0, pr.nq), OUT_TOL);
      snprintf(what, sizeof what, "flags 0x%x v%d lse", rot, v);
      assert_close(what, lse_err(lf, l0, pr.nl), 2e-5);
      free(of);
      free(o0);
      free(lf);
      free(l0);
      prob_free(&pr);
      rove_plan_destroy(pf);
      rove_plan_destroy(p0);
    }
}

/* RoPE in a fused QKV buffer: rotate the q and k views in place with a token stride. */
static void test_rope_by_hand_on_fused_views(void **state) {
  (void)state;
  const int S = 40, H = 4, Hkv = 1, d = 32;
  const int64_t fw = (int64_t)(H + 2 * Hkv) * d;
  rove_attention_config c;
  cfg(&c, H, Hkv, d, 0, ROVE_PAIRING_INTERLEAVED, ROVE_ROTATE_ROPE, 1, 0);
  rove_plan *pf = make_plan(&c);
  c.rotate = 0;
  rove_plan *p0 = make_plan(&c);
  float *buf = xmalloc((size_t)(S * fw) * sizeof(float));
  rove_rng g;
  rove_rng_seed(&g, 5);
  rove_rng_fill(&g, buf, S * fw, -1, 1);
  float *o1 = xmalloc((size_t)S * H * d * sizeof(float)), *o2 = xmalloc((size_t)S * H * d * sizeof(float));
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = 1;
  a.q_len = a.kv_len = S;
  a.q = buf;
  a.k = buf + H * d;
  a.v = buf + (H + Hkv) * d;
  a.q_stride = a.k_stride = a.v_stride = fw;
  a.out = o1;
  forward_ok(pf, &a);
  assert_int_equal(rove_rotate(pf, buf, S, H, fw, NULL, 0), ROVE_OK);
  assert_int_equal(rove_rotate(pf, buf + H * d, S, Hkv, fw, NULL, 0), ROVE_OK);
  a.out = o2;
  forward_ok(p0, &a);
  assert_close("RoPE on fused views", rove_max_rel_err_ff(o1, o2, (int64_t)S * H * d), OUT_TOL);
  free(buf);
  free(o1);
  free(o2);
  rove_plan_destroy(pf);
  rove_plan_destroy(p0);
}

/* With every position identical, all rotations cancel: RoVE, RoPE and V|O all equal
 * attention without rotation (m = 1). */
static void test_identical_positions(void **state) {
  (void)state;
  static const uint32_t rots[] = {ROVE_ROTATE_ROVE, ROVE_ROTATE_ROPE,
                                  ROVE_ROTATE_V | ROVE_ROTATE_O};
  static const int32_t where[] = {0, 777777, -123, INT32_MAX};
  for (int ri = 0; ri < 3; ri++)
    for (int wi = 0; wi < 4; wi++) {
      rove_attention_config c;
      cfg(&c, 4, 2, 64, ri == 1 ? 32 : 0, wi % 2, rots[ri], wi % 2, 0);
      rove_plan *pf = make_plan(&c);
      c.rotate = 0;
      rove_plan *p0 = make_plan(&c);
      prob pr;
      prob_init(&pr, 1, 10, 25, 4, 2, 64, 100 + (uint64_t)wi);
      for (int i = 0; i < pr.Sq; i++) pr.qp[i] = where[wi];
      for (int j = 0; j < pr.Skv; j++) pr.kp[j] = where[wi];
      float *o1 = xmalloc((size_t)pr.nq * sizeof(float)), *o2 = xmalloc((size_t)pr.nq * sizeof(float));
      rove_attention_args a = prob_args(&pr, o1, NULL, 1);
      forward_ok(pf, &a);
      a.out = o2;
      forward_ok(p0, &a);
      assert_close("identical positions", rove_max_rel_err_ff(o1, o2, pr.nq), OUT_TOL);
      free(o1);
      free(o2);
      prob_free(&pr);
      rove_plan_destroy(pf);
      rove_plan_destroy(p0);
    }
}

static void run_threads(int B, int Sq, int Skv, int H, int Hkv, int d, int causal, int window,
                        uint32_t rot, int use_pos) {
  static const int counts[] = {1, 2, 3, 4, 0};
  prob pr;
  prob_init(&pr, B, Sq, Skv, H, Hkv, d, 7);
  if (use_pos) prob_random_pos(&pr, 8, 1000);
  float *oref = xmalloc((size_t)pr.nq * sizeof(float)), *o = xmalloc((size_t)pr.nq * sizeof(float));
  float *lref = xmalloc((size_t)pr.nl * sizeof(float)), *l = xmalloc((size_t)pr.nl * sizeof(float));
  for (int ci = 0; ci < 5; ci++) {
    rove_attention_config c;
    cfg(&c, H, Hkv, d, 0, 0, rot, causal, window);
    c.n_threads = counts[ci];
    rove_plan *p = make_plan(&c);
    assert_true(rove_plan_threads(p) >= 1);
    rove_attention_args a = prob_args(&pr, ci ? o : oref, ci ? l : lref, use_pos);
    forward_ok(p, &a);
    if (ci) {
      if (memcmp(o, oref, (size_t)pr.nq * sizeof(float)) != 0 ||
          memcmp(l, lref, (size_t)pr.nl * sizeof(float)) != 0)
        fail_msg("n_threads %d differs bitwise from n_threads 1 (B=%d Sq=%d Skv=%d H=%d Hkv=%d "
                 "d=%d causal=%d window=%d rot=0x%x pos=%d, isa %s)",
                 counts[ci], B, Sq, Skv, H, Hkv, d, causal, window, rot, use_pos,
                 rove_isa_name(rove_plan_isa(p)));
    }
    rove_plan_destroy(p);
  }
  free(oref);
  free(o);
  free(lref);
  free(l);
  prob_free(&pr);
}

static void test_thread_count_bitwise(void **state) {
  (void)state;
  run_threads(2, 300, 300, 8, 2, 64, 1, 0, ROVE_ROTATE_ROVE, 0); /* several query tiles */
  run_threads(1, 1, 3000, 4, 1, 64, 1, 0, ROVE_ROTATE_ROVE, 0);  /* decode: split-KV */
  run_threads(3, 1, 777, 2, 2, 128, 0, 0, ROVE_ROTATE_ROPE, 1);  /* batched decode */
  run_threads(1, 5, 1500, 4, 2, 32, 1, 100, ROVE_ROTATE_ROVE, 0); /* short chunk, window */
  run_threads(1, 200, 150, 4, 4, 80, 0, 0, ROVE_ROTATE_ROVE, 1); /* q_len > kv_len */
  run_threads(2, 1030, 1100, 8, 2, 32, 1, 0, ROVE_ROTATE_ROVE, 1); /* long, batch 2, GQA */
}

typedef struct {
  const rove_plan *p;
  const prob *pr;
  float *out, *lse;
  int reps;
  rove_status st;
} worker;

static void *worker_main(void *arg) {
  worker *w = arg;
  w->st = ROVE_OK;
  for (int r = 0; r < w->reps && w->st == ROVE_OK; r++) {
    rove_attention_args a = prob_args(w->pr, w->out, w->lse, 0);
    w->st = rove_attention_forward(w->p, &a);
  }
  return NULL;
}

static void test_one_plan_many_threads(void **state) {
  (void)state;
  enum { NW = 4 };
  for (int thr = 1; thr <= 2; thr++) {
    rove_attention_config c;
    cfg(&c, 4, 2, 64, 0, 0, ROVE_ROTATE_ROVE, 1, 0);
    c.n_threads = thr;
    rove_plan *p = make_plan(&c);
    prob pr;
    prob_init(&pr, 2, 70, 90, 4, 2, 64, 9);
    float *oref = xmalloc((size_t)pr.nq * sizeof(float)), *lref = xmalloc((size_t)pr.nl * sizeof(float));
    rove_attention_args a = prob_args(&pr, oref, lref, 0);
    forward_ok(p, &a);
    worker w[NW];
    pthread_t tid[NW];
    for (int i = 0; i < NW; i++) {
      w[i].p = p;
      w[i].pr = &pr;
      w[i].out = xmalloc((size_t)pr.nq * sizeof(float));
      w[i].lse = xmalloc((size_t)pr.nl * sizeof(float));
      w[i].reps = 3;
      assert_int_equal(pthread_create(&tid[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < NW; i++) assert_int_equal(pthread_join(tid[i], NULL), 0);
    for (int i = 0; i < NW; i++) {
      assert_int_equal(w[i].st, ROVE_OK);
      assert_memory_equal(w[i].out, oref, (size_t)pr.nq * sizeof(float));
      assert_memory_equal(w[i].lse, lref, (size_t)pr.nl * sizeof(float));
      free(w[i].out);
      free(w[i].lse);
    }
    free(oref);
    free(lref);
    prob_free(&pr);
    rove_plan_destroy(p);
  }
}

static void test_deterministic_repeats(void **state) {
  (void)state;
  rove_attention_config c;
  cfg(&c, 4, 1, 96, 64, 1, ROVE_ROTATE_ROVE, 1, 33);
  c.softcap = 20.0f;
  rove_plan *p = make_plan(&c);
  prob pr;
  prob_init(&pr, 2, 50, 120, 4, 1, 96, 10);
  prob_random_pos(&pr, 11, 5000);
  float *o0 = xmalloc((size_t)pr.nq * sizeof(float)), *o1 = xmalloc((size_t)pr.nq * sizeof(float));
  float *l0 = xmalloc((size_t)pr.nl * sizeof(float)), *l1 = xmalloc((size_t)pr.nl * sizeof(float));
  rove_attention_args a = prob_args(&pr, o0, l0, 1);
  forward_ok(p, &a);
  for (int r = 0; r < 4; r++) {
    memset(o1, 0xAB, (size_t)pr.nq * sizeof(float));
    rove_attention_args b = prob_args(&pr, o1, r % 2 ? l1 : NULL, 1);
    forward_ok(p, &b);
    assert_memory_equal(o0, o1, (size_t)pr.nq * sizeof(float));
    if (r % 2) assert_memory_equal(l0, l1, (size_t)pr.nl * sizeof(float));
  }
  /* a second plan with the same config gives the same bits */
  rove_plan *p2 = make_plan(&c);
  rove_attention_args b = prob_args(&pr, o1, l1, 1);
  forward_ok(p2, &b);
  assert_memory_equal(o0, o1, (size_t)pr.nq * sizeof(float));
  assert_memory_equal(l0, l1, (size_t)pr.nl * sizeof(float));
  free(o0);
  free(o1);
  free(l0);
  free(l1);
  prob_free(&pr);
  rove_plan_destroy(p);
  rove_plan_destroy(p2);
}

/* Split the keys in two chunks, attend to each with LSE, merge: equals the whole.
 * With RoVE both partial outputs are in the query frame, so the merge is exact. */
static void test_lse_merge(void **state) {
  (void)state;
  for (int v = 0; v < 4; v++) {
    const int B = 1, Sq = 13, Skv = 90, H = 4, Hkv = 2, d = 64, cut = v == 3 ? 1 : 37;
    rove_attention_config c;
    cfg(&c, H, Hkv, d, 0, v % 2, v < 2 ? ROVE_ROTATE_ROVE : ROVE_ROTATE_ROPE, v != 1, 0);
    rove_plan *p = make_plan(&c);
    prob pr;
    prob_init(&pr, B, Sq, Skv, H, Hkv, d, 200 + (uint64_t)v);
    if (v >= 2) prob_random_pos(&pr, 300, 0);
    else
      for (int i = 0; i < Sq; i++) pr.qp[i] = 5 + 7 * i; /* early queries miss chunk 2 */
    float *o = xmalloc((size_t)pr.nq * sizeof(float)), *l = xmalloc((size_t)pr.nl * sizeof(float));
    float *o1 = xmalloc((size_t)pr.nq * sizeof(float)), *l1 = xmalloc((size_t)pr.nl * sizeof(float));
    float *o2 = xmalloc((size_t)pr.nq * sizeof(float)), *l2 = xmalloc((size_t)pr.nl * sizeof(float));
    rove_attention_args a = prob_args(&pr, o, l, 1);
    forward_ok(p, &a);
    const int64_t kw = (int64_t)Hkv * d;
    rove_attention_args a1 = prob_args(&pr, o1, l1, 1), a2 = prob_args(&pr, o2, l2, 1);
    a1.kv_len = cut;
    a2.kv_len = Skv - cut;
    a2.k = pr.k + cut * kw;
    a2.v = pr.v + cut * kw;
    a2.kv_pos = pr.kp + cut;
    forward_ok(p, &a1);
    forward_ok(p, &a2);
    float *om = xmalloc((size_t)pr.nq * sizeof(float)), *lm = xmalloc((size_t)pr.nl * sizeof(float));
    for (int h = 0; h < H; h++)
      for (int i = 0; i < Sq; i++) {
        const int64_t li = (int64_t)h * Sq + i;
        const double x1 = l1[li], x2 = l2[li];
        const double mx = fmax(x1, x2);
        double w1 = 0, w2 = 0, lse = -INFINITY;
        if (!isinf(mx)) {
          lse = mx + log(exp(x1 - mx) + exp(x2 - mx));
          w1 = exp(x1 - lse);
          w2 = exp(x2 - lse);
        }
        lm[li] = (float)lse;
        for (int e = 0; e < d; e++) {
          const int64_t oi = ((int64_t)i * H + h) * d + e;
          om[oi] = (float)(w1 * o1[oi] + w2 * o2[oi]);
        }
      }
    char what[48];
    snprintf(what, sizeof what, "LSE merge v%d out", v);
    assert_close(what, rove_max_rel_err_ff(om, o, pr.nq), OUT_TOL);
    snprintf(what, sizeof what, "LSE merge v%d lse", v);
    assert_close(what, lse_err(lm, l, pr.nl), 2e-5);
    free(o), free(l), free(o1), free(l1), free(o2), free(l2), free(om), free(lm);
    prob_free(&pr);
    rove_plan_destroy(p);
  }
}

/* GQA reads KV head h / (H/Hkv): equal to MHA with each KV head repeated. */
static void test_gqa_equals_repeated_kv(void **state) {
  (void)state;
  const int B = 2, Sq = 21, Skv = 47, H = 8, Hkv = 2, d = 32, G = H / Hkv;
  rove_attention_config c;
  cfg(&c, H, Hkv, d, 0, 1, ROVE_ROTATE_ROVE, 1, 0);
  rove_plan *pg = make_plan(&c);
  cfg(&c, H, H, d, 0, 1, ROVE_ROTATE_ROVE, 1, 0);
  rove_plan *pm = make_plan(&c);
  prob pr;
  prob_init(&pr, B, Sq, Skv, H, Hkv, d, 400);
  prob_random_pos(&pr, 401, 90);
  float *k2 = xmalloc((size_t)B * Skv * H * d * sizeof(float)), *v2 = xmalloc((size_t)B * Skv * H * d * sizeof(float));
  for (int t = 0; t < B * Skv; t++)
    for (int h = 0; h < H; h++) {
      memcpy(k2 + ((int64_t)t * H + h) * d, pr.k + ((int64_t)t * Hkv + h / G) * d, (size_t)d * sizeof(float));
      memcpy(v2 + ((int64_t)t * H + h) * d, pr.v + ((int64_t)t * Hkv + h / G) * d, (size_t)d * sizeof(float));
    }
  float *o1 = xmalloc((size_t)pr.nq * sizeof(float)), *o2 = xmalloc((size_t)pr.nq * sizeof(float));
  rove_attention_args a = prob_args(&pr, o1, NULL, 1);
  forward_ok(pg, &a);
  a.k = k2;
  a.v = v2;
  a.out = o2;
  forward_ok(pm, &a);
  assert_close("GQA vs repeated KV", rove_max_rel_err_ff(o1, o2, pr.nq), 1e-6);
  free(k2), free(v2), free(o1), free(o2);
  prob_free(&pr);
  rove_plan_destroy(pg);
  rove_plan_destroy(pm);
}

/* A batch equals its items run one by one; strided views equal dense copies. */
static void test_batch_and_strides_consistent(void **state) {
  (void)state;
  const int B = 3, Sq = 16, Skv = 40, H = 4, Hkv = 2, d = 64;
  rove_attention_config c;
  cfg(&c, H, Hkv, d, 0, 0, ROVE_ROTATE_ROVE, 1, 0);
  rove_plan *p = make_plan(&c);
  prob pr;
  prob_init(&pr, B, Sq, Skv, H, Hkv, d, 500);
  prob_random_pos(&pr, 501, 1 << 16);
  float *ob = xmalloc((size_t)pr.nq * sizeof(float)), *os = xmalloc((size_t)pr.nq * sizeof(float));
  float *lb = xmalloc((size_t)pr.nl * sizeof(float)), *ls = xmalloc((size_t)pr.nl * sizeof(float));
  rove_attention_args a = prob_args(&pr, ob, lb, 1);
  forward_ok(p, &a);
  const int64_t qw = (int64_t)H * d, kw = (int64_t)Hkv * d;
  for (int b = 0; b < B; b++) {
    rove_attention_args s = prob_args(&pr, os + b * Sq * qw, ls + (int64_t)b * H * Sq, 1);
    s.batch = 1;
    s.q = pr.q + b * Sq * qw;
    s.k = pr.k + b * Skv * kw;
    s.v = pr.v + b * Skv * kw;
    s.q_pos = pr.qp + b * Sq;
    s.kv_pos = pr.kp + b * Skv;
    forward_ok(p, &s);
  }
  assert_close("batch vs one by one", rove_max_rel_err_ff(os, ob, pr.nq), 1e-6);
  assert_close("batch vs one by one (lse)", lse_err(ls, lb, pr.nl), 1e-6);
  /* padded copies of q, k, v and a padded output */
  const int64_t qs = qw + 9, ks = kw + 3, vs = kw + 17, ost = qw + 1;
  float *qp = xmalloc((size_t)(B * Sq * qs) * sizeof(float)), *kp = xmalloc((size_t)(B * Skv * ks) * sizeof(float));
  float *vp = xmalloc((size_t)(B * Skv * vs) * sizeof(float)), *op = xmalloc((size_t)(B * Sq * ost) * sizeof(float));
  for (int t = 0; t < B * Sq; t++) memcpy(qp + t * qs, pr.q + t * qw, (size_t)qw * sizeof(float));
  for (int t = 0; t < B * Skv; t++) {
    memcpy(kp + t * ks, pr.k + t * kw, (size_t)kw * sizeof(float));
    memcpy(vp + t * vs, pr.v + t * kw, (size_t)kw * sizeof(float));
  }
  rove_attention_args s = prob_args(&pr, op, ls, 1);
  s.q = qp, s.k = kp, s.v = vp;
  s.q_stride = qs, s.k_stride = ks, s.v_stride = vs, s.out_stride = ost;
  forward_ok(p, &s);
  for (int t = 0; t < B * Sq; t++) memcpy(os + t * qw, op + t * ost, (size_t)qw * sizeof(float));
  assert_close("strided vs dense", rove_max_rel_err_ff(os, ob, pr.nq), 1e-6);
  free(qp), free(kp), free(vp), free(op), free(ob), free(os), free(lb), free(ls);
  prob_free(&pr);
  rove_plan_destroy(p);
}

/* The frequencies the plan uses are the documented ones (NONE, LINEAR, NTK, divisors). */
static void test_inv_freq_basic(void **state) {
  (void)state;
  rove_rope_config rc;
  double inv[64], m = -1;
  rove_rope_config_init(&rc);
  assert_true(rc.theta == 10000.0 && rc.rotary_dim == 0 && rc.scaling == ROVE_SCALING_NONE);
  for (int sc = 0; sc < 4; sc++) {
    rove_rope_config_init(&rc);
    rc.rotary_dim = 96;
    rc.theta = 50000;
    double ff[48];
    for (int k = 0; k < 48; k++) ff[k] = 1.0 + 0.25 * (k % 3);
    if (sc == 1) rc.scaling = ROVE_SCALING_LINEAR, rc.factor = 4;
    if (sc == 2) rc.scaling = ROVE_SCALING_NTK, rc.factor = 3;
    if (sc == 3) rc.freq_factors = ff;
    assert_int_equal(rove_rope_inv_freq(&rc, 128, inv, &m), ROVE_OK);
    assert_true(m == 1.0);
    const double r = 96;
    for (int k = 0; k < 48; k++) {
      double theta = 50000, want;
      if (sc == 2) theta *= pow(3.0, r / (r - 2));
      want = pow(theta, -2.0 * k / r);
      if (sc == 1) want /= 4;
      if (sc == 3) want /= ff[k];
      if (!(fabs(inv[k] - want) <= 1e-12 * want))
        fail_msg("inv_freq scaling %d k=%d: %.17g want %.17g", sc, k, inv[k], want);
    }
  }
}

static void test_plan_introspection(void **state) {
  (void)state;
  rove_attention_config c, got;
  cfg(&c, 6, 3, 80, 0, 0, ROVE_ROTATE_ROVE, 1, 0);
  rove_plan *p = make_plan(&c);
  assert_int_equal(rove_plan_config(p, &got), ROVE_OK);
  assert_int_equal(got.rope.rotary_dim, 80);
  assert_true(fabs((double)got.scale - 1.0 / sqrt(80.0)) <= 1e-7);
  assert_int_equal(got.n_heads, 6);
  assert_int_equal(got.n_kv_heads, 3);
  assert_int_equal(rove_plan_threads(p), rove_default_threads());
  assert_true(rove_default_threads() >= 1);
  assert_true(rove_plan_isa(p) == rove_best_isa());
  rove_plan_destroy(p);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rotate_position_zero_is_identity),
      cmocka_unit_test(test_rotate_roundtrip),
      cmocka_unit_test(test_rotate_matches_oracle),
      cmocka_unit_test(test_rotation_depends_on_position_alone),
      cmocka_unit_test(test_rove_equals_convolution),
      cmocka_unit_test(test_shift_invariance),
      cmocka_unit_test(test_flags_decompose_into_rotations),
      cmocka_unit_test(test_rope_by_hand_on_fused_views),
      cmocka_unit_test(test_identical_positions),
      cmocka_unit_test(test_thread_count_bitwise),
      cmocka_unit_test(test_one_plan_many_threads),
      cmocka_unit_test(test_deterministic_repeats),
      cmocka_unit_test(test_lse_merge),
      cmocka_unit_test(test_gqa_equals_repeated_kv),
      cmocka_unit_test(test_batch_and_strides_consistent),
      cmocka_unit_test(test_inv_freq_basic),
      cmocka_unit_test(test_plan_introspection),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
