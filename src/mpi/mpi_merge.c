/* SPDX-License-Identifier: MIT */
/* The exact merge of partial attentions over disjoint key sets, in double.
 *
 * A part p of query row i brings its finished output O_p (normalised, already rotated
 * back by R_{P_i}^{-1}) and its LSE L_p. Over all parts
 *   L = ln sum_p e^{L_p},   O = sum_p e^{L_p - L} O_p,
 * which is attention over the union of the key sets: the softmax weights of part p are
 * its own weights times e^{L_p - L}, and R_{P_i}^{-1} is linear, so the RoVE outputs of the
 * parts (all in query i's frame) mix exactly like plain ones.
 *
 * Ring prefill merges online, one part per step (rmpi_acc): per row the largest LSE so
 * far m, s = sum e^{L_p - m} and o = sum e^{L_p - m} O_p, rescaled by e^{m_old - m_new}
 * when a larger LSE arrives; the result O = o / s, L = m + ln s is rounded to float once.
 * The decode reduction merges normalised records [L, status, O] pairwise
 * (rmpi_record_merge). Special rows follow rove_merge_partials: a part with LSE -inf (no
 * visible key) adds nothing, a row every part leaves at -inf is O = 0, L = -inf, and a
 * NaN or +inf LSE makes the row NaN. An attention sink s_h (rove_merge_partials_sinks)
 * is one more part, merged once after all the others: LSE s_h, output 0 (a key every
 * query sees, of value zero), so a row no key reaches gets O = 0, L = s_h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

rove_status rmpi_acc_init(rmpi_acc *acc, int32_t batch, int32_t q_len, int32_t heads, int32_t dim) {
  memset(acc, 0, sizeof *acc);
  acc->batch = batch, acc->q_len = q_len, acc->heads = heads, acc->dim = dim;
  int64_t rows, n_o, bo, br;
  if (!rmpi_mul((int64_t)batch * q_len, heads, &rows) || !rmpi_mul(rows, dim, &n_o) ||
      !rmpi_mul(n_o, 8, &bo) || !rmpi_mul(rows, 8, &br))
    return ROVE_ERR_SIZE_OVERFLOW;
  acc->o = rmpi_alloc(bo), acc->m = rmpi_alloc(br), acc->s = rmpi_alloc(br);
  if (!acc->o || !acc->m || !acc->s) {
    rmpi_acc_free(acc);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  /* o is not cleared: a row's first part is copied in (s == 0), and rows no part reaches
   * are written as 0 without reading o */
  for (int64_t r = 0; r < rows; r++) acc->m[r] = -INFINITY, acc->s[r] = 0.0;
  return ROVE_OK;
}

void rmpi_acc_free(rmpi_acc *acc) {
  free(acc->o), free(acc->m), free(acc->s);
  acc->o = acc->m = acc->s = NULL;
}

/* One part (LSE x, output op; op NULL: a sink's zero output) into one row (m, s, o). */
static void acc_row(double *m, double *s, double *o, int64_t d, double x, const float *op) {
  if (isnan(*m) || x == -INFINITY) return; /* NaN for good / adds nothing */
  if (isnan(x) || x == INFINITY) {
    *m = NAN;
    return;
  }
  if (*s == 0.0) { /* the first part this row sees */
    *m = x, *s = 1.0;
    for (int64_t c = 0; c < d; c++) o[c] = op ? op[c] : 0.0;
  } else if (x > *m) { /* rescale what is there to the new maximum */
    const double f = exp(*m - x);
    *m = x, *s = *s * f + 1.0;
    for (int64_t c = 0; c < d; c++) o[c] = o[c] * f + (op ? op[c] : 0.0);
  } else {
    const double w = exp(x - *m);
    *s += w;
    if (op)
      for (int64_t c = 0; c < d; c++) o[c] += w * op[c];
  }
}

void rmpi_acc_add(rmpi_acc *acc, int32_t b, int32_t i0, int32_t n, const float *out,
                  const float *lse) {
  const int64_t H = acc->heads, d = acc->dim, L = acc->q_len;
  for (int64_t i = 0; i < n; i++)
    for (int64_t h = 0; h < H; h++) {
      const int64_t r = ((int64_t)b * H + h) * L + i0 + i;
      acc_row(acc->m + r, acc->s + r, acc->o + (((int64_t)b * L + i0 + i) * H + h) * d, d,
              lse[h * n + i], out + (i * H + h) * d);
    }
}

