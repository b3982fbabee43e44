# SPDX-License-Identifier: MIT
"""Attention with no query rows (batch 0 or q_len 0), as PyTorch's SDPA takes it: an empty
output of q's dtype and the shape SDPA gives, an empty LSE, zero gradients; every check
of the arguments still runs, librove itself is not called (there is nothing to compute);
queries without keys stay an error."""
import numpy as np
import pytest

import rove

torch = pytest.importorskip("torch")
F = torch.nn.functional

# (q shape, k shape) in bshd: batch 0; no query rows with and without keys; both
SHAPES = [((0, 8, 4, 32), (0, 8, 2, 32)), ((2, 0, 4, 32), (2, 8, 2, 32)),
          ((2, 0, 4, 32), (2, 0, 2, 32)), ((0, 0, 4, 32), (0, 0, 2, 32))]


@pytest.fixture
def no_forward_call(monkeypatch):
    """Fail the test if librove's forward or backward is reached."""
    from rove import _lib

    def spy(*a):
        raise AssertionError("librove was called for an empty attention")
    for fn in ("rove_attention_forward", "rove_attention_forward_typed",
               "rove_attention_backward"):
        monkeypatch.setattr(_lib.lib, fn, spy)


def sdpa(q, k, v, bhsd):
    """torch's SDPA in the given layout (its own is bhsd), GQA by enable_gqa."""
    t = (lambda x: x) if bhsd else (lambda x: x.transpose(-3, -2))
    return t(F.scaled_dot_product_attention(t(q), t(k), t(v), enable_gqa=True))


@pytest.mark.parametrize("qs,ks", SHAPES)
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_shapes_like_sdpa(qs, ks, layout, dtype, no_forward_call):
    bhsd = layout == "bhsd"
    perm = (lambda s: (s[0], s[2], s[1], s[3])) if bhsd else (lambda s: s)
    q, k, v = (torch.randn(perm(s), dtype=dtype) for s in (qs, ks, ks))
    out, lse = rove.attention(q, k, v, layout=layout, return_lse=True)
    ref = sdpa(q, k, v, bhsd)
    assert out.shape == ref.shape and out.dtype == ref.dtype == dtype
    assert lse.shape == (qs[0], qs[2], qs[1]) and lse.dtype == torch.float32
    # numpy: the same shapes (float32)
    qn, kn, vn = (x.float().numpy() for x in (q, k, v))
    on, ln = rove.attention(qn, kn, vn, layout=layout, return_lse=True)
    assert isinstance(on, np.ndarray) and on.shape == tuple(ref.shape)
    assert on.dtype == np.float32 and ln.shape == tuple(lse.shape)


def test_three_d_and_plan_and_out(no_forward_call):
    q, k, v = torch.randn(0, 4, 32), torch.randn(5, 2, 32), torch.randn(5, 2, 32)
    out, lse = rove.attention(q, k, v, return_lse=True)
    assert out.shape == (0, 4, 32) and lse.shape == (4, 0)
    p = rove.Plan(4, 2, 32, causal=False)
    assert p.attention(q, k, v).shape == (0, 4, 32)
    o = torch.empty(2, 0, 4, 32)
    v0 = o._version
    r = rove.attention(torch.randn(2, 0, 4, 32), torch.randn(2, 3, 2, 32),
                       torch.randn(2, 3, 2, 32), out=o)
    assert r is o and o._version > v0  # out= "written", as any call marks it
    # positions, angles and sinks of the right (empty) shapes are taken
    r = rove.attention(torch.randn(2, 0, 4, 32), torch.randn(2, 3, 2, 32),
                       torch.randn(2, 3, 2, 32), q_pos=torch.zeros(2, 0, dtype=torch.int64),
                       kv_pos=torch.arange(3), sinks=torch.zeros(4))
    assert r.shape == (2, 0, 4, 32)
    r = rove.attention(torch.randn(2, 0, 4, 32), torch.randn(2, 3, 2, 32),
                       torch.randn(2, 3, 2, 32), q_angles=torch.zeros(2, 0, 2, 16, dtype=torch.float64),
                       kv_angles=torch.zeros(2, 3, 2, 16, dtype=torch.float64))
    assert r.shape == (2, 0, 4, 32)


def test_checks_still_run(no_forward_call):
    q, k, v = torch.randn(2, 0, 4, 32), torch.randn(2, 3, 2, 32), torch.randn(2, 3, 2, 32)
    with pytest.raises(ValueError, match="q_pos has shape"):
        rove.attention(q, k, v, q_pos=torch.zeros(2, 1, dtype=torch.int64))
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        rove.attention(q, torch.randn(2, 3, 3, 32), torch.randn(2, 3, 3, 32))
    with pytest.raises(ValueError, match="head_dim must be even"):
        rove.attention(torch.randn(0, 1, 4, 33), torch.randn(0, 1, 2, 33), torch.randn(0, 1, 2, 33))
    with pytest.raises(ValueError, match="batch of q"):
        rove.attention(torch.randn(0, 1, 4, 32), k, v)
    with pytest.raises(ValueError, match="sinks"):
        rove.attention(q, k, v, sinks=torch.zeros(3))
    with pytest.raises(ValueError, match="out has shape"):
        rove.attention(q, k, v, out=torch.empty(2, 1, 4, 32))
    # queries without keys: still an error (a softmax over nothing)
    with pytest.raises(ValueError, match="kv_len must be > 0"):
        rove.attention(torch.randn(2, 1, 4, 32), k[:, :0], v[:, :0])


