# SPDX-License-Identifier: MIT
"""FFTW3 (single precision) straight from ``libfftw3f.so.3``: a plan that keeps its buffers.

    python examples/gallery/fftw_rfft.py        (Debian: apt-get install libfftw3-dev)

FFTW's planner returns a plan that *keeps* the input and output pointers: every
``fftwf_execute(plan)`` reads ``in`` and writes ``out`` long after the call that
took them. The contract says so in one clause per argument::

    in:  keep in [n] until return       # kept until the returned plan is destroyed
    out: keep [n/2 + 1] until return    # an r2c transform has n/2 + 1 complex outputs
    return: handle(fftwf_destroy_plan)  # the plan: a Handle, destroyed exactly once

and tensorffi then holds both buffers for as long as the plan lives, in memory that
cannot move (``tensorffi.buffer``), checks ``out`` against ``n/2 + 1`` and its dtype
(``fftwf_complex`` is ``float[2]``: complex64), and ``fftwf_execute``'s
``p: acquire`` checks that no kept tensor was moved and bumps ``out``'s version.

The same task in raw ctypes, 17 lines (tensorffi's, written as tersely, is 17 too:
the declarations and the contract take the lines that argtypes and restype take)::

    import ctypes, ctypes.util, numpy as np
    from ctypes import POINTER, c_float, c_int, c_uint, c_void_p
    f = ctypes.CDLL(ctypes.util.find_library("fftw3f"))
    f.fftwf_plan_dft_r2c_1d.argtypes = [c_int, POINTER(c_float), POINTER(c_float), c_uint]
    f.fftwf_plan_dft_r2c_1d.restype = c_void_p
    f.fftwf_execute.argtypes = [c_void_p]
    f.fftwf_execute.restype = None
    f.fftwf_destroy_plan.argtypes = [c_void_p]
    f.fftwf_destroy_plan.restype = None
    n = 256
    x = np.zeros(n, np.float32); y = np.zeros(n // 2 + 1, np.complex64)
    plan = f.fftwf_plan_dft_r2c_1d(n, x.ctypes.data_as(POINTER(c_float)), y.ctypes.data_as(POINTER(c_float)), 64)
    for sig in np.random.randn(200, n).astype(np.float32):
        x[:] = sig
        f.fftwf_execute(plan)
        assert np.allclose(y, np.fft.rfft(sig), atol=1e-3)
    f.fftwf_destroy_plan(plan)

and there every mistake is silent: an ``out`` of ``n/2`` complex values (or of
``n/2 + 1`` float32 values) lets FFTW write past its end (514 floats in the
issue's case); a plan over an array that is then freed, resized or replaced reads
garbage or writes freed memory; a float64 input is read as float32 noise; a plan
never destroyed leaks, one destroyed twice crashes. Here each is a typed error
naming the argument, before C runs (see tests/test_sdk_contracts.py), and the plan
is destroyed exactly once.
"""
from __future__ import annotations

import ctypes.util

import numpy as np
import torch

import tensorffi

CDEF = """
typedef float fftwf_complex[2];
typedef struct fftwf_plan_s *fftwf_plan;
fftwf_plan fftwf_plan_dft_r2c_1d(int n, float *in, fftwf_complex *out, unsigned flags);
void fftwf_execute(const fftwf_plan p);
void fftwf_destroy_plan(fftwf_plan p);
"""
CONTRACTS = {
    "fftwf_plan_dft_r2c_1d": "in: keep in [n] until return; out: keep [n/2 + 1] until return; "
                             "return: handle(fftwf_destroy_plan)",
    "fftwf_execute": "p: acquire",
}
FFTW_ESTIMATE = 1 << 6  # plan without measuring (FFTW_MEASURE would overwrite the buffers while planning)


def library() -> tensorffi.Library:
    path = ctypes.util.find_library("fftw3f") or "libfftw3f.so.3"
    return tensorffi.load(path, CDEF, CONTRACTS)


def main(n: int = 256, signals: int = 200) -> None:
    fftw = library()
    x = tensorffi.buffer(n, torch.float32)  # memory C may keep: it cannot move or be freed under the plan
    y = tensorffi.buffer(n // 2 + 1, torch.complex64)
    batch = torch.randn(signals, n)
    spectra = torch.empty(signals, n // 2 + 1, dtype=torch.complex64)
    with fftw.fftwf_plan_dft_r2c_1d(x, y, FFTW_ESTIMATE) as plan:  # created once
        for i in range(signals):  # executed many times
            x.copy_(batch[i])
            fftw.fftwf_execute(plan)
            spectra[i] = y
    # destroyed once, at the end of the with block
    want = np.fft.rfft(batch.double().numpy(), axis=1)
    err = float(np.max(np.abs(spectra.numpy() - want)) / np.max(np.abs(want)))
    assert err < 1e-5, err
    try:
        fftw.fftwf_plan_dft_r2c_1d(x, tensorffi.buffer(n // 2, torch.complex64), FFTW_ESTIMATE)
    except tensorffi.ShapeError as exc:
        refused = str(exc)
    else:  # pragma: no cover
        raise AssertionError("a too-short output was accepted")
    print(f"fftw: {signals} signals of {n} through one plan, relative error {err:.1e} against numpy.fft.rfft; "
          f"too-short output refused: {refused.split(': ', 1)[1]}")


if __name__ == "__main__":
    main()
