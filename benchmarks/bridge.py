# SPDX-License-Identifier: MIT
"""The bridge's checked call against unchecked raw cffi and TVM FFI's checked call (issue 19).

    python benchmarks/bridge.py            # about a minute (plus TVM FFI's 5 s build)
    python benchmarks/bridge.py --quick    # fewer samples
    TENSORFFI_BRIDGE=python python benchmarks/bridge.py   # the Python call path, for comparison

All in one process, the same C code everywhere, on 16 float32 elements:

* ``f``: ``void f(float *x, int64_t n)`` (x += 1), ``g``: ``void g(const float *x,
  float *y, int64_t n)`` (y = 2x), ``h``: ``float h(const float *x, int64_t n)`` (the sum:
  C only reads x, so no requires_grad, inference or version-counter work);
* raw cffi: API mode, ``lib.f(ffi.cast("float *", t.data_ptr()), 16)`` (NumPy:
  ``ffi.cast("float *", ffi.from_buffer(a))``) — no checks at all; for ``g``, into a
  preallocated ``y``;
* TVM FFI (``pip install --no-deps apache-tvm-ffi``): ``tvm_ffi.cpp.load_inline`` of the
  same loop taking ``tvm::ffi::TensorView``, checking rank, dtype, device and
  contiguity (its kernel-library guide's pattern), called on the tensor or array;
* tensorffi ``compile()`` with the contract ``x: [n]`` (dtype, device, layout,
  storage extent, neg/conj bits, writability, requires_grad, inference tensors,
  version bump), and ``g`` as ``x: [n]; y: out [n]`` (y allocated by the bridge);
  ``load()`` of the same code built as a shared library.

Each case is timed interleaved with its peers, sample by sample (a sample is a
batch of calls of about a millisecond); ratios are taken within each run (tensorffi /
peer: at most 1 means tensorffi is as fast or faster) and reported as median [min,
max] over runs.

``--primitives`` also builds ``benchmarks/torch_reads.c`` and times, from C, each read of
a torch tensor the bridge makes (the floor of a checked torch call on this machine).
``--alternating`` times each call right after an untimed torch op (a 256x256 matmul on
torch's threads), as in a training loop; ``--fresh`` runs the first calls of fresh
processes (import included separately), for the compile()d ``f`` and raw cffi.
"""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import cffi  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import tensorffi  # noqa: E402

sys.path.insert(1, _HERE)
from small_calls import fmt, interleaved  # noqa: E402

C_SOURCE = """#include <stdint.h>
void f(float *x, int64_t n) { for (int64_t i = 0; i < n; i++) x[i] += 1.0f; }
void g(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = 2.0f * x[i]; }
float h(const float *x, int64_t n) { float s = 0; for (int64_t i = 0; i < n; i++) s += x[i]; return s; }
"""
CDEF = "void f(float *x, int64_t n);\nvoid g(const float *x, float *y, int64_t n);\nfloat h(const float *x, int64_t n);"
CONTRACTS = {"f": "x: [n]", "g": "x: [n]; y: out [n]", "h": "x: [n]"}

TVM_SOURCE = r"""
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
void f(tvm::ffi::TensorView x) {
  TVM_FFI_ICHECK(x.ndim() == 1) << "x must be 1-D";
  DLDataType f32 = DLDataType{kDLFloat, 32, 1};
  TVM_FFI_ICHECK(x.dtype() == f32) << "x must be float32";
  TVM_FFI_ICHECK(x.device().device_type == kDLCPU) << "x must be on the CPU";
  TVM_FFI_ICHECK(x.IsContiguous()) << "x must be contiguous";
  float *p = static_cast<float *>(x.data_ptr());
  for (int64_t i = 0; i < x.size(0); ++i) p[i] += 1.0f;
}
"""


def build(work: Path) -> dict[str, Any]:
    src = work / "bridge_bench.c"
    src.write_text(C_SOURCE)
    so = work / "libbridge_bench.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    ffi.set_source("_bridge_bench_raw", C_SOURCE, extra_compile_args=["-O2"])
    built = ffi.compile(tmpdir=str(work))
    spec = importlib.util.spec_from_file_location("_bridge_bench_raw", built)
    raw = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(raw)  # type: ignore[union-attr]
    out = {
        "raw": raw,
        "compile": tensorffi.compile("bridge_bench", CDEF, source=C_SOURCE, contracts=CONTRACTS, cache=work / "cache"),
        "load": tensorffi.load(so, CDEF, contracts=CONTRACTS),
        "tvm": None,
    }
    try:
        import tvm_ffi.cpp

        out["tvm"] = tvm_ffi.cpp.load_inline("tf_bridge_bench", cpp_sources=TVM_SOURCE, functions=["f"],
                                             build_directory=str(work / "tvm"))
    except Exception as exc:  # not installed, or no C++ compiler
        print(f"(TVM FFI left out: {type(exc).__name__}: {exc})", file=sys.stderr)
    return out


