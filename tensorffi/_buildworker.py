# SPDX-License-Identifier: MIT
"""Build one user module in a separate process: ``python -m tensorffi._buildworker SPEC DIR``.

Run by :func:`tensorffi.compile`, so that the compiler's output can be captured and
a failing build cannot disturb the calling process.
"""
from __future__ import annotations

import json
import sys

import cffi


def main(spec_path: str, outdir: str) -> int:
    with open(spec_path) as f:
        spec = json.load(f)
    ffi = cffi.FFI()
    ffi.cdef(spec["cdef"])
    ffi.set_source(
        spec["modname"],
        spec["set_source"],
        sources=spec["sources"],
        include_dirs=spec["include_dirs"],
        libraries=spec["libraries"],
        library_dirs=spec["library_dirs"],
        define_macros=[tuple(m) for m in spec["define_macros"]],
        extra_compile_args=spec["extra_compile_args"],
        extra_link_args=spec["extra_link_args"],
    )
    try:
        path = ffi.compile(tmpdir=outdir, verbose=False)
    except Exception as exc:  # the compiler's own output is already on stderr
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
