# SPDX-License-Identifier: MIT
"""A C library whose functions are bound through the bridge."""
from __future__ import annotations

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
        check_contracts(contracts)
        # a key naming a declared struct type is the contract of its pointer fields
        self._struct_contracts: dict[str, FieldContract] = {}
        for key in [k for k in self._contracts if k in decls.structs and k not in decls.functions]:
            self._struct_contracts[key] = parse_struct_contract(self._contracts.pop(key), f"struct {key}")
        unknown = set(self._contracts) - set(decls.functions)
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
