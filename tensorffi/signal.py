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
import sys
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

import numpy as np

from . import _torch as _tt
from ._bridge import lower as _lower
from ._callbacks import CallbackScope
from ._kernels import eager_plain
from ._lib import native
from ._threads import get_num_threads, resolve_threads
from ._torch import T
from .errors import DeviceError, DTypeError, InvalidArgumentError, ShapeError, TensorFFIError
from ._kernels import constants
from ._lib import lib
from .errors import NativeError

if TYPE_CHECKING:
    import torch

__all__ = ["sosfilt", "sosfilt_zi", "sosfiltfilt", "SOSFilter", "uses_float32_arithmetic", "simd_level"]

# --------------------------------------------------------------------------- #
# Native functions: one binding per C function                                 #
# --------------------------------------------------------------------------- #

# Signals cross into C as 2-D arrays [outer, n * inner] (any axis of a C-contiguous
# N-d array is the middle one of [outer, n, inner]; the last axis has inner = 1), so
# the common case, a C-contiguous signal filtered along its last axis, is passed as
# it is, and every other case is one reshape of the same call. Complex signals cross
# as reals with the last axis doubled (real and imaginary parts interleaved): ``inner``
# counts reals. Complex coefficients are [n_sections, 12]: the six coefficients of a
# section as (re, im) pairs. Outputs are allocated by the bridge, in the caller's kind,
# unless the caller passes one (large NumPy outputs: see _empty_np).
_FORWARD = (
    "sos: [n_sections, {w}]; x: [outer, n*inner]; y: out [outer, n*inner]; "
    "zi: in? [n_sections, outer, 2*inner]; zf: out [n_sections, outer, 2*inner]"
)
_BACKWARD = (
    "sos: [n_sections, 6]; x: [outer, n*inner]; zi: in? [n_sections, outer, 2*inner]; gy: [outer, n*inner]; "
    "gzf: in? [n_sections, outer, 2*inner]; gsos: out [n_sections, 6]; gx: out [outer, n*inner]; "
    "gzi: out [n_sections, outer, 2*inner]"
)
_FILTFILT = "sos: [n_sections, {w}]; zi: [n_sections, {z}]; x: [outer, n*inner]; y: out [outer, n*inner]"

#: dtype -> suffix of the C functions computing in it
_SUFFIX = {"float32": "f32", "float64": "f64", "complex64": "c64", "complex128": "c128"}
#: complex dtype -> the real dtype of its parts
_PART = {"complex64": "float32", "complex128": "float64"}


def _bind(verb: str, contract: str, complex_contract: str | None = None) -> dict[bool, dict[str, Callable[..., Any]]]:
    """``tf_signal_<verb>_<suffix>`` (False) and its progress-callback variant
    ``tf_signal_<verb>_cb_<suffix>`` (True, for long calls: see _WATCH_WORK), by dtype."""
    dtypes = [d for d in _SUFFIX if complex_contract is not None or d not in _PART]
    return {
        watched: {d: native(f"tf_signal_{verb}{'_cb' if watched else ''}_{_SUFFIX[d]}",
                            complex_contract if d in _PART else contract) for d in dtypes}
        for watched in (False, True)
    }


_SOSFILT_C = _bind("sosfilt", _FORWARD.format(w=6), _FORWARD.format(w=12))
_SOSFILT = _SOSFILT_C[False]
_BACKWARD_C = _bind("sosfilt_backward", _BACKWARD)
_FILTFILT_C = _bind("sosfiltfilt", _FILTFILT.format(w=6, z=2), _FILTFILT.format(w=12, z=4))
#: Work (channels x samples x sections, per pass) from which a call is made with the
#: progress callback: ~5 ms of filtering on one thread. Smaller calls keep the native
#: call path (a callback scope and the bridge's Python path cost ~10-20 us) and cannot
#: be interrupted, as any C call; larger ones stop within ~20 ms of Ctrl-C.
_WATCH_WORK = 1 << 23
#: Signals this small are filtered without the progress callback without reading
#: sos's shape (0.3 us of a 14 us torch call): only a cascade of more than 256
#: sections on them would be a long call Ctrl-C cannot stop.
_FAST_SAMPLES = _WATCH_WORK >> 8
_f32_arith_c = native("tf_signal_f32_arith", "sos: [n_sections, 6]; return: value")
_f32_arith_cc = native("tf_signal_f32_arith_complex", "sos: [n_sections, 12]; return: value")
_lanes_c = native("tf_signal_lanes", "return: value")
_simd_c = native("tf_signal_simd", "return: value")

