# SPDX-License-Identifier: MIT
"""rove.attention_varlen: packed sequences against one rove.attention per sequence
(bitwise) and, without rotations, against PyTorch SDPA per sequence with the bottom-right
causal mask; the LSE layout [heads, total_q]; a sequence without keys; torch inputs;
bad cu_seqlens; bf16 / f16 tensors (the float32 call on their casts, bit for bit), out=,
fused QKV views read in place."""
import numpy as np
import pytest

import rove
from reference import rel_err

torch = pytest.importorskip("torch")

LQ = [5, 1, 0, 9, 30]
LK = [5, 20, 3, 9, 44]


def _packed(g, H=4, Hk=2, D=32):
    cq, ck = np.cumsum([0] + LQ), np.cumsum([0] + LK)
    q = g.uniform(-1, 1, (cq[-1], H, D)).astype(np.float32)
    k, v = (g.uniform(-1, 1, (ck[-1], Hk, D)).astype(np.float32) for _ in range(2))
    return q, k, v, cq, ck


@pytest.mark.parametrize("rotate", ["rove", "rope", "none"])
@pytest.mark.parametrize("causal", [True, False])
def test_equals_per_sequence_calls(rotate, causal):
    g = np.random.default_rng(1)
    q, k, v, cq, ck = _packed(g)
    out, lse = rove.attention_varlen(q, k, v, cq, ck, rotate=rotate, causal=causal,
                                     return_lse=True)
    assert lse.shape == (4, cq[-1])
    for s in range(len(LQ)):
        if LQ[s] == 0:
            continue
        qs, ks = slice(cq[s], cq[s + 1]), slice(ck[s], ck[s + 1])
        want, wl = rove.attention(q[qs], k[ks], v[ks], rotate=rotate, causal=causal,
                                  return_lse=True)
        assert np.array_equal(out[qs], want) and np.array_equal(lse[:, qs], wl)
        if rotate == "none":  # and against SDPA, bottom-right aligned
            mask = None
            if causal:
                mask = torch.ones(LQ[s], LK[s], dtype=torch.bool).tril(LK[s] - LQ[s])
            sd = torch.nn.functional.scaled_dot_product_attention(
                torch.from_numpy(q[qs]).transpose(0, 1),
                torch.from_numpy(k[ks]).repeat_interleave(2, 1).transpose(0, 1),
                torch.from_numpy(v[ks]).repeat_interleave(2, 1).transpose(0, 1),
                attn_mask=mask).transpose(0, 1)
            assert rel_err(out[qs], sd.numpy()) < 1e-5


def test_no_keys_torch_and_positions():
    g = np.random.default_rng(2)
    q, k, v, cq, ck = _packed(g)
    cq2 = np.array([0, 3, 3 + q.shape[0] - 3])  # two sequences: 3 queries without keys
    ck2 = np.array([0, 0, k.shape[0]])
    out, lse = rove.attention_varlen(torch.from_numpy(q), torch.from_numpy(k),
                                     torch.from_numpy(v), cq2, ck2, return_lse=True)
    assert isinstance(out, torch.Tensor)
    assert (out[:3] == 0).all() and torch.isinf(lse[:, :3]).all()
    qp = np.arange(q.shape[0], dtype=np.int32) + 100
    kp = np.arange(k.shape[0], dtype=np.int32)
    o2 = rove.attention_varlen(q, k, v, cq, ck, q_pos=qp, kv_pos=kp, causal=False)
    s = 4
    want = rove.attention(q[cq[s]:], k[ck[s]:], v[ck[s]:], causal=False,
                          q_pos=qp[cq[s]:], kv_pos=kp[ck[s]:])
    assert np.array_equal(o2[cq[s]:], want)


def test_bad_cu():
    g = np.random.default_rng(3)
    q, k, v, cq, ck = _packed(g)
    with pytest.raises(ValueError):
        rove.attention_varlen(q, k, v, cq[::-1], ck)
    with pytest.raises(ValueError):
        rove.attention_varlen(q, k, v, cq[:-1], ck)
    with pytest.raises(ValueError):
        rove.attention_varlen(q, k, v, cq + 1, ck + 1)
    with pytest.raises(TypeError, match="integer array, not float64"):  # a dtype: TypeError
        rove.attention_varlen(q, k, v, cq.astype(np.float64), ck)
    # a float tensor that requires grad: the dtype is named, not the missing backward
    cq_grad = torch.tensor(cq, dtype=torch.float32, requires_grad=True)
    with pytest.raises(TypeError, match="integer array, not torch.float32"):
        rove.attention_varlen(q, k, v, cq_grad, ck)
    # no KV heads: said so (not only "a multiple of n_kv_heads")
    with pytest.raises(ValueError, match="n_kv_heads be positive"):
        rove.attention_varlen(q, k[:, :0], v[:, :0], cq, ck)


