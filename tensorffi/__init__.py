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

import importlib as _importlib
from typing import Any

from . import _load, _torch, errors  # noqa: F401 (_load: a stale native build fails here)
from ._version import __version__
from .errors import (
    AllocationError,
    ArgumentOverflowError,
    ArgumentTypeError,
    ArgumentValueError,
    BuildError,
    BuildWarning,
    UncheckedWarning,
    CacheError,
    CacheWarning,
    CancelledError,
    ContractError,
    DeclarationError,
    DeviceError,
    HandleClosedError,
    DTypeError,
    GradError,
    LayoutError,
    LibraryMismatchError,
    NativeError,
    ParseError,
    ShapeError,
    TensorFFIError,
    WritabilityError,
)

# Everything else is imported where it is first used (PEP 562): ``import tensorffi``
# costs the version and the error classes only, so ``tensorffi --version`` and a
# NumPy-only user never pay for torch (see tensorffi._torch).
_SUBMODULES = {"cache", "core", "io", "ops", "physics", "signal", "handles"}
_LAZY = {
    "Struct": "bridge", "strided": "bridge",
    "Handle": "handles", "buffer": "handles",
    "cache_dir": "byo", "compile": "byo", "load": "byo",
    "from_ctypes": "_ctypes",
    "parse_contract": "contract",
    "get_num_threads": "_threads", "set_num_threads": "_threads",
    "describe": "library", "Library": "library",
}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def info() -> dict[str, Any]:
    """Version and build facts: a plain dict (JSON-ready) that notebooks show as a table.

    >>> import tensorffi
    >>> facts = tensorffi.info()
    >>> facts["version"] == tensorffi.__version__
    True
    """
    from . import core
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
    "from_ctypes",
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
    "ArgumentValueError",
    "DeviceError",
    "LayoutError",
    "WritabilityError",
    "GradError",
    "ShapeError",
    "ArgumentOverflowError",
    "ContractError",
    "DeclarationError",
    "BuildError",
    "LibraryMismatchError",
    "CacheError",
    "BuildWarning",
    "UncheckedWarning",
    "CacheWarning",
    "NativeError",
    "CancelledError",
    "ParseError",
]

# torch's operators: now if torch is imported, else when it is
_torch.install_hook()
# tensors over read-only buffers (torch.frombuffer(bytes)) noted where torch makes them
from ._bridge import readonly as _readonly  # noqa: E402

_torch.when_imported(_readonly.install)

del annotations
