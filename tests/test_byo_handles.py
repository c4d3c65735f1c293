# SPDX-License-Identifier: MIT
"""Library handles carry what defines them: a pickled compile() handle rebuilds from
the text it carries, a load() handle checks the library's hash, and unpickling opens
nothing until the first use. Other processes run in another directory with their own
(empty) cache, as workers on another machine would."""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import tensorffi

V1 = "void process_data(float *data, int size) { for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f; }\n"
V2 = "void process_data(float *data, int size) { for (int i = 0; i < size; i++) data[i] = 100.0f * data[i]; }\n"
CDEF = "void process_data(float *data, int size);"
EXPECTED_V1 = [1.0, 3.0, 5.0, 7.0]
EXPECTED_V2 = [0.0, 100.0, 200.0, 300.0]

WORKER = textwrap.dedent(
    """
    import json, pickle, sys, time
    t0 = time.perf_counter()
    import torch, tensorffi
    with open(sys.argv[1], "rb") as f:
        blob = f.read()
    t1 = time.perf_counter()
    lib = pickle.loads(blob)
    t2 = time.perf_counter()
    out = {"repr": repr(lib), "unpickle_s": t2 - t1}
    try:
        x = torch.arange(4.0)
        lib.process_data(x, 4)
        out["result"] = x.tolist()
    except tensorffi.TensorFFIError as exc:
        out["error"] = type(exc).__name__ + ": " + str(exc)
    out["first_call_s"] = time.perf_counter() - t2
    print(json.dumps(out))
    """
)


