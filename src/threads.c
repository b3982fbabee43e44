/* SPDX-License-Identifier: MIT */
/* librove's own thread pool: rove_parallel_for, rove_parallel_for_blocked, rove_team_size
 * and rove_default_threads.
 *
 * Why not OpenMP. libgomp ends the process (exit 1) when it cannot create a thread of a
 * team and when one of its own allocations fails; librove promises a status. Here a thread
 * that cannot be created, or a pool that cannot be allocated, only means fewer threads, down
 * to the caller alone, and which thread runs a task never changes a result. So no call can
 * end the process for want of threads or memory.
 *
 * Pools. A pool is a set of worker threads that run one job at a time, the calling thread
 * joining in as tid 0. The process keeps a list of pools (at most ROVE_MAX_POOLS); a call
 * takes the pool its thread used last when that one is free (warm caches), else any free
 * one, else makes a new one, else runs alone: concurrent calls from several threads each
 * get their own team. A call made from inside a job (a body calling back into librove)
 * runs alone. A pool's workers are created when a team first needs them and live until
 * the library is unloaded (a destructor stops and joins them) or the process ends.
 *
 * Waiting. A job is published by one 64-bit word, seq * 2048 + team (team <= 1024 <
 * 2048), so that a worker reads its job and whether it is in the team in one load; a
 * worker of the team reads the job's fields only after that load (acquire), and the
 * caller does not write the next job's fields before every worker of the team is done.
 * After a job, workers spin for the spin time (ROVE_SPIN_US, default 100 us: a decode
 * loop's next call finds them awake), then sleep on a condition variable; the caller
 * waits for its team the same way. Nobody spins when the team exceeds the CPUs this
 * process may run on (a spinning thread would take a core from a working one).
 *
 * fork. The child has only the forking thread. A pthread_atfork child handler forgets
 * every pool (the child loses their memory, not their threads, which it never had), so
 * the child's first call makes a new one. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rove.h"
#include "util.h"

/* ---- rove_default_threads: OMP_NUM_THREADS, else the CPUs this process may use ---------- */

#ifdef ROVE_HAVE_THREADS
/* The first entry of an OMP_NUM_THREADS list ("8" or "8,4"), or 0 when it is unset or not
 * a list of positive numbers, read as libgomp reads it (checked against
 * omp_get_max_threads): each entry [blanks][+]digits[blanks], entries separated by commas;
 * a 0, a sign other than +, any other character or an empty entry ("3,") makes the whole
 * variable invalid. Capped at ROVE_MAX_THREADS by the caller. */
static int32_t env_threads(void) {
  const char *s = getenv("OMP_NUM_THREADS");
  if (!s) return 0;
  int64_t first = 0;
  for (int k = 0;; k++) {
    while (*s == ' ' || *s == '\t') s++;
    if (*s == '+') s++;
    int64_t v = 0;
    int digits = 0;
    for (; *s >= '0' && *s <= '9'; s++, digits++) {
      v = v * 10 + (*s - '0');
      if (v > ROVE_MAX_THREADS) v = ROVE_MAX_THREADS + 1; /* saturates: capped below */
    }
    while (*s == ' ' || *s == '\t') s++;
    if (!digits || v < 1) return 0;
    if (k == 0) first = v;
    if (*s == '\0') return (int32_t)first;
    if (*s++ != ',') return 0;
  }
}

static int32_t cpus_available(void) {
#ifdef CPU_COUNT
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
#endif
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > ROVE_MAX_THREADS ? ROVE_MAX_THREADS : (int32_t)n;
}
#endif

int32_t rove_default_threads(void) {
#ifdef ROVE_HAVE_THREADS
  int32_t n = env_threads();
  if (n == 0) n = cpus_available();
  return n < 1 ? 1 : n > ROVE_MAX_THREADS ? ROVE_MAX_THREADS : n;
#else
  return 1;
#endif
}

