# SPDX-License-Identifier: MIT
"""Stream frames from a (simulated) vendor SDK into a training loop, without copies.

    python examples/stream_training.py [--frames 2000]

The SDK (examples/simsdk) is the kind of C API a device vendor ships: an opaque
device handle, a ring of buffers the device fills after the call that registered
them has returned, a frame callback from the SDK's own thread, status codes with
error strings. tensorffi binds it with one contract per function (below): the
device is a ``Handle`` closed exactly once, the ring buffers are held while the
device lives (allocated with ``tensorffi.buffer``: memory that cannot be resized
under the device), the callback is a Python function, and ``simsdk_wait`` marks
the buffers as written so autograd sees C's writes.

The ``IterableDataset`` yields each filled buffer itself (a tensor over the memory
the device wrote) and gives it back to the device only when the next frame is
asked for, when the training step has finished with it.
"""
from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import torch

import tensorffi

SDK = Path(__file__).resolve().parent / "simsdk"

CONTRACTS = {
    "simsdk_open": "dev: out handle(simsdk_close); return: status(simsdk_strerror)",
    "simsdk_configure": "return: status(simsdk_strerror)",
    "simsdk_register_buffer": "buf: keep [n] until dev; return: status(simsdk_strerror)",
    "simsdk_set_callback": "fn: callback(frame: [n], error=1) until dev; user: ?; return: status(simsdk_strerror)",
    "simsdk_start": "return: status(simsdk_strerror)",
    "simsdk_stop": "return: status(simsdk_strerror)",
    "simsdk_wait": "slot: out [1]; seq: out [1]; dev: acquire; return: count(simsdk_strerror)",
    "simsdk_requeue": "return: status(simsdk_strerror)",
}


def load_sdk() -> tensorffi.Library:
    header = re.sub(r"/\*.*?\*/", "", (SDK / "simsdk.h").read_text(), flags=re.S)
    cdef = "\n".join(line for line in header.splitlines() if not line.startswith("#"))
    return tensorffi.compile(
        "simsdk", cdef, sources=[SDK / "simsdk.c"], include_dirs=[str(SDK)], preamble='#include "simsdk.h"',
        contracts=CONTRACTS, extra_compile_args=["-O2", "-pthread"],
    )


class DeviceFrames(torch.utils.data.IterableDataset):
    """Frames from one device, as tensors over the device's own buffers."""

    def __init__(self, frames: int, frame_len: int = 256, ring: int = 8) -> None:
        self.frames, self.frame_len, self.ring = frames, frame_len, ring

    def __iter__(self):
        sdk = load_sdk()
        with sdk.simsdk_open("sim0") as dev:
            sdk.simsdk_configure(dev, self.frame_len, 0.0, 7)
            ring = [tensorffi.buffer(self.frame_len) for _ in range(self.ring)]
            for buf in ring:
                sdk.simsdk_register_buffer(dev, buf)
            sdk.simsdk_start(dev)
            given = None
            delivered = 0
            while delivered < self.frames:
                ready, slot, seq = sdk.simsdk_wait(dev, 100)  # short waits: Ctrl-C is seen between them
                if not ready:
                    continue
                if given is not None:
                    sdk.simsdk_requeue(dev, given)  # the previous frame is done with
                given = int(slot[0])
                delivered += 1
                yield int(seq[0]), ring[given]  # no copy: the buffer the device wrote
            sdk.simsdk_stop(dev)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=2000)
    args = ap.parse_args()
    torch.manual_seed(0)
    frame_len = 256
    # Learn the frame's generating rule from its first half: frame[i] = ((131 seq + 7 i + 7) mod 1000) / 1000.
    model = torch.nn.Sequential(torch.nn.Linear(frame_len // 2, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    t0 = time.perf_counter()
    losses = []
    for seq, frame in DeviceFrames(args.frames, frame_len):
        x, y = frame[: frame_len // 2], frame[frame_len // 2 : frame_len // 2 + 1]
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    dt = time.perf_counter() - t0
    first, last = sum(losses[:100]) / 100, sum(losses[-100:]) / 100
    print(f"{len(losses)} frames of {frame_len} floats streamed into training in {dt:.2f} s "
          f"({len(losses) / dt:.0f} frames/s); loss {first:.4f} -> {last:.4f}")


if __name__ == "__main__":
    main()
