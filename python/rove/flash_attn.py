# SPDX-License-Identifier: MIT
"""flash-attn's two prefill calls, by name and signature, on librove (CPU):

    from rove.flash_attn import flash_attn_func, flash_attn_varlen_func

so that code written for flash-attn 2 (``flash_attn_func(q, k, v, causal=True)``,
``flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
max_seqlen_k, ...)``) runs unchanged on the CPU. They are rove.attention /
rove.attention_varlen with ``rotate="none"`` (flash-attn applies no rotary embedding;
librove's RoPE / RoVE are rove.attention's ``rotate=``), differentiable in q, k and v as
those are, and mean what flash-attn means:

* q [batch, seqlen_q, nheads, headdim], k and v [batch, seqlen_k, nheads_k, headdim]
  (varlen: [total, heads, headdim] with int32 ``cu_seqlens``), nheads a multiple of
  nheads_k; float32, bfloat16 or float16 (flash-attn: half types only).
* ``causal``: aligned to the bottom-right corner of the score matrix when seqlen_q !=
  seqlen_k (query i sees keys j <= i + seqlen_k - seqlen_q), as flash-attn >= 2.1.
* ``window_size=(left, right)``: query i (at P = i + seqlen_k - seqlen_q) sees keys
  ``P - left <= j <= P + right``, -1 for no bound, with the rules of flash-attn's C++
  entry: a bound >= seqlen_k (varlen: ``max_seqlen_k``) is no bound, ``causal`` makes
  the right bound 0, and a right bound of 0 is causal attention (with ``causal=False``
  too). librove's window is symmetric: ``(w, w)``, ``(w, 0)``, ``(-1, 0)`` and ``(-1,
  -1)`` after those rules are honoured exactly (librove ``window = w + 1``); other
  pairs raise ValueError.
* ``softmax_scale`` (default 1/sqrt(headdim)), ``softcap`` (``softcap * tanh(s /
  softcap)`` of the scaled scores; 0: none).
* ``return_attn_probs=True`` returns ``(out, softmax_lse, None)``: the natural-log LSE,
  float32, [batch, nheads, seqlen_q] (varlen: [nheads, total_q]). One difference: a row
  that sees no key (causal with seqlen_q > seqlen_k) has LSE -inf here (librove's
  definition, which rove.merge_partials expects), +inf in flash-attn; its output is 0 in
  both. (rove.merge_partials takes a +inf LSE for an infinite logit and makes the row
  NaN: map flash-attn's +inf LSEs to -inf before merging them.)

Refused with ValueError (never ignored): ``dropout_p`` > 0, ``alibi_slopes``, a paged
``block_table`` (librove's paged caches: rove.PagedKVCache / rove.paged_attention), an
odd headdim (librove's head_dim is even, DESIGN.md; flash-attn pads any up to 256),
``max_seqlen`` below a sequence's length, ``softmax_scale=0`` and, in
``flash_attn_func``, seqlen_k = 0 (rove.attention's rules; the varlen call takes
sequences without keys: output 0, LSE -inf). ``deterministic`` is accepted: librove's
results never depend on the thread count or the schedule.
"""
from __future__ import annotations

import math

import numpy as np

from .attention import attention
from .varlen import _cu, attention_varlen

__all__ = ["flash_attn_func", "flash_attn_varlen_func"]


def _window(window_size, causal: bool, seqlen_k: int):
    """(causal, window) for librove from flash-attn's (causal, (left, right)), with its C++
    entry's rules (flash_api.cpp): a bound >= seqlen_k (varlen: max_seqlen_k) is no bound
    (-1); causal forces right = 0; right = 0 is causal attention, with a window when
    left >= 0. librove's window W is symmetric: keys with P - j < W (causal) or
    |P - j| < W, so (left, 0) -> causal W = left + 1, (w, w) -> W = w + 1."""
    try:
        left, right = (int(x) for x in window_size)
    except (TypeError, ValueError):
        raise TypeError(f"window_size must be a pair of ints (got {window_size!r})") from None
    if left < -1 or right < -1:
        raise ValueError(f"window_size entries are >= -1 (got {window_size!r})")
    left = -1 if left >= seqlen_k else left
    right = -1 if right >= seqlen_k else right
    if causal:
        right = 0
    if right == 0:  # causal (flash-attn: is_causal = left < 0 and right == 0)
        return True, 0 if left < 0 else left + 1
    if left == right:  # both unbounded, or a symmetric window
        return False, 0 if left < 0 else left + 1
    raise ValueError(f"window_size={tuple(window_size)!r} with causal={causal} (seqlen_k "
                     f"{seqlen_k}): librove's windows are symmetric -- (w, w), (w, 0) or "
                     "(-1, 0) (causal), or (-1, -1)")


def _refuse(dropout_p, alibi_slopes, block_table=None):
    if dropout_p:
        raise ValueError(f"dropout_p={dropout_p}: librove has no attention dropout")
    if alibi_slopes is not None:
        raise ValueError("alibi_slopes: librove has no ALiBi biases")
    if block_table is not None:
        raise ValueError("block_table: use rove.PagedKVCache / rove.paged_attention for "
                         "paged caches")


def _scale(softmax_scale, headdim):
    return 1.0 / math.sqrt(headdim) if softmax_scale is None else softmax_scale


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                    deterministic=False, return_attn_probs=False):
    """flash-attn's ``flash_attn_func`` on librove (see the module docstring)."""
    _refuse(dropout_p, alibi_slopes)
    causal, window = _window(window_size, bool(causal), int(k.shape[1]))
    out, lse = attention(q, k, v, rotate="none", causal=causal, window=window,
                         softcap=softcap, scale=_scale(softmax_scale, q.shape[-1]),
                         return_lse=True)
    return (out, lse, None) if return_attn_probs else out


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False,
                           window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """flash-attn's ``flash_attn_varlen_func`` on librove (see the module docstring)."""
    _refuse(dropout_p, alibi_slopes, block_table)
    for name, cu, mx in (("q", cu_seqlens_q, max_seqlen_q), ("k", cu_seqlens_k, max_seqlen_k)):
        longest = int(np.diff(_cu(cu, f"cu_seqlens_{name}", None)).max())  # checked as varlen's
        if int(mx) < longest:
            raise ValueError(f"max_seqlen_{name}={int(mx)} is below the longest sequence "
                             f"({longest} tokens) of cu_seqlens_{name}")
    causal, window = _window(window_size, bool(causal), int(max_seqlen_k))
    out, lse = attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, rotate="none",
                                causal=causal, window=window, softcap=softcap,
                                scale=_scale(softmax_scale, q.shape[-1]), return_lse=True)
    return (out, lse, None) if return_attn_probs else out
