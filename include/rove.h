/* SPDX-License-Identifier: MIT */
/**
 * @file rove.h
 * @brief librove: CPU attention with rotary position embeddings and RoVE.
 *
 * RoVE (Rotary Value Embeddings) applies RoPE to queries and keys, rotates each value
 * by its key's position before aggregation, and rotates the output back by the query's
 * position, so that  y_i = sum_j a_ij R_{p_j - P_i} v_j.
 *
 * Conventions used throughout this header:
 * - Every fallible call returns a ::rove_status; outputs come last and are left
 *   untouched when a call fails.
 * - The library never aborts, exits or prints, except that ROVE_VERBOSE=1 in the
 *   environment logs the ISA choice of each new plan to stderr.
 * - Tensors are fp32 in row-major order unless a _typed call says otherwise (bf16 / fp16
 *   tensors, bf16 / fp16 / 8-bit KV caches: rove_dtype); "token stride" is the number of
 *   elements between consecutive tokens (0 = dense).
 * - Thread safety: functions without shared mutable state (all of them, unless a
 *   function says otherwise) may be called concurrently. A ::rove_plan is immutable
 *   after creation and may be used by many threads at once.
 */
#ifndef ROVE_H
#define ROVE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(ROVE_BUILDING_LIBRARY) && (defined(__GNUC__) || defined(__clang__))
#define ROVE_API __attribute__((visibility("default")))
#else
#define ROVE_API
#endif

/** @name Version */
/**@{*/
#define ROVE_VERSION_MAJOR 0
#define ROVE_VERSION_MINOR 7
#define ROVE_VERSION_PATCH 0
/** Encoded as major*10000 + minor*100 + patch. */
#define ROVE_VERSION (ROVE_VERSION_MAJOR * 10000 + ROVE_VERSION_MINOR * 100 + ROVE_VERSION_PATCH)
/**@}*/

/** Largest head_dim a plan accepts (larger -> ::ROVE_ERR_UNSUPPORTED). */
#define ROVE_MAX_HEAD_DIM 1024

/** Result of every fallible call. */
typedef enum rove_status {
  ROVE_OK = 0,                /**< success */
  ROVE_ERR_INVALID_ARGUMENT,  /**< NULL pointer, bad size, bad enum, NaN parameter, overlap */
  /** a valid request librove cannot serve: an ISA this CPU or build lacks, head_dim
   *  above ROVE_MAX_HEAD_DIM, or a combination the call documents as unsupported */
  ROVE_ERR_UNSUPPORTED,
  ROVE_ERR_OUT_OF_MEMORY,     /**< an allocation failed; nothing was written */
  /** an element or byte count does not fit int64/size_t, a position would leave int32,
   *  or a KV cache's capacity would be exceeded (each call says which it checks) */
  ROVE_ERR_SIZE_OVERFLOW,
  ROVE_ERR_INTERNAL,          /**< a bug in librove: please report it */
  ROVE_ERR_POOL_EXHAUSTED     /**< a paged cache has too few free blocks (or sequence
                                   slots) for the request; nothing was changed */
} rove_status;

/** Static English text for @p s; unknown values give "unknown rove_status". Never NULL. */
ROVE_API const char *rove_status_string(rove_status s);
/** The library's version as "MAJOR.MINOR.PATCH" (of the loaded .so, not of this header). */
ROVE_API const char *rove_version_string(void);

/* ------------------------------------------------------------------------------------ */
/** @name Instruction sets and CPU features */
/**@{*/

/** Kernel families. AUTO picks the best one the CPU and build offer. */
typedef enum rove_isa {
  ROVE_ISA_AUTO = 0,
  ROVE_ISA_SCALAR,
  ROVE_ISA_AVX2,    /**< x86-64 with AVX2, FMA, F16C (x86-64-v3) and OS support of the ymm state */
  ROVE_ISA_AVX512,  /**< x86-64 with AVX-512 F, DQ, VL, BW and OS support of the zmm state */
  ROVE_ISA_NEON,    /**< aarch64 (baseline) */
  /** Number of rove_isa values, ROVE_ISA_AUTO included (not an ISA). Iterate the ISAs as
   *  `for (int i = ROVE_ISA_SCALAR; i < ROVE_ISA_COUNT; i++)`; new ISAs are appended. */
  ROVE_ISA_COUNT
} rove_isa;

/** CPU feature bits reported by rove_cpu_features(). */
enum {
  ROVE_CPU_AVX2 = 1u << 0,       /**< AVX2 (with OS ymm support) */
  ROVE_CPU_FMA = 1u << 1,
  ROVE_CPU_AVX512F = 1u << 2,    /**< with OS zmm support */
  ROVE_CPU_AVX512DQ = 1u << 3,
  ROVE_CPU_AVX512VL = 1u << 4,
  ROVE_CPU_AVX512BW = 1u << 5,
  ROVE_CPU_AVX512BF16 = 1u << 6,
  ROVE_CPU_NEON = 1u << 8,
  ROVE_CPU_FP16 = 1u << 9,       /**< aarch64 half-precision arithmetic */
  ROVE_CPU_BF16 = 1u << 10,      /**< aarch64 BF16 */
  ROVE_CPU_SVE = 1u << 11,
  ROVE_CPU_F16C = 1u << 12       /**< x86 half-precision conversions (vcvtph2ps / vcvtps2ph) */
};

/** Features of the running CPU (detected once; usable by the OS). */
ROVE_API uint32_t rove_cpu_features(void);
/** Whether this build of librove contains kernels for @p isa and the CPU can run them
 *  (ignores the ROVE_ISA cap). ROVE_ISA_AUTO and ROVE_ISA_SCALAR always give 1. */
ROVE_API int rove_isa_available(rove_isa isa);
/** Best ISA this CPU and build offer, after the ROVE_ISA environment cap
 *  (ROVE_ISA=scalar|avx2|avx512|neon). Never returns ROVE_ISA_AUTO. */
ROVE_API rove_isa rove_best_isa(void);
/** "auto", "scalar", "avx2", "avx512", "neon", or "unknown". Never NULL. */
ROVE_API const char *rove_isa_name(rove_isa isa);
/** The ISA called @p name (exactly as rove_isa_name spells it, "auto" included) in @p isa.
 *  ROVE_ERR_INVALID_ARGUMENT (and @p isa untouched) for NULL or an unknown name. */
ROVE_API rove_status rove_isa_parse(const char *name, rove_isa *isa);
/** Number of threads a plan with n_threads = 0 uses: the first number of OMP_NUM_THREADS
 *  when it is set (read as libgomp reads it: "8" or "8,4"), else the CPUs this process may
 *  run on (its affinity mask); at most ROVE_MAX_THREADS; 1 in a ROVE_ENABLE_THREADS=OFF
 *  build. Read at each call (plans keep the count they were created with). */
ROVE_API int32_t rove_default_threads(void);
/** The largest n_threads a plan accepts (rove_attention_config, rove_gla_config); above it
 *  plan creation returns ROVE_ERR_INVALID_ARGUMENT. A call never runs more threads than it
 *  has independent tasks, and its per-thread workspace is sized by the threads it runs.
 *  When the process cannot create that many threads (an address-space, pids or
 *  RLIMIT_NPROC limit) or allocate its thread pool, the call runs on fewer, down to the
 *  calling thread alone; results do not depend on the thread count. librove's threads are
 *  its own pool (not OpenMP): no call ends the process for want of threads or memory.
 *  Idle workers spin for ROVE_SPIN_US microseconds (environment, 0..1000000, default 100;
 *  never when a team exceeds the CPUs) and then sleep. Calls from several threads at once
 *  get a team each; the pool survives fork (the child makes a new one) and dlclose
 *  (workers are joined). A call's wait for its team is not a cancellation point: a
 *  pthread_cancel of the calling thread takes effect after the call returns. */
#define ROVE_MAX_THREADS 1024
/**@}*/

/* ------------------------------------------------------------------------------------ */
/** @name Rotary frequencies */
/**@{*/

/** Which dims form a rotation pair k (k = 0 .. rotary_dim/2 - 1). */
typedef enum rove_pairing {
  ROVE_PAIRING_HALF = 0,     /**< (x[k], x[k + r/2]): GPT-NeoX, HF rotate_half */
  ROVE_PAIRING_INTERLEAVED   /**< (x[2k], x[2k+1]): GPT-J, Meta, DeepSeek */
} rove_pairing;

/** Where the r = rotary_dim rotated dims sit in a head of head_dim dims (the pairs of
 *  rove_pairing are formed inside that block; the other head_dim - r dims pass through). */
typedef enum rove_rotary_placement {
  ROVE_ROTARY_FIRST = 0, /**< dims 0 .. r-1: Llama, GPT-NeoX/Phi partial rotary */
  ROVE_ROTARY_LAST       /**< dims head_dim-r .. head_dim-1: DeepSeek MLA (the "nope" dims
                              first, then qk_rope_head_dim rotated dims) */
} rove_rotary_placement;

/** Context-extension scalings, as in HuggingFace transformers. */
typedef enum rove_scaling {
  ROVE_SCALING_NONE = 0,
  ROVE_SCALING_LINEAR,  /**< w_k / factor (position interpolation) */
  ROVE_SCALING_NTK,     /**< theta' = theta * factor^(r/(r-2)) (static NTK-aware) */
  ROVE_SCALING_YARN,    /**< YaRN ramp between interpolation and extrapolation */
  ROVE_SCALING_LLAMA3,  /**< Llama 3.1 wavelength bands */
  ROVE_SCALING_LONGROPE /**< Phi-3/Phi-4 LongRoPE: per-pair divisors (short or long set) */
} rove_scaling;

/** RoPE parameters. Fill with rove_rope_config_init(), then change what differs.
 *
 * Which scaling reads which field (docs/DESIGN.md §1 has the formulas). A field that the
 * chosen scaling does not read must keep its default (the value rove_rope_config_init
 * writes); anything else is ROVE_ERR_INVALID_ARGUMENT, so that no value a user set is
 * silently ignored:
 *
 *   field                          NONE LINEAR NTK YARN LLAMA3 LONGROPE
 *   factor                          -     x     x    x     x      x (for m only)
 *   original_max_position           -     -     -    x     x      x
 *   beta_fast, beta_slow, truncate  -     -     -    x     -      -
 *   mscale, mscale_all_dim          -     -     -    x     -      -
 *   attention_factor                -     -     -    x     -      x
 *   low/high_freq_factor            -     -     -    -     x      -
 *   freq_factors                    x     x     x    x     x      x (required: short set)
 *   long_freq_factors, max_position -     -     -    -     -      x
 *
 * rotary_dim, pairing, placement and theta are read by every scaling. */
typedef struct rove_rope_config {
  int32_t rotary_dim;            /**< r: even, 2..head_dim; 0 = head_dim */
  rove_pairing pairing;          /**< HALF */
  double theta;                  /**< base, finite and > 1; 10000 */
  rove_scaling scaling;          /**< NONE */
  double factor;                 /**< s, finite and > 0; 1 */
  int32_t original_max_position; /**< L0, > 0 for YARN, LLAMA3 and LONGROPE; 0 */
  double beta_fast, beta_slow;   /**< YaRN, finite and > 0; 32, 1 */
  /** m, the magnitude factor that multiplies the rotated dims of q and k (so logits by
   *  m^2), finite, 0 or in (0, 1000]; 0 = derive. YARN derives as transformers does:
   *  get_mscale(s, mscale) / get_mscale(s, mscale_all_dim) when both are set, else
   *  get_mscale(s, 1), with get_mscale(s, x) = 0.1 x ln s + 1 for s > 1 and 1 for s <= 1
   *  (see rove_rope_mscale). LONGROPE derives sqrt(1 + ln s / ln L0) for s > 1, else 1.
   *  A derived m above 1000 is ROVE_ERR_INVALID_ARGUMENT. */
  double attention_factor;
  int32_t truncate;              /**< YaRN: floor/ceil the correction range (0 for gpt-oss); 1 */
  double low_freq_factor;        /**< LLAMA3; 1 */
  double high_freq_factor;       /**< LLAMA3 (equal to low: no smoothing band); 4 */
  /** NULL or r/2 finite divisors > 0 applied after the scaling (w_k / f_k); for LONGROPE
   *  the short factor set, required. Borrowed until rove_plan_create / rove_rope_inv_freq
   *  returns. Every resulting frequency must satisfy w_k * 2^31 finite (so that every int32
   *  position has a finite angle), else ROVE_ERR_INVALID_ARGUMENT. */
  const double *freq_factors;
  /* ---- added in 0.2 (appended: the fields above keep their offsets) ---- */
  rove_rotary_placement placement; /**< FIRST */
  /** YaRN, DeepSeek style: both 0 (unset; m = get_mscale(s, 1)) or both finite and > 0;
   *  exactly one of them set is ROVE_ERR_INVALID_ARGUMENT (transformers would silently
   *  fall back to get_mscale(s, 1)). 0, 0. DeepSeek models also multiply the softmax scale
   *  by get_mscale(s, mscale_all_dim)^2: that is rove_attention_config.scale, see
   *  rove_rope_mscale. */
  double mscale, mscale_all_dim;
  /** LONGROPE: NULL or the r/2 long factors (finite, > 0), borrowed like freq_factors. */
  const double *long_freq_factors;
  /** LONGROPE: the length the plan serves, the largest position + 1 (transformers'
   *  seq_len); > original_max_position selects long_freq_factors (then required), else
   *  freq_factors (the short set). 0 = short. transformers switches sets per forward call
   *  from the largest position id; a plan is fixed, so pick the plan per call the same
   *  way. >= 0. */
  int32_t max_position;
} rove_rope_config;

