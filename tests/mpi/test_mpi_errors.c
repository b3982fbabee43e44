/* SPDX-License-Identifier: MIT */
/* Error paths of librove_mpi under mpiexec with 2 and 4 ranks: a bad argument on one rank,
 * or sizes and plans that differ between ranks, must give the same status on every rank,
 * never deadlock (ctest gives the suite a timeout), and leave every output untouched; a
 * failure inside one rank's local attention (a cache of another batch) is agreed on too;
 * MPI_COMM_NULL fails without communicating; and after all that a good call still works
 * (no stray message of a failed call is left behind). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_testutil.h"

enum { B = 1, N = 64, H = 4, HKV = 2, D = 32 };

typedef struct {
  rove_plan *p;
  mt_seq s;
  int idx[N], n;
  float *q, *k, *v;
  int32_t *pos;
  rove_guarded go, gl;
  rove_attention_args a;
} fixture;

static rove_plan *plan_of(int h, int hkv, int d, int causal, float softcap) {
  rove_attention_config c;
  rove_attention_config_init(&c, h, hkv, d);
  c.causal = causal, c.softcap = softcap, c.n_threads = 1;
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  return p;
}

/* This rank's zig-zag shard of one sequence, outputs in guarded buffers. */
static void setup_ring(fixture *f) {
  memset(f, 0, sizeof *f);
  f->p = plan_of(H, HKV, D, 1, 0);
  mt_seq_make(&f->s, B, N, H, HKV, D, 0, 0, 3);
  int32_t buf[N];
  assert_int_equal(
      rove_mpi_split_positions(ROVE_MPI_SPLIT_ZIGZAG, N, mt_size, mt_rank, 0, buf, N, &f->n),
      ROVE_OK);
  for (int i = 0; i < f->n; i++) f->idx[i] = buf[i];
  f->q = mt_gather(f->s.q, B, N, H * D, f->idx, f->n);
  f->k = mt_gather(f->s.k, B, N, HKV * D, f->idx, f->n);
  f->v = mt_gather(f->s.v, B, N, HKV * D, f->idx, f->n);
  f->pos = mt_gather_pos(&f->s, f->idx, f->n);
  rove_guarded_alloc(&f->go, (int64_t)B * f->n * H * D, 0);
  rove_guarded_alloc(&f->gl, (int64_t)B * H * f->n, 0);
  rove_attention_args *a = &f->a;
  a->batch = B, a->q_len = a->kv_len = f->n, a->q = f->q, a->k = f->k, a->v = f->v;
  a->q_pos = a->kv_pos = f->pos, a->out = f->go.data, a->lse = f->gl.data;
}

static void teardown_ring(fixture *f) {
  free(f->q), free(f->k), free(f->v), free(f->pos);
  rove_guarded_free(&f->go), rove_guarded_free(&f->gl);
  mt_seq_free(&f->s);
  rove_plan_destroy(f->p);
}

static int untouched(const fixture *f) {
  for (int64_t i = 0; i < f->go.n; i++)
    if (!rove_has_bits(f->go.data + i, ROVE_GUARD_CANARY)) return 0;
  for (int64_t i = 0; i < f->gl.n; i++)
    if (!rove_has_bits(f->gl.data + i, ROVE_GUARD_CANARY)) return 0;
  return rove_guarded_intact(&f->go) && rove_guarded_intact(&f->gl);
}

