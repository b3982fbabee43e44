# SPDX-License-Identifier: MIT
"""rove.attention under torch.autograd (rove_attention_backward): dq, dk, dv against
PyTorch's own autograd through a float64 torch implementation of docs/DESIGN.md §1 (the
reference users trust: torch's derivatives of torch ops), for every rotation set, GQA,
windows, softcap, YaRN, explicit positions, explicit angles (with their gradients), both
layouts and 3-D inputs;
torch.autograd.gradcheck on float32 (finite differences of librove's own forward); the
refusals of what the differentiable path does not take."""
import math
import zlib

import numpy as np
import pytest

import rove
from reference import rel_err, torch_rotate

torch = pytest.importorskip("torch")

TOL = 1e-4  # fp32 gradients vs float64 autograd, relative to max |grad|


@pytest.fixture
def no_c_call(monkeypatch):
    """Fail the test if librove is reached (the refusals happen in Python)."""
    from rove import _lib

    def spy(*a):
        raise AssertionError("librove was called with input Python should have rejected")
    for fn in ("rove_attention_forward", "rove_attention_backward", "rove_plan_create"):
        monkeypatch.setattr(_lib.lib, fn, spy)
    rove.clear_plan_cache()
    yield
    rove.clear_plan_cache()


def torch_ref(q, k, v, *, rope, rotate, causal, window=0, softcap=0.0, q_pos=None,
              kv_pos=None, q_angles=None, kv_angles=None, return_lse=False):
    """Attention in float64 torch ops, bshd [B, L, H, d]; angles [B, L, Hk, r/2] replace
    pos * w (and are differentiated by torch when they require grad); with return_lse
    also the softmax's log-sum-exp [B, H, Lq] (-inf on rows with no key)."""
    w, m = rove.inv_freq(rope, q.shape[-1])
    w = torch.as_tensor(np.asarray(w), dtype=torch.float64)
    B, Lq, H, d = q.shape
    Lk, Hk = k.shape[1], k.shape[2]
    g, r = H // Hk, rope.rotary_dim or d
    P = torch.arange(Lk - Lq, Lk) if q_pos is None else torch.as_tensor(q_pos)
    p = torch.arange(Lk) if kv_pos is None else torch.as_tensor(kv_pos)
    P, p = P.expand(B, Lq).double(), p.expand(B, Lk).double()
    qa, ka = P[..., None, None] * w, p[..., None, None] * w  # [B, L, 1, r/2]
    if q_angles is not None:  # per KV head: each query head uses its group's angles
        qa, ka = q_angles.repeat_interleave(g, dim=2), kv_angles.repeat_interleave(g, dim=2)
    kk, vv = k.repeat_interleave(g, dim=2), v.repeat_interleave(g, dim=2)
    mvec = torch.ones(d, dtype=torch.float64)
    mvec[:r] = m
    rot = {"rove": "QKVO", "rope": "QK", "none": ""}[rotate]
    qt = torch_rotate(q, qa, r, rope.pairing) * mvec if "Q" in rot else q
    kt = torch_rotate(kk, ka, r, rope.pairing) * mvec if "K" in rot else kk
    vt = torch_rotate(vv, ka, r, rope.pairing) if "V" in rot else vv
    s = torch.einsum("bihd,bjhd->bhij", qt, kt) / math.sqrt(d)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    diff = P[:, None, :, None] - p[:, None, None, :]
    vis = torch.ones_like(diff, dtype=torch.bool)
    if causal:
        vis &= diff >= 0
    if window:
        vis &= (diff if causal else diff.abs()) < window
    s = s.masked_fill(~vis, -math.inf)
    a = torch.softmax(s, dim=-1).nan_to_num(0.0)  # rows with no key: 0
    y = torch.einsum("bhij,bjhd->bihd", a, vt)
    if "O" in rot:
        y = torch_rotate(y, qa, r, rope.pairing, sign=-1.0)
    return (y, torch.logsumexp(s, dim=-1)) if return_lse else y


