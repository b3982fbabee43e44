/* SPDX-License-Identifier: MIT */
/* The byte reader, canary buffers and config decoders shared by the harnesses. */
#include "fuzz_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fz_init(fz_reader *r, const uint8_t *data, size_t size) {
  r->data = data;
  r->size = size;
  r->pos = 0;
}

uint8_t fz_u8(fz_reader *r) { return r->pos < r->size ? r->data[r->pos++] : 0; }

uint32_t fz_u32(fz_reader *r) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)fz_u8(r) << (8 * i);
  return v;
}

uint64_t fz_u64(fz_reader *r) {
  uint64_t lo = fz_u32(r);
  return lo | ((uint64_t)fz_u32(r) << 32);
}

int32_t fz_range(fz_reader *r, int32_t lo, int32_t hi) {
  uint32_t span = (uint32_t)(hi - lo) + 1u;
  uint32_t v = span <= 256u ? fz_u8(r) : (uint32_t)fz_u8(r) | ((uint32_t)fz_u8(r) << 8);
  return lo + (int32_t)(v % span);
}

int fz_bool(fz_reader *r) { return fz_u8(r) & 1; }

int32_t fz_pick_i32(fz_reader *r, const int32_t *values, int n) {
  return values[fz_u8(r) % (uint32_t)n];
}

double fz_pick_f64(fz_reader *r, const double *values, int n) {
  uint8_t b = fz_u8(r);
  if (b >= 250) { /* raw bits: any double, NaN payloads and subnormals included */
    uint64_t bits = fz_u64(r);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
  }
  return values[b % (uint32_t)n];
}

int32_t fz_pos(fz_reader *r) {
  static const int32_t edges[] = {INT32_MIN, INT32_MIN + 1, INT32_MAX, INT32_MAX - 1,
                                  -1,        1 << 30,       -(1 << 30), 65536};
  uint8_t b = fz_u8(r);
  if (b < 160) return (int32_t)(b % 40) - 8; /* small, a few negative */
  if (b < 224) return edges[b % 8];
  if (b < 240) { /* near an edge, wrapped into int32 */
    int64_t p = (int64_t)edges[b % 8] + fz_range(r, -4, 4);
    return (int32_t)(uint32_t)(uint64_t)p;
  }
  return (int32_t)fz_u32(r);
}

/* xorshift64*: cheap values for large buffers from four seed bytes. */
static uint64_t fz_next(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

static uint64_t fz_seed(fz_reader *r) { return ((uint64_t)fz_u32(r) << 1) | 0x9e3779b97f4a7c15ull; }

void fz_fill_f32(fz_reader *r, float *x, size_t n, float amp) {
  uint64_t s = fz_seed(r);
  for (size_t i = 0; i < n; i++) {
    double u = (double)(fz_next(&s) >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
    x[i] = (float)((2.0 * u - 1.0) * amp);
  }
}

void fz_fill_f64(fz_reader *r, double *x, size_t n, double amp) {
  uint64_t s = fz_seed(r);
  for (size_t i = 0; i < n; i++) {
    double u = (double)(fz_next(&s) >> 11) * (1.0 / 9007199254740992.0);
    x[i] = (2.0 * u - 1.0) * amp;
  }
}

static const double fz_special_values[] = {NAN, INFINITY, -INFINITY, 3e38, -3e38};

int fz_specials_f32(fz_reader *r, float *x, size_t n, uint8_t *hit) {
  uint8_t b = fz_u8(r);
  if (n == 0 || b < 192) return 0;
  int count = 1 + b % 3;
  for (int i = 0; i < count; i++) {
    size_t at = (size_t)fz_u32(r) % n;
    x[at] = (float)fz_special_values[fz_u8(r) % 5];
    if (hit) hit[at] = 1;
  }
  return count;
}

int fz_specials_f64(fz_reader *r, double *x, size_t n, uint8_t *hit) {
  uint8_t b = fz_u8(r);
  if (n == 0 || b < 192) return 0;
  int count = 1 + b % 3;
  for (int i = 0; i < count; i++) {
    size_t at = (size_t)fz_u32(r) % n;
    x[at] = fz_special_values[fz_u8(r) % 3]; /* NaN, +-Inf: the non-finite ones */
    if (hit) hit[at] = 1;
  }
  return count;
}

void *fz_canary_alloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) fz_fail("fuzz_util", "malloc failed in the harness");
  memset(p, FZ_CANARY, bytes ? bytes : 1);
  return p;
}

void *fz_alloc(size_t bytes) {
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p) fz_fail("fuzz_util", "calloc failed in the harness");
  return p;
}

int32_t *fz_pos_array(fz_reader *r, int64_t n) {
  int32_t *p = fz_alloc((size_t)n * sizeof(int32_t));
  for (int64_t i = 0; i < n; i++) p[i] = fz_pos(r);
  return p;
}

int fz_untouched(const void *p, size_t bytes) {
  const uint8_t *b = p;
  for (size_t i = 0; i < bytes; i++)
    if (b[i] != FZ_CANARY) return 0;
  return 1;
}

