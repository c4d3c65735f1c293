# SPDX-License-Identifier: MIT
"""The native module, loaded and version-checked (at ``import tensorffi``: a stale or
missing build is an ImportError there, not later; this costs about a millisecond).
Its declarations are parsed in :mod:`tensorffi._lib`."""
from __future__ import annotations

from typing import Any

from ._version import __version__

__all__ = ["ffi", "lib"]

try:
    from . import _native
except ImportError as exc:  # pragma: no cover - exercised only on broken installs
    raise ImportError(
        "tensorffi's native module (tensorffi._native) is not built or cannot be loaded: "
        f"{exc}. Install the package with 'pip install .' (or 'pip install -e .' for "
        "development) so that build_ffi.py compiles it."
    ) from exc

ffi: Any = _native.ffi
lib: Any = _native.lib

_built = ffi.string(lib.tf_version()).decode()
if _built != __version__:  # pragma: no cover - exercised with a stale build in test_build
    raise ImportError(
        f"tensorffi._native was built for version {_built}, but the Python package is "
        f"{__version__}: the in-place build is stale. Rebuild it with 'pip install -e .'."
    )
