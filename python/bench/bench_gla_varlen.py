# SPDX-License-Identifier: MIT
"""GLA over packed sequences: rove.gla(..., cu_seqlens=) against one rove.gla call per
sequence (what a caller without varlen does: a loop) and against one dense call over a
single sequence of the same total tokens (GLA's work is linear in the tokens, so that is
the same work), forward and forward + backward, in one run.

    python python/bench/bench_gla_varlen.py [--threads 1 2] [--runs 5]

Two sets (fixed seed): 8 sequences of 64..4096 tokens (issue 17's lengths) and 64 of
16..256. 12 heads x 64 x 64, chunk 64, Selective angles with RoVE's rotations, initial
states. The calls of a row are timed in interleaved rounds (medians of --runs). The
forwards write into an output allocated once (out=; the loop into its slices of it): a
fresh 38 MB output per call faults its pages in on every call (~2 us a page in a VM), which
a loop's smaller outputs, reused from the heap, do not. The backward rows (autograd, which
takes no out=) allocate. Prints a markdown table (ms; tokens/s of the packed call in
Mtok/s).
"""
import argparse
import statistics
import time

import numpy as np
import torch

import rove


def timed(fns, runs):
    ts = [[] for _ in fns]
    for r in range(runs + 1):
        for f, t in zip(fns, ts):
            t0 = time.perf_counter()
            f()
            if r:
                t.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in ts]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    H, K, V = 12, 64, 64
    torch.set_num_threads(1)
    print("| set | threads | pass | packed ms | Mtok/s | loop ms | loop / packed | dense ms "
          "| packed / dense |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for name, count, lo, hi in (("8 x 64..4096", 8, 64, 4096), ("64 x 16..256", 64, 16, 256)):
        g = np.random.default_rng(2026)
        lens = g.integers(lo, hi + 1, count)
        T = int(lens.sum())
        cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        gen = torch.Generator().manual_seed(2026)
        r = lambda *s: torch.rand(*s, generator=gen) * 2 - 1  # noqa: E731
        q, k, v = r(1, T, H, K), r(1, T, H, K), r(1, T, H, V)
        gd = -torch.rand(1, T, H, K, generator=gen)
        ang = (torch.rand(1, T, H, K // 2, generator=gen, dtype=torch.float64) * 40 - 20)
        s0 = r(count, H, K, V)
        dout = r(1, T, H, V)
        out = torch.empty(1, T, H, V)
        for thr in args.threads:
            kw = dict(rotate="rove", threads=thr)
            leaves = [x.clone().requires_grad_() for x in (q, k, v, gd)]

            def packed():
                return rove.gla(q, k, v, gd, angles=ang, initial_state=s0, cu_seqlens=cu,
                                out=out, **kw)

            def loop():
                for i in range(count):
                    a, b = int(cu[i]), int(cu[i + 1])
                    rove.gla(q[:, a:b], k[:, a:b], v[:, a:b], gd[:, a:b], angles=ang[:, a:b],
                             initial_state=s0[i:i + 1], out=out[:, a:b], **kw)

            def dense():
                return rove.gla(q, k, v, gd, angles=ang, initial_state=s0[:1], out=out, **kw)

            def packed_bwd():
                o = rove.gla(*leaves, angles=ang, initial_state=s0, cu_seqlens=cu, **kw)
                o.backward(dout)

            def loop_bwd():
                for i in range(count):
                    a, b = int(cu[i]), int(cu[i + 1])
                    o = rove.gla(*(x[:, a:b] for x in leaves), angles=ang[:, a:b],
                                 initial_state=s0[i:i + 1], **kw)
                    o.backward(dout[:, a:b])

            def dense_bwd():
                o = rove.gla(*leaves, angles=ang, initial_state=s0[:1], **kw)
                o.backward(dout)

            for pname, fns in (("forward", (packed, loop, dense)),
                               ("fwd + bwd", (packed_bwd, loop_bwd, dense_bwd))):
                tp, tl, td = timed(fns, args.runs)
                print(f"| {name} | {thr} | {pname} | {tp * 1e3:.1f} | {T / tp / 1e6:.2f} | "
                      f"{tl * 1e3:.1f} | {tl / tp:.2f} | {td * 1e3:.1f} | {tp / td:.3f} |")


if __name__ == "__main__":
    main()
