# SPDX-License-Identifier: MIT
"""rove.gla / GLAPlan.forward / GLAPlan.recurrent under torch.autograd
(rove_gla_backward): dq, dk, dv, dg, d initial_state and d angles against PyTorch's own
autograd through a float64 torch implementation of the recurrence in rove.h (torch's
derivatives of torch ops: the reference users trust), for every rotation set, both
pairings, partial rotary, chunk lengths, 3-D inputs, a loss on the final state too;
torch.autograd.gradcheck on float32 (finite differences of librove's own forward); a
training step; the refusals of what the differentiable path does not take."""
import zlib

import numpy as np
import pytest

import rove
import rove.torch_ops  # noqa: F401 (rove::gla)
from reference import rel_err, torch_rotate

torch = pytest.importorskip("torch")

TOL = 1e-4  # fp32 gradients vs float64 autograd, relative to max |grad|


def reference_gla(q, k, v, g, angles, s0, rot, r, pairing, scale):
    """The recurrence of rove.h in float64 torch ops, token by token:
    S_t = diag(exp(g_t)) S_{t-1} + k~_t v~_t^T, o_t = R_t^{-1} (scale S_t^T q~_t)."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    S = torch.zeros(B, H, K, V, dtype=torch.float64) if s0 is None else s0
    outs = []
    for t in range(T):
        qt, kt, vt = q[:, t], k[:, t], v[:, t]
        if angles is not None:
            a = angles[:, t]
            if "q" in rot:
                qt = torch_rotate(qt, a, r, pairing)
            if "k" in rot:
                kt = torch_rotate(kt, a, r, pairing)
            if "v" in rot:
                vt = torch_rotate(vt, a, r, pairing)
        S = torch.exp(g[:, t]).unsqueeze(-1) * S + kt.unsqueeze(-1) * vt.unsqueeze(-2)
        o = scale * torch.einsum("bhkv,bhk->bhv", S, qt)
        if angles is not None and "o" in rot:
            o = torch_rotate(o, angles[:, t], r, pairing, -1.0)
        outs.append(o)
    return torch.stack(outs, dim=1), S


ROTS = {"none": "", "rope": "qk", "rove": "qkvo", "v": "v", "o": "o"}


def _inputs(gen, B, T, H, K, V, r, angles=True, s0=True):
    f = lambda *s: torch.tensor(gen.uniform(-1, 1, s), dtype=torch.float64)  # noqa: E731
    x = {"q": f(B, T, H, K), "k": f(B, T, H, K), "v": f(B, T, H, V),
         "g": torch.tensor(-gen.uniform(0, 1, (B, T, H, K)), dtype=torch.float64)}
    x["angles"] = torch.tensor(gen.uniform(-20, 20, (B, T, H, r // 2))) if angles else None
    x["s0"] = f(B, H, K, V) if s0 else None
    return x


def _check(gen, rot_name, pairing="half", r=0, chunk=None, B=2, T=37, H=2, K=16, V=16,
           final_loss=True, recurrent=False):
    rr = r or K
    x = _inputs(gen, B, T, H, K, V, rr)
    dout = torch.tensor(gen.uniform(-1, 1, (B, T, H, V)))
    dfin = torch.tensor(gen.uniform(-1, 1, (B, H, K, V)))
    scale = 1.0 / np.sqrt(K)
    # reference: float64 torch autograd
    ref = {n: (t.clone().requires_grad_(True) if t is not None else None) for n, t in x.items()}
    o, S = reference_gla(ref["q"], ref["k"], ref["v"], ref["g"], ref["angles"], ref["s0"],
                         ROTS[rot_name], rr, pairing, scale)
    loss = (o * dout).sum() + ((S * dfin).sum() if final_loss else 0.0)
    loss.backward()
    # librove: float32 tensors (float64 angles)
    lib = {n: (t.float() if n != "angles" else t).clone().requires_grad_(True)
           for n, t in x.items() if t is not None}
    flags = {"v": rove.ROTATE_V, "o": rove.ROTATE_O}.get(rot_name, rot_name)
    plan = rove.GLAPlan(H, K, V, rotate=flags, rotary_dim=r, pairing=pairing, chunk=chunk)
    run = plan.recurrent if recurrent else plan.forward
    out, fs = run(lib["q"], lib["k"], lib["v"], lib["g"], angles=lib["angles"],
                  initial_state=lib["s0"], return_final_state=True)
    assert rel_err(out.detach().double(), o.detach()) < 1e-5
    l2 = (out * dout.float()).sum() + ((fs * dfin.float()).sum() if final_loss else 0.0)
    l2.backward()
    for n in lib:
        want = ref[n].grad
        if n == "angles" and rot_name == "none":
            assert (lib[n].grad == 0).all()
            continue
        e = rel_err(lib[n].grad.double(), want)
        # dg and the angles: their terms cancel (rove.h), hence the looser bound
        assert e < (1e-3 if n in ("g", "angles") else TOL), (n, rot_name, e)


@pytest.mark.parametrize("rot", list(ROTS))
@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_gradients_match_torch(rot, pairing):
    _check(np.random.default_rng(zlib.crc32(repr((rot, pairing)).encode()) % 1000), rot, pairing)


@pytest.mark.parametrize("chunk", [16, 32, 64, 128])
def test_chunks_partial_rotary_and_no_final_loss(chunk):
    _check(np.random.default_rng(chunk), "rove", r=8, chunk=chunk, T=150, B=1,
           final_loss=chunk != 32)


def test_recurrent_is_differentiable_too():
    _check(np.random.default_rng(3), "rove", T=9, recurrent=True)


def test_3d_inputs_and_only_some_requiring_grad():
    gen = np.random.default_rng(5)
    q, k, v = (torch.tensor(gen.uniform(-1, 1, (20, 2, 8)), dtype=torch.float32)
               for _ in range(3))
    g = torch.tensor(-gen.uniform(0, 1, (20, 2, 8)), dtype=torch.float32, requires_grad=True)
    out = rove.gla(q, k, v, g)
    out.sum().backward()
    assert g.grad.shape == g.shape and torch.isfinite(g.grad).all()
    assert q.grad is None
    want = rove.gla(q[None], k[None], v[None], g.detach()[None])[0]
    assert torch.equal(out.detach(), want)


def test_double_backward_raises():
    """create_graph=True gives the first-order gradient (equal to the plain backward's);
    a backward through that gradient raises, a loss linear in the output included (its
    second-order term is never dropped without a word)."""
    gen = np.random.default_rng(6)
    q, k, v = (torch.tensor(gen.uniform(-1, 1, (1, 5, 2, 8)), dtype=torch.float32,
                            requires_grad=True) for _ in range(3))
    g = torch.tensor(-gen.uniform(0, 1, (1, 5, 2, 8)), dtype=torch.float32)
    for loss in (lambda o: o.sum(), lambda o: o.square().sum()):
        dq, = torch.autograd.grad(loss(rove.gla(q, k, v, g)), q, create_graph=True)
        want, = torch.autograd.grad(loss(rove.gla(q, k, v, g)), q)
        assert torch.equal(dq.detach(), want) and dq.requires_grad
        with pytest.raises(RuntimeError, match="double backward"):
            dq.square().sum().backward()


def test_selective_angles_double_backward_raises():
    """The angles' backward is not differentiable either: a backward through a gradient
    taken with create_graph=True through rove.selective_angles alone (angles into pure
    torch ops) raises, not a silently dropped second-order term (README: a double backward
    raises)."""
    phi = torch.rand(1, 6, 1, 4, requires_grad=True)
    for loss in (lambda a: a.sum(), lambda a: torch.sin(a).sum()):
        dphi, = torch.autograd.grad(loss(rove.selective_angles(phi)[0]), phi, create_graph=True)
        with pytest.raises(RuntimeError, match="double backward"):
            torch.autograd.grad(dphi.square().sum(), phi)
    g, = torch.autograd.grad(torch.sin(rove.selective_angles(phi)[0]).sum(), phi)
    assert torch.isfinite(g).all()  # first order still works


@pytest.mark.filterwarnings("ignore:Input #")  # gradcheck prefers float64 inputs
def test_gradcheck_float32():
    """torch.autograd.gradcheck of librove's GLA forward against its backward (finite
    differences in float32, hence the loose tolerances)."""
    gen = np.random.default_rng(9)
    q, k, v = (torch.tensor(gen.uniform(-1, 1, (1, 6, 2, 4)), dtype=torch.float32,
                            requires_grad=True) for _ in range(3))
    g = torch.tensor(-gen.uniform(0.1, 1, (1, 6, 2, 4)), dtype=torch.float32, requires_grad=True)
    ang = torch.tensor(gen.uniform(-3, 3, (1, 6, 2, 2)), requires_grad=True)
    fn = lambda q, k, v, g, a: rove.gla(q, k, v, g, angles=a, rotate="rove")  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, k, v, g, ang), eps=1e-2, atol=3e-3, rtol=3e-2,
                                    fast_mode=False)


def test_training_step_lowers_the_loss():
    """A few SGD steps on the log decays and the keys of a GLA layer lower a loss."""
    gen = np.random.default_rng(13)
    q, v = (torch.tensor(gen.uniform(-1, 1, (1, 32, 2, 16)), dtype=torch.float32)
            for _ in range(2))
    k = torch.tensor(gen.uniform(-1, 1, (1, 32, 2, 16)), dtype=torch.float32, requires_grad=True)
    w = torch.zeros(1, 32, 2, 16, requires_grad=True)  # g = -softplus(w) <= 0
    target = torch.zeros(1, 32, 2, 16)
    losses = []
    for _ in range(6):
        g = -torch.nn.functional.softplus(w)
        loss = ((rove.gla(q, k, v, g) - target) ** 2).sum()
        losses.append(float(loss.detach()))
        loss.backward()
        with torch.no_grad():
            for p in (k, w):
                p -= 0.01 * p.grad
                p.grad = None
    assert losses[-1] < 0.9 * losses[0], losses


def test_refusals():
    q = torch.zeros(1, 4, 2, 8, requires_grad=True)
    g = torch.zeros(1, 4, 2, 8)
    with pytest.raises(TypeError, match="float32"):
        rove.gla(q.double(), q.double(), q.double(), g.double())
    with pytest.raises(ValueError, match="out="):
        rove.gla(q, q, q, g, out=torch.empty(1, 4, 2, 8))
    with pytest.raises(TypeError, match="float64"):
        rove.gla(q, q, q, g, angles=torch.zeros(1, 4, 2, 4, requires_grad=True))
    with pytest.raises(TypeError, match="torch"):
        rove.gla(q, np.zeros((1, 4, 2, 8), np.float32), q, g)
    # angles that are not float64 (numpy float32, big-endian float64, a list) with torch
    # inputs that require grad: a TypeError naming them (was an AttributeError)
    for bad in (np.zeros((1, 4, 2, 4), np.float32), np.zeros((1, 4, 2, 4), ">f8"),
                np.zeros((1, 4, 2, 4)).tolist()):
        with pytest.raises(TypeError, match="angles is a"):
            rove.gla(q, q, q, g, angles=bad)


# ---- packed sequences (cu_seqlens, flash-linear-attention's varlen) -------------------------
LENS = (37, 0, 1, 70, 16, 5)


@pytest.mark.parametrize("recurrent", [False, True])
def test_packed_sequences_match_torch_and_single_calls(recurrent):
    """GLA over packed sequences (cu_seqlens): the output, the final states and every
    gradient (q, k, v, g, angles, the initial states) against float64 torch autograd run
    sequence by sequence (each from its own state), and bit for bit equal to librove's
    calls on each sequence alone (forward); 3-D q as well as [1, seq, H, K]."""
    gen = np.random.default_rng(77 + recurrent)
    H, K, V, N = 2, 16, 24, len(LENS)
    T = sum(LENS)
    cu = np.concatenate([[0], np.cumsum(LENS)]).astype(np.int64)
    x = _inputs(gen, 1, T, H, K, V, K)
    s0 = torch.tensor(gen.uniform(-1, 1, (N, H, K, V)))
    dout = torch.tensor(gen.uniform(-1, 1, (1, T, H, V)))
    dfin = torch.tensor(gen.uniform(-1, 1, (N, H, K, V)))
    scale = 1.0 / np.sqrt(K)
    ref = {n: x[n].clone().requires_grad_(True) for n in ("q", "k", "v", "g", "angles")}
    ref["s0"] = s0.clone().requires_grad_(True)
    outs, finals = [], []
    for i in range(N):
        a, b = int(cu[i]), int(cu[i + 1])
        if a == b:  # an empty sequence: no output, its state passes through
            finals.append(ref["s0"][i:i + 1])
            continue
        o, S = reference_gla(ref["q"][:, a:b], ref["k"][:, a:b], ref["v"][:, a:b],
                             ref["g"][:, a:b], ref["angles"][:, a:b], ref["s0"][i:i + 1],
                             "qkvo", K, "half", scale)
        outs.append(o)
        finals.append(S)
    o, S = torch.cat(outs, 1), torch.cat(finals, 0)
    ((o * dout).sum() + (S * dfin).sum()).backward()
    plan = rove.GLAPlan(H, K, V, rotate="rove", chunk=16, threads=2)
    run = plan.recurrent if recurrent else plan.forward
    lib = {n: (t.float() if n != "angles" else t).detach().clone().requires_grad_(True)
           for n, t in ref.items()}
    out, fs = run(lib["q"], lib["k"], lib["v"], lib["g"], angles=lib["angles"],
                  initial_state=lib["s0"], return_final_state=True,
                  cu_seqlens=torch.tensor(cu))
    assert out.shape == (1, T, H, V) and fs.shape == (N, H, K, V)
    assert rel_err(out.detach().double(), o.detach()) < 1e-5
    assert rel_err(fs.detach().double(), S.detach()) < 1e-5
    ((out * dout.float()).sum() + (fs * dfin.float()).sum()).backward()
    for n in lib:
        e = rel_err(lib[n].grad.double(), ref[n].grad)
        assert e < (1e-3 if n in ("g", "angles") else TOL), (n, e)
    # each sequence alone (numpy, no grad): the same bits
    npx = {n: t.detach().numpy() for n, t in lib.items()}
    for i in range(N):
        a, b = int(cu[i]), int(cu[i + 1])
        if a == b:  # no tokens: the state passes through
            assert np.array_equal(fs[i].detach().numpy(), npx["s0"][i])
            continue
        oi, si = run(*(npx[n][0, a:b] for n in ("q", "k", "v", "g")),
                     angles=npx["angles"][0, a:b], initial_state=npx["s0"][i],
                     return_final_state=True)
        assert np.array_equal(oi, out[0, a:b].detach().numpy())
        assert np.array_equal(si, fs[i].detach().numpy())
    # 3-D q: the same call without the batch axis
    o3 = run(*(npx[n][0] for n in ("q", "k", "v", "g")), angles=npx["angles"][0],
             initial_state=npx["s0"], cu_seqlens=cu)
    assert np.array_equal(o3, out[0].detach().numpy())


def test_packed_sequences_refusals():
    gen = np.random.default_rng(5)
    x = _inputs(gen, 2, 10, 2, 8, 8, 8)
    q, k, v, g = (x[n].float().numpy() for n in ("q", "k", "v", "g"))
    plan = rove.GLAPlan(2, 8, 8, rotate="none")
    with pytest.raises(ValueError, match="one packed row"):
        plan.forward(q, k, v, g, cu_seqlens=[0, 4, 10])
    with pytest.raises(ValueError, match="ends at 9"):
        plan.forward(q[:1], k[:1], v[:1], g[:1], cu_seqlens=[0, 4, 9])
    with pytest.raises(ValueError, match="not decrease"):
        plan.forward(q[:1], k[:1], v[:1], g[:1], cu_seqlens=[0, 6, 4, 10])
    with pytest.raises(TypeError):
        plan.forward(q[:1], k[:1], v[:1], g[:1], cu_seqlens=[0.0, 10.0])
    with pytest.raises(ValueError):  # a state per sequence, not per batch row
        plan.forward(q[:1], k[:1], v[:1], g[:1], cu_seqlens=[0, 4, 10],
                     initial_state=np.zeros((1, 2, 8, 8), np.float32))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("recurrent", [False, True])
def test_half_precision_inputs(dtype, recurrent):
    """bfloat16 / float16 q, k, v, g and initial state (as flash-linear-attention takes
    them): the float32 call on the widened values, the output rounded once to q's dtype,
    the final state float32, bit for bit; gradients are the float32 ones rounded to each
    input's dtype; rove.torch_ops.gla (eager and compiled) gives the same; numpy float16
    too; out= is refused (it takes float32)."""
    gen = torch.Generator().manual_seed(21)
    B, T, H, K, V = 2, 37, 2, 16, 8
    x = [torch.randn(B, T, H, n, generator=gen).to(dtype) for n in (K, K, V)]
    x.append((-torch.rand(B, T, H, K, generator=gen)).to(dtype))
    x.append(torch.randn(B, H, K, V, generator=gen).to(dtype))
    fn = rove.gla_recurrent if recurrent else rove.gla
    leaves = [t.clone().requires_grad_() for t in x]
    wide = [t.detach().float().requires_grad_() for t in x]
    out, fs = fn(*leaves[:4], initial_state=leaves[4], return_final_state=True)
    o32, f32 = fn(*wide[:4], initial_state=wide[4], return_final_state=True)
    assert out.dtype == dtype and fs.dtype == torch.float32
    assert torch.equal(out, o32.to(dtype)) and torch.equal(fs, f32)
    dout = torch.randn(out.shape, generator=gen)
    (out.float() * dout).sum().backward(retain_graph=True)
    (o32.to(dtype).float() * dout).sum().backward()
    for a, b in zip(leaves, wide):
        assert a.grad.dtype == dtype and torch.equal(a.grad, b.grad.to(dtype))
    def op(*a):
        return rove.torch_ops.gla(*a[:4], initial_state=a[4], recurrent=recurrent,
                                  return_final_state=True)
    for f in (op, torch.compile(op, fullgraph=True, backend="aot_eager")):
        o2, f2 = f(*x)
        assert o2.dtype == dtype and torch.equal(o2, out.detach()) and torch.equal(f2, fs.detach())
    if dtype == torch.float16:
        got = fn(*(t.numpy() for t in x[:4]), initial_state=x[4].numpy())
        assert got.dtype == np.float16 and np.array_equal(got, out.detach().numpy())
    with pytest.raises(ValueError, match="out="):
        fn(*x[:4], out=torch.empty(B, T, H, V))
    for f in (fn, op):  # only half-precision inputs are cast: float64 beside them is refused
        with pytest.raises(TypeError, match="float64"):
            f(x[0].double(), *x[1:4], None) if f is op else f(x[0].double(), *x[1:4])
