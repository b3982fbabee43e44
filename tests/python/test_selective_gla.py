# SPDX-License-Identifier: MIT
"""Selective RoPE (temperatures, angles with carry, phase network) and GLA against the C
oracles and float64 NumPy references."""
import ctypes

import numpy as np
import pytest

import rove
from rove import _lib
from conftest import randn
from oracle import ptr
from reference import rel_err


def test_temperatures():
    t = rove.selective_temperatures(32)
    w, _ = rove.inv_freq(rove.RopeConfig(theta=500000.0), 64)
    assert np.array_equal(t, w)  # bit for bit, as rove.h promises


def test_angles_reference_and_carry(rng, torch):
    B, T, H, P = 2, 50, 3, 16
    phi = rng.uniform(0, 2, size=(B, T, H, P)).astype(np.float32)
    carry0 = rng.uniform(-5, 5, size=(B, H, P))
    ang, carry = rove.selective_angles(phi, carry=carry0)
    temp = rove.selective_temperatures(P)
    want = temp * (carry0[:, None] + np.cumsum(phi.astype(np.float64), axis=1))
    assert ang.dtype == np.float64 and rel_err(ang, want) < 1e-13
    assert np.allclose(carry, carry0 + phi.astype(np.float64).sum(1), rtol=1e-14)
    a1, c1 = rove.selective_angles(phi[:, :20], carry=carry0)  # chunks: bit-identical
    a2, c2 = rove.selective_angles(phi[:, 20:], carry=c1)
    assert np.array_equal(np.concatenate([a1, a2], 1), ang) and np.array_equal(c2, carry)
    t_ang, t_c = rove.selective_angles(torch.from_numpy(phi), temp=torch.from_numpy(temp * 2))
    assert isinstance(t_ang, torch.Tensor) and t_ang.dtype == torch.float64
    assert rel_err(t_ang.numpy(), 2 * temp * np.cumsum(phi.astype(np.float64), axis=1)) < 1e-13
    ones = np.ones((1, 10, 1, 8), np.float32)  # phi = 1, carry p0 - 1: RoPE's angles
    a, _ = rove.selective_angles(ones, carry=np.full((1, 1, 8), 99.0))
    w, _ = rove.inv_freq(rove.RopeConfig(theta=5e5), 16)
    assert np.array_equal(a[0, :, 0], (np.arange(100, 110)[:, None] * w))
    with pytest.raises(ValueError, match="non-finite"):
        rove.selective_angles(np.full((1, 2, 1, 2), np.nan, np.float32))


def phase_weights(rng, H, P, D, gate=True):
    return rove.SelectivePhaseWeights(
        w=randn(rng, H, P, D), conv_w=randn(rng, H, P, 4), gain=randn(rng, H, P),
        conv_b=randn(rng, H, P), gate_w=randn(rng, H, D) if gate else None,
        gate_b=randn(rng, H) if gate else None)


def test_phase_against_oracle_and_pieces(rng, oracle, torch):
    B, T, H, P, D = 2, 17, 3, 8, 24
    wts = phase_weights(rng, H, P, D)
    x = randn(rng, B, T, H, D)
    phi = rove.selective_phase(x, wts)
    want = np.empty((B, T, H, P))
    assert oracle.rove_oracle_selective_phase(wts._c(), B, T, ptr(x), 0, None, ptr(want)) == 0
    assert phi.dtype == np.float32 and rel_err(phi, want) < 1e-5
    state = wts.new_state(B)  # pieces with a carried conv state == one call, bit for bit
    pieces = [rove.selective_phase(x[:, a:b], wts, conv_state=state)
              for a, b in ((0, 5), (5, 6), (6, 17))]
    assert np.array_equal(np.concatenate(pieces, 1), phi)
    tphi = rove.selective_phase(torch.from_numpy(x), wts)
    assert isinstance(tphi, torch.Tensor) and np.array_equal(tphi.numpy(), phi)
    strided = np.zeros((B, T, H, 2 * D), np.float32)[..., :D]  # a token stride, no copy
    strided[...] = x
    assert np.array_equal(rove.selective_phase(strided, wts), phi)
    nogate = phase_weights(rng, H, P, D, gate=False)  # no gate: factor 1, not sigmoid(0)
    want = np.empty((B, T, H, P))
    assert oracle.rove_oracle_selective_phase(nogate._c(), B, T, ptr(x), 0, None, ptr(want)) == 0
    assert rel_err(rove.selective_phase(x, nogate), want) < 1e-5
    with pytest.raises(ValueError, match="heads"):
        rove.selective_phase(x[..., :2, :], wts)
    with pytest.raises(ValueError, match="contiguous"):
        rove.selective_phase(x, wts, conv_state=np.zeros((B, H, 3, P), np.float32).transpose(0, 1, 3, 2))


