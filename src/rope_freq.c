/* SPDX-License-Identifier: MIT */
/* Rotary inverse frequencies and the attention factor m (docs/DESIGN.md §1).
 *
 * Everything is evaluated in double. The scalings follow HuggingFace transformers'
 * modeling_rope_utils.py (default, linear, static NTK-aware, yarn, llama3, longrope), with
 * the operations written in the same order so that the results agree to the last few ulps
 * with the same formulas evaluated in Python floats (the attention factors bit for bit:
 * transformers computes them in Python floats, i.e. in double, with the same libm). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "rope.h"
#include "rove.h"

#define ROPE_PI 3.14159265358979323846
/* Bounds of rove.h: m <= ROPE_M_MAX, and w_k * 2^31 finite (every int32 position has a
 * finite angle p * w_k). */
#define ROPE_M_MAX 1000.0
#define ROPE_POS_SPAN 2147483648.0

void rove_rope_config_init(rove_rope_config *c) {
  if (!c) return;
  c->rotary_dim = 0;
  c->pairing = ROVE_PAIRING_HALF;
  c->theta = 10000.0;
  c->scaling = ROVE_SCALING_NONE;
  c->factor = 1.0;
  c->original_max_position = 0;
  c->beta_fast = 32.0;
  c->beta_slow = 1.0;
  c->attention_factor = 0.0;
  c->truncate = 1;
  c->low_freq_factor = 1.0;
  c->high_freq_factor = 4.0;
  c->freq_factors = NULL;
  c->placement = ROVE_ROTARY_FIRST;
  c->mscale = 0.0;
  c->mscale_all_dim = 0.0;
  c->long_freq_factors = NULL;
  c->max_position = 0;
}

double rove_rope_mscale(double s, double mscale) {
  if (!isfinite(s) || !isfinite(mscale)) return NAN;
  if (s <= 1.0) return 1.0;
  return 0.1 * mscale * log(s) + 1.0; /* transformers' get_mscale, same order */
}

static int finite_pos(double x) { return isfinite(x) && x > 0.0; }

static int factors_ok(const double *f, int32_t half) {
  for (int32_t k = 0; k < half; k++)
    if (!finite_pos(f[k])) return 0;
  return 1;
}

/* Static NTK-aware base: theta' = theta * s^(r/(r-2)) (needs r > 2). */
static double ntk_theta(const rove_rope_config *c, int32_t r) {
  return c->theta * pow(c->factor, (double)r / (double)(r - 2));
}

/* head_dim and rotary_dim; writes the resolved rotary dim r. */
static rove_status validate_dims(const rove_rope_config *c, int32_t head_dim, int32_t *r) {
  if (head_dim < 2 || head_dim % 2 != 0) return ROVE_ERR_INVALID_ARGUMENT;
  if (head_dim > ROVE_MAX_HEAD_DIM) return ROVE_ERR_UNSUPPORTED;
  int32_t rd = c->rotary_dim == 0 ? head_dim : c->rotary_dim;
  if (rd < 2 || rd > head_dim || rd % 2 != 0) return ROVE_ERR_INVALID_ARGUMENT;
  *r = rd;
  return ROVE_OK;
}

/* rove.h's table: every field the scaling does not read holds its default. Compared with
 * ==, so a NaN in an unread field is refused too. */
static int unread_fields_default(const rove_rope_config *c) {
  rove_rope_config d;
  rove_rope_config_init(&d);
  const rove_scaling s = c->scaling;
  const int yarn = s == ROVE_SCALING_YARN, llama3 = s == ROVE_SCALING_LLAMA3;
  const int longrope = s == ROVE_SCALING_LONGROPE;
  if (s == ROVE_SCALING_NONE && !(c->factor == d.factor)) return 0;
  if (!yarn && !llama3 && !longrope && c->original_max_position != d.original_max_position)
    return 0;
  if (!yarn && (!(c->beta_fast == d.beta_fast) || !(c->beta_slow == d.beta_slow) ||
                c->truncate != d.truncate || !(c->mscale == d.mscale) ||
                !(c->mscale_all_dim == d.mscale_all_dim)))
    return 0;
  if (!yarn && !longrope && !(c->attention_factor == d.attention_factor)) return 0;
  if (!llama3 && (!(c->low_freq_factor == d.low_freq_factor) ||
                  !(c->high_freq_factor == d.high_freq_factor)))
    return 0;
  if (!longrope && (c->long_freq_factors != d.long_freq_factors ||
                    c->max_position != d.max_position))
    return 0;
  return 1;
}

