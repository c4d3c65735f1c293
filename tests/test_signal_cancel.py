# SPDX-License-Identifier: MIT
"""Ctrl-C and cancellation of long signal calls (tensorffi.signal's ``_cb`` kernels).

Calls of at least ``tensorffi.signal._WATCH_WORK`` run with the runtime's progress
callback; a callback that raises (what Ctrl-C makes it do) stops C at its next poll
and the exception reaches the caller. Proofs without clocks: the one report the
callback saw claims less than the total work, and a real SIGINT's KeyboardInterrupt
is raised over C's TF_EINTERRUPTED error, which says how much of the work was done.
"""
from __future__ import annotations

import signal
import threading

import numpy as np
import pytest
import scipy.signal as ss
import torch

import tensorffi.signal as tsig
from tensorffi._callbacks import CallbackScope


class Stop(Exception):
    pass


def long_sos(rng: np.random.Generator, sections: int = 512) -> np.ndarray:
    """Many random stable sections: long calls on inputs of a few tens of MB. The work
    grows with the sections, not the memory: 512 make a (32, 250,000) float32 call last
    ~180 ms on one AVX-512 thread (Zen 5), well past the first report (20 ms); 64 gave
    11 ms on two threads there, which ended before any report."""
    r = rng.uniform(0.3, 0.8, sections)
    theta = rng.uniform(0.1, 3.0, sections)
    sos = np.zeros((sections, 6))
    sos[:, :3] = rng.uniform(-1, 1, (sections, 3))
    sos[:, 3] = 1.0
    sos[:, 4] = -2 * r * np.cos(theta)
    sos[:, 5] = r * r
    return sos


@pytest.fixture
def stopping(monkeypatch):
    """Every watched call's callback raises Stop at its first report; returns the reports."""
    reports: list[tuple[int, int]] = []

    class StoppingScope(CallbackScope):
        def __init__(self, progress=None, **kwargs):
            super().__init__(self._stop, **kwargs)

        def _stop(self, done: int, total: int) -> None:
            reports.append((done, total))
            raise Stop

    monkeypatch.setattr(tsig, "CallbackScope", StoppingScope)
    return reports


def as_kind(a: np.ndarray, kind: str):
    return torch.from_numpy(a) if kind == "torch" else a


CALLS = {
    "sosfilt": lambda sos, x, th: tsig.sosfilt(sos, x, dtype=x.dtype, threads=th),
    "sosfilt_zi": lambda sos, x, th: tsig.sosfilt(
        sos, x, zi=np.zeros((sos.shape[0], x.shape[0], 2), np.float32), dtype=np.float32, threads=th),
    "sosfilt_axis0": lambda sos, x, th: tsig.sosfilt(sos, x.T, axis=0, dtype=np.float32, threads=th),
    "sosfiltfilt": lambda sos, x, th: tsig.sosfiltfilt(sos, x, dtype=np.float32, threads=th),
    "one_channel": lambda sos, x, th: tsig.sosfilt(sos, x[0] if x.ndim == 2 else x, dtype=np.float32, threads=th),
}


