# SPDX-License-Identifier: MIT
"""What a Library's bound functions are beyond their call: picklable, and for C++,
guarded.

**Pickling.** A bound function pickles as its library does, plus its name:
``pickle.dumps(lib.feat)`` is ``lib``'s own pickle (see :mod:`tensorffi.byo`: a
``compile()`` handle carries its text, a ``load()`` handle its path and hash) and
``"feat"``. Unpickled, it is a :class:`DeferredFunction`, which opens nothing until
it is first called (or asked for its signature, its description...): a dask
scheduler that only forwards ``client.map(lib.feat, arrays)`` never loads user code,
and a worker opens the library once however many tasks it runs. Native call objects
(``csrc/bridge_call.c``) are reduced through :mod:`copyreg`; a function that runs the
generated Python path is a :class:`BoundCall`, whose ``__call__`` is that function.

**C++.** A ``compile()`` module with C++ calls every function through a guard
(``tensorffi._buildworker.guards``) that catches what C++ throws and records it per
thread; :class:`GuardedCall` raises it after the call returns, as a
:class:`~tensorffi.NativeError` carrying the exception's type and ``what()``.
"""
from __future__ import annotations

import copyreg
import threading
from typing import Any, Callable, cast

from .errors import InvalidArgumentError, NativeError, NativeMemoryError, NativeOverflowError

#: the attributes a bound function carries (set by the bridge and tensorffi._display)
_COPIED = ("__wrapped_bridge__", "__signature__", "__doc__", "_repr_html_", "__python_path__", "__name__",
           "__qualname__")

_registered: set[type] = set()
_register_lock = threading.Lock()


def _reduce_bound(fn: Any) -> tuple[Any, ...]:
    """copyreg reducer of a native call object: its library and its name."""
    try:
        lib, name = fn._tf_library, fn._tf_function
    except AttributeError:
        raise TypeError(f"cannot pickle {fn!r}: it is not a function of a tensorffi.load() or compile() library") from None
    return (function_of, (lib, name))


def function_of(lib: Any, name: str) -> "DeferredFunction":
    """A pickled bound function, unpickled: function ``name`` of ``lib``, opened on use."""
    return DeferredFunction(lib, name)


