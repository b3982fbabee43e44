# SPDX-License-Identifier: MIT
"""rope_config_from_hf against transformers' own rotary embeddings (inv_freq, attention
scaling) for every rope type librove implements, and the fields it must refuse."""
from __future__ import annotations

import math

import numpy as np
import pytest

import torch  # noqa: E402  (no importorskip: a missing torch/transformers is a failure)
import transformers as T  # noqa: E402

import rove  # noqa: E402
from rove.hf_config import hf_attention_factor, rope_config_from_hf  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

import hf_models as H  # noqa: E402

RTOL = 2e-6  # transformers evaluates in float32, librove in double


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
    assert math.isclose(m, float(hf_scaling), rel_tol=1e-7), (m, hf_scaling)


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
    "mscale-alone": dict(rope_type="yarn", rope_theta=10000.0, factor=16.0, mscale=0.5,
                         original_max_position_embeddings=4096),  # HF ignores a lone mscale
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
    assert cfg.scaling == "yarn" and cfg.attention_factor == pytest.approx(m_hf, rel=1e-12)
    assert cfg.truncate == bool(rp.get("truncate", True))
    _check(cfg, 64, w_hf, m_hf)
    assert hf_attention_factor(config) == pytest.approx(m_hf, rel=1e-12)


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
    phi = H.phi3()
    L0 = phi.rope_parameters["original_max_position_embeddings"]
    for seq_len in (1, L0, L0 + 1, 100000):
        w_hf, m_hf = ROPE_INIT_FUNCTIONS["longrope"](phi, seq_len=seq_len)
        cfg = rope_config_from_hf(phi, seq_len=seq_len)
        _check(cfg, 96, w_hf, m_hf)
        assert cfg.freq_factors == tuple(phi.rope_parameters["long_factor" if seq_len > L0
                                                             else "short_factor"])


def test_longrope_without_attention_factor_is_plain_freq_factors():
    phi = H.phi3()
    phi.rope_parameters["attention_factor"] = 1.0
    cfg = rope_config_from_hf(phi, seq_len=10)
    assert cfg.scaling == "none" and cfg.freq_factors is not None
    _check(cfg, 96, *ROPE_INIT_FUNCTIONS["longrope"](phi, seq_len=10))


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
])
def test_refusals_name_the_field(what, config, kw, needle):
    with pytest.raises(ValueError, match=needle):
        rope_config_from_hf(config(), **kw)


def test_interleaved_pairing_families():
    assert rope_config_from_hf(T.CohereConfig(hidden_size=256, num_attention_heads=4)).pairing \
        == "interleaved"
    ds = T.DeepseekV3Config(hidden_size=256, num_attention_heads=4, qk_rope_head_dim=64,
                            rope_interleave=True)
    assert rope_config_from_hf(ds, head_dim=64).pairing == "interleaved"
    assert rope_config_from_hf(H.llama3(), pairing="interleaved").pairing == "interleaved"
