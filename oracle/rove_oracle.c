/* SPDX-License-Identifier: MIT */
/* A naive double-precision attention oracle (see rove_oracle.h). Written straight from
 * docs/DESIGN.md §1; it deliberately shares no code with the library. */
#include "rove_oracle.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- rotation ------------------------------------------------------------------------ */

/* The rotated block of a head is dims [first, first + r): first = 0 for
 * ROVE_ROTARY_FIRST, d - r for ROVE_ROTARY_LAST (DeepSeek MLA). Pair k is formed inside it:
 * (first + k, first + k + r/2) for HALF, (first + 2k, first + 2k + 1) for INTERLEAVED. */
void rove_oracle_rotate_angles_placed(double *x, int32_t d, int32_t r, rove_pairing pairing,
                                      rove_rotary_placement placement, const double *angles,
                                      int sign) {
  if (!x || !angles || d <= 0) return;
  if (r <= 0 || r > d) r = d;
  const int32_t half = r / 2;
  if (placement == ROVE_ROTARY_LAST) x += d - 2 * half;
  for (int32_t k = 0; k < half; k++) {
    const double t = angles[k];
    const double cs = cos(t);
    const double sn = (sign < 0 ? -1.0 : 1.0) * sin(t);
    const int32_t ia = pairing == ROVE_PAIRING_INTERLEAVED ? 2 * k : k;
    const int32_t ib = pairing == ROVE_PAIRING_INTERLEAVED ? 2 * k + 1 : k + half;
    const double a = x[ia], b = x[ib];
    x[ia] = a * cs - b * sn;
    x[ib] = a * sn + b * cs;
  }
}

void rove_oracle_rotate_angles(double *x, int32_t d, int32_t r, rove_pairing pairing,
                               const double *angles, int sign) {
  rove_oracle_rotate_angles_placed(x, d, r, pairing, ROVE_ROTARY_FIRST, angles, sign);
}

void rove_oracle_rotate_placed(double *x, int32_t d, int32_t r, rove_pairing pairing,
                               rove_rotary_placement placement, const double *inv_freq,
                               double pos, int sign) {
  if (!x || !inv_freq || d <= 0) return;
  if (r <= 0 || r > d) r = d;
  double t[ROVE_MAX_HEAD_DIM / 2];
  for (int32_t k = 0; k < r / 2; k++) t[k] = pos * inv_freq[k];
  rove_oracle_rotate_angles_placed(x, d, r, pairing, placement, t, sign);
}

void rove_oracle_rotate(double *x, int32_t d, int32_t r, rove_pairing pairing,
                        const double *inv_freq, double pos, int sign) {
  rove_oracle_rotate_placed(x, d, r, pairing, ROVE_ROTARY_FIRST, inv_freq, pos, sign);
}

/* ---- shared validation and geometry --------------------------------------------------- */

typedef struct {
  int32_t B, Sq, Skv, H, Hkv, d, r, group;
  int64_t qs, ks, vs;
  double scale, softcap;
  uint32_t rot;
  int causal;
  int64_t window;
} geom;

static int setup(const rove_attention_config *c, const double *inv_freq,
                 const rove_attention_args *a, const double *out, geom *g) {
  if (!c || !inv_freq || !a || !out || !a->q || !a->k || !a->v) return -1;
  if (a->batch <= 0 || a->q_len <= 0 || a->kv_len <= 0) return -1;
  if (c->n_heads <= 0 || c->n_kv_heads <= 0 || c->head_dim <= 0) return -1;
  if (c->n_heads % c->n_kv_heads != 0) return -1;
  g->B = a->batch;
  g->Sq = a->q_len;
  g->Skv = a->kv_len;
  g->H = c->n_heads;
  g->Hkv = c->n_kv_heads;
  g->d = c->head_dim;
  g->group = g->H / g->Hkv;
  g->r = c->rope.rotary_dim == 0 ? g->d : c->rope.rotary_dim;
  if (g->r <= 0 || g->r > g->d || (g->r & 1)) return -1;
  const int64_t qw = (int64_t)g->H * g->d, kw = (int64_t)g->Hkv * g->d;
  g->qs = a->q_stride ? a->q_stride : qw;
  g->ks = a->k_stride ? a->k_stride : kw;
  g->vs = a->v_stride ? a->v_stride : kw;
  if (g->qs < qw || g->ks < kw || g->vs < kw) return -1;
  g->scale = c->scale == 0.0f ? 1.0 / sqrt((double)g->d) : (double)c->scale;
  g->softcap = (double)c->softcap;
  g->rot = c->rotate;
  g->causal = c->causal != 0;
  g->window = c->window;
  return 0;
}

