/* SPDX-License-Identifier: MIT */
/* Bad input for every public function of include/rove.h: the right status, and nothing
 * written on failure. Also the small informational functions and the ROVE_ISA cap.
 * Links the public librove.so. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"

extern char **environ;

#define SENT 4242.25f
#define INV ROVE_ERR_INVALID_ARGUMENT

/* ---- informational functions --------------------------------------------------------- */

static void test_status_strings(void **state) {
  (void)state;
  const char *s[ROVE_ERR_POOL_EXHAUSTED + 1];
  for (int i = ROVE_OK; i <= ROVE_ERR_POOL_EXHAUSTED; i++) {
    s[i] = rove_status_string((rove_status)i);
    assert_non_null(s[i]);
    assert_true(strlen(s[i]) > 0);
    for (int j = 0; j < i; j++) assert_string_not_equal(s[i], s[j]);
  }
  const rove_status unknown[] = {(rove_status)(ROVE_ERR_POOL_EXHAUSTED + 1), (rove_status)99,
                                 (rove_status)-1};
  for (int u = 0; u < 3; u++) {
    const char *x = rove_status_string(unknown[u]);
    assert_non_null(x);
    assert_string_equal(x, "unknown rove_status");
    for (int i = ROVE_OK; i <= ROVE_ERR_POOL_EXHAUSTED; i++) assert_string_not_equal(x, s[i]);
  }
}

/* The ISAs as rove.h documents them, in rove_isa order from ROVE_ISA_AUTO (strings and
 * feature bits, never the enum: the tests find each ISA by its value and check it against
 * this table, so a new ISA must be documented here too): name, architecture ("any": every
 * CPU), preference within the architecture (higher wins), CPU features it needs. */
typedef struct {
  const char *name, *arch;
  int level;
  uint32_t needs;
} doc_isa;
#define AVX512_FDVB (ROVE_CPU_AVX512F | ROVE_CPU_AVX512DQ | ROVE_CPU_AVX512VL | ROVE_CPU_AVX512BW)
static const doc_isa k_isas[] = {
    {"auto", "any", 0, 0},
    {"scalar", "any", 0, 0},
    {"avx2", "x86", 1, ROVE_CPU_AVX2 | ROVE_CPU_FMA},
    {"avx512", "x86", 2, AVX512_FDVB},
    {"neon", "arm", 1, ROVE_CPU_NEON},
};
#define N_DOC_ISAS ((int)(sizeof k_isas / sizeof *k_isas))

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#define HOST_ARCH "x86"
#elif defined(__aarch64__) || defined(_M_ARM64)
#define HOST_ARCH "arm"
#else
#define HOST_ARCH "none"
#endif

/* An ISA of another architecture than this host's. */
static int foreign(int i) {
  return strcmp(k_isas[i].arch, "any") != 0 && strcmp(k_isas[i].arch, HOST_ARCH) != 0;
}

static void test_isa_names(void **state) {
  (void)state;
  assert_int_equal(ROVE_ISA_COUNT, N_DOC_ISAS); /* every rove_isa value is documented above */
  assert_int_equal(ROVE_ISA_AUTO, 0);
  for (int i = ROVE_ISA_AUTO; i < ROVE_ISA_COUNT; i++) {
    assert_string_equal(rove_isa_name((rove_isa)i), k_isas[i].name);
    rove_isa back = (rove_isa)-1;
    assert_int_equal(rove_isa_parse(k_isas[i].name, &back), ROVE_OK);
    assert_int_equal(back, i);
  }
  assert_non_null(rove_isa_name((rove_isa)17));
  assert_string_equal(rove_isa_name((rove_isa)17), "unknown");
  assert_string_equal(rove_isa_name((rove_isa)-3), "unknown");
  assert_string_equal(rove_isa_name(ROVE_ISA_COUNT), "unknown");
  /* parse: exactly the names, else INVALID_ARGUMENT and *isa untouched */
  static const char *const bad[] = {"unknown", "",      "SCALAR", "Auto",
                                    "scalar ", " neon", "avx",    "avx5120"};
  for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
    rove_isa x = (rove_isa)77;
    assert_int_equal(rove_isa_parse(bad[b], &x), INV);
    assert_int_equal(x, 77);
  }
  rove_isa x = (rove_isa)77;
  assert_int_equal(rove_isa_parse(NULL, &x), INV);
  assert_int_equal(x, 77);
  assert_int_equal(rove_isa_parse("scalar", NULL), INV);
}

static void test_version(void **state) {
  (void)state;
  char want[64];
  snprintf(want, sizeof want, "%d.%d.%d", ROVE_VERSION_MAJOR, ROVE_VERSION_MINOR,
           ROVE_VERSION_PATCH);
  assert_non_null(rove_version_string());
  assert_string_equal(rove_version_string(), want);
  assert_int_equal(ROVE_VERSION, ROVE_VERSION_MAJOR * 10000 + ROVE_VERSION_MINOR * 100 + ROVE_VERSION_PATCH);
}

/* Whether a ROVE_ISA cap `cap` (AUTO: none) allows ISA i: its own ISA, scalar, and the
 * ISAs of lower preference on the cap's architecture (so a foreign cap allows only scalar). */
static int cap_allows(int cap, int i) {
  if (cap == ROVE_ISA_AUTO || cap == i || strcmp(k_isas[i].arch, "any") == 0) return 1;
  return strcmp(k_isas[cap].arch, k_isas[i].arch) == 0 && k_isas[i].level < k_isas[cap].level;
}

