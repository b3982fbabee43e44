/* SPDX-License-Identifier: MIT */
/* Kernel test: attn_rows over a paged pool (rove_rows_args.blocks) against the same kernel
 * over the same rows laid out contiguously, on every ISA of the registry, scalar included.
 *
 * The same keys and values, typed (fp32, bf16, f16, q8 with its scales), are stored twice:
 * as consecutive rows, and as the rows of a pool of blocks of 16 .. 128 tokens in a
 * shuffled block order, every block holding a second head's rows (all bits set: NaN, or
 * -1 with NaN scales) between ours, so a row read from the wrong place shows. The call
 * starts at a token j_base (a multiple of 16) of the pool's sequence and the keys go in 1-3
 * calls split at multiples of 16. The kernel must give the contiguous call's o, m, l bit for
 * bit: a paged call only changes where the rows are read, never the arithmetic. Masked
 * (causal), plain and softcapped calls; head dims 8 .. 128; 1 .. 16 query rows; prefetch
 * hints in both forms (rove_rows_args.next_nk), which must not change a bit.
 * Then attn_rows_heads, where an ISA has it, against attn_rows head by head. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ktest_util.h"

static int64_t n_cases;

typedef struct {
  int32_t type, d, nq, nk, bs, j_base, calls, mask;
  float softcap;
} pcase;

/* rows_args common to both layouts */
static rove_rows_args base_args(const pcase *c, const float *q, const int32_t *qp, float *o,
                                float *m, float *l, float *s, int paced) {
  rove_rows_args t = {.q = q, .ks = c->d, .vs = c->d, .k_type = c->type, .v_type = c->type,
                      .nq = c->nq, .d = c->d, .q_pos = qp, .mask = c->mask, .causal = c->mask,
                      .softcap = c->softcap, .k_mul = 1.0f, .o = o, .m = m, .l = l,
                      .scratch = s, .paced = paced,
                      .prefetch_l1 = !paced}; /* prefetch hints: never a result */
  return t;
}

static void reset(const pcase *c, float *o, float *m, float *l) {
  memset(o, 0, sizeof(float) * (size_t)c->nq * (size_t)c->d);
  for (int32_t i = 0; i < c->nq; i++) m[i] = -INFINITY, l[i] = 0.0f;
}

/* The two results (rows x d of o, rows of m and l) must be the same bits; then the
 * guarded buffers' canaries are checked and freed. */
static void same_bits(float *const o[2], float *const m[2], float *const l[2], rove_guarded og[2],
                      rove_guarded mg[2], rove_guarded lg[2], rove_guarded *sg, int32_t rows,
                      int32_t d, const char *what, const char *fail) {
  if (memcmp(o[0], o[1], sizeof(float) * (size_t)rows * (size_t)d) ||
      memcmp(m[0], m[1], sizeof(float) * (size_t)rows) ||
      memcmp(l[0], l[1], sizeof(float) * (size_t)rows)) {
    kt_cmp(o[1], d, o[0], d, rows, d, 0.0, what);
    kt_fail(fail);
  }
  for (int x = 0; x < 2; x++) {
    kt_check(&og[x], "o"), kt_check(&mg[x], "m"), kt_check(&lg[x], "l");
    rove_guarded_free(&og[x]), rove_guarded_free(&mg[x]), rove_guarded_free(&lg[x]);
  }
  kt_check(sg, "scratch");
  rove_guarded_free(sg);
}

