# SPDX-License-Identifier: MIT
"""bfloat16 / float16 tensors in rove.attention, Plan.attention and KVCache
(rove_attention_forward_typed, rove_kv_cache_attention_typed, rove_kv_cache_append_typed).

The contract (rove.h, "Element types"): inputs are widened exactly, all arithmetic is fp32
and the output is rounded once (round-to-nearest-even), so a typed call equals the float32
call on the inputs cast to float32 with the output cast back, bit for bit; the LSE is
float32 and equals the float32 call's. The tensors are read in place (no copies), as the
float32 ones are. Against an independent reference (torch's scaled_dot_product_attention
on the float32-cast inputs, rotated in float64) the typed output is within the rounding of
its type."""
import numpy as np
import pytest

import rove
from rove import _tensor
from conftest import randn

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32
# (q, k, v) dtypes: uniform, and mixed (each tensor its own type)
COMBOS = [(BF16, BF16, BF16), (F16, F16, F16), (BF16, F16, F32), (F32, BF16, F16),
          (F16, F32, BF16)]
IDS = ["bf16", "f16", "bf16-f16-f32", "f32-bf16-f16", "f16-f32-bf16"]
# max |out - ref| / max |v| for an output rounded to q's dtype (half an ulp: 2^-9 / 2^-12
# relative to |out| <= max|v|) plus the fp32 arithmetic; ~3x margin. f32 outputs: fp32.
TOL = {BF16: 6e-3, F16: 8e-4, F32: 1e-5}

# name: (n_heads, n_kv_heads, head_dim, batch, q_len, kv_len, plan kwargs)
CASES = {
    "prefill-rove": (4, 4, 64, 2, 37, 37, dict(rotate="rove")),
    "prefill-rope": (4, 4, 64, 2, 37, 37, dict(rotate="rope")),
    "gqa-rove": (8, 2, 32, 1, 29, 29, dict(rotate="rove")),
    "gqa-rope-yarn": (6, 2, 64, 1, 24, 24, dict(
        rotate="rope", rope=rove.RopeConfig(scaling="yarn", factor=4.0,
                                            original_max_position=16))),
    "decode-rove": (8, 2, 64, 2, 1, 700, dict(rotate="rove")),
    "decode-rope": (4, 1, 128, 1, 1, 1000, dict(rotate="rope")),
    "chunk-noncausal": (4, 2, 64, 1, 5, 50, dict(rotate="rove", causal=False)),
}


def _typed(rng, shape, dtype, scale=1.0):
    return (torch.from_numpy(randn(rng, *shape)) * scale).to(dtype)


def _ref(plan, q, k, v):
    """torch SDPA reference (float64) for float32 q [B, Lq, H, d], k, v [B, Lk, Hk, d] with
    default positions (q bottom-right aligned, kv 0..Lk-1): the rotations of the plan
    applied in float64 (the full head, half pairing), as test_kvcache_types.py builds it."""
    B, Lq, H, d = q.shape
    Lk, Hk = k.shape[1], k.shape[2]
    w, m = rove.inv_freq(plan.rope, d)
    w = torch.from_numpy(w)
    qp = torch.arange(Lk - Lq, Lk, dtype=torch.float64)
    kp = torch.arange(Lk, dtype=torch.float64)

    def rot(x, pos, sign=1.0):
        ang = pos[:, None, None] * w  # [L, 1, d/2]
        h = d // 2
        c, s = torch.cos(ang), sign * torch.sin(ang)
        a, b = x[..., :h], x[..., h:]
        return torch.cat([a * c - b * s, a * s + b * c], -1)

    qt, kt, vt = (x.double() for x in (q, k, v))
    if plan.rotate & rove.ROTATE_Q:
        qt = m * rot(qt, qp)
    if plan.rotate & rove.ROTATE_K:
        kt = m * rot(kt, kp)
    if plan.rotate & rove.ROTATE_V:
        vt = rot(vt, kp)
    g = H // Hk
    kt, vt = kt.repeat_interleave(g, 2), vt.repeat_interleave(g, 2)
    mask = (kp[None, :] <= qp[:, None]) if plan.causal else None
    out = F.scaled_dot_product_attention(qt.transpose(1, 2), kt.transpose(1, 2),
                                         vt.transpose(1, 2), attn_mask=mask,
                                         scale=plan.scale).transpose(1, 2)
    if plan.rotate & rove.ROTATE_O:
        out = rot(out, qp, sign=-1.0)
    return out


