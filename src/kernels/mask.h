/* Visibility of key position kp to query position qp (DESIGN.md §1), shared by every ISA.
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

#endif
