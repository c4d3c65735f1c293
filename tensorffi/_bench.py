# SPDX-License-Identifier: MIT
"""``tensorffi bench``: a one-minute tour of the benchmarks on this machine.

Each line measures tensorffi and a peer in the same run, interleaved (so that load
on the machine hits both alike), and reports medians and the ratio:

* call overhead: a bound C function on a 16-element tensor (checked) against the
  seed recipe (ctypes on ``data_ptr()``, unchecked) and raw cffi (unchecked);
* ``signal.sosfilt`` against ``scipy.signal.sosfilt`` (if SciPy is installed);
* ``io.read_csv`` against ``numpy.loadtxt`` (and ``pandas.read_csv`` if installed);
* ``physics.nbody`` against the same leapfrog written in torch.

The full benchmarks (more sizes, SIMD levels, peers) are the scripts in a source
checkout's ``benchmarks/`` folder; ``tensorffi bench --full`` runs their quick modes.
"""
from __future__ import annotations

import ctypes
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

__all__ = ["tour", "full", "benchmarks_dir"]

Say = Callable[[str], None]


def benchmarks_dir() -> Path | None:
    """The ``benchmarks/`` folder of a source checkout this package runs from, if any."""
    here = Path(__file__).resolve().parent.parent / "benchmarks"
    return here if (here / "call_overhead.py").is_file() else None


def _interleaved(fns: list[Callable[[], Any]], budget: float, inner: int = 1) -> list[float]:
    """Median seconds per call of each function, rounds interleaved, ~``budget`` seconds in all."""
    for fn in fns:
        fn()  # warm up
    samples: list[list[float]] = [[] for _ in fns]
    end = time.perf_counter() + budget
    rounds = 0
    while rounds < 5 or (time.perf_counter() < end and rounds < 2001):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples[i].append((time.perf_counter() - t0) / inner)
        rounds += 1
    return [statistics.median(s) for s in samples]


def _fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def _row(say: Say, what: str, ours: float, peer_name: str, peer: float) -> None:
    say(f"  {what:<28} tensorffi {_fmt(ours):>10}   {peer_name:<20} {_fmt(peer):>10}   ratio {peer / ours:6.2f}")


def _call_overhead(say: Say, work: Path, budget: float) -> None:
    import tensorffi

    src = work / "seed.c"
    src.write_text("void process_data(float *data, int size) {\n"
                   "    for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f;\n}\n")
    lib = tensorffi.compile("bench_seed", sources=[src], cache=work / "cache")
    module_file = next((work / "cache").glob("_tf_bench_seed_*.so"))
    cdll = ctypes.CDLL(str(module_file))
    cfn = cdll.process_data
    cfn.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_int]
    cfn.restype = None
    P, cast = ctypes.POINTER(ctypes.c_float), ctypes.cast
    raw, ffi = lib.raw, lib.ffi
    fn = lib.process_data
    t = torch.zeros(16)
    ours, seed, unchecked = _interleaved(
        [lambda: fn(t, 16), lambda: cfn(cast(t.data_ptr(), P), 16),
         lambda: raw.process_data(ffi.cast("float *", t.data_ptr()), 16)], budget, inner=200)
    say("call overhead: process_data(float *data, int size) on 16 floats (checks vs none)")
    _row(say, "lib.process_data(t, 16)", ours, "ctypes seed recipe", seed)
    _row(say, "", ours, "raw cffi (ffi.cast)", unchecked)


def _sosfilt(say: Say, budget: float) -> None:
    import tensorffi.signal as tsig
    from importlib import resources

    with resources.files("tensorffi").joinpath("data/signal_ecg.npz").open("rb") as fh:
        data = np.load(fh)
        x, sos = data["x"], data["sos"]
    batch = np.ascontiguousarray(np.tile(x, (64, 3)))  # 64 channels of the shipped ECG
    say(f"signal.sosfilt: a {sos.shape[0]}-section band-pass, {batch.shape[0]} channels x {batch.shape[1]} samples, "
        f"{batch.dtype}")
    try:
        import scipy.signal as ss
    except ImportError:
        (ours,) = _interleaved([lambda: tsig.sosfilt(sos, batch)], budget)
        say(f"  {'sosfilt(sos, x)':<28} tensorffi {_fmt(ours):>10}   (pip install scipy to compare with scipy.signal)")
        return
    ours, peer = _interleaved([lambda: tsig.sosfilt(sos, batch), lambda: ss.sosfilt(sos, batch)], budget)
    _row(say, "sosfilt(sos, x)", ours, "scipy.signal.sosfilt", peer)


