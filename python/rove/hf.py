# SPDX-License-Identifier: MIT
"""librove as a Hugging Face transformers attention backend (transformers 5.x).

Two entry points:

``rove.hf.register()``
    Registers the attention function ``"rove"`` with ``transformers.AttentionInterface``
    and a mask function of the same name with ``AttentionMaskInterface``, so that
    ``AutoModelForCausalLM.from_config(cfg, attn_implementation="rove")`` (or
    ``from_pretrained(..., attn_implementation="rove")``, or
    ``model.set_attn_implementation("rove")``) runs every attention call through librove.
    The model rotates q and k itself, so librove runs with ``rotate="none"``; GQA, the
    scaling (``scaling``, e.g. Gemma's ``query_pre_attn_scalar``), the logit softcap
    (``softcap``, Gemma-2), attention sinks (gpt-oss's ``s_aux``), causality and sliding
    windows come from the module, its kwargs and the mask. The caches' [b, h, s, d] K and
    V are read in place (librove's K/V head strides). DeepSeek-V2/V3 MLA (value heads
    narrower than the query/key heads) runs with the values zero-padded to the qk head
    dim and the output sliced back (exact without rotations; its logit scale with the
    YaRN mscale is the module's ``scaling``).

``rove.hf.apply(model, mode="rope" | "rove")``
    librove takes over the rotation of a supported model (Llama, Mistral, Qwen2, Qwen3,
    Gemma-2, Gemma-3, GPT-NeoX, GPT-J, Phi-3, gpt-oss with its attention sinks): ``"rope"``
    reproduces the unmodified model, ``"rove"`` makes it the model's RoVE variant (values
    rotated by their key positions, the output rotated back by the query position:
    ``y_i = sum_j a_ij R_{p_j - P_i} v_j``).

Masks (both entry points)
    transformers builds one mask per forward through the mask function registered for the
    attention implementation. Ours evaluates transformers' own mask (``sdpa_mask``, the
    exact boolean mask sdpa and eager would apply, row block by row block so that memory
    stays O(block x kv_len)) and checks that it equals, element for element, one pattern
    librove computes: causal (bottom-right aligned in transformers' cache-index frame) or
    bidirectional, with an optional window, AND a key-padding vector (the 2-D
    ``attention_mask``). Sliding windows: transformers' key j is visible iff
    ``q_idx - kv_idx < sliding_window`` (``kv_idx > q_idx - W``), which is librove's
    ``window=W`` (``P_i - p_j < window``); the bidirectional windows are tried as both
    ``<= W`` and ``< W``, and the check decides. Padded keys are honoured exactly through
    librove's positions: a padded key gets position 2^31-1, which no causal query can
    see (bidirectional: with a window of 2^30). Packed sequences (``position_ids`` that
    restart inside a row with no cache and no ``attention_mask``, e.g. from
    ``DataCollatorWithFlattening``: transformers then ANDs its causal mask with "same
    sequence") are read off the mask's sub-diagonal, checked element for element against
    causal (+ window) within each sequence, and run as one ``rove.attention_varlen`` call
    over the batch's tokens (bidirectional packing too: EmbeddingGemma). A model whose
    mask ignores the packing (gpt-oss builds it without position_ids; its eager and sdpa
    then attend across the sequences) is split as transformers' flash-attention path
    splits it: a one-row batch with a plain causal mask, at ``cu_seq_lens_q`` when given,
    else where ``position_ids`` take their minimum when they are not one increasing run
    (_packed_from_kwargs). Llama-4's chunked attention (causal within fixed chunks) is
    that pattern too, so a prefill from an empty cache runs the same way (and counts in
    ``stats["packed_calls"]``); its decode steps (a chunk mask over a cache) are refused.
    Any other mask (a custom ``or``/``and`` mask function,
    token-type blocks, a 4-D float mask with biases) raises ``ValueError`` when attention
    runs: it is never approximated or ignored.
    Models whose code computes attention itself instead of dispatching it through
    transformers' attention interface (Bloom, MPT, XGLM in transformers 5.x) would only
    receive the mask and add it as a bias, never calling librove: the mask function
    refuses them (``ValueError`` at their first forward) rather than letting them run
    without their causal mask. (GPT-Neo stops earlier, in transformers' own constructor:
    ``KeyError: 'rove'``.)
    The mask handed to the model is a small ``[batch, 1, 1, kv_len]`` boolean tensor (the
    key-padding vector) carrying the checked description as ``._rove``. Query rows that see
    no key at all (left padding) get output 0, as librove defines it; their values are
    never read by unpadded tokens, whose outputs are exact.

Design of ``apply`` (no re-rotation of the past)
    * A forward pre-hook on every attention module replaces ``position_embeddings`` by the
      identity (cos = 1, sin = 0: the model's own ``apply_rotary_pos_emb`` then returns
      q and k bit for bit unchanged) and takes the positions from the ``position_ids``
      kwarg that every decoder layer passes (never assumed: left padding, offsets and
      restarts are honoured).
    * The cache kwarg (``cache`` / ``layer_past``) is wrapped: its ``update`` first
      rotates the NEW keys (and, for RoVE, the new values) by their absolute positions
      with ``rove.rotate`` (double-precision angles) and multiplies the rotated dims of k
      by the attention factor m (YaRN / LongRoPE; m never touches v), then hands them to
      transformers' cache. The cache (Dynamic, sliding-window, static alike) so holds K
      and V in the global frame, and a decode step rotates only its own token
      (``stats`` counts the rows).
    * Attention runs in librove with ``rotate = ROTATE_Q`` (RoPE) or ``ROTATE_Q |
      ROTATE_O`` (RoVE) and explicit ``q_pos``: librove rotates the queries (with m, as
      a YaRN or LongRoPE config says) and, for RoVE, rotates the output back by the query position.
      The mask positions are transformers' cache indices shifted per batch row so that
      they coincide with the queries' ``position_ids``; where that is impossible
      (positions that are not cache index + constant) q is rotated and the output
      rotated back in Python instead, with index positions for the mask.
    * RoPE parameters per layer come from ``rope_config_from_hf`` (per layer type for
      Gemma-3's local / global bases; LongRoPE's short / long factors by
      ``max(position_ids) + 1`` each forward, as transformers chooses them; dynamic NTK
      only while positions stay below ``max_position_embeddings``, where it is exactly
      plain RoPE, and refused where the model's rotary embedding still holds the grown
      frequencies of a longer forward). ``apply`` compares them with the model's own
      rotary embedding (inv_freq and attention scaling) and refuses a model whose
      frequencies differ.

float32, bfloat16 and float16 models: librove reads half-precision q / k / v as they are
(widened to fp32 in its kernels, fp32 accumulation) and returns the output in q's dtype;
with ``apply``, new keys / values are rotated in fp32 and rounded to the cache's dtype once
(as a half-precision model's cache holds them).

Training: a model trains through librove's backward (``rove.attention`` /
``rove.attention_varlen`` autograd: plain and left-padded batches, packed sequences,
windows, softcap, GQA), with ``register()`` (with or without a cache) and with
``apply()``; an ``apply()`` model trains without a cache (``use_cache=False``), librove
then rotating q and k (RoVE: v and the output) itself inside autograd, by the tokens'
``position_ids``, which must be the token index plus a constant per row (left padding) or
packed sequences; other positions raise. A bfloat16 / float16 model (or autocast) trains
too: librove's float32 backward on the half-precision q / k / v widened exactly, each
gradient rounded once to its input's dtype. An ``apply()`` forward with a cache and grad
enabled gives its output (inference without ``torch.no_grad()``), and a backward through
it raises instead of cutting the graph.
Attention dropout > 0 is refused.

``torch.compile``: the attention and mask functions and ``apply``'s hooks are wrapped in
``torch.compiler.disable`` (graph breaks around librove's ctypes calls). Threads: an
``apply``ed model keeps each forward's positions per thread, so several threads may run it.
"""
from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np
import torch

