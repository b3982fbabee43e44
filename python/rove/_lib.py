# SPDX-License-Identifier: MIT
"""Loading librove.so and the ctypes mirror of include/rove.h.

Everything that knows the C ABI lives here: the struct layouts (checked against rove.h by
tests/python/test_capi_layout.py, which compiles a C program printing sizeof/offsetof),
the constants, the function prototypes and the status -> exception mapping.

The library is loaded with ctypes.CDLL, which releases the GIL for the duration of every
foreign call: other Python threads run while librove computes (tests/python/test_threads.py
checks it), and several Python threads may call librove at once.
"""
from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading
import weakref
from collections import OrderedDict
from ctypes import (POINTER, Structure, c_char_p, c_double, c_float, c_int, c_int32,
                    c_int64, c_uint32, c_void_p)

# ---- constants (values of rove.h; test_capi_layout.py compares every one) -------------
OK, ERR_INVALID_ARGUMENT, ERR_UNSUPPORTED, ERR_OUT_OF_MEMORY, ERR_SIZE_OVERFLOW, \
    ERR_INTERNAL, ERR_POOL_EXHAUSTED = range(7)
ISA_AUTO, ISA_SCALAR = 0, 1  # the others come from librove's ISA registry (ISA_BY_NAME)
PAIRING_HALF, PAIRING_INTERLEAVED = 0, 1
PAIRING_BY_NAME = {"half": PAIRING_HALF, "interleaved": PAIRING_INTERLEAVED}
SCALING_BY_NAME = {"none": 0, "linear": 1, "ntk": 2, "yarn": 3, "llama3": 4, "longrope": 5}
ROTARY_FIRST, ROTARY_LAST = 0, 1
PLACEMENT_BY_NAME = {"first": ROTARY_FIRST, "last": ROTARY_LAST}
ROTATE_Q, ROTATE_K, ROTATE_V, ROTATE_O = 1, 2, 4, 8
ROTATE_ROPE = ROTATE_Q | ROTATE_K
ROTATE_ROVE = ROTATE_ROPE | ROTATE_V | ROTATE_O
MAX_HEAD_DIM = 1024
DTYPE_F32, DTYPE_BF16, DTYPE_F16, DTYPE_Q8 = range(4)  # rove_dtype (names: DTYPE_BY_NAME)
Q8_BLOCK = 32  # ROVE_Q8_BLOCK
PAGED_HEAD_MAJOR, PAGED_TOKEN_MAJOR = 0, 1  # rove_paged_layout
CPU_FEATURES = {  # bit -> name, as rove_cpu_features() reports them
    1 << 0: "avx2", 1 << 1: "fma", 1 << 2: "avx512f", 1 << 3: "avx512dq",
    1 << 4: "avx512vl", 1 << 5: "avx512bw", 1 << 6: "avx512bf16", 1 << 8: "neon",
    1 << 9: "fp16", 1 << 10: "bf16", 1 << 11: "sve", 1 << 12: "f16c"}

c_enum = c_int  # every rove.h enum is an int-sized C enum (checked by the layout test)


# ---- structs ----------------------------------------------------------------------------
# Pointers are c_void_p so that a call sets them from plain integers (data_ptr()).
class RopeConfig(Structure):
    _fields_ = [("rotary_dim", c_int32), ("pairing", c_enum), ("theta", c_double),
                ("scaling", c_enum), ("factor", c_double),
                ("original_max_position", c_int32), ("beta_fast", c_double),
                ("beta_slow", c_double), ("attention_factor", c_double),
                ("truncate", c_int32), ("low_freq_factor", c_double),
                ("high_freq_factor", c_double), ("freq_factors", c_void_p),
                # appended in 0.2
                ("placement", c_enum), ("mscale", c_double), ("mscale_all_dim", c_double),
                ("long_freq_factors", c_void_p), ("max_position", c_int32)]


class AttentionConfig(Structure):
    _fields_ = [("n_heads", c_int32), ("n_kv_heads", c_int32), ("head_dim", c_int32),
                ("rotate", c_uint32), ("causal", c_int32), ("window", c_int32),
                ("scale", c_float), ("softcap", c_float), ("rope", RopeConfig),
                ("isa", c_enum), ("n_threads", c_int32)]


