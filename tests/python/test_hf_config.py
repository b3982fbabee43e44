# SPDX-License-Identifier: MIT
"""rope_config_from_hf against transformers' own rotary embeddings (inv_freq, attention
scaling) for every rope type librove implements, and the fields it must refuse.

Precision: transformers computes inv_freq in float32 (torch.float arange and power), so
librove's double frequencies agree to float32 rounding (RTOL); it computes the attention
factor (get_mscale ratios, LongRoPE's sqrt) and DeepSeek's softmax scale in Python
floats, i.e. in double with the same libm, and those agree to M_RTOL = 1e-15 (in practice
bit for bit)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import torch  # noqa: E402  (no importorskip: a missing torch/transformers is a failure)
import transformers as T  # noqa: E402

import rove  # noqa: E402
from rove.hf_config import (hf_attention_factor, hf_head_dim, hf_softmax_scale,  # noqa: E402
                            rope_config_from_hf)
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

import hf_models as H  # noqa: E402

RTOL = 2e-6  # inv_freq: transformers evaluates in float32, librove in double
M_RTOL = 1e-15  # attention factor: both in double


def _hf_rotary(config):
    """The model's own rotary embedding module, built from the config."""
    model = T.AutoModelForCausalLM.from_config(config)
    rot = [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]
    assert rot, f"no rotary embedding in {type(model).__name__}"
    return rot[0]


def _check(cfg_rove, head_dim, hf_inv_freq, hf_scaling):
    w, m = rove.inv_freq(cfg_rove, head_dim)
    hf = np.asarray(hf_inv_freq, dtype=np.float64)
    assert w.shape == hf.shape, (w.shape, hf.shape)
    np.testing.assert_allclose(w, hf, rtol=RTOL, atol=0)
    assert math.isclose(m, float(hf_scaling), rel_tol=M_RTOL), (m, hf_scaling)


@pytest.mark.parametrize("family", sorted(H.FAMILIES))
def test_family_configs_match_model_rotary(family):
    config = H.FAMILIES[family]()
    rot = _hf_rotary(config)
    hd = rove.hf_config.hf_head_dim(config)
    if family == "gptj":
        cfg = rope_config_from_hf(config)
        assert cfg.pairing == "interleaved" and cfg.rotary_dim == config.rotary_dim
        sin1 = rot.embed_positions[1, : config.rotary_dim // 2].double()
        w, m = rove.inv_freq(cfg, hd)
        np.testing.assert_allclose(w, torch.asin(sin1).numpy(), rtol=1e-5)
        assert m == 1.0
        return
    layer_types = sorted(set(getattr(config, "layer_types", None) or [None]))
    nested = any(lt in (config.rope_parameters or {}) for lt in layer_types if lt)
    for lt in (layer_types if nested else [None]):
        prefix = f"{lt}_" if nested else ""
        cfg = rope_config_from_hf(config, layer_type=lt, seq_len=16)  # short: longrope short
        assert cfg.pairing == "half"
        _check(cfg, hd, getattr(rot, f"{prefix}inv_freq"),
               getattr(rot, f"{prefix}attention_scaling"))


def _llama(rope_parameters, **kw):
    base = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                num_hidden_layers=1, intermediate_size=64, vocab_size=64,
                max_position_embeddings=kw.pop("max_position_embeddings", 131072))
    base.update(kw)
    return T.LlamaConfig(**base, rope_parameters=rope_parameters)


