/* SPDX-License-Identifier: MIT */
/* rove_selective_angles (and rove_selective_temperatures) with fuzzed sizes, increments
 * phi (NaN/Inf sometimes), temperatures, carries in and out (separate or in place).
 * Invariants: a valid status; non-finite phi / temp / carry_in rejected with angles and
 * carry_out untouched; on success the angles and carry are bit for bit the sequential
 * double sum the contract defines, and splitting the tokens in two calls that pass the
 * carry gives the same bits. rove_selective_angles_backward on the same inputs: the same
 * acceptance, and d_phi / d_carry_in bit for bit the reverse running sum. The batch rows
 * as packed sequences (rove_selective_angles_packed): the same bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#define H "fuzz_selective_angles"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader rd;
  fz_init(&rd, data, size);
  int32_t batch = fz_range(&rd, 1, 2), seq = fz_range(&rd, 1, 12);
  int32_t heads = fz_range(&rd, 1, 3), pairs = fz_range(&rd, 1, 8);
  if (fz_u8(&rd) >= 250) seq = fz_range(&rd, -1, 0);
  if (fz_u8(&rd) >= 250) pairs = fz_range(&rd, -1, 0);
  int bad = seq <= 0 || pairs <= 0;
  int64_t ns = seq > 0 ? seq : 1, np = pairs > 0 ? pairs : 1;
  size_t n = (size_t)(batch * ns * heads * np), nc = (size_t)(batch * heads * np);

  float *phi = malloc(n * sizeof *phi);
  static const float amps[] = {1.0f, 1e-3f, 100.0f, 3e38f};
  fz_fill_f32(&rd, phi, n, amps[fz_u8(&rd) % 4]);
  fz_specials_f32(&rd, phi, n, NULL); /* NaN, Inf or a finite +-3e38 */
  int bad_in = 0;
  for (size_t i = 0; i < n; i++) bad_in |= !isfinite(phi[i]);
  double *temp = NULL;
  if (fz_bool(&rd)) {
    temp = malloc((size_t)np * sizeof *temp);
    fz_fill_f64(&rd, temp, (size_t)np, fz_bool(&rd) ? 1.0 : 1e300);
    bad_in |= fz_specials_f64(&rd, temp, (size_t)np, NULL) > 0;
  }
  double *carry_in = NULL;
  if (fz_bool(&rd)) {
    carry_in = malloc(nc * sizeof *carry_in);
    fz_fill_f64(&rd, carry_in, nc, fz_bool(&rd) ? 10.0 : 1e6);
    bad_in |= fz_specials_f64(&rd, carry_in, nc, NULL) > 0;
  }
  double *carry_orig = NULL;
  if (carry_in) {
    carry_orig = malloc(nc * sizeof *carry_orig);
    memcpy(carry_orig, carry_in, nc * sizeof *carry_in);
  }
  int carry_mode = fz_u8(&rd) % 3; /* 0: none, 1: separate, 2: in place (== carry_in) */
  if (carry_mode == 2 && !carry_in) carry_mode = 1;
  double *carry_out = carry_mode == 1 ? fz_canary_alloc(nc * sizeof(double))
                      : carry_mode == 2 ? carry_in : NULL;
  double *angles = fz_canary_alloc(n * sizeof *angles);

  rove_status st = rove_selective_angles(batch, seq, heads, pairs, phi, temp, carry_in,
                                         carry_out, angles);
  fz_check_status(H, st);
  if (bad || bad_in) FZ_CHECK(H, st != ROVE_OK, "bad size or non-finite input accepted");
  if (st != ROVE_OK) {
    FZ_CHECK(H, fz_untouched(angles, n * sizeof *angles), "angles written on failure");
    if (carry_mode == 1)
      FZ_CHECK(H, fz_untouched(carry_out, nc * sizeof(double)), "carry_out written on failure");
    if (carry_mode == 2)
      FZ_CHECK(H, memcmp(carry_in, carry_orig, nc * sizeof(double)) == 0,
               "in-place carry changed on failure");
  } else {
    /* the definition, in double */
    double t_def[ROVE_MAX_HEAD_DIM / 2];
    if (!temp) FZ_CHECK(H, rove_selective_temperatures(pairs, t_def) == ROVE_OK, "temperatures");
    const double *t = temp ? temp : t_def;
    for (int64_t b = 0; b < batch; b++)
      for (int64_t h = 0; h < heads; h++)
        for (int64_t k = 0; k < np; k++) {
          double c = carry_orig ? carry_orig[(b * heads + h) * np + k] : 0.0;
          for (int64_t s = 0; s < ns; s++) {
            size_t at = (size_t)(((b * ns + s) * heads + h) * np + k);
            c += (double)phi[at];
            double want = t[k] * c;
            FZ_CHECK(H, memcmp(&want, &angles[at], sizeof want) == 0 || (isnan(want) && isnan(angles[at])),
                     "angle differs from the sequential double sum");
          }
          if (carry_out)
            FZ_CHECK(H, memcmp(&c, &carry_out[(b * heads + h) * np + k], sizeof c) == 0,
                     "carry_out differs from the sum");
        }
    /* two chunks with the carry passed on: the same bits */
    if (ns >= 2 && batch == 1) {
      int32_t s1 = fz_range(&rd, 1, (int32_t)ns - 1);
      double *carry = malloc(nc * sizeof *carry);
      double *ang2 = malloc(n * sizeof *ang2);
      size_t n1 = (size_t)(s1 * heads * np);
      rove_status a1 = rove_selective_angles(1, s1, heads, pairs, phi, temp, carry_orig, carry, ang2);
      FZ_CHECK(H, a1 == ROVE_OK, "first chunk failed");
      int carry_finite = 1; /* a sum may overflow to inf: the next call rejects that carry */
      for (size_t i = 0; i < nc; i++) carry_finite &= isfinite(carry[i]) != 0;
      if (carry_finite) {
        rove_status a2 = rove_selective_angles(1, seq - s1, heads, pairs, phi + n1, temp,
                                               carry, carry, ang2 + n1);
        FZ_CHECK(H, a2 == ROVE_OK, "second chunk failed");
        FZ_CHECK(H, memcmp(ang2, angles, n * sizeof *ang2) == 0, "chunked angles differ");
      }
      free(carry);
      free(ang2);
    }
  }
  /* The batch rows as packed sequences (rove_selective_angles_packed, cu_seqlens): the
   * same acceptance and, on success, the same bits; a decreasing cu_seqlens is refused. */
  if (!bad) {
    int32_t cu[3] = {0, (int32_t)ns, (int32_t)(2 * ns)};
    double *ang3 = fz_canary_alloc(n * sizeof *ang3), *co3 = fz_canary_alloc(nc * sizeof *co3);
    const rove_status a3 = rove_selective_angles_packed(batch, cu, heads, pairs, phi, temp,
                                                        carry_orig, co3, ang3);
    fz_check_status(H, a3);
    FZ_CHECK(H, (a3 == ROVE_OK) == (st == ROVE_OK), "packed and batch calls disagree");
    if (a3 == ROVE_OK && st == ROVE_OK) {
      FZ_CHECK(H, memcmp(ang3, angles, n * sizeof *ang3) == 0, "packed angles differ");
      if (carry_out)
        FZ_CHECK(H, memcmp(co3, carry_out, nc * sizeof *co3) == 0, "packed carry differs");
    }
    if (batch == 2) {
      int32_t down[3] = {0, (int32_t)ns + 1, (int32_t)ns};
      double *ang4 = fz_canary_alloc(n * sizeof *ang4);
      FZ_CHECK(H, rove_selective_angles_packed(2, down, heads, pairs, phi, temp, NULL, NULL,
                                               ang4) == ROVE_ERR_INVALID_ARGUMENT,
               "a decreasing cu_seqlens was accepted");
      FZ_CHECK(H, fz_untouched(ang4, n * sizeof *ang4), "angles written on a bad cu_seqlens");
      free(ang4);
    }
    free(ang3);
    free(co3);
  }
  /* The backward with the same inputs: the same acceptance (bad sizes and non-finite
   * phi / temp / carry_in rejected, outputs untouched), and on success d_phi equals the
   * reverse running double sum of the contract, bit for bit. */
  if (!bad && fz_bool(&rd)) {
    double *da = malloc(n * sizeof *da), *dco = NULL;
    fz_fill_f64(&rd, da, n, 1.0);
    if (fz_bool(&rd)) dco = malloc(nc * sizeof *dco), fz_fill_f64(&rd, dco, nc, 1.0);
    float *dphi = fz_canary_alloc(n * sizeof *dphi);
    double *dci = fz_bool(&rd) ? fz_canary_alloc(nc * sizeof *dci) : NULL;
    double *dtm = fz_bool(&rd) ? fz_canary_alloc((size_t)np * sizeof *dtm) : NULL;
    rove_status bs = rove_selective_angles_backward(batch, seq, heads, pairs, phi, temp,
                                                    carry_orig, da, dco, dphi, dci, dtm);
    fz_check_status(H, bs);
    if (bad_in) FZ_CHECK(H, bs != ROVE_OK, "backward accepted non-finite input");
    if (!bad_in) FZ_CHECK(H, bs == ROVE_OK, "backward refused what the forward took");
    if (bs != ROVE_OK) {
      FZ_CHECK(H, fz_untouched(dphi, n * sizeof *dphi), "d_phi written on failure");
    } else {
      double t_def[ROVE_MAX_HEAD_DIM / 2];
      if (!temp) FZ_CHECK(H, rove_selective_temperatures(pairs, t_def) == ROVE_OK, "temperatures");
      const double *t = temp ? temp : t_def;
      for (int64_t b = 0; b < batch; b++)
        for (int64_t j = 0; j < heads * np; j++) {
          double r = dco ? dco[b * heads * np + j] : 0.0;
          for (int64_t s = ns - 1; s >= 0; s--) {
            const size_t at = (size_t)((b * ns + s) * heads * np + j);
            r += t[j % np] * da[at];
            const float want = (float)r;
            FZ_CHECK(H, memcmp(&want, &dphi[at], sizeof want) == 0 || (isnan(want) && isnan(dphi[at])),
                     "d_phi differs from the reverse double sum");
          }
          if (dci)
            FZ_CHECK(H, memcmp(&r, &dci[b * heads * np + j], sizeof r) == 0 || (isnan(r) && isnan(dci[b * heads * np + j])),
                     "d_carry_in differs from the sum");
        }
      if (dtm)
        for (int64_t k = 0; k < np; k++) FZ_CHECK(H, !fz_untouched(&dtm[k], sizeof *dtm), "d_temp not written");
    }
    free(da);
    free(dco);
    free(dphi);
    free(dci);
    free(dtm);
  }
  free(phi);
  free(temp);
  free(carry_in);
  free(carry_orig);
  if (carry_mode == 1) free(carry_out);
  free(angles);
  return 0;
}
