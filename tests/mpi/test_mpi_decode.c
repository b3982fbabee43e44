/* SPDX-License-Identifier: MIT */
/* rove_mpi_cache_attention (sharded-cache decode) under mpiexec with 2 and 4 ranks. Every
 * rank builds the same whole KV cache (the single-process reference) and its own slice of
 * it; the merged result must equal rove_kv_cache_attention over the whole cache (output
 * 1e-6 relative, LSE 1e-6 x max(1, |LSE|)), be bitwise the same on every rank that asks
 * for it and across two calls, and be bitwise the whole cache's result when one rank holds
 * every token. Covers
 * 1 and several query rows, batch 2, GQA 8:2 and MQA, contiguous, random and uneven slices,
 * an empty slice, another root, windows, bidirectional attention, RoPE, positions near
 * 2^20, bf16 and q8 caches, strided queries and outputs, attention sinks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_testutil.h"

enum split { CONTIG, RANDOM, EMPTY_LAST, ALL_ON_0 };

typedef struct {
  const char *name;
  int B, N, H, Hkv, d, q_len;
  uint32_t rotate;
  int causal, window;
  rove_dtype type;
  enum split split;
  int root_last; /* root = the last rank (else 0) */
  int all_out;   /* every rank passes out and lse (else root only) */
  int32_t pos0;
  int strided; /* q and out with token strides on root */
} dec_case;

static int owner_of(const dec_case *c, int t, int P, rove_rng *r) {
  switch (c->split) {
    case CONTIG: return (int)((int64_t)t * P / c->N);
    case RANDOM: return (int)(rove_rng_u64(r) % (uint64_t)P);
    case EMPTY_LAST: return P > 1 ? (int)((int64_t)t * (P - 1) / c->N) : 0;
    default: return 0;
  }
}

static rove_kv_cache *make_cache(const rove_plan *p, const dec_case *c, const mt_seq *s,
                                 const int *idx, int n) {
  rove_kv_cache *kc = NULL;
  assert_int_equal(rove_kv_cache_create_typed(p, c->B, n > 0 ? n : 1, c->type, &kc), ROVE_OK);
  if (n == 0) return kc;
  const int row = c->Hkv * c->d;
  float *k = mt_gather(s->k, c->B, c->N, row, idx, n),
        *v = mt_gather(s->v, c->B, c->N, row, idx, n);
  int32_t *pos = mt_gather_pos(s, idx, n);
  assert_int_equal(rove_kv_cache_append(kc, n, k, 0, v, 0, pos), ROVE_OK);
  free(k), free(v), free(pos);
  return kc;
}

static double max_rel(const float *a, const float *b, int64_t n) {
  double e = 0, m = 1e-30;
  for (int64_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - b[i])), m = fmax(m, fabs(b[i]));
  return e / m;
}

static double lse_err(const float *a, const float *b, int64_t n) {
  double e = 0;
  for (int64_t i = 0; i < n; i++)
    e = fmax(e, (a[i] == -INFINITY || b[i] == -INFINITY)
                    ? (a[i] == b[i] ? 0 : INFINITY)
                    : fabs((double)a[i] - b[i]) / fmax(1, fabs(b[i])));
  return e;
}

/* Attention sinks of the cases run by test_sinks (NULL otherwise): [H <= 8], on root. */
static const float *case_sinks;

