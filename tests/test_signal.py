# SPDX-License-Identifier: MIT
"""tensorffi.signal against SciPy: sosfilt, sosfilt_zi, sosfiltfilt, gradients, bad input."""
from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import scipy.signal as ss
import torch
from conftest import as_kind, to_numpy
from numpy.testing import assert_allclose, assert_array_almost_equal, assert_array_equal

import tensorffi
from tensorffi import _demo
import tensorffi.signal as tsig
from tensorffi._lib import lib

# --------------------------------------------------------------------------- #
# helpers                                                                      #
# --------------------------------------------------------------------------- #

KINDS = ("butter", "cheby1", "cheby2", "ellip")
BTYPES = ("lowpass", "highpass", "bandpass", "bandstop")


def random_sos(rng: np.random.Generator, order: int | None = None, kind: str | None = None,
               btype: str | None = None, lo: float = 0.02, hi: float = 0.95) -> np.ndarray:
    """A random stable Butterworth/Chebyshev/elliptic design, orders 1-12, as SOS."""
    while True:
        sos = _design(rng, order, kind, btype, lo, hi)
        if max_pole_radius(sos) < 0.999:  # extreme designs: even float64 (SciPy) loses digits
            return sos


def max_pole_radius(sos: np.ndarray) -> float:
    return max((float(np.abs(np.roots(s[3:])).max()) if np.any(s[4:]) else 0.0) for s in sos)


def _design(rng, order, kind, btype, lo, hi) -> np.ndarray:
    kind = kind or str(rng.choice(KINDS))
    order = order or int(rng.integers(1, 13))
    btype = btype or str(rng.choice(BTYPES))
    if btype in ("bandpass", "bandstop"):
        a = math.exp(rng.uniform(math.log(lo), math.log(hi * 0.7)))
        wn = [a, min(hi, a * math.exp(rng.uniform(0.2, 1.5)))]
    else:
        wn = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    if kind == "butter":
        return ss.butter(order, wn, btype, output="sos")
    if kind == "cheby1":
        return ss.cheby1(order, float(rng.choice([0.1, 1.0, 3.0])), wn, btype, output="sos")
    if kind == "cheby2":
        return ss.cheby2(order, float(rng.choice([20.0, 40.0, 80.0])), wn, btype, output="sos")
    return ss.ellip(order, float(rng.choice([0.1, 1.0])), float(rng.choice([40.0, 60.0])), wn, btype, output="sos")


def rel_err(y, ref) -> float:
    """max |y - ref| / max |ref| (real or complex)."""
    y, ref = to_numpy(y).astype(np.complex128), np.asarray(to_numpy(ref), dtype=np.complex128)
    scale = np.max(np.abs(ref)) if ref.size else 1.0
    return float(np.max(np.abs(y - ref)) / (scale or 1.0)) if ref.size else 0.0


def rounding_floor(rng: np.random.Generator, sos, x: np.ndarray, ref: np.ndarray, eps: float, **kw) -> float:
    """What rounding alone costs with this filter: SciPy's sosfiltfilt result's change when
    its (float64 or complex128) input moves by one relative rounding of ``eps``. Random
    designs with poles near the unit circle amplify it past any fixed tolerance."""
    nudged = x * (1 + eps * rng.choice([-1.0, 1.0], size=x.shape))
    return rel_err(ss.sosfiltfilt(sos, nudged, **kw), ref)


def random_shape(rng: np.random.Generator, n: int) -> tuple[tuple[int, ...], int]:
    ndim = int(rng.integers(1, 4))
    shape = [int(rng.integers(1, 6)) for _ in range(ndim)]
    axis = int(rng.integers(-ndim, ndim))
    shape[axis] = n
    return tuple(shape), axis


# --------------------------------------------------------------------------- #
# sosfilt against SciPy                                                        #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sosfilt_matches_scipy_random_filters(kind, dtype, rng):
    for _ in range(12):
        sos = random_sos(rng)
        shape, axis = random_shape(rng, int(rng.integers(50, 700)))
        x = rng.standard_normal(shape).astype(dtype)
        y = tsig.sosfilt(sos, as_kind(x, kind), axis=axis, dtype=dtype)  # float64 sos: dtype= keeps float32
        assert type(y) is type(as_kind(x, kind))
        assert y.shape == x.shape and to_numpy(y).dtype == dtype
        ref = ss.sosfilt(sos, x.astype(np.float64), axis=axis)
        tol = 1e-12 if dtype == np.float64 else 1e-5
        assert rel_err(y, ref) <= tol, (sos.shape, shape, axis)
        if dtype == np.float64:  # SciPy's operations in SciPy's order: bitwise equal
            assert_array_equal(to_numpy(y), ref)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sosfilt_every_axis_with_zi(kind, dtype, rng):
    sos = random_sos(rng, order=int(rng.integers(4, 13)))
    x = rng.standard_normal((5, 7, 300)).astype(dtype)
    for axis in (0, 1, 2, -1, -2, -3):
        xa = np.moveaxis(x, 2, axis).copy()  # the long axis is `axis`
        zshape = list(xa.shape)
        zshape[axis] = 2
        zi = rng.standard_normal([sos.shape[0]] + zshape).astype(dtype)
        y, zf = tsig.sosfilt(sos, as_kind(xa, kind), axis=axis, zi=as_kind(zi, kind), dtype=dtype)
        ry, rzf = ss.sosfilt(sos, xa.astype(np.float64), axis=axis, zi=zi.astype(np.float64))
        tol = 1e-12 if dtype == np.float64 else 1e-5
        assert rel_err(y, ry) <= tol
        assert rel_err(zf, rzf) <= tol
        if dtype == np.float64:
            assert_array_equal(to_numpy(y), ry)
            assert_array_equal(to_numpy(zf), rzf)
        assert to_numpy(zf).shape == zi.shape and to_numpy(zf).dtype == dtype


def test_float32_poles_near_unit_circle_stay_accurate(rng):
    # Low cutoffs: float32 arithmetic would be off by ~1e-4; we switch to float64 arithmetic.
    for sos in (ss.butter(4, [0.5, 40], "bandpass", fs=500, output="sos"),
                ss.butter(4, 20, "highpass", fs=48000, output="sos"),
                ss.cheby1(12, 1, 0.02, output="sos")):
        assert not tsig.uses_float32_arithmetic(sos)
        x = (np.cumsum(rng.standard_normal((3, 4000)), axis=1) * 0.01).astype(np.float32)
        ref = ss.sosfilt(sos, x.astype(np.float64))
        assert rel_err(tsig.sosfilt(sos, x, dtype=np.float32), ref) <= 1e-6
    assert tsig.uses_float32_arithmetic(ss.butter(8, 0.2, output="sos"))
    assert lib.tf_signal_f32_arith(tensorffi.core.ffi.NULL, 0) == 1


def test_float32_arithmetic_accuracy_near_the_threshold(rng):
    # Designs whose poles sit just inside radius 0.9 run in float32 arithmetic.
    found = 0
    while found < 20:
        sos = random_sos(rng, lo=0.15, hi=0.85)
        if not tsig.uses_float32_arithmetic(sos):
            continue
        found += 1
        x = rng.standard_normal((8, 3000)).astype(np.float32) + np.float32(rng.uniform(-3, 3))
        assert rel_err(tsig.sosfilt(sos.astype(np.float32), x), ss.sosfilt(sos, x.astype(np.float64))) <= 1e-5


def test_one_channel_equals_the_same_channel_in_a_batch(rng):
    # The lone-channel (wavefront) kernel and the lane kernels do the same arithmetic.
    for dtype in (np.float32, np.float64):
        sos = random_sos(rng, order=8)
        x = rng.standard_normal((9, 1000)).astype(dtype)
        batch = tsig.sosfilt(sos, x, dtype=dtype)
        for c in (0, 4, 8):
            assert_array_equal(tsig.sosfilt(sos, x[c], dtype=dtype), batch[c])


