/* SPDX-License-Identifier: MIT */
/* Checked integer arithmetic, aligned allocation, overlap test, the OpenMP loops and the
 * thread-creation probe ahead of libgomp. */
#define _POSIX_C_SOURCE 200809L /* sigset_t, pthread_sigmask under -std=c11 */
#include <stdint.h>
#include <stdlib.h>

#include "rove.h"
#include "util.h"

int rove_mul_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
int rove_add_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }

void *rove_alloc(size_t bytes) {
  if (bytes == 0 || bytes > (size_t)INT64_MAX - 64) return NULL;
  size_t rounded = (bytes + 63) & ~(size_t)63;
  return aligned_alloc(64, rounded);
}

void rove_free(void *p) { free(p); }

int rove_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes) {
  uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
  return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

#ifdef _OPENMP
#include <ctype.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>

/* Thread creation ahead of libgomp.
 *
 * libgomp ends the process ("libgomp: Thread creation failed", exit 1) when it cannot
 * create a thread of a team: under an address-space limit, a pids cgroup limit or
 * RLIMIT_NPROC. librove promises a status instead, and since which thread runs a task never
 * changes a result, fewer threads are always a correct answer. So before a team grows past
 * the largest one the calling thread has run, twice the workers it needs are created here
 * first, all alive at once, with the stack libgomp will give them (OMP_STACKSIZE /
 * GOMP_STACKSIZE, else pthread's default) and a malloc arena each, then released and
 * joined. If only k of them could be created, every later team is capped at k/2 + 1
 * threads (the caller alone when k < 2). What stays out of reach: libgomp also exits when one of its
 * own small allocations fails (its team structures, on a team size it has not run
 * before); that is documented in rove.h. */

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
/* libgomp keeps one pool of workers per application thread that starts teams, so what
 * has been created is per thread; the cap (a resource limit) is for the process. */
static _Thread_local int32_t team_known_ok = 1; /* teams up to this size were created */
static int32_t team_cap = ROVE_MAX_THREADS;     /* lowered when a probe falls short */

/* Bytes of OMP_STACKSIZE-style text: digits, then an optional B/K/M/G (default K), as
 * libgomp parses it; 0 when unset or unparsable (pthread's default stack then). */
static size_t omp_stack_bytes(void) {
  const char *s = getenv("GOMP_STACKSIZE");
  if (!s || !*s) s = getenv("OMP_STACKSIZE");
  if (!s) return 0;
  while (isspace((unsigned char)*s)) s++;
  if (!isdigit((unsigned char)*s)) return 0;
  unsigned long long v = 0;
  for (; isdigit((unsigned char)*s); s++) {
    if (v > (1ull << 40)) return 0;
    v = v * 10 + (unsigned long long)(*s - '0');
  }
  while (isspace((unsigned char)*s)) s++;
  unsigned long long unit = 1024;
  switch (toupper((unsigned char)*s)) {
    case 'B': unit = 1; break;
    case 'K': case '\0': unit = 1024; break;
    case 'M': unit = 1024ull * 1024; break;
    case 'G': unit = 1024ull * 1024 * 1024; break;
    default: return 0;
  }
  return v > (unsigned long long)SIZE_MAX / unit ? 0 : (size_t)(v * unit);
}

typedef struct probe_gate {
  pthread_mutex_t m;
  pthread_cond_t open_c, ready_c;
  int open, ready;
} probe_gate;

static void *probe_thread(void *arg) {
  probe_gate *g = arg;
  /* A thread's first malloc gives it a malloc arena (glibc reserves 64 MiB of address
   * space for each, up to 8 per core, and keeps them for later threads): libgomp's
   * workers will malloc, so the probe takes those reservations too before it counts. */
  void *volatile arena_touch = malloc(64); /* volatile: the pair must not be elided */
  free(arena_touch);
  pthread_mutex_lock(&g->m);
  g->ready++;
  pthread_cond_signal(&g->ready_c);
  while (!g->open) pthread_cond_wait(&g->open_c, &g->m);
  pthread_mutex_unlock(&g->m);
  return NULL;
}

/* Create up to `want` threads, all alive together, each one after the previous has made
 * its arena; returns how many could be, or -1 when the probe itself could not allocate
 * (nothing learnt: a transient failure must not cap the teams for good). The new threads
 * start with every signal blocked (they must not take the program's signals). */
static int32_t probe_threads(int32_t want) {
  pthread_t *t = malloc(sizeof(pthread_t) * (size_t)want);
  if (!t) return -1;
  probe_gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
                  0, 0};
  pthread_attr_t attr;
  const int have_attr = pthread_attr_init(&attr) == 0;
  const size_t stack = omp_stack_bytes();
  if (have_attr && stack) pthread_attr_setstacksize(&attr, stack);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int32_t k = 0;
  while (k < want && pthread_create(&t[k], have_attr ? &attr : NULL, probe_thread, &g) == 0) {
    k++;
    pthread_mutex_lock(&g.m);
    while (g.ready < k) pthread_cond_wait(&g.ready_c, &g.m);
    pthread_mutex_unlock(&g.m);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (have_attr) pthread_attr_destroy(&attr);
  pthread_mutex_lock(&g.m);
  g.open = 1;
  pthread_cond_broadcast(&g.open_c);
  pthread_mutex_unlock(&g.m);
  for (int32_t i = 0; i < k; i++) pthread_join(t[i], NULL);
  free(t);
  return k;
}

/* The largest team of at most `t` threads that libgomp can be given. */
static int32_t creatable_team(int32_t t) {
  if (t <= team_known_ok && t <= __atomic_load_n(&team_cap, __ATOMIC_RELAXED)) return t;
  pthread_mutex_lock(&probe_lock);
  if (t > team_cap) t = team_cap;
  if (t > team_known_ok) {
    /* A team of t needs t - 1 workers. libgomp lets surplus workers exit when a smaller
     * team follows and creates new ones when a larger one comes back, so up to t - 1
     * exiting workers may still hold their stacks while t - 1 new ones are created: the
     * probe asks for twice the workers, and the team is capped at half of what it got. */
    const int32_t need = 2 * (t - 1);
    const int32_t got = probe_threads(need);
    if (got < 0) { /* unknown: this call stays within what is known to work */
      pthread_mutex_unlock(&probe_lock);
      return team_known_ok < t ? team_known_ok : t;
    }
    if (got < need) {
      const int32_t cap = 1 + got / 2;
      if (cap < team_cap) __atomic_store_n(&team_cap, cap, __ATOMIC_RELAXED);
      if (t > cap) t = cap;
    }
    if (t > team_known_ok) team_known_ok = t;
  }
  pthread_mutex_unlock(&probe_lock);
  return t;
}
#endif

int32_t rove_team_size(int32_t n_threads, int64_t n) {
#ifdef _OPENMP
  int64_t t = n_threads < ROVE_MAX_THREADS ? n_threads : ROVE_MAX_THREADS;
  if (t > n) t = n; /* a thread without a task would only cost its creation */
  if (t <= 1) return 1;
  return creatable_team((int32_t)t);
#else
  (void)n_threads, (void)n;
  return 1;
#endif
}

void rove_parallel_for(int32_t n_threads, int64_t n, void (*body)(int64_t i, int tid, void *ctx),
                       void *ctx) {
#ifdef _OPENMP
  const int32_t nt = rove_team_size(n_threads, n);
  if (nt > 1) {
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int64_t i = 0; i < n; i++) body(i, omp_get_thread_num(), ctx);
    return;
  }
#else
  (void)n_threads;
#endif
  for (int64_t i = 0; i < n; i++) body(i, 0, ctx);
}

