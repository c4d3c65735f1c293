# SPDX-License-Identifier: MIT
"""tensorffi.io.read_csv(delimiter=None): fields separated by runs of white space.

References, all independent of read_csv: Python's ``float()`` on the fields that
``str.split()`` (no argument: runs of white space, the blanks ``str.isspace`` knows)
finds on each physical line; NumPy's ``loadtxt`` with its default delimiter (None);
pandas' ``read_csv(sep=r"\\s+", header=None)`` where the blanks are spaces and tabs
(the only ones pandas splits on); the exact rational rounding of test_io.py for
float32/float16/bfloat16. Inputs are drawn fresh (the ``rng`` fixture, Hypothesis),
with runs of spaces and tabs of every length, blanks at the start and end of lines,
lines of blanks, every line end, and the Unicode blanks NumPy splits on. Every test
runs on the one-call path for small inputs and on the parallel passes (with chunk
boundaries everywhere where it matters), at every SIMD level this CPU has (the level
that ran is checked: ``conftest.require_simd``), and through iter_csv's streaming
parser.
"""
from __future__ import annotations

import gzip
import io
import os
import re
import struct
import sys
import warnings

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tensorffi.io as tio
from tensorffi import ParseError

sys.path.insert(0, os.path.dirname(__file__))
from conftest import require_simd  # noqa: E402
from test_io import FORMATS, INT_VIEW, exact_bits, simd_levels  # noqa: E402  (read_csv's exact references)
from test_iter_csv import Trickle, TrickleInto, assert_same, collect, outcome  # noqa: E402