YARN_CASES = {
    "qwen2.5-yarn": dict(rope_type="yarn", rope_theta=1e6, factor=4.0,
                         original_max_position_embeddings=32768),
    "gpt-oss": dict(rope_type="yarn", rope_theta=150000.0, factor=32.0, beta_fast=32.0,
                    beta_slow=1.0, original_max_position_embeddings=4096, truncate=False),
    "deepseek-mscale": dict(rope_type="yarn", rope_theta=10000.0, factor=40.0, mscale=1.0,
                            mscale_all_dim=0.707, beta_fast=32, beta_slow=1,
                            original_max_position_embeddings=4096),
    "deepseek-v3-mscale": dict(rope_type="yarn", rope_theta=10000.0, factor=40.0, mscale=1.0,
                               mscale_all_dim=1.0, original_max_position_embeddings=4096),
    "mscale-ratio-above-1": dict(rope_type="yarn", rope_theta=10000.0, factor=16.0,
                                 mscale=2.0, mscale_all_dim=0.5,
                                 original_max_position_embeddings=4096),
    "mscale-alone": dict(rope_type="yarn", rope_theta=10000.0, factor=16.0, mscale=0.5,
                         original_max_position_embeddings=4096),  # HF ignores a lone mscale
    "mscale-all-dim-alone": dict(rope_type="yarn", rope_theta=10000.0, factor=16.0,
                                 mscale=0, mscale_all_dim=0.8,
                                 original_max_position_embeddings=4096),  # falsy mscale
    "mscale-with-explicit-factor": dict(rope_type="yarn", rope_theta=10000.0, factor=16.0,
                                        mscale=1.0, mscale_all_dim=0.5, attention_factor=1.1,
                                        original_max_position_embeddings=4096),
    "explicit-factor": dict(rope_type="yarn", rope_theta=10000.0, factor=8.0,
                            attention_factor=1.5, original_max_position_embeddings=2048),
    "factor-from-lengths": dict(rope_type="yarn", rope_theta=10000.0, factor=None,
                                original_max_position_embeddings=4096),
    "beta-zero-means-default": dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                    beta_fast=0, beta_slow=0,
                                    original_max_position_embeddings=4096),
}


@pytest.mark.parametrize("case", sorted(YARN_CASES))
def test_yarn_matches_transformers(case):
    rp = dict(YARN_CASES[case])
    config = _llama(rp, max_position_embeddings=65536)
    w_hf, m_hf = ROPE_INIT_FUNCTIONS["yarn"](config)
    cfg = rope_config_from_hf(config)
    assert cfg.scaling == "yarn" and cfg.truncate == bool(rp.get("truncate", True))
    # passed natively: librove derives m by transformers' rule (checked by _check)
    assert cfg.attention_factor == (rp.get("attention_factor") or 0.0)
    both = bool(rp.get("mscale")) and bool(rp.get("mscale_all_dim"))
    assert (cfg.mscale, cfg.mscale_all_dim) == ((rp["mscale"], rp["mscale_all_dim"]) if both
                                                else (0.0, 0.0))
    _check(cfg, 64, w_hf, m_hf)
    assert hf_attention_factor(config) == pytest.approx(m_hf, rel=M_RTOL)


def test_yarn_partial_rotary_on_neox():
    config = T.GPTNeoXConfig(hidden_size=256, num_attention_heads=4, num_hidden_layers=1,
                             intermediate_size=64, vocab_size=64, max_position_embeddings=8192,
                             rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0,
                                              "partial_rotary_factor": 0.5, "factor": 4.0,
                                              "original_max_position_embeddings": 2048})
    w_hf, m_hf = ROPE_INIT_FUNCTIONS["yarn"](config)
    cfg = rope_config_from_hf(config)
    assert cfg.rotary_dim == 32
    _check(cfg, 64, w_hf, m_hf)