def cases(libs: dict[str, Any]) -> list[tuple[str, dict[str, Callable[[], Any]], dict[str, float]]]:
    """(label, {"ours": fn, peer: fn, ...}, {peer: floor}) per case; each checked once."""
    raw, comp, load, tvm = libs["raw"], libs["compile"], libs["load"], libs["tvm"]
    rf, rg, rh, cast, from_buffer = raw.lib.f, raw.lib.g, raw.lib.h, raw.ffi.cast, raw.ffi.from_buffer
    t, a = torch.zeros(16), np.zeros(16, np.float32)
    ty, ay = torch.empty(16), np.empty(16, np.float32)
    out = []
    for kind, x, y in (("torch", t, ty), ("NumPy", a, ay)):
        if kind == "torch":
            def raw_f(x=x) -> None:
                rf(cast("float *", x.data_ptr()), 16)

            def raw_g(x=x, y=y) -> None:
                rg(cast("float *", x.data_ptr()), cast("float *", y.data_ptr()), 16)

            def raw_h(x=x) -> float:
                return rh(cast("float *", x.data_ptr()), 16)
        else:
            def raw_f(x=x) -> None:
                rf(cast("float *", from_buffer(x)), 16)

            def raw_g(x=x, y=y) -> None:
                rg(cast("float *", from_buffer(x)), cast("float *", from_buffer(y)), 16)

            def raw_h(x=x) -> float:
                return rh(cast("float *", from_buffer(x)), 16)
        cf, lf, cg, ch = comp.f, load.f, comp.g, comp.h
        before = x.copy() if kind == "NumPy" else x.clone()
        cf(x)
        lf(x)
        assert (np.asarray(x) == np.asarray(before) + 2).all()
        assert (np.asarray(cg(x)) == 2 * np.asarray(x)).all()
        peers: dict[str, Callable[[], Any]] = {"raw cffi": raw_f}
        floors = {"raw cffi": 1.0}
        if tvm is not None:
            tf = tvm.f
            peers["TVM FFI"] = lambda tf=tf, x=x: tf(x)
            floors["TVM FFI"] = 1.0
        out.append((f"compile() checked call, {kind}, x: [n]", {"ours": lambda cf=cf, x=x: cf(x), **peers}, floors))
        out.append((f"compile() checked call, {kind}, const x: [n] (C reads it)",
                    {"ours": lambda ch=ch, x=x: ch(x), "raw cffi": raw_h}, {"raw cffi": 1.0}))
        out.append((f"load() checked call, {kind}, x: [n]", {"ours": lambda lf=lf, x=x: lf(x), "raw cffi": raw_f},
                    {"raw cffi": 1.5}))
        out.append((f"compile() call allocating y, {kind}, x: [n]; y: out [n]",
                    {"ours": lambda cg=cg, x=x: cg(x), "raw cffi": raw_g}, {"raw cffi": 2.0}))
    return out


PRIMITIVES = [
    "DLPack exchange: data, shape, strides, dtype, device (dltensor_from_py_object_no_sync)",
    "is_neg() (the lazy negative bit; is_conj() too for complex dtypes)",
    "untyped_storage(), its size and address (the storage's real extent; held for the call)",
    "requires_grad (written tensors)",
    "_version (written tensors: an inference tensor has none)",
    "torch._C._increment_version((t,)) (written tensors, after the call)",
    "GIL released and taken back around the C call",
]


def primitives(work: Path, runs: int) -> list[tuple[str, float]]:
    """Median seconds of each read of PRIMITIVES, from C, on a 16-float tensor."""
    import sysconfig

    so = work / ("torch_reads" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-I" + sysconfig.get_paths()["include"],
                    os.path.join(_HERE, "torch_reads.c"), "-o", str(so)], check=True)
    spec = importlib.util.spec_from_file_location("torch_reads", so)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    t = torch.zeros(16)
    base = torch._C.TensorBase
    st = t.untyped_storage()
    mod.setup(t, [base.__dict__["is_neg"], base.__dict__["untyped_storage"], type(st).data_ptr,
                  base.__dict__["requires_grad"], base.__dict__["_version"]], torch._C._increment_version)
    times: list[list[float]] = [[] for _ in PRIMITIVES]
    for _ in range(runs * 5):
        for i in range(len(PRIMITIVES)):
            times[i].append(mod.run(t, i, 20000))
    return [(name, statistics.median(ts)) for name, ts in zip(PRIMITIVES, times)]


def alternating(fns: dict[str, Callable[[], Any]], calls: int) -> dict[str, float]:
    """Median seconds of each function's call right after an untimed 256x256 matmul."""
    a = torch.randn(256, 256)
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(calls):
        for k, f in fns.items():
            a @ a
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


