# SPDX-License-Identifier: MIT
"""tensorffi on Ray: a local Ray cluster (``ray.init(num_cpus=2)``) whose worker
processes receive tensorffi handles as task arguments, the way a user's Ray job does.

What a Ray user relies on, each checked against NumPy on fresh random inputs:

* a ``compile()`` handle, and a bound function (``lib.f``) itself, passed by value to
  a ``@ray.remote`` task, opens in the worker and gives NumPy's results;
* an ``out`` argument comes back from a task as the array C filled; an in-place call
  on an array from Ray's object store (read-only, mapped zero-copy) is refused with
  tensorffi's ``WritabilityError`` naming the argument — never written through;
* workers that build one cache key at the same moment into one shared cache folder
  all get a working module, and the folder holds that module once;
* an actor keeps a handle, a C ``Handle`` and a ``tensorffi.buffer`` C writes across
  method calls.

Opt-in: marked ``ray`` (``python -m pytest -m ray``; ``.ci/ray`` installs Ray and runs
them). Without Ray the module is skipped, unless ``TENSORFFI_REQUIRE_RAY=1`` (the CI
job) makes a missing Ray a failure. Ray runs with ``RAY_AUTH_MODE=disabled`` (Ray 2.60
otherwise writes a token into ``~/.ray``; HOME is kept, as the workers' Python may need
packages from its user site) and a temporary folder of its own; driver and workers
share one temporary tensorffi cache.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import tensorffi

if os.environ.get("TENSORFFI_REQUIRE_RAY") == "1":
    import ray  # the CI job installed it: a missing Ray fails here instead of skipping
else:
    ray = pytest.importorskip("ray")

pytestmark = pytest.mark.ray

SOURCE = """
#include <stdint.h>
/* y = a*x + b, per row: one value per row of a (rows, cols) table */
void row_affine_sum(const double *x, double *y, int64_t rows, int64_t cols, double a, double b) {
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < cols; c++) s += a * x[r * cols + c] + b;
        y[r] = s;
    }
}
/* in place: x *= a */
void scale(double *x, int64_t n, double a) { for (int64_t i = 0; i < n; i++) x[i] *= a; }
"""
CONTRACTS = {"row_affine_sum": "x: [rows, cols]; y: out [rows]", "scale": "x: [n]"}

METER = r"""
#include <stdint.h>
#include <stdlib.h>
typedef struct meter { double *sums; int64_t n; } meter;
int meter_open(int64_t n, meter **out) {
    meter *m = calloc(1, sizeof *m);
    if (!m) return -1;
    m->n = n;
    *out = m;
    return 0;
}
int meter_attach(meter *m, double *sums, int64_t n) { if (n != m->n) return -2; m->sums = sums; return 0; }
int meter_add(meter *m, const double *x, int64_t n) {
    if (!m->sums || n != m->n) return -2;
    for (int64_t i = 0; i < n; i++) m->sums[i] += x[i];
    return 0;
}
int meter_close(meter *m) { free(m); return 0; }
"""
METER_CONTRACTS = {
    "meter_open": "out: out handle(meter_close); return: status",
    "meter_attach": "sums: keep [n] until m; return: status",
    "meter_add": "x: [n]; m: acquire; return: status",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray cluster of two CPUs; the driver's and the workers' tensorffi cache
    is one fresh folder (the workers inherit the environment at ``ray.init``)."""
    root = tmp_path_factory.mktemp("ray")
    token = Path.home() / ".ray" / "auth_token"
    had_token = token.exists()
    # Ray's sockets live under its temporary folder: a short path (AF_UNIX: 107 bytes)
    ray_tmp = tempfile.mkdtemp(prefix="tfray-")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_AUTH_MODE", "disabled")
        mp.setenv("RAY_TMPDIR", ray_tmp)
        mp.setenv("TENSORFFI_CACHE_DIR", str(root / "cache"))
        ray.init(num_cpus=2, include_dashboard=False, object_store_memory=200 * 2**20, log_to_driver=False)
        try:
            yield SimpleNamespace(root=root, cache=root / "cache")
        finally:
            ray.shutdown()
            shutil.rmtree(ray_tmp, ignore_errors=True)
    assert had_token or not token.exists(), f"Ray wrote {token}"


