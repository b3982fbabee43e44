# SPDX-License-Identifier: MIT
"""torch.library custom ops, so that librove composes with torch.compile:

    import rove.torch_ops                        # registers rove::attention (imports torch)
    out, lse = torch.ops.rove.attention(q, k, v, None, None, "rove", True, 0, 0.0, None,
                                        "", "bshd")  # (then optional sinks, q_angles, kv_angles)
    out = rove.torch_ops.attention(q, k, v, rotate="rope", layout="bhsd")  # keyword form
    out = rove.torch_ops.attention_varlen(q, k, v, cu_q, cu_k)  # rove::attention_varlen
    out = rove.torch_ops.gla(q, k, v, g, angles=a, cu_seqlens=cu)  # rove::gla

The op is opaque to the compiler (no graph break; a fake implementation gives its output
shapes). Its arguments are rove.attention's but for threads, isa and out (the ops use
the default thread count and ISA and return new tensors), with the RopeConfig as a JSON string
(rope_json, "" = defaults) because custom ops take only tensors and scalars. q, k and v
may each be float32, bfloat16 or float16 (read in place: no casts); out has q's dtype and
the LSE is float32. The op is differentiable in q, k and v of any of those dtypes
(torch.library.register_autograd; each gradient in its input's dtype; the backward is
rove_attention_backward, as for rove.attention, itself the custom op
rove::attention_backward so that torch.compile traces training through its fake kernel);
the LSE output is differentiable too (its gradient goes to the backward op as dlse:
rove_attention_grads.d_lse), and a double backward (a backward through a create_graph=True
gradient) raises. rove::attention_varlen is rove.attention_varlen the same way (packed
[total, heads, d] tensors, cu_seqlens as int32 or int64 tensors; out [total_q, heads, d],
LSE [heads, total_q]; the backward is one rove_attention_backward per sequence). Both take
attention sinks as an optional last tensor (sinks=; differentiable: its gradient comes
from the backward ops), and then float64 Selective-RoPE angles q_angles / kv_angles
(differentiable: their float64 gradients come from the backward ops when they require
grad). rove::gla is rove.gla / rove.gla_recurrent (recurrent=True) the
same way: (out, final state), with optional angles, initial state and cu_seqlens;
differentiable in q, k, v, g, the angles and the initial state through both outputs
(rove::gla_backward). The keyword wrappers refuse what rove.attention refuses (a string
causal, a float window, a bool softcap: TypeError, never coerced), under torch.compile
too (an error raised while it traces: with fullgraph=True torch reports it as its own
Unsupported error, which names it); every tensor argument must be on q's device (a meta
tensor among CPU ones is an error). Forward-mode AD (torch.func.jvp / jacfwd, dual
tensors) raises NotImplementedError in the wrappers and in the ops called directly.
"""
from __future__ import annotations

import functools
import json
from typing import Optional, Tuple

import numpy as np
import torch

from . import _autograd, _params, _tensor, varlen as _varlen
from .attention import _heads, attention as _attention, get_plan
from .rope import RopeConfig


_DTYPES = (torch.float32, torch.bfloat16, torch.float16)  # q, k, v each (rove.attention)


@functools.lru_cache(maxsize=64)
def _rope(rope_json: str) -> Optional[RopeConfig]:
    """The RopeConfig of the op's JSON argument, cached (RopeConfigs are immutable): its
    validation took ~90 us per call, the whole cost of a short decode step."""
    return RopeConfig(**json.loads(rope_json)) if rope_json else None


def _traced_type(name, x, kind):
    """While torch.compile traces: refuse the types rove.attention / rove.gla refuse and
    the op's int / float argument would coerce (a float or bool where an int goes, a bool
    where a number goes). Values are not read here: torch.compile may have made them
    dynamic (a symbolic int or float, which it traces as a plain int or float, and whose
    full checks break the graph); the op checks them when it runs."""
    bad = (bool, np.bool_) + ((float, np.floating) if kind == "int" else ())
    if isinstance(x, bad):
        raise TypeError(f"{name} must be {'an int' if kind == 'int' else 'a number'}, "
                        f"not {type(x).__name__}")
    return x


