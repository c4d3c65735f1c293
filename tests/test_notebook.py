# SPDX-License-Identifier: MIT
"""examples/quickstart.ipynb executed headless (nbclient, an ipykernel of this Python),
and examples/quickstart.py as a script.

The notebook's cells assert their own results against NumPy/torch references; here
we check that no cell failed, that the magic showed what it bound, that progress
bars fit the kernel (widgets with ipywidgets, a quiet text bar without) and that no
warning reached the user.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The executed notebook, run in a private folder with a private compile cache."""
    work = tmp_path_factory.mktemp("notebook")
    # A kernelspec for this very Python (a system-wide "python3" could be another one).
    spec = work / "jupyter" / "kernels" / "tensorffi-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "tensorffi test", "language": "python",
    }))
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", str(work / "jupyter") + os.pathsep + os.environ.get("JUPYTER_PATH", ""))
    mp.setenv("TENSORFFI_CACHE_DIR", str(work / "cache"))
    mp.delenv("TENSORFFI_PROGRESS", raising=False)
    nb = nbformat.read(EXAMPLES / "quickstart.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        nb, kernel_name="tensorffi-test", timeout=600, startup_timeout=180,
        resources={"metadata": {"path": str(work)}},
    )
    try:
        client.execute()
    finally:
        mp.undo()
    return nb


def outputs(nb, starts: str) -> list:
    cells = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(starts)]
    assert len(cells) == 1, starts
    return cells[0].outputs


def text_of(outs: list, name: str | None = None) -> str:
    parts = []
    for o in outs:
        if o.output_type == "stream" and (name is None or o.name == name):
            parts.append(o.text)
        elif o.output_type in ("display_data", "execute_result") and name is None:
            parts.append(o.data.get("text/plain", ""))
    return "".join(parts)


def test_every_cell_ran_without_error(executed):
    code = [c for c in executed.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    errors = [(c.source[:40], o.ename, o.evalue) for c in code for o in c.outputs if o.output_type == "error"]
    assert errors == []


def test_no_warning_reaches_the_user(executed):
    for c in executed.cells:
        for o in c.get("outputs", []):
            text = o.get("text", "") + json.dumps(o.get("data", {}))
            assert "Warning" not in text and "IProgress" not in text, (c.source[:40], text[:300])


def test_values(executed):
    assert "std 0.987 -> 0.558" in text_of(outputs(executed, "noisy = "))
    assert re.search(r"SNR -9\.5 dB -> 1\d\.\d dB", text_of(outputs(executed, "from importlib import resources")))
    assert "12.1 MB -> (100000, 6) torch.float64" in text_of(outputs(executed, "import pathlib"), "stdout")
    assert re.search(r"Jupiter's period 11\.9\d years", text_of(outputs(executed, "names, pos, vel")))
    assert "loss 11.3750" in text_of(outputs(executed, "def model"))


def test_rich_displays(executed):
    info = outputs(executed, "import numpy as np")[0]
    assert "<table>" in info.data["text/html"] and "SIMD level" in info.data["text/html"]
    lib = outputs(executed, "SEED = ")[0]
    assert "void process_data(float *data, int size)" in lib.data["text/html"]
    described = outputs(executed, "lib2 = ")[0]
    assert "[rows, cols]" in described.data["text/html"] and "allocated and returned" in described.data["text/plain"]


def test_the_magic_shows_what_it_bound(executed):
    (shown,) = [o for o in outputs(executed, "%%tensorffi smoothing") if o.output_type == "display_data"]
    assert re.match(r"(compiled|from the cache) and bound in \d+ ms: smooth3; the Library as smoothing",
                    shown.data["text/plain"])
    assert "void smooth3(const float *x, float *y, int64_t n)" in shown.data["text/html"]


def test_progress_bars_fit_the_kernel(executed):
    import importlib.util

    widgets = importlib.util.find_spec("ipywidgets") is not None
    for starts, unit_total in (("import pathlib", "12.1M/12.1M"), ("names, pos, vel", "100000/100000")):
        outs = outputs(executed, starts)
        shown = [o for o in outs if o.output_type == "display_data"]
        if widgets:
            assert any("application/vnd.jupyter.widget-view+json" in o.data for o in shown)
            continue
        assert not shown
        err = text_of(outs, "stderr")
        frames = [f for f in err.replace("\r", "\n").splitlines() if f.strip()]
        assert frames and "100%" in frames[-1] and unit_total in frames[-1], frames
        if "step" in err:  # whole steps (bytes are shown with SI prefixes: 12.1M)
            assert not any(re.search(r"\d\.\d+/\d", f) for f in frames), frames
        assert len(frames) <= 12  # redrawn at most twice a second, not at every report


def test_quickstart_script(tmp_path):
    env = dict(os.environ, TENSORFFI_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, str(EXAMPLES / "quickstart.py")], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("1. seed recipe: [1.0, 3.0, 5.0, 7.0, 9.0]; a float64 tensor is refused")
    assert any(line.startswith("6. n-body") for line in lines)
    assert "Warning" not in out.stderr


def test_the_notebook_is_stored_without_outputs():
    nb = nbformat.read(EXAMPLES / "quickstart.ipynb", as_version=4)
    assert all(not c.get("outputs") and not c.get("execution_count") for c in nb.cells if c.cell_type == "code")
    sys.path.insert(0, str(EXAMPLES))
    try:
        import make_quickstart
    finally:
        sys.path.pop(0)
    assert [c.source for c in make_quickstart.build().cells] == [c.source for c in nb.cells]
