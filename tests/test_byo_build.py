# SPDX-License-Identifier: MIT
"""compile(): content-keyed cache, declarations read from the sources, cdefs checked
against definitions, errors in the user's own terms, cache management."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import tensorffi
from tensorffi import cache as tfcache


def _modules(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if p.suffix == ".so")


# --------------------------------------------------------------------------- #
# The key covers every file the compiler read                                  #
# --------------------------------------------------------------------------- #


def test_an_edited_header_rebuilds(tmp_path):
    (tmp_path / "k.h").write_text("#define K 2\n")
    (tmp_path / "k.c").write_text('#include "k.h"\nint k(void) { return K; }\n')
    cache = tmp_path / "cache"
    assert tensorffi.compile("hdr", sources=[tmp_path / "k.c"], cache=cache).k() == 2
    (tmp_path / "k.h").write_text("#define K 5\n")
    assert tensorffi.compile("hdr", sources=[tmp_path / "k.c"], cache=cache).k() == 5
    (tmp_path / "k.h").write_text("#define K 2\n")  # back again: the first module is reused
    assert tensorffi.compile("hdr", sources=[tmp_path / "k.c"], cache=cache).k() == 2
    assert len(_modules(cache)) == 2
    manifest = json.loads(next(cache.glob("_tf_hdr_*.json")).read_text())
    assert sorted(Path(p).name for p, _ in manifest["deps"]) == ["k.c", "k.h"]


def test_a_header_found_through_include_dirs_is_tracked(tmp_path):
    inc = tmp_path / "include"
    inc.mkdir()
    (inc / "scale.h").write_text("static const double SCALE = 3.0;\n")
    src = tmp_path / "s.c"
    src.write_text('#include <scale.h>\ndouble scaled(double x) { return SCALE * x; }\n')
    cache = tmp_path / "cache"
    assert tensorffi.compile("inc", sources=[src], include_dirs=[inc], cache=cache).scaled(2.0) == 6.0
    (inc / "scale.h").write_text("static const double SCALE = -1.5;\n")
    assert tensorffi.compile("inc", sources=[src], include_dirs=[inc], cache=cache).scaled(2.0) == -3.0


def test_macros_and_flags_are_part_of_the_key(tmp_path):
    src = tmp_path / "m.c"
    src.write_text("int m(void) { return M; }\n")
    cache = tmp_path / "cache"
    assert tensorffi.compile("mac", sources=[src], define_macros=[("M", "7")], cache=cache).m() == 7
    assert tensorffi.compile("mac", sources=[src], define_macros=[("M", "9")], cache=cache).m() == 9
    assert tensorffi.compile("mac", sources=[src], define_macros=[("M", "9")], extra_compile_args=["-O0"], cache=cache).m() == 9
    assert len(_modules(cache)) == 3


def test_a_corrupt_cached_module_is_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    src = tmp_path / "c.c"
    src.write_text("int c(int x) { return x + 40; }\n")
    # fresh processes: truncating a module this process has mapped would crash it
    script = f"import sys, tensorffi; print(tensorffi.compile('corrupt', sources=[{str(src)!r}], cache={str(cache)!r}).c(int(sys.argv[1])))"
    run = lambda x: subprocess.run([sys.executable, "-c", script, str(x)], capture_output=True, text=True, timeout=300)
    proc = run(2)
    assert proc.returncode == 0 and proc.stdout.strip() == "42", proc.stderr
    (so,) = _modules(cache)
    with open(so, "r+b") as f:
        f.truncate(100)
    for x in (3, 4):  # rebuilt once, then cached again
        proc = run(x)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == str(40 + x)
    assert _modules(cache) == [so] and so.stat().st_size > 1000


def test_the_cache_records_its_modules_and_clears(tmp_path):
    cache = tmp_path / "cache"
    for v in (1, 2):
        tensorffi.compile("listed", source=f"int v(void) {{ return {v}; }}", cache=cache)
    facts = tfcache.info(cache)
    assert facts["path"] == str(cache)
    assert [m["name"] for m in facts["modules"]] == ["listed", "listed"]
    assert facts["bytes"] == sum(p.stat().st_size for p in _modules(cache))
    assert tfcache.clear(cache) == 2
    assert _modules(cache) == [] and tfcache.info(cache)["modules"] == []
    assert tensorffi.compile("listed", source="int v(void) { return 3; }", cache=cache).v() == 3


def test_the_cache_prunes_least_recently_used_modules(tmp_path, monkeypatch):
    cache = tmp_path / "cache"

    def build(v):
        return tensorffi.compile("lru", source=f"int v(void) {{ return {v}; }}", cache=cache).v()

    stems = lambda: {p.stem for p in _modules(cache)}
    assert build(1) == 1
    first = stems()
    assert build(2) == 2
    (second,) = stems() - first
    assert build(1) == 1  # a cache hit: the first module is now the most recently used
    size = max(p.stat().st_size for p in _modules(cache))
    monkeypatch.setenv("TENSORFFI_CACHE_SIZE", str(int(2.5 * size)))
    assert build(3) == 3
    assert len(stems()) == 2 and second not in stems() and first <= stems()


def test_cache_command_lists_and_clears(tmp_path):
    cache = tmp_path / "cache"
    tensorffi.compile("cli_mod", source="int one(void) { return 1; }", cache=cache)
    run = lambda *a: subprocess.run([sys.executable, "-m", "tensorffi", "cache", *a, "--dir", str(cache)],
                                    capture_output=True, text=True, timeout=120)
    listed = run("list")
    assert listed.returncode == 0 and "cli_mod" in listed.stdout and "1 module(s)" in listed.stdout
    as_json = json.loads(run("list", "--json").stdout)
    assert [m["name"] for m in as_json["modules"]] == ["cli_mod"]
    cleared = run("clear")
    assert cleared.returncode == 0 and "removed 1 module(s)" in cleared.stdout
    assert _modules(cache) == []


# --------------------------------------------------------------------------- #
# Declarations from the source                                                 #
# --------------------------------------------------------------------------- #

LIB_H = """\
#include <stdint.h>
typedef struct gain { float scale; float offset; } gain;
void apply(const gain *g, const float *x, float *y, int64_t n);
double dot(const double *a, const double *b, int64_t n);
"""
LIB_C = """\
#include <stdio.h>
#include <math.h>
#include "lib.h"
static double sq(double v) { return v * v; }
void apply(const gain *g, const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = g->scale * x[i] + g->offset;
}
double dot(const double *a, const double *b, int64_t n) {
    double s = 0; for (int64_t i = 0; i < n; i++) s += a[i] * b[i]; return s;
}
double norm2(const double *a, int64_t n) { double s = 0; for (int64_t i = 0; i < n; i++) s += sq(a[i]); return sqrt(s); }
"""


@pytest.fixture
def libdir(tmp_path):
    (tmp_path / "lib.h").write_text(LIB_H)
    (tmp_path / "lib.c").write_text(LIB_C)
    return tmp_path


def test_declarations_are_read_from_the_sources(libdir, cache, rng):
    lib = tensorffi.compile("fromsrc", sources=[libdir / "lib.c"], libraries=["m"], cache=cache)
    assert sorted(lib.functions) == ["apply", "dot", "norm2"]  # not static sq, not stdio's printf
    fn = lib.declarations.functions["dot"]
    assert [p.type.text for p in fn.params] == ["const double *", "const double *", "int64_t"]
    assert (fn.file, fn.line) == (str(libdir / "lib.c"), 8)
    a, b = rng.standard_normal(50), rng.standard_normal(50)
    a.flags.writeable = False  # const: an input, so a read-only array is accepted
    assert lib.dot(a, b, 50) == pytest.approx(float(np.dot(a, b)), rel=1e-12)
    assert lib.norm2(a, 50) == pytest.approx(float(np.linalg.norm(a)), rel=1e-12)
    x = torch.from_numpy(rng.standard_normal(8).astype(np.float32))
    y = torch.empty(8)
    lib.apply(lib.struct("gain", scale=2.0, offset=0.5), x, y, 8)
    torch.testing.assert_close(y, 2.0 * x + 0.5)


def test_declarations_from_a_header(libdir, cache):
    lib = tensorffi.compile("fromhdr", sources=[libdir / "lib.c"], header=libdir / "lib.h", libraries=["m"], cache=cache)
    assert sorted(lib.functions) == ["apply", "dot"]  # what the header declares
    assert lib.declarations.functions["apply"].file == str(libdir / "lib.h")


def test_a_header_function_no_source_defines_is_named(libdir, cache):
    (libdir / "lib.h").write_text(LIB_H + "int forgotten(int x);\n")
    with pytest.raises(tensorffi.BuildError, match=r"'forgotten' is declared .*lib\.h:5.* defined in none of .*lib\.c"):
        tensorffi.compile("forgot", sources=[libdir / "lib.c"], header=libdir / "lib.h", libraries=["m"], cache=cache)


def test_source_string_without_cdef(cache, rng):
    lib = tensorffi.compile("cell", source="""
        // a notebook cell: no #include needed for the fixed-width types
        static float twice(float v) { return 2 * v; }
        void doubled(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = twice(x[i]); }
    """, contracts={"doubled": "x: [n]; y: out [n]"}, cache=cache)
    x = rng.standard_normal(33).astype(np.float32)
    np.testing.assert_array_equal(lib.doubled(x), 2 * x)
    assert sorted(lib.functions) == ["doubled"]


def test_a_file_with_nothing_to_export_is_a_declaration_error(tmp_path, cache):
    with pytest.raises(tensorffi.DeclarationError, match="no function with external linkage"):
        tensorffi.compile("nothing", source="static int hidden(void) { return 1; }", cache=cache)


# --------------------------------------------------------------------------- #
# A cdef is checked against the definitions                                    #
# --------------------------------------------------------------------------- #


def test_a_cdef_that_disagrees_with_a_source_file_does_not_build(tmp_path, cache):
    (tmp_path / "fill.c").write_text(
        "#include <stdint.h>\nvoid fill(double *x, int64_t n) { for (int64_t i = 0; i < n; i++) x[i] = 1.0; }\n"
    )
    with pytest.raises(tensorffi.BuildError) as err:
        tensorffi.compile("mismatch", "void fill(float *x, int n);", sources=[tmp_path / "fill.c"], cache=cache)
    text = str(err.value)
    assert "fill" in text and "<cdef>:1" in text and "fill.c:2" in text


def test_a_cdef_type_that_the_file_does_not_declare_is_still_checked(tmp_path, cache):
    # the file spells the type `long`, without <stdint.h>; the cdef says int32_t: a mismatch
    (tmp_path / "f.c").write_text("long twice(long x) { return 2 * x; }\n")
    with pytest.raises(tensorffi.BuildError, match="conflicting types"):
        tensorffi.compile("nostdint", "int32_t twice(int32_t x);", sources=[tmp_path / "f.c"], cache=cache)
    assert tensorffi.compile("nostdint", "int64_t twice(int64_t x);", sources=[tmp_path / "f.c"], cache=cache).twice(21) == 42


def test_a_cdef_that_disagrees_with_a_source_string_does_not_build(cache):
    with pytest.raises(tensorffi.BuildError, match="conflicting types"):
        tensorffi.compile("mismatch_s", "void fill(float *x, int n);",
                          source="void fill(double *x, long n) { x[0] = (double)n; }", cache=cache)


def test_a_declared_function_no_source_defines_is_named(tmp_path, cache):
    (tmp_path / "a.c").write_text("int a(void) { return 1; }\n")
    with pytest.raises(tensorffi.BuildError, match=r"'b' is declared \(<cdef>:2\) but defined in none of .*a\.c"):
        tensorffi.compile("missing", "int a(void);\nint b(void);", sources=[tmp_path / "a.c"], cache=cache)


def test_a_function_the_users_code_calls_and_nothing_defines_is_named(tmp_path, cache, rng):
    """A link error names the user's file and the missing symbol (on 36e677b: "the module
    built for ... cannot be loaded: /root/.cache/tensorffi/tmp.x/_tf_....so: undefined
    symbol"), and a library it needs, once named, links."""
    name = "helper_" + "".join(rng.choice(list("abcdefgh"), 6))
    (tmp_path / "use.c").write_text(f"double {name}(double);\ndouble use(double x) {{ return {name}(x) + 1; }}\n")
    with pytest.raises(tensorffi.BuildError) as info:
        tensorffi.compile("uses_missing", sources=[tmp_path / "use.c"], cache=cache)
    message = str(info.value)
    assert f"use.c uses '{name}'" in message and "no library is linked" in message and "libraries=" in message
    assert ".so" not in message and "tmp." not in message  # no temporary file's name
    (tmp_path / "helper.c").write_text(f"double {name}(double x) {{ return 2 * x; }}\n")
    lib = tensorffi.compile("uses_missing", sources=[tmp_path / "use.c", tmp_path / "helper.c"], cache=cache)
    x = float(rng.standard_normal())
    assert lib.use(x) == 2 * x + 1


