/* SPDX-License-Identifier: MIT */
/* rove_attention_forward against the double-precision oracle over a sweep of shapes,
 * flags, positions, strides and scalings (docs/DESIGN.md §4). Links the public librove.so. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rove_oracle.h"
#include "testutil.h"

#define OUT_TOL 2e-5
#define LSE_TOL 2e-5
#define SENTINEL 12345.5f

enum { POS_NULL = 0, POS_OFFSET, POS_RANDOM, POS_EXTREME, POS_MASKED, POS_ALL_MASKED };
enum { SC_NONE = 0, SC_YARN, SC_YARN_M, SC_LLAMA3, SC_LINEAR, SC_NTK, SC_FACTORS };

typedef struct {
  int B, Sq, Skv, H, Hkv, d, r; /* r = 0: rotary_dim default (head_dim) */
  int pairing;
  int last; /* rotary placement LAST (dims d-r..d-1 rotated) */
  uint32_t rot;
  int causal, window;
  float scale, softcap;
  int scaling;                /* SC_* */
  int pos;                    /* POS_* */
  int64_t pos_base;           /* offset (POS_OFFSET) or centre (POS_RANDOM) */
  int qpad, kpad, vpad, opad; /* extra floats per token row beyond the dense width */
  int fused;                  /* q/k/v are views into one [tokens][(H+2Hkv)*d] buffer */
  int lse;
  int threads;
  float amp;         /* inputs uniform in [-amp, amp) (0 = 1) */
  int expect_masked; /* at least one query must see no key */
  int angles;        /* explicit Selective-RoPE angles (random, |t| < 60) */
  float sink;        /* != 0: attention sinks, head h's logit sink + (h % 3 - 1) */
} tcase;

static tcase base_case(int B, int Sq, int Skv, int H, int Hkv, int d) {
  tcase t;
  memset(&t, 0, sizeof t);
  t.B = B;
  t.Sq = Sq;
  t.Skv = Skv;
  t.H = H;
  t.Hkv = Hkv;
  t.d = d;
  t.rot = ROVE_ROTATE_ROVE;
  t.causal = 1;
  t.lse = 1;
  t.amp = 1.0f;
  return t;
}

static void describe(const tcase *t, int threads, uint64_t seed, char *buf, size_t n) {
  snprintf(buf, n,
           "B=%d Sq=%d Skv=%d H=%d Hkv=%d d=%d r=%d pair=%d last=%d rot=0x%x causal=%d "
           "win=%d scale=%g cap=%g scaling=%d pos=%d base=%lld pads=%d/%d/%d/%d fused=%d lse=%d "
           "thr=%d amp=%g ang=%d sink=%g seed=%llu isa=%s",
           t->B, t->Sq, t->Skv, t->H, t->Hkv, t->d, t->r, t->pairing, t->last, t->rot, t->causal,
           t->window, (double)t->scale, (double)t->softcap, t->scaling, t->pos,
           (long long)t->pos_base, t->qpad, t->kpad, t->vpad, t->opad, t->fused, t->lse, threads,
           (double)t->amp, t->angles, (double)t->sink, (unsigned long long)seed,
           rove_isa_name(rove_best_isa()));
}

static double k_factors[ROVE_MAX_HEAD_DIM / 2];

static void set_scaling(rove_rope_config *rc, int sc, int32_t rdim) {
  switch (sc) {
    case SC_YARN:
      rc->scaling = ROVE_SCALING_YARN;
      rc->factor = 4.0;
      rc->original_max_position = 32;
      break;
    case SC_YARN_M:
      rc->scaling = ROVE_SCALING_YARN;
      rc->factor = 8.0;
      rc->original_max_position = 64;
      rc->attention_factor = 0.8;
      rc->truncate = 0;
      break;
    case SC_LLAMA3:
      rc->scaling = ROVE_SCALING_LLAMA3;
      rc->factor = 8.0;
      rc->original_max_position = 64;
      rc->low_freq_factor = 1.0;
      rc->high_freq_factor = 4.0;
      break;
    case SC_LINEAR:
      rc->scaling = ROVE_SCALING_LINEAR;
      rc->factor = 2.0;
      break;
    case SC_NTK:
      rc->scaling = ROVE_SCALING_NTK;
      rc->factor = 3.0;
      break;
    case SC_FACTORS: /* LongRoPE-style per-pair divisors */
      for (int32_t k = 0; k < rdim / 2; k++) k_factors[k] = 1.0 + 0.5 * (k % 5) + 0.01 * k;
      rc->freq_factors = k_factors;
      break;
    default: break;
  }
}

static int32_t rnd_int(rove_rng *g, int64_t lo, int64_t hi) { /* [lo, hi] */
  return (int32_t)(lo + (int64_t)(rove_rng_u64(g) % (uint64_t)(hi - lo + 1)));
}

static int32_t extreme_pos(rove_rng *g) {
  switch (rove_rng_u64(g) % 3) {
    case 0: return rnd_int(g, INT32_MAX - 300, INT32_MAX);
    case 1: return rnd_int(g, INT32_MIN, INT32_MIN + 300);
    default: return rnd_int(g, -150, 150);
  }
}

/* Fill explicit positions for the case (returns 0 if it uses NULL positions). */
static int make_positions(const tcase *t, rove_rng *g, int32_t *qp, int32_t *kp) {
  for (int b = 0; b < t->B; b++) {
    int32_t *q = qp + (int64_t)b * t->Sq, *k = kp + (int64_t)b * t->Skv;
    const int64_t per_batch = 1000 * (int64_t)b; /* different positions in each batch */
    switch (t->pos) {
      case POS_OFFSET:
        for (int j = 0; j < t->Skv; j++) k[j] = (int32_t)(t->pos_base + j);
        for (int i = 0; i < t->Sq; i++) q[i] = (int32_t)(t->pos_base + t->Skv - t->Sq + i);
        break;
      case POS_RANDOM: {
        const int64_t span = t->Skv / 2 + 3;
        int64_t c = t->pos_base + per_batch;
        if (c > (int64_t)INT32_MAX - span) c = (int64_t)INT32_MAX - span;
        if (c < (int64_t)INT32_MIN + span) c = (int64_t)INT32_MIN + span;
        for (int j = 0; j < t->Skv; j++) k[j] = rnd_int(g, c - span, c + span);
        for (int i = 0; i < t->Sq; i++) q[i] = rnd_int(g, c - span, c + span);
        break;
      }
      case POS_EXTREME:
        for (int j = 0; j < t->Skv; j++) k[j] = extreme_pos(g);
        for (int i = 0; i < t->Sq; i++) q[i] = extreme_pos(g);
        break;
      case POS_MASKED:
        /* keys at 100.., every other query far below them (and far away for windows) */
        for (int j = 0; j < t->Skv; j++) k[j] = (int32_t)(100 + j + per_batch);
        for (int i = 0; i < t->Sq; i++)
          q[i] = (i % 2) ? (int32_t)(100 + per_batch + rnd_int(g, 0, t->Skv + 2))
                         : (int32_t)(-1000000 - i);
        break;
      case POS_ALL_MASKED: /* every query before every key */
        for (int j = 0; j < t->Skv; j++) k[j] = (int32_t)(50 + 3 * j);
        for (int i = 0; i < t->Sq; i++) q[i] = (int32_t)(49 - (i * 7) % 20);
        break;
      default: return 0;
    }
  }
  return 1;
}