def _tables(rng, k, cols=7):
    return [rng.standard_normal((int(rng.integers(1, 60)), cols)) for _ in range(k)]


@ray.remote
def _row_sums(lib, x, a, b):
    return os.getpid(), lib.row_affine_sum(x, a=a, b=b)


@ray.remote
def _threads():
    return tensorffi.get_num_threads()


@ray.remote
def _apply(fn, *args, **kwargs):
    return fn(*args, **kwargs)


@ray.remote
def _scale(lib, x, a, copy):
    if copy:
        x = x.copy()
    lib.scale(x, a=a)
    return x


def test_a_compiled_handle_passed_by_value_runs_in_the_workers(cluster, tmp_path, rng):
    src = tmp_path / "affine.c"
    src.write_text(SOURCE)
    lib = tensorffi.compile("ray_affine", sources=[src], contracts=CONTRACTS)
    src.write_text(SOURCE.replace("a * x[r * cols + c] + b", "-1000.0"))  # edited after: changes nothing
    tables = _tables(rng, 8)
    a, b = float(rng.uniform(-2, 2)), float(rng.uniform(-1, 1))
    results = ray.get([_row_sums.remote(lib, x, a, b) for x in tables])
    for x, (_, y) in zip(tables, results):
        np.testing.assert_allclose(y, (a * x + b).sum(axis=1), rtol=1e-12, atol=1e-12)
    assert os.getpid() not in {pid for pid, _ in results}  # ran in Ray's worker processes
    if not {"OMP_NUM_THREADS", "TENSORFFI_NUM_THREADS"} & set(os.environ):
        assert ray.get(_threads.remote()) == 1  # Ray sets OMP_NUM_THREADS=1 (a task's CPU): no oversubscription
    # torch tensors in, torch tensors out
    t = torch.from_numpy(tables[0])
    _, y = ray.get(_row_sums.remote(lib, t, a, b))
    assert isinstance(y, torch.Tensor)
    torch.testing.assert_close(y, lib.row_affine_sum(t, a=a, b=b), rtol=0, atol=0)


def test_a_bound_function_is_a_task_argument(cluster, rng):
    """``lib.f`` pickles as its library does, plus its name. (``ray.remote`` itself
    takes only Python functions and classes, so the bound function is an argument.)"""
    lib = tensorffi.compile("ray_affine", source=SOURCE, contracts=CONTRACTS)
    tables = _tables(rng, 6)
    refs = [_apply.remote(lib.row_affine_sum, x, a=0.5, b=2.0) for x in tables]
    for x, y in zip(tables, ray.get(refs)):
        np.testing.assert_allclose(y, (0.5 * x + 2.0).sum(axis=1), rtol=1e-12, atol=1e-12)


def test_out_arguments_come_back_and_object_store_arrays_are_not_written(cluster, rng):
    lib = tensorffi.compile("ray_affine", source=SOURCE, contracts=CONTRACTS)
    # `y: out [rows]`: allocated by the call in the worker, returned through the object store
    x = rng.standard_normal((int(rng.integers(2000, 4000)), 5))
    x_ref = ray.put(x)  # > 100 KiB: stored in the object store, read-only, mapped zero-copy
    _, y = ray.get(_row_sums.remote(lib, x_ref, 3.0, -1.0))
    assert y.shape == (x.shape[0],)
    np.testing.assert_allclose(y, (3.0 * x - 1.0).sum(axis=1), rtol=1e-12, atol=1e-12)
    # in place on the object store's array: refused before C runs, naming the argument
    v = rng.standard_normal(int(rng.integers(20_000, 40_000)))
    v_ref = ray.put(v)
    with pytest.raises(ray.exceptions.RayTaskError) as info:
        ray.get(_scale.remote(lib, v_ref, 2.0, False))
    assert isinstance(info.value.cause, tensorffi.WritabilityError), repr(info.value.cause)
    assert isinstance(info.value, tensorffi.WritabilityError)  # Ray re-raises it as an instance of its cause too
    assert "scale(): argument 'x'" in str(info.value.cause) and "read-only" in str(info.value.cause)
    np.testing.assert_array_equal(ray.get(v_ref), v)  # the stored array is untouched
    # a writable copy in the worker is the way
    np.testing.assert_allclose(ray.get(_scale.remote(lib, v_ref, 2.0, True)), 2.0 * v, rtol=0, atol=0)


