# SPDX-License-Identifier: MIT
"""read_csv's reader options (na_values, keep_default_na, thousands, decimal), Unicode
blanks, empty inputs, repeated names and typed option errors, against pandas and
NumPy on fresh random tables, through the one-call path, the parallel passes (chunks
of a few bytes) and the stream (iter_csv)."""
from __future__ import annotations

import io
import re
import os
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorffi.io as tio
from tensorffi import ParseError

from conftest import simd_levels

pd = pytest.importorskip("pandas")


@pytest.fixture(params=["one-call", "passes", "stream"])
def read(request, monkeypatch):
    """read_csv as float64 NumPy, by one of its three roads."""

    def run(data: bytes, **kw):
        kw.setdefault("dtype", "float64")
        kw.setdefault("like", "numpy")
        if request.param == "stream":
            chunks = tio.iter_csv(io.BytesIO(data), chunk_rows=7, **kw)
            parts = list(chunks)
            cols = parts[0].shape[1] if parts else chunks._layout.cols
            return np.concatenate(parts) if parts else np.empty((0, cols))
        if request.param == "passes":
            monkeypatch.setattr(tio, "_CHUNK_BYTES", 64)
        return tio.read_csv(data, **kw)

    return run


# --------------------------------------------------------------------------- #
# hostile inputs first                                                         #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    "kw, exc",
    [
        ({"na_values": {"a": ["x"]}}, TypeError), ({"na_values": [b"NA"]}, TypeError),
        ({"na_values": ["N\0A"]}, ValueError), ({"na_values": ["x" * 300]}, ValueError),
        ({"na_values": ["a\nb"]}, ValueError), ({"decimal": ","}, ValueError), ({"decimal": ",,"}, ValueError),
        ({"decimal": "5"}, ValueError), ({"decimal": "e"}, ValueError), ({"decimal": 1}, TypeError),
        ({"thousands": "."}, TypeError), ({"thousands": "0"}, ValueError), ({"thousands": "\0"}, ValueError),
        ({"delimiter": "\0"}, ValueError), ({"delimiter": "\n"}, TypeError), ({"comment": ","}, TypeError),
        ({"keep_default_na": "no", "na_values": ["x"]}, ValueError), ({"keep_default_na": None}, TypeError),
        ({"max_rows": 3.0}, TypeError), ({"max_rows": 3.0}, ValueError), ({"skiprows": -1}, ValueError),
        ({"usecols": [2**64]}, OverflowError),
    ],
)
def test_bad_options_are_typed(kw, exc):
    with pytest.raises(exc, match=r"\w"):
        tio.read_csv(b"1,2\n", **kw)
    if "usecols" not in kw:
        with pytest.raises(exc, match=r"\w"):
            tio.iter_csv(io.BytesIO(b"1,2\n"), **kw)


def test_hostile_fields_under_options_are_errors_not_crashes(read, rng):
    # huge fields (past the options' 1 KiB number buffer), NUL bytes, bad UTF-8, lone
    # separators, quotes: each is a ParseError naming its line
    bad = [b"1" * 5000 + b",5", b"1,,5", b"1.5", b"\0", b"\xff", b'"1,5', b"1e,5", b"--1", b"1 ,5"]
    for token in bad:
        data = b"a;b\n1;2\n3;" + token + b"\n"
        with pytest.raises(ParseError) as info:
            read(data, delimiter=";", decimal=",", thousands=" ", na_values=())
        assert info.value.line == 3, (token, info.value)
    # random bytes never crash: a table or a ParseError
    for _ in range(200):
        data = bytes(rng.choice(list(b"0123456789,.;- \n\"NA#e\xe2\x80\xaf"), size=int(rng.integers(0, 80))))
        try:
            read(data, delimiter=";", decimal=",", thousands=".", na_values=["-"], header=False)
        except ParseError:
            pass


def test_encoding_error_is_a_unicode_decode_error(read):
    with pytest.raises(UnicodeDecodeError) as info:
        read(b"1,2\n3,\xff\n")
    assert isinstance(info.value, ParseError) and (info.value.line, info.value.column) == (2, 3)
    assert info.value.encoding == "utf-8" and info.value.object[info.value.start] == 0xFF


