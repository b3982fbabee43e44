/* SPDX-License-Identifier: MIT */
/* Allocation failures: every public call that allocates is run once counting its
 * allocations, then once for every n = 1 .. count with its n-th allocation failing. Each
 * such run must return ROVE_ERR_OUT_OF_MEMORY with the caller's outputs untouched (canary),
 * *out untouched for create calls and the objects it works on unchanged, or ROVE_OK with
 * exactly the output of the run without a failure (a failure the library can absorb, such
 * as a speed-up table); and nothing may leak: the number of live allocations of the
 * process returns to its value before the run once the run's objects are destroyed.
 * Every scenario runs on plans of 1 and of 2 threads.
 *
 * The failing allocator is this executable's own malloc / calloc / realloc / aligned_alloc
 * / posix_memalign / memalign / valloc / pvalloc / free: an executable's definitions
 * interpose on those of libc for every library of the process, librove.so included, and
 * they forward to glibc's __libc_* entry points. So this test needs glibc and cannot run
 * under a sanitizer (ASan brings its own allocator): tests/CMakeLists.txt does not build it
 * there, and without glibc it reports itself skipped.
 *
 * Threads: librove's pool (src/threads.c) allocates a pool on a thread's first threaded
 * call, and OpenBLAS allocates its buffers on first use; a pool that cannot be allocated
 * only means the call runs on the calling thread. Each scenario therefore runs once before
 * it is counted (the warm-up); the counted run must then make only librove's own
 * allocations (checked: the caller of each allocation is located with dladdr), so that
 * the failures injected are librove's. Links the public librove.so. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#if defined(__GLIBC__)
#define HAVE_INTERPOSER 1
#else
#define HAVE_INTERPOSER 0
#endif

/* ---- the interposer ---------------------------------------------------------------------- */

#if HAVE_INTERPOSER
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void *__libc_valloc(size_t n);
extern void *__libc_pvalloc(size_t n);
extern void __libc_free(void *p);

#define MAX_TRACKED 4096 /* callers remembered per armed run */

static atomic_long g_live;      /* blocks allocated and not yet freed, whole process */
static atomic_int g_armed;      /* allocations are being counted */
static atomic_long g_seen;      /* allocations since arm(), by anyone */
static atomic_long g_seen_rove; /* allocations since arm() called from librove.so's code */
static atomic_long g_fail_at;   /* the 1-based allocation of librove that fails; 0: none */
static atomic_int g_failed;     /* the failing allocation was reached */
static atomic_size_t g_bytes;   /* bytes requested since arm() from librove's code */
static void *g_caller[MAX_TRACKED];
/* librove.so's executable segment (set once in main, before anything is armed) and
 * whether allocations of other code fail too (ROVE_ALLOC_FAIL_FOREIGN=1, a diagnostic:
 * libgomp and OpenBLAS end the process when theirs fail) */
static uintptr_t g_rove_lo, g_rove_hi;
static int g_fail_foreign;

/* Counts an allocation while armed; 1 if it is the one that must fail. The index runs
 * over librove's own allocations (the caller's return address lies in its code). */
static int must_fail(void *caller, size_t bytes) {
  if (!atomic_load_explicit(&g_armed, memory_order_acquire)) return 0;
  const long i = atomic_fetch_add(&g_seen, 1) + 1;
  if (i <= MAX_TRACKED) g_caller[i - 1] = caller;
  const int ours = (uintptr_t)caller >= g_rove_lo && (uintptr_t)caller < g_rove_hi;
  if (ours) atomic_fetch_add(&g_bytes, bytes);
  if (!ours && !g_fail_foreign) return 0;
  const long j = atomic_fetch_add(&g_seen_rove, 1) + 1;
  if (j != atomic_load(&g_fail_at)) return 0;
  atomic_store(&g_failed, 1);
  return 1;
}

static void *counted(void *p) {
  if (p) atomic_fetch_add(&g_live, 1);
  return p;
}

void *malloc(size_t n) {
  if (must_fail(__builtin_return_address(0), n)) return errno = ENOMEM, NULL;
  return counted(__libc_malloc(n));
}

void *calloc(size_t n, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(n, size, &bytes)) bytes = SIZE_MAX;
  if (must_fail(__builtin_return_address(0), bytes)) return errno = ENOMEM, NULL;
  return counted(__libc_calloc(n, size));
}

void *realloc(void *p, size_t n) {
  if (must_fail(__builtin_return_address(0), n)) return errno = ENOMEM, NULL; /* p stays valid */
  void *r = __libc_realloc(p, n);
  if (!p && r) atomic_fetch_add(&g_live, 1);      /* realloc(NULL, n) = malloc(n) */
  else if (p && n == 0 && !r) atomic_fetch_sub(&g_live, 1); /* glibc: realloc(p, 0) frees p */
  return r;
}

void *memalign(size_t align, size_t n) {
  if (must_fail(__builtin_return_address(0), n)) return errno = ENOMEM, NULL;
  return counted(__libc_memalign(align, n));
}

void *aligned_alloc(size_t align, size_t n) {
  if (must_fail(__builtin_return_address(0), n)) return errno = ENOMEM, NULL;
  return counted(__libc_memalign(align, n));
}

int posix_memalign(void **out, size_t align, size_t n) {
  if (align < sizeof(void *) || (align & (align - 1)) != 0) return EINVAL;
  if (must_fail(__builtin_return_address(0), n)) return ENOMEM;
  void *p = counted(__libc_memalign(align, n));
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

void *valloc(size_t n) {
  if (must_fail(__builtin_return_address(0), n)) return errno = ENOMEM, NULL;
  return counted(__libc_valloc(n));
}

void *pvalloc(size_t n) {
  if (must_fail(__builtin_return_address(0), n)) return errno = ENOMEM, NULL;
  return counted(__libc_pvalloc(n));
}

void free(void *p) {
  if (p) atomic_fetch_sub(&g_live, 1);
  __libc_free(p);
}

static void arm(long fail_at) {
  atomic_store(&g_seen, 0);
  atomic_store(&g_seen_rove, 0);
  atomic_store(&g_bytes, 0);
  atomic_store(&g_failed, 0);
  atomic_store(&g_fail_at, fail_at);
  atomic_store_explicit(&g_armed, 1, memory_order_release);
}

/* Returns the number of allocations that could be made to fail (librove's). */
static long disarm(void) {
  atomic_store_explicit(&g_armed, 0, memory_order_release);
  return atomic_load(&g_seen_rove);
}

/* dl_iterate_phdr callback: the executable PT_LOAD segment that holds `want`. */
static int find_segment(struct dl_phdr_info *info, size_t size, void *want) {
  (void)size;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    const uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if ((uintptr_t)want >= lo && (uintptr_t)want < hi) {
      g_rove_lo = lo, g_rove_hi = hi;
      return 1;
    }
  }
  return 0;
}
#endif /* HAVE_INTERPOSER */

