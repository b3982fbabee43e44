# SPDX-License-Identifier: MIT
"""NumPy / torch tensors seen as (pointer, shape, strides): checks, views, allocation.

Only float32 (float64 for angles, integers for positions) CPU tensors are accepted, and
nothing is ever cast silently; attention tensors may also be bfloat16 / float16
(view_float: librove widens them exactly and rounds its output once), and the calls that
read float32 only take half-precision numpy / torch arrays as documented float32 copies
(is_half / widened: their results rounded once to the input's dtype where they have it).
A tensor whose strides the C API can express is passed by
pointer (zero-copy); otherwise one contiguous copy is made, and ``copies`` counts it so
that tests can tell the two paths apart.
"""
from __future__ import annotations

import contextlib
import sys

import numpy as np

copies = 0  # number of input/output copies made so far (for tests and curious users)

_INT32_MIN, _INT32_MAX = -(2 ** 31), 2 ** 31 - 1


def _torch():
    """The torch module if it has been imported (we never import it ourselves)."""
    return sys.modules.get("torch")


def is_torch(x) -> bool:
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


_HALF = ("torch.bfloat16", "torch.float16", "float16")


def is_half(x) -> bool:
    """x is a bfloat16 / float16 torch tensor or a float16 numpy array (the inputs the
    calls that read float32 only widen to float32 copies; other array-likes are not
    arrays librove takes, whatever their dtype)."""
    return (isinstance(x, np.ndarray) or is_torch(x)) and str(x.dtype) in _HALF


def widened(x):
    """A half-precision x (is_half) as a float32 copy (torch: a differentiable cast, so a
    gradient reaches x rounded once to its dtype); anything else, None included, as it is."""
    if not is_half(x):
        return x
    return x.float() if is_torch(x) else np.asarray(x, dtype=np.float32)


def rounded(x, dtype):
    """A float32 result x rounded once to dtype (a widened input's), torch or numpy."""
    return x.to(dtype) if is_torch(x) else x.astype(dtype)


class View:
    """A CPU array as librove sees it: the original object, its kind, the address of
    element 0, its shape, its strides in elements and its element type (a rove_dtype:
    0 = float32, see view_float)."""
    __slots__ = ("obj", "torch", "ptr", "shape", "strides", "dtype")

    def __init__(self, obj, torch_kind, ptr, shape, strides, dtype=0):
        self.obj, self.torch, self.ptr = obj, torch_kind, ptr
        self.shape, self.strides, self.dtype = shape, strides, dtype


def _torch_checks(x, name: str, dtype_name: str, t) -> None:
    if not x.is_cpu:
        raise ValueError(f"{name} is on device '{x.device}': librove runs on the CPU; "
                         f"move it with {name}.cpu()")
    if x.layout != t.strided:
        raise TypeError(f"{name} has layout {x.layout}: librove needs a dense (strided) tensor")
    _no_grad_wanted(x, name, t)


_DIFFERENTIABLE = ("rove.attention, Plan.attention, rove.attention_varlen, rove.gla, "
                   "rove.selective_angles, rove.rotate and rove.rotate_angles are the "
                   "differentiable ones")
_FORWARD_AD = ("librove has no forward-mode derivatives (torch.autograd.forward_ad, "
               "torch.func.jvp / jacfwd): use reverse mode (backward, torch.func.grad / "
               "vjp / jacrev)")


_probes = None  # (torch.autograd.forward_ad, torch._C._functorch.maybe_current_level)


def transforms_active(t) -> bool:
    """Whether a forward-AD dual level or a torch.func transform is open (a module global
    and one C call, ~0.1 us): when not, no tensor can carry a tangent or be a torch.func
    tensor."""
    global _probes
    if _probes is None:
        _probes = (t.autograd.forward_ad, t._C._functorch.maybe_current_level)
    fa, level = _probes
    return getattr(fa, "_current_level", -1) >= 0 or level() is not None


