# SPDX-License-Identifier: MIT
"""``from_ctypes``: a ctypes library, checked by the bridge.

People who call C from Python today often have ctypes code::

    lib = ctypes.CDLL("./mylib.so")
    lib.process_data.argtypes = [POINTER(c_float), c_int]
    lib.process_data.restype = None

ctypes passes whatever it is given: a float64 array, a non-contiguous view or a
tensor shorter than ``size`` becomes memory C reads and writes past. One added line,
``lib = tensorffi.from_ctypes(lib)``, derives the C declarations from ``argtypes``
and ``restype`` and returns a :class:`~tensorffi.Library` whose functions are the
*same* C functions (the addresses ctypes resolved, in the object ctypes loaded),
called through the bridge: dtype, layout, device, writability and length checked
before C runs, with the same contracts :func:`tensorffi.load` takes.

Derived types: ``POINTER(c_float)`` (and every numeric ctypes type) is a typed array;
``c_void_p`` is ``void *`` (an array of any dtype, lengths in bytes, or a handle);
``c_char_p`` a string; integer and float types scalars with their C ranges;
``Structure``/``Union`` subclasses (by pointer or by value) structs with their
fields; ``CFUNCTYPE`` types function pointers (``NAME: callback(...)`` in a
contract). What ctypes can say but the bridge cannot check (``c_wchar_p``, bit
fields, arrays in ``argtypes``, ``c_longdouble``, pointers to pointers) is a
:class:`~tensorffi.DeclarationError` naming the function, the argument and the type.

Calls take the bridge's native path: on x86-64 Linux the checked arguments are
passed to the function's address in registers (csrc/bridge_call.c,
``tfb_generic_call``), at the cost of a ``compile()``d call's trampoline; elsewhere,
and for signatures with more than 6 integer or 8 floating arguments, through cffi
as ``load()`` does.

ctypes has no parameter names, so they are made up: ``p0``, ``p1``... for pointers,
``a2``... for other values, and ``n_2`` for an integer that directly follows a
pointer. That name follows the bridge's length rule (:func:`tensorffi.plan.build_plan`):
the pointer before it must hold at least that many elements, so the seed's
``process_data(data, size)`` refuses a too-short tensor with no contract at all.
Give ``names={"process_data": "data, size"}`` to use your own names (then the rule
reads them as for any declaration), and ``'p0: unsized'`` in a contract to turn the
check off for a pointer whose next integer is not its length.
"""
from __future__ import annotations

import ctypes
import types
from typing import Any, Iterable, Mapping, cast

import cffi

from ._decl import parse_declarations
from ._shims import abi_shim_cdef, has_array_params
from .errors import ArgumentTypeError, DeclarationError
from .library import Library, check_contracts

#: ctypes scalar type -> C spelling. Aliases (c_int64 is c_long on LP64, c_size_t is
#: c_ulong) are the same class, so the C spelling of their target is used.
_SCALARS: dict[Any, str] = {
    ctypes.c_bool: "_Bool",
    ctypes.c_char: "char",
    ctypes.c_byte: "signed char",
    ctypes.c_ubyte: "unsigned char",
    ctypes.c_short: "short",
    ctypes.c_ushort: "unsigned short",
    ctypes.c_int: "int",
    ctypes.c_uint: "unsigned int",
    ctypes.c_long: "long",
    ctypes.c_ulong: "unsigned long",
    ctypes.c_longlong: "long long",
    ctypes.c_ulonglong: "unsigned long long",
    ctypes.c_float: "float",
    ctypes.c_double: "double",
}
_INTEGERS = {t for t, c in _SCALARS.items() if c not in ("float", "double", "_Bool", "char")}
_REFUSED = {
    ctypes.c_wchar_p: "a wchar_t string (pass bytes through c_char_p, or a uint32 array)",
    ctypes.c_wchar: "wchar_t",
    ctypes.c_longdouble: "long double (no tensor or array holds it)",
}
_FuncBase: type[Any] = ctypes.CFUNCTYPE(None).__mro__[1]  # _ctypes.CFuncPtr: every ctypes function and function pointer


