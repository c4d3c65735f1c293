# SPDX-License-Identifier: MIT
"""pytest plugin of the mutation harness (loaded with ``-p tf_mutation_first``; its
folder is put on the scratch run's ``PYTHONPATH``, not the tree's root).

* ``TF_MUTATION_FIRST=NODEID``: if that test is among the collected (selected) tests,
  it runs first; the others follow in their usual order. Nothing is added or removed:
  the run is the mutant's whole selection, reordered, so that with ``-x`` a mutant
  killed by its recorded test stops after one test. A stale record (a test renamed,
  deselected, or no longer failing) changes only the order.
* ``TF_MUTATION_REPORT=PATH``: appends ``start NODEID`` as each test starts and
  ``failed NODEID`` for each failed phase, so the harness knows which test killed the
  mutant even when pytest itself dies (a crash, a hang killed at the timeout).
"""
from __future__ import annotations

import os

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first = os.environ.get("TF_MUTATION_FIRST")
    if not first:
        return
    picked = [it for it in items if it.nodeid == first]
    if picked:
        items[:] = picked + [it for it in items if it.nodeid != first]


def _note(kind: str, nodeid: str) -> None:
    path = os.environ.get("TF_MUTATION_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{kind} {nodeid}\n")


def pytest_runtest_logstart(nodeid: str) -> None:
    _note("start", nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        _note("failed", report.nodeid)