# --------------------------------------------------------------------------- #
# against pandas and NumPy                                                     #
# --------------------------------------------------------------------------- #


def _table(rng, rows=60, cols=4):
    v = rng.standard_normal((rows, cols)) * 10.0 ** rng.integers(-3, 7, size=(rows, cols))
    v = np.where(rng.random((rows, cols)) < 0.1, np.nan, v)
    return v


def test_na_values_match_pandas(read, rng):
    words = ["NA", "N/A", "NULL", "null", "-1.#QNAN", "1.#IND", "#N/A", "<NA>", "None", "", "nan", "-999"]
    text = "a,b,c\n" + "".join(
        ",".join(str(rng.choice(words)) if rng.random() < 0.3 else repr(float(rng.standard_normal()))
                 for _ in range(3)) + "\n" for _ in range(80))
    for na_values, keep in [((), True), (["-999"], True), (["NA", "-999"], False)]:
        frame = pd.read_csv(io.StringIO(text), na_values=list(na_values) or None, keep_default_na=keep,
                            float_precision="round_trip")
        if not all(pd.api.types.is_float_dtype(t) for t in frame.dtypes):
            # pandas reads the unmatched words as text; read_csv refuses them
            with pytest.raises(ParseError, match="not a number"):
                read(text.encode(), na_values=na_values, keep_default_na=keep)
            continue
        np.testing.assert_array_equal(read(text.encode(), na_values=na_values, keep_default_na=keep),
                                      frame.to_numpy(dtype=np.float64))


@pytest.mark.parametrize("decimal, thousands, delimiter", [(",", ".", ";"), (",", None, ";"), (".", ",", ";"),
                                                           (".", " ", ",")])
def test_decimal_and_thousands_match_python_float(read, rng, decimal, thousands, delimiter):
    v = _table(rng)
    def fmt(x):
        if np.isnan(x):
            return ""
        s = f"{x:,.6f}" if thousands else f"{x:.6f}"
        return s.replace(",", "\0").replace(".", decimal).replace("\0", thousands or "")
    text = "".join(delimiter.join(fmt(x) for x in row) + "\n" for row in v)
    want = np.array([[float(f"{x:.6f}") if not np.isnan(x) else np.nan for x in row] for row in v])
    got = read(text.encode(), delimiter=delimiter, decimal=decimal, thousands=thousands, header=False)
    np.testing.assert_array_equal(got, want)
    ref = pd.read_csv(io.StringIO(text), sep=delimiter, decimal=decimal, thousands=thousands, header=None,
                      float_precision="round_trip").to_numpy(dtype=np.float64)
    np.testing.assert_array_equal(got, ref)


def test_unicode_blanks_are_stripped_as_numpy_strips_them(read, rng):
    blanks = ["\u00a0", "\u202f", "\u2003", "\u3000", "\u205f", " ", "\t"]
    v = rng.standard_normal((30, 3))
    text = "".join(",".join(f"{rng.choice(blanks)}{x!r}{rng.choice(blanks)}" for x in row) + "\n" for row in v.tolist())
    np.testing.assert_array_equal(read(text.encode(), header=False), np.loadtxt(io.StringIO(text), delimiter=","))


def test_empty_inputs_warn_and_keep_usecols_as_numpy(read):
    for usecols, shape in [(None, (0, 0)), ([0, 1], (0, 2)), ([0, 2, 4], (0, 3))]:
        with pytest.warns(UserWarning, match="input contained no data"):
            got = read(b"", usecols=usecols)
        assert got.shape == shape
        if usecols is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                assert np.loadtxt(io.StringIO(""), delimiter=",", usecols=usecols).shape == shape


def test_repeated_names_follow_pandas():
    for header in ["a,a", "a,a,a", "a,a,a.1", "b,a,b,a,b.1"]:
        data = (header + "\n" + ",".join("1" * len(header.split(","))) + "\n").encode()
        _, names = tio.read_csv(data, return_names=True)
        assert names == list(pd.read_csv(io.BytesIO(data)).columns), header
        assert tio.iter_csv(io.BytesIO(data)).names == names


def test_ragged_record_under_usecols_names_the_field_count(read):
    with pytest.raises(ParseError, match="record has 4 fields, expected 3") as info:
        read(b"1,2,3\n4,5,x,7\n", usecols=[0, 2])
    assert info.value.line == 2


