# SPDX-License-Identifier: MIT
"""The roads from PyTorch to the kernels that a user hits, one thread each side
(threads=1, torch.set_num_threads(1)), medians of --runs calls, each case's calls back to
back (not interleaved between cases):

    python python/bench/bench_python_paths.py [--runs 9]

  decode bhsd   rove.attention (rotate="none", as SDPA) on a contiguous [b, h, s, d] K/V
                (PyTorch's and HF's cache layout), its bshd twin, and SDPA (enable_gqa):
                32:8 heads x 128, q_len 1
  hf decode     rove.attention over a [1, 8, kv, 64] bhsd K/V with one query row of 32
                heads (what rove.hf runs per layer and step over a DynamicCache), without
                and with gpt-oss attention sinks (sinks=), kv 1024 and 8192
  cache sinks   KVCache.attention of one row over 1024 keys (32:8 x 64), without and with
                sinks=
  rotate bhsd   rove.rotate on a contiguous [1, 32, 2048, 128], its bshd twin, and the
                torch formula x cos + rotate_half(x) sin with cached tables
  hf rotate     rove.hf's rotation of new K ([1, 8, 2048, 128])
  paged decode  PagedKVCache.attention of one row over 16 and 512 keys, and KVCache's
  varlen bwd    rove.attention_varlen forward + backward of 256 sequences of 8 tokens,
                and rove.attention's on the same data as a [256, 8, h, d] batch
  gla strong    GLAPlan.forward (and forward + backward) of 1 x 1024 x 4 x 64 with log
                decays g = -4 u, u uniform in [0, 1) (subnormal chunk products)
  cache append  a KVCache created and 4096 tokens x 4 KV heads x 64 appended (a 16:4
                plan): creation and the first touch of its pages included
  sel angles    rove.selective_angles of one token, 4 heads x 32 pairs, with a carry
  sel phase     rove.selective_phase of 512 and 2048 tokens (and a 1-token decode step),
                32 heads x 128 inputs, 32 pairs, rank 16, conv width 4, GLA gate (rank
                16), and the same network in torch float32 (matmuls, conv1d, sigmoid).
                rove.selective_phase has no threads argument: OMP_NUM_THREADS=1 is set
Prints one markdown table of medians in microseconds.
"""
import argparse
import os
import statistics
import time

import numpy as np
import torch

import rove
import rove.hf as RH


def timed(fn, runs):
    fn()  # warm: plans, tables
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6


