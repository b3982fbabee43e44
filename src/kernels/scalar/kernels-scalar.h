/* SPDX-License-Identifier: MIT */
/* Declarations of every scalar kernel (one macro, kernels.h); included by each kernel
 * file of this folder. */
#ifndef ROVE_KERNELS_SCALAR_H
#define ROVE_KERNELS_SCALAR_H

#include "../kernels.h"

ROVE_DECLARE_KERNELS(scalar)

#endif
