/* SPDX-License-Identifier: MIT */
/* GLA oracles in double (see gla_oracle.h): the real recurrence and its complex form. */
#include "gla_oracle.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int32_t H, K, V, r, half, pairing;
  int rq, rk, rv, ro; /* rotations in force (angles given and flag set) */
  double scale;
} gla_shape;

static int shape_of(const rove_gla_config *c, const rove_gla_args *a, gla_shape *s) {
  if (!c || !a || !a->q || !a->k || !a->v || !a->g || a->batch <= 0 || a->seq_len <= 0 ||
      c->n_heads <= 0 || c->key_dim <= 0 || c->value_dim <= 0)
    return -1;
  s->H = c->n_heads, s->K = c->key_dim, s->V = c->value_dim;
  s->r = c->rotary_dim ? c->rotary_dim : c->key_dim;
  s->half = s->r / 2;
  s->pairing = (int32_t)c->pairing;
  s->scale = c->scale != 0.0f ? (double)c->scale : 1.0 / sqrt((double)c->key_dim);
  const int on = a->angles != NULL;
  s->rq = on && (c->rotate & ROVE_ROTATE_Q), s->rk = on && (c->rotate & ROVE_ROTATE_K);
  s->rv = on && (c->rotate & ROVE_ROTATE_V), s->ro = on && (c->rotate & ROVE_ROTATE_O);
  if (on && (s->r % 2 || s->r > s->K || ((s->rv || s->ro) && s->r > s->V))) return -1;
  return 0;
}

/* Dims of pair p. */
static void pair_dims(const gla_shape *s, int32_t p, int32_t *ia, int32_t *ib) {
  *ia = s->pairing == ROVE_PAIRING_HALF ? p : 2 * p;
  *ib = s->pairing == ROVE_PAIRING_HALF ? p + s->half : 2 * p + 1;
}

/* x rotated in place by the angles th[half] (sign -1: inverse), double cos/sin. */
static void rotate(const gla_shape *s, double *x, const double *th, int sign) {
  for (int32_t p = 0; p < s->half; p++) {
    int32_t ia, ib;
    pair_dims(s, p, &ia, &ib);
    const double c = cos(th[p]), sn = sign * sin(th[p]), xa = x[ia], xb = x[ib];
    x[ia] = xa * c - xb * sn;
    x[ib] = xa * sn + xb * c;
  }
}

int rove_oracle_gla(const rove_gla_config *c, const rove_gla_args *a, double *out,
                    double *final_state) {
  gla_shape s;
  if (shape_of(c, a, &s) != 0 || !out) return -1;
  const int64_t K = s.K, V = s.V, T = a->seq_len;
  double *S = malloc(sizeof(double) * (size_t)(K * V + 2 * K + 2 * V));
  if (!S) return -1;
  double *q = S + K * V, *k = q + K, *v = k + K, *o = v + V;
  for (int64_t bh = 0; bh < (int64_t)a->batch * s.H; bh++) {
    const int64_t b = bh / s.H, h = bh % s.H;
    for (int64_t i = 0; i < K * V; i++)
      S[i] = a->initial_state ? a->initial_state[bh * K * V + i] : 0.0;
    for (int64_t t = 0; t < T; t++) {
      const int64_t row = (b * T + t) * s.H + h;
      const double *th = a->angles ? a->angles + row * s.half : NULL;
      for (int64_t i = 0; i < K; i++) q[i] = a->q[row * K + i], k[i] = a->k[row * K + i];
      for (int64_t j = 0; j < V; j++) v[j] = a->v[row * V + j];
      if (s.rq) rotate(&s, q, th, 1);
      if (s.rk) rotate(&s, k, th, 1);
      if (s.rv) rotate(&s, v, th, 1);
      for (int64_t i = 0; i < K; i++) {
        const double alpha = exp((double)a->g[row * K + i]);
        for (int64_t j = 0; j < V; j++) S[i * V + j] = alpha * S[i * V + j] + k[i] * v[j];
      }
      for (int64_t j = 0; j < V; j++) {
        double acc = 0.0;
        for (int64_t i = 0; i < K; i++) acc += q[i] * S[i * V + j];
        o[j] = s.scale * acc;
      }
      if (s.ro) rotate(&s, o, th, -1);
      memcpy(out + row * V, o, sizeof(double) * (size_t)V);
    }
    if (final_state) memcpy(final_state + bh * K * V, S, sizeof(double) * (size_t)(K * V));
  }
  free(S);
  return 0;
}

/* ---- gradients ------------------------------------------------------------------------ */

/* d angle of a pair (y_a, y_b) = R(t) (x_a, x_b) with gradient gy at y: gy_b y_a - gy_a y_b
 * (sign -1 for the inverse rotation of the output). */
