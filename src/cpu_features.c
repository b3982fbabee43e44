/* SPDX-License-Identifier: MIT */
/* CPU feature detection, once per process.
 *
 * x86: cpuid leaf 1 / 7 for the instruction sets, xgetbv(0) for the OS saving the ymm
 * (bits 1,2) and zmm/opmask (bits 5,6,7) state. aarch64: NEON is baseline; fp16, bf16 and
 * SVE from getauxval. Which ISA needs which bits is the registry's business
 * (isa_registry.c); this file only reads the machine. */
#include <pthread.h>
#include <stdlib.h>

#include "isa_registry.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

static int detect_intel(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
  return b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu; /* "GenuineIntel" */
}

/* The x86 family (cpuid leaf 1: base family, plus the extended family where the base is
 * 0xF) of an AMD CPU ("AuthenticAMD"), else 0: 0x19 Zen 3 / Zen 4, 0x1A Zen 5. */
static int detect_amd_family(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
  if (!(b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u)) return 0; /* "AuthenticAMD" */
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  const int base = (int)((a >> 8) & 0xf);
  return base == 0xf ? base + (int)((a >> 20) & 0xff) : base;
}

static uint32_t detect_features(void) {
  unsigned a, b, c, d;
  uint32_t f = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
  if (!osxsave || !avx) return 0;
  uint64_t xcr0 = xgetbv0();
  int ymm_ok = (xcr0 & 0x6) == 0x6, zmm_ok = (xcr0 & 0xE6) == 0xE6;
  if (!ymm_ok) return 0;
  if (fma) f |= ROVE_CPU_FMA;
  if (f16c) f |= ROVE_CPU_F16C;
  if (__get_cpuid_max(0, NULL) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  if ((b >> 5) & 1) f |= ROVE_CPU_AVX2;
  if (zmm_ok) {
    if ((b >> 16) & 1) f |= ROVE_CPU_AVX512F;
    if ((b >> 17) & 1) f |= ROVE_CPU_AVX512DQ;
    if ((b >> 30) & 1) f |= ROVE_CPU_AVX512BW;
    if ((b >> 31) & 1) f |= ROVE_CPU_AVX512VL;
    __cpuid_count(7, 1, a, b, c, d);
    if ((a >> 5) & 1) f |= ROVE_CPU_AVX512BF16;
  }
  return f;
}
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
static int detect_intel(void) { return 0; }
static int detect_amd_family(void) { return 0; }
static uint32_t detect_features(void) {
  uint32_t f = ROVE_CPU_NEON;
  unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  if (hw & (1ul << 9)) f |= ROVE_CPU_FP16;   /* HWCAP_FPHP */
  if (hw & (1ul << 22)) f |= ROVE_CPU_SVE;   /* HWCAP_SVE */
  if (hw2 & (1ul << 14)) f |= ROVE_CPU_BF16; /* HWCAP2_BF16 */
  return f;
}
#elif defined(__aarch64__)
static int detect_intel(void) { return 0; }
static int detect_amd_family(void) { return 0; }
static uint32_t detect_features(void) { return ROVE_CPU_NEON; }
#else
static int detect_intel(void) { return 0; }
static int detect_amd_family(void) { return 0; }
static uint32_t detect_features(void) { return 0; }
#endif

/* Written once under pthread_once, which also publishes them to every later caller
 * (its completion synchronises with every return from pthread_once): no data race. */
static pthread_once_t detect_flag = PTHREAD_ONCE_INIT;
static uint32_t features;
static rove_isa isa_cap;
static int intel, amd_family;

static void detect(void) {
  features = detect_features();
  intel = detect_intel();
  amd_family = detect_amd_family();
  isa_cap = rove_isa_cap_parse(getenv("ROVE_ISA"));
}

uint32_t rove_cpu_features(void) {
  pthread_once(&detect_flag, detect);
  return features;
}

rove_isa rove_isa_cap(void) {
  pthread_once(&detect_flag, detect);
  return isa_cap;
}

int rove_cpu_is_intel(void) {
  pthread_once(&detect_flag, detect);
  return intel;
}

int rove_cpu_amd_family(void) {
  pthread_once(&detect_flag, detect);
  return amd_family;
}
