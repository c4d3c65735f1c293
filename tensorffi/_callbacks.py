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

from typing import Any, Callable

from ._lib import ffi, lib

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


@ffi.def_extern(error=1, onerror=_on_progress_error)
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

    def __enter__(self) -> "CallbackScope":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.close()

    def report(self, done: int, total: int) -> int:
        if self.error is not None:
            return 1
        try:
            if self._sink is not None:
                self._sink(done, total)
            return 0
        except BaseException as exc:  # noqa: BLE001 - re-raised after C returns
            self.error = exc
            return 1

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call bound function ``fn``; an exception stored by a report wins over the
        status error it caused (Ctrl-C re-raises KeyboardInterrupt, not a C error)."""
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