static void paged_case(const rove_kernels *kn, rove_rng *g, const pcase *c) {
  const int32_t d = c->d, nq = c->nq, nb = rove_q8_blocks(d), bs = c->bs;
  const int32_t J = c->j_base + c->nk; /* tokens of the pool's sequence */
  const int64_t es = rove_dtype_size(c->type), row = (int64_t)d * es;
  const uint64_t h = rove_rng_u64(g);
  kt_ctx("attn_rows paged type=%d d=%d nq=%d nk=%d block=%d j_base=%d calls=%d mask=%d "
         "softcap=%g",
         c->type, d, nq, c->nk, bs, c->j_base, c->calls, c->mask, c->softcap);
  /* contiguous typed rows [J][d] and their scales */
  const float amp = sqrtf(50.0f / sqrtf((float)d));
  float *q = malloc(sizeof(float) * (size_t)nq * d), *kf = malloc(sizeof(float) * (size_t)J * d);
  float *vf = malloc(sizeof(float) * (size_t)J * d);
  char *kc = malloc((size_t)(J * row)), *vc = malloc((size_t)(J * row));
  float *kcs = malloc(sizeof(float) * (size_t)J * nb), *vcs = malloc(sizeof(float) * (size_t)J * nb);
  assert_true(q && kf && vf && kc && vc && kcs && vcs);
  rove_rng_fill(g, q, (int64_t)nq * d, -amp, amp);
  rove_rng_fill(g, kf, (int64_t)J * d, -amp, amp);
  rove_rng_fill(g, vf, (int64_t)J * d, -3.0f, 3.0f);
  if (kt_ref()->from_f32(kc, d, kcs, kf, d, J, d, c->type) |
      kt_ref()->from_f32(vc, d, vcs, vf, d, J, d, c->type))
    kt_fail("from_f32 flagged finite rows");
  /* the pool: nbp blocks of two heads (ours second), [block][head][bs][d]; the sequence's
   * blocks at shuffled distinct indices */
  const int32_t nseq = (J + bs - 1) / bs, nbp = 2 * nseq + 3;
  const int64_t pool_rows = (int64_t)nbp * 2 * bs;
  char *kp_ = malloc((size_t)(pool_rows * row)), *vp_ = malloc((size_t)(pool_rows * row));
  float *kps = malloc(sizeof(float) * (size_t)(pool_rows * nb));
  float *vps = malloc(sizeof(float) * (size_t)(pool_rows * nb));
  int32_t *perm = malloc(sizeof(int32_t) * (size_t)nbp), *table = malloc(sizeof(int32_t) * (size_t)nseq);
  assert_true(kp_ && vp_ && kps && vps && perm && table);
  memset(kp_, 0xFF, (size_t)(pool_rows * row)), memset(vp_, 0xFF, (size_t)(pool_rows * row));
  memset(kps, 0xFF, sizeof(float) * (size_t)(pool_rows * nb));
  memset(vps, 0xFF, sizeof(float) * (size_t)(pool_rows * nb));
  for (int32_t i = 0; i < nbp; i++) perm[i] = i;
  for (int32_t i = nbp - 1; i > 0; i--) {
    const int32_t j = (int32_t)(rove_rng_u64(g) % (uint64_t)(i + 1)), x = perm[i];
    perm[i] = perm[j], perm[j] = x;
  }
  memcpy(table, perm, sizeof(int32_t) * (size_t)nseq);
  const int64_t block_rows = 2 * (int64_t)bs, head = bs; /* our head's rows: from row bs */
  for (int32_t j = 0; j < J; j++) {
    const int64_t r = head + (int64_t)table[j / bs] * block_rows + j % bs;
    memcpy(kp_ + r * row, kc + (int64_t)j * row, (size_t)row);
    memcpy(vp_ + r * row, vc + (int64_t)j * row, (size_t)row);
    memcpy(kps + r * nb, kcs + (int64_t)j * nb, sizeof(float) * (size_t)nb);
    memcpy(vps + r * nb, vcs + (int64_t)j * nb, sizeof(float) * (size_t)nb);
  }
  /* positions: token j at j; query rows near the end (some see fewer keys when masked) */
  int32_t qp[ROVE_ROWS_MAX], *kpos = malloc(sizeof(int32_t) * (size_t)J);
  assert_non_null(kpos);
  for (int32_t j = 0; j < J; j++) kpos[j] = j;
  for (int32_t i = 0; i < nq; i++) qp[i] = J - 1 - (int32_t)((h >> 8) % 5) * i;
  const int q8 = c->type == ROVE_DTYPE_Q8;
  rove_guarded og[2], mg[2], lg[2], sg;
  float *o[2], *m[2], *l[2];
  for (int x = 0; x < 2; x++) {
    o[x] = kt_alloc(&og[x], (int64_t)nq * d, (int)(h >> 12) % 16, 1);
    m[x] = kt_alloc(&mg[x], nq, 1, 1), l[x] = kt_alloc(&lg[x], nq, 2, 1);
  }
  float *s = kt_alloc(&sg, ROVE_ROWS_SCRATCH(d), 0, 1);
  for (int x = 0; x < 2; x++) { /* 0: contiguous, 1: paged */
    reset(c, o[x], m[x], l[x]);
    rove_fill_bits(s, sg.n, 0x7FC00007u);
    /* paced differs between the layouts: it changes the prefetch and, on AVX-512, which
     * P V loop a panel of 4 rows takes (the GQA group path without it), never a bit */
    rove_rows_args t = base_args(c, q, qp, o[x], m[x], l[x], s, ((int)(h >> 20) + x) % 2);
    for (int k = 0; k < c->calls; k++) { /* splits at multiples of 16 */
      const int32_t a = c->nk * k / c->calls / 16 * 16;
      const int32_t b = k + 1 == c->calls ? c->nk : c->nk * (k + 1) / c->calls / 16 * 16;
      if (b <= a) continue;
      const int32_t j0 = c->j_base + a;
      t.nk = b - a, t.k_pos = kpos + j0;
      if (x == 0) {
        t.k = kc + (int64_t)j0 * row, t.v = vc + (int64_t)j0 * row;
        t.k_scale = q8 ? kcs + (int64_t)j0 * nb : NULL, t.v_scale = q8 ? vcs + (int64_t)j0 * nb : NULL;
      } else {
        t.k = kp_ + head * row, t.v = vp_ + head * row;
        t.k_scale = q8 ? kps + head * nb : NULL, t.v_scale = q8 ? vps + head * nb : NULL;
        t.blocks = table, t.block_shift = __builtin_ctz((unsigned)bs), t.j_base = j0;
        t.block_rows = block_rows;
      }
      /* a prefetch hint (never read as data): the pool's first rows, or none; for the
       * paged call also in paged form, the next call's keys through the table (sized to
       * the sequence exactly, so a read past its entries shows under ASan): keys from 0
       * or from the sequence's last multiple of 64, the other head's or ours */
      t.k_next = (h >> 21) % 2 ? kp_ : NULL, t.v_next = t.k_next ? vp_ : NULL;
      const int form = x == 1 ? (int)((h >> 22) % 3) : 0;
      if (form) {
        t.next_j = form == 1 ? 0 : (J - 1) / 64 * 64;
        t.next_nk = J - t.next_j < 64 ? J - t.next_j : 64;
        t.k_next = kp_ + ((h >> 24) % 2 ? head * row : 0), t.v_next = vp_;
        t.k_scale_next = q8 ? kps : NULL, t.v_scale_next = q8 ? vps : NULL;
      }
      kn->attn_rows(&t);
    }
  }
  same_bits(o, m, l, og, mg, lg, &sg, nq, d, "paged o vs contiguous",
            "paged o / m / l differ from the contiguous call's bits");
  free(q), free(kf), free(vf), free(kc), free(vc), free(kcs), free(vcs), free(kp_), free(vp_);
  free(kps), free(vps), free(perm), free(table), free(kpos);
  n_cases++;
}

