# SPDX-License-Identifier: MIT
"""Mutation tests: ``python -m pytest -m mutation`` plants each bug of
tests/mutation/mutants.py in a scratch copy and requires its tests to fail.
Deselected by default (each mutant copies the tree, C ones rebuild it)."""
from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mutation import compiler_cache
from mutation.__main__ import KILLS, read_kills, updated_kills
from mutation.harness import ROOT, CompilerCache, Result, apply, classify, default_jobs, run_all, run_mutant
from mutation.mutants import MUTANTS, Mutant


@pytest.fixture(scope="session")
def cc_cache() -> Iterator[CompilerCache]:
    """One compiler cache for the session's C mutants: the first builds every unit."""
    cache = CompilerCache()
    yield cache
    cache.close()


@pytest.mark.mutation
@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.id for m in MUTANTS])
def test_mutant_is_killed(mutant: Mutant, cc_cache: CompilerCache) -> None:
    result = run_mutant(mutant, first=read_kills(KILLS).get(mutant.id), cache=cc_cache)
    assert result.outcome == "killed", f"{mutant.id}: {result.outcome}: {result.detail}\n{result.log}"


@pytest.mark.mutation
def test_a_real_mutant_with_a_stale_record_is_still_killed() -> None:
    """The record names a test of the selection that passes on the mutant: it runs
    first, passes, and the rest of the selection kills the mutant."""
    mutant = next(m for m in MUTANTS if m.id == "status-2-wrong-class")
    innocent = "tests/test_errors.py::test_parse_error_carries_position"
    result = run_mutant(mutant, first=innocent)
    assert result.outcome == "killed", f"{result.outcome}: {result.detail}\n{result.log}"
    assert result.killer is not None and result.killer.startswith("tests/test_errors.py::")
    assert result.killer != innocent


# The harness's own logic, in the default run (cheap: no copy, no build).


def test_mutants_are_well_formed() -> None:
    ids = [m.id for m in MUTANTS]
    assert len(ids) == len(set(ids)), "mutant ids repeat"
    for m in MUTANTS:
        assert (ROOT / m.file).is_file(), m.id
        assert m.find and m.find != m.replace and m.tests and m.effect, m.id
        for t in m.tests:
            if t.startswith("tests/"):
                assert (ROOT / t.split("::")[0]).is_file(), f"{m.id}: {t}"


