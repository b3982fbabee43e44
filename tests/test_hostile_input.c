/* SPDX-License-Identifier: MIT */
/* Hostile inputs (issue 13, item 9): values a real engine leaves in K/V rows that a query
 * cannot see (padding slots, unused cache rows: NaN, Inf, 3e38), NaN in keys a query can
 * see, context shifts past int32, and n_threads bounds.
 *
 * A key a query cannot see (causality, window) must not affect it whatever its K/V rows
 * hold: the outputs and LSE of every query that sees no garbage key equal the oracle on
 * clean data, through prefill tiles, the decode row kernel, the decode tile path, split-KV
 * merges and a KV cache. A NaN in a visible key follows the documented rule (rove.h,
 * docs/DESIGN.md §1): K -> every dim and the LSE of the query are NaN; V -> the output
 * dims the NaN reaches are NaN, the LSE stays finite; the same NaN pattern on every ISA.
 * Links the public librove.so; ctest reruns it per ISA cap. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rove_oracle.h"
#include "testutil.h"

typedef struct {
  int H, Hkv, d, q_len, kv_len, causal, window;
  uint32_t rotate;
  float softcap;
  int32_t q_pos0; /* 0: default positions; else query i at q_pos0 + i, key j at j */
  int cache;      /* 1: K/V appended to a KV cache, attended there (q_pos explicit) */
  int threads;
} hcase;

typedef struct {
  rove_attention_config cfg;
  rove_attention_args a;
  float *q, *k, *v, *out, *lse;
  int32_t *qpos, *kpos;
  int64_t nq, nk, rows;
} hprob;

static int64_t qpos_of(const hcase *c, int64_t i) {
  return c->q_pos0 ? (int64_t)c->q_pos0 + i : (int64_t)c->kv_len - c->q_len + i;
}

static int visible(int64_t qp, int64_t kp, const hcase *c) {
  const int64_t diff = qp - kp;
  if (c->causal && diff < 0) return 0;
  return c->window == 0 || (diff < 0 ? -diff : diff) < c->window;
}

static void make(hprob *p, const hcase *c, uint64_t seed) {
  memset(p, 0, sizeof *p);
  rove_rng rng;
  rove_rng_seed(&rng, seed);
  rove_attention_config_init(&p->cfg, c->H, c->Hkv, c->d);
  p->cfg.rotate = c->rotate;
  p->cfg.causal = c->causal;
  p->cfg.window = c->window;
  p->cfg.softcap = c->softcap;
  p->cfg.n_threads = c->threads;
  p->nq = (int64_t)c->q_len * c->H * c->d;
  p->nk = (int64_t)c->kv_len * c->Hkv * c->d;
  p->rows = (int64_t)c->q_len * c->H;
  p->q = malloc(sizeof(float) * p->nq);
  p->k = malloc(sizeof(float) * p->nk);
  p->v = malloc(sizeof(float) * p->nk);
  p->out = malloc(sizeof(float) * p->nq);
  p->lse = malloc(sizeof(float) * p->rows);
  p->kpos = malloc(sizeof(int32_t) * (size_t)c->kv_len);
  p->qpos = malloc(sizeof(int32_t) * (size_t)c->q_len);
  assert_true(p->q && p->k && p->v && p->out && p->lse && p->kpos && p->qpos);
  rove_rng_fill(&rng, p->q, p->nq, -2.0f, 2.0f);
  rove_rng_fill(&rng, p->k, p->nk, -2.0f, 2.0f);
  rove_rng_fill(&rng, p->v, p->nk, -1.0f, 1.0f);
  for (int j = 0; j < c->kv_len; j++) p->kpos[j] = j;
  for (int i = 0; i < c->q_len; i++) p->qpos[i] = (int32_t)qpos_of(c, i);
  p->a = (rove_attention_args){.batch = 1, .q_len = c->q_len, .kv_len = c->kv_len, .q = p->q,
                               .k = p->k, .v = p->v, .out = p->out, .lse = p->lse};
  if (c->q_pos0) p->a.q_pos = p->qpos, p->a.kv_pos = p->kpos;
}