def test_bad_cu_unsigned_and_clear_messages():
    """An unsigned cu_seqlens that decreases is refused before any cast (its differences
    wrap around); unpaired or non-finite angles and out= over an input say so."""
    g = np.random.default_rng(3)
    q, k, v, cq, ck = _packed(g)
    bad = cq.astype(np.uint64)
    bad[1] = 2 ** 63
    with pytest.raises(ValueError, match="not decrease"):
        rove.attention_varlen(q, k, v, bad, ck)
    bad = cq.astype(np.uint32)
    bad[1], bad[2] = bad[2], bad[1]
    with pytest.raises(ValueError, match="not decrease"):
        rove.attention_varlen(q, k, v, bad, ck)
    qa = g.uniform(-9, 9, (q.shape[0], 2, 16))
    ka = g.uniform(-9, 9, (k.shape[0], 2, 16))
    with pytest.raises(ValueError, match="go together"):
        rove.attention_varlen(q, k, v, cq, ck, q_angles=qa)
    qa[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        rove.attention_varlen(q, k, v, cq, ck, q_angles=qa, kv_angles=ka)
    for fn, args in ((rove.attention_varlen, (q, k, v, cq, ck)), (rove.attention, (q, k, v))):
        qc = q.copy()
        with pytest.raises(rove.RoveInvalidArgument, match="out= overlaps q"):
            fn(*args[:0], qc, *args[1:], out=qc)
        assert np.array_equal(qc, q)
        # an out= whose strides librove cannot take is computed aside and copied in: the
        # same overlap is refused all the same (before the call: q unchanged)
        with pytest.raises(rove.RoveInvalidArgument, match="out= overlaps q"):
            fn(*args[:0], qc, *args[1:], out=qc[..., ::-1])
        assert np.array_equal(qc, q)
    # q read through a private copy (its heads are not dense) and an out= computed aside in
    # the same buffer: no memory librove reads is written, so it is taken, as in place
    T, H, D = q.shape
    w = np.zeros((T, H, 2 * D), np.float32)
    w[..., :D] = q
    want = rove.attention_varlen(q, k, v, cq, ck)
    got = rove.attention_varlen(w[..., :D], k, v, cq, ck, out=w[..., D:])
    assert np.array_equal(got, want) and np.array_equal(w[..., D:], want)
    w[..., :D] = q
    want = rove.attention(q[None], k[None], v[None])
    rove.attention(w[None, ..., :D], k[None], v[None], out=w[None, ..., D:])
    assert np.array_equal(w[None, ..., D:], want)


def test_out_overlapping_sinks_or_positions_is_named():
    """librove refuses an out= that overlaps the sinks or the positions it reads (correct);
    the Python error used to name only an overlap with q, k or v and gave a bare 'invalid
    argument' here."""
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 4, 8, 16, generator=g) for _ in range(3))
    cu = torch.tensor([0, 4], dtype=torch.int32)
    for varlen in (False, True):
        buf = torch.zeros(1, 4, 8, 16)
        call = ((lambda **kw: rove.attention_varlen(q[0], k[0], v[0], cu, cu, out=buf[0], **kw))
                if varlen else (lambda **kw: rove.attention(q, k, v, out=buf, **kw)))
        with pytest.raises(rove.RoveInvalidArgument, match="out= overlaps sinks"):
            call(sinks=buf.view(-1)[-8:])
        pos = buf.view(torch.int32).view(-1)[:4]  # positions 0 (the zeros of buf)
        kv_pos = torch.arange(4, dtype=torch.int32)
        if not varlen:
            with pytest.raises(rove.RoveInvalidArgument, match="out= overlaps q_pos"):
                call(q_pos=pos, kv_pos=kv_pos)
        else:  # varlen reads a private copy of the positions: no overlap, the same result
            want = rove.attention_varlen(q[0], k[0], v[0], cu, cu, q_pos=pos.clone(),
                                         kv_pos=kv_pos, causal=False)
            assert torch.equal(call(q_pos=pos, kv_pos=kv_pos, causal=False), want)


