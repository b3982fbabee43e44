# SPDX-License-Identifier: MIT
"""rotate / rotate_angles: the standalone rotation R_pos (or R_pos^{-1}) of rove_rotate.

x is [batch, seq, heads, d] ("bshd"), [batch, heads, seq, d] ("bhsd"), or 3-D without
the batch axis ([n_tokens, n_heads, d] for "bshd"). A pure rotation: the YaRN attention
factor is not applied. With inplace=False the result is a new contiguous array in the
layout of x; with inplace=True x itself is rotated and returned (when its strides are not
expressible, through one copy that is written back).

x is float32, or bfloat16 / float16 (torch; numpy float16): rotated in a float32 copy and
rounded once to its dtype (inplace: written back into x).

Autograd (torch): a rotation is orthogonal, so the gradient of y = R x is dx = R^{-1} dy,
one more rove_rotate call (inverse flipped); with rotate_angles' angles requiring grad,
per pair (a, b) of the rotated dims d angle = sum over the heads of its group of
dy_b y_a - dy_a y_b (y = R(angle) x; negated for inverse), in float64. inplace=True is
refused for a tensor that requires grad.
"""
from __future__ import annotations

import numpy as np

from . import _autograd, _lib, _params, _tensor
from .attention import _BHSD_TO_BSHD, _layout, _logical, get_plan
from .rope import _PLACEMENT_NAMES, RopeConfig


def _check_inplace_grad(x, inplace):
    """inplace=True records nothing for autograd: refused for a tensor that requires grad."""
    if inplace and _tensor.is_torch(x) and x.requires_grad and \
            _tensor._torch().is_grad_enabled():
        raise RuntimeError("x requires grad: inplace=True is not differentiable (pass "
                           "inplace=False)")


def _widened_call(fn, x, inplace, *args, **kw):
    """fn on a float32 copy of half-precision x, the result rounded once to x's dtype
    (inplace: written back into x, which is returned). The casts are torch ops, so
    autograd follows them."""
    if not inplace:
        return _tensor.rounded(fn(_tensor.widened(x), *args, **kw), x.dtype)
    if _tensor.is_torch(x):
        _tensor.check_inplace(x, "x")
    elif not x.flags.writeable:
        raise ValueError("x is read-only (inplace=True)")
    _tensor.check_distinct(x, "x (inplace=True)")  # as the float32 path (_target)
    if _tensor.is_torch(x):
        x.copy_(fn(_tensor.widened(x.detach()), *args, **kw))  # copy_ bumps x's version
        return x
    np.copyto(x, _tensor.rounded(fn(_tensor.widened(x), *args, **kw), x.dtype))
    return x


def _target(x, v: _tensor.View, inplace: bool):
    """The array that gets rotated: x itself, or a fresh C-contiguous copy of it."""
    if inplace:
        if not v.torch and not x.flags.writeable:
            raise ValueError("x is read-only (inplace=True)")
        _tensor.check_inplace(x, "x")
        _tensor.check_distinct(x, "x (inplace=True)")
        return x
    if v.torch:
        return x.detach().clone(memory_format=__import__("torch").contiguous_format)
    return np.array(x, dtype=np.float32, order="C", copy=True)


def _modes(lv: _tensor.View):
    """How to pass a [b, s, h, d] tensor to rove_rotate in one call:
    ("tokens", stride): rows b*s + t of h heads (bshd-like); ("heads", stride): rows
    (b, h, t) of one head each (contiguous bhsd); or None."""
    b, s, h, d = lv.shape
    ts = _tensor.token_stride(lv.shape, lv.strides)
    if ts is not None:
        return "tokens", ts
    sb, ss, sh, sd = lv.strides
    if None in lv.strides or sd != 1:
        return None
    step = ss if s > 1 else (sh if h > 1 else (sb if b > 1 else d))
    if step >= d and (h == 1 or sh == s * step) and (b == 1 or sb == h * s * step):
        return "heads", step
    return None


