# SPDX-License-Identifier: MIT
"""RopeConfig's 0.2 fields (placement, mscale / mscale_all_dim, LongRoPE's factor sets and
max_position): inv_freq against the float64 formulas of tests/python/reference.py, the
field table of rove.h (an unread field must keep its default) enforced in Python with a
message naming the field and in librove, rove.rope.mscale."""
from __future__ import annotations

import math

import numpy as np
import pytest

import rove
from rove import _lib
from reference import ref_inv_freq

SHORT = tuple(1.0 + 0.02 * i for i in range(32))
LONG = tuple(1.0 + 0.7 * i for i in range(32))


@pytest.mark.parametrize("kw", [
    dict(scaling="yarn", factor=40.0, original_max_position=4096, mscale=1.0,
         mscale_all_dim=1.0),
    dict(scaling="yarn", factor=40.0, original_max_position=4096, mscale=1.0,
         mscale_all_dim=0.5, placement="last", pairing="interleaved"),
    dict(scaling="yarn", factor=16.0, original_max_position=4096, mscale=2.0,
         mscale_all_dim=0.5, attention_factor=1.1),
    dict(scaling="longrope", factor=32.0, original_max_position=4096, freq_factors=SHORT),
    dict(scaling="longrope", factor=32.0, original_max_position=4096, freq_factors=SHORT,
         long_freq_factors=LONG, max_position=4096),
    dict(scaling="longrope", factor=32.0, original_max_position=4096, freq_factors=SHORT,
         long_freq_factors=LONG, max_position=4097),
    dict(scaling="longrope", factor=1.0, original_max_position=4096, freq_factors=SHORT,
         long_freq_factors=LONG, max_position=100000, attention_factor=1.3),
    dict(placement="last", rotary_dim=16),
])
def test_inv_freq_matches_the_formulas(kw):
    rope = rove.RopeConfig(**kw)
    ref = {"original_max_position": "L0", "rotary_dim": "r"}
    want_w, want_m = ref_inv_freq(64, **{ref.get(k, k): v for k, v in kw.items()
                                         if k != "pairing"})
    w, m = rove.inv_freq(rope, 64)
    assert np.max(np.abs(w / want_w - 1)) < 1e-13
    assert abs(m / want_m - 1) < 1e-15


def test_placement_accepts_names_and_enum_values():
    assert rove.RopeConfig(placement=_lib.ROTARY_LAST).placement == "last"
    assert rove.RopeConfig(placement=0).placement == "first"
    assert rove.RopeConfig().placement == "first"  # rove_rope_config_init's default
    for bad in ("middle", 2, -1, None, True):
        with pytest.raises(ValueError, match="placement"):
            rove.RopeConfig(placement=bad)


# Every (scaling, field) that the table marks unread, with a valid non-default value.
UNREAD = {
    "none": dict(factor=2.0, original_max_position=64, beta_fast=16.0, truncate=False,
                 mscale=1.0, attention_factor=1.2, low_freq_factor=2.0, max_position=9,
                 long_freq_factors=LONG),
    "linear": dict(original_max_position=64, beta_slow=2.0, attention_factor=1.2,
                   high_freq_factor=8.0, max_position=9),
    "yarn": dict(low_freq_factor=2.0, high_freq_factor=8.0, long_freq_factors=LONG,
                 max_position=9),
    "llama3": dict(beta_fast=16.0, truncate=False, mscale=1.0, attention_factor=1.2,
                   max_position=9),
    "longrope": dict(beta_fast=16.0, beta_slow=2.0, truncate=False, mscale=1.0,
                     low_freq_factor=2.0),
}
BASE = {
    "none": {}, "linear": dict(factor=2.0),
    "yarn": dict(factor=4.0, original_max_position=64),
    "llama3": dict(factor=8.0, original_max_position=64),
    "longrope": dict(factor=8.0, original_max_position=64, freq_factors=SHORT),
}


@pytest.mark.parametrize("scaling,field", [(s, f) for s, fs in sorted(UNREAD.items())
                                           for f in sorted(fs)])
