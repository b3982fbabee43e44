/* SPDX-License-Identifier: MIT */
/* The storage-type conversions (kernels.h's to_f32 / from_f32, src/kernels/dtype.h's
 * definitions) and attn_rows over typed K/V rows, on every ISA of the registry against the
 * scalar table:
 *
 *  - dtype_defs (once): the scalar definitions themselves. rove_f16_to_f32 over all 65536
 *    half patterns and rove_f32_to_f16 over every half, the exact midpoints between
 *    neighbouring halves and their neighbours, and random floats, against a double
 *    round-to-nearest-even reference and (where the compiler has _Float16) the compiler's
 *    conversions; rove_f32_to_bf16 against a double reference over every upper half with
 *    tie-critical lower halves and random floats; Q8 blocks against the properties of the
 *    definition (|q| <= 127, the largest element at +-127, error within half a step).
 *  - convert: from_f32 and to_f32 of all four types, d over 1..9, 15..17, 31..33, 63..65,
 *    96, 127, 128, 130, n = 1..5 rows, strides larger than d (gaps and the slack around
 *    misaligned typed rows hold sentinels that must stay), guarded misaligned buffers,
 *    special values (signed zeros, fp32 subnormals, the fp16 subnormal range, exact RNE ties
 *    of bf16 and fp16 built bitwise, 65504, 65519.99, 65520, FLT_MAX, inf, NaNs, ties that
 *    round across an exponent boundary), and the "bad" flag of every row set (also against
 *    the flag recomputed from the definition). Typed results must equal the scalar ones bit
 *    for bit; a NaN may differ in payload only (it stays a NaN, quiet, of the same sign).
 *    Then to_f32 of the scalar's typed rows and of the ISA's own (from_f32 then to_f32),
 *    bitwise, and (bf16 / fp16 / Q8 q) from_f32 of widened rows gives the rows back.
 *  - to_f32_all: to_f32 of every bf16 and fp16 pattern and every int8 with a set of
 *    scales.
 *  - attn_rows_typed: attn_rows with K of type bf16 / fp16 / q8 and V of K's type (as a
 *    cache stores them) or, for half the problems, of another tensor type (f32 / bf16 /
 *    f16), token strides d or d + 8 or d + 13, no krot / vrot, d in {8, 64, 100, 128}, nk in
 *    {1, 63, 64, 65, 200}, nq in {1, 2, 3, 4, 5, 8, 16}, against the scalar attn_rows on the
 *    same typed rows (relative 2e-5, as ktest_kernels' attn_rows, or at least as close to
 *    a double oracle as the scalar is; see typed_vs_scalar), and against the ISA's own
 *    attn_rows over the widened fp32 rows.
 * ISA iteration and skips: ktest_util.h. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ktest_util.h"
/* ktest_util.h first: cmocka needs its standard headers before it */

#define OUT_TOL 2e-5 /* attn_rows output (relative to max |out|) and LSE (x max(1, |lse|)) */

static const int32_t conv_dims[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,   15,  16,
                                    17, 31, 32, 33, 63, 64, 65, 96, 127, 128, 130};
#define N_DIMS ((int)(sizeof conv_dims / sizeof *conv_dims))
static const int32_t all_types[] = {ROVE_DTYPE_F32, ROVE_DTYPE_BF16, ROVE_DTYPE_F16, ROVE_DTYPE_Q8};

static const char *type_name(int32_t t) {
  return t == ROVE_DTYPE_F32    ? "f32"
         : t == ROVE_DTYPE_BF16 ? "bf16"
         : t == ROVE_DTYPE_F16  ? "f16"
                                : "q8";
}

static uint32_t fbits(float f) { return rove_f32_bits(f); }
static float bitsf(uint32_t u) { return rove_bits_f32(u); }
static uint32_t rbits(rove_rng *g) { return (uint32_t)(rove_rng_u64(g) >> 32); }
static uint64_t rnd(rove_rng *g, uint64_t n) { return rove_rng_u64(g) % n; }

/* ---- comparison rules ----------------------------------------------------------------- */

static int nan16(int32_t type, uint16_t h) {
  return type == ROVE_DTYPE_BF16 ? (h & 0x7fffu) > 0x7f80u : (h & 0x7fffu) > 0x7c00u;
}
/* got stands for want: the same pattern, or both NaN with got quiet and of want's sign. */
static int same16(int32_t type, uint16_t got, uint16_t want) {
  if (got == want) return 1;
  const uint16_t quiet = type == ROVE_DTYPE_BF16 ? 0x40u : 0x200u;
  return nan16(type, want) && nan16(type, got) && (got & quiet) && !((got ^ want) & 0x8000u);
}
static int same32(float got, float want) {
  const uint32_t g = fbits(got), w = fbits(want);
  if (g == w) return 1;
  return isnan(want) && isnan(got) && (g & 0x400000u) && !((g ^ w) >> 31);
}

/* ---- typed rows in a guarded buffer ----------------------------------------------------- */

#define TB_BYTE 0xA5 /* every byte of the data area that is not an element of a row */

typedef struct {
  rove_guarded g;
  unsigned char *p;  /* element 0 of row 0 */
  int64_t lead;      /* bytes of the data area before p */
  int64_t bytes;     /* bytes from p to the end of the last row */
  int64_t total;     /* bytes of the data area */
  int64_t n, stride; /* rows, elements between rows */
  int32_t d, type;
} tbuf;

/* n rows of d elements of type, stride elements apart, at p = (64-byte boundary + mis
 * floats + lead bytes); everything else in the data area holds TB_BYTE. */
static void *tb_alloc(tbuf *b, int32_t type, int64_t n, int64_t stride, int32_t d, int lead,
                      int mis, int post) {
  const int64_t es = rove_dtype_size(type);
  b->type = type, b->n = n, b->stride = stride, b->d = d, b->lead = lead;
  b->bytes = kt_rows_len(n, stride, d) * es;
  const int64_t nf = (lead + b->bytes + 3) / 4;
  float *f = kt_alloc(&b->g, nf, mis, post);
  b->total = nf * 4;
  memset(f, TB_BYTE, (size_t)b->total);
  b->p = (unsigned char *)f + lead;
  return b->p;
}

/* kt_fail when a canary, or a byte of the data area outside the rows, was written. */
static void tb_check(const tbuf *b, const char *what) {
  kt_check(&b->g, what);
  const unsigned char *base = (const unsigned char *)b->g.data;
  const int64_t es = rove_dtype_size(b->type);
  for (int64_t i = 0; i < b->total; i++) {
    const int64_t off = i - b->lead;
    const int inside = off >= 0 && off < b->bytes && (off / es) % b->stride < b->d;
    if (!inside && base[i] != TB_BYTE) {
      kt_fail("%s: byte %lld of the data area (element offset %lld) written outside the rows", what,
              (long long)i, (long long)(off / es));
      return;
    }
  }
}

static void tb_free(tbuf *b) { rove_guarded_free(&b->g); }

static uint16_t tb16(const tbuf *b, int64_t row, int32_t c) {
  return ((const uint16_t *)b->p)[row * b->stride + c];
}

/* ---- values --------------------------------------------------------------------------- */

/* Positive special values (the generators give them either sign). */
static float specials[96];
static int n_specials;

