# SPDX-License-Identifier: MIT
"""Plan, attention() and the plan cache.

Tensors: q [batch, q_len, n_heads, d] and k, v [batch, kv_len, n_kv_heads, d] in the
default layout "bshd"; layout="bhsd" takes [batch, heads, seq, d] (torch / HF). 3-D
tensors are one sequence without the batch axis. On the CPU; each of q, k and v is
float32, bfloat16 (torch) or float16 (torch or numpy), each its own: librove widens them
exactly, computes in fp32 and rounds the output once (round-to-nearest-even), so a call on
bf16/f16 tensors equals the call on their float32 casts with the output cast back, bit for
bit (rove_attention_forward_typed). Other dtypes raise TypeError (never a silent cast).

Zero-copy: librove takes a pointer and a token stride per tensor and needs the heads and
dims of one token dense (strides (.., >= h*d, d, 1) in bshd order) with batch row b at
b * len * token_stride. Such tensors -- contiguous bshd, views into a fused QKV buffer,
and the bhsd views that HF makes with x.view(b, s, h, d).transpose(1, 2) -- are read in
place. Anything else (e.g. a contiguous [b, h, s, d] tensor, where the tokens of one
head are adjacent) is copied once into a contiguous bshd buffer.

Output: a fresh output (of q's dtype; the LSE is float32) is a contiguous
[batch, q_len, n_heads, d] buffer, returned as
is for "bshd" and as its [batch, heads, q_len, d] view (``out.transpose(1, 2)``, not
contiguous: ``.transpose(1, 2).reshape(b, s, h*d)`` is then free) for "bhsd". A given
``out=`` (float32, bfloat16 or float16: its dtype is the output's type) with
expressible strides is written in place; otherwise the result is computed
into a temporary and copied into it.
"""
from __future__ import annotations

import ctypes
import math

import numpy as np

from . import _autograd, _lib, _params, _tensor
from .rope import RopeConfig

_BHSD_TO_BSHD = (0, 2, 1, 3)  # the same permutation both ways


def _layout(layout: str) -> bool:
    """True for bhsd."""
    if layout not in ("bshd", "bhsd"):
        raise ValueError(f"layout must be 'bshd' or 'bhsd' (got {layout!r})")
    return layout == "bhsd"


def _logical(v: _tensor.View, name: str, bhsd: bool, ndim: int) -> _tensor.View:
    """v as [b, s, h, d] (3-D gets a batch axis of 1; bhsd is permuted; no copy)."""
    if len(v.shape) != ndim:
        raise ValueError(f"{name} has {len(v.shape)} dims, q has {ndim}: give q, k, v the "
                         "same rank (4-D [batch, ...] or 3-D without batch)")
    if ndim == 3:
        v = _tensor.View(v.obj, v.torch, v.ptr, (1,) + tuple(v.shape), (0,) + tuple(v.strides),
                         v.dtype)
    elif ndim != 4:
        raise ValueError(f"{name} must be 4-D (or 3-D without batch), got shape {v.shape}")
    return _tensor.permuted(v, _BHSD_TO_BSHD) if bhsd else v


def _strided(v: _tensor.View, name: str, bhsd: bool, ndim: int):
    """(View of a bshd-expressible tensor, token stride); copies when needed."""
    ts = _tensor.token_stride(v.shape, v.strides)
    if ts is None:
        obj = v.obj
        if ndim == 3:
            obj = obj[None]
        src = _tensor.View(obj, v.torch, 0, (), (), v.dtype)
        order = _BHSD_TO_BSHD if bhsd else (0, 1, 2, 3)
        v = _tensor.dense_copy(src, order)
        ts = v.shape[2] * v.shape[3]
    return v, ts


def _user_view(x, torch_kind: bool, bhsd: bool, ndim: int):
    """A bshd buffer [b, s, h, d] as the caller's layout and rank (no copy)."""
    if bhsd:
        x = x.transpose(1, 2) if torch_kind else np.transpose(x, _BHSD_TO_BSHD)
    return x[0] if ndim == 3 else x