def test_linear_llama3_and_longrope():
    lin = _llama({"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0})
    _check(rope_config_from_hf(lin), 64, *ROPE_INIT_FUNCTIONS["linear"](lin))
    l3 = _llama({"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                 "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 8192})
    _check(rope_config_from_hf(l3), 64, *ROPE_INIT_FUNCTIONS["llama3"](l3))



def _phi3_full(**rope):
    # Phi-3-mini-128k shape: head_dim 96 fully rotated, L0 4096 -> 131072 (no `factor`:
    # transformers takes 131072 / 4096 = 32, so m = sqrt(1 + ln 32 / ln 4096) = 1.19)
    n = 48
    rp = {"rope_type": "longrope", "rope_theta": 10000.0,
          "short_factor": [1.0 + 0.01 * i for i in range(n)],
          "long_factor": [1.0 + 0.9 * i for i in range(n)]}
    rp.update(rope)
    return T.Phi3Config(hidden_size=192, num_attention_heads=2, num_key_value_heads=1,
                        num_hidden_layers=1, intermediate_size=64, vocab_size=64,
                        pad_token_id=0, bos_token_id=1, eos_token_id=2,
                        max_position_embeddings=131072, original_max_position_embeddings=4096,
                        rope_parameters=rp)


@pytest.mark.parametrize("make", [H.phi3, _phi3_full,
                                  lambda: _phi3_full(factor=16.0),
                                  lambda: _phi3_full(attention_factor=1.0),
                                  lambda: _phi3_full(attention_factor=1.3)],
                         ids=["phi3-partial", "phi3-full", "factor-16", "attention-factor-1",
                              "attention-factor-1.3"])
def test_longrope_short_and_long_natively(make):
    phi = make()
    rp = phi.rope_parameters
    L0 = rp["original_max_position_embeddings"]
    hd = rove.hf_config.hf_head_dim(phi)
    for seq_len in (1, L0, L0 + 1, 100000):
        w_hf, m_hf = ROPE_INIT_FUNCTIONS["longrope"](phi, seq_len=seq_len)
        cfg = rope_config_from_hf(phi, seq_len=seq_len)
        assert cfg.scaling == "longrope" and cfg.original_max_position == L0
        assert cfg.freq_factors == tuple(rp["short_factor"])
        assert cfg.long_freq_factors == tuple(rp["long_factor"])
        assert cfg.max_position == (L0 + 1 if seq_len > L0 else 0)  # selects HF's set
        assert cfg.factor == rp.get("factor", phi.max_position_embeddings / L0)
        assert cfg.attention_factor == rp.get("attention_factor", 0.0)
        _check(cfg, hd, w_hf, m_hf)
    # the model's own rotary embedding: short set at init, its attention scaling
    rot = _hf_rotary(phi)
    _check(rope_config_from_hf(phi, seq_len=1), hd, rot.original_inv_freq,
           rot.attention_scaling)
    if "attention_factor" not in rp and "factor" not in rp:
        assert rove.inv_freq(rope_config_from_hf(phi, seq_len=1), hd)[1] == \
            pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)), rel=M_RTOL)


def test_longrope_equal_sets_need_no_seq_len():
    phi = _phi3_full(long_factor=[1.0 + 0.01 * i for i in range(48)])
    cfg = rope_config_from_hf(phi)
    assert cfg.max_position == 0
    _check(cfg, 96, *ROPE_INIT_FUNCTIONS["longrope"](phi, seq_len=100000))


# ---- DeepSeek-V3 (MLA): rotary dims last, YaRN with mscale, the softmax scale ---------------
def _deepseek_v3(**rope):
    rp = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "mscale": 1.0,
          "mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1,
          "original_max_position_embeddings": 4096}
    rp.update(rope)
    return T.DeepseekV3Config(hidden_size=256, num_attention_heads=4, num_key_value_heads=4,
                              num_hidden_layers=1, intermediate_size=64, moe_intermediate_size=32,
                              vocab_size=64, q_lora_rank=None, kv_lora_rank=32,
                              qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                              max_position_embeddings=163840, rope_interleave=True,
                              rope_parameters=rp)


@pytest.mark.parametrize("rope", [{}, {"mscale": 0.707, "mscale_all_dim": 0.707},
                                  {"mscale_all_dim": 0.5}, {"mscale": 0}],
                         ids=["v3", "v2-lite", "ratio", "mscale-falsy"])
