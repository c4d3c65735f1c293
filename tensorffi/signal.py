# SPDX-License-Identifier: MIT
"""IIR filtering with cascaded second-order sections, on NumPy arrays and torch tensors.

SciPy's ``sosfilt``, ``sosfilt_zi`` and ``sosfiltfilt``, with SciPy's semantics,
computed by the C kernels of ``csrc/signal.c``: channels are filtered side by side
in SIMD lanes (AVX-512, AVX2 or baseline vectors, chosen at run time) and spread
over threads, with the GIL released. ``sosfilt`` is differentiable in torch with
respect to ``x``, ``sos`` and ``zi`` (the backward pass is the adjoint recursion,
also in C).

>>> import numpy as np, tensorffi.signal as tsig
>>> sos = np.array([[0.2, 0.4, 0.2, 1.0, -0.5, 0.3]])        # one second-order section
>>> y = tsig.sosfilt(sos, np.ones(4))
>>> np.round(y, 4).tolist()
[0.2, 0.7, 1.09, 1.135]

Decisions (where SciPy says nothing, or where we differ on purpose):

* **dtype.** float32 input gives float32 output and float64 gives float64, whatever
  the dtype of ``sos`` (SciPy would promote float32 data to float64 when ``sos``
  is float64). Integer and bool input is promoted as SciPy does
  (``np.result_type(sos, x, zi)``, then float64 if that is still an integer type);
  float16/bfloat16 are computed and returned as float32; complex input is refused.
* **float32 arithmetic.** float32 data is filtered in float32 arithmetic when all
  poles of ``sos`` lie within radius 0.9 (roundoff then stays near 1e-6 of the
  output's peak); for poles nearer the unit circle (low cutoffs, narrow bands:
  most audio and physiological filters) float32 roundoff grows to 1e-4..1e-2, so
  those are filtered in float64 arithmetic, with float32 input and output. The
  choice depends on ``sos`` only (see :func:`uses_float32_arithmetic`), so
  streaming calls stay consistent.
* **Recursion.** float64 runs SciPy's direct form II transposed operation for
  operation (no fused multiply-add), so float64 results of ``sosfilt``,
  ``sosfilt_zi`` and ``sosfiltfilt`` are bitwise SciPy's, on every SIMD level.
  float32 runs the state-space form of the same recursion with fused
  multiply-adds (a shorter dependency chain, and no cancellation between
  ``b1 x`` and ``a1 y`` in high-pass sections).
* **Streaming float32.** ``zf`` has x's dtype; when float32 data is filtered in
  float64 arithmetic, rounding the states to float32 between calls costs a few
  float32 ulps of the output (chunked and one-call results then differ by
  ~1e-7 of the output's peak; float64 and float32-arithmetic calls agree exactly).
* **Layout.** Any axis, any strides: an input that is a permutation of a
  C-contiguous array (a transpose, ``.T``, ``movedim``) is read where it lies,
  with no copy, and the output has the same memory layout; other views are
  copied first. Outputs for torch callers are allocated through NumPy (huge
  pages for large arrays: far fewer page faults than torch's CPU allocator).
* **Gradient of ``sos[:, 3]``.** sosfilt requires a0 == 1; its gradient is the
  one of the a0-normalised filter (``b / a0``, ``a / a0``), as ``lfilter`` defines it.
* **sosfiltfilt** is differentiable too (composed of two differentiable sosfilt
  calls) when a torch input requires grad; otherwise one C kernel does the padding,
  both passes and the trimming.
* **PyTorch operators.** ``torch.ops.tensorffi.sosfilt(sos, x, axis=-1, zi=None,
  threads=None) -> (y, zf)`` (``zf``: the final states, always computed, from zero
  states when ``zi`` is None), ``sosfilt_backward`` (the C adjoint; no double
  backward) and ``sosfiltfilt(sos, x, axis=-1, padtype="odd", padlen=None,
  threads=None)``, with shape rules for ``torch.compile``. They take float32/float64
  ``x``; SciPy's dtype promotion stays in the public functions, whose torch path goes
  through the operators (a few microseconds per call), so ``torch.compile(fullgraph=True)``
  of code calling :func:`sosfilt` has no graph break. ``sos[:, 3] == 1`` is checked when
  the operator runs, not while tracing. Under ``torch.compile`` *with gradients*,
  ``sosfiltfilt`` needs ``padlen`` (the default depends on sos's values) or concrete sos.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
import torch

from ._lib import native
from .core import resolve_threads
from .errors import DeviceError, DTypeError, InvalidArgumentError, ShapeError

__all__ = ["sosfilt", "sosfilt_zi", "sosfiltfilt", "uses_float32_arithmetic"]

# --------------------------------------------------------------------------- #
# Native functions                                                             #
# --------------------------------------------------------------------------- #

_FORWARD = (
    "sos: [n_sections, 6]; x: [outer, n, inner]; y: out [outer, n, inner]; "
    "zi: in? [n_sections, outer, 2, inner]; zf: out [n_sections, outer, 2, inner]"
)
_BACKWARD = (
    "sos: [n_sections, 6]; x: [outer, n, inner]; zi: in? [n_sections, outer, 2, inner]; "
    "gy: [outer, n, inner]; gzf: in? [n_sections, outer, 2, inner]; gsos: out [n_sections, 6]; "
    "gx: out [outer, n, inner]; gzi: out [n_sections, outer, 2, inner]"
)
_FILTFILT = "sos: [n_sections, 6]; zi: [n_sections, 2]; x: [outer, n, inner]; y: out [outer, n, inner]"

_forward_c = {
    "float32": native("tf_signal_sosfilt_f32", _FORWARD),
    "float64": native("tf_signal_sosfilt_f64", _FORWARD),
}
_backward_c = {
    "float32": native("tf_signal_sosfilt_backward_f32", _BACKWARD),
    "float64": native("tf_signal_sosfilt_backward_f64", _BACKWARD),
}
_filtfilt_c = {
    "float32": native("tf_signal_sosfiltfilt_f32", _FILTFILT),
    "float64": native("tf_signal_sosfiltfilt_f64", _FILTFILT),
}
_f32_arith_c = native("tf_signal_f32_arith", "sos: [n_sections, 6]; return: value")
_lanes_c = native("tf_signal_lanes", "return: value")

#: padtype -> TF_SIGNAL_PAD_* (csrc/tensorffi.h)
PADTYPES: dict[str | None, int] = {None: 0, "odd": 1, "even": 2, "constant": 3}

ArrayLike = Any  # np.ndarray | torch.Tensor | nested sequences


# --------------------------------------------------------------------------- #
# Plain functions on [outer, n, inner] arrays (the future torch operator)      #
# --------------------------------------------------------------------------- #


def _dtype_name(a: Any) -> str:
    return str(a.dtype).replace("torch.", "")


def _sos_like(sos: Any, like: Any) -> Any:
    """``sos`` as float64 of ``like``'s kind, detached (C reads it)."""
    if isinstance(like, torch.Tensor):
        if isinstance(sos, torch.Tensor):
            return sos.detach().to(torch.float64)
        return torch.from_numpy(np.asarray(sos, dtype=np.float64))
    if isinstance(sos, torch.Tensor):
        return sos.detach().cpu().numpy().astype(np.float64, copy=False)
    return np.asarray(sos, dtype=np.float64)