def _angles(a, name, shape):
    """float64 C-contiguous angles of exactly ``shape`` (a copy if not contiguous)."""
    obj, ptr = _tensor.contiguous(a, name, np.float64, shape)
    arr = obj.numpy() if _tensor.is_torch(obj) else obj
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} has non-finite values")
    return obj, ptr


def _sinks(sinks, H):
    """Attention sinks as librove reads them: (a float32 [H] array or tensor, kept alive
    while C reads it, and its address), or (None, None). A numpy array or CPU torch
    tensor of any float dtype (gpt-oss keeps them in the model's dtype), one finite logit
    per query head."""
    if sinks is None:
        return None, None
    if _tensor.is_torch(sinks):  # a float32 CPU tensor is read in place
        torch = _tensor._torch()
        if sinks.device.type != "cpu":
            raise ValueError(f"sinks is on {sinks.device}; librove runs on the CPU")
        if not sinks.is_floating_point():
            raise TypeError(f"sinks is {sinks.dtype}: expected a float tensor")
        # the differentiable entries reach here with grad off (inside their autograd
        # Function); anywhere else a gradient of the sinks would be silently dropped
        _tensor._no_grad_wanted(sinks, "sinks", torch)
        t = _tensor.plain(sinks)  # (a lazily negated view's memory holds -sinks)
        if t.dtype != torch.float32 or not t.is_contiguous():
            t = t.to(torch.float32).contiguous()
        if tuple(t.shape) != (H,):
            raise ValueError(f"sinks has shape {tuple(t.shape)}; expected ({H},): one logit "
                             "per query head")
        if not all(map(math.isfinite, t.tolist())):  # (numpy's isfinite: ~35 us in a decode step)
            raise ValueError("sinks must be finite")
        return t, t.data_ptr()
    arr = np.asarray(sinks)
    if arr.dtype.kind != "f":
        raise TypeError(f"sinks is {arr.dtype}: expected a float array")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if arr.shape != (H,):
        raise ValueError(f"sinks has shape {tuple(arr.shape)}; expected ({H},): one logit "
                         "per query head")
    if not all(map(math.isfinite, arr.tolist())):
        raise ValueError("sinks must be finite")
    return arr, arr.__array_interface__["data"][0]