CASES = [  # (B, Lq, Lk, H, Hk, d, kwargs)
    (1, 24, 24, 2, 2, 16, dict(rotate="rove")),
    (2, 17, 17, 4, 2, 32, dict(rotate="rope")),
    (1, 20, 20, 3, 1, 16, dict(rotate="none", causal=False)),
    (2, 5, 40, 4, 2, 32, dict(rotate="rove")),                       # bottom-right
    (1, 30, 30, 2, 2, 16, dict(rotate="rove", window=7, softcap=5.0)),
    (1, 70, 70, 4, 1, 64, dict(rotate="rove")),                      # two key blocks
    # 10 key blocks in 4 groups of 2 and 3: key sets of 2 and a last set of 1 (phase 2)
    (1, 600, 600, 8, 8, 16, dict(rotate="rove")),
    (1, 12, 12, 2, 2, 24, dict(rotate="rove", rope=rove.RopeConfig(
        rotary_dim=8, pairing="interleaved", scaling="yarn", factor=4.0,
        original_max_position=8))),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_gradients_match_torch_autograd(case, layout):
    B, Lq, Lk, H, Hk, d, kw = case
    kw = dict(kw)
    rope = kw.pop("rope", rove.RopeConfig())
    causal = kw.pop("causal", True)
    g = np.random.default_rng(zlib.crc32(repr((case[:6], layout)).encode()))
    q64 = torch.tensor(g.uniform(-1.5, 1.5, (B, Lq, H, d)), requires_grad=True)
    k64 = torch.tensor(g.uniform(-1.5, 1.5, (B, Lk, Hk, d)), requires_grad=True)
    v64 = torch.tensor(g.uniform(-1.0, 1.0, (B, Lk, Hk, d)), requires_grad=True)
    dout = torch.tensor(g.uniform(-1.0, 1.0, (B, Lq, H, d)))
    ref = torch_ref(q64, k64, v64, rope=rope, causal=causal, **kw)
    (ref * dout).sum().backward()

    def user(x):  # the caller's layout
        x = x.detach().float()
        return (x.transpose(1, 2).contiguous() if layout == "bhsd" else x).requires_grad_()
    q, k, v = user(q64), user(k64), user(v64)
    out = rove.attention(q, k, v, rope=rope, causal=causal, layout=layout, **kw)
    assert out.requires_grad
    do = dout.float().transpose(1, 2) if layout == "bhsd" else dout.float()
    (out * do).sum().backward()
    back = (lambda x: x.transpose(1, 2)) if layout == "bhsd" else (lambda x: x)
    assert rel_err(back(out.detach()).numpy(), ref.detach().numpy()) < 2e-5
    for name, got, want in (("dq", q.grad, q64.grad), ("dk", k.grad, k64.grad),
                            ("dv", v.grad, v64.grad)):
        assert got.shape == (user(want).shape), name
        e = rel_err(back(got).numpy(), want.numpy())
        assert e < TOL, f"{name}: rel err {e:.3g}"


def test_positions_3d_and_masked_rows():
    """3-D inputs, explicit positions, and query rows that see no key (grad 0, no NaN)."""
    g = np.random.default_rng(3)
    Lq, Lk, H, Hk, d = 6, 8, 2, 1, 16
    q64 = torch.tensor(g.uniform(-1, 1, (1, Lq, H, d)), requires_grad=True)
    k64 = torch.tensor(g.uniform(-1, 1, (1, Lk, Hk, d)), requires_grad=True)
    v64 = torch.tensor(g.uniform(-1, 1, (1, Lk, Hk, d)), requires_grad=True)
    qp = np.array([100, 3, 103, 104, 2, 110], dtype=np.int32)  # rows 1 and 4 see no key
    kp = np.arange(100, 100 + Lk, dtype=np.int32)
    ref = torch_ref(q64, k64, v64, rope=rove.RopeConfig(), rotate="rove", causal=True,
                    q_pos=qp, kv_pos=kp)
    ref.sum().backward()
    q, k, v = (x.detach()[0].float().requires_grad_() for x in (q64, k64, v64))
    out = rove.attention(q, k, v, q_pos=qp, kv_pos=kp)
    out.sum().backward()
    for got, want in ((q.grad, q64.grad[0]), (k.grad, k64.grad[0]), (v.grad, v64.grad[0])):
        assert torch.isfinite(got).all()
        assert rel_err(got.numpy(), want.numpy()) < TOL
    assert (q.grad[[1, 4]] == 0).all()


@pytest.mark.filterwarnings("ignore:Input #")  # gradcheck prefers float64 inputs
def test_gradcheck_float32():
    """torch.autograd.gradcheck of librove's forward against its backward (finite
    differences in float32, hence the loose tolerances)."""
    g = np.random.default_rng(7)
    q, k, v = (torch.tensor(g.uniform(-1, 1, (1, 6, 2, 8)), dtype=torch.float32,
                            requires_grad=True) for _ in range(3))
    fn = lambda q, k, v: rove.attention(q, k, v, rotate="rove")  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, k, v), eps=1e-2, atol=2e-3, rtol=2e-2,
                                    fast_mode=False)