FRESH = r"""
import sys, time, importlib.util
t0 = time.perf_counter()
import torch, tensorffi
t1 = time.perf_counter()
x = torch.zeros(16)
if sys.argv[1] == "ours":
    f = tensorffi.compile("bridge_bench", sys.argv[3], source=sys.argv[4], contracts={"f": "x: [n]"},
                          cache=sys.argv[2]).f
    call = lambda: f(x)
else:
    spec = importlib.util.spec_from_file_location("_bridge_bench_raw", sys.argv[2])
    raw = importlib.util.module_from_spec(spec); spec.loader.exec_module(raw)
    rf, cast = raw.lib.f, raw.ffi.cast
    call = lambda: rf(cast("float *", x.data_ptr()), 16)
ts = []
for _ in range(10):
    a = time.perf_counter(); call(); ts.append(time.perf_counter() - a)
print(t1 - t0, ts[0], sorted(ts[1:])[4])
"""


def fresh(work: Path, runs: int) -> dict[str, list[float]]:
    """(import s, first call s, median of calls 2-10 s) of fresh processes, medians over runs."""
    raw_so = next(work.glob("_bridge_bench_raw*.so"))
    out: dict[str, list[list[float]]] = {"ours": [], "raw": []}
    for _ in range(runs):
        for who in out:
            argv = [sys.executable, "-c", FRESH, who] + ([str(work / "cache"), CDEF, C_SOURCE] if who == "ours"
                                                          else [str(raw_so)])
            res = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=str(work))
            out[who].append([float(v) for v in res.stdout.split()])
    return {k: [statistics.median(r[i] for r in v) for i in range(3)] for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--runs", type=int, default=5, help="measure every case this many times (default 5)")
    parser.add_argument("--primitives", action="store_true", help="also time each torch read from C")
    parser.add_argument("--alternating", action="store_true", help="also each call right after a torch op")
    parser.add_argument("--fresh", action="store_true", help="also the first calls of fresh processes")
    args = parser.parse_args(argv)
    samples = 9 if args.quick else 31
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        todo = cases(build(Path(tmp)))
        results: list[list[dict[str, float]]] = [[] for _ in todo]
        for _ in range(args.runs):
            for i, (_, fns, _) in enumerate(todo):
                results[i].append(interleaved(fns, samples))
        prims = primitives(Path(tmp), args.runs) if args.primitives else []
        alt = [(label, alternating(fns, 2000)) for label, fns, _ in todo] if args.alternating else []
        first = fresh(Path(tmp), args.runs) if args.fresh else {}
    load = os.getloadavg()
    info = tensorffi.info()
    print("## The bridge's call (issue 19)\n")
    print(f"- {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; load average {load[0]:.2f} "
          f"{load[1]:.2f} {load[2]:.2f} (at the end); tensorffi {info['version']}, call path: {info['bridge']}; "
          f"torch {torch.__version__}, NumPy {np.__version__}, cffi {cffi.__version__}")
    print(f"- {args.runs} runs; in each, the median per call of {samples} interleaved samples. ratio = tensorffi / "
          f"peer per run, median [min, max]; floor: the most the ratio may be\n")
    print("| case | tensorffi µs | peer | peer µs | ratio | floor |")
    print("|---|---:|---|---:|---:|---:|")
    for (label, fns, floors), res in zip(todo, results):
        ours = statistics.median(r["ours"] for r in res)
        for peer, floor in floors.items():
            ratios = [r["ours"] / r[peer] for r in res]
            mark = "" if statistics.median(ratios) <= floor else " (missed)"
            print(f"| {label} | {fmt(ours)} | {peer} | {fmt(statistics.median(r[peer] for r in res))} | "
                  f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}, {max(ratios):.2f}] | ≤ {floor:g}x{mark} |")
    if alt:
        print("\n| case, each call right after a 256x256 matmul | tensorffi µs | peer | peer µs | ratio |")
        print("|---|---:|---|---:|---:|")
        for label, res in alt:
            for peer in (k for k in res if k != "ours"):
                print(f"| {label} | {fmt(res['ours'])} | {peer} | {fmt(res[peer])} | {res['ours'] / res[peer]:.2f}x |")
    if first:
        print("\n| fresh process, torch x: [n] | import torch + tensorffi s | first call µs | calls 2-10 µs (median) |")
        print("|---|---:|---:|---:|")
        for who, name in (("ours", "tensorffi compile() (cached)"), ("raw", "raw cffi")):
            imp, one, rest = first[who]
            print(f"| {name} | {imp:.2f} | {one * 1e6:.1f} | {rest * 1e6:.2f} |")
    if prims:
        print("\n| read of a torch tensor, from C (benchmarks/torch_reads.c) | ns |")
        print("|---|---:|")
        for name, sec in prims:
            print(f"| {name} | {sec * 1e9:.0f} |")
        written = sum(sec for _, sec in prims)
        print(f"| **sum for a tensor C writes** | **{written * 1e9:.0f}** |")
        print(f"| sum for a tensor C only reads (no requires_grad, _version, bump) | "
              f"{(prims[0][1] + prims[1][1] + prims[2][1] + prims[6][1]) * 1e9:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
