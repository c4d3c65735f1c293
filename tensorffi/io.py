# SPDX-License-Identifier: MIT
"""Numeric CSV to tensors: correctly rounded, parallel, precise about errors.

:func:`read_csv` turns a table of numbers (sensor logs, features, simulation
output) into a contiguous 2-D tensor, parsing on all cores in C with the GIL
released. Every value is correctly rounded to the output dtype (float64 is
bit-identical to Python's ``float()``; float32, float16 and bfloat16 are rounded
once, directly from the decimal text); int32 and int64 tables are exact over their
whole range. Malformed input, and an integer out of its type's range, is a
:class:`tensorffi.ParseError` that names the line, column and byte offset; nothing
is dropped, wrapped or truncated silently.

Memory: paths and plain files are memory-mapped, bytes-like inputs are read in
place; beyond the output, a call allocates bookkeeping proportional to the number
of chunks (about 100 bytes per chunk of 0.25-8 MiB), never a Python object per
value. Inputs without a size to map (a pipe, a FIFO, ``/dev/stdin``, ``/dev/fd/N``,
a device, a ``/proc`` file whose stat size is 0, a GzipFile) are streamed through
:func:`iter_csv`'s parser, never taken for empty. A memory-mapped file that another process truncates while it is
parsed, or a source tensor whose storage is freed meanwhile, is a
:class:`tensorffi.errors.NativeIOError` (an ``OSError``), not a crash: C reads the
input under a SIGBUS/SIGSEGV guard (see csrc/parse.c), and a tensor source's
storage is held for the call and checked after every progress report.

How it works: inputs up to 256 KiB (without ``usecols`` or ``progress``) are parsed
in one native call on the calling thread: the header decision, then one pass that
writes the rows into a buffer sized from an upper bound (every field but the last
ends with its own delimiter or line end) and trimmed in place. Larger inputs take
two parallel passes: pass 1 cuts the input into chunks at line starts and counts
the records of each chunk on all threads (a chunk that turns out to begin inside a
quoted field is recounted from the true record start); the output is allocated
with the exact row count; pass 2 parses the chunks in parallel into their rows.
Errors are collected per chunk and the first one in the file is raised. Where the
CPU has AVX2 (or AVX-512 with VBMI), a field of the common shape is read with one
32-byte load and no branch on its digit counts; ``TENSORFFI_SIMD`` caps the level,
and ``tensorffi.core.lib.tf_parse_simd()`` reports the one in use.

Streams: :func:`iter_csv` reads the same tables in chunks of rows, with memory
bounded by the chunk, from files, pipes and compressed streams read block by block
(a C parser behind a :class:`tensorffi.Handle`, fed blocks and writing whole rows;
csrc/parse_stream.h); :class:`CSVDataset` shares a file out between DataLoader
workers by byte ranges cut at record boundaries.

>>> import tensorffi.io
>>> tensorffi.io.read_csv(b"x,y\\n1.5,2\\n3,-4e-1\\n", dtype="float64").tolist()
[[1.5, 2.0], [3.0, -0.4]]
"""
from __future__ import annotations

import io as _stdio
import mmap
import operator
import os
import stat as _stat
import re
import sys
import threading
import warnings
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ._bridge import lower as _lower
from ._callbacks import CallbackScope
from ._lib import lib, native
from ._threads import resolve_threads
from ._torch import T
from .errors import (
    ArgumentOverflowError,
    TensorFFIError,
    NativeError,
    NativeIOError,
    ParseError,
    SourceIsADirectoryError,
    SourceNotFoundError,
    SourcePermissionError,
)

__all__ = ["read_csv", "ParseError", "EncodingError", "ControlCharacterError", "OptionTypeError", "EmptyDataWarning",
           "NA_VALUES"]

# Bound native functions (csrc/parse.c; declarations in csrc/tensorffi.h, section "parse").
_record = native("tf_parse_record", "data: [n]; spans: out [max_fields, 3]; info: out [4]; errinfo: out [5]")
_count = native("tf_parse_count", "data: [n]; chunks: out [nchunks, 4]; total_rows: out [1]")
_FILL_CONTRACT = "data: [n]; chunks: [nchunks, 4]; colmap: [ncols_in]; out: out [rows, cols]; errinfo: out [5]"
_KERNEL_NAMES = ("f32", "f64", "f16", "bf16", "i32", "i64")
_fill = {name: native(f"tf_parse_fill_{name}", _FILL_CONTRACT) for name in _KERNEL_NAMES}
_SMALL_CONTRACT = "data: [n]; out: out [cap]; meta: out [nmeta]"
_small = {name: native(f"tf_parse_small_{name}", _SMALL_CONTRACT) for name in _KERNEL_NAMES}
# The same with reader options (na_values, thousands, decimal: _ReaderOptions).
_fill_x = {name: native(f"tf_parse_fill_x_{name}", _FILL_CONTRACT + "; opts: [nopts]") for name in _fill}
_small_x = {name: native(f"tf_parse_small_x_{name}", _SMALL_CONTRACT + "; opts: [nopts]") for name in _small}

#: Inputs up to this size (and without usecols or a progress callback) are parsed in
#: one call on the calling thread: the header decision, the rows and the values in a
#: single pass into a buffer sized from an upper bound, then trimmed. Below it, the
#: fixed costs of the parallel passes (three native calls, threads) exceed the work.
_SMALL_BYTES = 256 << 10
_HEADER = {False: 0, True: 1, "auto": 2}

#: Chunk size of the parallel passes: None picks one from the input size and thread
#: count. Tests set it to a few bytes to put chunk boundaries everywhere.
_CHUNK_BYTES: int | None = None
_MIN_CHUNK = 256 << 10
_MAX_CHUNK = 8 << 20

_BOM = b"\xef\xbb\xbf"

#: The delimiter code of ``delimiter=None``: runs of white space separate fields
#: (TF_DELIM_WHITESPACE in cdefs/parse.h).
_WHITESPACE = int(lib.TF_DELIM_WHITESPACE)


#: pandas' default NA words (``pandas._libs.parsers.STR_NA_VALUES``) that are not
#: numbers already: the empty field is missing anyway, and ``nan``, ``NaN``, ``-nan``
#: and ``-NaN`` read as NaN.
NA_VALUES: tuple[str, ...] = ("#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "1.#IND", "1.#QNAN", "<NA>", "N/A",
                              "NA", "NULL", "None", "n/a", "null")
_NAN_WORD = re.compile(r"[+-]?nan", re.IGNORECASE)
#: pandas' default NA words that a float reads as NaN: NA words too for integers
_NAN_WORDS = ("nan", "NaN", "-nan", "-NaN")
#: what the integer reader takes for a number
_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)
#: what the plain reader takes for a number (an NA word like this is checked on every field)
_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)", re.IGNORECASE)


class EncodingError(ParseError, UnicodeDecodeError):
    """Bytes that are not UTF-8: a :class:`~tensorffi.ParseError` (line, column, byte
    offset, text) that is also the ``UnicodeDecodeError`` NumPy raises (``encoding``,
    ``object``: the bytes around the bad one, ``start``/``end`` in them)."""

    def __init__(self, message: str, code: int, function: str, *, line: int, column: int, offset: int, text: str,
                 data: bytes, start: int) -> None:
        UnicodeDecodeError.__init__(self, "utf-8", data, start, min(start + 1, len(data)), "invalid UTF-8")
        self.args = (message,)
        self.code, self.function = code, function
        self.line, self.column, self.offset, self.text = line, column, offset, text

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> Any:
        return (ParseError, (self.args[0], self.code, self.function),
                {"line": self.line, "column": self.column, "offset": self.offset, "text": self.text})


class ControlCharacterError(TensorFFIError, TypeError, ValueError):
    """A delimiter, comment, decimal mark or thousands separator that is a line end or
    collides with another: a TypeError as NumPy types it, and a ValueError as pandas
    does."""


class OptionTypeError(TensorFFIError, TypeError, ValueError):
    """An option of the wrong type (``max_rows=3.0``, ``keep_default_na="no"``): a
    TypeError as NumPy types it, and a ValueError as pandas does."""


class EmptyDataWarning(UserWarning):
    """The input holds no record at all (NumPy's loadtxt warns the same): the table has
    no rows, and as many columns as ``usecols`` names (none without it)."""


def _warn_empty(name: str, stacklevel: int = 4) -> None:
    warnings.warn(f"read_csv: input contained no data: {name!r}", EmptyDataWarning, stacklevel=stacklevel)


def _dedup(names: list[str]) -> list[str]:
    """Repeated header names made unique as pandas' C reader makes them: the second
    ``a`` becomes ``a.1`` (or ``a.2`` if the header has an ``a.1`` already)."""
    if len(set(names)) == len(names):
        return names
    counts: dict[str, int]
    out, counts, taken = list(names), {}, set(names)
    for i, col in enumerate(names):
        cur = counts.get(col, 0)
        if cur > 0:
            old = col
            while cur > 0:
                counts[old] = cur + 1
                col = f"{old}.{cur}"
                cur = cur + 1 if col in taken else counts.get(col, 0)
            out[i] = col
        counts[col] = cur + 1
    return out


