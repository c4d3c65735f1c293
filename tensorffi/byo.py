# SPDX-License-Identifier: MIT
"""Bring your own C: bind a user's pre-built library or compile a user's sources.

>>> import tensorffi, torch
>>> lib = tensorffi.compile("doubler",
...     source="void process_data(float *d, int n) { for (int i = 0; i < n; i++) d[i] *= 2; }")
>>> t = torch.ones(3)
>>> lib.process_data(t, t.numel())
>>> t.tolist()
[2.0, 2.0, 2.0]

Both kinds of handle pickle, and carry what defines them (see :class:`_Deferred`):

* a :func:`compile` handle carries its recipe (cdef, contracts, options) and the
  text of every file the compiler read, plus the cache key; where it is unpickled it
  loads the module from that process's cache by key, or rebuilds it from the carried
  text — never from whatever file now sits at the original path;
* a :func:`load` handle carries the library's path and its sha256; re-opened, a
  missing or different file is a :class:`~tensorffi.errors.LibraryMismatchError`
  naming the path and both hashes. ``portable=True`` carries the library itself.

Unpickling opens nothing: the library is opened (or built) on first use, so a
process that only forwards tasks (a dask scheduler) never loads user code.

Pickle format (``Library.__reduce__`` -> ``_Deferred(opener, state, description)``;
``state`` is a plain dict, ``v`` = :data:`HANDLE_FORMAT`):

* compile(): ``recipe`` (the call's arguments: name, cdef, header, source,
  source_name, sources, preamble, include_dirs, libraries, library_dirs,
  define_macros, extra_compile_args, extra_link_args, depends), ``contracts``,
  ``returns``, ``cdef`` (the declarations the module was built with, read from the
  sources if no cdef was given), ``files`` (path -> bytes of every file the compiler
  read), ``key`` (the module's name, ``_tf_<name>_<hash>``, the hash covering all of
  the above plus compiler and versions), ``cache`` (the ``cache=`` given, tried
  first where it is usable), ``portable`` and, if so, ``binary`` (the module);
* load(): ``path`` (absolute, or a name for the loader's search), ``sha256`` and
  ``size`` (None for a name), ``cdef``, ``contracts``, ``returns``, and with
  ``portable=True`` ``data`` (the library's bytes).
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import cffi

from . import cache as _cache
from ._buildworker import GUARD_PREFIX, Recipe, _cxx_only_text, build, compiler_identity, is_cxx_file
from ._calls import CxxErrors
from ._decl import parse_declarations
from ._shims import SHIM_PREFIX, abi_shim_cdef, has_array_params
from ._version import __version__
from .errors import BuildError, BuildWarning, CacheError, CacheWarning, DeclarationError, LibraryMismatchError
from .library import Library, check_contracts

# Bumped whenever the way modules are generated changes (part of every cache key).
BUILD_FORMAT = 4  # 3: modules carry trampolines (tensorffi._shims); 4: wrong-code warnings are errors, manifests hash the module
HANDLE_FORMAT = 1
_RECIPE_HISTORY = 8  # module variants remembered per recipe (e.g. a header edited back and forth)


def cache_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """Where compiled modules are cached (see :mod:`tensorffi.cache`)."""
    return _cache.directory(override)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest() if hasattr(hashlib, "file_digest") else _sha(f.read())


# --------------------------------------------------------------------------- #
# Deferred handles                                                             #
# --------------------------------------------------------------------------- #


class _Deferred(Library):
    """A :class:`~tensorffi.Library` that is opened on first use.

    Unpickling creates one of these; the first attribute access runs ``opener(state)``,
    which returns the arguments of ``Library.__init__``, and the object becomes a
    plain ``Library``. Pickled again before that, it pickles its state unchanged.
    """

    def __init__(self, opener: Callable[[dict[str, Any]], tuple[tuple[Any, ...], dict[str, Any]]], state: dict[str, Any], description: str) -> None:
        d = self.__dict__
        d["_tf_opener"] = opener
        d["_tf_state"] = state
        d["_tf_lock"] = threading.Lock()
        d["_description"] = description

    def _tf_open(self) -> None:
        with self.__dict__["_tf_lock"]:
            if type(self) is not _Deferred:
                return  # another thread opened it
            args, kwargs = self.__dict__["_tf_opener"](self.__dict__["_tf_state"])
            self.__class__ = Library  # type: ignore[assignment]  # the handle becomes the Library it opens
            try:
                Library.__init__(self, *args, **kwargs)
            except BaseException:
                self.__class__ = _Deferred
                raise
            for k in ("_tf_opener", "_tf_state", "_tf_lock"):
                self.__dict__.pop(k, None)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name.startswith("_tf_"):
            raise AttributeError(name)
        if type(self) is _Deferred:
            self._tf_open()
        return getattr(self, name)

    def __dir__(self) -> list[str]:
        if type(self) is _Deferred:
            self._tf_open()
        return Library.__dir__(self)

    def __repr__(self) -> str:
        return f"<tensorffi.Library {self.__dict__.get('_description', '?')}: not opened yet>"

    def __reduce__(self) -> tuple[Any, ...]:
        if type(self) is _Deferred:
            return (_Deferred, (self.__dict__["_tf_opener"], self.__dict__["_tf_state"], self.__dict__["_description"]))
        return Library.__reduce__(self)


def _deferred(opener: Callable[..., Any], state: dict[str, Any], description: str) -> Library:
    return _Deferred(opener, state, description)


# --------------------------------------------------------------------------- #
# load(): ABI mode                                                             #
# --------------------------------------------------------------------------- #


def load(
    library: str | os.PathLike[str],
    cdef: str,
    contracts: Mapping[str, str] | None = None,
    *,
    returns: str = "value",
    portable: bool = False,
) -> Library:
    """Bind the functions declared in ``cdef`` from a pre-built shared library.

    ``library`` is a path (``"./mylib.so"``, made absolute now) or a name the dynamic
    loader finds (``"libm.so.6"``). ``contracts`` maps function names to :mod:`contract
    <tensorffi.contract>` strings (shapes, filled-in lengths, outputs, status
    returns). ``returns`` is what an ``int`` result means where no contract says:
    ``"value"`` (returned) or ``"status"`` (non-zero raises).

    The handle pickles as the library's absolute path and sha256 (hashed now):
    where it is re-opened, a missing or changed file is a
    :class:`~tensorffi.errors.LibraryMismatchError`. With ``portable=True`` it
    carries the library's bytes instead, for machines that do not have the file
    (they are written to the cache there, by hash). A library found by name
    through the loader's search path is re-opened by name, unchecked.

    >>> import tensorffi
    >>> m = tensorffi.load("libm.so.6", "double ldexp(double x, int exp);")
    >>> m.ldexp(1.5, 10)
    1536.0
    """
    check_contracts(contracts)
    path = os.fspath(library)
    _refuse_directives(cdef, path)
    decls = parse_declarations(cdef)
    state: dict[str, Any] = dict(
        v=HANDLE_FORMAT, cdef=cdef, contracts=dict(contracts or {}), returns=returns, path=path, sha256=None, data=None
    )
    if os.sep in path or os.path.exists(path):
        state["path"] = path = os.path.abspath(path)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise BuildError(f"cannot load shared library {path!r}: {exc}") from None
        state["sha256"] = _sha(data)
        state["size"] = len(data)
        if portable:
            state["data"] = data
    elif portable:
        raise BuildError(f"portable=True needs a library file, not a name the loader searches for ({path!r})")
    args, kwargs = _open_loaded(state, decls=decls, here=True)
    return Library(*args, **kwargs)


_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(include|define|undef|if|ifdef|ifndef|elif|else|endif|pragma|error)\b(.*)$",
                        re.MULTILINE)


def _refuse_directives(cdef: str, library: str) -> None:
    """load() reads declarations as cffi does, without a C preprocessor: a pasted header
    (``#include``, ``#ifndef`` guards, macros) is refused with the call that reads one."""
    m = _DIRECTIVE.search(cdef) if isinstance(cdef, str) else None
    if m is None:
        return
    line = cdef.count("\n", 0, m.start()) + 1
    inc = re.search(r'#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', cdef)
    guard = re.search(r"^[ \t]*#[ \t]*ifndef[ \t]+_*([A-Za-z]\w*?)_H_*\b", cdef, re.MULTILINE)
    header = inc.group(1) if inc is not None else guard.group(1).lower() + ".h" if guard is not None else "mylib.h"
    for where in ("/usr/include", "/usr/local/include"):
        if os.path.exists(os.path.join(where, header)):
            header = os.path.join(where, header)
            break
    base = os.path.basename(library)
    name = re.sub(r"^lib|\.so(\.\d+)*$|\.dylib$", "", base) or "mylib"
    raise DeclarationError(
        f"load({library!r}): the declarations hold preprocessor lines (line {line}: {m.group(0).strip()!r}); "
        f"load() reads C declarations as cffi does, with no preprocessor. To bind a header, let the compiler "
        f"read it: tensorffi.compile({name!r}, header={header!r}, libraries=[{name!r}]) binds what the "
        f"header declares (it needs a C compiler); or pass load() only the declarations of the functions",
        file="<cdef>", line=line, text=m.group(0).strip())


def _open_loaded(state: dict[str, Any], decls: Any = None, here: bool = False) -> tuple[tuple[Any, ...], dict[str, Any]]:
    path = state["path"]
    target = path
    if not here and state.get("data") is not None:
        target = str(_install_library(state["data"], state["sha256"]))
    elif not here and state.get("sha256"):
        try:
            found = _file_sha(path)
        except FileNotFoundError:
            raise LibraryMismatchError(
                f"library handle for {path!r}: the file does not exist here (host {os.uname().nodename}, "
                f"pid {os.getpid()}); the handle was made from a library with sha256 {state['sha256'][:16]}… "
                f"({state.get('size', '?')} bytes). Make it available at that path, or create the handle "
                f"with load(..., portable=True) to carry the library with it",
                path, state["sha256"], "",
            ) from None
        except OSError as exc:
            raise LibraryMismatchError(f"library handle for {path!r}: cannot read it here: {exc}", path, state["sha256"], "") from None
        if found != state["sha256"]:
            size = os.path.getsize(path)
            raise LibraryMismatchError(
                f"library handle for {path!r}: the file here differs from the library the handle was made from "
                f"(sha256 {found[:16]}…, {size} bytes here; {state['sha256'][:16]}…, {state.get('size', '?')} bytes "
                f"when loaded). It was rebuilt or replaced: load it again, or use load(..., portable=True)",
                path, state["sha256"], found,
            )
    if decls is None:
        decls = parse_declarations(state["cdef"])
    ffi = cffi.FFI()
    ffi.cdef(state["cdef"])
    try:
        raw = ffi.dlopen(target)
    except OSError as exc:
        raise BuildError(f"cannot load shared library {path!r}: {exc}") from None
    # ABI-mode shims: the same symbols declared with intptr_t for array pointers
    # (pointers and intptr_t are passed alike on every ABI cffi supports).
    to_shim = [d for d in decls.functions.values() if has_array_params(d) and not d.variadic]
    shim_lib = None
    if to_shim:
        shim_ffi = cffi.FFI()
        shim_ffi.include(ffi)
        shim_ffi.cdef("\n".join(abi_shim_cdef(d) for d in to_shim))
        shim_lib = shim_ffi.dlopen(target)
    kwargs = dict(
        shim_lookup=(lambda name: getattr(shim_lib, name)) if shim_lib is not None else None,
        default_returns=state["returns"],
        reopen=(_deferred, (_open_loaded, state, f"load({path!r})"), {}),
        description=f"load({path!r})",
    )
    return (ffi, raw, decls, state["contracts"]), kwargs


def _install_library(data: bytes, sha: str) -> Path:
    """A carried library written into this process's cache (by hash), for dlopen."""
    if _sha(data) != sha:
        raise LibraryMismatchError("the library carried by a portable handle is corrupt (hash mismatch)", "", sha, _sha(data))
    try:
        root = _cache.directory()
        return _write_library(root, data, sha)
    except CacheError as exc:
        if exc.refused:
            raise
        failure = exc
    except OSError as exc:
        failure = _cache.unusable(root, exc)
    return _write_library(_private_root(failure), data, sha)


def _write_library(root: Path, data: bytes, sha: str) -> Path:
    path = _cache.subdir(root, "libs") / f"{sha}.so"
    if not path.exists() or _file_sha(str(path)) != sha:
        _cache.write_atomic(path, data)
        _cache.prune(root, keep=str(path))
    _cache.touch(path)
    return path


# --------------------------------------------------------------------------- #
# compile(): API mode, cached                                                  #
# --------------------------------------------------------------------------- #


def _recipe_key(recipe: Recipe, files: Mapping[str, bytes]) -> str:
    material = dict(
        recipe=recipe.as_dict(),
        files={p: _sha(files[p]) for p in recipe.files()},
        compiler=compiler_identity(cxx=recipe.language == "c++" or any(is_cxx_file(f) for f in recipe.sources)),
        python=[sys.version, sys.implementation.cache_tag, importlib.machinery.EXTENSION_SUFFIXES[0]],
        platform=[sys.platform, os.uname().machine],
        cffi=cffi.__version__,
        tensorffi=__version__,
        format=BUILD_FORMAT,
    )
    return _sha(json.dumps(material, sort_keys=True).encode())


def _module_name(name: str, recipe_key: str, deps: Mapping[str, bytes], system: Mapping[str, list[int]]) -> str:
    digest = _sha(json.dumps([recipe_key, [[p, _sha(d)] for p, d in sorted(deps.items())], sorted(system.items())]).encode())
    return f"{_cache.MODULE_PREFIX}{name}_{digest[:24]}"


def compile(
    name: str,
    cdef: str | None = None,
    sources: Sequence[str | os.PathLike[str]] = (),
    *,
    source: str | None = None,
    header: str | os.PathLike[str] | None = None,
    source_name: str = "<source>",
    preamble: str | None = None,
    contracts: Mapping[str, str] | None = None,
    returns: str = "value",
    include_dirs: Sequence[str | os.PathLike[str]] = (),
    libraries: Sequence[str] = (),
    library_dirs: Sequence[str | os.PathLike[str]] = (),
    define_macros: Sequence[tuple[str, str | None]] = (),
    extra_compile_args: Sequence[str] = ("-O3",),
    extra_link_args: Sequence[str] = (),
    depends: Sequence[str | os.PathLike[str]] = (),
    cache: str | os.PathLike[str] | None = None,
    portable: bool = False,
    verbose: bool = False,
    language: str | None = None,
) -> Library:
    """Compile C or C++ (out-of-line cffi API mode), cache the module, bind its functions.

    ``sources`` are C files (``.cpp``, ``.cc``, ``.cxx``: C++); ``source`` is code given
    as a string (named ``source_name`` in compiler messages, with your own line
    numbers); both may be used. ``language="c++"`` makes ``source=`` and ``header=``
    C++ (default: C++ where a source file is, else C).

    C++ is compiled with ``$CXX`` (else ``c++``; flags from ``CXXFLAGS``) and linked
    with it. The functions bound are those with C linkage (``extern "C"``), read from
    the ``extern "C"`` blocks and declarations of your files (or from ``header=`` or a
    cdef) exactly as C is, including a prototype declared ``extern "C"`` whose
    definition follows without it. Every one is called through a generated guard:
    a C++ exception never unwinds into Python, it is raised after the call as a
    :class:`~tensorffi.NativeError` (``std::bad_alloc``: ``NativeMemoryError``;
    ``std::invalid_argument``, ``domain_error``, ``out_of_range``, ``length_error``:
    ``InvalidArgumentError``; ``overflow_error``, ``underflow_error``:
    ``NativeOverflowError``) with ``what()`` in its message and as ``.what``, and the
    exception's type as ``.cpp_type`` (an exception that is no ``std::exception``
    says so). An exception thrown by a function the bridge calls on its own (a
    handle's destructor) is raised by the next call of the library on that thread.

    Declarations: without ``cdef``, the functions your files define with external
    linkage (not ``static``; not from system headers) are bound, with the types they
    need, read from the preprocessed sources — write the C once. With ``header=``,
    the functions that header declares are bound, and the generated wrapper includes
    it (also with a cdef). An explicit ``cdef`` wins; either way every file is compiled against the
    declarations, so a definition that disagrees with them (``float *`` declared,
    ``double *`` defined) is a :class:`~tensorffi.BuildError`, and so is a declared
    function no file defines. ``preamble`` is the C the wrapper sees before calling
    your functions (default: the declarations; ``'#include "mylib.h"'`` also works).

    The cache (:mod:`tensorffi.cache`) is keyed by content: this call's options, the
    text of every file the compiler read (its own dependency output, so an edited
    header rebuilds), the compiler, and the Python, cffi and tensorffi versions. A
    module that fails to load or its sha256 check (a truncated or swapped file) is rebuilt. Concurrent builds
    of one module wait on a file lock and the result is renamed into place.

    The compiler's warnings that mean wrong code are errors (:class:`~tensorffi.BuildError`
    with its message at your file and line): a call to a function without a
    prototype, pointer/integer and incompatible-pointer conversions, a missing
    ``return``, implicit ``int``, a mis-declared builtin. Other warnings of a build
    are shown as a :class:`~tensorffi.BuildWarning` (not again on a cached load). A
    cached module is checked against the sha256 recorded when it was built; one
    replaced or damaged on disk is rebuilt. Where the cache cannot be written
    (read-only, full, under a file) the module is built in a private temporary
    folder instead, with a :class:`~tensorffi.CacheWarning` saying why. A type named
    like one of ``Python.h`` (which the wrapper includes) is a ``BuildError`` naming
    it; a K&R definition without a cdef is a :class:`~tensorffi.DeclarationError`
    naming the function (its prototype cannot be read from it).

    The build runs in this process (the C compiler is the only program started, in
    a private folder): nothing in the current directory is imported or executed.
    ``depends`` are extra files whose content joins the key. ``portable=True`` makes
    the pickled handle carry the built module too (for workers without a compiler).
    ``verbose`` prints timings to stderr.

    >>> import tensorffi, numpy as np
    >>> lib = tensorffi.compile("axpy", source='''
    ... #include <stdint.h>
    ... void axpy(double a, const double *x, double *y, int64_t n) {
    ...     for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
    ... }''', contracts={"axpy": "x: [n]; y: [n]"})
    >>> y = np.ones(3); lib.axpy(2.0, np.arange(3.0), y); y.tolist()
    [1.0, 3.0, 5.0]
    """
    if not (isinstance(name, str) and name.isidentifier() and name.isascii()):
        raise BuildError(f"module name must be an ASCII Python identifier, got {name!r}")
    check_contracts(contracts)
    if cdef is None and source is None and not sources and header is None:
        raise BuildError("compile() needs C to build: sources=[...], source='...', or header=")
    if language is None:
        language = "c++" if any(is_cxx_file(os.fspath(s)) for s in sources) else "c"
    if language not in ("c", "c++"):
        raise BuildError(f"language must be 'c' or 'c++', got {language!r}")
    if cdef is not None:
        parse_declarations(cdef)  # a DeclarationError now, with the line in your cdef
    recipe = Recipe(
        name=name,
        cdef=cdef,
        header=os.path.abspath(os.fspath(header)) if header is not None else None,
        source=source,
        source_name=source_name,
        sources=[os.path.abspath(os.fspath(s)) for s in sources],
        preamble=preamble,
        include_dirs=[os.path.abspath(os.fspath(d)) for d in include_dirs],
        libraries=list(libraries),
        library_dirs=[os.path.abspath(os.fspath(d)) for d in library_dirs],
        define_macros=[list(m) for m in define_macros],
        extra_compile_args=list(extra_compile_args),
        extra_link_args=list(extra_link_args),
        depends=[os.path.abspath(os.fspath(d)) for d in depends],
        language=language,
    )
    files: dict[str, bytes] = {}
    for p in recipe.files():
        try:
            with open(p, "rb") as f:
                files[p] = f.read()
        except OSError as exc:
            raise BuildError(f"cannot read source file {p!r}: {exc}") from None
    state = dict(
        v=HANDLE_FORMAT,
        recipe=recipe.as_dict(),
        contracts=dict(contracts or {}),
        returns=returns,
        cache=None if cache is None else os.path.abspath(os.fspath(cache)),
        portable=portable,
    )
    started = time.time()
    module, manifest, deps, warned = _obtain_somewhere(recipe, files, cache, from_disk=True, verbose=verbose)
    if warned:
        warnings.warn(BuildWarning(f"the C compiler warned while building {name!r}:\n{warned}"), stacklevel=2)
    if manifest.get("skipped") and manifest.get("created", 0) >= started:  # built now (not again on a cached load)
        warnings.warn(BuildWarning(_skipped_text(name, manifest["skipped"])), stacklevel=2)
    derived = recipe.cdef is None and not recipe.header  # what is bound is what the files define
    if derived and manifest.get("cxx_only") and manifest.get("created", 0) >= started:
        warnings.warn(BuildWarning(f"{name!r}: not bound: {_cxx_only_text(manifest['cxx_only'])}"), stacklevel=2)
    state.update(cdef=manifest["cdef"], key=manifest["module"], files=deps, cxx_only=manifest.get("cxx_only", []))
    if portable:
        state["binary"] = Path(module.__file__).read_bytes()
    args, kwargs = _library_args(module, manifest["cdef"], state)
    return Library(*args, **kwargs)


def _skipped_text(name: str, skipped: list[str]) -> str:
    """What a header declares that is not bound, grouped by why (each entry of
    ``skipped`` is ``file:line: names: why``)."""
    by_reason: dict[str, list[str]] = {}
    names: str | list[str]
    for entry in skipped:
        parts = entry.split(": ", 2)
        where, names, why = (parts + ["", ""])[:3] if len(parts) == 3 else ("", entry, "")
        by_reason.setdefault(why, []).append(f"{names} ({where})" if len(by_reason.get(why, ())) < 3 else names)
    lines = [f"{name!r}: {len(skipped)} declarations of the header are not bound:"]
    for why, names in by_reason.items():
        shown = ", ".join(names[:12]) + (f", ... ({len(names) - 12} more)" if len(names) > 12 else "")
        lines.append(f"  {why}: {shown}")
    return "\n".join(lines)


def _library_args(module: Any, cdef: str, state: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    raw = module.lib
    name = state["recipe"]["name"]
    cxx = CxxErrors(module.ffi, raw) if hasattr(raw, GUARD_PREFIX + "take") else None  # a C++ module (guarded)
    return (module.ffi, raw, parse_declarations(cdef), state["contracts"]), dict(
        cxx_errors=cxx,
        shim_lookup=lambda fname: getattr(raw, SHIM_PREFIX + fname, None),
        trampolines=True,
        default_returns=state["returns"],
        reopen=(_deferred, (_open_compiled, state, f"compile({name!r})"), {}),
        description=f"compile({name!r})",
        unbound={entry[0]: _cxx_only_text([entry]) for entry in state.get("cxx_only", ())},
    )


def _open_compiled(state: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Re-open a pickled compile() handle: by key in this process, then in the caches,
    then from the carried module (portable), then by rebuilding from the carried text."""
    if state.get("v") != HANDLE_FORMAT:
        raise BuildError(f"this compile() handle was pickled by another tensorffi (handle format {state.get('v')})")
    key = state["key"]
    module = _loaded.get(key)
    if module is None:
        roots = []
        if state.get("cache") and os.path.isdir(state["cache"]):  # never created where it is not
            with contextlib.suppress(BuildError, OSError):
                roots.append(_cache.directory(state["cache"]))
        with contextlib.suppress(BuildError):
            local = _cache.directory()
            if local not in roots:
                roots.append(local)
        if not roots:
            try:
                roots.append(_cache.directory())
            except CacheError as exc:
                if exc.refused:
                    raise
                roots.append(_private_root(exc))
        for root in roots:
            so = _verified(root, key)
            if so is not None:
                with contextlib.suppress(ImportError, OSError):
                    module = _import_extension(key, so)
                    _cache.touch(root / (key + ".json"))
                    break
        if module is None and state.get("binary") is not None:
            try:
                module = _install_module(roots[0], key, state)
            except OSError as exc:
                module = _install_module(_private_root(_cache.unusable(roots[0], exc)), key, state)
        if module is None:
            recipe = Recipe(**state["recipe"])
            module, manifest, _, warned = _obtain_somewhere(recipe, state["files"], state.get("cache"), from_disk=False,
                                                            verbose=False, root=roots[0])
            if warned:
                warnings.warn(BuildWarning(f"the C compiler warned while rebuilding {recipe.name!r}:\n{warned}"), stacklevel=3)
            state = dict(state, cdef=manifest["cdef"])
    return _library_args(module, state["cdef"], state)


def _install_module(root: Path, key: str, state: dict[str, Any]) -> Any:
    """The module carried by a portable handle, written into the cache under its key."""
    so = root / (key + ".so")
    with _cache.locked(root, key):
        if _verified(root, key) is None:
            _cache.write_atomic(so, state["binary"])
            manifest = dict(
                name=state["recipe"]["name"], module=key, recipe="(carried)", cdef=state["cdef"], sha256=_sha(state["binary"]),
                deps=[[p, _sha(d)] for p, d in state["files"].items()], created=time.time(), carried=True,
            )
            _cache.write_atomic(root / (key + ".json"), json.dumps(manifest).encode())
    try:
        return _import_extension(key, so)
    except (ImportError, OSError) as exc:
        with contextlib.suppress(OSError):
            os.unlink(so)
        raise BuildError(f"the module carried by this handle does not load here ({exc}); it needs the same "
                         f"Python and platform as the machine that built it") from None


def _find(root: Path, recipe_key: str, name: str, files: Mapping[str, bytes], from_disk: bool) -> tuple[dict[str, Any], dict[str, bytes]] | None:
    """A module built from this recipe whose recorded files all still have the same
    content (read from disk, or from ``files`` for a carried handle), and whose
    system headers still have the same size and mtime here."""
    index = _cache.read_json(root / "recipes" / f"{name}-{recipe_key[:24]}.json")
    if not index:
        return None
    for key in index.get("modules", []):
        manifest = _cache.read_json(root / (key + ".json"))
        if not manifest or manifest.get("recipe") != recipe_key or not (root / (key + ".so")).exists():
            continue
        deps: dict[str, bytes] = {}
        for path, sha in manifest["deps"]:
            data = files.get(path)
            if data is None and from_disk:
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError:
                    break
            if data is None or _sha(data) != sha:
                break
            deps[path] = data
        else:
            if all(_same_stat(path, size, mtime) for path, size, mtime in manifest.get("system", ())):
                return manifest, deps
    return None


def _same_stat(path: str, size: int, mtime_ns: int) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_size == size and st.st_mtime_ns == mtime_ns


def _obtain_somewhere(recipe: Recipe, files: Mapping[str, bytes], cache: str | os.PathLike[str] | None, *, from_disk: bool,
                      verbose: bool, root: Path | None = None) -> tuple[Any, dict[str, Any], dict[str, bytes], str]:
    """:func:`_obtain` in the cache, or, where the cache cannot be used (read-only, full,
    not a folder: a :class:`~tensorffi.CacheWarning` says why), in this process's
    private temporary folder. A refused cache (unsafe, a bad setting) stays an error."""
    try:
        if root is None:
            root = _cache.directory(cache)
        return _obtain(recipe, files, root, from_disk=from_disk, verbose=verbose)
    except CacheError as exc:
        if exc.refused:
            raise
        failure = exc
    except OSError as exc:
        failure = _cache.unusable(root if root is not None else Path(os.fspath(cache or ".")), exc)
    private = _private_root(failure)
    try:
        return _obtain(recipe, files, private, from_disk=from_disk, verbose=verbose)
    except OSError as exc:
        raise BuildError(f"cannot build {recipe.name!r}: {failure}; and in the private folder {private}: {exc}") from None


_private: list[Path] = []


def _private_root(failure: CacheError) -> Path:
    """This process's private build folder (removed at exit), with a warning saying
    why the cache is not used."""
    if not _private:
        import atexit

        try:
            path = Path(tempfile.mkdtemp(prefix="tensorffi-cache-"))
        except OSError as exc:
            raise CacheError(f"{failure}; and no private temporary folder can be made either: {exc}",
                             failure.path, failure.reason) from None
        atexit.register(shutil.rmtree, path, True)
        _private.append(path)
    warnings.warn(CacheWarning(f"{failure}; building in the private temporary folder {_private[0]} instead "
                               f"(removed at exit: the next process builds again)"), stacklevel=4)
    return _private[0]


def _verified(root: Path, key: str) -> Path | None:
    """The cached module ``key``, if its file is the one its manifest records (sha256):
    a module replaced by another one, or damaged, is never loaded."""
    so = root / (key + ".so")
    manifest = _cache.read_json(root / (key + ".json"))
    if not manifest or not manifest.get("sha256"):
        return None
    try:
        found = _file_sha(str(so))
    except OSError:
        return None
    return so if found == manifest["sha256"] else None


def _obtain(recipe: Recipe, files: Mapping[str, bytes], root: Path, *, from_disk: bool, verbose: bool) -> tuple[Any, dict[str, Any], dict[str, bytes], str]:
    """(module, manifest, files read, compiler warnings) for ``recipe``: cached, or built
    now. A cached module that fails its identity check (its sha256 is not the one
    recorded when it was built) or does not load is removed and rebuilt."""
    t0 = time.perf_counter()
    recipe_key = _recipe_key(recipe, files)
    found = _find(root, recipe_key, recipe.name, files, from_disk)
    stale = False
    if found is not None:
        manifest, deps = found
        key = manifest["module"]
        try:
            with _cache.locked(root, key, required=False):  # checked and loaded before any `cache clear` removes it
                so = _verified(root, key)
                if so is None:
                    raise ImportError("its file is not the module that was built (sha256 differs)")
                module = _import_extension(key, so)
        except (ImportError, OSError) as exc:
            if verbose:
                print(f"tensorffi: cached module {key} does not load ({exc}); rebuilding", file=sys.stderr)
            with _cache.locked(root, f"{recipe.name}-{recipe_key[:24]}"):
                if _verified(root, key) is None:  # not already rebuilt by another process
                    _cache.remove_module(root, key)
            stale = True
        else:
            _cache.touch(root / (key + ".json"))
            if verbose:
                print(f"tensorffi: {recipe.name}: cached {key} ({(time.perf_counter() - t0) * 1e3:.1f} ms)", file=sys.stderr)
            return module, manifest, deps, ""
    warned = ""
    # a module whose load failed here may stay mapped under its path: load the rebuilt
    # one through a path of its own
    def load(key: str, so: Path) -> Any:
        try:
            return _import_extension(key, so, fresh_path=stale)
        except (ImportError, OSError) as exc:
            raise _LoadFailed(key, exc) from None

    try:
        with _cache.locked(root, f"{recipe.name}-{recipe_key[:24]}"):
            found = _find(root, recipe_key, recipe.name, files, from_disk)  # built meanwhile?
            if found is None:
                got: list[Any] = []
                manifest, deps, warned = _build_into(root, recipe, recipe_key, None if from_disk else files, verbose,
                                                     load, got)
                module = got[0]
            else:
                manifest, deps = found
                key = manifest["module"]
                with _cache.locked(root, key):  # loaded before another process's `cache clear` may remove it
                    module = load(key, root / (key + ".so"))
    except _LoadFailed as failed:
        _cache.remove_module(root, failed.key)
        raise BuildError(f"the module built for {recipe.name!r} does not load: {failed.exc}") from None
    return module, manifest, deps, warned


class _LoadFailed(Exception):
    """A module built or found in the cache that does not load (in _obtain)."""

    def __init__(self, key: str, exc: BaseException) -> None:
        super().__init__(key)
        self.key, self.exc = key, exc


def _build_into(root: Path, recipe: Recipe, recipe_key: str, files: Mapping[str, bytes] | None, verbose: bool,
                load: Callable[[str, Path], Any] | None = None,
                loaded: list[Any] | None = None) -> tuple[dict[str, Any], dict[str, bytes], str]:
    """Build ``recipe`` into the cache; ``load(key, path)``, if given, loads the module
    before another process can remove it, its result appended to ``loaded``."""
    t0 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="tmp.", dir=root))
    so = None
    held = contextlib.ExitStack()  # the module's lock, once its name is known
    try:
        built = build(recipe, work, lambda deps, system: _module_name(recipe.name, recipe_key, deps, system), files)
        key = built.modname
        sha = _file_sha(str(built.path))
        so = root / (key + ".so")
        # written, indexed and (by `load`) loaded under the module's lock: another process's
        # `cache clear` removes modules under that lock, so never between these steps
        held.enter_context(_cache.locked(root, key))
        os.replace(built.path, so)
        manifest = dict(
            name=recipe.name,
            module=key,
            recipe=recipe_key,
            sha256=sha,
            cdef=built.cdef,
            deps=[[p, _sha(d)] for p, d in built.deps.items()],
            system=[[p, *f] for p, f in built.system.items()],
            created=time.time(),
            bytes=so.stat().st_size,
            tensorffi=__version__,
            seconds=built.seconds,
            skipped=built.skipped,
            cxx_only=built.cxx_only,
        )
        _cache.write_atomic(root / (key + ".json"), json.dumps(manifest).encode())
        index_path = _cache.subdir(root, "recipes") / f"{recipe.name}-{recipe_key[:24]}.json"
        index = _cache.read_json(index_path) or {}
        keys = [key] + [k for k in index.get("modules", []) if k != key]
        _cache.write_atomic(index_path, json.dumps(dict(modules=keys[:_RECIPE_HISTORY])).encode())
        if load is not None and loaded is not None:
            loaded.append(load(key, so))
    except OSError:
        held.close()  # remove_module takes the module's lock itself
        if so is not None:  # a full disk: no module without its manifest left behind
            _cache.remove_module(root, so.stem)
        raise
    finally:
        held.close()
        shutil.rmtree(work, ignore_errors=True)
    _cache.prune(root, keep=key)
    if verbose:
        steps = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in built.seconds.items())
        print(f"tensorffi: built {key} in {(time.perf_counter() - t0) * 1e3:.0f} ms ({steps})", file=sys.stderr)
    return manifest, built.deps, built.warnings


_loaded: dict[str, Any] = {}
_import_lock = threading.Lock()


def _import_extension(modname: str, path: Path, fresh_path: bool = False) -> Any:
    with _import_lock:
        module = _loaded.get(modname)
        if module is not None:
            return module
        if not fresh_path:
            return _exec_extension(modname, path)
        # the dynamic loader reuses an object already mapped from the same path (a
        # replaced module that failed to load here): load the new file through a link
        alias = Path(tempfile.mkdtemp(prefix="tmp.", dir=path.parent)) / path.name
        try:
            try:
                os.link(path, alias)
            except OSError:
                shutil.copyfile(path, alias)
            return _exec_extension(modname, alias)
        finally:
            shutil.rmtree(alias.parent, ignore_errors=True)


def _exec_extension(modname: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:  # pragma: no cover
        raise ImportError(f"cannot load compiled module {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _loaded[modname] = module
    return module


__all__ = ["compile", "load", "cache_dir"]


def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: tab completion does not offer imports (np, torch, ...)
