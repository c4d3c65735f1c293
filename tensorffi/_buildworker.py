# SPDX-License-Identifier: MIT
"""Build one user module: the compiler driver behind :func:`tensorffi.compile`.

The build runs in the calling process and imports nothing: cffi writes the C of the
extension module (``make_c_source``, pure Python, no setuptools), and the C compiler
is the only program run, with a private build folder as its working directory. No
file of the caller's working directory is imported or executed, and torch is never
touched. Steps:

1. each user file (``sources``, the ``source`` string, the ``header``) is
   preprocessed by the compiler with ``-MMD``: the dependency file lists every
   non-system file the compiler read, which is what the cache key covers;
2. the preprocessed text is scanned (:func:`tensorffi._decl.scan`) for the
   functions each file defines; without a cdef, the exported ones (external
   linkage, in the user's own files) and the types they need *are* the cdef;
3. with a cdef (or a header), each file is compiled with the declared prototypes
   appended after its own text, so a definition that disagrees with its
   declaration is a compile error ("conflicting types"), never a heap overwrite;
4. the cffi wrapper is compiled against the declarations (``-Werror`` for
   pointer and integer mismatches), everything is linked, and the module is
   dlopen'ed once with ``RTLD_NOW`` so that a declared function no file defines
   is a :class:`~tensorffi.BuildError` naming it.

Compiler messages keep the user's own file names and lines (line markers, and
``#line 1 "<source>"`` for a ``source=`` string); build-folder paths are removed.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sysconfig
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from ._decl import Declarations, Statement, cxx_defined, extern_c_regions, parse_declarations, scan, system_includes
from .errors import BuildError, DeclarationError
from ._shims import abi_shim_cdef, has_array_params, shim_declarations, trampolines


@dataclass
class Recipe:
    """Everything a compile() call says about a module (paths are absolute)."""

    name: str
    cdef: str | None = None
    header: str | None = None
    source: str | None = None
    source_name: str = "<source>"
    sources: list[str] = field(default_factory=list)
    preamble: str | None = None
    include_dirs: list[str] = field(default_factory=list)
    libraries: list[str] = field(default_factory=list)
    library_dirs: list[str] = field(default_factory=list)
    define_macros: list[list[Any]] = field(default_factory=list)
    extra_compile_args: list[str] = field(default_factory=list)
    extra_link_args: list[str] = field(default_factory=list)
    depends: list[str] = field(default_factory=list)
    language: str = "c"  # of source= and header= ("c" or "c++"); files go by their suffix

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def files(self) -> list[str]:
        """The files this recipe names (their contents are part of its key)."""
        out = list(self.sources) + list(self.depends)
        if self.header:
            out.append(self.header)
        return out


@dataclass
class Built:
    path: Path  # the module, in the build folder
    modname: str
    deps: dict[str, bytes]  # every file of the user's the compiler read (original path -> content)
    system: dict[str, list[int]]  # system headers it read: path -> [size, mtime_ns]
    cdef: str  # the declarations the module was built with
    seconds: dict[str, float]
    warnings: str = ""  # what the compiler warned about in the user's files (it built)
    skipped: list[str] = field(default_factory=list)  # a header's declarations cffi cannot express (left out)
    # C++ functions of the user's files defined without extern "C" (not bound): [name, signature, symbol, file]
    cxx_only: list[list[str]] = field(default_factory=list)


# --------------------------------------------------------------------------- #
# The compiler                                                                 #
# --------------------------------------------------------------------------- #

_identity: dict[str, str] = {}


def compiler() -> list[str]:
    """The C compiler command: ``$CC``, else the one Python was built with, else ``cc``."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(cc)


def cxx_compiler() -> list[str]:
    """The C++ compiler command: ``$CXX``, else the one Python was built with, else ``c++``."""
    cxx = os.environ.get("CXX") or sysconfig.get_config_var("CXX") or "c++"
    return shlex.split(cxx)


#: File suffixes compiled as C++ (everything else is C).
CXX_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++", ".cp", ".CPP", ".C")


def is_cxx_file(path: str) -> bool:
    return path.endswith(CXX_SUFFIXES)


def compiler_identity(cxx: bool = False) -> str:
    """What identifies the compiler for the cache key: its command, the resolved binary
    and that file's size and mtime (an upgrade changes them), and the environment
    flags it honours. No process is started. ``cxx``: the C++ compiler too."""
    cc = cxx_compiler() if cxx else compiler()
    names = ("CXX", "CXXFLAGS", "CPPFLAGS", "LDFLAGS") if cxx else ("CC", "CFLAGS", "CPPFLAGS", "LDFLAGS")
    env = "|".join(os.environ.get(k, "") for k in names)
    if cxx:
        return compiler_identity(False) + "||" + _one_identity(cc, "c++|" + env)
    return _one_identity(cc, env)


def _one_identity(cc: list[str], env: str) -> str:
    memo = _identity.get(env)
    if memo is not None:
        return memo
    exe = shutil.which(cc[0]) if cc else None
    if exe is None:
        ident = f"{' '.join(cc)}|missing|{env}"
    else:
        real = os.path.realpath(exe)
        st = os.stat(real)
        ident = f"{' '.join(cc)}|{real}|{st.st_size}|{st.st_mtime_ns}|{env}"
    _identity[env] = ident
    return ident


# Warnings that mean the compiled code is wrong (a call through an implicit ``int f()``
# truncates a double or a pointer; a missing return hands back garbage): errors in
# every file of a build, the user's and the wrapper. Only flags the compiler knows:
# gcc stops on an unknown -Werror=, clang merely warns.
STRICT_COMMON = [
    "-Werror=implicit-function-declaration",
    "-Werror=implicit-int",
    "-Werror=incompatible-pointer-types",
    "-Werror=int-conversion",
    "-Werror=return-type",
]
STRICT_GCC = ["-Werror=builtin-declaration-mismatch"]  # double sqrt(int);
STRICT_CLANG = ["-Werror=incompatible-function-pointer-types", "-Werror=incompatible-library-redeclaration"]
# C++ makes implicit declarations, implicit int and pointer/integer mix-ups errors by
# itself (the C-only flags above are refused by g++); a missing return stays a warning.
STRICT_CXX = ["-Werror=return-type"]


def strict_flags(predefined: Mapping[str, str], cxx: bool = False) -> list[str]:
    """The wrong-code warnings made errors, for the compiler whose predefined macros
    are ``predefined`` (``cc -E -dM``); ``cxx``: for the C++ compiler."""
    if cxx:
        return list(STRICT_CXX) if ("__clang__" in predefined or "__GNUC__" in predefined) else []
    if "__clang__" in predefined:
        return STRICT_COMMON + STRICT_CLANG
    if "__GNUC__" in predefined:
        return STRICT_COMMON + STRICT_GCC
    return []  # another compiler: its own defaults (its spelling of these flags is unknown)


