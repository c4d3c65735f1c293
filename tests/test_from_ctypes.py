# SPDX-License-Identifier: MIT
"""tensorffi.from_ctypes (issue 21, item 2): the seed's ctypes recipe, checked with
one added line. Hostile cases first: what ctypes passes silently (a float64 array, a
strided view, a too-short tensor) must be a typed error naming the argument, and what
cannot be derived from argtypes a typed error naming the function and the type."""
from __future__ import annotations

import ctypes
import ctypes.util
import subprocess
import zlib
from ctypes import CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_float, c_int, c_int64, c_void_p

import numpy as np
import pytest
import torch

import tensorffi

SRC = r"""
#include <math.h>
#include <stdint.h>
static int counter = 0;
void process_data(float *data, int size) { for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f; }
int bump(void) { return ++counter; }
struct pt { double x, y; };
double norm_p(const struct pt *p) { return sqrt(p->x * p->x + p->y * p->y); }
double norm_v(struct pt p) { return sqrt(p.x * p.x + p.y * p.y); }
double apply(double (*f)(double), double x) { return f(x) + 1.0; }
int64_t isum(const int64_t *x, int64_t n) { int64_t s = 0; for (int64_t i = 0; i < n; i++) s += x[i]; return s; }
"""


@pytest.fixture(scope="module")
def so(tmp_path_factory):
    d = tmp_path_factory.mktemp("fromctypes")
    (d / "mylib.c").write_text(SRC)
    out = d / "mylib.so"
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", str(d / "mylib.c"), "-o", str(out), "-lm"], check=True)
    return str(out)


def seed(so):
    """The seed's recipe, as a ctypes user has it."""
    lib = ctypes.CDLL(so)
    lib.process_data.argtypes = [POINTER(c_float), c_int]
    lib.process_data.restype = None
    return lib


# --------------------------------------------------------------------------- #
# hostile: what ctypes would pass, refused                                    #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("bad, err, match", [
    (lambda: torch.ones(8, dtype=torch.float64), tensorffi.DTypeError, "expects dtype torch.float32"),
    (lambda: np.ones(8), tensorffi.DTypeError, "float32"),
    (lambda: torch.ones(16)[::2], tensorffi.LayoutError, "contiguous"),
    (lambda: torch.ones(4), tensorffi.ShapeError, "holds 4 elements, but 'n_1' is 8"),
    (lambda: torch.ones(8).expand(2, 8)[0], None, None),  # a contiguous row of a broadcast: fine
    (lambda: np.ones(8, dtype=np.float32)[::-1], tensorffi.LayoutError, "contiguous"),
])
def test_seed_recipe_refuses_what_ctypes_passes(so, bad, err, match):
    lib = tensorffi.from_ctypes(seed(so))
    x = bad()
    if err is None:
        return
    with pytest.raises(err, match=match):
        lib.process_data(x, 8)
    with pytest.raises(tensorffi.WritabilityError):
        ro = np.ones(8, dtype=np.float32)
        ro.flags.writeable = False
        lib.process_data(ro, 8)
    with pytest.raises(tensorffi.ArgumentOverflowError):
        lib.process_data(torch.ones(8), 2**31)


def test_missing_argtypes_is_a_declaration_error(so):
    lib = ctypes.CDLL(so)
    lib.process_data.restype = None
    with pytest.raises(tensorffi.DeclarationError, match=r"process_data\.argtypes is not set"):
        tensorffi.from_ctypes(lib.process_data)
    with pytest.raises(tensorffi.DeclarationError, match="none of its functions has been configured"):
        tensorffi.from_ctypes(ctypes.CDLL(so))


class _Bits(Structure):
    _fields_ = [("a", c_int, 3), ("b", c_int, 5)]


class _Opaque(Structure):
    pass


@pytest.mark.parametrize("argtypes, match", [
    ([ctypes.c_wchar_p], "wchar_t string"),
    ([POINTER(POINTER(c_float))], "pointer to a pointer"),
    ([c_float * 4], "ctypes array type"),
    ([ctypes.c_longdouble], "long double"),
    ([POINTER(_Bits)], "bit field"),
    ([POINTER(_Opaque)], "without _fields_"),
])
def test_unsupported_types_are_named(so, argtypes, match):
    lib = ctypes.CDLL(so)
    lib.bump.argtypes = argtypes
    with pytest.raises(tensorffi.DeclarationError, match=rf"bump\(\) argument 0.*{match}"):
        tensorffi.from_ctypes(lib.bump)


