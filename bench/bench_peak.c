/* SPDX-License-Identifier: MIT */
/* Single-core fp32 FMA peaks measured at start-up (fma_peak.c) and published as report
 * context. The % of peak counters of the suite divide by these (times the thread count). */
#include <stdio.h>

#include "bench_common.h"

#include "fma_peak.h"

static void publish(rove_isa isa, double gflops) {
  char key[64], val[64];
  rb_cfg.peak_gflops[isa] = gflops;
  if (gflops > rb_cfg.peak_best) rb_cfg.peak_best = gflops;
  snprintf(key, sizeof key, "peak_gflops_%s", rove_isa_name(isa));
  snprintf(val, sizeof val, "%.2f", gflops);
  rbs_add_context(key, val);
  fprintf(stderr, "rove_bench: single-core fp32 FMA peak (%s): %.1f GFLOP/s\n",
          rove_isa_name(isa), gflops);
}

void rb_measure_peaks(void) {
  for (int i = ROVE_ISA_COUNT - 1; i > ROVE_ISA_SCALAR; i--) { /* vector ISAs, best first */
    const double g = rove_fma_peak_gflops((rove_isa)i);
    if (g > 0) publish((rove_isa)i, g);
  }
  if (rb_cfg.peak_best <= 0)
    fprintf(stderr, "rove_bench: no FMA peak measured on this CPU: pct_peak reads 0\n");
}
