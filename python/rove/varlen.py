# SPDX-License-Identifier: MIT
"""Packed sequences of different lengths in one call (rove_attention_varlen), as
flash-attn's flash_attn_varlen_func lays them out."""
from __future__ import annotations

import ctypes

import numpy as np

from . import _autograd, _lib, _tensor


def _cu(x, name, n):
    if _tensor.is_torch(x) and (x.dtype.is_floating_point or x.dtype.is_complex):
        # (before to_numpy, whose requires-grad refusal would hide the real problem)
        raise TypeError(f"{name} must be an integer array, not {x.dtype}")
    a = np.ascontiguousarray(_tensor.to_numpy(x, name))
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name} must be an integer array, not {a.dtype}")
    if a.ndim != 1 or a.shape[0] < 2:
        raise ValueError(f"{name} must be a 1-D integer array [n_seqs + 1] (got {a.shape}, {a.dtype})")
    if n is not None and a.shape[0] != n:
        raise ValueError(f"cu_seqlens_q and cu_seqlens_k must have the same length")
    # bounds first, as Python ints: an unsigned array's differences would wrap around
    if int(a.min()) < 0 or int(a.max()) > 2 ** 31 - 1:
        raise ValueError(f"{name} must start at 0 and not decrease (and fit int32)")
    a = a.astype(np.int32)
    if a[0] != 0 or np.any(np.diff(a) < 0):
        raise ValueError(f"{name} must start at 0 and not decrease (and fit int32)")
    return a


def check_packed(cu, B, T, what):
    """Packed sequences (GLA, Selective RoPE): one row (batch 1) of T tokens that the
    checked cu_seqlens cu ends at."""
    if B != 1:
        raise ValueError(f"with cu_seqlens {what} must be one packed row (batch 1, or no "
                         f"batch axis), got batch {B}")
    if int(cu[-1]) != T:
        raise ValueError(f"cu_seqlens ends at {int(cu[-1])}, but {what} holds {T} tokens")


def packed_cu(cu_seqlens, B, T, what):
    """cu_seqlens as a checked private int32 array (_cu copies) for a packed row of T tokens
    (check_packed); None stays None."""
    if cu_seqlens is None:
        return None
    cu = _cu(cu_seqlens, "cu_seqlens", None)
    check_packed(cu, B, T, what)
    return cu


