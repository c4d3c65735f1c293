# SPDX-License-Identifier: MIT
"""The command line: python -m tensorffi --help | --version | info | demo | bench | cache."""
from __future__ import annotations

import json
import os
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


def test_demo_ends_with_next_steps(tmp_path, monkeypatch):
    # ...and writes nothing into the user's cache of compiled modules
    monkeypatch.setenv("TENSORFFI_CACHE_DIR", str(tmp_path / "user-cache"))
    lines: list[str] = []
    assert cli.demo(lines.append) == 0
    assert not (tmp_path / "user-cache").exists() or not any((tmp_path / "user-cache").iterdir())
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


def _bad_inputs(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    return [
        ({"TENSORFFI_CACHE_SIZE": "bogus"}, ["cache", "list", "--dir", str(tmp_path / "c")], "TENSORFFI_CACHE_SIZE"),
        ({"TENSORFFI_CACHE_SIZE": "inf"}, ["cache", "list", "--dir", str(tmp_path / "c")], "TENSORFFI_CACHE_SIZE"),
        ({}, ["cache", "list", "--dir", str(afile)], "is a file, not a folder"),
        ({}, ["cache", "clear", "--dir", str(afile / "x")], "is a file, not a folder"),
        ({"TENSORFFI_CACHE_DIR": str(afile)}, ["cache", "path"], "is a file, not a folder"),
        ({}, ["cache", "list", "--dir", str(shared)], "writable by other users"),
        ({}, ["cache", "clear", "--dir", ""], "--dir: the folder name is empty"),
        ({}, ["bench", "--seconds", "-1"], "--seconds: must be a positive"),
    ]


def test_bad_inputs_are_one_line_and_status_2(tmp_path, monkeypatch, capsys):
    for env, argv, what in _bad_inputs(tmp_path):
        with monkeypatch.context() as m:
            for k, v in env.items():
                m.setenv(k, v)
            try:
                rc = cli.main(argv)
            except SystemExit as exc:  # argparse's own errors
                rc = exc.code
        err = capsys.readouterr().err
        assert rc == 2, (argv, err)
        last = err.strip().splitlines()[-1]
        assert last.startswith("tensorffi") and "error: " in last and what in last, (argv, err)
        assert "Traceback" not in err


def test_a_bad_cache_size_in_a_fresh_process_is_one_line(tmp_path):
    out = run("cache", "list", "--dir", str(tmp_path), env=dict(os.environ, TENSORFFI_CACHE_SIZE="bogus"))
    assert out.returncode == 2
    assert out.stderr.strip() == "tensorffi: error: TENSORFFI_CACHE_SIZE must be a size like 500M or 2G, got 'bogus'"
