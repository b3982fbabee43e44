# SPDX-License-Identifier: MIT
"""rove.paged_store (rove_paged_store: new tokens into an engine's own pool, vLLM's
reshape_and_cache) against references users trust: the stored K rows equal transformers'
own LlamaRotaryEmbedding + apply_rotary_pos_emb (YaRN, its attention factor included) at
the tokens' positions (to TOL: transformers' angles are float32), V rows the values (RoPE) or the values rotated the same way
(RoVE); attention over the stored pool equals torch's scaled_dot_product_attention of the
HF-rotated q and k; and every row, scale and position equals what rove.PagedKVCache.append
stores (bit for bit, every storage type, both layouts), its attention bit for bit too.
Bad input raises with the pool untouched."""
import numpy as np
import pytest

import rove
from conftest import randn

torch = pytest.importorskip("torch")
T = pytest.importorskip("transformers")
from transformers.models.llama.modeling_llama import (  # noqa: E402
    LlamaRotaryEmbedding, apply_rotary_pos_emb)
from rove.hf_config import rope_config_from_hf  # noqa: E402

HQ, HK, D, BS = 8, 2, 64, 16
# transformers computes the angles p * w in float32: at positions up to ~270 they are off by
# up to ~2e-5 rad, so its rotated values by up to ~1e-4 (|k| <= 4); librove's are in
# double. A sign, pairing, frequency, factor or layout mistake is O(1).
TOL = 2e-4


def _llama_yarn():
    return T.LlamaConfig(hidden_size=HQ * D, num_attention_heads=HQ, num_key_value_heads=HK,
                         head_dim=D, num_hidden_layers=1, intermediate_size=64, vocab_size=64,
                         max_position_embeddings=131072,
                         rope_parameters=dict(rope_type="yarn", rope_theta=1e6, factor=4.0,
                                              original_max_position_embeddings=32768))


