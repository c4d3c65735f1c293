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
fields, their ``_pack_`` reproduced and every size and field offset compared with
ctypes' (a layout that differs is refused, never silently shifted); ``CFUNCTYPE``
types function pointers (``NAME: callback(...)`` in a contract);
``numpy.ctypeslib.ndpointer(dtype, ndim, shape, flags)`` a typed array whose
``shape`` becomes its contract (``p0: [3, 4]``) and whose ``ndim`` is checked at
each call (a ``void *`` without a dtype; ndpointer does not say whether C writes,
so the array is read and written: ``'p0: in [...]'`` in a contract for one C only
reads). An ``errcheck`` set on the ctypes function runs after each call, on the C
result, as ctypes runs it (its value is returned in the result's place). What ctypes
can say but the bridge cannot check or reproduce (``c_wchar_p``, bit fields,
byte-swapped ``BigEndianStructure``, ``F_CONTIGUOUS`` ndpointers, arrays in
``argtypes``, ``c_longdouble``, pointers to pointers, names C cannot spell) is a
:class:`~tensorffi.DeclarationError` naming the function, the argument and the type;
the functions of a ``ctypes.PyDLL`` (or ``pythonapi``), which use the Python C API,
are called with the GIL held, as ctypes calls them (every other call releases it).

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
import functools
import keyword
import re
import types
from typing import Any, Callable, Iterable, Mapping, cast

import cffi

from ._decl import _SIZED, C_KEYWORDS, parse_declarations
from ._shims import abi_shim_cdef, has_array_params
from .errors import ArgumentTypeError, DeclarationError, ShapeError
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


#: names C (and so the declaration written for cffi) cannot use for a field or parameter
_C_RESERVED = C_KEYWORDS | {"bool", "_Imaginary"}
_IDENT = re.compile(r"[A-Za-z_]\w*\Z")

#: numpy.ctypeslib.ndpointer's flags (NumPy's NPY_ARRAY_* bits)
_NP_C, _NP_F, _NP_OWNDATA, _NP_ALIGNED, _NP_WRITEABLE = 0x1, 0x2, 0x4, 0x100, 0x400
#: NumPy dtype -> C element type, for ndpointer argtypes (the declarations' own table, inverted)
_NP_C_TYPES = {**{dtype: ctype for ctype, dtype in _SIZED.items()}, "float32": "float", "float64": "double",
               "complex64": "float _Complex", "complex128": "double _Complex", "bool": "_Bool"}


def _c_name(name: Any, what: str) -> str:
    """``name`` if C can spell it, else a DeclarationError saying ``what`` it is."""
    if not isinstance(name, str) or not _IDENT.match(name) or name in _C_RESERVED:
        raise DeclarationError(f"from_ctypes: {what} {name!r} is not a C identifier (ctypes accepts any string; "
                               f"C, and so the declaration tensorffi writes, cannot say it)")
    return name


def _is_ndpointer(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, ctypes.c_void_p) and hasattr(t, "_dtype_") \
        and hasattr(t, "_flags_")


class _Types:
    """C type declarations derived from ctypes types, in dependency order; each
    struct with its ``_pack_`` (cffi's ``pack=``), and its layout compared with
    ctypes' once declared (:meth:`verify`)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, int]] = []  # (declaration, pack: 0 for the platform's)
        self.done: dict[Any, str] = {}
        self.structs: dict[str, Any] = {}  # tag -> ctypes class

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
        if _is_ndpointer(t):
            return self.ndpointer(t, where)
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
        base = _c_name(t.__name__, f"the name of {kind}")
        tag, n = f"{kind} {base}", 1
        while tag in self.structs:  # two classes of one name (made in a function, or in two modules)
            n += 1
            tag = f"{kind} {base}_{n}"
        if hasattr(t, "_swappedbytes_"):
            raise DeclarationError(
                f"{where} is {t.__name__}, a {type(t).__name__.replace('Type', '')} of the other byte order: C on "
                f"this machine reads its fields in native byte order, and cffi cannot lay them out swapped; "
                f"declare it as a ctypes.Structure (and swap the values with NumPy's byteswap())")
        self.done[t] = tag  # a pointer to itself inside is fine
        self.structs[tag] = t
        fields = getattr(t, "_fields_", None)
        if fields is None:
            raise DeclarationError(f"{where} is {kind} {t.__name__} without _fields_: its layout is unknown")
        body = []
        for entry in fields:
            if len(entry) != 2:
                raise DeclarationError(f"{where}: field {entry[0]!r} of {tag} is a bit field, which cffi cannot "
                                       f"lay out as ctypes does")
            fname, ftype = entry
            _c_name(fname, f"field name of {tag} (in {where}):")
            fw = f"{where}: field {fname!r} of {tag}"
            if isinstance(ftype, type) and issubclass(ftype, ctypes.Array):
                dims: list[str] = []
                inner: Any = ftype
                while isinstance(inner, type) and issubclass(inner, ctypes.Array):
                    dims.append(f"[{inner._length_}]")
                    inner = inner._type_
                body.append(f"{self.name(inner, fw)} {fname}{''.join(dims)};")
            else:
                body.append(f"{self.name(ftype, fw)} {fname};")
        pack = int(getattr(t, "_pack_", 0) or 0)
        self.lines.append((f"{tag} {{ {' '.join(body)} }};", pack))
        if ctypes.sizeof(t) == 0:
            raise DeclarationError(f"{where}: {tag} has no fields")
        return tag

    def ndpointer(self, t: Any, where: str) -> str:
        """``numpy.ctypeslib.ndpointer(dtype, ndim, shape, flags)``: a pointer to the
        dtype's C type (``void *`` without one); ndim and shape are checked at each call
        (:meth:`verify` leaves them in :attr:`arrays`), C order as the bridge requires."""
        flags = int(t._flags_ or 0)
        if flags & _NP_F and not flags & _NP_C:
            raise DeclarationError(
                f"{where} is ndpointer(flags='F_CONTIGUOUS'): C would index the array in Fortran order, and the "
                f"bridge passes C-ordered memory; transpose it in Python (x.T is C-ordered) and drop the flag")
        dt = t._dtype_
        if dt is None:
            ctype = "void"
        else:
            import numpy as np

            dt = np.dtype(dt)
            if dt.byteorder not in ("=", "|") and dt.byteorder != ("<" if np.little_endian else ">"):
                raise DeclarationError(f"{where} is ndpointer({dt.str}), of the other byte order: C reads native "
                                       f"numbers")
            ctype = _NP_C_TYPES.get(dt.name, "")
            if not ctype or dt.fields is not None or dt.subdtype is not None:
                raise DeclarationError(f"{where} is ndpointer({dt}), which no C number type matches: tensorffi "
                                       f"checks arrays of numbers (use ndpointer(flags=...) for void *)")
        return ctype + " *"

    def declare(self, ffi: Any) -> str:
        """Declare the types in ``ffi`` (each run of structs with its own ``pack``), and
        compare every struct's size and field offsets with ctypes'. Returns the cdef."""
        run: list[str] = []
        pack = 0
        for text, p in self.lines:
            if p != pack and run:
                ffi.cdef("\n".join(run), pack=pack or None)
                run = []
            pack = p
            run.append(text)
        if run:
            ffi.cdef("\n".join(run), pack=pack or None)
        for tag, t in self.structs.items():
            size = ffi.sizeof(tag)
            if size != ctypes.sizeof(t):
                raise DeclarationError(f"from_ctypes: {tag} is {ctypes.sizeof(t)} bytes for ctypes but {size} as "
                                       f"declared: its layout cannot be reproduced, so C would read wrong fields")
            for entry in t._fields_:
                off = ffi.offsetof(tag, entry[0])
                if off != getattr(t, entry[0]).offset:
                    raise DeclarationError(
                        f"from_ctypes: field {entry[0]!r} of {tag} is at byte {getattr(t, entry[0]).offset} for "
                        f"ctypes but {off} as declared: its layout cannot be reproduced")
        return "\n".join(text for text, _ in self.lines)

    def callback(self, t: Any, where: str) -> str:
        if t in self.done:
            return self.done[t]
        name = f"_tf_ctypes_cb{len(self.done)}"
        res = self.name(t._restype_, f"{where}: the callback's result", result=True)
        args = [self.name(a, f"{where}: callback argument {i}") + f" a{i}" for i, a in enumerate(t._argtypes_ or ())]
        self.lines.append((f"typedef {res} (*{name})({', '.join(args) or 'void'});", 0))
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


def _declaration(name: str, fn: Any, types_: _Types, names: str | None) -> tuple[str, list[str]]:
    """The C declaration of ctypes function ``fn``, and its parameter names."""
    args = fn.argtypes
    if args is None:
        raise DeclarationError(
            f"from_ctypes: {name}.argtypes is not set: ctypes would pass any Python value as it is, and tensorffi "
            f"cannot guess the C types; set {name}.argtypes = [...] (and {name}.restype)")
    ctypes_names = [types_.name(t, f"{name}() argument {i}") for i, t in enumerate(args)]
    result = types_.name(fn.restype, f"{name}() result", result=True)
    if names is not None:
        if not isinstance(names, str):
            raise DeclarationError(f"from_ctypes: names for {name} must be a string ('data, size'), got "
                                   f"{type(names).__name__}")
        given = [s.strip() for s in names.split(",")] if names.strip() else []
        if len(given) != len(args):
            raise DeclarationError(f"from_ctypes: names for {name} give {len(given)} name(s) for "
                                   f"{len(args)} argtypes")
        for g in given:
            if not _IDENT.match(g) or g in _C_RESERVED:
                raise DeclarationError(f"from_ctypes: names for {name}: {g!r} is not a parameter name C can say")
            if given.count(g) > 1:
                raise DeclarationError(f"from_ctypes: names for {name} give {g!r} twice")
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
    return f"{result} {name}({params});", pnames


def _with_gil(ffi: Any, name: str, fn: Any, decl: Any, addr: int) -> Callable[..., Any]:
    """Function ``fn`` of a ``ctypes.PyDLL`` as the bridge calls it (pointers as
    addresses, as an intptr_t shim takes them; strings as bytes; cffi pointers), called
    through a ctypes ``PYFUNCTYPE`` twin: with the GIL held, as the Python C API needs."""
    argtypes: list[Any] = []
    for i, (p, t) in enumerate(zip(decl.params, fn.argtypes or ())):
        ct = p.type
        if ct.is_struct and ct.pointer_depth == 0:
            raise DeclarationError(f"from_ctypes: {name}() argument {i} is a struct by value, which a PyDLL function "
                                   f"is not called with here; pass a pointer to it")
        argtypes.append(t if ct.pointer_depth == 0 and not ct.is_function_pointer
                        else ctypes.c_char_p if t is ctypes.c_char_p else ctypes.c_void_p)
    res = decl.result
    pointer_result = res.pointer_depth > 0 or res.is_function_pointer
    restype = ctypes.c_void_p if pointer_result else fn.restype
    twin = ctypes.PYFUNCTYPE(restype, *argtypes)(addr)
    cdata, null = ffi.CData, ffi.NULL

    def address(v: Any) -> Any:
        if isinstance(v, cdata):
            return None if v == null else int(ffi.cast("intptr_t", v))
        return v

    def call(*args: Any) -> Any:
        r = twin(*[address(a) for a in args])
        return ffi.cast(res.text, r or 0) if pointer_result else r

    call.__name__ = call.__qualname__ = name
    return call


def _ndpointer_contracts(fns: Mapping[str, Any], pnames: Mapping[str, list[str]],
                         contracts: Mapping[str, str] | None) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """ndpointer shapes as contract clauses (``p0: [3, 4]``) added to the user's (a clause
    of theirs for the same argument wins), and the ndims to check where no shape is given."""
    out = dict(contracts or {})
    ndims: dict[str, dict[str, int]] = {}
    for name, f in fns.items():
        for i, t in enumerate(f.argtypes or ()):
            if not _is_ndpointer(t):
                continue
            pname = pnames[name][i]
            mine = out.get(name, "")
            if re.search(rf"(^|[;\n])\s*{re.escape(pname)}\s*:", mine):
                continue
            if t._shape_ is not None:
                clause = f"{pname}: [{', '.join(str(int(d)) for d in t._shape_)}]"
                out[name] = f"{mine}; {clause}" if mine.strip() else clause
            elif t._ndim_ is not None:
                ndims.setdefault(name, {})[pname] = int(t._ndim_)
    return out, ndims


def _adapted(bound: Callable[..., Any], fn: Any, name: str, ndims: Mapping[str, int],
             errcheck: Callable[..., Any] | None) -> Callable[..., Any]:
    """``bound`` with what ctypes would also do around the call: the ndim of ndpointer
    arguments checked before it, ``errcheck(result, func, args)`` after it."""
    plan = bound.__wrapped_bridge__.plan  # type: ignore[attr-defined]
    position = {p.pyname: i for i, p in enumerate(plan.positional)}
    checks = [(pname, position.get(pname), k) for pname, k in ndims.items()]
    # where the C result is in what the bound function returns: errcheck sees it, and
    # its value takes its place (out arrays the bridge allocated stay beside it)
    has_result = plan.returns in ("value", "count")
    outs = any((p.kind == "array" and p.role == "out") or p.kind == "handle_out" for p in plan.params)

    @functools.wraps(bound)
    def call(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        for pname, i, k in checks:
            value = args[i] if i is not None and i < len(args) else kwargs.get(pname)
            nd = getattr(value, "ndim", None)
            if value is not None and nd is not None and nd != k:
                raise ShapeError(f"{name}(): argument '{pname}' is an array of {nd} dimension(s), but its argtypes' "
                                 f"ndpointer says ndim={k}")
        result = bound(*args, **kwargs)
        if errcheck is None:
            return result
        if has_result and outs:
            return (errcheck(result[0], fn, args), *result[1:])
        if has_result:
            return errcheck(result, fn, args)
        errcheck(None, fn, args)  # void: for what it raises
        return result

    return call


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
    for name in fns:
        _c_name(name, "function name")
    if names is not None:
        if not isinstance(names, Mapping):
            raise DeclarationError(f"from_ctypes: names must map function names to 'a, b, ...', got "
                                   f"{type(names).__name__}")
        unknown = sorted(str(k) for k in names if k not in fns)
        if unknown:
            raise DeclarationError(f"from_ctypes: names name functions that are not bound: {', '.join(unknown)} "
                                   f"(bound: {', '.join(fns)})")
    types_ = _Types()
    decl_lines, pnames = [], {}
    for n, f in fns.items():
        line, pnames[n] = _declaration(n, f, types_, (names or {}).get(n))
        decl_lines.append(line)
    ffi = cffi.FFI()
    type_cdef = types_.declare(ffi)
    try:
        ffi.cdef("\n".join(decl_lines))
    except cffi.CDefError as exc:  # pragma: no cover - the names and types were checked above
        raise DeclarationError(f"from_ctypes: the declarations derived from argtypes do not parse: {exc}") from None
    cdef = "\n".join([type_cdef] + decl_lines)
    decls = parse_declarations(cdef)
    contracts, ndims = _ndpointer_contracts(fns, pnames, contracts)
    raw = types.SimpleNamespace()
    shims: dict[str, Any] = {}
    addresses: dict[str, int] = {}
    for name, f in fns.items():
        d = decls.functions[name]
        addr = cast(int, ctypes.cast(f, ctypes.c_void_p).value)  # a bound function is not NULL
        if getattr(f, "_flags_", 0) & ctypes._FUNCFLAG_PYTHONAPI:  # type: ignore[attr-defined]
            # a PyDLL's (or pythonapi's) function uses the Python C API: it is called with
            # the GIL held, as ctypes calls it, through a twin of it taking addresses
            twin = _with_gil(ffi, name, f, d, addr)
            setattr(raw, name, twin)
            shims[name] = twin
            continue
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
    lib = Library(ffi, raw, decls, contracts, shim_lookup=shims.get if shims else None, default_returns=returns,
                  description=f"from_ctypes({where!r})", addresses=addresses)
    for name, f in fns.items():
        errcheck = getattr(f, "errcheck", None)
        if errcheck is None and name not in ndims:
            continue
        call = _adapted(lib._bound[name], f, name, ndims.get(name, {}), errcheck)
        lib._bound[name] = call
        if lib.__dict__.get(name) is not None:
            lib.__dict__[name] = call
    return lib


__all__ = ["from_ctypes"]