int32_t rove_team_size(int32_t n_threads, int64_t n) {
#ifdef ROVE_HAVE_THREADS
  int64_t t = n_threads < ROVE_MAX_THREADS ? n_threads : ROVE_MAX_THREADS;
  if (t > n) t = n; /* a thread without a task would only cost its creation */
  return t <= 1 ? 1 : (int32_t)t;
#else
  (void)n_threads, (void)n;
  return 1;
#endif
}

#ifdef ROVE_HAVE_THREADS

#define ROVE_MAX_POOLS 64
#define TEAM_BITS 2048 /* job word = seq * TEAM_BITS + team; team <= ROVE_MAX_THREADS */
#define BLOCKED_MAX_THREADS 64 /* more take the dynamic schedule (counters on the stack) */

typedef void (*body_fn)(int64_t i, int tid, void *ctx);

typedef struct blocked_range {
  _Alignas(64) int64_t next; /* one cache line per block */
  int64_t end;
} blocked_range;

struct pool;
typedef struct worker_arg {
  struct pool *p;
  int32_t tid;
  uint64_t seen; /* the job word when the worker was created: it waits for a newer one */
} worker_arg;

typedef struct pool {
  pthread_mutex_t m;
  pthread_cond_t wake; /* workers wait here for a new job word */
  pthread_cond_t done; /* the caller waits here for its team */
  uint64_t word;       /* seq * TEAM_BITS + team; atomic */
  int32_t pending;     /* workers of the current team not done yet; atomic */
  int32_t sleepers;    /* workers waiting on wake (under m) */
  int32_t caller_waiting; /* under m */
  int32_t stop;        /* under m: workers exit */
  int32_t spin;        /* whether to spin before sleeping (this job's); atomic */
  int32_t n_workers;   /* created workers: tids 1..n_workers (written by the owner only) */
  int in_use;          /* under pools_lock */
  /* the current job: written by the owner before it publishes the word */
  body_fn body;
  void *ctx;
  int64_t n;
  blocked_range *blk; /* NULL: dynamic schedule over `next` (or each, below) */
  int32_t nblk;
  int each;            /* every thread of the team runs body(tid, tid, ctx) once */
  _Alignas(64) int64_t next; /* the dynamic schedule's next index; atomic */
  pthread_t threads[ROVE_MAX_THREADS];
  worker_arg args[ROVE_MAX_THREADS];
} pool;

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static pool *pools[ROVE_MAX_POOLS];
static int n_pools;
static uint64_t pools_gen; /* incremented in a fork child: thread-local pool pointers expire */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static _Thread_local pool *last_pool;
static _Thread_local uint64_t last_gen;
static _Thread_local int in_job; /* this thread is running a body */
static int64_t spin_ns = -1;     /* -1: not read yet; atomic */
static int32_t n_cpus;           /* atomic; 0: not read yet */

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ROVE_SPIN_US: 0..1000000 microseconds; unset or anything else: 100. */
static int64_t spin_time_ns(void) {
  int64_t ns = __atomic_load_n(&spin_ns, __ATOMIC_RELAXED);
  if (ns >= 0) return ns;
  ns = 100000;
  const char *s = getenv("ROVE_SPIN_US");
  if (s && *s) {
    int64_t v = 0;
    const char *c = s;
    for (; *c >= '0' && *c <= '9' && v <= 1000000; c++) v = v * 10 + (*c - '0');
    if (*c == '\0' && v <= 1000000) ns = v * 1000;
  }
  __atomic_store_n(&spin_ns, ns, __ATOMIC_RELAXED);
  return ns;
}

static int32_t cpu_count_cached(void) {
  int32_t n = __atomic_load_n(&n_cpus, __ATOMIC_RELAXED);
  if (n == 0) {
    n = cpus_available();
    __atomic_store_n(&n_cpus, n, __ATOMIC_RELAXED);
  }
  return n;
}