static void specials_init(void) {
  if (n_specials) return;
  /* clang-format off */
  static const uint32_t pats[] = {
      /* zero, fp32 subnormals, FLT_MIN */
      0x00000000u, 0x00000001u, 0x00000123u, 0x00400000u, 0x007fffffu, 0x00800000u,
      /* bf16 ties among the subnormals, into FLT_MIN, across an exponent */
      0x00008000u, 0x00018000u, 0x007f8000u, 0x00ff8000u,
      /* bf16 ties: even, odd, across an exponent; their neighbours */
      0x3f808000u, 0x3f818000u, 0x3fff8000u, 0x3f807fffu, 0x3f808001u,
      /* fp16 ties: even, odd, across an exponent; their neighbours */
      0x3f801000u, 0x3f803000u, 0x3ffff000u, 0x3f800fffu, 0x3f801001u,
      /* bf16: the tie that rounds to inf, just below it, FLT_MAX, the largest bf16 */
      0x7f7f8000u, 0x7f7f7fffu, 0x7f7fffffu, 0x7f7f0000u,
      /* 65504, below and at 65520 (the first to round to inf), 65536, 65488 (a tie) */
      0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477ff001u, 0x47800000u, 0x477fd000u,
      /* 2^-25 (ties to 0) and neighbours, 2^-24, 1.5 and 2.5 x 2^-24 (ties) */
      0x33000000u, 0x33000001u, 0x32ffffffu, 0x33800000u, 0x33c00000u, 0x34200000u,
      /* around 2^-14, the smallest fp16 normal */
      0x387fc000u, 0x387fe000u, 0x387ff000u, 0x387fffffu, 0x38800000u, 0x38801000u,
      /* inf, NaNs (quiet, signalling with low or high payloads) */
      0x7f800000u, 0x7fc00000u, 0x7f800001u, 0x7f810000u, 0x7f802000u, 0x7fffffffu, 0x7fa00000u,
  };
  /* clang-format on */
  for (size_t i = 0; i < sizeof pats / sizeof *pats; i++) specials[n_specials++] = bitsf(pats[i]);
  static const float vals[] = {1.0f,    0.5f,    127.0f,      127.5f,    2049.0f,
                               2051.0f, 4095.0f, 65488.0f,    65519.99f, 65520.0f,
                               1e-8f,   1e-5f,   3.14159265f, 1e38f,     3e38f,
                               FLT_MAX, FLT_MIN, 1e-40f,      0x1p-100f, 0x1.fffffep-101f};
  for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) specials[n_specials++] = vals[i];
  specials[n_specials++] = ldexpf(1023.0f, -24); /* largest fp16 subnormal */
  specials[n_specials++] = ldexpf(1023.5f, -24); /* tie: rounds up to 2^-14 (even) */
  specials[n_specials++] = ldexpf(1022.5f, -24); /* tie: to 1022 (even) */
  specials[n_specials++] = ldexpf(0.5f, -24);    /* = 2^-25 */
  specials[n_specials++] = nextafterf(65520.0f, 0.0f);
  specials[n_specials++] = nextafterf(ldexpf(1023.5f, -24), 1.0f);
  specials[n_specials++] = nextafterf(ldexpf(1023.5f, -24), 0.0f);
}

static float with_sign(rove_rng *g, float x) { return rove_rng_u64(g) & 1 ? -x : x; }
static float special(rove_rng *g) { return with_sign(g, specials[rnd(g, (uint64_t)n_specials)]); }

/* A value of a row for type: clean ones never round to a non-finite value. */
static float rand_value(rove_rng *g, int32_t type, int clean) {
  uint32_t u = rbits(g);
  if (type == ROVE_DTYPE_F16) { /* exponents around the fp16 range: 2^-30 .. 2^15 (2^17) */
    u = (u & 0x807fffffu) | (uint32_t)(97 + rnd(g, clean ? 46 : 49)) << 23;
    const float v = bitsf(u);
    if (clean && fabsf(v) > 65504.0f) return copysignf(rove_rng_uniform(g, 32768.0f, 65504.0f), v);
    return v;
  }
  if (clean) u = (u & 0x807fffffu) | (uint32_t)rnd(g, 254) << 23; /* <= 0x7effffff */
  return bitsf(u);
}

/* A Q8 block of m values of one of several classes; non-finite values only if !clean. */
static void rand_q8_block(rove_rng *g, float *x, int32_t m, int clean) {
  const int cls = (int)rnd(g, 9);
  const float amp = ldexpf(1.0f, (int)rnd(g, 210) - 90);
  for (int32_t i = 0; i < m; i++) {
    float v;
    switch (cls) {
      case 0: v = rnd(g, 2) ? 0.0f : -0.0f; break; /* zeros */
      case 1:
        v = ldexpf(rove_rng_uniform(g, 0.5f, 1.0f), -101 - (int)rnd(g, 48));
        break; /* all below 2^-100 */
      case 2:
        v = rove_rng_uniform(g, 0.0f, 0x1p-100f);
        break; /* max at the 2^-100 edge (set below) */
      case 3: v = (float)((int)rnd(g, 254) - 127) + 0.5f; break;   /* ties of a = 127 (inv 1) */
      case 4: v = (float)(2 * (int)rnd(g, 254) - 253); break;      /* ties of a = 254 (inv 0.5) */
      case 5: v = rove_rng_uniform(g, -1.0f, 1.0f) * amp; break;   /* random amplitude */
      case 6: v = rove_rng_uniform(g, -1.0f, 1.0f) * 1e38f; break; /* huge (FLT_MAX set below) */
      case 7:
        v = ldexpf(rove_rng_uniform(g, -1.0f, 1.0f), -126 - (int)rnd(g, 20));
        break; /* subnormals */
      default: v = rnd(g, 4) ? rove_rng_uniform(g, -1.0f, 1.0f) : special(g); break;
    }
    if (!clean || isfinite(v))
      x[i] = v;
    else
      x[i] = 1.0f;
  }
  const int32_t at = (int32_t)rnd(g, (uint64_t)m);
  if (cls == 2) x[at] = with_sign(g, rnd(g, 2) ? 0x1p-100f : 0x1.fffffep-101f);
  if (cls == 3) x[at] = with_sign(g, 127.0f);
  if (cls == 4) x[at] = with_sign(g, 254.0f);
  if (cls == 6 && rnd(g, 2)) x[at] = with_sign(g, FLT_MAX);
  if (cls == 7) x[at] = with_sign(g, ldexpf(1.0f, -110 + (int)rnd(g, 30)));
  if (!clean && rnd(g, 3) == 0) {
    static const uint32_t bad[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u};
    x[rnd(g, (uint64_t)m)] = bitsf(bad[rnd(g, 5)]);
  }
}

enum { MODE_CLEAN, MODE_SPECIAL, MODE_ONE_BAD, MODE_ONE_NONFINITE, N_MODES };
static const char *mode_names[] = {"clean", "specials", "one-bad", "one-nonfinite"};

