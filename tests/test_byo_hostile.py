# SPDX-License-Identifier: MIT
"""compile() on hostile ground: C that only warns, a cache that cannot be written,
names that clash with Python.h, K&R definitions, cached modules swapped on disk."""
from __future__ import annotations

import errno
import glob
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import tensorffi
from tensorffi import _buildworker, byo

COMPILERS = [c for c in ("gcc", "clang") if shutil.which(c)]


# --------------------------------------------------------------------------- #
# Warnings that mean wrong code are errors; the others are shown               #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("cc", COMPILERS)
def test_a_call_without_a_prototype_is_a_build_error(tmp_path, monkeypatch, cc):
    # without a prototype C assumes `int scale()`: the double it returns is read as
    # an int register and the int argument is passed where a double is expected
    monkeypatch.setenv("CC", cc)
    (tmp_path / "scale.c").write_text("double scale(double v) { return 2.0 * v; }\n")
    with pytest.raises(tensorffi.BuildError) as err:
        tensorffi.compile("noproto", sources=[tmp_path / "scale.c"], cache=tmp_path / "cache", source=(
            "void fill(double *x, int n) {\n    for (int i = 0; i < n; i++) x[i] = scale(i + 1);\n}\n"))
    assert "<source>:2:" in str(err.value) and "scale" in str(err.value)
    assert "implicit" in str(err.value)


@pytest.mark.parametrize("cc", COMPILERS)
def test_other_warnings_are_shown_once(tmp_path, monkeypatch, rng, cc):
    monkeypatch.setenv("CC", cc)
    a, b = (float(v) for v in rng.uniform(-5, 5, 2))
    source = f'double affine(double x) {{ return {a!r} * x + {b!r}; }}\n#warning "check the coefficients"\n'
    with pytest.warns(tensorffi.BuildWarning, match=r"<source>:2:\d+: warning: .*check the coefficients"):
        lib = tensorffi.compile("warned", source=source, cache=tmp_path / "cache")
    x = float(rng.standard_normal())
    assert lib.affine(x) == a * x + b
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a cached load is quiet
        assert tensorffi.compile("warned", source=source, cache=tmp_path / "cache").affine(x) == a * x + b


def test_strict_flags_follow_the_compiler():
    gcc = _buildworker.strict_flags({"__GNUC__": "12"})
    clang = _buildworker.strict_flags({"__GNUC__": "4", "__clang__": "1"})
    for flags in (gcc, clang):
        for w in ("implicit-function-declaration", "implicit-int", "incompatible-pointer-types", "int-conversion",
                  "return-type"):
            assert f"-Werror={w}" in flags
    assert "-Werror=builtin-declaration-mismatch" in gcc and "-Werror=builtin-declaration-mismatch" not in clang
    assert "-Werror=incompatible-function-pointer-types" in clang and "-Werror=incompatible-function-pointer-types" not in gcc
    assert _buildworker.strict_flags({}) == []  # an unknown compiler: no flags it might reject


# --------------------------------------------------------------------------- #
# A cache that cannot be used                                                  #
# --------------------------------------------------------------------------- #


def test_a_cache_under_a_file_builds_in_a_private_folder(tmp_path, rng):
    # chmod does not stop root: a path under a regular file is unwritable for everyone
    (tmp_path / "afile").write_text("")
    k = int(rng.integers(1, 1000))
    with pytest.warns(tensorffi.CacheWarning, match=r"afile.* not a folder.*private temporary folder"):
        lib = tensorffi.compile("nocache", source=f"int k(int x) {{ return x + {k}; }}", cache=tmp_path / "afile" / "x")
    assert lib.k(5) == 5 + k
    assert (tmp_path / "afile").read_text() == ""