def test_deepseek_v3_yarn_mscale_and_placement(rope):
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
        DeepseekV3Attention, DeepseekV3RotaryEmbedding)
    config = _deepseek_v3(**rope)
    cfg = rope_config_from_hf(config)
    assert (cfg.placement, cfg.rotary_dim, cfg.pairing) == ("last", 64, "interleaved")
    assert cfg.scaling == "yarn" and cfg.attention_factor == 0.0
    rp = config.rope_parameters
    both = bool(rp["mscale"]) and bool(rp["mscale_all_dim"])
    assert (cfg.mscale, cfg.mscale_all_dim) == ((rp["mscale"], rp["mscale_all_dim"]) if both
                                                else (0.0, 0.0))
    rot = DeepseekV3RotaryEmbedding(config)
    _check(cfg, 192, rot.inv_freq, rot.attention_scaling)  # qk head 128 + 64
    if rope == {}:
        assert rot.attention_scaling == 1.0  # not get_mscale(40) = 1.369
    # the softmax scale: DeepseekV3Attention's own, and rove.h's recipe
    attn = DeepseekV3Attention(config, layer_idx=0)
    assert hf_softmax_scale(config) == attn.scaling
    g = rove.rope.mscale(40.0, rp["mscale_all_dim"]) if rp["mscale_all_dim"] else 1.0
    assert math.isclose(hf_softmax_scale(config), g * g / math.sqrt(192), rel_tol=M_RTOL)
    # rope_interleave=False: rotate_half pairs on the same last 64 dims
    config.rope_interleave = False
    assert rope_config_from_hf(config).pairing == "half"


def test_deepseek_v2_interleaved_and_unknown_mla_refused():
    from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2RotaryEmbedding
    # DeepSeek-V2 rotates (x[2k], x[2k+1]) as complex numbers, with no rope_interleave flag
    v2 = T.DeepseekV2Config(hidden_size=256, num_attention_heads=4, num_key_value_heads=4,
                            num_hidden_layers=1, intermediate_size=64, moe_intermediate_size=32,
                            vocab_size=64, q_lora_rank=None, kv_lora_rank=32,
                            qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                            max_position_embeddings=163840,
                            rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0,
                                             "factor": 40.0, "mscale": 0.707,
                                             "mscale_all_dim": 0.707,
                                             "original_max_position_embeddings": 4096})
    assert not hasattr(v2, "rope_interleave")
    cfg = rope_config_from_hf(v2)
    assert (cfg.placement, cfg.rotary_dim, cfg.pairing) == ("last", 64, "interleaved")
    rot = DeepseekV2RotaryEmbedding(v2)
    _check(cfg, 192, rot.inv_freq, rot.attention_scaling)
    # another model type with qk_rope_head_dim: its layout is not guessed
    other = _deepseek_v3()
    other.model_type = "minicpm3"
    with pytest.raises(ValueError, match="MLA layout"):
        rope_config_from_hf(other)


def test_deepseek_v3_attention_matches_transformers():
    """q/k of DeepSeek-V3's MLA layout (128 nope dims, then 64 rotated interleaved dims),
    rotated and attended the way DeepseekV3Attention does (apply_rotary_pos_emb_interleave,
    eager softmax with its scaling) equals rove.attention with rope_config_from_hf and
    hf_softmax_scale."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
        DeepseekV3RotaryEmbedding, apply_rotary_pos_emb_interleave)
    config = _deepseek_v3()
    cfg, scale = rope_config_from_hf(config), hf_softmax_scale(config)
    B, Hh, L, dn, dr, dv = 1, 4, 12, 128, 64, 128
    g = torch.Generator().manual_seed(5)
    q = torch.randn(B, Hh, L, dn + dr, generator=g)
    k = torch.randn(B, Hh, L, dn + dr, generator=g)
    v = torch.randn(B, Hh, L, dn + dr, generator=g)  # v_head_dim 128 padded to the qk head
    # small positions: transformers' float32 angles pos * w are then exact to ~1e-6 (its
    # YaRN frequencies are checked against librove's above, at any position)
    pos = torch.arange(L)[None]
    cos, sin = DeepseekV3RotaryEmbedding(config)(v, pos)
    q_rot, k_rot = apply_rotary_pos_emb_interleave(q[..., dn:], k[..., dn:], cos, sin)
    qh, kh = torch.cat([q[..., :dn], q_rot], -1), torch.cat([k[..., :dn], k_rot], -1)
    s = (qh.double() @ kh.double().transpose(-1, -2)) * scale
    s = s.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
    want = torch.softmax(s, -1) @ v.double()
    p = pos[0].to(torch.int32).numpy()
    got = rove.attention(q, k, v, rotate="rope", rope=cfg, scale=scale, layout="bhsd",
                         q_pos=p, kv_pos=p)
    err = (got.double() - want).abs().max() / want.abs().max()
    assert err < 1e-5, err
    # without placement "last" (the rotated dims first) the result is far off
    bad = rove.attention(q, k, v, rotate="rope", rope=cfg.replace(placement="first"),
                         scale=scale, layout="bhsd", q_pos=p, kv_pos=p)
    assert (bad.double() - want).abs().max() / want.abs().max() > 1e-2


def test_gpt_oss_truncate_false():
    """gpt-oss ships YaRN with truncate=False (fractional ramp bounds): from_hf must give
    truncate=False (librove's truncate = 0; the default 1 would floor/ceil the bounds and
    shift the ramp), checked against transformers' own rope init for GptOssConfig."""
    config = T.GptOssConfig(hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
                            head_dim=64, num_hidden_layers=2, intermediate_size=64,
                            vocab_size=64, num_local_experts=2, num_experts_per_tok=1)
    assert config.rope_parameters["truncate"] is False
    cfg = rope_config_from_hf(config)
    assert cfg.truncate is False and cfg.scaling == "yarn"
    w_hf, m_hf = ROPE_INIT_FUNCTIONS["yarn"](config)
    _check(cfg, 64, w_hf, m_hf)
    rot = _hf_rotary(config)
    _check(cfg, 64, rot.inv_freq, rot.attention_scaling)
    # the trap: the default truncate=True gives different frequencies
    w_trunc, _ = rove.inv_freq(cfg.replace(truncate=True), 64)
    assert np.max(np.abs(w_trunc / np.asarray(w_hf, np.float64) - 1)) > 1e-2


