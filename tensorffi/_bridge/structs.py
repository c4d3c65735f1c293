# SPDX-License-Identifier: MIT
"""Strings, structs and struct pointers (Handles among them) as C arguments."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._decl import Declarations
from .._torch import T, is_dtype
from ..errors import ArgumentOverflowError, ArgumentTypeError
from ..handles import Handle
from ..plan import _int_range
from .arrays import Prepared, _check_storage, _describe, _ndarray, prepare_array, strided
from .scalars import _checked_float, _checked_int

if TYPE_CHECKING:
    import torch

# --------------------------------------------------------------------------- #
# Structs that hold pointers                                                   #
# --------------------------------------------------------------------------- #


class Struct:
    """A C struct whose pointer fields can hold tensors and arrays.

    Assigning an array to a pointer field checks it as the bridge checks an
    argument (the field's ``const`` says whether C may write through it) and keeps
    it alive for as long as the struct lives. Pass the struct (or a pointer
    parameter of its type) to a bound function as is.

    >>> import torch, tensorffi
    >>> x = torch.arange(4, dtype=torch.float32)
    >>> span = tensorffi.core.struct("tf_core_span", data=x, n=4)
    >>> tensorffi.core.span_sum(span)
    6.0
    """

    __slots__ = ("_ffi", "_type", "_fields", "_cdata", "_keep")

    def __init__(self, ffi: Any, decls: Declarations, type_name: str, **values: Any) -> None:
        fields = decls.structs.get(type_name)
        if fields is None:
            raise ArgumentTypeError(f"no struct named {type_name!r} is declared")
        object.__setattr__(self, "_ffi", ffi)
        object.__setattr__(self, "_type", type_name)
        object.__setattr__(self, "_fields", {f.name: f for f in fields})
        object.__setattr__(self, "_cdata", ffi.new(type_name + " *"))
        object.__setattr__(self, "_keep", {})
        for name, value in values.items():
            setattr(self, name, value)

    @property
    def cdata(self) -> Any:
        """The cffi pointer to the struct (valid while this object lives)."""
        return self._cdata

    def written_tensors(self) -> list[torch.Tensor]:
        out = []
        for p in self._keep.values():
            if isinstance(p, Prepared) and p.written_tensor is not None:
                out.append(p.written_tensor)
            elif isinstance(p, Struct):
                out += p.written_tensors()
        return out

    def check_storages(self) -> None:
        """Re-check that every tensor the struct points to is still held by its storage."""
        for name, p in self._keep.items():
            if isinstance(p, Prepared) and isinstance(p.owner, T.Tensor):
                _check_storage(p.owner, f"struct {self._type}: field '{name}'")
            elif isinstance(p, Struct):
                p.check_storages()

    def __setattr__(self, name: str, value: Any) -> None:
        field = self._fields.get(name)
        if field is None:
            raise ArgumentTypeError(
                f"struct {self._type} has no field {name!r}; its fields are {', '.join(self._fields)}"
            )
        where = f"struct {self._type}: field '{name}'"
        ct = field.type
        if ct.pointer_depth == 1 and ct.dtype is not None and not ct.is_array and value is not None:
            if ct.base == "char" and ct.const and isinstance(value, str):
                value = value.encode()
            if isinstance(value, (bytes,)) and ct.const:
                if b"\0" in value:
                    raise ArgumentTypeError(f"{where} ({ct.text}): the string holds a NUL byte")
                buf = self._ffi.new("char[]", value)
                self._keep[name] = buf
                setattr(self._cdata, name, buf)
                return
            prep = prepare_array(value, where=where, ctype=ct.text, dtype=ct.dtype, written=not ct.const, may_copy=False)
            setattr(self._cdata, name, self._ffi.cast(ct.text, prep.addr))
            self._keep[name] = prep
            return
        if isinstance(value, Struct):
            self._keep[name] = value
            value = value._cdata if ct.pointer_depth else value._cdata[0]
        elif value is None and ct.pointer_depth:
            self._keep.pop(name, None)
            value = self._ffi.NULL
        elif ct.is_integer and not ct.is_array:
            int_range = _int_range(self._ffi, ct.text.replace("const ", ""))
            if int_range is not None:
                value = _checked_int(value, where, ct.text, int_range)
        elif ct.is_float and not ct.is_array:
            value = _checked_float(value, where, ct.text, 32 if ct.resolved == "float" else 64)
        try:
            setattr(self._cdata, name, value)
        except OverflowError as exc:
            raise ArgumentOverflowError(f"{where} ({ct.text}): {exc}") from None
        except Exception as exc:  # a failed conversion: __float__ of a 2-element tensor raises ValueError
            raise ArgumentTypeError(f"{where} ({ct.text}): {exc}") from None

    def __getattr__(self, name: str) -> Any:
        if name in self._fields:
            kept = self._keep.get(name)
            if isinstance(kept, Prepared):
                return kept.owner
            return getattr(self._cdata, name)
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"<tensorffi.Struct {self._type}>"



def _string_arg(ffi: Any, value: Any, where: str, ctype: str, optional: bool) -> tuple[Any, Any, None]:
    """A ``const char *`` argument: (C value, what keeps it alive, None)."""
    if value is None:
        if optional:
            return ffi.NULL, None, None
        raise ArgumentTypeError(
            f"{where} ({ctype}) is a C string and cannot be None (NULL); if the function accepts "
            f"NULL there, say so in its contract: '{where.split(chr(39))[1]}: ?'"
        )
    if isinstance(value, str):
        value = value.encode()
    elif isinstance(value, (bytearray, memoryview)):
        value = bytes(value)
    if isinstance(value, bytes):
        if b"\0" in value:
            raise ArgumentTypeError(f"{where} ({ctype}) holds a NUL byte: C would see only the text before it")
        return value, value, None
    if isinstance(value, ffi.CData):
        return value, value, None
    if isinstance(value, (T.Tensor, _ndarray, strided)):
        obj = value.obj if isinstance(value, strided) else value
        odt = getattr(obj, "dtype", None)
        dt = "int8" if (isinstance(odt, np.dtype) and odt == np.int8) or is_dtype(odt, "int8") else "uint8"
        prep = prepare_array(value, where=where, ctype=ctype, dtype=dt, written=False, may_copy=False)
        owner = prep.owner
        size = owner.size if isinstance(owner, _ndarray) else owner.numel()
        has_nul = bool((owner == 0).any()) if size else False
        if not has_nul:
            raise ArgumentTypeError(
                f"{where} ({ctype}) is a byte array without a NUL terminator: C would read past its end"
            )
        return ffi.cast(ctype, prep.addr), prep, None
    raise ArgumentTypeError(f"{where} ({ctype}) expects a str or bytes, got {_describe(value)}")


def _struct_arg(
    ffi: Any, value: Any, where: str, ctype: str, optional: bool, want: Any, used: list[Any]
) -> tuple[Any, Any, list[Any], Any]:
    """A struct pointer argument: (C value, what keeps it alive, tensors C may write,
    the handle state if it is a Handle)."""
    if type(value) is Handle:
        ptr = value._enter(where, want)
        used.append(value._state)
        return ptr, value, [], value._state
    if isinstance(value, Struct):
        value.check_storages()
        return value.cdata, value, value.written_tensors(), None
    if value is None:
        if optional:
            return ffi.NULL, None, [], None
        raise ArgumentTypeError(
            f"{where} ({ctype}) cannot be None (NULL); if the function accepts NULL there, say so in "
            f"its contract: '{where.split(chr(39))[1]}: ?'"
        )
    if isinstance(value, ffi.CData):
        return value, value, [], None
    raise ArgumentTypeError(
        f"{where} ({ctype}) expects a tensorffi.Handle or a struct (lib.struct(...)), got {_describe(value)}"
    )


def _typeof(ffi: Any, ctype: str) -> Any:
    try:
        return ffi.typeof(ctype)
    except Exception:
        return None