/** Fill @p c with the defaults above (no-op when @p c is NULL). */
ROVE_API void rove_rope_config_init(rove_rope_config *c);

/**
 * Inverse frequencies w_k (k = 0 .. r/2-1) and the attention factor m of @p c for a head
 * of @p head_dim, evaluated in double exactly as docs/DESIGN.md §1 defines them.
 * @param inv_freq          out: r/2 doubles (r = rotary_dim, or head_dim when 0)
 * @param attention_factor  out, may be NULL: m (1 unless YARN or LONGROPE)
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT for NULL @p c or @p inv_freq, a bad head_dim
 *         or rotary_dim, a non-finite or out-of-range parameter, an unknown scaling or
 *         pairing; ROVE_ERR_UNSUPPORTED when head_dim > ROVE_MAX_HEAD_DIM.
 */
ROVE_API rove_status rove_rope_inv_freq(const rove_rope_config *c, int32_t head_dim,
                                        double *inv_freq, double *attention_factor);

/**
 * transformers' get_mscale: 0.1 * mscale * ln(s) + 1 for s > 1, and 1 for s <= 1; NaN
 * when either argument is not finite (NaN or an infinity). DeepSeek-V2/V3 recipe with YaRN factor s:
 *   cfg.rope.mscale = mscale, cfg.rope.mscale_all_dim = mscale_all_dim (m as above), and
 *   cfg.scale = rove_rope_mscale(s, mscale_all_dim)^2 / sqrt(qk_head_dim)
 * (DeepSeek-V3: s = 40, mscale = mscale_all_dim = 1, so m = 1 and the scale gains 1.874).
 */
ROVE_API double rove_rope_mscale(double s, double mscale);
/**@}*/

/* ------------------------------------------------------------------------------------ */
/** @name Attention plans */
/**@{*/

/** Rotation flags: which of the four rotations attention applies. */
enum { ROVE_ROTATE_Q = 1u, ROVE_ROTATE_K = 2u, ROVE_ROTATE_V = 4u, ROVE_ROTATE_O = 8u };
#define ROVE_ROTATE_ROPE (ROVE_ROTATE_Q | ROVE_ROTATE_K)
#define ROVE_ROTATE_ROVE (ROVE_ROTATE_ROPE | ROVE_ROTATE_V | ROVE_ROTATE_O)

/** Attention parameters. Fill with rove_attention_config_init(). */
typedef struct rove_attention_config {
  int32_t n_heads;     /**< query heads, > 0 */
  int32_t n_kv_heads;  /**< key/value heads, > 0, divides n_heads (GQA/MQA) */
  int32_t head_dim;    /**< even, 2..ROVE_MAX_HEAD_DIM */
  uint32_t rotate;     /**< ROVE_ROTATE_* bits; ROVE_ROTATE_ROVE */
  /** 0 or 1; 1. Bottom-right aligned: with the default q_pos, query i sits at
   *  kv_len - q_len + i and sees keys j <= kv_len - q_len + i (decode, chunked prefill).
   *  PyTorch's scaled_dot_product_attention(is_causal=True) aligns top-left (j <= i): the
   *  two differ when q_len != kv_len; pass q_pos = 0 .. q_len-1 for top-left. */
  int32_t causal;
  int32_t window;      /**< >= 0; key j visible iff P_i - p_j < window (|.| if non-causal); 0 = none */
  float scale;         /**< logit scale, finite; 1/sqrt(head_dim); 0 also means that */
  float softcap;       /**< >= 0 and finite; logits become c*tanh(s/c); 0 = none */
  rove_rope_config rope;
  rove_isa isa;        /**< AUTO; an ISA the CPU or build lacks -> ROVE_ERR_UNSUPPORTED */
  int32_t n_threads;   /**< 0..ROVE_MAX_THREADS; 0 = rove_default_threads() */
} rove_attention_config;

/** Defaults for the given shape (no-op when @p c is NULL). Sizes are validated later. */
ROVE_API void rove_attention_config_init(rove_attention_config *c, int32_t n_heads,
                                         int32_t n_kv_heads, int32_t head_dim);

/** An immutable, validated attention configuration with its frequencies and kernels. */
typedef struct rove_plan rove_plan;

/**
 * Validate @p c and build a plan. The plan copies everything it needs from @p c
 * (including freq_factors and long_freq_factors).
 * @return ROVE_OK and *out set; ROVE_ERR_INVALID_ARGUMENT (NULL, bad size, ratio, flag,
 *         scale, softcap, window, rope parameter); ROVE_ERR_UNSUPPORTED (head_dim too
 *         large, or the requested ISA is not available here); ROVE_ERR_OUT_OF_MEMORY.
 *         On failure *out is left untouched.
 */
ROVE_API rove_status rove_plan_create(const rove_attention_config *c, rove_plan **out);
/** Free a plan (NULL-safe). Not concurrently with other uses of the same plan. */
ROVE_API void rove_plan_destroy(rove_plan *p);
/** The ISA the plan's kernels use (never AUTO); ROVE_ISA_AUTO for a NULL plan. */
ROVE_API rove_isa rove_plan_isa(const rove_plan *p);
/** Threads the plan runs on (n_threads resolved); 0 for a NULL plan. */
ROVE_API int32_t rove_plan_threads(const rove_plan *p);
/** Copy of the validated config (rotary_dim, scale resolved; rope.freq_factors and
 *  rope.long_freq_factors point into the plan, valid while it lives). Passed back to
 *  rove_plan_create it gives the same plan. Returns ROVE_ERR_INVALID_ARGUMENT for NULL
 *  arguments. */
ROVE_API rove_status rove_plan_config(const rove_plan *p, rove_attention_config *out);
/**@}*/

/* ------------------------------------------------------------------------------------ */
/** @name Attention forward */
/**@{*/

/** Tensors of one attention call. Zero-initialise, then set what you use. */
typedef struct rove_attention_args {
  int32_t batch, q_len, kv_len;  /**< all > 0 */
  const float *q;        /**< [batch][q_len][n_heads][head_dim]     */
  const float *k, *v;    /**< [batch][kv_len][n_kv_heads][head_dim] */
  float *out;            /**< [batch][q_len][n_heads][head_dim]     */
  /** Floats between consecutive tokens (token t of batch b is row b*len + t);
   *  0 = dense (n_heads*head_dim for q/out, n_kv_heads*head_dim for k/v); otherwise at
   *  least the dense width. Lets q/k/v be views into one fused QKV projection. */
  int64_t q_stride, k_stride, v_stride, out_stride;
  const int32_t *q_pos;  /**< [batch][q_len] or NULL: P_i = kv_len - q_len + i */
  const int32_t *kv_pos; /**< [batch][kv_len] or NULL: p_j = j. Any int32, any order. */
  float *lse;            /**< NULL or [batch][n_heads][q_len]: ln sum_j exp(s_ij), -inf if
                              no key is visible (with sinks: the sum holds e^{sinks[h]}) */
  /** Selective RoPE (see rove_selective_angles): explicit rotation angles that replace
   *  pos * w_k in every rotation the plan enables, per token and KV head (a query head
   *  uses the angles of its KV head). Both NULL (positions decide the angles) or both
   *  set. [batch][q_len][n_kv_heads][rotary_dim/2] and [batch][kv_len][n_kv_heads]
   *  [rotary_dim/2], dense, finite. The YaRN factor m still multiplies q and k. Positions
   *  (q_pos, kv_pos or their defaults) still decide the causal mask and window. With a
   *  KV cache, kv_angles must be NULL: the cache stores K and V already rotated
   *  (rove_kv_cache_append_angles) and q_angles alone rotates the queries and output. */
  const double *q_angles, *kv_angles;
  /** NULL or [n_heads]: attention sinks (gpt-oss's learned per-head logits): query head
   *  h's softmax gains one more term exp(sinks[h]) in its denominator, a key every query
   *  sees whose value is zero. sinks[h] is a logit of the same units as the scaled (and
   *  softcapped) scores; it is not scaled, softcapped or masked. Finite. The output is
   *  o_i / (l_i + exp(sinks[h] - m_i)) and the LSE ln(sum_j exp(s_ij) + exp(sinks[h]))
   *  (sinks[h] for a query with no visible key, whose output stays 0). */
  const float *sinks;
  /** K and V with their heads apart, read in place: PyTorch's [batch][n_kv_heads][kv_len]
   *  [head_dim] (transformers' caches) is kv_head_stride = kv_len * head_dim, k_stride =
   *  v_stride = head_dim, k_batch_stride = v_batch_stride = n_kv_heads * kv_len *
   *  head_dim. Elements between consecutive KV heads of a token, for K and V alike: 0 =
   *  head_dim (the heads of a token side by side, the layout above); else >= head_dim,
   *  and then a token stride of 0 means head_dim and may be as small as head_dim.
   *  Elements between batch rows: 0 = kv_len token strides; else > 0. With the heads
   *  apart (kv_head_stride set) and batch > 1 the batch strides must be given (0 is
   *  ROVE_ERR_INVALID_ARGUMENT: which axis is outer is not known). All 0 with a KV
   *  cache. New in 0.5. */
  int64_t kv_head_stride, k_batch_stride, v_batch_stride;
} rove_attention_args;

/**
 * out = attention(q, k, v) with the rotations selected by the plan (docs/DESIGN.md §1).
 * A query with no visible key gets output 0 and LSE -inf (with sinks: its head's sink).
 * A key a query cannot see
 * (causality, window) never affects it, whatever its K and V rows hold (NaN, Inf, huge
 * values: padding and unused slots may hold garbage). Non-finite values a query does see
 * are not sanitised, on every ISA alike: a NaN in q or in the K row of a visible key (or
 * a logit of +inf) makes every dim of that query's output and its LSE NaN; a NaN in the
 * V row of a visible key makes the output dims it reaches NaN (the LSE stays finite).
 * Huge finite values: the output is an fp32 sum of weighted V rows divided at the end, so
 * it is finite while the sum of |v| over a row's visible keys stays below FLT_MAX / 55
 * (the AVX2 / AVX-512 tiles' lazy maximum, docs/DESIGN.md §3; FLT_MAX on the others), and
 * may be +-inf beyond that where the exact output is finite (PyTorch's fused CPU SDPA
 * overflows alike).
 * @p a->out and @p a->lse must not overlap any array the call reads (q, k, v, q_pos,
 * kv_pos, the angles, the sinks: checked, each array as the span from its first to its
 * last element, gaps between strided rows or heads included; positions and angles are
 * read tile by tile while other tasks already write) nor each other. Bitwise identical
 * results for any thread count.
 * Safe to call concurrently with the same plan and distinct outputs.
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (NULL plan/args/tensor, size <= 0, stride
 *         below the dense width, a K/V head stride below head_dim or a negative batch
 *         stride, K/V strides with a KV cache, overlapping output, only one of q_angles /
 *         kv_angles, kv_angles with a KV cache, a non-finite angle or sink);
 *         ROVE_ERR_SIZE_OVERFLOW (an element count or extent does not fit int64, checked
 *         before anything is read);
 *         ROVE_ERR_OUT_OF_MEMORY (workspace). Outputs are untouched on failure.
 */
ROVE_API rove_status rove_attention_forward(const rove_plan *p, const rove_attention_args *a);

/** Packed sequences of different lengths in one call (rove_attention_varlen), as
 *  flash-attn's varlen interface lays them out. Zero-initialise, then set. */