def test_dynamic_is_default_then_static_ntk():
    config = _llama({"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0},
                    max_position_embeddings=4096)
    for seq_len in (1, 4096):
        cfg = rope_config_from_hf(config, seq_len=seq_len)
        assert cfg.scaling == "none"
        _check(cfg, 64, *ROPE_INIT_FUNCTIONS["dynamic"](config, seq_len=seq_len))
    for seq_len in (4097, 10000, 65536):
        cfg = rope_config_from_hf(config, seq_len=seq_len)
        assert cfg.scaling == "ntk"
        _check(cfg, 64, *ROPE_INIT_FUNCTIONS["dynamic"](config, seq_len=seq_len))


def test_legacy_rope_theta_and_rope_scaling_attributes():
    class Legacy:  # a pre-5.x style config object
        model_type = "llama"
        hidden_size, num_attention_heads, head_dim = 512, 8, None
        rope_theta = 123456.0
        rope_scaling = {"type": "linear", "factor": 2.0}
    cfg = rope_config_from_hf(Legacy())
    assert (cfg.theta, cfg.scaling, cfg.factor, cfg.rotary_dim) == (123456.0, "linear", 2.0, 0)


def test_from_hf_classmethod_and_head_dim_override():
    config = H.qwen3()
    assert rove.RopeConfig.from_hf(config) == rope_config_from_hf(config)
    assert rope_config_from_hf(config, head_dim=64) == rope_config_from_hf(config)  # r = 0


@pytest.mark.parametrize("what,config,kw,needle", [
    ("proportional", lambda: _llama({"rope_type": "proportional", "rope_theta": 1e4}), {},
     "rope_type"),
    ("unknown key", lambda: _llama({"rope_type": "default", "rope_theta": 1e4,
                                    "mrope_section": [16, 24, 24]}), {}, "mrope_section"),
    ("dynamic needs seq_len", lambda: _llama({"rope_type": "dynamic", "rope_theta": 1e4,
                                              "factor": 2.0}), {}, "seq_len"),
    ("longrope needs seq_len", H.phi3, {}, "seq_len"),
    ("odd partial dim", lambda: T.GPTNeoXConfig(hidden_size=256, num_attention_heads=4,
                                                rotary_pct=0.3), {}, "odd"),
    ("ambiguous partial", lambda: _llama({"rope_type": "default", "rope_theta": 1e4,
                                          "partial_rotary_factor": 0.5}), {},
     "partial_rotary_factor"),
    ("per-layer-type rope", H.gemma3, {}, "layer_type"),
    ("bad factor", lambda: _llama({"rope_type": "linear", "rope_theta": 1e4,
                                   "factor": -1.0}), {}, "factor"),
    ("negative mscale", lambda: _llama({"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
                                        "mscale": -1.0, "mscale_all_dim": 1.0,
                                        "original_max_position_embeddings": 4096}), {},
     "mscale"),
    ("zero attention_factor", lambda: _llama({"rope_type": "yarn", "rope_theta": 1e4,
                                              "factor": 4.0, "attention_factor": 0.0,
                                              "original_max_position_embeddings": 4096}), {},
     "attention_factor"),
    ("mscale on longrope", lambda: _phi3_full(mscale=1.0), {"seq_len": 10}, "mscale"),
    ("short_factor length", lambda: _with(_phi3_full(), short_factor=[1.0] * 47),
     {"seq_len": 10}, "short_factor"),
    ("deepseek head_dim != qk_rope_head_dim", lambda: _deepseek_v3_bad_head(), {},
     "qk_rope_head_dim"),
    ("softmax scale of a non-MLA model", None, {}, "qk_rope_head_dim"),
])
def test_refusals_name_the_field(what, config, kw, needle):
    with pytest.raises(ValueError, match=needle):
        if config is None:
            hf_softmax_scale(H.llama3())
        else:
            rope_config_from_hf(config(), **kw)


def _with(config, **rope):
    """config with rope_parameters entries changed after transformers validated it."""
    config.rope_parameters.update(rope)
    return config


def _deepseek_v3_bad_head():
    config = _deepseek_v3()
    config.head_dim = 32
    return config


def test_interleaved_pairing_families():
    assert rope_config_from_hf(T.CohereConfig(hidden_size=256, num_attention_heads=4)).pairing \
        == "interleaved"
    ds = T.DeepseekV3Config(hidden_size=256, num_attention_heads=4, qk_rope_head_dim=64,
                            rope_interleave=True)
    assert rope_config_from_hf(ds).pairing == "interleaved"
    assert rope_config_from_hf(ds, head_dim=64).placement == "last"
    assert rope_config_from_hf(H.llama3(), pairing="interleaved").pairing == "interleaved"


def _small(cls, **kw):
    base = dict(hidden_size=128, intermediate_size=64, num_attention_heads=2,
                num_key_value_heads=2, num_hidden_layers=2, vocab_size=64, pad_token_id=0)
    base.update(kw)
    return cls(**base)


@pytest.mark.parametrize("name", ["glm", "glm4", "helium", "ernie4_5", "llama", "qwen3"])
def test_pairing_from_the_model_rotate_half(name):
    """Families outside the fixed lists take the pairing of their own rotate_half: q rotated
    by the model's rotary embedding and apply_rotary_pos_emb equals rove.rotate with
    rope_config_from_hf (GLM, GLM-4, ERNIE-4.5, Helium pair (2k, 2k+1); they were taken as
    half pairs before, a rotation off by O(1))."""
    import importlib
    cls = {"glm": T.GlmConfig, "glm4": T.Glm4Config, "helium": T.HeliumConfig,
           "ernie4_5": T.Ernie4_5Config, "llama": T.LlamaConfig, "qwen3": T.Qwen3Config}[name]
    config = _small(cls)
    cfg = rope_config_from_hf(config)
    assert cfg.pairing == ("half" if name in ("llama", "qwen3") else "interleaved")
    mod = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    rot = _hf_rotary(config)
    hd = hf_head_dim(config)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 7, hd, generator=g)  # [b, h, s, d]
    pos = torch.arange(3, 10)[None]
    cos, sin = rot(q, pos)
    want, _ = mod.apply_rotary_pos_emb(q, q, cos, sin)
    got = rove.rotate(q.transpose(1, 2).contiguous(), pos[0].numpy().astype(np.int32), rope=cfg)
    assert torch.allclose(got.transpose(1, 2), want, atol=2e-5)


