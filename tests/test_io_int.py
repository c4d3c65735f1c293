# SPDX-License-Identifier: MIT
"""tensorffi.io.read_csv (and iter_csv, CSVDataset) into int32 and int64 tables.

Values are checked against Python's ``int()``, NumPy's ``loadtxt(dtype=np.int64)`` and
pandas on fresh random tables over the whole range of each type, formatted with signs,
leading zeros and blanks; the grammar is ``[+-]digits`` between blanks, as
``loadtxt(dtype=int)`` reads it. Everything else (``1.0``, ``1e3``, ``nan``, an empty
field without an integer ``missing`` fill) and every value outside the type's range is
a ParseError naming line, column and byte offset: never a wrapped or saturated value.
Each test runs through the one-call path, the parallel passes (chunks of a few bytes)
and the stream, where it says ``read``.
"""
from __future__ import annotations

import _thread
import io
import os
import threading

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorffi.io as tio
from tensorffi import ParseError

from conftest import simd_levels

I32 = (-(2**31), 2**31 - 1)
I64 = (-(2**63), 2**63 - 1)
RANGE = {"int32": I32, "int64": I64}
TORCH = {"int32": torch.int32, "int64": torch.int64}


@pytest.fixture(params=["one-call", "passes", "stream"])
def read(request, monkeypatch):
    """read_csv as an int64 NumPy table (unless told otherwise), by one of its roads:
    the one-call path, the parallel passes with chunks of 64 bytes on two threads, or
    iter_csv's stream in chunks of 7 rows, concatenated."""

    def run(data: bytes, **kw):
        kw.setdefault("dtype", "int64")
        kw.setdefault("like", "numpy")
        if request.param == "stream":
            chunks = tio.iter_csv(io.BytesIO(data), chunk_rows=7, **kw)
            parts = list(chunks)
            if parts:
                return np.concatenate(parts) if kw["like"] == "numpy" else torch.cat(parts)
            return np.empty((0, chunks._layout.cols), dtype=kw["dtype"])
        if request.param == "passes":
            monkeypatch.setattr(tio, "_CHUNK_BYTES", 64)
            kw.setdefault("threads", 2)
        return tio.read_csv(data, **kw)

    run.road = request.param  # type: ignore[attr-defined]
    return run


def mixed_ints(rng: np.random.Generator, shape: tuple[int, int], lo: int, hi: int) -> list[list[int]]:
    """Integers in [lo, hi] of every magnitude (1 to 19 digits alike), and the bounds."""
    digits = rng.integers(1, 20, size=shape)
    out = []
    for row in digits.tolist():
        vals = []
        for d in row:
            top = min(hi, 10**d - 1)
            bottom = max(lo, -(10**d - 1))
            vals.append(int(rng.integers(bottom, top, endpoint=True)))
        out.append(vals)
    flat = [v for row in out for v in row]
    for k, v in zip(rng.choice(len(flat), size=min(len(flat), 6), replace=False).tolist(), [lo, hi, 0, -1, 1, lo + 1]):
        flat[k] = v
    cols = shape[1]
    return [flat[i : i + cols] for i in range(0, len(flat), cols)]


def formatted(rng: np.random.Generator, v: int) -> str:
    """v with a random sign spelling, leading zeros and blanks, as int() and loadtxt read it."""
    sign = "-" if v < 0 else str(rng.choice(["", "", "+"]))
    zeros = "0" * int(rng.choice([0, 0, 0, 1, 3, 25]))
    before, after = (str(rng.choice(["", "", " ", "\t", "  "])) for _ in range(2))
    return f"{before}{sign}{zeros}{abs(v)}{after}"


def table_text(rows: list[list[str]], eol: str = "\n") -> bytes:
    return (eol.join(",".join(r) for r in rows) + eol).encode()


# --------------------------------------------------------------------------- #
# hostile inputs first: overflow, non-integers, missing values                  #
# --------------------------------------------------------------------------- #

