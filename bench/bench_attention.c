/* SPDX-License-Identifier: MIT */
/* Attention benchmarks: RoVE against plain RoPE through the same library.
 *
 * Each benchmark builds two plans that differ only in their rotation flags
 * (ROVE_ROTATE_ROPE vs ROVE_ROTATE_ROVE) and times both inside one loop, alternating
 * which goes first, so that both see the same machine state (frequency, cache, noise
 * from other processes). One iteration is one RoPE forward plus one RoVE forward; the
 * counters are computed from the medians of the per-call times:
 *   rove_ms, rope_ms     median time of one forward
 *   ratio                rove_ms / rope_ms (the cost of RoVE over RoPE; 1 = free)
 *   gflops, gflops_rope  attention FLOPs / median time: 4*d*heads per visible
 *                        (query, key) pair, i.e. 2*n^2*d*heads for causal prefill,
 *                        4*n^2*d*heads for full, 4*kv_len*d*heads for decode
 *   pct_peak(_rope)      gflops / (single-core FMA peak of the ISA * threads) * 100
 *   kv_bytes_per_second(_rope)  decode: K and V bytes / median time
 *   read_ms, pct_read(_rope)    decode: median time to sum a separate buffer of the K+V
 *                        byte count, timed in the same loop right after the two plans
 *                        (so under the same cache conditions: three buffers of the K+V
 *                        size take turns), and read_ms / decode time in %
 *
 * prefill/<isa>: q_len = kv_len = n.  decode/<isa>: q_len = q (1 or a few), kv_len = n (the
 * queries are the last positions), through rove_attention_forward, which rotates all of K and V on
 * every call.  decode_cache/<isa>: the same step through a KV cache (rove_kv_cache_*)
 * that holds the n tokens already rotated (filled before timing), stored as kv (f32,
 * bf16, f16, q8): what a decode step costs in a generation loop, without the append of
 * the new token. kv_bytes_per_second and the read reference count the stored bytes.
 * prefill_bf16/<isa>: RoVE prefill with fp32 tensors against the same with q, k, v and out
 * in bf16 (rove_attention_forward_typed), in one loop: rope_ms / gflops_rope are the fp32
 * call's, rove_ms / gflops the bf16 call's, ratio = bf16 time / fp32 time.
 *
 * Cases with one thread measure the CPU time of the calling thread (librove then runs on
 * it), both in Google Benchmark's time and in the per-call samples, so that other
 * processes taking the core away do not count; cases with more threads measure the wall
 * clock ("/real_time"; librove runs its own thread pool).
 *
 * The layer forward is measured in bench_layer.c.
 */
#define _DEFAULT_SOURCE /* madvise (bench_pages.h) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_pages.h"

typedef struct attn_family {
  rove_isa isa;
  int decode; /* q_len = the q argument, kv_len = n */
  int cache;  /* decode through a KV cache filled before timing */
  int bf16;   /* prefill: RoVE with fp32 tensors (slot 0) against RoVE with q, k, v and out
                 in bf16 (slot 1, rove_attention_forward_typed), in the same loop */
} attn_family;

/* x[0..n) rounded to bf16 in place: the bf16 values packed at the start of the buffer
 * (element i is written over bytes 2i.., after float i was read from 4i..). */
static void to_bf16_in_place(float *x, size_t n) {
  uint16_t *h = (uint16_t *)x;
  for (size_t i = 0; i < n; i++) {
    uint32_t b;
    memcpy(&b, &x[i], 4);
    b += 0x7fffu + ((b >> 16) & 1u); /* round to nearest even (the inputs are finite) */
    h[i] = (uint16_t)(b >> 16);
  }
}
static const rove_tensor_types BF16_TYPES = {ROVE_DTYPE_BF16, ROVE_DTYPE_BF16, ROVE_DTYPE_BF16,
                                             ROVE_DTYPE_BF16};

/* Arguments: n (kv_len; q_len too unless decode), head_dim, heads, kv heads, threads,
 * causal; decode also q (q_len); decode_cache also kv (the cache's rove_dtype:
 * 0 f32, 1 bf16, 2 f16, 3 q8). */
static const char *const ARG_NAMES[] = {"n", "d", "h", "kvh", "thr", "causal", "q", "kv"};
enum { N_ARGS = 6, N_ARGS_DECODE = 7, N_ARGS_CACHE = 8 };

