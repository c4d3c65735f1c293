# SPDX-License-Identifier: MIT
"""from_ctypes as faithful as ctypes itself (issue 37): a PyDLL keeps the GIL (or is
refused, never called without it), ``_pack_`` is reproduced and every layout is
compared with ctypes', byte-swapped Structures are refused, ``errcheck`` is honoured,
``numpy.ctypeslib.ndpointer`` argtypes become the contract, names are validated. On
36e677b: SIGSEGV in PyErr_Occurred, 16 bytes where C has 13, -1 where ctypes raised,
ndpointer refused, raw CDefError/KeyError."""
from __future__ import annotations

import ctypes
import subprocess
import sys
from ctypes import POINTER, Structure, c_char, c_double, c_float, c_int, c_int64, c_short

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.ctypeslib import ndpointer

import tensorffi
from tensorffi import ArgumentTypeError, DeclarationError, DTypeError, LayoutError, ShapeError

SRC = r"""
#include <stdint.h>
#pragma pack(push, 1)
struct packed { char tag; double value; int32_t count; };
#pragma pack(pop)
struct plain { char tag; double value; int32_t count; };
double packed_value(const struct packed *p) { return p->value * p->count + p->tag; }
double plain_value(const struct plain *p) { return p->value * p->count + p->tag; }
int checked_div(int a, int b, int *out) { if (b == 0) return -1; *out = a / b; return 0; }
double total2d(const double *x, int64_t rows, int64_t cols) {
    double t = 0; for (int64_t i = 0; i < rows * cols; i++) t += x[i]; return t; }
void scale3(float *x, float a) { for (int i = 0; i < 3; i++) x[i] *= a; }
double sum_n(const double *x, int64_t n) { double t = 0; for (int64_t i = 0; i < n; i++) t += x[i]; return t; }
"""


@pytest.fixture(scope="module")
def so(tmp_path_factory):
    d = tmp_path_factory.mktemp("ctypes_fidelity")
    (d / "f.c").write_text(SRC)
    out = d / "f.so"
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", str(d / "f.c"), "-o", str(out)], check=True)
    return str(out)


# --------------------------------------------------------------------------- #
# PyDLL: functions that use the Python C API                                   #
# --------------------------------------------------------------------------- #


PYAPI = r"""
#include <Python.h>
/* what a PyDLL function does: the Python C API, which needs the GIL */
int has_gil(void) { return PyGILState_Check(); }
double checked_sum(const double *x, long n) {
    if (!PyGILState_Check()) return -1.0;
    PyObject *total = PyFloat_FromDouble(0.0);          /* Python objects: a crash without the GIL */
    for (long i = 0; i < n; i++) {
        PyObject *v = PyFloat_FromDouble(x[i]);
        PyObject *t = PyNumber_Add(total, v);
        Py_DECREF(v); Py_DECREF(total); total = t;
    }
    double out = PyFloat_AsDouble(total);
    Py_DECREF(total);
    return PyErr_Occurred() ? -2.0 : out;
}
const char *gil_word(void) { return PyGILState_Check() ? "held" : "released"; }
"""


@pytest.fixture(scope="module")
def pyapi_so(tmp_path_factory):
    import sysconfig

    d = tmp_path_factory.mktemp("pyapi")
    (d / "p.c").write_text(PYAPI)
    out = d / "p.so"
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", str(d / "p.c"),
                    "-o", str(out)], check=True)
    return str(out)


def _configure(lib):
    lib.has_gil.argtypes, lib.has_gil.restype = [], c_int
    lib.checked_sum.argtypes, lib.checked_sum.restype = [POINTER(c_double), ctypes.c_long], c_double
    lib.gil_word.argtypes, lib.gil_word.restype = [], ctypes.c_char_p
    return lib


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_pydll_functions_keep_the_gil(pyapi_so, rng, kind):
    """On 36e677b: SIGSEGV in PyErr_Occurred (called with the GIL released)."""
    lib = tensorffi.from_ctypes(_configure(ctypes.PyDLL(pyapi_so)))
    assert lib.has_gil() == 1
    assert lib.gil_word() == "held"
    x = rng.standard_normal(int(rng.integers(1, 500)))
    arg = torch.from_numpy(x) if kind == "torch" else x
    for _ in range(3):  # the first call and the next ones (the native call path)
        assert lib.checked_sum(arg, len(x)) == pytest.approx(float(np.sum(x)), rel=1e-12)
    with pytest.raises(ShapeError, match="holds"):
        lib.checked_sum(arg, len(x) + 5)  # still checked


def test_cdll_functions_release_the_gil(pyapi_so):
    lib = tensorffi.from_ctypes(_configure(ctypes.CDLL(pyapi_so)), names={"checked_sum": "x, n"})
    assert lib.has_gil() == 0 and lib.gil_word() == "released"


def test_pythonapi_functions_are_called_with_the_gil():
    f = ctypes.pythonapi.PyGILState_Check
    f.argtypes, f.restype = [], c_int
    lib = tensorffi.from_ctypes({"PyGILState_Check": f})
    assert lib.PyGILState_Check() == 1


