# SPDX-License-Identifier: MIT
"""Bring-your-own-C build and re-open times, each in fresh processes, against peers.

* first build of a one-function file (cold cache): ``tensorffi.compile`` vs cffi's
  own ``ffi.compile()`` (setuptools) on the same file and declarations;
* a cached ``compile()`` in a fresh process (after ``import tensorffi``, which is
  reported separately) vs importing the same cached extension module directly with
  importlib (the floor: what any cached build costs at least);
* unpickling a ``compile()`` handle whose module is cached, and its first call (the
  module is opened lazily), vs the import floor.

Runs are interleaved and repeated; medians are reported. Usage:
``python benchmarks/build.py [--reps 7] [--before /path/to/older/checkout]``.

``--cpp`` (issue 21): the same for a one-function ``.cpp`` (``extern "C"``, one
``std::`` algorithm): first ``compile()`` with g++ and with clang++ (``CXX``) and a
cached one in a fresh process, beside the C file; the call overhead of the guarded C++
function against the same function compiled as C; ``--peer`` also times
``torch.utils.cpp_extension.load_inline`` once, cold, on the same function.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

SEED_C = "void process_data(float *data, int size) { for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f; }\n"
CDEF = "void process_data(float *data, int size);"

FIRST_TFFI = """
import sys, time, json
t0 = time.perf_counter(); import tensorffi; t1 = time.perf_counter()
lib = tensorffi.compile("bench", %r, sources=[sys.argv[1]], cache=sys.argv[2])
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "call": t2 - t1}))
""" % CDEF
FIRST_CFFI = """
import sys, time, json, cffi
t1 = time.perf_counter()
ffi = cffi.FFI(); ffi.cdef(%r)
ffi.set_source("_bench_cffi", open(sys.argv[1]).read(), extra_compile_args=["-O3"])
ffi.compile(tmpdir=sys.argv[2], verbose=False)
print(json.dumps({"call": time.perf_counter() - t1}))
""" % CDEF
CACHED_TFFI = FIRST_TFFI
IMPORT_FLOOR = """
import sys, time, json, importlib.util
t0 = time.perf_counter(); import tensorffi; t1 = time.perf_counter()
spec = importlib.util.spec_from_file_location(sys.argv[3], sys.argv[2])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "call": t2 - t1}))
"""
UNPICKLE = """
import sys, time, json, pickle
t0 = time.perf_counter(); import tensorffi, torch; t1 = time.perf_counter()
blob = open(sys.argv[1], "rb").read()
t2 = time.perf_counter(); lib = pickle.loads(blob); t3 = time.perf_counter()
x = torch.zeros(4); lib.process_data(x, 4); t4 = time.perf_counter()
assert x.tolist() == [1.0] * 4
print(json.dumps({"import": t1 - t0, "call": t3 - t2, "first_call": t4 - t3}))
"""


def run(script: str, *args: str, env: dict[str, str] | None = None) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--before", help="a checkout of an earlier tensorffi (built in place) to measure too")
    opts = parser.parse_args()
    reps = opts.reps
    work = Path(tempfile.mkdtemp(prefix="tffi-bench-"))
    try:
        src = work / "mylib.c"
        src.write_text(SEED_C)
        samples: dict[str, list[float]] = {}
        imports: list[float] = []

        def add(name: str, value: float) -> None:
            samples.setdefault(name, []).append(value)

        cache = work / "warm-cache"
        run(FIRST_TFFI, str(src), str(cache))  # warm the cache (and the OS file cache)
        import tensorffi  # noqa: E402  (for the handle and the module's path)

        lib = tensorffi.compile("bench", CDEF, sources=[str(src)], cache=str(cache))
        blob = work / "handle.pkl"
        blob.write_bytes(pickle.dumps(lib))
        (so,) = cache.glob("_tf_bench_*.so")
        for i in range(reps):
            cold = work / f"cold-{i}"
            r = run(FIRST_TFFI, str(src), str(cold))
            add("first compile(): tensorffi", r["call"])
            if opts.before:
                r = run(FIRST_TFFI, str(src), str(work / f"before-{i}"), env=dict(os.environ, PYTHONPATH=opts.before))
                add("first compile(): tensorffi --before", r["call"])
            r = run(FIRST_CFFI, str(src), str(work / f"cffi-{i}"))
            add("first build: cffi ffi.compile() (setuptools)", r["call"])
            r = run(CACHED_TFFI, str(src), str(cache))
            add("cached compile(), fresh process", r["call"])
            imports.append(r["import"])
            r = run(IMPORT_FLOOR, str(src), str(so), so.stem)
            add("floor: importlib of the cached module", r["call"])
            r = run(UNPICKLE, str(blob), env=dict(os.environ, TENSORFFI_CACHE_DIR=str(cache)))
            add("unpickle a compile() handle", r["call"])
            add("  + first call (opens the module)", r["first_call"])
        print(f"# load: {os.getloadavg()}  reps: {reps}  (medians, ms)")
        print(f"import tensorffi: {statistics.median(imports) * 1e3:.0f} ms")
        for name, values in samples.items():
            print(f"{name:<48} {statistics.median(values) * 1e3:9.1f} ms   (min {min(values) * 1e3:.1f}, max {max(values) * 1e3:.1f})")
        a = statistics.median(samples["first compile(): tensorffi"])
        b = statistics.median(samples["first build: cffi ffi.compile() (setuptools)"])
        print(f"ratio first build cffi/tensorffi: {b / a:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)



SEED_CPP = textwrap.dedent("""
    #include <algorithm>
    extern "C" void process_data(float *data, int size) {
        std::transform(data, data + size, data, [](float v) { return 2.0f * v + 1.0f; });
    }
    """)
FIRST_CPP = """
import sys, time, json
t0 = time.perf_counter(); import tensorffi; t1 = time.perf_counter()
lib = tensorffi.compile("bench_cpp", sources=[sys.argv[1]], cache=sys.argv[2])
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "call": t2 - t1}))
"""
INLINE_SRC = r"""
#include <torch/extension.h>
#include <algorithm>
void process_data(torch::Tensor t) {
    float *d = t.data_ptr<float>();
    std::transform(d, d + t.numel(), d, [](float v) { return 2.0f * v + 1.0f; });
}
"""
LOAD_INLINE = """
import sys, time, json
t0 = time.perf_counter()
import torch, torch.utils.cpp_extension as ce
t1 = time.perf_counter()
m = ce.load_inline("bench_inline", cpp_sources=[open(sys.argv[2]).read()], functions=["process_data"],
                   build_directory=sys.argv[1], extra_cflags=["-O3"], verbose=False)
