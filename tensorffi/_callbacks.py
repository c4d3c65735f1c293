# SPDX-License-Identifier: MIT
"""C -> Python calls: progress reports and cancellation.

A long-running kernel takes ``(tf_progress_fn fn, void *handle)`` and calls
``fn(handle, done, total)`` from the thread that called it. ``fn`` is the
``extern "Python"`` function ``tf_py_progress`` below; ``handle`` is a cffi handle to
a :class:`CallbackScope`. An exception raised while reporting (including
``KeyboardInterrupt`` from Ctrl-C) is stored, the callback asks C to stop, and the
exception is re-raised to the caller once C has returned.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np

from ._lib import ffi, lib
from ._torch import T
from .errors import StorageChangedError

ProgressArg = "bool | Callable[[int, int], object] | None"


def _on_progress_error(exc_type: Any, exc_value: BaseException | None, tb: Any) -> int:
    """An exception escaped tf_py_progress itself, outside CallbackScope.report: most
    often Ctrl-C, whose KeyboardInterrupt Python raises at the callback's first
    bytecode. Without this, cffi would print it, return 0 and let C run on, losing
    the interrupt. Store it in the scope (found through the callback's `handle`
    argument, as cffi's documentation suggests) and ask C to stop."""
    frame = tb.tb_frame if tb is not None else None
    handle = frame.f_locals.get("handle") if frame is not None else None
    if handle is not None and exc_value is not None:
        scope: CallbackScope = ffi.from_handle(handle)
        if scope.error is None:
            scope.error = exc_value
    return 1


@ffi.def_extern(error=1, onerror=_on_progress_error)  # type: ignore[untyped-decorator]
def tf_py_progress(handle: Any, done: int, total: int) -> int:
    scope: CallbackScope = ffi.from_handle(handle)
    return scope.report(done, total)


class CallbackScope:
    """One C call's receiver of progress reports.

    ``progress`` is ``None`` (reports only check for Ctrl-C), ``True`` (a progress
    bar that fits the host, see :mod:`tensorffi._progress`),
    or a callable ``progress(done, total)``.

    >>> with CallbackScope(progress=None) as scope:
    ...     pass  # pass scope.fn, scope.handle to a kernel; then scope.check()
    """

    def __init__(self, progress: Any = None, *, desc: str | None = None, unit: str = "it", scale: float = 1.0) -> None:
        self.error: BaseException | None = None
        self._bar: Any = None
        self._desc = desc
        self._unit = unit
        self._scale = scale
        if progress is True:  # the bar that fits the host (tensorffi._progress), integer counts
            from ._progress import Bar

            self._bar = Bar(desc, unit, unit_scale=scale != 1.0, scale=scale)
            self._sink: Callable[[int, int], object] | None = self._bar
        elif progress in (None, False):
            self._sink = None
        elif callable(progress):
            self._sink = progress
        else:
            raise TypeError(f"progress must be True, False, None or a callable(done, total), got {progress!r}")
        self.handle = ffi.new_handle(self)
        self.fn = lib.tf_py_progress
        self._args: tuple[Any, ...] = ()
        self._guards: list[tuple[Any, int, int, str]] | None = None

    def __enter__(self) -> "CallbackScope":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.close()
        # The handle makes the scope a reference cycle, freed only by the garbage
        # collector: holding the call's arguments until then kept every output of a
        # long sosfilt alive, so each call got fresh memory to fault in (3x slower).
        self._args = ()
        self._guards = None

    def report(self, done: int, total: int) -> int:
        if self.error is not None:
            return 1
        if self._sink is None:
            return 0
        if self._guards is None:
            self._guards = _storage_guards(self._args)
        try:
            self._sink(done, total)
        except BaseException as exc:  # noqa: BLE001 - re-raised after C returns
            self.error = exc
            return 1
        # C runs on with the pointers it was given: if the callback resized, freed or
        # replaced a storage behind one of them, C must stop before touching it.
        for storage, ptr, nbytes, what in self._guards:
            if storage.data_ptr() != ptr or storage.nbytes() != nbytes:
                self.error = StorageChangedError(
                    f"the progress callback changed the storage of {what}, which the C call was using "
                    f"({nbytes} bytes at {ptr:#x}, now {storage.nbytes()} bytes at {storage.data_ptr():#x}: "
                    "resize_, set_ or untyped_storage().resize_); the call was stopped"
                )
                return 1
        return 0

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call bound function ``fn``; an exception stored by a report wins over the
        status error it caused (Ctrl-C re-raises KeyboardInterrupt, not a C error)."""
        self._args = (fn, args, kwargs)
        try:
            result = fn(*args, **kwargs)
        except Exception:
            self.check()
            raise
        self.check()
        return result

    def check(self) -> None:
        """Re-raise the exception a report stored, if any."""
        if self.error is not None:
            err, self.error = self.error, None
            raise err


def _storage_guards(args: tuple[Any, ...]) -> list[tuple[Any, int, int, str]]:
    """(storage, data_ptr, nbytes, description) of every torch storage behind the
    arguments of a call (tensors, and NumPy arrays that view a tensor's memory).
    Holding the storage object keeps its memory alive if the tensor is pointed
    elsewhere (set_); a resize is seen as a new data_ptr or size."""
    if not args:
        return []
    fn, positional, keywords = args
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    guards = []
    named = [(names[i] if i < len(names) else f"argument {i}", a) for i, a in enumerate(positional)]
    named += list(keywords.items())
    for name, value in named:
        base = value
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        if isinstance(base, T.Tensor):
            storage = base.untyped_storage()
            what = f"{name} ({type(value).__name__} of shape {tuple(value.shape)})"
            guards.append((storage, storage.data_ptr(), storage.nbytes(), what))
    return guards
