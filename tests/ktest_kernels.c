/* SPDX-License-Identifier: MIT */
/* Kernel-table conformance: every SIMD table of the registry against the scalar one, slot
 * by slot, over the sweeps of docs/DESIGN.md §4. The packed-K layout is private to each ISA,
 * so pack_k + attn_tile + finish are compared through a small driver-like attention run with
 * each table's own tile sizes. Every buffer a kernel touches is guarded: canaries around it
 * (under ASan, every other buffer ends where its allocation ends instead, so that reads past
 * it are seen), sentinels in the gaps of strided rows, NaN in rows the contract calls garbage.
 * ISA iteration, skips (exit 77 without a SIMD ISA) and ROVE_KTEST_SELF=1 (scalar against
 * itself): ktest_util.h. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ktest_util.h"
/* ktest_util.h first: cmocka needs its standard headers before it */
#include "kernels/mask.h"

#define ROT_TOL 1e-6 /* rotate / pack: relative to the case's max |expected| */
#define FIN_TOL 2e-6 /* finish output */
#define OUT_TOL 2e-5 /* attention output (relative to max |out|) and LSE (x max(1,|lse|)) */
#define EXP_TOL 4e-7 /* vectorised exp, relative, where exp(x) >= FLT_MIN */

static double worst_lse; /* largest LSE error seen by the current test */

/* LSE within OUT_TOL * max(1, |want|). */
static void lse_cmp(float got, float want, int32_t row) {
  const double e = fabs((double)got - (double)want) / fmax(1.0, fabs((double)want));
  worst_lse = fmax(worst_lse, isnan(e) ? INFINITY : e);
  if (!(e <= OUT_TOL)) kt_fail("lse row %d: got %.9g want %.9g", row, got, want);
}

/* ---- rotation tables, built in double like the library -------------------------------- */

static void rope_tables(float *c, float *s, const int32_t *pos, int64_t n, int32_t half) {
  const double two_pi = 6.283185307179586476925286766559;
  for (int64_t i = 0; i < n; i++)
    for (int32_t k = 0; k < half; k++) {
      const double t = fmod((double)pos[i] * pow(10000.0, -(double)k / half), two_pi);
      c[i * half + k] = (float)cos(t);
      s[i * half + k] = (float)sin(t);
    }
}

typedef struct {
  int32_t *pos;
  float *c, *s;
  int32_t half;
} table;

static void table_make(table *t, const int32_t *pos, int64_t n, int32_t half) {
  t->half = half;
  t->pos = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
  t->c = malloc(sizeof(float) * (size_t)(n * half + 1));
  t->s = malloc(sizeof(float) * (size_t)(n * half + 1));
  assert_true(t->pos && t->c && t->s);
  memcpy(t->pos, pos, sizeof(int32_t) * (size_t)n);
  rope_tables(t->c, t->s, pos, n, half);
}

static void table_free(table *t) {
  free(t->pos);
  free(t->c);
  free(t->s);
}

/* rot of rows [row0, ...) of a table, rotated block from dim first (rove_rot.first: 0 for
 * ROVE_ROTARY_FIRST, d - r for ROVE_ROTARY_LAST); on == 0: no rotation. */
static rove_rot rot_at(const table *t, int64_t row0, int on, int32_t pairing, int32_t first) {
  rove_rot r = {NULL, NULL, t->half, pairing, 0, first, (int32_t)(t->half % 2)};
  if (on) r.cos = t->c + row0 * t->half, r.sin = t->s + row0 * t->half;
  return r;
}

/* ---- the tables ---------------------------------------------------------------------- */

/* Every table compiled into this build (runnable here or not): registered under its own
 * ISA, every slot filled, sane tile sizes; rove_kernels_for gives it exactly when the CPU
 * can run it. */
static void test_tables(const rove_kernels *unused) {
  (void)unused;
  int n = 0;
  for (int i = ROVE_ISA_SCALAR; i < ROVE_ISA_COUNT; i++) {
    const rove_isa_desc *d = rove_isa_desc_of((rove_isa)i);
    assert_non_null(d);
    assert_int_equal(d->isa, i);
    assert_string_equal(d->name, rove_isa_name((rove_isa)i));
    const rove_kernels *k = d->kern;
    assert_true(rove_kernels_for((rove_isa)i) == NULL || rove_kernels_for((rove_isa)i) == k);
    assert_int_equal(rove_kernels_for((rove_isa)i) != NULL, rove_isa_available((rove_isa)i));
    if (!k) continue;
    kt_ctx("table %s", d->name);
    if (k->isa != d->isa) kt_fail("isa field %d", (int)k->isa);
    /* packed tiles and scratch stay 64-byte aligned when both are multiples of 16 */
    if (!(k->tile_q >= 16 && k->tile_q <= 1024 && k->tile_q % 16 == 0 && k->tile_kv >= 16 &&
          k->tile_kv <= 1024 && k->tile_kv % 16 == 0))
      kt_fail("tile sizes %d x %d", k->tile_q, k->tile_kv);
    const struct {
      const char *name;
      int set;
    } slots[] = {{"rotate", k->rotate != NULL},
                 {"pack_k", k->pack_k != NULL},
                 {"attn_tile", k->attn_tile != NULL},
                 {"attn_rows", k->attn_rows != NULL},
                 {"exp", k->exp != NULL},
                 {"to_f32", k->to_f32 != NULL},
                 {"from_f32", k->from_f32 != NULL},
                 {"angle_accum", k->angle_accum != NULL},
                 {"sincos", k->sincos != NULL},
                 {"pair_grads", k->pair_grads != NULL},
                 {"phase_dots", k->phase_dots != NULL},
                 {"gla.chunk", k->gla.chunk != NULL},
                 {"gla.steps", k->gla.steps != NULL},
                 {"gla.bwd_dg", k->gla.bwd_dg != NULL}};
    for (size_t j = 0; j < sizeof slots / sizeof *slots; j++)
      if (!slots[j].set) kt_fail("slot %s is NULL", slots[j].name);
    /* kernels.h: pack_k, attn_tile and tile_kv change together (the packed-K layout) */
    const rove_kernels *ref = kt_ref();
    if ((k->pack_k == ref->pack_k) != (k->attn_tile == ref->attn_tile) ||
        (k->pack_k == ref->pack_k && k->tile_kv != ref->tile_kv))
      kt_fail("pack_k, attn_tile and tile_kv are not from one ISA");
    n++;
  }
  printf("  %d tables compiled in, %d failures\n", n, kt_failures());
}

/* The table under test: what it accelerates (its own slots). */
static void test_table(const rove_kernels *kn) {
  const rove_kernels *ref = kt_ref();
  printf("  %s: tile_q %d tile_kv %d; own slots:%s%s%s%s%s%s%s%s%s\n", kt_isa(), kn->tile_q,
         kn->tile_kv, kn->rotate != ref->rotate ? " rotate" : "",
         kn->pack_k != ref->pack_k ? " pack_k" : "",
         kn->attn_tile != ref->attn_tile ? " attn_tile" : "",
         kn->attn_rows != ref->attn_rows ? " attn_rows" : "", kn->exp != ref->exp ? " exp" : "",
         kn->angle_accum != ref->angle_accum ? " angle_accum" : "",
         kn->sincos != ref->sincos ? " sincos" : "",
         kn->gla.chunk != ref->gla.chunk ? " gla.chunk" : "",
         kn->gla.steps != ref->gla.steps ? " gla.steps" : "");
}

/* ---- rotate --------------------------------------------------------------------------- */

typedef struct {
  int32_t d, r, pairing, inverse, nullrot, n, first;
  int64_t ss, ds;
  int inplace, mis_s, mis_d, post;
  int32_t pos0;
  float rot_mul, pass_mul;
} rcase;

