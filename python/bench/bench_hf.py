# SPDX-License-Identifier: MIT
"""End-to-end benchmark: a Llama-shaped HF model with attn_implementation "rove" vs "sdpa".

    python python/bench/bench_hf.py [--n 2048] [--decode 128] [--threads 1,2] [--apply]

Model (random weights, from_config, float32): 12 layers x 768, 12 query heads and 4 KV
heads (GQA 3:1) of head_dim 64, MLP 2048, vocab 32000, RoPE theta 500000 (no scaling).
For each thread count (torch.set_num_threads and librove's threads alike) and attention:
prefill of n tokens (logits of the last token only, as generate() does), then 128 greedy
decode steps over the growing DynamicCache, timed as a whole. Attention time is measured
by wrapping the registered attention function (and the mask function, once per forward)
with a timer, so "attention %" is the share of the model's wall time spent inside the
attention call (for sdpa: torch's SDPA incl. its GQA handling; for rove: librove plus the
Python glue). transformers applies RoPE itself in both, outside the attention call.
--apply adds rove.hf.apply(model, "rope") and ("rove"), where librove also rotates.
Prints a markdown table: best of --repeat (default 2) interleaved runs of each variant.
"""
from __future__ import annotations

import argparse
import time

import torch
import transformers as T
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

import rove
import rove.hf as RH

T.logging.set_verbosity_error()

_timer = {"attn": 0.0, "mask": 0.0, "calls": 0}


def _timed(fn, key):
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _timer[key] += time.perf_counter() - t
            if key == "attn":
                _timer["calls"] += 1
    return wrapper


def register_timed():
    RH.register()
    AttentionInterface.register("sdpa_timed", _timed(sdpa_attention_forward, "attn"))
    AttentionMaskInterface.register("sdpa_timed", _timed(sdpa_mask, "mask"))
    AttentionInterface.register("rove_timed", _timed(RH.rove_attention_forward, "attn"))
    AttentionMaskInterface.register("rove_timed", _timed(RH.rove_mask, "mask"))
    # apply() needs the implementation to be named "rove": time through the same wrappers
    AttentionInterface.register("rove", _timed(RH.rove_attention_forward, "attn"))
    AttentionMaskInterface.register("rove", _timed(RH.rove_mask, "mask"))


def build(impl, state=None):
    cfg = T.LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048,
                        num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=4,
                        head_dim=64, max_position_embeddings=8192,
                        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
                        pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    model = T.AutoModelForCausalLM.from_config(cfg, attn_implementation=impl).eval()
    if state is not None:
        model.load_state_dict(state)
    return model


def reset():
    _timer.update(attn=0.0, mask=0.0, calls=0)


def measure(model, ids, n_decode):
    """One prefill + n_decode greedy steps: (prefill s, its attention s, decode s, its
    attention s, tokens)."""
    with torch.no_grad():
        reset()
        t = time.perf_counter()
        out = model(ids, use_cache=True, logits_to_keep=1)
        tp = time.perf_counter() - t
        ta_p = _timer["attn"] + _timer["mask"]
        cache = out.past_key_values
        tok = out.logits[:, -1:].argmax(-1)
        toks = [tok]
        reset()
        t = time.perf_counter()
        for _ in range(n_decode):
            out = model(tok, cache=cache, use_cache=True)
            tok = out.logits[:, -1:].argmax(-1)
            toks.append(tok)
        td = time.perf_counter() - t
        ta_d = _timer["attn"] + _timer["mask"]
    return tp, ta_p, td, ta_d, torch.cat(toks, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--apply", action="store_true", help="also rove.hf.apply rope / rove")
    args = ap.parse_args()
    register_timed()
    ids = torch.randint(3, 32000, (1, args.n), generator=torch.Generator().manual_seed(0))
    state = build("sdpa").state_dict()
    variants = [("sdpa", lambda: build("sdpa_timed", state)),
                ("rove", lambda: build("rove_timed", state))]
    def applied(mode):
        model = RH.apply(build("eager", state), mode)
        register_timed()  # apply() re-registered the plain "rove" functions
        return model

    if args.apply:
        variants += [("apply rope", lambda: applied("rope")),
                     ("apply rove", lambda: applied("rove"))]
    info = rove.info()
    print(f"librove {rove.__version__} ({info['best_isa']}), torch {torch.__version__} "
          f"({torch.backends.cpu.get_cpu_capability()}), transformers {T.__version__}; "
          f"Llama 12 x 768, 12:4 heads x 64, n = {args.n}, {args.decode} decode steps\n")
    rows = []
    for th in [int(x) for x in args.threads.split(",")]:
        torch.set_num_threads(th)
        RH.set_threads(th)
        models = [(name, make()) for name, make in variants]
        best = {}
        # Interleaved repeats, best of each: other load on the machine hits all variants.
        for _ in range(args.repeat):
            for name, model in models:
                tp, ta_p, td, ta_d, tokens = measure(model, ids, args.decode)
                b = best.setdefault(name, [tp, ta_p, td, ta_d, tokens])
                if tp < b[0]:
                    b[0:2] = [tp, ta_p]
                if td < b[2]:
                    b[2:4] = [td, ta_d]
        ref_tokens = best["sdpa"][4]
        for name, _ in models:
            tp, ta_p, td, ta_d, tokens = best[name]
            same = "ref" if name == "sdpa" else ("-" if name == "apply rove" else
                                                 ("yes" if torch.equal(tokens, ref_tokens) else "no"))
            rows.append((th, name, tp, ta_p, td, ta_d, same))
        del models
        print(f"  done: {th} thread(s)", flush=True)
    print()
    print("| threads | attention | prefill s | attn % of prefill | decode ms/step | "
          "attn % of decode | tokens = sdpa |")
    print("|---|---|---|---|---|---|---|")
    base = {}
    for th, name, tp, ta_p, td, ta_d, same in rows:
        step = td / args.decode * 1e3
        if name == "sdpa":
            base[th] = (tp, step)
        sp = f" ({base[th][0] / tp:.2f}x)" if name != "sdpa" else ""
        sd = f" ({base[th][1] / step:.2f}x)" if name != "sdpa" else ""
        print(f"| {th} | {name} | {tp:.2f}{sp} | {100 * ta_p / tp:.0f} % | {step:.1f}{sd} | "
              f"{100 * ta_d / td:.0f} % | {same} |")


if __name__ == "__main__":
    main()
