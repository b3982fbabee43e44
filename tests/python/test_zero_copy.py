# SPDX-License-Identifier: MIT
"""Zero-copy where the C API can express the strides, one counted copy where it cannot,
and out= written in place."""
import numpy as np
import pytest

import rove
import rove.torch_ops  # noqa: F401  (rove.torch_ops.attention)
from rove import _tensor
from conftest import randn
from reference import rel_err

TOL = 2e-5


def copies_of(fn):
    before = _tensor.copies
    result = fn()
    return result, _tensor.copies - before


def test_fused_qkv_views_are_zero_copy(rng, torch):
    """q, k, v as views into one fused [b, s, (H + 2 Hk) d] projection."""
    B, L, H, Hk, d = 2, 33, 4, 2, 64
    qkv = randn(rng, B, L, (H + 2 * Hk) * d)
    q = qkv[..., : H * d].reshape(B, L, H, d)
    k = qkv[..., H * d: (H + Hk) * d].reshape(B, L, Hk, d)
    v = qkv[..., (H + Hk) * d:].reshape(B, L, Hk, d)
    assert np.shares_memory(q, qkv) and not q.flags.c_contiguous
    want = rove.attention(*(np.ascontiguousarray(x) for x in (q, k, v)))
    got, n = copies_of(lambda: rove.attention(q, k, v))
    assert n == 0 and np.array_equal(got, want)
    t = torch.from_numpy(qkv)
    tq, tk, tv = t[..., : H * d].view(B, L, H, d), t[..., H * d:(H + Hk) * d].view(B, L, Hk, d), \
        t[..., (H + Hk) * d:].view(B, L, Hk, d)
    got_t, n = copies_of(lambda: rove.attention(tq, tk, tv))
    assert n == 0 and np.array_equal(got_t.numpy(), want)


def test_hf_style_bhsd_views_are_zero_copy(rng, torch):
    """HF makes q as x.view(b, s, h, d).transpose(1, 2): expressible, no copy; the
    bhsd output is a view of a contiguous bshd buffer."""
    B, L, H, d = 2, 20, 4, 32
    x = torch.from_numpy(randn(rng, B, L, H, d))
    q = x.transpose(1, 2)
    out, n = copies_of(lambda: rove.attention(q, q, q, layout="bhsd"))
    assert n == 0
    assert out.shape == (B, H, L, d) and out.transpose(1, 2).is_contiguous()
    want = rove.attention(x, x, x)
    assert torch.equal(out.transpose(1, 2), want)


def test_contiguous_bhsd_kv_is_read_in_place(rng, torch):
    """Contiguous [b, h, s, d] K/V (PyTorch's and transformers' cache layout) are read in
    place through rove_attention_args' head and batch strides (before 0.5: regrouped per
    KV head, q and the output copied): only a contiguous [b, h, s, d] q is copied
    (q_len rows), and the results are the bshd call's bit for bit (LSE too), a decode
    over a long cache split over its keys included."""
    B, L, H, d = 1, 25, 2, 64
    q = torch.from_numpy(randn(rng, B, H, L, d))  # tokens of one head adjacent
    out, n = copies_of(lambda: rove.attention(q, q, q, layout="bhsd"))
    assert n == 1
    want = rove.attention(*(q.transpose(1, 2).contiguous(),) * 3)
    assert torch.equal(out.transpose(1, 2), want)
    assert out.transpose(1, 2).is_contiguous()  # a bhsd view of a bshd buffer, as always
    bshd = lambda x: np.ascontiguousarray(x.transpose(0, 2, 1, 3))  # noqa: E731
    for B, H, Hk, Lq, Lk in ((1, 32, 8, 1, 300), (2, 8, 2, 5, 37), (2, 6, 3, 40, 40)):
        qn = randn(rng, B, H, Lq, 64)
        kn, vn = randn(rng, B, Hk, Lk, 64), randn(rng, B, Hk, Lk, 64)
        qp, kp = rng.integers(-5, 90, (B, Lq)), rng.integers(0, 90, (Lk,))
        kw = dict(q_pos=qp, kv_pos=kp, window=9, softcap=15.0, return_lse=True,
                  rope=rove.RopeConfig(scaling="yarn", factor=2.0, original_max_position=64))
        want = rove.attention(bshd(qn), bshd(kn), bshd(vn), **kw)
        for kind in ("numpy", "torch", "bf16", "op"):
            x = [qn, kn, vn] if kind == "numpy" else [torch.from_numpy(t) for t in (qn, kn, vn)]
            w_out, w_lse = want
            if kind == "bf16":
                x = [t.to(torch.bfloat16) for t in x]
                w_out, w_lse = rove.attention(*(t.transpose(1, 2).contiguous() for t in x),
                                              **kw)
            f = rove.torch_ops.attention if kind == "op" else rove.attention
            kwk = dict(kw, q_pos=torch.from_numpy(qp), kv_pos=torch.from_numpy(kp)) \
                if kind == "op" else kw
            (o, lse), n = copies_of(lambda: f(*x, layout="bhsd", **kwk))
            assert n == (Lq > 1), kind  # q: token-dense as it is for one query row
            o = o.transpose(1, 2) if kind != "numpy" else o.transpose(0, 2, 1, 3)
            assert np.array_equal(np.asarray(o.float() if kind == "bf16" else o),
                                  np.asarray(w_out.float() if kind == "bf16" else w_out)), kind
            assert np.array_equal(np.asarray(lse), np.asarray(w_lse)), kind
    # a decode over a long cache (its keys split and merged): the same bits as the bshd
    # call, for any thread count
    qn, kn, vn = randn(rng, 1, 32, 1, 128), randn(rng, 1, 8, 4096, 128), randn(rng, 1, 8, 4096, 128)
    w_out, w_lse = rove.attention(bshd(qn), bshd(kn), bshd(vn), return_lse=True)
    for t in (1, 2, 3):
        (o, lse), n = copies_of(lambda: rove.attention(qn, kn, vn, layout="bhsd",
                                                       return_lse=True, threads=t))
        assert n == 0  # one query row: q [1, h, 1, d] is token-dense as it is
        assert np.array_equal(o.transpose(0, 2, 1, 3), w_out) and np.array_equal(lse, w_lse)
    # K and V with padded strides (a preallocated cache's slice), GQA, batch 2
    big_k, big_v = randn(rng, 2, 4, 60, 80), randn(rng, 2, 4, 60, 80)
    kk, vv = big_k[:, :, :37, :64], big_v[:, :, :37, :64]
    qn = randn(rng, 2, 8, 3, 64)
    (o, lse), n = copies_of(lambda: rove.attention(qn, kk, vv, layout="bhsd", return_lse=True))
    w_out, w_lse = rove.attention(bshd(qn), bshd(kk), bshd(vv), return_lse=True)
    assert n == 1 and np.array_equal(o.transpose(0, 2, 1, 3), w_out)
    assert np.array_equal(lse, w_lse)