def _detach(a: Any) -> Any:
    return a.detach() if isinstance(a, torch.Tensor) else a


def _empty(shape: tuple[int, ...], dtype: str, like: Any) -> Any:
    """A new output array in ``like``'s kind.

    Tensors are allocated through NumPy, which asks the kernel for huge pages on
    large arrays (torch's CPU allocator does not, by default): filling a fresh
    32 MB output then takes a few page faults instead of thousands, which costs
    as much as the filtering itself. The tensor owns the array (torch.from_numpy).
    """
    arr = np.empty(shape, dtype=dtype)
    return torch.from_numpy(arr) if isinstance(like, torch.Tensor) else arr


def _sosfilt_forward(sos: Any, x3: Any, zi3: Any = None, threads: int | None = None) -> tuple[Any, Any]:
    """``(y3, zf3) = sosfilt`` of ``x3`` along its middle axis.

    ``x3`` is a float32/float64 array or tensor of shape ``[outer, n, inner]``
    (copied if not C-contiguous), ``sos`` ``[n_sections, 6]`` (used as float64),
    ``zi3`` ``[n_sections, outer, 2, inner]`` of x3's dtype, or None for zeros.
    Returns new ``y3`` (x3's shape) and ``zf3`` (the final states, zi3's shape),
    in x3's kind and dtype. No validation beyond the bridge's: callers validate.
    """
    dt = _dtype_name(x3)
    sos = _sos_like(sos, x3)
    y3 = _empty(tuple(x3.shape), dt, x3)
    zf3 = _empty((int(sos.shape[0]), int(x3.shape[0]), 2, int(x3.shape[2])), dt, x3)
    return _forward_c[dt](sos, _detach(x3), resolve_threads(threads), zi=_detach(zi3), y=y3, zf=zf3)


def _sosfilt_backward(
    sos: Any, x3: Any, zi3: Any, gy3: Any, gzf3: Any = None, threads: int | None = None
) -> tuple[Any, Any, Any]:
    """The adjoint of :func:`_sosfilt_forward`: ``(gsos, gx3, gzi3)``.

    ``gy3`` is dL/dy3 (x3's shape and dtype), ``gzf3`` dL/dzf3 or None (zeros).
    ``gsos`` is float64 ``[n_sections, 6]``; ``gx3`` and ``gzi3`` have the dtype
    of x3. The forward pass is recomputed in C from checkpoints, so y3 is not
    needed. Cost: about four forward passes.
    """
    dt = _dtype_name(x3)
    sos = _sos_like(sos, x3)
    gx3 = _empty(tuple(x3.shape), dt, x3)
    gzi3 = _empty((int(sos.shape[0]), int(x3.shape[0]), 2, int(x3.shape[2])), dt, x3)
    return _backward_c[dt](
        sos, _detach(x3), _detach(gy3), resolve_threads(threads), zi=_detach(zi3), gzf=_detach(gzf3), gx=gx3, gzi=gzi3
    )


# --------------------------------------------------------------------------- #
# Argument handling                                                            #
# --------------------------------------------------------------------------- #

_TORCH_TO_NUMPY = {
    torch.bool: np.bool_,
    torch.uint8: np.uint8,
    torch.int8: np.int8,
    torch.int16: np.int16,
    torch.int32: np.int32,
    torch.int64: np.int64,
    torch.float16: np.float16,
    torch.bfloat16: np.float32,  # no NumPy bfloat16: computed in float32 anyway
    torch.float32: np.float32,
    torch.float64: np.float64,
    torch.complex64: np.complex64,
    torch.complex128: np.complex128,
}