def test_a_rotate_half_turning_the_other_way_is_refused():
    with pytest.raises(ValueError, match="turns dims"):
        rope_config_from_hf(_small(T.NanoChatConfig))


def test_layers_without_rope_are_named_and_refused():
    c2 = _small(T.Cohere2Config, num_hidden_layers=4)  # layer 3: full_attention, no RoPE
    assert c2.layer_types[3] == "full_attention"
    with pytest.raises(ValueError, match="pass layer_type= or layer_idx="):
        rope_config_from_hf(c2)
    with pytest.raises(ValueError, match="no rotary embedding"):
        rope_config_from_hf(c2, layer_idx=3)
    with pytest.raises(ValueError, match="no rotary embedding"):
        rope_config_from_hf(c2, layer_type="full_attention")
    assert rope_config_from_hf(c2, layer_idx=0).pairing == "interleaved"
    s3 = _small(T.SmolLM3Config, num_hidden_layers=4)  # no_rope_layers [1, 1, 1, 0]
    with pytest.raises(ValueError, match="layer_idx"):
        rope_config_from_hf(s3)
    with pytest.raises(ValueError, match="no_rope_layers"):
        rope_config_from_hf(s3, layer_idx=3)
    assert rope_config_from_hf(s3, layer_idx=1).pairing == "half"
    with pytest.raises(ValueError, match="layer_idx must be"):
        rope_config_from_hf(s3, layer_idx=4)
    ex = _small(T.Exaone4Config, num_hidden_layers=4, sliding_window=64,
                layer_types=["sliding_attention"] * 3 + ["full_attention"])
    with pytest.raises(ValueError, match="no rotary embedding"):
        rope_config_from_hf(ex, layer_idx=3)
    rope_config_from_hf(ex, layer_idx=0)