@pytest.mark.parametrize("qs,ks", SHAPES)
def test_gradients_zero_like_sdpa(qs, ks, no_forward_call):
    q, k, v = (torch.randn(s, requires_grad=True) for s in (qs, ks, ks))
    sinks = torch.zeros(qs[2], requires_grad=True)
    out, lse = rove.attention(q, k, v, return_lse=True, sinks=sinks)
    (out.sum() + lse.sum()).backward()
    q2, k2, v2 = (x.detach().clone().requires_grad_() for x in (q, k, v))
    sdpa(q2, k2, v2, False).sum().backward()
    for g, r in ((q.grad, q2.grad), (k.grad, k2.grad), (v.grad, v2.grad)):
        assert g.shape == r.shape and torch.equal(g, r)  # zeros (empty for q)
    assert torch.equal(sinks.grad, torch.zeros(qs[2]))


def test_angle_gradients_zero(no_forward_call):
    q, k, v = torch.randn(1, 0, 4, 32), torch.randn(1, 3, 2, 32), torch.randn(1, 3, 2, 32)
    qa = torch.zeros(1, 0, 2, 16, dtype=torch.float64, requires_grad=True)
    ka = torch.randn(1, 3, 2, 16, dtype=torch.float64, requires_grad=True)
    k.requires_grad_()
    rove.attention(q, k, v, q_angles=qa, kv_angles=ka).sum().backward()
    assert torch.equal(ka.grad, torch.zeros_like(ka)) and qa.grad.shape == qa.shape
    assert torch.equal(k.grad, torch.zeros_like(k))


def test_custom_op_and_cache(no_forward_call):
    from rove import torch_ops
    q = torch.randn(2, 0, 4, 32, requires_grad=True)
    k = torch.randn(2, 3, 2, 32, requires_grad=True)
    v = torch.randn(2, 3, 2, 32, requires_grad=True)
    out = torch_ops.attention(q, k, v)
    assert out.shape == (2, 0, 4, 32)
    out.sum().backward()
    assert torch.equal(k.grad, torch.zeros_like(k)) and torch.equal(v.grad, torch.zeros_like(v))


def test_cache_without_queries():
    p = rove.Plan(4, 2, 32)
    c = rove.KVCache(p, batch=2, capacity=8)
    c.append(torch.randn(2, 3, 2, 32), torch.randn(2, 3, 2, 32))
    n = len(c)
    assert c.attention(torch.randn(2, 0, 4, 32)).shape == (2, 0, 4, 32)
    assert len(c) == n == 3  # nothing appended, nothing changed


def test_empty_numpy_out_and_empty_cache():
    """numpy gives empty arrays all-zero strides: not "elements that share memory"; an
    empty cache attends no rows (queries with rows still need keys)."""
    q, k = np.zeros((2, 0, 4, 32), np.float32), np.ones((2, 3, 2, 32), np.float32)
    o = np.empty((2, 0, 4, 32), np.float32)
    assert rove.attention(q, k, k, out=o) is o
    ro = np.empty((2, 0, 4, 32), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        rove.attention(q, k, k, out=ro)
    c = rove.KVCache(rove.Plan(4, 2, 32), batch=2, capacity=8)
    assert c.attention(torch.randn(2, 0, 4, 32)).shape == (2, 0, 4, 32)
    assert c.attention(q, out=o) is o
    with pytest.raises(ValueError, match="empty: append"):
        c.attention(torch.randn(2, 1, 4, 32))


def test_torch_func_over_empty():
    """jacrev of an empty output (SDPA's shape) and vmap over a dimension of size 0 (the
    shape vmap gives any op that has a batching rule): no values."""
    k, v = torch.randn(2, 7, 2, 16), torch.randn(2, 7, 2, 16)
    q0 = torch.randn(2, 0, 4, 16)
    j = torch.func.jacrev(lambda kk: rove.attention(q0, kk, v))(k)
    jr = torch.func.jacrev(lambda kk: sdpa(q0, kk, v, False))(k)
    assert j.shape == jr.shape == (2, 0, 4, 16, 2, 7, 2, 16)
    qs = torch.randn(0, 2, 3, 4, 16)  # vmap over 0 elements of non-empty queries (torch's
    out = torch.func.vmap(lambda x: rove.attention(x, k, v))(qs)  # vmap of SDPA refuses it)
    assert out.shape == (0, 2, 3, 4, 16)
    g = torch.func.vmap(torch.func.grad(lambda x: rove.attention(x, k, v).sum()))(qs)
    assert g.shape == qs.shape
