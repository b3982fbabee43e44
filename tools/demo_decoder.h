/* SPDX-License-Identifier: MIT */
/* The toy decoder section of `rove demo` (demo_decoder.c). */
#ifndef ROVE_CLI_DEMO_DECODER_H
#define ROVE_CLI_DEMO_DECODER_H

#include <stdint.h>

#include "rove.h"

typedef struct demo_decoder_opts {
  int32_t prompt, steps;   /* prompt tokens (prefill), then decode steps */
  int32_t heads, dim;      /* d_model = heads * dim */
  int32_t threads;         /* 0 = library default */
  int32_t pairs;           /* interleaved RoVE/RoPE pairs of timed generations, 1 .. 16 */
  uint64_t seed;
  rove_isa isa;
  rove_dtype kv;           /* storage type of the KV caches */
} demo_decoder_opts;

/* Run the section for RoVE and plain RoPE and print it; with a KV cache type other than
 * f32, run it again with f32 caches and print how far the outputs moved. Returns
 * CLI_EXIT_OK when every run passed its check, CLI_EXIT_FAIL otherwise (reason printed). */
int demo_decoder(const demo_decoder_opts *o);

#endif
