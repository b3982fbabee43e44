/* SPDX-License-Identifier: MIT */
/* MPI suite helpers (mpi_testutil.h). */
#include "mpi_testutil.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mt_rank, mt_size;
static int mt_ok = 1;

void mt_init(int *argc, char ***argv) {
  if (MPI_Init(argc, argv) != MPI_SUCCESS) {
    fprintf(stderr, "MPI_Init failed\n");
    exit(1);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
  if (mt_rank > 0 && !freopen("/dev/null", "w", stdout)) exit(1);
}

int mt_finish(int failed) {
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any ? 1 : 0;
}

void mt_check(int cond, const char *fmt, ...) {
  if (cond) return;
  mt_ok = 0;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "[rank %d of %d] FAIL: ", mt_rank, mt_size);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

void mt_end(void) {
  int mine = mt_ok, all = 0;
  mt_ok = 1;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  assert_true(all);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  assert_non_null(p);
  return p;
}

void mt_seq_make(mt_seq *s, int B, int N, int H, int Hkv, int d, int32_t pos0, int shuffle,
                 uint64_t seed) {
  s->B = B, s->N = N, s->H = H, s->Hkv = Hkv, s->d = d;
  const int64_t nq = (int64_t)B * N * H * d, nk = (int64_t)B * N * Hkv * d;
  s->q = xmalloc(sizeof(float) * (size_t)nq);
  s->k = xmalloc(sizeof(float) * (size_t)nk);
  s->v = xmalloc(sizeof(float) * (size_t)nk);
  s->pos = xmalloc(sizeof(int32_t) * (size_t)(B * N));
  rove_rng r;
  rove_rng_seed(&r, seed);
  rove_rng_fill(&r, s->q, nq, -1.5f, 1.5f);
  rove_rng_fill(&r, s->k, nk, -1.5f, 1.5f);
  rove_rng_fill(&r, s->v, nk, -1.0f, 1.0f);
  for (int b = 0; b < B; b++) {
    int32_t *p = s->pos + (int64_t)b * N;
    for (int t = 0; t < N; t++) p[t] = pos0 + t;
    for (int t = N - 1; shuffle && t > 0; t--) { /* Fisher-Yates */
      const int j = (int)(rove_rng_u64(&r) % (uint64_t)(t + 1));
      const int32_t x = p[t];
      p[t] = p[j], p[j] = x;
    }
  }
}

void mt_seq_free(mt_seq *s) { free(s->q), free(s->k), free(s->v), free(s->pos); }

void mt_full_forward(const rove_plan *p, const mt_seq *s, const float *sinks, float **out,
                     float **lse) {
  *out = xmalloc(sizeof(float) * (size_t)s->B * s->N * s->H * s->d);
  *lse = xmalloc(sizeof(float) * (size_t)s->B * s->H * s->N);
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = s->B, a.q_len = s->N, a.kv_len = s->N;
  a.q = s->q, a.k = s->k, a.v = s->v, a.q_pos = s->pos, a.kv_pos = s->pos;
  a.out = *out, a.lse = *lse, a.sinks = sinks;
  assert_int_equal(rove_attention_forward(p, &a), ROVE_OK);
}

float *mt_gather(const float *x, int B, int N, int row, const int *idx, int n) {
  if (n == 0) return NULL;
  float *y = xmalloc(sizeof(float) * (size_t)B * n * row);
  for (int b = 0; b < B; b++)
    for (int i = 0; i < n; i++)
      memcpy(y + ((int64_t)b * n + i) * row, x + ((int64_t)b * N + idx[i]) * row,
             sizeof(float) * (size_t)row);
  return y;
}

int32_t *mt_gather_pos(const mt_seq *s, const int *idx, int n) {
  if (n == 0) return NULL;
  int32_t *y = xmalloc(sizeof(int32_t) * (size_t)s->B * n);
  for (int b = 0; b < s->B; b++)
    for (int i = 0; i < n; i++) y[b * n + i] = s->pos[(int64_t)b * s->N + idx[i]];
  return y;
}

void mt_compare(const char *what, const mt_seq *s, const int *idx, int n, const float *got,
                const float *got_lse, const float *ref, const float *ref_lse, double tol_out,
                double tol_lse) {
  const int64_t row = (int64_t)s->H * s->d;
  double scale = 1e-30, err = 0, lerr = 0;
  for (int b = 0; b < s->B; b++)
    for (int i = 0; i < n; i++) {
      const float *w = ref + ((int64_t)b * s->N + idx[i]) * row;
      const float *g = got + ((int64_t)b * n + i) * row;
      for (int64_t c = 0; c < row; c++) {
        scale = fmax(scale, fabs(w[c]));
        err = fmax(err, fabs((double)g[c] - w[c]));
      }
      for (int h = 0; got_lse && h < s->H; h++) {
        const float wl = ref_lse[((int64_t)b * s->H + h) * s->N + idx[i]];
        const float gl = got_lse[((int64_t)b * s->H + h) * n + i];
        if (wl == -INFINITY || gl == -INFINITY)
          lerr = fmax(lerr, wl == gl ? 0.0 : INFINITY);
        else
          lerr = fmax(lerr, fabs((double)gl - wl) / fmax(1.0, fabs(wl)));
      }
    }
  if (getenv("ROVE_TEST_VERBOSE"))
    fprintf(stderr, "[rank %d] %s: out error %.3g, lse error %.3g\n", mt_rank, what, err / scale,
            lerr);
  mt_check(err / scale <= tol_out && lerr <= tol_lse,
           "%s: out error %.3g (relative, tol %.1g), lse error %.3g (tol %.1g)", what, err / scale,
           tol_out, lerr, tol_lse);
}

int mt_tokens_of(const int *owner, int N, int r, int *idx) {
  int n = 0;
  for (int t = 0; t < N; t++)
    if (owner[t] == r) idx[n++] = t;
  return n;
}
