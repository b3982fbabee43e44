# SPDX-License-Identifier: MIT
"""rove.flash_attn: flash-attn's flash_attn_func / flash_attn_varlen_func signatures on
librove, against a float64 torch reference written from flash-attn's documented
semantics (bottom-right causal alignment, window_size=(left, right) with -1 unbounded and
the right bound 0 under causal, softcap of the scaled scores, natural-log LSE), and the
arguments librove cannot honour refused."""
import math

import numpy as np
import pytest
import torch

import rove
from rove.flash_attn import flash_attn_func, flash_attn_varlen_func


def fa_ref(q, k, v, scale, causal, window, softcap, clamp_k=None):
    """One sequence, float64: q [sq, h, d], k / v [sk, hk, d] -> (out, lse [h, sq]); window
    bounds >= clamp_k (default sk; varlen: max_seqlen_k) are no bounds, as in flash-attn."""
    sq, h, d = q.shape
    sk, hk = k.shape[:2]
    q, k, v = (x.double().transpose(0, 1) for x in (q, k, v))
    k, v = (x.repeat_interleave(h // hk, 0) for x in (k, v))
    s = q @ k.transpose(1, 2) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    left, right = (-1 if w >= (clamp_k or sk) else w for w in window)  # flash_api.cpp
    if causal:
        right = 0
    P = torch.arange(sq)[:, None] + sk - sq
    j = torch.arange(sk)[None, :]
    ok = torch.ones(sq, sk, dtype=torch.bool)
    if left >= 0:
        ok &= j >= P - left
    if right >= 0:
        ok &= j <= P + right
    s = s.masked_fill(~ok, -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    return (p @ v).transpose(0, 1), lse


CASES = [  # (causal, window_size, softcap, softmax_scale)
    (False, (-1, -1), 0.0, None), (True, (-1, -1), 0.0, None), (True, (3, 0), 0.0, 0.3),
    (True, (2, -1), 5.0, None), (False, (2, 2), 0.0, None), (False, (0, 0), 2.0, 0.5),
    (False, (3, 0), 0.0, None), (False, (-1, 0), 0.0, None),  # right 0: causal
    (False, (5, 5), 0.0, None), (False, (30, 12), 0.0, None)]  # bounds >= seqlen_k: none


@pytest.mark.parametrize("causal, window, softcap, scale", CASES)
@pytest.mark.parametrize("sq, sk", [(9, 9), (4, 11), (11, 4)])
def test_flash_attn_func_matches_flash_attn_semantics(causal, window, softcap, scale, sq, sk):
    g = torch.Generator().manual_seed(7)
    q = torch.randn(2, sq, 4, 16, generator=g)
    k, v = (torch.randn(2, sk, 2, 16, generator=g) for _ in range(2))
    out, lse, probs = flash_attn_func(q, k, v, softmax_scale=scale, causal=causal,
                                      window_size=window, softcap=softcap,
                                      return_attn_probs=True)
    assert probs is None and lse.shape == (2, 4, sq) and lse.dtype == torch.float32
    for b in range(2):
        want, wlse = fa_ref(q[b], k[b], v[b], scale or 16 ** -0.5, causal, window, softcap)
        assert (out[b].double() - want).abs().max() < 2e-6
        seen = torch.isfinite(wlse)  # rows with no key: -inf here, +inf in flash-attn
        assert (lse[b].double()[seen] - wlse[seen]).abs().max() < 2e-6
        assert torch.equal(torch.isneginf(lse[b]), ~seen)
    assert torch.equal(flash_attn_func(q, k, v, softmax_scale=scale, causal=causal,
                                       window_size=window, softcap=softcap), out)


@pytest.mark.parametrize("causal, window, softcap, scale", CASES + [(False, (8, 8), 0.0, None),
                                                                   (False, (12, 12), 0.0, None)])
@pytest.mark.parametrize("lq, lk", [([5, 1, 8, 0], [5, 3, 6, 2]), ([20, 4], [3, 10])])
def test_flash_attn_varlen_func_matches_flash_attn_semantics(causal, window, softcap, scale,
                                                             lq, lk):
    cq = torch.tensor(np.cumsum([0] + lq), dtype=torch.int32)
    ck = torch.tensor(np.cumsum([0] + lk), dtype=torch.int32)
    g = torch.Generator().manual_seed(8)
    q = torch.randn(sum(lq), 4, 16, generator=g, requires_grad=True)
    k, v = (torch.randn(sum(lk), 2, 16, generator=g, requires_grad=True) for _ in range(2))
    out, lse, _ = flash_attn_varlen_func(q, k, v, cq, ck, max(lq), max(lk),
                                         softmax_scale=scale, causal=causal,
                                         window_size=window, softcap=softcap,
                                         return_attn_probs=True)
    assert lse.shape == (4, sum(lq))
    for i in range(len(lq)):
        a, b, c, d = int(cq[i]), int(cq[i + 1]), int(ck[i]), int(ck[i + 1])
        if b == a:
            continue
        want, _ = fa_ref(q[a:b].detach(), k[c:d].detach(), v[c:d].detach(),
                         scale or 16 ** -0.5, causal, window, softcap, clamp_k=max(lk))
        assert (out[a:b].double() - want).abs().max() < 2e-6, i
    out.sum().backward()  # differentiable as rove.attention_varlen
    assert q.grad is not None and k.grad is not None and torch.isfinite(v.grad).all()


def test_flash_attn_func_gradients_are_rove_attentions():
    g = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(1, 7, 2, 8, generator=g, requires_grad=True) for _ in range(3))
    a = flash_attn_func(q, k, v, causal=True, window_size=(2, 0))
    ga = torch.autograd.grad(a.sum(), (q, k, v))
    b = rove.attention(q, k, v, rotate="none", causal=True, window=3)
    gb = torch.autograd.grad(b.sum(), (q, k, v))
    assert torch.equal(a, b) and all(torch.equal(x, y) for x, y in zip(ga, gb))


@pytest.mark.parametrize("kw, match", [
    (dict(dropout_p=0.1), "dropout"), (dict(alibi_slopes=torch.ones(4)), "ALiBi"),
    (dict(window_size=(2, 1), causal=False), "symmetric"),
    (dict(window_size=(-1, 2), causal=False), "symmetric"),
    (dict(window_size=(-2, -1)), ">= -1")])
def test_what_librove_cannot_honour_is_refused(kw, match):
    q = torch.zeros(1, 4, 4, 8)
    k = torch.zeros(1, 4, 2, 8)
    with pytest.raises(ValueError, match=match):
        flash_attn_func(q, k, k, **kw)


def test_varlen_refusals():
    q, k = torch.zeros(6, 4, 8), torch.zeros(6, 2, 8)
    cu = torch.tensor([0, 2, 6], dtype=torch.int32)
    with pytest.raises(ValueError, match="max_seqlen_q=3 is below"):
        flash_attn_varlen_func(q, k, k, cu, cu, 3, 4)
    with pytest.raises(ValueError, match="block_table"):
        flash_attn_varlen_func(q, k, k, cu, cu, 4, 4, block_table=torch.zeros(2, 1))


def test_odd_head_dim_is_refused():
    """flash-attn pads any head dim; librove's is even (its rotations pair dims)."""
    q, k = torch.zeros(6, 4, 7), torch.zeros(6, 2, 7)
    cu = torch.tensor([0, 2, 6], dtype=torch.int32)
    with pytest.raises(ValueError, match="head_dim must be even"):
        flash_attn_varlen_func(q, k, k, cu, cu, 4, 4)
    with pytest.raises(ValueError, match="head_dim must be even"):
        flash_attn_func(q[None], k[None], k[None])
