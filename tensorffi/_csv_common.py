# SPDX-License-Identifier: MIT
"""What read_csv, iter_csv and CSVDataset share: the bound parse functions, the
argument checks (delimiter, comment, dtype, usecols, the reader options), the error
types, the sources (paths, files, buffers, tensors) and the mapping of files, the
column map and the output allocation. tensorffi.io holds read_csv, _csv_stream the
streaming reader; this module imports neither."""
from __future__ import annotations

import mmap
import operator
import os
import stat as _stat
import re
import sys
import warnings
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ._callbacks import CallbackScope
from ._lib import lib, native
from ._torch import T
from .errors import (
    ArgumentOverflowError,
    ArgumentValueError,
    TensorFFIError,
    NativeError,
    NativeIOError,
    ParseError,
    SourceIsADirectoryError,
    SourceNotFoundError,
    SourcePermissionError,
)

if TYPE_CHECKING:
    import torch

# Bound native functions (csrc/parse*.c; declared in cdefs/parse.h).
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


class OptionValueError(ArgumentValueError):
    """An option (or a source) read_csv, iter_csv and CSVDataset cannot use: a value out
    of range (``skiprows=-1``, ``delimiter=",,"``), a column usecols does not find."""


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
    the _x kernels read (tf_xopts in csrc/parse_internal.h). ``integer``: for an int32/int64
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
                raise OptionTypeError("na_values per column (a dict) is not supported: give one list for every column")
            items = [na_values] if isinstance(na_values, (str, int, float)) else list(na_values)
            for w in items:
                if isinstance(w, bool) or not isinstance(w, (str, int, float, np.integer, np.floating)):
                    raise OptionTypeError(f"na_values must hold strings (or numbers), got {w!r}")
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
                raise OptionValueError(f"na_values: {w!r} cannot be a field (a NUL, a line end, or over 255 bytes)")
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
            raise OptionTypeError(f"{what} must be a one-character string, got {ch!r}")
        if delim == _WHITESPACE and len(ch) == 1 and _blank(ch):
            raise ControlCharacterError(f"the control characters {what} and delimiter are incompatible: {what} is "
                                        f"{ch!r}, and delimiter=None splits fields at white space")
        if len(ch) != 1 or ord(ch) > 126 or (ord(ch) < 32):
            raise OptionValueError(f"{what} must be one ASCII character, got {ch!r}")
        if ord(ch) in (delim, comment):
            raise ControlCharacterError(f"the control characters {what} and delimiter or comment are incompatible: "
                                        f"both are {ch!r}")
        if ch.isdigit() or ch in '"+-eE' or (what == "decimal" and ch == " "):
            raise OptionValueError(f"{what} cannot be {ch!r}: it is part of numbers, quoting, the delimiter or comments")
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


def _call(fn: Callable[..., Any], where: tuple[np.ndarray | bytes, str, np.ndarray], *args: Any,
          scope: CallbackScope | None = None, **kwargs: Any) -> Any:
    """Call a parse kernel; a TF_EPARSE status becomes a ParseError with its position.

    ``where`` is (input buffer, its name, the errinfo array the kernel fills)."""
    buf, name, errinfo = where  # C fills errinfo whenever it reports TF_EPARSE
    try:
        return scope.call(fn, *args, **kwargs) if scope is not None else fn(*args, **kwargs)
    except ParseError as exc:
        raise _parse_error(exc, buf, name, errinfo) from None


_NOT_A_NUMBER = re.compile(r'is not a number: "(.*)"$')