static void check_case(const tcase *t, uint64_t seed) {
  char desc[600];
  rove_rng g;
  rove_rng_seed(&g, seed);

  rove_attention_config c;
  rove_attention_config_init(&c, t->H, t->Hkv, t->d);
  c.rope.rotary_dim = t->r;
  c.rope.pairing = (rove_pairing)t->pairing;
  c.rope.placement = t->last ? ROVE_ROTARY_LAST : ROVE_ROTARY_FIRST;
  c.rotate = t->rot;
  c.causal = t->causal;
  c.window = t->window;
  c.scale = t->scale;
  c.softcap = t->softcap;
  /* threads 0 in a case: a third of the sweep runs on the library default, the rest on
   * one thread. The thread count cannot change a bit (test_properties checks that), and
   * single-threaded calls keep the suite fast when ctest runs suites side by side on a
   * small machine (OpenMP barriers spin against the other process). */
  c.n_threads = t->threads ? t->threads : (seed % 3 == 0 ? 0 : 1);
  describe(t, c.n_threads, seed, desc, sizeof desc);
  set_scaling(&c.rope, t->scaling, t->r ? t->r : t->d);
  rove_plan *p = NULL;
  rove_status st = rove_plan_create(&c, &p);
  if (st != ROVE_OK) fail_msg("plan_create: %s [%s]", rove_status_string(st), desc);
  double inv_freq[ROVE_MAX_HEAD_DIM / 2], m = 0;
  st = rove_rope_inv_freq(&c.rope, t->d, inv_freq, &m);
  if (st != ROVE_OK) fail_msg("rope_inv_freq: %s [%s]", rove_status_string(st), desc);

  const int64_t qrows = (int64_t)t->B * t->Sq, krows = (int64_t)t->B * t->Skv;
  const int64_t qw = (int64_t)t->H * t->d, kw = (int64_t)t->Hkv * t->d;
  rove_guarded gq, gk, gv, go, gl;
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = t->B;
  a.q_len = t->Sq;
  a.kv_len = t->Skv;
  const float amp = t->amp > 0 ? t->amp : 1.0f;
  if (t->fused) {
    assert_int_equal(t->Sq, t->Skv);
    const int64_t fw = qw + 2 * kw;
    rove_guarded_alloc(&gq, qrows * fw, 1);
    rove_rng_fill(&g, gq.data, gq.n, -amp, amp);
    a.q = gq.data;
    a.k = gq.data + qw;
    a.v = gq.data + qw + kw;
    a.q_stride = a.k_stride = a.v_stride = fw;
  } else {
    const int64_t qs = qw + t->qpad, ks = kw + t->kpad, vs = kw + t->vpad;
    rove_guarded_alloc(&gq, qrows * qs, 1);
    rove_guarded_alloc(&gk, krows * ks, 2);
    rove_guarded_alloc(&gv, krows * vs, 3);
    rove_rng_fill(&g, gq.data, gq.n, -amp, amp);
    rove_rng_fill(&g, gk.data, gk.n, -amp, amp);
    rove_rng_fill(&g, gv.data, gv.n, -1.0f, 1.0f);
    a.q = gq.data;
    a.k = gk.data;
    a.v = gv.data;
    a.q_stride = t->qpad ? qs : 0;
    a.k_stride = t->kpad ? ks : 0;
    a.v_stride = t->vpad ? vs : 0;
  }
  const int64_t os = qw + t->opad;
  rove_guarded_alloc(&go, qrows * os, 5);
  for (int64_t i = 0; i < go.n; i++) go.data[i] = SENTINEL;
  a.out = go.data;
  a.out_stride = t->opad ? os : 0;
  const int64_t nl = (int64_t)t->B * t->H * t->Sq;
  rove_guarded_alloc(&gl, nl, 3);
  for (int64_t i = 0; i < nl; i++) gl.data[i] = SENTINEL;
  a.lse = t->lse ? gl.data : NULL;

  int32_t *qp = malloc((size_t)qrows * sizeof(int32_t));
  int32_t *kp = malloc((size_t)krows * sizeof(int32_t));
  assert_non_null(qp);
  assert_non_null(kp);
  if (make_positions(t, &g, qp, kp)) {
    a.q_pos = qp;
    a.kv_pos = kp;
  }
  const int64_t half = (t->r ? t->r : t->d) / 2;
  double *qang = malloc(sizeof(double) * (size_t)(qrows * t->Hkv * half));
  double *kang = malloc(sizeof(double) * (size_t)(krows * t->Hkv * half));
  assert_non_null(qang);
  assert_non_null(kang);
  if (t->angles) {
    for (int64_t i = 0; i < qrows * t->Hkv * half; i++)
      qang[i] = 120.0 * (rove_rng_uniform(&g, 0, 1) - 0.5);
    for (int64_t i = 0; i < krows * t->Hkv * half; i++)
      kang[i] = 120.0 * (rove_rng_uniform(&g, 0, 1) - 0.5);
    a.q_angles = qang;
    a.kv_angles = kang;
  }

  double *ref = malloc((size_t)(qrows * qw) * sizeof(double));
  double *ref_lse = malloc((size_t)nl * sizeof(double));
  double *vis_lse = malloc((size_t)nl * sizeof(double)); /* without sinks: -inf = no key */
  float *got = malloc((size_t)(qrows * qw) * sizeof(float));
  float *sinks = malloc(sizeof(float) * (size_t)t->H);
  assert_true(ref && ref_lse && vis_lse && got && sinks);
  if (rove_oracle_attention(&c, inv_freq, m, &a, ref, vis_lse) != 0) fail_msg("oracle [%s]", desc);
  memcpy(ref_lse, vis_lse, sizeof(double) * (size_t)nl);
  if (t->sink != 0.0f) { /* the truth with the sinks (vis_lse keeps the rows' visibility) */
    for (int h = 0; h < t->H; h++) sinks[h] = t->sink + (float)(h % 3 - 1);
    a.sinks = sinks;
    if (rove_oracle_attention(&c, inv_freq, m, &a, ref, ref_lse) != 0) fail_msg("oracle [%s]", desc);
  }

  st = rove_attention_forward(p, &a);
  if (st != ROVE_OK) fail_msg("forward: %s [%s]", rove_status_string(st), desc);

  /* canaries and untouched gaps */
  if (!rove_guarded_intact(&go)) fail_msg("out canary overwritten [%s]", desc);
  if (!rove_guarded_intact(&gl)) fail_msg("lse canary overwritten [%s]", desc);
  if (!rove_guarded_intact(&gq)) fail_msg("q canary overwritten [%s]", desc);
  if (!t->fused && (!rove_guarded_intact(&gk) || !rove_guarded_intact(&gv)))
    fail_msg("k/v canary overwritten [%s]", desc);
  for (int64_t row = 0; row < qrows; row++) {
    for (int64_t e = qw; e < os; e++)
      if (go.data[row * os + e] != SENTINEL) fail_msg("out stride gap written [%s]", desc);
    memcpy(got + row * qw, go.data + row * os, (size_t)qw * sizeof(float));
  }
  if (!t->lse)
    for (int64_t i = 0; i < nl; i++)
      if (gl.data[i] != SENTINEL) fail_msg("lse written although NULL?! [%s]", desc);

  for (int64_t i = 0; i < qrows * qw; i++)
    if (!isfinite(got[i]))
      fail_msg("non-finite output at %lld: %g [%s]", (long long)i, (double)got[i], desc);

  /* fully masked rows: exact zeros and -inf */
  int64_t n_masked = 0;
  for (int b = 0; b < t->B; b++)
    for (int h = 0; h < t->H; h++)
      for (int i = 0; i < t->Sq; i++) {
        const int64_t li = ((int64_t)b * t->H + h) * t->Sq + i;
        const float *row = got + (((int64_t)b * t->Sq + i) * t->H + h) * t->d;
        if (isinf(vis_lse[li]) && vis_lse[li] < 0) {
          n_masked++;
          for (int e = 0; e < t->d; e++)
            if (row[e] != 0.0f)
              fail_msg("masked row b=%d h=%d i=%d has out[%d]=%g, want 0 [%s]", b, h, i, e,
                       (double)row[e], desc);
          /* the LSE of a row without keys: -inf, or exactly the head's sink */
          const float want = a.sinks ? a.sinks[h] : -INFINITY;
          if (t->lse && gl.data[li] != want)
            fail_msg("masked row b=%d h=%d i=%d has lse %g, want %g [%s]", b, h, i,
                     (double)gl.data[li], (double)want, desc);
        } else if (t->lse) {
          const double e = fabs((double)gl.data[li] - ref_lse[li]) / fmax(1.0, fabs(ref_lse[li]));
          if (!(e <= LSE_TOL))
            fail_msg("lse b=%d h=%d i=%d: got %.9g want %.9g (rel %g) [%s]", b, h, i,
                     (double)gl.data[li], ref_lse[li], e, desc);
        }
      }
  if (t->expect_masked && n_masked == 0) fail_msg("case has no masked row [%s]", desc);

  const double err = rove_max_rel_err_fd(got, ref, qrows * qw);
  if (!(err <= OUT_TOL)) {
    int64_t worst = 0;
    double we = -1;
    for (int64_t i = 0; i < qrows * qw; i++) {
      const double e = fabs((double)got[i] - ref[i]);
      if (e > we) we = e, worst = i;
    }
    const int64_t e_d = worst % t->d, h_ = (worst / t->d) % t->H, row = worst / qw;
    fail_msg("out rel err %g > %g; worst at row %lld head %lld dim %lld: got %.9g want %.9g [%s]",
             err, OUT_TOL, (long long)row, (long long)h_, (long long)e_d, (double)got[worst],
             ref[worst], desc);
  }

  free(ref);
  free(ref_lse);
  free(vis_lse);
  free(sinks);
  free(got);
  free(qp);
  free(kp);
  free(qang);
  free(kang);
  rove_guarded_free(&gq);
  if (!t->fused) {
    rove_guarded_free(&gk);
    rove_guarded_free(&gv);
  }
  rove_guarded_free(&go);
  rove_guarded_free(&gl);
  rove_plan_destroy(p);
}