#: The white space NumPy's loadtxt splits on with delimiter=None (Python's str.isspace
#: less the line ends), beyond space and tab.
OTHER_BLANKS = ["\v", "\f", "\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0", "\u1680", "\u2000", "\u2005", "\u200a",
                "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]

#: Tests whose subject does not depend on the parse path run once.
ONE_PATH = {"test_large_input_takes_the_parallel_path", "test_iter_csv_equals_read_csv_at_every_block_boundary",
            "test_iter_csv_of_a_large_input", "test_csvdataset_worker_ranges", "test_ctrl_c_stops_the_parse",
            "test_blank_set_is_str_isspace", "test_invalid_arguments", "test_vector_and_scalar_counting_agree",
            "test_hypothesis_blank_runs", "test_hypothesis_every_blank", "test_chunk_boundaries_everywhere",
            "test_read_csv_of_an_unsized_stream", "test_ragged_rows_at_chunk_boundaries"}


def pytest_generate_tests(metafunc):
    if metafunc.function.__name__ not in ONE_PATH:
        metafunc.parametrize("parse_path", ["one-call", "passes"], indirect=True)


@pytest.fixture(autouse=True)
def parse_path(request, monkeypatch):
    """Small inputs in one native call (tf_parse_small_*), or the parallel passes."""
    path = getattr(request, "param", "one-call")
    if path == "passes":
        monkeypatch.setattr(tio, "_SMALL_BYTES", -1)
    return path


# --------------------------------------------------------------------------- #
# inputs and references                                                        #
# --------------------------------------------------------------------------- #


def blank_run(rng: np.random.Generator, lo: int, hi: int, blanks: str | list[str] = " \t") -> str:
    """lo..hi blanks drawn from `blanks` (mixed)."""
    n = int(rng.integers(lo, hi + 1))
    return "".join(rng.choice(list(blanks), size=n)) if n else ""


def mixed_values(rng: np.random.Generator, rows: int, cols: int, fmt: str) -> np.ndarray:
    """Values of mixed magnitudes (exponents from 1e-30 to 1e30 among them), signed zeros
    and subnormals; float32 values where fmt is %.9g."""
    x = rng.standard_normal((rows, cols)) * 10.0 ** rng.integers(-6, 7, size=(rows, cols))
    far = rng.random((rows, cols)) < 0.1
    x[far] *= 10.0 ** rng.integers(-24, 25, size=int(far.sum()))
    specials = [-0.0, 0.0, 5e-324, -1e-40, 1.4e-45, 3.4028235e38, 6.1e-5, -6.0e-8]
    idx = rng.integers(0, x.size, size=min(len(specials), x.size))
    x.flat[idx] = rng.choice(specials, size=len(idx))
    return x.astype(np.float32).astype(np.float64) if fmt == "%.9g" else x


def ws_table(
    rng: np.random.Generator, rows: int, cols: int, fmt: str = "%.9g", *, blanks: str | list[str] = " \t",
    max_run: int = 4, eol: str = "\n", blank_lines: bool = True, last_eol: bool = True,
) -> tuple[bytes, list[list[str]]]:
    """A table of `fmt` numbers separated by runs of 1..max_run blanks, with 0..max_run
    blanks at the start and end of lines, some lines of blanks only, and line end `eol`
    ("mixed": LF and CRLF). Returns the bytes and the fields' texts."""
    texts = [[fmt % v for v in row] for row in mixed_values(rng, rows, cols, fmt).tolist()]
    lines = []
    for row in texts:
        line = blank_run(rng, 0, max_run, blanks)
        for j, t in enumerate(row):
            line += t + (blank_run(rng, 1, max_run, blanks) if j + 1 < len(row) else "")
        lines.append(line + blank_run(rng, 0, max_run, blanks))
        if blank_lines and rng.random() < 0.08:
            lines.append(blank_run(rng, 0, 5, blanks))
    ends = rng.choice(["\n", "\r\n"], size=len(lines)) if eol == "mixed" else [eol] * len(lines)
    text = "".join(line + end for line, end in zip(lines, ends))
    if not last_eol:
        text = text.rstrip("\r\n")
    return text.encode(), texts


def split_reference(data: bytes, comment: str | None = None) -> list[list[str]]:
    """The fields of each record: physical lines (LF, CRLF, CR), less comments, split by
    ``str.split()`` (runs of what str.isspace knows); lines without a field skipped."""
    rows = []
    for line in re.split(r"\r\n|\n|\r", data.decode("utf-8")):
        if comment is not None:
            line = line.split(comment, 1)[0]
        fields = line.split()
        if fields:
            rows.append(fields)
    return rows


def f64_bits(values) -> list[int]:
    return [struct.unpack("<q", struct.pack("<d", float(v)))[0] for v in values]


def float_reference(texts: list[list[str]]) -> np.ndarray:
    return np.array([[float(t) for t in row] for row in texts], dtype=np.float64).reshape(len(texts), -1)


def numpy_reference(data: bytes, **kw) -> np.ndarray:
    """numpy.loadtxt with its default delimiter (None: runs of white space)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "input contained no data"
        return np.loadtxt(io.BytesIO(data), dtype=np.float64, ndmin=2, encoding="utf-8", **kw)


def pandas_reference(data: bytes, **kw) -> np.ndarray:
    pd = pytest.importorskip("pandas")
    if int(pd.__version__.split(".")[0]) < 3:  # pandas 3 rounds correctly by default (and deprecates the option)
        kw["float_precision"] = "round_trip"
    frame = pd.read_csv(io.BytesIO(data), sep=r"\s+", header=None, **kw)
    return frame.to_numpy(dtype=np.float64)


def same_bits(got, want: np.ndarray) -> bool:
    a = np.ascontiguousarray(got.numpy() if isinstance(got, torch.Tensor) else got, dtype=np.float64)
    return a.shape == want.shape and np.array_equal(a.view(np.int64), np.ascontiguousarray(want).view(np.int64))


def read(data, **kw):
    return tio.read_csv(data, delimiter=None, **kw)


@pytest.fixture
def simd(request, monkeypatch):
    """Run at TENSORFFI_SIMD=request.param; the parser's level must be that one."""
    monkeypatch.setenv("TENSORFFI_SIMD", request.param)
    return require_simd("parse", request.param)


SIMD = pytest.mark.parametrize("simd", simd_levels(), indirect=True)


# --------------------------------------------------------------------------- #
# values against the references                                                #
# --------------------------------------------------------------------------- #


@SIMD
@pytest.mark.parametrize("eol", ["\n", "\r\n", "mixed"])
def test_random_tables_match_float_numpy_and_pandas(rng, simd, eol):
    """float64 bit-identical to float() on str.split()'s fields, to numpy.loadtxt and to
    pandas' sep=r"\\s+" (round-trip precision); every narrow type rounded once from the
    text (exact rational reference)."""
    data, texts = ws_table(rng, 300, 6, "%.17g" if eol == "\r\n" else "%.9g", eol=eol)
    assert split_reference(data) == texts
    want = float_reference(texts)
    got = read(data, dtype=torch.float64, header=False, threads=2)
    assert same_bits(got, want)
    assert same_bits(got, numpy_reference(data))
    assert same_bits(got, pandas_reference(data))
    flat = [t for row in texts for t in row]
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        mb, eb = FORMATS[dtype]
        narrow = read(data, dtype=dtype, header=False)
        mask = (1 << (mb + eb + 1)) - 1
        assert [v & mask for v in narrow.flatten().view(INT_VIEW[dtype]).tolist()] == [exact_bits(t, mb, eb) for t in flat]


@pytest.mark.parametrize("fmt", ["%.9g", "%.6e", "%r", "%.3f"])
def test_formats_with_exponents(rng, fmt):
    """%.9g data (exponents where the magnitude asks for them), %e, repr and fixed point,
    with wide runs (space-aligned columns) and long ones beyond a vector load."""
    data, texts = ws_table(rng, 200, 5, fmt, max_run=40)
    if fmt == "%.9g":
        assert any("e" in t for row in texts for t in row)
    got = read(data, dtype="float64", header=False)
    assert same_bits(got, float_reference(texts))
    assert same_bits(got, numpy_reference(data))


def test_space_aligned_columns_as_savetxt_writes_them(rng, tmp_path):
    """The files of issue 22: np.savetxt's default delimiter (a space), and columns
    aligned with "%12.5g": a .txt read back as NumPy reads it."""
    x = mixed_values(rng, 50, 4, "%.9g")
    for fmt, delimiter in (("%.18e", " "), ("%12.5g", " "), ("%10.3f", "  ")):
        path = tmp_path / "t.txt"
        np.savetxt(path, x, fmt=fmt, delimiter=delimiter)
        got = read(path, dtype="float64")
        assert same_bits(got, np.loadtxt(path))
        assert same_bits(got, float_reference(split_reference(path.read_bytes())))


def test_ten_rows(rng, kind):
    data, texts = ws_table(rng, 10, 4)
    got = read(data, dtype="float64", like=kind)
    assert isinstance(got, np.ndarray if kind == "numpy" else torch.Tensor)
    assert same_bits(got, float_reference(texts)) and same_bits(got, numpy_reference(data))


@pytest.mark.parametrize("dtype,np_dtype", [(torch.float32, np.float32), (torch.float64, np.float64),
                                             (torch.float16, np.float16), (torch.bfloat16, None)])
def test_result_kinds(kind, dtype, np_dtype):
    data = b"  1.5\t-2  \n 3e2 4.25e-1\n"
    if kind == "numpy" and np_dtype is None:
        with pytest.raises(TypeError, match="bfloat16"):
            read(data, dtype=dtype, like="numpy")
        return
    got = read(data, dtype=dtype, like=np if kind == "numpy" else None)
    if kind == "numpy":
        assert isinstance(got, np.ndarray) and got.dtype == np_dtype and got.flags.c_contiguous
        assert np.array_equal(got, np.array([[1.5, -2.0], [300.0, 0.425]], dtype=np_dtype))
    else:
        assert isinstance(got, torch.Tensor) and got.dtype == dtype and got.is_contiguous()
        assert torch.equal(got, torch.tensor([[1.5, -2.0], [300.0, 0.425]], dtype=torch.float64).to(dtype))


@pytest.mark.parametrize("simd", simd_levels(), indirect=True)
def test_large_input_takes_the_parallel_path(rng, monkeypatch, simd):
    """An input above read_csv's one-call threshold (tio._SMALL_BYTES) takes the two
    parallel passes (pass 1 is seen to run), on one thread and on several, and matches
    float() and numpy.loadtxt."""
    data, texts = ws_table(rng, 6000, 8, "%.9g", max_run=6, eol="mixed")
    assert len(data) > tio._SMALL_BYTES
    counted = []
    real = tio._count

    def spy(*args, **kwargs):
        counted.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(tio, "_count", spy)
    want = float_reference(texts)
    for threads in (1, 2, 4):
        assert same_bits(read(data, dtype="float64", header=False, threads=threads), want)
    assert len(counted) == 3
    assert same_bits(want, numpy_reference(data))


@SIMD
def test_chunk_boundaries_everywhere(rng, monkeypatch, simd):
    """Chunks of a few bytes put internal boundaries inside runs of blanks, numbers,
    lines of blanks, CRLFs, Unicode blanks and comments; every chunk size and thread
    count gives the single-call result."""
    monkeypatch.setattr(tio, "_SMALL_BYTES", -1)
    data, texts = ws_table(rng, 30, 3, "%.6g", blanks=[" ", "\t", " ", "\xa0", "\v"], max_run=3, eol="mixed")
    data = b"# head\n" + data.replace(b"\n", b" # c\n", 3)
    want = float_reference(split_reference(data, "#"))
    assert want.shape == (30, 3)
    for chunk in list(range(1, 48)) + [97, 1000]:
        monkeypatch.setattr(tio, "_CHUNK_BYTES", chunk)
        for threads in (1, 3):
            got = read(data, dtype="float64", header=False, comment="#", threads=threads)
            assert same_bits(got, want), (chunk, threads)


def test_vector_and_scalar_counting_agree(rng, monkeypatch):
    """Pass 1 counts records 64 bytes at a time (AVX2, AVX-512) and line by line; under
    delimiter=None a line that ends in white space is looked at from its end. Lines of
    blanks of every kind (spaces, tabs, \\v, U+00A0, U+3000), trailing blanks and every
    line end must count alike, at every level and chunk size."""
    monkeypatch.setattr(tio, "_SMALL_BYTES", -1)
    blanks = [" ", " ", " ", "\t", "\v", "\f", "\xa0", "\u3000", "\u2028"]
    data, texts = ws_table(rng, 3000, 3, "%.5g", blanks=blanks, max_run=3, eol="mixed")
    lines = data.split(b"\n")
    data = b"\n".join(ln + (b" \xc2\xa0 " if i % 7 == 0 else b"") for i, ln in enumerate(lines))  # trailing blanks
    data = data.replace(b"\n", b"\n \t\x0b\n", 50)  # more lines of blanks
    want = float_reference(split_reference(data))
    assert want.shape == (3000, 3)
    assert same_bits(want, float_reference(texts))
    ran = set()
    for level in simd_levels():
        monkeypatch.setenv("TENSORFFI_SIMD", level)
        ran.add(require_simd("parse", level))
        for chunk in (None, 300, 4099):
            monkeypatch.setattr(tio, "_CHUNK_BYTES", chunk)
            assert same_bits(read(data, dtype="float64", header=False, threads=2), want), (level, chunk)
    assert ran == set(simd_levels())


# --------------------------------------------------------------------------- #
# properties                                                                   #
# --------------------------------------------------------------------------- #

_finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
_number = st.one_of(_finite.map(repr), _finite.map(lambda x: "%.9g" % x), _finite.map(lambda x: "%.3e" % x),
                    st.integers(-10**20, 10**20).map(str))
_run = st.text(" \t", min_size=1, max_size=6)
_edge = st.text(" \t", max_size=4)


@settings(max_examples=250, deadline=None)
@given(st.integers(1, 5).flatmap(lambda cols: st.lists(
    st.tuples(_edge, st.lists(st.tuples(_number, _run), min_size=cols, max_size=cols), _edge), min_size=1, max_size=12)),
       st.sampled_from(["\n", "\r\n", "\r"]), st.booleans(), st.sampled_from(["one-call", "passes", "chunks"]))
@example([(" ", [("1", " ")], "\t")], "\n", False, "one-call")
def test_hypothesis_blank_runs(rows, eol, last_eol, path):
    """Random runs of spaces and tabs (mixed) between the fields, at the start and at the
    end of lines: the table of float() on the fields, and the table the same numbers
    give with a comma delimiter."""
    lines = [lead + "".join(t + (sep if j + 1 < len(fields) else "") for j, (t, sep) in enumerate(fields)) + trail
             for lead, fields, trail in rows]
    text = eol.join(lines) + (eol if last_eol else "")
    want = float_reference([[t for t, _ in fields] for _, fields, _ in rows])
    saved = tio._SMALL_BYTES, tio._CHUNK_BYTES
    try:
        if path != "one-call":
            tio._SMALL_BYTES = -1
            tio._CHUNK_BYTES = 7 if path == "chunks" else None
        got = read(text.encode(), dtype="float64", header=False, threads=2)
        comma = tio.read_csv(("\n".join(",".join(t for t, _ in f) for _, f, _ in rows) + "\n").encode(),
                             dtype="float64", header=False)
    finally:
        tio._SMALL_BYTES, tio._CHUNK_BYTES = saved
    assert same_bits(got, want)
    assert same_bits(got, comma.numpy())


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_number, min_size=3, max_size=3), min_size=1, max_size=8),
       st.lists(st.text("".join([" ", "\t"] + OTHER_BLANKS), min_size=1, max_size=3), min_size=40, max_size=40),
       st.booleans())