class _ReaderOptions:
    """na_values, keep_default_na, thousands and decimal, checked, and the options string
    the _x kernels read (tf_xopts in csrc/parse.c). ``integer``: for an int32/int64
    table, where NaN spellings are NA words like the others (pandas' default words
    include them; a float reads them as NaN already) and only ``[+-]digits`` words look
    like numbers."""

    __slots__ = ("words", "decimal", "thousands", "general", "blob")

    def __init__(self, na_values: Any, keep_default_na: Any, thousands: Any, decimal: Any, delim: int,
                 comment: int, integer: bool = False) -> None:
        _check_keep_default_na(keep_default_na)
        words: list[str] = []
        if na_values is not None:
            if isinstance(na_values, dict):
                raise TypeError("na_values per column (a dict) is not supported: give one list for every column")
            items = [na_values] if isinstance(na_values, (str, int, float)) else list(na_values)
            for w in items:
                if isinstance(w, bool) or not isinstance(w, (str, int, float, np.integer, np.floating)):
                    raise TypeError(f"na_values must hold strings (or numbers), got {w!r}")
                if isinstance(w, str):
                    words.append(w)
                else:  # as pandas: -999 also matches "-999.0", and -999.0 "-999"
                    words.append(str(w))
                    if float(w).is_integer():
                        words += [str(int(w)), f"{int(w)}.0"]
            if keep_default_na:
                words += NA_VALUES + (_NAN_WORDS if integer else ())
        self.decimal = self._mark(decimal, "decimal", delim, comment)
        self.thousands = None if thousands is None else self._mark(thousands, "thousands", delim, comment)
        if self.thousands is not None and self.thousands == self.decimal:
            raise ControlCharacterError(f"the control characters thousands and decimal are incompatible: both are "
                                        f"{decimal!r}")
        blob = bytearray([ord(self.decimal), 0 if self.thousands is None else ord(self.thousands), 0])
        kept: list[str] = []
        for w in dict.fromkeys(words):  # in order, once
            b = w.encode("utf-8")
            if len(b) > 255 or any(c in w for c in "\0\n\r"):
                raise ValueError(f"na_values: {w!r} cannot be a field (a NUL, a line end, or over 255 bytes)")
            if not w.strip() or (_NAN_WORD.fullmatch(w) and not integer):
                continue  # empty fields and NaN spellings are missing or NaN already
            if (_INTEGER if integer else _NUMBER).fullmatch(w.strip(" \t")):
                blob[2] = 1  # a number: every field is compared
            blob += bytes([len(b)]) + b
            kept.append(w)
        self.words = frozenset(kept)
        self.general = bool(blob[2]) or self.decimal != "." or self.thousands is not None
        self.blob = np.frombuffer(bytes(blob), dtype=np.uint8)

    @staticmethod
    def _mark(ch: Any, what: str, delim: int, comment: int) -> str:
        if not isinstance(ch, str):
            raise TypeError(f"{what} must be a one-character string, got {ch!r}")
        if delim == _WHITESPACE and len(ch) == 1 and _blank(ch):
            raise ControlCharacterError(f"the control characters {what} and delimiter are incompatible: {what} is "
                                        f"{ch!r}, and delimiter=None splits fields at white space")
        if len(ch) != 1 or ord(ch) > 126 or (ord(ch) < 32):
            raise ValueError(f"{what} must be one ASCII character, got {ch!r}")
        if ord(ch) in (delim, comment):
            raise ControlCharacterError(f"the control characters {what} and delimiter or comment are incompatible: "
                                        f"both are {ch!r}")
        if ch.isdigit() or ch in '"+-eE' or (what == "decimal" and ch == " "):
            raise ValueError(f"{what} cannot be {ch!r}: it is part of numbers, quoting, the delimiter or comments")
        return ch

    def classify(self, text: str) -> int:
        """The header decision's flags (4: a number, 8: empty or an NA word, 0: text)."""
        t = text.strip()
        if not t or t in self.words:
            return 8
        if self.thousands is not None:
            t = re.sub(rf"(?<=\d){re.escape(self.thousands)}(?=\d)", "", t)
        if self.decimal != ".":
            if "." in t:
                return 0
            t = t.replace(self.decimal, ".")
        return 4 if _NUMBER.fullmatch(t) else 0


def _check_keep_default_na(keep: Any) -> None:
    if not isinstance(keep, (bool, np.bool_)) and not (isinstance(keep, (int, np.integer)) and keep in (0, 1)):
        raise OptionTypeError(f'For argument "keep_default_na" expected type bool, got {keep!r}')  # pandas' words


def _flags_under(xo: "_ReaderOptions | None", buf: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """The first record's spans, their number/empty flags decided under the options
    (tf_parse_record knows none)."""
    if xo is None:
        return spans
    spans = spans.copy()
    for i in range(spans.shape[0]):
        spans[i, 2] = (spans[i, 2] & ~12) | xo.classify(_field_text(buf, spans[i]))
    return spans

# Accepted dtype spellings -> the kernel (tf_parse_fill_<kernel>) that writes them.
# (torch's dtypes are added as they are first seen: torch is not imported for them)
_KERNELS: dict[Any, str] = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(np.float16): "f16",
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float": "f32",
    "double": "f64",
    "half": "f16",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
    "int32": "i32",
    "int64": "i64",
    "long": "i64",  # torch.long and NumPy's "long" (on LP64 systems) agree
}
#: the kernels' element types by name (torch's dtype names: T.<name> is the dtype)
_TORCH = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "i32": "int32", "i64": "int64"}
_NUMPY: dict[str, np.dtype[Any]] = {"f32": np.dtype(np.float32), "f64": np.dtype(np.float64), "f16": np.dtype(np.float16),
                                    "i32": np.dtype(np.int32), "i64": np.dtype(np.int64)}
_RAW = {"f32": np.dtype(np.float32), "f64": np.dtype(np.float64), "f16": np.dtype(np.uint16), "bf16": np.dtype(np.uint16),
        "i32": np.dtype(np.int32), "i64": np.dtype(np.int64)}
#: the integer kernels, and the range of each (a value outside it is a ParseError)
_INT_RANGE = {"i32": (-(2**31), 2**31 - 1), "i64": (-(2**63), 2**63 - 1)}


