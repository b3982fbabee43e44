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
