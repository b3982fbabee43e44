# SPDX-License-Identifier: MIT
"""Gated linear attention (flash-linear-attention semantics) with selective rotations."""
from __future__ import annotations

import ctypes

import numpy as np

from . import _autograd, _gla_autograd, _lib, _params, _tensor

_C_DEFAULTS = _lib.GLAConfig()
_lib.lib.rove_gla_config_init(_C_DEFAULTS, 1, 2, 2)


class GLAPlan(_lib.SharedHandle):
    """An immutable GLA configuration (rove_gla_plan_create), per head a state
    S [key_dim, value_dim]: S_t = diag(exp(g_t)) S_{t-1} + k~_t v~_t^T,
    o_t = R_t^{-1}(scale S_t^T q~_t).

    scale None = 1/sqrt(key_dim); rotate ("rope" by default, "rove", "none" or flags) is
    used only when angles are given; rotary_dim 0 = key_dim; chunk None = librove's
    default (64), else 16, 32, 64 or 128.
    """
    __slots__ = ("_ptr", "_finalizer", "n_heads", "key_dim", "value_dim", "scale", "rotate",
                 "rotary_dim", "pairing", "chunk", "isa", "threads", "__weakref__")

    def __init__(self, n_heads, key_dim, value_dim, *, scale=None, rotate="rope",
                 rotary_dim=0, pairing="half", chunk=None, isa="auto", threads=None):
        c = _lib.GLAConfig()
        H = _params.positive_int("n_heads", n_heads)
        K = _params.positive_int("key_dim", key_dim)
        V = _params.positive_int("value_dim", value_dim)
        _lib.lib.rove_gla_config_init(c, H, K, V)
        sc = _params.scale(scale)
        if sc is not None:
            c.scale = sc
        c.rotate = _params.rotate_flags(rotate)
        c.rotary_dim = _params.positive_int("rotary_dim", rotary_dim, minimum=0, maximum=K)
        if pairing not in _lib.PAIRING_BY_NAME:
            raise ValueError(f"pairing must be 'half' or 'interleaved' (got {pairing!r})")
        c.pairing = _lib.PAIRING_BY_NAME[pairing]
        chunk = _params.chunk(chunk)
        if chunk is not None:
            c.chunk = chunk
        c.isa = _params.isa(isa)
        c.n_threads = _params.threads(threads)
        ptr = ctypes.c_void_p()
        st = _lib.lib.rove_gla_plan_create(c, ctypes.byref(ptr))
        r = c.rotary_dim or K
        why = ""
        if st == _lib.ERR_INVALID_ARGUMENT and c.rotate and r % 2:
            why = (f"rotary_dim {r} is odd: rotations need pairs (give rotate='none' for GLA "
                   "without angles, or an even rotary_dim)")
        elif (st == _lib.ERR_INVALID_ARGUMENT and c.rotate & (_lib.ROTATE_V | _lib.ROTATE_O)
              and V < r):
            why = (f"value_dim {V} < rotary_dim {r}: rotating v or the output needs "
                   "value_dim >= rotary_dim")
        _lib.check("rove_gla_plan_create", st, why)
        self._ptr = ptr.value
        self._finalizer = _lib.finalizer(self, _lib.lib.rove_gla_plan_destroy, ptr.value)
        self.n_heads, self.key_dim, self.value_dim = H, K, V
        self.scale, self.rotate, self.pairing = float(c.scale), int(c.rotate), pairing
        self.rotary_dim = int(c.rotary_dim) or K
        self.chunk = int(c.chunk) or int(_C_DEFAULTS.chunk)
        self.isa = _lib.isa_name(_lib.lib.rove_gla_plan_isa(self._ptr))
        self.threads = int(c.n_threads)

    def __repr__(self):
        return (f"rove.GLAPlan(n_heads={self.n_heads}, key_dim={self.key_dim}, "
                f"value_dim={self.value_dim}, rotate={self.rotate}, chunk={self.chunk}, "
                f"isa={self.isa!r})")

    def forward(self, q, k, v, g, *, angles=None, initial_state=None,
                return_final_state=False, out=None, cu_seqlens=None):
        """Chunked GLA (prefill): q, k, g [batch, seq, H, key_dim], v [batch, seq, H,
        value_dim] float32 (3-D without batch; non-contiguous inputs are copied once),
        g <= 0 log decays, angles None or float64 [batch, seq, H, rotary_dim/2],
        initial_state None (zeros) or float32 [batch, H, key_dim, value_dim]. Returns out
        (and the final state with return_final_state). q, k, v, g and initial_state may
        also be bfloat16 / float16 (torch; numpy float16): they are widened to float32 (a
        copy), the call runs in float32, and the output is rounded once to q's dtype (the
        final state stays float32, as flash-linear-attention returns it); out= is then
        refused. out= (float32 inputs): a C-contiguous float32 array or tensor of out's
        shape, written in place (unlike rove.attention's out=, no strided or lazily
        negated views: those are refused, not computed aside).

        cu_seqlens (flash-linear-attention's): None, or packed sequences of one row, an
        integer array [N + 1] of cumulative lengths from 0 to seq (q [1, seq, H, key_dim]
        or 3-D [seq, H, key_dim]). Sequence i is tokens cu_seqlens[i] .. cu_seqlens[i+1]-1
        and runs from its own state: initial_state and the final state are then
        [N, H, key_dim, value_dim]. Each sequence's results equal a call on it alone, bit
        for bit.

        Differentiable for torch tensors (torch.autograd, rove_gla_backward): q, k, v, g
        and initial_state (float32, or half precision through the widening casts: each
        gradient rounded once to its input's dtype), float64 angles; gradients reach every
        input that requires grad, through the output and the final state."""
        return self._call("rove_gla_forward", q, k, v, g, angles, initial_state,
                          return_final_state, out, cu_seqlens)

    def recurrent(self, q, k, v, g, *, angles=None, initial_state=None,
                  return_final_state=False, out=None, cu_seqlens=None):
        """Token-by-token GLA (decode); the same arguments, result and gradients as
        forward()."""
        return self._call("rove_gla_recurrent", q, k, v, g, angles, initial_state,
                          return_final_state, out, cu_seqlens)

    def _call(self, fn, q, k, v, g, angles, initial_state, return_final_state, out,
              cu_seqlens=None):
        half = q.dtype if any(map(_tensor.is_half, (q, k, v, g, initial_state))) else None
        if half is not None:  # widened, computed in float32, the output rounded once
            if out is not None:
                raise ValueError("out= takes float32: with bfloat16 / float16 inputs leave "
                                 "out=None (the output has q's dtype)")
            q, k, v, g, initial_state = map(_tensor.widened, (q, k, v, g, initial_state))
            res = self._call(fn, q, k, v, g, angles, initial_state, return_final_state, None,
                             cu_seqlens)
            if return_final_state:
                return _tensor.rounded(res[0], half), res[1]
            return _tensor.rounded(res, half)
        if _tensor.is_torch(q) and isinstance(angles, np.ndarray):
            # numpy float64 angles with torch inputs, as rove.attention takes them (a
            # private torch copy; any other numpy array is refused below as it was)
            angles = _autograd.angle_tensor(angles)
        cu = None
        if cu_seqlens is not None:  # a private int32 copy, checked (the backward reuses it)
            from .varlen import _cu
            cu = _cu(cu_seqlens, "cu_seqlens", None)
        if _autograd.needs_grad(q, k, v, g, angles, initial_state):
            return _gla_autograd.gla(self, fn, q, k, v, g, angles, initial_state,
                                     return_final_state, out, cu)
        return self._run(fn, q, k, v, g, angles, initial_state, return_final_state, out, cu)

    def _run(self, fn, q, k, v, g, angles, initial_state, return_final_state, out, cu=None):
        vq = _tensor.view(q, "q")
        nd = len(vq.shape)
        if nd not in (3, 4):
            raise ValueError(f"q must be [batch, seq, H, key_dim] (or 3-D), got {vq.shape}")
        B, T = ((1,) + tuple(vq.shape))[-4:-2] if nd == 3 else vq.shape[:2]
        if cu is not None:
            from .varlen import check_packed
            check_packed(cu, B, T, "q")
        H, K, V = self.n_heads, self.key_dim, self.value_dim
        lead = (B, T) if nd == 4 else (T,)
        keep = {}  # name -> what C reads (a contiguous copy where one was made)

        def arr(x, name, last, dtype=np.float32):
            obj, ptr = _tensor.contiguous(x, name, dtype, lead + (H, last))
            if _tensor.is_torch(obj) != vq.torch:
                kinds = ("a torch tensor", "a numpy array")
                raise TypeError(f"{name} is {kinds[vq.torch]} and q {kinds[not vq.torch]}: "
                                "q, k, v, g and angles must all be numpy arrays or all "
                                "torch tensors")
            keep[name] = obj
            return ptr

        if B <= 0 or T <= 0:
            raise ValueError(f"q has an empty axis (shape {tuple(vq.shape)})")
        a = _lib.GLAArgs()
        a.batch, a.seq_len = B, T
        if cu is not None:
            a.cu_seqlens, a.n_seqs = cu.ctypes.data, cu.shape[0] - 1
            keep["cu_seqlens"] = cu
        a.q, a.k, a.v, a.g = arr(q, "q", K), arr(k, "k", K), arr(v, "v", V), arr(g, "g", K)
        # g <= 0 and finite, finite angles: checked by librove (one parallel scan, not a
        # numpy pass here on the calling thread); its ROVE_ERR_INVALID_ARGUMENT says so
        if angles is not None:
            a.angles = arr(angles, "angles", self.rotary_dim // 2, np.float64)
        sshape = (cu.shape[0] - 1, H, K, V) if cu is not None else \
            (B, H, K, V) if nd == 4 else (H, K, V)
        if initial_state is not None:
            s0, a.initial_state = _tensor.contiguous(initial_state, "initial_state",
                                                     np.float32, sshape)
            keep["initial_state"] = s0
        fs = None
        if return_final_state:
            fs, a.final_state = _tensor.empty(vq.torch, sshape)
        if out is None:
            o, a.out = _tensor.empty(vq.torch, lead + (H, V))
        else:
            o, a.out = _tensor.contiguous(out, "out", np.float32, lead + (H, V), writable=True)
        st = getattr(_lib.lib, fn)(self._ptr, a)
        why = ""
        if st == _lib.ERR_INVALID_ARGUMENT:  # an out= over an input C read, else the values
            why = ((out is not None and _tensor.overlap_detail(o, **keep)) or
                   "g (log decays) must be finite and <= 0" +
                   (" and the angles finite" if angles is not None else ""))
        del keep
        _lib.check(fn, st, why)
        if out is not None:
            _tensor.mark_written(o)
        return (o, fs) if return_final_state else o


_plans = _lib.PlanCache(32)


def _plan(H, K, V, **kw) -> GLAPlan:
    # each value with its type, as rove.get_plan's key (3.0 == 3 must not skip the checks)
    key = tuple((type(x), x) for x in (H, K, V)) + tuple(
        (n, type(x), x) for n, x in sorted(kw.items()))
    p = _plans.get(key)
    return p if p is not None else _plans.put(key, GLAPlan(H, K, V, **kw))


def _shapes(q, v):
    sq, sv = tuple(getattr(q, "shape", ())), tuple(getattr(v, "shape", ()))
    if len(sq) not in (3, 4) or len(sv) != len(sq):
        raise ValueError(f"q {sq} and v {sv} must be [batch, seq, H, dim] (or 3-D)")
    return sq[-2], sq[-1], sv[-1]


def gla(q, k, v, g, *, angles=None, scale=None, rotate="rope", rotary_dim=0,
        pairing="half", chunk=None, initial_state=None, return_final_state=False,
        threads=None, isa="auto", out=None, cu_seqlens=None):
    """Chunked GLA (prefill) with a cached GLAPlan; see GLAPlan.forward. rotate applies
    only with angles: without them the plan rotates nothing (so any key_dim works)."""
    H, K, V = _shapes(q, v)
    rotate = rotate if angles is not None else "none"
    p = _plan(H, K, V, scale=scale, rotate=rotate, rotary_dim=rotary_dim, pairing=pairing,
              chunk=chunk, isa=isa, threads=threads)
    return p.forward(q, k, v, g, angles=angles, initial_state=initial_state,
                     return_final_state=return_final_state, out=out, cu_seqlens=cu_seqlens)


def gla_recurrent(q, k, v, g, *, angles=None, scale=None, rotate="rope", rotary_dim=0,
                  pairing="half", initial_state=None, return_final_state=False,
                  threads=None, isa="auto", out=None, cu_seqlens=None):
    """Token-by-token GLA (decode) with a cached GLAPlan; see GLAPlan.recurrent (rotate
    applies only with angles, as in gla)."""
    H, K, V = _shapes(q, v)
    rotate = rotate if angles is not None else "none"
    p = _plan(H, K, V, scale=scale, rotate=rotate, rotary_dim=rotary_dim, pairing=pairing,
              isa=isa, threads=threads)
    return p.recurrent(q, k, v, g, angles=angles, initial_state=initial_state,
                       return_final_state=return_final_state, out=out, cu_seqlens=cu_seqlens)
