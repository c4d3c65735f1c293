# SPDX-License-Identifier: MIT
"""Command line: ``python -m tensorffi demo`` and ``python -m tensorffi info``.

The demo runs every kernel family on data shipped with the package. Each kernel
module contributes a ``_demo(print)`` function; the modules are listed in DEMO_STEPS.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Callable

# Kernel modules, in demo order; each has ``_demo(say: Callable[[str], None])``.
DEMO_STEPS = ["tensorffi._demo_core", "tensorffi.signal", "tensorffi.io", "tensorffi.physics", "tensorffi.ops"]


def demo(say: Callable[[str], None] = print) -> int:
    import tensorffi

    facts = tensorffi.info()
    say(f"tensorffi {facts['version']} — {facts['simd']} SIMD, {facts['threads']} threads, built with {facts['compiler']}")
    ran = 0
    for name in DEMO_STEPS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue  # that kernel family is not part of this build yet
            raise
        step = getattr(module, "_demo", None)
        if step is not None:
            say("")
            step(say)
            ran += 1
    say("")
    say(f"demo finished: {ran} step(s) ran")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tensorffi", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run every kernel family on data shipped with the package")
    sub.add_parser("info", help="print version and build facts as JSON")
    args = parser.parse_args(argv)
    if args.command == "info":
        import tensorffi

        print(json.dumps(tensorffi.info(), indent=2))
        return 0
    return demo()


if __name__ == "__main__":
    sys.exit(main())
