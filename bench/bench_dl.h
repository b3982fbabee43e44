/* SPDX-License-Identifier: MIT */
/* Loading a librove build by path for the A/B benchmarks (ab_decode, ab_backward): each
 * build is dlopen'ed RTLD_LOCAL, so two builds keep their own symbols in one process.
 * Failures print "<prog>: <why>" and exit with status 2. */
#ifndef ROVE_BENCH_DL_H
#define ROVE_BENCH_DL_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static inline void *bench_open(const char *path, const char *prog) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "%s: %s\n", prog, dlerror());
    exit(2);
  }
  return h;
}

static inline void *bench_sym(void *h, const char *name, const char *prog) {
  void *f = dlsym(h, name);
  if (!f) {
    fprintf(stderr, "%s: %s: %s\n", prog, name, dlerror());
    exit(2);
  }
  return f;
}

#endif