class Plan(_lib.SharedHandle):
    """An immutable, validated attention configuration (rove_plan_create).

    Plan(n_heads, n_kv_heads, head_dim, *, rotate="rove", causal=True, window=0,
    softcap=0.0, scale=None, rope=None, isa="auto", threads=None). ``rotate`` is "rove"
    (Q|K|V|O), "rope" (Q|K), "none" or an int of rove.ROTATE_* flags; ``scale`` None is
    1/sqrt(head_dim) (librove takes scale and softcap as float32); ``window`` W > 0 lets
    query i (position P_i) see key j (position p_j) only when P_i - p_j < W (causal) or
    |P_i - p_j| < W (not causal), as transformers' ``sliding_window`` = W; that is
    flash-attn's ``window_size=(W - 1, 0)``, not ``(W, 0)`` (not causal: ``(W - 1, W -
    1)``); 0 is no window; ``rope`` a RopeConfig
    (None: the defaults); ``threads`` None is rove_default_threads(). Thread-safe: one
    plan may run on many threads at once. Freed when garbage-collected.
    """
    __slots__ = ("_ptr", "_finalizer", "n_heads", "n_kv_heads", "head_dim", "rotate",
                 "causal", "window", "softcap", "scale", "rope", "rotary_dim", "isa",
                 "threads", "__weakref__")

    def __init__(self, n_heads, n_kv_heads, head_dim, *, rotate="rove", causal=True,
                 window=0, softcap=0.0, scale=None, rope=None, isa="auto", threads=None):
        c = _lib.AttentionConfig()
        H = _params.positive_int("n_heads", n_heads)
        Hk = _params.positive_int("n_kv_heads", n_kv_heads)
        d = _params.positive_int("head_dim", head_dim, minimum=2)
        if H % Hk:
            raise ValueError(f"n_heads ({H}) must be a multiple of n_kv_heads ({Hk})")
        if d % 2:
            raise ValueError(f"head_dim must be even (got {d})")
        _lib.lib.rove_attention_config_init(c, H, Hk, d)
        c.rotate = _params.rotate_flags(rotate)
        c.causal = int(_params.flag("causal", causal))
        c.window = _params.positive_int("window", window, minimum=0)
        c.softcap = _params.float32_param("softcap", softcap, nonneg=True)
        sc = _params.scale(scale)
        c.scale = 0.0 if sc is None else sc
        rope = RopeConfig() if rope is None else rope
        if not isinstance(rope, RopeConfig):
            raise TypeError(f"rope must be a rove.RopeConfig, not {type(rope).__name__}")
        if (rope.rotary_dim or d) > d:
            raise ValueError(f"RopeConfig.rotary_dim {rope.rotary_dim} exceeds head_dim {d}")
        c.rope, keep = rope.to_c(d)
        c.isa = _params.isa(isa)
        c.n_threads = _params.threads(threads)
        ptr = ctypes.c_void_p()
        st = _lib.lib.rove_plan_create(c, ctypes.byref(ptr))
        del keep
        _lib.check("rove_plan_create", st,
                   f"head_dim {d} is above librove's ROVE_MAX_HEAD_DIM ({_lib.MAX_HEAD_DIM})"
                   if d > _lib.MAX_HEAD_DIM else
                   rope._refusal(d) if st == _lib.ERR_INVALID_ARGUMENT and d >= 2 and d % 2 == 0
                   else "")
        self._ptr = ptr.value
        self._finalizer = _lib.finalizer(self, _lib.lib.rove_plan_destroy, ptr.value)
        r = _lib.AttentionConfig()
        _lib.check("rove_plan_config", _lib.lib.rove_plan_config(self._ptr, r))
        self.n_heads, self.n_kv_heads, self.head_dim = H, Hk, d
        self.rotate, self.causal, self.window = int(r.rotate), bool(r.causal), int(r.window)
        self.softcap, self.scale = float(r.softcap), float(r.scale)  # as float32 resolved
        self.rope, self.rotary_dim = rope, int(r.rope.rotary_dim)
        self.isa = _lib.isa_name(_lib.lib.rove_plan_isa(self._ptr))
        self.threads = int(_lib.lib.rove_plan_threads(self._ptr))

    @property
    def config(self) -> dict:
        """The validated configuration (rove_plan_config: rotary_dim, scale resolved)."""
        return {k: getattr(self, k) for k in ("n_heads", "n_kv_heads", "head_dim", "rotate",
                                              "causal", "window", "softcap", "scale", "rope",
                                              "rotary_dim", "isa", "threads")}

    def __repr__(self):
        return (f"rove.Plan(n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}, "
                f"head_dim={self.head_dim}, rotate={self.rotate}, causal={self.causal}, "
                f"window={self.window}, softcap={self.softcap}, scale={self.scale:.6g}, "
                f"isa={self.isa!r}, threads={self.threads})")

    def attention(self, q, k, v, *, q_pos=None, kv_pos=None, layout="bshd",
                  return_lse=False, out=None, q_angles=None, kv_angles=None, sinks=None):
        """out = attention(q, k, v) with this plan (rove_attention_forward; DESIGN.md §1).

        q, k, v: float32, bfloat16 or float16, each its own (rove_attention_forward_typed:
        exact widening, fp32 arithmetic, one rounding of the output); the output has q's
        dtype, or out='s (float32, bfloat16 or float16).

        q_pos: None (P_i = kv_len - q_len + i, bottom-right aligned), or int positions
        [q_len] (shared by the batch) or [batch, q_len]; kv_pos likewise (None: 0..kv_len-1).
        q_angles / kv_angles: Selective RoPE angles, float64 [batch, len, n_kv_heads,
        rotary_dim/2] (both or neither), replacing pos * w_k in every rotation.
        sinks: attention sinks (gpt-oss), one logit per query head, [n_heads] of any float
        dtype: each softmax row gains a term e^(sinks[h]), a key of zero value that every
        query sees (not scaled, softcapped or masked); differentiable like q, k, v.
        return_lse: also return the log-sum-exp, float32 [batch, n_heads, q_len].
        """
        if _autograd.needs_grad(q, k, v, q_angles, kv_angles, sinks):  # torch inputs that require grad
            _layout(layout)
            return _autograd.attention(self, q, k, v, q_pos, kv_pos, layout, return_lse, out,
                                       q_angles, kv_angles, sinks)
        return _forward(self, q, k, v, q_pos, kv_pos, layout, return_lse, out, q_angles,
                        kv_angles, sinks=sinks)

    # Used by KVCache and rotate: the raw pointer of the plan (borrowed).
    @property
    def _handle(self):
        return self._ptr