def forward_ad(xs, t=None) -> bool:
    """Whether a forward-mode derivative is being taken through any of the torch tensors
    xs: a dual tensor of torch.autograd.forward_ad, or inside torch.func.jvp / jacfwd."""
    t = t or _torch()
    if not transforms_active(t):
        return False
    fa, level = _probes
    if getattr(fa, "_current_level", -1) >= 0 and any(
            is_torch(x) and fa.unpack_dual(x).tangent is not None for x in xs):
        return True
    if level() is None:
        return False
    from torch._C._functorch import TransformType
    from torch._functorch.pyfunctorch import retrieve_all_functorch_interpreters
    return any(i.key() == TransformType.Jvp for i in retrieve_all_functorch_interpreters())


def func_wrapped(x, t=None) -> bool:
    """Whether x is a tensor of a torch.func transform (vmap's batched tensor, grad's
    wrapper): no storage of its own, only the transform's Function calls may read it."""
    t = t or _torch()
    return is_torch(x) and t._C._functorch.maybe_current_level() is not None and \
        t._C._functorch.is_functorch_wrapped_tensor(x)


def _no_grad_wanted(x, name: str, t) -> None:
    """Refuse a tensor whose gradient a call without a backward would silently drop (and,
    for every call, a forward-mode derivative, which librove would drop as silently; a
    tensor of a torch.func transform outside the calls that support them)."""
    if x.requires_grad and t.is_grad_enabled() and name == "out":
        raise RuntimeError("out requires grad: librove writes the result into it in place, "
                           "which autograd does not allow for a tensor that requires grad "
                           "(pass out= a tensor that does not, or leave out= unset to get a "
                           "differentiable result)")
    if x.requires_grad and t.is_grad_enabled():
        raise RuntimeError(f"{name} requires grad, but this librove call has no backward "
                           f"({_DIFFERENTIABLE}): call it under torch.no_grad() (or pass a "
                           "detached tensor)")
    if not transforms_active(t):
        return
    if forward_ad((x,), t):
        raise NotImplementedError(f"{name}: {_FORWARD_AD}")
    if func_wrapped(x, t):
        raise NotImplementedError(
            f"{name} is a tensor of a torch.func transform (vmap, grad, ...), which this "
            f"librove call does not support (it reads the tensor's memory; {_DIFFERENTIABLE} "
            "and support torch.func.grad, vjp, jacrev and vmap)")


_DTYPES = {}  # numpy dtype -> (np.dtype, name); dtype.name is slow (a Python property)


def _dtype(dtype):
    d = _DTYPES.get(dtype)
    if d is None:
        nd = np.dtype(dtype)
        d = _DTYPES[dtype] = (nd, nd.name)
    return d