def test_positions_kept_by_the_graph():
    """The backward uses the forward's positions and angles: an in-place edit of the
    position tensor in between changes nothing, one of angles is refused by autograd;
    positions [1, total] work forward and backward."""
    g = np.random.default_rng(5)
    q, k, v, cq, ck = _packed(g)
    t = lambda x: torch.tensor(x, requires_grad=True)  # noqa: E731
    qp = torch.cat([torch.arange(n) for n in np.diff(cq)])
    kp = torch.cat([torch.arange(n) for n in np.diff(ck)])

    def grads(edit, pos):
        tq, tk, tv = t(q), t(k), t(v)
        out = rove.attention_varlen(tq, tk, tv, cq, ck, rotate="rope", q_pos=pos, kv_pos=kp,
                                    causal=False)
        if edit:
            pos.add_(5)
        out.square().sum().backward()
        if edit:
            pos.sub_(5)
        return tq.grad

    assert torch.equal(grads(False, qp), grads(True, qp))
    assert torch.equal(grads(False, qp), grads(False, qp[None]))
    tq = t(q[:5])
    p1 = torch.arange(5)
    out = rove.attention(tq, t(k[:5]), t(v[:5]), rotate="rope", q_pos=p1, kv_pos=p1.clone())
    p1.add_(3)
    out.square().sum().backward()
    p1.sub_(3)
    tq2 = t(q[:5])
    rove.attention(tq2, t(k[:5]), t(v[:5]), rotate="rope", q_pos=p1,
                   kv_pos=p1.clone()).square().sum().backward()
    assert torch.equal(tq.grad, tq2.grad)
    qa = torch.tensor(g.uniform(-9, 9, (q.shape[0], 2, 16)))
    ka = torch.tensor(g.uniform(-9, 9, (k.shape[0], 2, 16)))
    out = rove.attention_varlen(t(q), t(k), t(v), cq, ck, q_angles=qa, kv_angles=ka)
    qa.add_(1)
    with pytest.raises(RuntimeError, match="inplace"):
        out.sum().backward()


def test_half_gradients_equal_per_sequence_autograd():
    """bf16 q and v and fp16 k: each gradient in its input's dtype, bit for bit those of
    one differentiable rove.attention per sequence (tested against float64 in
    test_autograd.py); sequences without keys or queries get zeros."""
    g = np.random.default_rng(14)
    q, k, v, cq, ck = _packed(g)
    dts = (torch.bfloat16, torch.float16, torch.bfloat16)
    tq, tk, tv = (torch.tensor(x).to(dt).requires_grad_() for x, dt in zip((q, k, v), dts))
    dout = torch.tensor(g.uniform(-1, 1, q.shape), dtype=torch.float32)
    (rove.attention_varlen(tq, tk, tv, cq, ck).float() * dout).sum().backward()
    for x, dt in zip((tq, tk, tv), dts):
        assert x.grad.dtype == dt
    for s in range(len(LQ)):
        qs, ks = slice(cq[s], cq[s + 1]), slice(ck[s], ck[s + 1])
        if LQ[s] == 0 or LK[s] == 0:
            assert (tq.grad[qs] == 0).all() and (tk.grad[ks] == 0).all()
            continue
        q1, k1, v1 = (x.detach()[sl].clone().requires_grad_() for x, sl in
                      ((tq, qs), (tk, ks), (tv, ks)))
        (rove.attention(q1, k1, v1).float() * dout[qs]).sum().backward()
        assert torch.equal(tq.grad[qs], q1.grad)
        assert torch.equal(tk.grad[ks], k1.grad) and torch.equal(tv.grad[ks], v1.grad)


