# SPDX-License-Identifier: MIT
"""The bridge: the one place where a tensor or an array becomes a C pointer.

:func:`bind_function` turns a C function (a cffi function plus its declaration,
parsed with ``const`` kept, plus an optional :mod:`contract <tensorffi.contract>`)
into a Python callable that checks every argument *before* C touches memory:

* element type against the C pointer type (``float *`` is float32, ``void *`` any);
* device: only CPU memory; CUDA, meta and fake tensors are refused and their
  ``data_ptr()`` is never read;
* lazy views whose memory does not hold their values (the negative or conjugate
  bit: ``z.conj().imag``) are resolved where a copy is allowed (a read argument with
  a contract shape) and refused elsewhere, as ``Tensor.numpy()`` refuses them;
* written arguments (non-``const`` pointers, ``out``/``inout`` roles) must be
  contiguous and writable: read-only arrays, tensors that require grad, expanded
  and self-overlapping views are refused, never silently copied (a copy would lose
  the write). After the call the tensor's autograd version counter is bumped;
* read-only arguments may be copied to contiguous memory only where a contract
  declares their shape; otherwise a non-contiguous input is refused too, because
  the C function may walk its own strides and read past a copy. Pass
  :func:`strided` to hand C a view's own pointer on purpose;
* sizes against the contract's symbolic shapes; length arguments are filled in;
  ``out`` arrays are allocated in the caller's kind (torch in, torch out);
* integer scalars against the range of their C type (``OverflowError``); a float
  (of any kind: NumPy, a 0-d tensor, ``Fraction``) for an integer parameter is a
  ``TypeError``, never truncated. Integers are ``int``, NumPy integers, ``bool`` and
  objects with ``__index__`` (0-d integer tensors and arrays);
* lifetimes: every object whose memory C sees (including copies, and tensors placed
  in a :class:`Struct`) is referenced until the call returns.

cffi releases the GIL around every call.
"""
from __future__ import annotations

import keyword
import operator
from dataclasses import dataclass
from typing import Any, Callable, Collection, Mapping

import numpy as np
import torch

from ._decl import _SIZED as _SIZED_DTYPES
from ._decl import ELEMENT_DTYPES, CFunction, CParam, Declarations
from .contract import ArraySpec, Contract, Dim, Fill
from .errors import (
    ArgumentOverflowError,
    ArgumentTypeError,
    ContractError,
    DeviceError,
    DTypeError,
    LayoutError,
    NativeError,
    ShapeError,
    WritabilityError,
    error_for_status,
)

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int16": torch.int16,
    "uint16": torch.uint16,
    "int32": torch.int32,
    "uint32": torch.uint32,
    "int64": torch.int64,
    "uint64": torch.uint64,
    "bool": torch.bool,
}
NUMPY_DTYPES: dict[str, np.dtype] = {name: np.dtype(name) for name in TORCH_DTYPES}

_Tensor = torch.Tensor
_ndarray = np.ndarray
_increment_version = torch._C._increment_version


class strided:
    """Pass an array's own data pointer to C as it is, strides and all.

    For C functions that take their own strides or leading dimensions (a BLAS
    ``lda``): the bridge neither copies nor refuses a non-contiguous view wrapped
    in ``strided``; it still checks dtype, device and writability, and refuses
    written views that overlap themselves. You promise that the strides you pass
    to C match the view.

    >>> import torch, tensorffi
    >>> a = torch.arange(12, dtype=torch.float64).reshape(3, 4)[:, :3]   # lda = 4
    >>> out = torch.empty(3, dtype=torch.float64)
    >>> tensorffi.core.raw.tf_core_rowsum_f64(tensorffi.strided(a), 3, 3, a.stride(0), out)
    >>> out.tolist()
    [3.0, 15.0, 27.0]
    """

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __repr__(self) -> str:
        return f"tensorffi.strided({self.obj!r})"


# --------------------------------------------------------------------------- #
# Per-argument checks                                                          #
# --------------------------------------------------------------------------- #


def _describe(v: Any) -> str:
    if isinstance(v, _Tensor):
        return f"torch.Tensor(dtype={v.dtype}, shape={tuple(v.shape)}, device={v.device})"
    if isinstance(v, _ndarray):
        return f"numpy.ndarray(dtype={v.dtype}, shape={v.shape})"
    return type(v).__name__


def _is_traced(t: torch.Tensor) -> str | None:
    """Name of the tracing tensor kind (fake, functional...), or None for a real tensor."""
    cls = type(t)
    if cls is _Tensor or cls is torch.nn.Parameter:
        return None
    try:
        from torch._subclasses.fake_tensor import is_fake

        if is_fake(t):
            return "fake tensor (torch.compile / FakeTensorMode tracing)"
    except Exception:  # pragma: no cover - depends on torch internals
        pass
    if torch._is_functional_tensor(t):
        return "functional tensor (torch.compile tracing)"
    if issubclass(cls, torch.nn.Parameter):
        return None
    return f"tensor subclass {cls.__module__}.{cls.__qualname__}"


@dataclass
class Prepared:
    """An argument ready for C: its address, the object that owns the memory."""

    addr: int
    owner: Any  # keeps the memory alive (the array itself, or its contiguous copy)
    shape: tuple[int, ...]
    kind: str  # "torch" | "numpy"
    written_tensor: torch.Tensor | None  # a caller's tensor C writes (version bump)


def prepare_array(
    value: Any,
    *,
    where: str,
    ctype: str,
    dtype: str,
    written: bool,
    may_copy: bool,
) -> Prepared:
    """Check one array argument and return its C address (see the module docstring).

    ``where`` names the argument in errors ("tf_foo(): argument 'x'").
    """
    is_strided = isinstance(value, strided)
    if is_strided:
        value = value.obj
    if isinstance(value, _Tensor):
        return _prepare_tensor(value, where, ctype, dtype, written, may_copy, is_strided)
    if isinstance(value, _ndarray):
        return _prepare_ndarray(value, where, ctype, dtype, written, may_copy, is_strided)
    if isinstance(value, (bytes, bytearray, memoryview)) and dtype in ("uint8", "int8", "any"):
        if isinstance(value, memoryview) and not value.c_contiguous:
            raise LayoutError(f"{where} ({ctype}) is a memoryview that is not C-contiguous")
        arr = np.frombuffer(value, dtype=np.uint8 if dtype == "any" else dtype)
        return _prepare_ndarray(arr, where, ctype, dtype, written, may_copy, is_strided)
    raise ArgumentTypeError(
        f"{where} ({ctype}) expects a torch tensor or a NumPy array, got {_describe(value)}"
    )


