# SPDX-License-Identifier: MIT
"""rove.PagedKVCache and rove.paged_attention (rove_paged_*) against references users
trust: one rove.KVCache per sequence holding the same tokens in the same storage type
(bit for bit when block_size is a multiple of 64, the row kernel's key block; otherwise
|got - want| <= 2e-6 (1 + |want|)), and torch's scaled_dot_product_attention over q and k
(and v, and the output back, for RoVE) rotated in float64 by reference.torch_rotate.
Also: fork / copy-on-write, shift, pool exhaustion (RovePoolExhausted, nothing changed),
the documented pool layout through view(), the caller's block tables, torch tensors."""
import copy
import gc
import pickle
import threading
import warnings
import weakref

import numpy as np
import pytest

import rove
from rove import _tensor
from conftest import randn
from reference import torch_rotate
from test_kvcache_types import TOL_FEW, err

DTYPES = ["f32", "bf16", "f16", "q8"]
LENS, ROWS = (1, 37, 300, 1000), (1, 4, 2, 3)  # decode, speculative rows, a long sequence
H, HK, D = 8, 2, 64  # GQA 4


def close(got, want, bitwise):
    got, want = np.asarray(got), np.asarray(want)
    if bitwise:
        assert np.array_equal(got, want)
    else:
        assert got.shape == want.shape
        assert np.all(np.abs(got.astype(np.float64) - want) <= 2e-6 * (1 + np.abs(want)))


