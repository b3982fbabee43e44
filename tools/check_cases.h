/* SPDX-License-Identifier: MIT */
/* The shape sweep of `rove check`: one entry per case, the data it runs on, and the
 * config it builds. */
#ifndef ROVE_CLI_CHECK_CASES_H
#define ROVE_CLI_CHECK_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "rove.h"

/* How positions are given. */
typedef enum {
  POS_DEFAULT = 0, /* NULL: bottom-right queries, keys 0..kv_len-1 */
  POS_SHIFTED,     /* explicit, the default ones plus 2^20 (large angles) */
  POS_RANDOM,      /* explicit, unsorted, in [-300, 300] (some rows fully masked) */
  POS_NEGATIVE,    /* explicit, the first half of the queries before every key: those
                      causal rows are fully masked */
  POS_FAR_NEGATIVE /* explicit, the default ones minus 2^20 */
} check_pos;

typedef struct check_case {
  int32_t head_dim, rotary_dim; /* rotary_dim 0 = head_dim; -r: the last r dims rotate
                                 * (ROVE_ROTARY_LAST, DeepSeek MLA's placement) */
  rove_pairing pairing;
  uint32_t rotate;
  int32_t causal, window;
  float softcap;
  int32_t n_heads, n_kv_heads;
  int32_t batch, q_len, kv_len;
  rove_scaling scaling;
  check_pos pos;
  int strided; /* q, k, v as views into one fused QKV buffer; padded output rows */
  int quick;   /* part of --quick */
  int sinks;   /* attention sinks (gpt-oss): a logit per query head */
} check_case;

extern const check_case check_cases[];
extern const size_t check_n_cases;

/* The attention config of @p cc (scaling parameters filled in) for @p isa. */
void check_case_config(const check_case *cc, rove_isa isa, int32_t n_threads,
                       rove_attention_config *c);
/* A one-line description: "d=64 r=32 inter rove causal h=8/2 b=1 q=1 kv=257 ...". */
void check_case_describe(const check_case *cc, char *buf, size_t size);

/* Inputs, outputs and the oracle's answer of one case. */
typedef struct check_data {
  float *qkv;            /* fused QKV (strided) or q */
  float *k, *v;          /* separately allocated when not strided */
  float *out, *lse;
  double *ref, *ref_lse;
  int32_t *q_pos, *kv_pos;
  float *sinks;
  int64_t out_rows, out_width, out_stride, out_floats, lse_n;
  rove_attention_args args;
} check_data;

/* Allocate and fill the inputs of @p cc from @p seed. Returns 0 or -1 (out of memory). */
int check_data_make(const check_case *cc, uint64_t seed, check_data *d);
/* NaN-fill out and lse, so that anything the library does not write is caught. */
void check_data_poison(check_data *d);
/* 1 if the padding between strided output rows is still NaN (untouched). */
int check_data_padding_intact(const check_data *d);
void check_data_free(check_data *d);

#endif