def _prepare_tensor(
    t: torch.Tensor, where: str, ctype: str, dtype: str, written: bool, may_copy: bool, is_strided: bool
) -> Prepared:
    traced = _is_traced(t)
    if traced is not None:
        raise DeviceError(
            f"{where} is a {traced}: it has no memory C could read. Under tracing only a "
            f"shape rule may run; register the function as an operator (tensorffi.ops)."
        )
    if t.device.type != "cpu":
        if t.device.type == "meta":
            raise DeviceError(f"{where} is a meta tensor: it has no data for C to read or write")
        raise DeviceError(f"{where} is on {t.device}; C functions take CPU memory (use .cpu())")
    if t.layout is not torch.strided:
        raise LayoutError(f"{where} has layout {t.layout}; only dense (strided) tensors can be passed to C")
    if dtype != "any" and t.dtype is not TORCH_DTYPES[dtype]:
        raise DTypeError(f"{where} ({ctype}) expects dtype {TORCH_DTYPES[dtype]}, got {t.dtype}")
    if t.is_neg() or t.is_conj():
        # A lazy view (z.conj().imag, x.conj()): its memory holds the values before
        # negation/conjugation. Like Tensor.numpy(), never hand C that memory as is.
        bit = "negative" if t.is_neg() else "conjugate"
        if written or is_strided or not may_copy:
            raise LayoutError(
                f"{where} has its {bit} bit set (a lazy view such as z.conj().imag): its memory does not "
                f"hold the values it shows. Pass x.resolve_neg() / x.resolve_conj()"
            )
        t = t.resolve_neg().resolve_conj()
    if written:
        if t.requires_grad:
            raise WritabilityError(
                f"{where} is written by C in place, but the tensor requires grad: autograd cannot "
                f"see C's write. Pass a tensor that does not require grad (e.g. x.detach().clone())"
            )
        if is_strided:
            if _self_overlaps(tuple(t.shape), t.stride(), 1):
                raise LayoutError(f"{where} is written by C, but this view overlaps itself (strides {t.stride()})")
        elif not t.is_contiguous():
            raise LayoutError(
                f"{where} is written by C, so it must be contiguous (a hidden copy would lose "
                f"the write); got shape {tuple(t.shape)} with strides {t.stride()}. Use "
                f"x.contiguous() and copy back, or tensorffi.strided(x) if C takes the strides"
            )
        return Prepared(t.data_ptr(), t, tuple(t.shape), "torch", t)
    if not is_strided and not t.is_contiguous():
        if not may_copy:
            raise LayoutError(
                f"{where} is not contiguous (strides {t.stride()}) and the function declares no "
                f"shape for it, so the bridge cannot copy it safely (C may take its own strides). "
                f"Pass x.contiguous(), declare its shape in a contract, or pass tensorffi.strided(x)"
            )
        t = t.contiguous()
    return Prepared(t.data_ptr(), t, tuple(t.shape), "torch", None)


def _prepare_ndarray(
    a: np.ndarray, where: str, ctype: str, dtype: str, written: bool, may_copy: bool, is_strided: bool
) -> Prepared:
    if dtype != "any" and a.dtype != NUMPY_DTYPES[dtype]:
        raise DTypeError(f"{where} ({ctype}) expects dtype {NUMPY_DTYPES[dtype]}, got numpy {a.dtype}")
    if a.dtype.hasobject:
        raise DTypeError(f"{where} ({ctype}) cannot take an array of Python objects")
    flags = a.flags
    if written:
        if not flags.writeable:
            raise WritabilityError(f"{where} is written by C, but the NumPy array is read-only")
        if not flags.aligned:
            raise LayoutError(f"{where} is written by C, but the NumPy array is not aligned")
        if is_strided:
            if _self_overlaps(a.shape, a.strides, a.itemsize):
                raise LayoutError(f"{where} is written by C, but this view overlaps itself (strides {a.strides})")
        elif not flags.c_contiguous:
            raise LayoutError(
                f"{where} is written by C, so it must be C-contiguous (a hidden copy would lose "
                f"the write); got strides {a.strides}. Use np.ascontiguousarray and copy back, "
                f"or tensorffi.strided(x) if C takes the strides"
            )
        return Prepared(a.__array_interface__["data"][0], a, a.shape, "numpy", None)
    if not is_strided and not (flags.c_contiguous and flags.aligned):
        if not may_copy:
            raise LayoutError(
                f"{where} is not C-contiguous (strides {a.strides}) and the function declares no "
                f"shape for it, so the bridge cannot copy it safely. Pass np.ascontiguousarray(x), "
                f"declare its shape in a contract, or pass tensorffi.strided(x)"
            )
        # A fresh C-ordered, aligned copy of the same shape (np.ascontiguousarray keeps an
        # unaligned contiguous array as is, and turns a 0-d array into shape (1,)).
        a = np.array(a, order="C", copy=True)
    return Prepared(a.__array_interface__["data"][0], a, a.shape, "numpy", None)