def _python_include() -> list[str]:
    paths = sysconfig.get_paths()
    out = [paths["include"]]
    if paths.get("platinclude") and paths["platinclude"] != paths["include"]:
        out.append(paths["platinclude"])
    return out


# Standard integer types the check may need to declare in a file that uses them
# without including <stdint.h>: the compilers' own macros spell them.
_STANDARD_TYPES = {
    **{f"int{n}_t": f"__INT{n}_TYPE__" for n in (8, 16, 32, 64)},
    **{f"uint{n}_t": f"__UINT{n}_TYPE__" for n in (8, 16, 32, 64)},
    **{f"int_least{n}_t": f"__INT_LEAST{n}_TYPE__" for n in (8, 16, 32, 64)},
    **{f"uint_least{n}_t": f"__UINT_LEAST{n}_TYPE__" for n in (8, 16, 32, 64)},
    **{f"int_fast{n}_t": f"__INT_FAST{n}_TYPE__" for n in (8, 16, 32, 64)},
    **{f"uint_fast{n}_t": f"__UINT_FAST{n}_TYPE__" for n in (8, 16, 32, 64)},
    "intptr_t": "__INTPTR_TYPE__",
    "uintptr_t": "__UINTPTR_TYPE__",
    "intmax_t": "__INTMAX_TYPE__",
    "uintmax_t": "__UINTMAX_TYPE__",
    "size_t": "__SIZE_TYPE__",
    "ptrdiff_t": "__PTRDIFF_TYPE__",
    "wchar_t": "__WCHAR_TYPE__",
    "char16_t": "__CHAR16_TYPE__",
    "char32_t": "__CHAR32_TYPE__",
    "bool": "_Bool",
}


class _Job:
    """A compiler process started now and waited for later (the steps run in parallel)."""

    def __init__(self, argv: list[str], cwd: Path, what: str) -> None:
        self.argv = argv
        self.what = what
        self.proc = subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )

    def wait(self) -> tuple[int, str]:
        out, _ = self.proc.communicate()
        return self.proc.returncode, out.decode("utf-8", "replace")


def _stop(jobs: list[_Job]) -> None:
    """End compiler processes whose work a refusal made moot (none is left running)."""
    for job in jobs:
        if job.proc.poll() is None:
            job.proc.kill()
        job.proc.communicate()


def _start(argv: list[str], cwd: Path, what: str) -> _Job:
    try:
        return _Job(argv, cwd, what)
    except OSError as exc:
        raise BuildError(f"cannot run the C compiler {argv[0]!r} ({exc}); install gcc or clang, or set CC") from None


def _read_deps(path: Path, cwd: Path) -> list[str]:
    """The prerequisites of a make rule written by ``-MMD -MF``."""
    try:
        text = path.read_text()
    except OSError:
        return []
    text = text.replace("\\\n", " ")
    _, _, rest = text.partition(": ")
    parts = re.findall(r"(?:\\ |[^\s])+", rest)
    return [os.path.normpath(os.path.join(cwd, p.replace("\\ ", " ").replace("$$", "$"))) for p in parts]


# --------------------------------------------------------------------------- #
# The build                                                                    #
# --------------------------------------------------------------------------- #


