/* SPDX-License-Identifier: MIT */
/* Shared pieces of the libFuzzer harnesses (fuzz/fuzz_*.c):
 * - fz_reader: decodes the fuzzer's bytes into sizes, enum values, edge-case integers and
 *   floats. An exhausted reader yields zeros, so every input (even an empty one) decodes.
 * - canary buffers: outputs are malloc'd with exactly the size the contract demands (ASan
 *   then sees any overrun) and pre-filled with FZ_CANARY, so that "untouched on failure"
 *   and "stride gaps never written" are byte comparisons.
 * - fz_fail: a violated invariant prints what was violated and aborts, which libFuzzer
 *   reports as a crash and saves the input. */
#ifndef ROVE_FUZZ_UTIL_H
#define ROVE_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "rove.h"

typedef struct fz_reader {
  const uint8_t *data;
  size_t size, pos;
} fz_reader;

void fz_init(fz_reader *r, const uint8_t *data, size_t size);
uint8_t fz_u8(fz_reader *r);
uint32_t fz_u32(fz_reader *r);
uint64_t fz_u64(fz_reader *r);
/** lo .. hi inclusive (hi - lo < 65536). */
int32_t fz_range(fz_reader *r, int32_t lo, int32_t hi);
int fz_bool(fz_reader *r);
/** One of @p n values, chosen by one byte. */
int32_t fz_pick_i32(fz_reader *r, const int32_t *values, int n);
/** Mostly @p values[byte % n]; for some bytes a raw double (any bit pattern). */
double fz_pick_f64(fz_reader *r, const double *values, int n);
/** An int32 position: small values, int32 edges (INT32_MIN/MAX and neighbours) or raw. */
int32_t fz_pos(fz_reader *r);
/** @p n positions drawn by fz_pos, in a new array (fz_alloc; free() it). */
int32_t *fz_pos_array(fz_reader *r, int64_t n);

/** Fill x[0..n) with uniform values in [-amp, amp] from a generator seeded by 4 bytes. */
void fz_fill_f32(fz_reader *r, float *x, size_t n, float amp);
void fz_fill_f64(fz_reader *r, double *x, size_t n, double amp);
/** Maybe (one byte decides) overwrite up to 3 entries of x[0..n) with NaN, +-Inf or
 *  +-3e38; the indices written are flagged in @p hit (n bytes, may be NULL). Returns the
 *  number of entries written. */
int fz_specials_f32(fz_reader *r, float *x, size_t n, uint8_t *hit);
int fz_specials_f64(fz_reader *r, double *x, size_t n, uint8_t *hit);

/** Byte every output buffer starts with; a float or int32 of four such bytes is
 *  0xA7A7A7A7 (about -4.6e-15 as float), which no result of a librove call should be. */
#define FZ_CANARY 0xA7
/** malloc(bytes) (at least 1 byte) filled with FZ_CANARY; aborts if malloc fails. */
void *fz_canary_alloc(size_t bytes);
/** malloc(bytes) (at least 1) uninitialised-free: filled with zeros. */
void *fz_alloc(size_t bytes);
/** Whether p[0..bytes) still holds only FZ_CANARY. */
int fz_untouched(const void *p, size_t bytes);
/** Whether x is the canary float (a written output should never be). */
int fz_is_canary_f32(float x);

/** Abort with a message (libFuzzer saves the input). */
void fz_fail(const char *harness, const char *what) __attribute__((noreturn));
#define FZ_CHECK(harness, cond, what) \
  do {                                \
    if (!(cond)) fz_fail(harness, what); \
  } while (0)
/** A status must be one of rove_status and never ROVE_ERR_INTERNAL. */
void fz_check_status(const char *harness, rove_status s);

/** Decode a rove_rope_config for a head of @p head_dim: each field keeps its default or
 *  takes a value from a table of meaningful and hostile values (or raw bits).
 *  freq_factors / long_freq_factors, when set, point to malloc'd arrays of exactly the
 *  r/2 doubles the contract asks for (free them with fz_rope_free). */
void fz_rope_config(fz_reader *r, rove_rope_config *c, int32_t head_dim);
void fz_rope_free(rove_rope_config *c);

/** Decode a whole rove_attention_config with small shapes (n_heads <= 4, head_dim <= 16
 *  mostly, sometimes invalid), n_threads 1 (sometimes 0 or out of range), isa AUTO or
 *  SCALAR. The rope part as fz_rope_config. */
void fz_attention_config(fz_reader *r, rove_attention_config *c);

/** Decode an attention config (fz_attention_config) and build its plan, checking the
 *  status and that a refused config leaves *out untouched. Returns the plan, with
 *  rove_plan_config's copy in @p rc, or NULL when the config was refused. The decoded
 *  factor arrays are freed either way (the plan copies what it needs). */
rove_plan *fz_plan_from_input(fz_reader *r, const char *harness, rove_attention_config *rc);

/** Largest |logit| the plan can produce for inputs bounded by amp (after rotation and m),
 *  so that harnesses know when finite inputs must give a finite output. */
double fz_logit_bound(const rove_attention_config *resolved, double amp);

/** Visibility of key position pj to query position pi (docs/DESIGN.md §1, in int64). */
int fz_visible(int32_t causal, int32_t window, int32_t pi, int32_t pj);

#endif
