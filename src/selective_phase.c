/* SPDX-License-Identifier: MIT */
/* rove_selective_phase: the phase network of Selective RoPE (include/rove.h).
 *
 * Per (batch row b, head h), tokens in order, with u = x_h / max(||x_h||, 1e-12):
 *   z_k = s_k <w[h][k], u>,  s_k = gain[h][k] / ||w[h][k]|| (0 for a zero row)
 *   y_k = conv_b + sum_j conv_w[j] z_k(t-3+j),  phi_k = silu(y_k) * gate,
 *   gate = sigmoid(<gate_w[h], u> + gate_b[h]) (1 without gate weights).
 * Precision: norms, dot products, conv, silu and sigmoid are evaluated in double from the
 * float inputs (dot products with four partial sums, in a fixed order); z is rounded to
 * float before the conv, because conv_state stores float z: that keeps a sequence fed in
 * pieces bit-identical to one call. phi is rounded to float at the end. Against a pure
 * double evaluation the difference is a few float ulps of z times the conv weights.
 *
 * Layouts: x rows (b * seq_len + t) at x_stride floats, head h at h * in_dim within a row;
 * phi [batch][seq_len][H][n_pairs]; conv_state [batch][H][n_pairs][3], oldest first.
 * Threads: one task per (b, h); results do not depend on the thread count. */
#include <math.h>
#include <string.h>

#include "plan.h"
#include "rove.h"

#define PHASE_EPS 1e-12      /* torch.nn.functional.normalize's default eps */
#define SERIAL_BELOW 262144  /* multiply-adds: fewer and the call stays on one thread */

typedef struct {
  const rove_selective_phase_weights *w;
  int32_t seq_len;
  const float *x;
  int64_t xs;
  float *state, *phi;
  double *scale;      /* [H][n_pairs]: gain / ||w row|| */
  char *scratch;      /* per thread: u [in_dim] doubles, history [n_pairs][3] floats */
  size_t scratch_per_thread;
} phase_ctx;

/* sum_i a[i] * b[i] in double, four partial sums combined in a fixed order. */
static double dot_fd(const float *a, const double *b, int32_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += (double)a[i] * b[i];
    s1 += (double)a[i + 1] * b[i + 1];
    s2 += (double)a[i + 2] * b[i + 2];
    s3 += (double)a[i + 3] * b[i + 3];
  }
  for (; i < n; i++) s0 += (double)a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

static double norm_f(const float *a, int32_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += (double)a[i] * a[i];
    s1 += (double)a[i + 1] * a[i + 1];
    s2 += (double)a[i + 2] * a[i + 2];
    s3 += (double)a[i + 3] * a[i + 3];
  }
  for (; i < n; i++) s0 += (double)a[i] * a[i];
  return sqrt((s0 + s1) + (s2 + s3));
}

/* scale[h][k] = gain[h][k] / ||w[h][k]||, one head per task. */
static void scale_task(int64_t h, int tid, void *arg) {
  (void)tid;
  const phase_ctx *c = arg;
  const rove_selective_phase_weights *w = c->w;
  for (int32_t k = 0; k < w->n_pairs; k++) {
    const int64_t hk = h * w->n_pairs + k;
    const double nrm = norm_f(w->w + hk * w->in_dim, w->in_dim);
    const double gain = w->gain ? (double)w->gain[hk] : 1.0;
    c->scale[hk] = nrm > 0.0 ? gain / nrm : 0.0;
  }
}

/* The gate of one token: sigmoid(<gate_w, u> + gate_b), or 1 without gate weights. */
static double gate_of(const rove_selective_phase_weights *w, int64_t h, const double *u) {
  if (!w->gate_w && !w->gate_b) return 1.0;
  double g = w->gate_b ? (double)w->gate_b[h] : 0.0;
  if (w->gate_w) g += dot_fd(w->gate_w + h * w->in_dim, u, w->in_dim);
  return 1.0 / (1.0 + exp(-g));
}

/* One token of one head: u from x, then every pair's z, conv, silu and gate. */
static void phase_token(const phase_ctx *c, int64_t h, const float *xh, double *u, float *hist,
                        float *phi) {
  const rove_selective_phase_weights *w = c->w;
  const double den = fmax(norm_f(xh, w->in_dim), PHASE_EPS);
  for (int32_t i = 0; i < w->in_dim; i++) u[i] = (double)xh[i] / den;
  const double gate = gate_of(w, h, u);
  for (int32_t k = 0; k < w->n_pairs; k++) {
    const int64_t hk = h * w->n_pairs + k;
    const float z = (float)(c->scale[hk] * dot_fd(w->w + hk * w->in_dim, u, w->in_dim));
    const float *cw = w->conv_w + hk * 4;
    float *hz = hist + 3 * k; /* z(t-3), z(t-2), z(t-1) */
    double y = w->conv_b ? (double)w->conv_b[hk] : 0.0;
    y += (double)cw[0] * hz[0] + (double)cw[1] * hz[1] + (double)cw[2] * hz[2] + (double)cw[3] * z;
    phi[k] = (float)(y / (1.0 + exp(-y)) * gate);
    hz[0] = hz[1];
    hz[1] = hz[2];
    hz[2] = z;
  }
}