static void pair_grads(const gla_shape *s, const double *gy, const double *y, double *out,
                       double sign) {
  for (int32_t p = 0; p < s->half; p++) {
    int32_t ia, ib;
    pair_dims(s, p, &ia, &ib);
    out[p] += sign * (gy[ib] * y[ia] - gy[ia] * y[ib]);
  }
}

int rove_oracle_gla_backward(const rove_gla_config *c, const rove_gla_args *a, const float *dout,
                             const float *d_final, double *dq, double *dk, double *dv, double *dg,
                             double *d_init, double *d_angles) {
  gla_shape s;
  if (shape_of(c, a, &s) != 0 || !dout || !dq || !dk || !dv || !dg) return -1;
  if (d_angles && !a->angles) return -1;
  const int64_t K = s.K, V = s.V, T = a->seq_len;
  double *St = malloc(sizeof(double) * (size_t)((T + 1) * K * V + K * V));
  double *rows = malloc(sizeof(double) * (size_t)(T * (2 * K + 3 * V) + 4 * (K + V)));
  if (!St || !rows) {
    free(St), free(rows);
    return -1;
  }
  double *Hs = St + (T + 1) * K * V; /* St[t + 1] = S_t, St[0] = the initial state */
  double *qr = rows, *kr = qr + T * K, *vr = kr + T * K, *dor = vr + T * V, *orr = dor + T * V;
  double *x = orr + T * V, *y = x + K + V;
  for (int64_t bh = 0; bh < (int64_t)a->batch * s.H; bh++) {
    const int64_t b = bh / s.H, h = bh % s.H;
    for (int64_t i = 0; i < K * V; i++)
      St[i] = a->initial_state ? a->initial_state[bh * K * V + i] : 0.0;
    for (int64_t t = 0; t < T; t++) { /* the forward, all states kept */
      const int64_t row = (b * T + t) * s.H + h;
      const double *th = a->angles ? a->angles + row * s.half : NULL;
      double *q = qr + t * K, *k = kr + t * K, *v = vr + t * V, *d = dor + t * V, *o = orr + t * V;
      for (int64_t i = 0; i < K; i++) q[i] = a->q[row * K + i], k[i] = a->k[row * K + i];
      for (int64_t j = 0; j < V; j++) v[j] = a->v[row * V + j], d[j] = dout[row * V + j];
      if (s.rq) rotate(&s, q, th, 1);
      if (s.rk) rotate(&s, k, th, 1);
      if (s.rv) rotate(&s, v, th, 1);
      if (s.ro) rotate(&s, d, th, 1); /* o = R^{-1} o~: do~ = R do */
      const double *S0 = St + t * K * V;
      double *S1 = St + (t + 1) * K * V;
      for (int64_t i = 0; i < K; i++) {
        const double alpha = exp((double)a->g[row * K + i]);
        for (int64_t j = 0; j < V; j++) S1[i * V + j] = alpha * S0[i * V + j] + k[i] * v[j];
      }
      for (int64_t j = 0; j < V; j++) {
        double acc = 0.0;
        for (int64_t i = 0; i < K; i++) acc += q[i] * S1[i * V + j];
        o[j] = s.scale * acc;
      }
      if (s.ro) rotate(&s, o, th, -1);
    }
    for (int64_t i = 0; i < K * V; i++) Hs[i] = d_final ? d_final[bh * K * V + i] : 0.0;
    for (int64_t t = T - 1; t >= 0; t--) {
      const int64_t row = (b * T + t) * s.H + h;
      const double *q = qr + t * K, *k = kr + t * K, *v = vr + t * V, *d = dor + t * V;
      const double *S0 = St + t * K * V, *S1 = St + (t + 1) * K * V;
      for (int64_t i = 0; i < K; i++)
        for (int64_t j = 0; j < V; j++) Hs[i * V + j] += s.scale * q[i] * d[j];
      double *gq = x, *gv = y, *gk = y + V; /* rotated-frame gradients */
      for (int64_t i = 0; i < K; i++) {
        double aq = 0.0, ak = 0.0, ag = 0.0;
        for (int64_t j = 0; j < V; j++) {
          aq += S1[i * V + j] * d[j];
          ak += Hs[i * V + j] * v[j];
          ag += S0[i * V + j] * Hs[i * V + j];
        }
        gq[i] = s.scale * aq, gk[i] = ak;
        dg[row * K + i] = exp((double)a->g[row * K + i]) * ag;
      }
      for (int64_t j = 0; j < V; j++) {
        double av = 0.0;
        for (int64_t i = 0; i < K; i++) av += Hs[i * V + j] * k[i];
        gv[j] = av;
      }
      if (d_angles) {
        double *da = d_angles + row * s.half;
        double ob[ROVE_MAX_HEAD_DIM], dob[ROVE_MAX_HEAD_DIM];
        for (int32_t p = 0; p < s.half; p++) da[p] = 0.0;
        if (s.rq) pair_grads(&s, gq, q, da, 1.0);
        if (s.rk) pair_grads(&s, gk, k, da, 1.0);
        if (s.rv) pair_grads(&s, gv, v, da, 1.0);
        if (s.ro) {
          for (int64_t j = 0; j < V; j++) ob[j] = orr[t * V + j], dob[j] = dout[row * V + j];
          pair_grads(&s, dob, ob, da, -1.0);
        }
      }
      const double *th = a->angles ? a->angles + row * s.half : NULL;
      if (s.rq) rotate(&s, gq, th, -1);
      if (s.rk) rotate(&s, gk, th, -1);
      if (s.rv) rotate(&s, gv, th, -1);
      for (int64_t i = 0; i < K; i++) dq[row * K + i] = gq[i], dk[row * K + i] = gk[i];
      for (int64_t j = 0; j < V; j++) dv[row * V + j] = gv[j];
      for (int64_t i = 0; i < K; i++) { /* H_{t-1} gets diag(e^{g_t}) H_t */
        const double alpha = exp((double)a->g[row * K + i]);
        for (int64_t j = 0; j < V; j++) Hs[i * V + j] *= alpha;
      }
    }
    if (d_init) memcpy(d_init + bh * K * V, Hs, sizeof(double) * (size_t)(K * V));
  }
  free(St), free(rows);
  return 0;
}

