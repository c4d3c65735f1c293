# SPDX-License-Identifier: MIT
"""SciPy's own sosfilt-family tests, run with tensorffi.signal in place of scipy.signal's.

The installed SciPy's ``signal/tests/test_signaltools.py`` is run in a fresh pytest
process with tests/scipy_signal_plugin.py, which substitutes tensorffi's
``sosfilt``, ``sosfilt_zi`` and ``sosfiltfilt`` (a subprocess, so that the
substitution never reaches the references of the other tests). Every selected
test must pass: SciPy's results, dtypes (``result_type(sos, x, zi)``), complex
inputs and error messages.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tensorffi

scipy = pytest.importorskip("scipy")
SUITE = Path(scipy.__file__).parent / "signal" / "tests" / "test_signaltools.py"
SELECT = "TestSOSFilt or sosfilt or SOSFiltFilt"


def _run(extra_env: dict[str, str] | None = None) -> tuple[int, str]:
    if not SUITE.exists():
        pytest.skip(f"this SciPy install has no test files ({SUITE} is missing)")
    env = dict(os.environ, **(extra_env or {}))
    # the plugin, and the same tensorffi as this process
    paths = [str(Path(__file__).parent), str(Path(tensorffi.__file__).parents[1]), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "scipy_signal_plugin",
        # dask.array (found when dask is installed, as with the test extra) is a lazy
        # backend: tensorffi computes eagerly and returns NumPy for it, as for any
        # array-likes it does not produce; scale-out with dask maps sosfilt over blocks.
        f"--rootdir={SUITE.parents[2]}", str(SUITE), "-k", f"({SELECT}) and not dask",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "array_api, least",
    [("", 40), ("1", 60)],
    ids=["numpy", "array-api-backends"],
)
def test_scipy_sosfilt_family_suite_passes_with_tensorffi(array_api, least):
    # SCIPY_ARRAY_API=1 runs the suite on every array library SciPy finds (torch among them)
    rc, out = _run({"SCIPY_ARRAY_API": array_api} if array_api else None)
    summary = out.strip().splitlines()[-1] if out.strip() else ""
    assert rc == 0, out[-6000:]
    assert "failed" not in summary and "error" not in summary, summary
    # SciPy 1.17 selects 43 such tests on NumPy (2 skipped), 86 with the array-API backends
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= least, summary
