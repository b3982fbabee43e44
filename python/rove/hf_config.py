# SPDX-License-Identifier: MIT
"""RopeConfig from a Hugging Face transformers config (``RopeConfig.from_hf``).

``rope_config_from_hf(config)`` reads a ``transformers.PretrainedConfig`` -- the
``rope_parameters`` dict of transformers 5.x (per layer type for models such as Gemma-3),
or the legacy ``rope_theta`` / ``rope_scaling`` attributes -- and returns the
:class:`rove.RopeConfig` whose frequencies and attention factor are the ones the model's
own rotary embedding computes (in float32 there, in double in librove: they agree to
float rounding, ~1e-7 relative). Anything it cannot reproduce exactly raises
``ValueError`` naming the field; nothing is approximated or ignored.

What is read, per ``rope_type``:

* all types: ``rope_theta``; ``head_dim`` (the argument, else ``config.head_dim``, else
  ``hidden_size // num_attention_heads``); the rotary dim ``int(head_dim *
  partial_rotary_factor)`` (``rotary_pct`` of GPT-NeoX is already folded into
  ``partial_rotary_factor`` by transformers; GPT-J's ``rotary_dim``); the pairing:
  ``"interleaved"`` for GPT-J / CodeGen (``rotate_every_two``), Cohere, Llama-4 (complex
  products) and configs with ``rope_interleave=True`` (DeepSeek); otherwise the pairing of
  the text attention's own rotation in transformers (the modeling module beside the
  config's class: its ``apply_rotary_pos_emb``, else its ``rotate_half``), probed on
  0..7 with cos = 0, sin = 1 (interleaved for GLM, GLM-4, ERNIE-4.5, Helium and the
  text half of GLM-4V, GLM-OCR and ERNIE-4.5-VL, whose module-level ``rotate_half`` is
  the vision tower's; a rotation that is neither, e.g. nanochat's, turning the other
  way, is refused), ``"half"`` where there is none (remote code); the ``pairing``
  argument overrides it.
* layers that apply no rotary embedding (``config.no_rope_layers``: SmolLM3, Llama-4;
  Cohere-2's full_attention layers; EXAONE-4's when ``sliding_window`` is set) are named
  by ``layer_idx`` / ``layer_type`` and refused: such a layer runs with ``rotate="none"``.
* DeepSeek-V2/V3 MLA configs (``qk_rope_head_dim`` set; other model types that set it
  are refused, their layouts are not guessed): the query/key head is
  ``qk_nope_head_dim + qk_rope_head_dim`` dims (the default ``head_dim`` here) of which the
  LAST ``qk_rope_head_dim`` rotate (``placement="last"``, ``rotary_dim`` =
  ``int(config.head_dim * partial_rotary_factor)``; transformers sets ``config.head_dim =
  qk_rope_head_dim`` and computes its frequencies over it); DeepSeek-V2 pairs
  interleaved (complex multiplication), V3 interleaved when ``rope_interleave`` (the
  default), else rotate_half pairs. transformers' interleaved path
  writes the rotated pairs back de-interleaved (all first members, then all second ones):
  the same permutation of q and of k, so scores and attention outputs equal librove's
  in-place interleaved rotation exactly; only a key tensor taken from transformers' cache
  is in that permuted layout. The logit scale DeepSeek uses is ``hf_softmax_scale``.
* ``default``; ``linear`` (``factor``); ``llama3`` (``factor``, ``low_freq_factor``,
  ``high_freq_factor``, ``original_max_position_embeddings``).
* ``yarn``: ``factor`` (None: ``max_position_embeddings / original_max_position_embeddings``
  as transformers does), ``original_max_position_embeddings``, ``beta_fast`` /
  ``beta_slow`` (falsy: 32 / 1, as transformers), ``truncate`` (read from the top-level
  ``rope_parameters`` like transformers does, default True; gpt-oss ships ``truncate:
  false``, which becomes ``truncate=False``, i.e. librove's ``truncate = 0``: the ramp
  bounds stay fractional) and the attention factor, which librove derives by
  transformers' exact rule: ``attention_factor`` if given (passed as is), else
  ``get_mscale(s, mscale) / get_mscale(s, mscale_all_dim)`` when both ``mscale`` and
  ``mscale_all_dim`` are truthy (DeepSeek: both are passed), else ``get_mscale(s)``
  (``get_mscale(s, x) = 0.1 * x * ln s + 1`` for ``s > 1``, else 1). With only one of the
  two truthy transformers ignores both, and so neither is passed.
* ``dynamic`` (dynamic NTK): transformers recomputes the base at run time from the
  longest sequence seen, ``L = max(position_ids) + 1``. For ``L <= max_position_embeddings``
  its frequencies are exactly the default ones (in a model that has not run a longer
  forward: one that has keeps them at ``L = max_position_embeddings`` until a forward
  shorter than it resets them); beyond, exactly static NTK with
  ``s = factor * L / max_position_embeddings - (factor - 1)``. So a RopeConfig is only
  exact for a given ``L``: pass ``seq_len=L`` (ValueError without it). Note that
  transformers keeps the frequencies of the longest sequence seen so far and does not
  re-rotate cached keys when they change; ``rove.hf.apply`` therefore supports dynamic
  NTK only while every position is below ``max_position_embeddings``.
* ``longrope`` (Phi-3, Phi-4): librove's ``scaling="longrope"`` with ``freq_factors`` =
  ``short_factor``, ``long_factor`` and ``original_max_position_embeddings``. transformers
  picks the set at run time from ``L = max(position_ids) + 1``: ``long_factor`` when
  ``L > original_max_position_embeddings``, else ``short_factor``; pass ``seq_len=L``
  (needed unless both lists are equal). It becomes ``max_position`` = 0 (short) or
  ``original_max_position_embeddings + 1`` (long): the smallest value that selects the
  same set, so that every length on one side gives the same RopeConfig (and cached plan).
  ``factor`` (None: ``max_position_embeddings / original_max_position_embeddings``, as
  transformers does) and ``attention_factor`` (if given) are passed, and librove derives
  the attention factor by transformers' rule, ``sqrt(1 + ln s / ln L0)`` for ``s > 1``,
  else 1; it multiplies the rotated dims of q and k.

Not supported (ValueError): ``proportional`` and any other rope type, unknown keys in
``rope_parameters`` (e.g. multimodal ``mrope_section``), odd rotary dims (transformers
rounds their frequency count up with exponents over the odd dim), parameter values that
librove refuses (e.g. ``attention_factor <= 0``, or a negative ``mscale``), and
``partial_rotary_factor != 1`` with ``rope_type="default"`` where the family's own
``compute_default_rope_parameters`` (run on the config) rotates other dims -- most
families copy Llama's, which ignores the factor while transformers' scaled types honour
it, so the intent is ambiguous (GPT-NeoX, Phi, StableLM, GLM-4, ... honour it, and are
followed) -- and configs that carry no rope parameters at all (``rope_parameters``,
``rope_theta`` and ``rope_scaling`` all absent: GPT-2, OPT, BERT, T5, BLOOM, MPT) or set
``alibi=True``.
"""
from __future__ import annotations

