# SPDX-License-Identifier: MIT
"""A C library whose functions are bound through the bridge."""
from __future__ import annotations

import inspect
import itertools
import sys
import threading
from typing import Any, Callable, Mapping

from . import _calls, _display
from ._bridge.lower import trampoline_address
from ._decl import Declarations
from .bridge import BoundFunction, Struct
from .contract import FieldContract, parse_contract, parse_struct_contract
from .errors import ContractError

from ._shims import SHIM_PREFIX, has_array_params  # noqa: F401 (re-exported for byo)


def check_contracts(contracts: Any) -> None:
    """``contracts`` must be None or a mapping of function (or struct type) names to
    contract strings."""
    if contracts is None:
        return
    if not isinstance(contracts, Mapping):
        raise ContractError(
            f"contracts must be a mapping of function names to contract strings, got {type(contracts).__name__}"
        )
    for fname, text in contracts.items():
        if not isinstance(text, str):
            raise ContractError(f"the contract of {fname!r} must be a string, got {type(text).__name__}")


class Library:
    """The functions of a C library, each checked by the bridge.

    Attributes are the bound functions (``lib.process_data(t, t.numel())``); ``raw``
    is the underlying cffi library and ``ffi`` its FFI, for what the bridge does not
    cover. Create instances with :func:`tensorffi.load` or :func:`tensorffi.compile`.
    Inside ``torch.compile`` a bound function is traced as the operator
    :func:`tensorffi.ops.register` makes of it, registered on first trace (see
    "lib.f inside torch.compile" below).
    """

    def __init__(
        self,
        ffi: Any,
        raw: Any,
        decls: Declarations,
        contracts: Mapping[str, str] | None = None,
        *,
        shim_lookup: Callable[[str], Any] | None = None,
        trampolines: bool = False,
        default_returns: str = "value",
        error_message: Callable[[], str] | None = None,
        reopen: tuple[Callable[..., "Library"], tuple[Any, ...], dict[str, Any]] | None = None,
        description: str = "",
        native: bool = False,
        addresses: Mapping[str, int] | None = None,
        cxx_errors: Any = None,
        unbound: Mapping[str, str] | None = None,
    ) -> None:
        self.ffi = ffi
        self.raw = raw
        self.declarations = decls
        self._shim_lookup = shim_lookup
        self._trampolines = trampolines  # an API-mode module built with trampolines (tensorffi._shims)
        self._contracts = dict(contracts) if isinstance(contracts, Mapping) else {}
        self._default_returns = default_returns
        self._error_message = error_message
        self._reopen = reopen
        self._description = description
        self._native = native  # tensorffi's own library: TF_E* status codes
        self._addresses = dict(addresses or {})  # from_ctypes: each function's address (no trampoline)
        self._cxx_errors = cxx_errors  # a C++ module's guard record (tensorffi._calls.CxxErrors)
        self._bound: dict[str, Callable[..., Any]] = {}
        self._unbound = dict(unbound or {})  # functions the files define that cannot be bound: name -> why
        check_contracts(contracts)
        # a key naming a declared struct type is the contract of its pointer fields
        self._struct_contracts: dict[str, FieldContract] = {}
        for key in [k for k in self._contracts if k in decls.structs and k not in decls.functions]:
            self._struct_contracts[key] = parse_struct_contract(self._contracts.pop(key), f"struct {key}")
        unknown = set(self._contracts) - set(decls.functions)
        cxx = sorted(unknown & set(self._unbound))
        if cxx:
            raise ContractError(f"contracts name {', '.join(map(repr, cxx))}, which cannot be bound: "
                                + self._unbound[cxx[0]])
        if unknown:
            declared = sorted(n for n in decls.functions if not n.startswith(SHIM_PREFIX))
            structs = sorted(n for n in decls.structs if not n.startswith("struct "))
            raise ContractError(
                f"contracts name functions that are not declared: {', '.join(sorted(unknown))} (declared: "
                f"{', '.join(declared[:12]) or 'none'}{', ...' if len(declared) > 12 else ''}"
                + (f"; struct types: {', '.join(structs[:8])}{', ...' if len(structs) > 8 else ''}" if structs else "")
                + "); check the spelling, and that the function is not static"
            )
        # destructors named in handle(...): called directly on a Handle, they close it
        self._destructors: set[str] = set()
        for text in self._contracts.values():
            c = parse_contract(text)
            self._destructors.update(d for d in (c.returns_handle, *c.handle_outs.values()) if d)
        for name in decls.functions:
            if not name.startswith(SHIM_PREFIX):
                self._bind(name)
        if not _dynamo_prepared:
            _prepare_for_dynamo()  # once per process: lib.f inside torch.compile (see below)

    def _bind(self, name: str) -> Callable[..., Any]:
        decl = self.declarations.functions[name]
        # A shim is the same function with its array pointers taken as intptr_t, so the
        # bridge passes data_ptr() integers and skips one ffi.cast per pointer.
        use_shim = self._shim_lookup is not None and has_array_params(decl) and not decl.variadic
        cfunc = self._shim_lookup(name) if use_shim else None  # type: ignore[misc]
        if cfunc is None:  # no shim for this one (e.g. an extern "Python" callback)
            use_shim, cfunc = False, getattr(self.raw, name)
        trampoline = trampoline_address(self.ffi, self.raw, name) if self._trampolines else None
        address = self._addresses.get(name)
        if address is None and trampoline is None and not decl.variadic:
            # load() (cffi's ABI mode): its functions are pointers, and the native path can
            # call one by its address (tensorffi._bridge.lower.generic_call) instead of
            # through cffi's call (~0.5 us)
            fptr = getattr(self.raw, name, None)
            if isinstance(fptr, self.ffi.CData):
                address = int(self.ffi.cast("intptr_t", fptr))
        bound = BoundFunction(
            self.ffi,
            cfunc,
            decl,
            parse_contract(self._contracts.get(name)),
            pointers_as_int=use_shim,
            default_returns=self._default_returns,
            error_message=self._error_message,
            resolve=self._resolve,
            native=self._native,
            trampoline=trampoline,
            keepalive=self.raw,
            destructor=name in self._destructors,
            address=address,
            structs=self.declarations.structs,
            struct_contracts=self._struct_contracts,
        ).call
        _display.decorate(bound)  # attributes for help() and notebooks; the call is unchanged
        # picklable as the library is; a C++ module's functions raise what their guard caught
        bound = _calls.finish(self, name, bound, self._cxx_errors)
        self._bound[name] = bound
        if name not in self.__dict__ and not hasattr(type(self), name):
            # an instance attribute: `lib.f` is a dictionary lookup, not a __getattr__ call
            # (a name the Library itself uses stays reachable through .functions)
            self.__dict__[name] = bound
        return bound

    def _resolve(self, fname: str) -> Any:
        """A function of this library named by a contract (a destructor, a message
        function), called directly by the bridge: for C++, through its guard's record, so
        that what a destructor throws is raised by ``close()`` itself, not by the next,
        unrelated call."""
        fn = getattr(self.raw, fname)
        return fn if self._cxx_errors is None else _calls.guarded(fn, self._cxx_errors, fname)

    @property
    def functions(self) -> dict[str, Callable[..., Any]]:
        """The bound functions, by name."""
        return dict(self._bound)

    def struct(self, type_name: str, **fields: Any) -> Struct:
        """A new zeroed struct ``type_name``; pointer fields accept tensors (kept alive)."""
        return Struct(self.ffi, self.declarations, type_name, **fields)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        bound: dict[str, Callable[..., Any]] | None = self.__dict__.get("_bound")
        if bound is not None and name in bound:
            return bound[name]
        if name.startswith("_") or bound is None:
            raise AttributeError(name)
        raw = self.__dict__.get("raw")
        if raw is not None and name not in self.declarations.functions:
            try:
                value = getattr(raw, name)  # an enum constant or #define the declarations give
            except (AttributeError, Exception):
                value = None
            if isinstance(value, int):
                return value  # type: ignore[return-value]
        if name in self.__dict__.get("_unbound", ()):
            raise AttributeError(f"tensorffi.Library {self.__dict__.get('_description') or '?'} does not bind {name!r}: "
                                 + self._unbound[name])
        import difflib

        close = difflib.get_close_matches(name, list(bound), n=3)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else (
            f"; it binds {', '.join(sorted(bound)[:8])}{', ...' if len(bound) > 8 else ''}" if bound else "")
        raise AttributeError(
            f"tensorffi.Library {self.__dict__.get('_description') or '?'} has no function {name!r}{hint} "
            f"(only functions with external linkage that the declarations name are bound)"
        )

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._bound))

    def __repr__(self) -> str:
        return repr(_display.LibraryView(self))

    def _repr_html_(self) -> str:
        return _display.LibraryView(self)._repr_html_()

    def __reduce__(self) -> tuple[Any, ...]:
        if self._reopen is None:
            raise TypeError(f"{self!r} cannot be pickled: it was not created by tensorffi.load() or compile()")
        fn, args, kwargs = self._reopen
        return (_reopen, (fn, args, kwargs))