/* Spin (when allowed) until *addr != old or the spin time passes; returns the last value. */
static uint64_t spin_while_u64(const uint64_t *addr, uint64_t old, int spin) {
  uint64_t v = __atomic_load_n(addr, __ATOMIC_ACQUIRE);
  if (v != old || !spin) return v;
  const int64_t until = now_ns() + spin_time_ns();
  for (uint32_t k = 1;; k++) {
    cpu_relax();
    v = __atomic_load_n(addr, __ATOMIC_ACQUIRE);
    if (v != old) return v;
    if ((k & 255) == 0 && now_ns() >= until) return v;
  }
}

static void run_share(pool *p, int tid) {
  const body_fn body = p->body;
  void *ctx = p->ctx;
  in_job = 1;
  if (p->each) {
    body(tid, tid, ctx);
  } else if (p->blk) {
    /* Own block first, then help the others in order (taking from their front). */
    const int32_t nb = p->nblk;
    for (int32_t k = 0; k < nb; k++) {
      blocked_range *b = &p->blk[(tid + k) % nb];
      for (;;) {
        const int64_t i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED);
        if (i >= b->end) break;
        body(i, tid, ctx);
      }
    }
  } else {
    const int64_t n = p->n;
    for (;;) {
      const int64_t i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
      if (i >= n) break;
      body(i, tid, ctx);
    }
  }
  in_job = 0;
}

static void *worker_main(void *argp) {
  worker_arg *a = argp;
  pool *p = a->p;
  const int32_t tid = a->tid;
  uint64_t seen = a->seen;
  for (;;) {
    uint64_t w = spin_while_u64(&p->word, seen, __atomic_load_n(&p->spin, __ATOMIC_RELAXED));
    if (w == seen) {
      pthread_mutex_lock(&p->m);
      p->sleepers++;
      while ((w = __atomic_load_n(&p->word, __ATOMIC_ACQUIRE)) == seen && !p->stop)
        pthread_cond_wait(&p->wake, &p->m);
      p->sleepers--;
      const int stop = p->stop;
      pthread_mutex_unlock(&p->m);
      if (stop) return NULL;
    }
    seen = w;
    if (tid >= (int32_t)(w % TEAM_BITS)) continue; /* not in this team */
    run_share(p, tid);
    if (__atomic_sub_fetch(&p->pending, 1, __ATOMIC_ACQ_REL) == 0) {
      pthread_mutex_lock(&p->m);
      if (p->caller_waiting) pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->m);
    }
  }
}

/* The pool's workers are created with every signal blocked (they must not take the
 * program's signals) and pthread's default stack. Returns the team it can run (<= want). */