typedef struct rove_varlen_args {
  int32_t n_seqs;               /**< > 0 */
  /** [n_seqs + 1] each: cu[0] = 0, non-decreasing; sequence s owns query tokens
   *  cu_seqlens_q[s] .. cu_seqlens_q[s+1]-1 and key tokens cu_seqlens_k[s] ..
   *  cu_seqlens_k[s+1]-1. total_q = cu_seqlens_q[n_seqs], total_k likewise. */
  const int32_t *cu_seqlens_q, *cu_seqlens_k;
  const float *q;               /**< [total_q][n_heads][head_dim] */
  const float *k, *v;           /**< [total_k][n_kv_heads][head_dim] */
  float *out;                   /**< [total_q][n_heads][head_dim] */
  int64_t q_stride, k_stride, v_stride, out_stride; /**< token strides; 0 = dense */
  /** NULL or [total_q] / [total_k]: positions as in rove_attention_args, per sequence;
   *  NULL gives each sequence its own defaults P_i = len_k - len_q + i (bottom-right
   *  causal alignment per sequence) and p_j = j. */
  const int32_t *q_pos, *kv_pos;
  float *lse;                   /**< NULL or [n_heads][total_q] (flash-attn's layout) */
  /** NULL or [total_q] / [total_k][n_kv_heads][rotary_dim/2]: explicit angles, both or
   *  neither, as in rove_attention_args. */
  const double *q_angles, *kv_angles;
  const float *sinks;           /**< NULL or [n_heads]: as in rove_attention_args */
} rove_varlen_args;

/**
 * Attention of every packed sequence over its own keys only, with the plan's rotations,
 * causality (per sequence, bottom-right aligned), window, softcap and GQA: equal to one
 * rove_attention_forward per sequence (bitwise: each sequence runs exactly that call).
 * A sequence with queries and no keys gets output 0 and LSE -inf (with sinks: the head's
 * sink); one without queries is skipped. q and out may be NULL when total_q = 0, k and v
 * when total_k = 0 (empty tensors). Everything is validated, and every sequence's
 * workspace taken, before any output is written (outputs untouched on failure). The
 * sequences run in order, in groups: a long sequence alone, consecutive short ones
 * (decode rows, short prompts) together, every phase of a group (tables, K/V packing,
 * query tiles, split merges) as one parallel loop over the plan's threads (a group below
 * 2^20 multiply-adds runs on the calling thread); results are bitwise identical for any
 * thread count. Workspace: one block of the largest group's size, from the plan's pool.
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (what rove_attention_forward rejects for a
 *         sequence, NULL cu arrays, cu[0] != 0, decreasing cu, a NULL tensor with
 *         tokens, an output overlapping an input anywhere in the packed tensors, the cu
 *         arrays, the positions, the angles or the sinks; a non-finite sink);
 *         ROVE_ERR_SIZE_OVERFLOW;
 *         ROVE_ERR_OUT_OF_MEMORY.
 */
ROVE_API rove_status rove_attention_varlen(const rove_plan *p, const rove_varlen_args *a);

/**
 * Exact merge of partial attentions of the same queries over disjoint key sets (split-KV,
 * a sharded or paged cache, cascade attention): with part p's output O_p and LSE L_p
 * (as rove_attention_forward writes them, rotated back and normalised),
 *   L = ln sum_p e^{L_p},   O = sum_p e^{L_p - L} O_p
 * per (batch, head, query). Summed in double in part order (deterministic), rounded once.
 * A part whose LSE is -inf (no visible key) contributes nothing, whatever its output row
 * holds; a row that is -inf in every part gets O = 0 and L = -inf. A NaN LSE makes that
 * row's O and L NaN, and so does a +inf LSE (an infinite logit, which makes the forward's
 * row NaN too). Since R_{P_i}^{-1} is linear the merge is exact for RoVE outputs too.
 * Parts computed with attention sinks cannot be merged exactly (each holds e^{s_h}): with
 * sinks, compute the parts without them and merge with rove_merge_partials_sinks.
 * Layouts as in rove_attention_args (dense): outs[p] and @p out [batch][q_len][n_heads]
 * [head_dim], lses[p] and @p lse [batch][n_heads][q_len]. @p lse may be NULL. @p out and
 * @p lse may be exactly outs[0] and lses[0] (merged in place) but must not overlap any
 * other input, the arrays @p outs and @p lses included. Runs on the calling thread (one pass over the parts: memory bound).
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (n_parts < 1, a NULL array or entry, sizes
 *         <= 0, head_dim > ROVE_MAX_HEAD_DIM, an overlap other than the in-place one);
 *         ROVE_ERR_SIZE_OVERFLOW. Outputs untouched on failure.
 */
ROVE_API rove_status rove_merge_partials(int32_t n_parts, const float *const *outs,
                                         const float *const *lses, int32_t batch, int32_t q_len,
                                         int32_t n_heads, int32_t head_dim, float *out,
                                         float *lse);

/**
 * rove_merge_partials with attention sinks (rove_attention_args.sinks) applied once, to
 * the merged result: the parts must be computed *without* sinks (a part computed with
 * them already holds e^{s_h} in its denominator, and merging n such parts would count it
 * n times). Per row of head h:
 *   M = max(max_p L_p, s_h),  S = sum_p e^{L_p - M} + e^{s_h - M},
 *   O = sum_p e^{L_p - M} O_p / S,  L = M + ln S
 * (a row that is -inf in every part gets O = 0 and L = s_h), which equals one call with
 * the sinks over all the keys. @p sinks: NULL (= rove_merge_partials) or [n_heads] finite
 * floats that @p out and @p lse must not overlap. New in 0.5.
 * @return as rove_merge_partials; ROVE_ERR_INVALID_ARGUMENT also for a non-finite sink or
 *         an output over the sinks.
 */
ROVE_API rove_status rove_merge_partials_sinks(int32_t n_parts, const float *const *outs,
                                               const float *const *lses, int32_t batch,
                                               int32_t q_len, int32_t n_heads, int32_t head_dim,
                                               const float *sinks, float *out, float *lse);

/** Gradients of one attention call (rove_attention_backward). Zero-initialise, then set. */
typedef struct rove_attention_grads {
  const float *dout;  /**< [batch][q_len][n_heads][head_dim]: dLoss / d out */
  float *dq;          /**< out: [batch][q_len][n_heads][head_dim] */
  float *dk, *dv;     /**< out: [batch][kv_len][n_kv_heads][head_dim], token-major even
                           when K and V were read with their heads apart (kv_head_stride:
                           the head and batch strides do not apply to the gradients) */
  /** Floats between consecutive tokens, as in rove_attention_args; 0 = dense. */
  int64_t dout_stride, dq_stride, dk_stride, dv_stride;
  /** With explicit angles (a->q_angles / kv_angles): NULL, or out: dLoss / d angle,
   *  [batch][q_len][n_kv_heads][rotary_dim/2] and [batch][kv_len][n_kv_heads][rotary_dim/2]
   *  doubles (dense; a KV head's query heads summed). Each is the gradient through its
   *  own array: a self-attention call that passes one array as both gets the total as
   *  d_q_angles + d_kv_angles. Must be NULL without explicit angles. */
  double *d_q_angles, *d_kv_angles;
  /** With a->sinks: NULL, or out: dLoss / d sinks, [n_heads] (summed over the batch and
   *  the queries: -sum_i exp(sinks[h] - lse_i) (dout_i . out_i)). Must be NULL without
   *  a->sinks. */
  float *d_sinks;
  /** NULL, or the upstream gradient of the forward's LSE, dLoss / d lse, [batch][n_heads]
   *  [q_len] floats (dense, as a->lse): taken into every gradient (d lse_i / d s_ij =
   *  a_ij, so D_i becomes do_i . out_i - d_lse_i; a sink's gradient gains
   *  sum_i e^{s_h - lse_i} d_lse_i). Rows whose LSE is -inf (no visible key, no sink)
   *  ignore it. For code that combines partial outputs by their LSE under autograd. */
  const float *d_lse;
} rove_attention_grads;

/**
 * dq, dk and dv of rove_attention_forward(p, a) for the upstream gradient g->dout. @p a
 * is the forward's call: the same q, k, v, strides, positions and angles, with a->out and
 * a->lse holding what that forward wrote (read here, not written; a->lse is required, so
 * run the forward with an lse buffer). Every rotation flag, YaRN's factor m (on q and k),
 * causal / bottom-right alignment, explicit positions, windows, softcap, GQA / MQA (dk and
 * dv summed over each query group) and strides, all fp32. Flash style: P is recomputed
 * from the LSE key block by key block, never an n x n matrix; workspace O((q_len + kv_len)
 * * heads * head_dim). A query with no visible key (LSE -inf, or the sink) contributes
 * nothing and gets dq = 0; a key no query sees gets dk = dv = 0. With sinks (a->sinks)
 * the forward's LSE holds them and g->d_sinks, when set, gets their gradient (a->sinks
 * must be the forward's: other sinks cannot be detected and give wrong gradients). With
 * explicit angles (Selective RoPE) their gradients are written where g asks for them
 * (d_q_angles, d_kv_angles: each rotation an angle drives contributes, e.g. a key angle
 * through K and, for RoVE, V).
 * Bitwise identical for any thread count (no atomics: dk / dv and dq are accumulated by
 * disjoint tasks in a fixed order).
 * The tile loops have a kernel per ISA (scalar, AVX2, AVX-512, NEON), each checked against
 * the scalar one.
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT as rove_attention_forward, and for a NULL
 *         @p g, dout, dq, dk, dv or a->lse, a gradient stride below the dense width, or a
 *         gradient that overlaps an input (q, k, v, out, lse, dout, the angles, the
 *         positions, the sinks) or another gradient, an angle gradient without explicit
 *         angles, d_sinks without sinks;
 *         ROVE_ERR_SIZE_OVERFLOW; ROVE_ERR_OUT_OF_MEMORY. Gradients untouched on failure.
 */
ROVE_API rove_status rove_attention_backward(const rove_plan *p, const rove_attention_args *a,
                                             const rove_attention_grads *g);

/**
 * Rotate x ([n_tokens][n_heads][head_dim], token stride in floats, 0 = dense) in place by
 * R_pos (inverse = 0) or R_pos^{-1} (inverse = 1), using the plan's head_dim, rotary_dim,
 * pairing, placement and frequencies. A pure rotation: the YaRN attention factor is not
 * applied.
 * @param pos  [n_tokens] positions, or NULL for 0 .. n_tokens-1; must not overlap x
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (NULL plan or x, n_tokens or n_heads <= 0,
 *         stride below n_heads*head_dim, inverse not 0/1, pos overlapping x);
 *         ROVE_ERR_SIZE_OVERFLOW;
 *         ROVE_ERR_OUT_OF_MEMORY. x is untouched on failure.
 */
ROVE_API rove_status rove_rotate(const rove_plan *p, float *x, int32_t n_tokens,
                                 int32_t n_heads, int64_t token_stride, const int32_t *pos,
                                 int32_t inverse);

/**
 * rove_rotate with explicit angles: token t of head h of x is rotated by the angles
 * angles[(t * angle_heads + h / (n_heads / angle_heads)) * rotary_dim/2 + k] (so query
 * heads of one GQA group share their KV head's angles). @p angle_heads must divide
 * @p n_heads; angles are finite ([n_tokens][angle_heads][rotary_dim/2], dense) and do
 * not overlap x.
 * @return as rove_rotate; ROVE_ERR_INVALID_ARGUMENT also for NULL angles or a bad
 *         angle_heads.
 */
ROVE_API rove_status rove_rotate_angles(const rove_plan *p, float *x, int32_t n_tokens,
                                        int32_t n_heads, int64_t token_stride,
                                        const double *angles, int32_t angle_heads,
                                        int32_t inverse);
/**@}*/

/* ------------------------------------------------------------------------------------ */
/** @name Element types */
/**@{*/

/** Element type of a tensor (rove_tensor_types) or of a KV cache's storage
 * (rove_kv_cache_create_typed).
 * Arithmetic is always fp32: values are widened as they are read (online softmax, P V and
 * their sums stay fp32) and rounded once as they are stored. */
typedef enum rove_dtype {
  ROVE_DTYPE_F32 = 0, /**< IEEE binary32 */
  ROVE_DTYPE_BF16,    /**< bfloat16: fp32's exponent, 8 significant bits; stored by
                           round-to-nearest-even (NaN stays a NaN) */
  ROVE_DTYPE_F16,     /**< IEEE binary16: 11 significant bits, largest finite 65504,
                           subnormals kept; round-to-nearest-even */
  /** 8-bit blocks: each head row is cut into blocks of ROVE_Q8_BLOCK dims (the last one
   *  shorter when head_dim is not a multiple), stored as int8 q in [-127, 127] with one
   *  fp32 scale per block, x = scale * q, scale = max|x| / 127 of the block, q =
   *  round-to-nearest-even(x * 127 / max|x|) (llama.cpp's q8_0 shape with an fp32 scale:
   *  fp16 scales underflow for blocks of tiny values); a block with max|x| below 2^-100
   *  is stored as zeros (scale 0). 1.125 bytes per element at
   *  head_dim 64 or 128 (3.56x less than fp32). */
  ROVE_DTYPE_Q8,
  ROVE_DTYPE_COUNT /**< number of types (not a type) */
} rove_dtype;
#define ROVE_Q8_BLOCK 32

