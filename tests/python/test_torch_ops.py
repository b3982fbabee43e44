# SPDX-License-Identifier: MIT
"""The rove::attention custom op: opcheck, and torch.compile(fullgraph=True) around it."""
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
