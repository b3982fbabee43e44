/* SPDX-License-Identifier: MIT */
/* bf16 / fp16 tensors in the plain API (rove_attention_forward_typed) and in the cache
 * calls (rove_kv_cache_append_typed, rove_kv_cache_attention_typed). Widening is exact
 * and all arithmetic is fp32, so a typed call must equal, bit for bit, the fp32 call on
 * the inputs rounded to their types, with its output rounded once to the out type; every
 * path (packed prefill, streaming tiles, the decode row kernel) and strided views are
 * covered, plus overflow to inf, NaN, and bad types. Links the public librove.so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* The test's own conversions (independent of librove's): bf16 by round-to-nearest-even
 * on the bit pattern, fp16 through the compiler's _Float16. */
static uint16_t to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}
static float from_bf16(uint16_t h) {
  const uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}
#if defined(__FLT16_MAX__)
static uint16_t to_f16(float f) {
  const _Float16 h = (_Float16)f;
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}
static float from_f16(uint16_t u) {
  _Float16 h;
  memcpy(&h, &u, 2);
  return (float)h;
}
#define HAVE_F16 1
#else
#define HAVE_F16 0
#endif

/* A tensor of n fp32 values in type t: its typed buffer and the exact fp32 of it. */
typedef struct {
  rove_dtype t;
  void *raw;      /* n elements of t */
  float *wide;    /* n floats: the typed values widened */
} tensor;

static void make_tensor(tensor *x, rove_dtype t, const float *src, int64_t n) {
  x->t = t;
  x->wide = malloc(sizeof(float) * (size_t)n);
  x->raw = malloc((size_t)n * (t == ROVE_DTYPE_F32 ? 4 : 2));
  assert_true(x->wide && x->raw);
  for (int64_t i = 0; i < n; i++) {
    if (t == ROVE_DTYPE_F32) {
      ((float *)x->raw)[i] = x->wide[i] = src[i];
    } else if (t == ROVE_DTYPE_BF16) {
      ((uint16_t *)x->raw)[i] = to_bf16(src[i]);
      x->wide[i] = from_bf16(((uint16_t *)x->raw)[i]);
    } else {
#if HAVE_F16
      ((uint16_t *)x->raw)[i] = to_f16(src[i]);
      x->wide[i] = from_f16(((uint16_t *)x->raw)[i]);
#endif
    }
  }
}
static void free_tensor(tensor *x) { free(x->raw), free(x->wide); }

/* Element i of a typed output as a float. */
static float out_at(const void *out, rove_dtype t, int64_t i) {
  if (t == ROVE_DTYPE_F32) return ((const float *)out)[i];
  if (t == ROVE_DTYPE_BF16) return from_bf16(((const uint16_t *)out)[i]);
#if HAVE_F16
  return from_f16(((const uint16_t *)out)[i]);
#else
  return NAN;
#endif
}
/* The reference output value rounded to type t. */
static float round_to(float x, rove_dtype t) {
  if (t == ROVE_DTYPE_BF16) return from_bf16(to_bf16(x));
#if HAVE_F16
  if (t == ROVE_DTYPE_F16) return from_f16(to_f16(x));
#endif
  return x;
}
static int same_bits(float a, float b) {
  return (isnan(a) && isnan(b)) || memcmp(&a, &b, 4) == 0;
}

typedef struct {
  int H, Hkv, d, q_len, kv_len;
  uint32_t rotate;
  int fused; /* q, k, v as strided views of one [tokens][(H + 2 Hkv) d] buffer */
} shape;

static const rove_tensor_types combos[] = {
    {ROVE_DTYPE_BF16, ROVE_DTYPE_BF16, ROVE_DTYPE_BF16, ROVE_DTYPE_BF16},
    {ROVE_DTYPE_F16, ROVE_DTYPE_F16, ROVE_DTYPE_F16, ROVE_DTYPE_F16},
    {ROVE_DTYPE_BF16, ROVE_DTYPE_BF16, ROVE_DTYPE_BF16, ROVE_DTYPE_F32},
    {ROVE_DTYPE_F32, ROVE_DTYPE_BF16, ROVE_DTYPE_F16, ROVE_DTYPE_F32},
    {ROVE_DTYPE_F16, ROVE_DTYPE_F32, ROVE_DTYPE_BF16, ROVE_DTYPE_F16},
    {ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_BF16},
};
#define N_COMBOS ((int)(sizeof combos / sizeof combos[0]))

