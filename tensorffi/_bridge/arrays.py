# SPDX-License-Identifier: MIT
"""Array arguments: the Python path's rules for a tensor or NumPy array that becomes a
C pointer (dtype, device, layout, the storage's extent, lazy views, writability).

The native call path (csrc/bridge_call.c) accepts what these rules pass as it is and
hands everything else here: this module explains a refusal, naming the argument, or
makes the contiguous copy a contract's declared shape allows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import cffi
import numpy as np

from .._torch import T
from ..errors import AllocationError, ArgumentTypeError, DeviceError, DTypeError, GradError, LayoutError, WritabilityError
from . import readonly

if TYPE_CHECKING:
    import torch

#: the element types arrays may have, by the names torch and NumPy share
DTYPE_NAMES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int8", "uint8", "int16",
               "uint16", "int32", "uint32", "int64", "uint64", "bool")


class _TorchDTypes(Mapping[str, Any]):
    """``{"float32": torch.float32, ...}``; reading a value imports torch (nothing else does)."""

    def __getitem__(self, name: str) -> Any:
        if name not in DTYPE_NAMES:
            raise KeyError(name)
        return getattr(T, name)

    def __iter__(self) -> Iterator[str]:
        return iter(DTYPE_NAMES)

    def __len__(self) -> int:
        return len(DTYPE_NAMES)


TORCH_DTYPES: Mapping[str, Any] = _TorchDTypes()
NUMPY_DTYPES: dict[str, np.dtype] = {name: np.dtype(name) for name in DTYPE_NAMES if name != "bfloat16"}
#: bytes per element of each element type
ITEMSIZE: dict[str, int] = {**{n: d.itemsize for n, d in NUMPY_DTYPES.items()}, "bfloat16": 2}

_ndarray = np.ndarray
_FFI = cffi.FFI()  # its CData type; any FFI can view NumPy memory
try:  # NumPy addresses: a compiled module's cast and from_buffer are C functions (cffi.FFI's are Python)
    from .._native import ffi as _CFFI
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
    if isinstance(v, T.Tensor):
        return f"torch.Tensor(dtype={v.dtype}, shape={tuple(v.shape)}, device={v.device})"
    if isinstance(v, _ndarray):
        return f"numpy.ndarray(dtype={v.dtype}, shape={v.shape})"
    return type(v).__name__


def _is_traced(t: torch.Tensor) -> str | None:
    """Name of the tracing tensor kind (fake, functional...), or None for a real tensor."""
    cls = type(t)
    if cls is T.Tensor or cls is T.Parameter:
        return None
    try:
        from torch._subclasses.fake_tensor import is_fake

        if is_fake(t):
            return "fake tensor (torch.compile / FakeTensorMode tracing)"
    except Exception:  # pragma: no cover - depends on torch internals
        pass
    if T._is_functional_tensor(t):
        return "functional tensor (torch.compile tracing)"
    if issubclass(cls, T.Parameter):
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
        return int(o.nbytes) if isinstance(o, (T.Tensor, _ndarray)) else 0


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
    ``grad_writes_ok``: the caller is an operator's body, whose autograd layer handles
    tensors that require grad: it may read them, and it has decided that writing one
    is allowed (under no_grad). Otherwise a tensor that requires grad is never
    written (:class:`WritabilityError`), and is read only with grad mode off
    (:class:`GradError`: C's result would be silently detached).

    A tensor C writes must not view a read-only buffer (``torch.frombuffer(bytes)``,
    a read-only mmap, ``torch.from_numpy`` of a read-only array; nor may a NumPy view
    of one): torch keeps no flag for it, so the bridge notes such tensors where torch
    makes them (:mod:`tensorffi._bridge.readonly` says what is and is not detected).
    """
    is_strided = isinstance(value, strided)
    if is_strided:
        value = value.obj
    if isinstance(value, T.Tensor):
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
    if t.layout is not T.strided:
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
    if not written and t.requires_grad and not grad_writes_ok and T.is_grad_enabled():
        raise GradError(
            f"{where} requires grad, but C runs outside autograd: its result would silently carry no "
            f"gradient back to this tensor. Pass x.detach() if no gradient is meant (or call under "
            f"torch.no_grad()), or make the function an operator with a backward: "
            f"tensorffi.ops.register(fn, 'namespace::name', backward=...)"
        )
    if written:
        if t.numel() and readonly.overlaps(t.data_ptr(), t.numel() * t.element_size()):
            raise WritabilityError(
                f"{where} is written by C, but the tensor's memory is a read-only buffer (torch.frombuffer "
                f"of bytes, a memoryview of bytes or a read-only mmap; torch.from_numpy of a read-only "
                f"array): C would change memory that must not change. Pass x.clone(), or make the "
                f"tensor from a writable buffer (torch.frombuffer(bytearray(data), ...))"
            )
        if t.requires_grad and not grad_writes_ok:
            raise WritabilityError(
                f"{where} is written by C in place, but the tensor requires grad: autograd cannot "
                f"see C's write. Pass a tensor that does not require grad (e.g. x.detach().clone())"
            )
        if t.is_inference() and not T.is_inference_mode_enabled():
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
        try:
            t = t.contiguous()
        except (RuntimeError, MemoryError) as exc:  # a broadcast view of 2**40 elements, say
            raise _copy_failed(where, tuple(t.shape), t.element_size(), exc) from None
        storage = t.untyped_storage()
    return Prepared(t.data_ptr(), t, tuple(t.shape), "torch", None, storage)


