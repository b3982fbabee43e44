# SPDX-License-Identifier: MIT
"""Packed sequences of different lengths in one call (rove_attention_varlen), as
flash-attn's flash_attn_varlen_func lays them out."""
from __future__ import annotations

import ctypes

import numpy as np

from . import _lib, _tensor


def _cu(x, name, n):
    a = np.ascontiguousarray(_tensor.to_numpy(x, name))
    if a.ndim != 1 or a.shape[0] < 2 or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name} must be a 1-D integer array [n_seqs + 1] (got {a.shape}, {a.dtype})")
    if n is not None and a.shape[0] != n:
        raise ValueError(f"cu_seqlens_q and cu_seqlens_k must have the same length")
    if a[0] != 0 or np.any(np.diff(a) < 0) or a[-1] > 2 ** 31 - 1:
        raise ValueError(f"{name} must start at 0 and not decrease (and fit int32)")
    return a.astype(np.int32)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, *, rotate="rove", causal=True,
                     q_pos=None, kv_pos=None, window=0, softcap=0.0, scale=None, rope=None,
                     return_lse=False, threads=None, isa="auto", q_angles=None, kv_angles=None):
    """Attention of packed sequences, each over its own keys only.

    q [total_q, heads, head_dim], k, v [total_k, kv_heads, head_dim] float32 (numpy or
    torch; copied once if not contiguous); sequence s owns query rows cu_seqlens_q[s] ..
    cu_seqlens_q[s+1]-1 and key rows cu_seqlens_k[s] .. cu_seqlens_k[s+1]-1. Causality is
    per sequence, bottom-right aligned (default positions P_i = len_k - len_q + i, p_j = j
    of each sequence) unless q_pos / kv_pos ([total_q] / [total_k]) are given; angles
    (float64 [total][kv_heads][rotary_dim/2]) likewise per token. Returns out
    [total_q, heads, head_dim] (and with return_lse the LSE [heads, total_q]). A sequence
    with no keys gets 0 and LSE -inf. Not differentiable."""
    from .attention import get_plan
    vq = _tensor.view(q, "q")
    vk = _tensor.view(k, "k")
    if len(vq.shape) != 3 or len(vk.shape) != 3:
        raise ValueError(f"q and k must be [total, heads, head_dim] (got {vq.shape}, {vk.shape})")
    Tq, H, D = vq.shape
    Tk, Hk, Dk = vk.shape
    cq = _cu(cu_seqlens_q, "cu_seqlens_q", None)
    ck = _cu(cu_seqlens_k, "cu_seqlens_k", cq.shape[0])
    if cq[-1] != Tq or ck[-1] != Tk:
        raise ValueError(f"cu_seqlens end at {cq[-1]} / {ck[-1]}, but q / k hold {Tq} / {Tk} tokens")
    if Dk != D or Hk <= 0 or H % Hk:
        raise ValueError(f"q {vq.shape} and k {vk.shape}: head_dim must match and n_heads be a "
                         "multiple of n_kv_heads")
    plan = get_plan(H, Hk, D, rotate=rotate, causal=causal, window=window, softcap=softcap,
                    scale=scale, rope=rope, isa=isa, threads=threads)
    keep = [cq, ck]
    a = _lib.VarlenArgs()
    a.n_seqs = cq.shape[0] - 1
    a.cu_seqlens_q, a.cu_seqlens_k = cq.ctypes.data, ck.ctypes.data
    for name, x, shape in (("q", q, (Tq, H, D)), ("k", k, (Tk, Hk, D)), ("v", v, (Tk, Hk, D))):
        if _tensor.is_torch(x) != vq.torch:
            raise TypeError("q, k and v must all be numpy arrays or all torch tensors")
        obj, ptr = _tensor.contiguous(x, name, np.float32, shape)
        keep.append(obj)
        setattr(a, name, ptr)
    half = plan.rotary_dim // 2
    for name, x, n, field in (("q_pos", q_pos, Tq, "q_pos"), ("kv_pos", kv_pos, Tk, "kv_pos")):
        if x is not None:
            obj, ptr = _tensor.positions(x, name, 1, n)
            keep.append(obj)
            setattr(a, field, ptr)
    for name, x, n in (("q_angles", q_angles, Tq), ("kv_angles", kv_angles, Tk)):
        if x is not None:
            obj, ptr = _tensor.contiguous(x, name, np.float64, (n, Hk, half))
            keep.append(obj)
            setattr(a, name, ptr)
    out, a.out = _tensor.empty(vq.torch, (Tq, H, D))
    lse = None
    if return_lse:
        lse, a.lse = _tensor.empty(vq.torch, (H, Tq))
    st = _lib.lib.rove_attention_varlen(plan._handle, ctypes.byref(a))
    del keep
    _lib.check("rove_attention_varlen", st)
    return (out, lse) if return_lse else out