static int combo_supported(const rove_tensor_types *ty) {
  return HAVE_F16 || (ty->q != ROVE_DTYPE_F16 && ty->k != ROVE_DTYPE_F16 &&
                      ty->v != ROVE_DTYPE_F16 && ty->out != ROVE_DTYPE_F16);
}

/* One shape and type combination: typed call == fp32 call on the rounded inputs, output
 * rounded, bit for bit (out and LSE). */
static void check_shape(const shape *sh, const rove_tensor_types *ty, uint64_t seed) {
  rove_attention_config c;
  rove_attention_config_init(&c, sh->H, sh->Hkv, sh->d);
  c.rotate = sh->rotate;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  rove_rng r;
  rove_rng_seed(&r, seed);
  const int64_t wq = (int64_t)sh->H * sh->d, wk = (int64_t)sh->Hkv * sh->d;
  const int64_t wf = wq + 2 * wk; /* fused row width */
  const int64_t qs = sh->fused ? wf : wq, ks = sh->fused ? wf : wk;
  const int64_t rows = sh->q_len > sh->kv_len ? sh->q_len : sh->kv_len;
  const int64_t nq = rows * qs, nk = rows * ks;
  float *q = malloc(sizeof(float) * (size_t)nq), *k = malloc(sizeof(float) * (size_t)nk);
  float *v = malloc(sizeof(float) * (size_t)nk);
  rove_rng_fill(&r, q, nq, -2, 2);
  rove_rng_fill(&r, k, nk, -2, 2);
  rove_rng_fill(&r, v, nk, -1, 1);
  tensor tq, tk, tv;
  make_tensor(&tq, ty->q, q, nq);
  make_tensor(&tk, ty->k, k, nk);
  make_tensor(&tv, ty->v, v, nk);
  /* with fused views, K and V sit at their column offsets of the same row layout */
  const int64_t koff = sh->fused ? wq : 0, voff = sh->fused ? wq + wk : 0;
  const int64_t no = (int64_t)sh->q_len * wq;
  float *ref = malloc(sizeof(float) * (size_t)no), *lref = malloc(sizeof(float) * (size_t)(sh->H * sh->q_len));
  float *lse = malloc(sizeof(float) * (size_t)(sh->H * sh->q_len));
  void *out = malloc((size_t)no * 4);
  rove_attention_args a = {.batch = 1, .q_len = sh->q_len, .kv_len = sh->kv_len, .q = tq.wide,
                           .k = tk.wide + koff, .v = tv.wide + voff, .out = ref, .lse = lref,
                           .q_stride = qs, .k_stride = ks, .v_stride = ks};
  assert_int_equal(rove_attention_forward(p, &a), ROVE_OK);
  const size_t ek = ty->k == ROVE_DTYPE_F32 ? 4 : 2, ev = ty->v == ROVE_DTYPE_F32 ? 4 : 2;
  a.q = tq.raw;
  a.k = (const float *)((const char *)tk.raw + koff * (int64_t)ek);
  a.v = (const float *)((const char *)tv.raw + voff * (int64_t)ev);
  a.out = out;
  a.lse = lse;
  assert_int_equal(rove_attention_forward_typed(p, &a, ty), ROVE_OK);
  int64_t bad = 0;
  for (int64_t i = 0; i < no; i++)
    if (!same_bits(out_at(out, ty->out, i), round_to(ref[i], ty->out))) {
      if (bad++ < 5)
        print_message("  out[%lld] = %a, want %a\n", (long long)i, (double)out_at(out, ty->out, i),
                      (double)round_to(ref[i], ty->out));
    }
  for (int64_t i = 0; i < sh->H * sh->q_len; i++) bad += !same_bits(lse[i], lref[i]);
  if (bad)
    print_message("  H=%d/%d d=%d q_len=%d kv_len=%d rot=0x%x fused=%d types q%d k%d v%d out%d: "
                  "%lld differences\n", sh->H, sh->Hkv, sh->d, sh->q_len, sh->kv_len, sh->rotate,
                  sh->fused, ty->q, ty->k, ty->v, ty->out, (long long)bad);
  assert_int_equal(bad, 0);
  free_tensor(&tq), free_tensor(&tk), free_tensor(&tv);
  free(q), free(k), free(v), free(ref), free(lref), free(lse), free(out);
  rove_plan_destroy(p);
}

