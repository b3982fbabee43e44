/* SPDX-License-Identifier: MIT */
/* Single-core fp32 FMA peak: loops of independent FMAs (more accumulators than FMA
 * latency x FMA ports), compiled per function for AVX-512 / AVX2 (x86-64) or NEON
 * (aarch64) and run only where the CPU has the instructions. Shared by rove_bench and
 * `rove bench`. */
#include "fma_peak.h"

#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RB_X86 1
#elif defined(__aarch64__)
#include <arm_neon.h>
#define RB_ARM 1
#endif

/* Each kernel runs @p iters rounds of NACC independent acc = acc * a + b (fixed point 1,
 * so no overflow and no denormals) and returns a value that depends on all of them. */
#define RB_FMA4(F, x, i) x[i] = F(x[i], a, b); x[i + 1] = F(x[i + 1], a, b); \
  x[i + 2] = F(x[i + 2], a, b); x[i + 3] = F(x[i + 3], a, b)

#ifdef RB_X86
enum { NACC_512 = 16, NACC_256 = 12 };

__attribute__((target("avx512f"), noinline)) static float fma_avx512(int64_t iters) {
  __m512 x[NACC_512];
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f);
  for (int i = 0; i < NACC_512; i++) x[i] = _mm512_set1_ps((float)i);
  for (int64_t it = 0; it < iters; it++) {
    RB_FMA4(_mm512_fmadd_ps, x, 0); RB_FMA4(_mm512_fmadd_ps, x, 4);
    RB_FMA4(_mm512_fmadd_ps, x, 8); RB_FMA4(_mm512_fmadd_ps, x, 12);
  }
  __m512 s = x[0];
  for (int i = 1; i < NACC_512; i++) s = _mm512_add_ps(s, x[i]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"), noinline)) static float fma_avx2(int64_t iters) {
  __m256 x[NACC_256];
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
  for (int i = 0; i < NACC_256; i++) x[i] = _mm256_set1_ps((float)i);
  for (int64_t it = 0; it < iters; it++) {
    RB_FMA4(_mm256_fmadd_ps, x, 0); RB_FMA4(_mm256_fmadd_ps, x, 4);
    RB_FMA4(_mm256_fmadd_ps, x, 8);
  }
  __m256 s = x[0];
  for (int i = 1; i < NACC_256; i++) s = _mm256_add_ps(s, x[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
}
#endif

#ifdef RB_ARM
enum { NACC_NEON = 16 };
static float32x4_t neon_fma(float32x4_t acc, float32x4_t a, float32x4_t b) {
  return vfmaq_f32(b, acc, a);
}
__attribute__((noinline)) static float fma_neon(int64_t iters) {
  float32x4_t x[NACC_NEON];
  const float32x4_t a = vdupq_n_f32(0.999f), b = vdupq_n_f32(0.001f);
  for (int i = 0; i < NACC_NEON; i++) x[i] = vdupq_n_f32((float)i);
  for (int64_t it = 0; it < iters; it++) {
    RB_FMA4(neon_fma, x, 0); RB_FMA4(neon_fma, x, 4);
    RB_FMA4(neon_fma, x, 8); RB_FMA4(neon_fma, x, 12);
  }
  float32x4_t s = x[0];
  for (int i = 1; i < NACC_NEON; i++) s = vaddq_f32(s, x[i]);
  return vaddvq_f32(s);
}
#endif

typedef float (*fma_loop_fn)(int64_t iters);

/* The loops are pure functions: the compiler may run one call for several with the same
 * argument, or move a call out of the timed region. Hiding the argument behind an asm
 * barrier (after the start time is read) and using the result (before the end time is
 * read) prevents both. */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float timed_call(fma_loop_fn fn, int64_t iters, double *seconds) {
  const double t0 = cpu_now();
  __asm__ __volatile__("" : "+r"(iters) : : "memory");
  volatile float r = fn(iters);
  *seconds = cpu_now() - t0;
  return r;
}

/* GFLOP/s of @p fn: grow the round count until one run takes >= 20 ms, then best of 5.
 * Timed in CPU time of this thread, so that other processes taking the core away (a
 * shared machine) do not lower the peak. */
static double measure(fma_loop_fn fn, double flops_per_iter) {
  int64_t iters = 1 << 14;
  double t = 0;
  for (;;) {
    timed_call(fn, iters, &t);
    if (t >= 0.02 || iters >= ((int64_t)1 << 40)) break;
    iters *= 2;
  }
  double best = t;
  for (int r = 0; r < 5; r++) {
    double dt = 0;
    timed_call(fn, iters, &dt);
    if (dt < best) best = dt;
  }
  return best > 0 ? flops_per_iter * (double)iters / best * 1e-9 : 0;
}

/* The loop of each vector width, matched to an ISA by its name (rove_isa_name) and run
 * only when the CPU has the features the loop needs. */
static const struct {
  const char *isa;
  fma_loop_fn fn;
  double flops_per_iter;
  uint32_t needs;
} probes[] = {
#ifdef RB_X86
    {"avx512", fma_avx512, NACC_512 * 16 * 2, ROVE_CPU_AVX512F},
    {"avx2", fma_avx2, NACC_256 * 8 * 2, ROVE_CPU_AVX2 | ROVE_CPU_FMA},
#endif
#ifdef RB_ARM
    {"neon", fma_neon, NACC_NEON * 4 * 2, ROVE_CPU_NEON},
#endif
    {NULL, NULL, 0, 0},
};

double rove_fma_peak_gflops(rove_isa isa) {
  const uint32_t f = rove_cpu_features();
  for (int i = 0; probes[i].isa; i++)
    if (strcmp(probes[i].isa, rove_isa_name(isa)) == 0)
      return (f & probes[i].needs) == probes[i].needs
                 ? measure(probes[i].fn, probes[i].flops_per_iter)
                 : 0.0;
  return 0.0;
}
