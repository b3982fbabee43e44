# SPDX-License-Identifier: MIT
"""torch.func on the differentiable calls (rove.attention, rove.attention_varlen, rove.gla,
rove.selective_angles): grad, vjp, jacrev and vmap (and vmap over grad: per-sample
gradients) give what plain autograd and a loop over the batch give; a second derivative
and forward mode (jvp, jacfwd, forward_ad) raise instead of giving silent zeros, here and
through the custom ops; other librove calls refuse torch.func tensors by name."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import rove  # noqa: E402
import rove.torch_ops  # noqa: E402


def _t(gen, *shape, lo=-1.0, hi=1.0):
    return torch.tensor(gen.uniform(lo, hi, shape), dtype=torch.float32)


def _autograd(f, *xs):
    """Plain autograd's gradient of f(*xs) (a scalar) with respect to every x."""
    ys = [x.clone().requires_grad_(True) for x in xs]
    return torch.autograd.grad(f(*ys), ys)


# (name, f(x) -> tensor, x): every call differentiable in x; x [batch, ...]
def _calls(gen):
    k, v = _t(gen, 2, 9, 2, 16), _t(gen, 2, 9, 2, 16)
    sinks = _t(gen, 4)
    cu = torch.tensor([0, 3, 9], dtype=torch.int32)
    kp, vp = _t(gen, 9, 2, 16), _t(gen, 9, 2, 16)
    kg, vg = _t(gen, 2, 7, 2, 8), _t(gen, 2, 7, 2, 8)
    gg = -_t(gen, 2, 7, 2, 8, lo=0.0, hi=1.0)
    return [
        ("attention rove causal gqa sinks",
         lambda q: rove.attention(q, k, v, causal=True, sinks=sinks), _t(gen, 2, 9, 4, 16)),
        ("attention rope window softcap",
         lambda q: rove.attention(q, k, v, rotate="rope", window=4, softcap=20.0),
         _t(gen, 2, 9, 4, 16)),
        ("attention_varlen", lambda q: rove.attention_varlen(q, kp, vp, cu, cu),
         _t(gen, 9, 4, 16)),
        ("gla", lambda q: rove.gla(q, kg, vg, gg), _t(gen, 2, 7, 2, 8)),
        ("selective_angles", lambda phi: rove.selective_angles(phi)[0],
         _t(gen, 2, 6, 2, 4, lo=0.0, hi=1.0)),
        ("attention positions as torch tensors",
         lambda q: rove.attention(q, k, v, q_pos=torch.tensor([5, 6, 7]),
                                  kv_pos=torch.arange(9)), _t(gen, 2, 3, 4, 16)),
        ("attention Selective RoPE angles",  # differentiable in the (float64) angles
         lambda a: rove.attention(k.repeat(1, 1, 2, 1), k, v, q_angles=a, kv_angles=a),
         torch.tensor(gen.uniform(-3, 3, (2, 9, 2, 8)), dtype=torch.float64)),
    ]


def _loss(y):
    return (y.double() * torch.linspace(-1, 1, y.numel(), dtype=torch.float64).reshape(
        y.shape)).sum().square()


@pytest.mark.parametrize("case", range(7))
def test_grad_and_vjp_equal_autograd(case):
    name, f, x = _calls(np.random.default_rng(1))[case]
    want, = _autograd(lambda x: _loss(f(x)), x)
    got = torch.func.grad(lambda x: _loss(f(x)))(x)
    assert torch.equal(got, want), name
    y, vjp_fn = torch.func.vjp(f, x)
    cot = torch.ones_like(y)
    want, = _autograd(lambda x: (f(x) * cot).sum(), x)
    assert torch.equal(vjp_fn(cot)[0], want), name


@pytest.mark.parametrize("case", range(7))
def test_vmap_is_a_loop(case):
    """vmap over a new leading dimension: each element's call, bit for bit."""
    name, f, x = _calls(np.random.default_rng(2))[case]
    xs = torch.stack([x, x.flip(0) * 0.5, x + 0.25])
    got = torch.func.vmap(f)(xs)
    want = torch.stack([f(xi) for xi in xs])
    assert torch.equal(got, want), name
    # vmapped over another dimension than 0 (in_dims=1)
    got = torch.func.vmap(f, in_dims=1)(xs.transpose(0, 1))
    assert torch.equal(got, want), name