def test_a_restype_that_is_not_a_ctypes_type(so):
    lib = ctypes.CDLL(so)
    lib.bump.argtypes, lib.bump.restype = [], int  # ctypes calls it on the int result
    with pytest.raises(tensorffi.DeclarationError, match=r"bump\(\) result.*not a ctypes type"):
        tensorffi.from_ctypes(lib.bump)


def test_not_ctypes_is_a_type_error():
    with pytest.raises(tensorffi.ArgumentTypeError):
        tensorffi.from_ctypes("libm.so.6")
    with pytest.raises(tensorffi.ArgumentTypeError):
        tensorffi.from_ctypes([len])


def test_names_must_match_argtypes(so):
    with pytest.raises(tensorffi.DeclarationError, match="1 name"):
        tensorffi.from_ctypes(seed(so), names={"process_data": "data"})


# --------------------------------------------------------------------------- #
# what works                                                                   #
# --------------------------------------------------------------------------- #


def test_seed_recipe_one_added_line(so, rng, kind):
    lib = tensorffi.from_ctypes(seed(so))
    x = rng.standard_normal(100).astype(np.float32)
    t = torch.from_numpy(x.copy()) if kind == "torch" else x.copy()
    lib.process_data(t, 100)
    np.testing.assert_array_equal(np.asarray(t), 2.0 * x + 1.0)
    lib.process_data(t, 10)  # a shorter length is fine: a lower bound
    np.testing.assert_array_equal(np.asarray(t)[:10], 2.0 * (2.0 * x[:10] + 1.0) + 1.0)
    assert lib.process_data.__wrapped_bridge__.native_reason is None  # the native call path


def test_same_loaded_object(so):
    clib = ctypes.CDLL(so)
    clib.bump.argtypes = []
    clib.bump.restype = c_int
    lib = tensorffi.from_ctypes(clib)
    a = clib.bump()
    assert lib.bump() == a + 1 and clib.bump() == a + 2  # one counter: the same library
    assert int(lib.ffi.cast("intptr_t", lib.raw.bump)) == ctypes.cast(clib.bump, c_void_p).value


def test_names_and_contracts(so, rng):
    clib = seed(so)
    lib = tensorffi.from_ctypes(clib, {"process_data": "data: [size]"}, names={"process_data": "data, size"})
    x = rng.standard_normal(7).astype(np.float32)
    t = torch.from_numpy(x.copy())
    lib.process_data(t)  # size filled in
    np.testing.assert_array_equal(t.numpy(), 2 * x + 1)
    with pytest.raises(tensorffi.ShapeError):
        lib.process_data(t, 8)


def test_int64_and_several_functions(so, rng):
    clib = ctypes.CDLL(so)
    clib.isum.argtypes = [POINTER(c_int64), c_int64]
    clib.isum.restype = c_int64
    clib.bump.argtypes, clib.bump.restype = [], c_int
    lib = tensorffi.from_ctypes([clib.isum, clib.bump])
    v = rng.integers(-(2**40), 2**40, 50)
    assert lib.isum(v, 50) == int(v.sum())
    with pytest.raises(tensorffi.DTypeError):
        lib.isum(v.astype(np.int32), 50)


class Pt(Structure):
    _fields_ = [("x", c_double), ("y", c_double)]


def test_structures_by_pointer_and_by_value(so, rng):
    clib = ctypes.CDLL(so)
    clib.norm_p.argtypes, clib.norm_p.restype = [POINTER(Pt)], c_double
    clib.norm_v.argtypes, clib.norm_v.restype = [Pt], c_double
    lib = tensorffi.from_ctypes(clib)
    x, y = rng.standard_normal(2)
    s = lib.struct("struct Pt", x=x, y=y)
    assert lib.norm_p(s) == pytest.approx(float(np.hypot(x, y)), rel=1e-15)
    v = lib.ffi.new("struct Pt *", {"x": x, "y": y})[0]
    assert lib.norm_v(v) == pytest.approx(float(np.hypot(x, y)), rel=1e-15)


def test_callbacks(so):
    F = CFUNCTYPE(c_double, c_double)
    clib = ctypes.CDLL(so)
    clib.apply.argtypes, clib.apply.restype = [F, c_double], c_double
    lib = tensorffi.from_ctypes(clib, {"apply": "p0: callback()"})
    assert lib.apply(lambda v: v * 3.0, 2.0) == 7.0

    def boom(v):
        raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        lib.apply(boom, 1.0)