static void rotate_case(const rove_kernels *kn, rove_rng *rng, const rcase *c) {
  const rove_kernels *ref = kt_ref();
  kt_ctx("rotate d=%d r=%d first=%d %s inv=%d %s n=%d ss=%lld ds=%lld%s mis=%d/%d pos0=%d "
         "mul=%g/%g",
         c->d, c->r, c->first, c->pairing ? "interleaved" : "half", c->inverse,
         c->nullrot ? "cos=NULL" : "rot", c->n, (long long)c->ss, (long long)c->ds,
         c->inplace ? " in-place" : "", c->mis_s, c->mis_d, c->pos0, c->rot_mul, c->pass_mul);
  const int32_t half = c->r / 2, n = c->n, d = c->d;
  int32_t pos[17];
  for (int32_t i = 0; i < n; i++) pos[i] = c->pos0 + i * (1 + (int32_t)(rove_rng_u64(rng) % 3));
  table t;
  table_make(&t, pos, n, half);
  rove_rot rot = rot_at(&t, 0, !c->nullrot, c->pairing, c->first);
  rove_guarded s_ref, s_isa, d_ref, d_isa;
  float *sr = kt_rows_alloc(&s_ref, n, c->ss, d, 0, 1);
  float *si = kt_rows_alloc(&s_isa, n, c->ss, d, c->mis_s, c->post || c->inplace);
  kt_rows_fill(rng, sr, n, c->ss, d, 2.0f);
  memcpy(si, sr, sizeof(float) * (size_t)s_ref.n);
  if (c->inplace) {
    ref->rotate(sr, c->ss, sr, c->ss, n, d, &rot, c->rot_mul, c->pass_mul, c->inverse);
    kn->rotate(si, c->ss, si, c->ss, n, d, &rot, c->rot_mul, c->pass_mul, c->inverse);
    kt_cmp(si, c->ss, sr, c->ss, n, d, ROT_TOL, "in place");
    kt_gaps_check(si, n, c->ss, d, "in place");
  } else {
    float *dr = kt_rows_alloc(&d_ref, n, c->ds, d, 0, 1);
    float *di = kt_rows_alloc(&d_isa, n, c->ds, d, c->mis_d, c->post);
    ref->rotate(dr, c->ds, sr, c->ss, n, d, &rot, c->rot_mul, c->pass_mul, c->inverse);
    kn->rotate(di, c->ds, si, c->ss, n, d, &rot, c->rot_mul, c->pass_mul, c->inverse);
    kt_cmp(di, c->ds, dr, c->ds, n, d, ROT_TOL, "dst");
    kt_gaps_check(di, n, c->ds, d, "dst");
    if (memcmp(si, sr, sizeof(float) * (size_t)s_ref.n) != 0) kt_fail("src was modified");
    kt_check(&d_isa, "dst");
    rove_guarded_free(&d_ref);
    rove_guarded_free(&d_isa);
  }
  kt_check(&s_isa, c->inplace ? "dst=src" : "src");
  rove_guarded_free(&s_ref);
  rove_guarded_free(&s_isa);
  table_free(&t);
}

static const int32_t rot_dims[] = {2, 4, 8, 16, 30, 32, 64, 80, 96, 128, 130, 256};
static const int32_t positions[] = {0, (1 << 20) - 7, (1 << 20) + 3, -5, -(1 << 20) - 1, -123457};

static void test_rotate(const rove_kernels *kn) {
  rove_rng rng;
  rove_rng_seed(&rng, 101);
  static const int32_t ns[] = {1, 3, 17};
  static const float muls[][2] = {
      {1.0f, 1.0f}, {0.125f, 0.125f}, {1.7f, 0.9f}, {0.08838835f, 0.0625f}};
  int64_t count = 0;
  for (size_t di = 0; di < sizeof rot_dims / sizeof *rot_dims; di++) {
    const int32_t d = rot_dims[di];
    /* r = d, r = 2, r about 3d/4 and r = d - 2 (even); half odd or even */
    int32_t rs[4] = {d, 2, (3 * d / 4) & ~1, d - 2}, nr = 0;
    for (int i = 0; i < 4; i++) {
      int dup = rs[i] < 2;
      for (int j = 0; j < nr; j++) dup |= rs[j] == rs[i];
      if (!dup) rs[nr++] = rs[i];
    }
    for (int32_t ri = 0; ri < nr; ri++) {
      /* the rotated block at dim 0 (FIRST), at d - r (LAST) and in between (r < d only) */
      const int32_t r = rs[ri], firsts[3] = {0, d - r, (d - r) / 2}, nf = r < d ? 3 : 1;
      for (int32_t fi = 0; fi < nf; fi++)
        for (int32_t pairing = 0; pairing < 2; pairing++)
          for (int32_t inverse = 0; inverse < 2; inverse++)
            for (size_t ni = 0; ni < 3; ni++, count++) {
              const uint64_t h = rove_rng_u64(&rng); /* independent bit fields per case */
              rcase c = {.d = d, .r = r, .pairing = pairing, .inverse = inverse, .n = ns[ni]};
              c.first = firsts[fi];
              c.nullrot = h % 7 == 0;
              c.inplace = (h >> 3) % 3 == 0;
              c.ss = d + ((h >> 5) % 2 ? 0 : 1 + (int64_t)((h >> 6) % 9));
              c.ds = c.inplace ? c.ss : d + ((h >> 10) % 2 ? 0 : 1 + (int64_t)((h >> 11) % 7));
              c.mis_s = (int)((h >> 14) % 16);
              c.mis_d = (h >> 18) % 4 == 0 ? 0 : (int)((h >> 20) % 16);
              c.post = (int)((h >> 24) % 2);
              c.pos0 = positions[(h >> 25) % (sizeof positions / sizeof *positions)];
              c.rot_mul = muls[(h >> 28) % 4][0];
              c.pass_mul = muls[(h >> 28) % 4][1];
              rotate_case(kn, &rng, &c);
            }
    }
  }
  printf("  %s rotate: %lld cases, %d failures; max rel err %.3g\n", kt_isa(), (long long)count,
         kt_failures(), kt_worst());
}

/* ---- rotated-block placement against the contract, in double ------------------------- */

/* Every table, the scalar one included (the reference of the comparisons above is itself
 * checked here): rove_rot.first places the rotated block, kernels.h. Pair k of HALF is
 * (first + k, first + k + half), of INTERLEAVED (first + 2k, first + 2k + 1); every dim
 * outside [first, first + r) is pass_mul * x. Evaluated in double from the same float
 * cos / sin, for rotate (forward and inverse) and pack_k (through the scalar layout only:
 * SIMD layouts are private, and are compared with scalar by test_attention). */
static void place_case(const rove_kernels *kn, rove_rng *g, int32_t d, int32_t r, int32_t first,
                       int32_t pairing, int inverse) {
  const int32_t half = r / 2, n = 5;
  kt_ctx("placement d=%d r=%d first=%d %s inv=%d", d, r, first, pairing ? "interleaved" : "half",
         inverse);
  int32_t pos[5] = {0, 1, 17, -3000, (1 << 20) + 1};
  table t;
  table_make(&t, pos, n, half);
  const rove_rot rot = rot_at(&t, 0, 1, pairing, first);
  float *x = malloc(sizeof(float) * (size_t)(n * d)), *y = malloc(sizeof(float) * (size_t)(n * d));
  assert_true(x && y);
  rove_rng_fill(g, x, n * d, -2.0f, 2.0f);
  const float rm = 0.75f, pm = 1.25f;
  kn->rotate(y, d, x, d, n, d, &rot, rm, pm, inverse);
  double worst = 0.0;
  for (int32_t i = 0; i < n; i++) {
    const float *xi = x + (int64_t)i * d, *yi = y + (int64_t)i * d;
    for (int32_t c = 0; c < d; c++) { /* pass-through dims */
      if (c >= first && c < first + r) continue;
      if (yi[c] != xi[c] * pm) kt_fail("row %d dim %d (pass-through): %g, want %g", i, c, yi[c], xi[c] * pm);
    }
    for (int32_t k = 0; k < half; k++) {
      const int32_t ia = first + (pairing == ROVE_PAIRING_HALF ? k : 2 * k);
      const int32_t ib = ia + (pairing == ROVE_PAIRING_HALF ? half : 1);
      const double cs = (double)t.c[i * half + k] * rm,
                   sn = (double)t.s[i * half + k] * rm * (inverse ? -1.0 : 1.0);
      const double a = xi[ia], b = xi[ib];
      const double ea = a * cs - b * sn, eb = a * sn + b * cs;
      worst = fmax(worst, fmax(fabs(yi[ia] - ea), fabs(yi[ib] - eb)));
    }
  }
  if (!(worst <= 4e-7 * 2.0 * 2.0)) kt_fail("rotated dims: max abs err %.3g", worst);
  free(x), free(y);
  table_free(&t);
}

static void test_rotate_place(const rove_kernels *kn) {
  const rove_kernels *const tabs[2] = {kn, kt_ref()};
  rove_rng g;
  rove_rng_seed(&g, 707);
  int64_t count = 0;
  for (int ti = 0; ti < 2; ti++)
    for (size_t di = 0; di < sizeof rot_dims / sizeof *rot_dims; di++) {
      const int32_t d = rot_dims[di], rs[3] = {d, 2, (d / 2) & ~1};
      for (int ri = 0; ri < 3; ri++) {
        if (rs[ri] < 2) continue;
        const int32_t firsts[3] = {0, d - rs[ri], (d - rs[ri]) / 2};
        for (int fi = 0; fi < 3; fi++)
          for (int32_t pairing = 0; pairing < 2; pairing++)
            for (int inverse = 0; inverse < 2; inverse++, count++)
              place_case(tabs[ti], &g, d, rs[ri], firsts[fi], pairing, inverse);
      }
    }
  printf("  %s and scalar rotated-block placement: %lld cases, %d failures\n", kt_isa(),
         (long long)count, kt_failures());
}

/* ---- pack_k + attn_tile (+ rotate of Q/V and finish): a small attention -------------- */

