# SPDX-License-Identifier: MIT
"""A small Hugging Face Llama model run three ways through librove, against PyTorch SDPA.

    python examples/hf_rove.py [--layers 4] [--prompt 256] [--new 32] [--threads 2]

1. attn_implementation="rove" (rove.hf.register()): transformers rotates q and k, librove
   does the attention. Must agree with "sdpa".
2. rove.hf.apply(model, "rope"): librove rotates too (keys enter the cache rotated, a
   decode step rotates only its own token). Must agree with "sdpa".
3. rove.hf.apply(model, "rove"): the model's RoVE variant (values rotated by their key
   positions, the output rotated back) -- a different model, so only its timing is shown,
   with a check that generate() agrees with a full recompute.

Prints the largest relative logit difference, whether 32 greedy tokens are identical, and
prefill / decode timings. Random weights (from_config), float32, CPU.
"""
from __future__ import annotations

import argparse
import time

import torch
import transformers as T

import rove
import rove.hf


def build(args, impl, state=None):
    cfg = T.LlamaConfig(vocab_size=4096, hidden_size=512, intermediate_size=1536,
                        num_hidden_layers=args.layers, num_attention_heads=8,
                        num_key_value_heads=2, head_dim=64, max_position_embeddings=131072,
                        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                                         "factor": 8.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0,
                                         "original_max_position_embeddings": 8192},
                        pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    model = T.AutoModelForCausalLM.from_config(cfg, attn_implementation=impl).eval()
    if state is not None:
        model.load_state_dict(state)
    return model


def timed(fn, repeat=2):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return out, best


def run(model, ids, new):
    with torch.no_grad():
        logits, t_prefill = timed(lambda: model(ids).logits)
        gen, t_gen = timed(lambda: model.generate(ids, max_new_tokens=new, min_new_tokens=new,
                                                  do_sample=False, pad_token_id=0))
    return logits, gen, t_prefill, t_gen


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    for name in ("layers", "prompt", "new", "threads"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1")
    torch.set_num_threads(args.threads)
    rove.hf.set_threads(args.threads)
    rove.hf.register()
    print(f"librove {rove.__version__} ({rove.info()['best_isa']}), torch {torch.__version__}, "
          f"transformers {T.__version__}, {args.threads} thread(s)")
    ref = build(args, "sdpa")
    state = ref.state_dict()
    ids = torch.randint(3, 4096, (1, args.prompt), generator=torch.Generator().manual_seed(1))
    l_ref, g_ref, tp_ref, tg_ref = run(ref, ids, args.new)
    rows = [("sdpa (transformers)", 0.0, True, tp_ref, tg_ref)]
    variants = [
        ("attn_implementation='rove'", lambda: build(args, "rove", state)),
        ("rove.hf.apply(mode='rope')", lambda: rove.hf.apply(build(args, "eager", state), "rope")),
        ("rove.hf.apply(mode='rove')", lambda: rove.hf.apply(build(args, "eager", state), "rove")),
    ]
    for name, make in variants:
        model = make()
        logits, gen, tp, tg = run(model, ids, args.new)
        if name.endswith("'rove')"):
            with torch.no_grad():  # generate() vs a full recompute of the same model
                full = model(gen[:, :-1], use_cache=False).logits[:, args.prompt - 1:]
            rows.append((name + " [RoVE model]", float("nan"),
                         bool(torch.equal(full.argmax(-1), gen[:, args.prompt:])), tp, tg))
            continue
        rel = ((logits - l_ref).abs().max() / l_ref.abs().max()).item()
        rows.append((name, rel, bool(torch.equal(gen, g_ref)), tp, tg))
    print(f"\nLlama-3-style model, {args.layers} layers x 512, 8:2 heads x 64, prompt "
          f"{args.prompt}, {args.new} greedy tokens\n")
    print("| attention | max rel. logit diff vs sdpa | greedy tokens equal | prefill ms | "
          "generate ms/token |")
    print("|---|---|---|---|---|")
    for name, rel, eq, tp, tg in rows:
        rel_s = "-" if rel != rel else f"{rel:.1e}"
        eq_s = ("yes" if eq else "NO") if "[RoVE" not in name else \
            ("cache == full recompute" if eq else "MISMATCH vs full recompute")
        print(f"| {name} | {rel_s} | {eq_s} | {tp * 1e3:.1f} | {tg * 1e3 / args.new:.2f} |")
    bad = [r for r in rows if not r[2] or (r[1] == r[1] and r[1] > 1e-4)]
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
