# SPDX-License-Identifier: MIT
"""Start-up time: fresh processes, tensorffi before/after beside ``import numpy`` (issue 21 item 9).

Each command runs in a new interpreter; the trees (``--before`` and this checkout) and
the ``import numpy`` peer are alternated in every round, so machine noise hits them
alike. Reported: the median wall time of each, its ratio to ``import numpy`` in the
same run, and whether torch was imported.

    python benchmarks/startup.py --before /work/main --rounds 9
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

# name -> Python code (the CLI lines are what the console script runs)
CASES = {
    "python -c 'import numpy' (peer)": "import numpy",
    "tensorffi --version": "import sys; from tensorffi.__main__ import main; sys.argv = ['tensorffi', '--version']; main()",
    "tensorffi --help": "import sys; from tensorffi.__main__ import main; sys.argv = ['tensorffi', '--help']; main()",
    "import tensorffi": "import tensorffi",
    "read_csv(like=numpy)": "import tensorffi, numpy; tensorffi.io.read_csv(b'1,2\\n', header=None, like=numpy)",
    "sosfilt(numpy)": "import numpy, tensorffi.signal as s; s.sosfilt(numpy.array([[1.0, 0, 0, 1, -0.5, 0]]), numpy.ones(8))",
    "import torch, tensorffi.io (torch users)": "import torch, tensorffi.io",
}
# after the case ran (argparse exits: so in atexit), whether torch was imported, on stderr
PROBE = "import atexit, sys\natexit.register(lambda: sys.stderr.write('\\nTORCH=%d' % ('torch' in sys.modules)))\n"


def run(code: str, tree: Path) -> tuple[float, bool]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", PROBE + code], env=env, capture_output=True, text=True, cwd="/")
    dt = time.perf_counter() - t0
    if proc.returncode != 0 or "TORCH=" not in proc.stderr:
        raise SystemExit(f"{code!r} failed under {tree}: {proc.stderr[-2000:]}")
    return dt, proc.stderr.rsplit("TORCH=", 1)[1].startswith("1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, help="a checkout of the before-state (its native module built)")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    trees = {"after": HERE} | ({"before": args.before.resolve()} if args.before else {})
    times: dict[tuple[str, str], list[float]] = {}
    torch_seen: dict[tuple[str, str], bool] = {}
    for _ in range(args.rounds):
        for name, code in CASES.items():
            for label, tree in trees.items():
                if name.endswith("(peer)") and label != "after":
                    continue
                dt, torch_loaded = run(code, tree)
                times.setdefault((name, label), []).append(dt)
                torch_seen[(name, label)] = torch_loaded
    peer = statistics.median(times[(next(iter(CASES)), "after")])
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"{args.rounds} rounds, median wall time of a fresh process")
    print("| command | tree | median | vs import numpy | torch imported |")
    print("|---|---|---:|---:|---|")
    for (name, label), ts in times.items():
        m = statistics.median(ts)
        print(f"| {name} | {label} | {m:.3f} s | {m / peer:.2f}x | {'yes' if torch_seen[(name, label)] else 'no'} |")


if __name__ == "__main__":
    main()
