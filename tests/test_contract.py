# SPDX-License-Identifier: MIT
"""Contract grammar and its evaluation (products, numel, free symbols)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tensorffi
from tensorffi.contract import Dim, parse_contract

from conftest import as_kind, to_numpy

CDEF = """
void flat_copy(const float *x, float *y, int64_t total);
void interleave(const float *a, const float *b, float *out, int64_t n);
void fill_rows(float *out, int64_t rows, int64_t cols, float v);
"""
SRC = """
#include <stdint.h>
void flat_copy(const float *x, float *y, int64_t total) { for (int64_t i = 0; i < total; i++) y[i] = x[i]; }
void interleave(const float *a, const float *b, float *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) { out[2 * i] = a[i]; out[2 * i + 1] = b[i]; }
}
void fill_rows(float *out, int64_t rows, int64_t cols, float v) {
    for (int64_t i = 0; i < rows * cols; i++) out[i] = v + (float)(i / cols);
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return tensorffi.compile(
        "contracts",
        CDEF,
        source=SRC,
        cache=tmp_path_factory.mktemp("cache"),
        contracts={
            "flat_copy": "x: [b, n]; y: out [b*n]; total = numel(x)",
            "interleave": "a: [n]; b: [n]; out: out [2*n]",
            "fill_rows": "out: out [rows, cols]",
        },
    )


def test_parse_contract_pieces():
    c = parse_contract("x: [b, n]; y: out? [b*n, 3]; total = numel(x); k = 2*n; return: status")
    assert c.arrays["x"].shape == (Dim(("b",)), Dim(("n",)))
    assert c.arrays["y"].role == "out" and c.arrays["y"].optional
    assert c.arrays["y"].shape == (Dim(("b", "n")), Dim((), 3))
    assert c.fills["total"].numel_of == "x"
    assert c.fills["k"].dim == Dim(("n",), 2)
    assert c.returns == "status"
    assert c.symbols == {"b", "n"}


def test_products_and_numel(lib, kind, rng):
    x = rng.standard_normal((3, 7)).astype(np.float32)
    y = lib.flat_copy(as_kind(x, kind))
    np.testing.assert_array_equal(to_numpy(y), x.ravel())
    a, b = rng.standard_normal(5).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    out = lib.interleave(as_kind(a, kind), as_kind(b, kind))
    np.testing.assert_array_equal(to_numpy(out)[0::2], a)
    np.testing.assert_array_equal(to_numpy(out)[1::2], b)
    with pytest.raises(tensorffi.ShapeError, match=r"dimension 0 \(2\*n\) is 9, but 2\*n = 10 from argument .a."):
        lib.interleave(as_kind(a, kind), as_kind(b, kind), out=as_kind(np.zeros(9, np.float32), kind))


def test_free_symbols_are_keyword_arguments(lib):
    out = lib.fill_rows(1.5, rows=3, cols=2)
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == (3, 2)
    np.testing.assert_array_equal(out.numpy(), np.array([[1.5, 1.5], [2.5, 2.5], [3.5, 3.5]], np.float32))
    with pytest.raises(tensorffi.ShapeError, match="pass cols="):
        lib.fill_rows(1.0, rows=3)
    given = np.zeros((2, 4), np.float32)
    assert lib.fill_rows(0.0, out=given) is given  # sizes come from the given out
    np.testing.assert_array_equal(given[1], 1.0)