OVERFLOW = {
    "int32": ["2147483648", "-2147483649", "+2147483648", "4294967296", "4294967297", "9" * 11, "-" + "9" * 30,
              "00000000000000000000002147483648"],
    "int64": ["9223372036854775808", "-9223372036854775809", "+9223372036854775808", "18446744073709551616",
              "18446744073709551617", "18446744073709551621", "99999999999999999999", "1" * 40, "-" + "9" * 25,
              "000000000000000000000009223372036854775808"],
}


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_overflow_by_one_is_a_parse_error_at_its_field(read, dtype):
    for token in OVERFLOW[dtype]:
        data = f"a,b\n1,2\n3,{token}\n5,6\n".encode()
        with pytest.raises(ParseError, match=f"out of range for {dtype}") as info:
            read(data, dtype=dtype)
        err = info.value
        assert (err.line, err.column, err.offset, err.text) == (3, 3, 10, token), (dtype, token)
        assert "line 3, column 3 (byte offset 10)" in str(err)
        # the same in the first column, after blanks
        with pytest.raises(ParseError, match="out of range") as info:
            read(f"1,2\n  {token} ,4\n".encode(), dtype=dtype, header=False)
        assert (info.value.line, info.value.column, info.value.offset) == (2, 3, 6), token


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_bounds_are_exact_and_leading_zeros_do_not_count(read, dtype):
    lo, hi = RANGE[dtype]
    spellings = [str(lo), str(hi), f"+{hi}", "-0", "+0", "0", "0" * 30, "-" + "0" * 30 + str(-lo),
                 "0" * 25 + str(hi), f" \t{lo}\t ", "007", "-007"]
    want = [lo, hi, hi, 0, 0, 0, 0, lo, hi, lo, 7, -7]
    got = read(("x\n" + "\n".join(spellings) + "\n").encode(), dtype=dtype)
    assert got.dtype == np.dtype(dtype) and got[:, 0].tolist() == want


NOT_INTEGERS = ["1.0", "1.5", "1.", ".5", "1e3", "1E3", "1e+03", "nan", "NaN", "-nan", "inf", "-inf", "Infinity",
                "0x10", "1_000", "--1", "+-1", "-+1", "++1", "+", "-", "1 2", "12a", "a12", "abc", "1-", "٣",
                "１２", "5%", "NA"]


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_anything_but_sign_and_digits_is_a_parse_error(read, dtype):
    """As loadtxt(dtype=int): no decimal point (not even 1.0), no exponent, no nan or inf;
    the error names the field's line, column and offset."""
    for token in NOT_INTEGERS:
        data = f"a,b\n1,2\n3,{token}\n".encode()
        with pytest.raises(ParseError, match="not an integer") as info:
            read(data, dtype=dtype)
        err = info.value
        assert (err.line, err.column, err.offset, err.text) == (3, 3, 10, token), token
        with pytest.raises(ValueError):
            np.loadtxt(io.StringIO(f"1,2\n3,{token}\n"), delimiter=",", dtype=np.int64)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_missing_values_are_errors_without_an_integer_fill(read, dtype):
    """Integers have no NaN: an empty field (or an NA word) is a ParseError naming it,
    unless ``missing`` is an integer, which then fills it."""
    cases = [(b"a,b\n1,2\n3,\n", 3, 3, 10), (b"a,b\n1,2\n,4\n", 3, 1, 8), (b"a,b\n1,2\n3,  \n", 3, 3, 10),
             (b'a,b\n1,2\n3,""\n', 3, 3, 10)]
    for data, line, column, offset in cases:
        with pytest.raises(ParseError, match=f"missing.*{dtype} has no NaN") as info:
            read(data, dtype=dtype)
        assert (info.value.line, info.value.column, info.value.offset) == (line, column, offset), data
    with pytest.raises(ParseError, match="missing") as info:
        read(b"a,b\n1,NA\n", dtype=dtype, na_values=())
    assert (info.value.line, info.value.column, info.value.text) == (2, 3, "NA")
    lo, hi = RANGE[dtype]
    for fill in (-1, lo, hi, np.int32(-7), -3.0):
        got = read(b"a,b\n1,\n,NA\n5,6\n", dtype=dtype, missing=fill, na_values=())
        assert got.tolist() == [[1, int(fill)], [int(fill), int(fill)], [5, 6]], fill