/* Bytes of K and V of n tokens x kvh heads x d in storage type t (Q8 with its scales). */
static double kv_bytes(const int64_t *a, int cache) {
  const int64_t t = cache ? a[7] : ROVE_DTYPE_F32;
  const double rows = (double)a[0] * (double)a[3], d = (double)a[1];
  if (t == ROVE_DTYPE_Q8) return 2.0 * rows * (d + 4.0 * ((a[1] + ROVE_Q8_BLOCK - 1) / ROVE_Q8_BLOCK));
  return 2.0 * rows * d * (t == ROVE_DTYPE_F32 ? 4.0 : 2.0);
}

typedef struct attn_case {
  rove_plan *plan[2]; /* 0: RoPE, 1: RoVE */
  rove_kv_cache *cache[2];
  float *q, *k, *v, *out[2];
  float *q16, *k16, *v16; /* prefill_bf16: bf16 copies (packed at the buffer starts) */
  rove_attention_args args[2];
  rb_samples t[2];
  /* decode: a buffer of the K+V byte count, summed in the same loop (the read reference
   * under the same cache conditions as the decode calls) */
  uint64_t *rd;
  size_t rd_bytes;
  rb_samples t_read;
} attn_case;

static void case_free(attn_case *c) {
  for (int m = 0; m < 2; m++) {
    rove_kv_cache_destroy(c->cache[m]);
    rove_plan_destroy(c->plan[m]);
    free(c->out[m]);
    rb_samples_free(&c->t[m]);
  }
  free(c->q);
  free(c->q16);
  free(c->k16);
  free(c->v16);
  free(c->k);
  free(c->v);
  free(c->rd);
  rb_samples_free(&c->t_read);
}

/* Plans and buffers for one argument list; returns an error text or NULL. */
static const char *case_init(attn_case *c, const attn_family *f, const int64_t *a) {
  const int32_t n = (int32_t)a[0], d = (int32_t)a[1], h = (int32_t)a[2], kvh = (int32_t)a[3];
  const int32_t q_len = f->decode ? (int32_t)a[6] : n;
  for (int m = 0; m < 2; m++) {
    rove_attention_config cfg;
    rove_attention_config_init(&cfg, h, kvh, d);
    cfg.rotate = m || f->bf16 ? ROVE_ROTATE_ROVE : ROVE_ROTATE_ROPE;
    cfg.causal = (int32_t)a[5];
    cfg.isa = f->isa;
    cfg.n_threads = (int32_t)a[4];
    rove_status st = rove_plan_create(&cfg, &c->plan[m]);
    if (st != ROVE_OK) return rove_status_string(st);
  }
  const size_t nq = (size_t)q_len * (size_t)h * (size_t)d;
  const size_t nkv = (size_t)n * (size_t)kvh * (size_t)d;
  c->q = rb_alloc_floats(nq);
  c->k = rb_alloc_floats(nkv);
  c->v = rb_alloc_floats(nkv);
  c->out[0] = rb_alloc_floats(nq);
  c->out[1] = rb_alloc_floats(nq);
  if (!c->q || !c->k || !c->v || !c->out[0] || !c->out[1]) return "out of memory";
  rb_fill_uniform(c->q, nq, 1);
  rb_fill_uniform(c->k, nkv, 2);
  rb_fill_uniform(c->v, nkv, 3);
  memset(c->out[0], 0, nq * sizeof(float)); /* fault the pages in before timing */
  memset(c->out[1], 0, nq * sizeof(float));
  if (f->bf16) {
    c->q16 = rb_alloc_floats(nq);
    c->k16 = rb_alloc_floats(nkv);
    c->v16 = rb_alloc_floats(nkv);
    if (!c->q16 || !c->k16 || !c->v16) return "out of memory";
    memcpy(c->q16, c->q, nq * sizeof(float));
    memcpy(c->k16, c->k, nkv * sizeof(float));
    memcpy(c->v16, c->v, nkv * sizeof(float));
    to_bf16_in_place(c->q16, nq);
    to_bf16_in_place(c->k16, nkv);
    to_bf16_in_place(c->v16, nkv);
  }
  if (f->decode) { /* the read reference: the bytes the cache (or K and V) hold */
    c->rd_bytes = ((size_t)kv_bytes(a, f->cache) + 63) / 64 * 64;
    /* on the pages the bytes it stands for lie on: a cache's 2 MB pages (bench_pages.h),
     * the caller's K and V (64-byte aligned, 4 KB pages) without a cache */
    c->rd = f->cache ? (uint64_t *)bench_alloc_huge(c->rd_bytes)
                     : (uint64_t *)rb_alloc_floats(c->rd_bytes / sizeof(float));
    if (!c->rd) return "out of memory";
    memset(c->rd, 1, c->rd_bytes);
  }
  for (int m = 0; m < 2; m++) {
    rove_attention_args *g = &c->args[m];
    memset(g, 0, sizeof *g);
    g->batch = 1;
    g->q_len = q_len;
    g->q = c->q;
    g->out = c->out[m];
    if (f->cache) { /* the cache holds the n tokens (rotated once, untimed) */
      rove_status st = rove_kv_cache_create_typed(c->plan[m], 1, n, (rove_dtype)a[7], &c->cache[m]);
      if (st == ROVE_OK) st = rove_kv_cache_append(c->cache[m], n, c->k, 0, c->v, 0, NULL);
      if (st != ROVE_OK) return rove_status_string(st);
      continue;
    }
    g->kv_len = n;
    g->k = c->k;
    g->v = c->v;
    if (f->bf16 && m == 1) g->q = c->q16, g->k = c->k16, g->v = c->v16;
  }
  return NULL;
}

