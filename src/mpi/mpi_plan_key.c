/* SPDX-License-Identifier: MIT */
/* The fingerprint of a plan that the ranks compare before they communicate: FNV-1a (64
 * bit) over every setting that changes the result of attention, read back through the
 * public API (rove_plan_config, rove_rope_inv_freq): shapes, rotate flags, causal,
 * window, the resolved scale and the softcap (their bits; a softcap of -0 as 0), and,
 * when the plan rotates anything, rotary dim, pairing, placement, and the double inverse
 * frequencies and attention factor that the rope config resolves to (so every scaling
 * and freq_factors is covered without listing its fields). The ISA and the thread count
 * are left out: ranks may differ in them (their results then agree to float rounding
 * instead of bitwise). Kept to 62 bits so that the
 * agreement can negate it. */
#include <string.h>

#include "mpi_internal.h"

static uint64_t fnv(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

static uint64_t fnv_i32(uint64_t h, int32_t x) { return fnv(h, &x, sizeof x); }

int64_t rmpi_plan_key(const rove_plan *p, int32_t *n_heads, int32_t *n_kv_heads, int32_t *head_dim,
                      int32_t *causal, int32_t *window) {
  rove_attention_config c;
  if (!p || rove_plan_config(p, &c) != ROVE_OK) return -1;
  double inv_freq[ROVE_MAX_HEAD_DIM / 2], m = 1.0;
  if (rove_rope_inv_freq(&c.rope, c.head_dim, inv_freq, &m) != ROVE_OK) return -1;
  const int32_t r = c.rope.rotary_dim > 0 ? c.rope.rotary_dim : c.head_dim;
  uint64_t h = 0xCBF29CE484222325ull;
  h = fnv_i32(h, c.n_heads);
  h = fnv_i32(h, c.n_kv_heads);
  h = fnv_i32(h, c.head_dim);
  h = fnv_i32(h, (int32_t)c.rotate);
  h = fnv_i32(h, c.causal);
  h = fnv_i32(h, c.window);
  h = fnv(h, &c.scale, sizeof c.scale);
  const float softcap = c.softcap == 0.0f ? 0.0f : c.softcap; /* -0 is 0: no cap */
  h = fnv(h, &softcap, sizeof softcap);
  if (c.rotate != 0) { /* the rope settings change nothing when nothing rotates */
    h = fnv_i32(h, r);
    h = fnv_i32(h, (int32_t)c.rope.pairing);
    h = fnv_i32(h, (int32_t)c.rope.placement);
    h = fnv(h, inv_freq, sizeof(double) * (size_t)(r / 2));
    h = fnv(h, &m, sizeof m);
  }
  *n_heads = c.n_heads, *n_kv_heads = c.n_kv_heads, *head_dim = c.head_dim;
  *causal = c.causal, *window = c.window;
  return (int64_t)(h >> 2);
}