# --------------------------------------------------------------------------- #
# struct layout: _pack_, byte order, compared with ctypes                      #
# --------------------------------------------------------------------------- #


class Packed(Structure):
    _pack_ = 1
    _fields_ = [("tag", c_char), ("value", c_double), ("count", ctypes.c_int32)]


class Plain(Structure):
    _fields_ = [("tag", c_char), ("value", c_double), ("count", ctypes.c_int32)]


def test_pack_is_reproduced(so, rng):
    c = ctypes.CDLL(so)
    c.packed_value.argtypes, c.packed_value.restype = [POINTER(Packed)], c_double
    c.plain_value.argtypes, c.plain_value.restype = [POINTER(Plain)], c_double
    lib = tensorffi.from_ctypes(c)
    assert lib.ffi.sizeof("struct Packed") == ctypes.sizeof(Packed) == 13
    assert lib.ffi.sizeof("struct Plain") == ctypes.sizeof(Plain) == 24
    v, n = float(rng.standard_normal()), int(rng.integers(1, 100))
    p = lib.struct("struct Packed", tag=3, value=v, count=n)
    assert lib.packed_value(p) == pytest.approx(v * n + 3)
    assert lib.packed_value(p) == c.packed_value(ctypes.byref(Packed(b"\x03", v, n)))
    q = lib.struct("struct Plain", tag=2, value=v, count=n)
    assert lib.plain_value(q) == pytest.approx(v * n + 2)


def test_byte_swapped_structures_are_refused(so):
    other = ctypes.BigEndianStructure if sys.byteorder == "little" else ctypes.LittleEndianStructure

    class Swapped(other):  # type: ignore[misc, valid-type]
        _fields_ = [("tag", c_char), ("value", c_double), ("count", ctypes.c_int32)]

    c = ctypes.CDLL(so)
    c.plain_value.argtypes, c.plain_value.restype = [POINTER(Swapped)], c_double
    with pytest.raises(DeclarationError, match=r"Swapped.*byte order"):
        tensorffi.from_ctypes(c)


def test_duplicate_structure_names_get_their_own_declarations(so):
    def make():
        class Pt(Structure):
            _fields_ = [("tag", c_char), ("value", c_double), ("count", ctypes.c_int32)]
        return Pt

    a = make()

    class Pt(Structure):  # same name, another layout
        _fields_ = [("x", c_short)]

    c = ctypes.CDLL(so)
    c.plain_value.argtypes, c.plain_value.restype = [POINTER(a)], c_double
    c.packed_value.argtypes, c.packed_value.restype = [POINTER(Pt)], c_double
    lib = tensorffi.from_ctypes(c)
    p = lib.struct("struct Pt", tag=1, value=2.0, count=3)
    assert lib.plain_value(p) == 7.0


class Evil(Structure):
    _fields_ = [("int", c_int)]  # a field named like a C keyword


@pytest.mark.parametrize("argtypes, match", [
    ([POINTER(Evil)], r"field name of struct Evil.*'int' is not a C identifier"),
])
def test_names_ctypes_accepts_but_c_cannot_say(so, argtypes, match):
    c = ctypes.CDLL(so)
    c.plain_value.argtypes, c.plain_value.restype = argtypes, c_double
    with pytest.raises(DeclarationError, match=match):
        tensorffi.from_ctypes(c)


@pytest.mark.parametrize("mapping, err, match", [
    ({"names": {"nope": "a, b"}}, DeclarationError, r"names name functions that are not bound: nope"),
    ({"names": {"checked_div": 3}}, DeclarationError, r"names for checked_div must be a string"),
    ({"names": {"checked_div": "a, b, int"}}, DeclarationError, r"'int' is not a parameter name"),
    ({"names": {"checked_div": "a, a, out"}}, DeclarationError, r"'a' twice"),
    ({"contracts": {"nope": "x: [n]"}}, tensorffi.ContractError, r"not declared: nope"),
])
def test_bad_names_and_contracts_are_typed(so, mapping, err, match):
    c = ctypes.CDLL(so)
    c.checked_div.argtypes, c.checked_div.restype = [c_int, c_int, POINTER(c_int)], c_int
    with pytest.raises(err, match=match):
        tensorffi.from_ctypes(c, **mapping)


# --------------------------------------------------------------------------- #
# errcheck                                                                     #
# --------------------------------------------------------------------------- #


class DivError(Exception):
    pass


