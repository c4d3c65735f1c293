# SPDX-License-Identifier: MIT
"""``python -m tests.mutation``: plant each bug in a scratch copy, run its tests, report.

Exit status 0 only if every selected mutant is killed (a survivor, a stale snippet or
a harness error fails the run)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from .harness import Result, run_baseline, run_mutant
from .mutants import MUTANTS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__)
    ap.add_argument("--only", nargs="+", metavar="ID", help="run these mutants only")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="mutants run at once (default 1; 2 cores: at most 2)")
    ap.add_argument("--no-baseline", action="store_true", help="skip checking the selections pass unmutated")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copies")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per build and per test run")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the test output of survivors and errors")
    args = ap.parse_args(argv)

    chosen = MUTANTS
    if args.only:
        known = {m.id for m in MUTANTS}
        unknown = [i for i in args.only if i not in known]
        if unknown:
            ap.error(f"unknown mutant(s): {', '.join(unknown)}")
        chosen = [m for m in MUTANTS if m.id in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.id:40s} {m.file:24s} [{m.owner}] {m.effect}")
        return 0

    start = time.monotonic()
    if not args.no_baseline:
        print(f"baseline: the selections of {len(chosen)} mutant(s) on the unmutated tree ...", flush=True)
        bad = run_baseline([m.tests for m in chosen], jobs=args.jobs, timeout=args.timeout)
        if bad is not None:
            print(f"ERROR: {bad.detail}\n{bad.log}")
            return 2

    results: list[Result] = []

    def one(m):  # type: ignore[no-untyped-def]
        r = run_mutant(m, keep=args.keep, timeout=args.timeout)
        print(f"{r.outcome:9s} {m.id:40s} {r.seconds:6.0f} s  {r.detail}", flush=True)
        if args.verbose and r.outcome in ("survived", "error"):
            print(r.log)
        return r

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(one, chosen))

    counts = {k: sum(r.outcome == k for r in results) for k in ("killed", "survived", "stale", "error")}
    total = len(results)
    print(
        f"\n{counts['killed']}/{total} killed, {counts['survived']} survived, {counts['stale']} stale, "
        f"{counts['error']} error(s) in {time.monotonic() - start:.0f} s"
    )
    for r in results:
        if r.outcome != "killed":
            print(f"  {r.outcome}: {r.mutant.id} ({r.mutant.file}, owner {r.mutant.owner}): {r.detail}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([dict(id=r.mutant.id, file=r.mutant.file, owner=r.mutant.owner, outcome=r.outcome,
                            detail=r.detail, seconds=round(r.seconds, 1)) for r in results], fh, indent=1)
    return 0 if counts["killed"] == total else 1


if __name__ == "__main__":
    sys.exit(main())