def _slots(tables, lens, bs):
    """slot_mapping of every token of every sequence, sequence by sequence."""
    return np.concatenate([[tables[s][j // bs] * bs + j % bs for j in range(n)]
                           for s, n in enumerate(lens)]).astype(np.int64)


@pytest.mark.parametrize("rotate", ["rope", "rove"])
@pytest.mark.parametrize("layout", ["token_major", "head_major"])
def test_store_matches_transformers_rotary_and_sdpa(rotate, layout):
    config = _llama_yarn()
    plan = rove.Plan(HQ, HK, D, rotate=rotate, rope=rope_config_from_hf(config), causal=True)
    rng = np.random.default_rng(3)
    lens = [37, 5, 70]
    nb = sum(-(-n // BS) for n in lens) + 3
    perm = rng.permutation(nb)  # scattered blocks
    tables, at = [], 0
    for n in lens:
        tables.append(perm[at: at + -(-n // BS)])
        at += -(-n // BS)
    total = sum(lens)
    k = torch.from_numpy(randn(rng, total, HK, D))
    v = torch.from_numpy(randn(rng, total, HK, D))
    pos = np.concatenate([np.arange(n) + 100 * s for s, n in enumerate(lens)])
    shape = (nb, BS, HK, D) if layout == "token_major" else (nb, HK, BS, D)
    kp, vp = torch.full(shape, 7.0), torch.full(shape, 7.0)
    pos_pool = torch.full((nb, BS), -5, dtype=torch.int32)
    slots = _slots(tables, lens, BS)
    rove.paged_store(k, v, kp, vp, torch.from_numpy(slots), torch.from_numpy(pos), plan=plan,
                     pos_pool=pos_pool, layout=layout)
    # transformers' rotation of k (and, for RoVE, v) at the tokens' positions
    rot = LlamaRotaryEmbedding(config)
    cos, sin = rot(k, torch.from_numpy(pos)[None])  # [1, total, D], attention factor in
    kh = k.transpose(0, 1)[None]  # [1, HK, total, D]
    vh = v.transpose(0, 1)[None]
    k_ref, v_rot = apply_rotary_pos_emb(kh, vh, cos, sin)
    v_ref = v_rot / rot.attention_scaling if rotate == "rove" else vh  # V: a pure rotation
    for i, sl in enumerate(slots):
        b, r = divmod(int(sl), BS)
        got_k = kp[b, r] if layout == "token_major" else kp[b, :, r]
        got_v = vp[b, r] if layout == "token_major" else vp[b, :, r]
        torch.testing.assert_close(got_k, k_ref[0, :, i], rtol=0, atol=TOL)
        torch.testing.assert_close(got_v, v_ref[0, :, i].float(), rtol=0, atol=TOL)
        assert int(pos_pool[b, r]) == pos[i]
    assert int((pos_pool == -5).sum()) == nb * BS - total  # the other rows untouched
    # attention over the pool: SDPA of the HF-rotated q and k (one decode row each)
    q = torch.from_numpy(randn(rng, len(lens), HQ, D))
    q_pos = np.array([pos[sum(lens[:s + 1]) - 1] for s in range(len(lens))])
    width = max(len(t) for t in tables)
    bt = np.array([list(t) + [0] * (width - len(t)) for t in tables], dtype=np.int32)
    out = rove.paged_attention(q, kp, vp, bt, lens, plan=plan, pos_pool=pos_pool,
                               q_pos=q_pos, layout=layout)
    at = 0
    for s, n in enumerate(lens):
        c, sn = rot(q, torch.from_numpy(q_pos[s: s + 1])[None])
        qh = q[s][None, :, None]  # [1, HQ, 1, D]
        qr, _ = apply_rotary_pos_emb(qh, qh, c, sn)
        kk = k_ref[:, :, at: at + n].repeat_interleave(HQ // HK, 1)
        vv = v_ref[:, :, at: at + n].repeat_interleave(HQ // HK, 1)
        y = torch.nn.functional.scaled_dot_product_attention(
            qr.double(), kk.double(), vv.double(), scale=1 / D ** 0.5)
        if rotate == "rove":  # the output rotated back by the query's position: R_{-p}
            m = rot.attention_scaling
            y, _ = apply_rotary_pos_emb(y, y, (c / m).double(), (-sn / m).double())
        torch.testing.assert_close(out[s].double(), y[0, :, 0], rtol=0, atol=TOL)
        at += n


# a q8 pool is head-major only (token-major: RoveUnsupported, test_store_errors)
@pytest.mark.parametrize("dtype,layout", [(t, lay) for t in ["f32", "bf16", "f16", "q8"]
                                          for lay in ["head_major", "token_major"]
                                          if (t, lay) != ("q8", "token_major")])
def test_store_equals_cache_append(dtype, layout):
    plan = rove.Plan(HQ, HK, D)  # RoVE
    rng = np.random.default_rng(5)
    lens = [19, 1, 44]
    cache = rove.PagedKVCache(plan, n_blocks=12, block_size=BS, dtype=dtype)
    seqs = [cache.new_sequence() for _ in lens]
    ks = [randn(rng, n, HK, D) for n in lens]
    vs = [randn(rng, n, HK, D) for n in lens]
    for j in range(0, max(lens), 7):  # interleaved chunks: blocks scatter
        for s, n in zip(seqs, lens):
            if j < n:
                cache.append(s, ks[s][j: j + 7], vs[s][j: j + 7])
    view = cache.view()
    tables = [cache.block_table(s) for s in seqs]
    nb = view.k.shape[0]
    tm = layout == "token_major"
    tshape = lambda a: (a.shape[0], a.shape[2], a.shape[1], a.shape[3])  # noqa: E731
    kp = np.zeros(tshape(view.k) if tm else view.k.shape, view.k.dtype)
    vp = np.zeros_like(kp)
    ksc = np.zeros_like(view.k_scale) if dtype == "q8" else None
    vsc = np.zeros_like(view.v_scale) if dtype == "q8" else None
    pos_pool = np.zeros((nb, BS), np.int32)
    # one call, the sequences in reverse with a padding slot (garbage K/V) after each
    slots, kk, vv, pp = [], [], [], []
    for s in reversed(range(len(lens))):
        slots += list(_slots([tables[s]], [lens[s]], BS)) + [-1]
        kk += [ks[s], np.full((1, HK, D), np.nan, np.float32)]
        vv += [vs[s], np.full((1, HK, D), np.inf, np.float32)]
        pp += [np.arange(lens[s]), [0]]
    rove.paged_store(np.concatenate(kk), np.concatenate(vv), kp, vp, slots, np.concatenate(pp),
                     plan=plan, k_scale=ksc, v_scale=vsc, pos_pool=pos_pool, layout=layout)
    for s, n in enumerate(lens):
        for j in range(n):
            b, r = int(tables[s][j // BS]), j % BS
            mine = (lambda a: a[b, r]) if tm else (lambda a: a[b, :, r])
            assert np.array_equal(mine(kp), view.k[b, :, r])
            assert np.array_equal(mine(vp), view.v[b, :, r])
            if dtype == "q8":
                assert np.array_equal(ksc[b, :, r], view.k_scale[b, :, r])
                assert np.array_equal(vsc[b, :, r], view.v_scale[b, :, r])
            assert pos_pool[b, r] == view.pos[b, r]
    q = randn(rng, 3, HQ, D)
    want = cache.attention(seqs, q)
    width = max(len(t) for t in tables)
    bt = np.array([list(t) + [0] * (width - len(t)) for t in tables], dtype=np.int32)
    got = rove.paged_attention(q, kp, vp, bt, lens, plan=plan, k_scale=ksc, v_scale=vsc,
                               pos_pool=pos_pool, layout=layout)
    assert np.array_equal(got, want)


def test_store_errors():
    plan = rove.Plan(HQ, HK, D)
    rng = np.random.default_rng(7)
    k, v = randn(rng, 4, HK, D), randn(rng, 4, HK, D)
    kp = np.zeros((4, HK, BS, D), np.float16)
    vp = np.zeros_like(kp)
    before = kp.copy()
    pos = np.arange(4)
    with pytest.raises(rove.RoveInvalidArgument, match="twice"):
        rove.paged_store(k, v, kp, vp, [0, 1, 1, 2], pos, plan=plan)
    with pytest.raises(rove.RoveInvalidArgument, match="past the pool"):
        rove.paged_store(k, v, kp, vp, [0, 1, 2, 64], pos, plan=plan)
    big = v.copy()
    big[3, 1, 5] = 1e6  # F16 cannot hold it: nothing written, also not tokens 0..2
    with pytest.raises(rove.RoveInvalidArgument, match="float16"):
        rove.paged_store(k, big, kp, vp, [0, 1, 2, 3], pos, plan=plan)
    assert np.array_equal(kp, before) and np.array_equal(vp, before)
    with pytest.raises(ValueError, match="positions are required"):
        rove.paged_store(k, v, kp, vp, [0, 1, 2, 3], None, plan=plan)
    with pytest.raises(ValueError, match="slot_mapping has shape"):
        rove.paged_store(k, v, kp, vp, [0, 1, 2], pos, plan=plan)
    ro = kp.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        rove.paged_store(k, v, ro, vp, [0, 1, 2, 3], pos, plan=plan)
    with pytest.raises(RuntimeError, match="requires grad"):
        rove.paged_store(k, v, torch.zeros(4, HK, BS, D, requires_grad=True),
                         torch.zeros(4, HK, BS, D), [0, 1, 2, 3], pos, plan=plan)
    with pytest.raises(rove.RoveInvalidArgument):  # k inside the pool
        kin = kp.reshape(-1)[: 4 * HK * D].reshape(4, HK, D)
        rove.paged_store(kin, v.astype(np.float16), kp, vp, [0, 1, 2, 3], pos, plan=plan)
    with pytest.raises(rove.RoveUnsupported):
        rove.paged_store(k, v, np.zeros((4, BS, HK, D), np.int8),
                         np.zeros((4, BS, HK, D), np.int8), [0, 1, 2, 3], pos, plan=plan,
                         k_scale=np.zeros((4, BS, HK, 2), np.float32),
                         v_scale=np.zeros((4, BS, HK, 2), np.float32), layout="token_major")
    with pytest.raises(ValueError, match="KV heads"):
        rove.paged_store(k, v, np.zeros((4, 4, BS, D), np.float32),
                         np.zeros((4, 4, BS, D), np.float32), [0, 1, 2, 3], pos, plan=plan)
    assert np.array_equal(kp, before) and np.array_equal(vp, before)
    with pytest.raises(rove.RoveUnsupported, match="rove_paged_store"):
        q8 = np.zeros((8, HK, BS, D), np.int8)  # blocks 0, 2, 4, 6 / 1, 3, 5, 7: strided
        rove.paged_store(k, v, q8[::2], q8[1::2], [0, 1, 2, 3], pos, plan=plan,
                         k_scale=np.zeros((4, HK, BS, 2), np.float32),
                         v_scale=np.zeros((4, HK, BS, 2), np.float32))
    with pytest.raises(rove.RoveInvalidArgument, match="overlaps"):  # K and V one array
        rove.paged_store(k, v, kp, kp, [0, 1, 2, 3], pos, plan=plan)
    assert np.array_equal(kp, before) and np.array_equal(vp, before)
    # padding skipped: its K, V and angles are not used (NaN there is fine)
    ang = np.full((4, HK, D // 2), 0.5)
    ang[0] = ang[3] = np.nan
    rove.paged_store(k, v, kp, vp, [-1, 5, 6, -1], pos, plan=plan, angles=ang)
    assert np.array_equal(kp[0, :, 0], before[0, :, 0]) and not np.array_equal(kp[0, :, 5], 0)
    with pytest.raises(ValueError, match="non-finite"):  # a stored token's NaN angle
        rove.paged_store(k, v, kp, vp, [-1, 5, 6, 7], pos, plan=plan, angles=ang)
    rove.paged_store(k[:0], v[:0], kp, vp, [], [], plan=plan)  # nothing to store


def test_one_block_pool_any_first_stride():
    """numpy and torch call a one-block array contiguous whatever its first stride."""
    plan = rove.Plan(HQ, HK, D)
    rng = np.random.default_rng(13)
    k, v = randn(rng, 3, HK, D), randn(rng, 3, HK, D)
    kp = np.broadcast_to(np.zeros((1, HK, BS, D), np.float32), (1, HK, BS, D)).copy()
    kp1 = np.lib.stride_tricks.as_strided(kp, strides=(0,) + kp.strides[1:])
    vp = np.zeros((1, HK, BS, D), np.float32)
    rove.paged_store(k, v, kp1, vp, [0, 1, 2], [0, 1, 2], plan=plan)
    cache = rove.PagedKVCache(plan, n_blocks=1, block_size=BS)
    s = cache.new_sequence()
    cache.append(s, k, v)
    q = randn(rng, 1, HQ, D)
    assert np.array_equal(rove.paged_attention(q, kp1, vp, [[0]], [3], plan=plan),
                          cache.attention([s], q))


@pytest.mark.parametrize("layout", ["token_major", "head_major"])
def test_flashinfer_combined_cache(layout):
    """FlashInfer's 5-D paged cache [n_blocks, 2, ...]: K = cache[:, 0] and V = cache[:, 1]
    are block-strided slices (rove_paged_kv.block_stride), stored and read in place; the
    results are rove.PagedKVCache's bit for bit."""
    plan = rove.Plan(HQ, HK, D)
    rng = np.random.default_rng(11)
    cache = rove.PagedKVCache(plan, n_blocks=8, block_size=BS, dtype="bf16")
    s = cache.new_sequence()
    k, v = torch.from_numpy(randn(rng, 50, HK, D)), torch.from_numpy(randn(rng, 50, HK, D))
    cache.append(s, k, v)
    bt = cache.block_table(s)
    inner = (BS, HK, D) if layout == "token_major" else (HK, BS, D)
    kv = torch.zeros((8, 2) + inner, dtype=torch.bfloat16)
    rove.paged_store(k, v, kv[:, 0], kv[:, 1], _slots([bt], [50], BS), np.arange(50), plan=plan,
                     layout=layout)
    view = cache.view()
    for j in range(50):
        b, r = int(bt[j // BS]), j % BS
        got = kv[b, 0, r] if layout == "token_major" else kv[b, 0, :, r]
        assert np.array_equal(got.view(torch.int16).numpy().view(np.uint16), view.k[b, :, r])
    q = torch.from_numpy(randn(rng, 2, HQ, D))
    want = cache.attention([s], q)
    got = rove.paged_attention(q, kv[:, 0], kv[:, 1], bt[None], [50], plan=plan, layout=layout)
    assert torch.equal(got, want)
    with pytest.raises(ValueError, match="one block stride"):
        rove.paged_attention(q, kv[:, 0], kv[:, 1].contiguous(), bt[None], [50], plan=plan,
                             layout=layout)
    with pytest.raises(ValueError, match="C-contiguous"):  # heads and dims not dense
        rove.paged_attention(q, kv[:, 0].transpose(1, 2), kv[:, 1].transpose(1, 2), bt[None],
                             [50], plan=plan, layout="head_major" if layout == "token_major"
                             else "token_major")
    q8 = np.zeros((8, 2, HK, BS, D), np.int8)
    sc = np.zeros((8, HK, BS, 2), np.float32)
    with pytest.raises(rove.RoveUnsupported, match="dense"):
        rove.paged_attention(q.numpy(), q8[:, 0], q8[:, 1], bt[None], [50], plan=plan,
                             k_scale=sc, v_scale=sc)
