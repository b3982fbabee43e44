# SPDX-License-Identifier: MIT
"""Varlen prefill: rove.attention_varlen over packed sequences against one dense
rove.attention call of about the same causal work (n = sqrt(sum of len^2): the same number
of query-key pairs, so the same flops, but fewer tokens -- 5349 against 12526 in the
8-sequence set, 1213 against 8701 in the 64 -- so less of the per-token work: the
rotations, the K / V packing and the finish), against a dense batch of as many equal
sequences with the same work (n = sqrt(sum of len^2 / count)), and against one
rove.attention call per sequence, in one run.

    python python/bench/bench_varlen.py [--threads 1 2] [--runs 5]

The four calls of a row are timed in interleaved rounds (medians of --runs), each
writing into an output buffer allocated once (out=), as a server reuses its buffers: a
fresh output per call would time NumPy's allocator, and unequally (glibc maps a fresh
block above 32 MB, the packed output of the 8-sequence set, and zeroes its pages on every
call, while the smaller dense outputs are reused from the heap: 1-5 % of the varlen time
in session 19's runs). --fresh restores fresh outputs. Issue 17's
target is against the one dense sequence; the dense batch shows how much of the gap is the
sequences' lengths (short sequences run below a long one's rate in any layout, issue 15)
rather than the packing.

Two sets (fixed seed): 8 sequences of 64..4096 tokens (the issue's), and 64 short ones of
16..256 (chat prompts / batched serving). 12 x 64 heads, causal, RoVE. GFLOP/s counted as
4 d h n^2 / 2 per causal sequence (QK^T and PV). Prints a markdown table.
"""
import argparse
import statistics
import time

import numpy as np

import rove


def timed(fns, runs):
    """Median seconds of each of fns, timed in interleaved rounds (one call of each per
    round, after one warm-up round), so that a burst of noise on this shared machine
    falls on all of them alike."""
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
    p.add_argument("--fresh", action="store_true", help="a fresh output per call")
    args = p.parse_args()
    H, d = 12, 64
    print("| set | threads | varlen ms | varlen GFLOP/s | per-seq loop ms | dense ms | dense GFLOP/s"
          " | varlen / dense | dense batch GFLOP/s | varlen / dense batch |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, count, lo, hi in (("8 x 64..4096", 8, 64, 4096), ("64 x 16..256", 64, 16, 256)):
        g = np.random.default_rng(2026)
        lens = g.integers(lo, hi + 1, count)
        n_eq = int(round(float(np.sqrt((lens.astype(np.float64) ** 2).sum()))))
        cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        T = int(cu[-1])
        q, k, v = (g.standard_normal((T, H, d)).astype(np.float32) for _ in range(3))
        qd, kd, vd = (g.standard_normal((1, n_eq, H, d)).astype(np.float32) for _ in range(3))
        n_b = int(round(float(np.sqrt((lens.astype(np.float64) ** 2).sum() / count))))
        qb, kb, vb = (g.standard_normal((count, n_b, H, d)).astype(np.float32) for _ in range(3))
        fl_var = sum(4.0 * d * H * int(n) ** 2 / 2 for n in lens)
        fl_den = 4.0 * d * H * n_eq ** 2 / 2
        fl_bat = 4.0 * d * H * count * n_b ** 2 / 2
        ov, od, ob = np.empty_like(q), np.empty_like(qd), np.empty_like(qb)
        keep = (lambda o: None) if args.fresh else (lambda o: o)  # out=None: a fresh one
        for t in args.threads:
            def loop():
                for s in range(count):
                    sl = slice(cu[s], cu[s + 1])
                    rove.attention(q[sl], k[sl], v[sl], threads=t, out=keep(ov[sl]))
            mv, ml, md, mb = timed([
                lambda: rove.attention_varlen(q, k, v, cu, cu, threads=t, out=keep(ov)), loop,
                lambda: rove.attention(qd, kd, vd, threads=t, out=keep(od)),
                lambda: rove.attention(qb, kb, vb, threads=t, out=keep(ob))], args.runs)
            gv, gd, gb = fl_var / mv * 1e-9, fl_den / md * 1e-9, fl_bat / mb * 1e-9
            print(f"| {name} (total {T}, dense n {n_eq}, batch {count} x {n_b}) | {t} | "
                  f"{mv * 1e3:.1f} | {gv:.1f} | {ml * 1e3:.1f} | {md * 1e3:.1f} | {gd:.1f} | "
                  f"{gv / gd:.3f} | {gb:.1f} | {gv / gb:.3f} |", flush=True)


if __name__ == "__main__":
    main()
