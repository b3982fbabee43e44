# SPDX-License-Identifier: MIT
"""Python call overhead of rove.attention against the bare C call (issue 12, item 5).

    python python/bench/bench_overhead.py [--n 1024] [--heads 12] [--dim 64] [--runs 41]

Times, interleaved round by round (so drifts of clock and load hit every variant alike):
  C        rove_attention_forward through ctypes with args built once (the floor)
  numpy    rove.attention(q, k, v) on numpy arrays (plan from the cache, fresh output)
  numpy+out  the same with out= (no allocation)
  torch    rove.attention on torch tensors
  torch bhsd  HF-style [b, h, s, d] views (x.view(b, s, h, d).transpose(1, 2))
  plan     Plan.attention with a prebuilt plan
and prints medians and the overhead against C as a markdown table. A decode-shaped call
(q_len 1) shows the fixed cost in microseconds, and a last table times the Python side
alone (rove_attention_forward replaced by a no-op), which does not depend on the load of
the machine the way the end-to-end medians do.
"""
import argparse
import ctypes
import statistics
import time

import numpy as np

import rove
from rove import _lib


def c_call(plan, q, k, v, out):
    a = _lib.AttentionArgs()
    a.batch, a.q_len, a.kv_len = q.shape[0], q.shape[1], k.shape[1]
    a.q, a.k, a.v, a.out = (x.ctypes.data for x in (q, k, v, out))
    fn, p, ref = _lib.lib.rove_attention_forward, plan._ptr, ctypes.byref(a)

    def run():
        assert fn(p, ref) == 0
    return run


def variants(n_q, n_kv, H, d, torch):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, n_q, H, d), dtype=np.float32)
    k, v = (rng.standard_normal((1, n_kv, H, d), dtype=np.float32) for _ in range(2))
    out = np.empty_like(q)
    plan = rove.get_plan(H, H, d)  # the plan rove.attention uses for these shapes
    vs = {"C": c_call(plan, q, k, v, out),
          "numpy": lambda: rove.attention(q, k, v),
          "numpy+out": lambda: rove.attention(q, k, v, out=out),
          "plan": lambda: plan.attention(q, k, v)}
    if torch is not None:
        tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
        bq, bk, bv = (x.transpose(1, 2) for x in (tq, tk, tv))
        vs["torch"] = lambda: rove.attention(tq, tk, tv)
        vs["torch bhsd"] = lambda: rove.attention(bq, bk, bv, layout="bhsd")
    return vs


def measure(vs, runs):
    for f in vs.values():  # warm up: plans, workspaces, pages
        f(), f()
    times = {name: [] for name in vs}
    names = list(vs)
    for r in range(runs):
        for name in names[r % len(names):] + names[: r % len(names)]:
            t0 = time.perf_counter()
            vs[name]()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def table(title, med, unit_ms=True):
    base = med["C"]
    print(f"\n{title}\n")
    print("| call | median | overhead vs C |")
    print("|---|---:|---:|")
    for name, t in med.items():
        val = f"{t * 1e3:.3f} ms" if unit_ms else f"{t * 1e6:.1f} us"
        over = "" if name == "C" else f"{(t - base) / base * 100:+.2f} % ({(t - base) * 1e6:+.1f} us)"
        print(f"| {name} | {val} | {over} |")


def python_side(n_kv, H, d, torch, runs=2000):
    """Best-of-5 mean time of each wrapper with the C entry point replaced by a no-op."""
    vs = variants(1, n_kv, H, d, torch)
    del vs["C"]
    real = _lib.lib.rove_attention_forward
    _lib.lib.rove_attention_forward = lambda plan, args: 0
    try:
        res = {}
        for name, f in vs.items():
            f()
            best = float("inf")
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(runs):
                    f()
                best = min(best, (time.perf_counter() - t0) / runs)
            res[name] = best
    finally:
        _lib.lib.rove_attention_forward = real
    print("\nPython side alone (C call replaced by a no-op; q_len 1)\n")
    print("| call | time per call |")
    print("|---|---:|")
    for name, t in res.items():
        print(f"| {name} | {t * 1e6:.1f} us |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--runs", type=int, default=41)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    info = rove.info()
    print(f"rove {rove.__version__}, isa {info['best_isa']}, {info['default_threads']} threads, "
          f"numpy {np.__version__}" + (f", torch {torch.__version__}" if torch else ""))
    n, H, d = args.n, args.heads, args.dim
    table(f"Prefill: causal RoVE, n = {n}, {H} x {d}, batch 1 ({args.runs} interleaved runs)",
          measure(variants(n, n, H, d, torch), args.runs))
    table(f"Decode: q_len 1 against {n} keys, {H} x {d} (the fixed cost per call)",
          measure(variants(1, n, H, d, torch), args.runs * 20), unit_ms=False)
    python_side(n, H, d, torch)


if __name__ == "__main__":
    main()
