# SPDX-License-Identifier: MIT
"""intptr_t shims: the same C function with its array pointers taken as integers.

The bridge hands C the ``data_ptr()`` of a tensor as a Python int; calling a shim
that takes ``intptr_t`` and casts it back in C saves one ``ffi.cast`` per pointer
per call. Used for tensorffi's own native module (build_ffi.py) and for user code
(tensorffi.compile / tensorffi.load). This module imports nothing from the package,
so the builder can load it before the package is built.
"""
from __future__ import annotations

from typing import Any

SHIM_PREFIX = "_tfs_"


def has_array_params(decl: Any) -> bool:
    """Whether a declaration has a pointer parameter that a shim takes as intptr_t."""
    return any(p.type.shimmable for p in decl.params)


def shim_param(p: Any, i: int) -> tuple[str, str]:
    """(declaration in the shim, expression passed to the real function)."""
    arg = f"a{i}"
    if p.type.shimmable:
        return f"intptr_t {arg}", f"({p.type.text}){arg}"
    return p.decl.replace("__TF_NAME__", arg), arg


def shim_declarations(decl: Any) -> tuple[str, str]:
    """(cdef line, C definition) of the intptr_t shim of one function (API mode)."""
    params = [shim_param(p, i) for i, p in enumerate(decl.params)]
    plist = ", ".join(d for d, _ in params) or "void"
    call = f"{decl.name}({', '.join(e for _, e in params)})"
    result = decl.result.text
    head = f"{result} {SHIM_PREFIX}{decl.name}({plist})"
    body = f"{{ {call}; }}" if result == "void" else f"{{ return {call}; }}"
    return head + ";", "static " + head + " " + body


def abi_shim_cdef(decl: Any) -> str:
    """The same symbol declared with intptr_t for its array pointers (ABI mode: pointers
    and intptr_t are passed alike on every ABI cffi supports)."""
    params = [shim_param(p, i)[0] for i, p in enumerate(decl.params)]
    return f"{decl.result.text} {decl.name}({', '.join(params) or 'void'});"


__all__ = ["SHIM_PREFIX", "has_array_params", "shim_declarations", "abi_shim_cdef"]
