/* SPDX-License-Identifier: MIT */
/* Internal: the attention plan object. Drivers include this; it brings the headers every
 * driver needs (the kernel table and ISA registry, rope tables, utilities). */
#ifndef ROVE_PLAN_H
#define ROVE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "isa_registry.h"
#include "kernels/kernels.h"
#include "rope.h"
#include "rove.h"
#include "util.h"

struct rove_plan {
  rove_attention_config cfg;  /* validated; rotary_dim, scale, n_threads resolved */
  int32_t half;               /* rotary_dim / 2 */
  double *freq_factors;       /* the plan's own copy of the factor sets in one block, each [half]:
                               * [freq_factors][long_freq_factors] (those set), which
                               * cfg.rope.freq_factors / long_freq_factors point into */
  double *inv_freq;           /* [half] */
  double *rope_step;          /* ROVE_ROPE_STEPS(half): rove_rope_steps of inv_freq */
  double attn_factor;         /* YaRN m: multiplies the rotated dims of q and k only */
  const rove_kernels *kern;   /* table of the chosen ISA */
  int32_t rows_paced;         /* rove_rows_args.paced for this CPU (Intel: 1) */
  int32_t rows_zen5;          /* AMD family 0x1A on (1): the decode walks' Zen 5 tuning (fp32
                               * pools and GQA groups of 4 on attn_rows_heads, the walk's rows
                               * requested ahead, the row kernel's prefetch into L1;
                               * attention_decode.c) */
  struct rove_pool *pool;     /* workspace blocks reused across calls (workspace.c) */
};

/* The first rotated dim of a head (rove_rot.first): 0 for ROVE_ROTARY_FIRST, head_dim - r
 * for ROVE_ROTARY_LAST (DeepSeek MLA: the pass-through "nope" dims come first). */
static inline int32_t rove_plan_rot_first(const rove_plan *p) {
  return p->cfg.rope.placement == ROVE_ROTARY_LAST ? p->cfg.head_dim - 2 * p->half : 0;
}

/* A rotation by the plan's pairing and placement over tables c / s (NULL: none) whose
 * rows are stride floats apart (0 = half). */
static inline rove_rot rove_plan_rot(const rove_plan *p, const float *c, const float *s,
                                     int64_t stride) {
  rove_rot r = {c, s, p->half, (int32_t)p->cfg.rope.pairing, stride, rove_plan_rot_first(p), 0};
  return r;
}

#endif
