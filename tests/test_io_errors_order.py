# SPDX-License-Identifier: MIT
"""Which error read_csv names for a record with several: the peers' order. pandas and
NumPy tokenize a record, count its fields, then convert them, so a record's first
syntax error (a quote error, a NUL byte, invalid UTF-8, in a field or its trailing
comment) comes first, then a wrong number of fields, then its first value that is not
of the dtype. Held against NumPy's loadtxt (which names the count or the first bad
value of a row) on fresh random tables, by every road (one call, the parallel passes,
the stream) and at every SIMD level this CPU runs."""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import tensorffi.io as tio
from tensorffi import ParseError

from conftest import simd_levels
from fuzz import csvfuzz


@pytest.fixture(params=[(road, simd) for road in ("one-call", "passes", "stream") for simd in simd_levels()],
                ids=lambda p: "-".join(p))
def read(request, monkeypatch):
    """read_csv as NumPy by one of its roads at one SIMD level; returns the ParseError."""
    road, simd = request.param
    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    if road == "passes":
        monkeypatch.setattr(tio, "_CHUNK_BYTES", 64)

    def run(data: bytes, **kw) -> ParseError:
        kw.setdefault("dtype", "float64")
        kw.setdefault("like", "numpy")
        kw.setdefault("header", False)
        if road == "stream":  # a row at a time, and several
            errs = []
            for rows in (1, 7):
                with pytest.raises(ParseError) as info:
                    list(tio.iter_csv(io.BytesIO(data), chunk_rows=rows, **kw))
                errs.append(info.value)
            assert (errs[0].offset, str(errs[0])) == (errs[1].offset, str(errs[1]))
            return errs[0]
        with pytest.raises(ParseError) as info:
            tio.read_csv(data, **kw)
        return info.value

    return run


def numbers(rng, n: int, integer: bool) -> list[str]:
    if integer:
        return ["%d" % v for v in rng.integers(-10**9, 10**9, n)]
    return ["%.9g" % v for v in rng.standard_normal(n) * 10.0 ** rng.integers(-20, 20, n)]


def line_at(data: bytes, offset: int) -> int:
    return csvfuzz.line_of(data, offset)


def numpy_error(data: bytes, integer: bool, ws: bool = False) -> str:
    with warnings.catch_warnings(), pytest.raises(ValueError) as info:
        warnings.simplefilter("ignore")
        np.loadtxt(io.BytesIO(data), delimiter=None if ws else ",", quotechar=None if ws else '"',
                   dtype=np.int64 if integer else np.float64, comments="#")
    return str(info.value)


BAD_FLOATS = ["+.", "x", "1e", "1.2.3", "--1", "0x10"]
BAD_INTS = ["1.5", "x", "99999999999999999999", "1e3", ""]


def bad_table(rng, integer: bool, ws: bool, quoted_eol: bool):
    """A random table whose record r has the wrong number of fields and a bad value
    (before a quoted line end, where that applies): (data, r's offset, fields, cols)."""
    cols = int(rng.integers(2, 7))
    rows = int(rng.integers(2, 12))
    lines = [(" " if ws else ",").join(numbers(rng, cols, integer)) for _ in range(rows)]
    r = int(rng.integers(1, rows))
    nf = int(rng.choice([k for k in range(1, cols + 4) if k != cols]))
    fields = numbers(rng, nf, integer)
    bad = BAD_INTS if integer else BAD_FLOATS
    # (an empty field alone would be a blank line, which is skipped)
    fields[int(rng.integers(0, nf))] = str(rng.choice([b for b in bad if b or not (ws or nf == 1)]))
    if quoted_eol and nf > 1:  # a quoted line end in a field before the last
        q = int(rng.integers(0, nf - 1))
        fields[q] = '"\n' + numbers(rng, 1, integer)[0] + '"' if not integer else '" ' + fields[q].strip() + ' "'
        if not integer:
            fields[q] = fields[q].replace("\n", "\r\n" if rng.random() < 0.5 else "\n")
    lines[r] = (" " if ws else ",").join(fields)
    data = ("\n".join(lines) + "\n").encode()
    return data, len(("\n".join(lines[:r]) + "\n").encode()), nf, cols


@pytest.mark.parametrize("integer", [False, True], ids=["float64", "int64"])
@pytest.mark.parametrize("mode", ["comma", "quoted-eol", "whitespace", "na_values"])
def test_a_record_with_the_wrong_field_count_says_so_before_its_bad_value(read, rng, integer, mode):
    ws = mode == "whitespace"
    for _ in range(6):
        data, at, nf, cols = bad_table(rng, integer, ws, mode == "quoted-eol")
        kw = {"dtype": "int64" if integer else "float64"}
        if ws:
            kw["delimiter"] = None
        if mode == "na_values":
            kw["na_values"] = ["NA"]  # the options' general reader
        err = read(data, **kw)
        assert "number of columns changed from %d to %d" % (cols, nf) in numpy_error(data, integer, ws)
        assert (err.offset, err.line, err.column) == (at, line_at(data, at), 1), (data, str(err))
        assert "record has %d field%s, expected %d" % (nf, "" if nf == 1 else "s", cols) in str(err)