def test_hypothesis_every_blank(rows, runs, passes):
    """Runs of any of the blanks NumPy splits on (Unicode ones too): the fields of
    str.split() as float() reads them, and numpy.loadtxt's table."""
    k = iter(runs * 4)
    lines = [next(k) + next(k).join(r) + next(k) for r in rows]  # leading, separating, trailing blanks
    data = "\n".join(lines).encode()
    want = float_reference(rows)
    saved = tio._SMALL_BYTES
    try:
        if passes:
            tio._SMALL_BYTES = -1
        got = read(data, dtype="float64", header=False)
    finally:
        tio._SMALL_BYTES = saved
    assert same_bits(got, want)
    assert same_bits(got, numpy_reference(data))


@pytest.mark.parametrize("blank", [" ", "\t"] + OTHER_BLANKS)
def test_blank_set_is_str_isspace(blank):
    """Each blank NumPy's loadtxt splits on (Python's str.isspace, less the line ends)
    separates fields, begins and ends lines, and makes a line of itself blank."""
    assert blank.isspace()
    data = f"1{blank}2\n{blank}3{blank}{blank}4{blank}\n{blank}\n5 {blank}\t6".encode()
    for small in (256 << 10, -1):
        tio._SMALL_BYTES = small
        try:
            got = read(data, dtype="float64")
        finally:
            tio._SMALL_BYTES = 256 << 10
        assert got.tolist() == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
        assert same_bits(got, numpy_reference(data))


