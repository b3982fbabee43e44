/* SPDX-License-Identifier: MIT */
/* Shared state and helpers of the rove_bench suite (bench/README.md). */
#ifndef ROVE_BENCH_COMMON_H
#define ROVE_BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "rove.h"
#include "rove_bench_shim.h"

#define RB_MAX_THREADS 8
#define RB_N_ISAS ROVE_ISA_COUNT /* indexable by rove_isa */

/* What to run; filled from the environment by rb_config_load() (bench/README.md). */
typedef struct rb_config {
  int32_t max_n;        /* ROVE_BENCH_MAX_N: prefill n cap, best SIMD ISA (16384) */
  int32_t lower_max_n;  /* ROVE_BENCH_LOWER_MAX_N: prefill cap, other SIMD ISAs (8192) */
  int32_t scalar_max_n; /* ROVE_BENCH_SCALAR_MAX_N: prefill cap, scalar kernels (1024) */
  int32_t max_kv;       /* ROVE_BENCH_MAX_KV: decode cache length cap (32768) */
  int32_t threads[RB_MAX_THREADS]; /* ROVE_BENCH_THREADS: "1,2" */
  int n_threads;
  uint32_t isa_mask;    /* ROVE_BENCH_ISAS: "scalar,avx2,avx512,neon"; default all */
  rove_isa isas[RB_N_ISAS]; /* ISAs to run (available and in the mask), best first */
  int n_isas;
  double peak_gflops[RB_N_ISAS]; /* single-core FMA peak per ISA; 0 = not measured */
  double peak_best;     /* the largest of them (the machine's single-core limit) */
} rb_config;

extern rb_config rb_cfg;

/* Read the environment and the list of ISAs. Returns 0, or -1 after printing why. */
int rb_config_load(void);
/* Measure the FMA peaks (bench_peak.c) and publish them as report context. */
void rb_measure_peaks(void);
/* The single-core peak the % of peak of a run on @p isa is taken against: the ISA's own
 * vector FMA peak; for the scalar kernels the machine's best. 0 if unknown. */
double rb_peak_for(rove_isa isa);

/* Registration of the benchmark families (bench_attention.c, bench_rotate.c,
 * bench_bandwidth.c). `smoke` registers tiny cases named smoke/... instead. */
void rb_register_attention(int smoke);
void rb_register_rotate(int smoke);
void rb_register_bandwidth(int smoke);
void rb_register_layer(int smoke); /* bench_layer.c */
void rb_register_selective(int smoke); /* bench_selective.c: GLA, explicit angles */

/* Sum @p bytes (a multiple of 8, 8-byte aligned) of @p buf as 64-bit words on @p threads
 * threads: the read-bandwidth reference (bench_bandwidth.c). *seconds: the read's time
 * (one thread: CPU time; more: wall clock from a start barrier, thread creation excluded). */
uint64_t rb_read_sum(const void *buf, size_t bytes, int threads, double *seconds);

/* ---- helpers (bench_common.c) ------------------------------------------------------ */
double rb_now(void);                               /* monotonic seconds */
double rb_cpu_now(void);                           /* CPU seconds of the calling thread */
float *rb_alloc_floats(size_t n);                  /* 64-byte aligned, NULL on failure */
void rb_fill_uniform(float *x, size_t n, uint64_t seed); /* uniform in [-1, 1) */
double rb_median(double *x, size_t n);             /* sorts x */

/* A growable list of samples (seconds). */
typedef struct rb_samples {
  double *v;
  size_t n, cap;
} rb_samples;
int rb_samples_push(rb_samples *s, double x); /* 0, or -1 when out of memory */
void rb_samples_free(rb_samples *s);

/* Register @p fn as "<name>" with the given argument names; returns NULL on failure. */
rbs_bench *rb_family(const char *name, rbs_fn fn, void *user, const char *const *arg_names,
                     int n_args);

/* A benchmark registered as two families of the same name: argument lists with one
 * thread measure the CPU time of the calling thread (immune to other processes taking
 * the core away), those with more threads the wall clock ("/real_time" in the name).
 * The threads are librove's: with n_threads = 1 it runs on the calling thread. A family
 * is registered when its first argument list is added (an empty one would still run). */
typedef struct rb_pair {
  char name[64];
  rbs_fn fn;
  void *user;
  const char *const *arg_names;
  int n_args;
  rbs_unit unit;
  rbs_bench *fam[2]; /* [0] one thread (CPU time), [1] several (real time) */
} rb_pair;
void rb_pair_add(rb_pair *p, const int64_t *args, int32_t threads);

#endif /* ROVE_BENCH_COMMON_H */
