# SPDX-License-Identifier: MIT
"""Shared fixtures of the rove Python tests (the float64 references are in reference.py).

The tests import the *installed* package (pip install .), never python/rove directly:
what is tested is what users get.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # reference.py


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="session")
def oracle(tmp_path_factory):
    """The C double oracles of oracle/*.c as a ctypes library (see oracle.py)."""
    import oracle as o
    return o.build(tmp_path_factory.mktemp("oracle"))