def _err(got, ref, v):
    return float((got.double() - ref).abs().max() / v.double().abs().max())


@pytest.mark.parametrize("dtypes", COMBOS, ids=IDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_typed_equals_float32_call_bit_for_bit(rng, case, dtypes):
    H, Hk, d, B, Lq, Lk, kw = CASES[case]
    dq, dk, dv = dtypes
    q = _typed(rng, (B, Lq, H, d), dq)
    k = _typed(rng, (B, Lk, Hk, d), dk)
    v = _typed(rng, (B, Lk, Hk, d), dv)
    plan = rove.Plan(H, Hk, d, **kw)
    before = _tensor.copies
    got, lse = plan.attention(q, k, v, return_lse=True)
    assert _tensor.copies == before  # read in place, written in place
    assert got.dtype == dq and got.shape == q.shape and lse.dtype == F32
    want, want_lse = plan.attention(q.float(), k.float(), v.float(), return_lse=True)
    assert torch.equal(got, want.to(dq))
    assert torch.equal(lse, want_lse)
    # rove.attention (the plan cache) is the same call
    assert torch.equal(rove.attention(q, k, v, **kw), got)
    # an independent reference, within the rounding of the output type
    ref = _ref(plan, q.float(), k.float(), v.float())
    assert _err(got, ref, v) < TOL[dq], case


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "f16"])
@pytest.mark.parametrize("rotate", ["rove", "rope"])
def test_fused_qkv_views_are_read_in_place(rng, dtype, rotate):
    """q, k, v as slices of one fused [B, L, (H + 2 Hk) d] projection (token stride
    (H + 2 Hk) d), bshd and as HF's bhsd views: no copies, the float32 call's bits."""
    B, L, H, Hk, d = 2, 33, 8, 2, 64
    fused = _typed(rng, (B, L, (H + 2 * Hk) * d), dtype)
    q = fused[..., :H * d].view(B, L, H, d)
    k = fused[..., H * d:(H + Hk) * d].view(B, L, Hk, d)
    v = fused[..., (H + Hk) * d:].view(B, L, Hk, d)
    assert not q.is_contiguous() and not k.is_contiguous()
    before = _tensor.copies
    got = rove.attention(q, k, v, rotate=rotate)
    got_bhsd = rove.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                              rotate=rotate, layout="bhsd")
    assert _tensor.copies == before
    want = rove.attention(q.float().contiguous(), k.float().contiguous(),
                          v.float().contiguous(), rotate=rotate).to(dtype)
    assert torch.equal(got, want)
    assert torch.equal(got_bhsd.transpose(1, 2), want)
    assert got_bhsd.dtype == dtype
    ref = _ref(rove.get_plan(H, Hk, d, rotate=rotate), q.float(), k.float(), v.float())
    assert _err(got, ref, v) < TOL[dtype]


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "f16"])
def test_copied_layouts_keep_their_dtype(rng, dtype):
    """Contiguous [b, h, s, d] tensors (tokens of a head adjacent): K and V read in place
    through head strides, q copied once, in its own dtype (never widened by the binding),
    with the same result."""
    B, L, H, d = 1, 20, 4, 32
    q, k, v = (_typed(rng, (B, H, L, d), dtype) for _ in range(3))
    before = _tensor.copies
    got = rove.attention(q, k, v, layout="bhsd")
    assert _tensor.copies == before + 1
    want = rove.attention(q.float(), k.float(), v.float(), layout="bhsd").to(dtype)
    assert torch.equal(got, want) and got.dtype == dtype