def _scalars(causal, window, softcap, scale, rope):
    """The keyword wrappers' scalars, checked as rove.attention checks them (a string
    causal, a float window or a bool softcap is a TypeError, never coerced), as the op's
    (causal, window, softcap, scale, rope_json). While torch.compile traces, only their
    types are checked (_traced_type: a dynamic window, softcap or scale is a symbolic
    value the full checks cannot read), and rove.attention checks the values when the op
    runs."""
    if rope is not None and not isinstance(rope, RopeConfig):
        raise TypeError(f"rope must be a rove.RopeConfig, not {type(rope).__name__}")
    rope_json = rope._json if rope is not None else ""  # made by RopeConfig itself
    if torch.compiler.is_compiling():
        window = int(_traced_type("window", window, "int"))
        softcap = float(_traced_type("softcap", softcap, "number"))
        scale = None if scale is None else float(_traced_type("scale", scale, "number"))
        return _params.flag("causal", causal), window, softcap, scale, rope_json
    if not isinstance(window, torch.SymInt):
        window = _params.positive_int("window", window, minimum=0)
    if not isinstance(softcap, torch.SymFloat):
        softcap = _params.float32_param("softcap", softcap, nonneg=True)
    if not isinstance(scale, torch.SymFloat):
        scale = _params.scale(scale)
    return _params.flag("causal", causal), window, softcap, scale, rope_json


def _check_devices(name, q, *others):
    """Fake kernels: torch runs them, not the real op, when any argument is on the meta
    device, so a CPU q beside a meta k or position tensor would get CPU outputs never
    written. Every tensor argument must be on q's device (as for rove.attention, which
    refuses any device but the CPU for real calls)."""
    for t in others:
        if t is not None:
            torch._check(t.device == q.device, lambda: (
                f"{name}: all tensors must be on one device (q on {q.device}, another "
                f"on {t.device})"))


def _no_forward_ad(name):
    """In an op's kernel (so for its keyword wrapper and a direct torch.ops.rove call
    alike): refuse while a forward-mode AD level is open. torch.func.jvp / jacfwd reach the
    kernel of a custom op without a forward rule with the tangents stripped and give its
    outputs none (zero derivatives, without a word); the kernel cannot tell whether its
    own inputs carried one, so any open level is refused (a
    torch.autograd.forward_ad.dual_level() block, or a jvp)."""
    fa = torch.autograd.forward_ad
    if getattr(fa, "_current_level", -1) >= 0 and not torch.compiler.is_compiling():
        raise NotImplementedError(f"{name}: {_tensor._FORWARD_AD}")


@torch.library.custom_op("rove::attention", mutates_args=())
def _op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: Optional[torch.Tensor],
        kv_pos: Optional[torch.Tensor], rotate: str, causal: bool, window: int,
        softcap: float, scale: Optional[float], rope_json: str,
        layout: str, sinks: Optional[torch.Tensor] = None,
        q_angles: Optional[torch.Tensor] = None, kv_angles: Optional[torch.Tensor] = None
        ) -> Tuple[torch.Tensor, torch.Tensor]:
    _no_forward_ad("rove::attention")
    out, lse = _attention(q, k, v, rotate=_flags(rotate), causal=causal, q_pos=q_pos,
                          kv_pos=kv_pos, rope=_rope(rope_json), window=window,
                          softcap=softcap, scale=scale, layout=layout, return_lse=True,
                          sinks=sinks, q_angles=q_angles, kv_angles=kv_angles)
    return out, lse


def _flags(rotate: str):
    return int(rotate) if rotate.isdigit() else rotate


def _setup_context(ctx, inputs, output):
    """Both ops: q, k, v first; the rest of the inputs go to the backward op, the tensors
    among them (positions, cu_seqlens) as private copies, as rove.attention keeps them: an
    in-place edit of the caller's tensor between the forward and the backward must not
    change the gradients. q, k and v may be float32, bfloat16 or float16 (the forward
    checks it): the backward is librove's float32 one on them widened exactly, each
    gradient rounded once to its input's dtype (rove.attention's rule)."""
    q, k, v = inputs[:3]
    out, lse = output  # both differentiable, as rove.attention's (the LSE: grads.d_lse)
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in inputs[3:])


def _f32_like(*xs):
    """Fresh float32 tensors shaped like xs: the GLA backward op's fake outputs."""
    return tuple(x.new_empty(x.shape, dtype=torch.float32) for x in xs)


def _grads_like(*xs):
    """Fresh contiguous tensors shaped and typed like xs: the attention backward ops' fake
    dq, dk, dv (each gradient has its input's dtype)."""
    return tuple(x.new_empty(x.shape) for x in xs)