def build(
    recipe: Recipe,
    workdir: Path,
    module_name: Callable[[dict[str, bytes], dict[str, list[int]]], str],
    files: Mapping[str, bytes] | None = None,
) -> Built:
    """Build ``recipe`` in the empty folder ``workdir``.

    ``module_name(deps, system)`` names the extension module once the files the
    compiler reads are known, so the name can be a hash of all of them: ``deps`` are
    the user's files (path -> content), ``system`` the headers found in the
    compiler's system directories (path -> [size, mtime_ns]; they are not carried by
    handles, and an upgraded system header changes its fingerprint).

    ``files`` (path -> content) rebuilds from carried text instead of the files at
    those paths: they are written under ``workdir/m`` at their original paths, and
    every path the compiler sees or reports is mapped back.
    """
    import cffi
    from cffi import recompiler

    timing: dict[str, float] = {}
    t0 = time.perf_counter()
    mirror = None
    if files is not None:
        mirror = workdir / "m"
        for path, data in files.items():
            dst = Path(str(mirror) + path)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(data)
        for d in recipe.include_dirs:
            Path(str(mirror) + d).mkdir(parents=True, exist_ok=True)

    def here(path: str) -> str:
        return str(mirror) + path if mirror is not None else path

    def original(path: str) -> str:
        m = str(mirror) + "/" if mirror is not None else None
        return "/" + path[len(m):] if m is not None and path.startswith(m) else path

    def clean(output: str) -> str:
        if mirror is not None:
            output = output.replace(str(mirror) + "/", "/")
        return output.replace(str(workdir) + "/", "")

    cc = compiler()
    cxx = cxx_compiler()
    common = ["-fPIC"]
    for m in recipe.define_macros:
        common.append(f"-D{m[0]}" if len(m) < 2 or m[1] is None else f"-D{m[0]}={m[1]}")
    common += [f"-I{here(d)}" for d in recipe.include_dirs]
    common += list(recipe.extra_compile_args)
    common += shlex.split(os.environ.get("CPPFLAGS", ""))
    if mirror is not None:
        common.append(f"-ffile-prefix-map={mirror}/=/")
    flags = common + shlex.split(os.environ.get("CFLAGS", ""))
    cxx_flags = common + shlex.split(os.environ.get("CXXFLAGS", ""))
    header_cxx = recipe.language == "c++"

    # 1. preprocess every user file (with its dependency list), in parallel
    units: list[tuple[str, str]] = []  # (path the compiler reads, name in messages)
    for s in recipe.sources:
        units.append((here(s), s))
    cxx_unit = [is_cxx_file(s) for s in recipe.sources]
    if recipe.source is not None:
        # A source string sees <stdint.h> and <stddef.h>, and with a cdef the
        # declarations (or the preamble) first, as cffi's own set_source() would:
        # so a definition that disagrees with its declaration cannot compile.
        inline = workdir / ("source.cpp" if header_cxx else "source.c")
        name: str | None = recipe.source_name.replace("\\", "\\\\").replace('"', '\\"')
        prefix = "#include <stdint.h>\n#include <stddef.h>\n"
        if recipe.cdef is not None:
            if recipe.preamble is not None:
                prefix += recipe.preamble + "\n"
            else:
                prefix += _c_linkage(recipe.cdef) if header_cxx else recipe.cdef + "\n"
        inline.write_text(f'{prefix}#line 1 "{name}"\n{recipe.source}\n')
        units.append((str(inline), recipe.source_name))
        cxx_unit.append(header_cxx)
    module_cxx = any(cxx_unit) or header_cxx
    probe = _start(cc + flags + ["-E", "-dM", "-v", "-x", "c", os.devnull], workdir, "predefined macros")
    probe_cxx = _start(cxx + cxx_flags + ["-E", "-dM", "-v", "-x", "c++", os.devnull], workdir, "predefined macros (C++)") \
        if module_cxx else None
    jobs = []
    for k, (path, _) in enumerate(units):
        tool = cxx + cxx_flags if cxx_unit[k] else cc + flags
        jobs.append(_start(tool + ["-E", "-MD", "-MF", f"u{k}.d", "-MT", "x", path, "-o", f"u{k}.i"], workdir, path))
    header_job = None
    if recipe.header:
        tool, lang = (cxx + cxx_flags, "c++") if header_cxx else (cc + flags, "c")
        header_job = _start(
            tool + ["-E", "-MD", "-MF", "h.d", "-MT", "x", "-x", lang, here(recipe.header), "-o", "h.i"], workdir, recipe.header
        )
    preamble_job = None
    if recipe.preamble is not None:
        # only for its dependencies: the headers a preamble includes are part of the key
        pre = "preamble.cpp" if module_cxx else "preamble.c"
        (workdir / pre).write_text(recipe.preamble + "\n")
        isystem = [a for p in _python_include() for a in ("-isystem", p)]
        preamble_job = _start(
            (cxx + cxx_flags if module_cxx else cc + flags) + isystem + ["-E", "-MD", "-MF", "p.d", "-MT", "x", pre, "-o", "p.i"],
            workdir, "preamble"
        )
    failures = []
    rc, probe_out = probe.wait()
    predefined = dict(re.findall(r"^#define (\w+) (.*)$", probe_out, re.M)) if rc == 0 else {}
    search = _search_dirs(probe_out)
    strict = strict_flags(predefined)
    strict_cxx: list[str] = []
    predefined_cxx = predefined
    if probe_cxx is not None:
        rc, out = probe_cxx.wait()
        if rc != 0 and shutil.which(cxx[0]) is None:
            raise BuildError(f"cannot run the C++ compiler {cxx[0]!r}; install g++ or clang++, or set CXX")
        predefined_cxx = dict(re.findall(r"^#define (\w+) (.*)$", out, re.M)) if rc == 0 else {}
        search = _search_dirs(out) + [d for d in search if d not in _search_dirs(out)]
        strict_cxx = strict_flags(predefined_cxx, cxx=True)
    warned: list[str] = []
    for job in jobs + [j for j in (header_job, preamble_job) if j is not None]:
        rc, out = job.wait()
        if job is header_job:  # the header is preprocessed as the main file: its `#pragma once` is no mistake
            out = _without_pragma_once(out)
        if rc != 0:
            failures.append(clean(out))
        elif out.strip() and job.what != "preamble":
            warned.append(clean(out))
    if failures:
        raise BuildError(f"compiling {recipe.name} failed:\n" + "\n".join(failures).strip(), "\n".join(failures))
    dep_files = [f"u{k}.d" for k in range(len(units))] + (["h.d"] if header_job else []) + (["p.d"] if preamble_job else [])
    # the user's files (content) and the system headers (fingerprint) the compiler read
    user_dirs = {os.path.normpath(here(d)) for d in recipe.include_dirs}
    system_dirs = [d for d in search if d not in user_dirs] + [os.path.normpath(p) for p in _python_include()]
    deps: dict[str, bytes] = {}
    system: dict[str, list[int]] = {}
    for d in dep_files:
        for p in _read_deps(workdir / d, workdir):
            if mirror is not None and p.startswith(str(mirror) + "/"):
                deps[original(p)] = Path(p).read_bytes()
            elif p.startswith(str(workdir) + "/"):
                continue
            elif any(p.startswith(sd + "/") for sd in system_dirs):
                st = os.stat(p)
                system[p] = [st.st_size, st.st_mtime_ns]
            else:
                deps[p] = Path(p).read_bytes()
    for f in recipe.files():
        if f not in deps:
            deps[f] = Path(here(f)).read_bytes()
    deps = dict(sorted(deps.items()))
    system = dict(sorted(system.items()))
    modname = module_name(deps, system)
    timing["preprocess"] = time.perf_counter() - t0

    # 2. what each file defines; the cdef
    scans: list[list[Statement]] = []
    for k, (path, _) in enumerate(units):
        text = (workdir / f"u{k}.i").read_text(errors="replace")
        statements = _scan_cxx(text) if cxx_unit[k] else scan(text)
        _map_files(statements, original)
        scans.append(statements)
    header_statements: list[Statement] = []
    if recipe.header:
        text = (workdir / "h.i").read_text(errors="replace")
        header_statements = scan(extern_c_regions(text) if header_cxx and "extern" in text else text)
        _map_files(header_statements, original)

    derived_preamble: str | None = None
    skipped: list[str] = []
    derived_includes = ""
    body = ""
    if recipe.cdef is not None:
        cdef = recipe.cdef
    elif recipe.header:
        exported = _unique([s for s in header_statements if s.user and s.kind == "prototype" and not s.static])
        if not exported:
            raise DeclarationError(f"{recipe.header}: declares no function (with external linkage)", file=recipe.header)
        extra = {}
        if any(recipe.header.startswith(d + "/") for d in search):
            # a system header may declare more than the libraries linked define (fftw3.h
            # declares the float128 API of libfftw3q): what none defines is left out, by name
            defined = {s.name for st in scans for s in st if s.kind == "function" and s.user and not s.static}
            found = _symbols_in(recipe.libraries, recipe.library_dirs)
            libs = ", ".join(recipe.libraries) or "none"
            extra = {id(s): f"defined in no library linked (libraries: {libs})" for s in exported
                     if s.name not in defined and not found(s.name)}
        header_statements, exported, skipped = _bindable(header_statements, exported, recipe.header, extra)
        opaque, body = _derive(header_statements, exported)
        cdef = opaque + body
        derived_preamble = None  # the wrapper includes the header itself
    else:
        _refuse_knr([s for st in scans for s in st if s.user and s.kind == "knr" and not s.static])
        exported = _unique([s for st in scans for s in st if s.user and s.kind == "function" and not s.static])
        if not exported:
            where = ", ".join(n for _, n in units) or "no file"
            mangled = _cxx_only_of_units(workdir, units, cxx_unit, cxx + cxx_flags, set())
            if mangled:
                raise DeclarationError(
                    f"{where}: defines no function with C linkage to bind: {_cxx_only_text(mangled)}",
                    file=mangled[0][3],
                )
            raise DeclarationError(
                f"{where}: defines no function with external linkage to bind (static functions are private to their file)",
                file=units[0][1] if units else "",
            )
        opaque, body = _derive([s for st in scans for s in st], exported)
        cdef = opaque + body
        includes = []
        for k in range(len(units)):
            for path in system_includes((workdir / f"u{k}.i").read_text(errors="replace")):
                name = _include_name(path, search)
                if cxx_unit[k]:  # the wrapper is C: <cstdio> is <stdio.h>, <vector> has nothing for it
                    name = _c_header_of(name)
                    if name is None:
                        continue
                line = f"#include {name}"
                if line not in includes:
                    includes.append(line)
        if module_cxx:
            includes = ["#include <stdint.h>", "#include <stddef.h>", "#include <stdbool.h>"] + [
                i for i in includes if i not in ("#include <stdint.h>", "#include <stddef.h>", "#include <stdbool.h>")]
        derived_includes = "\n".join(includes) + "\n"
        derived_preamble = derived_includes + body
    if recipe.cdef is None:
        _check_names(exported)
    try:
        decls = parse_declarations(cdef)
    except DeclarationError as exc:
        if recipe.cdef is not None or recipe.source is None:
            raise
        from ._decl import declaration_error

        first = str(exc).split("\n")[0].replace(" cannot read the declarations:", "")
        raise declaration_error(first, "", texts={recipe.source_name: recipe.source}) from None
    timing["scan"] = time.perf_counter() - t0 - timing["preprocess"]

    # 3. compile each user file with the declarations it must agree with appended
    declared_here: list[Statement] = []
    if recipe.cdef is not None:
        declared_here = scan(_cdef_as_c(recipe.cdef))
    elif recipe.header:
        declared_here = header_statements
    compile_jobs = []
    for k, (path, _) in enumerate(units):
        checked = workdir / f"u{k}.check.i"
        text = (workdir / f"u{k}.i").read_text(errors="replace")
        inline_with_cdef = recipe.source is not None and recipe.cdef is not None and k == len(units) - 1
        if declared_here and not inline_with_cdef:
            check = _agreement_check(scans[k], declared_here, decls, predefined_cxx if cxx_unit[k] else predefined)
            text += _c_linkage(check) if cxx_unit[k] and check.strip() else check
        checked.write_text(text)
        if cxx_unit[k]:
            tool = cxx + cxx_flags + strict_cxx + ["-c", "-x", "c++-cpp-output"]
        else:
            tool = cc + flags + strict + ["-c", "-x", "cpp-output"]
        compile_jobs.append(_start(tool + [checked.name, "-o", f"u{k}.o"], workdir, path))

    # 4. the cffi wrapper
    shim_decls = [d for d in decls.functions.values() if has_array_params(d) and not d.variadic]
    shims = [shim_declarations(d) for d in shim_decls]
    # trampolines: what the bridge's native call path calls (one per function it can pass)
    python_side = set(re.findall(r'extern\s+"Python[^"]*"\s+[^;(]*?(\w+)\s*\(', cdef))
    shims.append(trampolines(decls.functions.values(), python_side))
    # the wrapper is C, except for a C++ build whose declarations are a header or a
    # preamble of the user's (which may be C++ only); the guards are a C++ unit of their own
    wrapper_cxx = module_cxx and (recipe.preamble is not None or bool(recipe.header))
    if recipe.preamble is not None:
        preamble = recipe.preamble
    elif recipe.header:  # the wrapper is compiled against the real header (a cdef that disagrees fails)
        preamble = f'#include "{here(recipe.header)}"'
        if wrapper_cxx and not _declares_linkage(Path(here(recipe.header))):
            preamble = _c_linkage(preamble)
    elif derived_preamble is not None:
        preamble = derived_preamble
    else:
        preamble = cdef
    runtime_cdef = ""
    if module_cxx:
        # every bound function is called through a C++ guard (see guards()): an exception
        # never unwinds through the wrapper's C frames into Python
        guarded = [d for d in decls.functions.values() if d.name not in python_side]
        if wrapper_cxx:
            cxx_decls = preamble
        elif derived_preamble is not None:
            cxx_decls = derived_includes + _c_linkage(body)
        else:
            cxx_decls = "#include <stdint.h>\n#include <stddef.h>\n" + _c_linkage(cdef)
        (workdir / "guards.cpp").write_text(cxx_decls + '\n# 1 "<tensorffi guards>"\n' + guards(guarded, decls))
        compile_jobs.append(_start(cxx + cxx_flags + strict_cxx + ["-c", "guards.cpp", "-o", "guards.o"], workdir, "guards.cpp"))
        preamble += "\n" + guard_aliases(guarded, wrapper_cxx)
        runtime_cdef = GUARD_CDEF
    preamble += '\n# 1 "<tensorffi wrapper>"\n'  # what follows is generated: not the user's lines
    ffi = cffi.FFI()
    try:
        ffi.cdef(cdef + "\n" + "\n".join(c for c, _ in shims) + runtime_cdef)
    except Exception as exc:  # cffi.CDefError, cffi.FFIError
        from ._decl import declaration_error

        _stop(compile_jobs)
        raise declaration_error(str(exc), cdef) from None
    wrapper = workdir / ("module.cpp" if wrapper_cxx else "module.c")
    try:
        recompiler.make_c_source(ffi, modname, preamble + "\n" + "\n".join(d for _, d in shims) + "\n", str(wrapper))
    except Exception as exc:  # cffi's TypeError, VerificationError: what the declarations cannot say to cffi
        _stop(compile_jobs)
        raise DeclarationError(f"{recipe.header or recipe.name}: cffi cannot bind these declarations: {exc}",
                               file=recipe.header or "<cdef>") from None
    isystem = [a for p in _python_include() for a in ("-isystem", p)]
    tool = cxx + cxx_flags + isystem + strict_cxx if wrapper_cxx else cc + flags + isystem + strict
    compile_jobs.append(_start(tool + ["-c", wrapper.name, "-o", "module.o"], workdir, "module.c"))
    failures = []
    wrapper_output = ""
    for job in compile_jobs:
        rc, out = job.wait()
        if job.what == "module.c":
            wrapper_output = out
        if rc != 0:
            failures.append(clean(out) if job.what not in ("module.c", "guards.cpp") else _wrapper_failure(clean(out)))
        elif out.strip() and job.what not in ("module.c", "guards.cpp"):
            warned.append(clean(out))
    if failures:
        output = "\n".join(failures).strip()
        clash = sorted(set(re.findall(r"conflicting types for [\u2018'\"](\w+)[\u2019'\"]", output)))
        lead = f"compiling {recipe.name} failed:"
        python_names = _python_clashes(wrapper_output, cdef)
        if python_names:
            output = clean(wrapper_output).strip()
            shown = ", ".join(python_names)
            lead = (
                f"compiling {recipe.name} failed: your type {shown} has the name of a type of Python.h, which the "
                f"generated wrapper includes to bind your functions; rename {shown} in your C (names starting "
                f"with Py, _Py or PY belong to Python's C API, and Python.h also declares destructor, getter, "
                f"setter, visitproc, freefunc and other plain names):"
            )
        elif clash:
            lead = (
                f"compiling {recipe.name} failed: the declaration of {', '.join(clash)} does not match "
                f"its definition (calling through a wrong declaration would corrupt memory):"
            )
        raise BuildError(lead + "\n" + output, output)
    timing["compile"] = time.perf_counter() - t0 - timing["preprocess"] - timing["scan"]

    # 5. link, and resolve every symbol now
    so = workdir / (modname + ".so")
    objs = [f"u{k}.o" for k in range(len(units))] + ["module.o"] + (["guards.o"] if module_cxx else [])
    link = (cxx if module_cxx else cc) + ["-shared", *objs, "-o", so.name]
    link += [f"-L{d}" for d in recipe.library_dirs] + [f"-l{lib}" for lib in recipe.libraries]
    link += list(recipe.extra_link_args) + shlex.split(os.environ.get("LDFLAGS", ""))
    rc, out = _start(link, workdir, "link").wait()
    if rc != 0:
        raise BuildError(_link_failure(recipe, clean(out).strip()), clean(out))
    cxx_only = _cxx_only_of_units(workdir, units, cxx_unit, None, set(decls.functions)) if any(cxx_unit) else []
    _check_symbols(so, decls, recipe, units, workdir, cxx_only)
    timing["link"] = time.perf_counter() - t0 - timing["preprocess"] - timing["scan"] - timing["compile"]

    return Built(so, modname, deps, system, cdef, timing, "\n".join(w.strip() for w in warned), skipped, cxx_only)


