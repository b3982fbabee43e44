/* SPDX-License-Identifier: MIT */
/* mpi_bench: librove_mpi against one rank alone, in the same run (docs/mpi.md).
 *
 *   mpirun -np P [--allow-run-as-root --oversubscribe] mpi_bench [options]
 *     --n N            ring prefill tokens (8192)        --keys K   decode keys (65536)
 *     --heads H        query heads (12)                  --kv-heads kv heads (= H)
 *     --dim D          head_dim (64)                     --threads  threads per rank (1)
 *     --rounds R       ring rounds (5; decode runs 4 R)  --mode all|ring|decode|link
 *     --split both|zigzag|contiguous                     --no-single (skip rank 0 alone)
 *
 * Ring prefill: causal RoVE over n tokens split zig-zag and/or contiguously over the
 * ranks (rove_mpi_ring_attention); the single-rank time is rank 0 alone running
 * rove_attention_forward over all n tokens (default positions) with the same threads while
 * the others wait. Sharded decode: one query row over K keys spread contiguously over the
 * ranks' caches (rove_mpi_cache_attention); single rank: rove_kv_cache_attention over one
 * cache of all K keys. Times are the median over rounds of the slowest rank's wall time.
 * "comm" is the share of the call's time spent inside MPI calls (posts, waits and tests,
 * collectives, the communicator duplicate), measured by PMPI wrappers below that
 * interpose librove_mpi's calls (this executable exports them); "wait" is the part in
 * MPI_Wait* / MPI_Test* and the reductions and broadcasts, i.e. not hidden behind compute.
 * "link" is a ping-pong between ranks 0 and 1 (latency, bandwidth) for bench/mpi_model.py.
 * Every line starting with "result" is key=value for bench/mpi_model.py --bench. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rove_mpi.h"

/* ---- PMPI wrappers: time spent in MPI while g_on ------------------------------------- */
static int g_on;
static double g_wait, g_post, g_coll;
#define TIMED(acc, call)             \
  do {                               \
    if (!g_on) return call;          \
    const double t0_ = PMPI_Wtime(); \
    const int rc_ = call;            \
    acc += PMPI_Wtime() - t0_;       \
    return rc_;                      \
  } while (0)

int MPI_Wait(MPI_Request *r, MPI_Status *s) { TIMED(g_wait, PMPI_Wait(r, s)); }
int MPI_Waitall(int n, MPI_Request r[], MPI_Status *s) { TIMED(g_wait, PMPI_Waitall(n, r, s)); }
int MPI_Test(MPI_Request *r, int *f, MPI_Status *s) { TIMED(g_wait, PMPI_Test(r, f, s)); }
int MPI_Testall(int n, MPI_Request r[], int *f, MPI_Status s[]) {
  TIMED(g_wait, PMPI_Testall(n, r, f, s));
}
int MPI_Isend(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c, MPI_Request *r) {
  TIMED(g_post, PMPI_Isend(b, n, t, d, g, c, r));
}
int MPI_Irecv(void *b, int n, MPI_Datatype t, int s, int g, MPI_Comm c, MPI_Request *r) {
  TIMED(g_post, PMPI_Irecv(b, n, t, s, g, c, r));
}
int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c) {
  TIMED(g_coll, PMPI_Allreduce(s, r, n, t, o, c));
}
int MPI_Reduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, int root, MPI_Comm c) {
  TIMED(g_coll, PMPI_Reduce(s, r, n, t, o, root, c));
}
int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c) {
  TIMED(g_coll, PMPI_Bcast(b, n, t, root, c));
}
int MPI_Comm_dup(MPI_Comm c, MPI_Comm *o) { TIMED(g_coll, PMPI_Comm_dup(c, o)); }

/* ---- options ------------------------------------------------------------------------- */
typedef struct {
  int n, keys, heads, kv_heads, dim, threads, rounds, single;
  const char *mode, *split;
} opts;

static int rank_, size_;