def build(rng, plan, dtype, bs, lens, starts=None, spare=2):
    """A PagedKVCache holding sequences of ``lens`` tokens (sequence s at positions
    starts[s] ..), appended in interleaved chunks of 1 .. 40 so that blocks scatter.
    Returns (cache, ids, ks, vs, positions)."""
    starts = starts or [0] * len(lens)
    nb = sum(-(-n // bs) for n in lens) + spare
    c = rove.PagedKVCache(plan, n_blocks=nb, block_size=bs, max_seqs=len(lens) + 2, dtype=dtype)
    ids = [c.new_sequence() for _ in lens]
    ks = [randn(rng, n, plan.n_kv_heads, plan.head_dim) for n in lens]
    vs = [randn(rng, n, plan.n_kv_heads, plan.head_dim) for n in lens]
    done = [0] * len(lens)
    while any(d < n for d, n in zip(done, lens)):
        for s, n in enumerate(lens):
            m = min(int(rng.integers(1, 41)), n - done[s])
            if m <= 0:
                continue
            t = slice(done[s], done[s] + m)
            pos = None if done[s] else np.arange(starts[s], starts[s] + m)  # then continue
            c.append(ids[s], ks[s][t], vs[s][t], pos=pos)
            done[s] += m
    positions = [np.arange(p0, p0 + n, dtype=np.int32) for p0, n in zip(starts, lens)]
    for s in range(len(lens)):
        assert c.length(ids[s]) == lens[s] and np.array_equal(c.positions(ids[s]), positions[s])
    return c, ids, ks, vs, positions


def kv_cache(plan, dtype, k, v, pos):
    kc = rove.KVCache(plan, 1, max(len(k), 1), dtype=dtype)
    kc.append(k[None], v[None], pos=pos)
    return kc


def torch_ref(torch, plan, q, k, v, kv_pos, q_pos):
    """Causal attention (by positions) of q [n, H, d] over k, v [L, Hk, d] in float64: q
    and k rotated by reference.torch_rotate (RoVE: v too, the output back), then
    torch.nn.functional.scaled_dot_product_attention."""
    import torch.nn.functional as F
    w, m = rove.inv_freq(plan.rope, plan.head_dim)
    w = torch.from_numpy(w)
    qa = torch.from_numpy(np.asarray(q_pos, np.float64))[:, None, None] * w  # [n, 1, d/2]
    ka = torch.from_numpy(np.asarray(kv_pos, np.float64))[:, None, None] * w
    qt, kt, vt = (torch.from_numpy(np.asarray(x, np.float64)) for x in (q, k, v))
    r, rot = plan.rotary_dim, plan.rotate
    if rot & rove.ROTATE_Q:
        qt = m * torch_rotate(qt, qa, r, "half")
    if rot & rove.ROTATE_K:
        kt = m * torch_rotate(kt, ka, r, "half")
    if rot & rove.ROTATE_V:
        vt = torch_rotate(vt, ka, r, "half")
    g = plan.n_heads // plan.n_kv_heads
    kt, vt = kt.repeat_interleave(g, 1), vt.repeat_interleave(g, 1)
    mask = torch.from_numpy(np.asarray(kv_pos)[None, :] <= np.asarray(q_pos)[:, None])
    out = F.scaled_dot_product_attention(qt.transpose(0, 1), kt.transpose(0, 1),
                                         vt.transpose(0, 1), attn_mask=mask,
                                         scale=plan.scale).transpose(0, 1)
    if rot & rove.ROTATE_O:
        out = torch_rotate(out, qa, r, "half", sign=-1.0)
    return out.numpy()


# ---- (1) attention: KVCache per sequence and torch -----------------------------------------
@pytest.mark.parametrize("bs", [16, 64])
@pytest.mark.parametrize("rotate", ["rope", "rove"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_equals_kvcache_and_torch(rng, torch, dtype, rotate, bs):
    plan = rove.Plan(H, HK, D, rotate=rotate)
    starts = [0, 0, 5000, 0]  # one sequence away from position 0
    c, ids, ks, vs, pos = build(rng, plan, dtype, bs, LENS, starts)
    cu = np.concatenate([[0], np.cumsum(ROWS)])
    q = randn(rng, int(cu[-1]), H, D)
    out, lse = c.attention(ids, q, rows=ROWS, return_lse=True)
    assert out.shape == q.shape and out.dtype == np.float32 and lse.shape == (H, cu[-1])
    for s, n in enumerate(LENS):
        rows = slice(cu[s], cu[s + 1])
        want, want_lse = kv_cache(plan, dtype, ks[s], vs[s], pos[s]).attention(
            q[None, rows], return_lse=True)
        close(out[rows], want[0], bs % 64 == 0)
        close(lse[:, rows], want_lse[0], bs % 64 == 0)
        ref = torch_ref(torch, plan, q[rows], ks[s], vs[s], pos[s], pos[s][n - ROWS[s]:])
        assert err(out[rows], ref, vs[s]) < TOL_FEW[dtype], s
    # the same rows through cu_seqlens_q, and the sequences in another order
    assert np.array_equal(c.attention(ids, q, cu_seqlens_q=cu), out)
    order = [2, 0, 3, 1]
    q2 = np.concatenate([q[cu[s]:cu[s + 1]] for s in order])
    got = c.attention([ids[s] for s in order], q2, rows=[ROWS[s] for s in order])
    close(got, np.concatenate([out[cu[s]:cu[s + 1]] for s in order]), bs % 64 == 0)


def test_decode_rows_default_split_and_repeats(rng):
    """rows=None gives every sequence total_q / n_seqs rows; ids may repeat."""
    plan = rove.Plan(4, 2, 32)
    c, ids, ks, vs, pos = build(rng, plan, "f32", 64, (10, 70))
    q = randn(rng, 3, 4, 32)
    out = c.attention([ids[1], ids[0], ids[1]], q)
    for i, s in enumerate([1, 0, 1]):
        want = kv_cache(plan, "f32", ks[s], vs[s], pos[s]).attention(q[None, i:i + 1])
        assert np.array_equal(out[i], want[0, 0])


# ---- (2) fork, copy-on-write --------------------------------------------------------------
def _held(c, ids):
    return len(set().union(*(set(c.block_table(s).tolist()) for s in ids)))


@pytest.mark.parametrize("bs", [16, 64])
def test_fork_divergent_appends(rng, bs):
    plan = rove.Plan(4, 2, 32)
    N = 10
    c = rove.PagedKVCache(plan, n_blocks=N, block_size=bs, max_seqs=4)
    k, v = randn(rng, 5 * bs, 2, 32), randn(rng, 5 * bs, 2, 32)
    k2, v2 = randn(rng, 2 * bs, 2, 32), randn(rng, 2 * bs, 2, 32)
    q = randn(rng, 1, 4, 32)
    n0 = 2 * bs + bs // 2  # 3 blocks, the last one partly filled
    a = c.new_sequence()
    c.append(a, k[:n0], v[:n0])
    assert c.free_blocks == N - 3
    b = c.fork(a)
    assert c.free_blocks == N - 3 and np.array_equal(c.block_table(a), c.block_table(b))
    assert np.array_equal(c.positions(b), np.arange(n0))
    assert np.array_equal(c.attention([a], q), c.attention([b], q))
    # the parent's append copies the shared partly filled block, then takes a new one
    n1 = bs // 2 + 2
    c.append(a, k[n0:n0 + n1], v[n0:n0 + n1])
    assert c.free_blocks == N - 5 == N - _held(c, [a, b])
    qa = np.array([n0 + n1])
    before_a = c.attention([a], q, q_pos=qa)
    # the child's divergent tokens: it now alone holds the old block
    n2 = bs + 3
    c.append(b, k2[:n2], v2[:n2])
    assert c.free_blocks == N - _held(c, [a, b]) == N - 6
    ta, tb = c.block_table(a), c.block_table(b)
    assert np.array_equal(ta[:2], tb[:2]) and ta[2] != tb[2]
    assert np.array_equal(c.attention([a], q, q_pos=qa), before_a)  # the parent kept its rows
    # each branch equals a contiguous cache of its own tokens
    kb, vb = np.concatenate([k[:n0], k2[:n2]]), np.concatenate([v[:n0], v2[:n2]])
    for seq, kk, vv in ((a, k[:n0 + n1], v[:n0 + n1]), (b, kb, vb)):
        want = kv_cache(plan, "f32", kk, vv, None).attention(q[None], q_pos=[len(kk)])
        close(c.attention([seq], q, q_pos=[len(kk)]), want[0], bs % 64 == 0)
    # the child truncated into the shared prefix and appended to: block 1 is copied
    c.truncate(b, bs + 1)
    assert c.length(b) == bs + 1 and c.free_blocks == N - _held(c, [a, b])
    c.append(b, k2[:3], v2[:3])
    assert c.block_table(b)[1] != ta[1] and c.free_blocks == N - _held(c, [a, b])
    assert np.array_equal(c.attention([a], q, q_pos=qa), before_a)
    c.free(b)
    c.free(a)
    assert c.free_blocks == N
    with pytest.raises(rove.RoveInvalidArgument, match="no live sequence"):
        c.length(a)


# ---- (3) shift -------------------------------------------------------------------------------
@pytest.mark.parametrize("bs", [16, 64])
@pytest.mark.parametrize("dtype", DTYPES)
def test_shift_equals_kvcache_shift(rng, dtype, bs):
    plan = rove.Plan(4, 2, 64)
    L = 150
    k, v, q = randn(rng, L, 2, 64), randn(rng, L, 2, 64), randn(rng, 2, 4, 64)
    c = rove.PagedKVCache(plan, n_blocks=2 * (-(-L // bs)) + 1, block_size=bs, dtype=dtype)
    parent = c.new_sequence()
    c.append(parent, k, v)
    child = c.fork(parent)
    qp = np.array([700, 701])
    before = c.attention([parent], q, q_pos=qp)
    free0 = c.free_blocks
    c.shift(child, 10, 90, 500)  # the shared blocks in the range are copied first
    assert c.free_blocks == free0 - ((89 // bs) - (10 // bs) + 1)
    ref = kv_cache(plan, dtype, k, v, None)
    ref.shift(10, 90, 500)
    assert np.array_equal(c.positions(child), ref.positions()[0])
    assert np.array_equal(c.positions(parent), np.arange(L))
    close(c.attention([child], q, q_pos=qp), ref.attention(q[None], q_pos=qp)[0], bs % 64 == 0)
    assert np.array_equal(c.attention([parent], q, q_pos=qp), before)
    with pytest.raises(ValueError, match="start <= end"):
        c.shift(child, 5, L + 1, 1)


def test_angles_equal_kvcache_append_angles(rng):
    plan = rove.Plan(4, 2, 64)
    L = 40
    k, v, q = randn(rng, L, 2, 64), randn(rng, L, 2, 64), randn(rng, 2, 4, 64)
    ang, qang = rng.uniform(-30, 30, (L, 2, 32)), rng.uniform(-30, 30, (2, 2, 32))
    c = rove.PagedKVCache(plan, n_blocks=4, block_size=16)
    s = c.new_sequence()
    c.append(s, k[:25], v[:25], angles=ang[:25])
    c.append(s, k[25:], v[25:], angles=ang[25:])
    ref = rove.KVCache(plan, 1, L)
    ref.append_angles(k[None], v[None], ang[None])
    want = ref.attention(q[None], q_angles=qang[None])[0]
    close(c.attention([s], q, q_angles=qang), want, False)
    with pytest.raises(ValueError, match="q_angles"):
        c.attention([s], q)
    with pytest.raises(rove.RoveInvalidArgument, match="angles"):
        c.append(s, k[:1], v[:1])  # positions into a sequence filled with angles
    with pytest.raises(rove.RoveUnsupported, match="angles"):
        c.shift(s, 0, 10, 3)
    f = c.fork(s)  # the kind is inherited
    with pytest.raises(ValueError, match="q_angles"):
        c.attention([f], q)


# ---- (4) pool exhaustion -----------------------------------------------------------------
def test_pool_exhaustion_changes_nothing(rng):
    plan = rove.Plan(4, 2, 32)
    k, v, q = randn(rng, 100, 2, 32), randn(rng, 100, 2, 32), randn(rng, 1, 4, 32)
    c = rove.PagedKVCache(plan, n_blocks=4, block_size=16, max_seqs=2, dtype="f16")
    a = c.new_sequence()
    c.append(a, k[:50], v[:50])
    assert c.free_blocks == 0
    out_a = c.attention([a], q, q_pos=[50])
    table = c.block_table(a)

    def unchanged(seq, n):
        assert c.length(seq) == n and c.free_blocks == 0
        assert np.array_equal(c.block_table(seq), table)
        assert np.array_equal(c.attention([seq], q, q_pos=[50]), out_a)
    with pytest.raises(rove.RovePoolExhausted, match="than the 0 free") as e:
        c.append(a, k[50:70], v[50:70])
    assert isinstance(e.value, rove.RoveError) and e.value.status == 6
    assert e.value.function == "rove_paged_append" and "pool exhausted" in str(e.value)
    unchanged(a, 50)
    b = c.fork(a)  # a fork's append into the shared partly filled block needs a copy
    with pytest.raises(rove.RovePoolExhausted):
        c.append(b, k[:1], v[:1])
    with pytest.raises(rove.RovePoolExhausted):
        c.shift(b, 0, 5, 3)
    unchanged(a, 50)
    unchanged(b, 50)
    assert np.array_equal(c.positions(b), np.arange(50))
    with pytest.raises(rove.RovePoolExhausted, match="max_seqs=2"):
        c.new_sequence()
    with pytest.raises(rove.RovePoolExhausted, match="max_seqs=2"):
        c.fork(a)
    c.free(b)
    c.truncate(a, 32)  # two blocks back
    assert c.free_blocks == 2
    c.append(a, k[50:70], v[50:70])
    assert c.length(a) == 52 and c.free_blocks == 0
    bad = v[:8].copy()
    bad[3, 1, 5] = 1e6  # above float16's range: refused, nothing changed
    c.truncate(a, 40)
    with pytest.raises(rove.RoveInvalidArgument, match="float16"):
        c.append(a, k[:8], bad)
    assert c.length(a) == 40 and c.free_blocks == 1


# ---- (5) the caller's pool: view(), block_table(), paged_attention -----------------------
def _tables(c, ids):
    ts = [c.block_table(s) for s in ids]
    out = np.full((len(ids), max(len(t) for t in ts) + 1), -1, np.int32)  # a spare column
    for i, t in enumerate(ts):
        out[i, :len(t)] = t
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_paged_attention_over_the_view_equals_the_cache(rng, dtype):
    plan = rove.Plan(H, HK, D, rotate="rove")
    c, ids, ks, vs, pos = build(rng, plan, dtype, 16, LENS, [0, 7, 0, 0])
    cu = np.concatenate([[0], np.cumsum(ROWS)])
    q = randn(rng, int(cu[-1]), H, D)
    want, want_lse = c.attention(ids, q, cu_seqlens_q=cu, return_lse=True)
    pool = c.view()
    assert pool.dtype == dtype and pool.k.shape == (c.n_blocks, HK, 16, D)
    assert pool.k.dtype == {"f32": np.float32, "bf16": np.uint16, "f16": np.float16,
                            "q8": np.int8}[dtype]
    assert (pool.k_scale is None) == (dtype != "q8") and pool.pos.shape == (c.n_blocks, 16)
    assert not pool.k.flags.writeable and not pool.pos.flags.writeable
    tables = _tables(c, ids)
    got, lse = rove.paged_attention(q, pool.k, pool.v, tables, LENS, cu, plan=plan,
                                    pos_pool=pool.pos, k_scale=pool.k_scale,
                                    v_scale=pool.v_scale, dtype=dtype, return_lse=True)
    assert np.array_equal(got, want) and np.array_equal(lse, want_lse)
    # the view keeps the cache alive (checked without touching freed memory first)
    alive = weakref.ref(c)
    del c
    gc.collect()
    assert alive() is not None
    again = rove.paged_attention(q, pool.k, pool.v, tables, LENS, cu, plan=plan,
                                 pos_pool=pool.pos, k_scale=pool.k_scale, v_scale=pool.v_scale)
    assert np.array_equal(again, want)
    # flash-attn's token-major order [n_blocks, block_size, n_kv_heads, head_dim], read in
    # place: the same bits (q8 is refused that way)
    tk, tv = (np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in (pool.k, pool.v))
    kw = dict(plan=plan, pos_pool=pool.pos, dtype=dtype, return_lse=True, layout="token_major")
    if dtype == "q8":
        with pytest.raises(rove.RoveUnsupported):
            rove.paged_attention(q, tk, tv, tables, LENS, cu, k_scale=pool.k_scale,
                                 v_scale=pool.v_scale, **kw)
    else:
        got, lse = rove.paged_attention(q, tk, tv, tables, LENS, cu, **kw)
        assert np.array_equal(got, want) and np.array_equal(lse, want_lse)
        with pytest.raises(ValueError, match="layout"):
            rove.paged_attention(q, tk, tv, tables, LENS, cu, plan=plan, layout="thd")


def test_a_step_with_no_query_rows(rng, torch):
    """q with 0 rows (an engine step that attends nothing) gives empty outputs and LSE
    from the cache and from an engine's pool, numpy and torch, as attention_varlen does;
    the block tables are still checked."""
    plan = rove.Plan(H, HK, D, rotate="rove")
    c, ids, ks, vs, pos = build(rng, plan, "f32", 16, LENS)
    pool, tables = c.view(), _tables(c, ids)
    for q in (np.zeros((0, H, D), np.float32), torch.zeros(0, H, D),
              torch.zeros(0, H, D, dtype=torch.bfloat16)):
        out, lse = c.attention(ids, q, return_lse=True)
        assert out.shape == (0, H, D) and out.dtype == q.dtype and lse.shape == (H, 0)
        got, lse = rove.paged_attention(q, pool.k, pool.v, tables, LENS, plan=plan,
                                        pos_pool=pool.pos, return_lse=True)
        assert got.shape == (0, H, D) and lse.shape == (H, 0)
    buf = torch.empty(0, H, D)
    assert c.attention(ids, torch.zeros(0, H, D), out=buf) is buf
    bad = tables.copy()
    bad[1, 0] = c.n_blocks
    with pytest.raises(rove.RoveInvalidArgument):
        rove.paged_attention(np.zeros((0, H, D), np.float32), pool.k, pool.v, bad, LENS,
                             plan=plan, pos_pool=pool.pos)


def test_out_buffers(rng, torch):
    """out= (an engine's reused output buffer) in PagedKVCache.attention and
    paged_attention: written in place and returned when its heads and dims are dense, else
    computed aside and copied in; the same bits as a fresh output; its dtype is the
    output's (rounded once); a wrong shape, kind or dtype, a read-only array and an out=
    over q or over a pool say so, and leave it untouched."""
    plan = rove.Plan(H, HK, D, rotate="rove")
    c, ids, ks, vs, pos = build(rng, plan, "f32", 16, LENS, [0, 7, 0, 0])
    cu = np.concatenate([[0], np.cumsum(ROWS)])
    T = int(cu[-1])
    q = randn(rng, T, H, D)
    want, want_lse = c.attention(ids, q, cu_seqlens_q=cu, return_lse=True)
    pool, tables = c.view(), _tables(c, ids)
    kw = dict(plan=plan, pos_pool=pool.pos)

    def both(out, qq=q, **more):
        a = c.attention(ids, qq, cu_seqlens_q=cu, out=out, **more)
        b = rove.paged_attention(qq, pool.k, pool.v, tables, LENS, cu, out=out, **kw, **more)
        return a, b

    out = np.full((T, H, D), np.nan, np.float32)
    a, b = both(out)
    assert a is out and b is out and np.array_equal(out, want)
    out[:] = np.nan
    (a, lse), _ = both(out, return_lse=True)
    assert a is out and np.array_equal(out, want) and np.array_equal(lse, want_lse)
    # heads and dims not dense (a slice of a wider buffer): computed aside, copied in
    wide = np.full((T, H, 2 * D), 7.0, np.float32)
    a, b = both(wide[:, :, :D])
    assert np.array_equal(wide[:, :, :D], want) and (wide[:, :, D:] == 7.0).all()
    # any token stride is written in place (rows of a larger [T][H][D] buffer)
    rows = np.full((2 * T, H, D), 7.0, np.float32)
    both(rows[::2])
    assert np.array_equal(rows[::2], want) and (rows[1::2] == 7.0).all()
    # torch: a bfloat16 / float16 out from a float32 q holds the float32 result rounded once
    tq = torch.from_numpy(q)
    for tdt in (torch.bfloat16, torch.float16, torch.float32):
        o = torch.empty((T, H, D), dtype=tdt)
        a, b = both(o, tq)
        assert a is o and b is o and torch.equal(o, torch.from_numpy(want).to(tdt))
    # bad out=: refused, nothing written
    calls = (lambda o: c.attention(ids, q, cu_seqlens_q=cu, out=o),
             lambda o: rove.paged_attention(q, pool.k, pool.v, tables, LENS, cu, out=o, **kw))
    ro = np.full((T, H, D), 5.0, np.float32)
    ro.flags.writeable = False
    for bad, err, match in ((np.full((T, H, D + 1), 5.0, np.float32), ValueError, "shape"),
                            (np.full((1, T, H, D), 5.0, np.float32), ValueError, "out has shape"),
                            (torch.full((T, H, D), 5.0), TypeError, "same kind"),
                            (np.full((T, H, D), 5.0, np.float64), TypeError, "float32"),
                            (ro, ValueError, "read-only")):
        for f in calls:
            with pytest.raises(err, match=match):
                f(bad)
            assert (bad == 5.0).all()
    qq = q.copy()
    with pytest.raises(rove.RoveInvalidArgument, match="out= overlaps q"):
        c.attention(ids, qq, cu_seqlens_q=cu, out=qq)
    with pytest.raises(rove.RoveInvalidArgument, match="out= overlaps q"):
        rove.paged_attention(qq, pool.k, pool.v, tables, LENS, cu, out=qq, **kw)
    assert np.array_equal(qq, q)
    # computed aside (dims reversed: not librove's strides): refused by the same rule
    with pytest.raises(rove.RoveInvalidArgument, match="out= overlaps q"):
        c.attention(ids, qq, cu_seqlens_q=cu, out=qq[..., ::-1])
    with pytest.raises(rove.RoveInvalidArgument, match="out= overlaps q"):
        rove.paged_attention(qq, pool.k, pool.v, tables, LENS, cu, out=qq[..., ::-1], **kw)
    assert np.array_equal(qq, q)
    # the cause named is what C was given: a non-dense q and out (both copied) with a bad
    # block table blame the table, not an overlap of the caller's arrays
    wide = np.zeros((T, H, 2 * D), np.float32)
    wide[:, :, :D] = q
    bad_tables = tables.copy()
    bad_tables[0, 0] = 10 ** 6
    with pytest.raises(rove.RoveInvalidArgument, match="block table entry"):
        rove.paged_attention(wide[:, :, :D], pool.k, pool.v, bad_tables, LENS, cu,
                             out=wide[:, :, D:], **kw)
    # an out= over q's positions: named
    qpos = np.zeros(T * H * D, np.float32)
    pos_view = qpos[:T].view(np.int32)
    pos_view[:] = np.concatenate([np.arange(n) + (ln - n) for n, ln in zip(ROWS, LENS)])
    with pytest.raises(rove.RoveInvalidArgument, match="out= overlaps q_pos"):
        rove.paged_attention(q, pool.k, pool.v, tables, LENS, cu, q_pos=pos_view,
                             out=qpos.reshape(T, H, D), **kw)
    with pytest.raises(ValueError, match="n_kv_heads=1"):
        rove.paged_attention(q, pool.k, pool.v, tables, LENS, cu, plan=rove.Plan(H, 1, D))
    # the cache's own memory as out= of its attention: refused, named, untouched
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about a read-only numpy array
        tpool = torch.from_numpy(pool.k)
    before = pool.k.tobytes()
    with pytest.raises(rove.RoveInvalidArgument, match="out= overlaps the cache's pool"):
        c.attention(ids, torch.from_numpy(q), cu_seqlens_q=cu,
                    out=tpool.reshape(-1)[:T * H * D].view(T, H, D))
    assert pool.k.tobytes() == before
    # an engine's writable pool given as out= of its own attention: refused, untouched
    kp = np.array(pool.k)
    before = kp.copy()
    over = kp.reshape(-1)[:T * H * D].reshape(T, H, D)
    with pytest.raises(rove.RoveInvalidArgument, match="out= overlaps k_pool"):
        rove.paged_attention(q, kp, pool.v, tables, LENS, cu, out=over, **kw)
    assert kp.tobytes() == before.tobytes()  # (unused pool rows may hold NaN bits)


def test_bad_block_tables(rng):
    plan = rove.Plan(4, 2, 32)
    c, ids, ks, vs, pos = build(rng, plan, "f32", 16, (40, 20))
    pool, q = c.view(), randn(rng, 2, 4, 32)
    tables, lens = _tables(c, ids), [40, 20]
    run = lambda t, **kw: rove.paged_attention(q, pool.k, pool.v, t, lens, plan=plan,  # noqa
                                               pos_pool=pool.pos, **kw)
    want = c.attention(ids, q)
    assert np.array_equal(run(tables), want)
    shared = tables.copy()
    shared[1, 0] = tables[0, 0]  # a block in two sequences' tables: allowed
    out = run(shared)  # sequence 1 now reads sequence 0's first block in place of its own
    k1 = np.concatenate([ks[0][:16], ks[1][16:]])
    v1 = np.concatenate([vs[0][:16], vs[1][16:]])
    assert np.array_equal(out[0], want[0])
    close(out[1], kv_cache(plan, "f32", k1, v1, pos[1]).attention(q[1:2][None])[0, 0],
          False)
    for s, i, value in [(0, 2, c.n_blocks), (1, 1, -1), (0, 2, tables[0, 0])]:  # range, repeat
        bad = tables.copy()
        bad[s, i] = value
        with pytest.raises(rove.RoveInvalidArgument, match="block table") as e:
            run(bad)
        assert isinstance(e.value, ValueError) and e.value.function == "rove_paged_attention"
    with pytest.raises(ValueError, match="columns"):
        run(tables[:, :2])
    with pytest.raises(ValueError, match="int32"):
        run(tables.astype(np.int64) + 2 ** 31)
    with pytest.raises(TypeError, match="integers"):
        run(tables.astype(np.float64))
    with pytest.raises(ValueError, match=r"n_seqs, max_blocks"):
        run(tables[0])
    with pytest.raises(ValueError, match="q_pos"):  # 1 row, no keys, default positions
        rove.paged_attention(q, pool.k, pool.v, tables, [40, 0], plan=plan)
    out, lse = rove.paged_attention(q, pool.k, pool.v, tables, [40, 0], plan=plan,
                                    q_pos=[39, 5], return_lse=True)  # no keys: 0 and -inf
    assert np.all(out[1] == 0) and np.all(np.isneginf(lse[:, 1]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_view_is_the_documented_layout(rng, torch, dtype):
    """rotate="none" stores K as given (rounded once): token t of a sequence is block
    table[t // block_size], row t % block_size, of k [n_blocks, n_kv_heads, block_size,
    head_dim]; q8 rows are int8 times their block's scale (within max|x| / 254)."""
    plan = rove.Plan(2, 2, 64, rotate="none")
    c, ids, ks, vs, pos = build(rng, plan, dtype, 8, (30, 11), [3, 0])
    pool = c.view()
    for s, seq in enumerate(ids):
        t = np.arange(len(ks[s]))
        blk, row = c.block_table(seq)[t // 8], t % 8
        got = pool.k[blk, :, row]  # [n, n_kv_heads, head_dim]
        assert np.array_equal(pool.pos[blk, row], pos[s])
        if dtype == "q8":
            scale = np.repeat(pool.k_scale[blk, :, row], 32, axis=-1)
            bound = np.repeat(np.abs(ks[s]).reshape(len(t), 2, 2, 32).max(-1), 32, axis=-1)
            assert np.all(np.abs(got * scale - ks[s]) <= bound / 254 * (1 + 1e-5))
            continue
        tdt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[dtype]
        want = torch.from_numpy(ks[s]).to(tdt)
        if dtype == "bf16":
            want = want.view(torch.int16).numpy().view(np.uint16)  # the raw bits
        assert np.array_equal(got, np.asarray(want))


# ---- (6) torch tensors in and out ----------------------------------------------------------
def test_torch_in_and_out(rng, torch):
    plan = rove.Plan(4, 2, 64)
    k, v = randn(rng, 130, 2, 64), randn(rng, 130, 2, 64)
    tk, tv = torch.from_numpy(k).bfloat16(), torch.from_numpy(v).bfloat16()
    c = rove.PagedKVCache(plan, n_blocks=6, block_size=64, dtype=torch.bfloat16)
    s = c.new_sequence()
    c.append(s, tk[:100], tv[:100])
    c.append(s, tk[100:], tv[100:], pos=torch.arange(100, 130))
    ref = rove.KVCache(plan, 1, 130, dtype="bf16")
    ref.append(tk[None], tv[None])
    # q as a view into a fused projection: read in place
    fused = torch.from_numpy(randn(rng, 3, 4 * 64 + 128))
    q = fused[:, :256].view(3, 4, 64)
    before = _tensor.copies
    out, lse = c.attention([s], q, return_lse=True)
    assert _tensor.copies == before
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and out.shape == q.shape
    assert isinstance(lse, torch.Tensor) and lse.shape == (4, 3)
    want, want_lse = ref.attention(q.contiguous()[None], return_lse=True)
    assert torch.equal(out, want[0]) and torch.equal(lse, want_lse[0])
    # an engine's own torch pool (here a copy of the cache's), bf16 as torch.bfloat16
    pool = c.view()
    pk = torch.from_numpy(np.array(pool.k)).view(torch.bfloat16)
    pv = torch.from_numpy(np.array(pool.v)).view(torch.bfloat16)
    pp = torch.from_numpy(np.array(pool.pos))
    table = torch.from_numpy(c.block_table(s))[None]
    got = rove.paged_attention(q, pk, pv, table, torch.tensor([130]), torch.tensor([0, 3]),
                               plan=plan, pos_pool=pp)
    assert isinstance(got, torch.Tensor) and torch.equal(got, out)
    with pytest.raises(ValueError, match="C-contiguous"):
        rove.paged_attention(q, pk.transpose(0, 1).contiguous().transpose(0, 1), pv, table,
                             [130], plan=plan)
    # bf16 / f16 queries: widened exactly, the output rounded once to q's dtype
    # (rove_paged_*_attention_typed): the float32 call on the widened q, rounded
    for tdt in (torch.bfloat16, torch.float16):
        qt = q.to(tdt)
        got, got_lse = c.attention([s], qt, return_lse=True)
        want, want_lse = c.attention([s], qt.float(), return_lse=True)
        assert got.dtype == tdt and torch.equal(got, want.to(tdt)) and torch.equal(got_lse, want_lse)
        got = rove.paged_attention(qt, pk, pv, table, [130], plan=plan, pos_pool=pp)
        assert got.dtype == tdt and torch.equal(got, want.to(tdt))
    qh = q.numpy().astype(np.float16)  # numpy float16 in, float16 out
    got = c.attention([s], qh)
    assert got.dtype == np.float16
    assert np.array_equal(got, c.attention([s], qh.astype(np.float32)).astype(np.float16))
    with pytest.raises(TypeError, match="float32"):
        c.attention([s], q.double())
    with pytest.raises(TypeError, match="one dtype"):
        c.append(s, tk[:1], tv[:1].float())
    with pytest.raises(ValueError, match="resolve_neg"):  # a lazy view: never read as is
        rove.paged_attention(q, torch._neg_view(pk), pv, table, [130], plan=plan)


def test_handles_are_not_copied_or_pickled(rng):
    """A cache owns its C object: a copy would free it twice, so copy / deepcopy / pickle
    raise. Plans are immutable: a copy is the plan itself; pickling raises."""
    plan = rove.Plan(4, 2, 32)
    assert copy.copy(plan) is plan and copy.deepcopy(plan) is plan
    g = rove.GLAPlan(2, 16, 16)
    assert copy.deepcopy(g) is g
    for obj in (rove.PagedKVCache(plan, n_blocks=2), rove.KVCache(plan, 1, 8)):
        for f in (copy.copy, copy.deepcopy):
            with pytest.raises(TypeError, match="cannot be copied"):
                f(obj)
    for obj in (plan, g, rove.PagedKVCache(plan, n_blocks=2), rove.KVCache(plan, 1, 8)):
        with pytest.raises(TypeError, match="pickled"):
            pickle.dumps(obj)


def test_sequences_from_several_threads(rng):
    """Threads appending to, forking, freeing and attending one cache (its lock
    serialises them): every sequence equals a rove.KVCache of its tokens, bit for bit."""
    plan = rove.Plan(H, HK, D)
    c = rove.PagedKVCache(plan, n_blocks=64, block_size=64, max_seqs=16)
    errors, results = [], {}

    def worker(w):
        try:
            g = np.random.default_rng(w)
            s = c.new_sequence()
            k, v = randn(g, 200, HK, D), randn(g, 200, HK, D)
            for i in range(0, 200, 50):
                c.append(s, k[i:i + 50], v[i:i + 50])
                f = c.fork(s)
                c.free(f)
            q = randn(g, 1, H, D)
            results[w] = (c.attention([s], q), kv_cache(plan, "f32", k, v, None).attention(
                q[None])[0])
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 4
    for got, want in results.values():
        assert np.array_equal(got, want)


# ---- construction and bad input ------------------------------------------------------------
def test_sequence_ids_from_tensors(rng, torch):
    """A sequence id held in a 0-d integer tensor or array is an id (as a server keeps them
    in tensors); floats, bools and 1-element 1-D tensors are not."""
    c = rove.PagedKVCache(n_blocks=4, n_heads=4, n_kv_heads=2, head_dim=32, block_size=16)
    s = c.new_sequence()
    k = randn(rng, 5, 2, 32)
    c.append(torch.tensor(s), k, k)
    assert c.length(torch.tensor(s)) == c.length(np.array(s, dtype=np.int64)) == 5
    for bad in (float(s), torch.tensor(float(s)), torch.tensor([s]), True):
        with pytest.raises(TypeError, match="seq must be an int"):
            c.length(bad)


def test_construction_and_bad_input(rng):
    c = rove.PagedKVCache(n_blocks=8, n_heads=4, n_kv_heads=2, head_dim=32, rotate="rope",
                          block_size=16, max_seqs=3, dtype="float16")
    assert c.plan.rotate == rove.ROTATE_ROPE and c.dtype == "f16"
    assert repr(c) == ("rove.PagedKVCache(n_blocks=8, block_size=16, free_blocks=8, "
                       "max_seqs=3, dtype='f16')")
    plan = c.plan
    for name in ("plan", "n_blocks", "block_size", "max_seqs", "dtype"):  # fixed at creation
        with pytest.raises(AttributeError, match="fixed"):
            setattr(c, name, rove.Plan(4, 2, 32) if name == "plan" else 4)
    assert c.plan is plan and (c.n_blocks, c.block_size, c.max_seqs) == (8, 16, 3)
    with pytest.raises(rove.RoveInvalidArgument, match="power of two"):
        rove.PagedKVCache(plan, n_blocks=8, block_size=24)
    with pytest.raises(ValueError, match="n_blocks"):
        rove.PagedKVCache(plan, n_blocks=0)
    with pytest.raises(TypeError, match="not both"):
        rove.PagedKVCache(plan, n_blocks=8, n_heads=4, n_kv_heads=2, head_dim=32)
    with pytest.raises(TypeError, match="n_heads"):
        rove.PagedKVCache(n_blocks=8)
    with pytest.raises(ValueError, match="dtype must be one of"):
        rove.PagedKVCache(plan, n_blocks=8, dtype="f64")
    s = c.new_sequence()
    k, q = randn(rng, 5, 2, 32), randn(rng, 1, 4, 32)
    with pytest.raises(ValueError, match="expected"):
        c.append(s, k[:, :1], k[:, :1])
    with pytest.raises(ValueError, match="expected"):
        c.append(s, k[None], k[None])
    with pytest.raises(TypeError, match="float32"):
        c.append(s, k.astype(np.float64), k.astype(np.float64))
    with pytest.raises(rove.RoveInvalidArgument, match="no live sequence 2"):
        c.append(2, k, k)
    before = _tensor.copies
    c.append(s, k[:, :, ::-1], k)  # not dense: copied once
    assert c.length(s) == 5 and _tensor.copies == before + 1
    with pytest.raises(ValueError, match="truncate"):
        c.truncate(s, 6)
    with pytest.raises(ValueError, match="expected"):
        c.attention([s], q[:, :2])
    with pytest.raises(ValueError, match="query rows"):
        c.attention([s], q, rows=[2])
    with pytest.raises(TypeError, match="not both"):
        c.attention([s], q, rows=[1], cu_seqlens_q=[0, 1])
    with pytest.raises(ValueError, match="at least one"):
        c.attention([], q)
    with pytest.raises(rove.RoveInvalidArgument, match="no live sequence"):
        c.attention([s, 1], randn(rng, 2, 4, 32))
    pool = c.view()
    with pytest.raises(ValueError, match="read-only"):
        pool.k[0, 0, 0, 0] = 1
    t = np.array([c.block_table(s)])
    with pytest.raises(TypeError, match="dtype"):
        rove.paged_attention(q, pool.k.astype(np.float64), pool.v, t, [5], plan=plan)
    with pytest.raises(TypeError, match="one storage type"):
        rove.paged_attention(q, pool.k, pool.v.astype(np.float32), t, [5], plan=plan)
    with pytest.raises(TypeError, match="dtype="):
        rove.paged_attention(q, pool.k, pool.v, t, [5], plan=plan, dtype="bf16")
    with pytest.raises(ValueError, match="q8"):
        rove.paged_attention(q, pool.k, pool.v, t, [5], plan=plan, k_scale=pool.k)
    with pytest.raises(ValueError, match="C-contiguous"):
        rove.paged_attention(q, pool.k[:, :, ::-1], pool.v, t, [5], plan=plan)
    with pytest.raises(TypeError, match="not both"):
        rove.paged_attention(q, pool.k, pool.v, t, [5], plan=plan, rotate="rope")
    with pytest.raises(TypeError, match="n_kv_heads: the heads and head_dim come from"):
        rove.paged_attention(q, pool.k, pool.v, t, [5], n_kv_heads=2, rotate="rope")
    with pytest.raises(ValueError, match="no blocks"):
        rove.paged_attention(q, pool.k[:0], pool.v[:0], t, [5], plan=plan)
    odd = np.zeros((2, 2, 12, 32), np.float32)  # block_size 12
    with pytest.raises(ValueError, match="power of two"):
        rove.paged_attention(q, odd, odd, [[0]], [5], plan=plan)
    with pytest.raises(ValueError, match="give cu_seqlens_q"):
        rove.paged_attention(randn(rng, 3, 4, 32), pool.k, pool.v, np.repeat(t, 2, 0), [5, 5],
                             plan=plan)
    raw = np.empty(pool.k.nbytes + 1, np.uint8)[1:].view(pool.k.dtype)  # misaligned
    with pytest.raises(ValueError, match="aligned"):
        rove.paged_attention(q, raw.reshape(pool.k.shape), pool.v, t, [5], plan=plan)
    # plan options instead of a plan: the same plan as get_plan's
    got = rove.paged_attention(q, pool.k, pool.v, t, [5], rotate="rope", pos_pool=pool.pos)
    assert np.array_equal(got, c.attention([s], q))


def test_decode_step_fast_paths_agree(rng):
    """A list of Python ints for seqs and one row count per sequence skip numpy's
    per-call arrays (half of a small decode call's Python time): the same results and
    errors as the general forms (numpy ids, per-sequence counts, cu_seqlens_q)."""
    plan = rove.Plan(H, HK, D)
    c = rove.PagedKVCache(plan, n_blocks=16, block_size=16)
    seqs = [c.new_sequence() for _ in range(3)]
    for i, s in enumerate(seqs):
        c.append(s, randn(rng, 5 + 7 * i, HK, D), randn(rng, 5 + 7 * i, HK, D))
    q = randn(rng, 6, H, D)
    want = c.attention(np.array(seqs), q, [2, 2, 2])
    for got in (c.attention(seqs, q), c.attention(tuple(seqs), q, 2),
                c.attention(seqs, q, cu_seqlens_q=[0, 2, 4, 6])):
        assert np.array_equal(got, want)
    with pytest.raises(ValueError, match="outside int32"):
        c.attention([seqs[0], 2 ** 31], q)
    with pytest.raises(ValueError, match="rows must be >= 0"):
        c.attention(seqs, q, -2)
    with pytest.raises(ValueError, match="own 9 query rows"):
        c.attention(seqs, q, 3)
    with pytest.raises(ValueError, match="6 rows for 4 sequences"):
        c.attention(seqs + [seqs[0]], q)


def test_an_empty_append_stores_nothing():
    """PagedKVCache.append of n = 0 tokens is a no-op on a live sequence (as KVCache's),
    with the update's shapes and the sequence still checked."""
    plan = rove.Plan(4, 2, 16)
    c = rove.PagedKVCache(plan, n_blocks=4, block_size=16, max_seqs=2)
    s = c.new_sequence()
    e = np.zeros((0, 2, 16), np.float32)
    c.append(s, e, e)
    c.append(s, e, e, pos=np.zeros(0, np.int64))
    assert c.length(s) == 0 and c.free_blocks == 4
    c.append(s, np.ones((3, 2, 16), np.float32), np.ones((3, 2, 16), np.float32))
    c.append(s, e, e)
    assert c.length(s) == 3
    with pytest.raises(ValueError, match="expected"):
        c.append(s, e, np.zeros((0, 1, 16), np.float32))
    with pytest.raises(ValueError, match="pos has shape"):
        c.append(s, e, e, pos=np.zeros(2, np.int64))
    with pytest.raises(rove.RoveInvalidArgument, match="filled by positions"):  # kind mix
        c.append(s, e, e, angles=np.zeros((0, 2, 8)))
    c.free(s)
    with pytest.raises(Exception):
        c.append(s, e, e)  # not a live sequence
