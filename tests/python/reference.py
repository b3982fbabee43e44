# SPDX-License-Identifier: MIT
"""Float64 NumPy references written from docs/DESIGN.md §1, sharing no code with librove or
the rove package (except that inv_freq is taken as an input where noted)."""
import math

import numpy as np

Q, K, V, O = 1, 2, 4, 8


# ---- frequencies (docs/DESIGN.md §1 "Frequencies", as transformers computes them) ----------
def _get_mscale(s, x=1.0):
    # transformers' get_mscale
    return 1.0 if s <= 1 else 0.1 * x * math.log(s) + 1.0


def ref_inv_freq(d, r=0, theta=10000.0, scaling="none", factor=1.0, L0=0, beta_fast=32.0,
                 beta_slow=1.0, attention_factor=0.0, truncate=True, low=1.0, high=4.0,
                 freq_factors=None, mscale=0.0, mscale_all_dim=0.0, long_freq_factors=None,
                 max_position=0, placement="first"):
    """(w [r/2], m) as transformers' rope init functions define them, in float64. placement
    does not change them (it only says which dims rotate)."""
    r = r or d
    k = np.arange(r // 2, dtype=np.float64)
    base = theta * factor ** (r / (r - 2)) if scaling == "ntk" else theta
    w = base ** (-2.0 * k / r)
    m = 1.0
    if scaling == "linear":
        w = w / factor
    elif scaling == "yarn":
        def corr(n):
            return r * math.log(L0 / (n * 2 * math.pi)) / (2 * math.log(theta))
        lo, hi = corr(beta_fast), corr(beta_slow)
        if truncate:
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, r - 1)
        if lo == hi:
            hi += 0.001
        ramp = np.clip((k - lo) / (hi - lo), 0, 1)
        # transformers: inv_freq_extrapolation_factor = 1 - ramp
        w = (w / factor) * ramp + w * (1 - ramp)
        if attention_factor:
            m = attention_factor
        elif mscale and mscale_all_dim:  # DeepSeek
            m = _get_mscale(factor, mscale) / _get_mscale(factor, mscale_all_dim)
        else:
            m = _get_mscale(factor)
    elif scaling == "longrope":  # _compute_longrope_parameters: 1 / (ext * base^(2k/r))
        ext = long_freq_factors if max_position > L0 else freq_factors
        w = 1.0 / (np.asarray(ext, dtype=np.float64) * theta ** (2.0 * k / r))
        m = attention_factor if attention_factor else (
            1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(L0)))
        return w, m
    elif scaling == "llama3":
        low_wl, high_wl = L0 / low, L0 / high
        wl = 2 * math.pi / w
        smooth = (L0 / wl - low) / (high - low)
        mid = (1 - smooth) * w / factor + smooth * w
        w = np.where(wl > low_wl, w / factor, np.where(wl < high_wl, w, mid))
    if freq_factors is not None:
        w = w / np.asarray(freq_factors, dtype=np.float64)
    return w, m