static void test_typed_equals_rounded_fp32(void **state) {
  (void)state;
  const shape shapes[] = {
      {4, 4, 64, 100, 100, ROVE_ROTATE_ROVE, 0},  /* packed prefill */
      {8, 2, 64, 70, 70, ROVE_ROTATE_ROPE, 1},    /* GQA, fused views */
      {4, 2, 80, 1, 700, ROVE_ROTATE_ROVE, 0},    /* decode: the row kernel, d % 32 != 0 */
      {8, 2, 64, 1, 700, ROVE_ROTATE_ROVE, 1},    /* decode, rows, strided */
      {8, 2, 64, 2, 700, 0, 0},                   /* no rotation: typed rows in place */
      {8, 1, 128, 5, 900, ROVE_ROTATE_ROVE, 0},   /* 40 rows: streaming tiles */
      {2, 2, 32, 40, 300, ROVE_ROTATE_ROVE, 1},   /* chunked prefill against more keys */
  };
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int ci = 0; ci < N_COMBOS; ci++)
      if (combo_supported(&combos[ci])) check_shape(&shapes[s], &combos[ci], 100 + s * 10 + (uint64_t)ci);
}

/* The cache with bf16 / fp16 inputs and queries: append_typed == append of the rounded
 * values, attention_typed == the fp32 call on the rounded queries, output rounded. */
static void test_cache_typed(void **state) {
  (void)state;
  const int H = 8, Hkv = 2, d = 64, n = 500;
  rove_attention_config c;
  rove_attention_config_init(&c, H, Hkv, d);
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  rove_rng r;
  rove_rng_seed(&r, 77);
  const int64_t nk = (int64_t)n * Hkv * d, nq = 3 * H * d;
  float *k = malloc(sizeof(float) * (size_t)nk), *v = malloc(sizeof(float) * (size_t)nk);
  float *q = malloc(sizeof(float) * (size_t)nq), *ref = malloc(sizeof(float) * (size_t)nq);
  void *out = malloc((size_t)nq * 4);
  rove_rng_fill(&r, k, nk, -2, 2);
  rove_rng_fill(&r, v, nk, -1, 1);
  rove_rng_fill(&r, q, nq, -2, 2);
  const rove_dtype ins[] = {ROVE_DTYPE_BF16, ROVE_DTYPE_F16};
  const rove_dtype stores[] = {ROVE_DTYPE_F32, ROVE_DTYPE_BF16, ROVE_DTYPE_Q8};
  for (int ii = 0; ii < 2; ii++) {
    if (ins[ii] == ROVE_DTYPE_F16 && !HAVE_F16) continue;
    tensor tk, tv, tq;
    make_tensor(&tk, ins[ii], k, nk);
    make_tensor(&tv, ins[ii], v, nk);
    make_tensor(&tq, ins[ii], q, nq);
    for (int si = 0; si < 3; si++) {
      rove_kv_cache *a = NULL, *b = NULL;
      assert_int_equal(rove_kv_cache_create_typed(p, 1, n, stores[si], &a), ROVE_OK);
      assert_int_equal(rove_kv_cache_create_typed(p, 1, n, stores[si], &b), ROVE_OK);
      assert_int_equal(rove_kv_cache_append_typed(a, n, tk.raw, 0, tv.raw, 0, NULL, ins[ii]), ROVE_OK);
      assert_int_equal(rove_kv_cache_append(b, n, tk.wide, 0, tv.wide, 0, NULL), ROVE_OK);
      rove_attention_args x = {.batch = 1, .q_len = 3, .q = tq.wide, .out = ref};
      assert_int_equal(rove_kv_cache_attention(b, &x), ROVE_OK);
      const rove_tensor_types ty = {ins[ii], ROVE_DTYPE_F32, ROVE_DTYPE_F32, ins[ii]};
      x.q = tq.raw;
      x.out = out;
      assert_int_equal(rove_kv_cache_attention_typed(a, &x, &ty), ROVE_OK);
      for (int64_t i = 0; i < nq; i++)
        assert_true(same_bits(out_at(out, ins[ii], i), round_to(ref[i], ins[ii])));
      /* K and V types other than F32 are the cache's business */
      const rove_tensor_types bad = {ins[ii], ins[ii], ROVE_DTYPE_F32, ins[ii]};
      assert_int_equal(rove_kv_cache_attention_typed(a, &x, &bad), ROVE_ERR_INVALID_ARGUMENT);
      rove_kv_cache_destroy(a);
      rove_kv_cache_destroy(b);
    }
    free_tensor(&tk), free_tensor(&tv), free_tensor(&tq);
  }
  /* bad input types for append */
  rove_kv_cache *cc = NULL;
  assert_int_equal(rove_kv_cache_create(p, 1, 4, &cc), ROVE_OK);
  assert_int_equal(rove_kv_cache_append_typed(cc, 1, k, 0, v, 0, NULL, ROVE_DTYPE_Q8),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_append_typed(cc, 1, k, 0, v, 0, NULL, ROVE_DTYPE_COUNT),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_kv_cache_length(cc), 0);
  rove_kv_cache_destroy(cc);
  free(k), free(v), free(q), free(ref), free(out);
  rove_plan_destroy(p);
}

