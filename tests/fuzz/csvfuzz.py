# SPDX-License-Identifier: MIT
"""CSV fuzzing: random valid tables, byte-level mutations, and a reference parser.

* :func:`valid_table` writes a random numeric table in many number formats (``%.9g``,
  ``%.17g``, exponents, signs, ``.5``/``5.``, inf/nan spellings, quoted numbers, blanks
  around fields, empty fields), with an optional header (quoted names, ``""`` escapes,
  quoted newlines), comment lines and trailing comments, blank lines, LF/CRLF/CR line
  ends, a byte order mark, and the last line with or without its line end. The values
  it expects come from Python's ``float()`` of each field's text.
* :func:`mutate` flips, inserts, deletes and truncates bytes (favouring the bytes that
  matter: quotes, delimiters, line ends, digits, signs, NUL, invalid UTF-8).
* :func:`reference` parses the documented grammar (tensorffi.io.read_csv) in plain
  Python: a table, or the byte offset of the first bad record's error (its syntax,
  then its field count, then its values: the peers' order).
* :func:`check` runs ``read_csv`` on one input and compares: a valid input must give
  the reference's table exactly (float64, NaN where NaN); an invalid one a
  ``ParseError`` (never a crash, never a table) at the reference's line.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

NUMBER = re.compile(rb"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|(?i:inf|infinity|nan))")
BLANKS = b" \t"


class Invalid(Exception):
    """The first error: its byte offset and what it is."""

    def __init__(self, offset: int, why: str) -> None:
        super().__init__(f"{why} at byte {offset}")
        self.offset = offset
        self.why = why


@dataclass
class Case:
    data: bytes
    header: bool | None  # the read_csv header= argument (None: "auto" not used)
    comment: str | None
    note: str = ""


# --------------------------------------------------------------------------- #
# Generation                                                                    #
# --------------------------------------------------------------------------- #

_SPECIAL = ["inf", "-inf", "+inf", "Infinity", "-INFINITY", "nan", "NaN", "-nan", "+NAN"]


def number_text(rng: np.random.Generator) -> bytes:
    kind = int(rng.integers(0, 12))
    v = float(rng.standard_normal() * 10.0 ** int(rng.integers(-30, 30)))
    if kind == 0:
        return b"%.9g" % v
    if kind == 1:
        return b"%.17g" % v
    if kind == 2:
        return b"%e" % v
    if kind == 3:
        return b"%.3E" % v
    if kind == 4:
        return b"%d" % int(rng.integers(-10**12, 10**12))
    if kind == 5:
        return rng.choice([b"+", b"-", b""]) + b"%d." % int(rng.integers(0, 1000))
    if kind == 6:
        return rng.choice([b"+", b"-", b""]) + b".%d" % int(rng.integers(0, 10**6))
    if kind == 7:
        return _SPECIAL[int(rng.integers(0, len(_SPECIAL)))].encode()
    if kind == 8:  # a long mantissa: many digits, beyond float64's precision
        digits = "".join(str(d) for d in rng.integers(0, 10, size=int(rng.integers(18, 60))))
        return f"{digits[0]}.{digits[1:]}e{int(rng.integers(-320, 300))}".encode()
    if kind == 9:  # subnormals, the edges of the range
        return b"%.17g" % float(rng.choice([5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 4.9e-324])
                              * float(rng.choice([1, -1])))
    if kind == 10:
        return b"%.1f" % v
    return repr(v).encode()


def valid_table(rng: np.random.Generator) -> tuple[Case, np.ndarray]:
    """A valid CSV and its expected float64 table (NaN for empty fields and nan)."""
    rows, cols = int(rng.integers(0, 30)), int(rng.integers(1, 7))
    eol = [b"\n", b"\r\n", b"\r"][int(rng.integers(0, 3))]
    comment = "#" if rng.random() < 0.4 else None
    lines: list[bytes] = []
    header = rng.random() < 0.4
    if header:
        names = []
        for c in range(cols):
            name = b"col%d" % c
            r = rng.random()
            if r < 0.2:
                name = b'"' + name + b'""x"""'  # escaped quotes: col"x"
            elif r < 0.35:
                name = b'"' + name + eol + b'y"'  # a quoted line end
            elif r < 0.5:
                name = b' "' + name + b'" '
            names.append(name)
        lines.append(b",".join(names))
    table = np.empty((rows, cols))
    blank_rows = []  # one column, an unquoted empty field: a blank line, skipped
    for r in range(rows):
        fields = []
        for c in range(cols):
            if rng.random() < 0.05:
                text = b""
                table[r, c] = math.nan
            else:
                text = number_text(rng)
                table[r, c] = float(text)
            if text and rng.random() < 0.1:
                text = b'"' + rng.choice([b"", b" "]) + text + rng.choice([b"", b" "]) + b'"'
            if rng.random() < 0.1:
                text = rng.choice([b" ", b"\t", b"  "]) + text + rng.choice([b"", b" ", b"\t"])
            fields.append(text)
        if cols == 1 and fields[0].strip(BLANKS) == b"":
            blank_rows.append(r)
        line = b",".join(fields)
        if comment and rng.random() < 0.1:
            line += b" # trailing comment"
        lines.append(line)
        if rng.random() < 0.05:
            lines.append(rng.choice([b"", b"  ", b"\t"]))  # a blank line
        if comment and rng.random() < 0.05:
            lines.append(b"# a comment line, 1,2,3")
    if rows == 0 and not header:
        lines = []
    data = eol.join(lines)
    if lines and rng.random() < 0.8:
        data += eol
    if rng.random() < 0.1:
        data = b"\xef\xbb\xbf" + data
    table = np.delete(table, blank_rows, axis=0)
    return Case(data, header, comment, f"rows={rows} cols={cols} eol={eol!r} header={header}"), table


