# SPDX-License-Identifier: MIT
"""Strings, structs and struct pointers (Handles among them) as C arguments."""
from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .._decl import Declarations
from .._torch import T, is_dtype
from ..contract import Dim, eval_dim
from ..errors import ArgumentOverflowError, ArgumentTypeError, LayoutError, ShapeError, UncheckedWarning
from ..handles import Handle
from ..plan import FieldRule, StructFields, _int_range, struct_label as _label
from .arrays import ITEMSIZE, Prepared, _check_storage, _describe, _ndarray, prepare_array, strided
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
    parameter of its type) to a bound function as is. At every call that passes
    it, each pointer field is checked against its length (the struct's contract,
    ``contracts={"TYPE": "FIELD: [dims]"}``, or the field names: ``float *data;
    int64_t n;``) and against memory that moved since the assignment (see "Struct
    fields" in :mod:`tensorffi.contract`).

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
            if type(p) is Prepared and p.kind == "torch":
                _check_storage(p.owner, f"struct {self._type}: field '{name}'")
            elif isinstance(p, Struct):
                p.check_storages()

    def __setattr__(self, name: str, value: Any) -> None:
        field = self._fields.get(name)
        if field is None:
            raise ArgumentTypeError(
                f"{_label(self._type)} has no field {name!r}; its fields are {', '.join(self._fields)}"
            )
        where = f"{_label(self._type)}: field '{name}'"
        ct = field.type
        if ct.pointer_depth == 1 and ct.dtype is not None and not ct.is_array and value is not None:
            if ct.base == "char" and ct.const and isinstance(value, str):
                value = _c_text(value, where, ct.text)
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
        elif ct.pointer_depth == 0 and ct.resolved == "char" and not ct.is_array:
            # a C char: one byte, given as bytes of length 1 or as its integer value
            if isinstance(value, (bytes, bytearray)) and len(value) == 1:
                value = bytes(value)
            else:
                value = bytes([_checked_int(value, where, ct.text, (0, 255))])
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



# --------------------------------------------------------------------------- #
# What a struct's pointer fields hold, checked at every call                   #
# --------------------------------------------------------------------------- #


def _current_address(owner: Any) -> int:
    """Where an array's memory is now (a tensor's storage may have been resized or
    replaced since it was assigned to the field)."""
    if isinstance(owner, T.Tensor):
        return int(owner.data_ptr())
    return int(owner.__array_interface__["data"][0])


def field_checker(ffi: Any, sf: StructFields, where: str) -> Callable[..., None]:
    """``check(value, *args)`` for a struct parameter whose type has pointer fields:
    a :class:`Struct` has every field checked against ``sf`` (``args``: the values of
    the function's integer parameters ``sf.args``); a raw cffi pointer cannot be, and
    says so once (an UncheckedWarning)."""
    warned: set[str] = set()

    def told(key: str, text: str) -> None:
        if key in warned:
            return
        warned.add(key)
        level, frame = 2, sys._getframe(1)
        while frame is not None and frame.f_globals.get("__name__", "").startswith("tensorffi"):
            level, frame = level + 1, frame.f_back  # type: ignore[assignment]
        warnings.warn(UncheckedWarning(text), stacklevel=level)

    # the common struct (lengths inferred from its fields, nothing nested, no shapes): a
    # loop over plain tuples; anything it does not see as fine goes to _check_fields,
    # which raises or says what is wrong
    simple = None
    if not sf.nested and not sf.free and not sf.args and all(r.shape is None for r in sf.rules):
        simple = tuple((r.name, r.min_len, 1 if r.min_len_bytes else ITEMSIZE.get(r.dtype, 1), r.optional)
                       for r in sf.rules if r.min_len)
    cast = ffi.cast

    def fine(cdata: Any, keep: dict[str, Any]) -> bool:
        for name, lens, size, optional in simple:  # type: ignore[union-attr]
            kept = keep.get(name)
            need = 1
            for q in lens:
                n = getattr(cdata, q)
                if n <= 0:
                    need = 0
                    break
                need *= n
            if type(kept) is not Prepared:
                if need and not (kept is None and optional):
                    return False
                continue
            addr = int(cast("intptr_t", getattr(cdata, name)))
            owner = kept.owner
            if addr != kept.addr or _current_address(owner) != addr:
                return False
            if need and need > owner.nbytes // size:
                return False
        return True

    def check(value: Any, *args: Any) -> None:
        if type(value) is Struct or isinstance(value, Struct):
            if simple is not None and fine(value._cdata, value._keep):
                return
            _check_fields(ffi, sf, value._cdata, value._keep, where, dict(zip(sf.args, args)), told)
        elif isinstance(value, ffi.CData) and value != ffi.NULL:
            told("", f"{where} is a raw cffi pointer to {sf.type_name}: the bridge cannot check what its pointer "
                     f"fields ({', '.join(r.name for r in sf.rules) or 'nested'}) point to or how long they are. "
                     f"Build it with lib.struct({sf.type_name!r}, ...) to have them checked at every call")

    return check


def _check_fields(ffi: Any, sf: StructFields, cdata: Any, keep: dict[str, Any], where: str,
                  args: dict[str, int], told: Callable[[str, str], None]) -> None:
    """The pointer fields of the struct at ``cdata`` (kept arrays in ``keep``) against
    the rules ``sf`` (see :func:`tensorffi.plan.struct_fields`); raises before C runs.
    A pointer the struct did not set (an init function stored it) cannot be measured:
    ``told(field, text)`` says so (once per bound function and field). Messages are
    made only when something is wrong: a call that passes costs a few attribute reads
    per field."""
    label = _label(sf.type_name)
    facts: dict[str, tuple[tuple[int, ...], int]] = {}  # field -> (its array's shape, nbytes)
    unmeasured: set[str] = set()  # pointers the struct did not set: C's to answer for
    for r in sf.rules:
        kept = keep.get(r.name)
        addr = int(ffi.cast("intptr_t", getattr(cdata, r.name)))
        if type(kept) is Prepared:
            if addr != kept.addr:
                if addr:  # C (an init function) or .cdata stored another pointer: C's business, said once
                    unmeasured.add(r.name)
                    told(r.name, f"{where}: {label} field '{r.name}' no longer points to the array assigned to it "
                                 f"(C stored another pointer there, or it was set through .cdata): the bridge cannot "
                                 f"check its length. Assign arrays through the struct (s.{r.name} = x) to have them "
                                 f"checked")
                continue  # NULL now: checked as NULL below
            owner = kept.owner
            if _current_address(owner) != addr:
                raise LayoutError(
                    f"{where}: {label} field '{r.name}': the array assigned to it has moved (its storage was resized "
                    f"or replaced, e.g. by resize_() or set_(), after the assignment): the struct still points at "
                    f"the memory it left. Assign it to the field again, or use a tensorffi.buffer(), whose memory "
                    f"cannot move")
            facts[r.name] = (owner.shape, kept.nbytes)
        elif addr and (r.shape is not None or r.min_len):
            unmeasured.add(r.name)
            told(r.name, f"{where}: {label} field '{r.name}' holds a pointer the struct did not set (C stored it, or "
                         f"it was set through .cdata): the bridge cannot check its length. Assign arrays through the "
                         f"struct (s.{r.name} = x) to have them checked, or say '{r.name}: unsized' in "
                         f"{sf.type_name}'s contract if no length applies")
    values: dict[str, int] = dict(args)

    def value(sym: str) -> int:
        v = values.get(sym)
        if v is None:
            v = values[sym] = int(getattr(cdata, sym))  # an integer field (the plan checked the name)
        return v

    bound: set[str] = set()
    if sf.free:  # free sizes: fixed by the first field whose plain dimension names them
        for r in sf.rules:
            if r.shape is None or r.name not in facts:
                continue
            shape = _seen_shape(r, facts[r.name])
            if len(shape) != len(r.shape):
                raise ShapeError(f"{where}: {label} field '{r.name}' is an array of {len(shape)} dimension(s) "
                                 f"{list(shape)}, but its contract says [{', '.join(map(str, r.shape))}] "
                                 f"(clause {r.clause!r})")
            for d, n in zip(r.shape, shape):
                if d.expr is None and d.factor == 1 and len(d.symbols) == 1 and d.symbols[0] in sf.free \
                        and d.symbols[0] not in values:
                    values[d.symbols[0]] = n
                    bound.add(d.symbols[0])
    for r in sf.rules:
        if r.name in unmeasured:
            continue
        fact = facts.get(r.name)
        if r.shape is not None:
            need = [_dim_value(d, value, f"{where}: {label} field '{r.name}'", r) for d in r.shape]
            if fact is not None:
                shape = _seen_shape(r, fact)
                if list(shape) != need:
                    syms = dict.fromkeys(s for d in r.shape for s in d.symbols)
                    shown = ", ".join(f"{x} = {values.get(x, '?')} ("
                                      f"{'argument' if x in args else 'from the shape of another field' if x in bound else 'field'})"
                                      for x in syms)
                    raise ShapeError(
                        f"{where}: {label} field '{r.name}' holds an array of shape {list(shape)}, but its contract "
                        f"says [{', '.join(map(str, r.shape))}] = {need}" + (f" ({shown})" if shown else "")
                        + f": C would access {_count(need)} {'bytes' if r.dtype == 'any' else 'elements'}"
                        + f" (clause {r.clause!r})")
            elif not r.optional and _count(need) > 0:
                raise ArgumentTypeError(
                    f"{where}: {label} field '{r.name}' is NULL, but C accesses {_count(need)} "
                    f"{'bytes' if r.dtype == 'any' else 'elements'} there ([{', '.join(map(str, r.shape))}] = "
                    f"{need}): assign an array, or say '{r.name}: ?' in the contract if C accepts NULL")
        elif r.min_len:
            need_n = 1
            for q in r.min_len:
                f = value(q)
                if f <= 0:
                    need_n = 0  # C accesses nothing
                    break
                need_n *= f
            if not need_n:
                continue
            if fact is not None:
                have = fact[1] if r.min_len_bytes else fact[1] // ITEMSIZE.get(r.dtype, 1)
                if need_n <= have:
                    continue
            elif r.optional:
                continue
            unit = "bytes" if r.min_len_bytes else "elements"
            names = " * ".join(f"'{q}'" for q in r.min_len)
            shown_v = " * ".join(str(value(q)) for q in r.min_len)
            if fact is None:
                raise ArgumentTypeError(
                    f"{where}: {label} field '{r.name}' is NULL, but field {names} is {shown_v}: C would access "
                    f"{need_n} {unit} there; assign an array, or say '{r.name}: ?' in {sf.type_name}'s contract if C "
                    f"accepts NULL")
            raise ShapeError(
                f"{where}: {label} field '{r.name}' holds {have} {unit}, but field {names} is {shown_v}: C would "
                f"access {need_n} of them (the rule '{r.name} holds at least {' * '.join(r.min_len)} {unit}' is "
                f"inferred from the field names; give '{r.name}: [dims]' or '{r.name}: unsized' in {sf.type_name}'s "
                f"contract if it is wrong)")
    for name, inner in sf.nested.items():
        kept = keep.get(name)
        field_value = getattr(cdata, name)
        inner_where = f"{where}: field '{name}'"
        if isinstance(kept, Struct):
            if isinstance(field_value, ffi.CData) and ffi.typeof(field_value).kind == "pointer":
                if field_value != kept._cdata:
                    if field_value != ffi.NULL:
                        told(name, f"{where}: {label} field '{name}' no longer points to the struct assigned to it "
                                   f"(C stored another, or it was set through .cdata): its fields cannot be checked; "
                                   f"assign it again to have them checked")
                    continue
                _check_fields(ffi, inner, kept._cdata, kept._keep, inner_where, {}, told)
            else:  # embedded by value: what C sees is the copy in this struct
                _check_fields(ffi, inner, field_value, kept._keep, inner_where, {}, told)
        elif ffi.typeof(field_value).kind != "pointer":
            _check_fields(ffi, inner, field_value, {}, inner_where, {}, told)
        elif field_value != ffi.NULL:
            told(name, f"{where}: {label} field '{name}' points to a struct the bridge did not set (C stored it, or "
                       f"it was set through .cdata): its fields cannot be checked; assign a "
                       f"lib.struct({inner.type_name!r}, ...) to have them checked")


def _seen_shape(r: FieldRule, fact: tuple[tuple[int, ...], int]) -> tuple[int, ...]:
    """The shape a field's contract is compared with: one dimension counts elements (bytes
    for void *) whatever the array's own shape."""
    shape, nbytes = fact
    assert r.shape is not None
    if len(r.shape) == 1:
        if r.dtype == "any":
            return (nbytes,)
        return (_count(list(shape)),)
    return tuple(int(n) for n in shape)


def _count(dims: list[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _dim_value(d: Dim, value: Callable[[str], int], where: str, r: FieldRule) -> int:
    try:
        if d.expr is not None:
            return int(eval_dim(d.expr, _Lookup(value)))
        n = d.factor
        for sym in d.symbols:
            n *= value(sym)
        return n
    except ValueError as exc:
        raise ShapeError(f"{where}: its contract's dimension {d}: {exc} (clause {r.clause!r})") from None


class _Lookup:
    """A mapping view of a symbol lookup, for eval_dim."""

    def __init__(self, value: Callable[[str], int]) -> None:
        self.value = value

    def __getitem__(self, key: str) -> int:
        return self.value(key)


def _c_text(value: str, where: str, ctype: str) -> bytes:
    """A ``str`` as the bytes C receives: UTF-8, and the bytes a surrogate escape stands
    for (what ``os.listdir`` and ``sys.argv`` give for a name that is not UTF-8:
    ``os.fsencode``'s conversion, so such a path opens). A lone surrogate is refused."""
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise ArgumentTypeError(
            f"{where} ({ctype}): the text holds {value[exc.start:exc.end]!r} at index {exc.start}, a lone surrogate "
            f"that no UTF-8 byte sequence spells; pass bytes for C to receive exactly those") from None


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
        value = _c_text(value, where, ctype)
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