class AttentionArgs(Structure):
    _fields_ = [("batch", c_int32), ("q_len", c_int32), ("kv_len", c_int32),
                ("q", c_void_p), ("k", c_void_p), ("v", c_void_p), ("out", c_void_p),
                ("q_stride", c_int64), ("k_stride", c_int64), ("v_stride", c_int64),
                ("out_stride", c_int64), ("q_pos", c_void_p), ("kv_pos", c_void_p),
                ("lse", c_void_p), ("q_angles", c_void_p), ("kv_angles", c_void_p),
                ("sinks", c_void_p), ("kv_head_stride", c_int64), ("k_batch_stride", c_int64),
                ("v_batch_stride", c_int64)]


class LayerWeights(Structure):
    _fields_ = [("d_model", c_int32), ("wq", c_void_p), ("wk", c_void_p), ("wv", c_void_p),
                ("wo", c_void_p), ("bq", c_void_p), ("bk", c_void_p), ("bv", c_void_p),
                ("bo", c_void_p), ("sinks", c_void_p)]


class SelectivePhaseWeights(Structure):
    _fields_ = [("n_heads", c_int32), ("in_dim", c_int32), ("n_pairs", c_int32),
                ("norm_eps", c_float), ("projection", c_enum), ("proj_rank", c_int32),
                ("proj_down", c_void_p), ("proj_up", c_void_p), ("proj_w", c_void_p),
                ("proj_gain", c_void_p), ("skip_conv", c_int32), ("conv_width", c_int32),
                ("conv_act", c_enum), ("conv_w", c_void_p), ("conv_b", c_void_p),
                ("exp_bias", c_void_p), ("gate", c_enum), ("gate_rank", c_int32),
                ("gate_down", c_void_p), ("gate_w", c_void_p), ("gate_b", c_void_p)]


class GLAConfig(Structure):
    _fields_ = [("n_heads", c_int32), ("key_dim", c_int32), ("value_dim", c_int32),
                ("scale", c_float), ("rotate", c_uint32), ("rotary_dim", c_int32),
                ("pairing", c_enum), ("chunk", c_int32), ("isa", c_enum),
                ("n_threads", c_int32)]


class GLAArgs(Structure):
    _fields_ = [("batch", c_int32), ("seq_len", c_int32), ("q", c_void_p), ("k", c_void_p),
                ("v", c_void_p), ("g", c_void_p), ("angles", c_void_p),
                ("initial_state", c_void_p), ("final_state", c_void_p), ("out", c_void_p),
                ("cu_seqlens", c_void_p), ("n_seqs", c_int32)]


class GLAGrads(Structure):
    """rove_gla_grads: dout / d_final_state in; dq, dk, dg, dv, d_initial_state, d_angles
    out (the optional ones NULL when not wanted)."""
    _fields_ = [("dout", c_void_p), ("d_final_state", c_void_p), ("dq", c_void_p),
                ("dk", c_void_p), ("dg", c_void_p), ("dv", c_void_p),
                ("d_initial_state", c_void_p), ("d_angles", c_void_p)]


class VarlenArgs(Structure):
    """rove_varlen_args: packed sequences (cu_seqlens), tensors, strides, positions, LSE,
    angles."""
    _fields_ = [("n_seqs", c_int32), ("cu_seqlens_q", c_void_p), ("cu_seqlens_k", c_void_p),
                ("q", c_void_p), ("k", c_void_p), ("v", c_void_p), ("out", c_void_p),
                ("q_stride", c_int64), ("k_stride", c_int64), ("v_stride", c_int64),
                ("out_stride", c_int64), ("q_pos", c_void_p), ("kv_pos", c_void_p),
                ("lse", c_void_p), ("q_angles", c_void_p), ("kv_angles", c_void_p),
                ("sinks", c_void_p)]


class TensorTypes(Structure):
    """rove_tensor_types: the rove_dtype of q, k, v and out of one attention call."""
    _fields_ = [("q", c_enum), ("k", c_enum), ("v", c_enum), ("out", c_enum)]


class AttentionGrads(Structure):
    """rove_attention_grads: dout in, dq / dk / dv out, token strides (0 = dense), the
    angle gradients (explicit angles only)."""
    _fields_ = [("dout", c_void_p), ("dq", c_void_p), ("dk", c_void_p), ("dv", c_void_p),
                ("dout_stride", c_int64), ("dq_stride", c_int64), ("dk_stride", c_int64),
                ("dv_stride", c_int64), ("d_q_angles", c_void_p), ("d_kv_angles", c_void_p),
                ("d_sinks", c_void_p), ("d_lse", c_void_p)]


