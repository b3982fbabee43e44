# SPDX-License-Identifier: MIT
"""RopeConfig (the mirror of rove_rope_config) and inv_freq."""
from __future__ import annotations

import ctypes
import json
import math
import sys
from dataclasses import dataclass, field, fields
from typing import Optional, Tuple

import numpy as np

from . import _lib

_PAIRING_NAMES = {v: k for k, v in _lib.PAIRING_BY_NAME.items()}
_SCALING_NAMES = {v: k for k, v in _lib.SCALING_BY_NAME.items()}
_PLACEMENT_NAMES = {v: k for k, v in _lib.PLACEMENT_BY_NAME.items()}

# The defaults are librove's own: rove_rope_config_init() fills them, nothing is repeated.
_C_DEFAULTS = _lib.RopeConfig()
_lib.lib.rove_rope_config_init(_C_DEFAULTS)


# rove.h's table: the fields each scaling reads besides rotary_dim, pairing, placement,
# theta and freq_factors (read by all). Every other field must keep its default: librove
# refuses it (ROVE_ERR_INVALID_ARGUMENT) rather than ignore a value that was set.
_READS = {
    "none": frozenset(),
    "linear": frozenset({"factor"}),
    "ntk": frozenset({"factor"}),
    "yarn": frozenset({"factor", "original_max_position", "beta_fast", "beta_slow", "truncate",
                       "mscale", "mscale_all_dim", "attention_factor"}),
    "llama3": frozenset({"factor", "original_max_position", "low_freq_factor",
                         "high_freq_factor"}),
    "longrope": frozenset({"factor", "original_max_position", "attention_factor",
                           "long_freq_factors", "max_position"}),
}
_TABLE_DEFAULTS = {
    "factor": float(_C_DEFAULTS.factor),
    "original_max_position": int(_C_DEFAULTS.original_max_position),
    "beta_fast": float(_C_DEFAULTS.beta_fast), "beta_slow": float(_C_DEFAULTS.beta_slow),
    "truncate": bool(_C_DEFAULTS.truncate), "mscale": float(_C_DEFAULTS.mscale),
    "mscale_all_dim": float(_C_DEFAULTS.mscale_all_dim),
    "attention_factor": float(_C_DEFAULTS.attention_factor),
    "low_freq_factor": float(_C_DEFAULTS.low_freq_factor),
    "high_freq_factor": float(_C_DEFAULTS.high_freq_factor),
    "long_freq_factors": None, "max_position": int(_C_DEFAULTS.max_position),
}
assert not _C_DEFAULTS.long_freq_factors  # NULL


def mscale(s: float, mscale: float = 1.0) -> float:
    """transformers' get_mscale (librove's rove_rope_mscale): 0.1 * mscale * ln(s) + 1 for
    s > 1, else 1. DeepSeek-V2/V3 recipe: RopeConfig(scaling="yarn", factor=s,
    mscale=..., mscale_all_dim=...) for the rotation, and the logit scale
    ``mscale(s, mscale_all_dim) ** 2 / sqrt(qk_head_dim)`` (rove.hf_config.hf_softmax_scale
    reads it from a transformers config)."""
    args = []
    for name, x in (("s", s), ("mscale", mscale)):
        if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
            raise TypeError(f"mscale: {name} must be a number, not {type(x).__name__}")
        if not math.isfinite(float(x)):
            raise ValueError(f"mscale: {name} must be finite (got {x})")
        args.append(float(x))
    return float(_lib.lib.rove_rope_mscale(*args))


def _finite(name, x, positive=False, nonneg=False):
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise TypeError(f"RopeConfig.{name} must be a number, not {type(x).__name__}")
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"RopeConfig.{name} must be finite (got {x})")
    if positive and not x > 0:
        raise ValueError(f"RopeConfig.{name} must be > 0 (got {x})")
    if nonneg and x < 0:
        raise ValueError(f"RopeConfig.{name} must be >= 0 (got {x})")
    return x


def _int(name, x, minimum=0):
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"RopeConfig.{name} must be an int, not {type(x).__name__}")
    x = int(x)
    if x < minimum or x > 2 ** 31 - 1:
        raise ValueError(f"RopeConfig.{name} must be in [{minimum}, 2^31-1] (got {x})")
    return x


