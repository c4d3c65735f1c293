# SPDX-License-Identifier: MIT
"""torch, only when it is in use: tensors recognised without importing it, operators
registered once it is imported.

tensorffi never imports torch for NumPy-only use. Three rules make that hold:

* **A tensor cannot exist unless torch was imported**, so :func:`loaded` (a
  ``sys.modules`` lookup) answers "could this be a tensor?" without importing it.
* **Operators** (``torch.ops.tensorffi.*``) are registered by :func:`register_operators`,
  which imports each operator module (:data:`OPERATOR_MODULES`; a module imported with
  torch loaded registers its operators as it is imported) and calls ``_ensure_ops()``
  on those that have it (a module imported before torch): at ``import tensorffi`` if
  torch is already imported, else when torch's import completes (a post-import hook:
  a ``sys.meta_path`` finder that wraps the ``exec_module`` of torch's loader). If
  torch's import completes while a tensorffi module is being imported (that module
  imports torch), the registration waits until the outermost tensorffi import has
  finished, so no operator module ever sees a half-initialised tensorffi module.
* **Everything else torch-only** (``tensorffi.ops``, torch outputs) imports torch where it
  is first needed.

The hook is removed from ``sys.meta_path`` once the operators are registered; a
failure while registering is a :class:`RuntimeWarning` naming the cause (it must not
make ``import torch`` itself fail), and the next :func:`register_operators` call
retries and raises.
"""
from __future__ import annotations

import importlib
import sys
import threading
import warnings
from typing import Any

__all__ = ["loaded", "register_operators", "install_hook", "OPERATOR_MODULES"]

#: The modules that define ``torch.ops.tensorffi.*``, in order.
OPERATOR_MODULES = ("tensorffi.core", "tensorffi.signal", "tensorffi.physics")

_state = {"registered": False, "pending": False, "depth": 0}
_lock = threading.RLock()


def loaded() -> Any:
    """The torch module if it has been imported (by anyone), else None: never imports it."""
    return sys.modules.get("torch")


def register_operators() -> None:
    """Define tensorffi's operators (imports torch and the operator modules); idempotent."""
    with _lock:
        if _state["registered"]:
            return
        _state["registered"] = True  # set first: an operator module's import comes back here
        try:
            for name in OPERATOR_MODULES:
                ensure = getattr(importlib.import_module(name), "_ensure_ops", None)
                if ensure is not None:
                    ensure()
        except BaseException:
            _state["registered"] = False
            raise
        _state["pending"] = False
        _remove_hook()


def _after_torch() -> None:
    with _lock:
        if _state["registered"]:
            return
        if _state["depth"]:
            _state["pending"] = True  # the outermost tensorffi import finishing registers them
            return
    _register_quietly()


def _register_quietly() -> None:
    try:
        register_operators()
    except Exception as exc:  # noqa: BLE001 - reported, and raised again by the next explicit call
        warnings.warn(
            f"tensorffi could not register its torch operators when torch was imported: "
            f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=3,
        )


def _wrap(loader: Any, after: Any) -> None:
    exec_module = loader.exec_module

    def wrapped(module: Any) -> None:
        exec_module(module)
        after(module)

    loader.exec_module = wrapped


def _enter_tensorffi(exec_module: Any) -> Any:
    def wrapped(module: Any) -> None:
        with _lock:
            _state["depth"] += 1
        try:
            exec_module(module)
        finally:
            with _lock:
                _state["depth"] -= 1
                run = _state["pending"] and not _state["depth"]
        if run:
            _register_quietly()

    return wrapped


class _Finder:
    """Finds nothing itself: wraps the loaders others find for torch and tensorffi.*."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "torch" and not fullname.startswith("tensorffi."):
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        if fullname == "torch":
            _wrap(loader, lambda module: _after_torch())
        else:
            loader.exec_module = _enter_tensorffi(loader.exec_module)
        return spec


_finder = _Finder()


def _remove_hook() -> None:
    try:
        sys.meta_path.remove(_finder)
    except ValueError:
        pass


def install_hook() -> None:
    """Register the operators now if torch is imported, else when it is (see the module doc)."""
    if loaded() is not None:
        register_operators()
    elif _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
