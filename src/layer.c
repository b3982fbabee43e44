/* SPDX-License-Identifier: MIT */
/* The attention layer: fused QKV projection (OpenBLAS), attention over strided views of
 * its output, output projection (OpenBLAS).
 *
 * OpenBLAS threading. OpenBLAS never runs threads of its own here: each projection is
 * split into column slices (output features, multiples of 64) that librove's own pool
 * (src/threads.c) runs, each slice one single-threaded sgemm (sgemv for one row). So there
 * is one pool, nothing spins against anything, the plan's n_threads is honoured with any
 * OpenBLAS build, and OpenBLAS's threaded driver, which ends the process when it cannot
 * allocate its job array, is never entered. One slice per thread (balanced, and no
 * slicing on one thread). OpenBLAS's sgemm rounds differently for different column
 * partitions, so the layer's results differ between thread counts by float rounding (as
 * they did with OpenBLAS's own threads); a given thread count repeats its bits. OpenBLAS
 * is single-threaded this way by build (detected at run time
 * with openblas_get_parallel, so whichever libopenblas.so.0 the loader picks):
 * - pthread build (Debian's default): openblas_set_num_threads(1) while any layer call of
 *   this process projects (a counter: the first call in saves the count, the last one out
 *   restores it). It is process-global: the program's own OpenBLAS calls made meanwhile
 *   run single-threaded too (speed, and rounding as for any thread count, may differ).
 * - OpenMP build (libopenblas0-openmp; ROVE_OPENBLAS_VARIANT=openmp): OpenBLAS takes its
 *   thread count from the calling thread's omp_get_max_threads(), so each thread that runs
 *   a slice has libgomp's omp_set_num_threads(1) (found in the process with
 *   dlopen(RTLD_NOLOAD): librove itself does not link libgomp); the calling thread's count
 *   is restored after, a pool worker's stays 1. libgomp allocates a few bytes for that the
 *   first time on each thread, and ends the process if that fails (documented in rove.h).
 * - sequential build: nothing to do.
 * OpenBLAS keeps a fixed table of buffers for the calls running at once in the process
 * (Debian's 0.3.21: built for 128 threads; past the table the process ends, or memory is
 * corrupted). A call splits a projection into at most ROVE_LAYER_MAX_SLICES slices, and
 * across all layer calls of the process at most ROVE_BLAS_MAX_RUNNING slices are inside
 * OpenBLAS at once: a slice past that waits for one to finish (blas_slot_take). The
 * slices are fixed by the shapes and thread count, so waiting changes no result.
 * Timings: BENCHMARKS.md.
 */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "attention_internal.h"
#include "layer_internal.h"

/* OpenBLAS's thread controls (declared here too, so another cblas.h would still do). */
int openblas_get_parallel(void);
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);

#define ROVE_LAYER_MAX_SLICES 32
#define ROVE_BLAS_MAX_RUNNING 64 /* slices inside OpenBLAS at once, process-wide */
#define SLICE_ALIGN 64            /* columns per slice: a multiple of OpenBLAS's unrolls */
#define MIN_SLICE_MACS (1 << 18)  /* below this many multiply-adds a slice is not worth it */

/* libgomp's per-thread count, when libgomp is in the process (OpenBLAS's OpenMP build). */
static int (*gomp_get_max_threads)(void);
static void (*gomp_set_num_threads)(int);
static pthread_once_t gomp_once = PTHREAD_ONCE_INIT;
static void find_gomp(void) {
  void *h = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return;
  int (*get)(void) = (int (*)(void))dlsym(h, "omp_get_max_threads");
  void (*set)(int) = (void (*)(int))dlsym(h, "omp_set_num_threads");
  if (get && set) {
    gomp_get_max_threads = get;
    gomp_set_num_threads = set;
  }
  /* the handle stays open: libgomp stays loaded while OpenBLAS needs it anyway */
}

/* The pthread build's count: set to 1 by the first projecting call, restored by the last. */
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static int blas_users, blas_saved;

typedef struct blas_single {
  int kind;  /* openblas_get_parallel(): 0 sequential, 1 pthreads, 2 OpenMP */
  int saved; /* OpenMP build: the calling thread's count to restore (0: none) */
} blas_single;

static void blas_single_enter(blas_single *g) {
  g->kind = openblas_get_parallel();
  g->saved = 0;
  if (g->kind == 1) {
    pthread_mutex_lock(&blas_lock);
    if (blas_users++ == 0) {
      blas_saved = openblas_get_num_threads();
      if (blas_saved != 1) openblas_set_num_threads(1);
    }
    pthread_mutex_unlock(&blas_lock);
  } else if (g->kind == 2) {
    pthread_once(&gomp_once, find_gomp);
    if (gomp_get_max_threads && (g->saved = gomp_get_max_threads()) != 1) gomp_set_num_threads(1);
  }
}

