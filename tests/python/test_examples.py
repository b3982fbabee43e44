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