/* ---- the sweep ----------------------------------------------------------------------- */

static const int k_dims[] = {32, 64, 80, 96, 128, 256};

static void test_head_dims(void **state) {
  (void)state;
  uint64_t seed = 100;
  for (size_t di = 0; di < sizeof k_dims / sizeof k_dims[0]; di++) {
    const int d = k_dims[di];
    /* RoVE, causal prefill, full rotary, HALF, GQA 2 */
    tcase t = base_case(1, 65, 65, 4, 2, d);
    check_case(&t, seed++);
    /* RoPE, non-causal, INTERLEAVED, rotary_dim d/2, MQA, chunk */
    t = base_case(1, 7, 129, 2, 1, d);
    t.rot = ROVE_ROTATE_ROPE;
    t.causal = 0;
    t.pairing = ROVE_PAIRING_INTERLEAVED;
    t.r = d / 2;
    check_case(&t, seed++);
    /* RoVE decode, partial rotary d-16, INTERLEAVED, GQA 4 */
    t = base_case(2, 1, 200, 8, 2, d);
    t.r = d - 16;
    t.pairing = ROVE_PAIRING_INTERLEAVED;
    check_case(&t, seed++);
    /* RoVE, small partial rotary (HALF partner is k + r/2), non-causal, q_len > kv_len */
    t = base_case(1, 40, 31, 2, 2, d);
    t.r = 2 * (d / 8);
    t.causal = 0;
    t.lse = 0;
    check_case(&t, seed++);
    /* RoPE causal chunked prefill, HALF partial */
    t = base_case(1, 17, 63, 4, 1, d);
    t.rot = ROVE_ROTATE_ROPE;
    t.r = d - 16;
    check_case(&t, seed++);
  }
}

static void test_kv_lengths(void **state) {
  (void)state;
  static const int lens[] = {1, 7, 63, 65, 129, 200};
  uint64_t seed = 200;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    const int kv = lens[li];
    const int qs[3] = {1, kv / 2 + 1, kv + 5};
    for (int qi = 0; qi < 3; qi++)
      for (int causal = 0; causal <= 1; causal++) {
        tcase t = base_case(1, qs[qi], kv, 4, (qi % 2) ? 1 : 2, 64);
        t.causal = causal;
        t.pairing = (int)((li + (size_t)qi) % 2);
        t.rot = (causal && qi == 1) ? ROVE_ROTATE_ROPE : ROVE_ROTATE_ROVE;
        t.expect_masked = causal && qi == 2; /* q_len > kv_len: the first rows see nothing */
        check_case(&t, seed++);
      }
  }
}

static void test_rotate_flags(void **state) {
  (void)state;
  uint64_t seed = 300;
  for (uint32_t rot = 0; rot < 16; rot++)
    for (int causal = 0; causal <= 1; causal++)
      for (int v = 0; v <= 1; v++) {
        /* q_len 9 takes the single-query-tile path, 70 the multi-tile one; each flag set
         * with and without YaRN (m != 1 must touch only q and k) sees both paths */
        tcase t = base_case(2, ((rot + (uint32_t)causal + (uint32_t)v) % 2) ? 70 : 9, 23, 4, 2, 32);
        t.r = 24;
        t.rot = rot;
        t.causal = causal;
        t.pairing = v ^ causal;
        t.pos = POS_RANDOM;
        t.pos_base = 50;
        t.scaling = v ? SC_YARN : SC_NONE;
        check_case(&t, seed++);
      }
}

static void test_gqa(void **state) {
  (void)state;
  static const int hkv[] = {8, 4, 2, 1}; /* ratios 1, 2, 4, 8 (MQA) */
  uint64_t seed = 400;
  for (int i = 0; i < 4; i++)
    for (int causal = 0; causal <= 1; causal++) {
      tcase t = base_case(2, 33, 70, 8, hkv[i], 64);
      t.causal = causal;
      t.rot = (i % 2) ? ROVE_ROTATE_ROPE : ROVE_ROTATE_ROVE;
      check_case(&t, seed++);
      t.Sq = 1; /* decode */
      t.rot = ROVE_ROTATE_ROVE;
      check_case(&t, seed++);
    }
}

static void test_windows(void **state) {
  (void)state;
  static const int wins[] = {1, 5, 64, 100};
  uint64_t seed = 500;
  for (int wi = 0; wi < 4; wi++)
    for (int causal = 0; causal <= 1; causal++)
      for (int pos = 0; pos <= 1; pos++) {
        tcase t = base_case(1, 30, 130, 4, 2, 64);
        t.window = wins[wi];
        t.causal = causal;
        t.pos = pos ? POS_RANDOM : POS_NULL;
        t.pos_base = 200;
        t.rot = (wi % 2) ? ROVE_ROTATE_ROPE : ROVE_ROTATE_ROVE;
        t.pairing = wi / 2;
        check_case(&t, seed++);
      }
  /* decode with a window */
  tcase t = base_case(1, 1, 200, 4, 4, 128);
  t.window = 17;
  check_case(&t, seed++);
}