static void run_case(const dec_case *c) {
  const int P = mt_size, r = mt_rank, root = c->root_last ? P - 1 : 0;
  rove_attention_config cfg;
  rove_attention_config_init(&cfg, c->H, c->Hkv, c->d);
  cfg.rotate = c->rotate, cfg.causal = c->causal, cfg.window = c->window, cfg.n_threads = 1;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&cfg, &p), ROVE_OK);
  mt_seq s;
  mt_seq_make(&s, c->B, c->N, c->H, c->Hkv, c->d, c->pos0, 0, 31 + (uint64_t)c->N);
  /* queries: the last q_len tokens' q rows at their positions (decode after append), or
   * for a bidirectional plan rows from the middle */
  const int L = c->q_len, rq = c->H * c->d;
  int *qidx = malloc(sizeof(int) * (size_t)L), *all = malloc(sizeof(int) * (size_t)c->N);
  int *mine = malloc(sizeof(int) * (size_t)c->N);
  assert_true(qidx && all && mine);
  for (int i = 0; i < L; i++) qidx[i] = c->causal ? c->N - L + i : c->N / 3 + i;
  float *q = mt_gather(s.q, c->B, c->N, rq, qidx, L);
  int32_t *qp = mt_gather_pos(&s, qidx, L);
  int n = 0;
  rove_rng rr;
  rove_rng_seed(&rr, 5);
  for (int t = 0; t < c->N; t++) {
    all[t] = t;
    if (owner_of(c, t, P, &rr) == r) mine[n++] = t;
  }
  rove_kv_cache *whole = make_cache(p, c, &s, all, c->N), *slice = make_cache(p, c, &s, mine, n);

  const int64_t no = (int64_t)c->B * L * rq, nl = (int64_t)c->B * c->H * L;
  float *ref = malloc(sizeof(float) * (size_t)no), *ref_lse = malloc(sizeof(float) * (size_t)nl);
  assert_true(ref && ref_lse);
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = c->B, a.q_len = L, a.q = q, a.q_pos = qp, a.out = ref, a.lse = ref_lse;
  a.sinks = case_sinks;
  assert_int_equal(rove_kv_cache_attention(whole, &a), ROVE_OK);

  /* the sharded call: q (strided copy on request) on root only */
  const int64_t qs = c->strided ? rq + 5 : 0, os = c->strided ? rq + 3 : 0;
  const int64_t ostep = os ? os : rq;
  float *qv = malloc(sizeof(float) * (size_t)(c->B * L * (qs ? qs : rq)));
  float *out = malloc(sizeof(float) * (size_t)(c->B * L * ostep)),
        *lse = malloc(sizeof(float) * (size_t)nl);
  float *out2 = malloc(sizeof(float) * (size_t)(c->B * L * ostep)),
        *lse2 = malloc(sizeof(float) * (size_t)nl);
  assert_true(qv && out && lse && out2 && lse2);
  for (int64_t t = 0; t < (int64_t)c->B * L; t++)
    memcpy(qv + t * (qs ? qs : rq), q + t * rq, sizeof(float) * (size_t)rq);
  rove_fill_bits(out, c->B * L * ostep, ROVE_GUARD_CANARY);
  rove_fill_bits(out2, c->B * L * ostep, ROVE_GUARD_CANARY);
  memset(&a, 0, sizeof a);
  a.batch = c->B, a.q_len = L, a.q_stride = qs, a.out_stride = os;
  const int is_root = r == root, wants = is_root || c->all_out;
  a.q = is_root ? qv : NULL, a.q_pos = is_root ? qp : NULL;
  a.sinks = is_root ? case_sinks : NULL;
  a.out = wants ? out : NULL, a.lse = wants ? lse : NULL;
  rove_status st = rove_mpi_cache_attention(p, slice, &a, root, MPI_COMM_WORLD);
  mt_check(st == ROVE_OK, "%s: status %s", c->name, rove_status_string(st));
  float *dense = malloc(sizeof(float) * (size_t)no);
  assert_non_null(dense);
  for (int64_t t = 0; t < (int64_t)c->B * L; t++) {
    memcpy(dense + t * rq, out + t * ostep, sizeof(float) * (size_t)rq);
    for (int64_t g = rq; wants && g < ostep; g++)
      mt_check(rove_has_bits(out + t * ostep + g, ROVE_GUARD_CANARY), "%s: out gap written",
               c->name);
  }
  if (st == ROVE_OK && wants) {
    const double eo = max_rel(dense, ref, no), el = lse_err(lse, ref_lse, nl);
    mt_check(eo <= 1e-6 && el <= 1e-6, "%s: out error %.3g, lse error %.3g", c->name, eo, el);
    if (c->split == ALL_ON_0 && !case_sinks) /* (sinks: merged in double, not bitwise) */
      mt_check(memcmp(dense, ref, sizeof(float) * (size_t)no) == 0 &&
                   memcmp(lse, ref_lse, sizeof(float) * (size_t)nl) == 0,
               "%s: one non-empty slice is not bitwise the whole cache", c->name);
  }
  /* the same bits on every rank (root's result broadcast by the test) */
  float *rootout = malloc(sizeof(float) * (size_t)no);
  assert_non_null(rootout);
  memcpy(rootout, dense, sizeof(float) * (size_t)no);
  MPI_Bcast(rootout, (int)no, MPI_FLOAT, root, MPI_COMM_WORLD);
  if (wants)
    mt_check(memcmp(rootout, dense, sizeof(float) * (size_t)no) == 0, "%s: ranks differ", c->name);
  /* and on a second call */
  a.out = wants ? out2 : NULL, a.lse = wants ? lse2 : NULL;
  st = rove_mpi_cache_attention(p, slice, &a, root, MPI_COMM_WORLD);
  mt_check(st == ROVE_OK &&
               (!wants || (memcmp(out, out2, sizeof(float) * (size_t)(c->B * L * ostep)) == 0 &&
                           memcmp(lse, lse2, sizeof(float) * (size_t)nl) == 0)),
           "%s: second call differs", c->name);
  free(rootout), free(dense), free(qv), free(out), free(lse), free(out2), free(lse2);
  free(ref), free(ref_lse), free(q), free(qp), free(qidx), free(all), free(mine);
  rove_kv_cache_destroy(whole), rove_kv_cache_destroy(slice);
  mt_seq_free(&s);
  rove_plan_destroy(p);
}

