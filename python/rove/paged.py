# SPDX-License-Identifier: MIT
"""Paged KV cache and batched decode (rove.h "Paged KV cache (serving)"): many sequences
of different lengths in one pool of fixed-size blocks, as vLLM and flash-attn's block
tables do it.

PagedKVCache is librove's own pool and block allocator (rove_paged_cache: sequences are
small integer ids, blocks are reference counted, a fork shares its parent's blocks and
copies one only when it writes into it). paged_attention() attends over an engine's own
pool in the documented layout (rove_paged_attention), e.g. the one PagedKVCache.view()
returns, and paged_store() writes new tokens into such a pool in place by slot
(rove_paged_store, vLLM's reshape_and_cache):

    k, v     [n_blocks, n_kv_heads, block_size, head_dim] of the storage type: float32,
             bfloat16 (torch.bfloat16, or its bits as numpy uint16), float16, or int8 (q8)
    k_scale, (q8 only) float32 [n_blocks, n_kv_heads, block_size, ceil(head_dim / 32)]
    v_scale
    pos      int32 [n_blocks, block_size]: the position of each stored token (None: token
             t of every sequence is at position t)

Token t of a sequence with block table bt lies in block bt[t // block_size], row
t % block_size; a block may be in the tables of several sequences, at most once in each.
K and V are stored as rove.KVCache stores them: rotated into the global frame and rounded
once to the storage type, so attention rotates only the queries (and RoVE's output). The
results equal rove.KVCache's over the same tokens: bit for bit when block_size is a
multiple of 64 (the row kernel's key block), otherwise to float rounding.

Queries are packed as in rove.attention_varlen: q [total_q, n_heads, head_dim] (float32,
float16 or torch.bfloat16; the output has q's dtype), sequence s owning rows
cu_seqlens_q[s] .. cu_seqlens_q[s+1]-1 (1 row: decode; a few: speculative verification). Without q_pos, the rows of a sequence get the positions of its
last keys (the tokens just appended): append first, then attend.
"""
from __future__ import annotations

import ctypes
import threading
from collections import namedtuple

import numpy as np

from . import _lib, _params, _tensor
from .attention import Plan, _angles, get_plan
from .kvcache import _UNREPRESENTABLE, _dtype_str, parse_dtype

_KIND_MIX = "a sequence filled with angles takes only angles, one filled by positions none"

_F32, _BF16, _F16, _Q8 = _lib.DTYPE_F32, _lib.DTYPE_BF16, _lib.DTYPE_F16, _lib.DTYPE_Q8
_NP_POOL = {np.dtype(np.float32): _F32, np.dtype(np.uint16): _BF16,
            np.dtype(np.float16): _F16, np.dtype(np.int8): _Q8}  # native byte order only
_TYPESTR = {_F32: np.dtype(np.float32).str, _BF16: np.dtype(np.uint16).str,
            _F16: np.dtype(np.float16).str, _Q8: np.dtype(np.int8).str}

PagedPool = namedtuple("PagedPool", "k v k_scale v_scale pos dtype")
PagedPool.__doc__ = """PagedKVCache.view(): read-only numpy arrays over the cache's pool
(the module docstring's layout). k, v: float32, uint16 (the bits of bfloat16), float16 or
int8 (q8); k_scale, v_scale: float32 for q8, else None; pos: int32; dtype: the storage
type's canonical name. They keep the cache alive and show its current contents (which
the next mutating call may change)."""


class _PoolMemory:
    """The .base of a view() array: numpy's __array_interface__ over the pool, holding
    the cache (whose memory lives until the cache is destroyed)."""
    __slots__ = ("__array_interface__", "cache")

    def __init__(self, cache, ptr, shape, typestr):
        self.cache = cache
        self.__array_interface__ = {"version": 3, "shape": shape, "typestr": typestr,
                                    "data": (ptr, True)}  # True: read-only


_I32_MAX = 2 ** 31 - 1


def _ints(x, name, shape=None, dims=None):
    """x (array-like or CPU tensor of integers, each fitting int32) as a C-contiguous int32
    array of librove's own: always a copy, so that a caller editing its block tables or
    ids from another thread while librove reads them (the GIL is released) cannot change
    what was checked. dims: the shape's names for messages."""
    if (type(x) in (list, tuple) and len(x) <= 64 and shape is not None and len(shape) == 1
            and shape[0] in (None, len(x)) and all(type(i) is int for i in x)):
        # a short list of Python ints (a decode step's sequence ids): checked here, without
        # numpy's reductions (a third of a small call's Python time)
        if x and (min(x) < -(2 ** 31) or max(x) > _I32_MAX):
            raise ValueError(f"{name} has values outside int32")
        return np.array(x, dtype=np.int32)
    a = _tensor.to_numpy(x, name)
    if a.size == 0 and a.dtype == np.float64:  # np.asarray([])
        a = a.astype(np.int32)
    if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name} must hold integers (got dtype {a.dtype})")
    if shape is not None and (len(shape) != a.ndim or any(
            w is not None and w != g for w, g in zip(shape, a.shape))):
        want = ", ".join(dims or ("n" if w is None else str(w) for w in shape))
        raise ValueError(f"{name} has shape {a.shape}; expected [{want}]")
    if a.size and (int(a.min()) < -(2 ** 31) or int(a.max()) > _I32_MAX):
        raise ValueError(f"{name} has values outside int32")
    return np.array(a, dtype=np.int32, order="C", copy=True)


def _int32(name, x):
    """x (a size librove takes as int32) checked: ctypes would cut a larger one silently."""
    if x > _I32_MAX:
        raise ValueError(f"{name} = {x} does not fit int32")
    return x