/* Windows that end exactly on a tile edge: with tiles that are multiples of 16, a query
 * tile and a key tile span differences P_i - p_j whose extremes are = 15 (mod 16) when the
 * lengths are multiples of 16, so windows of 16k-1 put a key at distance exactly `window`
 * (invisible) at the edge of a tile that is otherwise fully visible. */
static void test_window_tile_edges(void **state) {
  (void)state;
  static const int wins[] = {15, 63, 127, 143, 16, 64};
  uint64_t seed = 550;
  for (int wi = 0; wi < 6; wi++)
    for (int causal = 0; causal <= 1; causal++) {
      tcase t = base_case(1, 256, 256, 2, 1, 32);
      t.window = wins[wi];
      t.causal = causal;
      t.lse = 0;
      check_case(&t, seed++);
      t = base_case(1, 1, 320, 2, 1, 32);
      t.window = wins[wi];
      t.causal = causal;
      check_case(&t, seed++);
      t = base_case(1, 48, 320, 2, 2, 32);
      t.window = wins[wi];
      t.causal = causal;
      t.rot = ROVE_ROTATE_ROPE;
      check_case(&t, seed++);
    }
}

static void test_softcap_scale(void **state) {
  (void)state;
  uint64_t seed = 600;
  static const float caps[] = {5.0f, 30.0f, 0.5f};
  for (int ci = 0; ci < 3; ci++)
    for (int causal = 0; causal <= 1; causal++) {
      tcase t = base_case(1, 21, 77, 4, 2, 64);
      t.softcap = caps[ci];
      t.causal = causal;
      t.amp = 3.0f;
      t.window = ci == 2 ? 9 : 0;
      check_case(&t, seed++);
    }
  tcase t = base_case(1, 19, 50, 2, 1, 96);
  t.scale = 0.37f; /* explicit scale */
  t.amp = 2.0f;
  check_case(&t, seed++);
  t.scale = -0.05f;
  t.softcap = 2.0f;
  check_case(&t, seed++);
  /* peaky softmax: large logits */
  t = base_case(1, 16, 90, 2, 2, 32);
  t.amp = 6.0f;
  check_case(&t, seed++);
}

static void test_positions(void **state) {
  (void)state;
  uint64_t seed = 700;
  struct {
    int pos;
    int64_t base;
  } pc[] = {
      {POS_RANDOM, 0},     /* unsorted, duplicated */
      {POS_RANDOM, -5000}, /* negative */
      {POS_OFFSET, -5000},
      {POS_OFFSET, 1 << 20}, /* near 2^20 */
      {POS_RANDOM, (1 << 20) + 7},
      {POS_OFFSET, INT32_MAX - 60}, /* the last position is INT32_MAX */
      {POS_OFFSET, INT32_MIN},      /* starts at INT32_MIN */
      {POS_RANDOM, INT32_MAX - 70},
      {POS_RANDOM, (int64_t)INT32_MIN + 70},
      {POS_EXTREME, 0}, /* both ends at once: differences ~2^32 */
  };
  for (size_t i = 0; i < sizeof pc / sizeof pc[0]; i++)
    for (int v = 0; v < 4; v++) {
      tcase t = base_case(2, 13, 61, 4, 2, 64);
      t.pos = pc[i].pos;
      t.pos_base = pc[i].base;
      t.causal = v & 1;
      t.rot = (v & 2) ? ROVE_ROTATE_ROPE : ROVE_ROTATE_ROVE;
      t.pairing = (int)(i % 2);
      if (pc[i].pos == POS_EXTREME && v == 3) t.window = 100;
      check_case(&t, seed++);
    }
  /* windows with extreme positions: P - p overflows int32 */
  for (int causal = 0; causal <= 1; causal++) {
    tcase t = base_case(1, 40, 80, 2, 1, 32);
    t.pos = POS_EXTREME;
    t.window = 1000;
    t.causal = causal;
    check_case(&t, seed++);
  }
}

static void test_masked_rows(void **state) {
  (void)state;
  uint64_t seed = 800;
  for (int causal = 0; causal <= 1; causal++)
    for (int rot = 0; rot <= 1; rot++) {
      tcase t = base_case(2, 12, 37, 4, 2, 64);
      t.pos = POS_MASKED;
      t.causal = causal;
      t.window = causal ? 0 : 50; /* non-causal: the window hides the far queries */
      t.rot = rot ? ROVE_ROTATE_ROVE : ROVE_ROTATE_ROPE;
      t.expect_masked = 1;
      check_case(&t, seed++);
      t.lse = 0;
      check_case(&t, seed++);
    }
  /* every query masked */
  tcase t = base_case(2, 5, 9, 2, 1, 32);
  t.pos = POS_ALL_MASKED;
  t.expect_masked = 1;
  check_case(&t, seed++);
  t.window = 3;
  t.causal = 0;
  t.pos = POS_EXTREME;
  t.expect_masked = 0;
  check_case(&t, seed++);
  t = base_case(1, 20, 3, 2, 1, 32); /* q_len >> kv_len, causal default positions */
  t.expect_masked = 1;
  check_case(&t, seed++);
  t.Sq = 1;
  t.Skv = 1;
  t.pos = POS_MASKED; /* single query far below the single key */
  t.expect_masked = 1;
  check_case(&t, seed++);
}

static void test_strides(void **state) {
  (void)state;
  uint64_t seed = 900;
  for (int lse = 0; lse <= 1; lse++)
    for (int causal = 0; causal <= 1; causal++) {
      tcase t = base_case(2, 45, 45, 4, 2, 64);
      t.fused = 1;
      t.lse = lse;
      t.causal = causal;
      check_case(&t, seed++);
      t = base_case(2, 9, 70, 4, 1, 80);
      t.qpad = 3;
      t.kpad = 64;
      t.vpad = 1;
      t.opad = 7;
      t.lse = lse;
      t.causal = causal;
      t.pos = POS_RANDOM;
      check_case(&t, seed++);
    }
  tcase t = base_case(1, 129, 129, 8, 8, 128); /* fused, wide heads, windowed */
  t.fused = 1;
  t.window = 30;
  check_case(&t, seed++);
}

static void test_scalings(void **state) {
  (void)state;
  uint64_t seed = 1000;
  static const int sc[] = {SC_YARN, SC_YARN_M, SC_LLAMA3, SC_LINEAR, SC_NTK, SC_FACTORS};
  for (int i = 0; i < 6; i++)
    for (int rot = 0; rot <= 3; rot++) {
      tcase t = base_case(1, rot < 2 ? 24 : 70, 150, 4, 2, 64);
      t.scaling = sc[i];
      t.rot = (rot % 2) ? ROVE_ROTATE_ROVE : ROVE_ROTATE_ROPE;
      t.pairing = i % 2;
      t.r = (i == 2) ? 48 : 0;
      t.pos = (i % 3 == 0) ? POS_OFFSET : POS_NULL;
      t.pos_base = 3000;
      check_case(&t, seed++);
    }
}

static void test_batch(void **state) {
  (void)state;
  uint64_t seed = 1100;
  for (int pos = 0; pos <= 1; pos++)
    for (int causal = 0; causal <= 1; causal++) {
      tcase t = base_case(3, 11, 40, 4, 2, 32);
      t.pos = pos ? POS_RANDOM : POS_NULL; /* per-batch positions differ */
      t.pos_base = 10;
      t.causal = causal;
      check_case(&t, seed++);
    }
  tcase t = base_case(4, 1, 90, 2, 1, 64); /* batched decode */
  t.pos = POS_RANDOM;
  check_case(&t, seed++);
}

