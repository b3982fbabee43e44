# SPDX-License-Identifier: MIT
"""The examples run: rove_numpy.py agrees with its float64 reference, hf_rove.py with sdpa,
train_rove_gpt.py learns through librove's backward, and paged_serving.py's engine-owned
pools equal rove.PagedKVCache bit for bit and SDPA to float rounding."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_rove_numpy_example():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "rove_numpy.py")],
                         check=True, capture_output=True, text=True, timeout=300).stdout
    errs = [float(e) for e in re.findall(r"reference ([0-9.e+-]+)", out)]
    assert len(errs) == 2 and max(errs) < 2e-5, out


def test_hf_example_agrees():
    """examples/hf_rove.py (small): every librove variant reproduces sdpa's greedy tokens,
    the logits agree to 1e-4, and the RoVE model's cached decode equals its recompute."""
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "hf_rove.py"), "--layers", "2",
                          "--prompt", "48", "--new", "8", "--threads", "1"],
                         check=True, capture_output=True, text=True, timeout=600).stdout
    rows = [r for r in out.splitlines() if r.startswith("| ") and "---" not in r][1:]
    assert len(rows) == 4, out
    for r in rows[1:3]:  # register, apply(rope): against sdpa
        cells = [c.strip() for c in r.strip("|").split("|")]
        assert float(cells[1]) <= 1e-4 and cells[2] == "yes", r
    assert "cache == full recompute" in rows[3], out


def test_train_example_learns(tmp_path):
    """examples/train_rove_gpt.py (short): both runs train through librove's backward and
    the loss falls; the losses file has a row per step."""
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "train_rove_gpt.py"),
                          "--steps", "60", "--seq", "32", "--offset", "8", "--outdir",
                          str(tmp_path)], check=True, capture_output=True, text=True,
                         timeout=600).stdout
    for mode in ("rove", "rope"):
        m = re.search(mode + r": loss ([0-9.]+) -> [0-9.]+ \(mean of the last 20 steps ([0-9.]+)\)",
                      out)
        assert m, out
        assert float(m.group(2)) < 0.9 * float(m.group(1)), out
    rows = (tmp_path / "train_rove_gpt.tsv").read_text().splitlines()
    assert len(rows) == 61 and rows[0].startswith("#"), rows[:3]


def test_paged_serving_example():
    """examples/paged_serving.py: requests arrive, prefill, decode together, finish and free
    their blocks; every step equals rove.PagedKVCache, the outputs SDPA (float64)."""
    for mode in ("rove", "rope"):
        out = subprocess.run([sys.executable, str(ROOT / "examples" / "paged_serving.py"),
                              "--steps", "14", "--rotate", mode], check=True,
                             capture_output=True, text=True, timeout=600).stdout
        assert "bit for bit" in out, out
        m = re.search(r"vs SDPA .*: ([0-9.e+-]+) \(relative", out)
        # the reference rounds its float64-rotated K and V to bf16, librove its fp32-rotated
        # ones: an element near a rounding boundary may land one bf16 step apart (2^-8);
        # a sign, pairing or layout mistake is O(1)
        assert m and float(m.group(1)) < 1e-3, out
        m = re.search(r"(\d+) requests", out)
        assert m and int(m.group(1)) >= 4, out


def test_examples_refuse_bad_arguments():
    """Arguments the examples cannot honour are usage errors (exit 2, the reason named),
    before any work: an offset past the sequence once trained on nothing and printed nan."""
    for script, args, says in (("train_rove_gpt.py", ["--seq", "32", "--offset", "32"], "--offset"),
                               ("train_rove_gpt.py", ["--steps", "0"], "--steps"),
                               ("hf_rove.py", ["--new", "0"], "--new"),
                               ("paged_serving.py", ["--block-size", "12"], "--block-size"),
                               ("paged_serving.py", ["--heads", "6", "--kv-heads", "4"], "--heads")):
        r = subprocess.run([sys.executable, str(ROOT / "examples" / script), *args],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and says in r.stderr, (script, args, r.returncode, r.stderr)