def test_dataset_takes_the_options(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "t.csv"
    path.write_bytes(b"a;b\n" + b"".join(f"{i},5;NA\n".encode() for i in range(50)))
    ds = tio.CSVDataset(path, chunk_rows=8, delimiter=";", decimal=",", na_values=(), dtype="float64")
    got = torch.cat(list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)))
    want = tio.read_csv(path, delimiter=";", decimal=",", na_values=(), dtype="float64")
    assert sorted(got[:, 0].tolist()) == sorted(want[:, 0].tolist()) == [i + 0.5 for i in range(50)]
    assert got[:, 1].isnan().all()


# --------------------------------------------------------------------------- #
# the vector reader under decimal= and thousands= (fields with 64 bytes after  #
# them are read by it; the last ones by the general reader: both must agree)   #
# --------------------------------------------------------------------------- #


def _grouped(rng, digits: str, th: str) -> str:
    """digits with th between random pairs of them (as often as not, every three)."""
    if rng.random() < 0.5:
        head = len(digits) % 3 or 3
        return th.join([digits[:head]] + [digits[i:i + 3] for i in range(head, len(digits), 3)])
    return "".join(d + (th if i + 1 < len(digits) and rng.random() < 0.3 else "") for i, d in enumerate(digits))


def _number(rng, dec: str, th: str, integer: bool, most: int = 11):
    """(field text, the same number as Python's float()/int() reads it); at most
    `most` integer digits."""
    sign = str(rng.choice(["", "-", "+"]))
    ni = int(rng.integers(1, most + 1))
    digits = "".join(str(d) for d in rng.integers(0, 10, ni))
    if integer:
        return sign + _grouped(rng, digits, th), int(sign + digits)
    frac = "".join(str(d) for d in rng.integers(0, 10, int(rng.integers(0, 8))))
    exp = f"e{int(rng.integers(-30, 30))}" if rng.random() < 0.2 else ""
    text = sign + _grouped(rng, digits, th) + (dec + frac if frac or rng.random() < 0.5 else "") + exp
    return text, float(sign + digits + "." + frac + exp)


@pytest.fixture(params=simd_levels())
def simd(request, monkeypatch):
    """Run the test at one parser SIMD level (skipped where the parser runs another)."""
    from conftest import require_simd

    monkeypatch.setenv("TENSORFFI_SIMD", request.param)
    return require_simd("parse", request.param)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32"])
@pytest.mark.parametrize("dec, th, delim", [(",", ".", ";"), (".", ",", ";"), (".", " ", ","), (",", "'", "\t"),
                                            (".", "_", None)])
def test_vector_reader_takes_separators_and_marks_exactly(read, rng, simd, dtype, dec, th, delim):
    integer = dtype.startswith("int")
    if delim is None and th == " ":
        pytest.skip("a blank separator under white space is refused")
    most = {"int32": 9, "int64": 18}.get(dtype, 11)  # in range (overflow: tests/test_io_int.py)
    cells = [[_number(rng, dec, th, integer, most) for _ in range(5)] for _ in range(400)]
    sep = delim or "  "
    text = "".join(sep.join(c[0] for c in row) + "\n" for row in cells).encode()
    kw = dict(delimiter=delim, decimal=dec, thousands=th, header=False, dtype=dtype)
    if integer:
        want = np.array([[c[1] for c in row] for row in cells], dtype=object)
        np.testing.assert_array_equal(read(text, **kw, like="numpy"), want.astype(dtype))
    else:
        with np.errstate(over="ignore"):  # float32: inf beyond its range, as read_csv reads it
            want = np.array([[c[1] for c in row] for row in cells]).astype(dtype)
        np.testing.assert_array_equal(read(text, **kw), want)


