/* SPDX-License-Identifier: MIT */
/* rove_selective_phase: the phase network of Selective RoPE (include/rove.h): option and
 * size validation, then the two passes of selective_phase_token.c over blocks of tokens.
 *
 * Layouts: x rows (b * seq_len + t) at x_stride floats, d = H * in_dim used per row;
 * phi [batch][seq_len][H][P] (also the z buffer of the token pass); conv_state
 * [batch][H][P][S], oldest first; the gate buffer [batch][block][n_gate] doubles.
 * Threads: token pass one task per group of up to ROVE_PHASE_GROUP tokens of a batch row,
 * head pass one task per (b, h); no result depends on the thread count. Packed sequences
 * (rove_selective_phase_packed) are one row whose head pass runs each sequence's part of
 * a block from that sequence's own history (conv_state [n_seqs][H][P][S]). Failures happen
 * before anything is written. */
#include <math.h>
#include <string.h>

#include "isa_registry.h"
#include "rove.h"
#include "selective.h"
#include "util.h"

#define SERIAL_BELOW 262144  /* multiply-adds: fewer and the call stays on one thread */
/* Tokens (over all batch rows) per block: the token pass writes the block's z and gates
 * and the head pass reads them back, from cache when the block is this small (2048: the
 * head pass waited on memory, 1.1-1.2x the time at 2048 x 32 x 128, BENCHMARKS.md). */
#define BLOCK_ROWS 64
#define DEFAULT_RANK 16
#define DEFAULT_WIDTH 4

void rove_selective_phase_weights_init(rove_selective_phase_weights *w, int32_t n_heads,
                                       int32_t in_dim, int32_t n_pairs) {
  if (!w) return;
  memset(w, 0, sizeof *w);
  w->n_heads = n_heads, w->in_dim = in_dim, w->n_pairs = n_pairs;
  w->norm_eps = 1e-6f;
  w->projection = ROVE_PHASE_PROJ_LOW_RANK;
  w->proj_rank = DEFAULT_RANK;
  w->conv_width = DEFAULT_WIDTH;
  w->conv_act = ROVE_PHASE_ACT_NONE;
  w->gate = ROVE_PHASE_GATE_NONE;
  w->gate_rank = DEFAULT_RANK;
}

int32_t rove_selective_phase_state_len(const rove_selective_phase_weights *w) {
  if (!w) return -1;
  return w->skip_conv ? 1 : w->conv_width - 1;
}

/* The options and which pointers each selected part needs and forbids. */
static rove_status phase_options(const rove_selective_phase_weights *w) {
  if (w->n_heads <= 0 || w->in_dim <= 0 || w->n_pairs <= 0 || !(w->norm_eps > 0.0f) ||
      !isfinite(w->norm_eps))
    return ROVE_ERR_INVALID_ARGUMENT;
  if (w->projection == ROVE_PHASE_PROJ_LOW_RANK) {
    if (w->proj_rank <= 0 || !w->proj_down || !w->proj_up || w->proj_w || w->proj_gain)
      return ROVE_ERR_INVALID_ARGUMENT;
  } else if (w->projection == ROVE_PHASE_PROJ_PER_HEAD) {
    if (w->proj_rank != DEFAULT_RANK || w->proj_down || w->proj_up || !w->proj_w)
      return ROVE_ERR_INVALID_ARGUMENT;
  } else {
    return ROVE_ERR_INVALID_ARGUMENT;
  }
  if (w->skip_conv == 1) {
    if (w->conv_width != DEFAULT_WIDTH || w->conv_act != ROVE_PHASE_ACT_NONE || w->conv_w ||
        w->conv_b)
      return ROVE_ERR_INVALID_ARGUMENT;
  } else if (w->skip_conv == 0) {
    if (w->conv_width < 1 || w->conv_width > ROVE_PHASE_MAX_CONV_WIDTH || !w->conv_w ||
        (w->conv_act != ROVE_PHASE_ACT_NONE && w->conv_act != ROVE_PHASE_ACT_SILU))
      return ROVE_ERR_INVALID_ARGUMENT;
  } else {
    return ROVE_ERR_INVALID_ARGUMENT;
  }
  switch (w->gate) {
    case ROVE_PHASE_GATE_NONE:
      return w->gate_rank == DEFAULT_RANK && !w->gate_down && !w->gate_w && !w->gate_b
                 ? ROVE_OK : ROVE_ERR_INVALID_ARGUMENT;
    case ROVE_PHASE_GATE_STANDARD:
      return w->gate_rank == DEFAULT_RANK && !w->gate_down && w->gate_w
                 ? ROVE_OK : ROVE_ERR_INVALID_ARGUMENT;
    case ROVE_PHASE_GATE_LOW_RANK:
    case ROVE_PHASE_GATE_GLA:
      return w->gate_rank > 0 && w->gate_down && w->gate_w ? ROVE_OK
                                                           : ROVE_ERR_INVALID_ARGUMENT;
    default:
      return ROVE_ERR_INVALID_ARGUMENT;
  }
}