# --------------------------------------------------------------------------- #
# C++                                                                          #
# --------------------------------------------------------------------------- #


def _c_linkage(text: str) -> str:
    """C declarations as C++ sees them: with C linkage."""
    return 'extern "C" {\n' + text + '\n}\n'


def _declares_linkage(header: Path) -> bool:
    """Whether a header says its own linkage for C++ (``extern "C"`` or glibc's
    ``__BEGIN_DECLS``): it is included as it is; a plain C header is wrapped."""
    try:
        text = header.read_text(errors="replace")
    except OSError:
        return False
    return 'extern "C"' in text or "__BEGIN_DECLS" in text


def _scan_cxx(text: str) -> list[Statement]:
    """The statements of a preprocessed C++ file's ``extern "C"`` regions. A prototype
    declared there (``extern "C" { void f(float *x); }``, in the file or a header it
    includes) whose definition follows outside the region (``void f(float *x) {...}``,
    C linkage all the same) counts as a definition: it is exported."""
    statements = scan(extern_c_regions(text))
    protos = {s.name for s in statements if s.kind == "prototype" and s.user and not s.static}
    if protos:
        defined = cxx_defined(text, protos)
        for s in statements:
            if s.kind == "prototype" and s.name in defined:
                s.kind = "function"
    return statements