def test_an_int64_fill_is_exact_beyond_float64():
    for fill in (2**62 + 1, -(2**63), 2**63 - 1):
        got = tio.read_csv(b"a,b\n1,\n", dtype=torch.int64, missing=fill)
        assert got.tolist() == [[1, fill]]
        chunks = list(tio.iter_csv(io.BytesIO(b"a,b\n1,\n"), dtype=torch.int64, missing=fill))
        assert chunks[0].tolist() == [[1, fill]]


@pytest.mark.parametrize(
    "dtype, missing, exc, match",
    [("int32", 1.5, ValueError, "integer"), ("int64", float("inf"), ValueError, "integer"),
     ("int64", -0.5, ValueError, "integer"), ("int32", "x", TypeError, "number"),
     ("int32", 2**31, OverflowError, "int32"), ("int32", -(2**31) - 1, OverflowError, "int32"),
     ("int64", 2**63, OverflowError, "int64"), ("int64", -(2**63) - 1, OverflowError, "int64"),
     ("int64", None, TypeError, "number")],
)
def test_a_fill_that_is_not_an_integer_of_the_type_is_refused_at_call_time(dtype, missing, exc, match):
    for call in (lambda: tio.read_csv(b"1,2\n", dtype=dtype, missing=missing),
                 lambda: tio.read_csv(io.BytesIO(b"1,2\n" * 10), dtype=dtype, missing=missing, usecols=[0]),
                 lambda: tio.iter_csv(io.BytesIO(b"1,2\n"), dtype=dtype, missing=missing),
                 lambda: tio.CSVDataset("unused.csv", dtype=dtype, missing=missing)):
        with pytest.raises(exc, match=match):
            call()


def test_never_wraps_or_saturates_in_any_column_or_simd_level(monkeypatch):
    """Overflow in the vector region (where the AVX2 reader runs: 64 bytes ahead), in
    every column, at every SIMD level: an error, never 2**64 - x or the bound."""
    pad = "1,-2,3\n" * 12
    for simd in simd_levels():
        monkeypatch.setenv("TENSORFFI_SIMD", simd)
        for dtype, tokens in OVERFLOW.items():
            for token in tokens[:6]:
                for col in range(3):
                    row = ["7", "8", "9"]
                    row[col] = token
                    data = (pad + ",".join(row) + "\n" + pad).encode()
                    with pytest.raises(ParseError, match="out of range") as info:
                        tio.read_csv(data, dtype=dtype, header=False)
                    assert info.value.line == 13 and info.value.text == token, (simd, dtype, token, col)


# --------------------------------------------------------------------------- #
# values against independent references                                        #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_random_tables_match_int_and_loadtxt(read, rng, dtype):
    lo, hi = RANGE[dtype]
    values = mixed_ints(rng, (300, 5), lo, hi)
    texts = [[formatted(rng, v) for v in row] for row in values]
    data = table_text(texts)
    got = read(data, dtype=dtype, header=False)
    assert got.dtype == np.dtype(dtype) and got.flags.c_contiguous
    assert got.tolist() == [[int(t) for t in row] for row in texts] == values
    ref = np.loadtxt(io.BytesIO(data), delimiter=",", dtype=np.int64)
    assert np.array_equal(got.astype(np.int64), ref)


@pytest.mark.parametrize("simd", simd_levels())
@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_realistic_tables_at_every_simd_level(rng, monkeypatch, simd, eol):
    """Plain fields (no blanks or zeros: the vector reader's shape) over the whole
    int64 range, at each SIMD level the CPU has, one and two threads."""
    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    from conftest import require_simd

    require_simd("parse", simd)
    values = mixed_ints(rng, (2000, 6), *I64)
    data = table_text([[str(v) for v in row] for row in values], eol)
    monkeypatch.setattr(tio, "_CHUNK_BYTES", 8192)
    for threads in (1, 2):
        got = tio.read_csv(data, dtype=torch.int64, header=False, threads=threads)
        assert got.dtype == torch.int64 and got.tolist() == values
    small = [[v >> 33 for v in row] for row in values]  # int32 range
    data32 = table_text([[str(v) for v in row] for row in small], eol)
    got32 = tio.read_csv(data32, dtype=torch.int32, header=False)
    assert got32.dtype == torch.int32 and got32.tolist() == small


