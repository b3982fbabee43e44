/* SPDX-License-Identifier: MIT */
/* rove_paged_store: new tokens into a caller's paged pool by slot. A fuzzed plan, a caller
 * pool (type f32 / bf16 / f16 / q8 or invalid, head-major / token-major / invalid layout,
 * block size 1 .. 32 or an invalid one, 1 .. 12 blocks; blocks dense, block_stride apart
 * with gaps, K and V interleaved per block in one allocation (FlashInfer), interleaved so
 * that K's and V's blocks collide, or a block_stride below a block; positions or none; q8
 * scales, sometimes missing), n_tokens (0 .. 40, sometimes 257 .. 600 so that the call has
 * more than one task, sometimes negative), slots (mostly valid and distinct, sequential or
 * permuted; sometimes padding, past the pool, repeated or raw), K and V (f32, or rounded
 * to bf16 / f16; magnitudes small, huge, or near the pool type's limit over 2 m, which is
 * where the store switches between writing straight into the pool and staging; NaN /
 * inf / 3e38 specials; token strides 0, larger or too small), positions (sometimes NULL),
 * explicit angles (sometimes non-finite), and sometimes an input or pool array aliasing
 * another pool array.
 * Every pool allocation is malloc'd with exactly the bytes the contract reads (ASan sees
 * any overrun) and filled with the canary. Checks after each call: a valid status; the
 * status predicted where it is cheap (a bad argument, slot, stride or overlap:
 * INVALID_ARGUMENT; a token-major or block-strided Q8 pool: UNSUPPORTED; an f32 pool, or a
 * typed one whose rotated values cannot leave its range: OK); on failure every pool
 * allocation (K, V, the gaps between blocks, scales, positions) untouched; on success the
 * rows the slots name written, their positions stored, and every other byte (other rows,
 * gaps, non-Q8 scales) untouched; the same call through a plan of another thread count
 * gives the same status and pool bytes; and each named row (K, V, Q8 scales, position)
 * equals, byte for byte, the row rove_paged_append stores in librove's own pool (same
 * plan, type and block size) for the same token at sequence index = its slot (the gaps
 * filled with zero tokens). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#define H "fuzz_paged_store"
#define MAXBLK 12

/* How K's and V's blocks are laid out. */
enum { G_DENSE, G_DENSE_STRIDE, G_GAPS, G_INTERLEAVED, G_COLLIDE, G_SMALL_STRIDE };

typedef struct {
  char *kb, *vb; /* allocations; vb NULL when K and V share kb */
  size_t kb_bytes, vb_bytes;
  size_t koff, voff; /* bytes from the allocation(s) to k and v */
  float *ks, *vs;    /* NULL when not given */
  int32_t *pos;      /* NULL when not given */
  size_t sbytes, pbytes;
} pool;

typedef struct {
  int mode;
  size_t esz;
  int64_t block, stride; /* elements of a block; between blocks (the resolved stride) */
  int64_t kv_stride;     /* rove_paged_kv.block_stride */
  size_t extent;         /* bytes of K (of V): (n_blocks - 1) stride + block elements */
  size_t voff;           /* G_COLLIDE: V's offset from K in bytes */
  int v_first;           /* G_INTERLEAVED: V's blocks before K's */
} geom;

static void pool_alloc(pool *pl, const geom *g, size_t sbytes, int ks, int vs, size_t pbytes,
                       int with_pos) {
  memset(pl, 0, sizeof *pl);
  pl->sbytes = sbytes, pl->pbytes = pbytes;
  if (g->mode == G_INTERLEAVED || g->mode == G_COLLIDE) {
    const size_t b = (size_t)g->block * g->esz;
    pl->koff = g->mode == G_INTERLEAVED && g->v_first ? b : 0;
    pl->voff = g->mode == G_INTERLEAVED ? (g->v_first ? 0 : b) : g->voff;
    pl->kb_bytes = (pl->koff > pl->voff ? pl->koff : pl->voff) + g->extent;
    pl->kb = fz_canary_alloc(pl->kb_bytes);
  } else {
    pl->kb_bytes = pl->vb_bytes = g->extent;
    pl->kb = fz_canary_alloc(g->extent);
    pl->vb = fz_canary_alloc(g->extent);
  }
  if (ks) pl->ks = fz_canary_alloc(sbytes);
  if (vs) pl->vs = fz_canary_alloc(sbytes);
  if (with_pos) pl->pos = fz_canary_alloc(pbytes);
}