#: The C++ side of the guards, in the module once: what an exception was, per thread.
GUARD_RUNTIME = r"""
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>
#include <typeinfo>
#if defined(__GNUC__) || defined(__clang__)
#include <cxxabi.h>
#define _TFX_CXXABI 1
#endif
extern "C" { int _tfx_pending = 0; }  /* exceptions caught and not yet raised, all threads */
namespace {
struct _tfx_state { int kind; char func[128]; char type[256]; char what[4096]; };
thread_local _tfx_state _tfx_st;
void _tfx_copy(char *dst, std::size_t n, const char *src) noexcept {
    if (src == nullptr) src = "";
    std::size_t k = std::strlen(src);
    if (k >= n) k = n - 1;
    std::memcpy(dst, src, k);
    dst[k] = 0;
}
void _tfx_type(char *dst, std::size_t n, const std::type_info *ti) noexcept {
    if (ti == nullptr) { _tfx_copy(dst, n, "?"); return; }
#ifdef _TFX_CXXABI
    int status = 0;
    char *d = abi::__cxa_demangle(ti->name(), nullptr, nullptr, &status);
    if (d != nullptr && status == 0) { _tfx_copy(dst, n, d); std::free(d); return; }
    std::free(d);
#endif
    _tfx_copy(dst, n, ti->name());
}
/* one caught std::exception: its kind (the NativeError subclass), dynamic type and what() */
static void _tfx_std(_tfx_state &s, int kind, const std::exception &e) noexcept {
    s.kind = kind;
    _tfx_type(s.type, sizeof s.type, &typeid(e));
    _tfx_copy(s.what, sizeof s.what, e.what());
}
/* called inside catch (...): records the exception being handled */
void _tfx_caught(const char *func) noexcept {
    _tfx_state &s = _tfx_st;
    if (s.kind == 0) __atomic_fetch_add(&_tfx_pending, 1, __ATOMIC_SEQ_CST);
    _tfx_copy(s.func, sizeof s.func, func);
    s.what[0] = 0;
    try {
        throw;
    } catch (const std::bad_alloc &e) {
        _tfx_std(s, 2, e);
    } catch (const std::invalid_argument &e) {
        _tfx_std(s, 3, e);
    } catch (const std::domain_error &e) {
        _tfx_std(s, 3, e);
    } catch (const std::out_of_range &e) {
        _tfx_std(s, 3, e);
    } catch (const std::length_error &e) {
        _tfx_std(s, 3, e);
    } catch (const std::overflow_error &e) {
        _tfx_std(s, 4, e);
    } catch (const std::underflow_error &e) {
        _tfx_std(s, 4, e);
    } catch (const std::exception &e) {
        _tfx_std(s, 1, e);
    } catch (...) {
        s.kind = 5;
#ifdef _TFX_CXXABI
        _tfx_type(s.type, sizeof s.type, abi::__cxa_current_exception_type());
#else
        _tfx_copy(s.type, sizeof s.type, "?");
#endif
    }
}
}  // namespace
extern "C" int _tfx_take(char *what, size_t nwhat, char *type, size_t ntype, char *func, size_t nfunc) {
    _tfx_state &s = _tfx_st;
    int kind = s.kind;
    if (kind == 0) return 0;
    _tfx_copy(what, nwhat, s.what);
    _tfx_copy(type, ntype, s.type);
    _tfx_copy(func, nfunc, s.func);
    s.kind = 0;
    __atomic_fetch_sub(&_tfx_pending, 1, __ATOMIC_SEQ_CST);
    return kind;
}
"""

#: What cffi declares of the guards' runtime (read by tensorffi._calls after each call).
GUARD_CDEF = "\nextern int _tfx_pending;\nint _tfx_take(char *what, size_t nwhat, char *type, size_t ntype, char *func, size_t nfunc);\n"
GUARD_PREFIX = "_tfx_"