static rove_status run(const attn_case *c, const attn_family *f, int m) {
  if (c->cache[m]) return rove_kv_cache_attention(c->cache[m], &c->args[m]);
  return f->bf16 && m == 1 ? rove_attention_forward_typed(c->plan[m], &c->args[m], &BF16_TYPES)
                           : rove_attention_forward(c->plan[m], &c->args[m]);
}

/* Attention FLOPs of one forward: 4*d*h per visible (query, key) pair. */
static double attn_flops(const attn_family *f, const int64_t *a) {
  const double n = (double)a[0], d = (double)a[1], h = (double)a[2];
  if (f->decode) return 4.0 * n * d * h * (double)a[6];
  return (a[5] ? 2.0 : 4.0) * n * n * d * h;
}

static void report(rbs_state *st, attn_case *c, const attn_family *f, const int64_t *a) {
  static const char *const suffix[2] = {"_rope", ""};
  const double flops = attn_flops(f, a);
  const double peak = rb_peak_for(f->isa) * (double)a[4];
  double med[2];
  for (int m = 0; m < 2; m++) med[m] = rb_median(c->t[m].v, c->t[m].n);
  rbs_counter_plain(st, "rove_ms", med[1] * 1e3);
  rbs_counter_plain(st, "rope_ms", med[0] * 1e3);
  rbs_counter_plain(st, "ratio", med[0] > 0 ? med[1] / med[0] : 0);
  for (int m = 0; m < 2; m++) {
    char name[64];
    const double gflops = med[m] > 0 ? flops / med[m] * 1e-9 : 0;
    snprintf(name, sizeof name, "gflops%s", suffix[m]);
    rbs_counter_plain(st, name, gflops);
    snprintf(name, sizeof name, "pct_peak%s", suffix[m]);
    rbs_counter_plain(st, name, peak > 0 ? 100.0 * gflops / peak : 0);
    if (f->decode && med[m] > 0) {
      snprintf(name, sizeof name, "kv_bytes_per_second%s", suffix[m]);
      rbs_counter(st, name, kv_bytes(a, f->cache) / med[m], RBS_COUNTER_KIBI);
    }
  }
  if (f->decode && c->t_read.n > 0) { /* the read reference of the same loop */
    const double mr = rb_median(c->t_read.v, c->t_read.n);
    rbs_counter_plain(st, "read_ms", mr * 1e3);
    rbs_counter_plain(st, "pct_read", med[1] > 0 ? 100.0 * mr / med[1] : 0);
    rbs_counter_plain(st, "pct_read_rope", med[0] > 0 ? 100.0 * mr / med[0] : 0);
  }
  rbs_set_label(st, rove_isa_name(rove_plan_isa(c->plan[1])));
}