def test_other_strides_are_copied_and_correct(rng):
    B, L, H, d = 2, 30, 4, 64
    base = randn(rng, B, L, H, 2 * d)
    q = base[..., ::2]  # dims not adjacent
    k = np.flip(randn(rng, B, L, H, d), axis=1)  # negative token stride
    v = np.asfortranarray(randn(rng, B, L, H, d))
    got, n = copies_of(lambda: rove.attention(q, k, v))
    assert n == 3
    want = rove.attention(*(np.ascontiguousarray(x) for x in (q, k, v)))
    assert np.array_equal(got, want)


def test_out_is_written_in_place(rng, torch):
    B, L, H, d = 1, 40, 4, 64
    q, k, v = randn(rng, B, L, H, d), randn(rng, B, L, H, d), randn(rng, B, L, H, d)
    want = rove.attention(q, k, v)
    out = np.full_like(q, np.nan)
    res, n = copies_of(lambda: rove.attention(q, k, v, out=out))
    assert res is out and n == 0 and np.array_equal(out, want)
    # out as a view with a token stride (every other row of a bigger buffer)
    big = np.full((B, L, 2, H, d), np.nan, np.float32)
    res, n = copies_of(lambda: rove.attention(q, k, v, out=big[:, :, 0]))
    assert n == 0 and np.array_equal(big[:, :, 0], want) and np.all(np.isnan(big[:, :, 1]))
    # a torch bhsd out that is contiguous in bhsd: computed, then copied into it
    tout = torch.full((B, H, L, d), float("nan"))
    tq = torch.from_numpy(q).transpose(1, 2)
    res, n = copies_of(lambda: rove.attention(tq, tq, tq, layout="bhsd", out=tout))
    assert res is tout and n == 1
    assert torch.equal(tout, rove.attention(tq, tq, tq, layout="bhsd"))


def test_out_must_not_alias_inputs(rng):
    q = randn(rng, 1, 10, 2, 32)
    with pytest.raises(rove.RoveInvalidArgument):
        rove.attention(q, q.copy(), q.copy(), out=q)


def test_read_only_and_misaligned_inputs(rng):
    q = randn(rng, 1, 16, 2, 32)
    ro = q.copy()
    ro.setflags(write=False)  # read-only inputs are fine (librove only reads them)
    want = rove.attention(q, q, q)
    assert np.array_equal(rove.attention(ro, ro, ro), want)
    # float32 data at an address that is not a multiple of 4: copied, not passed
    mis = np.ndarray(q.shape, np.float32, buffer=np.zeros(q.nbytes + 2, np.uint8), offset=2)
    mis[...] = q
    assert mis.__array_interface__["data"][0] % 4 != 0
    got, n = copies_of(lambda: rove.attention(mis, q, q))
    assert n == 1 and np.array_equal(got, want)


def test_requires_grad_under_no_grad_is_fine(rng, torch):
    q = torch.from_numpy(randn(rng, 1, 12, 2, 32)).requires_grad_()
    with torch.no_grad():
        out = rove.attention(q, q, q)
    assert not out.requires_grad
    assert rel_err(out.numpy(), rove.attention(*(q.detach().numpy(),) * 3)) == 0