/* ---- the complex form ------------------------------------------------------------------ */

typedef struct {
  int32_t a, b; /* dims (b < 0: a real mode of dim a) */
  int32_t pair; /* angle index, -1 for none */
  int eps;      /* key modes: +1 / -1 (the two halves of Re), 0 real */
} mode;

/* Key modes (2 per rotated pair + the real dims) and value modes (1 per rotated value pair
 * + the real dims); returns their counts through nk, nv. */
static void build_modes(const gla_shape *s, mode *km, int32_t *nk, mode *vm, int32_t *nv) {
  const int32_t rk = s->rq ? s->half : 0, rvv = s->rv ? s->half : 0;
  int32_t m = 0;
  for (int32_t p = 0; p < rk; p++)
    for (int e = 1; e >= -1; e -= 2, m++) {
      pair_dims(s, p, &km[m].a, &km[m].b);
      km[m].pair = p, km[m].eps = e;
    }
  for (int32_t i = 0; i < s->K; i++) {
    int32_t rot = 0;
    for (int32_t p = 0; p < rk && !rot; p++) {
      int32_t ia, ib;
      pair_dims(s, p, &ia, &ib);
      rot = i == ia || i == ib;
    }
    if (!rot) km[m++] = (mode){i, -1, -1, 0};
  }
  *nk = m;
  m = 0;
  for (int32_t p = 0; p < rvv; p++, m++) {
    pair_dims(s, p, &vm[m].a, &vm[m].b);
    vm[m].pair = p, vm[m].eps = 0;
  }
  for (int32_t j = (s->rv ? s->r : 0); j < s->V; j++) vm[m++] = (mode){j, -1, -1, 0};
  *nv = m;
}

/* Coefficients of key mode m for a key-dim row x (q: as is; k: conj / 2 for the pairs). */
static double complex q_coef(const mode *m, const float *x) {
  if (m->b < 0) return x[m->a];
  const double complex z = x[m->a] + I * (double)x[m->b];
  return m->eps > 0 ? z : conj(z);
}
static double complex k_coef(const mode *m, const float *x) {
  if (m->b < 0) return x[m->a];
  const double complex z = x[m->a] + I * (double)x[m->b];
  return m->eps > 0 ? conj(z) / 2 : z / 2;
}
static double complex v_coef(const mode *n, const double *x) {
  return n->b < 0 ? x[n->a] : x[n->a] + I * x[n->b];
}

/* Initial complex state of modes (m, n) from the real state S [K][V] at angles th0. */
static double complex initial(const mode *m, const mode *n, const double *S, int64_t V,
                              const double *th0) {
  double sa[2], sb[2];
  for (int i = 0; i < 2; i++) {
    const int32_t j = i ? n->b : n->a;
    sa[i] = j >= 0 ? S[m->a * V + j] : 0.0;
    sb[i] = j >= 0 && m->b >= 0 ? S[m->b * V + j] : 0.0;
  }
  const double complex va = sa[0] + I * sa[1], vb = sb[0] + I * sb[1];
  const double ph_v = n->pair >= 0 ? -th0[n->pair] : 0.0;
  if (m->b < 0) return cexp(I * ph_v) * va;
  const double ph_k = m->eps * th0[m->pair];
  return cexp(I * (ph_k + ph_v)) * (m->eps > 0 ? va - I * vb : va + I * vb) / 2;
}

