# SPDX-License-Identifier: MIT
"""tensorffi: C code callable on PyTorch tensors and NumPy arrays — zero-copy and checked.

>>> import torch, tensorffi
>>> x = torch.ones(4)
>>> tensorffi.core.scale_(x, 3.0)
>>> x.tolist()
[3.0, 3.0, 3.0, 3.0]
"""
from __future__ import annotations

from . import cache, core, errors, io, ops, physics, signal
from ._version import __version__
from .bridge import Struct, strided
from .handles import Handle, buffer
from .byo import cache_dir, compile, load
from .contract import parse_contract
from .core import get_num_threads, info, set_num_threads
from .errors import (
    AllocationError,
    ArgumentOverflowError,
    ArgumentTypeError,
    BuildError,
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

__all__ = [
    "__version__",
    "core",
    "io",
    "physics",
    "signal",
    "errors",
    "ops",
    "info",
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
    "NativeError",
    "CancelledError",
    "ParseError",
]