static void bm_attention(rbs_state *st, void *user) {
  const attn_family *f = user;
  int64_t a[N_ARGS_CACHE];
  const int n_args = f->cache ? N_ARGS_CACHE : f->decode ? N_ARGS_DECODE : N_ARGS;
  for (int i = 0; i < n_args; i++) a[i] = rbs_range(st, i);
  attn_case c;
  memset(&c, 0, sizeof c);
  const char *err = case_init(&c, f, a);
  if (err) {
    rbs_skip_with_error(st, err);
    case_free(&c);
    return;
  }
  /* One thread: librove runs on this thread, whose CPU time is measured; more: wall. */
  double (*now)(void) = a[4] > 1 ? rb_now : rb_cpu_now;
  int64_t it = 0;
  while (rbs_keep_running(st)) {
    for (int j = 0; j < 2 && !err; j++) {
      const int m = (int)((it + j) & 1); /* even iterations: RoPE first */
      const double t0 = now();
      rove_status s = run(&c, f, m);
      const double dt = now() - t0;
      rbs_do_not_optimize(c.out[m]);
      if (s != ROVE_OK) err = rove_status_string(s);
      else if (rb_samples_push(&c.t[m], dt)) err = "out of memory";
    }
    if (!err && c.rd) { /* decode: the read reference, interleaved with the two plans */
      double dt; /* timed inside: thread creation excluded (bench_bandwidth.c) */
      uint64_t acc = rb_read_sum(c.rd, c.rd_bytes, (int)a[4], &dt);
      rbs_do_not_optimize(&acc);
      if (rb_samples_push(&c.t_read, dt)) err = "out of memory";
    }
    if (err) {
      rbs_skip_with_error(st, err);
      break;
    }
    it++;
  }
  if (!err && c.t[0].n > 0) report(st, &c, f, a);
  case_free(&c);
}

/* ---- registration ------------------------------------------------------------------- */

typedef struct attn_reg {
  attn_family fam;
  rb_pair pair;
} attn_reg;

enum { PREFILL, DECODE, DECODE_CACHE, PREFILL_BF16, N_KINDS };
/* [smoke][kind][isa] */
static attn_reg regs[2][N_KINDS][RB_N_ISAS];

typedef struct shape {
  int32_t d, h, kvh;
} shape;
/* The headline shape first (GPT-2 small: 12 x 64, MHA), then d 128 and GQA 4:1. */
static const shape SHAPES[] = {{64, 12, 12}, {64, 12, 3}, {128, 12, 12}, {128, 12, 3}};

static rb_pair *pair(int smoke, int kind, rove_isa isa) {
  static const char *const kinds[N_KINDS] = {"prefill", "decode", "decode_cache", "prefill_bf16"};
  attn_reg *r = &regs[smoke][kind][isa];
  if (!r->pair.fn) {
    r->fam.isa = isa;
    r->fam.decode = kind == DECODE || kind == DECODE_CACHE;
    r->fam.cache = kind == DECODE_CACHE;
    r->fam.bf16 = kind == PREFILL_BF16;
    snprintf(r->pair.name, sizeof r->pair.name, "%s%s/%s", smoke ? "smoke/" : "", kinds[kind],
             rove_isa_name(isa));
    r->pair.fn = bm_attention;
    r->pair.user = &r->fam;
    r->pair.arg_names = ARG_NAMES;
    r->pair.n_args = !r->fam.decode ? N_ARGS : kind == DECODE ? N_ARGS_DECODE : N_ARGS_CACHE;
    r->pair.unit = RBS_MS;
  }
  return &r->pair;
}

static void add(rb_pair *p, int64_t n, shape s, int32_t thr, int causal) {
  const int64_t a[N_ARGS] = {n, s.d, s.h, s.kvh, thr, causal};
  rb_pair_add(p, a, thr);
}

/* A decode case: q_len queries (the last positions) against n keys (a decode_cache pair:
 * in a cache of type kv). */
static void add_decode_kv(rb_pair *p, int64_t n, shape s, int32_t thr, int32_t q_len, rove_dtype kv) {
  const int64_t a[N_ARGS_CACHE] = {n, s.d, s.h, s.kvh, thr, 1, q_len, kv};
  rb_pair_add(p, a, thr);
}
static void add_decode(rb_pair *p, int64_t n, shape s, int32_t thr, int32_t q_len) {
  add_decode_kv(p, n, s, thr, q_len, ROVE_DTYPE_F32);
}

/* Largest prefill n for @p isa: the best SIMD ISA goes to max_n, lower SIMD ISAs to
 * lower_max_n, the scalar kernels to scalar_max_n (all capped by max_n). */
static int32_t prefill_cap(rove_isa isa) {
  int32_t cap = rb_cfg.max_n;
  if (isa == ROVE_ISA_SCALAR) cap = rb_cfg.scalar_max_n;
  else if (isa != rb_cfg.isas[0]) cap = rb_cfg.lower_max_n;
  return cap < rb_cfg.max_n ? cap : rb_cfg.max_n;
}