def test_a_full_disk_builds_in_a_private_folder(tmp_path, monkeypatch, rng):
    cache = tmp_path / "cache"
    real = byo._cache.write_atomic

    def full(path, data):
        if str(path).startswith(str(cache)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, data)

    monkeypatch.setattr(byo._cache, "write_atomic", full)
    k = int(rng.integers(1, 1000))
    with pytest.warns(tensorffi.CacheWarning, match=r"No space left on device.*private temporary folder"):
        lib = tensorffi.compile("fulldisk", source=f"int k(int x) {{ return x * {k}; }}", cache=cache)
    assert lib.k(3) == 3 * k
    # no module left behind without the manifest that vouches for it
    assert not glob.glob(str(cache / "_tf_*"))


def test_a_bad_cache_size_is_a_cache_error(monkeypatch):
    for bad in ("bogus", "inf", "-1G", "nan"):
        monkeypatch.setenv("TENSORFFI_CACHE_SIZE", bad)
        with pytest.raises(tensorffi.CacheError, match=f"TENSORFFI_CACHE_SIZE.*{bad}"):
            tensorffi.cache.limit()


# --------------------------------------------------------------------------- #
# Declarations the wrapper cannot take                                         #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("cc", COMPILERS)
def test_a_type_named_like_a_python_h_type_is_named(tmp_path, monkeypatch, cc):
    monkeypatch.setenv("CC", cc)
    with pytest.raises(tensorffi.BuildError) as err:
        tensorffi.compile("pyobj", source="typedef struct { int x; } PyObject;\nint getx(const PyObject *o) { return o->x; }\n",
                          cache=tmp_path / "cache")
    text = str(err.value)
    assert "PyObject" in text.splitlines()[0] and "Python.h" in text.splitlines()[0]
    assert "corrupt memory" not in text and "<source>:1:" in text


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("name, decl", [
    ("destructor", "typedef void (*destructor)(void *);"),
    ("getter", "typedef int (*getter)(void *, int);"),
    ("setter", "typedef int (*setter)(void *, int, int);"),
    ("visitproc", "typedef long visitproc;"),
])
def test_a_plain_python_h_type_name_is_named_not_blamed_on_the_declaration(tmp_path, monkeypatch, cc, name, decl):
    """Python.h declares plain names too: the BuildError names the collision, not
    "does not match its definition" (on 36e677b it blamed the user's declaration)."""
    monkeypatch.setenv("CC", cc)
    with pytest.raises(tensorffi.BuildError) as err:
        tensorffi.compile("pyplain", source=f"{decl}\nint use({name} *p) {{ return p != 0; }}\n", cache=tmp_path / "c")
    first = str(err.value).splitlines()[0]
    assert f"your type {name} has the name of a type of Python.h" in first
    assert "does not match its definition" not in first


def test_a_knr_definition_is_refused_by_name_and_binds_with_a_prototype(tmp_path, rng):
    knr = "int add(a, b)\n    int a;\n    int b;\n{ return a + b; }\nint neg(int v) { return -v; }\n"
    with pytest.raises(tensorffi.DeclarationError, match=r"<source>:1: 'add' is a K&R-style definition.*prototype") as err:
        tensorffi.compile("knr", source=knr, cache=tmp_path / "cache")
    assert (err.value.file, err.value.line) == ("<source>", 1)
    lib = tensorffi.compile("knr", "int add(int a, int b); int neg(int v);", source=knr, cache=tmp_path / "cache")
    x, y = (int(v) for v in rng.integers(-10**6, 10**6, 2))
    assert lib.add(x, y) == x + y and lib.neg(x) == -x


# --------------------------------------------------------------------------- #
# A cached module replaced on disk                                             #
# --------------------------------------------------------------------------- #


def test_a_swapped_cached_module_is_rebuilt(tmp_path, rng):
    cache = tmp_path / "cache"
    va, vb = (int(v) for v in rng.integers(0, 1000, 2))
    script = (
        "import sys, tensorffi\n"
        "for name, v in zip(sys.argv[1::2], sys.argv[2::2]):\n"
        f"    print(tensorffi.compile(name, source='int v(void) {{ return %s; }}' % v, cache={str(cache)!r}).v())\n"
    )
    # fresh processes: the loader keeps a module this process mapped
    run = lambda *a: subprocess.run([sys.executable, "-c", script, *a], capture_output=True, text=True, timeout=300)
    proc = run("swap_a", str(va), "swap_b", str(vb))
    assert proc.returncode == 0 and proc.stdout.split() == [str(va), str(vb)], proc.stderr
    (so_a,) = cache.glob("_tf_swap_a_*.so")
    (so_b,) = cache.glob("_tf_swap_b_*.so")
    shutil.copyfile(so_b, so_a)  # a valid module, but not the one built for swap_a
    proc = run("swap_a", str(va))
    assert proc.returncode == 0 and proc.stdout.split() == [str(va)], proc.stderr
    manifest = json.loads(Path(str(so_a)[:-3] + ".json").read_text())
    assert manifest["sha256"] == byo._file_sha(str(so_a)) != byo._file_sha(str(so_b))