/* n rows of d values for type in mode (rows at stride ss). */
static void gen_rows(rove_rng *g, float *x, int64_t ss, int64_t n, int32_t d, int32_t type,
                     int mode) {
  for (int64_t j = 0; j < n; j++) {
    float *r = x + j * ss;
    if (type == ROVE_DTYPE_Q8) {
      for (int32_t i0 = 0; i0 < d; i0 += ROVE_Q8_BLOCK)
        rand_q8_block(g, r + i0, d - i0 < ROVE_Q8_BLOCK ? d - i0 : ROVE_Q8_BLOCK,
                      mode != MODE_SPECIAL);
    } else {
      for (int32_t i = 0; i < d; i++)
        r[i] = mode == MODE_SPECIAL && rnd(g, 3) == 0 ? special(g)
                                                      : rand_value(g, type, mode != MODE_SPECIAL);
    }
  }
  if (mode == MODE_ONE_BAD || mode == MODE_ONE_NONFINITE) {
    float *at = x + (int64_t)rnd(g, (uint64_t)n) * ss + (int32_t)rnd(g, (uint64_t)d);
    if (mode == MODE_ONE_NONFINITE) {
      static const uint32_t nf[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
                                    0x7f800001u};
      *at = bitsf(nf[rnd(g, 5)]);
    } else if (type == ROVE_DTYPE_F16) {
      static const float big[] = {65520.0f, -65520.0f, 1e5f, -FLT_MAX, 0x1.ffe002p15f};
      *at = big[rnd(g, 5)];
    } else if (type == ROVE_DTYPE_BF16) {
      static const uint32_t big[] = {0x7f7fffffu, 0xff7f8000u, 0x7f7fc000u};
      *at = bitsf(big[rnd(g, 3)]);
    } else {
      *at = with_sign(g, rnd(g, 2) ? INFINITY : NAN);
    }
  }
}

/* The flag from_f32 must return, from the definitions of dtype.h. */
static int want_bad(const float *x, int64_t ss, int64_t n, int32_t d, int32_t type) {
  for (int64_t j = 0; j < n; j++)
    for (int32_t i = 0; i < d; i++) {
      const float v = x[j * ss + i];
      if (type == ROVE_DTYPE_Q8 && !isfinite(v)) return 1;
      if (type == ROVE_DTYPE_BF16 && isfinite(v) &&
          !isfinite(rove_bf16_to_f32(rove_f32_to_bf16(v))))
        return 1;
      if (type == ROVE_DTYPE_F16 && isfinite(v) && !isfinite(rove_f16_to_f32(rove_f32_to_f16(v))))
        return 1;
    }
  return 0;
}

/* ---- the scalar definitions (run once) ------------------------------------------------ */

/* fp16 pattern h as a double, from the IEEE format. */
static double ref_f16_value(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double s = h & 0x8000u ? -1.0 : 1.0;
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * (e ? ldexp(1024.0 + m, e - 25) : ldexp((double)m, -24));
}

/* Round-to-nearest-even of f to a format with p significant bits, minimum normal
 * exponent emin, in double (exact: f has at most 24 significant bits). */
static double ref_round(float f, int p, int emin) {
  const double a = fabs((double)f);
  int e = a == 0.0 ? emin : ilogb(a);
  if (e < emin) e = emin;
  const double q = ldexp(1.0, e - (p - 1));
  return copysign(nearbyint(a / q) * q, (double)f); /* nearbyint: the default RNE mode */
}

static uint16_t ref_f32_to_f16(float f) {
  const uint16_t sign = signbit(f) ? 0x8000u : 0u;
  if (isnan(f)) return (uint16_t)(sign | 0x7e00u);
  if (isinf(f)) return (uint16_t)(sign | 0x7c00u);
  const double r = fabs(ref_round(f, 11, -14));
  if (r >= 65536.0) return (uint16_t)(sign | 0x7c00u); /* includes inf */
  if (r < 0x1p-14) return (uint16_t)(sign | (uint16_t)(r * 0x1p24));
  const int e = ilogb(r);
  return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | (uint16_t)((ldexp(r, -e) - 1.0) * 1024.0));
}

static uint16_t ref_f32_to_bf16(float f) {
  const uint16_t sign = signbit(f) ? 0x8000u : 0u;
  if (isnan(f)) return (uint16_t)(sign | 0x7fc0u);
  if (isinf(f)) return (uint16_t)(sign | 0x7f80u);
  const double r = fabs(ref_round(f, 8, -126));
  if (r >= 0x1p128) return (uint16_t)(sign | 0x7f80u);
  const uint32_t u = fbits((float)r); /* exact */
  if (u & 0xffffu) kt_fail("bf16 reference of %a: %a has low bits", (double)f, r);
  return (uint16_t)(sign | (u >> 16));
}

typedef struct {
  int64_t n, bad;
} tally;

static void def_f16(float f, tally *t) {
  const uint16_t got = rove_f32_to_f16(f), want = ref_f32_to_f16(f);
  t->n++;
  if (!same16(ROVE_DTYPE_F16, got, want)) {
    t->bad++;
    kt_fail("rove_f32_to_f16(%a = 0x%08x) = 0x%04x, double RNE reference 0x%04x", (double)f,
            fbits(f), got, want);
  }
#if defined(__FLT16_MAX__)
  const _Float16 hf = (_Float16)f;
  uint16_t hb;
  memcpy(&hb, &hf, 2);
  if (!(got == hb || (nan16(ROVE_DTYPE_F16, got) && nan16(ROVE_DTYPE_F16, hb)))) {
    t->bad++;
    kt_fail("rove_f32_to_f16(%a = 0x%08x) = 0x%04x, (_Float16) gives 0x%04x", (double)f, fbits(f),
            got, hb);
  }
#endif
}

static void def_bf16(float f, tally *t) {
  const uint16_t got = rove_f32_to_bf16(f), want = ref_f32_to_bf16(f);
  t->n++;
  if (!same16(ROVE_DTYPE_BF16, got, want)) {
    t->bad++;
    kt_fail("rove_f32_to_bf16(%a = 0x%08x) = 0x%04x, double RNE reference 0x%04x", (double)f,
            fbits(f), got, want);
  }
  const float w = rove_bf16_to_f32(got);
  if (!isnan(w) && fbits(w) != (uint32_t)got << 16) {
    t->bad++;
    kt_fail("rove_bf16_to_f32(0x%04x) = 0x%08x", got, fbits(w));
  }
}

