/* SPDX-License-Identifier: MIT */
/* Declarations of every neon kernel (one macro, kernels.h); included by each kernel
 * file of this folder. */
#ifndef ROVE_KERNELS_NEON_H
#define ROVE_KERNELS_NEON_H

#include "../kernels.h"

ROVE_DECLARE_KERNELS(neon)

#endif