def test_plan_attention_and_training_step():
    """Plan.attention is differentiable too, and a few SGD steps on q lower a loss."""
    plan = rove.Plan(2, 2, 16)
    g = np.random.default_rng(11)
    q = torch.tensor(g.uniform(-1, 1, (1, 10, 2, 16)), dtype=torch.float32, requires_grad=True)
    k, v = (torch.tensor(g.uniform(-1, 1, (1, 10, 2, 16)), dtype=torch.float32)
            for _ in range(2))
    target = torch.zeros(1, 10, 2, 16)
    losses = []
    for _ in range(5):
        loss = ((plan.attention(q, k, v) - target) ** 2).mean()
        losses.append(float(loss.detach()))
        loss.backward()
        with torch.no_grad():
            q -= 5.0 * q.grad
            q.grad = None
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[3], CASES[4], CASES[7]])
@pytest.mark.parametrize("use_out", [True, False])
def test_lse_gradients_match_torch_autograd(case, use_out):
    """The LSE is differentiable (rove_attention_grads.d_lse): a loss through it, alone
    (no gradient reaches out) or with out, against float64 torch's logsumexp."""
    B, Lq, Lk, H, Hk, d, kw = case
    kw = dict(kw)
    rope = kw.pop("rope", rove.RopeConfig())
    causal = kw.pop("causal", True)
    gen = np.random.default_rng(11)
    q0, k0, v0 = (gen.standard_normal(sh).astype(np.float32)
                  for sh in ((B, Lq, H, d), (B, Lk, Hk, d), (B, Lk, Hk, d)))
    wo = torch.from_numpy(gen.standard_normal((B, Lq, H, d)))
    wl = torch.from_numpy(gen.standard_normal((B, H, Lq)))

    def loss(out, lse):
        lse = lse.double()
        l_ = (lse.masked_fill(~torch.isfinite(lse), 0.0) * wl).sum()
        return l_ + (out.double() * wo).sum() if use_out else l_
    q, k, v = (torch.tensor(x, requires_grad=True) for x in (q0, k0, v0))
    out, lse = rove.attention(q, k, v, rope=rope, causal=causal, return_lse=True, **kw)
    assert lse.requires_grad
    loss(out, lse).backward()
    rq, rk, rv = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q0, k0, v0))
    ro, rl = torch_ref(rq, rk, rv, rope=rope, causal=causal, return_lse=True, **kw)
    loss(ro, rl).backward()
    for got, want in ((q.grad, rq.grad), (k.grad, rk.grad), (v.grad, rv.grad)):
        if want is None:  # the LSE alone does not depend on v: librove's dv is 0
            want = torch.zeros_like(got, dtype=torch.float64)
        assert rel_err(got, want) < TOL
    # torch.func: the same gradient (it was a silent zero while the LSE was not
    # differentiable)
    g = torch.func.grad(lambda x: loss(*rove.attention(x, k.detach(), v.detach(), rope=rope,
                                                         causal=causal, return_lse=True, **kw)))
    assert torch.equal(g(q.detach()), q.grad)


HALF_CASES = [CASES[0], CASES[1], CASES[2], CASES[3], CASES[4], CASES[6]]
HALF_TOL = {torch.bfloat16: 8e-3, torch.float16: 1e-3}  # ~3x the measured (a grad's rounding)


