# SPDX-License-Identifier: MIT
"""Autograd for rove.attention (torch): a torch.autograd.Function whose backward is
librove's rove_attention_backward (dq, dk, dv; flash style, fp32).

Used by attention() / Plan.attention when a torch q, k or v (or the sinks) requires grad
and grad mode is on. q, k and v may be float32, bfloat16 or float16, each its own: the
backward widens half-precision ones to float32 (exactly), runs librove's float32 backward
with the forward's output (in its own dtype) and LSE, and rounds each gradient once to its
input's dtype, as flash-attn's half-precision backward keeps float32 accumulators. The
forward is the usual librove call (with its LSE, which the backward needs); the LSE
returned with return_lse=True is differentiable too (its upstream gradient is
rove_attention_grads.d_lse). Explicit angles (Selective RoPE) given as float64 torch
tensors that require grad get their gradients too (one tensor passed as both gets the sum,
as autograd adds the two); attention sinks that require grad get d sinks
(rove_attention_grads.d_sinks).
"""
from __future__ import annotations

import ctypes

import numpy as np

from . import _lib, _tensor


def needs_grad(q, *others) -> bool:
    """Whether this call must go through its autograd.Function: torch inputs, one of q and
    the others (k, v, the angles) requiring grad with grad on, or one of them inside a
    torch.func transform (vmap, grad, ...: their tensors have no storage of their own,
    so only the Function's forward, which torch.func hands the plain tensors, may call C)."""
    if not _tensor.is_torch(q):
        return False
    t = _tensor._torch()
    xs = (q,) + others
    if not _tensor.transforms_active(t):  # the common case: plain autograd or inference
        return t.is_grad_enabled() and any(
            x is not None and _tensor.is_torch(x) and x.requires_grad for x in xs)
    xs = [x for x in xs if _tensor.is_torch(x)]
    if _tensor.forward_ad(xs, t):
        raise NotImplementedError(f"rove: {_tensor._FORWARD_AD}")
    return (t.is_grad_enabled() and any(x.requires_grad for x in xs)) or \
        any(_tensor.func_wrapped(x, t) for x in xs)


def _bshd(x, bhsd, ndim):
    """x in the caller's layout as a contiguous [b, s, h, d] tensor."""
    if ndim == 3:
        x = x.unsqueeze(0)
    if bhsd:
        x = x.transpose(1, 2)
    return x.contiguous()


def _user(x, bhsd, ndim):
    """A [b, s, h, d] tensor in the caller's layout and rank (a view)."""
    if bhsd:
        x = x.transpose(1, 2)
    return x[0] if ndim == 3 else x


def check(q, k, v, out, q_angles, kv_angles):
    """Refuse what the differentiable path cannot honour (before any C call)."""
    t = _tensor._torch()
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not _tensor.is_torch(x):
            raise TypeError("q, k and v must all be torch tensors when one requires grad "
                            "(or is a tensor of a torch.func transform)")
        if x.dtype not in (t.float32, t.bfloat16, t.float16):
            raise TypeError(f"{name} is {x.dtype}: gradients, and calls under torch.func, "
                            "are computed for float32, bfloat16 or float16 q, k and v")
    if out is not None:
        raise ValueError("out= cannot be used when an input requires grad or under a "
                         "torch.func transform (autograd needs a fresh output)")
    for name, a in (("q_angles", q_angles), ("kv_angles", kv_angles)):
        if _tensor.is_torch(a) and a.requires_grad and a.dtype != t.float64:
            raise TypeError(f"{name} is {a.dtype}: angles are float64")


def frozen(pos, name):
    """A private copy of positions for a recorded graph (None stays None): the backward
    then sees the forward's values even if the caller edits its tensor in place between
    the two (positions are small; torch's saved-tensor check does not cover them)."""
    return None if pos is None else np.array(_tensor.to_numpy(pos, name), copy=True)


def angle_tensor(a):
    """Angles as a torch tensor for save_for_backward (native float64 numpy: a private
    copy; anything else is passed on unchanged for the forward's own checks to refuse)."""
    if a is None or _tensor.is_torch(a):
        return a
    if isinstance(a, np.ndarray) and a.dtype == np.float64 and a.dtype.isnative:
        return _tensor._torch().from_numpy(np.array(a, copy=True))
    return a


