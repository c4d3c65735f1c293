# SPDX-License-Identifier: MIT
"""Cost of one C call on a tensor: the seed recipe (ctypes), raw cffi, tensorffi.

    python benchmarks/call_overhead.py [--quick]

All paths call the same C function, ``void process_data(float *data, int size)``
(x = 2x + 1), compiled once into a shared library (for ctypes and ``load()``) and
once through cffi API mode (raw cffi, and ``tensorffi.compile()``):

* seed recipe: ctypes with ``argtypes = [POINTER(c_float), c_int]`` and
  ``ctypes.cast(t.data_ptr(), POINTER(c_float))`` — no checks;
* raw cffi: API-mode ``lib.process_data(ffi.cast("float *", t.data_ptr()), t.numel())`` — no checks;
* tensorffi ``load()`` (ABI mode) and ``compile()`` (API mode): dtype, device,
  layout, writability checks, version-counter bump;
* ``t.mul_(2).add_(1)``: PyTorch's own in-place ops, for scale.

Medians of many repetitions (each a batch of calls), in one run, at 16 and
1,000,000 float32 elements; ratios against the seed recipe and raw cffi. Then the
GIL check: two threads each calling a 50 ms C function. Last, operators:
``torch.ops.tensorffi.*`` against a C++ ``TORCH_LIBRARY`` operator and
``torch.library.custom_op`` (see op_overhead.py).
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
import threading
import time
from pathlib import Path

import cffi
import torch

import tensorffi

SEED_C = """
void process_data(float *data, int size) {
    for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f;
}
"""
CDEF = "void process_data(float *data, int size);"


def build(work: Path) -> dict:
    src = work / "seed.c"
    src.write_text(SEED_C)
    so = work / "libseed.so"
    subprocess.run(["gcc", "-O3", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)

    # Raw cffi, API mode, no checks.
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    ffi.set_source("_bench_rawcffi", CDEF, sources=[str(src)], extra_compile_args=["-O3"])
    built = ffi.compile(tmpdir=str(work))
    sys.path.insert(0, str(work))
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bench_rawcffi", built)
    raw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(raw)

    cdll = ctypes.CDLL(str(so))
    cdll.process_data.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_int]
    cdll.process_data.restype = None
    return {
        "ctypes": cdll.process_data,
        "raw": raw,
        "load": tensorffi.load(so, CDEF),
        "compile": tensorffi.compile("bench_seed", CDEF, sources=[src], cache=work / "cache"),
    }


def time_per_call(fn, inner: int, repeats: int) -> float:
    """Median seconds per call over ``repeats`` batches of ``inner`` calls."""
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def measure(libs: dict, n: int, quick: bool) -> dict[str, float]:
    t = torch.zeros(n, dtype=torch.float32)
    c_fn = libs["ctypes"]
    P = ctypes.POINTER(ctypes.c_float)
    cast = ctypes.cast
    raw_lib, raw_ffi = libs["raw"].lib, libs["raw"].ffi
    fcast = raw_ffi.cast
    load_fn = libs["load"].process_data
    comp_fn = libs["compile"].process_data
    paths = {
        "seed recipe (ctypes)": lambda: c_fn(cast(t.data_ptr(), P), t.numel()),
        "raw cffi (ffi.cast, unchecked)": lambda: raw_lib.process_data(fcast("float *", t.data_ptr()), t.numel()),
        "tensorffi.load (checked)": lambda: load_fn(t, t.numel()),
        "tensorffi.compile (checked)": lambda: comp_fn(t, t.numel()),
        "torch t.mul_(2).add_(1)": lambda: t.mul_(2).add_(1),
    }
    inner = (2000 if n < 1000 else 20) // (4 if quick else 1)
    repeats = 15 if quick else 41
    results = {name: float("inf") for name in paths}
    # Interleave the paths so that machine noise hits them alike.
    rounds = 3
    for _ in range(rounds):
        for name, fn in paths.items():
            for _ in range(max(1, inner // 10)):
                fn()  # warm up
            results[name] = min(results[name], time_per_call(fn, inner, repeats // rounds + 1))
    return results


def gil_check() -> dict[str, float]:
    spin = tensorffi.core.raw.tf_core_spin_ms
    spin(5)
    t0 = time.perf_counter()
    spin(50)
    one = time.perf_counter() - t0
    threads = [threading.Thread(target=spin, args=(50,)) for _ in range(2)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    two = time.perf_counter() - t0
    return {"one call (s)": one, "two threads (s)": two}


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = tensorffi.info()
    return (
        f"{cpu}; {os.cpu_count()} CPUs; Python {platform.python_version()}; torch {torch.__version__}; "
        f"cffi {cffi.__version__}; tensorffi {info['version']} ({info['simd']})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--no-ops", action="store_true", help="skip the torch.ops operator comparison")
    args = parser.parse_args()
    print(f"machine: {machine()}\n")
    with tempfile.TemporaryDirectory() as tmp:
        libs = build(Path(tmp))
        for n in (16, 1_000_000):
            res = measure(libs, n, args.quick)
            seed = res["seed recipe (ctypes)"]
            raw = res["raw cffi (ffi.cast, unchecked)"]
            print(f"### {n:,} float32 elements\n")
            print("| path | median per call | vs seed recipe | vs raw cffi |")
            print("|---|---:|---:|---:|")
            for name, sec in res.items():
                unit = f"{sec * 1e6:.2f} µs" if sec < 1e-3 else f"{sec * 1e3:.3f} ms"
                print(f"| {name} | {unit} | {sec / seed:.2f}x | {sec / raw:.2f}x |")
            print()
    gil = gil_check()
    print("### GIL release: two threads each calling a 50 ms C function\n")
    print(f"one call: {gil['one call (s)'] * 1e3:.1f} ms; two threads together: {gil['two threads (s)'] * 1e3:.1f} ms "
          f"({'GIL released' if gil['two threads (s)'] < 1.5 * gil['one call (s)'] else 'serialised?'})")
    if not args.no_ops:
        # Operators: torch.ops.tensorffi.* vs a C++ TORCH_LIBRARY op vs custom_op (op_overhead.py).
        import op_overhead

        print("\n### PyTorch operators\n")
        print(op_overhead.table(op_overhead.measure(quick=args.quick)))


if __name__ == "__main__":
    main()
