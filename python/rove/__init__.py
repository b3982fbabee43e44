# SPDX-License-Identifier: MIT
"""rove: CPU attention with rotary position embeddings (RoPE) and rotary value
embeddings (RoVE), on NumPy arrays and CPU torch tensors, through librove.

    import numpy as np, rove
    q = k = v = np.random.randn(1, 1024, 12, 64).astype(np.float32)
    out = rove.attention(q, k, v)                 # RoVE, causal, [batch, seq, heads, dim]
    out = rove.attention(q, k, v, rotate="rope")  # plain RoPE

Every librove call runs with the GIL released (ctypes.CDLL), so Python threads run in
parallel with it and may call it concurrently. See README.md for the whole API.
"""
from __future__ import annotations

from . import _lib
from ._lib import (ROTATE_K, ROTATE_O, ROTATE_Q, ROTATE_ROPE, ROTATE_ROVE, ROTATE_V,
                   RoveError, RoveInternalError, RoveInvalidArgument, RoveOutOfMemory,
                   RovePoolExhausted, RoveSizeOverflow, RoveUnsupported)
from .attention import Plan, attention, clear_plan_cache, get_plan
from .gla import GLAPlan, gla, gla_recurrent
from .kvcache import KVCache
from .merge import merge_partials
from .paged import PagedKVCache, PagedPool, paged_attention, paged_store
from .varlen import attention_varlen
from .rope import RopeConfig, inv_freq
from .rotate import rotate, rotate_angles
from .selective import (SelectivePhaseWeights, selective_angles, selective_phase,
                        selective_temperatures)

__version__ = _lib.VERSION  # the loaded librove's rove_version_string()

__all__ = [
    "GLAPlan", "KVCache", "PagedKVCache", "PagedPool", "Plan", "ROTATE_K", "ROTATE_O",
    "ROTATE_Q", "ROTATE_ROPE", "ROTATE_ROVE", "ROTATE_V", "RopeConfig", "RoveError",
    "RoveInternalError", "RoveInvalidArgument", "RoveOutOfMemory", "RovePoolExhausted",
    "RoveSizeOverflow", "RoveUnsupported", "SelectivePhaseWeights", "attention",
    "attention_varlen", "clear_plan_cache", "get_plan", "gla", "gla_recurrent", "info",
    "inv_freq", "merge_partials", "paged_attention", "paged_store", "rotate", "rotate_angles",
    "selective_angles", "selective_phase", "selective_temperatures", "__version__",
]


def info() -> dict:
    """What librove sees: version, CPU features, the ISA plans get, the ISAs this CPU and
    build can run, the default thread count and the path of the loaded library."""
    L = _lib.lib
    bits = L.rove_cpu_features()
    isas = [n for n, i in _lib.ISA_BY_NAME.items() if i != _lib.ISA_AUTO and L.rove_isa_available(i)]
    return {
        "version": _lib.VERSION,
        "cpu_features": [n for b, n in sorted(_lib.CPU_FEATURES.items()) if bits & b],
        "best_isa": _lib.isa_name(L.rove_best_isa()),
        "available_isas": isas,
        "default_threads": int(L.rove_default_threads()),
        "library": _lib.LIBRARY_PATH,
    }