def _op_backward(bwd_op, n_args: int):
    """The autograd backward of an op with q, k, v and n_args more inputs, the last three
    the sinks, q_angles and kv_angles: bwd_op(dout, q, k, v, out, lse, *those inputs, dlse,
    want_q_angles, want_kv_angles) gives dq, dk, dv, d sinks, d q_angles and d kv_angles
    (empty tensors for those not given or not asked for); the others get no gradient."""
    def backward(ctx, dout, dlse):
        q, k, v, out, lse = ctx.saved_tensors
        if dout is None:
            dout = torch.zeros_like(out)
        given = [t is not None for t in ctx.args[-3:]]
        # by position: torch leaves trailing defaulted inputs out of needs_input_grad
        flags = tuple(ctx.needs_input_grad) + (False,) * (3 + n_args)
        need = [g and n for g, n in zip(given, flags[n_args:n_args + 3])]
        dq, dk, dv, dsk, dqa, dka = bwd_op(dout, q, k, v, out, lse, *ctx.args, dlse,
                                           need[1], need[2])
        return (dq, dk, dv) + (None,) * (n_args - 3) + tuple(
            g if n else None for g, n in zip((dsk, dqa, dka), need))
    return backward


# The backwards are custom ops of their own, so that torch.compile (AOTAutograd) traces
# them through their fake kernels instead of running librove on fake tensors. They have
# no autograd of their own: a double backward (create_graph=True) raises.
@torch.library.custom_op("rove::attention_backward", mutates_args=())
def _bwd_op(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
            out: torch.Tensor, lse: torch.Tensor, q_pos: Optional[torch.Tensor],
            kv_pos: Optional[torch.Tensor], rotate: str, causal: bool, window: int,
            softcap: float, scale: Optional[float], rope_json: str,
            layout: str, sinks: Optional[torch.Tensor] = None,
            q_angles: Optional[torch.Tensor] = None, kv_angles: Optional[torch.Tensor] = None,
            dlse: Optional[torch.Tensor] = None, want_q_angles: bool = False,
            want_kv_angles: bool = False
            ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                       torch.Tensor]:
    bhsd = layout == "bhsd"
    (H, D), (Hk, _) = _heads(q, "q", bhsd), _heads(k, "k", bhsd)
    plan = get_plan(H, Hk, D, rotate=_flags(rotate), causal=causal, window=window,
                    softcap=softcap, scale=scale, rope=_rope(rope_json))
    wqa, wka = _angle_wants(q_angles, kv_angles, want_q_angles, want_kv_angles)
    dq, dk, dv, dqa, dka, dsk = _autograd._backward(
        plan, q, k, v, out, lse, dout, q_pos, kv_pos, layout, q_angles, kv_angles,
        angle_grads=(wqa, wka), sinks=sinks, sink_grad=sinks is not None, dlse=dlse)
    return (dq.contiguous(), dk.contiguous(), dv.contiguous(), _sink_grad(dsk, sinks, q),
            _angle_grad(dqa, q), _angle_grad(dka, q))


def _sink_grad(dsk, sinks, q):
    """d sinks as the backward ops return it: the sinks' dtype and shape, or an empty
    tensor without sinks (an op's outputs cannot be None)."""
    return q.new_empty((0,)) if sinks is None else dsk.reshape(sinks.shape).to(sinks.dtype)


def _sink_grad_like(sinks, q):
    return q.new_empty((0,)) if sinks is None else sinks.new_empty(sinks.shape)


def _angle_wants(q_angles, kv_angles, want_q, want_kv):
    return bool(want_q and q_angles is not None), bool(want_kv and kv_angles is not None)


def _angle_grad(d, q):
    """An angle gradient as the backward ops return it: float64 in the angles' shape, or
    an empty float64 tensor when not asked for (an op's outputs cannot be None)."""
    return q.new_empty((0,), dtype=torch.float64) if d is None else d.contiguous()


def _angle_grads_like(q_angles, kv_angles, want_q, want_kv, q):
    wq, wk = _angle_wants(q_angles, kv_angles, want_q, want_kv)
    return tuple(a.new_empty(a.shape) if w else q.new_empty((0,), dtype=torch.float64)
                 for a, w in ((q_angles, wq), (kv_angles, wk)))


@_bwd_op.register_fake
def _(dout, q, k, v, out, lse, q_pos, kv_pos, rotate, causal, window, softcap, scale,
      rope_json, layout, sinks=None, q_angles=None, kv_angles=None, dlse=None,
      want_q_angles=False, want_kv_angles=False):
    return (_grads_like(q, k, v) + (_sink_grad_like(sinks, q),) +
            _angle_grads_like(q_angles, kv_angles, want_q_angles, want_kv_angles, q))


_op.register_autograd(_op_backward(torch.ops.rove.attention_backward, 12),
                      setup_context=_setup_context)


