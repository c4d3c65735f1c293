# SPDX-License-Identifier: MIT
"""Errors that were not typed, or blamed the wrong thing (issue 37): each is now a
tensorffi exception (also the matching builtin) naming the argument and the cause. On
36e677b: raw OverflowError/RecursionError from contract sizes, torch's RuntimeError for
a broadcast copy, raw mmap/NumPy errors from buffer(), UnicodeEncodeError for a
surrogate-escaped name, plain ValueError/TypeError from read_csv's options and
``skiprows=2**70`` naming an internal C function."""
from __future__ import annotations

import io
import os

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorffi
import tensorffi.io as tio
from tensorffi import (AllocationError, ArgumentOverflowError, ArgumentTypeError, ArgumentValueError, ContractError,
                       DTypeError, ShapeError, TensorFFIError)

COPY = "#include <stdint.h>\nvoid f(const float *x, float *y, int64_t n, int64_t m) { for (int64_t i = 0; i < n; i++) y[i] = x[i]; }"


# --------------------------------------------------------------------------- #
# contract sizes at the int64 edge                                             #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("contract, match", [
    ("x: [n]; y: out [99999999999999999999]", r"99999999999999999999 is larger than any array can be"),
    ("x: [n]; y: out [n*18446744073709551616]", r"larger than any array can be"),
    ("x: [n]; y: out [n]; m = n*" + "*".join(["2"] * 70), r"larger than any array can be"),
    ("x: [n]; y: out [" + "+".join(["n"] * 5000) + "]", r"is too long"),
    ("x: [n]; y: out [" + "(" * 2000 + "n" + ")" * 2000 + "]", r"is too deep"),
])
def test_contract_sizes_beyond_int64_are_contract_errors(cache, contract, match):
    with pytest.raises(ContractError, match=match):
        tensorffi.compile("edge", source=COPY, contracts={"f": contract})


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_a_fill_beyond_its_c_type_is_an_overflow_error_at_call(cache, kind):
    lib = tensorffi.compile("edge", source=COPY, contracts={"f": "x: [n]; y: out [n]; m = n*4611686018427387904"})
    one = np.ones(1, np.float32)
    np.testing.assert_array_equal(np.asarray(lib.f(one if kind == "numpy" else torch.from_numpy(one))), one)
    four = np.ones(4, np.float32)
    with pytest.raises(ArgumentOverflowError, match=r"argument 'm' \(int64_t\).*got 18446744073709551616"):
        lib.f(four if kind == "numpy" else torch.from_numpy(four))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(big=st.integers(1, 2**66), op=st.sampled_from(["*", "+", "-", "/"]), n=st.integers(1, 5),
       where=st.sampled_from(["out", "fill"]))
def test_size_expressions_at_the_int64_edge_fail_typed(cache, big, op, n, where):
    """Random expressions near 2**63: a result, or a tensorffi error; never a raw Python one."""
    expr = f"n {op} {big}"
    contract = f"x: [n]; y: out [{expr}]; m = n" if where == "out" else f"x: [n]; y: out [n]; m = {expr}"
    try:
        lib = tensorffi.compile("edge", source=COPY, contracts={"f": contract})
        lib.f(np.ones(n, np.float32))
    except TensorFFIError:
        pass


# --------------------------------------------------------------------------- #
# copies, strings, buffers                                                     #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("make", [lambda: torch.zeros(1).expand(2**42),
                                  lambda: np.broadcast_to(np.zeros(1, np.float32), (2**42,))])
def test_a_huge_broadcast_input_copy_is_an_allocation_error(cache, make):
    lib = tensorffi.compile("edge", source=COPY, contracts={"f": "x: [n]; y: [1]; m = n"})
    with pytest.raises(AllocationError, match=r"argument 'x': cannot make the contiguous copy C reads"):
        lib.f(make(), np.zeros(1, np.float32))


def test_a_surrogate_escaped_name_reaches_c_as_its_bytes(tmp_path):
    raw = b"caf\xe9-" + os.urandom(4).hex().encode() + b".txt"
    (tmp_path / os.fsdecode(raw)).write_bytes(b"x")
    name = next(n for n in os.listdir(tmp_path) if n.startswith("caf"))  # str with a surrogate escape
    libc = tensorffi.load("libc.so.6", "size_t strlen(const char *s);")
    assert libc.strlen(name) == len(raw)
    assert libc.strlen(os.path.join(os.fsdecode(bytes(tmp_path)) if isinstance(tmp_path, bytes) else str(tmp_path),
                                    name)) == len(os.fsencode(os.path.join(str(tmp_path), name)))
    with pytest.raises(ArgumentTypeError, match=r"argument 's' \(const char \*\).*lone surrogate"):
        libc.strlen("a\ud800b")