static void test_thread_counts(void **state) {
  (void)state;
  uint64_t seed = 1200;
  for (int thr = 0; thr <= 4; thr++) {
    tcase t = base_case(2, 70, 100, 4, 2, 64);
    t.threads = thr;
    check_case(&t, seed++);
    t = base_case(1, 1, 300, 4, 1, 64);
    t.threads = thr;
    check_case(&t, seed++);
  }
}

/* Few query tiles and many keys: the keys are split over tasks and merged (split-KV). */
static void test_split_kv(void **state) {
  (void)state;
  uint64_t seed = 1250;
  struct {
    int B, Sq, Skv, H, Hkv, d, causal, window, pos, scaling;
    uint32_t rot;
  } cs[] = {
      {1, 1, 1000, 4, 1, 64, 1, 0, POS_NULL, SC_NONE, ROVE_ROTATE_ROVE},
      {1, 1, 4100, 8, 8, 128, 1, 0, POS_NULL, SC_YARN, ROVE_ROTATE_ROVE},
      {2, 1, 2049, 4, 2, 64, 0, 0, POS_RANDOM, SC_NONE, ROVE_ROTATE_ROPE},
      {1, 5, 2000, 4, 2, 80, 1, 300, POS_NULL, SC_NONE, ROVE_ROTATE_ROVE},
      {1, 40, 3000, 2, 1, 64, 1, 0, POS_NULL, SC_YARN, ROVE_ROTATE_ROVE},
      {1, 3, 1500, 2, 2, 32, 1, 0, POS_MASKED, SC_NONE, ROVE_ROTATE_ROVE},
      {1, 2, 2500, 2, 1, 64, 0, 100, POS_EXTREME, SC_NONE, ROVE_ROTATE_ROVE},
      {1, 1, 777, 2, 1, 96, 1, 0, POS_OFFSET, SC_LLAMA3, ROVE_ROTATE_V | ROVE_ROTATE_O},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
    for (int thr = 1; thr <= 2; thr++) {
      tcase t = base_case(cs[i].B, cs[i].Sq, cs[i].Skv, cs[i].H, cs[i].Hkv, cs[i].d);
      t.causal = cs[i].causal;
      t.window = cs[i].window;
      t.pos = cs[i].pos;
      t.pos_base = 1 << 20;
      t.scaling = cs[i].scaling;
      t.rot = cs[i].rot;
      t.threads = thr;
      t.pairing = (int)(i % 2);
      t.expect_masked = cs[i].pos == POS_MASKED;
      check_case(&t, seed++);
    }
}

static void test_long_sequence(void **state) {
  (void)state;
  tcase t = base_case(1, 1024, 1024, 12, 12, 64);
  check_case(&t, 1300);
  /* long, batch 2, GQA, queries fewer than keys, explicit positions */
  t = base_case(2, 1030, 1100, 8, 2, 32);
  t.pos = POS_RANDOM;
  check_case(&t, 1301);
}

/* ---- rotary placement LAST (DeepSeek MLA: the rotated dims at the end of each head) ---- */

/* The oracle sweep with the rotated block last: prefill and decode tiles, every rotation
 * flag, YaRN's m (only the rotated dims are scaled), split-KV, GQA, windows, extreme
 * positions and explicit angles, both pairings, several partial rotary dims. */
static void test_placement_last(void **state) {
  (void)state;
  uint64_t seed = 1400;
  for (size_t di = 0; di < sizeof k_dims / sizeof k_dims[0]; di++) {
    const int d = k_dims[di];
    tcase t = base_case(1, 65, 65, 4, 2, d); /* RoVE causal prefill, r = d/2, HALF */
    t.last = 1;
    t.r = d / 2;
    check_case(&t, seed++);
    t = base_case(1, 7, 129, 2, 1, d); /* RoPE non-causal, INTERLEAVED, r = d - 16 */
    t.last = 1;
    t.rot = ROVE_ROTATE_ROPE;
    t.causal = 0;
    t.pairing = ROVE_PAIRING_INTERLEAVED;
    t.r = d - 16;
    check_case(&t, seed++);
    t = base_case(2, 1, 200, 8, 2, d); /* RoVE decode, r = 16 (DeepSeek's 64 of 192 style) */
    t.last = 1;
    t.r = 16;
    t.pairing = (int)(di % 2);
    check_case(&t, seed++);
    t = base_case(1, 2, 2049, 4, 1, d); /* split-KV decode with YaRN */
    t.last = 1;
    t.r = d / 4 * 2 > 0 ? 2 * (d / 4) : 2;
    t.scaling = SC_YARN_M;
    t.pairing = (int)((di + 1) % 2);
    check_case(&t, seed++);
  }
  for (uint32_t rot = 0; rot < 16; rot++)
    for (int v = 0; v <= 1; v++) {
      tcase t = base_case(2, (rot + (uint32_t)v) % 2 ? 70 : 9, 23, 4, 2, 32);
      t.last = 1;
      t.r = 8 + 8 * v;
      t.rot = rot;
      t.pairing = v;
      t.pos = POS_RANDOM;
      t.pos_base = 50;
      t.scaling = v ? SC_YARN : SC_NONE;
      check_case(&t, seed++);
    }
  static const int sc[] = {SC_YARN, SC_YARN_M, SC_LLAMA3, SC_LINEAR, SC_NTK, SC_FACTORS};
  for (int i = 0; i < 6; i++) {
    tcase t = base_case(1, i % 2 ? 70 : 1, 150, 4, 2, 64);
    t.last = 1;
    t.scaling = sc[i];
    t.r = 32;
    t.pairing = i % 2;
    t.pos = POS_OFFSET;
    t.pos_base = 3000;
    check_case(&t, seed++);
  }
  for (int causal = 0; causal <= 1; causal++) {
    tcase t = base_case(2, 13, 61, 4, 2, 64); /* extreme positions with a window */
    t.last = 1;
    t.r = 40;
    t.pos = POS_EXTREME;
    t.window = 100;
    t.causal = causal;
    check_case(&t, seed++);
    t = base_case(2, 30, 45, 4, 2, 64); /* explicit angles (Selective RoPE), prefill */
    t.last = 1;
    t.r = 24;
    t.angles = 1;
    t.causal = causal;
    t.pairing = causal;
    check_case(&t, seed++);
    t.Sq = 1; /* and decode */
    t.rot = causal ? ROVE_ROTATE_ROPE : ROVE_ROTATE_ROVE;
    check_case(&t, seed++);
    t = base_case(1, 45, 45, 4, 2, 80); /* fused QKV views, windowed, strided output */
    t.last = 1;
    t.r = 48;
    t.fused = 1;
    t.window = 20;
    t.opad = 5;
    t.causal = causal;
    check_case(&t, seed++);
  }
}

/* The forward output of a plan with placement pl on the given tensors (dense, default
 * positions, 2 heads over 1 KV head). */
static void forward_placed(rove_rotary_placement pl, uint32_t rot, int pairing, int d, int r,
                           int Sq, int Skv, const float *q, const float *k, const float *v,
                           float *out, float *lse) {
  rove_attention_config c;
  rove_attention_config_init(&c, 2, 1, d);
  c.rope.rotary_dim = r;
  c.rope.pairing = (rove_pairing)pairing;
  c.rope.placement = pl;
  c.rope.scaling = ROVE_SCALING_YARN; /* m != 1: must scale exactly the rotated dims */
  c.rope.factor = 4.0;
  c.rope.original_max_position = 32;
  c.rotate = rot;
  c.n_threads = 1;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = 1, a.q_len = Sq, a.kv_len = Skv;
  a.q = q, a.k = k, a.v = v, a.out = out, a.lse = lse;
  assert_int_equal(rove_attention_forward(p, &a), ROVE_OK);
  rove_plan_destroy(p);
}

/* Head permutation that moves the last r dims to the front: y[e] = x[(e + d - r) % d] for
 * every head vector of n rows of width d (so a LAST-placed head becomes a FIRST one). */
static void rotate_dims_front(float *y, const float *x, int64_t rows, int d, int r) {
  for (int64_t i = 0; i < rows; i++)
    for (int e = 0; e < d; e++) y[i * d + e] = x[i * d + (e + d - r) % d];
}

/* LAST really rotates the last dims: FIRST on heads whose dims are cyclically permuted
 * (last r first) equals LAST on the original heads, up to the same permutation of the
 * output (q, k and, for RoVE, v and o). And r == head_dim: LAST is FIRST, bit for bit. */
static void test_placement_permutation(void **state) {
  (void)state;
  rove_rng g;
  rove_rng_seed(&g, 1500);
  static const uint32_t rots[] = {ROVE_ROTATE_ROVE, ROVE_ROTATE_ROPE,
                                  ROVE_ROTATE_V | ROVE_ROTATE_O | ROVE_ROTATE_K};
  static const int shapes[][4] = {
      {64, 16, 40, 40}, {96, 32, 1, 300}, {32, 2, 100, 37}, {128, 64, 20, 70}};
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
    for (size_t ri = 0; ri < sizeof rots / sizeof *rots; ri++)
      for (int pairing = 0; pairing < 2; pairing++) {
        const int d = shapes[si][0], r = shapes[si][1], Sq = shapes[si][2], Skv = shapes[si][3];
        const int64_t nq = (int64_t)Sq * 2, nk = Skv; /* head rows of q/out and of k/v */
        float *q = malloc(sizeof(float) * (size_t)(nq * d)),
              *k = malloc(sizeof(float) * (size_t)(nk * d));
        float *v = malloc(sizeof(float) * (size_t)(nk * d)),
              *qp = malloc(sizeof(float) * (size_t)(nq * d));
        float *kp = malloc(sizeof(float) * (size_t)(nk * d)),
              *vp = malloc(sizeof(float) * (size_t)(nk * d));
        float *o_last = malloc(sizeof(float) * (size_t)(nq * d)),
              *o_first = malloc(sizeof(float) * (size_t)(nq * d));
        float *o_perm = malloc(sizeof(float) * (size_t)(nq * d));
        float l_last[600], l_first[600];
        assert_true(q && k && v && qp && kp && vp && o_last && o_first && o_perm && nq <= 600);
        rove_rng_fill(&g, q, nq * d, -1.5f, 1.5f);
        rove_rng_fill(&g, k, nk * d, -1.5f, 1.5f);
        rove_rng_fill(&g, v, nk * d, -1.0f, 1.0f);
        rotate_dims_front(qp, q, nq, d, r);
        rotate_dims_front(kp, k, nk, d, r);
        rotate_dims_front(vp, v, nk, d, r);
        forward_placed(ROVE_ROTARY_LAST, rots[ri], pairing, d, r, Sq, Skv, q, k, v, o_last, l_last);
        forward_placed(ROVE_ROTARY_FIRST, rots[ri], pairing, d, r, Sq, Skv, qp, kp, vp, o_first,
                       l_first);
        rotate_dims_front(o_perm, o_last, nq, d, r);
        double worst = 0, scale = 0;
        for (int64_t i = 0; i < nq * d; i++) {
          worst = fmax(worst, fabs((double)o_perm[i] - (double)o_first[i]));
          scale = fmax(scale, fabs((double)o_first[i]));
        }
        if (!(worst <= 2e-6 * fmax(scale, 1e-30)))
          fail_msg("d=%d r=%d rot=0x%x pairing=%d: LAST vs permuted FIRST differ by %g (max %g)", d,
                   r, rots[ri], pairing, worst, scale);
        for (int64_t i = 0; i < nq; i++)
          if (l_last[i] != l_first[i] && /* equal: -inf for a query that sees no key */
              !(fabs(l_last[i] - l_first[i]) <= 2e-6 * fmax(1.0, fabs(l_first[i]))))
            fail_msg("d=%d r=%d: lse %g vs %g", d, r, l_last[i], l_first[i]);
        /* LAST is not FIRST when r < d (the placement is not ignored) */
        forward_placed(ROVE_ROTARY_FIRST, rots[ri], pairing, d, r, Sq, Skv, q, k, v, o_first,
                       l_first);
        double diff = 0;
        for (int64_t i = 0; i < nq * d; i++)
          diff = fmax(diff, fabs((double)o_first[i] - (double)o_last[i]));
        if (!(diff > 1e-3 * scale)) fail_msg("d=%d r=%d: FIRST and LAST agree (%g)", d, r, diff);
        /* r == d: the placements coincide, bit for bit */
        forward_placed(ROVE_ROTARY_LAST, rots[ri], pairing, d, d, Sq, Skv, q, k, v, o_last, l_last);
        forward_placed(ROVE_ROTARY_FIRST, rots[ri], pairing, d, d, Sq, Skv, q, k, v, o_first,
                       l_first);
        if (memcmp(o_last, o_first, sizeof(float) * (size_t)(nq * d)) ||
            memcmp(l_last, l_first, sizeof(float) * (size_t)nq))
          fail_msg("d=%d r=d: FIRST and LAST differ", d);
        free(q), free(k), free(v), free(qp), free(kp), free(vp), free(o_last), free(o_first),
            free(o_perm);
      }
}

/* rove_rotate and rove_rotate_angles with LAST against the oracle's placed rotation, and
 * r == head_dim bitwise equal to FIRST. */
static void test_rotate_placement(void **state) {
  (void)state;
  rove_rng g;
  rove_rng_seed(&g, 1600);
  static const int dims[][2] = {{64, 16}, {192, 64}, {80, 80}, {32, 2}, {128, 96}};
  for (size_t di = 0; di < sizeof dims / sizeof *dims; di++)
    for (int pairing = 0; pairing < 2; pairing++)
      for (int inverse = 0; inverse < 2; inverse++)
        for (int use_angles = 0; use_angles < 2; use_angles++) {
          const int d = dims[di][0], r = dims[di][1], H = 4, Hkv = 2, n = 37;
          const int64_t stride = (int64_t)H * d + 3, half = r / 2;
          rove_attention_config c;
          rove_attention_config_init(&c, H, Hkv, d);
          c.rope.rotary_dim = r;
          c.rope.pairing = (rove_pairing)pairing;
          c.rope.placement = ROVE_ROTARY_LAST;
          c.n_threads = 1;
          rove_plan *p = NULL;
          assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
          double inv_freq[ROVE_MAX_HEAD_DIM / 2], m;
          assert_int_equal(rove_rope_inv_freq(&c.rope, d, inv_freq, &m), ROVE_OK);
          float *x = malloc(sizeof(float) * (size_t)(n * stride)),
                *x0 = malloc(sizeof(float) * (size_t)(n * stride));
          double *ang = malloc(sizeof(double) * (size_t)(n * Hkv * half));
          int32_t pos[37];
          assert_true(x && x0 && ang);
          rove_rng_fill(&g, x0, n * stride, -2.0f, 2.0f);
          for (int i = 0; i < n; i++) pos[i] = (int32_t)(rove_rng_u64(&g) % 100000) - 50000;
          for (int64_t i = 0; i < n * Hkv * half; i++)
            ang[i] = 80.0 * (rove_rng_uniform(&g, 0, 1) - 0.5);
          memcpy(x, x0, sizeof(float) * (size_t)(n * stride));
          if (use_angles)
            assert_int_equal(rove_rotate_angles(p, x, n, H, stride, ang, Hkv, inverse), ROVE_OK);
          else
            assert_int_equal(rove_rotate(p, x, n, H, stride, pos, inverse), ROVE_OK);
          double worst = 0;
          for (int i = 0; i < n; i++)
            for (int h = 0; h < H; h++) {
              double y[ROVE_MAX_HEAD_DIM];
              for (int e = 0; e < d; e++) y[e] = x0[i * stride + h * d + e];
              if (use_angles)
                rove_oracle_rotate_angles_placed(y, d, r, (rove_pairing)pairing, ROVE_ROTARY_LAST,
                                                 ang + ((int64_t)i * Hkv + h / (H / Hkv)) * half,
                                                 inverse ? -1 : 1);
              else
                rove_oracle_rotate_placed(y, d, r, (rove_pairing)pairing, ROVE_ROTARY_LAST,
                                          inv_freq, pos[i], inverse ? -1 : 1);
              for (int e = 0; e < d; e++)
                worst = fmax(worst, fabs(x[i * stride + h * d + e] - y[e]));
              for (int e = 0; e < d - r; e++) /* the leading dims pass through exactly */
                if (x[i * stride + h * d + e] != x0[i * stride + h * d + e])
                  fail_msg("d=%d r=%d: dim %d of a LAST head changed", d, r, e);
            }
          for (int i = 0; i < n; i++)
            for (int64_t e = (int64_t)H * d; e < stride; e++)
              if (x[i * stride + e] != x0[i * stride + e]) fail_msg("stride gap written");
          if (!(worst <= 2e-6 * 2.0))
            fail_msg("rotate d=%d r=%d pairing=%d inverse=%d angles=%d: err %g", d, r, pairing,
                     inverse, use_angles, worst);
          if (r == d) { /* LAST == FIRST bitwise */
            rove_plan *pf = NULL;
            c.rope.placement = ROVE_ROTARY_FIRST;
            assert_int_equal(rove_plan_create(&c, &pf), ROVE_OK);
            float *xf = malloc(sizeof(float) * (size_t)(n * stride));
            assert_non_null(xf);
            memcpy(xf, x0, sizeof(float) * (size_t)(n * stride));
            if (use_angles)
              assert_int_equal(rove_rotate_angles(pf, xf, n, H, stride, ang, Hkv, inverse),
                               ROVE_OK);
            else
              assert_int_equal(rove_rotate(pf, xf, n, H, stride, pos, inverse), ROVE_OK);
            if (memcmp(xf, x, sizeof(float) * (size_t)(n * stride)))
              fail_msg("r == d: FIRST != LAST");
            free(xf);
            rove_plan_destroy(pf);
          }
          free(x), free(x0), free(ang);
          rove_plan_destroy(p);
        }
}

/* ---- attention sinks (gpt-oss: a learned logit per head in every softmax row) -------- */

/* Against the oracle: prefill and decode tiles, split-KV (the sink enters once, after the
 * merge), GQA, windows with softcap, rows without keys (output 0, LSE exactly the sink),
 * explicit angles, strides, RoPE and RoVE, sinks far above the logits (output -> 0, the
 * LSE the sink) and far below (no effect), 1 and 2 threads. */
static void test_sinks(void **state) {
  (void)state;
  uint64_t seed = 2600;
  static const float levels[] = {0.7f, -3.0f, 40.0f, -90.0f};
  for (int li = 0; li < 4; li++)
    for (int rot = 0; rot <= 1; rot++) {
      const uint32_t r = rot ? ROVE_ROTATE_ROVE : ROVE_ROTATE_ROPE;
      tcase t = base_case(2, 70, 70, 6, 2, 64); /* prefill, GQA 3:1 */
      t.rot = r, t.sink = levels[li], t.threads = 1 + rot;
      check_case(&t, seed++);
      t = base_case(1, 1, 3000, 4, 1, 128); /* decode, split over the keys */
      t.rot = r, t.sink = levels[li], t.threads = 2 - rot, t.scaling = SC_YARN;
      check_case(&t, seed++);
      t = base_case(1, 5, 2000, 4, 2, 80); /* a few rows, window, softcap */
      t.rot = r, t.sink = levels[li], t.window = 300, t.softcap = 20.0f;
      check_case(&t, seed++);
      t = base_case(2, 12, 37, 4, 2, 64); /* rows that see no key */
      t.rot = r, t.sink = levels[li], t.pos = POS_MASKED, t.expect_masked = 1;
      check_case(&t, seed++);
      t = base_case(1, 33, 33, 2, 2, 32); /* angles, strides, non-causal */
      t.rot = r, t.sink = levels[li], t.angles = 1, t.causal = 0, t.qpad = 3, t.opad = 5;
      check_case(&t, seed++);
    }
  tcase t = base_case(2, 5, 9, 2, 1, 32); /* every row without keys: zeros, LSE = sink */
  t.pos = POS_ALL_MASKED, t.expect_masked = 1, t.sink = 1.5f;
  check_case(&t, seed++);
}

/* ---- K / V with their heads apart (PyTorch's bhsd, transformers' caches) ---------------- */

/* x [B][L][Hkv][d] copied to heads apart: token stride ts, head stride hs, batch stride bs
 * (gaps filled with NaN, which no read may touch). */
static float *to_heads_apart(const float *x, int B, int L, int Hkv, int d, int64_t ts,
                             int64_t hs, int64_t bs, int64_t *n) {
  *n = (B - 1) * bs + (Hkv - 1) * hs + (L - 1) * ts + d;
  float *y = malloc(sizeof(float) * (size_t)*n);
  assert_non_null(y);
  for (int64_t i = 0; i < *n; i++) y[i] = NAN;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < L; t++)
      for (int h = 0; h < Hkv; h++)
        memcpy(y + b * bs + h * hs + t * ts, x + (((int64_t)b * L + t) * Hkv + h) * d,
               sizeof(float) * (size_t)d);
  return y;
}

