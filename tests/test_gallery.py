# SPDX-License-Identifier: MIT
"""The gallery (examples/gallery/): real libraries bound as a user would, each run as
a test against its own reference (numpy.fft.rfft, the samples Python's wave wrote,
Python's zlib), plus the mistakes each example's text says are refused. A test skips
only where its library is not installed; CI installs them (.ci/run) and sets
TENSORFFI_REQUIRE_GALLERY=1, so there a missing library fails."""
from __future__ import annotations

import ctypes.util
import importlib.util
import os
import wave
from pathlib import Path

import numpy as np
import pytest
import torch

import tensorffi

GALLERY = Path(__file__).resolve().parent.parent / "examples" / "gallery"


def example(name: str, lib: str, package: str):
    if ctypes.util.find_library(lib) is None:
        why = f"lib{lib} is not installed (Debian: apt-get install {package})"
        if os.environ.get("TENSORFFI_REQUIRE_GALLERY") == "1":  # CI (.ci/run) installs them
            pytest.fail(why)
        pytest.skip(why)
    spec = importlib.util.spec_from_file_location(f"gallery_{name}", GALLERY / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.fixture(scope="module")
def fftw():
    return example("fftw_rfft", "fftw3f", "libfftw3-dev")


@pytest.fixture(scope="module")
def sndfile():
    return example("sndfile_read", "sndfile", "libsndfile1-dev")


@pytest.fixture(scope="module")
def zl():
    return example("zlib_inflate", "z", "zlib1g")


def test_fftw_example_runs(fftw, capsys):
    fftw.main(n=100, signals=30)
    assert "relative error" in capsys.readouterr().out


def test_fftw_example_mistakes(fftw):
    lib = fftw.library()
    x = tensorffi.buffer(64, torch.float32)
    with pytest.raises(tensorffi.ShapeError, match="'out'"):
        lib.fftwf_plan_dft_r2c_1d(x, tensorffi.buffer(33 * 2, torch.complex64), fftw.FFTW_ESTIMATE)
    with pytest.raises(tensorffi.DTypeError, match="'out'"):
        lib.fftwf_plan_dft_r2c_1d(x, tensorffi.buffer(33, torch.complex128), fftw.FFTW_ESTIMATE)
    plan = lib.fftwf_plan_dft_r2c_1d(x, tensorffi.buffer(33, torch.complex64), fftw.FFTW_ESTIMATE)
    plan.close()
    plan.close()  # destroyed once: a second close does nothing
    with pytest.raises(tensorffi.HandleClosedError):
        lib.fftwf_execute(plan)


def test_sndfile_example_runs(sndfile, capsys):
    sndfile.main(frames=1001, channels=3, rate=8000)
    assert "equal to the samples" in capsys.readouterr().out


def test_sndfile_example_mistakes(sndfile, tmp_path, rng):
    lib = sndfile.library()
    path = str(tmp_path / "a.wav")
    written = rng.integers(-32768, 32768, size=(50, 1), dtype=np.int16)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(written.tobytes())
    info = lib.struct("SF_INFO")
    f = lib.sf_open(path.encode(), sndfile.SFM_READ, info)
    with pytest.raises(tensorffi.DTypeError, match="'ptr'"):
        lib.sf_read_short(f, torch.empty(50))  # float32 where C writes shorts
    part = torch.empty(20, dtype=torch.int16)
    assert lib.sf_read_short(f, part) == 20  # never more than the tensor holds
    assert np.array_equal(part.numpy(), written[:20, 0])
    with pytest.raises(tensorffi.ShapeError, match="'items'"):
        lib.sf_read_short(f, part, 40)  # a length larger than the tensor: refused
    f.close()
    with pytest.raises(tensorffi.HandleClosedError):
        lib.sf_read_short(f, part)
    with pytest.raises(tensorffi.NativeError, match="NULL"):
        lib.sf_open(os.fsencode(tmp_path / "missing.wav"), sndfile.SFM_READ, lib.struct("SF_INFO"))


def test_zlib_example_runs(zl, capsys):
    zl.main(n=5000)
    assert "equal to Python's zlib" in capsys.readouterr().out


def test_zlib_example_mistakes(zl, rng):
    import zlib

    lib = zl.library()
    x = torch.from_numpy(rng.standard_normal(300).astype(np.float32))
    data = zlib.compress(x.numpy().tobytes())
    with pytest.raises(tensorffi.LayoutError, match="'dest'"):
        zl.inflate_into(lib, torch.empty(600)[::2], data)  # written in place: no hidden copy
    with pytest.raises(tensorffi.NativeError, match="buffer error"):
        zl.inflate_into(lib, torch.empty(299), data)
    out = torch.empty(150, dtype=torch.float64)  # any dtype: 1,200 bytes
    assert zl.inflate_into(lib, out, data) == 1200
    assert out.numpy().tobytes() == x.numpy().tobytes()


# --------------------------------------------------------------------------- #
# libsamplerate: a callback C keeps after the call (issue 36)                  #
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
def samplerate():
    return example("samplerate_callback", "samplerate", "libsamplerate0-dev")


def src_simple_reference(x: np.ndarray, ratio: float, converter: int) -> np.ndarray:
    """libsamplerate's own one-shot src_simple, called through ctypes."""
    import ctypes

    class SRC_DATA(ctypes.Structure):
        _fields_ = [("data_in", ctypes.POINTER(ctypes.c_float)), ("data_out", ctypes.POINTER(ctypes.c_float)),
                    ("input_frames", ctypes.c_long), ("output_frames", ctypes.c_long),
                    ("input_frames_used", ctypes.c_long), ("output_frames_gen", ctypes.c_long),
                    ("end_of_input", ctypes.c_int), ("src_ratio", ctypes.c_double)]

    src = ctypes.CDLL(ctypes.util.find_library("samplerate"))
    x = np.ascontiguousarray(x, np.float32)
    y = np.zeros(int(len(x) * ratio) + 64, np.float32)
    fp = ctypes.POINTER(ctypes.c_float)
    d = SRC_DATA(x.ctypes.data_as(fp), y.ctypes.data_as(fp), len(x), len(y), 0, 0, 1, ratio)
    assert src.src_simple(ctypes.byref(d), converter, 1) == 0
    return y[: d.output_frames_gen]


@pytest.mark.parametrize("ratio", [0.5, 1.5])
def test_samplerate_callback_equals_src_simple(samplerate, rng, ratio):
    lib = samplerate.library()
    x = rng.standard_normal(int(rng.integers(3000, 6000))).astype(np.float32)
    blocks = [torch.from_numpy(b) for b in np.array_split(x, int(rng.integers(5, 30)))]
    got = samplerate.resample(lib, blocks, ratio, read=int(rng.integers(100, 900)))
    np.testing.assert_allclose(got.numpy(), src_simple_reference(x, ratio, samplerate.SRC_SINC_FASTEST), atol=1e-6)


def test_samplerate_example_runs(samplerate, capsys):
    samplerate.main(seconds=0.1)
    assert "samples at" in capsys.readouterr().out


def test_samplerate_callback_is_kept_by_the_handle(samplerate, rng):
    """36e677b refused 'until return' for a callback; with ctypes, an unkept one is freed."""
    import gc
    import weakref

    lib = samplerate.library()
    x = rng.standard_normal(2000).astype(np.float32)
    feeder = samplerate.Feeder(lib, [torch.from_numpy(b) for b in np.array_split(x, 8)])
    alive = weakref.ref(feeder)
    state = lib.src_callback_new(feeder, samplerate.SRC_SINC_FASTEST, 1)
    del feeder
    gc.collect()
    assert alive() is not None  # held by the handle, not by the caller
    out = []
    while True:
        n, y = lib.src_callback_read(state, 2.0, frames=700)
        if n == 0:
            break
        out.append(y[:n].clone())
    np.testing.assert_allclose(torch.cat(out).numpy(), src_simple_reference(x, 2.0, samplerate.SRC_SINC_FASTEST),
                               atol=1e-6)
    state.close()
    gc.collect()
    assert alive() is None  # and given up with it
    with pytest.raises(tensorffi.HandleClosedError):
        lib.src_callback_read(state, 2.0, frames=10)


def test_samplerate_callback_exception_reaches_the_read(samplerate):
    lib = samplerate.library()

    calls = []

    def broken(data):
        calls.append(1)
        if len(calls) == 1:
            raise ZeroDivisionError("no more input today")
        return 0  # the end of the input

    with lib.src_callback_new(broken, samplerate.SRC_SINC_FASTEST, 1) as state:
        with pytest.raises(ZeroDivisionError, match="no more input today"):
            lib.src_callback_read(state, 1.5, frames=100)  # raised by the call during which C called it
        n, _ = lib.src_callback_read(state, 1.5, frames=100)  # C got 0 frames (error=0): nothing is pending
        assert n == 0 and len(calls) >= 2


def test_samplerate_bad_converter_is_libsamplerates_message(samplerate):
    lib = samplerate.library()
    with pytest.raises(tensorffi.NativeError, match=r"src_callback_new\(\) returned no handle: error \d+ in "
                                                   r"'error': .*[Cc]onverter"):
        lib.src_callback_new(lambda data: 0, 99, 1)