@pytest.mark.parametrize("angles", [False, True, "positions"])
def test_gradients_equal_per_sequence_autograd(angles):
    """Under torch.autograd the gradients are those of one differentiable rove.attention per
    sequence (itself tested against float64 torch autograd in test_autograd.py), bit for
    bit: with default positions, explicit angles, or explicit positions; the loss takes
    the LSE too (rove_attention_grads.d_lse, per sequence)."""
    g = np.random.default_rng(4)
    q, k, v, cq, ck = _packed(g)
    t = lambda x: torch.tensor(x, requires_grad=True)  # noqa: E731
    qa = ka = qp = kp = None
    if angles == "positions":
        qp, kp = g.integers(-40, 4000, q.shape[0]), g.integers(-40, 4000, k.shape[0])
        angles = False
    if angles:
        qa = torch.tensor(g.uniform(-9, 9, (q.shape[0], 2, 16)), requires_grad=True)
        ka = torch.tensor(g.uniform(-9, 9, (k.shape[0], 2, 16)), requires_grad=True)
    tq, tk, tv = t(q), t(k), t(v)
    dout = torch.tensor(g.uniform(-1, 1, q.shape), dtype=torch.float32)
    dlse = torch.tensor(g.uniform(-1, 1, (q.shape[1], q.shape[0])), dtype=torch.float32)

    def lse_term(lse, w):  # rows with no key (LSE -inf) take no part
        return (lse.masked_fill(~torch.isfinite(lse), 0.0) * w).sum()
    out, lse = rove.attention_varlen(tq, tk, tv, cq, ck, q_angles=qa, kv_angles=ka, q_pos=qp,
                                     kv_pos=kp, return_lse=True)
    ((out * dout).sum() + lse_term(lse, dlse)).backward()
    for s in range(len(LQ)):
        qs, ks = slice(cq[s], cq[s + 1]), slice(ck[s], ck[s + 1])
        if LQ[s] == 0 or LK[s] == 0:
            assert (tq.grad[qs] == 0).all() and (tk.grad[ks] == 0).all()
            continue
        q1, k1, v1 = t(q[qs]), t(k[ks]), t(v[ks])
        a1 = b1 = None
        if angles:
            a1 = qa.detach()[qs].clone().requires_grad_(True)
            b1 = ka.detach()[ks].clone().requires_grad_(True)
        o1, l1 = rove.attention(q1, k1, v1, q_angles=a1, kv_angles=b1,
                                q_pos=None if qp is None else qp[qs],
                                kv_pos=None if kp is None else kp[ks], return_lse=True)
        ((o1 * dout[qs]).sum() + lse_term(l1, dlse[:, qs])).backward()
        assert torch.equal(o1.detach(), out.detach()[qs])
        for got, want in ((tq.grad[qs], q1.grad), (tk.grad[ks], k1.grad), (tv.grad[ks], v1.grad)):
            assert torch.equal(got, want)
        if angles:
            assert torch.equal(qa.grad[qs], a1.grad) and torch.equal(ka.grad[ks], b1.grad)


# ---- bf16 / f16 tensors, out=, fused QKV views -----------------------------------------

@pytest.mark.parametrize("dtypes", [("bf16",) * 4, ("f16",) * 4, ("bf16", "f16", "f32", "f16"),
                                    ("f32", "bf16", "bf16", "bf16")],
                         ids=["bf16", "f16", "mixed", "f32q-bf16kv"])
def test_typed_equals_float32_casts(dtypes):
    """Half-precision q / k / v (each its own dtype) and out: the float32 call on their
    casts, the output rounded once (bit for bit), equal to rove.attention per sequence on
    the same typed slices; and against PyTorch SDPA per sequence without rotations."""
    T = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    dq, dk, dv, do = (T[x] for x in dtypes)
    g = np.random.default_rng(5)
    q, k, v, cq, ck = _packed(g)
    tq, tk, tv = torch.from_numpy(q).to(dq), torch.from_numpy(k).to(dk), torch.from_numpy(v).to(dv)
    out = torch.empty(q.shape, dtype=do)
    for rotate in ("rove", "none"):
        got, lse = rove.attention_varlen(tq, tk, tv, cq, ck, rotate=rotate, return_lse=True,
                                         out=out)
        assert got is out and got.dtype == do and lse.dtype == torch.float32
        want, wl = rove.attention_varlen(tq.float(), tk.float(), tv.float(), cq, ck,
                                         rotate=rotate, return_lse=True)
        assert torch.equal(got, want.to(do)) and torch.equal(lse, wl)
        fresh = rove.attention_varlen(tq, tk, tv, cq, ck, rotate=rotate)
        assert fresh.dtype == dq and torch.equal(fresh, want.to(dq))
        for s in range(len(LQ)):
            qs, ks = slice(cq[s], cq[s + 1]), slice(ck[s], ck[s + 1])
            if LQ[s] == 0:
                continue
            one = rove.attention(tq[qs], tk[ks], tv[ks], rotate=rotate)
            assert torch.equal(fresh[qs], one)
            if rotate == "none":
                mask = torch.ones(LQ[s], LK[s], dtype=torch.bool).tril(LK[s] - LQ[s])
                sd = torch.nn.functional.scaled_dot_product_attention(
                    tq[qs].float().transpose(0, 1),
                    tk[ks].float().repeat_interleave(2, 1).transpose(0, 1),
                    tv[ks].float().repeat_interleave(2, 1).transpose(0, 1),
                    attn_mask=mask).transpose(0, 1)
                tol = 1e-5 if do == torch.float32 else (8e-3 if do == torch.bfloat16 else 1e-3)
                assert (got[qs].float() - sd).abs().max().item() < tol