import functools
import math
from typing import Optional, Tuple

from .rope import RopeConfig, mscale as _mscale

__all__ = ["rope_config_from_hf", "hf_rope_parameters", "hf_head_dim", "hf_attention_factor",
           "hf_softmax_scale"]

# Families whose rotary embedding pairs dims (x[2k], x[2k+1]) (rotate_every_two, an
# interleaved rotate_half, complex products); configs with rope_interleave=True
# (DeepSeek-V2/V3) too. Other model types take the pairing of their modeling module's
# text rotation, probed (_module_pairing), else "half".
INTERLEAVED_MODEL_TYPES = frozenset({"gptj", "codegen", "cohere", "cohere2", "cohere2_moe",
                                     "deepseek_v2", "llama4", "llama4_text",
                                     "openai_privacy_filter"})
# Layers that apply no rotary embedding: Cohere-2's full_attention layers, EXAONE-4's when
# sliding_window is set (their attention modules skip apply_rotary_pos_emb there), and
# layers marked 0 in config.no_rope_layers (SmolLM3, Llama-4).
NO_ROPE_FULL_ATTENTION = frozenset({"cohere2", "cohere2_moe"})
NO_ROPE_FULL_WHEN_SLIDING = frozenset({"exaone4", "exaone4_5", "exaone_moe"})
# MLA families whose layout is known: q/k heads [qk_nope dims | qk_rope rotated dims];
# DeepSeek-V2 rotates interleaved pairs (view_as_complex), V3 as rope_interleave says.
# Other model types with qk_rope_head_dim (there are many) are refused, not guessed.
MLA_MODEL_TYPES = frozenset({"deepseek_v2", "deepseek_v3"})
_COMMON_KEYS = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}
_TYPE_KEYS = {
    "default": set(),
    "linear": {"factor"},
    # transformers' dynamic NTK reads config.max_position_embeddings, never this key
    "dynamic": {"factor", "original_max_position_embeddings"},
    "yarn": {"factor", "original_max_position_embeddings", "attention_factor", "beta_fast",
             "beta_slow", "mscale", "mscale_all_dim", "truncate"},
    "longrope": {"short_factor", "long_factor", "factor", "attention_factor",
                 "original_max_position_embeddings"},
    "llama3": {"factor", "low_freq_factor", "high_freq_factor",
               "original_max_position_embeddings"},
}