@pytest.mark.skipif(ctypes.util.find_library("z") is None, reason="zlib is not installed")
def test_void_pointer_and_string_result(rng):
    z = ctypes.CDLL(ctypes.util.find_library("z"))
    z.crc32.argtypes = [ctypes.c_ulong, c_void_p, ctypes.c_uint]
    z.crc32.restype = ctypes.c_ulong
    z.zlibVersion.argtypes, z.zlibVersion.restype = [], c_char_p
    lib = tensorffi.from_ctypes(z, {"crc32": "p1: [n_2]"})
    x = rng.standard_normal(250).astype(np.float32)
    assert lib.crc32(0, x) == zlib.crc32(x.tobytes())  # void *: all 1,000 bytes
    assert lib.zlibVersion() == zlib.ZLIB_RUNTIME_VERSION


# --------------------------------------------------------------------------- #
# the generic register call (x86-64 System V): every result type, mixed        #
# integer and floating arguments, against ctypes' own call of the same C       #
# --------------------------------------------------------------------------- #

SIG_SRC = r"""
#include <stdint.h>
#include <stdbool.h>
#define R(T, NAME) T NAME(int64_t a, float b, double c, const float *x, int n) { \
    double s = (double)a * 3.0 + (double)b * 5.0 - c; for (int i = 0; i < n; i++) s += x[i]; return (T)(int64_t)s; }
R(int8_t, r_i8) R(uint8_t, r_u8) R(int16_t, r_i16) R(uint16_t, r_u16) R(int32_t, r_i32) R(uint32_t, r_u32)
R(int64_t, r_i64) R(uint64_t, r_u64)
bool r_bool(int64_t a, float b, double c, const float *x, int n) { (void)b; (void)c; (void)x; return a + n > 0; }
float r_f32(int64_t a, float b, double c, const float *x, int n) { float s = (float)a * b - (float)c; for (int i = 0; i < n; i++) s += x[i]; return s; }
double r_f64(int64_t a, float b, double c, const float *x, int n) { double s = (double)a * b - c; for (int i = 0; i < n; i++) s += x[i]; return s; }
double many(int8_t a, uint16_t b, int32_t c, uint64_t d, const double *x, int64_t e,
            float f0, double f1, float f2, double f3, float f4, double f5, float f6, double f7) {
    return a * 1.0 + b * 2.0 + c * 3.0 + (double)(d >> 40) * 4.0 + x[0] * 5.0 + e * 6.0 + f0 * 7.0 + f1 * 8.0
           + f2 * 9.0 + f3 * 10.0 + f4 * 11.0 + f5 * 12.0 + f6 * 13.0 + f7 * 14.0;
}
void wide(double *y, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, int64_t f) {
    y[0] = (double)(a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f);
}
"""
RESULTS = {"r_i8": ctypes.c_int8, "r_u8": ctypes.c_uint8, "r_i16": ctypes.c_int16, "r_u16": ctypes.c_uint16,
           "r_i32": ctypes.c_int32, "r_u32": ctypes.c_uint32, "r_i64": ctypes.c_int64, "r_u64": ctypes.c_uint64,
           "r_bool": ctypes.c_bool, "r_f32": c_float, "r_f64": c_double}


@pytest.fixture(scope="module")
def sigs(tmp_path_factory):
    d = tmp_path_factory.mktemp("sigs")
    (d / "sigs.c").write_text(SIG_SRC)
    out = d / "sigs.so"
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", str(d / "sigs.c"), "-o", str(out)], check=True)
    clib = ctypes.CDLL(str(out))
    for name, res in RESULTS.items():
        fn = getattr(clib, name)
        fn.argtypes, fn.restype = [c_int64, c_float, c_double, POINTER(c_float), c_int], res
    clib.many.argtypes = [ctypes.c_int8, ctypes.c_uint16, ctypes.c_int32, ctypes.c_uint64, POINTER(c_double),
                          c_int64] + [c_float, c_double] * 4
    clib.many.restype = c_double
    clib.wide.argtypes = [POINTER(c_double)] + [c_int64] * 6
    clib.wide.restype = None
    return clib, tensorffi.from_ctypes(clib, {"wide": "p0: [1]", "many": "p4: [1]"})


def test_every_result_type_equals_ctypes(sigs, rng):
    from tensorffi._bridge import lower

    clib, lib = sigs
    for name in RESULTS:
        bound = getattr(lib, name).__wrapped_bridge__
        assert bound.native_reason is None
        if lower.STATE.limits.get("generic"):
            assert lower.generic_call(bound.plan, bound.ffi, bound.address) is not None
        for _ in range(20):
            a = int(rng.integers(-(2**40), 2**40))
            b, c = float(np.float32(rng.standard_normal() * 100)), float(rng.standard_normal() * 1e6)
            x = rng.standard_normal(7).astype(np.float32) * 1000
            want = getattr(clib, name)(a, b, c, x.ctypes.data_as(POINTER(c_float)), 7)
            got = getattr(lib, name)(a, b, c, x, 7)
            if name in ("r_f32", "r_f64"):
                assert got == pytest.approx(want, rel=0, abs=0), name  # the same C, the same bits
            else:
                assert got == want, name