def guards(functions: list[Any], decls: Declarations) -> str:
    """C++ for the wrapper module: the runtime, then for every bound function ``f`` an
    ``extern "C"`` guard ``_tfx_f`` that calls it inside ``try``/``catch (...)``, records
    an escaping exception (its type, ``what()``) and returns zero; then ``#define f
    _tfx_f``, so that everything cffi generates after it (the call from Python, the
    intptr_t shim, the trampoline of the native call path, ``ffi.addressof``) calls
    the guard, while Python still sees the name ``f``."""
    out = [GUARD_RUNTIME]
    taken: set[str] = set()
    for key, fields in decls.structs.items():
        taken.add(key.split(" ", 1)[-1])
        taken.update(f.name for f in fields)
    for fn in functions:
        if fn.variadic:
            raise BuildError(
                f"C++ function {fn.name!r} ({fn.file}:{fn.line}) is variadic: its arguments cannot be forwarded "
                f"through the guard that turns a C++ exception into a Python error; give it a fixed parameter list"
            )
        if fn.name in taken:
            raise BuildError(
                f"C++ function {fn.name!r} ({fn.file}:{fn.line}) has the name of a struct or of a struct field of the "
                f"declarations; the guard that turns a C++ exception into a Python error renames it in the generated "
                f"wrapper, so rename one of them"
            )
        params = [p.decl.replace("__TF_NAME__", f"_tfx_a{i}") for i, p in enumerate(fn.params)]
        args = ", ".join(f"_tfx_a{i}" for i in range(len(fn.params)))
        plist = ", ".join(params) or "void"
        g = GUARD_PREFIX + fn.name
        if fn.result.text == "void":
            out.append(f'extern "C" void {g}({plist}) noexcept {{\n'
                       f'    try {{ {fn.name}({args}); }} catch (...) {{ _tfx_caught("{fn.name}"); }}\n}}')
        else:
            out.append(f'extern "C" auto {g}({plist}) noexcept -> {fn.result.text} {{\n'
                       f'    try {{ return {fn.name}({args}); }} catch (...) {{ _tfx_caught("{fn.name}"); }}\n'
                       f'    return {{}};\n}}')
    return "\n".join(out) + "\n"


def guard_aliases(functions: list[Any], cxx: bool) -> str:
    """The end of the wrapper's preamble: each guard declared with its function's own
    type, and the function's name made to mean its guard in the code cffi generates."""
    lines = [f"__typeof__({fn.name}) {GUARD_PREFIX}{fn.name};" for fn in functions] + [
        f"extern int {GUARD_PREFIX}pending;",
        f"int {GUARD_PREFIX}take(char *, __SIZE_TYPE__, char *, __SIZE_TYPE__, char *, __SIZE_TYPE__);"]
    if cxx:
        lines = ['extern "C" {', *lines, "}"]
    lines += [f"#define {fn.name} {GUARD_PREFIX}{fn.name}" for fn in functions]
    return "\n".join(lines) + "\n"


def _c_header_of(name: str) -> str | None:
    """The C header a C++ unit's system include stands for in a C wrapper: ``<cstdio>``
    is ``<stdio.h>``, ``<stdio.h>`` itself; a C++ header (``<vector>``) none."""
    inner = name[1:-1]
    if inner.endswith(".h") and "c++" not in inner:
        return name
    if re.fullmatch(r"c[a-z]+", inner) and inner[1:] in _C_STANDARD_HEADERS:
        return f"<{inner[1:]}.h>"
    return None


_C_STANDARD_HEADERS = {"assert", "complex", "ctype", "errno", "fenv", "float", "inttypes", "iso646", "limits", "locale",
                       "math", "setjmp", "signal", "stdalign", "stdarg", "stdbool", "stddef", "stdint", "stdio",
                       "stdlib", "string", "time", "uchar", "wchar", "wctype"}


def _without_pragma_once(output: str) -> str:
    """Compiler output without its "#pragma once in main file" diagnostics (gcc's and clang's)."""
    blocks: list[list[str]] = []
    for line in output.splitlines(keepends=True):
        if not blocks or re.match(r"^\S[^:]*:\d+:\d+: ", line) or re.match(r"^\d+ warnings? generated", line):
            blocks.append([line])
        else:
            blocks[-1].append(line)
    kept = [b for b in blocks if "#pragma once in main file" not in b[0]]
    if not any("warning:" in b[0] or "error:" in b[0] for b in kept):
        kept = [b for b in kept if not re.match(r"^\d+ warnings? generated", b[0])]
    return "".join(line for b in kept for line in b)


def _symbols_in(libraries: list[str], library_dirs: list[str]) -> Callable[[str], bool]:
    """Whether a symbol is defined by one of ``libraries`` (or by the C library)."""
    import ctypes

    handles = [ctypes.CDLL(None)]
    for name in libraries:
        for candidate in [os.path.join(d, f"lib{name}.so") for d in library_dirs] + [f"lib{name}.so"]:
            try:
                handles.append(ctypes.CDLL(candidate, mode=os.RTLD_LAZY | os.RTLD_LOCAL))
                break
            except OSError:
                continue
        else:
            return lambda symbol: True  # not found here: the linker will say

    def found(symbol: str) -> bool:
        return any(hasattr(h, symbol) for h in handles)

    return found


def _bindable(statements: list[Statement], exported: list[Statement], header: str, extra: dict[int, str] | None = None
              ) -> tuple[list[Statement], list[Statement], list[str]]:
    """A header's declarations without those cffi cannot express (``__float128``, a
    vector type, what pycparser or cffi refuses), each named in ``skipped``, and
    without everything that uses them. Real system headers (``fftw3.h``) declare
    such things next to what can be bound."""
    import cffi

    from ._decl import declaration_error, skip_inexpressible, statement_at

    statements, exported, skipped = skip_inexpressible(statements, exported, extra)
    for _ in range(256):
        opaque, body = _derive(statements, exported)
        problem = None
        try:
            parse_declarations(opaque + body)
            cffi.FFI().cdef(opaque + body)
        except DeclarationError as exc:
            problem = exc
        except Exception as exc:  # cffi.CDefError, cffi.FFIError
            problem = declaration_error(str(exc), opaque + body)
        if problem is None:
            break
        s = statement_at(statements, problem.file, problem.line)
        if s is None:
            raise problem
        why = str(problem).split("cannot read the declarations: ", 1)[-1].split("\n")[0]
        statements, exported, more = skip_inexpressible(statements, exported, {id(s): f"cffi cannot read it ({why})"})
        skipped += more
    if not exported:
        raise DeclarationError(f"{header}: declares no function that cffi can express; skipped:\n  " + "\n  ".join(skipped),
                               file=header)
    return statements, exported, skipped


def _search_dirs(verbose_output: str) -> list[str]:
    """The compiler's ``#include <...>`` search list, from ``cc -v`` output."""
    m = re.search(r"#include <\.\.\.> search starts here:\n(.*?)\nEnd of search list", verbose_output, re.S)
    if not m:
        return []
    dirs = []
    for line in m.group(1).splitlines():
        line = line.strip()
        if line.endswith("(framework directory)"):
            continue
        dirs.append(os.path.normpath(line))
    return dirs