def _run(x, rope, layout, inplace, threads, inverse, call, per_token_tables=False):
    """Shared body: validation, target, mode; ``call(plan, ptr, n_tokens, n_heads,
    stride, mode, shape)`` does the C call. per_token_tables (rotate by positions): the
    "heads" mode (one row per (b, h, t)) would build a token's cos/sin table once per head,
    which costs more than copying the tensor token-major and back (7-14x slower at 512-2048
    tokens, 32 heads), so with several heads that mode goes through the copy."""
    bhsd = _layout(layout)
    if inverse not in (False, True, 0, 1):
        raise ValueError(f"inverse must be a bool (got {inverse!r})")
    v = _tensor.view(x, "x")
    ndim = len(v.shape)
    if ndim not in (3, 4):
        raise ValueError(f"x must be 4-D (or 3-D without batch), got shape {tuple(v.shape)}")
    b, s, h, d = _logical(v, "x", bhsd, ndim).shape
    if min(b, s, h) <= 0:
        raise ValueError(f"x has an empty axis (shape {tuple(v.shape)})")
    plan = get_plan(1, 1, d, rotate="rope", rope=rope, threads=threads)
    t = _target(x, v, inplace)
    lv = _logical(_tensor.view(t, "x"), "x", bhsd, ndim)
    mode = _modes(lv)
    if per_token_tables and mode is not None and mode[0] == "heads" and h > 1:
        mode = None
    if inplace and v.torch and _tensor.is_lazy(x):
        mode = None  # a lazy view: view() read it into a copy, where the rotation was lost
    back = None
    if mode is None:  # strides rove_rotate cannot take, "heads" with per-token tables, or
        # x in place through a lazy view: rotated in a dense copy, then copied back
        src = _tensor.View(t[None] if ndim == 3 else t, v.torch, 0, (), ())
        lv = _tensor.dense_copy(src, _BHSD_TO_BSHD if bhsd else (0, 1, 2, 3))
        back, mode = lv, ("tokens", h * d)
    kind, stride = mode
    n_tokens, n_heads = (b * s, h) if kind == "tokens" else (b * h * s, 1)
    if n_tokens > 2 ** 31 - 1:
        raise ValueError("x has more than 2^31-1 rows")
    call(plan, lv.ptr, n_tokens, n_heads, stride, kind, (b, s, h, d))
    if back is None and inplace:
        _tensor.mark_written(t)
    if back is not None:
        res = back.obj
        if bhsd:
            res = res.transpose(1, 2) if v.torch else np.transpose(res, _BHSD_TO_BSHD)
        res = res[0] if ndim == 3 else res
        _tensor.copies += 1
        if v.torch:
            t.copy_(res)
        else:
            np.copyto(t, res)
    return t


def rotate(x, pos=None, *, rope=None, inverse=False, layout="bshd", inplace=False,
           threads=None):
    """x rotated by R_pos (inverse: R_pos^{-1}) with the frequencies of ``rope``.

    pos: None (0 .. seq-1 in every batch row), int positions [seq] or [batch, seq].
    Differentiable in x (torch; see the module's docstring), float32 or half precision.
    """
    _check_inplace_grad(x, inplace)
    if _tensor.is_half(x):
        return _widened_call(rotate, x, inplace, pos, rope=rope, inverse=inverse,
                             layout=layout, threads=threads)
    if not inplace and _autograd.needs_grad(x):
        return _rotate_autograd(x, _autograd.frozen(pos, "pos"), None, rope, inverse,
                                layout, threads)
    return _rotate_plain(x, pos, rope, inverse, layout, inplace, threads)


def _rotate_plain(x, pos, rope, inverse, layout, inplace, threads):
    """rotate() without autograd (x a float32 array or a tensor with nothing to record)."""
    def call(plan, ptr, n_tokens, n_heads, stride, kind, shape):
        b, s, h, d = shape
        if pos is None:
            p = None if (kind == "tokens" and b == 1) else np.arange(s, dtype=np.int32)
        else:
            p, _ = _tensor.positions(pos, "pos", b, s)
        if p is not None:
            p = np.broadcast_to(p, (b, s))
            if kind == "heads":
                p = np.broadcast_to(p[:, None, :], (b, h, s))
            p = np.ascontiguousarray(p, dtype=np.int32)
        pp = None if p is None else p.__array_interface__["data"][0]
        st = _lib.lib.rove_rotate(plan._ptr, ptr, n_tokens, n_heads, stride, pp, int(inverse))
        _lib.check("rove_rotate", st)

    return _run(x, rope, layout, inplace, threads, inverse, call, per_token_tables=True)


def rotate_angles(x, angles, *, rope=None, inverse=False, layout="bshd", inplace=False,
                  threads=None):
    """x rotated by explicit (Selective RoPE) angles: float64 [batch, seq, angle_heads,
    rotary_dim/2] (3-D without batch), where angle_heads divides the heads of x and a
    head uses the angles of its group (h // (heads / angle_heads)). ``rope`` gives
    rotary_dim and the pairing; its frequencies are not used. Differentiable in x and in
    float64 torch angles (see the module's docstring)."""
    _check_inplace_grad(x, inplace)
    angles_grad = _tensor.is_torch(angles) and angles.requires_grad and \
        _tensor._torch().is_grad_enabled()
    if inplace and angles_grad:
        raise RuntimeError("angles require grad: inplace=True is not differentiable (pass "
                           "inplace=False)")
    if _tensor.is_half(x):
        return _widened_call(rotate_angles, x, inplace, angles, rope=rope, inverse=inverse,
                             layout=layout, threads=threads)
    if not inplace and (angles_grad or _autograd.needs_grad(x, angles)):
        if not _tensor.is_torch(x):
            raise TypeError("x must be a torch tensor when the angles require grad")
        return _rotate_autograd(x, None, _autograd.angle_tensor(angles), rope, inverse,
                                layout, threads)
    return _rotate_angles_plain(x, angles, rope, inverse, layout, inplace, threads)


