# SPDX-License-Identifier: MIT
"""Callbacks: Python callables C may call from any thread, their arguments as tensors."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .. import _codegen
from .._torch import T
from ..errors import ArgumentTypeError, ContractError, NativeError
from ..plan import Param
from .arrays import ITEMSIZE, _describe

if TYPE_CHECKING:
    import torch

# --------------------------------------------------------------------------- #
# Callbacks: Python callables C may call from any thread                       #
# --------------------------------------------------------------------------- #


def _view_maker(ffi: Any) -> Callable[..., torch.Tensor]:
    """``view(ptr, shape, dtype, itemsize, copy)``: a tensor over ``prod(shape)`` elements
    of C memory at ``ptr`` (valid while the callback runs; a copy with ``copy``); torch
    is imported at the first call (a callback's arrays are tensors)."""
    NULL, buffer = ffi.NULL, ffi.buffer

    def view(ptr: Any, shape: tuple[int, ...], dtype: torch.dtype, itemsize: int, copy: bool) -> torch.Tensor:
        n = 1
        for d in shape:
            n *= d
        if n <= 0 or ptr == NULL:
            empty: torch.Tensor = T.empty(shape, dtype=dtype)
            return empty
        t: torch.Tensor = T.frombuffer(buffer(ptr, n * itemsize), dtype=dtype).view(shape)
        return t.clone() if copy else t

    return view


class Registered:
    """The C function pointer made for one Python callable (``cdata``, passed to C), and
    the cell through which it reaches the callable: :meth:`disarm` lets the callable go
    while the C entry point stays valid (a late call from C reaches a stub)."""

    __slots__ = ("cdata", "cell")

    def __init__(self, cdata: Any, cell: list[Any] | None) -> None:
        self.cdata, self.cell = cdata, cell

    def disarm(self) -> None:
        if self.cell is not None:
            self.cell[0] = None


def _callback_factory(ffi: Any, p: Param, fname: str) -> Callable[[Any, Callable[[BaseException], None]], Registered]:
    """``factory(fn, sink)``: a :class:`Registered` cffi callback for function-pointer
    parameter ``p`` that calls ``fn`` with the callback's arguments as the contract
    describes them (arrays as tensors over C memory; sizes named in their shapes and
    bare ``void *`` left out; C strings as ``str``), stores any exception in ``sink``
    and returns the declared error value to C instead. Once disarmed, a call from C
    stores a :class:`~tensorffi.NativeError` saying C called a released callback, and
    returns the error value."""
    sig, spec = p.signature, p.callback
    assert sig is not None and spec is not None
    if sig.variadic:
        raise ContractError(f"{fname}: callback '{p.name}' is variadic")
    res = sig.result
    ctype = p.ctype if not p.ctype.count("(") else (
        f"{res.text} (*)({', '.join(q.type.text for q in sig.params) or 'void'})")
    sizes = {sym for shape in spec.arrays.values() for d in shape for sym in d.symbols}
    cnames = [f"a{i}" for i in range(len(sig.params))]
    late = NativeError(
        f"{fname}(): C called callback '{p.name}' after it was released (its unregister call returned): the "
        f"bridge kept its C entry point, so nothing crashed, and did not call the Python function. The C "
        f"library still calls a listener it said it removed", 0, fname)
    ns: dict[str, Any] = {"_view": _view_maker(ffi), "_ffi": ffi, "_NULL": ffi.NULL, "_string": ffi.string, "_torch": T,
                          "_late": late}
    args: list[str] = []
    for i, q in enumerate(sig.params):
        c = cnames[i]
        if q.name in spec.arrays:
            dtype = q.type.dtype
            assert dtype is not None
            dims = []
            for d in spec.arrays[q.name]:
                factors = [cnames[[r.name for r in sig.params].index(sym)] for sym in d.symbols]
                dims.append(" * ".join(factors + ([str(d.factor)] if d.factor != 1 or not factors else [])))
            shape = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
            args.append(f"_view({c}, {shape}, _torch.{dtype}, {ITEMSIZE[dtype]}, {spec.copy})")
        elif q.name in sizes:
            continue
        elif q.type.pointer_depth == 1 and q.type.dtype == "any":
            continue  # user data: Python closures carry their own state
        elif q.type.pointer_depth == 1 and q.type.resolved == "char" and q.type.const:
            args.append(f"(None if {c} == _NULL else _string({c}).decode('utf-8', 'replace'))")
        else:
            args.append(c)
    call = f"_fn({', '.join(args)})"
    error = spec.error if spec is not None else 0
    back = "return" if res.text == "void" else f"return {error}"
    lines = ["def _make(_cell, _sink):", f"    def _cb({', '.join(cnames)}):", "        _fn = _cell[0]",
             "        if _fn is None:", "            _sink(_late)", f"            {back}", "        try:"]
    if res.text == "void":
        lines += [f"            {call}", "        except BaseException as _e:", "            _sink(_e)"]
        error_kw = ""
    else:
        conv = "float" if res.is_float else "int"
        lines += [f"            _r = {call}", f"            return 0 if _r is None else {conv}(_r)",
                  "        except BaseException as _e:", "            _sink(_e)", f"            return {error}"]
        error_kw = f", error={error}"
    lines.append(f"    return _ffi.callback(_ct, _cb{error_kw}, onerror=lambda _t, _v, _tb: _sink(_v))")
    src = "\n".join(lines) + "\n"
    ns["_ct"] = ctype
    make = _codegen.build(src, ns, function="_make", label=f"callback: {fname}.{p.name}")
    optional = True

    def factory(fn: Any, sink: Callable[[BaseException], None]) -> Registered:
        if fn is None and optional:
            return Registered(ffi.NULL, None)
        if isinstance(fn, ffi.CData):
            return Registered(fn, None)  # a C function pointer given as is
        if not callable(fn):
            raise ArgumentTypeError(f"{fname}(): argument '{p.name}' expects a callable (or None), got {_describe(fn)}")
        cell = [fn]
        return Registered(make(cell, sink), cell)

    return factory




def _release_finder(ffi: Any, p: Param, fname: str) -> Callable[[Any, list[Any]], tuple[Any, Any, Any]]:
    """``find(fn, states)`` for ``NAME: release`` on function-pointer parameter ``p``:
    (the C function pointer registered for ``fn`` on one of the handles the call
    takes, its registration's token, that handle's state). A callable registered on
    none of them is refused before C runs: C would get a pointer it never saw."""
    where = f"{fname}(): argument '{p.name}'"
    try:
        want = ffi.typeof(p.ctype)
    except Exception:  # pragma: no cover - a function pointer type cffi cannot name
        want = None

    def find(fn: Any, states: list[Any]) -> tuple[Any, Any, Any]:
        if isinstance(fn, ffi.CData):
            return fn, None, None  # a C function pointer given as is: nothing the bridge holds
        for st in states:
            found = st.registered(("callback", fn))
            if found is None:
                continue
            token, reg = found
            if want is not None and ffi.typeof(reg.cdata) is not want:
                raise ArgumentTypeError(f"{where} ({p.ctype}): {_describe(fn)} was registered as "
                                        f"{ffi.typeof(reg.cdata).cname}, another function pointer type")
            return reg.cdata, token, st
        raise ArgumentTypeError(
            f"{where}: {_describe(fn)} is not registered on the handle this call takes (it was never "
            f"registered, or every registration of it was already released); pass the callable that the "
            f"registering call received"
        )

    return find