/* ---- inputs shared by every scenario ------------------------------------------------------ */

#define H 4
#define HKV 2
#define D 32
#define HALF (D / 2)
#define N_PRE 128    /* prefill length: 4 * 4 * 128^2 * 32 MACs, enough for 2 threads */
#define N_KV 4096    /* decode: 2 rows x 4096 keys, above the serial threshold */
#define N_ROT 600    /* rotate: 3 chunks of 256 tokens */
#define IN_FLOATS (1 << 21)
#define OUT_FLOATS (1 << 20)
#define ANG_DOUBLES (1 << 18)

static float *g_in;     /* random in [-1, 1) */
static float *g_decay;  /* random log decays in [-0.5, 0] */
static double *g_ang;   /* random angles in [-10, 10) */
static float *g_out;    /* main output */
static float *g_out2;   /* second output (lse, state) */
static int32_t g_pos[2 * N_KV]; /* scattered positions */

/* ---- scenarios --------------------------------------------------------------------------- */

/* An output of the call: filled with the canary before the call (orig NULL), or an
 * in/out buffer that holds a copy of orig before the call. */
typedef struct {
  void *p;
  size_t bytes;
  const void *orig;
} region;

#define SLOT_SENTINEL ((void *)(uintptr_t)0x5107)

typedef struct fx {
  int threads;
  rove_plan *plan;
  rove_kv_cache *cache;
  rove_layer *layer;
  rove_gla_plan *gla;
  rove_paged_cache *paged;
  int32_t pseq[2];           /* the paged cache's parent and fork */
  void *made;                /* what a create call made (destroyed by the teardown) */
  void (*made_destroy)(void *);
  int slot_touched;          /* a failed create call wrote *out */
  region out[6];             /* the caller's outputs of the call */
  int n_out;
} fx;

typedef struct {
  const char *name;
  void (*setup)(fx *f);           /* NULL: nothing */
  rove_status (*call)(fx *f);     /* the call under test */
  /* NULL, or the observable state of the call's objects (a cache's length, positions and
   * the attention of a fixed query over it) into buf, at most STATE_BYTES */
  size_t (*observe)(fx *f, unsigned char *buf);
} scenario;

#define STATE_BYTES ((size_t)(2 * N_KV * 4 + 16 + 4 * H * D * 4))

static void add_out(fx *f, void *p, size_t bytes) {
  rove_fill_bits(p, (int64_t)(bytes / sizeof(float)), ROVE_GUARD_CANARY);
  f->out[f->n_out++] = (region){p, bytes, NULL};
}

static void add_inout(fx *f, void *p, size_t bytes, const void *orig) {
  memcpy(p, orig, bytes);
  f->out[f->n_out++] = (region){p, bytes, orig};
}

static rove_attention_config attn_config(const fx *f) {
  rove_attention_config c;
  rove_attention_config_init(&c, H, HKV, D);
  c.n_threads = f->threads;
  return c;
}

static void make_plan(fx *f) {
  const rove_attention_config c = attn_config(f);
  assert_int_equal(rove_plan_create(&c, &f->plan), ROVE_OK);
}

static void destroy_all(fx *f) {
  if (f->made) f->made_destroy(f->made);
  rove_layer_destroy(f->layer);
  rove_kv_cache_destroy(f->cache);
  rove_paged_cache_destroy(f->paged);
  rove_plan_destroy(f->plan);
  rove_gla_plan_destroy(f->gla);
}

/* A create call through `slot`: f->made on success, f->slot_touched if it failed and wrote. */
static rove_status created(fx *f, rove_status st, void *slot, void (*destroy)(void *)) {
  if (st == ROVE_OK) {
    f->made = slot;
    f->made_destroy = destroy;
  } else if (slot != SLOT_SENTINEL) {
    f->slot_touched = 1;
  }
  return st;
}

static void plan_destroy_v(void *p) { rove_plan_destroy(p); }
static void cache_destroy_v(void *p) { rove_kv_cache_destroy(p); }
static void layer_destroy_v(void *p) { rove_layer_destroy(p); }
static void gla_destroy_v(void *p) { rove_gla_plan_destroy(p); }

/* plan creation, plain and with everything a plan copies */
static rove_status call_plan_create(fx *f) {
  const rove_attention_config c = attn_config(f);
  void *slot = SLOT_SENTINEL;
  const rove_status st = rove_plan_create(&c, (rove_plan **)&slot);
  return created(f, st, slot, plan_destroy_v);
}

static rove_status call_plan_create_factors(fx *f) {
  rove_attention_config c = attn_config(f);
  double ff[HALF];
  for (int k = 0; k < HALF; k++) ff[k] = 1.0 + 0.25 * k;
  c.rope.freq_factors = ff;
  c.rope.scaling = ROVE_SCALING_YARN;
  c.rope.factor = 8.0;
  c.rope.original_max_position = 256;
  void *slot = SLOT_SENTINEL;
  const rove_status st = rove_plan_create(&c, (rove_plan **)&slot);
  return created(f, st, slot, plan_destroy_v);
}

static rove_status call_rope_inv_freq(fx *f) {
  rove_rope_config c;
  rove_rope_config_init(&c);
  c.scaling = ROVE_SCALING_LLAMA3;
  c.factor = 8.0;
  c.original_max_position = 8192;
  add_out(f, g_out, HALF * sizeof(double));
  add_out(f, g_out2, sizeof(double));
  return rove_rope_inv_freq(&c, D, (double *)g_out, (double *)g_out2);
}

/* attention: prefill, decode-shaped (streaming), scattered positions, selective angles */
static rove_attention_args prefill_args(fx *f) {
  rove_attention_args a = {.batch = 1, .q_len = N_PRE, .kv_len = N_PRE};
  a.q = g_in;
  a.k = g_in + N_PRE * H * D;
  a.v = a.k + N_PRE * HKV * D;
  a.out = g_out;
  a.lse = g_out2;
  add_out(f, g_out, sizeof(float) * N_PRE * H * D);
  add_out(f, g_out2, sizeof(float) * N_PRE * H);
  return a;
}

