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
