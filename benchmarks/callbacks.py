# SPDX-License-Identifier: MIT
"""Round trip of a callback from a C thread into Python and back.

    python benchmarks/callbacks.py [--calls 20000] [--n 1024]

A C function (compiled here) starts a thread that calls a function pointer
``calls`` times and times each call with CLOCK_MONOTONIC; the caller waits in C
with the GIL released, as an SDK's user does. Compared in the same run:

* tensorffi: a Python callable bound through a ``callback(frame: [n])`` contract
  (the frame arrives as a torch tensor viewing C memory; ``copy`` as a copy);
* raw cffi: ``ffi.callback`` with the same signature, receiving the raw pointer.

Reports median and 99th percentile microseconds per call.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile

import numpy as np

import tensorffi

CDEF = """
typedef int (*frame_fn)(void *user, const float *frame, int64_t n, int64_t seq);
int run_calls(frame_fn fn, void *user, int64_t calls, int64_t n, double *ns);
"""
SRC = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
typedef int (*frame_fn)(void *user, const float *frame, int64_t n, int64_t seq);
typedef struct { frame_fn fn; void *user; int64_t calls, n; double *ns; float *frame; int rc; } job;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static void *loop(void *arg) {
    job *j = arg;
    for (int64_t k = 0; k < j->calls; k++) {
        for (int64_t i = 0; i < j->n; i++) j->frame[i] = (float)(k + i);
        double t0 = now();
        j->rc |= j->fn(j->user, j->frame, j->n, k);
        j->ns[k] = now() - t0;
    }
    return NULL;
}
int run_calls(frame_fn fn, void *user, int64_t calls, int64_t n, double *ns) {
    job j = {fn, user, calls, n, ns, malloc(sizeof(float) * (size_t)n), 0};
    pthread_t t;
    if (!j.frame || pthread_create(&t, NULL, loop, &j) != 0) { free(j.frame); return -1; }
    pthread_join(t, NULL);
    free(j.frame);
    return j.rc;
}
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--n", type=int, default=1024)
    args = ap.parse_args()
    cache = tempfile.mkdtemp()
    libs = {}
    for label, contract in [("tensorffi view", "fn: callback(frame: [n]); user: ?; ns: out [calls]"),
                            ("tensorffi copy", "fn: callback(frame: [n], copy); user: ?; ns: out [calls]")]:
        libs[label] = tensorffi.compile("bench_cb", CDEF, source=SRC, contracts={"run_calls": contract},
                                        cache=cache, extra_compile_args=["-O2", "-pthread"])
    raw = libs["tensorffi view"].raw
    ffi = libs["tensorffi view"].ffi
    print(f"# callback round trip from a C thread, {args.calls} calls, frame of {args.n} float32")
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    rows = []
    for rep in range(3):
        for label, lib in libs.items():
            total = [0.0]

            def on_frame(frame, seq):
                total[0] += float(frame[0])

            _, ns = lib.run_calls(on_frame, args.n, calls=args.calls)
            rows.append((label, ns.numpy() if hasattr(ns, "numpy") else ns))

        acc = [0.0]

        @ffi.callback("frame_fn")
        def raw_cb(user, frame, n, seq):
            acc[0] += frame[0]
            return 0

        ns = np.zeros(args.calls)
        raw.run_calls(raw_cb, ffi.NULL, args.calls, args.n, ffi.from_buffer("double[]", ns))
        rows.append(("raw cffi ffi.callback", ns))
    print(f"{'':28s} {'median us':>10s} {'p99 us':>10s}")
    for label in dict.fromkeys(r[0] for r in rows):
        med = statistics.median(float(np.median(ns)) for lab, ns in rows if lab == label) / 1e3
        p99 = statistics.median(float(np.percentile(ns, 99)) for lab, ns in rows if lab == label) / 1e3
        print(f"{label:28s} {med:10.2f} {p99:10.2f}")


if __name__ == "__main__":
    main()