static rove_status call_attention_prefill(fx *f) {
  const rove_attention_args a = prefill_args(f);
  return rove_attention_forward(f->plan, &a);
}

static rove_status call_attention_positions(fx *f) {
  rove_attention_args a = prefill_args(f);
  a.q_pos = g_pos;
  a.kv_pos = g_pos;
  return rove_attention_forward(f->plan, &a);
}

static rove_status call_attention_angles(fx *f) {
  rove_attention_args a = prefill_args(f);
  a.q_angles = g_ang;
  a.kv_angles = g_ang + N_PRE * HKV * HALF;
  return rove_attention_forward(f->plan, &a);
}

/* Three packed sequences (128, 64 and 1 queries over 128, 100 and 300 keys) and the LSE:
 * every sequence's workspace is taken before any output is written. */
static rove_status call_attention_varlen(fx *f) {
  static const int32_t cq[4] = {0, 128, 192, 193}, ck[4] = {0, 128, 228, 528};
  rove_varlen_args a = {.n_seqs = 3, .cu_seqlens_q = cq, .cu_seqlens_k = ck};
  a.q = g_in;
  a.k = g_in + 193 * H * D;
  a.v = a.k + 528 * HKV * D;
  a.out = g_out;
  a.lse = g_out2;
  add_out(f, g_out, sizeof(float) * 193 * H * D);
  add_out(f, g_out2, sizeof(float) * 193 * H);
  return rove_attention_varlen(f->plan, &a);
}

static rove_status call_attention_decode(fx *f) {
  rove_attention_args a = {.batch = 2, .q_len = 1, .kv_len = N_KV};
  a.q = g_in;
  a.k = g_in + 2 * H * D;
  a.v = a.k + 2 * N_KV * HKV * D;
  a.out = g_out;
  a.lse = g_out2;
  add_out(f, g_out, sizeof(float) * 2 * H * D);
  add_out(f, g_out2, sizeof(float) * 2 * H);
  return rove_attention_forward(f->plan, &a);
}

/* rotate: contiguous default positions (the blocked table), explicit positions, angles */
static rove_status rotate_into_out(fx *f, const int32_t *pos, const double *angles) {
  add_inout(f, g_out, sizeof(float) * N_ROT * H * D, g_in); /* rotated in place */
  return angles ? rove_rotate_angles(f->plan, g_out, N_ROT, H, 0, angles, HKV, 0)
                : rove_rotate(f->plan, g_out, N_ROT, H, 0, pos, 1);
}
static rove_status call_rotate(fx *f) { return rotate_into_out(f, NULL, NULL); }
static rove_status call_rotate_pos(fx *f) { return rotate_into_out(f, g_pos, NULL); }
static rove_status call_rotate_angles(fx *f) { return rotate_into_out(f, NULL, g_ang); }

/* KV cache: create, append (positions, angles), attention, shift */
static rove_status call_cache_create(fx *f) {
  void *slot = SLOT_SENTINEL;
  const rove_status st = rove_kv_cache_create(f->plan, 2, 300, (rove_kv_cache **)&slot);
  return created(f, st, slot, cache_destroy_v);
}

/* bf16 copies of the first BF16_N inputs (a static array: no allocation to account) */
#define BF16_N (1 << 16)
static uint16_t g_bf16[BF16_N];
static const uint16_t *bf16_in(void) {
  static int done;
  for (int i = 0; !done && i < BF16_N; i++) {
    uint32_t b;
    memcpy(&b, &g_in[i], 4);
    g_bf16[i] = (uint16_t)(b >> 16);
  }
  done = 1;
  return g_bf16;
}

/* Typed tensors and caches: a q8 cache, bf16 inputs, bf16 weights */
static rove_status call_cache_create_q8(fx *f) {
  void *slot = SLOT_SENTINEL;
  const rove_status st =
      rove_kv_cache_create_typed(f->plan, 2, 300, ROVE_DTYPE_Q8, (rove_kv_cache **)&slot);
  return created(f, st, slot, cache_destroy_v);
}

static rove_status call_attention_typed(fx *f) {
  rove_attention_args a = prefill_args(f);
  const uint16_t *x = bf16_in();
  a.q = (const float *)x;
  a.k = (const float *)(x + N_PRE * H * D);
  a.v = (const float *)(x + N_PRE * (H + HKV) * D);
  const rove_tensor_types t = {ROVE_DTYPE_BF16, ROVE_DTYPE_BF16, ROVE_DTYPE_BF16, ROVE_DTYPE_BF16};
  return rove_attention_forward_typed(f->plan, &a, &t);
}

#define CACHE_CAP 600
static void cache_setup_typed(fx *f, int angles, rove_dtype type) {
  make_plan(f);
  assert_int_equal(rove_kv_cache_create_typed(f->plan, 2, CACHE_CAP, type, &f->cache), ROVE_OK);
  const float *k = g_in, *v = g_in + 2 * 40 * HKV * D;
  if (angles)
    assert_int_equal(rove_kv_cache_append_angles(f->cache, 40, k, 0, v, 0, NULL, g_ang), ROVE_OK);
  else
    assert_int_equal(rove_kv_cache_append(f->cache, 40, k, 0, v, 0, NULL), ROVE_OK);
}
static void setup_cache(fx *f) { cache_setup_typed(f, 0, ROVE_DTYPE_F32); }
static void setup_cache_angles(fx *f) { cache_setup_typed(f, 1, ROVE_DTYPE_F32); }
static void setup_cache_q8(fx *f) { cache_setup_typed(f, 0, ROVE_DTYPE_Q8); }

#define APPEND_N 300 /* two chunks of 256 tokens per row */
static rove_status call_cache_append(fx *f) {
  const float *k = g_in + 4096, *v = k + 2 * APPEND_N * HKV * D;
  return rove_kv_cache_append(f->cache, APPEND_N, k, 0, v, 0, NULL);
}

static rove_status call_cache_append_pos(fx *f) {
  const float *k = g_in + 4096, *v = k + 2 * APPEND_N * HKV * D;
  return rove_kv_cache_append(f->cache, APPEND_N, k, 0, v, 0, g_pos);
}

static rove_status call_cache_append_angles(fx *f) {
  const float *k = g_in + 4096, *v = k + 2 * APPEND_N * HKV * D;
  return rove_kv_cache_append_angles(f->cache, APPEND_N, k, 0, v, 0, NULL, g_ang + 4096);
}

