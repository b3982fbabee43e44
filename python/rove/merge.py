# SPDX-License-Identifier: MIT
"""Exact merge of partial attentions over disjoint key sets (rove_merge_partials)."""
from __future__ import annotations

import ctypes

import numpy as np

from . import _lib, _tensor
from .attention import _sinks


def merge_partials(outs, lses, *, sinks=None):
    """Merge the outputs and LSEs of attentions of the same queries over disjoint key sets
    (split-KV, shards, cascades) exactly: L = ln sum_p e^{L_p}, O = sum_p e^{L_p - L} O_p.

    outs: a sequence of float32 [batch, q_len, heads, head_dim] (or 3-D without batch)
    arrays or tensors, as rove.attention returns them; lses: their LSEs [batch, heads,
    q_len] (or [heads, q_len]) from return_lse=True. Returns (out, lse) of the kind given.
    A part whose LSE is -inf adds nothing; a row -inf in every part gives 0 and -inf; a
    NaN or +inf LSE (an infinite logit) makes the row NaN. (flash-attn marks a row
    without keys by LSE +inf: map it to -inf before merging its parts.)
    outs and lses may also be one array or tensor each with the parts stacked on a first
    axis ([parts, batch, q_len, heads, head_dim] and [parts, batch, heads, q_len]): the
    same result, without a check per part (the fast way for many parts).
    sinks: attention sinks [heads] (rove.attention's), applied once to the merged result
    (rove_merge_partials_sinks): the parts must then be computed without them, and the
    merge equals one call with the sinks over all the keys.
    Half-precision parts (bfloat16 / float16 torch, float16 numpy; all of one dtype, as
    rove.attention returns them for half q) are widened to float32, merged, and the output
    rounded once to their dtype (the LSE stays float32).
    Not differentiable (it is inference glue)."""
    if _stacked(outs) and _stacked(lses):
        if _tensor.is_half(outs):
            out, lse = _merge_stacked(_tensor.widened(outs), lses, sinks)
            return _tensor.rounded(out, outs.dtype), lse
        return _merge_stacked(outs, lses, sinks)
    outs, lses = list(outs), list(lses)
    if any(map(_tensor.is_half, outs)):
        dts = {str(getattr(o, "dtype", "")) for o in outs}
        if len(dts) != 1:
            raise TypeError(f"outs mix dtypes ({', '.join(sorted(dts))}): half-precision "
                            "parts must all have one dtype (the output's)")
        out, lse = merge_partials([_tensor.widened(o) for o in outs], lses, sinks=sinks)
        return _tensor.rounded(out, outs[0].dtype), lse
    if not outs or len(outs) != len(lses):
        raise ValueError(f"need as many LSEs as outputs, at least one (got {len(outs)} "
                         f"outputs, {len(lses)} LSEs)")
    v0 = _tensor.view(outs[0], "outs[0]")
    shape = tuple(v0.shape)
    if len(shape) not in (3, 4):
        raise ValueError(f"outs[0] must be [batch, q_len, heads, head_dim] (or 3-D), got {shape}")
    if 0 in shape:  # as the stacked form (librove's merge takes no empty axis)
        raise ValueError(f"outs[0] has an empty axis (shape {shape})")
    B, L, H, D = ((1,) + shape)[-4:] if len(shape) == 3 else shape
    lshape = (H, L) if len(shape) == 3 else (B, H, L)
    keep, po, pl = [], (ctypes.c_void_p * len(outs))(), (ctypes.c_void_p * len(outs))()
    for i, (o, l) in enumerate(zip(outs, lses)):
        if _tensor.is_torch(o) != v0.torch or _tensor.is_torch(l) != v0.torch:
            raise TypeError("outs and lses must all be numpy arrays or all torch tensors")
        oo, po[i] = _tensor.contiguous(o, f"outs[{i}]", np.float32, shape)
        lo, pl[i] = _tensor.contiguous(l, f"lses[{i}]", np.float32, lshape)
        keep += [oo, lo]
    sk, psk = _sinks(sinks, H)
    out, pout = _tensor.empty(v0.torch, shape)
    lse, plse = _tensor.empty(v0.torch, lshape)
    st = _lib.lib.rove_merge_partials_sinks(len(outs), po, pl, B, L, H, D, psk, pout, plse)
    del keep, sk
    _lib.check("rove_merge_partials_sinks", st)
    return out, lse


def _stacked(x) -> bool:
    return isinstance(x, np.ndarray) or _tensor.is_torch(x)


def _merge_stacked(outs, lses, sinks):
    """merge_partials of parts stacked on axis 0 of one array / tensor each."""
    v = _tensor.view(outs, "outs")
    shape = tuple(v.shape)
    if len(shape) not in (4, 5) or shape[0] < 1:
        raise ValueError("stacked outs must be [parts, batch, q_len, heads, head_dim] (or "
                         f"[parts, q_len, heads, head_dim]) with at least one part, got {shape}")
    if 0 in shape:
        raise ValueError(f"stacked outs has an empty axis (shape {shape})")
    if _tensor.is_torch(lses) != v.torch:
        raise TypeError("outs and lses must both be numpy arrays or both torch tensors")
    n, part = shape[0], shape[1:]
    B, L, H, D = ((1,) + part)[-4:] if len(part) == 3 else part
    lpart = (H, L) if len(part) == 3 else (B, H, L)
    oo, po = _tensor.contiguous(outs, "outs", np.float32, shape)
    lo, pl = _tensor.contiguous(lses, "lses", np.float32, (n,) + lpart)
    so, sl = 4 * B * L * H * D, 4 * B * H * L  # bytes per part
    sk, psk = _sinks(sinks, H)
    out, pout = _tensor.empty(v.torch, part)
    lse, plse = _tensor.empty(v.torch, lpart)
    del v
    st = _lib.lib.rove_merge_partials_sinks(
        n, (ctypes.c_void_p * n)(*range(po, po + n * so, so)),
        (ctypes.c_void_p * n)(*range(pl, pl + n * sl, sl)), B, L, H, D, psk, pout, plse)
    del oo, lo, sk
    _lib.check("rove_merge_partials_sinks", st)
    return out, lse