@pytest.mark.parametrize("case", range(7))
def test_per_sample_gradients(case):
    """vmap(grad(f)): the per-sample gradients of a loop of plain backwards."""
    name, f, x = _calls(np.random.default_rng(3))[case]
    xs = torch.stack([x, x * 0.5 - 0.1, x.flip(-1)])
    got = torch.func.vmap(torch.func.grad(lambda x: _loss(f(x))))(xs)
    want = torch.stack([_autograd(lambda x: _loss(f(x)), xi)[0] for xi in xs])
    assert torch.equal(got, want), name


def test_jacrev_equals_autograd_jacobian():
    gen = np.random.default_rng(4)
    q, k, v = _t(gen, 1, 3, 2, 4), _t(gen, 1, 3, 1, 4), _t(gen, 1, 3, 1, 4)
    f = lambda q: rove.attention(q, k, v, causal=True)  # noqa: E731
    got = torch.func.jacrev(f)(q)
    want = torch.autograd.functional.jacobian(f, q)
    assert got.shape == (1, 3, 2, 4, 1, 3, 2, 4)
    assert torch.equal(got, want)
    assert got.abs().sum() > 0  # not the zeros of a dropped derivative


@pytest.mark.parametrize("case", range(7))
def test_second_derivative_raises(case):
    name, f, x = _calls(np.random.default_rng(5))[case]
    g = torch.func.grad(lambda x: _loss(f(x)))
    with pytest.raises(RuntimeError, match="double backward"):
        torch.func.grad(lambda x: g(x).square().sum())(x)


@pytest.mark.parametrize("case", range(7))
def test_forward_mode_raises(case):
    """jvp, jacfwd and forward_ad dual tensors: refused (torch would otherwise carry no
    tangent through the C call: silent zero derivatives)."""
    name, f, x = _calls(np.random.default_rng(6))[case]
    with pytest.raises(NotImplementedError, match="forward-mode"):
        torch.func.jvp(f, (x,), (torch.ones_like(x),))
    with pytest.raises(NotImplementedError, match="forward-mode"):
        torch.func.jacfwd(f)(x)
    import torch.autograd.forward_ad as fwad
    with fwad.dual_level(), pytest.raises(NotImplementedError, match="forward-mode"):
        f(fwad.make_dual(x, torch.ones_like(x)))


def test_forward_mode_raises_through_the_custom_ops_and_inference_calls():
    gen = np.random.default_rng(7)
    q, k, v = _t(gen, 1, 5, 2, 8), _t(gen, 1, 5, 2, 8), _t(gen, 1, 5, 2, 8)
    g = -_t(gen, 1, 5, 2, 8, lo=0.0, hi=1.0)
    cu5 = torch.tensor([0, 5], dtype=torch.int32)  # (the op takes cu_seqlens as tensors)
    for f in (lambda q: rove.torch_ops.attention(q, k, v),
              lambda q: rove.torch_ops.attention_varlen(q[0], k[0], v[0], cu5, cu5),
              lambda q: rove.torch_ops.gla(q, k, v, g),
              lambda q: rove.rotate(q, rope=rove.RopeConfig())):
        with pytest.raises(NotImplementedError, match="forward-mode"):
            torch.func.jvp(f, (q,), (torch.ones_like(q),))
    # the ops called directly (torch.ops.rove.*): torch.func.jvp reaches their kernels
    # with the tangents stripped, and gave zero derivatives without a word
    cu = torch.tensor([0, 2, 5], dtype=torch.int32)
    for f in (lambda q: torch.ops.rove.attention(q, k, v, None, None, "rove", True, 0, 0.0,
                                                 None, "", "bshd")[0],
              lambda q: torch.ops.rove.attention_varlen(q[0], k[0], v[0], cu, cu, None, None,
                                                        "rove", True, 0, 0.0, None, "")[0],
              lambda q: torch.ops.rove.gla(q, k, v, g, None, None, None, None, "rope", 0,
                                           "half", 0, False)[0]):
        with pytest.raises(NotImplementedError, match="forward-mode"):
            torch.func.jvp(f, (q,), (torch.ones_like(q),))
        with pytest.raises(NotImplementedError, match="forward-mode"):
            torch.func.jacfwd(lambda q: f(q).sum())(q)
        assert f(q).abs().sum() > 0  # and outside forward mode they run
    # without a tangent the custom op runs as usual
    assert torch.equal(rove.torch_ops.attention(q, k, v), rove.attention(q, k, v))


