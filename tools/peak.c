/* The single-core FMA peak: chains of independent FMAs (enough to cover latency x ports)
 * for ~50 ms, compiled per function for the ISA, run only where the CPU has it. Timed in
 * thread CPU time, so another process sharing the core does not lower it. */
#include "peak.h"


#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <time.h>

static double thread_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

#define PEAK_ITERS 8000000

__attribute__((target("avx512f"))) static double peak_avx512(void) {
  __m512 acc[12];
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < 12; i++) acc[i] = _mm512_set1_ps((float)i);
  const double t0 = thread_ms();
  for (int it = 0; it < PEAK_ITERS; it++)
    for (int i = 0; i < 12; i++) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  const double ms = thread_ms() - t0;
  volatile float sink = 0;
  for (int i = 0; i < 12; i++) sink += _mm512_reduce_add_ps(acc[i]);
  (void)sink;
  return 2.0 * 16 * 12 * (double)PEAK_ITERS / (ms * 1e6);
}

__attribute__((target("avx2,fma"))) static double peak_avx2(void) {
  __m256 acc[12];
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int i = 0; i < 12; i++) acc[i] = _mm256_set1_ps((float)i);
  const double t0 = thread_ms();
  for (int it = 0; it < PEAK_ITERS; it++)
    for (int i = 0; i < 12; i++) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  const double ms = thread_ms() - t0;
  float lanes[8];
  volatile float sink = 0;
  for (int i = 0; i < 12; i++) {
    _mm256_storeu_ps(lanes, acc[i]);
    sink += lanes[0];
  }
  (void)sink;
  return 2.0 * 8 * 12 * (double)PEAK_ITERS / (ms * 1e6);
}
#endif

double cli_fma_peak_gflops(rove_isa isa) {
  static double cached[ROVE_ISA_NEON + 1];
  if (isa < ROVE_ISA_SCALAR || isa > ROVE_ISA_NEON || !rove_isa_available(isa)) return 0.0;
  if (cached[isa] > 0.0) return cached[isa];
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa == ROVE_ISA_AVX512) cached[isa] = peak_avx512();
  if (isa == ROVE_ISA_AVX2) cached[isa] = peak_avx2();
#endif
  return cached[isa];
}