static int32_t grow(pool *p, int32_t want) {
  if (p->n_workers + 1 >= want) return want;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const uint64_t w = __atomic_load_n(&p->word, __ATOMIC_RELAXED);
  while (p->n_workers + 1 < want) {
    const int32_t tid = p->n_workers + 1;
    p->args[tid] = (worker_arg){p, tid, w};
    if (pthread_create(&p->threads[tid], NULL, worker_main, &p->args[tid]) != 0) break;
    p->n_workers = tid;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return p->n_workers + 1 < want ? p->n_workers + 1 : want;
}

static void forget_pools_in_child(void) {
  /* Only this thread exists: the pools (their locks possibly held by threads that are
   * gone) are dropped, not freed. */
  n_pools = 0;
  pools_gen++;
  in_job = 0;
  pthread_mutex_unlock(&pools_lock); /* taken by this thread in the prepare handler */
}
static void lock_pools(void) { pthread_mutex_lock(&pools_lock); }
static void unlock_pools(void) { pthread_mutex_unlock(&pools_lock); }
static void register_atfork(void) {
  /* lock in prepare: the child's copy of the list is then consistent */
  pthread_atfork(lock_pools, unlock_pools, forget_pools_in_child);
}

static pool *pool_new(void) {
  /* 64-byte aligned (the struct holds a cache-line-aligned counter); sizeof is a multiple */
  pool *p = aligned_alloc(_Alignof(pool), sizeof *p);
  if (!p) return NULL;
  memset(p, 0, sizeof *p);
  if (pthread_mutex_init(&p->m, NULL) != 0) goto fail_m;
  if (pthread_cond_init(&p->wake, NULL) != 0) goto fail_wake;
  if (pthread_cond_init(&p->done, NULL) != 0) goto fail_done;
  return p;
fail_done:
  pthread_cond_destroy(&p->wake);
fail_wake:
  pthread_mutex_destroy(&p->m);
fail_m:
  free(p);
  return NULL;
}

/* A free pool for this thread (marked in use), or NULL: run alone. */
static pool *pool_acquire(void) {
  pthread_once(&atfork_once, register_atfork);
  pool *p = NULL;
  pthread_mutex_lock(&pools_lock);
  if (last_pool && last_gen == pools_gen && !last_pool->in_use) p = last_pool;
  for (int i = 0; !p && i < n_pools; i++)
    if (!pools[i]->in_use) p = pools[i];
  if (!p && n_pools < ROVE_MAX_POOLS && (p = pool_new()) != NULL) pools[n_pools++] = p;
  if (p) {
    p->in_use = 1;
    last_pool = p;
    last_gen = pools_gen;
  }
  pthread_mutex_unlock(&pools_lock);
  return p;
}

static void pool_release(pool *p) {
  pthread_mutex_lock(&pools_lock);
  p->in_use = 0;
  pthread_mutex_unlock(&pools_lock);
}

/* Run the job set in p on a team of nt (caller included; grown as far as possible). */
static void pool_run(pool *p, int32_t nt) {
  const int32_t team = grow(p, nt);
  if (team <= 1) {
    run_share(p, 0);
    return;
  }
  const int spin = team <= cpu_count_cached() && spin_time_ns() > 0;
  __atomic_store_n(&p->spin, spin, __ATOMIC_RELAXED);
  __atomic_store_n(&p->pending, team - 1, __ATOMIC_RELAXED);
  const uint64_t w = __atomic_load_n(&p->word, __ATOMIC_RELAXED);
  const uint64_t next_word = (w / TEAM_BITS + 1) * TEAM_BITS + (uint64_t)team;
  __atomic_store_n(&p->word, next_word, __ATOMIC_RELEASE); /* publishes the job */
  pthread_mutex_lock(&p->m);
  if (p->sleepers) pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->m);
  run_share(p, 0);
  /* wait for the team: spin, then sleep */
  if (__atomic_load_n(&p->pending, __ATOMIC_ACQUIRE) != 0 && spin) {
    const int64_t until = now_ns() + spin_time_ns();
    for (uint32_t k = 1; __atomic_load_n(&p->pending, __ATOMIC_ACQUIRE) != 0; k++) {
      cpu_relax();
      if ((k & 255) == 0 && now_ns() >= until) break;
    }
  }
  if (__atomic_load_n(&p->pending, __ATOMIC_ACQUIRE) != 0) {
    pthread_mutex_lock(&p->m);
    p->caller_waiting = 1;
    while (__atomic_load_n(&p->pending, __ATOMIC_ACQUIRE) != 0) pthread_cond_wait(&p->done, &p->m);
    p->caller_waiting = 0;
    pthread_mutex_unlock(&p->m);
  }
}

/* Unloading the library (dlclose) must not leave threads running its code: free pools are
 * stopped, their workers joined and their memory freed. A pool in use by another thread
 * at exit is left to the exit. */
__attribute__((destructor)) static void pools_shutdown(void) {
  pthread_mutex_lock(&pools_lock);
  int kept = 0;
  for (int i = 0; i < n_pools; i++) {
    pool *p = pools[i];
    if (p->in_use) {
      pools[kept++] = p;
      continue;
    }
    pthread_mutex_lock(&p->m);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->m);
    for (int32_t t = 1; t <= p->n_workers; t++) pthread_join(p->threads[t], NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->m);
    free(p);
  }
  n_pools = kept;
  pools_gen++; /* thread-local pointers to freed pools expire */
  pthread_mutex_unlock(&pools_lock);
}