static void test_decode(void **state) {
  (void)state;
  const int32_t near = 1 << 20;
  const dec_case cs[] = {
      {"MHA, 1 row, contiguous", 1, 300, 4, 4, 64, 1, ROVE_ROTATE_ROVE, 1, 0, ROVE_DTYPE_F32,
       CONTIG, 0, 0, 0, 0},
      {"GQA 8:2, batch 2, 4 rows, random, last root", 2, 257, 8, 2, 32, 4, ROVE_ROTATE_ROVE, 1, 0,
       ROVE_DTYPE_F32, RANDOM, 1, 1, 0, 0},
      {"MQA, 3 rows, last slice empty", 1, 200, 6, 1, 32, 3, ROVE_ROTATE_ROVE, 1, 0, ROVE_DTYPE_F32,
       EMPTY_LAST, 0, 1, 0, 0},
      {"every key on rank 0", 2, 150, 8, 2, 32, 2, ROVE_ROTATE_ROVE, 1, 0, ROVE_DTYPE_F32, ALL_ON_0,
       1, 1, 0, 0},
      {"window 50, RoPE, near 2^20", 1, 260, 4, 2, 32, 1, ROVE_ROTATE_ROPE, 1, 50, ROVE_DTYPE_F32,
       RANDOM, 0, 0, near - 130, 0},
      {"bidirectional, 5 rows", 1, 180, 4, 2, 32, 5, ROVE_ROTATE_ROVE, 0, 0, ROVE_DTYPE_F32, CONTIG,
       0, 1, 0, 0},
      {"strided q and out", 2, 120, 4, 2, 32, 2, ROVE_ROTATE_ROVE, 1, 0, ROVE_DTYPE_F32, RANDOM, 1,
       1, 0, 1},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) run_case(&cs[i]);
  mt_end();
}

static void test_typed_caches(void **state) {
  (void)state;
  const dec_case cs[] = {
      {"bf16 cache, GQA 8:2", 1, 300, 8, 2, 64, 1, ROVE_ROTATE_ROVE, 1, 0, ROVE_DTYPE_BF16, RANDOM,
       0, 1, 0, 0},
      {"f16 cache, 2 rows", 2, 130, 4, 2, 32, 2, ROVE_ROTATE_ROVE, 1, 0, ROVE_DTYPE_F16, CONTIG, 1,
       0, 0, 0},
      {"q8 cache, last slice empty", 1, 200, 4, 2, 64, 1, ROVE_ROTATE_ROVE, 1, 0, ROVE_DTYPE_Q8,
       EMPTY_LAST, 0, 1, 0, 0},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) run_case(&cs[i]);
  mt_end();
}