SIMD_LEVELS = {"scalar": 0, "avx2": 1, "avx512": 2}


def _cpu_simd(monkeypatch) -> int:
    monkeypatch.delenv("TENSORFFI_SIMD", raising=False)
    return int(lib.tf_simd_level())


def _complex_sos(rng, order: int) -> np.ndarray:
    """A stable filter with genuinely complex coefficients: a real design, rotated
    in frequency by a random angle (z -> z e^{-i w}), so its poles stay inside."""
    sos = random_sos(rng, order=order, lo=0.1, hi=0.6).astype(np.complex128)
    w = np.exp(1j * rng.uniform(0.1, 1.0))
    sos[:, 1] *= w
    sos[:, 2] *= w * w
    sos[:, 4] *= w
    sos[:, 5] *= w * w
    return sos


# shapes reaching every kernel: channels in lanes with transposes (rows of one
# channel, rows of complex pairs), lanes adjacent in memory, partial groups,
# a lone channel (the wavefront, three widths by the number of sections)
_LEVEL_SHAPES = (((13, 203), -1), ((203, 13), 0), ((1, 203), -1), ((3, 203, 37), 1), ((40, 130), -1), ((2, 97, 3), 1))


@pytest.mark.parametrize("simd", ["scalar", "avx2", "avx512"])
def test_every_simd_level(monkeypatch, simd, rng):
    if _cpu_simd(monkeypatch) < SIMD_LEVELS[simd]:
        pytest.skip("CPU lacks AVX-512" if simd == "avx512" else "CPU lacks AVX2")
    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    assert lib.tf_signal_simd() == SIMD_LEVELS[simd] and tsig.simd_level() == simd  # the level that runs
    designs = [ss.butter(8, 0.2, output="sos"), ss.butter(8, 0.03, output="sos"),  # f32 / f32 data in f64
               random_sos(rng, order=4), random_sos(rng, order=12), random_sos(rng, order=22)]
    for sos in designs:
        for shape, axis in _LEVEL_SHAPES:
            zshape = list(shape)
            zshape[axis] = 2
            zi = rng.standard_normal([sos.shape[0]] + zshape)
            x = rng.standard_normal(shape)
            for dtype, tol in ((np.float64, 0), (np.float32, 1e-5), (np.complex128, 0), (np.complex64, 1e-5)):
                xd = (x + 1j * rng.standard_normal(shape) if np.dtype(dtype).kind == "c" else x).astype(dtype)
                zd = zi.astype(dtype)
                y, zf = tsig.sosfilt(sos, xd, axis=axis, zi=zd, dtype=dtype)
                assert y.dtype == dtype and zf.dtype == dtype
                ry, rzf = ss.sosfilt(sos, xd.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64),
                                     axis=axis, zi=zd.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64))
                if tol == 0:  # float64 and complex128: SciPy's operations, bitwise
                    assert_array_equal(y, ry)
                    assert_array_equal(zf, rzf)
                else:
                    assert rel_err(y, ry) <= tol and rel_err(zf, rzf) <= 10 * tol
                yy = tsig.sosfiltfilt(sos, xd, axis=axis, padlen=20, dtype=dtype)
                ref = ss.sosfiltfilt(sos, xd.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64),
                                     axis=axis, padlen=20)
                if tol == 0:
                    assert_array_equal(yy, ref)
                else:
                    # What float32 storage alone costs with this filter: the float64 result's
                    # change when its input moves by one float32 rounding (ill-conditioned
                    # designs, e.g. an order-22 elliptic with small output, amplify it to ~1e-4).
                    wide = xd.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
                    floor = rounding_floor(rng, sos, wide, ref, 2.0**-24, axis=axis, padlen=20)
                    assert rel_err(yy, ref) <= 10 * tol + 10 * floor
    # complex coefficients (their own kernels)
    for order in (2, 7, 10):
        csos = _complex_sos(rng, order)
        for shape, axis in _LEVEL_SHAPES:
            x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
            zshape = list(shape)
            zshape[axis] = 2
            zi = rng.standard_normal([csos.shape[0]] + zshape) + 1j * rng.standard_normal([csos.shape[0]] + zshape)
            y, zf = tsig.sosfilt(csos, x, axis=axis, zi=zi)
            ry, rzf = ss.sosfilt(csos, x, axis=axis, zi=zi)
            assert_array_equal(y, ry)
            assert_array_equal(zf, rzf)
            y64 = tsig.sosfilt(csos, x.astype(np.complex64), axis=axis, dtype=np.complex64)
            assert y64.dtype == np.complex64 and rel_err(y64, ss.sosfilt(csos, x, axis=axis)) <= 1e-4
            yy = tsig.sosfiltfilt(csos, x, axis=axis, padlen=20)
            ref = ss.sosfiltfilt(csos, x, axis=axis, padlen=20)
            # what float64 rounding alone costs with this random filter: SciPy's result's
            # change when its input moves by one rounding (seed 3161873459 drew one that
            # amplifies it past a fixed 1e-12 at every SIMD level, on both call paths)
            floor = rounding_floor(rng, csos, x, ref, 2.0**-52, axis=axis, padlen=20)
            assert rel_err(yy, ref) <= 1e-12 + 10 * floor
    # the adjoint (backward) on this level, against the time-reversed filter
    sos = torch.from_numpy(ss.butter(6, 0.25, output="sos"))
    for shape in ((13, 150), (1, 150), (3, 150, 20)):
        # float64: the adjoint runs a different (fused) recursion than SciPy's forward on the
        # reversed signal; ~1e-12 of the peak was seen on random data, so 1e-11
        for dt, tol in ((torch.float64, 1e-11), (torch.float32, 1e-5), (torch.complex128, 1e-11)):
            x = torch.randn(shape, dtype=dt, requires_grad=True)
            gy = torch.randn(shape, dtype=dt)
            (tsig.sosfilt(sos.to(dt.to_real()), x, axis=1) * gy.conj()).real.sum().backward()
            ref = ss.sosfilt(sos.numpy(), gy.numpy()[:, ::-1], axis=1)[:, ::-1]
            assert rel_err(x.grad, ref) <= tol



@pytest.mark.parametrize("simd", ["scalar", "avx2", "avx512"])
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_large_outputs_stream_past_the_caches(monkeypatch, simd, kind, rng):
    """Outputs of at least 8 MB whose lanes read rows (the transposes) are written
    with non-temporal stores (TF_SOS_NT_BYTES in signal.c; rows a multiple of 64 bytes
    long, outputs 64-byte aligned): every element kind, real and complex rows, against
    SciPy, on each SIMD level this CPU has."""
    if _cpu_simd(monkeypatch) < SIMD_LEVELS[simd]:
        pytest.skip("CPU lacks AVX-512" if simd == "avx512" else "CPU lacks AVX2")
    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    # f32 arithmetic, f32 data in f64 arithmetic (poles near the unit circle), f64
    designs = {"f32": ss.butter(4, 0.2, output="sos"), "f32d": ss.butter(4, 0.02, output="sos")}
    cases = [(np.float32, "f32"), (np.float32, "f32d"), (np.float64, "f32"), (np.complex64, "f32"),
             (np.complex64, "f32d"), (np.complex128, "f32")]
    for dtype, design in cases:
        sos = designs[design]
        rows = 24  # 1.5 groups of 16 lanes, or 3 of 8: full and partial groups
        n = (10 << 20) // (rows * np.dtype(dtype).itemsize) // 64 * 64  # ~10 MB, rows of 64-byte multiples
        x = rng.standard_normal((rows, n))
        if np.dtype(dtype).kind == "c":
            x = x + 1j * rng.standard_normal((rows, n))
        xd = x.astype(dtype)
        y = to_numpy(tsig.sosfilt(sos, as_kind(xd, kind), dtype=dtype))
        assert y.dtype == dtype
        ref = ss.sosfilt(sos, xd.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64))
        if dtype in (np.float64, np.complex128):
            assert_array_equal(y, ref)  # SciPy's operations, bitwise
        else:
            assert rel_err(y, ref) <= 1e-5, (dtype, design)


