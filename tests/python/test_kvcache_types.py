# SPDX-License-Identifier: MIT
"""rove.KVCache(..., dtype=): K and V stored in bf16, f16 or q8 (rove_kv_cache_create_typed).

The reference is PyTorch: q, k, v rotated (RoPE / RoVE) from the float32 inputs in
float64, then torch's scaled_dot_product_attention over each query's visible keys (and
the inverse rotation of the output for RoVE). Errors are max |out - ref| / max |v|, the
measure of the accuracy contract in rove.h (rove_kv_cache_create_typed)."""
import numpy as np
import pytest

import rove
from rove import _lib
from rove.kvcache import DTYPE_ALIASES
from conftest import randn

DTYPES = ["f32", "bf16", "f16", "q8"]
# Tolerances on max |out - ref| / max |v|, about 3-5x the largest errors measured (10
# seeds for TOL_LONG, 20 for TOL_FEW and TOL_SHIFT; x86 AVX2 and the scalar ISA alike):
# - TOL_LONG, queries that see about 1k keys (the regime of rove.h's figures): measured
#   f32 3.1e-7, bf16 4.5e-4, f16 9.6e-5, q8 9.7e-4 (the worst: the YaRN case, whose
#   factor m sharpens the softmax).
# - TOL_FEW, every query of a 40-token prefill, down to the first one, which sees a
#   single key: nothing averages the rounding out, so the output error reaches the
#   per-element bounds (half an ulp: 2^-8 relative for bf16, 2^-11 for f16, max|x| / 254
#   for q8) plus the logit error of the rounded keys. Measured f32 5.7e-7, bf16 3.0e-3,
#   f16 3.4e-4, q8 1.1e-2.
TOL_LONG = {"f32": 1e-6, "bf16": 2e-3, "f16": 3e-4, "q8": 4e-3}
TOL_FEW = {"f32": 2e-6, "bf16": 9e-3, "f16": 1e-3, "q8": 3e-2}
# - TOL_SHIFT, test_shift_equals_appending_at_the_shifted_positions (40 keys): a shift
#   rounds once more, which about doubles the error: measured (shifted cache vs torch,
#   and vs a cache appended at the shifted positions) f32 2.1e-7, bf16 2.5e-3, f16
#   3.4e-4, q8 6.9e-3.
TOL_SHIFT = {"f32": 1e-6, "bf16": 8e-3, "f16": 1e-3, "q8": 2e-2}


# ---- the torch reference -------------------------------------------------------------------
def _rotate(torch, x, ang, sign=1.0):
    """x [..., d] rotated by angles [..., d/2] (half pairing, the whole head), float64."""
    h = x.shape[-1] // 2
    c, s = torch.cos(ang), sign * torch.sin(ang)
    a, b = x[..., :h], x[..., h:]
    return torch.cat([a * c - b * s, a * s + b * c], -1)


def torch_ref(torch, plan, q, k, v, q_pos, kv_pos):
    """out [B, Lq, H, d] (numpy float64) of plan's causal attention, computed by torch's
    scaled_dot_product_attention in float64 from the float32 q [B, Lq, H, d], k and v
    [B, Lk, Hk, d] at positions q_pos [B, Lq], kv_pos [B, Lk]. Each query attends to its
    visible keys only (sliced, not masked: a NaN in a key it cannot see must not reach it,
    and torch's additive mask would turn NaN + -inf into NaN)."""
    import torch.nn.functional as F
    B, Lq, H, d = q.shape
    g = H // k.shape[2]
    w, m = rove.inv_freq(plan.rope, d)
    w = torch.from_numpy(w)
    qt, kt, vt = (torch.from_numpy(np.ascontiguousarray(x)).double() for x in (q, k, v))
    qa = torch.from_numpy(np.asarray(q_pos, np.float64))[..., None, None] * w  # [B, Lq, 1, d/2]
    ka = torch.from_numpy(np.asarray(kv_pos, np.float64))[..., None, None] * w
    rot = plan.rotate
    if rot & rove.ROTATE_Q:
        qt = m * _rotate(torch, qt, qa)
    if rot & rove.ROTATE_K:
        kt = m * _rotate(torch, kt, ka)
    if rot & rove.ROTATE_V:
        vt = _rotate(torch, vt, ka)
    kt, vt = kt.repeat_interleave(g, 2), vt.repeat_interleave(g, 2)  # GQA: [B, Lk, H, d]
    out = torch.zeros(B, Lq, H, d, dtype=torch.float64)
    for b in range(B):
        for i in range(Lq):
            vis = torch.from_numpy(np.asarray(kv_pos[b]) <= np.asarray(q_pos[b, i]))
            if not bool(vis.any()):
                continue
            y = F.scaled_dot_product_attention(
                qt[b, i][:, None], kt[b, vis].transpose(0, 1), vt[b, vis].transpose(0, 1),
                scale=plan.scale)  # [H, 1, d]
            out[b, i] = y[:, 0]
    if rot & rove.ROTATE_O:
        out = _rotate(torch, out, qa, sign=-1.0)
    return out.numpy()


