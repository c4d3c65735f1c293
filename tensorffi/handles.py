# SPDX-License-Identifier: MIT
"""C that outlives the call: handles, buffers C keeps, callbacks from C threads.

Much C keeps state between calls: a device opened by a vendor SDK, a parser, a
solver. The contract says so (see :mod:`tensorffi.contract`) and the bridge does
the bookkeeping that a user would otherwise write with ``ffi.gc``, keep-alive
lists and pointer arithmetic:

* a :class:`Handle` wraps the C pointer and calls its destructor **exactly once**
  (:meth:`Handle.close`, a ``with`` block, or a finalizer as a last resort);
  pointer parameters of its type accept it, parameters of another type refuse it,
  and after ``close()`` every use is a :class:`~tensorffi.HandleClosedError`,
  never a dangling pointer. A call that is using the handle when it is closed
  (from another thread, or a callback) finishes first: the destructor runs when
  the last such call returns;
* arrays that C keeps after a call (``buf: keep [n] until dev``) are held while
  the handle lives, and must live in memory that cannot be resized or freed
  meanwhile: :func:`buffer` allocates such memory (an ordinary tensor's storage
  can be resized, so it is refused);
* Python callables passed for function pointers (``cb: callback(...) until dev``)
  stay alive while the handle lives; they may be called from any C thread, and an
  exception they raise is stored and raised at the next call that takes the handle,
  or by :meth:`Handle.close`.

>>> import tensorffi
>>> b = tensorffi.buffer((2, 3))
>>> b.shape, b.dtype, b.untyped_storage().resizable()
(torch.Size([2, 3]), torch.float32, False)
"""
from __future__ import annotations

import ctypes
import mmap
import threading
import weakref
from typing import Any, Callable

import cffi
import numpy as np
import torch

from .errors import ArgumentTypeError, HandleClosedError, NativeError

_FFI = cffi.FFI()

__all__ = ["Handle", "buffer"]


