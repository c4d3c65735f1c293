# SPDX-License-Identifier: MIT
"""The build: declaration order, strictness, version stamp."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _builder():
    sys.path.insert(0, str(ROOT))
    try:
        import build_ffi
    finally:
        sys.path.remove(str(ROOT))
    return build_ffi


def test_every_cdef_file_is_in_the_build_order():
    build_ffi = _builder()
    on_disk = sorted(p.name for p in (ROOT / "cdefs").glob("*.h"))
    assert sorted(build_ffi.CDEF_ORDER) == on_disk
    assert build_ffi.CDEF_ORDER[0] == "core.h" and build_ffi.CDEF_ORDER[-1] == "python.h"


def test_each_declaration_is_written_once():
    # csrc/tensorffi.h includes cdefs/ (in the build order, all but the cffi-only
    # python.h) and declares nothing public itself: only its internal section does.
    import re

    build_ffi = _builder()
    header = (ROOT / "csrc" / "tensorffi.h").read_text()
    public, internal = header.split("#ifdef TF_INTERNAL", 1)
    included = re.findall(r'#include "\.\./cdefs/([\w.]+)"', public)
    assert included == [n for n in build_ffi.CDEF_ORDER if n != "python.h"]
    code = re.sub(r"/\*.*?\*/", "", public, flags=re.S)
    code = re.sub(r"#ifdef __cplusplus.*?#endif", "", code, flags=re.S)
    assert ";" not in code, "a public declaration in csrc/tensorffi.h: it belongs in cdefs/"
    defined = set(re.findall(r"\b(tf_\w+)\s*\(", re.sub(r"/\*.*?\*/", "", internal, flags=re.S)))
    for name in build_ffi.CDEF_ORDER:
        text = re.sub(r"/\*.*?\*/", "", (ROOT / "cdefs" / name).read_text(), flags=re.S)
        twice = defined & set(re.findall(r"\b(tf_\w+)\s*\(", text))
        assert not twice, f"declared in cdefs/{name} and again in tensorffi.h's internal section: {twice}"


def test_cdef_that_disagrees_with_the_header_fails_the_build(tmp_path):
    for name in ("build_ffi.py", "cdefs", "csrc", "tensorffi/_version.py", "tensorffi/_decl.py", "tensorffi/_shims.py"):
        src = ROOT / name
        dst = tmp_path / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)
    core = tmp_path / "cdefs" / "core.h"
    text = core.read_text()
    bad = text.replace("void tf_core_scale_f32(float *x, int64_t n, float a);", "void tf_core_scale_f32(double *x, int64_t n, float a);")
    assert bad != text
    core.write_text(bad)
    proc = subprocess.run(
        [sys.executable, "build_ffi.py"],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert proc.returncode != 0
    assert "tf_core_scale_f32" in proc.stdout + proc.stderr


def test_stale_native_module_is_a_clear_import_error(tmp_path):
    import tensorffi

    pkg = Path(tensorffi.__file__).parent
    copy = tmp_path / "tensorffi"
    shutil.copytree(pkg, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "_version.py").write_text('__version__ = "999.0"\n')
    proc = subprocess.run(
        [sys.executable, "-c", "import tensorffi"],
        cwd=tmp_path, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(tmp_path)),
    )
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr and "stale" in proc.stderr


def test_portable_build_has_no_march_native():
    import tensorffi

    info = tensorffi.info()
    if not info["native_build"]:
        assert "-march" not in info["build_flags"]