static void release(hprob *p) {
  free(p->q), free(p->k), free(p->v), free(p->out), free(p->lse), free(p->kpos), free(p->qpos);
}

/* The problem through rove_attention_forward or a KV cache, on ISA isa (AUTO: the best). */
static void run_isa(hprob *p, const hcase *c, rove_isa isa) {
  rove_attention_config cfg = p->cfg;
  cfg.isa = isa;
  rove_plan *plan = NULL;
  assert_int_equal(rove_plan_create(&cfg, &plan), ROVE_OK);
  if (!c->cache) {
    assert_int_equal(rove_attention_forward(plan, &p->a), ROVE_OK);
  } else {
    rove_kv_cache *kc = NULL;
    assert_int_equal(rove_kv_cache_create(plan, 1, c->kv_len + 5, &kc), ROVE_OK);
    assert_int_equal(rove_kv_cache_append(kc, c->kv_len, p->k, 0, p->v, 0, p->kpos), ROVE_OK);
    rove_attention_args a = p->a;
    a.k = a.v = NULL;
    a.kv_pos = NULL;
    a.kv_len = 0;
    a.q_pos = p->qpos;
    assert_int_equal(rove_kv_cache_attention(kc, &a), ROVE_OK);
    rove_kv_cache_destroy(kc);
  }
  rove_plan_destroy(plan);
}

static void oracle(const hprob *p, double *out, double *lse) {
  double inv_freq[ROVE_MAX_HEAD_DIM / 2], m;
  assert_int_equal(rove_rope_inv_freq(&p->cfg.rope, p->cfg.head_dim, inv_freq, &m), ROVE_OK);
  rove_attention_args a = p->a;
  a.q_pos = p->qpos, a.kv_pos = p->kpos; /* the same positions, explicitly */
  assert_int_equal(rove_oracle_attention(&p->cfg, inv_freq, m, &a, out, lse), 0);
}

/* Output row (token i, head h) and LSE of a clean query against the oracle. */
static void check_row(const hprob *p, const hcase *c, const double *ref, const double *lse,
                      double scale, int64_t i, int64_t h) {
  const float *o = p->out + (i * c->H + h) * c->d;
  const double *e = ref + (i * c->H + h) * c->d;
  const double el = lse[h * c->q_len + i];
  const float gl = p->lse[h * c->q_len + i];
  if (isinf(el)) {
    assert_true(isinf(gl) && gl < 0);
    for (int x = 0; x < c->d; x++) assert_true(o[x] == 0.0f);
    return;
  }
  for (int x = 0; x < c->d; x++) {
    if (!(fabs(o[x] - e[x]) <= 2e-5 * scale))
      fail_msg("row %ld head %ld dim %d: %g, expected %g", (long)i, (long)h, x, o[x], e[x]);
  }
  if (!(fabs(gl - el) <= 2e-5 * fmax(1.0, fabs(el))))
    fail_msg("row %ld head %ld: lse %g, expected %g", (long)i, (long)h, gl, el);
}

static double max_abs(const double *x, int64_t n) {
  double m = 1e-30;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
  return m;
}

typedef int (*key_set)(int64_t j, const hcase *c);

/* Garbage g in the K rows (what & 1) and / or V rows (what & 2) of the keys in `bad`;
 * every query that sees none of them must equal the oracle on clean data. */
