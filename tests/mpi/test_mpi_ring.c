/* SPDX-License-Identifier: MIT */
/* rove_mpi_ring_attention (ring prefill) under mpiexec with 2 and 4 ranks. Every rank
 * makes the same whole sequence, computes the single-process rove_attention_forward over
 * all of it, and checks that its shard's ring result equals its rows of that (output
 * 1e-6 relative, LSE 1e-6 x max(1, |LSE|)) and, where cheap, the double oracle (2e-5):
 * contiguous and zig-zag causal splits (rove_mpi_split_positions), uneven and random
 * shards, a rank with nothing, keys on one rank only, GQA 8:2, all 16 rotation
 * combinations, windows, softcap, bidirectional attention, shuffled positions and positions
 * near 2^20, token strides (a fused QKV buffer), query shards longer than one piece (2048
 * rows), rings of other sizes (sub-communicators), attention sinks, bitwise repeatability,
 * and that messages of the caller on the same communicator are never taken by the library. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_testutil.h"
#include "rove_oracle.h"

enum split { CONTIG, ZIGZAG, RANDOM, EMPTY1, KV_ON_0, Q_ON_0, SQUARES };

typedef struct {
  const char *name;
  int B, N, H, Hkv, d;
  uint32_t rotate;
  int causal, window;
  float softcap;
  int32_t pos0;
  int shuffle;
  enum split split;
  int oracle;
} ring_case;

static rove_plan *make_plan(const ring_case *c, rove_attention_config *cfg) {
  rove_attention_config_init(cfg, c->H, c->Hkv, c->d);
  cfg->rotate = c->rotate, cfg->causal = c->causal, cfg->window = c->window;
  cfg->softcap = c->softcap, cfg->n_threads = 1;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(cfg, &p), ROVE_OK);
  return p;
}

/* owner[t] of each token for queries (qo) and keys (ko) over P ranks. */
static void owners(const ring_case *c, int P, int *qo, int *ko) {
  const int N = c->N;
  int32_t *tmp = malloc(sizeof(int32_t) * (size_t)(N + 1));
  assert_non_null(tmp);
  rove_rng r;
  rove_rng_seed(&r, 977 + (uint64_t)N);
  for (int t = 0; t < N; t++) qo[t] = ko[t] = -1;
  if (c->split == CONTIG || c->split == ZIGZAG || c->split == KV_ON_0 || c->split == Q_ON_0) {
    const rove_mpi_split kind = c->split == ZIGZAG ? ROVE_MPI_SPLIT_ZIGZAG
                                                   : ROVE_MPI_SPLIT_CONTIGUOUS;
    for (int rk = 0; rk < P; rk++) {
      int32_t n = -1;
      assert_int_equal(rove_mpi_split_positions(kind, N, P, rk, 0, tmp, N, &n), ROVE_OK);
      for (int i = 0; i < n; i++) qo[tmp[i]] = ko[tmp[i]] = rk;
    }
    for (int t = 0; t < N; t++) {
      if (c->split == KV_ON_0) ko[t] = 0;
      if (c->split == Q_ON_0) qo[t] = 0;
    }
  } else if (c->split == RANDOM) {
    for (int t = 0; t < N; t++) qo[t] = ko[t] = (int)(rove_rng_u64(&r) % (uint64_t)P);
  } else if (c->split == EMPTY1) { /* contiguous over the ranks other than 1 */
    const int Q = P > 1 ? P - 1 : 1;
    for (int t = 0; t < N; t++) {
      int rk = (int)((int64_t)t * Q / N);
      qo[t] = ko[t] = (P > 1 && rk >= 1) ? rk + 1 : rk;
    }
  } else { /* SQUARES: rank r gets a share proportional to (r + 1)^2 */
    int64_t tot = 0;
    for (int rk = 0; rk < P; rk++) tot += (int64_t)(rk + 1) * (rk + 1);
    int t = 0;
    for (int rk = 0; rk < P; rk++) {
      int64_t acc = 0;
      for (int j = 0; j <= rk; j++) acc += (int64_t)(j + 1) * (j + 1);
      const int end = rk == P - 1 ? N : (int)(acc * N / tot);
      for (; t < end; t++) qo[t] = ko[t] = rk;
    }
  }
  free(tmp);
}