def test_apply_plants_once_and_reports_stale(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("a = 1\nb = 2\nb = 2\n")
    assert apply(Mutant("x", "m.py", "a = 1", "a = 2", "e", ("t",)), tmp_path) is None
    assert (tmp_path / "m.py").read_text() == "a = 2\nb = 2\nb = 2\n"
    assert "0 times" in apply(Mutant("x", "m.py", "zzz", "y", "e", ("t",)), tmp_path)
    assert "2 times" in apply(Mutant("x", "m.py", "b = 2", "b = 3", "e", ("t",)), tmp_path)
    assert (tmp_path / "m.py").read_text() == "a = 2\nb = 2\nb = 2\n"  # untouched when stale
    assert Mutant("c", "csrc/x.c", "a", "b", "e", ("t",)).native
    assert not Mutant("p", "tensorffi/x.py", "a", "b", "e", ("t",)).native


@pytest.mark.parametrize(
    "rc, outcome",
    [(0, "survived"), (1, "killed"), (2, "killed"), (124, "killed"), (-11, "killed"), (134, "killed"),
     (3, "error"), (4, "error"), (5, "error")],
)
def test_pytest_exit_codes_are_classified(rc: int, outcome: str) -> None:
    assert classify(rc, "FAILED tests/x.py::t - boom")[0] == outcome


def test_default_jobs_are_the_cpus_we_may_use() -> None:
    assert default_jobs() == len(os.sched_getaffinity(0))


def test_the_kill_record_names_tests_of_each_mutants_selection() -> None:
    record = read_kills(KILLS)
    mutants = {m.id: m for m in MUTANTS}
    for mid, nodeid in record.items():
        assert mid in mutants, f"kills.json: {mid} is not a mutant"
        files = {t.split("::")[0] for t in mutants[mid].tests if t.startswith("tests/")}
        assert nodeid.split("::")[0] in files, f"kills.json: {mid}: {nodeid} is not in its selection"


def test_the_record_follows_kills_only() -> None:
    m = {x.id: x for x in MUTANTS}
    a, b, c = MUTANTS[0], MUTANTS[1], MUTANTS[2]
    record = {a.id: "tests/old.py::t", b.id: "tests/b.py::t", c.id: "tests/c.py::t", "gone-mutant": "x::y"}
    new = updated_kills(record, [
        Result(m[a.id], "killed", killer="tests/new.py::t"),  # killed by another test: updated
        Result(m[b.id], "survived"),  # a survivor keeps its entry
        Result(m[c.id], "killed", killer=None),  # a collection error names no test
    ])
    assert new == {a.id: "tests/new.py::t", b.id: "tests/b.py::t", c.id: "tests/c.py::t"}


# The selection logic on a tiny repository of its own (a copy and a pytest run without
# torch each, about a second): the record only reorders the mutant's selection.

CALC_TESTS = """\
import os
import calc

def test_add_small():
    assert calc.add(1, 2) == 3

def test_add_large():
    assert calc.add(10, 20) == 30

def test_unrelated():
    assert calc.NAME == "calc"

def test_crash():
    if calc.add(2, 2) != 4:
        os.abort()
"""


@pytest.fixture
def tiny_repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is needed to list the tree")
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tensorffi").mkdir()
    (repo / "pytest.ini").write_text("[pytest]\n")
    (repo / "calc.py").write_text('NAME = "calc"\n\ndef add(a, b):\n    return a + b\n')
    (repo / "tests" / "test_calc.py").write_text(CALC_TESTS)
    (repo / "tensorffi" / "_native.fake.so").write_bytes(b"")  # what copy_tree copies for Python mutants
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    return repo


SUB = Mutant("add-subtracts", "calc.py", "return a + b", "return a - b", "wrong sums", ("tests/test_calc.py",))


def run_tiny(repo: Path, mutant: Mutant, first: str | None) -> Result:
    return run_mutant(mutant, first=first, timeout=120, root=repo)


def test_the_recorded_test_runs_first(tiny_repo: Path) -> None:
    r = run_tiny(tiny_repo, SUB, "tests/test_calc.py::test_add_large")
    assert (r.outcome, r.killer) == ("killed", "tests/test_calc.py::test_add_large")


def test_a_stale_record_falls_back_to_the_whole_selection(tiny_repo: Path) -> None:
    # a recorded test that passes on the mutant: the rest of the selection runs and kills
    r = run_tiny(tiny_repo, SUB, "tests/test_calc.py::test_unrelated")
    assert (r.outcome, r.killer) == ("killed", "tests/test_calc.py::test_add_small")
    # a recorded test that no longer exists: the selection in its own order
    r = run_tiny(tiny_repo, SUB, "tests/test_calc.py::test_renamed")
    assert (r.outcome, r.killer) == ("killed", "tests/test_calc.py::test_add_small")


def test_a_record_never_adds_a_test_to_the_selection(tiny_repo: Path) -> None:
    only_unrelated = Mutant("add-subtracts", "calc.py", "return a + b", "return a - b", "e",
                            ("tests/test_calc.py", "-k", "unrelated"))
    r = run_tiny(tiny_repo, only_unrelated, "tests/test_calc.py::test_add_small")
    assert r.outcome == "survived", r.log
    harmless = Mutant("name-kept", "calc.py", 'NAME = "calc"', 'NAME = "calc"  # unchanged', "e", ("tests/test_calc.py",))
    assert run_tiny(tiny_repo, harmless, "tests/test_calc.py::test_add_small").outcome == "survived"


def test_a_crash_names_the_test_that_was_running(tiny_repo: Path) -> None:
    crash = Mutant("add-crashes", "calc.py", "return a + b", "return a + b + (a == 2)", "e",
                   ("tests/test_calc.py", "-k", "crash or unrelated"))
    r = run_tiny(tiny_repo, crash, None)
    assert r.outcome == "killed" and "crashed" in r.detail, r.log
    assert r.killer == "tests/test_calc.py::test_crash"


def test_run_all_runs_the_baseline_and_the_mutants_in_parallel(tiny_repo: Path) -> None:
    harmless = Mutant("name-kept", "calc.py", 'NAME = "calc"', 'NAME = "calc"  # same', "e", ("tests/test_calc.py",))
    stale = Mutant("gone", "calc.py", "no such line", "x", "e", ("tests/test_calc.py",))
    bad, results = run_all([SUB, harmless, stale], jobs=2, timeout=120, root=tiny_repo,
                           record={SUB.id: "tests/test_calc.py::test_add_large"})
    assert bad is None
    assert [(r.mutant.id, r.outcome) for r in results] == [(SUB.id, "killed"), ("name-kept", "survived"), ("gone", "stale")]
    assert results[0].killer == "tests/test_calc.py::test_add_large"


def test_a_kill_counts_only_if_the_baseline_is_green(tiny_repo: Path) -> None:
    # the recorded test fails without the mutant: the baseline (the same run, the same
    # order) fails, and no outcome is reported as a kill
    (tiny_repo / "tests" / "test_calc.py").write_text(CALC_TESTS + "\ndef test_broken():\n    assert False\n")
    bad, _ = run_all([SUB], jobs=2, timeout=120, root=tiny_repo, record={SUB.id: "tests/test_calc.py::test_broken"})
    assert bad is not None and "test_broken first" in bad.detail and "fails on the unmutated tree" in bad.detail


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_the_compiler_cache_reuses_only_the_same_preprocessed_source(tmp_path: Path) -> None:
    cache = CompilerCache(tmp_path / "cc")
    env = cache.env(dict(os.environ))

    def compile_in(tree: Path, header: str) -> bytes:
        (tree / "inc").mkdir(parents=True, exist_ok=True)
        (tree / "inc" / "k.h").write_text(header)
        (tree / "a.c").write_text('#include "k.h"\nint f(void) { return K; }\n')
        subprocess.run(["gcc", "-O2", "-Iinc", "-c", "a.c", "-o", "a.o"], cwd=tree, env=env, check=True)
        return (tree / "a.o").read_bytes()

    def entries() -> int:
        return len(list((tmp_path / "cc" / "objects").glob("*/*.o")))

    first = compile_in(tmp_path / "one", "#define K 1\n")
    assert entries() == 1
    assert compile_in(tmp_path / "two", "#define K 1\n") == first and entries() == 1  # a hit, elsewhere
    changed = compile_in(tmp_path / "three", "#define K 2\n")  # the header changed: a miss
    assert changed != first and entries() == 2
    # what is not one plain compile (here a link) goes to the compiler untouched
    subprocess.run(["gcc", "-shared", "a.o", "-o", "liba.so"], cwd=tmp_path / "three", env=env, check=True)
    assert (tmp_path / "three" / "liba.so").is_file() and entries() == 2
    assert compiler_cache.plain_compile(["-O2", "-c", "a.c", "-o", "a.o"]) == ("a.c", "a.o")
    assert compiler_cache.plain_compile(["-shared", "a.o", "-o", "x.so"]) is None