class _State:
    """What a handle and its finalizer share (nothing refers back to the Handle)."""

    __slots__ = ("ptr", "ctype", "name", "destroy", "lock", "users", "closed", "destroyed", "kept", "errors",
                 "check_status")

    def __init__(self, ptr: Any, ctype: Any, name: str, destroy: Callable[[Any], Any],
                 check_status: Callable[[Any], None] | None) -> None:
        self.ptr = ptr
        self.ctype = ctype
        self.name = name
        self.destroy = destroy
        self.lock = threading.Lock()
        self.users = 0
        self.closed = False
        self.destroyed = False
        self.kept: dict[Any, Any] = {}  # what C keeps (buffers, callbacks) -> held until destroyed
        self.errors: list[BaseException] = []  # raised by callbacks, waiting for the next call
        self.check_status = check_status

    # -- calls that use the handle -------------------------------------------- #

    def enter(self, where: str) -> Any:
        """A call starts using the handle: its pointer (raises if closed, or a callback
        exception waits)."""
        with self.lock:
            if self.closed:
                raise HandleClosedError(f"{where}: the handle {self.name} is closed")
            if self.errors:
                err = self.errors.pop(0)
                raise err
            self.users += 1
            return self.ptr

    def exit(self) -> None:
        with self.lock:
            self.users -= 1
            last = self.closed and self.users == 0 and not self.destroyed
            if last:
                self.destroyed = True
        if last:
            self._destroy(raise_errors=False)

    def hold(self, key: Any, obj: Any) -> None:
        with self.lock:
            self.kept[key] = obj

    def release(self, key: Any) -> None:
        with self.lock:
            self.kept.pop(key, None)

    def written_kept(self) -> list[torch.Tensor]:
        """The tensors this handle keeps that C writes (their version counters are
        bumped when a declared "acquire" call returns)."""
        with self.lock:
            return [obj[0] for obj in self.kept.values()
                    if isinstance(obj, tuple) and len(obj) == 3 and obj[2] and isinstance(obj[0], torch.Tensor)]

    def store_error(self, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(exc)

    # -- closing --------------------------------------------------------------- #

    def close(self, raise_errors: bool) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            now = self.users == 0 and not self.destroyed
            if now:
                self.destroyed = True
        if now:
            self._destroy(raise_errors)
        elif raise_errors:
            self._raise_pending()

    def _destroy(self, raise_errors: bool) -> None:
        try:
            result = self.destroy(self.ptr)
        finally:
            with self.lock:
                self.kept.clear()  # only now: C may have used them until its destructor returned
        if raise_errors:
            if self.check_status is not None:
                self.check_status(result)
            self._raise_pending()

    def _raise_pending(self) -> None:
        with self.lock:
            errors, self.errors = self.errors, []
        if errors:
            first = errors[0]
            for other in errors[1:]:
                if hasattr(first, "add_note"):
                    first.add_note(f"(and {type(other).__name__}: {other})")
            raise first


def _finalize(state: _State) -> None:
    """Last resort (garbage collection, interpreter exit): destroy, never raise."""
    try:
        state.close(raise_errors=False)
    except Exception:  # pragma: no cover - nothing can be reported from a finalizer
        pass


class Handle:
    """An opaque C object owned by Python: its destructor runs exactly once.

    Created by bound functions whose contract says ``return: handle(DESTROY)`` or
    ``NAME: out handle(DESTROY)``; pass it to the library's functions where a pointer
    of its type is expected. ``close()`` (idempotent), ``with handle:`` or garbage
    collection destroy it; after that, using it raises
    :class:`~tensorffi.HandleClosedError`. Exceptions raised by its callbacks on C
    threads are raised by the next call that takes the handle, or by ``close()``.
    Handles are not picklable: they stand for state inside this process.
    """

    __slots__ = ("_state", "_finalizer", "__weakref__")

    def __init__(self, ptr: Any, ctype: Any, destroy: Callable[[Any], Any], *, name: str,
                 check_status: Callable[[Any], None] | None = None) -> None:
        self._state = _State(ptr, ctype, name, destroy, check_status)
        self._finalizer = weakref.finalize(self, _finalize, self._state)

    @property
    def closed(self) -> bool:
        return self._state.closed

    @property
    def ctype(self) -> str:
        """The C type of the pointer ("struct device *")."""
        return str(self._state.ctype.cname)

    @property
    def address(self) -> int:
        """The C pointer, as an integer (0 once closed)."""
        st = self._state
        return 0 if st.closed else int(_FFI.cast("intptr_t", st.ptr))

    def close(self) -> None:
        """Destroy the C object (once; later calls do nothing), then raise any exception
        a callback stored, and the destructor's error status if it has one."""
        self._finalizer.detach()
        self._state.close(raise_errors=True)

    def __enter__(self) -> "Handle":
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None:
            self.close()
        else:  # an exception is on its way: do not replace it with a callback's
            self._finalizer.detach()
            self._state.close(raise_errors=False)

    def __repr__(self) -> str:
        state = "closed" if self._state.closed else "open"
        return f"<tensorffi.Handle {self._state.name} ({self.ctype}) {state}>"

    def _repr_html_(self) -> str:
        from ._display import handle_html

        return handle_html(self)

    def __reduce__(self) -> Any:
        raise TypeError(
            f"{self!r} cannot be pickled: it stands for C state inside this process (open it again in the worker)"
        )

    # -- for the bridge -------------------------------------------------------- #

    def _enter(self, where: str, want: Any) -> Any:
        st = self._state
        if want is not None and st.ctype is not want:
            raise ArgumentTypeError(f"{where} expects a handle of type {want.cname}, got {self!r}")
        return st.enter(where)


def buffer(shape: Any, dtype: Any = torch.float32, *, pin: bool = False, like: str = "torch") -> Any:
    """A zeroed, page-aligned buffer that C may keep between calls.

    Its storage cannot be resized (the bridge refuses ordinary tensors for arrays C
    keeps: their storage can be resized or freed while C still writes). ``pin=True``
    locks the pages in RAM (``mlock``; a :class:`~tensorffi.NativeError` if the
    system refuses, e.g. over ``ulimit -l``). ``like="numpy"`` returns a NumPy array.

    >>> import tensorffi
    >>> tensorffi.buffer(4, "float64", like="numpy").tolist()
    [0.0, 0.0, 0.0, 0.0]
    """
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if isinstance(dtype, torch.dtype):
        np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    else:
        np_dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize
    if nbytes:
        mm = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        arr = np.frombuffer(mm, dtype=np_dtype).reshape(shape)
        if pin:
            libc = ctypes.CDLL(None, use_errno=True)
            addr = arr.__array_interface__["data"][0]
            if libc.mlock(ctypes.c_void_p(addr), ctypes.c_size_t(nbytes)) != 0:
                err = ctypes.get_errno()
                raise NativeError(f"tensorffi.buffer: cannot pin {nbytes} bytes in RAM (mlock: errno {err}); "
                                  f"raise 'ulimit -l' or pass pin=False")
    else:
        arr = np.zeros(shape, dtype=np_dtype)
    if like == "numpy":
        return arr
    if like != "torch":
        raise ValueError(f"like must be 'torch' or 'numpy', got {like!r}")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.from_numpy(arr)


def is_resizable(value: Any) -> bool:
    """Whether the memory of ``value`` could be resized or freed while C keeps it."""
    if isinstance(value, torch.Tensor):
        return bool(value.untyped_storage().resizable())
    return False