@ray.remote(num_cpus=0.5)  # four at once on two CPUs: four worker processes
def _compile_at_once(cache, ready, count, source, x):
    """Wait until ``count`` worker processes are here, then all compile the same
    source into the same cache folder."""
    Path(ready, str(os.getpid())).touch()
    deadline = time.monotonic() + 120
    while len(os.listdir(ready)) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(os.listdir(ready))} of {count} workers started")
        time.sleep(0.005)
    lib = tensorffi.compile("ray_race", source=source, contracts=CONTRACTS, cache=cache)
    return os.getpid(), lib.row_affine_sum(x, a=1.0, b=0.5)


def test_workers_building_one_cache_key_at_once(cluster, tmp_path, rng):
    cache, ready = tmp_path / "shared-cache", tmp_path / "ready"
    ready.mkdir()
    source = SOURCE + f"/* {rng.integers(2**62)} */\n"  # a key no earlier run built
    tables = _tables(rng, 4)
    results = ray.get([_compile_at_once.remote(str(cache), str(ready), 4, source, x) for x in tables])
    assert len({pid for pid, _ in results}) == 4  # four processes, all past the barrier before building
    for x, (_, y) in zip(tables, results):
        np.testing.assert_allclose(y, (x + 0.5).sum(axis=1), rtol=1e-12, atol=1e-12)
    modules = tensorffi.cache.info(cache)["modules"]
    assert [m["name"] for m in modules] == ["ray_race"], modules
    assert len(list(cache.glob("_tf_ray_race_*.so"))) == 1
    assert not [p for p in cache.iterdir() if p.name.startswith("tmp.")]  # build folders are gone
    # the driver's compile() of the same source finds that module: still one
    lib = tensorffi.compile("ray_race", source=source, contracts=CONTRACTS, cache=cache)
    np.testing.assert_allclose(lib.row_affine_sum(tables[0], a=1.0, b=0.5), results[0][1], rtol=0, atol=0)
    assert len(tensorffi.cache.info(cache)["modules"]) == 1


@ray.remote
class _Meter:
    """An actor holding a compiled handle, a C handle and a buffer C keeps writing."""

    def __init__(self, lib, n):
        self.lib = lib
        self.sums = tensorffi.buffer(n, "float64")
        self.m = lib.meter_open(n)
        lib.meter_attach(self.m, self.sums)

    def add(self, x):
        self.lib.meter_add(self.m, x)
        return os.getpid()

    def total(self):
        return self.sums.clone()

    def close(self):
        self.m.close()


def test_an_actor_keeps_a_handle_and_a_buffer_across_calls(cluster, rng):
    meters = tensorffi.compile("ray_meter", source=METER, contracts=METER_CONTRACTS)
    n = int(rng.integers(1, 50))
    actor = _Meter.remote(meters, n)
    try:
        xs = [rng.standard_normal(n) for _ in range(int(rng.integers(3, 8)))]
        pids = ray.get([actor.add.remote(torch.from_numpy(x)) for x in xs[:2]])
        pids += ray.get([actor.add.remote(x) for x in xs[2:]])  # NumPy from the object store: only read
        assert len(set(pids)) == 1 and os.getpid() not in pids
        total = ray.get(actor.total.remote())
        assert isinstance(total, torch.Tensor) and total.dtype == torch.float64
        np.testing.assert_allclose(total.numpy(), np.sum(xs, axis=0), rtol=1e-12, atol=1e-12)
        # more calls add to the same buffer
        extra = rng.standard_normal(n)
        ray.get(actor.add.remote(extra))
        np.testing.assert_allclose(ray.get(actor.total.remote()).numpy(), np.sum(xs, axis=0) + extra,
                                   rtol=1e-12, atol=1e-12)
        # the C handle closed in one call stays closed in the next
        ray.get(actor.close.remote())
        with pytest.raises(ray.exceptions.RayTaskError) as info:
            ray.get(actor.add.remote(extra))
        assert isinstance(info.value.cause, tensorffi.HandleClosedError), repr(info.value.cause)
    finally:
        ray.kill(actor)
