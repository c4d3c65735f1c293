# SPDX-License-Identifier: MIT
"""Call overhead of ``tensorffi.from_ctypes`` against a ``compile()``d checked call of
the same function (issue 21's floor: within 1.2x), with ``load()`` and raw ctypes
for scale.

    python benchmarks/from_ctypes.py [--quick]

One C function, ``void process_data(float *data, int size)`` (x = 2x + 1), built
once with gcc into a shared library (ctypes, from_ctypes, load) and once through
``tensorffi.compile()`` (API mode, trampolines). Every path gets the same 16-float
tensor; the four paths are measured in rounds, alternated inside each round, so
the machine's noise falls on all of them alike. Medians of the per-round
nanoseconds per call, and the ratio from_ctypes / compile() per round (median).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from ctypes import POINTER, c_float, c_int
from pathlib import Path

import torch

import tensorffi

SRC = "void process_data(float *data, int size) { for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f; }\n"
CDEF = "void process_data(float *data, int size);"


def per_call_ns(fn, calls: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - t0) / calls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rounds, calls = (15, 2000) if args.quick else (41, 20000)
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        (work / "seed.c").write_text(SRC)
        so = work / "libseed.so"
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(work / "seed.c"), "-o", str(so)], check=True)
        clib = ctypes.CDLL(str(so))
        clib.process_data.argtypes = [POINTER(c_float), c_int]
        clib.process_data.restype = None
        fc = tensorffi.from_ctypes(clib)
        ld = tensorffi.load(so, CDEF)
        cp = tensorffi.compile("bench_fromctypes", CDEF, source=SRC, cache=work / "cache")
        t = torch.zeros(16)
        n = t.numel()
        raw = clib.process_data

        paths = {
            "from_ctypes": lambda: fc.process_data(t, n),
            "compile()": lambda: cp.process_data(t, n),
            "load()": lambda: ld.process_data(t, n),
            "ctypes (unchecked)": lambda: raw(ctypes.cast(t.data_ptr(), POINTER(c_float)), n),
        }
        for fn in paths.values():
            per_call_ns(fn, 1000)  # warm up
        times: dict[str, list[float]] = {k: [] for k in paths}
        ratios = []
        for r in range(rounds):
            order = list(paths.items())
            if r % 2:
                order.reverse()
            got = {k: per_call_ns(fn, calls) for k, fn in order}
            for k, v in got.items():
                times[k].append(v)
            ratios.append(got["from_ctypes"] / got["compile()"])
    print(f"# from_ctypes call overhead ({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {sys.version.split()[0]}, torch {torch.__version__}, tensorffi {tensorffi.__version__})")
    print(f"# {rounds} rounds x {calls} calls, 16 float32 elements, paths alternated within each round")
    print(f"path_reason from_ctypes: {fc.process_data.__wrapped_bridge__.native_reason or 'native call path'}; "
          f"compile(): {cp.process_data.__wrapped_bridge__.native_reason or 'native call path'}")
    for k, v in times.items():
        print(f"{k:>20}: median {statistics.median(v):7.0f} ns/call")
    print(f"from_ctypes / compile(): median of per-round ratios {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")


if __name__ == "__main__":
    main()