def _self_overlaps(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """Whether a view may have two elements sharing memory (strides and itemsize in the
    same unit). Exact for dense, strided (lda-style) and expanded views; conservative
    (True) for interleaved ones such as strides (2, 3) over shape (3, 2).

    torch's own ``_debug_has_internal_overlap`` answers "too hard" for every
    non-dense view, which refused plain submatrix views like ``a[:, :3]``."""
    if int(np.prod(shape, dtype=np.int64)) <= 1:
        return False
    dims = sorted((abs(s), n) for s, n in zip(strides, shape) if n > 1)
    extent = itemsize
    for stride, n in dims:
        if stride < extent:
            return True
        extent = stride * (n - 1) + extent
    return False


def _int_range(ffi: Any, ctype: str) -> tuple[int, int] | None:
    try:
        size = ffi.sizeof(ctype)
        signed = int(ffi.cast(ctype, -1)) < 0
    except Exception:
        return None
    if ctype in ("_Bool", "bool"):
        return (0, 1)
    return (-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1) if signed else (0, (1 << (8 * size)) - 1)


_MAX_SIZE = (1 << 63) - 1  # sizes are int64_t


def _integer(v: Any) -> int | None:
    """``v`` as a Python int if it is an integer (``int``, ``bool``, a NumPy integer or
    bool, anything with ``__index__`` such as a 0-d integer tensor), else None. cffi
    would truncate anything with ``__int__`` (``np.float32(1.5)``, a 0-d float tensor,
    ``Fraction``, ``Decimal``), so only these are handed to an integer parameter."""
    if isinstance(v, (int, np.integer, np.bool_)):
        return int(v)
    try:
        return operator.index(v)
    except Exception:
        return None


def _is_bool(v: Any) -> bool:
    """A bool of any kind: not a size, even where it is an integer."""
    return isinstance(v, (bool, np.bool_)) or getattr(v, "dtype", None) in (torch.bool, np.bool_)


def _checked_int(v: Any, where: str, ctype: str, int_range: tuple[int, int]) -> int:
    i = _integer(v)
    if i is None:
        raise ArgumentTypeError(f"{where} ({ctype}) expects an integer, got {type(v).__name__} {v!r}")
    lo, hi = int_range
    if not lo <= i <= hi:
        raise ArgumentOverflowError(
            f"{where} ({ctype}) must be in [{lo}, {hi}], got {i}: it does not fit and would be truncated"
        )
    return i


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
        return [p.written_tensor for p in self._keep.values() if isinstance(p, Prepared) and p.written_tensor is not None]

    def __setattr__(self, name: str, value: Any) -> None:
        field = self._fields.get(name)
        if field is None:
            raise AttributeError(f"struct {self._type} has no field {name!r}")
        where = f"struct {self._type}: field '{name}'"
        ct = field.type
        if ct.pointer_depth == 1 and ct.dtype is not None and not ct.is_array and value is not None:
            if ct.base == "char" and ct.const and isinstance(value, str):
                value = value.encode()
            if isinstance(value, (bytes,)) and ct.const:
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
# Binding                                                                      #
# --------------------------------------------------------------------------- #


@dataclass
class _Param:
    name: str
    pyname: str
    index: int
    kind: str  # "array" | "scalar" | "string" | "struct" | "raw"
    ctype: str
    dtype: str | None = None
    role: str = "in"  # arrays: in | out | inout
    shape: tuple[Dim, ...] | None = None
    optional: bool = False
    fill: Fill | None = None
    int_range: tuple[int, int] | None = None
    is_float: bool = False  # float, double, long double scalars
    as_int: bool = False  # passed to C as an integer address (intptr_t shim)

    @property
    def written(self) -> bool:
        return self.role != "in"


def _pyname(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) or name in ("self",) else name


class BoundFunction:
    """Plan of one bound C function; ``__call__`` is a generated, specialised wrapper."""

    def __init__(
        self,
        ffi: Any,
        cfunc: Callable[..., Any],
        decl: CFunction,
        contract: Contract,
        *,
        pointers_as_int: bool = False,
        default_returns: str = "value",
        error_message: Callable[[], str] | None = None,
        name: str | None = None,
    ) -> None:
        self.ffi = ffi
        self.cfunc = cfunc
        self.decl = decl
        self.contract = contract
        self.name = name or decl.name
        self.pointers_as_int = pointers_as_int
        self.error_message = error_message
        if decl.variadic:
            raise ContractError(f"{decl.name}: variadic functions cannot be bound safely")
        res = decl.result
        if res.text == "void":
            self.returns = "none"
        elif contract.returns is not None:
            self.returns = contract.returns
        else:
            self.returns = default_returns if (res.is_integer and res.pointer_depth == 0) else "value"
        self.result_is_string = res.pointer_depth == 1 and res.resolved == "char"
        self.params = [self._plan(i, p) for i, p in enumerate(decl.params)]
        self._check_contract()
        self.call = self._generate()
        self.__doc__ = self._doc()

    # -- planning ---------------------------------------------------------- #

    def _plan(self, index: int, p: CParam) -> _Param:
        ct = p.type
        spec: ArraySpec | None = self.contract.arrays.get(p.name)
        fill = self.contract.fills.get(p.name)
        base = _Param(p.name, _pyname(p.name), index, "raw", ct.text, as_int=self.pointers_as_int and ct.shimmable)
        if ct.pointer_depth == 0 and not ct.is_struct and not ct.is_function_pointer:
            if spec is not None:
                raise ContractError(f"{self.name}: '{p.name}' is a scalar ({ct.text}), not an array")
            base.kind = "scalar"
            if ct.is_integer:
                base.int_range = _int_range(self.ffi, ct.text.replace("const ", ""))
                if fill is None and p.name in self.contract.symbols:
                    fill = Fill(p.name, dim=Dim((p.name,)))
            elif fill is not None:
                raise ContractError(f"{self.name}: '{p.name}' = ... needs an integer parameter, not {ct.text}")
            base.is_float = ct.is_float
            base.fill = fill
            return base
        if fill is not None:
            raise ContractError(f"{self.name}: '{p.name}' = ... needs an integer parameter, not {ct.text}")
        if ct.is_struct and ct.pointer_depth == 1:
            base.kind = "struct"
            return base
        if ct.pointer_depth == 1 and ct.dtype is not None and not ct.is_function_pointer:
            if ct.const and ct.resolved == "char" and spec is None:
                base.kind = "string"
                return base
            base.kind = "array"
            base.dtype = ct.dtype
            role = spec.role if spec and spec.role else ("in" if ct.const else "inout")
            if ct.const and role != "in":
                raise ContractError(f"{self.name}: '{p.name}' is {ct.text}: C cannot write it, so it cannot be {role}")
            base.role = role
            if spec is not None:
                base.shape = spec.shape
                base.optional = spec.optional
                if role == "out" and ct.dtype == "any":
                    raise ContractError(f"{self.name}: out array '{p.name}' is void *: its dtype is unknown")
            return base
        if spec is not None:
            raise ContractError(f"{self.name}: '{p.name}' ({ct.text}) cannot be described as an array")
        return base  # raw: function pointers, T **, structs by value: cffi checks them

    def _check_contract(self) -> None:
        names = {p.name for p in self.params}
        for name in list(self.contract.arrays) + list(self.contract.fills):
            if name not in names:
                raise ContractError(f"{self.name}: the contract names '{name}', which is not a parameter of {self.decl.text}")
        for fill in self.contract.fills.values():
            if fill.numel_of is not None and fill.numel_of not in self.contract.arrays and fill.numel_of not in names:
                raise ContractError(f"{self.name}: numel({fill.numel_of}) names no array parameter")
        bound_by_inputs = set()
        for p in self.params:
            if p.kind == "array" and p.shape is not None and p.role != "out":
                for d in p.shape:
                    bound_by_inputs.update(d.symbols)
        scalar_syms = {p.name for p in self.params if p.kind == "scalar" and p.fill is not None}
        self.free_symbols = sorted(self.contract.symbols - bound_by_inputs - scalar_syms)

    @property
    def positional(self) -> list[_Param]:
        return [p for p in self.params if not (p.fill or p.role == "out" or p.optional)]

    @property
    def keyword_only(self) -> list[_Param]:
        return [p for p in self.params if p.fill or p.role == "out" or p.optional]

    @property
    def fast_path(self) -> bool:
        """No contract: every argument is a plain array or a number."""
        return not self.contract.arrays and not self.contract.fills and all(
            p.kind in ("array", "scalar") for p in self.params
        )

    # -- code generation ----------------------------------------------------- #

    def _generate(self) -> Callable[..., Any]:
        pos = [p.pyname for p in self.positional]
        kwonly = [f"{p.pyname}=None" for p in self.keyword_only] + [f"{s}=None" for s in self.free_symbols]
        sig = ", ".join(pos + (["*"] + kwonly if kwonly else []))
        allnames = [p.pyname for p in self.params] + list(self.free_symbols)
        ns: dict[str, Any] = {"_slow": self._call_slow, "_T": _Tensor, "_c": self.cfunc, "_bump": _increment_version}
        lines = [f"def {self._safe_name()}({sig}):"]
        if self.fast_path:
            conds = []
            cargs = []
            written = []
            for p in self.params:
                v = p.pyname
                if p.kind == "array":
                    c = f"type({v}) is _T and {v}.is_cpu and {v}.is_contiguous() and not {v}.is_neg() and not {v}.is_conj()"
                    if p.dtype != "any":
                        ns[f"_d{p.index}"] = TORCH_DTYPES[p.dtype]
                        # (real dtypes: only the negative bit can be set)
                        c = f"type({v}) is _T and {v}.dtype is _d{p.index} and {v}.is_cpu and {v}.is_contiguous() and not {v}.is_neg()"
                    if p.written:
                        c += f" and not {v}.requires_grad"
                        written.append(v)
                    conds.append(f"({c})")
                    if p.as_int:
                        cargs.append(f"{v}.data_ptr()")
                    else:
                        ns[f"_ct{p.index}"] = p.ctype
                        cargs.append(f"_cast(_ct{p.index}, {v}.data_ptr())")
                        ns["_cast"] = self.ffi.cast
                else:
                    if p.int_range is not None:
                        # anything else (np.int64, a float cffi would truncate) takes the checked path
                        conds.append(f"type({v}) is int")
                    cargs.append(v)
            if conds:
                lines.append(f"    if {' and '.join(conds)}:")
                lines.append("        try:")
                lines.append(f"            _r = _c({', '.join(cargs)})")
                lines.append("        except Exception:  # converting an argument failed: the checked path explains")
                lines.append(f"            return _slow({', '.join(allnames)})")
                if written:
                    lines.append(f"        _bump(({', '.join(written)},))")
                if self.returns == "status":
                    ns["_status"] = self._raise_status
                    lines.append("        if _r:")
                    lines.append("            _status(_r)")
                    lines.append("        return None")
                elif self.returns == "value" and self.result_is_string:
                    ns["_string"] = self._string
                    lines.append("        return _string(_r)")
                elif self.returns == "value":
                    lines.append("        return _r")
                elif self.returns == "none":
                    lines.append("        return None")
        lines.append(f"    return _slow({', '.join(allnames)})")
        exec(compile("\n".join(lines), f"<tensorffi bridge: {self.name}>", "exec"), ns)
        fn = ns[self._safe_name()]
        fn.__qualname__ = fn.__name__ = self.name
        fn.__doc__ = self._doc()
        fn.__wrapped_bridge__ = self  # type: ignore[attr-defined]
        return fn

    def _safe_name(self) -> str:
        return "_tf_" + "".join(ch if ch.isalnum() else "_" for ch in self.name)

    def _doc(self) -> str:
        parts = [f"Bound C function: {self.decl.text};"]
        if self.contract.source:
            parts.append(f"contract: {self.contract.source}")
        parts.append(f"returns: {self.returns}")
        return "\n".join(parts)

    # -- the general path -------------------------------------------------- #

    def _where(self, p: _Param) -> str:
        return f"{self.name}(): argument '{p.name}'"

    def _call_slow(self, *values: Any) -> Any:
        params = self.params
        nparams = len(params)
        given = dict(zip((p.name for p in params), values[:nparams]))
        extra = dict(zip(self.free_symbols, values[nparams:]))
        env: dict[str, int] = {}
        origin: dict[str, str] = {}
        cargs: list[Any] = [None] * nparams
        keep: list[Any] = []
        written: list[torch.Tensor] = []
        structs: list[Struct] = []
        kind: str | None = None
        outs: list[tuple[_Param, Any]] = []
        pending_out: list[_Param] = []
        deferred: list[tuple[_Param, tuple[int, ...]]] = []

        for p in params:
            if p.kind != "array":
                continue
            v = given[p.name]
            if v is None:
                if p.role == "out":
                    pending_out.append(p)
                    continue
                if p.optional:
                    cargs[p.index] = 0 if p.as_int else self.ffi.NULL
                    continue
                raise ArgumentTypeError(f"{self._where(p)} ({p.ctype}) expects a torch tensor or a NumPy array, got None")
            if p.dtype == "any" and isinstance(v, self.ffi.CData):
                # An opaque handle (ffi.new_handle, a C-owned object): passed as is.
                cargs[p.index] = int(self.ffi.cast("intptr_t", v)) if p.as_int else v
                keep.append(v)
                continue
            prep = prepare_array(
                v, where=self._where(p), ctype=p.ctype, dtype=p.dtype or "any", written=p.written,
                may_copy=p.shape is not None,
            )
            keep.append(prep.owner)
            if prep.written_tensor is not None:
                written.append(prep.written_tensor)
            kind = kind or prep.kind
            cargs[p.index] = prep.addr if p.as_int else self.ffi.cast(p.ctype, prep.addr)
            if p.shape is not None:
                deferred += self._bind_shape(p, prep.shape, env, origin)
            if p.role == "out":
                outs.append((p, prep.owner))

        # Scalars named like symbols (implicit fills) given by the caller bind them.
        for p in params:
            if p.kind == "scalar" and p.fill is not None and p.fill.dim is not None:
                v = given[p.name]
                d = p.fill.dim
                if v is not None and len(d.symbols) == 1 and d.factor == 1 and d.symbols[0] not in env:
                    env[d.symbols[0]] = self._as_size(p, v)
                    origin[d.symbols[0]] = f"argument '{p.name}'"
        for sym, v in extra.items():
            if v is None:
                continue
            v = self._as_size_named(sym, v)
            if sym in env and env[sym] != v:
                raise ShapeError(f"{self.name}(): {sym}={v} was passed, but {sym} = {env[sym]} from {origin[sym]}")
            env[sym] = v
            origin[sym] = f"keyword {sym}="
        for p, shape in deferred:
            self._check_products(p, shape, env)

        if pending_out:
            use_numpy = kind == "numpy"
            for p in pending_out:
                shape = tuple(self._eval_dim(p, d, env) for d in p.shape or ())
                assert p.dtype is not None
                arr: Any = np.empty(shape, NUMPY_DTYPES[p.dtype]) if use_numpy else torch.empty(shape, dtype=TORCH_DTYPES[p.dtype])
                addr = arr.__array_interface__["data"][0] if use_numpy else arr.data_ptr()
                cargs[p.index] = addr if p.as_int else self.ffi.cast(p.ctype, addr)
                keep.append(arr)
                outs.append((p, arr))

        for p in params:
            if p.kind == "array":
                continue
            v = given[p.name]
            if p.kind == "scalar":
                if p.fill is not None:
                    computed = self._eval_fill(p, env, given)
                    if v is not None:
                        v = self._as_size(p, v)
                    if v is not None and v != computed:
                        expr = f"numel({p.fill.numel_of})" if p.fill.numel_of else str(p.fill.dim)
                        raise ShapeError(
                            f"{self._where(p)} is {v}, but the array shapes give {expr} = {computed} "
                            f"(contract: {self.contract.source!r})"
                        )
                    v = computed
                if p.int_range is not None:
                    v = self._check_int(p, v)
                elif p.is_float and type(v) is not float:
                    self._check_float(p, v)
                cargs[p.index] = v
            elif p.kind == "struct":
                if isinstance(v, Struct):
                    structs.append(v)
                    keep.append(v)
                    cargs[p.index] = v.cdata
                elif v is None:
                    cargs[p.index] = self.ffi.NULL
                else:
                    cargs[p.index] = v
            elif p.kind == "string":
                if isinstance(v, str):
                    v = v.encode()
                if isinstance(v, (_Tensor, _ndarray)):
                    prep = prepare_array(v, where=self._where(p), ctype=p.ctype, dtype="uint8" if not isinstance(v, _Tensor) or v.dtype != torch.int8 else "int8", written=False, may_copy=False)
                    keep.append(prep.owner)
                    v = self.ffi.cast(p.ctype, prep.addr)
                cargs[p.index] = self.ffi.NULL if v is None else v
            else:
                cargs[p.index] = v

        try:
            result = self.cfunc(*cargs)
        except (TypeError, OverflowError) as exc:
            raise self._explain_call_error(exc, cargs) from None
        finally:
            for s in structs:
                written.extend(s.written_tensors())
            if written:
                _increment_version(tuple(written))
        del keep
        if self.returns == "status":
            if result:
                self._raise_status(result)
            result = None
        elif self.returns == "none":
            result = None
        elif self.result_is_string:
            result = self._string(result)
        out_values = [arr for _, arr in sorted(outs, key=lambda po: po[0].index)]
        if not out_values:
            return result
        packed = out_values[0] if len(out_values) == 1 else tuple(out_values)
        if self.returns == "value":
            return (result, *out_values)
        return packed

    # -- helpers ----------------------------------------------------------- #

    def _string(self, result: Any) -> str | None:
        return None if result == self.ffi.NULL else self.ffi.string(result).decode("utf-8", "replace")

    def _raise_status(self, code: int) -> None:
        message = ""
        if self.error_message is not None:
            message = self.error_message()
        raise error_for_status(int(code), self.name, message or f"{self.name}() returned status {code}")

    def _bind_shape(
        self, p: _Param, shape: tuple[int, ...], env: dict[str, int], origin: dict[str, str]
    ) -> list[tuple[_Param, tuple[int, ...]]]:
        assert p.shape is not None
        if len(shape) != len(p.shape):
            dims = ", ".join(str(d) for d in p.shape)
            raise ShapeError(
                f"{self._where(p)} must have {len(p.shape)} dimension(s) [{dims}], got shape {tuple(shape)}"
            )
        deferred = False
        for axis, (d, size) in enumerate(zip(p.shape, shape)):
            if not d.symbols:
                if size != d.factor:
                    raise ShapeError(f"{self._where(p)}: dimension {axis} must be {d.factor}, got {size} (shape {tuple(shape)})")
                continue
            if len(d.symbols) == 1:
                sym = d.symbols[0]
                if sym in env:
                    if env[sym] * d.factor != size:
                        want = f"{sym} = {env[sym]}" if d.factor == 1 else f"{d} = {env[sym] * d.factor}"
                        raise ShapeError(
                            f"{self._where(p)}: dimension {axis} ({d}) is {size}, but {want} "
                            f"from {origin[sym]} (shape {tuple(shape)})"
                        )
                    continue
                if size % d.factor:
                    raise ShapeError(f"{self._where(p)}: dimension {axis} ({d}) must be a multiple of {d.factor}, got {size}")
                value = size // d.factor
                env[sym] = value
                origin[sym] = f"argument '{p.name}'"
            else:
                deferred = True
        return [(p, shape)] if deferred else []

    def _check_products(self, p: _Param, shape: tuple[int, ...], env: dict[str, int]) -> None:
        assert p.shape is not None
        for axis, (d, size) in enumerate(zip(p.shape, shape)):
            if len(d.symbols) > 1:
                want = self._eval_dim(p, d, env)
                if want != size:
                    raise ShapeError(f"{self._where(p)}: dimension {axis} ({d}) must be {want}, got {size}")

    def _eval_dim(self, p: _Param, d: Dim, env: dict[str, int]) -> int:
        value = d.factor
        for sym in d.symbols:
            if sym not in env:
                raise ShapeError(f"{self.name}(): size '{sym}' of argument '{p.name}' is unknown: pass {sym}=...")
            value *= env[sym]
        return value

    def _eval_fill(self, p: _Param, env: dict[str, int], given: dict[str, Any]) -> int:
        fill = p.fill
        assert fill is not None
        if fill.numel_of is not None:
            arr = given.get(fill.numel_of)
            if isinstance(arr, strided):
                arr = arr.obj
            if arr is None:
                raise ShapeError(f"{self._where(p)}: numel({fill.numel_of}) of a missing argument")
            return int(np.prod(arr.shape, dtype=np.int64)) if isinstance(arr, _ndarray) else int(arr.numel())
        assert fill.dim is not None
        return self._eval_dim(p, fill.dim, env)

    def _as_size(self, p: _Param, v: Any) -> int:
        """A length passed for a filled-in parameter: an integer (not a bool, not a float
        equal to one), >= 0, that fits the parameter's C type (checked before anything
        is allocated from it)."""
        i = None if _is_bool(v) else _integer(v)
        if i is None:
            raise ArgumentTypeError(f"{self._where(p)} ({p.ctype}) expects an integer, got {type(v).__name__} {v!r}")
        if i < 0:
            raise ShapeError(f"{self._where(p)} is a size and must be >= 0, got {i}")
        return self._check_int(p, i)

    def _as_size_named(self, sym: str, v: Any) -> int:
        i = None if _is_bool(v) else _integer(v)
        if i is None or not 0 <= i <= _MAX_SIZE:
            raise ShapeError(f"{self.name}(): {sym}= must be an integer in [0, {_MAX_SIZE}], got {v!r}")
        return i

    def _check_int(self, p: _Param, v: Any) -> Any:
        if p.int_range is None:
            return v
        return _checked_int(v, self._where(p), p.ctype, p.int_range)

    def _check_float(self, p: _Param, v: Any) -> None:
        """cffi converts a float argument with ``__float__``, which may raise anything
        (a 2-element tensor: ValueError); check it here so the error names ``p``."""
        try:
            if isinstance(v, (str, bytes, bytearray)):  # float("3") parses; C takes no strings
                raise TypeError
            float(v)
        except OverflowError:
            raise ArgumentOverflowError(f"{self._where(p)} ({p.ctype}) cannot hold {v!r}: it is out of range") from None
        except Exception:
            raise ArgumentTypeError(f"{self._where(p)} ({p.ctype}) expects a number, got {type(v).__name__}") from None

    def _explain_call_error(self, exc: Exception, cargs: list[Any]) -> Exception:
        for p in self.params:
            if p.kind != "scalar":
                continue
            v = cargs[p.index]
            if p.int_range is not None:
                if not isinstance(v, (int, np.integer)):
                    return ArgumentTypeError(f"{self._where(p)} ({p.ctype}) expects an integer, got {type(v).__name__} {v!r}")
                try:
                    self._check_int(p, v)
                except ArgumentOverflowError as err:
                    return err
            elif not isinstance(v, (float, np.floating)):
                try:
                    self._check_float(p, v)
                except (ArgumentOverflowError, ArgumentTypeError) as err:
                    return err
        cls = ArgumentOverflowError if isinstance(exc, OverflowError) else ArgumentTypeError
        return cls(f"{self.name}(): {exc}")


# --------------------------------------------------------------------------- #
# Tensor kernels: the bound function as the body of a PyTorch operator          #
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class TensorArg:
    """One argument of a bound function seen as an operator (in schema order).

    ``kind``: ``"tensor"`` (an array parameter), ``"float"``, ``"int"``, ``"bool"``
    (scalar parameters) or ``"size"`` (a size the caller gives because no input
    array fixes it: an ``out`` array's symbol).
    """

    name: str
    kind: str
    dtype: str | None = None  # tensors: canonical dtype name ("any" for void *)
    mutated: bool = False  # tensors: C writes it (contract role inout)
    optional: bool = False  # tensors: may be None (passed to C as NULL)
    shape: tuple[Dim, ...] | None = None  # tensors: the contract's shape, if any


@dataclass(frozen=True)
class TensorOutput:
    """One result of a bound function seen as an operator: an ``out`` array (with its
    contract shape) or, for ``return: value`` functions, the C result as a 0-dim tensor."""

    name: str
    dtype: str
    shape: tuple[Dim, ...]  # () for the C result (named "return")


def _scalar_kind(ct: Any) -> str | None:
    if ct.is_float:
        return "float"
    if ct.is_integer:
        return "bool" if ct.resolved in ("_Bool", "bool") or ct.base == "bool" else "int"
    return None


def tensor_signature(
    bound: BoundFunction, hidden: Collection[str] = ()
) -> tuple[list[TensorArg], list[TensorOutput]]:
    """The arguments and results of ``bound`` as an operator on tensors.

    Arguments, in declaration order: every array that is not ``out`` (inout arrays
    are ``mutated``) and every scalar the contract does not fill in; then the sizes
    that no input array fixes. ``out`` arrays become results, followed by the C
    result (named ``"return"``) for ``return: value`` functions. Parameters named in
    ``hidden`` are left out: the caller supplies them another way (a thread count,
    NULL for a progress callback and its handle).
    Raises :class:`ContractError` for what an operator cannot take (strings,
    structs, function pointers, out arrays of unknown shape).
    """
    hidden = set(hidden)
    unknown = hidden - {p.name for p in bound.params}
    if unknown:
        raise ContractError(f"{bound.name}: hidden names no parameter: {', '.join(sorted(unknown))}")
    fixed_by_inputs: set[str] = set()
    for p in bound.params:
        if p.kind == "array" and p.role != "out" and p.shape is not None and not p.optional:
            for d in p.shape:
                fixed_by_inputs.update(d.symbols)
    args: list[TensorArg] = []
    outs: list[TensorOutput] = []
    for p in bound.params:
        ct = bound.decl.params[p.index].type
        if p.name in hidden:
            if p.fill is not None or p.role == "out":
                raise ContractError(f"{bound.name}: '{p.name}' is filled in by the contract; it cannot be hidden")
            continue
        if p.kind == "array":
            if p.role == "out":
                assert p.dtype is not None and p.shape is not None
                outs.append(TensorOutput(p.name, p.dtype, p.shape))
            else:
                args.append(TensorArg(p.pyname, "tensor", p.dtype, p.role == "inout", p.optional, p.shape))
        elif p.kind == "scalar":
            fill = p.fill
            if fill is not None:
                own = fill.dim is not None and fill.dim.symbols == (p.name,) and fill.dim.factor == 1
                if own and p.name not in fixed_by_inputs:
                    args.append(TensorArg(p.pyname, "size"))
                continue
            kind = _scalar_kind(ct)
            if kind is None:
                raise ContractError(f"{bound.name}: scalar '{p.name}' ({ct.text}) cannot be an operator argument")
            args.append(TensorArg(p.pyname, kind))
        else:
            raise ContractError(
                f"{bound.name}: '{p.name}' ({p.ctype}) cannot be an operator argument: operators take "
                f"tensors and numbers only (wrap the function in Python and use tensorffi.ops.define)"
            )
    args += [TensorArg(sym, "size") for sym in bound.free_symbols]
    if bound.returns == "value":
        res = bound.decl.result
        dtype = _SIZED_DTYPES.get(res.base) or ELEMENT_DTYPES.get(res.resolved)
        if res.pointer_depth or dtype in (None, "any"):
            raise ContractError(
                f"{bound.name}: its result ({res.text}) cannot be an operator result; declare "
                f"'return: status' or 'return: none' in its contract"
            )
        outs.append(TensorOutput("return", dtype, ()))
    names = [a.name for a in args]
    if len(set(names)) != len(names):
        raise ContractError(f"{bound.name}: argument names repeat as an operator: {names}")
    return args, outs


def _dim_expr(d: Dim) -> str:
    parts = [f"_y_{s}" for s in d.symbols] + ([str(d.factor)] if d.factor != 1 or not d.symbols else [])
    return "*".join(parts)


def tensor_kernel(
    bound: BoundFunction,
    hidden: Mapping[str, Callable[[], Any]] | None = None,
    *,
    grad_guard: Callable[..., None] | None = None,
) -> Callable[..., Any]:
    """A function that calls ``bound`` on CPU tensors in :func:`tensor_signature` order.

    It is the body of an operator (tensorffi.ops): the dispatcher guarantees CPU
    tensors, so the generated code checks only dtype, layout and the contract's
    sizes, allocates the ``out`` tensors and calls C (a few hundred nanoseconds).
    Anything unusual (a non-contiguous input, a wrong dtype or size, an optional
    array given, an integer out of range) takes the bridge's general path, which
    copies or raises the usual errors. Unlike a bound function, it writes tensors
    that require grad: the operator layer decides (autograd cannot see C, so it
    refuses such writes while grad mode is on). ``hidden`` maps parameters left out
    of the signature to functions returning their value at each call.
    ``grad_guard(*tensor_args)``, if given, is called first whenever grad mode is on
    and a tensor argument requires grad; it is expected to raise.
    """
    hidden = dict(hidden or {})
    args, outs = tensor_signature(bound, hidden)
    by_name = {p.name: p for p in bound.params}
    argnames = [a.name for a in args]
    ns: dict[str, Any] = {
        "_c": bound.cfunc,
        "_cast": bound.ffi.cast,
        "_NULL": 0 if bound.pointers_as_int else bound.ffi.NULL,
        "_bump": _increment_version,
        "_empty": torch.empty,
        "_slow": _tensor_slow_path(bound, args, outs, hidden),
    }
    fallback = f"return _slow({', '.join(argnames)})"
    body: list[str] = []
    bound_syms: set[str] = set()
    deferred: list[tuple[str, int, Dim]] = []
    arg_of_param = {a.name: a for a in args}
    pyname_of = {p.name: p.pyname for p in bound.params}
    tensor_names = [a.name for a in args if a.kind == "tensor"]
    if grad_guard is not None and tensor_names:
        ns["_guard"] = grad_guard
        ns["_ge"] = torch.is_grad_enabled
        needs = " or ".join(
            f"({a.name} is not None and {a.name}.requires_grad)" if a.optional else f"{a.name}.requires_grad"
            for a in args
            if a.kind == "tensor"
        )
        body.append(f"if ({needs}) and _ge(): _guard({', '.join(tensor_names)})")

    for a in args:
        if a.kind != "tensor":
            continue
        v = a.name
        if a.optional:
            body.append(f"if {v} is not None: {fallback}")
            continue
        conds = [f"{v}.is_contiguous()"]
        if a.dtype != "any":
            ns[f"_d_{v}"] = TORCH_DTYPES[a.dtype or "any"]
            conds.insert(0, f"{v}.dtype is _d_{v}")
        body.append(f"if not ({' and '.join(conds)}): {fallback}")
        if a.shape is None:
            continue
        body.append(f"_s_{v} = {v}.shape")
        body.append(f"if len(_s_{v}) != {len(a.shape)}: {fallback}")
        for axis, d in enumerate(a.shape):
            size = f"_s_{v}[{axis}]"
            if not d.symbols:
                body.append(f"if {size} != {d.factor}: {fallback}")
            elif len(d.symbols) == 1:
                sym = d.symbols[0]
                if sym in bound_syms:
                    body.append(f"if {size} != {_dim_expr(d)}: {fallback}")
                elif d.factor == 1:
                    body.append(f"_y_{sym} = {size}")
                    bound_syms.add(sym)
                else:
                    body.append(f"if {size} % {d.factor}: {fallback}")
                    body.append(f"_y_{sym} = {size} // {d.factor}")
                    bound_syms.add(sym)
            else:
                deferred.append((v, axis, d))
    for a in args:
        if a.kind == "size":
            body.append(f"if type({a.name}) is not int or {a.name} < 0: {fallback}")
            body.append(f"_y_{a.name} = {a.name}")
            bound_syms.add(a.name)
    for v, axis, d in deferred:
        missing = set(d.symbols) - bound_syms
        if missing:
            body.append(fallback)  # unreachable sizes: let the general path explain
            break
        body.append(f"if _s_{v}[{axis}] != {_dim_expr(d)}: {fallback}")
    for i, o in enumerate(outs):
        if o.name == "return":
            continue
        if any(set(d.symbols) - bound_syms for d in o.shape):
            body.append(fallback)
            break
        ns[f"_od{i}"] = TORCH_DTYPES[o.dtype]
        dims = ", ".join(_dim_expr(d) for d in o.shape)
        # torch.empty(d0, d1, dtype=...) parses faster than torch.empty((d0, d1), ...)
        body.append(f"_o{i} = _empty({dims or '()'}, dtype=_od{i})")

    cargs: list[str] = []
    out_index = {o.name: i for i, o in enumerate(outs)}
    for p in bound.params:
        if p.name in hidden:
            ns[f"_h_{p.name}"] = hidden[p.name]
            cargs.append(f"_h_{p.name}()")
        elif p.kind == "array":
            ref = f"_o{out_index[p.name]}" if p.role == "out" else p.pyname
            if arg_of_param.get(p.pyname) is not None and arg_of_param[p.pyname].optional:
                cargs.append("_NULL")
            elif bound.pointers_as_int:
                cargs.append(f"{ref}.data_ptr()")
            else:
                ns[f"_ct{p.index}"] = p.ctype
                cargs.append(f"_cast(_ct{p.index}, {ref}.data_ptr())")
        elif p.fill is not None:
            if p.pyname in arg_of_param:
                cargs.append(p.pyname)
            elif p.fill.numel_of is not None:
                src = by_name.get(p.fill.numel_of)
                if src is None or src.kind != "array" or src.role == "out":
                    body.append(fallback)
                    cargs.append("0")
                else:
                    cargs.append(f"{pyname_of[src.name]}.numel()")
            else:
                assert p.fill.dim is not None
                if set(p.fill.dim.symbols) - bound_syms:
                    body.append(fallback)
                cargs.append(_dim_expr(p.fill.dim))
        else:
            cargs.append(p.pyname)
    body.append("try:")
    body.append(f"    _r = _c({', '.join(cargs)})")
    body.append("except (TypeError, OverflowError):")
    body.append(f"    {fallback}")
    mutated = [a.name for a in args if a.kind == "tensor" and a.mutated]
    if mutated:
        body.append(f"_bump(({', '.join(mutated)},))")
    if bound.returns == "status":
        ns["_status"] = bound._raise_status
        body.append("if _r: _status(_r)")
    results = [f"_o{i}" for i, o in enumerate(outs) if o.name != "return"]
    if bound.returns == "value":
        ns["_tensor"] = torch.tensor
        ns["_rd"] = TORCH_DTYPES[outs[-1].dtype]
        results.append("_tensor(_r, dtype=_rd)")
    if not results:
        body.append("return None")
    elif len(results) == 1:
        body.append(f"return {results[0]}")
    else:
        body.append(f"return ({', '.join(results)})")
    fname = "_tk" + bound._safe_name()
    # The dispatcher drops trailing arguments equal to their defaults (None for
    # optional tensors), so those take defaults here.
    params = list(argnames)
    for i in range(len(args) - 1, -1, -1):
        if not args[i].optional:
            break
        params[i] += "=None"
    src = f"def {fname}({', '.join(params)}):\n" + "".join(f"    {line}\n" for line in body)
    exec(compile(src, f"<tensorffi tensor kernel: {bound.name}>", "exec"), ns)
    fn = ns[fname]
    fn.__qualname__ = fn.__name__ = bound.name
    fn.__tensorffi_source__ = src  # type: ignore[attr-defined]
    return fn


def _tensor_slow_path(
    bound: BoundFunction, args: list[TensorArg], outs: list[TensorOutput], hidden: Mapping[str, Callable[[], Any]]
) -> Callable[..., Any]:
    """The general path of a tensor kernel: the bridge's checked call, with written
    tensors detached (same memory and version counter; the operator layer has
    already decided that the write is allowed)."""
    pos = {a.name: i for i, a in enumerate(args)}
    value_result = bound.returns == "value"
    result_dtype = TORCH_DTYPES[outs[-1].dtype] if value_result else None

    def slow(*values: Any) -> Any:
        given: list[Any] = []
        for p in bound.params:
            if p.name in hidden:
                given.append(hidden[p.name]())
            elif p.pyname in pos:
                v = values[pos[p.pyname]]
                if p.kind == "array" and p.written and isinstance(v, _Tensor) and v.requires_grad:
                    v = v.detach()
                given.append(v)
            else:
                given.append(None)
        given += [values[pos[s]] for s in bound.free_symbols]
        result = bound._call_slow(*given)
        if not value_result:
            return result
        if isinstance(result, tuple):
            return (*result[1:], torch.tensor(result[0], dtype=result_dtype))
        return torch.tensor(result, dtype=result_dtype)

    return slow


def bind_function(
    ffi: Any,
    cfunc: Callable[..., Any],
    decl: CFunction,
    contract: Contract,
    **options: Any,
) -> Callable[..., Any]:
    """Bind one C function through the bridge; returns the checked Python callable."""
    return BoundFunction(ffi, cfunc, decl, contract, **options).call


__all__ = ["bind_function", "BoundFunction", "TensorArg", "TensorOutput", "tensor_signature", "tensor_kernel", "Struct", "strided", "prepare_array", "TORCH_DTYPES", "NUMPY_DTYPES", "NativeError"]
