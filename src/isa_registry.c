/* SPDX-License-Identifier: MIT */
/* The ISA registry: one row per instruction set, in rove_isa order. Everything about an
 * ISA that is not its kernels lives here: its name (rove_isa_name, the ROVE_ISA value),
 * its architecture and preference level (rove_best_isa and the cap rule), the CPU
 * features it needs (rove_isa_available), and its kernel table (present only when CMake
 * compiled its folder: cmake/RoveIsa.cmake defines ROVE_HAVE_<ISA>).
 *
 * Adding an ISA: a folder src/kernels/<isa>/ with its table-<isa>.c, one rove_add_isa()
 * line in CMakeLists.txt, one enum value appended in rove.h, and one row below
 * (docs/architecture.md, "How to add an ISA"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa_registry.h"

#if defined(ROVE_HAVE_AVX2)
extern const rove_kernels rove_kernels_avx2;
#define ROVE_TABLE_AVX2 (&rove_kernels_avx2)
#else
#define ROVE_TABLE_AVX2 NULL
#endif
#if defined(ROVE_HAVE_AVX512)
extern const rove_kernels rove_kernels_avx512;
#define ROVE_TABLE_AVX512 (&rove_kernels_avx512)
#else
#define ROVE_TABLE_AVX512 NULL
#endif
#if defined(ROVE_HAVE_NEON)
extern const rove_kernels rove_kernels_neon;
#define ROVE_TABLE_NEON (&rove_kernels_neon)
#else
#define ROVE_TABLE_NEON NULL
#endif
extern const rove_kernels rove_kernels_scalar;

/* x86-64-v3's vector part: AVX2, FMA and F16C (every AVX2 CPU since Haswell / Zen has all three) */
#define ROVE_CPU_AVX2_FMA (ROVE_CPU_AVX2 | ROVE_CPU_FMA | ROVE_CPU_F16C)
#define ROVE_CPU_AVX512_FDVB \
  (ROVE_CPU_AVX512F | ROVE_CPU_AVX512DQ | ROVE_CPU_AVX512VL | ROVE_CPU_AVX512BW)

static const rove_isa_desc registry[] = {
    /* isa             name      arch           level requires                              table */
    {ROVE_ISA_SCALAR, "scalar", ROVE_ARCH_ANY, 0, 0, &rove_kernels_scalar},
    {ROVE_ISA_AVX2, "avx2", ROVE_ARCH_X86, 1, ROVE_CPU_AVX2_FMA, ROVE_TABLE_AVX2},
    {ROVE_ISA_AVX512, "avx512", ROVE_ARCH_X86, 2, ROVE_CPU_AVX2_FMA | ROVE_CPU_AVX512_FDVB,
     ROVE_TABLE_AVX512},
    {ROVE_ISA_NEON, "neon", ROVE_ARCH_ARM, 1, ROVE_CPU_NEON, ROVE_TABLE_NEON},
};
#define N_ISAS ((int)(sizeof registry / sizeof registry[0]))
_Static_assert(sizeof registry / sizeof registry[0] == ROVE_ISA_COUNT - 1,
               "one registry row per rove_isa value after AUTO, in enum order");

const rove_isa_desc *rove_isa_desc_of(rove_isa isa) {
  if ((int)isa < ROVE_ISA_SCALAR || (int)isa >= ROVE_ISA_COUNT) return NULL;
  return &registry[isa - ROVE_ISA_SCALAR];
}

const char *rove_isa_name(rove_isa isa) {
  if (isa == ROVE_ISA_AUTO) return "auto";
  const rove_isa_desc *d = rove_isa_desc_of(isa);
  return d ? d->name : "unknown";
}

rove_status rove_isa_parse(const char *name, rove_isa *isa) {
  if (!name || !isa) return ROVE_ERR_INVALID_ARGUMENT;
  for (int i = ROVE_ISA_AUTO; i < ROVE_ISA_COUNT; i++)
    if (strcmp(name, rove_isa_name((rove_isa)i)) == 0) {
      *isa = (rove_isa)i;
      return ROVE_OK;
    }
  return ROVE_ERR_INVALID_ARGUMENT;
}

rove_isa rove_isa_cap_parse(const char *s) {
  rove_isa isa = ROVE_ISA_AUTO;
  return rove_isa_parse(s, &isa) == ROVE_OK ? isa : ROVE_ISA_AUTO;
}

static int cpu_runs(const rove_isa_desc *d) {
  return (rove_cpu_features() & d->requires) == d->requires;
}

const rove_kernels *rove_kernels_for(rove_isa isa) {
  const rove_isa_desc *d = rove_isa_desc_of(isa);
  return d && d->kern && cpu_runs(d) ? d->kern : NULL;
}

int rove_isa_available(rove_isa isa) {
  return isa == ROVE_ISA_AUTO || rove_kernels_for(isa) != NULL;
}

/* A cap allows its own ISA, lower levels of its architecture, and scalar. */
static int cap_allows(rove_isa cap, const rove_isa_desc *d) {
  if (cap == ROVE_ISA_AUTO || cap == d->isa || d->arch == ROVE_ARCH_ANY) return 1;
  const rove_isa_desc *c = rove_isa_desc_of(cap);
  return c->arch == d->arch && d->level < c->level;
}

rove_isa rove_best_isa(void) {
  const rove_isa cap = rove_isa_cap();
  const rove_isa_desc *best = rove_isa_desc_of(ROVE_ISA_SCALAR);
  for (int i = 0; i < N_ISAS; i++) {
    const rove_isa_desc *d = &registry[i];
    if (d->level > best->level && cap_allows(cap, d) && rove_kernels_for(d->isa)) best = d;
  }
  return best->isa;
}

rove_status rove_select_isa(rove_isa requested, rove_isa *chosen) {
  if (requested == ROVE_ISA_AUTO) {
    *chosen = rove_best_isa();
  } else if (!rove_isa_desc_of(requested)) {
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
