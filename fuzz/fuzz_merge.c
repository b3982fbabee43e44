/* SPDX-License-Identifier: MIT */
/* rove_merge_partials over fuzzed part counts and shapes (0, negative, past
 * ROVE_MAX_HEAD_DIM, INT32_MAX batches), LSEs with NaN, +-inf and +-3e38, outputs in place
 * (over part 0), overlapping another part or the pointer array, a NULL lse, a NULL part.
 * Invariants: a valid status; bad calls refused with nothing written; a valid call
 * equals a float64 merge (NaN where an LSE is NaN or +inf, 0 and -inf where every part
 * is -inf). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#define H "fuzz_merge"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader rd;
  fz_init(&rd, data, size);
  static const int32_t dims[] = {1, 2, 3, 8, 16, 33, 0, -1, 1024, 1025, INT32_MAX, 4};
  int32_t np = fz_range(&rd, -1, 5);
  int32_t batch = fz_range(&rd, 0, 3), ql = fz_range(&rd, 0, 3), nh = fz_range(&rd, 0, 3);
  int32_t hd = fz_pick_i32(&rd, dims, 12);
  if (fz_u8(&rd) > 250) batch = INT32_MAX;
  int valid_shape = np >= 1 && batch > 0 && ql > 0 && nh > 0 && hd > 0 && hd <= 1024;
  int64_t rows = valid_shape ? (int64_t)batch * ql * nh : 1, n_out = rows * (valid_shape ? hd : 1);
  if (n_out > (1 << 20)) { /* a valid shape too big to allocate: not called (librove
                             * would read the claimed extent, past any small buffer) */
    return 0;
  }
  int npp = np > 0 ? np : 1;
  float **outs = calloc((size_t)npp + 1, sizeof *outs), **lses = calloc((size_t)npp + 1, sizeof *lses);
  for (int p = 0; p < npp; p++) {
    outs[p] = fz_alloc((size_t)n_out * 4);
    lses[p] = fz_alloc((size_t)rows * 4);
    fz_fill_f32(&rd, outs[p], (size_t)n_out, 3.0f);
    fz_fill_f32(&rd, lses[p], (size_t)rows, 20.0f);
    fz_specials_f32(&rd, outs[p], (size_t)n_out, NULL);
    for (int64_t r = 0; r < rows; r++) {
      uint8_t b = fz_u8(&rd);
      if (b >= 240) lses[p][r] = -INFINITY;
      else if (b == 239) lses[p][r] = NAN;
      else if (b == 238) lses[p][r] = INFINITY;
      else if (b == 237) lses[p][r] = 3e38f;
      else if (b == 236) lses[p][r] = -3e38f;
    }
  }
  /* double reference before any in-place call */
  double *ref = calloc((size_t)n_out, sizeof *ref), *rl = calloc((size_t)rows, sizeof *rl);
  for (int64_t r = 0; r < rows && valid_shape; r++) {
    int64_t b = r / ((int64_t)nh * ql), h = (r / ql) % nh, i = r % ql;
    int64_t e = ((b * ql + i) * nh + h) * hd;
    double m = -INFINITY;
    int nan = 0;
    for (int p = 0; p < np; p++) {
      float x = lses[p][r];
      if (isnan(x)) nan = 1; else if (x > m) m = x;
    }
    if (nan || m == INFINITY) { rl[r] = NAN; for (int c = 0; c < hd; c++) ref[e + c] = NAN; continue; }
    if (m == -INFINITY) { rl[r] = -INFINITY; continue; }
    double s = 0;
    for (int p = 0; p < np; p++) {
      if (lses[p][r] == -INFINITY) continue;
      double w = exp((double)lses[p][r] - m);
      s += w;
      for (int c = 0; c < hd; c++) ref[e + c] += w * outs[p][e + c];
    }
    for (int c = 0; c < hd; c++) ref[e + c] /= s;
    rl[r] = m + log(s);
  }
  int mode = fz_u8(&rd) % 8;
  float *out = fz_canary_alloc((size_t)n_out * 4), *lse = fz_canary_alloc((size_t)rows * 4);
  float *o_arg = out, *l_arg = lse;
  int inplace = 0, overlap = 0, nulls = 0;
  if (mode == 1) o_arg = outs[0], l_arg = lses[0], inplace = 1;
  if (mode == 2) l_arg = NULL;
  if (mode == 3 && npp > 1) o_arg = outs[1], overlap = 1;
  float *saved = outs[npp - 1];
  if (mode == 4) outs[npp - 1] = NULL, nulls = 1;
  if (mode == 5) o_arg = (float *)(void *)outs, overlap = n_out * 4 >= (int64_t)(npp * sizeof(float *)) ? 1 : 2;
  if (mode == 6 && npp > 1) o_arg = outs[0], l_arg = lses[1], overlap = 1;
  if (overlap == 2) { overlap = 0; o_arg = out; }
  rove_status st = rove_merge_partials(np, (const float *const *)outs, (const float *const *)lses,
                                       batch, ql, nh, hd, o_arg, l_arg);
  fz_check_status(H, st);
  if (!valid_shape || nulls || overlap) FZ_CHECK(H, st != ROVE_OK, "bad merge accepted");
  else FZ_CHECK(H, st == ROVE_OK, "valid merge refused");
  if (st != ROVE_OK) {
    FZ_CHECK(H, fz_untouched(out, (size_t)n_out * 4), "out written on failure");
    FZ_CHECK(H, fz_untouched(lse, (size_t)rows * 4), "lse written on failure");
  } else {
    for (int64_t i = 0; i < n_out; i++) {
      double y = o_arg[i], e = ref[i];
      if (isnan(e)) FZ_CHECK(H, isnan(y), "NaN expected");
      else if (isfinite(e)) FZ_CHECK(H, fabs(y - e) <= 1e-5 * (1 + fabs(e)) || (isinf(y) && fabs(e) > 3e38), "merge value");
    }
    if (l_arg)
      for (int64_t r = 0; r < rows; r++) {
        double y = l_arg[r], e = rl[r];
        if (isnan(e)) FZ_CHECK(H, isnan(y), "lse NaN expected");
        else if (isinf(e)) FZ_CHECK(H, y == e, "lse inf");
        else FZ_CHECK(H, fabs(y - e) <= 1e-5 * (1 + fabs(e)) || isinf(y), "lse value");
      }
  }
  for (int p = 0; p < npp; p++) free(outs[p]), free(lses[p]);
  if (nulls) free(saved);
  free(outs), free(lses), free(out), free(lse), free(ref), free(rl);
  return 0;
}
