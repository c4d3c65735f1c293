# SPDX-License-Identifier: MIT
"""IIR filtering with cascaded second-order sections, on NumPy arrays and torch tensors.

SciPy's ``sosfilt``, ``sosfilt_zi`` and ``sosfiltfilt``, with SciPy's semantics
(real and complex), computed by the C kernels of ``csrc/signal.c``: channels are
filtered side by side in SIMD lanes (AVX-512, AVX2 or baseline vectors, chosen at
run time) and spread over threads, with the GIL released. ``sosfilt`` is
differentiable in torch with respect to ``x``, ``sos`` and ``zi`` (the backward
pass is the adjoint recursion, also in C). :class:`SOSFilter` is a
``torch.nn.Module`` whose coefficients can be trained.

>>> import numpy as np, tensorffi.signal as tsig
>>> sos = np.array([[0.2, 0.4, 0.2, 1.0, -0.5, 0.3]])        # one second-order section
>>> y = tsig.sosfilt(sos, np.ones(4))
>>> np.round(y, 4).tolist()
[0.2, 0.7, 1.09, 1.135]

Decisions (where SciPy says nothing, or where we differ on purpose):

* **dtype.** As SciPy: the result has dtype ``result_type(sos, x, zi)`` (NumPy's
  rules for NumPy callers, ``torch.promote_types`` for torch callers; lists and
  arrays passed with a torch ``x`` count with their NumPy dtype), so float32 data
  with a float64 ``sos`` (what ``scipy.signal.butter`` returns) is filtered and
  returned in float64. Pass ``dtype=np.float32`` (or ``torch.float32``) to filter
  in float32 whatever the dtypes of ``sos`` and ``zi``. Supported: float32,
  float64, complex64, complex128. Where SciPy would refuse we widen: an integer or
  bool result is computed in float64, float16/bfloat16 in float32.
* **Complex.** Complex ``x``, ``sos`` and ``zi`` are supported. With real
  coefficients (or complex ones whose imaginary parts are all zero) the real and
  imaginary parts of ``x`` are filtered as separate channels by the real kernels
  (SciPy's values; only an infinite part differs: SciPy's complex products spread
  it as NaN into the other part). Complex coefficients have their own kernels
  (complex multiply-adds in SIMD lanes; complex128 in SciPy's operation order,
  bitwise). Autograd: complex ``x``/``zi`` with real ``sos`` is differentiable
  (torch's convention for complex gradients); complex ``sos`` under autograd is
  refused with :class:`~tensorffi.errors.DTypeError`.
* **float32 arithmetic.** float32 (and complex64) data is filtered in float32
  arithmetic when all poles of ``sos`` lie within radius 0.9 (roundoff then stays
  near 1e-6 of the output's peak); for poles nearer the unit circle (low cutoffs,
  narrow bands: most audio and physiological filters) float32 roundoff grows to
  1e-4..1e-2, so those are filtered in float64 arithmetic, with float32 input and
  output. The choice depends on ``sos`` only (see :func:`uses_float32_arithmetic`),
  so streaming calls stay consistent.
* **Recursion.** float64 runs SciPy's direct form II transposed operation for
  operation (no fused multiply-add), so float64 results of ``sosfilt``,
  ``sosfilt_zi`` and ``sosfiltfilt`` are bitwise SciPy's, on every SIMD level and
  with gcc and clang builds. float32 runs the state-space form of the same
  recursion with fused multiply-adds (a shorter dependency chain, and no
  cancellation between ``b1 x`` and ``a1 y`` in high-pass sections).
* **Streaming float32.** ``zf`` has the result's dtype; when float32 data is
  filtered in float64 arithmetic, rounding the states to float32 between calls
  costs a few float32 ulps of the output (chunked and one-call results then
  differ by ~1e-7 of the output's peak; float64 and float32-arithmetic calls agree
  exactly).
* **Layout.** Any axis, any strides: an input that is a permutation of a
  C-contiguous array (a transpose, ``.T``, ``movedim``) is read where it lies,
  with no copy, and the output has the same memory layout; other views are
  copied first.
* **sos[:, 3] (a0).** Must be 1, as in SciPy; otherwise
  :class:`~tensorffi.errors.InvalidArgumentError` names the function and the
  offending value. To *train* coefficients use :class:`SOSFilter`, which keeps
  a0 at 1 by construction. The gradient of ``sos[:, 3]`` is the one of the
  a0-normalised filter (``b / a0``, ``a / a0``), as ``lfilter`` defines it.
* **sosfiltfilt** is differentiable too (composed of two differentiable sosfilt
  calls) when a torch input requires grad; otherwise one C kernel does the padding,
  both passes and the trimming.
* **PyTorch operators.** ``torch.ops.tensorffi.sosfilt(sos, x, axis=-1, zi=None,
  threads=None) -> (y, zf)`` (``zf``: the final states, always computed, from zero
  states when ``zi`` is None), ``sosfilt_backward`` (the C adjoint; no double
  backward) and ``sosfiltfilt(sos, x, axis=-1, padtype="odd", padlen=None,
  threads=None)``, with shape rules for ``torch.compile``. They take float32,
  float64, complex64 and complex128 ``x`` (``zi`` of x's dtype; complex ``sos``
  needs complex ``x``); SciPy's dtype promotion stays in the public functions,
  whose torch path makes one operator call, so ``torch.compile(fullgraph=True)``
  of code calling :func:`sosfilt` has no graph break. ``sos[:, 3] == 1`` is
  checked when the operator runs, not while tracing. Under ``torch.compile``
  *with gradients*, ``sosfiltfilt`` needs ``padlen`` (the default depends on
  sos's values) or concrete sos.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Callable, Sequence

import numpy as np
import torch

from ._bridge import lower as _lower
from ._callbacks import CallbackScope
from ._kernels import eager_plain
from ._lib import native
from ._threads import get_num_threads, resolve_threads
from .errors import DeviceError, DTypeError, InvalidArgumentError, ShapeError, TensorFFIError

__all__ = ["sosfilt", "sosfilt_zi", "sosfiltfilt", "SOSFilter", "uses_float32_arithmetic", "simd_level"]

# --------------------------------------------------------------------------- #
# Native functions                                                             #
# --------------------------------------------------------------------------- #

# Complex signals cross into C as real arrays with the last axis doubled (real and
# imaginary parts interleaved): ``inner`` counts reals. Complex coefficients are
# [n_sections, 12]: the six coefficients of a section as (re, im) pairs.
_FORWARD = (
    "sos: [n_sections, {w}]; x: [outer, n, inner]; y: out [outer, n, inner]; "
    "zi: in? [n_sections, outer, 2, inner]; zf: inout? [n_sections, outer, 2, inner]"
)
_BACKWARD = (
    "sos: [n_sections, 6]; x: [outer, n, inner]; zi: in? [n_sections, outer, 2, inner]; "
    "gy: [outer, n, inner]; gzf: in? [n_sections, outer, 2, inner]; gsos: out [n_sections, 6]; "
    "gx: out [outer, n, inner]; gzi: out [n_sections, outer, 2, inner]"
)
_FILTFILT = "sos: [n_sections, {w}]; zi: [n_sections, {z}]; x: [outer, n, inner]; y: out [outer, n, inner]"

_RC = {"float32": "f32", "float64": "f64"}
_CC = {"complex64": "c64", "complex128": "c128"}
#: complex dtype -> the real dtype of its parts
_PART = {"complex64": "float32", "complex128": "float64"}

_forward_c = {dt: native(f"tf_signal_sosfilt_{s}", _FORWARD.format(w=6)) for dt, s in _RC.items()}
# the common case, a C-contiguous real signal filtered along its last axis, as 2-D
# [outer, n] arrays (no reshape to 3-D per call)
_FORWARD2 = (
    "sos: [n_sections, 6]; x: [outer, n]; y: out [outer, n]; zi: in? [n_sections, outer, 2]; "
    "zf: inout? [n_sections, outer, 2]; inner = 1"
)
_forward2_c = {dt: native(f"tf_signal_sosfilt_{s}", _FORWARD2) for dt, s in _RC.items()}
# the same, with y and zf allocated by the bridge (in the caller's kind)
_FORWARD2_OUT = _FORWARD2.replace("zf: inout?", "zf: out")
_forward2_out_c = {dt: native(f"tf_signal_sosfilt_{s}", _FORWARD2_OUT) for dt, s in _RC.items()}
_forward_cc = {dt: native(f"tf_signal_sosfilt_{s}", _FORWARD.format(w=12)) for dt, s in _CC.items()}
_backward_c = {dt: native(f"tf_signal_sosfilt_backward_{s}", _BACKWARD) for dt, s in _RC.items()}
_filtfilt_c = {dt: native(f"tf_signal_sosfiltfilt_{s}", _FILTFILT.format(w=6, z=2)) for dt, s in _RC.items()}
_filtfilt_cc = {dt: native(f"tf_signal_sosfiltfilt_{s}", _FILTFILT.format(w=12, z=4)) for dt, s in _CC.items()}
# The same kernels with a progress callback (fn, handle after nthreads), for calls of
# at least _WATCH_WORK: only those can be stopped by Ctrl-C or cancelled (see _watched).
_forward_cb = {dt: native(f"tf_signal_sosfilt_cb_{s}", _FORWARD.format(w=6)) for dt, s in _RC.items()}
_forward2_cb = {dt: native(f"tf_signal_sosfilt_cb_{s}", _FORWARD2) for dt, s in _RC.items()}
_forward_ccb = {dt: native(f"tf_signal_sosfilt_cb_{s}", _FORWARD.format(w=12)) for dt, s in _CC.items()}
_backward_cb = {dt: native(f"tf_signal_sosfilt_backward_cb_{s}", _BACKWARD) for dt, s in _RC.items()}
_filtfilt_cb = {dt: native(f"tf_signal_sosfiltfilt_cb_{s}", _FILTFILT.format(w=6, z=2)) for dt, s in _RC.items()}
_filtfilt_ccb = {dt: native(f"tf_signal_sosfiltfilt_cb_{s}", _FILTFILT.format(w=12, z=4)) for dt, s in _CC.items()}
#: Work (channels x samples x sections, per pass) from which a call is made with the
#: progress callback: ~5 ms of filtering on one thread. Smaller calls keep the native
#: call path (a callback scope and the bridge's Python path cost ~10-20 us) and cannot
#: be interrupted, as any C call; larger ones stop within ~20 ms of Ctrl-C.
_WATCH_WORK = 1 << 23
#: Signals this small take the operator's fast path without reading sos's shape
#: (0.3 us of a 14 us call): unwatched, so that only a cascade of more than 256
#: sections on them would be a long call Ctrl-C cannot stop.
_FAST_SAMPLES = _WATCH_WORK >> 8
_f32_arith_c = native("tf_signal_f32_arith", "sos: [n_sections, 6]; return: value")
_f32_arith_cc = native("tf_signal_f32_arith_complex", "sos: [n_sections, 12]; return: value")
_lanes_c = native("tf_signal_lanes", "return: value")
_simd_c = native("tf_signal_simd", "return: value")

#: padtype -> TF_SIGNAL_PAD_* (csrc/tensorffi.h)
PADTYPES: dict[str | None, int] = {None: 0, "odd": 1, "even": 2, "constant": 3}
_PADTYPE_MESSAGE = "Unknown value '{}' given to padtype. padtype must be 'even', 'odd', 'constant', or None."

ArrayLike = Any  # np.ndarray | torch.Tensor | nested sequences
_Tensor = torch.Tensor
_ndarray = np.ndarray

# --------------------------------------------------------------------------- #
# dtypes                                                                       #
# --------------------------------------------------------------------------- #

_TORCH_TO_NUMPY = {
    torch.bool: np.dtype(np.bool_),
    torch.uint8: np.dtype(np.uint8),
    torch.int8: np.dtype(np.int8),
    torch.int16: np.dtype(np.int16),
    torch.int32: np.dtype(np.int32),
    torch.int64: np.dtype(np.int64),
    torch.float16: np.dtype(np.float16),
    torch.bfloat16: np.dtype(np.float32),  # no NumPy bfloat16: computed in float32 anyway
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
    torch.complex64: np.dtype(np.complex64),
    torch.complex128: np.dtype(np.complex128),
}
#: real sos tensors read as they are (no conjugate or negative bit to resolve)
_SOS_FAST = (torch.float64, torch.float32)
_NUMPY_TO_TORCH = {
    "float32": torch.float32, "float64": torch.float64, "complex64": torch.complex64, "complex128": torch.complex128,
}
_COMPUTE = ("float32", "float64", "complex64", "complex128")
#: dtype (NumPy or torch) -> its name, for the four dtypes the kernels compute in
_NAMES: dict[Any, str] = {np.dtype(n): n for n in _COMPUTE}
_NAMES.update({t: n for n, t in _NUMPY_TO_TORCH.items()})
#: the same as NumPy dtypes
_NP_DTYPES = {n: np.dtype(n) for n in _COMPUTE}


def _compute_dtype(fn: str, dt: np.dtype) -> str:
    """The dtype a promoted ``dt`` is computed and returned in (module docstring)."""
    name = _NAMES.get(dt)
    if name is not None:
        return name
    name = dt.name
    if name in _NUMPY_TO_TORCH:
        return name
    if dt.kind in "biu":
        return "float64"
    if dt.kind == "f" and dt.itemsize < 4:
        return "float32"
    if dt.kind in "fc":
        raise DTypeError(f"{fn}(): {dt} is not supported (float32, float64, complex64 and complex128 are); "
                         f"pass dtype=numpy.float64 (or complex128) to compute in double precision")
    raise DTypeError(f"{fn}(): input type {dt} is not supported")


def _user_dtype(fn: str, dtype: Any, promoted: str) -> str:
    """The ``dtype=`` argument as one of _COMPUTE, checked against the inputs."""
    if isinstance(dtype, torch.dtype):
        if dtype not in _TORCH_TO_NUMPY or dtype in (torch.bfloat16,):
            raise DTypeError(f"{fn}(): dtype must be float32, float64, complex64 or complex128, got {dtype}")
        want = _TORCH_TO_NUMPY[dtype].name
    else:
        try:
            want = np.dtype(dtype).name
        except TypeError:
            raise DTypeError(f"{fn}(): dtype must be a NumPy or torch dtype, got {dtype!r}") from None
    if want not in _NUMPY_TO_TORCH:
        raise DTypeError(f"{fn}(): dtype must be float32, float64, complex64 or complex128, got {want}")
    if promoted.startswith("complex") and not want.startswith("complex"):
        raise DTypeError(f"{fn}(): the inputs are complex ({promoted}); a real dtype={want} would drop their "
                         f"imaginary parts")
    return want


# --------------------------------------------------------------------------- #
# Facts about one sos, computed once per distinct content                      #
# --------------------------------------------------------------------------- #


class _Sos:
    """A validated sos and what the kernels need from it.

    ``c``: float64, C-contiguous: ``[S, 6]`` for real coefficients (also complex
    ones whose imaginary parts are all zero), ``[S, 12]`` (re, im pairs) for
    complex ones; ``dtype``: the dtype sos counts with in type promotion."""

    __slots__ = ("c", "S", "cplx", "dtype", "bad_a0", "ntaps", "_zi", "_arr", "_ct")

    def __init__(self, arr: np.ndarray) -> None:
        self._arr = arr
        self.S = int(arr.shape[0])
        self.dtype = arr.dtype
        self.cplx = arr.dtype.kind == "c" and bool(np.any(arr.imag != 0))
        if self.cplx:
            self.c = np.ascontiguousarray(arr, dtype=np.complex128).view(np.float64)
        else:
            self.c = np.ascontiguousarray(arr.real if arr.dtype.kind == "c" else arr, dtype=np.float64)
        bad = np.flatnonzero(arr[:, 3] != 1)
        self.bad_a0 = (int(bad[0]), arr[bad[0], 3].item()) if bad.size else None
        self.ntaps = 2 * self.S + 1 - min(int((arr[:, 2] == 0).sum()), int((arr[:, 5] == 0).sum()))
        self._zi: np.ndarray | None = None
        self._ct: torch.Tensor | None = None

    def ct(self) -> torch.Tensor:
        """``c`` as a tensor (sharing its memory): calls on tensors pass tensors only."""
        if self._ct is None:
            self._ct = torch.from_numpy(self.c)
        return self._ct

    def zi(self) -> np.ndarray:
        """sosfilt_zi in the kernels' form: float64 [S, 2], or [S, 4] for complex."""
        if self._zi is None:
            zi = _steady_state(self._arr)
            self._zi = np.ascontiguousarray(zi, np.complex128).view(np.float64) if self.cplx else \
                np.ascontiguousarray(zi.real if zi.dtype.kind == "c" else zi, np.float64)
        return self._zi


