# SPDX-License-Identifier: MIT
"""librove's double-precision C oracles (oracle/*.c), compiled here into a small shared
library with `cc` and called through ctypes with the rove package's struct mirrors
(whose layouts test_capi_layout.py checks). They share no code with the library."""
import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np

from rove import _lib as L

ROOT = Path(__file__).resolve().parents[2]


def build(directory: Path):
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler (cc) is needed for the oracle tests"
    so = directory / "liboracle.so"
    subprocess.run([cc, "-std=c11", "-O2", "-shared", "-fPIC", "-I", str(ROOT / "include"),
                    "-I", str(ROOT / "oracle"), *map(str, sorted((ROOT / "oracle").glob("*.c"))),
                    "-o", str(so), "-lm"], check=True)
    lib = ctypes.CDLL(str(so))
    P = ctypes.c_void_p
    lib.rove_oracle_attention.restype = ctypes.c_int
    lib.rove_oracle_attention.argtypes = [ctypes.POINTER(L.AttentionConfig), P, ctypes.c_double,
                                          ctypes.POINTER(L.AttentionArgs), P, P]
    lib.rove_oracle_gla.restype = ctypes.c_int
    lib.rove_oracle_gla.argtypes = [ctypes.POINTER(L.GLAConfig), ctypes.POINTER(L.GLAArgs), P, P]
    lib.rove_oracle_selective_angles.restype = ctypes.c_int
    lib.rove_oracle_selective_angles.argtypes = [ctypes.c_int32] * 4 + [P] * 5
    lib.rove_oracle_selective_phase.restype = ctypes.c_int
    lib.rove_oracle_selective_phase.argtypes = [ctypes.POINTER(L.SelectivePhaseWeights),
                                                ctypes.c_int32, ctypes.c_int32, P,
                                                ctypes.c_int64, P, P]
    return lib


def ptr(a):
    return None if a is None else a.__array_interface__["data"][0]


def attention(lib, plan, q, k, v, q_pos=None, kv_pos=None, q_angles=None, kv_angles=None):
    """Oracle output [B, Lq, H, d] and LSE [B, H, Lq] (float64) for a rove.Plan and dense
    bshd float32 numpy inputs; positions [B, L] int32 or None."""
    import rove
    c = L.AttentionConfig()
    L.lib.rove_plan_config(plan._ptr, c)  # the validated config (freq_factors in the plan)
    w, m = rove.inv_freq(plan.rope, plan.head_dim)
    q, k, v = (np.ascontiguousarray(t, dtype=np.float32) for t in (q, k, v))
    B, Lq, H, d = q.shape
    a = L.AttentionArgs()
    a.batch, a.q_len, a.kv_len = B, Lq, k.shape[1]
    a.q, a.k, a.v = ptr(q), ptr(k), ptr(v)
    pos = [None if p is None else np.ascontiguousarray(np.broadcast_to(p, (B, n)), np.int32)
           for p, n in ((q_pos, Lq), (kv_pos, k.shape[1]))]
    a.q_pos, a.kv_pos = ptr(pos[0]), ptr(pos[1])
    ang = [None if x is None else np.ascontiguousarray(x, np.float64) for x in (q_angles, kv_angles)]
    a.q_angles, a.kv_angles = ptr(ang[0]), ptr(ang[1])
    out = np.empty((B, Lq, H, d))
    lse = np.empty((B, H, Lq))
    assert lib.rove_oracle_attention(c, ptr(w), m, a, ptr(out), ptr(lse)) == 0
    return out, lse