class PagedKV(Structure):
    """rove_paged_kv: a block pool, k / v [n_blocks][n_kv_heads][block_size][head_dim]
    (layout 0) or [n_blocks][block_size][n_kv_heads][head_dim] (layout 1) of ``type``, Q8
    scales, the positions [n_blocks][block_size] (or NULL); block_stride: elements from one
    block to the next (0: dense)."""
    _fields_ = [("k", c_void_p), ("v", c_void_p), ("k_scale", c_void_p), ("v_scale", c_void_p),
                ("pos", c_void_p), ("type", c_enum), ("block_size", c_int32),
                ("n_blocks", c_int32), ("layout", c_int32), ("block_stride", c_int64)]


class PagedArgs(Structure):
    """rove_paged_args: packed query rows per sequence (cu_seqlens_q), the caller's lengths
    and block tables (NULL for a rove_paged_cache), tensors, strides, positions, angles,
    LSE."""
    _fields_ = [("n_seqs", c_int32), ("cu_seqlens_q", c_void_p), ("seq_lens", c_void_p),
                ("block_tables", c_void_p), ("max_blocks", c_int32), ("q", c_void_p),
                ("out", c_void_p), ("q_stride", c_int64), ("out_stride", c_int64),
                ("q_pos", c_void_p), ("q_angles", c_void_p), ("lse", c_void_p),
                ("sinks", c_void_p)]


# Every struct the bindings mirror, by its C name (the layout test iterates over this).
STRUCTS = {"rove_rope_config": RopeConfig, "rove_attention_config": AttentionConfig,
           "rove_attention_args": AttentionArgs, "rove_layer_weights": LayerWeights,
           "rove_selective_phase_weights": SelectivePhaseWeights,
           "rove_gla_config": GLAConfig, "rove_gla_args": GLAArgs, "rove_gla_grads": GLAGrads,
           "rove_varlen_args": VarlenArgs,
           "rove_tensor_types": TensorTypes, "rove_attention_grads": AttentionGrads,
           "rove_paged_kv": PagedKV, "rove_paged_args": PagedArgs}


# ---- objects that own librove memory --------------------------------------------------------
def finalizer(obj, destroy, ptr):
    """weakref.finalize(obj, destroy, ptr), which frees the librove object when obj is
    collected, but not at interpreter exit: an atexit finalizer would free objects still
    reachable, and a daemon thread inside a librove call, or a __del__ run during module
    teardown, would then use freed memory. The process's exit returns the memory."""
    f = weakref.finalize(obj, destroy, ptr)
    f.atexit = False
    return f


class ForkSafeLock:
    """A threading.Lock made afresh in a forked child (os.register_at_fork, where the
    platform has fork): a fork from one thread while another held the lock left the child
    a lock nobody would release, and its next call hung. For the package's module-level
    state (the plan caches, rove.hf's registration); librove's own thread pools are
    forgotten in the child by the C library (docs/DESIGN.md §3, Threads). Objects the
    caller shares between threads (a KVCache, a PagedKVCache) are the caller's to keep
    out of a fork."""

    def __init__(self):
        self._lock = threading.Lock()
        if hasattr(os, "register_at_fork"):
            ref = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: ref() and ref()._renew())

    def _renew(self):
        self._lock = threading.Lock()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self):
        self._lock.acquire()

    def __exit__(self, *exc):
        self._lock.release()


class PlanCache:
    """An LRU of at most ``size`` plans (rove.get_plan's, rove.gla's), thread-safe. A plan
    dropped from it (evicted, cleared, or a duplicate another thread cached first) is let
    go after the lock is released: its destruction calls librove through ctypes, which
    releases the GIL, and must not happen under the lock (a fork from another thread then
    copied a held lock into the child)."""

    def __init__(self, size: int):
        self.size = size
        self._plans = OrderedDict()
        self.lock = ForkSafeLock()

    def get(self, key):
        """The cached plan of key (now the most recently used), or None."""
        with self.lock:
            p = self._plans.get(key)
            if p is not None:
                self._plans.move_to_end(key)
            return p

    def put(self, key, plan):
        """Cache plan under key; returns the cached one (another thread's, if it was first)."""
        dropped = [plan]
        with self.lock:
            p = self._plans.setdefault(key, plan)
            self._plans.move_to_end(key)
            while len(self._plans) > self.size:
                dropped.append(self._plans.popitem(last=False)[1])
        del dropped
        return p

    def clear(self) -> None:
        with self.lock:
            dropped = list(self._plans.values())
            self._plans.clear()
        del dropped