static void blas_single_leave(const blas_single *g) {
  if (g->kind == 1) {
    pthread_mutex_lock(&blas_lock);
    if (--blas_users == 0 && blas_saved != 1) openblas_set_num_threads(blas_saved);
    pthread_mutex_unlock(&blas_lock);
  } else if (g->kind == 2 && g->saved > 1) {
    gomp_set_num_threads(g->saved);
  }
}

/* The process-wide count of slices inside OpenBLAS (<= ROVE_BLAS_MAX_RUNNING). A slice
 * holds one slot for its sgemm / sgemv only and never takes a second, so a wait always
 * ends. The wait is not a cancellation point (a cancelled waiter would leave the mutex
 * locked). */
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slot_free = PTHREAD_COND_INITIALIZER;
static int slots_taken;

static void blas_slot_take(void) {
  int cancel;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
  pthread_mutex_lock(&slot_lock);
  while (slots_taken >= ROVE_BLAS_MAX_RUNNING) pthread_cond_wait(&slot_free, &slot_lock);
  slots_taken++;
  pthread_mutex_unlock(&slot_lock);
  pthread_setcancelstate(cancel, NULL);
}

static void blas_slot_give(void) {
  pthread_mutex_lock(&slot_lock);
  slots_taken--;
  pthread_cond_signal(&slot_free);
  pthread_mutex_unlock(&slot_lock);
}

/* C[rows][n] = A[rows][k] B^T + bias over the columns [j0, j1) of one slice. */
typedef struct gemm_job {
  int64_t rows, n, k, n_slices;
  const float *a, *b, *bias;
  float *c;
  int gomp; /* OpenMP build with libgomp's functions found */
} gemm_job;

/* OpenMP build: a pool worker's own OpenMP count (the caller's is set and restored by
 * blas_single_*). Run on every thread of the team before the slices, so that libgomp's
 * one-time allocation for it happens on the first projection of each worker. */
static void gomp_single_task(int64_t i, int tid, void *ctx) {
  (void)i, (void)ctx;
  if (tid != 0 && gomp_get_max_threads() != 1) gomp_set_num_threads(1);
}

static void gemm_slice(int64_t slice, int tid, void *ctx) {
  const gemm_job *g = ctx;
  if (g->gomp) gomp_single_task(slice, tid, NULL); /* a worker the team gained since */
  const int64_t units = (g->n + SLICE_ALIGN - 1) / SLICE_ALIGN;
  const int64_t j0 = units * slice / g->n_slices * SLICE_ALIGN;
  int64_t j1 = units * (slice + 1) / g->n_slices * SLICE_ALIGN;
  if (j1 > g->n) j1 = g->n;
  if (j1 <= j0) return;
  const int64_t n = g->n, k = g->k, w = j1 - j0;
  if (g->bias)
    for (int64_t i = 0; i < g->rows; i++)
      memcpy(g->c + i * n + j0, g->bias + j0, sizeof(float) * (size_t)w);
  const float beta = g->bias ? 1.0f : 0.0f;
  if (g->rows == 1) { /* a decode step: a matrix-vector product streams B at memory speed */
    /* y zeroed first: some OpenBLAS releases (0.3.27) scale y by beta = 0 as a product,
     * so a NaN left in the caller's y (or in reused workspace) would survive */
    if (!g->bias) memset(g->c + j0, 0, sizeof(float) * (size_t)w);
    blas_slot_take();
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)w, (int)k, 1.0f, g->b + j0 * k, (int)k, g->a,
                1, beta, g->c + j0, 1);
    blas_slot_give();
    return;
  }
  blas_slot_take();
  for (int64_t r0 = 0; r0 < g->rows; r0 += INT_MAX) {
    const int m = (int)(g->rows - r0 < INT_MAX ? g->rows - r0 : INT_MAX);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, (int)w, (int)k, 1.0f,
                g->a + r0 * k, (int)k, g->b + j0 * k, (int)k, beta, g->c + r0 * n + j0, (int)n);
  }
  blas_slot_give();
}

/* C[rows][n] = A[rows][k] B^T (B: [n][k]) + bias (broadcast over rows, may be NULL).
 * n and k fit int (checked at create); rows is split into sgemm calls of <= INT_MAX; a
 * single row is an sgemv (OpenBLAS's sgemm with M = 1 reads B several times slower).
 * The slices depend on the shapes and the thread count only. */
