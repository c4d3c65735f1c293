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
input under a SIGBUS/SIGSEGV guard (see csrc/parse_guard.c), and a tensor source's
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
csrc/parse_stream.c); :class:`CSVDataset` shares a file out between DataLoader
workers by byte ranges cut at record boundaries.

>>> import tensorffi.io
>>> tensorffi.io.read_csv(b"x,y\\n1.5,2\\n3,-4e-1\\n", dtype="float64").tolist()
[[1.5, 2.0], [3.0, -0.4]]
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ._bridge import lower as _lower
from ._callbacks import CallbackScope
from ._threads import resolve_threads
from ._torch import T
from .errors import ParseError
from ._csv_common import (
    ControlCharacterError,
    EmptyDataWarning,
    EncodingError,
    NA_VALUES,
    OptionTypeError,
    OptionValueError,
    _BOM,
    _HeldStorage,
    _INT_RANGE,
    _KERNELS,
    _Progress,
    _RAW,
    _ReaderOptions,
    _TORCH,
    _allocate,
    _call,
    _check_keep_default_na,
    _column_map,
    _comment_code,
    _count,
    _count_arg,
    _dedup,
    _delimiter_code,
    _field_text,
    _fill,
    _fill_x,
    _flags_under,
    _kernel_for,
    _looks_like_header,
    _missing_args,
    _parse_error,
    _record,
    _small,
    _small_x,
    _usecols_arg,
    _wants_numpy,
    _warn_empty,
)
from ._csv_stream import (
    CSVChunks,
    FileChangedWarning,
    MAX_RECORD_BYTES,
    _Blocks,
    _CSVDatasetImpl,
    _Options,
    _as_array,
    _dataset_class,
    _read_stream,
    iter_csv,
)

__all__ = ["read_csv", "ParseError", "EncodingError", "ControlCharacterError", "OptionTypeError", "OptionValueError",
           "EmptyDataWarning",
           "FileChangedWarning", "NA_VALUES"]

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
            offending token or record). The first bad record is reported, its errors
            in the order pandas and NumPy find them (tokenize, count, convert): its
            first syntax error (quotes, NUL bytes, invalid UTF-8), else its number of
            fields, else its first value that is not of the dtype.
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
        raise OptionTypeError("NumPy has no bfloat16 dtype: use like=torch (the default) for bfloat16")
    delim = 44 if delimiter == "," else _delimiter_code(delimiter)
    comment_code = -1 if comment is None else _comment_code(comment, delim)
    if header is None:
        header = False
    if header is not True and header is not False and header != "auto":
        raise OptionValueError(f"header must be 'auto', True or False, got {header!r}")
    if type(skiprows) is not int or not 0 <= skiprows <= (1 << 63) - 1:
        skiprows = _count_arg(skiprows, "skiprows")
    usecols = _usecols_arg(usecols)  # an iterator is read once, here
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
        raise OptionTypeError(f"progress must be True, False, None or a callable(done, total), got {progress!r}")
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


def _chunk_bytes(region: int, nthreads: int) -> int:
    if _CHUNK_BYTES is not None:
        return max(1, int(_CHUNK_BYTES))
    if region <= 0:
        return 1
    per = -(-region // (4 * nthreads))  # about four chunks per thread, for balance
    return min(max(per, _MIN_CHUNK), _MAX_CHUNK)


def _as_buffer(source: Any) -> tuple["np.ndarray | _Blocks", str, "_HeldStorage | None"]:
    """The input as a 1-D uint8 array (memory-mapped for files), a name for errors, and
    for a tensor source its storage, held and checked (C must not read freed memory).
    An input without a size to map (a pipe, a device, a /proc file, a GzipFile) comes
    back as its blocks, to be streamed."""
    buf, name = _as_array(source, streams=True)
    held = _HeldStorage(source) if isinstance(source, T.Tensor) else None
    return buf, name, held


__all__ += ["iter_csv", "CSVChunks", "CSVDataset", "MAX_RECORD_BYTES"]
# The public classes and functions defined beside read_csv are tensorffi.io's (their repr, and pickle
# in DataLoader workers, name the module users import).
for _cls in (EncodingError, ControlCharacterError, OptionTypeError, OptionValueError, EmptyDataWarning, FileChangedWarning, CSVChunks, iter_csv):
    _cls.__module__ = __name__
del _cls

if TYPE_CHECKING:
    import torch

    class CSVDataset(_CSVDatasetImpl, torch.utils.data.IterableDataset):  # type: ignore[type-arg]
        pass


def __getattr__(name: str) -> Any:
    if name == "CSVDataset":
        return _dataset_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- #
# demo                                                                         #
# --------------------------------------------------------------------------- #


def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: tab completion does not offer imports (np, torch, ...)