def read_csv(
    source: Any,
    *,
    dtype: Any = "float32",
    delimiter: str | None = ",",
    header: bool | str | None = "auto",
    skiprows: int = 0,
    usecols: int | str | Sequence[int | str] | None = None,
    comment: str | None = None,
    missing: float = float("nan"),
    max_rows: int | None = None,
    threads: int | None = None,
    progress: bool | Callable[[int, int], object] | None = None,
    like: Any = None,
    return_names: bool = False,
    na_values: str | Sequence[str] | None = None,
    keep_default_na: bool = True,
    thousands: str | None = None,
    decimal: str = ".",
) -> Any:
    """Read a numeric CSV table into a contiguous 2-D tensor (rows x columns).

    Args:
        source: a path (``str`` or ``os.PathLike``; a regular file is memory-mapped),
            ``bytes``/``bytearray``/``memoryview``, a 1-D uint8 NumPy array or tensor,
            or a binary file object (read from its current position to its end;
            memory-mapped when it is a plain file). An input without a size (a pipe,
            a FIFO, ``/dev/stdin``, ``/dev/fd/N``, a device, a ``/proc`` file whose
            stat size is 0, a GzipFile) is read to its end, streamed: the same table
            and errors, parsed on one thread, in memory the table plus one chunk;
            ``max_rows`` stops the reading there. ``/dev/null`` and an empty file
            give a ``(0, 0)`` table, a header alone ``(0, columns)``; an endless
            source is read until it ends, except that a record may not pass
            :data:`MAX_RECORD_BYTES` (``/dev/zero``: a ParseError after 64 MiB).
        dtype: float32 (default), float64, float16, bfloat16, int32 or int64, as a
            torch dtype (``torch.int64``), a NumPy dtype or what ``np.dtype`` takes
            (``np.int32``, ``int``, ``"i8"``) or a name (``"float64"``, ``"int32"``;
            ``"float"`` is float32 as in torch, and ``"int"`` is refused as ambiguous:
            torch's is int32, NumPy's int64). Each float is rounded once, directly
            from its text; integers are exact (see Integers below).
        delimiter: the one-character (ASCII) field separator, or None: fields are
            separated by runs of white space, as NumPy's ``loadtxt`` splits by default
            and pandas' ``sep=r"\\s+"`` does (space-aligned ``.txt``/``.dat`` files).
            White space is what Python's ``str.isspace`` knows, as NumPy splits on it:
            space, tab, ``\\v``, ``\\f``, ``\\x1c``-``\\x1f`` and the Unicode blanks
            (U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F,
            U+3000; pandas splits on spaces and tabs only). Blanks at the start and end
            of a line are ignored, a line of blanks is a blank line (skipped), and there
            are no empty fields (``missing`` is then the value of ``na_values`` words).
            Quotes follow pandas' ``sep=r"\\s+"`` (NumPy's ``quotechar='"'``): a field
            that begins with ``"`` may hold blanks, and runs to its closing quote, which
            must be followed by white space, a line end or a comment (text glued to it
            is an error, as with a delimiter). ``comment``, ``thousands`` and
            ``decimal`` cannot be white space then (a ControlCharacterError). A single
            space, ``delimiter=" "``, still splits at every space (two make an empty
            field).
        header: ``"auto"`` (the first record is a header if it holds text and no
            number; a first record mixing numbers and text is data, so a typo there
            is an error rather than a silently lost row), ``True`` or ``False``/``None``.
        skiprows: physical lines to skip first (before the header).
        usecols: columns to keep, in this order: indices (negative ones count from
            the end) or header names. Other columns are tokenized and checked, not
            parsed, so they may hold text.
        comment: a character that starts a comment running to the end of its line;
            lines holding only a comment are skipped. None: no comments.
        missing: the value of an empty field (default NaN). For an int32/int64
            table, an integer of the type that fills empty fields and NA words; the
            default NaN means no fill (integers have no NaN), so such a field is a
            ParseError. A fill that is not an integer (``1.5``, ``inf``) is a
            ``ValueError`` and one outside the type's range an ``OverflowError``
            (:class:`~tensorffi.errors.ArgumentOverflowError`), both at the call.
        max_rows: read at most this many data rows; nothing after them is read.
        threads: parsing threads (None: :func:`tensorffi.get_num_threads`).
        progress: True for a tqdm bar, or a callable ``f(done, total)`` called on the
            calling thread with integer bytes: first ``(0, total)``, last
            ``(total, total)``; an exception it raises (or Ctrl-C) stops the parse
            promptly and reaches the caller. A streamed input (no size) reports
            ``(bytes read, None)`` per chunk, then ``(n, n)``.
        like: ``"numpy"`` (or the ``numpy`` module, or ``np.ndarray``) returns a NumPy
            array; the default returns a torch tensor. bfloat16 needs torch.
        return_names: also return the column names (a list of ``str``, or None when
            there is no header), as ``(table, names)``. Repeated names are made unique
            as pandas makes them (``a``, ``a.1``, ``a.2``).
        na_values: words that mean a missing value (read as ``missing``, like an empty
            field), as in pandas: a string or a sequence of strings, plus pandas'
            default words (:data:`NA_VALUES`: ``NA``, ``N/A``, ``NULL``, ``#N/A``,
            ``-1.#QNAN``, ``1.#IND``, ``None``...) while ``keep_default_na`` is True;
            ``na_values=()`` gives the default words alone. None (the default): no
            words, so ``NA`` is an error rather than a silent hole in the data. A
            word that reads as a number (``"-999"``) is matched against every field.
        keep_default_na: with ``na_values``, also treat :data:`NA_VALUES` as missing.
        thousands: a one-character thousands separator (``","`` reads ``1,234.5``;
            ``"."`` with ``decimal=","`` reads ``1.234,5``), allowed between digits
            of the integer part. None: none.
        decimal: the one-character decimal mark (``","`` for ``3,14``); then a ``.``
            in a number is an error, unless it is the thousands separator.

    Returns:
        A C-contiguous ``(rows, columns)`` tensor or array (and the names).

    Raises:
        tensorffi.ParseError: a malformed number, an integer out of its type's range
            or a missing value in an integer table (without a ``missing`` fill), a
            record with the wrong number of fields, an unterminated quote, a NUL
            byte or invalid UTF-8; it carries
            ``line`` (physical, counting lines inside quoted fields), ``column``
            (1-based, in characters), ``offset`` (0-based byte) and ``text`` (the
            offending token or record).
        tensorffi.errors.NativeIOError: the input changed while it was read (a
            memory-mapped file truncated, a source tensor's storage freed), or a path
            cannot be opened: then it is also a ``FileNotFoundError``,
            ``PermissionError`` or ``IsADirectoryError`` (``errno`` and ``filename``
            set; a socket is named as one), and the message names ``source``.

    Grammar: decimal numbers with an optional sign, ``.5`` and ``5.``, exponents
    (``1e5``, ``1E-5``, ``1e+05``), ``inf``/``infinity``/``nan`` in any case with a
    sign; spaces and tabs around fields; double-quoted fields (``""`` escapes a
    quote; a quoted field may span lines, which only text in skipped columns or the
    header can use); LF, CRLF and CR line ends; a UTF-8 byte order mark; blank lines
    skipped; the last line with or without a line end. Blanks around a number
    include Unicode white space (U+00A0, U+202F...), as NumPy strips it. Words such
    as ``NA`` are errors unless ``na_values`` names them. With ``delimiter=None``,
    runs of white space separate the fields (see ``delimiter``); a record with more
    or fewer fields than the first is the same ParseError as with a delimiter.

    >>> import tensorffi.io
    >>> tensorffi.io.read_csv(b"  t      v\\n 0.5  -1e-3\\n\\t 1.0   250 \\n", delimiter=None, dtype="float64").tolist()
    [[0.5, -0.001], [1.0, 250.0]]

    Integers (``dtype`` int32 or int64) are ``[+-]digits``, nothing else, as NumPy's
    ``loadtxt(dtype=int)`` reads them: leading zeros and the blanks and quotes above
    are allowed, and so are thousands separators between digits with ``thousands``
    (as pandas reads integers); ``1.0``, ``1e3``, ``nan``, ``inf`` and a decimal mark
    of any kind are ParseErrors (``field 2 is not an integer``), and so is every value
    outside the type's range (``2147483648`` for int32, ``-9223372036854775809`` or
    a long digit string for int64: ``out of range for int64``), never wrapped or
    saturated. With ``na_values``, NaN spellings (``nan``, ``NaN``, ``-nan``) are NA
    words too (pandas' default words include them; a float table reads them as NaN).

    >>> import tensorffi.io
    >>> t = tensorffi.io.read_csv(b"a;b\\n1.234,5;NA\\n-0,25;7\\n", delimiter=";", decimal=",",
    ...                           thousands=".", na_values=(), dtype="float64")
    >>> t.tolist()
    [[1234.5, nan], [-0.25, 7.0]]

    >>> import torch, tensorffi.io
    >>> t, names = tensorffi.io.read_csv(b'a,"b"\\n1,2\\n,0.1\\n', return_names=True)
    >>> names, t.dtype, t.shape
    (['a', 'b'], torch.float32, torch.Size([2, 2]))
    >>> t[1, 0].isnan().item(), t[1, 1].item()   # an empty field is NaN; 0.1 rounded once
    (True, 0.10000000149011612)

    >>> ids = tensorffi.io.read_csv(b"id,n\\n9223372036854775807,-042\\n,7\\n", dtype=torch.int64, missing=-1)
    >>> ids.dtype, ids.tolist()   # exact over the whole range; the empty field filled with -1
    (torch.int64, [[9223372036854775807, -42], [-1, 7]])
    >>> tensorffi.io.read_csv(b"n\\n2147483648\\n", dtype="int32")
    Traceback (most recent call last):
        ...
    tensorffi.errors.ParseError: <bytes>: line 2, column 1 (byte offset 2): field 1 is out of range for int32 [-2147483648, 2147483647]: "2147483648"
    """
    # Arguments (the common spellings first: small inputs make this cost visible).
    try:
        kernel = _KERNELS.get(dtype)  # names, NumPy dtypes, torch dtypes once seen
    except TypeError:  # unhashable: _kernel_for says what is wrong
        kernel = None
    if kernel is None:
        kernel = _kernel_for(dtype)
    want_numpy = False if like is None else _wants_numpy(like)
    if want_numpy and kernel == "bf16":
        raise TypeError("NumPy has no bfloat16 dtype: use like=torch (the default) for bfloat16")
    delim = 44 if delimiter == "," else _delimiter_code(delimiter)
    comment_code = -1 if comment is None else _comment_code(comment, delim)
    if header is None:
        header = False
    if header is not True and header is not False and header != "auto":
        raise ValueError(f"header must be 'auto', True or False, got {header!r}")
    if type(skiprows) is not int or skiprows < 0:
        skiprows = _count_arg(skiprows, "skiprows")
    limit = -1 if max_rows is None else _count_arg(max_rows, "max_rows")
    if threads is not None:
        resolve_threads(threads)  # checked here; resolved where threads run (not for small inputs)
    # the kernel's `missing` arguments: the value for the float kernels; (value, fill) for integers
    margs = (missing,) if type(missing) is float and kernel not in _INT_RANGE else _missing_args(kernel, missing)
    xo = None
    if na_values is not None or thousands is not None or decimal != ".":
        xo = _ReaderOptions(na_values, keep_default_na, thousands, decimal, delim, comment_code, kernel in _INT_RANGE)
    elif keep_default_na is not True:
        _check_keep_default_na(keep_default_na)

    if progress is not None and progress is not False and progress is not True and not callable(progress):
        raise TypeError(f"progress must be True, False, None or a callable(done, total), got {progress!r}")
    buf: np.ndarray | _Blocks
    if type(source) is bytes:
        if len(source) <= _SMALL_BYTES and usecols is None and not progress and _CHUNK_BYTES is None:
            # small text: straight to C (the bridge reads bytes as they are)
            return _read_small(source, "<bytes>", kernel, want_numpy, delim, comment_code, header, skiprows,
                               margs, limit, 3 if source.startswith(_BOM) else 0, return_names, xo)
        buf, name, held = np.frombuffer(source, dtype=np.uint8), "<bytes>", None
    else:
        buf, name, held = _as_buffer(source)
        if isinstance(buf, _Blocks):  # a pipe, a FIFO, a device, a /proc file, a GzipFile: no size to map
            opts = _Options(dtype, delimiter, header, skiprows, usecols, comment, missing, max_rows, like,
                            MAX_RECORD_BYTES, na_values, keep_default_na, thousands, decimal)
            return _read_stream(buf, opts, progress, return_names)
    try:
        result = _read(
            buf, name, kernel, want_numpy, delim, comment_code, header, skiprows, usecols, margs, limit,
            threads, progress, return_names, held, xo,
        )
        if held is not None:
            held.check()  # another thread may have resized it while C read it
        return result
    finally:
        del buf  # drop the mapping as soon as we are done