_INTERESTING = [b'"', b",", b"\n", b"\r", b"\r\n", b" ", b"\t", b"#", b"\x00", b"\xff", b"\xc3", b"e", b"E",
                b"-", b"+", b".", b"0", b"9", b"inf", b"nan", b'""', b"\xef\xbb\xbf"]


def mutate(data: bytes, rng: np.random.Generator) -> bytes:
    b = bytearray(data)
    for _ in range(int(rng.integers(1, 4))):
        op = int(rng.integers(0, 5))
        at = int(rng.integers(0, len(b) + 1))
        if op == 0 and b:  # flip bits of one byte
            at = min(at, len(b) - 1)
            b[at] ^= 1 << int(rng.integers(0, 8))
        elif op == 1:  # insert an interesting token
            b[at:at] = _INTERESTING[int(rng.integers(0, len(_INTERESTING)))]
        elif op == 2 and b:  # delete a few bytes
            del b[at : at + int(rng.integers(1, 4))]
        elif op == 3:  # truncate
            del b[at:]
        else:  # replace a byte by an interesting one
            if b:
                at = min(at, len(b) - 1)
                tok = _INTERESTING[int(rng.integers(0, len(_INTERESTING)))]
                b[at : at + 1] = tok
    return bytes(b)


# --------------------------------------------------------------------------- #
# The reference parser                                                          #
# --------------------------------------------------------------------------- #


def _value(off: int, text: bytes, quoted: bool) -> float:
    tok = text.strip(BLANKS) if quoted else text
    if tok == b"":
        return math.nan
    if NUMBER.fullmatch(tok):
        return float(tok)
    # as NumPy: the white space Python's str.strip knows (U+00A0, U+202F..., and line
    # ends inside quotes) around a number is stripped too
    try:
        wide = tok.decode("utf-8").strip()
    except UnicodeDecodeError:
        wide = None
    if wide == "":
        return math.nan
    if wide is not None and NUMBER.fullmatch(wide.encode()):
        return float(wide)
    raise Invalid(off, f"not a number: {tok!r}")


def _records(data: bytes, start: int, comment: int | None):
    """Yield (offset, fields) per record; a field is (offset, bytes, quoted). Each
    record is tokenized whole before it is yielded, and its first syntax error raises
    Invalid, field by field: an unterminated quote, a quote inside an unquoted field,
    text after a closing quote, a NUL byte or invalid UTF-8 in the field (in an
    unquoted field a quote is named before a bad byte, as read_csv's tokenizer checks
    them), then in the record's trailing comment. Blank and comment-only lines yield
    nothing (a comment line's bytes are checked too)."""
    n = len(data)
    p = start
    while p < n:
        rec_start = p
        fields: list[tuple[int, bytes, bool]] = []
        while True:  # one field
            q = p
            while q < n and data[q] in BLANKS:
                q += 1
            if q < n and data[q] == 0x22:  # quoted
                open_at = q
                q += 1
                content = bytearray()
                while True:
                    if q >= n:
                        raise Invalid(open_at, "unterminated quote")
                    if data[q] == 0x22:
                        if q + 1 < n and data[q + 1] == 0x22:
                            content.append(0x22)
                            q += 2
                            continue
                        q += 1
                        break
                    content.append(data[q])
                    q += 1
                _raise_byte_error(data, open_at + 1, q - 1)
                while q < n and data[q] in BLANKS:
                    q += 1
                if q < n and data[q] not in (0x2C, 0x0A, 0x0D) and data[q] != comment:
                    raise Invalid(q, "text after a closing quote")
                fields.append((open_at, bytes(content), True))
            else:
                e = q
                while e < n and data[e] not in (0x2C, 0x0A, 0x0D) and data[e] != comment:
                    if data[e] == 0x22:
                        raise Invalid(e, "quote inside an unquoted field")
                    e += 1
                _raise_byte_error(data, q, e)
                fields.append((q, data[q:e].rstrip(BLANKS), False))
                q = e
            if q < n and data[q] == 0x2C:
                p = q + 1
                continue
            # end of record: line end, comment or end of input
            if q < n and data[q] == comment:
                c = q
                while q < n and data[q] not in (0x0A, 0x0D):
                    q += 1
                _raise_byte_error(data, c, q)
            if q < n and data[q] == 0x0D and q + 1 < n and data[q + 1] == 0x0A:
                q += 2
            elif q < n:
                q += 1
            p = q
            break
        blank = len(fields) == 1 and not fields[0][2] and fields[0][1] == b""
        if not blank:
            yield rec_start, fields


