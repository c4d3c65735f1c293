# SPDX-License-Identifier: MIT
"""read_csv's reader options (issue 22): what they cost, and that they cost nothing unused.

    python benchmarks/read_csv_options.py --before /path/to/main/checkout      # both parts
    python benchmarks/read_csv_options.py --rows 200000 --rounds 5

Part 1 (only with --before, a checkout of the tree before the options, built in
place): read_csv without options, this tree against that one, in fresh worker
processes alternated round by round (before, after, before, ...): the g9 data set of
benchmarks/read_csv.py on one thread and on all threads, and a tiny 100-row input
from bytes (the one-call path, all fixed costs) -- the floors of
benchmarks/read_csv.py's tables. Part 2 (this tree): the same table written with NA
words (5% of the fields ``NA``, ``na_values=()``), with a decimal comma
(``delimiter=";"``, ``decimal=","``) and with thousands separators (``f"{x:,.4f}"``,
``delimiter=";"``, ``thousands=","``), each against the plain table of the same
values, alternated in one process; ratio = plain median / options median (1.0: as
fast; the floor is 0.8). Medians of wall time; CPU time (process_time) for the one-
thread runs, which other processes' load barely moves.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def worker(tree: str, path: str, threads: int, repeats: int, tiny: bool) -> None:
    sys.path.insert(0, tree)
    import tensorffi.io as tio

    assert Path(tio.__file__).resolve().is_relative_to(Path(tree).resolve()), tio.__file__
    if tiny:
        data = b"".join(Path(path).read_bytes().splitlines(keepends=True)[:100])
        fn = lambda: tio.read_csv(data, header=False)  # noqa: E731
        inner = 2000
    else:
        fn = lambda: tio.read_csv(path, header=False, threads=threads)  # noqa: E731
        inner = 1
    fn()
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        for _ in range(inner):
            fn()
        walls.append((time.perf_counter() - w) / inner)
        cpus.append((time.process_time() - c) / inner)
    print(statistics.median(walls), statistics.median(cpus))


def before_after(before: str, after: str, path: Path, rounds: int, threads: int) -> None:
    cases = [("g9, 1 thread", 1, False), (f"g9, {threads} threads", threads, False), ("100 rows from bytes", 1, True)]
    print("\n## part 1: no options, before / after (fresh workers, alternated)\n")
    print("| case | before wall | after wall | after/before wall | before CPU | after CPU | after/before CPU |")
    print("|---|---|---|---|---|---|---|")
    for label, th, tiny in cases:
        got: dict[str, list[tuple[float, float]]] = {before: [], after: []}
        for _ in range(rounds):
            for tree in (before, after):
                out = subprocess.run([sys.executable, __file__, "--worker", tree, "--path", str(path), "--threads",
                                      str(th), "--repeats", "5"] + (["--tiny"] if tiny else []),
                                     capture_output=True, text=True, check=True, cwd="/")
                got[tree].append(tuple(map(float, out.stdout.split())))
        bw, bc = (statistics.median(x[i] for x in got[before]) for i in (0, 1))
        aw, ac = (statistics.median(x[i] for x in got[after]) for i in (0, 1))
        unit, k = ("us", 1e6) if tiny else ("ms", 1e3)
        print(f"| {label} | {bw * k:.1f} {unit} | {aw * k:.1f} {unit} | {aw / bw:.3f} | {bc * k:.1f} {unit} | "
              f"{ac * k:.1f} {unit} | {ac / bc:.3f} |")


def options(after: str, rows: int, rounds: int, threads: int) -> None:
    import numpy as np

    sys.path.insert(0, after)
    import tensorffi.io as tio

    rng = np.random.default_rng(22)
    x = (rng.standard_normal((rows, 8)) * 10.0 ** rng.integers(-3, 4, size=(rows, 8))).astype(np.float32)
    g9 = [[f"{v:.9g}" for v in row] for row in x.tolist()]
    plain = "".join(",".join(r) + "\n" for r in g9).encode()
    na_mask = rng.random((rows, 8)) < 0.05
    na = "".join(",".join("NA" if m else s for s, m in zip(r, mr)) + "\n" for r, mr in zip(g9, na_mask)).encode()
    na_plain = "".join(",".join("" if m else s for s, m in zip(r, mr)) + "\n" for r, mr in zip(g9, na_mask)).encode()
    dec = plain.replace(b",", b";").replace(b".", b",")
    t4 = [[f"{v:,.4f}" for v in row] for row in (x.astype(np.float64) * 1000).tolist()]
    th = "".join(";".join(r) + "\n" for r in t4).encode()
    th_plain = "".join(";".join(s.replace(",", "") for s in r) + "\n" for r in t4).encode()
    pairs = [
        ("na_values (5% NA)", na_plain, {}, na, {"na_values": ()}),
        ("decimal=','", plain, {}, dec, {"delimiter": ";", "decimal": ","}),
        ("thousands=','", th_plain, {"delimiter": ";"}, th, {"delimiter": ";", "thousands": ","}),
    ]
    print(f"\n## part 2: options against the plain table of the same values ({rows} rows x 8)\n")
    print("| data | threads | plain | options | options/plain speed |")
    print("|---|---|---|---|---|")
    for label, p, pk, o, ok in pairs:
        want = tio.read_csv(p, header=False, dtype="float64", **pk)
        got = tio.read_csv(o, header=False, dtype="float64", **ok)
        assert np.array_equal(np.isnan(want.numpy()), np.isnan(got.numpy()))
        assert np.array_equal(np.nan_to_num(want.numpy()), np.nan_to_num(got.numpy())), label
        for nth in (1, threads):
            tp, to = [], []
            for _ in range(rounds):
                for data, kw, out in ((p, pk, tp), (o, ok, to)):
                    clock = time.process_time if nth == 1 else time.perf_counter
                    t = clock()
                    tio.read_csv(data, header=False, threads=nth, **kw)
                    out.append(clock() - t)
            mp, mo = statistics.median(tp), statistics.median(to)
            what = "CPU" if nth == 1 else "wall"
            print(f"| {label} | {nth} | {mp * 1e3:.1f} ms {what} | {mo * 1e3:.1f} ms {what} | {mp / mo:.2f}x |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="a checkout of the tree before the options (built in place)")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--worker")
    ap.add_argument("--path")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.path, args.threads, args.repeats, args.tiny)
        return
    after = str(HERE.parent)
    print(f"# read_csv options: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}")
    if args.before:
        sys.path.insert(0, after)
        sys.argv = [sys.argv[0]]
        sys.path.insert(0, str(HERE))
        from read_csv import dataset  # noqa: E402  (benchmarks/read_csv.py's g9 set)

        before_after(os.path.abspath(args.before), after, dataset("g9", args.rows), args.rounds, args.threads)
    options(after, args.rows, max(3, args.rounds // 2), args.threads)


if __name__ == "__main__":
    main()