static void test_dtype_defs(const rove_kernels *unused) {
  (void)unused;
  specials_init();
  rove_rng g;
  rove_rng_seed(&g, 8080);
  /* fp16 -> fp32, every pattern */
  int64_t n_wide = 0, bad_wide = 0;
  for (uint32_t h = 0; h < 65536u; h++, n_wide++) {
    const float got = rove_f16_to_f32((uint16_t)h);
    const double want = ref_f16_value((uint16_t)h);
    int ok = isnan(want)
                 ? isnan(got) && (fbits(got) & 0x400000u) && (!(h & 0x8000u) == !signbit(got))
                 : fbits(got) == fbits((float)want);
#if defined(__FLT16_MAX__)
    _Float16 hf;
    const uint16_t hh = (uint16_t)h;
    memcpy(&hf, &hh, 2);
    const float c = (float)hf;
    ok &= isnan(want) ? isnan(c) : fbits(c) == fbits(got);
#endif
    if (!ok) bad_wide++, kt_fail("rove_f16_to_f32(0x%04x) = %a, want %a", h, (double)got, want);
  }
  /* fp32 -> fp16: every half, the midpoint to the next one (the next of 65504 is 65536) and
   * the neighbours of both, either sign; random floats over the whole range and over fp16's */
  tally t16 = {0, 0};
  for (uint32_t h = 0; h < 0x7c00u; h++) {
    const double v = ref_f16_value((uint16_t)h),
                 nx = h + 1 < 0x7c00u ? ref_f16_value((uint16_t)(h + 1)) : 65536.0;
    const float fv = (float)v, mid = (float)((v + nx) / 2); /* both exact */
    const float pts[] = {fv,
                         mid,
                         nextafterf(mid, 0.0f),
                         nextafterf(mid, INFINITY),
                         nextafterf(fv, INFINITY),
                         nextafterf(fv, 0.0f)};
    for (size_t i = 0; i < sizeof pts / sizeof *pts; i++)
      def_f16(pts[i], &t16), def_f16(-pts[i], &t16);
  }
  for (int i = 0; i < n_specials; i++) def_f16(specials[i], &t16), def_f16(-specials[i], &t16);
  const float inf_nan[] = {INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX};
  for (size_t i = 0; i < sizeof inf_nan / sizeof *inf_nan; i++) def_f16(inf_nan[i], &t16);
  for (int i = 0; i < 500000; i++) def_f16(bitsf(rbits(&g)), &t16);
  for (int i = 0; i < 500000; i++)
    def_f16(bitsf((rbits(&g) & 0x807fffffu) | (uint32_t)(100 + rnd(&g, 45)) << 23), &t16);
  /* fp32 -> bf16: every upper half with tie-critical lower halves, random floats */
  tally tb = {0, 0};
  static const uint32_t lows[] = {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu};
  for (uint32_t hi = 0; hi < 65536u; hi++) {
    for (size_t i = 0; i < sizeof lows / sizeof *lows; i++)
      def_bf16(bitsf(hi << 16 | lows[i]), &tb);
    def_bf16(bitsf(hi << 16 | (rbits(&g) & 0xffffu)), &tb);
  }
  for (int i = 0; i < 1000000; i++) def_bf16(bitsf(rbits(&g)), &tb);
  /* Q8: the properties of the definition over random blocks (of the scalar kernel) */
  int64_t n_q8 = 0, bad_q8 = 0, inf_deq = 0;
  float worst_step = 0.0f;
  for (int it = 0; it < 20000; it++) {
    const int32_t m = 1 + (int32_t)rnd(&g, ROVE_Q8_BLOCK);
    float x[ROVE_Q8_BLOCK], s = -1.0f, back[ROVE_Q8_BLOCK];
    int8_t q[ROVE_Q8_BLOCK];
    rand_q8_block(&g, x, m, 1);
    if (it < 64) x[rnd(&g, (uint64_t)m)] = with_sign(&g, FLT_MAX); /* a few at the top */
    n_q8++;
    kt_ctx("q8 definition block %d (m %d)", it, m);
    if (kt_ref()->from_f32(q, 0, &s, x, 0, 1, m, ROVE_DTYPE_Q8) != 0)
      bad_q8++, kt_fail("flag set on a finite block");
    kt_ref()->to_f32(back, 0, q, 0, &s, 1, m, ROVE_DTYPE_Q8);
    float a = 0.0f;
    for (int32_t i = 0; i < m; i++) a = fmaxf(a, fabsf(x[i]));
    if (a < ROVE_Q8_TINY) {
      for (int32_t i = 0; i < m; i++)
        if (q[i] != 0 || fbits(s) != 0)
          bad_q8++, kt_fail("tiny block (max %a): q %d scale %a", (double)a, q[i], (double)s);
      continue;
    }
    float want_s = a / 127.0f; /* the next float down when 127 * scale rounds to inf */
    if (!isfinite(127.0f * want_s)) want_s = nextafterf(want_s, 0.0f);
    if (fbits(s) != fbits(want_s))
      bad_q8++, kt_fail("scale %a, want %a", (double)s, (double)want_s);
    int top = 0, inf_here = 0;
    for (int32_t i = 0; i < m; i++) {
      if (q[i] == -128) bad_q8++, kt_fail("q[%d] = %d", i, q[i]);
      if (fabsf(x[i]) == a) top |= q[i] == (x[i] < 0 ? -127 : 127);
      if (!isfinite(back[i])) {
        inf_deq += !inf_here, inf_here = 1;
        continue;
      }
      /* half a step (s / 2), the rounding of 127 / a, of x * inv and of q * s: a few ulp of a */
      const double err = fabs((double)x[i] - (double)back[i]),
                   lim = 0.5 * s * (1.0 + 0x1p-20) + 0x1p-20 * a;
      worst_step = fmaxf(worst_step, (float)(err / s));
      if (!(err <= lim))
        bad_q8++, kt_fail("x[%d] = %a widened back as %a: error %.3g steps", i, (double)x[i],
                          (double)back[i], err / s);
    }
    if (!top) bad_q8++, kt_fail("the largest element does not map to +-127");
  }
  printf(
      "  dtype.h: f16->f32 %lld patterns, %lld wrong; f32->f16 %lld values, %lld wrong; "
      "f32->bf16 %lld values, %lld wrong; q8 %lld blocks, %lld wrong (worst error %.4f steps)%s\n",
      (long long)n_wide, (long long)bad_wide, (long long)t16.n, (long long)t16.bad, (long long)tb.n,
      (long long)tb.bad, (long long)n_q8, (long long)bad_q8, worst_step,
#if defined(__FLT16_MAX__)
      "; fp16 also against _Float16"
#else
      "; no _Float16 in this compiler: fp16 against the double reference only"
#endif
  );
  /* dtype.h takes the next scale down when 127 * scale would round to inf */
  if (inf_deq)
    kt_fail("%lld finite Q8 blocks widen an element to inf", (long long)inf_deq);
}

/* ---- from_f32 / to_f32 against scalar ------------------------------------------------- */

/* Typed rows of got and want (n x d) are the same (same16 for bf16 / fp16, bytes for q8 and
 * f32) and so are the Q8 scales. */
static int typed_same(const tbuf *got, const tbuf *want, const float *gs, const float *ws,
                      const char *what) {
  const int32_t type = want->type, d = want->d, nb = rove_q8_blocks(d);
  for (int64_t j = 0; j < want->n; j++) {
    for (int32_t i = 0; i < d; i++) {
      if (type == ROVE_DTYPE_BF16 || type == ROVE_DTYPE_F16) {
        const uint16_t a = tb16(got, j, i), b = tb16(want, j, i);
        if (!same16(type, a, b)) {
          kt_fail("%s: row %lld col %d: 0x%04x, scalar 0x%04x", what, (long long)j, i, a, b);
          return 0;
        }
      } else {
        const int64_t es = rove_dtype_size(type), off = (j * want->stride + i) * es;
        if (memcmp(got->p + off, want->p + off, (size_t)es)) {
          kt_fail("%s: row %lld col %d differs from scalar", what, (long long)j, i);
          return 0;
        }
      }
    }
    if (type == ROVE_DTYPE_Q8)
      for (int32_t b = 0; b < nb; b++)
        if (fbits(gs[j * nb + b]) != fbits(ws[j * nb + b])) {
          kt_fail("%s: row %lld scale %d: %a, scalar %a", what, (long long)j, b,
                  (double)gs[j * nb + b], (double)ws[j * nb + b]);
          return 0;
        }
  }
  return 1;
}

