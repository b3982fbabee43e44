/* SPDX-License-Identifier: MIT */
/* The case table of `rove check` and how a case becomes an attention config. */
#include "check_cases.h"

#include <stdio.h>
#include <string.h>

#define HALF ROVE_PAIRING_HALF
#define INTER ROVE_PAIRING_INTERLEAVED
#define ROVE ROVE_ROTATE_ROVE
#define ROPE ROVE_ROTATE_ROPE
#define QKV (ROVE_ROTATE_Q | ROVE_ROTATE_K | ROVE_ROTATE_V)
#define VO (ROVE_ROTATE_V | ROVE_ROTATE_O)
#define NONE ROVE_SCALING_NONE
#define YARN ROVE_SCALING_YARN

/* d, r, pairing, rotate, causal, window, softcap, heads, kv heads, batch, q_len, kv_len,
 * scaling, positions, strided, quick; SINKS: the same with attention sinks */
#define CASE(d, r, pr, rot, ca, w, cap, h, hk, b, q, kv, sc, pos, st, qk) \
  {d, r, pr, rot, ca, w, cap, h, hk, b, q, kv, sc, pos, st, qk, 0}
#define SINKS(d, r, pr, rot, ca, w, cap, h, hk, b, q, kv, sc, pos, st, qk) \
  {d, r, pr, rot, ca, w, cap, h, hk, b, q, kv, sc, pos, st, qk, 1}