/** Element types of the tensors of one attention call (rove_attention_forward_typed,
 * rove_kv_cache_attention_typed): each F32, BF16 or F16 (Q8 only as a cache's storage).
 * The pointers of rove_attention_args then point at elements of these types (cast them
 * to const float * / float *), and every stride counts elements of the tensor's own type.
 * Alignment: 2 bytes for BF16 / F16. Zero-initialised ({0}) means all F32. */
typedef struct rove_tensor_types {
  rove_dtype q, k, v, out;
} rove_tensor_types;

/**
 * rove_attention_forward with q, k, v and out of the given types. Each tensor is widened
 * to fp32 as it is packed or read (fused into the rotate/pack pass: no separate
 * conversion pass over memory), all arithmetic and the LSE are fp32, and out is rounded
 * once (round-to-nearest-even; a value beyond F16's range becomes +-inf, as a cast
 * would). NaN and infinities in half inputs follow the rules of rove_attention_forward.
 * With every type F32 (or @p types NULL) this is rove_attention_forward, bit for bit.
 * @return as rove_attention_forward; ROVE_ERR_INVALID_ARGUMENT also for a type that is
 *         not F32, BF16 or F16.
 */
ROVE_API rove_status rove_attention_forward_typed(const rove_plan *p, const rove_attention_args *a,
                                                  const rove_tensor_types *types);

/**
 * rove_attention_varlen with q, k, v and out of the given types (rove_tensor_types: each
 * F32, BF16 or F16; NULL = all F32), as rove_attention_forward_typed does for one call:
 * widened as they are read, fp32 arithmetic and LSE, out rounded once. The pointers of
 * @p a then point at elements of these types, and every token stride counts elements of
 * the tensor's own type. Each sequence equals rove_attention_forward_typed of its slices,
 * bit for bit.
 * @return as rove_attention_varlen; ROVE_ERR_INVALID_ARGUMENT also for a type that is not
 *         F32, BF16 or F16.
 */
ROVE_API rove_status rove_attention_varlen_typed(const rove_plan *p, const rove_varlen_args *a,
                                                 const rove_tensor_types *types);

/** "f32", "bf16", "f16", "q8", or "unknown". Never NULL. */
ROVE_API const char *rove_dtype_name(rove_dtype t);
/** The type called @p name (as rove_dtype_name spells it; also "fp32", "float32",
 *  "bfloat16", "fp16", "float16", "int8") in @p t. ROVE_ERR_INVALID_ARGUMENT (and @p t
 *  untouched) for NULL or an unknown name. */
ROVE_API rove_status rove_dtype_parse(const char *name, rove_dtype *t);
/**@}*/

/* ------------------------------------------------------------------------------------ */
/** @name KV cache
 * A cache stores K and V already rotated into the global frame (K times the YaRN factor
 * m, as the plan's ROVE_ROTATE_K / ROVE_ROTATE_V say), with their positions. A decode step
 * rotates only the new K/V (append) and the queries and output (attention). It holds
 * batch x capacity tokens of n_kv_heads x head_dim K and V (in a private layout); every
 * batch row holds the same number of tokens. The cache borrows its plan, which must outlive it. Mutating calls
 * (append, shift, truncate, reset) must not run concurrently with any other call on the
 * same cache; rove_kv_cache_attention calls may run concurrently with each other. */
/**@{*/
typedef struct rove_kv_cache rove_kv_cache;

/** Allocate an empty cache for @p batch sequences of up to @p capacity tokens each. K and
 * V buffers of 2 MB or more start on a 2 MB boundary and ask the kernel for transparent
 * huge pages (madvise MADV_HUGEPAGE; the system's THP setting decides, "never" ignores
 * it): decode reads them once per step, 1.03-1.18x faster than on 4 KB pages (measured
 * on a Sapphire Rapids core). Memory is backed as tokens are written, but a huge page is
 * backed whole at its first write: each (batch row, KV head) region holds at least 2 MB
 * (or its size, if smaller) once it has a token.
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (NULL, batch or capacity <= 0);
 *         ROVE_ERR_SIZE_OVERFLOW; ROVE_ERR_OUT_OF_MEMORY. *out untouched on failure. */
ROVE_API rove_status rove_kv_cache_create(const rove_plan *p, int32_t batch, int32_t capacity,
                                          rove_kv_cache **out);
/**
 * rove_kv_cache_create with the storage type of K and V (rove_kv_cache_create is
 * ROVE_DTYPE_F32). Appends take fp32 K/V, rotate them in fp32 and round the rotated rows
 * once to @p type; attention widens each stored row to fp32 as its kernel reads it (K and
 * V are read once per decode step, at 2 bytes per element for BF16 / F16, 1.125 for Q8).
 *
 * What storage adds (the accuracy contract; tests/test_kv_cache_types.c checks it against
 * the double oracle at 1k, 16k and 64k keys and at positions near 2^20): each stored
 * element carries a relative error of at most 2^-8 (BF16, 8 significant bits) or 2^-11
 * (F16, 11 bits; absolute 2^-25 below 2^-14), Q8 an absolute error of at most scale/2 =
 * max|x_block| / 254 plus fp32 rounding (~1e-5 of it, from rounding 127 / max and
 * max / 127; a block with max|x| below 2^-100 is stored as zeros: an error of at most
 * 2^-100). The output,
 * a convex mix of the V rows, inherits the V error, and the K error moves each logit by at
 * most scale |q| |dk|. Measured (q, k uniform in +-1.5, v in +-1, head_dim 64-128,
 * every ISA): max |out - exact| / max|v| <= 2.4e-4 (BF16), 3.3e-5 (F16), 7.4e-4 (Q8)
 * at 1k keys, smaller at 16k and 64k (the errors average out), the same at positions near
 * 2^20 (rotation happens in fp32 before rounding); fp32 caches 5e-8. These are averages
 * over many keys: a query that sees few keys (short contexts, peaked attention) keeps the
 * per-element error of the values it mixes, e.g. 3e-3 (BF16), 3.4e-4 (F16), 1.1e-2 (Q8)
 * over the queries of a 40-token prefill (tests/python/test_kvcache_types.py).
 * Values the type cannot hold are a status, never a silent change: an append (or shift)
 * whose rotated rows hold a value that rounds outside the type's range (|x| >= 65520 for
 * F16, which rounds past 65504; near FLT_MAX for BF16), or that the fp32 rotation itself
 * took past FLT_MAX from a row of finite values, or any NaN or infinity for Q8, returns
 * ROVE_ERR_INVALID_ARGUMENT and changes nothing. NaN and infinities given in the input
 * are stored as such in BF16 and F16 caches (with the rules of rove_attention_forward for
 * a visible one). An F32 cache stores the fp32 rotation as computed (given NaN and
 * infinities, and a finite row the rotation overflows, as infinities).
 * A context shift reads, rotates in fp32 and rounds again: each shift adds one more
 * rounding (2^-8, 2^-11 relative; Q8 re-quantises its block).
 * @return as rove_kv_cache_create; ROVE_ERR_INVALID_ARGUMENT also for an unknown type.
 */
ROVE_API rove_status rove_kv_cache_create_typed(const rove_plan *p, int32_t batch,
                                                int32_t capacity, rove_dtype type,
                                                rove_kv_cache **out);
/** Storage type of a cache (ROVE_DTYPE_F32 for NULL). */
ROVE_API rove_dtype rove_kv_cache_type(const rove_kv_cache *c);
/** Free a cache (NULL-safe). */
ROVE_API void rove_kv_cache_destroy(rove_kv_cache *c);
/** Tokens held per batch row (0 for NULL). */
ROVE_API int32_t rove_kv_cache_length(const rove_kv_cache *c);
/** Capacity per batch row (0 for NULL). */
ROVE_API int32_t rove_kv_cache_capacity(const rove_kv_cache *c);
/** The plan the cache was created from (borrowed: the pointer given to
 *  rove_kv_cache_create / _create_typed); NULL for NULL. Lets code that receives a cache
 *  check that it holds K and V rotated the way its own plan expects. */
ROVE_API const rove_plan *rove_kv_cache_plan(const rove_kv_cache *c);

/**
 * Rotate and store the K and V of @p n_tokens new tokens per batch row (rounded to the
 * cache's type, see rove_kv_cache_create_typed).
 * @param k        [batch][n_tokens][n_kv_heads][head_dim] with a token stride (0 = dense)
 * @param v        as @p k (its own token stride)
 * @param pos      [batch][n_tokens] positions, or NULL: each row continues from its last
 *                 position + 1 (0 for an empty cache)
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (NULL, n_tokens <= 0, stride too small, a
 *         value the cache's type cannot hold); ROVE_ERR_SIZE_OVERFLOW (length + n_tokens
 *         > capacity, or a default position past INT32_MAX). Nothing is written on
 *         failure (the cache's length, positions and visible rows are unchanged).
 */
ROVE_API rove_status rove_kv_cache_append(rove_kv_cache *c, int32_t n_tokens, const float *k,
                                          int64_t k_stride, const float *v, int64_t v_stride,
                                          const int32_t *pos);

/**
 * Attention of new queries against the cache. Uses a->batch (must equal the cache's),
 * q_len, q, q_stride, out, out_stride, q_pos, lse, sinks exactly as
 * rove_attention_forward; a->k, a->v and a->kv_pos must be NULL and a->kv_len and the
 * K/V strides (k_stride, v_stride, kv_head_stride, the batch strides) 0 (the cache
 * supplies them). With q_pos NULL the queries take the positions of the last q_len
 * cached tokens (they are usually the tokens just appended), so q_len must not exceed
 * the cache length then.
 * @return as rove_attention_forward; ROVE_ERR_INVALID_ARGUMENT also for an empty cache.
 */
ROVE_API rove_status rove_kv_cache_attention(const rove_kv_cache *c, const rove_attention_args *a);

/** rove_kv_cache_append with K and V of type @p in_type (F32, BF16 or F16; strides in
 *  elements of that type): widened to fp32, rotated, rounded to the cache's type.
 *  @return as rove_kv_cache_append; ROVE_ERR_INVALID_ARGUMENT also for another type. */
ROVE_API rove_status rove_kv_cache_append_typed(rove_kv_cache *c, int32_t n_tokens,
                                                const void *k, int64_t k_stride, const void *v,
                                                int64_t v_stride, const int32_t *pos,
                                                rove_dtype in_type);

/** rove_kv_cache_attention with q and out of the types in @p types (types->k and ->v must
 *  be F32: the cache supplies K and V in its own type). NULL = all F32. */
ROVE_API rove_status rove_kv_cache_attention_typed(const rove_kv_cache *c,
                                                   const rove_attention_args *a,
                                                   const rove_tensor_types *types);

/**
 * Context shift: positions of cached tokens [start, end) += delta, and their stored K and V
 * are rotated by R_delta (exactly what appending them at the shifted positions would give,
 * to float rounding).
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (NULL, 0 <= start <= end <= length violated);
 *         ROVE_ERR_SIZE_OVERFLOW (a shifted position leaves int32; nothing is changed);
 *         ROVE_ERR_UNSUPPORTED for a cache filled by rove_kv_cache_append_angles;
 *         ROVE_ERR_INVALID_ARGUMENT when a rotated row no longer fits the cache's type
 *         (F16 near 65504; nothing is changed); ROVE_ERR_OUT_OF_MEMORY.
 */
ROVE_API rove_status rove_kv_cache_shift(rove_kv_cache *c, int32_t start, int32_t end,
                                         int32_t delta);
/**
 * rove_kv_cache_append for Selective RoPE: K and V are rotated by explicit @p angles
 * ([batch][n_tokens][n_kv_heads][rotary_dim/2], finite) instead of pos * w_k; @p pos still
 * records positions for the mask (NULL continues each row). The first append into an
 * empty cache (length 0) fixes its kind: an angle cache takes only append_angles, and a
 * position cache only rove_kv_cache_append (a mix gives ROVE_ERR_INVALID_ARGUMENT, so
 * rove_layer_forward_cached rejects an angle cache). Queries against an angle cache must
 * pass their own angles in rove_attention_args.q_angles when the plan rotates Q or O
 * (ROVE_ERR_INVALID_ARGUMENT otherwise); rove_kv_cache_shift returns
 * ROVE_ERR_UNSUPPORTED for it (there is no R_delta for tokens rotated by angles).
 * @return as rove_kv_cache_append; ROVE_ERR_INVALID_ARGUMENT also for NULL or non-finite
 *         angles, or a position cache.
 */
ROVE_API rove_status rove_kv_cache_append_angles(rove_kv_cache *c, int32_t n_tokens,
                                                 const float *k, int64_t k_stride,
                                                 const float *v, int64_t v_stride,
                                                 const int32_t *pos, const double *angles);
/** Keep the first @p length tokens (0 <= length <= current length), e.g. to drop a
 * rejected draft. @return ROVE_OK or ROVE_ERR_INVALID_ARGUMENT. */
