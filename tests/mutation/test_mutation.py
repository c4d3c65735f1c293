# SPDX-License-Identifier: MIT
"""Mutation tests: ``python -m pytest -m mutation`` plants each bug of
tests/mutation/mutants.py in a scratch copy and requires its tests to fail.
Deselected by default (each mutant copies the tree, C ones rebuild it)."""
from __future__ import annotations

from pathlib import Path

import pytest

from mutation.harness import ROOT, apply, classify, run_mutant
from mutation.mutants import MUTANTS, Mutant


@pytest.mark.mutation
@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.id for m in MUTANTS])
def test_mutant_is_killed(mutant: Mutant) -> None:
    result = run_mutant(mutant)
    assert result.outcome == "killed", f"{mutant.id}: {result.outcome}: {result.detail}\n{result.log}"


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