static int64_t qpos_of(const rove_attention_args *a, int32_t b, int32_t i) {
  if (a->q_pos) return a->q_pos[(int64_t)b * a->q_len + i];
  return (int64_t)a->kv_len - a->q_len + i;
}
static int64_t kpos_of(const rove_attention_args *a, int32_t b, int32_t j) {
  if (a->kv_pos) return a->kv_pos[(int64_t)b * a->kv_len + j];
  return j;
}

static int visible(const geom *g, int64_t P, int64_t p) {
  const int64_t diff = P - p; /* int64: any pair of int32 positions fits */
  if (g->causal && p > P) return 0;
  if (g->window > 0) {
    const int64_t dist = g->causal ? diff : (diff < 0 ? -diff : diff);
    if (dist >= g->window) return 0;
  }
  return 1;
}

/* Load one head vector of token row `row` into x (double). */
static void load(double *x, const float *base, int64_t stride, int64_t row, int32_t head,
                 int32_t d) {
  const float *src = base + row * stride + (int64_t)head * d;
  for (int32_t e = 0; e < d; e++) x[e] = (double)src[e];
}

/* Angles of one token for KV head kh: explicit (Selective RoPE: ang is a->q_angles or
 * a->kv_angles, row = b * len + token) or pos * inv_freq. */
static void angles_of(const geom *g, const double *inv_freq, const double *ang, int64_t row,
                      int32_t kh, int64_t pos, double *t) {
  for (int32_t k = 0; k < g->r / 2; k++)
    t[k] = ang ? ang[(row * g->Hkv + kh) * (g->r / 2) + k] : (double)pos * inv_freq[k];
}

/* Rotate x by R(t) (sign +1) or its inverse (sign -1). */
static void rot_by(double *x, const geom *g, const rove_attention_config *c, const double *t,
                   int sign) {
  rove_oracle_rotate_angles_placed(x, g->d, g->r, c->rope.pairing, c->rope.placement, t, sign);
}

/* q~ or k~: optional rotation by the angles t, then the rotated dims times m. */
static void rotate_qk(double *x, const geom *g, const rove_attention_config *c,
                      const double *t, double m, int on) {
  if (!on) return;
  rot_by(x, g, c, t, +1);
  const int32_t first = c->rope.placement == ROVE_ROTARY_LAST ? g->d - g->r : 0;
  for (int32_t e = first; e < first + g->r; e++) x[e] *= m;
}

/* Scores of query vector qt against the rotated keys kt[Skv][d] of one (b, kv head);
 * fills s[j] and vis[j]; returns the number of visible keys and the max in *mx. */
static int64_t score_row(const geom *g, const rove_attention_args *a, int32_t b, int64_t P,
                         const double *qt, const double *kt, double *s, char *vis,
                         double *mx) {
  int64_t nvis = 0;
  double best = -INFINITY;
  for (int32_t j = 0; j < g->Skv; j++) {
    vis[j] = (char)visible(g, P, kpos_of(a, b, j));
    if (!vis[j]) continue;
    const double *kj = kt + (int64_t)j * g->d;
    double dot = 0.0;
    for (int32_t e = 0; e < g->d; e++) dot += qt[e] * kj[e];
    double sc = g->scale * dot;
    if (g->softcap > 0.0) sc = g->softcap * tanh(sc / g->softcap);
    s[j] = sc;
    if (sc > best) best = sc;
    nvis++;
  }
  *mx = best;
  return nvis;
}

/* Two-pass softmax in place over the visible entries; returns the sum of exp(s - mx).
 * With an attention sink (sink non-NULL: one more logit, of a zero value, in the row;
 * mx already includes it) the sum holds exp(*sink - mx) too. */
