# SPDX-License-Identifier: MIT
"""Validation of scalar parameters shared by the Python entry points (before C is called)."""
from __future__ import annotations

import math
import operator

import numpy as np

from . import _lib

_ROTATE_NAMES = {"rove": _lib.ROTATE_ROVE, "rope": _lib.ROTATE_ROPE, "none": 0}


def rotate_flags(rotate) -> int:
    """"rove" (Q|K|V|O), "rope" (Q|K), "none", or an int of ROTATE_* bits."""
    if isinstance(rotate, str):
        if rotate.lower() not in _ROTATE_NAMES:
            raise ValueError(f"rotate must be 'rove', 'rope', 'none' or ROTATE_* flags "
                             f"(got {rotate!r})")
        return _ROTATE_NAMES[rotate.lower()]
    if isinstance(rotate, bool) or not isinstance(rotate, (int, np.integer)):
        raise TypeError(f"rotate must be a str or an int of ROTATE_* flags, not "
                        f"{type(rotate).__name__}")
    if not 0 <= int(rotate) <= _lib.ROTATE_ROVE:
        raise ValueError(f"rotate flags must be a combination of ROTATE_Q|K|V|O (0..15), "
                         f"got {int(rotate)}")
    return int(rotate)


def positive_int(name, x, minimum=1, maximum=2 ** 31 - 1) -> int:
    """x as an int in [minimum, maximum]: a Python or NumPy integer, or anything integral
    with __index__ (a 0-d integer torch tensor or array, e.g. a sequence id from a
    tensor); never a bool or a float."""
    bool_like = isinstance(x, (bool, np.bool_)) or "bool" in str(getattr(x, "dtype", ""))
    try:
        if bool_like or getattr(x, "ndim", 0) != 0:  # (torch indexes a 1-element tensor)
            raise TypeError
        x = operator.index(x)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(x).__name__}") from None
    if not minimum <= x <= maximum:
        raise ValueError(f"{name} must be in [{minimum}, {maximum}] (got {x})")
    return x


def chunk(x):
    """A GLA chunk size: None (librove's default) or an int of 16, 32, 64 or 128."""
    if x is None:
        return None
    x = positive_int("chunk", x)
    if x not in (16, 32, 64, 128):
        raise ValueError(f"chunk must be 16, 32, 64 or 128 (got {x!r})")
    return x


def flag(name, x) -> bool:
    """A bool (or a NumPy bool, or the int 0 or 1); never a string or None."""
    if not isinstance(x, (bool, np.bool_, int)) or x not in (0, 1):
        raise TypeError(f"{name} must be a bool (got {x!r})")
    return bool(x)


def threads(n) -> int:
    """None or 0 = librove's default (rove_default_threads()); otherwise 1 .. 1024
    (ROVE_MAX_THREADS)."""
    return 0 if n is None else positive_int("threads", n, minimum=0, maximum=1024)


def isa(name) -> int:
    if isinstance(name, str) and name.lower() in _lib.ISA_BY_NAME:
        return _lib.ISA_BY_NAME[name.lower()]
    raise ValueError(f"isa must be one of {sorted(_lib.ISA_BY_NAME)} (got {name!r})")


_FLT_INF_EDGE = 2.0 ** 128 * (1 - 2.0 ** -25)  # FLT_MAX (2^128 (1 - 2^-24)) + 2^103
_FLT_ZERO_EDGE = 2.0 ** -150


def float32_param(name, x, *, nonneg=False, allow_none=False):
    """A finite number that stays finite (and non-zero if it was) as a C float."""
    if x is None and allow_none:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, not {type(x).__name__}")
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite (got {x})")
    if nonneg and x < 0:
        raise ValueError(f"{name} must be >= 0 (got {x})")
    # as a C cast rounds (to nearest, ties to even): |x| >= FLT_MAX + half its ulp gives
    # inf, 0 < |x| <= 2^-150 (half the smallest subnormal) gives 0. Plain Python, which
    # torch.compile traces (rove.torch_ops checks its scalars with this).
    if abs(x) >= _FLT_INF_EDGE or (x != 0 and abs(x) <= _FLT_ZERO_EDGE):
        raise ValueError(f"{name}={x} does not fit a C float (librove takes it as float32)")
    return x


def scale(x):
    """None = 1/sqrt(head_dim). 0 is refused: in C it would mean the default."""
    x = float32_param("scale", x, allow_none=True)
    if x == 0:
        raise ValueError("scale=0 is not supported (librove reads 0 as 'default'); pass "
                         "None for 1/sqrt(head_dim)")
    return x