/* n x d floats at strides: same32. */
static int floats_same(const float *got, int64_t gs, const float *want, int64_t ws, int64_t n,
                       int32_t d, const char *what) {
  for (int64_t j = 0; j < n; j++)
    for (int32_t i = 0; i < d; i++)
      if (!same32(got[j * gs + i], want[j * ws + i])) {
        kt_fail("%s: row %lld col %d: %a (0x%08x), scalar %a (0x%08x)", what, (long long)j, i,
                (double)got[j * gs + i], fbits(got[j * gs + i]), (double)want[j * ws + i],
                fbits(want[j * ws + i]));
        return 0;
      }
  return 1;
}

typedef struct {
  int64_t cases, flagged;
} conv_stats;

static void conv_case(const rove_kernels *kn, rove_rng *g, int32_t type, int32_t d, int64_t n,
                      int mode, conv_stats *st) {
  const rove_kernels *ref = kt_ref();
  const uint64_t h = rove_rng_u64(g);
  const int64_t ss = d + 1 + (int64_t)(h % 5), ts = d + 1 + (int64_t)((h >> 4) % 7),
                fs = d + 1 + (int64_t)((h >> 8) % 3);
  const int es = (int)rove_dtype_size(type);
  const int lead_a = es == 2 ? 2 * (int)((h >> 12) % 2) : es == 1 ? (int)((h >> 12) % 4) : 0;
  const int lead_b = es == 2 ? 2 * (int)((h >> 14) % 2) : es == 1 ? (int)((h >> 14) % 4) : 0;
  const int mis = (int)((h >> 16) % 16), post = (int)((h >> 20) % 2);
  const int32_t nb = rove_q8_blocks(d);
  kt_ctx("convert %s d=%d n=%lld mode=%s ss=%lld ts=%lld fs=%lld lead=%d/%d mis=%d",
         type_name(type), d, (long long)n, mode_names[mode], (long long)ss, (long long)ts,
         (long long)fs, lead_a, lead_b, mis);
  rove_guarded xg, sag, sbg, fag, fbg, fcg;
  float *x = kt_rows_alloc(&xg, n, ss, d, mis, post);
  gen_rows(g, x, ss, n, d, type, mode);
  float *xcopy = malloc(sizeof(float) * (size_t)xg.n);
  assert_non_null(xcopy);
  memcpy(xcopy, x, sizeof(float) * (size_t)xg.n);
  tbuf A, B, C;
  tb_alloc(&A, type, n, ts, d, lead_a, (mis + 3) % 16, 1);
  tb_alloc(&B, type, n, ts, d, lead_b, (mis + 7) % 16, !post);
  float *sa = kt_alloc(&sag, n * nb, (mis + 1) % 16, 1),
        *sb = kt_alloc(&sbg, n * nb, (mis + 5) % 16, post);
  rove_fill_bits(sa, sag.n, KT_SENTINEL), rove_fill_bits(sb, sbg.n, KT_SENTINEL);
  /* from_f32 */
  const int ra = ref->from_f32(A.p, ts, type == ROVE_DTYPE_Q8 ? sa : NULL, x, ss, n, d, type);
  const int rb = kn->from_f32(B.p, ts, type == ROVE_DTYPE_Q8 ? sb : NULL, x, ss, n, d, type);
  const int wb = want_bad(x, ss, n, d, type);
  st->cases++, st->flagged += ra;
  if (ra != wb) kt_fail("scalar from_f32 returned %d, the definition says %d", ra, wb);
  if (rb != ra) kt_fail("from_f32 returned %d, scalar %d", rb, ra);
  typed_same(&B, &A, sb, sa, "from_f32");
  tb_check(&A, "scalar from_f32 dst"), tb_check(&B, "from_f32 dst");
  kt_check(&sag, "scalar from_f32 scales"), kt_check(&sbg, "from_f32 scales");
  if (memcmp(x, xcopy, sizeof(float) * (size_t)xg.n)) kt_fail("from_f32 wrote to its source");
  /* to_f32 of the scalar's rows, and of the ISA's own (from_f32 then to_f32) */
  float *fa = kt_rows_alloc(&fag, n, fs, d, (mis + 9) % 16, 1);
  float *fb = kt_rows_alloc(&fbg, n, fs, d, (mis + 11) % 16, post);
  float *fc = kt_rows_alloc(&fcg, n, fs, d, (mis + 13) % 16, !post);
  ref->to_f32(fa, fs, A.p, ts, sa, n, d, type);
  kn->to_f32(fb, fs, A.p, ts, sa, n, d, type);
  kn->to_f32(fc, fs, B.p, ts, sb, n, d, type);
  floats_same(fb, fs, fa, fs, n, d, "to_f32");
  floats_same(fc, fs, fa, fs, n, d, "from_f32 + to_f32");
  kt_check(&fag, "scalar to_f32 dst"), kt_check(&fbg, "to_f32 dst"), kt_check(&fcg, "to_f32 dst");
  kt_gaps_check(fa, n, fs, d, "scalar to_f32 dst"), kt_gaps_check(fb, n, fs, d, "to_f32 dst");
  kt_gaps_check(fc, n, fs, d, "to_f32 dst");
  /* the widened rows convert back to the stored ones (bf16, fp16: exactly representable;
   * q8: the same q, as max |q| s = 127 s gives the same steps) */
  if (type != ROVE_DTYPE_F32) {
    rove_guarded scg;
    float *sc = kt_alloc(&scg, n * nb, mis % 16, 1);
    tb_alloc(&C, type, n, ts, d, lead_a, mis, 1);
    kn->from_f32(C.p, ts, type == ROVE_DTYPE_Q8 ? sc : NULL, fa, fs, n, d, type);
    int done = 0;
    for (int64_t j = 0; j < n && !done; j++)
      for (int32_t i = 0; i < d && !done; i++) {
        int ok;
        if (type == ROVE_DTYPE_Q8) {
          ok = ((const int8_t *)C.p)[j * ts + i] == ((const int8_t *)A.p)[j * ts + i];
          /* a block that widened to inf (max |x| = FLT_MAX, see dtype_defs' NOTE) is exempt */
          const int32_t b0 = i / ROVE_Q8_BLOCK * ROVE_Q8_BLOCK;
          for (int32_t c = b0; c < b0 + ROVE_Q8_BLOCK && c < d; c++)
            if (!isfinite(fa[j * fs + c])) ok = 1;
        } else {
          ok = same16(type, tb16(&C, j, i), tb16(&A, j, i));
        }
        if (!ok)
          kt_fail("round trip row %lld col %d: widened %a does not convert back", (long long)j, i,
                  (double)fa[j * fs + i]),
              done = 1;
      }
    tb_check(&C, "from_f32 (round trip) dst");
    tb_free(&C), rove_guarded_free(&scg);
  }
  free(xcopy);
  tb_free(&A), tb_free(&B);
  rove_guarded_free(&xg), rove_guarded_free(&sag), rove_guarded_free(&sbg);
  rove_guarded_free(&fag), rove_guarded_free(&fbg), rove_guarded_free(&fcg);
}

