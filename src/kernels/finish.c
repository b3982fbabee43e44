/* SPDX-License-Identifier: MIT */
/* Finish of a query tile, one version for every ISA: the ISAs' finishes differed only in
 * the row rotation, which is the table's rotate slot called on one row (the same call
 * the ISA's rotate makes per row, so the results are those of the former per-ISA
 * finishes bit for bit; the call costs a few ns against a row's O(d) work).
 *
 *   out_i = R_{P_i}^{-1} (o_i / l_i)   (1/l rides on rot_mul and pass_mul)
 *   lse_i = m_i + ln l_i;  l_i == 0 (no visible key): zeros and -inf.
 * With an attention sink s (one logit of the head, a key of value zero every query sees)
 * the denominator gains exp(s - m_i):
 *   out_i = R_{P_i}^{-1} (o_i / (l_i + exp(s - m_i))),  lse_i = ln(e^{m_i} l_i + e^s),
 * the LSE formed around max(m_i, s) in double (no overflow when s >> m_i, where the
 * output rounds to 0 as it should); l_i == 0: zeros and lse_i = s.
 * Output rows are user memory at any stride: their lines are prefetched a few rows ahead
 * (a prefetch never faults; the address is formed as an integer). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

#define FINISH_AHEAD 8 /* rows */

static inline void prefetch_row(const float *base, int64_t row, int64_t stride, int32_t d) {
  const uintptr_t p = (uintptr_t)base + (uintptr_t)row * (uintptr_t)stride * sizeof(float);
  for (int32_t c = 0; c < d; c += 16)
    __builtin_prefetch((const void *)(p + sizeof(float) * (uintptr_t)c), 1, 3);
}

void rove_finish_f32(const rove_kernels *k, float *out, int64_t out_stride, float *lse,
                     const float *o, const float *m, const float *l, int32_t nq, int32_t d,
                     const rove_rot *rot, const float *sink) {
  for (int32_t i = 0; i < nq; i++) {
    float *y = out + i * out_stride;
    if (nq > 1) prefetch_row(out, i + FINISH_AHEAD, out_stride, d);
    if (l[i] == 0.0f) {
      memset(y, 0, (size_t)d * sizeof(float));
      if (lse) lse[i] = sink ? *sink : -INFINITY;
      continue;
    }
    float inv = 1.0f / l[i];
    if (sink) {
      const double mx = fmax((double)m[i], (double)*sink);
      const double den = (double)l[i] * exp((double)m[i] - mx) + exp((double)*sink - mx);
      inv = (float)(exp((double)m[i] - mx) / den); /* 1 / (l + e^{s - m}) */
      if (lse) lse[i] = (float)(mx + log(den));
    } else if (lse) {
      lse[i] = m[i] + logf(l[i]);
    }
    rove_rot row = *rot;
    if (row.cos) {
      row.cos += (int64_t)i * rove_rot_stride(&row);
      row.sin += (int64_t)i * rove_rot_stride(&row);
    }
    k->rotate(y, 0, o + (int64_t)i * d, 0, 1, d, &row, inv, inv, 1);
  }
}