/* The values of the fields the scaling reads (r already resolved, unread fields checked). */
static rove_status validate_scaling(const rove_rope_config *c, int32_t r) {
  const rove_scaling s = c->scaling;
  if (s != ROVE_SCALING_NONE && !finite_pos(c->factor)) return ROVE_ERR_INVALID_ARGUMENT;
  if ((s == ROVE_SCALING_YARN || s == ROVE_SCALING_LLAMA3 || s == ROVE_SCALING_LONGROPE) &&
      c->original_max_position <= 0)
    return ROVE_ERR_INVALID_ARGUMENT;
  /* attention_factor (YARN, LONGROPE; default 0 elsewhere): 0 = derive, or (0, 1000]. */
  if (!(c->attention_factor == 0.0 ||
        (c->attention_factor > 0.0 && c->attention_factor <= ROPE_M_MAX)))
    return ROVE_ERR_INVALID_ARGUMENT;
  if (s == ROVE_SCALING_YARN) {
    if (!finite_pos(c->beta_fast) || !finite_pos(c->beta_slow)) return ROVE_ERR_INVALID_ARGUMENT;
    if (c->truncate != 0 && c->truncate != 1) return ROVE_ERR_INVALID_ARGUMENT;
    /* DeepSeek's mscale pair: both unset (0) or both finite and > 0. */
    const int unset = c->mscale == 0.0 && c->mscale_all_dim == 0.0;
    if (!unset && !(finite_pos(c->mscale) && finite_pos(c->mscale_all_dim)))
      return ROVE_ERR_INVALID_ARGUMENT;
  }
  if (s == ROVE_SCALING_NTK) {
    if (r <= 2) return ROVE_ERR_INVALID_ARGUMENT; /* exponent r/(r-2) */
    if (!finite_pos(ntk_theta(c, r))) return ROVE_ERR_INVALID_ARGUMENT;
  }
  if (s == ROVE_SCALING_LLAMA3) {
    if (!finite_pos(c->low_freq_factor) || !finite_pos(c->high_freq_factor))
      return ROVE_ERR_INVALID_ARGUMENT;
  }
  if (s == ROVE_SCALING_LONGROPE) {
    if (!c->freq_factors || c->max_position < 0) return ROVE_ERR_INVALID_ARGUMENT;
    if (c->max_position > c->original_max_position && !c->long_freq_factors)
      return ROVE_ERR_INVALID_ARGUMENT;
  }
  if (c->freq_factors && !factors_ok(c->freq_factors, r / 2)) return ROVE_ERR_INVALID_ARGUMENT;
  if (c->long_freq_factors && !factors_ok(c->long_freq_factors, r / 2))
    return ROVE_ERR_INVALID_ARGUMENT;
  return ROVE_OK;
}

