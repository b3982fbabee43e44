# SPDX-License-Identifier: MIT
"""rove.KVCache: prefill + decode equal full attention, positions, shift, truncate, reset."""
import numpy as np
import pytest

import rove
import torch
from conftest import randn
from reference import rel_err
from test_attention import TOL, run_ref


def make(rng, B=2, L=48, H=4, Hk=2, d=64):
    return randn(rng, B, L, H, d), randn(rng, B, L, Hk, d), randn(rng, B, L, Hk, d)


@pytest.mark.parametrize("rotate", ["rove", "rope"])
def test_prefill_then_decode_equals_full_attention(rng, rotate):
    q, k, v = make(rng)
    B, L, H, d = q.shape
    plan = rove.Plan(H, k.shape[2], d, rotate=rotate)
    cache = rove.KVCache(plan, B, 64)
    assert len(cache) == 0 and cache.capacity == 64 and cache.batch == B
    want, want_lse = run_ref(q, k, v, rotate=rotate)
    n0 = 30
    cache.append(k[:, :n0], v[:, :n0])
    out, lse = cache.attention(q[:, :n0], return_lse=True)
    assert rel_err(out, want[:, :n0]) < TOL
    assert np.max(np.abs(lse - want_lse[:, :, :n0])) < 1e-4
    for t in range(n0, L):  # decode: one token at a time
        cache.append(k[:, t:t + 1], v[:, t:t + 1])
        assert rel_err(cache.attention(q[:, t:t + 1]), want[:, t:t + 1]) < TOL
    assert len(cache) == L
    assert np.array_equal(cache.positions(), np.broadcast_to(np.arange(L), (B, L)))


def test_torch_bhsd_and_explicit_positions(rng, torch):
    q, k, v = make(rng, B=1, L=20)
    pos = (np.arange(20) * 3 + 100).astype(np.int32)
    plan = rove.Plan(4, 2, 64)
    cache = rove.KVCache(plan, 1, 20)
    tk, tv = (torch.from_numpy(x).transpose(1, 2) for x in (k, v))  # HF-style bhsd views
    cache.append(tk, tv, pos=torch.from_numpy(pos), layout="bhsd")
    tq = torch.from_numpy(q).transpose(1, 2)
    out = cache.attention(tq, q_pos=pos, layout="bhsd")
    assert isinstance(out, torch.Tensor) and out.shape == tq.shape
    want, _ = run_ref(q, k, v, q_pos=pos[None], kv_pos=pos[None])
    assert rel_err(out.transpose(1, 2).numpy(), want) < TOL
    assert np.array_equal(cache.positions()[0], pos)
    out3 = cache.attention(q[0], q_pos=pos)  # 3-D q for a batch-1 cache
    assert rel_err(out3, want[0]) < TOL


def test_shift_truncate_reset(rng):
    q, k, v = make(rng, B=1, L=40)
    plan = rove.Plan(4, 2, 64)
    a = rove.KVCache(plan, 1, 40)
    a.append(k, v)
    a.shift(10, 40, 500)  # tokens 10.. now sit at 510..
    pos = a.positions()[0]
    assert np.array_equal(pos[:10], np.arange(10)) and np.array_equal(pos[10:], np.arange(510, 540))
    b = rove.KVCache(plan, 1, 40)
    b.append(k, v, pos=pos)
    qp = np.arange(530, 540)
    assert rel_err(a.attention(q[:, -10:], q_pos=qp), b.attention(q[:, -10:], q_pos=qp)) < 1e-5
    want, _ = run_ref(q[:, -10:], k, v, q_pos=qp[None], kv_pos=pos[None])
    assert rel_err(a.attention(q[:, -10:], q_pos=qp), want) < TOL
    a.truncate(25)
    assert len(a) == 25
    a.append(k[:, 25:], v[:, 25:], pos=np.arange(25, 40))  # a rejected draft replaced
    c = rove.KVCache(plan, 1, 40)
    c.append(k[:, :10], v[:, :10])
    c.append(k[:, 10:25], v[:, 10:25], pos=np.arange(510, 525))
    c.append(k[:, 25:], v[:, 25:], pos=np.arange(25, 40))
    assert rel_err(a.attention(q[:, :5], q_pos=np.arange(5) + 30),
                   c.attention(q[:, :5], q_pos=np.arange(5) + 30)) < 1e-5
    a.reset()
    assert len(a) == 0 and a.positions().shape == (1, 0)
    with pytest.raises(ValueError, match="empty"):
        a.attention(q[:, :1])


