# SPDX-License-Identifier: MIT
"""C -> Python callbacks: a signal handler's exception stops the C loop and is re-raised."""
from __future__ import annotations

import os
import signal
import threading

import pytest

import tensorffi


class Interrupted(Exception):
    pass


def test_signal_during_a_callback_loop_stops_c_and_is_reraised():
    # tf_core_count calls back once per step, so the pending signal handler runs at
    # the first bytecode of tf_py_progress, outside CallbackScope.report.
    def handler(signum, frame):
        raise Interrupted

    old = signal.signal(signal.SIGINT, handler)
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(Interrupted):
            tensorffi.core.count(3 * 10**7, 3 * 10**7)  # a minute or more if the signal were dropped
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, old)


def test_keyboard_interrupt_from_progress_is_reraised():
    def progress(done, total):
        if done >= 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as info:
        tensorffi.core.count(10, 10, progress)
    assert type(info.value) is KeyboardInterrupt  # the callback's own, not a C status error