int fz_is_canary_f32(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  return bits == 0xA7A7A7A7u;
}

void fz_fail(const char *harness, const char *what) {
  fprintf(stderr, "\n%s: invariant violated: %s\n", harness, what);
  fflush(stderr);
  abort();
}

void fz_check_status(const char *harness, rove_status s) {
  if ((int)s < (int)ROVE_OK || (int)s > (int)ROVE_ERR_POOL_EXHAUSTED)
    fz_fail(harness, "status outside rove_status");
  if (s == ROVE_ERR_INTERNAL) fz_fail(harness, "ROVE_ERR_INTERNAL (a librove bug)");
}

/* ---- config decoders ---------------------------------------------------------------- */

/* A field keeps its default unless its selector byte says otherwise (about 1 in 3), so
 * that valid configs stay common; the tables mix real models' values with hostile ones. */
static int fz_change(fz_reader *r) { return fz_u8(r) >= 170; }

static double *fz_factor_array(fz_reader *r, int32_t n) {
  static const double vals[] = {1.0, 1.0, 0.5, 2.0, 4.0, 1.19, 1e-300, 1e300, 0.0, -1.0,
                                NAN, 1e-7};
  double *f = fz_canary_alloc((size_t)n * sizeof *f);
  double base = fz_pick_f64(r, vals, 12);
  for (int32_t i = 0; i < n; i++) f[i] = base;
  /* a few entries differ */
  int odd = fz_range(r, 0, 3);
  for (int i = 0; i < odd && n > 0; i++) f[fz_range(r, 0, n - 1)] = fz_pick_f64(r, vals, 12);
  return f;
}

void fz_rope_config(fz_reader *r, rove_rope_config *c, int32_t head_dim) {
  static const int32_t rotary[] = {0, 0, 0, 2, 4, 6, 8, -2, 3, 1026};
  static const double theta[] = {10000, 500000, 1e6, 1.5, 1.0, 0.5, 1e300, NAN, INFINITY,
                                 -1};
  static const int32_t scalings[] = {ROVE_SCALING_NONE, ROVE_SCALING_LINEAR,
                                     ROVE_SCALING_NTK,  ROVE_SCALING_YARN,
                                     ROVE_SCALING_LLAMA3, ROVE_SCALING_LONGROPE,
                                     ROVE_SCALING_YARN, ROVE_SCALING_LONGROPE, 6, -1};
  static const double factor[] = {1, 2, 8, 40, 32, 0.5, 0, -1, 1e-300, 1e300, NAN, 4};
  static const int32_t lengths[] = {0, 1, 2, 16, 4096, 8192, INT32_MAX, -1, 32, 4};
  static const double betas[] = {32, 1, 0.25, 0, -1, NAN, 1e300, 64};
  static const double attn[] = {0, 1, 1.19, 0.5, 1000, 1000.001, 1e39, 1e20, -1, NAN};
  static const int32_t truncs[] = {1, 0, 2, -1};
  static const double lowhigh[] = {1, 4, 2, 0, -1, NAN, 1e300, 8};
  static const double mscales[] = {0, 1, 0.707, 0.1, -1, NAN, 1e300, 1e-300};

  rove_rope_config_init(c);
  if (fz_change(r)) c->rotary_dim = fz_pick_i32(r, rotary, 10);
  if (fz_change(r)) c->rotary_dim = head_dim - 2 * fz_range(r, 0, 2);
  if (fz_change(r)) c->pairing = (rove_pairing)fz_range(r, 0, 2) % 3; /* 2: invalid */
  if (fz_change(r)) c->placement = (rove_rotary_placement)fz_range(r, -1, 2);
  if (fz_change(r)) c->theta = fz_pick_f64(r, theta, 10);
  if (fz_change(r)) c->scaling = (rove_scaling)fz_pick_i32(r, scalings, 10);
  if (fz_change(r)) c->factor = fz_pick_f64(r, factor, 12);
  if (fz_change(r)) c->original_max_position = fz_pick_i32(r, lengths, 10);
  if (fz_change(r)) c->beta_fast = fz_pick_f64(r, betas, 8);
  if (fz_change(r)) c->beta_slow = fz_pick_f64(r, betas, 8);
  if (fz_change(r)) c->attention_factor = fz_pick_f64(r, attn, 10);
  if (fz_change(r)) c->truncate = fz_pick_i32(r, truncs, 4);
  if (fz_change(r)) c->low_freq_factor = fz_pick_f64(r, lowhigh, 8);
  if (fz_change(r)) c->high_freq_factor = fz_pick_f64(r, lowhigh, 8);
  if (fz_change(r)) c->mscale = fz_pick_f64(r, mscales, 8);
  if (fz_change(r)) c->mscale_all_dim = fz_pick_f64(r, mscales, 8);
  if (fz_change(r)) c->max_position = fz_pick_i32(r, lengths, 10);

  /* The factor arrays hold r/2 doubles, r as the config says (head_dim when 0; for an
   * odd or out-of-range r, which must be rejected, (r + 1) / 2 so no valid read is cut). */
  int32_t rr = c->rotary_dim > 0 ? c->rotary_dim : head_dim;
  int32_t n = rr > 0 ? (rr + 1) / 2 : 1;
  if (n > 1024) n = 1024;
  /* LONGROPE requires the short set: give it one most of the time. */
  int want_short = c->scaling == ROVE_SCALING_LONGROPE ? fz_u8(r) < 220 : fz_change(r);
  if (want_short) c->freq_factors = fz_factor_array(r, n);
  if (c->scaling == ROVE_SCALING_LONGROPE ? fz_u8(r) < 128 : fz_u8(r) >= 240)
    c->long_freq_factors = fz_factor_array(r, n);
}