def _copy_failed(where: str, shape: tuple[int, ...], itemsize: int, exc: BaseException) -> AllocationError:
    n = 1
    for d in shape:
        n *= d
    return AllocationError(f"{where}: cannot make the contiguous copy C reads, of shape {shape} ({n * itemsize} "
                           f"bytes; a broadcast or expanded view is copied in full): {str(exc).splitlines()[0]}")


def _numpy_address(a: np.ndarray) -> int:
    if a.flags.c_contiguous:  # (the generated call's NumPy fast path inlines this line)
        return int(_CFFI.cast(_INTPTR, _CFFI.from_buffer(_CHARS, a)))
    return int(a.__array_interface__["data"][0])


def _tensor_base(a: np.ndarray) -> torch.Tensor | None:
    """The torch tensor whose memory a NumPy array views (``t.numpy()``), if any."""
    base = a.base
    for _ in range(64):
        if base is None or isinstance(base, T.Tensor):
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
        if storage is not None and readonly.overlaps(int(a.__array_interface__["data"][0]), a.nbytes):
            raise WritabilityError(
                f"{where} is written by C, but the NumPy array views a torch tensor over a read-only "
                f"buffer (torch.frombuffer of bytes, a read-only mmap; torch.from_numpy of a read-only "
                f"array). Pass a copy (x.copy(), or the tensor's .clone()), or build it from a bytearray"
            )
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
        try:
            a = np.array(a, order="C", copy=True)
        except MemoryError as exc:
            raise _copy_failed(where, tuple(a.shape), a.itemsize, exc) from None
    return Prepared(_numpy_address(a), a, a.shape, "numpy", None, storage)


def read_as_is(v: Any, dtype: str, written: bool, grad_ok: bool) -> tuple[Any, ...] | None:
    """The native path's rule for an argument C may use as it is (csrc/bridge_call.c,
    ``tfb_read_array``), in Python, for where the C reader cannot read torch tensors (a
    torch without the DLPack exchange API; ``TENSORFFI_BRIDGE=python``): ``(address,
    nbytes, shape, holder, is_numpy)`` or None, like ``bridge_read``. None sends the
    argument to :func:`prepare_array`, which explains the refusal or makes the copy."""
    cls = type(v)
    if cls is T.Tensor or cls is T.Parameter:
        try:
            if (dtype != "any" and v.dtype is not TORCH_DTYPES[dtype]) or not v.is_cpu or v.is_nested \
                    or not v.is_contiguous() or v.is_neg() or (v.is_complex() and v.is_conj()):
                return None
            if v.requires_grad and not grad_ok and (written or T.is_grad_enabled()):
                return None
            if written and v.is_inference():
                return None
            st = v.untyped_storage()
            nbytes = v.nbytes
            if nbytes and st.nbytes() < v.storage_offset() * v.element_size() + nbytes:
                return None  # a storage resized under the tensor
            if written and nbytes and readonly.overlaps(v.data_ptr(), nbytes):
                return None  # memory of a read-only buffer
            return v.data_ptr(), nbytes, v.shape, st, False
        except RuntimeError:  # (a sparse CSR tensor raises in is_contiguous())
            return None
    if cls is _ndarray and (v.dtype is NUMPY_DTYPES.get(dtype) or (
            dtype == "any" and v.dtype.isnative and v.dtype.name in NUMPY_DTYPES)):
        f = v.flags
        if not (f.c_contiguous and f.aligned) or (written and not f.writeable):
            return None
        base = v.base
        if base is not None and not (type(base) is _ndarray and base.base is None):
            return None  # a view of torch memory is checked against its storage there
        return _numpy_address(v), v.nbytes, v.shape, v, True
    return None


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