_DOUBLE = ("rove: a double backward (create_graph=True) is not supported: librove's "
           "gradients are not differentiable")


def _loop_vmap(apply):
    """A vmap rule for an autograd.Function: apply() once per element of the vmapped
    dimension, the results stacked on dimension 0 (librove has no batched-over-calls
    entry; each call runs with its own threads as usual). None results stay None. Over a
    dimension of size 0 (jacrev of an empty output, say) one call on zeros in place of an
    element gives the results' shapes, and the results have 0 of them, as torch's vmap of
    its own ops gives."""
    def vmap(info, in_dims, *args):
        torch = _tensor._torch()
        batched = lambda a, d: isinstance(a, torch.Tensor) and d is not None  # noqa: E731
        if info.batch_size == 0:
            one = apply(*(a.new_zeros(a.shape[:d] + a.shape[d + 1:]) if batched(a, d) else a
                          for a, d in zip(args, in_dims)))
            res = tuple(None if r is None else r.new_empty((0,) + tuple(r.shape)) for r in one)
            return res, tuple(None if r is None else 0 for r in res)
        outs = [apply(*(a.select(d, i) if batched(a, d) else a for a, d in zip(args, in_dims)))
                for i in range(info.batch_size)]
        res = tuple(None if outs[0][j] is None else torch.stack([o[j] for o in outs])
                    for j in range(len(outs[0])))
        return res, tuple(None if r is None else 0 for r in res)
    return vmap


class _Pair:
    """Two autograd.Functions of one computation: `plain` (forward(ctx, ...)) for plain
    autograd and `func` (forward / setup_context apart, with a vmap rule) for torch.func,
    which takes only the second form; but torch binds the second form's arguments with
    inspect.signature on every apply (~40 us), so plain autograd gets the first."""

    def __init__(self, plain, func):
        self.plain, self.func = plain, func

    def apply(self, *args):
        t = _tensor._torch()
        return (self.func if _tensor.transforms_active(t) else self.plain).apply(*args)


def _pair(name, forward, setup_context, backward):
    torch = _tensor._torch()

    def plain_forward(ctx, *inputs):
        output = forward(*inputs)
        setup_context(ctx, inputs, output)
        return output

    plain = type(name, (torch.autograd.Function,), {
        "forward": staticmethod(plain_forward), "backward": staticmethod(backward)})
    func = type(name, (torch.autograd.Function,), {
        "forward": staticmethod(forward), "setup_context": staticmethod(setup_context),
        "backward": staticmethod(backward)})
    func.vmap = staticmethod(_loop_vmap(lambda *a: func.apply(*a)))
    return _Pair(plain, func)


def make_function(name, run, save, grads):
    """An autograd.Function `name` over librove calls (a _Pair: .apply), for plain
    autograd and for torch.func (grad, vjp, jacrev, vmap and their compositions):

      run(*inputs) -> tuple of tensors        the forward's C calls (grad mode off)
      save(inputs, outputs) -> (tensors to save, meta)
      grads(meta, need, saved, grad_outputs) -> one gradient or None per input
                                              the backward's C calls (need[i]: a tensor
                                              is wanted for input i; an unused output's
                                              grad_output is None, not zeros)

    Every output is differentiable. With grad mode on in the backward (create_graph=True,
    and torch.func.grad, which runs every backward so) grads() runs inside a second
    Function, so that torch.func hands it plain tensors (a C call needs their storage) and
    so that differentiating the gradients raises (librove's backward has no backward of
    its own) instead of dropping the second-order term: that Function records the saved
    inputs too, so even a loss linear in the output (whose gradient outputs need no grad)
    cannot lose the term without a word. A plain backward (grad mode off) calls grads()
    directly. vmap runs one call per element (_loop_vmap)."""
    torch = _tensor._torch()

    def backward_forward(meta, need, n_saved, *tensors):
        res = grads(meta, need, tensors[:n_saved], tensors[n_saved:])
        # a Function's outputs are tensors: not wanted -> an empty placeholder (dropped
        # again by the outer backward, which returns None for every input not in need)
        return tuple(r if n and r is not None else torch.empty(0) for r, n in zip(res, need))

    def backward_backward(ctx, *grad_outputs):
        raise RuntimeError(_DOUBLE)

    backward_fn = _pair(name + "Backward", backward_forward, lambda ctx, i, o: None,
                        backward_backward)

    def setup_context(ctx, inputs, output):
        tensors, meta = save(inputs, output)
        ctx.save_for_backward(*tensors)
        ctx.meta = meta
        ctx.set_materialize_grads(False)  # an unused output's gradient: None, not zeros

    def backward(ctx, *grad_outputs):
        need = tuple(ctx.needs_input_grad)
        saved = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True, torch.func: recorded
            res = backward_fn.apply(ctx.meta, need, len(saved), *saved, *grad_outputs)
        else:  # a plain backward records nothing: the Function would only cost time
            res = grads(ctx.meta, need, saved, grad_outputs)
        return tuple(r if n else None for r, n in zip(res, need))

    return _pair(name, run, setup_context, backward)