typedef struct {
  int32_t nq, kv, d, pairing, first; /* first: the rotated block's first dim (rove_rot) */
  table qt, kt; /* query / key positions and their rotation tables */
  int rot_qk, rot_v, rot_o;
  const float *q, *k, *v; /* raw rows at strides qs, ks, vs */
  int64_t qs, ks, vs, os;
  int masked, causal, always_mask, chunk, want_lse, post;
  int32_t window;
  float softcap, q_rot_mul, q_pass_mul, k_mul;
} tprob;

/* Whether (query tile, key tile) has none (0), all (1) or some (2) pairs visible. */
static int tile_class(const tprob *P, int64_t i0, int32_t nq, int64_t j0, int32_t nk) {
  int any = 0, all = 1;
  for (int32_t i = 0; i < nq; i++)
    for (int32_t j = 0; j < nk; j++) {
      const int v = rove_visible(P->qt.pos[i0 + i], P->kt.pos[j0 + j], P->causal, P->window);
      any |= v;
      all &= v;
    }
  return all ? 1 : any ? 2 : 0;
}

/* What the driver does for one head with table kn: pack K (in chunks of whole tiles),
 * rotate V, then per query tile: rotate Q, attn_tile over the key tiles, finish. */
static void run_attention(const rove_kernels *kn, const tprob *P, float *out, float *lse) {
  const int32_t d = P->d, tq = kn->tile_q, tk = kn->tile_kv;
  const int64_t kv_pad = (P->kv + tk - 1) / tk * tk;
  rove_guarded kb, vb, qb, ob, mb, lb, sb;
  float *kp = kt_alloc(&kb, kv_pad * d, 0, P->post), *vp = kt_alloc(&vb, kv_pad * d, 0, P->post);
  rove_fill_bits(kp, kb.n, 0x7FC00001u); /* NaN: pack_k must zero the padding itself */
  rove_fill_bits(vp, vb.n, 0x7FC00002u);
  for (int64_t j0 = 0; j0 < P->kv; j0 += (int64_t)P->chunk * tk) {
    const int64_t nj = P->kv - j0 < (int64_t)P->chunk * tk ? P->kv - j0 : (int64_t)P->chunk * tk;
    rove_rot rk = rot_at(&P->kt, j0, P->rot_qk, P->pairing, P->first);
    rove_rot rv = rot_at(&P->kt, j0, P->rot_v, P->pairing, P->first);
    kn->pack_k(kp + j0 * d, P->k + j0 * P->ks, P->ks, nj, d, &rk, P->k_mul);
    kn->rotate(vp + j0 * d, d, P->v + j0 * P->vs, P->vs, nj, d, &rv, 1.0f, 1.0f, 0);
  }
  memset(vp + (int64_t)P->kv * d, 0, sizeof(float) * (size_t)((kv_pad - P->kv) * d));
  float *q = kt_alloc(&qb, (int64_t)tq * d, 0, P->post), *o = kt_alloc(&ob, (int64_t)tq * d, 0, 1);
  float *m = kt_alloc(&mb, tq, 0, 1), *l = kt_alloc(&lb, tq, 0, 1);
  float *s = kt_alloc(&sb, (int64_t)tq * tk, 0, 1);
  for (int64_t i0 = 0; i0 < P->nq; i0 += tq) {
    const int32_t nq = (int32_t)(P->nq - i0 < tq ? P->nq - i0 : tq);
    rove_fill_bits(q, qb.n, 0x7FC00003u); /* rows past nq are garbage */
    rove_fill_bits(o, ob.n, 0x7FC00004u);
    rove_fill_bits(m, tq, 0x7FC00005u);
    rove_fill_bits(l, tq, 0x7FC00006u);
    rove_fill_bits(s, sb.n, 0x7FC00007u);
    rove_rot rq = rot_at(&P->qt, i0, P->rot_qk, P->pairing, P->first);
    kn->rotate(q, d, P->q + i0 * P->qs, P->qs, nq, d, &rq, P->q_rot_mul, P->q_pass_mul, 0);
    memset(o, 0, sizeof(float) * (size_t)nq * (size_t)d);
    for (int32_t i = 0; i < nq; i++) m[i] = -INFINITY, l[i] = 0.0f;
    rove_tile_args t = {.q = q, .nq = nq, .d = d, .q_pos = P->qt.pos + i0, .o = o, .m = m};
    t.causal = P->causal, t.window = P->window, t.softcap = P->softcap, t.l = l, t.scratch = s;
    for (int64_t j0 = 0; j0 < P->kv; j0 += tk) {
      t.nk = (int32_t)(P->kv - j0 < tk ? P->kv - j0 : tk);
      const int c = P->masked ? tile_class(P, i0, nq, j0, t.nk) : 1;
      if (c == 0 && !P->always_mask) continue;
      t.mask = P->always_mask || c == 2;
      t.k = kp + j0 * d;
      t.v = vp + j0 * d;
      t.k_pos = P->kt.pos + j0;
      kn->attn_tile(&t);
    }
    rove_rot ro = rot_at(&P->qt, i0, P->rot_o, P->pairing, P->first);
    rove_finish_f32(kn, out + i0 * P->os, P->os, lse ? lse + i0 : NULL, o, m, l, nq, d, &ro, NULL);
  }
  kt_check(&kb, "packed K");
  kt_check(&vb, "packed V");
  kt_check(&qb, "packed Q");
  kt_check(&ob, "o acc");
  kt_check(&mb, "m acc");
  kt_check(&lb, "l acc");
  kt_check(&sb, "scratch");
  rove_guarded_free(&kb), rove_guarded_free(&vb), rove_guarded_free(&qb), rove_guarded_free(&ob),
      rove_guarded_free(&mb), rove_guarded_free(&lb), rove_guarded_free(&sb);
}

enum { N_MODES = 8 };
static const char *const mode_names[N_MODES] = {"full",
                                                "full+softcap",
                                                "causal(bottom-right)",
                                                "causal+window+softcap",
                                                "window(2-sided)",
                                                "causal(top-left)",
                                                "causal random pos",
                                                "int32 extremes"};
static const int32_t bases[] = {0, (1 << 20) - 37, -(1 << 20) + 5, -3000, 1 << 20};

/* Positions and mask for mode `mode` (qpos [nq], kpos [kv]). */
static void make_positions(tprob *P, rove_rng *g, int mode, int32_t B, int32_t *qp, int32_t *kp) {
  const int32_t nq = P->nq, kv = P->kv;
  P->masked = mode >= 2;
  P->causal = mode == 2 || mode == 3 || mode == 5 || mode == 6;
  P->window = 0;
  P->softcap = mode == 1 ? 20.0f : mode == 3 ? 30.0f : 0.0f;
  for (int32_t j = 0; j < kv; j++) kp[j] = B + j;
  for (int32_t i = 0; i < nq; i++) qp[i] = B + kv - nq + i; /* bottom-right: kv < nq masks rows */
  const uint64_t r = rove_rng_u64(g);
  switch (mode) {
    case 3: P->window = 1 + (int32_t)(r % 40); break;
    case 4:
      P->window = 1 + (int32_t)(r % 24);
      for (int32_t i = 0; i < nq; i++)
        qp[i] = i % 5 == 4 ? B - 100000 : B + (int32_t)(rove_rng_u64(g) % (uint64_t)kv);
      break;
    case 5:
      for (int32_t i = 0; i < nq; i++) qp[i] = B + i;
      break;
    case 6:
      P->window = r % 2 ? 0 : 3 + (int32_t)(r % 50);
      for (int32_t j = 0; j < kv; j++) kp[j] = B + (int32_t)(rove_rng_u64(g) % (uint64_t)(2 * kv));
      for (int32_t i = 0; i < nq; i++)
        qp[i] = B - 5 + (int32_t)(rove_rng_u64(g) % (uint64_t)(2 * kv + 10));
      break;
    case 7: /* int64 differences: a wrapped int32 subtraction shows here */
      P->causal = (int)(r % 2);
      P->window = 64;
      for (int32_t j = 0; j < kv; j++)
        kp[j] = rove_rng_u64(g) % 2 ? INT32_MAX - (int32_t)(rove_rng_u64(g) % 100)
                                    : INT32_MIN + (int32_t)(rove_rng_u64(g) % 100);
      for (int32_t i = 0; i < nq; i++)
        qp[i] = i % 2 ? INT32_MAX - (int32_t)(rove_rng_u64(g) % 100)
                      : INT32_MIN + (int32_t)(rove_rng_u64(g) % 100);
      break;
    default: break;
  }
}

static float lse_lo, lse_hi; /* range of the finite LSEs (>= the largest logit of a row) */