def test_errors(rng):
    q, k, v = make(rng, B=2, L=10)
    plan = rove.Plan(4, 2, 64)
    c = rove.KVCache(plan, 2, 12)
    c.append(k, v)
    with pytest.raises(rove.RoveSizeOverflow) as e:
        c.append(k, v)
    assert isinstance(e.value, OverflowError) and "capacity 12" in str(e.value)
    assert len(c) == 10  # unchanged
    with pytest.raises(ValueError, match="expected"):
        c.append(k[:1], v[:1])  # batch 1 into a batch-2 cache
    with pytest.raises(ValueError, match="batch"):
        c.attention(q[:1])
    with pytest.raises(ValueError, match="start <= end"):
        c.shift(5, 11, 1)
    with pytest.raises(ValueError, match="truncate"):
        c.truncate(11)
    with pytest.raises(TypeError, match="kv_pos"):  # the cache holds the key positions
        c.attention(q, kv_pos=np.arange(10))
    with pytest.raises(TypeError, match="rove.Plan"):
        rove.KVCache("plan", 1, 4)
    with pytest.raises(ValueError, match="capacity"):
        rove.KVCache(plan, 1, 0)
    with pytest.raises(rove.RoveInvalidArgument, match="12 query rows over 10 cached tokens"):
        c.attention(np.concatenate([q, q[:, :2]], axis=1))  # default q_pos: the last 12
    # positions past int32: named as such, not as the capacity
    p = rove.KVCache(plan, 1, 4)
    p.append(k[:1, :1], v[:1, :1], pos=[2 ** 31 - 1])
    with pytest.raises(rove.RoveSizeOverflow, match="int32") as e:
        p.append(k[:1, :1], v[:1, :1])
    assert "capacity" not in str(e.value) and len(p) == 1
    with pytest.raises(rove.RoveSizeOverflow, match="leave int32"):
        p.shift(0, 1, 1)
    # the plan (which C borrows) and the batch are fixed: reassigning them would free the
    # plan under the cache or make Python size arrays the C cache does not have
    for name, value in (("plan", rove.Plan(4, 2, 64)), ("batch", 1)):
        with pytest.raises(AttributeError):
            setattr(c, name, value)
    assert c.plan is plan and c.batch == 2


def test_angle_cache(rng):
    q, k, v = make(rng, B=1, L=24)
    ang = rng.uniform(-30, 30, size=(1, 24, 2, 32))
    plan = rove.Plan(4, 2, 64)
    c = rove.KVCache(plan, 1, 32)
    c.append_angles(k[:, :16], v[:, :16], ang[:, :16])
    c.append_angles(k[:, 16:], v[:, 16:], ang[:, 16:])
    got = c.attention(q[:, -8:], q_angles=ang[:, -8:])
    want = rove.attention(q[:, -8:], k, v, q_angles=ang[:, -8:], kv_angles=ang)
    assert rel_err(got, want) < 1e-5
    with pytest.raises(rove.RoveInvalidArgument):
        c.append(k[:, :1], v[:, :1])  # a position append into an angle cache
    with pytest.raises(rove.RoveUnsupported, match="cannot be shifted"):
        c.shift(0, 24, 3)  # no R_delta for tokens rotated by angles
    with pytest.raises(rove.RoveInvalidArgument, match="give q_angles"):
        c.attention(q[:, -1:])


def test_append_angles_refuses_non_finite_angles(rng):
    """librove refuses them (nothing appended); the message names the angles."""
    plan = rove.Plan(4, 2, 16)
    c = rove.KVCache(plan, 1, 8)
    k = randn(rng, 1, 3, 2, 16)
    ang = rng.uniform(-3, 3, (1, 3, 2, 8))
    c.append_angles(k, k, ang)
    for bad in (np.nan, np.inf):
        a2 = ang.copy()
        a2[0, 1, 1, 5] = bad
        with pytest.raises(ValueError, match="angles has non-finite values"):
            c.append_angles(k, k, a2)
        assert len(c) == 3


def test_an_empty_append_stores_nothing():
    """append() of n = 0 tokens is a no-op (transformers' caches take an empty update; it
    raised "expected [.., n > 0, ..]"): the length, the kind of an empty cache and the
    results stay; the shapes and positions of the empty update are still checked."""
    plan = rove.Plan(4, 2, 16)
    cache = rove.KVCache(plan, 2, 32)
    e = torch.zeros(2, 0, 2, 16)
    cache.append(e, e)
    cache.append(e, e, pos=np.zeros((2, 0), np.int64))
    cache.append_angles(e, e, np.zeros((2, 0, 2, 8)))  # the kind stays open
    assert len(cache) == 0
    with pytest.raises(ValueError, match="pos has shape"):
        cache.append(e, e, pos=np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="expected"):
        cache.append(e, torch.zeros(2, 0, 1, 16))
    k, v, q = torch.randn(2, 5, 2, 16), torch.randn(2, 5, 2, 16), torch.randn(2, 1, 4, 16)
    cache.append(k, v)
    want = cache.attention(q)
    cache.append(e, e)
    assert len(cache) == 5
    assert torch.equal(cache.attention(q), want)
    with pytest.raises(rove.RoveInvalidArgument, match="takes no angles"):  # a kind mix
        cache.append_angles(e, e, np.zeros((2, 0, 2, 8)))
    angled = rove.KVCache(plan, 1, 8)
    angled.append_angles(k[:1], v[:1], np.zeros((1, 5, 2, 8)))
    with pytest.raises(rove.RoveInvalidArgument, match="only append_angles"):
        angled.append(e[:1], e[:1])