@pytest.mark.parametrize("text,what,column", [("1\u200b2 3", "field 1 is not a number", 1),
                                              ("1\u00ad2 3", "field 1 is not a number", 1),
                                              ("1\x7f2 3", "field 1 is not a number", 1), ("1\x002 3", "NUL byte", 2)])
def test_characters_that_are_not_blanks_do_not_separate(text, what, column):
    """Zero-width space, soft hyphen, DEL and NUL are not white space (str.isspace):
    the field holding one is not a number (NUL is refused as such), and NumPy refuses
    them too."""
    assert not any(c.isspace() for c in text.replace(" ", ""))
    with pytest.raises(ParseError, match=what) as info:
        read(text.encode() + b"\n")
    assert info.value.line == 1 and info.value.column == column
    with pytest.raises(ValueError):
        numpy_reference(text.encode() + b"\n")


# --------------------------------------------------------------------------- #
# structure                                                                    #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("last_eol", [True, False])
@pytest.mark.parametrize("trailing", ["", "  ", "\t \t"])
def test_line_ends_and_the_last_line(eol, last_eol, trailing):
    lines = ["x   y", " 1 2" + trailing, "3\t4" + trailing, trailing]
    text = eol.join(lines) + (eol if last_eol else "")
    t, names = read(text.encode(), dtype="float64", return_names=True)
    assert names == ["x", "y"] and t.tolist() == [[1.0, 2.0], [3.0, 4.0]]


