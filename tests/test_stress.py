# SPDX-License-Identifier: MIT
"""Stress (slow): many Python threads calling mixed kernels at once give the results
of sequential calls; memory stays flat over 10^5 calls of each kind, error paths
included; a fork after threads have run leaves a working child.

    python -m pytest -q -m slow tests/test_stress.py
"""
from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

import tensorffi
import tensorffi.io as tio
import tensorffi.physics as ph
import tensorffi.signal as tsig

pytestmark = pytest.mark.slow


def _jobs(rng: np.random.Generator) -> list:
    """(name, zero-argument call) pairs over every kernel family and the bridge."""
    import scipy.signal as ss

    jobs = []
    for i in range(6):
        x = rng.standard_normal(int(rng.integers(1000, 70000))).astype(np.float32)
        jobs.append((f"scaled{i}", lambda x=x, i=i: tensorffi.core.scaled(torch.from_numpy(x), 1.5 + i, threads=1 + i % 3)))
        sos = ss.butter(int(rng.integers(2, 9)), float(rng.uniform(0.05, 0.45)), output="sos")
        sig = rng.standard_normal((int(rng.integers(1, 9)), 3000))
        jobs.append((f"sosfilt{i}", lambda s=sos, v=sig, i=i: tsig.sosfilt(s, v, threads=1 + i % 2)))
        pos, vel = rng.standard_normal((2, 40, 3)), rng.standard_normal((2, 40, 3))
        mass = rng.uniform(0.5, 1.5, (2, 40))
        jobs.append((f"nbody{i}", lambda p=pos, v=vel, m=mass, i=i: ph.nbody(p, v, m, dt=1e-3, steps=20, threads=1 + i % 2)[0]))
        text = "\n".join(",".join(f"{v:.17g}" for v in row) for row in rng.standard_normal((500, 6))).encode()
        jobs.append((f"csv{i}", lambda t=text, i=i: tio.read_csv(t, dtype="float64", threads=1 + i % 2)))
    return jobs


def _same(a, b) -> bool:
    a = a.numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    b = b.numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def test_eight_threads_mixed_kernels_equal_sequential(rng):
    jobs = _jobs(rng)
    sequential = {name: fn() for name, fn in jobs}
    order = [jobs[int(i)] for i in rng.integers(0, len(jobs), size=800)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda job: (job[0], job[1]()), order))
    bad = [name for name, r in results if not _same(r, sequential[name])]
    assert not bad, f"{len(bad)} of {len(results)} concurrent results differ from sequential ones: {bad[:5]}"


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _calls(userlib):
    x32 = torch.randn(64)
    x64 = np.random.default_rng(0).standard_normal(64)
    csv = b"1,2,3\n4,5,6\n"
    sos = np.array([[0.2, 0.4, 0.2, 1.0, -0.3, 0.1]])
    pos = np.random.default_rng(1).standard_normal((4, 3))

    def expect(exc, fn):
        def run():
            try:
                fn()
            except exc:
                return
            raise AssertionError("no error")
        return run

    calls = {
        "bridge fast path": lambda: userlib.process_data(x32, 64),
        "bridge contract": lambda: userlib.sum_f64(x64),
        "bridge out array": lambda: userlib.scale_into(x32.reshape(8, 8), 2.0),
        "bridge dtype error": expect(tensorffi.DTypeError, lambda: userlib.process_data(x64, 64)),
        "bridge overflow error": expect(tensorffi.ArgumentOverflowError, lambda: userlib.add_i32(2**40, 1)),
        "native status error": expect(tensorffi.errors.InvalidArgumentError,
                                      lambda: tensorffi.core.raw.tf_core_iota_i64(torch.zeros(1, dtype=torch.int64), -1)),
        "read_csv": lambda: tio.read_csv(csv),
        "read_csv parse error": expect(tensorffi.ParseError, lambda: tio.read_csv(b"1,2\n3,x\n")),
        "sosfilt": lambda: tsig.sosfilt(sos, x64),
        "nbody": lambda: ph.nbody(pos, pos, np.ones(4), dt=1e-3, steps=1),
        "callback error": expect(ZeroDivisionError, lambda: tensorffi.core.count(10, 2, progress=lambda d, t: 1 / 0)),
    }
    assert sorted(calls) == sorted(KINDS)
    return calls


KINDS = ["bridge fast path", "bridge contract", "bridge out array", "bridge dtype error", "bridge overflow error",
         "native status error", "read_csv", "read_csv parse error", "sosfilt", "nbody", "callback error"]


@pytest.mark.parametrize("kind", KINDS)
def test_memory_is_flat_over_many_calls(userlib, kind):
    """10^5 calls: resident memory grows by less than 4 MB over the last 9*10^4 (a
    leak of 50 bytes per call would show)."""
    fn = _calls(userlib)[kind]
    for _ in range(10_000):  # warm up: allocator pools, caches
        fn()
    before = _rss_mb()
    for _ in range(90_000):
        fn()
    grown = _rss_mb() - before
    assert grown < 4.0, f"{kind}: RSS grew {grown:.1f} MB over 9e4 calls"


def test_fork_after_threads_gives_a_working_child(rng):
    """Kernels run on threads, then fork: the child runs threaded kernels too (no lock
    held by a thread that does not exist in the child) and gets the same results."""
    jobs = _jobs(rng)[:8]
    with ThreadPoolExecutor(4) as pool:
        want = {name: r for name, r in pool.map(lambda j: (j[0], j[1]()), jobs)}
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        code = 0
        try:
            with ThreadPoolExecutor(4) as pool:
                got = dict(pool.map(lambda j: (j[0], j[1]()), jobs))
            code = 0 if all(_same(got[n], want[n]) for n in want) else 3
        except BaseException:  # noqa: BLE001
            code = 4
        os._exit(code)
    deadline = time.monotonic() + 120
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung (a lock held across fork?)")
        time.sleep(0.05)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status}"


def test_threads_and_fork_while_another_thread_is_in_c(rng):
    """Fork while another Python thread is inside a long C call: the child must not
    inherit a half-held runtime."""
    pos, vel = rng.standard_normal((2, 1, 300, 3))
    mass = np.ones((1, 300))
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            ph.nbody(pos, vel, mass, dt=1e-4, steps=5, threads=2)

    t = threading.Thread(target=busy)
    t.start()
    try:
        pid = os.fork()
        if pid == 0:
            try:
                p, _ = ph.nbody(pos, vel, mass, dt=1e-4, steps=5, threads=2)
                y = tensorffi.core.scaled(torch.ones(100_000), 2.0, threads=2)
                os._exit(0 if np.isfinite(p).all() and float(y.sum()) == 200_000.0 else 3)
            except BaseException:  # noqa: BLE001
                os._exit(4)
        deadline = time.monotonic() + 120
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail("the forked child hung")
            time.sleep(0.05)
    finally:
        stop.set()
        t.join()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status}"