static void test_paged_rows(const rove_kernels *kn) {
  n_cases = 0;
  rove_rng g;
  rove_rng_seed(&g, 1717);
  static const int32_t types[] = {ROVE_DTYPE_F32, ROVE_DTYPE_BF16, ROVE_DTYPE_F16, ROVE_DTYPE_Q8};
  static const int32_t ds[] = {8, 64, 100, 128}, nqs[] = {1, 3, 4, 5, ROVE_ROWS_MAX};
  static const int32_t nks[] = {1, 15, 16, 17, 64, 100, 200}, bss[] = {16, 32, 64, 128};
  static const int32_t bases[] = {0, 16, 48, 112};
  int64_t idx = 0;
  for (int t = 0; t < 4; t++)
    for (size_t a = 0; a < sizeof ds / sizeof *ds; a++)
      for (size_t b = 0; b < sizeof nqs / sizeof *nqs; b++)
        for (size_t k = 0; k < sizeof nks / sizeof *nks; k++, idx++) {
          const pcase c = {.type = types[t], .d = ds[a], .nq = nqs[b], .nk = nks[k],
                           .bs = bss[idx % 4], .j_base = bases[idx / 4 % 4],
                           .calls = 1 + (int32_t)(idx / 16 % 3), .mask = idx % 3 == 1,
                           .softcap = idx % 3 == 2 ? 20.0f : 0.0f};
          paged_case(kn, &g, &c);
        }
  /* GQA groups of fp32 rows (the AVX-512 group path where not paced) over blocks of two or
   * four runs, partial last blocks, masked or not */
  static const int32_t gnqs[] = {4, 8}, gds[] = {64, 128}, gbss[] = {16, 32};
  for (size_t a = 0; a < 2; a++)
    for (size_t b = 0; b < 2; b++)
      for (size_t k = 0; k < 2; k++, idx++) {
        const pcase c = {.type = ROVE_DTYPE_F32, .d = gds[a], .nq = gnqs[b], .nk = 200,
                         .bs = gbss[k], .j_base = 16 * (int32_t)(idx % 2),
                         .calls = 1 + (int32_t)(idx % 2),
                         .mask = (int32_t)(idx / 2 % 2)};
        paged_case(kn, &g, &c);
      }
  printf("  %s attn_rows paged: %lld problems, %d failures (bitwise against contiguous rows)\n",
         kt_isa(), (long long)n_cases, kt_failures());
}

