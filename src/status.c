/* SPDX-License-Identifier: MIT */
/* Status strings and the version. */
#include "rove.h"

#define ROVE_STR2(x) #x
#define ROVE_STR(x) ROVE_STR2(x)

const char *rove_status_string(rove_status s) {
  switch (s) {
    case ROVE_OK: return "ok";
    case ROVE_ERR_INVALID_ARGUMENT: return "invalid argument";
    case ROVE_ERR_UNSUPPORTED: return "unsupported (by this CPU or build, or for these arguments)";
    case ROVE_ERR_OUT_OF_MEMORY: return "out of memory";
    case ROVE_ERR_SIZE_OVERFLOW: return "size overflow";
    case ROVE_ERR_INTERNAL: return "internal error (a librove bug)";
    case ROVE_ERR_POOL_EXHAUSTED: return "paged cache pool exhausted";
  }
  return "unknown rove_status";
}

const char *rove_version_string(void) {
  return ROVE_STR(ROVE_VERSION_MAJOR) "." ROVE_STR(ROVE_VERSION_MINOR) "." ROVE_STR(ROVE_VERSION_PATCH);
}
