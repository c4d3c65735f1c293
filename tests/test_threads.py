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


# --------------------------------------------------------------------------- #
# The thread runtime (csrc/runtime.c), through its self-test kernel             #
# --------------------------------------------------------------------------- #

import multiprocessing
import os
import re
import subprocess
import sys

import pytest

from tensorffi._callbacks import CallbackScope
from tensorffi._lib import lib

raw = tensorffi.core.raw


@pytest.fixture(params=["openmp", "own", "auto"])
def pool(request, monkeypatch):
    """Both places a run gets its threads from: the host OpenMP runtime (torch's
    libgomp; TENSORFFI_POOL=openmp), tensorffi's own pool (TENSORFFI_POOL=own), and
    the default choice between them ("auto")."""
    monkeypatch.setenv("TENSORFFI_POOL", request.param)
    return request.param


def parallel_fill(n, units, rounds, threads, progress=None, fail_from=-1, interval_ms=0):
    out = np.zeros(n, dtype=np.int64)
    tids = np.full(units, -1, dtype=np.int32)
    with CallbackScope(progress) as scope:
        scope.call(raw.tf_core_parallel_fill, out, n, units, rounds, threads, tids, fail_from, interval_ms,
                   scope.fn, scope.handle)
    return out, tids


def test_backends_are_as_documented(pool):
    assert lib.tf_runtime_backend(1) == 0
    host = 2 if torch.get_num_threads() >= 2 else 1
    if pool == "auto":  # the host team, unless it was recently found slow (a busy machine)
        assert lib.tf_runtime_backend(2) in (1, host)
    else:
        assert lib.tf_runtime_backend(2) == (1 if pool == "own" else host)
    assert lib.tf_runtime_backend(torch.get_num_threads() + 1) == 1  # more than the host team: own pool


@pytest.mark.parametrize("threads", range(1, 9))
def test_results_with_any_thread_count_equal_the_sequential_result(rng, pool, threads):
    n = int(rng.integers(1, 50_000))
    units = int(rng.integers(1, 40))
    out, tids = parallel_fill(n, units, 3, threads)
    np.testing.assert_array_equal(out, 3 * np.arange(n) + 1)
    assert ((tids >= 0) & (tids < threads)).all()  # every unit ran, on a thread of the run
    x = rng.standard_normal(int(rng.integers(1, 300_000))).astype(np.float32)
    np.testing.assert_array_equal(tensorffi.core.scaled(x, 1.5, threads=threads), x * np.float32(1.5))


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_progress_comes_from_the_calling_thread(pool, threads):
    def run(ids: list) -> None:
        out, _ = parallel_fill(20_000, 32, 20, threads, lambda d, t: ids.append((threading.get_native_id(), d, t)))
        np.testing.assert_array_equal(out, 3 * np.arange(20_000) + 1)

    here: list = []
    run(here)
    assert here and {i for i, _, _ in here} == {threading.get_native_id()}
    assert here[-1][1:] == (32 * 20, 32 * 20)  # done, total: the last report is complete
    elsewhere: list = []
    t = threading.Thread(target=run, args=(elsewhere,))
    t.start()
    t.join()
    assert elsewhere and {i for i, _, _ in elsewhere} == {t.native_id}


@pytest.mark.parametrize("threads", [2, 3, 8])
def test_no_thread_touches_caller_memory_while_the_callback_runs(pool, threads):
    # Every unit rewrites its slice round after round, so the other threads write
    # `out` all the time, except while the callback runs: two snapshots taken in the
    # callback, with Python work in between, must agree. (Runs are repeated until some
    # callbacks came mid-run: on a busy machine the caller may get no unit at all.)
    n = 400_000
    mismatches: list = []
    mid_run = [0]
    for _ in range(50):
        out = np.zeros(n, dtype=np.int64)
        tids = np.zeros(64, dtype=np.int32)

        def progress(done, total):
            first = out.copy()
            sum(range(20_000))  # the other threads would write meanwhile
            second = out.copy()
            if not np.array_equal(first, second):
                mismatches.append(done)
            mid_run[0] += done < total

        with CallbackScope(progress) as scope:
            scope.call(raw.tf_core_parallel_fill, out, n, 64, 40, threads, tids, -1, 0, scope.fn, scope.handle)
        np.testing.assert_array_equal(out, 3 * np.arange(n) + 1)
        if mid_run[0] >= 3:
            break
    assert mismatches == [] and mid_run[0] >= 1


