# SPDX-License-Identifier: MIT
"""rove.merge_partials: rove.attention over disjoint key ranges (each with its LSE)
merged equals one rove.attention over all keys, against PyTorch SDPA too for the plain
case; numpy and torch, 3-D inputs, a part no query sees, bad input."""
import numpy as np
import pytest

import rove
from reference import rel_err

torch = pytest.importorskip("torch")


def _parts(q, k, v, cuts, rotate):
    Lq, Lk = q.shape[-3], k.shape[-3]
    qpos = np.arange(Lk - Lq, Lk, dtype=np.int32)
    outs, lses = [], []
    for a, b in zip(cuts[:-1], cuts[1:]):
        o, l = rove.attention(q, k[..., a:b, :, :], v[..., a:b, :, :], rotate=rotate,
                              q_pos=qpos if q.ndim == 3 else np.broadcast_to(qpos, (q.shape[0], Lq)),
                              kv_pos=np.arange(a, b, dtype=np.int32) if q.ndim == 3 else
                              np.broadcast_to(np.arange(a, b, dtype=np.int32), (q.shape[0], b - a)),
                              return_lse=True)
        outs.append(o), lses.append(l)
    return outs, lses


@pytest.mark.parametrize("rotate", ["rove", "rope", "none"])
@pytest.mark.parametrize("cuts", [[0, 40], [0, 17, 40], [0, 1, 33, 36, 40]])
def test_merge_equals_one_call(rotate, cuts):
    g = np.random.default_rng(len(cuts))
    q = g.uniform(-1, 1, (2, 6, 4, 32)).astype(np.float32)
    k, v = (g.uniform(-1, 1, (2, 40, 2, 32)).astype(np.float32) for _ in range(2))
    want, wl = rove.attention(q, k, v, rotate=rotate, return_lse=True)
    out, lse = rove.merge_partials(*_parts(q, k, v, cuts, rotate))
    assert rel_err(out, want) < 2e-6 and np.abs(lse - wl).max() < 2e-5
    if rotate == "none":  # and the reference users trust
        sd = torch.nn.functional.scaled_dot_product_attention(
            *(torch.from_numpy(x).transpose(1, 2).repeat_interleave(2 if x is not q else 1, 1)
              for x in (q, k, v)),
            attn_mask=torch.ones(6, 40, dtype=torch.bool).tril(34)).transpose(1, 2)
        assert rel_err(out, sd.numpy()) < 1e-5


def test_torch_3d_and_unseen_part():
    g = np.random.default_rng(3)
    q = torch.tensor(g.uniform(-1, 1, (5, 2, 16)), dtype=torch.float32)
    k, v = (torch.tensor(g.uniform(-1, 1, (30, 2, 16)), dtype=torch.float32) for _ in range(2))
    want, wl = rove.attention(q, k, v, return_lse=True)
    outs, lses = _parts(q, k, v, [0, 26, 30], "rove")  # [26, 30): the first query sees none
    assert torch.isinf(lses[1]).any()
    out, lse = rove.merge_partials(outs, lses)
    assert isinstance(out, torch.Tensor) and rel_err(out.numpy(), want.numpy()) < 2e-6


