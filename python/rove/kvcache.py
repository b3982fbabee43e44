# SPDX-License-Identifier: MIT
"""KVCache: rove_kv_cache, K and V stored already rotated into the global frame."""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from . import _lib, _params, _tensor
from .attention import Plan, _forward, _layout, _logical, _strided


# Accepted spellings of each storage type (rove_dtype_parse's names; the first one is the
# canonical rove_dtype_name), for error messages and the docs. test_kvcache_types.py checks
# that librove parses every one of them to its type.
DTYPE_ALIASES = {"f32": ("f32", "fp32", "float32"), "bf16": ("bf16", "bfloat16"),
                 "f16": ("f16", "fp16", "float16"), "q8": ("q8", "int8")}

# What a type cannot hold, for the ValueError of a rejected append / shift.
_UNREPRESENTABLE = {
    "bf16": "a rotated value of a finite row is outside bfloat16's range (|x| near "
            "FLT_MAX after rotation and, for K, the YaRN factor; NaN and inf given are "
            "stored)",
    "f16": "a rotated value does not fit float16 (|x| >= 65520, which rounds past 65504, "
           "after rotation and, for K, the YaRN factor; NaN and inf given are stored)",
    "q8": "a rotated value is not finite (NaN or inf): a q8 cache stores only finite values",
}


def _dtype_str(x) -> str:
    d = x.dtype
    return str(d) if _tensor.is_torch(x) else f"numpy {d}"


def _accepted() -> str:
    names = ", ".join("/".join(repr(a) for a in al) for al in DTYPE_ALIASES.values())
    return (f"{names}, torch.float32 / torch.bfloat16 / torch.float16, or numpy float32 / "
            "float16")


def parse_dtype(dtype) -> int:
    """The rove_dtype of a KV cache storage type given as a string (any name librove's
    rove_dtype_parse accepts), a torch dtype (float32, bfloat16, float16) or a numpy
    dtype (float32, float16); ValueError for anything else."""
    t = None
    if isinstance(dtype, str):
        t = _lib.dtype_parse(dtype)
    elif isinstance(dtype, np.dtype) or (isinstance(dtype, type) and
                                         issubclass(dtype, np.generic)):
        nd = np.dtype(dtype)  # float32 / float16 in either byte order
        t = {("f", 4): _lib.DTYPE_F32, ("f", 2): _lib.DTYPE_F16}.get((nd.kind, nd.itemsize))
    else:
        torch = _tensor._torch()  # never imported here: a torch dtype means torch is loaded
        if torch is not None and isinstance(dtype, torch.dtype):
            t = {torch.float32: _lib.DTYPE_F32, torch.bfloat16: _lib.DTYPE_BF16,
                 torch.float16: _lib.DTYPE_F16}.get(dtype)
    if t is None:
        raise ValueError(f"dtype must be one of {_accepted()} (got {dtype!r})")
    return t


