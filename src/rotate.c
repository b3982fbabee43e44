/* SPDX-License-Identifier: MIT */
/* rove_rotate: standalone (inverse) rotation of [n_tokens][n_heads][head_dim] in place. */
#include <stdint.h>

#include "plan.h"
#include "selective.h"

#define ROTATE_CHUNK 256 /* tokens per task: table rows are computed and used in L1/L2 */

typedef struct {
  const rove_plan *p;
  float *x;
  float *tab;            /* per thread: cos [rows][w], then sin [rows][w] */
  int64_t rows;          /* min(n_tokens, ROTATE_CHUNK) */
  int64_t n_tokens, stride;
  int32_t n_heads, inverse;
  const int32_t *pos;
  const double *angles;  /* NULL, or [n_tokens][angle_heads][half] */
  int32_t angle_heads;   /* 1 with positions */
} rotate_ctx;

/* Tokens [t0, t0 + ROTATE_CHUNK): their table rows (w = angle_heads * half floats each),
 * then every head, head h using angle head h / (n_heads / angle_heads). */
static void rotate_task(int64_t t, int tid, void *vctx) {
  rotate_ctx *c = vctx;
  const int32_t half = c->p->half, d = c->p->cfg.head_dim;
  const int64_t w = (int64_t)c->angle_heads * half, t0 = t * ROTATE_CHUNK;
  const int64_t n = c->n_tokens - t0 < ROTATE_CHUNK ? c->n_tokens - t0 : ROTATE_CHUNK;
  float *cs = c->tab + (int64_t)tid * 2 * c->rows * w, *sn = cs + c->rows * w;
  if (c->angles)
    rove_angle_table(c->p->kern, cs, sn, c->angles + t0 * w, n * w);
  else
    rove_rope_table(cs, sn, c->p->inv_freq, half, c->p->rope_step, c->pos ? c->pos + t0 : NULL,
                    t0, n);
  const int32_t group = c->n_heads / c->angle_heads;
  for (int32_t h = 0; h < c->n_heads; h++) {
    const int64_t off = (int64_t)(h / group) * half;
    const rove_rot rot = rove_plan_rot(c->p, cs + off, sn + off, w);
    float *x = c->x + t0 * c->stride + (int64_t)h * d;
    c->p->kern->rotate(x, c->stride, x, c->stride, n, d, &rot, 1.0f, 1.0f, c->inverse);
  }
}

static rove_status rotate(const rove_plan *p, float *x, int32_t n_tokens, int32_t n_heads,
                          int64_t token_stride, const int32_t *pos, const double *angles,
                          int32_t angle_heads, int32_t inverse) {
  if (!p || !x || n_tokens <= 0 || n_heads <= 0 || (inverse != 0 && inverse != 1) ||
      angle_heads <= 0 || n_heads % angle_heads != 0)
    return ROVE_ERR_INVALID_ARGUMENT;
  int64_t width, extent, table;
  if (!rove_mul_i64(n_heads, p->cfg.head_dim, &width)) return ROVE_ERR_SIZE_OVERFLOW;
  if (token_stride == 0) token_stride = width;
  if (token_stride < width) return ROVE_ERR_INVALID_ARGUMENT;
  if (!rove_mul_i64(n_tokens - 1, token_stride, &extent) || !rove_add_i64(extent, width, &extent) ||
      extent > INT64_MAX / (int64_t)sizeof(float) ||
      !rove_mul_i64(n_tokens, (int64_t)angle_heads * p->half, &table) || table > INT64_MAX / 16)
    return ROVE_ERR_SIZE_OVERFLOW;
  /* x is rotated in place chunk by chunk, each chunk reading its own positions or angles
   * as it starts: x must not overlap them */
  if (rove_overlap(x, (size_t)extent * sizeof(float), pos, (size_t)n_tokens * sizeof(int32_t)) ||
      rove_overlap(x, (size_t)extent * sizeof(float), angles, (size_t)table * sizeof(double)))
    return ROVE_ERR_INVALID_ARGUMENT;
  if (angles && !rove_angles_finite(angles, table)) return ROVE_ERR_INVALID_ARGUMENT;
  /* one cos + sin table of ROTATE_CHUNK rows per thread the call runs (angle_heads <=
   * n_heads, so this is at most 2 * threads * 256 * n_heads * r/2 floats) */
  const int64_t rows = n_tokens < ROTATE_CHUNK ? n_tokens : ROTATE_CHUNK;
  const int64_t chunks = (n_tokens + ROTATE_CHUNK - 1) / ROTATE_CHUNK;
  const int32_t threads = rove_team_size(p->cfg.n_threads, chunks);
  const size_t per_thread = (size_t)2 * (size_t)rows * (size_t)angle_heads * (size_t)p->half;
  float *tab = rove_alloc(per_thread * (size_t)threads * sizeof(float));
  if (!tab) return ROVE_ERR_OUT_OF_MEMORY;
  rotate_ctx c = {p, x, tab, rows, n_tokens, token_stride, n_heads, inverse, pos,
                  angles, angle_heads};
  rove_parallel_for(threads, chunks, rotate_task, &c);
  rove_free(tab);
  return ROVE_OK;
}

rove_status rove_rotate(const rove_plan *p, float *x, int32_t n_tokens, int32_t n_heads,
                        int64_t token_stride, const int32_t *pos, int32_t inverse) {
  return rotate(p, x, n_tokens, n_heads, token_stride, pos, NULL, 1, inverse);
}

rove_status rove_rotate_angles(const rove_plan *p, float *x, int32_t n_tokens, int32_t n_heads,
                               int64_t token_stride, const double *angles, int32_t angle_heads,
                               int32_t inverse) {
  if (!angles) return ROVE_ERR_INVALID_ARGUMENT;
  return rotate(p, x, n_tokens, n_heads, token_stride, NULL, angles, angle_heads, inverse);
}
