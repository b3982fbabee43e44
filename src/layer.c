/* SPDX-License-Identifier: MIT */
/* The attention layer: fused QKV projection (OpenBLAS), attention over strided views of
 * its output, output projection (OpenBLAS).
 *
 * OpenBLAS threading. OpenBLAS is only ever called here, outside any parallel region of
 * librove (src/threads.c: librove's own pool, whose idle workers spin ~100 us, then
 * sleep). Each sgemm runs on the plan's thread count. The OpenBLAS build is detected at
 * run time (openblas_get_parallel), so this is right whichever libopenblas.so.0 the
 * loader picks:
 * - pthread build (Debian's default): the count is set with openblas_set_num_threads around
 *   each sgemm and restored after it. It is process-global state, so concurrent calls of
 *   the same process (this library's or the program's own) may run their sgemms on another
 *   call's thread count meanwhile; results do not change, only speed. Its workers busy-wait
 *   (with sched_yield) for up to ~0.1 s after each sgemm, beside librove's attention.
 * - OpenMP build (libopenblas0-openmp; ROVE_OPENBLAS_VARIANT=openmp): it takes its thread
 *   count from the calling thread's omp_get_max_threads(), so the count is set with libgomp's
 *   omp_set_num_threads (found in the process with dlopen(RTLD_NOLOAD): librove itself does
 *   not link libgomp) and restored after; that count belongs to the calling thread only.
 *   openblas_set_num_threads is never called with this build (it would change the caller's
 *   OpenMP thread count for good). If libgomp's functions cannot be found, the count is
 *   left to OpenBLAS.
 * - sequential build: left alone.
 * Note that libgomp, under the OpenMP build, and OpenBLAS's own threads end the process
 * when they cannot create a thread or allocate (not librove's code: documented in rove.h).
 * Timings of each build are in BENCHMARKS.md.
 */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "layer_internal.h"

/* OpenBLAS's thread controls (declared here too, so another cblas.h would still do). */
int openblas_get_parallel(void);
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);

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

typedef struct blas_threads {
  int kind;     /* openblas_get_parallel(): 0 sequential, 1 pthreads, 2 OpenMP */
  int want;     /* threads for this sgemm */
  int saved;    /* the count to restore */
} blas_threads;

static void blas_threads_enter(const rove_plan *p, blas_threads *g) {
  g->kind = openblas_get_parallel();
  g->want = p->cfg.n_threads;
  g->saved = g->want;
  if (g->kind == 1) {
    g->saved = openblas_get_num_threads();
    if (g->saved != g->want) openblas_set_num_threads(g->want);
  }
  if (g->kind == 2) {
    pthread_once(&gomp_once, find_gomp);
    if (gomp_get_max_threads) {
      g->saved = gomp_get_max_threads();
      if (g->saved != g->want) gomp_set_num_threads(g->want);
    }
  }
}

static void blas_threads_leave(const blas_threads *g) {
  if (g->saved == g->want) return;
  if (g->kind == 1) openblas_set_num_threads(g->saved);
  if (g->kind == 2) gomp_set_num_threads(g->saved);
}

/* C[rows][n] = A[rows][k] B^T (B: [n][k]) + bias (broadcast over rows, may be NULL).
 * n and k fit int (checked at create); rows is split into sgemm calls of <= INT_MAX; a
 * single row is an sgemv (OpenBLAS's sgemm with M = 1 reads B several times slower). */
static void gemm_bias(const rove_plan *p, int64_t rows, int64_t n, int64_t k, const float *a,
                      const float *b, const float *bias, float *c) {
  if (bias)
    for (int64_t i = 0; i < rows; i++) memcpy(c + i * n, bias, sizeof(float) * (size_t)n);
  blas_threads g;
  blas_threads_enter(p, &g);
  if (rows == 1) { /* a decode step: a matrix-vector product streams B at memory speed */
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)k, 1.0f, b, (int)k, a, 1,
                bias ? 1.0f : 0.0f, c, 1);
    blas_threads_leave(&g);
    return;
  }
  for (int64_t r0 = 0; r0 < rows; r0 += INT_MAX) {
    const int m = (int)(rows - r0 < INT_MAX ? rows - r0 : INT_MAX);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, (int)n, (int)k, 1.0f, a + r0 * k,
                (int)k, b, (int)k, bias ? 1.0f : 0.0f, c + r0 * n, (int)n);
  }
  blas_threads_leave(&g);
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

/* Copy rows x cols floats of src into dst at row offset r0 (dst has cols columns). */
static void copy_rows(float *dst, int64_t r0, const float *src, int64_t rows, int64_t cols) {
  memcpy(dst + r0 * cols, src, sizeof(float) * (size_t)(rows * cols));
}

/* The fused bias: bq | bk | bv with zeros for the missing ones; NULL when all are NULL. */
static rove_status fuse_bias(rove_layer *l, const rove_layer_weights *w) {
  if (!w->bq && !w->bk && !w->bv) return ROVE_OK;
  l->bqkv = rove_alloc(sizeof(float) * (size_t)l->qkv_width);
  if (!l->bqkv) return ROVE_ERR_OUT_OF_MEMORY;
  const float *parts[3] = {w->bq, w->bk, w->bv};
  const int64_t len[3] = {l->q_width, l->kv_width, l->kv_width};
  int64_t off = 0;
  for (int i = 0; i < 3; off += len[i], i++) {
    if (parts[i]) memcpy(l->bqkv + off, parts[i], sizeof(float) * (size_t)len[i]);
    else memset(l->bqkv + off, 0, sizeof(float) * (size_t)len[i]);
  }
  return ROVE_OK;
}

rove_status rove_layer_create(const rove_plan *p, const rove_layer_weights *w, rove_layer **out) {
  if (!p || !w || !out || !w->wq || !w->wk || !w->wv || !w->wo || w->d_model <= 0)
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
  rove_status st = (l->wqkv && l->wo && (l->bo || !w->bo)) ? fuse_bias(l, w) : ROVE_ERR_OUT_OF_MEMORY;
  if (st != ROVE_OK) {
    rove_layer_destroy(l);
    return st;
  }
  copy_rows(l->wqkv, 0, w->wq, qw, w->d_model);
  copy_rows(l->wqkv, qw, w->wk, kvw, w->d_model);
  copy_rows(l->wqkv, qw + kvw, w->wv, kvw, w->d_model);
  memcpy(l->wo, w->wo, sizeof(float) * (size_t)no);
  if (w->bo) memcpy(l->bo, w->bo, sizeof(float) * (size_t)w->d_model);
  *out = l;
  return ROVE_OK;
}

void rove_layer_destroy(rove_layer *l) {
  if (!l) return;
  rove_free(l->wqkv);
  rove_free(l->bqkv);
  rove_free(l->wo);
  rove_free(l->bo);
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