/* The shape of the run, every extent in int64 (and bytes), the stride, the overlap rule,
 * and the multiply-adds per token (*per_token, for the thread count). */
static rove_status phase_sizes(const rove_selective_phase_weights *w, int32_t batch,
                               int32_t seq_len, int64_t n_states, const int32_t *cu,
                               const float *x, int64_t x_stride, const float *state,
                               const float *phi, rove_phase_run *r, int64_t *xs,
                               int64_t *per_token) {
  const int64_t lim = INT64_MAX / (int64_t)sizeof(double);
  int64_t rows, ext, nphi, nstate, m0, m1, m2;
  r->state_len = rove_selective_phase_state_len(w);
  r->n_gate = w->gate == ROVE_PHASE_GATE_NONE ? 0
              : w->gate == ROVE_PHASE_GATE_GLA ? (int64_t)w->n_heads * w->n_pairs
                                               : w->n_heads;
  r->mid = 0;
  if (w->projection == ROVE_PHASE_PROJ_LOW_RANK) r->mid = w->proj_rank;
  if (w->gate == ROVE_PHASE_GATE_LOW_RANK || w->gate == ROVE_PHASE_GATE_GLA)
    r->mid = w->gate_rank > r->mid ? w->gate_rank : r->mid;
  if (!rove_mul_i64(w->n_heads, w->in_dim, &r->d) ||
      !rove_mul_i64(w->n_heads, w->n_pairs, &r->hp) || !rove_mul_i64(batch, seq_len, &rows))
    return ROVE_ERR_SIZE_OVERFLOW;
  if (x_stride < 0 || (x_stride != 0 && x_stride < r->d)) return ROVE_ERR_INVALID_ARGUMENT;
  *xs = x_stride ? x_stride : r->d;
  /* multiply-adds of one token: projection (m0), gate (m1), conv (m2) */
  if (w->projection == ROVE_PHASE_PROJ_LOW_RANK) {
    if (!rove_add_i64(r->d, r->hp, &m0) || !rove_mul_i64(m0, w->proj_rank, &m0))
      return ROVE_ERR_SIZE_OVERFLOW;
  } else if (!rove_mul_i64(r->hp, w->in_dim, &m0)) {
    return ROVE_ERR_SIZE_OVERFLOW;
  }
  m1 = 0;
  if (w->gate == ROVE_PHASE_GATE_STANDARD && !rove_mul_i64(r->d, w->n_heads, &m1))
    return ROVE_ERR_SIZE_OVERFLOW;
  if ((w->gate == ROVE_PHASE_GATE_LOW_RANK || w->gate == ROVE_PHASE_GATE_GLA) &&
      (!rove_add_i64(r->d, r->n_gate, &m1) || !rove_mul_i64(m1, w->gate_rank, &m1)))
    return ROVE_ERR_SIZE_OVERFLOW;
  if (!rove_mul_i64(r->hp, r->state_len + 1, &m2) || !rove_add_i64(m0, m1, per_token) ||
      !rove_add_i64(*per_token, m2, per_token) || r->d + r->mid > lim / ROVE_PHASE_GROUP ||
      ROVE_PHASE_HEAD_WORK(r) > lim)
    return ROVE_ERR_SIZE_OVERFLOW;
  if (!rove_mul_i64(rows - 1, *xs, &ext) || !rove_add_i64(ext, r->d, &ext) || ext > lim ||
      !rove_mul_i64(rows, r->hp, &nphi) || nphi > lim ||
      !rove_mul_i64(n_states, r->hp, &nstate) || !rove_mul_i64(nstate, r->state_len, &nstate) ||
      nstate > lim)
    return ROVE_ERR_SIZE_OVERFLOW;
  const size_t bx = (size_t)ext * sizeof(float), bp = (size_t)nphi * sizeof(float);
  const size_t bs = (size_t)nstate * sizeof(float);
  const size_t bcu = cu ? ((size_t)n_states + 1) * sizeof(int32_t) : 0;
  if (rove_overlap(phi, bp, x, bx) || rove_overlap(phi, bp, cu, bcu) ||
      (state && bs && (rove_overlap(state, bs, x, bx) || rove_overlap(state, bs, phi, bp) ||
                       rove_overlap(state, bs, cu, bcu))))
    return ROVE_ERR_INVALID_ARGUMENT;
  return ROVE_OK;
}