t2 = time.perf_counter()
x = torch.zeros(4); m.process_data(x); assert x.tolist() == [1.0] * 4
print(json.dumps({"import": t1 - t0, "call": t2 - t1}))
"""


def cpp_main(reps: int, peer: bool) -> None:
    import timeit

    work = Path(tempfile.mkdtemp(prefix="tffi-bench-cpp-"))
    try:
        c_src, cpp_src = work / "mylib.c", work / "mylib.cpp"
        c_src.write_text(SEED_C)
        cpp_src.write_text(SEED_CPP)
        samples: dict[str, list[float]] = {}

        def add(name: str, value: float) -> None:
            samples.setdefault(name, []).append(value)

        compilers = [c for c in ("g++", "clang++") if shutil.which(c)]
        warm = work / "warm"
        run(FIRST_CPP, str(cpp_src), str(warm))
        for i in range(reps):  # interleaved: C, then C++ with each compiler, then the cached load
            add("first compile() of the .c (cc)", run(FIRST_TFFI, str(c_src), str(work / f"c-{i}"))["call"])
            for cxx in compilers:
                r = run(FIRST_CPP, str(cpp_src), str(work / f"{cxx}-{i}"), env=dict(os.environ, CXX=cxx))
                add(f"first compile() of the .cpp ({cxx})", r["call"])
            add("cached compile() of the .cpp, fresh process", run(FIRST_CPP, str(cpp_src), str(warm))["call"])
        print(f"# load: {os.getloadavg()}  reps: {reps}  (medians, ms)")
        for name, values in samples.items():
            print(f"{name:<48} {statistics.median(values) * 1e3:9.1f} ms   (min {min(values) * 1e3:.1f}, max {max(values) * 1e3:.1f})")
        # the call: the guarded C++ function against the same function in C, alternated
        import numpy as np

        import tensorffi

        c_lib = tensorffi.compile("bench", CDEF, sources=[str(c_src)], cache=str(work / "calls"))
        cpp_lib = tensorffi.compile("bench_cpp", sources=[str(cpp_src)], cache=str(work / "calls"))
        x = np.zeros(16, dtype=np.float32)
        times: dict[str, list[float]] = {"C": [], "C++": []}
        for _ in range(15):
            for label, fn in (("C", c_lib.process_data), ("C++", cpp_lib.process_data)):
                times[label].append(min(timeit.repeat(lambda: fn(x, 16), number=20000, repeat=3)) / 20000)
        c, g = statistics.median(times["C"]), statistics.median(times["C++"])
        print(f"call on 16 floats (NumPy): C {c * 1e9:.0f} ns, C++ guarded {g * 1e9:.0f} ns, ratio {g / c:.2f}x")
        if peer:
            (work / "inline.cpp").write_text(INLINE_SRC)
            (work / "inline").mkdir()
            r = run(LOAD_INLINE, str(work / "inline"), str(work / "inline.cpp"))
            print(f"peer: torch.utils.cpp_extension.load_inline, cold, once: {r['call']:.1f} s "
                  f"(after import torch: {r['import']:.1f} s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if "--cpp" in sys.argv:
        cpp_main(int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 5, "--peer" in sys.argv)
    else:
        main()