def _include_name(path: str, search: list[str]) -> str:
    """``<sys/types.h>`` for /usr/include/sys/types.h: how C names a system header."""
    for d in search:
        if path.startswith(d + "/"):
            return f"<{path[len(d) + 1:]}>"
    return '"' + path.replace('"', '\\"') + '"'


def _refuse_knr(heads: list[Statement]) -> None:
    """K&R definitions (``int add(a, b) int a; int b; {...}``) say nothing a caller can
    trust: their arguments are promoted (a ``float`` parameter is passed as a
    ``double``), so a prototype read from them would be a wrong call. Without a cdef
    or a header to state the prototype, they are refused by name."""
    if heads:
        s = heads[0]
        names = ", ".join(repr(h.name) for h in heads)
        raise DeclarationError(
            f"{s.file}:{s.line}: {names} {'is a K&R-style definition' if len(heads) == 1 else 'are K&R-style definitions'} "
            f"(parameter types declared after the parameter list): K&R definitions need a prototype to be bound. "
            f"Declare the parameters' types inside the parentheses ('int add(int a, int b) {{...}}' for "
            f"'int add(a, b) int a; int b; {{...}}'), or give the prototype in a cdef or a header=",
            file=s.file, line=s.line, column=s.tokens[0].col,
        )


def _check_names(exported: list[Statement]) -> None:
    """Names Python and cffi can bind: ASCII C identifiers."""
    for s in exported:
        if not (s.name.isascii() and s.name.isidentifier()):
            shown = s.name.encode().decode("unicode_escape") if "\\" in s.name else s.name
            raise DeclarationError(
                f"{s.file}:{s.line}: function {shown!r} cannot be bound: names must be ASCII C identifiers "
                f"(make it static, or rename it)",
                file=s.file, line=s.line, column=s.tokens[0].col,
            )


def _map_files(statements: list[Statement], original: Any) -> None:
    for s in statements:
        if s.tokens and s.tokens[0].file.startswith("/"):
            s.tokens = [t if not t.file.startswith("/") else replace(t, file=original(t.file)) for t in s.tokens]


def _unique(statements: list[Statement]) -> list[Statement]:
    seen: set[str] = set()
    out = []
    for s in statements:
        if s.name and s.name not in seen:
            seen.add(s.name)
            out.append(s)
    return out


def _derive(statements: list[Statement], exported: list[Statement]) -> tuple[str, str]:
    from ._decl import derive_cdef

    return derive_cdef(statements, exported)


def _cdef_as_c(cdef: str) -> str:
    """A cdef as the scanner reads it: comments and directives other than line markers
    removed, a marker naming it ``<cdef>``."""
    from ._decl import _clean

    return '# 1 "<cdef>"\n' + _clean(cdef)


def _agreement_check(unit: list[Statement], declared: list[Statement], decls: Declarations, predefined: Mapping[str, str]) -> str:
    """C appended to a preprocessed user file: the declared prototype of each function
    the file defines, after any declared types (and standard integer types) the file
    does not declare itself. A mismatch is then "conflicting types" at compile time."""
    defined = {s.name for s in unit if s.kind == "function" and s.user and not s.static and s.name in decls.functions}
    if not defined:
        return ""
    known: set[str] = set()
    for s in unit:
        known |= s.defines
    types: dict[str, Statement] = {}
    for s in declared:
        if s.kind == "type":
            for d in s.defines:
                types.setdefault(d, s)
    out: list[str] = ["\n"]
    added: set[int] = set()
    for s in declared:
        if s.kind != "prototype" or s.name not in defined:
            continue
        extra: list[str] = []
        ok = True
        todo = list(s.uses - {s.name})
        seen: set[str] = set()
        while todo:
            name = todo.pop()
            if name in seen or name in known:
                continue
            seen.add(name)
            if name in types:
                t = types[name]
                if any(tok.text == "..." for tok in t.tokens):
                    ok = False  # cffi's "..." is not C: this one cannot be checked here
                    break
                if id(t) not in added:
                    extra.append(t.text())
                    added.add(id(t))
                    todo.extend(t.uses)
            elif name in _STANDARD_TYPES and predefined.get(_STANDARD_TYPES[name], _STANDARD_TYPES[name] if name == "bool" else ""):
                spelled = predefined.get(_STANDARD_TYPES[name], _STANDARD_TYPES[name])
                extra.append(f"typedef {spelled} {name};")
                known.add(name)
            elif _is_parameter_name(name, s):
                continue
            else:
                ok = False
                break
        if ok:
            out.extend(extra)
            out.append(s.text())
    return "\n".join(out) + "\n"


def _is_parameter_name(name: str, s: Statement) -> bool:
    """A name in a prototype that is not a type (parameter names)."""
    toks = s.tokens
    for i, t in enumerate(toks):
        if t.text == name and i + 1 < len(toks) and toks[i + 1].text in (",", ")", "["):
            return True
    return False


def _python_clashes(output: str, cdef: str) -> list[str]:
    """Names of the user's declarations that the compiler found declared differently by
    Python's headers: ``Py*``, ``_Py*``, ``PY*`` names, and the plain ones Python.h also
    declares (``destructor``, ``getter``, ``setter``, ``visitproc``, ``freefunc``...). A
    name counts where an error names it, or where a note pointing into Python's headers
    (gcc: "previous declaration of 'destructor'"; clang: the header's line quoted after
    "previous definition is here") shows it."""
    includes = tuple(os.path.normpath(p) + "/" for p in _python_include())
    lines = output.splitlines()
    if not any(line.lstrip().startswith(includes) and "note:" in line for line in lines):
        return []
    try:
        decls = parse_declarations(cdef)
        mine = set(decls.typedefs) | {k.split()[-1] for k in decls.structs}
    except Exception:  # noqa: BLE001 - a cdef the parser refuses: Py* names only
        mine = set()
    mine |= set(re.findall(r"\b(_?Py\w*|PY\w*)\b", cdef))
    seen: list[str] = []
    for i, line in enumerate(lines):
        if "error:" in line:
            text = line.split("error:", 1)[1]
        elif line.lstrip().startswith(includes) and "note:" in line:
            text = line.split("note:", 1)[1] + " " + (lines[i + 1] if i + 1 < len(lines) else "")
        else:
            continue
        for name in re.findall(r"[A-Za-z_]\w*", text):
            if name in mine and name not in seen:
                seen.append(name)
    return seen


def _wrapper_failure(output: str) -> str:
    return (
        "the declarations do not match the code they bind (in the generated wrapper module.c, which "
        "includes your preamble or header):\n" + output
    )


def _global_symbols(obj: Path, *, undefined: bool = False) -> list[tuple[str, str]]:
    """``(symbol, kind)`` of an object file's external symbols as ``nm`` lists them
    (its defined ones, or with ``undefined`` the ones it uses from elsewhere); empty
    where there is no ``nm`` (binutils, installed beside gcc)."""
    nm = shutil.which(os.environ.get("NM", "nm"))
    if nm is None or not obj.exists():
        return []
    argv = [nm, "-g", "-p", "-P", "-u" if undefined else "--defined-only", str(obj)]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            found.append((parts[0], parts[1]))
    return found