static rove_status call_cache_attention(fx *f) {
  rove_attention_args a = {.batch = 2, .q_len = 8};
  a.q = g_in + 8192;
  a.out = g_out; /* q_pos NULL: the queries are the last 8 cached tokens */
  a.lse = g_out2;
  add_out(f, g_out, sizeof(float) * 2 * 8 * H * D);
  add_out(f, g_out2, sizeof(float) * 2 * 8 * H);
  return rove_kv_cache_attention(f->cache, &a);
}

static rove_status call_cache_attention_angles(fx *f) {
  rove_attention_args a = {.batch = 2, .q_len = 8};
  a.q = g_in + 8192;
  a.q_angles = g_ang + 8192;
  a.q_pos = g_pos;
  a.out = g_out;
  add_out(f, g_out, sizeof(float) * 2 * 8 * H * D);
  return rove_kv_cache_attention(f->cache, &a);
}

static rove_status call_cache_shift(fx *f) { return rove_kv_cache_shift(f->cache, 5, 33, -3); }

static rove_status call_cache_append_bf16(fx *f) {
  const uint16_t *k = bf16_in() + 4096, *v = k + 2 * APPEND_N * HKV * D;
  return rove_kv_cache_append_typed(f->cache, APPEND_N, k, 0, v, 0, NULL, ROVE_DTYPE_BF16);
}

static rove_status call_cache_attention_bf16(fx *f) {
  rove_attention_args a = {.batch = 2, .q_len = 8};
  a.q = (const float *)(bf16_in() + 8192);
  a.out = g_out;
  a.lse = g_out2;
  add_out(f, g_out, sizeof(uint16_t) * 2 * 8 * H * D);
  add_out(f, g_out2, sizeof(float) * 2 * 8 * H);
  const rove_tensor_types t = {ROVE_DTYPE_BF16, ROVE_DTYPE_F32, ROVE_DTYPE_F32, ROVE_DTYPE_BF16};
  return rove_kv_cache_attention_typed(f->cache, &a, &t);
}

/* The cache as a user sees it: length, positions, and the attention of a fixed query
 * (with its own positions, or angles for an angle cache). Run unarmed. */
static size_t observe_cache(fx *f, unsigned char *buf) {
  const int32_t len = rove_kv_cache_length(f->cache);
  memcpy(buf, &len, sizeof len);
  size_t n = sizeof len;
  assert_int_equal(rove_kv_cache_positions(f->cache, (int32_t *)(buf + n)), ROVE_OK);
  n += sizeof(int32_t) * 2 * (size_t)len;
  if (len == 0) return n;
  static const int32_t qpos[2] = {1000, 2000};
  rove_attention_args a = {.batch = 2, .q_len = 1, .q = g_in + 777, .q_pos = qpos};
  a.q_angles = g_ang + 777;
  a.out = (float *)(buf + n);
  assert_int_equal(rove_kv_cache_attention(f->cache, &a), ROVE_OK);
  return n + sizeof(float) * 2 * H * D;
}

/* paged cache: a parent of 40 tokens in blocks of 16 and its fork (sharing every block,
 * the last partly filled), so that appends and shifts copy on write */
static void paged_destroy_v(void *c) { rove_paged_cache_destroy(c); }
static rove_status call_paged_create(fx *f) {
  void *slot = SLOT_SENTINEL;
  const rove_status st =
      rove_paged_cache_create(f->plan, ROVE_DTYPE_Q8, 16, 64, 4, (rove_paged_cache **)&slot);
  return created(f, st, slot, paged_destroy_v);
}

static void setup_paged(fx *f) {
  make_plan(f);
  assert_int_equal(rove_paged_cache_create(f->plan, ROVE_DTYPE_F32, 16, 64, 4, &f->paged), ROVE_OK);
  assert_int_equal(rove_paged_seq_create(f->paged, &f->pseq[0]), ROVE_OK);
  const float *k = g_in, *v = g_in + 40 * HKV * D;
  assert_int_equal(rove_paged_append(f->paged, f->pseq[0], 40, k, 0, v, 0, ROVE_DTYPE_F32, NULL, NULL),
                   ROVE_OK);
  assert_int_equal(rove_paged_seq_fork(f->paged, f->pseq[0], &f->pseq[1]), ROVE_OK);
}

static rove_status call_paged_append(fx *f) {
  const float *k = g_in + 4096, *v = k + APPEND_N * HKV * D;
  return rove_paged_append(f->paged, f->pseq[1], APPEND_N, k, 0, v, 0, ROVE_DTYPE_F32, NULL, NULL);
}

static rove_status call_paged_fork(fx *f) {
  int32_t child = -1;
  return rove_paged_seq_fork(f->paged, f->pseq[1], &child);
}

static rove_status call_paged_shift(fx *f) { return rove_paged_shift(f->paged, f->pseq[1], 5, 33, -3); }

static rove_status call_paged_attention(fx *f) {
  static const int32_t cu[3] = {0, 3, 4};
  rove_paged_args a = {.n_seqs = 2, .cu_seqlens_q = cu, .q = g_in + 8192, .out = g_out, .lse = g_out2};
  add_out(f, g_out, sizeof(float) * 4 * H * D);
  add_out(f, g_out2, sizeof(float) * 4 * H);
  return rove_paged_cache_attention(f->paged, f->pseq, &a);
}

/* The paged cache as a user sees it: free blocks, each sequence's length, positions and
 * the attention of a fixed query row. Run unarmed. */
static size_t observe_paged(fx *f, unsigned char *buf) {
  size_t n = 0;
  const int32_t free_blocks = rove_paged_cache_free_blocks(f->paged);
  memcpy(buf, &free_blocks, sizeof free_blocks);
  n += sizeof free_blocks;
  for (int s = 0; s < 2; s++) {
    const int32_t len = rove_paged_seq_length(f->paged, f->pseq[s]);
    memcpy(buf + n, &len, sizeof len);
    n += sizeof len;
    int32_t pos[CACHE_CAP];
    assert_true(len <= CACHE_CAP);
    assert_int_equal(rove_paged_seq_positions(f->paged, f->pseq[s], pos), ROVE_OK);
    memcpy(buf + n, pos, sizeof(int32_t) * 4); /* the first positions (a shift moves them) */
    n += sizeof(int32_t) * 4;
    static const int32_t cu[2] = {0, 1}, qpos = 5000;
    rove_paged_args a = {.n_seqs = 1, .cu_seqlens_q = cu, .q = g_in + 777, .q_pos = &qpos};
    a.out = (float *)(buf + n);
    assert_int_equal(rove_paged_cache_attention(f->paged, &f->pseq[s], &a), ROVE_OK);
    n += sizeof(float) * H * D;
  }
  return n;
}

