/* SPDX-License-Identifier: MIT */
/* rove_bench: librove's benchmark suite (Google Benchmark through bench/shim).
 * See bench/README.md for what runs, the counters and the environment variables. */
#include <stdio.h>
#include <string.h>

#include "bench_common.h"

/* Default --benchmark_min_time (seconds): enough samples for stable medians while a
 * full run stays within minutes on two cores. */
#define RB_DEFAULT_MIN_TIME 0.25

static void add_cpu_model_context(void) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    const char *v = strchr(line, ':');
    if (!v) break;
    v++;
    while (*v == ' ' || *v == '\t') v++;
    line[strcspn(line, "\n")] = 0;
    rbs_add_context("cpu_model", v);
    break;
  }
  fclose(f);
}

static void add_config_context(void) {
  char buf[128] = "";
  for (int i = 0; i < rb_cfg.n_isas; i++) {
    if (i) strncat(buf, ",", sizeof buf - strlen(buf) - 1);
    strncat(buf, rove_isa_name(rb_cfg.isas[i]), sizeof buf - strlen(buf) - 1);
  }
  rbs_add_context("rove_isas", buf);
  fprintf(stderr, "rove_bench: librove %s, ISAs %s, default threads %d\n",
          rove_version_string(), buf, (int)rove_default_threads());
  rbs_add_context("rove_version", rove_version_string());
  snprintf(buf, sizeof buf, "%d", (int)rove_default_threads());
  rbs_add_context("rove_default_threads", buf);
  snprintf(buf, sizeof buf, "max_n=%d lower_max_n=%d scalar_max_n=%d max_kv=%d",
           (int)rb_cfg.max_n, (int)rb_cfg.lower_max_n, (int)rb_cfg.scalar_max_n,
           (int)rb_cfg.max_kv);
  rbs_add_context("rove_bench_caps", buf);
  add_cpu_model_context();
}

int main(int argc, char **argv) {
  if (rb_config_load()) return 2;
  add_config_context();
  rb_measure_peaks();
  rb_register_attention(0);
  rb_register_rotate(0);
  rb_register_bandwidth(0);
  rb_register_layer(0);
  rb_register_selective(0);
  rb_register_attention(1);
  rb_register_rotate(1);
  rb_register_bandwidth(1);
  rb_register_layer(1);
  rb_register_selective(1);
  return rbs_main(argc, argv, RB_DEFAULT_MIN_TIME);
}