static void check_hidden_garbage(const hcase *c, key_set bad, const char *name) {
  static const float garbage[] = {NAN, INFINITY, -INFINITY, 3e38f, -3e38f};
  hprob p;
  make(&p, c, 77 + (uint64_t)c->kv_len);
  double *ref = malloc(sizeof(double) * p.nq), *lse = malloc(sizeof(double) * p.rows);
  float *k0 = malloc(sizeof(float) * p.nk), *v0 = malloc(sizeof(float) * p.nk);
  assert_true(ref && lse && k0 && v0);
  oracle(&p, ref, lse);
  const double scale = max_abs(ref, p.nq);
  memcpy(k0, p.k, sizeof(float) * p.nk);
  memcpy(v0, p.v, sizeof(float) * p.nk);
  int64_t clean = 0, hidden_bad = 0; /* rows checked; (row, garbage key) pairs hidden */
  for (int i = 0; i < c->q_len; i++) {
    int sees = 0;
    for (int64_t j = 0; j < c->kv_len; j++) {
      if (!bad(j, c)) continue;
      if (visible(qpos_of(c, i), j, c)) sees = 1;
      else hidden_bad++;
    }
    clean += !sees;
  }
  assert_true(clean > 0 && hidden_bad > 0); /* the case tests something */
  for (int what = 1; what <= 3; what++)
    for (size_t gi = 0; gi < sizeof garbage / sizeof garbage[0]; gi++) {
      memcpy(p.k, k0, sizeof(float) * p.nk);
      memcpy(p.v, v0, sizeof(float) * p.nk);
      for (int64_t j = 0; j < c->kv_len; j++) {
        if (!bad(j, c)) continue;
        for (int64_t x = 0; x < (int64_t)c->Hkv * c->d; x++) {
          if (what & 1) p.k[j * c->Hkv * c->d + x] = garbage[gi];
          if (what & 2) p.v[j * c->Hkv * c->d + x] = garbage[gi];
        }
      }
      run_isa(&p, c, ROVE_ISA_AUTO);
      for (int i = 0; i < c->q_len; i++) {
        int sees = 0;
        for (int64_t j = 0; j < c->kv_len && !sees; j++)
          sees = bad(j, c) && visible(qpos_of(c, i), j, c);
        if (sees) continue;
        for (int h = 0; h < c->H; h++) check_row(&p, c, ref, lse, scale, i, h);
      }
    }
  print_message("  %s: %s H=%d/%d d=%d q=%d kv=%d causal=%d window=%d softcap=%g: %ld clean "
                "rows, %ld hidden garbage pairs\n", name, c->cache ? "cache" : "plain", c->H,
                c->Hkv, c->d, c->q_len, c->kv_len, c->causal, c->window, c->softcap,
                (long)clean, (long)hidden_bad);
  free(ref), free(lse), free(k0), free(v0);
  release(&p);
}

static int last_key(int64_t j, const hcase *c) { return j == c->kv_len - 1; }
static int after_first(int64_t j, const hcase *c) { (void)c; return j >= 1; }
static int second_half(int64_t j, const hcase *c) { return j >= c->kv_len / 2; }
static int every_tenth(int64_t j, const hcase *c) { (void)c; return j % 10 == 0; }
static int mod16_is3(int64_t j, const hcase *c) { (void)c; return j % 16 == 3; }
static int after_q0(int64_t j, const hcase *c) { return j > c->q_pos0 + 1; }
/* keys outside the window of the last query (default positions) */
static int before_window(int64_t j, const hcase *c) { return j <= c->kv_len - 1 - c->window; }

static void test_prefill_hidden_garbage(void **state) {
  (void)state;
  /* H, Hkv, d, q_len, kv_len, causal, window, rotate, softcap, q_pos0, cache, threads */
  const hcase n5 = {2, 2, 64, 5, 5, 1, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 0};
  check_hidden_garbage(&n5, last_key, "causal n=5, key 4");
  check_hidden_garbage(&n5, after_first, "causal n=5, keys 1..4");
  const hcase rope5 = {2, 1, 32, 5, 5, 1, 0, ROVE_ROTATE_ROPE, 0, 0, 0, 1};
  check_hidden_garbage(&rope5, after_first, "causal n=5 RoPE MQA");
  const hcase n300 = {3, 1, 64, 300, 300, 1, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 0};
  check_hidden_garbage(&n300, second_half, "causal n=300, second half");
  const hcase n1000 = {4, 2, 128, 1000, 1000, 1, 5, ROVE_ROTATE_ROVE, 0, 0, 0, 0};
  check_hidden_garbage(&n1000, every_tenth, "causal window 5, every 10th key");
  const hcase nc = {2, 2, 80, 200, 200, 0, 7, ROVE_ROTATE_ROVE, 0, 0, 0, 0};
  check_hidden_garbage(&nc, mod16_is3, "two-sided window 7");
  const hcase cap = {2, 2, 64, 130, 130, 1, 0, ROVE_ROTATE_ROVE, 30, 0, 0, 0};
  check_hidden_garbage(&cap, second_half, "causal softcap 30");
  const hcase chunk = {2, 1, 96, 70, 300, 1, 8, ROVE_ROTATE_ROPE, 0, 0, 0, 2};
  check_hidden_garbage(&chunk, every_tenth, "chunked prefill, window 8");
}