def _prepare_out(out, torch_kind, bhsd, ndim, shape4, name="out", dtype=_tensor.F32):
    """(user-visible result, View for C, token stride, copy-back target or None). A fresh
    output has element type ``dtype`` (q's), a given one its own (View.dtype)."""
    b, s, h, d = shape4
    if out is None:
        buf, ptr = _tensor.empty(torch_kind, shape4, rdt=dtype)
        v = _tensor.View(buf, torch_kind, ptr, shape4, (s * h * d, h * d, d, 1), dtype)
        return _user_view(buf, torch_kind, bhsd, ndim), v, h * d, None
    ov = _tensor.view_float(out, name)
    resolved = ov.torch and ov.obj is not out  # a conj / neg view: ov holds a resolved copy
    if ov.torch != torch_kind:
        raise TypeError(f"{name} must be the same kind (numpy/torch) as q")
    if len(ov.shape) != ndim:
        raise ValueError(f"{name} has shape {tuple(ov.shape)}; expected the shape of q")
    _tensor.check_inplace(out, name)
    _tensor.check_distinct(out, name)
    if not ov.torch and not out.flags.writeable:
        raise ValueError(f"{name} is read-only")
    lv = _logical(ov, name, bhsd, ndim)
    if tuple(lv.shape) != tuple(shape4):
        raise ValueError(f"{name} has shape {tuple(ov.shape)}; expected the shape of q")
    ts = _tensor.token_stride(lv.shape, lv.strides)
    if ts is not None and not resolved:
        return out, lv, ts, None
    buf, ptr = _tensor.empty(torch_kind, shape4, rdt=ov.dtype)  # computed here, copied back
    v = _tensor.View(buf, torch_kind, ptr, shape4, (s * h * d, h * d, d, 1), ov.dtype)
    return out, v, h * d, _user_view(buf, torch_kind, bhsd, ndim)


def _refuse_aside_overlap(fn, out, tmp, **inputs):
    """An out= computed aside (strides librove cannot take: tmp) is copied in after the
    call, so librove's own check, which refuses an output over an input it reads, never
    sees it: the same rule here, before the call, against the same inputs (those the call
    reads: a private copy of an input is no overlap), so that whether such an out= is
    refused does not depend on its strides."""
    if out is not None and tmp is not None:
        why = _tensor.overlap_detail(out, **inputs)
        if why:
            _lib.check(fn, _lib.ERR_INVALID_ARGUMENT, why)


def _copy_back(out, tmp, torch_kind):
    _tensor.copies += 1
    if torch_kind:
        out.copy_(tmp)
    else:
        np.copyto(out, tmp)