/* The same call with K and V read through head / batch strides gives the same bits as the
 * dense layout: prefill, decode (rows and split paths), GQA, batch 2, windows, sinks; the
 * backward likewise; bad strides are refused. */
static void test_kv_head_strides(void **state) {
  (void)state;
  struct {
    int B, Lq, Lk, H, Hkv, d, causal, window, pad;
  } cs[] = {{2, 70, 70, 6, 2, 64, 1, 0, 0},   {1, 1, 3000, 8, 2, 64, 1, 0, 3},
            {2, 5, 700, 4, 4, 32, 1, 100, 1}, {1, 16, 300, 32, 8, 128, 1, 0, 0},
            {2, 9, 9, 2, 1, 16, 0, 0, 2}};
  for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++)
    for (int threads = 1; threads <= 2; threads++) {
      const int B = cs[ci].B, Lq = cs[ci].Lq, Lk = cs[ci].Lk, H = cs[ci].H, Hkv = cs[ci].Hkv,
                d = cs[ci].d, pad = cs[ci].pad;
      rove_attention_config c;
      rove_attention_config_init(&c, H, Hkv, d);
      c.causal = cs[ci].causal, c.window = cs[ci].window, c.n_threads = threads;
      rove_plan *p = NULL;
      assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
      rove_rng g;
      rove_rng_seed(&g, 3100 + ci);
      const int64_t nq = (int64_t)B * Lq * H * d, nk = (int64_t)B * Lk * Hkv * d;
      float *q = malloc(sizeof(float) * (size_t)nq), *k = malloc(sizeof(float) * (size_t)nk);
      float *v = malloc(sizeof(float) * (size_t)nk), *sk = malloc(sizeof(float) * (size_t)H);
      float *o0 = malloc(sizeof(float) * (size_t)nq), *o1 = malloc(sizeof(float) * (size_t)nq);
      float *l0 = malloc(sizeof(float) * (size_t)(B * H * Lq)), *l1 = malloc(sizeof(float) * (size_t)(B * H * Lq));
      assert_true(q && k && v && sk && o0 && o1 && l0 && l1);
      rove_rng_fill(&g, q, nq, -1, 1), rove_rng_fill(&g, k, nk, -1, 1), rove_rng_fill(&g, v, nk, -1, 1);
      rove_rng_fill(&g, sk, H, -1, 2);
      /* bhsd with padding: token stride d + pad, head stride (Lk + 2) (d + pad), batch
       * stride of all heads + 5 */
      const int64_t ts = d + pad, hs = (Lk + 2) * ts, bs = Hkv * hs + 5;
      int64_t n;
      float *ka = to_heads_apart(k, B, Lk, Hkv, d, ts, hs, bs, &n);
      float *va = to_heads_apart(v, B, Lk, Hkv, d, ts, hs, bs, &n);
      rove_attention_args a = {.batch = B, .q_len = Lq, .kv_len = Lk, .q = q, .k = k, .v = v,
                               .out = o0, .lse = l0, .sinks = ci % 2 ? sk : NULL};
      assert_int_equal(rove_attention_forward(p, &a), ROVE_OK);
      rove_attention_args b = a;
      b.k = ka, b.v = va, b.out = o1, b.lse = l1;
      b.k_stride = b.v_stride = pad ? ts : 0; /* 0: head_dim once the heads are apart */
      b.kv_head_stride = hs, b.k_batch_stride = b.v_batch_stride = bs;
      assert_int_equal(rove_attention_forward(p, &b), ROVE_OK);
      assert_memory_equal(o0, o1, sizeof(float) * (size_t)nq);
      assert_memory_equal(l0, l1, sizeof(float) * (size_t)(B * H * Lq));
      /* the backward over the strided K / V: the same gradients */
      float *dout = malloc(sizeof(float) * (size_t)nq), *g0[3], *g1[3];
      assert_non_null(dout);
      rove_rng_fill(&g, dout, nq, -1, 1);
      for (int i = 0; i < 3; i++) {
        g0[i] = malloc(sizeof(float) * (size_t)(i ? nk : nq));
        g1[i] = malloc(sizeof(float) * (size_t)(i ? nk : nq));
        assert_true(g0[i] && g1[i]);
      }
      rove_attention_grads gr = {.dout = dout, .dq = g0[0], .dk = g0[1], .dv = g0[2]};
      assert_int_equal(rove_attention_backward(p, &a, &gr), ROVE_OK);
      b.out = o0, b.lse = l0;
      gr.dq = g1[0], gr.dk = g1[1], gr.dv = g1[2];
      assert_int_equal(rove_attention_backward(p, &b, &gr), ROVE_OK);
      for (int i = 0; i < 3; i++) assert_memory_equal(g0[i], g1[i], sizeof(float) * (size_t)(i ? nk : nq));
      /* refused: a head stride below head_dim, a token stride below head_dim, a negative
       * batch stride, an output inside the strided K's extent, a batch stride that makes
       * the extent overflow */
      rove_attention_args bad = b;
      bad.out = o1, bad.lse = l1;
      bad.kv_head_stride = d - 1;
      assert_int_equal(rove_attention_forward(p, &bad), ROVE_ERR_INVALID_ARGUMENT);
      bad = b, bad.out = o1, bad.lse = l1, bad.k_stride = d - 1;
      assert_int_equal(rove_attention_forward(p, &bad), ROVE_ERR_INVALID_ARGUMENT);
      bad = b, bad.out = o1, bad.lse = l1, bad.v_batch_stride = -1;
      assert_int_equal(rove_attention_forward(p, &bad), ROVE_ERR_INVALID_ARGUMENT);
      bad = b, bad.out = ka + n - 1, bad.lse = l1;
      assert_int_equal(rove_attention_forward(p, &bad), ROVE_ERR_INVALID_ARGUMENT);
      if (B > 1) {
        bad = b, bad.out = o1, bad.lse = l1, bad.k_batch_stride = INT64_MAX / 2;
        assert_int_equal(rove_attention_forward(p, &bad), ROVE_ERR_SIZE_OVERFLOW);
        /* heads apart with a default batch stride: which axis is outer is unknown (kv_len
         * token strides would read batch 0's later heads as batch 1): refused */
        bad = b, bad.out = o1, bad.lse = l1, bad.k_batch_stride = 0;
        assert_int_equal(rove_attention_forward(p, &bad), ROVE_ERR_INVALID_ARGUMENT);
        bad = b, bad.out = o1, bad.lse = l1, bad.v_batch_stride = 0;
        assert_int_equal(rove_attention_forward(p, &bad), ROVE_ERR_INVALID_ARGUMENT);
      }
      for (int i = 0; i < 3; i++) free(g0[i]), free(g1[i]);
      free(dout), free(q), free(k), free(v), free(sk), free(o0), free(o1), free(l0), free(l1);
      free(ka), free(va);
      rove_plan_destroy(p);
    }
  /* a KV cache takes no K/V strides */
  rove_attention_config c;
  rove_attention_config_init(&c, 2, 1, 16);
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  rove_kv_cache *kc = NULL;
  assert_int_equal(rove_kv_cache_create(p, 1, 4, &kc), ROVE_OK);
  float kv[16] = {0}, q[32] = {0}, out[32];
  assert_int_equal(rove_kv_cache_append(kc, 1, kv, 0, kv, 0, NULL), ROVE_OK);
  rove_attention_args a = {.batch = 1, .q_len = 1, .q = q, .out = out, .kv_head_stride = 16};
  assert_int_equal(rove_kv_cache_attention(kc, &a), ROVE_ERR_INVALID_ARGUMENT);
  a.kv_head_stride = 0;
  assert_int_equal(rove_kv_cache_attention(kc, &a), ROVE_OK);
  rove_kv_cache_destroy(kc);
  rove_plan_destroy(p);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_head_dims),
      cmocka_unit_test(test_kv_lengths),
      cmocka_unit_test(test_rotate_flags),
      cmocka_unit_test(test_gqa),
      cmocka_unit_test(test_windows),
      cmocka_unit_test(test_window_tile_edges),
      cmocka_unit_test(test_softcap_scale),
      cmocka_unit_test(test_positions),
      cmocka_unit_test(test_masked_rows),
      cmocka_unit_test(test_strides),
      cmocka_unit_test(test_scalings),
      cmocka_unit_test(test_batch),
      cmocka_unit_test(test_thread_counts),
      cmocka_unit_test(test_split_kv),
      cmocka_unit_test(test_long_sequence),
      cmocka_unit_test(test_placement_last),
      cmocka_unit_test(test_placement_permutation),
      cmocka_unit_test(test_rotate_placement),
      cmocka_unit_test(test_sinks),
      cmocka_unit_test(test_kv_head_strides),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
