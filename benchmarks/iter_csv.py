# SPDX-License-Identifier: MIT
"""Streaming CSV: tensorffi.io.iter_csv against tensorffi.io.read_csv on one thread.

    python benchmarks/iter_csv.py                  # 1,000,000 rows x 8 columns, g9 and g17, 7 repeats
    python benchmarks/iter_csv.py --quick          # 200,000 rows, 5 repeats
    python benchmarks/iter_csv.py --sets g9 --simd avx2,avx512 --chunk-rows 65536
    python benchmarks/iter_csv.py --memory-only    # peak memory of each method, in fresh processes
    python benchmarks/iter_csv.py --sets g9 --streams --memory   # also from gzip and a pipe; memory

The data sets are benchmarks/read_csv.py's (generated once into benchmarks/_work/,
page cache warm). Methods, interleaved round-robin in one process (the first calls
among the samples), each at every SIMD level asked for:

    read_csv     tensorffi.io.read_csv(path, threads=1): the whole file memory-mapped,
                 two passes, one (rows, 8) float32 tensor
    iter_csv     for chunk in tensorffi.io.iter_csv(path, chunk_rows): ...  the file read
                 block by block, 64k-row chunks, each dropped after use
    iter_csv+cat torch.cat(list(iter_csv(...))): the same, kept and concatenated (the
                 read_csv result, built from chunks)

With --streams, from a gzip file (the data set compressed once at level 1) and a pipe
(`cat file |`), each against read_csv of the same stream (which reads it whole
first) and against the bare reading of the stream (the floor nothing can beat):

    gzip read only   gzip.open(...).read() in 1 MiB reads, the bytes dropped
    read_csv gzip    read_csv(gzip.open(...), threads=1)
    iter_csv gzip    for chunk in iter_csv(gzip.open(...), chunk_rows): ...
    pipe read only / read_csv pipe / iter_csv pipe    the same from `cat`'s stdout

Each method's median wall time and median process CPU time (time.process_time: other
processes' load barely moves it; on a shared machine it is the steadier figure), and
throughput ratios read_csv / method (1.0: as fast as read_csv; the floor is 0.8).
The chunks' concatenation is checked against read_csv's tensor once per data set.

Memory (--memory, or --memory-only): each method in a fresh process; the peak resident
set growth during the call (Linux: VmHWM reset through /proc/self/clear_refs), the
chunk size, and for iter_csv the largest C buffer of the parser and the tracemalloc
peak of its Python allocations (chunks as NumPy arrays there, so they are traced).
read_csv's figure includes the pages of the memory-mapped file it touches. The loop
keeps the chunk it was given while the next one is filled (`for c in it:` does), so
two chunks are live at the peak: "beyond the caller's chunk" subtracts the one the
caller holds. Each child runs twice: with glibc's default malloc (its dynamic mmap
threshold keeps freed 2 MiB chunks in the heap, and RSS counts them) and with
MALLOC_MMAP_THRESHOLD_=131072 (fixed: every chunk is mapped and unmapped, so RSS
follows the live memory). "torch.empty loop" is the allocator's own share: the same
number of chunks allocated, filled and dropped the same way, with no parsing.
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))
sys.path.insert(1, str(HERE))

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from typing import Any, Callable  # noqa: E402

import torch  # noqa: E402

import tensorffi  # noqa: E402
import tensorffi.io  # noqa: E402
from read_csv import COLS, dataset, load, machine, simd_levels  # noqa: E402  (the same data and facts)


def with_simd(simd: str, fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        os.environ["TENSORFFI_SIMD"] = simd
        try:
            return fn()
        finally:
            del os.environ["TENSORFFI_SIMD"]

    return run


def drain(path: Path, chunk_rows: int) -> int:
    rows = 0
    for chunk in tensorffi.io.iter_csv(path, chunk_rows, header=False):
        rows += chunk.shape[0]
    return rows


def read_only(f: Any) -> int:
    n = 0
    with f:
        while block := f.read(1 << 20):
            n += len(block)
    return n


def drain_stream(f: Any, chunk_rows: int) -> int:
    with f:
        return sum(c.shape[0] for c in tensorffi.io.iter_csv(f, chunk_rows, header=False))


def read_stream(f: Any) -> torch.Tensor:
    with f:
        return tensorffi.io.read_csv(f, header=False, threads=1)


class Pipe:
    """`cat path |`: the pipe's read end as a binary file object (closed: the child waited for)."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE)
        self.stdout = self.proc.stdout
        self.read, self.readinto1, self.readinto = self.stdout.read, self.stdout.readinto1, self.stdout.readinto

    def __enter__(self) -> "Pipe":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stdout.close()
        self.proc.wait()


