# SPDX-License-Identifier: MIT
"""Before/after: tensorffi.signal on two checkouts, alternated in one run (issue 23 step 2).

    python benchmarks/signal_one_road.py --before /path/to/main-checkout          # ~3 minutes
    python benchmarks/signal_one_road.py --before ../base --rounds 6 --quick

Both checkouts need their native module built in place (``python build_ffi.py``). The
parent runs one child process per checkout and round, alternating before/after (so a
change of load on a shared machine hits both alike); each child times every case
(a sample is a batch of calls lasting ~2 ms, divided by its calls; the median of the
samples, in wall-clock time and in the CPU time of the process, all threads) and checks
its results against SciPy. The table gives, per case, the median over rounds of each
side's medians, and the ratios before / after (above 1: faster now). On a shared
machine the CPU-time ratio is the steadier one: time spent descheduled while other
processes run does not count in it (page faults and the kernel's work do).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

_CHILD = r"""
import json, statistics, sys, time
import numpy as np, scipy.signal as ss, torch
import tensorffi.signal as tsig
quick = sys.argv[1] == "1"
rng = np.random.default_rng(0)
sos64 = ss.butter(8, 0.2, output="sos")
sos32 = sos64.astype(np.float32)
s32t = torch.from_numpy(sos32)
def data(shape, dt=np.float64):
    return rng.standard_normal(shape).astype(dt)
x1, z1 = data((1, 256)), np.zeros((4, 1, 2))
x2t, z2t = torch.from_numpy(data((2, 256), np.float32)), torch.zeros(4, 2, 2)
x3t = torch.from_numpy(data((64, 4096), np.float32))
x4 = data((4, 256, 3))
xl = data((64, 65536), np.float32)
xlt = torch.from_numpy(xl)
xa0 = data((65536, 64), np.float32)
xc = (data((64, 16384)) + 1j * data((64, 16384))).astype(np.complex64)
cases = {
    "sosfilt (1, 256) float64 NumPy, zi": lambda: tsig.sosfilt(sos64, x1, zi=z1),
    "sosfilt (1, 256) float64 NumPy": lambda: tsig.sosfilt(sos64, x1),
    "sosfilt (2, 256) float32 torch, zi (float32 sos)": lambda: tsig.sosfilt(s32t, x2t, zi=z2t),
    "sosfilt (2, 256) float32 torch (float32 sos)": lambda: tsig.sosfilt(s32t, x2t),
    "sosfilt (64, 4096) float32 torch": lambda: tsig.sosfilt(s32t, x3t),
    "sosfilt (4, 256, 3) float64 NumPy, axis=1": lambda: tsig.sosfilt(sos64, x4, axis=1),
    "sosfiltfilt (1, 256) float64 NumPy": lambda: tsig.sosfiltfilt(sos64, x1),
    "sosfiltfilt (2, 256) float32 torch": lambda: tsig.sosfiltfilt(s32t, x2t),
    "sosfilt (64, 65536) float32 NumPy": lambda: tsig.sosfilt(sos32, xl),
    "sosfilt (64, 65536) float32 torch": lambda: tsig.sosfilt(s32t, xlt),
    "sosfilt (65536, 64) float32 NumPy, axis=0": lambda: tsig.sosfilt(sos32, xa0, axis=0),
    "sosfilt (64, 16384) complex64 NumPy": lambda: tsig.sosfilt(sos32, xc),
    "sosfiltfilt (64, 65536) float32 NumPy": lambda: tsig.sosfiltfilt(sos32, xl),
}
# the results are SciPy's (a timing of wrong results would be worthless)
assert np.allclose(tsig.sosfilt(sos64, x1, zi=z1)[0], ss.sosfilt(sos64, x1, zi=z1)[0], rtol=0, atol=0)
assert np.allclose(tsig.sosfilt(s32t, x2t, zi=z2t)[0].numpy(), ss.sosfilt(sos32, x2t.numpy(), zi=z2t.numpy())[0],
                   rtol=1e-4, atol=1e-5)
assert np.array_equal(tsig.sosfilt(sos64, x4, axis=1), ss.sosfilt(sos64, x4, axis=1))
out = {}
for name, fn in cases.items():
    fn()
    t0 = time.perf_counter(); fn(); once = max(time.perf_counter() - t0, 1e-7)
    number = max(1, int(2e-3 / once))
    wall, cpu = [], []
    for _ in range(5 if quick else 15):
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(number):
            fn()
        wall.append((time.perf_counter() - t0) / number)
        cpu.append((time.process_time() - c0) / number)
    out[name] = (statistics.median(wall), statistics.median(cpu))
print(json.dumps(out))
"""


def run(tree: str, quick: bool) -> dict[str, list[float]]:
    env = dict(os.environ, PYTHONPATH=tree)
    proc = subprocess.run([sys.executable, "-c", _CHILD, "1" if quick else "0"], capture_output=True, text=True,
                          env=env, cwd=tree, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="checkout of the before-state (native module built)")
    parser.add_argument("--after", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    got: dict[str, list[dict[str, list[float]]]] = {"before": [], "after": []}
    for r in range(args.rounds):
        order = ("before", "after") if r % 2 == 0 else ("after", "before")
        for side in order:
            got[side].append(run(getattr(args, side), args.quick))
    load = os.getloadavg()
    print(f"- {platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end; {args.rounds} rounds, before/after alternated; "
          f"Python {platform.python_version()}\n")
    print("| case | before (wall) | after (wall) | before / after (wall) | before / after (CPU time) |")
    print("|---|---:|---:|---:|---:|")
    for name in got["before"][0]:
        b, a = ([statistics.median(g[name][k] for g in got[side]) for k in (0, 1)] for side in ("before", "after"))
        unit, scale = ("us", 1e6) if max(a[0], b[0]) < 1e-3 else ("ms", 1e3)
        print(f"| {name} | {b[0] * scale:.1f} {unit} | {a[0] * scale:.1f} {unit} | {b[0] / a[0]:.2f}x | "
              f"{b[1] / a[1]:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