static void phase_task(int64_t i, int tid, void *arg) {
  const phase_ctx *c = arg;
  const rove_selective_phase_weights *w = c->w;
  const int64_t H = w->n_heads, P = w->n_pairs, b = i / H, h = i % H;
  double *u = (double *)(c->scratch + (size_t)tid * c->scratch_per_thread);
  float *hist = (float *)(u + w->in_dim);
  float *state = c->state ? c->state + i * P * 3 : NULL; /* [b][h] block of [P][3] */
  if (state)
    memcpy(hist, state, (size_t)P * 3 * sizeof(float));
  else
    memset(hist, 0, (size_t)P * 3 * sizeof(float));
  for (int64_t t = 0; t < c->seq_len; t++) {
    const int64_t row = b * c->seq_len + t;
    phase_token(c, h, c->x + row * c->xs + h * w->in_dim, u, hist, c->phi + (row * H + h) * P);
  }
  if (state) memcpy(state, hist, (size_t)P * 3 * sizeof(float));
}

/* Every size and extent in int64 (and bytes), the stride, and the no-overlap rule. */
static rove_status phase_check(const rove_selective_phase_weights *w, int32_t batch,
                               int32_t seq_len, const float *x, int64_t x_stride,
                               const float *state, const float *phi, int64_t *xs, int64_t *work) {
  int64_t width, rows, ext, nphi, nstate, nw;
  if (!rove_mul_i64(w->n_heads, w->in_dim, &width) || !rove_mul_i64(batch, seq_len, &rows))
    return ROVE_ERR_SIZE_OVERFLOW;
  if (x_stride < 0 || (x_stride != 0 && x_stride < width)) return ROVE_ERR_INVALID_ARGUMENT;
  *xs = x_stride ? x_stride : width;
  const int64_t hp = (int64_t)w->n_heads * w->n_pairs, lim = INT64_MAX / (int64_t)sizeof(float);
  if (!rove_mul_i64(rows - 1, *xs, &ext) || !rove_add_i64(ext, width, &ext) || ext > lim ||
      !rove_mul_i64(rows, hp, &nphi) || nphi > lim || !rove_mul_i64(batch, hp * 3, &nstate) ||
      !rove_mul_i64(hp, w->in_dim, &nw) || nw > lim)
    return ROVE_ERR_SIZE_OVERFLOW;
  if (!rove_mul_i64(rows, nw, work)) *work = INT64_MAX; /* only picks the thread count */
  const size_t bx = (size_t)ext * sizeof(float), bp = (size_t)nphi * sizeof(float);
  const size_t bs = (size_t)nstate * sizeof(float);
  if (rove_overlap(phi, bp, x, bx) || (state && (rove_overlap(state, bs, x, bx) ||
                                                 rove_overlap(state, bs, phi, bp))))
    return ROVE_ERR_INVALID_ARGUMENT;
  return ROVE_OK;
}

rove_status rove_selective_phase(const rove_selective_phase_weights *w, int32_t batch,
                                 int32_t seq_len, const float *x, int64_t x_stride,
                                 float *conv_state, float *phi) {
  if (!w || !w->w || !w->conv_w || !x || !phi || batch <= 0 || seq_len <= 0 ||
      w->n_heads <= 0 || w->in_dim <= 0 || w->n_pairs <= 0)
    return ROVE_ERR_INVALID_ARGUMENT;
  phase_ctx c = {w, seq_len, x, 0, conv_state, phi, NULL, NULL, 0};
  int64_t work = 0;
  rove_status st = phase_check(w, batch, seq_len, x, x_stride, conv_state, phi, &c.xs, &work);
  if (st != ROVE_OK) return st;
  const int64_t hp = (int64_t)w->n_heads * w->n_pairs;
  const int32_t threads = work < SERIAL_BELOW ? 1 : rove_default_threads();
  /* per thread: u (in_dim doubles) then the z history (3 n_pairs floats), 64-byte blocks */
  c.scratch_per_thread = ((size_t)w->in_dim * sizeof(double) +
                          (size_t)w->n_pairs * 3 * sizeof(float) + 63) & ~(size_t)63;
  c.scale = rove_alloc((size_t)hp * sizeof(double));
  c.scratch = rove_alloc(c.scratch_per_thread * (size_t)threads);
  if (!c.scale || !c.scratch) {
    rove_free(c.scale);
    rove_free(c.scratch);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  const int64_t head_work = (int64_t)w->n_pairs * w->in_dim;
  const int32_t scale_threads = head_work * w->n_heads < SERIAL_BELOW ? 1 : threads;
  rove_parallel_for(scale_threads, w->n_heads, scale_task, &c);
  rove_parallel_for(threads, (int64_t)batch * w->n_heads, phase_task, &c);
  rove_free(c.scale);
  rove_free(c.scratch);
  return ROVE_OK;
}
