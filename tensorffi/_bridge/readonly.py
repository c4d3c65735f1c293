# SPDX-License-Identifier: MIT
"""Torch tensors over read-only memory: noted where torch makes them, refused where C writes.

NumPy arrays carry a writeable flag; torch tensors carry none. ``torch.frombuffer(b)``
of an immutable ``bytes``, a ``memoryview`` of one or a read-only ``mmap``, and
``torch.from_numpy(a)`` of a read-only array make tensors that torch lets anyone write
(it only warns, once per process: "The given buffer is not writable"). C writing
through one would change an immutable ``bytes`` object, or die of SIGSEGV on a
read-only mapping.

How the bridge knows: when torch is imported (or at ``import tensorffi``, if torch
already is), :func:`install` wraps ``torch.frombuffer`` and ``torch.from_numpy``;
the wrappers call torch's own function and, where the buffer or array is read-only,
note the address range of the new tensor's storage. The note lives exactly as long as
that storage (a ``weakref.finalize`` on the storage object, which torch keeps alive as
long as any tensor uses the storage). Both call paths refuse, where C writes, any
tensor whose memory overlaps a noted range (:class:`~tensorffi.WritabilityError`),
which covers every view, slice and reshape of such a tensor, NumPy views of it
(``t.numpy()``, ``np.asarray(t)``), and another ``frombuffer`` of the same bytes.
Reading stays allowed.

Cost: nothing on a call while no noted range is alive (the native path reads one
atomic counter); while one is, one Python call (:func:`overlaps`, a scan of the live
ranges) per tensor C writes. ``torch.frombuffer`` and ``torch.from_numpy`` cost one
writability test more (``memoryview(b).readonly``, ``a.flags.writeable``: about 0.1 µs
on a 0.5 µs ``from_numpy``); under ``torch.compile`` they note nothing (fake tensors
have no memory).

What is not detected (torch keeps no record of it): read-only memory that reached
torch some other way — ``torch.as_tensor``/``torch.asarray``/``torch.tensor`` with
shared memory of a read-only array, ``torch.from_dlpack``, a C++ extension's
``from_blob`` — or a tensor made by ``torch.frombuffer``/``torch.from_numpy`` before
tensorffi was imported (import tensorffi first), or by a reference to the original
function taken before that (``from torch import frombuffer``). Those stay as writable
as torch makes them.

Why not ask torch or the OS at call time instead: torch's ``tensor_frombuffer``
(torch/csrc/utils/tensor_new.cpp) asks the buffer for a writable view, warns when it
gets a read-only one, and keeps the buffer object only inside the storage's deleter,
which Python cannot reach; the storage of a read-only buffer then looks exactly like
that of ``torch.from_numpy`` of a writable array (``resizable()`` False for both).
The OS knows only read-only *mappings* (a ``bytes`` object lives in writable heap
pages), and asking it means parsing ``/proc/self/maps`` on every written call or a
probe with side effects.
"""
from __future__ import annotations

import functools
import itertools
import threading
import weakref
from typing import Any, Callable

__all__ = ["install", "note", "overlaps", "ranges", "on_change"]

# reentrant: a storage's finalizer (_forget) may run in a garbage collection that an
# allocation in note() or _publish() set off, on the thread that holds the lock
_lock = threading.RLock()
_ranges: dict[int, tuple[int, int]] = {}  # note key -> [lo, hi) of a read-only storage
_table: tuple[tuple[int, int], ...] = ()  # the live ranges (replaced whole: readers need no lock)
_keys = itertools.count()
_listeners: list[Callable[[int], None]] = []  # the native path's counter (lower.py)
_installed = {"done": False}


def ranges() -> tuple[tuple[int, int], ...]:
    """The address ranges ``[lo, hi)`` of read-only memory live torch storages view."""
    return _table


def overlaps(addr: int, nbytes: int) -> bool:
    """Whether ``[addr, addr + nbytes)`` shares a byte with a noted read-only range."""
    end = addr + nbytes
    for lo, hi in _table:
        if addr < hi and lo < end:
            return True
    return False


def on_change(fn: Callable[[int], None]) -> None:
    """Call ``fn(number of live ranges)`` now and whenever it changes."""
    with _lock:
        _listeners.append(fn)
        fn(len(_table))


def _publish() -> None:
    global _table
    while True:
        try:
            _table = tuple(_ranges.values())
            break
        except RuntimeError:  # a finalizer changed the dict meanwhile (see _lock): again
            continue
    for fn in _listeners:
        fn(len(_table))


def _forget(key: int) -> None:
    with _lock:
        if _ranges.pop(key, None) is not None:
            _publish()


def note(t: Any) -> None:
    """Note the memory of tensor ``t``'s storage as read-only, while that storage lives."""
    st = t.untyped_storage()
    lo, n = st.data_ptr(), st.nbytes()
    if not lo or not n:
        return
    key = next(_keys)
    with _lock:
        _ranges[key] = (lo, lo + n)
        _publish()
    weakref.finalize(st, _forget, key)


def _writable_buffer(buf: Any) -> bool:
    try:
        with memoryview(buf) as m:
            return not m.readonly
    except (TypeError, ValueError, BufferError):
        return True  # not a buffer torch read: nothing to note


def install(torch: Any) -> None:
    """Wrap ``torch.frombuffer`` and ``torch.from_numpy`` (once; see the module docstring)."""
    with _lock:
        if _installed["done"]:
            return
        _installed["done"] = True
    frombuffer, from_numpy = torch.frombuffer, torch.from_numpy
    compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)

    @functools.wraps(frombuffer)
    def frombuffer_noting(buffer: Any, *args: Any, **kwargs: Any) -> Any:
        t = frombuffer(buffer, *args, **kwargs)
        if type(buffer) is not bytearray and not compiling() and not _writable_buffer(buffer):
            note(t)
        return t

    @functools.wraps(from_numpy)
    def from_numpy_noting(ndarray: Any) -> Any:
        t = from_numpy(ndarray)
        # (torch.compile traces this: the flag first, as torch.compile(fullgraph=True) can)
        if not ndarray.flags.writeable and not compiling():
            note(t)
        return t

    frombuffer_noting.__tensorffi_original__ = frombuffer  # type: ignore[attr-defined]
    from_numpy_noting.__tensorffi_original__ = from_numpy  # type: ignore[attr-defined]
    torch.frombuffer = frombuffer_noting
    torch.from_numpy = from_numpy_noting
