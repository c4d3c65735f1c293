# SPDX-License-Identifier: MIT
"""zlib: decompress straight into a preallocated tensor.

    python examples/gallery/zlib_inflate.py     (zlib is on every Linux system)

``uncompress(dest, &destLen, source, sourceLen)`` takes ``void *`` buffers: the
contract's lengths of a ``void *`` count **bytes**, so ``source: [sourceLen]`` on an
array of any dtype passes its byte length, and
``dest: inout [cap]`` accepts a float32 tensor as the 4 * numel bytes it is (written
in place: it must be contiguous and writable, never a hidden copy). ``destLen`` is
an in/out ``unsigned long`` (a one-element uint64 array); its *value* is the one
thing a contract cannot check, so :func:`inflate_into` sets it from the tensor.
``return: status(zError)`` turns a failure into an exception carrying zlib's
own message (``buffer error`` when the tensor is too small, instead of a
truncated result nobody looks at).

In raw ctypes the same is 11 lines (tensorffi's: 10)::

    import ctypes, ctypes.util, numpy as np, zlib
    from ctypes import POINTER, byref, c_int, c_ulong, c_void_p
    z = ctypes.CDLL(ctypes.util.find_library("z"))
    z.uncompress.argtypes = [c_void_p, POINTER(c_ulong), c_void_p, c_ulong]
    z.uncompress.restype = c_int
    x = np.round(np.random.randn(100000).astype(np.float32), 2); data = zlib.compress(x.tobytes())
    dest = np.empty(100000, np.float32)
    n = c_ulong(dest.nbytes)
    rc = z.uncompress(dest.ctypes.data, byref(n), data, len(data))
    if rc != 0: raise RuntimeError(f"uncompress: {rc}")
    assert np.array_equal(dest, x)

but there a ``destLen`` set from ``dest.size`` instead of ``dest.nbytes``, or a
source length counted in elements (1,000 for a 4,000-byte array), is silent: a
quarter of the data is read, or zlib is told the buffer is larger than it is; a
non-contiguous ``dest`` is filled in the wrong order; a failed status is an
integer to remember to check. Here the source's length is its byte count by
construction, ``dest`` is checked for layout and writability, and a failure raises.
"""
from __future__ import annotations

import ctypes.util
import zlib

import numpy as np
import torch

import tensorffi

CDEF = """
int uncompress(void *dest, unsigned long *destLen, const void *source, unsigned long sourceLen);
const char *zError(int err);
"""
CONTRACTS = {"uncompress": "dest: inout [cap]; destLen: inout [1]; source: [sourceLen]; return: status(zError)"}


def library() -> tensorffi.Library:
    return tensorffi.load(ctypes.util.find_library("z") or "libz.so.1", CDEF, CONTRACTS)


def inflate_into(lib: tensorffi.Library, dest: torch.Tensor, data: bytes) -> int:
    """Decompress ``data`` into ``dest`` (any dtype, contiguous); returns the bytes written."""
    n = np.array([dest.numel() * dest.element_size()], dtype=np.uint64)  # the tensor's capacity, in bytes
    lib.uncompress(dest, n, np.frombuffer(data, dtype=np.uint8))
    return int(n[0])


def main(n: int = 100_000) -> None:
    lib = library()
    x = torch.randn(n).round(decimals=2)  # compressible, but not trivially
    data = zlib.compress(x.numpy().tobytes(), 6)
    dest = torch.empty(n, dtype=torch.float32)
    written = inflate_into(lib, dest, data)
    assert written == 4 * n and torch.equal(dest, x)
    assert dest.numpy().tobytes() == zlib.decompress(data)
    try:
        inflate_into(lib, torch.empty(n // 2), data)
    except tensorffi.TensorFFIError as exc:
        refused = f"{type(exc).__name__}: {exc}"
    else:  # pragma: no cover
        raise AssertionError("a too-small destination was accepted")
    print(f"zlib: {len(data)} compressed bytes inflated into a float32 tensor of {n}, equal to Python's zlib; "
          f"too small a tensor: {refused}")


if __name__ == "__main__":
    main()