def _text_config(config):
    get = getattr(config, "get_text_config", None)
    if callable(get):
        try:
            return get(decoder=True)
        except TypeError:
            return get()
    return config


def _model_type(config) -> str:
    return str(getattr(config, "model_type", "") or "")


def hf_head_dim(config, head_dim: Optional[int] = None) -> int:
    """head_dim as transformers' rotary embeddings read it."""
    if head_dim is not None:
        return int(head_dim)
    config = _text_config(config)
    hd = getattr(config, "head_dim", None)
    if hd:
        return int(hd)
    hidden = getattr(config, "hidden_size", None)
    heads = getattr(config, "num_attention_heads", None)
    if not hidden or not heads:
        raise ValueError("config has neither head_dim nor hidden_size / num_attention_heads")
    if hidden % heads:
        raise ValueError(f"hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
    return hidden // heads


def hf_rope_parameters(config, layer_type: Optional[str] = None) -> dict:
    """The rope parameter dict transformers uses for ``layer_type`` (a copy).

    transformers 5.x: ``config.rope_parameters`` (nested by layer type for e.g. Gemma-3);
    older configs: ``rope_theta`` and ``rope_scaling``."""
    config = _text_config(config)
    if getattr(config, "alibi", False) is True:
        raise ValueError(f"config.alibi=True ({_model_type(config)!r}): the model uses ALiBi "
                         "position biases, not a rotary embedding")
    rp = getattr(config, "rope_parameters", None)
    if rp is None:
        if getattr(config, "rope_scaling", None) is None and \
                getattr(config, "rope_theta", None) is None:
            raise ValueError(f"config ({_model_type(config)!r}) has no rope_parameters, "
                             "rope_theta or rope_scaling: its model applies no rotary "
                             "embedding that librove can read (learned or ALiBi positions, a "
                             "relative bias, ...); refusing to guess")
        rp = dict(getattr(config, "rope_scaling", None) or {})
        if "rope_theta" not in rp:
            rp["rope_theta"] = getattr(config, "rope_theta", None) or getattr(
                config, "default_theta", 10000.0)
        prf = getattr(config, "partial_rotary_factor", None)
        if prf is not None:
            rp.setdefault("partial_rotary_factor", prf)
        rp.setdefault("rope_type", rp.get("type", "default"))
        return rp
    if not isinstance(rp, dict):
        raise ValueError(f"config.rope_parameters must be a dict (got {type(rp).__name__})")
    labels = getattr(config, "_rope_type_labels", None) or getattr(config, "layer_types", None) or ()
    nested = [k for k in rp if k in labels]
    if nested:
        if layer_type is None:
            distinct = {repr(sorted(rp[k].items())) if rp[k] else None for k in nested}
            if len(distinct) > 1:
                raise ValueError(
                    f"config.rope_parameters differs per layer type ({sorted(nested)}): pass "
                    "layer_type=... (e.g. the attention module's layer_type)")
            layer_type = nested[0]
        if layer_type not in rp:
            raise ValueError(f"config.rope_parameters has no entry for layer_type "
                             f"{layer_type!r} (it has {sorted(nested)})")
        sub = rp[layer_type]
        if sub is None:
            raise ValueError(f"config.rope_parameters[{layer_type!r}] is None: that layer type "
                             "has no RoPE")
        return dict(sub)
    if layer_type is not None and getattr(config, "layer_types", None) and \
            layer_type not in config.layer_types:
        raise ValueError(f"layer_type {layer_type!r} is not one of config.layer_types")
    return dict(rp)


def _num(name, x, positive=True) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        try:
            x = float(x)
        except (TypeError, ValueError):
            raise ValueError(f"rope_parameters[{name!r}] must be a number (got {x!r})") from None
    x = float(x)
    if not math.isfinite(x) or (positive and not x > 0):
        raise ValueError(f"rope_parameters[{name!r}] must be finite{' and > 0' if positive else ''} "
                         f"(got {x})")
    return x


def _get_mscale(scale: float, mscale: float = 1.0) -> float:
    # transformers' _compute_yarn_parameters.get_mscale, verbatim
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def hf_attention_factor(config, layer_type: Optional[str] = None) -> float:
    """The attention factor (cos/sin multiplier) transformers derives for this config:
    YaRN and LongRoPE rules; 1 for the other types."""
    config = _text_config(config)
    rp = hf_rope_parameters(config, layer_type)
    t = rp.get("rope_type", rp.get("type", "default"))
    if t == "yarn":
        return _yarn_parts(config, rp)[1]
    if t == "longrope":
        return _longrope_parts(config, rp)[1]
    return 1.0


def _yarn_parts(config, rp) -> Tuple[float, float]:
    """(factor, attention_factor) exactly as _compute_yarn_parameters."""
    L0 = rp.get("original_max_position_embeddings")
    if not L0:
        raise ValueError("rope_parameters['original_max_position_embeddings'] is required for yarn")
    factor = rp.get("factor")
    if factor is None:
        mpe = getattr(config, "max_position_embeddings", None)
        if not mpe:
            raise ValueError("rope_parameters['factor'] is None and config has no "
                             "max_position_embeddings to derive it from")
        factor = mpe / L0
    factor = _num("factor", factor)
    af = rp.get("attention_factor")
    if af is None:
        mscale, mscale_all_dim = rp.get("mscale"), rp.get("mscale_all_dim")
        if mscale and mscale_all_dim:
            af = float(_get_mscale(factor, _num("mscale", mscale)) /
                       _get_mscale(factor, _num("mscale_all_dim", mscale_all_dim)))
        else:
            af = _get_mscale(factor)
    return factor, _num("attention_factor", af)


def _longrope_parts(config, rp) -> Tuple[float, float]:
    """(factor, attention_factor) exactly as _compute_longrope_parameters."""
    L0 = rp.get("original_max_position_embeddings")
    if not L0:
        raise ValueError("rope_parameters['original_max_position_embeddings'] is required for "
                         "longrope")
    factor = rp.get("factor")
    if factor is None:
        factor = getattr(config, "max_position_embeddings") / L0
    factor = _num("factor", factor)
    af = rp.get("attention_factor")
    if af is None:
        af = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(L0))
    return factor, _num("attention_factor", af)