def _np_dtype(a: Any) -> np.dtype:
    if isinstance(a, torch.Tensor):
        dt = _TORCH_TO_NUMPY.get(a.dtype)
        if dt is None:
            raise DTypeError(f"unsupported torch dtype {a.dtype}")
        return np.dtype(dt)
    return np.asarray(a).dtype


def _as_input(x: Any) -> Any:
    """A torch tensor stays one; anything else becomes a NumPy array."""
    return x if isinstance(x, torch.Tensor) else np.asarray(x)


def _compute_dtype(fn: str, x: Any, *others: Any) -> np.dtype:
    """The dtype a call computes in and returns (see the module docstring)."""
    xd = _np_dtype(x)
    if xd.kind == "c" or any(_np_dtype(o).kind == "c" for o in others if o is not None):
        raise DTypeError(f"{fn}: complex input is not supported (got {xd})")
    if xd.kind == "f":
        dt = xd
    elif xd.kind in "biu":
        dt = np.result_type(xd, *(_np_dtype(o) for o in others if o is not None))
        if dt.kind in "biu":
            dt = np.dtype(np.float64)
    else:
        raise DTypeError(f"{fn}: input type {xd} is not supported")
    if dt.itemsize < 4:
        dt = np.dtype(np.float32)
    if dt.itemsize > 8:
        raise DTypeError(f"{fn}: {dt} is not supported (float32 and float64 are)")
    return dt


def _to_dtype(a: Any, dt: np.dtype) -> Any:
    if isinstance(a, torch.Tensor):
        want = torch.float32 if dt == np.float32 else torch.float64
        return a if a.dtype is want else a.to(want)
    return a if a.dtype == dt else a.astype(dt)


def _validate_sos(sos: Any, fn: str, check_a0: bool = True) -> Any:
    """SciPy's _validate_sos: a float64 array/tensor of shape (n_sections, 6), a0 == 1.

    ``check_a0=False`` skips the one check that reads values (the torch operators
    do it when they run, so that tracing never reads data)."""
    if isinstance(sos, torch.Tensor):
        if sos.is_complex():
            raise DTypeError(f"{fn}: complex sos is not supported")
        if sos.ndim < 2:
            sos = sos.reshape(1, -1)
        a0_ok = lambda s: bool((s[:, 3] == 1).all())  # noqa: E731
    else:
        sos = np.asarray(sos)
        if sos.dtype.kind == "c":
            raise DTypeError(f"{fn}: complex sos is not supported")
        if sos.dtype.kind not in "biuf":
            raise DTypeError(f"{fn}: sos must be numeric, got {sos.dtype}")
        if sos.ndim < 2:
            sos = sos.reshape(1, -1)
        a0_ok = lambda s: bool(np.all(s[:, 3] == 1))  # noqa: E731
    if sos.ndim != 2:
        raise ShapeError("sos array must be 2D")
    if sos.shape[1] != 6:
        raise ShapeError("sos array must be shape (n_sections, 6)")
    if check_a0 and not a0_ok(sos):
        raise InvalidArgumentError("sos[:, 3] should be all ones", -1, fn)
    return sos


def _sos_for(sos: Any, x: Any) -> Any:
    """Validated ``sos`` as float64 in ``x``'s kind (torch keeps its graph)."""
    if isinstance(x, torch.Tensor):
        if isinstance(sos, torch.Tensor):
            return sos.to(device="cpu", dtype=torch.float64)
        return torch.from_numpy(np.array(sos, dtype=np.float64))
    if isinstance(sos, torch.Tensor):
        return sos.detach().cpu().numpy().astype(np.float64)
    return np.asarray(sos, dtype=np.float64)


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
    strides = x.stride() if isinstance(x, torch.Tensor) else x.strides
    order = sorted(range(nd), key=lambda d: -strides[d])
    if order == list(range(nd)):
        return order
    if isinstance(x, torch.Tensor):
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
    return a.permute(*order) if isinstance(a, torch.Tensor) else a.transpose(order)


def _contiguous(a: Any) -> Any:
    return a.contiguous() if isinstance(a, torch.Tensor) else np.ascontiguousarray(a)


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


def _validate_x(x: Any) -> Any:
    x = _as_input(x)
    if x.ndim == 0:
        raise ShapeError("x must be at least 1-D")
    return x


# --------------------------------------------------------------------------- #
# Public API                                                                   #
# --------------------------------------------------------------------------- #


