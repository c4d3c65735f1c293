# SPDX-License-Identifier: MIT
"""Numeric CSV -> contiguous float32 tensor: tensorffi.io.read_csv against its peers, with
the white-space rows (delimiter=None, issue 22): the read_csv.py of that branch, kept whole
beside the integer rows' read_csv.py (they were written at the same time; folding the
--whitespace sets into read_csv.py is left to do).

    python benchmarks/read_csv_ws.py                  # 1,000,000 rows x 8 columns, three data sets, 5 repeats
    python benchmarks/read_csv_ws.py --quick          # 200,000 rows, 3 repeats
    python benchmarks/read_csv_ws.py --sets g9 --repeats 7
    python benchmarks/read_csv_ws.py --tiny-only      # 10 and 100 rows from bytes vs numpy.loadtxt
    python benchmarks/read_csv_ws.py --alternating    # also: each call right after a torch op (g9 set)
    python benchmarks/read_csv_ws.py --sets g9 --whitespace --before /path/to/older/checkout
                                                   # delimiter=None vs ",", numpy.loadtxt, pandas sep=r"\s+";
                                                   # the comma path, this tree vs an older one (built in place)

Data sets (generated once into benchmarks/_work/, ignored by git, read once before
timing so that the page cache is warm):

    g9     np.savetxt(fmt="%.9g") of float32(standard_normal * 10**randint(-3, 4)):
           float32 at full precision, mixed magnitudes (realistic sensor/feature data)
    g17    np.savetxt(fmt="%.17g") of standard_normal float64 (full float64 repr)
    short  0.ddddddd uniform values (7 digits, no exponent)
    g9ws   the g9 values, written with np.savetxt's default delimiter (a space)
    g9al   the g9 values in space-aligned columns (fmt="%16.9g": 2 to 10 blanks
           before each value, the line's first included)

Every method ends with a C-contiguous float32 torch tensor of shape (rows, 8). Runs
are interleaved round-robin in one fresh process, so the first calls (binding the
native functions, first page faults) are among the samples; each method's median wall
time is reported, with ratios of medians (pandas / method: above 1 means the method is
faster than pandas). Single-threaded methods also get the median CPU time of the
process (time.process_time), which other processes' load barely moves: on a shared
machine their CPU ratio is the steadier figure. tensorffi runs at each SIMD level this CPU has (TENSORFFI_SIMD is read per
call), with one thread and with all threads. Peers: pandas.read_csv(engine="c"),
pyarrow and polars when installed (multi-threaded), numpy.loadtxt (once, it is slow).

Whitespace (--whitespace, issue 22): the g9 values as g9 (commas), g9ws and g9al,
read into float32 by read_csv(delimiter=",") and read_csv(delimiter=None) at each
SIMD level on one thread and on all, and by numpy.loadtxt (its default delimiter,
None: once, it is slow) and pandas.read_csv(sep=r"\s+", engine="c"), interleaved
in one process; "speed vs ','" is the comma file's median over the method's (the
same level and threads; 1.0: as fast). --before TREE: read_csv of the g9 file in
fresh worker processes of this tree and of TREE, alternated (before, after, ...),
as benchmarks/read_csv_options.py does.

Tiny inputs: read_csv of 10 and 100 rows (%.9g, 8 columns) from bytes against
numpy.loadtxt on the same bytes through BytesIO, interleaved; the median of 7 timing
loops each.
"""
from __future__ import annotations

import sys
from pathlib import Path

# Run from a checkout: the repository root (its tensorffi) first on the import path.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import argparse
import io
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
SIMD = ["scalar", "avx2", "avx512"]


def mixed_float32(rng: np.random.Generator, rows: int) -> np.ndarray:
    x = rng.standard_normal((rows, COLS)) * 10.0 ** rng.integers(-3, 4, size=(rows, COLS))
    return x.astype(np.float32)


def generate(name: str, path: Path, rows: int) -> None:
    rng = np.random.default_rng({"g9": 0, "g9ws": 0, "g9al": 0, "g17": 1, "short": 2}[name])
    if name == "short":
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
        return
    with open(path, "wb") as f:
        step = 100_000
        for start in range(0, rows, step):
            n = min(step, rows - start)
            block = mixed_float32(rng, n) if name.startswith("g9") else rng.standard_normal((n, COLS))
            if name == "g9ws":
                np.savetxt(f, block, fmt="%.9g")  # np.savetxt's default delimiter: a space
            elif name == "g9al":
                np.savetxt(f, block, fmt="%16.9g", delimiter="")  # space-aligned columns
            else:
                np.savetxt(f, block, fmt="%.9g" if name == "g9" else "%.17g", delimiter=",")


