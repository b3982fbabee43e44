# SPDX-License-Identifier: MIT
"""rove.rotate / rove.rotate_angles and rove.inv_freq against float64 references."""
import numpy as np
import pytest

import rove
from rove import _tensor
from conftest import randn
from reference import ref_inv_freq, ref_rotate, rel_err


@pytest.mark.parametrize("kw", [
    {}, dict(theta=5e5), dict(rotary_dim=48), dict(scaling="linear", factor=4.0),
    dict(scaling="ntk", factor=3.0), dict(scaling="yarn", factor=16.0, L0=4096),
    dict(scaling="yarn", factor=4.0, L0=2048, truncate=False, attention_factor=1.3,
         beta_fast=16.0, beta_slow=2.0),
    dict(scaling="llama3", factor=8.0, L0=8192, theta=5e5),
    dict(freq_factors=np.linspace(1, 3, 32)),
])
def test_inv_freq_matches_the_formulas(kw):
    kw = dict(kw)
    d = 128 if kw.get("scaling") == "llama3" else 64
    L0 = kw.pop("L0", 0)
    rope = rove.RopeConfig(original_max_position=L0, **kw)
    w, m = rove.inv_freq(rope, d)
    names = {"rotary_dim": "r", "low_freq_factor": "low", "high_freq_factor": "high"}
    want_w, want_m = ref_inv_freq(d, L0=L0, **{names.get(k, k): val for k, val in kw.items()})
    assert w.dtype == np.float64 and w.shape == ((kw.get("rotary_dim") or d) // 2,)
    assert np.max(np.abs(w / want_w - 1)) < 1e-12 and abs(m - want_m) < 1e-12


def test_rope_config_defaults_come_from_c():
    from rove import _lib
    c = _lib.RopeConfig()
    _lib.lib.rove_rope_config_init(c)
    r = rove.RopeConfig()
    assert (r.theta, r.factor, r.beta_fast, r.beta_slow, r.truncate, r.low_freq_factor,
            r.high_freq_factor) == (c.theta, c.factor, c.beta_fast, c.beta_slow,
                                    bool(c.truncate), c.low_freq_factor, c.high_freq_factor)
    assert hash(r) == hash(rove.RopeConfig()) and r.replace(theta=5e5).theta == 5e5


def angles_of(pos, rope, d):
    w, _ = rove.inv_freq(rope, d)
    return np.asarray(pos, np.float64)[..., None] * w


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("rope", [rove.RopeConfig(), rove.RopeConfig(rotary_dim=32, pairing="interleaved"),
                                  rove.RopeConfig(scaling="yarn", factor=4.0, original_max_position=32)])
def test_rotate(rng, layout, rope):
    B, S, H, d = 2, 21, 3, 64
    x = randn(rng, B, S, H, d)
    pos = rng.integers(-1000, 2 ** 20, size=(B, S))
    r = rope.rotary_dim or d
    want = ref_rotate(x, angles_of(pos, rope, d)[:, :, None, :], r, rope.pairing)  # no m
    xin = np.ascontiguousarray(x.transpose(0, 2, 1, 3)) if layout == "bhsd" else x
    got = rove.rotate(xin, pos, rope=rope, layout=layout)
    assert got is not xin and got.shape == xin.shape and got.flags.c_contiguous
    g = got.transpose(0, 2, 1, 3) if layout == "bhsd" else got
    assert rel_err(g, want) < 2e-6
    back = rove.rotate(got, pos, rope=rope, layout=layout, inverse=True)
    assert rel_err(back, xin) < 2e-6


def test_rotate_defaults_inplace_torch_and_copies(rng, torch):
    x = randn(rng, 2, 10, 2, 32)
    want = ref_rotate(x, angles_of(np.arange(10), rove.RopeConfig(), 32)[None, :, None], 32)
    assert rel_err(rove.rotate(x), want) < 2e-6  # pos None: 0..seq-1 in every row
    assert rel_err(rove.rotate(x[0]), want[0]) < 2e-6  # 3-D: [n_tokens, heads, d]
    t = torch.from_numpy(x.copy())
    res = rove.rotate(t, inplace=True)
    assert res is t and rel_err(t.numpy(), want) < 2e-6
    # inplace on strides rove_rotate cannot take: through one copy, written back
    big = np.zeros((2, 10, 2, 64), np.float32)
    big[..., ::2] = x
    view = big[..., ::2]
    before = _tensor.copies
    rove.rotate(view, inplace=True)
    assert _tensor.copies - before == 2 and rel_err(view, want) < 2e-6
    assert np.all(big[..., 1::2] == 0)
    # bhsd made from a bshd buffer (HF's transpose view): rotated in place, no copy
    y = x.copy()
    before = _tensor.copies
    rove.rotate(np.transpose(y, (0, 2, 1, 3)), layout="bhsd", inplace=True)
    assert _tensor.copies == before and rel_err(y, want) < 2e-6


@pytest.mark.parametrize("inplace", [False, True])
def test_rotate_contiguous_bhsd_goes_token_major(rng, torch, inplace):
    """A contiguous bhsd tensor is rotated through a token-major copy (its one-row-per-
    head mode built each token's cos/sin table once per head: 7-14x slower): the same
    bits as the bshd call, for numpy and torch, in place or not."""
    x = randn(rng, 2, 37, 4, 32)
    pos = rng.integers(-50, 5000, size=(2, 37))
    want = rove.rotate(x, pos)
    for xb in (np.ascontiguousarray(x.transpose(0, 2, 1, 3)),
               torch.from_numpy(x).transpose(1, 2).contiguous()):
        before = _tensor.copies
        got = rove.rotate(xb, pos, layout="bhsd", inplace=inplace)
        assert _tensor.copies - before == 2  # token-major and back
        assert (got is xb) == inplace
        g = got.numpy() if isinstance(got, torch.Tensor) else got
        assert np.array_equal(g.transpose(0, 2, 1, 3), want)


def test_rotate_angles_gqa(rng):
    B, S, H, ah, d = 1, 12, 4, 2, 64
    x = randn(rng, B, S, H, d)
    ang = rng.uniform(-100, 100, size=(B, S, ah, d // 2))
    want = ref_rotate(x, np.repeat(ang, H // ah, axis=2), d)
    assert rel_err(rove.rotate_angles(x, ang), want) < 2e-6
    xb = np.ascontiguousarray(x.transpose(0, 2, 1, 3))
    got = rove.rotate_angles(xb, ang, layout="bhsd")
    assert rel_err(got.transpose(0, 2, 1, 3), want) < 2e-6
    with pytest.raises(ValueError, match="divide"):
        rove.rotate_angles(x, rng.uniform(size=(B, S, 3, d // 2)))
    with pytest.raises(TypeError, match="float64"):
        rove.rotate_angles(x, ang.astype(np.float32))


def _torch_ref(x, ang, rope, inverse):
    """x [b, s, h, d] float64 rotated by ang [b, s, h, r/2] in torch ops (reference.py's
    torch_rotate), with the rotated block placed first or last."""
    from reference import torch_rotate
    import torch
    d, r = x.shape[-1], rope.rotary_dim or x.shape[-1]
    last = rope.placement == "last"
    if last:
        x = torch.cat([x[..., d - r:], x[..., :d - r]], -1)
    y = torch_rotate(x, ang, r, rope.pairing, sign=-1.0 if inverse else 1.0)
    return torch.cat([y[..., r:], y[..., :r]], -1) if last else y


ROPES = [rove.RopeConfig(), rove.RopeConfig(pairing="interleaved", rotary_dim=8),
         rove.RopeConfig(rotary_dim=8, placement="last", theta=500.0)]


@pytest.mark.parametrize("rope", ROPES)
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("inverse", [False, True])
def test_rotate_gradients(rng, rope, layout, inverse):
    """rotate (positions) and rotate_angles (GQA angles) under torch.autograd: dx (and d
    angles) against float64 torch autograd through the same rotation; 3-D x too."""
    torch = pytest.importorskip("torch")
    B, S, H, d = 2, 7, 4, 16
    t = (lambda a: a.transpose(1, 2)) if layout == "bhsd" else (lambda a: a)
    x64 = torch.tensor(rng.uniform(-1, 1, (B, S, H, d)), requires_grad=True)
    dy = torch.tensor(rng.uniform(-1, 1, (B, S, H, d)))
    pos = rng.integers(-50, 5000, (B, S))
    w, _ = rove.inv_freq(rope, d)
    ang64 = torch.tensor(rng.uniform(-9, 9, (B, S, 2, w.shape[0])), requires_grad=True)
    for name, a_ref in (("pos", torch.tensor(pos[..., None, None] * w)),
                        ("angles", ang64.repeat_interleave(H // 2, dim=2))):
        x64.grad = ang64.grad = None
        (_torch_ref(x64, a_ref.expand(B, S, H, -1), rope, inverse) * dy).sum().backward()
        x = t(x64.detach()).float().contiguous().requires_grad_()
        ang = ang64.detach().clone().requires_grad_()
        y = rove.rotate(x, pos, rope=rope, inverse=inverse, layout=layout) if name == "pos" \
            else rove.rotate_angles(x, ang, rope=rope, inverse=inverse, layout=layout)
        assert y.requires_grad
        (t(y) * dy.float()).sum().backward()
        assert rel_err(t(x.grad).numpy(), x64.grad.numpy()) < 2e-6, name
        if name == "angles":
            assert ang.grad.dtype == torch.float64
            assert rel_err(ang.grad.numpy(), ang64.grad.numpy()) < 2e-6
    x3 = torch.tensor(rng.uniform(-1, 1, (S, H, d)), dtype=torch.float32, requires_grad=True)
    rove.rotate(x3, pos[0], rope=rope, inverse=inverse).sum().backward()
    want = rove.rotate(torch.ones(S, H, d), pos[0], rope=rope, inverse=not inverse)
    assert torch.equal(x3.grad, want)  # R^{-1} applied to dy = 1


def test_rotate_output_edited_in_place(rng):
    """rotate by positions saves nothing for its backward: its output may be edited in
    place (q scaled after RoPE), as with torch's own rotate_half form."""
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(randn(rng, 1, 3, 2, 8)).requires_grad_()
    y = rove.rotate(x, [0, 1, 2])
    y.mul_(2)
    y.sum().backward()
    assert torch.equal(x.grad, 2 * rove.rotate(torch.ones(1, 3, 2, 8), [0, 1, 2], inverse=True))


def test_rotate_refusals_under_autograd(rng):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(randn(rng, 1, 6, 2, 8))
    ang = torch.from_numpy(rng.uniform(-3, 3, size=(1, 6, 2, 4))).requires_grad_()
    with pytest.raises(RuntimeError, match="inplace"):
        rove.rotate(x.clone().requires_grad_(), inplace=True)
    with pytest.raises(RuntimeError, match="inplace"):
        rove.rotate_angles(x.clone(), ang, inplace=True)
    with pytest.raises(RuntimeError, match="inplace"):  # half precision: the same rule
        rove.rotate_angles(x.bfloat16(), ang, inplace=True)
    with pytest.raises(TypeError, match="torch"):
        rove.rotate_angles(x.numpy(), ang)
    with torch.no_grad():  # inference: allowed, equal to the detached call
        got = rove.rotate_angles(x, ang)
        assert torch.equal(rove.rotate_angles(x.clone(), ang, inplace=True), got)
    assert torch.equal(got, rove.rotate_angles(x, ang.detach()))


def test_rotate_half_precision_refusals(rng):
    """The half-precision path refuses what the float32 path refuses: in-place arrays whose
    elements share memory (numpy and torch), array-likes that are not numpy / torch (their
    dtype does not matter), angles that are not float64 (bf16 ones by name)."""
    torch = pytest.importorskip("torch")
    from numpy.lib.stride_tricks import as_strided
    base = np.arange(1, 9).astype(np.float16)
    shared = as_strided(base, shape=(1, 3, 1, 8), strides=(0, 0, 0, base.itemsize))
    with pytest.raises(ValueError, match="share memory"):
        rove.rotate(shared, inplace=True)
    assert np.array_equal(base, np.arange(1, 9).astype(np.float16))
    with pytest.raises(ValueError, match="share memory"):
        rove.rotate(torch.ones(1, 1, 1, 8).bfloat16().expand(1, 3, 1, 8), inplace=True)

    class ArrayLike:  # stands in for jax / dask arrays: a dtype and __array__, not numpy
        def __init__(self, a):
            self.a, self.dtype, self.shape = a, a.dtype, a.shape

        def __array__(self, dtype=None, copy=None):
            return self.a if dtype is None else self.a.astype(dtype)
    for dt in (np.float32, np.float16):
        with pytest.raises(TypeError, match="numpy.ndarray or a CPU torch.Tensor"):
            rove.rotate(ArrayLike(randn(rng, 1, 4, 2, 8).astype(dt)))
    with pytest.raises(TypeError, match="float64"):
        rove.rotate_angles(torch.rand(1, 4, 2, 8), torch.rand(1, 4, 2, 4).bfloat16())


@pytest.mark.parametrize("kind", ["bfloat16", "float16", "numpy float16"])
def test_rotate_half_precision(rng, kind):
    """bf16 / fp16 x: rotated in float32 and rounded once (inplace: written back); under
    autograd the gradient reaches x in its dtype."""
    torch = pytest.importorskip("torch")
    x32 = randn(rng, 2, 5, 3, 16)
    pos = rng.integers(0, 100, 5)
    if kind == "numpy float16":
        x = x32.astype(np.float16)
        want = rove.rotate(x.astype(np.float32), pos).astype(np.float16)
        assert np.array_equal(rove.rotate(x, pos), want)
        assert rove.rotate(x, pos, inplace=True) is x and np.array_equal(x, want)
        return
    dt = getattr(torch, kind)
    x = torch.from_numpy(x32).to(dt)
    want = rove.rotate(x.float(), pos).to(dt)
    got = rove.rotate(x.transpose(1, 2), pos, layout="bhsd")
    assert got.dtype == dt and torch.equal(got, want.transpose(1, 2))
    assert torch.equal(rove.rotate(x, pos), want)
    y = x.clone()
    assert rove.rotate(y, pos, inplace=True) is y and torch.equal(y, want)
    xg = x.clone().requires_grad_()
    rove.rotate(xg, pos).float().sum().backward()
    assert xg.grad.dtype == dt
    assert torch.equal(xg.grad, rove.rotate(torch.ones(2, 5, 3, 16), pos, inverse=True).to(dt))


def test_rotate_bad_input(rng):
    x = randn(rng, 1, 4, 2, 32)
    with pytest.raises(ValueError, match="outside int32"):
        rove.rotate(x, np.array([0, 1, 2, 2 ** 33]))
    with pytest.raises(TypeError, match="float32"):
        rove.rotate(x.astype(np.float64))
    ro = x.copy()
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        rove.rotate(ro, inplace=True)
    assert np.array_equal(rove.rotate(ro), rove.rotate(x))