static double softmax_row(const geom *g, double *s, const char *vis, double mx,
                          const float *sink) {
  double sum = sink ? exp((double)*sink - mx) : 0.0;
  for (int32_t j = 0; j < g->Skv; j++)
    if (vis[j]) sum += exp(s[j] - mx);
  for (int32_t j = 0; j < g->Skv; j++) s[j] = vis[j] ? exp(s[j] - mx) / sum : 0.0;
  return sum;
}

typedef struct {
  double *kt, *vt, *qt, *s, *y, *tmp;
  double *kang, *qang, *dang; /* angles: [Skv][r/2] of the keys, [r/2] query, [r/2] offset */
  char *vis;
} work;

static int work_alloc(work *w, const geom *g) {
  memset(w, 0, sizeof *w);
  const size_t kvd = (size_t)g->Skv * (size_t)g->d;
  w->kt = malloc(kvd * sizeof(double));
  w->vt = malloc(kvd * sizeof(double));
  w->qt = malloc((size_t)g->d * sizeof(double));
  w->s = malloc((size_t)g->Skv * sizeof(double));
  w->y = malloc((size_t)g->d * sizeof(double));
  w->tmp = malloc((size_t)g->d * sizeof(double));
  w->vis = malloc((size_t)g->Skv);
  w->kang = malloc((size_t)g->Skv * (size_t)(g->r / 2) * sizeof(double));
  w->qang = malloc((size_t)(g->r / 2) * sizeof(double));
  w->dang = malloc((size_t)(g->r / 2) * sizeof(double));
  if (!w->kt || !w->vt || !w->qt || !w->s || !w->y || !w->tmp || !w->vis || !w->kang ||
      !w->qang || !w->dang)
    return -1;
  return 0;
}
static void work_free(work *w) {
  free(w->kt);
  free(w->vt);
  free(w->qt);
  free(w->s);
  free(w->y);
  free(w->tmp);
  free(w->vis);
  free(w->kang);
  free(w->qang);
  free(w->dang);
}

/* Rotated K (and V when rotate_v) of one (b, kv head). */
static void build_kv(work *w, const geom *g, const rove_attention_config *c,
                     const double *inv_freq, double m, const rove_attention_args *a, int32_t b,
                     int32_t kh, int rotate_v) {
  for (int32_t j = 0; j < g->Skv; j++) {
    const int64_t row = (int64_t)b * g->Skv + j, p = kpos_of(a, b, j);
    double *kj = w->kt + (int64_t)j * g->d, *vj = w->vt + (int64_t)j * g->d;
    double *t = w->kang + (int64_t)j * (g->r / 2);
    angles_of(g, inv_freq, a->kv_angles, row, kh, p, t);
    load(kj, a->k, g->ks, row, kh, g->d);
    rotate_qk(kj, g, c, t, m, (g->rot & ROVE_ROTATE_K) != 0);
    load(vj, a->v, g->vs, row, kh, g->d);
    if (rotate_v && (g->rot & ROVE_ROTATE_V)) rot_by(vj, g, c, t, +1);
  }
}

/* ---- the direct form ------------------------------------------------------------------ */