def dataset(name: str, rows: int) -> Path:
    WORK.mkdir(exist_ok=True)
    path = WORK / f"{name}_{rows}x{COLS}.{'txt' if name in ('g9ws', 'g9al') else 'csv'}"
    if not path.exists():
        print(f"generating {path} ...", file=sys.stderr)
        tmp = path.with_suffix(".tmp")
        generate(name, tmp, rows)
        tmp.rename(path)
    path.read_bytes()  # warm the page cache
    return path


def contiguous_f32(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def simd_levels() -> list[str]:
    return SIMD[: int(tensorffi.core.lib.tf_simd_level()) + 1]


def ours(path: Path, simd: str, threads: int, delimiter: str | None = ",") -> Callable[[], torch.Tensor]:
    def run() -> torch.Tensor:
        os.environ["TENSORFFI_SIMD"] = simd
        try:
            return tensorffi.io.read_csv(path, header=False, threads=threads, delimiter=delimiter)
        finally:
            del os.environ["TENSORFFI_SIMD"]

    return run


def methods(path: Path, threads: int, levels: list[str], peers: bool) -> dict[str, Callable[[], torch.Tensor]]:
    import pandas as pd

    m: dict[str, Callable[[], torch.Tensor]] = {}
    for simd in levels:
        m[f"tensorffi {simd}, {threads} threads"] = ours(path, simd, threads)
        m[f"tensorffi {simd}, 1 thread"] = ours(path, simd, 1)
    m['pandas.read_csv(engine="c")'] = lambda: contiguous_f32(
        pd.read_csv(path, header=None, engine="c", dtype=np.float32).to_numpy()
    )
    if peers:
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


def whitespace(rows: int, repeats: int, threads: int, levels: list[str]) -> None:
    """delimiter=None on the g9 values written with blanks, against the same values
    with commas (the same level and threads), numpy.loadtxt and pandas' sep=r"\s+"."""
    import pandas as pd

    comma, ws, aligned = dataset("g9", rows), dataset("g9ws", rows), dataset("g9al", rows)
    fns: dict[str, Callable[[], torch.Tensor]] = {}
    pairs: dict[str, str] = {}  # whitespace method -> its comma counterpart
    for simd in levels:
        for th in (1, threads):
            where = f"{simd}, {th} thread{'s' if th > 1 else ''}"
            fns[f'tensorffi {where}, delimiter=","'] = ours(comma, simd, th)
            fns[f"tensorffi {where}, delimiter=None"] = ours(ws, simd, th, None)
            pairs[f"tensorffi {where}, delimiter=None"] = f'tensorffi {where}, delimiter=","'
        fns[f"tensorffi {simd}, 1 thread, delimiter=None, aligned (g9al)"] = ours(aligned, simd, 1, None)
        pairs[f"tensorffi {simd}, 1 thread, delimiter=None, aligned (g9al)"] = f'tensorffi {simd}, 1 thread, delimiter=","'
    peer_pandas = 'pandas.read_csv(sep=r"\s+", engine="c")'
    fns[peer_pandas] = lambda: contiguous_f32(
        pd.read_csv(ws, sep=r"\s+", header=None, engine="c", dtype=np.float32).to_numpy())
    fns["numpy.loadtxt (delimiter=None)"] = lambda: contiguous_f32(np.loadtxt(ws, dtype=np.float32))
    times, cpu = measure(fns, repeats, slow={"numpy.loadtxt (delimiter=None)"})
    med = {k: statistics.median(v) for k, v in times.items()}
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    sizes = {p: p.stat().st_size / 1e6 for p in (comma, ws, aligned)}
    print(f"### Whitespace-delimited: {rows:,} rows x {COLS} columns of the g9 values -> float32 tensor: g9 "
          f"({sizes[comma]:.0f} MB, commas), g9ws ({sizes[ws]:.0f} MB, one space), g9al ({sizes[aligned]:.0f} MB, "
          f"%16.9g aligned) ({load()})\n")
    print('| method | median s | MB/s | runs | speed vs "," | numpy.loadtxt / method | pandas / method '
          '| CPU s (1 thread) | speed vs ",", CPU |')
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k, v in med.items():
        size = sizes[aligned if "g9al" in k else comma if 'delimiter=","' in k else ws]
        vs = f"{med[pairs[k]] / v:.2f}x" if k in pairs else "-"
        single = "1 thread" in k or not k.startswith("tensorffi")
        c = f"{mcpu[k]:.3f}" if single else "-"
        vs_cpu = f"{mcpu[pairs[k]] / mcpu[k]:.2f}x" if k in pairs and single else "-"
        print(f"| {k} | {v:.3f} | {size / v:.0f} | {len(times[k])} | {vs} | "
              f"{med['numpy.loadtxt (delimiter=None)'] / v:.2f}x | {med[peer_pandas] / v:.2f}x | {c} | {vs_cpu} |")
    print()


def torch_step() -> Callable[[], None]:
    """An untimed torch op on all of torch's threads, as in a training step: after it,
    torch's OpenMP workers keep spinning for a while, on the cores our threads need."""
    a, b = torch.randn(768, 768), torch.randn(768, 768)
    return lambda: (a @ b, None)[1]


def measure(
    fns: dict[str, Callable[[], torch.Tensor]], repeats: int, slow: set[str],
    between: Callable[[], None] | None = None,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall times, and CPU times of the process (for a single-threaded method, its
    work: unlike wall time, barely moved by other processes' load). pandas' C engine
    parses on a helper thread, so the process's time, not the calling thread's.
    ``between``: run (untimed) right before each timed call."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    reference = None
    for rep in range(repeats):
        for name, fn in fns.items():
            if name in slow and rep >= 1:
                continue  # slow peers: one run
            if between is not None:
                between()
            c0 = time.process_time()
            t0 = time.perf_counter()
            out = fn()
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            assert out.dtype is torch.float32 and out.is_contiguous() and out.shape[1] == COLS, name
            if reference is None:
                reference = out
            elif not torch.equal(out, reference) and not torch.allclose(out, reference, rtol=1e-6, atol=0):
                raise AssertionError(f"{name} disagrees with {next(iter(fns))}")
            del out
    return times, cpu


def tiny(repeats: int) -> None:
    rng = np.random.default_rng(3)
    print("### Tiny inputs from bytes: 8 columns of %.9g values -> float32\n")
    print("| rows | bytes | tensorffi.io.read_csv µs | numpy.loadtxt µs | ratio (loadtxt / read_csv) |")
    print("|---:|---:|---:|---:|---:|")
    for rows in (10, 100):
        buf = io.BytesIO()
        np.savetxt(buf, mixed_float32(rng, rows), fmt="%.9g", delimiter=",")
        data = buf.getvalue()
        assert np.array_equal(
            tensorffi.io.read_csv(data).numpy(), np.loadtxt(io.BytesIO(data), delimiter=",", dtype=np.float32)
        )
        fns = {
            "ours": lambda: tensorffi.io.read_csv(data),
            "loadtxt": lambda: np.loadtxt(io.BytesIO(data), delimiter=",", dtype=np.float32),
        }
        loops = 2000 if rows == 10 else 500
        t: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(repeats):
            for k, fn in fns.items():
                t0 = time.perf_counter()
                for _ in range(loops):
                    fn()
                t[k].append((time.perf_counter() - t0) / loops)
        a, b = statistics.median(t["ours"]), statistics.median(t["loadtxt"])
        print(f"| {rows} | {len(data)} | {a * 1e6:.1f} | {b * 1e6:.1f} | {b / a:.2f}x |")
    print()


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
    parse_simd = SIMD[int(tensorffi.core.lib.tf_parse_simd())]
    return (
        f"{model}, {os.cpu_count()} CPUs ({info['cpu_count']} usable), tensorffi {info['version']} "
        f"(CPU SIMD {info['simd']}, parser default {parse_simd}; {info['compiler']} {info['build_flags']}), "
        f"Python {platform.python_version()}, " + ", ".join(versions)
    )


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200,000 rows, 3 repeats")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None, help="threads for the all-cores run (default: all)")
    parser.add_argument("--sets", default="g9,g17,short", help="comma-separated data sets: g9, g17, short")
    parser.add_argument("--simd", default=None, help="comma-separated SIMD levels (default: all this CPU has)")
    parser.add_argument("--peers", action="store_true", help="also pyarrow, polars and numpy.loadtxt")
    parser.add_argument("--tiny-only", action="store_true")
    parser.add_argument("--alternating", action="store_true",
                        help="also time every method right after a torch matmul (g9 set), as between training steps")
    parser.add_argument("--whitespace", action="store_true",
                        help="also: delimiter=None on the g9 values written with blanks, vs commas and the peers")
    parser.add_argument("--before", default=None,
                        help="a checkout of an older tree (built in place): the g9 comma path, before vs after")
    args = parser.parse_args()
    rows = args.rows or (200_000 if args.quick else 1_000_000)
    repeats = args.repeats or (3 if args.quick else 5)
    threads = args.threads or tensorffi.get_num_threads()
    levels = args.simd.split(",") if args.simd else simd_levels()

    print(f"Machine: {machine()}\n\nAt start: {load()}\n")
    tiny(7)
    if args.tiny_only:
        print(f"At end: {load()}")
        return 0
    what = {
        "g9": '%.9g float32 values, mixed magnitudes (np.savetxt fmt="%.9g")',
        "g17": '%.17g float64 values (np.savetxt fmt="%.17g")',
        "short": "0.ddddddd uniform values",
    }
    for name in args.sets.split(",") if args.sets else []:
        path = dataset(name, rows)
        size_mb = path.stat().st_size / 1e6
        fns = methods(path, threads, levels, args.peers)
        times, cpu = measure(fns, repeats, slow={"numpy.loadtxt"})
        med = {k: statistics.median(v) for k, v in times.items()}
        mcpu = {k: statistics.median(v) for k, v in cpu.items()}
        pandas = med['pandas.read_csv(engine="c")']
        pandas_cpu = mcpu['pandas.read_csv(engine="c")']
        print(f"### {rows:,} rows x {COLS} columns, {what[name]}: {size_mb:.0f} MB -> float32 tensor ({load()})\n")
        print("| method | median s | MB/s | runs | pandas / method | CPU s (1 thread) | pandas / method, CPU |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for k, v in med.items():
            single = "1 thread" in k or k.startswith("pandas") or k.startswith("numpy")
            c = f"{mcpu[k]:.3f} | {pandas_cpu / mcpu[k]:.2f}x" if single else "- | -"
            print(f"| {k} | {v:.3f} | {size_mb / v:.0f} | {len(times[k])} | {pandas / v:.2f}x | {c} |")
        print()
    if args.whitespace:
        whitespace(rows, repeats, threads, levels)
    if args.before:
        import importlib.util  # benchmarks/read_csv_options.py: fresh worker processes, alternated

        spec = importlib.util.spec_from_file_location("read_csv_options", HERE / "read_csv_options.py")
        assert spec is not None and spec.loader is not None
        options_bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(options_bench)
        before_after = options_bench.before_after
        print(f"### The comma path before and after: g9, {rows:,} rows; this tree vs {args.before} ({load()})")
        before_after(os.path.abspath(args.before), str(HERE.parent), dataset("g9", rows), max(3, repeats), threads)
        print()
    if args.alternating:
        path = dataset("g9", rows)
        size_mb = path.stat().st_size / 1e6
        fns = methods(path, threads, levels, False)
        step = torch_step()
        back, _ = measure(fns, repeats, slow=set())
        alt, _ = measure(fns, repeats, slow=set(), between=step)
        print(f"### Alternating with a torch op: g9, {rows:,} rows, {size_mb:.0f} MB; each call right after an "
              f"untimed 768x768 matmul on {torch.get_num_threads()} torch threads, and back to back ({load()})\n")
        print("| method | back to back s | alternating s | alternating / back to back | pandas / method, alternating |")
        print("|---|---:|---:|---:|---:|")
        pandas_alt = statistics.median(alt['pandas.read_csv(engine="c")'])
        for k in fns:
            b, a = statistics.median(back[k]), statistics.median(alt[k])
            print(f"| {k} | {b:.3f} | {a:.3f} | {a / b:.2f} | {pandas_alt / a:.2f}x |")
        print()
    print(f"At end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
