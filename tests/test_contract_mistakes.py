# SPDX-License-Identifier: MIT
"""The mistakes a newcomer makes in a contract, and the length conventions of real C
(issue 36): a typo in a shape symbol is a ContractError with a "did you mean"; lengths
named ``nframes``, ``width``, ``capacity``, placed before the buffer (BLAS) or given as a
product (``w, h``) are checked; a pointer no rule covers is marked UNCHECKED and the
library says so once (UncheckedWarning). Each was silent on 36e677b (a wrong length was
a heap overwrite)."""
from __future__ import annotations

import string
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorffi
from tensorffi import ContractError, ShapeError, UncheckedWarning
from tensorffi._decl import parse_declarations
from tensorffi.contract import parse_contract
from tensorffi.plan import build_plan

from conftest import as_kind, to_numpy

# --------------------------------------------------------------------------- #
# shape symbols checked at bind time                                           #
# --------------------------------------------------------------------------- #

SCALE = "void scale(const float *x, float *y, int64_t rows, int64_t cols);"


def plan_of(decl_text: str, contract: str):
    decl = next(iter(parse_declarations(decl_text).functions.values()))
    return build_plan(None, decl, parse_contract(contract))


@pytest.mark.parametrize("contract, typo, meant", [
    ("x: [row, cols]; y: out [row, cols]", "row", "rows"),
    ("x: [rows, col]; y: out [rows, col]", "col", "cols"),
    ("x: [Rows, cols]; y: out [Rows, cols]", "Rows", "rows"),
    ("x: [rwos, cols]; y: out [rwos, cols]", "rwos", "rows"),      # neighbours swapped
    ("x: [rowss, cols]; y: out [rowss, cols]", "rowss", "rows"),
    ("x: [rows, cols]; y: out [rows, clos]", "clos", "cols"),        # only in the out shape
])
def test_a_typo_in_a_shape_symbol_names_the_parameter_meant(contract, typo, meant):
    with pytest.raises(ContractError, match=rf"size '{typo}' names no parameter.*did you mean '{meant}'"):
        plan_of(SCALE, contract)


def test_a_symbol_used_once_beside_an_unused_length_is_refused():
    with pytest.raises(ContractError, match=r"'m' appears only once.*length parameter\(s\) n unchecked"):
        plan_of("void f(const float *x, int64_t n);", "x: [m]")


@pytest.mark.parametrize("decl, contract", [
    (SCALE, "x: [rows, cols]; y: out [rows, cols]"),
    (SCALE, "x: [b, k]; y: out [b, k]; rows = b; cols = k"),   # free sizes used twice
    ("double sum_all(const double *x, int64_t count);", "x: [r, c]; count = numel(x)"),  # any 2-D shape
    ("int z(void *dest, unsigned long *destLen);", "dest: inout [cap]; destLen: inout [1]"),
    ("void f(const float *x, int64_t n);", "x: [_any]"),        # '_' says "any length" on purpose
    ("void f(const float *x, float *y, int64_t n, int64_t m);", "x: [n]; y: out [m]"),  # short names
])
def test_what_is_allowed_stays_allowed(decl, contract):
    plan_of(decl, contract)


def test_the_typo_is_refused_by_compile_before_any_call(cache):
    with pytest.raises(ContractError, match=r"scale: size 'row'.*did you mean 'rows'.*'x: \[row, cols\]'"):
        tensorffi.compile("typo_lib", SCALE, source="""
            #include <stdint.h>
            void scale(const float *x, float *y, int64_t rows, int64_t cols) {
                for (int64_t i = 0; i < rows * cols; i++) y[i] = 2 * x[i]; }""",
                          contracts={"scale": "x: [row, cols]; y: out [row, cols]"}, cache=cache)


_IDENT_CHARS = string.ascii_lowercase + "_"


