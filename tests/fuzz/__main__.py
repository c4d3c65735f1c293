# SPDX-License-Identifier: MIT
"""``python -m tests.fuzz``: fuzz read_csv and the bridge for a while.

Half the time goes to CSV cases (csvfuzz: valid tables in many formats and byte-level
mutations of them, checked against the reference parser), half to the bridge's
properties (tests/test_fuzz_bridge.py under Hypothesis, with fresh draws unless
--seed is given). Exit status 0 only if nothing failed; a CSV failure prints the seed
and case that reproduce it and saves the input under --out."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from . import csvfuzz, csvopts

ROOT = Path(__file__).resolve().parents[2]


def fuzz_csv(seconds: float, seed: int | None, out: Path) -> tuple[int, dict[str, int]]:
    base = seed if seed is not None else int(np.random.SeedSequence().entropy % 2**31)
    deadline = time.monotonic() + seconds
    totals = {"ok": 0, "error": 0}
    k = 0
    while time.monotonic() < deadline:
        s = base * 1_000_003 + k
        try:
            # alternately: the grammar's fuzzer, and integer tables with the reader options
            for key, v in (csvfuzz.run(s, 50) if k % 2 == 0 else csvopts.run(s, 50)).items():
                totals[key] += v
        except csvfuzz.Mismatch as exc:
            out.mkdir(parents=True, exist_ok=True)
            (out / f"csv-seed-{s}.txt").write_text(str(exc))
            which = "csvfuzz" if k % 2 == 0 else "csvopts"
            print(f"CSV FAILURE (reproduce: {which}.run({s}, 50)):\n{exc}", flush=True)
            return 1, totals
        k += 1
    print(f"csv: {sum(totals.values())} cases ({totals['ok']} parsed, {totals['error']} ParseErrors as expected), "
          f"base seed {base}", flush=True)
    return 0, totals


def fuzz_bridge(seconds: float, seed: int | None) -> int:
    # Quick-run examples per property, scaled to the time (about 25 s per 80 on this machine).
    examples = max(20, int(80 * seconds / 25))
    env = dict(os.environ, TENSORFFI_FUZZ_QUICK=str(examples))
    if seed is None:
        env["HYPOTHESIS_PROFILE"] = "random"
    else:
        env["TENSORFFI_HYPOTHESIS_SEED"] = str(seed)
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--no-header",
           "-m", "not slow", "tests/test_fuzz_bridge.py", "tests/fuzz/test_fuzz_regressions.py"]
    print(f"bridge: {' '.join(cmd[2:])} with {examples} examples per property", flush=True)
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    ap.add_argument("--seconds", type=float, default=120, help="total fuzzing time (default 120)")
    ap.add_argument("--seed", type=int, help="fixed seed (default: fresh)")
    ap.add_argument("--only", choices=["csv", "bridge"], help="one harness only")
    ap.add_argument("--out", type=Path, default=ROOT / ".fuzz-failures", help="where failing inputs go")
    args = ap.parse_args(argv)
    share = 1.0 if args.only else 0.5
    rc = 0
    if args.only in (None, "csv"):
        rc |= fuzz_csv(args.seconds * share, args.seed, args.out)[0]
    if args.only in (None, "bridge") and rc == 0:
        rc |= fuzz_bridge(args.seconds * share, args.seed) != 0
    return rc


if __name__ == "__main__":
    sys.exit(main())
