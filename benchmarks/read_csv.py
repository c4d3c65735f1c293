# SPDX-License-Identifier: MIT
"""Numeric CSV -> contiguous float32 (or int64/int32) tensor: tensorffi.io.read_csv against its peers.

    python benchmarks/read_csv.py                  # 1,000,000 rows x 8 columns, three data sets, 5 repeats
    python benchmarks/read_csv.py --quick          # 200,000 rows, 3 repeats
    python benchmarks/read_csv.py --sets g9 --repeats 7
    python benchmarks/read_csv.py --tiny-only      # 10 and 100 rows from bytes vs numpy.loadtxt
    python benchmarks/read_csv.py --alternating    # also: each call right after a torch op (g9 set)
    python benchmarks/read_csv.py --sets g9,i64,i32 --before /path/to/other/checkout   # integers; before/after

Data sets (generated once into benchmarks/_work/, ignored by git, read once before
timing so that the page cache is warm):

    g9     np.savetxt(fmt="%.9g") of float32(standard_normal * 10**randint(-3, 4)):
           float32 at full precision, mixed magnitudes (realistic sensor/feature data)
    g17    np.savetxt(fmt="%.17g") of standard_normal float64 (full float64 repr)
    short  0.ddddddd uniform values (7 digits, no exponent)
    i64    integers of every magnitude, 1 to 19 digits alike (uniform digit count, then
           uniform value; half negative), read as int64 (the integer rows; not a default set)
    i32    the same with 1 to 10 digits, in int32's range, read as int32

Every method ends with a C-contiguous float32 torch tensor of shape (rows, 8) (int64 or
int32 for the integer sets; there, "tensorffi float64 of the same text" reads the same
bytes with the float kernel, for the cost per field of the two paths). Runs
are interleaved round-robin in one fresh process, so the first calls (binding the
native functions, first page faults) are among the samples; each method's median wall
time is reported, with ratios of medians (pandas / method: above 1 means the method is
faster than pandas). Single-threaded methods also get the median CPU time of the
process (time.process_time), which other processes' load barely moves: on a shared
machine their CPU ratio is the steadier figure. tensorffi runs at each SIMD level this CPU has (TENSORFFI_SIMD is read per
call), with one thread and with all threads. Peers: pandas.read_csv(engine="c"),
pyarrow and polars when installed (multi-threaded), numpy.loadtxt (once, it is slow);
for the integer sets: pandas.read_csv(engine="c", dtype=int64/int32) and
numpy.loadtxt(dtype=int64/int32) (always: the issue's floor).

Before/after (``--before TREE``, another checkout of tensorffi built in place): for the
float sets, that tree's read_csv and this tree's run too, interleaved in the same
rounds, each in a worker process of its own (the same environment for both: in this
process, torch's and pandas' threads and allocations would tilt the comparison) that
times its own calls (wall and its own CPU time) and returns a digest of the table,
checked against this process's.

Tiny inputs: read_csv of 10 and 100 rows (%.9g, 8 columns) from bytes against
numpy.loadtxt on the same bytes through BytesIO, interleaved; the median of 7 timing
loops each.
"""
from __future__ import annotations

import sys
from pathlib import Path

# Run from a checkout: the repository root (its tensorffi) first on the import path; the
# --before worker (--worker TREE) imports that tree's instead.
HERE = Path(__file__).resolve().parent
WORKER_TREE = sys.argv[sys.argv.index("--worker") + 1] if "--worker" in sys.argv[:-1] else None
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, WORKER_TREE or str(HERE.parent))

import argparse
import hashlib
import io
import json
import os
import platform
import statistics
import subprocess
import time
from typing import Any, Callable, NamedTuple

import numpy as np
import torch

import tensorffi  # noqa: E402
import tensorffi.io  # noqa: E402

WORK = HERE / "_work"
COLS = 8
SIMD = ["scalar", "avx2", "avx512"]


INT_SETS = {"i64": (np.int64, torch.int64, 19), "i32": (np.int32, torch.int32, 10)}