@pytest.mark.parametrize("case", HALF_CASES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_half_precision_gradients(case, dtype, layout):
    """bf16 / fp16 q, k, v that require grad: gradients in their own dtypes, against
    float64 autograd on the same (widened) values; without rotation also against torch
    SDPA's own half-precision backward, which librove must not be worse than (it widens
    exactly and rounds each gradient once)."""
    B, Lq, Lk, H, Hk, d, kw = case
    kw = dict(kw)
    rope = kw.pop("rope", rove.RopeConfig())
    causal = kw.pop("causal", True)
    g = np.random.default_rng(zlib.crc32(repr((case[:6], str(dtype), layout)).encode()))
    q, k, v, dout = (torch.tensor(g.uniform(-a, a, s)).to(dtype) for a, s in (
        (1.5, (B, Lq, H, d)), (1.5, (B, Lk, Hk, d)), (1.0, (B, Lk, Hk, d)), (1.0, (B, Lq, H, d))))
    q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
    (torch_ref(q64, k64, v64, rope=rope, causal=causal, **kw) * dout.double()).sum().backward()
    t = (lambda x: x.transpose(1, 2)) if layout == "bhsd" else (lambda x: x)
    qh, kh, vh = (t(x).clone().requires_grad_() for x in (q, k, v))
    out = rove.attention(qh, kh, vh, rope=rope, causal=causal, layout=layout, **kw)
    assert out.dtype == dtype
    (out * t(dout)).sum().backward()
    errs = []
    for name, got, want in (("dq", qh.grad, q64.grad), ("dk", kh.grad, k64.grad),
                            ("dv", vh.grad, v64.grad)):
        assert got.dtype == dtype and got.shape == t(want).shape, name
        errs.append(rel_err(t(got).double().numpy(), want.numpy()))
        assert errs[-1] < HALF_TOL[dtype], f"{name}: rel err {errs[-1]:.3g}"
    if kw.get("rotate") == "none":  # CASES[2]: no window or softcap, Lq = Lk (SDPA's form)
        F = torch.nn.functional
        qs, ks, vs = (x.transpose(1, 2).clone().requires_grad_() for x in (q, k, v))
        o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, enable_gqa=True)
        (o * dout.transpose(1, 2)).sum().backward()
        for name, e, x, want in zip(("dq", "dk", "dv"), errs, (qs, ks, vs),
                                    (q64.grad, k64.grad, v64.grad)):
            e_sdpa = rel_err(x.grad.transpose(1, 2).double().numpy(), want.numpy())
            assert e <= 1.5 * e_sdpa, f"{name}: {e:.3g} against SDPA's {e_sdpa:.3g}"


def test_mixed_dtype_gradients():
    """q float32, k bfloat16, v float16 (each its own type, as the forward takes them):
    each gradient in its input's dtype, the float32 backward on the widened values."""
    g = np.random.default_rng(5)
    q = torch.tensor(g.uniform(-1, 1, (1, 9, 4, 16)), dtype=torch.float32, requires_grad=True)
    k = torch.tensor(g.uniform(-1, 1, (1, 9, 2, 16))).bfloat16().requires_grad_()
    v = torch.tensor(g.uniform(-1, 1, (1, 9, 2, 16))).half().requires_grad_()
    out = rove.attention(q, k, v)
    assert out.dtype == torch.float32
    out.sum().backward()
    q2, k2, v2 = (x.detach().float().requires_grad_() for x in (q, k, v))
    rove.attention(q2, k2, v2).sum().backward()  # the same widened values, float32 throughout
    assert torch.equal(q.grad, q2.grad)
    assert k.grad.dtype == torch.bfloat16 and torch.equal(k.grad, k2.grad.bfloat16())
    assert v.grad.dtype == torch.float16 and torch.equal(v.grad, v2.grad.half())


def test_refusals(no_c_call):
    q = torch.rand(1, 4, 2, 8, requires_grad=True)
    k, v = torch.rand(1, 4, 2, 8), torch.rand(1, 4, 2, 8)
    with pytest.raises(TypeError, match="float32, bfloat16 or float16"):
        rove.attention(q.detach().double().requires_grad_(), k.double(), v.double())
    with pytest.raises(ValueError, match="out="):
        rove.attention(q, k, v, out=torch.empty(1, 4, 2, 8))
    with pytest.raises(TypeError, match="torch"):
        rove.attention(q, k.numpy(), v.numpy())
    ang = torch.zeros(1, 4, 2, 4, dtype=torch.float32, requires_grad=True)
    with pytest.raises(TypeError, match="float64"):
        rove.attention(q, k, v, q_angles=ang, kv_angles=ang.detach())


