# SPDX-License-Identifier: MIT
"""Build facts and the bridge's own example kernels (the thread policy: tensorffi._threads)."""
from __future__ import annotations

from typing import Any

from ._callbacks import CallbackScope
from ._lib import DECLS, ffi, last_error, lib, native, struct
from ._shims import SHIM_PREFIX
from ._threads import get_num_threads, resolve_threads, set_num_threads
from ._version import __version__
from ._bridge import lower as _lower
from .bridge import Struct
from .library import Library

#: The native library's functions bound through the bridge without contracts
#: (``int`` results are statuses). Kernel modules bind with contracts instead.
raw = Library(
    ffi, lib, DECLS, default_returns="status", error_message=last_error, description="tensorffi._native",
    shim_lookup=lambda name: getattr(lib, SHIM_PREFIX + name, None), native=True, trampolines=True,
)


def info() -> dict[str, Any]:
    """Version and build facts of the native module.

    >>> import tensorffi
    >>> sorted(tensorffi.info())[:3]
    ['bridge', 'build_flags', 'compiler']
    """
    level = int(lib.tf_simd_level())
    threads = get_num_threads()
    facts: dict[str, Any] = {
        "version": __version__,
        "native_version": ffi.string(lib.tf_version()).decode(),
        "compiler": ffi.string(lib.tf_build_compiler()).decode(),
        "build_flags": ffi.string(lib.tf_build_flags()).decode(),
        "native_build": bool(lib.tf_build_native()),
        "simd": ffi.string(lib.tf_simd_name(level)).decode(),
        "cpu_count": int(lib.tf_cpu_count()),
        "threads": threads,
        # where a run of that many threads gets them: the calling thread alone, the
        # host OpenMP team (torch's intra-op threads) or tensorffi's own pool
        "threads_from": ("calling thread", "tensorffi pool", "host OpenMP (torch)")[int(lib.tf_runtime_backend(threads))],
        # how bound functions read their arguments: the native call path (C, through the
        # DLPack exchange API and NumPy's array struct) or the Python one
        "bridge": _lower.describe(),
    }
    # per kernel module: the SIMD level its kernels run at (tf_<module>_simd)
    for name in sorted(dir(lib)):
        if name.startswith("tf_") and name.endswith("_simd") and name != "tf_simd_name":
            facts[f"simd_{name[3:-5]}"] = ffi.string(lib.tf_simd_name(int(getattr(lib, name)()))).decode()
    return facts


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


# --------------------------------------------------------------------------- #
# tensorffi's own operators: torch.ops.tensorffi.scale_, axpy_, iota, scaled     #
# --------------------------------------------------------------------------- #


def _register_ops() -> None:
    import torch

    from . import core
    from .ops import register

    register(core.scale_, "tensorffi::scale_")
    register(core.axpy_, "tensorffi::axpy_")
    register(core.iota, "tensorffi::iota")

    def scaled_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.a = inputs[1]

    def scaled_backward(ctx: Any, grad: Any) -> tuple[Any, None]:
        return torch.ops.tensorffi.scaled(grad, ctx.a), None

    register(
        core._scaled,
        "tensorffi::scaled",
        hidden={"nthreads": core.get_num_threads},
        backward=scaled_backward,
        setup_context=scaled_setup,
    )


_ops_registered = [False]


def _ensure_ops() -> None:
    """Register this module's operators once (tensorffi._torch calls it when torch is in use)."""
    if not _ops_registered[0]:
        _ops_registered[0] = True
        _register_ops()


__all__ = [
    "info", "get_num_threads", "set_num_threads", "resolve_threads", "struct", "raw",
    "scale_", "axpy_", "iota", "scaled", "span_sum", "count",
]


def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: tab completion does not offer imports (np, torch, ...)
