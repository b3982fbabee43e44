# SPDX-License-Identifier: MIT
"""rove.attention_varlen: packed sequences against one rove.attention per sequence
(bitwise) and, without rotations, against PyTorch SDPA per sequence with the bottom-right
causal mask; the LSE layout [heads, total_q]; a sequence without keys; torch inputs;
bad cu_seqlens."""
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


@pytest.mark.parametrize("angles", [False, True])
def test_gradients_equal_per_sequence_autograd(angles):
    """Under torch.autograd the gradients are those of one differentiable rove.attention per
    sequence (itself tested against float64 torch autograd in test_autograd.py)."""
    g = np.random.default_rng(4)
    q, k, v, cq, ck = _packed(g)
    t = lambda x: torch.tensor(x, requires_grad=True)  # noqa: E731
    qa = ka = None
    if angles:
        qa = torch.tensor(g.uniform(-9, 9, (q.shape[0], 2, 16)), requires_grad=True)
        ka = torch.tensor(g.uniform(-9, 9, (k.shape[0], 2, 16)), requires_grad=True)
    tq, tk, tv = t(q), t(k), t(v)
    dout = torch.tensor(g.uniform(-1, 1, q.shape), dtype=torch.float32)
    out = rove.attention_varlen(tq, tk, tv, cq, ck, q_angles=qa, kv_angles=ka)
    (out * dout).sum().backward()
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
        o1 = rove.attention(q1, k1, v1, q_angles=a1, kv_angles=b1)
        (o1 * dout[qs]).sum().backward()
        assert torch.equal(o1.detach(), out.detach()[qs])
        for got, want in ((tq.grad[qs], q1.grad), (tk.grad[ks], k1.grad), (tv.grad[ks], v1.grad)):
            assert torch.equal(got, want)
        if angles:
            assert torch.equal(qa.grad[qs], a1.grad) and torch.equal(ka.grad[ks], b1.grad)