/* One problem through the table under test and the scalar one. */
static void tile_case(const rove_kernels *kn, rove_rng *g, int32_t d, int32_t nq, int32_t kv,
                      int64_t idx) {
  const rove_kernels *ref = kt_ref();
  /* mode, pairing and base in turn; everything else from independent random bits */
  const int mode = (int)(idx % N_MODES);
  const int32_t B = bases[(idx / (2 * N_MODES)) % (sizeof bases / sizeof *bases)];
  const uint64_t h = rove_rng_u64(g);
  tprob P = {.nq = nq, .kv = kv, .d = d, .pairing = (int32_t)((idx / N_MODES) % 2)};
  const int32_t r = h % 3 == 0 && d > 2 ? (d / 2) & ~1 : d; /* partial rotary dim */
  P.first = (h >> 19) % 2 ? d - r : 0; /* ROVE_ROTARY_LAST or FIRST */
  int32_t *qp = malloc(sizeof(int32_t) * (size_t)nq), *kp = malloc(sizeof(int32_t) * (size_t)kv);
  make_positions(&P, g, mode, B, qp, kp);
  table_make(&P.qt, qp, nq, r / 2);
  table_make(&P.kt, kp, kv, r / 2);
  P.always_mask = P.masked && (h >> 2) % 2;
  P.rot_qk = (h >> 3) % 5 != 0, P.rot_v = (h >> 6) % 4 != 0, P.rot_o = (h >> 8) % 4 != 0;
  P.chunk = 1 + (int)((h >> 10) % 3);
  P.want_lse = (h >> 12) % 4 != 0;
  P.post = (int)((h >> 14) % 2);
  P.q_rot_mul = 0.8f, P.q_pass_mul = 0.7f, P.k_mul = 1.1f;
  P.qs = 2 * d, P.ks = d + 3, P.vs = d + (int64_t)((h >> 15) % 2);
  P.os = d + ((h >> 16) % 3 ? 0 : 5);
  /* amplitudes: logits of std ~12 (spanning about +-30); half the problems ramp the keys
   * up so that the running max keeps moving and the rescaling is exercised */
  const float amp = sqrtf(50.0f / sqrtf((float)d));
  const int ramp = (int)((h >> 18) % 2);
  rove_guarded qg, kg, vg;
  float *q = kt_rows_alloc(&qg, nq, P.qs, d, 1, 0), *k = kt_rows_alloc(&kg, kv, P.ks, d, 2, 0);
  float *v = kt_rows_alloc(&vg, kv, P.vs, d, 3, 0);
  for (int32_t i = 0; i < nq; i++)
    kt_rows_fill(g, q + i * P.qs, 1, P.qs, d, amp * rove_rng_uniform(g, 0.5f, 1.5f));
  for (int32_t j = 0; j < kv; j++)
    kt_rows_fill(
        g, k + j * P.ks, 1, P.ks, d,
        amp * (ramp ? 0.2f + 1.6f * (float)j / (float)kv : rove_rng_uniform(g, 0.3f, 1.3f)));
  kt_rows_fill(g, v, kv, P.vs, d, 3.0f);
  P.q = q, P.k = k, P.v = v;
  kt_ctx(
      "attention d=%d r=%d first=%d %s nq=%d kv=%d mode=%s base=%d window=%d softcap=%g%s rot "
      "qk/v/o=%d/%d/%d chunk=%d",
      d, r, P.first, P.pairing ? "interleaved" : "half", nq, kv, mode_names[mode], B, P.window, P.softcap,
      P.always_mask ? " mask-all-tiles" : "", P.rot_qk, P.rot_v, P.rot_o, P.chunk);
  rove_guarded o_ref, o_isa, l_ref, l_isa;
  float *out_r = kt_rows_alloc(&o_ref, nq, P.os, d, 0, 1),
        *out_i = kt_rows_alloc(&o_isa, nq, P.os, d, 5, P.post);
  float *lse_r = kt_alloc(&l_ref, nq, 0, 1), *lse_i = kt_alloc(&l_isa, nq, 7, P.post);
  run_attention(ref, &P, out_r, P.want_lse ? lse_r : NULL);
  run_attention(kn, &P, out_i, P.want_lse ? lse_i : NULL);
  kt_cmp(out_i, P.os, out_r, P.os, nq, d, OUT_TOL, "out");
  kt_gaps_check(out_i, nq, P.os, d, "out");
  kt_check(&o_isa, "out");
  kt_check(&l_isa, "lse");
  for (int32_t i = 0; i < nq; i++) {
    int vis = !P.masked;
    for (int32_t j = 0; j < kv && !vis; j++) vis = rove_visible(qp[i], kp[j], P.causal, P.window);
    if (!vis) { /* fully masked row: exactly 0 and -inf, from both tables */
      for (int32_t c = 0; c < d; c++)
        if (out_i[i * P.os + c] != 0.0f || out_r[i * P.os + c] != 0.0f)
          kt_fail("fully masked row %d col %d: got %g, scalar %g, want 0", i, c,
                  out_i[i * P.os + c], out_r[i * P.os + c]);
      if (P.want_lse && (lse_i[i] != -INFINITY || lse_r[i] != -INFINITY))
        kt_fail("fully masked row %d: lse %g, scalar %g, want -inf", i, lse_i[i], lse_r[i]);
    } else if (P.want_lse) {
      lse_cmp(lse_i[i], lse_r[i], i);
      lse_lo = fminf(lse_lo, lse_r[i]), lse_hi = fmaxf(lse_hi, lse_r[i]);
    }
  }
  rove_guarded_free(&o_ref), rove_guarded_free(&o_isa), rove_guarded_free(&l_ref),
      rove_guarded_free(&l_isa);
  rove_guarded_free(&qg), rove_guarded_free(&kg), rove_guarded_free(&vg);
  table_free(&P.qt), table_free(&P.kt);
  free(qp), free(kp);
}

static void test_attention(const rove_kernels *kn) {
  worst_lse = 0;
  rove_rng g;
  rove_rng_seed(&g, 202);
  lse_lo = INFINITY, lse_hi = -INFINITY;
  static const int32_t ds[] = {2, 32, 64, 80, 96, 128, 256};
  static const int32_t kvs[] = {1, 7, 15, 16, 17, 63, 64, 65, 200};
  const int32_t nqs[] = {1, 7, 8, 9, 15, 16, 17, kn->tile_q, kn->tile_q + 1};
  int64_t idx = 0; /* consecutive problems cycle through the masks, bases and layouts */
  for (int rep = 0; rep < 3; rep++)
    for (size_t a = 0; a < sizeof ds / sizeof *ds; a++)
      for (size_t b = 0; b < sizeof nqs / sizeof *nqs; b++)
        for (size_t c = 0; c < sizeof kvs / sizeof *kvs; c++)
          tile_case(kn, &g, ds[a], nqs[b], kvs[c], idx++);
  printf(
      "  %s attention: %lld problems, %d failures; max rel err out %.3g, lse %.3g; "
      "LSE range [%.1f, %.1f]\n",
      kt_isa(), (long long)idx, kt_failures(), kt_worst(), worst_lse, lse_lo, lse_hi);
}

/* ---- finish --------------------------------------------------------------------------- */

static void finish_case(const rove_kernels *kn, rove_rng *g, int32_t d, int32_t nq, int64_t idx) {
  const rove_kernels *ref = kt_ref();
  const uint64_t h = rove_rng_u64(g); /* independent bit fields */
  const int32_t pairing = (int32_t)(idx % 2), r = h % 3 == 0 && d > 2 ? (3 * d / 4) & ~1 : d;
  const int rot = (h >> 2) % 4 != 0, want_lse = (idx / 2) % 2, post = (int)((h >> 4) % 2);
  const int64_t os = (h >> 5) % 3 == 0 ? d : d + 1 + (int64_t)((h >> 7) % 7);
  const int mis_o = (int)((h >> 10) % 16), mis_l = (int)((h >> 14) % 5);
  const int32_t first = (h >> 22) % 2 ? d - r : 0; /* ROVE_ROTARY_LAST or FIRST */
  kt_ctx("finish d=%d r=%d first=%d %s nq=%d rot=%d lse=%d os=%lld", d, r, first,
         pairing ? "interleaved" : "half", nq, rot, want_lse, (long long)os);
  int32_t pos[40];
  for (int32_t i = 0; i < nq; i++) pos[i] = positions[(h >> 17) % 6] + 2 * i;
  table t;
  table_make(&t, pos, nq, r / 2);
  rove_guarded og, mg, lg, outr, outi, lser, lsei;
  float *o = kt_alloc(&og, (int64_t)nq * d, 1, 0), *m = kt_alloc(&mg, nq, 2, 0),
        *l = kt_alloc(&lg, nq, 3, 0);
  for (int32_t i = 0; i < nq; i++) {
    const int empty = i % 4 == 3 || (nq == 1 && (h >> 20) % 3 == 0); /* l == 0 */
    m[i] = empty ? -INFINITY : rove_rng_uniform(g, -30.0f, 30.0f);
    l[i] = empty ? 0.0f : rove_rng_uniform(g, 1.0f, 500.0f);
    rove_rng_fill(g, o + (int64_t)i * d, d, -3.0f * l[i], 3.0f * l[i]);
  }
  float *yr = kt_rows_alloc(&outr, nq, os, d, 0, 1),
        *yi = kt_rows_alloc(&outi, nq, os, d, mis_o, post);
  float *lr = kt_alloc(&lser, nq, 0, 1), *li = kt_alloc(&lsei, nq, mis_l, post);
  rove_rot ro = rot_at(&t, 0, rot, pairing, first);
  rove_finish_f32(ref, yr, os, want_lse ? lr : NULL, o, m, l, nq, d, &ro, NULL);
  rove_finish_f32(kn, yi, os, want_lse ? li : NULL, o, m, l, nq, d, &ro, NULL);
  kt_cmp(yi, os, yr, os, nq, d, FIN_TOL, "out");
  kt_gaps_check(yi, nq, os, d, "out");
  for (int32_t i = 0; i < nq; i++) {
    if (l[i] == 0.0f) {
      for (int32_t c = 0; c < d; c++)
        if (yi[i * os + c] != 0.0f)
          kt_fail("row %d has l = 0: out[%d] = %g, want 0", i, c, yi[i * os + c]);
      if (want_lse && li[i] != -INFINITY) kt_fail("row %d has l = 0: lse %g, want -inf", i, li[i]);
    } else if (want_lse) {
      lse_cmp(li[i], lr[i], i);
    }
  }
  if (!want_lse)
    for (int32_t i = 0; i < nq; i++)
      if (!rove_has_bits(li + i, ROVE_GUARD_CANARY)) kt_fail("lse == NULL but lse buffer written");
  kt_check(&outi, "out");
  kt_check(&lsei, "lse");
  rove_guarded_free(&og), rove_guarded_free(&mg), rove_guarded_free(&lg), rove_guarded_free(&outr),
      rove_guarded_free(&outi), rove_guarded_free(&lser), rove_guarded_free(&lsei);
  table_free(&t);
}

