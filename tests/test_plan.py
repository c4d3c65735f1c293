# SPDX-License-Identifier: MIT
"""The contract plan: validated when it is built, and the same semantics on every path
(direct call with torch and NumPy, operator kernel, shape rule)."""
from __future__ import annotations

import traceback

import numpy as np
import pytest
import torch

import tensorffi
from tensorffi import ArgumentOverflowError, ArgumentTypeError, ContractError, LayoutError, ShapeError

from conftest import as_kind, to_numpy

CDEF = """
void fill_opt(const float *x, float *y, int64_t m);
void fill_opt2(const float *x, float *y, int64_t len);
void dupl(const float *x, float *y, int64_t n);
void flat(const float *x, float *y, int64_t n);
void process_data(float *data, int size);
void two_out(const double *x, double *a, double *b, int64_t n);
int64_t slen(const char *s);
int64_t slen_or_minus(const char *s);
void scale_f(float *x, int64_t n, float a);
void scale_d(double *x, int64_t n, double a);
void add_into(const double *x, double *y, int64_t n);
"""
SRC = r"""
#include <stdint.h>
#include <string.h>
void fill_opt(const float *x, float *y, int64_t m) { for (int64_t i = 0; i < m; i++) y[i] = x ? 2 * x[i] : (float)i; }
void fill_opt2(const float *x, float *y, int64_t len) { fill_opt(x, y, len); }
void dupl(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; i++) { y[2 * i] = x[i]; y[2 * i + 1] = x[i]; } }
void flat(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = x[i] + 1; }
void process_data(float *data, int size) { for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f; }
void two_out(const double *x, double *a, double *b, int64_t n) { for (int64_t i = 0; i < n; i++) { a[i] = x[i] + 1; b[i] = x[i] * 2; } }
int64_t slen(const char *s) { return (int64_t)strlen(s); }
int64_t slen_or_minus(const char *s) { return s ? (int64_t)strlen(s) : -1; }
void scale_f(float *x, int64_t n, float a) { for (int64_t i = 0; i < n; i++) x[i] *= a; }
void scale_d(double *x, int64_t n, double a) { for (int64_t i = 0; i < n; i++) x[i] *= a; }
void add_into(const double *x, double *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] += x[i]; }
"""
CONTRACTS = {
    "fill_opt": "x: in? [m]; y: out [m]",
    "fill_opt2": "x: in? [m]; y: out [m]; len = m",
    "dupl": "x: [n]; y: out [2*n]",
    "flat": "x: [b, k]; y: out [n]; n = b*k",
    "process_data": "data: [size]",
    "two_out": "x: [n]; a: out [n]; b: out [n]",
    "slen_or_minus": "s: ?",
    "add_into": "x: [n]; y: [n]",
}


@pytest.fixture(scope="module")
def lib(cache):
    return tensorffi.compile("planlib", CDEF, source=SRC, contracts=CONTRACTS, cache=cache)


# --------------------------------------------------------------------------- #
# validated when built                                                         #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    "contract, match",
    [
        ("x: [n]; y: out [n]; n = 2*n", r"'n' is defined in terms of itself.*'n = 2\*n'"),
        ("x: [n]; y: out [n]; n = n*0", r"always 0"),
        ("y: out [n]; n = numel(y)", r"'n' is defined in terms of itself"),
        ("x: [n]; y: out [n]; z: [3]", r"names 'z', which is not a parameter"),
        ("x: [n]; y: out [n]; n = numel(q)", r"names 'q'|numel\(q\)"),
        ("x: [n]; y: out [n]; n = 3; n = 4", r"filled in twice"),
        ("x: [n]; y: out; ", r"expected"),
        ("x: [n]; y: [n, a]", r"'a' is used as a size"),
    ],
)
def test_contradictory_or_circular_contracts_fail_at_bind_time(cache, contract, match):
    with pytest.raises(ContractError, match=match):
        tensorffi.compile(
            "planbad", "void f(const float *x, float *y, int64_t n, float a);",
            source="void f(const float *x, float *y, int64_t n, float a) { (void)x; (void)y; (void)n; (void)a; }",
            contracts={"f": contract}, cache=cache,
        )


def test_sizes_defined_in_a_circle(cache):
    with pytest.raises(ContractError, match="circle"):
        tensorffi.compile(
            "plancirc", "void g(float *a, float *b, int64_t n, int64_t m);",
            source="void g(float *a, float *b, int64_t n, int64_t m) { (void)a; (void)b; (void)n; (void)m; }",
            contracts={"g": "a: out [n]; b: out [m]; n = m; m = n"}, cache=cache,
        )