static void register_full(void) {
  for (int i = 0; i < rb_cfg.n_isas; i++) {
    const rove_isa isa = rb_cfg.isas[i];
    rb_pair *p = pair(0, PREFILL, isa);
    const int32_t cap = prefill_cap(isa);
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++)
      for (int32_t n = 256; n <= cap; n *= 2)
        for (int t = 0; t < rb_cfg.n_threads; t++) add(p, n, SHAPES[s], rb_cfg.threads[t], 1);
    if (cap >= 2048) /* causal vs full: full attention at n = 2048 */
      for (int t = 0; t < rb_cfg.n_threads; t++) add(p, 2048, SHAPES[0], rb_cfg.threads[t], 0);
    if (i > 0) continue; /* bf16 tensors: the best ISA, 12 x 64 and 8 x 128 from n = 1024 */
    const shape s8 = {128, 8, 8};
    for (int32_t n = 1024; n <= cap && n <= 4096; n *= 2)
      for (int t = 0; t < rb_cfg.n_threads; t++) {
        add(pair(0, PREFILL_BF16, isa), n, SHAPES[0], rb_cfg.threads[t], 1);
        add(pair(0, PREFILL_BF16, isa), n, s8, rb_cfg.threads[t], 1);
      }
  }
  /* decode: 12x64 MHA, one query, every cache length; at 4096 keys also GQA 12:4 and
   * q_len 4 (a GQA group's or a short chunk's rows share each K/V load) */
  const shape gqa4 = {64, 12, 4};
  for (int kind = DECODE; kind <= DECODE_CACHE; kind++)
    for (int i = 0; i < rb_cfg.n_isas; i++) {
      rb_pair *p = pair(0, kind, rb_cfg.isas[i]);
      for (int t = 0; t < rb_cfg.n_threads; t++) {
        const int32_t thr = rb_cfg.threads[t];
        for (int32_t n = 1024; n <= rb_cfg.max_kv; n *= 2) add_decode(p, n, SHAPES[0], thr, 1);
        if (rb_cfg.max_kv < 4096 || i > 0) continue; /* the variants: best ISA only */
        add_decode(p, 4096, SHAPES[0], thr, 4);
        add_decode(p, 4096, gqa4, thr, 1);
        add_decode(p, 4096, gqa4, thr, 4);
        const shape llama = {128, 32, 8}; /* Llama-3-8B's GQA 32:8 x 128 */
        if (kind != DECODE_CACHE) { /* the caller's K/V, rotated as they are read */
          add_decode(p, 8192, llama, thr, 1);
          continue;
        }
        /* storage types: 12 x 64 MHA at 4096 and 32768 keys, the Llama shape at 8192 and
         * 32768 (f32 of the MHA shape is above) */
        for (int t = ROVE_DTYPE_BF16; t < ROVE_DTYPE_COUNT; t++)
          for (int32_t n = 4096; n <= rb_cfg.max_kv && n <= 32768; n *= 8)
            add_decode_kv(p, n, SHAPES[0], thr, 1, (rove_dtype)t);
        for (int t = ROVE_DTYPE_F32; t < ROVE_DTYPE_COUNT; t++)
          for (int32_t n = 8192; n <= rb_cfg.max_kv && n <= 32768; n *= 4)
            add_decode_kv(p, n, llama, thr, 1, (rove_dtype)t);
      }
    }
}

static void register_smoke(void) {
  const shape mha = {64, 4, 4}, gqa = {32, 4, 1};
  for (int i = 0; i < rb_cfg.n_isas; i++) {
    const rove_isa isa = rb_cfg.isas[i];
    add(pair(1, PREFILL, isa), 128, mha, 1, 1);
    add(pair(1, PREFILL, isa), 96, gqa, 2, 0);
    add(pair(1, PREFILL_BF16, isa), 128, mha, 1, 1);
    add_decode(pair(1, DECODE, isa), 1000, mha, 2, 1);
    add_decode(pair(1, DECODE_CACHE, isa), 1000, gqa, 1, 3);
    add_decode_kv(pair(1, DECODE_CACHE, isa), 1000, gqa, 1, 1, ROVE_DTYPE_BF16);
    add_decode_kv(pair(1, DECODE_CACHE, isa), 1000, mha, 2, 1, ROVE_DTYPE_Q8);
  }
}

void rb_register_attention(int smoke) {
  if (smoke) register_smoke();
  else register_full();
}
