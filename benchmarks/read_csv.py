# SPDX-License-Identifier: MIT
"""Numeric CSV -> contiguous float32 tensor: tensorffi.io.read_csv against its peers.

    python benchmarks/read_csv.py            # 1,000,000 rows x 8 columns (~80 MB), 5 repeats
    python benchmarks/read_csv.py --quick    # 200,000 rows, 3 repeats

The file is generated once (benchmarks/_work/, ignored by git) and read once before
timing, so the page cache is warm. Every method ends with a C-contiguous float32
torch tensor of shape (rows, 8); runs are interleaved round-robin and each method's
median wall time is reported, with ratios of medians (peer / tensorffi, higher means
tensorffi is faster). Peers: pandas.read_csv(engine="c"), numpy.loadtxt,
pyarrow.csv.read_csv and polars.read_csv (the last two are multi-threaded).

A second data set holds full-precision values (17 significant digits, float64
repr), where the Eisel-Lemire path runs instead of the short-mantissa fast path.
"""
from __future__ import annotations

import sys
from pathlib import Path

# Run from a checkout: the repository root (its tensorffi) first on the import path.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing

import argparse
import os
import platform
import statistics
import subprocess
import time
from typing import Callable

import numpy as np
import torch

import tensorffi  # noqa: E402
import tensorffi.io  # noqa: E402

WORK = HERE / "_work"
COLS = 8


def generate_short(path: Path, rows: int, seed: int = 0) -> None:
    """rows x 8 uniform values written as 0.ddddddd (10 bytes a field: ~80 MB per 1M rows)."""
    rng = np.random.default_rng(seed)
    ints = rng.integers(0, 10**7, size=(rows, COLS))
    buf = np.empty((rows, COLS, 10), dtype=np.uint8)
    buf[:, :, 0] = ord("0")
    buf[:, :, 1] = ord(".")
    for k in range(8, 1, -1):
        buf[:, :, k] = ord("0") + ints % 10
        ints //= 10
    buf[:, :, 9] = ord(",")
    buf[:, -1, 9] = ord("\n")
    path.write_bytes(buf.tobytes())


def generate_long(path: Path, rows: int, seed: int = 1) -> None:
    """rows x 8 standard-normal float64 values in repr form (about 19 bytes a field)."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        step = 100_000
        for start in range(0, rows, step):
            block = rng.standard_normal((min(step, rows - start), COLS))
            f.write("\n".join(",".join(map(repr, row)) for row in block.tolist()))
            f.write("\n")


def dataset(name: str, rows: int) -> Path:
    WORK.mkdir(exist_ok=True)
    path = WORK / f"{name}_{rows}x{COLS}.csv"
    if not path.exists():
        print(f"generating {path} ...", file=sys.stderr)
        tmp = path.with_suffix(".tmp")
        (generate_short if name == "short" else generate_long)(tmp, rows)
        tmp.rename(path)
    path.read_bytes()  # warm the page cache
    return path


def contiguous_f32(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def methods(path: Path, threads: int, full: bool) -> dict[str, Callable[[], torch.Tensor]]:
    import pandas as pd

    m: dict[str, Callable[[], torch.Tensor]] = {
        f"tensorffi.io.read_csv ({threads} threads)": lambda: tensorffi.io.read_csv(path, header=False, threads=threads),
        "tensorffi.io.read_csv (1 thread)": lambda: tensorffi.io.read_csv(path, header=False, threads=1),
        'pandas.read_csv(engine="c")': lambda: contiguous_f32(
            pd.read_csv(path, header=None, engine="c", dtype=np.float32).to_numpy()
        ),
    }
    if full:
        try:
            import pyarrow.csv as pacsv

            def arrow() -> torch.Tensor:
                table = pacsv.read_csv(
                    path,
                    read_options=pacsv.ReadOptions(autogenerate_column_names=True),
                    convert_options=pacsv.ConvertOptions(column_types={f"f{j}": "float32" for j in range(COLS)}),
                )
                out = np.empty((table.num_rows, table.num_columns), dtype=np.float32)
                for j, col in enumerate(table.columns):
                    out[:, j] = col.to_numpy()
                return torch.from_numpy(out)

            m["pyarrow.csv.read_csv"] = arrow
        except ImportError:
            pass
        try:
            import polars as pl

            schema = {f"column_{j + 1}": pl.Float32 for j in range(COLS)}
            m["polars.read_csv"] = lambda: contiguous_f32(pl.read_csv(path, has_header=False, schema=schema).to_numpy())
        except ImportError:
            pass
        m["numpy.loadtxt"] = lambda: contiguous_f32(np.loadtxt(path, delimiter=",", dtype=np.float32))
    return m


def measure(fns: dict[str, Callable[[], torch.Tensor]], repeats: int, slow: set[str]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in fns}
    reference = None
    for rep in range(repeats):
        for name, fn in fns.items():
            if name in slow and rep >= max(1, repeats // 3):
                continue  # slow peers: fewer runs
            t0 = time.perf_counter()
            out = fn()
            times[name].append(time.perf_counter() - t0)
            assert out.dtype is torch.float32 and out.is_contiguous() and out.shape[1] == COLS, name
            if reference is None:
                reference = out
            elif not torch.allclose(out, reference, rtol=1e-6, atol=0, equal_nan=True):
                raise AssertionError(f"{name} disagrees with {next(iter(fns))}")
            del out
    return times


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    versions = [f"torch {torch.__version__}", f"numpy {np.__version__}"]
    for mod in ("pandas", "pyarrow", "polars"):
        try:
            versions.append(f"{mod} {__import__(mod).__version__}")
        except ImportError:
            pass
    info = tensorffi.info()
    return (
        f"{model}, {os.cpu_count()} CPUs ({info['cpu_count']} usable), tensorffi {info['version']} "
        f"({info['simd']} SIMD, {info['build_flags']}), Python {platform.python_version()}, " + ", ".join(versions)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200,000 rows, 3 repeats, short data set only")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None, help="threads for the all-cores run (default: all)")
    args = parser.parse_args()
    rows = args.rows or (200_000 if args.quick else 1_000_000)
    repeats = args.repeats or (3 if args.quick else 5)
    threads = args.threads or tensorffi.get_num_threads()

    print(f"Machine: {machine()}\n")
    sets = [("short", True)] + ([] if args.quick else [("long", False)])
    for name, full in sets:
        path = dataset(name, rows)
        size_mb = path.stat().st_size / 1e6
        fns = methods(path, threads, full)
        times = measure(fns, repeats, slow={"numpy.loadtxt"})
        med = {k: statistics.median(v) for k, v in times.items()}
        ours_all = med[f"tensorffi.io.read_csv ({threads} threads)"]
        ours_one = med["tensorffi.io.read_csv (1 thread)"]
        what = "0.ddddddd uniform values" if name == "short" else "float64 repr values (17 digits)"
        print(f"### {rows:,} rows x {COLS} columns, {what}: {size_mb:.0f} MB -> float32 tensor\n")
        print("| method | median s | MB/s | runs | ratio vs tensorffi all threads | ratio vs tensorffi 1 thread |")
        print("|---|---:|---:|---:|---:|---:|")
        for k, v in med.items():
            print(
                f"| {k} | {v:.3f} | {size_mb / v:.0f} | {len(times[k])} | {v / ours_all:.2f}x | {v / ours_one:.2f}x |"
            )
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
