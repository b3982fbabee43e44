# SPDX-License-Identifier: MIT
"""The rove::attention and rove::attention_varlen custom ops: opcheck, torch.compile(
fullgraph=True) around them, and the varlen op's gradients."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import rove  # noqa: E402
import rove.torch_ops  # noqa: E402,F401  (registers rove::attention)
from conftest import randn  # noqa: E402


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_opcheck(rng, layout):
    q = torch.from_numpy(randn(rng, 2, 16, 4, 32))
    k = torch.from_numpy(randn(rng, 2, 16, 2, 32))
    if layout == "bhsd":
        q, k = q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous()
    pos = torch.arange(16, dtype=torch.int32) + 7
    torch.library.opcheck(torch.ops.rove.attention.default,
                          (q, k, k, pos, pos, "rope", True, 0, 0.0, None, "", layout),
                          test_utils=("test_schema", "test_faketensor"))


def test_compile_fullgraph_matches_eager(rng):
    rope = rove.RopeConfig(scaling="yarn", factor=4.0, original_max_position=32)
    q = torch.from_numpy(randn(rng, 1, 4, 24, 64))
    k = torch.from_numpy(randn(rng, 1, 2, 24, 64))

    def f(q, k, v):
        y = rove.torch_ops.attention(q * 2, k, v, rope=rope, layout="bhsd", rotate=rove.ROTATE_ROVE)
        return y.transpose(1, 2).reshape(1, 24, 4 * 64).sum(-1)

    want = f(q, k, k)
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, k)
    assert torch.equal(got, want)
    direct = rove.attention(q * 2, k, k, rope=rope, layout="bhsd")
    assert torch.equal(want, direct.transpose(1, 2).reshape(1, 24, 256).sum(-1))
    out, lse = rove.torch_ops.attention(q, k, k, layout="bhsd", return_lse=True)
    assert lse.shape == (1, 4, 24) and np.isfinite(lse.numpy()).all()


# ---- rove::attention_varlen -------------------------------------------------------------
LENS = [5, 1, 12, 9]


def _packed(rng, dtype=torch.float32):
    cu = torch.tensor(np.cumsum([0] + LENS), dtype=torch.int32)
    T = int(cu[-1])
    q = torch.from_numpy(randn(rng, T, 4, 32)).to(dtype)
    k = torch.from_numpy(randn(rng, T, 2, 32)).to(dtype)
    v = torch.from_numpy(randn(rng, T, 2, 32)).to(dtype)
    return q, k, v, cu


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_varlen_opcheck(rng, dtype):
    q, k, v, cu = _packed(rng, dtype)
    q, k, v = (x.requires_grad_(True) for x in (q, k, v))  # bf16 has gradients too
    utils = ("test_schema", "test_faketensor", "test_autograd_registration",
             "test_aot_dispatch_dynamic")
    torch.library.opcheck(torch.ops.rove.attention_varlen.default,
                          (q, k, v, cu, cu, None, None, "rove", True, 0, 0.0, None, ""),
                          test_utils=utils)


def test_varlen_backward_op_with_permuted_inputs(rng):
    """The backward op's gradients have the strides its fake kernel declares (contiguous)
    when q, k, v are dense but permuted ([H, T, d] storage seen as [T, H, d])."""
    q, k, v, cu = _packed(rng)
    q, k, v = (x.transpose(0, 1).contiguous().transpose(0, 1) for x in (q, k, v))
    assert not q.is_contiguous()
    out, lse = torch.ops.rove.attention_varlen(q, k, v, cu, cu, None, None, "rove", True, 0,
                                               0.0, None, "")
    torch.library.opcheck(torch.ops.rove.attention_varlen_backward.default,
                          (torch.ones_like(out), q, k, v, out, lse, cu, cu, None, None, "rove",
                           True, 0, 0.0, None, ""),
                          test_utils=("test_schema", "test_faketensor"))


def test_varlen_compile_and_gradients(rng):
    """torch.compile(fullgraph=True) around the op gives the eager values; its gradients
    are rove.attention_varlen's (one rove_attention_backward per sequence)."""
    q, k, v, cu = _packed(rng)
    rope = rove.RopeConfig(scaling="yarn", factor=4.0, original_max_position=8)

    def f(q, k, v):
        return rove.torch_ops.attention_varlen(q * 2, k, v, cu, cu.long(), rope=rope,
                                               window=7).sum(-1)

    want = f(q, k, v)
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v)
    assert torch.equal(got, want)
    direct = rove.attention_varlen(q * 2, k, v, cu, cu, rope=rope, window=7)
    assert torch.equal(want, direct.sum(-1))
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    twins = [x.clone().requires_grad_(True) for x in (q, k, v)]
    dout = torch.from_numpy(randn(rng, *q.shape))
    (rove.torch_ops.attention_varlen(*leaves, cu, cu) * dout).sum().backward()
    (rove.attention_varlen(*twins, cu, cu) * dout).sum().backward()
    for a, b in zip(leaves, twins):
        assert a.grad is not None and torch.equal(a.grad, b.grad)
    out, lse = rove.torch_ops.attention_varlen(q, k, v, cu, cu, return_lse=True)
    assert out.shape == q.shape and lse.shape == (4, q.shape[0]) and lse.dtype == torch.float32