_SOS_CACHE: "OrderedDict[tuple[Any, ...], _Sos]" = OrderedDict()
_SOS_CACHE_SIZE = 64


def _sos_array(sos: Any, fn: str) -> np.ndarray:
    """sos as a 2-D NumPy array of shape (n_sections, 6) (SciPy's _validate_sos, less a0)."""
    if type(sos) is _ndarray and sos.ndim == 2 and sos.shape[1] == 6 and sos.dtype.kind in "fc":
        return sos
    if isinstance(sos, _Tensor) and sos.dtype in _SOS_FAST and sos.is_cpu and sos.dim() == 2 and sos.shape[1] == 6:
        return sos.detach().numpy()
    if isinstance(sos, _Tensor):
        if sos.device.type != "cpu":
            raise DeviceError(f"{fn}(): argument 'sos' must be a CPU tensor, got device {sos.device}")
        t = sos.detach()
        if t.dtype is torch.bfloat16 or t.dtype is torch.float16:
            t = t.float()
        arr = t.resolve_conj().resolve_neg().numpy()
    else:
        arr = sos if type(sos) is _ndarray else np.asarray(sos)
    if arr.dtype.kind not in "biufc":
        raise DTypeError(f"{fn}(): sos must be numeric, got {arr.dtype}")
    if arr.ndim < 2:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2:
        raise ShapeError(f"{fn}(): sos array must be 2D, got shape {arr.shape}")
    if arr.shape[1] != 6:
        raise ShapeError(f"{fn}(): sos array must be shape (n_sections, 6), got {arr.shape}")
    return arr


