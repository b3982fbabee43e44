/* SPDX-License-Identifier: MIT */
/* Internal: the ISA registry (isa_registry.c), the one list of instruction sets from
 * which dispatch, the ROVE_ISA cap, names and parsing are derived, and CPU detection
 * (cpu_features.c). Code outside the registry iterates it; it never names the last ISA. */
#ifndef ROVE_ISA_REGISTRY_H
#define ROVE_ISA_REGISTRY_H

#include <stdint.h>

#include "kernels/kernels.h"
#include "rove.h"

/* Architecture of an ISA. A ROVE_ISA cap allows its own ISA, the ISAs of lower level on
 * the same architecture, and scalar. */
typedef enum rove_arch { ROVE_ARCH_ANY = 0, ROVE_ARCH_X86, ROVE_ARCH_ARM } rove_arch;

typedef struct rove_isa_desc {
  rove_isa isa;
  const char *name;          /* rove_isa_name(), the ROVE_ISA value */
  rove_arch arch;
  int32_t level;             /* preference within the architecture: higher wins */
  uint32_t requires;         /* ROVE_CPU_* bits the CPU must all have */
  const rove_kernels *kern;  /* NULL when this build has no kernels for it */
} rove_isa_desc;

/* Descriptor of a real ISA (SCALAR .. ROVE_ISA_COUNT-1), NULL otherwise. */
const rove_isa_desc *rove_isa_desc_of(rove_isa isa);
/* The table for an ISA that is compiled in and runs on this CPU, or NULL. */
const rove_kernels *rove_kernels_for(rove_isa isa);
/* AUTO -> the best ISA under the cap; an explicit ISA must be compiled in and runnable
 * (UNSUPPORTED otherwise; INVALID_ARGUMENT for a value that is no ISA). */
rove_status rove_select_isa(rove_isa requested, rove_isa *chosen);

/* cpu_features.c: the ROVE_ISA cap read once with the features (AUTO when unset or not an
 * ISA name), and the parser it uses. */
rove_isa rove_isa_cap(void);
rove_isa rove_isa_cap_parse(const char *s);
/* cpu_features.c: 1 on an Intel x86 CPU (cpuid vendor "GenuineIntel"), else 0. Only
 * tuning choices read it (rove_rows_args.paced), never a result. */
int rove_cpu_is_intel(void);
/* cpu_features.c: the x86 family of an AMD CPU (0x19 Zen 3 / Zen 4, 0x1A Zen 5), else 0.
 * Likewise only for tuning choices (plan.c: rows_zen5). */
int rove_cpu_amd_family(void);

#endif