def _check_shapes(name, q, k, v, sinks, bhsd, ranks):
    """Fake kernels: the shape rules of the real op (rove.attention / attention_varlen), so
    that meta and fake tensors (torch.compile's tracing) fail as real ones do, with a
    ValueError, instead of getting an output shape: q of a rank in ranks, k and v of q's
    rank and one shape, head_dim equal and even, q's heads a multiple of k's, the batch
    equal, sinks [heads of q]."""
    torch._check_value(q.dim() in ranks and k.dim() == q.dim(), lambda: (
        f"{name}: q and k must both be {' or '.join(f'{r}-D' for r in ranks)} (got q "
        f"{tuple(q.shape)}, k {tuple(k.shape)})"))
    torch._check_value(k.shape == v.shape, lambda: (
        f"{name}: k and v shapes differ: {tuple(k.shape)} vs {tuple(v.shape)}"))
    ax = (-3 if bhsd else -2)  # the heads axis
    H, Hk, D = q.shape[ax], k.shape[ax], q.shape[-1]
    torch._check_value(k.shape[-1] == D, lambda: (
        f"{name}: head_dim of q ({D}) and k/v ({k.shape[-1]}) differ"))
    torch._check_value(D >= 2 and D % 2 == 0, lambda: (
        f"{name}: head_dim must be even and >= 2 (q has head_dim {D})"))
    torch._check_value(Hk > 0 and H % Hk == 0, lambda: (
        f"{name}: q has {H} heads, k has {Hk}: n_heads must be a multiple of n_kv_heads"))
    if q.dim() == 4:
        torch._check_value(q.shape[0] == k.shape[0], lambda: (
            f"{name}: batch of q ({q.shape[0]}) and k/v ({k.shape[0]}) differ"))
    if sinks is not None:
        torch._check_value(sinks.dim() == 1 and sinks.shape[0] == H, lambda: (
            f"{name}: sinks must be [n_heads] = [{H}], got {tuple(sinks.shape)}"))


def _concrete(*xs) -> bool:
    return all(isinstance(x, int) for x in xs)


def _tracing() -> bool:
    """True while torch.compile traces the op (its fake tensors): the plan's value rules
    are then left to the real op, which raises the documented ValueError / TypeError when
    the compiled graph runs (raised while tracing, torch would wrap it in its own
    TorchRuntimeError). Meta tensors and a caller's FakeTensorMode get them at once."""
    from torch._guards import TracingContext
    return TracingContext.try_get() is not None


def _check_plan(H, Hk, D, rotate, causal, window, softcap, scale, rope_json):
    """Fake kernels: the plan's rules (rotate names and flags, head_dim <= ROVE_MAX_HEAD_DIM,
    the RopeConfig for this head_dim, window, softcap, scale) raise what the real op
    raises, by fetching the same cached plan; only when the head counts and head_dim are
    concrete and torch.compile is not tracing (_tracing)."""
    if _tracing():
        return
    flags = _flags(rotate)
    if _concrete(H, Hk, D):
        get_plan(H, Hk, D, rotate=flags, causal=causal, window=window, softcap=softcap,
                 scale=scale, rope=_rope(rope_json))


def _check_positions(name, pos, pname, shapes):
    """Fake kernels: positions hold integers and have one of the real op's shapes."""
    if pos is None:
        return
    torch._check_type(not (pos.is_floating_point() or pos.is_complex() or
                           pos.dtype == torch.bool), lambda: (
        f"{name}: {pname} must hold integers (got dtype {pos.dtype})"))
    torch._check_value(tuple(pos.shape) in shapes, lambda: (
        f"{name}: {pname} has shape {tuple(pos.shape)}; expected one of "
        f"{[list(x) for x in shapes]}"))


def _check_angles(name, *angles):
    """Fake kernels: angles go together and are float64 (their shapes: the real op)."""
    torch._check_value(len({a is None for a in angles}) == 1, lambda: (
        f"{name}: q_angles and kv_angles go together: give both or neither"))
    for a in angles:
        if a is not None:
            torch._check_type(a.dtype == torch.float64, lambda: (
                f"{name}: angles are float64 (got {a.dtype})"))


