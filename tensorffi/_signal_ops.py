# SPDX-License-Identifier: MIT
"""tensorffi.signal's kernels as PyTorch operators: ``torch.ops.tensorffi.sosfilt``,
``sosfilt_backward`` and ``sosfiltfilt`` (see :mod:`tensorffi.ops`).

The operator bodies are signal's own implementations (``_sosfilt``,
``_sosfilt_backward``, ``_sosfiltfilt``: one implementation per kernel, for NumPy
arrays and tensors alike), after the checks an operator call needs, which the public
functions have already made: x's dtype is float32, float64, complex64 or
complex128, ``zi`` has x's dtype, ``sos`` is a floating or complex
``(n_sections, 6)`` tensor of any precision (used as float64/complex128; its gradient
has its dtype), complex only with complex ``x``. The shape rules read shapes, strides
and dtypes only; the check ``sos[:, 3] == 1`` and sosfiltfilt's default ``padlen``
(which depends on sos's zeros) read values, so they happen when the operator runs,
never while tracing.

The public functions route torch tensors through these operators (after SciPy's
argument handling and dtype promotion) whenever something would intercept them
(autograd, tracing, a dispatch mode; see :func:`tensorffi._kernels.eager_plain`), so
that ``torch.compile(fullgraph=True)`` of code calling :func:`tensorffi.signal.sosfilt`
traces one operator node, and autograd is the operator's.

This module imports nothing from :mod:`tensorffi.signal` (no import cycle): signal
hands itself to :func:`register`, which defines the operators once.
"""
from __future__ import annotations

from typing import Any, Sequence, cast

__all__ = ["register"]

SOSFILT = "tensorffi::sosfilt(Tensor sos, Tensor x, int axis=-1, Tensor? zi=None, int? threads=None) -> (Tensor, Tensor)"
SOSFILT_BACKWARD = (
    "tensorffi::sosfilt_backward(Tensor sos, Tensor x, int axis, Tensor? zi, Tensor gy, Tensor gzf, "
    "int? threads=None) -> (Tensor, Tensor, Tensor)"
)
SOSFILTFILT = (
    "tensorffi::sosfiltfilt(Tensor sos, Tensor x, int axis=-1, str? padtype=\"odd\", int? padlen=None, "
    "int? threads=None) -> Tensor"
)

#: tensorffi.signal, once it has registered its operators
_sig: Any = None


def _check(fn: str, sos: Any, x: Any, axis: int, zi: Any = None) -> int:
    """Dtype and shape checks of an operator call (no data read): x's axis, normalised.
    zi's shape is checked by the implementation (after sos's a0, SciPy's order) and by
    the shape rules."""
    import torch

    if x.dtype not in (torch.float32, torch.float64, torch.complex64, torch.complex128):
        raise _sig.DTypeError(
            f"{fn}(): argument 'x' must have dtype float32, float64, complex64 or complex128, got {x.dtype}")
    if not (sos.is_floating_point() or sos.is_complex()):
        raise _sig.DTypeError(f"{fn}(): argument 'sos' must have a floating or complex dtype, got {sos.dtype}")
    if sos.is_complex() and not x.is_complex():
        raise _sig.DTypeError(f"{fn}(): argument 'x' must be complex when 'sos' is ({sos.dtype}), got {x.dtype}")
    _sig._check_sos(fn, sos)
    if x.dim() == 0:
        raise _sig.ShapeError(f"{fn}(): argument 'x' must be at least 1-D")
    axis_n: int = _sig._normalize_axis(axis, x.dim())
    if zi is not None and zi.dtype != x.dtype:
        raise _sig.DTypeError(f"{fn}(): argument 'zi' must have x's dtype {x.dtype}, got {zi.dtype}")
    return axis_n


def _empty_like_layout(x: Any, shape: Sequence[Any], order: Sequence[int]) -> Any:
    """An empty tensor of ``shape`` whose memory order is ``order`` (slowest first)."""
    return x.new_empty([shape[d] for d in order]).permute(_sig._inverse(order))


# --------------------------------------------------------------------------- #
# sosfilt                                                                      #
# --------------------------------------------------------------------------- #


