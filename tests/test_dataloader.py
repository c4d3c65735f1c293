# SPDX-License-Identifier: MIT
"""Library handles in DataLoader workers (fork and spawn), and fork safety.

A Dataset holding libraries from tensorffi.compile() and tensorffi.load() is
pickled into spawned workers (the handles re-open the library from its path and
declarations; compile() finds its cache) and inherited by forked ones. Our C
creates its threads per call (no pool), so a multi-threaded kernel run before
fork() also runs in the children.
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import shutil
import subprocess

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import tensorffi

CDEF = """
int wsquare(const double *x, const double *w, double *y, int64_t n);
int64_t pid_of_caller(void);
"""
SOURCE = r"""
#include <stdint.h>
#include <unistd.h>
int wsquare(const double *x, const double *w, double *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = w[i] * x[i] * x[i];
    return 0;
}
int64_t pid_of_caller(void) { return (int64_t)getpid(); }
"""
CONTRACTS = {"wsquare": "x: [n]; w: [n]; y: out [n]; return: status"}
BIG = 1 << 18  # large enough for tf_parallel_for to start several threads


def inputs(i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The item's inputs, derived from its index (workers and the test agree)."""
    g = np.random.default_rng(1000 + i)
    return g.standard_normal(16), g.standard_normal(16), g.standard_normal(BIG).astype(np.float32)


class LibraryDataset(Dataset):
    """Holds library handles; every item runs C in the worker."""

    def __init__(self, compiled: tensorffi.Library, loaded: tensorffi.Library | None, n: int) -> None:
        self.compiled = compiled
        self.loaded = loaded
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        x, w, big = (torch.from_numpy(a) for a in inputs(i))
        y = self.compiled.wsquare(x, w)
        z = self.loaded.wsquare(x, w) if self.loaded is not None else y
        s = tensorffi.core.scaled(big, 2.0, threads=4)  # multi-threaded C in the worker
        t = torch.ops.tensorffi.scaled(big[:16], -1.0)  # an operator in the worker
        return i, y, z, s, t, int(self.compiled.pid_of_caller())


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    root = tmp_path_factory.mktemp("dl")
    compiled = tensorffi.compile("dl_wsquare", CDEF, source=SOURCE, contracts=CONTRACTS, cache=root / "cache")
    loaded = None
    if shutil.which("cc"):
        (root / "wsq.c").write_text(SOURCE)
        so = root / "libwsq.so"
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(so), str(root / "wsq.c")], check=True)
        loaded = tensorffi.load(so, CDEF, CONTRACTS)
    return compiled, loaded, root / "cache"


def check_batch(i, y, z, s, t):
    x, w, big = inputs(i)
    np.testing.assert_allclose(y.numpy(), w * x * x, rtol=1e-12)
    np.testing.assert_allclose(z.numpy(), w * x * x, rtol=1e-12)
    np.testing.assert_allclose(s.numpy(), 2.0 * big.astype(np.float64), rtol=1e-6)
    np.testing.assert_allclose(t.numpy(), -big[:16], rtol=1e-6)


def test_handles_pickle_and_reopen(libs):
    compiled, loaded, cache = libs
    before = sorted(os.listdir(cache))
    for lib in (compiled, loaded):
        if lib is None:
            continue
        again = pickle.loads(pickle.dumps(lib))
        x, w = torch.arange(4.0, dtype=torch.float64), torch.full((4,), 2.0, dtype=torch.float64)
        assert again.wsquare(x, w).tolist() == [0.0, 2.0, 8.0, 18.0]
    assert sorted(os.listdir(cache)) == before  # compile() re-opened its cached module


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_workers(libs, method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    compiled, loaded, _ = libs
    # Multi-threaded C before fork(): the children must not inherit a broken pool.
    x = np.random.default_rng(0).standard_normal(BIG).astype(np.float32)
    np.testing.assert_allclose(tensorffi.core.scaled(x, 3.0, threads=4), 3.0 * x.astype(np.float64), rtol=1e-6)
    ds = LibraryDataset(compiled, loaded, 6)
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=method, timeout=120)
    pids = set()
    seen = []
    for i, y, z, s, t, pid in loader:
        check_batch(i, y, z, s, t)
        seen.append(i)
        pids.add(pid)
    assert sorted(seen) == list(range(6))
    assert os.getpid() not in pids and len(pids) >= 1  # the C ran in the workers