static void test_convert(const rove_kernels *kn) {
  specials_init();
  rove_rng g;
  rove_rng_seed(&g, 9090);
  conv_stats st[4] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}};
  for (int t = 0; t < 4; t++)
    for (int a = 0; a < N_DIMS; a++)
      for (int64_t n = 1; n <= 5; n++)
        for (int mode = 0; mode < N_MODES; mode++)
          conv_case(kn, &g, all_types[t], conv_dims[a], n, mode, &st[t]);
  printf(
      "  %s convert: row sets f32 %lld, bf16 %lld (%lld flagged), f16 %lld (%lld flagged), "
      "q8 %lld (%lld flagged); %d failures\n",
      kt_isa(), (long long)st[0].cases, (long long)st[1].cases, (long long)st[1].flagged,
      (long long)st[2].cases, (long long)st[2].flagged, (long long)st[3].cases,
      (long long)st[3].flagged, kt_failures());
}

/* ---- to_f32 of every pattern ---------------------------------------------------------- */

static void test_to_f32_all(const rove_kernels *kn) {
  const rove_kernels *ref = kt_ref();
  int64_t checked = 0;
  static const int32_t ds[] = {128, 13};
  for (int t = 0; t < 2; t++) {
    const int32_t type = t ? ROVE_DTYPE_F16 : ROVE_DTYPE_BF16;
    for (size_t di = 0; di < sizeof ds / sizeof *ds; di++) {
      const int32_t d = ds[di];
      const int64_t n = (65536 + d - 1) / d, ts = d + 3, fs = d + 5;
      kt_ctx("to_f32 every %s pattern, d=%d", type_name(type), d);
      tbuf T;
      uint16_t *p = tb_alloc(&T, type, n, ts, d, 2 * (int)di, 5, 0);
      for (int64_t k = 0; k < n * d; k++)
        p[k / d * ts + k % d] = (uint16_t)k; /* the last row wraps */
      rove_guarded ag, bg;
      float *fa = kt_rows_alloc(&ag, n, fs, d, 1, 1), *fb = kt_rows_alloc(&bg, n, fs, d, 3, 0);
      ref->to_f32(fa, fs, p, ts, NULL, n, d, type);
      kn->to_f32(fb, fs, p, ts, NULL, n, d, type);
      floats_same(fb, fs, fa, fs, n, d, "to_f32");
      for (int64_t k = 0; k < n * d; k++) {
        const float w = fa[k / d * fs + k % d];
        const uint16_t hpat = (uint16_t)k;
        const float def = type == ROVE_DTYPE_F16 ? rove_f16_to_f32(hpat) : rove_bf16_to_f32(hpat);
        if (fbits(w) != fbits(def) && !(isnan(w) && isnan(def))) {
          kt_fail("scalar to_f32 of 0x%04x: %a, definition %a", hpat, (double)w, (double)def);
          break;
        }
      }
      checked += n * d;
      kt_check(&ag, "scalar to_f32 dst"), kt_check(&bg, "to_f32 dst");
      kt_gaps_check(fb, n, fs, d, "to_f32 dst");
      tb_check(&T, "to_f32 src");
      tb_free(&T), rove_guarded_free(&ag), rove_guarded_free(&bg);
    }
  }
  /* Q8: every int8 (d = 40: a vector part and a short block) under each scale */
  static const float scales[] = {0.0f, -0.0f, FLT_TRUE_MIN,     1e-40f,  0x1p-100f / 127.0f, 1.0f,
                                 0.3f, 1e30f, FLT_MAX / 127.0f, FLT_MAX, INFINITY,           NAN};
  const int32_t ns = (int32_t)(sizeof scales / sizeof *scales), d = 40, nb = rove_q8_blocks(d);
  for (int32_t lead = 0; lead < 4; lead++) {
    kt_ctx("to_f32 q8 every int8, d=%d lead=%d", d, lead);
    const int64_t n = 256 / 8 * ns / 5 + 1, ts = d + 1, fs = d + 2;
    tbuf T;
    int8_t *p = tb_alloc(&T, ROVE_DTYPE_Q8, n, ts, d, lead, 2, 1);
    float *sc = malloc(sizeof(float) * (size_t)(n * nb));
    assert_non_null(sc);
    for (int64_t k = 0; k < n * d; k++) p[k / d * ts + k % d] = (int8_t)(uint8_t)(k * 7 + lead);
    for (int64_t k = 0; k < n * nb; k++) sc[k] = scales[(k + lead) % ns];
    rove_guarded ag, bg;
    float *fa = kt_rows_alloc(&ag, n, fs, d, 0, 1), *fb = kt_rows_alloc(&bg, n, fs, d, 7, 0);
    ref->to_f32(fa, fs, p, ts, sc, n, d, ROVE_DTYPE_Q8);
    kn->to_f32(fb, fs, p, ts, sc, n, d, ROVE_DTYPE_Q8);
    floats_same(fb, fs, fa, fs, n, d, "to_f32 q8");
    checked += n * d;
    kt_check(&ag, "scalar to_f32 dst"), kt_check(&bg, "to_f32 dst");
    kt_gaps_check(fb, n, fs, d, "to_f32 dst");
    tb_check(&T, "to_f32 src");
    tb_free(&T), free(sc), rove_guarded_free(&ag), rove_guarded_free(&bg);
  }
  printf(
      "  %s to_f32: %lld elements (every bf16 / f16 pattern, every int8 x %d scales), %d "
      "failures\n",
      kt_isa(), (long long)checked, ns, kt_failures());
}

/* ---- attn_rows over typed K/V --------------------------------------------------------- */

static double worst_lse;

static void lse_cmp(float got, float want, int32_t row, const char *what) {
  const double e = fabs((double)got - (double)want) / fmax(1.0, fabs((double)want));
  worst_lse = fmax(worst_lse, isnan(e) ? INFINITY : e);
  if (!(e <= OUT_TOL)) kt_fail("%s lse row %d: got %.9g want %.9g", what, row, got, want);
}

typedef struct {
  int32_t nq, nk, d, type, calls, mask, causal;
  float softcap;
  const float *q;
  const void *k, *v;    /* typed (or fp32) rows, kst / vst elements apart */
  const float *ks, *vs; /* Q8 scales */
  int32_t k_type, v_type;
  int64_t kst, vst;
  const int32_t *qp, *kp;
} trows;