#: padtype -> TF_SIGNAL_PAD_* (read from the native module)
PADTYPES: dict[str | None, int] = {(None if k == "none" else k): v for k, v in constants("TF_SIGNAL_PAD_").items()}
_PADTYPE_MESSAGE = "Unknown value '{}' given to padtype. padtype must be 'even', 'odd', 'constant', or None."
#: the status of an invalid argument (TF_EINVAL), for the errors raised here
_EINVAL = int(lib.TF_EINVAL)

ArrayLike = Any  # np.ndarray | torch.Tensor | nested sequences
_ndarray = np.ndarray

# --------------------------------------------------------------------------- #
# dtypes: one promotion rule                                                   #
# --------------------------------------------------------------------------- #

_COMPUTE = ("float32", "float64", "complex64", "complex128")
#: dtype (NumPy or torch) -> its name, for the four dtypes the kernels compute in
#: (torch's are added when torch is imported: _add_torch_dtypes)
_NAMES: dict[Any, str] = {np.dtype(n): n for n in _COMPUTE}
#: the real ones (NumPy or torch): what a sos is read as without a conversion
_REAL = {dt: n for dt, n in _NAMES.items() if n not in _PART}
#: torch's compute dtypes (filled when torch is imported)
_TORCH_COMPUTE: tuple[Any, ...] = ()
#: the same as NumPy dtypes
_NP_DTYPES = {n: np.dtype(n) for n in _COMPUTE}


def _add_torch_dtypes(torch: Any) -> None:
    """torch's entries of the dtype tables (tensorffi._torch.when_imported: before any tensor exists)."""
    global _TORCH_COMPUTE
    tdt = {n: getattr(torch, n) for n in _COMPUTE}
    _NAMES.update({t: n for n, t in tdt.items()})
    _REAL.update({t: n for n, t in tdt.items() if n not in _PART})
    _TORCH_COMPUTE = tuple(tdt.values())


_tt.when_imported(_add_torch_dtypes)


def _promote(sos: Any, x: Any, zi: Any) -> Any:
    """The promoted dtype of the arguments (all of x's kind): NumPy's result_type for
    NumPy callers, torch.promote_types for torch callers (module docstring)."""
    if isinstance(x, T.Tensor):
        dt = T.promote_types(sos.dtype, x.dtype)
        return dt if zi is None else T.promote_types(dt, zi.dtype)
    xdt = x.dtype
    if zi is None:
        return xdt if xdt == sos.dtype else np.result_type(sos.dtype, xdt)
    return xdt if (xdt == sos.dtype and zi.dtype == xdt) else np.result_type(sos.dtype, xdt, zi.dtype)


def _compute_dtype(fn: str, promoted: Any, dtype: Any = None) -> str:
    """The dtype (one of _COMPUTE) a call computes and returns in, given the promoted
    dtype of its inputs (NumPy or torch) and the ``dtype=`` argument (module docstring)."""
    name = _NAMES.get(promoted)
    if name is None:
        if isinstance(promoted, T.dtype):
            kind = "c" if promoted.is_complex else "f" if promoted.is_floating_point else "i"
            size = promoted.itemsize
        else:
            kind, size, name = promoted.kind, promoted.itemsize, promoted.name  # e.g. byte-swapped float64
        if name in _COMPUTE:
            pass
        elif kind in "biu":
            name = "float64"
        elif kind == "f" and size < 4:
            name = "float32"
        elif kind in "fc":
            raise DTypeError(f"{fn}(): {promoted} is not supported (float32, float64, complex64 and complex128 "
                             f"are); pass dtype=numpy.float64 (or complex128) to compute in double precision")
        else:
            raise DTypeError(f"{fn}(): input type {promoted} is not supported")
    if dtype is not None:
        name = _user_dtype(fn, dtype, name)
    return name


def _user_dtype(fn: str, dtype: Any, promoted: str) -> str:
    """The ``dtype=`` argument as one of _COMPUTE, checked against the inputs."""
    if isinstance(dtype, T.dtype):
        want: str = str(dtype).removeprefix("torch.")
        if want not in _COMPUTE:
            raise DTypeError(f"{fn}(): dtype must be float32, float64, complex64 or complex128, got {dtype}")
    else:
        try:
            want = np.dtype(dtype).name
        except TypeError:
            raise DTypeError(f"{fn}(): dtype must be a NumPy or torch dtype, got {dtype!r}") from None
    if want not in _COMPUTE:
        raise DTypeError(f"{fn}(): dtype must be float32, float64, complex64 or complex128, got {want}")
    if promoted.startswith("complex") and not want.startswith("complex"):
        raise DTypeError(f"{fn}(): the inputs are complex ({promoted}); a real dtype={want} would drop their "
                         f"imaginary parts")
    return want