def _sos_facts(sos: Any, fn: str, check_a0: bool = True) -> _Sos:
    """The (cached) facts of ``sos``. The cache key is sos's content, so a later
    change of the caller's array is never missed."""
    arr = _sos_array(sos, fn)
    key = (arr.dtype, arr.shape, arr.tobytes())
    facts = _SOS_CACHE.get(key)
    if facts is None:
        facts = _Sos(arr.copy())
        _SOS_CACHE[key] = facts
        if len(_SOS_CACHE) > _SOS_CACHE_SIZE:
            _SOS_CACHE.popitem(last=False)
    if check_a0 and facts.bad_a0 is not None:
        raise _a0_error(fn, facts.bad_a0)
    return facts


def _a0_error(fn: str, bad: tuple[int, Any]) -> InvalidArgumentError:
    i, value = bad
    return InvalidArgumentError(
        f"{fn}(): sos[:, 3] should be all ones (a0 of every section), but sos[{i}, 3] = {value!r}. "
        f"Divide each section by its a0 (sos = sos / sos[:, 3:4]); to train filter coefficients, use "
        f"tensorffi.signal.SOSFilter, which keeps a0 at 1",
        -1,
        fn,
    )


# --------------------------------------------------------------------------- #
# Layouts: an N-d signal as [outer, n, inner]                                  #
# --------------------------------------------------------------------------- #


def _normalize_axis(axis: Any, ndim: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"axis must be an integer, got {type(axis).__name__}")
    if not -ndim <= axis < ndim:
        raise ShapeError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return int(axis) % ndim


def _memory_order(x: Any) -> list[int]:
    """Axes of ``x`` from the slowest to the fastest in memory, if ``x`` is a
    permutation of a C-contiguous array; otherwise its own order (it is copied)."""
    nd = x.ndim
    strides = x.stride() if isinstance(x, _Tensor) else x.strides
    order = sorted(range(nd), key=lambda d: -strides[d])
    if order == list(range(nd)):
        return order
    if isinstance(x, _Tensor):
        ok = x.permute(order).is_contiguous()
    else:
        ok = x.transpose(order).flags.c_contiguous
    return order if ok else list(range(nd))


def _inverse(order: Sequence[int]) -> list[int]:
    inv = [0] * len(order)
    for i, d in enumerate(order):
        inv[d] = i
    return inv


def _permute(a: Any, order: Sequence[int]) -> Any:
    if list(order) == list(range(len(order))):
        return a
    return a.permute(*order) if isinstance(a, _Tensor) else a.transpose(order)


def _contiguous(a: Any) -> Any:
    if isinstance(a, _Tensor):
        return a.resolve_conj().resolve_neg().contiguous()
    return np.ascontiguousarray(a)


class _Layout:
    """How an N-d signal and its states map onto ``[outer, n, inner]`` arrays."""

    def __init__(self, x: Any, axis: int) -> None:
        self.order = _memory_order(x)
        self.pos = self.order.index(axis)
        self.shape = tuple(int(x.shape[d]) for d in self.order)  # permuted shape
        self.outer = math.prod(self.shape[: self.pos])
        self.n = self.shape[self.pos]
        self.inner = math.prod(self.shape[self.pos + 1 :])
        self.zorder = [0] + [d + 1 for d in self.order]

    def to3(self, x: Any) -> Any:
        return _contiguous(_permute(x, self.order)).reshape(self.outer, self.n, self.inner)

    def from3(self, y3: Any) -> Any:
        return _permute(y3.reshape(self.shape), _inverse(self.order))

    def zi_to3(self, zi: Any, n_sections: int) -> Any:
        return _contiguous(_permute(zi, self.zorder)).reshape(n_sections, self.outer, 2, self.inner)

    def zf_from3(self, zf3: Any, n_sections: int) -> Any:
        zshape = (n_sections,) + self.shape[: self.pos] + (2,) + self.shape[self.pos + 1 :]
        return _permute(zf3.reshape(zshape), _inverse(self.zorder))


def _zi_shape(x_shape: Sequence[int], axis_n: int, n_sections: int) -> tuple[int, ...]:
    return (n_sections,) + tuple(2 if d == axis_n else int(s) for d, s in enumerate(x_shape))


def _zi_shape_error(fn: str, axis: Any, x_shape: Sequence[int], n_sections: int, want: Sequence[int],
                    got: Sequence[int]) -> ShapeError:
    return ShapeError(
        f"{fn}(): Invalid zi shape. With axis={axis!r}, an input with shape {tuple(x_shape)!r}, "
        f"and an sos array with {n_sections} sections, argument 'zi' must have shape {tuple(want)!r}, "
        f"got {tuple(got)!r}."
    )


# --------------------------------------------------------------------------- #
# Kernel calls on [outer, n, inner] arrays (NumPy or torch, one kind per call)  #
# --------------------------------------------------------------------------- #


def _dtype_name(a: Any) -> str:
    name = _NAMES.get(a.dtype)
    return name if name is not None else str(a.dtype).replace("torch.", "")


def _parts(a: Any) -> Any:
    """A complex ``[..., inner]`` array as reals ``[..., 2 * inner]`` (a view)."""
    if a is None:
        return None
    if isinstance(a, _Tensor):
        return torch.view_as_real(a).flatten(-2)
    return a.view(_PART[a.dtype.name])


_LARGE = 1 << 20  # bytes