def oracle_gla(oracle, plan, q, k, v, g, angles=None, s0=None):
    c = _lib.GLAConfig()
    _lib.lib.rove_gla_config_init(c, plan.n_heads, plan.key_dim, plan.value_dim)
    c.scale, c.rotate, c.rotary_dim = plan.scale, plan.rotate, plan.rotary_dim
    c.pairing, c.chunk = _lib.PAIRING_BY_NAME[plan.pairing], plan.chunk
    a = _lib.GLAArgs()
    B, T, H, _ = q.shape
    a.batch, a.seq_len = B, T
    a.q, a.k, a.v, a.g, a.angles, a.initial_state = map(ptr, (q, k, v, g, angles, s0))
    out = np.empty(v.shape)
    fs = np.empty((B, H, plan.key_dim, plan.value_dim))
    assert oracle.rove_oracle_gla(c, a, ptr(out), ptr(fs)) == 0
    return out, fs


@pytest.mark.parametrize("rotate", ["none", "rope", "rove"])
def test_gla_against_oracle(rng, oracle, rotate):
    B, T, H, K, V = 2, 80, 2, 32, 32
    q, k, v = randn(rng, B, T, H, K), randn(rng, B, T, H, K), randn(rng, B, T, H, V)
    g = -rng.uniform(0.01, 0.5, size=(B, T, H, K)).astype(np.float32)
    s0 = randn(rng, B, H, K, V)
    ang = None if rotate == "none" else rove.selective_angles(
        rng.uniform(0, 2, size=(B, T, H, K // 2)).astype(np.float32))[0]
    plan = rove.GLAPlan(H, K, V, rotate="rope" if rotate == "none" else rotate)
    want, want_s = oracle_gla(oracle, plan, q, k, v, g, ang, s0)
    out, fs = rove.gla(q, k, v, g, angles=ang, rotate=plan.rotate, initial_state=s0,
                       return_final_state=True)
    assert rel_err(out, want) < 1e-4 and rel_err(fs, want_s) < 1e-4
    rout, rfs = plan.recurrent(q, k, v, g, angles=ang, initial_state=s0, return_final_state=True)
    assert rel_err(rout, want) < 1e-4 and rel_err(rfs, want_s) < 1e-4
    # prefill, then decode steps carrying the state
    o1, s = rove.gla(q[:, :64], k[:, :64], v[:, :64], g[:, :64], rotate=plan.rotate,
                     angles=None if ang is None else ang[:, :64], initial_state=s0,
                     return_final_state=True)
    steps = [o1]
    for t in range(64, T):
        o, s = rove.gla_recurrent(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], g[:, t:t + 1],
                                  rotate=plan.rotate, initial_state=s, return_final_state=True,
                                  angles=None if ang is None else ang[:, t:t + 1])
        steps.append(o)
    assert rel_err(np.concatenate(steps, 1), want) < 1e-4 and rel_err(s, want_s) < 1e-4


def test_gla_torch_and_errors(rng, torch):
    B, T, H, K, V = 1, 20, 2, 16, 8
    q, k, v = randn(rng, B, T, H, K), randn(rng, B, T, H, K), randn(rng, B, T, H, V)
    g = -rng.uniform(0, 1, size=(B, T, H, K)).astype(np.float32)
    want = rove.gla(q, k, v, g)
    got = rove.gla(*(torch.from_numpy(x) for x in (q, k, v, g)))
    assert isinstance(got, torch.Tensor) and np.array_equal(got.numpy(), want)
    assert np.array_equal(rove.gla(q[0], k[0], v[0], g[0]), want[0])  # 3-D
    with pytest.raises(ValueError, match="<= 0"):
        rove.gla(q, k, v, -g)
    with pytest.raises(ValueError, match="<= 0"):
        rove.gla(q, k, v, np.where(g < -0.5, np.nan, g).astype(np.float32))
    with pytest.raises(ValueError, match="chunk"):
        rove.GLAPlan(H, K, V, chunk=48)
    with pytest.raises(TypeError, match="float32"):
        rove.gla(q.astype(np.float64), k, v, g)
    with pytest.raises(ValueError, match="shape"):
        rove.gla(q, k[..., :8], v, g)