@pytest.mark.parametrize("threads", [1, 2, 8])
def test_after_a_stop_nothing_is_written(pool, threads):
    n = 400_000

    class Stop(Exception):
        pass

    for _ in range(50):
        out = np.zeros(n, dtype=np.int64)
        tids = np.zeros(64, dtype=np.int32)
        seen: list = []

        def progress(done, total):
            if done < total:  # mid-run: stop here
                seen.append(out.copy())
                raise Stop

        try:
            with CallbackScope(progress) as scope:
                scope.call(raw.tf_core_parallel_fill, out, n, 64, 40, threads, tids, -1, 0, scope.fn, scope.handle)
        except Stop:
            break
    assert seen, "no progress report came before the end of the run"
    np.testing.assert_array_equal(out, seen[-1])  # not a byte written after the callback said stop
    assert not np.array_equal(out, 3 * np.arange(n) + 1)  # and the run did stop early


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_a_failing_unit_stops_the_run_and_its_message_reaches_the_caller(pool, threads):
    with pytest.raises(tensorffi.errors.InvalidArgumentError) as info:
        parallel_fill(10_000, 40, 2, threads, fail_from=17)
    unit = int(re.search(r"unit (\d+) failed", str(info.value)).group(1))
    assert unit >= 17
    out, _ = parallel_fill(10_000, 40, 2, threads)  # the thread's error state does not leak into the next run
    np.testing.assert_array_equal(out, 3 * np.arange(10_000) + 1)


def test_two_python_threads_run_kernels_at_once(rng, pool):
    xs = [rng.standard_normal(200_000).astype(np.float32) for _ in range(8)]
    errors: list = []

    def work(i: int) -> None:
        try:
            for _ in range(5):
                out, _ = parallel_fill(50_000 + i, 16, 4, 2 + i % 3)
                np.testing.assert_array_equal(out, 3 * np.arange(50_000 + i) + 1)
                np.testing.assert_array_equal(tensorffi.core.scaled(xs[i], 2.0, threads=3), xs[i] * np.float32(2))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def _child_runs_kernels(conn) -> None:
    try:
        backend = int(lib.tf_runtime_backend(2))
        pool_before = int(lib.tf_runtime_pool_size())
        out, _ = parallel_fill(30_000, 24, 3, 3)
        ok = bool(np.array_equal(out, 3 * np.arange(30_000) + 1))
        x = np.arange(100_000, dtype=np.float32)
        ok = ok and bool(np.array_equal(tensorffi.core.scaled(x, 2.0, threads=2), 2 * x))
        conn.send((backend, pool_before, ok))
    except BaseException as exc:  # noqa: BLE001
        conn.send(repr(exc))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork here")
def test_a_forked_child_runs_kernels_after_the_parent_used_threads(pool):
    # The parent has used both the host OpenMP team and the own pool; the child (one
    # thread) must get working threads, never the parent's vanished ones.
    for p in ("openmp", "own"):
        os.environ["TENSORFFI_POOL"] = p
        parallel_fill(30_000, 24, 3, 3)
        parallel_fill(30_000, 24, 3, 2)
    os.environ["TENSORFFI_POOL"] = pool
    torch.ones(1000).sum()  # torch's OpenMP team too
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child_runs_kernels, args=(child,))
    proc.start()
    got = parent.recv() if parent.poll(120) else "no answer"
    proc.join(30)
    assert got == (1, 0, True)  # own pool (libgomp is not fork-safe), empty at first, right results


