# SPDX-License-Identifier: MIT
"""A pytest plugin that puts tensorffi.io.read_csv in place of numpy.loadtxt and pandas.read_csv.

Loaded with ``-p csv_peers_plugin`` (this folder on the import path) by
tests/test_io_peer_suites.py, which runs NumPy's ``lib/tests/test_loadtxt.py`` (and
the loadtxt tests of ``lib/tests/test_io.py``) and pandas' parser tests in a
subprocess. At configure time it replaces ``numpy.loadtxt`` and ``pandas.read_csv``
with adapters that translate each call into a ``read_csv`` call wherever the
options map, and skip the test (``pytest.skip`` with the reason) where they do not.

What the adapters return is always read_csv's table. The peer itself is called too,
on a copy of the same input and with its warnings swallowed, only to decide the
scope: a call whose peer result has a column read_csv does not make (strings, bools,
dates, structured or complex dtypes) is skipped as out of scope. When read_csv raises,
its error reaches the test: a test that expects a ValueError gets read_csv's
ParseError (a ValueError), and a table the peer reads but read_csv refuses fails the
test.

pandas infers a dtype per column; read_csv makes one dtype for the whole table. Where
the test gives no dtype, the adapter asks read_csv for int64 when the peer inferred
int64 for every column, and for float64 otherwise; the frames it returns are marked,
and pandas' frame and series comparisons compare them by value (``check_dtype=False``),
exactly. An explicit int32/int64 dtype (``dtype=int``, ``"i4"``, ``np.int64``) maps to
read_csv's integer tables, as float16/32/64 map to its float ones.
"""
from __future__ import annotations

import io
import os
import warnings
from typing import Any

import numpy as np
import pytest

import tensorffi.io as tio

_KINDS = {np.dtype(np.float64): "float64", np.dtype(np.float32): "float32", np.dtype(np.float16): "float16",
          np.dtype(np.int32): "int32", np.dtype(np.int64): "int64"}
_real: dict[str, Any] = {}


def _skip(reason: str) -> None:
    pytest.skip(f"read_csv adapter: {reason}")


def _peer(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, list[Any]]:
    """The peer's result (None if it raises) and its warnings, caught."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn(*args, **kwargs)
        except Exception:
            result = None
    return result, caught


def _adapted(run: Any, caught: list[Any], quiet_empty: bool = False) -> Any:
    """run(); a skipped call first re-emits the peer's warnings, so that a test's
    ``assert_produces_warning`` block lets the skip through."""
    # the peer's deprecations of its own arguments (pandas' float_precision...) pass through
    for w in caught:
        if issubclass(w.category, (DeprecationWarning, FutureWarning)):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    try:
        if not quiet_empty:  # NumPy warns on an empty input as read_csv does
            return run()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tio.EmptyDataWarning)  # pandas does not
            return run()
    except pytest.skip.Exception:
        for w in caught:
            if not issubclass(w.category, (DeprecationWarning, FutureWarning)):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        raise


def _dtype_name(dtype: Any) -> str | None:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        return None
    return _KINDS.get(dt)


def _one_char(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if isinstance(value, bytes):
        value = value.decode("latin1")
    if not isinstance(value, str) or len(value) != 1:
        _skip(f"{what}={value!r}: read_csv takes one character")
    return value


# --------------------------------------------------------------------------- #
# numpy.loadtxt                                                                #
# --------------------------------------------------------------------------- #


def _text_of(fname: Any, encoding: Any) -> tuple[bytes, Any]:
    """The input's bytes, and a fresh copy of it for the peer."""
    if isinstance(fname, (str, os.PathLike)):
        path = os.fspath(fname)
        if path.endswith((".gz", ".bz2", ".xz", ".zip")):
            _skip("compressed paths (read_csv takes a decompressing file object instead)")
        if not os.path.exists(path):
            return path, path  # read_csv's error for it
        with open(path, "rb") as f:
            data = f.read()
        return data, fname
    if isinstance(fname, io.StringIO):
        text = fname.read()
        return text.encode("utf-8"), io.StringIO(text)
    if isinstance(fname, (io.BytesIO, io.BufferedReader)):
        data = fname.read()
        return data, io.BytesIO(data)
    if isinstance(fname, io.TextIOBase):
        text = fname.read()
        return text.encode("utf-8"), io.StringIO(text)
    if isinstance(fname, (bytes, str)):
        _skip("a str/bytes source that is not a path")
    if hasattr(fname, "__iter__"):  # lines (a list, a generator)
        lines = list(fname)
        if any(not isinstance(ln, (str, bytes)) for ln in lines):
            _skip("lines that are not str or bytes")
        parts = [ln.encode("utf-8") if isinstance(ln, str) else ln for ln in lines]
        data = b"".join(p if p.endswith((b"\n", b"\r")) else p + b"\n" for p in parts)
        return data, list(lines)
    _skip(f"source of type {type(fname).__name__}")
    raise AssertionError  # unreachable


