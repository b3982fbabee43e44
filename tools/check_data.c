/* SPDX-License-Identifier: MIT */
/* Inputs and outputs of one `rove check` case. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_cases.h"
#include "common.h"

#define POS_SHIFT (1 << 20)

static int32_t pos_offset(check_pos pos) {
  return pos == POS_SHIFTED ? POS_SHIFT : pos == POS_FAR_NEGATIVE ? -POS_SHIFT : 0;
}

static void fill_positions(const check_case *cc, cli_rng *rng, int32_t *q_pos,
                           int32_t *kv_pos) {
  for (int32_t b = 0; b < cc->batch; b++) {
    int32_t *qp = q_pos + (int64_t)b * cc->q_len, *kp = kv_pos + (int64_t)b * cc->kv_len;
    for (int32_t j = 0; j < cc->kv_len; j++) {
      if (cc->pos == POS_RANDOM) kp[j] = cli_rng_int(rng, -300, 300);
      else kp[j] = j + pos_offset(cc->pos);
    }
    for (int32_t i = 0; i < cc->q_len; i++) {
      if (cc->pos == POS_RANDOM) qp[i] = cli_rng_int(rng, -300, 300);
      else if (cc->pos == POS_NEGATIVE) qp[i] = i - cc->q_len / 2 - 1; /* first half masked */
      else qp[i] = cc->kv_len - cc->q_len + i + pos_offset(cc->pos);
    }
  }
}

/* q, k, v: dense buffers, or views into one fused [tokens][q | k | v] buffer with a
 * float of padding after each part (so the views are also misaligned). */
static int make_inputs(const check_case *cc, cli_rng *rng, check_data *d) {
  rove_attention_args *a = &d->args;
  const int64_t qw = (int64_t)cc->n_heads * cc->head_dim;
  const int64_t kw = (int64_t)cc->n_kv_heads * cc->head_dim;
  const int64_t nq = (int64_t)cc->batch * cc->q_len, nk = (int64_t)cc->batch * cc->kv_len;
  if (cc->strided) {
    if (cc->q_len != cc->kv_len) return -1; /* one fused buffer: self-attention only */
    const int64_t w = qw + 2 * kw + 3;
    d->qkv = malloc((size_t)(nq * w) * sizeof(float));
    if (!d->qkv) return -1;
    cli_fill_uniform(rng, d->qkv, nq * w);
    a->q = d->qkv;
    a->k = d->qkv + qw + 1;
    a->v = d->qkv + qw + 1 + kw + 1;
    a->q_stride = a->k_stride = a->v_stride = w;
    return 0;
  }
  d->qkv = malloc((size_t)(nq * qw) * sizeof(float));
  d->k = malloc((size_t)(nk * kw) * sizeof(float));
  d->v = malloc((size_t)(nk * kw) * sizeof(float));
  if (!d->qkv || !d->k || !d->v) return -1;
  cli_fill_uniform(rng, d->qkv, nq * qw);
  cli_fill_uniform(rng, d->k, nk * kw);
  cli_fill_uniform(rng, d->v, nk * kw);
  a->q = d->qkv;
  a->k = d->k;
  a->v = d->v;
  return 0;
}

static int make_outputs(const check_case *cc, check_data *d) {
  d->out_rows = (int64_t)cc->batch * cc->q_len;
  d->out_width = (int64_t)cc->n_heads * cc->head_dim;
  d->out_stride = cc->strided ? d->out_width + 5 : d->out_width;
  d->out_floats = d->out_rows * d->out_stride;
  d->lse_n = (int64_t)cc->batch * cc->n_heads * cc->q_len;
  d->out = malloc((size_t)d->out_floats * sizeof(float));
  d->lse = malloc((size_t)d->lse_n * sizeof(float));
  d->ref = malloc((size_t)(d->out_rows * d->out_width) * sizeof(double));
  d->ref_lse = malloc((size_t)d->lse_n * sizeof(double));
  if (!d->out || !d->lse || !d->ref || !d->ref_lse) return -1;
  d->args.out = d->out;
  d->args.lse = d->lse;
  d->args.out_stride = cc->strided ? d->out_stride : 0;
  return 0;
}

int check_data_make(const check_case *cc, uint64_t seed, check_data *d) {
  memset(d, 0, sizeof *d);
  cli_rng rng;
  cli_rng_seed(&rng, seed);
  d->args.batch = cc->batch;
  d->args.q_len = cc->q_len;
  d->args.kv_len = cc->kv_len;
  if (make_inputs(cc, &rng, d) != 0 || make_outputs(cc, d) != 0) return -1;
  if (cc->pos != POS_DEFAULT) {
    d->q_pos = malloc((size_t)cc->batch * (size_t)cc->q_len * sizeof(int32_t));
    d->kv_pos = malloc((size_t)cc->batch * (size_t)cc->kv_len * sizeof(int32_t));
    if (!d->q_pos || !d->kv_pos) return -1;
    fill_positions(cc, &rng, d->q_pos, d->kv_pos);
    d->args.q_pos = d->q_pos;
    d->args.kv_pos = d->kv_pos;
  }
  if (cc->sinks) { /* logits in [-2, 4]: of the scores' size, so they change the result */
    d->sinks = malloc((size_t)cc->n_heads * sizeof(float));
    if (!d->sinks) return -1;
    cli_fill_uniform(&rng, d->sinks, cc->n_heads);
    for (int32_t h = 0; h < cc->n_heads; h++) d->sinks[h] = 1.0f + 3.0f * d->sinks[h];
    d->args.sinks = d->sinks;
  }
  return 0;
}

void check_data_poison(check_data *d) {
  for (int64_t i = 0; i < d->out_floats; i++) d->out[i] = NAN;
  for (int64_t i = 0; i < d->lse_n; i++) d->lse[i] = NAN;
}

int check_data_padding_intact(const check_data *d) {
  for (int64_t t = 0; t < d->out_rows; t++)
    for (int64_t e = d->out_width; e < d->out_stride; e++)
      if (!isnan(d->out[t * d->out_stride + e])) return 0;
  return 1;
}

void check_data_free(check_data *d) {
  free(d->qkv);
  free(d->k);
  free(d->v);
  free(d->out);
  free(d->lse);
  free(d->ref);
  free(d->ref_lse);
  free(d->q_pos);
  free(d->kv_pos);
  free(d->sinks);
  memset(d, 0, sizeof *d);
}