def _byte_error(data: bytes) -> Invalid | None:
    """The first NUL byte or invalid UTF-8 sequence."""
    nul = data.find(b"\x00")
    try:
        data.decode("utf-8")
        bad = None
    except UnicodeDecodeError as exc:
        bad = exc.start
    if nul < 0 and bad is None:
        return None
    if bad is None or (0 <= nul < bad):
        return Invalid(nul, "NUL")
    return Invalid(bad, "invalid UTF-8")


def _raise_byte_error(data: bytes, start: int, end: int) -> None:
    bad = _byte_error(data[start:end])
    if bad is not None:
        raise Invalid(start + bad.offset, bad.why)


def reference(case: Case) -> np.ndarray:
    """The float64 table the grammar gives, or raises Invalid: the first bad record's
    error, as read_csv reports it. A record's errors come in the peers' order (pandas
    and NumPy tokenize a record, count its fields, then convert them): its first
    syntax error (quotes, NUL bytes, invalid UTF-8), else a wrong number of fields,
    else its first field that is not a number."""
    table = _reference_grammar(case)
    # every byte of the input is in a field, a comment, a delimiter, blanks or a line
    # end, all checked above: a byte error left over is the reference's own bug
    assert _byte_error(case.data[3:] if case.data.startswith(b"\xef\xbb\xbf") else case.data) is None
    return table


def _reference_grammar(case: Case) -> np.ndarray:
    data = case.data
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    comment = ord(case.comment) if case.comment else None
    rows: list[list[float]] = []
    ncols = None
    first = True
    for rec_start, fields in _records(data, start, comment):
        if first and case.header:
            first = False
            ncols = len(fields)
            continue
        first = False
        if ncols is None:
            ncols = len(fields)
        if len(fields) != ncols:
            raise Invalid(rec_start, f"record has {len(fields)} fields, expected {ncols}")
        rows.append([_value(off, text, quoted) for off, text, quoted in fields])
    if not rows:
        return np.empty((0, ncols or 0))
    return np.array(rows, dtype=np.float64)


def line_of(data: bytes, offset: int) -> int:
    before = data[:offset]
    plain = before.replace(b"\r\n", b"\n")
    return 1 + plain.count(b"\n") + plain.count(b"\r")


# --------------------------------------------------------------------------- #
# The check                                                                     #
# --------------------------------------------------------------------------- #


class Mismatch(AssertionError):
    pass


def check(case: Case, *, threads: int = 2) -> str:
    """Run read_csv on ``case`` and compare with the reference; returns "ok" or
    "error" (the expected ParseError), raises Mismatch otherwise."""
    import tensorffi
    from tensorffi import io as tio

    try:
        want = reference(case)
        invalid = None
    except Invalid as exc:
        want, invalid = None, exc
    try:
        got = tio.read_csv(case.data, dtype="float64", header=case.header, comment=case.comment,
                           threads=threads, like="numpy")
    except tensorffi.ParseError as exc:
        if invalid is None:
            raise Mismatch(f"ParseError on valid input: {exc}\n{case.note}\ndata={case.data!r}") from None
        want_line = line_of(case.data, invalid.offset)
        if exc.line != want_line:
            raise Mismatch(f"ParseError on line {exc.line}, reference: line {want_line} ({invalid.why}): {exc}\n"
                           f"data={case.data!r}") from None
        return "error"
    if invalid is not None:
        raise Mismatch(f"no ParseError for invalid input ({invalid}); got shape {got.shape}\ndata={case.data!r}")
    assert want is not None
    if got.shape != want.shape and not (got.size == 0 and want.size == 0):
        raise Mismatch(f"shape {got.shape}, reference {want.shape}\n{case.note}\ndata={case.data!r}")
    if got.size and not np.array_equal(got, want, equal_nan=True):
        bad = np.argwhere(~((got == want) | (np.isnan(got) & np.isnan(want))))[0]
        raise Mismatch(f"value at {tuple(bad)}: {got[tuple(bad)]!r}, reference {want[tuple(bad)]!r}\n"
                       f"{case.note}\ndata={case.data!r}")
    return "ok"


def run(seed: int, cases: int, *, mutate_fraction: float = 0.6) -> dict[str, int]:
    """``cases`` cases from ``seed``: valid tables, and mutations of them."""
    rng = np.random.default_rng(seed)
    counts = {"ok": 0, "error": 0}
    for i in range(cases):
        case, _ = valid_table(rng)
        if rng.random() < mutate_fraction:
            case = Case(mutate(case.data, rng), case.header, case.comment, case.note + " (mutated)")
        try:
            counts[check(case, threads=int(rng.integers(1, 3)))] += 1
        except Mismatch as exc:
            raise Mismatch(f"seed={seed} case={i}: {exc}") from None
    return counts