def _ndmin(a: np.ndarray, ndmin: int) -> np.ndarray:
    # numpy.lib._npyio_impl._ensure_ndmin_ndarray
    if a.ndim > ndmin:
        a = np.squeeze(a)
    if a.ndim < ndmin:
        if ndmin == 1:
            a = np.atleast_1d(a)
        elif ndmin == 2:
            a = np.atleast_2d(a).T
    return a


def loadtxt(fname: Any, dtype: Any = float, comments: Any = "#", delimiter: Any = None, converters: Any = None,
            skiprows: Any = 0, usecols: Any = None, unpack: bool = False, ndmin: int = 0, encoding: Any = None,
            max_rows: Any = None, *, quotechar: Any = None, like: Any = None) -> Any:
    try:
        data, copy = _text_of(fname, encoding)
    except pytest.skip.Exception:
        data, copy = None, fname
    if hasattr(usecols, "__iter__") and not isinstance(usecols, (str, bytes)):
        usecols = list(usecols)
    theirs, caught = _peer(_real["loadtxt"], copy, dtype=dtype, comments=comments, delimiter=delimiter,
                           converters=converters, skiprows=skiprows, usecols=usecols, unpack=unpack, ndmin=ndmin,
                           encoding=encoding, max_rows=max_rows, quotechar=quotechar, like=like)
    return _adapted(lambda: _loadtxt(data, theirs, dtype, comments, delimiter, converters, skiprows, usecols, unpack,
                                     ndmin, encoding, max_rows, quotechar, like), caught)


def _loadtxt(data: Any, theirs: Any, dtype: Any, comments: Any, delimiter: Any, converters: Any, skiprows: Any,
             usecols: Any, unpack: bool, ndmin: int, encoding: Any, max_rows: Any, quotechar: Any, like: Any) -> Any:
    if data is None:
        _skip("a source the adapter cannot copy")
    if like is not None:
        _skip("like= (array-function dispatch)")
    if converters is not None:
        _skip("converters (Python functions per field)")
    kernel = _dtype_name(dtype)
    if kernel is None:
        _skip(f"dtype={dtype!r}: read_csv makes float16/32/64 and int32/64 tables")
    delim = _one_char(delimiter, "delimiter")  # None (loadtxt's default): runs of white space, as read_csv's None
    if isinstance(comments, (list, tuple)) and len(comments) == 0:
        comments = None
    comment = _one_char(comments, "comments")
    if quotechar not in (None, '"'):
        _skip(f"quotechar={quotechar!r}: read_csv's quote is '\"'")
    if encoding not in (None, "utf-8", "utf8", "UTF-8", "bytes"):
        _skip(f"encoding={encoding!r}: read_csv reads UTF-8")
    if ndmin not in (0, 1, 2):  # the adapter's own argument
        raise ValueError(f"Illegal value of ndmin keyword: {ndmin}")
    if quotechar is None and isinstance(data, bytes) and b'"' in data:
        _skip("quotes in the data with quotechar=None: read_csv always reads '\"' as a quote")
    if theirs is not None and _dtype_name(getattr(theirs, "dtype", None)) is None:
        _skip("the peer's result is not a float or int32/64 table")
    table = tio.read_csv(data, dtype=kernel, delimiter=delim, header=False, skiprows=skiprows, usecols=usecols,
                         comment=comment, max_rows=max_rows, like="numpy")
    if table.shape == (0, 0):
        table = table.reshape(0, 1)
    table = _ndmin(table, ndmin)
    return table.T if unpack else table


