/* SPDX-License-Identifier: MIT */
/* Attention config defaults, validation, and the immutable plan. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

void rove_attention_config_init(rove_attention_config *c, int32_t n_heads, int32_t n_kv_heads,
                                int32_t head_dim) {
  if (!c) return;
  memset(c, 0, sizeof *c);
  c->n_heads = n_heads;
  c->n_kv_heads = n_kv_heads;
  c->head_dim = head_dim;
  c->rotate = ROVE_ROTATE_ROVE;
  c->causal = 1;
  c->window = 0;
  c->scale = head_dim > 0 ? (float)(1.0 / sqrt((double)head_dim)) : 0.0f;
  c->softcap = 0.0f;
  rove_rope_config_init(&c->rope);
  c->isa = ROVE_ISA_AUTO;
  c->n_threads = 0;
}

/* Everything but the rope part and the ISA. */
static rove_status validate_attention(const rove_attention_config *c) {
  if (c->n_heads <= 0 || c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads != 0)
    return ROVE_ERR_INVALID_ARGUMENT;
  if (c->rotate & ~(uint32_t)ROVE_ROTATE_ROVE) return ROVE_ERR_INVALID_ARGUMENT;
  if (c->causal != 0 && c->causal != 1) return ROVE_ERR_INVALID_ARGUMENT;
  if (c->window < 0 || c->n_threads < 0 || c->n_threads > ROVE_MAX_THREADS)
    return ROVE_ERR_INVALID_ARGUMENT;
  if (!isfinite(c->scale)) return ROVE_ERR_INVALID_ARGUMENT;
  if (!isfinite(c->softcap) || c->softcap < 0.0f) return ROVE_ERR_INVALID_ARGUMENT;
  int64_t width;  /* floats of one token row of q: must fit comfortably */
  if (!rove_mul_i64(c->n_heads, c->head_dim, &width)) return ROVE_ERR_SIZE_OVERFLOW;
  return ROVE_OK;
}

rove_status rove_plan_create(const rove_attention_config *c, rove_plan **out) {
  if (!c || !out) return ROVE_ERR_INVALID_ARGUMENT;
  int32_t r = 0;
  rove_status st = rove_rope_validate(&c->rope, c->head_dim, &r);
  if (st == ROVE_OK) st = validate_attention(c);
  rove_isa isa = ROVE_ISA_SCALAR;
  if (st == ROVE_OK) st = rove_select_isa(c->isa, &isa);
  if (st != ROVE_OK) return st;

  rove_plan *p = calloc(1, sizeof *p);
  if (!p) return ROVE_ERR_OUT_OF_MEMORY;
  p->cfg = *c;
  p->half = r / 2;
  p->cfg.rope.rotary_dim = r;
  p->inv_freq = malloc((size_t)p->half * sizeof(double));
  p->pool = rove_pool_create();
  /* The plan's own copy of the factor sets, in one block: [freq_factors][long_freq_factors]
   * (each half doubles, present when the config has it), so that rove_plan_config returns
   * a config that recreates this plan. */
  const double *sets[2] = {c->rope.freq_factors, c->rope.long_freq_factors};
  const size_t n_sets = (sets[0] ? 1u : 0u) + (sets[1] ? 1u : 0u);
  if (n_sets) p->freq_factors = malloc(n_sets * (size_t)p->half * sizeof(double));
  if (!p->inv_freq || !p->pool || (n_sets && !p->freq_factors)) {
    rove_plan_destroy(p);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  double *copy = p->freq_factors;
  const double **dst[2] = {&p->cfg.rope.freq_factors, &p->cfg.rope.long_freq_factors};
  for (int i = 0; i < 2; i++) {
    *dst[i] = NULL;
    if (!sets[i]) continue;
    memcpy(copy, sets[i], (size_t)p->half * sizeof(double));
    *dst[i] = copy;
    copy += p->half;
  }
  st = rove_rope_inv_freq(&p->cfg.rope, c->head_dim, p->inv_freq, &p->attn_factor);
  if (st == ROVE_OK && !(p->rope_step = malloc(ROVE_ROPE_STEPS(p->half) * sizeof(double))))
    st = ROVE_ERR_OUT_OF_MEMORY;
  if (st != ROVE_OK) {
    rove_plan_destroy(p);
    return st;
  }
  rove_rope_steps(p->rope_step, p->inv_freq, p->half);
  if (p->cfg.scale == 0.0f) p->cfg.scale = (float)(1.0 / sqrt((double)c->head_dim));
  if (p->cfg.n_threads == 0) p->cfg.n_threads = rove_default_threads();
  p->cfg.isa = isa;
  p->kern = rove_kernels_for(isa);
  p->rows_paced = rove_cpu_is_intel();
  /* the decode walks' Zen 5 tuning (attention_decode.c): fp32 pools of small blocks take
   * attn_rows_heads too (paged / contiguous time 1.20-1.23 -> 1.03-1.10 at blocks of 16,
   * 12 x 64, one thread; on a Zen 4 fp32 pools were 1.04x slower this way: docs/
   * performance.md, "Session 38"), GQA groups of 4 as well, with the walk's rows requested
   * ahead, and the row kernel prefetches into L1 ("Session 40") */
  p->rows_zen5 = rove_cpu_amd_family() >= 0x1A;
  if (!p->kern) {
    rove_plan_destroy(p);
    return ROVE_ERR_INTERNAL;
  }
  *out = p;
  return ROVE_OK;
}

void rove_plan_destroy(rove_plan *p) {
  if (!p) return;
  free(p->inv_freq);
  free(p->rope_step);
  free(p->freq_factors);
  rove_pool_destroy(p->pool);
  free(p);
}

rove_isa rove_plan_isa(const rove_plan *p) { return p ? p->cfg.isa : ROVE_ISA_AUTO; }

int32_t rove_plan_threads(const rove_plan *p) { return p ? p->cfg.n_threads : 0; }

rove_status rove_plan_config(const rove_plan *p, rove_attention_config *out) {
  if (!p || !out) return ROVE_ERR_INVALID_ARGUMENT;
  *out = p->cfg;
  return ROVE_OK;
}
