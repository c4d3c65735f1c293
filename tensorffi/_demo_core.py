# SPDX-License-Identifier: MIT
"""Demo step: the seed recipe — a user's C function, compiled and called on a tensor."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

SEED_C = """
void process_data(float *data, int size) {
    for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f;
}
"""


def _demo(say: Callable[[str], None]) -> None:
    import torch

    import tensorffi

    say("== bring your own C: void process_data(float *data, int size) ==")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "mylib.c"
        src.write_text(SEED_C)
        lib = tensorffi.compile("demo_seed", "void process_data(float *data, int size);", sources=[src])
    t = torch.arange(5, dtype=torch.float32)
    say(f"before: {t.tolist()}")
    lib.process_data(t, t.numel())
    say(f"after lib.process_data(t, t.numel()): {t.tolist()}   (2x+1, in place, zero-copy)")
    bad = torch.arange(5, dtype=torch.float64)
    try:
        lib.process_data(bad, bad.numel())
    except tensorffi.DTypeError as exc:
        say(f"a float64 tensor is refused before C runs: DTypeError: {exc}")
    else:  # pragma: no cover
        raise AssertionError("the bridge accepted a float64 tensor for float *")
    say(f"...and it is untouched: {bad.tolist()}")
