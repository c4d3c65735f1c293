# SPDX-License-Identifier: MIT
"""The bridge: the one place where a tensor or an array becomes a C pointer.

A C function is bound through its :class:`~tensorffi.plan.Plan` (its declaration,
parsed with ``const`` kept, plus an optional :mod:`contract <tensorffi.contract>`,
compiled and validated once). From the plan this module generates, once per
function, specialised Python code for the direct call, for the body of a PyTorch
operator and for the operator's shape rule. Every call checks every argument
*before* C touches memory:

* element type against the C pointer type (``float *`` is float32, ``void *`` any);
* device: only CPU memory; CUDA, meta and fake tensors are refused and their
  ``data_ptr()`` is never read; sparse and nested tensors are refused;
* memory: the bytes the tensor's storage really holds must cover the tensor (a
  storage resized under a tensor is refused, never handed to C), and the storage
  itself is held for the whole call;
* lazy views whose memory does not hold their values (the negative or conjugate
  bit: ``z.conj().imag``) are resolved where a copy is allowed (a read argument with
  a contract shape) and refused elsewhere, as ``Tensor.numpy()`` refuses them;
* written arguments (non-``const`` pointers, ``out``/``inout`` roles) must be
  contiguous and writable: read-only arrays, tensors that require grad, inference
  tensors outside inference mode, expanded and self-overlapping views are refused,
  never silently copied (a copy would lose the write); written arguments that
  overlap each other, or an input, are refused. After the call the tensor's
  autograd version counter is bumped;
* read-only arguments may be copied to contiguous memory only where a contract
  declares their shape; otherwise a non-contiguous input is refused too, because
  the C function may walk its own strides and read past a copy. Pass
  :func:`strided` to hand C a view's own pointer on purpose;
* sizes against the contract's symbolic shapes; length arguments are filled in;
  ``out`` arrays are allocated in the caller's kind (torch in, torch out);
* scalars against the range of their C type (``OverflowError``, also for a finite
  double that a C ``float`` cannot hold); a float (of any kind) for an integer
  parameter is a ``TypeError``, never truncated;
* strings: ``str`` and ``bytes`` (NUL-terminated by the bridge; an embedded NUL is
  refused), byte arrays only if they hold a NUL; ``None`` only where the contract
  says ``NAME: ?``;
* lifetimes: every object whose memory C sees (including copies, and tensors placed
  in a :class:`Struct`) is referenced until the call returns.

cffi releases the GIL around every call.
"""
from __future__ import annotations

import inspect
import math
import operator
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import cffi
import numpy as np
import torch

from . import _codegen
from ._bridge import lower as _lower
from ._decl import CFunction, Declarations
from .contract import Contract, Dim
from .errors import (
    AllocationError,
    ArgumentOverflowError,
    ArgumentTypeError,
    ContractError,
    DeviceError,
    DTypeError,
    LayoutError,
    NativeError,
    ShapeError,
    TensorFFIError,
    WritabilityError,
    error_for_status,
)
from .handles import Handle
from .plan import OpArg, OpOutput, Param, Plan, _int_range, build_plan, operator_signature, pyname

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
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
NUMPY_DTYPES: dict[str, np.dtype] = {name: np.dtype(name) for name in TORCH_DTYPES if name != "bfloat16"}

_Tensor = torch.Tensor
_ndarray = np.ndarray
_increment_version = torch._C._increment_version
_FFI = cffi.FFI()  # its CData type; any FFI can view NumPy memory
try:  # NumPy addresses: a compiled module's cast and from_buffer are C functions (cffi.FFI's are Python)
    from ._native import ffi as _CFFI  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - only on a broken install (tensorffi._lib explains)
    _CFFI = _FFI
_INTPTR = _CFFI.typeof("intptr_t")
_CHARS = _CFFI.typeof("char[]")
_CData = _FFI.CData
_FLT_MAX = float(np.finfo(np.float32).max)
_FLT_NORMAL = float(np.finfo(np.float32).tiny)


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
    """An argument ready for C: its address and what keeps its memory alive."""

    addr: int
    owner: Any  # the array itself, or its contiguous copy
    shape: tuple[int, ...]
    kind: str  # "torch" | "numpy"
    written_tensor: torch.Tensor | None  # a caller's tensor C writes (version bump)
    storage: Any = None  # the torch storage C sees, held for the call

    @property
    def nbytes(self) -> int:
        o = self.owner
        return int(o.nbytes) if isinstance(o, (_Tensor, _ndarray)) else 0


def _check_storage(t: torch.Tensor, where: str) -> Any:
    """The storage of ``t``, which must hold every byte of ``t`` (a storage resized
    under a tensor is refused). Returned so the caller holds it for the call."""
    st = t.untyped_storage()
    addr = t.data_ptr()
    if t.numel() == 0:
        return st
    lo = st.data_ptr()
    # torch strides are never negative: the view reaches [addr, addr + span)
    span = (sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1) * t.element_size()
    low = addr
    if not addr or low < lo or low + span > lo + st.nbytes():
        raise LayoutError(
            f"{where}: the tensor's storage holds {st.nbytes()} bytes, fewer than the {span} bytes "
            f"the tensor spans from offset {t.storage_offset()} (was its storage resized, e.g. "
            f"x.untyped_storage().resize_()?). C is never handed such memory"
        )
    return st


def prepare_array(
    value: Any,
    *,
    where: str,
    ctype: str,
    dtype: str,
    written: bool,
    may_copy: bool,
    grad_writes_ok: bool = False,
) -> Prepared:
    """Check one array argument and return its C address (see the module docstring).

    ``where`` names the argument in errors ("tf_foo(): argument 'x'").
    ``grad_writes_ok``: the operator layer has decided that writing a tensor that
    requires grad is allowed (under no_grad).
    """
    is_strided = isinstance(value, strided)
    if is_strided:
        value = value.obj
    if isinstance(value, _Tensor):
        return _prepare_tensor(value, where, ctype, dtype, written, may_copy, is_strided, grad_writes_ok)
    if isinstance(value, _ndarray):
        return _prepare_ndarray(value, where, ctype, dtype, written, may_copy, is_strided)
    if isinstance(value, (bytes, bytearray, memoryview)) and dtype in ("uint8", "int8", "any"):
        if isinstance(value, memoryview) and not value.c_contiguous:
            raise LayoutError(f"{where} ({ctype}) is a memoryview that is not C-contiguous")
        arr = np.frombuffer(value, dtype=np.uint8 if dtype == "any" else dtype)
        return _prepare_ndarray(arr, where, ctype, dtype, written, may_copy, is_strided)
    if value is None:
        raise ArgumentTypeError(f"{where} ({ctype}) expects a torch tensor or a NumPy array, got None")
    if hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        # A foreign array (JAX, CuPy...): seen through NumPy, which keeps DLPack's
        # read-only flag (once torch.from_dlpack has made a tensor, that flag is gone:
        # torch tensors carry none).
        try:
            arr = np.from_dlpack(value)
        except (BufferError, RuntimeError, TypeError, ValueError) as exc:
            raise DeviceError(f"{where} ({ctype}) is a DLPack array NumPy cannot view in CPU memory: {exc}") from None
        return _prepare_ndarray(arr, where, ctype, dtype, written, may_copy, is_strided)
    raise ArgumentTypeError(
        f"{where} ({ctype}) expects a torch tensor or a NumPy array, got {_describe(value)}"
    )