def test_matches_pandas_c_engine(rng):
    pd = pytest.importorskip("pandas")
    values = mixed_ints(rng, (500, 4), *I64)
    data = b"a,b,c,d\n" + table_text([[str(v) for v in row] for row in values])
    ref = pd.read_csv(io.BytesIO(data), engine="c", dtype=np.int64).to_numpy()
    got, names = tio.read_csv(data, dtype=np.int64, like="numpy", return_names=True)
    assert names == ["a", "b", "c", "d"] and got.dtype == np.int64 and np.array_equal(got, ref)
    # thousands separators, as pandas reads them for integers
    text = b"a;b\n" + b"".join(f"{v:,};{-(v // 2):,}\n".encode() for v in (row[0] for row in values))
    ref = pd.read_csv(io.BytesIO(text), sep=";", thousands=",", engine="c", dtype=np.int64).to_numpy()
    got = tio.read_csv(text, delimiter=";", thousands=",", dtype="int64", like="numpy")
    assert np.array_equal(got, ref)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(*I64), st.sampled_from(["", "+"]), st.integers(0, 24), st.sampled_from(["", " ", "\t", " \t"]),
                  st.sampled_from(["", " ", "\t"])),
        min_size=3, max_size=60,
    ),
    st.sampled_from(simd_levels()),
)
def test_hypothesis_int64_over_the_whole_range(fields, simd):
    """Any int64 with any sign spelling, leading zeros and blanks, read where the vector
    reader runs and where it does not: int() of the text, as int64 exactly; as int32,
    either the same values or a ParseError at the first one out of int32's range."""
    os.environ["TENSORFFI_SIMD"] = simd
    try:
        texts = [f"{b}{'-' if v < 0 else s}{'0' * z}{abs(v)}{a}" for v, s, z, b, a in fields]
        rows = [texts[i : i + 3] for i in range(0, len(texts) - len(texts) % 3, 3)]
        pad = "1,2,3\n" * 8
        data = (pad + "".join(",".join(r) + "\n" for r in rows) + pad).encode()
        want = [[1, 2, 3]] * 8 + [[int(t) for t in r] for r in rows] + [[1, 2, 3]] * 8
        got = tio.read_csv(data, dtype=torch.int64, header=False)
        assert got.tolist() == want
        flat = [v for r in want for v in r]
        bad = next((i for i, v in enumerate(flat) if not I32[0] <= v <= I32[1]), None)
        if bad is None:
            assert tio.read_csv(data, dtype=torch.int32, header=False).tolist() == want
        else:
            with pytest.raises(ParseError, match="out of range for int32") as info:
                tio.read_csv(data, dtype=torch.int32, header=False)
            assert info.value.line == bad // 3 + 1 and int(info.value.text) == flat[bad]
    finally:
        del os.environ["TENSORFFI_SIMD"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text("0123456789+-", min_size=1, max_size=24), min_size=3, max_size=3),
       st.sampled_from(simd_levels()))
def test_hypothesis_tokens_over_the_integer_alphabet(tokens, simd):
    """Any token of signs and digits: int()'s value where Python accepts it and it fits
    int64, else a ParseError at the token (out of range, or not an integer)."""
    os.environ["TENSORFFI_SIMD"] = simd
    try:
        pad = "1,2,3\n" * 8
        data = (pad + ",".join(tokens) + "\n" + pad).encode()
        values = []
        for t in tokens:
            try:
                values.append(int(t))
            except ValueError:
                values.append(None)
        bad = next((i for i, v in enumerate(values) if v is None or not I64[0] <= v <= I64[1]), None)
        if bad is None:
            got = tio.read_csv(data, dtype=torch.int64, header=False)
            assert got[8].tolist() == values
            return
        with pytest.raises(ParseError, match="out of range" if values[bad] is not None else "not an integer") as info:
            tio.read_csv(data, dtype=torch.int64, header=False)
        assert info.value.line == 9 and info.value.offset == len(pad) + sum(len(t) + 1 for t in tokens[:bad])
    finally:
        del os.environ["TENSORFFI_SIMD"]


