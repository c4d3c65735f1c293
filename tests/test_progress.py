# SPDX-License-Identifier: MIT
"""Progress bars (tensorffi._progress): one mechanism for every kernel, integer counts,
bars that end where the work ended, no warnings, few redraws."""
from __future__ import annotations

import importlib.machinery
import re
import warnings

import numpy as np
import pytest

import tensorffi
import tensorffi.physics as ph
from tensorffi import _progress


def frames(err: str) -> list[str]:
    return [f for f in err.replace("\r", "\n").splitlines() if f.strip()]


def test_a_text_bar_counts_integers_and_ends_at_its_total(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bar = _progress.Bar("work", "step")
        for done in range(0, 1001, 7):
            bar(done, 1000)
        bar(1000, 1000)
        bar.close()
    shown = frames(capsys.readouterr().err)
    assert shown[-1].startswith("work: 100%|") and " 1000/1000 " in shown[-1]
    assert not any(re.search(r"\d\.\d+/", f) for f in shown)  # no float counts ("37.0/1000.0")
    # 144 reports in a few milliseconds: redrawn at most twice a second, so the first
    # frame and the final one
    assert len(shown) <= 3


def test_a_bar_closed_early_keeps_the_last_value(capsys):
    bar = _progress.Bar("stopped", "step")
    bar(0, 200)
    bar(37, 200)
    bar.close()
    bar.close()  # idempotent
    last = frames(capsys.readouterr().err)[-1]
    assert " 37/200 " in last and "100%" not in last


def test_a_bar_never_moves_backwards_or_past_its_total(capsys):
    bar = _progress.Bar("b")
    bar(5, 10)
    bar(3, 10)
    bar(50, 10)
    assert (bar.n, bar.total) == (10, 10)
    bar.close()


def test_the_bar_fits_the_host(monkeypatch):
    monkeypatch.delenv("TENSORFFI_PROGRESS", raising=False)
    monkeypatch.setattr(_progress, "_in_kernel", lambda: False)
    assert _progress.bar_kind() == "text"  # a terminal or a script
    monkeypatch.setattr(_progress, "_in_kernel", lambda: True)
    monkeypatch.setattr(_progress.importlib.util, "find_spec", lambda name: None)
    assert _progress.bar_kind() == "text"  # a notebook without ipywidgets: no "IProgress not found"
    monkeypatch.setattr(_progress.importlib.util, "find_spec",
                        lambda name: importlib.machinery.ModuleSpec(name, None))
    assert _progress.bar_kind() == "widget"
    monkeypatch.setenv("TENSORFFI_PROGRESS", "text")
    assert _progress.bar_kind() == "text"


def test_nbody_bar_counts_whole_steps(capsys):
    names, pos, vel, mass = ph.jovian_system()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ph.nbody(pos, vel, mass, dt=0.01, steps=1000, progress=True)
    shown = frames(capsys.readouterr().err)
    assert shown[-1].startswith("nbody: 100%|") and " 1000/1000 " in shown[-1], shown
    assert not any(re.search(r"\d\.\d+/\d", f) for f in shown)


def test_count_bar_and_callable_progress(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tensorffi.core.count(100, 10, progress=True) == 100
    assert " 100/100 " in frames(capsys.readouterr().err)[-1]
    seen = []
    tensorffi.core.count(100, 10, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (100, 100) and all(type(d) is int and t == 100 for d, t in seen)


def test_read_csv_bar_counts_bytes(capsys):
    rng = np.random.default_rng(0)
    text = "\n".join(",".join(f"{v:.6f}" for v in row) for row in rng.standard_normal((2000, 4))).encode()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = tensorffi.io.read_csv(text, progress=True)
    assert tuple(t.shape) == (2000, 4)
    last = frames(capsys.readouterr().err)[-1]
    assert last.startswith("read_csv: 100%|")


def test_no_kernel_imports_tqdm_auto():
    import pathlib

    root = pathlib.Path(tensorffi.__file__).parent
    users = [p.name for p in root.glob("*.py") if "tqdm.auto" in p.read_text() and p.name != "_progress.py"]
    assert users == []
