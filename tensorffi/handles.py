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
  the handle lives, and must live in memory the bridge can prove will not move or
  be freed meanwhile: memory allocated by :func:`buffer` (a tensor, a NumPy array,
  or any view into it). Everything else is refused with a
  :class:`~tensorffi.LayoutError` naming the argument: an ordinary tensor (its
  storage can be resized), ``torch.frombuffer`` of a ``bytearray`` (``extend()``
  moves it), ``torch.from_numpy`` of an array or a NumPy array that owns its data
  (``ndarray.resize(refcheck=False)`` frees it), shared memory (torch may move
  it). The handle holds the :func:`buffer` block itself, not only the tensor: if
  torch swaps the tensor's memory (``share_memory_()``, ``set_()``), C still writes
  live memory, and the next ``acquire`` call that takes the handle raises a
  :class:`~tensorffi.LayoutError` instead of leaving the tensor without C's data;
* every registration is counted: the same buffer registered twice is held twice,
  a registration that C refuses (an error status) releases only what that call
  added, and ``release`` gives back one registration;
* Python callables passed for function pointers (``cb: callback(...) until dev``)
  stay alive while the handle lives — every one registered, not only the last
  (C APIs that keep a list of listeners call each); ``until return`` hands them to
  the handle the call gives back (its result, or its one out handle), so a
  constructor such as ``src_callback_new(func, ...)`` keeps ``func`` for the life
  of the converter. They may be called from any C thread. An exception one raises
  is stored: if C called it on the thread of a call that takes the handle (during
  that call), it is raised when that call returns; otherwise at the next call that
  takes the handle, or by :meth:`Handle.close`;
* an unregister function (``cb: release``) ends one registration of the callable
  passed to it: the Python callable is let go, and the C entry point the bridge
  made for it stays, disarmed, until the handle is destroyed, so C that calls it
  late (a thread already inside it when the unregister call returned, a library
  that calls a listener it said it removed) reaches a stub that returns the
  callback's ``error=`` value, never freed code; such a call stores a
  :class:`~tensorffi.NativeError` that the next call on the handle raises. That
  costs about 1 KB per removed registration (850 B of Python heap measured), given
  back when the handle closes: a handle that registers and removes listeners
  millions of times should be reopened now and then. The
  bridge cannot know about C that keeps a callback past the handle's destructor,
  or that was given a callback without ``until`` (freed when the call returns):
  that is the contract's to say;
* the destructor named in ``handle(DESTROY)``, called directly on the handle
  (``lib.DESTROY(h)``), closes the handle (the destructor runs once; later uses are
  a :class:`~tensorffi.HandleClosedError`).

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
from typing import TYPE_CHECKING, Any, Callable

import cffi
import numpy as np

from ._torch import T, loaded
from .errors import (AllocationError, ArgumentTypeError, DTypeError, HandleClosedError, LayoutError, NativeError,
                     ShapeError)

if TYPE_CHECKING:
    import torch

_FFI = cffi.FFI()

__all__ = ["Handle", "buffer"]