def _kv_apart(lk, lv):
    """K and V ([b, s, h, d] views) whose heads lie apart, as librove reads them in place
    (token, head, batch strides of each; one head stride for both), or None: the heads of
    a token side by side (the token-stride form), or a layout only a copy can give."""
    if (_tensor.token_stride(lk.shape, lk.strides) is not None and
            _tensor.token_stride(lv.shape, lv.strides) is not None):
        return None
    sk, sv = _tensor.kv_strides(lk.shape, lk.strides), _tensor.kv_strides(lv.shape, lv.strides)
    if sk is None or sv is None or sk[1] != sv[1]:
        return None
    return sk, sv


def _forward(plan, q, k, v, q_pos, kv_pos, layout, return_lse, out, q_angles, kv_angles,
             cache=None, plan_kw=None, sinks=None):
    """The shared body of attention(), Plan.attention and KVCache.attention (k, v None for
    a cache). With plan None, the plan is get_plan(heads of q and k, **plan_kw), fetched
    after every tensor check (so that bad input never reaches librove, not even
    rove_plan_create)."""
    bhsd = _layout(layout)
    vq = _tensor.view_float(q, "q")
    ndim = len(vq.shape)
    lq = _logical(vq, "q", bhsd, ndim)
    B, Lq, H, D = lq.shape
    if plan is None:
        if D < 2 or D % 2:
            raise ValueError(f"head_dim must be even and >= 2 (q has head_dim {D})")
        rope = plan_kw.get("rope")
        rotary_dim = rope.rotary_dim or D if isinstance(rope, RopeConfig) else D
    else:
        rotary_dim = plan.rotary_dim
    if plan is not None and (H, D) != (plan.n_heads, plan.head_dim):
        raise ValueError(f"q has {H} heads of dim {D}; the plan has n_heads={plan.n_heads}, "
                         f"head_dim={plan.head_dim}")
    if cache is None:
        vk, vv = _tensor.view_float(k, "k"), _tensor.view_float(v, "v")
        if vk.torch != vq.torch or vv.torch != vq.torch:
            raise TypeError("q, k and v must all be numpy arrays or all torch tensors")
        lk, lv = _logical(vk, "k", bhsd, ndim), _logical(vv, "v", bhsd, ndim)
        if lk.shape != lv.shape:
            raise ValueError(f"k and v shapes differ: {tuple(vk.shape)} vs {tuple(vv.shape)}")
        Bk, Lk, Hk, Dk = lk.shape
        if Bk != B:
            raise ValueError(f"batch of q ({B}) and k/v ({Bk}) differ")
        if Dk != D:
            raise ValueError(f"head_dim of q ({D}) and k/v ({Dk}) differ")
        if plan is None and (Hk <= 0 or H % Hk):
            raise ValueError(f"q has {H} heads, k has {Hk}: n_heads must be a multiple of "
                             "n_kv_heads (GQA/MQA)")
        if plan is not None and Hk != plan.n_kv_heads:
            raise ValueError(f"k/v have {Hk} heads; the plan has n_kv_heads={plan.n_kv_heads}")
        if Lk <= 0 and B > 0 and Lq > 0:
            raise ValueError("kv_len must be > 0 (queries need keys)")
    else:
        lk = lv = None
        Hk = plan.n_kv_heads
        if B != cache.batch:
            raise ValueError(f"q has batch {B}; the cache holds {cache.batch} rows")
        Lk = 0
    empty = B == 0 or Lq == 0  # nothing to attend: an empty output, as torch's SDPA gives
    if cache is not None and not empty and len(cache) == 0:
        raise ValueError("the KV cache is empty: append() first")
    if max(B, Lq, Lk) > 2 ** 31 - 1:
        raise ValueError("batch and sequence lengths must fit int32")

    a = _lib.AttentionArgs()
    a.batch, a.q_len, a.kv_len = B, Lq, Lk
    lq, a.q_stride = _strided(lq, "q", bhsd, ndim)
    a.q = lq.ptr
    if cache is None:
        kv = _kv_apart(lk, lv)
        if kv is not None:  # heads apart ([b, h, s, d], transformers' caches): in place
            (a.k_stride, a.kv_head_stride, a.k_batch_stride), (a.v_stride, _, a.v_batch_stride) = kv
        else:
            lk, a.k_stride = _strided(lk, "k", bhsd, ndim)
            lv, a.v_stride = _strided(lv, "v", bhsd, ndim)
        a.k, a.v = lk.ptr, lv.ptr
    qp, a.q_pos = _tensor.positions(q_pos, "q_pos", B, Lq)
    kp, a.kv_pos = (None, None) if cache is not None else _tensor.positions(kv_pos, "kv_pos", B, Lk)
    if cache is not None and kv_pos is not None:
        raise ValueError("kv_pos is not taken with a KV cache (the cache holds positions)")
    sk, a.sinks = _sinks(sinks, H)
    half = rotary_dim // 2
    qa = ka = None
    if cache is None and (q_angles is None) != (kv_angles is None):
        raise ValueError("q_angles and kv_angles go together: give both or neither")
    if cache is not None and kv_angles is not None:
        raise ValueError("kv_angles is not taken with a KV cache (it stores rotated K/V)")
    if q_angles is not None:
        shp = (B, Lq, Hk, half) if ndim == 4 else (Lq, Hk, half)
        qa, a.q_angles = _angles(q_angles, "q_angles", shp)
    if kv_angles is not None:
        shp = (B, Lk, Hk, half) if ndim == 4 else (Lk, Hk, half)
        ka, a.kv_angles = _angles(kv_angles, "kv_angles", shp)

    result, ov, a.out_stride, tmp = _prepare_out(out, vq.torch, bhsd, ndim, (B, Lq, H, D),
                                                 dtype=vq.dtype)
    types = None  # all float32: the untyped calls
    if (vq.dtype, ov.dtype) != (_tensor.F32, _tensor.F32) or (
            cache is None and (lk.dtype, lv.dtype) != (_tensor.F32, _tensor.F32)):
        types = _lib.TensorTypes(vq.dtype, lk.dtype if cache is None else _tensor.F32,
                                 lv.dtype if cache is None else _tensor.F32, ov.dtype)
    if plan is None:
        plan = get_plan(H, Hk, D, **plan_kw)
    if empty:  # every check above passed; librove is not called for no rows
        lse = _tensor.empty(vq.torch, (B, H, Lq))[0] if return_lse else None
        if out is not None:  # written (with nothing), as any call's out= is marked
            _tensor.mark_written(result)
        return (result, (lse[0] if ndim == 3 else lse)) if return_lse else result
    a.out = ov.ptr
    lse = None
    if return_lse:
        lse, a.lse = _tensor.empty(vq.torch, (B, H, Lq))
    fn = ("rove_attention_forward" if cache is None else "rove_kv_cache_attention") + (
        "" if types is None else "_typed")
    # (the overlap C refuses is with what it is given: q, k and v as read -- a private copy
    # where their layout needed one -- and the positions, angles and sinks as converted)
    reads = dict(q=lq.obj, k=None if lk is None else lk.obj, v=None if lv is None else lv.obj,
                 q_pos=qp, kv_pos=kp, q_angles=qa, kv_angles=ka, sinks=sk)
    _refuse_aside_overlap(fn, out, tmp, **reads)
    if cache is None and types is None:
        st = _lib.lib.rove_attention_forward(plan._ptr, a)
    elif cache is None:
        st = _lib.lib.rove_attention_forward_typed(plan._ptr, a, types)
    elif types is None:
        st = _lib.lib.rove_kv_cache_attention(cache._ptr, a)
    else:
        st = _lib.lib.rove_kv_cache_attention_typed(cache._ptr, a, types)
    why = ""
    if st == _lib.ERR_INVALID_ARGUMENT:
        why = ((out is not None and tmp is None and _tensor.overlap_detail(out, **reads))
               or (cache._attention_detail(Lq, q_pos, q_angles) if cache is not None else ""))
    del lk, lv, qp, kp, qa, ka, sk, reads  # kept alive until here: C read them
    _lib.check(fn, st, why)
    if tmp is not None:
        _copy_back(result, tmp, vq.torch)
    elif out is not None:
        _tensor.mark_written(result)
    if return_lse:
        return result, (lse[0] if ndim == 3 else lse)
    return result


