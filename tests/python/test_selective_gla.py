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


# ---- the phase network against the reference module --------------------------------------
# reference_phi re-implements, in torch float64, the phase network of the official
# Selective-RoPE code (SelectiveRoPE in selective_rope/modules/rotary.py, Movahedi et al.,
# 2025) from its equations and with its parameter names: per-head l2_norm of the layer
# input (fla: x / sqrt(sum x^2 + 1e-6)), the low-rank Sequential or the full-rank
# ChunkedLinear (scalar * F.normalize(weight, dim=-2)), the depthwise causal ShortConvolution
# (bias=False, then conv_act) or skip_conv's first difference, + exp(phi_bias), times the
# sigmoid phase gate. That module needs fla (triton) to import, so it is not used itself.

def reference_phi(torch, p, H, x, conv_act=None, gate=None, history=None, eps=1e-6):
    """phi [B, T, H, P] (float64) of the reference for parameters p (name -> float32
    array), layer input x [B, T, d] and an optional z history [B, S, H*P] (oldest first)."""
    F = torch.nn.functional
    t = {k: torch.from_numpy(np.asarray(v, np.float64)) for k, v in p.items()}
    x = torch.from_numpy(np.asarray(x, np.float64))
    B, T, d = x.shape
    xh = x.reshape(B, T, H, d // H)
    u = xh / torch.sqrt((xh * xh).sum(-1, keepdim=True) + eps)
    uf = u.reshape(B, T, d)
    if "phi_proj.weight" in t:  # ChunkedLinear: weight [H, in, P], scalar [H]
        w = t["phi_proj.scalar"].reshape(-1, 1, 1) * F.normalize(t["phi_proj.weight"], dim=-2)
        z = torch.einsum("bthi,hio->btho", u, w).reshape(B, T, -1)
    else:
        z = F.linear(F.linear(uf, t["phi_proj.0.weight"]), t["phi_proj.1.weight"])
    HP = z.shape[-1]
    if "phi_conv1d.weight" in t:
        wc = t["phi_conv1d.weight"]  # [H*P, 1, W]
        S = wc.shape[-1] - 1
        hist = torch.zeros(B, S, HP, dtype=z.dtype) if history is None else \
            torch.from_numpy(np.asarray(history, np.float64))
        zz = torch.cat([hist, z], 1).transpose(1, 2)  # [B, HP, S + T]
        y = F.conv1d(zz, wc, groups=HP).transpose(1, 2)
        if conv_act == "silu":
            y = F.silu(y)
    else:  # skip_conv: phi - [0, phi[:-1]] along time (or the history's last z)
        prev = torch.zeros(B, 1, HP, dtype=z.dtype) if history is None else \
            torch.from_numpy(np.asarray(history, np.float64))
        y = z - torch.cat([prev, z[:, :-1]], 1)
    y = y.reshape(B, T, H, -1)
    if "phi_bias" in t:
        y = y + torch.exp(t["phi_bias"])
    if gate == "standard":
        g = F.linear(uf, t["phase_gate_proj.weight"], t["phase_gate_proj.bias"]).sigmoid()
    elif gate in ("low-rank", "gla"):
        g = F.linear(F.linear(uf, t["phase_gate_proj.0.weight"]), t["phase_gate_proj.1.weight"],
                     t["phase_gate_proj.1.bias"]).sigmoid()
    if gate == "gla":
        y = y * g.reshape(B, T, H, -1)
    elif gate is not None:
        y = y * g.unsqueeze(-1)
    return y.numpy()


def reference_params(rng, H, P, D, projection, width, bias, gate, rank=6, grank=5):
    """Random parameters with the reference module's state_dict names and shapes."""
    d = H * D
    p = {}
    if projection == "low-rank":
        p["phi_proj.0.weight"], p["phi_proj.1.weight"] = randn(rng, rank, d), randn(rng, H * P, rank)
    else:
        p["phi_proj.weight"] = randn(rng, H, D, P)
        p["phi_proj.scalar"] = rng.uniform(0.5, 2, H).astype(np.float32)
    if width:
        p["phi_conv1d.weight"] = randn(rng, H * P, 1, width)
    if bias:
        p["phi_bias"] = randn(rng, 1, 1, H, P)
    if gate == "standard":
        p["phase_gate_proj.weight"], p["phase_gate_proj.bias"] = randn(rng, H, d), randn(rng, H)
    elif gate is not None:
        n = H * P if gate == "gla" else H
        p["phase_gate_proj.0.weight"] = randn(rng, grank, d)
        p["phase_gate_proj.1.weight"], p["phase_gate_proj.1.bias"] = randn(rng, n, grank), randn(rng, n)
    p["temperature"] = rove.selective_temperatures(P).astype(np.float32).reshape(1, 1, 1, -1)
    return p


@pytest.mark.parametrize("projection", ["low-rank", "full-rank"])
@pytest.mark.parametrize("conv", ["none", "silu", "w1", "skip"])
@pytest.mark.parametrize("gate", [None, "standard", "low-rank", "gla"])
@pytest.mark.parametrize("bias", [False, True])
def test_phase_matches_reference(rng, torch, projection, conv, gate, bias):
    B, T, H, P, D = 2, 13, 3, 4, 10
    width = {"none": 4, "silu": 4, "w1": 1, "skip": 0}[conv]
    act = "silu" if conv == "silu" else None
    p = reference_params(rng, H, P, D, projection, width, bias, gate)
    wts = rove.SelectivePhaseWeights.from_reference_state_dict(p, H, conv_act=act)
    assert (wts.projection, wts.gate, wts.skip_conv, wts.conv_act) == (projection, gate, conv == "skip", act)
    x = randn(rng, B, T, H * D) * 2
    want = reference_phi(torch, p, H, x, conv_act=act, gate=gate)
    phi = rove.selective_phase(x, wts)
    assert phi.dtype == np.float32 and phi.shape == (B, T, H, P)
    assert rel_err(phi, want) < 2e-6
    # from a carried conv state: the reference's conv with that history
    S = wts.state_len
    state = rng.uniform(-1, 1, (B, H, P, S)).astype(np.float32)
    hist = state.reshape(B, H * P, S).transpose(0, 2, 1)  # [B, S, H*P]
    want = reference_phi(torch, p, H, x, conv_act=act, gate=gate, history=hist)
    assert rel_err(rove.selective_phase(x, wts, conv_state=state), want) < 2e-6


def test_phase_reference_differences(rng, torch):
    """The choices the issue measured matter: SiLU, the whole-width gate and exp(bias) each
    change phi by far more than float rounding (the old helper hard-wired SiLU)."""
    B, T, H, P, D = 1, 40, 4, 8, 16
    p = reference_params(rng, H, P, D, "low-rank", 4, True, "standard")
    x = randn(rng, B, T, H * D)
    base = reference_phi(torch, p, H, x, gate="standard")
    tsd = {k: torch.from_numpy(v) for k, v in p.items()}  # a state_dict() of tensors
    phi = rove.selective_phase(x, rove.SelectivePhaseWeights.from_reference_state_dict(tsd, H))
    assert rel_err(phi, base) < 2e-6
    silu = rove.selective_phase(
        x, rove.SelectivePhaseWeights.from_reference_state_dict(p, H, conv_act="silu"))
    assert rel_err(silu, base) > 0.05


def test_phase_pieces_torch_strides(rng, torch):
    B, T, H, P, D = 2, 37, 3, 8, 8
    p = reference_params(rng, H, P, D, "low-rank", 4, True, "gla")
    wts = rove.SelectivePhaseWeights.from_reference_state_dict(p, H, conv_act="silu")
    x = randn(rng, B, T, H * D)
    phi = rove.selective_phase(x, wts)
    state = wts.new_state(B)  # pieces with a carried conv state == one call, bit for bit
    assert state.shape == (B, H, P, 3)
    pieces = [rove.selective_phase(x[:, a:b], wts, conv_state=state)
              for a, b in ((0, 5), (5, 6), (6, 7), (7, 37))]
    assert np.array_equal(np.concatenate(pieces, 1), phi)
    tphi = rove.selective_phase(torch.from_numpy(x), wts)
    assert isinstance(tphi, torch.Tensor) and np.array_equal(tphi.numpy(), phi)
    strided = np.zeros((B, T, 2 * H * D), np.float32)[..., :H * D]  # a token stride, no copy
    strided[...] = x
    assert np.array_equal(rove.selective_phase(strided, wts), phi)
    assert np.array_equal(rove.selective_phase(x[0], wts), phi[0])  # 2-D: no batch
    st2 = wts.new_state(1)[0]  # the docstring's recipe for a 2-D x's state
    pieces2 = [rove.selective_phase(x[0, a:b], wts, conv_state=st2) for a, b in ((0, 9), (9, 37))]
    assert np.array_equal(np.concatenate(pieces2, 0), phi[0])
    skip = rove.SelectivePhaseWeights.from_reference_state_dict(
        {k: v for k, v in p.items() if k != "phi_conv1d.weight"}, H)
    assert skip.skip_conv and skip.state_len == 1
    full = rove.selective_phase(x, skip)
    st = skip.new_state(B)
    steps = [rove.selective_phase(x[:, t:t + 1], skip, conv_state=st) for t in range(T)]
    assert np.array_equal(np.concatenate(steps, 1), full)  # decode == one call
    # a half-precision model's x: the float32 phi of the widened values, bit for bit
    xh = torch.from_numpy(x).bfloat16()
    got = rove.selective_phase(xh, wts)
    assert got.dtype == torch.float32 and torch.equal(got, rove.selective_phase(xh.float(), wts))
    assert np.array_equal(rove.selective_phase(x.astype(np.float16), wts),
                          rove.selective_phase(x.astype(np.float16).astype(np.float32), wts))
    with pytest.raises(RuntimeError, match="requires grad"):  # still no backward
        rove.selective_phase(xh.requires_grad_(), wts)


def test_phase_errors(rng):
    H, P, D = 2, 4, 6
    p = reference_params(rng, H, P, D, "low-rank", 4, False, None)
    wts = rove.SelectivePhaseWeights.from_reference_state_dict(p, H)
    x = randn(rng, 2, 5, H * D)
    with pytest.raises(ValueError, match="features"):
        rove.selective_phase(x[..., :-1], wts)
    with pytest.raises(ValueError, match="contiguous|shape"):
        rove.selective_phase(x, wts, conv_state=np.zeros((2, H, 3, P), np.float32).transpose(0, 1, 3, 2))
    with pytest.raises(ValueError, match="unknown keys"):
        rove.SelectivePhaseWeights.from_reference_state_dict({**p, "q_proj.weight": x[0]}, H)
    down, up, cw = p["phi_proj.0.weight"], p["phi_proj.1.weight"], p["phi_conv1d.weight"].reshape(H, P, 4)
    with pytest.raises(ValueError, match="either"):  # both projections
        rove.SelectivePhaseWeights(H, P, proj_down=down, proj_up=up, proj_w=randn(rng, H, P, D), conv_w=cw)
    with pytest.raises(ValueError, match="skip_conv"):
        rove.SelectivePhaseWeights(H, P, proj_down=down, proj_up=up, conv_w=cw, skip_conv=True)
    with pytest.raises(ValueError, match="without a gate"):
        rove.SelectivePhaseWeights(H, P, proj_down=down, proj_up=up, conv_w=cw, gate_b=randn(rng, H))
    with pytest.raises(ValueError, match="shape"):
        rove.SelectivePhaseWeights(H, P, proj_down=down, proj_up=up[:-1], conv_w=cw)
    with pytest.raises(ValueError, match="conv_act"):
        rove.SelectivePhaseWeights(H, P, proj_down=down, proj_up=up, conv_w=cw, conv_act="gelu")
    with pytest.raises(ValueError, match="norm_eps"):
        rove.SelectivePhaseWeights(H, P, proj_down=down, proj_up=up, conv_w=cw, norm_eps=0.0)
    with pytest.raises(ValueError, match="non-finite"):
        rove.SelectivePhaseWeights(H, P, proj_down=down * np.nan, proj_up=up, conv_w=cw)
    with pytest.raises(AttributeError):
        wts.gate = "gla"


def test_reference_rotation_is_rope_not_rove(rng, torch):
    """The Selective-RoPE reference rotates q and k only (HALF pairing, whole head) before
    causal attention; rove's default rotate is RoVE (also V and O). A rotate="rope" plan
    with explicit angles reproduces the reference; the default gives another answer."""
    B, T, H, d = 1, 20, 2, 16
    q, k, v = randn(rng, B, T, H, d), randn(rng, B, T, H, d), randn(rng, B, T, H, d)
    ang, _ = rove.selective_angles(rng.uniform(0, 3, (B, T, H, d // 2)).astype(np.float32))
    a = torch.from_numpy(ang)
    cos, sin = torch.cos(a), torch.sin(a)

    def rot(x):  # the reference: [x0 cos - x1 sin, x0 sin + x1 cos], x0 the first half
        x = torch.from_numpy(x).double()
        x0, x1 = x[..., :d // 2], x[..., d // 2:]
        return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1)

    want = torch.nn.functional.scaled_dot_product_attention(
        rot(q).transpose(1, 2), rot(k).transpose(1, 2), torch.from_numpy(v).double().transpose(1, 2),
        is_causal=True).transpose(1, 2).numpy()
    rope = rove.attention(q, k, v, rotate="rope", q_angles=ang, kv_angles=ang)
    assert rel_err(rope, want) < 2e-5
    default = rove.attention(q, k, v, q_angles=ang, kv_angles=ang)
    assert rel_err(default, want) > 0.05


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
    # an out= over an input is named as such (not blamed on g), before anything is written
    tv = torch.from_numpy(v.copy())
    with pytest.raises(rove.RoveInvalidArgument, match="out= overlaps v"):
        rove.gla(*(torch.from_numpy(x) for x in (q, k)), tv, torch.from_numpy(g), out=tv)
    assert np.array_equal(tv.numpy(), v)
    # an out= whose memory does not hold its values (a lazily negated view) is refused:
    # its resolved copy would take the result and the caller's tensor stay as it was
    neg = torch.zeros(B, T, H, V, dtype=torch.complex64).conj().imag
    assert neg.is_neg()
    with pytest.raises(ValueError, match="lazily negated"):
        rove.gla(*(torch.from_numpy(x) for x in (q, k, v, g)), out=neg)
    with pytest.raises(TypeError, match="k is a numpy array and q a torch tensor"):
        rove.gla(torch.from_numpy(q), k, v, g)
    # numpy float64 angles with torch inputs, with and without gradients (as
    # rove.attention takes them): the values of torch angles
    ang = rng.uniform(-3, 3, size=(B, T, H, K // 2))
    tq = torch.from_numpy(q).requires_grad_(True)
    tkvg = [torch.from_numpy(x) for x in (k, v, g)]
    want = rove.gla(tq.detach(), *tkvg, angles=torch.from_numpy(ang))
    assert torch.equal(rove.gla(tq.detach(), *tkvg, angles=ang), want)
    got = rove.gla(tq, *tkvg, angles=ang)
    got.sum().backward()
    assert torch.equal(got.detach(), want) and tq.grad is not None


def test_gla_without_angles_takes_any_key_dim(rng):
    """rove.gla without angles rotates nothing, whatever rotate says (it applies only with
    angles): an odd key_dim, or value_dim < key_dim with rotate="rove", work; a GLAPlan
    that must rotate says why it cannot."""
    for K, V, rot in ((9, 9, "rope"), (8, 4, "rove")):
        q, k = randn(rng, 1, 6, 2, K), randn(rng, 1, 6, 2, K)
        v, g = randn(rng, 1, 6, 2, V), -rng.uniform(0, 1, size=(1, 6, 2, K)).astype(np.float32)
        want = rove.gla(q, k, v, g, rotate="none")
        assert np.array_equal(rove.gla(q, k, v, g, rotate=rot), want)
        assert np.array_equal(rove.gla_recurrent(q, k, v, g, rotate=rot),
                              rove.gla_recurrent(q, k, v, g, rotate="none"))
    with pytest.raises(rove.RoveInvalidArgument, match="rotary_dim 9 is odd"):
        rove.GLAPlan(2, 9, 9)
    with pytest.raises(rove.RoveInvalidArgument, match="value_dim 4 < rotary_dim 8"):
        rove.GLAPlan(2, 8, 4, rotate="rove")


def test_selective_angles_numpy_temp_with_grad(rng, torch):
    """The differentiable selective_angles takes numpy float64 temp / carry (as
    selective_temperatures returns them, and as the no-grad path takes them): the same
    angles, gradients for phi; numpy phi with a learned temp says phi must be torch."""
    phi = torch.from_numpy(randn(rng, 1, 5, 2, 4))
    temp = rove.selective_temperatures(4)
    carry = rng.uniform(-1, 1, size=(1, 2, 4))
    want, wc = rove.selective_angles(phi, temp, carry)
    p = phi.clone().requires_grad_(True)
    got, gc = rove.selective_angles(p, temp, carry)
    assert torch.equal(got.detach(), want) and torch.equal(gc.detach(), wc)
    got.sum().backward()
    assert p.grad is not None and p.grad.shape == p.shape
    with pytest.raises(TypeError, match="phi must be a torch tensor"):
        rove.selective_angles(phi.numpy(), torch.from_numpy(temp).requires_grad_(True))


@pytest.mark.parametrize("shape", [(2, 0, 2, 3), (0, 2, 3), (1, 4, 0, 3), (1, 4, 2, 0)])
def test_angles_name_an_empty_axis(shape, torch):
    """An empty phi is a ValueError that says so (it was librove's bare "invalid argument"),
    with and without grad."""
    for phi in (torch.zeros(shape), torch.zeros(shape, requires_grad=True)):
        with pytest.raises(ValueError, match="phi has an empty axis"):
            rove.selective_angles(phi)


def test_angles_refuse_non_finite_temp_and_carry(rng, monkeypatch):
    """A NaN or inf phi, temp or carry is a ValueError naming it. librove refuses them
    (test_selective.c: INVALID_ARGUMENT, outputs untouched); Python looks for the culprit
    only then (a check before every call cost half of a decode step's call)."""
    phi = randn(rng, 1, 6, 2, 4)
    calls = []
    real = rove._lib.lib.rove_selective_angles

    def spy(*a):
        st = real(*a)
        calls.append(st)
        return st
    monkeypatch.setattr(rove._lib.lib, "rove_selective_angles", spy)
    for name, kw in (("temp", dict(temp=np.array([1.0, np.nan, 1.0, 1.0]))),
                     ("carry", dict(carry=np.full((1, 2, 4), np.inf))),
                     ("phi", dict())):
        with pytest.raises(ValueError, match=f"{name} has non-finite values"):
            rove.selective_angles(np.where(np.arange(4) == 0, np.nan, phi).astype(np.float32)
                                  if name == "phi" else phi, **kw)
        assert calls.pop() == rove._lib.ERR_INVALID_ARGUMENT


# ---- packed sequences (cu_seqlens) through the whole Selective RoPE + GLA road ------------
PACKED_LENS = (9, 0, 40, 1, 77)


def test_packed_selective_rope_equals_each_sequence(rng, torch):
    """Phase network -> angles -> GLA over packed sequences (cu_seqlens, fla's varlen):
    phi, the conv states, the angles, the carries, GLA's output and final states equal the
    calls on each sequence alone, bit for bit; the gradients of the angles' and GLA's
    inputs (phi, carry, q, k, v, g, initial state) equal the per-sequence calls' (d temp
    summed), through torch autograd."""
    H, P, D = 2, 4, 6
    K, V = 2 * P, 8
    N, T = len(PACKED_LENS), sum(PACKED_LENS)
    cu = np.concatenate([[0], np.cumsum(PACKED_LENS)]).astype(np.int64)
    p = reference_params(rng, H, P, D, "low-rank", 4, True, "gla")
    wts = rove.SelectivePhaseWeights.from_reference_state_dict(p, H, conv_act="silu")
    x = randn(rng, T, H * D)
    st0 = rng.uniform(-1, 1, (N, H, P, wts.state_len)).astype(np.float32)
    st = st0.copy()
    phi = rove.selective_phase(x, wts, conv_state=st, cu_seqlens=cu)
    carry0 = rng.uniform(-3, 3, (N, H, P))
    f = lambda *s: torch.from_numpy(randn(rng, *s))  # noqa: E731
    q, k, v = f(T, H, K), f(T, H, K), f(T, H, V)
    g = -torch.rand(T, H, K, generator=torch.Generator().manual_seed(3))
    s0 = f(N, H, K, V)
    dout, dfin = f(T, H, V), f(N, H, K, V)

    def chain(xs, sl, c0, state0, cu_):
        phi_t, q_, k_, v_, g_ = xs
        ang, cout = rove.selective_angles(phi_t, carry=c0, cu_seqlens=cu_)
        o, fs = rove.gla(q_, k_, v_, g_, angles=ang, initial_state=state0, rotate="rove",
                         return_final_state=True, chunk=16, cu_seqlens=cu_)
        return ang, cout, o, fs

    leaves = [torch.from_numpy(phi).requires_grad_(True)] + \
        [t.clone().requires_grad_(True) for t in (q, k, v, g)]
    c0 = torch.from_numpy(carry0).requires_grad_(True)
    s0p = s0.clone().requires_grad_(True)
    ang, cout, o, fs = chain(leaves, None, c0, s0p, cu)
    ((o * dout).sum() + (fs * dfin).sum() + cout.sum()).backward()
    for i in range(N):
        a, b = int(cu[i]), int(cu[i + 1])
        if a == b:  # empty: states pass through, their gradients are the upstream ones
            assert np.array_equal(st[i], st0[i]) and torch.equal(cout[i].detach(), c0[i].detach())
            assert torch.equal(fs[i].detach(), s0[i]) and torch.equal(s0p.grad[i], dfin[i])
            assert torch.equal(c0.grad[i], torch.ones_like(c0.grad[i]))
            continue
        sti = st0[i:i + 1].copy()
        assert np.array_equal(rove.selective_phase(x[None, a:b], wts, conv_state=sti)[0], phi[a:b])
        assert np.array_equal(sti[0], st[i])
        one = [t.detach()[a:b].clone().requires_grad_(True) for t in leaves]
        c1 = torch.from_numpy(carry0[i:i + 1]).requires_grad_(True)
        s1 = s0[i:i + 1].clone().requires_grad_(True)
        ang1, cout1, o1, fs1 = chain([t[None] for t in one], None, c1, s1, None)
        ((o1[0] * dout[a:b]).sum() + (fs1 * dfin[i:i + 1]).sum() + cout1.sum()).backward()
        assert torch.equal(ang1[0], ang[a:b]) and torch.equal(cout1[0], cout[i])
        assert torch.equal(o1[0], o[a:b]) and torch.equal(fs1[0], fs[i])
        for t1, tp in zip(one, leaves):
            assert torch.equal(t1.grad, tp.grad[a:b])
        assert torch.equal(c1.grad[0], c0.grad[i]) and torch.equal(s1.grad[0], s0p.grad[i])


def test_packed_selective_refusals(rng, torch):
    H, P, D = 2, 4, 6
    p = reference_params(rng, H, P, D, "low-rank", 4, False, None)
    wts = rove.SelectivePhaseWeights.from_reference_state_dict(p, H)
    x = randn(rng, 2, 10, H * D)
    with pytest.raises(ValueError, match="one packed row"):
        rove.selective_phase(x, wts, cu_seqlens=[0, 4, 10])
    with pytest.raises(ValueError, match="ends at 9"):
        rove.selective_phase(x[0], wts, cu_seqlens=[0, 4, 9])
    with pytest.raises(ValueError):  # a state per sequence
        rove.selective_phase(x[0], wts, conv_state=wts.new_state(1), cu_seqlens=[0, 4, 10])
    phi = rng.uniform(0, 1, (10, H, P)).astype(np.float32)
    with pytest.raises(ValueError, match="not decrease"):
        rove.selective_angles(phi, cu_seqlens=[0, 5, 4, 10])
    with pytest.raises(ValueError):
        rove.selective_angles(phi, carry=np.zeros((1, H, P)), cu_seqlens=[0, 4, 10])
    with pytest.raises(ValueError, match="one packed row"):
        rove.selective_angles(torch.from_numpy(np.stack([phi, phi])).requires_grad_(True),
                              cu_seqlens=[0, 4, 10])
