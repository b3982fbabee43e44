/* SPDX-License-Identifier: MIT */
/* Internal: the attention layer object and the steps shared by rove_layer_forward
 * (layer.c) and rove_layer_forward_cached (layer_cached.c). */
#ifndef ROVE_LAYER_INTERNAL_H
#define ROVE_LAYER_INTERNAL_H

#include "plan.h"

struct rove_layer {
  const rove_plan *p;   /* borrowed */
  int32_t d_model;
  int64_t q_width;      /* n_heads * head_dim: the attention output width */
  int64_t kv_width;     /* n_kv_heads * head_dim */
  int64_t qkv_width;    /* q_width + 2 kv_width: one row of the fused projection */
  float *wqkv;          /* [qkv_width][d_model]: rows of Wq, then Wk, then Wv */
  float *bqkv;          /* [qkv_width] (missing biases as zeros), or NULL if all are NULL */
  float *wo;            /* [d_model][q_width] */
  float *bo;            /* [d_model] or NULL */
  float *sinks;         /* [n_heads] attention sinks, or NULL */
};

/* Buffers of one forward call: the fused projection and the attention output. */
typedef struct rove_layer_work {
  int64_t rows;         /* batch * n */
  float *qkv;           /* [rows][qkv_width]: q | k | v of each token */
  float *att;           /* [rows][q_width] */
} rove_layer_work;

/* Check x/y (non-NULL, no overlap) for rows tokens and allocate the workspace.
 * Returns INVALID_ARGUMENT, SIZE_OVERFLOW or OUT_OF_MEMORY (nothing allocated then). */
rove_status rove_layer_work_init(const rove_layer *l, int64_t rows, const float *x,
                                 const float *y, rove_layer_work *w);
void rove_layer_work_release(rove_layer_work *w);

/* w->qkv = x Wqkv^T + bqkv (one sgemm per <= INT_MAX rows). */
void rove_layer_project_qkv(const rove_layer *l, const float *x, rove_layer_work *w);
/* y = w->att Wo^T + bo. */
void rove_layer_project_out(const rove_layer *l, const rove_layer_work *w, float *y);

/* The attention arguments over strided views of w->qkv (q, k, v) into w->att. */
rove_attention_args rove_layer_views(const rove_layer *l, const rove_layer_work *w,
                                     int32_t batch, int32_t n);

#endif
