# SPDX-License-Identifier: MIT
"""Build facts, threads, and the bridge's own example kernels."""
from __future__ import annotations

import os
from typing import Any

from ._callbacks import CallbackScope
from ._lib import DECLS, ffi, last_error, lib, native
from ._shims import SHIM_PREFIX
from ._version import __version__
from .bridge import Struct
from .library import Library

#: The native library's functions bound through the bridge without contracts
#: (``int`` results are statuses). Kernel modules bind with contracts instead.
raw = Library(
    ffi, lib, DECLS, default_returns="status", error_message=last_error, description="tensorffi._native",
    shim_lookup=lambda name: getattr(lib, SHIM_PREFIX + name, None), native=True,
)

# The process-wide thread count: set_num_threads(), else computed once from
# $TENSORFFI_NUM_THREADS or the CPUs this process may use. A forked child recomputes
# it (its CPU affinity may differ); C keeps no thread pool, so nothing else is reset.
_thread_state: list[int | None] = [None, None]  # [set by the user, default]


def _default_threads() -> int:
    env = os.environ.get("TENSORFFI_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return int(lib.tf_cpu_count())


def _reset_after_fork() -> None:
    _thread_state[1] = None


os.register_at_fork(after_in_child=_reset_after_fork)


def get_num_threads() -> int:
    """Threads our kernels use: set_num_threads(), else $TENSORFFI_NUM_THREADS, else all CPUs."""
    n = _thread_state[0] or _thread_state[1]
    if n:
        return n
    _thread_state[1] = n = _default_threads()
    return n


def set_num_threads(n: int | None) -> None:
    """Set the thread count of tensorffi's kernels for the whole process (None: default)."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"set_num_threads expects a positive integer or None, got {n!r}")
    _thread_state[0] = n


def resolve_threads(threads: int | None) -> int:
    """A kernel's ``threads=`` argument: None means get_num_threads()."""
    if threads is None:
        return get_num_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    return threads


def info() -> dict[str, Any]:
    """Version and build facts of the native module.

    >>> import tensorffi
    >>> sorted(tensorffi.info())[:3]
    ['build_flags', 'compiler', 'cpu_count']
    """
    level = int(lib.tf_simd_level())
    return {
        "version": __version__,
        "native_version": ffi.string(lib.tf_version()).decode(),
        "compiler": ffi.string(lib.tf_build_compiler()).decode(),
        "build_flags": ffi.string(lib.tf_build_flags()).decode(),
        "native_build": bool(lib.tf_build_native()),
        "simd": ffi.string(lib.tf_simd_name(level)).decode(),
        "cpu_count": int(lib.tf_cpu_count()),
        "threads": get_num_threads(),
    }


def struct(type_name: str, **fields: Any) -> Struct:
    """A struct of the native library whose pointer fields may hold tensors."""
    return Struct(ffi, DECLS, type_name, **fields)


# ---- the bridge's example kernels (used by tests, the demo and benchmarks) ----

scale_ = native("tf_core_scale_f32", "x: [n]")
scale_.__doc__ = """x *= a, in place, for a float32 tensor or array (a bridge example).

>>> import torch, tensorffi
>>> x = torch.ones(3); tensorffi.core.scale_(x, 2.0); x.tolist()
[2.0, 2.0, 2.0]
"""

axpy_ = native("tf_core_axpy_f64", "x: [n]; y: [n]")
axpy_.__doc__ = """y += a * x for float64 vectors of the same length (a bridge example)."""

iota = native("tf_core_iota_i64", "x: out [n]")
iota.__doc__ = """A new int64 tensor [0, 1, ..., n-1]: ``iota(n=5)`` (an out-allocation example)."""

_scaled = native("tf_core_scaled_f32", "x: [n]; y: out [n]")


def scaled(x: Any, a: float, *, threads: int | None = None) -> Any:
    """A new float32 tensor (or array) ``a * x``, computed on ``threads`` threads.

    The bridge's out-of-place, multi-threaded example (also the operator
    ``torch.ops.tensorffi.scaled``, which is differentiable).

    >>> import torch, tensorffi
    >>> tensorffi.core.scaled(torch.tensor([1.0, 2.0]), 3.0).tolist()
    [3.0, 6.0]
    """
    return _scaled(x, a, resolve_threads(threads))


_span_sum = native("tf_core_span_sum", "out: out [1]")


def span_sum(span: Struct) -> float:
    """Sum of the float32 values a ``tf_core_span`` struct points to."""
    return float(_span_sum(span)[0])


_count = native("tf_core_count", "reached: out [1]")


def count(total: int, steps: int, progress: Any = None) -> int:
    """Count to ``total`` in ``steps`` C-side steps, reporting each (a callback example).

    >>> import tensorffi
    >>> tensorffi.core.count(100, 4)
    100
    """
    with CallbackScope(progress) as scope:
        reached = scope.call(_count, total, steps, scope.fn, scope.handle)
    return int(reached[0])


__all__ = [
    "info", "get_num_threads", "set_num_threads", "resolve_threads", "struct", "raw",
    "scale_", "axpy_", "iota", "scaled", "span_sum", "count",
]