# --------------------------------------------------------------------------- #
# Real system headers                                                          #
# --------------------------------------------------------------------------- #


@pytest.mark.skipif(not os.path.exists("/usr/include/fftw3.h"), reason="needs libfftw3-dev")
def test_a_system_header_binds_what_cffi_can_say_and_names_the_rest(tmp_path, rng):
    """fftw3.h declares __float128 APIs and functions of libraries not linked (libfftw3f,
    libfftw3q): those are left out, each named; the rest is bound and computes."""
    with pytest.warns(tensorffi.BuildWarning) as shown:
        fftw = tensorffi.compile("fftw3", header="/usr/include/fftw3.h", libraries=["fftw3"], cache=tmp_path / "cache",
                                 extra_compile_args=["-O0"],  # 66 wrappers: quicker to build unoptimised
                                 contracts={"fftw_plan_dft_r2c_1d": "in: [n]"})
    text = "\n".join(str(w.message) for w in shown)
    assert "uses __float128, which cffi cannot express: fftwq_complex (/usr/include/fftw3.h:" in text
    assert "defined in no library linked (libraries: fftw3)" in text and "fftwf_execute" in text
    assert "fftwq_plan_dft_1d" not in fftw.functions and "fftw_execute" in fftw.functions
    n = int(rng.integers(8, 64))
    x = rng.standard_normal(n)
    inp = tensorffi.buffer(n, dtype=torch.float64)
    out = tensorffi.buffer(n // 2 + 1, dtype=torch.complex128)  # fftw_complex (double[2]) is complex128
    plan = fftw.fftw_plan_dft_r2c_1d(n, inp, out, 1 << 6)  # FFTW_ESTIMATE
    inp.copy_(torch.from_numpy(x))
    fftw.fftw_execute(plan)
    fftw.fftw_destroy_plan(plan)
    np.testing.assert_allclose(out.numpy(), np.fft.rfft(x), rtol=1e-10, atol=1e-10)


def test_a_struct_holding_a_system_type_by_value_binds(tmp_path, rng):
    (tmp_path / "job.h").write_text(
        "#include <pthread.h>\n#include <stdint.h>\n"
        "typedef struct job { pthread_mutex_t lock; double *data; int64_t n; } job;\n"
        "int job_init(job *j, double *data, int64_t n);\ndouble job_sum(job *j);\n")
    (tmp_path / "job.c").write_text(
        '#include "job.h"\n'
        "int job_init(job *j, double *data, int64_t n) { j->data = data; j->n = n; return pthread_mutex_init(&j->lock, 0); }\n"
        "double job_sum(job *j) { double s = 0; pthread_mutex_lock(&j->lock);\n"
        "    for (int64_t i = 0; i < j->n; i++) s += j->data[i]; pthread_mutex_unlock(&j->lock); return s; }\n")
    x = rng.standard_normal(int(rng.integers(1, 100)))
    for kw in ({}, {"header": tmp_path / "job.h"}):
        lib = tensorffi.compile("job", sources=[tmp_path / "job.c"], cache=tmp_path / "cache", **kw)
        j = lib.struct("job")
        assert lib.ffi.sizeof("job") == lib.ffi.sizeof("pthread_mutex_t") + 16
        assert lib.job_init(j, x, len(x)) == 0
        assert lib.job_sum(j) == pytest.approx(float(np.sum(x)), rel=1e-12)