def test_a_size_bound_only_by_an_optional_array_is_a_keyword(lib, kind, rng):
    # was: f() said "pass m=...", and f(m=1) raised "unexpected keyword argument 'm'"
    with pytest.raises(ShapeError, match="pass m="):
        lib.fill_opt()
    np.testing.assert_array_equal(to_numpy(lib.fill_opt(m=4)), [0, 1, 2, 3])
    x = rng.standard_normal(5).astype(np.float32)
    np.testing.assert_array_equal(to_numpy(lib.fill_opt(x=as_kind(x, kind))), 2 * x)
    np.testing.assert_array_equal(to_numpy(lib.fill_opt(x=as_kind(x, kind), m=5)), 2 * x)
    with pytest.raises(ShapeError, match="argument 'm' is 4, but the array shapes give m = 5"):
        lib.fill_opt(x=as_kind(x, kind), m=4)
    # the same with a size that is no parameter (len = m): m= is a keyword argument
    with pytest.raises(ShapeError, match="pass m="):
        lib.fill_opt2()
    np.testing.assert_array_equal(to_numpy(lib.fill_opt2(m=3)), [0, 1, 2])
    np.testing.assert_array_equal(to_numpy(lib.fill_opt2(x=as_kind(x, kind))), 2 * x)
    with pytest.raises(ShapeError, match="m=4 was passed, but m = 5"):
        lib.fill_opt2(x=as_kind(x, kind), m=4)


def test_a_fill_defines_its_size_for_outputs(lib, kind, rng):
    # n = b*k: y gets b*k elements and C is told n = b*k (was: allocation and n disagreed)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = lib.flat(as_kind(x, kind))
    assert tuple(y.shape) == (12,)
    np.testing.assert_array_equal(to_numpy(y), x.ravel() + 1)
    with pytest.raises(ShapeError, match="argument 'n' is 11"):
        lib.flat(as_kind(x, kind), n=11)


def test_factor_dimensions_allocate_and_check(lib, kind, rng):
    x = rng.standard_normal(7).astype(np.float32)
    y = lib.dupl(as_kind(x, kind))
    assert tuple(y.shape) == (14,)
    np.testing.assert_array_equal(to_numpy(y), np.repeat(x, 2))
    with pytest.raises(ShapeError, match=r"dimension 0 \(2\*n\) is 13, but 2\*n = 14"):
        lib.dupl(as_kind(x, kind), y=as_kind(np.zeros(13, np.float32), kind))


# --------------------------------------------------------------------------- #
# the recipe keeps working when a contract is added                            #
# --------------------------------------------------------------------------- #


def test_full_c_calling_form_with_a_contract(lib, kind, rng):
    ref = rng.standard_normal(9).astype(np.float32)
    t = as_kind(ref, kind)
    lib.process_data(t, 9)  # the seed recipe, unchanged, now checked
    np.testing.assert_allclose(to_numpy(t), 2 * ref + 1, rtol=1e-6)
    lib.process_data(t)  # the short form
    np.testing.assert_allclose(to_numpy(t), 2 * (2 * ref + 1) + 1, rtol=1e-6)
    with pytest.raises(ShapeError, match="argument 'size' is 8, but the array shapes give size = 9"):
        lib.process_data(t, 8)
    with pytest.raises(TypeError, match=r"takes 1 positional argument\(s\) \(data\) or all 2"):
        lib.process_data(t, 9, 3)
    with pytest.raises(ArgumentOverflowError, match="argument 'size'"):
        lib.process_data(t, 2**31)


def test_full_form_with_outputs_positionally(lib, kind, rng):
    x = rng.standard_normal(6)
    a, b = as_kind(np.zeros(6), kind), as_kind(np.zeros(6), kind)
    ra, rb = lib.two_out(as_kind(x, kind), a, b, 6)
    assert ra is a and rb is b
    np.testing.assert_array_equal(to_numpy(a), x + 1)
    np.testing.assert_array_equal(to_numpy(b), x * 2)
    ra, rb = lib.two_out(as_kind(x, kind), None, None, 6)  # None: allocate
    np.testing.assert_array_equal(to_numpy(ra), x + 1)


# --------------------------------------------------------------------------- #
# memory: storages, aliasing                                                   #
# --------------------------------------------------------------------------- #


def test_storage_resized_to_nothing_is_refused(lib):
    t = torch.ones(8)
    t.untyped_storage().resize_(0)
    with pytest.raises(LayoutError, match="storage holds 0 bytes"):
        lib.process_data(t, 8)
    with pytest.raises(LayoutError, match="storage holds 0 bytes"):
        tensorffi.core.scale_(t, 2.0)


def test_storage_smaller_than_the_tensor_is_refused_and_nothing_is_written(rng):
    t = torch.ones(65536)
    t.untyped_storage().resize_(16)
    keep = [torch.full((4,), 7.0) for _ in range(100)]  # memory around the 16-byte block
    with pytest.raises(LayoutError, match="holds 16 bytes"):
        tensorffi.core.scale_(t, 3.0)
    assert all(float(k.sum()) == 28.0 for k in keep)
    # (a tensor viewed by NumPy cannot have its storage resized: torch refuses)
    u = torch.ones(1024)
    v = u.numpy()
    with pytest.raises(RuntimeError, match="not resizable"):
        u.untyped_storage().resize_(8)
    tensorffi.core.scale_(v, 2.0)
    assert float(u.sum()) == 2048.0