rove_status rove_rope_validate(const rove_rope_config *c, int32_t head_dim,
                               int32_t *rotary_dim) {
  if (!c) return ROVE_ERR_INVALID_ARGUMENT;
  int32_t r = 0;
  rove_status st = validate_dims(c, head_dim, &r);
  if (st != ROVE_OK) return st;
  if (c->pairing != ROVE_PAIRING_HALF && c->pairing != ROVE_PAIRING_INTERLEAVED)
    return ROVE_ERR_INVALID_ARGUMENT;
  if (c->placement != ROVE_ROTARY_FIRST && c->placement != ROVE_ROTARY_LAST)
    return ROVE_ERR_INVALID_ARGUMENT;
  if (!isfinite(c->theta) || !(c->theta > 1.0)) return ROVE_ERR_INVALID_ARGUMENT;
  const rove_scaling s = c->scaling;
  if (s != ROVE_SCALING_NONE && s != ROVE_SCALING_LINEAR && s != ROVE_SCALING_NTK &&
      s != ROVE_SCALING_YARN && s != ROVE_SCALING_LLAMA3 && s != ROVE_SCALING_LONGROPE)
    return ROVE_ERR_INVALID_ARGUMENT;
  if (!unread_fields_default(c)) return ROVE_ERR_INVALID_ARGUMENT;
  st = validate_scaling(c, r);
  if (st != ROVE_OK) return st;
  if (rotary_dim) *rotary_dim = r;
  return ROVE_OK;
}

/* w_k = theta^(-2k/r), k = 0 .. r/2-1. */
static void base_freqs(double theta, int32_t r, double *w) {
  for (int32_t k = 0; k < r / 2; k++) w[k] = pow(theta, -(2.0 * k) / r);
}

/* YaRN correction dim: the (fractional) dim index whose wavelength makes n full turns
 * over L0 positions: corr(n) = r * ln(L0 / (2 pi n)) / (2 ln theta). */
static double yarn_corr(double n, int32_t r, double theta, int32_t L0) {
  return ((double)r * log((double)L0 / (n * 2.0 * ROPE_PI))) / (2.0 * log(theta));
}

/* YaRN "NTK-by-parts": dims whose wavelength is short against L0 (k < low) keep their
 * frequency (extrapolation), long ones (k > high) are interpolated (w/s), with a linear
 * ramp in between. As transformers: low = max(floor(corr(beta_fast)), 0) and
 * high = min(ceil(corr(beta_slow)), r-1) (no floor/ceil without truncate); +0.001 to
 * high when both are equal. */
static void apply_yarn(const rove_rope_config *c, int32_t r, double *w, double *m) {
  const double s = c->factor;
  double low = yarn_corr(c->beta_fast, r, c->theta, c->original_max_position);
  double high = yarn_corr(c->beta_slow, r, c->theta, c->original_max_position);
  if (c->truncate) {
    low = floor(low);
    high = ceil(high);
  }
  if (low < 0.0) low = 0.0;
  if (high > (double)(r - 1)) high = (double)(r - 1);
  if (low == high) high += 0.001; /* avoid a zero-width ramp */
  for (int32_t k = 0; k < r / 2; k++) {
    double ramp = ((double)k - low) / (high - low);
    ramp = ramp < 0.0 ? 0.0 : (ramp > 1.0 ? 1.0 : ramp);
    const double extrap = 1.0 - ramp; /* transformers' inv_freq_extrapolation_factor */
    const double interp_freq = w[k] / s, extrap_freq = w[k];
    w[k] = interp_freq * (1.0 - extrap) + extrap_freq * extrap;
  }
  /* Attention (magnitude) factor, transformers' rule: given, else
   * get_mscale(s, mscale) / get_mscale(s, mscale_all_dim) with both set (DeepSeek), else
   * get_mscale(s, 1) = 0.1 ln s + 1 for s > 1, 1 otherwise. */
  if (c->attention_factor > 0.0)
    *m = c->attention_factor;
  else if (c->mscale != 0.0 && c->mscale_all_dim != 0.0)
    *m = rove_rope_mscale(s, c->mscale) / rove_rope_mscale(s, c->mscale_all_dim);
  else
    *m = rove_rope_mscale(s, 1.0);
}

/* LongRoPE (transformers' _compute_longrope_parameters): the frequencies are the base ones
 * divided by one factor set -- the long set when the plan serves positions beyond L0
 * (max_position > L0), the short set otherwise -- and the attention factor is given, or
 * sqrt(1 + ln s / ln L0) for s > 1, else 1. Returns the chosen set. */