VALID_INTS = ["0", "-0", "+0", "5", "-5", "+5", "00012", "-00012", "123456789012345678", "1234567890123456789",
              "-1234567890123456789", "9223372036854775807", "-9223372036854775808", "0" * 31 + "1",
              "-" + "0" * 29 + "9223372036854775807", "0" * 40]
BAD_IN_VECTOR = ["1.", "1.0", "1e5", "-", "+", "--1", "1-", "0x1", "1" * 33 + "x", "12a", "NA"]


@pytest.mark.parametrize("simd", simd_levels())
@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_vector_field_reader_for_integers(monkeypatch, simd, eol):
    """Each form in the middle of a long input (the vector reader's region) and at its
    end, in the first, middle and last column; malformed ones are errors there too."""
    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    pad = eol.join(["25,-15,7"] * 12) + eol
    for text in VALID_INTS + BAD_IN_VECTOR:
        for col in range(3):
            row = ["1", "2", "3"]
            row[col] = text
            line = ",".join(row) + eol
            data = (pad + line + pad + line.rstrip()).encode()
            if text in BAD_IN_VECTOR:
                with pytest.raises(ParseError, match="not an integer") as info:
                    tio.read_csv(data, dtype=torch.int64, header=False)
                assert (info.value.line, info.value.offset) == (13, len(pad) + 2 * col), (simd, text, col)
                continue
            got = tio.read_csv(data, dtype=torch.int64, header=False)
            assert got.shape == (26, 3)
            assert got[12, col].item() == int(text) == got[25, col].item(), (simd, text, col)
            assert got[11].tolist() == [25, -15, 7] == got[13].tolist()


@pytest.mark.parametrize("simd", simd_levels())
def test_wide_records_near_the_end_of_the_input(rng, monkeypatch, simd):
    """The vector reader reads a whole record without a bound check per field when the
    record starts far enough from the end: wide records of the longest fields it takes
    (19 digits and a sign, CRLF), in every position relative to the end, last line
    ended or not."""
    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    for cols in (1, 2, 7, 40):
        for rows in (1, 2, 5):
            values = [[int(rng.integers(*I64, endpoint=True)) for _ in range(cols)] for _ in range(rows)]
            values[0][0] = I64[0]
            for eol, last in (("\r\n", True), ("\n", False)):
                text = eol.join(",".join(str(v) for v in row) for row in values) + (eol if last else "")
                for pad in (0, 1, 3):
                    data = ("7," * (cols - 1) + "7" + eol) * pad + text
                    got = tio.read_csv(data.encode(), dtype=torch.int64, header=False)
                    assert got.tolist() == [[7] * cols] * pad + values, (cols, rows, eol, pad)


# --------------------------------------------------------------------------- #
# dtype spellings and result kinds                                              #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    "dtype, want",
    [(torch.int32, "int32"), (torch.int64, "int64"), (torch.long, "int64"), (np.int32, "int32"), (np.int64, "int64"),
     (np.dtype("int32"), "int32"), (np.dtype("int64"), "int64"), ("int32", "int32"), ("int64", "int64"),
     ("torch.int64", "int64"), ("i4", "int32"), ("i8", "int64"), ("<i8", "int64"), ("long", "int64"),
     (int, "int64")],
)
def test_dtype_spellings(dtype, want, kind):
    got = tio.read_csv(b"a,b\n-1,2\n3,-4\n", dtype=dtype, like=kind)
    if kind == "numpy":
        assert isinstance(got, np.ndarray) and got.dtype == np.dtype(want)
    else:
        assert isinstance(got, torch.Tensor) and got.dtype == TORCH[want]
    assert got.tolist() == [[-1, 2], [3, -4]]
    chunks = list(tio.iter_csv(io.BytesIO(b"a,b\n-1,2\n3,-4\n"), dtype=dtype, like=kind))
    assert chunks[0].dtype == got.dtype and chunks[0].tolist() == got.tolist()


@pytest.mark.parametrize("dtype", ["int", np.int16, np.uint64, torch.int16, torch.uint8, "i2", "u8", bool])
def test_other_integer_dtypes_are_refused(dtype):
    match = "ambiguous" if dtype == "int" else "int32 or int64"
    with pytest.raises(TypeError, match=match):
        tio.read_csv(b"1,2\n", dtype=dtype)
    with pytest.raises(TypeError, match=match):
        tio.iter_csv(io.BytesIO(b"1,2\n"), dtype=dtype)