def test_offset_views_within_their_storage_are_fine(kind, rng):
    ref = rng.standard_normal(10).astype(np.float32)
    base = as_kind(ref, kind)
    tensorffi.core.scale_(base[3:], 2.0)
    np.testing.assert_allclose(to_numpy(base), np.concatenate([ref[:3], 2 * ref[3:]]), rtol=1e-6)


def test_aliased_written_arguments_are_refused(lib, kind, rng):
    x = as_kind(rng.standard_normal(8), kind)
    before = to_numpy(x).copy()
    with pytest.raises(LayoutError, match="'x' and 'y' share memory"):
        tensorffi.core.axpy_(x, x, 2.0)
    with pytest.raises(LayoutError, match="share memory"):
        lib.add_into(x[:6], x[2:])  # overlapping halves
    np.testing.assert_array_equal(to_numpy(x), before)
    lib.add_into(x[:4], x[4:])  # adjacent, disjoint: fine
    np.testing.assert_array_equal(to_numpy(x)[4:], before[4:] + before[:4])


# --------------------------------------------------------------------------- #
# strings and scalars                                                          #
# --------------------------------------------------------------------------- #


def test_c_strings(lib):
    assert lib.slen("héllo") == len("héllo".encode())
    assert lib.slen(b"abc") == 3
    assert lib.slen(bytearray(b"abcd")) == 4
    with pytest.raises(ArgumentTypeError, match="cannot be None"):
        lib.slen(None)
    assert lib.slen_or_minus(None) == -1  # the contract says 's: ?'
    with pytest.raises(ArgumentTypeError, match="NUL byte"):
        lib.slen("a\0b")
    with pytest.raises(ArgumentTypeError, match="without a NUL terminator"):
        lib.slen(np.frombuffer(b"abc", np.uint8))
    assert lib.slen(np.frombuffer(b"abc\0def", np.uint8)) == 3
    assert lib.slen(torch.tensor([65, 66, 0], dtype=torch.uint8)) == 2


@pytest.mark.parametrize("value", [1e300, -1e39, 1e-50, -1e-46])
def test_float_parameters_refuse_what_float32_cannot_hold(lib, value):
    x = torch.ones(3)
    with pytest.raises(ArgumentOverflowError, match="argument 'a'"):
        lib.scale_f(x, 3, value)
    assert x.tolist() == [1.0] * 3
    y = torch.ones(3, dtype=torch.float64)
    lib.scale_d(y, 3, value)  # a double holds it
    assert y[0].item() == value


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 3.4028234663852886e38, 1.5e-45, 0.0])
def test_float_parameters_pass_nan_inf_and_representable_values(lib, value):
    x = torch.ones(1)
    lib.scale_f(x, 1, value)
    np.testing.assert_equal(x.numpy()[0], np.float32(value))


# --------------------------------------------------------------------------- #
# typed errors for unusual tensors                                             #
# --------------------------------------------------------------------------- #


def test_sparse_nested_and_inference_tensors(lib):
    dense = torch.zeros(3, 3)
    dense[0, 1] = 1.0
    for bad in (dense.to_sparse(), dense.to_sparse_csr()):
        with pytest.raises(LayoutError, match="layout"):
            lib.process_data(bad, 9)
    nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    with pytest.raises(LayoutError, match="nested"):
        lib.process_data(nested, 5)
    with torch.inference_mode():
        inf = torch.ones(3)
    with pytest.raises(tensorffi.WritabilityError, match="inference"):
        lib.process_data(inf, 3)
    assert inf.tolist() == [1.0, 1.0, 1.0]
    with torch.inference_mode():
        lib.process_data(inf, 3)
    assert inf.tolist() == [3.0, 3.0, 3.0]


def test_dlpack_producers_keep_their_read_only_flag(lib):
    ro = np.frombuffer(bytes(16), np.float32)

    class Producer:  # a foreign array (JAX, CuPy...) seen through DLPack only
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    with pytest.raises(tensorffi.WritabilityError, match="read-only"):
        lib.process_data(Producer(ro), 4)
    w = np.zeros(4, np.float32)
    lib.process_data(Producer(w), 4)
    assert w.tolist() == [1.0] * 4


def test_errors_are_raised_from_the_generated_frame(lib):
    with pytest.raises(tensorffi.DTypeError) as err:
        lib.process_data(torch.zeros(3, dtype=torch.float64), 3)
    frames = traceback.extract_tb(err.value.__traceback__)
    assert frames[-1].filename.startswith("<tensorffi call: process_data")
    assert all("bridge.py" not in f.filename for f in frames)


def test_non_mapping_contracts_are_a_contract_error(cache):
    with pytest.raises(ContractError, match="mapping"):
        tensorffi.compile("planmap", "void h(float *x, int64_t n);",
                          source="void h(float *x, int64_t n) { (void)x; (void)n; }", contracts=["h: x: [n]"],
                          cache=cache)


def test_huge_sizes_are_typed_errors():
    with pytest.raises(tensorffi.TensorFFIError, match="argument 'x'"):
        tensorffi.core.iota(n=2**60)
