# SPDX-License-Identifier: MIT
"""The cost of an "acquire" call on a handle that keeps 8 tensorffi.buffer tensors
(issue 20: each kept tensor's address is checked before the call, so memory torch
swapped is an error instead of silent loss), back to back and right after a 64x64
matmul. Before/after: run it under two trees, one process each (the argument is the
tree whose tensorffi must be imported):

    for i in 1 2 3; do for d in /tmp/before $PWD; do
        (cd /tmp && PYTHONPATH=$d python $OLDPWD/benchmarks/handles_acquire.py $d); done; done
"""
import sys
import timeit
from pathlib import Path

import torch

import tensorffi

assert tensorffi.__file__.startswith(sys.argv[1]), tensorffi.__file__
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_handles_hostile import CDEF, CONTRACTS, SOURCE  # noqa: E402  (the device the hostile tests use)

lib = tensorffi.compile("acqbench", CDEF, source=SOURCE, contracts=CONTRACTS,
                        cache=f"/tmp/acqcache-{sys.argv[1].replace('/', '_')}")
dev = lib.dev_open()
bufs = [tensorffi.buffer(16) for _ in range(8)]
for b in bufs:
    lib.dev_register(dev, b)
m = torch.randn(64, 64)


def best(fn, number=5000):
    return min(timeit.repeat(fn, number=number, repeat=9)) / number * 1e6


plain = best(lambda: lib.dev_fill(dev, 1.0))
mm = best(lambda: m @ m)
alt = best(lambda: (m @ m, lib.dev_fill(dev, 1.0)))
print(f"{sys.argv[1]:18s} acquire call, 8 kept buffers: {plain:.2f} us; after a 64x64 matmul: {alt - mm:.2f} us "
      f"(matmul {mm:.2f} us)")
