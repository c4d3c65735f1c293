# SPDX-License-Identifier: MIT
"""Type information for the compiled module (built by build_ffi.py): cffi objects are untyped."""
from typing import Any

ffi: Any
lib: Any


def __getattr__(name: str) -> Any: ...
