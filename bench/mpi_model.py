#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Scale model of librove_mpi (docs/mpi.md): ring prefill and sharded-cache decode.

Takes measured per-rank numbers (or reads them from bench/mpi_bench's "result" lines) and
predicts times and speedups for P ranks at a long context (default 1M tokens):

  python3 bench/mpi_model.py --bench mpi_bench.log [--link-gbs 25 --latency-us 2]
  python3 bench/mpi_model.py --gflops 45 --mem-gbs 10 --link-gbs 12.5 --latency-us 2

Ring prefill, per step (rank r holds its q shard of s = n/P tokens and one K/V block of s
tokens; zig-zag makes every step's tile exactly half visible under the causal mask):
  compute   t_c = 4 H d (s^2 / 2) / F          (QK^T and PV: 2 flops per multiply-add)
  merge     t_m = s H d 8 B x 3 / M            (read/write the double accumulator)
  block     b   = s (2 Hkv d e + 4) bytes      (K and V of e bytes per element, int32 pos)
  transfer  t_x = alpha + b / beta
  overlap   t_x <= t_c + t_m: the block moves while the tile computes
  step      max(t_c + t_m, t_x); total = (P - 1) steps + the last step's compute
            + 3 allreduces and a communicator duplicate (each ~ 2 log2(P) alpha)
Contiguous split: the last rank's queries see every earlier block in full (2 t_c per step)
and nobody waits for it, so its P - 1 full tiles plus its half diagonal set the time
(speedup P^2 / (2P - 1) ~ P/2 at best). One rank: T1 = 4 H d (n^2 / 2) / F.

Sharded decode, one step with one query row over K keys:
  local read   t_r = c0 + (K/P) 2 Hkv d e / M  (c0: fixed cost of one librove call)
  collectives  agreement allreduce, comm dup: 2 log2(P) alpha each (the dup also costs
               dup_us locally: Open MPI sets up a communicator); query broadcast,
               record reduction, result broadcast: log2(P) (alpha + bytes / beta) each
  T_P = t_r + collectives;  T1 = c0 + K 2 Hkv d e / M

Ranks that share a node (--cores C): more ranks than cores time-share them (compute and
memory per rank x C / P), the node's memory bandwidth (--node-mem-gbs) is split between
the ranks that run at once, and --efficiency scales a rank's compute rate while all cores
are busy (shared caches, memory, SMT siblings). With --bench, the model is also printed
beside every measured run of the file, at that run's size and rank count.

Standard library only.
"""
import argparse
import math
import sys


def parse_bench(path):
    """Measured values from mpi_bench "result key=value" lines (the last of each kind), and
    every ring / decode line (for the check against the model)."""
    got = {"runs": []}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("result "):
                continue
            kv = dict(x.split("=", 1) for x in line.split()[1:] if "=" in x)
            if kv.get("kind") in ("ring", "decode"):
                got["runs"].append(kv)
            kind = kv.get("kind")
            if kind == "ring" and kv.get("split") == "zigzag" and float(kv.get("gflops_single", 0)) > 0:
                got["gflops"] = float(kv["gflops_single"])
            elif kind == "decode" and float(kv.get("gbs_single", 0)) > 0:
                got["mem_gbs"] = float(kv["gbs_single"])
            elif kind == "link":
                got["link_gbs"] = float(kv["bandwidth_gbs"])
                got["latency_us"] = float(kv["latency_us"])
    return got


def coll(alpha, P, k=2.0):
    """k log2(P) latencies (a reduction tree then a broadcast tree is k = 2)."""
    return k * math.log2(P) * alpha if P > 1 else 0.0


def share(a, P):
    """(compute factor, memory GB/s) of one of P ranks on nodes of a.cores cores (0: a core
    per rank): more ranks than cores time-share them; the node's memory bandwidth
    (a.node_mem_gbs, 0: a.mem_gbs per core) is split between the ranks that run at once;
    a.efficiency scales the compute rate of a rank while all cores are busy."""
    C = a.cores or P
    busy = min(P, C)
    node = a.node_mem_gbs or a.mem_gbs * busy
    f = min(1.0, C / P) * (a.efficiency if busy > 1 else 1.0)
    m = min(a.mem_gbs, node / busy) * min(1.0, C / P)
    return f, m


def ring(a, P, split):
    f, m = share(a, P)
    F, M = a.gflops * 1e9 * f, m * 1e9
    beta, alpha = a.link_gbs * 1e9, a.latency_us * 1e-6
    H, Hkv, d, e = a.heads, a.kv_heads, a.dim, a.elem_bytes
    s = a.n / P
    t_half = 4 * H * d * (s * s / 2) / F
    t_m = s * H * d * 8 * 3 / M
    b = s * (2 * Hkv * d * e + 4)
    t_x = alpha + b / beta if P > 1 else 0.0
    fixed = 3 * coll(alpha, P) + coll(alpha, P) + (a.dup_us * 1e-6 if P > 1 else 0.0)
    if split == "zigzag":
        t_c = t_half
        total = (P - 1) * max(t_c + t_m, t_x) + t_c + t_m + fixed
    else:  # contiguous: the last rank, P - 1 full tiles then its own half tile
        t_c = 2 * t_half if P > 1 else t_half
        total = (P - 1) * max(t_c + t_m, t_x) + t_half + t_m + fixed
    t1 = 4 * H * d * (a.n * a.n / 2) / (a.gflops * 1e9)
    return dict(s=s, t_c=t_c, t_x=t_x, b=b, overlap=t_x <= t_c + t_m, total=total, t1=t1)


def min_overlap_shard(a):
    """Smallest shard s with alpha + s b1 / beta <= 2 H d s^2 / F (zig-zag step)."""
    F, beta, alpha = a.gflops * 1e9, a.link_gbs * 1e9, a.latency_us * 1e-6
    A = 2 * a.heads * a.dim / F
    B = (2 * a.kv_heads * a.dim * a.elem_bytes + 4) / beta
    return (B + math.sqrt(B * B + 4 * A * alpha)) / (2 * A)


def decode(a, P):
    M, beta, alpha = share(a, P)[1] * 1e9, a.link_gbs * 1e9, a.latency_us * 1e-6
    H, Hkv, d = a.heads, a.kv_heads, a.dim
    c0 = a.call_us * 1e-6
    kv_row = 2 * Hkv * d * a.cache_bytes
    t_r = c0 + (a.keys / P) * kv_row / M
    q_bytes = H * d * 4 + 4
    rec_bytes = H * (d + 2) * 8
    res_bytes = 4 + H * (d + 1) * 4
    t_coll = 0.0
    if P > 1:
        lg = math.log2(P)
        t_coll = (coll(alpha, P) * 2 + a.dup_us * 1e-6 + lg * (alpha + q_bytes / beta)
                  + lg * (alpha + rec_bytes / beta) + lg * (alpha + res_bytes / beta))
    t1 = c0 + a.keys * kv_row / (a.mem_gbs * 1e9)
    return dict(t_r=t_r, t_coll=t_coll, total=t_r + t_coll, t1=t1)


def check(a, runs):
    """The model beside every measured run of the bench file (same n / keys / ranks)."""
    print("\n## the model against the measured runs (" + (f"{a.cores} cores" if a.cores else
          "a core per rank") + f", efficiency {a.efficiency:g})")
    print("| run | ranks | measured time | model time | measured speedup | model speedup |")
    print("|---|---:|---:|---:|---:|---:|")
    for kv in runs:
        P, t, t1 = int(kv["ranks"]), float(kv["t_par"]), float(kv["t_single"])
        if kv["kind"] == "ring":
            b = argparse.Namespace(**{**vars(a), "n": int(kv["n"])})
            m = ring(b, P, kv["split"])
            name = f"ring {kv['split']} n={kv['n']}"
        else:
            b = argparse.Namespace(**{**vars(a), "keys": int(kv["keys"])})
            m = decode(b, P)
            name = f"decode keys={kv['keys']}"
        print(f"| {name} | {P} | {fmt_t(t).strip()} | {fmt_t(m['total']).strip()} | "
              f"{t1 / t:.2f} | {m['t1'] / m['total']:.2f} |")


def fmt_t(t):
    if t >= 1:
        return f"{t:8.2f} s"
    if t >= 1e-3:
        return f"{t * 1e3:7.2f} ms"
    return f"{t * 1e6:7.1f} us"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bench", help="mpi_bench output to read measured values from")
    p.add_argument("--gflops", type=float, help="attention GFLOP/s of one rank (default 45)")
    p.add_argument("--mem-gbs", type=float, help="K/V read GB/s of one rank (default 10)")
    p.add_argument("--link-gbs", type=float, help="link bandwidth GB/s (default 12.5)")
    p.add_argument("--latency-us", type=float, help="link latency us (default 2)")
    p.add_argument("--n", type=int, default=1 << 20, help="prefill tokens (1M)")
    p.add_argument("--keys", type=int, default=1 << 20, help="decode keys (1M)")
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--kv-heads", type=int, default=0, help="default: --heads")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--elem-bytes", type=float, default=4, help="bytes per K/V element sent (4)")
    p.add_argument("--cache-bytes", type=float, default=4, help="bytes per cached element (4; bf16 2)")
    p.add_argument("--call-us", type=float, default=20, help="fixed cost of one local call (20)")
    p.add_argument("--dup-us", type=float, default=12,
                   help="local cost of MPI_Comm_dup + free per call (12: Open MPI, 2 ranks, one node)")
    p.add_argument("--ranks", default="2,4,8,16,32,64,128,256")
    p.add_argument("--cores", type=int, default=0,
                   help="cores of the node the ranks share (0: a core per rank)")
    p.add_argument("--node-mem-gbs", type=float, default=0,
                   help="memory GB/s of a node, all cores together (0: --mem-gbs per core)")
    p.add_argument("--efficiency", type=float, default=1.0,
                   help="compute rate of a rank while every core is busy / alone (1)")
    a = p.parse_args(argv)
    measured = parse_bench(a.bench) if a.bench else {}
    defaults = dict(gflops=45.0, mem_gbs=10.0, link_gbs=12.5, latency_us=2.0)
    src = {}
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, measured.get(k, v))
            src[k] = "measured" if k in measured else "default"
        else:
            src[k] = "given"
    if not a.kv_heads:
        a.kv_heads = a.heads
    ranks = [int(x) for x in a.ranks.split(",") if x]
    if any(P < 1 for P in ranks) or a.gflops <= 0 or a.mem_gbs <= 0 or a.link_gbs <= 0:
        p.error("ranks, GFLOP/s and bandwidths must be positive")

    print(f"# inputs: {a.gflops:.1f} GFLOP/s per rank ({src['gflops']}), memory {a.mem_gbs:.1f} GB/s "
          f"({src['mem_gbs']}), link {a.link_gbs:.2f} GB/s ({src['link_gbs']}), latency "
          f"{a.latency_us:.2f} us ({src['latency_us']}); {a.heads} heads (kv {a.kv_heads}) x {a.dim}")
    print(f"\n## ring prefill, causal, n = {a.n} tokens; one rank: {fmt_t(ring(a, 1, 'zigzag')['t1'])}")
    print(f"overlap needs a shard of at least {min_overlap_shard(a):.0f} tokens per rank (zig-zag step)")
    print("| ranks | shard | block MB | step compute | step transfer | overlap | zig-zag time | speedup | contiguous speedup |")
    print("|---:|---:|---:|---:|---:|:---:|---:|---:|---:|")
    for P in ranks:
        z, c = ring(a, P, "zigzag"), ring(a, P, "contiguous")
        print(f"| {P} | {z['s']:.0f} | {z['b'] / 1e6:.1f} | {fmt_t(z['t_c']).strip()} | "
              f"{fmt_t(z['t_x']).strip()} | {'yes' if z['overlap'] else 'NO'} | "
              f"{fmt_t(z['total']).strip()} | {z['t1'] / z['total']:.1f} | {c['t1'] / c['total']:.1f} |")
    vol = (2 * a.kv_heads * a.dim * a.elem_bytes + 4) * a.n
    print(f"communication: each rank sends P - 1 blocks, {vol / 1e9:.2f} GB x (P - 1) / P in all "
          f"(the whole K/V once, less its own shard); all ranks together {vol / 1e9:.2f} GB x (P - 1)")
    print(f"\n## sharded decode, 1 query row, {a.keys} keys ({a.cache_bytes:g} B/element); one rank: "
          f"{fmt_t(decode(a, 1)['t1']).strip()}")
    print("| ranks | keys per rank | local read | collectives | step time | speedup | comm share |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for P in ranks:
        r = decode(a, P)
        print(f"| {P} | {a.keys / P:.0f} | {fmt_t(r['t_r']).strip()} | {fmt_t(r['t_coll']).strip()} | "
              f"{fmt_t(r['total']).strip()} | {r['t1'] / r['total']:.1f} | {100 * r['t_coll'] / r['total']:.1f} % |")
    if measured.get("runs"):
        check(a, measured["runs"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
