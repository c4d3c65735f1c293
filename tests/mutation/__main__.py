# SPDX-License-Identifier: MIT
"""``python -m tests.mutation``: plant each bug in a scratch copy, run its tests, report.

Exit status 0 only if every selected mutant is killed (a survivor, a stale snippet or
a harness error fails the run)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .harness import CompilerCache, Result, default_jobs, run_all
from .mutants import MUTANTS

KILLS = Path(__file__).resolve().parent / "kills.json"


def read_kills(path: Path) -> dict[str, str]:
    """The record {mutant id: node id of the test that killed it}; {} if there is none."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise SystemExit(f"{path}: expected a JSON object of mutant id -> pytest node id")
    return data


def updated_kills(record: dict[str, str], results: list[Result]) -> dict[str, str]:
    """``record`` with each kill's test where it differs (ids of removed mutants dropped).
    Survivors, stale mutants and errors leave their entry as it was."""
    new = {k: v for k, v in record.items() if k in {m.id for m in MUTANTS}}
    for r in results:
        if r.outcome == "killed" and r.killer:
            new[r.mutant.id] = r.killer
    return new


def write_kills(path: Path, record: dict[str, str]) -> None:
    order = {m.id: i for i, m in enumerate(MUTANTS)}
    ordered = dict(sorted(record.items(), key=lambda kv: order.get(kv[0], len(order))))
    path.write_text(json.dumps(ordered, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    jobs = default_jobs()
    ap = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__)
    ap.add_argument("--only", nargs="+", metavar="ID", help="run these mutants only")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("-j", "--jobs", type=int, default=jobs,
                    help=f"mutants (and baseline runs) at once, each in its own scratch copy (default: the CPUs, {jobs})")
    ap.add_argument("--no-baseline", action="store_true", help="skip checking the selections pass unmutated")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copies")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per build and per test run")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--kills", metavar="PATH", type=Path, default=KILLS,
                    help="record of the test that killed each mutant, run first and updated "
                         "(default tests/mutation/kills.json)")
    ap.add_argument("--no-kills", action="store_true",
                    help="ignore the record: each selection in its own order, record not updated")
    ap.add_argument("--cc-cache", metavar="DIR",
                    help="keep the C compiler cache in DIR across runs (default: a temporary one per run)")
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

    record = {} if args.no_kills else read_kills(args.kills)
    start = time.monotonic()
    baseline = "" if args.no_baseline else ", after the baseline (their selections pass unmutated)"
    print(f"{len(chosen)} mutant(s), {args.jobs} at a time{baseline} ...", flush=True)

    def report(r: Result) -> None:
        print(f"{r.outcome:9s} {r.mutant.id:40s} {r.seconds:6.0f} s  {r.detail}", flush=True)
        if args.verbose and r.outcome in ("survived", "error"):
            print(r.log)

    cache = CompilerCache(args.cc_cache)
    try:
        bad, results = run_all(chosen, jobs=args.jobs, timeout=args.timeout, record=record, cache=cache,
                               baseline=not args.no_baseline, keep=args.keep, on_result=report,
                               progress=(lambda line: print(line, flush=True)) if args.verbose else None)
    finally:
        cache.close()
    if bad is not None:
        print(f"ERROR: baseline: {bad.detail}\n{bad.log}")
        return 2

    counts = {k: sum(r.outcome == k for r in results) for k in ("killed", "survived", "stale", "error")}
    total = len(results)
    print(
        f"\n{counts['killed']}/{total} killed, {counts['survived']} survived, {counts['stale']} stale, "
        f"{counts['error']} error(s) in {time.monotonic() - start:.0f} s (-j {args.jobs})"
    )
    for r in results:
        if r.outcome != "killed":
            print(f"  {r.outcome}: {r.mutant.id} ({r.mutant.file}, owner {r.mutant.owner}): {r.detail}")
    if not args.no_kills:
        new = updated_kills(record, results)
        if new != record:
            write_kills(args.kills, new)
            changed = sorted(k for k in new if record.get(k) != new[k])
            print(f"{args.kills}: recorded the killing test of {len(changed)} mutant(s)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([dict(id=r.mutant.id, file=r.mutant.file, owner=r.mutant.owner, outcome=r.outcome,
                            detail=r.detail, killer=r.killer, seconds=round(r.seconds, 1)) for r in results],
                      fh, indent=1)
    return 0 if counts["killed"] == total else 1


if __name__ == "__main__":
    sys.exit(main())