def _empty_np(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """np.empty, 64-byte aligned when large: the kernels then write whole cache
    lines, around the caches (non-temporal stores; see signal.c). NumPy asks the
    kernel for huge pages for large arrays (torch's CPU allocator does not, by
    default): filling a fresh 32 MB output takes a few page faults, not thousands."""
    dt = np.dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize
    if nbytes < _LARGE:
        return np.empty(shape, dt)
    raw = np.empty(nbytes + 64, np.uint8)
    off = -raw.ctypes.data % 64
    return raw[off : off + nbytes].view(dt).reshape(shape)


def _empty(shape: tuple[int, ...], dtype: str, like: Any) -> Any:
    """A new output array in ``like``'s kind (large tensors own a NumPy array: see _empty_np)."""
    if isinstance(like, _Tensor):
        if math.prod(shape) * 8 < _LARGE:
            return torch.empty(shape, dtype=_NUMPY_TO_TORCH[dtype])
        return torch.from_numpy(_empty_np(shape, dtype))
    return _empty_np(shape, dtype)


def _watched(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a ``_cb`` kernel with a progress callback that only checks for Ctrl-C: a
    KeyboardInterrupt (or any exception the callback stores) stops C within ~20 ms
    and is re-raised here, as :func:`tensorffi.physics.nbody` and
    :func:`tensorffi.io.read_csv` do; the outputs are then partly written."""
    with CallbackScope(None) as scope:
        return scope.call(fn, *args, scope.fn, scope.handle, **kwargs)


def _forward3(f: _Sos, x3: Any, zi3: Any, y3: Any, zf3: Any, nthreads: int) -> None:
    """y3, zf3 (zf3 may be None) = sosfilt of x3 along its middle axis, from zi3 (None: zeros).
    All arrays C-contiguous, of one dtype among _COMPUTE and one kind."""
    dt = _dtype_name(x3)
    watch = math.prod(x3.shape) * f.S >= _WATCH_WORK
    if dt in _PART:
        x3, zi3, y3, zf3 = _parts(x3), _parts(zi3), _parts(y3), _parts(zf3)
        if f.cplx:
            fn = _forward_ccb[dt] if watch else _forward_cc[dt]
        else:
            fn = (_forward_cb if watch else _forward_c)[_PART[dt]]
    else:
        fn = (_forward_cb if watch else _forward_c)[dt]
    if watch:
        _watched(fn, f.c, x3, nthreads, zi=zi3, y=y3, zf=zf3)
    else:
        fn(f.c, x3, nthreads, zi=zi3, y=y3, zf=zf3)


def _forward2_watched(name: str, c: Any, x2: Any, nthreads: int, zi: Any, y: Any, zf: Any) -> None:
    """The 2-D last-axis sosfilt call of the common case, with the progress
    callback when it is long (see _WATCH_WORK)."""
    if math.prod(x2.shape) * int(c.shape[0]) >= _WATCH_WORK:
        _watched(_forward2_cb[name], c, x2, nthreads, zi=zi, y=y, zf=zf)
    else:
        _forward2_c[name](c, x2, nthreads, zi=zi, y=y, zf=zf)


def _filtfilt3(f: _Sos, x3: Any, y3: Any, edge: int, padtype: str | None, nthreads: int) -> None:
    """The one-kernel sosfiltfilt of ``[outer, n, inner]`` ``x3`` into ``y3``."""
    dt = _dtype_name(x3)
    watch = 2 * math.prod(x3.shape) * f.S >= _WATCH_WORK
    if dt in _PART:
        x3, y3 = _parts(x3), _parts(y3)
        if f.cplx:
            fn = _filtfilt_ccb[dt] if watch else _filtfilt_cc[dt]
        else:
            fn = (_filtfilt_cb if watch else _filtfilt_c)[_PART[dt]]
    else:
        fn = (_filtfilt_cb if watch else _filtfilt_c)[dt]
    if watch:
        _watched(fn, f.c, f.zi(), x3, PADTYPES[padtype], edge, nthreads, y=y3)
    else:
        fn(f.c, f.zi(), x3, PADTYPES[padtype], edge, nthreads, y=y3)


def _backward3(f: _Sos, x3: Any, zi3: Any, gy3: Any, gzf3: Any, nthreads: int) -> tuple[Any, Any, Any]:
    """The adjoint of :func:`_forward3` (real coefficients): ``(gsos, gx3, gzi3)``, gsos
    float64 ``[n_sections, 6]`` summed over every channel (both parts of complex ones).
    The forward pass is recomputed in C from checkpoints (about four forward passes)."""
    dt = _dtype_name(x3)
    gx3 = _empty(tuple(x3.shape), dt, x3)
    gzi3 = _empty((f.S, int(x3.shape[0]), 2, int(x3.shape[2])), dt, x3)
    # the adjoint is ~4 forward passes
    table = _backward_cb if 4 * math.prod(x3.shape) * f.S >= _WATCH_WORK else _backward_c
    if dt in _PART:
        fn = table[_PART[dt]]
        x3, zi3, gy3, gzf3, gx, gzi = _parts(x3), _parts(zi3), _parts(gy3), _parts(gzf3), _parts(gx3), _parts(gzi3)
    else:
        fn = table[dt]
        gx, gzi = gx3, gzi3
    if table is _backward_cb:
        gsos = _watched(fn, f.c, x3, gy3, nthreads, zi=zi3, gzf=gzf3, gx=gx, gzi=gzi)[0]
    else:
        gsos = fn(f.c, x3, gy3, nthreads, zi=zi3, gzf=gzf3, gx=gx, gzi=gzi)[0]
    return gsos, gx3, gzi3


# --------------------------------------------------------------------------- #
# Public API                                                                   #
# --------------------------------------------------------------------------- #


def sosfilt(
    sos: ArrayLike,
    x: ArrayLike,
    axis: int = -1,
    zi: ArrayLike | None = None,
    *,
    dtype: Any = None,
    threads: int | None = None,
) -> Any:
    """Filter ``x`` along ``axis`` with cascaded second-order sections (SciPy's sosfilt).

    ``sos`` is ``(n_sections, 6)``: rows ``(b0, b1, b2, a0, a1, a2)`` with
    ``a0 == 1``. ``zi``, if given, holds the initial states, shape
    ``(n_sections, ..., 2, ...)`` (x's shape with ``x.shape[axis]`` replaced by 2);
    then ``(y, zf)`` is returned, and filtering a signal chunk by chunk, passing
    each ``zf`` as the next ``zi``, gives the same result as one call. Returns the
    caller's kind (torch tensor or NumPy array) in dtype ``result_type(sos, x, zi)``
    (or ``dtype``, if given: e.g. ``numpy.float32`` to filter float32 data in
    float32 with a float64 ``sos``); real or complex. Differentiable in torch with
    respect to ``x``, ``sos`` and ``zi``. ``threads`` caps the threads (default:
    :func:`tensorffi.get_num_threads`). Ctrl-C stops a long call (>= 2^23 samples x
    sections) within ~20 ms with ``KeyboardInterrupt``, as ``physics.nbody`` does;
    shorter calls finish first. An interrupted call returns nothing: its outputs were
    allocated for it and are dropped, partly written; ``x`` and ``zi`` are never written.

    >>> import torch, tensorffi.signal as tsig
    >>> sos = torch.tensor([[0.2, 0.4, 0.2, 1.0, -0.5, 0.3]])
    >>> x = torch.ones(2, 4)
    >>> y, zf = tsig.sosfilt(sos, x, zi=torch.zeros(1, 2, 2))
    >>> y.dtype, tuple(zf.shape)
    (torch.float32, (1, 2, 2))
    """
    if isinstance(x, _Tensor):
        return _sosfilt_torch(sos, x, axis, zi, dtype, threads)
    fn = "sosfilt"
    if type(x) is not _ndarray:
        x = np.asarray(x)
    nd = x.ndim
    if nd == 0:
        raise ShapeError(f"{fn}(): x must be at least 1-D")
    f = _sos_facts(sos, fn)
    nthreads = get_num_threads() if threads is None else resolve_threads(threads)
    axis_n = nd - 1 if axis == -1 and type(axis) is int else _normalize_axis(axis, nd)
    S = f.S
    xdt = x.dtype
    if zi is not None:
        if type(zi) is not _ndarray:
            zi = zi.detach().cpu().resolve_conj().resolve_neg().numpy() if isinstance(zi, _Tensor) else np.asarray(zi)
        want = _zi_shape(x.shape, axis_n, S)
        if zi.shape != want:
            raise _zi_shape_error(fn, axis, x.shape, S, want, zi.shape)
        zdt = zi.dtype
        promoted = xdt if (xdt == f.dtype and zdt == xdt) else np.result_type(f.dtype, xdt, zdt)
    else:
        promoted = xdt if xdt == f.dtype else np.result_type(f.dtype, xdt)
    name = _NAMES.get(promoted) or _compute_dtype(fn, promoted)
    if dtype is not None:
        name = _user_dtype(fn, dtype, name)
    dt = _NP_DTYPES[name]
    if xdt != dt:
        x = x.astype(dt)
    if zi is not None and (zi.dtype != dt or not zi.flags.c_contiguous):
        zi = np.ascontiguousarray(zi, dtype=dt)
    if axis_n == nd - 1 and x.flags.c_contiguous and not f.cplx and dt.kind == "f":
        # the common case: a C-contiguous real signal filtered along its last axis
        n = x.shape[-1]
        x2 = x if nd == 2 else x.reshape(-1, n) if n else x.reshape(math.prod(x.shape[:-1]), 0)
        outer = x2.shape[0]
        y = _empty_np(x.shape, dt)
        y2 = y if nd == 2 else y.reshape(outer, n)
        if zi is None:
            if x2.size * S < _WATCH_WORK:
                _forward2_c[name](f.c, x2, nthreads, y=y2)
            else:
                _watched(_forward2_cb[name], f.c, x2, nthreads, y=y2)
            return y
        zf = np.empty(zi.shape, dt)
        _forward2_watched(name, f.c, x2, nthreads, zi.reshape(S, outer, 2), y2, zf.reshape(S, outer, 2))
        return y, zf
    lay = _Layout(x, axis_n)
    x3 = lay.to3(x)
    y3 = _empty_np(x3.shape, dt)
    if zi is None:
        _forward3(f, x3, None, y3, None, nthreads)
        return lay.from3(y3)
    zf3 = np.empty((S, lay.outer, 2, lay.inner), dt)
    _forward3(f, x3, lay.zi_to3(zi, S), y3, zf3, nthreads)
    return lay.from3(y3), lay.zf_from3(zf3, S)


def _lfilter_zi_2(b: np.ndarray, a: np.ndarray) -> np.ndarray:
    """scipy.signal.lfilter_zi for one section (b, a of length 3), ported as is
    (scipy.linalg.companion included), so the results are bitwise SciPy's."""
    while a.shape[0] > 1 and a[0] == 0.0:
        a = a[1:]
    if a.size < 1:
        raise InvalidArgumentError("sosfilt_zi(): There must be at least one nonzero `a` coefficient.", -1,
                                   "sosfilt_zi")
    if a[0] != 1.0:
        b = b / a[0]
        a = a / a[0]
    n = max(a.shape[0], b.shape[0])
    if a.shape[0] < n:
        a = np.concatenate((a, np.zeros(n - a.shape[0], dtype=a.dtype)))
    dt = np.result_type(a, b)
    first_row = -a[1:] / (1.0 * a[0:1])
    companion = np.zeros((n - 1, n - 1), dtype=first_row.dtype)
    companion[0, :] = first_row
    companion[np.arange(1, n - 1), np.arange(0, n - 2)] = 1
    i_minus_a = np.asarray(np.eye(n - 1) - companion.T, dtype=dt)
    rhs = b[1:] - a[1:] * b[0]
    return np.linalg.solve(i_minus_a, rhs)


def _steady_state(arr: np.ndarray) -> np.ndarray:
    """SciPy's sosfilt_zi of a validated ``(n_sections, 6)`` array."""
    if arr.dtype.kind in "biu":
        arr = arr.astype(np.float64)
    if arr.dtype.kind not in "fc":
        raise DTypeError(f"sosfilt_zi(): sos must be numeric, got {arr.dtype}")
    zi = np.empty((arr.shape[0], 2), dtype=arr.dtype)
    scale = 1.0
    for s in range(arr.shape[0]):
        b, a = arr[s, :3], arr[s, 3:]
        zi[s] = scale * _lfilter_zi_2(b, a)
        scale *= b.sum() / a.sum()
    return zi


def sosfilt_zi(sos: ArrayLike) -> Any:
    """Initial states for :func:`sosfilt` that make its step response steady (SciPy's sosfilt_zi).

    Returns ``(n_sections, 2)`` in sos's dtype (real or complex; integers give
    float64), as a torch tensor if ``sos`` is one. Scale it by the first sample, as
    ``zi = sosfilt_zi(sos)[:, None, :] * x[..., :1]``, to start a signal without
    a transient.

    >>> import numpy as np, tensorffi.signal as tsig
    >>> sos = np.array([[0.2, 0.4, 0.2, 1.0, -0.5, 0.3]])
    >>> y, zf = tsig.sosfilt(sos, np.ones(3), zi=tsig.sosfilt_zi(sos))
    >>> np.allclose(y, 1.0)
    True
    """
    is_torch = isinstance(sos, _Tensor)
    arr = sos.detach().cpu().resolve_conj().resolve_neg().numpy() if is_torch else np.asarray(sos)
    if arr.ndim != 2 or arr.shape[1] != 6:
        raise ShapeError(f"sosfilt_zi(): sos must be shape (n_sections, 6), got {arr.shape}")
    zi = _steady_state(arr)
    return torch.from_numpy(zi) if is_torch else zi


def _steady_state_torch(sos: torch.Tensor) -> torch.Tensor:
    """sosfilt_zi for sections with a0 == 1, in differentiable torch ops."""
    b0, b1, b2, a1, a2 = sos[:, 0], sos[:, 1], sos[:, 2], sos[:, 4], sos[:, 5]
    r0, r1 = b1 - a1 * b0, b2 - a2 * b0
    z0 = (r0 + r1) / (1 + a1 + a2)
    z1 = r1 - a2 * z0
    gain = (b0 + b1 + b2) / (1 + a1 + a2)
    scale = torch.cat([torch.ones_like(gain[:1]), torch.cumprod(gain, 0)[:-1]])
    return torch.stack([z0, z1], 1) * scale[:, None]


def _pad_torch(x3: torch.Tensor, edge: int, padtype: str | None) -> torch.Tensor:
    """SciPy's odd/even/constant extension of ``x3`` along its middle axis."""
    if padtype is None or edge <= 0:
        return x3
    first, last = x3[:, :1], x3[:, -1:]
    left = x3[:, 1 : edge + 1].flip(1)
    right = x3[:, -edge - 1 : -1].flip(1)
    if padtype == "odd":
        left, right = 2 * first - left, 2 * last - right
    elif padtype == "constant":
        left, right = first.expand_as(left), last.expand_as(right)
    return torch.cat([left, x3, right], 1)


def _edge(fn: str, ntaps: int, n: int, padtype: Any, padlen: Any) -> int:
    """SciPy's _validate_pad: the extension length (a negative padlen means none)."""
    if padtype not in PADTYPES:
        raise InvalidArgumentError(f"{fn}(): " + _PADTYPE_MESSAGE.format(padtype), -1, fn)
    if padtype is None:
        edge = 0
    elif padlen is None:
        edge = 3 * ntaps
    else:
        edge = int(padlen)
    if n <= edge:
        raise ShapeError(f"{fn}(): The length of the input vector x must be greater than padlen, which is {edge}.")
    return max(edge, 0)


def sosfiltfilt(
    sos: ArrayLike,
    x: ArrayLike,
    axis: int = -1,
    padtype: str | None = "odd",
    padlen: int | None = None,
    *,
    dtype: Any = None,
    threads: int | None = None,
) -> Any:
    """Zero-phase filtering: forward, then backward (SciPy's sosfiltfilt).

    ``x`` is extended at both ends by ``padlen`` samples (default
    ``3 * (2 * n_sections + 1 - min((sos[:, 2] == 0).sum(), (sos[:, 5] == 0).sum()))``)
    of type ``padtype`` ('odd', 'even', 'constant', or None for no extension),
    filtered forward and backward from the steady state of its end samples, and
    trimmed back. Returns the caller's kind in dtype ``result_type(sos, x)`` (or
    ``dtype``), as :func:`sosfilt`. Differentiable in torch (with respect to ``x``
    and ``sos``). Ctrl-C stops a long call as it stops :func:`sosfilt` (the result,
    partly written, is dropped).

    >>> import numpy as np, tensorffi.signal as tsig
    >>> sos = np.array([[0.2, 0.4, 0.2, 1.0, -0.5, 0.3]])
    >>> y = tsig.sosfiltfilt(sos, np.arange(12.0))
    >>> y.shape, y.dtype
    ((12,), dtype('float64'))
    """
    if isinstance(x, _Tensor):
        return _sosfiltfilt_torch(sos, x, axis, padtype, padlen, dtype, threads)
    fn = "sosfiltfilt"
    f = _sos_facts(sos, fn)
    if type(x) is not _ndarray:
        x = np.asarray(x)
    if x.ndim == 0:
        raise ShapeError(f"{fn}(): x must be at least 1-D")
    axis_n = _normalize_axis(axis, x.ndim)
    edge = _edge(fn, f.ntaps, int(x.shape[axis_n]), padtype, padlen)
    dt = _compute_dtype(fn, np.result_type(f.dtype, x.dtype))
    if dtype is not None:
        dt = _user_dtype(fn, dtype, dt)
    nthreads = get_num_threads() if threads is None else resolve_threads(threads)
    if x.dtype.name != dt:
        x = x.astype(dt)
    lay = _Layout(x, axis_n)
    x3 = lay.to3(x)
    y3 = _empty_np(x3.shape, dt)
    _filtfilt3(f, x3, y3, edge, padtype, nthreads)
    return lay.from3(y3)


def uses_float32_arithmetic(sos: ArrayLike) -> bool:
    """Whether float32 (and complex64) signals filtered with ``sos`` are computed in float32 arithmetic.

    True when every pole lies within radius 0.9 of the origin; otherwise float32
    signals are filtered in float64 arithmetic (still float32 in and out), because
    float32 roundoff near the unit circle would reach 1e-4..1e-2 of the output.

    >>> import numpy as np, tensorffi.signal as tsig
    >>> tsig.uses_float32_arithmetic(np.array([[1, 0, 0, 1, -0.5, 0.1]]))
    True
    """
    f = _sos_facts(sos, "uses_float32_arithmetic")
    return bool((_f32_arith_cc if f.cplx else _f32_arith_c)(f.c))


def simd_lanes(dtype: Any = np.float32) -> int:
    """Channels the kernels filter at once for ``dtype`` at the current SIMD level."""
    return int(_lanes_c(np.dtype(dtype).itemsize))


def simd_level() -> str:
    """The SIMD level signal's kernels run at: ``"avx512"``, ``"avx2"`` or ``"scalar"``.

    ``TENSORFFI_SIMD=scalar|avx2|avx512`` selects a level (capped by the CPU);
    unset, the best level of this CPU for these kernels.

    >>> import tensorffi.signal as tsig
    >>> tsig.simd_level() in ("scalar", "avx2", "avx512")
    True
    """
    return ("scalar", "avx2", "avx512")[int(_simd_c())]


# --------------------------------------------------------------------------- #
# PyTorch operators: torch.ops.tensorffi.sosfilt / sosfilt_backward / sosfiltfilt #
# --------------------------------------------------------------------------- #
#
# The public functions route torch tensors through these operators (after SciPy's
# argument handling and dtype promotion), so that torch.compile(fullgraph=True) of
# user code calling tensorffi.signal.sosfilt traces one operator node, and autograd
# is the operator's. The operators take float32/float64/complex64/complex128 ``x``
# (``zi`` of x's dtype) and floating or complex ``sos`` of any precision (used as
# float64/complex128; its gradient has its dtype). Shape rules read shapes, strides
# and dtypes only; the check ``sos[:, 3] == 1`` and sosfiltfilt's default ``padlen``
# (which depends on sos's zeros) read values, so they happen when the operator
# runs, never while tracing.

_SOSFILT_SCHEMA = "tensorffi::sosfilt(Tensor sos, Tensor x, int axis=-1, Tensor? zi=None, int? threads=None) -> (Tensor, Tensor)"
_SOSFILT_BACKWARD_SCHEMA = (
    "tensorffi::sosfilt_backward(Tensor sos, Tensor x, int axis, Tensor? zi, Tensor gy, Tensor gzf, "
    "int? threads=None) -> (Tensor, Tensor, Tensor)"
)
_SOSFILTFILT_SCHEMA = (
    "tensorffi::sosfiltfilt(Tensor sos, Tensor x, int axis=-1, str? padtype=\"odd\", int? padlen=None, "
    "int? threads=None) -> Tensor"
)
_OP_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)


def _op_check(fn: str, sos: torch.Tensor, x: torch.Tensor, axis: int, zi: torch.Tensor | None = None) -> tuple[int, int]:
    """Dtype and shape checks of an operator call (no data read): (axis, n_sections)."""
    if x.dtype not in _OP_DTYPES:
        raise DTypeError(f"{fn}(): argument 'x' must have dtype float32, float64, complex64 or complex128, got {x.dtype}")
    if not (sos.is_floating_point() or sos.is_complex()):
        raise DTypeError(f"{fn}(): argument 'sos' must have a floating or complex dtype, got {sos.dtype}")
    if sos.is_complex() and not x.is_complex():
        raise DTypeError(f"{fn}(): argument 'x' must be complex when 'sos' is ({sos.dtype}), got {x.dtype}")
    if sos.dim() != 2 or sos.shape[1] != 6:
        raise ShapeError(f"{fn}(): argument 'sos' must have shape (n_sections, 6), got {tuple(sos.shape)}")
    if x.dim() == 0:
        raise ShapeError(f"{fn}(): argument 'x' must be at least 1-D")
    axis_n = _normalize_axis(axis, x.dim())
    n_sections = sos.shape[0]
    if zi is not None:
        if zi.dtype != x.dtype:
            raise DTypeError(f"{fn}(): argument 'zi' must have x's dtype {x.dtype}, got {zi.dtype}")
        want = _zi_shape(x.shape, axis_n, n_sections)
        if tuple(zi.shape) != want:
            raise _zi_shape_error(fn, axis, x.shape, n_sections, want, zi.shape)
    return axis_n, n_sections


_SOS64: "OrderedDict[Any, torch.Tensor]" = OrderedDict()
_contents = _lower.contents()


def _sos64(sos: torch.Tensor) -> torch.Tensor:
    """A real ``sos`` tensor as float64 for the kernels: itself if it is float64 (the
    bridge copies a strided one, its shape being declared), else a float64 copy cached
    under its content (so a change of the caller's tensor is never missed)."""
    if sos.dtype is torch.float64:
        return sos
    key = _contents(sos)
    if key is None:  # a view C cannot read as it is (strided, lazy negation): convert it
        return sos.detach().resolve_neg().to(torch.float64).contiguous()
    c = _SOS64.get(key)
    if c is None:
        c = _SOS64[key] = sos.detach().to(torch.float64).contiguous()
        if len(_SOS64) > _SOS_CACHE_SIZE:
            _SOS64.popitem(last=False)
    return c


def _empty_like_layout(x: torch.Tensor, shape: Sequence[Any], order: Sequence[int]) -> torch.Tensor:
    """An empty tensor of ``shape`` whose memory order is ``order`` (slowest first)."""
    return x.new_empty([shape[d] for d in order]).permute(_inverse(order))


_REAL_TORCH = {torch.float32: "float32", torch.float64: "float64"}


def _op_sosfilt(
    sos: torch.Tensor, x: torch.Tensor, axis: int = -1, zi: torch.Tensor | None = None, threads: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    nd = x.dim()
    name = _REAL_TORCH.get(x.dtype)
    if (name is not None and nd == 2 and (axis == -1 or axis == 1) and sos.dtype in _SOS_FAST and x.is_contiguous()
            and (x.numel() < _FAST_SAMPLES or x.numel() * sos.shape[0] < _WATCH_WORK)):
        # the commonest case, in one bridge call that allocates y and zf (C-contiguous,
        # like x); anything it refuses (a0 != 1, zi's shape or dtype...) is explained by
        # the general path below
        try:
            return _forward2_out_c[name](_sos64(sos), x, get_num_threads() if threads is None else
                                         resolve_threads(threads), zi=zi)
        except TensorFFIError:
            pass
    if name is not None and nd > 0 and (axis == -1 or axis == nd - 1) and x.is_contiguous() and not x.is_neg():
        # the common case: a contiguous real signal filtered along its last axis
        if sos.dtype in _SOS_FAST and sos.dim() == 2 and sos.shape[1] == 6 and not sos.is_neg():
            c, S = sos.to(torch.float64).contiguous(), sos.shape[0]  # C checks a0
        else:
            f = _sos_facts(sos, "sosfilt")
            c, S = (None, 0) if f.cplx else (f.ct(), f.S)
        shape = x.shape
        zshape = (S,) + tuple(shape[:-1]) + (2,)
        if c is not None and (zi is None or (zi.dtype is x.dtype and zi.is_contiguous() and not zi.is_neg()
                                             and zi.shape == zshape)):
            n = shape[-1]
            small = x.numel() < 32768
            y = torch.empty_like(x) if small else _empty(tuple(shape), name, x)
            zf = x.new_empty(zshape) if small else _empty(zshape, name, x)
            nthreads = get_num_threads() if threads is None else resolve_threads(threads)
            try:
                if nd == 2:
                    _forward2_watched(name, c, x, nthreads, zi, y, zf)
                else:
                    outer = math.prod(shape[:-1])
                    _forward2_watched(name, c, x.view(outer, n), nthreads, None if zi is None else zi.view(S, outer, 2),
                                      y.view(outer, n), zf.view(S, outer, 2))
            except InvalidArgumentError:
                _sos_facts(sos, "sosfilt")  # a0: raises SciPy's message, with the function and the value
                raise
            return y, zf
    f = _sos_facts(sos, "sosfilt")  # sos's shape, then a0 (SciPy's order: before zi's shape)
    axis_n, S = _op_check("sosfilt", sos, x, axis, zi)
    nthreads = get_num_threads() if threads is None else resolve_threads(threads)
    dt = _dtype_name(x)
    lay = _Layout(x, axis_n)
    x3 = lay.to3(x)
    y3 = _empty(tuple(x3.shape), dt, x)
    zf3 = _empty((S, lay.outer, 2, lay.inner), dt, x)
    _forward3(f, x3, None if zi is None else lay.zi_to3(zi, S), y3, zf3, nthreads)
    return lay.from3(y3), lay.zf_from3(zf3, S)


def _fake_sosfilt(
    sos: torch.Tensor, x: torch.Tensor, axis: int = -1, zi: torch.Tensor | None = None, threads: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    axis_n, n_sections = _op_check("sosfilt", sos, x, axis, zi)
    order = _memory_order(x)
    zshape = _zi_shape(x.shape, axis_n, n_sections)
    return _empty_like_layout(x, x.shape, order), _empty_like_layout(x, zshape, [0] + [d + 1 for d in order])


def _complex_sos_grad_error(fn: str) -> DTypeError:
    return DTypeError(
        f"{fn}(): autograd through complex filter coefficients is not supported (complex x and zi with real "
        f"sos are); compute under torch.no_grad(), or keep sos real"
    )


def _op_sosfilt_backward(
    sos: torch.Tensor, x: torch.Tensor, axis: int, zi: torch.Tensor | None, gy: torch.Tensor, gzf: torch.Tensor,
    threads: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    axis_n, S = _op_check("sosfilt_backward", sos, x, axis, zi)
    _op_check("sosfilt_backward", sos, gy, axis_n, gzf)
    if gy.shape != x.shape:
        raise ShapeError(f"sosfilt_backward(): argument 'gy' must have x's shape {tuple(x.shape)}, got {tuple(gy.shape)}")
    f = _sos_facts(sos, "sosfilt_backward")
    if f.cplx:
        raise _complex_sos_grad_error("sosfilt_backward")
    nthreads = get_num_threads() if threads is None else resolve_threads(threads)
    lay = _Layout(x, axis_n)
    zi3 = lay.zi_to3(zi, S) if zi is not None else None
    gsos, gx3, gzi3 = _backward3(f, lay.to3(x), zi3, lay.to3(gy.to(x.dtype)), lay.zi_to3(gzf.to(x.dtype), S), nthreads)
    return torch.from_numpy(gsos).to(sos.dtype), lay.from3(gx3), lay.zf_from3(gzi3, S)


def _fake_sosfilt_backward(
    sos: torch.Tensor, x: torch.Tensor, axis: int, zi: torch.Tensor | None, gy: torch.Tensor, gzf: torch.Tensor,
    threads: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    axis_n, n_sections = _op_check("sosfilt_backward", sos, x, axis, zi)
    _op_check("sosfilt_backward", sos, gy, axis_n, gzf)
    torch._check(gy.shape == x.shape, lambda: "sosfilt_backward(): argument 'gy' must have x's shape")
    order = _memory_order(x)
    zshape = _zi_shape(x.shape, axis_n, n_sections)
    return (
        sos.new_empty(sos.shape),
        _empty_like_layout(x, x.shape, order),
        _empty_like_layout(x, zshape, [0] + [d + 1 for d in order]),
    )


def _sosfilt_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    sos, x, axis, zi, threads = inputs
    ctx.save_for_backward(sos, x, zi)
    ctx.axis, ctx.threads = axis, threads


def _sosfilt_grad(ctx: Any, gy: torch.Tensor | None, gzf: torch.Tensor | None) -> tuple[Any, ...]:
    sos, x, zi = ctx.saved_tensors
    need = ctx.needs_input_grad
    if sos.is_complex() and need[0]:
        raise _complex_sos_grad_error("sosfilt")
    if gy is None:
        gy = torch.zeros_like(x)
    if gzf is None:
        gzf = x.new_zeros(_zi_shape(x.shape, ctx.axis % x.dim(), sos.shape[0]))
    gsos, gx, gzi = torch.ops.tensorffi.sosfilt_backward.default(sos, x, ctx.axis, zi, gy, gzf, ctx.threads)
    return (
        gsos if need[0] else None,
        gx if need[1] else None,
        None,
        gzi if (zi is not None and need[3]) else None,
        None,
    )


def _op_sosfiltfilt(
    sos: torch.Tensor, x: torch.Tensor, axis: int = -1, padtype: str | None = "odd", padlen: int | None = None,
    threads: int | None = None,
) -> torch.Tensor:
    axis_n, _ = _op_check("sosfiltfilt", sos, x, axis)
    f = _sos_facts(sos, "sosfiltfilt")
    edge = _edge("sosfiltfilt", f.ntaps, int(x.shape[axis_n]), padtype, padlen)
    nthreads = get_num_threads() if threads is None else resolve_threads(threads)
    lay = _Layout(x, axis_n)
    x3 = lay.to3(x)
    y3 = _empty(tuple(x3.shape), _dtype_name(x), x)
    _filtfilt3(f, x3, y3, edge, padtype, nthreads)
    return lay.from3(y3)


def _fake_sosfiltfilt(
    sos: torch.Tensor, x: torch.Tensor, axis: int = -1, padtype: str | None = "odd", padlen: int | None = None,
    threads: int | None = None,
) -> torch.Tensor:
    _op_check("sosfiltfilt", sos, x, axis)
    if padtype not in PADTYPES:
        raise InvalidArgumentError("sosfiltfilt(): " + _PADTYPE_MESSAGE.format(padtype), -1, "sosfiltfilt")
    return _empty_like_layout(x, x.shape, _memory_order(x))


def _ntaps_torch(sos: torch.Tensor) -> int:
    return 2 * sos.shape[0] + 1 - min(int((sos[:, 2] == 0).sum()), int((sos[:, 5] == 0).sum()))


def _differentiable_sosfiltfilt(
    sos: torch.Tensor, x: torch.Tensor, axis: int = -1, padtype: str | None = "odd", padlen: int | None = None,
    threads: int | None = None,
) -> torch.Tensor:
    """sosfiltfilt when autograd records: padding and steady state in torch, two
    sosfilt operator calls. Under torch.compile with gradients, the default padlen
    (which depends on sos's values) needs concrete sos: pass ``padlen`` there."""
    axis_n, _ = _op_check("sosfiltfilt", sos, x, axis)
    concrete = type(sos) is torch.Tensor or type(sos) is torch.nn.Parameter
    if concrete:
        _sos_facts(sos, "sosfiltfilt")  # a0
    ntaps = 0 if (padtype is None or padlen is not None) else _ntaps_torch(sos)
    edge = _edge("sosfiltfilt", ntaps, int(x.shape[axis_n]), padtype, padlen)
    lay = _Layout(x, axis_n)
    x3 = lay.to3(x)
    sos_w = sos.to(torch.complex128 if sos.is_complex() else torch.float64)
    sosfilt_op = torch.ops.tensorffi.sosfilt.default
    n_sections = sos_w.shape[0]
    ext = _pad_torch(x3, edge, padtype)
    zi = _steady_state_torch(sos_w).to(x3.dtype).reshape(n_sections, 1, 2, 1)
    y, _ = sosfilt_op(sos_w, ext, 1, zi * ext[:, :1].unsqueeze(0), threads)
    y, _ = sosfilt_op(sos_w, y.flip(1), 1, zi * y[:, -1:].unsqueeze(0), threads)
    y = y.flip(1)
    y = y[:, edge : edge + x3.shape[1]] if edge > 0 else y
    return lay.from3(y)


def _register_ops() -> None:
    from . import ops

    backward_op = ops.define(_SOSFILT_BACKWARD_SCHEMA, _op_sosfilt_backward, fake=_fake_sosfilt_backward)
    ops.define(
        _SOSFILT_SCHEMA, _op_sosfilt, fake=_fake_sosfilt, backward=_sosfilt_grad, setup_context=_sosfilt_setup,
        _backward_op=backward_op,
    )
    ops.define(_SOSFILTFILT_SCHEMA, _op_sosfiltfilt, fake=_fake_sosfiltfilt, differentiable=_differentiable_sosfiltfilt)


_register_ops()
_sosfilt_op = torch.ops.tensorffi.sosfilt.default
_sosfiltfilt_op = torch.ops.tensorffi.sosfiltfilt.default

# --------------------------------------------------------------------------- #
# The public functions' torch path                                             #
# --------------------------------------------------------------------------- #


def _torch_compute_dtype(fn: str, promoted: torch.dtype, dtype: Any) -> torch.dtype:
    """The dtype a torch call computes and returns in (``dtype`` overrides)."""
    if promoted in _OP_DTYPES:
        name = _NAMES[promoted]
    elif promoted.is_floating_point:
        name = "float32"  # float16, bfloat16
    elif promoted.is_complex:
        raise DTypeError(f"{fn}(): {promoted} is not supported (complex64 and complex128 are)")
    else:
        name = "float64"  # integers, bool
    if dtype is not None:
        name = _user_dtype(fn, dtype, name)
    return _NUMPY_TO_TORCH[name]


def _as_tensor(a: Any) -> torch.Tensor:
    """A torch tensor as is; anything else through NumPy (so a list of floats is float64, as in SciPy)."""
    if isinstance(a, _Tensor):
        return a
    arr = np.asarray(a)
    if arr.dtype.kind not in "biufc":
        raise DTypeError(f"expected numbers, got an array of {arr.dtype}")
    return torch.from_numpy(arr)


def _torch_sos(sos: Any, fn: str) -> torch.Tensor:
    """sos as a 2-D (n_sections, 6) tensor, shape-checked (values are checked by the operator)."""
    t = _as_tensor(sos)
    if t.device.type != "cpu":
        raise DeviceError(f"{fn}(): argument 'sos' must be a CPU tensor, got device {t.device}")
    if t.dim() < 2:
        t = t.reshape(1, -1)
    if t.dim() != 2:
        raise ShapeError(f"{fn}(): sos array must be 2D, got shape {tuple(t.shape)}")
    if t.shape[1] != 6:
        raise ShapeError(f"{fn}(): sos array must be shape (n_sections, 6), got {tuple(t.shape)}")
    return t


def _check_x(fn: str, x: torch.Tensor) -> None:
    """The public functions compute, so they refuse tensors C cannot read (CUDA,
    meta); the operators themselves run their shape rule on meta tensors."""
    if x.device.type != "cpu":
        raise DeviceError(f"{fn}(): argument 'x' must be a CPU tensor, got device {x.device}")
    if x.dim() == 0:
        raise ShapeError(f"{fn}(): x must be at least 1-D")


def _refuse_complex_sos_grad(fn: str, sos: torch.Tensor, *tensors: Any) -> None:
    if sos.is_complex() and torch.is_grad_enabled() and not torch.compiler.is_compiling():
        if sos.requires_grad or (any(t is not None and t.requires_grad for t in tensors)
                                 and _sos_facts(sos, fn, check_a0=False).cplx):
            raise _complex_sos_grad_error(fn)


_SOS_OK = (torch.float32, torch.float64, torch.complex64, torch.complex128)
def _sosfilt_torch(sos: Any, x: torch.Tensor, axis: Any, zi: Any, dtype: Any, threads: int | None) -> Any:
    fn = "sosfilt"
    if not x.is_cpu:
        raise DeviceError(f"{fn}(): argument 'x' must be a CPU tensor, got device {x.device}")
    if not isinstance(sos, _Tensor):
        sos = _as_tensor(sos)
    elif not sos.is_cpu:
        raise DeviceError(f"{fn}(): argument 'sos' must be a CPU tensor, got device {sos.device}")
    if sos.dim() < 2:
        sos = sos.reshape(1, -1)  # SciPy's atleast_2d
    promoted = torch.promote_types(sos.dtype, x.dtype)
    if zi is not None:
        if not isinstance(zi, _Tensor):
            zi = _as_tensor(zi)
        elif not zi.is_cpu:
            raise DeviceError(f"{fn}(): argument 'zi' must be a CPU tensor, got device {zi.device}")
        promoted = torch.promote_types(promoted, zi.dtype)
    dt = promoted if dtype is None and promoted in _OP_DTYPES else _torch_compute_dtype(fn, promoted, dtype)
    if x.dtype is not dt:
        x = x.to(dt)
    if zi is not None and zi.dtype is not dt:
        zi = zi.to(dt)
    if sos.dtype not in _SOS_OK:
        sos = sos.to(torch.float64)  # integers, bool, half precision
    elif sos.dtype.is_complex:
        _refuse_complex_sos_grad(fn, sos, x, zi)
    if threads is not None:
        resolve_threads(threads)
    if eager_plain(sos, x, zi):
        y, zf = _op_sosfilt(sos, x, axis, zi, threads)  # what the operator would run (see eager_plain)
    else:
        y, zf = _sosfilt_op(sos, x, axis, zi, threads)
    return y if zi is None else (y, zf)


def _sosfiltfilt_torch(
    sos: Any, x: torch.Tensor, axis: Any, padtype: str | None, padlen: int | None, dtype: Any, threads: int | None
) -> Any:
    fn = "sosfiltfilt"
    _check_x(fn, x)
    if threads is not None:
        resolve_threads(threads)
    sos = _torch_sos(sos, fn)
    axis_n = _normalize_axis(axis, x.dim())
    if padtype not in PADTYPES:
        raise InvalidArgumentError(f"{fn}(): " + _PADTYPE_MESSAGE.format(padtype), -1, fn)
    dt = _torch_compute_dtype(fn, torch.promote_types(sos.dtype, x.dtype), dtype)
    if x.dtype is not dt:
        x = x.to(dt)
    if not (sos.is_floating_point() or sos.is_complex()) or sos.element_size() < 4:
        sos = sos.to(torch.float64)
    _refuse_complex_sos_grad(fn, sos, x)
    return _sosfiltfilt_op(sos, x, axis_n, padtype, None if padlen is None else int(padlen), threads)


# --------------------------------------------------------------------------- #
# A trainable filter                                                           #
# --------------------------------------------------------------------------- #


class SOSFilter(torch.nn.Module):
    """A trainable IIR filter: cascaded second-order sections with ``a0`` fixed at 1.

    The free coefficients are parameters: ``b`` (``(n_sections, 3)``, the numerators)
    and either ``a`` (``(n_sections, 2)``: ``a1, a2``) or, with ``stable=True``,
    ``u`` (``(n_sections, 2)``, unconstrained), mapped to each section's reflection
    coefficients ``k = max_reflection * tanh(u)``, then ``a2 = k2``, ``a1 = k1 (1 + k2)``.
    Reflection coefficients in (-1, 1) are exactly the stable sections, so with
    ``stable=True`` every pole stays strictly inside the unit circle whatever the
    optimiser does. :attr:`sos` assembles the ``(n_sections, 6)`` coefficients
    (differentiable); the filtering is :func:`sosfilt` (its C adjoint is the backward).

    ``sos`` (array or tensor) sets the initial coefficients (each section divided by
    its a0); otherwise the filter starts as the identity, with ``n_sections``
    sections. Parameters have ``dtype`` (default: torch's default dtype); the
    output follows :func:`sosfilt`'s type promotion (float32 data with float32
    parameters is filtered in float32).

    Streaming: ``filt(x, zi=zi)`` returns ``(y, zf)`` as :func:`sosfilt` does;
    :meth:`stream` keeps the final states itself (detached: gradients do not flow
    across calls) and starts the next call from them; :meth:`reset_state` forgets them.

    >>> import torch, tensorffi.signal as tsig
    >>> filt = tsig.SOSFilter(n_sections=2, stable=True)
    >>> y = filt(torch.randn(3, 100))
    >>> y.shape, filt.sos.shape
    (torch.Size([3, 100]), torch.Size([2, 6]))
    """

    def __init__(
        self,
        sos: ArrayLike | None = None,
        *,
        n_sections: int | None = None,
        stable: bool = False,
        max_reflection: float = 0.9999,
        axis: int = -1,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        dtype = dtype or torch.get_default_dtype()
        if not (0.0 < float(max_reflection) < 1.0):
            raise InvalidArgumentError(
                f"SOSFilter(): max_reflection must lie in (0, 1), got {max_reflection!r}", -1, "SOSFilter")
        if sos is None:
            if n_sections is None or isinstance(n_sections, bool) or int(n_sections) < 1:
                raise InvalidArgumentError(
                    f"SOSFilter(): pass sos, or n_sections >= 1 (got {n_sections!r})", -1, "SOSFilter")
            arr = np.zeros((int(n_sections), 6))
            arr[:, 0] = arr[:, 3] = 1.0
        else:
            arr = _sos_array(sos, "SOSFilter").astype(np.float64)
            if n_sections is not None and int(n_sections) != arr.shape[0]:
                raise ShapeError(f"SOSFilter(): sos has {arr.shape[0]} sections, n_sections={n_sections}")
            if np.any(arr[:, 3] == 0) or not np.all(np.isfinite(arr)):
                raise InvalidArgumentError("SOSFilter(): sos must be finite, with a non-zero a0 in every section",
                                           -1, "SOSFilter")
            arr = arr / arr[:, 3:4]
        self.stable = bool(stable)
        self.max_reflection = float(max_reflection)
        self.axis = axis
        self.b = torch.nn.Parameter(torch.tensor(arr[:, :3], dtype=dtype))
        if self.stable:
            a1, a2 = arr[:, 4], arr[:, 5]
            with np.errstate(divide="ignore", invalid="ignore"):
                k = np.stack([a1 / (1.0 + a2), a2], 1) / self.max_reflection
            if not np.all(np.abs(k) < 1):
                bad = int(np.flatnonzero(~np.all(np.abs(k) < 1, axis=1))[0])
                raise InvalidArgumentError(
                    f"SOSFilter(): section {bad} of sos (a1={a1[bad]!r}, a2={a2[bad]!r}) is not stable within "
                    f"max_reflection={self.max_reflection}; stable=True needs |a2| < max_reflection and "
                    f"|a1| < max_reflection * (1 + a2)", -1, "SOSFilter")
            self.u = torch.nn.Parameter(torch.tensor(np.arctanh(k), dtype=dtype))
        else:
            self.a = torch.nn.Parameter(torch.tensor(arr[:, 4:], dtype=dtype))
        self.register_buffer("state", None, persistent=False)

    @property
    def n_sections(self) -> int:
        return int(self.b.shape[0])

    def denominators(self) -> torch.Tensor:
        """``(n_sections, 2)``: ``a1, a2`` of every section (differentiable)."""
        if not self.stable:
            return self.a
        k = self.max_reflection * torch.tanh(self.u)
        k1, k2 = k[:, 0], k[:, 1]
        return torch.stack([k1 * (1 + k2), k2], 1)

    @property
    def sos(self) -> torch.Tensor:
        """The ``(n_sections, 6)`` coefficients ``(b0, b1, b2, 1, a1, a2)``, differentiable."""
        ones = torch.ones_like(self.b[:, :1])
        return torch.cat([self.b, ones, self.denominators()], 1)

    def poles(self) -> torch.Tensor:
        """The ``(n_sections, 2)`` complex poles (roots of ``z^2 + a1 z + a2``), detached."""
        a = self.denominators().detach().to(torch.float64)
        a1, a2 = a[:, 0].to(torch.complex128), a[:, 1].to(torch.complex128)
        q = torch.sqrt(a1 * a1 - 4 * a2)
        return torch.stack([(-a1 + q) / 2, (-a1 - q) / 2], 1)

    def forward(self, x: ArrayLike, zi: ArrayLike | None = None) -> Any:
        """``sosfilt(self.sos, x, axis=self.axis, zi=zi)``: ``y``, or ``(y, zf)`` with ``zi``."""
        return sosfilt(self.sos, x, axis=self.axis, zi=zi)

    def stream(self, x: ArrayLike) -> Any:
        """Filter the next chunk of a stream: starts from the states the previous call
        left (zeros at first), keeps the final states (detached) for the next call."""
        x = _as_tensor(x)
        axis_n = _normalize_axis(self.axis, x.dim())
        want = _zi_shape(x.shape, axis_n, self.n_sections)
        zi = self.state
        if zi is None:
            zi = torch.zeros(want, dtype=torch.promote_types(x.dtype, self.b.dtype))
        elif tuple(zi.shape) != tuple(want):
            raise ShapeError(
                f"SOSFilter.stream(): this chunk needs states of shape {tuple(want)}, the stream so far has "
                f"{tuple(zi.shape)}; call reset_state() to start a new stream")
        y, zf = sosfilt(self.sos, x, axis=self.axis, zi=zi)
        self.state = zf.detach()
        return y

    def reset_state(self) -> None:
        """Forget the states kept by :meth:`stream`."""
        self.state = None

    def extra_repr(self) -> str:
        return f"n_sections={self.n_sections}, stable={self.stable}, axis={self.axis}"


# --------------------------------------------------------------------------- #
# Demo                                                                         #
# --------------------------------------------------------------------------- #


def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: tab completion does not offer imports (np, torch, ...)