/* The same status on every rank (MIN and MAX over the world agree) and equal to want. */
static void expect_all(const char *what, rove_status st, rove_status want) {
  int v[2] = {(int)st, -(int)st}, w[2];
  MPI_Allreduce(v, w, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  mt_check(w[0] == -w[1], "%s: ranks returned different statuses", what);
  mt_check(st == want, "%s: status %s, want %s", what, rove_status_string(st),
           rove_status_string(want));
}

static void test_ring_errors(void **state) {
  (void)state;
  fixture f;
  setup_ring(&f);
  const int victim = mt_size - 1; /* the one rank that goes wrong */
  rove_attention_args a;
  rove_status st;
  const double angles[1] = {0};

  /* plans that differ: head_dim, n_heads, causal, softcap */
  struct {
    const char *what;
    int h, hkv, d, causal;
    float cap;
  } plans[] = {{"head_dim 64 on one rank", H, HKV, 64, 1, 0},
               {"n_heads 8 on one rank", 8, HKV, D, 1, 0},
               {"bidirectional on one rank", H, HKV, D, 0, 0},
               {"softcap on one rank", H, HKV, D, 1, 3}};
  for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
    rove_plan *other = plan_of(plans[i].h, plans[i].hkv, plans[i].d, plans[i].causal, plans[i].cap);
    /* buffers of the victim are sized for its own plan's shape only if it matches: pass
     * the fixture's (they are never read: the agreement fails first) */
    st = rove_mpi_ring_attention(mt_rank == victim ? other : f.p, &f.a, MPI_COMM_WORLD);
    expect_all(plans[i].what, st, ROVE_ERR_INVALID_ARGUMENT);
    rove_plan_destroy(other);
  }
  /* arguments bad on one rank */
  a = f.a, a.batch = mt_rank == victim ? 2 : 1;
  expect_all("batch differs", rove_mpi_ring_attention(f.p, &a, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  a = f.a;
  if (mt_rank == victim) a.q = NULL, a.q_len = a.q_len ? a.q_len : 1;
  expect_all("NULL q on one rank", rove_mpi_ring_attention(f.p, &a, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  a = f.a;
  if (mt_rank == victim) a.kv_pos = NULL, a.kv_len = a.kv_len ? a.kv_len : 1;
  expect_all("missing kv positions", rove_mpi_ring_attention(f.p, &a, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  a = f.a;
  if (mt_rank == victim) a.kv_len = -1;
  expect_all("kv_len -1", rove_mpi_ring_attention(f.p, &a, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  a = f.a;
  if (mt_rank == victim) a.k_stride = 3;
  expect_all("k stride too small", rove_mpi_ring_attention(f.p, &a, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  a = f.a; /* (N = 64 over at most 32 ranks: every rank has tokens) */
  if (mt_rank == victim) a.out = (float *)f.q;
  expect_all("out overlaps q", rove_mpi_ring_attention(f.p, &a, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  a = f.a;
  if (mt_rank == 0) a.q_angles = a.kv_angles = angles;
  expect_all("angles on rank 0", rove_mpi_ring_attention(f.p, &a, MPI_COMM_WORLD),
             ROVE_ERR_UNSUPPORTED);
  static const float sinks[64] = {0.5f, NAN};
  a = f.a;
  if (mt_rank == victim) a.sinks = sinks;
  expect_all("NaN sink", rove_mpi_ring_attention(f.p, &a, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  a = f.a; /* a rank without queries checks its sinks too */
  if (mt_rank == victim) a.q_len = 0, a.q = a.out = a.lse = NULL, a.q_pos = NULL, a.sinks = sinks;
  expect_all("NaN sink, no queries", rove_mpi_ring_attention(f.p, &a, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  a = f.a;
  if (mt_rank == victim) a.sinks = a.out + 3;
  expect_all("sinks inside out", rove_mpi_ring_attention(f.p, &a, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  /* different failures: the largest code wins everywhere */
  a = f.a;
  if (mt_rank == 0) a.q_angles = a.kv_angles = angles;
  if (mt_rank == victim) a.batch = 0;
  expect_all("unsupported + invalid", rove_mpi_ring_attention(f.p, &a, MPI_COMM_WORLD),
             mt_size > 1 ? ROVE_ERR_UNSUPPORTED : ROVE_ERR_INVALID_ARGUMENT);
  a = f.a;
  expect_all("NULL args",
             rove_mpi_ring_attention(f.p, mt_rank == victim ? NULL : &a, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  expect_all("NULL plan",
             rove_mpi_ring_attention(mt_rank == victim ? NULL : f.p, &a, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  /* a block of more than INT_MAX tokens (batch 2 x INT32_MAX keys) cannot be a message;
   * nothing is read (k points to a small buffer) */
  a = f.a;
  if (mt_rank == victim) a.batch = 2, a.kv_len = INT32_MAX, a.q_len = 0;
  if (mt_rank != victim) a.batch = 2, a.q_len = 0, a.kv_len = 0;
  expect_all("2^32 keys", rove_mpi_ring_attention(f.p, &a, MPI_COMM_WORLD), ROVE_ERR_SIZE_OVERFLOW);
  /* MPI_COMM_NULL everywhere: no communication */
  expect_all("MPI_COMM_NULL", rove_mpi_ring_attention(f.p, &f.a, MPI_COMM_NULL),
             ROVE_ERR_INVALID_ARGUMENT);
  mt_check(untouched(&f), "ring: an output was written by a failed call");
  /* and a good call works afterwards */
  expect_all("good call", rove_mpi_ring_attention(f.p, &f.a, MPI_COMM_WORLD), ROVE_OK);
  /* plans that compute the same agree: a softcap of -0 (no cap, as 0) on one rank; and,
   * where nothing rotates, another theta on one rank */
  rove_plan *neg = plan_of(H, HKV, D, 1, -0.0f);
  expect_all("softcap -0 on one rank",
             rove_mpi_ring_attention(mt_rank == victim ? neg : f.p, &f.a, MPI_COMM_WORLD), ROVE_OK);
  rove_plan_destroy(neg);
  rove_plan *th[2][2]; /* [rotates][theta 1e4 or 5e5] */
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 2; i++) {
      rove_attention_config c;
      rove_attention_config_init(&c, H, HKV, D);
      c.rotate = r ? ROVE_ROTATE_ROVE : 0, c.n_threads = 1, c.rope.theta = i ? 500000.0 : 10000.0;
      assert_int_equal(rove_plan_create(&c, &th[r][i]), ROVE_OK);
    }
  expect_all("theta differs, nothing rotated",
             rove_mpi_ring_attention(th[0][mt_rank == victim], &f.a, MPI_COMM_WORLD), ROVE_OK);
  expect_all("theta differs, RoVE", /* with rotations it changes the result: refused */
             rove_mpi_ring_attention(th[1][mt_rank == victim], &f.a, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  for (int r = 0; r < 2; r++) rove_plan_destroy(th[r][0]), rove_plan_destroy(th[r][1]);
  teardown_ring(&f);
  mt_end();
}

static void test_decode_errors(void **state) {
  (void)state;
  fixture f;
  setup_ring(&f);
  rove_kv_cache *c = NULL, *c2 = NULL;
  assert_int_equal(rove_kv_cache_create(f.p, B, N, &c), ROVE_OK);
  assert_int_equal(rove_kv_cache_create(f.p, 2, N, &c2), ROVE_OK);
  if (f.n > 0) assert_int_equal(rove_kv_cache_append(c, f.n, f.k, 0, f.v, 0, f.pos), ROVE_OK);
  float *k2 = malloc(sizeof(float) * 2 * HKV * D), *v2 = malloc(sizeof(float) * 2 * HKV * D);
  assert_true(k2 && v2);
  memset(k2, 0, sizeof(float) * 2 * HKV * D), memset(v2, 0, sizeof(float) * 2 * HKV * D);
  const int32_t p2[2] = {0, 0};
  assert_int_equal(rove_kv_cache_append(c2, 1, k2, 0, v2, 0, p2), ROVE_OK);
  /* one decode row: token N - 1's query, on every rank (root may be any) */
  rove_guarded go, gl;
  float *out = rove_guarded_alloc(&go, H * D, 0), *lse = rove_guarded_alloc(&gl, H, 0);
  const float *q = f.s.q + (int64_t)(N - 1) * H * D;
  const int32_t qpos = N - 1;
  rove_attention_args a0;
  memset(&a0, 0, sizeof a0);
  a0.batch = 1, a0.q_len = 1, a0.q = q, a0.q_pos = &qpos, a0.out = out, a0.lse = lse;
  const int victim = mt_size - 1;
  rove_attention_args a;
  const double angles[1] = {0};

  rove_plan *other = plan_of(H, HKV, 64, 1, 0);
  expect_all("decode: head_dim differs",
             rove_mpi_cache_attention(mt_rank == victim ? other : f.p, c, &a0, 0, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  rove_plan_destroy(other);
  expect_all(
      "decode: root differs",
      rove_mpi_cache_attention(f.p, c, &a0, mt_rank == victim ? 0 : mt_size - 1, MPI_COMM_WORLD),
      mt_size > 1 ? ROVE_ERR_INVALID_ARGUMENT : ROVE_OK);
  if (mt_size == 1)
    rove_fill_bits(out, H * D, ROVE_GUARD_CANARY), rove_fill_bits(lse, H, ROVE_GUARD_CANARY);
  expect_all("decode: root out of range",
             rove_mpi_cache_attention(f.p, c, &a0, mt_size, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  a = a0;
  if (mt_rank == 0) a.q = NULL;
  expect_all("decode: root's q NULL", rove_mpi_cache_attention(f.p, c, &a, 0, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  a = a0;
  if (mt_rank == 0) a.q_pos = NULL;
  expect_all("decode: root's q_pos NULL", rove_mpi_cache_attention(f.p, c, &a, 0, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  a = a0;
  if (mt_rank == victim) a.q_len = 2;
  expect_all("decode: q_len differs", rove_mpi_cache_attention(f.p, c, &a, 0, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  a = a0;
  if (mt_rank == victim) a.kv_len = 1;
  expect_all("decode: kv_len set", rove_mpi_cache_attention(f.p, c, &a, 0, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  a = a0;
  if (mt_rank == victim) a.q_angles = angles;
  expect_all("decode: angles", rove_mpi_cache_attention(f.p, c, &a, 0, MPI_COMM_WORLD),
             ROVE_ERR_UNSUPPORTED);
  static const float sinks[64] = {0.5f, INFINITY};
  a = a0;
  if (mt_rank == 0) a.sinks = sinks; /* read on root (0) only */
  expect_all("decode: infinite sink", rove_mpi_cache_attention(f.p, c, &a, 0, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  a = a0;
  if (mt_rank == 0) a.lse = out + 1;
  expect_all("decode: lse overlaps out", rove_mpi_cache_attention(f.p, c, &a, 0, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  expect_all("decode: NULL cache",
             rove_mpi_cache_attention(f.p, mt_rank == victim ? NULL : c, &a0, 0, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  /* agreed after the local attention: the victim's cache has batch 2 (not empty) */
  expect_all("decode: a cache of another batch",
             rove_mpi_cache_attention(f.p, mt_rank == victim ? c2 : c, &a0, 0, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  expect_all("decode: MPI_COMM_NULL", rove_mpi_cache_attention(f.p, c, &a0, 0, MPI_COMM_NULL),
             ROVE_ERR_INVALID_ARGUMENT);
  /* the victim's cache comes from a plan of the same shape with a softcap: its rows are
   * the same, but p's fingerprint is not the cache's plan's (the victim's check; the
   * agreement gives every rank its status) */
  rove_plan *capped = plan_of(H, HKV, D, 1, 30.0f), *twin = plan_of(H, HKV, D, 1, 0);
  rove_kv_cache *cc = NULL, *ct = NULL;
  assert_int_equal(rove_kv_cache_create(capped, B, N, &cc), ROVE_OK);
  assert_int_equal(rove_kv_cache_create(twin, B, N, &ct), ROVE_OK);
  assert_ptr_equal(rove_kv_cache_plan(cc), capped);
  if (f.n > 0) {
    assert_int_equal(rove_kv_cache_append(cc, f.n, f.k, 0, f.v, 0, f.pos), ROVE_OK);
    assert_int_equal(rove_kv_cache_append(ct, f.n, f.k, 0, f.v, 0, f.pos), ROVE_OK);
  }
  expect_all("decode: a cache of another plan's configuration",
             rove_mpi_cache_attention(f.p, mt_rank == victim ? cc : c, &a0, 0, MPI_COMM_WORLD),
             ROVE_ERR_INVALID_ARGUMENT);
  int clean = 1;
  for (int i = 0; i < H * D; i++) clean &= rove_has_bits(out + i, ROVE_GUARD_CANARY);
  for (int i = 0; i < H; i++) clean &= rove_has_bits(lse + i, ROVE_GUARD_CANARY);
  mt_check(clean && rove_guarded_intact(&go) && rove_guarded_intact(&gl),
           "decode: output written by a failed call");
  expect_all("decode: good call", rove_mpi_cache_attention(f.p, c, &a0, 0, MPI_COMM_WORLD),
             ROVE_OK);
  /* a cache of another plan object with p's configuration is accepted, bit for bit */
  float *out2 = calloc((size_t)H * D, sizeof(float)); /* compared even if the call failed */
  assert_non_null(out2);
  rove_attention_args a2 = a0;
  a2.out = out2, a2.lse = NULL;
  expect_all("decode: a cache of an equal plan",
             rove_mpi_cache_attention(f.p, mt_rank == victim ? ct : c, &a2, 0, MPI_COMM_WORLD),
             ROVE_OK);
  if (mt_rank == 0)
    mt_check(memcmp(out, out2, sizeof(float) * H * D) == 0,
             "decode: an equal plan's cache gave other bits");
  free(out2);
  rove_kv_cache_destroy(cc), rove_kv_cache_destroy(ct);
  rove_plan_destroy(capped), rove_plan_destroy(twin);
  rove_guarded_free(&go), rove_guarded_free(&gl);
  free(k2), free(v2);
  rove_kv_cache_destroy(c), rove_kv_cache_destroy(c2);
  teardown_ring(&f);
  mt_end();
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_ring_errors),
                                     cmocka_unit_test(test_decode_errors)};
  return mt_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