ROVE_API rove_status rove_kv_cache_truncate(rove_kv_cache *c, int32_t length);
/** Empty the cache (same as truncate to 0). */
ROVE_API rove_status rove_kv_cache_reset(rove_kv_cache *c);
/** Copy the positions of the cached tokens to @p pos ([batch][length]). */
ROVE_API rove_status rove_kv_cache_positions(const rove_kv_cache *c, int32_t *pos);
/**@}*/

/* ------------------------------------------------------------------------------------ */
/** @name Paged KV cache (serving)
 * Many sequences of different lengths in one pool of fixed-size blocks, as vLLM and
 * flash-attn's block tables do it. K and V are stored exactly as in rove_kv_cache: rotated
 * into the global frame (K: m R_{p_j} k_j with ROVE_ROTATE_K, V: R_{p_j} v_j with
 * ROVE_ROTATE_V), rounded once to the pool's type, so a decode step rotates only the
 * queries and the output.
 *
 * The pool's layout (the interop contract: an engine may keep its own pool and block
 * tables in it and call rove_paged_attention directly):
 *   k, v      [n_blocks][n_kv_heads][block_size][head_dim] elements of `type`
 *   k_scale,  (Q8 only) [n_blocks][n_kv_heads][block_size][rove_q8_blocks] fp32 scales,
 *   v_scale   rove_q8_blocks = ceil(head_dim / ROVE_Q8_BLOCK)
 *   pos       [n_blocks][block_size] int32: the position of each stored token
 * That is the head-major layout (ROVE_PAGED_HEAD_MAJOR, the default and librove's own
 * pool; FlashInfer's "HND"). flash-attn's caches (and FlashInfer's "NHD") are token-major,
 * and are read in place with layout = ROVE_PAGED_TOKEN_MAJOR:
 *   k, v      [n_blocks][block_size][n_kv_heads][head_dim] elements of `type` (F32, BF16,
 *             F16; a token-major Q8 pool is ROVE_ERR_UNSUPPORTED)
 *   pos       [n_blocks][block_size] int32, as above
 * Either layout may step block_stride elements from one block to the next instead of a
 * block's size, so that K and V can interleave per block in one allocation: FlashInfer's
 * 5-D caches [n_blocks][2][block_size][n_kv_heads][head_dim] ("NHD", token-major) and
 * [n_blocks][2][n_kv_heads][block_size][head_dim] ("HND", head-major) are read and written
 * in place with k = the cache, v = k + n_kv_heads * block_size * head_dim elements and
 * block_stride twice that (not for Q8). The bitwise equalities below hold when block_stride
 * is a multiple of a row's step (head_dim head-major, n_kv_heads * head_dim token-major),
 * as FlashInfer's is; otherwise blocks of 16 and 32 are read one call per block, equal to
 * float rounding.
 * The same values give the same bits in either layout; the row kernel then reads one
 * head's rows n_kv_heads * head_dim elements apart instead of contiguous (session 26, Zen
 * 4, 32 sequences, blocks of 16-64, the contiguous cache's time: fp32 12 x 64 1.06-1.12x
 * on one thread and 1.03-1.06x on two, 32:8 x 128 1.04-1.11x, bf16 12 x 64 1.15-1.16x,
 * where head-major pools take 0.91-1.07x; BENCHMARKS.md).
 * Token t of a sequence with block table bt lives in block bt[t / block_size], row
 * t % block_size. A block may appear in the tables of several sequences (a shared prefix)
 * but at most once in each. Speed: decode reads a pool at scattered blocks, so an engine's
 * own pool on 4 KB pages pays a TLB walk per block; librove's pool (rove_paged_cache) is
 * 2 MB-aligned with transparent huge pages requested, and an engine's pool allocated the
 * same way runs as fast (session 17: blocks of 16 on 4 KB pages, 12 x 64, 1.05-1.10x the
 * time). */
/**@{*/

/** The order of a pool block's rows (rove_paged_kv.layout). */
typedef enum rove_paged_layout {
  ROVE_PAGED_HEAD_MAJOR = 0,  /**< [n_blocks][n_kv_heads][block_size][head_dim] */
  ROVE_PAGED_TOKEN_MAJOR = 1  /**< [n_blocks][block_size][n_kv_heads][head_dim] (flash-attn) */
} rove_paged_layout;

/** A pool of blocks as laid out above (the caller's memory, or rove_paged_cache_view).
 *  Zero-initialise, then set: a zero layout is head-major. */
typedef struct rove_paged_kv {
  const void *k, *v;               /**< the K and V blocks */
  const float *k_scale, *v_scale;  /**< Q8: the blocks' scales; NULL for other types */
  /** NULL, or the position of every stored token; NULL: token t of every sequence is at
   *  position t (flash-attn's convention). */
  const int32_t *pos;
  rove_dtype type;                 /**< F32, BF16, F16 or Q8 */
  int32_t block_size;              /**< tokens per block: a power of two, 1 .. 65536 */
  int32_t n_blocks;                /**< blocks in the pool, > 0 */
  int32_t layout;                  /**< rove_paged_layout: 0 head-major, 1 token-major */
  /** Elements from the start of one block of k (and of v) to the next: 0 = dense
   *  (n_kv_heads * block_size * head_dim); more for pools that interleave K and V per block,
   *  e.g. FlashInfer's [n_blocks][2][...] caches (k = cache, v = cache + that dense size,
   *  block_stride 2 x it). Within a block the layout above. F32, BF16, F16 (a Q8 pool is
   *  dense: ROVE_ERR_UNSUPPORTED). */
  int64_t block_stride;
} rove_paged_kv;

/** Batched decode over sequences of different lengths (rove_paged_attention). Zero-
 *  initialise, then set. */
typedef struct rove_paged_args {
  int32_t n_seqs;                  /**< > 0 */
  /** [n_seqs + 1]: cu[0] = 0, non-decreasing; sequence s owns query rows cu[s] ..
   *  cu[s+1]-1 (any count: 0 skips it; 1..16 is decode and speculative verification). */
  const int32_t *cu_seqlens_q;
  /** rove_paged_attention: [n_seqs] keys per sequence (cache_seqlens), >= 0; and
   *  [n_seqs][max_blocks] block tables whose first ceil(seq_lens[s] / block_size)
   *  entries are read (block_tables may be NULL when max_blocks is 0: every sequence
   *  has 0 keys). rove_paged_cache_attention: NULL (the cache has them). */
  const int32_t *seq_lens, *block_tables;
  int32_t max_blocks; /**< row stride of block_tables (rove_paged_cache_attention: 0) */
  const float *q;                  /**< [total_q][n_heads][head_dim] */
  float *out;                      /**< [total_q][n_heads][head_dim] */
  int64_t q_stride, out_stride;    /**< token strides in elements; 0 = dense */
  /** NULL or [total_q]: query positions; NULL gives the rows of sequence s the
   *  positions of its last (cu[s+1] - cu[s]) keys (the tokens just appended), which
   *  needs as many keys as rows. With a causal plan a row sees keys at positions <= its
   *  own, so verifying k draft tokens is: append them, attend k rows. */
  const int32_t *q_pos;
  /** NULL or [total_q][n_kv_heads][rotary_dim/2]: the queries' explicit angles
   *  (Selective RoPE), needed when the stored keys were rotated by angles. */
  const double *q_angles;
  float *lse;                      /**< NULL or [n_heads][total_q] */
  const float *sinks;              /**< NULL or [n_heads]: as in rove_attention_args */
} rove_paged_args;

/**
 * Attention of every sequence's query rows over its own keys, read in place from the
 * pool's blocks: equal to rove_kv_cache_attention over a contiguous cache holding the
 * same tokens (bitwise when block_size is a multiple of 64, the row kernel's key block,
 * and on AVX2 / AVX-512 also for blocks of 16 and 32 tokens whose rows the row kernel
 * reads in place: fp32, or bf16 / f16 / q8 with head_dim % 8 == 0; otherwise to float
 * rounding). Rows go through the decode row kernel when a GQA group's
 * rows fit one call (n_heads / n_kv_heads x rows <= 16), long sequences are split over
 * key ranges merged exactly by their LSE, and all sequences' tasks run in one parallel
 * loop (short sequences grouped, as rove_attention_varlen): results are bitwise
 * identical for any thread count. A sequence with rows and no keys gets output 0 and LSE
 * -inf (with sinks: the head's sink). Everything (block tables included) is checked
 * before anything is written.
 * q and out may be NULL when total_q = 0 (a step with no query rows does nothing).
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (NULL plan/pool/args, NULL q/out with
 *         rows, NULL block_tables with max_blocks > 0, bad cu, a negative length, a
 *         block table entry out of range or repeated within one sequence, a table longer
 *         than max_blocks, block_size not a power of two, an unknown layout, a
 *         block_stride below a block, a Q8 pool without scales, default query positions
 *         with more rows than keys, out or lse overlapping an array the call reads: q,
 *         the pool's K, V, scales and positions, cu_seqlens_q, seq_lens, block_tables,
 *         q_pos, q_angles, sinks; a non-finite sink);
 *         ROVE_ERR_UNSUPPORTED (a Q8 pool token-major or with a block_stride other than a
 *         block's size); ROVE_ERR_SIZE_OVERFLOW; ROVE_ERR_OUT_OF_MEMORY.
 */
ROVE_API rove_status rove_paged_attention(const rove_plan *p, const rove_paged_kv *kv,
                                          const rove_paged_args *a);

/**
 * Write @p n_tokens new tokens into a pool the caller owns (vLLM's reshape_and_cache,
 * flash-attn's in-place cache append): token t's K and V rows of every KV head go to slot
 * slots[t] = block * block_size + row of @p kv, in its layout, rotated into the global
 * frame and rounded to the pool's type exactly as rove_paged_append stores them (K:
 * m R_p k with ROVE_ROTATE_K, V: R_p v with ROVE_ROTATE_V; Q8 rows with their scales): the
 * stored bytes are the append's, so rove_paged_attention over the pool gives the bits of
 * rove_paged_cache_attention over the same tokens (with a block_stride that is a multiple
 * of a row's step, above; else to float rounding). kv's k, v, k_scale, v_scale and pos are written: they must point
 * at writable memory (the struct is const for the readers). The token's position goes to
 * kv->pos[slot] when kv->pos is set; with kv->pos NULL (token t of a sequence at position
 * t) pos[t] must be the token's index in its sequence, which this call cannot check.
 * @param slots   [n_tokens] int64 (vLLM's slot_mapping): a slot in [0, n_blocks *
 *                block_size), or negative to skip the token (padding: its K, V and
 *                angles are not used, its position and angles must be readable); no
 *                slot twice
 * @param k       [n_tokens][n_kv_heads][head_dim] of @p in_type (F32, BF16, F16) with a
 *                token stride in elements (0 = dense)
 * @param v       as @p k (its own token stride)
 * @param pos     [n_tokens] the tokens' positions (the rotation's, and the masks')
 * @param angles  NULL, or [n_tokens][n_kv_heads][rotary_dim/2] finite explicit angles
 *                (Selective RoPE, as rove_paged_append) used instead of the positions'
 * A failure writes nothing: when a scan of the inputs cannot rule out a value the type
 * cannot hold, the rows are staged (one extra copy) before any is written; otherwise
 * (an F32 pool, or finite inputs well inside the type's range) they go straight to their
 * slots. Bitwise identical for any thread count.
 * @return ROVE_OK (n_tokens 0: nothing done, slots, k, v, pos may be NULL);
 *         ROVE_ERR_INVALID_ARGUMENT (NULL plan or pool, NULL slots, k, v or pos with
 *         tokens, n_tokens < 0, a bad pool as rove_paged_attention, a slot
 *         past the pool or repeated, a stride below the dense width, a stored token's
 *         non-finite angle, a
 *         value the pool's type cannot hold as rove_kv_cache_create_typed describes, a pool
 *         array overlapping another or an input, K's and V's blocks sharing bytes);
 *         ROVE_ERR_UNSUPPORTED (as rove_paged_attention); ROVE_ERR_SIZE_OVERFLOW; ROVE_ERR_OUT_OF_MEMORY. The pool is untouched on
 *         failure.
 */
ROVE_API rove_status rove_paged_store(const rove_plan *p, const rove_paged_kv *kv,
                                      int32_t n_tokens, const int64_t *slots, const void *k,
                                      int64_t k_stride, const void *v, int64_t v_stride,
                                      rove_dtype in_type, const int32_t *pos,
                                      const double *angles);

/** librove's own pool and block allocator: sequences are small integer ids; blocks are
 *  reference counted, so a fork shares its parent's blocks and a write into a shared
 *  block copies it first (copy-on-write). The cache borrows its plan. Mutating calls must
 *  not run concurrently with any other call on the same cache; rove_paged_cache_attention
 *  calls may run concurrently with each other. */
typedef struct rove_paged_cache rove_paged_cache;

