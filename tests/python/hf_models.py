# SPDX-License-Identifier: MIT
"""Small transformers configs of real model families for the HF tests (test_hf*.py).

Width and depth are small (2 layers, hidden 128-512) so that the tests run in seconds, but
head_dim, GQA ratio, rope_theta, the scaling type and its parameters, partial rotary,
softcap and query_pre_attn_scalar are those of the named real checkpoints. Sliding windows
are shrunk (to 16) so that a 40-token prompt plus 32 generated tokens crosses them.
"""
from __future__ import annotations

import transformers as T

VOCAB = 512
WINDOW = 16

_COMMON = dict(vocab_size=VOCAB, num_hidden_layers=2, pad_token_id=0, bos_token_id=1,
               eos_token_id=2, tie_word_embeddings=False)


def llama3():
    # Llama-3.1-8B: head_dim 128, GQA 4:1, theta 500000, llama3 scaling (8, 1, 4, 8192)
    return T.LlamaConfig(**_COMMON, hidden_size=256, intermediate_size=512, num_attention_heads=4,
                         num_key_value_heads=1, head_dim=128, max_position_embeddings=131072,
                         rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                                          "factor": 8.0, "low_freq_factor": 1.0,
                                          "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 8192})


def llama_yarn():
    # YaRN as DeepSeek-V3 derives its factor (mscale / mscale_all_dim) and gpt-oss's
    # truncate=False: factor 40, L0 4096, theta 150000, head_dim 64
    return T.LlamaConfig(**_COMMON, hidden_size=256, intermediate_size=512, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=64, max_position_embeddings=163840,
                         rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0,
                                          "factor": 40.0, "original_max_position_embeddings": 4096,
                                          "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0,
                                          "mscale_all_dim": 0.707, "truncate": False})


def mistral():
    # Mistral-7B-v0.1: head_dim 128, GQA 4:1, theta 10000, sliding window (4096 -> 16)
    return T.MistralConfig(**_COMMON, hidden_size=256, intermediate_size=512,
                           num_attention_heads=4, num_key_value_heads=1, head_dim=128,
                           sliding_window=WINDOW, max_position_embeddings=32768,
                           rope_parameters={"rope_type": "default", "rope_theta": 10000.0})


def qwen2():
    # Qwen2-0.5B: head_dim 64, 14:2 heads (GQA 7:1), theta 1e6, qkv bias
    return T.Qwen2Config(**_COMMON, hidden_size=448, intermediate_size=512, num_attention_heads=7,
                         num_key_value_heads=1, max_position_embeddings=32768,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})


def qwen3():
    # Qwen3-0.6B: head_dim 128, 16:8 heads (GQA 2:1), theta 1e6, q/k RMSNorm
    return T.Qwen3Config(**_COMMON, hidden_size=256, intermediate_size=512, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=128, max_position_embeddings=40960,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})


def gemma2():
    # Gemma-2-27B: head_dim 128, query_pre_attn_scalar 144, softcaps 50 / 30, GQA 2:1,
    # alternating sliding (4096 -> 16) / full layers
    return T.Gemma2Config(**_COMMON, hidden_size=256, intermediate_size=512, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=128, query_pre_attn_scalar=144,
                          attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                          sliding_window=WINDOW, max_position_embeddings=8192,
                          layer_types=["sliding_attention", "full_attention"],
                          rope_parameters={"rope_type": "default", "rope_theta": 10000.0})


def gemma3():
    # Gemma-3-4B: head_dim 256, query_pre_attn_scalar 256, q/k norm, local rope 10000 on
    # sliding layers (1024 -> 16), global 1e6 with linear factor 8 on full layers
    return T.Gemma3TextConfig(**_COMMON, hidden_size=256, intermediate_size=512,
                              num_attention_heads=2, num_key_value_heads=1, head_dim=256,
                              query_pre_attn_scalar=256, sliding_window=WINDOW,
                              max_position_embeddings=131072,
                              layer_types=["sliding_attention", "full_attention"],
                              rope_parameters={
                                  "sliding_attention": {"rope_type": "default",
                                                        "rope_theta": 10000.0},
                                  "full_attention": {"rope_type": "linear", "factor": 8.0,
                                                     "rope_theta": 1000000.0}})


def gpt_neox():
    # Pythia-160m: head_dim 64, rotary_pct 0.25 (16 rotated dims), theta 10000
    return T.GPTNeoXConfig(**_COMMON, hidden_size=256, intermediate_size=512,
                           num_attention_heads=4, max_position_embeddings=2048,
                           rotary_pct=0.25, rotary_emb_base=10000)


def gptj():
    # GPT-J-6B: head_dim 256, rotary_dim 64 (interleaved pairs), theta 10000
    return T.GPTJConfig(vocab_size=VOCAB, n_layer=2, n_embd=512, n_head=2, rotary_dim=64,
                        n_positions=2048, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                        tie_word_embeddings=False)


def phi3():
    # Phi-3-mini-128k / Phi-4-mini style: head_dim 96, partial_rotary_factor 0.75 (72 rotated
    # dims), longrope with distinct short / long factors, L0 4096 -> 131072 (attention factor
    # sqrt(1 + ln 32 / ln 4096) ~ 1.19), GQA 2:1
    n = 36
    return T.Phi3Config(**_COMMON, hidden_size=192, intermediate_size=512, num_attention_heads=2,
                        num_key_value_heads=1, max_position_embeddings=131072,
                        original_max_position_embeddings=4096, partial_rotary_factor=0.75,
                        rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                                         "partial_rotary_factor": 0.75,
                                         "short_factor": [1.0 + 0.05 * i for i in range(n)],
                                         "long_factor": [1.0 + 1.5 * i for i in range(n)]})


FAMILIES = {
    "llama3": llama3, "llama_yarn": llama_yarn, "mistral": mistral, "qwen2": qwen2,
    "qwen3": qwen3, "gemma2": gemma2, "gemma3": gemma3, "gpt_neox": gpt_neox, "gptj": gptj,
    "phi3": phi3,
}
