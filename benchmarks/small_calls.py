# SPDX-License-Identifier: MIT
"""Small calls (issue 9): tensorffi against its peer on inputs where the fixed cost of a
call (argument checks, dispatch, thread start) is most of the time.

    python benchmarks/small_calls.py            # about a minute, plus torch.compile's compile time
    python benchmarks/small_calls.py --quick    # fewer samples

All in one process. For each case, tensorffi and its peer are timed alternately,
sample by sample (a sample is a batch of calls lasting about a millisecond, timed as
one, divided by the calls in it); the table gives the median per call of each, and the
ratio peer / tensorffi (above 1: tensorffi is faster), beside the figures of issue 9
(measured on an earlier main). The cases:

* ``signal.sosfilt`` (1, 256) float64 NumPy with ``zi`` vs ``scipy.signal.sosfilt``;
  (2, 256) float32 torch with ``zi`` (SciPy on the same data as NumPy float32);
  (64, 4096) float32 torch, no ``zi``; order-8 Butterworth (4 sections);
* ``io.read_csv`` of 100 and 10 rows (8 columns; and 10 x 3, ``%.9g``) from bytes vs
  ``numpy.loadtxt`` on the same bytes (``BytesIO``), both to float32;
* ``physics.energy`` N = 64 float32 torch vs the same sum in eager torch
  (benchmarks/physics.py's ``energy_torch``);
* ``physics.nbody`` B = 64 systems of N = 64, one leapfrog step, float32 torch, vs the
  same step under ``torch.compile`` (the faster of physics.py's two formulations);
* a checked ``tensorffi.compile()`` call of ``void process_data(float *data, int size)``
  on 16 floats vs the seed recipe (ctypes) and raw cffi (built as in call_overhead.py).
"""
from __future__ import annotations

import os
import sys

# Run from a checkout: the repository root (its tensorffi) first on the import path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

import argparse  # noqa: E402
import ctypes  # noqa: E402
import io  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402
import scipy.signal as ss  # noqa: E402
import torch  # noqa: E402

import tensorffi  # noqa: E402
import tensorffi.io as tio  # noqa: E402
import tensorffi.physics as ph  # noqa: E402
import tensorffi.signal as tsig  # noqa: E402

sys.path.insert(1, _HERE)  # sibling benchmarks, for their peers
import call_overhead  # noqa: E402
import physics as bphys  # noqa: E402

# The figures of issue 9 (µs): (tensorffi, peer) or ranges as text.
OLD = {
    "sosfilt (1, 256) float64 NumPy, zi": "51 vs 27",
    "sosfilt (2, 256) float32 torch, zi": "141 vs 45",
    "sosfilt (64, 4096) float32 torch": "435 vs 1806",
    "read_csv 100 rows x 8 columns from bytes": "148 vs 52",
    "read_csv 10 rows x 8 columns from bytes": "",
    "read_csv 10 rows x 3 columns from bytes": "",
    "energy N=64 float32 torch": "44 vs 111",
    "nbody B=64 N=64, one step, float32 torch": "290 vs 180",
    "compile() call, 16 floats (vs seed ctypes)": "1.5-2.5 vs 1.7-2.3",
    "compile() call, 16 floats (vs raw cffi)": "1.5-2.5 vs 0.6-0.8",
}


def calibrate(fn: Callable[[], Any], target: float = 1e-3) -> int:
    """Calls per sample so that a sample lasts about ``target`` seconds."""
    for _ in range(3):
        fn()
    n, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - t0
        if t >= target / 4 or n >= 1 << 16:
            return max(1, int(n * target / max(t, 1e-9)))
        n *= 4


def interleaved(fns: dict[str, Callable[[], Any]], samples: int) -> dict[str, float]:
    """Median seconds per call of each function, timed alternately sample by sample."""
    number = {k: calibrate(f) for k, f in fns.items()}
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(samples):
        for k, f in fns.items():
            n = number[k]
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            times[k].append((time.perf_counter() - t0) / n)
    return {k: statistics.median(v) for k, v in times.items()}