/* Runs the job on up to nt threads; returns 0 when it ran (else the caller runs it alone).
 * The calling thread is not cancellable meanwhile: a pthread_cancel that found it waiting
 * for its team (pthread_cond_wait is a cancellation point) would unwind the stack that
 * holds the job's context while the workers still run it, and leave the pool taken and
 * its mutex held. A cancel request so takes effect at the caller's next cancellation
 * point after the call. */
static int parallel(int32_t nt, int64_t n, body_fn body, void *ctx, blocked_range *blk,
                    int32_t nblk, int each) {
  if (nt <= 1 || in_job) return 0;
  int cancel_state;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
  pool *p = pool_acquire();
  if (!p) {
    pthread_setcancelstate(cancel_state, NULL);
    return 0;
  }
  p->body = body;
  p->ctx = ctx;
  p->n = n;
  p->blk = blk;
  p->nblk = nblk;
  p->each = each;
  __atomic_store_n(&p->next, 0, __ATOMIC_RELAXED);
  pool_run(p, nt);
  pool_release(p);
  pthread_setcancelstate(cancel_state, NULL);
  return 1;
}
#endif /* ROVE_HAVE_THREADS */

/* The job on the calling thread alone, as tid 0 (each: one call of body), marked as inside
 * a job like a pool's: a librove call the body makes then runs alone too, whether the job
 * had a team or not. */
static void run_alone(int64_t n, void (*body)(int64_t i, int tid, void *ctx), void *ctx,
                      int each) {
#ifdef ROVE_HAVE_THREADS
  const int was = in_job;
  in_job = 1;
#endif
  if (each)
    body(0, 0, ctx);
  else
    for (int64_t i = 0; i < n; i++) body(i, 0, ctx);
#ifdef ROVE_HAVE_THREADS
  in_job = was;
#endif
}

void rove_parallel_for(int32_t n_threads, int64_t n, void (*body)(int64_t i, int tid, void *ctx),
                       void *ctx) {
#ifdef ROVE_HAVE_THREADS
  if (parallel(rove_team_size(n_threads, n), n, body, ctx, NULL, 0, 0)) return;
#else
  (void)n_threads;
#endif
  run_alone(n, body, ctx, 0);
}

void rove_parallel_for_blocked(int32_t n_threads, int64_t n,
                               void (*body)(int64_t i, int tid, void *ctx), void *ctx) {
#ifdef ROVE_HAVE_THREADS
  const int32_t nb = rove_team_size(n_threads, n);
  if (nb > 1 && nb <= BLOCKED_MAX_THREADS) {
    /* Block r = [r n / nb, (r + 1) n / nb): its next index, one cache line per block. The
     * blocks are fixed by nb, not by the team the pool can run: a smaller team still takes
     * every block (own first, then the others'). */
    blocked_range blk[BLOCKED_MAX_THREADS];
    for (int32_t r = 0; r < nb; r++) {
      blk[r].next = n * r / nb;
      blk[r].end = n * (r + 1) / nb;
    }
    if (parallel(nb, n, body, ctx, blk, nb, 0)) return;
    run_alone(n, body, ctx, 0);
    return;
  }
#endif
  rove_parallel_for(n_threads, n, body, ctx);
}

void rove_parallel_each(int32_t n_threads, void (*body)(int64_t i, int tid, void *ctx), void *ctx) {
#ifdef ROVE_HAVE_THREADS
  if (parallel(rove_team_size(n_threads, n_threads), n_threads, body, ctx, NULL, 0, 1)) return;
#else
  (void)n_threads;
#endif
  run_alone(1, body, ctx, 1);
}