def _heads(x, name, bhsd):
    """(heads, head_dim) of a 4-D or 3-D tensor in the given layout."""
    s = tuple(x.shape)
    if len(s) not in (3, 4):
        raise ValueError(f"{name} must be 4-D (or 3-D without batch), got shape {s}")
    h = s[-3] if bhsd else s[-2]
    return h, s[-1]


# ---- the plan cache ------------------------------------------------------------------
PLAN_CACHE_SIZE = 64
_plans = _lib.PlanCache(PLAN_CACHE_SIZE)


def get_plan(n_heads, n_kv_heads, head_dim, *, rotate="rove", causal=True, window=0,
             softcap=0.0, scale=None, rope=None, isa="auto", threads=None) -> Plan:
    """A cached Plan for these values (an LRU of PLAN_CACHE_SIZE plans, thread-safe)."""
    # each value with its type: Python's 3 == 3.0 and True == 1 must not let a wrongly
    # typed argument find a cached plan and skip Plan's checks
    key = tuple((type(x), x) for x in (n_heads, n_kv_heads, head_dim, rotate, causal, window,
                                        softcap, scale, rope, isa, threads))
    try:
        hash(key)
    except TypeError:
        key = None  # an unhashable argument: Plan() will say what is wrong with it
    p = _plans.get(key) if key is not None else None
    if p is not None:
        return p
    p = Plan(n_heads, n_kv_heads, head_dim, rotate=rotate, causal=causal, window=window,
             softcap=softcap, scale=scale, rope=rope, isa=isa, threads=threads)
    return _plans.put(key, p) if key is not None else p