def _make_function():
    def run(q, k, v, q_angles, kv_angles, sinks, plan, q_pos, kv_pos, layout):
        from .attention import _forward
        return _forward(plan, q, k, v, q_pos, kv_pos, layout, True, None, q_angles,
                        kv_angles, sinks=sinks)

    def save(inputs, output):
        q, k, v, q_angles, kv_angles, sinks, plan, q_pos, kv_pos, layout = inputs
        # angles and sinks saved as tensors: autograd refuses a backward after an in-place
        # edit of them; q_pos / kv_pos are private copies (frozen()); the LSE is
        # differentiable (its gradient: rove_attention_grads.d_lse)
        return ((q, k, v, output[0], output[1], q_angles, kv_angles, sinks),
                (plan, q_pos, kv_pos, layout))

    def grads(meta, need, saved, grad_outputs):
        q, k, v, out, lse, q_angles, kv_angles, sinks = saved
        plan, q_pos, kv_pos, layout = meta
        return _backward(plan, q, k, v, out, lse, grad_outputs[0], q_pos, kv_pos, layout,
                         q_angles, kv_angles, angle_grads=(need[3], need[4]), sinks=sinks,
                         sink_grad=need[5], dlse=grad_outputs[1]) + (None,) * 4

    return make_function("AttentionFunction", run, save, grads)


_FUNCTION = None


def sink_tensor(sinks):
    """Sinks as a torch tensor for save_for_backward (a numpy array: a private float32
    copy, a constant of the graph; a torch tensor as it is)."""
    if sinks is None or _tensor.is_torch(sinks):
        return sinks
    arr = np.asarray(sinks)
    if arr.dtype.kind != "f":
        raise TypeError(f"sinks is {arr.dtype}: expected a float array")
    return _tensor._torch().from_numpy(np.array(arr, dtype=np.float32, copy=True))


def attention(plan, q, k, v, q_pos, kv_pos, layout, return_lse, out, q_angles, kv_angles,
              sinks=None):
    """The differentiable call (plan resolved); returns what _forward would."""
    global _FUNCTION
    check(q, k, v, out, q_angles, kv_angles)
    if _FUNCTION is None:
        _FUNCTION = _make_function()
    o, lse = _FUNCTION.apply(q, k, v, angle_tensor(q_angles), angle_tensor(kv_angles),
                             sink_tensor(sinks), plan, frozen(q_pos, "q_pos"),
                             frozen(kv_pos, "kv_pos"), layout)
    return (o, lse) if return_lse else o