/* layer: create (with biases), forward (sgemm and the one-row sgemv), cached */
#define DM 48
static rove_layer_weights layer_weights(void) {
  const float *w = g_in + 100000;
  rove_layer_weights lw = {.d_model = DM};
  lw.wq = w;
  lw.wk = w + H * D * DM;
  lw.wv = lw.wk + HKV * D * DM;
  lw.wo = lw.wv + HKV * D * DM;
  lw.bq = lw.wo + DM * H * D;
  lw.bv = lw.bq + H * D;
  lw.bo = lw.bv + HKV * D;
  return lw;
}

static rove_status call_layer_create(fx *f) {
  const rove_layer_weights lw = layer_weights();
  void *slot = SLOT_SENTINEL;
  const rove_status st = rove_layer_create(f->plan, &lw, (rove_layer **)&slot);
  return created(f, st, slot, layer_destroy_v);
}

static rove_status call_layer_create_bf16(fx *f) {
  rove_layer_weights lw = layer_weights(); /* the same shapes; bf16 elements */
  const uint16_t *x = bf16_in();
  lw.wq = (const float *)x, lw.wk = (const float *)x, lw.wv = (const float *)x;
  lw.wo = (const float *)x;
  lw.bq = lw.bv = lw.bo = (const float *)x;
  void *slot = SLOT_SENTINEL;
  const rove_status st = rove_layer_create_typed(f->plan, &lw, ROVE_DTYPE_BF16, (rove_layer **)&slot);
  return created(f, st, slot, layer_destroy_v);
}

static void setup_layer(fx *f) {
  make_plan(f);
  const rove_layer_weights lw = layer_weights();
  assert_int_equal(rove_layer_create(f->plan, &lw, &f->layer), ROVE_OK);
}

static void setup_layer_cache(fx *f) {
  setup_layer(f);
  assert_int_equal(rove_kv_cache_create(f->plan, 2, CACHE_CAP, &f->cache), ROVE_OK);
  float *y = g_out2;
  assert_int_equal(rove_layer_forward_cached(f->layer, f->cache, 20, g_in, NULL, y), ROVE_OK);
}

static rove_status call_layer_forward(fx *f) {
  add_out(f, g_out, sizeof(float) * N_PRE * DM);
  return rove_layer_forward(f->layer, 1, N_PRE, g_in, NULL, g_out);
}

static rove_status call_layer_forward_row(fx *f) {
  add_out(f, g_out, sizeof(float) * DM);
  return rove_layer_forward(f->layer, 1, 1, g_in, g_pos, g_out);
}

static rove_status call_layer_cached_prefill(fx *f) {
  add_out(f, g_out, sizeof(float) * 2 * 64 * DM);
  return rove_layer_forward_cached(f->layer, f->cache, 64, g_in + 5000, NULL, g_out);
}

static rove_status call_layer_cached_decode(fx *f) {
  add_out(f, g_out, sizeof(float) * 2 * DM);
  return rove_layer_forward_cached(f->layer, f->cache, 1, g_in + 5000, NULL, g_out);
}

/* Selective RoPE: angles (default temperatures on the heap above 512 pairs), phase net */
static rove_status call_selective_angles(fx *f) {
  const int32_t T = 64, pairs = 600;
  add_out(f, g_out, sizeof(double) * 2 * T * 2 * pairs);
  add_out(f, g_out2, sizeof(double) * 2 * 2 * pairs);
  return rove_selective_angles(2, T, 2, pairs, g_in, NULL, NULL, (double *)g_out2,
                               (double *)g_out);
}

/* Packed: the same 128 tokens as sequences of 50, 0 and 78, each with its state row. */
static const int32_t k_phase_cu[4] = {0, 50, 50, 128};

static rove_status call_selective_angles_packed(fx *f) {
  const int32_t pairs = 600;
  add_out(f, g_out, sizeof(double) * 128 * 2 * pairs);
  add_out(f, g_out2, sizeof(double) * 3 * 2 * pairs);
  return rove_selective_angles_packed(3, k_phase_cu, 2, pairs, g_in, NULL, NULL,
                                      (double *)g_out2, (double *)g_out);
}

static rove_status phase_call(fx *f, int packed) {
  const int32_t T = 64, pairs = HALF, in_dim = D;
  const float *w = g_in + 200000;
  rove_selective_phase_weights pw; /* every part: low-rank projection, conv, exp(bias), gate */
  rove_selective_phase_weights_init(&pw, H, in_dim, pairs);
  pw.proj_down = w;                                   /* [16][H * in_dim] */
  pw.proj_up = pw.proj_down + 16 * H * in_dim;        /* [H * pairs][16] */
  pw.conv_w = pw.proj_up + H * pairs * 16;            /* [H][pairs][4] */
  pw.conv_act = ROVE_PHASE_ACT_SILU;
  pw.exp_bias = pw.conv_w + H * pairs * 4;            /* [H][pairs] */
  pw.gate = ROVE_PHASE_GATE_GLA;
  pw.gate_down = pw.exp_bias + H * pairs;             /* [16][H * in_dim] */
  pw.gate_w = pw.gate_down + 16 * H * in_dim;         /* [H * pairs][16] */
  pw.gate_b = pw.gate_w + H * pairs * 16;             /* [H * pairs] */
  float *state = g_out2;
  const int32_t rows = packed ? 3 : 2; /* state rows: sequences or batch rows */
  add_out(f, g_out, sizeof(float) * 2 * T * H * pairs);
  add_inout(f, state, sizeof(float) * (size_t)rows * H * pairs * 3, g_in + 300000);
  if (packed) return rove_selective_phase_packed(&pw, 3, k_phase_cu, g_in, 0, state, g_out);
  return rove_selective_phase(&pw, 2, T, g_in, 0, state, g_out);
}
static rove_status call_selective_phase(fx *f) { return phase_call(f, 0); }
static rove_status call_selective_phase_packed(fx *f) { return phase_call(f, 1); }

/* GLA: plan creation, chunked forward, recurrence */
static rove_gla_config gla_config(const fx *f) {
  rove_gla_config c;
  rove_gla_config_init(&c, H, D, D);
  c.rotate = ROVE_ROTATE_ROVE;
  c.n_threads = f->threads;
  return c;
}