static char *pool_k(const pool *pl) { return pl->kb + pl->koff; }
static char *pool_v(const pool *pl) { return (pl->vb ? pl->vb : pl->kb) + pl->voff; }

static void pool_free(pool *pl) {
  free(pl->kb), free(pl->vb), free(pl->ks), free(pl->vs), free(pl->pos);
}

static int pool_untouched(const pool *pl) {
  return fz_untouched(pl->kb, pl->kb_bytes) && (!pl->vb || fz_untouched(pl->vb, pl->vb_bytes)) &&
         (!pl->ks || fz_untouched(pl->ks, pl->sbytes)) &&
         (!pl->vs || fz_untouched(pl->vs, pl->sbytes)) &&
         (!pl->pos || fz_untouched(pl->pos, pl->pbytes));
}

static int pool_equal(const pool *a, const pool *b) {
  return memcmp(a->kb, b->kb, a->kb_bytes) == 0 &&
         (!a->vb || memcmp(a->vb, b->vb, a->vb_bytes) == 0) &&
         (!a->ks || memcmp(a->ks, b->ks, a->sbytes) == 0) &&
         (!a->vs || memcmp(a->vs, b->vs, a->sbytes) == 0) &&
         (!a->pos || memcmp(a->pos, b->pos, a->pbytes) == 0);
}

/* Aliasing modes (an output overlapping an input or another output): all INVALID. */
enum { AL_NONE, AL_K_IN_POOL, AL_POS_IN_POOL, AL_V_IS_K, AL_VS_IS_KS, AL_ANGLES_IN_POOL };

/* The rove_paged_kv over pl, with alias mode al applied to the pool's own pointers. */
static rove_paged_kv kv_of(const pool *pl, const geom *g, rove_dtype type, int32_t bs, int32_t nb,
                           int32_t layout, int al) {
  rove_paged_kv kv;
  memset(&kv, 0, sizeof kv);
  kv.k = pool_k(pl), kv.v = al == AL_V_IS_K ? pool_k(pl) : pool_v(pl);
  kv.k_scale = pl->ks, kv.v_scale = al == AL_VS_IS_KS ? pl->ks : pl->vs;
  kv.pos = pl->pos;
  kv.type = type, kv.block_size = bs, kv.n_blocks = nb, kv.layout = layout;
  kv.block_stride = g->kv_stride;
  return kv;
}

/* f32 -> bf16 bits, round to nearest even (NaN kept quiet). */
static uint16_t to_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu)) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* f32 -> IEEE binary16 bits, round to nearest even (NaN kept quiet, overflow to inf). */
static uint16_t to_f16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return sign | 0x7C00u | (a > 0x7F800000u ? 0x200u : 0u);
  if (a >= 0x477FF000u) return sign | 0x7C00u; /* >= 65520: rounds to inf */
  if (a < 0x38800000u) {                       /* below 2^-14: a subnormal (or 0) */
    float f;
    memcpy(&f, &a, 4);
    return sign | (uint16_t)lrintf(f * 16777216.0f); /* units of 2^-24, nearest even */
  }
  uint32_t r = a - 0x38000000u; /* exponent rebiased 127 -> 15 */
  r += 0xFFFu + ((r >> 13) & 1u);
  return sign | (uint16_t)(r >> 13);
}

/* Element offset of the row of slot s, head h, in a pool of the layout. */
static int64_t elem_of(int64_t s, int32_t h, int32_t bs, int32_t hkv, int32_t d, int64_t stride,
                       int token_major) {
  const int64_t blk = s / bs, row = s % bs;
  return blk * stride + (token_major ? row * hkv + h : (int64_t)h * bs + row) * d;
}

