# SPDX-License-Identifier: MIT
"""Command line: ``tensorffi demo | info | bench | cache`` (also ``python -m tensorffi``).

The demo runs every kernel family on data shipped with the package: the steps of
tensorffi._demo, in the order of DEMO_STEPS.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Callable

from ._demo import STEPS
from .cache import cache_command

__all__ = ["main", "demo", "cache_command", "DEMO_STEPS"]

# The demo's steps, in order; each is ``step(say: Callable[[str], None])``.
DEMO_STEPS = STEPS

DESCRIPTION = "tensorffi: C code callable on PyTorch tensors and NumPy arrays -- zero-copy, checked."

EPILOG = """\
examples:
  tensorffi demo               what tensorffi does, on data it ships
  tensorffi info --json        build facts for a bug report
  tensorffi bench              how fast it is here, beside SciPy, NumPy, pandas, torch
  tensorffi cache clear        drop the modules compile() built

In Jupyter: %load_ext tensorffi, then C in a %%tensorffi cell.
"""

NEXT_STEPS = """\
what to try next:
  - your own C on a tensor: the README's "Quick start" (three lines, no C++ extension)
  - in Jupyter: %load_ext tensorffi, then C in a %%tensorffi cell; the notebook
    examples/quickstart.ipynb in the source repository walks through everything
    (examples/quickstart.py is the same as a script)
  - tensorffi bench: how fast this is on your machine, beside SciPy, NumPy and torch"""


def demo(say: Callable[[str], None] = print) -> int:
    import tensorffi

    facts = tensorffi.info()
    say(f"tensorffi {facts['version']} — {facts['simd']} SIMD, {facts['threads']} threads, built with {facts['compiler']}")
    ran = 0
    for step in DEMO_STEPS:
        say("")
        step(say)
        ran += 1
    say("")
    say(f"demo finished: {ran} kernel families ran on the data shipped with tensorffi.")
    say("")
    say(NEXT_STEPS)
    return 0


def _parser() -> argparse.ArgumentParser:
    from ._version import __version__

    parser = argparse.ArgumentParser(
        prog="tensorffi", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"tensorffi {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="command", title="commands")
    sub.add_parser("demo", help="run every kernel family on data shipped with the package",
                   description="Run every kernel family on data shipped with the package.")
    info = sub.add_parser("info", help="version and build facts",
                          description="Version, compiler, build flags, SIMD level and threads.")
    info.add_argument("--json", action="store_true", help="print them as JSON")
    bench = sub.add_parser("bench", help="a one-minute tour of the benchmarks, each beside a peer",
                           description="Measure call overhead, sosfilt, read_csv and nbody on this machine, each "
                                       "beside a peer (ctypes, raw cffi, SciPy, NumPy, pandas, torch) in the same "
                                       "run; medians and ratios.")
    bench.add_argument("--seconds", type=float, default=40.0, help="time spent measuring (default 40)")
    bench.add_argument("--full", action="store_true",
                       help="run the quick modes of the benchmarks/ scripts of a source checkout (minutes)")
    cache = sub.add_parser("cache", help="list or clear the cache of modules built by tensorffi.compile()",
                           description="The cache of modules built by tensorffi.compile().")
    cache.add_argument("action", nargs="?", choices=["list", "clear", "path"], default="list")
    cache.add_argument("--dir", help="the cache folder (default: $TENSORFFI_CACHE_DIR or ~/.cache/tensorffi)")
    cache.add_argument("--json", action="store_true", help="print the listing as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status.

    A mistake in what was given (an argument, ``$TENSORFFI_CACHE_SIZE``, a cache folder
    that is a file, unsafe or unwritable) is one line on stderr and status 2, as
    argparse does for its own errors; a traceback means a bug in tensorffi.
    """
    from .errors import TensorFFIError

    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "cache" and args.dir is not None and not args.dir.strip():
        parser.error("cache --dir: the folder name is empty")
    if args.command == "bench" and not (0 < args.seconds < float("inf")):
        parser.error(f"bench --seconds: must be a positive number of seconds, got {args.seconds}")
    try:
        return _run(args)
    except (TensorFFIError, OSError) as exc:
        print(f"tensorffi: error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.command == "cache":
        return cache_command(args.action, args.dir, args.json)
    if args.command == "info":
        import tensorffi
        from ._display import info_text

        facts = tensorffi.info()
        print(json.dumps(facts, indent=2) if args.json else info_text(facts))
        return 0
    if args.command == "bench":
        from . import _bench

        return _bench.full() if args.full else _bench.tour(seconds=args.seconds)
    return demo()


if __name__ == "__main__":
    sys.exit(main())