static void test_finish(const rove_kernels *kn) {
  worst_lse = 0;
  rove_rng g;
  rove_rng_seed(&g, 303);
  static const int32_t nqs[] = {1, 3, 7, 8, 9, 16, 17, 33};
  int64_t idx = 0;
  for (size_t a = 0; a < sizeof rot_dims / sizeof *rot_dims; a++)
    for (size_t b = 0; b < sizeof nqs / sizeof *nqs; b++)
      for (int rep = 0; rep < 4; rep++) finish_case(kn, &g, rot_dims[a], nqs[b], idx++);
  printf("  %s finish: %lld cases, %d failures; max rel err out %.3g, lse %.3g\n", kt_isa(),
         (long long)idx, kt_failures(), kt_worst(), worst_lse);
}

/* ---- attn_rows: a few query rows against K/V read in place ------------------------------ */

typedef struct {
  int32_t nq, nk, d, calls; /* calls: the keys go in this many consecutive calls (1..3) */
  int32_t paced;            /* rove_rows_args.paced (prefetch only: never a result) */
  int64_t ks, vs;
  const float *q, *k, *v;
  tprob pos;                   /* positions, mask mode, softcap (make_positions) */
  const rove_rot *krot, *vrot; /* NULL, or rotation tables of the nk keys (row j: key j) */
  float k_mul;
} rprob;

/* Rotation tables [n][heads][half] for positions pos (each head's angles offset by a
 * head-dependent amount, as explicit per-(token, head) angles would be). */
typedef struct {
  float *c, *s;
} rwide_table;

static void rwide_make(rwide_table *t, const int32_t *pos, int64_t n, int32_t half, int heads) {
  t->c = malloc(sizeof(float) * (size_t)(n * heads * half + 1));
  t->s = malloc(sizeof(float) * (size_t)(n * heads * half + 1));
  assert_true(t->c && t->s);
  for (int64_t i = 0; i < n; i++)
    for (int hh = 0; hh < heads; hh++)
      for (int32_t k = 0; k < half; k++) {
        const double a =
            fmod((double)pos[i] * pow(10000.0, -(double)k / half) + 0.7 * hh, 6.283185307179586);
        t->c[(i * heads + hh) * half + k] = (float)cos(a);
        t->s[(i * heads + hh) * half + k] = (float)sin(a);
      }
}

/* Visibility class of all rows against keys [j0, j1): 0 none, 1 all, 2 mixed. */
static int rows_class(const rprob *P, int64_t j0, int64_t j1) {
  int any = 0, all = 1;
  for (int32_t i = 0; i < P->nq; i++)
    for (int64_t j = j0; j < j1; j++) {
      const int v = rove_visible(P->pos.qt.pos[i], P->pos.kt.pos[j], P->pos.causal, P->pos.window);
      any |= v, all &= v;
    }
  return all ? 1 : any ? 2 : 0;
}

/* P through kn->attn_rows: the keys in P->calls consecutive calls (the online state carries
 * over), each skipped, unmasked or masked as the driver would classify it (or masked
 * always). out_i = o_i / l_i and lse_i = m_i + ln l_i (0 and -inf where l_i = 0). */
static void run_rows(const rove_kernels *kn, const rprob *P, int mis, int always_mask, float *out,
                     float *lse) {
  const int32_t nq = P->nq, d = P->d;
  rove_guarded og, mg, lg, sg;
  float *o = kt_alloc(&og, (int64_t)nq * d, mis, 1), *m = kt_alloc(&mg, nq, mis / 2, 1);
  float *l = kt_alloc(&lg, nq, mis / 3, 1);
  float *s = kt_alloc(&sg, ROVE_ROWS_SCRATCH(d), 0, 1);
  rove_fill_bits(s, sg.n, 0x7FC00007u); /* scratch starts as garbage */
  memset(o, 0, sizeof(float) * (size_t)og.n);
  for (int32_t i = 0; i < nq; i++) m[i] = -INFINITY, l[i] = 0.0f;
  rove_rows_args t = {.q = P->q,
                      .ks = P->ks,
                      .vs = P->vs,
                      .nq = nq,
                      .d = d,
                      .o = o,
                      .m = m,
                      .l = l,
                      .scratch = s,
                      .q_pos = P->pos.qt.pos,
                      .causal = P->pos.causal,
                      .window = P->pos.window,
                      .softcap = P->pos.softcap,
                      .paced = P->paced,
                      .prefetch_l1 = !P->paced};
  for (int c = 0; c < P->calls; c++) {
    const int64_t j0 = (int64_t)P->nk * c / P->calls, j1 = (int64_t)P->nk * (c + 1) / P->calls;
    const int cls = P->pos.masked ? rows_class(P, j0, j1) : 1;
    if (j1 == j0 || (cls == 0 && !always_mask)) continue;
    t.mask = P->pos.masked && (always_mask || cls == 2);
    t.k = P->k + j0 * P->ks, t.v = P->v + j0 * P->vs, t.k_pos = P->pos.kt.pos + j0;
    t.nk = (int32_t)(j1 - j0);
    rove_rot kr, vr; /* the tables from row j0 */
    if (P->krot)
      kr = *P->krot, kr.cos = kr.cos ? kr.cos + j0 * rove_rot_stride(&kr) : NULL,
      kr.sin = kr.sin ? kr.sin + j0 * rove_rot_stride(&kr) : NULL;
    if (P->vrot)
      vr = *P->vrot, vr.cos = vr.cos ? vr.cos + j0 * rove_rot_stride(&vr) : NULL,
      vr.sin = vr.sin ? vr.sin + j0 * rove_rot_stride(&vr) : NULL;
    t.krot = P->krot ? &kr : NULL, t.vrot = P->vrot ? &vr : NULL, t.k_mul = P->k_mul;
    kn->attn_rows(&t);
  }
  for (int32_t i = 0; i < nq; i++)
    for (int32_t c = 0; c < d; c++)
      out[(int64_t)i * d + c] = l[i] > 0.0f ? o[(int64_t)i * d + c] / l[i] : o[(int64_t)i * d + c];
  for (int32_t i = 0; i < nq; i++) lse[i] = l[i] > 0.0f ? m[i] + logf(l[i]) : -INFINITY;
  kt_check(&og, "o acc"), kt_check(&mg, "m acc"), kt_check(&lg, "l acc"), kt_check(&sg, "scratch");
  rove_guarded_free(&og), rove_guarded_free(&mg), rove_guarded_free(&lg), rove_guarded_free(&sg);
}