/** A pool of @p n_blocks blocks of @p block_size tokens (a power of two, 1 .. 65536) of
 *  storage type @p type (as rove_kv_cache_create_typed), for up to @p max_seqs live
 *  sequences. K and V pools are allocated as rove_kv_cache_create's (2 MB-aligned,
 *  transparent huge pages requested): decode reads the pool at scattered blocks, and on
 *  4 KB pages every block costs a TLB walk. The resident memory grows in steps of 2 MB
 *  (not of a block). @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT;
 *  ROVE_ERR_SIZE_OVERFLOW; ROVE_ERR_OUT_OF_MEMORY. */
ROVE_API rove_status rove_paged_cache_create(const rove_plan *p, rove_dtype type,
                                             int32_t block_size, int32_t n_blocks,
                                             int32_t max_seqs, rove_paged_cache **out);
ROVE_API void rove_paged_cache_destroy(rove_paged_cache *c);
/** The pool (for rove_paged_attention or an engine's own kernels); valid until the cache
 *  is destroyed, its contents until the next mutating call. */
ROVE_API rove_status rove_paged_cache_view(const rove_paged_cache *c, rove_paged_kv *out);
/** Blocks not held by any sequence (0 for NULL). */
ROVE_API int32_t rove_paged_cache_free_blocks(const rove_paged_cache *c);
/** A new, empty sequence: its id in @p seq (0 .. max_seqs-1; ids of freed sequences are
 *  reused). @return ROVE_OK; ROVE_ERR_POOL_EXHAUSTED (max_seqs live);
 *  ROVE_ERR_INVALID_ARGUMENT. */
ROVE_API rove_status rove_paged_seq_create(rove_paged_cache *c, int32_t *seq);
/** A new sequence holding @p parent's tokens: it shares all of the parent's blocks (no
 *  copy); the first write into a shared block (append into a partly filled last block,
 *  shift) copies that block. @return as rove_paged_seq_create; ROVE_ERR_INVALID_ARGUMENT
 *  for an unknown parent; ROVE_ERR_OUT_OF_MEMORY (the child's block table). */
ROVE_API rove_status rove_paged_seq_fork(rove_paged_cache *c, int32_t parent, int32_t *child);
/** Release a sequence and its references to its blocks. */
ROVE_API rove_status rove_paged_seq_free(rove_paged_cache *c, int32_t seq);
/** Tokens in sequence @p seq (-1 for NULL or an unknown id). */
ROVE_API int32_t rove_paged_seq_length(const rove_paged_cache *c, int32_t seq);
/** Copy sequence @p seq's block table (ceil(length / block_size) entries, at most @p cap)
 *  to @p table and its length to @p n. @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (NULL,
 *  unknown id, @p cap too small). */
ROVE_API rove_status rove_paged_seq_block_table(const rove_paged_cache *c, int32_t seq,
                                                int32_t *table, int32_t cap, int32_t *n);
/** Copy sequence @p seq's token positions ([length]) to @p pos. */
ROVE_API rove_status rove_paged_seq_positions(const rove_paged_cache *c, int32_t seq,
                                              int32_t *pos);
/**
 * Rotate and store @p n_tokens new tokens of sequence @p seq, as rove_kv_cache_append_typed
 * (K and V [n_tokens][n_kv_heads][head_dim] of @p in_type with token strides, 0 = dense;
 * @p pos NULL continues from the last position + 1). @p angles: NULL, or
 * [n_tokens][n_kv_heads][rotary_dim/2] explicit angles as rove_kv_cache_append_angles
 * (the first append into an empty sequence fixes its kind; shift is then unsupported).
 * Blocks are taken as needed; a shared partly filled last block is copied first.
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (as rove_kv_cache_append, an unknown id);
 *         ROVE_ERR_POOL_EXHAUSTED (too few free blocks); ROVE_ERR_SIZE_OVERFLOW;
 *         ROVE_ERR_OUT_OF_MEMORY. Nothing changes on failure (length, positions, block
 *         table, free blocks and every sequence's visible rows).
 */
ROVE_API rove_status rove_paged_append(rove_paged_cache *c, int32_t seq, int32_t n_tokens,
                                       const void *k, int64_t k_stride, const void *v,
                                       int64_t v_stride, rove_dtype in_type,
                                       const int32_t *pos, const double *angles);
/** Keep the first @p length tokens of @p seq (0 <= length <= its length); blocks past
 *  the new end are released. @return ROVE_OK or ROVE_ERR_INVALID_ARGUMENT. */
ROVE_API rove_status rove_paged_truncate(rove_paged_cache *c, int32_t seq, int32_t length);
/**
 * Context shift of sequence @p seq: positions of its tokens [start, end) += delta and
 * their stored K and V rotated by R_delta, as rove_kv_cache_shift (same error added).
 * Shared blocks in the range are copied first (the other sequences keep their rows).
 * @return as rove_kv_cache_shift; ROVE_ERR_POOL_EXHAUSTED when the copies need more free
 *         blocks than there are. Nothing changes on failure.
 */
ROVE_API rove_status rove_paged_shift(rove_paged_cache *c, int32_t seq, int32_t start,
                                      int32_t end, int32_t delta);
/**
 * rove_paged_attention over the sequences @p seqs ([a->n_seqs] ids, repeats allowed):
 * a->seq_lens and a->block_tables must be NULL and a->max_blocks 0 (the cache supplies
 * them); the rest of @p a as there. The sequences need not be in any order.
 * @return as rove_paged_attention; ROVE_ERR_INVALID_ARGUMENT also for an unknown id.
 */
ROVE_API rove_status rove_paged_cache_attention(const rove_paged_cache *c, const int32_t *seqs,
                                                const rove_paged_args *a);
/** rove_paged_attention / rove_paged_cache_attention with q and out of the types in
 *  @p types (F32, BF16 or F16; q / out then point at elements of those types and their
 *  strides count them; types->k and ->v must be F32: the pool has its own type), as
 *  rove_kv_cache_attention_typed. NULL = all F32. */
ROVE_API rove_status rove_paged_attention_typed(const rove_plan *p, const rove_paged_kv *kv,
                                                const rove_paged_args *a,
                                                const rove_tensor_types *types);
ROVE_API rove_status rove_paged_cache_attention_typed(const rove_paged_cache *c,
                                                      const int32_t *seqs,
                                                      const rove_paged_args *a,
                                                      const rove_tensor_types *types);
/**@}*/

/* ------------------------------------------------------------------------------------ */
/** @name Attention layer
 * y = (attention(x Wq^T + bq, x Wk^T + bk, x Wv^T + bv)) Wo^T + bo, with the plan's
 * rotations. Weights follow PyTorch nn.Linear ([out_features][in_features], row-major).
 * The Q, K and V weights are copied once into one fused [(H + 2 Hkv) d][d_model] matrix,
 * so a forward makes one QKV sgemm (OpenBLAS), attention over strided views of its output
 * (no copies), and one output sgemm.
 * The layer borrows its plan (which must outlive it) and keeps its own weight copies.
 * Threads: each projection is split into column slices that librove's pool runs, each a
 * single-threaded OpenBLAS call (OpenBLAS's threaded driver, which ends the process when
 * it cannot allocate, is never entered; its own threads never spin against librove's).
 * With the pthread OpenBLAS, its process-wide thread count is 1 while a layer projects
 * (restored by the last call out); with the OpenMP OpenBLAS, each thread that runs a slice
 * gets omp_set_num_threads(1) (libgomp allocates a few bytes the first time, and ends the
 * process if that fails). Results differ between thread counts by float rounding (OpenBLAS
 * rounds differently for different partitions); a thread count repeats its bits. OpenBLAS
 * serves a fixed number of calls at once per process (past it the process ends): across
 * all layer calls of the process at most 64 slices are inside OpenBLAS at once, a slice
 * past that waits (results unchanged); the program's own OpenBLAS calls come on top. */
/**@{*/
typedef struct rove_layer rove_layer;

/** Weights of one attention layer; biases may be NULL. */
typedef struct rove_layer_weights {
  int32_t d_model;   /**< model width, > 0 */
  const float *wq;   /**< [n_heads*head_dim][d_model] */
  const float *wk;   /**< [n_kv_heads*head_dim][d_model] */
  const float *wv;   /**< [n_kv_heads*head_dim][d_model] */
  const float *wo;   /**< [d_model][n_heads*head_dim] */
  const float *bq, *bk, *bv, *bo; /**< NULL or [out_features] */
  /** NULL or [n_heads]: attention sinks (gpt-oss), as rove_attention_args.sinks; of the
   *  weights' type, copied (finite: ROVE_ERR_INVALID_ARGUMENT otherwise). New in 0.5. */
  const float *sinks;
} rove_layer_weights;

/** Build a layer (copies the weights; their values are not checked: a NaN or Inf weight
 *  or bias propagates through the products as in PyTorch). @return ROVE_OK;
 *  ROVE_ERR_INVALID_ARGUMENT (NULL plan/weights/matrix, d_model <= 0, a non-finite sink);
 *  ROVE_ERR_SIZE_OVERFLOW; ROVE_ERR_OUT_OF_MEMORY. */
ROVE_API rove_status rove_layer_create(const rove_plan *p, const rove_layer_weights *w,
                                       rove_layer **out);
/** rove_layer_create with weights and biases of type @p weight_type (F32, BF16 or F16: the
 *  pointers of @p w point at elements of that type; cast them to const float *). They are
 *  widened to fp32 once, here (exact), and the layer computes in fp32 as with fp32
 *  weights (OpenBLAS sgemm): a bf16 checkpoint gives the same outputs as its weights cast
 *  to fp32 first, and the layer's copy takes 4 bytes per weight. Inputs and outputs stay
 *  fp32. @return as rove_layer_create; ROVE_ERR_INVALID_ARGUMENT also for another type. */
ROVE_API rove_status rove_layer_create_typed(const rove_plan *p, const rove_layer_weights *w,
                                             rove_dtype weight_type, rove_layer **out);
/** Free a layer (NULL-safe). */
ROVE_API void rove_layer_destroy(rove_layer *l);

/**
 * y = layer(x) for x [batch][n][d_model] (dense), y [batch][n][d_model] (dense, must not
 * overlap x). Positions as rove_attention_forward (pos [batch][n] or NULL = 0 .. n-1).
 * @return ROVE_OK or the statuses of rove_attention_forward.
 */
ROVE_API rove_status rove_layer_forward(const rove_layer *l, int32_t batch, int32_t n,
                                        const float *x, const int32_t *pos, float *y);

/**
 * Incremental forward with a KV cache built from the same plan (of any storage type: K and
 * V are rounded to it on append and read in it, rove_kv_cache_create_typed): projects the n new tokens
 * of x [batch][n][d_model], appends their K and V to @p cache (positions pos [batch][n],
 * or NULL to continue each row), attends their queries over the whole cache, projects out.
 * Prefill is one call with the prompt; each decode step is a call with n = 1.
 * x holds rove_kv_cache's batch of rows. The cache may come from another plan with the
 * same n_heads, n_kv_heads and head_dim; its plan then decides the attention options.
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (NULL, n <= 0, cache of another shape, an
 *         angle cache, overlapping x/y); ROVE_ERR_SIZE_OVERFLOW (capacity); otherwise
 *         rove_kv_cache_append's statuses for the projected K and V (a value the cache's
 *         type cannot hold, a default position past INT32_MAX); ROVE_ERR_OUT_OF_MEMORY.
 *         On failure the cache is unchanged.
 */
ROVE_API rove_status rove_layer_forward_cached(const rove_layer *l, rove_kv_cache *cache,
                                               int32_t n, const float *x, const int32_t *pos,
                                               float *y);
/**@}*/

/* ------------------------------------------------------------------------------------ */
/** @name Selective RoPE
 * Input-dependent rotation angles (Movahedi et al., 2025; docs/DESIGN.md §1): the angle of pair
 * k at token t of head h is theta_{t,h,k} = temp_k * (c_{h,k} + sum_{s<=t} phi_{s,h,k}),
 * with increments phi, temperatures temp_k and a carried sum c. phi = 1 and c = p0 - 1
 * give the RoPE angles (p0 + t) * w_k exactly. Angles are double: after 10^6 tokens a
 * float angle would be off by whole multiples of its ulp (0.06 rad at 10^6).
 * Angles feed softmax attention (rove_attention_args.q_angles / kv_angles,
 * rove_rotate_angles, rove_kv_cache_append_angles) and gated linear attention
 * (rove_gla_forward).
 * Trap: the Selective-RoPE reference rotates only q and k (HALF pairing over the whole
 * head), while rove_attention_config_init's default rotate is ROVE_ROTATE_ROVE, which also
 * rotates V and the output. To reproduce the reference in softmax attention set
 * rotate = ROVE_ROTATE_ROPE (and pairing HALF, rotary_dim = head_dim, its defaults). GLA
 * plans default to ROVE_ROTATE_ROPE already. */