class SharedHandle:
    """Base of the immutable, thread-safe handles (Plan, GLAPlan): a copy is the object
    itself (sharing is what a copy of an immutable plan means; a field-by-field copy
    would free the librove object twice). Not picklable: a pointer means nothing in
    another process, so create the plan again there."""
    __slots__ = ()

    # Each field is set once, in __init__: C keeps its own copy of the configuration, and
    # the Python side sizes buffers and checks shapes from these fields, so a field changed
    # afterwards would let C read or write past buffers sized from it.
    def __setattr__(self, name, value):
        try:
            object.__getattribute__(self, name)
        except AttributeError:
            return object.__setattr__(self, name, value)
        raise AttributeError(f"rove.{type(self).__name__} is immutable: {name} is fixed when "
                             "it is made (create another one)")

    def __delattr__(self, name):
        raise AttributeError(f"rove.{type(self).__name__} is immutable: {name} cannot be "
                             "deleted")

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce_ex__(self, protocol):
        raise TypeError(f"a rove.{type(self).__name__} holds librove memory and cannot be "
                        "pickled: create it again in the other process")


class OwnedHandle:
    """Base of the mutable librove objects (KVCache, PagedKVCache): neither copied (a
    shallow copy would share, then free, the C object) nor pickled."""
    __slots__ = ()

    def __copy__(self):
        raise TypeError(f"a rove.{type(self).__name__} owns librove memory and cannot be "
                        "copied: create another one and append the tokens")

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __reduce_ex__(self, protocol):
        raise TypeError(f"a rove.{type(self).__name__} owns librove memory and cannot be "
                        "pickled")


# ---- errors -----------------------------------------------------------------------------
class RoveError(RuntimeError):
    """A librove call failed. ``.status`` is the rove_status number, ``.status_string``
    librove's text for it (rove_status_string), ``.function`` the C function."""

    def __init__(self, function: str, status: int, detail: str = ""):
        self.function, self.status = function, status
        self.status_string = status_string(status)
        msg = f"{function}: {self.status_string} (rove_status {status})"
        super().__init__(msg + (f": {detail}" if detail else ""))


class RoveInvalidArgument(RoveError, ValueError):
    """ROVE_ERR_INVALID_ARGUMENT."""


class RoveUnsupported(RoveError):
    """ROVE_ERR_UNSUPPORTED: a valid request this CPU or build cannot serve."""


class RoveOutOfMemory(RoveError, MemoryError):
    """ROVE_ERR_OUT_OF_MEMORY."""


class RoveSizeOverflow(RoveError, OverflowError):
    """ROVE_ERR_SIZE_OVERFLOW: a count does not fit (also: a full KV cache)."""


class RoveInternalError(RoveError):
    """ROVE_ERR_INTERNAL: a bug in librove; please report it."""


class RovePoolExhausted(RoveError):
    """ROVE_ERR_POOL_EXHAUSTED: a paged KV cache has too few free blocks (or all max_seqs
    sequence slots are live) for the request; nothing was changed. This is back-pressure
    a serving loop expects and handles (free, truncate or preempt a sequence, then retry),
    not a failed allocation: it is deliberately *not* a MemoryError (that is
    RoveOutOfMemory), so ``except MemoryError`` handlers do not swallow it."""


_ERRORS = {ERR_INVALID_ARGUMENT: RoveInvalidArgument, ERR_UNSUPPORTED: RoveUnsupported,
           ERR_OUT_OF_MEMORY: RoveOutOfMemory, ERR_SIZE_OVERFLOW: RoveSizeOverflow,
           ERR_INTERNAL: RoveInternalError, ERR_POOL_EXHAUSTED: RovePoolExhausted}


def check(function: str, status: int, detail: str = "") -> None:
    """Raise the RoveError subclass of a non-zero status."""
    if status != OK:
        raise _ERRORS.get(status, RoveError)(function, status, detail)


# ---- loading ----------------------------------------------------------------------------
def _package_dirs() -> list:
    """Where the package's files are: this file's folder, then every folder of the
    package's __path__ (an editable install puts the built librove.so in site-packages/rove
    while this file stays in the source tree)."""
    here = os.path.dirname(os.path.abspath(__file__))
    pkg = sys.modules.get(__package__ or "")
    dirs = [here] + [os.path.abspath(d) for d in getattr(pkg, "__path__", [])]
    return list(dict.fromkeys(dirs))