def _cu(n, total, rows, cu, hint="give rows= (per sequence) or cu_seqlens_q"):
    """int32 cu_seqlens_q [n + 1]: given, or from rows (None: total / n rows each, an int,
    or n counts); hint: what the caller can pass when total / n is not whole."""
    if n <= 0:
        raise ValueError("attention needs at least one sequence")
    if cu is not None and rows is not None:
        raise TypeError("give rows or cu_seqlens_q, not both")
    if cu is not None:
        c = _ints(cu, "cu_seqlens_q", (n + 1,)).astype(np.int64)
        if c[0] != 0 or np.any(np.diff(c) < 0):
            raise ValueError("cu_seqlens_q must start at 0 and not decrease")
    else:
        if rows is None:
            if total % n:
                raise ValueError(f"q has {total} rows for {n} sequences: {hint}")
            rows = total // n
        if type(rows) is int:  # as many rows each (a decode step): no per-sequence arrays
            if not 0 <= rows <= _I32_MAX:
                raise ValueError("rows must be >= 0" if rows < 0 else "rows does not fit int32")
            c = np.arange(n + 1, dtype=np.int64) * rows
            if c[-1] != total:
                raise ValueError(f"the sequences own {c[-1]} query rows, but q holds {total}")
            return c.astype(np.int32)
        r = _tensor.to_numpy(rows, "rows")
        r = _ints(np.full(n, r) if r.ndim == 0 else r, "rows", (n,))
        if np.any(r < 0):
            raise ValueError("rows must be >= 0")
        c = np.concatenate([[0], np.cumsum(r, dtype=np.int64)])
    if c[-1] != total:
        raise ValueError(f"the sequences own {c[-1]} query rows, but q holds {total}")
    return c.astype(np.int32)


def _queries(q, H=None, D=None):
    """(View, token stride) of q [total_q, n_heads, head_dim] float32, bfloat16 (torch) or
    float16 (copied once if its heads and dims are not dense); ``.dtype`` its rove_dtype."""
    vq = _tensor.view_float(q, "q")
    if len(vq.shape) != 3 or (H is not None and tuple(vq.shape[1:]) != (H, D)):
        want = "n_heads, head_dim" if H is None else f"n_heads={H}, head_dim={D}"
        raise ValueError(f"q has shape {tuple(vq.shape)}; expected [total_q, {want}]")
    _int32("total_q (q's rows)", vq.shape[0])
    return _token_rows(vq)


def _token_rows(v):
    """(View, token stride) of [n, heads, dim]: in place when each token's heads and dims
    are dense (any token stride), else one contiguous copy."""
    ts = _tensor.token_stride((1,) + tuple(v.shape), (0,) + tuple(v.strides))
    if ts is None:
        v = _tensor.dense_copy(v, (0, 1, 2))
        ts = v.shape[1] * v.shape[2]
    return v, ts


def _short(s, rows, keys):
    return (f"sequence {s} has {rows} query rows but {keys} keys: the default positions are "
            "those of its last keys; give q_pos")


