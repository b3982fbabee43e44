# SPDX-License-Identifier: MIT
"""Objects that hold librove memory: plans are immutable (C keeps its own copy of the
configuration, Python sizes buffers from the fields), nothing is freed at interpreter exit
while code may still use it, writes never target elements that share memory, and the
rotate-plan cache of rove.hf does not grow with every apply()."""
import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rove
from conftest import randn


@pytest.mark.parametrize("make, fields", [
    (lambda: rove.Plan(2, 2, 64), ["head_dim", "rotary_dim", "n_kv_heads", "window", "scale",
                                   "rope", "threads", "_ptr", "_finalizer"]),
    (lambda: rove.GLAPlan(2, 64, 64), ["key_dim", "value_dim", "rotary_dim", "chunk", "_ptr"]),
])
def test_plans_are_immutable(make, fields):
    """p.rotary_dim = 4 was taken: Python then sized angle buffers from it while C read
    its own rotary_dim (a heap overflow under ASan)."""
    p = make()
    for name in fields:
        before = getattr(p, name)
        with pytest.raises(AttributeError, match="immutable"):
            setattr(p, name, 4)
        with pytest.raises(AttributeError, match="immutable"):
            delattr(p, name)
        assert getattr(p, name) is before
    with pytest.raises(AttributeError):
        p.new_field = 1  # no such slot


def test_a_caches_plan_cannot_be_changed_through_it():
    plan = rove.Plan(2, 2, 64)
    pc = rove.PagedKVCache(plan, n_blocks=4, block_size=64)
    kc = rove.KVCache(plan, 1, 8)
    for c in (pc, kc):
        with pytest.raises(AttributeError, match="immutable"):
            c.plan.head_dim = 256
    assert pc.view().k.shape[-1] == 64


def _run(code):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_del_at_interpreter_exit_finds_its_cache():
    """weakref.finalize freed every live cache at exit, before module teardown ran this
    __del__: a use after free (a segfault in a Release build)."""
    r = _run("""
        import numpy as np, rove
        class Session:
            def __init__(self):
                self.pc = rove.PagedKVCache(n_blocks=4, block_size=64, n_heads=2,
                                            n_kv_heads=2, head_dim=64)
                self.s = self.pc.new_sequence()
                x = np.ones((10, 2, 64), np.float32)
                self.pc.append(self.s, x, x)
                self.kc = rove.KVCache(rove.Plan(2, 2, 64), 1, 16)
                self.kc.append(x[None], x[None])
            def __del__(self):
                print("len", self.pc.length(self.s), len(self.kc), flush=True)
                self.pc.free(self.s)
        sess = Session()
    """)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "len 10 10"


def test_a_daemon_thread_in_a_call_at_exit():
    """A daemon thread inside rove.attention while the interpreter exits: the plan it runs
    was freed by the atexit finalizers (exit code 139 in 4 of 5 runs before)."""
    code = """
        import threading, time, numpy as np, rove
        q = np.random.default_rng(0).random((1, 1024, 8, 64), dtype=np.float32)
        kc = rove.KVCache(rove.Plan(8, 8, 64, threads=1), 1, 1024)
        kc.append(q, q)
        def spin():
            while True:
                rove.attention(q, q, q, threads=1)
                kc.attention(q[:, :4])
        threading.Thread(target=spin, daemon=True).start()
        time.sleep(0.3)
        print("exit", flush=True)
    """
    for _ in range(3):
        r = _run(code)
        assert r.returncode == 0 and r.stdout.strip() == "exit", (r.returncode, r.stderr[-2000:])


def test_outputs_with_shared_elements_are_refused(rng):
    """A numpy out= (or an in-place rotate target) with a stride-0 axis was written, each
    element taking the last row's values; torch's expand() was already refused."""
    q = randn(rng, 2, 5, 4, 16)
    base = np.zeros((2, 1, 4, 16), np.float32)
    out = np.lib.stride_tricks.as_strided(base, (2, 5, 4, 16), (base.strides[0], 0) +
                                          base.strides[2:], writeable=True)
    with pytest.raises(ValueError, match="share memory"):
        rove.attention(q, q, q, out=out)
    x = np.lib.stride_tricks.as_strided(base, (2, 5, 4, 16), out.strides, writeable=True)
    with pytest.raises(ValueError, match="share memory"):
        rove.rotate(x, np.arange(5), inplace=True)
    assert not base.any()


def test_hf_rotate_plans_do_not_pile_up():
    """Equal RopeConfigs share one entry (apply() makes new configs per module, and the
    cache, keyed by identity, kept every one of them: a few more per apply/remove cycle),
    and distinct ones are bounded."""
    torch = pytest.importorskip("torch")
    hf = pytest.importorskip("rove.hf")
    x = torch.ones(1, 2, 3, 16)
    pos = np.arange(3)[None]
    hf._rotate_plans.clear()
    want = hf._rotated(x, pos, rove.RopeConfig(theta=1000.0))
    for _ in range(5):
        assert torch.equal(hf._rotated(x, pos, rove.RopeConfig(theta=1000.0)), want)
        gc.collect()
        assert len(hf._rotate_plans) == 1
    assert not torch.equal(hf._rotated(x, pos, rove.RopeConfig(theta=1001.0)), want)
    for i in range(hf._ROTATE_PLANS_MAX + 10):
        hf._rotated(x, pos, rove.RopeConfig(theta=2000.0 + i))
        assert len(hf._rotate_plans) <= hf._ROTATE_PLANS_MAX