def _with_marks(token: str, dec: str, th: str, integer: bool):
    """The value of token under decimal=dec, thousands=th as Python reads it once the
    separators are taken out (int() or float()), or None if read_csv must refuse it:
    a separator stands between two digits before the decimal mark and the exponent; a
    '.' that is not the mark, or a mark in an integer, is text."""
    out, mantissa = [], True
    for i, c in enumerate(token):
        if c == th:
            if not (mantissa and out and out[-1].isdigit() and i + 1 < len(token) and token[i + 1].isdigit()):
                return None
            continue
        if c == dec:
            if integer:
                return None
            c, mantissa = ".", False
        elif c == ".":
            return None
        elif c in "eE":
            mantissa = False
        out.append(c)
    try:
        return (int if integer else float)("".join(out))
    except ValueError:
        return None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text("0123456789,.-+e", min_size=1, max_size=30), min_size=3, max_size=3),
       st.sampled_from([(".", ","), (",", ".")]), st.sampled_from(["float64", "int64"]),
       st.sampled_from(simd_levels()))
def test_hypothesis_tokens_with_marks_and_separators(tokens, marks, dtype, level):
    """Any token over digits, signs, ',', '.' and 'e', where the vector reader runs (64
    bytes after it) and at every SIMD level: Python's value with the separators taken
    out where the rule accepts it (int64: in range), else a ParseError at the token."""
    dec, th = marks
    integer = dtype == "int64"
    os.environ["TENSORFFI_SIMD"] = level
    try:
        pad = "1;2;3\n" * 8
        data = (pad + ";".join(tokens) + "\n" + pad).encode()
        values = [_with_marks(t, dec, th, integer) for t in tokens]
        ok = [v is not None and (not integer or -2**63 <= v < 2**63) for v in values]
        kw = dict(delimiter=";", decimal=dec, thousands=th, header=False, dtype=dtype, like="numpy")
        if all(ok):
            got = tio.read_csv(data, **kw)[8]
            want = np.array(values, dtype=dtype)
            assert got.tobytes() == want.tobytes(), (tokens, got, want)
            return
        bad = ok.index(False)
        with pytest.raises(ParseError) as info:
            tio.read_csv(data, **kw)
        assert info.value.line == 9 and info.value.offset == len(pad) + sum(len(t) + 1 for t in tokens[:bad])
    finally:
        del os.environ["TENSORFFI_SIMD"]


@pytest.mark.parametrize("where", ["first", "last"])
@pytest.mark.parametrize("field", ["1,,234", ",123", "123,", "1,234,", "-,1", "1.2,3", "12,3.4.5", "1.2.3",
                                   "1,2e,3", "1e1,0", "1,234x", "1_234"])
def test_vector_reader_refuses_a_misplaced_separator(simd, field, where):
    """thousands=',' (delimiter ';'): a separator stands between two digits before the
    decimal mark; the field is refused wherever it stands (the vector reader reads the
    first rows, the general reader the last)."""
    rows = ["1,234.5;2"] * 50
    rows[0 if where == "first" else -1] = f"{field};2"
    with pytest.raises(ParseError, match="not a number") as info:
        tio.read_csv(("\n".join(rows) + "\n").encode(), delimiter=";", thousands=",", header=False)
    assert info.value.line == (1 if where == "first" else 50)


def test_vector_reader_reads_a_dot_as_text_under_decimal_comma(simd):
    rows = ["1,5;2"] * 50
    rows[3] = "1.5;2"
    with pytest.raises(ParseError, match="not a number") as info:
        tio.read_csv(("\n".join(rows) + "\n").encode(), delimiter=";", decimal=",", header=False)
    assert info.value.line == 4


@pytest.mark.parametrize("word", ["NA", "NULL", "n/a", "#N/A"])
def test_a_pandas_na_word_names_na_values(tmp_path, rng, word):
    """issue 40: "NA" was 'field 2 is not a number: "NA"' with no road to pandas' NA words."""
    values = rng.standard_normal((4, 3))
    rows = [",".join(repr(float(v)) for v in row) for row in values]
    rows[2] = rows[2].split(",")[0] + f",{word}," + rows[2].split(",")[2]
    path = tmp_path / "na.csv"
    path.write_text("\n".join(rows) + "\n")
    for read in (tio.read_csv, lambda p, **kw: np.concatenate(list(tio.iter_csv(p, **kw)))):
        with pytest.raises(ParseError, match=rf"not a number: \"{re.escape(word)}\".*pass na_values=\(\)"):
            read(path)
        got = np.asarray(read(path, na_values=(), dtype=np.float64))
        want = values.copy()
        want[2, 1] = np.nan
        np.testing.assert_array_equal(got, want)