# --------------------------------------------------------------------------- #
# the reader's options with integers                                           #
# --------------------------------------------------------------------------- #


def test_thousands_separators(read):
    data = b"a;b\n1,234,567;-9,223,372,036,854,775,808\n+12;007\n9,223,372,036,854,775,807;1,000\n"
    got = read(data, delimiter=";", thousands=",")
    assert got.tolist() == [[1234567, -(2**63)], [12, 7], [2**63 - 1, 1000]]
    assert read(b"a b\n1 000 000\n", delimiter=",", thousands=" ").tolist() == [[1000000]]
    with pytest.raises(ParseError, match="out of range for int64") as info:
        read(b"a;b\n1;9,223,372,036,854,775,808\n", delimiter=";", thousands=",")
    assert (info.value.line, info.value.column, info.value.offset) == (2, 3, 6)
    with pytest.raises(ParseError, match="out of range for int32"):
        read(b"a;b\n1;2,147,483,648\n", delimiter=";", thousands=",", dtype="int32")
    for bad in (b"1,,234", b",1", b"1,", b"1,23.0"):
        with pytest.raises(ParseError, match="not an integer") as info:
            read(b"a;b\n1;" + bad + b"\n", delimiter=";", thousands=",")
        assert info.value.line == 2, bad


def test_a_decimal_mark_in_an_integer_column_is_an_error(read):
    with pytest.raises(ParseError, match="not an integer") as info:
        read(b"a;b\n1;2\n3;4,0\n", delimiter=";", decimal=",")
    assert (info.value.line, info.value.column, info.value.text) == (3, 3, "4,0")
    with pytest.raises(ParseError, match="not an integer"):
        read(b"a;b\n1;2\n3;4.0\n", delimiter=";", decimal=",")
    # the decimal mark's own value never matters for whole numbers
    assert read(b"a;b\n1;-2\n", delimiter=";", decimal=",").tolist() == [[1, -2]]
    got = read(b"a;b\n1.234;-2\n", delimiter=";", decimal=",", thousands=".")
    assert got.tolist() == [[1234, -2]]


def test_na_values_with_a_fill(read):
    data = b"a,b,c\n1,NA,-999\nNULL,5,\n"
    assert read(data, na_values=["-999"], missing=-1).tolist() == [[1, -1, -1], [-1, 5, -1]]
    # without the default words, NA is text: an error, not a missing value
    with pytest.raises(ParseError, match="not an integer") as info:
        read(data, na_values=["-999"], keep_default_na=False, missing=0)
    assert (info.value.line, info.value.column, info.value.text) == (2, 3, "NA")
    with pytest.raises(ParseError, match="missing") as info:
        read(data, na_values=["-999"])
    assert (info.value.line, info.value.column) == (2, 3)
    # NaN spellings: pandas' default NA words (a float reads them as NaN), and NA words
    # when named; without na_values, text like any other
    nan = b"a,b\n1,NaN\n-nan,2\nnan,3\n"
    assert read(nan, na_values=(), missing=-7).tolist() == [[1, -7], [-7, 2], [-7, 3]]
    assert read(nan, na_values=["NaN", "nan", "-nan"], keep_default_na=False, missing=0).tolist() == \
        [[1, 0], [0, 2], [0, 3]]
    with pytest.raises(ParseError, match="missing.*int64 has no NaN") as info:
        read(nan, na_values=())
    assert (info.value.line, info.value.column, info.value.text) == (2, 3, "NaN")
    with pytest.raises(ParseError, match="not an integer") as info:
        read(nan, missing=0)
    assert (info.value.line, info.value.column, info.value.text) == (2, 3, "NaN")


