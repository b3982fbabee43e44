# SPDX-License-Identifier: MIT
"""Varlen prefill: rove.attention_varlen over 8 packed sequences of lengths drawn from
64..4096 (fixed seed) against one dense rove.attention call of about the same causal work
(n = sqrt(sum of len^2)), in one run.

    python python/bench/bench_varlen.py [--threads 1 2] [--runs 5]

12 x 64 heads, causal, RoVE. GFLOP/s counted as 4 d h n^2 / 2 per causal sequence (QK^T
and PV). Prints a markdown table: ms, GFLOP/s, varlen / dense, 2 threads / 1.
"""
import argparse
import statistics
import time

import numpy as np

import rove


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    g = np.random.default_rng(2026)
    lens = g.integers(64, 4097, 8)
    H, d = 12, 64
    n_eq = int(round(float(np.sqrt((lens.astype(np.float64) ** 2).sum()))))
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    T = int(cu[-1])
    q, k, v = (g.standard_normal((T, H, d)).astype(np.float32) for _ in range(3))
    qd, kd, vd = (g.standard_normal((1, n_eq, H, d)).astype(np.float32) for _ in range(3))
    fl_var = sum(4.0 * d * H * int(n) ** 2 / 2 for n in lens)
    fl_den = 4.0 * d * H * n_eq ** 2 / 2
    print(f"lengths {sorted(int(x) for x in lens)} (total {T}); dense n = {n_eq}")
    print("| threads | varlen ms | varlen GFLOP/s | dense ms | dense GFLOP/s | varlen / dense |")
    print("|---:|---:|---:|---:|---:|---:|")
    base = {}
    for t in args.threads:
        tv, td = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            rove.attention_varlen(q, k, v, cu, cu, threads=t)
            tv.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            rove.attention(qd, kd, vd, threads=t)
            td.append(time.perf_counter() - t0)
        mv, md = statistics.median(tv), statistics.median(td)
        gv, gd = fl_var / mv * 1e-9, fl_den / md * 1e-9
        base.setdefault("v", mv)
        print(f"| {t} | {mv * 1e3:.1f} | {gv:.1f} | {md * 1e3:.1f} | {gd:.1f} | {gv / gd:.3f} |"
              f" (varlen {base['v'] / mv:.2f}x the first thread count)", flush=True)


if __name__ == "__main__":
    main()
