# SPDX-License-Identifier: MIT
"""librove writes a caller's torch tensors in place through their data pointers (out=,
rotate(inplace=True), paged_store's pools, gla's out=), which torch does not see. Each such
write bumps the tensor's version counter, so that a graph which saved the tensor refuses a
later backward ("modified by an inplace operation"), as after tensor.copy_(...), instead of
differentiating with the new values. A call that fails writes nothing and bumps nothing."""
import numpy as np
import pytest

import rove
from conftest import randn


def _saved_then(torch, buf, write):
    """A graph that saves buf, then write(); returns whether backward still runs."""
    w = torch.ones(buf.shape, requires_grad=True)
    y = (w * buf).sum()
    write()
    try:
        y.backward()
    except RuntimeError as e:
        assert "inplace" in str(e)
        return False
    return True


def test_writes_bump_the_version(rng, torch):
    H, HK, D, T = 4, 2, 64, 5
    q = torch.from_numpy(randn(rng, 1, T, H, D))
    k = torch.from_numpy(randn(rng, 1, 40, HK, D))
    v = torch.from_numpy(randn(rng, 1, 40, HK, D))
    # rove.attention(out=)
    out = torch.empty(1, T, H, D)
    assert not _saved_then(torch, out, lambda: rove.attention(q, k, v, out=out))
    # attention_varlen(out=)
    cu = np.array([0, 2, T], np.int32)
    cuk = np.array([0, 20, 40], np.int32)
    out3 = torch.empty(T, H, D)
    assert not _saved_then(torch, out3, lambda: rove.attention_varlen(
        q[0], k[0], v[0], cu, cuk, out=out3))
    # PagedKVCache.attention(out=) and paged_attention(out=)
    plan = rove.Plan(H, HK, D)
    c = rove.PagedKVCache(plan, n_blocks=8, block_size=16)
    s = c.new_sequence()
    c.append(s, k[0], v[0])
    assert not _saved_then(torch, out3, lambda: c.attention([s], q[0], out=out3))
    pool = c.view()
    pk, pv = torch.from_numpy(np.array(pool.k)), torch.from_numpy(np.array(pool.v))
    table = c.block_table(s)[None]
    assert not _saved_then(torch, out3, lambda: rove.paged_attention(
        q[0], pk, pv, table, [40], plan=plan, pos_pool=np.array(pool.pos), out=out3))
    # paged_store: the pools
    slots = np.array([3], np.int64)
    assert not _saved_then(torch, pk, lambda: rove.paged_store(
        k[0, :1], v[0, :1], pk, pv, slots, [3], plan=plan))
    # rotate(inplace=True)
    x = torch.from_numpy(randn(rng, 1, 6, 2, 16))
    assert not _saved_then(torch, x, lambda: rove.rotate(x, inplace=True))
    # gla(out=)
    B, Tg, Hg, K, V = 1, 9, 2, 8, 8
    gq, gk = (torch.from_numpy(randn(rng, B, Tg, Hg, K)) for _ in range(2))
    gv = torch.from_numpy(randn(rng, B, Tg, Hg, V))
    g = torch.from_numpy(-np.abs(randn(rng, B, Tg, Hg, K)))
    gout = torch.empty(B, Tg, Hg, V)
    assert not _saved_then(torch, gout, lambda: rove.gla(gq, gk, gv, g, out=gout))
    # a fresh output is nobody's saved tensor; without a write the graph still runs
    assert _saved_then(torch, out3, lambda: rove.attention(q, k, v))


def test_failed_calls_bump_nothing(rng, torch):
    H, HK, D, T = 4, 2, 64, 3
    plan = rove.Plan(H, HK, D)
    c = rove.PagedKVCache(plan, n_blocks=4, block_size=16)
    s = c.new_sequence()
    c.append(s, randn(rng, 20, HK, D), randn(rng, 20, HK, D))
    pool = c.view()
    pk, pv = torch.from_numpy(np.array(pool.k)), torch.from_numpy(np.array(pool.v))
    q = torch.from_numpy(randn(rng, T, H, D))
    out = torch.full((T, H, D), 7.0)
    bad = np.array([[0, 0]], np.int32)  # a block repeated in its row
    before = out._version
    with pytest.raises(rove.RoveInvalidArgument):
        rove.paged_attention(q, pk, pv, bad, [20], plan=plan, out=out)
    assert out._version == before and (out == 7.0).all()
    pk0 = pk.clone()
    with pytest.raises(rove.RoveInvalidArgument):  # a slot twice
        rove.paged_store(q[:2, :HK], q[:2, :HK], pk, pv, np.array([1, 1]), [1, 1], plan=plan)
    # (bytes: unused pool rows may hold NaN bits)
    assert pk._version == pk0._version and pk.numpy().tobytes() == pk0.numpy().tobytes()


def test_out_checks_before_the_call(rng, torch):
    """A stride-0 torch out= (expand()) and an out= of the wrong rank are refused before
    anything is computed, with a message about out="""
    H, HK, D, T = 4, 2, 64, 3
    plan = rove.Plan(H, HK, D)
    c = rove.PagedKVCache(plan, n_blocks=4, block_size=16)
    s = c.new_sequence()
    c.append(s, randn(rng, 20, HK, D), randn(rng, 20, HK, D))
    q = torch.from_numpy(randn(rng, T, H, D))
    with pytest.raises(ValueError, match="stride-0"):
        c.attention([s], q, out=torch.empty(1, H, D).expand(T, H, D))
    with pytest.raises(ValueError, match=r"out has shape \(1, 3, 4, 64\)"):
        c.attention([s], q, out=torch.empty(1, T, H, D))
    with pytest.raises(ValueError, match="stride-0"):
        rove.attention(q[None], q[None, :, :HK], q[None, :, :HK],
                       out=torch.empty(1, 1, H, D).expand(1, T, H, D))


def test_inference_tensors_outside_inference_mode(rng, torch):
    """torch refuses in-place updates of an inference tensor outside
    torch.inference_mode(); so does librove, before writing (inside, it writes)."""
    H, HK, D, T = 4, 2, 64, 3
    q = torch.from_numpy(randn(rng, 1, T, H, D))
    k = torch.from_numpy(randn(rng, 1, 10, HK, D))
    with torch.inference_mode():
        out = torch.full((1, T, H, D), 7.0)
        x = torch.ones(1, 4, 2, 16)
        pk = torch.zeros(2, HK, 16, D)
        pv = torch.zeros(2, HK, 16, D)
    plan = rove.Plan(H, HK, D)
    for call in (lambda: rove.attention(q, k, k, out=out),
                 lambda: rove.rotate(x, inplace=True),
                 lambda: rove.paged_store(k[0, :1], k[0, :1], pk, pv, np.array([0]), [0],
                                          plan=plan)):
        with pytest.raises(RuntimeError, match="inference tensor"):
            call()
    assert (out == 7.0).all() and (x == 1.0).all() and (pk == 0).all()
    with torch.inference_mode():
        rove.attention(q, k, k, out=out)
        rove.rotate(x, inplace=True)
        rove.paged_store(k[0, :1], k[0, :1], pk, pv, np.array([0]), [0], plan=plan)
    assert torch.equal(out, rove.attention(q, k, k)) and not (pk == 0).all()