/* Attention sinks, read on root and merged once into the result (to 1e-6 of one cache's
 * attention with the same sinks); with a bf16 cache and with every key on one rank. */
static void test_sinks(void **state) {
  (void)state;
  static const float sinks[8] = {1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 6.0f, 0.0f, -8.0f};
  const dec_case cs[] = {
      {"sinks, GQA 8:2, batch 2, 3 rows", 2, 220, 8, 2, 32, 3, ROVE_ROTATE_ROVE, 1, 0,
       ROVE_DTYPE_F32, RANDOM, 1, 1, 0, 0},
      {"sinks, window 40, bf16", 1, 200, 4, 2, 64, 1, ROVE_ROTATE_ROVE, 1, 40, ROVE_DTYPE_BF16,
       CONTIG, 0, 1, 0, 0},
      {"sinks, every key on rank 0", 1, 150, 8, 2, 32, 2, ROVE_ROTATE_ROVE, 1, 0, ROVE_DTYPE_F32,
       ALL_ON_0, 0, 1, 0, 0},
  };
  case_sinks = sinks;
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) run_case(&cs[i]);
  case_sinks = NULL;
  mt_end();
}

/* Every rank's slice empty: no key is visible, so the call succeeds with output 0 and LSE
 * -inf on every rank that asks (one empty cache alone is INVALID_ARGUMENT); with sinks on
 * root, output 0 and LSE the head's sink, as rove_attention_forward gives a keyless row. */
static void test_all_slices_empty(void **state) {
  (void)state;
  enum { H = 4, HKV = 2, D = 32 };
  rove_attention_config cfg;
  rove_attention_config_init(&cfg, H, HKV, D);
  cfg.n_threads = 1;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&cfg, &p), ROVE_OK);
  rove_kv_cache *kc = NULL;
  assert_int_equal(rove_kv_cache_create(p, 1, 8, &kc), ROVE_OK);
  float q[H * D], out[H * D], lse[H];
  for (int i = 0; i < H * D; i++) q[i] = 0.5f, out[i] = 7.0f;
  for (int h = 0; h < H; h++) lse[h] = 7.0f;
  const int32_t qp = 3;
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = 1, a.q_len = 1, a.q = q, a.q_pos = &qp, a.out = out, a.lse = lse;
  const rove_status st = rove_mpi_cache_attention(p, kc, &a, 0, MPI_COMM_WORLD);
  mt_check(st == ROVE_OK, "all empty: status %s", rove_status_string(st));
  for (int i = 0; i < H * D; i++) mt_check(out[i] == 0.0f, "all empty: out[%d] = %g", i, out[i]);
  for (int h = 0; h < H; h++) mt_check(lse[h] == -INFINITY, "all empty: lse[%d] = %g", h, lse[h]);
  const float sinks[H] = {0.5f, -3.0f, 2.0f, 0.0f};
  a.sinks = mt_rank == 0 ? sinks : NULL;
  for (int i = 0; i < H * D; i++) out[i] = 7.0f;
  const rove_status st2 = rove_mpi_cache_attention(p, kc, &a, 0, MPI_COMM_WORLD);
  mt_check(st2 == ROVE_OK, "all empty, sinks: status %s", rove_status_string(st2));
  for (int i = 0; i < H * D; i++) mt_check(out[i] == 0.0f, "all empty, sinks: out[%d]", i);
  for (int h = 0; h < H; h++)
    mt_check(lse[h] == sinks[h], "all empty, sinks: lse[%d] = %g", h, lse[h]);
  rove_kv_cache_destroy(kc);
  rove_plan_destroy(p);
  mt_end();
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_decode),
                                     cmocka_unit_test(test_typed_caches),
                                     cmocka_unit_test(test_sinks),
                                     cmocka_unit_test(test_all_slices_empty)};
  return mt_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