@dataclass(frozen=True)
class RopeConfig:
    """RoPE parameters, exactly rove_rope_config of rove.h (DESIGN.md §1).

    rotary_dim: rotated dims r (even; 0 = head_dim). pairing: "half" (NeoX / HF
    rotate_half) or "interleaved" (GPT-J / Meta). theta: base. scaling: "none", "linear",
    "ntk" (static NTK-aware), "yarn", "llama3" or "longrope", with factor s and
    original_max_position L0 (required by yarn, llama3, longrope). YaRN: beta_fast, beta_slow,
    attention_factor (0 = derive 0.1 ln s + 1), truncate. Llama 3: low_freq_factor,
    high_freq_factor. freq_factors: None or rotary_dim/2 per-pair divisors (LongRoPE).
    placement: "first" (dims 0..r-1 rotated, Llama/NeoX) or "last" (dims head_dim-r..
    head_dim-1, DeepSeek MLA); the rove.h enum value (0/1) is accepted too.
    YaRN (DeepSeek style): mscale, mscale_all_dim (both 0 or both > 0). "longrope":
    freq_factors is the short set, long_freq_factors the long set, used when
    max_position > original_max_position. A field the scaling does not read must keep its
    default (librove rejects it otherwise; see rove.h's table).
    Frozen and hashable (factor sets are stored as tuples), so plans can be cached.
    """
    rotary_dim: int = int(_C_DEFAULTS.rotary_dim)
    pairing: str = _PAIRING_NAMES[_C_DEFAULTS.pairing]
    theta: float = float(_C_DEFAULTS.theta)
    scaling: str = _SCALING_NAMES[_C_DEFAULTS.scaling]
    factor: float = float(_C_DEFAULTS.factor)
    original_max_position: int = int(_C_DEFAULTS.original_max_position)
    beta_fast: float = float(_C_DEFAULTS.beta_fast)
    beta_slow: float = float(_C_DEFAULTS.beta_slow)
    attention_factor: float = float(_C_DEFAULTS.attention_factor)
    truncate: bool = bool(_C_DEFAULTS.truncate)
    low_freq_factor: float = float(_C_DEFAULTS.low_freq_factor)
    high_freq_factor: float = float(_C_DEFAULTS.high_freq_factor)
    freq_factors: Optional[Tuple[float, ...]] = field(default=None)
    # 0.2 (rove.h appended them; keyword use recommended)
    placement: str = _PLACEMENT_NAMES[_C_DEFAULTS.placement]
    mscale: float = float(_C_DEFAULTS.mscale)
    mscale_all_dim: float = float(_C_DEFAULTS.mscale_all_dim)
    long_freq_factors: Optional[Tuple[float, ...]] = field(default=None)
    max_position: int = int(_C_DEFAULTS.max_position)

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        r = _int("rotary_dim", self.rotary_dim)
        if r % 2:
            raise ValueError(f"RopeConfig.rotary_dim must be even (got {r})")
        put("rotary_dim", r)
        placement = self.placement
        if isinstance(placement, (int, np.integer)) and not isinstance(placement, bool):
            placement = _PLACEMENT_NAMES.get(int(placement), placement)  # the enum value
        if placement not in _lib.PLACEMENT_BY_NAME:
            raise ValueError(f"RopeConfig.placement must be 'first' or 'last' "
                             f"(got {self.placement!r})")
        put("placement", placement)
        if self.pairing not in _lib.PAIRING_BY_NAME:
            raise ValueError(f"RopeConfig.pairing must be 'half' or 'interleaved' "
                             f"(got {self.pairing!r})")
        if self.scaling not in _lib.SCALING_BY_NAME:
            raise ValueError(f"RopeConfig.scaling must be one of "
                             f"{sorted(_lib.SCALING_BY_NAME)} (got {self.scaling!r})")
        theta = _finite("theta", self.theta)
        if not theta > 1:
            raise ValueError(f"RopeConfig.theta must be > 1 (got {theta})")
        put("theta", theta)
        put("factor", _finite("factor", self.factor, positive=self.scaling != "none"))
        L0 = _int("original_max_position", self.original_max_position)
        if self.scaling in ("yarn", "llama3", "longrope") and L0 == 0:
            raise ValueError(f"RopeConfig.original_max_position must be > 0 for "
                             f"scaling={self.scaling!r}")
        put("original_max_position", L0)
        put("beta_fast", _finite("beta_fast", self.beta_fast, positive=True))
        put("beta_slow", _finite("beta_slow", self.beta_slow, positive=True))
        put("attention_factor", _finite("attention_factor", self.attention_factor, nonneg=True))
        if not isinstance(self.truncate, (bool, int, np.bool_)) or self.truncate not in (0, 1):
            raise ValueError(f"RopeConfig.truncate must be a bool (got {self.truncate!r})")
        put("truncate", bool(self.truncate))
        lo = _finite("low_freq_factor", self.low_freq_factor)
        hi = _finite("high_freq_factor", self.high_freq_factor)
        if self.scaling == "llama3" and not (lo > 0 and hi > 0):
            raise ValueError("RopeConfig: llama3 needs low_freq_factor > 0 and "
                             f"high_freq_factor > 0 (got {lo}, {hi})")
        put("low_freq_factor", lo)
        put("high_freq_factor", hi)
        for name in ("freq_factors", "long_freq_factors"):
            if getattr(self, name) is not None:
                ff = np.asarray(_as_numpy(getattr(self, name)), dtype=np.float64)
                if ff.ndim != 1:  # one divisor per frequency, never a flattened grid
                    raise ValueError(f"RopeConfig.{name} must be a 1-D sequence of divisors "
                                     f"(got shape {ff.shape})")
                if ff.size == 0 or not np.all(np.isfinite(ff)) or not np.all(ff > 0):
                    raise ValueError(f"RopeConfig.{name} must be finite divisors > 0")
                put(name, tuple(float(f) for f in ff))
        put("mscale", _finite("mscale", self.mscale, nonneg=True))
        put("mscale_all_dim", _finite("mscale_all_dim", self.mscale_all_dim, nonneg=True))
        put("max_position", _int("max_position", self.max_position))
        if self.scaling == "longrope" and self.freq_factors is None:
            raise ValueError("RopeConfig: scaling='longrope' needs freq_factors (the short "
                             "factor set)")
        if (self.mscale == 0) != (self.mscale_all_dim == 0):
            raise ValueError("RopeConfig.mscale and mscale_all_dim: both 0 (unset) or both > 0 "
                             f"(got {self.mscale}, {self.mscale_all_dim})")
        reads = _READS[self.scaling]
        for name, default in _TABLE_DEFAULTS.items():
            value = getattr(self, name)
            if name not in reads and value != default:
                raise ValueError(f"RopeConfig.{name}={value!r} is not read by "
                                 f"scaling={self.scaling!r}: it must keep its default "
                                 f"{default!r} (librove refuses a value it would ignore)")
        # The JSON form, for the rove::attention custom op (rove.torch_ops), made once here
        # so that torch.compile traces no serialisation.
        put("_json", json.dumps({f.name: getattr(self, f.name) for f in fields(self)}))

    @classmethod
    def from_hf(cls, config, head_dim=None, **options) -> "RopeConfig":
        """The RopeConfig of a transformers PretrainedConfig (rope_theta / rope_scaling /
        rope_parameters, partial_rotary_factor, head_dim); ValueError naming the field it
        cannot honour. ``options`` (seq_len=, layer_type=, pairing=) are those of
        rove.hf_config.rope_config_from_hf."""
        from .hf_config import rope_config_from_hf  # lazy: transformers is optional
        return rope_config_from_hf(config, head_dim, **options)

    def replace(self, **changes) -> "RopeConfig":
        """A copy with some fields changed (validated again)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return RopeConfig(**values)

    def to_c(self, head_dim: int):
        """(rove_rope_config, keep-alive) for a head of head_dim; the second value owns
        the freq_factors / long_freq_factors buffers and must live until the C call
        returns."""
        c = _lib.RopeConfig()
        _lib.lib.rove_rope_config_init(c)
        c.rotary_dim = self.rotary_dim
        c.pairing = _lib.PAIRING_BY_NAME[self.pairing]
        c.theta = self.theta
        c.scaling = _lib.SCALING_BY_NAME[self.scaling]
        c.factor = self.factor
        c.original_max_position = self.original_max_position
        c.beta_fast, c.beta_slow = self.beta_fast, self.beta_slow
        c.attention_factor = self.attention_factor
        c.truncate = int(self.truncate)
        c.low_freq_factor, c.high_freq_factor = self.low_freq_factor, self.high_freq_factor
        c.placement = _lib.PLACEMENT_BY_NAME[self.placement]
        c.mscale, c.mscale_all_dim = self.mscale, self.mscale_all_dim
        c.max_position = self.max_position
        keep = []
        for name in ("freq_factors", "long_freq_factors"):
            values = getattr(self, name)
            if values is None:
                continue
            r = self.rotary_dim or head_dim
            if len(values) != r // 2:
                raise ValueError(f"RopeConfig.{name} has {len(values)} "
                                 f"values; rotary_dim {r} needs {r // 2}")
            buf = np.array(values, dtype=np.float64)
            keep.append(buf)
            setattr(c, name, buf.__array_interface__["data"][0])
        return c, keep

    def _refusal(self, head_dim: int) -> str:
        """Why librove refuses what this config derives for a head of head_dim (""
        when it takes it): rove_rope_inv_freq's rules (src/rope_freq.c) -- NTK's base
        theta * factor^(r/(r-2)) finite with r > 2, attention_factor <= 1000, every
        frequency finite times 2^31, the derived attention factor in (0, 1000]. For the
        detail of a ROVE_ERR_INVALID_ARGUMENT (rove.inv_freq, Plan); head_dim is valid."""
        c, keep = self.to_c(head_dim)
        w = np.empty(_lib.MAX_HEAD_DIM // 2, dtype=np.float64)
        st = _lib.lib.rove_rope_inv_freq(c, int(head_dim), w.__array_interface__["data"][0], None)
        del keep
        return self._why(head_dim) if st == _lib.ERR_INVALID_ARGUMENT else ""

    def _why(self, head_dim: int) -> str:
        """_refusal's text, for a config rove_rope_inv_freq refused for head_dim."""
        r = self.rotary_dim or head_dim
        if self.attention_factor > 1000:
            return f"RopeConfig.attention_factor={self.attention_factor} exceeds librove's bound 1000"
        if self.scaling == "ntk" and r <= 2:
            return (f"scaling='ntk' needs a rotary dim > 2 (its base is theta * "
                    f"factor^(r/(r-2))); the rotary dim is {r}")
        if self.scaling == "ntk":
            return (f"scaling='ntk': the base theta * factor^(r/(r-2)) overflows for "
                    f"theta={self.theta}, factor={self.factor}, rotary dim {r}")
        return (f"the frequencies or the attention factor this RopeConfig derives for "
                f"head_dim {head_dim} are out of librove's range (every frequency times "
                "2^31 finite, an attention factor in (0, 1000]; e.g. longrope's derived "
                "sqrt(1 + ln factor / ln original_max_position) is infinite for "
                f"original_max_position 1): scaling={self.scaling!r}, "
                f"factor={self.factor}, original_max_position={self.original_max_position}")