def _read(
    buf: np.ndarray, name: str, kernel: str, want_numpy: bool, delim: int, comment: int, header: Any,
    skiprows: int, usecols: Any, margs: tuple[Any, ...], limit: int, threads: int | None, progress: Any,
    return_names: bool,
    held: "_HeldStorage | None", xo: "_ReaderOptions | None" = None,
) -> Any:
    n = buf.shape[0]
    start = 3 if n >= 3 and buf[0] == 0xEF and bytes(buf[:3]) == _BOM else 0
    if n <= _SMALL_BYTES and usecols is None and not progress and _CHUNK_BYTES is None:
        return _read_small(buf, name, kernel, want_numpy, delim, comment, header, skiprows, margs, limit, start,
                           return_names, xo)
    nthreads = resolve_threads(threads)
    errinfo = np.zeros(5, dtype=np.int64)

    # The first record: header or data? How many columns?
    max_fields = 64
    while True:
        spans = np.empty((max_fields, 3), dtype=np.int64)
        info = np.empty(4, dtype=np.int64)
        _call(_record, (buf, name, errinfo), buf, start, skiprows, delim, comment, spans=spans, info=info, errinfo=errinfo)
        if info[0] < 0 or info[2] <= max_fields:
            break
        max_fields = int(info[2])
    nfields = int(info[2])
    names: list[str] | None = None
    if info[0] < 0:  # no record at all
        ncols_in, data_start = 0, n
        if header is True:
            names = []
        _warn_empty(name)
    elif header is True or (header == "auto" and _looks_like_header(_flags_under(xo, buf, spans[:nfields]))):
        names = _dedup([_field_text(buf, spans[i]) for i in range(nfields)])
        ncols_in, data_start = nfields, int(info[1])
    else:
        ncols_in, data_start = nfields, int(info[0])

    colmap, out_names = _column_map(usecols, ncols_in, names)
    cols = int((colmap >= 0).sum())

    # Pass 1: chunk boundaries and row counts.
    region = n - data_start
    chunk = _chunk_bytes(region, nthreads)
    nchunks = max(1, -(-region // chunk))
    chunks = np.empty((nchunks, 4), dtype=np.int64)
    total = np.zeros(1, dtype=np.int64)
    with CallbackScope(None) as scope:  # Ctrl-C only; the progress bar follows pass 2
        scope.call(
            _count, buf, data_start, delim, comment, chunk, limit, nthreads, scope.fn, scope.handle,
            chunks=chunks, total_rows=total,
        )
    rows = int(total[0])

    # Pass 2: parse into the output, allocated here.
    out, result = _allocate(kernel, want_numpy, rows, cols)
    if rows > 0 or region > 0:
        reporter = _Progress(progress, held)
        with CallbackScope(reporter if reporter.active else None) as scope:
            try:
                if reporter.active and scope.report(0, region):  # before C reads: the bar appears at 0
                    scope.check()
                extra = {} if xo is None else {"opts": xo.blob}
                _call(
                    (_fill if xo is None else _fill_x)[kernel], (buf, name, errinfo), buf, delim, comment, chunks,
                    colmap, *margs, nthreads, scope.fn, scope.handle, out=out, errinfo=errinfo, scope=scope, **extra,
                )
                if reporter.active and scope.report(region, region):  # max_rows may stop early: end at 100%
                    scope.check()
            finally:
                reporter.close()
    return (result, out_names) if return_names else result


class _Progress:
    """read_csv's progress reports, in bytes: the caller's ``f(done, total)``, or a
    tqdm bar (``progress=True``) counted in integer bytes so that it ends exactly at
    its total (a bar in float megabytes drifted past it: clamping warnings, negative
    ETAs, an unfilled last frame). After every report, a source tensor's storage is
    checked: one resized or freed from the callback stops the parse."""

    def __init__(self, progress: Any, held: "_HeldStorage | None") -> None:
        self.user = progress if callable(progress) and progress is not True else None
        self.want_bar = progress is True
        self.held = held
        self.active = self.want_bar or self.user is not None or held is not None
        self.bar: Any = None
        self.done = -1
        self.total: int | None = None

    def __call__(self, done: int, total: int | None) -> None:
        # a stream's last report repeats its count with the total now known
        if done != self.done or (total is not None and self.total is None):
            self.done, self.total = done, total
            if self.want_bar:
                self._draw(done, total)
            elif self.user is not None:
                self.user(done, total)
        if self.held is not None:
            self.held.check()

    def _draw(self, done: int, total: int | None) -> None:
        if self.bar is None:  # the bar that fits the host (tensorffi._progress)
            from ._progress import Bar

            self.bar = Bar("read_csv", "B", unit_scale=True)
        self.bar(done, total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


#: Rows per chunk when read_csv streams an input without a size (then concatenated).
_STREAM_ROWS = 65536


def _read_stream(blocks: "_Blocks", opts: "_Options", progress: Any, return_names: bool) -> Any:
    """read_csv of an input without a size (a pipe, a FIFO, a device, a /proc file, a
    GzipFile): iter_csv's chunks, concatenated. The result, the names and the errors
    are read_csv's (iter_csv's are, bit for bit); parsing is on one thread; memory is
    the table plus one chunk (not the text), and max_rows stops the reading. The
    progress callback gets ``(bytes read, None)`` while the size is unknown, then
    ``(n, n)`` at the end."""
    reporter = _Progress(progress, None)
    assert isinstance(blocks, _FileBlocks)
    chunks = CSVChunks(blocks, _STREAM_ROWS, opts)
    parts: list[Any] = []
    try:
        with chunks:
            if reporter.active:
                reporter(0, None)
            for part in chunks:
                parts.append(part)
                if reporter.active:
                    reporter(blocks.delivered, None)
            if reporter.active:
                reporter(blocks.delivered, blocks.delivered)
        layout = chunks._layout
    finally:
        reporter.close()
    assert layout is not None
    if len(parts) == 1:
        table = parts[0]
    elif parts:
        table = np.concatenate(parts) if opts.want_numpy else T.cat(parts)
    else:
        table = _allocate(opts.kernel, opts.want_numpy, 0, layout.cols)[1]
    return (table, None if layout.names is None else list(layout.names)) if return_names else table


class _HeldStorage:
    """A source tensor's storage, held for the whole call, and its extent then."""

    def __init__(self, tensor: "torch.Tensor") -> None:
        self.storage = tensor.untyped_storage()
        self.extent = (self.storage.data_ptr(), self.storage.nbytes())

    def check(self) -> None:
        if (self.storage.data_ptr(), self.storage.nbytes()) != self.extent:
            raise NativeIOError(
                "read_csv: the source tensor's storage was resized or freed while it was being parsed [TF_EIO]",
                -9, "read_csv",
            )


def _read_small(
    buf: np.ndarray | bytes, name: str, kernel: str, want_numpy: bool, delim: int, comment: int, header: Any,
    skiprows: int, margs: tuple[Any, ...], limit: int, start: int, return_names: bool,
    xo: "_ReaderOptions | None" = None,
) -> Any:
    """The whole parse in one native call (tf_parse_small_*): into a buffer of
    n - start + 1 values (every field but the last ends with its own delimiter or line
    end, so no input has more), then trimmed to the rows found."""
    views = getattr(_meta, "views", None)
    meta, info, errinfo, spans = views if views is not None else _small_meta()
    need = len(buf) - start + 1
    tcopy = None if want_numpy else (_tensor_copy[0] or _tensor_copier())
    to_tensor = tcopy is not None
    if to_tensor and need <= _SCRATCH_VALUES:
        # the values are copied into the result: parse into this thread's scratch buffer
        out = getattr(_meta, kernel, None)
        if out is None:
            out = np.empty(_SCRATCH_VALUES, dtype=_RAW[kernel])
            setattr(_meta, kernel, out)
    else:
        out = np.empty(need, dtype=_RAW[kernel])
    try:
        if xo is None:
            _small[kernel](buf, start, skiprows, delim, comment, _HEADER[header], limit, *margs, out=out, meta=meta)
        else:
            _small_x[kernel](buf, start, skiprows, delim, comment, _HEADER[header], limit, *margs, out=out, meta=meta,
                             opts=xo.blob)
    except ParseError as exc:
        raise _parse_error(exc, buf, name, errinfo) from None
    rows, cols, is_header, first, _ = info.tolist()
    if first < 0:
        _warn_empty(name, 4)
    names: list[str] | None = None
    if is_header and return_names:
        if cols > spans.shape[0]:  # a wide header: its spans again, all of them
            spans = np.empty((cols, 3), dtype=np.int64)
            _call(_record, (buf, name, errinfo), buf, start, skiprows, delim, comment, spans=spans,
                  info=np.empty(4, dtype=np.int64), errinfo=errinfo)
        names = _dedup([_field_text(buf, spans[i]) for i in range(cols)])
    elif header is True and first < 0:
        names = []
    if to_tensor:
        # a tensor of the exact size, filled from the buffer (cheaper than trimming it
        # and wrapping it with torch.from_numpy)
        result: Any = tcopy(out, _TORCH_CODE[kernel], (rows, cols))  # type: ignore[misc]
        return (result, names) if return_names else result
    try:
        out.resize((rows, cols), refcheck=True)  # realloc: gives back the unused part of the bound
    except ValueError:  # something else still refers to out: copy instead
        out = out[: rows * cols].reshape(rows, cols).copy()
    if want_numpy:
        result = out.view(np.float16) if kernel == "f16" else out
    else:
        result = T.from_numpy(out)
        if kernel in ("f16", "bf16"):
            result = result.view(getattr(T, _TORCH[kernel]))
    return (result, names) if return_names else result


_meta = threading.local()
#: values a thread's scratch buffer for small tables holds (16 KiB of input or less)
_SCRATCH_VALUES = 16 << 10
#: bridge_tensor_copy, once the native path reads torch tensors (torch imported; else None)
_tensor_copy: list[Any] = [None]
_TORCH_CODE = {k: _lower.dtype_code(v) for k, v in _TORCH.items()}


def _tensor_copier() -> Any:
    _tensor_copy[0] = copy = _lower.tensor_copy()  # (None where the native call path is off)
    return copy


def _small_meta() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The small path's bookkeeping buffer (tf_parse_small_*'s meta: info, errinfo, and
    the spans of 64 fields) and views of its parts: one int64 array per thread, made
    once (the call is all fixed costs; the bridge reads an array with fewer calls than
    a tensor). Nothing else runs on this thread while it is in use: the small path has
    no callbacks."""
    views = getattr(_meta, "views", None)
    if views is None:
        meta = np.empty(10 + 64 * 3, dtype=np.int64)
        views = _meta.views = (meta, meta[:5], meta[5:10], meta[10:].reshape(64, 3))
    return views


def _call(fn: Callable[..., Any], where: tuple[np.ndarray | bytes, str, np.ndarray], *args: Any,
          scope: CallbackScope | None = None, **kwargs: Any) -> Any:
    """Call a parse kernel; a TF_EPARSE status becomes a ParseError with its position.

    ``where`` is (input buffer, its name, the errinfo array the kernel fills)."""
    buf, name, errinfo = where  # C fills errinfo whenever it reports TF_EPARSE
    try:
        return scope.call(fn, *args, **kwargs) if scope is not None else fn(*args, **kwargs)
    except ParseError as exc:
        raise _parse_error(exc, buf, name, errinfo) from None


def _parse_error(exc: NativeError, buf: np.ndarray | bytes, name: str, errinfo: np.ndarray) -> ParseError:
    offset, line, column, tb, te = (int(v) for v in errinfo)
    message = str(exc).removesuffix(" [TF_EPARSE]")
    # "tf_parse_fill_f32: line ..." -> "<source>: line ..."
    head, sep, rest = message.partition(": ")
    if sep and head.startswith("tf_parse_"):
        message = f"{name}: {rest}"
    text = bytes(buf[tb : min(te, tb + 200)]).decode("utf-8", "backslashreplace")
    if ": invalid UTF-8: " in message:
        lo = max(tb, offset - 16)
        return EncodingError(message, exc.code, exc.function, line=line, column=column, offset=offset, text=text,
                             data=bytes(buf[lo : min(te, offset + 16)]), start=offset - lo)
    return ParseError(message, exc.code, exc.function, line=line, column=column, offset=offset, text=text)


def _looks_like_header(spans: np.ndarray) -> bool:
    """header="auto": some field is text and none is a number. A first row that mixes
    numbers and text is data, so a typo in it is an error rather than a lost row."""
    flags = spans[:, 2]
    has_text = bool(np.any((flags & (4 | 8)) == 0))
    has_number = bool(np.any(flags & 4))
    return has_text and not has_number


def _field_text(buf: np.ndarray | bytes, span: np.ndarray) -> str:
    begin, end, flags = (int(v) for v in span)
    text = bytes(buf[begin:end]).decode("utf-8")  # checked by C already
    if flags & 2:
        text = text.replace('""', '"')
    if not flags & 1:
        text = text.strip(" \t")
    return text


def _column_map(usecols: Any, ncols_in: int, names: list[str] | None) -> tuple[np.ndarray, list[str] | None]:
    """colmap[j] = output column of input field j (-1: skipped), and the kept names."""
    if usecols is None:
        return np.arange(ncols_in, dtype=np.int64), names
    if isinstance(usecols, (int, np.integer, str)) or _index_like(usecols):
        usecols = [usecols]
    if ncols_in == 0 and names is None and all(_index_like(u) for u in usecols):
        k = len(list(usecols))  # an empty input: as NumPy, no rows and the columns usecols names
        return np.arange(k, dtype=np.int64), None
    picked: list[int] = []
    missing = [u for u in usecols if isinstance(u, str) and names is not None and u not in names]
    if missing:  # pandas' words
        raise ValueError(f"usecols: no column named {missing[0]!r} (Usecols do not match columns, columns expected "
                         f"but not found: {missing}); the columns are {names}")
    for u in usecols:
        if isinstance(u, str):
            if names is None:
                raise ValueError(f"usecols names a column ({u!r}), but the input has no header")
            hits = [i for i, nm in enumerate(names) if nm == u]
            if len(hits) > 1:
                raise ValueError(f"usecols: {len(hits)} columns are named {u!r}; select them by index")
            picked.append(hits[0])
        elif _index_like(u):
            i = operator.index(u)
            if not -(1 << 63) <= i < 1 << 63:
                raise ArgumentOverflowError(f"usecols: column {i} does not fit in a 64-bit integer")
            if not -ncols_in <= i < ncols_in:
                raise ValueError(f"usecols: column {i} is out of range for {ncols_in} column(s)")
            picked.append(i % ncols_in)
        else:
            raise TypeError(f"usecols must hold column indices or names, got {u!r}")
    if len(set(picked)) != len(picked):
        raise ValueError(f"usecols selects a column twice: {list(usecols)}")
    colmap = np.full(ncols_in, -1, dtype=np.int64)
    for k, i in enumerate(picked):
        colmap[i] = k
    return colmap, None if names is None else [names[i] for i in picked]


def _index_like(u: Any) -> bool:
    """A column index: an integer (not a bool), or an object that converts to one
    (``__index__``, as NumPy's loadtxt takes it), not a sequence."""
    return not isinstance(u, (bool, np.bool_, str)) and not hasattr(u, "__len__") and hasattr(type(u), "__index__")


def _chunk_bytes(region: int, nthreads: int) -> int:
    if _CHUNK_BYTES is not None:
        return max(1, int(_CHUNK_BYTES))
    if region <= 0:
        return 1
    per = -(-region // (4 * nthreads))  # about four chunks per thread, for balance
    return min(max(per, _MIN_CHUNK), _MAX_CHUNK)


def _allocate(kernel: str, want_numpy: bool, rows: int, cols: int) -> tuple[Any, Any]:
    """The array C writes, and the result the caller gets (a view of it for 16-bit types)."""
    if want_numpy:
        if kernel == "f16":
            raw = np.empty((rows, cols), dtype=np.uint16)
            return raw, raw.view(np.float16)
        out = np.empty((rows, cols), dtype=_NUMPY[kernel])
        return out, out
    if kernel in ("f16", "bf16"):
        raw_t = T.empty((rows, cols), dtype=T.uint16)
        return raw_t, raw_t.view(getattr(T, _TORCH[kernel]))
    out_t = T.empty((rows, cols), dtype=getattr(T, _TORCH[kernel]))
    return out_t, out_t


def _kernel_for(dtype: Any) -> str:
    """The kernel for a dtype: a torch dtype, a NumPy dtype (or what ``np.dtype`` takes:
    ``np.int64``, ``int``, ``"i8"``, ``"<f4"``) or a name (``"float32"``, ``"int64"``).
    Names follow torch where torch and NumPy disagree (``"float"`` is float32), except
    ``"int"``, which is refused: torch.int is int32, NumPy's ``"int"`` int64."""
    key = dtype
    if isinstance(dtype, str):
        key = dtype.lower().removeprefix("torch.")
        if key == "int":
            raise TypeError("read_csv: dtype 'int' is ambiguous (torch.int is int32, NumPy's 'int' is int64): "
                            "say 'int32' or 'int64'")
        if key not in _KERNELS:
            key = _numpy_dtype(dtype)
    elif isinstance(dtype, T.dtype):
        key = str(dtype).removeprefix("torch.")
    else:
        key = _numpy_dtype(dtype)
    kernel = _KERNELS.get(key) if key is not None else None
    if kernel is not None and isinstance(dtype, T.dtype):
        _KERNELS[dtype] = kernel  # the next call finds it at once
    if kernel is None:
        raise TypeError(f"read_csv: dtype must be float32, float64, float16, bfloat16, int32 or int64, got {dtype!r}")
    return kernel


def _numpy_dtype(dtype: Any) -> np.dtype[Any] | None:
    try:
        found: np.dtype[Any] = np.dtype(dtype)
    except TypeError:
        return None
    return found


def _missing_args(kernel: str, missing: Any) -> tuple[Any, ...]:
    """``missing`` checked for the kernel, as its C arguments: ``(value,)`` for the float
    types; ``(value, 1)`` for the integer types with an integer fill, ``(0, 0)`` for NaN
    (the default: integers have no NaN, so a missing field is then a ParseError)."""
    if kernel not in _INT_RANGE:
        try:
            return (float(missing),)
        except (TypeError, ValueError):
            raise TypeError(f"missing must be a number, got {missing!r}") from None
    name = _NUMPY[kernel].name
    if isinstance(missing, (int, np.integer)):
        value = int(missing)
    else:
        try:
            as_float = float(missing)
        except (TypeError, ValueError):
            raise TypeError(f"missing must be a number, got {missing!r}") from None
        if as_float != as_float:
            return (0, 0)
        if not as_float.is_integer():
            raise ValueError(f"missing={missing!r} cannot fill an {name} table: give an integer (or leave missing "
                             "as NaN: then an empty field or an NA word is a ParseError)")
        value = int(as_float)
    lo, hi = _INT_RANGE[kernel]
    if not lo <= value <= hi:
        raise ArgumentOverflowError(f"missing={value} does not fit in {name} [{lo}, {hi}]")
    return (value, 1)


def _wants_numpy(like: Any) -> bool:
    # arrays first: `array == "torch"` compares element by element
    if isinstance(like, np.ndarray):
        return True
    if isinstance(like, T.Tensor):
        return False
    torch = sys.modules.get("torch")  # (a module or class named torch is torch's: never imported here)
    if like is None or (torch is not None and (like is torch or like is torch.Tensor)) or (
            isinstance(like, str) and like == "torch"):
        return False
    if like is np or like is np.ndarray or (isinstance(like, str) and like == "numpy"):
        return True
    raise ValueError(f"like must be 'torch' or 'numpy' (or the module, or an array of that kind), got {like!r}")


def _char_code(ch: Any, what: str) -> int:
    if not isinstance(ch, str):
        raise TypeError(f"{what} must be a one-character string, got {ch!r}")
    if len(ch) != 1 or ord(ch) > 127:
        raise ValueError(f"{what} must be one ASCII character, got {ch!r}")
    if ch == "\0":
        raise ValueError(f"{what} cannot be NUL ('\\0'): NUL bytes are refused in the input")
    if ch in "\r\n":
        raise ControlCharacterError(f"{what}: the control character {ch!r} cannot be a newline")
    if ch in '"\r\n' or ch.isalnum() or ch in ".+-":
        raise ValueError(f"{what} cannot be {ch!r}: it is part of quoting, line ends or numbers")
    return ord(ch)


def _blank(ch: str) -> bool:
    """White space that delimiter=None splits at (str.isspace less the line ends)."""
    return ch.isspace() and ch not in "\r\n"


def _delimiter_code(delimiter: Any) -> int:
    """The delimiter byte, or _WHITESPACE for None (runs of white space)."""
    return _WHITESPACE if delimiter is None else _char_code(delimiter, "delimiter")


def _comment_code(comment: Any, delim: int) -> int:
    """The comment byte, checked against the delimiter (its code, as _delimiter_code gives it)."""
    if delim == _WHITESPACE and isinstance(comment, str) and len(comment) == 1 and _blank(comment):
        raise ControlCharacterError(f"the control characters delimiter and comment are incompatible: comment is "
                                    f"{comment!r}, and delimiter=None splits fields at white space")
    code = _char_code(comment, "comment")
    if comment in (" ", "\t"):
        raise ValueError(f"comment cannot be a blank ({comment!r}): blanks around fields are ignored")
    if code == delim:
        raise ControlCharacterError(f"the control characters delimiter and comment are incompatible: both are "
                                    f"{comment!r}")
    return code


def _count_arg(value: Any, what: str) -> int:
    # typed as NumPy types them: a float (3.0) or a bool is a TypeError, a negative count a ValueError
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise OptionTypeError(f"{what} must be a non-negative integer, got {value!r}")
    if value < 0:
        raise ValueError(f"{what} must be a non-negative integer, got {value!r}")
    return int(value)


def _as_buffer(source: Any) -> tuple["np.ndarray | _Blocks", str, "_HeldStorage | None"]:
    """The input as a 1-D uint8 array (memory-mapped for files), a name for errors, and
    for a tensor source its storage, held and checked (C must not read freed memory).
    An input without a size to map (a pipe, a device, a /proc file, a GzipFile) comes
    back as its blocks, to be streamed."""
    buf, name = _as_array(source, streams=True)
    held = _HeldStorage(source) if isinstance(source, T.Tensor) else None
    return buf, name, held


def _as_array(source: Any, streams: bool = False) -> tuple["np.ndarray | _Blocks", str]:
    if type(source) is bytes:
        return np.frombuffer(source, dtype=np.uint8), "<bytes>"
    if isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        f = _open_source(name, "read_csv")
        try:
            size = _file_size(f.fileno())
            if size > 0:
                with f:
                    return _map_file(f, 0, size), name
        except BaseException:
            f.close()
            raise
        # st_size 0 is an empty file or one whose size is not known (/proc, FIFOs,
        # devices, /dev/fd/N of a pipe): read it to its end; for an empty file that
        # is one read() that returns nothing.
        return _FileBlocks(f, name, owned=True), name
    if isinstance(source, (bytes, bytearray)):
        return np.frombuffer(source, dtype=np.uint8), "<bytes>"
    if isinstance(source, memoryview):
        view = source if source.ndim == 1 and source.format in ("B", "b", "c") else source.cast("B")
        return np.frombuffer(view, dtype=np.uint8), "<bytes>"
    if isinstance(source, np.ndarray):
        if source.dtype != np.uint8 or source.ndim != 1:
            raise TypeError(f"an array source must be 1-D uint8 text, got dtype {source.dtype}, shape {source.shape}")
        return np.ascontiguousarray(source), "<array>"
    if isinstance(source, T.Tensor):
        if source.dtype != T.uint8 or source.dim() != 1 or source.device.type != "cpu":
            raise TypeError(f"a tensor source must be a 1-D uint8 CPU tensor, got {source.dtype}, {tuple(source.shape)}")
        return source.contiguous().numpy(), "<tensor>"
    if isinstance(source, _stdio.TextIOBase):
        raise TypeError("read_csv needs a binary file object: open the file with mode 'rb'")
    if hasattr(source, "read"):
        name = str(getattr(source, "name", "<file>"))
        if isinstance(source, _stdio.BytesIO):
            pos = source.tell()
            data = np.frombuffer(source.getbuffer(), dtype=np.uint8)[pos:]
            source.seek(0, os.SEEK_END)
            return data, "<BytesIO>"
        # Map only real files: a GzipFile, say, has the fileno() of its compressed file.
        raw = source.raw if isinstance(source, (_stdio.BufferedReader, _stdio.BufferedRandom)) else source
        if isinstance(raw, _stdio.FileIO) and _file_size(raw.fileno()) > 0:
            pos = source.tell()
            arr = _map_file(raw, pos)
            source.seek(0, os.SEEK_END)
            return arr, name
        if streams:
            return _FileBlocks(source, name, owned=False), name
        data = source.read()
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"read_csv needs a binary file object, but read() returned {type(data).__name__}")
        return np.frombuffer(data, dtype=np.uint8), name
    raise TypeError(
        "read_csv source must be a path, bytes, bytearray, memoryview, a uint8 array or a binary file object, "
        f"got {type(source).__name__}"
    )


def _file_size(fileno: int) -> int:
    """The size of a regular file; 0 for anything else, and for files whose size the
    system does not know (/proc): those are read, not mapped."""
    st = os.fstat(fileno)
    return st.st_size if _stat.S_ISREG(st.st_mode) else 0


_OPEN_ERRORS: tuple[tuple[type[OSError], type[NativeIOError]], ...] = (
    (FileNotFoundError, SourceNotFoundError),
    (PermissionError, SourcePermissionError),
    (IsADirectoryError, SourceIsADirectoryError),
)


def _open_source(source: Any, fn: str) -> Any:
    """Open a source path for reading (unbuffered); what open() raises becomes a
    NativeIOError naming the argument, still of the builtin's class (FileNotFoundError,
    PermissionError, IsADirectoryError), with its errno and filename."""
    path = os.fspath(source)
    try:
        return open(path, "rb", buffering=0)  # unbuffered: a pipe's blocks are read as they come
    except OSError as exc:
        reason = exc.strerror or str(exc)
        try:
            if _stat.S_ISSOCK(os.stat(path).st_mode):  # open() says only "No such device or address"
                reason = "is a socket, not a file"
        except OSError:
            pass
        if isinstance(exc, IsADirectoryError):
            reason = "is a directory, not a file"
        cls = next((ours for builtin, ours in _OPEN_ERRORS if isinstance(exc, builtin)), NativeIOError)
        err = cls(f"{fn}: source {path!r} cannot be read: {reason} [Errno {exc.errno}]", -9, fn)
        err.errno, err.strerror, err.filename = exc.errno, exc.strerror, path
        raise err from None


def _map_file(f: Any, pos: int, size: int | None = None) -> np.ndarray:
    if size is None:
        size = os.fstat(f.fileno()).st_size
    if size <= pos:
        return np.empty(0, dtype=np.uint8)
    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    # The array keeps the mapping alive; it is unmapped when the last view goes.
    return np.frombuffer(mm, dtype=np.uint8)[pos:]


# --------------------------------------------------------------------------- #
# streams: iter_csv and CSVDataset                                             #
# --------------------------------------------------------------------------- #

#: An incomplete record may take this many bytes before iter_csv gives up on it (a
#: quote that is never closed would otherwise make it buffer the rest of its input).
MAX_RECORD_BYTES = 64 << 20
#: Read blocks: an eighth of an output chunk, within these bounds (and doubled while a
#: record longer than a block is being read). Smaller blocks cost no measurable
#: throughput (benchmarks/iter_csv.py: 1/1 to 1/8 of a chunk within noise) and keep the
#: read block and the C buffer, which holds a copy of it, to a fraction of a chunk.
_MIN_BLOCK = 64 << 10
_MAX_BLOCK = 4 << 20
_ITEMSIZE = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i32": 4, "i64": 8}


class _StreamFns:
    """The native stream functions (csrc/parse_stream.h), bound on first use."""

    def __init__(self) -> None:
        self.open = native("tf_parse_stream_open", "out: out handle(tf_parse_stream_close)")
        self.feed = native("tf_parse_stream_feed", "data: [n]")
        self.first = native(
            "tf_parse_stream_first", "spans: out [max_fields, 3]; info: out [6]; errinfo: out [5]; return: count"
        )
        self.begin = native("tf_parse_stream_begin", "colmap: [ncols_in]")
        self.options = native("tf_parse_stream_options", "opts: [nopts]")
        contract = "out: out [rows, cols]; errinfo: out [5]; return: count"
        self.next = {k: native(f"tf_parse_stream_next_{k}", contract) for k in _KERNEL_NAMES}
        self.bytes = native("tf_parse_stream_bytes", "out: out [n]")
        self.info = native("tf_parse_stream_info", "info: out [6]")
        self.bounds = native(
            "tf_parse_bounds", "data: [n]; offsets: [k]; bounds: out [k]; rows: out [k]; lines: out [k]"
        )


_stream_fns_lock = threading.Lock()
_stream_fns_cache: list[_StreamFns] = []


def _stream_fns() -> _StreamFns:
    if not _stream_fns_cache:
        with _stream_fns_lock:
            if not _stream_fns_cache:
                _stream_fns_cache.append(_StreamFns())
    return _stream_fns_cache[0]


class _Options:
    """iter_csv's arguments, checked once (the same rules as read_csv's)."""

    __slots__ = ("kernel", "want_numpy", "delim", "comment", "header", "skiprows", "usecols", "missing", "limit",
                 "max_record", "xo")

    def __init__(self, dtype: Any, delimiter: str | None, header: Any, skiprows: Any, usecols: Any, comment: Any,
                 missing: Any, max_rows: Any, like: Any, max_record_bytes: Any, na_values: Any = None,
                 keep_default_na: Any = True, thousands: Any = None, decimal: Any = ".") -> None:
        self.kernel = _kernel_for(dtype)
        self.want_numpy = False if like is None else _wants_numpy(like)
        if self.want_numpy and self.kernel == "bf16":
            raise TypeError("NumPy has no bfloat16 dtype: use like=torch (the default) for bfloat16")
        self.delim = _delimiter_code(delimiter)
        self.comment = -1 if comment is None else _comment_code(comment, self.delim)
        if header is None:
            header = False
        if header is not True and header is not False and header != "auto":
            raise ValueError(f"header must be 'auto', True or False, got {header!r}")
        self.header = header
        self.skiprows = _count_arg(skiprows, "skiprows")
        if usecols is not None and not isinstance(usecols, (int, np.integer, str)) and not _index_like(usecols):
            usecols = list(usecols)  # an iterator is read once, here
        self.usecols = usecols
        self.missing = _missing_args(self.kernel, missing)  # the kernel's arguments
        self.limit = -1 if max_rows is None else _count_arg(max_rows, "max_rows")
        self.max_record = _count_arg(max_record_bytes, "max_record_bytes")
        if self.max_record < 1:
            raise ValueError("max_record_bytes must be at least 1")
        self.xo = None
        if na_values is not None or thousands is not None or decimal != ".":
            self.xo = _ReaderOptions(na_values, keep_default_na, thousands, decimal, self.delim, self.comment,
                                     self.kernel in _INT_RANGE)
        elif keep_default_na is not True:
            _check_keep_default_na(keep_default_na)


def _chunk_rows_arg(chunk_rows: Any) -> int:
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    return int(chunk_rows)


class _Blocks:
    """A stream's input, block by block: ``read(n)`` returns at most n bytes as a 1-D
    uint8 array (or tensor) that stays valid until the next call; empty at the end."""

    name = "<input>"

    def read(self, n: int) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:
        pass


class _MemoryBlocks(_Blocks):
    """Bytes already in memory: views of them, fed without a copy. A tensor is sliced
    anew for every block (the bridge holds its storage while C copies the block)."""

    def __init__(self, data: Any, name: str) -> None:
        self.data = data
        self.name = name
        self.pos = 0
        self.n = int(data.shape[0])

    def read(self, n: int) -> Any:
        block = self.data[self.pos : self.pos + n]
        self.pos += int(block.shape[0])
        return block


class _FileBlocks(_Blocks):
    """A binary file object (a file, a pipe, a GzipFile, a socket's makefile()), read
    with ``readinto1`` (what is there, at most one system call: a pipe's rows are not
    held back until a whole block has come), else ``readinto``, into one reused
    scratch array, else with ``read``; from its current position; at most ``limit``
    bytes if given. ``owned``: close the file with the stream. A ``BufferedIOBase``
    subclass that defines ``read`` only inherits a ``readinto1`` that raises
    ``UnsupportedOperation`` (no ``read1``): then ``readinto`` it is."""

    def __init__(self, f: Any, name: str, owned: bool, limit: int | None = None) -> None:
        self.f = f
        self.name = name
        self.owned = owned
        self.left = limit
        self.delivered = 0
        self.scratch = np.empty(0, dtype=np.uint8)
        self.readinto = getattr(f, "readinto1", None) or getattr(f, "readinto", None)
        # A regular file is read up to its size now, as read_csv maps it: what is
        # appended meanwhile is not read (a half-written last record would be), and
        # ending before that size means the file was truncated under us.
        self.start, self.size = 0, -1
        raw = f.raw if isinstance(f, (_stdio.BufferedReader, _stdio.BufferedRandom)) else f
        if isinstance(raw, _stdio.FileIO) and not raw.closed:
            size = _file_size(raw.fileno())
            if size > 0:
                self.start, self.size = f.tell(), size
                sized = max(0, size - self.start)
                self.left = sized if self.left is None else min(self.left, sized)

    def read(self, n: int) -> Any:
        if self.left is not None:
            n = min(n, self.left)
            if n <= 0:
                return self.scratch[:0]
        block = self._read(n)
        got = int(block.shape[0])
        if got == 0 and self.size >= 0 and self.left:
            self._truncated()
        self.delivered += got
        if self.left is not None:
            self.left -= got
        return block

    def _truncated(self) -> None:
        at = self.start + self.delivered
        try:
            now = os.fstat(self.f.fileno()).st_size
        except (OSError, ValueError):
            now = at
        raise NativeIOError(
            f"{self.name}: the file was truncated while it was read: it now ends at byte {now}, but it had "
            f"{self.size} bytes when it was opened (the reader was at byte {at}) [TF_EIO]", -9, "iter_csv",
        )

    def _read(self, n: int) -> Any:
        if self.readinto is not None:
            if self.scratch.shape[0] < n or self.scratch.shape[0] > 4 * n:  # grown for a long record: shrink
                self.scratch = np.empty(n, dtype=np.uint8)
            try:
                got = self.readinto(memoryview(self.scratch)[:n])  # type: ignore[arg-type]  # numpy declares the buffer protocol for 3.12+
            except _stdio.UnsupportedOperation:
                plain = getattr(self.f, "readinto", None)
                if self.readinto == plain or plain is None:
                    raise
                self.readinto = plain
                got = self.readinto(memoryview(self.scratch)[:n])  # type: ignore[arg-type]
            if got is None:
                raise ValueError(f"iter_csv: {self.name} is a non-blocking stream with no data ready; "
                                 "iter_csv needs blocking reads")
            block = self.scratch[:got]
        else:
            data = self.f.read(n)
            if not isinstance(data, (bytes, bytearray)):
                raise TypeError(f"iter_csv needs a binary file object, but read() returned {type(data).__name__}")
            block = np.frombuffer(data, dtype=np.uint8)
        return block

    def close(self) -> None:
        self.scratch = np.empty(0, dtype=np.uint8)
        if self.owned:
            self.f.close()


def _open_blocks(source: Any) -> _Blocks:
    """The blocks of any source read_csv accepts; paths are opened here (and closed
    with the stream); file objects are read from their current position."""
    if isinstance(source, (str, os.PathLike)):
        f = _open_source(source, "iter_csv")
        try:
            return _FileBlocks(f, str(Path(source)), owned=True)
        except BaseException:
            f.close()
            raise
    if isinstance(source, T.Tensor):
        if source.dtype != T.uint8 or source.dim() != 1 or source.device.type != "cpu":
            raise TypeError(f"a tensor source must be a 1-D uint8 CPU tensor, got {source.dtype}, {tuple(source.shape)}")
        return _MemoryBlocks(source if source.is_contiguous() else source.contiguous(), "<tensor>")
    if isinstance(source, (bytes, bytearray, memoryview, np.ndarray)):
        arr, name = _as_array(source)
        return _MemoryBlocks(arr, name)
    if isinstance(source, _stdio.TextIOBase):
        raise TypeError("iter_csv needs a binary file object: open the file with mode 'rb'")
    if hasattr(source, "read"):
        name = "<BytesIO>" if isinstance(source, _stdio.BytesIO) else str(getattr(source, "name", "<file>"))
        return _FileBlocks(source, name, owned=False)
    raise TypeError(
        "iter_csv source must be a path, bytes, bytearray, memoryview, a uint8 array or tensor, or a binary file "
        f"object, got {type(source).__name__}"
    )


class _Layout:
    """Where the data starts and how its fields map to columns."""

    __slots__ = ("start", "ncols_in", "colmap", "cols", "names", "empty")

    def __init__(self, start: int, ncols_in: int, colmap: np.ndarray, names: list[str] | None, empty: bool) -> None:
        self.start = start
        self.ncols_in = ncols_in
        self.colmap = colmap
        self.cols = int((colmap >= 0).sum())
        self.names = names
        self.empty = empty  # no record at all


class CSVChunks:
    """The chunks of a CSV input, as :func:`iter_csv` returns them: an iterator of
    C-contiguous ``(rows, columns)`` tensors (or NumPy arrays) of up to ``chunk_rows``
    rows each, in order. Never empty chunks: an input without data rows yields none.

    The parser is C state owned by a :class:`tensorffi.Handle`, freed exactly once:
    when the input ends, when a chunk raises (a :class:`~tensorffi.ParseError`, an
    error of the source), on :meth:`close` (or the end of a ``with`` block), or when
    the iterator is garbage collected. A path is opened by the iterator and closed with
    it; a file object the caller passed stays open. One thread at a time: concurrent
    ``next()`` calls are serialized.

    Attributes:
        names: the column names from the header (after ``usecols``), or None without
            a header; reading it before the first chunk reads the header.
    """

    def __init__(self, blocks: _Blocks, chunk_rows: int, opts: _Options, *, layout: _Layout | None = None,
                 origin: int = 0, origin_line: int = 1, limit: int | None = None) -> None:
        self._blocks = blocks
        self._chunk_rows = chunk_rows
        self._opts = opts
        self._fns = _stream_fns()
        self._lock = threading.Lock()
        self._errinfo = np.zeros(5, dtype=np.int64)
        self._info = np.zeros(6, dtype=np.int64)
        self._layout = layout
        self._left = opts.limit if limit is None else limit  # rows still to read (-1: all)
        self._eof = False
        self._block = _MIN_BLOCK
        self._fed = False
        self._done = False
        self._pending: BaseException | None = None  # raised by the next chunk, after this one's rows
        self._handle: Any = None
        try:
            skip = opts.skiprows if layout is None else 0
            self._handle = self._fns.open(opts.delim, opts.comment, skip, origin, origin_line, opts.max_record)
            if opts.xo is not None:
                self._fns.options(self._handle, opts.xo.blob)
            if layout is not None:
                self._begin(layout)
        except BaseException:
            self.close()
            raise
        # Dropped unfinished: free the parser and close an owned file quietly (no
        # ResourceWarning), whichever is collected first.
        self._finalizer = weakref.finalize(self, _finalize_chunks, self._handle, blocks)

    # -- the iterator ------------------------------------------------------------ #

    def __iter__(self) -> "CSVChunks":
        return self

    def __next__(self) -> Any:
        with self._lock:
            if self._done:
                raise StopIteration
            try:
                chunk = self._next_chunk()
            except BaseException:
                self.close()
                raise
            if chunk is None:
                self.close()
                raise StopIteration
            return chunk

    @property
    def names(self) -> list[str] | None:
        with self._lock:
            if self._layout is None:
                if self._done:
                    raise ValueError("iter_csv: the iterator was closed before its header was read")
                try:
                    self._start()
                except BaseException:
                    self.close()
                    raise
            assert self._layout is not None
            return None if self._layout.names is None else list(self._layout.names)

    @property
    def closed(self) -> bool:
        """Whether the parser is freed (the input ended, or close() was called)."""
        return self._done

    def close(self) -> None:
        """Free the parser (once) and close the file the iterator opened. Idempotent."""
        self._done = True
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer.detach()
        handle, self._handle = self._handle, None
        try:
            if handle is not None:
                handle.close()
        finally:
            blocks, self._blocks = self._blocks, None  # type: ignore[assignment]  # None once closed, read only while open
            if blocks is not None:
                blocks.close()

    def __enter__(self) -> "CSVChunks":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        name = self._blocks.name if self._blocks is not None else "closed"
        return f"<tensorffi.io.CSVChunks of {name}, {self._chunk_rows} rows per chunk>"

    # -- reading ----------------------------------------------------------------- #

    def _feed(self, stalled: bool) -> None:
        """One block into the parser; the last one with eof. After a call that made no
        progress, blocks double (a long record is then re-scanned O(1) times)."""
        self._block = min(self._block * 2, self._opts.max_record + _MAX_BLOCK) if stalled else self._base_block
        self._fed = True
        block = self._blocks.read(self._block)
        n = int(block.shape[0])
        self._eof = n == 0
        self._fns.feed(self._handle, block, int(self._eof))

    @property
    def _base_block(self) -> int:
        cols = self._layout.cols if self._layout is not None else 8
        want = self._chunk_rows * max(cols, 1) * _ITEMSIZE[self._opts.kernel] // 8
        return min(max(want, _MIN_BLOCK), _MAX_BLOCK)

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ParseError as exc:
            raise self._parse_error(exc) from None

    def _parse_error(self, exc: NativeError) -> ParseError:
        offset, line, column, tb, te = (int(v) for v in self._errinfo)
        message = str(exc).removesuffix(" [TF_EPARSE]")
        head, sep, rest = message.partition(": ")
        if sep and head.startswith("tf_parse_"):
            message = f"{self._blocks.name}: {rest}"
        raw = np.empty(max(0, min(te, tb + 200) - tb), dtype=np.uint8)
        self._fns.bytes(self._handle, tb, out=raw)
        text = raw.tobytes().decode("utf-8", "backslashreplace")
        if ": invalid UTF-8: " in message:
            data = raw.tobytes()
            return EncodingError(message, exc.code, exc.function, line=line, column=column, offset=offset, text=text,
                                 data=data, start=min(max(offset - tb, 0), max(len(data) - 1, 0)))
        return ParseError(message, exc.code, exc.function, line=line, column=column, offset=offset, text=text)

    def _start(self) -> None:
        """Read up to the first record: header or data, the columns, where data starts."""
        fns, opts, h = self._fns, self._opts, self._handle
        max_fields = 64
        while True:
            spans = np.empty((max_fields, 3), dtype=np.int64)
            info = np.empty(6, dtype=np.int64)
            found = self._call(fns.first, h, spans=spans, info=info, errinfo=self._errinfo)[0]
            if not found:
                if self._eof:  # pragma: no cover - C finds the record, or its absence, at the end
                    raise NativeError("iter_csv: the parser wants more input after the end", -10, "iter_csv")
                self._feed(stalled=self._fed)
                continue
            if info[0] < 0 or info[2] <= max_fields:
                break
            max_fields = int(info[2])  # a wide record: its spans again, all of them (nothing is consumed)
        names: list[str] | None = None
        nfields = int(info[2])
        if info[0] < 0:  # no record at all
            ncols_in, start = 0, int(info[1])
            if opts.header is True:
                names = []
            _warn_empty(self._blocks.name, 5)
        else:
            rec = np.empty(int(info[1] - info[0]), dtype=np.uint8)
            fns.bytes(h, int(info[0]), out=rec)
            local = spans[:nfields].copy()
            local[:, :2] -= info[0]
            if opts.header is True or (opts.header == "auto" and _looks_like_header(local)):
                names = _dedup([_field_text(rec, local[i]) for i in range(nfields)])
                ncols_in, start = nfields, int(info[1])
            else:
                ncols_in, start = nfields, int(info[0])
        colmap, out_names = _column_map(opts.usecols, ncols_in, names)
        layout = _Layout(start, ncols_in, colmap, out_names, empty=info[0] < 0)
        self._begin(layout)

    def _begin(self, layout: _Layout) -> None:
        self._layout = layout
        if not layout.empty:
            self._fns.begin(self._handle, layout.start, layout.colmap, layout.cols)

    def _next_chunk(self) -> Any:
        if self._layout is None:
            self._start()
        layout, opts = self._layout, self._opts
        assert layout is not None
        if self._pending is not None:
            pending, self._pending = self._pending, None
            raise pending
        if layout.empty or self._left == 0:
            return None
        want = self._chunk_rows if self._left < 0 else min(self._chunk_rows, self._left)
        raw, result = _allocate(opts.kernel, opts.want_numpy, want, layout.cols)
        fill, h, missing = self._fns.next[opts.kernel], self._handle, opts.missing
        filled = 0
        while True:
            got = self._call(fill, h, *missing, out=raw[filled:], errinfo=self._errinfo)[0]
            filled += got
            if filled == want or self._eof:
                break
            try:
                self._feed(stalled=got == 0)
            except NativeIOError as exc:  # truncated: the rows read so far first, then the error
                if filled == 0:
                    raise
                self._pending = exc
                break
        if filled == 0:
            return None
        if self._left > 0:
            self._left -= filled
        if filled < want:
            result = result[:filled]
            if filled < want // 2:  # do not keep a mostly unused chunk alive
                result = result.copy() if opts.want_numpy else result.clone()
        return result

    def _stream_info(self) -> dict[str, int]:
        """The parser's bookkeeping (tests, benchmarks): offset consumed, its line, bytes
        buffered but not consumed, the C buffer's capacity, end of input seen, the
        largest capacity the buffer had."""
        self._fns.info(self._handle, info=self._info)
        keys = ("offset", "line", "pending", "capacity", "eof", "peak_capacity")
        return dict(zip(keys, (int(v) for v in self._info)))


def _finalize_chunks(handle: Any, blocks: _Blocks) -> None:
    try:
        handle.close()
    finally:
        blocks.close()


def iter_csv(
    source: Any,
    chunk_rows: int = 65536,
    *,
    dtype: Any = "float32",
    delimiter: str | None = ",",
    header: bool | str | None = "auto",
    skiprows: int = 0,
    usecols: int | str | Sequence[int | str] | None = None,
    comment: str | None = None,
    missing: float = float("nan"),
    max_rows: int | None = None,
    like: Any = None,
    max_record_bytes: int = MAX_RECORD_BYTES,
    na_values: str | Sequence[str] | None = None,
    keep_default_na: bool = True,
    thousands: str | None = None,
    decimal: str = ".",
) -> CSVChunks:
    """Read a numeric CSV table in chunks of rows, with memory bounded by the chunk.

    The input is read incrementally, block by block: from a path, a binary file object
    (a file, a pipe such as ``subprocess.Popen(...).stdout`` or ``open(fd, "rb")``, a
    ``gzip.open`` file, a ``BytesIO``), or bytes already in memory. Each chunk is a
    C-contiguous ``(rows, columns)`` tensor (or NumPy array) of ``chunk_rows`` rows,
    the last one fewer; chunks are never empty. ``torch.cat(list(iter_csv(src)))``
    equals ``read_csv(src)`` bit for bit, and a :class:`~tensorffi.ParseError` names
    the same line, column, byte offset and text as read_csv's would (chunks before the
    error are yielded; the error is raised by the chunk that contains it).

    The options are read_csv's and mean the same (``dtype``, float or int32/int64,
    ``delimiter``, with None for runs of white space, ``header``, ``skiprows``,
    ``usecols`` with names, ``comment``, ``missing`` (an integer fill for integer
    tables), ``max_rows``, ``like``, ``na_values``, ``keep_default_na``, ``thousands``,
    ``decimal``); the column names are the returned iterator's ``names`` attribute.
    Parsing runs in C, one thread per iterator, with the GIL released; run several
    iterators (or :class:`CSVDataset` with DataLoader workers) for more cores.

    Memory: besides the chunk being filled (and those the caller keeps), one read
    block (an eighth of a chunk's size, 64 KiB to 4 MiB) in Python and the parser's buffer in
    C: the unread part of the block and the record being read. A record that is not
    complete may take at most ``max_record_bytes`` (64 MiB): a quote that is never
    closed is then a ParseError at that quote rather than the rest of the input held
    in memory.

    The parser is C state behind a :class:`tensorffi.Handle`, freed exactly once: at
    the end of the input, on an error, by ``close()`` (or a ``with`` block) when the
    caller stops early, or at garbage collection. A path is opened and closed by the
    iterator; a file object stays open, read up to its end (or up to where the caller
    stopped, plus at most one block).

    Files that change: a regular file is read up to its size when the iterator opened
    it, as read_csv reads the size it maps; what is appended meanwhile is not read (a
    half-written last record would be). A file truncated meanwhile (ending before that
    size, or below what was already read) is a
    :class:`~tensorffi.errors.NativeIOError`, read_csv's error for the same event,
    whose message names the byte the file now ends at; the rows read completely
    before it are yielded first, then the error is raised. Pipes, FIFOs, ``/proc``
    files and other unsized inputs are read to their end. Paths that cannot be opened
    raise as in :func:`read_csv`.

    >>> import io, tensorffi.io
    >>> data = io.BytesIO(b"t,v\\n0,0.5\\n1,1.5\\n2,2.5\\n")
    >>> chunks = tensorffi.io.iter_csv(data, chunk_rows=2, dtype="float64")
    >>> [c.tolist() for c in chunks], chunks.names
    ([[[0.0, 0.5], [1.0, 1.5]], [[2.0, 2.5]]], ['t', 'v'])
    """
    rows = _chunk_rows_arg(chunk_rows)
    opts = _Options(dtype, delimiter, header, skiprows, usecols, comment, missing, max_rows, like, max_record_bytes,
                    na_values, keep_default_na, thousands, decimal)
    return CSVChunks(_open_blocks(source), rows, opts)


def _layout_of(path: str, opts: _Options) -> _Layout:
    """The header decision and columns of a file, from its first record."""
    head = CSVChunks(_open_blocks(path), 1, opts)
    try:
        with head._lock:
            head._start()
        assert head._layout is not None
        return head._layout
    finally:
        head.close()


def _worker_range(path: str, opts: _Options, layout: _Layout, worker: int, workers: int) -> tuple[int, int, int, int]:
    """Worker ``worker`` of ``workers``: its byte range [begin, end) of the data, the
    physical line at begin, and the records before it. The data is cut into equal byte
    ranges, each moved to the first record boundary at or after it as pass 1 finds it
    reading from the data start (quote-aware: a quoted field spanning lines is never
    cut), so every record is read by exactly one worker."""
    with open(path, "rb") as f:
        data = _map_file(f, 0)
    size = int(data.shape[0])
    region = size - layout.start
    offsets = np.array([layout.start + region * j // workers for j in (worker, worker + 1)], dtype=np.int64)
    bounds, rows, lines = (np.empty(2, dtype=np.int64) for _ in range(3))
    try:
        _stream_fns().bounds(data, layout.start, opts.delim, opts.comment, offsets, bounds=bounds, rows=rows,
                             lines=lines)
    except ParseError:  # pragma: no cover - tf_parse_bounds reports no parse errors
        raise
    finally:
        del data
    return int(bounds[0]), int(bounds[1]), int(lines[0]), int(rows[0])


class _CSVDatasetImpl:
    """A CSV file as a ``torch.utils.data.IterableDataset`` of chunks (see
    :func:`iter_csv`), split between DataLoader workers.

    With ``DataLoader(ds, batch_size=None, num_workers=k)``, worker i reads only its
    byte range of the file: the data is cut into k equal ranges, each moved to the
    first record boundary at or after its start as read_csv's pass 1 finds it (reading
    the data from its start, quote-aware: a quoted field spanning lines is never cut).
    So the workers' rows together are exactly the file's rows, each read once, in
    order within each worker (the DataLoader interleaves the workers' chunks). To
    find its start, a worker scans the part of the file before its range for record
    boundaries and line ends (memory-mapped, no numbers parsed: several GB/s), then
    reads its range block by block. ``max_rows`` counts rows from the start of the
    file; errors name their line, column and byte offset in the whole file.

    ``source`` is a path (splittable), or a callable returning a binary file object
    (``lambda: gzip.open(path)``, a pipe): those are read by one worker only, and with
    more workers iteration raises ValueError (a compressed stream or a pipe has no
    byte ranges to share out). Each iteration (epoch) opens the source again.

    ``batch_size=None`` passes the chunks through as they are (with a batch size, the
    DataLoader would stack chunks). NumPy chunks (``like="numpy"``) become tensors in
    the DataLoader's default conversion.

    >>> import os, tempfile, torch, tensorffi.io
    >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> with open(path, "w") as f:
    ...     _ = f.write("a,b\\n" + "".join(f"{i},{i / 2}\\n" for i in range(5)))
    >>> ds = tensorffi.io.CSVDataset(path, chunk_rows=2)
    >>> loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    >>> [tuple(c.shape) for c in loader]
    [(2, 2), (2, 2), (1, 2)]
    """

    def __init__(
        self,
        source: Any,
        chunk_rows: int = 65536,
        *,
        dtype: Any = "float32",
        delimiter: str | None = ",",
        header: bool | str | None = "auto",
        skiprows: int = 0,
        usecols: int | str | Sequence[int | str] | None = None,
        comment: str | None = None,
        missing: float = float("nan"),
        max_rows: int | None = None,
        like: Any = None,
        max_record_bytes: int = MAX_RECORD_BYTES,
        na_values: str | Sequence[str] | None = None,
        keep_default_na: bool = True,
        thousands: str | None = None,
        decimal: str = ".",
    ) -> None:
        super().__init__()
        if isinstance(source, (str, os.PathLike)):
            self.path: str | None = os.fspath(source)
            self.opener: Callable[[], Any] | None = None
        elif callable(source):
            self.path, self.opener = None, source
        else:
            raise TypeError(
                "CSVDataset source must be a path or a callable returning a binary file object (a dataset is "
                f"iterated once per epoch, and a file object only once), got {type(source).__name__}"
            )
        self.chunk_rows = _chunk_rows_arg(chunk_rows)
        self.options = dict(dtype=dtype, delimiter=delimiter, header=header, skiprows=skiprows, usecols=usecols,
                            comment=comment, missing=missing, max_rows=max_rows, like=like,
                            max_record_bytes=max_record_bytes,
                            na_values=na_values if na_values is None or isinstance(na_values, (str, dict)) else list(na_values),
                            keep_default_na=keep_default_na, thousands=thousands, decimal=decimal)
        opts = _Options(**self.options)  # bad arguments fail here, not in a worker
        # picklable spellings (spawned workers): no module objects, no iterators
        self.options.update(like="numpy" if opts.want_numpy else None, usecols=opts.usecols)

    def __iter__(self) -> CSVChunks:
        info = T.utils.data.get_worker_info()
        workers = 1 if info is None else info.num_workers
        if self.path is None:
            if workers > 1:
                raise ValueError(
                    f"CSVDataset over a stream (from {self.opener!r}) cannot be split between {workers} DataLoader "
                    "workers: pipes and compressed streams have no byte ranges; use num_workers=1 (or 0), or a path"
                )
            assert self.opener is not None
            return iter_csv(self.opener(), self.chunk_rows, **self.options)
        if workers == 1:
            return iter_csv(self.path, self.chunk_rows, **self.options)
        assert info is not None
        opts = _Options(**self.options)
        layout = _layout_of(self.path, opts)
        if layout.empty:
            begin = end = line = rows_before = 0
        else:
            begin, end, line, rows_before = _worker_range(self.path, opts, layout, info.id, workers)
        limit = -1 if opts.limit < 0 else max(0, opts.limit - rows_before)
        if layout.empty or begin >= end:
            limit = 0
        f = open(self.path, "rb", buffering=0)
        try:
            f.seek(begin)
            blocks = _FileBlocks(f, self.path, owned=True, limit=end - begin)
        except BaseException:
            f.close()
            raise
        return CSVChunks(blocks, self.chunk_rows, opts, layout=_Layout(begin, layout.ncols_in, layout.colmap,
                                                                      layout.names, layout.empty),
                         origin=begin, origin_line=line, limit=limit)


__all__ += ["iter_csv", "CSVChunks", "CSVDataset", "MAX_RECORD_BYTES"]

_dataset_lock = threading.Lock()

if TYPE_CHECKING:
    import torch

    class CSVDataset(_CSVDatasetImpl, torch.utils.data.IterableDataset):  # type: ignore[type-arg]
        pass


def _dataset_class() -> type:
    """``CSVDataset``: a torch ``IterableDataset``, so made when first named (importing
    torch then, not with this module: NumPy-only use never imports it)."""
    with _dataset_lock:
        cls = globals().get("CSVDataset")
        if cls is None:
            base = T.utils.data.IterableDataset
            cls = type("CSVDataset", (_CSVDatasetImpl, base), {
                "__module__": __name__, "__qualname__": "CSVDataset", "__doc__": _CSVDatasetImpl.__doc__})
            globals()["CSVDataset"] = cls  # (later lookups find it without __getattr__)
        return cls


def __getattr__(name: str) -> Any:
    if name == "CSVDataset":
        return _dataset_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- #
# demo                                                                         #
# --------------------------------------------------------------------------- #


def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: tab completion does not offer imports (np, torch, ...)
