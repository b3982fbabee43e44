# SPDX-License-Identifier: MIT
"""examples/rove_numpy.py runs and reports agreement with its float64 reference."""
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