@st.composite
def one_edit(draw, word: str) -> str:
    kind = draw(st.sampled_from(["insert", "delete", "substitute", "swap"]))
    i = draw(st.integers(0, len(word) - 1))
    c = draw(st.sampled_from(_IDENT_CHARS))
    if kind == "insert":
        return word[:i] + c + word[i:]
    if kind == "delete":
        return word[:i] + word[i + 1:]
    if kind == "substitute":
        return word[:i] + c + word[i + 1:]
    j = min(i + 1, len(word) - 1)
    w = list(word)
    w[i], w[j] = w[j], w[i]
    return "".join(w)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), which=st.sampled_from(["rows", "cols"]), where=st.sampled_from([0, 1, 2]))
def test_hypothesis_every_single_edit_typo_is_caught(data, which, where):
    typo = data.draw(one_edit(which))
    if typo in ("rows", "cols") or not typo or not (typo[0].isalpha() or typo[0] == "_") or typo.startswith("_"):
        return  # not a typo of a name (an edit that gives the other parameter, or an '_' symbol)
    shapes = [["rows", "cols"], ["rows", "cols"]]
    if where == 2:  # the typo in every place
        shapes = [[typo if s == which else s for s in shape] for shape in shapes]
    else:
        shapes[where] = [typo if s == which else s for s in shapes[where]]
    contract = f"x: [{', '.join(shapes[0])}]; y: out [{', '.join(shapes[1])}]"
    with pytest.raises(ContractError, match=rf"size '{typo}'.*(did you mean [^?]*'{which}'|appears only once)"):
        plan_of(SCALE, contract)


# --------------------------------------------------------------------------- #
# length conventions                                                           #
# --------------------------------------------------------------------------- #

LENGTHS_SRC = r"""
#include <stdint.h>
#include <string.h>
void blas_scal(int64_t n, float alpha, float *x) { for (int64_t i = 0; i < n; i++) x[i] *= alpha; }
void blas_axpy(int64_t n, float alpha, const float *x, float *y) { for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i]; }
void gain(float *buf, int64_t nframes, float g) { for (int64_t i = 0; i < nframes; i++) buf[i] *= g; }
void clear_samples(double *out, int nsamples) { for (int i = 0; i < nsamples; i++) out[i] = 0; }
double sum_pts(const double *p, int64_t npts) { double s = 0; for (int64_t i = 0; i < npts; i++) s += p[i]; return s; }
void row_fill(uint8_t *line, int width, uint8_t v) { for (int i = 0; i < width; i++) line[i] = v; }
int64_t fill_upto(int32_t *dst, int64_t capacity) { for (int64_t i = 0; i < capacity; i++) dst[i] = (int32_t)i; return capacity; }
void blur(float *img, int w, int h) { for (int i = 0; i < w * h; i++) img[i] += 1; }
void transpose_into(const float *a, float *b, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) for (int64_t c = 0; c < cols; c++) b[c * rows + r] = a[r * cols + c]; }
void zero_bytes(float *buf, size_t nbytes) { memset(buf, 0, nbytes); }
void opaque(float *p, int k) { for (int i = 0; i < k; i++) p[i] = 1; }
void opaque_ok(float *p, int k) { for (int i = 0; i < k; i++) p[i] = 1; }
"""
LENGTHS_CDEF = """
void blas_scal(int64_t n, float alpha, float *x);
void blas_axpy(int64_t n, float alpha, const float *x, float *y);
void gain(float *buf, int64_t nframes, float g);
void clear_samples(double *out, int nsamples);
double sum_pts(const double *p, int64_t npts);
void row_fill(uint8_t *line, int width, uint8_t v);
int64_t fill_upto(int32_t *dst, int64_t capacity);
void blur(float *img, int w, int h);
void transpose_into(const float *a, float *b, int64_t rows, int64_t cols);
void zero_bytes(float *buf, size_t nbytes);
void opaque(float *p, int k);
void opaque_ok(float *p, int k);
"""