/* One problem through the table under test and the scalar one. */
static void rows_case(const rove_kernels *kn, rove_rng *g, int32_t d, int32_t nq, int32_t nk,
                      int64_t idx) {
  const rove_kernels *ref = kt_ref();
  const int mode = (int)(idx % N_MODES);
  const int32_t B = bases[(idx / N_MODES) % (sizeof bases / sizeof *bases)];
  const uint64_t h = rove_rng_u64(g);
  rprob P = {.nq = nq, .nk = nk, .d = d, .calls = 1 + (int)(h % 3), .paced = (int)(h >> 28 & 1)};
  P.pos.nq = nq, P.pos.kv = nk;
  int32_t *qp = malloc(sizeof(int32_t) * (size_t)nq), *kp = malloc(sizeof(int32_t) * (size_t)nk);
  make_positions(&P.pos, g, mode, B, qp, kp);
  P.pos.qt.pos = qp, P.pos.kt.pos = kp;
  const int always_mask = (int)((h >> 2) % 2);
  /* token strides: dense, a few floats more, or a head-major cache's d */
  P.ks = d + ((h >> 3) % 3 == 0 ? 0 : (int64_t)((h >> 5) % 7) + 1);
  P.vs = (h >> 8) % 2 ? P.ks : d + (int64_t)((h >> 9) % 5);
  const int mis = (int)((h >> 12) % 16);
  const float amp = sqrtf(50.0f / sqrtf((float)d)); /* logits of std ~12, as test_attention */
  rove_guarded qg, kg, vg, orf, oi, lrf, li;
  float *q = kt_alloc(&qg, (int64_t)nq * d, mis, 0);
  float *k = kt_rows_alloc(&kg, nk, P.ks, d, (mis + 5) % 16, 0);
  float *v = kt_rows_alloc(&vg, nk, P.vs, d, (mis + 9) % 16, 0);
  rove_rng_fill(g, q, qg.n, -amp, amp);
  for (int32_t j = 0; j < nk; j++)
    kt_rows_fill(g, k + j * P.ks, 1, P.ks, d,
                 amp * (h >> 16 & 1 ? 0.2f + 1.6f * (float)j / (float)nk : 1.0f));
  kt_rows_fill(g, v, nk, P.vs, d, 3.0f);
  P.q = q, P.k = k, P.v = v;
  /* half the problems rotate K and V as they are read (the caller's K/V): tables of the key
   * positions, full or partial rotary dims, either pairing, sometimes one of 3 heads of a
   * [token][3][half] table (stride 3 half), sometimes only K or only V */
  const int rot = (int)((h >> 17) % 2), rmode = (int)((h >> 18) % 4);
  const int32_t r = (h >> 20) % 3 == 0 && d > 2 ? (d / 2) & ~1 : d, half = r / 2;
  const int wide = (int)((h >> 22) % 2), head = (int)((h >> 23) % 3);
  rwide_table wt = {0};
  const int32_t first = (h >> 27) % 2 ? d - r : 0; /* ROVE_ROTARY_LAST or FIRST */
  rove_rot krot = {NULL, NULL, half, (int32_t)((h >> 25) % 2), 0, first, 0}, vrot = krot;
  if (rot) {
    rwide_make(&wt, P.pos.kt.pos, nk, half, wide ? 3 : 1);
    krot.cos = wt.c + head * wide * half, krot.sin = wt.s + head * wide * half;
    krot.stride = wide ? 3 * half : 0;
    vrot = krot;
    if (rmode == 1) krot.cos = krot.sin = NULL; /* only V */
    if (rmode == 2) vrot.cos = vrot.sin = NULL; /* only K */
    P.krot = &krot, P.vrot = rmode == 3 ? NULL : &vrot, P.k_mul = (h >> 26) % 2 ? 1.1f : 1.0f;
  }
  kt_ctx(
      "attn_rows d=%d nq=%d nk=%d mode=%s base=%d window=%d softcap=%g calls=%d%s ks=%lld "
      "vs=%lld mis=%d rot=%d/%d r=%d first=%d %s wide=%d paced=%d",
      d, nq, nk, mode_names[mode], B, P.pos.window, P.pos.softcap, P.calls,
      always_mask ? " mask-always" : "", (long long)P.ks, (long long)P.vs, mis, rot, rmode, r,
      first, krot.pairing ? "interleaved" : "half", wide, P.paced);
  float *out_r = kt_alloc(&orf, (int64_t)nq * d, 0, 1),
        *out_i = kt_alloc(&oi, (int64_t)nq * d, 0, 1);
  float *lse_r = kt_alloc(&lrf, nq, 0, 1), *lse_i = kt_alloc(&li, nq, 0, 1);
  run_rows(ref, &P, 0, always_mask, out_r, lse_r);
  run_rows(kn, &P, mis, always_mask, out_i, lse_i);
  kt_cmp(out_i, d, out_r, d, nq, d, OUT_TOL, "out");
  { /* paced changes the prefetch (and, on AVX-512, which P V loop a 4-row panel takes:
     * the GQA group path without it), never a bit of the result */
    rove_guarded op, lp;
    float *out_p = kt_alloc(&op, (int64_t)nq * d, 0, 1), *lse_p = kt_alloc(&lp, nq, 0, 1);
    rprob Q = P;
    Q.paced = !P.paced;
    run_rows(kn, &Q, mis, always_mask, out_p, lse_p);
    if (memcmp(out_p, out_i, sizeof(float) * (size_t)nq * (size_t)d) ||
        memcmp(lse_p, lse_i, sizeof(float) * (size_t)nq))
      kt_fail("paced=%d and paced=%d differ", P.paced, Q.paced);
    rove_guarded_free(&op), rove_guarded_free(&lp);
  }
  for (int32_t i = 0; i < nq; i++) {
    if (lse_r[i] == -INFINITY || lse_i[i] == -INFINITY) { /* no visible key: exactly 0, -inf */
      if (lse_r[i] != lse_i[i]) kt_fail("row %d: lse %g, scalar %g", i, lse_i[i], lse_r[i]);
      for (int32_t c = 0; c < d; c++)
        if (out_i[(int64_t)i * d + c] != 0.0f)
          kt_fail("row %d without keys: o[%d] = %g", i, c, out_i[(int64_t)i * d + c]);
    } else {
      lse_cmp(lse_i[i], lse_r[i], i);
    }
  }
  rove_guarded_free(&orf), rove_guarded_free(&oi), rove_guarded_free(&lrf), rove_guarded_free(&li),
      rove_guarded_free(&qg), rove_guarded_free(&kg), rove_guarded_free(&vg);
  free(qp), free(kp), free(wt.c), free(wt.s);
}

/* A GQA group of 4 rows whose K holds +Inf at one visible key (rows with a positive q
 * there are poisoned: o, l NaN, m = +inf) and whose V holds +Inf and NaN at visible
 * keys, in one call and in two, paced and not: the same bits (on AVX-512 one takes the
 * GQA group path's P V, the other pv_body). */
static void rows_poison_paced(const rove_kernels *kn, rove_rng *g, int32_t d, int32_t nk,
                              int32_t calls) {
  const int32_t nq = 4;
  float *q = malloc(sizeof(float) * (size_t)(nq * d));
  float *k = malloc(sizeof(float) * (size_t)(nk * d)), *v = malloc(sizeof(float) * (size_t)(nk * d));
  float *s = malloc(sizeof(float) * (size_t)ROVE_ROWS_SCRATCH(d));
  float *o[2], m[2][4], l[2][4];
  assert_true(q && k && v && s);
  rove_rng_fill(g, q, nq * d, -1.0f, 1.0f);
  rove_rng_fill(g, k, nk * d, -1.0f, 1.0f);
  rove_rng_fill(g, v, nk * d, -1.0f, 1.0f);
  q[5] = 1.0f, q[2 * d + 5] = -1.0f; /* row 0 poisoned by K's +Inf, row 2 not */
  k[(int64_t)(nk / 2) * d + 5] = INFINITY;
  v[(int64_t)(nk / 3) * d + 3] = INFINITY, v[(int64_t)(nk - 1) * d + d - 1] = NAN;
  for (int x = 0; x < 2; x++) {
    o[x] = calloc((size_t)(nq * d), sizeof(float));
    assert_true(o[x] != NULL);
    for (int i = 0; i < nq; i++) m[x][i] = -INFINITY, l[x][i] = 0.0f;
    for (int32_t c = 0; c < calls; c++) {
      const int32_t j0 = nk * c / calls, j1 = nk * (c + 1) / calls;
      rove_rows_args t = {.q = q, .k = k + (int64_t)j0 * d, .v = v + (int64_t)j0 * d, .ks = d,
                          .vs = d, .nq = nq, .nk = j1 - j0, .d = d, .k_mul = 1.0f, .o = o[x],
                          .m = m[x], .l = l[x], .scratch = s, .paced = x};
      kn->attn_rows(&t);
    }
  }
  kt_ctx("attn_rows poison d=%d nk=%d calls=%d", d, nk, calls);
  if (memcmp(o[0], o[1], sizeof(float) * (size_t)(nq * d)) || memcmp(m[0], m[1], sizeof m[0]) ||
      memcmp(l[0], l[1], sizeof l[0]))
    kt_fail("paced=0 and paced=1 differ");
  if (!isnan(l[0][0]) || m[0][0] != INFINITY)
    kt_fail("row 0 not poisoned: m %g l %g", m[0][0], l[0][0]);
  free(q), free(k), free(v), free(s), free(o[0]), free(o[1]);
}