/* Q8 scale row (dense, head-major) of slot s, head h. */
static int64_t scale_row_of(int64_t s, int32_t h, int32_t bs, int32_t hkv) {
  return ((s / bs) * hkv + h) * bs + s % bs;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader rd;
  fz_init(&rd, data, size);
  rove_attention_config rc;
  rove_plan *plan = fz_plan_from_input(&rd, H, &rc);
  if (!plan) return 0;
  /* the same plan on another thread count (the store must give the same bytes) */
  rove_plan *plan2 = NULL;
  {
    rove_attention_config c2 = rc;
    c2.n_threads = rc.n_threads == 1 ? 2 : 1;
    if (rove_plan_create(&c2, &plan2) != ROVE_OK) plan2 = NULL;
  }
  const int32_t d = rc.head_dim, hkv = rc.n_kv_heads, half = rc.rope.rotary_dim / 2;
  const int64_t width = (int64_t)hkv * d;
  double m = 1.0; /* K's attention factor: a bound on what the rotation can produce */
  {
    double inv[ROVE_MAX_HEAD_DIM / 2 + 1];
    if (d > ROVE_MAX_HEAD_DIM || rove_rope_inv_freq(&rc.rope, d, inv, &m) != ROVE_OK) m = INFINITY;
  }

  /* ---- the pool ---- */
  static const int32_t sizes[] = {1, 2, 4, 8, 16, 1, 2, 4, 8, 16, 3, 0, 32, -4};
  const int32_t bs = fz_pick_i32(&rd, sizes, 14);
  const int32_t nb = fz_range(&rd, 1, MAXBLK);
  int32_t type = fz_range(&rd, 0, 4); /* 4: invalid */
  if (type == 4 && fz_bool(&rd)) type = -1;
  const uint8_t lsel = fz_u8(&rd);
  const int32_t layout = lsel < 170   ? ROVE_PAGED_HEAD_MAJOR
                         : lsel < 250 ? ROVE_PAGED_TOKEN_MAJOR
                                      : (lsel & 1 ? 2 : -1);
  const int bs_ok = bs > 0 && (bs & (bs - 1)) == 0;
  const int type_ok = type >= 0 && type < ROVE_DTYPE_COUNT, q8 = type == ROVE_DTYPE_Q8;
  const int tm = layout == ROVE_PAGED_TOKEN_MAJOR;
  const int64_t tokens = bs > 0 ? (int64_t)nb * bs : 0; /* slots of the pool */
  const size_t esz = type == ROVE_DTYPE_BF16 || type == ROVE_DTYPE_F16 ? 2 : q8 ? 1 : 4;
  const int32_t nsc = (d + ROVE_Q8_BLOCK - 1) / ROVE_Q8_BLOCK;
  const size_t row_bytes = (size_t)d * esz;
  const size_t sbytes = (size_t)tokens * (size_t)hkv * (size_t)nsc * sizeof(float);
  /* the blocks' geometry */
  geom g;
  memset(&g, 0, sizeof g);
  g.esz = esz;
  g.block = (bs > 0 ? bs : 0) * width;
  {
    const uint8_t b = fz_u8(&rd);
    g.mode = b < 140   ? G_DENSE
             : b < 160 ? G_DENSE_STRIDE
             : b < 195 ? G_GAPS
             : b < 235 ? G_INTERLEAVED
             : b < 248 ? G_COLLIDE
                       : G_SMALL_STRIDE;
    if (g.block == 0 || (g.mode == G_SMALL_STRIDE && g.block < 2)) g.mode = G_DENSE;
    g.stride = g.block;
    switch (g.mode) {
      case G_DENSE_STRIDE: g.kv_stride = g.block; break;
      case G_GAPS: g.stride = g.kv_stride = g.block + fz_range(&rd, 1, 9); break;
      case G_INTERLEAVED:
        g.stride = g.kv_stride = 2 * g.block;
        g.v_first = fz_bool(&rd);
        break;
      case G_COLLIDE: /* V's blocks overlap K's (0: v == k) */
        g.stride = g.kv_stride = 2 * g.block;
        g.voff = (size_t)fz_range(&rd, 0, g.block - 1 < 255 ? (int32_t)g.block - 1 : 255) * esz;
        break;
      case G_SMALL_STRIDE: /* refused before anything is read: allocated dense */
        g.kv_stride =
            fz_bool(&rd)
                ? -fz_range(&rd, 1, 5)
                : g.block - fz_range(&rd, 1, g.block - 1 < 255 ? (int32_t)g.block - 1 : 255);
        break;
      default: break;
    }
    g.extent = (size_t)((nb - 1) * g.stride + g.block) * esz;
  }
  /* Q8: both scales mostly; otherwise sometimes given (and then never written) */
  const uint8_t ssel = fz_u8(&rd);
  const int give_ks = q8 ? ssel < 245 || ssel == 250 : ssel >= 230;
  const int give_vs = q8 ? ssel < 250 : ssel >= 230;
  const int with_pos = fz_u8(&rd) < 180;
  const int layout_ok = layout == ROVE_PAGED_HEAD_MAJOR || layout == ROVE_PAGED_TOKEN_MAJOR;
  const int pool_bad = !bs_ok || !type_ok || (q8 && (!give_ks || !give_vs)) || !layout_ok ||
                       g.mode == G_SMALL_STRIDE;
  /* UNSUPPORTED: a Q8 pool token-major or with blocks not dense */
  const int q8_unsup = !pool_bad && q8 && (tm || (g.kv_stride != 0 && g.kv_stride != g.block));

  /* ---- the tokens ---- */
  const uint8_t nsel = fz_u8(&rd);
  int32_t n;
  if (nsel < 200)
    n = fz_range(&rd, 0, 40);
  else if (nsel < 220)
    n = fz_range(&rd, 257, 600); /* more than one task (chunks of 256) */
  else if (nsel < 235)
    n = 0;
  else
    n = fz_bool(&rd) ? -1 - fz_range(&rd, 0, 5) : INT32_MIN;
  const int32_t na = n > 0 ? n : 1; /* rows allocated */

  /* slots: a permutation (or the sequence 0, 1, ..) of the pool's slots, taken in order;
   * some tokens padding, past the pool, repeated or raw */
  int64_t *slots = fz_alloc(sizeof(int64_t) * (size_t)na);
  int64_t *perm = fz_alloc(sizeof(int64_t) * (size_t)(tokens > 0 ? tokens : 1));
  for (int64_t i = 0; i < tokens; i++) perm[i] = i;
  if (fz_bool(&rd)) { /* permuted */
    uint64_t s = ((uint64_t)fz_u32(&rd) << 1) | 1u;
    for (int64_t i = tokens - 1; i > 0; i--) {
      s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
      const int64_t j = (int64_t)((s * 2685821657736338717ull) >> 33) % (i + 1);
      const int64_t t = perm[i];
      perm[i] = perm[j], perm[j] = t;
    }
  }
  int64_t next = 0;
  int32_t stored = 0; /* tokens with a slot >= 0 */
  for (int32_t i = 0; i < n; i++) {
    const uint8_t b = fz_u8(&rd);
    int64_t sl;
    if (b < 200 || (b >= 228 && b < 240 && stored == 0)) {
      sl = next < tokens ? perm[next++] : -1;
    } else if (b < 215) {
      static const int64_t pads[] = {-1, -2, INT64_MIN, -1000000007};
      sl = pads[b % 4];
    } else if (b < 228) {
      static const int64_t past[] = {0, 1, 2, INT64_MAX, (int64_t)1 << 40, (int64_t)1 << 32};
      sl = b % 6 < 3 ? tokens + past[b % 6] : past[b % 6];
    } else if (b < 240) { /* a repeat of an earlier stored slot */
      int32_t j = fz_range(&rd, 0, i - 1), tries = 0;
      while (slots[j] < 0 && tries++ < i) j = (j + 1) % i;
      sl = slots[j];
    } else {
      sl = (int64_t)fz_u64(&rd);
    }
    slots[i] = sl;
    stored += sl >= 0;
  }
  int slots_bad = 0;
  uint8_t *seen = fz_alloc((size_t)(tokens > 0 ? tokens : 1));
  int32_t *owner = malloc(sizeof(int32_t) * (size_t)(tokens > 0 ? tokens : 1));
  for (int64_t i = 0; i < tokens; i++) owner[i] = -1;
  int64_t max_slot = -1;
  for (int32_t i = 0; i < n; i++) {
    if (slots[i] < 0) continue;
    if (slots[i] >= tokens || seen[slots[i]]) {
      slots_bad = 1;
      continue;
    }
    seen[slots[i]] = 1, owner[slots[i]] = i;
    if (slots[i] > max_slot) max_slot = slots[i];
  }

  /* input type and strides */
  const uint8_t isel = fz_u8(&rd);
  const rove_dtype in_type = isel < 170   ? ROVE_DTYPE_F32
                             : isel < 210 ? ROVE_DTYPE_BF16
                             : isel < 248 ? ROVE_DTYPE_F16
                                          : (rove_dtype)(isel & 1 ? ROVE_DTYPE_Q8 : 7);
  const int in_ok = in_type == ROVE_DTYPE_F32 || in_type == ROVE_DTYPE_BF16 ||
                    in_type == ROVE_DTYPE_F16;
  const size_t isz = in_type == ROVE_DTYPE_BF16 || in_type == ROVE_DTYPE_F16 ? 2 : 4;
  int64_t strides[2], rs[2];
  int stride_bad = 0;
  for (int j = 0; j < 2; j++) {
    const uint8_t b = fz_u8(&rd);
    if (b < 180)
      strides[j] = 0;
    else if (b < 235)
      strides[j] = width + fz_range(&rd, 1, 7);
    else
      strides[j] = fz_bool(&rd) || width < 2 ? -fz_range(&rd, 1, 5)
                                             : fz_range(&rd, 1, (int32_t)width - 1);
    const int bad = strides[j] != 0 && strides[j] < width;
    stride_bad |= bad;
    rs[j] = strides[j] == 0 || bad ? width : strides[j]; /* a refused stride: dense memory */
  }
  /* magnitudes: small; huge (f16 cannot hold them); near the pool type's limit over the
   * largest factor a rotation can give (2 m), where the store goes straight into the pool
   * or stages */
  float amp = 2.0f;
  {
    const uint8_t b = fz_u8(&rd);
    const double mm = isfinite(m) && m > 1.0 ? m : 1.0;
    if (b >= 150 && b < 175) {
      amp = 1e5f;
    } else if (b >= 175 && b < 235) {
      static const double factors[] = {0.25,  0.5,  0.9, 0.99, 0.999, 1.0,
                                       1.001, 1.01, 1.1, 1.5,  2.0,   4.0};
      static const double divs[] = {2.0, 1.41421356, 1.0};
      const double limit = type == ROVE_DTYPE_F16 ? 65504.0 : type == ROVE_DTYPE_Q8 ? 1e38 : 3e38;
      const double a = limit * factors[fz_u8(&rd) % 12] / (divs[fz_u8(&rd) % 3] * mm);
      amp = (float)(a < 3.4e38 ? a : 3.4e38);
    } else if (b >= 235) {
      amp = fz_bool(&rd) ? 1e-3f : 1e-6f;
    }
  }
  const size_t ext[2] = {(size_t)((int64_t)(na - 1) * rs[0] + width),
                         (size_t)((int64_t)(na - 1) * rs[1] + width)};
  float *xf[2];
  uint8_t *hit[2];
  int special = 0; /* a NaN / inf / 3e38 in a stored token's row */
  for (int j = 0; j < 2; j++) {
    xf[j] = fz_alloc(ext[j] * 4);
    hit[j] = fz_alloc(ext[j]);
    fz_fill_f32(&rd, xf[j], ext[j], amp);
    if (fz_specials_f32(&rd, xf[j], ext[j], hit[j]))
      for (size_t e = 0; e < ext[j]; e++) {
        const int64_t t = (int64_t)e / rs[j], c = (int64_t)e % rs[j];
        if (hit[j][e] && t < n && c < width && slots[t] >= 0) special = 1;
      }
  }
  void *xin[2] = {xf[0], xf[1]};
  uint16_t *xh[2] = {NULL, NULL};
  if (isz == 2)
    for (int j = 0; j < 2; j++) {
      xh[j] = fz_alloc(ext[j] * 2);
      for (size_t e = 0; e < ext[j]; e++)
        xh[j][e] = in_type == ROVE_DTYPE_BF16 ? to_bf16(xf[j][e]) : to_f16(xf[j][e]);
      xin[j] = xh[j];
    }
  /* an f16 input rounds 65520 and up to inf */
  const int in_inf = in_type == ROVE_DTYPE_F16 && amp >= 65504.0f;

  /* positions (sometimes NULL) */
  int32_t *pos = NULL;
  const uint8_t psel = fz_u8(&rd);
  if (psel < 250) {
    pos = fz_alloc(sizeof(int32_t) * (size_t)na);
    const int32_t base = fz_range(&rd, -4, 100);
    for (int32_t i = 0; i < n; i++) pos[i] = psel < 120 ? base + i : fz_pos(&rd);
  }

  /* angles: NULL or [n][hkv][half], sometimes non-finite (a padding token's: no error) */
  double *angles = NULL;
  int angle_bad = 0;
  const int64_t tab_w = (int64_t)hkv * half;
  if (fz_u8(&rd) >= 170) {
    const size_t na_el = (size_t)((int64_t)na * tab_w);
    angles = fz_alloc((na_el ? na_el : 1) * sizeof(double));
    uint8_t *ah = fz_alloc(na_el ? na_el : 1);
    fz_fill_f64(&rd, angles, na_el, fz_bool(&rd) ? 1e6 : 100.0);
    if (na_el && fz_specials_f64(&rd, angles, na_el, ah))
      for (size_t e = 0; e < na_el; e++)
        if (ah[e] && (int64_t)e / tab_w < n && slots[(int64_t)e / tab_w] >= 0) angle_bad = 1;
    free(ah);
  }

  /* aliasing: an input inside the pool, or two pool arrays on one */
  int al = AL_NONE;
  if (fz_u8(&rd) >= 245) {
    al = fz_range(&rd, AL_K_IN_POOL, AL_ANGLES_IN_POOL);
    if ((al == AL_POS_IN_POOL && (!with_pos || tokens == 0)) ||
        (al == AL_VS_IS_KS && (!q8 || !give_ks || !give_vs)) ||
        (al == AL_ANGLES_IN_POOL &&
         (!angles || tab_w == 0 || g.extent < (size_t)na * (size_t)tab_w * 8)))
      al = AL_NONE;
  }

  /* ---- the call ---- */
  pool pl;
  const size_t pbytes = sizeof(int32_t) * (size_t)tokens;
  pool_alloc(&pl, &g, sbytes, give_ks, give_vs, pbytes, with_pos);
  rove_paged_kv kv = kv_of(&pl, &g, (rove_dtype)type, bs, nb, layout, al);
  const void *kin = al == AL_K_IN_POOL ? pool_k(&pl) : xin[0];
  const int32_t *pin = al == AL_POS_IN_POOL ? pl.pos : pos;
  const double *ain = al == AL_ANGLES_IN_POOL ? (const double *)pool_v(&pl) : angles;
  const rove_status st =
      rove_paged_store(plan, &kv, n, slots, kin, strides[0], xin[1], strides[1], in_type, pin, ain);
  fz_check_status(H, st);

  /* ---- the status ---- */
  const int step1_bad = (n != 0 && !pin) || n < 0 || !in_ok; /* n 0: NULLs are fine */
  const int collide = g.mode == G_COLLIDE || al != AL_NONE;
  const int later_bad = n > 0 && (stride_bad || angle_bad || slots_bad || collide);
  const double bound = 2.001 * amp * (isfinite(m) && m > 1.0 ? m : 1.0);
  const double limit = type == ROVE_DTYPE_F16 ? 65504.0 : type == ROVE_DTYPE_Q8 ? 1e38 : 3e38;
  const int fits = type == ROVE_DTYPE_F32 || (!special && !in_inf && isfinite(m) && bound < limit);
  if (step1_bad || pool_bad) {
    if (q8_unsup)
      FZ_CHECK(H, st == ROVE_ERR_INVALID_ARGUMENT || st == ROVE_ERR_UNSUPPORTED,
               "bad arguments accepted (unsupported q8 pool)");
    else
      FZ_CHECK(H, st == ROVE_ERR_INVALID_ARGUMENT, "bad arguments or pool not INVALID_ARGUMENT");
  } else if (q8_unsup) {
    if (later_bad)
      FZ_CHECK(H, st == ROVE_ERR_INVALID_ARGUMENT || st == ROVE_ERR_UNSUPPORTED,
               "bad call into an unsupported q8 pool accepted");
    else
      FZ_CHECK(H, st == ROVE_ERR_UNSUPPORTED,
               "a token-major or block-strided q8 pool not UNSUPPORTED");
  } else if (n == 0) {
    FZ_CHECK(H, st == ROVE_OK, "n_tokens 0 refused");
  } else if (later_bad) {
    if (slots_bad)
      FZ_CHECK(H, st == ROVE_ERR_INVALID_ARGUMENT, "a slot past the pool or repeated accepted");
    if (angle_bad)
      FZ_CHECK(H, st == ROVE_ERR_INVALID_ARGUMENT, "a stored token's non-finite angle accepted");
    if (collide)
      FZ_CHECK(H, st == ROVE_ERR_INVALID_ARGUMENT, "overlapping pool arrays / blocks accepted");
    FZ_CHECK(H, st == ROVE_ERR_INVALID_ARGUMENT, "a bad stride, slot, angle or overlap accepted");
  } else if (fits) {
    FZ_CHECK(H, st == ROVE_OK, "a valid store refused (values fit the pool's type)");
  } else {
    FZ_CHECK(H, st == ROVE_OK || st == ROVE_ERR_INVALID_ARGUMENT, "a store's status");
  }
  if (st != ROVE_OK) FZ_CHECK(H, pool_untouched(&pl), "pool written by a failed store");

  /* ---- another thread count: the same status and bytes ---- */
  if (plan2 && al == AL_NONE) {
    pool p2;
    pool_alloc(&p2, &g, sbytes, give_ks, give_vs, pbytes, with_pos);
    rove_paged_kv kv2 = kv_of(&p2, &g, (rove_dtype)type, bs, nb, layout, al);
    const rove_status s2 = rove_paged_store(plan2, &kv2, n, slots, xin[0], strides[0], xin[1],
                                            strides[1], in_type, pos, angles);
    fz_check_status(H, s2);
    FZ_CHECK(H, s2 == st, "another thread count gives another status");
    FZ_CHECK(H, pool_equal(&pl, &p2), "another thread count gives other pool bytes");
    pool_free(&p2);
  }

  /* ---- success: librove's own pool, rove_paged_append of the same tokens at sequence
   * index = slot; then the named rows, and nothing else ---- */
  if (st == ROVE_OK && n > 0 && max_slot >= 0) {
    const int64_t stride = g.stride;
    rove_paged_cache *c = NULL;
    FZ_CHECK(H, rove_paged_cache_create(plan, (rove_dtype)type, bs, nb, 1, &c) == ROVE_OK,
             "rove_paged_cache_create refused the pool store accepted");
    int32_t seq = -1;
    FZ_CHECK(H, rove_paged_seq_create(c, &seq) == ROVE_OK, "seq_create");
    const int64_t L = max_slot + 1; /* gaps: zero tokens at position 0 */
    char *ck = fz_alloc((size_t)(L * width) * isz), *cv = fz_alloc((size_t)(L * width) * isz);
    int32_t *cpos = fz_alloc(sizeof(int32_t) * (size_t)L);
    double *cang = angles ? fz_alloc(sizeof(double) * (size_t)(L * (tab_w ? tab_w : 1))) : NULL;
    for (int64_t sl = 0; sl < L; sl++) {
      const int32_t i = owner[sl];
      if (i < 0) continue;
      memcpy(ck + (size_t)(sl * width) * isz, (const char *)xin[0] + (size_t)(i * rs[0]) * isz,
             (size_t)width * isz);
      memcpy(cv + (size_t)(sl * width) * isz, (const char *)xin[1] + (size_t)(i * rs[1]) * isz,
             (size_t)width * isz);
      cpos[sl] = pos[i];
      if (cang)
        memcpy(cang + sl * tab_w, angles + (int64_t)i * tab_w, sizeof(double) * (size_t)tab_w);
    }
    FZ_CHECK(H, rove_paged_append(c, seq, (int32_t)L, ck, 0, cv, 0, in_type, cpos, cang) == ROVE_OK,
             "rove_paged_append refused what rove_paged_store stored");
    int32_t table[MAXBLK * 32], nt = 0;
    FZ_CHECK(H, rove_paged_seq_block_table(c, seq, table, MAXBLK * 32, &nt) == ROVE_OK,
             "block table");
    rove_paged_kv ckv;
    FZ_CHECK(H, rove_paged_cache_view(c, &ckv) == ROVE_OK, "view");
    for (int64_t sl = 0; sl < L; sl++) {
      const int32_t i = owner[sl];
      if (i < 0) continue;
      const int64_t cs = (int64_t)table[sl / bs] * bs + sl % bs; /* the cache's slot */
      for (int32_t h = 0; h < hkv; h++) {
        const size_t e = (size_t)elem_of(sl, h, bs, hkv, d, stride, tm) * esz;
        const size_t ce = (size_t)elem_of(cs, h, bs, hkv, d, g.block, 0) * esz;
        FZ_CHECK(H, !fz_untouched(pool_k(&pl) + e, row_bytes), "a slot's K row not written");
        FZ_CHECK(H, !fz_untouched(pool_v(&pl) + e, row_bytes), "a slot's V row not written");
        FZ_CHECK(H, memcmp(pool_k(&pl) + e, (const char *)ckv.k + ce, row_bytes) == 0,
                 "K row differs from rove_paged_append's");
        FZ_CHECK(H, memcmp(pool_v(&pl) + e, (const char *)ckv.v + ce, row_bytes) == 0,
                 "V row differs from rove_paged_append's");
        if (q8) {
          const int64_t r = scale_row_of(sl, h, bs, hkv), cr = scale_row_of(cs, h, bs, hkv);
          FZ_CHECK(H, memcmp(pl.ks + r * nsc, ckv.k_scale + cr * nsc, (size_t)nsc * 4) == 0,
                   "K scales differ from rove_paged_append's");
          FZ_CHECK(H, memcmp(pl.vs + r * nsc, ckv.v_scale + cr * nsc, (size_t)nsc * 4) == 0,
                   "V scales differ from rove_paged_append's");
        }
      }
      FZ_CHECK(H, ckv.pos[cs] == pos[i], "the cache's position");
      if (pl.pos) FZ_CHECK(H, pl.pos[sl] == pos[i], "a slot's position is not its token's");
    }
    free(ck), free(cv), free(cpos), free(cang);
    rove_paged_cache_destroy(c);
    /* the named rows back to the canary: then the whole pool must be canary (no other row,
     * gap between blocks, non-Q8 scale or position written) */
    for (int64_t sl = 0; sl < L; sl++) {
      if (owner[sl] < 0) continue;
      for (int32_t h = 0; h < hkv; h++) {
        const size_t e = (size_t)elem_of(sl, h, bs, hkv, d, stride, tm) * esz;
        memset(pool_k(&pl) + e, FZ_CANARY, row_bytes);
        memset(pool_v(&pl) + e, FZ_CANARY, row_bytes);
        if (q8) {
          const int64_t r = scale_row_of(sl, h, bs, hkv);
          memset(pl.ks + r * nsc, FZ_CANARY, (size_t)nsc * 4);
          memset(pl.vs + r * nsc, FZ_CANARY, (size_t)nsc * 4);
        }
      }
      if (pl.pos) memset(pl.pos + sl, FZ_CANARY, 4);
    }
  }
  if (st == ROVE_OK) FZ_CHECK(H, pool_untouched(&pl), "a byte no slot names was written");

  pool_free(&pl);
  free(slots), free(perm), free(seen), free(owner), free(pos), free(angles);
  for (int j = 0; j < 2; j++) free(xf[j]), free(hit[j]), free(xh[j]);
  rove_plan_destroy(plan2);
  rove_plan_destroy(plan);
  return 0;
}
