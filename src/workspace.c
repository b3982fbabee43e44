/* SPDX-License-Identifier: MIT */
/* A plan's pool of workspace blocks, reused across calls.
 *
 * glibc hands large blocks back to the OS on free(), so a call that allocated its packed
 * K/V afresh page-faulted all of it in again: measured ~20 % of a 12x64 causal forward at
 * n <= 1024 with AVX-512. The pool keeps up to ROVE_POOL_BLOCKS freed blocks of at most
 * ROVE_POOL_KEEP_BYTES each; concurrent calls take different blocks (one mutex around the
 * list, never held during work). rove_plan_destroy frees them. */
#include <pthread.h>
#include <stdlib.h>

#include "util.h"

#define ROVE_POOL_BLOCKS 4
#define ROVE_POOL_KEEP_BYTES ((size_t)256 << 20)

struct rove_pool {
  pthread_mutex_t lock;
  void *block[ROVE_POOL_BLOCKS];
  size_t size[ROVE_POOL_BLOCKS];
};

rove_pool *rove_pool_create(void) {
  rove_pool *p = calloc(1, sizeof *p);
  if (p && pthread_mutex_init(&p->lock, NULL) != 0) {
    free(p);
    return NULL;
  }
  return p;
}

void rove_pool_destroy(rove_pool *p) {
  if (!p) return;
  for (int i = 0; i < ROVE_POOL_BLOCKS; i++) rove_free(p->block[i]);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

/* The smallest pooled block of at least `bytes`, or a new one; *size gets its size. */
void *rove_pool_get(rove_pool *p, size_t bytes, size_t *size) {
  void *b = NULL;
  pthread_mutex_lock(&p->lock);
  int best = -1;
  for (int i = 0; i < ROVE_POOL_BLOCKS; i++)
    if (p->block[i] && p->size[i] >= bytes && (best < 0 || p->size[i] < p->size[best])) best = i;
  if (best >= 0) {
    b = p->block[best];
    *size = p->size[best];
    p->block[best] = NULL;
  }
  pthread_mutex_unlock(&p->lock);
  if (!b) {
    b = rove_alloc(bytes);
    *size = bytes;
  }
  return b;
}

/* Give a block back: kept in a free slot (replacing the smallest kept one if all are
 * taken and it is smaller), else freed. */
void rove_pool_put(rove_pool *p, void *b, size_t size) {
  if (!b) return;
  if (size > ROVE_POOL_KEEP_BYTES) {
    rove_free(b);
    return;
  }
  pthread_mutex_lock(&p->lock);
  int slot = 0; /* an empty slot, else the one with the smallest block */
  for (int i = 1; i < ROVE_POOL_BLOCKS && p->block[slot]; i++)
    if (!p->block[i] || p->size[i] < p->size[slot]) slot = i;
  void *evict = NULL;
  if (p->block[slot] && p->size[slot] >= size) {
    evict = b; /* every slot holds a larger block: keep those */
  } else {
    evict = p->block[slot];
    p->block[slot] = b;
    p->size[slot] = size;
  }
  pthread_mutex_unlock(&p->lock);
  rove_free(evict);
}