def test_numpy_float16_and_out():
    """numpy float16 inputs and a float16 or float32 numpy out=."""
    g = np.random.default_rng(6)
    q, k, v, cq, ck = _packed(g)
    q16, k16, v16 = (x.astype(np.float16) for x in (q, k, v))
    want = rove.attention_varlen(q16.astype(np.float32), k16.astype(np.float32),
                                 v16.astype(np.float32), cq, ck)
    got = rove.attention_varlen(q16, k16, v16, cq, ck)
    assert got.dtype == np.float16 and np.array_equal(got, want.astype(np.float16))
    o32 = np.full(q.shape, 7.0, np.float32)
    assert rove.attention_varlen(q16, k16, v16, cq, ck, out=o32) is o32
    assert np.array_equal(o32, want)


def test_fused_qkv_views_read_in_place_and_strided_out():
    """q, k, v as views into one fused [T, (H + 2 Hk) d] projection (bf16) are read in
    place (no copies); an out= view with a token stride is written in place; an out=
    whose heads are not dense goes through a temporary and is copied back."""
    from rove import _tensor
    g = np.random.default_rng(7)
    H, Hk, D = 4, 2, 32
    cq = ck = np.cumsum([0] + LK)
    Tt = int(ck[-1])
    fused = torch.from_numpy(g.uniform(-1, 1, (Tt, (H + 2 * Hk) * D)).astype(np.float32)).bfloat16()
    q = fused[:, :H * D].view(Tt, H, D)
    k = fused[:, H * D:(H + Hk) * D].view(Tt, Hk, D)
    v = fused[:, (H + Hk) * D:].view(Tt, Hk, D)
    assert not q.is_contiguous()
    want = rove.attention_varlen(q.contiguous(), k.contiguous(), v.contiguous(), cq, ck)
    before = _tensor.copies
    big = torch.zeros(Tt, H + 1, D, dtype=torch.bfloat16)  # token stride (H + 1) D
    got = rove.attention_varlen(q, k, v, cq, ck, out=big[:, :H])
    assert _tensor.copies == before
    assert torch.equal(got, want) and torch.equal(big[:, :H], want) and (big[:, H] == 0).all()
    odd = torch.zeros(Tt, D, H, dtype=torch.bfloat16).transpose(1, 2)  # heads not dense
    assert rove.attention_varlen(q, k, v, cq, ck, out=odd) is odd
    assert _tensor.copies == before + 1 and torch.equal(odd, want)


