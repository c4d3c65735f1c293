# SPDX-License-Identifier: MIT
"""The command line: python -m tensorffi --help | --version | info | demo | bench | cache."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import tensorffi
from tensorffi import __main__ as cli


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-W", "error", "-m", "tensorffi", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_help_is_plain_text():
    out = run("--help")
    assert out.returncode == 0
    text = out.stdout
    assert "usage: tensorffi" in text
    for command in ("demo", "info", "bench", "cache"):
        assert f"    {command}" in text
    # reStructuredText markup would show as ``literal`` or :func:`...`
    assert "``" not in text and ":func:" not in text and "::" not in text


def test_version():
    out = run("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"tensorffi {tensorffi.__version__}"


def test_no_command_prints_help_and_fails():
    out = run()
    assert out.returncode == 2 and "usage: tensorffi" in out.stdout


def test_info_human_and_json(capsys):
    assert cli.main(["info"]) == 0
    text = capsys.readouterr().out
    facts = tensorffi.info()
    assert f"version                  {facts['version']}" in text or facts["version"] in text.splitlines()[0]
    assert "SIMD level" in text and "{" not in text
    assert cli.main(["info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == dict(facts)


def test_demo_ends_with_next_steps():
    lines: list[str] = []
    assert cli.demo(lines.append) == 0
    text = "\n".join(lines)
    assert "demo finished: 5 kernel families ran" in text
    tail = text[text.index("what to try next"):]
    assert "README" in tail and "quickstart.ipynb" in tail and "tensorffi bench" in tail and "%%tensorffi" in tail


def test_bench_tour_shows_peers_and_ratios(monkeypatch):
    from tensorffi import _bench

    lines: list[str] = []
    assert _bench.tour(lines.append, seconds=0.4) == 0
    text = "\n".join(lines)
    for peer in ("ctypes seed recipe", "raw cffi", "numpy.loadtxt", "torch (broadcast)"):
        assert peer in text
    ratios = [float(line.rsplit("ratio", 1)[1]) for line in lines if "ratio" in line and "tensorffi" in line
              and "=" not in line]
    assert len(ratios) >= 5 and all(r > 0 for r in ratios)


def test_bench_full_needs_a_checkout(monkeypatch):
    from tensorffi import _bench

    monkeypatch.setattr(_bench, "benchmarks_dir", lambda: None)
    lines: list[str] = []
    assert _bench.full(lines.append) == 2 and "source checkout" in lines[0]


def test_cache_command_is_kept(tmp_path, capsys):
    assert cli.main(["cache", "path", "--dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path)
    assert cli.main(["cache", "list", "--dir", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["modules"] == []