/* Up to this many threads (after rove_team_size) take the blocked schedule (a counter per
 * thread on the stack); more fall back to rove_parallel_for. */
#define ROVE_BLOCKED_MAX_THREADS 64

void rove_parallel_for_blocked(int32_t n_threads, int64_t n,
                               void (*body)(int64_t i, int tid, void *ctx), void *ctx) {
#ifdef _OPENMP
  const int32_t nb = rove_team_size(n_threads, n);
  if (nb > 1 && nb <= ROVE_BLOCKED_MAX_THREADS) {
    /* Block r = [r n / nb, (r + 1) n / nb): its next index, one cache line per block. */
    _Alignas(64) struct {
      int64_t next, end;
      char pad[64 - 2 * sizeof(int64_t)];
    } blk[ROVE_BLOCKED_MAX_THREADS];
    for (int32_t r = 0; r < nb; r++) {
      blk[r].next = n * r / nb;
      blk[r].end = n * (r + 1) / nb;
    }
#pragma omp parallel num_threads(nb)
    {
      const int tid = omp_get_thread_num();
      /* Own block first, then help the others in order (taking from their front). */
      for (int32_t k = 0; k < nb; k++) {
        const int32_t r = (int32_t)((tid + k) % nb);
        for (;;) {
          const int64_t i = __atomic_fetch_add(&blk[r].next, 1, __ATOMIC_RELAXED);
          if (i >= blk[r].end) break;
          body(i, tid, ctx);
        }
      }
    }
    return;
  }
#endif
  rove_parallel_for(n_threads, n, body, ctx);
}