def _sosfilt(sos: Any, x: Any, axis: int = -1, zi: Any = None, threads: int | None = None) -> tuple[Any, Any]:
    _check("sosfilt", sos, x, axis, zi)
    return cast("tuple[Any, Any]", _sig._sosfilt(sos, x, axis, zi, _sig._threads(threads)))


def _fake_sosfilt(sos: Any, x: Any, axis: int = -1, zi: Any = None, threads: int | None = None) -> tuple[Any, Any]:
    axis_n = _check("sosfilt", sos, x, axis, zi)
    if zi is not None:
        _sig._check_zi("sosfilt", axis, x, sos.shape[0], zi)
    order = _sig._memory_order(x)
    zshape = _sig._zi_shape(x.shape, axis_n, sos.shape[0])
    return _empty_like_layout(x, x.shape, order), _empty_like_layout(x, zshape, [0] + [d + 1 for d in order])


def _sosfilt_backward(
    sos: Any, x: Any, axis: int, zi: Any, gy: Any, gzf: Any, threads: int | None = None
) -> tuple[Any, Any, Any]:
    fn = "sosfilt_backward"
    axis_n = _check(fn, sos, x, axis, zi)
    _check(fn, sos, gy, axis_n, gzf)
    if gy.shape != x.shape:
        raise _sig.ShapeError(f"{fn}(): argument 'gy' must have x's shape {tuple(x.shape)}, got {tuple(gy.shape)}")
    if zi is not None:
        _sig._check_zi(fn, axis, x, sos.shape[0], zi)
    _sig._check_zi(fn, axis, x, sos.shape[0], gzf)
    gsos, gx, gzi = _sig._sosfilt_backward(sos, x, axis_n, zi, gy.to(x.dtype), gzf.to(x.dtype), _sig._threads(threads), fn)
    return gsos.to(sos.dtype), gx, gzi


def _fake_sosfilt_backward(
    sos: Any, x: Any, axis: int, zi: Any, gy: Any, gzf: Any, threads: int | None = None
) -> tuple[Any, Any, Any]:
    import torch

    axis_n = _check("sosfilt_backward", sos, x, axis, zi)
    _check("sosfilt_backward", sos, gy, axis_n, gzf)
    torch._check(gy.shape == x.shape, lambda: "sosfilt_backward(): argument 'gy' must have x's shape")  # type: ignore[no-untyped-call]  # torch._check is untyped
    if zi is not None:
        _sig._check_zi("sosfilt_backward", axis, x, sos.shape[0], zi)
    _sig._check_zi("sosfilt_backward", axis, x, sos.shape[0], gzf)
    order = _sig._memory_order(x)
    zshape = _sig._zi_shape(x.shape, axis_n, sos.shape[0])
    return (
        sos.new_empty(sos.shape),
        _empty_like_layout(x, x.shape, order),
        _empty_like_layout(x, zshape, [0] + [d + 1 for d in order]),
    )


def _sosfilt_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    sos, x, axis, zi, threads = inputs
    ctx.save_for_backward(sos, x, zi)
    ctx.axis, ctx.threads = axis, threads


def _sosfilt_grad(ctx: Any, gy: Any, gzf: Any) -> tuple[Any, ...]:
    import torch

    sos, x, zi = ctx.saved_tensors
    need = ctx.needs_input_grad
    if sos.is_complex() and need[0]:
        raise _sig._complex_sos_grad_error("sosfilt")
    if gy is None:
        gy = torch.zeros_like(x)
    if gzf is None:
        gzf = x.new_zeros(_sig._zi_shape(x.shape, ctx.axis % x.dim(), sos.shape[0]))
    gsos, gx, gzi = torch.ops.tensorffi.sosfilt_backward.default(sos, x, ctx.axis, zi, gy, gzf, ctx.threads)
    return (
        gsos if need[0] else None,
        gx if need[1] else None,
        None,
        gzi if (zi is not None and need[3]) else None,
        None,
    )


# --------------------------------------------------------------------------- #
# sosfiltfilt                                                                  #
# --------------------------------------------------------------------------- #


def _sosfiltfilt(
    sos: Any, x: Any, axis: int = -1, padtype: str | None = "odd", padlen: int | None = None, threads: int | None = None
) -> Any:
    _check("sosfiltfilt", sos, x, axis)
    return _sig._sosfiltfilt(sos, x, axis, padtype, padlen, _sig._threads(threads))