static void test_rows(const rove_kernels *kn) {
  worst_lse = 0;
  rove_rng g;
  rove_rng_seed(&g, 505);
  static const int32_t ds[] = {2, 32, 64, 80, 96, 128, 256};
  static const int32_t nks[] = {1, 7, 15, 16, 17, 63, 64, 65, 129, 200};
  static const int32_t nqs[] = {1, 2, 3, 4, 5, 6, 7, 8, ROVE_ROWS_MAX};
  int64_t idx = 0;
  for (size_t a = 0; a < sizeof ds / sizeof *ds; a++)
    for (size_t b = 0; b < sizeof nqs / sizeof *nqs; b++)
      for (size_t c = 0; c < sizeof nks / sizeof *nks; c++)
        rows_case(kn, &g, ds[a], nqs[b], nks[c], idx++);
  for (int32_t c = 1; c <= 2; c++) {
    rows_poison_paced(kn, &g, 64, 100, c);
    rows_poison_paced(kn, &g, 128, 200, c);
  }
  printf("  %s attn_rows: %lld problems, %d failures; max rel err out %.3g, lse %.3g\n", kt_isa(),
         (long long)idx, kt_failures(), kt_worst(), worst_lse);
}

/* ---- rove_rot.stride: per-(token, head) tables ------------------------------------------ */

/* rotate, pack_k and finish reading cos/sin from a [n][3][half] table (stride 3 half, head
 * h's part) must give exactly what they give from a dense [n][half] copy of that part. */
static void stride_case(const rove_kernels *kn, rove_rng *g, int32_t d, int32_t r, int32_t n,
                        int64_t idx) {
  const int32_t half = r / 2, pairing = (int32_t)(idx % 2), head = (int32_t)(idx / 2 % 3);
  const int64_t w = 3 * (int64_t)half, ss = d + (int64_t)(idx % 3), tk = kn->tile_kv;
  const int64_t np = (n + tk - 1) / tk * tk;
  kt_ctx("rot stride d=%d r=%d %s n=%d head=%d", d, r, pairing ? "interleaved" : "half", n, head);
  float *wc = malloc(sizeof(float) * (size_t)(n * w)),
        *wsn = malloc(sizeof(float) * (size_t)(n * w));
  float *dc = malloc(sizeof(float) * (size_t)(n * half)),
        *dsn = malloc(sizeof(float) * (size_t)(n * half));
  float *src = malloc(sizeof(float) * (size_t)(n * ss)), *m = malloc(sizeof(float) * (size_t)n);
  float *l = malloc(sizeof(float) * (size_t)n);
  float *a = malloc(sizeof(float) * (size_t)(np * d)),
        *b = malloc(sizeof(float) * (size_t)(np * d));
  float la[64], lb[64];
  assert_true(wc && wsn && dc && dsn && src && m && l && a && b && n <= 64);
  for (int64_t i = 0; i < n * w; i++) {
    const float t = rove_rng_uniform(g, -3.1f, 3.1f);
    wc[i] = cosf(t), wsn[i] = sinf(t);
  }
  for (int32_t i = 0; i < n; i++) {
    memcpy(dc + i * half, wc + i * w + head * half, sizeof(float) * (size_t)half);
    memcpy(dsn + i * half, wsn + i * w + head * half, sizeof(float) * (size_t)half);
    m[i] = rove_rng_uniform(g, -5.0f, 5.0f),
    l[i] = i % 5 == 4 ? 0.0f : rove_rng_uniform(g, 1.0f, 9.0f);
  }
  rove_rng_fill(g, src, n * ss, -2.0f, 2.0f);
  const int32_t first = (int32_t)(idx / 6 % 2) * (d - r); /* FIRST or LAST placement */
  const rove_rot rw = {wc + head * half, wsn + head * half, half, pairing, w, first, 0};
  const rove_rot rd = {dc, dsn, half, pairing, 0, first, 0};
  for (int inv = 0; inv < 2; inv++) {
    kn->rotate(a, d, src, ss, n, d, &rw, 0.9f, 0.8f, inv);
    kn->rotate(b, d, src, ss, n, d, &rd, 0.9f, 0.8f, inv);
    if (memcmp(a, b, sizeof(float) * (size_t)(n * d))) kt_fail("rotate (inverse %d) differs", inv);
  }
  kn->pack_k(a, src, ss, n, d, &rw, 1.1f);
  kn->pack_k(b, src, ss, n, d, &rd, 1.1f);
  if (memcmp(a, b, sizeof(float) * (size_t)(np * d))) kt_fail("pack_k differs");
  rove_finish_f32(kn, a, d, la, src, m, l, n, d, &rw, NULL);
  rove_finish_f32(kn, b, d, lb, src, m, l, n, d, &rd, NULL);
  if (memcmp(a, b, sizeof(float) * (size_t)(n * d)) || memcmp(la, lb, sizeof(float) * (size_t)n))
    kt_fail("finish differs");
  free(wc), free(wsn), free(dc), free(dsn), free(src), free(m), free(l), free(a), free(b);
}

/* The table under test and the scalar one (a property of each, not a comparison). */
static void test_rot_stride(const rove_kernels *kn) {
  const rove_kernels *const tabs[2] = {kn, kt_ref()};
  rove_rng g;
  rove_rng_seed(&g, 606);
  static const int32_t ns[] = {1, 5, 17, 64};
  int64_t idx = 0;
  for (int t = 0; t < 2; t++)
    for (size_t a = 0; a < sizeof rot_dims / sizeof *rot_dims; a++)
      for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
        for (int rep = 0; rep < 3; rep++, idx++) {
          const int32_t d = rot_dims[a], r = rep == 2 && d > 2 ? (d / 2) & ~1 : d;
          stride_case(tabs[t], &g, d, r, ns[b], idx);
        }
  printf("  %s and scalar rot stride: %lld cases, %d failures\n", kt_isa(), (long long)idx,
         kt_failures());
}

/* ---- vectorised exp ------------------------------------------------------------------- */

typedef struct {
  double max_rel, at, max_tiny, flush_rel;
  int64_t n;
} exp_stats;

/* Checks y = exp(x) against double: relative EXP_TOL where exp(x) >= FLT_MIN and x >= -87.3;
 * below -87.3 kernels.h allows flushing to 0, so there 0 <= y <= 1e-37 (or accurate). */
static void exp_check(const float *x, const float *y, int64_t n, exp_stats *st) {
  for (int64_t i = 0; i < n; i++, st->n++) {
    const double e = exp((double)x[i]), rel = fabs((double)y[i] - e) / e;
    if (isnan(y[i])) {
      kt_fail("exp(%.9g) = NaN", x[i]);
    } else if (x[i] == -INFINITY || x[i] == 0.0f) {
      if (y[i] != (x[i] == 0.0f ? 1.0f : 0.0f))
        kt_fail("exp(%g) = %.9g, want it exact", x[i], y[i]);
    } else if (e >= FLT_MIN && x[i] >= -87.3f) {
      if (rel > st->max_rel) st->max_rel = rel, st->at = x[i];
      if (!(rel <= EXP_TOL))
        kt_fail("exp(%.9g) = %.9g, want %.9g (rel err %.3g)", x[i], y[i], e, rel);
    } else {
      if (e >= FLT_MIN && y[i] != 0.0f) st->flush_rel = fmax(st->flush_rel, rel);
      if (e < FLT_MIN) st->max_tiny = fmax(st->max_tiny, fabs(y[i]));
      if (!(y[i] >= 0.0f && (y[i] <= 1e-37f || rel <= EXP_TOL)))
        kt_fail("exp(%.9g) = %.9g, want 0 <= y <= 1e-37 (exp = %.3g)", x[i], y[i], e);
    }
  }
}