static const double *longrope_factors(const rove_rope_config *c, double *m) {
  const double s = c->factor, L0 = (double)c->original_max_position;
  if (c->attention_factor > 0.0)
    *m = c->attention_factor;
  else
    *m = s <= 1.0 ? 1.0 : sqrt(1.0 + log(s) / log(L0)); /* L0 = 1: inf, refused below */
  return c->max_position > c->original_max_position ? c->long_freq_factors : c->freq_factors;
}

/* Llama 3.1: wavelength lambda_k = 2 pi / w_k against two bands of L0:
 * lambda > L0/low_freq_factor           -> w / s         (low frequencies: interpolate)
 * lambda < L0/high_freq_factor          -> w             (high frequencies: keep)
 * otherwise, with g = (L0/lambda - low) / (high - low):  (1 - g) w / s + g w.
 * Equal factors (Llama-4 Scout: 1 and 1) leave no band between the two: a wavelength of
 * exactly L0/low keeps w (transformers' g is 0/0 there, a NaN frequency). */
static void apply_llama3(const rove_rope_config *c, double *w, int32_t half) {
  const double s = c->factor, L0 = (double)c->original_max_position;
  const double lo = c->low_freq_factor, hi = c->high_freq_factor;
  const double low_wavelen = L0 / lo, high_wavelen = L0 / hi;
  for (int32_t k = 0; k < half; k++) {
    const double wavelen = 2.0 * ROPE_PI / w[k];
    if (wavelen > low_wavelen) {
      w[k] = w[k] / s;
    } else if (!(wavelen < high_wavelen) && hi != lo) {
      const double g = (L0 / wavelen - lo) / (hi - lo);
      w[k] = (1.0 - g) * w[k] / s + g * w[k];
    }
  }
}

rove_status rove_rope_inv_freq(const rove_rope_config *c, int32_t head_dim, double *inv_freq,
                               double *attention_factor) {
  if (!c || !inv_freq) return ROVE_ERR_INVALID_ARGUMENT;
  int32_t r = 0;
  rove_status st = rove_rope_validate(c, head_dim, &r);
  if (st != ROVE_OK) return st;
  const int32_t half = r / 2;
  double w[ROVE_MAX_HEAD_DIM / 2]; /* outputs stay untouched until all is well */
  double m = 1.0;
  const double *divisors = c->freq_factors; /* per-pair divisors after the scaling */
  base_freqs(c->scaling == ROVE_SCALING_NTK ? ntk_theta(c, r) : c->theta, r, w);
  switch (c->scaling) {
    case ROVE_SCALING_LINEAR: /* position interpolation */
      for (int32_t k = 0; k < half; k++) w[k] = w[k] / c->factor;
      break;
    case ROVE_SCALING_YARN:
      apply_yarn(c, r, w, &m);
      break;
    case ROVE_SCALING_LLAMA3:
      apply_llama3(c, w, half);
      break;
    case ROVE_SCALING_LONGROPE:
      divisors = longrope_factors(c, &m);
      break;
    default: /* NONE; NTK is all in the base */
      break;
  }
  if (divisors)
    for (int32_t k = 0; k < half; k++) w[k] = w[k] / divisors[k];
  /* Extreme (yet finite) parameters can overflow a frequency, or make the angle p * w_k of
   * a large int32 position infinite (a NaN cos/sin later), or derive an m that overflows
   * the logits: refuse them rather than compute garbage. !(x <= max) also catches NaN. */
  for (int32_t k = 0; k < half; k++)
    if (!isfinite(w[k] * ROPE_POS_SPAN)) return ROVE_ERR_INVALID_ARGUMENT;
  if (!(m > 0.0 && m <= ROPE_M_MAX)) return ROVE_ERR_INVALID_ARGUMENT;
  for (int32_t k = 0; k < half; k++) inv_freq[k] = w[k];
  if (attention_factor) *attention_factor = m;
  return ROVE_OK;
}