def test_default_simd_level_is_one_this_cpu_has(monkeypatch):
    cpu = _cpu_simd(monkeypatch)
    assert 0 <= lib.tf_signal_simd() <= cpu
    monkeypatch.setenv("TENSORFFI_SIMD", "scalar")
    assert lib.tf_signal_simd() == 0 and tsig.simd_lanes(np.float64) == 2


# --------------------------------------------------------------------------- #
# streaming                                                                    #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_streaming_in_chunks_equals_one_call(kind, dtype, rng):
    for nch in (1, 3, 16):
        sos = random_sos(rng)
        x = rng.standard_normal((nch, 2000)).astype(dtype)
        zi0 = rng.standard_normal((sos.shape[0], nch, 2)).astype(dtype)
        whole, zf_whole = tsig.sosfilt(sos, as_kind(x, kind), zi=as_kind(zi0, kind), dtype=dtype)
        cuts = np.sort(rng.choice(np.arange(1, 2000), size=int(rng.integers(1, 12)), replace=False))
        cuts = np.concatenate([[0], cuts, [0, 0], cuts[-1:], [2000]])  # includes empty chunks
        cuts = np.sort(cuts)
        parts, z = [], as_kind(zi0, kind)
        for a, b in zip(cuts[:-1], cuts[1:]):
            part, z = tsig.sosfilt(sos, as_kind(x[:, a:b], kind), zi=z, dtype=dtype)
            parts.append(to_numpy(part))
        chunked = np.concatenate(parts, axis=1)
        if dtype == np.float64 or tsig.uses_float32_arithmetic(sos):
            # float64, or float32 in float32 arithmetic: the states cross calls exactly
            assert_array_equal(chunked, to_numpy(whole))
            assert_array_equal(to_numpy(z), to_numpy(zf_whole))
        else:
            # float32 data in float64 arithmetic (poles near the unit circle): the
            # states are rounded to float32 between calls (they are float32 arrays),
            # and such filters amplify that rounding by their gain, which a random
            # filter does not bound. The reference does the same: SciPy in float64 on
            # each chunk, its states rounded to float32 between chunks.
            ref_parts, zr = [], zi0
            for a, b in ((a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a):  # SciPy refuses empty ones
                yr, zr64 = ss.sosfilt(sos, x[:, a:b].astype(np.float64), zi=zr.astype(np.float64))
                ref_parts.append(yr.astype(np.float32))
                zr = zr64.astype(np.float32)
            assert rel_err(chunked, np.concatenate(ref_parts, axis=1)) <= 1e-6
            assert rel_err(z, zr) <= 1e-6
        # (the one call against SciPy: chunks equal it above, or equal SciPy chunk by chunk)
        assert rel_err(whole, ss.sosfilt(sos, x.astype(np.float64), zi=zi0.astype(np.float64))[0]) <= (
            1e-12 if dtype == np.float64 else 1e-5)


# --------------------------------------------------------------------------- #
# layouts, dtypes, kinds                                                       #
# --------------------------------------------------------------------------- #


def test_noncontiguous_and_transposed_inputs(kind, rng):
    sos = random_sos(rng, order=6)
    base = rng.standard_normal((40, 300))
    cases = [
        (base.T, 0), (base.T, -1), (base[:, ::3], -1), (base[::2, :], 0), (base[::-1, ::-1], -1),
        (np.asfortranarray(base), -1), (np.asfortranarray(base), 0),
        (rng.standard_normal((4, 5, 60)).transpose(2, 0, 1), 0),
        (rng.standard_normal((4, 5, 60)).transpose(1, 2, 0), 1),
    ]
    for x, axis in cases:
        if kind == "torch":
            # the same view of a torch tensor (torch has no negative strides: flip copies)
            xin = torch.from_numpy(x.copy()) if any(s < 0 for s in x.strides) else _torch_view(x)
        else:
            xin = x
        y = tsig.sosfilt(sos, xin, axis=axis)
        assert rel_err(y, ss.sosfilt(sos, x, axis=axis)) <= 1e-12
        y2 = tsig.sosfiltfilt(sos, xin, axis=axis, padlen=10)
        assert rel_err(y2, ss.sosfiltfilt(sos, x, axis=axis, padlen=10)) <= 1e-11


def _torch_view(x: np.ndarray) -> torch.Tensor:
    """A torch tensor with x's strides (torch.from_numpy keeps them; it shares x's memory)."""
    t = torch.from_numpy(x)
    assert t.stride() == tuple(s // x.itemsize for s in x.strides)
    return t


def test_permuted_input_is_not_copied_and_keeps_its_layout(rng):
    sos = random_sos(rng, order=4)
    x = rng.standard_normal((300, 16)).T  # F-ordered view
    y = tsig.sosfilt(sos, x)
    assert y.strides[0] < y.strides[1]  # same memory order as x
    t = torch.from_numpy(rng.standard_normal((300, 16))).T
    yt = tsig.sosfilt(sos, t)
    assert yt.stride() == t.stride()
    assert rel_err(yt, ss.sosfilt(sos, t.numpy())) <= 1e-12


def test_dtypes_follow_scipy_and_torch_promotion(rng):
    sos = ss.butter(4, 0.3, output="sos")
    xi = rng.integers(-100, 100, size=(3, 50))
    # NumPy: result_type(sos, x, zi), SciPy's rule
    for sdt in (np.float32, np.float64, np.complex64, np.complex128):
        for xdt in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_, np.float32, np.float64,
                    np.complex64, np.complex128):
            s, x = sos.astype(sdt), xi.astype(xdt)
            y = tsig.sosfilt(s, x)
            ref = ss.sosfilt(s, x)
            assert y.dtype == ref.dtype == np.result_type(s, x), (sdt, xdt)
            assert rel_err(y, ref) <= (1e-12 if ref.dtype.itemsize >= 8 and ref.dtype != np.complex64 else 1e-5)
            for zdt in (np.float32, np.complex64, np.float64):
                zi = np.zeros((2, 3, 2), zdt)
                y, zf = tsig.sosfilt(s, x, zi=zi)
                assert y.dtype == zf.dtype == ss.sosfilt(s, x, zi=zi)[0].dtype
    # where SciPy refuses, we widen: integer results in float64, float16 in float32
    assert tsig.sosfilt(sos.astype(np.int64), xi).dtype == np.float64
    assert tsig.sosfilt(sos.astype(np.float16), xi.astype(np.float16)).dtype == np.float32
    # dtype= overrides: float32 data, float64 sos, float32 arithmetic
    y32 = tsig.sosfilt(sos, xi.astype(np.float32), dtype=np.float32)
    assert y32.dtype == np.float32 and rel_err(y32, ss.sosfilt(sos.astype(np.float32), xi.astype(np.float32))) <= 1e-5
    assert tsig.sosfilt(sos, xi, dtype="complex64").dtype == np.complex64
    assert tsig.sosfilt(sos, xi, dtype=torch.float32).dtype == np.float32
    with pytest.raises(tensorffi.DTypeError, match="imaginary"):
        tsig.sosfilt(sos, xi + 1j, dtype=np.float64)
    with pytest.raises(tensorffi.DTypeError, match="dtype must be"):
        tsig.sosfilt(sos, xi, dtype=np.int32)
    with pytest.raises(tensorffi.DTypeError, match="not supported"):
        tsig.sosfilt(sos, xi.astype(np.longdouble))
    # torch: torch.promote_types; lists and arrays count with their NumPy dtype (float64)
    st = torch.from_numpy(sos)
    for sdt in (torch.float32, torch.float64, torch.complex64, torch.complex128):
        for xdt in (torch.int16, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64,
                    torch.complex64, torch.complex128):
            want = torch.promote_types(sdt, xdt)
            want = {torch.float16: torch.float32, torch.bfloat16: torch.float32}.get(want, want)
            y = tsig.sosfilt(st.to(sdt), torch.from_numpy(xi).to(xdt))
            assert isinstance(y, torch.Tensor) and y.dtype == want, (sdt, xdt)
    x32 = torch.from_numpy(xi).float()
    assert tsig.sosfilt(sos, x32).dtype == torch.float64
    assert tsig.sosfilt(sos, x32, dtype=torch.float32).dtype == torch.float32
    assert tsig.sosfilt(st.float(), x32, zi=torch.zeros(2, 3, 2, dtype=torch.float64))[0].dtype == torch.float64
    assert tsig.sosfiltfilt(sos, x32).dtype == torch.float64
    assert tsig.sosfiltfilt(sos, x32, dtype=np.float32).dtype == torch.float32
    # lists work like arrays
    assert_allclose(tsig.sosfilt(sos.tolist(), xi[0].tolist()), ss.sosfilt(sos, xi[0]), rtol=1e-12, atol=1e-12)
    # numpy sos with torch x (and the other way round) returns x's kind
    assert isinstance(tsig.sosfilt(sos, torch.from_numpy(xi[0] * 1.0)), torch.Tensor)
    assert isinstance(tsig.sosfilt(torch.from_numpy(sos), xi[0] * 1.0), np.ndarray)


def test_readonly_input_is_fine(rng):
    sos = ss.butter(3, 0.4, output="sos")
    x = rng.standard_normal((2, 100))
    x.flags.writeable = False
    assert rel_err(tsig.sosfilt(sos, x), ss.sosfilt(sos, x)) <= 1e-12


def test_threads_do_not_change_results(rng):
    # large enough for several threads (a thread is started per ~4M sample-sections);
    # groups of channels are claimed dynamically, in an order that varies from call
    # to call: the results must not depend on it
    sos = random_sos(rng, order=8)
    for shape, dtype in (((67, 40000), np.float64), ((130, 40000), np.float32), ((40000, 67), np.float64)):
        axis = 0 if shape[0] > shape[1] else -1
        x = rng.standard_normal(shape).astype(dtype)
        y1 = tsig.sosfilt(sos, x, axis=axis, threads=1, dtype=dtype)
        if dtype == np.float64:
            assert_array_equal(y1, ss.sosfilt(sos, x, axis=axis))
        f1 = tsig.sosfiltfilt(sos, x, axis=axis, threads=1, dtype=dtype)
        for t in (2, 3, 7):
            assert_array_equal(tsig.sosfilt(sos, x, axis=axis, threads=t, dtype=dtype), y1)
            assert_array_equal(tsig.sosfiltfilt(sos, x, axis=axis, threads=t, dtype=dtype), f1)
    with pytest.raises(ValueError):
        tsig.sosfilt(sos, x, threads=0)


def test_thread_safety_concurrent_calls(rng):
    sos = random_sos(rng, order=6)
    xs = [rng.standard_normal((8, 3000)).astype(np.float32 if i % 2 else np.float64) for i in range(8)]
    refs = [ss.sosfilt(sos, x.astype(np.float64)) for x in xs]
    errors: list[float] = []

    def work(i: int) -> None:
        for _ in range(5):
            x = torch.from_numpy(xs[i]) if i % 3 == 0 else xs[i]
            errors.append(rel_err(tsig.sosfilt(sos, x, threads=2, dtype=xs[i].dtype), refs[i]))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 40 and max(errors) <= 1e-5


# --------------------------------------------------------------------------- #
# edge cases and bad input                                                     #
# --------------------------------------------------------------------------- #


def test_empty_inputs(kind):
    sos = ss.butter(4, 0.3, output="sos")
    for shape, axis in (((0,), -1), ((3, 0), -1), ((0, 5), -1), ((0, 5), 0), ((2, 0, 4), 1)):
        x = np.zeros(shape)
        y = tsig.sosfilt(sos, as_kind(x, kind), axis=axis)
        assert tuple(y.shape) == shape and type(y) is type(as_kind(x, kind))
        zshape = list(shape)
        zshape[axis] = 2
        zi = np.arange(float(np.prod([2] + zshape))).reshape([2] + zshape)
        y, zf = tsig.sosfilt(sos, as_kind(x, kind), axis=axis, zi=as_kind(zi, kind))
        assert tuple(y.shape) == shape
        assert_array_equal(to_numpy(zf), zi)  # no samples: the states pass through
    assert tsig.sosfiltfilt(sos, np.zeros((0, 100))).shape == (0, 100)
    assert tsig.sosfilt(sos, np.zeros((0, 100), np.float32)).dtype == np.float64  # float64 sos promotes
    assert tsig.sosfilt(sos, np.zeros((0, 100), np.float32), dtype=np.float32).dtype == np.float32
    # no sections: the identity (SciPy's reshape fails on this one)
    x = np.arange(5.0)
    assert_array_equal(tsig.sosfilt(np.zeros((0, 6)), x), x)
    assert_array_equal(tsig.sosfilt(np.zeros((0, 6)), np.ones((1, 7)), zi=np.zeros((0, 1, 2)))[0], np.ones((1, 7)))


def test_nan_and_inf_propagate(rng):
    sos = ss.butter(4, 0.3, output="sos")
    for dtype in (np.float32, np.float64):
        for nch in (1, 9):
            x = rng.standard_normal((nch, 200)).astype(dtype)
            x[0, 50] = np.nan
            x[-1, 120] = np.inf
            y = tsig.sosfilt(sos, x, dtype=dtype)
            ref = ss.sosfilt(sos, x.astype(np.float64))
            if dtype == np.float64:
                assert_array_equal(y, ref)  # NaN where SciPy has NaN, inf where it has inf
            assert_array_equal(np.isfinite(y), np.isfinite(ref))
            ok = np.isfinite(ref)
            assert rel_err(y[ok], ref[ok]) <= 1e-5
            assert np.all(~np.isfinite(tsig.sosfiltfilt(sos, x, dtype=dtype)[0]))
    bad = sos.copy()
    bad[0, 0] = np.nan
    assert np.isnan(tsig.sosfilt(bad, rng.standard_normal(50).astype(np.float32), dtype=np.float32)).all()
    bad = sos.copy()
    bad[1, 4] = np.inf
    assert not tsig.uses_float32_arithmetic(bad)
    assert not np.isfinite(tsig.sosfilt(bad, rng.standard_normal((3, 50)), dtype=np.float32)[:, 1:]).any()


def test_bad_input_messages():
    sos = ss.butter(4, 0.3, output="sos")
    x = np.ones(20)
    with pytest.raises(ValueError, match=r"sos array must be shape \(n_sections, 6\)"):
        tsig.sosfilt(np.ones((2, 5)), x)
    with pytest.raises(ValueError, match="sos array must be 2D"):
        tsig.sosfilt(np.ones((2, 2, 6)), x)
    bad = sos.copy()
    bad[1, 3] = 2.0
    with pytest.raises(ValueError, match="should be all ones"):
        tsig.sosfilt(bad, x)
    with pytest.raises(ValueError, match="should be all ones"):
        tsig.sosfiltfilt(torch.from_numpy(bad), torch.from_numpy(x))
    with pytest.raises(tensorffi.ShapeError, match="Invalid zi shape"):
        tsig.sosfilt(sos, x, zi=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="at least 1-D"):
        tsig.sosfilt(sos, 3.0)
    with pytest.raises(ValueError, match="out of bounds"):
        tsig.sosfilt(sos, x, axis=1)
    with pytest.raises(ValueError, match="Unknown value 'wrap' given to padtype"):
        tsig.sosfiltfilt(sos, x, padtype="wrap")
    with pytest.raises(ValueError, match="must be greater than padlen, which is 15"):
        tsig.sosfiltfilt(sos, np.ones(15))  # 2 sections: padlen = 3 * (2 * 2 + 1)
    with pytest.raises(ValueError, match="must be greater than padlen, which is 30"):
        tsig.sosfiltfilt(sos, np.ones(30), padlen=30)
    with pytest.raises(tensorffi.DTypeError, match=r"sosfilt\(\): sos must be numeric"):
        tsig.sosfilt(np.array([["a"] * 6]), x)
    with pytest.raises(ValueError, match=r"sos must be shape \(n_sections, 6\)"):
        tsig.sosfilt_zi(np.ones((3, 5)))
    with pytest.raises(tensorffi.DeviceError):
        tsig.sosfilt(sos, torch.ones(20, device="meta"))
    # the C entry points check too
    forward, filtfilt = tsig._SOSFILT_C[False], tsig._FILTFILT_C[False]
    with pytest.raises(tensorffi.errors.InvalidArgumentError, match="a0 must be 1"):
        forward["float64"](bad, np.ones((1, 4)), 1, n=4, inner=1)
    cbad = np.zeros((1, 12))
    cbad[0, 6:8] = (1.0, 0.5)  # a0 = 1 + 0.5j
    with pytest.raises(tensorffi.errors.InvalidArgumentError, match="a0 must be 1"):
        forward["complex128"](cbad, np.ones((1, 8)), 1, n=4, inner=2)
    with pytest.raises(tensorffi.errors.NativeShapeError, match="must be even"):
        forward["complex128"](np.array([[1.0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]]), np.ones((1, 12)), 1, n=4, inner=3)
    with pytest.raises(tensorffi.errors.InvalidArgumentError, match="greater than padlen"):
        filtfilt["float64"](sos, tsig.sosfilt_zi(sos), np.ones((1, 4)), 1, 4, 1, n=4, inner=1)
    with pytest.raises(tensorffi.errors.InvalidArgumentError, match="unknown padtype"):
        filtfilt["float32"](sos, tsig.sosfilt_zi(sos), np.ones((1, 40), np.float32), 7, 4, 1, n=40, inner=1)
    # the bridge checks that n * inner is the signal's row (and 2 * inner the states')
    with pytest.raises(tensorffi.ShapeError, match="n\\*inner"):
        forward["float64"](sos, np.ones((1, 40)), 1, n=41, inner=1)
    with pytest.raises(tensorffi.ShapeError, match="2\\*inner"):
        forward["float64"](sos, np.ones((1, 40)), 1, n=20, inner=2, zi=np.zeros((2, 1, 2)))


def test_a0_error_names_function_value_and_remedy(kind):
    sos = ss.butter(4, 0.3, output="sos")
    bad = sos.copy()
    bad[1, 3] = 1.0003
    x = as_kind(np.ones((2, 30)), kind)
    for call, name in ((lambda: tsig.sosfilt(as_kind(bad, kind), x), "sosfilt"),
                       (lambda: tsig.sosfiltfilt(as_kind(bad, kind), x), "sosfiltfilt"),
                       (lambda: tsig.sosfilt(as_kind(bad, kind), x, zi=np.zeros((2, 2, 2))), "sosfilt"),
                       (lambda: tsig.sosfilt(as_kind(bad, kind), x, zi=np.zeros((9, 9))), "sosfilt")):  # before zi
        with pytest.raises(tensorffi.errors.InvalidArgumentError) as info:
            call()
        msg = str(info.value)
        assert msg.startswith(f"{name}(): sos[:, 3] should be all ones")
        assert "sos[1, 3] = 1.0003" in msg and "SOSFilter" in msg and "sos / sos[:, 3:4]" in msg
        assert info.value.function == name
    # the training scenario of the issue: a0 as a parameter, moved by SGD
    p = torch.nn.Parameter(torch.from_numpy(sos.copy()))
    (tsig.sosfilt(p, torch.randn(2, 30, dtype=torch.float64)) ** 2).sum().backward()
    assert p.grad[:, 3].abs().sum() > 0  # the gradient of a0 is defined...
    with torch.no_grad():
        p -= 1e-4 * p.grad
    with pytest.raises(tensorffi.errors.InvalidArgumentError, match=r"sosfilt\(\): .* sos\[[01], 3\] = "):
        tsig.sosfilt(p, torch.randn(2, 30, dtype=torch.float64))  # ... and moving it is refused, with a remedy


def test_padtype_constants_match_the_header():
    assert tsig.PADTYPES == {None: lib.TF_SIGNAL_PAD_NONE, "odd": lib.TF_SIGNAL_PAD_ODD,
                             "even": lib.TF_SIGNAL_PAD_EVEN, "constant": lib.TF_SIGNAL_PAD_CONSTANT}


# --------------------------------------------------------------------------- #
# sosfilt_zi and sosfiltfilt                                                   #
# --------------------------------------------------------------------------- #


def test_sosfilt_zi_matches_scipy(rng):
    for _ in range(10):
        sos = random_sos(rng)
        assert_array_equal(tsig.sosfilt_zi(sos), ss.sosfilt_zi(sos))
        z32 = tsig.sosfilt_zi(sos.astype(np.float32))
        assert z32.dtype == np.float32
        zt = tsig.sosfilt_zi(torch.from_numpy(sos))
        assert isinstance(zt, torch.Tensor) and zt.dtype == torch.float64
    odd = np.array([[1, 2, 1, 2, 1, 0.5]])  # a0 != 1: normalised, as lfilter_zi
    assert_allclose(tsig.sosfilt_zi(odd), ss.sosfilt_zi(odd), rtol=1e-12)
    assert tsig.sosfilt_zi(np.array([[1, 1, 0, 1, 0, 0]])).dtype == np.float64


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sosfiltfilt_matches_scipy(kind, dtype, rng):
    for padtype in ("odd", "even", "constant", None):
        sos = random_sos(rng)
        shape, axis = random_shape(rng, int(rng.integers(200, 800)))
        x = rng.standard_normal(shape).astype(dtype)
        for padlen in (None, 0, 1, 17):
            y = tsig.sosfiltfilt(sos, as_kind(x, kind), axis=axis, padtype=padtype, padlen=padlen, dtype=dtype)
            ref = ss.sosfiltfilt(sos, x.astype(np.float64), axis=axis, padtype=padtype, padlen=padlen)
            assert to_numpy(y).dtype == dtype and y.shape == x.shape
            tol = 1e-12 if dtype == np.float64 else 1e-5
            assert rel_err(y, ref) <= tol, (padtype, padlen, sos.shape)
            if dtype == np.float64:
                assert_array_equal(to_numpy(y), ref)
    # a negative padlen means no extension (SciPy)
    x = rng.standard_normal(100)
    assert rel_err(tsig.sosfiltfilt(sos, x, padlen=-3), ss.sosfiltfilt(sos, x, padlen=-3)) <= 1e-11
    # padlen = n - 1 is the longest allowed
    assert rel_err(tsig.sosfiltfilt(sos, x, padlen=99), ss.sosfiltfilt(sos, x, padlen=99)) <= 1e-10


# --------------------------------------------------------------------------- #
# gradients                                                                    #
# --------------------------------------------------------------------------- #


def _stable_sos(rng, n_sections: int) -> torch.Tensor:
    return torch.from_numpy(ss.butter(2 * n_sections, float(rng.uniform(0.15, 0.6)), output="sos"))


def test_gradcheck_x_sos_zi(rng):
    for shape, axis, nsec in (((2, 30), -1, 2), ((30,), 0, 3), ((3, 25, 2), 1, 1), ((1, 40), -1, 4)):
        sos = _stable_sos(rng, nsec)
        x = torch.from_numpy(rng.standard_normal(shape)).requires_grad_()
        zshape = list(shape)
        zshape[axis] = 2
        # small states: large outputs would make gradcheck's finite differences inexact
        zi = torch.from_numpy(1e-3 * rng.standard_normal([nsec] + zshape)).requires_grad_()
        b = sos[:, :3].clone().requires_grad_()
        a = sos[:, 4:].clone().requires_grad_()
        ones = torch.ones(nsec, 1, dtype=torch.float64)

        def f(x, zi, b, a):
            y, zf = tsig.sosfilt(torch.cat([b, ones, a], 1), x, axis=axis, zi=zi)
            return y, zf

        assert torch.autograd.gradcheck(f, (x, zi, b, a), eps=1e-6, atol=1e-6, rtol=1e-5)
        # without zi, through y only
        assert torch.autograd.gradcheck(lambda x, b, a: tsig.sosfilt(torch.cat([b, ones, a], 1), x, axis=axis),
                                        (x, b, a), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_gradient_of_a0_is_the_normalised_filter_gradient(rng):
    sos = _stable_sos(rng, 2)
    x = torch.from_numpy(rng.standard_normal((2, 40)))
    w = torch.from_numpy(rng.standard_normal((2, 40)))
    s = sos.clone().requires_grad_()
    (tsig.sosfilt(s, x) * w).sum().backward()

    def loss(sos_np: np.ndarray) -> float:  # the a0-normalised filter, in SciPy
        normed = sos_np / sos_np[:, 3:4]
        return float((ss.sosfilt(normed, x.numpy()) * w.numpy()).sum())

    for sec in range(2):
        for col in range(6):
            e = np.zeros((2, 6))
            e[sec, col] = 1e-6
            fd = (loss(sos.numpy() + e) - loss(sos.numpy() - e)) / 2e-6
            assert abs(s.grad[sec, col].item() - fd) <= 1e-5 * max(1.0, abs(fd))


def test_gradients_float32_match_float64(rng):
    sos = torch.from_numpy(ss.butter(8, 0.25, output="sos"))
    x64 = torch.from_numpy(rng.standard_normal((20, 3000)))
    gy = torch.from_numpy(rng.standard_normal((20, 3000)))
    grads = {}
    for dt in (torch.float64, torch.float32):
        s = sos.to(dt).detach().clone().requires_grad_()
        x = x64.to(dt).detach().clone().requires_grad_()
        zi = torch.zeros(4, 20, 2, dtype=dt, requires_grad=True)
        y, zf = tsig.sosfilt(s, x, zi=zi)
        (y * gy.to(dt)).sum().backward()
        grads[dt] = (s.grad.clone(), x.grad.double(), zi.grad.double())
    for g64, g32 in zip(grads[torch.float64], grads[torch.float32]):
        assert rel_err(g32, g64.double().numpy()) <= 1e-4


def test_backward_many_channels_and_long_signals(rng):
    # many reduction chunks (more than 1024 groups) and several checkpoint segments
    sos = torch.from_numpy(ss.butter(4, 0.3, output="sos"))
    for shape in ((5000, 12), (3, 70000)):
        x = torch.from_numpy(rng.standard_normal(shape)).requires_grad_()
        s = sos.clone().requires_grad_()
        y = tsig.sosfilt(s, x)
        gy = torch.from_numpy(rng.standard_normal(shape))
        (y * gy).sum().backward()
        # dL/dx is the time-reversed filter applied to gy (an LTI filter's adjoint)
        ref_gx = ss.sosfilt(sos.numpy(), gy.numpy()[..., ::-1])[..., ::-1]
        assert rel_err(x.grad, ref_gx) <= 1e-10
        assert torch.isfinite(s.grad).all()
        g_threads = []
        for t in (1, 3):
            s3 = sos.clone().requires_grad_()
            (tsig.sosfilt(s3, x.detach(), threads=t) * gy).sum().backward()
            g_threads.append(s3.grad)
        assert torch.equal(g_threads[0], g_threads[1])  # deterministic sums


def test_one_implementation_for_both_kinds(rng):
    # the implementation the public functions and the operators share, on arrays and tensors
    sos = ss.butter(6, 0.3, output="sos")
    for kind in ("numpy", "torch"):
        x3 = as_kind(rng.standard_normal((2, 100, 3)), kind)
        zi3 = as_kind(rng.standard_normal((3, 2, 2, 3)), kind)
        s = as_kind(sos, kind)
        y3, zf3 = tsig._sosfilt(s, x3, 1, zi3, 1)
        ry, rzf = ss.sosfilt(sos, to_numpy(x3), axis=1, zi=to_numpy(zi3))
        assert type(y3) is type(x3) and type(zf3) is type(x3)
        assert_array_equal(to_numpy(y3), ry)
        assert_array_equal(to_numpy(zf3), rzf)
        y2, zf2 = tsig._sosfilt(s, x3[:, :, 0].T.copy() if kind == "numpy" else x3[:, :, 0].T.contiguous(), -1,
                                None, 1)  # the 2-D last-axis case (one bridge call)
        ry2, rzf2 = ss.sosfilt(sos, to_numpy(x3)[:, :, 0].T, zi=np.zeros((3, 100, 2)))
        assert_array_equal(to_numpy(y2), ry2)
        assert_array_equal(to_numpy(zf2), rzf2)
        gsos, gx3, gzi3 = tsig._sosfilt_backward(s, x3, 1, zi3, as_kind(np.ones((2, 100, 3)), kind),
                                                 as_kind(np.zeros((3, 2, 2, 3)), kind), 1)
        assert gsos.shape == (3, 6) and to_numpy(gsos).dtype == np.float64
        assert type(gx3) is type(x3) and gx3.shape == x3.shape and gzi3.shape == zi3.shape
        yy = tsig._sosfiltfilt(s, x3, 1, "odd", 9, 1)
        assert type(yy) is type(x3)
        assert_array_equal(to_numpy(yy), ss.sosfiltfilt(sos, to_numpy(x3), axis=1, padlen=9))


def test_sosfiltfilt_gradcheck(rng):
    sos = _stable_sos(rng, 2)
    for padtype in ("odd", "even", "constant", None):
        x = torch.from_numpy(rng.standard_normal((2, 40))).requires_grad_()
        b = sos[:, :3].clone().requires_grad_()
        a = sos[:, 4:].clone().requires_grad_()
        ones = torch.ones(2, 1, dtype=torch.float64)
        f = lambda x, b, a: tsig.sosfiltfilt(torch.cat([b, ones, a], 1), x, padtype=padtype, padlen=9)  # noqa: E731
        assert torch.autograd.gradcheck(f, (x, b, a), eps=1e-6, atol=1e-6, rtol=1e-5)
        with torch.no_grad():
            assert rel_err(f(x, b, a), ss.sosfiltfilt(sos.numpy(), x.numpy(), padtype=padtype, padlen=9)) <= 1e-11


def test_sosfiltfilt_autograd_forward_matches_kernel(rng):
    sos = random_sos(rng, order=6)
    x = torch.from_numpy(rng.standard_normal((4, 500)))
    y_kernel = tsig.sosfiltfilt(sos, x)
    y_grad = tsig.sosfiltfilt(sos, x.clone().requires_grad_())
    # the autograd forward rounds in another order; seed 1257560967 drew a design (pole
    # radius 0.9946) where one rounding of the input moves SciPy's result by 2e-11
    floor = rounding_floor(rng, sos, x.numpy(), y_kernel.numpy(), 2.0**-52)
    assert rel_err(y_grad.detach(), y_kernel.numpy()) <= 1e-11 + 10 * floor


# --------------------------------------------------------------------------- #
# SciPy's own test cases (scipy/signal/tests/test_signaltools.py)              #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("dt", ["float32", "float64"])
class TestScipySOSFilt:
    def test_rank1(self, dt):
        x = np.linspace(0, 5, 6).astype(dt)
        b = np.array([1, -1]).astype(dt)
        a = np.array([0.5, -0.5]).astype(dt)
        y_r = np.array([0, 2, 4, 6, 8, 10.0]).astype(dt)
        assert_array_almost_equal(tsig.sosfilt(ss.tf2sos(b, a), x), y_r)
        b = np.array([1, 1]).astype(dt)
        a = np.array([1, 0]).astype(dt)
        y_r = np.array([0, 1, 3, 5, 7, 9.0]).astype(dt)
        assert_array_almost_equal(tsig.sosfilt(ss.tf2sos(b, a), x), y_r)
        sos = np.concatenate((np.array([1.0, 1, 0]), np.array([1.0, 0, 0]))).reshape(1, 6)
        assert_allclose(tsig.sosfilt(sos, np.ones(8)), [1.0, 2, 2, 2, 2, 2, 2, 2])

    def test_rank2(self, dt):
        x = np.linspace(0, 11, 12).astype(dt).reshape(4, 3)
        b = np.array([1, -1]).astype(dt)
        a = np.array([0.5, 0.5]).astype(dt)
        y_r2_a0 = np.array([[0, 2, 4], [6, 4, 2], [0, 2, 4], [6, 4, 2]], dtype=dt)
        y_r2_a1 = np.array([[0, 2, 0], [6, -4, 6], [12, -10, 12], [18, -16, 18]], dtype=dt)
        assert_array_almost_equal(y_r2_a0, tsig.sosfilt(ss.tf2sos(b, a), x, axis=0))
        assert_array_almost_equal(y_r2_a1, tsig.sosfilt(ss.tf2sos(b, a), x, axis=1))

    def test_rank3(self, dt):
        x = np.linspace(0, 23, 24).reshape(4, 3, 2)
        b = np.array([1, -1]).astype(dt)
        a = np.array([0.5, 0.5]).astype(dt)
        y = tsig.sosfilt(ss.tf2sos(b, a), x)
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                assert_array_almost_equal(y[i, j], ss.lfilter(b, a, x[i, j]))

    @staticmethod
    def _get_ab_sos():
        b1, a1 = ss.butter(2, 0.25, "low")
        b2, a2 = ss.butter(2, 0.75, "low")
        b3, a3 = ss.butter(2, 0.75, "low")
        b = np.convolve(np.convolve(b1, b2), b3)
        a = np.convolve(np.convolve(a1, a2), a3)
        sos = np.array((np.r_[b1, a1], np.r_[b2, a2], np.r_[b3, a3]))
        return a, b, sos

    def test_initial_conditions(self, dt):
        a, b, sos = self._get_ab_sos()
        x = np.random.rand(50).astype(dt)
        y_true, zi = ss.lfilter(b, a, x[:20], zi=np.zeros(6))
        y_true = np.r_[y_true, ss.lfilter(b, a, x[20:], zi=zi)[0]]
        y_sos, zi = tsig.sosfilt(sos, x[:20], zi=np.zeros((3, 2)))
        y_sos = np.r_[y_sos, tsig.sosfilt(sos, x[20:], zi=zi)[0]]
        assert_allclose(y_true, y_sos, rtol=1e-5 if dt == "float32" else 1e-7)
        zi = tsig.sosfilt_zi(sos)
        y, zf = tsig.sosfilt(sos, np.ones(8, dtype=dt), zi=zi)
        assert_allclose(y, np.ones(8), rtol=1e-6)
        assert_allclose(zf, zi, rtol=1e-6)

    def test_initial_conditions_2(self, dt):
        x = np.ones(8, dtype=dt)
        _, _, sos = self._get_ab_sos()
        zi = tsig.sosfilt_zi(sos)
        x = x.reshape((1, 1) + x.shape)
        with pytest.raises(ValueError, match=r"zi'? must have shape \(3, 1, 1, 2\), got \(3, 2\)"):
            tsig.sosfilt(sos, x, zi=zi)
        zi_nd = zi.copy().reshape((zi.shape[0], 1, 1, zi.shape[-1]))
        with pytest.raises(ValueError, match=r"zi'? must have shape \(3, 1, 1, 2\), got \(3, 1, 1, 3\)"):
            tsig.sosfilt(sos, x, zi=zi_nd[:, :, :, [0, 1, 1]])
        y, zf = tsig.sosfilt(sos, x, zi=zi_nd)
        assert_allclose(y[0, 0], np.ones(8), rtol=1e-6)
        assert_allclose(zf[:, 0, 0, :], zi, rtol=1e-6)

    def test_initial_conditions_3d_axis1(self, dt):
        x = np.random.RandomState(159).randint(0, 5, size=(2, 15, 3)).astype(dt)
        zpk = ss.butter(6, 0.35, output="zpk")
        sos = ss.zpk2sos(*zpk)
        nsections = sos.shape[0]
        axis = 1
        shp = list(x.shape)
        shp[axis] = 2
        z0 = np.zeros([nsections] + shp)
        yf, zf = tsig.sosfilt(sos, x, axis=axis, zi=z0)
        y1, z1 = tsig.sosfilt(sos, x[:, :5, :], axis=axis, zi=z0)
        y2, z2 = tsig.sosfilt(sos, x[:, 5:, :], axis=axis, zi=z1)
        y = np.concatenate((y1, y2), axis=axis)
        tol = dict(rtol=1e-10, atol=1e-13) if dt == "float64" else dict(rtol=1e-5, atol=1e-5)
        assert_allclose(y, yf, **tol)
        assert_allclose(z2, zf, **tol)
        zi = tsig.sosfilt_zi(sos).reshape(nsections, 1, 2, 1) * x[:, 0:1, :]
        y = tsig.sosfilt(sos, x, axis=axis, zi=zi)[0]
        b, a = ss.zpk2tf(*zpk)
        zi = ss.lfilter_zi(b, a).reshape(1, -1, 1) * x[:, 0:1, :]
        y_tf = ss.lfilter(b, a, x, axis=axis, zi=zi)[0]
        assert_allclose(y, y_tf, **tol)

    def test_bad_zi_shape(self, dt):
        x = np.empty((3, 15, 3), dtype=dt)
        sos = np.zeros((4, 6))
        zi = np.empty((4, 3, 3, 2))
        with pytest.raises(ValueError, match="should be all ones"):
            tsig.sosfilt(sos, x, zi=zi, axis=1)
        sos[:, 3] = 1.0
        with pytest.raises(ValueError, match="Invalid zi shape"):
            tsig.sosfilt(sos, x, zi=zi, axis=1)

    def test_sosfilt_zi(self, dt):
        sos = ss.butter(6, 0.2, output="sos")
        zi = tsig.sosfilt_zi(sos)
        y, zf = tsig.sosfilt(sos, np.ones(40, dtype=dt), zi=zi)
        rtol = 1e-13 if dt == "float64" else 1e-5
        assert_allclose(zf, zi, rtol=rtol)
        ss_ = np.prod(sos[:, :3].sum(axis=-1) / sos[:, 3:].sum(axis=-1))
        assert_allclose(y, ss_ * np.ones_like(y), rtol=rtol)
        _, zf = tsig.sosfilt(sos, np.ones(40, dtype=dt), zi=zi.tolist())  # zi as array-like
        assert_allclose(zf, zi, rtol=rtol)


class TestScipySOSFiltFilt:
    @staticmethod
    def filtfilt(zpk, x, axis=-1, padtype="odd", padlen=None):
        return tsig.sosfiltfilt(ss.zpk2sos(*zpk), x, axis, padtype, padlen)

    def test_basic(self):
        zpk = ss.tf2zpk([1.0, 2, 3], [1.0, 2, 3])
        out = self.filtfilt(zpk, np.arange(12))
        assert_allclose(out, np.arange(12, dtype=np.float64), atol=5.28e-11)

    def test_sine(self):
        rate = 2000
        t = np.linspace(0, 1.0, rate + 1)
        xlow = np.sin(5 * 2 * np.pi * t)
        xhigh = np.sin(250 * 2 * np.pi * t)
        x = xlow + xhigh
        zpk = ss.butter(8, 0.125, output="zpk")
        r = np.abs(zpk[1]).max()
        n = int(np.ceil(np.log(1e-5) / np.log(r)))
        y = self.filtfilt(zpk, x, padlen=n)
        assert np.abs(y - xlow).max() < 1e-4
        x2d = np.vstack([xlow, xlow + xhigh])
        y2d = self.filtfilt(zpk, x2d, padlen=n, axis=1)
        assert y2d.shape == x2d.shape
        assert np.abs(y2d - xlow).max() < 1e-4
        y2dt = self.filtfilt(zpk, x2d.T, padlen=n, axis=0)
        assert_array_equal(y2d, y2dt.T)

    def test_axis(self):
        x = np.arange(10.0 * 11.0 * 12.0).reshape(10, 11, 12)
        zpk = ss.butter(3, 0.125, output="zpk")
        y0 = self.filtfilt(zpk, x, padlen=0, axis=0)
        y1 = self.filtfilt(zpk, np.swapaxes(x, 0, 1), padlen=0, axis=1)
        assert_array_equal(y0, np.swapaxes(y1, 0, 1))
        y2 = self.filtfilt(zpk, np.swapaxes(x, 0, 2), padlen=0, axis=2)
        assert_array_equal(y0, np.swapaxes(y2, 0, 2))

    def test_equivalence(self):
        x = np.random.RandomState(0).randn(1000)
        for order in range(1, 6):
            zpk = ss.butter(order, 0.35, output="zpk")
            b, a = ss.zpk2tf(*zpk)
            sos = ss.zpk2sos(*zpk)
            assert_allclose(ss.filtfilt(b, a, x), tsig.sosfiltfilt(sos, x), atol=1e-12, err_msg=f"order={order}")


# --------------------------------------------------------------------------- #
# demo and long runs                                                           #
# --------------------------------------------------------------------------- #


def test_demo_runs():
    lines: list[str] = []
    _demo.signal(lines.append)
    text = "\n".join(lines)
    assert "sosfiltfilt: SNR" in text and "streaming" in text and "autograd" in text


@pytest.mark.slow
def test_many_random_filters_long_signals(rng):
    for _ in range(200):
        sos = random_sos(rng)  # wider bands reach designs where SciPy's float64 itself is off by 1e-5
        dtype = rng.choice([np.float32, np.float64])
        x = rng.standard_normal((int(rng.integers(1, 40)), int(rng.integers(1000, 50000)))).astype(dtype)
        ref = ss.sosfilt(sos, x.astype(np.float64))
        if dtype == np.float64:
            assert_array_equal(tsig.sosfilt(sos, x), ref)
        else:
            assert rel_err(tsig.sosfilt(sos, x), ref) <= 1e-5


# --------------------------------------------------------------------------- #
# complex signals and coefficients                                             #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_complex_signals_match_scipy(kind, dtype, rng):
    tol = 0 if dtype == np.complex128 else 1e-5
    for complex_sos in (False, True):
        for _ in range(4):
            sos = _complex_sos(rng, int(rng.integers(1, 9))) if complex_sos else random_sos(rng)
            shape, axis = random_shape(rng, int(rng.integers(50, 400)))
            x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
            zshape = list(shape)
            zshape[axis] = 2
            zi = (rng.standard_normal([sos.shape[0]] + zshape) + 1j * rng.standard_normal([sos.shape[0]] + zshape))
            zi = zi.astype(dtype)
            y, zf = tsig.sosfilt(as_kind(sos, kind), as_kind(x, kind), axis=axis, zi=as_kind(zi, kind), dtype=dtype)
            assert type(y) is type(as_kind(x, kind)) and to_numpy(y).dtype == dtype
            ry, rzf = ss.sosfilt(sos, x.astype(np.complex128), axis=axis, zi=zi.astype(np.complex128))
            if tol == 0:
                assert_array_equal(to_numpy(y), ry)  # SciPy's complex operations, in SciPy's order
                assert_array_equal(to_numpy(zf), rzf)
            else:
                assert rel_err(y, ry) <= (1e-4 if complex_sos else tol)
            yy = tsig.sosfiltfilt(as_kind(sos, kind), as_kind(x, kind), axis=axis, padlen=10, dtype=dtype)
            ref = ss.sosfiltfilt(sos, x.astype(np.complex128), axis=axis, padlen=10)
            assert rel_err(yy, ref) <= (1e-12 if tol == 0 else 1e-4)
    # real x with complex sos is complex (SciPy's promotion)
    csos = _complex_sos(rng, 4)
    xr = rng.standard_normal(100)
    assert_array_equal(tsig.sosfilt(csos, xr), ss.sosfilt(csos, xr))
    assert tsig.sosfilt(csos.astype(np.complex64), xr.astype(np.float32)).dtype == np.complex64
    # sosfilt_zi of complex sos: SciPy's
    assert_allclose(tsig.sosfilt_zi(csos), ss.sosfilt_zi(csos), rtol=1e-13, atol=1e-15)
    assert tsig.uses_float32_arithmetic(csos) in (True, False)


def test_complex_autograd_real_sos_and_refusal_for_complex_sos(rng):
    sos = torch.from_numpy(ss.butter(4, 0.3, output="sos"))
    x = torch.from_numpy(rng.standard_normal((2, 40)) + 1j * rng.standard_normal((2, 40))).requires_grad_()
    zi = torch.from_numpy(1e-3 * (rng.standard_normal((2, 2, 2)) + 1j * rng.standard_normal((2, 2, 2))))
    zi.requires_grad_()
    b = sos[:, :3].clone().requires_grad_()
    a = sos[:, 4:].clone().requires_grad_()
    ones = torch.ones(2, 1, dtype=torch.float64)
    # Wirtinger derivatives as torch defines them, checked by finite differences
    assert torch.autograd.gradcheck(lambda x, zi, b, a: tsig.sosfilt(torch.cat([b, ones, a], 1), x, zi=zi),
                                    (x, zi, b, a), eps=1e-6, atol=1e-6, rtol=1e-5)
    csos = torch.from_numpy(_complex_sos(rng, 4))
    with pytest.raises(tensorffi.DTypeError, match="complex filter coefficients"):
        tsig.sosfilt(csos.clone().requires_grad_(), x.detach())
    with pytest.raises(tensorffi.DTypeError, match="complex filter coefficients"):
        tsig.sosfilt(csos, x)
    with torch.no_grad():  # no autograd: fine
        assert_array_equal(tsig.sosfilt(csos, x).numpy(), ss.sosfilt(csos.numpy(), x.detach().numpy()))