static void test_decode_hidden_garbage(void **state) {
  (void)state;
  /* H, Hkv, d, q_len, kv_len, causal, window, rotate, softcap, q_pos0, cache, threads */
  const hcase cases[] = {
      {8, 2, 64, 1, 300, 1, 100, ROVE_ROTATE_ROVE, 0, 0, 0, 0},   /* rows kernel, window */
      {40, 1, 64, 1, 2048, 1, 1000, ROVE_ROTATE_ROVE, 0, 0, 0, 0}, /* 40 rows: tile path */
      {4, 4, 64, 1, 500, 1, 0, ROVE_ROTATE_ROVE, 0, 250, 0, 0},    /* keys after the query */
      {8, 2, 128, 4, 400, 1, 0, ROVE_ROTATE_ROVE, 0, 100, 0, 0},   /* a 16-row GQA group */
      {6, 3, 80, 3, 3000, 1, 0, ROVE_ROTATE_ROVE, 20, 1500, 0, 0}, /* split keys, softcap */
      {4, 4, 64, 1, 500, 1, 0, ROVE_ROTATE_ROVE, 0, 250, 1, 0},    /* the same via a cache */
      {8, 2, 128, 4, 400, 1, 0, ROVE_ROTATE_ROPE, 0, 100, 1, 0},
      {40, 1, 64, 2, 700, 1, 0, ROVE_ROTATE_ROVE, 0, 300, 1, 0},  /* cache, tile path */
      {6, 3, 80, 3, 3000, 1, 0, ROVE_ROTATE_ROVE, 20, 1500, 1, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_hidden_garbage(&cases[i], cases[i].q_pos0 ? after_q0 : before_window, "decode");
  const hcase win = {12, 4, 64, 1, 3000, 1, 500, ROVE_ROTATE_ROVE, 0, 2999, 1, 0};
  check_hidden_garbage(&win, before_window, "cache window 500, split keys");
}

/* NaN in a visible key, on every available ISA: K -> all dims and the LSE NaN of the
 * queries that see it, V (dim x) -> the output dims it reaches NaN, the LSE as the
 * oracle; every other query equals the oracle; the NaN pattern is the same on every ISA. */
static void check_visible_nan(const hcase *c, int64_t key, int in_v, int x) {
  hprob p;
  make(&p, c, 5 + (uint64_t)c->kv_len);
  double *ref = malloc(sizeof(double) * p.nq), *lse = malloc(sizeof(double) * p.rows);
  unsigned char *pat = malloc((size_t)(p.nq + p.rows)), *pat0 = malloc((size_t)(p.nq + p.rows));
  assert_true(ref && lse && pat && pat0);
  oracle(&p, ref, lse);
  const double scale = max_abs(ref, p.nq);
  /* KV head 0 only: its GQA group sees the NaN, the other heads never do */
  (in_v ? p.v : p.k)[key * c->Hkv * c->d + x] = NAN;
  const int group = c->H / c->Hkv;
  int ran = 0;
  for (int isa = ROVE_ISA_SCALAR; isa < ROVE_ISA_COUNT; isa++) {
    if (!rove_isa_available((rove_isa)isa)) continue;
    run_isa(&p, c, (rove_isa)isa);
    for (int i = 0; i < c->q_len; i++)
      for (int h = 0; h < c->H; h++) {
        const float *o = p.out + ((int64_t)i * c->H + h) * c->d;
        const float gl = p.lse[(int64_t)h * c->q_len + i];
        if (h >= group || !visible(qpos_of(c, i), key, c)) {
          check_row(&p, c, ref, lse, scale, i, h);
          continue;
        }
        if (!in_v) { /* K: every dim and the LSE */
          for (int y = 0; y < c->d; y++)
            if (!isnan(o[y])) fail_msg("%s: row %d head %d dim %d = %g, not NaN",
                                       rove_isa_name((rove_isa)isa), i, h, y, o[y]);
          assert_true(isnan(gl));
        } else { /* V: dim x is NaN; the LSE is the oracle's */
          if (!isnan(o[x])) fail_msg("%s: row %d head %d dim %d = %g, not NaN",
                                     rove_isa_name((rove_isa)isa), i, h, x, o[x]);
          const double el = lse[(int64_t)h * c->q_len + i];
          assert_true(fabs(gl - el) <= 2e-5 * fmax(1.0, fabs(el)));
        }
      }
    for (int64_t n = 0; n < p.nq; n++) pat[n] = (unsigned char)isnan(p.out[n]);
    for (int64_t n = 0; n < p.rows; n++) pat[p.nq + n] = (unsigned char)isnan(p.lse[n]);
    if (!ran) memcpy(pat0, pat, (size_t)(p.nq + p.rows));
    else assert_memory_equal(pat0, pat, (size_t)(p.nq + p.rows)); /* same as scalar */
    ran++;
  }
  print_message("  visible NaN in %s of key %ld (dim %d), q=%d kv=%d softcap=%g cache=%d: "
                "%d ISAs agree\n", in_v ? "V" : "K", (long)key, x, c->q_len, c->kv_len,
                c->softcap, c->cache, ran);
  free(ref), free(lse), free(pat), free(pat0);
  release(&p);
}

static void test_visible_nan(void **state) {
  (void)state;
  /* H, Hkv, d, q_len, kv_len, causal, window, rotate, softcap, q_pos0, cache, threads */
  const hcase pre = {4, 2, 64, 70, 70, 1, 0, ROVE_ROTATE_ROPE, 0, 0, 0, 0};
  check_visible_nan(&pre, 3, 0, 5);
  check_visible_nan(&pre, 0, 0, 0); /* row 0 sees only the NaN key */
  check_visible_nan(&pre, 3, 1, 5);
  check_visible_nan(&pre, 69, 1, 63);
  const hcase rove = {2, 1, 64, 70, 70, 1, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 0};
  check_visible_nan(&rove, 10, 0, 7);
  check_visible_nan(&rove, 10, 1, 7);
  const hcase cap = {2, 2, 64, 40, 40, 1, 0, ROVE_ROTATE_ROPE, 25, 0, 0, 0};
  check_visible_nan(&cap, 0, 0, 1);
  check_visible_nan(&cap, 20, 0, 1);
  /* decode: rows kernel, split keys (the merge must keep the NaN), window, cache, tile path */
  const hcase dec = {8, 2, 64, 1, 4096, 1, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 0};
  check_visible_nan(&dec, 10, 0, 3);
  const hcase decw = {8, 2, 64, 1, 4096, 1, 100, ROVE_ROTATE_ROVE, 0, 0, 0, 0};
  check_visible_nan(&decw, 4000, 0, 3);
  check_visible_nan(&decw, 4090, 1, 3);
  const hcase decc = {8, 2, 64, 2, 3000, 1, 0, ROVE_ROTATE_ROVE, 10, 2000, 1, 0};
  check_visible_nan(&decc, 1500, 0, 3);
  const hcase dect = {40, 1, 64, 1, 2048, 1, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 0};
  check_visible_nan(&dect, 77, 0, 3);
}

/* Threads change no bit, with garbage in hidden rows as well. */
static void test_hidden_garbage_threads_bitwise(void **state) {
  (void)state;
  const hcase shapes[] = {{4, 2, 64, 600, 600, 1, 9, ROVE_ROTATE_ROVE, 0, 0, 0, 1},
                          {8, 2, 64, 1, 4096, 1, 700, ROVE_ROTATE_ROVE, 0, 0, 0, 1}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    hcase c = shapes[s];
    hprob one, more;
    make(&one, &c, 3);
    for (int64_t n = 0; n < one.nk; n += 7) one.v[n] = NAN, one.k[n] = 3e38f;
    run_isa(&one, &c, ROVE_ISA_AUTO);
    for (int t = 2; t <= 3; t++) {
      c.threads = t;
      make(&more, &c, 3);
      for (int64_t n = 0; n < more.nk; n += 7) more.v[n] = NAN, more.k[n] = 3e38f;
      run_isa(&more, &c, ROVE_ISA_AUTO);
      assert_memory_equal(one.out, more.out, sizeof(float) * (size_t)one.nq);
      assert_memory_equal(one.lse, more.lse, sizeof(float) * (size_t)one.rows);
      release(&more);
    }
    release(&one);
  }
}

/* rove_kv_cache_shift taking a position out of int32, either way: SIZE_OVERFLOW, and the
 * positions and the stored rows (seen through attention) unchanged. */
static void check_shift_overflow(int32_t pos0, int32_t delta) {
  rove_attention_config cfg;
  rove_attention_config_init(&cfg, 2, 2, 32);
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&cfg, &p), ROVE_OK);
  rove_kv_cache *kc = NULL;
  assert_int_equal(rove_kv_cache_create(p, 1, 16, &kc), ROVE_OK);
  enum { N = 8 };
  float k[N * 64], v[N * 64], q[64], out0[64], out1[64];
  rove_rng rng;
  rove_rng_seed(&rng, 11);
  rove_rng_fill(&rng, k, N * 64, -1, 1);
  rove_rng_fill(&rng, v, N * 64, -1, 1);
  rove_rng_fill(&rng, q, 64, -1, 1);
  int32_t pos[N], before[N], after[N], qp = pos0 + N - 1;
  for (int j = 0; j < N; j++) pos[j] = pos0 + j;
  assert_int_equal(rove_kv_cache_append(kc, N, k, 0, v, 0, pos), ROVE_OK);
  rove_attention_args a = {.batch = 1, .q_len = 1, .q = q, .out = out0, .q_pos = &qp};
  assert_int_equal(rove_kv_cache_attention(kc, &a), ROVE_OK);
  assert_int_equal(rove_kv_cache_positions(kc, before), ROVE_OK);
  int first = -1; /* the first token the shift takes out of int32 */
  for (int j = N - 1; j >= 0; j--) {
    const int64_t np = (int64_t)pos[j] + delta;
    if (np < INT32_MIN || np > INT32_MAX) first = j;
  }
  assert_true(first >= 0);
  assert_int_equal(rove_kv_cache_shift(kc, first, first + 1, delta), ROVE_ERR_SIZE_OVERFLOW);
  assert_int_equal(rove_kv_cache_shift(kc, first, N, delta), ROVE_ERR_SIZE_OVERFLOW);
  assert_int_equal(rove_kv_cache_shift(kc, 0, N, delta), ROVE_ERR_SIZE_OVERFLOW);
  assert_int_equal(rove_kv_cache_positions(kc, after), ROVE_OK);
  assert_memory_equal(before, after, sizeof before);
  assert_memory_equal(pos, after, sizeof pos);
  a.out = out1;
  assert_int_equal(rove_kv_cache_attention(kc, &a), ROVE_OK);
  assert_memory_equal(out0, out1, sizeof out0);
  assert_int_equal(rove_kv_cache_length(kc), N);
  /* a shift that stays in range still works */
  assert_int_equal(rove_kv_cache_shift(kc, 0, N, delta > 0 ? -1 : 1), ROVE_OK);
  rove_kv_cache_destroy(kc);
  rove_plan_destroy(p);
}