def test_numpy_float16(rng):
    B, L, H, Hk, d = 1, 25, 4, 2, 64
    q = randn(rng, B, L, H, d).astype(np.float16)
    k = randn(rng, B, L, Hk, d).astype(np.float16)
    v = randn(rng, B, L, Hk, d)  # float32: each tensor its own type
    before = _tensor.copies
    got = rove.attention(q, k, v)
    assert _tensor.copies == before
    assert isinstance(got, np.ndarray) and got.dtype == np.float16
    want = rove.attention(q.astype(np.float32), k.astype(np.float32), v).astype(np.float16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
    out = np.empty((B, L, H, d), np.float32)  # a float32 out: no rounding at all
    rove.attention(q, k, v, out=out)
    assert np.array_equal(out, rove.attention(q.astype(np.float32), k.astype(np.float32), v))


@pytest.mark.parametrize("qdt,odt", [(BF16, BF16), (BF16, F32), (F32, BF16), (BF16, F16),
                                     (F16, F32)])
def test_out_dtype_is_the_output_type(rng, qdt, odt):
    B, L, H, d = 2, 17, 4, 64
    q, k, v = (_typed(rng, (B, L, H, d), qdt) for _ in range(3))
    want = rove.attention(q.float(), k.float(), v.float()).to(odt)
    out = torch.empty((B, L, H, d), dtype=odt)
    r = rove.attention(q, k, v, out=out)
    assert r is out and torch.equal(out, want)
    # an out whose strides the C API cannot express: computed in its type, copied back
    out2 = torch.empty((B, H, L, d), dtype=odt).transpose(1, 2)
    before = _tensor.copies
    rove.attention(q, k, v, out=out2)
    assert _tensor.copies == before + 1 and torch.equal(out2, want)
    # bhsd out view of a bshd buffer (HF's pattern): in place
    buf = torch.empty((B, L, H, d), dtype=odt)
    rove.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), layout="bhsd",
                   out=buf.transpose(1, 2))
    assert torch.equal(buf, want)


# ---- KV cache ---------------------------------------------------------------------------
@pytest.mark.parametrize("storage", ["f32", "bf16", "f16", "q8"])
@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "f16"])
def test_kvcache_typed_appends_and_queries(rng, storage, dtype):
    """Appends of bf16/f16 K, V equal appends of their float32 casts (widening is exact),
    and bf16/f16 queries equal float32 queries with the output cast: prefill, then decode
    steps of one token."""
    B, L, H, Hk, d, steps = 2, 24, 8, 2, 64, 4
    plan = rove.Plan(H, Hk, d, rotate="rove")
    typed, plain = (rove.KVCache(plan, B, L + steps, dtype=storage) for _ in range(2))
    for n in (L,) + (1,) * steps:
        q = _typed(rng, (B, n, H, d), dtype)
        k, v = (_typed(rng, (B, n, Hk, d), dtype) for _ in range(2))
        before = _tensor.copies
        typed.append(k, v)
        got, lse = typed.attention(q, return_lse=True)
        assert _tensor.copies == before
        plain.append(k.float(), v.float())
        want, want_lse = plain.attention(q.float(), return_lse=True)
        assert got.dtype == dtype and torch.equal(got, want.to(dtype))
        assert torch.equal(lse, want_lse)
    assert np.array_equal(typed.positions(), plain.positions())
    out = torch.empty((B, 1, H, d), dtype=F32)  # a float32 out for a typed query
    typed.attention(q, out=out)
    assert torch.equal(out, want)


def test_kvcache_bf16_against_torch(rng):
    """A bf16 model's decode: bf16 K/V appended into a bf16 cache, bf16 queries; the
    output against SDPA on the float32-cast inputs (the cache's rounding of the rotated
    K/V plus the output's)."""
    B, L, H, Hk, d = 1, 48, 4, 2, 64
    plan = rove.Plan(H, Hk, d, rotate="rove")
    cache = rove.KVCache(plan, B, L, dtype="bf16")
    q = _typed(rng, (B, L, H, d), BF16)
    k, v = (_typed(rng, (B, L, Hk, d), BF16) for _ in range(2))
    cache.append(k[:, :L - 1], v[:, :L - 1])
    cache.append(k[:, L - 1:], v[:, L - 1:])
    got = cache.attention(q[:, L - 1:])
    ref = _ref(plan, q[:, L - 1:].float(), k.float(), v.float())
    assert got.dtype == BF16 and _err(got, ref, v) < 1e-2


# ---- torch.library op -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "f16"])
def test_torch_op_takes_typed_tensors(rng, dtype):
    import rove.torch_ops  # noqa: F401  (registers rove::attention)
    q = _typed(rng, (1, 4, 16, 32), dtype)
    k = _typed(rng, (1, 2, 16, 32), dtype)
    out, lse = rove.torch_ops.attention(q, k, k, layout="bhsd", return_lse=True)
    assert out.dtype == dtype and lse.dtype == F32
    assert torch.equal(out, rove.attention(q, k, k, layout="bhsd"))
    pos = torch.arange(16, dtype=torch.int32)
    torch.library.opcheck(torch.ops.rove.attention.default,
                          (q, k, k, pos, pos, "rope", True, 0, 0.0, None, "", "bhsd"),
                          test_utils=("test_schema", "test_faketensor"))