@_op.register_fake
def _(q, k, v, q_pos, kv_pos, rotate, causal, window, softcap, scale, rope_json, layout,
      sinks=None, q_angles=None, kv_angles=None):
    _check_devices("rove::attention", q, k, v, q_pos, kv_pos, sinks, q_angles, kv_angles)
    _check_angles("rove::attention", q_angles, kv_angles)
    for t in (q, k, v):
        torch._check(t.dtype in _DTYPES,
                     lambda: "rove::attention takes float32, bfloat16 or float16 tensors")
    torch._check_value(layout in ("bshd", "bhsd"), lambda: (
        f"rove::attention: layout must be 'bshd' or 'bhsd' (got {layout!r})"))
    bhsd = layout == "bhsd"
    _check_shapes("rove::attention", q, k, v, sinks, bhsd, (3, 4))
    ax = -3 if bhsd else -2  # heads; the sequence is the axis before (bshd) or after it
    H, Hk, D = q.shape[ax], k.shape[ax], q.shape[-1]
    _check_plan(H, Hk, D, rotate, causal, window, softcap, scale, rope_json)
    B = q.shape[0] if q.dim() == 4 else 1
    Lq, Lk = q.shape[ax + 1 if bhsd else ax - 1], k.shape[ax + 1 if bhsd else ax - 1]
    torch._check_value(B == 0 or Lq == 0 or Lk > 0, lambda: (
        "rove::attention: kv_len must be > 0 (queries need keys)"))
    _check_positions("rove::attention", q_pos, "q_pos", ((Lq,), (B, Lq)))
    _check_positions("rove::attention", kv_pos, "kv_pos", ((Lk,), (B, Lk)))
    f32 = torch.float32  # the LSE is float32 whatever q's dtype; out has q's dtype
    if q.dim() == 3:
        L, H = (q.shape[1], q.shape[0]) if bhsd else (q.shape[0], q.shape[1])
        out = q.new_empty((L, H, q.shape[2]))
        return (out.transpose(0, 1) if bhsd else out), q.new_empty((H, L), dtype=f32)
    B, D = q.shape[0], q.shape[3]
    L, H = (q.shape[2], q.shape[1]) if bhsd else (q.shape[1], q.shape[2])
    out = q.new_empty((B, L, H, D))  # librove's output buffer is always bshd-contiguous
    return (out.transpose(1, 2) if bhsd else out), q.new_empty((B, H, L), dtype=f32)


def attention(q, k, v, *, rotate="rove", causal=True, q_pos=None, kv_pos=None, rope=None,
              window=0, softcap=0.0, scale=None, layout="bshd", return_lse=False, sinks=None,
              q_angles=None, kv_angles=None):
    """rove.attention through the rove::attention custom op (torch tensors only; float64
    q_angles / kv_angles for Selective RoPE, differentiable as in rove.attention)."""
    if isinstance(rotate, int) and not isinstance(rotate, bool):
        rotate = str(rotate)
    causal, window, softcap, scale, rope_json = _scalars(causal, window, softcap, scale, rope)
    out, lse = torch.ops.rove.attention(q, k, v, q_pos, kv_pos, rotate, causal, window,
                                        softcap, scale, rope_json, layout, sinks, q_angles,
                                        kv_angles)
    return (out, lse) if return_lse else out


# ---- rove::attention_varlen ---------------------------------------------------------------
@torch.library.custom_op("rove::attention_varlen", mutates_args=())
def _varlen_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
               cu_seqlens_k: torch.Tensor, q_pos: Optional[torch.Tensor],
               kv_pos: Optional[torch.Tensor], rotate: str, causal: bool, window: int,
               softcap: float, scale: Optional[float], rope_json: str,
               sinks: Optional[torch.Tensor] = None, q_angles: Optional[torch.Tensor] = None,
               kv_angles: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    _no_forward_ad("rove::attention_varlen")
    out, lse = _varlen.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, rotate=_flags(rotate),
                                        causal=causal, q_pos=q_pos, kv_pos=kv_pos,
                                        window=window, softcap=softcap, scale=scale,
                                        rope=_rope(rope_json), return_lse=True, sinks=sinks,
                                        q_angles=q_angles, kv_angles=kv_angles)
    return out, lse


@torch.library.custom_op("rove::attention_varlen_backward", mutates_args=())
def _varlen_bwd_op(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   out: torch.Tensor, lse: torch.Tensor, cu_seqlens_q: torch.Tensor,
                   cu_seqlens_k: torch.Tensor, q_pos: Optional[torch.Tensor],
                   kv_pos: Optional[torch.Tensor], rotate: str, causal: bool, window: int,
                   softcap: float, scale: Optional[float], rope_json: str,
                   sinks: Optional[torch.Tensor] = None,
                   q_angles: Optional[torch.Tensor] = None,
                   kv_angles: Optional[torch.Tensor] = None,
                   dlse: Optional[torch.Tensor] = None, want_q_angles: bool = False,
                   want_kv_angles: bool = False
                   ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                              torch.Tensor, torch.Tensor]:
    plan = get_plan(q.shape[1], k.shape[1], q.shape[2], rotate=_flags(rotate), causal=causal,
                    window=window, softcap=softcap, scale=scale, rope=_rope(rope_json))
    cq = _varlen._cu(cu_seqlens_q, "cu_seqlens_q", None)
    ck = _varlen._cu(cu_seqlens_k, "cu_seqlens_k", cq.shape[0])
    # [total] or [1, total], as the forward takes them (rove.attention_varlen)
    q_pos = _varlen._flat_positions(q_pos, "q_pos", q.shape[0])
    kv_pos = _varlen._flat_positions(kv_pos, "kv_pos", k.shape[0])
    wqa, wka = _angle_wants(q_angles, kv_angles, want_q_angles, want_kv_angles)
    dq, dk, dv, dqa, dka, dsk = _varlen._backward(plan, q, k, v, out, lse, dout, cq, ck, q_pos,
                                                  kv_pos, q_angles, kv_angles, wqa, wka, sinks,
                                                  sinks is not None, dlse)
    # contiguous, as the fake kernel declares (_varlen._backward keeps each input's layout,
    # a permuted one too, which compiled graphs would take for the declared strides)
    return (dq.contiguous(), dk.contiguous(), dv.contiguous(), _sink_grad(dsk, sinks, q),
            _angle_grad(dqa, q), _angle_grad(dka, q))


