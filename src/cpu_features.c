/* CPU feature detection (once) and the choice of kernel table.
 *
 * x86: cpuid leaf 1 / 7 for the instruction sets, xgetbv(0) for the OS saving the
 * ymm (bits 1,2) and zmm/opmask (bits 5,6,7) state. aarch64: NEON is baseline; fp16,
 * bf16 and SVE from getauxval. ROVE_ISA=scalar|avx2|avx512|neon caps the choice. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

static uint32_t detect_features(void) {
  unsigned a, b, c, d;
  uint32_t f = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, avx = (c >> 28) & 1;
  if (!osxsave || !avx) return 0;
  uint64_t xcr0 = xgetbv0();
  int ymm_ok = (xcr0 & 0x6) == 0x6, zmm_ok = (xcr0 & 0xE6) == 0xE6;
  if (!ymm_ok) return 0;
  if (fma) f |= ROVE_CPU_FMA;
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
static uint32_t detect_features(void) {
  uint32_t f = ROVE_CPU_NEON;
  unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  if (hw & (1ul << 9)) f |= ROVE_CPU_FP16;   /* HWCAP_FPHP */
  if (hw & (1ul << 22)) f |= ROVE_CPU_SVE;   /* HWCAP_SVE */
  if (hw2 & (1ul << 14)) f |= ROVE_CPU_BF16; /* HWCAP2_BF16 */
  return f;
}
#elif defined(__aarch64__)
static uint32_t detect_features(void) { return ROVE_CPU_NEON; }
#else
static uint32_t detect_features(void) { return 0; }
#endif

/* Detected once; both values are pure functions of the machine and environment, so a
 * race between first callers only computes the same numbers twice. */
static volatile int detected;
static volatile uint32_t features;
static volatile rove_isa isa_cap;

static rove_isa parse_cap(const char *s) {
  for (int i = ROVE_ISA_SCALAR; i <= ROVE_ISA_NEON; i++)
    if (s && strcmp(s, rove_isa_name((rove_isa)i)) == 0) return (rove_isa)i;
  return ROVE_ISA_AUTO;
}

static void detect_once(void) {
  if (__atomic_load_n(&detected, __ATOMIC_ACQUIRE)) return;
  features = detect_features();
  isa_cap = parse_cap(getenv("ROVE_ISA"));
  __atomic_store_n(&detected, 1, __ATOMIC_RELEASE);
}

uint32_t rove_cpu_features(void) {
  detect_once();
  return features;
}

const rove_kernels *rove_kernels_for(rove_isa isa) {
  switch (isa) {
    case ROVE_ISA_SCALAR: return &rove_kernels_scalar;
#if defined(ROVE_HAVE_AVX2)
    case ROVE_ISA_AVX2: return &rove_kernels_avx2;
#endif
#if defined(ROVE_HAVE_AVX512)
    case ROVE_ISA_AVX512: return &rove_kernels_avx512;
#endif
#if defined(ROVE_HAVE_NEON)
    case ROVE_ISA_NEON: return &rove_kernels_neon;
#endif
    default: return NULL;
  }
}

static int cpu_runs(rove_isa isa) {
  uint32_t f = rove_cpu_features();
  const uint32_t avx512 = ROVE_CPU_AVX512F | ROVE_CPU_AVX512DQ | ROVE_CPU_AVX512VL | ROVE_CPU_AVX512BW;
  switch (isa) {
    case ROVE_ISA_SCALAR: return 1;
    case ROVE_ISA_AVX2: return (f & (ROVE_CPU_AVX2 | ROVE_CPU_FMA)) == (ROVE_CPU_AVX2 | ROVE_CPU_FMA);
    case ROVE_ISA_AVX512: return (f & avx512) == avx512 && cpu_runs(ROVE_ISA_AVX2);
    case ROVE_ISA_NEON: return (f & ROVE_CPU_NEON) != 0;
    default: return 0;
  }
}

int rove_isa_available(rove_isa isa) {
  if (isa == ROVE_ISA_AUTO) return 1;
  return rove_kernels_for(isa) != NULL && cpu_runs(isa);
}

rove_isa rove_best_isa(void) {
  detect_once();
  static const rove_isa order[] = {ROVE_ISA_AVX512, ROVE_ISA_AVX2, ROVE_ISA_NEON};
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
    rove_isa isa = order[i];
    if (isa_cap != ROVE_ISA_AUTO && isa_cap != isa) {
      /* A cap allows its own ISA and those below it on the same architecture. */
      if (isa_cap == ROVE_ISA_SCALAR || isa_cap == ROVE_ISA_NEON) continue;
      if (isa_cap == ROVE_ISA_AVX2 && isa == ROVE_ISA_AVX512) continue;
    }
    if (rove_isa_available(isa)) return isa;
  }
  return ROVE_ISA_SCALAR;
}

const char *rove_isa_name(rove_isa isa) {
  switch (isa) {
    case ROVE_ISA_AUTO: return "auto";
    case ROVE_ISA_SCALAR: return "scalar";
    case ROVE_ISA_AVX2: return "avx2";
    case ROVE_ISA_AVX512: return "avx512";
    case ROVE_ISA_NEON: return "neon";
  }
  return "unknown";
}

/* AUTO -> best under the cap; an explicit ISA must be compiled in and runnable. */
rove_status rove_select_isa(rove_isa requested, rove_isa *chosen) {
  if (requested == ROVE_ISA_AUTO) {
    *chosen = rove_best_isa();
  } else if (requested < ROVE_ISA_SCALAR || requested > ROVE_ISA_NEON) {
    return ROVE_ERR_INVALID_ARGUMENT;
  } else if (!rove_isa_available(requested)) {
    return ROVE_ERR_UNSUPPORTED;
  } else {
    *chosen = requested;
  }
  const char *verbose = getenv("ROVE_VERBOSE");
  if (verbose && strcmp(verbose, "1") == 0)
    fprintf(stderr, "librove: plan uses isa=%s (requested %s, best %s)\n", rove_isa_name(*chosen),
            rove_isa_name(requested), rove_isa_name(rove_best_isa()));
  return ROVE_OK;
}
