# SPDX-License-Identifier: MIT
"""GLA backward: librove (rove.gla under torch.autograd, i.e. rove_gla_backward) against
PyTorch autograd through a chunked GLA written in torch ops, in one run.

    python python/bench/bench_gla_backward.py [--n 4096] [--threads 1 2] [--runs 5]

For each shape (12 x 64 and 8 x 128 heads, K = V) and thread count, times the forward and
the backward separately (median of --runs, the two implementations interleaved) and prints
a markdown table: ms and backward / forward, librove with RoVE rotations by selective
angles and without, the torch reference without (the usual chunked form of
flash-linear-attention's torch code: per chunk of 64, q e^{b}, k e^{-b}, a masked score
matrix, the state carried; decays in [-0.05, 0] keep its e^{-b} finite).
"""
import argparse
import statistics
import time

import torch

import rove


def torch_chunk_gla(q, k, v, g, chunk=64):
    """[b, t, h, d] tensors -> out; torch ops only (autograd differentiates it)."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    q, k, v, g = (x.transpose(1, 2) for x in (q, k, v, g))  # [b, h, t, d]
    q = q * K ** -0.5
    S = q.new_zeros(B, H, K, V)
    mask = torch.ones(chunk, chunk, dtype=torch.bool).tril()
    outs = []
    for t0 in range(0, T, chunk):
        qc, kc, vc, gc = (x[:, :, t0:t0 + chunk] for x in (q, k, v, g))
        b = gc.cumsum(2)
        qd, kd = qc * b.exp(), kc * (-b).exp()
        n = qc.shape[2]
        A = (qd @ kd.transpose(-1, -2)).masked_fill(~mask[:n, :n], 0.0)
        outs.append(A @ vc + qd @ S)
        bn = b[:, :, -1:]
        S = S * bn.transpose(-1, -2).exp() + (kc * (bn - b).exp()).transpose(-1, -2) @ vc
    return torch.cat(outs, 2).transpose(1, 2)


def timed(fn):
    t0 = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t0


def one_round(impl, q, k, v, g, ang, do, threads):
    q, k, v, g = (x.detach().clone().requires_grad_() for x in (q, k, v, g))
    if impl == "torch":
        out, tf = timed(lambda: torch_chunk_gla(q, k, v, g))
    else:
        a = ang if impl == "rove-rove" else None
        out, tf = timed(lambda: rove.gla(q, k, v, g, angles=a, rotate="rove", threads=threads))
    _, tb = timed(lambda: out.backward(do))
    return tf, tb


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=[4096])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    print("| n | heads x d | threads | impl | fwd ms | bwd ms | bwd/fwd |")
    print("|---:|---|---:|---|---:|---:|---:|")
    for n in args.n:
        for H, d in ((12, 64), (8, 128)):
            gen = torch.Generator().manual_seed(n + H)
            q, k, v, do = (torch.randn(1, n, H, d, generator=gen) for _ in range(4))
            g = -0.05 * torch.rand(1, n, H, d, generator=gen)
            ang = torch.rand(1, n, H, d // 2, generator=gen, dtype=torch.float64) * 100
            for t in args.threads:
                torch.set_num_threads(t)
                res = {"rove-none": [], "rove-rove": [], "torch": []}
                for _ in range(args.runs):
                    for impl in res:
                        res[impl].append(one_round(impl, q, k, v, g, ang, do, t))
                for impl, r in res.items():
                    tf = statistics.median(x[0] for x in r)
                    tb = statistics.median(x[1] for x in r)
                    print(f"| {n} | {H} x {d} | {t} | {impl} | {tf * 1e3:.1f} | {tb * 1e3:.1f} | "
                          f"{tb / tf:.2f} |", flush=True)


if __name__ == "__main__":
    main()