typedef struct {
  const rove_phase_run *r;
  const float *x;
  int64_t xs, seq_len, t0, n; /* the block: tokens [t0, t0 + n) of every batch row */
  int64_t groups;             /* token groups per batch row: ceil(n / ROVE_PHASE_GROUP) */
  float *phi, *hist;          /* hist [batch][H][P][S] (packed: [n_seqs][H][P][S]) */
  const int32_t *cu;          /* packed sequences of the one row (NULL: batch rows) */
  int64_t seq0;               /* packed: the first sequence that ends after t0 */
  double *gates;              /* [batch][n][n_gate] or NULL */
  double *scratch;            /* per thread: GROUP * (d + mid) doubles for the token pass,
                                 ROVE_PHASE_HEAD_WORK for the head pass */
  int64_t scratch_per_thread;
} block_ctx;

/* i = b * groups + g: tokens t0 + g * GROUP .. of batch row b (at most GROUP, within the
 * block) */
static void token_task(int64_t i, int tid, void *arg) {
  const block_ctx *c = arg;
  const int64_t b = i / c->groups, first = (i % c->groups) * ROVE_PHASE_GROUP;
  const int64_t nt = c->n - first < ROVE_PHASE_GROUP ? c->n - first : ROVE_PHASE_GROUP;
  const int64_t row = b * c->seq_len + c->t0 + first;
  rove_phase_tokens(c->r, nt, c->x + row * c->xs, c->xs,
                    c->scratch + (int64_t)tid * c->scratch_per_thread, c->phi + row * c->r->hp,
                    c->gates ? c->gates + (b * c->n + first) * c->r->n_gate : NULL);
}

/* Packed sequences, head h: each sequence's part of the block through the conv from its
 * own history, as a batch row of its own would run it. */
static void head_task_packed(const block_ctx *c, int64_t h, int tid) {
  const int64_t H = c->r->w->n_heads, P = c->r->w->n_pairs, end = c->t0 + c->n;
  for (int64_t s = c->seq0; c->cu[s] < end; s++) {
    const int64_t a = c->cu[s] > c->t0 ? c->cu[s] : c->t0;
    const int64_t b = c->cu[s + 1] < end ? c->cu[s + 1] : end;
    if (b <= a) continue; /* an empty sequence: its history passes through */
    rove_phase_head(c->r, h, b - a, c->phi + a * c->r->hp,
                    c->gates ? c->gates + (a - c->t0) * c->r->n_gate : NULL,
                    c->hist ? c->hist + (s * H + h) * P * c->r->state_len : NULL,
                    c->scratch + (int64_t)tid * c->scratch_per_thread);
  }
}

