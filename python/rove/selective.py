# SPDX-License-Identifier: MIT
"""Selective RoPE: temperatures, angle accumulation with a carry, the phase network."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from . import _lib, _params, _tensor


def selective_temperatures(n_pairs: int) -> np.ndarray:
    """temp_k = 1 / 500000^(2k/r) (float64 [n_pairs]), bit for bit rove_rope_inv_freq's
    frequencies for theta 500000."""
    n = _params.positive_int("n_pairs", n_pairs)
    t = np.empty(n, dtype=np.float64)
    _lib.check("rove_selective_temperatures",
               _lib.lib.rove_selective_temperatures(n, t.__array_interface__["data"][0]))
    return t


def _batched(x, name, dtype, ndim4=True):
    """(contiguous obj, ptr, 4-D shape, was 3-D)."""
    v = _tensor.view(x, name, dtype)
    if len(v.shape) not in (3, 4):
        raise ValueError(f"{name} must be 4-D [batch, seq, heads, n] (or 3-D), got {v.shape}")
    obj, ptr = _tensor.contiguous(x, name, dtype)
    shape = tuple(v.shape) if len(v.shape) == 4 else (1,) + tuple(v.shape)
    return obj, ptr, shape, len(v.shape) == 3


def selective_angles(phi, temp=None, carry=None):
    """(angles, carry_out): for each row b, head h, pair k, sequentially over t,
    c += phi[b, t, h, k] (double); angles[b, t, h, k] = temp[k] * c, from
    c = carry[b, h, k] (0 when carry is None).

    phi: float32 [batch, seq, heads, n_pairs] (3-D without batch), finite. temp: None
    (selective_temperatures) or float64 [n_pairs]. carry: None or float64 [batch, heads,
    n_pairs]. Returns float64 angles shaped like phi and the carry for the next chunk;
    chunks that pass the carry on give angles bit-identical to one call.
    """
    p, pp, (B, T, H, P), flat = _batched(phi, "phi", np.float32)
    tmp = tp = None
    if temp is not None:
        tmp, tp = _tensor.contiguous(temp, "temp", np.float64, (P,))
    cshape = (H, P) if flat else (B, H, P)
    cin = cp = None
    if carry is not None:
        cin, cp = _tensor.contiguous(carry, "carry", np.float64, cshape)
    arr = p.numpy() if _tensor.is_torch(p) else p
    if not np.all(np.isfinite(arr)):
        raise ValueError("phi has non-finite values")
    torch_kind = _tensor.is_torch(p)
    angles, ap = _tensor.empty(torch_kind, (B, T, H, P), np.float64)
    cout, cop = _tensor.empty(torch_kind, cshape, np.float64)
    st = _lib.lib.rove_selective_angles(B, T, H, P, pp, tp, cp, cop, ap)
    del tmp, cin
    _lib.check("rove_selective_angles", st)
    return (angles[0] if flat else angles), cout


def _weight(x, name, shape, required=True):
    if x is None:
        if required:
            raise ValueError(f"SelectivePhaseWeights.{name} is required")
        return None
    v = _tensor.view(x, name)  # float32 only
    if tuple(v.shape) != shape:
        raise ValueError(f"SelectivePhaseWeights.{name} has shape {tuple(v.shape)}, "
                         f"expected {shape}")
    a = np.array(x.detach().numpy() if v.torch else x, dtype=np.float32, order="C", copy=True)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"SelectivePhaseWeights.{name} has non-finite values")
    return a


@dataclass(frozen=True, init=False)
class SelectivePhaseWeights:
    """Weights of the reference Selective RoPE phase network (rove_selective_phase_weights):
    w [H, n_pairs, in_dim], conv_w [H, n_pairs, 4] and the optional gain [H, n_pairs],
    conv_b [H, n_pairs], gate_w [H, in_dim], gate_b [H] (gate_w and gate_b both None: no
    gate). float32; copied at construction (later changes to the originals are not seen).
    """
    n_heads: int
    in_dim: int
    n_pairs: int
    w: Any
    conv_w: Any
    gain: Optional[Any]
    conv_b: Optional[Any]
    gate_w: Optional[Any]
    gate_b: Optional[Any]

    def __init__(self, w, conv_w, gain=None, conv_b=None, gate_w=None, gate_b=None):
        shape = tuple(_tensor.view(w, "w").shape)
        if len(shape) != 3:
            raise ValueError(f"SelectivePhaseWeights.w must be [H, n_pairs, in_dim], got {shape}")
        H, P, D = shape
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen)
        put("n_heads", H), put("n_pairs", P), put("in_dim", D)
        put("w", _weight(w, "w", (H, P, D)))
        put("conv_w", _weight(conv_w, "conv_w", (H, P, 4)))
        put("gain", _weight(gain, "gain", (H, P), False))
        put("conv_b", _weight(conv_b, "conv_b", (H, P), False))
        put("gate_w", _weight(gate_w, "gate_w", (H, D), False))
        put("gate_b", _weight(gate_b, "gate_b", (H,), False))

    def new_state(self, batch: int) -> np.ndarray:
        """A fresh conv state, zeros float32 [batch, H, n_pairs, 3]."""
        return np.zeros((_params.positive_int("batch", batch), self.n_heads, self.n_pairs, 3),
                        dtype=np.float32)

    def _c(self):
        c = _lib.SelectivePhaseWeights()
        c.n_heads, c.in_dim, c.n_pairs = self.n_heads, self.in_dim, self.n_pairs
        for name in ("w", "gain", "conv_w", "conv_b", "gate_w", "gate_b"):
            a = getattr(self, name)
            setattr(c, name, None if a is None else a.__array_interface__["data"][0])
        return c


def selective_phase(x, weights: SelectivePhaseWeights, conv_state=None):
    """Increments phi float32 [batch, seq, H, n_pairs] from x [batch, seq, H, in_dim]
    (3-D without batch; heads and dims of a token dense, any token stride).

    conv_state: None (a fresh sequence, no state kept) or a float32 C-contiguous
    [batch, H, n_pairs, 3] array (weights.new_state(batch) to start): read as the
    history before token 0 and updated in place, so a sequence fed in pieces gives the
    same phi as one call.
    """
    if not isinstance(weights, SelectivePhaseWeights):
        raise TypeError("weights must be a rove.SelectivePhaseWeights")
    v = _tensor.view(x, "x")
    ndim = len(v.shape)
    if ndim not in (3, 4):
        raise ValueError(f"x must be [batch, seq, H, in_dim] (or 3-D), got {tuple(v.shape)}")
    if ndim == 3:
        v = _tensor.View(v.obj, v.torch, v.ptr, (1,) + tuple(v.shape), (0,) + tuple(v.strides))
    B, T, H, D = v.shape
    if (H, D) != (weights.n_heads, weights.in_dim):
        raise ValueError(f"x has {H} heads of {D}; the weights have n_heads="
                         f"{weights.n_heads}, in_dim={weights.in_dim}")
    if B <= 0 or T <= 0:
        raise ValueError(f"x has an empty axis (shape {tuple(v.shape)})")
    ts = _tensor.token_stride(v.shape, v.strides)
    if ts is None:
        v = _tensor.dense_copy(_tensor.View(v.obj[None] if ndim == 3 else v.obj, v.torch, 0,
                                            (), ()), (0, 1, 2, 3))
        ts = H * D
    cs = csp = None
    if conv_state is not None:
        shape = (B, H, weights.n_pairs, 3) if ndim == 4 else (H, weights.n_pairs, 3)
        cs, csp = _tensor.contiguous(conv_state, "conv_state", np.float32, shape, writable=True)
    phi, pp = _tensor.empty(v.torch, (B, T, H, weights.n_pairs))
    st = _lib.lib.rove_selective_phase(weights._c(), B, T, v.ptr, ts, csp, pp)
    del v, cs
    _lib.check("rove_selective_phase", st)
    return phi[0] if ndim == 3 else phi
