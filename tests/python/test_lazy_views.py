# SPDX-License-Identifier: MIT
"""Torch tensors whose memory does not hold their values: lazily negated views
(torch._neg_view, or x.conj().imag of a complex x, whose memory holds -x). librove reads
memory, so every path that hands a tensor to C must resolve them: the forward's view()
did, but in-place rotation, the sinks and the backward passes read the raw memory (the
rotation was lost, the sinks and the gradients had the wrong sign). Each case here equals
the same call on the plain tensor, bit for bit; and an out= whose elements may share
memory is refused."""
import numpy as np
import pytest

import rove


def _t(torch, *shape, seed=0, lo=-1.0, hi=1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g) * (hi - lo) + lo


def _neg(torch, x):
    """A tensor equal to x whose memory holds -x (and which is a view of that memory)."""
    m = (-x).detach().clone()
    n = torch._neg_view(m)
    assert n.is_neg() and torch.equal(n, x)
    return n, m


def test_conj_imag_is_a_neg_view(torch):
    x = _t(torch, 5)
    v = torch.complex(torch.zeros(5), -x).conj().imag
    assert v.is_neg() and torch.equal(v, x)  # the public way to get one


@pytest.mark.parametrize("fn", ["rotate", "rotate_angles"])
def test_inplace_rotation_of_a_neg_view(torch, fn):
    x = _t(torch, 2, 7, 3, 8)
    ang = _t(torch, 2, 7, 3, 4, seed=1).double()
    call = (lambda y, **kw: rove.rotate(y, **kw)) if fn == "rotate" else \
        (lambda y, **kw: rove.rotate_angles(y, ang, **kw))
    want = call(x.clone())
    n, m = _neg(torch, x)
    got = call(n, inplace=True)
    assert got is n and torch.equal(n, want)  # the rotation reached n (it was lost)
    assert torch.equal(m, -want)  # through its memory


@pytest.mark.parametrize("H", [1, 2])
def test_sinks_as_a_neg_view(torch, H):
    q, k, v = _t(torch, 1, 6, H, 8), _t(torch, 1, 9, H, 8, seed=1), _t(torch, 1, 9, H, 8, seed=2)
    s = _t(torch, H, seed=3, lo=0.5, hi=2.0)
    n, _ = _neg(torch, s)
    want = rove.attention(q, k, v, sinks=s, return_lse=True)
    got = rove.attention(q, k, v, sinks=n, return_lse=True)
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    cache = rove.KVCache(rove.Plan(H, H, 8), 1, 16)
    cache.append(k, v)
    assert torch.equal(cache.attention(q, sinks=n), cache.attention(q, sinks=s))
    # the differentiable path: output and the sinks' gradient
    leaf, twin = n.detach().clone().requires_grad_(), s.clone().requires_grad_()
    rove.attention(q, k, v, sinks=torch._neg_view(-leaf)).sum().backward()
    rove.attention(q, k, v, sinks=twin).sum().backward()
    assert torch.equal(leaf.grad, twin.grad)


def _grads(torch, f, inputs, neg_upstream=False):
    leaves = [x.clone().requires_grad_() for x in inputs]
    out = f(*leaves)
    out = out[0] if isinstance(out, tuple) else out
    up = _t(torch, *out.shape, seed=9).to(out.dtype)  # (a cast would resolve a neg view)
    if neg_upstream:  # an upstream gradient that is a neg view (a custom Function's)
        up = _neg(torch, up)[0]
    out.backward(up)
    return [x.grad for x in leaves]


@pytest.mark.parametrize("op", ["attention", "varlen", "gla"])
def test_backward_of_neg_view_inputs_and_gradients(torch, op):
    if op == "attention":
        xs = [_t(torch, 1, 6, 2, 8, seed=i) for i in range(3)]
        f = lambda q, k, v: rove.attention(q, k, v, return_lse=True)  # noqa: E731
    elif op == "varlen":
        xs = [_t(torch, 9, 2, 8, seed=i) for i in range(3)]
        f = lambda q, k, v: rove.attention_varlen(q, k, v, [0, 4, 9], [0, 4, 9])  # noqa: E731
    else:
        xs = [_t(torch, 1, 6, 2, 8, seed=i) for i in range(3)] + \
            [_t(torch, 1, 6, 2, 8, seed=4, lo=-1.0, hi=-0.1)]
        f = lambda q, k, v, g: rove.gla(q, k, v, g)  # noqa: E731
    want = _grads(torch, f, xs)
    assert all(w.abs().sum() > 0 for w in want)

    def lazy(*leaves):  # the same values, each read through a neg view of its negation
        return f(*(torch._neg_view(-x) for x in leaves))
    assert all(torch.equal(a, b) for a, b in zip(_grads(torch, lazy, xs), want))
    got = _grads(torch, f, xs, neg_upstream=True)
    assert all(torch.equal(a, b) for a, b in zip(got, want))


def test_selective_angles_backward_of_a_neg_view_gradient(torch):
    """(The angles' gradient does not depend on phi's values, only on the upstream one,
    float64 like the angles.)"""
    phi = _t(torch, 1, 7, 2, 4)
    want = _grads(torch, lambda p: rove.selective_angles(p), [phi])
    got = _grads(torch, lambda p: rove.selective_angles(p), [phi], neg_upstream=True)
    assert want[0].abs().sum() > 0 and torch.equal(got[0], want[0])


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_out_whose_elements_may_share_memory_is_refused(torch, kind):
    """An as_strided out= whose head stride (4) is below head_dim (8) made heads overlap,
    and was written silently (stride 0 was refused before); dense and padded outs pass."""
    q = _t(torch, 1, 5, 2, 8)
    want = rove.attention(q, q, q)
    buf = torch.zeros(200)
    bad = buf.as_strided((1, 5, 2, 8), (80, 16, 4, 1))
    padded = buf.as_strided((1, 5, 2, 8), (100, 20, 10, 1))
    if kind == "numpy":
        q, want = q.numpy(), want.numpy()
        bad = np.lib.stride_tricks.as_strided(buf.numpy(), (1, 5, 2, 8), (320, 64, 16, 4))
        padded = np.lib.stride_tricks.as_strided(buf.numpy(), (1, 5, 2, 8), (400, 80, 40, 4))
    with pytest.raises(ValueError, match="may share memory"):
        rove.attention(q, q, q, out=bad)
    rove.attention(q, q, q, out=padded)
    assert (torch.equal(padded, want) if kind == "torch" else np.array_equal(padded, want))
    x = _t(torch, 1, 5, 2, 8)
    with pytest.raises(ValueError, match="may share memory"):
        rove.rotate(x.as_strided((1, 5, 2, 8), (80, 16, 4, 1)), inplace=True)