def gzipped(path: Path) -> Path:
    gz = path.with_name(path.name + ".gz")
    if not gz.exists():
        print(f"compressing {gz} ...", file=sys.stderr)
        tmp = gz.with_suffix(".tmp")
        with open(path, "rb") as src, gzip.open(tmp, "wb", compresslevel=1) as dst:
            while block := src.read(1 << 20):
                dst.write(block)
        tmp.rename(gz)
    gz.read_bytes()  # warm the page cache
    return gz


def stream_methods(path: Path, chunk_rows: int) -> dict[str, Callable[[], Any]]:
    gz = gzipped(path)
    return {
        "read_csv file, 1 thread": lambda: tensorffi.io.read_csv(path, header=False, threads=1),
        "iter_csv file": lambda: drain(path, chunk_rows),
        "gzip read only": lambda: read_only(gzip.open(gz, "rb")),
        "read_csv gzip, 1 thread": lambda: read_stream(gzip.open(gz, "rb")),
        "iter_csv gzip": lambda: drain_stream(gzip.open(gz, "rb"), chunk_rows),
        "pipe read only": lambda: read_only(Pipe(path)),
        "read_csv pipe, 1 thread": lambda: read_stream(Pipe(path)),
        "iter_csv pipe": lambda: drain_stream(Pipe(path), chunk_rows),
    }


def methods(path: Path, levels: list[str], chunk_rows: int) -> dict[str, Callable[[], Any]]:
    m: dict[str, Callable[[], Any]] = {}
    for simd in levels:
        m[f"read_csv {simd}, 1 thread"] = with_simd(simd, lambda: tensorffi.io.read_csv(path, header=False, threads=1))
        m[f"iter_csv {simd}"] = with_simd(simd, lambda: drain(path, chunk_rows))
        m[f"iter_csv+cat {simd}"] = with_simd(
            simd, lambda: torch.cat(list(tensorffi.io.iter_csv(path, chunk_rows, header=False)))
        )
    return m


def measure(fns: dict[str, Callable[[], Any]], repeats: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    wall: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            c0, t0 = time.process_time(), time.perf_counter()
            out = fn()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            del out
    return wall, cpu


def check(path: Path, chunk_rows: int) -> None:
    want = tensorffi.io.read_csv(path, header=False, threads=1)
    got = torch.cat(list(tensorffi.io.iter_csv(path, chunk_rows, header=False)))
    assert torch.equal(got.view(torch.int32), want.view(torch.int32)), "iter_csv disagrees with read_csv"


# --------------------------------------------------------------------------- #
# memory, in fresh processes                                                   #
# --------------------------------------------------------------------------- #

_CHILD = r"""
import json, sys, tracemalloc
sys.path.insert(0, %(root)r)
import numpy as np, torch, tensorffi.io

def status(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key + ":"))

path, method, chunk_rows = %(path)r, %(method)r, %(chunk_rows)d
tensorffi.io.read_csv(b"1,2\n", header=False)  # bind the native functions, first allocations
list(tensorffi.io.iter_csv(b"1,2\n", header=False))
rss0 = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM) to the current RSS
out = {}
if method == "read_csv":
    t = tensorffi.io.read_csv(path, header=False, threads=1)
    out["rows"] = int(t.shape[0])
    del t
elif method == "torch.empty loop":  # the allocator alone: chunks made and dropped as iter_csv's are
    rows, c = 0, None
    for _ in range(-(-1_000_000 // chunk_rows)):
        c = torch.empty(chunk_rows, 8).fill_(1.0)
        rows += c.shape[0]
    out["rows"] = rows
else:
    like = "numpy" if method == "iter_csv traced" else None
    it = tensorffi.io.iter_csv(path, chunk_rows, header=False, like=like)
    if like:
        tracemalloc.start()
    rows, cap = 0, 0
    for c in it:
        rows += c.shape[0]
        if not it.closed:
            cap = max(cap, it._stream_info()["peak_capacity"])
    if like:
        out["traced_peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    out["rows"], out["c_buffer"] = rows, cap
out["rss_growth"] = status("VmHWM") - rss0
print(json.dumps(out))
"""


def memory(path: Path, chunk_rows: int) -> None:
    chunk_bytes = chunk_rows * COLS * 4
    print(f"#### Peak memory, fresh process each ({path.name}, chunks of {chunk_rows} rows = "
          f"{chunk_bytes / 2**20:.1f} MiB of float32; {load()})\n")
    print("| method | malloc | peak RSS growth MiB | in chunks | beyond the caller's chunk, in chunks | "
          "C buffer MiB | Python traced peak MiB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for malloc, env in (("default", {}), ("mmap threshold 128 KiB", {"MALLOC_MMAP_THRESHOLD_": "131072"})):
        for method in ("read_csv", "iter_csv", "iter_csv traced", "torch.empty loop"):
            code = _CHILD % {"root": str(HERE.parent), "path": str(path), "method": method, "chunk_rows": chunk_rows}
            res = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                            env={**os.environ, **env}).stdout)
            grow = res["rss_growth"]
            cbuf = f"{res['c_buffer'] / 2**20:.2f}" if "c_buffer" in res else "-"
            traced = f"{res['traced_peak'] / 2**20:.2f}" if "traced_peak" in res else "-"
            beyond = f"{(grow - chunk_bytes) / chunk_bytes:.2f}" if method.startswith("iter") else "-"
            print(f"| {method} | {malloc} | {grow / 2**20:.1f} | {grow / chunk_bytes:.2f} | {beyond} | {cbuf} | "
                  f"{traced} |")
    print()


