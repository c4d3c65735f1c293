# SPDX-License-Identifier: MIT
"""A small compiler cache for the C mutants' builds (what ccache does, in preprocessor
mode, without the system dependency).

``python build_ffi.py`` always recompiles every translation unit (cffi builds with
``force=True``), and ``csrc/parse.c`` alone takes a minute and a half at ``-O3``: without
a cache, each C mutant paid for a full build although it changes one file. The harness
puts a directory first on the build's ``PATH`` with a ``gcc`` (and ``cc``) that runs
this script, which

* passes anything that is not one plain ``-c SRC -o OBJ`` compile (the link, version
  queries, ...) to the real compiler unchanged;
* else preprocesses ``SRC`` with the same arguments (``-E``) and looks the object up
  under the hash of: the real compiler (path, size, mtime), every argument, and the
  preprocessed text (every header, macro and line marker, so a mutated header misses
  for exactly the files that include it);
* on a hit copies the object (and replays the compiler's messages); on a miss compiles
  for real and stores the object if the compile succeeded.

The build is therefore the same build: same compiler, same flags, same object for the
same preprocessed input; only the unchanged translation units are not recompiled.
Objects built in another scratch copy keep that copy's path in their debug info (the
sources are compiled by relative path, so nothing else differs).

Usage (by the harness): ``compiler_cache.py CACHE_DIR SHIM_DIR NAME ARGS...``.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile


def real_compiler(name: str, shim_dir: str) -> str:
    """``name`` on PATH, the shim directory left out."""
    shim = os.path.realpath(shim_dir)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and os.path.realpath(p) != shim)
    found = shutil.which(name, path=path)
    if found is None:
        sys.exit(f"compiler_cache: {name} not found on PATH")
    return found


def plain_compile(args: list[str]) -> tuple[str, str] | None:
    """(source, object) of a ``-c SRC -o OBJ`` compile of one C file, else None."""
    if "-c" not in args or args.count("-o") != 1 or "-" in args:
        return None
    i = args.index("-o")
    if i + 1 >= len(args):
        return None
    obj = args[i + 1]
    rest = args[:i] + args[i + 2:]
    sources = [a for a in rest if not a.startswith("-") and a.endswith((".c", ".i"))]
    if len(sources) != 1 or any(a in ("-M", "-MM", "-MD", "-MMD", "-MF", "-E", "-S") for a in rest):
        return None
    return sources[0], obj


def key(compiler: str, args: list[str], src_obj: tuple[str, str]) -> str | None:
    """The cache key of this compile, or None if the source does not preprocess."""
    obj = src_obj[1]
    i = args.index("-o")
    pre = [a if a != "-c" else "-E" for a in args[:i] + args[i + 2:]]
    # -fno-working-directory: gcc -E -g writes the working directory (the scratch
    # copy's path) as a line marker; the object is the same without it.
    proc = subprocess.run([compiler, *pre, "-fno-working-directory"], capture_output=True)
    if proc.returncode != 0:
        return None
    st = os.stat(os.path.realpath(compiler))
    h = hashlib.sha256()
    h.update(f"{os.path.realpath(compiler)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    h.update("\0".join(a for a in args if a != obj).encode())  # the -o path is not the output
    h.update(b"\0\0")
    h.update(proc.stdout)
    return h.hexdigest()


def main(argv: list[str]) -> int:
    cache_dir, shim_dir, name, *args = argv
    compiler = real_compiler(name, shim_dir)
    src_obj = plain_compile(args)
    if src_obj is None:
        return subprocess.call([compiler, *args])
    k = key(compiler, args, src_obj)
    if k is None:  # let the compiler say why
        return subprocess.call([compiler, *args])
    entry = os.path.join(cache_dir, k[:2], k)
    os.makedirs(os.path.dirname(entry), exist_ok=True)
    # One compile per key at a time: a second build of the same translation unit (two
    # mutants built at once) waits for the first and then copies its object.
    with open(entry + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return lookup_or_compile(compiler, args, entry, src_obj[1])


def lookup_or_compile(compiler: str, args: list[str], entry: str, obj: str) -> int:
    if os.path.isfile(entry + ".o"):
        shutil.copyfile(entry + ".o", obj)
        try:
            with open(entry + ".err", "rb") as fh:
                sys.stderr.buffer.write(fh.read())
        except FileNotFoundError:
            pass
        return 0
    proc = subprocess.run([compiler, *args], stderr=subprocess.PIPE)
    sys.stderr.buffer.write(proc.stderr)
    if proc.returncode == 0 and os.path.isfile(obj):
        # written under a temporary name, then renamed, the object last
        for data_from, suffix in ((None, ".err"), (obj, ".o")):
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(entry))
            with os.fdopen(fd, "wb") as fh:
                if data_from is None:
                    fh.write(proc.stderr)
                else:
                    with open(data_from, "rb") as src:
                        shutil.copyfileobj(src, fh)
            os.replace(tmp, entry + suffix)
    return proc.returncode


def install(cache_dir: str, shim_dir: str, names: tuple[str, ...] = ("gcc", "cc")) -> None:
    """Write the ``gcc``/``cc`` shims into ``shim_dir`` (put it first on the build's PATH)."""
    os.makedirs(cache_dir, exist_ok=True)
    os.makedirs(shim_dir, exist_ok=True)
    here = os.path.abspath(__file__)
    for n in names:
        path = os.path.join(shim_dir, n)
        with open(path, "w") as fh:
            fh.write(f'#!/bin/sh\nexec "{sys.executable}" -S -E "{here}" "{cache_dir}" "{shim_dir}" {n} "$@"\n')
        os.chmod(path, 0o755)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