def sosfilt(
    sos: ArrayLike, x: ArrayLike, axis: int = -1, zi: ArrayLike | None = None, *, threads: int | None = None
) -> Any:
    """Filter ``x`` along ``axis`` with cascaded second-order sections (SciPy's sosfilt).

    ``sos`` is ``(n_sections, 6)``: rows ``(b0, b1, b2, a0, a1, a2)`` with
    ``a0 == 1``. ``zi``, if given, holds the initial states, shape
    ``(n_sections, ..., 2, ...)`` (x's shape with ``x.shape[axis]`` replaced by 2);
    then ``(y, zf)`` is returned, and filtering a signal chunk by chunk, passing
    each ``zf`` as the next ``zi``, gives the same result as one call. Returns the
    caller's kind (torch tensor or NumPy array); dtype rules are in the module
    docstring. Differentiable in torch with respect to ``x``, ``sos`` and ``zi``.
    ``threads`` caps the threads (default: :func:`tensorffi.get_num_threads`).

    >>> import torch, tensorffi.signal as tsig
    >>> sos = torch.tensor([[0.2, 0.4, 0.2, 1.0, -0.5, 0.3]])
    >>> x = torch.ones(2, 4)
    >>> y, zf = tsig.sosfilt(sos, x, zi=torch.zeros(1, 2, 2))
    >>> y.dtype, tuple(zf.shape)
    (torch.float32, (1, 2, 2))
    """
    if isinstance(x, torch.Tensor):
        return _sosfilt_torch(sos, x, axis, zi, threads)
    x = _validate_x(x)
    sos = _validate_sos(sos, "sosfilt")
    n_sections = int(sos.shape[0])
    axis_n = _normalize_axis(axis, x.ndim)
    zi_shape = (n_sections,) + tuple(2 if d == axis_n else int(s) for d, s in enumerate(x.shape))
    if zi is not None:
        if isinstance(x, torch.Tensor) and not isinstance(zi, torch.Tensor):
            zi = torch.as_tensor(np.asarray(zi))
        elif not isinstance(x, torch.Tensor):
            zi = zi.detach().cpu().numpy() if isinstance(zi, torch.Tensor) else np.asarray(zi)
        if tuple(zi.shape) != zi_shape:
            raise ShapeError(
                f"Invalid zi shape. With axis={axis!r}, an input with shape {tuple(x.shape)!r}, "
                f"and an sos array with {n_sections} sections, zi must have shape {zi_shape!r}, "
                f"got {tuple(zi.shape)!r}."
            )
    dt = _compute_dtype("sosfilt", x, sos, zi)
    nthreads = resolve_threads(threads)
    x = _to_dtype(x, dt)
    if zi is not None:
        zi = _to_dtype(zi, dt)
    sos64 = _sos_for(sos, x)
    lay = _Layout(x, axis_n)
    x3 = lay.to3(x)
    zi3 = lay.zi_to3(zi, n_sections) if zi is not None else None
    y3, zf3 = _sosfilt_forward(sos64, x3, zi3, nthreads)
    y = lay.from3(y3)
    if zi is None:
        return y
    return y, lay.zf_from3(zf3, n_sections)


def _lfilter_zi_2(b: np.ndarray, a: np.ndarray) -> np.ndarray:
    """scipy.signal.lfilter_zi for one section (b, a of length 3), ported as is."""
    while a.shape[0] > 1 and a[0] == 0.0:
        a = a[1:]
    if a.size < 1:
        raise InvalidArgumentError("There must be at least one nonzero `a` coefficient.", -1, "sosfilt_zi")
    if a[0] != 1.0:
        b = b / a[0]
        a = a / a[0]
    n = max(a.shape[0], b.shape[0])
    if a.shape[0] < n:
        a = np.concatenate((a, np.zeros(n - a.shape[0], dtype=a.dtype)))
    dt = np.result_type(a, b)
    companion = np.zeros((n - 1, n - 1), dtype=np.float64)
    companion[0, :] = -a[1:] / a[0]
    if n > 2:
        companion[1:, :-1] = np.eye(n - 2)
    i_minus_a = (np.eye(n - 1) - companion.T).astype(dt)
    rhs = b[1:] - a[1:] * b[0]
    return np.linalg.solve(i_minus_a, rhs)


def sosfilt_zi(sos: ArrayLike) -> Any:
    """Initial states for :func:`sosfilt` that make its step response steady (SciPy's sosfilt_zi).

    Returns ``(n_sections, 2)`` in sos's float dtype (integers give float64), as a
    torch tensor if ``sos`` is one. Scale it by the first sample, as
    ``zi = sosfilt_zi(sos)[:, None, :] * x[..., :1]``, to start a signal without
    a transient.

    >>> import numpy as np, tensorffi.signal as tsig
    >>> sos = np.array([[0.2, 0.4, 0.2, 1.0, -0.5, 0.3]])
    >>> y, zf = tsig.sosfilt(sos, np.ones(3), zi=tsig.sosfilt_zi(sos))
    >>> np.allclose(y, 1.0)
    True
    """
    is_torch = isinstance(sos, torch.Tensor)
    arr = sos.detach().cpu().numpy() if is_torch else np.asarray(sos)
    if arr.ndim != 2 or arr.shape[1] != 6:
        raise ShapeError("sos must be shape (n_sections, 6)")
    if arr.dtype.kind == "c":
        raise DTypeError("sosfilt_zi: complex sos is not supported")
    if arr.dtype.kind in "biu":
        arr = arr.astype(np.float64)
    zi = np.empty((arr.shape[0], 2), dtype=arr.dtype)
    scale = 1.0
    for s in range(arr.shape[0]):
        b, a = arr[s, :3], arr[s, 3:]
        zi[s] = scale * _lfilter_zi_2(b, a)
        scale *= b.sum() / a.sum()
    return torch.from_numpy(zi) if is_torch else zi


def _steady_state_torch(sos64: torch.Tensor) -> torch.Tensor:
    """sosfilt_zi for sections with a0 == 1, in differentiable torch ops."""
    b0, b1, b2, a1, a2 = sos64[:, 0], sos64[:, 1], sos64[:, 2], sos64[:, 4], sos64[:, 5]
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