# The structs of this module mirror rove.h of 0.7 (rove_paged_kv.layout was new in 0.3, its
# block_stride in 0.4, the sinks of the attention, varlen and paged args, d_sinks of the
# grads, the layer weights' sinks and the attention args' K/V head and batch strides in
# 0.5, the GLA args' cu_seqlens and n_seqs in 0.6, the attention grads' d_lse in 0.7), and while the major version is 0 a minor release may change public
# structs (the SONAME carries the minor): another minor (ROVE_LIBRARY pointing at another
# build) would read them wrongly, silently. So the version is checked first, before any
# other symbol is bound (an older library also lacks some of them).
LIBRARY_VERSION = (0, 7)


def _find_library(dirs=None) -> str:
    """ROVE_LIBRARY (a path, for development) or the librove.so shipped with the package
    (in ``dirs``, default _package_dirs()). It is loaded by absolute path, so neither
    LD_LIBRARY_PATH nor an installed librove is consulted."""
    env = os.environ.get("ROVE_LIBRARY")
    if env:
        return os.path.abspath(env)
    dirs = _package_dirs() if dirs is None else dirs
    mine = "librove.so.%d.%d" % LIBRARY_VERSION  # the SONAME this package needs
    for here in dirs:
        # librove.so, then a file of this package's version (the SONAME, then its full
        # names), and only then any other (whose version check then names the mismatch)
        for name in ("librove.so", mine, *sorted(glob.glob(os.path.join(here, mine + ".*"))),
                     *sorted(glob.glob(os.path.join(here, "librove.so.*")))):
            path = os.path.join(here, name)
            if os.path.isfile(path):
                return path
    raise ImportError(f"librove.so not found in {', '.join(dirs)}: install the package with "
                      "`pip install .` (or `pip install -e .`) from the librove repository, or "
                      "set ROVE_LIBRARY")


LIBRARY_PATH = _find_library()
try:
    lib = ctypes.CDLL(LIBRARY_PATH)  # CDLL: the GIL is released during every call
except OSError as e:  # ROVE_LIBRARY naming a missing file, a folder, a foreign binary
    where = " (ROVE_LIBRARY)" if os.environ.get("ROVE_LIBRARY") else ""
    raise ImportError(f"cannot load librove from {LIBRARY_PATH}{where}: {e}") from None



def _check_version(path: str, version: str) -> None:
    try:
        got = tuple(int(x) for x in version.split(".")[:2])
    except ValueError:
        got = None
    if got != LIBRARY_VERSION:
        raise ImportError(f"the loaded librove is {version} ({path}); this package needs "
                          f"{LIBRARY_VERSION[0]}.{LIBRARY_VERSION[1]}.x")


try:
    lib.rove_version_string.restype, lib.rove_version_string.argtypes = c_char_p, []
except AttributeError:
    raise ImportError(f"{LIBRARY_PATH} is not librove (no rove_version_string)") from None
VERSION = lib.rove_version_string().decode()
_check_version(LIBRARY_PATH, VERSION)