@pytest.mark.parametrize("data", [b"", b"   ", b"\n\n", b" \t \n\r\n \x0b\n\t", b"\xc2\xa0\n \xe3\x80\x80 \n", b"\xef\xbb\xbf \n"])
def test_only_blanks_is_an_empty_input(data):
    """A file of blanks and line ends holds no record: as an empty file, a (0, 0) table
    with NumPy's warning; header=True gives no names; usecols, its columns."""
    with pytest.warns(tio.EmptyDataWarning):
        assert tuple(read(data).shape) == (0, 0)
    with pytest.warns(tio.EmptyDataWarning):
        t, names = read(data, header=True, return_names=True)
    assert tuple(t.shape) == (0, 0) and names == []
    with pytest.warns(tio.EmptyDataWarning):
        assert tuple(read(data, usecols=[0, 1]).shape) == (0, 2)
    if not data.startswith(b"\xef\xbb\xbf"):
        with pytest.warns(UserWarning, match="input contained no data"):  # NumPy's loadtxt: the same
            assert np.loadtxt(io.BytesIO(data), encoding="utf-8").size == 0


def test_a_single_space_delimiter_keeps_its_meaning():
    """delimiter=" " splits at each space (two spaces make an empty field), as before;
    delimiter=None at runs of white space."""
    data = b"1  2\n3 4 5\n"
    assert tio.read_csv(data, delimiter=" ", header=False, dtype="float64").numpy().tolist()[1] == [3.0, 4.0, 5.0]
    assert tio.read_csv(data, delimiter=" ", header=False, dtype="float64")[0, 1].isnan().item()
    with pytest.raises(ParseError, match="record has 3 fields, expected 2"):
        read(data)


def test_header_modes_and_names():
    data = b'  time   "volt a"\t"b  c" \n 0.5  1e3 -2\n'
    t, names = read(data, return_names=True, dtype="float64")
    assert names == ["time", "volt a", "b  c"] and t.tolist() == [[0.5, 1000.0, -2.0]]
    t, names = read(data, header=True, return_names=True, usecols=["b  c", "time"])
    assert names == ["b  c", "time"] and t.tolist() == [[-2.0, 0.5]]
    t, names = read(b"1 2\n3 4\n", header="auto", return_names=True)
    assert names is None and t.shape == (2, 2)
    assert read(b"1 2\n3 4\n", header=True).tolist() == [[3.0, 4.0]]
    with pytest.raises(ParseError, match="field 1 is not a number"):
        read(b"a 2\n3 4\n", header=False)


def test_comments():
    data = b"# a header comment\n 1 2 # trailing\n   # indented\n3 4#tight\n\t#\n5\t6\n"
    want = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    assert read(data, comment="#", dtype="float64").tolist() == want
    assert same_bits(read(data, comment="#", dtype="float64"), numpy_reference(data, comments="#"))
    assert read(data.replace(b"#", b";"), comment=";").tolist() == want
    with pytest.raises(ParseError):  # without comment=, "#" is text
        read(data, header=False)