def test_structure_options(read):
    data = b"# made by hand\nskip me\nid,x,name,y\n1,-5,abc,7\n2,6,\"d,e\",-8 # note\n\n3,9223372036854775807,f,0\n"
    got = read(data, skiprows=2, usecols=["id", "y", "x"], comment="#")
    assert got.tolist() == [[1, 7, -5], [2, -8, 6], [3, 0, 2**63 - 1]]
    _, names = tio.read_csv(data, dtype="int64", skiprows=2, usecols=["id", "y", "x"], comment="#", return_names=True)
    assert names == ["id", "y", "x"] and tio.iter_csv(io.BytesIO(data), skiprows=2, usecols=[3, 0], comment="#",
                                                      dtype="int64").names == ["y", "id"]
    assert read(data, skiprows=2, usecols=[0, 3], comment="#", max_rows=2).tolist() == [[1, 7], [2, -8]]
    assert read(data, skiprows=3, usecols=[-1, 0], comment="#", header=False).tolist() == [[7, 1], [-8, 2], [0, 3]]
    with pytest.raises(ParseError, match="not an integer") as info:  # header=False: the names are data
        read(data, skiprows=2, usecols=[0, 3], comment="#", header=False)
    assert (info.value.line, info.value.column, info.value.text) == (3, 1, "id")
    # quoted numbers and blanks inside quotes, Unicode blanks around a number
    assert read(b'a,b\n"5"," -6 "\n\xc2\xa07\xe2\x80\xaf,8\n').tolist() == [[5, -6], [7, 8]]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_header_auto_with_integers(dtype, kind):
    got, names = tio.read_csv(b"a,b\n1,2\n", dtype=dtype, like=kind, return_names=True)
    assert names == ["a", "b"] and got.tolist() == [[1, 2]]
    got, names = tio.read_csv(b"1,2\n3,4\n", dtype=dtype, like=kind, return_names=True)
    assert names is None and got.tolist() == [[1, 2], [3, 4]]
    with pytest.raises(ParseError, match="not an integer") as info:  # mixed first row: data, so an error
        tio.read_csv(b"1,x\n3,4\n", dtype=dtype)
    assert (info.value.line, info.value.column) == (1, 3)
    empty = tio.read_csv(b"a,b\n", dtype=dtype, like=kind)
    assert tuple(empty.shape) == (0, 2) and str(empty.dtype).endswith(str(dtype).removeprefix("torch."))


# --------------------------------------------------------------------------- #
# the parallel passes, streams, datasets, cancellation                          #
# --------------------------------------------------------------------------- #


def large_table(rng: np.random.Generator, rows: int) -> tuple[bytes, list[list[int]]]:
    values = mixed_ints(rng, (rows, 6), *I64)
    return table_text([[str(v) for v in row] for row in values]), values