const check_case check_cases[] = {
    /* head_dim sweep */
    CASE(32, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 1),
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 1),
    CASE(80, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(96, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(128, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 1),
    CASE(256, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(32, 0, INTER, ROVE, 1, 0, 0, 4, 4, 1, 37, 37, NONE, POS_DEFAULT, 0, 0),
    CASE(80, 0, INTER, ROVE, 1, 0, 0, 4, 4, 1, 37, 37, NONE, POS_DEFAULT, 0, 1),
    CASE(256, 0, INTER, ROVE, 1, 0, 0, 4, 4, 1, 37, 37, NONE, POS_DEFAULT, 0, 0),
    CASE(32, 0, HALF, ROPE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(64, 0, HALF, ROPE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 1),
    CASE(96, 0, INTER, ROPE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(128, 0, HALF, ROPE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(256, 0, INTER, ROPE, 1, 0, 0, 4, 4, 1, 37, 37, NONE, POS_DEFAULT, 0, 0),
    /* rotary_dim < head_dim */
    CASE(64, 32, HALF, ROVE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 1),
    CASE(64, 32, INTER, ROVE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 1),
    CASE(128, 64, HALF, ROPE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(80, 16, INTER, ROVE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(96, 32, HALF, ROVE, 0, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(256, 64, HALF, ROVE, 1, 0, 0, 4, 4, 1, 37, 37, NONE, POS_DEFAULT, 0, 0),
    /* the last r dims rotate (ROVE_ROTARY_LAST; DeepSeek-V3: 192 = 128 nope + 64 rope) */
    CASE(64, -32, HALF, ROVE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 1),
    CASE(192, -64, INTER, ROVE, 1, 0, 0, 4, 4, 1, 37, 37, YARN, POS_DEFAULT, 0, 0),
    CASE(128, -64, HALF, ROPE, 1, 0, 0, 8, 2, 1, 1, 257, NONE, POS_SHIFTED, 0, 0),
    CASE(80, -16, INTER, ROVE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 1, 0),
    /* other rotation flags */
    CASE(64, 0, HALF, QKV, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(64, 0, HALF, VO, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 1),
    CASE(64, 0, HALF, 0, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(64, 0, INTER, ROVE_ROTATE_Q, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 0),
    /* non-causal */
    CASE(64, 0, HALF, ROVE, 0, 0, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 1),
    CASE(64, 0, HALF, ROVE, 0, 0, 0, 4, 4, 1, 37, 257, NONE, POS_DEFAULT, 0, 0),
    CASE(128, 0, HALF, ROPE, 0, 0, 0, 4, 4, 1, 1, 257, NONE, POS_DEFAULT, 0, 0),
    /* sliding window */
    CASE(64, 0, HALF, ROVE, 1, 16, 0, 4, 4, 1, 257, 257, NONE, POS_DEFAULT, 0, 1),
    CASE(64, 0, HALF, ROVE, 0, 8, 0, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(128, 0, HALF, ROPE, 1, 64, 0, 4, 4, 1, 64, 257, NONE, POS_DEFAULT, 0, 0),
    CASE(80, 0, INTER, ROVE, 1, 1, 0, 4, 4, 1, 37, 37, NONE, POS_DEFAULT, 0, 0),
    /* softcap */
    CASE(64, 0, HALF, ROVE, 1, 0, 5, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 1),
    CASE(128, 0, HALF, ROPE, 0, 0, 30, 4, 4, 1, 100, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(96, 0, INTER, ROVE, 1, 32, 20, 4, 4, 1, 37, 257, NONE, POS_DEFAULT, 0, 0),
    /* GQA (8/2) and MQA (8/1) */
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 8, 2, 1, 100, 100, NONE, POS_DEFAULT, 0, 1),
    CASE(128, 0, HALF, ROPE, 1, 0, 0, 8, 2, 1, 100, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(80, 0, INTER, ROVE, 1, 0, 0, 8, 2, 1, 1, 257, NONE, POS_DEFAULT, 0, 0),
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 8, 1, 1, 1, 257, NONE, POS_DEFAULT, 0, 1),
    CASE(96, 0, HALF, ROVE, 1, 0, 0, 8, 1, 1, 37, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(256, 0, HALF, ROPE, 1, 0, 0, 8, 1, 1, 1, 100, NONE, POS_DEFAULT, 0, 0),
    /* q_len 1 / q_len < kv_len / q_len == kv_len, kv_len off the tile sizes */
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 1, 1, NONE, POS_DEFAULT, 0, 1),
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 1, 37, NONE, POS_DEFAULT, 0, 0),
    CASE(128, 0, INTER, ROVE, 1, 0, 0, 4, 4, 1, 1, 257, NONE, POS_DEFAULT, 0, 0),
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 37, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 100, 257, NONE, POS_DEFAULT, 0, 1),
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 257, 257, NONE, POS_DEFAULT, 0, 0),
    CASE(32, 0, HALF, ROVE, 0, 0, 0, 4, 4, 1, 1, 1, NONE, POS_DEFAULT, 0, 0),
    /* frequency scalings */
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 257, 257, YARN, POS_DEFAULT, 0, 1),
    CASE(128, 0, INTER, ROPE, 1, 0, 0, 4, 4, 1, 100, 100, YARN, POS_DEFAULT, 0, 0),
    CASE(64, 32, HALF, ROVE, 1, 0, 0, 8, 2, 1, 37, 257, YARN, POS_DEFAULT, 0, 0),
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 100, 100, ROVE_SCALING_LINEAR, POS_DEFAULT, 0, 0),
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 100, 100, ROVE_SCALING_NTK, POS_DEFAULT, 0, 0),
    CASE(128, 0, INTER, ROVE, 1, 0, 0, 4, 4, 1, 100, 100, ROVE_SCALING_LLAMA3, POS_DEFAULT, 0,
         0),
    CASE(96, 0, HALF, ROVE, 1, 0, 0, 4, 2, 1, 100, 100, ROVE_SCALING_LONGROPE, POS_DEFAULT, 0,
         1),
    CASE(64, 32, INTER, ROPE, 1, 0, 0, 8, 2, 1, 1, 257, ROVE_SCALING_LONGROPE, POS_SHIFTED, 0,
         0),
    /* explicit positions */
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 100, 100, NONE, POS_SHIFTED, 0, 1),
    CASE(128, 0, INTER, ROPE, 1, 0, 0, 4, 4, 1, 1, 257, NONE, POS_SHIFTED, 0, 0),
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 8, 2, 1, 37, 100, NONE, POS_RANDOM, 0, 1),
    CASE(64, 0, INTER, ROVE, 0, 50, 0, 4, 4, 1, 37, 100, NONE, POS_RANDOM, 0, 0),
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 16, 37, NONE, POS_NEGATIVE, 0, 1),
    CASE(64, 32, INTER, ROVE, 1, 0, 0, 4, 2, 1, 100, 100, YARN, POS_FAR_NEGATIVE, 0, 0),
    /* batch > 1 */
    CASE(96, 0, HALF, ROVE, 1, 0, 0, 4, 2, 2, 37, 100, NONE, POS_DEFAULT, 0, 0),
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 4, 4, 3, 1, 37, NONE, POS_RANDOM, 0, 0),
    /* q, k, v as views into one fused QKV projection (strides), padded output rows */
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 8, 2, 1, 100, 100, NONE, POS_DEFAULT, 1, 1),
    CASE(80, 0, INTER, ROPE, 0, 0, 0, 4, 4, 1, 37, 37, NONE, POS_DEFAULT, 1, 0),
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 4, 2, 2, 37, 37, NONE, POS_SHIFTED, 1, 0),
    /* longer sequences: many key tiles, a ragged last one, long decode */
    CASE(128, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 1000, 1000, NONE, POS_DEFAULT, 0, 0),
    CASE(64, 0, INTER, ROPE, 1, 0, 0, 8, 2, 1, 1, 4097, NONE, POS_DEFAULT, 0, 0),
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 8, 1, 1, 3, 3001, NONE, POS_SHIFTED, 0, 0),
    CASE(64, 0, HALF, ROVE, 0, 300, 0, 4, 4, 1, 513, 1000, NONE, POS_DEFAULT, 0, 0),
    CASE(96, 0, HALF, ROVE, 1, 0, 0, 2, 1, 1, 777, 777, YARN, POS_DEFAULT, 0, 0),
    CASE(64, 0, HALF, ROVE, 1, 0, 0, 4, 4, 1, 1500, 1500, NONE, POS_SHIFTED, 0, 0),
    /* attention sinks (gpt-oss: GQA 64:8 x 64, YaRN, sliding windows of 128) */
    SINKS(64, 0, HALF, ROPE, 1, 0, 0, 8, 2, 1, 100, 100, YARN, POS_DEFAULT, 0, 1),
    SINKS(64, 0, HALF, ROPE, 1, 128, 0, 8, 2, 1, 257, 257, YARN, POS_DEFAULT, 0, 0),
    SINKS(64, 0, HALF, ROVE, 1, 0, 0, 8, 1, 1, 1, 4097, NONE, POS_DEFAULT, 0, 1),
    SINKS(64, 0, HALF, ROVE, 1, 0, 0, 8, 2, 2, 100, 100, NONE, POS_RANDOM, 1, 0),
    SINKS(128, 0, INTER, ROVE, 0, 0, 20, 4, 4, 1, 37, 37, NONE, POS_NEGATIVE, 0, 0),
};
const size_t check_n_cases = sizeof check_cases / sizeof check_cases[0];