def sosfiltfilt(
    sos: ArrayLike,
    x: ArrayLike,
    axis: int = -1,
    padtype: str | None = "odd",
    padlen: int | None = None,
    *,
    threads: int | None = None,
) -> Any:
    """Zero-phase filtering: forward, then backward (SciPy's sosfiltfilt).

    ``x`` is extended at both ends by ``padlen`` samples (default
    ``3 * (2 * n_sections + 1 - min((sos[:, 2] == 0).sum(), (sos[:, 5] == 0).sum()))``)
    of type ``padtype`` ('odd', 'even', 'constant', or None for no extension),
    filtered forward and backward from the steady state of its end samples, and
    trimmed back. Returns the caller's kind, dtype rules as :func:`sosfilt`.
    Differentiable in torch (with respect to ``x`` and ``sos``).

    >>> import numpy as np, tensorffi.signal as tsig
    >>> sos = np.array([[0.2, 0.4, 0.2, 1.0, -0.5, 0.3]])
    >>> y = tsig.sosfiltfilt(sos, np.arange(12.0))
    >>> y.shape, y.dtype
    ((12,), dtype('float64'))
    """
    if isinstance(x, torch.Tensor):
        return _sosfiltfilt_torch(sos, x, axis, padtype, padlen, threads)
    sos = _validate_sos(sos, "sosfiltfilt")
    x = _validate_x(x)
    n_sections = int(sos.shape[0])
    axis_n = _normalize_axis(axis, x.ndim)
    if padtype not in PADTYPES:
        raise InvalidArgumentError(
            f"Unknown value '{padtype}' given to padtype. padtype must be 'even', 'odd', 'constant', or None.",
            -1,
            "sosfiltfilt",
        )
    sos_np = sos.detach().cpu().numpy() if isinstance(sos, torch.Tensor) else np.asarray(sos)
    ntaps = 2 * n_sections + 1 - min(int((sos_np[:, 2] == 0).sum()), int((sos_np[:, 5] == 0).sum()))
    if padtype is None:
        padlen = 0
    edge = 3 * ntaps if padlen is None else int(padlen)
    n = int(x.shape[axis_n])
    if n <= edge:
        raise ShapeError(f"The length of the input vector x must be greater than padlen, which is {edge}.")
    edge = max(edge, 0)  # SciPy: a negative padlen means no extension
    dt = _compute_dtype("sosfiltfilt", x, sos)
    nthreads = resolve_threads(threads)
    x = _to_dtype(x, dt)
    sos64 = _sos_for(sos, x)
    lay = _Layout(x, axis_n)
    x3 = lay.to3(x)
    return lay.from3(_filtfilt_kernel(sos64, x3, edge, padtype, nthreads))


def _filtfilt_kernel(sos: Any, x3: Any, edge: int, padtype: str | None, threads: int | None) -> Any:
    """The one-kernel sosfiltfilt of ``[outer, n, inner]`` ``x3`` (float32/float64, either kind)."""
    sos64 = _sos_like(sos, x3)
    sos_np = sos64.numpy() if isinstance(sos64, torch.Tensor) else sos64
    zi = np.asarray(sosfilt_zi(sos_np), dtype=np.float64)
    zi = torch.from_numpy(zi) if isinstance(x3, torch.Tensor) else zi
    return _filtfilt_c[_dtype_name(x3)](
        sos64, zi, _detach(x3), PADTYPES[padtype], edge, resolve_threads(threads),
        y=_empty(tuple(x3.shape), _dtype_name(x3), x3),
    )


def _sosfiltfilt_autograd(
    sos64: torch.Tensor, x3: torch.Tensor, edge: int, padtype: str | None, threads: int | None
) -> torch.Tensor:
    """sosfiltfilt from differentiable pieces: torch padding, two sosfilt operator calls
    (each with the C adjoint as its backward) on ``[outer, n, inner]`` tensors."""
    sosfilt_op = torch.ops.tensorffi.sosfilt.default
    n_sections = sos64.shape[0]
    ext = _pad_torch(x3, edge, padtype)
    zi = _steady_state_torch(sos64).to(x3.dtype).reshape(n_sections, 1, 2, 1)
    y, _ = sosfilt_op(sos64, ext, 1, zi * ext[:, :1].unsqueeze(0), threads)
    y, _ = sosfilt_op(sos64, y.flip(1), 1, zi * y[:, -1:].unsqueeze(0), threads)
    y = y.flip(1)
    return y[:, edge : edge + x3.shape[1]] if edge > 0 else y


def uses_float32_arithmetic(sos: ArrayLike) -> bool:
    """Whether float32 signals filtered with ``sos`` are computed in float32 arithmetic.

    True when every pole lies within radius 0.9 of the origin; otherwise float32
    signals are filtered in float64 arithmetic (still float32 in and out), because
    float32 roundoff near the unit circle would reach 1e-4..1e-2 of the output.

    >>> import numpy as np, tensorffi.signal as tsig
    >>> tsig.uses_float32_arithmetic(np.array([[1, 0, 0, 1, -0.5, 0.1]]))
    True
    """
    sos = _validate_sos(sos, "uses_float32_arithmetic")
    sos = sos.detach().cpu().numpy() if isinstance(sos, torch.Tensor) else sos
    return bool(_f32_arith_c(np.ascontiguousarray(sos, dtype=np.float64)))


def simd_lanes(dtype: Any = np.float32) -> int:
    """Channels the kernels filter at once for ``dtype`` at this CPU's SIMD level."""
    return int(_lanes_c(np.dtype(dtype).itemsize))


# --------------------------------------------------------------------------- #
# PyTorch operators: torch.ops.tensorffi.sosfilt / sosfilt_backward / sosfiltfilt #
# --------------------------------------------------------------------------- #
#
# The public functions route torch tensors through these operators (after SciPy's
# argument handling and dtype promotion), so that torch.compile(fullgraph=True) of
# user code calling tensorffi.signal.sosfilt traces one operator node, and autograd
# is the operator's. The operators take float32/float64 ``x`` (``zi`` of x's dtype)
# and floating ``sos`` of any dtype (used as float64; its gradient has its dtype).
# Shape rules read shapes, strides and dtypes only; the check ``sos[:, 3] == 1``
# and sosfiltfilt's default ``padlen`` (which depends on sos's zeros) read values,
# so they happen when the operator runs, never while tracing.