@_varlen_bwd_op.register_fake
def _(dout, q, k, v, out, lse, cq, ck, q_pos, kv_pos, rotate, causal, window, softcap, scale,
      rope_json, sinks=None, q_angles=None, kv_angles=None, dlse=None, want_q_angles=False,
      want_kv_angles=False):
    return (_grads_like(q, k, v) + (_sink_grad_like(sinks, q),) +
            _angle_grads_like(q_angles, kv_angles, want_q_angles, want_kv_angles, q))


_varlen_op.register_autograd(_op_backward(torch.ops.rove.attention_varlen_backward, 13),
                             setup_context=_setup_context)


@_varlen_op.register_fake
def _(q, k, v, cq, ck, q_pos, kv_pos, rotate, causal, window, softcap, scale, rope_json,
      sinks=None, q_angles=None, kv_angles=None):
    _check_devices("rove::attention_varlen", q, k, v, cq, ck, q_pos, kv_pos, sinks, q_angles,
                   kv_angles)
    _check_angles("rove::attention_varlen", q_angles, kv_angles)
    for t in (q, k, v):
        torch._check(t.dtype in _DTYPES,
                     lambda: "rove::attention_varlen takes float32, bfloat16 or float16 tensors")
    _check_shapes("rove::attention_varlen", q, k, v, sinks, False, (3,))
    for c in (cq, ck):
        torch._check_value(c.dim() == 1 and c.shape[0] >= 2, lambda: (
            "rove::attention_varlen: cu_seqlens are 1-D [n_seqs + 1], n_seqs >= 1"))
    torch._check_value(cq.shape[0] == ck.shape[0], lambda: (
        "rove::attention_varlen: cu_seqlens_q and cu_seqlens_k differ in length"))
    _check_plan(q.shape[1], k.shape[1], q.shape[2], rotate, causal, window, softcap, scale,
                rope_json)
    _check_positions("rove::attention_varlen", q_pos, "q_pos", ((q.shape[0],), (1, q.shape[0])))
    _check_positions("rove::attention_varlen", kv_pos, "kv_pos",
                     ((k.shape[0],), (1, k.shape[0])))
    return q.new_empty(q.shape), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, *, rotate="rove", causal=True,
                     q_pos=None, kv_pos=None, rope=None, window=0, softcap=0.0, scale=None,
                     return_lse=False, sinks=None, q_angles=None, kv_angles=None):
    """rove.attention_varlen through the rove::attention_varlen custom op (torch tensors
    only; cu_seqlens as integer tensors; float64 q_angles / kv_angles [total, n_kv_heads,
    rotary_dim/2] for Selective RoPE, differentiable)."""
    if isinstance(rotate, int) and not isinstance(rotate, bool):
        rotate = str(rotate)
    causal, window, softcap, scale, rope_json = _scalars(causal, window, softcap, scale, rope)
    out, lse = torch.ops.rove.attention_varlen(
        q, k, v, cu_seqlens_q, cu_seqlens_k, q_pos, kv_pos, rotate, causal, window, softcap,
        scale, rope_json, sinks, q_angles, kv_angles)
    return (out, lse) if return_lse else out


# ---- rove::gla -----------------------------------------------------------------------------
# rove.gla / rove.gla_recurrent as an op: (out, final_state) from q, k, g [B, T, H, K] (or
# 3-D [T, H, K]), v [..., V] float32, optional float64 angles [..., rotary_dim/2], an
# optional float32 initial state and optional cu_seqlens (packed sequences: batch 1, states
# [N, H, K, V]). The final state is always returned (an op's outputs are fixed); its
# gradient, and the output's, flow into the backward op rove::gla_backward.
def _gla_plan(q, v, scale, rotate, rotary_dim, pairing, chunk, with_angles):
    from .gla import _plan as gla_plan
    return gla_plan(q.shape[-2], q.shape[-1], v.shape[-1], scale=scale,
                    rotate=_flags(rotate) if with_angles else "none", rotary_dim=rotary_dim,
                    pairing=pairing, chunk=chunk or None, isa="auto", threads=None)