def _as_numpy(x):
    t = sys.modules.get("torch")
    if t is not None and isinstance(x, t.Tensor):
        return x.detach().cpu().numpy()
    return x


def _head_dim(head_dim) -> int:
    if isinstance(head_dim, bool) or not isinstance(head_dim, (int, np.integer)):
        raise TypeError(f"head_dim must be an int, not {type(head_dim).__name__}")
    head_dim = int(head_dim)
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim must be even and >= 2 (got {head_dim})")
    return head_dim


def inv_freq(rope: Optional[RopeConfig], head_dim: int):
    """(w, m): the inverse frequencies w_k (float64 [rotary_dim/2]) and the attention
    factor m of ``rope`` for a head of ``head_dim``, in double, as librove uses them
    (rove_rope_inv_freq), for comparison with your framework's inv_freq."""
    rope = RopeConfig() if rope is None else rope
    if not isinstance(rope, RopeConfig):
        raise TypeError(f"rope must be a rove.RopeConfig, not {type(rope).__name__}")
    head_dim = _head_dim(head_dim)
    r = rope.rotary_dim or head_dim
    if r > head_dim:
        raise ValueError(f"RopeConfig.rotary_dim {r} exceeds head_dim {head_dim}")
    c, keep = rope.to_c(head_dim)
    w = np.empty(r // 2, dtype=np.float64)
    m = ctypes.c_double()
    st = _lib.lib.rove_rope_inv_freq(c, head_dim, w.__array_interface__["data"][0],
                                     ctypes.addressof(m))
    del keep
    _lib.check("rove_rope_inv_freq", st,
               rope._why(head_dim) if st == _lib.ERR_INVALID_ARGUMENT else "")
    return w, float(m.value)
