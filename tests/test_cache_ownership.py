# SPDX-License-Identifier: MIT
"""The cache touches only its own files (issue 37): a folder that is not a tensorffi
cache is refused by ``compile()``, ``cache.clear()`` and ``tensorffi cache clear --dir``
(on 36e677b they deleted its ``libs/``, ``recipes/`` and ``locks/`` whatever they held),
and inside a cache only the entries tensorffi wrote are removed."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import tensorffi
from tensorffi import CacheError

SRC = "int twice(int x) { return 2 * x; }"


def user_folder(tmp_path):
    """A folder holding what a user keeps there, named like a cache's entries."""
    d = tmp_path / "mine"
    for sub, name, text in (("libs", "important.so", "a library of mine"), ("recipes", "cake.json", "{}"),
                            ("locks", "door.lock", "key"), ("", "notes.txt", "notes")):
        (d / sub).mkdir(parents=True, exist_ok=True)
        (d / sub / name).write_text(text)
    (d / "tmp.build").mkdir()
    (d / "tmp.build" / "keep.c").write_text("int main(void) { return 0; }")
    return d


def snapshot(d):
    return sorted((str(p.relative_to(d)), p.read_bytes() if p.is_file() else b"") for p in d.rglob("*"))


def test_clear_refuses_a_folder_that_is_not_a_cache(tmp_path):
    d = user_folder(tmp_path)
    before = snapshot(d)
    with pytest.raises(CacheError, match=r"is not a tensorffi cache.*'libs/important.so'.*'notes.txt'") as info:
        tensorffi.cache.clear(d)
    assert info.value.refused
    assert snapshot(d) == before  # nothing deleted, nothing written


@pytest.mark.parametrize("sub, name", [("libs", "important.so"), ("recipes", "cake.json"), ("locks", "door.lock"),
                                       ("tmp.build", "keep.c")])
def test_a_folder_holding_only_what_looks_like_a_cache_folder_is_refused(tmp_path, sub, name):
    d = tmp_path / "only"
    (d / sub).mkdir(parents=True)
    (d / sub / name).write_text("mine")
    with pytest.raises(CacheError, match=rf"not a tensorffi cache.*'{sub}/"):
        tensorffi.cache.clear(d)
    assert (d / sub / name).read_text() == "mine"


def test_the_cli_refuses_it_with_status_2(tmp_path):
    d = user_folder(tmp_path)
    before = snapshot(d)
    r = subprocess.run([sys.executable, "-m", "tensorffi", "cache", "clear", "--dir", str(d)],
                       capture_output=True, text=True)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "not a tensorffi cache" in r.stderr
    assert snapshot(d) == before


def test_compile_refuses_a_mistaken_cache_setting(tmp_path, monkeypatch):
    d = user_folder(tmp_path)
    before = snapshot(d)
    monkeypatch.setenv("TENSORFFI_CACHE_DIR", str(d))
    with pytest.raises(CacheError, match="not a tensorffi cache"):
        tensorffi.compile("own_cache_lib", "int twice(int x);", source=SRC)
    assert snapshot(d) == before


def test_a_new_or_empty_folder_becomes_a_cache_and_clear_keeps_users_files(tmp_path):
    d = tmp_path / "fresh"
    d.mkdir()
    lib = tensorffi.compile("own_cache_lib", "int twice(int x);", source=SRC, cache=d)
    assert lib.twice(21) == 42
    assert (d / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    (d / "libs").mkdir(exist_ok=True)
    (d / "libs" / "mine.txt").write_text("a file of mine")
    assert tensorffi.cache.clear(d) == 1
    assert not any(p.name.startswith("_tf_") for p in d.iterdir())
    assert (d / "libs" / "mine.txt").read_text() == "a file of mine"
    assert (d / "CACHEDIR.TAG").exists()
    lib = tensorffi.compile("own_cache_lib", "int twice(int x);", source=SRC, cache=d)  # still a cache
    assert lib.twice(5) == 10


def test_a_cache_of_an_earlier_version_is_adopted(tmp_path):
    d = tmp_path / "old"
    tensorffi.compile("own_cache_lib", "int twice(int x);", source=SRC, cache=d)
    os.unlink(d / "CACHEDIR.TAG")  # as an earlier tensorffi left it: only its own entries
    assert tensorffi.cache.info(d)["modules"]
    assert "tensorffi" in (d / "CACHEDIR.TAG").read_text()


def test_another_programs_cache_tag_is_not_ours(tmp_path):
    d = tmp_path / "theirs"
    d.mkdir()
    (d / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n# some other tool\n")
    with pytest.raises(CacheError, match="not a tensorffi cache"):
        tensorffi.cache.clear(d)
    assert "some other tool" in (d / "CACHEDIR.TAG").read_text()


def test_builds_racing_a_cache_clear_in_another_process_load(tmp_path, rng, monkeypatch):
    """Another process clearing the cache over and over while this one builds: every
    build loads (a module is written, indexed and loaded under its lock, which clear
    takes to remove it), none fails with 'does not load'. On 36e677b: 22 of 56 failed."""
    root = tmp_path / "cache"
    monkeypatch.setenv("TENSORFFI_CACHE_DIR", str(root))
    tensorffi.compile("seed", source="int seed(void) { return 1; }")
    clearer = subprocess.Popen([sys.executable, "-c", (
        "import sys, time, tensorffi.cache as c\n"
        "t = time.time()\n"
        "while time.time() - t < 60: c.clear(sys.argv[1])\n"), str(root)])
    try:
        for i in range(8):
            k = int(rng.integers(1, 1 << 30))
            lib = tensorffi.compile(f"race{i}", source=f"int race{i}(int x) {{ return x + {k}; }}")
            assert getattr(lib, f"race{i}")(i) == i + k
    finally:
        clearer.kill()
        clearer.wait()
