# SPDX-License-Identifier: MIT
"""rove.attention / rove.Plan against the float64 NumPy reference of DESIGN.md §1, the C
oracle and (no rotation) PyTorch SDPA in float64; numpy and torch, both layouts."""
import math

import numpy as np
import pytest

import rove
import oracle as O
from conftest import randn
from reference import K, O as ROT_O, Q, V, ref_attention, rel_err

TOL = 2e-5  # fp32 vs double, relative to max |out| (DESIGN.md §4)


def run_ref(q, k, v, rope=None, rotate="rove", **kw):
    rope = rope or rove.RopeConfig()
    w, m = rove.inv_freq(rope, q.shape[-1])
    flags = {"rove": Q | K | V | ROT_O, "rope": Q | K, "none": 0}.get(rotate, rotate)
    return ref_attention(q, k, v, w=w, m=m, rotate=flags, pairing=rope.pairing,
                         r=rope.rotary_dim or None, **kw)


CASES = [  # (B, Lq, Lk, H, Hk, d, kwargs)
    (1, 64, 64, 4, 4, 64, {}),
    (2, 37, 37, 4, 2, 32, {"rotate": "rope"}),
    (1, 50, 50, 6, 1, 64, {"rotate": "none"}),                       # MQA
    (2, 5, 70, 4, 2, 64, {}),                                        # chunk: bottom-right
    (1, 1, 90, 8, 2, 128, {}),                                       # decode row
    (1, 40, 40, 2, 2, 64, {"causal": False}),
    (1, 60, 60, 4, 2, 64, {"window": 16}),
    (1, 60, 60, 4, 4, 64, {"window": 9, "causal": False}),
    (1, 33, 33, 2, 1, 64, {"softcap": 5.0, "scale": 0.3}),
    (1, 48, 48, 4, 2, 80, {"rotate": Q | K | V}),
    (1, 48, 48, 4, 2, 64, {"rotate": ROT_O | Q | K}),
    (1, 48, 48, 2, 2, 96, {"rope": rove.RopeConfig(rotary_dim=32)}),
    (1, 48, 48, 2, 2, 64, {"rope": rove.RopeConfig(rotary_dim=48, pairing="interleaved")}),
    (2, 40, 40, 4, 2, 64, {"rope": rove.RopeConfig(scaling="yarn", factor=8.0,
                                                     original_max_position=64)}),
    (1, 40, 40, 4, 2, 64, {"rope": rove.RopeConfig(scaling="llama3", factor=8.0,
                                                     original_max_position=32, theta=5e5)}),
]


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_against_reference(rng, case):
    B, Lq, Lk, H, Hk, d, kw = case
    q, k, v = randn(rng, B, Lq, H, d), randn(rng, B, Lk, Hk, d), randn(rng, B, Lk, Hk, d)
    out, lse = rove.attention(q, k, v, return_lse=True, **kw)
    want, want_lse = run_ref(q, k, v, **kw)
    assert out.dtype == np.float32 and out.shape == q.shape and lse.shape == (B, H, Lq)
    assert rel_err(out, want) < TOL
    fin = np.isfinite(want_lse)
    assert np.array_equal(np.isfinite(lse), fin)
    assert np.max(np.abs(lse[fin] - want_lse[fin])) < 1e-4


def test_explicit_positions_and_masked_rows(rng):
    """Any int32 positions, any order, per batch row; rows with no visible key give 0 and
    LSE -inf; 1-D positions are shared by the batch."""
    B, L, H, d = 2, 40, 4, 64
    q, k, v = randn(rng, B, L, H, d), randn(rng, B, L, H, d), randn(rng, B, L, H, d)
    q_pos = rng.integers(-3000, 2 ** 20, size=(B, L)).astype(np.int64)
    kv_pos = np.stack([rng.permutation(L) + 2 ** 20 - 50, rng.permutation(L) - 20])
    q_pos[0, 0] = -(2 ** 31)  # sees nothing causally
    out, lse = rove.attention(q, k, v, q_pos=q_pos, kv_pos=kv_pos, return_lse=True)
    want, want_lse = run_ref(q, k, v, q_pos=q_pos, kv_pos=kv_pos)
    assert rel_err(out, want) < TOL
    assert np.all(out[0, 0] == 0) and np.all(np.isneginf(lse[0, :, 0]))
    assert np.array_equal(np.isneginf(lse), np.isneginf(want_lse))
    shared = rng.integers(0, 500, size=L)
    out1 = rove.attention(q, k, v, q_pos=shared, kv_pos=np.sort(shared).astype(np.int16))
    want1, _ = run_ref(q, k, v, q_pos=shared, kv_pos=np.sort(shared))
    assert rel_err(out1, want1) < TOL


