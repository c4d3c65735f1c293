# SPDX-License-Identifier: MIT
"""libsamplerate's callback API straight from ``libsamplerate.so.0``: C keeps a Python callback.

    python examples/gallery/samplerate_callback.py    (Debian: apt-get install libsamplerate0-dev)

``src_callback_new(func, converter, channels, &error, cb_data)`` returns a converter
that *keeps* ``func``: every later ``src_callback_read(state, ratio, frames, out)``
calls it back for more input, long after the call that took it returned. The
contract says so in one clause::

    func: callback() until return       # held by the returned converter until it is deleted
    return: handle(src_delete)          # the converter: a Handle, deleted exactly once

and tensorffi then keeps the cffi callback alive for as long as the converter lives
(with ctypes, forgetting to hold a reference to the ``CFUNCTYPE`` object is a
segfault at the first read; here a bare ``callback()`` on a function that gives back
one handle means ``until return`` too). ``src_callback_read`` calls the callback on the
caller's thread, so an exception it raises is raised when that read returns; the
callback returns 0 to C meanwhile (libsamplerate reads that as the end of the input).

The callback's ``float **data`` is an out-pointer: it must point at memory that stays
valid until the next callback call. The feeder below hands C successive blocks of
one :func:`tensorffi.buffer` (memory that cannot move or be freed), and the buffer
lives as long as the feeder, which the converter holds.

The result is checked against libsamplerate's own one-shot ``src_simple`` on the
same input and converter, called through ctypes.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any, Callable

import numpy as np
import torch

import tensorffi

CDEF = """
typedef struct SRC_STATE_tag SRC_STATE;
typedef long (*src_callback_t)(void *cb_data, float **data);
SRC_STATE *src_callback_new(src_callback_t func, int converter_type, int channels, int *error, void *cb_data);
long src_callback_read(SRC_STATE *state, double src_ratio, long frames, float *data);
SRC_STATE *src_delete(SRC_STATE *state);
const char *src_strerror(int error);
"""
CONTRACTS = {
    "src_callback_new": "func: callback() until return; error: out status(src_strerror); cb_data: ?; return: handle(src_delete)",
    "src_callback_read": "data: [frames, channels]; return: count",
}
SRC_SINC_FASTEST = 2


def library() -> tensorffi.Library:
    path = ctypes.util.find_library("samplerate") or "libsamplerate.so.0"
    return tensorffi.load(path, CDEF, CONTRACTS)


def feeder(lib: tensorffi.Library, signal: torch.Tensor, block: int) -> Callable[[Any], int]:
    """A callback handing C ``signal`` (a tensorffi.buffer of shape [frames, channels])
    ``block`` frames at a time; 0 frames once it is used up (the end of the input)."""
    cast = lib.ffi.cast
    at = [0]

    def more(data: Any) -> int:
        start = at[0]
        n = min(block, signal.shape[0] - start)
        if n <= 0:
            return 0
        at[0] = start + n
        # C reads these frames until it calls back again; `signal` outlives that
        data[0] = cast("float *", signal[start].data_ptr())
        return n

    return more


def convert(lib: tensorffi.Library, x: np.ndarray, ratio: float, block: int = 500, chunk: int = 300) -> np.ndarray:
    """Resample ``x`` ([frames, channels] float32) by ``ratio`` through the callback API."""
    frames, channels = x.shape
    signal = tensorffi.buffer((frames, channels), torch.float32)
    signal.copy_(torch.from_numpy(x))
    # a failure (a bad converter) is a NativeError with libsamplerate's own message
    state = lib.src_callback_new(feeder(lib, signal, block), SRC_SINC_FASTEST, channels)
    out = []
    with state:
        while True:
            part = torch.empty(chunk, channels)
            got = lib.src_callback_read(state, ratio, part)
            if got == 0:
                break
            out.append(part[:got].numpy().copy())
    return np.concatenate(out) if out else np.zeros((0, channels), np.float32)


class _SRC_DATA(ctypes.Structure):
    _fields_ = [("data_in", ctypes.POINTER(ctypes.c_float)), ("data_out", ctypes.POINTER(ctypes.c_float)),
                ("input_frames", ctypes.c_long), ("output_frames", ctypes.c_long),
                ("input_frames_used", ctypes.c_long), ("output_frames_gen", ctypes.c_long),
                ("end_of_input", ctypes.c_int), ("src_ratio", ctypes.c_double)]


def reference(x: np.ndarray, ratio: float) -> np.ndarray:
    """libsamplerate's one-shot ``src_simple`` on the same input, through ctypes."""
    so = ctypes.CDLL(ctypes.util.find_library("samplerate") or "libsamplerate.so.0")
    so.src_simple.argtypes = [ctypes.POINTER(_SRC_DATA), ctypes.c_int, ctypes.c_int]
    frames, channels = x.shape
    xin = np.ascontiguousarray(x, np.float32)
    cap = int(frames * ratio) + 64
    yout = np.zeros((cap, channels), np.float32)
    d = _SRC_DATA(xin.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), yout.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                  frames, cap, 0, 0, 1, ratio)
    rc = so.src_simple(ctypes.byref(d), SRC_SINC_FASTEST, channels)
    assert rc == 0, rc
    return yout[: d.output_frames_gen].copy()


def main(frames: int = 4000, channels: int = 2, ratio: float = 1.5, seed: int = 0) -> None:
    lib = library()
    x = np.random.default_rng(seed).standard_normal((frames, channels)).astype(np.float32)
    got = convert(lib, x, ratio)
    want = reference(x, ratio)
    n = min(len(got), len(want))
    assert n > 0.9 * frames * ratio, (len(got), len(want))
    np.testing.assert_allclose(got[:n], want[:n], rtol=1e-4, atol=1e-4)
    err = float(np.max(np.abs(got[:n] - want[:n])))
    print(f"samplerate: {frames} frames x {channels} channels resampled by {ratio} through a Python callback C "
          f"keeps: {len(got)} frames, max difference {err:.1e} against src_simple ({len(want)} frames)")


if __name__ == "__main__":
    main()
