# SPDX-License-Identifier: MIT
"""Benchmark: tensorffi.signal against scipy.signal, measured in the same run.

    python benchmarks/sosfilt.py                       # full run (a few minutes)
    python benchmarks/sosfilt.py --quick               # fewer repetitions
    python benchmarks/sosfilt.py --simd avx2,avx512    # one run per SIMD path (subprocesses)
    python benchmarks/sosfilt.py --runs 3              # repeat the whole table: median, min and max ratio

Prints Markdown tables of median times and the ratio SciPy time / tensorffi time,
with the machine facts (CPU, load average, SIMD path, threads). SciPy gets the same
data in the same dtype (its sos cast to that dtype, so both compute and return that
dtype); the peers are timed alternately, call by call, so a change of load on a
shared machine hits both alike. Order-8 Butterworth = 4 sections unless noted.
Floors are those of the signal work order; a floor is "met" when the median ratio
over runs reaches it.
"""
from __future__ import annotations

import os
import sys

# Run from a checkout: the repository root (its tensorffi) first on the import path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402
import scipy  # noqa: E402
import scipy.signal as ss  # noqa: E402
import torch  # noqa: E402

import tensorffi  # noqa: E402
import tensorffi.signal as tsig  # noqa: E402


def timeit(fns: list[Callable[[], object]], reps: int, min_time: float = 0.0, number: int = 1,
           between: Callable[[], object] | None = None) -> list[float]:
    """Median seconds per call of each function, the functions run alternately
    (``between``, if given, runs untimed before every timed call)."""
    for fn in fns:
        fn()  # warm-up (page faults, thread start, lazy binding)
    times: list[list[float]] = [[] for _ in fns]
    start = time.perf_counter()
    r = 0
    while r < reps or time.perf_counter() - start < min_time:
        for i, fn in enumerate(fns):
            if between is not None:
                between()
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            times[i].append((time.perf_counter() - t0) / number)
        r += 1
    return [statistics.median(t) for t in times]


def machine_facts(threads: int) -> list[str]:
    model = platform.processor() or "?"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    info = tensorffi.info()
    load = os.getloadavg()
    return [
        f"CPU: {model}; {os.cpu_count()} logical CPUs; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
        f"(1, 5, 15 min, at the end of the run)",
        f"SIMD path of tensorffi.signal: {tsig.simd_level()} (TENSORFFI_SIMD={os.environ.get('TENSORFFI_SIMD', '')!r}); "
        f"tensorffi threads: {threads}; torch threads: {torch.get_num_threads()}",
        f"Python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"torch {torch.__version__}, tensorffi {info['version']} ({info['compiler']} {info['build_flags']})",
    ]


Row = dict[str, Any]


