# SPDX-License-Identifier: MIT
"""The gallery (examples/gallery/): real libraries bound as a user would, each run as
a test against its own reference (numpy.fft.rfft, the samples Python's wave wrote,
Python's zlib, libsamplerate's own src_simple through ctypes), plus the mistakes each
example's text says are refused. A test skips only where its library is not
installed; CI installs them (.ci/run) and sets TENSORFFI_REQUIRE_GALLERY=1, so there a
missing library fails."""
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
def samplerate():
    return example("samplerate_callback", "samplerate", "libsamplerate0-dev")


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


def test_samplerate_example_runs(samplerate, capsys):
    samplerate.main(frames=3001, channels=3, ratio=0.75)
    assert "against src_simple" in capsys.readouterr().out


@pytest.mark.parametrize("ratio", [0.5, 1.25, 2.0])
def test_samplerate_callback_matches_src_simple(samplerate, rng, ratio):
    lib = samplerate.library()
    x = rng.standard_normal((int(rng.integers(200, 3000)), int(rng.integers(1, 4)))).astype(np.float32)
    got = samplerate.convert(lib, x, ratio, block=int(rng.integers(1, 700)), chunk=int(rng.integers(1, 400)))
    want = samplerate.reference(x, ratio)
    n = min(len(got), len(want))
    assert n > 0.9 * len(x) * ratio
    np.testing.assert_allclose(got[:n], want[:n], rtol=1e-4, atol=1e-4)


def test_samplerate_callback_is_kept_by_the_converter(samplerate, rng):
    import gc
    import weakref

    lib = samplerate.library()
    x = rng.standard_normal((800, 1)).astype(np.float32)
    signal = tensorffi.buffer((800, 1))
    signal.copy_(torch.from_numpy(x))
    fn = samplerate.feeder(lib, signal, 64)
    ref = weakref.ref(fn)
    state = lib.src_callback_new(fn, samplerate.SRC_SINC_FASTEST, 1)
    del fn, signal
    gc.collect()
    assert ref() is not None  # the converter holds it
    out = torch.empty(2000, 1)
    got = lib.src_callback_read(state, 1.0, out)
    want = samplerate.reference(x, 1.0)
    np.testing.assert_allclose(out[:got].numpy(), want[:got], rtol=1e-4, atol=1e-4)
    state.close()
    gc.collect()
    assert ref() is None  # deleting the converter let it go


def test_samplerate_callback_mistakes(samplerate, rng):
    lib = samplerate.library()
    calls = []

    def boom(data):
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("no more input today")
        return 0  # the end of the input

    state = lib.src_callback_new(boom, samplerate.SRC_SINC_FASTEST, 2)
    with pytest.raises(KeyError, match="no more input today"):
        lib.src_callback_read(state, 1.5, torch.empty(100, 2))  # C called it during this read
    assert calls  # and the interpreter is still here
    assert lib.src_callback_read(state, 1.5, torch.empty(100, 2)) == 0  # raised once
    with pytest.raises(tensorffi.ShapeError, match="'data'"):
        lib.src_callback_read(state, 1.5, torch.empty(100, 2), frames=200)  # more frames than the tensor holds
    state.close()
    with pytest.raises(tensorffi.HandleClosedError, match="src_callback_read"):
        lib.src_callback_read(state, 1.5, torch.empty(100, 2))
    with pytest.raises(tensorffi.ContractError, match="'src_ratio' .double. is not a function pointer"):
        tensorffi.load("libsamplerate.so.0", samplerate.CDEF, {"src_callback_read": "data: [frames, channels]; "
                       "src_ratio: callback() until return"}).src_callback_read


BARE_CALLBACK = """
import gc, sys, torch, tensorffi
sys.path.insert(0, sys.argv[1])
import samplerate_callback as s
contracts = dict(s.CONTRACTS, src_callback_new="func: callback(); error: out status(src_strerror); cb_data: ?; return: handle(src_delete)")
lib = tensorffi.load("libsamplerate.so.0", s.CDEF, contracts)
sig = tensorffi.buffer((1000, 1))
sig.copy_(torch.randn(1000, 1))
state = lib.src_callback_new(s.feeder(lib, sig, 100), s.SRC_SINC_FASTEST, 1)
gc.collect()
print("read", lib.src_callback_read(state, 1.5, torch.empty(500, 1)))
"""


def test_samplerate_a_bare_callback_on_a_constructor_is_kept(samplerate, tmp_path):
    """Without 'until', a callback given to a function that gives back one handle is
    kept by that handle (C's later call into a freed closure was a SIGSEGV: run in a
    subprocess, so that such a crash fails this test only)."""
    import subprocess
    import sys

    script = tmp_path / "bare.py"
    script.write_text(BARE_CALLBACK)
    root = str(Path(tensorffi.__file__).resolve().parents[1])  # this checkout's tensorffi
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(script), str(GALLERY)], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.split() == ["read", "500"]


def test_samplerate_bad_converter_is_libsamplerates_message(samplerate):
    """'error: out status(src_strerror)': on 36e677b a NULL constructor lost its error code."""
    import ctypes

    lib = samplerate.library()
    ref = ctypes.CDLL(ctypes.util.find_library("samplerate"))
    ref.src_strerror.restype = ctypes.c_char_p
    ref.src_callback_new.restype = ctypes.c_void_p
    code = ctypes.c_int(0)
    cb = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p)(lambda d, p: 0)
    assert ref.src_callback_new(cb, 99, 1, ctypes.byref(code), None) is None and code.value != 0
    want = ref.src_strerror(code.value).decode().rstrip(".")
    with pytest.raises(tensorffi.NativeError, match=rf"src_callback_new\(\) returned no handle: error "
                                                   rf"{code.value} in 'error': {want}") as info:
        lib.src_callback_new(lambda data: 0, 99, 1)
    assert info.value.code == code.value