def _demangle(symbols: list[str]) -> list[str]:
    """C++ symbols as C++ spells them (``_Z5scalePfif`` -> ``scale(float*, int, float)``),
    through ``c++filt``; each symbol itself where it is not C++ or there is no c++filt."""
    tool = shutil.which("c++filt")
    if tool is None or not symbols:
        return list(symbols)
    try:
        out = subprocess.run([tool], input="\n".join(symbols) + "\n", capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return list(symbols)
    names = out.splitlines()
    return names if len(names) == len(symbols) else list(symbols)


def _free_function_name(signature: str) -> str | None:
    """``scale`` of ``scale(float*, int, float)``: a function of the global namespace,
    callable from C had it C linkage; None for methods, namespaced functions,
    templates and operators."""
    head = signature.split("(", 1)[0]
    if "(" not in signature or "::" in head or "<" in head or " " in head or not head.isidentifier():
        return None
    return None if head.startswith("operator") else head


def _cxx_only_of_units(workdir: Path, units: list[tuple[str, str]], cxx_unit: list[bool], compile_with: list[str] | None,
                       declared: set[str]) -> list[list[str]]:
    """``[name, signature, symbol, file]`` of each function a C++ file of the user's
    defines with C++ linkage (a mangled symbol) in the global namespace and that the
    declarations do not bind: C cannot call it by its name, so it is not bound, and
    these entries say so. ``compile_with``: compile the preprocessed units first
    (before the build compiles them)."""
    found: list[list[str]] = []
    for k, (_, shown) in enumerate(units):
        if not cxx_unit[k]:
            continue
        obj = workdir / f"u{k}.o"
        if compile_with is not None:
            probe = workdir / f"u{k}.probe.o"
            rc, _ = _start(compile_with + ["-c", "-x", "c++-cpp-output", f"u{k}.i", "-o", probe.name], workdir, shown).wait()
            if rc != 0:
                continue
            obj = probe
        found += [[name, sig, sym, shown] for name, sig, sym in _cxx_functions(obj) if name not in declared]
    return found


def _cxx_functions(obj: Path) -> list[tuple[str, str, str]]:
    """``(name, signature, symbol)`` of each global-namespace function an object file
    defines with C++ linkage (a mangled symbol)."""
    mangled = [sym for sym, kind in _global_symbols(obj) if kind == "T" and sym.startswith("_Z")]
    named = [(_free_function_name(sig), sig, sym) for sym, sig in zip(mangled, _demangle(mangled))]
    return [(name, sig, sym) for name, sig, sym in named if name is not None]


def _cxx_only_text(entries: list[list[str]]) -> str:
    """What the C++ functions without C linkage are, and the fix."""
    shown = "; ".join(f"{sig} (symbol {sym}, {file})" for _, sig, sym, file in entries[:8])
    more = f" and {len(entries) - 8} more" if len(entries) > 8 else ""
    return (f"C++ function(s) defined without extern \"C\": {shown}{more}. C++ gives them mangled symbols that C "
            f"cannot call by name: write extern \"C\" before each definition (or wrap them in extern \"C\" {{ ... }}) "
            f"to bind them; a helper that is not meant to be bound can be static or in an anonymous namespace")


def _link_failure(recipe: Recipe, output: str) -> str:
    """The linker's refusal, said in the user's terms: a library named in ``libraries=``
    that is not found is named with where it was looked for."""
    missing = [m for m in re.findall(r"cannot find -l(\S+?):?(?:\s|$)", output) if m in recipe.libraries]
    if missing:
        dirs = f"library_dirs={recipe.library_dirs!r} and " if recipe.library_dirs else ""
        names = ", ".join(f"lib{m}.so" for m in missing)
        return (f"linking {recipe.name} failed: {names} (libraries={recipe.libraries!r}) is not in {dirs}the system's "
                f"library folders; install the library's development package, or pass library_dirs= naming the folder "
                f"that holds it:\n{output}")
    return f"linking {recipe.name} failed:\n{output}"


def _check_symbols(so: Path, decls: Declarations, recipe: Recipe, units: list[tuple[str, str]], workdir: Path,
                   cxx_only: list[list[str]]) -> None:
    """dlopen the module with every symbol resolved now: a declared function that no
    file defines (and no library provides), a function defined as C++ where C is
    declared, or a function the user's code calls that nothing defines is named, in
    the user's terms, instead of an ImportError later (or a temporary file's name)."""
    import ctypes

    try:
        ctypes.CDLL(str(so), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as exc:
        message = str(exc).replace(str(so), f"the module built for {recipe.name}")
        m = re.search(r"undefined symbol: (\S+)", str(exc))
        where = ", ".join(n for _, n in units) or "the sources"
        libs = f" nor in the libraries {recipe.libraries}" if recipe.libraries else ""
        if m and m.group(1) in decls.functions:
            fn = decls.functions[m.group(1)]
            as_cxx = _cxx_definitions(workdir, units, fn.name)
            if as_cxx:
                raise BuildError(
                    f"function {fn.name!r} is declared ({fn.file}:{fn.line}) as C, but defined as C++: "
                    + _cxx_only_text(as_cxx)
                ) from None
            raise BuildError(
                f"function {fn.name!r} is declared ({fn.file}:{fn.line}) but defined in none of {where}{libs}"
            ) from None
        if m:
            symbol = m.group(1)
            users = [shown for k, (_, shown) in enumerate(units)
                     if any(sym == symbol for sym, _ in _global_symbols(workdir / f"u{k}.o", undefined=True))]
            spelled = _demangle([symbol])[0]
            what = f"{spelled!r} (symbol {symbol})" if spelled != symbol else repr(symbol)
            by = ", ".join(users) if users else where
            linked = (f"none of the libraries linked ({', '.join(recipe.libraries)}) provides" if recipe.libraries
                      else "no library is linked (libraries=)")
            raise BuildError(
                f"building {recipe.name}: {by} uses {what}, which none of {where} defines and {linked}; "
                f"add the file that defines it to sources=, or name the library that does in libraries= "
                f"(with library_dirs= where it is not in a system folder)"
            ) from None
        raise BuildError(f"{message} (building {recipe.name})") from None


def _cxx_definitions(workdir: Path, units: list[tuple[str, str]], name: str) -> list[list[str]]:
    """The C++ definitions (mangled) of ``name`` in the user's object files."""
    return [[fn, sig, sym, shown] for k, (_, shown) in enumerate(units)
            for fn, sig, sym in _cxx_functions(workdir / f"u{k}.o") if fn == name]


__all__ = ["Recipe", "Built", "build", "compiler", "cxx_compiler", "compiler_identity", "is_cxx_file", "GUARD_PREFIX"]
