/* Internal: the plan object and helpers shared by the drivers. */
#ifndef ROVE_PLAN_H
#define ROVE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "rove.h"

struct rove_plan {
  rove_attention_config cfg;  /* validated; rotary_dim, scale, n_threads resolved */
  int32_t half;               /* rotary_dim / 2 */
  double *freq_factors;       /* plan's own copy (cfg.rope.freq_factors points here) */
  double *inv_freq;           /* [half] */
  double attn_factor;         /* YaRN m: multiplies the rotated dims of q and k only */
  const rove_kernels *kern;   /* table of the chosen ISA */
  struct rove_pool *pool;     /* workspace blocks reused across calls (workspace.c) */
};

/* workspace.c: a mutex-protected pool of freed workspace blocks. */
typedef struct rove_pool rove_pool;
rove_pool *rove_pool_create(void);
void rove_pool_destroy(rove_pool *p);
void *rove_pool_get(rove_pool *p, size_t bytes, size_t *size); /* NULL when out of memory */
void rove_pool_put(rove_pool *p, void *block, size_t size);

/* rope_freq.c: validate the rope part of a config for head_dim; writes the resolved
 * rotary dim. Returns INVALID_ARGUMENT / UNSUPPORTED as rove_rope_inv_freq documents. */
rove_status rove_rope_validate(const rove_rope_config *c, int32_t head_dim, int32_t *rotary_dim);

/* rope_table.c: cos/sin [n][half] of angle fmod((double)pos_i * inv_freq[k], 2 pi),
 * pos_i = pos ? pos[i] : pos0 + i. */
void rove_rope_table(float *cos_t, float *sin_t, const double *inv_freq, int32_t half,
                     const int32_t *pos, int64_t pos0, int64_t n);

/* dispatch.c */
rove_status rove_select_isa(rove_isa requested, rove_isa *chosen);

/* util.c: checked arithmetic (return 0 on overflow) and aligned allocation. */
int rove_mul_i64(int64_t a, int64_t b, int64_t *out);
int rove_add_i64(int64_t a, int64_t b, int64_t *out);
void *rove_alloc(size_t bytes);  /* 64-byte aligned, NULL on failure or 0 bytes */
void rove_free(void *p);
/* [lo, hi) byte ranges of two buffers overlap? */
int rove_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes);
/* Run body(i, ctx) for i in [0, n) on n_threads (OpenMP dynamic schedule). */
void rove_parallel_for(int32_t n_threads, int64_t n, void (*body)(int64_t i, int tid, void *ctx),
                       void *ctx);

#endif