def _is_mla(config) -> bool:
    """DeepSeek-V2/V3-style multi-head latent attention: rotary dims after the nope dims."""
    return getattr(config, "qk_rope_head_dim", None) is not None


def _mla_head_dim(config) -> int:
    rope_d = _int_pos("config.qk_rope_head_dim", config.qk_rope_head_dim)
    nope = getattr(config, "qk_nope_head_dim", None) or 0
    return int(nope) + rope_d


def hf_softmax_scale(config) -> float:
    """The logit scale of DeepSeek-V2/V3-style attention (DeepseekV3Attention.scaling):
    ``qk_head_dim ** -0.5``, times ``get_mscale(factor, mscale_all_dim) ** 2`` when the
    rope type is not "default" and ``mscale_all_dim`` is truthy (transformers'
    yarn_apply_mscale; get_mscale is rove.rope.mscale). Pass it as the attention
    ``scale``. ValueError for a config without ``qk_rope_head_dim`` (other models: the
    attention module's own ``scaling``)."""
    config = _text_config(config)
    if not _is_mla(config):
        raise ValueError("hf_softmax_scale: the config has no qk_rope_head_dim (not a "
                         "DeepSeek-style MLA model); use the attention module's scaling")
    scaling = _mla_head_dim(config) ** (-0.5)
    rp = hf_rope_parameters(config)
    if rp.get("rope_type", rp.get("type", "default")) != "default":
        msa = rp.get("mscale_all_dim", 0)
        if msa:
            g = _mscale(_num("factor", rp.get("factor")), _num("mscale_all_dim", msa))
            scaling = scaling * g * g  # transformers' order
    return scaling