def test_skiprows_counts_physical_lines():
    data = b"junk that  is not\n\n  junk \r\n1 2\n\n3 4\n"
    assert read(data, skiprows=3).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert same_bits(read(data, skiprows=3, dtype="float64"), numpy_reference(data, skiprows=3))
    assert read(data, skiprows=5).tolist() == [[3.0, 4.0]]


@pytest.mark.parametrize("chunk", [None, 3])
def test_max_rows_and_usecols(monkeypatch, chunk):
    if chunk is not None:
        monkeypatch.setattr(tio, "_CHUNK_BYTES", chunk)
    data = b'a  "b b"  c\n 1 x 2\n 3 "y z" 4\n 5\t"w" 6 \n 7 8 9\n bad row here\n'
    assert read(data, usecols=[0, 2], max_rows=4).tolist() == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 9.0]]
    assert read(data, usecols=["c", "a"], max_rows=2).tolist() == [[2.0, 1.0], [4.0, 3.0]]
    assert read(data, usecols=-1, max_rows=3).tolist() == [[2.0], [4.0], [6.0]]
    with pytest.raises(ParseError, match="field 1 is not a number"):
        read(data, usecols=[0, 2])
    assert tuple(read(data, max_rows=0, usecols=[0]).shape) == (0, 1)


def test_na_values_and_missing():
    data = b"a b c\n1 NA 3\n  N/A  5 -999\n7 8 NULL\n"
    t = read(data, na_values=["-999"], dtype="float64", missing=-1.0)
    assert t.tolist() == [[1.0, -1.0, 3.0], [-1.0, 5.0, -1.0], [7.0, 8.0, -1.0]]
    assert read(data, na_values=(), keep_default_na=True, dtype="float64").isnan().sum().item() == 3
    with pytest.raises(ParseError, match="field 2 is not a number"):
        read(data)  # no na_values: NA is an error, not a hole


def test_thousands_and_decimal():
    data = b" 1,234.5  -2,000\n\t3  4,567,890.25 \n"
    assert read(data, thousands=",", dtype="float64").tolist() == [[1234.5, -2000.0], [3.0, 4567890.25]]
    data = b" 1.234,5  -0,25\n\t3  7 \n"
    assert read(data, thousands=".", decimal=",", dtype="float64").tolist() == [[1234.5, -0.25], [3.0, 7.0]]
    assert read(b"1,5 2,25\n", decimal=",", dtype="float64").tolist() == [[1.5, 2.25]]


def test_quoting_follows_pandas():
    """As pandas' sep=r"\\s+" (and NumPy's quotechar='"'): a field that begins with a
    quote runs to the closing quote and may hold blanks (and line ends, in skipped
    columns); blanks around the number inside are stripped."""
    data = b'"1 " 2\n" 3" "4"\n"a\n b" 5 6\n'
    assert read(data, max_rows=2, dtype="float64").tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert same_bits(read(data, max_rows=2, dtype="float64"), numpy_reference(data, quotechar='"', max_rows=2))
    assert same_bits(read(data, max_rows=2, dtype="float64"), pandas_reference(data, nrows=2))
    assert read(data, skiprows=2, usecols=[1, 2]).tolist() == [[5.0, 6.0]]
    # text right after a closing quote is an error, as with a comma (pandas would glue it on)
    with pytest.raises(ParseError, match="unexpected text after a closing quote") as info:
        read(b'1 2\n"3"4 5\n')
    assert (info.value.line, info.value.column) == (2, 4)
    with pytest.raises(ParseError, match="quote inside an unquoted field"):
        read(b'1 2\n3 4"5"\n')
    with pytest.raises(ParseError, match="never closed") as info:
        read(b'1 2\n3 "4 5\n')
    assert (info.value.line, info.value.column) == (2, 3)


# --------------------------------------------------------------------------- #
# errors                                                                       #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("text,line,found", [("1 2\n3 4 5\n", 2, 3), ("1 2\n\n  3  \n", 3, 1), ("1 2 3\n4 5\n6 7 8\n", 2, 2),
                                             ("1 2\r\n3 4\r\n 5 6 7 \r\n", 3, 3)])
def test_ragged_rows_are_errors(text, line, found):
    """The same typed error as with a comma: a ParseError (a ValueError) naming the line
    and both field counts; its text is the record."""
    with pytest.raises(ParseError) as info:
        read(text.encode())
    e = info.value
    assert isinstance(e, ValueError)
    want = len(text.splitlines()[0].split())
    assert e.line == line and f"record has {found} field{'s' if found != 1 else ''}, expected {want}" in str(e)
    assert f"line {line}, column" in str(e)
    assert e.text == text.splitlines()[line - 1].strip()
    comma = re.sub(r"(?<=\S)[ \t]+(?=\S)", ",", text)
    with pytest.raises(ParseError) as cinfo:
        tio.read_csv(comma.encode())
    assert cinfo.value.line == e.line and str(cinfo.value).split(": ")[2] == str(e).split(": ")[2]


