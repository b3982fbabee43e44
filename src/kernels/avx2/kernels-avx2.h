/* SPDX-License-Identifier: MIT */
/* Declarations of every avx2 kernel (one macro, kernels.h); included by each kernel
 * file of this folder. */
#ifndef ROVE_KERNELS_AVX2_H
#define ROVE_KERNELS_AVX2_H

#include "../kernels.h"

ROVE_DECLARE_KERNELS(avx2)

#endif