def complex_sos(sos: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A complex cascade (complex kernels): each section's numerator rotated."""
    c = sos.astype(np.complex128)
    c[:, :3] *= np.exp(1j * rng.uniform(0, np.pi, (sos.shape[0], 1)))
    return c


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("call", ["sosfilt", "sosfilt_zi", "sosfilt_axis0", "sosfilt_c64", "sosfiltfilt",
                                  "one_channel"])
def test_a_raising_callback_stops_a_long_call(rng, stopping, kind, threads, call):
    sos = long_sos(rng)
    n = 4_000_000 if call == "one_channel" else 250_000
    x = rng.standard_normal((32 if call != "one_channel" else 1, n)).astype(np.float32)
    if call == "sosfilt_axis0":
        x = np.ascontiguousarray(x.T).T  # x.T is C-contiguous: filtered along axis 0
    if call == "sosfilt_c64":
        fn = lambda: tsig.sosfilt(complex_sos(sos, rng), as_kind(x[:8].astype(np.complex64), kind), threads=threads)
    else:
        fn = lambda: CALLS[call](sos, as_kind(x, kind), threads)
    with pytest.raises(Stop):
        fn()
    assert len(stopping) == 1, stopping  # stopped at the report that raised
    done, total = stopping[0]
    assert 0 < done < total, stopping


def test_the_adjoint_stops(rng, monkeypatch):
    """The backward kernel polls too: stopped at its first report."""
    reports: list[tuple[int, int]] = []

    class StopSecond(CallbackScope):
        calls = 0

        def __init__(self, progress=None, **kwargs):
            StopSecond.calls += 1
            super().__init__(self._stop if StopSecond.calls == 2 else None, **kwargs)

        def _stop(self, done: int, total: int) -> None:
            reports.append((done, total))
            raise Stop

    sos = torch.from_numpy(long_sos(rng, 32)).float()
    # long enough that a report comes before the end even with AVX-512 on two threads
    # (100,000 samples once gave a first report at done == total there)
    x = torch.from_numpy(rng.standard_normal((32, 400_000)).astype(np.float32)).requires_grad_()
    monkeypatch.setattr(tsig, "CallbackScope", StopSecond)
    y = tsig.sosfilt(sos, x)  # scope 1: runs to the end
    with pytest.raises(Stop):
        y.sum().backward()  # scope 2: the adjoint
    assert StopSecond.calls == 2 and len(reports) == 1 and 0 < reports[0][0] < reports[0][1], reports
    assert x.grad is None


def test_after_a_stop_the_next_calls_are_scipys(rng, stopping):
    sos = long_sos(rng)
    with pytest.raises(Stop):
        tsig.sosfilt(sos, rng.standard_normal((16, 200_000)), threads=2)
    stopping.clear()
    # small calls (native path, no callback) and a watched float64 call that is not
    # stopped: bitwise SciPy's
    x = rng.standard_normal((3, 257))
    zi = rng.standard_normal((4, 3, 2))
    y, zf = tsig.sosfilt(sos[:4], x, zi=zi)
    ry, rzf = ss.sosfilt(sos[:4], x, zi=zi)
    assert np.array_equal(y, ry) and np.array_equal(zf, rzf)


def test_a_watched_call_that_is_not_stopped_is_scipys(rng):
    sos = long_sos(rng, 40)
    x = rng.standard_normal((4, 60_000))
    zi = rng.standard_normal((40, 4, 2))
    assert x.size * 40 >= tsig._WATCH_WORK  # the callback path
    y, zf = tsig.sosfilt(sos, torch.from_numpy(x), zi=torch.from_numpy(zi), threads=2)
    ry, rzf = ss.sosfilt(sos, x, zi=zi)
    assert np.array_equal(y.numpy(), ry) and np.array_equal(zf.numpy(), rzf)
    assert np.array_equal(tsig.sosfiltfilt(sos, x, threads=2), ss.sosfiltfilt(sos, x))


def _stopped_fraction(exc: BaseException) -> float:
    """The fraction of the work C had done when the KeyboardInterrupt stopped it: the
    interrupt is re-raised over C's TF_EINTERRUPTED error, which says how far it got
    (a call that ran to its end has no such error)."""
    import re

    import tensorffi.errors as te

    cause = exc.__context__
    assert isinstance(cause, te.CancelledError), repr(cause)
    done, total = map(int, re.search(r"after (\d+) of (\d+) units", str(cause)).groups())
    return done / total


@pytest.mark.parametrize("call, threads", [("sosfilt", 1), ("sosfilt", 2), ("sosfiltfilt", 2)])
def test_sigint_from_another_thread_raises_keyboard_interrupt(rng, monkeypatch, threads, call):
    """A real SIGINT, sent by another thread once C is running (after its first
    progress report, so no clock decides whether it lands in C or before it)."""
    sos = long_sos(rng)
    # ~2 s of work on a fast machine if not stopped; stopped after ~0.2 s
    x = torch.ones((32, 4_000_000), dtype=torch.float32)
    fn = tsig.sosfilt if call == "sosfilt" else tsig.sosfiltfilt
    running, finished = threading.Event(), threading.Event()

    class Watched(CallbackScope):
        def report(self, done: int, total: int) -> int:
            if done < total:
                running.set()
            return super().report(done, total)

    def interrupt() -> None:
        if running.wait(60) and not finished.is_set():
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    monkeypatch.setattr(tsig, "CallbackScope", Watched)
    sender = threading.Thread(target=interrupt, daemon=True)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            fn(sos, x, dtype=torch.float32, threads=threads)
    finally:
        finished.set()
        running.set()
        sender.join()
    assert _stopped_fraction(info.value) < 1  # C was stopped, not waited for
    # the interpreter is healthy and the kernels are too
    xs = rng.standard_normal((2, 300))
    assert np.array_equal(tsig.sosfilt(sos[:3], xs), ss.sosfilt(sos[:3], xs))