def err(got, want, v):
    """max |got - want| / max |v| (the contract's measure)."""
    got = got.numpy() if hasattr(got, "numpy") else got
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)) / np.max(np.abs(v)))


def _pos(B, start, n):
    return np.broadcast_to(np.arange(start, start + n, dtype=np.int32), (B, n)).copy()


# ---- accuracy: prefill + decode against torch ----------------------------------------------
CASES = {  # name: (B, H, Hk, d, plan kwargs, first position)
    "rove-gqa4-d64": (2, 8, 2, 64, {}, 0),
    "rope-gqa3-d80-near2^20": (1, 6, 2, 80, {"rotate": "rope"}, 2 ** 20 - 1100),  # q8: 32+32+16
    "rove-mqa-d128-yarn": (1, 4, 1, 128, {"rope": rove.RopeConfig(
        scaling="yarn", factor=4.0, original_max_position=256)}, 0),  # m != 1 scales K
}


def run_prefill_decode(torch, rng, dtype, case, n0, steps, check_from):
    """Prefill n0 tokens, then decode steps of the given sizes through a KVCache of
    ``dtype``; returns the largest error against torch of the prefill's queries from
    ``check_from`` on and of every decode step."""
    B, H, Hk, d, kw, p0 = CASES[case]
    L = n0 + sum(steps)
    q, k, v = randn(rng, B, L, H, d), randn(rng, B, L, Hk, d), randn(rng, B, L, Hk, d)
    pos = _pos(B, p0, L)
    plan = rove.Plan(H, Hk, d, **kw)
    cache = rove.KVCache(plan, B, L + 3, dtype=dtype)
    worst, t = 0.0, 0
    for n in (n0,) + tuple(steps):
        cache.append(k[:, t:t + n], v[:, t:t + n], pos=pos[:, t:t + n] if t == 0 else None)
        got = cache.attention(q[:, t:t + n])  # q_pos: the positions just appended
        assert got.shape == (B, n, H, d) and np.all(np.isfinite(got))
        i = check_from if t == 0 else 0
        want = torch_ref(torch, plan, q[:, t + i:t + n], k[:, :t + n], v[:, :t + n],
                         pos[:, t + i:t + n], pos[:, :t + n])
        worst = max(worst, err(got[:, i:], want, v))
        t += n
    assert len(cache) == L and np.array_equal(cache.positions(), pos)
    return worst


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", DTYPES)
def test_prefill_then_decode_matches_torch(rng, torch, dtype, case):
    """1024 prefill tokens, then decode steps of 1, 1, 1 and 4 tokens: the last prefill
    queries and the decode steps, which see about 1k keys."""
    e = run_prefill_decode(torch, rng, dtype, case, 1024, (1, 1, 1, 4), check_from=1016)
    assert e < TOL_LONG[dtype]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", DTYPES)
def test_short_prefill_then_decode_matches_torch(rng, torch, dtype, case):
    """Every query of a 40-token prefill (the first sees one key), then 1-token decode
    steps and a 3-token chunk."""
    e = run_prefill_decode(torch, rng, dtype, case, 40, (1, 1, 1, 1, 1, 1, 3), check_from=0)
    assert e < TOL_FEW[dtype]