@pytest.mark.parametrize("args, kwargs, err, match", [
    ((-1,), {}, ShapeError, "cannot be negative"),
    (("3",), {}, ArgumentTypeError, "not an integer"),
    ((3.5,), {}, ArgumentTypeError, "an int or a sequence of ints"),
    (((2**40, 2**40),), {}, AllocationError, "more than any machine can map"),
    ((3, "object"), {}, DTypeError, "no C number type"),
    ((3, ">f4"), {}, DTypeError, "other byte order"),
    ((3, "nonsense"), {}, DTypeError, "must be a NumPy or torch dtype"),
    ((3,), {"like": "jax"}, ArgumentTypeError, "like must be"),
    ((3,), {"pin": "yes"}, ArgumentTypeError, "pin must be"),
    ((3, torch.bfloat16), {"like": "numpy"}, DTypeError, "NumPy has no torch.bfloat16"),
])
def test_buffer_checks_its_arguments(args, kwargs, err, match):
    with pytest.raises(err, match=match):
        tensorffi.buffer(*args, **kwargs)


@pytest.mark.parametrize("dtype", [torch.bfloat16, "bfloat16", torch.float8_e4m3fn, torch.float16])
def test_buffers_of_torch_only_types(dtype):
    b = tensorffi.buffer((3, 5), dtype)
    want = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    assert b.dtype == want and b.shape == (3, 5) and b.is_contiguous()
    assert not b.float().any()
    b.view(torch.uint8).fill_(0x3F)  # the block's bytes: writable, nothing else shares them
    assert float(b.float().min()) > 0


# --------------------------------------------------------------------------- #
# read_csv's options                                                           #
# --------------------------------------------------------------------------- #

TEXT = b"a,b\n1,2\n3,4\n"
BAD = [
    ("dtype", "complex"), ("dtype", 3), ("delimiter", ",,"), ("delimiter", ""), ("delimiter", 5), ("header", "yes"),
    ("skiprows", -1), ("skiprows", 2**70), ("skiprows", 1.5), ("usecols", [0, 0]), ("usecols", [5]),
    ("usecols", ["z"]), ("usecols", 1.5), ("comment", ","), ("comment", "ab"), ("missing", "x"), ("max_rows", -2),
    ("max_rows", 2**70), ("like", "jax"), ("na_values", [object()]), ("keep_default_na", "no"), ("thousands", ","),
    ("thousands", "ab"), ("decimal", ""), ("max_rows", 1.5),
]


@pytest.mark.parametrize("option, value", BAD)
@pytest.mark.parametrize("reader", ["read_csv", "iter_csv"])
def test_bad_reader_options_are_typed_and_named(reader, option, value):
    with pytest.raises(TensorFFIError) as info:
        if reader == "read_csv":
            tio.read_csv(TEXT, **{option: value})
        else:
            list(tio.iter_csv(TEXT, **{option: value}))
    assert isinstance(info.value, (TypeError, ValueError))
    assert option.split("_")[0] in str(info.value) or option in ("dtype",)
    assert "tf_parse" not in str(info.value)  # never an internal function's name


@pytest.mark.parametrize("kwargs", [{"threads": 0}, {"threads": -3}, {"progress": 5}])
def test_bad_read_csv_run_options_are_typed(kwargs):
    with pytest.raises(TensorFFIError, match=next(iter(kwargs))):
        tio.read_csv(TEXT, **kwargs)


@pytest.mark.parametrize("source", [io.StringIO("1,2\n"), np.zeros(3), torch.zeros(3), 3, None,
                                    memoryview(np.zeros((2, 3))[:, ::2])])
@pytest.mark.parametrize("reader", [tio.read_csv, tio.iter_csv])
def test_bad_sources_are_typed(reader, source):
    with pytest.raises(TensorFFIError):
        reader(source)


def test_skiprows_beyond_int64_names_skiprows():
    with pytest.raises(ArgumentValueError, match=r"skiprows must be at most 2\*\*63 - 1"):
        tio.read_csv(TEXT, skiprows=2**70)