static void test_shift_out_of_int32(void **state) {
  (void)state;
  check_shift_overflow(INT32_MIN + 3, -10);        /* below INT32_MIN */
  check_shift_overflow(INT32_MIN, -1);
  check_shift_overflow(INT32_MIN + 3, INT32_MIN);  /* the most negative delta */
  check_shift_overflow(INT32_MAX - 10, 10);        /* above INT32_MAX */
  check_shift_overflow(INT32_MAX - 7, INT32_MAX);
  check_shift_overflow(-5, INT32_MIN);             /* -5 + INT32_MIN < INT32_MIN */
}

/* n_threads is bounded by ROVE_MAX_THREADS at plan creation, and a plan at the bound runs
 * a one-token decode and a small prefill with the bits of one thread. */
static void test_thread_bound(void **state) {
  (void)state;
  rove_attention_config cfg;
  rove_attention_config_init(&cfg, 4, 2, 64);
  rove_plan *p = NULL;
  const int32_t bad[] = {ROVE_MAX_THREADS + 1, 100000, INT32_MAX, -1};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cfg.n_threads = bad[i];
    assert_int_equal(rove_plan_create(&cfg, &p), ROVE_ERR_INVALID_ARGUMENT);
    assert_null(p);
  }
  rove_gla_config g;
  rove_gla_config_init(&g, 2, 16, 16);
  rove_gla_plan *gp = NULL;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    g.n_threads = bad[i];
    assert_int_equal(rove_gla_plan_create(&g, &gp), ROVE_ERR_INVALID_ARGUMENT);
    assert_null(gp);
  }
  g.n_threads = ROVE_MAX_THREADS;
  assert_int_equal(rove_gla_plan_create(&g, &gp), ROVE_OK);
  rove_gla_plan_destroy(gp);
  const hcase shapes[] = {{4, 2, 64, 1, 2000, 1, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 1},
                          {4, 2, 64, 1, 2000, 1, 0, ROVE_ROTATE_ROVE, 0, 0, 1, 1},
                          {4, 2, 64, 300, 300, 1, 0, ROVE_ROTATE_ROVE, 0, 0, 0, 1}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    hcase c = shapes[s];
    hprob one, big;
    make(&one, &c, 8);
    run_isa(&one, &c, ROVE_ISA_AUTO);
    c.threads = ROVE_MAX_THREADS;
    make(&big, &c, 8);
    rove_plan *bp = NULL;
    assert_int_equal(rove_plan_create(&big.cfg, &bp), ROVE_OK);
    assert_int_equal(rove_plan_threads(bp), ROVE_MAX_THREADS);
    rove_plan_destroy(bp);
    run_isa(&big, &c, ROVE_ISA_AUTO);
    assert_memory_equal(one.out, big.out, sizeof(float) * (size_t)one.nq);
    assert_memory_equal(one.lse, big.lse, sizeof(float) * (size_t)one.rows);
    release(&one), release(&big);
  }
}

