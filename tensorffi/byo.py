# SPDX-License-Identifier: MIT
"""Bring your own C: bind a user's pre-built library or compile a user's sources.

>>> import tensorffi, torch
>>> lib = tensorffi.compile("doubler", "void process_data(float *data, int size);",
...     source="void process_data(float *d, int n) { for (int i = 0; i < n; i++) d[i] *= 2; }")
>>> t = torch.ones(3)
>>> lib.process_data(t, t.numel())
>>> t.tolist()
[2.0, 2.0, 2.0]
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import cffi

from ._decl import CFunction, parse_declarations
from ._version import __version__
from .errors import BuildError
from .library import SHIM_PREFIX, Library, check_contracts, has_array_params


def _shim_param(p: Any, i: int) -> tuple[str, str]:
    """(declaration in the shim, expression passed to the real function)."""
    arg = f"a{i}"
    if p.type.shimmable:
        return f"intptr_t {arg}", f"({p.type.text}){arg}"
    return p.decl.replace("__TF_NAME__", arg), arg


def shim_declarations(decl: CFunction) -> tuple[str, str]:
    """(cdef line, C definition) of the intptr_t shim of one function."""
    params = [_shim_param(p, i) for i, p in enumerate(decl.params)]
    plist = ", ".join(d for d, _ in params) or "void"
    call = f"{decl.name}({', '.join(e for _, e in params)})"
    result = decl.result.text
    head = f"{result} {SHIM_PREFIX}{decl.name}({plist})"
    body = f"{{ {call}; }}" if result == "void" else f"{{ return {call}; }}"
    return head + ";", "static " + head + " " + body


def _abi_shim_cdef(decl: CFunction) -> str:
    params = [_shim_param(p, i)[0] for i, p in enumerate(decl.params)]
    return f"{decl.result.text} {decl.name}({', '.join(params) or 'void'});"


# --------------------------------------------------------------------------- #
# load(): ABI mode                                                             #
# --------------------------------------------------------------------------- #


def load(
    library: str | os.PathLike[str],
    cdef: str,
    contracts: Mapping[str, str] | None = None,
    *,
    returns: str = "value",
) -> Library:
    """Bind the functions declared in ``cdef`` from a pre-built shared library.

    ``library`` is a path (``"./mylib.so"``) or a name the dynamic loader finds
    (``"libm.so.6"``). ``contracts`` maps function names to :mod:`contract
    <tensorffi.contract>` strings (shapes, filled-in lengths, outputs, status
    returns). ``returns`` is what an ``int`` result means where no contract says:
    ``"value"`` (returned) or ``"status"`` (non-zero raises).

    >>> import tensorffi
    >>> m = tensorffi.load("libm.so.6", "double ldexp(double x, int exp);")
    >>> m.ldexp(1.5, 10)
    1536.0
    """
    check_contracts(contracts)
    path = os.fspath(library)
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    try:
        raw = ffi.dlopen(path)
    except OSError as exc:
        raise BuildError(f"cannot load shared library {path!r}: {exc}") from None
    decls = parse_declarations(cdef)
    # ABI-mode shims: the same symbols declared with intptr_t for array pointers
    # (pointers and intptr_t are passed alike on every ABI cffi supports).
    shim_ffi = cffi.FFI()
    shim_ffi.include(ffi)
    to_shim = [d for d in decls.functions.values() if has_array_params(d) and not d.variadic]
    shim_lib = None
    if to_shim:
        shim_ffi.cdef("\n".join(_abi_shim_cdef(d) for d in to_shim))
        shim_lib = shim_ffi.dlopen(path)
    return Library(
        ffi,
        raw,
        decls,
        contracts,
        shim_lookup=(lambda name: getattr(shim_lib, name)) if shim_lib is not None else None,
        default_returns=returns,
        reopen=(load, (path, cdef, dict(contracts or {})), {"returns": returns}),
        description=f"load({path!r})",
    )


# --------------------------------------------------------------------------- #
# compile(): API mode, cached                                                  #
# --------------------------------------------------------------------------- #


def cache_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """Where compiled modules are cached: ``override``, ``$TENSORFFI_CACHE_DIR``, or
    ``$XDG_CACHE_HOME/tensorffi`` (``~/.cache/tensorffi``). Created with mode 0700;
    refused if another user owns it or others can write to it."""
    if override is not None:
        path = Path(override)
    elif os.environ.get("TENSORFFI_CACHE_DIR"):
        path = Path(os.environ["TENSORFFI_CACHE_DIR"])
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "tensorffi"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    if st.st_uid != os.getuid():
        raise BuildError(f"cache directory {path} belongs to another user (uid {st.st_uid}); refusing to load code from it")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise BuildError(
            f"cache directory {path} is writable by other users (mode {stat.S_IMODE(st.st_mode):o}); "
            f"refusing to load code from it (chmod 700 it, or set TENSORFFI_CACHE_DIR)"
        )
    return path


def _read(path: str | os.PathLike[str]) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        raise BuildError(f"cannot read source file {os.fspath(path)!r}: {exc}") from None


def compile(
    name: str,
    cdef: str,
    sources: Sequence[str | os.PathLike[str]] = (),
    *,
    source: str | None = None,
    preamble: str | None = None,
    contracts: Mapping[str, str] | None = None,
    returns: str = "value",
    include_dirs: Sequence[str] = (),
    libraries: Sequence[str] = (),
    library_dirs: Sequence[str] = (),
    define_macros: Sequence[tuple[str, str | None]] = (),
    extra_compile_args: Sequence[str] = ("-O3",),
    extra_link_args: Sequence[str] = (),
    depends: Sequence[str | os.PathLike[str]] = (),
    cache: str | os.PathLike[str] | None = None,
    verbose: bool = False,
) -> Library:
    """Compile C sources out-of-line (cffi API mode) and bind the declared functions.

    ``sources`` are C files; ``source`` is C code given as a string (both may be
    used). ``preamble`` is the C text the generated module sees before calling your
    functions (default: ``cdef`` itself, which suits plain prototypes; pass
    ``'#include "mylib.h"'`` otherwise). ``depends`` lists headers whose changes
    must trigger a rebuild.

    The build is cached under :func:`cache_dir` by a hash of everything that
    affects it (declarations, source contents, options, compiler, Python, cffi and
    tensorffi versions): a change rebuilds, an unchanged call loads the cached
    module. Concurrent builds of the same module (threads or processes) are
    serialised by a file lock and the result is moved into place atomically.
    Compiler errors raise :class:`~tensorffi.BuildError` with the compiler output.
    """
    if not name.isidentifier():
        raise BuildError(f"module name must be a Python identifier, got {name!r}")
    check_contracts(contracts)
    decls = parse_declarations(cdef)
    to_shim = [d for d in decls.functions.values() if has_array_params(d) and not d.variadic]
    shims = [shim_declarations(d) for d in to_shim]
    full_cdef = cdef + "\n" + "\n".join(c for c, _ in shims)
    pre = cdef if preamble is None else preamble
    set_source = pre + "\n" + (("\n" + source + "\n") if source else "") + "\n".join(d for _, d in shims) + "\n"

    sources = [os.path.abspath(os.fspath(s)) for s in sources]
    spec = {
        "cdef": full_cdef,
        "set_source": set_source,
        "sources": sources,
        "include_dirs": [os.path.abspath(d) for d in include_dirs],
        "libraries": list(libraries),
        "library_dirs": [os.path.abspath(d) for d in library_dirs],
        "define_macros": [list(m) for m in define_macros],
        "extra_compile_args": list(extra_compile_args),
        "extra_link_args": list(extra_link_args),
    }
    key_material = dict(
        spec,
        source_hashes=[_read(s) for s in sources],
        depend_hashes=[_read(d) for d in depends],
        env={k: os.environ.get(k, "") for k in ("CC", "CFLAGS", "LDFLAGS", "CPPFLAGS")},
        python=sys.version,
        cffi=cffi.__version__,
        tensorffi=__version__,
        platform=sys.platform,
    )
    digest = hashlib.sha256(json.dumps(key_material, sort_keys=True).encode()).hexdigest()[:20]
    modname = f"_tf_{name}_{digest}"
    root = cache_dir(cache)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    target = root / (modname + suffix)

    if not target.exists():
        with open(root / (modname + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if not target.exists():
                    _build(modname, spec, root, target, verbose)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        try:
            os.unlink(root / (modname + ".lock"))
        except OSError:
            pass

    module = _import_extension(modname, target)
    raw = module.lib
    return Library(
        module.ffi,
        raw,
        decls,
        contracts,
        shim_lookup=lambda fname: getattr(raw, SHIM_PREFIX + fname),
        default_returns=returns,
        reopen=(
            compile,
            (name, cdef, sources),
            dict(
                source=source, preamble=preamble, contracts=dict(contracts or {}), returns=returns,
                include_dirs=list(include_dirs), libraries=list(libraries), library_dirs=list(library_dirs),
                define_macros=list(define_macros), extra_compile_args=list(extra_compile_args),
                extra_link_args=list(extra_link_args), depends=list(depends),
                cache=None if cache is None else os.fspath(cache),
            ),
        ),
        description=f"compile({name!r})",
    )


_loaded: dict[str, Any] = {}


def _import_extension(modname: str, path: Path) -> Any:
    if modname in _loaded:
        return _loaded[modname]
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:  # pragma: no cover
        raise BuildError(f"cannot load compiled module {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _loaded[modname] = module
    return module


def _build(modname: str, spec: dict[str, Any], root: Path, target: Path, verbose: bool) -> None:
    """Build in a private temporary folder (a separate process, so the compiler's
    output is captured), then move the module into place atomically."""
    tmp = Path(tempfile.mkdtemp(prefix=modname + ".", dir=root))
    try:
        (tmp / "spec.json").write_text(json.dumps(dict(spec, modname=modname)))
        proc = subprocess.run(
            [sys.executable, "-m", "tensorffi._buildworker", str(tmp / "spec.json"), str(tmp)],
            capture_output=True,
            text=True,
        )
        if verbose:
            sys.stderr.write(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            output = (proc.stdout + proc.stderr).strip()
            raise BuildError(f"compiling {modname} failed:\n{output[-8000:]}")
        built = next(tmp.glob(modname + "*" + importlib.machinery.EXTENSION_SUFFIXES[0].rsplit(".", 1)[-1]), None)
        if built is None:
            built = next(tmp.rglob(modname + ".*so"), None)
        if built is None:  # pragma: no cover
            raise BuildError(f"compiling {modname} produced no module in {tmp}")
        os.replace(built, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
