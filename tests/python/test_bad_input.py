# SPDX-License-Identifier: MIT
"""Bad input of every kind is rejected with a clear Python exception, before librove is
called (a spy on the C entry point proves it); C failures carry librove's status."""
import math

import numpy as np
import pytest

import rove
from rove import _lib
from conftest import randn


@pytest.fixture
def no_c_call(monkeypatch):
    """Fail the test if rove_attention_forward or rove_plan_create is reached."""
    def spy(*a):
        raise AssertionError("librove was called with input Python should have rejected")
    monkeypatch.setattr(_lib.lib, "rove_attention_forward", spy)
    monkeypatch.setattr(_lib.lib, "rove_plan_create", spy)
    rove.clear_plan_cache()
    yield
    rove.clear_plan_cache()


@pytest.fixture
def qkv(rng):
    return randn(rng, 1, 8, 4, 32), randn(rng, 1, 8, 2, 32), randn(rng, 1, 8, 2, 32)


def test_dtype(qkv, torch, no_c_call):
    q, k, v = qkv
    with pytest.raises(TypeError, match="float32.*never casts"):
        rove.attention(q.astype(np.float64), k, v)
    with pytest.raises(TypeError, match="float32 or float16"):  # float16 is taken, int not
        rove.attention(q, k.astype(np.int16), v)
    with pytest.raises(TypeError, match=r"\.float\(\)"):
        rove.attention(*(torch.from_numpy(x).double() for x in qkv))
    with pytest.raises(TypeError, match="bfloat16"):
        rove.attention(*(torch.from_numpy(x).to(torch.int32) for x in qkv))
    with pytest.raises(TypeError, match="float32"):
        rove.attention(q.astype(">f4"), k, v)  # byte-swapped
    with pytest.raises(TypeError, match="numpy.ndarray or a CPU torch.Tensor"):
        rove.attention(q.tolist(), k, v)
    with pytest.raises(TypeError, match="must all be numpy arrays or all torch"):
        rove.attention(q, torch.from_numpy(k), v)


def test_device(qkv, torch, no_c_call):
    meta = [torch.empty(x.shape, device="meta") for x in qkv]
    with pytest.raises(ValueError, match="device 'meta'.*CPU"):
        rove.attention(*meta)
    with pytest.raises(ValueError, match="device"):
        rove.attention(torch.from_numpy(qkv[0]), meta[1], torch.from_numpy(qkv[2]))


def test_shapes(qkv, rng, no_c_call):
    q, k, v = qkv
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        rove.attention(randn(rng, 1, 8, 3, 32), k, v)
    with pytest.raises(ValueError, match="head_dim of q .32. and k/v .16. differ"):
        rove.attention(q, randn(rng, 1, 8, 2, 16), randn(rng, 1, 8, 2, 16))
    with pytest.raises(ValueError, match="k and v shapes differ"):
        rove.attention(q, k, randn(rng, 1, 9, 2, 32))
    with pytest.raises(ValueError, match="batch of q .1. and k/v .2. differ"):
        rove.attention(q, randn(rng, 2, 8, 2, 32), randn(rng, 2, 8, 2, 32))
    with pytest.raises(ValueError, match="same rank"):
        rove.attention(q, k[0], v[0])
    with pytest.raises(ValueError, match="4-D"):
        rove.attention(q[0, 0], k[0, 0], v[0, 0])
    with pytest.raises(ValueError, match="head_dim must be even"):
        rove.attention(randn(rng, 1, 8, 2, 33), randn(rng, 1, 8, 2, 33), randn(rng, 1, 8, 2, 33))
    with pytest.raises(ValueError, match="kv_len must be > 0"):  # (no queries: test_empty.py)
        rove.attention(q, k[:, :0], v[:, :0])
    with pytest.raises(ValueError, match="layout"):
        rove.attention(q, k, v, layout="sbhd")
    with pytest.raises(ValueError, match="out has shape"):
        rove.attention(q, k, v, out=np.empty((1, 8, 4, 16), np.float32))


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(scale=math.nan), ValueError, "scale must be finite"),
    (dict(scale=math.inf), ValueError, "scale must be finite"),
    (dict(scale=1e39), ValueError, "does not fit a C float"),
    (dict(scale=0.0), ValueError, "scale=0"),
    (dict(softcap=math.nan), ValueError, "softcap must be finite"),
    (dict(softcap=-1.0), ValueError, "softcap must be >= 0"),
    (dict(window=-1), ValueError, "window"),
    (dict(window=2.5), TypeError, "window must be an int"),
    (dict(rotate="rove2"), ValueError, "rotate must be"),
    (dict(rotate=16), ValueError, "ROTATE_Q"),
    (dict(causal="yes"), TypeError, "causal"),
    (dict(threads=-1), ValueError, "threads"),
    (dict(threads=1025), ValueError, r"threads must be in \[0, 1024\]"),  # (was C's bare status)
    (dict(isa="sse"), ValueError, "isa must be"),
    (dict(rope="yarn"), TypeError, "RopeConfig"),
    (dict(rope=rove.RopeConfig(rotary_dim=64)), ValueError, "exceeds head_dim"),
    (dict(rope=rove.RopeConfig(freq_factors=[1.0] * 3)), ValueError, "freq_factors has 3"),
])
def test_parameters(qkv, no_c_call, kw, exc, msg):
    with pytest.raises(exc, match=msg):
        rove.attention(*qkv, **kw)