def _flat_positions(x, name, n):
    """Positions [total] (a [1, total] array too, as flattened) as a private int32 copy:
    checked here, and kept by an autograd graph unchanged by later in-place edits of the
    caller's tensor."""
    if x is None:
        return None
    a = _tensor.to_numpy(x, name)
    if a.ndim == 2 and a.shape[0] == 1:
        a = a.reshape(-1)
    if a.ndim != 1:
        raise ValueError(f"{name} has shape {a.shape}; expected [{n}]")
    obj, _ = _tensor.positions(a, name, 1, n)
    return np.array(obj, dtype=np.int32, copy=True)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, *, rotate="rove", causal=True,
                     q_pos=None, kv_pos=None, window=0, softcap=0.0, scale=None, rope=None,
                     return_lse=False, threads=None, isa="auto", q_angles=None, kv_angles=None,
                     out=None, sinks=None):
    """Attention of packed sequences, each over its own keys only.

    q [total_q, heads, head_dim], k, v [total_k, kv_heads, head_dim], numpy or torch, each
    float32, bfloat16 (torch) or float16, its own (rove_attention_varlen_typed: widened as
    read, fp32 arithmetic, the output rounded once to its type). Read in place when the
    heads and dims of a token are dense (any token stride: e.g. views into a fused QKV
    buffer), else copied once. Sequence s owns query rows cu_seqlens_q[s] ..
    cu_seqlens_q[s+1]-1 and key rows cu_seqlens_k[s] .. cu_seqlens_k[s+1]-1. Causality is
    per sequence, bottom-right aligned (default positions P_i = len_k - len_q + i, p_j = j
    of each sequence) unless q_pos / kv_pos ([total_q] / [total_k]) are given; angles
    (float64 [total][kv_heads][rotary_dim/2]) likewise per token. Returns out
    [total_q, heads, head_dim] of q's dtype (and with return_lse the float32 LSE
    [heads, total_q]); ``out=`` ([total_q, heads, head_dim], float32, bfloat16 or float16:
    its dtype is the output's type) is written in place when its heads and dims are dense
    per token, else through a temporary, and returned. A sequence with no keys gets 0 and
    LSE -inf (with sinks: the head's sink). sinks: attention sinks (gpt-oss), one logit
    per query head ([heads], any float dtype), as in rove.attention. Differentiable for
    torch q, k, v of float32, bfloat16 or float16 (and float64 angles, and sinks) that
    require grad: the backward is one float32 rove_attention_backward per sequence, each
    gradient rounded once to its input's dtype.
    """
    from .attention import get_plan
    def shape(x, name):  # shapes only (torch: checked where the call reads the tensor)
        return tuple(x.shape) if _tensor.is_torch(x) else _tensor.view_float(x, name).shape
    sq, sk = shape(q, "q"), shape(k, "k")
    if len(sq) != 3 or len(sk) != 3:
        raise ValueError(f"q and k must be [total, heads, head_dim] (got {sq}, {sk})")
    Tq, H, D = sq
    Tk, Hk, Dk = sk
    cq = _cu(cu_seqlens_q, "cu_seqlens_q", None)
    ck = _cu(cu_seqlens_k, "cu_seqlens_k", cq.shape[0])
    if cq[-1] != Tq or ck[-1] != Tk:
        raise ValueError(f"cu_seqlens end at {cq[-1]} / {ck[-1]}, but q / k hold {Tq} / {Tk} tokens")
    if Dk != D or Hk <= 0 or H % Hk:
        raise ValueError(f"q {sq} and k {sk}: head_dim must match, n_kv_heads be positive "
                         "and n_heads a multiple of it")
    q_pos = _flat_positions(q_pos, "q_pos", Tq)
    kv_pos = _flat_positions(kv_pos, "kv_pos", Tk)
    if (q_angles is None) != (kv_angles is None):
        raise ValueError("q_angles and kv_angles go together: give both or neither")
    plan = get_plan(H, Hk, D, rotate=rotate, causal=causal, window=window, softcap=softcap,
                    scale=scale, rope=rope, isa=isa, threads=threads)
    if _autograd.needs_grad(q, k, v, q_angles, kv_angles, sinks):  # backward per sequence
        _autograd.check(q, k, v, out, q_angles, kv_angles)
        out, lse = _varlen_autograd(plan, q, k, v, cq, ck, q_pos, kv_pos, q_angles, kv_angles,
                                    sinks)
        return (out, lse) if return_lse else out
    out, lse = _varlen(plan, q, k, v, cq, ck, q_pos, kv_pos, q_angles, kv_angles, return_lse,
                       out, sinks)
    return (out, lse) if return_lse else out


def _varlen(plan, q, k, v, cq, ck, q_pos, kv_pos, q_angles, kv_angles, want_lse, out=None,
            sinks=None):
    """One rove_attention_varlen(_typed) call (checked shapes); returns (out, lse or None)."""
    from .attention import (_angles, _copy_back, _logical, _prepare_out, _refuse_aside_overlap,
                            _sinks, _strided)
    vq = _tensor.view_float(q, "q")
    Tq, H, D = vq.shape
    Tk, Hk = int(ck[-1]), plan.n_kv_heads
    keep = [cq, ck]
    seen = dict(cu_seqlens_q=cq, cu_seqlens_k=ck)  # C's inputs besides q, k, v (named on overlap)
    a = _lib.VarlenArgs()
    a.n_seqs = cq.shape[0] - 1
    a.cu_seqlens_q, a.cu_seqlens_k = cq.ctypes.data, ck.ctypes.data
    dt, qkv = {}, {}
    for name, x, shape in (("q", q, (Tq, H, D)), ("k", k, (Tk, Hk, D)), ("v", v, (Tk, Hk, D))):
        vx = _tensor.view_float(x, name)
        if vx.torch != vq.torch:
            raise TypeError("q, k and v must all be numpy arrays or all torch tensors")
        if tuple(vx.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(vx.shape)}, expected {shape}")
        lx, stride = _strided(_logical(vx, name, False, 3), name, False, 3)  # [1, T, h, d]
        keep.append(lx)
        qkv[name] = lx.obj  # as read: a private copy where the layout needed one
        setattr(a, name, lx.ptr)
        setattr(a, name + "_stride", stride)
        dt[name] = lx.dtype
    half = plan.rotary_dim // 2
    for name, x, n, field in (("q_pos", q_pos, Tq, "q_pos"), ("kv_pos", kv_pos, Tk, "kv_pos")):
        if x is not None:
            obj, ptr = _tensor.positions(x, name, 1, n)
            keep.append(obj)
            seen[name] = obj
            setattr(a, field, ptr)
    for name, x, n in (("q_angles", q_angles, Tq), ("kv_angles", kv_angles, Tk)):
        if x is not None:
            obj, ptr = _angles(x, name, (n, Hk, half))
            keep.append(obj)
            seen[name] = obj
            setattr(a, name, ptr)
    sk, a.sinks = _sinks(sinks, H)
    keep.append(sk)
    seen["sinks"] = sk
    result, ov, a.out_stride, tmp = _prepare_out(out, vq.torch, False, 3, (1, Tq, H, D),
                                                 dtype=vq.dtype)
    a.out = ov.ptr
    lse = None
    if want_lse:
        lse, a.lse = _tensor.empty(vq.torch, (H, Tq))
    typed = (dt["q"], dt["k"], dt["v"], ov.dtype) != (_tensor.F32,) * 4
    fn = "rove_attention_varlen_typed" if typed else "rove_attention_varlen"
    _refuse_aside_overlap(fn, out, tmp, **qkv, **seen)
    if not typed:
        st = _lib.lib.rove_attention_varlen(plan._handle, ctypes.byref(a))
    else:
        types = _lib.TensorTypes(dt["q"], dt["k"], dt["v"], ov.dtype)
        st = _lib.lib.rove_attention_varlen_typed(plan._handle, ctypes.byref(a), ctypes.byref(types))
    why = (_tensor.overlap_detail(out, **qkv, **seen)
           if st == _lib.ERR_INVALID_ARGUMENT and out is not None and tmp is None else "")
    del keep, seen, qkv
    _lib.check(fn, st, why)
    if tmp is not None:
        _copy_back(result, tmp, vq.torch)
    elif out is not None:
        _tensor.mark_written(result)
    return result, lse