def test_other_calls_refuse_torch_func_tensors():
    """A call without torch.func support (it reads the tensor's memory) names the
    transform instead of torch's "Cannot access data pointer"."""
    x = torch.rand(3, 1, 5, 2, 8)
    cache = rove.KVCache(rove.Plan(2, 2, 8), 1, 16)
    with pytest.raises(NotImplementedError, match="torch.func transform"):
        torch.func.vmap(lambda y: cache.append(y, y))(x)
    assert len(cache) == 0


def test_rotate_under_torch_func():
    """rove.rotate / rotate_angles support torch.func: vmap equals the loop, grad equals
    plain autograd, bit for bit."""
    x = torch.rand(3, 1, 5, 2, 8)
    got = torch.func.vmap(lambda y: rove.rotate(y, rope=rove.RopeConfig()))(x)
    assert all(torch.equal(got[i], rove.rotate(x[i])) for i in range(3))
    ang = torch.rand(1, 5, 2, 4, dtype=torch.float64)
    w = torch.rand(1, 5, 2, 8)  # (a norm would not depend on the angles)
    g = torch.func.grad(lambda a: (rove.rotate_angles(x[0], a) * w).sum())(ang)
    leaf = ang.clone().requires_grad_()
    (rove.rotate_angles(x[0], leaf) * w).sum().backward()
    assert leaf.grad.abs().max() > 0.1 and torch.equal(g, leaf.grad)


def test_vmapped_positions_refused():
    """Positions are one per call: vmapped positions (a value per element) are refused by
    name; positions made inside a transformed function (torch.func.grad wraps them) are
    taken as they are (test_grad_and_vjp_equal_autograd[5])."""
    gen = np.random.default_rng(8)
    q, k, v = _t(gen, 1, 4, 2, 8), _t(gen, 1, 4, 2, 8), _t(gen, 1, 4, 2, 8)
    pos = torch.arange(12).reshape(3, 4)
    with pytest.raises(NotImplementedError, match="batched by torch.func.vmap"):
        torch.func.vmap(lambda p: rove.attention(q, k, v, q_pos=p, kv_pos=p))(pos)


def test_vmap_messages():
    """The inputs the Function path cannot take are refused with messages that name
    torch.func (no gradient is asked for under a plain vmap; an empty vmap dimension is
    taken: test_empty.py)."""
    gen = np.random.default_rng(9)
    q, k, v = _t(gen, 1, 5, 2, 8), _t(gen, 1, 5, 2, 8), _t(gen, 1, 5, 2, 8)
    with pytest.raises(TypeError, match="torch.func"):
        torch.func.vmap(lambda x: rove.attention(x, k.double(), v.double()))(
            torch.stack([q, q]).double())
    # bf16 is taken (as by autograd): each element's call as it runs alone
    h = torch.stack([q, 2 * q]).bfloat16()
    got = torch.func.vmap(lambda x: rove.attention(x, k.bfloat16(), v.bfloat16()))(h)
    assert got.dtype == torch.bfloat16
    for i in range(2):
        assert torch.equal(got[i], rove.attention(h[i], k.bfloat16(), v.bfloat16()))
    with pytest.raises(ValueError, match="torch.func"):
        torch.func.vmap(lambda x: rove.attention(x, k, v, out=torch.empty_like(q)))(
            torch.stack([q, q]))