/* LongRoPE's two factor sets (Phi-3 shapes: short near 1, long growing), for any r/2. */
static double g_longrope_short[ROVE_MAX_HEAD_DIM / 2], g_longrope_long[ROVE_MAX_HEAD_DIM / 2];

static void set_scaling(rove_rope_config *r, rove_scaling s) {
  r->scaling = s;
  switch (s) {
    case ROVE_SCALING_LINEAR: r->factor = 4.0; break;
    case ROVE_SCALING_NTK: r->factor = 2.0; break;
    case ROVE_SCALING_YARN:
      r->factor = 4.0;
      r->original_max_position = 64;
      break;
    case ROVE_SCALING_LLAMA3:
      r->theta = 500000.0;
      r->factor = 8.0;
      r->original_max_position = 64;
      break;
    case ROVE_SCALING_LONGROPE: /* s = 32, L0 = 64, the long set (max_position > L0) */
      for (int k = 0; k < ROVE_MAX_HEAD_DIM / 2; k++) {
        g_longrope_short[k] = 1.0 + 0.01 * (k % 8);
        g_longrope_long[k] = 1.0 + 0.75 * k;
      }
      r->factor = 32.0;
      r->original_max_position = 64;
      r->freq_factors = g_longrope_short;
      r->long_freq_factors = g_longrope_long;
      r->max_position = 65;
      break;
    case ROVE_SCALING_NONE:
      break;
  }
}