_FUNCTION = None


def _backward(plan, q, k, v, out, lse, dout, cq, ck, q_pos, kv_pos, qa, ka, want_qa, want_ka,
              sinks=None, want_sinks=False, dlse=None):
    """(dq, dk, dv, dq_angles or None, dkv_angles or None, d sinks or None) of a varlen
    forward (d sinks: the sequences' sums, added in float64, in the sinks' dtype): one
    rove_attention_backward per sequence over its rows (a sequence without keys or
    queries gets zero gradients). torch q, k, v of float32, bfloat16 or float16 (widened
    exactly; each gradient rounded once to its input's dtype); dout None = zeros; dlse: the
    LSE's upstream gradient [heads, total_q] (rove_attention_grads.d_lse) or None.

    Every packed tensor is made contiguous once and each call gets pointers into it (a
    sequence's rows are a contiguous run of the packed [total, heads, d] tensors): no
    per-sequence copies but its LSE's ([heads, total_q] has the sequence's columns
    apart), where a per-sequence rove.attention backward took ~90 us of Python each."""
    from .attention import _sinks
    torch = _tensor._torch()
    with torch.no_grad():
        # (_tensor.plain: a lazily negated view's memory holds -x, and C reads memory)
        qc, kc, vc, oc = (_tensor.plain(x).float().contiguous() for x in (q, k, v, out))
        gc = (torch.zeros_like(oc) if dout is None else
              _tensor.plain(dout).float().contiguous())
        lc = _tensor.plain(lse).contiguous()
        dlc = None if dlse is None else _tensor.plain(dlse).float()
        H, D, Hk = qc.shape[1], qc.shape[2], kc.shape[1]
        dq, dk, dv = torch.zeros_like(qc), torch.zeros_like(kc), torch.zeros_like(vc)
        qac = None if qa is None else (_tensor.plain(qa) if _tensor.is_torch(qa) else
                                       torch.from_numpy(np.asarray(qa))).double().contiguous()
        kac = None if ka is None else (_tensor.plain(ka) if _tensor.is_torch(ka) else
                                       torch.from_numpy(np.asarray(ka))).double().contiguous()
        dqa = torch.zeros_like(qac) if qac is not None and want_qa else None
        dka = torch.zeros_like(kac) if kac is not None and want_ka else None
        qp = None if q_pos is None else np.ascontiguousarray(q_pos, dtype=np.int32)
        kp = None if kv_pos is None else np.ascontiguousarray(kv_pos, dtype=np.int32)
        half = plan.rotary_dim // 2
        sk, sk_ptr = _sinks(sinks, H)
        dsk_seq = np.zeros(H, np.float32) if sinks is not None and want_sinks else None
        dsk = np.zeros(H, np.float64) if dsk_seq is not None else None

        def at(t, row, width, size):  # the address of row `row` of a [rows, width] buffer
            return None if t is None else t.data_ptr() + row * width * size

        def at_np(a, row):
            return None if a is None else a.__array_interface__["data"][0] + row * 4

        a, g = _lib.AttentionArgs(), _lib.AttentionGrads()
        a.batch = 1
        a.sinks = sk_ptr
        g.d_sinks = None if dsk_seq is None else dsk_seq.ctypes.data
        for s in range(len(cq) - 1):
            q0, q1, k0, k1 = int(cq[s]), int(cq[s + 1]), int(ck[s]), int(ck[s + 1])
            if q1 == q0 or k1 == k0:
                # no C call: the gradients stay 0, but a sequence with queries and no keys
                # has out 0 and LSE = the sink (d lse / d sink = 1), so its LSE's gradient
                # goes to the sinks'
                if q1 > q0 and k1 == k0 and dsk is not None and dlc is not None:
                    dsk += dlc[:, q0:q1].double().sum(1).numpy()
                continue
            ls = lc[:, q0:q1].contiguous()  # [heads, q_len]: batch 1's LSE
            dls = None if dlc is None else dlc[:, q0:q1].contiguous()
            g.d_lse = None if dls is None else dls.data_ptr()
            a.q_len, a.kv_len = q1 - q0, k1 - k0
            a.q, a.out = at(qc, q0, H * D, 4), at(oc, q0, H * D, 4)
            a.k, a.v = at(kc, k0, Hk * D, 4), at(vc, k0, Hk * D, 4)
            a.lse = ls.data_ptr()
            a.q_pos, a.kv_pos = at_np(qp, q0), at_np(kp, k0)
            a.q_angles, a.kv_angles = at(qac, q0, Hk * half, 8), at(kac, k0, Hk * half, 8)
            g.dout, g.dq = at(gc, q0, H * D, 4), at(dq, q0, H * D, 4)
            g.dk, g.dv = at(dk, k0, Hk * D, 4), at(dv, k0, Hk * D, 4)
            g.d_q_angles = at(dqa, q0, Hk * half, 8)
            g.d_kv_angles = at(dka, k0, Hk * half, 8)
            st = _lib.lib.rove_attention_backward(plan._handle, ctypes.byref(a),
                                                  ctypes.byref(g))
            _lib.check("rove_attention_backward", st)
            if dsk is not None:
                dsk += dsk_seq
        del sk
    if dsk is not None:
        dsk = torch.from_numpy(dsk).to(sinks.dtype)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), dqa, dka, dsk