/* Attention sinks of the cases run by test_sinks (NULL otherwise): [H <= 8]. */
static const float *case_sinks;

/* Run one case on comm (a ring of its size); checks recorded with mt_check. */
static void run_case(const ring_case *c, MPI_Comm comm) {
  int r, P;
  MPI_Comm_rank(comm, &r);
  MPI_Comm_size(comm, &P);
  rove_attention_config cfg;
  rove_plan *p = make_plan(c, &cfg);
  mt_seq s;
  mt_seq_make(&s, c->B, c->N, c->H, c->Hkv, c->d, c->pos0, c->shuffle, 4242 + (uint64_t)c->N);
  float *ref, *ref_lse;
  mt_full_forward(p, &s, case_sinks, &ref, &ref_lse);

  int *qo = malloc(sizeof(int) * (size_t)c->N), *ko = malloc(sizeof(int) * (size_t)c->N);
  int *qi = malloc(sizeof(int) * (size_t)c->N), *ki = malloc(sizeof(int) * (size_t)c->N);
  assert_true(qo && ko && qi && ki);
  owners(c, P, qo, ko);
  const int nq = mt_tokens_of(qo, c->N, r, qi), nk = mt_tokens_of(ko, c->N, r, ki);
  const int rq = c->H * c->d, rk = c->Hkv * c->d;
  float *q = mt_gather(s.q, c->B, c->N, rq, qi, nq);
  float *k = mt_gather(s.k, c->B, c->N, rk, ki, nk), *v = mt_gather(s.v, c->B, c->N, rk, ki, nk);
  int32_t *qp = mt_gather_pos(&s, qi, nq), *kp = mt_gather_pos(&s, ki, nk);

  const int64_t n_out = (int64_t)c->B * nq * rq, n_lse = (int64_t)c->B * c->H * nq;
  rove_guarded go, gl, go2, gl2;
  float *out = rove_guarded_alloc(&go, n_out, 3), *lse = rove_guarded_alloc(&gl, n_lse, 1);
  float *out2 = rove_guarded_alloc(&go2, n_out, 0), *lse2 = rove_guarded_alloc(&gl2, n_lse, 0);
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = c->B, a.q_len = nq, a.kv_len = nk, a.q = q, a.k = k, a.v = v;
  a.q_pos = qp, a.kv_pos = kp, a.out = nq ? out : NULL, a.lse = nq ? lse : NULL;
  a.sinks = case_sinks;
  rove_status st = rove_mpi_ring_attention(p, &a, comm);
  mt_check(st == ROVE_OK, "%s: status %s", c->name, rove_status_string(st));
  if (st == ROVE_OK && nq > 0) mt_compare(c->name, &s, qi, nq, out, lse, ref, ref_lse, 1e-6, 1e-6);
  mt_check(rove_guarded_intact(&go) && rove_guarded_intact(&gl), "%s: canaries", c->name);
  /* the same call again: the same bits */
  a.out = nq ? out2 : NULL, a.lse = nq ? lse2 : NULL;
  st = rove_mpi_ring_attention(p, &a, comm);
  mt_check(st == ROVE_OK && memcmp(out, out2, sizeof(float) * (size_t)n_out) == 0 &&
               memcmp(lse, lse2, sizeof(float) * (size_t)n_lse) == 0,
           "%s: second call differs", c->name);

  if (c->oracle && nq > 0) { /* the double oracle over the whole sequence */
    double inv[ROVE_MAX_HEAD_DIM / 2], m = 1;
    assert_int_equal(rove_rope_inv_freq(&cfg.rope, c->d, inv, &m), ROVE_OK);
    const int64_t nf = (int64_t)c->B * c->N * rq;
    double *od = malloc(sizeof(double) * (size_t)nf);
    float *of = malloc(sizeof(float) * (size_t)nf);
    assert_true(od && of);
    rove_attention_args f;
    memset(&f, 0, sizeof f);
    f.batch = c->B, f.q_len = c->N, f.kv_len = c->N, f.q = s.q, f.k = s.k, f.v = s.v;
    f.q_pos = s.pos, f.kv_pos = s.pos;
    assert_int_equal(rove_oracle_attention(&cfg, inv, m, &f, od, NULL), 0);
    for (int64_t i = 0; i < nf; i++) of[i] = (float)od[i];
    char what[96];
    snprintf(what, sizeof what, "%s vs oracle", c->name);
    mt_compare(what, &s, qi, nq, out, NULL, of, NULL, 2e-5, 0);
    free(od), free(of);
  }
  rove_guarded_free(&go), rove_guarded_free(&gl), rove_guarded_free(&go2), rove_guarded_free(&gl2);
  free(q), free(k), free(v), free(qp), free(kp), free(qo), free(ko), free(qi), free(ki);
  free(ref), free(ref_lse);
  mt_seq_free(&s);
  rove_plan_destroy(p);
}

