# SPDX-License-Identifier: MIT
"""The causal-alignment trap (issue 13 item 5; rove.h rove_attention_config.causal,
docs/DESIGN.md §1 "Visibility"): librove's default query positions are bottom-right
aligned, P_i = kv_len - q_len + i, so query i sees keys j <= kv_len - q_len + i (the
right thing for decode and chunked prefill). torch's scaled_dot_product_attention with
is_causal=True aligns top-left (key j visible iff j <= i). Both agree when q_len ==
kv_len and differ when q_len < kv_len; this test shows both facts, so the documentation
is proven."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import rove


def _qkv(B, H, Lq, Lk, d, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, Lq, d, generator=g), torch.randn(B, H, Lk, d, generator=g),
            torch.randn(B, H, Lk, d, generator=g))


def _bottom_right_mask(Lq, Lk):
    i = torch.arange(Lq)[:, None]
    j = torch.arange(Lk)[None, :]
    return j <= (Lk - Lq) + i  # True = visible


def _rel(a, b):
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


@pytest.mark.parametrize("Lq,Lk", [(1, 9), (3, 17), (8, 8), (16, 40)])
def test_librove_causal_is_bottom_right(Lq, Lk):
    q, k, v = _qkv(2, 3, Lq, Lk, 32, seed=Lq * 100 + Lk)
    # rotate="none": only the mask differs between the three computations
    got = rove.attention(q, k, v, rotate="none", causal=True, layout="bhsd")
    br = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                        attn_mask=_bottom_right_mask(Lq, Lk))
    assert _rel(got, br) < 1e-5
    tl = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    if Lq == Lk:
        assert _rel(got, tl) < 1e-5  # square: the two alignments coincide
    else:
        assert _rel(got, tl) > 1e-2  # q_len < kv_len: is_causal=True is top-left
        # ... and is_causal=True is reproduced with explicit top-left query positions
        q_pos = torch.arange(Lq, dtype=torch.int32).expand(2, Lq).contiguous().numpy()
        top_left = rove.attention(q, k, v, rotate="none", causal=True, layout="bhsd",
                                  q_pos=q_pos)
        assert _rel(top_left, tl) < 1e-5


def test_decode_step_sees_the_whole_cache():
    # the reason for bottom-right: a one-token decode step (q_len 1) attends to every key
    q, k, v = _qkv(1, 2, 1, 12, 16, seed=3)
    got = rove.attention(q, k, v, rotate="none", causal=True, layout="bhsd")
    full = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    assert _rel(got, full) < 1e-5
    only_first = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                is_causal=True)  # sees key 0 only
    assert _rel(got, only_first) > 1e-2
