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