def test_torch_inputs_and_bhsd(rng, torch):
    """torch tensors (HF-style bhsd views) into a bf16 cache; output is a torch tensor."""
    B, L, H, Hk, d = 1, 20, 4, 2, 64
    q, k, v = randn(rng, B, L, H, d), randn(rng, B, L, Hk, d), randn(rng, B, L, Hk, d)
    plan = rove.Plan(H, Hk, d)
    cache = rove.KVCache(plan, B, L, dtype=torch.bfloat16)
    cache.append(*(torch.from_numpy(x).transpose(1, 2) for x in (k, v)), layout="bhsd")
    out = cache.attention(torch.from_numpy(q).transpose(1, 2), layout="bhsd")
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    pos = _pos(B, 0, L)
    assert err(out.transpose(1, 2), torch_ref(torch, plan, q, k, v, pos, pos), v) < TOL_FEW["bf16"]
    with pytest.raises(TypeError, match="float32"):  # appends take float32/bf16/f16 K/V
        cache.append(torch.from_numpy(k).double(), torch.from_numpy(v).double())


@pytest.mark.parametrize("dtype", ["bf16", "f16", "q8"])
def test_one_key_gives_its_stored_row(rng, torch, dtype):
    """With a single visible key the output is that key's stored V row, unaveraged (softmax
    weight exactly 1; rotate="none" stores V as given): bf16 and f16 rows are torch's
    round-to-nearest-even casts, exactly, ties and f16 subnormals included (so the
    per-element error is up to half an ulp, 2^-8 relative for bf16 and 2^-11 for f16);
    q8 rows are within max|x_block| / 254 of the input, block by block."""
    d = 80  # q8: blocks of 32, 32 and 16 dims
    plan = rove.Plan(1, 1, d, rotate="none")
    v = randn(rng, 1, 1, 1, d) * np.float32(3.0)
    specials = [1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -11), 1 + 3 * 2 ** -11, 65519.0,
                2 ** -25, 3 * 2 ** -25, 1e-8, -7e-6, 0.0, -0.0, 1e30]
    if dtype == "f16":
        specials[-1] = 60000.0
    v[0, 0, 0, 40:40 + len(specials)] = specials
    c = rove.KVCache(plan, 1, 1, dtype=dtype)
    c.append(np.zeros_like(v), v)
    out = c.attention(np.zeros((1, 1, 1, d), np.float32))[0, 0, 0]
    x = v[0, 0, 0]
    if dtype == "q8":
        for b0 in range(0, d, 32):
            blk = slice(b0, min(b0 + 32, d))
            bound = np.max(np.abs(x[blk])) / 254
            assert np.max(np.abs(out[blk].astype(np.float64) - x[blk])) <= bound * (1 + 1e-5)
        return
    tdt = torch.bfloat16 if dtype == "bf16" else torch.float16
    want = torch.from_numpy(x).to(tdt).float().numpy()
    assert np.array_equal(out, want)  # (-0.0 comes out as 0.0: the P V sum starts at +0)


# ---- values a type cannot hold -----------------------------------------------------------
def _frozen(cache, q):
    """What a rejected call must leave as it was: length, positions, attention output."""
    return len(cache), cache.positions(), cache.attention(q, q_pos=np.full(q.shape[1], 10 ** 6))


def _unchanged(cache, q, before):
    n, pos, out = _frozen(cache, q)
    assert n == before[0] and np.array_equal(pos, before[1])
    assert np.array_equal(out, before[2])  # bit for bit


def test_f16_overflow_raises_and_changes_nothing(rng):
    B, H, Hk, d = 2, 4, 2, 64
    plan = rove.Plan(H, Hk, d, rotate="rope")  # V is stored as given
    c = rove.KVCache(plan, B, 16, dtype="float16")
    c.append(randn(rng, B, 8, Hk, d), randn(rng, B, 8, Hk, d))
    q = randn(rng, B, 1, H, d)
    before = _frozen(c, q)
    k1, v1 = randn(rng, B, 1, Hk, d), randn(rng, B, 1, Hk, d)
    bad = v1.copy()
    bad[1, 0, 1, 3] = 70000.0  # one element of batch row 1: the whole append is refused
    with pytest.raises(rove.RoveInvalidArgument, match=r"float16.*65504") as e:
        c.append(k1, bad)
    assert isinstance(e.value, ValueError)
    _unchanged(c, q, before)
    bad[1, 0, 1, 3] = 65520.0  # the half-way point to 65536 rounds (to even) to inf
    with pytest.raises(ValueError, match="float16"):
        c.append(k1, bad)
    _unchanged(c, q, before)
    ok = v1.copy()
    ok[1, 0, 1, 3] = 65519.0  # rounds to 65504: fits
    c.append(k1, ok)
    assert len(c) == 9


