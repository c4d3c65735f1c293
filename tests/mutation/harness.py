# SPDX-License-Identifier: MIT
"""Apply one planted bug in a scratch copy of the tree, rebuild if it is C, run the
tests that should catch it, and say whether they did.

Outcomes:

``killed``    the selected tests failed (or crashed, or timed out) on the mutant;
``survived``  they passed: a bug users would suffer that no test sees;
``stale``     the snippet is not in the file exactly once: the code changed, update
              the mutant in ``tests/mutation/mutants.py``;
``error``     the harness could not run the mutant (build failed for another reason
              than the mutation, the scratch copy imported the wrong tensorffi, no
              test collected). Stale and error fail a harness run, like a survivor.

The scratch copy is a copy of the working tree as it is (tracked and untracked files
that git does not ignore), so a mutant is tested against uncommitted work too. A
Python mutant reuses the tree's built ``tensorffi/_native*.so``; a C mutant is built
in place there with ``python build_ffi.py``. pytest runs in the copy with the copy
first on ``sys.path``; ``tests/conftest.py`` stops the run (exit code 3, an error, not
a kill) if ``tensorffi`` is imported from anywhere else.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .mutants import Mutant

ROOT = Path(__file__).resolve().parents[2]
OUTCOMES = ("killed", "survived", "stale", "error")


@dataclass
class Result:
    mutant: Mutant
    outcome: str
    detail: str = ""
    seconds: float = 0.0
    log: str = field(default="", repr=False)


def tree_files(root: Path = ROOT) -> list[str]:
    """Tracked and untracked, not ignored, files of the working tree (relative paths)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, capture_output=True, check=True,
    ).stdout
    return [p for p in out.decode().split("\0") if p and (root / p).is_file()]


def built_native(root: Path = ROOT) -> list[Path]:
    return sorted((root / "tensorffi").glob("_native*.so"))


def copy_tree(dest: Path, *, with_native: bool, root: Path = ROOT) -> None:
    """Copy the working tree into ``dest`` (and the built native module if asked)."""
    for rel in tree_files(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    if with_native:
        natives = built_native(root)
        if not natives:
            raise RuntimeError(f"no built tensorffi/_native*.so in {root}: run pip install -e . first")
        for so in natives:
            shutil.copy2(so, dest / "tensorffi" / so.name)


def apply(mutant: Mutant, tree: Path) -> str | None:
    """Plant ``mutant`` in ``tree``; returns None, or why it is stale."""
    path = tree / mutant.file
    if not path.exists():
        return f"{mutant.file} does not exist"
    text = path.read_text()
    count = text.count(mutant.find)
    if count != 1:
        return f"snippet found {count} times in {mutant.file} (expected exactly once)"
    path.write_text(text.replace(mutant.find, mutant.replace))
    return None


def is_stale(mutant: Mutant, root: Path = ROOT) -> str | None:
    """Why ``mutant`` no longer applies to the tree at ``root`` (None if it does)."""
    path = root / mutant.file
    if not path.exists():
        return f"{mutant.file} does not exist"
    count = path.read_text().count(mutant.find)
    return None if count == 1 else f"snippet found {count} times in {mutant.file} (expected exactly once)"


def scratch_env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["TENSORFFI_EXPECT_ROOT"] = str(tree)  # tests/conftest.py checks the import
    env["TENSORFFI_CACHE_DIR"] = str(tree / ".tfcache")  # compile() cache private to the mutant
    env.pop("HYPOTHESIS_PROFILE", None)  # the deterministic default profile
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def build_native(tree: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "build_ffi.py"], cwd=tree, env=scratch_env(tree), capture_output=True, text=True,
        timeout=timeout,
    )


def run_tests(tree: Path, tests: tuple[str, ...], timeout: float) -> tuple[int, str]:
    """Run pytest on ``tests`` in ``tree``; returns (exit code, output tail). A timeout is 124."""
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--no-header", "-m", "not slow", *tests]
    try:
        proc = subprocess.run(cmd, cwd=tree, env=scratch_env(tree), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return 124, out[-4000:]
    return proc.returncode, (proc.stdout + proc.stderr)[-4000:]


def classify(rc: int, output: str) -> tuple[str, str]:
    """pytest's exit code on a mutant -> (outcome, detail)."""
    if rc == 0:
        return "survived", "the selected tests passed"
    if rc == 1:
        failed = [ln for ln in output.splitlines() if ln.startswith(("FAILED", "ERROR"))]
        return "killed", (failed[0] if failed else "tests failed")[:160]
    if rc == 2:
        return "killed", "collection or import failed"
    if rc == 124:
        return "killed", "timed out (a hang is a kill)"
    if rc < 0 or rc >= 128:
        return "killed", f"crashed (exit {rc})"
    if rc == 3:
        return "error", "pytest internal error (is the scratch copy's tensorffi the one imported?)"
    if rc == 5:
        return "error", "no test collected: the mutant's test selection is out of date"
    return "error", f"pytest exit code {rc}"


def run_mutant(mutant: Mutant, *, keep: bool = False, timeout: float = 900.0, workdir: str | None = None) -> Result:
    """Plant, build if needed, test; the scratch copy is removed unless ``keep``."""
    start = time.monotonic()
    stale = is_stale(mutant)
    if stale is not None:
        return Result(mutant, "stale", stale)
    tree = Path(tempfile.mkdtemp(prefix=f"tf-mutant-{mutant.id}-", dir=workdir))
    try:
        copy_tree(tree, with_native=not mutant.native)
        why = apply(mutant, tree)
        if why is not None:
            return Result(mutant, "stale", why, time.monotonic() - start)
        if mutant.native:
            try:
                build = build_native(tree, timeout)
            except subprocess.TimeoutExpired:
                return Result(mutant, "error", "build timed out", time.monotonic() - start)
            if build.returncode != 0:
                # A mutant that does not compile is a bad mutant, not a kill.
                return Result(mutant, "error", "build failed", time.monotonic() - start,
                              (build.stdout + build.stderr)[-4000:])
        rc, out = run_tests(tree, mutant.tests, timeout)
        outcome, detail = classify(rc, out)
        return Result(mutant, outcome, detail, time.monotonic() - start, out)
    finally:
        if keep:
            print(f"[{mutant.id}] scratch copy kept at {tree}", file=sys.stderr)
        else:
            shutil.rmtree(tree, ignore_errors=True)


def run_baseline(selections: list[tuple[str, ...]], *, jobs: int = 1, timeout: float = 1800.0,
                 workdir: str | None = None) -> Result | None:
    """Run each selection on one unmutated copy: a kill means nothing if the tests
    fail without the bug. Returns an error Result, or None if all are green."""
    from concurrent.futures import ThreadPoolExecutor

    unique = list(dict.fromkeys(selections))
    tree = Path(tempfile.mkdtemp(prefix="tf-mutant-baseline-", dir=workdir))
    try:
        copy_tree(tree, with_native=True)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            runs = list(pool.map(lambda sel: (sel, *run_tests(tree, sel, timeout)), unique))
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    for sel, rc, out in runs:
        if rc != 0:
            base = Mutant("baseline", "", "", "", "the unmutated tree", sel)
            return Result(base, "error", f"{' '.join(sel)} fails on the unmutated tree (exit {rc})", log=out)
    return None