def test_a_library_the_linker_cannot_find_is_named(tmp_path, cache):
    (tmp_path / "a.c").write_text("int a(void) { return 1; }\n")
    with pytest.raises(tensorffi.BuildError, match=r"libnosuchlib_tf\.so \(libraries=\['nosuchlib_tf'\]\) is not in "
                       r"library_dirs=\[.*\] and the system's library folders; install"):
        tensorffi.compile("nolib", sources=[tmp_path / "a.c"], libraries=["nosuchlib_tf"], library_dirs=[tmp_path],
                          cache=cache)


# --------------------------------------------------------------------------- #
# Errors in the user's own terms                                               #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    "cdef, line, column",
    [
        ("void ok(int x);\nvoid f(foo_t x);", 2, 14),
        ("int f(int x)\nint g(void);", 1, 5),
        ("void ok(void);\n\nvoid caf\u00e9(float *x, int n);", 3, 9),
    ],
)
def test_declaration_errors_carry_line_and_column(cdef, line, column, cache):
    for call in (
        lambda: tensorffi.compile("decl", cdef, source="int unused(void) { return 0; }", cache=cache),
        lambda: tensorffi.load("libm.so.6", cdef),
    ):
        with pytest.raises(tensorffi.DeclarationError) as err:
            call()
        assert (err.value.file, err.value.line, err.value.column) == ("<cdef>", line, column)
        assert isinstance(err.value, tensorffi.ContractError) and isinstance(err.value, ValueError)
        assert err.value.text == cdef.splitlines()[line - 1]