def test_rove_is_shift_invariant(rng):
    q, k, v = randn(rng, 1, 30, 2, 64), randn(rng, 1, 30, 2, 64), randn(rng, 1, 30, 2, 64)
    a = rove.attention(q, k, v)
    b = rove.attention(q, k, v, q_pos=np.arange(30) + 1000, kv_pos=np.arange(30) + 1000)
    assert rel_err(b, a) < 1e-4
    assert rel_err(a, rove.attention(q, k, v, rotate="rope")) > 1e-2  # V/O rotations matter


def test_n1024_gpt2_shape_numpy_and_torch(rng, torch):
    """The headline shape: 12 x 64, n = 1024, causal, RoVE and RoPE."""
    q, k, v = (randn(rng, 1, 1024, 12, 64) for _ in range(3))
    for rotate in ("rove", "rope"):
        want, _ = run_ref(q, k, v, rotate=rotate)
        assert rel_err(rove.attention(q, k, v, rotate=rotate), want) < TOL
        got = rove.attention(*(torch.from_numpy(x) for x in (q, k, v)), rotate=rotate)
        assert isinstance(got, torch.Tensor) and rel_err(got.numpy(), want) < TOL


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("batched", [True, False])
def test_kinds_layouts_ranks(rng, torch, layout, kind, batched):
    B, L, H, Hk, d = 2, 45, 4, 2, 64
    q, k, v = randn(rng, B, L, H, d), randn(rng, B, L, Hk, d), randn(rng, B, L, Hk, d)
    want, want_lse = run_ref(q, k, v)
    if not batched:
        q, k, v, want, want_lse = q[:1], k[:1], v[:1], want[:1], want_lse[:1]
    args = [np.ascontiguousarray(x.transpose(0, 2, 1, 3)) if layout == "bhsd" else x
            for x in (q, k, v)]
    if not batched:
        args = [x[0] for x in args]
    if kind == "torch":
        args = [torch.from_numpy(x) for x in args]
    out, lse = rove.attention(*args, layout=layout, return_lse=True)
    assert isinstance(out, torch.Tensor if kind == "torch" else np.ndarray)
    assert isinstance(lse, type(out)) and lse.dtype == out.dtype
    assert tuple(out.shape) == tuple(args[0].shape)
    o = np.asarray(out)
    if not batched:
        o, lse = o[None], np.asarray(lse)[None]
    if layout == "bhsd":
        o = o.transpose(0, 2, 1, 3)
    assert rel_err(o, want) < TOL
    assert np.max(np.abs(np.asarray(lse) - want_lse)) < 1e-4


def test_against_c_oracle_numpy_and_torch(rng, torch, oracle):
    """NumPy and torch paths against librove's own double oracle (oracle/*.c)."""
    cases = [dict(rotate="rove"), dict(rotate="rope", window=7),
             dict(rotate="rove", softcap=3.0, causal=False,
                  rope=rove.RopeConfig(scaling="yarn", factor=4.0, original_max_position=16,
                                       pairing="interleaved"))]
    for kw in cases:
        B, Lq, Lk, H, Hk, d = 2, 24, 40, 6, 3, 64
        q, k, v = randn(rng, B, Lq, H, d), randn(rng, B, Lk, Hk, d), randn(rng, B, Lk, Hk, d)
        qp = rng.integers(0, 100, size=(B, Lq)).astype(np.int32)
        kp = rng.integers(0, 100, size=(B, Lk)).astype(np.int32)
        plan = rove.Plan(H, Hk, d, **kw)
        want, want_lse = O.attention(oracle, plan, q, k, v, qp, kp)
        for conv in (lambda x: x, torch.from_numpy):
            out, lse = plan.attention(conv(q), conv(k), conv(v), q_pos=conv(qp),
                                      kv_pos=conv(kp), return_lse=True)
            assert rel_err(np.asarray(out), want) < TOL
            fin = np.isfinite(want_lse)
            assert np.max(np.abs(np.asarray(lse)[fin] - want_lse[fin])) < 1e-4
        ref, _ = run_ref(q, k, v, q_pos=qp, kv_pos=kp, **kw)  # the two references agree
        assert rel_err(ref, want) < 1e-12