def _attend(plan, fn, call, vq, ts, cu, q_pos, q_angles, return_lse, detail, out=None,
            reads=None, sinks=None):
    """One rove_paged_(cache_)attention call through ``call(args, types)`` (types: None,
    or the rove_tensor_types of a bf16 / f16 q or out). out: None (a fresh output of q's
    kind and dtype) or the caller's [total_q, n_heads, head_dim] (float32, bfloat16 or
    float16: its dtype is the output's type), written in place when its heads and dims are
    dense, else computed aside and copied in; reads(): the arrays the call reads in place
    (by name; called after a refusal, or before the call for an out= computed aside), to
    say which one an overlapping out= shares memory with. sinks: attention sinks
    [n_heads] (rove.attention's), or None."""
    from .attention import _copy_back, _prepare_out, _refuse_aside_overlap, _sinks
    T, H, D = vq.shape
    a = _lib.PagedArgs()
    a.n_seqs, a.cu_seqlens_q = len(cu) - 1, cu.ctypes.data
    a.q, a.q_stride = vq.ptr, ts
    qp, a.q_pos = _tensor.positions(q_pos, "q_pos", 1, T)
    qa = None
    if q_angles is not None:
        qa, a.q_angles = _angles(q_angles, "q_angles", (T, plan.n_kv_heads, plan.rotary_dim // 2))
    sk, a.sinks = _sinks(sinks, H)
    result, ov, a.out_stride, tmp = _prepare_out(out, vq.torch, False, 3, (1, T, H, D),
                                                 dtype=vq.dtype)
    a.out = ov.ptr
    lse = None
    if return_lse:
        lse, a.lse = _tensor.empty(vq.torch, (H, T))
    types = None  # float32 q and out: the untyped calls; else the pool's K/V stay F32 here
    if vq.dtype != _F32 or ov.dtype != _F32:
        types = _lib.TensorTypes(vq.dtype, _F32, _F32, ov.dtype)
    # what C is given: q as read (a copy when its heads and dims were not dense), the
    # positions and angles, the sinks, the pool's arrays
    def seen():
        return dict(q=vq.obj, q_pos=qp, q_angles=qa, sinks=sk, **(reads() if reads else {}))
    if out is not None and tmp is not None:  # (reads() only then: a decode step skips it)
        _refuse_aside_overlap(fn, out, tmp, **seen())
    st = call(a, types)
    why = ""
    if st == _lib.ERR_INVALID_ARGUMENT:  # (out itself: only when it was not computed aside)
        why = ((out is not None and tmp is None and _tensor.overlap_detail(out, **seen()))
               or detail())
    del qp, qa, sk
    _lib.check(fn, st, why)
    if tmp is not None:
        _copy_back(result, tmp, vq.torch)
    elif out is not None:
        _tensor.mark_written(result)
    return (result, lse) if return_lse else result


def _plan(plan, shape, plan_kw):
    if plan is None:
        fixed = [n for n in ("n_heads", "n_kv_heads", "head_dim") if n in plan_kw]
        if fixed:  # get_plan's own TypeError ("multiple values") would not say why
            raise TypeError(f"{', '.join(fixed)}: the heads and head_dim come from the "
                            "tensors (q and the pool); give the other plan options only")
        return get_plan(*shape, **plan_kw)
    if not isinstance(plan, Plan):
        raise TypeError(f"plan must be a rove.Plan, not {type(plan).__name__}")
    if plan_kw:
        raise TypeError(f"give a plan or plan options ({', '.join(plan_kw)}), not both")
    return plan


class PagedKVCache(_lib.OwnedHandle):
    """librove's paged KV cache (rove_paged_cache): ``n_blocks`` blocks of ``block_size``
    tokens (a power of two, 1 .. 65536; 64 by default: results bitwise equal to
    rove.KVCache's) for up to ``max_seqs`` live sequences.

    PagedKVCache(plan, *, n_blocks, block_size=64, max_seqs=256, dtype="float32"), or
    PagedKVCache(n_blocks=..., n_heads=H, n_kv_heads=Hk, head_dim=d, **options) with the
    options of rove.Plan (rotate=, causal=, window=, rope=, threads=, ...; the plan is
    rove.get_plan's). The cache keeps its plan alive (``.plan``). ``dtype``: the storage
    type, as rove.KVCache's ("f32", "bf16", "f16", "q8", their aliases, torch / numpy
    dtypes).

    Sequences are integer ids: new_sequence(), fork(seq) (shares the parent's blocks; a
    write into a shared block copies it first), free(seq). append(seq, k, v) rotates and
    stores tokens, taking blocks as needed; truncate / shift as rove.KVCache's;
    attention(seqs, q) attends packed query rows of several sequences in one call.
    A request the pool cannot serve (too few free blocks, max_seqs live) raises
    rove.RovePoolExhausted and changes nothing a sequence holds (its tokens, positions and
    block table; bytes of free blocks, or past a sequence's length, may have been
    written, as view() shows); so does every other failure.

    Calls on one cache are serialised by a lock (librove forbids mutating a cache while
    another call uses it); separate caches run in parallel. view() arrays are read
    without it: read them while no other thread mutates the cache.
    """

    def __init__(self, plan=None, *, n_blocks, block_size=64, max_seqs=256, dtype="float32",
                 n_heads=None, n_kv_heads=None, head_dim=None, **options):
        shape = (n_heads, n_kv_heads, head_dim)
        if plan is None and None in shape:
            raise TypeError("PagedKVCache needs a rove.Plan or n_heads, n_kv_heads and head_dim")
        if plan is not None and shape != (None,) * 3:
            raise TypeError("give a plan or n_heads / n_kv_heads / head_dim, not both")
        self.plan = _plan(plan, shape, options)
        self.n_blocks = _params.positive_int("n_blocks", n_blocks)
        self.block_size = _params.positive_int("block_size", block_size, maximum=65536)
        self.max_seqs = _params.positive_int("max_seqs", max_seqs)
        t = parse_dtype(dtype)
        ptr = ctypes.c_void_p()
        _lib.check("rove_paged_cache_create", _lib.lib.rove_paged_cache_create(
            self.plan._ptr, t, self.block_size, self.n_blocks, self.max_seqs,
            ctypes.byref(ptr)),
            "block_size must be a power of two" if self.block_size & (self.block_size - 1)
            else "")
        self._ptr = ptr.value
        self._finalizer = _lib.finalizer(self, _lib.lib.rove_paged_cache_destroy, ptr.value)
        self.dtype = _lib.dtype_name(t)  # the canonical name: "f32", "bf16", "f16", "q8"
        self._lock = threading.RLock()  # reentrant: free_blocks inside a locked call
        self._angles = {}  # seq -> its rows were rotated by explicit angles

    # set once in __init__: C borrows the plan, and the geometry sizes every view and check
    _FIXED = frozenset({"plan", "n_blocks", "block_size", "max_seqs", "dtype"})

    def __setattr__(self, name, value):
        if name in self._FIXED and name in self.__dict__:
            raise AttributeError(f"PagedKVCache.{name} is fixed when the cache is made")
        super().__setattr__(name, value)

    def __repr__(self):
        return (f"rove.PagedKVCache(n_blocks={self.n_blocks}, block_size={self.block_size}, "
                f"free_blocks={self.free_blocks}, max_seqs={self.max_seqs}, "
                f"dtype={self.dtype!r})")

    @property
    def free_blocks(self) -> int:
        """Blocks held by no sequence."""
        with self._lock:  # the count changes under a mutating call
            return int(_lib.lib.rove_paged_cache_free_blocks(self._ptr))

    def _live(self, seq, fn="rove_paged_seq_length"):
        """(seq as an int, its length); RoveInvalidArgument for an id that is not live."""
        seq = _params.positive_int("seq", seq, minimum=0)
        n = int(_lib.lib.rove_paged_seq_length(self._ptr, seq))
        if n < 0:
            _lib.check(fn, _lib.ERR_INVALID_ARGUMENT, f"no live sequence {seq}")
        return seq, n

    def length(self, seq) -> int:
        """Tokens in sequence ``seq``."""
        with self._lock:
            return self._live(seq)[1]

    def new_sequence(self) -> int:
        """A new, empty sequence's id (ids of freed sequences are reused)."""
        out = ctypes.c_int32()
        with self._lock:
            _lib.check("rove_paged_seq_create", _lib.lib.rove_paged_seq_create(
                self._ptr, ctypes.byref(out)), f"all max_seqs={self.max_seqs} sequences are live")
        return out.value

    def fork(self, seq) -> int:
        """A new sequence holding ``seq``'s tokens, sharing its blocks (nothing is copied
        until one of them writes into a shared block)."""
        out = ctypes.c_int32()
        with self._lock:
            seq = self._live(seq, "rove_paged_seq_fork")[0]
            st = _lib.lib.rove_paged_seq_fork(self._ptr, seq, ctypes.byref(out))
            _lib.check("rove_paged_seq_fork", st, f"all max_seqs={self.max_seqs} sequences "
                       "are live" if st == _lib.ERR_POOL_EXHAUSTED else "")
            self._angles[out.value] = self._angles.get(seq, False)
        return out.value

    def free(self, seq) -> None:
        """Release sequence ``seq`` and its references to its blocks."""
        with self._lock:
            seq = self._live(seq, "rove_paged_seq_free")[0]
            _lib.check("rove_paged_seq_free", _lib.lib.rove_paged_seq_free(self._ptr, seq))
            self._angles.pop(seq, None)

    def block_table(self, seq) -> np.ndarray:
        """int32 [ceil(length / block_size)]: the blocks of ``seq``, in token order."""
        with self._lock:
            seq, n = self._live(seq)
            n = -(-n // self.block_size)
            table, got = np.empty(n, np.int32), ctypes.c_int32()
            _lib.check("rove_paged_seq_block_table", _lib.lib.rove_paged_seq_block_table(
                self._ptr, seq, table.ctypes.data, n, ctypes.byref(got)))
            return table[:got.value]

    def positions(self, seq) -> np.ndarray:
        """int32 [length]: the positions of the tokens of ``seq``."""
        with self._lock:
            seq, n = self._live(seq)
            pos = np.empty(n, np.int32)
            _lib.check("rove_paged_seq_positions", _lib.lib.rove_paged_seq_positions(
                self._ptr, seq, pos.ctypes.data))
            return pos

    def append(self, seq, k, v, pos=None, angles=None) -> None:
        """Rotate and store n new tokens of ``seq``: k, v [n, n_kv_heads, head_dim] of
        float32, bfloat16 or float16 (one dtype for both; numpy or CPU torch; read in
        place when each token's heads and dims are dense, else copied once). pos: None
        (continue from the last position + 1, 0 for an empty sequence) or int [n].
        angles: None, or float64 [n, n_kv_heads, rotary_dim/2] explicit angles (Selective
        RoPE) as KVCache.append_angles; the first append into an empty sequence fixes
        its kind. RovePoolExhausted when the pool lacks the blocks; RoveInvalidArgument
        for a value the storage type cannot hold (see rove.KVCache). n = 0 stores
        nothing (the sequence must be live)."""
        p = self.plan
        vk, vv = _tensor.view_float(k, "k"), _tensor.view_float(v, "v")
        if vk.dtype != vv.dtype:
            raise TypeError(f"k is {_dtype_str(k)} and v is {_dtype_str(v)}: append() takes "
                            "k and v of one dtype (float32, bfloat16 or float16)")
        want = (p.n_kv_heads, p.head_dim)
        if (len(vk.shape) != 3 or tuple(vk.shape) != tuple(vv.shape) or
                tuple(vk.shape[1:]) != want):
            raise ValueError(f"k {tuple(vk.shape)} / v {tuple(vv.shape)}: expected [n, "
                             f"n_kv_heads={want[0]}, head_dim={want[1]}]")
        n = _int32("the tokens appended", vk.shape[0])
        pp_obj, pp = _tensor.positions(pos, "pos", 1, n)
        a_obj, ap = (None, None) if angles is None else _angles(
            angles, "angles", (n, p.n_kv_heads, p.rotary_dim // 2))
        if n:  # outside the lock: a copy of non-dense rows takes its time
            (lk, ks), (lv, vs) = _token_rows(vk), _token_rows(vv)
        with self._lock:
            seq, length = self._live(seq, "rove_paged_append")
            kind_mix = bool(length) and self._angles.get(seq) != (angles is not None)
            if n == 0:  # nothing to store (as transformers' caches take an empty update);
                if kind_mix:  # a kind mix is refused all the same, as librove refuses it
                    _lib.check("rove_paged_append", _lib.ERR_INVALID_ARGUMENT, _KIND_MIX)
                return
            st = _lib.lib.rove_paged_append(self._ptr, seq, n, lk.ptr, ks, lv.ptr, vs, lk.dtype,
                                            pp, ap)
            detail = ""
            if st == _lib.ERR_POOL_EXHAUSTED:
                detail = (f"{n} tokens after the {length} of sequence {seq} need more blocks "
                          f"(of {self.block_size} tokens) than the {self.free_blocks} free")
            elif st == _lib.ERR_INVALID_ARGUMENT:
                detail = _KIND_MIX if kind_mix else _UNREPRESENTABLE.get(self.dtype, "")
            elif st == _lib.ERR_SIZE_OVERFLOW:
                detail = "the sequence's length or its last position would pass INT32_MAX"
            _lib.check("rove_paged_append", st, detail)
            self._angles[seq] = ap is not None
        del lk, lv, pp_obj, a_obj

    def truncate(self, seq, length) -> None:
        """Keep the first ``length`` tokens of ``seq``; blocks past them are released."""
        length = _params.positive_int("length", length, minimum=0)
        with self._lock:
            seq, n = self._live(seq, "rove_paged_truncate")
            if length > n:
                raise ValueError(f"truncate({length}) beyond the {n} tokens of sequence {seq}")
            _lib.check("rove_paged_truncate", _lib.lib.rove_paged_truncate(self._ptr, seq, length))

    def shift(self, seq, start, end, delta) -> None:
        """Context shift of ``seq``: positions of its tokens [start, end) += delta, stored
        K and V rotated by R_delta (as KVCache.shift); shared blocks in the range are
        copied first (RovePoolExhausted when there are too few free blocks for them)."""
        a = [_params.positive_int(n, x, minimum=-(2 ** 31)) for n, x in
             (("start", start), ("end", end), ("delta", delta))]
        with self._lock:
            seq, n = self._live(seq, "rove_paged_shift")
            if not 0 <= a[0] <= a[1] <= n:
                raise ValueError(f"shift needs 0 <= start <= end <= length ({n}); got "
                                 f"start={a[0]}, end={a[1]}")
            st = _lib.lib.rove_paged_shift(self._ptr, seq, *a)
            _lib.check("rove_paged_shift", st, {
                _lib.ERR_UNSUPPORTED: "no R_delta for tokens rotated by explicit angles",
                _lib.ERR_POOL_EXHAUSTED: "too few free blocks to copy the shared blocks",
                _lib.ERR_SIZE_OVERFLOW: "a shifted position does not fit int32",
                _lib.ERR_INVALID_ARGUMENT: "the shifted rows: " + _UNREPRESENTABLE.get(
                    self.dtype, "") if self.dtype != "f32" else ""}.get(st, ""))

    def attention(self, seqs, q, rows=None, *, cu_seqlens_q=None, q_pos=None, q_angles=None,
                  return_lse=False, out=None, sinks=None):
        """Attention of packed query rows over the sequences ``seqs`` (ids, repeats
        allowed, any order), each over its own tokens, in one call.

        q [total_q, n_heads, head_dim] float32, float16 or (torch) bfloat16 (numpy or CPU
        torch; read in place when each row's heads and dims are dense; widened exactly,
        all arithmetic in float32). Row ownership: ``rows`` (None: total_q /
        len(seqs) rows each; an int; or a count per sequence) or ``cu_seqlens_q``
        [len(seqs) + 1]. q_pos: None (each sequence's rows at the positions of its last
        keys) or int [total_q]; q_angles: float64 [total_q, n_kv_heads, rotary_dim/2],
        needed for sequences filled with angles when the plan rotates Q or O. Returns
        out [total_q, n_heads, head_dim] of q's kind and dtype (rounded once), and with
        return_lse the LSE float32 [n_heads, total_q] (a sequence with rows and no keys: 0 and
        -inf, or the head's sink). sinks: attention sinks (gpt-oss), one logit per query
        head ([n_heads], any float dtype), as in rove.attention (no gradient here).
        ``out=`` [total_q, n_heads, head_dim] (float32, bfloat16 or float16, of q's kind;
        its dtype is the output's type) is written and returned instead of a fresh output
        (in place when its heads and dims are dense). An out= whose address range meets
        q's (or the pool's, the positions', the angles' or the sinks') is refused, even when
        interleaved without a common element: by C, or, for one computed aside (heads and
        dims not dense), by the same rule before the call."""
        p = self.plan
        ids = _ints(seqs, "seqs", (None,), ("n_seqs",))
        vq, ts = _queries(q, p.n_heads, p.head_dim)
        cu = _cu(ids.shape[0], vq.shape[0], rows, cu_seqlens_q)
        with self._lock:
            return _attend(p, "rove_paged_cache_attention", lambda a, types: (
                _lib.lib.rove_paged_cache_attention(self._ptr, ids.ctypes.data, ctypes.byref(a))
                if types is None else _lib.lib.rove_paged_cache_attention_typed(
                    self._ptr, ids.ctypes.data, ctypes.byref(a), ctypes.byref(types))),
                           vq, ts, cu, q_pos, q_angles, return_lse,
                           lambda: self._why(ids, cu, q_pos, q_angles), out, self._pool_arrays,
                           sinks)

    def _pool_arrays(self) -> dict:
        """The pool's arrays by name (for naming what an out= overlaps; called by
        attention(), which holds self._lock)."""
        v = self._view()
        return {"the cache's pool": v.k, "the cache's pool (V)": v.v,
                "the cache's scales": v.k_scale, "the cache's scales (V)": v.v_scale,
                "the cache's positions": v.pos}

    def _why(self, ids, cu, q_pos, q_angles) -> str:
        """Detail of a ROVE_ERR_INVALID_ARGUMENT from attention (looked for only after
        one, so that a decode step makes no per-sequence calls)."""
        rotates_q = self.plan.rotate & (_lib.ROTATE_Q | _lib.ROTATE_O)
        for i, s in enumerate(ids.tolist()):
            n, rows = int(_lib.lib.rove_paged_seq_length(self._ptr, s)), cu[i + 1] - cu[i]
            if n < 0:
                return f"no live sequence {s}"
            if q_pos is None and rows > n:
                return _short(s, rows, n)
            if n and rows and q_angles is None and rotates_q and self._angles.get(s):
                return f"sequence {s} was filled with angles: give q_angles"
        return ""

    def view(self) -> PagedPool:
        """The pool as read-only numpy arrays (PagedPool: k, v, k_scale, v_scale, pos,
        dtype), in the layout paged_attention() takes; no copy. They keep the cache
        alive and show its current contents."""
        with self._lock:
            return self._view()

    def _view(self) -> PagedPool:
        """view(), the caller holding self._lock."""
        kv = _lib.PagedKV()
        _lib.check("rove_paged_cache_view", _lib.lib.rove_paged_cache_view(self._ptr, kv))
        p, t = self.plan, int(kv.type)
        shape = (self.n_blocks, p.n_kv_heads, self.block_size, p.head_dim)
        arr = lambda ptr, shp, ts: np.asarray(_PoolMemory(self, ptr, shp, ts))  # noqa: E731
        sshape = shape[:3] + (-(-p.head_dim // _lib.Q8_BLOCK),)
        f4, i4 = np.dtype(np.float32).str, np.dtype(np.int32).str
        return PagedPool(arr(kv.k, shape, _TYPESTR[t]), arr(kv.v, shape, _TYPESTR[t]),
                         arr(kv.k_scale, sshape, f4) if kv.k_scale else None,
                         arr(kv.v_scale, sshape, f4) if kv.v_scale else None,
                         arr(kv.pos, shape[:1] + shape[2:3], i4), self.dtype)


def _block_stride(x):
    """Elements from one block (index of dim 0) of x to the next, when x's other dims are
    C-contiguous (a slice kv[:, 0] of an [n_blocks, 2, ...] cache); else None."""
    if _tensor.is_torch(x):
        strides, item = list(x.stride()), 1
    else:
        strides, item = list(x.strides), x.itemsize
    if x.shape[0] == 1:  # one block: its dim-0 stride is never used (numpy may say 0)
        strides[0] = item * int(np.prod(x.shape[1:], dtype=np.int64))
    want = item
    for n, s in zip(reversed(x.shape[1:]), reversed(strides[1:])):
        if n != 1 and s != want:
            return None
        want *= n
    if strides[0] < want or strides[0] % item:
        return None
    return strides[0] // item


def _dense(x, name, shape=None, dtype=None, write=False, blocked=False):
    """(object, pointer, rove_dtype) of pool memory: a C-contiguous CPU array (of exactly
    ``shape``, and numpy ``dtype`` when given, else a pool type), read (or with ``write``
    written) in place, never copied. ``blocked``: dim 0 may also step further than the
    rest (_block_stride)."""
    torch = _tensor._torch() if _tensor.is_torch(x) else None
    if torch is not None:
        _tensor._torch_checks(x, name, "", torch)
        t = {torch.float32: _F32, torch.bfloat16: _BF16, torch.float16: _F16, torch.int8: _Q8,
             getattr(torch, "uint16", torch.bfloat16): _BF16}.get(x.dtype)
        if _tensor.is_lazy(x):  # a lazy view: its memory does not hold its values
            raise ValueError(f"{name} is a lazily negated or conjugated view; pass "
                             f"{name}.resolve_neg() (a pool is read in place, never copied)")
        ok, ptr = x.is_contiguous(), x.data_ptr()
        match = dtype is None or x.dtype == getattr(torch, np.dtype(dtype).name)
    elif isinstance(x, np.ndarray):
        t = _NP_POOL.get(x.dtype)
        if not x.flags.aligned:
            raise ValueError(f"{name} is not aligned to its element size: librove reads "
                             "the pool in place (a pool is never copied)")
        ok, ptr = x.flags.c_contiguous, x.__array_interface__["data"][0]
        match = dtype is None or x.dtype == np.dtype(dtype)
    else:
        raise TypeError(f"{name} must be a numpy.ndarray or a CPU torch.Tensor, not "
                        f"{type(x).__name__}")
    if not match or (dtype is None and t is None):
        raise TypeError(f"{name} has dtype {_dtype_str(x)}; librove needs " + (
            np.dtype(dtype).name if dtype else "float32, bfloat16 (torch, or its bits as "
                                               "uint16), float16 or int8 (q8)"))
    if shape is not None and tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(x.shape)}, expected {tuple(shape)}")
    if not ok and blocked and len(x.shape) > 1 and _block_stride(x) is not None:
        ok = True
    if not ok:
        raise ValueError(f"{name} must be C-contiguous" + (
            " (or a block-strided slice such as kv_cache[:, 0])" if blocked else "") +
            ": librove reads the pool in place (a pool is never copied)")
    if write and torch is None and not x.flags.writeable:
        raise ValueError(f"{name} is a read-only array: librove writes the pool in place")
    if write:
        _tensor.check_inplace(x, name)
    return x, ptr, t


def _pool(k_pool, v_pool, D, layout, dtype, k_scale, v_scale, pos_pool, write=False,
          fn="rove_paged_attention"):
    """The caller's pool checked (its shapes, one storage type, the layout): (PagedKV,
    the arrays to keep alive, (n_blocks, n_kv_heads, block_size, rove_dtype))."""
    if layout not in ("head_major", "token_major"):
        raise ValueError(f"layout must be 'head_major' or 'token_major' (got {layout!r})")
    tm = layout == "token_major"
    kobj, kp, t = _dense(k_pool, "k_pool", write=write, blocked=True)
    if len(k_pool.shape) != 4 or k_pool.shape[3] != D:
        raise ValueError(f"k_pool has shape {tuple(k_pool.shape)}; expected [n_blocks, "
                         + ("block_size, n_kv_heads" if tm else "n_kv_heads, block_size")
                         + f", head_dim={D}]")
    if tm:
        nb, bs, Hk, _ = shape = tuple(k_pool.shape)
    else:
        nb, Hk, bs, _ = shape = tuple(k_pool.shape)
    if nb <= 0:
        raise ValueError("k_pool has no blocks")
    _int32("n_blocks", nb)
    if bs <= 0 or bs & (bs - 1) or bs > 65536:
        raise ValueError(f"k_pool's block_size {bs} must be a power of two, 1 .. 65536")
    vobj, vp, tv = _dense(v_pool, "v_pool", shape, write=write, blocked=True)
    if tv != t or (dtype is not None and parse_dtype(dtype) != t):
        raise TypeError(f"k_pool is {_dtype_str(k_pool)}, v_pool {_dtype_str(v_pool)}"
                        + (f", dtype={dtype!r}" if dtype is not None else "") +
                        ": one storage type for all")
    if tm and t == _Q8:
        raise _lib.RoveUnsupported(fn, _lib.ERR_UNSUPPORTED, "a q8 pool is head-major only")
    kst, vst = _block_stride(k_pool), _block_stride(v_pool)
    if kst != vst:
        raise ValueError(f"k_pool steps {kst} elements from block to block, v_pool {vst}: "
                         "librove takes one block stride for both")
    if t == _Q8 and kst != Hk * bs * D:
        raise _lib.RoveUnsupported(fn, _lib.ERR_UNSUPPORTED, "a q8 pool is dense (no block stride)")
    kv = _lib.PagedKV(k=kp, v=vp, type=t, block_size=bs, n_blocks=nb,
                      layout=_lib.PAGED_TOKEN_MAJOR if tm else _lib.PAGED_HEAD_MAJOR,
                      block_stride=kst)
    if (t == _Q8) != (k_scale is not None or v_scale is not None) or (
            t == _Q8 and (k_scale is None or v_scale is None)):
        raise ValueError("a q8 pool takes k_scale and v_scale (both), other types neither")
    keep = [kobj, vobj]
    if t == _Q8:
        sshape = shape[:3] + (-(-D // _lib.Q8_BLOCK),)
        keep += [_dense(k_scale, "k_scale", sshape, np.float32, write),
                 _dense(v_scale, "v_scale", sshape, np.float32, write)]
        kv.k_scale, kv.v_scale = keep[2][1], keep[3][1]
    if pos_pool is not None:
        keep.append(_dense(pos_pool, "pos_pool", (nb, bs), np.int32, write))
        kv.pos = keep[-1][1]
    return kv, keep, (nb, Hk, bs, t)


def paged_attention(q, k_pool, v_pool, block_tables, seq_lens, cu_seqlens_q=None, *,
                    plan=None, pos_pool=None, k_scale=None, v_scale=None, dtype=None,
                    q_pos=None, q_angles=None, return_lse=False, layout="head_major",
                    out=None, sinks=None, **options):
    """Attention of packed query rows over an engine's own block pool
    (rove_paged_attention; the layout of this module's docstring), one call for all
    sequences.

    q [total_q, n_heads, head_dim] float32, float16 or (torch) bfloat16; k_pool, v_pool
    [n_blocks, n_kv_heads, block_size, head_dim] (C-contiguous, numpy or CPU torch; the
    storage type from their
    dtype: float32, bfloat16 or uint16 bits (bf16), float16, int8 (q8, with k_scale and
    v_scale); ``dtype`` optionally names it as rove.KVCache's dtype does ("bf16",
    torch.bfloat16, ...), and must then agree); block_tables
    [n_seqs, max_blocks] and seq_lens [n_seqs] integers (the first ceil(seq_lens[s] /
    block_size) entries of row s are read: each in [0, n_blocks) and once in its row, else
    RoveInvalidArgument); cu_seqlens_q [n_seqs + 1] (None: total_q / n_seqs rows each).
    pos_pool: None (token t of every sequence at position t) or int32 [n_blocks,
    block_size]. The plan: ``plan=`` (a rove.Plan; PagedKVCache.plan for its pool), or
    rove.get_plan(heads of q and k_pool, head_dim, **options) with the options of
    rove.Plan (rotate=, causal=, rope=, ...). q_pos, q_angles, return_lse, out=, sinks= and
    the result as PagedKVCache.attention (out='s address range must not meet q's, the pools'
    or the other inputs').

    k_pool and v_pool may also be block-strided (dim 0 steps further than a block, the
    rest dense: K = kv_cache[:, 0] and V = kv_cache[:, 1] of FlashInfer's 5-D
    [n_blocks, 2, ...] caches, read in place; one stride for both; not q8).
    ``layout="token_major"`` reads pools of [n_blocks, block_size, n_kv_heads, head_dim]
    in place: flash-attn's ``flash_attn_with_kvcache`` order and FlashInfer's "NHD"
    (float32, bfloat16, float16; not q8); the default "head_major" is FlashInfer's "HND".
    The same values give the same bits in either layout. The layout must be named right:
    a pool given with the other layout can pass every shape check (block_size and
    n_kv_heads read swapped) and give a wrong answer. Pass ``plan=`` (its n_kv_heads is
    then checked against the pool) or ``pos_pool`` to catch most such mistakes; when
    n_kv_heads == block_size nothing can.
    """
    pt = plan if isinstance(plan, Plan) else None
    vq, ts = _queries(q, *((pt.n_heads, pt.head_dim) if pt else ()))
    T, H, D = vq.shape
    kv, keep, (nb, Hk, bs, t) = _pool(k_pool, v_pool, D, layout, dtype, k_scale, v_scale,
                                      pos_pool)
    if (pt is None and (Hk <= 0 or H % Hk)) or (pt and Hk != pt.n_kv_heads):
        raise ValueError(f"k_pool has {Hk} KV heads for {H} query heads" +
                         (f" (the plan has n_kv_heads={pt.n_kv_heads})" if pt else ""))
    tables = _ints(block_tables, "block_tables", (None, None), ("n_seqs", "max_blocks"))
    n, max_blocks = _int32("n_seqs", tables.shape[0]), _int32("max_blocks", tables.shape[1])
    lens = _ints(seq_lens, "seq_lens", (n,))
    cu = _cu(n, T, None, cu_seqlens_q, "give cu_seqlens_q")
    if np.any(lens < 0):
        raise ValueError("seq_lens must be >= 0")
    if bs > 0 and np.any(-(-lens.astype(np.int64) // bs) > max_blocks):
        raise ValueError(f"a sequence needs more blocks than block_tables' {max_blocks} columns")
    if q_pos is None and np.any(np.diff(cu) > lens):
        s = int(np.nonzero(np.diff(cu) > lens)[0][0])
        raise ValueError(_short(s, cu[s + 1] - cu[s], lens[s]))
    plan = _plan(plan, (H, Hk, D), options)

    def call(a, types):
        a.seq_lens, a.block_tables, a.max_blocks = lens.ctypes.data, tables.ctypes.data, max_blocks
        if types is None:
            return _lib.lib.rove_paged_attention(plan._ptr, ctypes.byref(kv), ctypes.byref(a))
        return _lib.lib.rove_paged_attention_typed(plan._ptr, ctypes.byref(kv), ctypes.byref(a),
                                                   ctypes.byref(types))
    return _attend(plan, "rove_paged_attention", call, vq, ts, cu, q_pos, q_angles, return_lse,
                   lambda: "a block table entry a sequence reads is outside [0, n_blocks) or "
                           "repeated in its row", out,
                   lambda: {"k_pool": k_pool, "v_pool": v_pool, "k_scale": k_scale,
                            "v_scale": v_scale, "pos_pool": pos_pool}, sinks)


def paged_store(k, v, k_pool, v_pool, slot_mapping, positions, *, plan=None, pos_pool=None,
                k_scale=None, v_scale=None, angles=None, dtype=None, layout="head_major",
                **options) -> None:
    """Write n new tokens into an engine's own pool, in place (rove_paged_store; vLLM's
    reshape_and_cache): token i's K and V rows of every KV head go to slot
    ``slot_mapping[i]`` = block * block_size + row, rotated into the global frame and
    rounded to the pool's type exactly as PagedKVCache.append stores them, so that
    paged_attention() over the pool gives PagedKVCache.attention's bits.

    k, v [n, n_kv_heads, head_dim] float32, bfloat16 or float16 (one dtype for both;
    numpy or CPU torch). slot_mapping [n] integers: a slot in [0, n_blocks * block_size),
    or negative to skip the token (padding); no slot twice. positions [n] integers: the
    tokens' positions (written to pos_pool[slot] when pos_pool is given; without a
    pos_pool they must be each token's index in its sequence, paged_attention's
    default). angles: None or float64 [n, n_kv_heads, rotary_dim/2] explicit angles
    (Selective RoPE). The pool arrays (k_pool, v_pool, k_scale, v_scale, pos_pool, in
    paged_attention's layouts) must be C-contiguous (or block-strided, as there) and
    writable; a torch tensor carries no read-only flag, so never wrap PagedKVCache.view()'s
    arrays with torch.from_numpy to store into them. The plan: ``plan=`` (the one the attention will use), or
    rove.get_plan(n_kv_heads, n_kv_heads, head_dim, **options): the store depends on the
    rotation only (rotate=, rope=, ...), never on the query heads. Raises
    RoveInvalidArgument (the pool untouched) for a slot past the pool or repeated, a value
    the pool's type cannot hold, an input inside the pool."""
    vk, vv = _tensor.view_float(k, "k"), _tensor.view_float(v, "v")
    if vk.dtype != vv.dtype:
        raise TypeError(f"k is {_dtype_str(k)} and v is {_dtype_str(v)}: paged_store() takes "
                        "k and v of one dtype (float32, bfloat16 or float16)")
    if len(vk.shape) != 3 or tuple(vk.shape) != tuple(vv.shape):
        raise ValueError(f"k {tuple(vk.shape)} / v {tuple(vv.shape)}: expected one shape "
                         "[n, n_kv_heads, head_dim]")
    n, Hk_in, D = vk.shape
    kv, keep, (nb, Hk, bs, t) = _pool(k_pool, v_pool, D, layout, dtype, k_scale, v_scale,
                                      pos_pool, write=True, fn="rove_paged_store")
    if Hk_in != Hk:
        raise ValueError(f"k has {Hk_in} KV heads, k_pool {Hk}")
    if isinstance(plan, Plan) and (plan.n_kv_heads, plan.head_dim) != (Hk, D):
        raise ValueError(f"the plan has {plan.n_kv_heads} KV heads of {plan.head_dim}; the "
                         f"pool {Hk} of {D}")
    plan = _plan(plan, (Hk, Hk, D), options)
    n = _int32("the tokens stored", n)
    sm = _tensor.to_numpy(slot_mapping, "slot_mapping")
    if sm.size == 0 and sm.dtype == np.float64:  # np.asarray([])
        sm = sm.astype(np.int64)
    if sm.dtype == np.bool_ or not np.issubdtype(sm.dtype, np.integer):
        raise TypeError(f"slot_mapping must hold integers (got dtype {sm.dtype})")
    if sm.shape != (n,):
        raise ValueError(f"slot_mapping has shape {sm.shape}; expected [{n}]")
    if sm.dtype.kind == "u" and sm.size and int(sm.max()) > 2 ** 63 - 1:
        raise ValueError("slot_mapping has values past int64")
    slots = np.array(sm, dtype=np.int64, order="C", copy=True)  # librove's own copy
    if positions is not None and n == 0:
        positions = np.zeros(0, np.int32)  # [] is float64 to numpy
    pp_obj, pp = _tensor.positions(positions, "positions", 1, n)
    if pp is None:
        raise ValueError("positions are required: the tokens' positions rotate them")
    if angles is not None and np.any(slots < 0):  # a padding token's angles are not used
        angles = _tensor.to_numpy(angles, "angles")
        if angles.shape[:1] == (n,) and np.issubdtype(angles.dtype, np.floating):
            angles = angles.copy()
            angles[slots < 0] = 0
    a_obj, ap = (None, None) if angles is None else _angles(
        angles, "angles", (n, Hk, plan.rotary_dim // 2))
    if n == 0:
        return
    (lk, ks), (lv, vs) = _token_rows(vk), _token_rows(vv)
    st = _lib.lib.rove_paged_store(plan._ptr, ctypes.byref(kv), n, slots.ctypes.data, lk.ptr,
                                   ks, lv.ptr, vs, lk.dtype, pp, ap)
    detail = ""
    if st == _lib.ERR_INVALID_ARGUMENT:
        cap = nb * bs
        if np.any(slots >= cap):
            detail = f"a slot is past the pool's {cap} (n_blocks * block_size)"
        elif len(np.unique(slots[slots >= 0])) != int(np.count_nonzero(slots >= 0)):
            detail = "a slot appears twice"
        else:
            detail = ("an input (k, v, slot_mapping, positions, angles) overlaps a pool array, "
                      "or K's and V's blocks share memory" +
                      (", or " + _UNREPRESENTABLE[_lib.dtype_name(t)]
                       if _lib.dtype_name(t) in _UNREPRESENTABLE else ""))
    _lib.check("rove_paged_store", st, detail)
    _tensor.mark_written(k_pool, v_pool, k_scale, v_scale, pos_pool)
    del lk, lv, pp_obj, a_obj, keep