# ---- rotations ---------------------------------------------------------------------------
def ref_rotate(x, angles, r, pairing="half", sign=1):
    """Rotate x [..., d] by angles [..., r/2] (broadcasting over leading axes)."""
    x = np.array(x, dtype=np.float64, copy=True)
    c, s = np.cos(angles), sign * np.sin(angles)
    if pairing == "half":
        a, b = x[..., : r // 2].copy(), x[..., r // 2: r].copy()
        x[..., : r // 2], x[..., r // 2: r] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., 0:r:2].copy(), x[..., 1:r:2].copy()
        x[..., 0:r:2], x[..., 1:r:2] = a * c - b * s, a * s + b * c
    return x


def ref_attention(q, k, v, *, w, m=1.0, rotate=Q | K | V | O, causal=True, window=0,
                  softcap=0.0, scale=None, q_pos=None, kv_pos=None, pairing="half", r=None,
                  q_angles=None, kv_angles=None, sinks=None):
    """Attention of docs/DESIGN.md §1 in float64. q [B, Lq, H, d], k/v [B, Lk, Hk, d] (bshd);
    w the inverse frequencies [r/2]; positions [B, L] or None (defaults); angles
    [B, L, Hk, r/2] or None; sinks [H] or None (attention sinks: each softmax row gains
    exp(sinks[h]), a key of zero value). Returns (out [B, Lq, H, d], lse [B, H, Lq])."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    B, Lq, H, d = q.shape
    Lk, Hk = k.shape[1], k.shape[2]
    g = H // Hk
    r = r or d
    scale = 1 / math.sqrt(d) if scale is None else scale
    P = np.broadcast_to(np.arange(Lk - Lq, Lk) if q_pos is None else q_pos, (B, Lq)).astype(np.float64)
    p = np.broadcast_to(np.arange(Lk) if kv_pos is None else kv_pos, (B, Lk)).astype(np.float64)
    # angles per token and KV head: [B, L, Hk, r/2]
    qa = (P[:, :, None, None] * w) * np.ones((1, 1, Hk, 1)) if q_angles is None else q_angles
    ka = (p[:, :, None, None] * w) * np.ones((1, 1, Hk, 1)) if kv_angles is None else kv_angles
    qa, ka = np.repeat(qa, g, axis=2), np.repeat(ka, g, axis=2)  # per query head
    kr, vr = np.repeat(k, g, axis=2), np.repeat(v, g, axis=2)

    def scaled(x):
        x = x.copy()
        x[..., :r] *= m
        return x
    qt = scaled(ref_rotate(q, qa, r, pairing)) if rotate & Q else q
    kt = scaled(ref_rotate(kr, ka, r, pairing)) if rotate & K else kr
    vt = ref_rotate(vr, ka, r, pairing) if rotate & V else vr
    s = np.einsum("bihd,bjhd->bhij", qt, kt) * scale
    if softcap:
        s = softcap * np.tanh(s / softcap)
    diff = P[:, None, :, None] - p[:, None, None, :]  # [B, 1, Lq, Lk]
    vis = np.ones_like(diff, dtype=bool)
    if causal:
        vis &= diff >= 0
    if window:
        vis &= (diff if causal else np.abs(diff)) < window
    vis = np.broadcast_to(vis, s.shape)
    s = np.where(vis, s, -np.inf)
    mx = np.max(s, axis=-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0 if sinks is None else -np.inf)
    if sinks is not None:
        sk = np.asarray(sinks, np.float64)[None, :, None, None]
        mx = np.maximum(mx, sk)
    e = np.where(vis, np.exp(s - mx), 0.0)
    tot = e.sum(-1, keepdims=True)
    if sinks is not None:
        tot = tot + np.exp(sk - mx)
    a = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    y = np.einsum("bhij,bjhd->bihd", a, vt)
    if rotate & O:
        y = ref_rotate(y, qa, r, pairing, sign=-1)
    with np.errstate(divide="ignore"):
        lse = np.where(tot[..., 0] > 0, np.log(tot[..., 0]) + mx[..., 0], -np.inf)
    return y, lse


def rel_err(got, want):
    """max |got - want| / max |want| (docs/DESIGN.md §4's tolerance measure)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


# ---- rotations in torch ops (the autograd tests differentiate through them) -------------
def torch_rotate(x, ang, r, pairing, sign=1.0):
    """x [..., d] rotated by ang [..., r/2] in torch ops (the first r dims; "half": pairs
    (i, i + r/2), "interleaved": (2i, 2i + 1)); sign -1 rotates back."""
    import torch
    c, s = torch.cos(ang), sign * torch.sin(ang)
    if pairing == "half":
        a, b, rest = x[..., : r // 2], x[..., r // 2: r], x[..., r:]
        return torch.cat([a * c - b * s, a * s + b * c, rest], dim=-1)
    a, b = x[..., 0:r:2], x[..., 1:r:2]
    y = torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)
    return torch.cat([y, x[..., r:]], dim=-1)