def _int_pos(name, x) -> int:
    if isinstance(x, bool) or x is None or int(x) != x or int(x) <= 0:
        raise ValueError(f"{name} must be a positive int (got {x!r})")
    return int(x)


def _modeling_module_name(config) -> Optional[str]:
    """The name of transformers' modeling module for config's family: the module beside
    the config class's (a text sub-config such as ``glm4v_text`` lives in ``glm4v``), else
    ``transformers.models.<model_type>.modeling_<model_type>``; None for other configs."""
    cm = type(config).__module__
    if cm.startswith("transformers.models.") and ".configuration_" in cm:
        return cm.replace(".configuration_", ".modeling_")
    mt = _model_type(config)
    return f"transformers.models.{mt}.modeling_{mt}" if mt else None


def _import(name: Optional[str]):
    if not name:
        return None
    try:
        import importlib
        return importlib.import_module(name)
    except Exception:
        return None


def _probe_rotation(mod, torch):
    """What the text attention's rotation does to 0..7 with cos = 0, sin = 1 (the
    module's apply_rotary_pos_emb, which is the text one where a vision tower has its
    own rotate_half); the module's rotate_half when apply cannot be run so (M-RoPE
    signatures); None when there is neither."""
    x = torch.arange(8.0)
    apply = getattr(mod, "apply_rotary_pos_emb", None)
    if apply is not None:
        try:
            q = x.reshape(1, 1, 1, 8)
            out = apply(q.clone(), q.clone(), torch.zeros(1, 1, 8), torch.ones(1, 1, 8))
            return out[0].reshape(8).float()
        except Exception:
            pass
    f = getattr(mod, "rotate_half", None)
    return None if f is None else f(x.clone()).float()


@functools.lru_cache(maxsize=None)
def _module_pairing(module_name: str) -> Optional[str]:
    """The pairing of the text rotation of transformers' modeling module ("half" /
    "interleaved"), found by running it on 0..7 (_probe_rotation); None when the module
    or the functions are absent (remote code). ValueError for any other rotation (e.g.
    nanochat's, which turns the other way)."""
    try:
        import torch
    except ImportError:
        return None
    mod = _import(module_name)
    y = None if mod is None else _probe_rotation(mod, torch)
    if y is None:
        return None
    x = torch.arange(8.0)
    if torch.equal(y, torch.cat([-x[4:], x[:4]])):
        return "half"
    if torch.equal(y, torch.stack([-x[1::2], x[0::2]], -1).flatten()):
        return "interleaved"
    raise ValueError(f"{module_name}: its rotary embedding pairs or turns dims in a way "
                     "librove does not reproduce (neither (x[k], x[k + d/2]) nor (x[2k], "
                     "x[2k+1]) turned by +angle)")


def _default_rotary_dim(config, layer_type: Optional[str] = None) -> Optional[int]:
    """The rotary dim of rope_type "default" as the family's own text rotary embedding
    computes it (2 x the length of its compute_default_rope_parameters(config), given
    layer_type where the parameters are per layer type, as Gemma-3's); None when it
    cannot be run or its classes disagree; 0 when there is no modeling module (remote
    code). Families copied from Llama ignore partial_rotary_factor there, GPT-NeoX's and
    Phi's honour it."""
    mod = _import(_modeling_module_name(config))
    if mod is None:
        return 0
    dims = set()
    for name, cls in vars(mod).items():
        f = getattr(cls, "compute_default_rope_parameters", None)
        if not (isinstance(cls, type) and name.endswith("RotaryEmbedding") and callable(f)) or \
                "Vision" in name or cls.__module__ != mod.__name__:
            continue
        try:
            got = f(config) if layer_type is None else f(config, layer_type=layer_type)
            dims.add(2 * int(got[0].numel()))
        except Exception:
            continue
    return dims.pop() if len(dims) == 1 else None