int rove_oracle_attention(const rove_attention_config *c, const double *inv_freq, double m,
                          const rove_attention_args *a, double *out, double *lse) {
  geom g;
  if (setup(c, inv_freq, a, out, &g) != 0) return -1;
  work w;
  if (work_alloc(&w, &g) != 0) {
    work_free(&w);
    return -1;
  }
  for (int32_t b = 0; b < g.B; b++) {
    for (int32_t kh = 0; kh < g.Hkv; kh++) {
      build_kv(&w, &g, c, inv_freq, m, a, b, kh, 1);
      for (int32_t h = kh * g.group; h < (kh + 1) * g.group; h++) {
        for (int32_t i = 0; i < g.Sq; i++) {
          const int64_t qrow = (int64_t)b * g.Sq + i, P = qpos_of(a, b, i);
          angles_of(&g, inv_freq, a->q_angles, qrow, kh, P, w.qang);
          load(w.qt, a->q, g.qs, qrow, h, g.d);
          rotate_qk(w.qt, &g, c, w.qang, m, (g.rot & ROVE_ROTATE_Q) != 0);
          double mx;
          const int64_t nvis = score_row(&g, a, b, P, w.qt, w.kt, w.s, w.vis, &mx);
          double *y = out + (qrow * g.H + h) * g.d;
          double *l = lse ? lse + ((int64_t)b * g.H + h) * g.Sq + i : NULL;
          const float *sink = a->sinks ? a->sinks + h : NULL;
          if (nvis == 0) {
            for (int32_t e = 0; e < g.d; e++) y[e] = 0.0;
            if (l) *l = sink ? (double)*sink : -INFINITY;
            continue;
          }
          if (sink && (double)*sink > mx) mx = (double)*sink;
          const double sum = softmax_row(&g, w.s, w.vis, mx, sink);
          if (l) *l = mx + log(sum);
          for (int32_t e = 0; e < g.d; e++) w.y[e] = 0.0;
          for (int32_t j = 0; j < g.Skv; j++) {
            if (!w.vis[j]) continue;
            const double *vj = w.vt + (int64_t)j * g.d;
            for (int32_t e = 0; e < g.d; e++) w.y[e] += w.s[j] * vj[e];
          }
          if (g.rot & ROVE_ROTATE_O) rot_by(w.y, &g, c, w.qang, -1);
          memcpy(y, w.y, (size_t)g.d * sizeof(double));
        }
      }
    }
  }
  work_free(&w);
  return 0;
}

/* ---- the attentive-convolution form ----------------------------------------------------- */

int rove_oracle_attention_conv(const rove_attention_config *c, const double *inv_freq,
                               double m, const rove_attention_args *a, double *out) {
  geom g;
  if (setup(c, inv_freq, a, out, &g) != 0) return -1;
  if ((g.rot & (ROVE_ROTATE_V | ROVE_ROTATE_O)) != (ROVE_ROTATE_V | ROVE_ROTATE_O)) return -1;
  work w;
  if (work_alloc(&w, &g) != 0) {
    work_free(&w);
    return -1;
  }
  for (int32_t b = 0; b < g.B; b++) {
    for (int32_t kh = 0; kh < g.Hkv; kh++) {
      build_kv(&w, &g, c, inv_freq, m, a, b, kh, 0); /* V stays in its own frame */
      for (int32_t h = kh * g.group; h < (kh + 1) * g.group; h++) {
        for (int32_t i = 0; i < g.Sq; i++) {
          const int64_t qrow = (int64_t)b * g.Sq + i, P = qpos_of(a, b, i);
          angles_of(&g, inv_freq, a->q_angles, qrow, kh, P, w.qang);
          load(w.qt, a->q, g.qs, qrow, h, g.d);
          rotate_qk(w.qt, &g, c, w.qang, m, (g.rot & ROVE_ROTATE_Q) != 0);
          double mx;
          const int64_t nvis = score_row(&g, a, b, P, w.qt, w.kt, w.s, w.vis, &mx);
          double *y = out + (qrow * g.H + h) * g.d;
          for (int32_t e = 0; e < g.d; e++) y[e] = 0.0;
          if (nvis == 0) continue;
          const float *sink = a->sinks ? a->sinks + h : NULL;
          if (sink && (double)*sink > mx) mx = (double)*sink;
          softmax_row(&g, w.s, w.vis, mx, sink);
          for (int32_t j = 0; j < g.Skv; j++) {
            if (!w.vis[j]) continue;
            /* R_{p_j - P_i} v_j: one rotation by the offset, never by absolute positions
             * (explicit angles: by theta_j - theta_i) */
            const double off = (double)(kpos_of(a, b, j) - P);
            for (int32_t k = 0; k < g.r / 2; k++)
              w.dang[k] = a->q_angles ? w.kang[(int64_t)j * (g.r / 2) + k] - w.qang[k]
                                      : off * inv_freq[k];
            memcpy(w.tmp, w.vt + (int64_t)j * g.d, (size_t)g.d * sizeof(double));
            rot_by(w.tmp, &g, c, w.dang, +1);
            for (int32_t e = 0; e < g.d; e++) y[e] += w.s[j] * w.tmp[e];
          }
        }
      }
    }
  }
  work_free(&w);
  return 0;
}
