/* SPDX-License-Identifier: MIT */
/* `rove info`: what this librove and this CPU offer. */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"

static const struct {
  uint32_t bit;
  const char *name;
} feature_names[] = {
    {ROVE_CPU_AVX2, "avx2"},         {ROVE_CPU_FMA, "fma"},
    {ROVE_CPU_AVX512F, "avx512f"},   {ROVE_CPU_AVX512DQ, "avx512dq"},
    {ROVE_CPU_AVX512VL, "avx512vl"}, {ROVE_CPU_AVX512BW, "avx512bw"},
    {ROVE_CPU_AVX512BF16, "avx512bf16"}, {ROVE_CPU_NEON, "neon"},
    {ROVE_CPU_FP16, "fp16"},         {ROVE_CPU_BF16, "bf16"},
    {ROVE_CPU_SVE, "sve"},           {ROVE_CPU_F16C, "f16c"},
};

static void print_features(void) {
  const uint32_t f = rove_cpu_features();
  int any = 0;
  printf("CPU features:    ");
  for (size_t i = 0; i < sizeof feature_names / sizeof feature_names[0]; i++) {
    if (f & feature_names[i].bit) {
      printf("%s%s", any ? " " : "", feature_names[i].name);
      any = 1;
    }
  }
  printf("%s (0x%08x)\n", any ? "" : "(none of interest)", (unsigned)f);
}

static void print_isas(void) {
  int any_missing = 0;
  printf("ISAs available:  ");
  for (int i = ROVE_ISA_SCALAR; i < ROVE_ISA_COUNT; i++)
    if (rove_isa_available((rove_isa)i)) printf("%s ", rove_isa_name((rove_isa)i));
  for (int i = ROVE_ISA_SCALAR; i < ROVE_ISA_COUNT; i++) {
    if (rove_isa_available((rove_isa)i)) continue;
    printf("%s%s", any_missing ? ", " : "(not available: ", rove_isa_name((rove_isa)i));
    any_missing = 1;
  }
  printf("%s\n", any_missing ? ")" : "");
}

/* The KV cache storage types (rove_kv_cache_create_typed); on x86, whether the CPU has
 * F16C, the half-precision conversions the avx2 and avx512 ISAs require (without it they
 * are not available and every type runs on the scalar kernels). */
static void print_dtypes(void) {
  printf("KV cache types:  ");
  for (int t = 0; t < ROVE_DTYPE_COUNT; t++)
    printf("%s%s", t ? " " : "", rove_dtype_name((rove_dtype)t));
  printf(" (rove demo --kv, rove bench --kv)\n");
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
  const int f16c = (rove_cpu_features() & ROVE_CPU_F16C) != 0;
  const int used = rove_isa_available(ROVE_ISA_AVX2) || rove_isa_available(ROVE_ISA_AVX512);
  printf("F16C:            %s\n",
         !f16c  ? "no (the avx2 and avx512 ISAs need it)"
         : used ? "yes (the avx2 and avx512 kernels convert f16 with vcvtph2ps / vcvtps2ph)"
                : "yes (unused here: neither the avx2 nor the avx512 ISA is available)");
#endif
}

int cmd_info(int argc, char **argv) {
  int rc = cli_parse_opts("info", argc, argv, NULL, 0);
  if (rc != 0) return rc == 1 ? CLI_EXIT_OK : rc;
  printf("librove %s (rove tool built against headers %d.%d.%d)\n", rove_version_string(),
         ROVE_VERSION_MAJOR, ROVE_VERSION_MINOR, ROVE_VERSION_PATCH);
  print_features();
  print_isas();
  const char *cap = getenv("ROVE_ISA");
  printf("chosen ISA:      %s", rove_isa_name(rove_best_isa()));
  if (cap && *cap) {
    rove_isa named = ROVE_ISA_AUTO; /* librove matches the lower-case names exactly */
    const int ok = rove_isa_parse(cap, &named) == ROVE_OK;
    if (ok && named != ROVE_ISA_AUTO)
      printf(" (capped by ROVE_ISA=%s)", cap);
    else if (ok)
      printf(" (ROVE_ISA=%s: no cap)", cap);
    else
      printf(" (ROVE_ISA=%s is not an ISA name and is ignored)", cap);
  }
  printf("\ndefault threads: %d", (int)rove_default_threads());
  const char *omp = getenv("OMP_NUM_THREADS");
  if (omp && *omp) printf(" (OMP_NUM_THREADS=%s)", omp);
  printf("\n");
  print_dtypes();
  return CLI_EXIT_OK;
}
