# SPDX-License-Identifier: MIT
"""RoVE vs RoPE attention on NumPy arrays with librove, checked against a float64
reference written from the formula y_i = sum_j a_ij R_{p_j - P_i} v_j.

    python examples/rove_numpy.py
"""
import time

import numpy as np

import rove

rng = np.random.default_rng(0)
B, N, H, D = 1, 512, 12, 64
q, k, v = (rng.standard_normal((B, N, H, D), dtype=np.float32) for _ in range(3))


def reference(rotate_values):
    """float64, causal; RoVE through the relative form R_{p_j - P_i} v_j."""
    w, _ = rove.inv_freq(rove.RopeConfig(), D)
    pos = np.arange(N, dtype=np.float64)

    def rot(x, ang):  # HALF pairing: (x[k], x[k + D/2])
        c, s = np.cos(ang), np.sin(ang)
        a, b = x[..., : D // 2], x[..., D // 2:]
        return np.concatenate([a * c - b * s, a * s + b * c], -1)

    ang = (pos[:, None] * w)[:, None, :]  # [N, 1, D/2]
    qr, kr = rot(q[0].astype(np.float64), ang), rot(k[0].astype(np.float64), ang)
    s = np.einsum("ihd,jhd->hij", qr, kr) / np.sqrt(D)
    s = np.where(np.tril(np.ones((N, N), bool)), s, -np.inf)
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    if not rotate_values:
        return np.einsum("hij,jhd->ihd", a, v[0])
    y = np.zeros((N, H, D))
    for i in range(N):  # y_i = sum_j a_ij R_{p_j - P_i} v_j
        rel = ((pos[: i + 1] - pos[i])[:, None] * w)[:, None, :]
        y[i] = np.einsum("hj,jhd->hd", a[:, i, : i + 1], rot(v[0, : i + 1].astype(np.float64), rel))
    return y


print(f"librove {rove.__version__} on {rove.info()['best_isa']}, "
      f"{rove.info()['default_threads']} threads")
for mode in ("rove", "rope"):
    rove.attention(q, k, v, rotate=mode)  # first call: creates and caches the plan
    t0 = time.perf_counter()
    out = rove.attention(q, k, v, rotate=mode)  # [batch, seq, heads, dim], causal
    ms = (time.perf_counter() - t0) * 1e3
    ref = reference(mode == "rove")
    err = np.max(np.abs(out[0] - ref)) / np.max(np.abs(ref))
    print(f"{mode}: {ms:6.2f} ms, max error vs float64 reference {err:.2e} (relative to max |out|)")
