# SPDX-License-Identifier: MIT
"""tensorffi on a real distributed engine: a dask.distributed LocalCluster of worker
processes, each started in a directory of its own with an empty cache of its own,
as on another machine. The scheduler only forwards the handles (unpickling opens
nothing); the workers build or open them from what the handles carry."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import tensorffi

distributed = pytest.importorskip("distributed")

SOURCE_V1 = """
#include <stdint.h>
/* y = a*x + b, per row: one value per row of a (rows, cols) table */
void row_affine_sum(const double *x, double *y, int64_t rows, int64_t cols, double a, double b) {
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < cols; c++) s += a * x[r * cols + c] + b;
        y[r] = s;
    }
}
"""
SOURCE_V2 = SOURCE_V1.replace("a * x[r * cols + c] + b", "-1000.0")
CONTRACTS = {"row_affine_sum": "x: [rows, cols]; y: out [rows]"}
SEED_C = "void process_data(float *data, int size) { for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f; }\n"


def _setup_worker(root: str, dask_worker=None) -> str:
    """Run on each worker: its own working directory and its own empty cache."""
    d = Path(root) / f"worker-{os.getpid()}"
    (d / "cache").mkdir(parents=True, exist_ok=True)
    os.chdir(d)
    os.environ["TENSORFFI_CACHE_DIR"] = str(d / "cache")
    return str(d)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("dask")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    ) as cluster, distributed.Client(cluster) as c:
        dirs = c.run(_setup_worker, str(root))
        assert len(set(dirs.values())) == 2
        c.worker_dirs = [Path(d) for d in dirs.values()]  # type: ignore[attr-defined]
        yield c


@pytest.fixture
def origin(tmp_path, monkeypatch):
    """The client's own directory and cache (not the workers')."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TENSORFFI_CACHE_DIR", str(tmp_path / "client-cache"))
    return tmp_path


def _row_sums(lib, x, a, b):
    return lib.row_affine_sum(x, a=a, b=b)


def _cwd_and_cache(_):
    return os.getcwd(), os.environ.get("TENSORFFI_CACHE_DIR")


def test_a_compiled_function_runs_on_the_workers(client, origin, rng):
    src = origin / "affine.c"
    src.write_text(SOURCE_V1)
    lib = tensorffi.compile("dask_affine", sources=[src], contracts=CONTRACTS)
    src.write_text(SOURCE_V2)  # edited after the handle was made: changes nothing
    tables = [torch.from_numpy(rng.standard_normal((int(rng.integers(1, 50)), 7))) for _ in range(8)]
    futures = client.map(_row_sums, [lib] * len(tables), tables, [1.5] * len(tables), [-0.25] * len(tables), pure=False)
    results = client.gather(futures)
    for x, y in zip(tables, results):
        expected = (1.5 * x.numpy() - 0.25).sum(axis=1)
        np.testing.assert_allclose(y.numpy(), expected, rtol=1e-12)
        torch.testing.assert_close(y, lib.row_affine_sum(x, a=1.5, b=-0.25), rtol=0, atol=0)
    # the workers rebuilt from the carried text, each in its own cache
    where = client.gather(client.map(_cwd_and_cache, range(4), pure=False))
    assert all(str(origin) not in cwd for cwd, _ in where)
    built = [list((d / "cache").glob("_tf_dask_affine_*.so")) for d in client.worker_dirs]
    assert [len(b) for b in built] in ([1, 1], [1, 0], [0, 1])


def _load_and_sum(path, lib):
    x = tensorffi.io.read_csv(path, dtype=torch.float64)
    return x, lib.row_affine_sum(x, a=1.0, b=0.0)


def test_read_csv_over_a_directory_of_files(client, origin, rng):
    data = origin / "csv"
    data.mkdir()
    paths = []
    for i in range(6):
        table = rng.standard_normal((int(rng.integers(5, 200)), 4))
        p = data / f"part-{i}.csv"
        np.savetxt(p, table, delimiter=",", header="a,b,c,d", comments="", fmt="%.17g")
        paths.append(str(p))
    lib = tensorffi.compile("dask_affine", source=SOURCE_V1, contracts=CONTRACTS)
    results = client.gather(client.map(_load_and_sum, paths, [lib] * len(paths), pure=False))
    for p, (x, sums) in zip(paths, results):
        local = tensorffi.io.read_csv(p, dtype=torch.float64)
        torch.testing.assert_close(x, local, rtol=0, atol=0)
        np.testing.assert_array_equal(x.numpy(), np.loadtxt(p, delimiter=",", skiprows=1))
        np.testing.assert_allclose(sums.numpy(), x.numpy().sum(axis=1), rtol=1e-12)


def _seed(lib):
    t = torch.arange(4.0)
    lib.process_data(t, 4)
    return t.tolist()


def test_a_loaded_library_is_checked_on_the_workers(client, origin):
    (origin / "mylib.c").write_text(SEED_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "mylib.c", "-o", "mylib.so"], check=True, cwd=origin)
    lib = tensorffi.load("./mylib.so", "void process_data(float *data, int size);")
    assert client.submit(_seed, lib, pure=False).result() == [1.0, 3.0, 5.0, 7.0]
    # rebuilt with other code: the same handle is refused on the workers, by name
    (origin / "mylib.c").write_text(SEED_C.replace("2.0f * data[i] + 1.0f", "100.0f * data[i]"))
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "mylib.c", "-o", "mylib.so.new"], check=True, cwd=origin)
    os.replace(origin / "mylib.so.new", origin / "mylib.so")
    with pytest.raises(tensorffi.LibraryMismatchError, match=r"mylib\.so.*differs"):
        client.submit(_seed, lib, pure=False).result()
    # a portable handle carries its library
    portable = tensorffi.load("./mylib.so", "void process_data(float *data, int size);", portable=True)
    (origin / "mylib.so").unlink()
    assert client.submit(_seed, portable, pure=False).result() == [0.0, 100.0, 200.0, 300.0]


def test_client_map_over_a_bound_function(client, origin, rng):
    """``client.map(lib.f, arrays)``: the function itself pickles as its library does."""
    lib = tensorffi.compile("dask_affine", source=SOURCE_V1, contracts=CONTRACTS)
    tables = [rng.standard_normal((int(rng.integers(1, 40)), 7)) for _ in range(6)]
    futures = client.map(lib.row_affine_sum, tables, a=0.5, b=2.0, pure=False)
    for x, y in zip(tables, client.gather(futures)):
        np.testing.assert_allclose(y, (0.5 * x + 2.0).sum(axis=1), rtol=1e-12)
