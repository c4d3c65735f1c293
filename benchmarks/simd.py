# SPDX-License-Identifier: MIT
"""Benchmark: every SIMD path of tensorffi's kernels on this CPU, side by side.

    python benchmarks/simd.py                 # all levels this CPU has (~1 min)
    python benchmarks/simd.py --quick         # fewer repetitions
    python benchmarks/simd.py --module signal # one module's cases

Each level runs in its own process with ``TENSORFFI_SIMD=scalar|avx2|avx512`` (the
variable is read at every kernel call, but a fresh process per level keeps the
levels from sharing caches, allocator state and thread start-up). A worker
process checks that the level its module reports (``tf_<module>_simd()``) is the
level it was asked for, times every case (median of alternating repetitions,
thread CPU time and wall time), and prints JSON; this process prints one Markdown
table per module: time per level, and each level's speed relative to the fastest,
with the level the module picks by default (no ``TENSORFFI_SIMD``) marked.

Adding kernels: append a :class:`Case` to ``CASES`` (or call :func:`case`) with the
module it belongs to, a name, a setup function returning the callable to time, and
the native function that reports the module's level (``tf_<module>_simd``). Setup
runs once per worker; the callable is timed.
"""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any, Callable  # noqa: E402

LEVELS = ("scalar", "avx2", "avx512")


@dataclass
class Case:
    module: str  # "signal", "physics", "io", ...
    name: str  # shown in the table
    setup: Callable[[], Callable[[], Any]]  # returns the callable to time
    level_fn: str = ""  # native function reporting the module's level ("tf_signal_simd")
    work: float = 0.0  # units of work per call (e.g. samples), for a throughput column
    unit: str = ""  # name of the unit ("Msamples/s")


CASES: list[Case] = []


def case(module: str, name: str, level_fn: str = "", work: float = 0.0, unit: str = "") -> Callable[..., Any]:
    """Decorator: register ``setup`` as a case of ``module``."""

    def register(setup: Callable[[], Callable[[], Any]]) -> Callable[[], Callable[[], Any]]:
        CASES.append(Case(module, name, setup, level_fn, work, unit))
        return setup

    return register


# --------------------------------------------------------------------------- #
# signal                                                                       #
# --------------------------------------------------------------------------- #


def _signal_case(name: str, shape: tuple[int, ...], dtype: str, fn: str = "sosfilt", wn: float = 0.2,
                 order: int = 8, axis: int = -1, complex_sos: bool = False, threads: int = 1) -> None:
    import numpy as np

    n = float(np.prod(shape))

    @case("signal", name, "tf_signal_simd", n, "Msamples/s")
    def setup() -> Callable[[], Any]:
        import scipy.signal as ss

        import tensorffi.signal as tsig

        rng = np.random.default_rng(0)
        sos = ss.butter(order, wn, output="sos")
        if complex_sos:
            sos = sos.astype(np.complex128)
            sos[:, 1] *= np.exp(0.4j)
            sos[:, 2] *= np.exp(0.8j)
            sos[:, 4] *= np.exp(0.4j)
            sos[:, 5] *= np.exp(0.8j)
        x = rng.standard_normal(shape)
        if np.dtype(dtype).kind == "c":
            x = x + 1j * rng.standard_normal(shape)
        x = x.astype(dtype)
        f = getattr(tsig, fn)
        return lambda: f(sos, x, axis=axis, dtype=dtype, threads=threads)


for _args in (
    ("sosfilt (64, 65536) float32", (64, 65536), "float32"),
    ("sosfilt (64, 65536) float64", (64, 65536), "float64"),
    ("sosfilt (64, 65536) float32, Wn=0.02 (float64 arithmetic)", (64, 65536), "float32", "sosfilt", 0.02),
    ("sosfilt (65536, 64) float32, axis=0", (65536, 64), "float32", "sosfilt", 0.2, 8, 0),
    ("sosfilt (1, 1000000) float32, 4 sections", (1, 1_000_000), "float32"),
    ("sosfilt (1, 1000000) float64, 4 sections", (1, 1_000_000), "float64"),
    ("sosfilt (1, 1000000) float32, 12 sections", (1, 1_000_000), "float32", "sosfilt", 0.2, 24),
    ("sosfilt (1, 1000000) float64, 8 sections", (1, 1_000_000), "float64", "sosfilt", 0.2, 16),
    ("sosfilt (64, 65536) complex64", (64, 65536), "complex64"),
    ("sosfilt (64, 65536) complex128", (64, 65536), "complex128"),
    ("sosfilt (64, 65536) complex64, complex sos", (64, 65536), "complex64", "sosfilt", 0.2, 8, -1, True),
    ("sosfilt (64, 65536) complex128, complex sos", (64, 65536), "complex128", "sosfilt", 0.2, 8, -1, True),
    ("sosfiltfilt (64, 65536) float32", (64, 65536), "float32", "sosfiltfilt"),
    ("sosfiltfilt (64, 65536) float64", (64, 65536), "float64", "sosfiltfilt"),
):
    _signal_case(*_args)  # type: ignore[arg-type]


def _signal_backward() -> None:
    @case("signal", "sosfilt backward (64, 16384) float32 (C adjoint)", "tf_signal_simd", 64 * 16384, "Msamples/s")
    def setup() -> Callable[[], Any]:
        import scipy.signal as ss
        import torch

        import tensorffi.signal  # noqa: F401 (registers the operators)

        sos = torch.from_numpy(ss.butter(8, 0.2, output="sos"))
        x = torch.randn(64, 16384)
        gy = torch.randn(64, 16384)
        zero = torch.zeros(4, 64, 2)
        return lambda: torch.ops.tensorffi.sosfilt_backward(sos, x, -1, None, gy, zero, 1)


