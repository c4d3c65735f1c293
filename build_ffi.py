# SPDX-License-Identifier: MIT
"""CFFI (API mode, out-of-line) builder for ``tensorffi._native``.

The declarations are written once, in ``cdefs/``, read in the order below; the C
sources in ``csrc/`` are compiled as real translation units behind the one public
header ``csrc/tensorffi.h``, which includes the same files (all but ``python.h``, the
cffi-only ``extern "Python"`` declarations). Strict warnings (``-Wall -Wextra
-Werror``) are applied to this extension only, never through global CFLAGS, so a C
definition that disagrees with its declaration fails the build instead of crashing
later.

Environment:
    TENSORFFI_NATIVE=1   compile for this machine (``-march=native``); the default
                         build is portable x86-64 and picks SIMD paths at run time.
    TENSORFFI_DEBUG=1    ``-O0 -g`` instead of ``-O3``.
    TENSORFFI_SANITIZE=1 AddressSanitizer and UndefinedBehaviorSanitizer (``-O1 -g``,
                         every UB check fatal); load with libasan preloaded, as
                         ``.ci/sanitize`` does. Never for a wheel.
    CC                   the C compiler (``CC=clang``), as distutils takes it.
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
import sysconfig
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parent
CDEF_DIR = ROOT / "cdefs"
CSRC_DIR = ROOT / "csrc"

# Order matters: types before their users, callbacks last (they use every module's
# types); csrc/tensorffi.h includes them in the same order. tests/test_build.py fails if
# a file in cdefs/ is missing from this list.
CDEF_ORDER = [
    "core.h",  # status codes, errors, build facts, self-test kernels
    "signal.h",  # IIR filtering
    "physics.h",  # particle simulation
    "parse.h",  # numeric CSV parsing
    "callbacks.h",  # progress/cancellation: the callback type and its self-tests
    "python.h",  # extern "Python": the C -> Python functions cffi generates (cffi only)
]


def package_version() -> str:
    text = (ROOT / "tensorffi" / "_version.py").read_text()
    match = re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.M)
    if not match:
        raise RuntimeError("tensorffi/_version.py has no __version__")
    return match.group(1)


def read_cdefs() -> str:
    return "\n".join((CDEF_DIR / name).read_text() for name in CDEF_ORDER)


SANITIZE_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer"]


def compile_flags(native: bool, debug: bool, sanitize: bool = False) -> list[str]:
    flags = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-fno-strict-aliasing", "-pthread"]
    if sanitize:
        flags += ["-O1", "-g"] + SANITIZE_FLAGS
    else:
        flags += ["-O0", "-g"] if debug else ["-O3"]
    if native:
        flags.append("-march=native")
    return flags


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


NATIVE = os.environ.get("TENSORFFI_NATIVE", "") in ("1", "true", "yes")
DEBUG = os.environ.get("TENSORFFI_DEBUG", "") in ("1", "true", "yes")
SANITIZE = os.environ.get("TENSORFFI_SANITIZE", "") in ("1", "true", "yes")
FLAGS = compile_flags(NATIVE, DEBUG, SANITIZE)
# The compiler setuptools will run: $CC when set (it overrides sysconfig's), else
# Python's own. The module also reports what its predefined macros say (core.c).
COMPILER = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"

def cdefs_accessor(text: str) -> tuple[str, str]:
    """Declaration and definition of ``tf_cdefs()``, which returns the cdef text.

    The bridge re-reads the declarations at run time (cffi's types drop ``const``);
    compiling them into the module keeps an installed package self-contained.
    """
    literal = "".join(
        '"' + line.replace("\\", "\\\\").replace('"', '\\"') + '\\n"\n' for line in text.splitlines()
    )
    return (
        "const char *tf_cdefs(void);",
        "static const char *tf_cdefs(void) {\n    return\n" + literal + "    ;\n}\n",
    )


def _load(name: str) -> object:
    """A module of the package loaded by path (the package itself is not built yet)."""
    spec = importlib.util.spec_from_file_location(f"_tf_build_{name}", ROOT / "tensorffi" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def shims(text: str) -> tuple[str, str]:
    """Declarations and definitions of the intptr_t shims of every function with array
    parameters (tensorffi/_shims.py): the bridge's Python path passes tensors' addresses
    as ints; and of every function's trampoline, which its native call path calls."""
    decl, shim = _load("_decl"), _load("_shims")
    python_side = set(re.findall(r'extern\s+"Python[^"]*"\s+[^;(]*?(\w+)\s*\(', text))  # defined by cffi
    funcs = [f for f in decl.parse_declarations(text).functions.values()  # type: ignore[attr-defined]
             if shim.has_array_params(f) and not f.variadic and f.name not in python_side]  # type: ignore[attr-defined]
    pairs = [shim.shim_declarations(f) for f in funcs]  # type: ignore[attr-defined]
    # trampolines: what the bridge's native call path calls (csrc/bridge_call.c)
    all_funcs = decl.parse_declarations(text).functions.values()  # type: ignore[attr-defined]
    tramp_decls, tramp_defs = shim.trampolines(all_funcs, python_side)  # type: ignore[attr-defined]
    return ("\n".join(c for c, _ in pairs) + "\n" + tramp_decls,
            "\n".join(d for _, d in pairs) + "\n" + tramp_defs)


CDEFS = read_cdefs()
_ACCESSOR_DECL, _ACCESSOR_DEF = cdefs_accessor(CDEFS)
_SHIM_DECLS, _SHIM_DEFS = shims(CDEFS)

ffibuilder = FFI()
ffibuilder.cdef(CDEFS + "\n" + _ACCESSOR_DECL + "\n" + _SHIM_DECLS)
ffibuilder.set_source(
    "tensorffi._native",
    '#include "tensorffi.h"\n' + _ACCESSOR_DEF + _SHIM_DEFS + "\n",
    sources=sorted(str(p.relative_to(ROOT)) for p in CSRC_DIR.glob("*.c")),
    # the headers too: build_ext rebuilds when one is newer than the module (without
    # them an edit of parse_number.h or a template left the old module in place)
    depends=sorted(str(p.relative_to(ROOT)) for d in (CSRC_DIR, ROOT / "cdefs") for p in d.glob("*.h")),
    include_dirs=[str(CSRC_DIR.relative_to(ROOT))],
    define_macros=[
        ("TF_VERSION_STR", _c_string(package_version())),
        ("TF_COMPILER_STR", _c_string(COMPILER.split()[0])),
        ("TF_FLAGS_STR", _c_string(" ".join(FLAGS))),
        ("TF_NATIVE_BUILD", "1" if NATIVE else "0"),
    ],
    extra_compile_args=FLAGS,
    extra_link_args=["-pthread"] + (SANITIZE_FLAGS if SANITIZE else []),
    libraries=["m"],
    # Not abi3: the bridge's call path (csrc/bridge_call.c) reads method descriptors and
    # uses vectorcall, which the limited API of Python 3.10/3.11 does not offer.
    py_limited_api=False,
)

if __name__ == "__main__":
    # Developer shortcut: build in place (``python build_ffi.py``).
    os.chdir(ROOT)
    ffibuilder.compile(verbose=True)