/* attn_rows_heads (kernels.h): n_heads KV heads of one pool in one call against
 * attn_rows head by head over the same pool, bit for bit: o, m, l of every head, from
 * guarded buffers (a write outside a head's rows shows). The pool holds n_heads heads per
 * block ([block][head][bs][d]) at shuffled indices, its unused blocks all bits set. */
typedef struct {
  int32_t type, d, nq, nk, bs, j_base, heads, mask, window, walk_ahead;
  float softcap;
} hcase;

static void heads_case(const rove_kernels *kn, rove_rng *g, const hcase *c) {
  const int32_t d = c->d, nq = c->nq, nb = rove_q8_blocks(d), bs = c->bs, H = c->heads;
  const int32_t J = c->j_base + c->nk;
  const int64_t es = rove_dtype_size(c->type), row = (int64_t)d * es;
  kt_ctx("attn_rows_heads type=%d d=%d nq=%d nk=%d block=%d j_base=%d heads=%d mask=%d ahead=%d "
         "window=%d softcap=%g",
         c->type, d, nq, c->nk, bs, c->j_base, H, c->mask, c->walk_ahead, c->window, c->softcap);
  const int32_t nseq = (J + bs - 1) / bs, nbp = nseq + 2;
  const int64_t block_rows = (int64_t)H * bs, pool_rows = (int64_t)nbp * block_rows;
  const float amp = sqrtf(50.0f / sqrtf((float)d));
  float *q = malloc(sizeof(float) * (size_t)(H * nq * d));
  float *kf = malloc(sizeof(float) * (size_t)(pool_rows * d)), *vf = malloc(sizeof(float) * (size_t)(pool_rows * d));
  char *kp_ = malloc((size_t)(pool_rows * row)), *vp_ = malloc((size_t)(pool_rows * row));
  float *kps = malloc(sizeof(float) * (size_t)(pool_rows * nb)), *vps = malloc(sizeof(float) * (size_t)(pool_rows * nb));
  int32_t *perm = malloc(sizeof(int32_t) * (size_t)nbp), *kpos = malloc(sizeof(int32_t) * (size_t)J);
  assert_true(q && kf && vf && kp_ && vp_ && kps && vps && perm && kpos);
  rove_rng_fill(g, q, (int64_t)H * nq * d, -amp, amp);
  rove_rng_fill(g, kf, pool_rows * d, -amp, amp);
  rove_rng_fill(g, vf, pool_rows * d, -3.0f, 3.0f);
  if (kt_ref()->from_f32(kp_, d, kps, kf, d, pool_rows, d, c->type) |
      kt_ref()->from_f32(vp_, d, vps, vf, d, pool_rows, d, c->type))
    kt_fail("from_f32 flagged finite rows");
  for (int32_t i = 0; i < nbp; i++) perm[i] = i;
  for (int32_t i = nbp - 1; i > 0; i--) {
    const int32_t j = (int32_t)(rove_rng_u64(g) % (uint64_t)(i + 1)), x = perm[i];
    perm[i] = perm[j], perm[j] = x;
  }
  for (int32_t i = nseq; i < nbp; i++) { /* blocks the sequence does not own: poison */
    memset(kp_ + perm[i] * block_rows * row, 0xFF, (size_t)(block_rows * row));
    memset(vp_ + perm[i] * block_rows * row, 0xFF, (size_t)(block_rows * row));
  }
  for (int32_t j = 0; j < J; j++) kpos[j] = j;
  int32_t qp[ROVE_ROWS_MAX];
  const uint64_t h = rove_rng_u64(g);
  for (int32_t i = 0; i < nq; i++) qp[i] = J - 1 - (int32_t)((h >> 8) % 5) * i;
  const int q8 = c->type == ROVE_DTYPE_Q8;
  rove_guarded og[2], mg[2], lg[2], sg;
  float *o[2], *m[2], *l[2];
  for (int x = 0; x < 2; x++) {
    o[x] = kt_alloc(&og[x], (int64_t)H * nq * d, (int)(h >> 12) % 16, 1);
    m[x] = kt_alloc(&mg[x], (int64_t)H * nq, 1, 1), l[x] = kt_alloc(&lg[x], (int64_t)H * nq, 2, 1);
    memset(o[x], 0, sizeof(float) * (size_t)(H * nq * d));
    for (int32_t i = 0; i < H * nq; i++) m[x][i] = -INFINITY, l[x][i] = 0.0f;
  }
  float *s = kt_alloc(&sg, ROVE_ROWS_SCRATCH(d), 0, 1);
  const pcase pc = {.type = c->type, .d = d, .nq = nq, .mask = c->mask, .softcap = c->softcap};
  for (int x = 0; x < 2; x++) { /* 0: head by head, 1: one call */
    rove_fill_bits(s, sg.n, 0x7FC00007u);
    for (int32_t hd = 0; hd < (x ? 1 : H); hd++) {
      rove_rows_args t = base_args(&pc, q + (int64_t)hd * nq * d, qp, o[x] + (int64_t)hd * nq * d,
                                   m[x] + (int64_t)hd * nq, l[x] + (int64_t)hd * nq, s, 0);
      t.nk = c->nk, t.k_pos = kpos + c->j_base, t.window = c->window;
      t.k = kp_ + (int64_t)hd * bs * row, t.v = vp_ + (int64_t)hd * bs * row;
      t.k_scale = q8 ? kps + (int64_t)hd * bs * nb : NULL;
      t.v_scale = q8 ? vps + (int64_t)hd * bs * nb : NULL;
      t.blocks = perm, t.block_shift = __builtin_ctz((unsigned)bs), t.j_base = c->j_base;
      t.block_rows = block_rows;
      t.walk_ahead = c->walk_ahead; /* a prefetch distance: never changes a result */
      if (x)
        kn->attn_rows_heads(&t, H, (int64_t)bs * d);
      else
        kn->attn_rows(&t);
    }
  }
  same_bits(o, m, l, og, mg, lg, &sg, H * nq, d, "heads o vs per-head o",
            "attn_rows_heads o / m / l differ from the per-head calls' bits");
  free(q), free(kf), free(vf), free(kp_), free(vp_), free(kps), free(vps), free(perm), free(kpos);
  n_cases++;
}

