/* SPDX-License-Identifier: MIT */
/* Internal to the AVX-512 row kernel (attn_rows-avx512.c) and its GQA group path
 * (attn_rows_g4-avx512.c): their shared definitions and the group path's interface. */
#ifndef ROVE_ROWS_AVX512_H
#define ROVE_ROWS_AVX512_H

#include <stdint.h>

#include "../rows_block.h"

#define BLK ROVE_ROWS_BLOCK
#define INLINE static inline __attribute__((always_inline))

/* ---- The GQA group path: P V of 4 query rows that see every key of the block ----
 * Used, on CPUs without the paced preference (AMD), for a panel of 4 rows (a GQA group's
 * rows share each V row read) each of which sees every key of the block, over fp32 V,
 * when d % 32 == 0 (attn_rows-avx512.c block()). O = alpha O + P V for the 4 rows
 * o [4][d] over the nb keys of one run: V rows at v (stride vb bytes), p the scratch rows
 * [4][BLK] from the run's first key; vn: the next block's V rows of this run (run rows;
 * NULL for none) and linear (they are contiguous and the call longer than a block or
 * paged), for the prefetch (attn_rows_g4-avx512.c). */
void rove_rows_g4_pv_f32__avx512(float *o, int32_t d, const char *v, int64_t vb, int32_t nb,
                                 int32_t run, const float *p, const float *alpha,
                                 const char *vn, int linear);

#endif