def _backward(plan, q, k, v, out, lse, dout, q_pos, kv_pos, layout, q_angles, kv_angles,
              angle_grads=(False, False), sinks=None, sink_grad=False, dlse=None):
    """dq, dk, dv (the caller's layout and rank), the angle gradients asked for by
    angle_grads (float64, the angles' shapes; else None) and, with sink_grad, d sinks (in
    the sinks' dtype; else None) by rove_attention_backward. dout None: zeros; dlse: the
    LSE's upstream gradient (rove_attention_grads.d_lse) or None."""
    from .attention import _angles, _sinks
    torch = _tensor._torch()
    bhsd, ndim = layout == "bhsd", q.dim()
    with torch.no_grad():
        # half-precision q, k, v widened exactly: the float32 backward of the same function
        # (_tensor.plain: a lazily negated view's memory holds -x, and C reads memory)
        qc, kc, vc = (_bshd(_tensor.plain(x).float(), bhsd, ndim) for x in (q, k, v))
        oc = _bshd(_tensor.plain(out).float(), bhsd, ndim)
        gc = torch.zeros_like(oc) if dout is None else _bshd(_tensor.plain(dout).float(), bhsd, ndim)
        lc = (lambda x: x.unsqueeze(0) if ndim == 3 else x)(_tensor.plain(lse)).contiguous()
        dlc = None if dlse is None else \
            (lambda x: x.unsqueeze(0) if ndim == 3 else x)(_tensor.plain(dlse)).float().contiguous()
        B, Lq, H, D = qc.shape
        Lk, Hk = kc.shape[1], kc.shape[2]
        if B == 0 or Lq == 0:  # no query rows (an empty forward): every gradient is zero
            dqkv = tuple(_user(torch.zeros_like(c, dtype=x.dtype), bhsd, ndim)
                         for c, x in ((qc, q), (kc, k), (vc, v)))
            dang = tuple(torch.zeros(tuple(a.shape), dtype=torch.float64)
                         if a is not None and need else None
                         for a, need in ((q_angles, angle_grads[0]), (kv_angles, angle_grads[1])))
            dsk = torch.zeros((H,), dtype=sinks.dtype) if sinks is not None and sink_grad else None
            return dqkv + dang + (dsk,)
        dq, dk, dv = torch.empty_like(qc), torch.empty_like(kc), torch.empty_like(vc)
        a = _lib.AttentionArgs()
        a.batch, a.q_len, a.kv_len = B, Lq, Lk
        a.q, a.k, a.v, a.out, a.lse = (x.data_ptr() for x in (qc, kc, vc, oc, lc))
        qp, a.q_pos = _tensor.positions(q_pos, "q_pos", B, Lq)
        kp, a.kv_pos = _tensor.positions(kv_pos, "kv_pos", B, Lk)
        qa = ka = None
        half = plan.rotary_dim // 2
        if q_angles is not None:
            qa, a.q_angles = _angles(q_angles.detach() if _tensor.is_torch(q_angles) else q_angles,
                                     "q_angles", (B, Lq, Hk, half) if ndim == 4 else (Lq, Hk, half))
            ka, a.kv_angles = _angles(
                kv_angles.detach() if _tensor.is_torch(kv_angles) else kv_angles, "kv_angles",
                (B, Lk, Hk, half) if ndim == 4 else (Lk, Hk, half))
        sk, a.sinks = _sinks(sinks, H)
        g = _lib.AttentionGrads()
        g.dout, g.dq, g.dk, g.dv = (x.data_ptr() for x in (gc, dq, dk, dv))
        dsk = None
        if sinks is not None and sink_grad:
            dsk = torch.empty((H,), dtype=torch.float32)
            g.d_sinks = dsk.data_ptr()
        if dlc is not None:
            g.d_lse = dlc.data_ptr()
        dqa = dka = None
        if q_angles is not None and angle_grads[0]:
            dqa = torch.empty(tuple(q_angles.shape), dtype=torch.float64)
            g.d_q_angles = dqa.data_ptr()
        if kv_angles is not None and angle_grads[1]:
            dka = torch.empty(tuple(kv_angles.shape), dtype=torch.float64)
            g.d_kv_angles = dka.data_ptr()
        st = _lib.lib.rove_attention_backward(plan._handle, ctypes.byref(a), ctypes.byref(g))
        del qp, kp, qa, ka, sk
        _lib.check("rove_attention_backward", st)
    if dsk is not None:
        dsk = dsk.to(sinks.dtype)
    # each gradient rounded once to its input's dtype (no copy for float32)
    return (_user(dq.to(q.dtype), bhsd, ndim), _user(dk.to(k.dtype), bhsd, ndim),
            _user(dv.to(v.dtype), bhsd, ndim), dqa, dka, dsk)


