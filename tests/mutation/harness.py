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

Speed, without changing what an outcome means:

* C builds go through a compiler cache (``compiler_cache.py``): the same compile of
  the same preprocessed source reuses its object, so a C mutant recompiles only the
  translation units its change reaches. The cache is filled by the baseline's build
  of the unmutated sources.
* A mutant's recorded killer (``kills.json``: the test that failed on it last time)
  runs first in its selection (``plugin/tf_mutation_first.py``); with ``-x`` a kill
  then costs one test. The run is still the whole selection, only reordered: if the
  recorded test passes (or is gone), the rest runs, and a survivor is declared only
  when every selected test passed.
"""
from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import compiler_cache
from .mutants import Mutant

ROOT = Path(__file__).resolve().parents[2]
OUTCOMES = ("killed", "survived", "stale", "error")
PLUGIN_DIR = Path(__file__).resolve().parent / "plugin"  # holds tf_mutation_first.py only


def default_jobs() -> int:
    """The CPUs this process may run on (its affinity mask, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass
class Result:
    mutant: Mutant
    outcome: str
    detail: str = ""
    seconds: float = 0.0
    log: str = field(default="", repr=False)
    killer: str | None = None  # node id of the test that failed (or was running at a crash/hang)


@dataclass
class TestRun:
    rc: int
    output: str
    killer: str | None = None


class CompilerCache:
    """A compiler cache for this run's C builds: ``env()`` puts its ``gcc``/``cc`` shims
    first on a build's ``PATH``. In ``directory`` if given (kept), else a temporary
    folder removed by ``close()``."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self._temporary = directory is None
        self.root = Path(tempfile.mkdtemp(prefix="tf-mutation-cc-") if directory is None else directory)
        self.objects = self.root / "objects"
        self.shims = self.root / "bin"
        compiler_cache.install(str(self.objects), str(self.shims))

    def env(self, env: dict[str, str]) -> dict[str, str]:
        env = dict(env)
        env["PATH"] = str(self.shims) + os.pathsep + env.get("PATH", os.defpath)
        return env

    def close(self) -> None:
        if self._temporary:
            shutil.rmtree(self.root, ignore_errors=True)


def tree_files(root: Path = ROOT) -> list[str]:
    """Tracked and untracked, not ignored, files of the working tree (relative paths)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, capture_output=True, check=True,
    ).stdout
    return [p for p in out.decode().split("\0") if p and (root / p).is_file()]


def built_native(root: Path = ROOT) -> list[Path]:
    return sorted((root / "tensorffi").glob("_native*.so"))


