# SPDX-License-Identifier: MIT
"""One regression test per bug the bridge fuzzer (tests/test_fuzz_bridge.py) found,
written against the public API only, with the falsifying input as it was found (or
its minimal form). tests/test_bridge.py tests the same areas more broadly; these stay
here, unchanged, whatever the bridge becomes."""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
import torch

import tensorffi
from tensorffi import ArgumentOverflowError, ArgumentTypeError, LayoutError

CDEF = """
int32_t add_i32(int32_t a, int32_t b);
void add_one(double *x, int64_t n);
double sum(const double *x, int64_t n);
int64_t nonzero_bytes(const void *p, int64_t nbytes);
void strided_inc(double *x, int64_t rows, int64_t cols, int64_t rs, int64_t cs);
void iota32(int32_t *y, int32_t n);
double halve(double x);
typedef struct pair { const double *data; int64_t n; double w; } pair;
double pair_sum(const pair *p);
int64_t addr_mod8(const double *x, int64_t n);
"""
SOURCE = r"""
#include <stdint.h>
int32_t add_i32(int32_t a, int32_t b) { return a + b; }
void add_one(double *x, int64_t n) { for (int64_t i = 0; i < n; i++) x[i] += 1; }
double sum(const double *x, int64_t n) { double s = 0; for (int64_t i = 0; i < n; i++) s += x[i]; return s; }
int64_t nonzero_bytes(const void *p, int64_t nbytes) {
    const unsigned char *b = p; int64_t c = 0; for (int64_t i = 0; i < nbytes; i++) c += b[i] != 0; return c; }
void strided_inc(double *x, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    for (int64_t i = 0; i < rows; i++) for (int64_t j = 0; j < cols; j++) x[i * rs + j * cs] += 1; }
void iota32(int32_t *y, int32_t n) { for (int32_t i = 0; i < n; i++) y[i] = i; }
double halve(double x) { return x / 2; }
double pair_sum(const pair *p) { double s = 0; for (int64_t i = 0; i < p->n; i++) s += p->data[i]; return p->w * s; }
int64_t addr_mod8(const double *x, int64_t n) { (void)n; return (int64_t)((uintptr_t)x % 8); }
"""
CONTRACTS = {"sum": "x: [n]", "iota32": "y: out [n]", "addr_mod8": "x: [n]"}


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return tensorffi.compile("fuzz_regressions", CDEF, source=SOURCE, contracts=CONTRACTS,
                             cache=tmp_path_factory.mktemp("tfcache-fuzzreg"))


@pytest.mark.parametrize("value", [np.float32(1.5), 2.5, Fraction(3, 2), Decimal("1.5"), torch.tensor(1.7),
                                   np.float32("nan")], ids=repr)
def test_bug1_floats_are_never_truncated_into_integer_parameters(lib, value):
    with pytest.raises(ArgumentTypeError, match="argument 'a'"):
        lib.add_i32(value, 2)
    x = np.zeros(3)
    with pytest.raises(ArgumentTypeError, match="argument 'n'"):
        lib.add_one(x, value)
    assert x.tolist() == [0.0] * 3


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_bug2_strided_accepts_written_views_that_do_not_overlap(lib, kind):
    full = torch.zeros(5, 7, dtype=torch.float64) if kind == "torch" else np.zeros((5, 7))
    view = full[:, 1:4]  # a BLAS-style view with its lda: not dense, no overlap
    st = view.stride() if kind == "torch" else tuple(s // 8 for s in view.strides)
    lib.strided_inc(tensorffi.strided(view), 5, 3, st[0], st[1])
    want = np.zeros((5, 7))
    want[:, 1:4] = 1
    np.testing.assert_array_equal(np.asarray(full), want)
    with pytest.raises(LayoutError, match="overlaps itself"):
        lib.strided_inc(tensorffi.strided(torch.zeros(1, dtype=torch.float64).expand(4)), 1, 4, 0, 0)


@pytest.mark.parametrize("value", [torch.tensor([1.0, 2.0]), np.array([1.0, 2.0]), "4",
                                   torch.tensor(1.0, device="meta")], ids=["tensor2", "array2", "str", "meta"])
def test_bug3_bad_float_arguments_raise_tensorffi_errors(lib, value):
    with pytest.raises(ArgumentTypeError, match="argument 'x'"):
        lib.halve(value)
    with pytest.raises(ArgumentOverflowError, match="argument 'x'"):
        lib.halve(2**1100)


def test_bug4_non_contiguous_memoryview_is_a_layout_error(lib):
    data = bytearray([0, 1, 2, 0, 5, 6])
    assert lib.nonzero_bytes(memoryview(data), 6) == 4
    with pytest.raises(LayoutError, match="argument 'p'"):
        lib.nonzero_bytes(memoryview(data)[::2], 3)


def test_bug5_neg_and_conj_bits_never_reach_c_as_stored(lib):
    ref = np.array([1.0, -2.0, 3.5])
    z = torch.complex(torch.zeros(3, dtype=torch.float64), torch.from_numpy(ref))
    neg = z.conj().imag  # shows -ref, stores +ref
    assert neg.is_neg()
    assert lib.sum(neg) == -ref.sum()  # a contract input: a resolved copy
    with pytest.raises(LayoutError, match="negative bit"):
        lib.add_one(neg, 3)  # written: refused
    with pytest.raises(LayoutError, match="conjugate bit"):
        lib.nonzero_bytes(z.conj(), 48)  # no contract: refused
    np.testing.assert_array_equal(z.imag.numpy(), ref)


def test_bug6_unaligned_numpy_input_is_copied_to_aligned_memory(lib):
    raw = np.zeros(8 * 4 + 1, np.uint8)
    a = raw[1:].view(np.float64)
    a[:] = [1.0, 2.0, 3.0, 4.0]
    assert not a.flags.aligned
    assert lib.addr_mod8(a) == 0
    assert lib.sum(a) == 10.0
    with pytest.raises(tensorffi.ShapeError):
        lib.sum(np.array(2.5))  # 0-d is not [n]: never silently made 1-d


@pytest.mark.parametrize("n", [2**31, 2**63, 2**64, -1])
def test_bug7_lengths_are_range_checked_before_allocating(lib, n):
    with pytest.raises((ArgumentOverflowError, tensorffi.ShapeError), match="n"):
        lib.iota32(n=n)
    assert lib.iota32(n=4).tolist() == [0, 1, 2, 3]


def test_bug8_struct_fields_that_fail_to_convert_name_the_field(lib):
    data = torch.arange(4, dtype=torch.float64)
    assert lib.struct("pair", data=data, n=4, w=2.0) is not None
    with pytest.raises(ArgumentTypeError, match="field 'w'"):
        lib.struct("pair", data=data, n=4, w=torch.tensor([1.0, 2.0]))
    with pytest.raises(ArgumentOverflowError, match="field 'n'"):
        lib.struct("pair", data=data, n=2**70, w=1.0)
    with pytest.raises(ArgumentTypeError, match="field 'n'"):
        lib.struct("pair", data=data, n=np.float32(4), w=1.0)
    assert lib.pair_sum(lib.struct("pair", data=data, n=4, w=2.0)) == 12.0