class DeferredFunction:
    """Function ``name`` of library ``lib`` (an unopened handle), resolved on first use."""

    def __init__(self, lib: Any, name: str) -> None:
        self.__dict__["_tf_library"] = lib
        self.__dict__["_tf_function"] = name
        self.__dict__["_tf_fn"] = None

    def _tf_resolve(self) -> Callable[..., Any]:
        fn = self.__dict__["_tf_fn"]
        if fn is None:
            lib, name = self.__dict__["_tf_library"], self.__dict__["_tf_function"]
            fn = lib.functions.get(name)
            if fn is None:
                raise AttributeError(f"the library of this pickled function no longer binds {name!r}")
            self.__dict__["_tf_fn"] = fn
        return cast("Callable[..., Any]", fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fn = self.__dict__["_tf_fn"]
        return (fn if fn is not None else self._tf_resolve())(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_tf_") or name in ("__getstate__", "__setstate__", "__reduce_ex__"):
            raise AttributeError(name)
        return getattr(self._tf_resolve(), name)

    def __reduce__(self) -> tuple[Any, ...]:
        return (function_of, (self.__dict__["_tf_library"], self.__dict__["_tf_function"]))

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        return self._tf_resolve().__doc__

    def __repr__(self) -> str:
        if self.__dict__["_tf_fn"] is None:
            return f"<tensorffi function {self.__dict__['_tf_function']} of {self.__dict__['_tf_library']!r}>"
        return repr(self.__dict__["_tf_fn"])


class BoundCall:
    """A bound function that runs the generated Python path: picklable (a plain
    Python function is pickled by its name, which a generated one cannot be found by)."""

    _tf_call: Callable[..., Any]
    _tf_library: Any
    _tf_function: str

    def __init__(self, fn: Callable[..., Any], lib: Any, name: str) -> None:
        d = self.__dict__
        for attr in _COPIED:
            if hasattr(fn, attr):
                d[attr] = getattr(fn, attr)
        d["_tf_call"] = fn
        d["_tf_library"] = lib
        d["_tf_function"] = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._tf_call(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (function_of, (self._tf_library, self._tf_function))

    def __repr__(self) -> str:
        return f"<tensorffi bound function {self._tf_function}>"


_KINDS: dict[int, type[NativeError]] = {2: NativeMemoryError, 3: InvalidArgumentError, 4: NativeOverflowError}


class CxxErrors:
    """The per-thread record of the C++ exceptions a module's guards caught."""

    def __init__(self, ffi: Any, raw: Any) -> None:
        self.raw = raw
        self.take = raw._tfx_take
        self.what = ffi.new("char[]", 4096)
        self.type = ffi.new("char[]", 256)
        self.func = ffi.new("char[]", 128)
        self.ffi = ffi
        #: the count of exceptions caught and not yet raised (all threads): read after every call
        self.pending = ffi.addressof(raw, "_tfx_pending")
        self.lock = threading.Lock()  # the buffers are shared; the record is per thread

    def raise_pending(self) -> None:
        """Raise the exception this thread's last guarded call caught, if any."""
        with self.lock:
            kind = self.take(self.what, 4096, self.type, 256, self.func, 128)
            if not kind:
                return  # another thread's
            s = self.ffi.string
            what = s(self.what).decode("utf-8", "replace")
            ctype = s(self.type).decode("utf-8", "replace")
            func = s(self.func).decode("utf-8", "replace")
        if kind == 5:
            message = f"{func}() threw a C++ exception of type {ctype}, which is not a std::exception (no message)"
        else:
            message = f"{func}() threw {ctype}: {what}"
        exc = _KINDS.get(kind, NativeError)(message, 0, func)
        exc.cpp_type = ctype  # type: ignore[attr-defined]
        exc.what = what if kind != 5 else None  # type: ignore[attr-defined]
        raise exc


class GuardedCall(BoundCall):
    """A function of a C++ module: the call, then any exception its guard caught."""

    _tf_pending: Any  # a cffi int[1]
    _tf_raise: Callable[[], None]

    def __init__(self, fn: Callable[..., Any], lib: Any, name: str, errors: CxxErrors) -> None:
        super().__init__(fn, lib, name)
        self.__dict__["_tf_pending"] = errors.pending
        self.__dict__["_tf_raise"] = errors.raise_pending

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._tf_call(*args, **kwargs)
        finally:
            if self._tf_pending[0]:
                self._tf_raise()


def guarded(fn: Callable[..., Any], errors: CxxErrors, name: str | None = None) -> Callable[..., Any]:
    """``fn`` (which calls C++ through a guard), raising what the guard caught after it."""
    pending, raise_pending = errors.pending, errors.raise_pending

    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        finally:
            if pending[0]:
                raise_pending()

    call.__name__ = call.__qualname__ = name or str(getattr(fn, "__name__", "guarded"))
    return call


def _guard_kernels(bound: Any, errors: CxxErrors) -> None:
    """An operator's body (tensorffi.ops) calls the C function too: guard it as well."""
    make = bound.kernel

    def kernel(hidden: Any = None, grad_guard: Any = None) -> Callable[..., Any]:
        return guarded(make(hidden, grad_guard), errors, None)

    bound.kernel = kernel


def finish(lib: Any, name: str, fn: Callable[..., Any], cxx: CxxErrors | None = None) -> Callable[..., Any]:
    """The object a Library exposes as function ``name``, made from the bridge's ``fn``."""
    if cxx is not None:
        bound = getattr(fn, "__wrapped_bridge__", None)
        if bound is not None:
            _guard_kernels(bound, cxx)
        if getattr(fn, "__native__", False):
            # the native call reads the guard's count itself after each call (and after its
            # Python path, which calls the same C function): no Python frame around it
            fn._cxx_guard(int(cxx.ffi.cast("intptr_t", cxx.pending)), cxx.raise_pending, cxx)  # type: ignore[attr-defined]
            cxx = None
    if cxx is not None:
        out: Callable[..., Any] = GuardedCall(fn, lib, name, cxx)
    elif type(fn).__name__ == "function":
        out = BoundCall(fn, lib, name)
    else:
        t = type(fn)
        if t not in _registered:
            with _register_lock:
                copyreg.pickle(t, _reduce_bound)
                _registered.add(t)
        fn._tf_library = lib  # type: ignore[attr-defined]  # a bridge-made callable object takes attributes
        fn._tf_function = name  # type: ignore[attr-defined]
        return fn
    bound = getattr(fn, "__wrapped_bridge__", None)
    if bound is not None:
        bound.call = out  # what runs, as the bridge reports it
    return out


__all__ = ["finish", "function_of", "DeferredFunction", "BoundCall", "GuardedCall", "CxxErrors"]