def cases(work: Path) -> list[tuple[str, str, dict[str, Callable[[], Any]]]]:
    """(label, peer name, {"ours": fn, "peer": fn, ...}) for every case, checked once."""
    rng = np.random.default_rng(0)
    out: list[tuple[str, str, dict[str, Callable[[], Any]]]] = []
    sos64 = ss.butter(8, 0.2, output="sos")
    sos32 = sos64.astype(np.float32)

    # signal
    x = rng.standard_normal((1, 256))
    z = np.zeros((4, 1, 2))
    np.testing.assert_allclose(tsig.sosfilt(sos64, x, zi=z)[0], ss.sosfilt(sos64, x, zi=z)[0], rtol=0, atol=0)
    out.append(("sosfilt (1, 256) float64 NumPy, zi", "scipy.signal.sosfilt",
                {"ours": lambda: tsig.sosfilt(sos64, x, zi=z), "peer": lambda: ss.sosfilt(sos64, x, zi=z)}))
    x2 = rng.standard_normal((2, 256)).astype(np.float32)
    z2 = np.zeros((4, 2, 2), np.float32)
    x2t, z2t, s2t = torch.from_numpy(x2), torch.from_numpy(z2), torch.from_numpy(sos32)
    np.testing.assert_allclose(tsig.sosfilt(s2t, x2t, zi=z2t)[0].numpy(), ss.sosfilt(sos32, x2, zi=z2)[0],
                               rtol=1e-4, atol=1e-5)
    out.append(("sosfilt (2, 256) float32 torch, zi", "scipy.signal.sosfilt",
                {"ours": lambda: tsig.sosfilt(s2t, x2t, zi=z2t), "peer": lambda: ss.sosfilt(sos32, x2, zi=z2)}))
    x3 = rng.standard_normal((64, 4096)).astype(np.float32)
    x3t = torch.from_numpy(x3)
    np.testing.assert_allclose(tsig.sosfilt(s2t, x3t).numpy(), ss.sosfilt(sos32, x3), rtol=1e-4, atol=1e-5)
    out.append(("sosfilt (64, 4096) float32 torch", "scipy.signal.sosfilt",
                {"ours": lambda: tsig.sosfilt(s2t, x3t), "peer": lambda: ss.sosfilt(sos32, x3)}))

    # io
    for rows, cols in ((100, 8), (10, 8), (10, 3)):
        buf = io.BytesIO()
        a = (rng.standard_normal((rows, cols)) * 10.0 ** rng.integers(-3, 4, (rows, cols))).astype(np.float32)
        np.savetxt(buf, a, fmt="%.9g", delimiter=",")
        data = buf.getvalue()
        assert np.array_equal(tio.read_csv(data).numpy(), np.loadtxt(io.BytesIO(data), delimiter=",",
                                                                      dtype=np.float32))
        out.append((f"read_csv {rows} rows x {cols} columns from bytes", "numpy.loadtxt",
                    {"ours": lambda data=data: tio.read_csv(data),
                     "peer": lambda data=data: np.loadtxt(io.BytesIO(data), delimiter=",", dtype=np.float32)}))

    # physics
    pos, vel, mass = (torch.from_numpy(a) for a in bphys.system(1, 64))
    eps = bphys.EPS
    torch.testing.assert_close(ph.energy(pos, vel, mass, G=1.0, softening=eps).double(),
                               bphys.energy_torch(pos.double(), vel.double(), mass.double(), 1.0, eps),
                               rtol=1e-5, atol=1e-6)
    out.append(("energy N=64 float32 torch", "torch eager",
                {"ours": lambda: ph.energy(pos, vel, mass, G=1.0, softening=eps),
                 "peer": lambda: bphys.energy_torch(pos, vel, mass, 1.0, eps)}))
    bp, bv, bm = (torch.from_numpy(a) for a in bphys.system(64, 64))
    eps2 = eps * eps
    compiled = {name: torch.compile(step, dynamic=False) for name, step in bphys.FORMULATIONS.items()}
    ours_pos = ph.nbody(bp, bv, bm, dt=bphys.DT, G=1.0, softening=eps)[0]
    peers: dict[str, Callable[[], Any]] = {}
    for name, step in compiled.items():
        torch.testing.assert_close(step(bp, bv, bm, bphys.DT, 1.0, eps2)[0], ours_pos, rtol=1e-4, atol=1e-5)
        peers[name] = lambda step=step: step(bp, bv, bm, bphys.DT, 1.0, eps2)
    best = min(peers, key=lambda k: interleaved({k: peers[k]}, 7)[k])
    out.append(("nbody B=64 N=64, one step, float32 torch", f"torch.compile ({best})",
                {"ours": lambda: ph.nbody(bp, bv, bm, dt=bphys.DT, G=1.0, softening=eps), "peer": peers[best]}))

    # a bring-your-own call
    libs = call_overhead.build(work)
    t = torch.zeros(16, dtype=torch.float32)
    c_fn, P, cast = libs["ctypes"], ctypes.POINTER(ctypes.c_float), ctypes.cast
    raw_lib, fcast = libs["raw"].lib, libs["raw"].ffi.cast
    comp_fn = libs["compile"].process_data
    out.append(("compile() call, 16 floats", "seed recipe (ctypes); raw cffi",
                {"ours": lambda: comp_fn(t, t.numel()),
                 "peer": lambda: c_fn(cast(t.data_ptr(), P), t.numel()),
                 "raw": lambda: raw_lib.process_data(fcast("float *", t.data_ptr()), t.numel())}))
    return out