_P = c_void_p
_PROTOTYPES = {  # name: (restype, argtypes)
    "rove_status_string": (c_char_p, [c_enum]),
    "rove_version_string": (c_char_p, []),
    "rove_cpu_features": (c_uint32, []),
    "rove_isa_available": (c_int, [c_enum]),
    "rove_best_isa": (c_enum, []),
    "rove_isa_name": (c_char_p, [c_enum]),
    "rove_isa_parse": (c_enum, [c_char_p, POINTER(c_enum)]),
    "rove_default_threads": (c_int32, []),
    "rove_rope_config_init": (None, [POINTER(RopeConfig)]),
    "rove_rope_inv_freq": (c_enum, [POINTER(RopeConfig), c_int32, _P, _P]),
    "rove_rope_mscale": (c_double, [c_double, c_double]),
    "rove_attention_config_init": (None, [POINTER(AttentionConfig), c_int32, c_int32, c_int32]),
    "rove_plan_create": (c_enum, [POINTER(AttentionConfig), POINTER(c_void_p)]),
    "rove_plan_destroy": (None, [_P]),
    "rove_plan_isa": (c_enum, [_P]),
    "rove_plan_threads": (c_int32, [_P]),
    "rove_plan_config": (c_enum, [_P, POINTER(AttentionConfig)]),
    "rove_attention_forward": (c_enum, [_P, POINTER(AttentionArgs)]),
    "rove_attention_forward_typed": (c_enum, [_P, POINTER(AttentionArgs), POINTER(TensorTypes)]),
    "rove_attention_backward": (c_enum, [_P, POINTER(AttentionArgs), POINTER(AttentionGrads)]),
    "rove_rotate": (c_enum, [_P, _P, c_int32, c_int32, c_int64, _P, c_int32]),
    "rove_rotate_angles": (c_enum, [_P, _P, c_int32, c_int32, c_int64, _P, c_int32, c_int32]),
    "rove_dtype_name": (c_char_p, [c_enum]),
    "rove_dtype_parse": (c_enum, [c_char_p, POINTER(c_enum)]),
    "rove_kv_cache_create": (c_enum, [_P, c_int32, c_int32, POINTER(c_void_p)]),
    "rove_kv_cache_create_typed": (c_enum, [_P, c_int32, c_int32, c_enum, POINTER(c_void_p)]),
    "rove_kv_cache_type": (c_enum, [_P]),
    "rove_kv_cache_destroy": (None, [_P]),
    "rove_kv_cache_length": (c_int32, [_P]),
    "rove_kv_cache_capacity": (c_int32, [_P]),
    "rove_kv_cache_plan": (c_void_p, [_P]),
    "rove_kv_cache_append": (c_enum, [_P, c_int32, _P, c_int64, _P, c_int64, _P]),
    "rove_kv_cache_append_angles": (c_enum, [_P, c_int32, _P, c_int64, _P, c_int64, _P, _P]),
    "rove_kv_cache_attention": (c_enum, [_P, POINTER(AttentionArgs)]),
    "rove_kv_cache_attention_typed": (c_enum, [_P, POINTER(AttentionArgs),
                                               POINTER(TensorTypes)]),
    "rove_kv_cache_append_typed": (c_enum, [_P, c_int32, _P, c_int64, _P, c_int64, _P, c_enum]),
    "rove_kv_cache_shift": (c_enum, [_P, c_int32, c_int32, c_int32]),
    "rove_kv_cache_truncate": (c_enum, [_P, c_int32]),
    "rove_kv_cache_reset": (c_enum, [_P]),
    "rove_kv_cache_positions": (c_enum, [_P, _P]),
    "rove_selective_temperatures": (c_enum, [c_int32, _P]),
    "rove_selective_angles": (c_enum, [c_int32, c_int32, c_int32, c_int32, _P, _P, _P, _P, _P]),
    "rove_selective_angles_backward": (c_enum, [c_int32, c_int32, c_int32, c_int32, _P, _P, _P,
                                                _P, _P, _P, _P, _P]),
    "rove_selective_phase": (c_enum, [POINTER(SelectivePhaseWeights), c_int32, c_int32, _P,
                                      c_int64, _P, _P]),
    "rove_selective_angles_packed": (c_enum, [c_int32, _P, c_int32, c_int32, _P, _P, _P, _P,
                                              _P]),
    "rove_selective_angles_packed_backward": (c_enum, [c_int32, _P, c_int32, c_int32, _P, _P,
                                                       _P, _P, _P, _P, _P, _P]),
    "rove_selective_phase_packed": (c_enum, [POINTER(SelectivePhaseWeights), c_int32, _P, _P,
                                             c_int64, _P, _P]),
    "rove_selective_phase_weights_init": (None, [POINTER(SelectivePhaseWeights), c_int32,
                                                 c_int32, c_int32]),
    "rove_selective_phase_state_len": (c_int32, [POINTER(SelectivePhaseWeights)]),
    "rove_gla_config_init": (None, [POINTER(GLAConfig), c_int32, c_int32, c_int32]),
    "rove_gla_plan_create": (c_enum, [POINTER(GLAConfig), POINTER(c_void_p)]),
    "rove_gla_plan_destroy": (None, [_P]),
    "rove_gla_plan_isa": (c_enum, [_P]),
    "rove_gla_forward": (c_enum, [_P, POINTER(GLAArgs)]),
    "rove_gla_recurrent": (c_enum, [_P, POINTER(GLAArgs)]),
    "rove_gla_backward": (c_enum, [_P, POINTER(GLAArgs), POINTER(GLAGrads)]),
    "rove_attention_varlen": (c_enum, [_P, POINTER(VarlenArgs)]),
    "rove_attention_varlen_typed": (c_enum, [_P, POINTER(VarlenArgs), POINTER(TensorTypes)]),
    "rove_merge_partials": (c_enum, [c_int32, _P, _P, c_int32, c_int32, c_int32, c_int32, _P,
                                     _P]),
    "rove_merge_partials_sinks": (c_enum, [c_int32, _P, _P, c_int32, c_int32, c_int32, c_int32,
                                           _P, _P, _P]),
    "rove_paged_attention": (c_enum, [_P, POINTER(PagedKV), POINTER(PagedArgs)]),
    "rove_paged_store": (c_enum, [_P, POINTER(PagedKV), c_int32, _P, _P, c_int64, _P, c_int64,
                                  c_enum, _P, _P]),
    "rove_paged_cache_create": (c_enum, [_P, c_enum, c_int32, c_int32, c_int32,
                                         POINTER(c_void_p)]),
    "rove_paged_cache_destroy": (None, [_P]),
    "rove_paged_cache_view": (c_enum, [_P, POINTER(PagedKV)]),
    "rove_paged_cache_free_blocks": (c_int32, [_P]),
    "rove_paged_seq_create": (c_enum, [_P, POINTER(c_int32)]),
    "rove_paged_seq_fork": (c_enum, [_P, c_int32, POINTER(c_int32)]),
    "rove_paged_seq_free": (c_enum, [_P, c_int32]),
    "rove_paged_seq_length": (c_int32, [_P, c_int32]),
    "rove_paged_seq_block_table": (c_enum, [_P, c_int32, _P, c_int32, POINTER(c_int32)]),
    "rove_paged_seq_positions": (c_enum, [_P, c_int32, _P]),
    "rove_paged_append": (c_enum, [_P, c_int32, c_int32, _P, c_int64, _P, c_int64, c_enum, _P,
                                   _P]),
    "rove_paged_truncate": (c_enum, [_P, c_int32, c_int32]),
    "rove_paged_shift": (c_enum, [_P, c_int32, c_int32, c_int32, c_int32]),
    "rove_paged_cache_attention": (c_enum, [_P, _P, POINTER(PagedArgs)]),
    "rove_paged_attention_typed": (c_enum, [_P, POINTER(PagedKV), POINTER(PagedArgs),
                                            POINTER(TensorTypes)]),
    "rove_paged_cache_attention_typed": (c_enum, [_P, _P, POINTER(PagedArgs),
                                                  POINTER(TensorTypes)]),
}
for _name, (_res, _args) in _PROTOTYPES.items():
    _fn = getattr(lib, _name)
    _fn.restype, _fn.argtypes = _res, _args