static void test_contiguous_and_zigzag(void **state) {
  (void)state;
  const ring_case cs[] = {
      {"contiguous causal RoVE GQA 8:2", 2, 150, 8, 2, 32, ROVE_ROTATE_ROVE, 1, 0, 0, 0, 0, CONTIG,
       1},
      {"zig-zag causal RoVE GQA 8:2", 2, 203, 8, 2, 32, ROVE_ROTATE_ROVE, 1, 0, 0, 0, 0, ZIGZAG, 1},
      {"zig-zag causal RoPE", 1, 97, 4, 4, 64, ROVE_ROTATE_ROPE, 1, 0, 0, 0, 0, ZIGZAG, 0},
      {"zig-zag causal MQA", 1, 120, 6, 1, 16, ROVE_ROTATE_ROVE, 1, 0, 0, 0, 0, ZIGZAG, 0},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) run_case(&cs[i], MPI_COMM_WORLD);
  mt_end();
}

static void test_rotation_flags(void **state) {
  (void)state;
  for (uint32_t rot = 0; rot < 16; rot++) {
    char name[48];
    snprintf(name, sizeof name, "rotate 0x%x, zig-zag causal", rot);
    const ring_case c = {name, 1, 64, 4, 2, 16, rot, 1, 0, 0, 0, 0, ZIGZAG, rot == 5};
    run_case(&c, MPI_COMM_WORLD);
  }
  mt_end();
}

static void test_uneven_shards(void **state) {
  (void)state;
  const ring_case cs[] = {
      {"random owners", 2, 131, 8, 2, 32, ROVE_ROTATE_ROVE, 1, 0, 0, 0, 0, RANDOM, 0},
      {"rank 1 holds nothing", 1, 90, 4, 2, 32, ROVE_ROTATE_ROVE, 1, 0, 0, 0, 0, EMPTY1, 0},
      {"keys on rank 0 only", 2, 77, 4, 2, 32, ROVE_ROTATE_ROVE, 1, 0, 0, 0, 0, KV_ON_0, 0},
      {"queries on rank 0 only", 1, 77, 4, 2, 32, ROVE_ROTATE_ROVE, 1, 0, 0, 0, 0, Q_ON_0, 0},
      {"shares (r+1)^2", 1, 140, 4, 2, 32, ROVE_ROTATE_ROVE, 1, 0, 0, 0, 0, SQUARES, 0},
      {"fewer tokens than chunks", 1, 5, 4, 2, 32, ROVE_ROTATE_ROVE, 1, 0, 0, 0, 0, ZIGZAG, 0},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) run_case(&cs[i], MPI_COMM_WORLD);
  mt_end();
}