/* Nonzero when g is equal within every rotated key pair of every row. */
static int pair_decays_equal(const gla_shape *s, const rove_gla_args *a) {
  if (!s->rq) return 1;
  const int64_t rows = (int64_t)a->batch * a->seq_len * s->H;
  for (int64_t row = 0; row < rows; row++)
    for (int32_t p = 0; p < s->half; p++) {
      int32_t ia, ib;
      pair_dims(s, p, &ia, &ib);
      if (a->g[row * s->K + ia] != a->g[row * s->K + ib]) return 0;
    }
  return 1;
}

/* One token of one (batch, head): transition and input of every mode pair, then out. */
static void complex_step(const gla_shape *s, const rove_gla_args *a, int64_t row, const mode *km,
                         int32_t nk, const mode *vm, int32_t nv, double complex *h,
                         double complex *qc, double *vrow, const double *th, const double *th0,
                         double *out) {
  for (int32_t j = 0; j < s->V; j++) vrow[j] = a->v[row * s->V + j];
  for (int32_t m = 0; m < nk; m++) {
    const double alpha = exp((double)a->g[row * s->K + km[m].a]);
    const double ph_k = km[m].pair >= 0 ? km[m].eps * (th[km[m].pair] - th0[km[m].pair]) : 0.0;
    const double complex kc = k_coef(&km[m], a->k + row * s->K);
    qc[m] = q_coef(&km[m], a->q + row * s->K);
    for (int32_t n = 0; n < nv; n++) {
      const double ph_v = vm[n].pair >= 0 ? -(th[vm[n].pair] - th0[vm[n].pair]) : 0.0;
      double complex *x = h + (int64_t)m * nv + n;
      *x = alpha * cexp(I * (ph_k + ph_v)) * *x + kc * v_coef(&vm[n], vrow);
    }
  }
  for (int32_t n = 0; n < nv; n++) {
    double complex y = 0;
    for (int32_t m = 0; m < nk; m++) y += qc[m] * h[(int64_t)m * nv + n];
    y *= s->scale;
    out[row * s->V + vm[n].a] = creal(y);
    if (vm[n].b >= 0) out[row * s->V + vm[n].b] = cimag(y);
  }
}

int rove_oracle_gla_complex(const rove_gla_config *c, const rove_gla_args *a,
                            const double *start_angles, double *out) {
  gla_shape s;
  if (shape_of(c, a, &s) != 0 || !out || s.rq != s.rk || s.rv != s.ro) return -1;
  if (!pair_decays_equal(&s, a)) return -1;
  const int64_t K = s.K, V = s.V, T = a->seq_len, half = s.half;
  mode *km = malloc(sizeof(mode) * (size_t)(2 * K + V));
  double complex *h = malloc(sizeof(double complex) * (size_t)(2 * K * V + 2 * K));
  double *S0 = malloc(sizeof(double) * (size_t)(K * V + V + 2 * half + 2));
  if (!km || !h || !S0) {
    free(km), free(h), free(S0);
    return -1;
  }
  mode *vm = km + 2 * K;
  double complex *qc = h + 2 * K * V;
  double *vrow = S0 + K * V, *th0 = vrow + V, *zero = th0 + half + 1;
  memset(zero, 0, sizeof(double) * (size_t)(half + 1));
  int32_t nk, nv;
  build_modes(&s, km, &nk, vm, &nv);
  for (int64_t bh = 0; bh < (int64_t)a->batch * s.H; bh++) {
    const int64_t b = bh / s.H, h_ = bh % s.H;
    for (int64_t p = 0; p < half; p++) th0[p] = start_angles ? start_angles[bh * half + p] : 0.0;
    for (int64_t i = 0; i < K * V; i++)
      S0[i] = a->initial_state ? a->initial_state[bh * K * V + i] : 0.0;
    for (int32_t m = 0; m < nk; m++)
      for (int32_t n = 0; n < nv; n++) h[(int64_t)m * nv + n] = initial(&km[m], &vm[n], S0, V, th0);
    for (int64_t t = 0; t < T; t++) {
      const int64_t row = (b * T + t) * s.H + h_;
      const double *th = a->angles ? a->angles + row * half : zero;
      complex_step(&s, a, row, km, nk, vm, nv, h, qc, vrow, th, th0, out);
      memcpy(th0, th, sizeof(double) * (size_t)half);
    }
  }
  free(km), free(h), free(S0);
  return 0;
}