def copy_tree(dest: Path, *, with_native: bool | Path, root: Path = ROOT) -> None:
    """Copy the working tree into ``dest``, and the built native module if asked: the
    tree's (``True``) or the one built in another copy (a ``Path`` to that copy)."""
    for rel in tree_files(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    if with_native is not False:
        source = root if with_native is True else with_native
        natives = built_native(source)
        if not natives:
            raise RuntimeError(f"no built tensorffi/_native*.so in {source}: run pip install -e . first")
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
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(PLUGIN_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["TENSORFFI_EXPECT_ROOT"] = str(tree)  # tests/conftest.py checks the import
    env["TENSORFFI_CACHE_DIR"] = str(tree / ".tfcache")  # compile() cache private to the mutant
    env.pop("HYPOTHESIS_PROFILE", None)  # the deterministic default profile
    env.pop("TF_MUTATION_FIRST", None)
    env.pop("TF_MUTATION_REPORT", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def build_native(tree: Path, timeout: float, cache: CompilerCache | None = None) -> subprocess.CompletedProcess[str]:
    env = scratch_env(tree)
    return subprocess.run(
        [sys.executable, "build_ffi.py"], cwd=tree, env=cache.env(env) if cache else env,
        capture_output=True, text=True, timeout=timeout,
    )


def _killer(report: Path, rc: int) -> str | None:
    """The test that failed first; after a crash or a hang, the one that was running."""
    try:
        lines = report.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    for ln in lines:
        if ln.startswith("failed "):
            return ln[len("failed "):]
    if rc == 124 or rc < 0 or rc >= 128:
        started = [ln[len("start "):] for ln in lines if ln.startswith("start ")]
        return started[-1] if started else None
    return None


def run_tests(tree: Path, tests: tuple[str, ...], timeout: float, first: str | None = None) -> TestRun:
    """Run pytest on ``tests`` in ``tree``, stopping at the first failure, the test
    ``first`` first if it is in the selection. A timeout is exit code 124."""
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "tf_mutation_first",
           "--no-header", "-m", "not slow", *tests]
    env = scratch_env(tree)
    fd, report_name = tempfile.mkstemp(prefix="tf-mutation-report-", suffix=".txt")
    os.close(fd)
    report = Path(report_name)
    env["TF_MUTATION_REPORT"] = report_name
    if first:
        env["TF_MUTATION_FIRST"] = first
    try:
        try:
            proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            return TestRun(124, out[-4000:], _killer(report, 124))
        return TestRun(proc.returncode, (proc.stdout + proc.stderr)[-4000:], _killer(report, proc.returncode))
    finally:
        report.unlink(missing_ok=True)


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


def run_mutant(mutant: Mutant, *, keep: bool = False, timeout: float = 900.0, workdir: str | None = None,
               first: str | None = None, cache: CompilerCache | None = None, root: Path = ROOT) -> Result:
    """Plant, build if needed, test; the scratch copy is removed unless ``keep``.

    ``first``: the node id of the test that killed this mutant last time (its record);
    it runs first, then the rest of the selection. ``cache``: the compiler cache of the
    C build (None: compile everything)."""
    start = time.monotonic()
    stale = is_stale(mutant, root)
    if stale is not None:
        return Result(mutant, "stale", stale)
    tree = Path(tempfile.mkdtemp(prefix=f"tf-mutant-{mutant.id}-", dir=workdir))
    try:
        copy_tree(tree, with_native=not mutant.native, root=root)
        why = apply(mutant, tree)
        if why is not None:
            return Result(mutant, "stale", why, time.monotonic() - start)
        if mutant.native:
            try:
                build = build_native(tree, timeout, cache)
            except subprocess.TimeoutExpired:
                return Result(mutant, "error", "build timed out", time.monotonic() - start)
            if build.returncode != 0:
                # A mutant that does not compile is a bad mutant, not a kill.
                return Result(mutant, "error", "build failed", time.monotonic() - start,
                              (build.stdout + build.stderr)[-4000:])
        run = run_tests(tree, mutant.tests, timeout, first)
        outcome, detail = classify(run.rc, run.output)
        killer = run.killer if outcome == "killed" else None
        return Result(mutant, outcome, detail, time.monotonic() - start, run.output, killer)
    finally:
        if keep:
            print(f"[{mutant.id}] scratch copy kept at {tree}", file=sys.stderr)
        else:
            shutil.rmtree(tree, ignore_errors=True)


Run = tuple[tuple[str, ...], "str | None"]  # a selection and the test it runs first


class Baseline:
    """The unmutated side: the tests pass without the bugs, or a kill means nothing.

    A run is a selection and the test it runs first (its mutant's recorded killer, or
    None): exactly the pytest run its mutant gets. A Python mutant's run is checked on
    a copy with the tree's built module (the one the mutant's copy gets); a C mutant's
    on a copy whose module ``build()`` built from the copied sources, as the mutant's
    is (through the compiler cache, which that build fills for the mutants). Each
    worker thread gets copies of its own."""

    def __init__(self, *, timeout: float, cache: CompilerCache | None, root: Path = ROOT,
                 workdir: str | None = None) -> None:
        self.timeout, self.cache, self.root = timeout, cache, root
        self.tmp = Path(tempfile.mkdtemp(prefix="tf-mutant-baseline-", dir=workdir))
        self.built_tree = self.tmp / "built"
        self._local = threading.local()
        self._count = itertools.count()
        self._lock = threading.Lock()

    def _copy_for(self, kind: str) -> Path:
        copies = self._local.__dict__.setdefault("copies", {})
        if kind not in copies:
            with self._lock:
                dest = self.tmp / f"{kind}-{next(self._count)}"
            copy_tree(dest, with_native=True if kind == "tree" else self.built_tree, root=self.root)
            copies[kind] = dest
        return copies[kind]

    def build(self) -> Result | None:
        """Build the unmutated C sources; an error Result if they do not build."""
        copy_tree(self.built_tree, with_native=False, root=self.root)
        try:
            proc = build_native(self.built_tree, self.timeout, self.cache)
        except subprocess.TimeoutExpired:
            return _baseline_error((), "building the unmutated C sources timed out", "")
        if proc.returncode != 0:
            return _baseline_error((), "the unmutated C sources do not build", (proc.stdout + proc.stderr)[-4000:])
        return None

    def test(self, run: Run, *, built: bool) -> Result | None:
        """``run`` on the tree's module (or, ``built``, the one ``build()`` made)."""
        sel, first = run
        got = run_tests(self._copy_for("built" if built else "tree"), sel, self.timeout, first)
        if got.rc == 0:
            return None
        where = "a build of the unmutated sources" if built else "the unmutated tree"
        order = f" ({first} first)" if first else ""
        return _baseline_error(sel, f"{' '.join(sel)}{order} fails on {where} (exit {got.rc})", got.output)

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def run_all(mutants: list[Mutant], *, jobs: int, timeout: float = 900.0, record: dict[str, str] | None = None,
            cache: CompilerCache | None = None, baseline: bool = True, keep: bool = False, root: Path = ROOT,
            workdir: str | None = None, on_result: Callable[[Result], None] | None = None,
            progress: Callable[[str], None] | None = None) -> tuple[Result | None, list[Result]]:
    """The baseline and every mutant, ``jobs`` tasks at a time, each in its own copy.

    Returns (the baseline's error or None, the mutants' results in ``mutants`` order).
    Baseline and mutants share one queue, so no worker idles at a phase boundary; a
    mutant's outcome counts only if the baseline is green (on a baseline failure the
    queue stops and the error is returned). Each distinct baseline run goes once. The
    order: the baseline's C build first; once it is done the C mutants (the longest
    tasks: a build each; they wait for it so that they find its objects in the cache)
    and the C runs of the baseline; the Python tasks fill the workers before and after.
    """
    record = record or {}
    runs = {m.id: (m.tests, record.get(m.id)) for m in mutants}
    natives = [m for m in mutants if m.native]
    base = Baseline(timeout=timeout, cache=cache, root=root, workdir=workdir) if baseline else None

    def mutant_task(m: Mutant) -> tuple[str, bool, Mutant | None, Callable[[], Result | None]]:
        return (m.id, m.native and base is not None, m, lambda: run_mutant(
            m, keep=keep, timeout=timeout, workdir=workdir, first=runs[m.id][1], cache=cache, root=root))

    # (name, needs the baseline's build, mutant, work); the list is the priority order
    tasks: list[tuple[str, bool, Mutant | None, Callable[[], Result | None]]] = []
    if base is not None and natives:
        tasks.append(("build", False, None, base.build))
    tasks += [mutant_task(m) for m in natives]
    if base is not None:
        for run in dict.fromkeys(runs[m.id] for m in natives):
            tasks.append(("baseline", True, None, lambda run=run: base.test(run, built=True)))
        for run in dict.fromkeys(runs[m.id] for m in mutants if not m.native):
            tasks.append(("baseline", False, None, lambda run=run: base.test(run, built=False)))
    total = sum(t[0] == "baseline" for t in tasks)
    tasks += [mutant_task(m) for m in mutants if not m.native]

    cond = threading.Condition()
    state: dict[str, object] = {"built": base is None or not natives, "failed": None, "green": 0}
    results: dict[str, Result] = {}

    def worker() -> None:
        while True:
            with cond:
                while True:
                    if state["failed"] is not None or not tasks:
                        return
                    pick = next((i for i, t in enumerate(tasks) if state["built"] or not t[1]), None)
                    if pick is not None:
                        name, _, mutant, work = tasks.pop(pick)
                        break
                    cond.wait()
            try:
                out = work()
            except Exception as exc:  # a harness bug: an error, never a kill
                detail = f"harness failed: {exc!r}"
                out = Result(mutant, "error", detail) if mutant else _baseline_error((), detail, "")
            with cond:
                if name == "build":
                    state["built"] = True
                    if progress:
                        progress("baseline: the unmutated C sources built" if out is None else out.detail)
                if name in ("build", "baseline"):
                    if out is not None and state["failed"] is None:
                        state["failed"] = out
                    if name == "baseline" and out is None:
                        state["green"] = int(state["green"]) + 1  # type: ignore[call-overload]
                        if progress and state["green"] == total:
                            progress(f"baseline: all {total} distinct runs green")
                elif out is not None:
                    results[name] = out
                    if on_result:
                        on_result(out)
                cond.notify_all()

    try:
        threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        if base is not None:
            base.close()
    if state["failed"] is not None:
        return state["failed"], [results[m.id] for m in mutants if m.id in results]
    return None, [results[m.id] for m in mutants]


def _baseline_error(sel: tuple[str, ...], detail: str, log: str) -> Result:
    base = Mutant("baseline", "", "", "", "the unmutated tree", sel)
    return Result(base, "error", detail, log=log)