@pytest.mark.parametrize("rotate,shared", [("rove", False), ("rope", False), ("rove", True)])
def test_angle_gradients(rotate, shared):
    """Selective RoPE: gradients of explicit angles (and of q, k, v with them) against
    torch autograd in float64; one tensor as both angle arrays gets the sum."""
    g = np.random.default_rng(13)
    B, L, H, Hk, d = 2, 9, 4, 2, 16
    q64, k64, v64 = (torch.tensor(g.uniform(-1, 1, (B, L, h, d)), requires_grad=True)
                     for h in (H, Hk, Hk))
    qa64 = torch.tensor(g.uniform(-3, 3, (B, L, Hk, d // 2)), requires_grad=True)
    ka64 = qa64 if shared else torch.tensor(g.uniform(-3, 3, (B, L, Hk, d // 2)),
                                            requires_grad=True)
    dout = torch.tensor(g.uniform(-1, 1, (B, L, H, d)))
    ref = torch_ref(q64, k64, v64, rope=rove.RopeConfig(), rotate=rotate, causal=True,
                    q_angles=qa64, kv_angles=ka64)
    (ref * dout).sum().backward()
    q, k, v = (x.detach().float().requires_grad_() for x in (q64, k64, v64))
    qa = qa64.detach().clone().requires_grad_()
    ka = qa if shared else ka64.detach().clone().requires_grad_()
    out = rove.attention(q, k, v, rotate=rotate, q_angles=qa, kv_angles=ka)
    (out * dout.float()).sum().backward()
    pairs = [(q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad), (qa.grad, qa64.grad)]
    if not shared:
        pairs.append((ka.grad, ka64.grad))
    for got, want in pairs:
        assert got is not None and got.shape == want.shape
        assert rel_err(got.numpy(), want.numpy()) < TOL


def test_no_grad_mode_takes_the_plain_path():
    q, k, v = (torch.rand(1, 4, 2, 8, requires_grad=True) for _ in range(3))
    with torch.no_grad():
        out = rove.attention(q, k, v)
    assert not out.requires_grad


def test_custom_op_is_differentiable():
    """rove.torch_ops.attention (the rove::attention custom op) has the same gradients."""
    import rove.torch_ops as ops
    g = np.random.default_rng(5)
    base = [torch.tensor(g.uniform(-1, 1, (1, 9, 4, 16)), dtype=torch.float32),
            torch.tensor(g.uniform(-1, 1, (1, 9, 2, 16)), dtype=torch.float32),
            torch.tensor(g.uniform(-1, 1, (1, 9, 2, 16)), dtype=torch.float32)]
    grads = []
    for fn in (rove.attention, ops.attention):
        q, k, v = (x.clone().requires_grad_() for x in base)
        fn(q, k, v, rotate="rove", window=5).square().sum().backward()
        grads.append((q.grad, k.grad, v.grad))
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_selective_angles_gradients():
    """rove.selective_angles under autograd (rove_selective_angles_backward) against
    torch's own autograd of the same cumulative sum in float64, and end to end: phi ->
    angles -> rove.attention -> loss gives d phi."""
    g = np.random.default_rng(17)
    B, T, H, P = 2, 11, 2, 4
    phi64 = torch.tensor(g.uniform(-0.5, 1.5, (B, T, H, P)), requires_grad=True)
    temp64 = torch.tensor(g.uniform(0.1, 1.0, (P,)), requires_grad=True)
    carry64 = torch.tensor(g.uniform(-3, 3, (B, H, P)), requires_grad=True)
    w_a = torch.tensor(g.uniform(-1, 1, (B, T, H, P)))
    w_c = torch.tensor(g.uniform(-1, 1, (B, H, P)))
    c = carry64[:, None] + torch.cumsum(phi64.float().double(), dim=1)
    ref = ((c * temp64) * w_a).sum() + (c[:, -1] * w_c).sum()
    ref.backward()
    phi = phi64.detach().float().requires_grad_()
    temp = temp64.detach().clone().requires_grad_()
    carry = carry64.detach().clone().requires_grad_()
    angles, cout = rove.selective_angles(phi, temp, carry)
    assert angles.requires_grad
    ((angles * w_a).sum() + (cout * w_c).sum()).backward()
    assert rel_err(phi.grad.numpy(), phi64.grad.numpy()) < 1e-6
    assert rel_err(temp.grad.numpy(), temp64.grad.numpy()) < 1e-10
    assert rel_err(carry.grad.numpy(), carry64.grad.numpy()) < 1e-10
    # end to end through attention (one angle array for q and k: self-attention)
    q, k, v = (torch.tensor(g.uniform(-1, 1, (B, T, h, 2 * P)), dtype=torch.float32)
               for h in (2 * H, H, H))  # angles are per KV head (H of them here)
    phi.grad = None
    angles, _ = rove.selective_angles(phi)
    out = rove.attention(q, k, v, rotate="rope", q_angles=angles, kv_angles=angles)
    out.square().sum().backward()
    assert phi.grad is not None and torch.isfinite(phi.grad).all() and phi.grad.abs().sum() > 0


def test_out_that_requires_grad_is_refused_with_the_real_reason():
    """out= a tensor that requires grad: refused (torch refuses in-place writes into it
    too), with a message about out=, not the one that said rove.attention has no backward
    while naming it differentiable."""
    q = torch.randn(2, 5, 2, 8)
    with pytest.raises(RuntimeError, match="out requires grad: librove writes the result"):
        rove.attention(q, q, q, out=torch.empty(2, 5, 2, 8, requires_grad=True))
