# SPDX-License-Identifier: MIT
"""Every Python block of the README runs as written, in order, in an empty folder.

```python blocks run as Python; ```ipython blocks (the notebook section) run in an
IPython shell sharing the same namespace, under ``__name__ == "__main__"`` as a
script's (the dask block starts worker processes). No block is skipped: the test
fails if one is marked ``<!-- readme-test: skip (reason) -->``.

A block marked ``<!-- readme-test: ray -->`` needs Ray (``pip install ray``), which the
default test run does not install: it runs in its place in the sequence where Ray is
importable and is left out where it is not, and the test marked ``ray`` (``python -m
pytest -m ray``, run by ``.ci/ray``; ``TENSORFFI_REQUIRE_RAY=1`` makes a missing Ray a
failure) runs the sequence up to the last such block. Ray runs with
``RAY_AUTH_MODE=disabled`` (nothing written into ``~/.ray``) and a temporary folder.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SKIP = re.compile(r"<!--\s*readme-test:\s*skip\b.*-->")
NEEDS_RAY = re.compile(r"<!--\s*readme-test:\s*ray\s*-->")
RAY_SHOWN = ("tensor([0., 1., 4., 9.], dtype=torch.float64)", "tensor([12., 12., 12.], dtype=torch.float64)")
SHOWN_ONCE = ("process_data(): argument 'data' (float *) expects dtype torch.float32, got torch.float64",
              "tensor([0.2500], dtype=torch.float64)", "safe_div()", "tensor([3., 3., 3., 3.])",
              "tensor([9.], dtype=torch.float64)", "[[0.0, 1.0, 4.0, 9.0], [16.0, 25.0, 36.0, 49.0]]",
              "scale_into(x, a, *, y=None, rows=None, cols=None)", "tensor([-2., -1.,  0.,  1.,  2.])",
              "median_of() threw std::invalid_argument: median of nothing")
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.M | re.S)

DRIVER = r'''
import json, sys, traceback


def main():
    blocks = json.load(open(sys.argv[1]))
    ns = {"__name__": "__main__"}
    shell = None
    for b in blocks:
        print(f"\n### README.md line {b['line']} ({b['kind']})", flush=True)
        try:
            if b["kind"] == "python":
                exec(compile(b["code"], f"README.md:{b['line']}", "exec"), ns)
            else:
                if shell is None:
                    from IPython.core.interactiveshell import InteractiveShell
                    shell = InteractiveShell.instance(user_ns=ns)
                result = shell.run_cell(b["code"])
                result.raise_error()
        except BaseException:
            traceback.print_exc()
            print(f"README block at line {b['line']} failed", file=sys.stderr)
            sys.exit(1)
    print("\nREADME: all blocks ran", flush=True)
    sys.stderr.flush()
    # (torch.compile's weak references into the shared IPython namespace complain at
    # interpreter shutdown; a plain script does not, so skip the teardown)
    import os
    os._exit(0)


# the README's dask cluster starts worker processes, which import this script: only
# the process started as a script runs the blocks
if __name__ == "__main__":
    main()
'''


def blocks(kinds: tuple[str, ...] = ("python", "ipython"), *, ray: bool = True) -> tuple[list[dict], list[int]]:
    """(the runnable blocks in order, the line numbers of skipped ones). Blocks marked
    as needing Ray are left out unless ``ray``; each block says whether it needs it."""
    text = README.read_text()
    run, skipped = [], []
    for m in FENCE.finditer(text):
        kind = m.group(1)
        if kind not in ("python", "ipython"):
            continue
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        needs_ray = bool(NEEDS_RAY.search(before))
        if SKIP.search(before):
            skipped.append(line)
        elif kind in kinds and (ray or not needs_ray):
            run.append({"kind": kind, "line": line + 1, "code": m.group(2), "ray": needs_ray})
    return run, skipped


def ray_importable() -> bool:
    return importlib.util.find_spec("ray") is not None


def run_blocks(python: str, tmp_path: Path, kinds: tuple[str, ...], env: dict | None = None, *, ray: bool = False,
               through_ray: bool = False) -> subprocess.CompletedProcess:
    """Run the README's blocks of ``kinds`` (and those needing Ray if ``ray``; only up
    to the last of those if ``through_ray``) with ``python``, in an empty folder."""
    run, _ = blocks(kinds, ray=ray)
    if through_ray:
        run = run[: max(i for i, b in enumerate(run) if b["ray"]) + 1]
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "blocks.json").write_text(json.dumps(run))
    (tmp_path / "driver.py").write_text(DRIVER)
    if env is None:
        # the tensorffi this test run imported (an installed one, or a checkout on
        # PYTHONPATH), not whichever one an empty folder's Python would find
        import tensorffi

        env = dict(os.environ, PYTHONPATH=str(Path(tensorffi.__file__).resolve().parents[1]))
    else:
        env = dict(env)
        env.pop("PYTHONPATH", None)  # the package installed in that environment
    env["TENSORFFI_CACHE_DIR"] = str(tmp_path / "cache")
    ray_tmp = None
    if any(b["ray"] for b in run):
        # no token written into ~/.ray; Ray's sockets under a short path (AF_UNIX: 107 bytes)
        ray_tmp = tempfile.mkdtemp(prefix="tfray-")
        env.update(RAY_AUTH_MODE="disabled", RAY_TMPDIR=ray_tmp)
    try:
        return subprocess.run([python, str(tmp_path / "driver.py"), str(tmp_path / "blocks.json")], cwd=work, env=env,
                              capture_output=True, text=True, timeout=900)
    finally:
        if ray_tmp:
            shutil.rmtree(ray_tmp, ignore_errors=True)


def test_the_readme_has_the_blocks_this_test_runs():
    run, skipped = blocks()
    kinds = [b["kind"] for b in run]
    assert kinds.count("python") >= 10 and kinds.count("ipython") >= 3
    assert not skipped, f"README blocks marked skip at lines {skipped}: every block runs"
    assert any(b["ray"] for b in run) and not any(b["ray"] for b in blocks(ray=False)[0])
    assert any("tensorffi.load(\"./mylib.so\", \"void process_data(float *data, int size);\")" in b["code"] for b in run)


def test_every_block_runs_in_order_in_an_empty_folder(tmp_path):
    pytest.importorskip("IPython")
    with_ray = ray_importable()  # else its blocks are left out (the test marked ray runs them)
    proc = run_blocks(sys.executable, tmp_path, ("python", "ipython"), ray=with_ray)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    out = proc.stdout
    assert "README: all blocks ran" in out
    # what the README's comments say the prints show
    for shown in SHOWN_ONCE + ("tensor([-2., -1.,  0.,  1.,  2.])\nTrue",
                               "3.0\nmedian_of() threw std::invalid_argument: median of nothing") + (RAY_SHOWN if with_ray else ()):
        assert shown in out, shown
    assert "Warning" not in proc.stderr, proc.stderr[-3000:]


def test_the_python_blocks_pasted_into_one_script_run_each_once(tmp_path):
    """A user's way: every ```python block pasted, in order, into one file run as
    ``python readme.py`` (the ipython blocks are notebook cells, not script lines). The
    dask block's worker processes must not run the script again: each output the
    README shows appears exactly once."""
    pytest.importorskip("distributed")
    run, _ = blocks(("python",), ray=False)
    work = tmp_path / "work"
    work.mkdir()
    (work / "readme.py").write_text("\n\n".join(b["code"] for b in run))
    import tensorffi

    env = dict(os.environ, PYTHONPATH=str(Path(tensorffi.__file__).resolve().parents[1]),
               TENSORFFI_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "readme.py"], cwd=work, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    for shown in SHOWN_ONCE:
        assert proc.stdout.count(shown) == 1, (shown, proc.stdout[-3000:])
    assert "Traceback" not in proc.stderr and "Warning" not in proc.stderr, proc.stderr[-3000:]


@pytest.mark.ray
def test_the_ray_blocks_run_in_the_readme_sequence(tmp_path):
    """The README's Python blocks in order, up to and including the last block that
    needs Ray (the ones after it run in the default test)."""
    if os.environ.get("TENSORFFI_REQUIRE_RAY") == "1":
        assert ray_importable(), "TENSORFFI_REQUIRE_RAY=1 but ray is not importable (pip install ray)"
    else:
        pytest.importorskip("ray")
    proc = run_blocks(sys.executable, tmp_path, ("python",), ray=True, through_ray=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "README: all blocks ran" in proc.stdout
    for shown in RAY_SHOWN:
        assert shown in proc.stdout, shown
    assert "Warning" not in proc.stderr, proc.stderr[-3000:]


@pytest.mark.slow
def test_command_one_installs_what_the_readme_needs(tmp_path):
    """README command 1 in a fresh virtual environment, from a copy of the clone,
    then every Python block with that environment's Python (the ipython blocks need
    a notebook: pip install ".[notebook]")."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    text = README.read_text()
    command = re.search(r"^# 1\. .*\n(.+)$", text, re.M).group(1).strip()
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    clone = tmp_path / "clone"
    for f in files:
        src = ROOT / f
        if src.is_file():
            (clone / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, clone / f)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = dict(os.environ, PATH=f"{venv / 'bin'}:{os.environ['PATH']}", VIRTUAL_ENV=str(venv),
               TENSORFFI_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "what to try next" in proc.stdout
    # the README's dask block needs what it says to install
    subprocess.run([str(venv / "bin" / "pip"), "install", "dask[distributed]"], env=env, check=True, capture_output=True,
                   timeout=900)
    proc = run_blocks(str(venv / "bin" / "python"), tmp_path, ("python",), env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
