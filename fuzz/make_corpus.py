#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write the seed corpora fuzz/corpus/<harness>/ (deterministic; rerun after adding a
harness). The harnesses decode any byte string (fuzz/fuzz_util.c: an exhausted reader
yields zeros, i.e. the defaults), so the seeds are: all-zero inputs (every default), a
0xff input (every hostile choice), and pseudo-random inputs of a few lengths. Regression
inputs for fixed findings are added beside them by hand as regress-<what>."""
import os
import random
import sys

HARNESSES = ["fuzz_attention", "fuzz_gla", "fuzz_kv_cache", "fuzz_layer", "fuzz_rotate",
             "fuzz_selective_angles", "fuzz_selective_phase", "fuzz_varlen", "fuzz_paged",
             "fuzz_paged_store", "fuzz_merge", "fuzz_backward"]
COUNT = 30


def seeds(name):
    yield "zeros-64", bytes(64)
    yield "zeros-512", bytes(512)
    yield "ff-128", b"\xff" * 128
    rng = random.Random("librove-" + name)
    for i in range(COUNT - 3):
        n = rng.choice([24, 48, 96, 160, 256, 512])
        yield "seed-%02d" % i, bytes(rng.getrandbits(8) for _ in range(n))


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    names = sys.argv[1:] or HARNESSES
    for name in names:
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        for fname, data in seeds(name):
            with open(os.path.join(d, fname), "wb") as f:
                f.write(data)
        print("%s: %d seeds in %s" % (name, COUNT, d))


if __name__ == "__main__":
    main()
