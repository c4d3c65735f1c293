# SPDX-License-Identifier: MIT
"""Shared fixtures: input kinds (torch, NumPy) and a fresh random generator; the
Hypothesis profiles.

Hypothesis (property and fuzz tests) is deterministic by default: profile ``default``
draws from a fixed seed (``TENSORFFI_HYPOTHESIS_SEED``, default 0) and first replays
the failing examples stored in ``tests/hypothesis-db/`` (read-only, in the repository)
and in ``.hypothesis/`` (this checkout's own failures). ``HYPOTHESIS_PROFILE=random``
draws fresh cases on every run (the slow random-seed run, tests/fuzz/).

The ``rng`` fixture gives plain tests fresh random inputs on every run (the seed is
printed on failure); ``TENSORFFI_TEST_SEED=N`` replays one.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase, MultiplexedDatabase, ReadOnlyDatabase

TESTS = Path(__file__).resolve().parent

# Tests never write into the user's real cache of compiled modules (~/.cache/tensorffi):
# unless the run names one, every compile() of the run builds into a private folder,
# removed at the end. Tests that need their own cache still set their own.
if not os.environ.get("TENSORFFI_CACHE_DIR"):
    import atexit
    import shutil
    import tempfile

    _RUN_CACHE = tempfile.mkdtemp(prefix="tensorffi-test-cache-")
    os.environ["TENSORFFI_CACHE_DIR"] = _RUN_CACHE
    atexit.register(shutil.rmtree, _RUN_CACHE, True)
HYPOTHESIS_DB = TESTS / "hypothesis-db"

_database = MultiplexedDatabase(
    DirectoryBasedExampleDatabase(TESTS.parent / ".hypothesis" / "examples"),
    ReadOnlyDatabase(DirectoryBasedExampleDatabase(HYPOTHESIS_DB)),
)
settings.register_profile("default", database=_database, print_blob=True)
settings.register_profile(
    "random", database=_database, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "default")
settings.load_profile(PROFILE)
if PROFILE != "random":
    # What pytest's --hypothesis-seed does (an explicit --hypothesis-seed still wins).
    import hypothesis.core

    hypothesis.core.global_force_seed = int(os.environ.get("TENSORFFI_HYPOTHESIS_SEED", "0"))


def pytest_configure(config: pytest.Config) -> None:
    # A mutation run (tests/mutation/) must test the scratch copy's tensorffi.
    expect = os.environ.get("TENSORFFI_EXPECT_ROOT")
    if expect:
        import tensorffi

        where = Path(tensorffi.__file__).resolve()
        if not where.is_relative_to(Path(expect).resolve()):
            pytest.exit(f"tensorffi imported from {where}, not from {expect}", returncode=3)


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh, randomly seeded generator; the seed is printed on failure."""
    fixed = os.environ.get("TENSORFFI_TEST_SEED")
    seed = int(fixed) if fixed else int(np.random.SeedSequence().entropy % (2**32))
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


def gil_released_between_reports(run, sizes) -> list[int]:
    """Prove that a C call releases the GIL between two of its progress reports,
    without timing anything.

    ``run(size, progress)`` makes one call of work ``size`` reporting to
    ``progress(done, total)``. Python's thread switching is turned off (a huge
    switch interval), so another Python thread can run only where a thread gives
    up the GIL itself. At the first report the callback wakes a helper thread,
    which needs the GIL to record that it ran; every report notes whether it has.
    The helper can have run before a later report of the same call only if the C
    code between the two reports released the GIL. A call that reports once (too
    little work: reports are rate-limited) or whose reports came too close together
    for the helper to be scheduled is repeated with the next, larger ``size``, so
    the test never skips; a call holding the GIL fails at every size.

    Returns what each report saw (0: helper not yet run, 1: run) of the call that
    showed the release.
    """
    import sys
    import threading

    old = sys.getswitchinterval()
    tried: list[tuple[int, list[int]]] = []
    sys.setswitchinterval(1000.0)
    try:
        for size in sizes:
            go = threading.Event()
            ran: list[int] = []
            seen: list[int] = []
            helper = threading.Thread(target=lambda: (go.wait(), ran.append(1)))
            helper.start()

            def progress(done: int, total: int) -> None:
                seen.append(len(ran))
                go.set()

            try:
                run(size, progress)
            finally:
                go.set()
                helper.join()
            tried.append((size, seen))
            if len(seen) >= 2 and seen[0] == 0 and seen[-1] == 1:
                return seen
    finally:
        sys.setswitchinterval(old)
    raise AssertionError(f"no other thread ran between two progress reports: (size, reports) {tried}")


SIMD_LEVELS = ["scalar", "avx2", "avx512"]


def simd_levels() -> list[str]:
    """The SIMD caps this CPU can run (TENSORFFI_SIMD values), lowest first."""
    from tensorffi._lib import lib

    return SIMD_LEVELS[: int(lib.tf_simd_level()) + 1]


def require_simd(module: str, requested: str) -> str:
    """The SIMD level kernel module ``module`` runs at under TENSORFFI_SIMD=requested
    (set it first). Fails if that is above the request (the cap is ignored); skips if
    below (the CPU lacks the level, or the module prefers a lower one here), so a test
    parametrised over levels never passes for a level that did not run."""
    import tensorffi
    from tensorffi._lib import lib

    cpu = tensorffi.info()["simd"]  # the CPU's best level under the cap
    per_module = getattr(lib, f"tf_{module}_simd", None)
    ran = SIMD_LEVELS[int(per_module())] if per_module is not None else cpu
    assert SIMD_LEVELS.index(ran) <= SIMD_LEVELS.index(requested), f"{module} runs {ran}, asked for {requested}"
    if ran != requested:
        pytest.skip(f"CPU lacks {requested}" if cpu != requested else f"{module} prefers {ran} on this CPU")
    return ran


@pytest.fixture(autouse=True)
def _sigint_handler_restored(request):
    """Each test starts with Python's own SIGINT handler (Ctrl-C raises
    KeyboardInterrupt), and one that leaves another behind is named in a warning and
    repaired: the Ctrl-C tests (tests/test_handles.py, tests/test_io*.py) depend on it,
    and one clean-clone CI run found SIGINT no longer Python's after some earlier test
    (a wait loop never interrupted, and `_thread.interrupt_main()` doing nothing)."""
    import signal
    import warnings

    before = signal.getsignal(signal.SIGINT)
    if before is not signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    after = signal.getsignal(signal.SIGINT)
    if after is not signal.default_int_handler:
        warnings.warn(f"{request.node.nodeid} left SIGINT's handler {after!r}; restored", RuntimeWarning)
        signal.signal(signal.SIGINT, signal.default_int_handler)