def _prepare_tensor(
    t: torch.Tensor, where: str, ctype: str, dtype: str, written: bool, may_copy: bool, is_strided: bool,
    grad_writes_ok: bool = False,
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
        raise LayoutError(
            f"{where} has layout {t.layout}; only dense (strided) tensors can be passed to C (use .to_dense())"
        )
    if t.is_nested:
        raise LayoutError(f"{where} is a nested tensor; only dense tensors can be passed to C")
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
    storage = _check_storage(t, where)
    if written:
        if t.requires_grad and not grad_writes_ok:
            raise WritabilityError(
                f"{where} is written by C in place, but the tensor requires grad: autograd cannot "
                f"see C's write. Pass a tensor that does not require grad (e.g. x.detach().clone())"
            )
        if t.is_inference() and not torch.is_inference_mode_enabled():
            raise WritabilityError(
                f"{where} is written by C in place, but it is an inference tensor and inference mode "
                f"is off (torch forbids that too). Call it under torch.inference_mode(), or pass a clone"
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
        return Prepared(t.data_ptr(), t, tuple(t.shape), "torch", t, storage)
    if not is_strided and not t.is_contiguous():
        if not may_copy:
            raise LayoutError(
                f"{where} is not contiguous (strides {t.stride()}) and the function declares no "
                f"shape for it, so the bridge cannot copy it safely (C may take its own strides). "
                f"Pass x.contiguous(), declare its shape in a contract, or pass tensorffi.strided(x)"
            )
        t = t.contiguous()
        storage = t.untyped_storage()
    return Prepared(t.data_ptr(), t, tuple(t.shape), "torch", None, storage)


def _numpy_address(a: np.ndarray) -> int:
    if a.flags.c_contiguous:  # (the generated call's NumPy fast path inlines this line)
        return int(_CFFI.cast(_INTPTR, _CFFI.from_buffer(_CHARS, a)))
    return int(a.__array_interface__["data"][0])


def _tensor_base(a: np.ndarray) -> torch.Tensor | None:
    """The torch tensor whose memory a NumPy array views (``t.numpy()``), if any."""
    base = a.base
    for _ in range(64):
        if base is None or isinstance(base, _Tensor):
            return base
        base = getattr(base, "base", None) if isinstance(base, _ndarray) else None
    return None


def _prepare_ndarray(
    a: np.ndarray, where: str, ctype: str, dtype: str, written: bool, may_copy: bool, is_strided: bool
) -> Prepared:
    if dtype != "any" and a.dtype != NUMPY_DTYPES[dtype]:
        raise DTypeError(f"{where} ({ctype}) expects dtype {NUMPY_DTYPES[dtype]}, got numpy {a.dtype}")
    if a.dtype.hasobject:
        raise DTypeError(f"{where} ({ctype}) cannot take an array of Python objects")
    owner_tensor = _tensor_base(a)
    storage = None
    if owner_tensor is not None and a.size:
        # a view of a torch tensor's memory (t.numpy()): that storage must still hold it
        storage = owner_tensor.untyped_storage()
        lo, addr = storage.data_ptr(), int(a.__array_interface__["data"][0])
        if not lo or addr < lo or addr + a.nbytes > lo + storage.nbytes():
            raise LayoutError(
                f"{where}: the NumPy array views a torch tensor whose storage no longer holds it "
                f"(was it resized?). C is never handed such memory"
            )
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
        return Prepared(_numpy_address(a), a, a.shape, "numpy", None, storage)
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
    return Prepared(_numpy_address(a), a, a.shape, "numpy", None, storage)


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


def _checked_float(v: Any, where: str, ctype: str, bits: int) -> float:
    """``v`` as a Python float for a C ``float``/``double``: a number (not a string),
    and finite values that the C type cannot hold (``1e300`` or ``1e-50`` for a
    ``float``) are an :class:`ArgumentOverflowError`; NaN and infinities pass."""
    if isinstance(v, (str, bytes, bytearray)):  # float("3") parses; C takes no strings
        raise ArgumentTypeError(f"{where} ({ctype}) expects a number, got {type(v).__name__}")
    if (
        isinstance(v, complex)
        or (isinstance(v, (np.generic, np.ndarray)) and v.dtype.kind == "c")
        or (isinstance(v, _Tensor) and v.is_complex())
    ):
        raise ArgumentTypeError(f"{where} ({ctype}) expects a real number, got a complex {type(v).__name__}")
    try:
        f = float(v)
    except OverflowError:
        raise ArgumentOverflowError(f"{where} ({ctype}) cannot hold {v!r}: it is out of range") from None
    except Exception:
        raise ArgumentTypeError(f"{where} ({ctype}) expects a number, got {type(v).__name__}") from None
    if bits == 32 and math.isfinite(f) and f != 0.0:
        r = float(np.float32(f)) if abs(f) <= 1e39 else math.inf
        if math.isinf(r):
            raise ArgumentOverflowError(f"{where} ({ctype}) cannot hold {f!r}: it is beyond float32's range")
        if r == 0.0:
            raise ArgumentOverflowError(f"{where} ({ctype}) cannot hold {f!r}: it is below float32's smallest value")
    return f


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
            if isinstance(p, Prepared) and isinstance(p.owner, _Tensor):
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


# --------------------------------------------------------------------------- #
# Helpers the generated code calls (errors are built here, raised there)       #
# --------------------------------------------------------------------------- #


def _bumps(*tensors: Any) -> None:
    """Bump the autograd version counter of the tensors C wrote (None entries skipped)."""
    ts = tuple(t for t in tensors if t is not None)
    if ts:
        _increment_version(ts)


def _sym_check(ok: Any, make: Callable[[], Exception]) -> None:
    """A shape-rule check: ``ok`` is a bool or a SymBool (dynamic shapes)."""
    if ok is True:
        return
    if isinstance(ok, bool):
        raise make()
    torch._check_with(ShapeError, ok, lambda: str(make()))


def _numel(v: Any) -> int:
    if isinstance(v, strided):
        v = v.obj
    if isinstance(v, _Tensor):
        return int(v.numel())
    if isinstance(v, _ndarray):
        return int(v.size)
    return len(v)


def _overlap(ranges: Sequence[tuple[str, int, int, bool]], fname: str) -> LayoutError | None:
    """Written arguments that overlap each other or an input: (name, address, nbytes, written)."""
    spans = sorted((a, a + n, name, w) for name, a, n, w in ranges if n > 0 and a)
    for i in range(len(spans)):
        a0, e0, n0, w0 = spans[i]
        for j in range(i + 1, len(spans)):
            a1, e1, n1, w1 = spans[j]
            if a1 >= e0:
                break
            if w0 or w1:
                what = "both are written" if w0 and w1 else f"'{n0 if w0 else n1}' is written while C reads the other"
                return LayoutError(
                    f"{fname}(): arguments '{n0}' and '{n1}' share memory ({what}): C would read or write "
                    f"through one what it changes through the other. Pass separate arrays (e.g. x.clone())"
                )
    return None


def _size_value(v: Any, where: str, ctype: str, int_range: tuple[int, int] | None) -> int:
    """A length passed for a size: an integer (not a bool, not a float equal to one),
    >= 0, that fits the parameter's C type (checked before anything is allocated)."""
    i = None if _is_bool(v) else _integer(v)
    if i is None:
        raise ArgumentTypeError(f"{where} ({ctype}) expects an integer, got {type(v).__name__} {v!r}")
    if i < 0:
        raise ShapeError(f"{where} is a size and must be >= 0, got {i}")
    if int_range is not None and i > int_range[1]:
        raise ArgumentOverflowError(
            f"{where} ({ctype}) must be in [{int_range[0]}, {int_range[1]}], got {i}: it does not fit and would be truncated"
        )
    return i


def _named_size(v: Any, fname: str, sym: str) -> int:
    i = None if _is_bool(v) else _integer(v)
    if i is None or not 0 <= i <= _MAX_SIZE:
        raise ShapeError(f"{fname}(): {sym}= must be an integer in [0, {_MAX_SIZE}], got {v!r}")
    return i


def _shape_text(d: Dim) -> str:
    return str(d)


# --------------------------------------------------------------------------- #
# The code generator                                                           #
# --------------------------------------------------------------------------- #


class _Gen:
    """Generates one specialised function from a plan.

    ``mode``: ``"call"`` (the direct call: torch or NumPy arguments, outputs in the
    caller's kind), ``"kernel"`` (an operator's body: torch tensors in operator
    order, hidden parameters, outputs as tensors), ``"shape"`` (the operator's shape
    rule: the same binding steps on fake tensors and symbolic sizes, no C call).
    """

    def __init__(
        self,
        bound: "BoundFunction",
        mode: str,
        hidden: Mapping[str, Callable[[], Any]] | None = None,
        grad_guard: Callable[..., None] | None = None,
    ) -> None:
        self.b = bound
        self.plan = bound.plan
        self.mode = mode
        self.hidden = dict(hidden or {})
        self.grad_guard = grad_guard
        self.ns: dict[str, Any] = {
            "_T": _Tensor,
            "_ND": _ndarray,
            "_TFE": TensorFFIError,
            "_bump": _increment_version,
            "_bumps": _bumps,
            "_ShapeError": ShapeError,
            "_Overflow": ArgumentOverflowError,
            "_ArgType": ArgumentTypeError,
            "_DType": DTypeError,
            "_chk": _sym_check,
            "_numel": _numel,
            # builtins under names no C parameter can take (a parameter may be named len)
            "_len": len, "_type": type, "_tuple": tuple, "_int": int, "_float": float,
        }
        self.lines: list[str] = []
        self.level = 1
        self.known: dict[str, str] = {}  # symbols bound for sure -> where they came from
        self.maybe: set[str] = set()  # symbols that may still be None at run time
        self.symbolic = mode == "shape"
        self.fname = self.plan.name
        arrays = [p for p in self.plan.params if p.kind == "array"]
        given = [p for p in arrays if p.name not in self.hidden]
        #: overlap checks need each array's byte span; output allocation needs the caller's kind
        self.needs_bytes = len(given) > 1 and any(p.written for p in given)
        self.needs_kind = mode == "call" and any(p.role == "out" for p in arrays)
        #: parameters that may receive a Handle: opaque struct pointers and bare void *
        self.handle_capable = mode == "call" and any(
            p.kind == "struct" or (p.kind == "array" and p.dtype == "any" and p.shape is None) for p in self.plan.params
        )
        self.post: list[str] = []  # lines to run after a successful C call
        self.post_failure: list[str] = []  # lines to run when C returned an error status
        self._n = 0

    # -- emission helpers -------------------------------------------------- #

    def const(self, value: Any, hint: str = "c") -> str:
        self._n += 1
        name = f"_{hint}{self._n}"
        self.ns[name] = value
        return name

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.level + line)

    def indent(self) -> None:
        self.level += 1

    def dedent(self) -> None:
        self.level -= 1

    def fail_unless(self, ok: str, exc: str) -> None:
        """Raise ``exc`` (an expression building the exception) unless ``ok``."""
        if self.symbolic:
            self.emit(f"_chk({ok}, lambda: {exc})")
        else:
            self.emit(f"if not ({ok}): raise {exc}")

    def where(self, p: Param) -> str:
        return f"{self.fname}(): argument '{p.name}'"

    @staticmethod
    def lit(text: str) -> str:
        """``text`` as literal text inside a generated f-string."""
        return text.replace("\\", "\\\\").replace("{", "{{").replace("}", "}}").replace('"', '\\"')

    def z(self, sym: str) -> str:
        return f"_z_{sym}"

    def dim_expr(self, d: Dim) -> str:
        parts = [self.z(s) for s in d.symbols] + ([str(d.factor)] if d.factor != 1 or not d.symbols else [])
        return " * ".join(parts)

    # -- shapes -------------------------------------------------------------- #

    def bind_shape(self, p: Param, svar: str, conditional: bool) -> list[tuple[int, Dim]]:
        """Emit the rank check and the bind-or-check of every single-symbol dimension of
        ``p`` (shape in ``svar``); returns the product dimensions, checked later.
        ``conditional``: inside a branch that may not run (an optional array, an out
        array the caller may pass), so symbols first seen here may stay unbound."""
        assert p.shape is not None
        W = self.lit(self.where(p))
        dims = ", ".join(str(d) for d in p.shape)
        n = len(p.shape)
        self.fail_unless(
            f"_len({svar}) == {n}",
            f'_ShapeError(f"{W} must have {n} dimension(s) [{dims}], got shape {{_tuple({svar})}}")',
        )
        deferred: list[tuple[int, Dim]] = []
        for ax, d in enumerate(p.shape):
            size = f"{svar}[{ax}]"
            if not d.symbols:
                self.fail_unless(
                    f"{size} == {d.factor}",
                    f'_ShapeError(f"{W}: dimension {ax} must be {d.factor}, got {{{size}}} (shape {{_tuple({svar})}})")',
                )
                continue
            if len(d.symbols) > 1:
                deferred.append((ax, d))
                continue
            sym = d.symbols[0]
            z = self.z(sym)
            k = d.factor
            if sym in self.known:
                want = f"{sym} = {{{z}}}" if k == 1 else f"{d} = {{{z} * {k}}}"
                self.fail_unless(
                    f"{size} == {self.dim_expr(d)}",
                    f'_ShapeError(f"{W}: dimension {ax} ({d}) is {{{size}}}, but {want} from '
                    f'{self.lit(self.known[sym])} (shape {{_tuple({svar})}})")',
                )
                continue
            bind = [] if k == 1 else [
                (f"{size} % {k} == 0",
                 f'_ShapeError(f"{W}: dimension {ax} ({d}) must be a multiple of {k}, got {{{size}}}")')
            ]
            value = size if k == 1 else f"{size} // {k}"
            if conditional or sym in self.maybe:
                self.emit(f"if {z} is None:")
                self.indent()
                for ok, exc in bind:
                    self.fail_unless(ok, exc)
                self.emit(f"{z} = {value}")
                self.dedent()
                self.emit("else:")
                self.indent()
                self.fail_unless(
                    f"{size} == {self.dim_expr(d)}",
                    f'_ShapeError(f"{W}: dimension {ax} ({d}) is {{{size}}}, but {d} = {{{self.dim_expr(d)}}} '
                    f'from the other arguments (shape {{_tuple({svar})}})")',
                )
                self.dedent()
                self.maybe.add(sym)
            else:
                for ok, exc in bind:
                    self.fail_unless(ok, exc)
                self.emit(f"{z} = {value}")
                self.known[sym] = f"argument '{p.name}'"
        return deferred

    def need(self, sym: str, who: str) -> None:
        """Emit a check that ``sym`` is bound (for sizes that may be missing)."""
        if sym in self.known:
            return
        self.fail_unless(
            f"{self.z(sym)} is not None",
            f'_ShapeError("{self.lit(self.fname)}(): size \'{sym}\' of {self.lit(who)} is unknown: pass {pyname(sym)}=...")',
        )

    def check_products(self, p: Param, svar: str, deferred: list[tuple[int, Dim]]) -> None:
        W = self.lit(self.where(p))
        for ax, d in deferred:
            for s in d.symbols:
                self.need(s, f"argument '{p.name}'")
            self.fail_unless(
                f"{svar}[{ax}] == {self.dim_expr(d)}",
                f'_ShapeError(f"{W}: dimension {ax} ({d}) must be {{{self.dim_expr(d)}}}, got {{{svar}[{ax}]}}")',
            )

    # -- fills ------------------------------------------------------------- #

    def fill_value(self, p: Param, array_var: dict[str, str]) -> str:
        """An expression for the value of fill parameter ``p``."""
        f = p.fill
        assert f is not None
        if f.dim is not None:
            for s in f.dim.symbols:
                self.need(s, f"'{p.name} = {f.dim}'")
            return self.dim_expr(f.dim)
        src = self.plan.by_name[f.numel_of]  # type: ignore[index]
        if src.role == "out":
            dims = []
            for d in src.shape or ():
                for s in d.symbols:
                    self.need(s, f"'{p.name} = numel({src.name})'")
                dims.append(f"({self.dim_expr(d)})")
            return " * ".join(dims) or "1"
        return f"_numel({array_var[src.name]})"

    # -- arrays ------------------------------------------------------------ #

    def preparer(self, p: Param, grad_writes_ok: bool = False) -> str:
        """A name in the namespace for the general preparation of array ``p``:
        value -> (address, what to hold, shape, written tensor or None, is NumPy, bytes)."""
        where, ctype, dtype = self.where(p), p.ctype, p.dtype or "any"
        written, may_copy = p.written, p.shape is not None and p.keep_until is None
        ffi = self.b.ffi

        def prep(v: Any) -> tuple[Any, ...]:
            if dtype == "any" and isinstance(v, ffi.CData):
                # An opaque handle (ffi.new_handle, a C-owned object): passed as is.
                return int(ffi.cast("intptr_t", v)), v, None, None, None, 0
            r = prepare_array(v, where=where, ctype=ctype, dtype=dtype, written=written, may_copy=may_copy,
                              grad_writes_ok=grad_writes_ok)
            return r.addr, (r.storage, r.owner), r.shape, r.written_tensor, r.kind == "numpy", r.nbytes

        return self.const(prep, "prep")

    def torch_fast(self, p: Param, v: str, kernel: bool) -> list[str]:
        """Conditions under which tensor ``v`` can be passed as it is."""
        conds = [] if kernel else [f"_type({v}) is _T"]
        if p.dtype != "any":
            conds.append(f"{v}.dtype is {self.const(TORCH_DTYPES[p.dtype or 'any'], 'dt')}")
        if not kernel:
            conds += [f"{v}.is_cpu", f"not {v}.is_nested"]
        conds.append(f"{v}.is_contiguous()")
        if not kernel:
            conds.append(f"not {v}.is_neg()")
            if p.dtype in ("any", "complex64", "complex128"):
                conds.append(f"not {v}.is_conj()")
            if p.written:
                conds += [f"not {v}.requires_grad", f"not {v}.is_inference()"]
        return conds

    def emit_array(self, p: Param, kernel: bool, grad_writes_ok: bool = False) -> None:
        """Prepare array parameter ``p`` (named by its pyname) into _a/_k/_s/_w/_n/_b."""
        i, v = p.index, p.pyname
        if self.handle_capable and p.dtype == "any" and p.shape is None:
            # a bare void * may be an opaque handle
            self.emit(f"_h{i} = None")
            self.emit(f"if _type({v}) is {self.const(Handle, 'Handle')}:")
            self.indent()
            ffi = self.b.ffi
            addr = self.const(lambda h, W=self.where(p): int(ffi.cast("intptr_t", h._enter(W, None))), "haddr")
            self.emit(f"_a{i} = {addr}({v})")
            self.emit(f"_h{i} = {v}._state")
            self.emit(f"_u.append(_h{i})")
            self.emit(f"_k{i} = {v}")
            self.emit(f"_s{i} = _w{i} = _n{i} = None")
            self.emit(f"_b{i} = 0")
            self.dedent()
            self.emit("else:")
            self.indent()
            self.emit_array_value(p, kernel, grad_writes_ok)
            self.dedent()
            return
        self.emit_array_value(p, kernel, grad_writes_ok)

    def emit_array_value(self, p: Param, kernel: bool, grad_writes_ok: bool = False) -> None:
        """The fast path for a tensor that can go to C as it is, in one condition: its
        storage (held for the call in _k) must hold every byte of it (contiguous here:
        storage_offset + numel elements). Anything else, including a storage that is
        too small, takes the general preparation, which explains the refusal."""
        i, v = p.index, p.pyname
        isz = TORCH_DTYPES[p.dtype].itemsize if p.dtype not in (None, "any") else f"{v}.element_size()"
        conds = self.torch_fast(p, v, kernel) + [
            f"(_k{i} := {v}.untyped_storage()).nbytes() >= {v}.storage_offset() * {isz} + {v}.nbytes"
        ]
        prep = f"_a{i}, _k{i}, _s{i}, _w{i}, _n{i}, _b{i} = {self.preparer(p, grad_writes_ok)}({v})"
        if not kernel:
            self.emit("try:")  # (a sparse CSR tensor raises in is_contiguous(): the general path explains)
            self.indent()
        self.emit(f"if {' and '.join(conds)}:")
        self.indent()
        self.emit_passed_as_is(p, f"{v}.data_ptr()", None, numpy=False)
        self.dedent()
        if not kernel and p.dtype not in (None, "any", "bfloat16"):
            self.emit_ndarray_fast(p)
        self.emit("else:")
        self.emit(f"    {prep}")
        if not kernel:
            self.dedent()
            self.emit("except RuntimeError:")
            self.emit(f"    {prep}")

    def emit_ndarray_fast(self, p: Param) -> None:
        """The fast path for a NumPy array that can go to C as it is: the exact dtype,
        C-contiguous, aligned (and writeable if C writes it), and not a view of a torch
        tensor's memory (its base is None or a base-less array; the general path checks
        such views against their storage). Anything else takes the general preparation."""
        i, v = p.index, p.pyname
        conds = [
            f"_type({v}) is _ND",
            f"{v}.dtype is {self.const(NUMPY_DTYPES[p.dtype or 'any'], 'npdt')}",
            f"(_f{i} := {v}.flags).c_contiguous",
            f"_f{i}.aligned",
        ]
        if p.written:
            conds.append(f"_f{i}.writeable")
        conds.append(f"((_o{i} := {v}.base) is None or (_type(_o{i}) is _ND and _o{i}.base is None))")
        self.emit(f"elif {' and '.join(conds)}:")
        self.indent()
        cast, fb = self.const(_CFFI.cast, "ccast"), self.const(_CFFI.from_buffer, "cfb")
        addr = f"_int({cast}({self.const(_INTPTR, 'ip')}, {fb}({self.const(_CHARS, 'chars')}, {v})))"
        self.emit_passed_as_is(p, addr, v, numpy=True)
        self.dedent()

    def emit_passed_as_is(self, p: Param, addr: str, keep: str | None, numpy: bool) -> None:
        """The fast paths' results for array ``p`` passed to C as it is: its address,
        what holds it (``keep``; None: already bound), its bytes, the tensor C writes
        (NumPy arrays have no version counter), its kind and its shape."""
        i, v = p.index, p.pyname
        self.emit(f"_a{i} = {addr}")
        if keep is not None:
            self.emit(f"_k{i} = {keep}")
        if self.needs_bytes:
            self.emit(f"_b{i} = {v}.nbytes")
        if p.written:
            self.emit(f"_w{i} = {'None' if numpy else v}")
        if self.needs_kind:
            self.emit(f"_n{i} = {numpy}")
        if p.shape is not None:
            self.emit(f"_s{i} = {v}.{'shape' if numpy else 'size()'}")

    def emit_absent(self, p: Param) -> None:
        i = p.index
        self.emit(f"_a{i} = _b{i} = 0")
        self.emit(f"_k{i} = _s{i} = _w{i} = _n{i} = None")

    def carg(self, p: Param) -> str:
        """The expression passed to C for array parameter ``p`` (an address in _a)."""
        if p.as_int:
            return f"_a{p.index}"
        return f"{self.const(self.b.ffi.cast, 'cast')}({self.const(p.ctype, 'ct')}, _a{p.index})"

    def emit_overlaps(self, arrays: list[Param]) -> None:
        """Refuse written arrays that share memory with another array argument."""
        if not any(p.written for p in arrays) or len(arrays) < 2:
            return
        fn = self.const(_overlap, "ovl")
        pairs = []
        for x in range(len(arrays)):
            for y in range(x + 1, len(arrays)):
                p, q = arrays[x], arrays[y]
                if p.written or q.written:
                    i, j = p.index, q.index
                    pairs.append(f"(_a{i} < _a{j} + _b{j} and _a{j} < _a{i} + _b{i} and _b{i} and _b{j})")
        ranges = ", ".join(f"('{p.name}', _a{p.index}, _b{p.index}, {p.written})" for p in arrays)
        self.emit(f"if {' or '.join(pairs)}:")
        self.indent()
        self.emit(f"_e = {fn}([r for r in ({ranges},) if _type(r[1]) is _int], {self.fname!r})")
        self.emit("if _e is not None: raise _e")
        self.dedent()

    # -- scalars ----------------------------------------------------------- #

    def scalar_check(self, p: Param, v: str) -> None:
        """Emit the check/conversion of a caller-given scalar ``v`` in place."""
        W = self.where(p)
        if p.scalar in ("int", "bool") and p.int_range is not None:
            lo, hi = p.int_range
            chk = self.const(lambda x, W=W, ct=p.ctype, r=p.int_range: _checked_int(x, W, ct, r), "int")
            self.emit(f"if _type({v}) is not _int or not {lo} <= {v} <= {hi}: {v} = {chk}({v})")
        elif p.scalar == "float":
            chk = self.const(lambda x, W=W, ct=p.ctype, bits=p.float_bits: _checked_float(x, W, ct, bits), "flt")
            if p.float_bits == 32:
                self.emit(
                    f"if _type({v}) is not _float or not (-{_FLT_MAX!r} <= {v} <= {_FLT_MAX!r}) or "
                    f"(-{_FLT_NORMAL!r} < {v} < {_FLT_NORMAL!r} and {v} != 0.0): {v} = {chk}({v})"
                )
            else:
                self.emit(f"if _type({v}) is not _float: {v} = {chk}({v})")

    def emit_other(self, p: Param) -> str:
        """Strings, structs and raw pointers: emit their preparation, return the C argument."""
        v, i = p.pyname, p.index
        ffi = self.b.ffi
        where = self.where(p)
        if p.kind == "string":
            def string(value: Any, where: str = where, ct: str = p.ctype, optional: bool = p.optional) -> Any:
                return _string_arg(ffi, value, where, ct, optional)
            self.emit(f"_x{i} = {self.const(string, 'str')}({v})")
            return f"_x{i}[0]"
        if p.kind == "struct":
            want = _typeof(ffi, p.ctype)

            def struct(value: Any, used: list[Any], where: str = where, ct: str = p.ctype,
                       optional: bool = p.optional) -> Any:
                return _struct_arg(ffi, value, where, ct, optional, want, used)
            self.emit(f"_x{i} = {self.const(struct, 'st')}({v}, _u)")
            self.emit(f"_h{i} = _x{i}[3]")
            return f"_x{i}[0]"
        if p.kind == "handle_out":
            target = p.ctype.replace("const ", "").rstrip()
            self.emit(f"_x{i} = {self.const(lambda t=target: ffi.new(t), 'slot')}()")
            make = self.const(self.b.handle_maker(target[:-1].rstrip(), p.destroy), "mkh")  # type: ignore[arg-type]
            self.post.append(f"_ho{i} = {make}(_x{i}[0])")
            return f"_x{i}"
        if p.kind == "callback":
            factory = self.const(self.b.callback_factory(p), "cbf")
            spec = p.callback
            assert spec is not None
            if spec.until is not None:
                h = self.plan.by_name[spec.until]
                self.emit(f"if _h{h.index} is None: raise _ArgType(\"{self.lit(where)}: 'until {spec.until}' needs "
                          f"'{spec.until}' to be a tensorffi.Handle (the callback must live as long as it)\")")
                self.emit(f"_x{i} = {factory}({v}, _h{h.index}.store_error)")
                self.emit(f"_h{h.index}.hold(('callback', {p.name!r}), _x{i})")
            else:
                self.emit("_cberr = []")
                self.emit(f"_x{i} = {factory}({v}, _cberr.append)")
                self.post.append("if _cberr: raise _cberr[0]")
            return f"_x{i}"
        # raw: function pointers, T **, structs by value: cffi checks them
        return v

    # -- the three functions ---------------------------------------------- #

    def header(self, params: list[str]) -> None:
        self.lines.insert(0, f"def {self.b.safe_name}({', '.join(params)}):")

    def finish(self, label: str) -> Callable[..., Any]:
        src = "\n".join(self.lines) + "\n"
        return _codegen.build(src, self.ns, function=self.b.safe_name, label=f"{label}: {self.fname}")

    def init_symbols(self) -> None:
        """Symbols not fixed by a required input start unknown (None)."""
        rest = sorted(self.plan.contract.symbols - self.plan.input_bound)
        if rest:
            self.emit(" = ".join(self.z(s) for s in rest) + " = None")
            self.maybe.update(rest)

    def emit_fills(
        self, array_var: dict[str, str], given: Callable[[Param], str | None], defining: bool | None = None
    ) -> dict[str, str]:
        """Compute filled-in parameters (in dependency order); returns name -> expression
        of each filled parameter's value. ``given(p)``: the variable holding a value the
        caller passed for ``p`` (checked against the computed one), or None.
        ``defining``: only fills that define a size (True), only the others (False)."""
        values: dict[str, str] = {}
        for name in self.plan.fill_order:
            p = self.plan.by_name[name]
            if defining is not None and p.is_symbol != defining:
                continue
            f = p.fill
            assert f is not None
            expr = self.fill_value(p, array_var)
            src = f"numel({f.numel_of})" if f.numel_of else str(f.dim)
            if p.is_symbol:
                z = self.z(name)
                if name in self.known:
                    self.fail_unless(
                        f"{z} == {expr}",
                        f'_ShapeError(f"{self.lit(self.fname)}(): {name} = {{{z}}} from {self.lit(self.known[name])}, '
                        f'but the contract defines {name} = {self.lit(src)} = {{{expr}}}")',
                    )
                else:
                    self.emit(f"if {z} is None:")
                    self.indent()
                    self.emit(f"{z} = {expr}")
                    self.dedent()
                    self.emit("else:")
                    self.indent()
                    self.fail_unless(
                        f"{z} == {expr}",
                        f'_ShapeError(f"{self.lit(self.fname)}(): argument \'{name}\' is {{{z}}}, but the '
                        f'contract defines {name} = {self.lit(src)} = {{{expr}}}")',
                    )
                    self.dedent()
                    self.maybe.discard(name)
                    self.known[name] = f"'{f.clause or name}'"
                values[name] = z
            else:
                var = f"_f_{name}"
                self.emit(f"{var} = {expr}")
                g = given(p)
                if g is not None:
                    W = self.lit(self.where(p))
                    self.emit(f"if {g} is not None:")
                    self.indent()
                    sz = self.const(lambda x, W=self.where(p), ct=p.ctype, r=p.int_range: _size_value(x, W, ct, r), "size")
                    self.emit(f"{g} = {sz}({g})")
                    self.fail_unless(
                        f"{g} == {var}",
                        f'_ShapeError(f"{W} is {{{g}}}, but the array shapes give {self.lit(src)} = {{{var}}} '
                        f'(contract: {self.lit(repr(self.plan.contract.source))})")',
                    )
                    self.dedent()
                values[name] = var
        return values

    def size_param_check(self, p: Param, expr: str) -> None:
        """A size handed to an integer parameter must fit its C type."""
        if p.int_range is None or p.int_range[1] >= _MAX_SIZE:
            return
        lo, hi = p.int_range
        W = self.lit(self.where(p))
        self.fail_unless(
            f"{expr} <= {hi}",
            f'_Overflow(f"{W} ({self.lit(p.ctype)}) must be in [{lo}, {hi}], got {{{expr}}}: it does not fit '
            f'and would be truncated")',
        )

    def emit_caller_size(self, sym: str, var: str, checker: str, mismatch: str) -> None:
        """A size the caller may pass (``var`` may be None): convert it, then bind or check."""
        z = self.z(sym)
        self.emit(f"if {var} is not None:")
        self.indent()
        self.emit(f"{var} = {checker}({var})")
        if sym in self.known:
            self.fail_unless(f"{var} == {z}", mismatch)
        else:
            self.emit(f"if {z} is None:")
            self.indent()
            self.emit(f"{z} = {var}")
            self.dedent()
            self.emit(f"elif {var} != {z}:")
            self.indent()
            self.emit(f"raise {mismatch}")
            self.dedent()
            self.maybe.add(sym)
        self.dedent()

    def generate_call(self) -> Callable[..., Any]:
        plan = self.plan
        P = plan.params
        short = [p.pyname for p in plan.positional]
        kwonly = [p.pyname for p in plan.keyword_only] + [pyname(s) for s in plan.free_sizes]
        sig = list(short)
        if plan.has_full_form:
            sig.append("*_more")
        elif kwonly:
            sig.append("*")
        sig += [f"{k}=None" for k in kwonly]
        self.emit("__tracebackhide__ = True")
        if self.handle_capable:
            self.emit("_u = []  # handle states this call uses (exited in finally)")
        self.emit("try:")
        self.indent()
        if plan.has_full_form:
            full = self.const(_full_form(plan, lambda: self.b.call), "full")
            tup = "(" + "".join(f"{s}, " for s in short) + ")"
            self.emit(f"if _more: return {full}({tup} + _more, {', '.join(f'{k}={k}' for k in kwonly)})")
        self.init_symbols()
        inputs = [p for p in P if p.kind == "array" and p.role != "out"]
        outs = [p for p in P if p.kind == "array" and p.role == "out"]
        array_var = {p.name: p.pyname for p in P if p.kind == "array"}

        for p in inputs:
            if p.optional:
                self.emit(f"if {p.pyname} is None:")
                self.indent()
                self.emit_absent(p)
                self.dedent()
                self.emit("else:")
                self.indent()
                self.emit_array(p, kernel=False)
                self.dedent()
            else:
                self.emit_array(p, kernel=False)
        products: list[tuple[Param, list[tuple[int, Dim]], bool]] = []
        for p in inputs:
            if p.shape is not None and not p.optional:
                products.append((p, self.bind_shape(p, f"_s{p.index}", False), False))
        for p in inputs:
            if p.shape is not None and p.optional:
                self.emit(f"if {p.pyname} is not None:")
                self.indent()
                products.append((p, self.bind_shape(p, f"_s{p.index}", True), True))
                self.dedent()
        for p in outs:
            self.emit(f"if {p.pyname} is not None:")
            self.indent()
            self.emit_array(p, kernel=False)
            products.append((p, self.bind_shape(p, f"_s{p.index}", True), True))
            self.dedent()
            self.emit("else:")
            self.indent()
            self.emit(f"_n{p.index} = _w{p.index} = None")
            self.dedent()

        # sizes the caller passes: integer parameters that are sizes, and free sizes
        for p in P:
            if p.kind == "scalar" and p.is_symbol:
                W = self.lit(self.where(p))
                chk = self.const(lambda x, W=self.where(p), ct=p.ctype, r=p.int_range: _size_value(x, W, ct, r), "size")
                origin = self.lit(self.known.get(p.name, "the other arguments"))
                self.emit_caller_size(
                    p.name, p.pyname, chk,
                    f'_ShapeError(f"{W} is {{{p.pyname}}}, but the array shapes give {p.name} = {{{self.z(p.name)}}} '
                    f'(from {origin}; contract: {self.lit(repr(plan.contract.source))})")',
                )
        # a length filled with one symbol (count = m) passed by the caller gives that symbol
        aliases = set()
        for p in P:
            f = p.fill
            if p.kind == "scalar" and not p.is_symbol and f is not None and f.dim is not None \
                    and len(f.dim.symbols) == 1 and f.dim.factor == 1:
                sym = f.dim.symbols[0]
                aliases.add(p.name)
                W = self.lit(self.where(p))
                chk = self.const(lambda x, W=self.where(p), ct=p.ctype, r=p.int_range: _size_value(x, W, ct, r), "size")
                origin = self.lit(self.known.get(sym, "the other arguments"))
                self.emit_caller_size(
                    sym, p.pyname, chk,
                    f'_ShapeError(f"{W} is {{{p.pyname}}}, but the array shapes give {sym} = {{{self.z(sym)}}} '
                    f'(from {origin}; contract: {self.lit(repr(plan.contract.source))})")',
                )
        for s in plan.free_sizes:
            v = pyname(s)
            chk = self.const(lambda x, f=self.fname, s=s: _named_size(x, f, s), "size")
            origin = self.lit(self.known.get(s, "the other arguments"))
            self.emit_caller_size(
                s, v, chk,
                f'_ShapeError(f"{self.lit(self.fname)}(): {v}={{{v}}} was passed, but {s} = {{{self.z(s)}}} from {origin}")',
            )

        given_fill = lambda p: None if p.name in aliases else p.pyname  # noqa: E731
        fills = self.emit_fills(array_var, given_fill, defining=True)
        for p, deferred, conditional in products:
            if not deferred:
                continue
            if conditional:
                self.emit(f"if {p.pyname} is not None:")
                self.indent()
            self.check_products(p, f"_s{p.index}", deferred)
            if conditional:
                self.dedent()

        if outs:
            chain = "False"
            for p in reversed([q for q in P if q.kind == "array"]):
                if p.role != "out" and not p.optional:
                    chain = f"_n{p.index}"
                else:
                    chain = f"(_n{p.index} if _n{p.index} is not None else {chain})"
            self.emit(f"_numpy = {chain}")
        for p in outs:
            i = p.index
            assert p.shape is not None and p.dtype is not None
            self.emit(f"if {p.pyname} is None:")
            self.indent()
            for d in p.shape:
                for s in d.symbols:
                    self.need(s, f"argument '{p.name}'")
            dims = [self.dim_expr(d) for d in p.shape]
            tdt = self.const(TORCH_DTYPES[p.dtype], "dt")
            empty = self.const(torch.empty, "empty")
            targs = ", ".join(dims) if dims else "()"
            self.emit("try:")
            self.indent()
            self.emit("if _numpy:")
            self.indent()
            ndt = self.const(NUMPY_DTYPES.get(p.dtype), "ndt")
            self.emit(f"{p.pyname} = {self.const(np.empty, 'npempty')}(({', '.join(dims)}{',' if len(dims) == 1 else ''}), {ndt})")
            self.emit(f"_a{i} = {self.const(_numpy_address, 'npaddr')}({p.pyname})")
            self.dedent()
            self.emit("else:")
            self.indent()
            self.emit(f"{p.pyname} = {empty}({targs}, dtype={tdt})")
            self.emit(f"_a{i} = {p.pyname}.data_ptr()")
            self.dedent()
            self.dedent()
            self.emit_alloc_failure(p, dims)
            self.emit(f"_b{i} = 0")
            self.dedent()

        fills.update(self.emit_fills(array_var, given_fill, defining=False))
        given = [p for p in P if p.kind == "array"]
        if len(given) > 1 and any(p.written for p in given):
            self.emit_overlaps(given)

        cargs = self.emit_scalars(fills, kernel=False)
        self.emit_keeps()
        written = [f"_w{p.index}" for p in P if p.kind == "array" and p.written and p.keep_until is None]
        structs = [p for p in P if p.kind == "struct"]
        self.emit_c_call(cargs, written, structs)
        results = [p.pyname if p.kind == "array" else f"_ho{p.index}" for p in P
                   if (p.kind == "array" and p.role == "out") or p.kind == "handle_out"]
        self.emit_return(results, kernel=False)
        self.dedent()
        self.emit("except _TFE as _e:")
        self.emit("    raise _e.with_traceback(None)")
        if self.handle_capable:
            self.emit("finally:")
            self.emit("    for _st in _u: _st.exit()")
        self.header(sig)
        return self.finish("call")

    def emit_keeps(self) -> None:
        """Arrays C keeps after the call: held by their handle (from before the call, as
        C may start using them at once), in memory that cannot be resized or freed."""
        keeps = [p for p in self.plan.params if p.kind == "array" and p.keep_until is not None]
        for p in keeps:
            h = self.plan.by_name[p.keep_until]  # type: ignore[index]
            i = p.index
            chk = self.const(_check_kept, "keep")
            self.emit(f"if _h{h.index} is None: raise _ArgType(\"{self.lit(self.where(p))}: C keeps it until "
                      f"'{h.name}' is closed, so '{h.name}' must be a tensorffi.Handle\")")
            self.emit(f'{chk}({p.pyname}, "{self.lit(self.where(p))}")')
            self.emit(f"_h{h.index}.hold(_a{i}, ({p.pyname}, _k{i}, {p.written}))")
            if self.plan.returns in ("status", "count"):
                # C did not keep it if the call failed
                self.post_failure.append(f"_h{h.index}.release(_a{i})")
        for p in self.plan.params:
            if p.release:
                self.post.append(f"for _st in _u: _st.release(_a{p.index})")
            if p.acquire:
                self.post.append(f"if _h{p.index} is not None: _bumps(*_h{p.index}.written_kept())")

    def emit_scalars(self, fills: dict[str, str], kernel: bool) -> list[str]:
        """Check scalar arguments; return the C argument expressions in order."""
        cargs = [""] * len(self.plan.params)
        order = sorted(self.plan.params, key=lambda q: 0 if q.kind == "struct" else 1)
        for p in order:
            cargs[p.index] = self.scalar_arg(p, fills)
        return cargs

    def scalar_arg(self, p: Param, fills: dict[str, str]) -> str:
        """Check scalar ``p`` (or prepare a string, struct, handle, callback): its C argument."""
        if p.name in self.hidden:
            h = self.const(self.hidden[p.name], "h")
            if not p.as_int:
                return f"{h}()"
            ffi = self.b.ffi  # a pointer through an intptr_t shim: cdata becomes its address
            conv = self.const(lambda v: int(ffi.cast("intptr_t", v)) if isinstance(v, ffi.CData) else v, "addr")
            return f"{conv}({h}())"
        if p.kind == "array":
            return self.carg(p)
        if p.kind != "scalar":
            return self.emit_other(p)
        if p.fill is not None:
            expr = fills[p.name]
            self.size_param_check(p, expr)
            return expr
        if p.is_symbol:
            self.need(p.name, f"argument '{p.name}'")
            self.size_param_check(p, self.z(p.name))
            return self.z(p.name)
        self.scalar_check(p, p.pyname)
        return p.pyname

    def emit_c_call(self, cargs: list[str], written: list[str], structs: list[Param]) -> None:
        c = self.const(self.b.cfunc, "cfn")
        raw = any(p.kind == "raw" and p.name not in self.hidden for p in self.plan.params)
        if raw:
            self.emit("try:")
            self.indent()
        self.emit(f"_r = {c}({', '.join(cargs)})")
        if raw:
            self.dedent()
            self.emit("except (TypeError, OverflowError) as _x:")
            self.emit(f'    raise _ArgType(f"{self.lit(self.fname)}(): {{_x}}") from None')
        for p in structs:
            self.emit(f"if _x{p.index}[2]: _bumps(*_x{p.index}[2])")
        if len(written) == 1:
            self.emit(f"if {written[0]} is not None: _bump(({written[0]},))")
        elif written:
            self.emit(f"_bumps({', '.join(written)})")

    def emit_return(self, results: list[str], kernel: bool) -> None:
        plan = self.plan
        if plan.returns in ("status", "count"):
            st = self.const(self.b.raise_status, "status")
            fail = "_r" if plan.returns == "status" else "_r < 0"
            if self.post_failure:
                self.emit(f"if {fail}:")
                self.indent()
                for line in self.post_failure:
                    self.emit(line)
                self.emit(f"{st}(_r)")
                self.dedent()
            else:
                self.emit(f"if {fail}: {st}(_r)")
        for line in self.post:
            self.emit(line)
        value: list[str] = []
        if plan.returns == "handle":
            make = self.const(self.b.handle_maker(plan.decl.result.text.replace("const ", ""),
                                                  plan.returns_handle), "mkh")  # type: ignore[arg-type]
            value = [f"{make}(_r)"]
        if plan.returns == "count":
            value = ["_r"]
        if plan.returns == "value":
            if plan.result_is_string and not kernel:
                self.emit(f"_r = {self.const(self.b.string, 'string')}(_r)")
            if kernel:
                _, outs = operator_signature(plan, self.hidden)
                rdt = self.const(TORCH_DTYPES[outs[-1].dtype], "rdt")
                value = [f"{self.const(torch.tensor, 'tensor')}(_r, dtype={rdt})"]
            else:
                value = ["_r"]
        if kernel:
            allr = results + value
        else:
            allr = value + results
        if not allr:
            self.emit("return None")
        elif len(allr) == 1:
            self.emit(f"return {allr[0]}")
        else:
            self.emit(f"return ({', '.join(allr)})")

    def op_params(self, args: list[OpArg]) -> list[str]:
        """Operator-order parameters; the dispatcher drops trailing arguments equal to
        their defaults (None for optional tensors), so those take defaults here."""
        params = [a.name for a in args]
        for i in range(len(args) - 1, -1, -1):
            if not args[i].optional:
                break
            params[i] += "=None"
        return params

    def generate_kernel(self) -> Callable[..., Any]:
        """The body of an operator: CPU tensors in operator order (see operator_signature)."""
        plan = self.plan
        args, outs = operator_signature(plan, self.hidden)
        by_py = {p.pyname: p for p in plan.params}
        tensors = [a for a in args if a.kind == "tensor"]
        self.emit("__tracebackhide__ = True")
        if self.grad_guard is not None and tensors:
            guard = self.const(self.grad_guard, "guard")
            ge = self.const(torch.is_grad_enabled, "ge")
            needs = " or ".join(
                f"({a.name} is not None and {a.name}.requires_grad)" if a.optional else f"{a.name}.requires_grad"
                for a in tensors
            )
            self.emit(f"if ({needs}) and {ge}(): {guard}({', '.join(a.name for a in tensors)})")
        self.emit("try:")
        self.indent()
        self.init_symbols()
        arrays = [by_py[a.name] for a in tensors]
        for p in arrays:
            if p.optional:
                self.emit(f"if {p.pyname} is None:")
                self.indent()
                self.emit_absent(p)
                self.dedent()
                self.emit("else:")
                self.indent()
                self.emit_array(p, kernel=True, grad_writes_ok=True)
                self.dedent()
            else:
                self.emit_array(p, kernel=True, grad_writes_ok=True)
        fills = self.emit_sizes(arrays, args)
        empty = self.const(torch.empty, "empty")
        results = []
        for o in outs:
            if o.name == "return":
                continue
            p = plan.by_name[o.name]
            for d in o.shape:
                for s in d.symbols:
                    self.need(s, f"argument '{p.name}'")
            dims = ", ".join(self.dim_expr(d) for d in o.shape) or "()"
            self.emit("try:")
            self.emit(f"    _out{p.index} = {empty}({dims}, dtype={self.const(TORCH_DTYPES[o.dtype], 'dt')})")
            self.emit_alloc_failure(p, [self.dim_expr(d) for d in o.shape])
            self.emit(f"_a{p.index} = _out{p.index}.data_ptr()")
            results.append(f"_out{p.index}")
        fills.update(self.emit_fills({p.name: p.pyname for p in arrays}, lambda p: None, defining=False))
        if len(arrays) > 1 and any(p.written for p in arrays):
            self.emit_overlaps(arrays)
        cargs = self.emit_scalars(fills, kernel=True)
        written = [f"_w{p.index}" for p in arrays if p.written]
        self.emit_c_call(cargs, written, [])
        self.emit_return(results, kernel=True)
        self.dedent()
        self.emit("except _TFE as _e:")
        self.emit("    raise _e.with_traceback(None)")
        self.header(self.op_params(args))
        return self.finish("operator kernel")

    def emit_alloc_failure(self, p: Param, dims: list[str]) -> None:
        """The except clause of an output allocation: a typed error naming the argument."""
        self.emit("except (RuntimeError, MemoryError, ValueError, OverflowError) as _x:")
        shape = "(" + ", ".join(f"{{{d}}}" for d in dims) + ("," if len(dims) == 1 else "") + ")"
        self.emit(
            f'    raise {self.const(AllocationError, "alloc")}(f"{self.lit(self.where(p))}: cannot allocate the '
            f'output of shape {shape} ({p.dtype}): {{_x}}") from None'
        )

    def emit_sizes(self, arrays: list[Param], args: list[OpArg]) -> Any:
        """Operator kernel and shape rule alike: bind the arrays' shapes (optional ones
        when given), the caller's size arguments and the fills that define sizes (they
        may shape an output), then check the products that had to wait for them.
        Returns what emit_fills returns."""
        products: list[tuple[Param, list[tuple[int, Dim]], bool]] = []
        for p in arrays:
            if p.shape is not None and not p.optional:
                products.append((p, self.bind_shape(p, f"_s{p.index}", False), False))
        self.emit_size_args(args)
        for p in arrays:
            if p.shape is not None and p.optional:
                self.emit(f"if {p.pyname} is not None:")
                self.indent()
                products.append((p, self.bind_shape(p, f"_s{p.index}", True), True))
                self.dedent()
        fills = self.emit_fills({p.name: p.pyname for p in arrays}, lambda p: None, defining=True)
        for p, deferred, conditional in products:
            if deferred:
                if conditional:
                    self.emit(f"if {p.pyname} is not None:")
                    self.indent()
                self.check_products(p, f"_s{p.index}", deferred)
                if conditional:
                    self.dedent()
        return fills

    def emit_size_args(self, args: list[OpArg]) -> None:
        """Operator size arguments (plain ints in a kernel, SymInts in a shape rule)."""
        for a in args:
            if a.kind != "size":
                continue
            p = self.plan.by_name.get(a.name)
            sym = p.name if p is not None else next(s for s in self.plan.free_sizes if pyname(s) == a.name)
            if self.symbolic:
                self.emit(f"{self.z(sym)} = {a.name}")
            else:
                self.fail_unless(
                    f"_type({a.name}) is _int and {a.name} >= 0",
                    f'_ShapeError(f"{self.lit(self.fname)}(): {a.name} must be a size (an integer >= 0), got {{{a.name}!r}}")',
                )
                self.emit(f"{self.z(sym)} = {a.name}")
            self.known[sym] = f"argument '{a.name}'"
            self.maybe.discard(sym)

    def generate_shape_rule(self) -> Callable[..., Any]:
        """The operator's shape rule: the kernel's binding steps on fake or meta tensors
        (sizes may be SymInts), returning empty outputs. It never reads data."""
        plan = self.plan
        args, outs = operator_signature(plan, self.hidden)
        by_py = {p.pyname: p for p in plan.params}
        self.emit("__tracebackhide__ = True")
        self.emit("try:")
        self.indent()
        self.init_symbols()
        self.emit("_dev = None")
        arrays = [by_py[a.name] for a in args if a.kind == "tensor"]
        for p in arrays:
            v = p.pyname
            if p.optional:
                self.emit(f"if {v} is not None:")
                self.indent()
            if p.dtype != "any":
                want = TORCH_DTYPES[p.dtype or "any"]
                self.emit(
                    f"if {v}.dtype is not {self.const(want, 'dt')}: raise _DType(f\"{self.lit(self.where(p))} "
                    f"({self.lit(p.ctype)}) expects dtype {want}, got {{{v}.dtype}}\")"
                )
            self.emit(f"_s{p.index} = {v}.shape")
            self.emit(f"if _dev is None: _dev = {v}.device")
            if p.optional:
                self.dedent()
        self.emit_sizes(arrays, args)
        empty = self.const(torch.empty, "empty")
        cpu = self.const(torch.device("cpu"), "cpu")
        results = []
        for o in outs:
            dt = self.const(TORCH_DTYPES[o.dtype], "dt")
            if o.name == "return":
                results.append(f"{empty}((), dtype={dt}, device=_dev or {cpu})")
                continue
            for d in o.shape:
                for s in d.symbols:
                    self.need(s, f"argument '{o.name}'")
            dims = ", ".join(self.dim_expr(d) for d in o.shape)
            results.append(f"{empty}(({dims}{',' if len(o.shape) == 1 else ''}), dtype={dt}, device=_dev or {cpu})")
        if not results:
            self.emit("return None")
        elif len(results) == 1:
            self.emit(f"return {results[0]}")
        else:
            self.emit(f"return ({', '.join(results)})")
        self.dedent()
        self.emit("except _TFE as _e:")
        self.emit("    raise _e.with_traceback(None)")
        self.header(self.op_params(args))
        return self.finish("shape rule")


def _full_form(plan: Plan, call: Callable[[], Callable[..., Any]]) -> Callable[..., Any]:
    """The C declaration's own calling form: every parameter positionally, in
    declaration order (``lib.process_data(t, t.numel())`` with a contract that fills
    ``size`` in): maps it to the short form, so adding a contract never breaks a
    caller. Lengths passed this way are checked like keyword ones."""
    allnames = [p.pyname for p in plan.params]
    short = [p.pyname for p in plan.positional]
    handles = [p.pyname for p in plan.params if p.kind == "handle_out"]
    name = plan.name

    def full(args: tuple[Any, ...], **kw: Any) -> Any:
        if len(args) != len(allnames):
            raise TypeError(
                f"{name}() takes {len(short)} positional argument(s) ({', '.join(short)}) or all "
                f"{len(allnames)} of the C declaration ({', '.join(allnames)}), got {len(args)}"
            )
        values = dict(zip(allnames, args))
        for h in handles:
            if values.pop(h) is not None:
                raise TypeError(f"{name}(): '{h}' receives a handle from C: pass None there (it is returned)")
        for k, v in kw.items():
            if v is not None:
                if k in values and values[k] is not None:
                    raise TypeError(f"{name}() got multiple values for argument '{k}'")
                values[k] = v
        positional = [values.pop(n) for n in short]
        return call()(*positional, **values)

    return full


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
    if isinstance(value, (_Tensor, _ndarray, strided)):
        obj = value.obj if isinstance(value, strided) else value
        dt = "int8" if getattr(obj, "dtype", None) in (torch.int8, np.int8) else "uint8"
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


def _check_kept(value: Any, where: str) -> None:
    """An array C keeps after the call must live in memory that cannot be resized or
    freed while C holds it."""
    obj = value.obj if isinstance(value, strided) else value
    if isinstance(obj, _Tensor) and obj.untyped_storage().resizable():
        raise LayoutError(
            f"{where}: C keeps this array after the call, but the tensor's storage can be resized "
            f"or freed meanwhile (an ordinary tensor's can). Allocate it with tensorffi.buffer(shape, dtype) "
            f"(or torch.from_numpy of an array you keep)"
        )
    if not isinstance(obj, (_Tensor, _ndarray)):
        raise ArgumentTypeError(f"{where}: C keeps this array after the call: pass a tensor or a NumPy array")


# --------------------------------------------------------------------------- #
# Callbacks: Python callables C may call from any thread                       #
# --------------------------------------------------------------------------- #


def _view_maker(ffi: Any) -> Callable[..., torch.Tensor]:
    """``view(ptr, shape, dtype, itemsize, copy)``: a tensor over ``prod(shape)`` elements
    of C memory at ``ptr`` (valid while the callback runs; a copy with ``copy``)."""
    NULL, buffer, frombuffer, empty = ffi.NULL, ffi.buffer, torch.frombuffer, torch.empty

    def view(ptr: Any, shape: tuple[int, ...], dtype: torch.dtype, itemsize: int, copy: bool) -> torch.Tensor:
        n = 1
        for d in shape:
            n *= d
        if n <= 0 or ptr == NULL:
            return empty(shape, dtype=dtype)
        t = frombuffer(buffer(ptr, n * itemsize), dtype=dtype).view(shape)
        return t.clone() if copy else t

    return view


def _callback_factory(ffi: Any, p: Param, fname: str) -> Callable[[Any, Callable[[BaseException], None]], Any]:
    """``factory(fn, sink)``: a cffi callback for function-pointer parameter ``p`` that
    calls ``fn`` with the callback's arguments as the contract describes them (arrays
    as tensors over C memory; sizes named in their shapes and bare ``void *`` left out;
    C strings as ``str``), stores any exception in ``sink`` and returns the declared
    error value to C instead."""
    sig, spec = p.signature, p.callback
    assert sig is not None and spec is not None
    if sig.variadic:
        raise ContractError(f"{fname}: callback '{p.name}' is variadic")
    res = sig.result
    ctype = p.ctype if not p.ctype.count("(") else (
        f"{res.text} (*)({', '.join(q.type.text for q in sig.params) or 'void'})")
    sizes = {sym for shape in spec.arrays.values() for d in shape for sym in d.symbols}
    cnames = [f"a{i}" for i in range(len(sig.params))]
    ns: dict[str, Any] = {"_view": _view_maker(ffi), "_ffi": ffi, "_NULL": ffi.NULL, "_string": ffi.string}
    args: list[str] = []
    for i, q in enumerate(sig.params):
        c = cnames[i]
        if q.name in spec.arrays:
            dtype = q.type.dtype
            assert dtype is not None
            tdt = TORCH_DTYPES[dtype]
            ns[f"_dt{i}"] = tdt
            dims = []
            for d in spec.arrays[q.name]:
                factors = [cnames[[r.name for r in sig.params].index(sym)] for sym in d.symbols]
                dims.append(" * ".join(factors + ([str(d.factor)] if d.factor != 1 or not factors else [])))
            shape = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
            args.append(f"_view({c}, {shape}, _dt{i}, {tdt.itemsize}, {spec.copy})")
        elif q.name in sizes:
            continue
        elif q.type.pointer_depth == 1 and q.type.dtype == "any":
            continue  # user data: Python closures carry their own state
        elif q.type.pointer_depth == 1 and q.type.resolved == "char" and q.type.const:
            args.append(f"(None if {c} == _NULL else _string({c}).decode('utf-8', 'replace'))")
        else:
            args.append(c)
    call = f"_fn({', '.join(args)})"
    lines = ["def _make(_fn, _sink):", f"    def _cb({', '.join(cnames)}):", "        try:"]
    if res.text == "void":
        lines += [f"            {call}", "        except BaseException as _e:", "            _sink(_e)"]
        error_kw = ""
    else:
        conv = "float" if res.is_float else "int"
        lines += [f"            _r = {call}", f"            return 0 if _r is None else {conv}(_r)",
                  "        except BaseException as _e:", "            _sink(_e)", f"            return {spec.error}"]
        error_kw = f", error={spec.error}"
    lines.append(f"    return _ffi.callback(_ct, _cb{error_kw}, onerror=lambda _t, _v, _tb: _sink(_v))")
    src = "\n".join(lines) + "\n"
    ns["_ct"] = ctype
    make = _codegen.build(src, ns, function="_make", label=f"callback: {fname}.{p.name}")
    optional = True

    def factory(fn: Any, sink: Callable[[BaseException], None]) -> Any:
        if fn is None and optional:
            return ffi.NULL
        if isinstance(fn, ffi.CData):
            return fn  # a C function pointer given as is
        if not callable(fn):
            raise ArgumentTypeError(f"{fname}(): argument '{p.name}' expects a callable (or None), got {_describe(fn)}")
        return make(fn, sink)

    return factory


# --------------------------------------------------------------------------- #
# Bound functions                                                              #
# --------------------------------------------------------------------------- #


class BoundFunction:
    """One C function bound through its plan; ``call`` is its generated wrapper."""

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
        resolve: Callable[[str], Any] | None = None,
        native: bool = False,
        trampoline: int | None = None,
        keepalive: Any = None,
    ) -> None:
        self.ffi = ffi
        self.cfunc = cfunc
        self.decl = decl
        self.contract = contract
        self.error_message = error_message
        self.resolve = resolve
        self.native = native
        #: the address of the function's trampoline (see tensorffi._shims), if its module has one
        self.trampoline = trampoline
        self.keepalive = keepalive  # what keeps the trampoline's code loaded
        self.plan = build_plan(
            ffi, decl, contract, name=name, default_returns=default_returns, pointers_as_int=pointers_as_int
        )
        self._message_fn = self.library_function(self.plan.status_message, "return: status(...)")
        self.name = self.plan.name
        self.pointers_as_int = pointers_as_int
        #: the Python path: the whole call where the native one cannot run, and every
        #: call the native one does not accept as it is (it explains or copies)
        self.python_call = _Gen(self, "call").generate_call()
        native_call, self.native_reason = _lower.lower(self, self.python_call)
        self.call = native_call if native_call is not None else self.python_call
        for fn in {id(self.call): self.call, id(self.python_call): self.python_call}.values():
            fn.__qualname__ = fn.__name__ = self.name
            fn.__doc__ = self.doc()
            fn.__wrapped_bridge__ = self  # type: ignore[attr-defined]
        if native_call is not None:
            native_call.__signature__ = inspect.signature(self.python_call)

    @property
    def params(self) -> list[Param]:
        return self.plan.params

    @property
    def returns(self) -> str:
        return self.plan.returns

    @property
    def safe_name(self) -> str:
        return "_tf_" + "".join(ch if ch.isalnum() else "_" for ch in self.name)

    def doc(self) -> str:
        lines = [f"Bound C function: {self.decl.text};", f"Python: {self.plan.signature_text()}"]
        if self.contract.source:
            lines.append(f"contract: {self.contract.source}")
        lines.append(f"returns: {self.plan.returns}")
        return "\n".join(lines)

    def string(self, result: Any) -> str | None:
        return None if result == self.ffi.NULL else self.ffi.string(result).decode("utf-8", "replace")

    def library_function(self, name: str | None, clause: str) -> Any:
        """A function of the same library named by the contract (a destructor, a message)."""
        if name is None:
            return None
        fn = None
        if self.resolve is not None:
            try:
                fn = self.resolve(name)
            except (AttributeError, KeyError):
                fn = None
        if fn is None:
            raise ContractError(f"{self.name}: '{clause}' names {name!r}, which the library does not declare")
        return fn

    def message_for(self, code: int) -> str:
        if self._message_fn is not None:
            text = self._message_fn(int(code))
            return "" if text == self.ffi.NULL else self.ffi.string(text).decode("utf-8", "replace")
        return self.error_message() if self.error_message is not None else ""

    def raise_status(self, code: int) -> None:
        message = self.message_for(code)
        raise error_for_status(int(code), self.name, message or f"{self.name}() returned status {code}",
                               native=self.native)

    def handle_maker(self, ptr_type: str, destroy_name: str) -> Callable[[Any], Handle]:
        """A function turning the C pointer of type ``ptr_type`` into a Handle."""
        destroy = self.library_function(destroy_name, f"handle({destroy_name})")
        ffi, fname = self.ffi, self.name
        ctype = _typeof(ffi, ptr_type)
        label = ptr_type.replace("*", "").replace("struct ", "").strip() or "handle"

        def check(result: Any) -> None:
            if isinstance(result, int) and result != 0:
                raise error_for_status(result, destroy_name, self.message_for(result)
                                       or f"{destroy_name}() returned status {result}", native=self.native)

        def make(ptr: Any) -> Handle:
            if ptr == ffi.NULL:
                raise NativeError(f"{fname}() returned no handle (NULL)", 0, fname)
            return Handle(ptr, ctype if ctype is not None else ffi.typeof(ptr), destroy, name=label,
                          check_status=check)

        return make

    def callback_factory(self, p: Param) -> Callable[[Any, Callable[[BaseException], None]], Any]:
        """``factory(python_callable, error_sink) -> cffi callback`` for parameter ``p``."""
        return _callback_factory(self.ffi, p, self.name)

    def kernel(
        self, hidden: Mapping[str, Callable[[], Any]] | None = None, grad_guard: Callable[..., None] | None = None
    ) -> Callable[..., Any]:
        """The body of an operator (see :func:`tensor_kernel`)."""
        fn = _Gen(self, "kernel", hidden, grad_guard).generate_kernel()
        fn.__qualname__ = fn.__name__ = self.name
        return fn

    def shape_rule(self, hidden: Mapping[str, Callable[[], Any]] | None = None) -> Callable[..., Any]:
        """The operator's shape rule (see :func:`shape_rule`)."""
        fn = _Gen(self, "shape", hidden).generate_shape_rule()
        fn.__qualname__ = fn.__name__ = self.name + "_shape"
        return fn