@pytest.fixture(scope="module", params=["compile", "load"])
def lens(request, cache, tmp_path_factory):
    contracts = {"opaque_ok": "p: unsized"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncheckedWarning)  # opaque(): tested below
        if request.param == "compile":
            return tensorffi.compile("lengths_lib", LENGTHS_CDEF, source=LENGTHS_SRC, contracts=contracts,
                                     cache=cache)
        import subprocess

        d = tmp_path_factory.mktemp("lenlib")
        (d / "l.c").write_text(LENGTHS_SRC)
        subprocess.run(["cc", "-O1", "-shared", "-fPIC", str(d / "l.c"), "-o", str(d / "libl.so")], check=True)
        return tensorffi.load(str(d / "libl.so"), LENGTHS_CDEF, contracts)


def test_length_before_the_buffer_blas_order(lens, kind, rng):
    x = rng.standard_normal(8).astype(np.float32)
    t = as_kind(x.copy(), kind)
    lens.blas_scal(8, 2.5, t)
    np.testing.assert_allclose(to_numpy(t), 2.5 * x, rtol=1e-6)
    with pytest.raises(ShapeError, match=r"blas_scal\(\): argument 'x'.*holds 4 elements, but 'n' is 1000000"):
        lens.blas_scal(1_000_000, 2.0, as_kind(x[:4].copy(), kind))
    y = rng.standard_normal(8).astype(np.float32)
    ty = as_kind(y.copy(), kind)
    lens.blas_axpy(8, 0.5, as_kind(x, kind), ty)
    np.testing.assert_allclose(to_numpy(ty), y + 0.5 * x, rtol=1e-6)
    with pytest.raises(ShapeError, match=r"argument 'y'.*holds 3 elements, but 'n' is 8"):
        lens.blas_axpy(8, 0.5, as_kind(x, kind), as_kind(y[:3].copy(), kind))


@pytest.mark.parametrize("call, arg, length", [
    (lambda lib, k: lib.gain(as_kind(np.ones(4, np.float32), k), 1_000_000, 2.0), "buf", "nframes"),
    (lambda lib, k: lib.clear_samples(as_kind(np.ones(4), k), 5), "out", "nsamples"),
    (lambda lib, k: lib.sum_pts(as_kind(np.ones(4), k), 40), "p", "npts"),
    (lambda lib, k: lib.row_fill(as_kind(np.ones(4, np.uint8), k), 4096, 7), "line", "width"),
    (lambda lib, k: lib.fill_upto(as_kind(np.ones(4, np.int32), k), 64), "dst", "capacity"),
])
def test_common_length_names_are_checked(lens, kind, call, arg, length):
    with pytest.raises(ShapeError, match=rf"argument '{arg}'.*holds 4 elements, but '{length}' is"):
        call(lens, kind)


def test_common_length_names_compute_right(lens, kind, rng):
    b = rng.standard_normal(6).astype(np.float32)
    t = as_kind(b.copy(), kind)
    lens.gain(t, 6, 3.0)
    np.testing.assert_allclose(to_numpy(t), 3 * b, rtol=1e-6)
    p = rng.standard_normal(9)
    assert lens.sum_pts(as_kind(p, kind), 9) == pytest.approx(float(np.sum(p)))
    d = as_kind(np.zeros(5, np.int32), kind)
    assert lens.fill_upto(d, 5) == 5
    np.testing.assert_array_equal(to_numpy(d), np.arange(5))


def test_a_product_of_two_lengths_is_checked(lens, kind, rng):
    img = rng.standard_normal((3, 5)).astype(np.float32)
    t = as_kind(img.copy(), kind)
    lens.blur(t, 5, 3)
    np.testing.assert_allclose(to_numpy(t), img + 1, rtol=1e-6)
    with pytest.raises(ShapeError, match=r"argument 'img'.*holds 15 elements, but 'w' \* 'h' is 5 \* 4"):
        lens.blur(as_kind(img.copy(), kind), 5, 4)
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = as_kind(np.zeros((3, 4), np.float32), kind)
    lens.transpose_into(as_kind(a, kind), b, 4, 3)
    np.testing.assert_array_equal(to_numpy(b), a.T)
    with pytest.raises(ShapeError, match=r"argument 'a'.*holds 12 elements, but 'rows' \* 'cols' is 4 \* 4"):
        lens.transpose_into(as_kind(a, kind), b, 4, 4)