/* What rove_best_isa() must be under the cap `cap`: the most preferred available ISA it
 * allows. */
static rove_isa expected_best(int cap) {
  int best = ROVE_ISA_SCALAR;
  for (int i = ROVE_ISA_SCALAR; i < ROVE_ISA_COUNT; i++)
    if (rove_isa_available((rove_isa)i) && cap_allows(cap, i) &&
        k_isas[i].level > k_isas[best].level)
      best = i;
  return (rove_isa)best;
}

static void test_best_isa_and_cap(void **state) {
  (void)state;
  const rove_isa best = rove_best_isa();
  assert_int_not_equal(best, ROVE_ISA_AUTO);
  assert_true(rove_isa_available(best));
  assert_true(rove_isa_available(ROVE_ISA_AUTO));
  assert_true(rove_isa_available(ROVE_ISA_SCALAR));
  assert_false(rove_isa_available((rove_isa)99));
  assert_false(rove_isa_available(ROVE_ISA_COUNT));
  const uint32_t f = rove_cpu_features();
  for (int i = ROVE_ISA_SCALAR; i < ROVE_ISA_COUNT; i++) {
    if (foreign(i)) assert_false(rove_isa_available((rove_isa)i));
    if (rove_isa_available((rove_isa)i)) assert_true((f & k_isas[i].needs) == k_isas[i].needs);
  }
  if (strcmp(HOST_ARCH, "x86") == 0) assert_false(f & ROVE_CPU_NEON);
  if (strcmp(HOST_ARCH, "arm") == 0) assert_false(f & (ROVE_CPU_AVX2 | ROVE_CPU_FMA | AVX512_FDVB));
  const char *env = getenv("ROVE_ISA");
  rove_isa cap = ROVE_ISA_AUTO;
  if (env && *env && rove_isa_parse(env, &cap) != ROVE_OK) cap = ROVE_ISA_AUTO;
  if (cap != ROVE_ISA_AUTO) {
    assert_true(cap_allows(cap, best));
    if (rove_isa_available(cap)) assert_int_equal(best, cap);
    if (foreign(cap)) assert_int_equal(best, ROVE_ISA_SCALAR);
  }
  assert_int_equal(best, expected_best(cap));
  /* an AUTO plan takes the best ISA; an explicit SCALAR plan is always possible */
  rove_attention_config c;
  rove_attention_config_init(&c, 2, 1, 32);
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  assert_int_equal(rove_plan_isa(p), best);
  rove_plan_destroy(p);
  c.isa = ROVE_ISA_SCALAR;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  assert_int_equal(rove_plan_isa(p), ROVE_ISA_SCALAR);
  rove_plan_destroy(p);
}

/* Re-run this binary with a given ROVE_ISA (it is read once per process) and return the
 * child's rove_best_isa(), or -1 when the child cannot be started here. */
