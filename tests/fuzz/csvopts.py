# SPDX-License-Identifier: MIT
"""CSV fuzzing of integer tables and the reader options (issue 37), by construction:
each case is generated from the values it must parse to, so the oracle is the
generator itself (Python ints, and floats whose text is ``repr``/``%.9g`` of the value).

* integer tables (int32, int64) with values at and beyond the type's edges, signs,
  leading zeros, blanks around fields, empty fields and NA words with a ``missing``
  fill: a value out of range, or an empty field with no fill, must be a ParseError on
  its line, never a wrapped or truncated number;
* float tables written with ``thousands`` (``,`` ``_`` ``'`` between digit groups),
  ``decimal=","``, ``na_values`` words and ``keep_default_na``, with delimiters that do
  not clash: the values must come back exactly;
* both through ``read_csv`` (all at once) and ``iter_csv`` (random chunk sizes), which
  must agree bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tensorffi.io as tio
from tensorffi.io import ParseError

from .csvfuzz import Mismatch

EDGES = {"int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1)}


@dataclass
class OptCase:
    data: bytes
    options: dict[str, Any]
    want: np.ndarray | None  # None: a ParseError on line `line`
    line: int = 0
    note: str = ""
    chunk_rows: int = 7
    extra: dict[str, Any] = field(default_factory=dict)


def _int_field(rng: np.random.Generator, v: int) -> bytes:
    text = str(abs(v))
    if rng.random() < 0.15:
        text = "0" * int(rng.integers(1, 4)) + text
    sign = "-" if v < 0 else ("+" if rng.random() < 0.2 else "")
    out = sign + text
    if rng.random() < 0.15:
        out = " " * int(rng.integers(1, 3)) + out + " " * int(rng.integers(0, 2))
    return out.encode()


def int_table(rng: np.random.Generator) -> OptCase:
    dtype = "int32" if rng.random() < 0.5 else "int64"
    lo, hi = EDGES[dtype]
    rows, cols = int(rng.integers(1, 30)), int(rng.integers(1, 6))
    fill = int(rng.integers(lo, hi, endpoint=True)) if rng.random() < 0.5 else None
    use_na = bool(rng.random() < 0.5)  # na_values=(): pandas' NA words ("NA") are missing too
    want = np.empty((rows, cols), dtype=dtype)
    lines: list[bytes] = []
    bad_line = 0
    for r in range(rows):
        fields = []
        for c in range(cols):
            if rng.random() < 0.08 and (cols > 1 or use_na):  # (an empty field alone is a blank line)
                fields.append(b"NA" if use_na and (cols == 1 or rng.random() < 0.5) else b"")
                if fill is None and not bad_line:
                    bad_line = r + 1
                want[r, c] = fill if fill is not None else 0
                continue
            pick = rng.random()
            if pick < 0.2:
                v = int(rng.choice([lo, hi, lo + 1, hi - 1, 0, -1, 1]))
            elif pick < 0.25:
                v = int(rng.choice([hi + 1, lo - 1, hi * 3, lo * 3, 1 << 64, -(1 << 64) - 5]))
                bad_line = bad_line or r + 1
            else:
                v = int(rng.integers(lo, hi, endpoint=True)) >> int(rng.integers(0, 60 if dtype == "int64" else 28))
            fields.append(_int_field(rng, v))
            want[r, c] = v if lo <= v <= hi else 0
        lines.append(b",".join(fields))
    end = b"\r\n" if rng.random() < 0.3 else b"\n"
    data = end.join(lines) + (end if rng.random() < 0.8 else b"")
    opts: dict[str, Any] = {"dtype": dtype, "header": False, "like": "numpy"}
    if fill is not None:
        opts["missing"] = fill
    if use_na:
        opts["na_values"] = ()
    return OptCase(data, opts, None if bad_line else want, bad_line, f"int table {dtype} {rows}x{cols}",
                   int(rng.integers(1, 12)))


def _grouped(digits: str, sep: str, rng: np.random.Generator) -> str:
    if not sep or len(digits) <= 3 or rng.random() < 0.3:
        return digits
    head = len(digits) % 3 or 3
    groups = [digits[:head]] + [digits[i:i + 3] for i in range(head, len(digits), 3)]
    return sep.join(groups)


def option_table(rng: np.random.Generator) -> OptCase:
    decimal = "," if rng.random() < 0.4 else "."
    thousands = [None, ",", "_", "'"][int(rng.integers(0, 4))]
    if thousands == decimal:
        thousands = "_"
    delimiter = ";" if "," in (decimal, thousands) else ("," if rng.random() < 0.7 else "\t")
    words = ["missing", "n/a", "?", "-", "NULL", "x"]
    use_na = bool(rng.random() < 0.7)  # na_values given (pandas' NA words apply only then)
    na_words = list(rng.choice(words, size=int(rng.integers(0, 3)), replace=False)) if use_na else []
    keep_default = bool(rng.random() < 0.7)
    defaults = use_na and keep_default  # "NA" is missing
    rows, cols = int(rng.integers(1, 25)), int(rng.integers(1, 5))
    want = np.empty((rows, cols))
    lines = []
    for r in range(rows):
        fields = []
        for c in range(cols):
            if rng.random() < 0.08 and (na_words or defaults):
                word = str(rng.choice(na_words)) if na_words and (rng.random() < 0.6 or not defaults) else "NA"
                fields.append(word)
                want[r, c] = np.nan
                continue
            whole = int(rng.integers(0, 10 ** int(rng.integers(1, 10))))
            frac = int(rng.integers(0, 1000))
            sign = "-" if rng.random() < 0.3 else ""
            text_digits = _grouped(str(whole), thousands or "", rng)
            text = sign + text_digits + (decimal + f"{frac:03d}" if rng.random() < 0.7 else "")
            plain = sign + str(whole) + ("." + f"{frac:03d}" if decimal + f"{frac:03d}" in text else "")
            want[r, c] = float(plain)
            fields.append(text)
        lines.append(delimiter.join(fields))
    data = ("\n".join(lines) + "\n").encode()
    opts: dict[str, Any] = {"dtype": "float64", "header": False, "like": "numpy", "delimiter": delimiter,
                            "decimal": decimal, "thousands": thousands, "keep_default_na": keep_default}
    if use_na:
        opts["na_values"] = na_words
    return OptCase(data, opts, want, 0, f"options {opts}", int(rng.integers(1, 12)))


def check(case: OptCase) -> str:
    """``ok`` or ``error`` (a ParseError where one was expected); raises Mismatch."""
    outcomes = []
    for reader in ("read_csv", "iter_csv"):
        try:
            if reader == "read_csv":
                got = tio.read_csv(case.data, **case.options)
            else:
                parts = list(tio.iter_csv(case.data, case.chunk_rows, **case.options))
                got = np.concatenate(parts) if parts else None
        except ParseError as exc:
            if case.want is not None:
                raise Mismatch(f"{reader}: ParseError {exc} on a valid table ({case.note})\n{case.data[:400]!r}") from None
            if exc.line != case.line:
                raise Mismatch(f"{reader}: ParseError on line {exc.line}, the first bad line is {case.line} "
                               f"({case.note}): {exc}\n{case.data[:400]!r}") from None
            outcomes.append("error")
            continue
        if case.want is None:
            raise Mismatch(f"{reader}: a table where line {case.line} must be a ParseError ({case.note})\n"
                           f"{case.data[:400]!r}")
        if got is None or got.shape != case.want.shape or not np.array_equal(got, case.want, equal_nan=True):
            raise Mismatch(f"{reader}: wrong table ({case.note})\ngot {got!r}\nwant {case.want!r}\n{case.data[:400]!r}")
        outcomes.append("ok")
    return outcomes[0]


def run(seed: int, cases: int) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    counts = {"ok": 0, "error": 0}
    for _ in range(cases):
        case = int_table(rng) if rng.random() < 0.5 else option_table(rng)
        counts[check(case)] += 1
    return counts