from . import _lib
from .attention import get_plan
from .hf_config import hf_head_dim, hf_rope_parameters, rope_config_from_hf
from .rope import RopeConfig, inv_freq as _inv_freq
from .rotate import rotate as _rotate
from .varlen import attention_varlen as _attention_varlen

__all__ = ["register", "apply", "remove", "NAME", "stats", "set_threads", "SUPPORTED"]

NAME = "rove"
_SENTINEL = 2 ** 31 - 1     # position of a padded key: never visible to a causal query
_FAR_WINDOW = 2 ** 30       # window that makes the sentinel invisible without causality
_MASK_BLOCK = 1 << 22       # elements of transformers' mask evaluated at a time
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)  # what librove reads in place

# Counters for tests and the curious: rows rotated before the cache, attention calls.
stats = {"k_rows": 0, "v_rows": 0, "attention_calls": 0, "fallback_calls": 0,
         "packed_calls": 0}
_threads: Optional[int] = None
_lock = _lib.ForkSafeLock()


def _eager(fn, name: str):
    """fn kept out of torch.compile's tracing (a graph break around it): librove's calls
    go through ctypes and NumPy and create plans (weakref.finalize), which dynamo cannot
    trace -- a compiled model failed with dynamo's 'Guard failed on the same frame'. The
    wrapper is named `name`, the module-level name it is bound to, so that pickle (torch.save
    of an apply()ed model, whose hooks it holds) finds it."""
    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    if disable is None:
        return fn
    wrapped = disable(fn)
    wrapped.__name__ = wrapped.__qualname__ = name
    return wrapped


def set_threads(n: Optional[int]) -> None:
    """Threads librove uses in the HF integration (None: librove's default)."""
    global _threads
    if n is not None and (isinstance(n, bool) or int(n) != n or n < 1):
        raise ValueError(f"threads must be None or >= 1 (got {n!r})")
    _threads = None if n is None else int(n)


# ----------------------------------------------------------------------------------------
# masks
@dataclass
class MaskInfo:
    """What the rove mask function found transformers' mask to be."""
    q_len: int
    kv_len: int
    q_offset: int             # transformers' cache index of query row 0
    kv_offset: int            # ... of key column 0
    causal: bool = True
    window: int = 0           # librove semantics: visible iff |P - p| < window (0: none)
    key_valid: Optional[torch.Tensor] = None   # [B, kv_len] bool, None = all valid
    cu: Optional[np.ndarray] = None  # packed sequences: cu_seqlens over the B * q_len tokens
    error: Optional[str] = None
    cache: dict = field(default_factory=dict, repr=False)  # per-forward derived positions


def _visible(diff: torch.Tensor, causal: bool, window: int) -> torch.Tensor:
    """librove's visibility of a (q_idx - kv_idx) difference grid."""
    vis = diff >= 0 if causal else torch.ones_like(diff, dtype=torch.bool)
    if window:
        vis = vis & (diff.abs() < window)
    return vis


def _candidates(local_size):
    c = [(True, int(local_size or 0))]
    c.append((False, 0))
    if local_size:
        c += [(False, int(local_size)), (False, int(local_size) + 1)]
    return c


def _match(blocks, q_offset, kv_offset, kv_len, key_valid, candidates):
    """First (causal, window) of candidates with which every block of the mask equals
    visibility AND key_valid; None if none does. blocks yields (row0, M [B, n, K])."""
    ok = [True] * len(candidates)
    kj = torch.arange(kv_len, dtype=torch.int64) + kv_offset
    for row0, M in blocks:
        n = M.shape[1]
        qi = torch.arange(n, dtype=torch.int64) + (q_offset + row0)
        diff = qi[:, None] - kj[None, :]
        for c, (causal, w) in enumerate(candidates):
            if not ok[c]:
                continue
            R = _visible(diff, causal, w)[None]
            if key_valid is not None:
                R = R & key_valid[:, None, :]
            ok[c] = bool(torch.equal(M, R.expand_as(M)))
        if not any(ok):
            return None
    for c, good in enumerate(ok):
        if good:
            return candidates[c]
    return None


def _packed_starts(blocks, B: int, L: int) -> Optional[torch.Tensor]:
    """[B, L]: the first token of each row's packed sequence, read off the mask's
    sub-diagonal (row i starts a sequence iff it cannot see token i - 1); None if some row
    cannot see its own token."""
    new = torch.zeros((B, L), dtype=torch.bool)
    new[:, 0] = True
    for row0, M in blocks:
        n = M.shape[1]
        r = torch.arange(n)
        if not bool(M[:, r, r + row0].all()):
            return None
        i = torch.arange(max(row0, 1), row0 + n)
        new[:, i] = ~M[:, i - row0, i - 1]
    idx = torch.arange(L, dtype=torch.int64).expand(B, L)
    return torch.where(new, idx, torch.zeros_like(idx)).cummax(dim=1).values


def _match_packed(blocks, B: int, L: int, window: int, causal: bool = True):
    """Packed sequences (transformers' mask for position_ids that restart inside a row,
    q_len = kv_len, no cache, no padding): every block equals causal (+ window) -- or,
    with causal False, bidirectional (EmbeddingGemma's use_bidirectional_attention) --
    AND "same sequence", the sequences read off the mask (_packed_starts) and then
    checked element for element. Returns cu_seqlens over the B * L tokens (int32), or
    None."""
    starts = _packed_starts(blocks(), B, L)
    if starts is None or B * L >= 2 ** 31:
        return None
    kj = torch.arange(L, dtype=torch.int64)
    for row0, M in blocks():
        qi = torch.arange(row0, row0 + M.shape[1], dtype=torch.int64)
        R = _visible(qi[:, None] - kj[None, :], causal, window)[None]
        # the same sequence: equal starts (for causal pairs, kj >= the query's start)
        R = R & (starts[:, row0:row0 + M.shape[1], None] == starts[:, None, :])
        if not torch.equal(M, R):
            return None
    flat = (starts == torch.arange(L)).reshape(-1).nonzero().reshape(-1)
    return np.concatenate([flat.numpy(), [B * L]]).astype(np.int32)


@functools.lru_cache(maxsize=None)
def _computes_own_attention(model_type: str) -> bool:
    """True when transformers' modeling file of ``model_type`` never dispatches attention
    through ``ALL_ATTENTION_FUNCTIONS`` (it computes attention in its own code and only
    asks the mask interface for a mask). Not decidable (no such module, remote code):
    False. The class flag ``is_backend_compatible()`` cannot decide it: Falcon, BART and
    StableLM clear it yet dispatch through the interface."""
    import importlib
    try:
        from transformers.models.auto.configuration_auto import model_type_to_module_name
        name = model_type_to_module_name(model_type)
        mod = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
        with open(mod.__file__, encoding="utf-8") as f:
            return "ALL_ATTENTION_FUNCTIONS" not in f.read()
    except Exception:  # noqa: BLE001 -- unknown to transformers: nothing to say
        return False