# --------------------------------------------------------------------------- #
# pandas.read_csv                                                              #
# --------------------------------------------------------------------------- #

_PANDAS_IGNORED = {"engine", "low_memory", "memory_map", "float_precision", "na_filter", "skip_blank_lines",
                   "quotechar", "doublequote", "encoding", "skipinitialspace", "index_col", "quoting"}
_PANDAS_DEFAULTS = {"na_filter": True, "skip_blank_lines": True, "quotechar": '"', "doublequote": True,
                    "skipinitialspace": False, "index_col": None, "quoting": 0}


def read_csv(filepath_or_buffer: Any, *args: Any, **kw: Any) -> Any:
    src = filepath_or_buffer
    data: Any = None
    copy: Any = src
    if isinstance(src, (str, os.PathLike)) and os.path.exists(src):
        with open(src, "rb") as f:
            data = f.read()
    elif isinstance(src, io.StringIO):
        text = src.read()
        data, copy = text.encode("utf-8"), io.StringIO(text)
    elif isinstance(src, io.BytesIO):
        data = src.read()
        copy = io.BytesIO(data)
    theirs, caught = _peer(_real["read_csv"], copy, *args, **kw)
    return _adapted(lambda: _read_csv(src, data, theirs, args, kw), caught, quiet_empty=True)