void check_case_config(const check_case *cc, rove_isa isa, int32_t n_threads,
                       rove_attention_config *c) {
  rove_attention_config_init(c, cc->n_heads, cc->n_kv_heads, cc->head_dim);
  c->rotate = cc->rotate;
  c->causal = cc->causal;
  c->window = cc->window;
  c->softcap = cc->softcap;
  c->rope.rotary_dim = cc->rotary_dim < 0 ? -cc->rotary_dim : cc->rotary_dim;
  c->rope.placement = cc->rotary_dim < 0 ? ROVE_ROTARY_LAST : ROVE_ROTARY_FIRST;
  c->rope.pairing = cc->pairing;
  set_scaling(&c->rope, cc->scaling);
  c->isa = isa;
  c->n_threads = n_threads;
}

static const char *rotate_name(uint32_t rot, char *buf) {
  if (rot == ROVE_ROTATE_ROVE) return "rove";
  if (rot == ROVE_ROTATE_ROPE) return "rope";
  if (rot == 0) return "norot";
  snprintf(buf, 16, "rot=%s%s%s%s", (rot & ROVE_ROTATE_Q) ? "Q" : "",
           (rot & ROVE_ROTATE_K) ? "K" : "", (rot & ROVE_ROTATE_V) ? "V" : "",
           (rot & ROVE_ROTATE_O) ? "O" : "");
  return buf;
}

static const char *const scaling_names[] = {"", " linear(s=4)", " ntk(s=2)",
                                            " yarn(s=4,L0=64)", " llama3(s=8,L0=64)",
                                            " longrope(s=32,L0=64,long)"};
static const char *const pos_names[] = {"", " pos=+2^20", " pos=random", " pos=masked",
                                        " pos=-2^20"};

void check_case_describe(const check_case *cc, char *buf, size_t size) {
  char rot[16], extra[48] = "";
  size_t n = 0;
  if (cc->window) n += (size_t)snprintf(extra + n, sizeof extra - n, " win=%d", (int)cc->window);
  if (cc->softcap > 0.0f)
    snprintf(extra + n, sizeof extra - n, " cap=%g", (double)cc->softcap);
  snprintf(buf, size, "d=%d r=%d%s %s %s %s%s h=%d/%d b=%d q=%d kv=%d%s%s%s%s", (int)cc->head_dim,
           (int)(cc->rotary_dim > 0 ? cc->rotary_dim : cc->rotary_dim < 0 ? -cc->rotary_dim : cc->head_dim),
           cc->rotary_dim < 0 ? " last" : "",
           cc->pairing == ROVE_PAIRING_HALF ? "half" : "inter", rotate_name(cc->rotate, rot),
           cc->causal ? "causal" : "full", extra, (int)cc->n_heads, (int)cc->n_kv_heads,
           (int)cc->batch, (int)cc->q_len, (int)cc->kv_len, scaling_names[cc->scaling],
           pos_names[cc->pos], cc->strided ? " fused-qkv" : "", cc->sinks ? " sinks" : "");
}