def test_a_length_in_bytes_counts_bytes(lens, kind, rng):
    x = as_kind(rng.standard_normal(4).astype(np.float32), kind)
    lens.zero_bytes(x, 16)
    np.testing.assert_array_equal(to_numpy(x), np.zeros(4, np.float32))
    with pytest.raises(ShapeError, match=r"argument 'buf'.*holds 16 bytes, but 'nbytes' is 17"):
        lens.zero_bytes(x, 17)


def test_a_pointer_no_rule_covers_is_marked_unchecked(lens):
    text = str(tensorffi.describe(lens.opaque))
    assert "UNCHECKED" in text and "'p: [dims]'" in text
    assert "UNCHECKED" not in str(tensorffi.describe(lens.opaque_ok))  # 'p: unsized': the user's word
    assert "UNCHECKED" not in str(tensorffi.describe(lens.gain))
    assert "p [unchecked]" in lens.opaque.__doc__


@pytest.mark.parametrize("path", ["compile", "load"])
def test_an_unchecked_function_warns_at_its_first_call(cache, tmp_path, path):
    if path == "compile":
        lib = tensorffi.compile("lengths_lib", LENGTHS_CDEF, source=LENGTHS_SRC, cache=cache)
    else:
        import subprocess

        (tmp_path / "l.c").write_text(LENGTHS_SRC)
        subprocess.run(["cc", "-O1", "-shared", "-fPIC", str(tmp_path / "l.c"), "-o", str(tmp_path / "l.so")],
                       check=True)
        lib = tensorffi.load(str(tmp_path / "l.so"), LENGTHS_CDEF)
    p = torch.zeros(3)
    with pytest.warns(UncheckedWarning) as record:
        lib.opaque(p, 3)
    msgs = [str(w.message) for w in record if issubclass(w.category, UncheckedWarning)]
    assert len(msgs) == 1
    assert "opaque(): argument 'p' (float *) has no length" in msgs[0]
    assert "{'opaque': 'p: [k]'}" in msgs[0] and "'p: unsized'" in msgs[0]
    assert record[0].filename == __file__  # pointed at the user's line, not tensorffi's
    np.testing.assert_array_equal(p.numpy(), np.ones(3, np.float32))  # C still ran, as before
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncheckedWarning)
        lib.opaque(p, 3)        # said once
        lib.gain(p, 3, 2.0)     # checked functions never warn
        np.testing.assert_array_equal(p.numpy(), np.full(3, 2, np.float32))


def test_an_unchecked_first_call_is_an_error_under_w_error(cache):
    lib = tensorffi.compile("lengths_lib", LENGTHS_CDEF, source=LENGTHS_SRC, cache=cache)
    p = torch.zeros(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncheckedWarning)
        for _ in range(2):  # an error every time, as -W error means
            with pytest.raises(UncheckedWarning, match="opaque"):
                lib.opaque(p, 3)
    np.testing.assert_array_equal(p.numpy(), np.zeros(3, np.float32))  # refused before C ran


def test_a_contract_or_unsized_silences_it(cache):
    fixed = tensorffi.compile("lengths_lib", LENGTHS_CDEF, source=LENGTHS_SRC, cache=cache,
                              contracts={"opaque": "p: [k]", "opaque_ok": "p: unsized"})
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncheckedWarning)
        fixed.opaque_ok(torch.zeros(3), 3)
        with pytest.raises(ShapeError, match=r"opaque\(\).*'p'"):
            fixed.opaque(torch.zeros(3), 4)


# --------------------------------------------------------------------------- #
# error out-parameters (constructors that return NULL)                         #
# --------------------------------------------------------------------------- #