static void test_paged_heads(const rove_kernels *kn) {
  if (!kn->attn_rows_heads) {
    printf("  %s attn_rows_heads: not in this ISA's table (the driver calls attn_rows head "
           "by head): skipped\n", kt_isa());
    skip(); /* reported as skipped, never passed */
  }
  n_cases = 0;
  rove_rng g;
  rove_rng_seed(&g, 2424);
  static const int32_t types[] = {ROVE_DTYPE_F32, ROVE_DTYPE_BF16, ROVE_DTYPE_F16, ROVE_DTYPE_Q8};
  /* d = 8 with 16 rows: one head per pass of the scratch; 17 heads: several passes */
  static const int32_t ds[] = {8, 32, 64, 128}, nqs[] = {1, 4, ROVE_ROWS_MAX};
  static const int32_t nks[] = {17, 64, 100, 200}, heads[] = {1, 3, 17}, bss[] = {16, 32};
  int64_t idx = 0;
  for (int t = 0; t < 4; t++)
    for (size_t a = 0; a < sizeof ds / sizeof *ds; a++)
      for (size_t b = 0; b < sizeof nqs / sizeof *nqs; b++)
        for (size_t k = 0; k < sizeof nks / sizeof *nks; k++, idx++) {
          const hcase c = {.type = types[t], .d = ds[a], .nq = nqs[b], .nk = nks[k],
                           .bs = bss[idx % 2], .j_base = 16 * (int32_t)(idx / 2 % 4),
                           .heads = heads[idx % 3], .mask = idx % 3 == 1,
                           .window = idx % 6 == 1 ? 40 : 0, /* masked: half with a window */
                           /* 0, 4, 8, 12 KB, varied across nk too */
                           .walk_ahead = (int32_t)((idx + idx / 4) % 4) * 4096,
                           .softcap = idx / 3 % 3 == 2 ? 20.0f : 0.0f};
          heads_case(kn, &g, &c);
        }
  printf("  %s attn_rows_heads: %lld problems, %d failures (bitwise against per-head calls)\n",
         kt_isa(), (long long)n_cases, kt_failures());
}