static void gemm_bias(const rove_plan *p, int64_t rows, int64_t n, int64_t k, const float *a,
                      const float *b, const float *bias, float *c) {
  const double macs = (double)rows * (double)n * (double)k;
  int64_t slices = (n + SLICE_ALIGN - 1) / SLICE_ALIGN;
  if (slices > ROVE_LAYER_MAX_SLICES) slices = ROVE_LAYER_MAX_SLICES;
  if ((double)slices * MIN_SLICE_MACS > macs) slices = (int64_t)(macs / MIN_SLICE_MACS);
  const int32_t nt = rove_team_size(p->cfg.n_threads, slices < 1 ? 1 : slices);
  blas_single g;
  blas_single_enter(&g);
  gemm_job job = {rows, n, k, nt, a, b, bias, c, g.kind == 2 && gomp_get_max_threads};
  if (job.gomp && nt > 1) rove_parallel_each(nt, gomp_single_task, NULL);
  rove_parallel_for(nt, nt, gemm_slice, &job);
  blas_single_leave(&g);
}

void rove_layer_project_qkv(const rove_layer *l, const float *x, rove_layer_work *w) {
  gemm_bias(l->p, w->rows, l->qkv_width, l->d_model, x, l->wqkv, l->bqkv, w->qkv);
}

void rove_layer_project_out(const rove_layer *l, const rove_layer_work *w, float *y) {
  gemm_bias(l->p, w->rows, l->d_model, l->q_width, w->att, l->wo, l->bo, y);
}

rove_attention_args rove_layer_views(const rove_layer *l, const rove_layer_work *w,
                                     int32_t batch, int32_t n) {
  rove_attention_args a = {.batch = batch, .q_len = n, .kv_len = n};
  a.q = w->qkv;
  a.k = w->qkv + l->q_width;
  a.v = w->qkv + l->q_width + l->kv_width;
  a.q_stride = a.k_stride = a.v_stride = l->qkv_width;
  a.out = w->att;
  a.out_stride = l->q_width;
  a.sinks = l->sinks;
  return a;
}

