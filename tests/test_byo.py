# SPDX-License-Identifier: MIT
"""Bring your own C: the seed recipe through load() and compile(), and the build cache."""
from __future__ import annotations

import os
import pickle
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import tensorffi

SEED_CDEF = "void process_data(float *data, int size);"
SEED_C = "void process_data(float *data, int size) { for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f; }\n"


@pytest.fixture(scope="module")
def seed_so(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("seed")
    (d / "mylib.c").write_text(SEED_C)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(d / "mylib.c"), "-o", str(d / "mylib.so")], check=True)
    return d / "mylib.so"


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_seed_recipe_with_load(seed_so, rng, kind):
    ref = rng.standard_normal(1000).astype(np.float32)
    t = torch.from_numpy(ref.copy()) if kind == "torch" else ref.copy()
    lib = tensorffi.load(seed_so, SEED_CDEF)
    lib.process_data(t, t.numel() if kind == "torch" else t.size)
    np.testing.assert_array_equal(np.asarray(t), 2.0 * ref + 1.0)


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_seed_recipe_with_compile(tmp_path, cache, rng, kind):
    (tmp_path / "mylib.c").write_text(SEED_C)
    ref = rng.standard_normal(777).astype(np.float32)
    t = torch.from_numpy(ref.copy()) if kind == "torch" else ref.copy()
    lib = tensorffi.compile("seed", SEED_CDEF, sources=[tmp_path / "mylib.c"], cache=cache)
    lib.process_data(t, 777)
    np.testing.assert_array_equal(np.asarray(t), 2.0 * ref + 1.0)


def test_seed_recipe_with_contract_checks_the_length(seed_so):
    lib = tensorffi.load(seed_so, SEED_CDEF, {"process_data": "data: [size]"})
    t = torch.zeros(5)
    lib.process_data(t)
    assert t.tolist() == [1.0] * 5
    with pytest.raises(tensorffi.ShapeError):
        lib.process_data(t, size=6)  # would write past the end


def test_load_a_system_library_by_soname():
    m = tensorffi.load("libm.so.6", "double cbrt(double x); double ldexp(double x, int e);")
    assert m.cbrt(27.0) == pytest.approx(3.0, rel=1e-15)
    assert m.ldexp(1.5, 10) == 1536.0
    with pytest.raises(tensorffi.ArgumentOverflowError):
        m.ldexp(1.0, 2**40)


def test_load_missing_library_is_a_build_error(tmp_path):
    with pytest.raises(tensorffi.BuildError, match="cannot load"):
        tensorffi.load(tmp_path / "nope.so", SEED_CDEF)


def _modules(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if p.suffix == ".so")


def test_compile_is_cached_and_rebuilds_on_change(tmp_path):
    cache = tmp_path / "cache"
    src = tmp_path / "k.c"
    src.write_text("int k(void) { return 1; }\n")
    assert tensorffi.compile("k", "int k(void);", sources=[src], cache=cache).k() == 1
    first = _modules(cache)
    assert len(first) == 1
    mtime = first[0].stat().st_mtime_ns
    assert tensorffi.compile("k", "int k(void);", sources=[src], cache=cache).k() == 1
    assert _modules(cache) == first and first[0].stat().st_mtime_ns == mtime  # not rebuilt
    src.write_text("int k(void) { return 2; }\n")
    assert tensorffi.compile("k", "int k(void);", sources=[src], cache=cache).k() == 2
    assert len(_modules(cache)) == 2
    assert tensorffi.compile("k", "int k(void);", sources=[src], cache=cache, extra_compile_args=["-O1"]).k() == 2
    assert len(_modules(cache)) == 3  # options are part of the key


def test_concurrent_builds_of_the_same_module_are_safe(tmp_path):
    cache = tmp_path / "cache"
    src = tmp_path / "c.c"
    src.write_text("int c(int x) { return 3 * x; }\n")
    script = textwrap.dedent(
        f"""
        import tensorffi
        lib = tensorffi.compile("conc", "int c(int x);", sources=[{str(src)!r}], cache={str(cache)!r})
        print(lib.c(14))
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    assert [o.strip() for o, _ in outs] == ["42"] * 4
    assert len(_modules(cache)) == 1
    assert not [p for p in cache.iterdir() if p.name.startswith("tmp.")]  # build folders are gone


def test_compiler_errors_are_build_errors_with_output(tmp_path):
    with pytest.raises(tensorffi.BuildError, match="error") as err:
        tensorffi.compile("broken", "int f(void);", source="int f(void) { return undefined_name; }", cache=tmp_path)
    assert "undefined_name" in str(err.value)


def test_cache_writable_by_others_is_refused(tmp_path):
    cache = tmp_path / "shared"
    cache.mkdir()
    cache.chmod(0o777)
    with pytest.raises(tensorffi.BuildError, match="writable by other users"):
        tensorffi.compile("k", "int k(void);", source="int k(void) { return 1; }", cache=cache)


def test_cache_is_created_private(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORFFI_CACHE_DIR", str(tmp_path / "c"))
    path = tensorffi.cache_dir()
    assert path == tmp_path / "c"
    assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0


def test_libraries_pickle_by_reopening(seed_so, tmp_path, cache):
    (tmp_path / "mylib.c").write_text(SEED_C)
    for lib in (
        tensorffi.load(seed_so, SEED_CDEF),
        tensorffi.compile("seed", SEED_CDEF, sources=[tmp_path / "mylib.c"], cache=cache),
    ):
        again = pickle.loads(pickle.dumps(lib))
        t = torch.zeros(3)
        again.process_data(t, 3)
        assert t.tolist() == [1.0, 1.0, 1.0]


def test_unknown_contract_function_is_refused(seed_so):
    with pytest.raises(tensorffi.ContractError, match="not declared"):
        tensorffi.load(seed_so, SEED_CDEF, {"nope": "x: [n]"})
