# SPDX-License-Identifier: MIT
"""Glue shared by tensorffi's own kernel modules (signal, physics, io, core).

One place for what every kernel family needs around its bound C functions:

* :func:`variants`: the dtype variants of a native function, found by the naming
  convention ``tf_<module>_<verb>_<suffix>`` (``_f32`` float32, ``_f64`` float64,
  ``_c64`` complex64 ...), all bound with one contract;
* :func:`constants`: enum constants read from the native module (``TF_SIGNAL_PAD_*``),
  so Python never repeats a number that C defines;
* the caller's kind (torch tensor or NumPy array) and dtype names;
* scalar checks that name the function and the argument.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable

import numpy as np

from ._lib import lib, native
from ._torch import T
from .errors import ArgumentOverflowError, ArgumentTypeError, DTypeError

#: Suffix of a native function's name -> the dtype it computes in.
SUFFIX_DTYPES: dict[str, str] = {
    "f16": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "f64": "float64",
    "c64": "complex64",
    "c128": "complex128",
    "i8": "int8",
    "u8": "uint8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
}


def variants(prefix: str, contract: str | None = None) -> dict[str, Callable[..., Any]]:
    """Every native function ``<prefix>_<suffix>``, bound with ``contract``, by dtype name.

    >>> sorted(variants("tf_physics_energy"))
    ['float32', 'float64']
    """
    found = {}
    for suffix, dtype in SUFFIX_DTYPES.items():
        name = f"{prefix}_{suffix}"
        if hasattr(lib, name):
            found[dtype] = native(name, contract)
    if not found:
        raise LookupError(f"the native module has no function named {prefix}_<dtype suffix>")
    return found


def constants(prefix: str) -> dict[str, int]:
    """Enum constants ``<prefix>NAME`` of the native module, by lower-case ``name``.

    >>> constants("TF_PHYSICS_")
    {'leapfrog': 0, 'symplectic_euler': 1}
    """
    out = {name[len(prefix):].lower(): int(getattr(lib, name)) for name in dir(lib) if name.startswith(prefix)}
    if not out:
        raise LookupError(f"the native module defines no constant {prefix}*")
    return dict(sorted(out.items(), key=lambda kv: kv[1]))


# --------------------------------------------------------------------------- #
# The caller's kind                                                            #
# --------------------------------------------------------------------------- #


def kind_of(x: Any) -> str | None:
    """``"torch"`` for a tensor, ``"numpy"`` for an ndarray, else None."""
    if isinstance(x, T.Tensor):
        return "torch"
    if isinstance(x, np.ndarray):
        return "numpy"
    return None


def dtype_name(x: Any) -> str:
    """``"float32"`` for a float32 tensor or array."""
    return str(x.dtype).removeprefix("torch.")


def describe(x: Any) -> str:
    """A short description of an argument for error messages."""
    kind = kind_of(x)
    if kind is None:
        return type(x).__name__
    cls = "torch.Tensor" if kind == "torch" else "numpy.ndarray"
    return f"{cls}(dtype={dtype_name(x)}, shape={tuple(x.shape)})"


# --------------------------------------------------------------------------- #
# Scalars                                                                      #
# --------------------------------------------------------------------------- #


def check_int(fname: str, name: str, value: Any, *, minimum: int | None = None) -> int:
    """``value`` as an int (not a bool, never a truncated float), ``>= minimum``."""
    if isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{fname}(): {name} must be an integer, got bool {value!r}")
    try:
        i = operator.index(value)
    except TypeError:
        raise ArgumentTypeError(f"{fname}(): {name} must be an integer, got {type(value).__name__} {value!r}") from None
    if minimum is not None and i < minimum:
        raise ValueError(f"{fname}(): {name} must be >= {minimum}, got {i}")
    if i > (1 << 63) - 1:
        raise ArgumentOverflowError(f"{fname}(): {name} = {i} does not fit in int64")
    return i


def check_real(fname: str, name: str, value: Any, *, finite: bool = True) -> float:
    """``value`` as a float (not a bool or a string); finite unless ``finite=False``."""
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise ArgumentTypeError(f"{fname}(): {name} must be a real number, got {type(value).__name__} {value!r}")
    if isinstance(value, complex) or (isinstance(value, np.generic) and np.iscomplexobj(value)):
        raise ArgumentTypeError(f"{fname}(): {name} must be a real number, got complex {value!r}")
    try:
        f = float(value)
    except OverflowError:
        raise ArgumentOverflowError(f"{fname}(): {name} = {value!r} does not fit in a double") from None
    except Exception:
        raise ArgumentTypeError(f"{fname}(): {name} must be a real number, got {type(value).__name__}") from None
    if finite and not math.isfinite(f):
        raise ValueError(f"{fname}(): {name} must be finite, got {f}")
    return f


def require_dtype(fname: str, name: str, x: Any, allowed: tuple[str, ...]) -> str:
    """The dtype name of ``x``, which must be one of ``allowed``."""
    dt = dtype_name(x)
    if dt not in allowed:
        raise DTypeError(f"{fname}(): {name} must have dtype {' or '.join(allowed)}, got {dt}")
    return dt


def _bind_torch() -> bool:
    """torch's dispatch-state queries, bound at the first :func:`eager_plain` call (there
    is a tensor then, so torch is imported): the module never imports torch itself."""
    global _PLAIN_TYPES, _grad_enabled, _dispatch_modes, _function_modes, _functorch_active, _compiling
    import torch

    _PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)
    _grad_enabled = torch.is_grad_enabled
    _dispatch_modes = torch._C._len_torch_dispatch_stack
    _function_modes = torch._C._is_torch_function_mode_enabled
    _functorch_active = torch._C._are_functorch_transforms_active
    _compiling = torch.compiler.is_compiling
    return bool(_compiling())


_PLAIN_TYPES: tuple[type, ...] = ()
_grad_enabled: Callable[[], bool] = bool
_dispatch_modes: Callable[[], int] = int
_function_modes: Callable[[], bool] = bool
_functorch_active: Callable[[], bool] = bool
_compiling: Callable[[], bool] = _bind_torch  # the first call binds them all


def eager_plain(*tensors: Any) -> bool:
    """Whether an operator call with these tensors would run its CPU implementation
    and nothing else: plain eager CPU tensors, no autograd history to record, no
    dispatch or function mode, no functorch transform, not tracing. The public
    kernel functions then call that implementation themselves, without the dispatcher's
    round trip (several microseconds); everything else goes through the operator."""
    if _compiling() or _dispatch_modes() or _function_modes() or _functorch_active():
        return False
    grad = _grad_enabled()
    for t in tensors:
        if t is not None and (type(t) not in _PLAIN_TYPES or (grad and t.requires_grad)):
            return False
    return True


__all__: list[str] = []