def _varlen_autograd(plan, q, k, v, cq, ck, q_pos, kv_pos, q_angles, kv_angles, sinks=None):
    """The differentiable call: forward rove_attention_varlen, backward one
    rove_attention_backward per sequence (each over its slices; a sequence without keys
    or queries gets zero gradients)."""
    global _FUNCTION
    if _FUNCTION is None:
        def run(q, k, v, qa, ka, sinks, plan, cq, ck, q_pos, kv_pos):
            bare = lambda a: a.detach() if _tensor.is_torch(a) else a  # noqa: E731
            return _varlen(plan, q.detach(), k.detach(), v.detach(), cq, ck, q_pos, kv_pos,
                           bare(qa), bare(ka), True, None, bare(sinks))

        def save(inputs, output):
            q, k, v, qa, ka, sinks, plan, cq, ck, q_pos, kv_pos = inputs
            # angles and sinks saved as tensors: autograd refuses a backward after an
            # in-place edit of them (q_pos / kv_pos are private copies: _flat_positions);
            # the LSE is differentiable (rove_attention_grads.d_lse)
            return (q, k, v, output[0], output[1], qa, ka, sinks), \
                (plan, cq, ck, q_pos, kv_pos)

        def grads(meta, need, saved, grad_outputs):
            q, k, v, out, lse, qa, ka, sinks = saved
            plan, cq, ck, q_pos, kv_pos = meta
            return _backward(plan, q, k, v, out, lse, grad_outputs[0], cq, ck, q_pos,
                             kv_pos, qa, ka, need[3], need[4], sinks, need[5],
                             grad_outputs[1]) + (None,) * 5

        _FUNCTION = _autograd.make_function("VarlenFunction", run, save, grads)
    return _FUNCTION.apply(q, k, v, _autograd.angle_tensor(q_angles),
                           _autograd.angle_tensor(kv_angles), _autograd.sink_tensor(sinks), plan,
                           cq, ck, q_pos, kv_pos)