def test_llama4_scout_equal_band_factors():
    """Llama-4 Scout: llama3 with low_freq_factor = high_freq_factor = 1 (no smoothing
    band; refused before), interleaved pairs; its NoPE layers are refused by index."""
    rp = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 16.0,
          "low_freq_factor": 1.0, "high_freq_factor": 1.0,
          "original_max_position_embeddings": 8192}
    l4 = _small(T.Llama4TextConfig, hidden_size=256, head_dim=128, num_hidden_layers=4,
                rope_parameters=rp)
    cfg = rope_config_from_hf(l4, layer_idx=0)
    assert cfg.pairing == "interleaved"
    w_hf, m_hf = ROPE_INIT_FUNCTIONS["llama3"](l4)
    _check(cfg, 128, w_hf, m_hf)
    with pytest.raises(ValueError, match="no_rope_layers"):
        rope_config_from_hf(l4, layer_idx=3)


@pytest.mark.parametrize("model_type", ["glm4v", "glm_ocr", "ernie4_5_vl_moe", "glm4v_moe",
                                        "qwen2_vl"])
def test_vision_language_text_rotation_matches_transformers(model_type):
    """The text half of a vision-language model: its pairing is that of the text
    attention's apply_rotary_pos_emb (GLM-4V, GLM-OCR and ERNIE-4.5-VL pair interleaved
    there, while the module's rotate_half is the vision tower's, by halves); text-only
    positions (the three M-RoPE axes equal) rotate as librove's RoPE does."""
    import importlib
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    mod = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    tc = CONFIG_MAPPING[model_type]().get_text_config(decoder=True)
    rp = tc.rope_parameters
    if model_type in ("glm4v", "glm4v_moe"):  # as the published GLM-4.xV configs: the
        rp["partial_rotary_factor"] = 0.5  # M-RoPE sections cover half the head
        tc.num_attention_heads = tc.hidden_size // 128
    section = rp.pop("mrope_section", None)  # text-only positions: no sections needed
    rot_cls = [c for n, c in vars(mod).items() if n.endswith("RotaryEmbedding") and
               "Vision" not in n and isinstance(c, type)][0]
    if section is not None:
        rp["mrope_section"] = section  # the rotary module reads it
    rot = rot_cls(config=tc)
    if section is not None:
        rp.pop("mrope_section")
    hd = hf_head_dim(tc)
    torch.manual_seed(0)
    q = torch.randn(1, 2, 12, hd)
    pos = torch.arange(12)[None]
    cos, sin = rot(q, pos[None].expand(3, 1, 12))
    import inspect
    kw = {}
    if "mrope_section" in inspect.signature(mod.apply_rotary_pos_emb).parameters:
        kw["mrope_section"] = rot.mrope_section
    want = mod.apply_rotary_pos_emb(q, q, cos, sin, **kw)[0]
    cfg = rope_config_from_hf(tc)
    got = rove.rotate(q.contiguous(), pos, rope=cfg, layout="bhsd")
    assert (got - want).abs().max().item() < 2e-5, cfg.pairing