# --------------------------------------------------------------------------- #
# Default thread count                                                          #
# --------------------------------------------------------------------------- #


def test_default_follows_torch_and_the_overrides():
    saved = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert tensorffi.get_num_threads() == 1
        torch.set_num_threads(max(saved, 2))
        assert tensorffi.get_num_threads() == min(max(saved, 2), tensorffi.info()["cpu_count"])
        tensorffi.set_num_threads(7)
        assert tensorffi.get_num_threads() == 7
        tensorffi.set_num_threads(None)
    finally:
        torch.set_num_threads(saved)
        tensorffi.set_num_threads(None)


def _threads_in_subprocess(env: dict, code: str = "") -> int:
    script = f"import os, torch, tensorffi\n{code}\nprint(tensorffi.get_num_threads())"
    full = {**os.environ, **env}
    full.pop("TENSORFFI_NUM_THREADS", None) if "TENSORFFI_NUM_THREADS" not in env else None
    res = subprocess.run([sys.executable, "-c", script], env=full, capture_output=True, text=True, check=True)
    return int(res.stdout.strip().splitlines()[-1])


def test_default_follows_omp_num_threads_affinity_and_the_env_override():
    assert _threads_in_subprocess({"OMP_NUM_THREADS": "1"}) == 1  # dask workers set this
    assert _threads_in_subprocess({"OMP_NUM_THREADS": "1", "TENSORFFI_NUM_THREADS": "3"}) == 3
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2:
        one = min(os.sched_getaffinity(0))
        assert _threads_in_subprocess({}, f"os.sched_setaffinity(0, {{{one}}})") == 1


def test_cgroup_quota_is_read_for_v1_and_v2(tmp_path):
    from tensorffi._threads import _cgroup_cpu_limit

    v2 = tmp_path / "v2"
    (v2 / "kubepods" / "pod1").mkdir(parents=True)
    (v2 / "kubepods" / "cpu.max").write_text("400000 100000\n")  # 4 CPUs on the parent
    (v2 / "kubepods" / "pod1" / "cpu.max").write_text("150000 100000\n")  # 1.5 -> 2
    proc = tmp_path / "cgroup_v2"
    proc.write_text("0::/kubepods/pod1\n")
    assert _cgroup_cpu_limit(str(v2), str(proc)) == 2
    (v2 / "kubepods" / "pod1" / "cpu.max").write_text("max 100000\n")
    assert _cgroup_cpu_limit(str(v2), str(proc)) == 4  # the parent's quota still applies
    v1 = tmp_path / "v1"
    (v1 / "cpu,cpuacct" / "docker" / "abc").mkdir(parents=True)
    (v1 / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us").write_text("300000\n")
    (v1 / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_period_us").write_text("100000\n")
    proc1 = tmp_path / "cgroup_v1"
    proc1.write_text("5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n")
    assert _cgroup_cpu_limit(str(v1), str(proc1)) == 3
    (v1 / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us").write_text("-1\n")
    assert _cgroup_cpu_limit(str(v1), str(proc1)) is None
    assert _cgroup_cpu_limit(str(tmp_path / "none"), str(tmp_path / "missing")) is None


class _ThreadsDataset(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int):
        x = np.arange(300_000, dtype=np.float32)
        ok = bool(np.array_equal(tensorffi.core.scaled(x, 2.0), 2 * x))  # default threads
        return tensorffi.get_num_threads(), torch.get_num_threads(), ok


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_workers_do_not_oversubscribe(method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    loader = torch.utils.data.DataLoader(
        _ThreadsDataset(), batch_size=None, num_workers=2, multiprocessing_context=method, timeout=120
    )
    for ours, theirs, ok in loader:
        assert (ours, theirs, ok) == (1, 1, True)  # torch sets one thread per worker; so do we