def _gla_cu(cu):
    return None if cu is None else _varlen._cu(cu, "cu_seqlens", None)  # a private int32 copy


@torch.library.custom_op("rove::gla", mutates_args=())
def _gla_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
            angles: Optional[torch.Tensor], initial_state: Optional[torch.Tensor],
            cu_seqlens: Optional[torch.Tensor], scale: Optional[float], rotate: str,
            rotary_dim: int, pairing: str, chunk: int, recurrent: bool
            ) -> Tuple[torch.Tensor, torch.Tensor]:
    _no_forward_ad("rove::gla")
    plan = _gla_plan(q, v, scale, rotate, rotary_dim, pairing, chunk, angles is not None)
    fn = "rove_gla_recurrent" if recurrent else "rove_gla_forward"
    out, fs = plan._run(fn, q, k, v, g, angles, initial_state, True, None, _gla_cu(cu_seqlens))
    return out, fs


def _gla_state_shape(q, v, cu):
    H, K, V = q.shape[-2], q.shape[-1], v.shape[-1]
    if cu is not None:
        return (cu.shape[0] - 1, H, K, V)
    return (q.shape[0], H, K, V) if q.dim() == 4 else (H, K, V)


@_gla_op.register_fake
def _(q, k, v, g, angles, initial_state, cu_seqlens, scale, rotate, rotary_dim, pairing,
      chunk, recurrent):
    name = "rove::gla"
    _check_devices(name, q, k, v, g, angles, initial_state, cu_seqlens)
    for t in (q, k, v, g):
        torch._check(t.dtype == torch.float32, lambda: f"{name}: q, k, v and g are float32")
    torch._check_value(q.dim() in (3, 4) and k.shape == q.shape and g.shape == q.shape and
                       v.shape[:-1] == q.shape[:-1], lambda: (
                           f"{name}: q, k, g [batch, seq, H, key_dim] (or 3-D) and v [..., "
                           f"value_dim] (got {tuple(q.shape)}, {tuple(k.shape)}, "
                           f"{tuple(g.shape)}, {tuple(v.shape)})"))
    if cu_seqlens is not None:
        torch._check_value(cu_seqlens.dim() == 1 and cu_seqlens.shape[0] >= 2 and
                           (q.dim() == 3 or q.shape[0] == 1), lambda: (
                               f"{name}: cu_seqlens is [N + 1], N >= 1, with one row of q"))
    torch._check_value(all(n > 0 for n in q.shape[:-2]), lambda: (
        f"{name}: q has an empty axis (shape {tuple(q.shape)})"))
    if not _tracing() and _concrete(q.shape[-2], q.shape[-1], v.shape[-1]):
        _gla_plan(q, v, scale, rotate, rotary_dim, pairing, chunk, angles is not None)
    if angles is not None:  # float64 [..., H, rotary_dim / 2], rotary_dim 0 = key_dim
        torch._check_type(angles.dtype == torch.float64, lambda: (
            f"{name}: angles must be float64 (got {angles.dtype})"))
        want = tuple(q.shape[:-1]) + ((rotary_dim or q.shape[-1]) // 2,)
        torch._check_value(tuple(angles.shape) == want, lambda: (
            f"{name}: angles has shape {tuple(angles.shape)}, expected {want}"))
    shape = _gla_state_shape(q, v, cu_seqlens)
    if initial_state is not None:
        torch._check_value(tuple(initial_state.shape) == tuple(shape), lambda: (
            f"{name}: initial_state must be {tuple(shape)}"))
    return q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],)), q.new_empty(shape)


@torch.library.custom_op("rove::gla_backward", mutates_args=())
def _gla_bwd_op(dout: torch.Tensor, dfinal: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
                v: torch.Tensor, g: torch.Tensor, out: torch.Tensor,
                angles: Optional[torch.Tensor], initial_state: Optional[torch.Tensor],
                cu_seqlens: Optional[torch.Tensor], scale: Optional[float], rotate: str,
                rotary_dim: int, pairing: str, chunk: int, want_angles: bool,
                want_state: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                           torch.Tensor, torch.Tensor, torch.Tensor]:
    from . import _gla_autograd
    plan = _gla_plan(q, v, scale, rotate, rotary_dim, pairing, chunk, angles is not None)
    dq, dk, dv, dg, da, ds = _gla_autograd._backward(
        plan, q, k, v, g, angles, initial_state, out, dout, dfinal, want_angles, want_state,
        cu=_gla_cu(cu_seqlens))
    empty = q.new_empty((0,))
    return (dq.contiguous(), dk.contiguous(), dv.contiguous(), dg.contiguous(),
            empty.double() if da is None else da.contiguous(),
            empty if ds is None else ds.contiguous())


