# SPDX-License-Identifier: MIT
"""Contracts that say what SDK APIs mean (issue 21, item 3): ``void *`` lengths in
bytes, arrays kept until the handle a call returns, sizes as expressions of other
sizes, complex element types. Hostile cases first: what a caller gets wrong must be
a typed error naming the argument, never C writing past an array or reading freed
memory. References: Python's zlib, numpy.fft.rfft, float64 NumPy."""
from __future__ import annotations

import ctypes.util
import gc
import subprocess
import zlib

import numpy as np
import pytest
import torch

import tensorffi
from tensorffi.contract import parse_contract
from tensorffi.contract import eval_dim

FFTW = ctypes.util.find_library("fftw3f")
ZLIB = ctypes.util.find_library("z")
needs_fftw = pytest.mark.skipif(FFTW is None, reason="libfftw3f is not installed (apt-get install libfftw3-dev)")
needs_zlib = pytest.mark.skipif(ZLIB is None, reason="zlib (libz.so) is not installed")

# --------------------------------------------------------------------------- #
# A small library of our own: typed outputs sized by expressions, complex     #
# --------------------------------------------------------------------------- #

CDEF = """
void evens(const float *x, float *y, int64_t n);
void cscale(float _Complex *z, int64_t n, float a);
double csum_abs(const double _Complex *z, int64_t n);
void tail(const float *x, float *y, int64_t n, int64_t k);
"""
SRC = r"""
#include <complex.h>
#include <math.h>
#include <stdint.h>
void evens(const float *x, float *y, int64_t n) { for (int64_t i = 0; i <= n / 2; i++) y[i] = x[2 * i < n ? 2 * i : n - 1]; }
void cscale(float _Complex *z, int64_t n, float a) { for (int64_t i = 0; i < n; i++) z[i] *= a; }
double csum_abs(const double _Complex *z, int64_t n) { double s = 0; for (int64_t i = 0; i < n; i++) s += cabs(z[i]); return s; }
void tail(const float *x, float *y, int64_t n, int64_t k) { for (int64_t i = 0; i < n - k; i++) y[i] = x[k + i]; }
"""
CONTRACTS = {
    "evens": "x: [n]; y: out [n/2 + 1]",
    "cscale": "z: [n]",
    "csum_abs": "z: [n]",
    "tail": "x: [n]; y: out [n - k]",
}


@pytest.fixture(scope="module")
def sdk(tmp_path_factory):
    d = tmp_path_factory.mktemp("sdk")
    (d / "sdk.c").write_text(SRC)
    so = d / "libsdk.so"
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", str(d / "sdk.c"), "-o", str(so), "-lm"], check=True)
    return tensorffi.load(so, CDEF, CONTRACTS)


# --------------------------------------------------------------------------- #
# the shape grammar: integer expressions, checked                              #
# --------------------------------------------------------------------------- #


def test_expressions_parse_and_fold_constants():
    c = parse_contract("a: [n/2 + 1]; b: [2*3 + 1]; c: [(n - 1) * (m + 2)]; d: [b*n]; e: [n // 4]")
    a, b, cc, d, e = (c.arrays[k].shape[0] for k in "abcde")
    assert str(a) == "n/2 + 1" and a.symbols == ("n",)
    assert b.expr is None and b.factor == 7 and not b.symbols  # folded
    assert d.expr is None and d.symbols == ("b", "n")  # a product stays a product
    for n, m in [(0, 0), (1, 5), (7, 3), (1024, 1)]:
        assert eval_dim(a.expr, {"n": n}) == n // 2 + 1
        assert eval_dim(e.expr, {"n": n}) == n // 4
        if n >= 1:
            assert eval_dim(cc.expr, {"n": n, "m": m}) == (n - 1) * (m + 2)