_SOSFILT_SCHEMA = "tensorffi::sosfilt(Tensor sos, Tensor x, int axis=-1, Tensor? zi=None, int? threads=None) -> (Tensor, Tensor)"
_SOSFILT_BACKWARD_SCHEMA = (
    "tensorffi::sosfilt_backward(Tensor sos, Tensor x, int axis, Tensor? zi, Tensor gy, Tensor gzf, "
    "int? threads=None) -> (Tensor, Tensor, Tensor)"
)
_SOSFILTFILT_SCHEMA = (
    "tensorffi::sosfiltfilt(Tensor sos, Tensor x, int axis=-1, str? padtype=\"odd\", int? padlen=None, "
    "int? threads=None) -> Tensor"
)


def _op_check(fn: str, sos: torch.Tensor, x: torch.Tensor, axis: int, zi: torch.Tensor | None = None) -> tuple[int, int]:
    """Dtype and shape checks of an operator call (no data read): (axis, n_sections)."""
    if x.dtype not in (torch.float32, torch.float64):
        raise DTypeError(f"{fn}(): argument 'x' must have dtype torch.float32 or torch.float64, got {x.dtype}")
    if not sos.is_floating_point():
        raise DTypeError(f"{fn}(): argument 'sos' must have a floating dtype, got {sos.dtype}")
    if sos.dim() != 2 or sos.shape[1] != 6:
        raise ShapeError(f"{fn}(): argument 'sos' must have shape (n_sections, 6), got {tuple(sos.shape)}")
    if x.dim() == 0:
        raise ShapeError(f"{fn}(): argument 'x' must be at least 1-D")
    axis_n = _normalize_axis(axis, x.dim())
    n_sections = sos.shape[0]
    if zi is not None:
        if zi.dtype != x.dtype:
            raise DTypeError(f"{fn}(): argument 'zi' must have x's dtype {x.dtype}, got {zi.dtype}")
        want = (n_sections,) + tuple(2 if d == axis_n else s for d, s in enumerate(x.shape))
        if tuple(zi.shape) != want:
            raise ShapeError(f"{fn}(): argument 'zi' must have shape {want}, got {tuple(zi.shape)}")
    return axis_n, n_sections


def _check_a0(sos: torch.Tensor, fn: str) -> None:
    if not bool((sos[:, 3] == 1).all()):
        raise InvalidArgumentError("sos[:, 3] should be all ones", -1, fn)


def _empty_like_layout(x: torch.Tensor, shape: Sequence[Any], order: Sequence[int]) -> torch.Tensor:
    """An empty tensor of ``shape`` whose memory order is ``order`` (slowest first)."""
    return x.new_empty([shape[d] for d in order]).permute(_inverse(order))