def test_f16_overflow_after_rotation(rng):
    """K = (50000, 50000) in a rotation pair fits at position 0 (angle 0) and not at
    position 1 (angle 1 rad on the first pair: 50000 (sin 1 + cos 1) = 69158)."""
    H, Hk, d = 2, 1, 64
    plan = rove.Plan(H, Hk, d, rotate="rope")
    c = rove.KVCache(plan, 1, 8, dtype="f16")
    k = np.zeros((1, 1, Hk, d), np.float32)
    k[..., 0] = k[..., d // 2] = 50000.0
    v = randn(rng, 1, 1, Hk, d)
    c.append(k, v)  # position 0
    q = randn(rng, 1, 1, H, d)
    before = _frozen(c, q)
    with pytest.raises(rove.RoveInvalidArgument, match="float16"):
        c.append(k, v)  # position 1
    _unchanged(c, q, before)


def test_f16_shift_overflow_changes_nothing(rng):
    """RoVE stores R_p v: V = (50000, 50000) in a pair fits at position 0; shifting it by
    1 would store 69158, so the shift is refused and nothing moves."""
    H, Hk, d = 2, 1, 64
    plan = rove.Plan(H, Hk, d)  # RoVE: V is rotated
    c = rove.KVCache(plan, 1, 8, dtype="f16")
    v = randn(rng, 1, 3, Hk, d)
    v[0, 0, 0, 0] = v[0, 0, 0, d // 2] = 50000.0
    c.append(randn(rng, 1, 3, Hk, d), v)
    q = randn(rng, 1, 1, H, d)
    before = _frozen(c, q)
    with pytest.raises(rove.RoveInvalidArgument, match="float16"):
        c.shift(0, 3, 1)
    _unchanged(c, q, before)
    c.shift(1, 3, 1)  # the rows that fit still shift
    assert np.array_equal(c.positions()[0], [0, 2, 3])


def test_bf16_overflow_of_the_fp32_rotation_changes_nothing(rng):
    """A pair (3.3e38, 3.3e38) fits bf16 at position 0, but its rotation by 1 rad makes
    3.3e38 (sin 1 + cos 1) > FLT_MAX in fp32 itself: an inf no rounding made. Refused on
    append at position 1, on shift, and by paged_store, with nothing changed."""
    H, Hk, d = 2, 1, 64
    plan = rove.Plan(H, Hk, d)  # RoVE: V rotated too
    c = rove.KVCache(plan, 1, 8, dtype="bf16")
    big = np.zeros((1, 1, Hk, d), np.float32)
    big[..., 0] = big[..., d // 2] = 3.3e38
    c.append(big, big)  # position 0: stored as given
    q = randn(rng, 1, 1, H, d)
    before = _frozen(c, q)
    with pytest.raises(rove.RoveInvalidArgument, match="bfloat16"):
        c.append(big, randn(rng, 1, 1, Hk, d))  # position 1: K overflows
    _unchanged(c, q, before)
    with pytest.raises(rove.RoveInvalidArgument, match="bfloat16"):
        c.shift(0, 1, 1)
    _unchanged(c, q, before)
    # an engine's own pool: nothing written
    kp = np.zeros((2, Hk, 16, d), np.uint16)
    vp = kp.copy()
    with pytest.raises(rove.RoveInvalidArgument):
        rove.paged_store(big[0], big[0], kp, vp, [3], [1], plan=plan, dtype="bf16")
    assert not kp.any() and not vp.any()
    rove.paged_store(big[0], big[0], kp, vp, [3], [0], plan=plan, dtype="bf16")  # fits
    assert kp.any()


@pytest.mark.parametrize("where", ["v-nan", "k-nan", "v-inf", "k-ninf"])
def test_q8_rejects_non_finite(rng, where):
    B, H, Hk, d = 1, 4, 2, 64
    plan = rove.Plan(H, Hk, d)
    c = rove.KVCache(plan, B, 16, dtype="q8")
    k, v = randn(rng, B, 9, Hk, d), randn(rng, B, 9, Hk, d)
    c.append(k[:, :8], v[:, :8])
    q = randn(rng, B, 1, H, d)
    before = _frozen(c, q)
    bk, bv = k[:, 8:].copy(), v[:, 8:].copy()
    (bv if where[0] == "v" else bk)[0, 0, 1, 40] = {"nan": np.nan, "inf": np.inf,
                                                   "ninf": -np.inf}[where[2:]]
    with pytest.raises(rove.RoveInvalidArgument, match="q8.*finite|finite.*q8") as e:
        c.append(bk, bv)
    assert isinstance(e.value, ValueError)
    _unchanged(c, q, before)
    c.append(k[:, 8:], v[:, 8:])  # the cache still works, as if nothing had happened
    fresh = rove.KVCache(plan, B, 16, dtype="q8")
    fresh.append(k, v)
    assert np.array_equal(c.attention(q), fresh.attention(q))


@pytest.mark.parametrize("rotate", ["rope", "rove"])
@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
def test_nan_is_stored(rng, torch, dtype, rotate):
    """f32, bf16 and f16 caches store NaN (q8 refuses it, above). rove.h's rules: a NaN in
    the V row of a visible key makes the output dims it reaches NaN (RoPE: that dim; RoVE:
    its rotation pair) and leaves the LSE finite; a NaN in a visible K row makes the whole
    output row of the heads reading it, and their LSE, NaN. Keys a query cannot see do not
    affect it."""
    B, L, H, Hk, d = 2, 24, 4, 2, 64
    q, k, v = randn(rng, B, L, H, d), randn(rng, B, L, Hk, d), randn(rng, B, L, Hk, d)
    v[0, 10, 0, 5] = np.nan   # batch 0, token 10, KV head 0 (query heads 0, 1), dim 5
    k[1, 15, 1, 7] = np.nan   # batch 1, token 15, KV head 1 (query heads 2, 3)
    plan = rove.Plan(H, Hk, d, rotate=rotate)
    c = rove.KVCache(plan, B, L, dtype=dtype)
    c.append(k, v)
    assert len(c) == L
    out, lse = c.attention(q, return_lse=True)
    pos = _pos(B, 0, L)
    want = torch_ref(torch, plan, q, k, v, pos, pos)
    assert np.array_equal(np.isnan(out), np.isnan(want))
    fin = ~np.isnan(want)
    assert np.max(np.abs(out[fin] - want[fin])) / np.nanmax(np.abs(v)) < TOL_FEW[dtype]
    dims = [5] if rotate == "rope" else [5, 5 + d // 2]
    nan_v = np.zeros_like(out, dtype=bool)
    nan_v[0, 10:, 0:2, dims] = True
    nan_k = np.zeros_like(out, dtype=bool)
    nan_k[1, 15:, 2:4, :] = True
    assert np.array_equal(np.isnan(out), nan_v | nan_k)  # exactly where rove.h says
    assert np.array_equal(np.isnan(lse), nan_k[:, :, :, 0].transpose(0, 2, 1))


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_inf_is_stored(rng, dtype):
    plan = rove.Plan(2, 1, 64, rotate="rope")
    c = rove.KVCache(plan, 1, 8, dtype=dtype)
    v = randn(rng, 1, 4, 1, 64)
    v[0, 2, 0, 9] = np.inf
    c.append(randn(rng, 1, 4, 1, 64), v)
    assert len(c) == 4
    out = c.attention(randn(rng, 1, 4, 2, 64))
    assert np.all(np.isfinite(out[0, :2])) and not np.any(np.isfinite(out[0, 2:, :, 9]))


# ---- shift, truncate ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_shift_equals_appending_at_the_shifted_positions(rng, torch, dtype):
    B, L, H, Hk, d = 1, 40, 4, 2, 64
    q, k, v = randn(rng, B, L, H, d), randn(rng, B, L, Hk, d), randn(rng, B, L, Hk, d)
    plan = rove.Plan(H, Hk, d)
    a = rove.KVCache(plan, B, L, dtype=dtype)
    a.append(k, v)
    a.shift(10, L, 500)  # tokens 10.. now sit at 510.. (one more rounding)
    pos = a.positions()
    assert np.array_equal(pos[0], np.r_[np.arange(10), np.arange(510, 540)])
    b = rove.KVCache(plan, B, L, dtype=dtype)
    b.append(k, v, pos=pos)
    qp = np.arange(530, 540)[None]
    ga, gb = a.attention(q[:, -10:], q_pos=qp), b.attention(q[:, -10:], q_pos=qp)
    want = torch_ref(torch, plan, q[:, -10:], k, v, qp, pos)
    assert err(gb, want, v) < TOL_SHIFT[dtype]
    assert err(ga, want, v) < TOL_SHIFT[dtype]
    assert err(ga, gb, v) < TOL_SHIFT[dtype]


@pytest.mark.parametrize("dtype", ["bf16", "q8"])
def test_truncate_and_reset(rng, dtype):
    """Rows are stored one by one: a truncated and refilled cache is bit for bit a fresh
    cache given the same rows."""
    q, k, v = randn(rng, 1, 30, 4, 64), randn(rng, 1, 30, 2, 64), randn(rng, 1, 30, 2, 64)
    plan = rove.Plan(4, 2, 64)
    a = rove.KVCache(plan, 1, 30, dtype=dtype)
    a.append(k, v)
    a.truncate(20)
    a.append(k[:, 25:], v[:, 25:])
    b = rove.KVCache(plan, 1, 30, dtype=dtype)
    b.append(k[:, :20], v[:, :20])
    b.append(k[:, 25:], v[:, 25:])
    assert np.array_equal(a.attention(q[:, -3:]), b.attention(q[:, -3:]))
    a.reset()
    assert len(a) == 0 and a.dtype == dtype


# ---- dtype parsing, repr -------------------------------------------------------------------
def test_dtype_names_are_librove_s():
    """The binding's names and values are librove's (rove_dtype_name / rove_dtype_parse)."""
    assert list(_lib.DTYPE_BY_NAME) == DTYPES == list(DTYPE_ALIASES)
    assert [_lib.DTYPE_F32, _lib.DTYPE_BF16, _lib.DTYPE_F16, _lib.DTYPE_Q8] == [0, 1, 2, 3]
    for canonical, aliases in DTYPE_ALIASES.items():
        assert aliases[0] == canonical == _lib.dtype_name(_lib.DTYPE_BY_NAME[canonical])
        for a in aliases:
            assert _lib.dtype_parse(a) == _lib.DTYPE_BY_NAME[canonical], a
    assert _lib.dtype_name(_lib.DTYPE_COUNT) == "unknown" == _lib.dtype_name(-1)


@pytest.mark.parametrize("name", [a for al in DTYPE_ALIASES.values() for a in al])
def test_dtype_strings(name):
    plan = rove.Plan(2, 1, 64)
    c = rove.KVCache(plan, 1, 4, name)  # the fourth positional argument
    canonical = next(k for k, al in DTYPE_ALIASES.items() if name in al)
    assert c.dtype == canonical
    assert repr(c) == f"rove.KVCache(batch=1, len=0, capacity=4, dtype='{canonical}')"


def test_dtype_objects(torch):
    plan = rove.Plan(2, 1, 64)
    for dt, name in [(torch.float32, "f32"), (torch.bfloat16, "bf16"), (torch.float16, "f16"),
                     (np.float32, "f32"), (np.float16, "f16"), (np.dtype("float32"), "f32"),
                     (np.dtype(np.float16), "f16"), (np.dtype(">f4"), "f32")]:
        assert rove.KVCache(plan, 1, 4, dtype=dt).dtype == name, dt
    assert rove.KVCache(plan, 1, 4).dtype == "f32"  # the default


def test_bad_dtypes(torch):
    plan = rove.Plan(2, 1, 64)
    for bad in ["float64", "f64", "q4", "", "bf16 ", "f32\0", "f16\0junk", "bf16\u00e9", None,
                0, 1, 1.5, float, np.float64, np.int8, np.dtype("int8"),
                torch.float64, torch.int8, torch.uint8, [1]]:
        with pytest.raises(ValueError, match=r"dtype must be one of .*'bf16'.*'q8'.*"
                                             r"torch\.bfloat16") as e:
            rove.KVCache(plan, 1, 4, dtype=bad)
        assert not isinstance(e.value, rove.RoveError), bad  # refused before librove
    r = repr(rove.KVCache(plan, 2, 8, dtype="q8"))
    assert r == "rove.KVCache(batch=2, len=0, capacity=8, dtype='q8')"