void rmpi_acc_sinks(rmpi_acc *acc, const float *sinks) {
  if (!sinks) return;
  const int64_t H = acc->heads, d = acc->dim, L = acc->q_len;
  for (int64_t b = 0; b < acc->batch; b++)
    for (int64_t i = 0; i < L; i++)
      for (int64_t h = 0; h < H; h++) {
        const int64_t r = (b * H + h) * L + i;
        acc_row(acc->m + r, acc->s + r, acc->o + ((b * L + i) * H + h) * d, d, sinks[h], NULL);
      }
}

rove_status rmpi_check_sinks(const float *sinks, int32_t heads, const void *out,
                             int64_t out_bytes, const void *lse, int64_t lse_bytes) {
  if (!sinks) return ROVE_OK;
  for (int32_t h = 0; h < heads; h++)
    if (!isfinite(sinks[h])) return ROVE_ERR_INVALID_ARGUMENT;
  const int64_t sb = (int64_t)heads * 4;
  if (rmpi_overlap(out, out_bytes, sinks, sb) || rmpi_overlap(lse, lse_bytes, sinks, sb))
    return ROVE_ERR_INVALID_ARGUMENT;
  return ROVE_OK;
}

void rmpi_acc_write(const rmpi_acc *acc, float *out, int64_t out_stride, float *lse) {
  const int64_t H = acc->heads, d = acc->dim, L = acc->q_len;
  for (int64_t b = 0; b < acc->batch; b++)
    for (int64_t i = 0; i < L; i++)
      for (int64_t h = 0; h < H; h++) {
        const int64_t r = (b * H + h) * L + i;
        const double *o = acc->o + ((b * L + i) * H + h) * d;
        float *y = out + (b * L + i) * out_stride + h * d;
        const double m = acc->m[r], s = acc->s[r];
        float l;
        if (isnan(m)) {
          for (int64_t c = 0; c < d; c++) y[c] = NAN;
          l = NAN;
        } else if (s == 0.0) {
          for (int64_t c = 0; c < d; c++) y[c] = 0.0f;
          l = -INFINITY;
        } else {
          for (int64_t c = 0; c < d; c++) y[c] = (float)(o[c] / s);
          l = (float)(m + log(s));
        }
        if (lse) lse[r] = l;
      }
}

void rmpi_record_merge(const double *a, double *b, int32_t dim) {
  b[1] = a[1] > b[1] ? a[1] : b[1]; /* the status: the larger code */
  const double la = a[0], lb = b[0];
  if (isnan(la) || isnan(lb) || la == INFINITY || lb == INFINITY) {
    b[0] = NAN; /* as rove_merge_partials: a NaN or +inf LSE makes the row NaN */
    for (int32_t c = 0; c < dim; c++) b[2 + c] = NAN;
    return;
  }
  if (la == -INFINITY) return;
  if (lb == -INFINITY) {
    b[0] = la;
    memcpy(b + 2, a + 2, sizeof(double) * (size_t)dim);
    return;
  }
  const double m = la > lb ? la : lb;
  const double wa = exp(la - m), wb = exp(lb - m), s = wa + wb;
  for (int32_t c = 0; c < dim; c++) b[2 + c] = (wa * a[2 + c] + wb * b[2 + c]) / s;
  b[0] = m + log(s);
}

void rmpi_record_sink(double sink, double *b, int32_t dim) {
  /* rmpi_record_merge with a = [sink, OK, 0, 0 ..] (sink finite), its zero terms dropped */
  const double lb = b[0];
  if (isnan(lb) || lb == INFINITY) {
    b[0] = NAN;
    for (int32_t c = 0; c < dim; c++) b[2 + c] = NAN;
    return;
  }
  if (lb == -INFINITY) {
    b[0] = sink;
    for (int32_t c = 0; c < dim; c++) b[2 + c] = 0.0;
    return;
  }
  const double m = sink > lb ? sink : lb;
  const double wa = exp(sink - m), wb = exp(lb - m), s = wa + wb;
  for (int32_t c = 0; c < dim; c++) b[2 + c] = wb * b[2 + c] / s;
  b[0] = m + log(s);
}
