/* SPDX-License-Identifier: MIT */
/* Rows into and within a KV cache's storage (cache_rows.h): rotated in fp32, rounded
 * once to the storage type. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cache_rows.h"

static float *row_scale(const rove_plan *p, float *scale, int64_t e) {
  const int32_t d = p->cfg.head_dim;
  return scale ? scale + e / d * rove_q8_blocks(d) : NULL;
}

/* Whether row j of x (type t: F32, BF16 or F16; stride in elements) is all finite. */
static int row_finite(const void *x, int32_t t, int64_t stride, int64_t j, int32_t d) {
  if (t == ROVE_DTYPE_F32) {
    const float *r = (const float *)x + j * stride;
    for (int32_t i = 0; i < d; i++)
      if (!isfinite(r[i])) return 0;
    return 1;
  }
  const uint16_t *r = (const uint16_t *)x + j * stride, e = t == ROVE_DTYPE_BF16 ? 0x7f80u : 0x7c00u;
  for (int32_t i = 0; i < d; i++)
    if ((r[i] & e) == e) return 0;
  return 1;
}

/* Whether the rotation (times its factor) took a finite source row past FLT_MAX: a rotated
 * row with a non-finite value whose source row (src, type st, stride ss) is all finite.
 * from_f32 flags only a finite value that rounds to inf; an inf made by the fp32
 * rotation itself would otherwise be stored into a BF16 / F16 cache (Q8 flags every
 * non-finite value). The source is read only for a row that has a non-finite value. */
static int rotation_overflowed(const float *rot, int64_t n, int32_t d, const void *src,
                               int32_t st, int64_t ss) {
  for (int64_t j = 0; j < n; j++) {
    int nonfinite = 0;
    for (int32_t i = 0; i < d; i++) nonfinite |= !isfinite(rot[j * d + i]);
    if (nonfinite && row_finite(src, st, ss, j, d)) return 1;
  }
  return 0;
}

int rove_cache_store(const rove_plan *p, int32_t type, void *buf, float *scale, int64_t dst,
                     const void *x, int32_t in_type, int64_t ss, int64_t n, const rove_rot *r,
                     float mul, float *rowbuf) {
  return rove_cache_store_rows(p, type, buf, scale, dst, p->cfg.head_dim, x, in_type, ss, n, r,
                               mul, rowbuf);
}

int rove_cache_store_rows(const rove_plan *p, int32_t type, void *buf, float *scale, int64_t dst,
                          int64_t ds, const void *x, int32_t in_type, int64_t ss, int64_t n,
                          const rove_rot *r, float mul, float *rowbuf) {
  const int32_t d = p->cfg.head_dim;
  /* fp32 source rows: the caller's; typed ones widened into rowbuf first */
  const float *rows = rowbuf;
  int64_t rs = d;
  if (in_type == ROVE_DTYPE_F32)
    rows = (const float *)x, rs = ss;
  else
    p->kern->to_f32(rowbuf, d, x, ss, NULL, n, d, in_type);
  if (type == ROVE_DTYPE_F32) { /* rotate straight into the storage */
    p->kern->rotate((float *)buf + dst, ds, rows, rs, n, d, r, mul, 1.0f, 0);
    return 0;
  }
  p->kern->rotate(rowbuf, d, rows, rs, n, d, r, mul, 1.0f, 0); /* in place if typed input */
  if (type != ROVE_DTYPE_Q8 && rotation_overflowed(rowbuf, n, d, x, in_type, ss)) return 1;
  return p->kern->from_f32((char *)buf + dst * rove_dtype_size(type), ds, row_scale(p, scale, dst),
                           rowbuf, d, n, d, type);
}

int rove_cache_rotate(const rove_plan *p, int32_t type, void *buf, float *scale, int64_t e,
                      int64_t n, const rove_rot *r, float *rowbuf, void *sink) {
  const int32_t d = p->cfg.head_dim;
  if (type == ROVE_DTYPE_F32) {
    float *x = (float *)buf + e;
    p->kern->rotate(x, d, x, d, n, d, r, 1.0f, 1.0f, 0);
    return 0;
  }
  p->kern->to_f32(rowbuf, d, (const char *)buf + e * rove_dtype_size(type), d,
                  row_scale(p, scale, e), n, d, type);
  p->kern->rotate(rowbuf, d, rowbuf, d, n, d, r, 1.0f, 1.0f, 0);
  if (type != ROVE_DTYPE_Q8 &&
      rotation_overflowed(rowbuf, n, d, (const char *)buf + e * rove_dtype_size(type), type, d))
    return 1;
  if (!sink)
    return p->kern->from_f32((char *)buf + e * rove_dtype_size(type), d, row_scale(p, scale, e),
                             rowbuf, d, n, d, type);
  float *sink_scale = (float *)((char *)sink + ROVE_CACHE_CHUNK * (int64_t)d * rove_dtype_size(type));
  return p->kern->from_f32(sink, d, sink_scale, rowbuf, d, n, d, type);
}

int rove_cache_shift_begin(const rove_plan *p, int32_t type, int32_t delta, rove_cache_shift_ws *w) {
  const int32_t half = p->half, d = p->cfg.head_dim;
  const int typed = type != ROVE_DTYPE_F32;
  const size_t tab_bytes = sizeof(float) * 2 * ROVE_CACHE_CHUNK * (size_t)half;
  const size_t row_bytes = typed ? sizeof(float) * ROVE_CACHE_CHUNK * (size_t)d : 0;
  const size_t sink_bytes = typed ? ROVE_CACHE_CHUNK * ((size_t)d * (size_t)rove_dtype_size(type) +
                                                        sizeof(float) * (size_t)rove_q8_blocks(d))
                                  : 0;
  float *tab = rove_alloc(tab_bytes + row_bytes + sink_bytes);
  if (!tab) return 0;
  float *cs = tab, *sn = tab + ROVE_CACHE_CHUNK * half;
  rove_rope_table(cs, sn, p->inv_freq, half, p->rope_step, &delta, 0, 1);
  for (int64_t i = 1; i < ROVE_CACHE_CHUNK; i++) {
    memcpy(cs + i * half, cs, sizeof(float) * (size_t)half);
    memcpy(sn + i * half, sn, sizeof(float) * (size_t)half);
  }
  w->block = tab;
  w->r = rove_plan_rot(p, cs, sn, 0);
  w->rowbuf = typed ? (float *)((char *)tab + tab_bytes) : NULL;
  w->sink = typed ? (char *)tab + tab_bytes + row_bytes : NULL;
  return 1;
}

void rove_cache_shift_end(rove_cache_shift_ws *w) {
  rove_free(w->block);
  w->block = NULL;
}