static rove_status call_gla_create(fx *f) {
  const rove_gla_config c = gla_config(f);
  void *slot = SLOT_SENTINEL;
  const rove_status st = rove_gla_plan_create(&c, (rove_gla_plan **)&slot);
  return created(f, st, slot, gla_destroy_v);
}

static void setup_gla(fx *f) {
  const rove_gla_config c = gla_config(f);
  assert_int_equal(rove_gla_plan_create(&c, &f->gla), ROVE_OK);
}

/* Packed: the same tokens as two sequences of one row, the shorter first (so that the
 * call allocates the longest-first order of its tasks), with the same two states. */
static const int32_t k_gla_cu[3] = {0, 100, 320};
static void gla_pack(rove_gla_args *a, int packed) {
  if (!packed) return;
  a->seq_len = a->batch * a->seq_len, a->batch = 1;
  a->cu_seqlens = k_gla_cu, a->n_seqs = 2;
}

static rove_status gla_call(fx *f, int recurrent, int packed) {
  const int32_t B = 2, T = 160;
  const int64_t n = (int64_t)B * T * H * D;
  rove_gla_args a = {.batch = B, .seq_len = T};
  gla_pack(&a, packed);
  a.q = g_in;
  a.k = g_in + n;
  a.v = g_in + 2 * n;
  a.g = g_decay;
  a.angles = g_ang;
  a.initial_state = g_in + 3 * n;
  a.final_state = g_out2;
  a.out = g_out;
  add_out(f, g_out, sizeof(float) * (size_t)n);
  add_out(f, g_out2, sizeof(float) * B * H * D * D);
  return recurrent ? rove_gla_recurrent(f->gla, &a) : rove_gla_forward(f->gla, &a);
}
/* The backward of the same call: dq, dk, dv, dg in g_out, d_initial_state in g_out2. */
static rove_status gla_backward(fx *f, int packed) {
  const int32_t B = 2, T = 160;
  const int64_t n = (int64_t)B * T * H * D;
  rove_gla_args a = {.batch = B, .seq_len = T};
  gla_pack(&a, packed);
  a.q = g_in, a.k = g_in + n, a.v = g_in + 2 * n, a.g = g_decay, a.angles = g_ang;
  a.initial_state = g_in + 3 * n;
  a.out = g_in + 4 * n + (int64_t)B * H * D * D; /* stands in for the forward's output */
  rove_gla_grads g = {0};
  g.dout = g_in + 3 * n + (int64_t)B * H * D * D;
  g.dq = g_out, g.dk = g_out + n, g.dv = g_out + 2 * n, g.dg = g_out + 3 * n;
  g.d_initial_state = g_out2;
  for (int i = 0; i < 4; i++) add_out(f, g_out + i * n, sizeof(float) * (size_t)n);
  add_out(f, g_out2, sizeof(float) * B * H * D * D);
  return rove_gla_backward(f->gla, &a, &g);
}
static rove_status call_gla_backward(fx *f) { return gla_backward(f, 0); }
static rove_status call_gla_backward_packed(fx *f) { return gla_backward(f, 1); }
static rove_status call_gla_forward(fx *f) { return gla_call(f, 0, 0); }
static rove_status call_gla_recurrent(fx *f) { return gla_call(f, 1, 0); }
static rove_status call_gla_forward_packed(fx *f) { return gla_call(f, 0, 1); }

static const scenario k_scenarios[] = {
    {"plan_create", NULL, call_plan_create, NULL},
    {"plan_create_freq_factors", NULL, call_plan_create_factors, NULL},
    {"rope_inv_freq", NULL, call_rope_inv_freq, NULL},
    {"attention_forward_prefill", make_plan, call_attention_prefill, NULL},
    {"attention_forward_positions", make_plan, call_attention_positions, NULL},
    {"attention_forward_angles", make_plan, call_attention_angles, NULL},
    {"attention_forward_decode", make_plan, call_attention_decode, NULL},
    {"attention_varlen", make_plan, call_attention_varlen, NULL},
    {"rotate", make_plan, call_rotate, NULL},
    {"rotate_positions", make_plan, call_rotate_pos, NULL},
    {"rotate_angles", make_plan, call_rotate_angles, NULL},
    {"kv_cache_create", make_plan, call_cache_create, NULL},
    {"kv_cache_append", setup_cache, call_cache_append, observe_cache},
    {"kv_cache_append_positions", setup_cache, call_cache_append_pos, observe_cache},
    {"kv_cache_append_angles", setup_cache_angles, call_cache_append_angles, observe_cache},
    {"kv_cache_attention", setup_cache, call_cache_attention, observe_cache},
    {"kv_cache_attention_angles", setup_cache_angles, call_cache_attention_angles, observe_cache},
    {"kv_cache_shift", setup_cache, call_cache_shift, observe_cache},
    {"attention_forward_typed", make_plan, call_attention_typed, NULL},
    {"kv_cache_create_q8", make_plan, call_cache_create_q8, NULL},
    {"kv_cache_append_q8", setup_cache_q8, call_cache_append, observe_cache},
    {"kv_cache_append_bf16_into_q8", setup_cache_q8, call_cache_append_bf16, observe_cache},
    {"kv_cache_attention_q8_bf16", setup_cache_q8, call_cache_attention_bf16, observe_cache},
    {"kv_cache_shift_q8", setup_cache_q8, call_cache_shift, observe_cache},
    {"layer_create", make_plan, call_layer_create, NULL},
    {"layer_create_bf16", make_plan, call_layer_create_bf16, NULL},
    {"layer_forward", setup_layer, call_layer_forward, NULL},
    {"layer_forward_one_row", setup_layer, call_layer_forward_row, NULL},
    {"layer_forward_cached_prefill", setup_layer_cache, call_layer_cached_prefill, observe_cache},
    {"layer_forward_cached_decode", setup_layer_cache, call_layer_cached_decode, observe_cache},
    {"selective_angles", NULL, call_selective_angles, NULL},
    {"selective_phase", NULL, call_selective_phase, NULL},
    {"selective_angles_packed", NULL, call_selective_angles_packed, NULL},
    {"selective_phase_packed", NULL, call_selective_phase_packed, NULL},
    {"gla_plan_create", NULL, call_gla_create, NULL},
    {"gla_forward", setup_gla, call_gla_forward, NULL},
    {"gla_recurrent", setup_gla, call_gla_recurrent, NULL},
    {"gla_backward", setup_gla, call_gla_backward, NULL},
    {"gla_forward_packed", setup_gla, call_gla_forward_packed, NULL},
    {"gla_backward_packed", setup_gla, call_gla_backward_packed, NULL},
    {"paged_cache_create", make_plan, call_paged_create, NULL},
    {"paged_append_copy_on_write", setup_paged, call_paged_append, observe_paged},
    {"paged_fork", setup_paged, call_paged_fork, observe_paged},
    {"paged_shift_copy_on_write", setup_paged, call_paged_shift, observe_paged},
    {"paged_attention", setup_paged, call_paged_attention, observe_paged},
};
#define N_SCENARIOS ((int)(sizeof k_scenarios / sizeof *k_scenarios))