@pytest.mark.parametrize("name", ["softcap", "scale"])
def test_float_parameters_up_to_flt_max(qkv, name):
    """Any value a C float holds is taken (rove.h: finite), FLT_MAX too; past its rounding
    edge the value is refused (it was refused from 3.4e38, below FLT_MAX)."""
    flt_max = float(np.finfo(np.float32).max)
    for x in (3.4e38, flt_max):
        rove.Plan(4, 4, 16, **{name: x})
    with pytest.raises(ValueError, match="does not fit a C float"):
        rove.Plan(4, 4, 16, **{name: flt_max * (1 + 2 ** -23)})


@pytest.mark.parametrize("good,bad", [
    (dict(window=3), dict(window=3.0)),
    (dict(causal=True), dict(causal=1.0)),
    (dict(threads=1), dict(threads=True)),
    (dict(softcap=0.0), dict(softcap=False)),
])
def test_parameters_after_a_cached_plan(qkv, good, bad):
    """A wrongly typed value equal to a cached plan's (3.0 == 3, True == 1 in Python)
    is refused as it is without one: the plan cache does not skip the checks."""
    rove.clear_plan_cache()
    rove.attention(*qkv, **good)
    with pytest.raises(TypeError):
        rove.attention(*qkv, **bad)


def test_positions(qkv, torch, no_c_call):
    q, k, v = qkv
    with pytest.raises(ValueError, match="outside int32"):
        rove.attention(q, k, v, q_pos=np.arange(8, dtype=np.int64) + 2 ** 31 - 4)
    with pytest.raises(ValueError, match="outside int32"):
        rove.attention(q, k, v, kv_pos=np.arange(8, dtype=np.uint64) + 2 ** 40)
    with pytest.raises(ValueError, match="outside int32"):
        rove.attention(q, k, v, kv_pos=torch.arange(8) - 2 ** 31 - 1)
    with pytest.raises(TypeError, match="integers"):
        rove.attention(q, k, v, q_pos=np.arange(8.0))
    with pytest.raises(TypeError, match="integers"):
        rove.attention(q, k, v, q_pos=np.ones(8, bool))
    with pytest.raises(ValueError, match=r"shape \(7,\)"):
        rove.attention(q, k, v, q_pos=np.arange(7))
    with pytest.raises(ValueError, match="batch=1"):
        rove.attention(q, k, v, kv_pos=np.zeros((2, 8), np.int32))
    with pytest.raises(ValueError, match="device"):
        rove.attention(q, k, v, q_pos=torch.arange(8, device="meta"))


def test_angles(qkv, rng, no_c_call):
    q, k, v = qkv
    a = rng.uniform(size=(1, 8, 2, 16))
    with pytest.raises(ValueError, match="both or neither"):
        rove.attention(q, k, v, q_angles=a)
    with pytest.raises(TypeError, match="float64"):
        rove.attention(q, k, v, q_angles=a.astype(np.float32), kv_angles=a)
    with pytest.raises(ValueError, match="shape"):
        rove.attention(q, k, v, q_angles=a[..., :8], kv_angles=a)
    bad = a.copy()
    bad[0, 3, 1, 2] = np.inf
    with pytest.raises(ValueError, match="non-finite"):
        rove.attention(q, k, v, q_angles=a, kv_angles=bad)


