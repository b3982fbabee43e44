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
  double *freq_factors;       /* plan's own copy (cfg.rope.freq_factors points here) */
  double *inv_freq;           /* [half] */
  double attn_factor;         /* YaRN m: multiplies the rotated dims of q and k only */
  const rove_kernels *kern;   /* table of the chosen ISA */
  struct rove_pool *pool;     /* workspace blocks reused across calls (workspace.c) */
};

#endif