/* Output overflow: fp16 out of values beyond 65504 is +-inf (a cast's result); NaN in a
 * bf16 query poisons its row; bad types are rejected with nothing written. */
static void test_special_values(void **state) {
  (void)state;
  rove_attention_config c;
  rove_attention_config_init(&c, 1, 1, 4);
  c.rotate = ROVE_ROTATE_ROPE;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  const float q[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.1f, 0.2f, 0.3f, 0.4f};
  const float k[8] = {1, 2, 3, 4, 4, 3, 2, 1}, v[8] = {70000, 1, -70000, 2, 70000, 1, -70000, 2};
  uint16_t out[8];
  rove_attention_args a = {.batch = 1, .q_len = 2, .kv_len = 2, .q = q, .k = k, .v = v,
                           .out = (float *)out};
#if HAVE_F16
  const rove_tensor_types f16out = {ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_F16};
  assert_int_equal(rove_attention_forward_typed(p, &a, &f16out), ROVE_OK);
  assert_true(isinf(from_f16(out[0])) && from_f16(out[0]) > 0);
  assert_true(isinf(from_f16(out[2])) && from_f16(out[2]) < 0);
  assert_true(isfinite(from_f16(out[1])));
#endif
  uint16_t qb[8];
  for (int i = 0; i < 8; i++) qb[i] = to_bf16(q[i]);
  qb[5] = to_bf16(NAN); /* query row 1 */
  const rove_tensor_types bq = {ROVE_DTYPE_BF16, ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_F32};
  float o32[8], lse[2];
  a.q = (const float *)qb;
  a.out = o32;
  a.lse = lse;
  assert_int_equal(rove_attention_forward_typed(p, &a, &bq), ROVE_OK);
  for (int i = 0; i < 4; i++) assert_true(isfinite(o32[i]) && isnan(o32[4 + i]));
  assert_true(isfinite(lse[0]) && isnan(lse[1]));
  /* bad types: nothing written */
  const rove_tensor_types bad[] = {
      {ROVE_DTYPE_Q8, ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_F32},
      {ROVE_DTYPE_F32, ROVE_DTYPE_Q8, ROVE_DTYPE_F32, ROVE_DTYPE_F32},
      {ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_COUNT, ROVE_DTYPE_F32},
      {ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_F32, (rove_dtype)-1}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rove_fill_bits(o32, 8, 0x7fc0dead);
    assert_int_equal(rove_attention_forward_typed(p, &a, &bad[i]), ROVE_ERR_INVALID_ARGUMENT);
    assert_true(rove_has_bits(o32, 0x7fc0dead));
  }
  /* NULL types: fp32 */
  a.q = q;
  assert_int_equal(rove_attention_forward_typed(p, &a, NULL), ROVE_OK);
  /* overlap is checked in bytes of each tensor's type: a bf16 out over the end of q */
  const rove_tensor_types bo = {ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_BF16};
  float buf[16];
  memcpy(buf, q, sizeof q);
  a.q = buf;
  a.out = buf + 7; /* q occupies buf[0..8): out's 8 bf16 = 16 bytes from buf + 7 overlap */
  assert_int_equal(rove_attention_forward_typed(p, &a, &bo), ROVE_ERR_INVALID_ARGUMENT);
  a.out = buf + 8;
  assert_int_equal(rove_attention_forward_typed(p, &a, &bo), ROVE_OK);
  rove_plan_destroy(p);
}