def test_out_and_dtype_errors():
    g = np.random.default_rng(8)
    q, k, v, cq, ck = _packed(g)
    with pytest.raises(ValueError):
        rove.attention_varlen(q, k, v, cq, ck, out=np.empty((q.shape[0], 4, 16), np.float32))
    ro = np.empty(q.shape, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        rove.attention_varlen(q, k, v, cq, ck, out=ro)
    with pytest.raises(TypeError):
        rove.attention_varlen(q, k, v, cq, ck, out=torch.empty(q.shape))
    with pytest.raises(TypeError):
        rove.attention_varlen(q.astype(np.float64), k, v, cq, ck)
    with pytest.raises(TypeError):
        rove.attention_varlen(torch.from_numpy(q), torch.from_numpy(k), v, cq, ck)
    tq = torch.from_numpy(q).double().requires_grad_(True)
    with pytest.raises(TypeError):  # gradients: float32, bfloat16 or float16
        rove.attention_varlen(tq, torch.from_numpy(k).double(), torch.from_numpy(v).double(),
                              cq, ck)
    tq = torch.from_numpy(q).requires_grad_(True)
    with pytest.raises(ValueError):  # out= with autograd
        rove.attention_varlen(tq, torch.from_numpy(k), torch.from_numpy(v), cq, ck,
                              out=torch.empty(q.shape))


def test_empty_tensors_and_negated_out_views():
    """torch tensors without tokens (data_ptr 0): no queries gives empty results, no keys
    gives 0 and LSE -inf (also bf16); an out= that is a negated view (torch._neg_view) is
    written through it (rove.attention_varlen and rove.attention alike)."""
    g = np.random.default_rng(9)
    q = torch.from_numpy(g.uniform(-1, 1, (10, 4, 32)).astype(np.float32))
    k = torch.from_numpy(g.uniform(-1, 1, (10, 2, 32)).astype(np.float32))
    z2 = np.array([0, 0])
    out, lse = rove.attention_varlen(q[:0], k[:0], k[:0], z2, z2, return_lse=True)
    assert out.shape == (0, 4, 32) and lse.shape == (4, 0)
    for dt in (torch.float32, torch.bfloat16):
        out, lse = rove.attention_varlen(q[:3].to(dt), k[:0].to(dt), k[:0].to(dt), [0, 3], z2,
                                         return_lse=True)
        assert out.dtype == dt and (out == 0).all() and torch.isneginf(lse).all()
    cu = np.array([0, 4, 10])
    want = rove.attention_varlen(q, k, k, cu, cu)
    buf = torch.zeros(10, 4, 32)
    neg = torch._neg_view(buf)
    assert rove.attention_varlen(q, k, k, cu, cu, out=neg) is neg
    assert torch.equal(neg, want) and torch.equal(buf, -want)
    buf4 = torch.zeros(1, 10, 4, 32)
    neg4 = torch._neg_view(buf4)
    rove.attention(q[None], k[None], k[None], out=neg4)
    assert torch.equal(neg4, rove.attention(q[None], k[None], k[None]))


def test_numpy_angles_under_autograd():
    """numpy angles beside torch q that requires grad: float64 works (and matches the
    torch angles' gradients), another dtype is the forward's TypeError."""
    g = np.random.default_rng(6)
    q, k, v, cq, ck = _packed(g)
    qa = g.uniform(-9, 9, (q.shape[0], 2, 16))
    ka = g.uniform(-9, 9, (k.shape[0], 2, 16))
    grads = []
    for make in (lambda a: a, torch.from_numpy):
        tq = torch.tensor(q, requires_grad=True)
        rove.attention_varlen(tq, torch.tensor(k), torch.tensor(v), cq, ck, q_angles=make(qa),
                              kv_angles=make(ka)).square().sum().backward()
        grads.append(tq.grad)
    assert torch.equal(grads[0], grads[1])
    with pytest.raises(TypeError, match="float64"):
        rove.attention_varlen(torch.tensor(q, requires_grad=True), torch.tensor(k),
                              torch.tensor(v), cq, ck, q_angles=qa.astype(np.float32),
                              kv_angles=ka.astype(np.float32))


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("side", ["no keys", "no queries"])
def test_empty_side_with_explicit_angles(side, grad):
    """Explicit angles where every sequence has no keys (or no queries): the empty torch
    angles' data_ptr() was 0, C read it as angles not given for that side and refused the
    call as only one of the pair (numpy's empty arrays have an address, and worked)."""
    nq, nk = (3, 0) if side == "no keys" else (0, 2)
    cq, ck = np.array([0, nq], np.int32), np.array([0, nk], np.int32)
    g = torch.Generator().manual_seed(8)
    q, k = torch.randn(nq, 1, 4, generator=g), torch.randn(nk, 1, 4, generator=g)
    if grad:
        q.requires_grad_()
    qa, ka = torch.zeros(nq, 1, 2, dtype=torch.float64), torch.zeros(nk, 1, 2, dtype=torch.float64)
    out, lse = rove.attention_varlen(q, k, k, cq, ck, q_angles=qa, kv_angles=ka, return_lse=True)
    want, wlse = rove.attention_varlen(q.detach().numpy(), k.numpy(), k.numpy(), cq, ck,
                                       q_angles=qa.numpy(), kv_angles=ka.numpy(), return_lse=True)
    assert out.shape == (nq, 1, 4) and np.array_equal(out.detach().numpy(), want)
    assert np.array_equal(lse.detach().numpy(), wlse)  # (no keys: out 0, LSE -inf)
    if grad and nq:
        out.sum().backward()
        assert torch.equal(q.grad, torch.zeros_like(q))