_signal_backward()

# --------------------------------------------------------------------------- #
# The driver                                                                   #
# --------------------------------------------------------------------------- #


def _worker(level: str, modules: list[str], reps: int) -> dict[str, Any]:
    """Runs in a subprocess with TENSORFFI_SIMD=level: times every case."""
    from tensorffi._lib import lib

    out: dict[str, Any] = {"level": level, "cases": {}, "reported": {}}
    cases = [c for c in CASES if not modules or c.module in modules]
    fns = []
    for c in cases:
        if c.level_fn:
            out["reported"][c.module] = LEVELS[int(getattr(lib, c.level_fn)())]
        fns.append(c.setup())
    for fn in fns:
        fn()  # warm-up: binding, page faults, caches
    wall: list[list[float]] = [[] for _ in fns]
    cpu: list[list[float]] = [[] for _ in fns]
    for _ in range(reps):
        for i, fn in enumerate(fns):
            w0, c0 = time.perf_counter(), time.thread_time()
            fn()
            cpu[i].append(time.thread_time() - c0)
            wall[i].append(time.perf_counter() - w0)
    for c, w, t in zip(cases, wall, cpu):
        out["cases"][f"{c.module}\t{c.name}"] = {"wall": statistics.median(w), "cpu": statistics.median(t),
                                                "cpu_min": min(t)}
    return out


def _cpu_levels() -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "TENSORFFI_SIMD"}
    code = "from tensorffi._lib import lib; print(lib.tf_simd_level())"
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return list(LEVELS[: int(got.stdout.strip()) + 1])


def _defaults(modules: list[str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TENSORFFI_SIMD"}
    fns = {c.module: c.level_fn for c in CASES if c.level_fn and (not modules or c.module in modules)}
    code = ("import json; from tensorffi._lib import lib; L = ('scalar', 'avx2', 'avx512'); "
            f"print(json.dumps({{m: L[int(getattr(lib, f)())] for m, f in {fns!r}.items()}}))")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(got.stdout)


def machine_facts() -> list[str]:
    model = platform.processor() or "?"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",) * 3
    import tensorffi

    info = tensorffi.info()
    return [
        f"CPU: {model}, {os.cpu_count()} logical CPUs; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
        f"(at the end of the run)",
        f"tensorffi {info['version']} built with {info['compiler']} ({info['build_flags']}); "
        f"Python {platform.python_version()}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--module", action="append", default=[], help="only this module's cases (repeatable)")
    parser.add_argument("--levels", default="", help="comma-separated levels (default: all this CPU has)")
    parser.add_argument("--rounds", type=int, default=0, help="processes per level, interleaved (default 3, quick 1)")
    parser.add_argument("--worker", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    reps = 5 if args.quick else 11
    if args.worker:
        print(json.dumps(_worker(args.worker, args.module, reps)))
        return 0
    levels = args.levels.split(",") if args.levels else _cpu_levels()
    rounds = args.rounds or (1 if args.quick else 3)
    results: dict[str, dict[str, list[dict[str, float]]]] = {lv: {} for lv in levels}
    reported: dict[str, dict[str, str]] = {lv: {} for lv in levels}
    for _ in range(rounds):  # levels interleaved, so a change of load hits them alike
        for lv in levels:
            env = dict(os.environ, TENSORFFI_SIMD=lv)
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", lv] + sum(
                (["--module", m] for m in args.module), [])
            if args.quick:
                cmd.append("--quick")
            got = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
            data = json.loads(got.stdout.strip().splitlines()[-1])
            reported[lv] = data["reported"]
            for key, v in data["cases"].items():
                results[lv].setdefault(key, []).append(v)
    defaults = _defaults(args.module)
    print("## SIMD paths (`python benchmarks/simd.py`)\n")
    for fact in machine_facts():
        print(f"- {fact}")
    print(f"- {rounds} process(es) per level, levels interleaved; median of {reps} repetitions per process, "
          f"then the median over processes; one thread. Throughput from thread CPU time (wall time in "
          f"parentheses); the fastest level of each row is 1.00")
    for lv in levels:
        bad = {m: r for m, r in reported[lv].items() if r != lv}
        if bad:
            print(f"- WARNING: asked for {lv}, modules report {bad}")
    modules = sorted({key.split("\t")[0] for lv in levels for key in results[lv]})
    by_name = {(c.module, c.name): c for c in CASES}
    for mod in modules:
        print(f"\n### {mod} (default level on this CPU: {defaults.get(mod, '?')})\n")
        head = " | ".join(f"{lv}{' (default)' if defaults.get(mod) == lv else ''}" for lv in levels)
        print(f"| case | {head} |")
        print("|---|" + "---:|" * len(levels))
        keys = [k for k in results[levels[0]] if k.startswith(mod + "\t")]
        for key in keys:
            name = key.split("\t", 1)[1]
            c = by_name[(mod, name)]
            cpu = {lv: statistics.median(r["cpu"] for r in results[lv][key]) for lv in levels if key in results[lv]}
            wall = {lv: statistics.median(r["wall"] for r in results[lv][key]) for lv in levels if key in results[lv]}
            best = min(cpu.values())
            cells = []
            for lv in levels:
                if lv not in cpu:
                    cells.append("-")
                    continue
                rate = f"{c.work / cpu[lv] / 1e6:.0f} {c.unit} " if c.work else ""
                cells.append(f"{rate}{cpu[lv] * 1e3:.2f} ms ({wall[lv] * 1e3:.2f}), {best / cpu[lv]:.2f}")
            print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
