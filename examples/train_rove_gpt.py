# SPDX-License-Identifier: MIT
"""Train a small GPT whose attention is librove's (forward and backward) on the CPU,
RoVE beside RoPE, and plot the loss curves.

Task (long-range copy): sequences of random tokens; the target at position t is the token
`offset` positions earlier, so the model must attend by relative position. There are no
absolute position embeddings: position reaches the model only through the rotations, RoPE
(q, k) or RoVE (q, k, v and the output). The loss is averaged over the positions
t >= offset.

    python examples/train_rove_gpt.py [--steps 300] [--layers 2] [--outdir .]

Writes train_rove_gpt.tsv (step, rove loss, rope loss) and, if gnuplot is installed,
train_rove_gpt.png; prints the first and last losses of each run. Both runs start from the
same initial weights and see the same batches.
"""
import argparse
import math
import shutil
import subprocess
import time
from pathlib import Path

import torch

import rove


class Block(torch.nn.Module):
    def __init__(self, d_model, heads, rotate):
        super().__init__()
        self.heads, self.rotate = heads, rotate
        self.ln1, self.ln2 = torch.nn.LayerNorm(d_model), torch.nn.LayerNorm(d_model)
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)
        self.proj = torch.nn.Linear(d_model, d_model)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d_model, 4 * d_model), torch.nn.GELU(),
                                       torch.nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        B, L, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, L, 3, self.heads, D // self.heads).unbind(2)
        # librove: [batch, seq, heads, head_dim] (bshd), causal, differentiable in q, k, v
        a = rove.attention(q, k, v, rotate=self.rotate, causal=True, threads=1)
        x = x + self.proj(a.reshape(B, L, D))
        return x + self.mlp(self.ln2(x))


class GPT(torch.nn.Module):
    def __init__(self, vocab, d_model, heads, layers, rotate):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d_model)
        self.blocks = torch.nn.ModuleList(Block(d_model, heads, rotate) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(d_model)
        self.head = torch.nn.Linear(d_model, vocab)

    def forward(self, tokens):
        x = self.emb(tokens)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def batches(steps, batch, seq, vocab, offset, seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randint(0, vocab, (batch, seq), generator=g)
        y = torch.full_like(x, -100)  # ignored positions
        y[:, offset:] = x[:, :-offset]
        yield x, y


def train(rotate, args):
    torch.manual_seed(args.seed)  # same initial weights for both runs
    model = GPT(args.vocab, args.heads * args.head_dim, args.heads, args.layers, rotate)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    losses = []
    for step, (x, y) in enumerate(batches(args.steps, args.batch, args.seq, args.vocab,
                                          args.offset, args.seed + 1)):
        lr = args.lr * min(1.0, (step + 1) / 20)  # short warm-up
        for group in opt.param_groups:
            group["lr"] = lr
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, args.vocab), y.view(-1),
                                                 ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def plot(tsv: Path, png: Path, chance: float):
    if not shutil.which("gnuplot"):
        print("gnuplot not found: no plot (the losses are in", tsv, ")")
        return
    script = f"""
set terminal pngcairo size 800,480
set output '{png}'
set title 'Long-range copy with librove attention (fwd + bwd)'
set xlabel 'step'; set ylabel 'cross-entropy'; set key top right; set grid
plot '{tsv}' using 1:2 with lines lw 2 title 'RoVE', \\
     '{tsv}' using 1:3 with lines lw 2 title 'RoPE', \\
     {chance} with lines dt 2 lc rgb 'gray' title 'chance'
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    print("plot:", png)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=16)
    p.add_argument("--vocab", type=int, default=16)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--offset", type=int, default=24)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--outdir", type=Path, default=Path("."))
    args = p.parse_args()
    for name in ("steps", "layers", "heads", "batch", "seq"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.head_dim < 2 or args.head_dim % 2:
        p.error("--head-dim must be even and at least 2")
    if args.vocab < 2:
        p.error("--vocab must be at least 2")
    if not 1 <= args.offset < args.seq:
        p.error(f"--offset must be in 1 .. --seq - 1 = {args.seq - 1} (the target is the token "
                "offset positions earlier)")
    if not args.lr > 0:
        p.error("--lr must be > 0")
    args.outdir.mkdir(parents=True, exist_ok=True)  # fail now, not after training
    torch.set_num_threads(1)
    runs = {}
    for rotate in ("rove", "rope"):
        t0 = time.perf_counter()
        runs[rotate] = train(rotate, args)
        dt = time.perf_counter() - t0
        l = runs[rotate]
        print(f"{rotate}: loss {l[0]:.3f} -> {l[-1]:.3f} (mean of the last 20 steps "
              f"{sum(l[-20:]) / len(l[-20:]):.3f}) in {dt:.1f} s, {args.steps} steps")
    args.outdir.mkdir(parents=True, exist_ok=True)
    tsv = args.outdir / "train_rove_gpt.tsv"
    with open(tsv, "w") as f:
        f.write("# step\trove\trope\n")
        for i, (a, b) in enumerate(zip(runs["rove"], runs["rope"])):
            f.write(f"{i}\t{a:.6f}\t{b:.6f}\n")
    print("losses:", tsv)
    plot(tsv, args.outdir / "train_rove_gpt.png", math.log(args.vocab))


if __name__ == "__main__":
    main()