rove_status rove_layer_work_init(const rove_layer *l, int64_t rows, const float *x,
                                 const float *y, rove_layer_work *w) {
  memset(w, 0, sizeof *w);
  if (!x || !y || rows <= 0) return ROVE_ERR_INVALID_ARGUMENT;
  int64_t nx, nqkv, natt;
  if (!rove_mul_i64(rows, l->d_model, &nx) || !rove_mul_i64(rows, l->qkv_width, &nqkv) ||
      !rove_mul_i64(rows, l->q_width, &natt) || nx > INT64_MAX / 8 || nqkv > INT64_MAX / 8 ||
      natt > INT64_MAX / 8 || (uint64_t)nqkv > SIZE_MAX / sizeof(float) ||
      (uint64_t)nx > SIZE_MAX / sizeof(float))
    return ROVE_ERR_SIZE_OVERFLOW;
  if (rove_overlap(x, (size_t)nx * sizeof(float), y, (size_t)nx * sizeof(float)))
    return ROVE_ERR_INVALID_ARGUMENT;
  w->rows = rows;
  w->qkv = rove_alloc((size_t)nqkv * sizeof(float));
  w->att = rove_alloc((size_t)natt * sizeof(float));
  if (!w->qkv || !w->att) {
    rove_layer_work_release(w);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  return ROVE_OK;
}

void rove_layer_work_release(rove_layer_work *w) {
  rove_free(w->qkv);
  rove_free(w->att);
  w->qkv = w->att = NULL;
}

/* ---- create / destroy ---------------------------------------------------------------- */

/* Copy rows x cols elements of type t at src into fp32 dst at row offset r0 (dst has cols
 * columns), widened exactly by the plan's to_f32 (bf16, f16). */
static void copy_rows(const rove_layer *l, float *dst, int64_t r0, const void *src, int64_t rows,
                      int64_t cols, rove_dtype t) {
  if (t == ROVE_DTYPE_F32)
    memcpy(dst + r0 * cols, src, sizeof(float) * (size_t)(rows * cols));
  else /* cols <= INT_MAX (checked at create) */
    l->p->kern->to_f32(dst + r0 * cols, cols, src, cols, NULL, rows, (int32_t)cols, t);
}

/* The fused bias: bq | bk | bv with zeros for the missing ones; NULL when all are NULL. */
static rove_status fuse_bias(rove_layer *l, const rove_layer_weights *w, rove_dtype t) {
  if (!w->bq && !w->bk && !w->bv) return ROVE_OK;
  l->bqkv = rove_alloc(sizeof(float) * (size_t)l->qkv_width);
  if (!l->bqkv) return ROVE_ERR_OUT_OF_MEMORY;
  const float *parts[3] = {w->bq, w->bk, w->bv};
  const int64_t len[3] = {l->q_width, l->kv_width, l->kv_width};
  int64_t off = 0;
  for (int i = 0; i < 3; off += len[i], i++) {
    if (parts[i]) copy_rows(l, l->bqkv + off, 0, parts[i], 1, len[i], t);
    else memset(l->bqkv + off, 0, sizeof(float) * (size_t)len[i]);
  }
  return ROVE_OK;
}

rove_status rove_layer_create_typed(const rove_plan *p, const rove_layer_weights *w,
                                    rove_dtype t, rove_layer **out) {
  if (!p || !w || !out || !w->wq || !w->wk || !w->wv || !w->wo || w->d_model <= 0 ||
      !rove_dtype_is_tensor(t))
    return ROVE_ERR_INVALID_ARGUMENT;
  const rove_attention_config *c = &p->cfg;
  const int64_t qw = (int64_t)c->n_heads * c->head_dim, kvw = (int64_t)c->n_kv_heads * c->head_dim;
  const int64_t width = qw + 2 * kvw; /* each factor <= INT32_MAX: no int64 overflow */
  int64_t nqkv, no;
  if (width > INT_MAX || !rove_mul_i64(width, w->d_model, &nqkv) ||
      !rove_mul_i64(qw, w->d_model, &no) || nqkv > INT64_MAX / 8 ||
      (uint64_t)nqkv > SIZE_MAX / sizeof(float))
    return ROVE_ERR_SIZE_OVERFLOW;
  rove_layer *l = calloc(1, sizeof *l);
  if (!l) return ROVE_ERR_OUT_OF_MEMORY;
  *l = (rove_layer){.p = p, .d_model = w->d_model, .q_width = qw, .kv_width = kvw, .qkv_width = width};
  l->wqkv = rove_alloc(sizeof(float) * (size_t)nqkv);
  l->wo = rove_alloc(sizeof(float) * (size_t)no);
  l->bo = w->bo ? rove_alloc(sizeof(float) * (size_t)w->d_model) : NULL;
  l->sinks = w->sinks ? rove_alloc(sizeof(float) * (size_t)c->n_heads) : NULL;
  rove_status st = (l->wqkv && l->wo && (l->bo || !w->bo) && (l->sinks || !w->sinks))
                       ? fuse_bias(l, w, t)
                       : ROVE_ERR_OUT_OF_MEMORY;
  if (st == ROVE_OK && w->sinks) { /* widened, then checked as the attention would */
    copy_rows(l, l->sinks, 0, w->sinks, 1, c->n_heads, t);
    st = rove_check_sinks(p, l->sinks);
  }
  if (st != ROVE_OK) {
    rove_layer_destroy(l);
    return st;
  }
  copy_rows(l, l->wqkv, 0, w->wq, qw, w->d_model, t);
  copy_rows(l, l->wqkv, qw, w->wk, kvw, w->d_model, t);
  copy_rows(l, l->wqkv, qw + kvw, w->wv, kvw, w->d_model, t);
  copy_rows(l, l->wo, 0, w->wo, w->d_model, qw, t);
  if (w->bo) copy_rows(l, l->bo, 0, w->bo, 1, w->d_model, t);
  *out = l;
  return ROVE_OK;
}

rove_status rove_layer_create(const rove_plan *p, const rove_layer_weights *w, rove_layer **out) {
  return rove_layer_create_typed(p, w, ROVE_DTYPE_F32, out);
}

void rove_layer_destroy(rove_layer *l) {
  if (!l) return;
  rove_free(l->wqkv);
  rove_free(l->bqkv);
  rove_free(l->wo);
  rove_free(l->bo);
  rove_free(l->sinks);
  free(l);
}

/* ---- forward --------------------------------------------------------------------------- */

rove_status rove_layer_forward(const rove_layer *l, int32_t batch, int32_t n, const float *x,
                               const int32_t *pos, float *y) {
  if (!l || batch <= 0 || n <= 0) return ROVE_ERR_INVALID_ARGUMENT;
  rove_layer_work w;
  rove_status st = rove_layer_work_init(l, (int64_t)batch * n, x, y, &w);
  if (st != ROVE_OK) return st;
  rove_layer_project_qkv(l, x, &w);
  rove_attention_args a = rove_layer_views(l, &w, batch, n);
  a.q_pos = a.kv_pos = pos;
  st = rove_attention_forward(l->p, &a);
  if (st == ROVE_OK) rove_layer_project_out(l, &w, y);
  rove_layer_work_release(&w);
  return st;
}
