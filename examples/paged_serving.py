# SPDX-License-Identifier: MIT
"""A serving loop over an engine's own paged KV pool, with librove doing the attention.

The engine (this script) owns everything a server owns: a FlashInfer-style bf16 cache per
layer, torch [n_blocks, 2, block_size, n_kv_heads, head_dim] (K and V interleaved per
block), its block allocator (a free list), the block tables and the slot mapping. librove
does two things on it, in place:

    rove.paged_store(k, v, cache[:, 0], cache[:, 1], slot_mapping, positions, plan=plan,
                     layout="token_major")
    out = rove.paged_attention(q, cache[:, 0], cache[:, 1], block_tables, seq_lens,
                               cu_seqlens_q, plan=plan, layout="token_major")

The model is a stack of random attention layers (projections in torch, residual stream);
requests of different prompt lengths arrive, are prefilled in one packed call, decode one
token per step together, finish, free their blocks, and new requests take them
(continuous batching). Every step is checked against the same model run on librove's own
allocator (rove.PagedKVCache, bit for bit) and, once at the end, every request's last
outputs against torch's scaled_dot_product_attention over its whole history (float64,
RoVE or RoPE rotations written in torch).

    python examples/paged_serving.py [--layers 2] [--steps 24] [--rotate rove|rope]
"""
import argparse
import sys

import numpy as np
import torch

import rove

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("--layers", type=int, default=2)
p.add_argument("--heads", type=int, default=8)
p.add_argument("--kv-heads", type=int, default=2)
p.add_argument("--head-dim", type=int, default=64)
p.add_argument("--block-size", type=int, default=16)
p.add_argument("--blocks", type=int, default=64, help="blocks in each layer's pool")
p.add_argument("--steps", type=int, default=24, help="decode steps")
p.add_argument("--rotate", choices=["rove", "rope"], default="rove")
p.add_argument("--seed", type=int, default=0)
args = p.parse_args()
for name in ("layers", "heads", "kv_heads", "head_dim", "blocks", "steps"):
    if getattr(args, name) <= 0:
        p.error(f"--{name.replace('_', '-')} must be positive")
if args.heads % args.kv_heads or args.head_dim % 2:
    p.error("--heads must be a multiple of --kv-heads, --head-dim even")
bs = args.block_size
if bs <= 0 or bs & (bs - 1):
    p.error("--block-size must be a power of two")

torch.manual_seed(args.seed)
L, H, HK, D = args.layers, args.heads, args.kv_heads, args.head_dim
W = H * D  # the residual stream's width
plan = rove.Plan(H, HK, D, rotate=args.rotate)
proj = [[torch.randn(W, n) / W ** 0.5 for n in (H * D, HK * D, HK * D, W)] for _ in range(L)]

# ---- the engine's memory: its pools, allocator and tables ---------------------------------
pools = [torch.zeros(args.blocks, 2, bs, HK, D, dtype=torch.bfloat16) for _ in range(L)]
free = list(range(args.blocks))[::-1]
# the same model on librove's own allocator, for the bit-for-bit check
mirror = [rove.PagedKVCache(plan, n_blocks=args.blocks, block_size=bs, dtype="bf16")
          for _ in range(L)]


