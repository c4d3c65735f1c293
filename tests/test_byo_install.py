# SPDX-License-Identifier: MIT
"""The README's first command, as a new user runs it: from the clone's root, in a
fresh virtual environment. The clone's root holds the (unbuilt) source folder
``tensorffi/``; the demo compiles C with tensorffi.compile(), which must use the
installed package and import nothing from the current directory."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _readme_command() -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"^# 1\. .*\n(.+)$", text, re.M)
    assert m, "README: command 1 not found"
    return m.group(1).strip()


def test_readme_command_one_is_the_install_and_demo():
    assert _readme_command() == "pip install torch==2.13.0 && pip install . && tensorffi demo"


@pytest.mark.slow
def test_readme_command_one_from_the_clone_root(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
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
    proc = subprocess.run(["bash", "-c", _readme_command()], cwd=clone, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "demo finished" in proc.stdout
    assert list((tmp_path / "cache").glob("_tf_demo_seed_*.so"))  # the demo's compile() ran