def test_unread_fields_are_refused_by_name(scaling, field):
    kw = dict(BASE[scaling], scaling=scaling, **{field: UNREAD[scaling][field]})
    if field == "mscale":
        kw["mscale_all_dim"] = 1.0  # the pair, so that only the table can refuse it
    with pytest.raises(ValueError, match=f"RopeConfig.{field}=.*not read by scaling"):
        rove.RopeConfig(**kw)
    # librove refuses the same config by itself (the C check, not just the Python one)
    rope = rove.RopeConfig(**BASE[scaling], scaling=scaling)
    c, keep = rope.to_c(64)
    value = UNREAD[scaling][field]
    if field == "long_freq_factors":
        buf = np.array(value, dtype=np.float64)
        c.long_freq_factors = buf.__array_interface__["data"][0]
    else:
        setattr(c, field, int(value) if field == "truncate" else value)
    if field == "mscale":
        c.mscale_all_dim = 1.0
    w = np.empty(32)
    st = _lib.lib.rove_rope_inv_freq(c, 64, w.__array_interface__["data"][0], None)
    assert st == _lib.ERR_INVALID_ARGUMENT
    del keep


def test_read_fields_and_pair_rules():
    rove.RopeConfig(scaling="yarn", factor=4.0, original_max_position=64, beta_fast=16.0,
                    truncate=False, mscale=1.0, mscale_all_dim=0.5, attention_factor=1.2)
    rove.RopeConfig(scaling="longrope", factor=8.0, original_max_position=64,
                    freq_factors=SHORT, long_freq_factors=LONG, max_position=65,
                    attention_factor=1.2)
    with pytest.raises(ValueError, match="mscale and mscale_all_dim"):
        rove.RopeConfig(scaling="yarn", factor=4.0, original_max_position=64, mscale=1.0)
    with pytest.raises(ValueError, match="needs freq_factors"):
        rove.RopeConfig(scaling="longrope", factor=8.0, original_max_position=64)
    with pytest.raises(ValueError, match="original_max_position must be > 0"):
        rove.RopeConfig(scaling="longrope", factor=8.0, freq_factors=SHORT)
    # bounds checked by librove: m <= 1000, w_k * 2^31 finite, long set beyond L0
    for rope in (rove.RopeConfig(scaling="yarn", factor=4.0, original_max_position=64,
                                 attention_factor=1e20),
                 rove.RopeConfig(freq_factors=(1e-300,) + SHORT[1:]),
                 rove.RopeConfig(scaling="longrope", factor=8.0, original_max_position=64,
                                 freq_factors=SHORT, max_position=65)):
        with pytest.raises(rove.RoveInvalidArgument):
            rove.inv_freq(rope, 64)
        with pytest.raises(rove.RoveInvalidArgument):
            rove.get_plan(2, 1, 64, rope=rope)


def test_mscale_helper():
    assert rove.rope.mscale(40.0, 1.0) == 0.1 * 1.0 * math.log(40.0) + 1.0
    assert rove.rope.mscale(40.0) == rove.rope.mscale(40.0, 1.0)
    assert rove.rope.mscale(1.0, 5.0) == 1.0 and rove.rope.mscale(0.5, 5.0) == 1.0
    with pytest.raises(ValueError):
        rove.rope.mscale(math.nan, 1.0)
    with pytest.raises(TypeError):
        rove.rope.mscale("40", 1.0)


@pytest.mark.parametrize("cfg, needle", [
    (dict(scaling="ntk", factor=2.0, rotary_dim=2), "rotary dim > 2"),
    (dict(scaling="ntk", factor=1e300), "overflows"),
    (dict(scaling="yarn", factor=2.0, original_max_position=4096, attention_factor=2000.0),
     "attention_factor=2000.0 exceeds"),
    (dict(scaling="longrope", factor=2.0, original_max_position=1, freq_factors=(1.0,) * 32),
     "original_max_position 1"),
], ids=["ntk-dim-2", "ntk-overflow", "yarn-attention-factor", "longrope-L0-1"])
def test_configs_librove_refuses_name_the_reason(cfg, needle):
    """A RopeConfig that builds but derives values librove refuses (src/rope_freq.c) names
    the field in the error, from rove.inv_freq and from a plan alike."""
    rope = rove.RopeConfig(**cfg)
    with pytest.raises(rove.RoveInvalidArgument, match=needle):
        rove.inv_freq(rope, 64)
    with pytest.raises(rove.RoveInvalidArgument, match=needle):
        rove.Plan(2, 2, 64, rope=rope)
