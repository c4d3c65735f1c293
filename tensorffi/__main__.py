# SPDX-License-Identifier: MIT
"""Command line: ``tensorffi demo``, ``tensorffi info``, ``tensorffi cache [list|clear]``.

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


def cache_command(action: str, path: str | None, as_json: bool = False, say: Callable[[str], None] = print) -> int:
    """``tensorffi cache list`` (modules, most recently used first), ``clear``, ``path``."""
    import time

    from . import cache

    if action == "path":
        say(str(cache.directory(path)))
        return 0
    if action == "clear":
        n = cache.clear(path)
        say(f"removed {n} module(s) from {cache.directory(path)}")
        return 0
    facts = cache.info(path)
    if as_json:
        say(json.dumps(facts, indent=2))
        return 0
    say(f"{facts['path']}: {len(facts['modules'])} module(s), {_size(facts['bytes'])} of {_size(facts['limit'])}")
    now = time.time()
    for m in facts["modules"]:
        files = ", ".join(m["files"][:3]) + (f" (+{len(m['files']) - 3})" if len(m["files"]) > 3 else "")
        say(f"  {m['name']:<20} {_size(m['bytes']):>9}  used {_ago(now - m['last_used']):>8} ago  {m['module']}  {files}")
    return 0


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)  # pragma: no cover


def _ago(seconds: float) -> str:
    for unit, span in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f} {unit}"
    return f"{max(seconds, 0):.0f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tensorffi", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run every kernel family on data shipped with the package")
    sub.add_parser("info", help="print version and build facts as JSON")
    cache = sub.add_parser("cache", help="list or clear the cache of modules built by tensorffi.compile()")
    cache.add_argument("action", nargs="?", choices=["list", "clear", "path"], default="list")
    cache.add_argument("--dir", help="the cache folder (default: $TENSORFFI_CACHE_DIR or ~/.cache/tensorffi)")
    cache.add_argument("--json", action="store_true", help="print the listing as JSON")
    args = parser.parse_args(argv)
    if args.command == "cache":
        return cache_command(args.action, args.dir, args.json)
    if args.command == "info":
        import tensorffi

        print(json.dumps(tensorffi.info(), indent=2))
        return 0
    return demo()


if __name__ == "__main__":
    sys.exit(main())
