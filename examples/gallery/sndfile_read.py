# SPDX-License-Identifier: MIT
"""libsndfile: read a WAV file into a tensor through a handle.

    python examples/gallery/sndfile_read.py     (Debian: apt-get install libsndfile1-dev)

``sf_open`` returns a ``SNDFILE *`` that later calls use and ``sf_close`` frees:
``return: handle(sf_close)`` makes it a :class:`tensorffi.Handle` (closed exactly
once, by ``with``, ``close()`` or, last, the garbage collector; a closed handle is a
``HandleClosedError``, not a use-after-free). ``SF_INFO`` is an ordinary struct
(``lib.struct("SF_INFO")``) that sf_open fills in. ``sf_read_short(f, ptr, items)``
writes at most ``items`` shorts: ``ptr: [items]`` fills ``items`` in from the
tensor, so C can never write past it, whatever the file says.

The same task in raw ctypes is 19 lines (tensorffi's, as tersely: 16, the
``Structure`` subclass replaced by one C line of the cdef)::

    import ctypes, ctypes.util, numpy as np, wave, sys
    from ctypes import POINTER, Structure, c_char_p, c_int, c_int16, c_int64, c_void_p
    class SF_INFO(Structure):
        _fields_ = [("frames", c_int64), ("samplerate", c_int), ("channels", c_int),
                    ("format", c_int), ("sections", c_int), ("seekable", c_int)]
    sf = ctypes.CDLL(ctypes.util.find_library("sndfile"))
    sf.sf_open.argtypes = [c_char_p, c_int, POINTER(SF_INFO)]
    sf.sf_open.restype = c_void_p
    sf.sf_read_short.argtypes = [c_void_p, POINTER(c_int16), c_int64]
    sf.sf_read_short.restype = c_int64
    sf.sf_close.argtypes = [c_void_p]
    sf.sf_close.restype = c_int
    info = SF_INFO()
    f = sf.sf_open(sys.argv[1].encode(), 0x10, ctypes.byref(info))
    if not f: raise OSError("sf_open failed")
    buf = np.empty(info.frames * info.channels, np.int16)
    got = sf.sf_read_short(f, buf.ctypes.data_as(POINTER(c_int16)), buf.size)
    sf.sf_close(f)
    print(buf[:got].reshape(-1, info.channels).shape)

and its mistakes are silent: an ``items`` larger than the buffer (``frames`` of a
stereo file read into a ``frames``-long buffer by ``sf_readf_short``, say) writes
past it; a float32 buffer read with ``sf_read_short`` holds pairs of shorts;
forgetting ``sf_close`` leaks a file descriptor, calling it twice is a double free,
reading after it a use-after-free. Here ``items`` cannot disagree with the tensor,
the dtype is checked, and the handle closes once (a use after close is a
``HandleClosedError``).
"""
from __future__ import annotations

import ctypes.util
import os
import tempfile
import wave

import numpy as np
import torch

import tensorffi

CDEF = """
typedef int64_t sf_count_t;
typedef struct SNDFILE_tag SNDFILE;
typedef struct SF_INFO { sf_count_t frames; int samplerate; int channels; int format; int sections; int seekable; } SF_INFO;
SNDFILE *sf_open(const char *path, int mode, SF_INFO *sfinfo);
sf_count_t sf_read_short(SNDFILE *sndfile, short *ptr, sf_count_t items);
int sf_close(SNDFILE *sndfile);
"""
CONTRACTS = {
    "sf_open": "return: handle(sf_close)",
    "sf_read_short": "ptr: [items]; return: count",
}
SFM_READ = 0x10


def library() -> tensorffi.Library:
    path = ctypes.util.find_library("sndfile") or "libsndfile.so.1"
    return tensorffi.load(path, CDEF, CONTRACTS)


def read_wav(lib: tensorffi.Library, path: str) -> tuple[torch.Tensor, int]:
    """(samples as int16 [frames, channels], sample rate)."""
    info = lib.struct("SF_INFO")
    with lib.sf_open(path.encode(), SFM_READ, info) as f:
        frames, channels = int(info.frames), int(info.channels)
        samples = torch.empty(frames * channels, dtype=torch.int16)
        got = lib.sf_read_short(f, samples)  # at most samples.numel() items, filled in
    return samples[: got].reshape(-1, channels), int(info.samplerate)


def main(frames: int = 12345, channels: int = 2, rate: int = 22050) -> None:
    lib = library()
    rng = np.random.default_rng()
    written = rng.integers(-32768, 32768, size=(frames, channels), dtype=np.int16)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "noise.wav")
        with wave.open(path, "wb") as w:  # written by Python's own wave module
            w.setnchannels(channels)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes(written.astype("<i2").tobytes())
        samples, got_rate = read_wav(lib, path)
    assert got_rate == rate and samples.shape == (frames, channels)
    assert np.array_equal(samples.numpy(), written)
    print(f"sndfile: {frames} frames x {channels} channels at {rate} Hz read through a handle, equal to the "
          f"samples Python's wave wrote")


if __name__ == "__main__":
    main()