@_gla_bwd_op.register_fake
def _(dout, dfinal, q, k, v, g, out, angles, initial_state, cu_seqlens, scale, rotate,
      rotary_dim, pairing, chunk, want_angles, want_state):
    da = angles.new_empty(angles.shape) if want_angles and angles is not None else \
        q.new_empty((0,), dtype=torch.float64)
    ds = q.new_empty(_gla_state_shape(q, v, cu_seqlens)) if want_state else q.new_empty((0,))
    return _f32_like(q, k, v, g) + (da, ds)


def _gla_setup_context(ctx, inputs, output):
    q, k, v, g, angles, s0, cu = inputs[:7]
    for name, t in (("q", q), ("k", k), ("v", v), ("g", g), ("initial_state", s0)):
        if t is not None and t.dtype != torch.float32:
            raise TypeError(f"rove::gla: {name} is {t.dtype}; gradients are computed for "
                            "float32 q, k, v, g and initial_state")
    out, _ = output
    ctx.save_for_backward(q, k, v, g, out, angles, s0)
    ctx.cu = None if cu is None else cu.clone()  # an in-place edit later changes nothing
    ctx.params = inputs[7:12]  # scale, rotate, rotary_dim, pairing, chunk


def _gla_backward(ctx, dout, dfinal):
    q, k, v, g, out, angles, s0 = ctx.saved_tensors
    need = ctx.needs_input_grad
    if dout is None:
        dout = torch.zeros_like(out)
    if dfinal is None:
        dfinal = torch.zeros(_gla_state_shape(q, v, ctx.cu), dtype=torch.float32)
    dq, dk, dv, dg, da, ds = torch.ops.rove.gla_backward(
        dout, dfinal, q, k, v, g, out, angles, s0, ctx.cu, *ctx.params,
        bool(angles is not None and need[4]), bool(s0 is not None and need[5]))
    return (dq, dk, dv, dg, da if angles is not None and need[4] else None,
            ds if s0 is not None and need[5] else None) + (None,) * 7


_gla_op.register_autograd(_gla_backward, setup_context=_gla_setup_context)


def gla(q, k, v, g, *, angles=None, initial_state=None, cu_seqlens=None, scale=None,
        rotate="rope", rotary_dim=0, pairing="half", chunk=None, recurrent=False,
        return_final_state=False):
    """rove.gla (recurrent=True: rove.gla_recurrent) through the rove::gla custom op (torch
    tensors; cu_seqlens an integer tensor, list or array). rotate applies only with angles.
    The op takes float32; bfloat16 / float16 inputs are cast around it (differentiable,
    traced), as rove.gla widens them: the output in q's dtype, the final state float32."""
    if isinstance(rotate, int) and not isinstance(rotate, bool):
        rotate = str(rotate)
    if torch.compiler.is_compiling():  # types only (see _scalars); the op checks values
        if scale is not None:
            _traced_type("scale", scale, "number")
        _traced_type("rotary_dim", rotary_dim, "int")
        if chunk is not None:
            _traced_type("chunk", chunk, "int")
    else:
        scale = _params.scale(scale)
        rotary_dim = _params.positive_int("rotary_dim", rotary_dim, minimum=0)
        chunk = _params.chunk(chunk)
    if cu_seqlens is not None and not isinstance(cu_seqlens, torch.Tensor):
        cu_seqlens = torch.as_tensor(np.asarray(cu_seqlens))  # a list or numpy array, as rove.gla
    # bfloat16 / float16 as rove.gla takes them: widened by (traced, differentiable) casts
    # around the float32 op, the output rounded once to q's dtype, the final state float32
    # (only half-precision tensors are cast: any other dtype reaches the op's own check)
    half = q.dtype if any(map(_tensor.is_half, (q, k, v, g, initial_state))) else None
    if half is not None:
        q, k, v, g, initial_state = map(_tensor.widened, (q, k, v, g, initial_state))
    out, fs = torch.ops.rove.gla(q, k, v, g, angles, initial_state, cu_seqlens, scale, rotate,
                                 int(rotary_dim), pairing, int(chunk or 0), bool(recurrent))
    if half is not None:
        out = out.to(half)
    return (out, fs) if return_final_state else out