def fmt(sec: float) -> str:
    return f"{sec * 1e6:.2f}" if sec < 1e-5 else f"{sec * 1e6:.0f}" if sec >= 1e-4 else f"{sec * 1e6:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--runs", type=int, default=3, help="measure every case this many times (default 3)")
    parser.add_argument("--torch-threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    samples = 9 if args.quick else 31
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        todo = cases(Path(tmp))
        results: list[list[dict[str, float]]] = [[] for _ in todo]
        for _ in range(args.runs):
            for i, (_, _, fns) in enumerate(todo):
                results[i].append(interleaved(fns, samples))
    load = os.getloadavg()
    info = tensorffi.info()
    print("## Small calls (issue 9)\n")
    print(f"- {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; load average {load[0]:.2f} "
          f"{load[1]:.2f} {load[2]:.2f} (at the end); tensorffi {info['version']}, SIMD signal "
          f"{info['simd_signal']}, physics {info['simd_physics']}, parse {info['simd_parse']}; tensorffi threads "
          f"{tensorffi.get_num_threads()}, torch threads {torch.get_num_threads()}; torch {torch.__version__}")
    print(f"- {args.runs} run(s) of every case; in each, the median per call of {samples} interleaved samples "
          f"(each sample a batch of calls of about 1 ms). Times: median over runs; ratio = peer / tensorffi "
          f"(median over runs [min, max]); above 1: tensorffi faster\n")
    print("| case | tensorffi µs | peer | peer µs | ratio | peer µs per run | issue 9: tensorffi vs peer µs |")
    print("|---|---:|---|---:|---:|---|---|")
    for (label, peer, fns), res in zip(todo, results):
        peer_keys = [k for k in fns if k != "ours"]
        names = peer.split("; ")
        for key, name in zip(peer_keys, names):
            ratios = [r[key] / r["ours"] for r in res]
            ours_t = statistics.median(r["ours"] for r in res)
            peer_t = statistics.median(r[key] for r in res)
            old_key = label if len(peer_keys) == 1 else f"{label} (vs {'seed ctypes' if key == 'peer' else key + ' cffi'})"
            print(f"| {label} | {fmt(ours_t)} | {name} | {fmt(peer_t)} | {statistics.median(ratios):.2f}x "
                  f"[{min(ratios):.2f}, {max(ratios):.2f}] | {', '.join(fmt(r[key]) for r in res)} | {OLD.get(old_key, '')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