# --------------------------------------------------------------------------- #
# Arguments in the caller's kind; one sos validator                            #
# --------------------------------------------------------------------------- #


def _numeric(fn: str, name: str, a: Any) -> np.ndarray:
    """A non-tensor argument as a NumPy array of numbers (lists of floats are float64, as in SciPy)."""
    arr = a if type(a) is _ndarray else np.asarray(a)
    if arr.dtype.kind not in "biufc":
        raise DTypeError(f"{fn}(): {name} must be numeric, got {arr.dtype}")
    return arr


def _as_numpy(a: Any) -> np.ndarray:
    """A tensor's values as a NumPy array (no conjugate or negative bit; half precision as float32)."""
    t = a.detach()
    if t.dtype is T.bfloat16 or t.dtype is T.float16:
        t = t.float()
    return cast(np.ndarray, t.cpu().resolve_conj().resolve_neg().numpy())


def _in_kind(fn: str, name: str, a: Any, torch_kind: bool) -> Any:
    """Argument ``name`` (sos or zi) in the kind of the signal: a CPU tensor for torch
    callers, a NumPy array otherwise."""
    if isinstance(a, T.Tensor):
        if not a.is_cpu:
            raise DeviceError(f"{fn}(): argument '{name}' must be a CPU tensor, got device {a.device}")
        return a if torch_kind else _as_numpy(a)
    arr = _numeric(fn, name, a)
    return T.from_numpy(arr) if torch_kind else arr


def _check_sos(fn: str, sos: Any) -> None:
    """sos (a NumPy array or a tensor, real or complex) must be (n_sections, 6):
    SciPy's _validate_sos, less the a0 check (values: see _sos_facts and the kernels)."""
    if sos.ndim != 2:
        raise ShapeError(f"{fn}(): sos array must be 2D, got shape {tuple(sos.shape)}")
    if sos.shape[1] != 6:
        raise ShapeError(f"{fn}(): sos array must be shape (n_sections, 6), got {tuple(sos.shape)}")


def _sos_arg(fn: str, sos: Any, torch_kind: bool) -> Any:
    """The public functions' sos in the signal's kind, at least 2-D (SciPy's
    atleast_2d); its shape is checked (by _check_sos, or by the bridge on the fast
    path) where it is used."""
    if torch_kind:
        if type(sos) is not T.Tensor or not sos.is_cpu:
            sos = _in_kind(fn, "sos", sos, True)
        return sos if sos.dim() >= 2 else sos.reshape(1, -1)
    sos = _in_kind(fn, "sos", sos, False)
    return sos if sos.ndim >= 2 else sos.reshape(1, -1)


def _signal_arg(fn: str, x: Any) -> Any:
    """The signal: a CPU tensor, or anything else as a NumPy array; at least 1-D."""
    if isinstance(x, T.Tensor):
        if not x.is_cpu:
            raise DeviceError(f"{fn}(): argument 'x' must be a CPU tensor, got device {x.device}")
        if x.dim() == 0:
            raise ShapeError(f"{fn}(): x must be at least 1-D")
        return x
    if type(x) is not _ndarray:
        x = np.asarray(x)
    if x.ndim == 0:
        raise ShapeError(f"{fn}(): x must be at least 1-D")
    return x


def _threads(threads: int | None) -> int:
    return get_num_threads() if threads is None else resolve_threads(threads)


# --------------------------------------------------------------------------- #
# Facts about one sos, computed once per distinct content                      #
# --------------------------------------------------------------------------- #


class _Sos:
    """A validated sos and what the kernels need from it.

    ``c``: float64, C-contiguous: ``[S, 6]`` for real coefficients (also complex
    ones whose imaginary parts are all zero), ``[S, 12]`` (re, im pairs) for
    complex ones; ``dtype``: the dtype sos counts with in type promotion."""

    __slots__ = ("c", "S", "cplx", "dtype", "bad_a0", "ntaps", "_zi", "_arr", "_ct", "_zit")

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
        self._zit: torch.Tensor | None = None

    def coefficients(self, torch_kind: bool) -> Any:
        """``c`` in the signal's kind (a tensor shares its memory): the bridge allocates
        outputs in the kind of the first array."""
        if not torch_kind:
            return self.c
        if self._ct is None:
            self._ct = T.from_numpy(self.c)
        return self._ct

    def zi(self, torch_kind: bool) -> Any:
        """sosfilt_zi in the kernels' form: float64 [S, 2], or [S, 4] for complex."""
        if self._zi is None:
            zi = _steady_state(self._arr)
            self._zi = np.ascontiguousarray(zi, np.complex128).view(np.float64) if self.cplx else \
                np.ascontiguousarray(zi.real if zi.dtype.kind == "c" else zi, np.float64)
        if not torch_kind:
            return self._zi
        if self._zit is None:
            self._zit = T.from_numpy(self._zi)
        return self._zit