def _rotate_angles_plain(x, angles, rope, inverse, layout, inplace, threads):
    """rotate_angles() without autograd."""
    if _tensor.is_torch(angles):
        if angles.dtype != _tensor._torch().float64:  # (numpy() cannot take bf16)
            raise TypeError(f"angles has dtype {angles.dtype}; librove needs float64 and "
                            "never casts silently")
        angles = angles.detach()

    def call(plan, ptr, n_tokens, n_heads, stride, kind, shape):
        b, s, h, d = shape
        half = plan.rotary_dim // 2
        a = _tensor.to_numpy(angles, "angles")
        if a.dtype != np.float64:
            raise TypeError(f"angles has dtype {a.dtype}; librove needs float64 and never "
                            "casts silently")
        if a.ndim == 3:
            a = a[None]
        if a.ndim != 4 or a.shape[0] != b or a.shape[1] != s or a.shape[3] != half:
            raise ValueError(f"angles has shape {a.shape}; expected [batch={b}, seq={s}, "
                             f"angle_heads, rotary_dim/2={half}]")
        ah = a.shape[2]
        if ah <= 0 or h % ah:
            raise ValueError(f"angle_heads ({ah}) must divide the {h} heads of x")
        if not np.all(np.isfinite(a)):
            raise ValueError("angles has non-finite values")
        if kind == "heads":  # one head per row: angles of head i's group, rows (b, h, t)
            a = np.transpose(a[:, :, np.arange(h) // (h // ah), :], (0, 2, 1, 3))
            ah = 1
        a = np.ascontiguousarray(a)
        st = _lib.lib.rove_rotate_angles(plan._ptr, ptr, n_tokens, n_heads, stride,
                                         a.__array_interface__["data"][0], ah, int(inverse))
        _lib.check("rove_rotate_angles", st)

    return _run(x, rope, layout, inplace, threads, inverse, call)


# ---- autograd ------------------------------------------------------------------------------
_FUNCTION = None


def _pairs(t, rope, d):
    """The two members (a, b) of every rotation pair of t [..., d] (views): rotary_dim r
    (0: d) placed first or last, pairs (i, i + r/2) ("half") or (2i, 2i + 1)."""
    rope = RopeConfig() if rope is None else rope
    r = rope.rotary_dim or d
    place = rope.placement
    if isinstance(place, (int, np.integer)) and not isinstance(place, bool):
        place = _PLACEMENT_NAMES.get(int(place), place)
    blk = t[..., d - r:] if place == "last" else t[..., :r]
    if rope.pairing == "half":
        return blk[..., : r // 2], blk[..., r // 2:]
    return blk[..., 0::2], blk[..., 1::2]


def _rotate_autograd(x, pos, angles, rope, inverse, layout, threads):
    global _FUNCTION
    if _FUNCTION is None:
        def run(x, angles, pos, rope, inverse, layout, threads):
            if angles is None:
                return (_rotate_plain(x.detach(), pos, rope, inverse, layout, False, threads),)
            return (_rotate_angles_plain(x.detach(), angles.detach(), rope, inverse, layout,
                                         False, threads),)

        def save(inputs, outputs):
            x, angles, pos, rope, inverse, layout, threads = inputs
            # the angles for the inverse rotation; the output for the angles' gradient
            # only (rotate by positions saves nothing: an in-place edit of its output, as
            # a scaling of q after RoPE, must not refuse a backward that does not read it;
            # whether angles require grad is not decided here, as torch.func's grad
            # does not show it to setup_context)
            y = outputs[0] if angles is not None else None
            return (angles, y), (pos, rope, inverse, layout, threads)

        def grads(meta, need, saved, grad_outputs):
            pos, rope, inverse, layout, threads = meta
            angles, y = saved
            dy = grad_outputs[0]
            if dy is None:
                return (None,) * 7
            dx = da = None
            if need[0]:  # R^{-1} dy (a fresh tensor: rotate copies)
                dx = _rotate_plain(dy, pos, rope, not inverse, layout, False, threads) \
                    if angles is None else \
                    _rotate_angles_plain(dy, angles.detach(), rope, not inverse, layout, False,
                                         threads)
            if angles is not None and need[1]:
                bhsd = layout == "bhsd"
                yy, gg = (t.detach().double() for t in (y, dy))
                if yy.dim() == 3:
                    yy, gg = yy[None], gg[None]
                if bhsd:
                    yy, gg = yy.transpose(1, 2), gg.transpose(1, 2)
                d = yy.shape[-1]
                (ya, yb), (ga, gb) = _pairs(yy, rope, d), _pairs(gg, rope, d)
                per_head = gb * ya - ga * yb  # [b, s, h, r/2]
                B, S, Hh, P = per_head.shape
                ah = angles.shape[-2]
                da = per_head.reshape(B, S, ah, Hh // ah, P).sum(3)
                if inverse:
                    da = -da
                da = da.reshape(angles.shape).to(angles.dtype)
            return (dx, da) + (None,) * 5

        _FUNCTION = _autograd.make_function("RotateFunction", run, save, grads)
    return _FUNCTION.apply(x, angles, pos, rope, inverse, layout, threads)[0]