static void test_masks_and_positions(void **state) {
  (void)state;
  const int32_t near = 1 << 20;
  const ring_case cs[] = {
      {"causal window 17", 1, 160, 8, 2, 32, ROVE_ROTATE_ROVE, 1, 17, 0, 0, 0, ZIGZAG, 1},
      {"bidirectional window 23", 1, 160, 8, 2, 32, ROVE_ROTATE_ROVE, 0, 23, 0, 0, 0, CONTIG, 0},
      {"bidirectional", 2, 111, 4, 2, 32, ROVE_ROTATE_ROVE, 0, 0, 0, 0, 0, RANDOM, 1},
      {"softcap 5", 1, 128, 4, 2, 32, ROVE_ROTATE_ROVE, 1, 0, 5.0f, 0, 0, ZIGZAG, 1},
      {"shuffled positions", 2, 100, 4, 2, 32, ROVE_ROTATE_ROVE, 1, 0, 0, 0, 1, CONTIG, 0},
      {"positions near 2^20", 1, 200, 8, 2, 32, ROVE_ROTATE_ROVE, 1, 0, 0, near - 100, 0, ZIGZAG,
       1},
      {"shuffled near 2^20, window", 1, 150, 4, 2, 64, ROVE_ROTATE_ROVE, 1, 40, 0, near - 75, 1,
       RANDOM, 0},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) run_case(&cs[i], MPI_COMM_WORLD);
  mt_end();
}

/* Attention sinks (gpt-oss): merged once into the ring's result, as the single-process
 * forward applies them (output 1e-6, LSE 1e-6 against it). Sinks from -8 to 6, so that
 * some rows' sums are dominated by the sink and some by the keys. */
static void test_sinks(void **state) {
  (void)state;
  static const float sinks[8] = {1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 6.0f, 0.0f, -8.0f};
  const ring_case cs[] = {
      {"sinks, GQA 8:2, zig-zag", 2, 150, 8, 2, 32, ROVE_ROTATE_ROVE, 1, 0, 0, 0, 0, ZIGZAG, 0},
      {"sinks, window 9, softcap, random", 1, 140, 4, 2, 32, ROVE_ROTATE_ROVE, 1, 9, 4.0f, 0, 0,
       RANDOM, 0},
      {"sinks, bidirectional RoPE, a rank with nothing", 1, 120, 4, 1, 64, ROVE_ROTATE_ROPE, 0, 0,
       0, 0, 0, EMPTY1, 0},
  };
  case_sinks = sinks;
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) run_case(&cs[i], MPI_COMM_WORLD);
  case_sinks = NULL;
  mt_end();
}

/* More query rows than one piece (2048) per batch row: the ring's MPI_Testall path. */
static void test_long_query_shard(void **state) {
  (void)state;
  const ring_case c = {"queries on rank 0, 2 batch rows of 4300",
                       2,
                       4300,
                       2,
                       1,
                       16,
                       ROVE_ROTATE_ROVE,
                       1,
                       0,
                       0,
                       0,
                       0,
                       Q_ON_0,
                       0};
  run_case(&c, MPI_COMM_WORLD);
  mt_end();
}

/* Rings of other sizes: world split into {0, 1, 2} and {3} (4 ranks), or singles (2). */
static void test_sub_communicators(void **state) {
  (void)state;
  const int color = mt_size >= 4 ? (mt_rank < 3 ? 0 : 1) : mt_rank;
  MPI_Comm sub;
  assert_int_equal(MPI_Comm_split(MPI_COMM_WORLD, color, mt_rank, &sub), MPI_SUCCESS);
  const ring_case cs[] = {
      {"sub-communicator zig-zag", 2, 99, 8, 2, 32, ROVE_ROTATE_ROVE, 1, 0, 0, 0, 0, ZIGZAG, 0},
      {"sub-communicator random", 1, 64, 4, 2, 32, ROVE_ROTATE_ROVE, 0, 9, 0, 0, 0, RANDOM, 0},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) run_case(&cs[i], sub);
  MPI_Comm_free(&sub);
  mt_end();
}