def test_bad_input():
    o = np.zeros((1, 2, 1, 4), np.float32)
    l = np.zeros((1, 1, 2), np.float32)
    with pytest.raises(ValueError):
        rove.merge_partials([], [])
    with pytest.raises(ValueError):
        rove.merge_partials([o, o], [l])
    with pytest.raises(ValueError):
        rove.merge_partials([o], [np.zeros((1, 1, 3), np.float32)])
    with pytest.raises(TypeError):
        rove.merge_partials([o], [torch.zeros(1, 1, 2)])
    for shape, lshape in (((0, 2, 1, 4), (0, 1, 2)), ((1, 0, 1, 4), (1, 1, 0))):
        with pytest.raises(ValueError, match="empty axis"):  # was librove's bare status
            rove.merge_partials([np.zeros(shape, np.float32)], [np.zeros(lshape, np.float32)])


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("ndim", [3, 4])
def test_stacked_parts_equal_the_list(kind, ndim):
    """Parts stacked on a first axis (the fast way) give the list's result bit for bit, a
    non-contiguous stack included; and the stacked form's own bad input."""
    g = np.random.default_rng(ndim)
    shape = (4, 2, 3, 5, 8) if ndim == 4 else (4, 3, 5, 8)
    lshape = (4, 2, 5, 3) if ndim == 4 else (4, 5, 3)
    o = g.uniform(-1, 1, shape).astype(np.float32)
    l = g.uniform(-3, 3, lshape).astype(np.float32)
    l[1, ..., 0] = -np.inf  # a part that adds nothing to some rows
    if kind == "torch":
        o, l = torch.from_numpy(o), torch.from_numpy(l)
    want, wl = rove.merge_partials(list(o), list(l))
    got, gl = rove.merge_partials(o, l)
    assert type(got) is type(want) and got.shape == want.shape and gl.shape == wl.shape
    assert np.array_equal(np.asarray(got), np.asarray(want))
    assert np.array_equal(np.asarray(gl), np.asarray(wl))
    wide = np.concatenate([np.asarray(o), np.full(shape, np.nan, np.float32)], -1)
    strided = wide[..., :8] if kind == "numpy" else torch.from_numpy(wide)[..., :8]
    got2, _ = rove.merge_partials(strided, l)  # a strided view: copied, the same result
    assert np.array_equal(np.asarray(got2), np.asarray(want))
    with pytest.raises(ValueError):
        rove.merge_partials(o[:0], l[:0])  # no part
    with pytest.raises(ValueError):
        rove.merge_partials(o, l[:3])  # a LSE missing
    with pytest.raises(TypeError):
        rove.merge_partials(o, np.asarray(l) if kind == "torch" else torch.from_numpy(l))
    with pytest.raises(ValueError):
        rove.merge_partials(o[..., 0], l)  # parts of the wrong rank
    with pytest.raises(ValueError, match="empty axis"):  # was Python's own range() error
        rove.merge_partials(o[..., :0], l)


@pytest.mark.parametrize("kind", ["bfloat16", "float16", "numpy float16"])
def test_half_precision_parts(kind):
    """Half-precision parts (rove.attention's outputs for half q): widened, merged, the
    output rounded once to their dtype, bit for bit the float32 merge of the widened parts
    rounded; list and stacked forms; mixed part dtypes refused."""
    g = np.random.default_rng(17)
    q = g.uniform(-1, 1, (2, 6, 4, 32)).astype(np.float32)
    k, v = (g.uniform(-1, 1, (2, 40, 2, 32)).astype(np.float32) for _ in range(2))
    if kind == "numpy float16":
        q, k, v = (x.astype(np.float16) for x in (q, k, v))
    else:
        q, k, v = (torch.from_numpy(x).to(getattr(torch, kind)) for x in (q, k, v))
    outs, lses = _parts(q, k, v, [0, 17, 40], "rove")
    assert outs[0].dtype == q.dtype
    out, lse = rove.merge_partials(outs, lses)
    wide = [o.float() if kind != "numpy float16" else o.astype(np.float32) for o in outs]
    w32, wl = rove.merge_partials(wide, lses)
    assert out.dtype == q.dtype and lse.dtype == wl.dtype
    if kind == "numpy float16":
        assert np.array_equal(out, w32.astype(np.float16)) and np.array_equal(lse, wl)
        stacked = rove.merge_partials(np.stack(outs), np.stack(lses))
        assert np.array_equal(stacked[0], out)
        with pytest.raises(TypeError, match="mix dtypes"):
            rove.merge_partials([outs[0], wide[1]], lses)
        return
    assert torch.equal(out, w32.to(q.dtype)) and torch.equal(lse, wl)
    assert torch.equal(rove.merge_partials(torch.stack(outs), torch.stack(lses))[0], out)
    with pytest.raises(TypeError, match="mix dtypes"):
        rove.merge_partials([outs[0], wide[1]], lses)