def _read_csv(src: Any, data: Any, theirs: Any, args: Any, kw: Any) -> Any:
    import pandas as pd

    if data is None:
        _skip(f"source of type {type(src).__name__}")
    if isinstance(src, (str, os.PathLike)) and os.fspath(src).endswith((".gz", ".bz2", ".xz", ".zip", ".zst", ".tar")):
        _skip("compressed files")
    if args:
        _skip("positional options")
    if kw.get("engine") == "pyarrow":
        _skip("engine='pyarrow' (the same tests run for the C and Python engines)")
    for key in ("memory_map", "low_memory"):
        if key in kw and not isinstance(kw[key], bool):
            _skip(f"{key} that is not a bool (pandas checks its own argument)")
    whitespace = kw.get("delim_whitespace") or kw.get("delimiter", kw.get("sep")) == r"\s+"
    for key, default in _PANDAS_DEFAULTS.items():
        if key in kw and not (kw[key] is default or kw[key] == default):
            if key == "index_col" and kw[key] is False:
                continue
            if key == "skipinitialspace" and whitespace:
                continue  # blanks separate fields: there is no initial space to skip
            if key == "encoding" and str(kw[key]).lower().replace("-", "") in ("utf8",):
                continue
            _skip(f"{key}={kw[key]!r}")
    if "encoding" in kw and kw["encoding"] is not None and str(kw["encoding"]).lower().replace("-", "") != "utf8":
        _skip(f"encoding={kw['encoding']!r}: read_csv reads UTF-8")
    known = _PANDAS_IGNORED | {"sep", "delimiter", "header", "usecols", "dtype", "skiprows", "nrows", "na_values",
                               "keep_default_na", "thousands", "decimal", "comment", "delim_whitespace"}
    other = sorted(set(kw) - known)
    if other:
        _skip(f"options read_csv lacks: {', '.join(other)}")
    sep = kw.get("delimiter", kw.get("sep", ","))
    if sep is None or sep is pd.api.extensions.no_default:
        sep = ","
    if kw.get("delim_whitespace"):  # pandas < 3: the same as sep=r"\s+"
        sep = r"\s+"
    if sep == r"\s+":
        sep = None  # runs of white space: read_csv's delimiter=None (pandas splits on spaces and tabs only)
    elif not isinstance(sep, str) or len(sep) != 1 or sep == " ":
        _skip(f"sep={sep!r}: read_csv takes one character, or runs of white space (r'\\s+'); no other regex")
    header = kw.get("header", "infer")
    if header == "infer" or header == 0:
        head: Any = True
    elif header is None:
        head = False
    else:
        _skip(f"header={header!r}")
    dtype = kw.get("dtype")
    kernel = "float64" if dtype is None else _dtype_name(dtype) if not isinstance(dtype, dict) else None
    if kernel is None:
        _skip(f"dtype={dtype!r}")
    if dtype is None and isinstance(theirs, pd.DataFrame) and len(theirs.columns) > 0 and \
            all(t == np.dtype(np.int64) for t in theirs.dtypes):
        kernel = "int64"  # the peer inferred integers everywhere: read them exactly
    usecols = kw.get("usecols")
    if usecols is not None:
        if callable(usecols) or isinstance(usecols, str):
            _skip("usecols as a callable or a string")
        usecols = list(usecols)
        if len(set(map(type, usecols))) > 1:
            _skip("usecols mixing names and indices")
        if any(isinstance(u, (int, np.integer)) and u < 0 for u in usecols):
            _skip("negative usecols (pandas refuses them)")
    skiprows = kw.get("skiprows", 0)
    if skiprows is None:
        skiprows = 0
    if not isinstance(skiprows, (int, np.integer)) or isinstance(skiprows, bool):
        _skip(f"skiprows={skiprows!r} (only a count maps)")
    nrows = kw.get("nrows")
    na_values = kw.get("na_values")
    keep = kw.get("keep_default_na", True)
    if isinstance(na_values, dict):
        _skip("na_values per column")
    if na_values is None and keep:
        na_values = ()  # pandas' default words
    elif na_values is not None and not isinstance(na_values, (str, int, float)):
        na_values = list(na_values)
        if any(not isinstance(w, (str, int, float)) or isinstance(w, bool) for w in na_values):
            _skip("na_values holding non-strings")
    comment = kw.get("comment")
    thousands, decimal = kw.get("thousands"), kw.get("decimal", ".")
    if thousands == sep or (sep is None and isinstance(thousands, str) and thousands.isspace()):
        thousands = None  # pandas splits the fields first: a separator that is the delimiter never applies

    if theirs is not None:
        if not isinstance(theirs, pd.DataFrame):
            _skip("the peer returns an iterator")
        if not all(pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t) for t in theirs.dtypes):
            _skip("the peer reads text, bool or date columns (read_csv reads numbers)")
        if not isinstance(theirs.index, pd.RangeIndex):
            _skip("the peer infers an index column")
        if isinstance(theirs.columns, pd.MultiIndex):
            _skip("a MultiIndex header")

    table, names = tio.read_csv(data, dtype=kernel, delimiter=sep, header=head, skiprows=int(skiprows),
                                usecols=usecols, comment=comment, max_rows=nrows, na_values=na_values,
                                keep_default_na=keep, thousands=thousands, decimal=decimal, like="numpy",
                                return_names=True)
    if names is None:
        columns: Any = pd.RangeIndex(table.shape[1])
    else:
        columns = pd.Index(names, dtype=object)
    frame = pd.DataFrame(table, columns=columns)
    frame.attrs["tensorffi"] = True
    return frame


def _by_value(original: Any) -> Any:
    def compare(left: Any, right: Any, *args: Any, **kwargs: Any) -> Any:
        ours = [getattr(x, "attrs", {}).get("tensorffi") for x in (left, right)]
        if any(ours):
            kwargs["check_dtype"] = False
            kwargs.setdefault("check_column_type", False)
            kwargs.setdefault("check_index_type", False)
        return original(left, right, *args, **kwargs)

    return compare


def pytest_configure(config: pytest.Config) -> None:
    import numpy

    _real["loadtxt"] = numpy.loadtxt
    numpy.loadtxt = loadtxt
    try:
        import pandas
        import pandas._testing as tm
    except ImportError:  # pragma: no cover - pandas is a test dependency
        return
    _real["read_csv"] = pandas.read_csv
    pandas.read_csv = read_csv
    tm.assert_frame_equal = _by_value(tm.assert_frame_equal)


def pytest_report_header(config: pytest.Config) -> str:
    return "numpy.loadtxt, pandas.read_csv: tensorffi.io.read_csv through tests/csv_peers_plugin.py"