static const char *g_self;
static int spawn_best_isa(const char *cap) {
  int n = 0;
  while (environ[n]) n++;
  char **env = calloc((size_t)n + 2, sizeof(char *));
  assert_non_null(env);
  int m = 0;
  for (int i = 0; i < n; i++)
    if (strncmp(environ[i], "ROVE_ISA=", 9) != 0 && strncmp(environ[i], "ROVE_TEST_REQUIRE_ISA=", 22) != 0)
      env[m++] = environ[i];
  char kv[64];
  if (cap) {
    snprintf(kv, sizeof kv, "ROVE_ISA=%s", cap);
    env[m++] = kv;
  }
  env[m] = NULL;
  char *argv[] = {(char *)g_self, (char *)"--print-best-isa", NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, env);
  if (rc != 0) rc = posix_spawn(&pid, g_self, NULL, NULL, argv, env);
  free(env);
  if (rc != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  const int code = WEXITSTATUS(status);
  return code >= 100 && code < 110 ? code - 100 : -1;
}

static void test_isa_cap_in_child(void **state) {
  (void)state;
  const int uncapped = spawn_best_isa(NULL);
  if (uncapped < 0) {
    print_message("cannot re-execute the test binary here; cap test skipped\n");
    skip();
  }
  assert_int_equal(uncapped, expected_best(ROVE_ISA_AUTO));
  assert_int_equal(spawn_best_isa("auto"), uncapped);
  assert_int_equal(spawn_best_isa("scalar"), ROVE_ISA_SCALAR);
  /* every cap: itself when available, else the best available ISA it allows (scalar for
   * a cap of another architecture) */
  for (int i = ROVE_ISA_SCALAR; i < ROVE_ISA_COUNT; i++) {
    const int got = spawn_best_isa(k_isas[i].name);
    print_message("ROVE_ISA=%s: best %s\n", k_isas[i].name, rove_isa_name((rove_isa)got));
    assert_int_equal(got, expected_best(i));
    if (rove_isa_available((rove_isa)i)) assert_int_equal(got, i);
    if (foreign(i)) assert_int_equal(got, ROVE_ISA_SCALAR);
  }
  /* an unknown cap is ignored (or at worst lowers the choice); never AUTO */
  const int bogus = spawn_best_isa("bogus");
  assert_true(bogus > ROVE_ISA_AUTO && rove_isa_available((rove_isa)bogus));
}

/* ---- rope config and frequencies ------------------------------------------------------ */

static void test_config_init(void **state) {
  (void)state;
  rove_rope_config_init(NULL);
  rove_attention_config_init(NULL, 1, 1, 2);
  rove_attention_config c;
  memset(&c, 0x5A, sizeof c);
  rove_attention_config_init(&c, 8, 2, 64);
  assert_int_equal(c.n_heads, 8);
  assert_int_equal(c.n_kv_heads, 2);
  assert_int_equal(c.head_dim, 64);
  assert_int_equal(c.rotate, ROVE_ROTATE_ROVE);
  assert_int_equal(c.causal, 1);
  assert_int_equal(c.window, 0);
  assert_true(c.softcap == 0.0f);
  assert_true(c.scale == 0.0f || fabs((double)c.scale - 0.125) < 1e-7);
  assert_int_equal(c.isa, ROVE_ISA_AUTO);
  assert_int_equal(c.n_threads, 0);
  assert_int_equal(c.rope.rotary_dim, 0);
  assert_int_equal(c.rope.pairing, ROVE_PAIRING_HALF);
  assert_true(c.rope.theta == 10000.0);
  assert_int_equal(c.rope.scaling, ROVE_SCALING_NONE);
  assert_true(c.rope.factor == 1.0);
  assert_true(c.rope.beta_fast == 32.0 && c.rope.beta_slow == 1.0);
  assert_true(c.rope.attention_factor == 0.0);
  assert_int_equal(c.rope.truncate, 1);
  assert_true(c.rope.low_freq_factor == 1.0 && c.rope.high_freq_factor == 4.0);
  assert_null(c.rope.freq_factors);
}

typedef void (*rope_mut)(rove_rope_config *c);
static void m_rot_odd(rove_rope_config *c) { c->rotary_dim = 31; }
static void m_rot_big(rove_rope_config *c) { c->rotary_dim = 66; }
static void m_rot_neg(rove_rope_config *c) { c->rotary_dim = -2; }
static void m_theta_nan(rove_rope_config *c) { c->theta = NAN; }
static void m_theta_neg(rove_rope_config *c) { c->theta = -10000; }
static void m_theta_zero(rove_rope_config *c) { c->theta = 0; }
static void m_theta_one(rove_rope_config *c) { c->theta = 1; }
static void m_theta_inf(rove_rope_config *c) { c->theta = INFINITY; }
static void m_pairing(rove_rope_config *c) { c->pairing = (rove_pairing)7; }
static void m_scaling(rove_rope_config *c) { c->scaling = (rove_scaling)42; }
static void m_lin_nan(rove_rope_config *c) { c->scaling = ROVE_SCALING_LINEAR, c->factor = NAN; }
static void m_lin_neg(rove_rope_config *c) { c->scaling = ROVE_SCALING_LINEAR, c->factor = -2; }
static void m_lin_zero(rove_rope_config *c) { c->scaling = ROVE_SCALING_LINEAR, c->factor = 0; }
static void m_ntk_inf(rove_rope_config *c) { c->scaling = ROVE_SCALING_NTK, c->factor = INFINITY; }
static void yarn(rove_rope_config *c) {
  c->scaling = ROVE_SCALING_YARN;
  c->factor = 4;
  c->original_max_position = 64;
}
static void m_yarn_l0(rove_rope_config *c) { yarn(c), c->original_max_position = 0; }
static void m_yarn_l0neg(rove_rope_config *c) { yarn(c), c->original_max_position = -5; }
static void m_yarn_factor(rove_rope_config *c) { yarn(c), c->factor = NAN; }
static void m_yarn_bf(rove_rope_config *c) { yarn(c), c->beta_fast = NAN; }
static void m_yarn_bs(rove_rope_config *c) { yarn(c), c->beta_slow = -1; }
static void m_yarn_m(rove_rope_config *c) { yarn(c), c->attention_factor = NAN; }
static void m_yarn_minf(rove_rope_config *c) { yarn(c), c->attention_factor = INFINITY; }
static void llama(rove_rope_config *c) {
  c->scaling = ROVE_SCALING_LLAMA3;
  c->factor = 8;
  c->original_max_position = 64;
}
static void m_llama_l0(rove_rope_config *c) { llama(c), c->original_max_position = 0; }
static void m_llama_nan(rove_rope_config *c) { llama(c), c->low_freq_factor = NAN; }
static void m_llama_factor(rove_rope_config *c) { llama(c), c->factor = -1; }
static double g_bad_ff[32];
static void m_ff_zero(rove_rope_config *c) {
  for (int k = 0; k < 32; k++) g_bad_ff[k] = 1.0;
  g_bad_ff[5] = 0.0;
  c->freq_factors = g_bad_ff;
}
static void m_ff_neg(rove_rope_config *c) { m_ff_zero(c), g_bad_ff[5] = -1.0; }
static void m_ff_nan(rove_rope_config *c) { m_ff_zero(c), g_bad_ff[31] = NAN; }
/* Issue 13 item 9: accepted before, with ROVE_OK and all-zero (m 1e39) or NaN (m 1e20;
 * w_0 = 1e300 at large positions) outputs. */
static void m_yarn_m1e20(rove_rope_config *c) { yarn(c), c->attention_factor = 1e20; }
static void m_yarn_m1e39(rove_rope_config *c) { yarn(c), c->attention_factor = 1e39; }
static void m_yarn_m1001(rove_rope_config *c) { yarn(c), c->attention_factor = 1001; }
static void m_ff_tiny(rove_rope_config *c) { m_ff_zero(c), g_bad_ff[5] = 1.0, g_bad_ff[0] = 1e-300; }
static void m_lin_tiny(rove_rope_config *c) { c->scaling = ROVE_SCALING_LINEAR, c->factor = 1e-300; }
/* Derived m above 1000: get_mscale(4, 1e5) / get_mscale(4, 1e-3) = 13864. */
static void m_yarn_mscale_big(rove_rope_config *c) { yarn(c), c->mscale = 1e5, c->mscale_all_dim = 1e-3; }
static void m_yarn_mscale_one(rove_rope_config *c) { yarn(c), c->mscale = 1; }
static void m_placement(rove_rope_config *c) { c->placement = (rove_rotary_placement)2; }
static void m_placement_neg(rove_rope_config *c) { c->placement = (rove_rotary_placement)-1; }
/* Fields the scaling does not read keep their defaults (rove.h's table). */
static void m_lin_m(rove_rope_config *c) { c->scaling = ROVE_SCALING_LINEAR, c->factor = 2, c->attention_factor = 1.2; }
static void m_none_factor(rove_rope_config *c) { c->factor = 2; }
static void m_llama_beta(rove_rope_config *c) { llama(c), c->beta_fast = 16; }
static void m_yarn_maxpos(rove_rope_config *c) { yarn(c), c->max_position = 100; }
static void longrope(rove_rope_config *c) {
  m_ff_zero(c), g_bad_ff[5] = 1.0;
  c->scaling = ROVE_SCALING_LONGROPE;
  c->factor = 32;
  c->original_max_position = 64;
}
static void m_longrope_no_short(rove_rope_config *c) { longrope(c), c->freq_factors = NULL; }
static void m_longrope_no_long(rove_rope_config *c) { longrope(c), c->max_position = 65; }
static void m_longrope_maxpos(rove_rope_config *c) { longrope(c), c->max_position = -1; }
static void m_longrope_l0(rove_rope_config *c) { longrope(c), c->original_max_position = 0; }
static void m_longrope_mscale(rove_rope_config *c) { longrope(c), c->mscale = c->mscale_all_dim = 1; }

static const struct {
  const char *name;
  rope_mut f;
} k_rope_bad[] = {
    {"rotary odd", m_rot_odd},     {"rotary > head", m_rot_big},  {"rotary < 0", m_rot_neg},
    {"theta NaN", m_theta_nan},    {"theta < 0", m_theta_neg},    {"theta 0", m_theta_zero},
    {"theta 1", m_theta_one},      {"theta inf", m_theta_inf},    {"pairing", m_pairing},
    {"scaling", m_scaling},        {"linear NaN", m_lin_nan},     {"linear < 0", m_lin_neg},
    {"linear 0", m_lin_zero},      {"ntk inf", m_ntk_inf},        {"yarn L0 0", m_yarn_l0},
    {"yarn L0 < 0", m_yarn_l0neg}, {"yarn NaN s", m_yarn_factor}, {"yarn beta_fast", m_yarn_bf},
    {"yarn beta_slow", m_yarn_bs}, {"yarn m NaN", m_yarn_m},      {"yarn m inf", m_yarn_minf},
    {"llama L0", m_llama_l0},      {"llama NaN", m_llama_nan},
    {"llama s < 0", m_llama_factor}, {"ff 0", m_ff_zero},         {"ff < 0", m_ff_neg},
    {"ff NaN", m_ff_nan},          {"yarn m 1e20", m_yarn_m1e20}, {"yarn m 1e39", m_yarn_m1e39},
    {"yarn m 1001", m_yarn_m1001}, {"ff 1e-300", m_ff_tiny},      {"linear 1e-300", m_lin_tiny},
    {"yarn mscale m > 1000", m_yarn_mscale_big}, {"yarn mscale alone", m_yarn_mscale_one},
    {"placement 2", m_placement},  {"placement -1", m_placement_neg},
    {"linear attention_factor", m_lin_m}, {"none factor 2", m_none_factor},
    {"llama beta_fast", m_llama_beta}, {"yarn max_position", m_yarn_maxpos},
    {"longrope no short set", m_longrope_no_short}, {"longrope no long set", m_longrope_no_long},
    {"longrope max_position < 0", m_longrope_maxpos}, {"longrope L0 0", m_longrope_l0},
    {"longrope mscale", m_longrope_mscale},
};
#define N_ROPE_BAD (sizeof k_rope_bad / sizeof k_rope_bad[0])

static void check_inv_freq(const rove_rope_config *c, int32_t head_dim, rove_status want,
                           const char *name) {
  double inv[600], m = -7.5;
  for (int i = 0; i < 600; i++) inv[i] = -1.25;
  const rove_status st = rove_rope_inv_freq(c, head_dim, inv, &m);
  if (st != want)
    fail_msg("rove_rope_inv_freq(%s): %s, want %s", name, rove_status_string(st), rove_status_string(want));
  for (int i = 0; i < 600; i++)
    if (inv[i] != -1.25) fail_msg("rove_rope_inv_freq(%s) wrote inv_freq on failure", name);
  if (m != -7.5) fail_msg("rove_rope_inv_freq(%s) wrote the attention factor on failure", name);
}

static void test_inv_freq_bad(void **state) {
  (void)state;
  rove_rope_config c;
  rove_rope_config_init(&c);
  double inv[64];
  assert_int_equal(rove_rope_inv_freq(NULL, 64, inv, NULL), INV);
  assert_int_equal(rove_rope_inv_freq(&c, 64, NULL, NULL), INV);
  check_inv_freq(&c, 0, INV, "head_dim 0");
  check_inv_freq(&c, -64, INV, "head_dim < 0");
  check_inv_freq(&c, 63, INV, "head_dim odd");
  check_inv_freq(&c, 2048, ROVE_ERR_UNSUPPORTED, "head_dim > max");
  for (size_t i = 0; i < N_ROPE_BAD; i++) {
    rove_rope_config_init(&c);
    k_rope_bad[i].f(&c);
    check_inv_freq(&c, 64, INV, k_rope_bad[i].name);
  }
  /* the good neighbours of the bad values work */
  rove_rope_config_init(&c);
  yarn(&c);
  assert_int_equal(rove_rope_inv_freq(&c, 64, inv, NULL), ROVE_OK);
  rove_rope_config_init(&c);
  llama(&c);
  assert_int_equal(rove_rope_inv_freq(&c, 64, inv, NULL), ROVE_OK);
  rove_rope_config_init(&c);
  longrope(&c);
  assert_int_equal(rove_rope_inv_freq(&c, 64, inv, NULL), ROVE_OK);
  rove_rope_config_init(&c);
  yarn(&c);
  c.attention_factor = 1000; /* the bound itself */
  c.placement = ROVE_ROTARY_LAST;
  assert_int_equal(rove_rope_inv_freq(&c, 64, inv, NULL), ROVE_OK);
  rove_rope_config_init(&c);
  c.rotary_dim = 2;
  assert_int_equal(rove_rope_inv_freq(&c, 2, inv, NULL), ROVE_OK);
}

/* ---- plan creation ------------------------------------------------------------------- */

static rove_plan *const k_untouched = (rove_plan *)(uintptr_t)0xDEADBEEF;

static void check_create(const rove_attention_config *c, rove_status want, const char *name) {
  rove_plan *p = k_untouched;
  const rove_status st = rove_plan_create(c, &p);
  if (st != want) {
    if (st == ROVE_OK && p != k_untouched) rove_plan_destroy(p);
    fail_msg("rove_plan_create(%s): %s, want %s", name, rove_status_string(st), rove_status_string(want));
  }
  if (want != ROVE_OK && p != k_untouched) fail_msg("rove_plan_create(%s) wrote *out on failure", name);
  if (want == ROVE_OK) rove_plan_destroy(p);
}

static void test_plan_create_bad(void **state) {
  (void)state;
  rove_attention_config c;
  rove_attention_config_init(&c, 4, 2, 64);
  rove_plan *p = k_untouched;
  assert_int_equal(rove_plan_create(NULL, &p), INV);
  assert_ptr_equal(p, k_untouched);
  assert_int_equal(rove_plan_create(&c, NULL), INV);
  check_create(&c, ROVE_OK, "valid");

#define BAD(stmt, want, name)              \
  do {                                     \
    rove_attention_config_init(&c, 4, 2, 64); \
    stmt;                                  \
    check_create(&c, want, name);          \
  } while (0)
  BAD(c.n_heads = 0, INV, "n_heads 0");
  BAD(c.n_heads = -4, INV, "n_heads < 0");
  BAD(c.n_kv_heads = 0, INV, "n_kv_heads 0");
  BAD(c.n_kv_heads = -2, INV, "n_kv_heads < 0");
  BAD(c.n_kv_heads = 3, INV, "n_heads % n_kv_heads");
  BAD((c.n_heads = 6, c.n_kv_heads = 4), INV, "6 % 4");
  BAD(c.n_kv_heads = 8, INV, "n_kv_heads > n_heads");
  BAD(c.head_dim = 0, INV, "head_dim 0");
  BAD(c.head_dim = -64, INV, "head_dim < 0");
  BAD(c.head_dim = 63, INV, "head_dim odd");
  BAD(c.head_dim = 1, INV, "head_dim 1");
  BAD(c.head_dim = 2048, ROVE_ERR_UNSUPPORTED, "head_dim > ROVE_MAX_HEAD_DIM");
  BAD(c.rotate = 16, INV, "rotate bit 4");
  BAD(c.rotate = 0x80000000u | ROVE_ROTATE_ROVE, INV, "rotate bit 31");
  BAD(c.causal = 2, INV, "causal 2");
  BAD(c.causal = -1, INV, "causal -1");
  BAD(c.window = -1, INV, "window < 0");
  BAD(c.scale = NAN, INV, "scale NaN");
  BAD(c.scale = INFINITY, INV, "scale inf");
  BAD(c.softcap = NAN, INV, "softcap NaN");
  BAD(c.softcap = -1.0f, INV, "softcap < 0");
  BAD(c.softcap = INFINITY, INV, "softcap inf");
  BAD(c.n_threads = -1, INV, "n_threads < 0");
  BAD(c.isa = (rove_isa)99, INV, "isa 99");
  BAD(c.isa = (rove_isa)-1, INV, "isa -1");
  for (size_t i = 0; i < N_ROPE_BAD; i++) BAD(k_rope_bad[i].f(&c.rope), INV, k_rope_bad[i].name);
  BAD(c.isa = ROVE_ISA_COUNT, INV, "isa ROVE_ISA_COUNT");
  for (int i = ROVE_ISA_SCALAR; i < ROVE_ISA_COUNT; i++) { /* foreign ones: e.g. NEON on x86 */
    char what[64];
    snprintf(what, sizeof what, "isa %s (%s)", k_isas[i].name,
             foreign(i)                        ? "other architecture"
             : rove_isa_available((rove_isa)i) ? "available"
                                               : "unavailable");
    if (foreign(i) || !rove_isa_available((rove_isa)i))
      BAD(c.isa = (rove_isa)i, ROVE_ERR_UNSUPPORTED, what);
    else
      BAD(c.isa = (rove_isa)i, ROVE_OK, what);
  }
  /* valid edges */
  BAD((c.head_dim = 2, c.rope.rotary_dim = 2), ROVE_OK, "head_dim 2");
  BAD(c.rope.rotary_dim = 64, ROVE_OK, "rotary_dim = head_dim");
  BAD(c.rotate = 0, ROVE_OK, "no rotation");
  BAD((c.causal = 0, c.window = 5), ROVE_OK, "non-causal window");
  BAD(c.scale = -0.5f, ROVE_OK, "negative scale");
  BAD(c.n_threads = 3, ROVE_OK, "3 threads");
  BAD(c.isa = ROVE_ISA_SCALAR, ROVE_OK, "scalar");
  BAD(c.isa = rove_best_isa(), ROVE_OK, "best");
  BAD(c.head_dim = ROVE_MAX_HEAD_DIM, ROVE_OK, "max head_dim");
#undef BAD
}

static void test_plan_null_safe(void **state) {
  (void)state;
  rove_plan_destroy(NULL);
  assert_int_equal(rove_plan_isa(NULL), ROVE_ISA_AUTO);
  assert_int_equal(rove_plan_threads(NULL), 0);
  rove_attention_config c;
  assert_int_equal(rove_plan_config(NULL, &c), INV);
  rove_attention_config_init(&c, 2, 2, 16);
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  assert_int_equal(rove_plan_config(p, NULL), INV);
  rove_plan_destroy(p);
}

/* ---- attention forward ---------------------------------------------------------------- */

enum { FH = 2, FD = 64, FS = 4, FW = FH * FD, FN = FS * FW }; /* H = Hkv = 2, d = 64 */

typedef struct {
  rove_plan *p;
  float *q, *k, *v, *out, *lse; /* each buffer 2*FN floats (room for shifted views) */
  float *q0, *k0, *v0;
  rove_attention_args a;
} fwd;

static void fwd_setup(fwd *f) {
  rove_attention_config c;
  rove_attention_config_init(&c, FH, FH, FD);
  assert_int_equal(rove_plan_create(&c, &f->p), ROVE_OK);
  float **bufs[] = {&f->q, &f->k, &f->v, &f->out, &f->lse, &f->q0, &f->k0, &f->v0};
  for (int i = 0; i < 8; i++) {
    *bufs[i] = malloc(2 * FN * sizeof(float));
    assert_non_null(*bufs[i]);
  }
  rove_rng g;
  rove_rng_seed(&g, 3);
  rove_rng_fill(&g, f->q, 2 * FN, -1, 1);
  rove_rng_fill(&g, f->k, 2 * FN, -1, 1);
  rove_rng_fill(&g, f->v, 2 * FN, -1, 1);
  memcpy(f->q0, f->q, 2 * FN * sizeof(float));
  memcpy(f->k0, f->k, 2 * FN * sizeof(float));
  memcpy(f->v0, f->v, 2 * FN * sizeof(float));
}

static void fwd_reset(fwd *f) {
  for (int i = 0; i < 2 * FN; i++) f->out[i] = SENT, f->lse[i] = SENT;
  memcpy(f->q, f->q0, 2 * FN * sizeof(float));
  memcpy(f->k, f->k0, 2 * FN * sizeof(float));
  memcpy(f->v, f->v0, 2 * FN * sizeof(float));
  memset(&f->a, 0, sizeof f->a);
  f->a.batch = 1;
  f->a.q_len = FS;
  f->a.kv_len = FS;
  f->a.q = f->q;
  f->a.k = f->k;
  f->a.v = f->v;
  f->a.out = f->out;
  f->a.lse = f->lse;
}

static void fwd_expect(fwd *f, const rove_plan *p, rove_status want, const char *name) {
  const rove_status st = rove_attention_forward(p, &f->a);
  if (st != want)
    fail_msg("forward(%s): %s, want %s", name, rove_status_string(st), rove_status_string(want));
  if (want == ROVE_OK) return;
  const float sent = SENT;
  for (int i = 0; i < 2 * FN; i++)
    if (memcmp(&f->out[i], &sent, sizeof sent) != 0 || memcmp(&f->lse[i], &sent, sizeof sent) != 0)
      fail_msg("forward(%s) wrote an output on failure", name);
  if (memcmp(f->q, f->q0, 2 * FN * sizeof(float)) || memcmp(f->k, f->k0, 2 * FN * sizeof(float)) ||
      memcmp(f->v, f->v0, 2 * FN * sizeof(float)))
    fail_msg("forward(%s) wrote an input on failure", name);
}

static void fwd_free(fwd *f) {
  float *bufs[] = {f->q, f->k, f->v, f->out, f->lse, f->q0, f->k0, f->v0};
  for (int i = 0; i < 8; i++) free(bufs[i]);
  rove_plan_destroy(f->p);
}

static void test_forward_bad(void **state) {
  (void)state;
  fwd f;
  fwd_setup(&f);
  fwd_reset(&f);
  fwd_expect(&f, f.p, ROVE_OK, "valid");
  fwd_reset(&f);
  fwd_expect(&f, NULL, INV, "NULL plan");
  assert_int_equal(rove_attention_forward(f.p, NULL), INV);
#define BAD(stmt, want, name) \
  do {                        \
    fwd_reset(&f);            \
    stmt;                     \
    fwd_expect(&f, f.p, want, name); \
  } while (0)
  BAD(f.a.q = NULL, INV, "q NULL");
  BAD(f.a.k = NULL, INV, "k NULL");
  BAD(f.a.v = NULL, INV, "v NULL");
  BAD(f.a.out = NULL, INV, "out NULL");
  BAD(f.a.batch = 0, INV, "batch 0");
  BAD(f.a.batch = -1, INV, "batch < 0");
  BAD(f.a.q_len = 0, INV, "q_len 0");
  BAD(f.a.q_len = -3, INV, "q_len < 0");
  BAD(f.a.kv_len = 0, INV, "kv_len 0");
  BAD(f.a.kv_len = INT32_MIN, INV, "kv_len < 0");
  BAD(f.a.q_stride = FW - 1, INV, "q_stride < dense");
  BAD(f.a.q_stride = -FW, INV, "q_stride < 0");
  BAD(f.a.k_stride = 1, INV, "k_stride < dense");
  BAD(f.a.v_stride = FW - 2, INV, "v_stride < dense");
  BAD(f.a.out_stride = 64, INV, "out_stride < dense");
  BAD(f.a.out_stride = -1, INV, "out_stride < 0");
  /* element counts past int64: refused before anything is read (tiny real buffers) */
  BAD((f.a.batch = 1 << 30, f.a.q_len = 1 << 30), ROVE_ERR_SIZE_OVERFLOW, "batch*q_len*H*d");
  BAD((f.a.batch = 1 << 30, f.a.kv_len = 1 << 30), ROVE_ERR_SIZE_OVERFLOW, "batch*kv_len*H*d");
  BAD((f.a.q_len = 8, f.a.q_stride = INT64_MAX / 4), ROVE_ERR_SIZE_OVERFLOW, "q stride");
  BAD((f.a.kv_len = 8, f.a.k_stride = INT64_MAX / 4), ROVE_ERR_SIZE_OVERFLOW, "k stride");
  BAD((f.a.kv_len = 8, f.a.v_stride = INT64_MAX / 4), ROVE_ERR_SIZE_OVERFLOW, "v stride");
  BAD((f.a.q_len = 8, f.a.out_stride = INT64_MAX / 4), ROVE_ERR_SIZE_OVERFLOW, "out stride");
  BAD((f.a.batch = INT32_MAX, f.a.q_len = INT32_MAX, f.a.kv_len = INT32_MAX),
      ROVE_ERR_SIZE_OVERFLOW, "all INT32_MAX");
  /* outputs overlapping inputs */
  BAD(f.a.out = f.q, INV, "out == q");
  BAD(f.a.out = f.k, INV, "out == k");
  BAD(f.a.out = f.v, INV, "out == v");
  BAD(f.a.out = f.q + FN - 1, INV, "out overlaps the end of q");
  BAD(f.a.q = f.out + 5, INV, "q overlaps out");
  BAD(f.a.lse = f.out + 3, INV, "lse inside out");
  BAD(f.a.lse = f.q + 7, INV, "lse inside q");
  BAD(f.a.lse = f.k, INV, "lse == k");
  BAD(f.a.lse = f.v + FN - 2, INV, "lse overlaps the end of v");
  /* strided views: overlap is about the spanned range */
  BAD((f.a.q_len = 2, f.a.kv_len = 2, f.a.q_stride = 2 * FW, f.a.out = f.q + FW), INV,
      "out overlaps a strided q");
  /* nor the positions and angles (read per batch row and tile while other tasks write);
   * the sentinel's bits are valid positions and finite angles, so only the overlap fails */
  BAD(f.a.q_pos = (const int32_t *)(f.out + FN - 1), INV, "q_pos overlaps the end of out");
  BAD(f.a.kv_pos = (const int32_t *)f.lse, INV, "kv_pos inside lse");
  BAD((f.a.q_angles = (const double *)f.out, f.a.kv_angles = (const double *)f.k), INV,
      "q_angles inside out");
  BAD((f.a.q_angles = (const double *)f.q, f.a.kv_angles = (const double *)(f.lse + 2)), INV,
      "kv_angles inside lse");
  BAD((f.a.q_angles = (const double *)f.q, f.a.kv_angles = (const double *)f.k), ROVE_OK,
      "angles inside inputs");
  /* attention sinks: finite, and no output over them (the sentinel is a finite sink) */
  static const float sink_nan[8] = {0.5f, NAN, 0, 0, 0, 0, 0, 0};
  static const float sink_inf[8] = {-INFINITY, 0, 0, 0, 0, 0, 0, 0};
  static const float sink_ok[8] = {1, -1, 2, -2, 0, 3, -3, 0.5f};
  BAD(f.a.sinks = sink_nan, INV, "a NaN sink");
  BAD(f.a.sinks = sink_inf, INV, "a -inf sink");
  BAD(f.a.sinks = f.out + 4, INV, "sinks inside out");
  BAD(f.a.sinks = f.lse + FH * FS - 1, INV, "sinks overlap the end of lse");
  BAD(f.a.sinks = sink_ok, ROVE_OK, "finite sinks");
  BAD(f.a.sinks = f.q, ROVE_OK, "sinks inside an input");
#undef BAD
  /* the same buffers, correctly separated, work */
  fwd_reset(&f);
  f.a.out = f.out + 1;
  f.a.lse = f.out + FN + 1;
  fwd_expect(&f, f.p, ROVE_OK, "out and lse in one buffer, apart");
  fwd_free(&f);
}

/* ---- rove_rotate --------------------------------------------------------------------- */

static void test_rotate_bad(void **state) {
  (void)state;
  rove_attention_config c;
  rove_attention_config_init(&c, 2, 1, 32);
  rove_plan *p = NULL;
  assert_int_equal(rove_plan_create(&c, &p), ROVE_OK);
  float x[8 * 2 * 32], x0[8 * 2 * 32];
  rove_rng g;
  rove_rng_seed(&g, 9);
  rove_rng_fill(&g, x, 8 * 64, -1, 1);
  memcpy(x0, x, sizeof x);
  const int32_t pos[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  struct {
    const rove_plan *p;
    float *x;
    int32_t n, h;
    int64_t stride;
    int32_t inv;
    rove_status want;
    const char *name;
  } cs[] = {
      {NULL, x, 8, 2, 0, 0, INV, "NULL plan"},
      {p, NULL, 8, 2, 0, 0, INV, "NULL x"},
      {p, x, 0, 2, 0, 0, INV, "n_tokens 0"},
      {p, x, -1, 2, 0, 0, INV, "n_tokens < 0"},
      {p, x, 8, 0, 0, 0, INV, "n_heads 0"},
      {p, x, 8, -2, 0, 0, INV, "n_heads < 0"},
      {p, x, 8, 2, 63, 0, INV, "stride < dense"},
      {p, x, 8, 2, 1, 0, INV, "stride 1"},
      {p, x, 8, 2, -64, 0, INV, "stride < 0"},
      {p, x, 8, 2, 0, 2, INV, "inverse 2"},
      {p, x, 8, 2, 0, -1, INV, "inverse -1"},
      {p, x, 8, 2, INT64_MAX / 4, 0, ROVE_ERR_SIZE_OVERFLOW, "huge stride"},
      {p, x, 1 << 30, 1 << 30, 0, 0, ROVE_ERR_SIZE_OVERFLOW, "n_tokens*n_heads*d"},
      {p, x, INT32_MAX, INT32_MAX, 0, 1, ROVE_ERR_SIZE_OVERFLOW, "INT32_MAX tokens and heads"},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
    for (int use_pos = 0; use_pos <= 1; use_pos++) {
      const rove_status st = rove_rotate(cs[i].p, cs[i].x, cs[i].n, cs[i].h, cs[i].stride,
                                         use_pos ? pos : NULL, cs[i].inv);
      if (st != cs[i].want)
        fail_msg("rove_rotate(%s): %s, want %s", cs[i].name, rove_status_string(st),
                 rove_status_string(cs[i].want));
      if (memcmp(x, x0, sizeof x) != 0) fail_msg("rove_rotate(%s) wrote x on failure", cs[i].name);
    }
  /* positions or angles inside x (read chunk by chunk while x is rotated): refused, x kept;
   * x's bits are valid positions and finite angles, so only the overlap fails */
  if (rove_rotate(p, x, 8, 2, 0, (const int32_t *)(x + 100), 0) != INV ||
      rove_rotate_angles(p, x, 8, 2, 0, (const double *)(x + 8 * 64 - 2), 1, 0) != INV)
    fail_msg("rotate with positions or angles inside x accepted");
  if (memcmp(x, x0, sizeof x) != 0) fail_msg("rove_rotate(overlap) wrote x on failure");
  assert_int_equal(rove_rotate(p, x, 8, 2, 0, pos, 0), ROVE_OK);
  assert_int_equal(rove_rotate(p, x, 4, 2, 128, pos, 1), ROVE_OK); /* stride 2 rows */
  assert_int_equal(rove_rotate(p, x, 8, 1, 64, NULL, 1), ROVE_OK); /* 1 head of 2 per row */
  rove_plan_destroy(p);
}

int main(int argc, char **argv) {
  g_self = argv[0];
  if (argc > 1 && strcmp(argv[1], "--print-best-isa") == 0) return 100 + (int)rove_best_isa();
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_strings), cmocka_unit_test(test_isa_names),
      cmocka_unit_test(test_version),        cmocka_unit_test(test_best_isa_and_cap),
      cmocka_unit_test(test_isa_cap_in_child), cmocka_unit_test(test_config_init),
      cmocka_unit_test(test_inv_freq_bad),   cmocka_unit_test(test_plan_create_bad),
      cmocka_unit_test(test_plan_null_safe), cmocka_unit_test(test_forward_bad),
      cmocka_unit_test(test_rotate_bad),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