def na_word_hint(message: str) -> str:
    """``message``, with the road to take where the field that is not a number is one of
    pandas' NA words (``"NA"``, ``"NULL"``, ``"n/a"``...): read_csv reads them only when
    asked (``na_values=()``), as NumPy's loadtxt does not read them at all."""
    m = _NOT_A_NUMBER.search(message)
    if m is None or m.group(1) not in NA_VALUES:
        return message
    return (f"{message}: {m.group(1)!r} is one of pandas' NA words; pass na_values=() to read pandas' NA words "
            f"as missing (NaN), or na_values=[{m.group(1)!r}] for this one")


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
    return ParseError(na_word_hint(message), exc.code, exc.function, line=line, column=column, offset=offset,
                      text=text)


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
        raise OptionValueError(f"usecols: no column named {missing[0]!r} (Usecols do not match columns, columns expected "
                         f"but not found: {missing}); the columns are {names}")
    for u in usecols:
        if isinstance(u, str):
            if names is None:
                raise OptionValueError(f"usecols names a column ({u!r}), but the input has no header")
            hits = [i for i, nm in enumerate(names) if nm == u]
            if len(hits) > 1:
                raise OptionValueError(f"usecols: {len(hits)} columns are named {u!r}; select them by index")
            picked.append(hits[0])
        elif _index_like(u):
            i = operator.index(u)
            if not -(1 << 63) <= i < 1 << 63:
                raise ArgumentOverflowError(f"usecols: column {i} does not fit in a 64-bit integer")
            if not -ncols_in <= i < ncols_in:
                raise OptionValueError(f"usecols: column {i} is out of range for {ncols_in} column(s)")
            picked.append(i % ncols_in)
        else:
            raise OptionTypeError(f"usecols must hold column indices or names, got {u!r}")
    if len(set(picked)) != len(picked):
        raise OptionValueError(f"usecols selects a column twice: {list(usecols)}")
    colmap = np.full(ncols_in, -1, dtype=np.int64)
    for k, i in enumerate(picked):
        colmap[i] = k
    return colmap, None if names is None else [names[i] for i in picked]


def _usecols_arg(usecols: Any) -> Any:
    """``usecols`` as read_csv and iter_csv keep it: one index or name as given, any
    other iterable (a generator, a ``map``, a ``range``, a set of indices) as a list,
    read once, here, before anything looks at it."""
    if usecols is None or isinstance(usecols, (int, np.integer, str)) or _index_like(usecols):
        return usecols
    if isinstance(usecols, (list, tuple)):
        return usecols
    try:
        return list(usecols)
    except TypeError:
        raise OptionTypeError(f"usecols must be a column index or name, or an iterable of them, got "
                        f"{type(usecols).__name__} {usecols!r}") from None


def _index_like(u: Any) -> bool:
    """A column index: an integer (not a bool), or an object that converts to one
    (``__index__``, as NumPy's loadtxt takes it), not a sequence."""
    return not isinstance(u, (bool, np.bool_, str)) and not hasattr(u, "__len__") and hasattr(type(u), "__index__")


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
            raise OptionTypeError("read_csv: dtype 'int' is ambiguous (torch.int is int32, NumPy's 'int' is int64): "
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
        raise OptionTypeError(f"read_csv: dtype must be float32, float64, float16, bfloat16, int32 or int64, got {dtype!r}")
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
            raise OptionTypeError(f"missing must be a number, got {missing!r}") from None
    name = _NUMPY[kernel].name
    if isinstance(missing, (int, np.integer)):
        value = int(missing)
    else:
        try:
            as_float = float(missing)
        except (TypeError, ValueError):
            raise OptionTypeError(f"missing must be a number, got {missing!r}") from None
        if as_float != as_float:
            return (0, 0)
        if not as_float.is_integer():
            raise OptionValueError(f"missing={missing!r} cannot fill an {name} table: give an integer (or leave missing "
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
    raise OptionValueError(f"like must be 'torch' or 'numpy' (or the module, or an array of that kind), got {like!r}")


def _char_code(ch: Any, what: str) -> int:
    if not isinstance(ch, str):
        raise OptionTypeError(f"{what} must be a one-character string, got {ch!r}")
    if len(ch) != 1 or ord(ch) > 127:
        raise OptionValueError(f"{what} must be one ASCII character, got {ch!r}")
    if ch == "\0":
        raise OptionValueError(f"{what} cannot be NUL ('\\0'): NUL bytes are refused in the input")
    if ch in "\r\n":
        raise ControlCharacterError(f"{what}: the control character {ch!r} cannot be a newline")
    if ch in '"\r\n' or ch.isalnum() or ch in ".+-":
        raise OptionValueError(f"{what} cannot be {ch!r}: it is part of quoting, line ends or numbers")
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
        raise OptionValueError(f"comment cannot be a blank ({comment!r}): blanks around fields are ignored")
    if code == delim:
        raise ControlCharacterError(f"the control characters delimiter and comment are incompatible: both are "
                                    f"{comment!r}")
    return code


def _count_arg(value: Any, what: str) -> int:
    # typed as NumPy types them: a float (3.0) or a bool is a TypeError, a negative count a ValueError
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise OptionTypeError(f"{what} must be a non-negative integer, got {value!r}")
    if value < 0:
        raise OptionValueError(f"{what} must be a non-negative integer, got {value!r}")
    if value > (1 << 63) - 1:
        raise OptionValueError(f"{what} must be at most 2**63 - 1, got {value!r}")
    return int(value)


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