static void test_exp(const rove_kernels *kn) {
  const rove_exp_fn fn = kn->exp;
  rove_rng g;
  rove_rng_seed(&g, 404);
  static const float special[] = {
      0.0f,     -0.0f,    -87.3f, -88.0f,     -103.0f,        -1e30f,         -INFINITY,
      -FLT_MIN, -1e-30f,  -1e-7f, -87.33654f, -87.336548f,    -104.0f,        -0.5f,
      -1.0f,    -FLT_MAX, -86.0f, -87.0f,     -0x1.62e43p+6f, -0x1.9fe368p+6f};
  const int64_t n_dense = 104001, n_rand = 40000, n_sp = sizeof special / sizeof *special;
  const int64_t n = n_dense + 2 * n_rand + n_sp + 1; /* 184022: not a multiple of 8 or 16 */
  rove_guarded xg, yg;
  float *x = kt_alloc(&xg, n, 3, 0), *y = kt_alloc(&yg, n, 1, 1);
  int64_t k = 0;
  for (int64_t i = 0; i < n_dense; i++) x[k++] = (float)(-104.0 + 1e-3 * (double)i);
  for (int64_t i = 0; i < n_rand; i++) x[k++] = rove_rng_uniform(&g, -104.0f, 0.0f);
  for (int64_t i = 0; i < n_rand; i++)
    x[k++] = -expf(rove_rng_uniform(&g, -30.0f, 4.6f)); /* small |x| */
  for (int64_t i = 0; i < n_sp; i++) x[k++] = special[i];
  x[k++] = -87.5f;
  exp_stats st = {0};
  fn(y, x, n);
  exp_check(x, y, n, &st);
  kt_check(&yg, "exp dst");
  /* tails n = 1 .. 67, misaligned and guarded (exp is elementwise: any slice will do) */
  for (int64_t m = 1; m <= 67; m++) {
    rove_guarded sg, dg;
    float *s = kt_alloc(&sg, m, (int)(m % 16), 0),
          *dd = kt_alloc(&dg, m, (int)((m * 7) % 16), m % 2);
    const int64_t off = (int64_t)(rove_rng_u64(&g) % (uint64_t)(n - m));
    memcpy(s, x + off, sizeof(float) * (size_t)m);
    fn(dd, s, m);
    kt_ctx("exp n=%lld", (long long)m);
    exp_check(s, dd, m, &st);
    kt_check(&dg, "exp dst");
    rove_guarded_free(&sg), rove_guarded_free(&dg);
  }
  printf(
      "  %s exp: %lld points, max rel err %.3g (%.2f x 2^-24) at x = %.9g; x < -87.3 non-flushed "
      "rel err %.3g; max |exp| where exp(x) < FLT_MIN: %.3g\n",
      kt_isa(), (long long)st.n, st.max_rel, st.max_rel / 0x1p-24, st.at, st.flush_rel,
      st.max_tiny);
  rove_guarded_free(&xg), rove_guarded_free(&yg);
}

/* ---- the lazy maximum's edge rows (kernels.h, ROVE_SOFTMAX_SLACK) -------------------- */

/* Three key tiles through attn_tile, against the scalar kernel (which keeps the exact
 * maximum), d = 64, causal, nq query rows:
 *   tile 1 (keys at positions 10..73): seen by every row but row 0 (position 5), so row 0
 *     enters tile 2 with m = -inf and the others with a finite m;
 *   tile 2 (keys at 0..63): row 0 sees keys 0..5 only, and their scores are -inf (K holds
 *     -inf in dim 0; row 0's q is e0, the others' q[0] > 0), so it stays empty (l = 0,
 *     m = -inf) while the other rows' scores stay near their maxima (the fast path), or
 *     with `nan_key` key 3's K is NaN: every row that sees it is poisoned;
 *   tile 3 (keys at 80..143): every row but row 0 sees it, with scores ~20 above their
 *     maxima: the general path after the fast one.
 * The rows' output o / l and LSE m + ln l must match scalar (to 2e-5), an empty row must
 * stay empty (l = 0, m = -inf) and a poisoned one NaN, on both kernels alike. In tile 3
 * row 0 (not past its slack) shares a panel with rows that are: the general path with
 * both kinds of row. nq: the scalar tile's rows or one fewer (several of the ISA's row
 * panels, the last one partial). */
static void lazy_run(const rove_kernels *kn, int32_t nq, int nan_key, float *o, float *m,
                     float *l) {
  enum { D = 64 };
  const int32_t tq = kn->tile_q, tk = kn->tile_kv;
  rove_rng g;
  rove_rng_seed(&g, 77);
  assert_true(nq <= tq);
  float *q = calloc((size_t)tq * D, sizeof(float)), *k = malloc(sizeof(float) * (size_t)tk * D);
  float *kb = malloc(sizeof(float) * (size_t)tk * D), *v = malloc(sizeof(float) * (size_t)tk * D);
  float *s = malloc(sizeof(float) * (size_t)tq * tk);
  int32_t qp[512], kp[512];
  assert_true(q && k && kb && v && s && tq <= 512 && tk <= 512);
  rove_rng_fill(&g, q, (int64_t)nq * D, -0.3f, 0.3f);
  for (int32_t i = 0; i < nq; i++) {
    qp[i] = i == 0 ? 5 : 200 + i;
    q[i * D] = 0.25f; /* > 0: a -inf in K's dim 0 gives a -inf score, not NaN */
  }
  for (int32_t x = 1; x < D; x++) q[x] = 0.0f; /* row 0: e0 */
  q[0] = 1.0f;
  memset(o, 0, sizeof(float) * (size_t)tq * D);
  for (int32_t i = 0; i < tq; i++) m[i] = -INFINITY, l[i] = 0.0f;
  const rove_rot none = {NULL, NULL, D / 2, ROVE_PAIRING_HALF, 0, 0, 0};
  rove_tile_args t = {.q = q, .nq = nq, .d = D, .q_pos = qp, .k_pos = kp, .o = o, .m = m,
                      .l = l, .scratch = s, .causal = 1, .mask = 1, .k = kb, .v = v, .nk = tk};
  for (int tile = 0; tile < 3; tile++) {
    rove_rng_fill(&g, k, (int64_t)tk * D, -1.0f, 1.0f);
    rove_rng_fill(&g, v, (int64_t)tk * D, -1.0f, 1.0f);
    for (int32_t j = 0; j < tk; j++) {
      kp[j] = tile == 0 ? 10 + j : tile == 1 ? j : 80 + j;
      if (tile == 1 && j <= 5) k[j * D] = nan_key && j == 3 ? NAN : -INFINITY;
      if (tile == 2) k[j * D] = 80.0f; /* q[0] 0.25: +20 on every score */
    }
    kn->pack_k(kb, k, D, tk, D, &none, 1.0f);
    kn->attn_tile(&t);
  }
  free(q), free(k), free(kb), free(v), free(s);
}

static void test_lazy_max(const rove_kernels *kn) {
  enum { D = 64 };
  const int32_t tq = kn->tile_q > kt_ref()->tile_q ? kn->tile_q : kt_ref()->tile_q;
  const int32_t rq = kt_ref()->tile_q < kn->tile_q ? kt_ref()->tile_q : kn->tile_q;
  float *o = malloc(sizeof(float) * (size_t)tq * D), *oref = malloc(sizeof(float) * (size_t)tq * D);
  float m[512], l[512], mref[512], lref[512];
  assert_true(o && oref && tq <= 512);
  for (int nan_key = 0; nan_key < 2; nan_key++)
    for (int32_t nq = rq - 1; nq <= rq; nq++) {
      kt_ctx("nq=%d nan_key=%d", nq, nan_key);
      lazy_run(kn, nq, nan_key, o, m, l);
      lazy_run(kt_ref(), nq, nan_key, oref, mref, lref);
      for (int32_t i = 0; i < nq; i++) {
        const int poisoned = nan_key; /* every row sees key 3 of tile 2 */
        if (poisoned) {
          if (l[i] == l[i] || lref[i] == lref[i] || m[i] != INFINITY || mref[i] != INFINITY ||
              o[i * D] == o[i * D])
            kt_fail("row %d: l %g (scalar %g), m %g (scalar %g), o[0] %g, want NaN, +inf, NaN",
                    i, l[i], lref[i], m[i], mref[i], o[i * D]);
          continue;
        }
        if (i == 0) {
          if (l[0] != 0.0f || lref[0] != 0.0f || m[0] != -INFINITY || mref[0] != -INFINITY)
            kt_fail("row 0 (sees only -inf scores): l %g (scalar %g), m %g (scalar %g), want "
                    "0 and -inf", l[0], lref[0], m[0], mref[0]);
          for (int32_t x = 0; x < D; x++)
            if (o[x] != 0.0f) kt_fail("row 0: o[%d] = %g, want 0", x, o[x]);
          continue;
        }
        for (int32_t x = 0; x < D; x++) o[i * D + x] /= l[i], oref[i * D + x] /= lref[i];
        const float lse = m[i] + logf(l[i]), lse_ref = mref[i] + logf(lref[i]);
        if (!(fabsf(lse - lse_ref) <= 2e-5f * fmaxf(1.0f, fabsf(lse_ref))))
          kt_fail("row %d: lse %.9g, scalar %.9g", i, lse, lse_ref);
      }
      if (!nan_key) kt_cmp(o + D, D, oref + D, D, nq - 1, D, 2e-5, "out rows 1..");
    }
  free(o), free(oref);
}

/* ---- main ------------------------------------------------------------------------------ */

int main(void) {
  static const kt_test once[] = {{"tables", test_tables}};
  static const kt_test per_isa[] = {{"table", test_table},          {"rotate", test_rotate},
                                    {"finish", test_finish},        {"attention", test_attention},
                                    {"attn_rows", test_rows},       {"exp", test_exp},
                                    {"rot_stride", test_rot_stride},
                                    {"rotate_place", test_rotate_place},
                                    {"lazy_max", test_lazy_max}};
  const kt_suite s = {
      "ktest_kernels", "scalar", per_isa, (int)(sizeof per_isa / sizeof *per_isa), once, 1, 0};
  return kt_main(&s);
}