/* q, k, v as views into one fused [tokens][(H + 2 Hkv) d] buffer, out with gaps. */
static void test_strides(void **state) {
  (void)state;
  enum { B = 2, N = 90, H = 4, HKV = 2, D = 32 };
  const ring_case c = {"strided", B, N, H, HKV, D, ROVE_ROTATE_ROVE, 1, 0, 0, 0, 0, ZIGZAG, 0};
  rove_attention_config cfg;
  rove_plan *p = make_plan(&c, &cfg);
  mt_seq s;
  mt_seq_make(&s, B, N, H, HKV, D, 0, 0, 99);
  float *ref, *ref_lse;
  mt_full_forward(p, &s, NULL, &ref, &ref_lse);
  int32_t idx32[N];
  int idx[N], n = 0;
  assert_int_equal(
      rove_mpi_split_positions(ROVE_MPI_SPLIT_ZIGZAG, N, mt_size, mt_rank, 0, idx32, N, &n),
      ROVE_OK);
  for (int i = 0; i < n; i++) idx[i] = idx32[i];
  const int64_t fused = (H + 2 * HKV) * D, os = H * D + 7;
  float *qkv = malloc(sizeof(float) * (size_t)(B * n * fused + 1));
  float *out = malloc(sizeof(float) * (size_t)(B * n * os + 1));
  int32_t *pos = mt_gather_pos(&s, idx, n);
  assert_true(qkv && out);
  for (int b = 0; b < B; b++)
    for (int i = 0; i < n; i++) {
      float *row = qkv + ((int64_t)b * n + i) * fused;
      const int64_t t = (int64_t)b * N + idx[i];
      memcpy(row, s.q + t * H * D, sizeof(float) * H * D);
      memcpy(row + H * D, s.k + t * HKV * D, sizeof(float) * HKV * D);
      memcpy(row + (H + HKV) * D, s.v + t * HKV * D, sizeof(float) * HKV * D);
    }
  rove_fill_bits(out, B * n * os + 1, ROVE_GUARD_CANARY);
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = B, a.q_len = n, a.kv_len = n, a.q = qkv, a.k = qkv + H * D, a.v = qkv + (H + HKV) * D;
  a.q_stride = a.k_stride = a.v_stride = fused, a.out_stride = os;
  a.q_pos = a.kv_pos = pos, a.out = n ? out : NULL;
  mt_check(rove_mpi_ring_attention(p, &a, MPI_COMM_WORLD) == ROVE_OK, "strided: status");
  float *dense = malloc(sizeof(float) * (size_t)(B * n * H * D + 1));
  assert_non_null(dense);
  int gaps_ok = 1;
  for (int64_t t = 0; t < (int64_t)B * n; t++) {
    memcpy(dense + t * H * D, out + t * os, sizeof(float) * H * D);
    for (int64_t g = H * D; g < os; g++)
      gaps_ok &= rove_has_bits(out + t * os + g, ROVE_GUARD_CANARY);
  }
  mt_check(gaps_ok, "strided: a gap of out was written");
  if (n > 0) mt_compare("strided", &s, idx, n, dense, NULL, ref, NULL, 1e-6, 0);
  free(qkv), free(out), free(pos), free(dense), free(ref), free(ref_lse);
  mt_seq_free(&s);
  rove_plan_destroy(p);
  mt_end();
}

/* A receive of the caller posted on the same communicator with MPI_ANY_SOURCE and
 * MPI_ANY_TAG before the call must still get the caller's message afterwards. */
static void test_user_messages_isolated(void **state) {
  (void)state;
  int got = -1;
  MPI_Request req;
  MPI_Irecv(&got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &req);
  const ring_case c = {
      "with a pending user receive", 1, 80, 4, 2, 32, ROVE_ROTATE_ROVE, 1, 0, 0, 0, 0, ZIGZAG, 0};
  run_case(&c, MPI_COMM_WORLD);
  const int mine = 1000 + mt_rank;
  MPI_Send(&mine, 1, MPI_INT, (mt_rank + 1) % mt_size, 7, MPI_COMM_WORLD);
  MPI_Status stt;
  MPI_Wait(&req, &stt);
  const int from = (mt_rank + mt_size - 1) % mt_size;
  mt_check(got == 1000 + from && stt.MPI_TAG == 7, "user message: got %d tag %d", got, stt.MPI_TAG);
  mt_end();
}

