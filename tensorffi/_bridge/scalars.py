# SPDX-License-Identifier: MIT
"""Scalar arguments: integers within their C type, floats a C float can hold, sizes."""
from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from .._torch import T, is_dtype
from ..errors import ArgumentOverflowError, ArgumentTypeError, ShapeError


_MAX_SIZE = (1 << 63) - 1  # sizes are int64_t


def _integer(v: Any) -> int | None:
    """``v`` as a Python int if it is an integer (``int``, ``bool``, a NumPy integer or
    bool, anything with ``__index__`` such as a 0-d integer tensor), else None. cffi
    would truncate anything with ``__int__`` (``np.float32(1.5)``, a 0-d float tensor,
    ``Fraction``, ``Decimal``), so only these are handed to an integer parameter."""
    if isinstance(v, (int, np.integer, np.bool_)):
        return int(v)
    try:
        return operator.index(v)
    except Exception:
        return None


def _is_bool(v: Any) -> bool:
    """A bool of any kind: not a size, even where it is an integer."""
    if isinstance(v, (bool, np.bool_)):
        return True
    dt = getattr(v, "dtype", None)
    return dt is not None and (is_dtype(dt, "bool") or (isinstance(dt, np.dtype) and dt == np.bool_))


def _checked_int(v: Any, where: str, ctype: str, int_range: tuple[int, int]) -> int:
    i = _integer(v)
    if i is None:
        raise ArgumentTypeError(f"{where} ({ctype}) expects an integer, got {type(v).__name__} {v!r}")
    lo, hi = int_range
    if not lo <= i <= hi:
        raise ArgumentOverflowError(
            f"{where} ({ctype}) must be in [{lo}, {hi}], got {i}: it does not fit and would be truncated"
        )
    return i


def _checked_float(v: Any, where: str, ctype: str, bits: int) -> float:
    """``v`` as a Python float for a C ``float``/``double``: a number (not a string),
    and finite values that the C type cannot hold (``1e300`` or ``1e-50`` for a
    ``float``) are an :class:`ArgumentOverflowError`; NaN and infinities pass."""
    if isinstance(v, (str, bytes, bytearray)):  # float("3") parses; C takes no strings
        raise ArgumentTypeError(f"{where} ({ctype}) expects a number, got {type(v).__name__}")
    if (
        isinstance(v, complex)
        or (isinstance(v, (np.generic, np.ndarray)) and v.dtype.kind == "c")
        or (isinstance(v, T.Tensor) and v.is_complex())
    ):
        raise ArgumentTypeError(f"{where} ({ctype}) expects a real number, got a complex {type(v).__name__}")
    try:
        f = float(v)
    except OverflowError:
        raise ArgumentOverflowError(f"{where} ({ctype}) cannot hold {v!r}: it is out of range") from None
    except Exception:
        raise ArgumentTypeError(f"{where} ({ctype}) expects a number, got {type(v).__name__}") from None
    if bits == 32 and math.isfinite(f) and f != 0.0:
        r = float(np.float32(f)) if abs(f) <= 1e39 else math.inf
        if math.isinf(r):
            raise ArgumentOverflowError(f"{where} ({ctype}) cannot hold {f!r}: it is beyond float32's range")
        if r == 0.0:
            raise ArgumentOverflowError(f"{where} ({ctype}) cannot hold {f!r}: it is below float32's smallest value")
    return f



def _size_value(v: Any, where: str, ctype: str, int_range: tuple[int, int] | None) -> int:
    """A length passed for a size: an integer (not a bool, not a float equal to one),
    >= 0, that fits the parameter's C type (checked before anything is allocated)."""
    i = None if _is_bool(v) else _integer(v)
    if i is None:
        raise ArgumentTypeError(f"{where} ({ctype}) expects an integer, got {type(v).__name__} {v!r}")
    if i < 0:
        raise ShapeError(f"{where} is a size and must be >= 0, got {i}")
    if int_range is not None and i > int_range[1]:
        raise ArgumentOverflowError(
            f"{where} ({ctype}) must be in [{int_range[0]}, {int_range[1]}], got {i}: it does not fit and would be truncated"
        )
    return i


def _named_size(v: Any, fname: str, sym: str) -> int:
    i = None if _is_bool(v) else _integer(v)
    if i is None or not 0 <= i <= _MAX_SIZE:
        raise ShapeError(f"{fname}(): {sym}= must be an integer in [0, {_MAX_SIZE}], got {v!r}")
    return i