/**@{*/

/** Default temperatures temp_k = 1 / 500000^(2k/r) for k < n_pairs (r = 2 n_pairs), bit
 *  for bit the inverse frequencies rove_rope_inv_freq gives for theta 500000 and no
 *  scaling. @return ROVE_OK or ROVE_ERR_INVALID_ARGUMENT (NULL, n_pairs <= 0). */
ROVE_API rove_status rove_selective_temperatures(int32_t n_pairs, double *temp);

/**
 * Accumulate angles: for each batch row b, head h, pair k, sequentially over t,
 *   c += phi[b][t][h][k] (in double);  angles[b][t][h][k] = temp[k] * c,
 * starting from c = carry_in[b][h][k] (0 when carry_in is NULL) and leaving the final c in
 * carry_out. The sum is sequential in double, so splitting the tokens into chunks that
 * pass carry_out to the next call's carry_in gives bit-identical angles to one call.
 * Extreme finite inputs can overflow an angle to +-inf; attention and GLA reject such
 * angles.
 * @param phi        [batch][seq_len][n_heads][n_pairs] increments, finite
 * @param temp       [n_pairs] or NULL for rove_selective_temperatures
 * @param carry_in   NULL or [batch][n_heads][n_pairs]
 * @param carry_out  NULL or [batch][n_heads][n_pairs] (may equal carry_in)
 * @param angles     out: [batch][seq_len][n_heads][n_pairs]
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (NULL phi/angles, a size <= 0, non-finite
 *         phi, temp or carry_in, outputs overlapping each other or an input other than
 *         carry_out == carry_in; angles and carry_out untouched then);
 *         ROVE_ERR_SIZE_OVERFLOW; ROVE_ERR_OUT_OF_MEMORY (only with temp NULL and
 *         n_pairs > ROVE_MAX_HEAD_DIM / 2).
 */
ROVE_API rove_status rove_selective_angles(int32_t batch, int32_t seq_len, int32_t n_heads,
                                           int32_t n_pairs, const float *phi,
                                           const double *temp, const double *carry_in,
                                           double *carry_out, double *angles);

/**
 * rove_selective_angles over packed sequences (varlen, as rove_gla_args.cu_seqlens):
 * @p phi and @p angles are [total][n_heads][n_pairs], total = cu_seqlens[n_seqs] > 0;
 * sequence s is tokens cu_seqlens[s] .. cu_seqlens[s+1]-1 (it may be empty: its carry
 * passes through) and runs from its own carry: @p carry_in / @p carry_out are
 * [n_seqs][n_heads][n_pairs]. Each sequence's angles and carry are those of
 * rove_selective_angles on it alone, bit for bit. cu_seqlens: [n_seqs + 1], from 0,
 * non-decreasing; it must not overlap an output. New in 0.6.
 * @return as rove_selective_angles, and ROVE_ERR_INVALID_ARGUMENT for n_seqs <= 0 or a bad
 *         cu_seqlens.
 */
ROVE_API rove_status rove_selective_angles_packed(int32_t n_seqs, const int32_t *cu_seqlens,
                                                  int32_t n_heads, int32_t n_pairs,
                                                  const float *phi, const double *temp,
                                                  const double *carry_in, double *carry_out,
                                                  double *angles);

/**
 * The backward of rove_selective_angles: for upstream gradients @p d_angles (and
 * @p d_carry_out, the gradient of the carried sum left after the last token, or NULL),
 *   d_phi[b][s][h][k]   = sum_{t>=s} temp[k] d_angles[b][t][h][k] (+ d_carry_out[b][h][k])
 *   d_carry_in[b][h][k] = d_phi at s = 0 (before rounding to float)
 *   d_temp[k]           = sum over b, t, h of d_angles[b][t][h][k] c_t, c_t the forward's sums
 * Sums are in double in a fixed order (bitwise reproducible); d_phi is rounded once to
 * float. Chunked calls chain backwards: the d_carry_in of a chunk is the d_carry_out of
 * the chunk before it. phi, temp and carry_in are the forward's (same rules); d_carry_in
 * and d_temp may be NULL. Outputs must not overlap an input or each other.
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (NULL phi / d_angles / d_phi, a size <= 0,
 *         non-finite phi, temp or carry_in, an overlap); ROVE_ERR_SIZE_OVERFLOW;
 *         ROVE_ERR_OUT_OF_MEMORY. Outputs untouched on failure.
 */
ROVE_API rove_status rove_selective_angles_backward(int32_t batch, int32_t seq_len,
                                                    int32_t n_heads, int32_t n_pairs,
                                                    const float *phi, const double *temp,
                                                    const double *carry_in,
                                                    const double *d_angles,
                                                    const double *d_carry_out, float *d_phi,
                                                    double *d_carry_in, double *d_temp);

/** The backward of rove_selective_angles_packed (layouts, carries and cu_seqlens as its
 *  forward; d_carry_out and d_carry_in [n_seqs][n_heads][n_pairs]): each sequence's d_phi
 *  and d_carry_in are those of rove_selective_angles_backward on it alone, bit for bit;
 *  d_temp sums over every sequence. New in 0.6. */
ROVE_API rove_status rove_selective_angles_packed_backward(
    int32_t n_seqs, const int32_t *cu_seqlens, int32_t n_heads, int32_t n_pairs,
    const float *phi, const double *temp, const double *carry_in, const double *d_angles,
    const double *d_carry_out, float *d_phi, double *d_carry_in, double *d_temp);

/** Projection of the phase network from the normalised input u to one value z per head
 *  and pair (the reference's phi_parametrization). */
typedef enum rove_phase_projection {
  /** "low-rank", the reference default: z = proj_up (proj_down u) over the whole model
   *  width d = H * in_dim (mixes heads): [d] -> proj_rank -> [H * n_pairs]. */
  ROVE_PHASE_PROJ_LOW_RANK = 0,
  /** "full-rank" (the reference's ChunkedLinear): per head, weight-normalised,
   *  z[h][k] = gain[h] * <w[h][k], u_h> / max(||w[h][k]||_2, 1e-12). */
  ROVE_PHASE_PROJ_PER_HEAD = 1
} rove_phase_projection;

/** Activation after the causal conv (the reference's conv_act: None or "silu"). */
typedef enum rove_phase_activation {
  ROVE_PHASE_ACT_NONE = 0, /**< the reference default and every shipped config */
  ROVE_PHASE_ACT_SILU = 1  /**< silu(y) = y * sigmoid(y) ("silu" / "swish") */
} rove_phase_activation;

/** The phase gate (the reference's use_gate and gate_parametrization). Every gate reads
 *  the whole normalised input u [d] and multiplies phi by sigmoid(a). */
typedef enum rove_phase_gate {
  ROVE_PHASE_GATE_NONE = 0,     /**< no gate (factor 1), the reference default */
  /** "standard": a[h] = <gate_w[h], u> + gate_b[h]; gate_w [H][d], one gate per head */
  ROVE_PHASE_GATE_STANDARD = 1,
  /** "low-rank": a[h] = <gate_w[h], gate_down u> + gate_b[h]; gate_down [gate_rank][d],
   *  gate_w [H][gate_rank], one gate per head */
  ROVE_PHASE_GATE_LOW_RANK = 2,
  /** "gla": a[h][k] = <gate_w[h*P+k], gate_down u> + gate_b[h*P+k]; gate_down
   *  [gate_rank][d], gate_w [H*n_pairs][gate_rank], one gate per head and pair */
  ROVE_PHASE_GATE_GLA = 3
} rove_phase_gate;

/** Largest conv_width rove_selective_phase accepts. */
#define ROVE_PHASE_MAX_CONV_WIDTH 64

/** Weights and options of the Selective RoPE phase network (the reference's SelectiveRoPE
 *  module, docs/DESIGN.md §1), which turns a token's input x (the layer input, d = H *
 *  in_dim floats, H groups of in_dim) into increments phi [H][n_pairs]. Per token:
 *    u_h  = x_h / sqrt(||x_h||_2^2 + norm_eps)          per head h (fla's l2_norm)
 *    z    = projection(u)                              (see rove_phase_projection)
 *    y    = conv_b + sum_{j<W} conv_w[h][k][j] * z(t - W + 1 + j)   causal depthwise conv
 *           of width W = conv_width, tap W-1 the current token, z before the sequence
 *           start from the conv state (zeros for a fresh sequence);
 *           with skip_conv instead y = z(t) - z(t - 1) (a first difference, no conv)
 *    phi  = (act(y) + exp(exp_bias[h][k])) * gate      act per conv_act (never with
 *           skip_conv); the exp_bias term only when exp_bias is set; gate 1 without one.
 *  Matrices are row-major, PyTorch nn.Linear layout ([out][in]) unless stated; index
 *  (h, k) of a [H * n_pairs] vector is h * n_pairs + k. Fill with
 *  rove_selective_phase_weights_init (the reference's defaults), then set the weights of
 *  the parts you use. Fields a selected part does not read must keep their init values
 *  (pointers NULL, ranks 16, conv_width 4, conv_act NONE), else
 *  ROVE_ERR_INVALID_ARGUMENT: a weight or option that would not be used is rejected, not
 *  ignored. conv_b has no counterpart in the reference (its conv has bias=False). */
typedef struct rove_selective_phase_weights {
  int32_t n_heads;       /**< H, > 0 */
  int32_t in_dim;        /**< per-head input width, > 0; a token's input has d = H*in_dim */
  int32_t n_pairs;       /**< P = r/2 (the reference's head_k_dim / 2), > 0 */
  float norm_eps;        /**< finite, > 0; 1e-6 (fla's l2_norm) */
  rove_phase_projection projection; /**< LOW_RANK */
  int32_t proj_rank;     /**< LOW_RANK: R > 0 (phi_proj_rank); 16 */
  const float *proj_down; /**< LOW_RANK: [R][d] (phi_proj[0].weight); NULL */
  const float *proj_up;  /**< LOW_RANK: [H*P][R] (phi_proj[1].weight); NULL */
  const float *proj_w;   /**< PER_HEAD: [H][P][in_dim] (the reference's ChunkedLinear
                              weight [H][in][P], transposed); a zero row gives z = 0; NULL */
  const float *proj_gain; /**< PER_HEAD: NULL (= 1) or [H] (ChunkedLinear's scalar) */
  int32_t skip_conv;     /**< 0 or 1; 0 */
  int32_t conv_width;    /**< W, 1..ROVE_PHASE_MAX_CONV_WIDTH (d_conv); 4 */
  rove_phase_activation conv_act; /**< NONE */
  const float *conv_w;   /**< [H][P][W] (phi_conv1d.weight [H*P][1][W]); required
                              without skip_conv, NULL with it */
  const float *conv_b;   /**< NULL (= 0) or [H][P], added before the activation (not in
                              the reference); NULL with skip_conv */
  const float *exp_bias; /**< NULL or [H][P] (phi_bias, use_bias): exp(exp_bias) is added
                              after the activation */
  rove_phase_gate gate;  /**< NONE */
  int32_t gate_rank;     /**< GATE_LOW_RANK and GATE_GLA: > 0 (gate_low_rank_dim); 16 */
  const float *gate_down; /**< GATE_LOW_RANK, GATE_GLA: [gate_rank][d]; NULL */
  const float *gate_w;   /**< required with a gate: STANDARD [H][d], LOW_RANK
                              [H][gate_rank], GLA [H*P][gate_rank]; NULL */
  const float *gate_b;   /**< with a gate: NULL (= 0) or [H] (STANDARD, LOW_RANK) or
                              [H*P] (GLA); NULL */
} rove_selective_phase_weights;

/** The reference's defaults (low-rank projection of rank 16, conv width 4 without
 *  activation, no bias, no gate, norm_eps 1e-6) for the given shape, every pointer NULL
 *  (no-op when @p w is NULL). */
ROVE_API void rove_selective_phase_weights_init(rove_selective_phase_weights *w,
                                                int32_t n_heads, int32_t in_dim,
                                                int32_t n_pairs);

/** Floats of conv state per (batch row, head, pair): 1 with skip_conv, else conv_width - 1
 *  (0 for width 1); -1 for NULL. Not validated: rove_selective_phase checks @p w. */
ROVE_API int32_t rove_selective_phase_state_len(const rove_selective_phase_weights *w);