/* The CPU probes behind the decode walks' tuning (plan.c: rows_paced, rows_zen5)
 * against what the kernel reports in /proc/cpuinfo (x86 builds on Linux; skipped elsewhere):
 * rove_cpu_is_intel for vendor GenuineIntel, rove_cpu_amd_family = "cpu family" for
 * AuthenticAMD, 0 for any other vendor. */
static void test_cpu_tuning_probes(const rove_kernels *kn) {
  (void)kn;
#if defined(__x86_64__) || defined(__i386__)
  FILE *fp = fopen("/proc/cpuinfo", "r"); /* not on other builds: qemu-user shows the host's */
#else
  FILE *fp = NULL;
#endif
  char line[512], vendor[64] = "";
  int family = -1;
  while (fp && fgets(line, sizeof line, fp) && (!vendor[0] || family < 0)) {
    if (!vendor[0]) (void)sscanf(line, "vendor_id : %63s", vendor);
    if (family < 0 && sscanf(line, "cpu family : %d", &family) != 1) family = -1;
  }
  if (fp) fclose(fp);
  if (!vendor[0] || family < 0) {
    printf("  cpu tuning probes: no x86 vendor_id / cpu family in /proc/cpuinfo: skipped\n");
    skip(); /* reported as skipped, never passed */
  }
  const int intel = strcmp(vendor, "GenuineIntel") == 0, amd = strcmp(vendor, "AuthenticAMD") == 0;
  printf("  cpu tuning probes: %s family %d (0x%x): is_intel %d, amd_family 0x%x\n", vendor,
         family, family, rove_cpu_is_intel(), rove_cpu_amd_family());
  assert_int_equal(rove_cpu_is_intel(), intel);
  assert_int_equal(rove_cpu_amd_family(), amd ? family : 0);
}

int main(void) {
  static const kt_test per_isa[] = {{"attn_rows_paged", test_paged_rows},
                                    {"attn_rows_heads", test_paged_heads}};
  static const kt_test once[] = {{"cpu_tuning_probes", test_cpu_tuning_probes}};
  const kt_suite s = {"ktest_paged_rows", "contiguous rows, per-head calls", per_isa, 2, once, 1, 1};
  return kt_main(&s);
}
