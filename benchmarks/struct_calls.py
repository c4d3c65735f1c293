# SPDX-License-Identifier: MIT
"""Calls that pass a struct with a pointer field (issue 36, struct field contracts):
what checking the field against its length at every call costs, against the unchecked
peers.

    python benchmarks/struct_calls.py            # about 20 s
    python benchmarks/struct_calls.py --quick    # fewer samples

One process. ``double span_sum(const span *s)`` over ``typedef struct { float *data;
int64_t n; } span`` (``compile()``d; 64 floats), called:

* tensorffi: ``lib.span_sum(s)`` on a ``lib.struct("span", data=t, n=64)`` made once
  (the field is checked at each call: its array still where it was assigned, 64
  elements for n = 64), and a struct made for each call;
* raw cffi on the same function: ``ffi.new("span *")`` filled once (unchecked);
* ctypes on the same ``.so``: a ``Structure`` made once, ``byref`` (unchecked);
* tensorffi and ctypes each alternating with a torch op on the same tensor
  (``t.mul_(1.0)``, as in a training loop), the op's time included in both.

``--fresh`` also times the first three calls in fresh processes (the module cached,
the library bound in that process: what a script's first calls cost).

Samples alternate between the contenders (a sample is a batch of calls lasting about
a millisecond, timed as one); the table gives medians per call and each peer's time
over tensorffi's.
"""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

import argparse  # noqa: E402
import ctypes  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import tensorffi  # noqa: E402

SOURCE = r"""
#include <stdint.h>
typedef struct span { float *data; int64_t n; } span;
double span_sum(const span *s) { double t = 0; for (int64_t i = 0; i < s->n; i++) t += s->data[i]; return t; }
"""


def per_call(fn: Callable[[], Any], target: float = 1e-3) -> Callable[[], float]:
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 > target / 4 or n > 1 << 20:
            break
        n *= 2
    n = max(1, int(n * target / max(time.perf_counter() - t0, 1e-9)))

    def sample() -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n

    return sample


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--fresh", action="store_true", help="also time the first calls of fresh processes")
    args = ap.parse_args()
    samples = 15 if args.quick else 61
    lib = tensorffi.compile("bench_struct_calls", source=SOURCE)
    t = torch.rand(64)
    want = float(t.double().sum())
    s = lib.struct("span", data=t, n=64)
    assert abs(lib.span_sum(s) - want) < 1e-4

    raw = lib.raw
    cs = lib.ffi.new("span *")
    cs.data = lib.ffi.cast("float *", t.data_ptr())
    cs.n = 64

    class Span(ctypes.Structure):
        _fields_ = [("data", ctypes.POINTER(ctypes.c_float)), ("n", ctypes.c_int64)]

    path = next(m.__file__ for m in list(sys.modules.values()) if getattr(m, "lib", None) is lib.raw)
    so = ctypes.CDLL(path)  # the same module's span_sum, through ctypes
    so.span_sum.argtypes, so.span_sum.restype = [ctypes.POINTER(Span)], ctypes.c_double
    cspan = Span(ctypes.cast(t.data_ptr(), ctypes.POINTER(ctypes.c_float)), 64)
    assert abs(so.span_sum(ctypes.byref(cspan)) - want) < 1e-4

    cases = {
        "tensorffi, struct made once (checked each call)": lambda: lib.span_sum(s),
        "tensorffi, a struct made for each call": lambda: lib.span_sum(lib.struct("span", data=t, n=64)),
        "raw cffi, ffi.new struct (unchecked)": lambda: raw.span_sum(cs),
        "ctypes, Structure by reference (unchecked)": lambda: so.span_sum(ctypes.byref(cspan)),
        "tensorffi after t.mul_(1.0)": lambda: (t.mul_(1.0), lib.span_sum(s)),
        "ctypes after t.mul_(1.0)": lambda: (t.mul_(1.0), so.span_sum(ctypes.byref(cspan))),
    }
    timers = {k: per_call(v) for k, v in cases.items()}
    got: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(samples):
        for k, timer in timers.items():
            got[k].append(timer())
    med = {k: statistics.median(v) for k, v in got.items()}
    base = med["tensorffi, struct made once (checked each call)"]
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"numpy {np.__version__}, tensorffi {tensorffi.__version__}; {samples} samples")
    print(f"{'case':52s} {'median':>10s} {'/ tensorffi once':>17s}")
    for k, v in med.items():
        print(f"{k:52s} {v * 1e6:8.2f} µs {v / base:16.2f}x")
    if args.fresh:
        fresh()


FIRST_CALLS = r"""
import time, torch, tensorffi
src = %r
t0 = time.perf_counter()
lib = tensorffi.compile("bench_struct_calls", source=src)
t1 = time.perf_counter()
t = torch.rand(64)
s = lib.struct("span", data=t, n=64)
times = []
for _ in range(3):
    a = time.perf_counter(); lib.span_sum(s); times.append(time.perf_counter() - a)
print(t1 - t0, *times)
"""


def fresh(runs: int = 5) -> None:
    import subprocess

    rows = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", FIRST_CALLS % SOURCE], capture_output=True, text=True, check=True,
                             cwd=os.path.dirname(_HERE))
        rows.append([float(v) for v in out.stdout.split()])
    med = [statistics.median(r[i] for r in rows) for i in range(4)]
    print(f"fresh process ({runs} runs, medians): compile() of the cached module {med[0] * 1e3:.1f} ms; "
          f"calls 1-3 {med[1] * 1e6:.0f} / {med[2] * 1e6:.0f} / {med[3] * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