def mixed_ints(rng: np.random.Generator, rows: int, digits: int, dtype: Any) -> np.ndarray:
    """Integers with a uniform number of digits (1..digits), then a uniform value of that
    many digits and a random sign, within dtype's range."""
    info = np.iinfo(dtype)
    d = rng.integers(1, digits + 1, size=(rows, COLS))
    v = rng.integers(0, info.max, size=(rows, COLS), dtype=np.int64, endpoint=True)
    v = v // (10 ** (len(str(info.max)) - d)).astype(np.int64)  # about d digits
    v = np.where(rng.random((rows, COLS)) < 0.5, -v, v)
    return v.astype(dtype)


def mixed_float32(rng: np.random.Generator, rows: int) -> np.ndarray:
    x = rng.standard_normal((rows, COLS)) * 10.0 ** rng.integers(-3, 4, size=(rows, COLS))
    return x.astype(np.float32)


def generate(name: str, path: Path, rows: int) -> None:
    rng = np.random.default_rng({"g9": 0, "g17": 1, "short": 2, "i64": 3, "i32": 4}[name])
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
            if name in INT_SETS:
                np_dtype, _, digits = INT_SETS[name]
                np.savetxt(f, mixed_ints(rng, n, digits, np_dtype), fmt="%d", delimiter=",")
                continue
            block = mixed_float32(rng, n) if name == "g9" else rng.standard_normal((n, COLS))
            np.savetxt(f, block, fmt="%.9g" if name == "g9" else "%.17g", delimiter=",")


def dataset(name: str, rows: int) -> Path:
    WORK.mkdir(exist_ok=True)
    path = WORK / f"{name}_{rows}x{COLS}.csv"
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


def ours(path: Path, simd: str, threads: int, dtype: torch.dtype = torch.float32) -> Callable[[], torch.Tensor]:
    def run() -> torch.Tensor:
        os.environ["TENSORFFI_SIMD"] = simd
        try:
            return tensorffi.io.read_csv(path, header=False, threads=threads, dtype=dtype)
        finally:
            del os.environ["TENSORFFI_SIMD"]

    return run


class Timed(NamedTuple):
    """A call timed by the process that made it (the --before worker): its wall and CPU
    seconds, and the SHA-1 of the table's bytes."""

    wall: float
    cpu: float
    digest: str
    shape: tuple[int, ...]


def digest(t: torch.Tensor) -> str:
    return hashlib.sha1(t.contiguous().numpy().tobytes()).hexdigest()


class Worker:
    """read_csv of a checkout (--before, and this one to compare it with), in one worker
    process for the whole run."""

    def __init__(self, tree: str) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", tree], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd="/")
        assert self.proc.stdout is not None
        self.where = self.proc.stdout.readline().strip()  # the worker's tensorffi

    def method(self, path: Path, simd: str, threads: int) -> Callable[[], Timed]:
        def run() -> Timed:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps([str(path), simd, threads]) + "\n")
            self.proc.stdin.flush()
            wall, cpu, dig, shape = json.loads(self.proc.stdout.readline())
            return Timed(wall, cpu, dig, tuple(shape))

        return run

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def worker(tree: str) -> int:
    """--worker TREE: read_csv of TREE's tensorffi (imported first, at the top of this
    file), one call per request line on stdin."""
    tio = tensorffi.io
    assert Path(tio.__file__).resolve().is_relative_to(Path(tree).resolve()), tio.__file__
    print(tio.__file__, flush=True)
    for line in sys.stdin:
        path, simd, threads = json.loads(line)
        os.environ["TENSORFFI_SIMD"] = simd
        c0, t0 = time.process_time(), time.perf_counter()
        out = tio.read_csv(path, header=False, threads=threads)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(json.dumps([wall, cpu, digest(out), list(out.shape)]), flush=True)
    return 0


