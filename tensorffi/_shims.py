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
TRAMPOLINE_PREFIX = "_tfb_"

#: Defined once before the trampolines: one argument or result, as the bridge's native
#: call path (csrc/bridge_call.c, ``tfb_slot``) lays it out.
TRAMPOLINE_PRELUDE = (
    "union _tfb_slot { long long i; unsigned long long u; double d; float f; void *p; };\n"
)


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


def _unsigned(t: Any) -> bool:
    name = t.resolved.replace("const ", "").strip()
    return name.startswith("unsigned") or name in ("size_t", "uintptr_t", "_Bool", "bool") or (
        t.base.startswith("uint") and t.base.endswith("_t"))


def _trampoline_arg(t: Any, i: int) -> str | None:
    """The expression a trampoline passes for parameter ``i`` of type ``t``, or None."""
    if t.is_function_pointer or t.is_array:
        return None
    if t.pointer_depth >= 1:
        return f"({t.text})_tfb_a[{i}].p"
    if t.is_struct:
        return None
    if t.is_integer:
        return f"({t.text})_tfb_a[{i}].i"
    if t.resolved == "float":
        return f"_tfb_a[{i}].f"
    if t.resolved == "double":
        return f"_tfb_a[{i}].d"
    return None


def trampoline_declarations(decl: Any) -> tuple[str, str] | None:
    """(cdef line, C definition) of the trampoline of one function (API mode), or None
    where its signature has something a trampoline does not pass (struct values,
    function pointers, long double, variadic arguments, pointer results).

    A trampoline takes the arguments the native call path checked as an array of
    8-byte slots and calls the real function with each converted to its declared type:
    one compiled call per function, so the call path needs no generic calling machinery
    (libffi) and no Python object per argument."""
    if decl.variadic:
        return None
    args = [_trampoline_arg(p.type, i) for i, p in enumerate(decl.params)]
    if any(a is None for a in args):
        return None
    res = decl.result
    call = f"{decl.name}({', '.join(args)})"  # type: ignore[arg-type]
    if res.text == "void":
        body = f"{call};"
    elif res.pointer_depth or res.is_struct or res.is_function_pointer or res.resolved == "long double":
        return None
    elif res.resolved in ("float", "double"):
        body = f"_tfb_r->d = (double){call};"
    elif res.is_integer:
        body = f"_tfb_r->u = (unsigned long long){call};" if _unsigned(res) else f"_tfb_r->i = (long long){call};"
    else:
        return None
    # (local names no C function of the user's can have: a function named `a` is common)
    head = f"void {TRAMPOLINE_PREFIX}{decl.name}(const void *_tfb_args, void *_tfb_res)"
    unused = "(void)_tfb_a; " if not decl.params else ""
    unused += "(void)_tfb_r; " if res.text == "void" else ""
    return head + ";", (
        f"static {head} {{ const union _tfb_slot *_tfb_a = (const union _tfb_slot *)_tfb_args; "
        f"union _tfb_slot *_tfb_r = (union _tfb_slot *)_tfb_res; {unused}{body} }}"
    )


def trampolines(decls: Any, exclude: Any = ()) -> tuple[str, str]:
    """(cdef lines, C definitions with the prelude) of every function in ``decls`` that
    has a trampoline, leaving out the names in ``exclude`` (extern "Python")."""
    pairs = [trampoline_declarations(d) for d in decls if d.name not in exclude]
    found = [pair for pair in pairs if pair is not None]
    if not found:
        return "", ""
    return "\n".join(c for c, _ in found), TRAMPOLINE_PRELUDE + "\n".join(d for _, d in found) + "\n"


__all__ = [
    "SHIM_PREFIX", "TRAMPOLINE_PREFIX", "has_array_params", "shim_declarations", "abi_shim_cdef",
    "trampoline_declarations", "trampolines",
]
