/* SPDX-License-Identifier: MIT */
/* Names of the element types (rove_dtype_name, rove_dtype_parse). */
#include <string.h>

#include "rove.h"

static const struct {
  rove_dtype t;
  const char *name;
} names[] = {
    {ROVE_DTYPE_F32, "f32"},   {ROVE_DTYPE_BF16, "bf16"},     {ROVE_DTYPE_F16, "f16"},
    {ROVE_DTYPE_Q8, "q8"},     {ROVE_DTYPE_F32, "fp32"},      {ROVE_DTYPE_F32, "float32"},
    {ROVE_DTYPE_BF16, "bfloat16"}, {ROVE_DTYPE_F16, "fp16"}, {ROVE_DTYPE_F16, "float16"},
    {ROVE_DTYPE_Q8, "int8"},
};

const char *rove_dtype_name(rove_dtype t) {
  if ((int)t < 0 || t >= ROVE_DTYPE_COUNT) return "unknown";
  return names[t].name; /* the first four rows are in enum order */
}

rove_status rove_dtype_parse(const char *name, rove_dtype *t) {
  if (!name || !t) return ROVE_ERR_INVALID_ARGUMENT;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(name, names[i].name)) {
      *t = names[i].t;
      return ROVE_OK;
    }
  return ROVE_ERR_INVALID_ARGUMENT;
}