_SOS_CACHE: "OrderedDict[tuple[Any, ...], _Sos]" = OrderedDict()
_SOS_CACHE_SIZE = 64


def _sos_array(sos: Any, fn: str) -> np.ndarray:
    """sos as a checked 2-D NumPy array of shape (n_sections, 6)."""
    if type(sos) is _ndarray and sos.ndim == 2 and sos.shape[1] == 6 and sos.dtype.kind in "fc":
        return cast(np.ndarray, sos)
    arr: np.ndarray = _in_kind(fn, "sos", sos, False)
    if arr.ndim < 2:
        arr = arr.reshape(1, -1)
    _check_sos(fn, arr)
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
        _EINVAL,
        fn,
    )


#: content -> float64 copy, of float32 tensors and of float32 NumPy arrays (the bridge
#: allocates outputs in the kind of the first array: a tensor call passes tensors)
_SOS64: "OrderedDict[Any, torch.Tensor]" = OrderedDict()
_SOS64_NP: "OrderedDict[Any, np.ndarray]" = OrderedDict()
_contents = _lower.contents()


def _sos64(sos: Any) -> Any:
    """A real float32/float64 ``sos`` (array or tensor) as float64 for the kernels, in its
    kind: itself if it is float64 (the bridge copies a strided one, its shape being
    declared), else a float64 copy cached under its content (so a change of the
    caller's array is never missed); None for any other dtype."""
    name = _REAL.get(sos.dtype)
    if name == "float64":
        return sos
    if name is None:
        return None
    numpy_kind = type(sos) is _ndarray
    key = _contents(sos)
    if key is None:  # a view C cannot read as it is (strided, lazy negation): convert it
        return np.ascontiguousarray(sos, np.float64) if numpy_kind else \
            sos.detach().resolve_neg().to(T.float64).contiguous()
    c = (_SOS64_NP if numpy_kind else _SOS64).get(key)
    if c is None:
        cache: "OrderedDict[Any, Any]" = _SOS64_NP if numpy_kind else _SOS64
        c = cache[key] = np.ascontiguousarray(sos, np.float64) if numpy_kind else \
            sos.detach().to(T.float64).contiguous()
        if len(cache) > _SOS_CACHE_SIZE:
            cache.popitem(last=False)
    return c


# --------------------------------------------------------------------------- #
# Layouts: an N-d signal as [outer, n * inner]                                  #
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
    strides = x.stride() if isinstance(x, T.Tensor) else x.strides
    order = sorted(range(nd), key=lambda d: -strides[d])
    if order == list(range(nd)):
        return order
    if isinstance(x, T.Tensor):
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
    return a.permute(*order) if isinstance(a, T.Tensor) else a.transpose(order)


def _contiguous(a: Any) -> Any:
    if isinstance(a, T.Tensor):
        return a.resolve_conj().resolve_neg().contiguous()
    return np.ascontiguousarray(a)


class _Layout:
    """How an N-d signal and its states map onto the kernels' ``[outer, n * inner]``
    and ``[n_sections, outer, 2 * inner]`` arrays (``[outer, n, inner]`` in C)."""

    def __init__(self, x: Any, axis: int) -> None:
        self.order = _memory_order(x)
        self.pos = self.order.index(axis)
        self.shape = tuple(int(x.shape[d]) for d in self.order)  # permuted shape
        self.outer = math.prod(self.shape[: self.pos])
        self.n = self.shape[self.pos]
        self.inner = math.prod(self.shape[self.pos + 1 :])
        self.zorder = [0] + [d + 1 for d in self.order]

    def to2(self, x: Any) -> Any:
        return _contiguous(_permute(x, self.order)).reshape(self.outer, self.n * self.inner)

    def from2(self, y2: Any) -> Any:
        return _permute(y2.reshape(self.shape), _inverse(self.order))

    def zi_to2(self, zi: Any, n_sections: int) -> Any:
        if zi is None:
            return None
        return _contiguous(_permute(zi, self.zorder)).reshape(n_sections, self.outer, 2 * self.inner)

    def zf_from2(self, zf2: Any, n_sections: int) -> Any:
        zshape = (n_sections,) + self.shape[: self.pos] + (2,) + self.shape[self.pos + 1 :]
        return _permute(zf2.reshape(zshape), _inverse(self.zorder))


def _zi_shape(x_shape: Sequence[int], axis_n: int, n_sections: int) -> tuple[int, ...]:
    return (n_sections,) + tuple(2 if d == axis_n else int(s) for d, s in enumerate(x_shape))


