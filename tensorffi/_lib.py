# SPDX-License-Identifier: MIT
"""The native module's declarations and its functions, bound on demand (loaded and
version-checked in :mod:`tensorffi._load`)."""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable

from . import errors
from ._decl import parse_declarations
from ._load import ffi as ffi, lib as lib

if TYPE_CHECKING:
    from .bridge import Struct

DECLS = parse_declarations(ffi.string(lib.tf_cdefs()).decode())
errors.register_codes({name: int(getattr(lib, name)) for name in dir(lib) if name == "TF_OK" or name.startswith("TF_E")})


def last_error() -> str:
    """The calling thread's last native error message."""
    return str(ffi.string(lib.tf_last_error()).decode("utf-8", "replace"))


@lru_cache(maxsize=None)
def native(name: str, contract: str | None = None) -> Callable[..., Any]:
    """Bind native function ``name`` through the bridge, with an optional contract.

    Every fallible native function returns a status (0 = ok); a failure raises the
    exception for that status with the thread-local message.
    """
    from ._bridge.lower import trampoline_address
    from ._shims import SHIM_PREFIX
    from .bridge import bind_function
    from .contract import parse_contract

    shim = getattr(lib, SHIM_PREFIX + name, None)
    return bind_function(
        ffi,
        shim if shim is not None else getattr(lib, name),
        DECLS.functions[name],
        parse_contract(contract),
        pointers_as_int=shim is not None,
        default_returns="status",
        error_message=last_error,
        resolve=lambda fname: getattr(lib, fname),
        native=True,
        trampoline=trampoline_address(ffi, lib, name),
        keepalive=lib,
        structs=DECLS.structs,
    )


def struct(type_name: str, **fields: Any) -> Struct:
    """A struct of the native library whose pointer fields may hold tensors."""
    from .bridge import Struct

    return Struct(ffi, DECLS, type_name, **fields)