static void test_split_positions(void **state) {
  (void)state;
  /* zig-zag of 10 tokens over 2 ranks: chunks of 2 or 3 (floor(c n / 4)) */
  int32_t pos[16], n = -1;
  assert_int_equal(rove_mpi_split_positions(ROVE_MPI_SPLIT_ZIGZAG, 10, 2, 0, 100, pos, 16, &n),
                   ROVE_OK);
  const int32_t want0[] = {100, 101, 107, 108, 109};
  assert_int_equal(n, 5);
  assert_memory_equal(pos, want0, sizeof want0);
  assert_int_equal(rove_mpi_split_positions(ROVE_MPI_SPLIT_ZIGZAG, 10, 2, 1, 100, pos, 16, &n),
                   ROVE_OK);
  const int32_t want1[] = {102, 103, 104, 105, 106};
  assert_memory_equal(pos, want1, sizeof want1);
  assert_int_equal(rove_mpi_split_positions(ROVE_MPI_SPLIT_CONTIGUOUS, 10, 3, 2, 0, NULL, 0, &n),
                   ROVE_OK);
  assert_int_equal(n, 4); /* 6 .. 9 */
  /* every token exactly once, for many shapes */
  for (int N = 0; N < 40; N++)
    for (int P = 1; P < 7; P++)
      for (int kind = 0; kind < 2; kind++) {
        int seen[40] = {0}, total = 0;
        for (int r = 0; r < P; r++) {
          int32_t buf[40];
          assert_int_equal(rove_mpi_split_positions((rove_mpi_split)kind, N, P, r, 0, buf, 40, &n),
                           ROVE_OK);
          for (int i = 0; i < n; i++) seen[buf[i]]++;
          total += n;
          if (kind == 1 && N >= 2 * P)
            assert_true(n >= 2 * (N / (2 * P)) && n <= 2 * (N / (2 * P) + 1));
        }
        assert_int_equal(total, N);
        for (int t = 0; t < N; t++) assert_int_equal(seen[t], 1);
      }
  /* bad input, outputs untouched */
  n = 77;
  assert_int_equal(rove_mpi_split_positions(ROVE_MPI_SPLIT_ZIGZAG, 10, 2, 0, 0, NULL, 0, NULL),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_mpi_split_positions(ROVE_MPI_SPLIT_ZIGZAG, -1, 2, 0, 0, NULL, 0, &n),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_mpi_split_positions(ROVE_MPI_SPLIT_ZIGZAG, 10, 0, 0, 0, NULL, 0, &n),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_mpi_split_positions(ROVE_MPI_SPLIT_ZIGZAG, 10, 2, 2, 0, NULL, 0, &n),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_mpi_split_positions((rove_mpi_split)7, 10, 2, 0, 0, NULL, 0, &n),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_mpi_split_positions(ROVE_MPI_SPLIT_ZIGZAG, 10, 2, 0, 0, pos, 4, &n),
                   ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(
      rove_mpi_split_positions(ROVE_MPI_SPLIT_CONTIGUOUS, 10, 2, 0, INT32_MAX - 8, NULL, 0, &n),
      ROVE_ERR_SIZE_OVERFLOW);
  assert_int_equal(
      rove_mpi_split_positions(ROVE_MPI_SPLIT_ZIGZAG, 10, INT32_MAX, 0, 0, NULL, 0, &n),
      ROVE_ERR_SIZE_OVERFLOW);
  assert_int_equal(n, 77);
  assert_int_equal(
      rove_mpi_split_positions(ROVE_MPI_SPLIT_CONTIGUOUS, 10, 2, 0, INT32_MAX - 9, NULL, 0, &n),
      ROVE_OK);
  assert_int_equal(n, 5);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split_positions),        cmocka_unit_test(test_contiguous_and_zigzag),
      cmocka_unit_test(test_rotation_flags),         cmocka_unit_test(test_uneven_shards),
      cmocka_unit_test(test_masks_and_positions),    cmocka_unit_test(test_long_query_shard),
      cmocka_unit_test(test_sub_communicators),      cmocka_unit_test(test_strides),
      cmocka_unit_test(test_user_messages_isolated), cmocka_unit_test(test_sinks),
  };
  return mt_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