class KVCache(_lib.OwnedHandle):
    """A KV cache for ``batch`` sequences of up to ``capacity`` tokens each, for the
    shape and rotations of ``plan`` (a rove.Plan, kept alive by the cache).

    ``dtype`` is the storage type of K and V (rove_kv_cache_create_typed): "float32"
    (also "f32", "fp32"; the default), "bfloat16" ("bf16"), "float16" ("f16", "fp16") or
    "q8" ("int8": 8-bit blocks of 32 dims with an fp32 scale each), or torch.float32 /
    bfloat16 / float16 and numpy float32 / float16. Appends take K and V of float32,
    bfloat16 or float16 (both of one dtype, whatever the storage type;
    rove_kv_cache_append_typed): they are widened exactly, rotated in fp32 and rounded
    once to the storage type; attention widens them back and computes in fp32, with q of
    float32, bfloat16 or float16 and an output of q's dtype (or out='s). An append or
    shift whose rotated values the type cannot hold (|x| >= 65520 for float16, which
    rounds past its largest finite 65504; NaN or inf for q8) raises RoveInvalidArgument
    (a ValueError) and changes nothing; NaN and inf are stored as such by float32,
    bfloat16 and float16.
    ``.dtype`` is the canonical name ("f32", "bf16", "f16" or "q8").

    append(k, v, pos=None) rotates and stores new tokens (k, v: [batch, n, n_kv_heads,
    d], or bhsd with layout=, or 3-D when batch is 1); attention(q, ...) attends new
    queries over everything stored (q_pos None: the positions of the last q_len cached
    tokens, i.e. append first, then attend). shift(start, end, delta) moves cached
    positions (rotating stored K and V by R_delta), truncate(n) keeps the first n
    tokens, reset() empties it, positions() returns int32 [batch, len(self)].

    Calls on one cache are serialised by a lock (librove forbids mutating a cache while
    another call uses it); separate caches run in parallel.
    """

    def __init__(self, plan: Plan, batch: int, capacity: int, dtype="float32"):
        if not isinstance(plan, Plan):
            raise TypeError(f"plan must be a rove.Plan, not {type(plan).__name__}")
        # read-only (properties below): C borrows the plan, and the batch sizes the arrays
        self._plan = plan
        self._batch = _params.positive_int("batch", batch)
        cap = _params.positive_int("capacity", capacity)
        t = parse_dtype(dtype)
        ptr = ctypes.c_void_p()
        _lib.check("rove_kv_cache_create_typed", _lib.lib.rove_kv_cache_create_typed(
            plan._ptr, self._batch, cap, t, ctypes.byref(ptr)))
        self._ptr = ptr.value
        self._finalizer = _lib.finalizer(self, _lib.lib.rove_kv_cache_destroy, ptr.value)
        self._lock = threading.RLock()  # reentrant: len(self) inside a locked call
        self._kind = None  # "positions" or "angles", fixed by the first append

    @property
    def plan(self) -> Plan:
        """The plan the cache was made with (kept alive by the cache; not reassignable)."""
        return self._plan

    @property
    def batch(self) -> int:
        return self._batch

    @property
    def capacity(self) -> int:
        return int(_lib.lib.rove_kv_cache_capacity(self._ptr))

    def __len__(self) -> int:
        with self._lock:  # the length changes under a mutating call
            return int(_lib.lib.rove_kv_cache_length(self._ptr))

    @property
    def dtype(self) -> str:
        """Storage type of K and V: "f32", "bf16", "f16" or "q8" (rove_dtype_name)."""
        return _lib.dtype_name(_lib.lib.rove_kv_cache_type(self._ptr))

    def __repr__(self):
        return (f"rove.KVCache(batch={self.batch}, len={len(self)}, capacity={self.capacity}, "
                f"dtype={self.dtype!r})")

    def _invalid(self, kind: str) -> str:
        """Detail of a ROVE_ERR_INVALID_ARGUMENT from an append of ``kind`` (the shapes
        and strides were checked here): a kind mix, or a value the type cannot hold."""
        if len(self) and self._kind not in (None, kind):
            return ("a cache filled by append() takes no angles" if kind == "angles" else
                    "a cache filled by append_angles() takes only append_angles()")
        return _UNREPRESENTABLE.get(self.dtype, "")

    def _empty_append(self, kind: str, fn: str) -> None:
        """An append of 0 tokens stores nothing, but refuses what librove refuses for any
        append of this kind: a kind mix (positions into an angle cache or back)."""
        with self._lock:
            if len(self) and self._kind not in (None, kind):
                _lib.check(fn, _lib.ERR_INVALID_ARGUMENT, self._invalid(kind))

    def _overflow(self, n: int) -> str:
        """Detail of a ROVE_ERR_SIZE_OVERFLOW from an append of n tokens per row."""
        if len(self) + n > self.capacity:
            return f"{len(self)} + {n} tokens exceed the capacity {self.capacity}"
        return "a position would pass int32's maximum (2**31 - 1)"

    def _attention_detail(self, q_len: int, q_pos, q_angles) -> str:
        """Detail of a ROVE_ERR_INVALID_ARGUMENT from attention() (the tensors were
        checked before the call)."""
        rotates_q = self.plan.rotate & (_lib.ROTATE_Q | _lib.ROTATE_O)
        if self._kind == "angles" and q_angles is None and rotates_q:
            return ("the cache holds keys rotated by explicit angles (append_angles): give "
                    "q_angles")
        if q_pos is None and q_len > len(self):
            return (f"{q_len} query rows over {len(self)} cached tokens: the default query "
                    "positions are those of the last tokens; give q_pos")
        return ""

    def _kv(self, k, v, layout, typed=True):
        bhsd = _layout(layout)
        if typed:
            vk, vv = _tensor.view_float(k, "k"), _tensor.view_float(v, "v")
            if vk.dtype != vv.dtype:
                raise TypeError(f"k is {_dtype_str(k)} and v is {_dtype_str(v)}: append() "
                                "takes k and v of one dtype (float32, bfloat16 or float16)")
        else:  # append_angles: float32 only (rove_kv_cache_append_angles)
            vk, vv = _tensor.view(k, "k"), _tensor.view(v, "v")
        ndim = len(vk.shape)
        if ndim == 3 and self.batch != 1:
            raise ValueError(f"3-D k/v need a cache of batch 1 (this one has {self.batch})")
        lk, lv = _logical(vk, "k", bhsd, ndim), _logical(vv, "v", bhsd, ndim)
        p = self.plan
        want = (self.batch, lk.shape[1], p.n_kv_heads, p.head_dim)
        if lk.shape != want or lv.shape != want:
            raise ValueError(f"k {tuple(vk.shape)} / v {tuple(vv.shape)}: expected [batch="
                             f"{self.batch}, n, n_kv_heads={p.n_kv_heads}, "
                             f"head_dim={p.head_dim}] (in layout {layout!r})")
        lk, ks = _strided(lk, "k", bhsd, ndim)
        lv, vs = _strided(lv, "v", bhsd, ndim)
        return lk, ks, lv, vs, lk.shape[1], ndim

    def append(self, k, v, pos=None, *, layout="bshd"):
        """Rotate and store n new tokens per row; pos None continues each row (0 for an
        empty cache), else int [n] or [batch, n]. k and v: float32, bfloat16 or float16
        (one dtype for both). OverflowError (RoveSizeOverflow) when the cache is full.
        n = 0 stores nothing (as transformers' caches take an empty update)."""
        lk, ks, lv, vs, n, _ = self._kv(k, v, layout)
        p, pp = _tensor.positions(pos, "pos", self.batch, n)
        if n == 0:  # nothing stored; a kind mix is still refused, as librove refuses it
            self._empty_append("positions", "rove_kv_cache_append")
            return
        with self._lock:
            if lk.dtype == _tensor.F32:
                fn = "rove_kv_cache_append"
                st = _lib.lib.rove_kv_cache_append(self._ptr, n, lk.ptr, ks, lv.ptr, vs, pp)
            else:
                fn = "rove_kv_cache_append_typed"
                st = _lib.lib.rove_kv_cache_append_typed(self._ptr, n, lk.ptr, ks, lv.ptr, vs,
                                                         pp, lk.dtype)
            _lib.check(fn, st,
                       self._overflow(n) if st == _lib.ERR_SIZE_OVERFLOW else
                       self._invalid("positions") if st == _lib.ERR_INVALID_ARGUMENT else "")
            self._kind = "positions"
        del lk, lv, p

    def append_angles(self, k, v, angles, pos=None, *, layout="bshd"):
        """append() for Selective RoPE: K and V rotated by explicit float64 angles
        [batch, n, n_kv_heads, rotary_dim/2]; pos still records positions for the mask.
        The first append into an empty cache fixes its kind (positions or angles). k and
        v: float32, or bfloat16 / float16 (one dtype), widened to float32 copies here
        (rove_kv_cache_append_angles reads float32; the cache rounds to its own type)."""
        if _tensor.is_half(k) or _tensor.is_half(v):
            kd, vd = (getattr(x, "dtype", type(x).__name__) for x in (k, v))
            if str(kd) != str(vd):
                raise TypeError(f"k is {kd} and v is {vd}: append_angles() takes k and v of "
                                "one dtype")
            k, v = _tensor.widened(k), _tensor.widened(v)
        lk, ks, lv, vs, n, ndim = self._kv(k, v, layout, typed=False)
        shape = (self.batch, n, self.plan.n_kv_heads, self.plan.rotary_dim // 2)
        shape = shape[1:] if ndim == 3 else shape
        a, ap = _tensor.contiguous(angles, "angles", np.float64, shape)
        p, pp = _tensor.positions(pos, "pos", self.batch, n)
        if n == 0:  # nothing stored; the cache's kind stays open
            self._empty_append("angles", "rove_kv_cache_append_angles")
            return
        with self._lock:
            st = _lib.lib.rove_kv_cache_append_angles(self._ptr, n, lk.ptr, ks, lv.ptr, vs,
                                                      pp, ap)
            # librove refuses non-finite angles (nothing appended): say so (a check here
            # before every call cost half of a one-token append)
            if st == _lib.ERR_INVALID_ARGUMENT and not np.all(
                    np.isfinite(a.numpy() if _tensor.is_torch(a) else a)):
                raise ValueError("angles has non-finite values")
            _lib.check("rove_kv_cache_append_angles", st,
                       self._overflow(n) if st == _lib.ERR_SIZE_OVERFLOW else
                       self._invalid("angles") if st == _lib.ERR_INVALID_ARGUMENT else "")
            self._kind = "angles"
        del lk, lv, p, a

    def attention(self, q, *, q_pos=None, q_angles=None, return_lse=False, out=None,
                  layout="bshd", sinks=None):
        """Attention of q [batch, q_len, n_heads, d] over the cached tokens, with the
        plan's options; as Plan.attention (q_angles for an angle cache; sinks: attention
        sinks, [n_heads], no gradient)."""
        with self._lock:  # (an empty cache: refused in _forward unless q has no rows)
            return _forward(self.plan, q, None, None, q_pos, None, layout, return_lse, out,
                            q_angles, None, cache=self, sinks=sinks)

    def shift(self, start: int, end: int, delta: int) -> None:
        """Positions of cached tokens [start, end) += delta, stored K and V rotated by
        R_delta (context shift)."""
        a = [_params.positive_int(n, x, minimum=-(2 ** 31)) for n, x in
             (("start", start), ("end", end), ("delta", delta))]
        with self._lock:
            n = len(self)
            if not 0 <= a[0] <= a[1] <= n:
                raise ValueError(f"shift needs 0 <= start <= end <= len ({n}); got "
                                 f"start={a[0]}, end={a[1]}")
            st = _lib.lib.rove_kv_cache_shift(self._ptr, *a)
            why = ""
            if st == _lib.ERR_INVALID_ARGUMENT and self.dtype != "f32":
                why = "the shifted rows: " + _UNREPRESENTABLE.get(self.dtype, "")
            elif st == _lib.ERR_SIZE_OVERFLOW:
                why = f"a shifted position would leave int32 (delta {a[2]})"
            elif st == _lib.ERR_UNSUPPORTED and self._kind == "angles":
                why = ("a cache filled by append_angles() cannot be shifted (its tokens were "
                       "rotated by explicit angles, not by positions)")
            _lib.check("rove_kv_cache_shift", st, why)

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` tokens (0 <= length <= len(self))."""
        length = _params.positive_int("length", length, minimum=0)
        with self._lock:
            if length > len(self):
                raise ValueError(f"truncate({length}) beyond the cached {len(self)} tokens")
            _lib.check("rove_kv_cache_truncate", _lib.lib.rove_kv_cache_truncate(self._ptr, length))

    def reset(self) -> None:
        """Empty the cache (its kind is chosen again by the next append)."""
        with self._lock:
            _lib.check("rove_kv_cache_reset", _lib.lib.rove_kv_cache_reset(self._ptr))

    def positions(self) -> np.ndarray:
        """int32 [batch, len(self)]: the positions of the cached tokens."""
        with self._lock:
            pos = np.empty((self.batch, len(self)), dtype=np.int32)
            if pos.size:
                _lib.check("rove_kv_cache_positions", _lib.lib.rove_kv_cache_positions(
                    self._ptr, pos.__array_interface__["data"][0]))
            return pos