/* ---- the driver -------------------------------------------------------------------------- */

#if HAVE_INTERPOSER
/* The shared object an address lies in ("?" if none). */
static const char *object_of(const void *addr) {
  Dl_info info;
  if (!dladdr(addr, &info) || !info.dli_fname) return "?";
  const char *slash = strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

static int is_librove(const void *addr) {
  return (uintptr_t)addr >= g_rove_lo && (uintptr_t)addr < g_rove_hi;
}

/* 1 if the call left the output as it was before (the canary, or orig). */
static int untouched(const region *r) {
  if (r->orig) return memcmp(r->p, r->orig, r->bytes) == 0;
  const uint32_t *u = r->p;
  for (size_t i = 0; i < r->bytes / sizeof(float); i++)
    if (u[i] != ROVE_GUARD_CANARY) return 0;
  return 1;
}

/* Runs scenario s on plans of `threads` threads; see the top of the file. */
static void run_scenario(const scenario *s, int threads) {
  unsigned char *ref_state = malloc(STATE_BYTES), *state = malloc(STATE_BYTES);
  unsigned char *pre_state = malloc(STATE_BYTES);
  unsigned char *ref_out[3] = {NULL, NULL, NULL};
  assert_true(ref_state && state && pre_state);
  size_t ref_state_n = 0, pre_n = 0, n = 0;

  /* 1. warm-up (the thread pool, OpenBLAS buffers, the process's lazily made state) */
  fx f = {.threads = threads};
  if (s->setup) s->setup(&f);
  if (s->observe) s->observe(&f, state);
  assert_int_equal(s->call(&f), ROVE_OK);
  destroy_all(&f);

  /* 2. the reference run, counted */
  f = (fx){.threads = threads};
  if (s->setup) s->setup(&f);
  if (s->observe) s->observe(&f, pre_state);
  arm(0);
  rove_status st = s->call(&f);
  const long count = disarm();
  if (st != ROVE_OK) fail_msg("%s: %s without an injected failure", s->name, rove_status_string(st));
  if (count > MAX_TRACKED) fail_msg("%s: %ld allocations, more than tracked", s->name, count);
  for (int i = 0; i < f.n_out; i++) {
    ref_out[i] = malloc(f.out[i].bytes);
    assert_non_null(ref_out[i]);
    memcpy(ref_out[i], f.out[i].p, f.out[i].bytes);
  }
  if (s->observe) ref_state_n = s->observe(&f, ref_state);
  /* Allocations of other libraries made by the call: never failed (see the top), listed;
   * libgomp's must be gone after the warm-up. */
  const long all = atomic_load(&g_seen);
  int gomp = 0;
  for (long i = 0; i < all && i < MAX_TRACKED; i++)
    if (!is_librove(g_caller[i])) {
      const char *obj = object_of(g_caller[i]);
      printf("  %s threads %d: allocation %ld of %ld is made by %s, not librove.so%s\n",
             s->name, threads, i + 1, all, obj, g_fail_foreign ? "" : " (not failed)");
      gomp += strstr(obj, "gomp") != NULL;
    }
  destroy_all(&f);
  if (gomp && !g_fail_foreign)
    fail_msg("%s (threads %d): %d libgomp allocation(s) after the warm-up", s->name, threads, gomp);

  /* 3. the n-th allocation fails, n = 1 .. count */
  int oom = 0, absorbed = 0;
  for (long k = 1; k <= count; k++) {
    const long live0 = atomic_load(&g_live);
    f = (fx){.threads = threads};
    if (s->setup) s->setup(&f);
    if (s->observe) pre_n = s->observe(&f, pre_state);
    arm(k); /* the call fills its outputs' canaries (add_out), then calls librove */
    st = s->call(&f);
    disarm();
    if (!atomic_load(&g_failed))
      fail_msg("%s (threads %d): allocation %ld of %ld was not reached", s->name, threads, k, count);
    if (st == ROVE_ERR_OUT_OF_MEMORY) {
      oom++;
      if (f.made || f.slot_touched)
        fail_msg("%s (threads %d, allocation %ld failed): *out written", s->name, threads, k);
      for (int i = 0; i < f.n_out; i++)
        if (!untouched(&f.out[i]))
          fail_msg("%s (threads %d, allocation %ld failed): output %d written", s->name, threads,
                   k, i);
      if (s->observe) {
        n = s->observe(&f, state);
        if (n != pre_n || memcmp(state, pre_state, n) != 0)
          fail_msg("%s (threads %d, allocation %ld failed): the cache changed", s->name, threads, k);
      }
    } else if (st == ROVE_OK) {
      absorbed++;
      for (int i = 0; i < f.n_out; i++)
        if (memcmp(f.out[i].p, ref_out[i], f.out[i].bytes) != 0)
          fail_msg("%s (threads %d, allocation %ld failed): ROVE_OK with another output %d",
                   s->name, threads, k, i);
      if (s->observe) {
        n = s->observe(&f, state);
        if (n != ref_state_n || memcmp(state, ref_state, n) != 0)
          fail_msg("%s (threads %d, allocation %ld failed): ROVE_OK with another cache state",
                   s->name, threads, k);
      }
    } else {
      fail_msg("%s (threads %d, allocation %ld failed): %s", s->name, threads, k,
               rove_status_string(st));
    }
    destroy_all(&f);
    const long live1 = atomic_load(&g_live);
    if (live1 != live0)
      fail_msg("%s (threads %d, allocation %ld failed): %ld allocation(s) leaked", s->name,
               threads, k, live1 - live0);
  }
  printf("  %-30s threads %d: %ld allocation(s); failing each: %d x ROVE_ERR_OUT_OF_MEMORY, "
         "%d x absorbed (ROVE_OK, same output)\n",
         s->name, threads, count, oom, absorbed);
  for (int i = 0; i < 3; i++) free(ref_out[i]);
  free(ref_state);
  free(state);
  free(pre_state);
}
#endif

static void test_scenario(void **state) {
#if HAVE_INTERPOSER
  const scenario *s = *state;
  run_scenario(s, 1);
  run_scenario(s, 2);
#else
  (void)state;
#endif
}

/* ---- workspace by team --------------------------------------------------------------------
 * rove.h: "a call never runs more threads than it has independent tasks, and its
 * per-thread workspace is sized by the threads it runs". A call with at most `tasks`
 * tasks in each of its parallel phases must then request the same bytes on a plan of
 * ROVE_MAX_THREADS threads as on a plan of `tasks` threads. */

static rove_status one_task_rotate(fx *f) {
  add_inout(f, g_out, sizeof(float) * 200 * H * D, g_in);
  return rove_rotate(f->plan, g_out, 200, H, 0, g_pos, 0);
}

static rove_status one_task_rotate_angles(fx *f) {
  add_inout(f, g_out, sizeof(float) * 200 * H * D, g_in);
  return rove_rotate_angles(f->plan, g_out, 200, H, 0, g_ang, HKV, 1);
}

static void setup_cache_b1(fx *f) {
  make_plan(f);
  assert_int_equal(rove_kv_cache_create(f->plan, 1, CACHE_CAP, &f->cache), ROVE_OK);
}

static rove_status one_task_append(fx *f) {
  return rove_kv_cache_append(f->cache, 200, g_in, 0, g_in + 200 * HKV * D, 0, NULL);
}

static rove_status one_task_decode(fx *f) {
  rove_attention_args a = {.batch = 1, .q_len = 1, .kv_len = 64};
  a.q = g_in;
  a.k = g_in + H * D;
  a.v = a.k + 64 * HKV * D;
  a.out = g_out;
  add_out(f, g_out, sizeof(float) * H * D);
  return rove_attention_forward(f->plan, &a);
}

static const struct {
  scenario s;
  int tasks;
} k_few_tasks[] = {
    {{"rotate", make_plan, one_task_rotate, NULL}, 1},        /* one chunk of tokens */
    {{"rotate_angles", make_plan, one_task_rotate_angles, NULL}, 1},
    {{"kv_cache_append", setup_cache_b1, one_task_append, NULL}, 1}, /* batch 1, one chunk */
    {{"attention_forward_decode", make_plan, one_task_decode, NULL}, H}, /* merge: a task per head */
};

#if HAVE_INTERPOSER
/* Bytes librove requests in s's call on a plan of `threads` threads, after a warm-up run
 * (librove sizes up what the process can give a team the first time a team grows: that
 * happens once, not per call). */
static size_t call_bytes(const scenario *s, int threads) {
  fx f = {.threads = threads};
  s->setup(&f);
  assert_int_equal(s->call(&f), ROVE_OK);
  destroy_all(&f);
  f = (fx){.threads = threads};
  s->setup(&f);
  arm(0);
  const rove_status st = s->call(&f);
  disarm();
  const size_t bytes = atomic_load(&g_bytes);
  destroy_all(&f);
  if (st != ROVE_OK) fail_msg("%s (threads %d): %s", s->name, threads, rove_status_string(st));
  return bytes;
}
#endif

static void test_workspace_by_team(void **state) {
  (void)state;
#if HAVE_INTERPOSER
  for (size_t i = 0; i < sizeof k_few_tasks / sizeof *k_few_tasks; i++) {
    const scenario *s = &k_few_tasks[i].s;
    const int t = k_few_tasks[i].tasks;
    const size_t few = call_bytes(s, t), max = call_bytes(s, ROVE_MAX_THREADS);
    printf("  %-26s %d task(s): %zu bytes on %d thread(s), %zu on %d\n", s->name, t, few, t, max,
           ROVE_MAX_THREADS);
    if (few != max)
      fail_msg("%s (at most %d tasks) requests %zu bytes on a plan of %d threads, %zu on %d",
               s->name, t, max, ROVE_MAX_THREADS, few, t);
  }
#endif
}

int main(void) {
  rove_test_isa_gate();
#if !HAVE_INTERPOSER
  printf("SKIPPED: the failing allocator needs glibc's __libc_malloc\n");
  return 77;
#else
  g_in = malloc(sizeof(float) * IN_FLOATS);
  g_decay = malloc(sizeof(float) * IN_FLOATS);
  g_ang = malloc(sizeof(double) * ANG_DOUBLES);
  g_out = malloc(sizeof(float) * OUT_FLOATS);
  g_out2 = malloc(sizeof(float) * OUT_FLOATS);
  assert_true(g_in && g_decay && g_ang && g_out && g_out2);
  rove_rng rng;
  rove_rng_seed(&rng, 13);
  rove_rng_fill(&rng, g_in, IN_FLOATS, -1.0f, 1.0f);
  rove_rng_fill(&rng, g_decay, IN_FLOATS, -0.5f, 0.0f);
  for (int64_t i = 0; i < ANG_DOUBLES; i++) g_ang[i] = rove_rng_uniform(&rng, -10.0f, 10.0f);
  for (int i = 0; i < 2 * N_KV; i++) g_pos[i] = (int32_t)(rove_rng_u64(&rng) % 5000);

  const char *ff = getenv("ROVE_ALLOC_FAIL_FOREIGN");
  g_fail_foreign = ff && strcmp(ff, "1") == 0;
  if (!dl_iterate_phdr(find_segment, (void *)&rove_plan_create)) {
    printf("FAIL: librove.so's code segment not found\n");
    return 1;
  }
  /* the interposer must see librove's allocations, else nothing below could fail */
  rove_plan *p = NULL;
  rove_attention_config c;
  rove_attention_config_init(&c, H, HKV, D);
  arm(0);
  const rove_status st = rove_plan_create(&c, &p);
  const long seen = disarm();
  rove_plan_destroy(p);
  if (st != ROVE_OK || seen == 0) {
    printf("FAIL: rove_plan_create made %ld allocations through this executable's malloc\n", seen);
    return 1;
  }

  struct CMUnitTest tests[N_SCENARIOS + 1];
  for (int i = 0; i < N_SCENARIOS; i++)
    tests[i] = (struct CMUnitTest){.name = k_scenarios[i].name, .test_func = test_scenario,
                                   .initial_state = (void *)&k_scenarios[i]};
  tests[N_SCENARIOS] = (struct CMUnitTest){.name = "workspace_by_team",
                                           .test_func = test_workspace_by_team};
  return cmocka_run_group_tests(tests, NULL, NULL);
#endif
}