def clear_plan_cache() -> None:
    _plans.clear()


def attention(q, k, v, *, rotate="rove", causal=True, q_pos=None, kv_pos=None, rope=None,
              window=0, softcap=0.0, scale=None, return_lse=False, threads=None,
              layout="bshd", out=None, isa="auto", q_angles=None, kv_angles=None,
              sinks=None):
    """Attention with RoPE/RoVE on the CPU (librove): see Plan and Plan.attention.

    GQA/MQA come from the head counts of q and k. Returns the kind it was given (numpy
    or torch), with return_lse a tuple (out, lse). The plan is cached (get_plan).
    Differentiable for torch tensors (torch.autograd: dq, dk, dv by
    rove_attention_backward in float32, bfloat16 / float16 inputs widened exactly and each
    gradient rounded once to its input's dtype; float64 angle tensors and sinks that
    require grad get theirs; the returned LSE is differentiable too).
    """
    kw = dict(rotate=rotate, causal=causal, window=window, softcap=softcap, scale=scale,
              rope=rope, isa=isa, threads=threads)
    if _autograd.needs_grad(q, k, v, q_angles, kv_angles, sinks):  # differentiable
        bhsd = _layout(layout)
        _autograd.check(q, k, v, out, q_angles, kv_angles)  # before any C call
        (H, D), (Hk, _) = _heads(q, "q", bhsd), _heads(k, "k", bhsd)
        return _autograd.attention(get_plan(H, Hk, D, **kw), q, k, v, q_pos, kv_pos, layout,
                                   return_lse, out, q_angles, kv_angles, sinks)
    return _forward(None, q, k, v, q_pos, kv_pos, layout, return_lse, out, q_angles,
                    kv_angles, plan_kw=kw, sinks=sinks)