def measure(quick: bool, threads: int) -> tuple[list[Row], list[Row]]:
    reps = 5 if quick else 15
    rng = np.random.default_rng(0)
    rows: list[Row] = []
    butter8 = ss.butter(8, 0.2, output="sos")  # poles within radius 0.9: float32 arithmetic
    butter8_low = ss.butter(8, 0.02, output="sos")  # poles near 1: float32 data in float64 arithmetic

    def data(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        x = rng.standard_normal(shape)
        if np.dtype(dtype).kind == "c":
            x = x + 1j * rng.standard_normal(shape)
        return x.astype(dtype)

    def real(dtype: Any) -> Any:
        return np.float32 if np.dtype(dtype) in (np.float32, np.complex64) else np.float64

    def versus(name: str, shape: tuple[int, ...], dtype: Any, floor: float | None, ours: Callable[..., Any],
               theirs: Callable[..., Any], sos: np.ndarray = butter8, kind: str = "numpy", zi: bool = False,
               number: int = 1) -> None:
        x = data(shape, dtype)
        if np.iscomplexobj(sos):  # the same dtype for both: the result's
            s = sos.astype(np.complex64 if np.dtype(dtype) == np.complex64 else np.complex128)
        else:
            s = sos.astype(real(dtype))
        z = np.zeros((s.shape[0],) + shape[:-1] + (2,), x.dtype) if zi else None
        if kind == "torch":
            xt, st = torch.from_numpy(x), torch.from_numpy(s)
            zt = torch.from_numpy(z) if zi else None
            t_ref, t_ours = timeit([lambda: theirs(st.numpy(), xt.numpy(), z), lambda: ours(st, xt, zt)], reps,
                                   number=number)
        else:
            t_ref, t_ours = timeit([lambda: theirs(s, x, z), lambda: ours(s, x, z)], reps, number=number)
        rows.append({"name": name, "shape": str(shape), "dtype": np.dtype(dtype).name, "kind": kind,
                     "scipy": t_ref, "ours": t_ours, "floor": floor})

    def filt(**kw: Any) -> Callable[..., Any]:
        def f(s: Any, x: Any, z: Any) -> Any:
            return tsig.sosfilt(s, x, zi=z, threads=kw.get("threads", threads), axis=kw.get("axis", -1))
        return f

    def ref(**kw: Any) -> Callable[..., Any]:
        def f(s: Any, x: Any, z: Any) -> Any:
            return ss.sosfilt(s, x, zi=z, axis=kw.get("axis", -1))
        return f

    ffilt = lambda s, x, z: tsig.sosfiltfilt(s, x, threads=threads)  # noqa: E731
    fref = lambda s, x, z: ss.sosfiltfilt(s, x)  # noqa: E731

    # the floors
    versus("sosfilt", (64, 65536), np.float32, 10, filt(), ref())
    versus("sosfilt", (64, 65536), np.float64, 4, filt(), ref())
    versus("sosfilt", (1, 1_000_000), np.float32, 3, filt(), ref())
    versus("sosfilt", (1, 1_000_000), np.float64, 2, filt(), ref())
    versus("sosfiltfilt", (64, 65536), np.float32, 8, ffilt, fref)
    versus("sosfilt, zi (streaming)", (1, 256), np.float64, 1.5, filt(), ref(), zi=True, number=20)
    versus("sosfilt, zi (streaming)", (2, 256), np.float32, 1.5, filt(), ref(), kind="torch", zi=True, number=20)
    versus("sosfilt, zi", (64, 4096), np.float32, 6, filt(), ref(), kind="torch", zi=True, number=4)
    versus("sosfilt", (64, 65536), np.complex64, 5, filt(), ref())
    # beyond the floors
    versus("sosfiltfilt", (64, 65536), np.float64, None, ffilt, fref)
    versus("sosfilt, Wn=0.02 (float64 arithmetic)", (64, 65536), np.float32, None, filt(), ref(), sos=butter8_low)
    versus("sosfilt, axis=0", (65536, 64), np.float32, None, filt(axis=0), ref(axis=0))
    versus("sosfilt", (64, 65536), np.complex128, None, filt(), ref())
    csos = butter8.astype(np.complex128) * np.exp(0.3j * np.arange(6))[None, :]
    csos[:, 3] = 1
    versus("sosfilt, complex sos", (64, 65536), np.complex64, None, filt(), ref(), sos=csos)
    versus("sosfilt, zi (streaming)", (1, 256), np.float64, None, filt(), ref(), kind="torch", zi=True, number=20)
    versus("sosfilt, 1 thread", (64, 65536), np.float64, None, filt(threads=1), ref())
    versus("sosfilt, 2 threads", (64, 65536), np.float64, None, filt(threads=2), ref())
    versus("sosfilt, 1 thread", (64, 65536), np.float32, None, filt(threads=1), ref())
    versus("sosfilt, 2 threads", (64, 65536), np.float32, None, filt(threads=2), ref())

    # calls alternating with a torch operator (torch's intra-op threads run in between)
    a = torch.randn(384, 384)
    xa = data((64, 16384), np.float32)
    sa = butter8.astype(np.float32)
    xat = torch.from_numpy(xa)
    t_ref, t_ours = timeit([lambda: ss.sosfilt(sa, xa), lambda: tsig.sosfilt(sa, xat, threads=threads)], reps,
                           between=lambda: a @ a)
    rows.append({"name": "sosfilt, each call right after a torch matmul (384x384)", "shape": "(64, 16384)",
                 "dtype": "float32", "kind": "torch", "scipy": t_ref, "ours": t_ours, "floor": None})

    # autograd: forward + backward (w.r.t. x and sos) against the forward alone
    x = torch.from_numpy(data((64, 65536), np.float32))
    w = torch.from_numpy(data((64, 65536), np.float32))
    sos_t = torch.from_numpy(butter8.astype(np.float32))

    def forward() -> None:
        with torch.no_grad():
            tsig.sosfilt(sos_t, x, threads=threads)

    def forward_backward() -> None:
        xg = x.detach().requires_grad_()
        sg = sos_t.detach().requires_grad_()
        (tsig.sosfilt(sg, xg, threads=threads) * w).sum().backward()

    zero = torch.zeros(4, 64, 2)
    t_fwd, t_fb, t_kb = timeit(
        [forward, forward_backward,
         lambda: torch.ops.tensorffi.sosfilt_backward.default(sos_t, x, -1, None, w, zero, threads)],
        max(3, reps // 2),
    )
    grad = [{"name": "sosfilt forward alone (no grad)", "ms": t_fwd * 1e3, "vs": 1.0},
            {"name": "forward + backward through autograd (loss = sum(y * w))", "ms": t_fb * 1e3, "vs": t_fb / t_fwd},
            {"name": "the backward operator alone (C adjoint, recomputes the forward)", "ms": t_kb * 1e3,
             "vs": t_kb / t_fwd}]
    return rows, grad


_FIRST_CALL = r"""
import sys, time, json
import numpy as np, scipy.signal as ss, torch
rows, n, dt = sys.argv[2].split(",")
x = np.random.default_rng(0).standard_normal((int(rows), int(n))).astype(dt)
sos = ss.butter(8, 0.2, output="sos").astype(dt)
t0 = time.perf_counter(); import tensorffi.signal as tsig; t_import = time.perf_counter() - t0
calls = {"ours": lambda: tsig.sosfilt(sos, x), "scipy": lambda: ss.sosfilt(sos, x),
         "ours_t": lambda: tsig.sosfilt(torch.from_numpy(sos), torch.from_numpy(x))}
out = {"import": t_import}
for name in sys.argv[1].split(","):
    t0 = time.perf_counter(); calls[name](); out[name] = time.perf_counter() - t0
print(json.dumps(out))
"""


def first_calls(procs: int, case: str = "64,4096,float32") -> Row:
    """First calls in fresh processes (imports excluded, lazy set-up included), of
    ``case`` = "rows,n,dtype". A large case's outputs are fresh memory in every
    process (the first touch of their pages is part of the call)."""
    got: dict[str, list[float]] = {"ours": [], "scipy": [], "ours_t": [], "import": []}
    for i in range(procs):
        order = "ours,ours_t,scipy" if i % 2 else "scipy,ours,ours_t"  # who goes first alternates
        out = subprocess.run([sys.executable, "-c", _FIRST_CALL, order, case], capture_output=True, text=True,
                             check=True, env=os.environ)
        for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items():
            got[k].append(v)
    return {k: statistics.median(v) for k, v in got.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--threads", type=int, default=None, help="tensorffi threads (default: all CPUs)")
    parser.add_argument("--runs", type=int, default=1, help="measure the table this many times")
    parser.add_argument("--simd", default="", help="comma-separated SIMD paths, one subprocess each")
    args = parser.parse_args(argv)
    if args.simd:
        rest, skip = [], False
        for a in (sys.argv[1:] if argv is None else argv):  # the arguments, less --simd and its value
            if skip or a.startswith("--simd"):
                skip = a == "--simd" and not skip
                continue
            rest.append(a)
        for level in args.simd.split(","):
            cmd = [sys.executable, os.path.abspath(__file__)] + rest
            sys.stdout.flush()
            subprocess.run(cmd, env=dict(os.environ, TENSORFFI_SIMD=level), check=True)
            print()
        return 0
    threads = tensorffi.core.resolve_threads(args.threads)
    runs = [measure(args.quick, threads) for _ in range(args.runs)]
    first = first_calls(3 if args.quick else 7)
    large = first_calls(3 if args.quick else 7, "64,65536,float64")

    print(f"## signal: sosfilt, sosfiltfilt against SciPy (SIMD path: {tsig.simd_level()})\n")
    for fact in machine_facts(threads):
        print(f"- {fact}")
    print(f"- {args.runs} run(s); in each, the median of {5 if args.quick else 15} alternating calls per peer; "
          f"ratio = SciPy time / tensorffi time (median over runs, and [min, max] when runs > 1)\n")
    print("| function | shape | dtype | input | SciPy | tensorffi | ratio | floor |")
    print("|---|---|---|---|---:|---:|---:|---|")
    for i, row in enumerate(runs[0][0]):
        ratios = [r[0][i]["scipy"] / r[0][i]["ours"] for r in runs]
        ratio = statistics.median(ratios)
        spread = f" [{min(ratios):.1f}, {max(ratios):.1f}]" if len(ratios) > 1 else ""
        t_ref = statistics.median(r[0][i]["scipy"] for r in runs)
        t_ours = statistics.median(r[0][i]["ours"] for r in runs)
        floor = row["floor"]
        mark = "" if floor is None else f">= {floor:g}x ({'met' if ratio >= floor else 'MISSED'})"
        unit, scale = ("us", 1e6) if t_ours < 1e-3 else ("ms", 1e3)
        print(f"| {row['name']} | {row['shape']} | {row['dtype']} | {row['kind']} | {t_ref * scale:.1f} {unit} | "
              f"{t_ours * scale:.1f} {unit} | {ratio:.1f}x{spread} | {mark} |")
    print()
    print(f"First calls in a fresh process (imports excluded; median of {3 if args.quick else 7} processes; "
          f"(64, 4096) float32; `import tensorffi.signal` took {first['import'] * 1e3:.0f} ms):\n")
    print("| first call | time (ms) | vs SciPy's first call |")
    print("|---|---:|---:|")
    print(f"| scipy.signal.sosfilt (NumPy) | {first['scipy'] * 1e3:.2f} | 1.0x |")
    print(f"| tensorffi.signal.sosfilt (NumPy) | {first['ours'] * 1e3:.2f} | {first['scipy'] / first['ours']:.1f}x |")
    print(f"| tensorffi.signal.sosfilt (torch, after the NumPy call) | {first['ours_t'] * 1e3:.2f} | "
          f"{first['scipy'] / first['ours_t']:.1f}x |")
    print()
    print(f"Large output, fresh process: the same, (64, 65536) float64 (33.5 MB outputs, fresh pages in every "
          f"process; median of {3 if args.quick else 7} processes):\n")
    print("| first call | time (ms) | vs SciPy's first call |")
    print("|---|---:|---:|")
    print(f"| scipy.signal.sosfilt (NumPy) | {large['scipy'] * 1e3:.2f} | 1.0x |")
    print(f"| tensorffi.signal.sosfilt (NumPy) | {large['ours'] * 1e3:.2f} | {large['scipy'] / large['ours']:.1f}x |")
    print(f"| tensorffi.signal.sosfilt (torch, after the NumPy call) | {large['ours_t'] * 1e3:.2f} | "
          f"{large['scipy'] / large['ours_t']:.1f}x |")
    print()
    grad = runs[0][1]
    print("| autograd, (64, 65536) float32, grad w.r.t. x and sos | time (ms) | vs forward |")
    print("|---|---:|---:|")
    for g in grad:
        print(f"| {g['name']} | {g['ms']:.1f} | {g['vs']:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