def test_compiled_training_lse_and_double_backward(rng):
    """Both ops train under torch.compile (their backwards are custom ops with fake
    kernels), with the gradients of eager autograd; the LSE output is differentiable too;
    a double backward (a backward through a create_graph=True gradient) raises, here and
    in rove.attention / rove.attention_varlen, instead of silently dropping the
    second-order term."""
    q, k, v, cu = _packed(rng)
    q4, k4 = torch.from_numpy(randn(rng, 1, 4, 16, 32)), torch.from_numpy(randn(rng, 1, 2, 16, 32))
    calls = [
        (lambda q, k, v: rove.torch_ops.attention_varlen(q, k, v, cu, cu, window=5),
         lambda q, k, v: rove.attention_varlen(q, k, v, cu, cu, window=5), (q, k, v)),
        (lambda q, k, v: rove.torch_ops.attention(q, k, v, layout="bhsd", rotate="rope"),
         lambda q, k, v: rove.attention(q, k, v, layout="bhsd", rotate="rope"), (q4, k4, k4)),
    ]
    for op, eager, xs in calls:
        a = [x.clone().requires_grad_(True) for x in xs]
        b = [x.clone().requires_grad_(True) for x in xs]
        torch.compile(op, fullgraph=True, backend="aot_eager")(*a).square().sum().backward()
        eager(*b).square().sum().backward()
        for x, y in zip(a, b):
            assert x.grad is not None and torch.equal(x.grad, y.grad)
        for f in (op, eager):
            c = [x.clone().requires_grad_(True) for x in xs]
            dq = torch.autograd.grad(f(*c).square().sum(), c[0], create_graph=True)[0]
            with pytest.raises(RuntimeError):
                dq.sum().backward()
            # a loss linear in the output: no graph through grad_output, but the gradient
            # still requires grad through the backward (an op, or for the eager paths a
            # Function, with no backward of its own), so differentiating it raises
            c = [x.clone().requires_grad_(True) for x in xs]
            dq = torch.autograd.grad(f(*c).sum(), c[0], create_graph=True)[0]
            assert dq.requires_grad
            with pytest.raises(RuntimeError):
                dq.sum().backward()
    # the LSE is differentiable (the backward ops' dlse), as rove.attention's: a loss
    # through out and the LSE gets eager autograd's gradients, compiled too
    lse_calls = [
        (lambda q, k, v: rove.torch_ops.attention_varlen(q, k, v, cu, cu, return_lse=True),
         lambda q, k, v: rove.attention_varlen(q, k, v, cu, cu, return_lse=True), (q, k, v)),
        (lambda q, k, v: rove.torch_ops.attention(q, k, v, layout="bhsd", return_lse=True),
         lambda q, k, v: rove.attention(q, k, v, layout="bhsd", return_lse=True), (q4, k4, k4)),
    ]
    for op, eager, xs in lse_calls:
        def loss(f, *ys):
            o, lse = f(*ys)
            return o.square().sum() + (lse * torch.linspace(-1, 1, lse.numel()).reshape(
                lse.shape)).sum()
        a = [x.clone().requires_grad_(True) for x in xs]
        b = [x.clone().requires_grad_(True) for x in xs]
        c = [x.clone().requires_grad_(True) for x in xs]
        assert op(*a)[1].requires_grad
        loss(op, *a).backward()
        loss(eager, *b).backward()
        torch.compile(lambda *ys: loss(op, *ys), fullgraph=True, backend="aot_eager")(*c).backward()
        for x, y, z in zip(a, b, c):
            assert torch.equal(x.grad, y.grad) and torch.equal(z.grad, y.grad)


