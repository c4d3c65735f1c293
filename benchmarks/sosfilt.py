# SPDX-License-Identifier: MIT
"""Benchmark: tensorffi.signal against scipy.signal, measured in the same run.

    python benchmarks/sosfilt.py            # full run (~1 min)
    python benchmarks/sosfilt.py --quick    # a few repetitions (~15 s)

Prints a Markdown table of median throughputs (Msamples/s) and their ratios, and
the machine facts. SciPy gets the same data in the same dtype (its sos cast to
that dtype, so both return that dtype); the two are timed alternately, so noise
from a shared machine hits both alike. Order-8 Butterworth = 4 sections.
"""
from __future__ import annotations

import os
import sys

# Run from a checkout: the repository root (its tensorffi) first on the import path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

import argparse  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from typing import Callable  # noqa: E402

import numpy as np  # noqa: E402
import scipy  # noqa: E402
import scipy.signal as ss  # noqa: E402
import torch  # noqa: E402

import tensorffi  # noqa: E402
import tensorffi.signal as tsig  # noqa: E402


def timeit(fns: list[Callable[[], object]], reps: int, min_time: float = 0.0) -> list[float]:
    """Median seconds per call of each function, the functions run alternately."""
    for fn in fns:
        fn()  # warm-up (page faults, thread start, lazy binding)
    times: list[list[float]] = [[] for _ in fns]
    start = time.perf_counter()
    r = 0
    while r < reps or time.perf_counter() - start < min_time:
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t0)
        r += 1
    return [statistics.median(t) for t in times]


def machine_facts() -> list[str]:
    model = platform.processor() or "?"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    info = tensorffi.info()
    return [
        f"CPU: {model}; {os.cpu_count()} logical CPUs, tensorffi threads: {info['threads']}; SIMD: {info['simd']}",
        f"Python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"torch {torch.__version__}, tensorffi {info['version']} ({info['compiler']} {info['build_flags']})",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--threads", type=int, default=None, help="tensorffi threads (default: all CPUs)")
    args = parser.parse_args(argv)
    reps = 5 if args.quick else 21
    threads = tensorffi.core.resolve_threads(args.threads)
    rng = np.random.default_rng(0)

    rows: list[tuple[str, str, str, float, float, str]] = []

    Fn = Callable[[np.ndarray, np.ndarray], object]

    def versus(name: str, shape: tuple[int, ...], dtype: type, sos: np.ndarray, floor: str, ours: Fn, theirs: Fn) -> None:
        x = rng.standard_normal(shape).astype(dtype)
        s_dt = sos.astype(dtype)
        t_ref, t_ours = timeit([lambda: theirs(s_dt, x), lambda: ours(sos, x)], reps)
        n = x.size / 1e6
        rows.append((name, str(shape), np.dtype(dtype).name, n / t_ref, n / t_ours, floor))

    butter8 = ss.butter(8, 0.2, output="sos")     # poles within radius 0.9: float32 arithmetic
    butter8_low = ss.butter(8, 0.02, output="sos")  # poles near 1: float32 data in float64 arithmetic
    filt = lambda s, x: tsig.sosfilt(s, x, threads=threads)  # noqa: E731
    ffilt = lambda s, x: tsig.sosfiltfilt(s, x, threads=threads)  # noqa: E731

    versus("sosfilt", (64, 65536), np.float32, butter8, ">= 8x", filt, ss.sosfilt)
    versus("sosfilt", (64, 65536), np.float64, butter8, ">= 4x", filt, ss.sosfilt)
    versus("sosfilt", (1, 1_000_000), np.float32, butter8, ">= 1.5x", filt, ss.sosfilt)
    versus("sosfilt", (1, 1_000_000), np.float64, butter8, ">= 1.5x", filt, ss.sosfilt)
    versus("sosfiltfilt", (64, 65536), np.float32, butter8, ">= 4x", ffilt, ss.sosfiltfilt)
    versus("sosfiltfilt", (64, 65536), np.float64, butter8, "", ffilt, ss.sosfiltfilt)
    # beyond the floors: a low cutoff (float32 data filtered in float64 arithmetic),
    # time-major data filtered along axis 0, and one thread
    versus("sosfilt, Wn=0.02", (64, 65536), np.float32, butter8_low, "", filt, ss.sosfilt)
    versus("sosfilt, axis=0", (65536, 64), np.float32, butter8, "",
           lambda s, x: tsig.sosfilt(s, x, axis=0, threads=threads), lambda s, x: ss.sosfilt(s, x, axis=0))
    versus("sosfilt, 1 thread", (64, 65536), np.float32, butter8, "",
           lambda s, x: tsig.sosfilt(s, x, threads=1), ss.sosfilt)
    versus("sosfilt, 1 thread", (64, 65536), np.float64, butter8, "",
           lambda s, x: tsig.sosfilt(s, x, threads=1), ss.sosfilt)

    # autograd: forward + backward (w.r.t. x and sos) against the forward alone
    x = torch.from_numpy(rng.standard_normal((64, 65536)).astype(np.float32))
    w = torch.from_numpy(rng.standard_normal((64, 65536)).astype(np.float32))
    sos_t = torch.from_numpy(butter8)

    def forward() -> None:
        with torch.no_grad():
            tsig.sosfilt(sos_t, x, threads=threads)

    def forward_backward() -> None:
        xg = x.detach().requires_grad_()
        sg = sos_t.detach().requires_grad_()
        (tsig.sosfilt(sg, xg, threads=threads) * w).sum().backward()

    x3 = x.reshape(64, 65536, 1)
    w3 = w.reshape(64, 65536, 1)
    t_fwd, t_fb, t_kf, t_kb = timeit(
        [
            forward,
            forward_backward,
            lambda: tsig._sosfilt_forward(sos_t, x3, None, threads),
            lambda: tsig._sosfilt_backward(sos_t, x3, None, w3, None, threads),
        ],
        max(3, reps // 2),
    )

    print("## signal (IIR filtering: sosfilt, sosfiltfilt)\n")
    for fact in machine_facts():
        print(f"- {fact}")
    print(f"- median of {reps} alternating runs each; throughput = input samples / time; "
          f"order-8 Butterworth (4 sections), Wn = 0.2 unless noted\n")
    print("| function | shape | dtype | SciPy Msamples/s | tensorffi Msamples/s | ratio | floor |")
    print("|---|---|---|---:|---:|---:|---|")
    for name, shape, dt, ref, ours, floor in rows:
        ratio = ours / ref
        mark = ""
        if floor:
            need = float(floor.split()[1].rstrip("x"))
            mark = " (met)" if ratio >= need else " (MISSED)"
        print(f"| {name} | {shape} | {dt} | {ref:.0f} | {ours:.0f} | {ratio:.1f}x | {floor}{mark} |")
    print()
    print("| autograd, (64, 65536) float32, grad w.r.t. x and sos | time (ms) | vs forward |")
    print("|---|---:|---:|")
    print(f"| sosfilt forward alone (no grad) | {t_fwd * 1e3:.1f} | 1.0x |")
    print(f"| forward + backward through autograd (loss = sum(y * w)) | {t_fb * 1e3:.1f} | {t_fb / t_fwd:.1f}x |")
    print(f"| the C kernels alone: forward | {t_kf * 1e3:.1f} | {t_kf / t_fwd:.1f}x |")
    print(f"| the C kernels alone: backward (adjoint, recomputes the forward) | {t_kb * 1e3:.1f} | "
          f"{t_kb / t_fwd:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