def methods(path: Path, threads: int, levels: list[str], peers: bool, kind: str = "float",
            workers: tuple[Worker, Worker] | None = None) -> dict[str, Callable[[], Any]]:
    import pandas as pd

    m: dict[str, Callable[[], Any]] = {}
    if kind in INT_SETS:
        np_dtype, dtype, _ = INT_SETS[kind]
        name = np.dtype(np_dtype).name
        for simd in levels:
            m[f"tensorffi {name} {simd}, {threads} threads"] = ours(path, simd, threads, dtype)
            m[f"tensorffi {name} {simd}, 1 thread"] = ours(path, simd, 1, dtype)
            m[f"tensorffi float64 of the same text {simd}, 1 thread"] = ours(path, simd, 1, torch.float64)
        m[f'pandas.read_csv(engine="c", dtype={name})'] = lambda: torch.from_numpy(
            np.ascontiguousarray(pd.read_csv(path, header=None, engine="c", dtype=np_dtype).to_numpy()))
        m[f"numpy.loadtxt(dtype={name})"] = lambda: torch.from_numpy(
            np.loadtxt(path, delimiter=",", dtype=np_dtype))
        return m
    for simd in levels:
        m[f"tensorffi {simd}, {threads} threads"] = ours(path, simd, threads)
        m[f"tensorffi {simd}, 1 thread"] = ours(path, simd, 1)
        if workers is not None:
            for label, w in zip(("before", "after"), workers):
                m[f"{label}: tensorffi {simd}, {threads} threads"] = w.method(path, simd, threads)
                m[f"{label}: tensorffi {simd}, 1 thread"] = w.method(path, simd, 1)
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


def torch_step() -> Callable[[], None]:
    """An untimed torch op on all of torch's threads, as in a training step: after it,
    torch's OpenMP workers keep spinning for a while, on the cores our threads need."""
    a, b = torch.randn(768, 768), torch.randn(768, 768)
    return lambda: (a @ b, None)[1]