def test_varlen_op_positions_as_1_by_total(rng):
    """[1, total] positions, which rove.attention_varlen takes, train through the op too:
    the gradients of rove.attention_varlen (the backward op flattens them as the forward)."""
    q, k, v, cu = _packed(rng)
    qp = (torch.arange(q.shape[0], dtype=torch.int64) % 5 + 3).reshape(1, -1)
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    twins = [x.clone().requires_grad_(True) for x in (q, k, v)]
    dout = torch.from_numpy(randn(rng, *q.shape))
    kw = dict(q_pos=qp, kv_pos=qp, rotate="rope", causal=False)
    (rove.torch_ops.attention_varlen(*leaves, cu, cu, **kw) * dout).sum().backward()
    (rove.attention_varlen(*twins, cu, cu, **kw) * dout).sum().backward()
    for a, b in zip(leaves, twins):
        assert a.grad is not None and torch.equal(a.grad, b.grad)


@pytest.mark.parametrize("op", ["attention", "attention_varlen"])
def test_ops_keep_their_positions(rng, op):
    """The ops' backward uses the positions (and cu_seqlens) of the forward: an in-place
    edit of the caller's tensors in between changes no gradient (as rove.attention's)."""
    q, k, v, cu = _packed(rng)
    if op == "attention":
        q, k, v = (x.reshape(1, *x.shape) for x in (q, k, v))

    def grads(edit):
        leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
        pos, c = torch.arange(q.shape[-3], dtype=torch.int64) + 2, cu.clone()
        if op == "attention":
            out = rove.torch_ops.attention(*leaves, q_pos=pos, kv_pos=pos, rotate="rope")
        else:
            out = rove.torch_ops.attention_varlen(*leaves, c, c, q_pos=pos, kv_pos=pos,
                                                  rotate="rope")
        if edit:
            pos.mul_(3).add_(100)
            c[1:-1] = c[-1]  # every row to the last sequence
        out.square().sum().backward()
        return [x.grad for x in leaves]

    for a, b in zip(grads(False), grads(True)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("op, which", [("attention", "k"), ("attention", "pos"),
                                       ("attention_varlen", "k"), ("attention_varlen", "pos"),
                                       ("attention_varlen", "cu")])
def test_ops_refuse_a_meta_tensor_beside_cpu_inputs(rng, op, which):
    """A meta tensor among CPU inputs sends the call to the fake kernel, which used to
    return CPU outputs never written (garbage, no error): now a clear error."""
    q, k, v, cu = _packed(rng)
    pos = torch.arange(q.shape[0], dtype=torch.int64)
    meta = lambda t: t.to("meta")  # noqa: E731
    k2, pos2, cu2 = (meta(k) if which == "k" else k, meta(pos) if which == "pos" else pos,
                     meta(cu) if which == "cu" else cu)
    with pytest.raises(RuntimeError, match="one device"):
        if op == "attention":
            rove.torch_ops.attention(q[None], k2[None], v[None], q_pos=pos2, kv_pos=pos)
        else:
            rove.torch_ops.attention_varlen(q, k2, v, cu2, cu, q_pos=pos2, kv_pos=pos)
    # all on meta: meta outputs of the right shapes (the fake kernel's use)
    if op == "attention":
        out = rove.torch_ops.attention(meta(q[None]), meta(k[None]), meta(v[None]))
        assert out.device.type == "meta" and out.shape == (1,) + q.shape


def _bad_shapes():
    """(name, op, q, k, v, extra kwargs) that the real op refuses with a ValueError."""
    e = torch.empty
    return [("heads not a multiple", "attention", e(2, 4, 6, 16), e(2, 4, 4, 16), e(2, 4, 4, 16), {}),
            ("v head_dim", "attention", e(2, 4, 8, 16), e(2, 3, 4, 16), e(2, 3, 4, 32), {}),
            ("k head_dim", "attention", e(2, 4, 8, 16), e(2, 3, 4, 32), e(2, 3, 4, 32), {}),
            ("odd head_dim", "attention", e(2, 4, 8, 15), e(2, 3, 4, 15), e(2, 3, 4, 15), {}),
            ("batch", "attention", e(2, 4, 8, 16), e(3, 3, 4, 16), e(3, 3, 4, 16), {}),
            ("2-D q", "attention", e(4, 16), e(3, 16), e(3, 16), {}),
            ("ranks", "attention", e(2, 4, 8, 16), e(3, 4, 16), e(3, 4, 16), {}),
            ("layout", "attention", e(2, 4, 8, 16), e(2, 3, 4, 16), e(2, 3, 4, 16),
             dict(layout="sbhd")),
            ("sinks", "attention", e(2, 4, 8, 16), e(2, 3, 4, 16), e(2, 3, 4, 16),
             dict(sinks=e(4))),
            ("varlen heads", "varlen", e(7, 6, 16), e(5, 4, 16), e(5, 4, 16), {}),
            ("varlen v", "varlen", e(7, 8, 16), e(5, 4, 16), e(5, 4, 8), {}),
            ("varlen rank", "varlen", e(1, 7, 8, 16), e(1, 5, 4, 16), e(1, 5, 4, 16), {}),
            ("varlen cu", "varlen", e(7, 8, 16), e(5, 4, 16), e(5, 4, 16),
             dict(cu=(torch.tensor([0, 3, 7]), torch.tensor([0, 5])))),
            ("varlen sinks", "varlen", e(7, 8, 16), e(5, 4, 16), e(5, 4, 16),
             dict(sinks=e(4)))]


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("case", _bad_shapes(), ids=lambda c: c[0])
def test_ops_refuse_bad_shapes_on_every_device(device, case):
    """The fake kernels (meta and fake tensors: torch.compile's tracing) used to give any
    shapes an output (or an IndexError for a 2-D q): they now refuse what the real op
    refuses, with a ValueError."""
    _, op, q, k, v, kw = case
    to = lambda t: t.to(device)  # noqa: E731
    q, k, v = to(q), to(k), to(v)
    kw = {n: (tuple(to(c) for c in x) if n == "cu" else to(x) if isinstance(x, torch.Tensor)
              else x) for n, x in kw.items()}
    with pytest.raises(ValueError):
        if op == "attention":
            rove.torch_ops.attention(q, k, v, **kw)
        else:
            cu = kw.pop("cu", (torch.tensor([0, 3, 7]), torch.tensor([0, 2, 5])))
            rove.torch_ops.attention_varlen(q, k, v, to(cu[0]), to(cu[1]), **kw)


def _bad_arguments():
    """Calls the real ops refuse beyond tensor shapes (the plan's rules, keys for every
    query, positions, GLA's angles and empty axes): (id, fn(device))."""
    e = lambda *s, dt=torch.float32: lambda dev: torch.zeros(*s, dtype=dt, device=dev)  # noqa: E731
    q, k0 = e(1, 3, 2, 8), e(1, 0, 2, 8)
    att = rove.torch_ops.attention
    vl = rove.torch_ops.attention_varlen
    gla = rove.torch_ops.gla
    cu = lambda d: torch.tensor([0, 3], device=d)  # noqa: E731
    return [
        ("no keys", lambda d: att(q(d), k0(d), k0(d))),
        ("head_dim over the maximum", lambda d: att(*(e(1, 2, 1, 2048)(d),) * 3)),
        ("rotary_dim over head_dim", lambda d: att(q(d), q(d), q(d),
                                                   rope=rove.RopeConfig(rotary_dim=16))),
        ("unknown rotate", lambda d: att(q(d), q(d), q(d), rotate="foo")),
        ("q_pos length", lambda d: att(q(d), q(d), q(d),
                                       q_pos=torch.arange(5, device=d))),
        ("float kv_pos", lambda d: att(q(d), q(d), q(d),
                                       kv_pos=torch.zeros(3, device=d))),
        ("varlen q_pos length", lambda d: vl(e(3, 2, 8)(d), e(3, 2, 8)(d), e(3, 2, 8)(d),
                                             cu(d), cu(d), q_pos=torch.arange(4, device=d))),
        ("gla angles dim", lambda d: gla(*(e(1, 4, 2, 4)(d),) * 4,
                                         angles=e(1, 4, 2, 4, dt=torch.float64)(d))),
        ("gla float32 angles", lambda d: gla(*(e(1, 4, 2, 4)(d),) * 4,
                                             angles=e(1, 4, 2, 2)(d))),
        ("gla empty time axis", lambda d: gla(*(e(1, 0, 2, 4)(d),) * 4)),
        ("q_angles alone", lambda d: att(e(1, 3, 2, 8)(d), e(1, 3, 2, 8)(d), e(1, 3, 2, 8)(d),
                                         q_angles=e(1, 3, 2, 4, dt=torch.float64)(d))),
    ]


@pytest.mark.parametrize("case", _bad_arguments(), ids=lambda c: c[0])
def test_fake_kernels_refuse_what_the_ops_refuse(case):
    """README: the fake kernels "refuse the shapes the real ops refuse". They refused bad
    tensor shapes only: on meta tensors (meta-device model building, FakeTensorMode) a
    call with no keys, a head_dim over ROVE_MAX_HEAD_DIM, a RopeConfig wider than the head,
    an unknown rotate, positions of the wrong length or dtype, or GLA angles of the wrong
    shape or dtype got an output shape where the CPU op raises. Now the same exception
    type (or a ValueError / TypeError subclass of it) on both devices."""
    _, call = case
    with pytest.raises(Exception) as real:
        call("cpu")
    with pytest.raises(Exception) as fake:
        call("meta")
    assert isinstance(fake.value, type(real.value)) or (
        isinstance(real.value, (ValueError, TypeError)) and
        type(fake.value) in (ValueError, TypeError) and
        isinstance(real.value, type(fake.value))), (real.value, fake.value)


def _raises_compiled(fn, args, exc, name, compiled):
    """fn(*args) raises exc, eager (compiled None) or under torch.compile: a plain one
    ("graph": the error leaves the traced code as itself) or fullgraph=True, where torch
    reports an error raised while it traces as its own Unsupported, naming it."""
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(fn, fullgraph=compiled == "fullgraph", backend="aot_eager")
    with pytest.raises((exc, torch._dynamo.exc.Unsupported) if compiled == "fullgraph" else exc,
                       match=name):
        fn(*args)


@pytest.mark.parametrize("op", ["attention", "attention_varlen"])
@pytest.mark.parametrize("kw, exc", [
    (dict(causal="False"), TypeError), (dict(causal=None), TypeError),
    (dict(window=2.5), TypeError), (dict(window=True), TypeError),
    (dict(window=-1), ValueError), (dict(softcap=True), TypeError),
    (dict(softcap=-1.0), ValueError), (dict(scale=True), TypeError),
    (dict(scale=0.0), ValueError), (dict(rope={"theta": 500.0}), TypeError)])
@pytest.mark.parametrize("compiled", [None, "graph", "fullgraph"])
def test_op_wrappers_check_their_scalars(rng, op, kw, exc, compiled):
    """The keyword wrappers refuse what rove.attention refuses (they coerced: causal="False"
    gave causal attention, window=2.5 a window of 2, softcap=True a softcap of 1), under
    torch.compile too (whose tracing skipped the checks: window=2.5 ran as 2)."""
    q, k, v, cu = _packed(rng)
    if op == "attention":
        fn = lambda q, k, v: rove.torch_ops.attention(q[None], k[None], v[None], **kw)  # noqa: E731
    else:
        fn = lambda q, k, v: rove.torch_ops.attention_varlen(q, k, v, cu, cu, **kw)  # noqa: E731
    _raises_compiled(fn, (q, k, v), exc, next(iter(kw)), compiled)
    with pytest.raises(exc):  # the plain call agrees
        if op == "attention":
            rove.attention(q[None], k[None], v[None], **kw)
        else:
            rove.attention_varlen(q, k, v, cu, cu, **kw)


@pytest.mark.parametrize("op", ["attention", "attention_varlen"])
@pytest.mark.parametrize("compiled", [False, True])
def test_ops_half_and_mixed_gradients(rng, op, compiled):
    """bf16 / fp16 / mixed q, k, v through the ops (eager and torch.compile): each gradient
    in its input's dtype, the same bits as rove.attention / attention_varlen's."""
    q, k, v, cu = _packed(rng)
    q, k, v = q.to(torch.bfloat16), k.to(torch.float16), v  # each its own
    dout = torch.from_numpy(randn(rng, *q.shape)).to(torch.bfloat16)
    if op == "attention":
        fn = lambda q, k, v: rove.torch_ops.attention(q[None], k[None], v[None])[0]  # noqa: E731
        ref = lambda q, k, v: rove.attention(q[None], k[None], v[None])[0]  # noqa: E731
    else:
        fn = lambda q, k, v: rove.torch_ops.attention_varlen(q, k, v, cu, cu)  # noqa: E731
        ref = lambda q, k, v: rove.attention_varlen(q, k, v, cu, cu)  # noqa: E731
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(fn, fullgraph=True, backend="aot_eager")
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    twins = [x.clone().requires_grad_(True) for x in (q, k, v)]
    (fn(*leaves).float() * dout.float()).sum().backward()
    (ref(*twins).float() * dout.float()).sum().backward()
    for a, b in zip(leaves, twins):
        assert a.grad.dtype == a.dtype and torch.equal(a.grad, b.grad)


@pytest.mark.parametrize("name, values", [("window", [2, 3, 4, 5]),
                                          ("softcap", [2.0, 3.0, 4.5, 5.5]),
                                          ("scale", [0.2, 0.3, 0.45, 0.55])])
@pytest.mark.parametrize("dynamic", [None, True])
def test_compile_with_dynamic_scalars(rng, name, values, dynamic):
    """A window / softcap / scale that torch.compile makes dynamic (on its second value, or
    dynamic=True) is a symbolic value the wrappers' checks cannot read: fullgraph still
    compiles (the checks broke it) and gives eager's bits; a bad value is still refused
    when the op runs."""
    q = torch.from_numpy(randn(rng, 1, 8, 2, 16))
    torch._dynamo.reset()
    f = torch.compile(lambda q, x: rove.torch_ops.attention(q, q, q, **{name: x}),
                      fullgraph=True, dynamic=dynamic)
    for x in values:
        assert torch.equal(f(q, x), rove.torch_ops.attention(q, q, q, **{name: x}))
    with pytest.raises(Exception, match="window|softcap|scale"):
        f(q, -1 if name == "window" else -1.0 if name == "softcap" else 0.0)


# ---- rove::gla ---------------------------------------------------------------------------
GLA_LENS = [20, 0, 45, 3]


def _gla_inputs(rng, packed, grad=True):
    H, K, V = 2, 16, 24
    T = sum(GLA_LENS) if packed else 33
    B = 1 if packed else 2
    f = lambda *s: torch.from_numpy(randn(rng, *s))  # noqa: E731
    q, k, v = f(B, T, H, K), f(B, T, H, K), f(B, T, H, V)
    g = -torch.rand(B, T, H, K, generator=torch.Generator().manual_seed(1))
    ang = torch.from_numpy(rng.uniform(-9, 9, (B, T, H, K // 2)))
    N = len(GLA_LENS) if packed else B
    s0 = f(N, H, K, V)
    cu = torch.tensor(np.cumsum([0] + GLA_LENS), dtype=torch.int32) if packed else None
    leaves = [x.requires_grad_(grad) for x in (q, k, v, g, ang, s0)]
    return leaves, cu


@pytest.mark.parametrize("packed", [False, True])
def test_gla_opcheck(rng, packed):
    (q, k, v, g, ang, s0), cu = _gla_inputs(rng, packed)
    utils = ("test_schema", "test_faketensor", "test_autograd_registration",
             "test_aot_dispatch_dynamic")
    torch.library.opcheck(torch.ops.rove.gla.default,
                          (q, k, v, g, ang, s0, cu, None, "rove", 0, "half", 16, False),
                          test_utils=utils)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("recurrent", [False, True])
def test_gla_op_equals_rove_gla_and_compiles(rng, packed, recurrent):
    """rove::gla gives rove.gla's output, final state and gradients (q, k, v, g, angles,
    initial state; a loss on both outputs) bit for bit, eagerly and under
    torch.compile(fullgraph=True)."""
    leaves, cu = _gla_inputs(rng, packed)
    dout = torch.from_numpy(randn(rng, *leaves[0].shape[:-1], 24))

    def ours(q, k, v, g, ang, s0):
        # (the backward is chunked by the plan's chunk: gla_recurrent's plan has the default)
        o, fs = rove.torch_ops.gla(q, k, v, g, angles=ang, initial_state=s0, cu_seqlens=cu,
                                   rotate="rove", chunk=None if recurrent else 16,
                                   recurrent=recurrent, return_final_state=True)
        return (o * dout).sum() + fs.square().sum()

    def theirs(q, k, v, g, ang, s0):
        run = rove.gla_recurrent if recurrent else rove.gla
        kw = {} if recurrent else dict(chunk=16)
        o, fs = run(q, k, v, g, angles=ang, initial_state=s0, cu_seqlens=cu, rotate="rove",
                    return_final_state=True, **kw)
        return (o * dout).sum() + fs.square().sum()

    def grads(fn):
        xs = [x.detach().clone().requires_grad_(True) for x in leaves]
        loss = fn(*xs)
        loss.backward()
        return [loss.detach()] + [x.grad for x in xs]

    want = grads(theirs)
    for fn in (ours, torch.compile(ours, fullgraph=True, backend="aot_eager")):
        for a, b in zip(grads(fn), want):
            assert torch.equal(a, b)


def test_gla_op_refuses_bad_shapes_on_meta():
    m = lambda *s: torch.empty(*s, device="meta")  # noqa: E731
    q, v = m(2, 5, 2, 8), m(2, 5, 2, 8)
    with pytest.raises(ValueError, match="one row"):
        rove.torch_ops.gla(q, q, v, q, cu_seqlens=torch.tensor([0, 2, 5], device="meta"))
    with pytest.raises(ValueError, match="initial_state"):
        rove.torch_ops.gla(q, q, v, q, initial_state=m(3, 2, 8, 8))
    with pytest.raises(ValueError, match="key_dim"):
        rove.torch_ops.gla(q, m(2, 5, 2, 4), v, q)
    o, fs = rove.torch_ops.gla(q, q, m(2, 5, 2, 6), q, return_final_state=True)
    assert o.shape == (2, 5, 2, 6) and fs.shape == (2, 2, 8, 6)
    c = torch.randn(1, 5, 2, 8)  # cu_seqlens as a list, as rove.gla takes it
    assert torch.equal(rove.torch_ops.gla(c, c, c, -c.abs(), cu_seqlens=[0, 2, 5]),
                       rove.gla(c, c, c, -c.abs(), cu_seqlens=[0, 2, 5]))


@pytest.mark.parametrize("kw, exc", [
    (dict(chunk=16.5), TypeError), (dict(chunk=16.0), TypeError), (dict(chunk=True), TypeError),
    (dict(chunk=24), ValueError), (dict(scale=True), TypeError), (dict(scale=0.0), ValueError),
    (dict(rotary_dim=4.0), TypeError), (dict(rotary_dim=-2), ValueError)])
@pytest.mark.parametrize("compiled", [None, "graph", "fullgraph"])
def test_gla_wrapper_checks_its_scalars(kw, exc, compiled):
    """rove.torch_ops.gla refuses what rove.gla refuses, under torch.compile too (whose
    tracing skipped the checks: chunk=16.5 ran as 16, scale=True as 1)."""
    c = torch.randn(1, 5, 2, 8, generator=torch.Generator().manual_seed(3))
    g = -c.abs()
    fn = lambda c, g: rove.torch_ops.gla(c, c, c, g, **kw)  # noqa: E731
    _raises_compiled(fn, (c, g), exc, next(iter(kw)), compiled)
    with pytest.raises(exc, match=next(iter(kw))):  # the plain call agrees
        rove.gla(c, c, c, g, **kw)


# ---- Selective-RoPE angles through the ops ----------------------------------------------
def _with_angles(rng, varlen):
    """q, k, v (float32, requiring grad) and float64 angles requiring grad: packed
    [T, heads, d] for the varlen op, else [B, L, heads, d]."""
    g = np.random.default_rng(31)
    lead = (sum(LENS),) if varlen else (2, 11)
    q, k, v = (torch.tensor(g.uniform(-1, 1, lead + (h, 16)), dtype=torch.float32,
                            requires_grad=True) for h in (4, 2, 2))
    qa, ka = (torch.tensor(g.uniform(-3, 3, lead + (2, 8)), requires_grad=True)
              for _ in range(2))
    return q, k, v, qa, ka


def _grads(out, lse, inputs):
    g = np.random.default_rng(5)
    loss = (out * torch.tensor(g.uniform(-1, 1, out.shape), dtype=out.dtype)).sum() + \
        (lse * torch.tensor(g.uniform(-1, 1, lse.shape), dtype=lse.dtype)).sum()
    return torch.autograd.grad(loss, inputs)


@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "fullgraph"])
def test_ops_take_selective_rope_angles(rng, varlen, compiled):
    """q_angles / kv_angles through rove::attention and rove::attention_varlen (they were
    missing, so Selective-RoPE attention had no torch.compile path): the output, the LSE
    and every gradient (q, k, v and both float64 angle tensors) bitwise those of
    rove.attention / rove.attention_varlen, eager and under torch.compile(fullgraph)."""
    q, k, v, qa, ka = _with_angles(rng, varlen)
    cu = torch.tensor(np.cumsum([0] + LENS), dtype=torch.int32)
    if varlen:
        def op(q, k, v, qa, ka):
            return rove.torch_ops.attention_varlen(q, k, v, cu, cu, q_angles=qa, kv_angles=ka,
                                                   rotate="rove", return_lse=True)
        want = rove.attention_varlen(q, k, v, cu, cu, q_angles=qa, kv_angles=ka, rotate="rove",
                                     return_lse=True)
    else:
        def op(q, k, v, qa, ka):
            return rove.torch_ops.attention(q, k, v, q_angles=qa, kv_angles=ka, rotate="rove",
                                            return_lse=True)
        want = rove.attention(q, k, v, q_angles=qa, kv_angles=ka, rotate="rove",
                              return_lse=True)
    if compiled:
        torch._dynamo.reset()
        op = torch.compile(op, fullgraph=True, backend="aot_eager")
    got = op(q, k, v, qa, ka)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    inputs = (q, k, v, qa, ka)
    for a, b, name in zip(_grads(*got, inputs), _grads(*want, inputs), "q k v qa ka".split()):
        assert a.dtype == b.dtype and torch.equal(a, b), name
    # only what requires grad is computed: a frozen kv_angles gets none
    out, lse = op(q, k, v, qa, ka.detach())
    dqa, = torch.autograd.grad(out.sum() + lse.sum(), (qa,))
    assert dqa.shape == qa.shape and dqa.dtype == torch.float64


def test_opcheck_with_angles(rng):
    q, k, v, qa, ka = _with_angles(rng, False)
    torch.library.opcheck(torch.ops.rove.attention.default,
                          (q, k, v, None, None, "rove", True, 0, 0.0, None, "", "bshd", None,
                           qa, ka),
                          test_utils=("test_schema", "test_faketensor",
                                      "test_autograd_registration"))
    with pytest.raises(TypeError, match="float64"):
        rove.torch_ops.attention(q, k, v, q_angles=qa.float(), kv_angles=ka.float())


ALL_OPCHECKS = ("test_schema", "test_faketensor", "test_autograd_registration",
                "test_aot_dispatch_dynamic")


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_attention_and_its_backward_opcheck_in_full(layout):
    """Every opcheck on rove::attention (bf16, GQA, window, softcap, sinks, inputs that
    require grad) and on rove::attention_backward (with an LSE gradient); the other ops'
    tests run them too."""
    g = torch.Generator().manual_seed(5)
    qs, ks = ((2, 7, 4, 16), (2, 9, 2, 16)) if layout == "bshd" else ((2, 4, 7, 16), (2, 2, 9, 16))
    q, k, v = (torch.randn(*s, generator=g).to(torch.bfloat16).requires_grad_()
               for s in (qs, ks, ks))
    sinks = torch.randn(4, generator=g).requires_grad_()
    args = (q, k, v, None, None, "rove", True, 3, 5.0, None, "", layout, sinks)
    torch.library.opcheck(torch.ops.rove.attention.default, args, test_utils=ALL_OPCHECKS)
    out, lse = torch.ops.rove.attention.default(*args)
    bargs = (torch.ones_like(out), *(x.detach() for x in (q, k, v, out, lse)), None, None,
             "rove", True, 3, 5.0, None, "", layout, sinks.detach(), None, None,
             torch.ones_like(lse), False, False)
    torch.library.opcheck(torch.ops.rove.attention_backward.default, bargs,
                          test_utils=ALL_OPCHECKS)


@pytest.mark.parametrize("packed", [False, True])
def test_gla_backward_opcheck(rng, packed):
    (q, k, v, g, ang, s0), cu = _gla_inputs(rng, packed)
    out, fs = torch.ops.rove.gla.default(q, k, v, g, ang, s0, cu, None, "rove", 0, "half", 16,
                                         False)
    gargs = (torch.ones_like(out), torch.ones_like(fs), *(x.detach() for x in (q, k, v, g, out)),
             ang.detach(), s0.detach(), cu, None, "rove", 0, "half", 16, True, True)
    torch.library.opcheck(torch.ops.rove.gla_backward.default, gargs, test_utils=ALL_OPCHECKS)


def test_inductor_training_and_export():
    """The default backend (inductor), fullgraph, forward and backward of a small
    projection -> rove::attention (sinks, LSE in the loss) -> projection against eager;
    and torch.export of the same module, whose program gives eager's output."""
    import torch._inductor.config as icfg
    icfg.compile_threads = 1
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(32, 64)
            self.o = torch.nn.Linear(32, 32)
            self.sinks = torch.nn.Parameter(torch.randn(2))

        def forward(self, x):
            q, k, v = self.qkv(x).split([32, 16, 16], dim=-1)
            b, t = x.shape[:2]
            out, lse = rove.torch_ops.attention(
                q.reshape(b, t, 2, 16), k.reshape(b, t, 1, 16), v.reshape(b, t, 1, 16),
                window=5, softcap=20.0, sinks=self.sinks, return_lse=True)
            return self.o(out.reshape(b, t, 32)), lse

    m, x = Block(), torch.randn(2, 9, 32)

    def loss(mod):
        y, lse = mod(x)
        return (y ** 2).sum() + lse.sum()

    want = loss(m)
    grads = torch.autograd.grad(want, list(m.parameters()))
    got = loss(torch.compile(m, fullgraph=True))
    cgrads = torch.autograd.grad(got, list(m.parameters()))
    assert torch.allclose(got, want, rtol=1e-5)
    for a, b in zip(cgrads, grads):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5)
    ep = torch.export.export(m, (x,))
    y, lse = ep.module()(x)
    assert torch.allclose(y, m(x)[0], rtol=1e-5, atol=1e-6)