def table(title: str, fns: dict[str, Callable[[], Any]], repeats: int, size_mb: float,
          peer_of: Callable[[str], list[str]]) -> None:
    wall, cpu = measure(fns, repeats)
    med = {k: statistics.median(v) for k, v in wall.items()}
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"#### {title} ({repeats} interleaved rounds; {load()})\n")
    print("| method | median s | MB/s | peer | peer / method | CPU s | peer / method, CPU |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for k in med:
        for peer in peer_of(k):
            print(f"| {k} | {med[k]:.3f} | {size_mb / med[k]:.0f} | {peer} | {med[peer] / med[k]:.2f}x | "
                  f"{mcpu[k]:.3f} | {mcpu[peer] / mcpu[k]:.2f}x |")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200,000 rows, 5 repeats")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--sets", default="g9,g17", help="comma-separated data sets: g9, g17, short")
    parser.add_argument("--simd", default=None, help="comma-separated SIMD levels (default: the parser's own)")
    parser.add_argument("--chunk-rows", type=int, default=65536)
    parser.add_argument("--streams", action="store_true", help="also from a gzip file and a pipe")
    parser.add_argument("--memory", action="store_true", help="also peak memory, in fresh processes")
    parser.add_argument("--memory-only", action="store_true")
    args = parser.parse_args()
    rows = args.rows or (200_000 if args.quick else 1_000_000)
    repeats = args.repeats or (5 if args.quick else 7)
    levels = args.simd.split(",") if args.simd else [simd_levels()[int(tensorffi.core.lib.tf_parse_simd())]]
    tensorffi.set_num_threads(1)  # read_csv is also asked for threads=1; iter_csv is one thread per iterator

    print(f"Machine: {machine()}\n\nAt start: {load()}\n")
    for name in args.sets.split(","):
        path = dataset(name, rows)
        size_mb = path.stat().st_size / 1e6
        if not args.memory_only:
            check(path, args.chunk_rows)

            def peers(k: str) -> list[str]:
                simd = k.split()[1].rstrip(",")
                return [f"read_csv {simd}, 1 thread"]

            table(f"{name}: {rows:,} rows x {COLS} columns, {size_mb:.0f} MB -> float32, chunks of "
                  f"{args.chunk_rows} rows", methods(path, levels, args.chunk_rows), repeats, size_mb, peers)
            if args.streams:

                def stream_peers(k: str) -> list[str]:
                    if k.endswith("read only") or k.split()[1].rstrip(",") == "file":
                        return ["read_csv file, 1 thread"]
                    kind = k.split()[1].rstrip(",")
                    if k.startswith("read_csv"):
                        return ["read_csv file, 1 thread", f"{kind} read only"]
                    return ["read_csv file, 1 thread", f"read_csv {kind}, 1 thread", f"{kind} read only"]

                table(f"{name} from streams: the file, gzip (level 1, "
                      f"{gzipped(path).stat().st_size / 1e6:.0f} MB), a pipe; chunks of {args.chunk_rows} rows",
                      stream_methods(path, args.chunk_rows), repeats, size_mb, stream_peers)
        if args.memory or args.memory_only:
            memory(path, args.chunk_rows)
    print(f"At end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
