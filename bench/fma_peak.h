/* SPDX-License-Identifier: MIT */
/* Single-core fp32 FMA peak of a vector ISA, measured now (GFLOP/s; 0 when this CPU lacks
 * the ISA or it has no vector FMA loop here, e.g. scalar). Takes ~0.1-0.2 s per call; timed
 * in the calling thread's CPU time, so other processes on the core do not lower it. */
#ifndef ROVE_FMA_PEAK_H
#define ROVE_FMA_PEAK_H

#include <stdint.h>

#include "rove.h"

double rove_fma_peak_gflops(rove_isa isa);

#endif