def test_ragged_rows_at_chunk_boundaries(rng, monkeypatch):
    """A ragged record deep in a large input is reported at its line from the parallel
    passes, whatever the chunks and threads, and by the stream."""
    data, texts = ws_table(rng, 3000, 4, "%.6g", blank_lines=False)
    lines = data.split(b"\n")
    lines[2345] += b" 9"
    bad = b"\n".join(lines)
    monkeypatch.setattr(tio, "_SMALL_BYTES", -1)
    seen = set()
    for chunk in (None, 100, 4096):
        monkeypatch.setattr(tio, "_CHUNK_BYTES", chunk)
        for threads in (1, 3):
            with pytest.raises(ParseError) as info:
                read(bad, threads=threads)
            seen.add((info.value.line, info.value.column, info.value.offset, str(info.value)))
    assert len(seen) == 1
    line, column, offset, message = seen.pop()
    leading = len(lines[2345]) - len(lines[2345].lstrip())
    assert (line, column, offset) == (2346, leading + 1, len(b"\n".join(lines[:2345])) + 1 + leading)
    assert "record has 5 fields, expected 4" in message
    with pytest.raises(ParseError) as info:
        collect(tio.iter_csv(io.BytesIO(bad), 100, delimiter=None))
    assert (info.value.line, info.value.offset, str(info.value).replace("<BytesIO>", "<bytes>")) == (line, offset, message)


def test_errors_name_line_column_and_offset():
    data = "x y\n1 2\n3\u00a0 oops\n".encode()
    with pytest.raises(ParseError, match="field 2 is not a number") as info:
        read(data)
    e = info.value
    assert (e.line, e.column, e.offset, e.text) == (3, 4, data.index(b"oops"), "oops")
    with pytest.raises(ParseError, match="field 2 is not a number") as info:
        read(b"1 2\n3 4x\n")  # text right after a number
    assert (info.value.line, info.value.column, info.value.text) == (2, 3, "4x")
    with pytest.raises(tio.EncodingError):
        read(b"1 2\n3 \xff\n")
    with pytest.raises(ParseError, match="NUL"):
        read(b"1 2\n3 4\x00\n")


def test_invalid_arguments():
    for comment in (" ", "\t", "\v", "\f", "\x1c", "\xa0", "\u3000"):
        with pytest.raises(tio.ControlCharacterError, match="delimiter=None splits fields at white space"):
            read(b"1 2\n", comment=comment)
        with pytest.raises(tio.ControlCharacterError):
            tio.iter_csv(b"1 2\n", delimiter=None, comment=comment)
    with pytest.raises(tio.ControlCharacterError, match="thousands and delimiter are incompatible") as info:
        read(b"1 000 2\n", thousands=" ")
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    for blank in ("\t", "\u2003"):
        with pytest.raises(tio.ControlCharacterError, match="thousands and delimiter are incompatible"):
            read(b"1 2\n", thousands=blank)
    with pytest.raises(tio.ControlCharacterError):
        read(b"1 2\n", decimal=" ")
    with pytest.raises(tio.ControlCharacterError):
        tio.CSVDataset("unused.csv", delimiter=None, thousands=" ")
    # a comment byte that is a blank is refused by C too (its own check)
    from tensorffi._lib import lib

    info = np.zeros(4, dtype=np.int64)
    with pytest.raises(ValueError, match="invalid comment byte 11"):
        tio._record(np.frombuffer(b"1 2\n", dtype=np.uint8), 0, 0, int(lib.TF_DELIM_WHITESPACE), 11,
                    spans=np.zeros((4, 3), dtype=np.int64), info=info, errinfo=np.zeros(5, dtype=np.int64))


# --------------------------------------------------------------------------- #
# streams, workers, cancellation                                               #
# --------------------------------------------------------------------------- #


def test_iter_csv_equals_read_csv_at_every_block_boundary():
    """Blocks cut at every byte (and of 1, 2, 3, 5, 64 bytes): the chunks equal
    read_csv's table, and an error is read_csv's error (line, column, offset, text)."""
    base = '# c\n  a\tb  \n\n 1.5  -2 \r\n \u00a0\r\n3e1\t\t4 # x\n"5 " 6\n \t'
    for text in (base, base + "\n7 8 9\n", base + "\n7 x\n"):
        data = text.encode()
        readers = [lambda d, k=k: Trickle(d, [k, 1 << 30]) for k in range(1, len(data))]
        readers += [lambda d, k=k: TrickleInto(d, [k]) for k in (1, 2, 3, 5, 64)]
        for reader in readers:
            want = outcome(lambda: tio.read_csv(data, delimiter=None, comment="#", dtype="float64"))
            for rows in (1, 2, 1000):
                got = outcome(lambda: collect(tio.iter_csv(reader(data), rows, delimiter=None, comment="#",
                                                           dtype="float64"), rows))
                assert got[0] == want[0]
                if want[0] == "ok":
                    assert_same(got[1], want[1])
                else:  # line, column, offset, text, message (which names the source)
                    assert got[1:5] == want[1:5] and got[5].replace("<trickle>", "<bytes>") == want[5]


