# SPDX-License-Identifier: MIT
"""The one place where tensorffi turns generated Python source into functions.

Generated sources are registered with :mod:`linecache` under a unique file name
(``<tensorffi call: scale_into #3>``), so tracebacks and debuggers show their real
lines, and ``inspect.getsource`` works on them; the source is also kept on the
function as ``__tensorffi_source__``.
"""
from __future__ import annotations

import itertools
import linecache
import threading
from typing import Any, Callable

_counter = itertools.count(1)
_lock = threading.Lock()


def build(source: str, namespace: dict[str, Any], *, function: str, label: str) -> Callable[..., Any]:
    """Compile ``source`` (which defines ``function``) in ``namespace`` and return it.

    ``label`` names the generated code in tracebacks ("call: scale_into").
    """
    with _lock:
        filename = f"<tensorffi {label} #{next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    fn: Callable[..., Any] = namespace[function]
    fn.__tensorffi_source__ = source  # type: ignore[attr-defined]
    return fn


__all__ = ["build"]