def _check_zi(fn: str, axis: Any, x: Any, n_sections: int, zi: Any) -> None:
    """zi must have x's shape with x.shape[axis] replaced by 2, after n_sections (SciPy's message)."""
    want = _zi_shape(x.shape, _normalize_axis(axis, x.ndim), n_sections)
    if tuple(zi.shape) != want:
        raise ShapeError(
            f"{fn}(): Invalid zi shape. With axis={axis!r}, an input with shape {tuple(x.shape)!r}, "
            f"and an sos array with {n_sections} sections, argument 'zi' must have shape {want!r}, "
            f"got {tuple(zi.shape)!r}."
        )


# --------------------------------------------------------------------------- #
# The one implementation of each kernel (NumPy arrays or tensors, one kind)     #
# --------------------------------------------------------------------------- #


def _parts(a: Any) -> Any:
    """A complex ``[..., m]`` array as reals ``[..., 2 * m]`` (a view)."""
    if a is None:
        return None
    if isinstance(a, T.Tensor):
        return T.view_as_real(a).flatten(-2)
    return a.view(_PART[a.dtype.name])


_LARGE = 1 << 20  # bytes


def _empty_np(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """np.empty, 64-byte aligned when large: the kernels then write whole cache
    lines, around the caches (non-temporal stores; see signal.c). NumPy asks the
    kernel for huge pages for large arrays: filling a fresh 32 MB output takes a few
    page faults, not thousands (the bridge allocates torch outputs the same way)."""
    dt = np.dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize
    if nbytes < _LARGE:
        return np.empty(shape, dt)
    raw = np.empty(nbytes + 64, np.uint8)
    off = -raw.ctypes.data % 64
    return raw[off : off + nbytes].view(dt).reshape(shape)


def _out(like: Any, shape: tuple[int, ...], dtype: str) -> Any:
    """The output to pass for a result of ``shape`` (None: the bridge allocates it):
    large NumPy outputs are allocated here, aligned (see _empty_np)."""
    if type(like) is not _ndarray or math.prod(shape) * _NP_DTYPES[dtype].itemsize < _LARGE:
        return None
    return _empty_np(shape, dtype)


def _watched(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a ``_cb`` kernel with a progress callback that only checks for Ctrl-C: a
    KeyboardInterrupt (or any exception the callback stores) stops C within ~20 ms
    and is re-raised here, as :func:`tensorffi.physics.nbody` and
    :func:`tensorffi.io.read_csv` do; the outputs are then partly written."""
    with CallbackScope(None) as scope:
        return scope.call(fn, *args, scope.fn, scope.handle, **kwargs)


def _call(table: dict[bool, dict[str, Callable[..., Any]]], work: int, dt: str, *args: Any, **kwargs: Any) -> Any:
    """One kernel call: the ``_cb`` variant (interruptible) when ``work`` reaches _WATCH_WORK."""
    if work >= _WATCH_WORK:
        return _watched(table[True][dt], *args, **kwargs)
    return table[False][dt](*args, **kwargs)


def _sosfilt(sos: Any, x: Any, axis: Any, zi: Any, nthreads: int, fn: str = "sosfilt",
             final: bool = True) -> tuple[Any, Any]:
    """The one implementation of sosfilt: ``(y, zf)`` of ``x`` (a NumPy array or a CPU
    tensor of a dtype among _COMPUTE, at least 1-D), from ``zi`` (None: zeros; else
    x's kind and dtype), for ``sos`` of x's kind (its shape, a0 and zi's shape are
    checked here, in SciPy's order). Outputs have x's kind and dtype and, for permuted
    inputs, x's memory layout; ``final=False``: zf is not wanted (it may be None)."""
    numpy_kind = type(x) is _ndarray
    name = _REAL.get(x.dtype)
    nd = x.ndim if numpy_kind else x.dim()
    if (name is not None and type(axis) is int and (axis == -1 or axis == nd - 1)
            and (x.flags.c_contiguous if numpy_kind else x.is_contiguous())):
        # the common case, a contiguous real signal filtered along its last axis: one
        # bridge call on x as it lies (as a 2-D view); anything the call refuses (a0 != 1,
        # sos's or zi's shape, a layout...) is explained or handled by the general path
        c = _sos64(sos)
        if c is not None:
            n = x.shape[-1]
            x2, zi2, zshape = x, zi, None
            if nd != 2:
                outer = math.prod(x.shape[:-1])
                zshape = (c.shape[0],) + tuple(x.shape[:-1]) + (2,)
                if zi is not None and tuple(zi.shape) != zshape:
                    c = None  # the general path says why
                else:
                    x2 = x.reshape(outer, n)
                    zi2 = None if zi is None else zi.reshape(zshape[0], outer, 2)
        if c is not None:
            numel = x.size if numpy_kind else x.numel()
            work = numel if numel < _FAST_SAMPLES else numel * c.shape[0]
            try:
                if numpy_kind and numel * x.itemsize >= _LARGE:
                    y, zf = _call(_SOSFILT_C, work, name, c, x2, nthreads, n=n, inner=1, zi=zi2,
                                  y=_empty_np(x2.shape, name))
                elif work < _WATCH_WORK:
                    y, zf = _SOSFILT[name](c, x2, nthreads, n=n, inner=1, zi=zi2)
                else:
                    y, zf = _watched(_SOSFILT_C[True][name], c, x2, nthreads, n=n, inner=1, zi=zi2)
            except InvalidArgumentError:
                _sos_facts(sos, fn)  # a0: raises SciPy's message, with the function and the value
                raise
            except NativeError:
                raise
            except TensorFFIError:
                pass
            else:
                if zshape is None:
                    return y, zf
                return y.reshape(x.shape), (zf.reshape(zshape) if final else None)
    f = _sos_facts(sos, fn)  # sos's shape and a0 (SciPy's order: before zi's shape)
    S = f.S
    if zi is not None:
        _check_zi(fn, axis, x, S, zi)
    dt = _NAMES[x.dtype]
    lay = _Layout(x, _normalize_axis(axis, nd))
    x2, zi2 = lay.to2(x), lay.zi_to2(zi, S)
    cplx, inner, kernel = dt in _PART, lay.inner, dt
    if cplx:  # complex signals: reals, the last axis doubled
        x2, zi2, inner = _parts(x2), _parts(zi2), 2 * inner
        if not f.cplx:
            kernel = _PART[dt]  # real coefficients: real and imaginary parts are channels of the real kernel
    y2, zf2 = _call(_SOSFILT_C, x2.shape[0] * x2.shape[1] * S, kernel, f.coefficients(not numpy_kind), x2, nthreads,
                    n=lay.n, inner=inner, zi=zi2, y=_out(x, tuple(x2.shape), _PART.get(dt, dt)))
    if cplx:
        y2, zf2 = _complex_view(y2), _complex_view(zf2)
    return lay.from2(y2), (lay.zf_from2(zf2, S) if final else None)


def _complex_view(a: Any) -> Any:
    """The inverse of _parts: reals ``[..., 2 * m]`` as complex ``[..., m]`` (a view)."""
    if isinstance(a, T.Tensor):
        return T.view_as_complex(a.unflatten(-1, (-1, 2)))
    return a.view(np.complex64 if a.dtype == np.float32 else np.complex128)


def _sosfilt_backward(sos: Any, x: Any, axis: int, zi: Any, gy: Any, gzf: Any, nthreads: int,
                      fn: str = "sosfilt_backward") -> tuple[Any, Any, Any]:
    """The adjoint of :func:`_sosfilt` (real coefficients): ``(gsos, gx, gzi)``, gsos
    float64 ``[n_sections, 6]`` summed over every channel (both parts of complex ones),
    in x's kind. The forward pass is recomputed in C from checkpoints (about four
    forward passes)."""
    f = _sos_facts(sos, fn)
    if f.cplx:
        raise _complex_sos_grad_error(fn)
    S = f.S
    lay = _Layout(x, _normalize_axis(axis, x.ndim))
    x2, zi2, gy2, gzf2 = lay.to2(x), lay.zi_to2(zi, S), lay.to2(gy), lay.zi_to2(gzf, S)
    dt, inner = _NAMES[x.dtype], lay.inner
    cplx = dt in _PART
    if cplx:
        x2, zi2, gy2, gzf2, dt, inner = _parts(x2), _parts(zi2), _parts(gy2), _parts(gzf2), _PART[dt], 2 * inner
    gsos, gx2, gzi2 = _call(_BACKWARD_C, 4 * x2.shape[0] * x2.shape[1] * S, dt, f.coefficients(isinstance(x, T.Tensor)),
                            x2, gy2, nthreads, n=lay.n, inner=inner, zi=zi2, gzf=gzf2)
    if cplx:
        gx2, gzi2 = _complex_view(gx2), _complex_view(gzi2)
    return gsos, lay.from2(gx2), lay.zf_from2(gzi2, S)


def _complex_sos_grad_error(fn: str) -> DTypeError:
    return DTypeError(
        f"{fn}(): autograd through complex filter coefficients is not supported (complex x and zi with real "
        f"sos are); compute under torch.no_grad(), or keep sos real"
    )


def _check_padtype(fn: str, padtype: Any) -> None:
    if padtype not in PADTYPES:
        raise InvalidArgumentError(f"{fn}(): " + _PADTYPE_MESSAGE.format(padtype), _EINVAL, fn)


def _edge(fn: str, ntaps: int, n: int, padtype: Any, padlen: Any) -> int:
    """SciPy's _validate_pad: the extension length (a negative padlen means none)."""
    _check_padtype(fn, padtype)
    if padtype is None:
        edge = 0
    elif padlen is None:
        edge = 3 * ntaps
    else:
        edge = int(padlen)
    if n <= edge:
        raise ShapeError(f"{fn}(): The length of the input vector x must be greater than padlen, which is {edge}.")
    return max(edge, 0)


def _sosfiltfilt(sos: Any, x: Any, axis: Any, padtype: str | None, padlen: int | None, nthreads: int,
                 fn: str = "sosfiltfilt") -> Any:
    """The one implementation of sosfiltfilt (one C kernel: padding, both passes and
    the trimming), on x as for :func:`_sosfilt`."""
    f = _sos_facts(sos, fn)
    axis_n = _normalize_axis(axis, x.ndim)
    edge = _edge(fn, f.ntaps, int(x.shape[axis_n]), padtype, padlen)
    torch_kind = isinstance(x, T.Tensor)
    lay = _Layout(x, axis_n)
    x2, dt, inner = lay.to2(x), _NAMES[x.dtype], lay.inner
    cplx, kernel = dt in _PART, dt
    if cplx:
        x2, inner = _parts(x2), 2 * inner
        if not f.cplx:
            kernel = _PART[dt]
    y2 = _call(_FILTFILT_C, 2 * x2.shape[0] * x2.shape[1] * f.S, kernel, f.coefficients(torch_kind),
               f.zi(torch_kind), x2, PADTYPES[padtype], edge, nthreads, n=lay.n, inner=inner,
               y=_out(x, tuple(x2.shape), _PART.get(dt, dt)))
    return lay.from2(_complex_view(y2) if cplx else y2)


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
    fn = "sosfilt"
    x = _signal_arg(fn, x)
    torch_kind = isinstance(x, T.Tensor)
    sos = _sos_arg(fn, sos, torch_kind)
    if zi is not None and (torch_kind or type(zi) is not _ndarray):
        zi = _in_kind(fn, "zi", zi, torch_kind)
    promoted = _promote(sos, x, zi)
    name = _NAMES.get(promoted) if dtype is None else None
    if name is None:
        name = _compute_dtype(fn, promoted, dtype)
    if torch_kind:
        if threads is not None:
            resolve_threads(threads)  # checked now; resolved when the operator runs
        dt: Any = getattr(T, name)  # a torch dtype here, a NumPy one below
        if x.dtype is not dt:
            x = x.to(dt)
        if zi is not None and zi.dtype is not dt:
            zi = zi.to(dt)  # type: ignore[union-attr]  # a tensor in the torch kind
        if sos.dtype not in _TORCH_COMPUTE:
            sos = sos.to(T.float64)  # integers, bool, half precision
        elif sos.dtype.is_complex:
            _refuse_complex_sos_grad(fn, sos, x, zi)
        if not eager_plain(sos, x, zi):  # autograd, tracing, modes: the operator
            y, zf = _ensure_ops()[0](sos, x, axis, zi, threads)
            return y if zi is None else (y, zf)
    else:
        dt = _NP_DTYPES[name]
        if x.dtype != dt:
            x = x.astype(dt)
        if zi is not None and zi.dtype != dt:
            zi = zi.astype(dt)
    y, zf = _sosfilt(sos, x, axis, zi, _threads(threads), fn, zi is not None)  # what the operator would run
    return y if zi is None else (y, zf)


def _lfilter_zi_2(b: np.ndarray, a: np.ndarray) -> np.ndarray:
    """scipy.signal.lfilter_zi for one section (b, a of length 3), ported as is
    (scipy.linalg.companion included), so the results are bitwise SciPy's."""
    while a.shape[0] > 1 and a[0] == 0.0:
        a = a[1:]
    if a.size < 1:
        raise InvalidArgumentError("sosfilt_zi(): There must be at least one nonzero `a` coefficient.", _EINVAL,
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
    is_torch = isinstance(sos, T.Tensor)
    arr = sos.detach().cpu().resolve_conj().resolve_neg().numpy() if is_torch else np.asarray(sos)
    if arr.ndim != 2 or arr.shape[1] != 6:
        raise ShapeError(f"sosfilt_zi(): sos must be shape (n_sections, 6), got {arr.shape}")
    zi = _steady_state(arr)
    return T.from_numpy(zi) if is_torch else zi


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
    fn = "sosfiltfilt"
    x = _signal_arg(fn, x)
    torch_kind = isinstance(x, T.Tensor)
    if threads is not None:
        resolve_threads(threads)
    sos = _sos_arg(fn, sos, torch_kind)
    if torch_kind:
        axis = _normalize_axis(axis, x.ndim)
        _check_padtype(fn, padtype)
    name = _compute_dtype(fn, _promote(sos, x, None), dtype)
    if torch_kind:
        dt = getattr(T, name)
        if x.dtype is not dt:
            x = x.to(dt)
        if not (sos.is_floating_point() or sos.is_complex()) or sos.element_size() < 4:
            sos = sos.to(T.float64)
        _refuse_complex_sos_grad(fn, sos, x)
        if not eager_plain(sos, x):
            return _ensure_ops()[1](sos, x, axis, padtype, None if padlen is None else int(padlen), threads)
    elif x.dtype.name != name:
        x = x.astype(name)
    return _sosfiltfilt(sos, x, axis, padtype, padlen, _threads(threads), fn)


def _refuse_complex_sos_grad(fn: str, sos: torch.Tensor, *tensors: Any) -> None:
    if sos.is_complex() and T.is_grad_enabled() and not T.compiler.is_compiling():
        if sos.requires_grad or (any(t is not None and t.requires_grad for t in tensors)
                                 and _sos_facts(sos, fn, check_a0=False).cplx):
            raise _complex_sos_grad_error(fn)


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
# PyTorch operators (tensorffi/_signal_ops.py)                                 #
# --------------------------------------------------------------------------- #


_OPS: list[Any] = []  # (sosfilt, sosfiltfilt) once registered
_lazy_lock = threading.RLock()


def _ensure_ops() -> tuple[Any, Any]:
    """Register torch.ops.tensorffi.sosfilt, sosfilt_backward and sosfiltfilt once, whose
    bodies are the implementations above; their handles ``(sosfilt, sosfiltfilt)``. Run
    when torch is imported (tensorffi._torch) or by the first tensor call needing them."""
    if not _OPS:
        with _lazy_lock:
            if not _OPS:
                from . import _signal_ops

                _OPS.extend(_signal_ops.register(sys.modules[__name__]))
    return _OPS[0], _OPS[1]


if _tt.loaded() is not None:
    _ensure_ops()  # imported with torch in use: the operators exist as soon as the module does



# --------------------------------------------------------------------------- #
# A trainable filter                                                           #
# --------------------------------------------------------------------------- #


def _sosfilter_class() -> type:
    """``SOSFilter``: a ``torch.nn.Module``, so made when first named (importing torch
    then, not with this module: NumPy-only use never imports torch)."""
    import torch

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

        state: torch.Tensor | None  # a buffer: the stream's final states

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
                    f"SOSFilter(): max_reflection must lie in (0, 1), got {max_reflection!r}", _EINVAL, "SOSFilter")
            if sos is None:
                if n_sections is None or isinstance(n_sections, bool) or int(n_sections) < 1:
                    raise InvalidArgumentError(
                        f"SOSFilter(): pass sos, or n_sections >= 1 (got {n_sections!r})", _EINVAL, "SOSFilter")
                arr = np.zeros((int(n_sections), 6))
                arr[:, 0] = arr[:, 3] = 1.0
            else:
                arr = _sos_array(sos, "SOSFilter").astype(np.float64)
                if n_sections is not None and int(n_sections) != arr.shape[0]:
                    raise ShapeError(f"SOSFilter(): sos has {arr.shape[0]} sections, n_sections={n_sections}")
                if np.any(arr[:, 3] == 0) or not np.all(np.isfinite(arr)):
                    raise InvalidArgumentError("SOSFilter(): sos must be finite, with a non-zero a0 in every section",
                                               _EINVAL, "SOSFilter")
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
                        f"|a1| < max_reflection * (1 + a2)", _EINVAL, "SOSFilter")
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
            x = x if isinstance(x, T.Tensor) else torch.from_numpy(_numeric("SOSFilter.stream", "x", x))
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

    SOSFilter.__module__, SOSFilter.__qualname__ = __name__, "SOSFilter"
    return SOSFilter


def __getattr__(name: str) -> Any:
    if name == "SOSFilter":
        with _lazy_lock:
            cls = globals().get("SOSFilter")
            if cls is None:
                cls = globals()["SOSFilter"] = _sosfilter_class()  # later lookups find it at once
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- #
# Demo                                                                         #
# --------------------------------------------------------------------------- #


def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: tab completion does not offer imports (np, torch, ...)