@pytest.mark.parametrize("text, match", [
    ("x: [n/]", "ends too early"),
    ("x: [(n + 1]", "not closed"),
    ("x: [n + + 1]", "unexpected"),
    ("x: [n % 2]", "cannot read dimension"),
    ("x: [3 - 5]", "negative"),
    ("x: [4 / 0]", "divides by 0"),
    ("x: [-n]", "unexpected"),
])
def test_bad_expressions_are_contract_errors(text, match):
    with pytest.raises(tensorffi.ContractError, match=match):
        parse_contract(text)


def test_expression_out_is_allocated_and_a_passed_one_is_checked(sdk, rng, kind):
    for n in (1, 2, 7, 64):
        x = rng.standard_normal(n).astype(np.float32)
        xs = torch.from_numpy(x) if kind == "torch" else x
        y = sdk.evens(xs)
        want = x[np.minimum(2 * np.arange(n // 2 + 1), n - 1)]
        np.testing.assert_array_equal(np.asarray(y), want)
        assert type(y) is type(xs)
    x = torch.from_numpy(rng.standard_normal(9).astype(np.float32))
    with pytest.raises(tensorffi.ShapeError, match=r"'y'.*n/2 \+ 1.*must be 5, got 4"):
        sdk.evens(x, y=torch.empty(4))  # one too short: C would write y[4]
    with pytest.raises(tensorffi.ShapeError, match=r"'y'.*must be 5, got 6"):
        sdk.evens(x, y=torch.empty(6))


def test_expression_that_goes_negative_is_refused_before_c_runs(sdk, rng):
    x = torch.from_numpy(rng.standard_normal(5).astype(np.float32))
    y = sdk.tail(x, k=2)
    np.testing.assert_array_equal(y.numpy(), x.numpy()[2:])
    assert sdk.tail(x, k=5).shape == (0,)
    with pytest.raises(tensorffi.ShapeError, match=r"'y'.*n - k.*negative"):
        sdk.tail(x, k=6)  # C's loop would not run, but no array has -1 elements
    with pytest.raises(tensorffi.ShapeError, match=r"negative"):
        sdk.tail(x, y=torch.empty(0), k=9)


def test_expression_overflow_and_division_by_zero(tmp_path):
    # void *: bytes; the sizes are free (the caller passes them)
    lib = tensorffi.load(ZLIB or "libz.so.1", "unsigned long adler32(unsigned long adler, const void *buf, unsigned int len);",
                         {"adler32": "buf: [n*n + m/d]; len = n*n + m/d"})
    b = np.frombuffer(b"0123456789", dtype=np.uint8)
    assert lib.adler32(1, b, n=3, m=3, d=3) == zlib.adler32(b.tobytes())
    with pytest.raises(tensorffi.ShapeError, match="divides by 0"):
        lib.adler32(1, b, n=3, m=3, d=0)
    with pytest.raises(tensorffi.ShapeError, match="larger than any array"):
        lib.adler32(1, b, n=2**32, m=0, d=1)
    with pytest.raises(tensorffi.ShapeError, match="must be 11, got 10 bytes"):
        lib.adler32(1, b, n=3, m=6, d=3)


def test_an_expression_never_binds_a_size():
    # 'n' appears only in an expression: nothing fixes it, so the caller must pass it
    lib = tensorffi.load(ZLIB or "libz.so.1", "unsigned long adler32(unsigned long adler, const void *buf, unsigned int len);",
                         {"adler32": "buf: [n + 1]; len = n + 1"})
    b = np.frombuffer(b"abcd", dtype=np.uint8)
    with pytest.raises(tensorffi.ShapeError, match=r"size 'n'.*unknown: pass n="):
        lib.adler32(1, b)
    assert lib.adler32(1, b, n=3) == zlib.adler32(b"abcd")


def test_callbacks_take_no_expressions():
    with pytest.raises(tensorffi.ContractError, match="not expressions"):
        parse_contract("cb: callback(x: [n/2])")


# --------------------------------------------------------------------------- #
# void *: lengths count bytes                                                  #
# --------------------------------------------------------------------------- #

ZCDEF = """
int compress2(void *dest, unsigned long *destLen, const void *source, unsigned long sourceLen, int level);
unsigned long crc32(unsigned long crc, const void *buf, unsigned int len);
"""
ZCONTRACTS = {
    "compress2": "dest: inout [cap]; destLen: inout [1]; source: [sourceLen]; return: status",
    "crc32": "buf: [len]",
}


@pytest.fixture(scope="module")
def z():
    if ZLIB is None:
        pytest.skip("zlib is not installed")
    return tensorffi.load(ZLIB, ZCDEF, ZCONTRACTS)


@needs_zlib
def test_void_length_counts_bytes_not_elements(z, rng, kind):
    x = rng.standard_normal(1000).astype(np.float32)  # 4,000 bytes
    xs = torch.from_numpy(x) if kind == "torch" else x
    assert z.crc32(0, xs) == zlib.crc32(x.tobytes())  # all 4,000 bytes, not 1,000
    dest = np.zeros(8000, dtype=np.uint8)
    dl = np.array([dest.nbytes], dtype=np.uint64)
    z.compress2(dest, dl, xs, 6)
    assert zlib.decompress(dest[: int(dl[0])].tobytes()) == x.tobytes()


@needs_zlib
def test_void_wrong_byte_length_is_refused(z, rng):
    x = torch.from_numpy(rng.standard_normal(1000).astype(np.float32))
    dest = np.zeros(8000, dtype=np.uint8)
    dl = np.array([dest.nbytes], dtype=np.uint64)
    with pytest.raises(tensorffi.ShapeError, match=r"'sourceLen' is 1000, but the array shapes give sourceLen = 4000"):
        z.compress2(dest, dl, x, 1000, 6)  # the full C form, counting elements: refused
    with pytest.raises(tensorffi.ShapeError, match=r"'len'.*1000.*4000"):
        z.crc32(0, x, 1000)


@needs_zlib
def test_void_non_contiguous_input_is_read_as_its_contiguous_bytes(z, rng):
    x = torch.from_numpy(rng.standard_normal((40, 50)).astype(np.float32)).t()
    assert z.crc32(0, x) == zlib.crc32(x.contiguous().numpy().tobytes())


@needs_zlib
def test_describe_says_bytes(z):
    rows = dict((n, w) for n, _, w in z.compress2.__wrapped_bridge__.plan.describe())
    assert "bytes" in rows["source"] and "bytes" in rows["dest"]


def test_void_shape_has_one_dimension():
    with pytest.raises(tensorffi.ContractError, match="counts bytes, so its shape has one dimension"):
        tensorffi.load(ZLIB or "libz.so.1", "unsigned long crc32(unsigned long crc, const void *buf, unsigned int len);",
                       {"crc32": "buf: [a, b]"})


# --------------------------------------------------------------------------- #
# complex element types                                                        #
# --------------------------------------------------------------------------- #


def test_complex_pointers_take_complex_arrays(sdk, rng, kind):
    zc = (rng.standard_normal(17) + 1j * rng.standard_normal(17)).astype(np.complex64)
    t = torch.from_numpy(zc.copy()) if kind == "torch" else zc.copy()
    sdk.cscale(t, 2.5)
    np.testing.assert_allclose(np.asarray(t), zc * np.float32(2.5), rtol=1e-6)
    zd = rng.standard_normal(9) + 1j * rng.standard_normal(9)
    zs = torch.from_numpy(zd) if kind == "torch" else zd
    assert sdk.csum_abs(zs) == pytest.approx(float(np.abs(zd).sum()), rel=1e-12)


@pytest.mark.parametrize("bad", [torch.complex128, torch.float32, torch.float64])
def test_complex_dtype_mismatch_is_a_dtype_error(sdk, bad):
    with pytest.raises(tensorffi.DTypeError, match=r"'z'.*complex64"):
        sdk.cscale(torch.zeros(4, dtype=bad), 1.0)
    with pytest.raises(tensorffi.DTypeError, match=r"'z'.*complex128"):
        sdk.csum_abs(torch.zeros(4, dtype=torch.complex64))


def test_conjugate_view_is_not_handed_to_c(sdk):
    t = torch.ones(4, dtype=torch.complex64) * (1 + 2j)
    with pytest.raises(tensorffi.TensorFFIError, match="'z'"):
        sdk.cscale(t.conj(), 2.0)  # a lazy conjugate: its memory holds the unconjugated values


# --------------------------------------------------------------------------- #
# FFTW: arrays kept until the handle a call returns                            #
# --------------------------------------------------------------------------- #

FFTW_CDEF = """
typedef float fftwf_complex[2];
typedef struct fftwf_plan_s *fftwf_plan;
fftwf_plan fftwf_plan_dft_r2c_1d(int n, float *in, fftwf_complex *out, unsigned flags);
void fftwf_execute(const fftwf_plan p);
void fftwf_destroy_plan(fftwf_plan p);
"""
FFTW_CONTRACTS = {
    "fftwf_plan_dft_r2c_1d": "in: keep in [n] until return; out: keep [n/2 + 1] until return; "
                             "return: handle(fftwf_destroy_plan)",
    "fftwf_execute": "p: acquire",
}
ESTIMATE = 1 << 6


@pytest.fixture(scope="module")
def fftw():
    if FFTW is None:
        pytest.skip("libfftw3f is not installed")
    return tensorffi.load(FFTW, FFTW_CDEF, FFTW_CONTRACTS)


@needs_fftw
@pytest.mark.parametrize("n", [1, 8, 33])
def test_fftw_too_short_output_is_refused(fftw, n):
    x = tensorffi.buffer(n, torch.float32)
    for m in (n // 2, 0) if n // 2 else (0,):
        with pytest.raises(tensorffi.ShapeError, match=rf"'out'.*must be {n // 2 + 1}, got {m}"):
            fftw.fftwf_plan_dft_r2c_1d(x, tensorffi.buffer(m, torch.complex64), ESTIMATE)


@needs_fftw
def test_fftw_output_dtype_and_layout(fftw):
    x = tensorffi.buffer(16, torch.float32)
    with pytest.raises(tensorffi.DTypeError, match=r"'out'.*complex64"):
        fftw.fftwf_plan_dft_r2c_1d(x, tensorffi.buffer(9, torch.complex128), ESTIMATE)
    with pytest.raises(tensorffi.DTypeError, match=r"'out'.*complex64"):
        fftw.fftwf_plan_dft_r2c_1d(x, tensorffi.buffer(18, torch.float32), ESTIMATE)
    with pytest.raises(tensorffi.DTypeError, match=r"'in'.*float32"):
        fftw.fftwf_plan_dft_r2c_1d(tensorffi.buffer(16, torch.float64), tensorffi.buffer(9, torch.complex64), ESTIMATE)


@needs_fftw
@pytest.mark.parametrize("which", ["in", "out"])
def test_fftw_memory_that_can_move_is_refused(fftw, which):
    x, y = tensorffi.buffer(16, torch.float32), tensorffi.buffer(9, torch.complex64)
    if which == "in":
        x = torch.zeros(16)
    else:
        y = torch.zeros(9, dtype=torch.complex64)
    with pytest.raises(tensorffi.LayoutError, match=rf"'{which}': C keeps this array"):
        fftw.fftwf_plan_dft_r2c_1d(x, y, ESTIMATE)


@needs_fftw
def test_fftw_freed_input_stays_held_by_the_plan(fftw, rng):
    n = 64
    x, y = tensorffi.buffer(n, torch.float32), tensorffi.buffer(n // 2 + 1, torch.complex64)
    plan = fftw.fftwf_plan_dft_r2c_1d(x, y, ESTIMATE)
    v = rng.standard_normal(n).astype(np.float32)
    x.copy_(torch.from_numpy(v))
    del x
    gc.collect()
    for _ in range(3):
        junk = [torch.full((n,), 1e30) for _ in range(50)]  # reuse of freed memory would show
        fftw.fftwf_execute(plan)
        del junk
        np.testing.assert_allclose(y.numpy(), np.fft.rfft(v.astype(np.float64)), rtol=1e-4, atol=1e-4)
    plan.close()


@needs_fftw
@pytest.mark.parametrize("which", ["in", "out"])
def test_fftw_moved_array_is_refused_at_execute(fftw, which):
    x, y = tensorffi.buffer(16, torch.float32), tensorffi.buffer(9, torch.complex64)
    plan = fftw.fftwf_plan_dft_r2c_1d(x, y, ESTIMATE)
    (x if which == "in" else y).set_(torch.zeros_like(x if which == "in" else y))
    with pytest.raises(tensorffi.LayoutError, match=rf"'{which}' no longer holds the memory"):
        fftw.fftwf_execute(plan)
    plan.close()
    with pytest.raises(tensorffi.HandleClosedError):
        fftw.fftwf_execute(plan)


@needs_fftw
def test_fftw_plan_executes_many_times(fftw, rng, kind):
    n = 100
    like = "numpy" if kind == "numpy" else "torch"
    x = tensorffi.buffer(n, "float32" if like == "numpy" else torch.float32, like=like)
    y = tensorffi.buffer(n // 2 + 1, "complex64" if like == "numpy" else torch.complex64, like=like)
    with fftw.fftwf_plan_dft_r2c_1d(x, y, ESTIMATE) as plan:
        assert plan.ctype.startswith("struct fftwf_plan_s")
        for _ in range(5):
            v = rng.standard_normal(n).astype(np.float32)
            x[:] = torch.from_numpy(v) if like == "torch" else v
            fftw.fftwf_execute(plan)
            np.testing.assert_allclose(np.asarray(y), np.fft.rfft(v.astype(np.float64)), rtol=1e-4, atol=1e-4)


@needs_fftw  # the contract is checked against the opened library
def test_until_return_needs_a_returned_handle():
    with pytest.raises(tensorffi.ContractError, match="'until return' needs a function that returns a handle"):
        tensorffi.load(FFTW or "libfftw3f.so.3", FFTW_CDEF, {"fftwf_plan_dft_r2c_1d": "in: keep [n] until return"})


@needs_fftw  # the contract is checked against the opened library
def test_kept_array_cannot_be_out():
    with pytest.raises(tensorffi.ContractError, match="kept array is passed by the caller"):
        parse = "out: keep out [n] until return; return: handle(fftwf_destroy_plan)"
        tensorffi.load(FFTW or "libfftw3f.so.3", FFTW_CDEF, {"fftwf_plan_dft_r2c_1d": parse})


@needs_fftw
def test_describe_names_the_returned_handle(fftw):
    rows = {n: w for n, _, w in fftw.fftwf_plan_dft_r2c_1d.__wrapped_bridge__.plan.describe()}
    assert "handle it returns" in rows["in"] and "n/2 + 1" in rows["out"] and "complex64" in rows["out"]


@needs_fftw
@needs_zlib
def test_tensorffi_describe_shows_the_new_clauses(fftw, z):
    text = str(tensorffi.describe(fftw.fftwf_plan_dft_r2c_1d))
    assert "n/2 + 1" in text and "returned handle" in text and "complex64" in text
    assert "[sourceLen] bytes" in str(tensorffi.describe(z.compress2))


def test_expression_shapes_in_an_operator_shape_rule(sdk):
    from tensorffi.bridge import shape_rule

    rule = shape_rule(sdk.evens.__wrapped_bridge__)  # what torch.compile runs on fake tensors
    for n in (0, 1, 9, 10):
        assert rule(torch.empty(n, device="meta")).shape == (n // 2 + 1,)
    with pytest.raises(tensorffi.ShapeError, match="negative"):
        shape_rule(sdk.tail.__wrapped_bridge__)(torch.empty(3, device="meta"), 4)