def test_binding_dtype_numbers_are_the_headers():
    """_tensor's rove_dtype numbers (kept free of the library) are _lib's, which
    test_capi_layout.py compares with rove.h."""
    from rove import _lib
    assert (_tensor.F32, _tensor.BF16, _tensor.F16) == (_lib.DTYPE_F32, _lib.DTYPE_BF16,
                                                        _lib.DTYPE_F16)


# ---- errors -----------------------------------------------------------------------------
def test_unsupported_dtypes_raise(rng):
    q, k, v = (torch.from_numpy(randn(rng, 1, 8, 2, 32)) for _ in range(3))
    with pytest.raises(TypeError, match=r"torch\.float32, torch\.bfloat16 or torch\.float16"
                                        r".*never casts"):
        rove.attention(q.double(), k, v)
    with pytest.raises(TypeError, match="float64"):
        rove.attention(q.bfloat16(), k, v.double())
    with pytest.raises(TypeError, match="int32"):
        rove.attention(q, k.to(torch.int32), v)
    with pytest.raises(TypeError, match="float32 or float16.*never casts"):
        rove.attention(q.numpy().astype(np.float64), k.numpy(), v.numpy())
    with pytest.raises(TypeError, match="float32 or float16"):  # byte-swapped half
        rove.attention(q.numpy().astype(">f2"), k.numpy(), v.numpy())
    for bad in (torch.float64, torch.int16, torch.complex64):
        with pytest.raises(TypeError, match="out has dtype"):
            rove.attention(q.bfloat16(), k, v, out=torch.empty((1, 8, 2, 32), dtype=bad))
    with pytest.raises(TypeError, match="out has dtype"):
        rove.attention(q.numpy(), k.numpy(), v.numpy(), out=np.empty((1, 8, 2, 32)))


@pytest.mark.parametrize("dt", ["bfloat16", "float16", "numpy float16"])
def test_kvcache_append_angles_half(rng, dt):
    """append_angles takes half-precision k / v (widened to float32 copies): the cache
    then holds and attends exactly what the widened float32 append gives."""
    plan = rove.Plan(2, 2, 32)
    k, v = (randn(rng, 1, 4, 2, 32) for _ in range(2))
    ang = rng.uniform(-3, 3, (1, 4, 2, 16))
    q = randn(rng, 1, 1, 2, 32)
    qa = rng.uniform(-3, 3, (1, 1, 2, 16))
    if dt == "numpy float16":
        kh, vh = k.astype(np.float16), v.astype(np.float16)
        kw, vw = kh.astype(np.float32), vh.astype(np.float32)
    else:
        kh, vh = (torch.from_numpy(x).to(getattr(torch, dt)) for x in (k, v))
        kw, vw = kh.float(), vh.float()
    got, want = rove.KVCache(plan, 1, 8, dtype="bf16"), rove.KVCache(plan, 1, 8, dtype="bf16")
    got.append_angles(kh, vh, ang)
    want.append_angles(kw, vw, ang)
    assert len(got) == 4
    assert np.array_equal(got.attention(q, q_angles=qa), want.attention(q, q_angles=qa))


def test_kvcache_append_dtype_errors(rng):
    plan = rove.Plan(2, 2, 32)
    cache = rove.KVCache(plan, 1, 16, dtype="bf16")
    k = torch.from_numpy(randn(rng, 1, 4, 2, 32))
    with pytest.raises(TypeError, match="one dtype"):
        cache.append(k.bfloat16(), k.half())
    with pytest.raises(TypeError, match="one dtype"):
        cache.append(k.bfloat16(), k)
    with pytest.raises(TypeError, match="float64"):
        cache.append(k.double(), k.double())
    with pytest.raises(TypeError, match="one dtype"):
        cache.append_angles(k.bfloat16(), k, np.zeros((1, 4, 2, 16)))
    with pytest.raises(TypeError, match="float64"):
        cache.append_angles(k.double(), k.double(), np.zeros((1, 4, 2, 16)))
    assert len(cache) == 0
    cache.append(k.half(), k.half())
    assert len(cache) == 4
    with pytest.raises(TypeError, match="float64"):
        cache.attention(torch.from_numpy(randn(rng, 1, 1, 2, 32)).double())