def test_mixed_registers_equal_ctypes(sigs, rng):
    clib, lib = sigs
    for _ in range(20):
        ints = [int(rng.integers(-128, 128)), int(rng.integers(0, 65536)), int(rng.integers(-(2**31), 2**31)),
                int(rng.integers(0, 2**63, dtype=np.uint64)) * 2 + 1]
        x = rng.standard_normal(1)
        e = int(rng.integers(-(2**50), 2**50))
        fl = [float(np.float32(v)) if i % 2 == 0 else float(v) for i, v in enumerate(rng.standard_normal(8))]
        want = clib.many(*ints, x.ctypes.data_as(POINTER(c_double)), e, *fl)
        assert lib.many(*ints, x, e, *fl) == want
    y = np.zeros(1)
    v = [int(t) for t in rng.integers(-(2**40), 2**40, 6)]
    lib.wide(y, *v)
    assert y[0] == float(sum((k + 1) * t for k, t in enumerate(v)))
    with pytest.raises(tensorffi.ShapeError):
        lib.wide(np.zeros(0), *v)


# load() takes the same register call: its functions are cffi pointers (ABI mode), called
# by their address instead of through cffi's call; built with gcc and clang (clang's
# callees rely on the caller extending narrow arguments), equal to ctypes' call.

_C_RESULTS = {"r_i8": "int8_t", "r_u8": "uint8_t", "r_i16": "int16_t", "r_u16": "uint16_t", "r_i32": "int32_t",
              "r_u32": "uint32_t", "r_i64": "int64_t", "r_u64": "uint64_t", "r_bool": "bool", "r_f32": "float",
              "r_f64": "double"}
SIG_CDEF = "\n".join(f"{t} {n}(int64_t a, float b, double c, const float *x, int n);" for n, t in _C_RESULTS.items()) + """
double many(int8_t a, uint16_t b, int32_t c, uint64_t d, const double *x, int64_t e,
            float f0, double f1, float f2, double f3, float f4, double f5, float f6, double f7);
"""


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_load_calls_by_address_and_equals_ctypes(sigs, tmp_path, cc, rng):
    import shutil

    from tensorffi._bridge import lower

    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed")
    (tmp_path / "sigs.c").write_text(SIG_SRC)
    so = tmp_path / f"sigs_{cc}.so"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", str(tmp_path / "sigs.c"), "-o", str(so)], check=True)
    clib, _ = sigs  # ctypes' call of the gcc build is the reference
    lib = tensorffi.load(str(so), SIG_CDEF, {"many": "x: [1]"})
    for name in (*_C_RESULTS, "many"):
        bound = getattr(lib, name).__wrapped_bridge__
        assert bound.native_reason is None and getattr(getattr(lib, name), "__native__", False)
        if lower.STATE.limits.get("generic"):
            assert bound.address is not None and lower.generic_call(bound.plan, bound.ffi, bound.address) is not None
    for _ in range(20):
        a = int(rng.integers(-(2**40), 2**40))
        b, c = float(np.float32(rng.standard_normal() * 100)), float(rng.standard_normal() * 1e6)
        x = rng.standard_normal(7).astype(np.float32) * 1000
        for name in _C_RESULTS:
            want = getattr(clib, name)(a, b, c, x.ctypes.data_as(POINTER(c_float)), 7)
            assert getattr(lib, name)(a, b, c, torch.from_numpy(x), 7) == want, name
        ints = [int(rng.integers(-128, 128)), int(rng.integers(0, 65536)), int(rng.integers(-(2**31), 2**31)),
                int(rng.integers(0, 2**63, dtype=np.uint64)) * 2 + 1]
        xd = rng.standard_normal(1)
        e = int(rng.integers(-(2**50), 2**50))
        fl = [float(np.float32(v)) if i % 2 == 0 else float(v) for i, v in enumerate(rng.standard_normal(8))]
        assert lib.many(*ints, xd, e, *fl) == clib.many(*ints, xd.ctypes.data_as(POINTER(c_double)), e, *fl)
    with pytest.raises(tensorffi.ShapeError):
        lib.r_f64(a, b, c, x, 8)  # n names x's length: at least 8 elements needed