def _fake_sosfiltfilt(
    sos: Any, x: Any, axis: int = -1, padtype: str | None = "odd", padlen: int | None = None, threads: int | None = None
) -> Any:
    _check("sosfiltfilt", sos, x, axis)
    _sig._check_padtype("sosfiltfilt", padtype)
    return _empty_like_layout(x, x.shape, _sig._memory_order(x))


def _steady_state(sos: Any) -> Any:
    """sosfilt_zi for sections with a0 == 1, in differentiable torch ops."""
    import torch

    b0, b1, b2, a1, a2 = sos[:, 0], sos[:, 1], sos[:, 2], sos[:, 4], sos[:, 5]
    r0, r1 = b1 - a1 * b0, b2 - a2 * b0
    z0 = (r0 + r1) / (1 + a1 + a2)
    z1 = r1 - a2 * z0
    gain = (b0 + b1 + b2) / (1 + a1 + a2)
    scale = torch.cat([torch.ones_like(gain[:1]), torch.cumprod(gain, 0)[:-1]])
    return torch.stack([z0, z1], 1) * scale[:, None]


def _pad(x3: Any, edge: int, padtype: str | None) -> Any:
    """SciPy's odd/even/constant extension of ``x3`` along its middle axis."""
    import torch

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


def _ntaps(sos: Any) -> int:
    return cast(int, 2 * sos.shape[0] + 1 - min(int((sos[:, 2] == 0).sum()), int((sos[:, 5] == 0).sum())))


def _differentiable_sosfiltfilt(
    sos: Any, x: Any, axis: int = -1, padtype: str | None = "odd", padlen: int | None = None, threads: int | None = None
) -> Any:
    """sosfiltfilt when autograd records: padding and steady state in torch, two
    sosfilt operator calls. Under torch.compile with gradients, the default padlen
    (which depends on sos's values) needs concrete sos: pass ``padlen`` there."""
    import torch

    axis_n = _check("sosfiltfilt", sos, x, axis)
    if type(sos) is torch.Tensor or type(sos) is torch.nn.Parameter:  # concrete
        _sig._sos_facts(sos, "sosfiltfilt")  # a0
    ntaps = 0 if (padtype is None or padlen is not None) else _ntaps(sos)
    edge = _sig._edge("sosfiltfilt", ntaps, int(x.shape[axis_n]), padtype, padlen)
    lay = _sig._Layout(x, axis_n)
    x3 = lay.to2(x).reshape(lay.outer, lay.n, lay.inner)
    sos_w = sos.to(torch.complex128 if sos.is_complex() else torch.float64)
    sosfilt_op = torch.ops.tensorffi.sosfilt.default
    n_sections = sos_w.shape[0]
    ext = _pad(x3, edge, padtype)
    zi = _steady_state(sos_w).to(x3.dtype).reshape(n_sections, 1, 2, 1)
    y, _ = sosfilt_op(sos_w, ext, 1, zi * ext[:, :1].unsqueeze(0), threads)
    y, _ = sosfilt_op(sos_w, y.flip(1), 1, zi * y[:, -1:].unsqueeze(0), threads)
    y = y.flip(1)
    y = y[:, edge : edge + x3.shape[1]] if edge > 0 else y
    return lay.from2(y)


def register(signal: Any) -> tuple[Any, Any]:
    """Define the three operators over ``signal`` (the module tensorffi.signal); the
    overloads ``(sosfilt, sosfiltfilt)`` its public functions call."""
    from . import ops

    global _sig
    _sig = signal
    backward_op = ops.define(SOSFILT_BACKWARD, _sosfilt_backward, fake=_fake_sosfilt_backward)
    sosfilt_op = ops.define(
        SOSFILT, _sosfilt, fake=_fake_sosfilt, backward=_sosfilt_grad, setup_context=_sosfilt_setup,
        _backward_op=backward_op,
    )
    sosfiltfilt_op = ops.define(SOSFILTFILT, _sosfiltfilt, fake=_fake_sosfiltfilt,
                                differentiable=_differentiable_sosfiltfilt)
    return sosfilt_op.overload, sosfiltfilt_op.overload