def test_the_fuzzed_case_from_ci(read):
    """The CSV fuzz under ASan (seed 1000653, case 34): a short last record with a
    quoted carriage return before a field that is not a number."""
    data = (b'+828.,"+.207503", 2.3833206836825687 ,4.96682771514215940118506e199\n'
            b'-INFINITY,-1.639E+26,2.405E-17,0.6462256921422957442514765512852450e-271\n'
            b'-1.534915e+19,"\r -0.0",+.')
    err = read(data)
    assert (err.line, err.column, err.offset) == (3, 1, data.index(b"-1.534915"))
    assert "record has 3 fields, expected 4" in str(err)
    assert csvfuzz.check(csvfuzz.Case(data, False, None)) == "error"


SYNTAX = {  # a field with a syntax error, and where in it the error is named
    "NUL": (b"1\x002", 1),
    "invalid UTF-8": (b"1\xff", 1),
    "quote inside": (b'1"2', 1),
    "after quote": (b'"1" x', 4),
    "quoted NUL": (b'"1\n\x00"', 3),
}


@pytest.mark.parametrize("kind", [*SYNTAX, "comment", "unterminated"])
def test_a_syntax_error_anywhere_in_the_record_comes_first(read, rng, kind):
    """Before the record's field count and its bad value, wherever they stand."""
    for _ in range(6):
        cols = int(rng.integers(2, 6))
        head = "\n".join(",".join(numbers(rng, cols, False)) for _ in range(int(rng.integers(1, 5)))) + "\n"
        nf = int(rng.integers(2, cols + 3))
        fields = [f.encode() for f in numbers(rng, nf, False)]
        b = int(rng.integers(0, nf))
        fields[b] = b"+."
        s = int(rng.choice([k for k in range(nf) if k != b]))
        tail = b"\n" + ",".join(numbers(rng, cols, False)).encode() + b"\n"
        if kind == "unterminated":  # the last field: the quote runs to the end
            fields[-1] = b'"' + fields[-1]
            rec = b",".join(fields) + tail
            where = len(b",".join(fields[:-1])) + (1 if nf > 1 else 0)
        elif kind == "comment":
            rec = b",".join(fields) + b" # \xff\x00" + tail
            where = len(b",".join(fields)) + 3
        else:
            field, k = SYNTAX[kind]
            fields[s] = field
            rec = b",".join(fields) + tail
            where = len(b",".join(fields[:s])) + (1 if s else 0) + k
        data = head.encode() + rec
        at = len(head) + where
        err = read(data, comment="#")
        assert (err.offset, err.line) == (at, line_at(data, at)), (kind, data, str(err))
        assert "record has" not in str(err) and "not a number" not in str(err)


def test_of_two_syntax_errors_the_first_field_is_named(read):
    err = read(b'1,2,3\n+.,4\x00,"5"x\n')
    assert (err.offset, "NUL" in str(err)) == (10, True)
    err = read(b'1,2,3\n+.,"5"x,4\x00\n')
    assert (err.offset, "closing quote" in str(err)) == (12, True)


@pytest.mark.parametrize("integer", [False, True], ids=["float64", "int64"])
def test_with_the_right_count_the_first_bad_value_is_named_as_numpy_names_it(read, rng, integer):
    for _ in range(6):
        cols = int(rng.integers(2, 7))
        lines = [numbers(rng, cols, integer) for _ in range(int(rng.integers(2, 10)))]
        r = int(rng.integers(0, len(lines)))
        picks = sorted(rng.choice(cols, size=min(cols, 2), replace=False))
        for c in picks:
            lines[r][c] = str(rng.choice((BAD_INTS[:-1] if integer else BAD_FLOATS)))
        quoted = rng.random() < 0.5 and picks[0] > 0
        if quoted:  # a quoted line end before the first bad value
            lines[r][0] = '"\n' + lines[r][0] + '"' if not integer else lines[r][0]
        data = ("\n".join(",".join(row) for row in lines) + "\n").encode()
        err = read(data, dtype="int64" if integer else "float64")
        assert "column %d" % (picks[0] + 1) in numpy_error(data, integer)
        assert str(err).split(": ")[-2].startswith("field %d " % (picks[0] + 1)), (data, str(err))
        assert err.text.strip('"') == lines[r][picks[0]]
