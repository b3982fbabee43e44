# SPDX-License-Identifier: MIT
"""Autograd for rove.gla / GLAPlan.forward / GLAPlan.recurrent (torch): a
torch.autograd.Function whose backward is librove's rove_gla_backward (dq, dk, dv, dg, the
initial state's and the angles' gradients, with the final state's gradient taken in).

Used when a torch q, k, v, g, angles or initial_state requires grad and grad mode is on.
q, k, v, g, initial_state float32, angles float64. The forward keeps its output for the
backward (the output rotation's angle gradient reads it).
"""
from __future__ import annotations

import ctypes

from . import _autograd, _lib, _tensor

_FUNCTION = None


def check(q, k, v, g, angles, initial_state, out):
    """Refuse what the differentiable path cannot honour (before any C call)."""
    t = _tensor._torch()
    for name, x in (("q", q), ("k", k), ("v", v), ("g", g)):
        if not _tensor.is_torch(x):
            raise TypeError("q, k, v and g must all be torch tensors when one requires grad "
                            "(or is a tensor of a torch.func transform)")
        if x.dtype != t.float32:
            raise TypeError(f"{name} is {x.dtype}: gradients, and calls under torch.func, are "
                            "computed for float32 q, k, v and g only (cast with .float())")
    if initial_state is not None and (not _tensor.is_torch(initial_state) or
                                      initial_state.dtype != t.float32):
        raise TypeError("initial_state must be a float32 torch tensor when gradients are "
                        "computed")
    if angles is not None and not _tensor.is_torch(angles):  # (native float64 numpy was
        # already made a torch copy by GLAPlan._call)
        what = f"a numpy array of {angles.dtype}" if hasattr(angles, "dtype") else \
            f"a {type(angles).__name__}"
        raise TypeError(f"angles is {what}: with torch inputs angles must be a float64 torch "
                        "tensor or a float64 numpy array in native byte order")
    if _tensor.is_torch(angles) and angles.requires_grad and angles.dtype != t.float64:
        raise TypeError(f"angles is {angles.dtype}: angles are float64")
    if out is not None:
        raise ValueError("out= cannot be used when an input requires grad or under a "
                         "torch.func transform (autograd needs a fresh output)")


def _make_function():
    def run(q, k, v, g, angles, initial_state, plan, fn, cu):
        bare = lambda x: None if x is None else x.detach()  # noqa: E731
        return plan._run(fn, q.detach(), k.detach(), v.detach(), g.detach(), bare(angles),
                         bare(initial_state), True, None, cu)

    def save(inputs, output):
        q, k, v, g, angles, initial_state, plan, fn, cu = inputs
        # the output too: the output rotation's angle gradient reads it
        return (q, k, v, g, angles, initial_state, output[0]), (plan, cu)

    def grads(meta, need, saved, grad_outputs):
        q, k, v, g, angles, s0, out = saved
        plan, cu = meta  # cu: the forward's private copy
        return _backward(plan, q, k, v, g, angles, s0, out, *grad_outputs,
                         want_angles=need[4], want_state=need[5], cu=cu) + (None,) * 3

    return _autograd.make_function("GLAFunction", run, save, grads)


def gla(plan, fn, q, k, v, g, angles, initial_state, return_final_state, out, cu=None):
    """The differentiable call: what plan.forward / plan.recurrent return (cu: checked
    int32 cu_seqlens or None)."""
    global _FUNCTION
    check(q, k, v, g, angles, initial_state, out)
    if _FUNCTION is None:
        _FUNCTION = _make_function()
    o, fs = _FUNCTION.apply(q, k, v, g, angles, initial_state, plan, fn, cu)
    return (o, fs) if return_final_state else o


def _backward(plan, q, k, v, g, angles, s0, out, dout, dfinal, want_angles, want_state,
              cu=None):
    """dq, dk, dv, dg, d_angles (or None), d_initial_state (or None) by rove_gla_backward,
    in the inputs' shapes (cu: the packed sequences' cu_seqlens, or None)."""
    torch = _tensor._torch()
    flat = q.dim() == 3

    def c(x, dtype=torch.float32):  # (plain: a lazily negated view's memory holds -x)
        x = _tensor.plain(x).to(dtype)
        return (x.unsqueeze(0) if flat else x).contiguous()

    def cs(x):  # a state: [N, H, K, V] already with packed sequences
        return _tensor.plain(x).to(torch.float32).contiguous() if cu is not None else c(x)

    with torch.no_grad():
        qc, kc, vc, gc, oc = c(q), c(k), c(v), c(g), c(out)
        B, T = qc.shape[:2]
        doc = torch.zeros_like(oc) if dout is None else c(dout)
        a = _lib.GLAArgs()
        a.batch, a.seq_len = B, T
        if cu is not None:
            a.cu_seqlens, a.n_seqs = cu.ctypes.data, cu.shape[0] - 1
        a.q, a.k, a.v, a.g, a.out = (x.data_ptr() for x in (qc, kc, vc, gc, oc))
        ac = sc = dfc = None
        if angles is not None:
            ac = c(angles, torch.float64)
            a.angles = ac.data_ptr()
        if s0 is not None:
            sc = cs(s0)
            a.initial_state = sc.data_ptr()
        gr = _lib.GLAGrads()
        gr.dout = doc.data_ptr()
        if dfinal is not None:
            dfc = cs(dfinal)
            gr.d_final_state = dfc.data_ptr()
        dq, dk, dv, dg = (torch.empty_like(x) for x in (qc, kc, vc, gc))
        gr.dq, gr.dk, gr.dv, gr.dg = (x.data_ptr() for x in (dq, dk, dv, dg))
        da = ds = None
        if want_angles and angles is not None and plan.rotate != 0:
            da = torch.empty_like(ac)
            gr.d_angles = da.data_ptr()
        elif want_angles:  # no rotation: the angles are not used
            da = torch.zeros_like(c(angles, torch.float64))
        if want_state:
            n = cu.shape[0] - 1 if cu is not None else B
            ds = torch.empty((n,) + tuple(plan_state_shape(plan)), dtype=torch.float32)
            gr.d_initial_state = ds.data_ptr()
        st = _lib.lib.rove_gla_backward(plan._ptr, ctypes.byref(a), ctypes.byref(gr))
        del ac, sc, dfc
        _lib.check("rove_gla_backward", st)

    def u(x):
        return None if x is None else (x[0] if flat else x)
    return u(dq), u(dk), u(dv), u(dg), u(da), ds if cu is not None else u(ds)


def plan_state_shape(plan):
    return (plan.n_heads, plan.key_dim, plan.value_dim)