def cases():
    g = torch.Generator().manual_seed(2026)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    out = []
    for kv in (512, 2048):
        q, k, v = r(1, 32, 1, 128), r(1, 8, kv, 128), r(1, 8, kv, 128)
        qs, ks, vs = (x.transpose(1, 2).contiguous() for x in (q, k, v))
        out += [(f"decode bhsd kv {kv}", "rove bhsd",
                 lambda q=q, k=k, v=v: rove.attention(q, k, v, layout="bhsd", rotate="none",
                                                      threads=1)),
                (f"decode bhsd kv {kv}", "rove bshd",
                 lambda q=qs, k=ks, v=vs: rove.attention(q, k, v, rotate="none", threads=1)),
                (f"decode bhsd kv {kv}", "sdpa",
                 lambda q=q, k=k, v=v: torch.nn.functional.scaled_dot_product_attention(
                     q, k, v, enable_gqa=True))]
    sinks = r(32)
    for kv in (1024, 8192):
        q, k, v = r(1, 32, 1, 64), r(1, 8, kv, 64), r(1, 8, kv, 64)
        out += [(f"hf decode kv {kv}", variant,
                 lambda q=q, k=k, v=v, s=s: rove.attention(q, k, v, layout="bhsd", rotate="none",
                                                           sinks=s, threads=1))
                for variant, s in (("no sinks", None), ("sinks", sinks))]
    cache = rove.KVCache(rove.Plan(32, 8, 64, threads=1), 1, 1024)
    ck = r(1, 1024, 8, 64).numpy()
    cache.append(ck, ck)
    q1 = r(1, 1, 32, 64).numpy()
    out += [("cache decode kv 1024", variant, lambda s=s, q1=q1: cache.attention(q1, sinks=s))
            for variant, s in (("no sinks", None), ("sinks", sinks))]
    x = r(1, 32, 2048, 128)
    xs = x.transpose(1, 2).contiguous()
    pos = np.arange(2048)
    inv = 1.0 / (10000.0 ** (torch.arange(0, 128, 2) / 128))
    ang = torch.arange(2048)[:, None] * inv[None]
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)

    def torch_rope():
        rh = torch.cat([-x[..., 64:], x[..., :64]], -1)
        return x * cos + rh * sin
    out += [("rotate 32 x 2048 x 128", "rove bhsd",
             lambda: rove.rotate(x, pos, layout="bhsd", threads=1)),
            ("rotate 32 x 2048 x 128", "rove bshd", lambda: rove.rotate(xs, pos, threads=1)),
            ("rotate 32 x 2048 x 128", "torch", torch_rope)]
    kx, rope = r(1, 8, 2048, 128), rove.RopeConfig()
    RH.set_threads(1)
    out.append(("hf rotate 8 x 2048 x 128", "rove.hf", lambda: RH._rotated(kx, pos[None], rope)))
    for kv in (16, 512):
        pc = rove.PagedKVCache(n_blocks=64, block_size=16, n_heads=32, n_kv_heads=8,
                               head_dim=128, threads=1)
        s = pc.new_sequence()
        kc = rove.KVCache(rove.Plan(32, 8, 128, threads=1), 1, kv)
        kk = r(kv, 8, 128).numpy()
        pc.append(s, kk, kk)
        kc.append(kk[None], kk[None])
        q1 = r(1, 32, 128).numpy()
        out += [(f"paged decode kv {kv}", "PagedKVCache", lambda pc=pc, s=s, q1=q1:
                 pc.attention([s], q1)),
                (f"paged decode kv {kv}", "KVCache", lambda kc=kc, q1=q1: kc.attention(q1[None]))]
    n, L, H, D = 256, 8, 8, 64
    cu = torch.arange(0, n * L + 1, L, dtype=torch.int32)
    vq, vk, vv = (r(n * L, H, D).requires_grad_() for _ in range(3))
    bq, bk, bv = (t.detach().reshape(n, L, H, D).clone().requires_grad_() for t in (vq, vk, vv))
    out += [("varlen fwd+bwd 256 x 8", "varlen", lambda: rove.attention_varlen(
                vq, vk, vv, cu, cu, threads=1).sum().backward()),
            ("varlen fwd+bwd 256 x 8", "batch", lambda: rove.attention(
                bq, bk, bv, threads=1).sum().backward())]
    gq, gk, gv = (r(1, 1024, 4, 64) for _ in range(3))
    gg = -4 * torch.rand(1, 1024, 4, 64, generator=g)
    gplan = rove.GLAPlan(4, 64, 64, rotate="none", threads=1)
    leaves = [t.clone().requires_grad_() for t in (gq, gk, gv, gg)]
    out += [("gla strong decays 1024 x 4 x 64", "forward", lambda: gplan.forward(gq, gk, gv, gg)),
            ("gla strong decays 1024 x 4 x 64", "forward + backward",
             lambda: gplan.forward(*leaves).sum().backward())]
    cplan = rove.Plan(16, 4, 64, threads=1)
    ck = r(1, 4096, 4, 64).numpy()
    out.append(("cache append 4096 x 4 x 64", "KVCache() + append",
                lambda: rove.KVCache(cplan, 1, 4096).append(ck, ck)))
    phi, carry = r(1, 1, 4, 32), torch.zeros(1, 4, 32, dtype=torch.float64)
    out.append(("selective_angles 1 x 4 x 32", "decode step",
                lambda: rove.selective_angles(phi, None, carry)))
    out += phase_cases(g)
    return out


def phase_cases(g):
    H, D, P, R, W = 32, 128, 32, 16, 4
    d = H * D
    wr = lambda *s: torch.randn(*s, generator=g) * 0.05  # noqa: E731
    pd, pu, cw, gd, gw, gb = wr(R, d), wr(H * P, R), wr(H, P, W), wr(R, d), wr(H * P, R), wr(H * P)
    wt = rove.SelectivePhaseWeights(H, P, proj_down=pd, proj_up=pu, conv_w=cw, gate="gla",
                                    gate_down=gd, gate_w=gw, gate_b=gb)

    def torch_phase(x):  # u per head, low-rank z, causal depthwise conv, GLA gate
        B, T, _ = x.shape
        xh = x.view(B, T, H, D)
        u = (xh / torch.sqrt((xh * xh).sum(-1, keepdim=True) + 1e-6)).reshape(B, T, d)
        z = ((u @ pd.T) @ pu.T).transpose(1, 2)
        zc = torch.nn.functional.conv1d(torch.nn.functional.pad(z, (W - 1, 0)),
                                        cw.reshape(H * P, 1, W), groups=H * P)
        return zc.transpose(1, 2) * torch.sigmoid((u @ gd.T) @ gw.T + gb)
    out = []
    for T in (1, 512, 2048):
        x = torch.randn(1, T, d, generator=g)
        out += [(f"selective_phase {T} x 32 x 128", "rove", lambda x=x: rove.selective_phase(x, wt)),
                (f"selective_phase {T} x 32 x 128", "torch", lambda x=x: torch_phase(x))]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"  # rove.selective_phase's threads (read per call)
    info = rove.info()
    print(f"librove {info['version']} ({info['library']}), isa {info['best_isa']}, package "
          f"{rove.__file__}, torch {torch.__version__}, one thread, medians of {args.runs}")
    print("| case | variant | median us |\n|---|---|---:|")
    for case, variant, fn in cases():
        print(f"| {case} | {variant} | {timed(fn, args.runs):.0f} |")


if __name__ == "__main__":
    main()
