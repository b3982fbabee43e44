/* SPDX-License-Identifier: MIT */
/* Visibility of key position kp to query position qp (docs/DESIGN.md §1), shared by every ISA
 * and the driver.
 * Differences are taken in int64: positions are any int32. */
#ifndef ROVE_MASK_H
#define ROVE_MASK_H

#include <stdint.h>

static inline int rove_visible(int64_t qp, int64_t kp, int32_t causal, int32_t window) {
  int64_t diff = qp - kp;
  if (causal && diff < 0) return 0;
  if (window > 0) {
    int64_t dist = diff < 0 ? -diff : diff;  /* causal: diff >= 0 here, so dist == diff */
    if (dist >= window) return 0;
  }
  return 1;
}

/* Tile-pair visibility from the position ranges (docs/DESIGN.md §1 visibility over every pair):
 * 0 none visible (skip the tile), 1 all visible (no mask), 2 mixed (mask per element). */
static inline int rove_classify(int64_t qmin, int64_t qmax, int64_t kmin, int64_t kmax,
                                int32_t causal, int32_t window) {
  const int64_t dmin = qmin - kmax, dmax = qmax - kmin; /* range of P_i - p_j */
  if (causal) {
    if (dmax < 0 || (window > 0 && dmin >= window)) return 0;
    return (dmin >= 0 && (window == 0 || dmax < window)) ? 1 : 2;
  }
  if (window == 0) return 1;
  if (dmin >= window || dmax <= -(int64_t)window) return 0;
  return (dmin > -(int64_t)window && dmax < window) ? 1 : 2;
}

#endif