def _reopen(fn: Callable[..., Library], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Library:
    return fn(*args, **kwargs)


# --------------------------------------------------------------------------- #
# lib.f inside torch.compile                                                   #
# --------------------------------------------------------------------------- #
#
# Dynamo cannot trace a C call (a NativeCall object, or a BoundCall / GuardedCall
# running the generated Python path, which takes data_ptr()s that fake tensors do not
# have). When Dynamo meets one of these objects, VariableBuilder's table of exact-type
# handlers (VariableBuilder._type_dispatch_impl, private) now sends it to our handler,
# which gives Dynamo a plain Python function to trace in its place: the *compiled form*
# of the function, made on first trace and kept on the bound function itself (the
# attribute _COMPILED_FORM). It calls the operator tensorffi.ops.register makes of the
# function (namespace "tensorffi_auto_<N>", one per library; name: the C name), so the
# call is one opaque node of the graph with its schema and shape rule, and
# fullgraph=True holds. Where ops.register refuses (a callback or handle parameter, a
# result no schema can say), the compiled form calls torch._dynamo.graph_break() with a
# message naming tensorffi.ops.register: an error under fullgraph=True, and otherwise a
# graph break, so the call runs eagerly as it does outside torch.compile.
#
# Why by type and not by object (torch's substitute_in_graph registers objects by id):
# nothing is registered per library or per function, so nothing is left to clean when a
# library dies and an id is reused, and creating a library costs one global read. A
# library whose function was traced stays alive for the process, as its operator does
# (torch cannot unregister one operator); others are collected as before.
#
# When: the handlers are added when torch._dynamo has been imported and a Library
# exists: at the first Library's creation if Dynamo is imported, else by a one-shot
# post-import hook on torch._dynamo (the same sys.meta_path idiom as tensorffi._torch),
# which removes itself. Nothing here imports torch. If torch's internals differ (the
# names above are missing), nothing is registered and Dynamo behaves as without
# tensorffi (its own "does not know how to trace" error).

_tokens = itertools.count()
_lock = threading.RLock()
_dynamo_prepared = False  # the hook is installed or the handlers registered (once per process)

#: the namespace prefix of the operators made for bound functions traced by torch.compile
AUTO_NAMESPACE = "tensorffi_auto"
_COMPILED_FORM = "_tf_compiled_form"


def _prepare_for_dynamo() -> None:
    global _dynamo_prepared
    with _lock:
        if _dynamo_prepared:
            return
        _dynamo_prepared = True
        if "torch._dynamo" in sys.modules:
            _register_with_dynamo()
        elif _dynamo_finder not in sys.meta_path:
            sys.meta_path.insert(0, _dynamo_finder)


class _DynamoFinder:
    """Finds nothing itself: wraps the loader another finder finds for torch._dynamo,
    so that the handlers are registered when its import completes."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "torch._dynamo":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        from ._torch import find_spec_elsewhere, wrap_loader

        spec = find_spec_elsewhere(self, fullname, path, target)
        loader = getattr(spec, "loader", None)
        if loader is not None and hasattr(loader, "exec_module"):
            wrap_loader(loader, lambda module: _register_with_dynamo())  # this spec's loader only
        return spec


_dynamo_finder = _DynamoFinder()


def _register_with_dynamo() -> None:
    """Add the handlers of tensorffi's function types to Dynamo's exact-type table
    (both of its copies: one per ``torch._dynamo.config.trace_numpy``). Never raises:
    it runs at the end of ``import torch._dynamo``."""
    try:
        from torch._dynamo.guards import GuardBuilder
        from torch._dynamo.source import AttrSource
        from torch._dynamo.variables.builder import VariableBuilder

        tables = [VariableBuilder._type_dispatch_impl(flag) for flag in (False, True)]
        guard = GuardBuilder.ID_MATCH

        def handler(builder: Any, value: Any) -> Any:
            form = _compiled_form(value)
            builder.install_guards(guard)  # the function is still this object
            return VariableBuilder(builder.tx, AttrSource(builder.source, _COMPILED_FORM))(form)

        kinds = _function_types()
        for table in tables:
            if not isinstance(table, dict):
                raise TypeError(f"the table is a {type(table).__name__}")
        for table in tables:
            for kind in kinds:
                table.setdefault(kind, handler)
    except Exception as exc:  # noqa: BLE001 - another torch: Dynamo's own behaviour stays
        _debug(f"bound functions inside torch.compile: Dynamo's internals differ ({type(exc).__name__}: {exc})")


def _function_types() -> list[type]:
    from ._bridge.lower import STATE

    kinds: list[type] = [_calls.BoundCall, _calls.GuardedCall]
    native = getattr(STATE.native, "NativeCall", None)
    if isinstance(native, type):
        kinds.append(native)
    return kinds


def _debug(message: str) -> None:
    import logging

    logging.getLogger("tensorffi").debug(message)


def _compiled_form(fn: Any) -> Callable[..., Any]:
    """What Dynamo traces in place of the bound function ``fn`` (made once, kept on ``fn``)."""
    form: Callable[..., Any] | None = getattr(fn, _COMPILED_FORM, None)
    if form is None:
        with _lock:
            form = getattr(fn, _COMPILED_FORM, None)
            if form is None:
                form = _make_compiled_form(fn)
                setattr(fn, _COMPILED_FORM, form)
    return form


def _make_compiled_form(fn: Any) -> Callable[..., Any]:
    lib = getattr(fn, "_tf_library", None)
    name = str(getattr(fn, "_tf_function", None) or getattr(fn, "__name__", "?"))
    if not isinstance(lib, Library) or getattr(fn, "__wrapped_bridge__", None) is None:
        return _graph_break_form(name, f"tensorffi: the C function {name}() is called directly inside torch.compile; "
                                       f"call it through an operator (tensorffi.ops)")
    where = lib.__dict__.get("_description") or "the library"
    try:  # anything that goes wrong: a graph break that says so, never a Dynamo internal error
        token = lib.__dict__.get("_compile_token")
        if token is None:
            token = lib.__dict__["_compile_token"] = next(_tokens)
        qualname = f"{AUTO_NAMESPACE}_{token}::{name}"
        from . import ops

        op = ops.get(qualname) if qualname in ops.operators() else ops.register(fn, qualname)
        return _operator_form(fn, op.overload, f"{where}.{name}")
    except Exception as exc:  # noqa: BLE001 - what ops.register refuses, said with the road that works
        return _graph_break_form(name, (
            f"tensorffi: {where}.{name}() is called inside torch.compile, which needs it as an operator, and "
            f"tensorffi cannot make one of it on its own ({type(exc).__name__}: {exc}). Register it "
            f"yourself, e.g. op = tensorffi.ops.register(lib.{name}, 'mylib::{name}', hidden={{...}}, fake=...), "
            f"and call op (torch.ops.mylib.{name}) in the compiled function instead; without fullgraph=True the "
            f"call runs eagerly (a graph break)."))


def _graph_break_form(name: str, message: str) -> Callable[..., Any]:
    src = f"def _tf_compiled(*args, **kwargs):\n    _graph_break(msg={message!r})\n"
    import torch._dynamo

    return _define(name, src, {"_graph_break": torch._dynamo.graph_break})


def _define(name: str, src: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    # (no __name__ in the namespace: Dynamo would import a module of that name for its globals)
    code = compile(src, f"<tensorffi: {name} inside torch.compile>", "exec")
    exec(code, namespace)  # noqa: S102 - generated from the contract's names only
    fn: Callable[..., Any] = namespace["_tf_compiled"]
    fn.__name__ = fn.__qualname__ = name
    return fn


def _operator_form(fn: Any, overload: Any, label: str) -> Callable[..., Any]:
    """A Python function with ``fn``'s calling forms (the short one, and the C
    declaration's own) and results, that calls the operator ``overload``: inputs and
    inout arrays are passed, ``out`` arrays come back from the operator (copied into
    one the caller gives), a ``return: value`` result is the operator's last output as
    a Python number (``.item()``). Lengths the caller gives are checked against the
    arrays where the contract makes a length one array dimension or an array's numel;
    the operator itself takes every length from the arrays."""
    import torch

    from .bridge import tensor_signature

    bound = fn.__wrapped_bridge__
    plan = bound.plan
    name = plan.name
    params = list(inspect.signature(fn).parameters.values())
    short = [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    keyword = [p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
    if len(short) + len(keyword) != len(params) or any(p.default is not None for p in keyword):
        raise ContractError(f"{name}: its calling form {inspect.signature(fn)} is not one tensorffi can trace")
    given = set(short) | {p.name for p in keyword}
    args, outs = tensor_signature(bound)
    pynames = {p.name: p.pyname for p in plan.params}
    missing = [a.name for a in args if a.name not in given] + [
        pynames[o.name] for o in outs if o.name != "return" and pynames[o.name] not in given]
    if missing or any(p.kind not in ("array", "scalar") for p in plan.params):
        raise ContractError(f"{name}: its parameters do not map onto the operator's")
    sym: dict[str, str] = {}  # a shape symbol -> the expression of its value from the arrays
    for a in args:
        if a.kind == "tensor" and not a.optional and a.shape is not None:
            for i, d in enumerate(a.shape):
                if d.expr is None and d.factor == 1 and len(d.symbols) == 1:
                    sym.setdefault(d.symbols[0], f"{a.name}.shape[{i}]")
    tensors = {a.name for a in args if a.kind == "tensor" and not a.optional}

    lines = [f"def _tf_compiled({', '.join(short + ['*_c'] + [f'{p.name}=None' for p in keyword])}):"]
    emit = lines.append
    full = [p.pyname for p in plan.params]
    if full != short:
        later = [k for k in full if k not in short]
        emit("    if _c:")
        emit(f"        if len(_c) != {len(full) - len(short)}:")
        emit(f"            raise TypeError({_full_form_error(name, short, full)!r})")
        for k in later:
            emit(f"        _k_{k} = {k}")
        emit(f"        {', '.join(full)}, = {'(' + ', '.join(short) + ',)' if short else '()'} + _c")
        for k in later:
            emit(f"        if _k_{k} is not None:")
            emit(f"            if {k} is not None:")
            emit(f"                raise TypeError({name + '() got multiple values for argument ' + repr(k)!r})")
            emit(f"            {k} = _k_{k}")
    else:
        emit("    if _c:")
        emit(f"        raise TypeError({f'{name}() takes {len(short)} positional argument(s)'!r})")
    for p in plan.params:  # lengths the caller gives: checked where the arrays say what they must be
        if p.kind != "scalar" or not (p.is_symbol or p.fill is not None) or p.pyname in {a.name for a in args}:
            continue
        expect = sym.get(p.name) if p.is_symbol else _fill_expression(p, sym, tensors, pynames)
        if expect is not None:
            msg = f"{name}(): argument '{p.pyname}' does not match the array shapes (it must be {expect})"
            emit(f"    if {p.pyname} is not None:")
            emit(f"        _check({p.pyname} == {expect}, lambda: {msg!r})")
    results = [f"_r{i}" for i in range(len(outs))]
    call = f"_op({', '.join(a.name for a in args)})"
    emit(f"    {', '.join(results)}, = {call}" if len(results) > 1 else
         f"    {results[0]} = {call}" if results else f"    {call}")
    returned: list[str] = []
    for o, r in zip(outs, results):
        if o.name == "return":
            emit(f"    _v = {r}.item()")
            returned.insert(0, "_v")
            continue
        y = pynames[o.name]
        emit(f"    if {y} is None:")
        emit(f"        {y} = {r}")
        emit("    else:")
        emit(f"        _check({y}.dtype == {r}.dtype and {y}.shape == {r}.shape, "
             f"lambda: {name + '(): argument ' + repr(y) + ' must have the dtype and shape of the result'!r})")
        emit(f"        {y}.copy_({r})")
        returned.append(y)
    emit(f"    return {', '.join(returned) + (',' if len(returned) > 1 else '') if returned else 'None'}")
    src = "\n".join(lines) + "\n"
    form = _define(name, src, {"_op": overload, "_check": torch._check})
    form.__doc__ = f"{label} as traced by torch.compile: the operator {overload.name()}"
    form.__tf_source__ = src  # type: ignore[attr-defined]
    return form


def _full_form_error(name: str, short: list[str], full: list[str]) -> str:
    return (f"{name}() takes {len(short)} positional argument(s) ({', '.join(short)}) or all "
            f"{len(full)} of the C declaration ({', '.join(full)})")


def _fill_expression(p: Any, sym: dict[str, str], tensors: set[str], pynames: dict[str, str]) -> str | None:
    fill = p.fill
    if fill.numel_of is not None:
        array = pynames.get(fill.numel_of, fill.numel_of)
        return f"{array}.numel()" if array in tensors else None
    d = fill.dim
    if d is None or d.expr is not None or any(s not in sym for s in d.symbols):
        return None
    return " * ".join(([str(d.factor)] if d.factor != 1 or not d.symbols else []) + [sym[s] for s in d.symbols])

__all__ = ["Library", "check_contracts", "describe"]


def describe(obj: Any) -> Any:
    """A description of a bound function or a :class:`~tensorffi.Library`: its C
    declaration, Python calling form, contract, and each argument's role, dtype and
    shape symbols. ``print()`` it, or let a notebook show it (it has ``_repr_html_``).

    >>> import tensorffi
    >>> lib = tensorffi.load("libm.so.6", "double ldexp(double x, int exp);")
    >>> print(tensorffi.describe(lib.ldexp))
    ldexp(x, exp) -> the C result (double)
      C:        double ldexp(double x, int exp)
      x    double   scalar  float (C double)
      exp  int      scalar  int (C int)
    """
    if isinstance(obj, Library):
        return _display.LibraryView(obj)
    if _display._bridge_of(obj) is not None:
        return _display.FunctionView(obj)
    what = getattr(obj, "__qualname__", None) or type(obj).__name__
    raise TypeError(
        f"tensorffi.describe() takes a Library or one of its functions (lib.NAME), got {what!r}"
        + ("; for tensorffi's own kernels see help()" if callable(obj) else "")
    )


def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: tab completion does not offer imports (np, torch, ...)