def test_requires_grad(qkv, torch, no_c_call):
    """float64 inputs that require grad are refused before any C call (float32, bfloat16
    and float16 are differentiable: tests/python/test_autograd.py)."""
    q = torch.from_numpy(qkv[0]).double().requires_grad_()
    with pytest.raises(TypeError, match="float32, bfloat16 or float16 q, k and v"):
        rove.attention(q, torch.from_numpy(qkv[1]), torch.from_numpy(qkv[2]))


@pytest.mark.parametrize("kw,msg", [
    (dict(theta=math.nan), "theta must be finite"), (dict(theta=1.0), "theta must be > 1"),
    (dict(pairing="neox"), "pairing"), (dict(scaling="dynamic"), "scaling must be one of"),
    (dict(scaling="yarn", factor=4.0), "original_max_position must be > 0"),
    (dict(scaling="linear", factor=0.0), "factor must be > 0"),
    (dict(scaling="linear", factor=math.inf), "factor must be finite"),
    (dict(beta_fast=-1.0), "beta_fast must be > 0"),
    (dict(attention_factor=-0.5), "attention_factor must be >= 0"),
    (dict(rotary_dim=7), "rotary_dim must be even"),
    (dict(scaling="llama3", factor=8.0, original_max_position=8192, low_freq_factor=-1.0),
     "llama3 needs low_freq_factor > 0"),
    (dict(freq_factors=[1.0, math.nan]), "freq_factors must be finite"),
    (dict(freq_factors=[1.0, -2.0]), "freq_factors must be finite divisors > 0"),
    (dict(freq_factors=[[1.0, 1.0], [1.0, 1.0]]), r"freq_factors must be a 1-D .*shape \(2, 2\)"),
    (dict(freq_factors=2.0), r"freq_factors must be a 1-D .*shape \(\)"),
    (dict(scaling="longrope", factor=8.0, original_max_position=64, freq_factors=[1.0] * 4,
          long_freq_factors=[[1.0] * 4]), r"long_freq_factors must be a 1-D .*shape \(1, 4\)"),
])
def test_rope_config(kw, msg):
    with pytest.raises(ValueError, match=msg):
        rove.RopeConfig(**kw)


def test_rope_config_types():
    with pytest.raises(TypeError, match="theta must be a number"):
        rove.RopeConfig(theta="10000")
    with pytest.raises(TypeError, match="rotary_dim must be an int"):
        rove.RopeConfig(rotary_dim=32.0)


def test_c_errors_carry_the_status(qkv):
    q, k, v = qkv
    with pytest.raises(rove.RoveInvalidArgument) as e:
        rove.attention(q, k, v, out=q)  # the output overlaps an input: librove says so
    err = e.value
    assert isinstance(err, ValueError) and isinstance(err, rove.RoveError)
    assert isinstance(err, RuntimeError)
    assert err.status == 1 and err.status_string == _lib.status_string(1)
    assert err.function == "rove_attention_forward" and err.status_string in str(err)
    missing = [i for i in ("scalar", "avx2", "avx512", "neon") if i not in
               rove.info()["available_isas"]]
    assert missing, "every ISA available: cannot test ROVE_ERR_UNSUPPORTED this way"
    with pytest.raises(rove.RoveUnsupported) as e:
        rove.Plan(4, 2, 32, isa=missing[0])
    assert e.value.status == 2 and "rove_plan_create" in str(e.value)
    with pytest.raises(rove.RoveUnsupported, match="head_dim 2048 is above librove's "
                       f"ROVE_MAX_HEAD_DIM \\({_lib.MAX_HEAD_DIM}\\)"):
        rove.Plan(1, 1, 2048)  # not a CPU or build limit: the message says what
    assert issubclass(rove.RoveOutOfMemory, MemoryError)
    assert issubclass(rove.RoveSizeOverflow, OverflowError)