def test_large_inputs_take_the_parallel_passes(rng, monkeypatch):
    """Above _SMALL_BYTES: the two parallel passes with their real chunk sizes, on one
    and two threads (the chunks are counted to make sure there are several)."""
    data, values = large_table(rng, 12000)
    assert len(data) > tio._SMALL_BYTES and -(-len(data) // tio._chunk_bytes(len(data), 2)) >= 3
    calls = []
    real = tio._fill["i64"]
    monkeypatch.setitem(tio._fill, "i64", lambda *a, **k: calls.append(1) or real(*a, **k))
    for threads in (1, 2):
        got = tio.read_csv(data, dtype=torch.int64, header=False, threads=threads)
        assert got.tolist() == values
    assert len(calls) == 2
    got = tio.read_csv(data, dtype=np.int64, like="numpy", header=False, usecols=[5, 0])
    assert got.tolist() == [[r[5], r[0]] for r in values]


def test_first_error_in_the_file_wins_across_chunks(rng, monkeypatch):
    data, values = large_table(rng, 12000)
    lines = data.split(b"\n")
    lines[9000] = b"1,2,3,4,5,9223372036854775808"  # overflow, later
    lines[7000] = b"1,2,3,4.5,5,6"  # not an integer, first
    bad = b"\n".join(lines)
    offset = bad.index(b"4.5,5,6")
    for chunk in (None, 4096):
        monkeypatch.setattr(tio, "_CHUNK_BYTES", chunk)
        for threads in (1, 2):
            with pytest.raises(ParseError, match="not an integer") as info:
                tio.read_csv(bad, dtype=torch.int64, header=False, threads=threads)
            assert (info.value.line, info.value.offset, info.value.text) == (7001, offset, "4.5"), (chunk, threads)
    with pytest.raises(ParseError, match="out of range for int64") as info:
        tio.read_csv(b"\n".join(lines[:7000] + lines[7001:]), dtype=torch.int64, header=False, threads=2)
    assert info.value.line == 9000


def test_iter_csv_chunks_equal_one_read_csv(rng, tmp_path):
    data, values = large_table(rng, 3000)
    path = tmp_path / "ints.csv"
    path.write_bytes(b"a,b,c,d,e,f\n" + data)
    want = tio.read_csv(path, dtype=torch.int64)
    chunks = tio.iter_csv(path, 500, dtype=torch.int64)
    parts = list(chunks)
    assert [p.shape[0] for p in parts] == [500] * 6 and torch.equal(torch.cat(parts), want)
    assert want.tolist() == values
    # an error in a later chunk: the chunks before it first, then read_csv's error
    lines = (b"a,b,c,d,e,f\n" + data).split(b"\n")
    lines[2500] = lines[2500].rsplit(b",", 1)[0] + b",-9223372036854775809"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(ParseError) as want_err:
        tio.read_csv(path, dtype=torch.int64)
    got_rows = 0
    with pytest.raises(ParseError) as got_err:
        for part in tio.iter_csv(path, 500, dtype=torch.int64):
            got_rows += part.shape[0]
    assert got_rows == 2000
    e, g = want_err.value, got_err.value
    assert (g.line, g.column, g.offset, g.text, str(g)) == (e.line, e.column, e.offset, e.text, str(e))
    assert e.line == 2501 and "out of range for int64" in str(e)


def test_int32_streams_from_a_pipe(rng):
    values = mixed_ints(rng, (2000, 3), *I32)
    data = table_text([[str(v) for v in row] for row in values])
    r, w = os.pipe()

    def write() -> None:
        with os.fdopen(w, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        with os.fdopen(r, "rb", buffering=0) as f:
            got = tio.read_csv(f, dtype=np.int32, like="numpy", header=False)
    finally:
        writer.join()
    assert got.dtype == np.int32 and got.tolist() == values


def test_csv_dataset_with_workers(rng, tmp_path, monkeypatch):
    values = mixed_ints(rng, (3000, 3), *I64)
    for i, row in enumerate(values):
        row[0] = i
    path = tmp_path / "ds.csv"
    path.write_bytes(b"id,x,y\n" + table_text([[str(v) for v in row] for row in values]))
    ds = tio.CSVDataset(path, 100, dtype=torch.int64)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork",
                                         timeout=120)
    chunks = list(loader)
    rows = torch.cat(chunks)
    rows = rows[torch.argsort(rows[:, 0])]
    assert rows.dtype == torch.int64 and rows.tolist() == values
    ds32 = tio.CSVDataset(path, 1000, dtype=np.int32, like="numpy", usecols=["id"], missing=-1)
    assert np.concatenate(list(ds32))[:, 0].tolist() == list(range(3000))
    with pytest.raises(ParseError, match="out of range for int32"):
        list(tio.CSVDataset(path, 1000, dtype=np.int32))


def test_ctrl_c_and_callback_errors_stop_an_integer_parse(rng, monkeypatch):
    monkeypatch.setattr(tio, "_CHUNK_BYTES", 4096)
    data, _ = large_table(rng, 3000)
    calls = []

    def interrupt(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) == 1:
            _thread.interrupt_main()  # what Ctrl-C does

    with pytest.raises(KeyboardInterrupt):
        tio.read_csv(data, dtype=torch.int64, header=False, progress=interrupt, threads=2)
    assert len(calls) == 1

    class Stop(Exception):
        pass

    def stop(done: int, total: int) -> None:
        calls.append(done)
        raise Stop("from the callback")

    with pytest.raises(Stop, match="from the callback"):
        tio.read_csv(data, dtype=torch.int32, header=False, progress=stop, threads=2)
    assert len(calls) == 2


def test_float_tables_are_unchanged_by_the_integer_kernels(rng):
    """The float kernels still read what they read (the integer grammar is the integer
    kernels' only): 1.0 and 1e3 are floats, an empty field NaN."""
    got = tio.read_csv(b"a,b,c\n1.0,1e3,\n", dtype="float64")
    assert got[0, :2].tolist() == [1.0, 1000.0] and got[0, 2].isnan()