@pytest.mark.parametrize("lq,lk", [(64, 64), (10, 50)])
def test_no_rotation_equals_torch_sdpa_float64(rng, torch, lq, lk):
    import torch.nn.functional as F
    B, H, Hk, d = 2, 8, 2, 64
    q, k, v = randn(rng, B, H, lq, d), randn(rng, B, Hk, lk, d), randn(rng, B, Hk, lk, d)
    qt, kt, vt = (torch.from_numpy(x) for x in (q, k, v))
    mask = torch.ones(lq, lk, dtype=torch.bool).tril(diagonal=lk - lq)  # bottom-right
    want = F.scaled_dot_product_attention(
        qt.double(), kt.double().repeat_interleave(H // Hk, 1),
        vt.double().repeat_interleave(H // Hk, 1), attn_mask=mask)
    got = rove.attention(qt, kt, vt, rotate="none", layout="bhsd")
    assert rel_err(got.numpy(), want.numpy()) < TOL


def test_plan_object(rng):
    p = rove.Plan(8, 2, 64, rotate="rope", window=5, softcap=2.5, scale=0.2,
                  rope=rove.RopeConfig(rotary_dim=32), threads=1)
    assert p.isa == rove.info()["best_isa"] and p.threads == 1
    assert p.config["rotary_dim"] == 32 and p.config["rotate"] == rove.ROTATE_ROPE
    assert p.window == 5 and math.isclose(p.scale, 0.2, rel_tol=1e-7) and p.softcap == 2.5
    assert rove.Plan(2, 2, 64).scale == np.float32(1 / 8)
    q, k, v = randn(rng, 1, 20, 8, 64), randn(rng, 1, 20, 2, 64), randn(rng, 1, 20, 2, 64)
    want, _ = run_ref(q, k, v, rotate="rope", window=5, softcap=2.5, scale=0.2,
                      rope=rove.RopeConfig(rotary_dim=32))
    assert rel_err(p.attention(q, k, v), want) < TOL
    scalar = rove.Plan(8, 2, 64, isa="scalar")
    assert scalar.isa == "scalar"
    assert rel_err(scalar.attention(q, k, v), run_ref(q, k, v)[0]) < TOL


def test_plan_cache_reuses_plans():
    rove.clear_plan_cache()
    a = rove.get_plan(4, 2, 64, rotate="rope")
    assert rove.get_plan(4, 2, 64, rotate="rope") is a
    assert rove.get_plan(4, 2, 64, rotate="rove") is not a
    assert rove.get_plan(4, 2, 64, rotate="rope", rope=rove.RopeConfig(theta=5e5)) is not a


def test_huge_values_headroom(rng):
    """rove.h / DESIGN.md §1: the output is finite while the sum of |v| over a row's visible
    keys stays below FLT_MAX / 55 on every ISA this CPU runs (the AVX tiles' lazy maximum
    lets a row's weights reach e^4). V rows of 5e33 (1000 keys: a sum of 5e36) with logits
    spread over [0, 4) give a finite output, equal to the float64 answer; no rotation, so
    V enters unrotated."""
    isas = rove.info()["available_isas"]
    assert "scalar" in isas
    for isa in isas:
        _huge_values(rng, isa)


def _huge_values(rng, isa):
    n, d = 1000, 16
    q = np.zeros((1, 1, 1, d), np.float32)
    q[..., 0] = 1.0
    k = np.zeros((1, n, 1, d), np.float32)
    k[0, :, 0, 0] = np.linspace(0, 4 * 3.999, n, dtype=np.float32)  # logit = k / sqrt(16)
    v = (rng.uniform(0.5, 1.0, (1, n, 1, d)) * 5e33).astype(np.float32)
    p = rove.Plan(1, 1, d, rotate="none", causal=False, isa=isa)
    out = p.attention(q, k, v)
    s = k[0, :, 0, 0].astype(np.float64) / 4.0
    w = np.exp(s - s.max())
    want = (w[:, None] * v[0, :, 0].astype(np.float64)).sum(0) / w.sum()
    assert np.isfinite(out).all(), isa
    assert np.max(np.abs(out[0, 0, 0] - want)) <= 1e-5 * np.max(np.abs(want)), isa


def test_threads_bitwise_identical(rng):
    q, k, v = randn(rng, 2, 300, 4, 64), randn(rng, 2, 300, 2, 64), randn(rng, 2, 300, 2, 64)
    one = rove.attention(q, k, v, threads=1, return_lse=True)
    two = rove.attention(q, k, v, threads=2, return_lse=True)
    assert np.array_equal(one[0], two[0]) and np.array_equal(one[1], two[1])
    dec1 = rove.attention(q[:, :1], k, v, threads=1)  # split-KV decode path
    dec2 = rove.attention(q[:, :1], k, v, threads=2)
    assert np.array_equal(dec1, dec2)


def test_selective_angles_in_attention(rng, oracle):
    B, L, H, Hk, d = 1, 30, 4, 2, 64
    q, k, v = randn(rng, B, L, H, d), randn(rng, B, L, Hk, d), randn(rng, B, L, Hk, d)
    ang = rng.uniform(-50, 50, size=(B, L, Hk, d // 2))
    out = rove.attention(q, k, v, q_angles=ang, kv_angles=ang)
    want, _ = run_ref(q, k, v, q_angles=ang, kv_angles=ang)
    assert rel_err(out, want) < TOL
    want_c, _ = O.attention(oracle, rove.get_plan(H, Hk, d), q, k, v, q_angles=ang, kv_angles=ang)
    assert rel_err(out, want_c) < TOL


# ---- rotary placement "last" (DeepSeek MLA: the rotated dims end each head) -------------

def torch_ref_last(torch, q, k, v, w, m, *, r, pairing, rotate, causal=True):
    """float64 torch attention of DESIGN.md §1 with the r rotated dims LAST in each head:
    dims d-r .. d-1 rotate (pairs formed inside that block), dims 0 .. d-r-1 pass through.
    q [B, Lq, H, d], k/v [B, Lk, Hk, d]; default positions (keys 0..Lk-1, queries
    Lk-Lq+i), bottom-right causal mask. Written from the math, independent of reference.py."""
    Q_, K_, V_, O_ = (bool(rotate & f) for f in (rove.ROTATE_Q, rove.ROTATE_K, rove.ROTATE_V,
                                                 rove.ROTATE_O))
    B, Lq, H, d = q.shape
    Lk, Hk = k.shape[1], k.shape[2]
    qt, kt, vt = (torch.from_numpy(np.asarray(x)).double() for x in (q, k, v))
    wt = torch.tensor(np.asarray(w), dtype=torch.float64)
    half = r // 2

    def rot(x, pos, sign, mul=1.0):  # x [B, L, h, d], pos [L]
        t = pos.double()[:, None] * wt[None, :]            # [L, half]
        c, s = torch.cos(t)[None, :, None, :], sign * torch.sin(t)[None, :, None, :]
        y = x.clone()
        blk = x[..., d - r:]
        if pairing == "half":
            a, b = blk[..., :half], blk[..., half:]
            y[..., d - r:d - half] = (a * c - b * s) * mul
            y[..., d - half:] = (a * s + b * c) * mul
        else:
            a, b = blk[..., 0::2], blk[..., 1::2]
            out = torch.stack(((a * c - b * s) * mul, (a * s + b * c) * mul), dim=-1)
            y[..., d - r:] = out.flatten(-2)
        return y

    kpos, qpos = torch.arange(Lk), torch.arange(Lq) + (Lk - Lq)
    if Q_:
        qt = rot(qt, qpos, 1.0, m)
    if K_:
        kt = rot(kt, kpos, 1.0, m)
    if V_:
        vt = rot(vt, kpos, 1.0)
    g = H // Hk
    kt, vt = kt.repeat_interleave(g, 2), vt.repeat_interleave(g, 2)
    s = torch.einsum("bqhd,bkhd->bhqk", qt, kt) / math.sqrt(d)
    if causal:
        s = s.masked_fill(kpos[None, :] > qpos[:, None], float("-inf"))
    o = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), vt)
    if O_:
        o = rot(o, qpos, -1.0)
    return o.numpy()


LAST_CASES = [  # (B, Lq, Lk, H, Hk, d, r, pairing, rotate, scaling)
    (1, 64, 64, 4, 2, 64, 16, "interleaved", "rove", None),
    (2, 37, 37, 4, 4, 96, 32, "half", "rope", None),
    (1, 1, 300, 8, 2, 192, 64, "interleaved", "rope", "yarn"),   # DeepSeek 128 + 64, decode
    (1, 5, 80, 4, 1, 192, 64, "interleaved", "rove", "yarn"),
    (1, 40, 40, 2, 2, 64, 62, "half", rove.ROTATE_Q | rove.ROTATE_K | rove.ROTATE_V, None),
]


@pytest.mark.parametrize("case", LAST_CASES, ids=[str(i) for i in range(len(LAST_CASES))])
def test_placement_last_against_torch_float64(rng, torch, case):
    B, Lq, Lk, H, Hk, d, r, pairing, rotate, scaling = case
    kw = dict(rotary_dim=r, pairing=pairing, placement="last")
    if scaling == "yarn":  # m != 1: only the rotated (last) dims of q and k are scaled
        kw.update(scaling="yarn", factor=4.0, original_max_position=64)
    rope = rove.RopeConfig(**kw)
    w, m = rove.inv_freq(rope, d)
    flags = {"rove": rove.ROTATE_ROVE, "rope": rove.ROTATE_ROPE}.get(rotate, rotate)
    q, k, v = randn(rng, B, Lq, H, d), randn(rng, B, Lk, Hk, d), randn(rng, B, Lk, Hk, d)
    want = torch_ref_last(torch, q, k, v, w, m, r=r, pairing=pairing, rotate=flags)
    for conv in (lambda x: x, torch.from_numpy):
        got = rove.attention(conv(q), conv(k), conv(v), rope=rope, rotate=rotate)
        assert rel_err(np.asarray(got), want) < TOL
    first = rove.attention(q, k, v, rope=rove.RopeConfig(**dict(kw, placement="first")),
                           rotate=rotate)
    assert rel_err(first, want) > 1e-3  # the placement is honoured, not ignored


def test_placement_last_rotate_and_cache(rng, torch):
    """rove.rotate and the KV cache with placement 'last' against the same reference."""
    B, L, H, Hk, d, r = 1, 50, 4, 2, 64, 16
    rope = rove.RopeConfig(rotary_dim=r, pairing="half", placement="last")
    w, m = rove.inv_freq(rope, d)
    q, k, v = randn(rng, B, L, H, d), randn(rng, B, L, Hk, d), randn(rng, B, L, Hk, d)
    t = np.arange(L)[:, None] * np.asarray(w)[None, :]
    c, s = np.cos(t)[None, :, None, :], np.sin(t)[None, :, None, :]
    x = q.astype(np.float64)
    a, b = x[..., d - r:d - r // 2], x[..., d - r // 2:]
    want = x.copy()
    want[..., d - r:d - r // 2], want[..., d - r // 2:] = a * c - b * s, a * s + b * c
    got = rove.rotate(q, rope=rope)
    assert np.array_equal(got[..., :d - r], q[..., :d - r])  # the nope dims untouched
    assert rel_err(got, want) < 1e-6
    plan = rove.Plan(H, Hk, d, rope=rope)
    cache = rove.KVCache(plan, B, L)
    cache.append(k[:, :30], v[:, :30])
    cache.append(k[:, 30:], v[:, 30:])
    out = cache.attention(q[:, -3:])
    ref = torch_ref_last(torch, q[:, -3:], k, v, w, m, r=r, pairing="half",
                         rotate=rove.ROTATE_ROVE)
    assert rel_err(out, ref) < TOL


@pytest.mark.parametrize("causal", [True, False])
def test_window_is_flash_attn_window_size_minus_one(rng, torch, causal):
    """window=W (the docstring's rule) equals SDPA under flash-attn's window_size=(W - 1, 0)
    mask, bottom-right aligned ((W - 1, W - 1) not causal), and not (W, 0)."""
    F = torch.nn.functional
    Lq, Lk, H, d, W = 6, 13, 2, 16, 4
    q, k, v = (torch.from_numpy(randn(rng, 1, L, H, d)) for L in (Lq, Lk, Lk))
    i = torch.arange(Lq)[:, None] + Lk - Lq
    j = torch.arange(Lk)[None]

    def sdpa(left, right):
        mask = (j >= i - left) & (j <= i + right)
        x = [t.transpose(1, 2).double() for t in (q, k, v)]
        return F.scaled_dot_product_attention(*x, attn_mask=mask).transpose(1, 2)

    got = rove.attention(q, k, v, rotate="none", window=W, causal=causal).double()
    right = 0 if causal else W - 1
    assert (got - sdpa(W - 1, right)).abs().max() < 1e-5
    assert (got - sdpa(W, right if causal else W)).abs().max() > 1e-2