def _op_sosfilt(
    sos: torch.Tensor, x: torch.Tensor, axis: int = -1, zi: torch.Tensor | None = None, threads: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    axis_n, n_sections = _op_check("sosfilt", sos, x, axis, zi)
    _check_a0(sos, "sosfilt")
    lay = _Layout(x, axis_n)
    zi3 = lay.zi_to3(zi, n_sections) if zi is not None else None
    y3, zf3 = _sosfilt_forward(sos, lay.to3(x), zi3, threads)
    return lay.from3(y3), lay.zf_from3(zf3, n_sections)


def _fake_sosfilt(
    sos: torch.Tensor, x: torch.Tensor, axis: int = -1, zi: torch.Tensor | None = None, threads: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    axis_n, n_sections = _op_check("sosfilt", sos, x, axis, zi)
    order = _memory_order(x)
    zshape = [n_sections] + [2 if d == axis_n else s for d, s in enumerate(x.shape)]
    return _empty_like_layout(x, x.shape, order), _empty_like_layout(x, zshape, [0] + [d + 1 for d in order])


def _op_sosfilt_backward(
    sos: torch.Tensor, x: torch.Tensor, axis: int, zi: torch.Tensor | None, gy: torch.Tensor, gzf: torch.Tensor,
    threads: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    axis_n, n_sections = _op_check("sosfilt_backward", sos, x, axis, zi)
    _op_check("sosfilt_backward", sos, gy, axis_n, gzf)
    if gy.shape != x.shape:
        raise ShapeError(f"sosfilt_backward(): argument 'gy' must have x's shape {tuple(x.shape)}, got {tuple(gy.shape)}")
    lay = _Layout(x, axis_n)
    zi3 = lay.zi_to3(zi, n_sections) if zi is not None else None
    gsos, gx3, gzi3 = _sosfilt_backward(
        sos, lay.to3(x), zi3, lay.to3(gy.to(x.dtype)), lay.zi_to3(gzf.to(x.dtype), n_sections), threads
    )
    return gsos.to(sos.dtype), lay.from3(gx3), lay.zf_from3(gzi3, n_sections)


def _fake_sosfilt_backward(
    sos: torch.Tensor, x: torch.Tensor, axis: int, zi: torch.Tensor | None, gy: torch.Tensor, gzf: torch.Tensor,
    threads: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    axis_n, n_sections = _op_check("sosfilt_backward", sos, x, axis, zi)
    _op_check("sosfilt_backward", sos, gy, axis_n, gzf)
    torch._check(gy.shape == x.shape, lambda: "sosfilt_backward(): argument 'gy' must have x's shape")
    order = _memory_order(x)
    zshape = [n_sections] + [2 if d == axis_n else s for d, s in enumerate(x.shape)]
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
    if gy is None:
        gy = torch.zeros_like(x)
    if gzf is None:
        zshape = [sos.shape[0]] + [2 if d == ctx.axis % x.dim() else s for d, s in enumerate(x.shape)]
        gzf = x.new_zeros(zshape)
    gsos, gx, gzi = torch.ops.tensorffi.sosfilt_backward.default(sos, x, ctx.axis, zi, gy, gzf, ctx.threads)
    need = ctx.needs_input_grad
    return (
        gsos if need[0] else None,
        gx if need[1] else None,
        None,
        gzi if (zi is not None and need[3]) else None,
        None,
    )


def _filtfilt_edge(sos: torch.Tensor, n: int, padtype: str | None, padlen: int | None) -> int:
    """The extension length; the default padlen reads sos's values (SciPy's ntaps)."""
    if padtype not in PADTYPES:
        raise InvalidArgumentError(
            f"Unknown value '{padtype}' given to padtype. padtype must be 'even', 'odd', 'constant', or None.",
            -1,
            "sosfiltfilt",
        )
    if padtype is None:
        edge = 0
    elif padlen is not None:
        edge = int(padlen)
    else:
        ntaps = 2 * sos.shape[0] + 1 - min(int((sos[:, 2] == 0).sum()), int((sos[:, 5] == 0).sum()))
        edge = 3 * ntaps
    if n <= edge:
        raise ShapeError(f"The length of the input vector x must be greater than padlen, which is {edge}.")
    return max(edge, 0)  # SciPy: a negative padlen means no extension


def _op_sosfiltfilt(
    sos: torch.Tensor, x: torch.Tensor, axis: int = -1, padtype: str | None = "odd", padlen: int | None = None,
    threads: int | None = None,
) -> torch.Tensor:
    axis_n, _ = _op_check("sosfiltfilt", sos, x, axis)
    _check_a0(sos, "sosfiltfilt")
    edge = _filtfilt_edge(sos, int(x.shape[axis_n]), padtype, padlen)
    lay = _Layout(x, axis_n)
    return lay.from3(_filtfilt_kernel(sos, lay.to3(x), edge, padtype, threads))


def _fake_sosfiltfilt(
    sos: torch.Tensor, x: torch.Tensor, axis: int = -1, padtype: str | None = "odd", padlen: int | None = None,
    threads: int | None = None,
) -> torch.Tensor:
    _op_check("sosfiltfilt", sos, x, axis)
    if padtype not in PADTYPES:
        raise InvalidArgumentError(f"Unknown value '{padtype}' given to padtype.", -1, "sosfiltfilt")
    return _empty_like_layout(x, x.shape, _memory_order(x))


def _differentiable_sosfiltfilt(
    sos: torch.Tensor, x: torch.Tensor, axis: int = -1, padtype: str | None = "odd", padlen: int | None = None,
    threads: int | None = None,
) -> torch.Tensor:
    """sosfiltfilt when autograd records: padding and steady state in torch, two
    sosfilt operator calls. Under torch.compile with gradients, the default padlen
    (which depends on sos's values) needs concrete sos: pass ``padlen`` there."""
    axis_n, _ = _op_check("sosfiltfilt", sos, x, axis)
    if type(sos) is torch.Tensor or type(sos) is torch.nn.Parameter:
        _check_a0(sos, "sosfiltfilt")
    edge = _filtfilt_edge(sos, int(x.shape[axis_n]), padtype, padlen)
    lay = _Layout(x, axis_n)
    return lay.from3(_sosfiltfilt_autograd(sos.to(torch.float64), lay.to3(x), edge, padtype, threads))


def _register_ops() -> None:
    from . import ops

    backward_op = ops.define(_SOSFILT_BACKWARD_SCHEMA, _op_sosfilt_backward, fake=_fake_sosfilt_backward)
    ops.define(
        _SOSFILT_SCHEMA, _op_sosfilt, fake=_fake_sosfilt, backward=_sosfilt_grad, setup_context=_sosfilt_setup,
        _backward_op=backward_op,
    )
    ops.define(_SOSFILTFILT_SCHEMA, _op_sosfiltfilt, fake=_fake_sosfiltfilt, differentiable=_differentiable_sosfiltfilt)


_register_ops()


def _torch_dtype(fn: str, x: torch.Tensor, *others: Any) -> torch.dtype:
    """:func:`_compute_dtype` for torch callers, without NumPy for floating ``x``
    (so that torch.compile traces it)."""
    if x.is_floating_point() and not any(isinstance(o, torch.Tensor) and o.is_complex() for o in others):
        return torch.float32 if x.element_size() < 4 else x.dtype
    dt = _compute_dtype(fn, x, *others)
    return torch.float32 if dt == np.float32 else torch.float64


def _sos_tensor(sos: Any, fn: str) -> torch.Tensor:
    """Validated sos as a floating CPU tensor (keeps its graph); a0 is checked by the operator."""
    sos = _validate_sos(sos, fn, check_a0=False)
    if not isinstance(sos, torch.Tensor):
        return torch.from_numpy(np.array(sos, dtype=np.float64))
    return sos if sos.is_floating_point() else sos.to(torch.float64)


def _check_cpu(fn: str, *tensors: Any) -> None:
    """The public functions compute, so they refuse tensors C cannot read (CUDA,
    meta); the operators themselves run their shape rule on meta tensors."""
    for name, t in zip(("sos", "x", "zi"), tensors):
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            raise DeviceError(f"{fn}(): argument '{name}' must be a CPU tensor, got device {t.device}")


def _sosfilt_torch(sos: Any, x: torch.Tensor, axis: Any, zi: Any, threads: int | None) -> Any:
    _check_cpu("sosfilt", sos, x, zi)
    if threads is not None:
        resolve_threads(threads)
    if x.dim() == 0:
        raise ShapeError("x must be at least 1-D")
    sos = _sos_tensor(sos, "sosfilt")
    n_sections = sos.shape[0]
    axis_n = _normalize_axis(axis, x.dim())
    if zi is not None:
        if not isinstance(zi, torch.Tensor):
            zi = torch.as_tensor(np.asarray(zi))
        zi_shape = (n_sections,) + tuple(2 if d == axis_n else s for d, s in enumerate(x.shape))
        if tuple(zi.shape) != zi_shape:
            raise ShapeError(
                f"Invalid zi shape. With axis={axis!r}, an input with shape {tuple(x.shape)!r}, "
                f"and an sos array with {n_sections} sections, zi must have shape {zi_shape!r}, "
                f"got {tuple(zi.shape)!r}."
            )
    dt = _torch_dtype("sosfilt", x, sos, zi)
    x = x if x.dtype is dt else x.to(dt)
    if zi is not None and zi.dtype is not dt:
        zi = zi.to(dt)
    y, zf = torch.ops.tensorffi.sosfilt.default(sos, x, axis_n, zi, threads)
    return y if zi is None else (y, zf)


def _sosfiltfilt_torch(
    sos: Any, x: torch.Tensor, axis: Any, padtype: str | None, padlen: int | None, threads: int | None
) -> Any:
    _check_cpu("sosfiltfilt", sos, x)
    if threads is not None:
        resolve_threads(threads)
    sos = _sos_tensor(sos, "sosfiltfilt")
    if x.dim() == 0:
        raise ShapeError("x must be at least 1-D")
    axis_n = _normalize_axis(axis, x.dim())
    if padtype not in PADTYPES:
        raise InvalidArgumentError(
            f"Unknown value '{padtype}' given to padtype. padtype must be 'even', 'odd', 'constant', or None.",
            -1,
            "sosfiltfilt",
        )
    dt = _torch_dtype("sosfiltfilt", x, sos)
    x = x if x.dtype is dt else x.to(dt)
    return torch.ops.tensorffi.sosfiltfilt.default(sos, x, axis_n, padtype, None if padlen is None else int(padlen), threads)


# --------------------------------------------------------------------------- #
# Demo                                                                         #
# --------------------------------------------------------------------------- #


def _demo(say: Callable[[str], None]) -> None:
    """Clean a noisy synthetic ECG shipped with the package.

    ``data/signal_ecg.npz``: 10 s at 500 Hz of a synthetic ECG (Gaussian P, QRS
    and T waves, 72 bpm with 5 % jitter) plus 0.3 Hz baseline wander, 50 Hz hum
    and white noise (``x``, float32); ``sos`` = ``scipy.signal.butter(4, [0.5, 40],
    'bandpass', fs=500, output='sos')``; ``clean`` = the noiseless ECG through
    ``sosfiltfilt`` with that filter (the best any band-pass can do).
    """
    import time
    from importlib import resources

    with resources.files("tensorffi").joinpath("data/signal_ecg.npz").open("rb") as fh:
        data = np.load(fh)
        x, clean, sos, fs = data["x"], data["clean"], data["sos"], float(data["fs"])
    say(f"== signal: IIR filtering of a noisy ECG ({x.size} float32 samples at {fs:g} Hz) ==")
    say(f"filter: Butterworth band-pass 0.5-40 Hz, {sos.shape[0]} second-order sections; its poles are "
        f"near the unit circle, so float32 data is filtered in float64 arithmetic: "
        f"{not uses_float32_arithmetic(sos)}")

    def snr(y: np.ndarray) -> float:
        return 10 * math.log10(float(np.sum(clean.astype(np.float64) ** 2) / np.sum((y - clean) ** 2.0)))

    t0 = time.perf_counter()
    y = sosfiltfilt(sos, x)
    dt = time.perf_counter() - t0
    say(f"sosfiltfilt: SNR {snr(x):.1f} dB -> {snr(y):.1f} dB (baseline wander, 50 Hz hum, out-of-band noise "
        f"removed, no phase shift), {y.dtype}, {dt * 1e3:.2f} ms")
    zi = (sosfilt_zi(sos) * x[0]).astype(np.float32)
    whole, _ = sosfilt(sos, x, zi=zi)
    parts, z = [], zi
    for chunk in np.array_split(x, 7):
        part, z = sosfilt(sos, chunk, zi=z)
        parts.append(part)
    say(f"streaming: sosfilt in 7 chunks (zf -> zi) vs one call: max |difference| = "
        f"{np.max(np.abs(np.concatenate(parts) - whole)):.1e}")
    batch = torch.from_numpy(np.tile(x, (64, 4)))
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        sosfilt(sos, batch)
        times.append(time.perf_counter() - t0)
    say(f"64 channels as one torch tensor {tuple(batch.shape)}: {batch.numel() / min(times) / 1e6:.0f} Msamples/s")
    b = torch.from_numpy(sos.copy()).requires_grad_()
    loss = ((sosfiltfilt(b, torch.from_numpy(x)) - torch.from_numpy(clean)) ** 2).mean()
    loss.backward()
    say(f"autograd through sosfiltfilt (C adjoint): loss {loss.item():.2e}, |d loss / d sos| = {b.grad.norm():.3g}")