class Request:
    def __init__(self, rid, prompt):
        self.rid, self.h = rid, torch.randn(prompt, W)  # hidden states to come
        self.len, self.table, self.done = 0, [], 0
        self.mirror = [m.new_sequence() for m in mirror]
        self.history = [([], [], []) for _ in range(L)]  # per layer: q, k, v (fp32, unrotated)

    def reserve(self, n):
        """Blocks for n more tokens; their slots."""
        while len(self.table) * bs < self.len + n:
            if not free:
                sys.exit("the pool ran out of blocks: give --blocks more")
            self.table.append(free.pop())
        t = np.arange(self.len, self.len + n)
        return np.asarray(self.table)[t // bs] * bs + t % bs

    def release(self):
        free.extend(self.table)
        for m, s in zip(mirror, self.mirror):
            m.free(s)


def step(batch):
    """One engine step: each request of the batch brings its new tokens' hidden states
    (a prompt, or one decoded token); all go through every layer in packed calls."""
    counts = [r.h.shape[0] for r in batch]
    cu = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    slots = np.concatenate([r.reserve(n) for r, n in zip(batch, counts)])
    pos = np.concatenate([np.arange(r.len, r.len + n) for r, n in zip(batch, counts)])
    width = max(len(r.table) for r in batch)
    tables = np.array([r.table + [0] * (width - len(r.table)) for r in batch], np.int32)
    lens = np.array([r.len + n for r, n in zip(batch, counts)], np.int32)
    x = torch.cat([r.h for r in batch])
    for layer in range(L):
        wq, wk, wv, wo = proj[layer]
        q = (x @ wq).view(-1, H, D)
        k, v = (x @ wk).view(-1, HK, D), (x @ wv).view(-1, HK, D)
        kv = pools[layer]
        rove.paged_store(k, v, kv[:, 0], kv[:, 1], slots, pos, plan=plan, layout="token_major")
        out = rove.paged_attention(q, kv[:, 0], kv[:, 1], tables, lens, cu, plan=plan,
                                   layout="token_major")
        # the mirror: librove's allocator, the same tokens
        for i, r in enumerate(batch):
            a, b = cu[i], cu[i + 1]
            mirror[layer].append(r.mirror[layer], k[a:b], v[a:b])
            for hist, t in zip(r.history[layer], (q[a:b], k[a:b], v[a:b])):
                hist.append(t)
        want = mirror[layer].attention([r.mirror[layer] for r in batch], q, cu_seqlens_q=cu)
        if not torch.equal(out, want):
            sys.exit(f"layer {layer}: the engine's pool and rove.PagedKVCache disagree")
        x = x + out.reshape(-1, W) @ wo
    for i, (r, n) in enumerate(zip(batch, counts)):
        r.len += n
        r.last = out[cu[i + 1] - 1]  # the last layer's output of its last token
        r.h = x[cu[i + 1] - 1: cu[i + 1]] / x[cu[i + 1] - 1].norm() * W ** 0.5  # next token


def rot(x, pos, sign=1.0):
    """x [n, heads, D] rotated by R_pos in float64 (librove's default RoPE: half pairs)."""
    w = torch.from_numpy(rove.inv_freq(rove.RopeConfig(), D)[0])
    ang = torch.as_tensor(pos, dtype=torch.float64)[:, None, None] * w
    c, s = torch.cos(ang), sign * torch.sin(ang)
    a, b = x[..., : D // 2], x[..., D // 2:]
    return torch.cat([a * c - b * s, a * s + b * c], -1)


def sdpa_check(r):
    """The request's last output of the last layer, recomputed with SDPA over its history."""
    q, k, v = (torch.cat(h).double() for h in r.history[-1])
    pos = np.arange(r.len)
    qi, ki = rot(q[-1:], pos[-1:]), rot(k, pos).repeat_interleave(H // HK, 1)
    vi = (rot(v, pos) if args.rotate == "rove" else v).repeat_interleave(H // HK, 1)
    # K and V went through bf16 in the pools: round them the same way (librove rounds its
    # fp32 rotation, this its float64 one: an element on a rounding boundary may differ by
    # one bf16 step, so agreement is to ~1e-5, not to fp32 rounding)
    ki, vi = ki.float().bfloat16().double(), vi.float().bfloat16().double()
    y = torch.nn.functional.scaled_dot_product_attention(
        qi.transpose(0, 1), ki.transpose(0, 1), vi.transpose(0, 1), scale=1 / D ** 0.5)
    y = y.transpose(0, 1)[0]
    if args.rotate == "rove":
        y = rot(y[None], pos[-1:], -1.0)[0]
    return float((r.last.double() - y).abs().max() / y.abs().max())


rng = np.random.default_rng(args.seed)
active, finished, next_id, stored = [], [], 0, 0
for t in range(args.steps + 1):
    # requests arrive (3 at the start, then one every 6 steps) with prompts of 5..60 tokens
    arrive = 3 if t == 0 else int(t % 6 == 0)
    new = [Request(next_id + i, int(rng.integers(5, 61))) for i in range(arrive)]
    next_id += arrive
    if new:
        step(new)  # prefill: the prompts packed in one call per layer
        stored += sum(r.len for r in new)
        active += new
    if t > 0:
        step(active)  # decode: one token each, all requests in one call per layer
        stored += len(active)
    # a request finishes after 10 decoded tokens: its blocks go back to the free list
    for r in list(active):
        r.done += t > 0
        if r.done == 10:
            finished.append((r.rid, r.len, sdpa_check(r)))
            r.release()
            active.remove(r)
for r in active:
    finished.append((r.rid, r.len, sdpa_check(r)))
worst = max(e for _, _, e in finished)
print(f"librove {rove.__version__}: {args.layers} layers of {H}:{HK} x {D} ({args.rotate}), "
      f"bf16 pools of {args.blocks} blocks of {bs} (FlashInfer's [n_blocks, 2, ...] layout)")
print(f"{len(finished)} requests, {stored} tokens stored; every step equal to "
      f"rove.PagedKVCache bit for bit; blocks free at the end: {len(free)}")
print(f"max error of the requests' last outputs vs SDPA (float64, K/V rounded to bf16): "
      f"{worst:.2e} (relative to max |out|)")