class _State:
    """What a handle and its finalizer share (nothing refers back to the Handle)."""

    __slots__ = ("ptr", "ctype", "name", "destroy", "lock", "users", "closed", "destroyed", "kept", "tokens",
                 "tensors", "errors", "error_threads", "check_status", "retired")

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
        # what C keeps (buffers, callbacks), one entry per registration: token -> (key, held)
        self.kept: dict[int, tuple[Any, Any]] = {}
        self.tokens = 0
        self.tensors: tuple[Kept, ...] | None = ()  # the kept tensors (None: to recompute)
        self.errors: list[BaseException] = []  # raised by callbacks, waiting for the next call
        self.error_threads: list[int] = []  # the thread each of those was raised on
        self.check_status = check_status
        self.retired: list[Any] = []  # callbacks C gave back: disarmed, kept until the destructor ran

    # -- calls that use the handle -------------------------------------------- #

    def enter(self, where: str) -> Any:
        """A call starts using the handle: its pointer (raises if closed, or a callback
        exception waits)."""
        with self.lock:
            if self.closed:
                raise HandleClosedError(f"{where}: the handle {self.name} is closed")
            if self.errors:
                err = self.errors.pop(0)
                self.error_threads.pop(0)
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

    def hold(self, key: Any, obj: Any) -> int:
        """Hold ``obj`` for one registration under ``key`` (an address, a callback's
        parameter); returns the registration's token."""
        with self.lock:
            self.tokens += 1
            self.kept[self.tokens] = (key, obj)
            self.tensors = None
            return self.tokens

    def drop(self, token: int) -> None:
        """Forget one registration (C refused it: it keeps nothing of that call)."""
        with self.lock:
            self.kept.pop(token, None)
            self.tensors = None

    def release(self, key: Any) -> None:
        """C gave back one registration under ``key`` (the latest)."""
        with self.lock:
            for token in reversed(list(self.kept)):
                if self.kept[token][0] == key:
                    del self.kept[token]
                    self.tensors = None
                    return

    def registered(self, key: Any) -> tuple[int, Any] | None:
        """The latest registration under ``key``: (token, what is held), or None."""
        with self.lock:
            for token in reversed(list(self.kept)):
                if self.kept[token][0] == key:
                    return token, self.kept[token][1]
        return None

    def retire(self, token: int) -> None:
        """C gave back registration ``token`` of a callback: the registration ends and
        the Python callable is let go, but the C entry point stays (disarmed) until
        the handle is destroyed, so a C library that calls it late (a thread already
        calling it, a listener it says it removed) reaches a stub, never freed code."""
        with self.lock:
            entry = self.kept.pop(token, None)
            if entry is None:
                return
            self.tensors = None
            entry[1].disarm()
            self.retired.append(entry[1])

    def _kept_tensors(self) -> tuple[Kept, ...]:
        """The kept tensors, computed when registrations change (not on every
        "acquire" call, which may run once per frame)."""
        with self.lock:
            if self.tensors is None:
                self.tensors = tuple(obj for _, obj in self.kept.values()
                                     if isinstance(obj, Kept) and isinstance(obj.value, T.Tensor))
            return self.tensors

    def written_kept(self) -> list[torch.Tensor]:
        """The tensors this handle keeps that C writes (their version counters are
        bumped when a declared "acquire" call returns)."""
        return [k.value for k in self._kept_tensors() if k.written]

    def check_kept(self, where: str) -> None:
        """Before an "acquire" call: every kept tensor still addresses the memory C
        writes (torch can swap a storage's memory: ``share_memory_()``, ``set_()``)."""
        for k in self._kept_tensors():
            if k.value.data_ptr() != k.address:
                k.moved(where)

    def store_error(self, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(exc)
            self.error_threads.append(threading.get_ident())

    def raise_own(self) -> None:
        """After a call that took the handle returned: raise what its callbacks raised on
        this thread (C called them synchronously, during the call); exceptions raised on
        other threads wait for the next call that takes the handle."""
        me = threading.get_ident()
        with self.lock:
            mine = [e for e, t in zip(self.errors, self.error_threads) if t == me]
            if not mine:
                return
            kept = [(e, t) for e, t in zip(self.errors, self.error_threads) if t != me]
            self.errors = [e for e, _ in kept]
            self.error_threads = [t for _, t in kept]
        _raise_first(mine)

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
                self.retired.clear()
                self.tensors = None
        if raise_errors:
            if self.check_status is not None:
                self.check_status(result)
            self._raise_pending()

    def _raise_pending(self) -> None:
        with self.lock:
            errors, self.errors, self.error_threads = self.errors, [], []
        if errors:
            _raise_first(errors)


def _raise_first(errors: list[BaseException]) -> None:
    """Raise the first of ``errors``, the others noted on it."""
    first = errors[0]
    for other in errors[1:]:
        if hasattr(first, "add_note"):
            first.add_note(f"(and {type(other).__name__}: {other})")
    raise first


class LateSink:
    """Where a callback kept ``until return`` stores an exception: the handle the call
    returns, once it exists (:meth:`bind`); until then, a list (C may call the
    callback, from any thread, before the registering call has returned)."""

    __slots__ = ("lock", "state", "pending")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state: _State | None = None
        self.pending: list[BaseException] = []

    def __call__(self, exc: BaseException) -> None:
        with self.lock:
            state = self.state
            if state is None:
                self.pending.append(exc)
                return
        state.store_error(exc)

    def bind(self, state: _State) -> None:
        """From now on exceptions go to ``state``; those stored before go there too."""
        with self.lock:
            self.state, pending, self.pending = state, self.pending, []
        for exc in pending:
            state.store_error(exc)


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
        """The C type of the pointer (``"struct device *"``)."""
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


def buffer(shape: Any, dtype: Any = "float32", *, pin: bool = False, like: str = "torch") -> Any:
    """A zeroed, page-aligned buffer that C may keep between calls.

    Its memory is a block the bridge allocated and can recognise, so it is the memory
    C may keep (``keep [n] until H``): its storage cannot be resized, a NumPy view of
    it does not own its data (``resize`` is refused), and a handle that keeps it holds
    the block itself. ``pin=True``
    locks the pages in RAM (``mlock``; a :class:`~tensorffi.NativeError` if the
    system refuses, e.g. over ``ulimit -l``). ``like="numpy"`` returns a NumPy array.

    >>> import tensorffi
    >>> tensorffi.buffer(4, "float64", like="numpy").tolist()
    [0.0, 0.0, 0.0, 0.0]
    """
    shape, torch_dtype, np_dtype = _buffer_args(shape, dtype, pin, like)
    itemsize = np_dtype.itemsize if np_dtype is not None else T.empty(0, dtype=torch_dtype).element_size()
    count = 1
    for n in shape:
        count *= n
    nbytes = count * itemsize
    if nbytes > (1 << 62):
        raise AllocationError(f"tensorffi.buffer: shape {shape} of {itemsize}-byte elements is {nbytes} bytes, more "
                              f"than any machine can map")
    if nbytes:
        try:
            mm = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        except (OSError, OverflowError, MemoryError) as exc:
            raise AllocationError(f"tensorffi.buffer: cannot map {nbytes} bytes for shape {shape}: {exc}") from None
        root = np.frombuffer(mm, dtype=np_dtype if np_dtype is not None else np.uint8)
        _register_block(root)  # every view (NumPy collapses bases to it) and tensor of it keeps it alive
        arr = root.reshape(shape) if np_dtype is not None else root
        if pin:
            libc = ctypes.CDLL(None, use_errno=True)
            addr = arr.__array_interface__["data"][0]
            if libc.mlock(ctypes.c_void_p(addr), ctypes.c_size_t(nbytes)) != 0:
                err = ctypes.get_errno()
                raise NativeError(f"tensorffi.buffer: cannot pin {nbytes} bytes in RAM (mlock: errno {err}); "
                                  f"raise 'ulimit -l' or pass pin=False")
    else:
        arr = np.zeros(shape if np_dtype is not None else (0,), dtype=np_dtype if np_dtype is not None else np.uint8)
    if like == "numpy":
        return arr
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tensor = T.from_numpy(arr)
    if np_dtype is None:  # bfloat16, float8: the bytes, viewed as torch's type
        tensor = tensor.view(torch_dtype).reshape(shape)
    return tensor


def _buffer_args(shape: Any, dtype: Any, pin: Any, like: Any) -> tuple[tuple[int, ...], Any, np.dtype | None]:
    """buffer()'s arguments checked: (shape, torch dtype or None, NumPy dtype or None
    where NumPy has no such type: bfloat16, float8)."""
    if like not in ("torch", "numpy"):
        raise ArgumentTypeError(f"tensorffi.buffer: like must be 'torch' or 'numpy', got {like!r}")
    if not isinstance(pin, (bool, np.bool_)):
        raise ArgumentTypeError(f"tensorffi.buffer: pin must be True or False, got {pin!r}")
    dims = [shape] if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool) else shape
    try:
        dims = list(dims)
    except TypeError:
        raise ArgumentTypeError(f"tensorffi.buffer: shape must be an int or a sequence of ints, got "
                                f"{type(shape).__name__} {shape!r}") from None
    out = []
    for n in dims:
        if isinstance(n, (bool, np.bool_)) or not hasattr(type(n), "__index__"):
            raise ArgumentTypeError(f"tensorffi.buffer: shape {shape!r} holds {n!r}, not an integer")
        n = int(n.__index__())
        if n < 0:
            raise ShapeError(f"tensorffi.buffer: shape {shape!r} holds {n}: dimensions cannot be negative")
        if n > (1 << 62):
            raise AllocationError(f"tensorffi.buffer: shape {shape!r} holds {n}, more than any machine can map")
        out.append(n)
    torch_dtype: Any = None
    if isinstance(dtype, str) and like == "torch":
        try:
            np.dtype(dtype)
        except TypeError:  # a name only torch knows ("bfloat16", "float8_e4m3fn"): like="torch" imports it anyway
            named = getattr(T, dtype.removeprefix("torch."), None)
            if isinstance(named, T.dtype):
                dtype = named
    torch = loaded()  # a torch dtype can only come from an imported torch
    if torch is not None and isinstance(dtype, torch.dtype):
        torch_dtype = dtype
        if dtype.is_complex and dtype not in (torch.complex64, torch.complex128):
            raise DTypeError(f"tensorffi.buffer: dtype {dtype} holds no C number type")
        try:
            np_dtype: np.dtype | None = T.empty(0, dtype=dtype).numpy().dtype
        except TypeError:  # bfloat16, float8_*: NumPy has no such type
            np_dtype = None
            if like == "numpy":
                raise DTypeError(f"tensorffi.buffer: NumPy has no {dtype}; use like='torch' (or a uint8 buffer "
                                 f"viewed as you need)") from None
        return tuple(out), torch_dtype, np_dtype
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"tensorffi.buffer: dtype must be a NumPy or torch dtype (or its name), got {dtype!r}") from None
    if np_dtype.kind not in "biufc" or np_dtype.fields is not None or np_dtype.subdtype is not None:
        raise DTypeError(f"tensorffi.buffer: dtype {np_dtype} holds no C number type")
    if not np_dtype.isnative:
        raise DTypeError(f"tensorffi.buffer: dtype {np_dtype.str} is of the other byte order: C reads native numbers")
    return tuple(out), None, np_dtype


