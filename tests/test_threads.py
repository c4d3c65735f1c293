# SPDX-License-Identifier: MIT
"""The GIL is released during C calls, and concurrent calls are correct."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

import tensorffi


def test_gil_is_released_during_a_c_call():
    # The C call spins until the flag is set; only another Python thread can set
    # it, and only if the call released the GIL. No timing is asserted: without
    # the release, the C call would time out and raise.
    flag = torch.zeros(1, dtype=torch.int32)
    errors: list[BaseException] = []

    def waiter() -> None:
        try:
            tensorffi.core.raw.tf_core_wait_flag(flag, 20_000)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.05)
    flag[0] = 1  # needs the GIL
    t.join()
    assert errors == []


def test_wait_flag_times_out_with_a_clear_error():
    import pytest

    with pytest.raises(tensorffi.CancelledError, match="not set within 10 ms"):
        tensorffi.core.raw.tf_core_wait_flag(torch.zeros(1, dtype=torch.int32), 10)


def test_concurrent_calls_are_correct(userlib, rng):
    inputs = [rng.standard_normal((50, 40)).astype(np.float32) for _ in range(64)]

    def work(i: int) -> np.ndarray:
        return userlib.scale_into(torch.from_numpy(inputs[i]), float(i)).numpy()

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(len(inputs))))
    for i, r in enumerate(results):
        np.testing.assert_allclose(r, float(i) * inputs[i], rtol=1e-6)


def test_errors_stay_on_their_thread():
    def fail(n: int) -> str:
        try:
            tensorffi.core.raw.tf_core_iota_i64(torch.zeros(1, dtype=torch.int64), -n)
        except tensorffi.errors.InvalidArgumentError as exc:
            return str(exc)
        return ""

    with ThreadPoolExecutor(8) as pool:
        messages = list(pool.map(fail, range(1, 200)))
    for n, msg in zip(range(1, 200), messages):
        assert f"got -{n}" in msg