/* P through attn_rows in P->calls consecutive calls; out = o / l, lse = m + ln l. */
static void trows_run(const rove_kernels *kn, const trows *P, float *out, float *lse) {
  const int32_t nq = P->nq, d = P->d, nb = rove_q8_blocks(d);
  const int64_t kes = rove_dtype_size(P->k_type), ves = rove_dtype_size(P->v_type);
  rove_guarded og, mg, lg, sg;
  float *o = kt_alloc(&og, (int64_t)nq * d, 3, 1), *m = kt_alloc(&mg, nq, 1, 1);
  float *l = kt_alloc(&lg, nq, 2, 1), *s = kt_alloc(&sg, ROVE_ROWS_SCRATCH(d), 0, 1);
  rove_fill_bits(s, sg.n, 0x7FC00007u); /* scratch starts as garbage */
  memset(o, 0, sizeof(float) * (size_t)og.n);
  for (int32_t i = 0; i < nq; i++) m[i] = -INFINITY, l[i] = 0.0f;
  rove_rows_args t = {.q = P->q,
                      .ks = P->kst,
                      .vs = P->vst,
                      .k_type = P->k_type, .v_type = P->v_type,
                      .nq = nq,
                      .d = d,
                      .q_pos = P->qp,
                      .mask = P->mask,
                      .causal = P->causal,
                      .window = 0,
                      .softcap = P->softcap,
                      .krot = NULL,
                      .vrot = NULL,
                      .k_mul = 1.0f,
                      .o = o,
                      .m = m,
                      .l = l,
                      .scratch = s};
  for (int c = 0; c < P->calls; c++) {
    const int32_t j0 = (int32_t)((int64_t)P->nk * c / P->calls),
                  j1 = (int32_t)((int64_t)P->nk * (c + 1) / P->calls);
    if (j1 == j0) continue;
    t.k = (const char *)P->k + (int64_t)j0 * P->kst * kes,
    t.v = (const char *)P->v + (int64_t)j0 * P->vst * ves;
    t.k_scale = P->ks ? P->ks + (int64_t)j0 * nb : NULL,
    t.v_scale = P->vs ? P->vs + (int64_t)j0 * nb : NULL;
    t.k_pos = P->kp + j0, t.nk = j1 - j0;
    kn->attn_rows(&t);
  }
  for (int32_t i = 0; i < nq; i++)
    for (int32_t c = 0; c < d; c++)
      out[(int64_t)i * d + c] = l[i] > 0.0f ? o[(int64_t)i * d + c] / l[i] : o[(int64_t)i * d + c];
  for (int32_t i = 0; i < nq; i++) lse[i] = l[i] > 0.0f ? m[i] + logf(l[i]) : -INFINITY;
  kt_check(&og, "o acc"), kt_check(&mg, "m acc"), kt_check(&lg, "l acc"), kt_check(&sg, "scratch");
  rove_guarded_free(&og), rove_guarded_free(&mg), rove_guarded_free(&lg), rove_guarded_free(&sg);
}

static void trows_lse_cmp(const float *li, const float *lr, int32_t nq, const char *what) {
  for (int32_t i = 0; i < nq; i++) {
    if (lr[i] == -INFINITY || li[i] == -INFINITY) {
      if (lr[i] != li[i]) kt_fail("%s row %d: lse %g, reference %g", what, i, li[i], lr[i]);
    } else {
      lse_cmp(li[i], lr[i], i, what);
    }
  }
}

static void trows_cmp(const float *oi, const float *li, const float *orf, const float *lr,
                      int32_t nq, int32_t d, const char *what) {
  kt_cmp(oi, d, orf, d, nq, d, OUT_TOL, what);
  trows_lse_cmp(li, lr, nq, what);
}

/* The double oracle of P over fp32 rows k, v (nk x d, stride d): softmax(q k^T) v with P's
 * causal mask and softcap (no rotations here). */
static void dref_rows(const trows *P, const float *k, const float *v, double *out) {
  const int32_t nq = P->nq, nk = P->nk, d = P->d;
  double *s = malloc(sizeof(double) * (size_t)nk);
  assert_non_null(s);
  for (int32_t i = 0; i < nq; i++) {
    double m = -INFINITY, l = 0;
    double *o = out + (int64_t)i * d;
    for (int32_t j = 0; j < nk; j++) {
      s[j] = -INFINITY;
      if (P->mask && P->causal && P->kp[j] > P->qp[i]) continue;
      double a = 0;
      for (int32_t c = 0; c < d; c++) a += (double)P->q[(int64_t)i * d + c] * k[(int64_t)j * d + c];
      if (P->softcap > 0) a = P->softcap * tanh(a / P->softcap);
      s[j] = a, m = fmax(m, a);
    }
    for (int32_t c = 0; c < d; c++) o[c] = 0;
    for (int32_t j = 0; j < nk; j++) {
      if (s[j] == -INFINITY) continue;
      const double w = exp(s[j] - m);
      l += w;
      for (int32_t c = 0; c < d; c++) o[c] += w * v[(int64_t)j * d + c];
    }
    for (int32_t c = 0; c < d; c++) o[c] = l > 0 ? o[c] / l : 0;
  }
  free(s);
}

/* max |o - r| over n values */
static double dist_to_oracle(const float *o, const double *r, int64_t n) {
  double e = 0;
  for (int64_t i = 0; i < n; i++) e = fmax(e, isnan(o[i]) ? INFINITY : fabs(o[i] - r[i]));
  return e;
}

/* The ISA's output oi against the scalar's orf, both against the double oracle dr. The
 * scalar kernel sums each q.k serially in fp32, so for large logits (|q.k| summands up to a
 * few hundred here) its own rounding reaches ~1.5e-5 of max |out|; the SIMD kernels sum in
 * several lanes and are usually closer to the oracle. So: ISA vs scalar within OUT_TOL, or
 * the ISA at least as close to the oracle as the scalar is; and each kernel within
 * 4 x OUT_TOL of the oracle. */
static void typed_vs_scalar(const float *oi, const float *orf, const double *dr, int32_t nq,
                            int32_t d) {
  const int64_t n = (int64_t)nq * d;
  double mx = 1e-30;
  for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(dr[i]));
  const double ei = dist_to_oracle(oi, dr, n), es = dist_to_oracle(orf, dr, n);
  if (!(es <= 4 * OUT_TOL * mx)) kt_fail("scalar vs double oracle: rel err %.3g", es / mx);
  if (!(ei <= 4 * OUT_TOL * mx)) kt_fail("typed vs double oracle: rel err %.3g", ei / mx);
  if (ei <= es) { /* as close to the oracle as the reference: record the difference only */
    kt_cmp(oi, d, orf, d, nq, d, INFINITY, "typed vs scalar");
    return;
  }
  kt_cmp(oi, d, orf, d, nq, d, OUT_TOL, "typed vs scalar");
}

static int64_t n_bitwise_same; /* typed vs widened fp32 on the ISA: bitwise equal outputs */

/* A lead offset (bytes before element 0) that keeps a row of type ty element-aligned. */
static int typed_lead(int32_t ty, uint64_t h) {
  const int es = (int)rove_dtype_size(ty);
  return es == 1 ? (int)(h % 4) : es * (int)(h % 2);
}