/* Huge finite logits (found by the softcap work): the softmax exponent must be formed as
 * (s - m) log2e. As s log2e - m log2e (one FMA, m log2e rounded) its error is |m| 2^-24:
 * AVX2 gave a NaN LSE at logits ~3e10 and, at ~3e12, output 0 and LSE -inf (as if no key
 * were visible) with ROVE_OK. Three keys with logits (1, 2, 3) * L, so the largest one
 * takes all the weight: out = its value row, LSE = 3 L; through the row kernel (1 query),
 * the tile path (40 queries) and a KV cache; every ISA via ctest's ISA reruns. */
static void test_huge_logits(void **state) {
  (void)state;
  enum { D = 64, NQ = 40, NK = 3 };
  const double mags[] = {1e3, 1e6, 1e9, 3e10, 3e12, 1e15, 1e20, 1e25, 1e30, 1e35, 1e37};
  for (size_t mi = 0; mi < sizeof mags / sizeof mags[0]; mi++) {
    for (int nq = 1; nq <= NQ; nq += NQ - 1) {
      for (int cached = 0; cached <= 1; cached++) {
        rove_attention_config c;
        rove_attention_config_init(&c, 1, 1, D);
        c.rotate = 0, c.causal = 0, c.n_threads = 1, c.scale = 1.0f;
        rove_plan *p = NULL;
        assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
        float q[NQ * D] = {0}, k[NK * D] = {0}, v[NK * D], out[NQ * D], lse[NQ];
        /* logit_j = q[0] k_j[0] = (j + 1) L with q[0] = sqrt(L), k_j[0] = (j + 1) sqrt(L) */
        const double r = sqrt(mags[mi]);
        for (int i = 0; i < nq; i++) q[i * D] = (float)r;
        for (int j = 0; j < NK; j++) {
          k[j * D] = (float)(r * (j + 1));
          for (int x = 0; x < D; x++) v[j * D + x] = (float)(j + 1) + 0.01f * (float)x;
        }
        const double want_lse = (double)(float)r * (double)(float)(r * 3);
        rove_attention_args a = {0};
        a.batch = 1, a.q_len = nq, a.q = q, a.out = out, a.lse = lse;
        rove_kv_cache *kc = NULL;
        rove_status st;
        if (cached) {
          assert_int_equal(rove_kv_cache_create(p, 1, NK, &kc), ROVE_OK);
          assert_int_equal(rove_kv_cache_append(kc, NK, k, 0, v, 0, NULL), ROVE_OK);
          int32_t qp[NQ];
          for (int i = 0; i < nq; i++) qp[i] = NK - 1;
          a.q_pos = qp;
          st = rove_kv_cache_attention(kc, &a);
        } else {
          a.kv_len = NK, a.k = k, a.v = v;
          st = rove_attention_forward(p, &a);
        }
        assert_int_equal(st, ROVE_OK);
        for (int i = 0; i < nq; i++) {
          for (int x = 0; x < D; x++)
            if (fabsf(out[i * D + x] - v[2 * D + x]) > 1e-5f * fabsf(v[2 * D + x]))
              fail_msg("logits %g, nq %d, cached %d: out[%d][%d] = %g, want %g", mags[mi], nq,
                       cached, i, x, (double)out[i * D + x], (double)v[2 * D + x]);
          if (!(fabs((double)lse[i] - want_lse) <= 1e-6 * want_lse))
            fail_msg("logits %g, nq %d, cached %d: lse[%d] = %g, want %g", mags[mi], nq, cached,
                     i, (double)lse[i], want_lse);
        }
        rove_kv_cache_destroy(kc);
        rove_plan_destroy(p);
      }
    }
  }
}