/**
 * Increments phi [batch][seq_len][H][n_pairs] from inputs x [batch][seq_len][d] (token
 * stride x_stride floats, 0 = dense; d = H * in_dim). @p conv_state ([batch][H][n_pairs]
 * [S], S = rove_selective_phase_state_len: the last S values z of each channel, oldest
 * first) is read as the history before token 0 and overwritten with the history after the
 * last token; NULL means a fresh sequence and no state out (with S = 0 it is not touched).
 * Feeding a sequence in pieces with the same conv_state gives the same phi as one call,
 * bit for bit (decode: seq_len 1 per step; the carry of rove_selective_angles is the rest
 * of the decode state). With skip_conv the state carries z(t - 1), so pieces equal one
 * call (the reference keeps no state for skip_conv: its decode restarts the difference).
 * Weights are borrowed for the call only and must not overlap phi or conv_state (not
 * checked); their values are not checked either (non-finite weights give non-finite phi).
 * Computed in double; z is rounded to float as it enters the conv (conv_state holds float
 * z) and phi is rounded once at the end. Results do not depend on the thread count.
 * Inference only: there is no backward for the phase network. Train it in the framework
 * it comes from; in PyTorch the reference's module differentiates itself. Then feed its phi
 * to rove_selective_angles and the angles to attention: both have backwards
 * (rove_selective_angles_backward, rove_attention_backward's angle gradients), and in
 * Python both are differentiable. The network is a few per-token projections and a
 * short causal conv; a second implementation of its gradients would add much code for
 * what the framework already does. This call serves decoding and evaluation with trained
 * weights. The projections run in double on the SIMD unit, in groups of four tokens (the
 * AVX-512 kernel reads each weight once per group, AVX2 once per two tokens; the bits of
 * every ISA are the same): at 32 heads x 128 inputs, rank 16 and a GLA gate, a prefill
 * token costs about 27 us on one Ice Lake core, 1.15x the time of PyTorch's float32
 * version at 512 tokens and 0.65x at 2048 (BENCHMARKS.md).
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (NULL, sizes <= 0, an option out of range, a
 *         required weight NULL, a weight or option the selected parts do not use, stride
 *         too small, phi, x and conv_state overlapping); ROVE_ERR_SIZE_OVERFLOW;
 *         ROVE_ERR_OUT_OF_MEMORY. phi and conv_state untouched on failure.
 */
ROVE_API rove_status rove_selective_phase(const rove_selective_phase_weights *w, int32_t batch,
                                          int32_t seq_len, const float *x, int64_t x_stride,
                                          float *conv_state, float *phi);

/** rove_selective_phase over packed sequences (varlen, as rove_gla_args.cu_seqlens): x rows
 *  [total] (token stride x_stride, 0 = dense) and phi [total][H][n_pairs], total =
 *  cu_seqlens[n_seqs] > 0; sequence s is tokens cu_seqlens[s] .. cu_seqlens[s+1]-1 (it may
 *  be empty) and its causal conv runs from its own history: conv_state NULL (every
 *  sequence fresh, no state out) or [n_seqs][H][n_pairs][S]. Each sequence's phi and state
 *  are those of rove_selective_phase on it alone, bit for bit. cu_seqlens: [n_seqs + 1],
 *  from 0, non-decreasing, not overlapping phi or conv_state. New in 0.6.
 *  @return as rove_selective_phase, and ROVE_ERR_INVALID_ARGUMENT for n_seqs <= 0 or a bad
 *          cu_seqlens. */
ROVE_API rove_status rove_selective_phase_packed(const rove_selective_phase_weights *w,
                                                 int32_t n_seqs, const int32_t *cu_seqlens,
                                                 const float *x, int64_t x_stride,
                                                 float *conv_state, float *phi);
/**@}*/

/* ------------------------------------------------------------------------------------ */
/** @name Gated linear attention
 * GLA with flash-linear-attention semantics, per batch row and head:
 *   S_t = diag(exp(g_t)) S_{t-1} + k~_t v~_t^T,   o_t = R_t^{-1} (scale * S_t^T q~_t)
 * with state S [key_dim][value_dim], log decays g [key_dim] <= 0, q~ = R_t q and
 * k~ = R_t k rotated by the selective angles of token t (when given and the plan's
 * rotate flags say so), v~ = R_t v with ROVE_ROTATE_V, and the output rotated back with
 * ROVE_ROTATE_O. With g equal within each rotation pair this is exactly the complex
 * recurrence with transition diag(alpha_t e^{i omega_t}) (the "RoPE trick").
 * rove_gla_forward runs the chunked algorithm (intra-chunk parallel form, inter-chunk
 * recurrence) for prefill; rove_gla_recurrent the token-by-token recurrence (decode).
 * Both give the same result to float rounding. */
/**@{*/

/** GLA parameters. Fill with rove_gla_config_init(). */
typedef struct rove_gla_config {
  int32_t n_heads;      /**< > 0 */
  int32_t key_dim;      /**< K per head, > 0 */
  int32_t value_dim;    /**< V per head, > 0 (>= rotary_dim when rotating v/o) */
  float scale;          /**< finite; 0 = 1/sqrt(key_dim) */
  uint32_t rotate;      /**< ROVE_ROTATE_* bits used when angles are given; ROVE_ROTATE_ROPE */
  int32_t rotary_dim;   /**< 0..key_dim, 0 = key_dim; must resolve to an even number when
                             rotate != 0 (then key_dim must be even if it is 0) */
  rove_pairing pairing; /**< HALF */
  int32_t chunk;        /**< chunk length of rove_gla_forward: 16, 32, 64 or 128; 0 = 64 */
  rove_isa isa;         /**< AUTO */
  int32_t n_threads;    /**< 0..ROVE_MAX_THREADS; 0 = rove_default_threads() */
} rove_gla_config;

/** Defaults for the given shape (no-op when @p c is NULL). */
ROVE_API void rove_gla_config_init(rove_gla_config *c, int32_t n_heads, int32_t key_dim,
                                   int32_t value_dim);

/** An immutable, validated GLA configuration (may be used by many threads at once). */
typedef struct rove_gla_plan rove_gla_plan;
/** @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT; ROVE_ERR_UNSUPPORTED (ISA not available,
 *  key_dim or value_dim > ROVE_MAX_HEAD_DIM); ROVE_ERR_OUT_OF_MEMORY. */
ROVE_API rove_status rove_gla_plan_create(const rove_gla_config *c, rove_gla_plan **out);
ROVE_API void rove_gla_plan_destroy(rove_gla_plan *p);   /**< NULL-safe */
ROVE_API rove_isa rove_gla_plan_isa(const rove_gla_plan *p);

/** Tensors of one GLA call. Zero-initialise, then set what you use. */
typedef struct rove_gla_args {
  int32_t batch, seq_len;        /**< > 0 */
  const float *q, *k;            /**< [batch][seq_len][n_heads][key_dim], dense */
  const float *v;                /**< [batch][seq_len][n_heads][value_dim], dense */
  const float *g;                /**< [batch][seq_len][n_heads][key_dim] log decays: finite
                                      and <= 0 (checked: anything else is rejected) */
  const double *angles;          /**< NULL (no rotation) or [batch][seq_len][n_heads]
                                      [rotary_dim/2] selective angles, finite (checked);
                                      not read at all when the plan's rotate is 0 */
  const float *initial_state;    /**< NULL (zeros) or [batch][n_heads][key_dim][value_dim] */
  float *final_state;            /**< NULL or [batch][n_heads][key_dim][value_dim]; may
                                      equal initial_state (updated in place) */
  float *out;                    /**< [batch][seq_len][n_heads][value_dim]; must not
                                      overlap an input */
  /** NULL, or packed sequences (flash-linear-attention's cu_seqlens): [n_seqs + 1]
   *  cumulative lengths, cu_seqlens[0] = 0, non-decreasing, cu_seqlens[n_seqs] = seq_len,
   *  with batch 1. Sequence s is tokens cu_seqlens[s] .. cu_seqlens[s+1]-1 of the row (it
   *  may be empty) and runs from its own state: initial_state, final_state and
   *  d_initial_state / d_final_state are then [n_seqs][n_heads][key_dim][value_dim]. Each
   *  sequence's results equal a call on it alone, bit for bit (chunks start at each
   *  sequence's first token); the sequences are spread over the threads, longest first.
   *  Must not overlap an output. New in 0.6. */
  const int32_t *cu_seqlens;
  int32_t n_seqs;                /**< with cu_seqlens: >= 1; else 0 */
} rove_gla_args;

/**
 * Chunked GLA forward (prefill). Bitwise identical results for any thread count.
 * Subnormal float results inside the call (strong decays make e^{g} products below
 * FLT_MIN) are flushed to zero (x86 MXCSR.FTZ, aarch64 FPCR.FZ), as they would otherwise
 * run ~12x slower; the calling thread's floating-point mode is restored before the call
 * returns. rove_gla_backward does the same.
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT (NULL plan/args/tensor, sizes <= 0, g > 0 or
 *         non-finite, non-finite angles, overlapping output; cu_seqlens with batch != 1,
 *         n_seqs < 1, cu_seqlens[0] != 0, decreasing or not ending at seq_len; n_seqs
 *         without cu_seqlens); ROVE_ERR_SIZE_OVERFLOW; ROVE_ERR_OUT_OF_MEMORY. Outputs
 *         untouched on failure.
 */
ROVE_API rove_status rove_gla_forward(const rove_gla_plan *p, const rove_gla_args *a);
/** Token-by-token recurrent GLA (decode; any seq_len). Same arguments and statuses. */
ROVE_API rove_status rove_gla_recurrent(const rove_gla_plan *p, const rove_gla_args *a);

/** Gradients of one GLA call (rove_gla_backward). Zero-initialise, then set. All dense,
 *  in the layouts of rove_gla_args. */
typedef struct rove_gla_grads {
  const float *dout;          /**< [batch][seq_len][n_heads][value_dim]: dLoss / d out */
  const float *d_final_state; /**< NULL (0) or [batch][n_heads][key_dim][value_dim]
                                   ([n_seqs][...] with cu_seqlens, as the states) */
  float *dq, *dk, *dg;        /**< out: [batch][seq_len][n_heads][key_dim] */
  float *dv;                  /**< out: [batch][seq_len][n_heads][value_dim] */
  float *d_initial_state;     /**< NULL or out: [batch][n_heads][key_dim][value_dim] (the
                                   gradient at the initial state used, zeros when
                                   a->initial_state is NULL) */
  double *d_angles;           /**< NULL or out: [batch][seq_len][n_heads][rotary_dim/2]; only
                                   when the call rotates (a->angles given, plan rotate != 0) */
} rove_gla_grads;

/**
 * Gradients of rove_gla_forward(p, a) (equally of rove_gla_recurrent) for the upstream
 * gradients g->dout and g->d_final_state: dq, dk, dv, dg, and where asked the initial
 * state's and the angles' gradients. @p a is the forward's call (q, k, v, g, angles,
 * initial_state); a->final_state is not read or written, and a->out (the forward's
 * output) is read only for d_angles with ROVE_ROTATE_O (then required).
 * Chunked like the forward (the plan's chunk), two sweeps per (batch row, group of heads):
 * one forward from the initial state that keeps the state before each chunk, one backward
 * from d_final_state for dq, dk and dv (gla_kernels.h has the algebra). No exponent is positive, as in the forward: a decay
 * factor e^{b_t - b_s} is e^{b_t} e^{-b_s} where a chunk's (or a 16-token block's) decays
 * sum to >= -60 (both from their own sums, e^{-b} <= e^{60}), else a product of factors
 * <= 1; where the first form would pass float's range (inputs above ~3e12), the
 * second is used (a chunk's outputs are checked). Workspace per
 * thread O(heads per task * (chunk * (key_dim + value_dim) + key_dim * value_dim)): ~2 MiB
 * at most (one head's, if that is more), plus the kept chunk-start states, heads per task
 * * key_dim * value_dim floats per chunk up to 64 MiB (12 MiB for 4096 tokens of 12 heads
 * x 64 x 64; longer sequences run in segments that compute their states twice: same
 * results, one more state pass, ~1/6 of the chunk kernels' time), plus the sequence's
 * cos/sin tables (up to 16 MiB) when rotating.
 * dg uses the identity dLoss/d b_t = q~_t . dq~_t - k~_t . dk~_t (b the cumulative log
 * decay; elementwise per key channel, rotated frame) summed from the end, plus
 * sum_j S_T d_final_state over the last token: so dg's absolute error grows like
 * float rounding times sum over later tokens of |q~ dq~| + |k~ dk~| (summed in double).
 * Bitwise identical results for any thread count (a head's gradients are one task's).
 * @return ROVE_OK; ROVE_ERR_INVALID_ARGUMENT as rove_gla_forward, and for a NULL @p g,
 *         dout, dq, dk, dv or dg, d_angles without rotation, a->out missing when needed,
 *         or a gradient that overlaps an input or another gradient;
 *         ROVE_ERR_SIZE_OVERFLOW; ROVE_ERR_OUT_OF_MEMORY. Gradients untouched on failure.
 */
ROVE_API rove_status rove_gla_backward(const rove_gla_plan *p, const rove_gla_args *a,
                                       const rove_gla_grads *g);
/**@}*/

#ifdef __cplusplus
}
#endif
#endif /* ROVE_H */
