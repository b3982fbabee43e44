# SPDX-License-Identifier: MIT
"""Attention backward: librove (rove.attention under torch.autograd, i.e.
rove_attention_backward) against PyTorch SDPA's CPU backward, in one run.

    python python/bench/bench_backward.py [--n 1024 2048] [--threads 1 2] [--runs 5]
                                          [--dtype float32|bfloat16|float16]

For each shape (causal; 12 x 64 and 8 x 128 heads) and thread count, times forward and
backward separately (median of --runs after one untimed round, rounds interleaved between
the two libraries) and prints a markdown table for librove without rotations (the
computation SDPA does), with RoPE and with RoVE, and SDPA: ms, backward / forward, and the
backward's GFLOP/s counted as FlashAttention-2 does (2.5x the causal forward's 4 n^2 d h / 2
flops). The FMA peak is not measured here: bench/ab_backward (C) prints it beside the same
figures for librove. --dtype gives q, k, v, dout of that type to both (librove: its
float32 backward on them widened, the gradients rounded back; SDPA: its own CPU kernels).
"""
import argparse
import statistics
import time

import torch

import rove


def timed(fn):
    t0 = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t0


def one_round(impl, q, k, v, do, threads):
    q, k, v = (x.detach().clone().requires_grad_() for x in (q, k, v))
    if impl.startswith("rove"):  # "rove-none" (the SDPA computation), "rove-rope", "rove-rove"
        rot = impl.split("-")[1]
        out, tf = timed(lambda: rove.attention(q, k, v, rotate=rot, causal=True,
                                               threads=threads))
    else:  # SDPA takes [b, h, s, d]; librove's bshd tensors as views
        out, tf = timed(lambda: torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True))
        out = out.transpose(1, 2)
    _, tb = timed(lambda: out.backward(do))
    return tf, tb


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=[1024, 2048, 4096])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    args = p.parse_args()
    dtype = getattr(torch, args.dtype)
    print(f"{args.dtype}\n")
    print("| n | heads x d | threads | impl | fwd ms | bwd ms | bwd/fwd | bwd GFLOP/s |")
    print("|---:|---|---:|---|---:|---:|---:|---:|")
    for n in args.n:
        for H, d in ((12, 64), (8, 128)):
            g = torch.Generator().manual_seed(n + H)
            q, k, v, do = (torch.randn(1, n, H, d, generator=g).to(dtype) for _ in range(4))
            for t in args.threads:
                torch.set_num_threads(t)
                res = {"rove-none": [], "sdpa": [], "rove-rope": [], "rove-rove": []}
                for impl in res:  # untimed: plans, workspaces, torch's first-backward imports
                    one_round(impl, q, k, v, do, t)
                for _ in range(args.runs):
                    for impl in res:
                        res[impl].append(one_round(impl, q, k, v, do, t))
                flops = 2.5 * 4.0 * n * n * d * H / 2
                for impl, r in res.items():
                    tf = statistics.median(x[0] for x in r)
                    tb = statistics.median(x[1] for x in r)
                    print(f"| {n} | {H} x {d} | {t} | {impl} | {tf * 1e3:.1f} | {tb * 1e3:.1f} | "
                          f"{tb / tf:.2f} | {flops / tb * 1e-9:.1f} |", flush=True)


if __name__ == "__main__":
    main()
