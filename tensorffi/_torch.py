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
from typing import Any, Callable

__all__ = ["loaded", "register_operators", "install_hook", "when_imported", "OPERATOR_MODULES", "T", "is_dtype"]

#: The modules that define ``torch.ops.tensorffi.*``, in order.
OPERATOR_MODULES = ("tensorffi.core", "tensorffi.signal", "tensorffi.physics")

_state = {"registered": False, "pending": False, "depth": 0}
_lock = threading.RLock()


def loaded() -> Any:
    """The torch module if it has been imported (by anyone), else None: never imports it."""
    return sys.modules.get("torch")


class _Absent:
    """Stands for a torch class before torch is imported: no object is an instance of it."""


#: torch's classes that type tests name: until torch is imported they are :class:`_Absent`
_TYPES = {"Tensor": ("Tensor",), "Parameter": ("nn", "Parameter"), "dtype": ("dtype",)}


class _LazyTorch:
    """``torch``, imported when first used: ``T.empty``, ``T.float32``, ``T._C`` import torch
    on first access and keep the attribute on this object (later lookups cost an
    instance-dict lookup). ``T.Tensor``, ``T.Parameter`` and ``T.dtype`` never import
    it: before torch is imported they are a class nothing is an instance of (a tensor
    cannot exist before its module does), so ``isinstance(v, T.Tensor)`` is free for
    NumPy-only use."""

    def __getattr__(self, name: str) -> Any:
        path = _TYPES.get(name)
        if path is not None:
            value: Any = sys.modules.get("torch")
            for part in path:  # (torch may be importing: torch.nn not there yet)
                value = getattr(value, part, None)
            if value is None:
                # kept too (a type test is on every call's path), and forgotten when
                # torch's import completes (_after_torch: before any tensor exists)
                with _lock:
                    if loaded() is None and _finder in sys.meta_path:  # (the hook will forget it)
                        setattr(self, name, _Absent)
                return _Absent
        else:
            if name.startswith("__"):
                raise AttributeError(name)  # copy, pickle and friends probe dunders
            import torch

            value = getattr(torch, name)
        setattr(self, name, value)
        return value

    def __repr__(self) -> str:
        return "<torch, imported when first used>"


T: Any = _LazyTorch()


def is_dtype(dt: Any, name: str) -> bool:
    """Whether ``dt`` is torch's dtype ``name`` ("bool"), without importing torch."""
    torch = sys.modules.get("torch")
    return torch is not None and dt is getattr(torch, name, None)


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


def when_imported(fn: Callable[[Any], None]) -> None:
    """Call ``fn(torch)`` now if torch is imported, else as soon as its import completes
    (before any tensor can exist): how a module fills its torch tables (dtypes, the
    native call path's configuration) without importing torch."""
    with _lock:
        torch = loaded()
        if torch is None:
            _waiting.append(fn)
            return
    fn(torch)


_waiting: list[Callable[[Any], None]] = []


def _after_torch() -> None:
    with _lock:
        for name in _TYPES:  # T.Tensor and friends: torch's own classes from now on
            if T.__dict__.get(name) is _Absent:
                delattr(T, name)
        calls = list(_waiting)
        _waiting.clear()
    torch = loaded()
    for fn in calls:
        try:
            fn(torch)
        except Exception as exc:  # noqa: BLE001 - must not make `import torch` fail
            warnings.warn(f"tensorffi could not prepare for torch ({getattr(fn, '__qualname__', fn)}): "
                          f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)
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


def find_spec_elsewhere(skip: Any, fullname: str, path: Any = None, target: Any = None) -> Any:
    """The spec the other finders of ``sys.meta_path`` (all but ``skip``) find for
    ``fullname``: what a post-import hook's finder hands on, its loader wrapped."""
    for finder in sys.meta_path:
        if finder is skip or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def wrap_loader(loader: Any, after: Callable[[Any], None]) -> None:
    """Make ``loader`` run ``after(module)`` once it has executed a module."""
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
        spec = find_spec_elsewhere(self, fullname, path, target)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        if fullname == "torch":
            wrap_loader(loader, lambda module: _after_torch())
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