void fz_rope_free(rove_rope_config *c) {
  free((void *)c->freq_factors);
  free((void *)c->long_freq_factors);
  c->freq_factors = NULL;
  c->long_freq_factors = NULL;
}

void fz_attention_config(fz_reader *r, rove_attention_config *c) {
  static const int32_t heads[] = {1, 1, 2, 2, 4, 3, 0, -1};
  static const int32_t dims[] = {2, 4, 8, 16, 6, 10, 12, 32, 0, 3, 1026, -2, 2, 4, 8, 16};
  static const int32_t windows[] = {0, 0, 0, 1, 2, 3, 5, INT32_MAX, -1, 16};
  static const double scales[] = {0, 0, 1, -1, 0.125, 100, 1e30, NAN, INFINITY, 1e-30};
  static const double softcaps[] = {0, 0, 1, 30, 50, 5e5, 1e30, -1, NAN, INFINITY};
  static const int32_t threads[] = {1, 1, 1, 1, 1, 1, 1, 0, -1, ROVE_MAX_THREADS + 1};

  int32_t n_kv = fz_pick_i32(r, heads, 8);
  int32_t group = fz_range(r, 1, 3);
  int32_t n_heads = n_kv > 0 ? n_kv * group : fz_range(r, -1, 2);
  if (fz_u8(r) >= 245) n_heads = n_kv + 1; /* not a multiple */
  int32_t head_dim = fz_pick_i32(r, dims, 16);
  rove_attention_config_init(c, n_heads, n_kv, head_dim);
  if (fz_change(r)) c->rotate = fz_u8(r) & 0x1F; /* bit 16 of the byte: an unknown flag */
  if (fz_change(r)) c->causal = fz_range(r, -1, 2) == 2 ? 0 : fz_range(r, -1, 1);
  if (fz_change(r)) c->window = fz_pick_i32(r, windows, 10);
  if (fz_change(r)) c->scale = (float)fz_pick_f64(r, scales, 10);
  if (fz_change(r)) c->softcap = (float)fz_pick_f64(r, softcaps, 10);
  c->isa = fz_u8(r) >= 200 ? ROVE_ISA_SCALAR : ROVE_ISA_AUTO;
  c->n_threads = fz_pick_i32(r, threads, 10);
  if (c->n_threads == 0) c->n_threads = 1; /* 0 = default = many threads: keep it at 1 */
  fz_rope_config(r, &c->rope, head_dim > 0 ? head_dim : 2);
}

double fz_logit_bound(const rove_attention_config *c, double amp) {
  double m = 1.0;
  double inv_freq[ROVE_MAX_HEAD_DIM / 2];
  if (rove_rope_inv_freq(&c->rope, c->head_dim, inv_freq, &m) != ROVE_OK) return INFINITY;
  double qk = (c->rotate & ROVE_ROTATE_Q ? m : 1.0) * (c->rotate & ROVE_ROTATE_K ? m : 1.0);
  return fabs((double)c->scale) * qk * c->head_dim * amp * amp * 2.0;
}

int fz_visible(int32_t causal, int32_t window, int32_t pi, int32_t pj) {
  int64_t diff = (int64_t)pi - (int64_t)pj;
  if (causal && diff < 0) return 0;
  if (window != 0 && (diff < 0 ? -diff : diff) >= window) return 0;
  return 1;
}

rove_plan *fz_plan_from_input(fz_reader *r, const char *harness, rove_attention_config *rc) {
  rove_attention_config cfg;
  fz_attention_config(r, &cfg);
  rove_plan *plan = (rove_plan *)(uintptr_t)0x1; /* untouched on failure */
  const rove_status st = rove_plan_create(&cfg, &plan);
  fz_check_status(harness, st);
  fz_rope_free(&cfg.rope);
  if (st != ROVE_OK) {
    FZ_CHECK(harness, plan == (rove_plan *)(uintptr_t)0x1, "plan_create wrote *out on failure");
    return NULL;
  }
  FZ_CHECK(harness, rove_plan_config(plan, rc) == ROVE_OK, "rove_plan_config failed");
  FZ_CHECK(harness, rc->head_dim == cfg.head_dim && rc->n_heads == cfg.n_heads,
           "plan_config shape");
  return plan;
}