# ---- rove.selective_angles --------------------------------------------------------------
_ANGLES_FUNCTION = None


def _make_angles_function():
    torch = _tensor._torch()

    def run(phi, temp, carry, cu):
        from .selective import _angles
        bare = lambda x: None if x is None else x.detach()  # noqa: E731
        return _angles(bare(phi), bare(temp), bare(carry), None, cu)

    def save(inputs, output):
        phi, temp, carry, cu = inputs
        return (phi, temp, carry), cu  # cu: checked, private (packed sequences) or None

    def grads(cu, need, saved, grad_outputs):
        phi, temp, carry = (None if x is None else _tensor.plain(x) for x in saved)
        d_angles, d_carry = (None if x is None else _tensor.plain(x) for x in grad_outputs)
        flat = phi.dim() == 3
        cflat = flat and cu is None  # packed carries are [N, H, P] already
        pc = (phi.unsqueeze(0) if flat else phi).float().contiguous()
        B, T, H, P = pc.shape
        da = torch.zeros((B, T, H, P), dtype=torch.float64) if d_angles is None else \
            (d_angles.unsqueeze(0) if flat else d_angles).double().contiguous()
        dc = None if d_carry is None else \
            (d_carry.unsqueeze(0) if cflat else d_carry).double().contiguous()
        tc = None if temp is None else temp.double().contiguous()
        cc = None if carry is None else \
            (carry.unsqueeze(0) if cflat else carry).double().contiguous()
        d_phi = torch.empty_like(pc)
        d_cin = torch.empty((B if cu is None else cu.shape[0] - 1, H, P), dtype=torch.float64)
        d_temp = torch.empty((P,), dtype=torch.float64)
        ptr = lambda x: None if x is None else x.data_ptr()  # noqa: E731
        if cu is None:
            st = _lib.lib.rove_selective_angles_backward(
                B, T, H, P, ptr(pc), ptr(tc), ptr(cc), ptr(da), ptr(dc), ptr(d_phi),
                ptr(d_cin), ptr(d_temp))
        else:
            st = _lib.lib.rove_selective_angles_packed_backward(
                cu.shape[0] - 1, cu.ctypes.data, H, P, ptr(pc), ptr(tc), ptr(cc), ptr(da),
                ptr(dc), ptr(d_phi), ptr(d_cin), ptr(d_temp))
        _lib.check("rove_selective_angles_backward", st)
        return (d_phi[0] if flat else d_phi), d_temp, (d_cin[0] if cflat else d_cin), None

    return make_function("SelectiveAnglesFunction", run, save, grads)


def selective_angles(phi, temp, carry, cu_seqlens=None):
    """rove.selective_angles recorded for autograd: (angles, carry_out)."""
    global _ANGLES_FUNCTION
    torch = _tensor._torch()
    # numpy float64 temp / carry (selective_temperatures returns numpy) as the no-grad path
    # takes them: private torch copies (constants of the graph)
    temp, carry = angle_tensor(temp), angle_tensor(carry)
    for name, x, dt in (("phi", phi, torch.float32), ("temp", temp, torch.float64),
                        ("carry", carry, torch.float64)):
        if x is not None and not _tensor.is_torch(x):
            raise TypeError(f"{name} must be a torch tensor (or, temp and carry, a float64 "
                            "numpy array) when phi, temp or carry requires grad")
        if x is not None and x.dtype != dt:
            raise TypeError(f"{name} is {x.dtype}: expected {dt}")
    if _ANGLES_FUNCTION is None:
        _ANGLES_FUNCTION = _make_angles_function()
    from .varlen import packed_cu
    cu = None
    if cu_seqlens is not None:
        B, T = (1, phi.shape[0]) if phi.dim() == 3 else tuple(phi.shape[:2])
        cu = packed_cu(cu_seqlens, B, T, "phi")
    return _ANGLES_FUNCTION.apply(phi, temp, carry, cu)