/* rove_layer_create_typed: bf16 / fp16 weights give the layer of the same weights widened
 * to fp32, bit for bit (the widening happens once, at creation). */
static void test_layer_typed_weights(void **state) {
  (void)state;
  const int H = 4, Hkv = 2, d = 32, dm = 96, T = 33;
  rove_attention_config c;
  rove_attention_config_init(&c, H, Hkv, d);
  c.n_threads = 1;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  rove_rng r;
  rove_rng_seed(&r, 5);
  const int64_t n[8] = {(int64_t)H * d * dm, (int64_t)Hkv * d * dm, (int64_t)Hkv * d * dm,
                        (int64_t)dm * H * d, H * d, Hkv * d, Hkv * d, dm};
  float *x = malloc(sizeof(float) * T * dm), *y1 = malloc(sizeof(float) * T * dm);
  float *y2 = malloc(sizeof(float) * T * dm);
  rove_rng_fill(&r, x, T * dm, -1, 1);
  const rove_dtype ts[] = {ROVE_DTYPE_BF16, ROVE_DTYPE_F16};
  for (int ti = 0; ti < 2; ti++) {
    if (ts[ti] == ROVE_DTYPE_F16 && !HAVE_F16) continue;
    tensor w[8];
    for (int i = 0; i < 8; i++) {
      float *src = malloc(sizeof(float) * (size_t)n[i]);
      rove_rng_fill(&r, src, n[i], -0.2f, 0.2f);
      make_tensor(&w[i], ts[ti], src, n[i]);
      free(src);
    }
    rove_layer_weights wr = {.d_model = dm, .wq = w[0].raw, .wk = w[1].raw, .wv = w[2].raw,
                             .wo = w[3].raw, .bq = w[4].raw, .bk = w[5].raw, .bv = w[6].raw,
                             .bo = w[7].raw};
    rove_layer_weights ww = {.d_model = dm, .wq = w[0].wide, .wk = w[1].wide, .wv = w[2].wide,
                             .wo = w[3].wide, .bq = w[4].wide, .bk = w[5].wide, .bv = w[6].wide,
                             .bo = w[7].wide};
    rove_layer *a = NULL, *b = NULL;
    assert_int_equal(rove_layer_create_typed(p, &wr, ts[ti], &a), ROVE_OK);
    assert_int_equal(rove_layer_create(p, &ww, &b), ROVE_OK);
    assert_int_equal(rove_layer_forward(a, 1, T, x, NULL, y1), ROVE_OK);
    assert_int_equal(rove_layer_forward(b, 1, T, x, NULL, y2), ROVE_OK);
    assert_memory_equal(y1, y2, sizeof(float) * T * dm);
    rove_layer_destroy(a);
    rove_layer_destroy(b);
    rove_layer *bad = (rove_layer *)&bad;
    assert_int_equal(rove_layer_create_typed(p, &wr, ROVE_DTYPE_Q8, &bad), ROVE_ERR_INVALID_ARGUMENT);
    assert_ptr_equal(bad, (rove_layer *)&bad);
    for (int i = 0; i < 8; i++) free_tensor(&w[i]);
  }
  free(x), free(y1), free(y2);
  rove_plan_destroy(p);
}

int main(void) {
  rove_test_isa_gate();
  if (!HAVE_F16) print_message("  no _Float16 in this compiler: the f16 combinations are skipped\n");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_typed_equals_rounded_fp32),
      cmocka_unit_test(test_cache_typed),
      cmocka_unit_test(test_special_values),
      cmocka_unit_test(test_layer_typed_weights),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
