# SPDX-License-Identifier: MIT
"""The GIL is released during librove calls (ctypes.CDLL), and calls from several Python
threads at once are correct."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import rove
from conftest import randn


def test_gil_is_released_during_a_call(rng):
    """While one thread is inside a long librove call, another Python thread keeps running.
    With the GIL held, the ticker could not run at all until the call returned."""
    plan = rove.Plan(8, 8, 64, causal=False, threads=1)
    # Machines differ by 4x and more: grow the call until one run of it takes >= 0.2 s
    # here (it is timed with the GIL free of any other thread), so the ticker has a span.
    n = 1024
    while True:
        q, k, v = (randn(rng, 1, n, 8, 64) for _ in range(3))
        t0 = time.perf_counter()
        plan.attention(q, k, v)
        if time.perf_counter() - t0 >= 0.2 or n >= 32768:
            break
        n *= 2
    span = {}

    def worker():
        span["start"] = time.perf_counter()
        plan.attention(q, k, v)
        span["end"] = time.perf_counter()

    ticks = []
    t = threading.Thread(target=worker)
    t.start()
    while t.is_alive():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    t.join()
    inside = [x for x in ticks if span["start"] < x < span["end"]]
    assert span["end"] - span["start"] > 0.05, "the call is too short to tell"
    # a sleeping 1 ms ticker: dozens of ticks if the GIL is free, ~1 if it were held
    assert len(inside) >= 10, (len(inside), span["end"] - span["start"])


def test_concurrent_calls_from_python_threads(rng, torch):
    cases = [(randn(rng, 1, 200, 4, 64), randn(rng, 1, 200, 2, 64), randn(rng, 1, 200, 2, 64))
             for _ in range(6)]
    serial = [rove.attention(*c, threads=1) for c in cases]
    plan = rove.get_plan(4, 2, 64, threads=1)

    def job(i):
        c = cases[i % len(cases)]
        if i % 2:  # torch and numpy, shared cached plan and plan object
            return i, rove.attention(*(torch.from_numpy(x) for x in c), threads=1).numpy()
        return i, plan.attention(*c)

    with ThreadPoolExecutor(4) as ex:
        for i, out in ex.map(job, range(48)):
            assert np.array_equal(out, serial[i % len(cases)])


def test_concurrent_kv_caches(rng):
    plan = rove.Plan(4, 2, 64)
    data = [(randn(rng, 1, 30, 4, 64), randn(rng, 1, 30, 2, 64), randn(rng, 1, 30, 2, 64))
            for _ in range(4)]

    def decode(i):
        q, k, v = data[i]
        c = rove.KVCache(plan, 1, 30)
        outs = []
        for t in range(30):
            c.append(k[:, t:t + 1], v[:, t:t + 1])
            outs.append(c.attention(q[:, t:t + 1]))
        return np.concatenate(outs, 1)

    want = [rove.attention(*d) for d in data]
    with ThreadPoolExecutor(4) as ex:
        for got, w in zip(ex.map(decode, range(4)), want):
            assert np.max(np.abs(got - w)) / np.max(np.abs(w)) < 1e-5


def _module(name):
    """The package's module (rove.attention and rove.gla are also its functions' names)."""
    import importlib
    return importlib.import_module(name)


def _plan_cache_modules():
    A, G = _module("rove.attention"), _module("rove.gla")
    return [(A, lambda i: rove.get_plan(2, 2, 8, scale=1.0 + i * 1e-3), A.PLAN_CACHE_SIZE),
            (G, lambda i: G._plan(2, 8, 8, scale=1.0 + i * 1e-3), G._plans.size)]


def test_evicted_plans_are_destroyed_outside_the_cache_lock():
    """An evicted plan is destroyed (rove_plan_destroy through ctypes, which releases the
    GIL) after the plan cache's lock is let go: a fork from another thread at that moment
    copied a held lock into the child, whose next call then hung (found by review)."""
    import gc
    import weakref
    rove.clear_plan_cache()
    for mod, make, size in _plan_cache_modules():
        seen = []
        first = make(-1)
        weakref.finalize(first, lambda m=mod: seen.append(m._plans.lock.locked()))
        del first
        for i in range(size + 1):
            make(i)
        gc.collect()
        assert seen == [False], (mod.__name__, seen)
    rove.clear_plan_cache()


def test_fork_child_gets_fresh_module_locks(rng):
    """A fork while another thread holds one of the package's module locks (the plan
    caches', hf's) leaves the child a fresh one: the child's calls go on, where they hung
    (os.register_at_fork)."""
    import os
    import signal
    A, G = _module("rove.attention"), _module("rove.gla")
    try:
        H = _module("rove.hf")
    except ImportError:  # transformers or torch missing: its lock is not in the package
        H = None
    q, k, v = (randn(rng, 1, 4, 2, 8) for _ in range(3))
    g = -np.abs(randn(rng, 1, 4, 2, 8))
    locks = [A._plans.lock, G._plans.lock] + ([H._lock] if H else [])
    for lock in locks:
        held, release = threading.Event(), threading.Event()

        def hold(lock=lock):
            with lock:
                held.set()
                release.wait()

        t = threading.Thread(target=hold)
        t.start()
        assert held.wait(20)
        pid = os.fork()
        if pid == 0:  # the child: a call that takes the lock, bounded by an alarm
            signal.alarm(20)
            try:
                rove.clear_plan_cache()
                rove.attention(q, k, v, scale=0.37)
                rove.gla(q, q, q, g, scale=0.41)
                if H is not None:
                    H.register()
            except BaseException:
                os._exit(2)
            os._exit(0)
        release.set()
        t.join()
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (locks.index(lock), status)