static void die(const char *msg, rove_status st) {
  if (rank_ == 0) fprintf(stderr, "mpi_bench: %s: %s\n", msg, rove_status_string(st));
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static void parse(int argc, char **argv, opts *o) {
  *o = (opts){8192, 65536, 12, 0, 64, 1, 5, 1, "all", "both"};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int *num = !strcmp(a, "--n")          ? &o->n
               : !strcmp(a, "--keys")     ? &o->keys
               : !strcmp(a, "--heads")    ? &o->heads
               : !strcmp(a, "--kv-heads") ? &o->kv_heads
               : !strcmp(a, "--dim")      ? &o->dim
               : !strcmp(a, "--threads")  ? &o->threads
               : !strcmp(a, "--rounds")   ? &o->rounds
                                          : NULL;
    if (!strcmp(a, "--no-single"))
      o->single = 0;
    else if (num && v)
      *num = atoi(v), i++;
    else if (!strcmp(a, "--mode") && v)
      o->mode = v, i++;
    else if (!strcmp(a, "--split") && v)
      o->split = v, i++;
    else
      die(a, ROVE_ERR_INVALID_ARGUMENT);
  }
  if (!o->kv_heads) o->kv_heads = o->heads;
  if (o->n < 1 || o->keys < 1 || o->rounds < 1) die("sizes", ROVE_ERR_INVALID_ARGUMENT);
}