def test_errcheck_is_honoured(so):
    c = ctypes.CDLL(so)
    f = c.checked_div
    f.argtypes, f.restype = [c_int, c_int, POINTER(c_int)], c_int
    seen = []

    def errcheck(result, func, args):
        seen.append((result, func, len(args)))
        if result != 0:
            raise DivError(f"division failed: {result}")
        return "ok"

    f.errcheck = errcheck
    with pytest.raises(DivError):
        f(1, 0, ctypes.byref(c_int()))
    lib = tensorffi.from_ctypes(c, {"checked_div": "p2: out [1]"})
    with pytest.raises(DivError, match="division failed: -1"):
        lib.checked_div(7, 0)
    ok, out = lib.checked_div(7, 2)
    assert ok == "ok" and int(out[0]) == 3
    assert seen[-1][0] == 0 and seen[-1][1] is f


# --------------------------------------------------------------------------- #
# numpy.ctypeslib.ndpointer                                                    #
# --------------------------------------------------------------------------- #


def test_ndpointer_dtype_ndim_shape_flags_become_the_contract(so, rng):
    c = ctypes.CDLL(so)
    c.total2d.argtypes = [ndpointer(np.float64, ndim=2, flags="C_CONTIGUOUS"), c_int64, c_int64]
    c.total2d.restype = c_double
    c.scale3.argtypes = [ndpointer(np.float32, shape=(3,), flags="C_CONTIGUOUS,WRITEABLE"), c_float]
    c.scale3.restype = None
    c.sum_n.argtypes = [ndpointer(np.float64, flags="C"), c_int64]
    c.sum_n.restype = c_double
    lib = tensorffi.from_ctypes(c)
    x = rng.standard_normal((4, 5))
    assert lib.total2d(x, 4, 5) == pytest.approx(float(x.sum()))
    with pytest.raises(ShapeError, match="dimension"):
        lib.total2d(x.ravel(), 4, 5)  # ndim=2: a 1-D array is refused, as ndpointer refuses it
    with pytest.raises(DTypeError):
        lib.total2d(x.astype(np.float32), 4, 5)
    with pytest.raises(LayoutError):
        lib.total2d(np.asfortranarray(x), 4, 5)
    y = rng.standard_normal(3).astype(np.float32)
    want = y * 2.5
    lib.scale3(y, 2.5)
    np.testing.assert_allclose(y, want, rtol=1e-6)
    t = torch.ones(3)
    lib.scale3(t, 3.0)
    assert t.tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(ShapeError):
        lib.scale3(np.ones(4, np.float32), 1.0)  # shape=(3,)
    with pytest.raises(tensorffi.WritabilityError):
        ro = np.ones(3, np.float32)
        ro.flags.writeable = False
        lib.scale3(ro, 1.0)
    z = rng.standard_normal(9)
    assert lib.sum_n(z, 9) == pytest.approx(float(z.sum()))
    with pytest.raises(ShapeError, match="holds 9 elements"):
        lib.sum_n(z, 90)  # the length rule still holds


def test_ndpointer_without_dtype_is_void_pointer(so, rng):
    c = ctypes.CDLL(so)
    c.sum_n.argtypes = [ndpointer(flags="C_CONTIGUOUS"), c_int64]
    c.sum_n.restype = c_double
    lib = tensorffi.from_ctypes(c, names={"sum_n": "x, n"})
    z = rng.standard_normal(6)
    assert lib.sum_n(z, 6) == pytest.approx(float(z.sum()))


def test_fortran_only_ndpointer_is_refused(so):
    c = ctypes.CDLL(so)
    c.sum_n.argtypes = [ndpointer(np.float64, flags="F_CONTIGUOUS"), c_int64]
    with pytest.raises(DeclarationError, match="F_CONTIGUOUS"):
        tensorffi.from_ctypes(c)


# --------------------------------------------------------------------------- #
# fuzz: random Structures have ctypes' layout                                  #
# --------------------------------------------------------------------------- #

FIELD_TYPES = [c_char, ctypes.c_int8, ctypes.c_uint8, c_short, ctypes.c_uint16, c_int, ctypes.c_uint32, c_int64,
               ctypes.c_uint64, c_float, c_double, ctypes.c_void_p]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(types_=st.lists(st.sampled_from(FIELD_TYPES), min_size=1, max_size=8),
       arrays=st.lists(st.integers(0, 3), min_size=8, max_size=8),
       pack=st.sampled_from([None, 1, 2, 4, 8]), nested=st.booleans())
def test_random_structures_have_ctypes_layout(so, types_, arrays, pack, nested):
    fields = [(f"f{i}", t * arrays[i] if arrays[i] else t) for i, t in enumerate(types_)]
    ns = {"_fields_": fields}
    if pack:
        ns["_pack_"] = pack
    S = type("S", (Structure,), ns)
    top = S
    if nested:
        top = type("Outer", (Structure,), {"_fields_": [("a", c_char), ("inner", S), ("b", c_short)]})
    c = ctypes.CDLL(so)
    c.plain_value.argtypes, c.plain_value.restype = [POINTER(top)], c_double
    lib = tensorffi.from_ctypes(c)
    name = "struct " + top.__name__
    assert lib.ffi.sizeof(name) == ctypes.sizeof(top)
    for fname, _ in top._fields_:
        assert lib.ffi.offsetof(name, fname) == getattr(top, fname).offset