def _no_rope_reason(config, mt: str, layer_type, layer_idx) -> Optional[str]:
    """Why the layer (layer_type / layer_idx) applies no rotary embedding, None if it does;
    ValueError when the config has such layers and neither names the layer."""
    flags = getattr(config, "no_rope_layers", None)
    if flags is not None and not all(flags):
        if layer_idx is None:
            raise ValueError("config.no_rope_layers: some layers apply no rotary embedding; "
                             "pass layer_idx= (the attention module's layer_idx)")
        if not flags[layer_idx]:
            return f"layer {layer_idx} is marked 0 in config.no_rope_layers"
    types = getattr(config, "layer_types", None)
    if layer_type is None and layer_idx is not None and types:
        layer_type = types[layer_idx]
    full = mt in NO_ROPE_FULL_ATTENTION or (
        mt in NO_ROPE_FULL_WHEN_SLIDING and getattr(config, "sliding_window", None) is not None)
    if full and layer_type is None and types and "full_attention" in types:
        raise ValueError(f"{mt}'s full_attention layers apply no rotary embedding; pass "
                         "layer_type= or layer_idx= for the layer")
    if full and layer_type == "full_attention":
        return f"{mt}'s full_attention layers skip apply_rotary_pos_emb"
    return None


def rope_config_from_hf(config, head_dim: Optional[int] = None, *, seq_len: Optional[int] = None,
                        layer_type: Optional[str] = None, layer_idx: Optional[int] = None,
                        pairing: Optional[str] = None) -> RopeConfig:
    """The :class:`rove.RopeConfig` of a transformers config (see the module docstring).

    head_dim: override (default: ``config.head_dim`` or ``hidden_size //
    num_attention_heads``). seq_len: ``max(position_ids) + 1`` of the forward, needed
    only by ``dynamic`` and by ``longrope`` with different short and long factors.
    layer_type: for configs whose ``rope_parameters`` differ per layer type (Gemma-3:
    ``"sliding_attention"`` / ``"full_attention"``). layer_idx: the layer's index (its
    type is then ``config.layer_types[layer_idx]`` unless layer_type is given); needed by
    configs with layers that apply no rotary embedding (``config.no_rope_layers``:
    SmolLM3, Llama-4; Cohere-2's full_attention layers; EXAONE-4's with a sliding
    window), for which it raises ValueError: run such a layer with ``rotate="none"``.
    pairing: override ("half" / "interleaved"); by default the family's (the known
    interleaved families, else the pairing of the text attention's rotation in
    transformers, probed; "half" when there is none). Raises ValueError naming any field
    it cannot honour exactly.
    """
    config = _text_config(config)
    mt = _model_type(config)
    types = getattr(config, "layer_types", None)
    if layer_idx is not None:
        n_layers = len(types or getattr(config, "no_rope_layers", None) or ()) or None
        if isinstance(layer_idx, bool) or not isinstance(layer_idx, int) or layer_idx < 0 or \
                (n_layers is not None and layer_idx >= n_layers):
            raise ValueError(f"layer_idx must be a layer index (0 .. {n_layers} - 1), got "
                             f"{layer_idx!r}")
    reason = _no_rope_reason(config, mt, layer_type, layer_idx)
    if reason:
        raise ValueError(f"this layer applies no rotary embedding ({reason}): there is no "
                         "RopeConfig for it; run its attention with rotate='none'")
    if layer_type is None and layer_idx is not None and types:
        layer_type = types[layer_idx]
    mla = _is_mla(config)
    # the dims transformers computes its frequencies over (MLA: config.head_dim, which
    # DeepSeek sets to qk_rope_head_dim) and the head librove rotates inside
    rope_hd = hf_head_dim(config, None if mla else head_dim)
    hd = (int(head_dim) if head_dim is not None else _mla_head_dim(config)) if mla else rope_hd
    if mla and mt not in MLA_MODEL_TYPES:
        raise ValueError(f"config.qk_rope_head_dim is set on model_type {mt!r}: an MLA layout "
                         f"rope_config_from_hf does not know (it knows {sorted(MLA_MODEL_TYPES)});"
                         " refusing to guess which dims rotate and how they pair")
    if mla and rope_hd != int(config.qk_rope_head_dim):
        raise ValueError(f"config.head_dim={rope_hd} differs from qk_rope_head_dim="
                         f"{config.qk_rope_head_dim}: transformers' rotary embedding and its "
                         "MLA attention would disagree; refusing to guess")
    if pairing is None:
        interleaved = mt in INTERLEAVED_MODEL_TYPES or bool(getattr(config, "rope_interleave", False))
        name = _modeling_module_name(config)
        pairing = "interleaved" if interleaved else ((name and _module_pairing(name)) or "half")
    if seq_len is not None:
        seq_len = _int_pos("seq_len", seq_len)

    if mt in ("gptj", "codegen"):
        # GPTJRotaryEmbedding: theta 10000 (hard-coded), pos_embd_dim = rotary_dim or
        # hidden_size, interleaved pairs; no rope_parameters at all.
        rd = getattr(config, "rotary_dim", None)
        for key in ("rope_parameters", "rope_scaling"):
            extra = getattr(config, key, None)
            if extra:
                raise ValueError(f"config.{key}={extra!r}: transformers' {mt} ignores it "
                                 "(theta 10000, no scaling); refusing to guess")
        if not rd:
            rd = getattr(config, "hidden_size", None) or getattr(config, "n_embd")
        rd = int(rd)
        if rd > hd:
            raise ValueError(f"config.rotary_dim={rd} exceeds head_dim={hd}")
        if rd % 2:
            raise ValueError(f"config.rotary_dim={rd} is odd: librove rotates pairs")
        return RopeConfig(rotary_dim=rd, pairing=pairing, theta=10000.0)

    rp = hf_rope_parameters(config, layer_type)
    rtype = rp.get("rope_type", rp.get("type", "default"))
    if rtype not in _TYPE_KEYS:
        raise ValueError(f"rope_parameters['rope_type']={rtype!r} is not supported by librove "
                         f"(supported: {sorted(_TYPE_KEYS)})")
    unknown = sorted(set(rp) - _COMMON_KEYS - _TYPE_KEYS[rtype])
    if unknown:
        raise ValueError(f"rope_parameters has field(s) {unknown} that librove cannot honour "
                         f"for rope_type={rtype!r}")
    theta = rp.get("rope_theta")
    if theta is None:
        theta = getattr(config, "rope_theta", None) or getattr(config, "default_theta", 10000.0)
    theta = _num("rope_theta", theta)

    prf = rp.get("partial_rotary_factor", 1.0)
    prf = 1.0 if prf is None else _num("partial_rotary_factor", prf)
    dim = int(rope_hd * prf)
    if dim < 2 or dim > hd:
        raise ValueError(f"partial_rotary_factor={prf} gives rotary dim {dim} for head_dim {hd}")
    if dim % 2 and prf == 1.0:
        raise ValueError(f"head_dim {hd} is odd: librove rotates pairs of dims")
    if dim % 2:
        raise ValueError(f"partial_rotary_factor={prf} gives an odd rotary dim {dim} (head_dim "
                         f"{hd}): transformers rounds its pair count up with exponents over "
                         "the odd dim, which librove does not reproduce")
    if rtype == "default" and prf != 1.0:  # the family's own default, probed
        hf_dim = _default_rotary_dim(config, layer_type)
        if hf_dim is None:
            raise ValueError(f"rope_parameters['partial_rotary_factor']={prf} with rope_type "
                             f"'default': transformers' {mt} default rotary embedding could "
                             "not be run on this config to learn whether it honours the "
                             "factor (most families ignore it); refusing to guess")
        if hf_dim and hf_dim != dim:
            why = ("its default ignores the factor, its scaled types honour it"
                   if hf_dim == rope_hd else "it computes the rotary dim otherwise")
            raise ValueError(f"rope_parameters['partial_rotary_factor']={prf} with rope_type "
                             f"'default': transformers' {mt} rotary embedding rotates {hf_dim} "
                             f"dims, not {dim} ({why}); refusing to guess")
    if mla:  # the rotated dims are the last ones of the qk head
        base = dict(rotary_dim=dim, pairing=pairing, theta=theta, placement="last")
    else:
        base = dict(rotary_dim=0 if dim == hd else dim, pairing=pairing, theta=theta)

    if rtype == "default":
        return RopeConfig(**base)
    if rtype == "linear":
        return RopeConfig(**base, scaling="linear", factor=_num("factor", rp.get("factor")))
    if rtype == "llama3":
        L0 = _int_pos("rope_parameters['original_max_position_embeddings']",
                      rp.get("original_max_position_embeddings"))
        return RopeConfig(**base, scaling="llama3", factor=_num("factor", rp.get("factor")),
                          original_max_position=L0,
                          low_freq_factor=_num("low_freq_factor", rp.get("low_freq_factor")),
                          high_freq_factor=_num("high_freq_factor", rp.get("high_freq_factor")))
    if rtype == "yarn":
        factor, _ = _yarn_parts(config, rp)
        L0 = _int_pos("rope_parameters['original_max_position_embeddings']",
                      rp.get("original_max_position_embeddings"))
        top = getattr(config, "rope_parameters", None) or {}
        truncate = top.get("truncate", True)  # transformers reads the top-level dict
        if truncate not in (True, False, 0, 1):
            raise ValueError(f"rope_parameters['truncate'] must be a bool (got {truncate!r})")
        m = {}  # librove derives the attention factor by transformers' rule
        if rp.get("attention_factor") is not None:
            m["attention_factor"] = _num("attention_factor", rp["attention_factor"])
        mscale, mscale_all_dim = rp.get("mscale"), rp.get("mscale_all_dim")
        if mscale and mscale_all_dim:  # transformers uses them only when both are truthy
            m["mscale"] = _num("mscale", mscale)
            m["mscale_all_dim"] = _num("mscale_all_dim", mscale_all_dim)
        return RopeConfig(**base, scaling="yarn", factor=factor, original_max_position=L0,
                          beta_fast=_num("beta_fast", rp.get("beta_fast") or 32),
                          beta_slow=_num("beta_slow", rp.get("beta_slow") or 1),
                          truncate=bool(truncate), **m)
    if rtype == "dynamic":
        factor = _num("factor", rp.get("factor"))
        mpe = _int_pos("config.max_position_embeddings",
                       getattr(config, "max_position_embeddings", None))
        if seq_len is None:
            raise ValueError(
                "rope_parameters['rope_type']='dynamic': transformers rescales the base at run "
                "time from the sequence length, so a RopeConfig is exact only for a given "
                f"length: pass seq_len=max(position_ids)+1 (<= max_position_embeddings={mpe} "
                "gives the default RoPE, longer gives static NTK)")
        L = max(seq_len, mpe)
        s = factor * L / mpe - (factor - 1)
        if L == mpe or s == 1.0:
            return RopeConfig(**base)
        if dim <= 2:
            raise ValueError("dynamic NTK needs a rotary dim > 2")
        return RopeConfig(**base, scaling="ntk", factor=s)
    # longrope
    L0 = _int_pos("rope_parameters['original_max_position_embeddings']",
                  rp.get("original_max_position_embeddings"))
    short, long_ = rp.get("short_factor"), rp.get("long_factor")
    if short is None or long_ is None:
        raise ValueError("rope_parameters['short_factor'] and ['long_factor'] are required for "
                         "longrope")
    short = tuple(_num("short_factor[]", f) for f in short)
    long_ = tuple(_num("long_factor[]", f) for f in long_)
    for name, ff in (("short_factor", short), ("long_factor", long_)):
        if len(ff) != dim // 2:
            raise ValueError(f"rope_parameters['{name}'] has {len(ff)} values; rotary dim {dim} "
                             f"needs {dim // 2}")
    if seq_len is None and short != long_:
        raise ValueError(
            "rope_parameters['rope_type']='longrope': transformers uses short_factor for "
            f"sequences up to original_max_position_embeddings={L0} and long_factor beyond "
            "(chosen at run time): pass seq_len=max(position_ids)+1")
    # the smallest max_position that selects transformers' set for seq_len
    max_position = L0 + 1 if seq_len is not None and seq_len > L0 else 0
    factor, _ = _longrope_parts(config, rp)
    m = {}
    if rp.get("attention_factor") is not None:
        m["attention_factor"] = _num("attention_factor", rp["attention_factor"])
    return RopeConfig(**base, scaling="longrope", factor=factor, original_max_position=L0,
                      freq_factors=short, long_freq_factors=long_, max_position=max_position,
                      **m)