def test_partial_rotary_with_default_type_follows_each_family():
    """partial_rotary_factor with rope_type 'default': most families copy Llama's default
    rotary embedding, which rotates the whole head and ignores the factor; GPT-NeoX, Phi
    and others honour it. Over every transformers family with a rotary embedding,
    rope_config_from_hf either refuses the factor or rotates exactly the dims (and
    frequencies) of the family's own module: never a silent difference."""
    import importlib
    import inspect
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    checked = {"refused": 0, "matched": 0, "nested": 0}
    for mt, cls in sorted(CONFIG_MAPPING.items()):
        try:
            mod = importlib.import_module(f"transformers.models.{mt}.modeling_{mt}")
            rots = [c for n, c in vars(mod).items() if n.endswith("RotaryEmbedding") and
                    "Vision" not in n and inspect.isclass(c) and c.__module__ == mod.__name__]
            cfg = cls(hidden_size=128, num_attention_heads=2, num_key_value_heads=2,
                      num_hidden_layers=2, intermediate_size=64, vocab_size=64,
                      max_position_embeddings=4096).get_text_config(decoder=True)
            rp = cfg.rope_parameters
            # flat parameters, or one dict per layer type (Gemma-3, OLMo-3, ModernBERT, ...)
            subs = [(None, rp)] if isinstance(rp, dict) and "rope_type" in rp else \
                [(lt, d) for lt, d in (rp or {}).items() if isinstance(d, dict)]
            if not rots or not subs or any(d.get("rope_type") != "default" for _, d in subs):
                continue
            for _, d in subs:
                d["partial_rotary_factor"] = 0.5
            rot = rots[0](config=cfg)
            hf = {lt: getattr(rot, f"{lt}_inv_freq" if lt else "inv_freq").double().numpy()
                  for lt, _ in subs}
            hd = hf_head_dim(cfg)
        except Exception:  # no module, a config these sizes do not build, ...: not ours
            continue
        for lt, hf_inv in hf.items():
            try:
                rc = rope_config_from_hf(cfg, seq_len=16, layer_type=lt)
            except ValueError as e:  # any refusal is fine (MLA layouts, ...)
                checked["refused"] += "partial_rotary_factor" in str(e)
                continue
            w, _ = rove.inv_freq(rc, hd)
            assert w.shape == hf_inv.shape, (mt, lt, rc.rotary_dim, hd, hf_inv.shape)
            np.testing.assert_allclose(w, hf_inv, rtol=RTOL, atol=0, err_msg=f"{mt} {lt}")
            checked["matched"] += 1
        checked["nested"] += subs[0][0] is not None
    # both kinds exist in every transformers 5 release this was written against
    assert checked["refused"] >= 20 and checked["matched"] >= 10 and checked["nested"] >= 2, \
        checked


@pytest.mark.parametrize("config", [
    lambda: T.GPT2Config(), lambda: T.OPTConfig(), lambda: T.BertConfig(),
    lambda: T.T5Config(), lambda: T.BloomConfig(), lambda: T.MptConfig(),
    lambda: T.FalconConfig(alibi=True)],
    ids=["gpt2", "opt", "bert", "t5", "bloom", "mpt", "falcon-alibi"])
def test_configs_without_rotary_embedding_are_refused(config):
    with pytest.raises(ValueError, match="ALiBi|no rope_parameters"):
        rove.RopeConfig.from_hf(config())


def test_odd_head_dim_is_named_as_such():
    with pytest.raises(ValueError, match="head_dim 65 is odd"):
        rope_config_from_hf(_llama({"rope_type": "default", "rope_theta": 1e4}), head_dim=65)
