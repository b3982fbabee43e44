/* Single-core fp32 FMA peak of an ISA, measured on first use (GFLOP/s; 0 if unknown). */
#ifndef ROVE_CLI_PEAK_H
#define ROVE_CLI_PEAK_H

#include "rove.h"

double cli_fma_peak_gflops(rove_isa isa);

#endif