class _Types:
    """C type declarations derived from ctypes types, in dependency order."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.done: dict[Any, str] = {}

    def name(self, t: Any, where: str, *, result: bool = False) -> str:
        """The C spelling of ctypes type ``t`` (``None``: void)."""
        if t is None:
            return "void"
        if t in _REFUSED:
            raise DeclarationError(f"{where} is ctypes.{t.__name__}: {_REFUSED[t]}, which tensorffi cannot check")
        if t in _SCALARS:
            return _SCALARS[t]
        if t is ctypes.c_char_p:
            return "char *" if result else "const char *"
        if t is ctypes.c_void_p:
            return "void *"
        if isinstance(t, type) and issubclass(t, ctypes._Pointer):
            inner = t._type_
            if isinstance(inner, type) and issubclass(inner, (ctypes._Pointer, ctypes.Array)) \
                    or inner in (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_wchar_p):
                raise DeclarationError(
                    f"{where} is {t.__name__}, a pointer to a pointer or to an array: tensorffi cannot check "
                    f"what it points at (use c_void_p, or declare it with tensorffi.load)")
            return self.name(inner, where) + " *"
        if isinstance(t, type) and issubclass(t, (ctypes.Structure, ctypes.Union)):
            return self.struct(t, where)
        if isinstance(t, type) and issubclass(t, _FuncBase):
            return self.callback(t, where)
        if isinstance(t, type) and issubclass(t, ctypes.Array):
            raise DeclarationError(f"{where} is a ctypes array type ({t.__name__}): in argtypes it means a "
                                   f"pointer; write POINTER({t._type_.__name__}) instead")
        raise DeclarationError(f"{where} is {getattr(t, '__name__', t)!r}, which is not a ctypes type "
                               f"tensorffi can derive a C declaration from")

    def struct(self, t: Any, where: str) -> str:
        if t in self.done:
            return self.done[t]
        kind = "union" if issubclass(t, ctypes.Union) else "struct"
        tag = f"{kind} {t.__name__}"
        self.done[t] = tag  # a pointer to itself inside is fine
        fields = getattr(t, "_fields_", None)
        if fields is None:
            raise DeclarationError(f"{where} is {kind} {t.__name__} without _fields_: its layout is unknown")
        body = []
        for entry in fields:
            if len(entry) != 2:
                raise DeclarationError(f"{where}: field {entry[0]!r} of {tag} is a bit field, which cffi cannot "
                                       f"lay out as ctypes does")
            fname, ftype = entry
            fw = f"{where}: field {fname!r} of {tag}"
            if isinstance(ftype, type) and issubclass(ftype, ctypes.Array):
                body.append(f"{self.name(ftype._type_, fw)} {fname}[{ftype._length_}];")
            else:
                body.append(f"{self.name(ftype, fw)} {fname};")
        self.lines.append(f"{tag} {{ {' '.join(body)} }};")
        if ctypes.sizeof(t) == 0:
            raise DeclarationError(f"{where}: {tag} has no fields")
        return tag

    def callback(self, t: Any, where: str) -> str:
        if t in self.done:
            return self.done[t]
        name = f"_tf_ctypes_cb{len(self.done)}"
        res = self.name(t._restype_, f"{where}: the callback's result", result=True)
        args = [self.name(a, f"{where}: callback argument {i}") + f" a{i}" for i, a in enumerate(t._argtypes_ or ())]
        self.lines.append(f"typedef {res} (*{name})({', '.join(args) or 'void'});")
        self.done[t] = name
        return name


def _functions(obj: Any) -> dict[str, Any]:
    """name -> ctypes function, from a CDLL, one function, or an iterable or mapping of them."""
    if isinstance(obj, ctypes.CDLL):
        found = {k: v for k, v in vars(obj).items() if isinstance(v, _FuncBase) and not k.startswith("_")}
        if not found:
            raise DeclarationError(
                f"from_ctypes({obj!r}): none of its functions has been configured; set "
                f"lib.NAME.argtypes (and restype) for the functions to bind first")
        return found
    if isinstance(obj, _FuncBase):
        return {obj.__name__: obj}
    if isinstance(obj, Mapping):
        items: Iterable[tuple[str | None, Any]] = obj.items()
    elif isinstance(obj, Iterable) and not isinstance(obj, (str, bytes)):
        items = [(getattr(f, "__name__", None), f) for f in obj]
    else:
        raise ArgumentTypeError(f"from_ctypes() takes a ctypes.CDLL or ctypes functions, got {type(obj).__name__}")
    out = {}
    for name, f in items:
        if not isinstance(f, _FuncBase) or not name:
            raise ArgumentTypeError(f"from_ctypes(): {f!r} is not a ctypes function of a loaded library")
        out[name] = f
    return out


def _declaration(name: str, fn: Any, types_: _Types, names: str | None) -> str:
    args = fn.argtypes
    if args is None:
        raise DeclarationError(
            f"from_ctypes: {name}.argtypes is not set: ctypes would pass any Python value as it is, and tensorffi "
            f"cannot guess the C types; set {name}.argtypes = [...] (and {name}.restype)")
    ctypes_names = [types_.name(t, f"{name}() argument {i}") for i, t in enumerate(args)]
    result = types_.name(fn.restype, f"{name}() result", result=True)
    if names is not None:
        given = [s.strip() for s in names.split(",")] if names.strip() else []
        if len(given) != len(args):
            raise DeclarationError(f"from_ctypes: names for {name} give {len(given)} name(s) for "
                                   f"{len(args)} argtypes")
        pnames = given
    else:
        pnames = []
        for i, t in enumerate(args):
            if ctypes_names[i].endswith("*") or (isinstance(t, type) and issubclass(t, _FuncBase)):
                pnames.append(f"p{i}")
            elif t in _INTEGERS and i and ctypes_names[i - 1].endswith("*") and args[i - 1] is not ctypes.c_char_p:
                pnames.append(f"n_{i}")  # read as the pointer's length (see the module docstring)
            else:
                pnames.append(f"a{i}")
    params = ", ".join(f"{c} {n}" for c, n in zip(ctypes_names, pnames)) or "void"
    return f"{result} {name}({params});"


def from_ctypes(
    library: Any,
    contracts: Mapping[str, str] | None = None,
    *,
    names: Mapping[str, str] | None = None,
    returns: str = "value",
) -> Library:
    """A checked :class:`~tensorffi.Library` over the functions of a ctypes library.

    ``library``: a ``ctypes.CDLL`` (every function whose ``argtypes`` were set is
    bound), one ctypes function, or a list or dict of them. The declarations are
    derived from ``argtypes`` and ``restype`` (see :mod:`tensorffi._ctypes`); the
    functions called are the ones ctypes resolved, in the library ctypes loaded.
    ``contracts`` and ``returns`` are as for :func:`tensorffi.load`; ``names`` gives
    parameter names per function (``{"process_data": "data, size"}``) for contracts
    and error messages.

    >>> import ctypes, ctypes.util, numpy, tensorffi
    >>> m = ctypes.CDLL(ctypes.util.find_library("m"))
    >>> m.frexp.argtypes = [ctypes.c_double, ctypes.POINTER(ctypes.c_int)]
    >>> m.frexp.restype = ctypes.c_double
    >>> lib = tensorffi.from_ctypes(m, {"frexp": "p1: out [1]"})
    >>> mant, exp = lib.frexp(12.0)
    >>> float(mant), int(exp[0])
    (0.75, 4)
    """
    check_contracts(contracts)
    fns = _functions(library)
    types_ = _Types()
    decl_lines = [_declaration(n, f, types_, (names or {}).get(n)) for n, f in fns.items()]
    cdef = "\n".join(types_.lines + decl_lines)
    decls = parse_declarations(cdef)
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    raw = types.SimpleNamespace()
    shims: dict[str, Any] = {}
    addresses: dict[str, int] = {}
    for name, f in fns.items():
        d = decls.functions[name]
        addr = cast(int, ctypes.cast(f, ctypes.c_void_p).value)  # a bound function is not NULL
        addresses[name] = addr
        params = ", ".join(p.type.text for p in d.params) or "void"
        setattr(raw, name, ffi.cast(f"{d.result.text} (*)({params})", addr))
        if has_array_params(d) and not d.variadic:
            shim = abi_shim_cdef(d)  # "RET name(intptr_t a0, ...);" -> the pointer type
            shim_params = shim[shim.index("(", len(d.result.text) + len(name)) + 1:shim.rindex(")")]
            shims[name] = ffi.cast(f"{d.result.text} (*)({shim_params})", addr)
    # what keeps the code loaded: the ctypes library objects (and functions) themselves
    raw._tf_ctypes = (library, tuple(fns.values()))
    where = getattr(library, "_name", None) or ", ".join(fns)
    return Library(ffi, raw, decls, contracts, shim_lookup=shims.get if shims else None, default_returns=returns,
                   description=f"from_ctypes({where!r})", addresses=addresses)


__all__ = ["from_ctypes"]