# --------------------------------------------------------------------------- #
# Memory C may keep: blocks allocated by buffer()                              #
# --------------------------------------------------------------------------- #

_BLOCKS: dict[int, tuple[int, "weakref.ref[np.ndarray]"]] = {}  # start -> (end, the block's array)
_BLOCKS_LOCK = threading.Lock()


def _register_block(arr: np.ndarray) -> None:
    start = int(arr.__array_interface__["data"][0])

    def gone(_: Any, start: int = start) -> None:
        with _BLOCKS_LOCK:
            entry = _BLOCKS.get(start)
            if entry is not None and entry[1]() is None:
                del _BLOCKS[start]

    with _BLOCKS_LOCK:
        _BLOCKS[start] = (start + arr.nbytes, weakref.ref(arr, gone))


def _block_of(addr: int, nbytes: int) -> np.ndarray | None:
    """The live :func:`buffer` block holding bytes [addr, addr + nbytes), if any."""
    with _BLOCKS_LOCK:
        for start, (end, ref) in _BLOCKS.items():
            if start <= addr and addr + nbytes <= end:
                return ref()
    return None


class Kept:
    """One array C keeps: the value the caller passed, and the :func:`buffer` block
    whose memory C writes (held, so C never writes freed memory)."""

    __slots__ = ("value", "block", "address", "written", "where")

    def __init__(self, value: Any, block: Any, address: int, written: bool, where: str) -> None:
        self.value, self.block, self.address, self.written, self.where = value, block, address, written, where

    def moved(self, where: str) -> None:
        """Raise: the tensor no longer holds the memory C writes."""
        raise LayoutError(
            f"{where}: the tensor passed as {self.where} no longer holds the memory C writes (its storage was "
            f"moved, e.g. by share_memory_() or set_(), after C kept it); C still writes the original "
            f"tensorffi.buffer memory, which the handle holds. Keep the buffer as it is while C keeps it"
        )