static float *randf(int64_t n, unsigned seed) {
  float *x = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  if (!x) die("malloc", ROVE_ERR_OUT_OF_MEMORY);
  for (int64_t i = 0; i < n; i++)
    seed = seed * 1664525u + 1013904223u, x[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
  return x;
}

static int cmp_d(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_d);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Time fn(ctx) over `rounds` rounds on every rank (after one warm-up): the median of the
 * slowest rank's time, and this run's MPI shares summed over the ranks. */
typedef struct {
  double t, comm, wait;
} timing;
static timing time_rounds(int rounds, rove_status (*fn)(void *), void *ctx) {
  rove_status st = fn(ctx);
  if (st != ROVE_OK) die("warm-up call", st);
  double *ts = malloc(sizeof(double) * (size_t)rounds), busy = 0, comm = 0, wait = 0;
  for (int r = 0; r < rounds; r++) {
    PMPI_Barrier(MPI_COMM_WORLD);
    g_wait = g_post = g_coll = 0, g_on = 1;
    const double t0 = PMPI_Wtime();
    st = fn(ctx);
    const double dt = PMPI_Wtime() - t0;
    g_on = 0;
    if (st != ROVE_OK) die("timed call", st);
    double mine[4] = {dt, g_wait + g_post + g_coll, g_wait + g_coll, 0}, sum[4], mx = 0;
    PMPI_Allreduce(mine, sum, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    ts[r] = mx, busy += sum[0], comm += sum[1], wait += sum[2];
  }
  timing out = {median(ts, rounds), comm / busy, wait / busy};
  free(ts);
  return out;
}

/* The other ranks wait for rank 0's result asleep (a Test every millisecond): a rank
 * spinning in MPI_Bcast would share the core's resources with rank 0's work when the
 * vCPUs are SMT siblings, and slow the one-rank reference. */
static void wait_asleep(double *t) {
  MPI_Request req;
  int done = 0;
  PMPI_Irecv(t, 1, MPI_DOUBLE, 0, 77, MPI_COMM_WORLD, &req);
  const struct timespec ms = {0, 1000000};
  while (PMPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) nanosleep(&ms, NULL);
}

/* rank 0 alone: median of `rounds` calls; the others sleep meanwhile (wait_asleep) */
static double time_single(int rounds, rove_status (*fn)(void *), void *ctx) {
  double t = 0;
  if (rank_ == 0) {
    double *ts = malloc(sizeof(double) * (size_t)rounds);
    rove_status st = fn(ctx);
    for (int r = 0; r < rounds && st == ROVE_OK; r++) {
      const double t0 = PMPI_Wtime();
      st = fn(ctx);
      ts[r] = PMPI_Wtime() - t0;
    }
    if (st != ROVE_OK) die("single-rank call", st);
    t = median(ts, rounds);
    free(ts);
    for (int r = 1; r < size_; r++) PMPI_Send(&t, 1, MPI_DOUBLE, r, 77, MPI_COMM_WORLD);
  } else {
    wait_asleep(&t);
  }
  return t;
}

/* ---- ring prefill ---------------------------------------------------------------------- */
typedef struct {
  const rove_plan *p;
  rove_attention_args a;
} call;
static rove_status ring_fn(void *c) {
  return rove_mpi_ring_attention(((call *)c)->p, &((call *)c)->a, MPI_COMM_WORLD);
}
static rove_status fwd_fn(void *c) {
  return rove_attention_forward(((call *)c)->p, &((call *)c)->a);
}

static void bench_ring(const opts *o, const rove_plan *p, rove_mpi_split kind, const char *name) {
  int32_t m = 0;
  rove_status st = rove_mpi_split_positions(kind, o->n, size_, rank_, 0, NULL, 0, &m);
  int32_t *pos = malloc(sizeof(int32_t) * (size_t)(m > 0 ? m : 1));
  if (st == ROVE_OK) st = rove_mpi_split_positions(kind, o->n, size_, rank_, 0, pos, m, &m);
  if (st != ROVE_OK) die("split", st);
  const int64_t rq = (int64_t)o->heads * o->dim, rk = (int64_t)o->kv_heads * o->dim;
  float *q = randf(m * rq, 1u + (unsigned)rank_), *k = randf(m * rk, 7u + (unsigned)rank_);
  float *v = randf(m * rk, 9u + (unsigned)rank_), *out = randf(m * rq, 0);
  call c = {p, {0}};
  c.a.batch = 1, c.a.q_len = c.a.kv_len = m, c.a.q = q, c.a.k = k, c.a.v = v, c.a.out = out;
  c.a.q_pos = c.a.kv_pos = pos;
  const timing t = time_rounds(o->rounds, ring_fn, &c);
  free(q), free(k), free(v), free(out), free(pos);
  double t1 = 0;
  if (o->single) { /* rank 0 alone over the whole sequence */
    call s = {p, {0}};
    float *sq = NULL, *sk = NULL, *sv = NULL, *so = NULL;
    if (rank_ == 0) {
      sq = randf(o->n * rq, 1), sk = randf(o->n * rk, 2), sv = randf(o->n * rk, 3),
      so = randf(o->n * rq, 0);
      s.a.batch = 1, s.a.q_len = s.a.kv_len = o->n, s.a.q = sq, s.a.k = sk, s.a.v = sv,
      s.a.out = so;
    }
    t1 = time_single(o->rounds, fwd_fn, &s);
    free(sq), free(sk), free(sv), free(so);
  }
  const double flops = 4.0 * o->dim * o->heads * ((double)o->n * (o->n + 1) / 2);
  if (rank_ == 0) {
    printf("ring %-10s n=%d %dx%d (kv %d): %d ranks %.4f s", name, o->n, o->heads, o->dim,
           o->kv_heads, size_, t.t);
    if (o->single) printf(", 1 rank %.4f s, speedup %.2f", t1, t1 / t.t);
    printf(", comm %.1f %% (waits %.1f %%)\n", 100 * t.comm, 100 * t.wait);
    printf(
        "result kind=ring split=%s n=%d heads=%d kv_heads=%d dim=%d ranks=%d threads=%d "
        "t_par=%.6g t_single=%.6g speedup=%.4g comm_share=%.4g wait_share=%.4g "
        "gflops_single=%.4g\n",
        name, o->n, o->heads, o->kv_heads, o->dim, size_, o->threads, t.t, t1,
        t1 > 0 ? t1 / t.t : 0, t.comm, t.wait, t1 > 0 ? flops / t1 * 1e-9 : 0);
  }
}

/* ---- sharded decode ------------------------------------------------------------------ */
typedef struct {
  const rove_plan *p;
  const rove_kv_cache *c;
  rove_attention_args a;
} dcall;
static rove_status dec_fn(void *c) {
  dcall *d = c;
  return rove_mpi_cache_attention(d->p, d->c, &d->a, 0, MPI_COMM_WORLD);
}
static rove_status cache_fn(void *c) {
  return rove_kv_cache_attention(((dcall *)c)->c, &((dcall *)c)->a);
}

static rove_kv_cache *fill_cache(const rove_plan *p, int32_t n, int32_t first, int64_t rk) {
  rove_kv_cache *c = NULL;
  rove_status st = rove_kv_cache_create(p, 1, n > 0 ? n : 1, &c);
  if (st == ROVE_OK && n > 0) {
    float *k = randf(n * rk, 11u + (unsigned)first), *v = randf(n * rk, 13u + (unsigned)first);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n);
    for (int32_t i = 0; i < n; i++) pos[i] = first + i;
    st = rove_kv_cache_append(c, n, k, 0, v, 0, pos);
    free(k), free(v), free(pos);
  }
  if (st != ROVE_OK) die("cache", st);
  return c;
}

static void bench_decode(const opts *o, const rove_plan *p) {
  const int64_t rq = (int64_t)o->heads * o->dim, rk = (int64_t)o->kv_heads * o->dim;
  const int32_t first = (int32_t)((int64_t)rank_ * o->keys / size_);
  const int32_t n = (int32_t)((int64_t)(rank_ + 1) * o->keys / size_) - first;
  rove_kv_cache *slice = fill_cache(p, n, first, rk);
  float *q = randf(rq, 5), *out = randf(rq, 0);
  const int32_t qpos = o->keys;
  dcall d = {p, slice, {0}};
  d.a.batch = 1, d.a.q_len = 1, d.a.q = q, d.a.q_pos = &qpos, d.a.out = out;
  const timing t = time_rounds(4 * o->rounds, dec_fn, &d);
  rove_kv_cache_destroy(slice);
  double t1 = 0;
  if (o->single) {
    dcall s = {p, NULL, {0}};
    rove_kv_cache *whole = rank_ == 0 ? fill_cache(p, o->keys, 0, rk) : NULL;
    s.c = whole, s.a = d.a;
    t1 = time_single(4 * o->rounds, cache_fn, &s);
    rove_kv_cache_destroy(whole);
  }
  const double bytes = 2.0 * o->keys * (double)rk * 4;
  if (rank_ == 0) {
    printf("decode     keys=%d %dx%d (kv %d), 1 row: %d ranks %.4f ms", o->keys, o->heads, o->dim,
           o->kv_heads, size_, 1e3 * t.t);
    if (o->single) printf(", 1 rank %.4f ms, speedup %.2f", 1e3 * t1, t1 / t.t);
    printf(", comm %.1f %% (waits %.1f %%)\n", 100 * t.comm, 100 * t.wait);
    printf(
        "result kind=decode keys=%d heads=%d kv_heads=%d dim=%d ranks=%d threads=%d t_par=%.6g "
        "t_single=%.6g speedup=%.4g comm_share=%.4g wait_share=%.4g gbs_single=%.4g\n",
        o->keys, o->heads, o->kv_heads, o->dim, size_, o->threads, t.t, t1, t1 > 0 ? t1 / t.t : 0,
        t.comm, t.wait, t1 > 0 ? bytes / t1 * 1e-9 : 0);
  }
  free(q), free(out);
}

/* ---- link: ping-pong between ranks 0 and 1 -------------------------------------------- */
static void bench_link(const opts *o) {
  if (size_ < 2) return;
  const int big =
      (int)((int64_t)o->n / size_ * (2 * o->kv_heads * o->dim + 1) * 4); /* one ring block */
  char *buf = calloc((size_t)(big > 8 ? big : 8), 1);
  double lat = 0, bw = 0;
  for (int pass = 0; pass < 2; pass++) {
    const int bytes = pass ? big : 8, iters = pass ? 10 : 1000;
    PMPI_Barrier(MPI_COMM_WORLD);
    const double t0 = PMPI_Wtime();
    for (int i = 0; i < iters && rank_ < 2; i++) {
      if (rank_ == 0) {
        PMPI_Send(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        PMPI_Recv(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        PMPI_Recv(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        PMPI_Send(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
      }
    }
    const double half = (PMPI_Wtime() - t0) / (2.0 * iters);
    if (pass)
      bw = bytes / (half - lat);
    else
      lat = half;
  }
  free(buf);
  if (rank_ == 0) {
    printf("link       rank 0 <-> 1: latency %.2f us, bandwidth %.2f GB/s (%d-byte messages)\n",
           lat * 1e6, bw * 1e-9, big);
    printf("result kind=link latency_us=%.4g bandwidth_gbs=%.4g bytes=%d\n", lat * 1e6, bw * 1e-9,
           big);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  opts o;
  parse(argc, argv, &o);
  rove_attention_config c;
  rove_attention_config_init(&c, o.heads, o.kv_heads, o.dim);
  c.causal = 1, c.rotate = ROVE_ROTATE_ROVE, c.n_threads = o.threads;
  rove_plan *p = NULL;
  const rove_status st = rove_plan_create(&c, &p);
  if (st != ROVE_OK) die("plan", st);
  if (rank_ == 0)
    printf("# mpi_bench: %d ranks, %d thread(s) per rank, isa %s, librove %s\n", size_, o.threads,
           rove_isa_name(rove_plan_isa(p)), rove_version_string());
  const int all = !strcmp(o.mode, "all");
  if (all || !strcmp(o.mode, "link")) bench_link(&o);
  if (all || !strcmp(o.mode, "ring")) {
    if (strcmp(o.split, "contiguous")) bench_ring(&o, p, ROVE_MPI_SPLIT_ZIGZAG, "zigzag");
    if (strcmp(o.split, "zigzag")) bench_ring(&o, p, ROVE_MPI_SPLIT_CONTIGUOUS, "contiguous");
  }
  if (all || !strcmp(o.mode, "decode")) bench_decode(&o, p);
  rove_plan_destroy(p);
  MPI_Finalize();
  return 0;
}