def rove_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
              attention_mask=None, local_size=None, use_vmap=False, device="cpu", **kwargs):
    """Mask function registered as "rove" with transformers' AttentionMaskInterface."""
    from transformers.masking_utils import (causal_mask_function, prepare_padding_mask,
                                            sdpa_mask)
    mt = getattr(kwargs.get("config"), "model_type", None)
    if isinstance(mt, str) and _computes_own_attention(mt):
        raise ValueError(f"{mt!r} models compute attention in their own code, not through "
                         "transformers' attention interface: attn_implementation='rove' "
                         "would hand them librove's mask (a boolean key mask they add as a "
                         "bias) and never run librove; use 'eager' or 'sdpa' for this model")
    if mask_function is None:
        mask_function = causal_mask_function
    q_offset, kv_offset = int(q_offset), int(kv_offset)
    B, Lq, Lk = int(batch_size), int(q_length), int(kv_length)
    padding = prepare_padding_mask(attention_mask, Lk, kv_offset)
    key_valid = None
    if padding is not None:
        kv = padding[:, kv_offset:kv_offset + Lk].to(torch.bool)
        if kv.shape[-1] != Lk:
            raise ValueError(f"attention_mask has {padding.shape[-1]} columns, fewer than the "
                             f"{kv_offset + Lk} the cache needs")
        if not bool(kv.all()):
            key_valid = kv.expand(B, Lk).contiguous()
    rows = max(1, _MASK_BLOCK // max(1, B * Lk))

    def blocks():
        for r0 in range(0, Lq, rows):
            n = min(rows, Lq - r0)
            M = sdpa_mask(batch_size=B, q_length=n, kv_length=Lk, q_offset=q_offset + r0,
                          kv_offset=kv_offset, mask_function=mask_function,
                          attention_mask=attention_mask, allow_is_causal_skip=False,
                          allow_is_bidirectional_skip=False, use_vmap=use_vmap, device=device)
            yield r0, M.expand(B, 1, n, Lk)[:, 0]

    if mask_function is causal_mask_function and not local_size:
        # transformers' plain causal mask: kv_idx <= q_idx AND the padding above, known
        # without building it (its build and match cost ~120 us a decode step)
        found = (True, 0)
    else:
        found = _match(blocks(), q_offset, kv_offset, Lk, key_valid, _candidates(local_size))
    info = MaskInfo(Lq, Lk, q_offset, kv_offset, key_valid=key_valid)
    if found is None and Lq == Lk and q_offset == kv_offset and key_valid is None:
        for causal, window in _candidates(local_size):  # as for the unpacked masks
            info.cu = _match_packed(blocks, B, Lq, window, causal)
            if info.cu is not None:
                found = (causal, window)
                break
    chunk = getattr(kwargs.get("config"), "attention_chunk_size", None)
    if found is None and local_size is not None and chunk is not None and int(local_size) == chunk:
        info.error = (f"Llama-4 chunked attention (chunks of {chunk} tokens) over a cache, or "
                      "with padding: librove runs chunked attention only as a prefill from an "
                      "empty cache without padding (packed chunks); decoding through it is "
                      "not supported")
    elif found is None:
        info.error = ("the attention mask transformers built is not a causal or bidirectional "
                      "mask (with an optional sliding window) combined with key padding, nor "
                      "packed sequences -- e.g. token-type blocks or a custom mask function -- "
                      "which librove cannot honour exactly")
    else:
        info.causal, info.window = found
    out = (key_valid if key_valid is not None else
           torch.ones((B, Lk), dtype=torch.bool)).view(B, 1, 1, Lk)
    out._rove = info
    return out


def _info_from_tensor(mask: torch.Tensor, Lq, Lk, causal, window, batch) -> MaskInfo:
    """A user-supplied 4-D mask (no ._rove): bool, or float with only 0 / -inf-like values;
    its batch 1 or ``batch`` (one row broadcast over the batch, as eager and sdpa do)."""
    if mask.dim() != 4 or mask.shape[-2:] != (Lq, Lk):
        raise ValueError(f"attention mask of shape {tuple(mask.shape)} does not match q_len "
                         f"{Lq} x kv_len {Lk}")
    if mask.shape[0] not in (1, batch):
        raise ValueError(f"attention mask of shape {tuple(mask.shape)} does not match the "
                         f"batch of {batch} (its first dim must be 1 or {batch})")
    if mask.dtype == torch.bool:
        M = mask
    elif mask.is_floating_point():
        M = mask == 0
        blocked = (mask <= torch.finfo(mask.dtype).min / 2) | torch.isneginf(mask)
        if not bool((M | blocked).all()):
            raise ValueError("the float attention mask adds biases (values other than 0 and "
                             "-inf / finfo.min): librove cannot honour them")
    else:
        raise ValueError(f"attention mask dtype {mask.dtype} is not supported")
    if M.shape[1] != 1:
        if not bool((M == M[:, :1]).all()):
            raise ValueError("the attention mask differs per head: librove cannot honour it")
    M = M[:, 0]
    B = batch
    key_valid = M.any(dim=1)
    if bool(key_valid.all()):
        key_valid = None
    q_offset = Lk - Lq
    cands = [(bool(causal), int(window or 0)), (True, 0), (False, 0)]
    found = _match([(0, M)], q_offset, 0, Lk, key_valid, cands)
    info = MaskInfo(Lq, Lk, q_offset, 0, key_valid=None if key_valid is None else
                    key_valid.expand(B, Lk).contiguous())
    if found is None:
        info.error = ("the 4-D attention mask is not causal/bidirectional (+ window) with key "
                      "padding in the bottom-right aligned frame: librove cannot honour it")
    else:
        info.causal, info.window = found
    return info


def _packed_from_kwargs(info: MaskInfo, B: int, kwargs) -> Optional[np.ndarray]:
    """flash-attention's padding-free packing where transformers' mask does not show it
    (models that build their mask without position_ids, e.g. gpt-oss in transformers 5.x,
    whose eager and sdpa then attend across the packed sequences; and any model run with
    a cache): for a plain causal mask of one row (no padding, queries and keys the same
    tokens: no cached ones), transformers' flash-attention path splits the row
    at ``cu_seq_lens_q`` when given (DataCollatorWithFlattening(
    return_flash_attn_kwargs=True)), else where ``position_ids`` take their minimum when
    they are not one increasing run (its _is_packed_sequence and
    prepare_fa_kwargs_from_position_ids). The same cu_seqlens, or None."""
    L = info.q_len
    if (B != 1 or L <= 1 or not info.causal or info.key_valid is not None or
            info.kv_len != L or info.q_offset or info.kv_offset):
        return None
    cu_q, cu_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
    if cu_q is not None:
        cu = torch.as_tensor(cu_q).reshape(-1).to(torch.int64)
        if cu_k is not None and not torch.equal(cu, torch.as_tensor(cu_k).reshape(-1).to(torch.int64)):
            raise ValueError("rove attention: cu_seq_lens_q and cu_seq_lens_k differ (packed "
                             "queries and keys must be the same sequences without a cache)")
    else:
        pos = kwargs.get("position_ids")
        if not isinstance(pos, torch.Tensor) or pos.numel() != L:
            return None
        pos = pos.reshape(-1).to(torch.int64)
        if torch.equal(pos, torch.arange(L, dtype=torch.int64) + pos.min()):
            return None  # one increasing run: not packed
        starts = (pos == pos.min()).nonzero().reshape(-1)
        cu = torch.cat([starts, torch.tensor([L])])
    if cu.numel() < 2 or int(cu[0]) != 0 or int(cu[-1]) != L or bool((cu.diff() <= 0).any()):
        raise ValueError(f"rove attention: packed sequences read off "
                         f"{'cu_seq_lens_q' if cu_q is not None else 'position_ids'} give "
                         f"boundaries {cu.tolist()[:8]}... that do not split the {L} tokens "
                         "(they must start at 0, increase and end at the row's length)")
    return cu.numpy().astype(np.int32) if cu.numel() > 2 else None


def _mask_info(module, attention_mask, Lq, Lk, is_causal, sliding_window, batch) -> MaskInfo:
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    window = sliding_window if sliding_window is not None else getattr(module, "sliding_window", None)
    window = int(window or 0)
    if attention_mask is None:
        if causal and Lq > 1 and Lq != Lk:
            raise ValueError(
                f"rove attention got no mask with q_len {Lq} != kv_len {Lk}: transformers' "
                "eager (no mask) and sdpa (top-left causal) disagree here; pass a mask")
        return MaskInfo(Lq, Lk, Lk - Lq, 0, causal=bool(causal), window=window)
    info = getattr(attention_mask, "_rove", None)
    if info is None:
        info = _info_from_tensor(attention_mask, Lq, Lk, causal, window, batch)
    if info.error:
        raise ValueError(f"rove attention (layer {getattr(module, 'layer_idx', '?')}): "
                         f"{info.error}")
    if (info.q_len, info.kv_len) != (Lq, Lk):
        raise ValueError(f"rove mask was built for q_len {info.q_len} x kv_len {info.kv_len}, "
                         f"attention has {Lq} x {Lk}")
    return info


def _index_positions(info: MaskInfo, B: int):
    """(q_pos [Lq] or None, kv_pos [B, Lk] or None, window, causal) in the cache-index
    frame, shifted so that key 0 is position 0; None/None when librove's defaults are it."""
    Lq, Lk = info.q_len, info.kv_len
    shift = info.q_offset - info.kv_offset
    window, causal = info.window, info.causal
    if info.key_valid is None and shift == Lk - Lq:
        return None, None, window, causal
    if abs(shift) + Lq + Lk >= _FAR_WINDOW:
        raise ValueError("sequence too long for librove's int32 positions")
    q_pos = np.arange(Lq, dtype=np.int64) + shift
    kv_pos = np.broadcast_to(np.arange(Lk, dtype=np.int64), (B, Lk)).copy()
    if info.key_valid is not None:
        kv_pos[~info.key_valid.numpy()] = _SENTINEL
        if not causal and window == 0:
            window = _FAR_WINDOW
    return q_pos.astype(np.int32), kv_pos.astype(np.int32), window, causal


def _cached_index_positions(info: MaskInfo, B: int):
    r = info.cache.get(("index", B))
    if r is None:
        r = info.cache[("index", B)] = _index_positions(info, B)
    return r


def _rows_with_keys(info: MaskInfo, B: int) -> np.ndarray:
    """[B, Lq] bool: query rows that see at least one key."""
    Lq, Lk = info.q_len, info.kv_len
    qi = np.arange(Lq, dtype=np.int64) + (info.q_offset - info.kv_offset)  # in key columns
    if info.causal:
        hi = np.minimum(qi, Lk - 1)
        lo = np.maximum(qi - info.window + 1, 0) if info.window else np.zeros_like(qi)
    else:
        hi = np.minimum(qi + info.window - 1, Lk - 1) if info.window else np.full_like(qi, Lk - 1)
        lo = np.maximum(qi - info.window + 1, 0) if info.window else np.zeros_like(qi)
    valid = (np.ones((B, Lk), dtype=bool) if info.key_valid is None
             else info.key_valid.numpy())
    cs = np.concatenate([np.zeros((B, 1), np.int64), np.cumsum(valid, axis=1)], axis=1)
    hic, loc = np.clip(hi, -1, Lk - 1), np.clip(lo, 0, Lk)
    cnt = np.where(hic >= loc, cs[:, hic + 1] - cs[:, np.minimum(loc, Lk)], 0)
    return cnt > 0


# ----------------------------------------------------------------------------------------
# the attention function
def _check_kwargs(module, dropout, kwargs):
    if dropout:
        raise ValueError(f"rove attention: dropout={dropout} is not supported by librove; "
                         "set the config's attention_dropout to 0 or call model.eval()")
    for key in ("position_bias", "attention_bias", "head_mask"):
        if kwargs.get(key) is not None:
            raise ValueError(f"rove attention: `{key}` is not supported by librove")
    if kwargs.get("s_aux") is not None and kwargs.get("sinks") is not None:
        raise ValueError("rove attention: both `s_aux` and `sinks` given")
    if kwargs.get("output_attentions"):
        raise ValueError("rove attention does not return attention weights "
                         "(output_attentions=True): use attn_implementation='eager'")


def _run_attention(query, key, value, *, rotate, causal, window, softcap, scaling, q_pos,
                   kv_pos, rope, sinks=None):
    """librove attention on HF's [b, h, s, d] tensors; returns [b, q, h, d] (contiguous).

    One librove call, K and V read in place: HF's q/k/v views of a projection through
    token strides, a contiguous [b, h, s, d] K/V (transformers' caches) through
    rove_attention_args' head and batch strides. Attention sinks (gpt-oss's ``s_aux``, one
    logit per query head) go to librove with them."""
    B, H, Lq, D = query.shape
    Hk, Lk = key.shape[1], key.shape[2]
    if value.shape[-1] != D or tuple(value.shape[:3]) != (B, Hk, Lk):
        raise ValueError(f"rove attention: value shape {tuple(value.shape)} does not match key "
                         f"{tuple(key.shape)} / head_dim {D}")
    if H % Hk:
        raise ValueError(f"{H} query heads are not a multiple of {Hk} KV heads")
    plan = get_plan(H, Hk, D, rotate=rotate, causal=bool(causal), window=int(window),
                    softcap=float(softcap or 0.0), scale=scaling, rope=rope, threads=_threads)
    stats["attention_calls"] += 1
    if torch.is_grad_enabled():  # training: rove.attention's autograd (a fresh output)
        o = plan.attention(query, key, value, q_pos=q_pos, kv_pos=kv_pos, layout="bhsd",
                           sinks=sinks)
        return o.transpose(1, 2)  # the [b, q, h, d] buffer librove wrote
    out = torch.empty((B, Lq, H, D), dtype=query.dtype)
    plan.attention(query, key, value, q_pos=q_pos, kv_pos=kv_pos, layout="bhsd",
                   out=out.transpose(1, 2), sinks=sinks)
    return out


def _run_packed(query, key, value, info: MaskInfo, *, rotate, softcap, scaling, pos, rope,
                sinks=None):
    """Packed sequences (info.cu over the B * L tokens of HF's [b, h, L, d] tensors) as one
    rove.attention_varlen call, causal (or, info.causal False, bidirectional) within each
    sequence; returns [b, L, h, d]. pos:
    None (each sequence's default positions: its token indices) or [B * L] int32."""
    B, H, L, D = query.shape
    flat = lambda x: x.transpose(1, 2).reshape(B * L, x.shape[1], x.shape[3])  # noqa: E731
    stats["attention_calls"] += 1
    stats["packed_calls"] += 1
    out = _attention_varlen(flat(query), flat(key), flat(value), info.cu, info.cu,
                            rotate=rotate, causal=bool(info.causal), window=int(info.window),
                            softcap=float(softcap or 0.0), scale=scaling, rope=rope,
                            threads=_threads, q_pos=pos, kv_pos=pos, sinks=sinks)
    return out.view(B, L, H, D)


def rove_attention_forward(module, query, key, value, attention_mask, dropout=0.0,
                           scaling=None, sliding_window=None, softcap=None, is_causal=None,
                           **kwargs):
    """Attention function registered as "rove" (transformers' signature: q [b, h, q, d],
    k/v [b, kv_h, k, d] -> (out [b, q, h, d], None))."""
    _check_kwargs(module, dropout, kwargs)
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dtype not in _DTYPES:
            raise TypeError(f"rove attention: {name} is {t.dtype}; librove takes float32, "
                            "bfloat16 or float16 tensors")
        if t.device.type != "cpu":
            raise ValueError(f"rove attention: {name} is on {t.device}; librove runs on the CPU")
    state = getattr(module, "_rove_apply", None)
    # attention sinks (gpt-oss passes its per-head logits as s_aux)
    sinks = kwargs.get("s_aux") if kwargs.get("s_aux") is not None else kwargs.get("sinks")
    grads = (query, key, value) + ((sinks,) if isinstance(sinks, torch.Tensor) else ())
    train = torch.is_grad_enabled() and any(t.requires_grad for t in grads)
    why = None  # inputs that require grad, but no gradient librove can give
    if train and state is not None and state.call is not None and state.call.kv_rotated:
        why = ("rove.hf.apply: a cache's keys are rotated outside autograd: train without a "
               "cache (pass use_cache=False)")
    if why is not None:
        # inference without torch.no_grad() (a model called directly) works as with sdpa;
        # a backward through this output raises `why`: a gradient is never silently cut
        return _NoGradient.apply(
            why, lambda: _attend(module, state, query, key, value, attention_mask, softcap,
                                 scaling, is_causal, sliding_window, False, sinks, kwargs),
            *grads), None
    return _attend(module, state, query, key, value, attention_mask, softcap, scaling,
                   is_causal, sliding_window, train, sinks, kwargs), None


class _NoGradient(torch.autograd.Function):
    """An output computed without autograd from inputs that require grad: forward runs
    run(); backward raises RuntimeError(why)."""

    @staticmethod
    def forward(ctx, why, run, *inputs):
        ctx.why = why
        return run()

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(ctx.why)


def _attend(module, state, query, key, value, attention_mask, softcap, scaling, is_causal,
            sliding_window, train, sinks=None, kwargs=None):
    """rove_attention_forward's work after its checks: the output [b, q, h, d]."""
    B, H, Lq, D = query.shape
    Lk = key.shape[2]
    info = _mask_info(module, attention_mask, Lq, Lk, is_causal, sliding_window, B)
    if info.cu is None and kwargs:
        cu = _packed_from_kwargs(info, B, kwargs)
        if cu is not None:  # a copy: the mask's own description is shared by every layer
            info = replace(info, cu=cu, cache={})
    with torch.enable_grad() if train else torch.no_grad():
        if state is None:
            if info.cu is None:
                q_pos, kv_pos, window, causal = _cached_index_positions(info, B)
            Dv = value.shape[-1]
            if Dv < D:  # MLA (DeepSeek): v_head_dim < qk_head_dim. librove needs one head
                # dim; without rotations zero-padded value dims give output dims that are
                # exactly 0 and leave the others unchanged, so pad, attend, slice.
                value = torch.nn.functional.pad(value, (0, D - Dv))
            if info.cu is not None:
                out = _run_packed(query, key, value, info, rotate="none", softcap=softcap,
                                  scaling=scaling, pos=None, rope=None, sinks=sinks)
            else:
                out = _run_attention(query, key, value, rotate="none", causal=causal,
                                     window=window, softcap=softcap, scaling=scaling,
                                     q_pos=q_pos, kv_pos=kv_pos, rope=None, sinks=sinks)
            if Dv < D:
                out = out[..., :Dv]
        elif train:
            out = _applied_training(state, query, key, value, info, softcap, scaling, sinks)
        else:
            out = _applied_attention(module, state, query, key, value, info, softcap, scaling,
                                     sinks)
    return out


# ----------------------------------------------------------------------------------------
# apply: librove rotates
SUPPORTED = {  # model_type -> (attention class name, order of position_embeddings)
    "llama": ("LlamaAttention", "cos_sin"),
    "mistral": ("MistralAttention", "cos_sin"),
    "qwen2": ("Qwen2Attention", "cos_sin"),
    "qwen3": ("Qwen3Attention", "cos_sin"),
    "gemma2": ("Gemma2Attention", "cos_sin"),
    "gemma3_text": ("Gemma3Attention", "cos_sin"),
    "gpt_neox": ("GPTNeoXAttention", "cos_sin"),
    "gptj": ("GPTJAttention", "sin_cos"),
    "phi3": ("Phi3Attention", "cos_sin"),
    "gpt_oss": ("GptOssAttention", "cos_sin"),
}
_CACHE_KWARGS = ("cache", "layer_past", "past_key_values", "past_key_value")


class _ApplyState:
    """Per attention module: mode, config, layer type and the RoPE of the current call."""

    def __init__(self, mode, config, layer_type, head_dim):
        self.mode, self.config, self.layer_type, self.head_dim = mode, config, layer_type, head_dim
        rp = {} if config.model_type in ("gptj", "codegen") else hf_rope_parameters(config, layer_type)
        self.rope_type = rp.get("rope_type", rp.get("type", "default"))
        self._ropes = {}
        self._local = threading.local()
        # dynamic NTK: (the model's rotary module, its buffers' prefix), set by
        # _model_rotary_check; read by rope() to see whether its frequencies have grown
        self._rotary = None

    # The current forward's positions and RoPE (_Call), set by _pre_hook and cleared by
    # _post_hook. Per thread: one model may run forwards in several threads at once, each
    # with its own position_ids.
    @property
    def call(self):
        return getattr(self._local, "call", None)

    @call.setter
    def call(self, c):
        self._local.call = c

    def __getstate__(self):  # deepcopy / pickle: no thread's forward travels with it
        d = dict(self.__dict__)
        d.pop("_local", None)
        return d

    def __setstate__(self, d):
        self.__dict__.update(d)
        self._local = threading.local()

    def _grown_to(self):
        """Dynamic NTK: the length the model's rotary embedding has grown its frequencies
        to (its max_seq_len_cached past original_max_seq_len), else None. transformers
        grows them on a forward past max_position_embeddings and resets them only on one
        shorter than it, so at exactly max_position_embeddings they may be either."""
        if self._rotary is None:
            return None
        rot, prefix = self._rotary
        cached = getattr(rot, f"{prefix}max_seq_len_cached", None)
        original = getattr(rot, "original_max_seq_len", None)
        if cached is None or original is None or int(cached) <= int(original):
            return None
        return int(cached)

    def rope(self, seq_len: int):
        """(RopeConfig, attention factor m, rotary dim) for a forward whose longest
        position is seq_len - 1."""
        if self.rope_type == "dynamic":
            mpe = self.config.max_position_embeddings
            if seq_len > mpe:
                raise ValueError(
                    f"rove.hf.apply: dynamic NTK RoPE at position {seq_len - 1} >= "
                    f"max_position_embeddings={mpe}: transformers then rescales its frequencies "
                    "per call without re-rotating cached keys, which librove does not reproduce")
            grown = self._grown_to()
            if grown is not None and seq_len >= mpe:
                raise ValueError(
                    f"rove.hf.apply: dynamic NTK RoPE: the model's rotary embedding still holds "
                    f"the frequencies of a {grown}-token forward (transformers keeps them until a "
                    f"forward shorter than max_position_embeddings={mpe}), not plain RoPE, "
                    "which librove does not reproduce; run a shorter forward first")
            key = "short"
        elif self.rope_type == "longrope":
            L0 = hf_rope_parameters(self.config, self.layer_type)["original_max_position_embeddings"]
            key = "long" if seq_len > L0 else "short"
        else:
            key = "static"
        r = self._ropes.get(key)
        if r is None:
            cfg = rope_config_from_hf(self.config, self.head_dim, seq_len=seq_len,
                                      layer_type=self.layer_type)
            w, m = _inv_freq(cfg, self.head_dim)
            r = self._ropes[key] = (cfg, m, 2 * len(w), w)
        return r


def _rotary_dims(rope: RopeConfig, d: int, rdim: int) -> slice:
    """The rotated dims of a head of d dims (the ones the attention factor m scales)."""
    return slice(d - rdim, d) if rope.placement == "last" else slice(0, rdim)


@dataclass
class _Call:
    pos: torch.Tensor          # [B or 1, Lq] int64 position_ids
    rope: RopeConfig
    m: float
    rdim: int
    kv_rotated: bool = False


# (RopeConfig's JSON, head_dim, threads) -> Plan. The JSON string (made once by the
# config; a str caches its hash) is a cheap key by value: the configs that every apply()
# makes anew share their entry, so removed or deleted models leave nothing behind, and
# the dict is emptied past _ROTATE_PLANS_MAX distinct keys.
_rotate_plans: dict = {}
_ROTATE_PLANS_MAX = 256


def _rotated(x: torch.Tensor, pos: np.ndarray, rope: RopeConfig, m: float = 1.0,
             dims=None) -> torch.Tensor:
    """A contiguous copy of x [b, h, s, d] rotated by R_pos (pos [b, s] or [1, s]), times m
    on the rotary dims: one rove_rotate call over a token-major [b, s, h, d] copy (the
    per-token path of rove.rotate, without its general-layout handling, which a decode
    step would pay for every layer), so that each token's cos/sin table serves all its
    heads (over the (b, h, s) rows the tables were built h times: 4.8x slower at 2048
    tokens and 8 heads). Half-precision x is rotated in fp32 and rounded back once."""
    B, Hh, L, D = x.shape
    if x.device.type != "cpu" or x.dtype not in _DTYPES:
        raise ValueError(f"rove.hf.apply: tensor on {x.device} of {x.dtype}; librove needs "
                         "float32, bfloat16 or float16 CPU tensors")
    # a fresh token-major copy (clone: x may be a view of a [b, s, h, d] projection, which
    # .contiguous() would return as it is, and the rotation is in place)
    y = x.detach().transpose(1, 2).to(torch.float32).clone(memory_format=torch.contiguous_format)
    key = (rope._json, D, _threads)
    plan = _rotate_plans.get(key)
    if plan is None:
        if len(_rotate_plans) >= _ROTATE_PLANS_MAX:
            _rotate_plans.clear()
        plan = _rotate_plans[key] = get_plan(1, 1, D, rotate="rope", rope=rope,
                                             threads=_threads)
    p = np.ascontiguousarray(np.broadcast_to(pos, (B, L)), dtype=np.int32)
    st = _lib.lib.rove_rotate(plan._handle, y.data_ptr(), B * L, Hh, 0,
                              p.__array_interface__["data"][0], 0)
    _lib.check("rove_rotate", st)
    if m != 1.0:
        y[..., dims] *= m
    y = y.transpose(1, 2)
    return y.contiguous() if x.dtype == torch.float32 else y.to(x.dtype).contiguous()


def _rotate_kv(state, call, key, value):
    """New k (times m on the rotated dims) and, for RoVE, v in the global frame."""
    B, Hk, L, D = key.shape
    pos = call.pos.expand(B, L) if call.pos.shape[0] == 1 else call.pos
    if pos.shape != (B, L):
        raise ValueError(f"position_ids of shape {tuple(call.pos.shape)} do not match the "
                         f"{B} x {L} new keys")
    if key.dtype not in _DTYPES or value.dtype not in _DTYPES:
        raise TypeError(f"rove.hf.apply: keys/values are {key.dtype}/{value.dtype}; librove "
                        "takes float32, bfloat16 or float16 tensors")
    # keys that require grad are rotated outside autograd too (the attention's output then
    # raises on backward: rove_attention_forward)
    pos = pos.to(torch.int64).numpy()
    with torch.no_grad():
        k = _rotated(key, pos, call.rope, call.m,
                     _rotary_dims(call.rope, key.shape[-1], call.rdim))
        stats["k_rows"] += B * L
        if state.mode == "rove":
            value = _rotated(value, pos, call.rope)
            stats["v_rows"] += B * L
    call.kv_rotated = True
    return k, value


_rotate_kv_eager = _eager(_rotate_kv, "_rotate_kv_eager")


class _RotatingCache:
    """Wraps a transformers cache for one attention call: update() rotates the new K/V
    first. Everything else is the wrapped cache's."""

    def __init__(self, cache, state):
        object.__setattr__(self, "_cache", cache)
        object.__setattr__(self, "_state", state)

    def update(self, key_states, value_states, *args, **kwargs):
        state = self._state
        k, v = _rotate_kv_eager(state, state.call, key_states, value_states)
        return self._cache.update(k, v, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._cache, name)

    def __setattr__(self, name, value):
        setattr(self._cache, name, value)

    def __bool__(self):
        return True


def _pre_hook(module, args, kwargs):
    state = module._rove_apply
    if getattr(state.config, "_attn_implementation", None) != NAME:
        raise RuntimeError("rove.hf.apply: the model's attention implementation was changed "
                           f"to {state.config._attn_implementation!r} after apply(); the model's "
                           "own rotation is disabled, so it must stay 'rove' (or call "
                           "rove.hf.remove(model))")
    pe = kwargs.get("position_embeddings")
    if pe is None:
        raise ValueError("rove.hf.apply: the attention module got no position_embeddings kwarg")
    pos = kwargs.get("position_ids")
    if pos is None:
        raise ValueError("rove.hf.apply: the attention module got no position_ids; librove "
                         "needs the positions of the tokens")
    pos = pos.detach().to("cpu")
    if pos.dim() != 2:
        raise ValueError(f"rove.hf.apply: position_ids must be [batch, seq] (got shape "
                         f"{tuple(pos.shape)}, e.g. multimodal 3-D positions are not supported)")
    if pos.numel() and (int(pos.min()) < -(2 ** 30) or int(pos.max()) >= 2 ** 30):
        raise ValueError("rove.hf.apply: position_ids outside [-2^30, 2^30)")
    seq_len = int(pos.max()) + 1 if pos.numel() else 1
    cfg, m, rdim, _ = state.rope(max(seq_len, 1))
    state.call = _Call(pos=pos, rope=cfg, m=m, rdim=rdim)
    a, b = pe
    if module._rove_order == "cos_sin":
        ident = (torch.ones_like(a), torch.zeros_like(b))
    else:  # (sin, cos)
        ident = (torch.zeros_like(a), torch.ones_like(b))
    kwargs = dict(kwargs)
    kwargs["position_embeddings"] = ident
    for name in _CACHE_KWARGS:
        if kwargs.get(name) is not None:
            kwargs[name] = _RotatingCache(kwargs[name], state)
    return args, kwargs


def _post_hook(module, args, kwargs, output):
    module._rove_apply.call = None
    return output


def _fused_positions(info: MaskInfo, pos: np.ndarray, B: int, Lq: int):
    """(fused?, q_pos, kv_pos, window, causal) for librove rotating q (and o) by pos.

    Mask positions = cache index + delta_b, equal to position_ids on every row that sees a
    key (rows that see none give 0 whatever their position); impossible when the
    positions are not index + a per-row constant."""
    idx = np.arange(Lq, dtype=np.int64) + (info.q_offset - info.kv_offset)
    delta = pos - idx[None, :]
    rows = _rows_with_keys(info, B)
    d0 = np.where(rows.any(axis=1), delta[np.arange(B), rows.argmax(axis=1)], delta[:, 0])
    if not bool(np.all((delta == d0[:, None]) | ~rows)):
        return False, None, None, 0, True
    q_pos = idx[None, :] + d0[:, None]
    kv_pos = np.arange(info.kv_len, dtype=np.int64)[None, :] + d0[:, None]
    window, causal = info.window, info.causal
    valid = None if info.key_valid is None else info.key_valid.numpy()
    lo = min(q_pos.min(), kv_pos.min())
    hi = max(q_pos.max(), kv_pos.max())
    if not (lo > -(2 ** 30) and hi < 2 ** 30):
        return False, None, None, 0, True
    if valid is not None:
        kv_pos = np.where(valid, kv_pos, _SENTINEL)
        if not causal and window == 0:
            window = _FAR_WINDOW
    return True, q_pos.astype(np.int32), kv_pos.astype(np.int32), window, causal


def _applied_training(state, query, key, value, info, softcap, scaling, sinks=None):
    """apply() with q / k / v that require grad (training, no cache): librove rotates q and
    k (RoVE: v and the output too) itself, by the tokens' position_ids, inside
    rove.attention's (or rove.attention_varlen's) autograd; m scales the rotated dims of
    q and k as in inference."""
    call = state.call
    if call is None:
        raise RuntimeError("rove.hf.apply: attention ran outside the patched module forward")
    B, H, Lq, D = query.shape
    if key.shape[2] != Lq:  # (a cache's rotated keys never get here: rove_attention_forward)
        raise RuntimeError("rove.hf.apply: training runs without a cache (pass use_cache=False)")
    pos = (call.pos.expand(B, Lq) if call.pos.shape[0] == 1 else call.pos).to(torch.int64).numpy()
    if pos.shape != (B, Lq):
        raise ValueError(f"position_ids of shape {tuple(call.pos.shape)} do not match q "
                         f"[{B}, {Lq}]")
    flags = _lib.ROTATE_Q | _lib.ROTATE_K
    if state.mode == "rove":
        flags |= _lib.ROTATE_V | _lib.ROTATE_O
    if info.cu is not None:
        return _run_packed(query, key, value, info, rotate=flags, softcap=softcap,
                           scaling=scaling, pos=pos.reshape(-1).astype(np.int32), rope=call.rope,
                           sinks=sinks)
    fused, q_pos, kv_pos, window, causal = _fused_positions(info, pos, B, Lq)
    if not fused:
        raise RuntimeError("rove.hf.apply: training needs position_ids equal to the token "
                           "index plus a constant per row (or packed sequences)")
    return _run_attention(query, key, value, rotate=flags, causal=causal, window=window,
                          softcap=softcap, scaling=scaling, q_pos=q_pos, kv_pos=kv_pos,
                          rope=call.rope, sinks=sinks)


def _applied_attention(module, state, query, key, value, info, softcap, scaling, sinks=None):
    call = state.call
    if call is None:
        raise RuntimeError("rove.hf.apply: attention ran outside the patched module forward")
    B, H, Lq, D = query.shape
    if not call.kv_rotated:  # no cache: the keys are this call's tokens
        if key.shape[2] != Lq:
            raise ValueError("rove.hf.apply: keys without a cache must be the call's own tokens")
        key, value = _rotate_kv(state, call, key, value)
    pos = (call.pos.expand(B, Lq) if call.pos.shape[0] == 1 else call.pos).to(torch.int64).numpy()
    if pos.shape != (B, Lq):
        raise ValueError(f"position_ids of shape {tuple(call.pos.shape)} do not match q "
                         f"[{B}, {Lq}]")
    rot_o = state.mode == "rove"
    if info.cu is not None:  # packed sequences (no cache): explicit positions per token
        if np.abs(pos).max() >= 2 ** 30:
            raise ValueError("rove.hf.apply: position_ids outside [-2^30, 2^30)")
        flags = _lib.ROTATE_Q | (_lib.ROTATE_O if rot_o else 0)
        return _run_packed(query, key, value, info, rotate=flags, softcap=softcap,
                           scaling=scaling, pos=pos.reshape(-1).astype(np.int32), rope=call.rope,
                           sinks=sinks)
    key_ = ("fused", B, call.pos.data_ptr(), tuple(call.pos.shape), tuple(call.pos.stride()))
    cached = info.cache.get(key_)  # every layer of a forward shares the mask and positions
    if cached is None or not np.array_equal(cached[0], pos):
        cached = info.cache[key_] = (pos.copy(),) + _fused_positions(info, pos, B, Lq)
    _, fused, q_pos, kv_pos, window, causal = cached
    if fused:
        flags = _lib.ROTATE_Q | (_lib.ROTATE_O if rot_o else 0)
        return _run_attention(query, key, value, rotate=flags, causal=causal, window=window,
                              softcap=softcap, scaling=scaling, q_pos=q_pos, kv_pos=kv_pos,
                              rope=call.rope, sinks=sinks)
    # General path: rotate q here (with m), index positions for the mask, rotate back here.
    stats["fallback_calls"] += 1
    q = _rotate(query.detach().to(torch.float32), pos, rope=call.rope, layout="bhsd",
                threads=_threads)
    if call.m != 1.0:
        q[..., _rotary_dims(call.rope, q.shape[-1], call.rdim)] *= call.m
    q_pos, kv_pos, window, causal = _cached_index_positions(info, B)
    out = _run_attention(q, key, value, rotate="none", causal=causal, window=window,
                         softcap=softcap, scaling=scaling, q_pos=q_pos, kv_pos=kv_pos, rope=None,
                         sinks=sinks)
    if rot_o:
        out = _rotate(out, pos, rope=call.rope, inverse=True, layout="bshd", threads=_threads)
    return out.to(query.dtype)


def _model_rotary_check(model, states):
    """Refuse a model whose own rotary embedding disagrees with rope_config_from_hf."""
    rotary = [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]
    if not rotary:
        return
    rot = rotary[0]
    seen = set()
    for st in states:
        lt = st.layer_type
        if st.rope_type == "dynamic":
            st._rotary = (rot, f"{lt}_" if hasattr(rot, f"{lt}_inv_freq") else "")
        if (lt, st.rope_type) in seen:
            continue
        seen.add((lt, st.rope_type))
        if st.config.model_type in ("gptj", "codegen"):
            buf = getattr(rot, "embed_positions", None)
            cfg, m, rdim, w = st.rope(1)
            if buf is not None and buf.shape[-1] != rdim:
                raise ValueError(f"rove.hf.apply: GPT-J rotary table has {buf.shape[-1]} dims, "
                                 f"rope_config_from_hf gives {rdim}")
            if buf is not None and buf.shape[0] > 1:  # sin(1 * w_k) of row 1
                # compared as sines, to the rounding of the table's dtype (a bf16 / fp16
                # model's table is rounded by model.to(dtype), as in the branch below)
                rtol, atol = {torch.bfloat16: (2.0 ** -8, 0.0),
                              torch.float16: (2.0 ** -11, 2.0 ** -25)}.get(buf.dtype, (1e-5, 1e-7))
                hf = buf[1, : rdim // 2].detach().double().cpu().numpy()
                if not np.allclose(hf, np.sin(w), rtol=rtol, atol=atol):
                    raise ValueError("rove.hf.apply: GPT-J frequencies differ from librove's")
            continue
        # seq_len 1: dynamic NTK's unscaled base and LongRoPE's short factors, which the
        # model's original_inv_freq buffer holds
        cfg, m, rdim, w = st.rope(1)
        prefix = f"{lt}_" if hasattr(rot, f"{lt}_inv_freq") else ""
        hf_w = getattr(rot, f"{prefix}original_inv_freq", None)
        if hf_w is None:
            hf_w = getattr(rot, f"{prefix}inv_freq")
        hf_m = getattr(rot, f"{prefix}attention_scaling", getattr(rot, "attention_scaling", 1.0))
        # a half-precision model's buffer (model.to(torch.bfloat16) rounds it): librove
        # keeps the exact frequencies it was rounded from, so compare to that rounding
        # (half an ulp relative; fp16 also half its subnormal spacing, 2^-25, absolute)
        rtol, atol = {torch.bfloat16: (2.0 ** -8, 0.0),
                      torch.float16: (2.0 ** -11, 2.0 ** -25)}.get(hf_w.dtype, (1e-5, 0.0))
        hf_w = hf_w.detach().double().cpu().numpy()
        if hf_w.shape != w.shape or not np.allclose(hf_w, w, rtol=rtol, atol=atol):
            raise ValueError(f"rove.hf.apply: librove's inv_freq for layer type {lt!r} differs "
                             "from the model's rotary embedding; refusing to run it")
        if not math.isclose(float(hf_m), m, rel_tol=1e-6):
            raise ValueError(f"rove.hf.apply: attention factor {m} differs from the model's "
                             f"{float(hf_m)} (layer type {lt!r})")


_attention_eager = _eager(rove_attention_forward, "_attention_eager")
_mask_eager = _eager(rove_mask, "_mask_eager")
_pre_hook_eager = _eager(_pre_hook, "_pre_hook_eager")
_post_hook_eager = _eager(_post_hook, "_post_hook_eager")


def register(name: str = NAME) -> str:
    """Register the "rove" attention and mask functions with transformers (idempotent).
    Both run outside torch.compile's graphs: a compiled model calls them eagerly."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface
    with _lock:
        AttentionInterface.register(name, _attention_eager)
        AttentionMaskInterface.register(name, _mask_eager)
    return name


def apply(model, mode: str = "rope", *, threads: Optional[int] = None):
    """Let librove do the rotation of a supported transformers model (in place; returns it).

    mode "rope" reproduces the unmodified model, "rove" makes its RoVE variant. Sets the
    model's attention implementation to "rove" (registering it). See the module docstring.
    """
    if mode not in ("rope", "rove"):
        raise ValueError(f"mode must be 'rope' or 'rove' (got {mode!r})")
    if threads is not None:
        set_threads(threads)
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    mt = config.model_type
    if mt not in SUPPORTED:
        raise ValueError(f"rove.hf.apply does not know model type {mt!r} (supported: "
                         f"{sorted(SUPPORTED)}); rove.hf.register() still runs its attention")
    if getattr(model, "_rove_hooks", None):
        remove(model)
    cls_name, order = SUPPORTED[mt]
    mods = [m for m in model.modules() if type(m).__name__ == cls_name]
    if not mods:
        raise ValueError(f"rove.hf.apply: no {cls_name} modules in this {type(model).__name__}")
    register()
    model.set_attn_implementation(NAME)
    hooks, states = [], []
    for m in mods:
        lt = getattr(m, "layer_type", None)
        if lt is None and getattr(config, "layer_types", None) and hasattr(m, "layer_idx"):
            lt = config.layer_types[m.layer_idx]
        rp = getattr(config, "rope_parameters", None) or {}
        if not any(k in rp for k in (getattr(config, "layer_types", None) or ())):
            lt_rope = None
        else:
            lt_rope = lt
        hd = getattr(m, "head_dim", None) or getattr(m, "head_size", None) or hf_head_dim(config)
        st = _ApplyState(mode, config, lt_rope, int(hd))
        m._rove_apply, m._rove_order = st, order
        states.append(st)
        hooks.append(m.register_forward_pre_hook(_pre_hook_eager, with_kwargs=True))
        hooks.append(m.register_forward_hook(_post_hook_eager, with_kwargs=True))
    try:
        _model_rotary_check(model, states)
    except Exception:
        for h in hooks:
            h.remove()
        for m in mods:
            del m._rove_apply, m._rove_order
        raise
    model._rove_hooks = (hooks, mods)
    model._rove_mode = mode
    return model


def remove(model):
    """Undo apply(): the model rotates by itself again (its attention implementation stays
    "rove", i.e. librove without rotation, until you set another)."""
    hooks, mods = getattr(model, "_rove_hooks", None) or ((), ())
    for h in hooks:
        h.remove()
    for m in mods:
        for a in ("_rove_apply", "_rove_order"):
            if hasattr(m, a):
                delattr(m, a)
    model._rove_hooks = None
    model._rove_mode = None
    return model