static void typed_rows_case(const rove_kernels *kn, rove_rng *g, int32_t type, int32_t d,
                            int32_t nq, int32_t nk, int64_t idx) {
  const rove_kernels *ref = kt_ref();
  const uint64_t h = rove_rng_u64(g);
  const int32_t nb = rove_q8_blocks(d);
  /* V of K's type (a cache's rows) in half the problems, else another tensor type (the
   * plain API's typed tensors may differ); token strides d or a few elements more */
  static const int32_t others[] = {ROVE_DTYPE_F32, ROVE_DTYPE_BF16, ROVE_DTYPE_F16};
  int32_t vtype = type;
  if ((h >> 12) % 2 && type != ROVE_DTYPE_Q8) {
    vtype = others[(h >> 13) % 3];
    if (vtype == type) vtype = ROVE_DTYPE_F32;
  }
  static const int64_t pads[] = {0, 8, 13};
  trows P = {.nq = nq, .nk = nk, .d = d, .k_type = type, .v_type = vtype,
             .kst = d + pads[(h >> 15) % 3], .vst = d + pads[(h >> 17) % 3],
             .calls = 1 + (int)(h % 2)};
  const int variant = (int)(idx % 3); /* 0 plain, 1 causal mask, 2 softcap */
  P.mask = P.causal = variant == 1;
  P.softcap = variant == 2 ? 20.0f : 0.0f;
  int32_t qp[ROVE_ROWS_MAX], *kp = malloc(sizeof(int32_t) * (size_t)nk);
  assert_non_null(kp);
  for (int32_t j = 0; j < nk; j++) kp[j] = j;
  for (int32_t i = 0; i < nq; i++)
    qp[i] = nk - 1 - (int32_t)((h >> 8) % 3) * i; /* some rows see fewer keys */
  P.qp = qp, P.kp = kp;
  const int klead = typed_lead(type, h >> 4), vlead = typed_lead(vtype, h >> 19),
            mis = (int)((h >> 6) % 16);
  kt_ctx("attn_rows typed K %s V %s d=%d nq=%d nk=%d calls=%d %s strides %lld/%lld lead=%d/%d "
         "mis=%d",
         type_name(type), type_name(vtype), d, nq, nk, P.calls,
         variant == 1   ? "causal"
         : variant == 2 ? "softcap 20"
                        : "plain",
         (long long)P.kst, (long long)P.vst, klead, vlead, mis);
  const float amp = sqrtf(50.0f / sqrtf((float)d));
  float *q = malloc(sizeof(float) * (size_t)nq * d), *kf = malloc(sizeof(float) * (size_t)nk * d);
  float *vf = malloc(sizeof(float) * (size_t)nk * d), *kw = malloc(sizeof(float) * (size_t)nk * d);
  float *vw = malloc(sizeof(float) * (size_t)nk * d);
  assert_true(q && kf && vf && kw && vw);
  rove_rng_fill(g, q, (int64_t)nq * d, -amp, amp);
  rove_rng_fill(g, kf, (int64_t)nk * d, -amp, amp);
  rove_rng_fill(g, vf, (int64_t)nk * d, -3.0f, 3.0f);
  if ((h >> 10) % 2) /* keys of growing size (logits spread out) */
    for (int32_t j = 0; j < nk; j++)
      for (int32_t c = 0; c < d; c++) kf[(int64_t)j * d + c] *= 0.2f + 1.6f * (float)j / (float)nk;
  tbuf K, V;
  rove_guarded ksg, vsg;
  tb_alloc(&K, type, nk, P.kst, d, klead, mis, 0);
  tb_alloc(&V, vtype, nk, P.vst, d, vlead, (mis + 5) % 16, 1);
  float *ksc = kt_alloc(&ksg, (int64_t)nk * nb, (mis + 2) % 16, 0);
  float *vsc = kt_alloc(&vsg, (int64_t)nk * nb, (mis + 9) % 16, 1);
  const int bad = ref->from_f32(K.p, P.kst, ksc, kf, d, nk, d, type) |
                  ref->from_f32(V.p, P.vst, vsc, vf, d, nk, d, vtype);
  if (bad) kt_fail("from_f32 flagged finite K/V");
  ref->to_f32(kw, d, K.p, P.kst, ksc, nk, d, type);
  ref->to_f32(vw, d, V.p, P.vst, vsc, nk, d, vtype);
  P.q = q, P.k = K.p, P.v = V.p;
  P.ks = type == ROVE_DTYPE_Q8 ? ksc : NULL, P.vs = vtype == ROVE_DTYPE_Q8 ? vsc : NULL;
  float orf[ROVE_ROWS_MAX * 128], oi[ROVE_ROWS_MAX * 128], ow[ROVE_ROWS_MAX * 128];
  float lr[ROVE_ROWS_MAX], li[ROVE_ROWS_MAX], lw[ROVE_ROWS_MAX];
  assert_true(d <= 128);
  trows_run(ref, &P, orf, lr);
  trows_run(kn, &P, oi, li);
  double *dr = malloc(sizeof(double) * (size_t)nq * d);
  assert_non_null(dr);
  dref_rows(&P, kw, vw, dr);
  typed_vs_scalar(oi, orf, dr, nq, d);
  free(dr);
  trows_lse_cmp(li, lr, nq, "typed vs scalar");
  /* the ISA over the widened rows as fp32 */
  trows W = P;
  W.k_type = W.v_type = ROVE_DTYPE_F32, W.k = kw, W.v = vw, W.ks = W.vs = NULL;
  W.kst = W.vst = d;
  trows_run(kn, &W, ow, lw);
  trows_cmp(oi, li, ow, lw, nq, d, "typed vs widened fp32");
  n_bitwise_same += !memcmp(oi, ow, sizeof(float) * (size_t)nq * d) &&
                    !memcmp(li, lw, sizeof(float) * (size_t)nq);
  tb_check(&K, "typed K"), tb_check(&V, "typed V");
  kt_check(&ksg, "K scales"), kt_check(&vsg, "V scales");
  tb_free(&K), tb_free(&V), rove_guarded_free(&ksg), rove_guarded_free(&vsg);
  free(q), free(kf), free(vf), free(kw), free(vw), free(kp);
}

static void test_attn_rows_typed(const rove_kernels *kn) {
  worst_lse = 0, n_bitwise_same = 0;
  rove_rng g;
  rove_rng_seed(&g, 7070);
  static const int32_t ds[] = {8, 64, 100, 128}, nks[] = {1, 63, 64, 65, 200},
                       nqs[] = {1, 2, 3, 4, 5, 8, ROVE_ROWS_MAX};
  static const int32_t types[] = {ROVE_DTYPE_BF16, ROVE_DTYPE_F16, ROVE_DTYPE_Q8};
  int64_t idx = 0;
  for (int t = 0; t < 3; t++)
    for (size_t a = 0; a < sizeof ds / sizeof *ds; a++)
      for (size_t b = 0; b < sizeof nqs / sizeof *nqs; b++)
        for (size_t c = 0; c < sizeof nks / sizeof *nks; c++)
          typed_rows_case(kn, &g, types[t], ds[a], nqs[b], nks[c], idx++);
  printf(
      "  %s attn_rows typed: %lld problems, %d failures; max rel err out %.3g, lse %.3g; "
      "typed == widened fp32 bitwise in %lld\n",
      kt_isa(), (long long)idx, kt_failures(), kt_worst(), worst_lse, (long long)n_bitwise_same);
}

/* ---- main ------------------------------------------------------------------------------ */

int main(void) {
  static const kt_test once[] = {{"dtype_defs", test_dtype_defs}};
  static const kt_test per_isa[] = {{"convert", test_convert},
                                    {"to_f32_all", test_to_f32_all},
                                    {"attn_rows_typed", test_attn_rows_typed}};
  const kt_suite s = {
      "ktest_convert", "scalar", per_isa, (int)(sizeof per_isa / sizeof *per_isa), once, 1, 0};
  return kt_main(&s);
}
