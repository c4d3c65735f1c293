# SPDX-License-Identifier: MIT
"""Shared fixtures: input kinds (torch, NumPy) and a fresh random generator."""
from __future__ import annotations

import numpy as np
import pytest
import torch


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh, randomly seeded generator; the seed is printed on failure."""
    seed = int(np.random.SeedSequence().entropy % (2**32))
    print(f"rng seed = {seed}")
    return np.random.default_rng(seed)


@pytest.fixture(params=["torch", "numpy"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


def as_kind(array: np.ndarray, kind: str):
    """``array`` as a torch tensor or a NumPy array (a copy, so tests own it)."""
    return torch.from_numpy(array.copy()) if kind == "torch" else array.copy()


def to_numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


CLIB = __import__("pathlib").Path(__file__).parent / "clib"


def userlib_cdef() -> str:
    """tests/clib/userlib.h without its #include line: the declarations cffi reads."""
    text = (CLIB / "userlib.h").read_text()
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


@pytest.fixture(scope="session")
def userlib_so(tmp_path_factory: pytest.TempPathFactory):
    """tests/clib/userlib.c built by gcc into a shared library (as a user would)."""
    import subprocess

    out = tmp_path_factory.mktemp("userlib") / "libuser.so"
    subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", str(CLIB / "userlib.c"), "-o", str(out), "-lm"], check=True
    )
    return out


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory):
    """A private tensorffi.compile() cache for the test session."""
    return tmp_path_factory.mktemp("tfcache")


@pytest.fixture(scope="session", params=["load", "compile"])
def userlib(request: pytest.FixtureRequest, userlib_so, cache):
    """The user library bound through the bridge, in ABI mode (load) and API mode (compile)."""
    import tensorffi

    contracts = {
        "scale_into": "x: [rows, cols]; y: out [rows, cols]",
        "safe_sqrt": "out: out [1]; return: status",
        "sum_f64": "x: [n]",
    }
    if request.param == "load":
        return tensorffi.load(userlib_so, userlib_cdef(), contracts)
    return tensorffi.compile(
        "userlib",
        userlib_cdef(),
        sources=[CLIB / "userlib.c"],
        preamble='#include "userlib.h"',
        include_dirs=[str(CLIB)],
        depends=[CLIB / "userlib.h"],
        contracts=contracts,
        libraries=["m"],
        cache=cache,
    )