def bind_function(
    ffi: Any,
    cfunc: Callable[..., Any],
    decl: CFunction,
    contract: Contract,
    **options: Any,
) -> Callable[..., Any]:
    """Bind one C function through the bridge; returns the checked Python callable."""
    return BoundFunction(ffi, cfunc, decl, contract, **options).call


def tensor_signature(bound: BoundFunction, hidden: Any = ()) -> tuple[list[OpArg], list[OpOutput]]:
    """The arguments and results of ``bound`` as an operator (see :func:`tensorffi.plan.operator_signature`)."""
    return operator_signature(bound.plan, hidden)


def tensor_kernel(
    bound: BoundFunction,
    hidden: Mapping[str, Callable[[], Any]] | None = None,
    *,
    grad_guard: Callable[..., None] | None = None,
) -> Callable[..., Any]:
    """A function that calls ``bound`` on CPU tensors in :func:`tensor_signature` order.

    It is the body of an operator (tensorffi.ops), generated from the same plan as
    the direct call: the dispatcher guarantees CPU tensors, so it checks dtype,
    layout, storage and the contract's sizes, allocates the ``out`` tensors and calls
    C. Unlike a bound function, it writes tensors that require grad: the operator
    layer decides (autograd cannot see C, so it refuses such writes while grad mode
    is on). ``hidden`` maps parameters left out of the signature to functions
    returning their value at each call. ``grad_guard(*tensor_args)``, if given, is
    called first whenever grad mode is on and a tensor argument requires grad.
    """
    return bound.kernel(hidden, grad_guard)


def shape_rule(bound: BoundFunction, hidden: Mapping[str, Callable[[], Any]] | None = None) -> Callable[..., Any]:
    """The shape rule (fake/meta kernel) of :func:`tensor_kernel`, from the same plan."""
    return bound.shape_rule(hidden)


__all__ = [
    "bind_function", "BoundFunction", "tensor_signature", "tensor_kernel", "shape_rule", "Struct", "strided",
    "prepare_array", "TORCH_DTYPES", "NUMPY_DTYPES", "NativeError", "ContractError",
]