def test_compiler_errors_point_at_the_users_line(cache):
    source = "int ok(int x) { return x; }\n\nint broken(int x) {\n    return x + undefined_name;\n}\n"
    with pytest.raises(tensorffi.BuildError) as err:
        tensorffi.compile("lines", source=source, cache=cache)
    assert "<source>:4:" in str(err.value) and "undefined_name" in str(err.value)
    with pytest.raises(tensorffi.BuildError) as err:
        tensorffi.compile("lines", source=source, source_name="cell[3]", cache=cache)
    assert "cell[3]:4:" in str(err.value)
    assert "tmp." not in str(err.value)  # no build-folder paths


def test_compiler_errors_in_a_file_name_the_file(tmp_path, cache):
    (tmp_path / "bad.c").write_text("int f(void) {\n  return nope;\n}\n")
    with pytest.raises(tensorffi.BuildError, match=r"bad\.c:2:\d+: error: .*nope"):
        tensorffi.compile("badfile", sources=[tmp_path / "bad.c"], cache=cache)


# --------------------------------------------------------------------------- #
# Nothing from the caller's directory runs                                     #
# --------------------------------------------------------------------------- #


def test_nothing_in_the_current_directory_is_imported(tmp_path):
    """A `cffi.py`, `setuptools.py`, `sysconfig.py` or a `tensorffi/` folder where
    compile() is called is never imported (the build runs in this process; the
    compiler is the only program started, in a private folder)."""
    work = tmp_path / "work"
    (work / "tensorffi").mkdir(parents=True)
    marker = tmp_path / "PWNED"
    evil = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for name in ("cffi.py", "setuptools.py", "_distutils_hack.py", "sysconfig.py", "pycparser.py", "torch.py"):
        (work / name).write_text(evil)
    (work / "tensorffi" / "__init__.py").write_text(evil)
    (work / "tensorffi" / "_buildworker.py").write_text(evil)
    (work / "k.c").write_text("int k(void) { return 11; }\n")
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import tensorffi
        print(tensorffi.compile("cwd_k", sources=["k.c"], cache={str(tmp_path / 'cache')!r}).k())
    """))
    proc = subprocess.run([sys.executable, str(script)], cwd=work, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "11"
    assert not marker.exists(), marker.read_text()


def test_a_non_ascii_function_name_is_a_declaration_error(cache):
    with pytest.raises(tensorffi.DeclarationError, match="caf\u00e9") as err:
        tensorffi.compile("uni", source="int ok(int x) { return x; }\nint caf\u00e9(int x) { return x; }\n", cache=cache)
    assert (err.value.file, err.value.line) == ("<source>", 2)


def test_system_types_behind_pointers_are_opaque(cache):
    lib = tensorffi.compile("systypes", source="""
        #include <pthread.h>
        #include <time.h>
        int64_t is_null(const pthread_mutex_t *m) { return m == NULL; }
        int64_t seconds(const struct timespec *t) { return t ? (int64_t)t->tv_sec : -1; }
    """, contracts={"is_null": "m: ?", "seconds": "t: ?"}, cache=cache)
    assert lib.is_null(None) == 1 and lib.seconds(None) == -1
    assert lib.declarations.functions["seconds"].params[0].type.text == "const struct timespec *"


def test_a_static_helper_named_like_a_declared_function_is_not_a_mismatch(tmp_path, cache):
    (tmp_path / "a.c").write_text("static double f(double x) { return x; }\ndouble g(double x) { return f(x) + 1; }\n")
    (tmp_path / "b.c").write_text("#include <stdint.h>\nint64_t f(int64_t x) { return 2 * x; }\n")
    lib = tensorffi.compile("samename", "int64_t f(int64_t x); double g(double x);",
                            sources=[tmp_path / "a.c", tmp_path / "b.c"], cache=cache)
    assert lib.f(21) == 42 and lib.g(1.5) == 2.5


def test_a_changed_system_header_rebuilds(tmp_path, cache):
    """Headers in the compiler's system directories (here one given with -isystem, as
    an installed SDK would be) are fingerprinted by size and mtime, not carried."""
    sysdir = tmp_path / "sdk"
    sysdir.mkdir()
    (sysdir / "sdk.h").write_text("#define SDK_VERSION 1\n")
    src = tmp_path / "v.c"
    src.write_text("#include <sdk.h>\nint version(void) { return SDK_VERSION; }\n")
    build = lambda: tensorffi.compile("sysdep", sources=[src], extra_compile_args=["-O2", f"-isystem{sysdir}"], cache=cache)
    assert build().version() == 1
    manifest = next(json.loads(p.read_text()) for p in cache.glob("_tf_sysdep_*.json"))
    assert str(sysdir / "sdk.h") in [s[0] for s in manifest["system"]]
    assert str(sysdir / "sdk.h") not in [d[0] for d in manifest["deps"]]
    (sysdir / "sdk.h").write_text("#define SDK_VERSION 22\n")
    assert build().version() == 22
