# SPDX-License-Identifier: MIT
"""tensorffi: C code callable on PyTorch tensors and NumPy arrays — zero-copy and checked.

>>> import torch, tensorffi
>>> x = torch.ones(4)
>>> tensorffi.core.scale_(x, 3.0)
>>> x.tolist()
[3.0, 3.0, 3.0, 3.0]

In IPython and Jupyter, ``%load_ext tensorffi`` adds the ``%%tensorffi`` cell magic
(C in a cell, bound to tensors: see :mod:`tensorffi.magic`).
"""
from __future__ import annotations

from typing import Any

from . import cache, core, errors, io, ops, physics, signal
from ._version import __version__
from .bridge import Struct, strided
from .handles import Handle, buffer
from .byo import cache_dir, compile, load
from .contract import parse_contract
from .core import get_num_threads, set_num_threads
from .library import describe
from .errors import (
    AllocationError,
    ArgumentOverflowError,
    ArgumentTypeError,
    BuildError,
    BuildWarning,
    CacheError,
    CacheWarning,
    CancelledError,
    ContractError,
    DeclarationError,
    DeviceError,
    HandleClosedError,
    DTypeError,
    LayoutError,
    LibraryMismatchError,
    NativeError,
    ParseError,
    ShapeError,
    TensorFFIError,
    WritabilityError,
)
from .library import Library


def info() -> dict[str, Any]:
    """Version and build facts: a plain dict (JSON-ready) that notebooks show as a table.

    >>> import tensorffi
    >>> facts = tensorffi.info()
    >>> facts["version"] == tensorffi.__version__
    True
    """
    from ._display import Info

    return Info(core.info())


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext tensorffi``: register the ``%%tensorffi`` cell magic and the
    ``%tensorffi`` line magic (IPython is imported only now)."""
    from .magic import load_ipython_extension as load

    load(ipython)


def __dir__() -> list[str]:
    return sorted(__all__)

__all__ = [
    "__version__",
    "core",
    "io",
    "physics",
    "signal",
    "errors",
    "ops",
    "info",
    "describe",
    "handles",
    "load_ipython_extension",
    "get_num_threads",
    "set_num_threads",
    "load",
    "compile",
    "cache_dir",
    "cache",
    "Library",
    "Struct",
    "strided",
    "Handle",
    "buffer",
    "HandleClosedError",
    "parse_contract",
    "TensorFFIError",
    "AllocationError",
    "DTypeError",
    "ArgumentTypeError",
    "DeviceError",
    "LayoutError",
    "WritabilityError",
    "ShapeError",
    "ArgumentOverflowError",
    "ContractError",
    "DeclarationError",
    "BuildError",
    "LibraryMismatchError",
    "CacheError",
    "BuildWarning",
    "CacheWarning",
    "NativeError",
    "CancelledError",
    "ParseError",
]

del annotations