def _read_csv(say: Say, work: Path, budget: float) -> None:
    import tensorffi.io as tio

    rng = np.random.default_rng(0)
    rows, cols = 20_000, 8
    values = rng.standard_normal((rows, cols))
    path = work / "bench.csv"
    np.savetxt(path, values, fmt="%.9g", delimiter=",")
    size = path.stat().st_size
    say(f"io.read_csv: {rows:,} rows x {cols} columns ({size / 1e6:.1f} MB), float64")
    fns = [lambda: tio.read_csv(path, dtype=torch.float64), lambda: np.loadtxt(path, delimiter=",")]
    names = ["numpy.loadtxt"]
    try:
        import pandas as pd

        fns.append(lambda: pd.read_csv(path, header=None, dtype=np.float64).to_numpy())
        names.append("pandas.read_csv")
    except ImportError:
        pass
    times = _interleaved(fns, budget)
    for name, peer in zip(names, times[1:]):
        _row(say, "read_csv(path)" if name == names[0] else "", times[0], name, peer)


def _torch_leapfrog(pos: torch.Tensor, vel: torch.Tensor, mass: torch.Tensor, dt: float, steps: int,
                    eps2: float) -> tuple[torch.Tensor, torch.Tensor]:
    def acc(p: torch.Tensor) -> torch.Tensor:
        d = p[None, :, :] - p[:, None, :]
        inv = (d.square().sum(-1) + eps2).pow(-1.5)
        return (d * (mass[None, :] * inv)[..., None]).sum(1)

    a = acc(pos)
    for _ in range(steps):
        vel = vel + 0.5 * dt * a
        pos = pos + dt * vel
        a = acc(pos)
        vel = vel + 0.5 * dt * a
    return pos, vel


def _nbody(say: Say, budget: float) -> None:
    import tensorffi.physics as ph

    rng = np.random.default_rng(1)
    n, steps, dt, eps = 512, 5, 1e-3, 0.05
    pos = torch.from_numpy(rng.standard_normal((n, 3)))
    vel = torch.zeros(n, 3, dtype=torch.float64)
    mass = torch.full((n,), 1.0 / n, dtype=torch.float64)
    say(f"physics.nbody: {n} bodies, {steps} leapfrog steps, float64")
    ours, peer = _interleaved(
        [lambda: ph.nbody(pos, vel, mass, dt=dt, steps=steps, softening=eps),
         lambda: _torch_leapfrog(pos, vel, mass, dt, steps, eps * eps)], budget)
    _row(say, "nbody(pos, vel, mass, ...)", ours, "torch (broadcast)", peer)


def tour(say: Say = print, seconds: float = 40.0) -> int:
    """Run the tour (about ``seconds`` of measuring, plus set-up)."""
    import tensorffi

    facts = tensorffi.info()
    try:
        load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:  # pragma: no cover
        load = "?"
    say(f"tensorffi {facts['version']} on {platform.machine()} ({os.cpu_count()} CPUs, {facts['simd']} SIMD, "
        f"{facts['threads']} threads), torch {torch.__version__}, load average {load}")
    say("medians of interleaved runs; ratio = the peer's time / tensorffi's (above 1: tensorffi is faster)")
    say("")
    budget = seconds / 4
    with tempfile.TemporaryDirectory(prefix="tensorffi-bench-") as tmp:
        work = Path(tmp)
        steps: tuple[Callable[[], None], ...] = (
            lambda: _call_overhead(say, work, budget), lambda: _sosfilt(say, budget),
            lambda: _read_csv(say, work, budget), lambda: _nbody(say, budget))
        for step in steps:
            step()
            say("")
    here = benchmarks_dir()
    if here is not None:
        say(f"the full benchmarks: python {here}/<name>.py (or tensorffi bench --full); results in {here}/RESULTS.md")
    else:
        say("the full benchmarks (more sizes, SIMD levels and peers) are in the source repository's benchmarks/ folder")
    return 0


FULL = [("call_overhead.py", ["--quick"]), ("sosfilt.py", ["--quick"]), ("read_csv.py", ["--quick"]),
        ("physics.py", ["--quick"])]


def full(say: Say = print) -> int:
    """Run the quick modes of the benchmark scripts of a source checkout (several minutes)."""
    here = benchmarks_dir()
    if here is None:
        say("tensorffi bench --full needs a source checkout (its benchmarks/ folder); this install has none. "
            "Run 'tensorffi bench' for the built-in tour")
        return 2
    status = 0
    for script, args in FULL:
        say(f"== python benchmarks/{script} {' '.join(args)}")
        sys.stdout.flush()
        rc = subprocess.call([sys.executable, str(here / script), *args])
        if rc != 0:
            say(f"(benchmarks/{script} exited with status {rc}; does it need the [bench] extra? "
                f"pip install -e '.[bench]')")
            status = status or rc
    return status