ERR_SRC = r"""
#include <stdint.h>
#include <stdlib.h>
typedef struct obj { int64_t value; } obj_t;
static int destroyed = 0;
static const char *messages[] = {"no error", "bad size", "out of luck"};
obj_t *obj_new(int64_t value, int *error) {
    *error = 0;
    if (value < 0) { *error = 1; return NULL; }
    obj_t *o = malloc(sizeof *o);
    o->value = value;
    if (value == 7) *error = 2;      /* an error reported beside a handle */
    return o;
}
void obj_free(obj_t *o) { destroyed++; free(o); }
int64_t obj_value(const obj_t *o) { return o->value; }
int obj_destroyed(void) { return destroyed; }
const char *obj_strerror(int code) { return code >= 0 && code < 3 ? messages[code] : "?"; }
double safe_log2(double x, int32_t *err) { if (x <= 0) { *err = 2; return 0; } *err = 0; int e = 0; while (x >= 2) { x /= 2; e++; } return e; }
"""
ERR_CDEF = """
typedef struct obj obj_t;
obj_t *obj_new(int64_t value, int *error);
void obj_free(obj_t *o);
int64_t obj_value(const obj_t *o);
int obj_destroyed(void);
const char *obj_strerror(int code);
double safe_log2(double x, int32_t *err);
"""


@pytest.fixture(scope="module")
def errlib(cache):
    return tensorffi.compile("errout_lib", ERR_CDEF, source=ERR_SRC, cache=cache, contracts={
        "obj_new": "return: handle(obj_free); error: out status(obj_strerror)",
        "safe_log2": "err: out status(obj_strerror)",
    })


def test_a_null_constructor_raises_the_librarys_own_message(errlib, rng):
    v = int(rng.integers(0, 1000)) * 2
    with errlib.obj_new(v) as h:                   # the caller passes no error slot
        assert errlib.obj_value(h) == v
    with pytest.raises(tensorffi.NativeError, match=r"obj_new\(\) returned no handle: error 1 in 'error': "
                                                   r"bad size") as info:
        errlib.obj_new(-5)
    assert info.value.code == 1


def test_an_error_beside_a_handle_destroys_it(errlib):
    before = errlib.obj_destroyed()
    with pytest.raises(tensorffi.NativeError, match="obj_new.*error 2 in 'error': out of luck"):
        errlib.obj_new(7)
    assert errlib.obj_destroyed() == before + 1   # not leaked, not handed out


def test_an_error_out_parameter_of_a_plain_function(errlib, rng):
    x = float(rng.uniform(1, 1e6))
    assert errlib.safe_log2(x) == float(int(np.floor(np.log2(x))))
    with pytest.raises(tensorffi.NativeError, match=r"safe_log2\(\) failed: error 2 in 'err': out of luck"):
        errlib.safe_log2(-1.0)
    assert "error out-parameter" in str(tensorffi.describe(errlib.safe_log2)) or \
        "non-zero raises" in str(tensorffi.describe(errlib.safe_log2))


def test_an_error_out_parameter_must_be_an_integer_pointer(cache):
    with pytest.raises(ContractError, match=r"'x: out status' needs a pointer to an integer"):
        plan_of("double f(double *x);", "x: out status")


def test_libsamplerate_src_new_error_message():
    import ctypes
    import ctypes.util

    path = ctypes.util.find_library("samplerate")
    if path is None:
        pytest.skip("libsamplerate is not installed (Debian: apt-get install libsamplerate0-dev)")
    cdef = """
    typedef struct SRC_STATE_tag SRC_STATE;
    SRC_STATE *src_new(int converter_type, int channels, int *error);
    SRC_STATE *src_delete(SRC_STATE *state);
    const char *src_strerror(int error);
    """
    lib = tensorffi.load(path, cdef, {"src_new": "return: handle(src_delete); error: out status(src_strerror)"})
    ref = ctypes.CDLL(path)
    ref.src_strerror.restype = ctypes.c_char_p
    code = ctypes.c_int(0)
    ref.src_new.restype = ctypes.c_void_p
    assert ref.src_new(99, 1, ctypes.byref(code)) is None and code.value != 0
    want = ref.src_strerror(code.value).decode()
    with pytest.raises(tensorffi.NativeError, match=rf"src_new\(\) returned no handle: error {code.value}.*"
                                                   rf"{want.rstrip('.')}"):
        lib.src_new(99, 1)        # converter 99 does not exist
    with lib.src_new(2, 1):       # SRC_SINC_FASTEST, one channel
        pass