def status_string(status: int) -> str:
    return lib.rove_status_string(status).decode()


def isa_name(isa: int) -> str:
    return lib.rove_isa_name(isa).decode()


# Every ISA by name, from the library itself (its registry): values AUTO .. ROVE_ISA_COUNT-1,
# the first value whose name is "unknown" being ROVE_ISA_COUNT. Never a list written here.
ISA_BY_NAME = {}
while isa_name(len(ISA_BY_NAME)) != "unknown":
    ISA_BY_NAME[isa_name(len(ISA_BY_NAME))] = len(ISA_BY_NAME)
ISA_COUNT = len(ISA_BY_NAME)


def dtype_name(t: int) -> str:
    return lib.rove_dtype_name(t).decode()


# The element types by canonical name ("f32", "bf16", "f16", "q8"), from the library, as
# ISA_BY_NAME (ROVE_DTYPE_COUNT is the first value named "unknown").
DTYPE_BY_NAME = {}
while dtype_name(len(DTYPE_BY_NAME)) != "unknown":
    DTYPE_BY_NAME[dtype_name(len(DTYPE_BY_NAME))] = len(DTYPE_BY_NAME)
DTYPE_COUNT = len(DTYPE_BY_NAME)


def dtype_parse(name: str):
    """rove_dtype_parse: the rove_dtype called ``name`` (any spelling librove accepts), or
    None for a name it does not know."""
    if "\0" in name:  # c_char_p would cut the name at the NUL
        return None
    try:
        raw = name.encode("ascii")
    except UnicodeEncodeError:
        return None
    out = c_enum(-1)
    return out.value if lib.rove_dtype_parse(raw, ctypes.byref(out)) == OK else None