def measure(
    fns: dict[str, Callable[[], Any]], repeats: int, slow: set[str],
    between: Callable[[], None] | None = None,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall times, and CPU times of the process (for a single-threaded method, its
    work: unlike wall time, barely moved by other processes' load). pandas' C engine
    parses on a helper thread, so the process's time, not the calling thread's. A
    method that returns a Timed (the --before worker) reports its own. Every table is
    checked against the first method's of the same dtype (exactly for integers).
    ``between``: run (untimed) right before each timed call."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    reference: dict[torch.dtype, tuple[str, torch.Tensor]] = {}
    for rep in range(repeats):
        for name, fn in fns.items():
            if name in slow and rep >= 1:
                continue  # slow peers: one run
            if between is not None:
                between()
            c0 = time.process_time()
            t0 = time.perf_counter()
            out = fn()
            wall, used = time.perf_counter() - t0, time.process_time() - c0
            if isinstance(out, Timed):
                wall, used = out.wall, out.cpu
                first, ref = reference[torch.float32]
                if out.digest != digest(ref) or out.shape != tuple(ref.shape):
                    raise AssertionError(f"{name} disagrees with {first}")
            else:
                assert out.is_contiguous() and out.shape[1] == COLS, name
                if out.dtype not in reference:
                    reference[out.dtype] = (name, out)
                else:  # compared with NumPy: torch's threads would spin on into the next timing
                    first, ref = reference[out.dtype]
                    a, b = out.numpy(), ref.numpy()
                    exact = not out.dtype.is_floating_point
                    if not np.array_equal(a, b) and (exact or not np.allclose(a, b, rtol=1e-6, atol=0)):
                        raise AssertionError(f"{name} disagrees with {first}")
            times[name].append(wall)
            cpu[name].append(used)
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
    parser.add_argument("--sets", default="g9,g17,short", help="comma-separated data sets: g9, g17, short, i64, i32")
    parser.add_argument("--simd", default=None, help="comma-separated SIMD levels (default: all this CPU has)")
    parser.add_argument("--peers", action="store_true", help="also pyarrow, polars and numpy.loadtxt")
    parser.add_argument("--tiny-only", action="store_true")
    parser.add_argument("--alternating", action="store_true",
                        help="also time every method right after a torch matmul (g9 set), as between training steps")
    parser.add_argument("--before", metavar="TREE", default=None,
                        help="another checkout (built in place): its read_csv of the float sets in the same rounds")
    parser.add_argument("--worker", metavar="TREE", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker)
    rows = args.rows or (200_000 if args.quick else 1_000_000)
    repeats = args.repeats or (3 if args.quick else 5)
    threads = args.threads or tensorffi.get_num_threads()
    levels = args.simd.split(",") if args.simd else simd_levels()

    print(f"Machine: {machine()}\n\nAt start: {load()}\n")
    workers = (Worker(args.before), Worker(str(HERE.parent))) if args.before else None
    if workers is not None:
        print(f"Before: {workers[0].where}; after: {workers[1].where} (worker processes)\n")
    tiny(7)
    if args.tiny_only:
        print(f"At end: {load()}")
        return 0
    what = {
        "g9": '%.9g float32 values, mixed magnitudes (np.savetxt fmt="%.9g")',
        "g17": '%.17g float64 values (np.savetxt fmt="%.17g")',
        "short": "0.ddddddd uniform values",
        "i64": "int64 values of 1 to 19 digits, half negative",
        "i32": "int32 values of 1 to 10 digits, half negative",
    }
    for name in args.sets.split(","):
        path = dataset(name, rows)
        size_mb = path.stat().st_size / 1e6
        kind = name if name in INT_SETS else "float"
        fns = methods(path, threads, levels, args.peers, kind, workers)
        slow = {k for k in fns if k.startswith("numpy.loadtxt")}
        times, cpu = measure(fns, repeats, slow=slow)
        med = {k: statistics.median(v) for k, v in times.items()}
        mcpu = {k: statistics.median(v) for k, v in cpu.items()}
        pandas_key = next(k for k in fns if k.startswith("pandas"))
        pandas, pandas_cpu = med[pandas_key], mcpu[pandas_key]
        target = "float32" if kind == "float" else np.dtype(INT_SETS[kind][0]).name
        print(f"### {rows:,} rows x {COLS} columns, {what[name]}: {size_mb:.0f} MB -> {target} tensor ({load()})\n")
        print("| method | median s | MB/s | ns/value | runs | pandas / method | CPU s (1 thread) | pandas / method, CPU |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for k, v in med.items():
            single = "1 thread" in k or k.startswith("pandas") or k.startswith("numpy")
            c = f"{mcpu[k]:.3f} | {pandas_cpu / mcpu[k]:.2f}x" if single else "- | -"
            ns = v / (rows * COLS) * 1e9
            print(f"| {k} | {v:.3f} | {size_mb / v:.0f} | {ns:.1f} | {len(times[k])} | {pandas / v:.2f}x | {c} |")
        if kind != "float":
            loadtxt = next(k for k in fns if k.startswith("numpy.loadtxt"))
            print(f"\nRatios of medians: numpy.loadtxt / method and float64 path / integer path (same bytes):\n")
            for simd in levels:
                for th in (f"{threads} threads", "1 thread"):
                    k = f"tensorffi {target} {simd}, {th}"
                    print(f"- {k}: loadtxt / it {med[loadtxt] / med[k]:.1f}x, pandas / it {pandas / med[k]:.2f}x"
                          f" (CPU {pandas_cpu / mcpu[k]:.2f}x)" if th == "1 thread" else
                          f"- {k}: loadtxt / it {med[loadtxt] / med[k]:.1f}x, pandas / it {pandas / med[k]:.2f}x")
                f = f"tensorffi float64 of the same text {simd}, 1 thread"
                k = f"tensorffi {target} {simd}, 1 thread"
                print(f"- {simd}, 1 thread: float64 path / {target} path {med[f] / med[k]:.2f}x wall, "
                      f"{mcpu[f] / mcpu[k]:.2f}x CPU")
        if kind == "float" and workers is not None:
            print("\nBefore / after, both in worker processes (ratios of medians; above 1: this tree is faster):\n")
            for simd in levels:
                for th in (f"{threads} threads", "1 thread"):
                    k = f"tensorffi {simd}, {th}"
                    b, a = f"before: {k}", f"after: {k}"
                    extra = f"; CPU {mcpu[b]:.3f} / {mcpu[a]:.3f} s: {mcpu[b] / mcpu[a]:.3f}" if th == "1 thread" else ""
                    print(f"- {k}: before {med[b]:.3f} s, after {med[a]:.3f} s: {med[b] / med[a]:.3f}{extra}")
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
    for w in workers or ():
        w.close()
    print(f"At end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