static void head_task(int64_t i, int tid, void *arg) { /* i = b * H + h */
  const block_ctx *c = arg;
  const int64_t H = c->r->w->n_heads, b = i / H, h = i % H;
  const int64_t P = c->r->w->n_pairs;
  if (c->cu) {
    head_task_packed(c, h, tid);
    return;
  }
  rove_phase_head(c->r, h, c->n, c->phi + (b * c->seq_len + c->t0) * c->r->hp,
                  c->gates ? c->gates + b * c->n * c->r->n_gate : NULL,
                  c->hist ? c->hist + i * P * c->r->state_len : NULL,
                  c->scratch + (int64_t)tid * c->scratch_per_thread);
}

/* rove_selective_phase (cu NULL: batch rows of seq_len tokens, a state row each) and
 * rove_selective_phase_packed (batch 1, seq_len tokens in all; cu: n_seqs sequences with a
 * state row each). */
static rove_status phase_run(const rove_selective_phase_weights *w, int32_t batch,
                             int32_t seq_len, const int32_t *cu, int32_t n_seqs,
                             const float *x, int64_t x_stride, float *conv_state, float *phi) {
  if (!w || !x || !phi || batch <= 0 || seq_len <= 0) return ROVE_ERR_INVALID_ARGUMENT;
  rove_status st = phase_options(w);
  if (st != ROVE_OK) return st;
  rove_phase_run r = {.w = w, .dots = rove_kernels_for(rove_best_isa())->phase_dots};
  int64_t xs = 0, per_token = 0, work;
  const int64_t n_states = cu ? n_seqs : batch;
  st = phase_sizes(w, batch, seq_len, n_states, cu, x, x_stride, conv_state, phi, &r, &xs,
                   &per_token);
  if (st != ROVE_OK) return st;
  int64_t block = BLOCK_ROWS / batch; /* tokens per block, at least a group, at most seq_len */
  if (block < ROVE_PHASE_GROUP) block = ROVE_PHASE_GROUP;
  if (block > seq_len) block = seq_len;
  if (!rove_mul_i64((int64_t)batch * seq_len, per_token, &work)) work = INT64_MAX;
  const int32_t threads = work < SERIAL_BELOW ? 1 : rove_default_threads();
  const int64_t groups = (block + ROVE_PHASE_GROUP - 1) / ROVE_PHASE_GROUP; /* per batch row */
  const int64_t tasks = (int64_t)batch * (groups > w->n_heads ? groups : w->n_heads);
  const int32_t team = rove_team_size(threads, tasks); /* of either pass */
  block_ctx c = {&r, x, xs, seq_len, 0, 0, 0, phi, NULL, cu, 0, NULL, NULL, 0};
  /* the token pass's u and mid of a group, or the head pass's work, in 64-byte blocks
   * (phase_sizes bounds both) */
  const int64_t head_work = ROVE_PHASE_HEAD_WORK(&r);
  const int64_t token_work = ROVE_PHASE_GROUP * (r.d + r.mid);
  int64_t scratch_bytes;
  c.scratch_per_thread = ((token_work > head_work ? token_work : head_work) + 7) & ~(int64_t)7;
  if (!rove_mul_i64(c.scratch_per_thread, (int64_t)team * (int64_t)sizeof(double),
                    &scratch_bytes))
    return ROVE_ERR_SIZE_OVERFLOW;
  const size_t nhist = (size_t)n_states * (size_t)r.hp * (size_t)r.state_len;
  const size_t hp = (size_t)r.hp, ngate = (size_t)batch * (size_t)block * (size_t)r.n_gate;
  /* per call, for every head: scale, exp_b, the conv bias [hp] and taps [H][W][P] */
  const int64_t W = w->skip_conv ? 0 : w->conv_width;
  int64_t nconst;
  if (!rove_mul_i64(r.hp, 3 + W, &nconst) || nconst > INT64_MAX / (int64_t)sizeof(double))
    return ROVE_ERR_SIZE_OVERFLOW;
  double *consts = rove_alloc((size_t)nconst * sizeof(double));
  c.scratch = rove_alloc((size_t)scratch_bytes);
  c.hist = nhist ? rove_alloc(nhist * sizeof(float)) : NULL;
  c.gates = ngate ? rove_alloc(ngate * sizeof(double)) : NULL;
  if (!consts || !c.scratch || (nhist && !c.hist) || (ngate && !c.gates)) {
    rove_free(consts), rove_free(c.scratch), rove_free(c.hist), rove_free(c.gates);
    return ROVE_ERR_OUT_OF_MEMORY;
  }
  if (w->projection == ROVE_PHASE_PROJ_PER_HEAD) {
    for (int64_t j = 0; j < r.hp; j++) { /* gain[h] / max(||w[h][k]||, 1e-12) (F.normalize) */
      const float *row = w->proj_w + j * w->in_dim;
      double s = 0.0;
      for (int32_t i = 0; i < w->in_dim; i++) s += (double)row[i] * row[i];
      const double gain = w->proj_gain ? (double)w->proj_gain[j / w->n_pairs] : 1.0;
      consts[j] = gain / fmax(sqrt(s), 1e-12);
    }
    r.scale = consts;
  }
  if (w->exp_bias) {
    for (int64_t j = 0; j < r.hp; j++) consts[hp + j] = exp((double)w->exp_bias[j]);
    r.exp_b = consts + hp;
  }
  if (W) { /* the conv laid out by tap, so that the head pass runs over a head's channels */
    const int64_t P = w->n_pairs;
    double *bias = consts + 2 * hp, *taps = consts + 3 * hp;
    for (int64_t hk = 0; hk < r.hp; hk++) {
      bias[hk] = w->conv_b ? (double)w->conv_b[hk] : 0.0;
      for (int64_t j = 0; j < W; j++)
        taps[((hk / P) * W + j) * P + hk % P] = (double)w->conv_w[hk * W + j];
    }
    r.conv_bias = bias, r.taps = taps;
  }
  if (nhist && conv_state)
    memcpy(c.hist, conv_state, nhist * sizeof(float));
  else if (nhist)
    memset(c.hist, 0, nhist * sizeof(float));
  for (int64_t t0 = 0; t0 < seq_len; t0 += block) {
    c.t0 = t0;
    c.n = seq_len - t0 < block ? seq_len - t0 : block;
    while (cu && cu[c.seq0 + 1] <= t0) c.seq0++; /* cu ends at seq_len > t0: stops */
    c.groups = (c.n + ROVE_PHASE_GROUP - 1) / ROVE_PHASE_GROUP;
    rove_parallel_for(threads, (int64_t)batch * c.groups, token_task, &c);
    rove_parallel_for(threads, (int64_t)batch * w->n_heads, head_task, &c);
  }
  if (nhist && conv_state) memcpy(conv_state, c.hist, nhist * sizeof(float));
  rove_free(consts), rove_free(c.scratch), rove_free(c.hist), rove_free(c.gates);
  return ROVE_OK;
}

rove_status rove_selective_phase(const rove_selective_phase_weights *w, int32_t batch,
                                 int32_t seq_len, const float *x, int64_t x_stride,
                                 float *conv_state, float *phi) {
  return phase_run(w, batch, seq_len, NULL, 0, x, x_stride, conv_state, phi);
}

rove_status rove_selective_phase_packed(const rove_selective_phase_weights *w, int32_t n_seqs,
                                        const int32_t *cu_seqlens, const float *x,
                                        int64_t x_stride, float *conv_state, float *phi) {
  int64_t total = 0;
  if (n_seqs <= 0 || !rove_check_cu(cu_seqlens, n_seqs, &total) || total <= 0)
    return ROVE_ERR_INVALID_ARGUMENT;
  return phase_run(w, 1, (int32_t)total, cu_seqlens, n_seqs, x, x_stride, conv_state, phi);
}