def test_iter_csv_of_a_large_input(rng):
    data, texts = ws_table(rng, 5000, 6, "%.9g", max_run=8, eol="mixed")
    want = tio.read_csv(data, delimiter=None, dtype="float32")
    assert same_bits(want.double(), float_reference(texts).astype(np.float32).astype(np.float64))
    chunks = tio.iter_csv(io.BytesIO(data), 777, delimiter=None, dtype="float32")
    assert_same(collect(chunks, 777), want)
    assert_same(collect(tio.iter_csv(data, 4096, delimiter=None, like="numpy", dtype="float32")), want.numpy())


def test_read_csv_of_an_unsized_stream(rng, tmp_path):
    """An input without a size (a GzipFile) is streamed: the same table."""
    data, texts = ws_table(rng, 500, 3)
    path = tmp_path / "t.txt.gz"
    with gzip.open(path, "wb") as g:
        g.write(data)
    with gzip.open(path, "rb") as g:
        got = read(g, dtype="float64")
    assert same_bits(got, float_reference(texts))


def test_csvdataset_worker_ranges(tmp_path, monkeypatch):
    """Workers' byte ranges, cut at record boundaries under delimiter=None, read every
    row once and in order."""
    rng = np.random.default_rng(41)
    data, texts = ws_table(rng, 400, 3, "%.7g", eol="mixed")
    path = tmp_path / "w.txt"
    path.write_bytes(b"  t   x   y  \n" + data)
    want = float_reference(texts)

    class Info:
        def __init__(self, id: int, num_workers: int) -> None:
            self.id, self.num_workers = id, num_workers

    ds = tio.CSVDataset(path, 16, delimiter=None, dtype="float64", usecols=["t", "y"])
    for workers in (1, 2, 3, 7):
        parts = []
        for w in range(workers):
            monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda w=w: Info(w, workers))
            parts += [c.numpy() for c in ds]
        assert same_bits(np.concatenate(parts), want[:, [0, 2]]), workers


def test_ctrl_c_stops_the_parse(rng, monkeypatch):
    """Ctrl-C during a whitespace-delimited parse on the parallel passes stops it at the
    report that saw it."""
    import _thread
    import gc

    monkeypatch.setattr(tio, "_CHUNK_BYTES", 4096)
    data, _ = ws_table(rng, 3000, 8)
    gc.collect()  # a KeyboardInterrupt that CPython raises inside a finalizer is printed and lost
    calls = []

    def progress(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) == 1:
            _thread.interrupt_main()  # what Ctrl-C does

    with pytest.raises(KeyboardInterrupt):
        read(data, progress=progress, threads=2)
    assert len(calls) == 1


# --------------------------------------------------------------------------- #
# integer tables under white space (the two features met in the merge)         #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("rows", [7, 40_000])  # the one-call path and the threaded passes
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_tables_under_white_space(rows, dtype):
    rng = np.random.default_rng()
    info = np.iinfo(dtype)
    table = rng.integers(info.min, info.max, size=(rows, 5), dtype=dtype, endpoint=True)
    table[0, :2] = info.min, info.max
    blanks = [" ", "  ", "\t", " \t "]
    lines = []
    for row in table:
        sep = [blanks[k] for k in rng.integers(0, len(blanks), len(row) + 1)]
        lines.append(sep[0] + "".join(f"{int(v)}{s}" for v, s in zip(row, sep[1:])))
    text = ("\n".join(lines) + "\n").encode()
    got = tio.read_csv(text, delimiter=None, header=None, dtype=dtype, like=np)
    np.testing.assert_array_equal(got, np.loadtxt(text.decode().splitlines(), dtype=np.int64).astype(dtype))
    chunks = list(tio.iter_csv(text, 997, delimiter=None, header=None, dtype=dtype, like=np))
    np.testing.assert_array_equal(np.concatenate(chunks), table)
    bad = text.replace(str(int(table[-1, 2])).encode(), b"1.5", 1) if rows == 7 else None
    if bad is not None and bad != text:
        with pytest.raises(ParseError):
            tio.read_csv(bad, delimiter=None, header=None, dtype=dtype, like=np)
