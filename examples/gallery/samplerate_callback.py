# SPDX-License-Identifier: MIT
"""libsamplerate's callback API: C pulls input from a Python function it keeps.

    python examples/gallery/samplerate_callback.py   (Debian: apt-get install libsamplerate0-dev)

``src_callback_new(func, converter, channels, &error, cb_data)`` stores ``func`` in the
converter it returns; every later ``src_callback_read(state, ratio, frames, out)``
calls it, from inside C, whenever it needs more input. The contract says so in one
clause: ``func: callback() until return`` — the callable is held by the Handle the
call returns, for as long as the converter lives (with ctypes, a callback nobody
keeps a reference to is freed and C's next call into it is a segfault).
``error: out status(src_strerror)`` turns a failed construction into a
``NativeError`` with libsamplerate's own message, and the caller passes no error
slot. An exception the callback raises reaches the ``src_callback_read`` call during
which C called it.

The callback receives ``float **data``: it points ``*data`` at the next block and
returns the block's frame count (0: the end). The block must stay alive until the
callback is called again, so :class:`Feeder` keeps the last one.
"""
from __future__ import annotations

import ctypes.util
from typing import Iterable, Iterator

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
    "src_callback_new": "func: callback() until return; error: out status(src_strerror); cb_data: ?; "
                        "return: handle(src_delete)",
    "src_callback_read": "data: out [frames]; return: count",
}
SRC_SINC_FASTEST = 2


def library() -> tensorffi.Library:
    return tensorffi.load(ctypes.util.find_library("samplerate") or "libsamplerate.so.0", CDEF, CONTRACTS)


class Feeder:
    """The input callback: hands C the blocks of ``blocks`` (mono float32 tensors),
    one per call, each kept alive until the next call."""

    def __init__(self, lib: tensorffi.Library, blocks: Iterable[torch.Tensor]) -> None:
        self._ffi = lib.ffi
        self._blocks: Iterator[torch.Tensor] = iter(blocks)
        self._current: torch.Tensor | None = None  # C reads it after we return

    def __call__(self, data) -> int:  # noqa: ANN001 (a cffi float **)
        block = next(self._blocks, None)
        if block is None:
            return 0
        block = block.to(torch.float32).contiguous()
        self._current = block
        data[0] = self._ffi.cast("float *", block.data_ptr())
        return block.numel()


def resample(lib: tensorffi.Library, blocks: Iterable[torch.Tensor], ratio: float, read: int = 1024,
             converter: int = SRC_SINC_FASTEST) -> torch.Tensor:
    """The blocks resampled by ``ratio`` (mono), pulled by C through the callback."""
    out = []
    with lib.src_callback_new(Feeder(lib, blocks), converter, 1) as state:
        while True:
            n, y = lib.src_callback_read(state, ratio, frames=read)
            if n == 0:
                break
            out.append(y[:n])
    return torch.cat(out) if out else torch.empty(0)


def main(seconds: float = 0.5, rate: int = 16000, ratio: float = 1.5) -> None:
    lib = library()
    t = torch.arange(int(seconds * rate)) / rate
    x = torch.sin(2 * np.pi * 440 * t).to(torch.float32)
    y = resample(lib, x.split(256), ratio)
    print(f"{x.numel()} samples at {rate} Hz -> {y.numel()} at {ratio * rate:.0f} Hz "
          f"(peak {float(y.abs().max()):.3f})")


if __name__ == "__main__":
    main()