def run_elsewhere(tmp_path: Path, handle, env: dict[str, str] | None = None, cache: Path | None = None) -> dict:
    """Unpickle ``handle`` in a fresh process started in another directory with its own cache."""
    where = tmp_path / "elsewhere"
    where.mkdir(exist_ok=True)
    blob = tmp_path / "handle.pkl"
    blob.write_bytes(pickle.dumps(handle))
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    full_env = dict(os.environ, TENSORFFI_CACHE_DIR=str(cache or tmp_path / "worker-cache"), **(env or {}))
    proc = subprocess.run(
        [sys.executable, str(script), str(blob)], cwd=where, env=full_env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _so(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.so")) if cache.exists() else []


@pytest.fixture
def origin_cache(tmp_path, monkeypatch) -> Path:
    """This process's cache, by environment (a handle carries an explicit ``cache=``
    as a hint, which on the same machine would find the module)."""
    monkeypatch.setenv("TENSORFFI_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


# --------------------------------------------------------------------------- #
# compile() handles                                                            #
# --------------------------------------------------------------------------- #


def test_a_compile_handle_rebuilds_from_the_text_it_carries(tmp_path, origin_cache):
    src = tmp_path / "mylib.c"
    src.write_text(V1)
    lib = tensorffi.compile("carried", CDEF, sources=[src])
    blob = pickle.dumps(lib)
    src.write_text(V2)  # edited after pickling
    # another process, another directory, an empty cache: rebuilt from the carried V1
    got = run_elsewhere(tmp_path, pickle.loads(blob))
    assert got["result"] == EXPECTED_V1, got
    assert len(_so(tmp_path / "worker-cache")) == 1
    assert src.read_text() == V2  # the file was not touched
    # here too: the handle is the module it was made from
    again = pickle.loads(blob)
    x = torch.arange(4.0)
    again.process_data(x, 4)
    assert x.tolist() == EXPECTED_V1
    # while compiling the edited file builds the new code
    x = torch.arange(4.0)
    tensorffi.compile("carried", CDEF, sources=[src]).process_data(x, 4)
    assert x.tolist() == EXPECTED_V2


def test_a_compile_handle_carries_the_headers(tmp_path, origin_cache):
    (tmp_path / "k.h").write_text("#define K 2.0f\n")
    src = tmp_path / "k.c"
    src.write_text('#include "k.h"\nvoid process_data(float *d, int n) { for (int i = 0; i < n; i++) d[i] = K * d[i] + 1.0f; }\n')
    lib = tensorffi.compile("carried_h", sources=[src])
    (tmp_path / "k.h").write_text("#define K 9.0f\n")
    assert run_elsewhere(tmp_path, lib)["result"] == EXPECTED_V1


@pytest.mark.parametrize("how", ["environment", "hint"])
def test_a_compile_handle_finds_its_module_in_the_cache_by_key(tmp_path, origin_cache, how):
    src = tmp_path / "mylib.c"
    src.write_text(V1)
    lib = tensorffi.compile("bykey", CDEF, sources=[src], cache=origin_cache if how == "hint" else None)
    before = {p: p.stat().st_mtime_ns for p in _so(origin_cache)}
    assert len(before) == 1
    src.unlink()  # nothing to rebuild from on disk; nothing needed
    # the worker's own cache is the same folder (environment), or another one (hint)
    got = run_elsewhere(tmp_path, lib, cache=origin_cache if how == "environment" else None)
    assert got["result"] == EXPECTED_V1
    assert {p: p.stat().st_mtime_ns for p in _so(origin_cache)} == before  # found, not rebuilt
    assert _so(tmp_path / "worker-cache") == []


def test_a_portable_compile_handle_needs_no_compiler(tmp_path, origin_cache):
    src = tmp_path / "mylib.c"
    src.write_text(V1)
    lib = tensorffi.compile("portable", CDEF, sources=[src], portable=True)
    got = run_elsewhere(tmp_path, lib, env={"CC": str(tmp_path / "no-such-compiler")})
    assert got["result"] == EXPECTED_V1, got
    # without portable=True, the same worker would need a compiler
    plain = tensorffi.compile("portable", CDEF, sources=[src])
    got = run_elsewhere(tmp_path, plain, env={"CC": str(tmp_path / "no-such-compiler")}, cache=tmp_path / "other-cache")
    assert "BuildError" in got["error"] and "no-such-compiler" in got["error"]


def test_unpickling_is_lazy_and_repickles_unopened(tmp_path, cache):
    lib = tensorffi.compile("lazy", CDEF, source=V1, cache=cache, contracts={"process_data": "data: [size]"})
    again = pickle.loads(pickle.dumps(lib))
    assert "not opened yet" in repr(again)
    twice = pickle.loads(pickle.dumps(again))  # forwarded without opening
    assert "not opened yet" in repr(twice) and isinstance(twice, tensorffi.Library)
    x = torch.arange(4.0)
    twice.process_data(x)  # the contract travelled too
    assert x.tolist() == EXPECTED_V1
    assert type(twice) is tensorffi.Library and sorted(twice.functions) == ["process_data"]
    assert "not opened yet" not in repr(twice)


# --------------------------------------------------------------------------- #
# load() handles                                                               #
# --------------------------------------------------------------------------- #


@pytest.fixture
def built_so(tmp_path):
    def make(text: str, name: str = "mylib.so") -> Path:
        (tmp_path / "mylib.c").write_text(text)
        out = tmp_path / name
        tmp = tmp_path / (name + ".new")
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", str(tmp_path / "mylib.c"), "-o", str(tmp)], check=True)
        os.replace(tmp, out)  # as make would: a new file at the same path
        return out

    return make


def test_a_load_handle_with_a_relative_path_works_elsewhere(tmp_path, built_so, monkeypatch):
    built_so(V1)
    monkeypatch.chdir(tmp_path)
    lib = tensorffi.load("./mylib.so", CDEF)
    assert run_elsewhere(tmp_path, lib)["result"] == EXPECTED_V1


def test_a_load_handle_whose_library_changed_is_refused(tmp_path, built_so):
    so = built_so(V1)
    lib = tensorffi.load(so, CDEF)
    built_so(V2)  # rebuilt after the handle was made
    got = run_elsewhere(tmp_path, lib)
    assert "result" not in got
    assert got["error"].startswith("LibraryMismatchError") and str(so) in got["error"] and "differs" in got["error"]
    # in this process too, rather than the stale mapping
    again = pickle.loads(pickle.dumps(lib))
    with pytest.raises(tensorffi.LibraryMismatchError, match="differs"):
        again.process_data(torch.zeros(4), 4)


def test_a_load_handle_whose_library_is_missing_is_refused_on_use(tmp_path, built_so):
    so = built_so(V1)
    lib = tensorffi.load(so, CDEF)
    so.unlink()
    got = run_elsewhere(tmp_path, lib)
    assert "not opened yet" in got["repr"]  # unpickling itself succeeded
    assert got["error"].startswith("LibraryMismatchError") and str(so) in got["error"] and "does not exist" in got["error"]


def test_a_portable_load_handle_carries_the_library(tmp_path, built_so):
    so = built_so(V1)
    lib = tensorffi.load(so, CDEF, portable=True)
    built_so(V2)
    got = run_elsewhere(tmp_path, lib)
    assert got["result"] == EXPECTED_V1
    so.unlink()
    assert run_elsewhere(tmp_path, lib)["result"] == EXPECTED_V1


def test_a_library_found_by_name_reopens_by_name(tmp_path):
    m = pickle.loads(pickle.dumps(tensorffi.load("libm.so.6", "double cbrt(double x);")))
    assert m.cbrt(27.0) == pytest.approx(3.0, rel=1e-15)


def test_a_cache_hint_that_does_not_exist_is_not_created(tmp_path):
    hint = tmp_path / "gone" / "cache"
    lib = tensorffi.compile("hint", CDEF, source=V1, cache=hint)
    blob = pickle.dumps(lib)
    import shutil

    shutil.rmtree(tmp_path / "gone")
    assert run_elsewhere(tmp_path, pickle.loads(blob))["result"] == EXPECTED_V1
    assert not (tmp_path / "gone").exists() and len(_so(tmp_path / "worker-cache")) == 1


# --------------------------------------------------------------------------- #
# Bound functions pickle as their library does                                 #
# --------------------------------------------------------------------------- #

FUNCTIONS = V1 + "#include <string.h>\nlong name_len(const char *s) { return (long)strlen(s); }\n"

CALL_FUNCTIONS = textwrap.dedent(
    """
    import json, pickle, sys
    import torch, tensorffi
    process_data, name_len = pickle.loads(open(sys.argv[1], "rb").read())
    out = {"repr": repr(process_data)}
    x = torch.arange(4.0)
    process_data(x, 4)
    out["result"] = x.tolist()
    out["len"] = name_len("tensorffi")
    print(json.dumps(out))
    """
)


def test_bound_functions_pickle_and_rebuild_in_another_process(tmp_path, origin_cache):
    src = tmp_path / "fns.c"
    src.write_text(FUNCTIONS)
    lib = tensorffi.compile("fns", sources=[src])
    blob = tmp_path / "fns.pkl"
    blob.write_bytes(pickle.dumps((lib.process_data, lib.name_len)))  # a native call and the Python path (a string)
    src.write_text(V2)  # changes nothing: the functions carry their library's text
    (tmp_path / "call.py").write_text(CALL_FUNCTIONS)
    (tmp_path / "elsewhere").mkdir()
    proc = subprocess.run([sys.executable, str(tmp_path / "call.py"), str(blob)], cwd=tmp_path / "elsewhere",
                          env=dict(os.environ, TENSORFFI_CACHE_DIR=str(tmp_path / "worker-cache")),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["result"] == EXPECTED_V1 and got["len"] == 9
    assert "not opened yet" in got["repr"]  # unpickling opened nothing
    assert len(_so(tmp_path / "worker-cache")) == 1


def test_an_unpickled_function_opens_its_library_once_on_first_use(tmp_path, cache, built_so):
    lib = tensorffi.compile("lazyfn", CDEF, source=V1, cache=cache, contracts={"process_data": "data: [size]"})
    f, same = pickle.loads(pickle.dumps((lib.process_data, lib)))
    assert f._tf_library is same  # one library for both (the pickle memo)
    assert "not opened yet" in repr(f)
    again = pickle.loads(pickle.dumps(f))  # forwarded without opening
    assert "not opened yet" in repr(again)
    x = torch.arange(4.0)
    again(x)
    assert x.tolist() == EXPECTED_V1
    assert "data: [size]" in again.__doc__  # its description, from the opened library
    with pytest.raises(tensorffi.ShapeError):
        again(torch.arange(4.0), 5)
    # a load() handle's function too
    so = built_so(V1)
    loaded = tensorffi.load(str(so), CDEF)
    h = pickle.loads(pickle.dumps(loaded.process_data))
    x = torch.arange(4.0)
    h(x, 4)
    assert x.tolist() == EXPECTED_V1