def kept_block(value: Any, address: int, where: str) -> Any:
    """What a handle must hold for an array C keeps: the :func:`buffer` block it lies
    in; anything else is refused, saying why its memory could move."""
    if isinstance(value, T.Tensor):
        nbytes = value.numel() * value.element_size()
    elif isinstance(value, np.ndarray):
        nbytes = value.nbytes
    else:
        raise ArgumentTypeError(f"{where}: C keeps this array after the call: pass a tensorffi.buffer(...)")
    if nbytes == 0:
        return value  # no memory for C to write
    block = _block_of(address, nbytes)
    if block is not None:
        return block
    if isinstance(value, T.Tensor):
        st = value.untyped_storage()
        if st.resizable():
            why = "an ordinary tensor's storage can be resized or freed"
        elif st.is_shared():
            why = "shared memory can be moved by torch"
        else:
            why = ("its memory belongs to another object (a bytearray can be extended, an array that owns its "
                   "data resized), which can move or free it")
    else:
        why = ("a NumPy array that owns its data can be resized (ndarray.resize) and freed" if value.flags.owndata
               else "its memory belongs to another object, which can move or free it")
    raise LayoutError(
        f"{where}: C keeps this array after the call, so it must live in memory that cannot move or be freed "
        f"while C holds it, and {why}. Allocate it with tensorffi.buffer(shape, dtype) "
        f"(like='numpy' for a NumPy array)"
    )



def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: tab completion does not offer imports (np, torch, ...)
