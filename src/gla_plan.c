/* SPDX-License-Identifier: MIT */
/* GLA config defaults, validation, the immutable plan, and the GLA kernel tables. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gla_internal.h"

void rove_gla_config_init(rove_gla_config *c, int32_t n_heads, int32_t key_dim, int32_t value_dim) {
  if (!c) return;
  memset(c, 0, sizeof *c);
  c->n_heads = n_heads;
  c->key_dim = key_dim;
  c->value_dim = value_dim;
  c->scale = key_dim > 0 ? (float)(1.0 / sqrt((double)key_dim)) : 0.0f;
  c->rotate = ROVE_ROTATE_ROPE;
  c->rotary_dim = 0;
  c->pairing = ROVE_PAIRING_HALF;
  c->chunk = 64;
  c->isa = ROVE_ISA_AUTO;
  c->n_threads = 0;
}

/* Everything but the ISA; *r gets the resolved rotary dim. */
static rove_status validate(const rove_gla_config *c, int32_t *r) {
  if (c->n_heads <= 0 || c->key_dim <= 0 || c->value_dim <= 0) return ROVE_ERR_INVALID_ARGUMENT;
  if (!isfinite(c->scale) || c->n_threads < 0 || c->n_threads > ROVE_MAX_THREADS)
    return ROVE_ERR_INVALID_ARGUMENT;
  if (c->rotate & ~(uint32_t)ROVE_ROTATE_ROVE) return ROVE_ERR_INVALID_ARGUMENT;
  if (c->pairing != ROVE_PAIRING_HALF && c->pairing != ROVE_PAIRING_INTERLEAVED)
    return ROVE_ERR_INVALID_ARGUMENT;
  if (c->chunk != 0 && c->chunk != 16 && c->chunk != 32 && c->chunk != 64 && c->chunk != 128)
    return ROVE_ERR_INVALID_ARGUMENT;
  if (c->rotary_dim < 0 || c->rotary_dim > c->key_dim) return ROVE_ERR_INVALID_ARGUMENT;
  *r = c->rotary_dim ? c->rotary_dim : c->key_dim;
  if (c->rotate) { /* the rotary dim matters only when something rotates */
    if (*r % 2 != 0) return ROVE_ERR_INVALID_ARGUMENT;
    if ((c->rotate & (ROVE_ROTATE_V | ROVE_ROTATE_O)) && c->value_dim < *r)
      return ROVE_ERR_INVALID_ARGUMENT;
  }
  if (c->key_dim > ROVE_MAX_HEAD_DIM || c->value_dim > ROVE_MAX_HEAD_DIM)
    return ROVE_ERR_UNSUPPORTED;
  return ROVE_OK;
}

rove_status rove_gla_plan_create(const rove_gla_config *c, rove_gla_plan **out) {
  if (!c || !out) return ROVE_ERR_INVALID_ARGUMENT;
  int32_t r = 0;
  rove_status st = validate(c, &r);
  rove_isa isa = ROVE_ISA_SCALAR;
  if (st == ROVE_OK) st = rove_select_isa(c->isa, &isa);
  if (st != ROVE_OK) return st;
  rove_gla_plan *p = calloc(1, sizeof *p);
  if (!p) return ROVE_ERR_OUT_OF_MEMORY;
  p->cfg = *c;
  p->cfg.rotary_dim = r;
  p->half = r / 2;
  if (p->cfg.chunk == 0) p->cfg.chunk = 64;
  if (p->cfg.scale == 0.0f) p->cfg.scale = (float)(1.0 / sqrt((double)c->key_dim));
  if (p->cfg.n_threads == 0) p->cfg.n_threads = rove_default_threads();
  p->cfg.isa = isa;
  p->kern = rove_kernels_for(isa);
  p->bwd_keep_floats = ROVE_GLA_BWD_KEEP_FLOATS;
  p->pool = rove_pool_create();
  if (!p->pool) {
    rove_gla_plan_destroy(p);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  if (!p->kern) {
    rove_gla_plan_destroy(p);
    return ROVE_ERR_INTERNAL;
  }
  *out = p;
  return ROVE_OK;
}

void rove_gla_plan_destroy(rove_gla_plan *p) {
  if (!p) return;
  rove_pool_destroy(p->pool);
  free(p);
}

rove_isa rove_gla_plan_isa(const rove_gla_plan *p) { return p ? p->cfg.isa : ROVE_ISA_AUTO; }