def view(x, name: str, dtype=np.float32) -> View:
    """Check that x is a CPU ndarray/Tensor of exactly ``dtype`` and describe it."""
    np_dtype, dname = _dtype(dtype)
    if isinstance(x, np.ndarray):
        if x.dtype != np_dtype:  # also rejects a byte-swapped float32
            raise TypeError(f"{name} has dtype {x.dtype}; librove needs {np_dtype} and never "
                            f"casts silently: pass {name}.astype(np.{np_dtype.name})")
        item = np_dtype.itemsize
        strides = tuple(s // item if s % item == 0 else None for s in x.strides)
        ptr = x.__array_interface__["data"][0]
        if ptr % item:  # a misaligned array: mark it as not expressible
            strides = tuple(None for _ in strides)
        return View(x, False, ptr, x.shape, strides)
    t = _torch()
    if t is not None and isinstance(x, t.Tensor):
        _torch_checks(x, name, dname, t)
        want = getattr(t, dname)
        if x.dtype != want:
            raise TypeError(f"{name} has dtype {x.dtype}; librove needs {want} and never "
                            f"casts silently: pass {name}.{'float' if want == t.float32 else 'double'}()")
        x = resolved(x)
        return View(x, True, tensor_ptr(x), tuple(x.shape), tuple(x.stride()))
    raise TypeError(f"{name} must be a numpy.ndarray or a CPU torch.Tensor, not "
                    f"{type(x).__name__}")


# rove_dtype values (rove.h's rove_dtype; _lib.DTYPE_* holds the same numbers, checked
# against the header by test_capi_layout.py; not imported here to keep this module free
# of the library).
F32, BF16, F16 = 0, 1, 2
_NP_FLOAT = {np.dtype(np.float32): F32, np.dtype(np.float16): F16}  # native byte order
_TORCH_FLOAT = None  # torch dtype -> rove_dtype, filled on first use (torch never imported)


def _torch_float(t):
    global _TORCH_FLOAT
    if _TORCH_FLOAT is None:
        _TORCH_FLOAT = {t.float32: F32, t.bfloat16: BF16, t.float16: F16}
    return _TORCH_FLOAT


def view_float(x, name: str) -> View:
    """view() for the tensors of an attention call: float32, bfloat16 (torch) or float16,
    never cast (librove reads them as they are); ``.dtype`` is their rove_dtype."""
    if isinstance(x, np.ndarray):
        rdt = _NP_FLOAT.get(x.dtype)  # a byte-swapped dtype compares unequal: rejected
        if rdt is None:
            raise TypeError(f"{name} has dtype {x.dtype}; librove takes float32 or float16 "
                            f"(and torch.bfloat16) and never casts silently: pass "
                            f"{name}.astype(np.float32)")
        v = view(x, name, x.dtype)
        v.dtype = rdt
        return v
    t = _torch()
    if t is not None and isinstance(x, t.Tensor):
        rdt = _torch_float(t).get(x.dtype)
        if rdt is None:
            _torch_checks(x, name, "", t)
            raise TypeError(f"{name} has dtype {x.dtype}; librove takes torch.float32, "
                            f"torch.bfloat16 or torch.float16 and never casts silently: "
                            f"pass {name}.float()")
        v = _torch_view(x, name, t)
        v.dtype = rdt
        return v
    raise TypeError(f"{name} must be a numpy.ndarray or a CPU torch.Tensor, not "
                    f"{type(x).__name__}")


def _torch_view(x, name, t) -> View:
    """view() of a torch tensor whose dtype was checked by the caller."""
    _torch_checks(x, name, "", t)
    x = resolved(x)
    return View(x, True, tensor_ptr(x), tuple(x.shape), tuple(x.stride()))


def torch_dtype(rdt: int):
    """The torch dtype of a rove_dtype (F32, BF16, F16)."""
    t = _torch()
    return {F32: t.float32, BF16: t.bfloat16, F16: t.float16}[rdt]


def permuted(v: View, order) -> View:
    """The same memory with its axes in ``order`` (no copy)."""
    return View(v.obj, v.torch, v.ptr, tuple(v.shape[i] for i in order),
                tuple(v.strides[i] for i in order), v.dtype)


def token_stride(shape, strides):
    """Token stride (floats) of a [b, s, h, d] tensor for the C API, or None.

    The C API wants the heads and dims of one token dense ([h][d] contiguous), a token
    stride >= h*d between consecutive tokens, and batch row b at b * s * stride (token t
    of batch b is row b*s + t). Strides of size-1 axes do not matter."""
    b, s, h, d = shape
    sb, ss, sh, sd = strides
    if None in strides or sd != 1 or (h > 1 and sh != d):
        return None
    dense = h * d
    ts = ss if s > 1 else (sb if b > 1 else dense)
    if ts < dense or (b > 1 and sb != s * ts):
        return None
    return ts


def kv_strides(shape, strides):
    """(token, head, batch) strides in elements of a [b, s, h, d] K or V whose heads are
    apart (PyTorch's [b, h, s, d] and transformers' caches), for rove_attention_args'
    k_stride / kv_head_stride / k_batch_stride; or None when the C API cannot read it in
    place (dims not dense, a stride below d, a 0 stride on an axis longer than 1: a
    broadcast, which C would read as "the default"). An axis of length 1 gets the value
    C's default implies (head stride d, token stride d, batch stride 0)."""
    b, s, h, d = shape
    sb, ss, sh, sd = strides
    if None in strides or (d > 1 and sd != 1):
        return None
    ts = ss if s > 1 else d
    hs = sh if h > 1 else d
    bs = sb if b > 1 else 0
    if ts < d or hs < d or (b > 1 and sb <= 0):
        return None
    return ts, hs, bs


def is_lazy(x) -> bool:
    """A lazily negated or conjugated torch view (torch's neg / conj bits, e.g.
    torch._neg_view, x.conj().imag): its memory holds -x, not its values."""
    return x.is_neg() or x.is_conj()


def resolved(x):
    """A torch tensor whose memory holds its values: a lazy view (is_lazy) resolved into a
    copy, any other tensor as it is. Everything that hands a data_ptr() to C goes through
    this (view() does; .float() and .contiguous() keep the bits where they copy nothing)."""
    return x.resolve_conj().resolve_neg() if is_lazy(x) else x


def plain(x):
    """x detached and resolved(): for the paths that read a tensor's memory without view()
    (the backward passes)."""
    return resolved(x.detach())


_NO_ELEMENTS = np.zeros(8, np.float64)  # what an empty torch tensor's pointer becomes


def tensor_ptr(x) -> int:
    """x.data_ptr(), never 0: an empty torch tensor has no storage and data_ptr() 0, which C
    reads as NULL, an argument not given (e.g. explicit angles given for the queries and,
    empty, for the keys: refused as only one of the pair). C reads no element of an empty
    tensor, so any valid address stands for it."""
    p = x.data_ptr()
    return p if p else _NO_ELEMENTS.__array_interface__["data"][0]


def dense_copy(v: View, logical_order) -> View:
    """One contiguous copy of v with its axes in ``logical_order`` (counted in ``copies``)."""
    global copies
    copies += 1
    if v.torch:
        c = plain(v.obj).permute(*logical_order).contiguous()
        return View(c, True, tensor_ptr(c), tuple(c.shape), tuple(c.stride()), v.dtype)
    c = np.array(np.transpose(v.obj, logical_order), order="C", copy=True)  # aligned too
    return View(c, False, c.__array_interface__["data"][0], c.shape,
                tuple(s // c.itemsize for s in c.strides), v.dtype)


def empty(like_torch: bool, shape, dtype=np.float32, rdt=None):
    """A fresh C-contiguous array of the kind of the inputs; returns (obj, ptr). ``rdt``
    (a rove_dtype: F32, BF16 for torch, F16) replaces ``dtype`` when given."""
    if rdt is not None:
        if like_torch:
            x = _torch().empty(shape, dtype=torch_dtype(rdt))
            return x, tensor_ptr(x)
        dtype = {F32: np.float32, F16: np.float16}[rdt]
    if like_torch:
        t = _torch()
        x = t.empty(shape, dtype=getattr(t, _dtype(dtype)[1]))
        return x, tensor_ptr(x)
    x = np.empty(shape, dtype=dtype)
    return x, x.__array_interface__["data"][0]


def contiguous(x, name: str, dtype, shape=None, writable=False):
    """(obj, ptr) of a C-contiguous array of exactly ``dtype`` and ``shape``; a
    non-contiguous input is copied (counted) unless ``writable`` (the caller writes into
    it, so a copy would lose the result: then it must be contiguous already)."""
    global copies
    v = view(x, name, dtype)
    if shape is not None and tuple(v.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(v.shape)}, expected {tuple(shape)}")
    obj = v.obj
    if v.torch:
        if writable:
            check_inplace(obj, name)
            if is_lazy(x):  # view() resolved it into a copy: writes would be lost
                raise ValueError(f"{name} is a lazily negated or conjugated view (its memory "
                                 "does not hold its values), so it cannot be written in place")
        if obj.requires_grad:
            obj = obj.detach()
        ok = obj.is_contiguous()
        if writable and not ok:
            raise ValueError(f"{name} must be contiguous (it is written in place)")
        if not ok:
            copies += 1
            obj = obj.contiguous()
        return obj, tensor_ptr(obj)
    ok = obj.flags.c_contiguous and obj.flags.aligned
    if writable:
        if not ok:
            raise ValueError(f"{name} must be C-contiguous (it is written in place)")
        if not obj.flags.writeable:
            raise ValueError(f"{name} is read-only (it is written in place)")
    if not ok:
        copies += 1
        obj = np.array(obj, order="C", copy=True)  # a fresh buffer: aligned as well
    return obj, obj.__array_interface__["data"][0]


def _extent(x):
    """[lo, hi) of the bytes an ndarray's or a tensor's elements span; None when empty."""
    t = _torch()
    if t is not None and isinstance(x, t.Tensor):
        if x.numel() == 0 or x.device.type != "cpu":
            return None
        es, ptr = x.element_size(), x.data_ptr()
        shape, strides = x.shape, [st * es for st in x.stride()]
    elif isinstance(x, np.ndarray):
        if x.size == 0:
            return None
        es, ptr, shape, strides = x.itemsize, x.__array_interface__["data"][0], x.shape, x.strides
    else:
        return None
    lo = ptr + sum(min(0, (n - 1) * st) for n, st in zip(shape, strides))
    hi = ptr + sum(max(0, (n - 1) * st) for n, st in zip(shape, strides)) + es
    return lo, hi


def check_inplace(x, name: str) -> None:
    """Refuse a torch tensor that torch itself would not let an in-place op update: an
    inference tensor outside torch.inference_mode() (librove writes through the data
    pointer, which torch cannot stop, so librove checks first)."""
    t = _torch()
    if (t is not None and isinstance(x, t.Tensor) and x.is_inference()
            and not t.is_inference_mode_enabled()):
        raise RuntimeError(f"{name} is an inference tensor: torch allows no in-place update "
                           "of it outside torch.inference_mode()")


def check_distinct(x, name: str) -> None:
    """Refuse an array or tensor written in place whose elements may share memory (an axis
    of more than one element with stride 0: torch's expand(), numpy's broadcast_to; or
    strides that interleave, as as_strided can make): an element would take the value
    last written there. The test: the axes sorted by |stride|, each one's stride passes
    the extent of the axes below it (a sufficient condition, which every dense or padded
    layout meets; an exotic non-overlapping interleaving is refused too)."""
    if 0 in tuple(x.shape):  # no elements, none shared (numpy gives empty arrays 0 strides)
        return
    if is_torch(x):  # strides in elements, an element one unit wide
        strides, width = x.stride(), 1
    else:  # strides in bytes
        strides, width = x.strides, x.itemsize
    if any(st == 0 and n > 1 for n, st in zip(x.shape, strides)):
        raise ValueError(f"{name} has elements that share memory (a stride-0 view such as "
                         "expand() or broadcast_to()): it cannot hold the output")
    span = width  # the extent covered by the axes so far (one element)
    for st, n in sorted((abs(st), n) for n, st in zip(x.shape, strides) if n > 1):
        if st < span:
            raise ValueError(f"{name} has strides {tuple(strides)} for shape "
                             f"{tuple(x.shape)}: its elements may share memory, so it "
                             "cannot hold the output (pass a dense or padded array)")
        span += st * (n - 1)


def mark_written(*xs) -> None:
    """Tell autograd that librove wrote these torch tensors in place (through their data
    pointers, which torch does not see): their version counters go up, so a graph that
    saved one of them refuses a later backward, as it does after x.copy_(...). Nothing
    for numpy arrays or None (or on a torch without torch.autograd.graph.increment_version)."""
    t = _torch()
    if t is None:
        return
    inc = getattr(getattr(t.autograd, "graph", None), "increment_version", None)
    for x in xs:
        if inc is not None and isinstance(x, t.Tensor):
            inc(x)


def overlap_detail(out, **inputs) -> str:
    """For an invalid-argument status: which inputs out= shares memory with ('' for none).
    librove refuses an output that overlaps an input (it would write over what it reads);
    this only names the cause, it decides nothing."""
    e = _extent(out)
    if e is None:
        return ""
    hit = [n for n, x in inputs.items() if (f := _extent(x)) and f[0] < e[1] and e[0] < f[1]]
    return (f"out= overlaps {', '.join(hit)} (librove does not write over its inputs)"
            if hit else "")


def _func_constant(x, name: str, t):
    """The plain tensor under an integer tensor that torch.func's grad has wrapped
    (positions or cu_seqlens made inside a transformed function: no derivative exists for
    them, so the value is all there is). A tensor that vmap batches has a value per
    element, which a librove call cannot take: refused."""
    f = t._C._functorch
    while f.is_functorch_wrapped_tensor(x):
        if f.is_batchedtensor(x):
            raise NotImplementedError(
                f"{name} is batched by torch.func.vmap: librove takes one {name} for the "
                "call (vmap over the other inputs, or loop)")
        x = f.get_unwrapped(x)
    return x


def to_numpy(x, name: str):
    """An ndarray of x (CPU torch tensors and lists/ints are accepted, never copied beyond
    what numpy needs)."""
    if isinstance(x, np.ndarray):
        return x
    t = _torch()
    if t is not None and isinstance(x, t.Tensor):
        if x.device.type != "cpu":
            raise ValueError(f"{name} is on device '{x.device}': move it with {name}.cpu()")
        if func_wrapped(x, t) and not x.dtype.is_floating_point and not x.is_complex():
            x = _func_constant(x, name, t)
        _no_grad_wanted(x, name, t)
        # a plain tensor (a torch.func tensor was refused above) inside a transform:
        # detach / numpy would be the transform's ops, which wrap their results
        inside = t._C._functorch.maybe_current_level() is not None
        with t._C._DisableFuncTorch() if inside else contextlib.nullcontext():
            return plain(x).numpy()  # (numpy() refuses a lazily negated view)
    return np.asarray(x)


def positions(pos, name: str, batch: int, length: int):
    """int32 C-contiguous [batch, length] positions (or None), and its pointer.

    Any integer dtype is accepted when every value fits int32 (otherwise ValueError); a
    1-D [length] array is broadcast over the batch with one small copy."""
    if pos is None:
        return None, None
    a = to_numpy(pos, name)
    if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name} must hold integers (got dtype {a.dtype})")
    if a.ndim == 1:
        shape_ok = a.shape[0] == length
    elif a.ndim == 2:
        shape_ok = a.shape == (batch, length)
    else:
        shape_ok = False
    if not shape_ok:
        raise ValueError(f"{name} has shape {a.shape}; expected [{length}] or "
                         f"[batch={batch}, {length}]")
    if a.dtype != np.int32:
        if a.size and (int(a.min()) < _INT32_MIN or int(a.max()) > _INT32_MAX):
            raise ValueError(f"{name} has values outside int32 "
                             f"[{int(a.min())}, {int(a.max())}]")
        a = a.astype(np.int32)
    if a.ndim == 1 and batch > 1:  # the one documented copy: [length] -> [batch, length]
        a = np.broadcast_to(a, (batch, length))
    if not (a.flags.c_contiguous and a.flags.aligned):
        a = np.array(a, order="C", copy=True)
    return a, a.__array_interface__["data"][0]