/* Strides the contract accepts but no address can use: with a single row per tensor any
 * stride >= the dense width is valid ((rows - 1) * stride = 0), INT64_MAX included. The
 * kernels' prefetches form addresses a few rows ahead; they must do so without signed
 * overflow (found by fuzz_attention under UBSan: j * stride * 4 in int64). The gcc
 * ASan+UBSan suite runs this on every ISA (the fuzz build has no UBSan in SIMD kernels). */
static void test_huge_single_row_strides(void **state) {
  (void)state;
  enum { D = 64 };
  for (int cached = 0; cached <= 1; cached++) {
    rove_attention_config c;
    rove_attention_config_init(&c, 1, 1, D);
    c.n_threads = 1;
    rove_plan *p = NULL;
    assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
    float q[D], k[D], v[D], out[D], lse[1];
    for (int x = 0; x < D; x++) q[x] = 0.01f * (float)x, k[x] = 1.0f, v[x] = (float)x;
    rove_attention_args a = {0};
    a.batch = 1, a.q_len = 1, a.q = q, a.out = out, a.lse = lse;
    a.q_stride = INT64_MAX, a.out_stride = INT64_MAX;
    rove_kv_cache *kc = NULL;
    if (cached) {
      assert_int_equal(rove_kv_cache_create(p, 1, 1, &kc), ROVE_OK);
      assert_int_equal(rove_kv_cache_append(kc, 1, k, INT64_MAX, v, INT64_MAX, NULL), ROVE_OK);
      assert_int_equal(rove_kv_cache_attention(kc, &a), ROVE_OK);
    } else {
      a.kv_len = 1, a.k = k, a.v = v, a.k_stride = INT64_MAX, a.v_stride = INT64_MAX;
      assert_int_equal(rove_attention_forward(p, &a), ROVE_OK);
    }
    /* one visible key: the output is its value row (RoVE rotations cancel at p = P) */
    for (int x = 0; x < D; x++) assert_true(fabsf(out[x] - v[x]) <= 1e-4f * (1.0f + fabsf(v[x])));
    assert_int_equal(rove_rotate(p, q, 1, 1, INT64_MAX, NULL, 0), ROVE_OK);
    rove_kv_cache_destroy(kc);
    rove_plan_destroy(p);
  }
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prefill_hidden_garbage),
      cmocka_unit_test(test_decode_hidden_garbage),
      cmocka_unit_test(test_visible_nan),
      cmocka_unit_test(test_hidden_garbage_threads_bitwise),
      cmocka_unit_test(test_shift_out_of_int32),
      cmocka_unit_test(test_thread_bound),
      cmocka_unit_test(test_huge_logits),
      cmocka_unit_test(test_huge_single_row_strides),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
