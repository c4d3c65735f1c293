# SPDX-License-Identifier: MIT
"""Streaming CSV: :func:`iter_csv` (a C parser behind a :class:`tensorffi.Handle`,
fed blocks of a file, pipe or compressed stream and writing whole rows;
csrc/parse_stream.c), read_csv's reading of inputs without a size, and
:class:`CSVDataset`'s byte ranges for DataLoader workers. Public through
tensorffi.io; built on _csv_common."""
from __future__ import annotations

import io as _stdio
import os
import stat as _stat
import threading
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ._lib import native
from ._torch import T
from .errors import NativeError, NativeIOError, ParseError
from ._csv_common import (
    EncodingError,
    OptionTypeError,
    OptionValueError,
    na_word_hint,
    _INT_RANGE,
    _KERNEL_NAMES,
    _Progress,
    _ReaderOptions,
    _allocate,
    _check_keep_default_na,
    _column_map,
    _comment_code,
    _count_arg,
    _dedup,
    _delimiter_code,
    _field_text,
    _file_size,
    _index_like,
    _usecols_arg,
    _kernel_for,
    _looks_like_header,
    _map_file,
    _missing_args,
    _open_source,
    _wants_numpy,
    _warn_empty,
)

#: Rows per chunk when read_csv streams an input without a size (then concatenated).
_STREAM_ROWS = 65536

#: Bytes of a file's start and end a snapshot keeps, to tell an append from a rewrite.
_SAMPLE = 4096


class FileChangedWarning(UserWarning):
    """A file grew after a :class:`CSVDataset` took its snapshot: the workers read the
    bytes it had then (``ds.refresh()`` takes a new snapshot)."""


@dataclass(frozen=True)
class _Snapshot:
    """What a regular file was when a reader opened it: its identity (device, inode),
    size, modification time and a copy of its first and last bytes. :meth:`check` tells
    the file as it is now from it: the same, appended to (the snapshot's bytes are still
    there), or changed under the reader (truncated, rewritten in place as logrotate's
    copytruncate does, replaced by another file at the path)."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    head: bytes
    tail: bytes

    @classmethod
    def take(cls, fd: int) -> _Snapshot | None:
        """The snapshot of the open file ``fd``; None for what has no size (a pipe, /proc)."""
        st = os.fstat(fd)
        if not _stat.S_ISREG(st.st_mode) or st.st_size <= 0:
            return None
        k = min(_SAMPLE, st.st_size)
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, os.pread(fd, k, 0),
                   os.pread(fd, k, st.st_size - k))

    def holds(self, fd: int, size: int) -> bool:
        """Whether the file open as ``fd``, now ``size`` bytes, still starts with the
        snapshot's first bytes and, if it is not shorter, has its last ones in place."""
        n = min(len(self.head), size)
        if os.pread(fd, n, 0) != self.head[:n]:
            return False
        t = len(self.tail)
        return size < self.size or os.pread(fd, t, self.size - t) == self.tail

    def check(self, fd: int, name: str, fn: str) -> int:
        """Raise :class:`~tensorffi.errors.NativeIOError` if the file at the path, open
        as ``fd``, is not the snapshot's any more (replaced, truncated, rewritten); else
        return how many bytes were appended."""
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (self.dev, self.ino):
            raise NativeIOError(f"{name}: the file was replaced (another file is at the path now, inode {st.st_ino} "
                                f"where it was {self.ino}) [TF_EIO]", -9, fn)
        if st.st_size == self.size and st.st_mtime_ns == self.mtime_ns:
            return 0
        if st.st_size < self.size:
            raise NativeIOError(f"{name}: the file was truncated while it was read: it now ends at byte "
                                f"{st.st_size}, but it had {self.size} bytes when it was opened [TF_EIO]", -9, fn)
        if not self.holds(fd, st.st_size):
            raise NativeIOError(f"{name}: the file was rewritten while it was read (its first or last bytes of "
                                f"the {self.size} it had when it was opened changed: truncated and written again, "
                                f"as logrotate's copytruncate does) [TF_EIO]", -9, fn)
        return st.st_size - self.size


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
        if not source.contiguous:
            raise OptionTypeError(f"a memoryview source must be contiguous text, got one of shape {source.shape} and "
                                  f"strides {source.strides}: pass bytes(view)")
        view = source if source.ndim == 1 and source.format in ("B", "b", "c") else source.cast("B")
        return np.frombuffer(view, dtype=np.uint8), "<bytes>"
    if isinstance(source, np.ndarray):
        if source.dtype != np.uint8 or source.ndim != 1:
            raise OptionTypeError(f"an array source must be 1-D uint8 text, got dtype {source.dtype}, shape {source.shape}")
        return np.ascontiguousarray(source), "<array>"
    if isinstance(source, T.Tensor):
        if source.dtype != T.uint8 or source.dim() != 1 or source.device.type != "cpu":
            raise OptionTypeError(f"a tensor source must be a 1-D uint8 CPU tensor, got {source.dtype}, {tuple(source.shape)}")
        return source.contiguous().numpy(), "<tensor>"
    if isinstance(source, _stdio.TextIOBase):
        raise OptionTypeError("read_csv needs a binary file object: open the file with mode 'rb'")
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
            raise OptionTypeError(f"read_csv needs a binary file object, but read() returned {type(data).__name__}")
        return np.frombuffer(data, dtype=np.uint8), name
    raise OptionTypeError(
        "read_csv source must be a path, bytes, bytearray, memoryview, a uint8 array or a binary file object, "
        f"got {type(source).__name__}"
    )


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
    """The native stream functions (csrc/parse_stream.c), bound on first use."""

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
            raise OptionTypeError("NumPy has no bfloat16 dtype: use like=torch (the default) for bfloat16")
        self.delim = _delimiter_code(delimiter)
        self.comment = -1 if comment is None else _comment_code(comment, self.delim)
        if header is None:
            header = False
        if header is not True and header is not False and header != "auto":
            raise OptionValueError(f"header must be 'auto', True or False, got {header!r}")
        self.header = header
        self.skiprows = _count_arg(skiprows, "skiprows")
        self.usecols = _usecols_arg(usecols)  # an iterator is read once, here
        self.missing = _missing_args(self.kernel, missing)  # the kernel's arguments
        self.limit = -1 if max_rows is None else _count_arg(max_rows, "max_rows")
        self.max_record = _count_arg(max_record_bytes, "max_record_bytes")
        if self.max_record < 1:
            raise OptionValueError("max_record_bytes must be at least 1")
        self.xo = None
        if na_values is not None or thousands is not None or decimal != ".":
            self.xo = _ReaderOptions(na_values, keep_default_na, thousands, decimal, self.delim, self.comment,
                                     self.kernel in _INT_RANGE)
        elif keep_default_na is not True:
            _check_keep_default_na(keep_default_na)


def _chunk_rows_arg(chunk_rows: Any) -> int:
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
        raise OptionValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
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

    def __init__(self, f: Any, name: str, owned: bool, limit: int | None = None,
                 snapshot: _Snapshot | None = None) -> None:
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
        self.snapshot: _Snapshot | None = None
        self.resume = b""  # the last bytes delivered: a rewrite shows there first
        raw = f.raw if isinstance(f, (_stdio.BufferedReader, _stdio.BufferedRandom)) else f
        if isinstance(raw, _stdio.FileIO) and not raw.closed:
            self.snapshot = snapshot if snapshot is not None else _Snapshot.take(raw.fileno())
            if self.snapshot is not None:
                size = self.snapshot.size
                self.start, self.size = f.tell(), size
                sized = max(0, size - self.start)
                self.left = sized if self.left is None else min(self.left, sized)

    def read(self, n: int) -> Any:
        if self.left is not None:
            n = min(n, self.left)
            if n <= 0:
                return self.scratch[:0]
        if self.snapshot is not None:
            self._unchanged()
        block = self._read(n)
        got = int(block.shape[0])
        if got == 0 and self.size >= 0 and self.left:
            self._truncated()
        self.delivered += got
        if self.left is not None:
            self.left -= got
        if self.snapshot is not None and got:
            self.resume = (self.resume + block[-256:].tobytes())[-256:]
        return block

    def _unchanged(self) -> None:
        """Before each read of a regular file, one fstat: if its size or mtime moved,
        the bytes it had at open must still be there (its first bytes, the bytes just
        before the resume point, and, if it is not shorter now, its last ones). A
        mismatch means the file was rewritten (logrotate's copytruncate, an editor
        saving in place): a NativeIOError, not the new file's rows as if they
        continued the old. A file that is only shorter is read up to where it ends
        now, which is the truncation error (:meth:`_truncated`)."""
        snap = self.snapshot
        assert snap is not None
        fd, at = self.f.fileno(), self.start + self.delivered
        st = os.fstat(fd)
        if st.st_size == snap.size and st.st_mtime_ns == snap.mtime_ns:
            return
        if st.st_size < at:
            return  # below the reader: the next read finds the end, and says so
        k = len(self.resume)
        if not (snap.holds(fd, st.st_size) and (not k or os.pread(fd, k, at - k) == self.resume)):
            raise NativeIOError(f"{self.name}: the file was rewritten while it was read (bytes it had when it was "
                                f"opened, {snap.size} then, changed: truncated and written again, as logrotate's "
                                f"copytruncate does; the reader was at byte {at}) [TF_EIO]", -9, "iter_csv")

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
                raise OptionValueError(f"iter_csv: {self.name} is a non-blocking stream with no data ready; "
                                 "iter_csv needs blocking reads")
            block = self.scratch[:got]
        else:
            data = self.f.read(n)
            if not isinstance(data, (bytes, bytearray)):
                raise OptionTypeError(f"iter_csv needs a binary file object, but read() returned {type(data).__name__}")
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
            raise OptionTypeError(f"a tensor source must be a 1-D uint8 CPU tensor, got {source.dtype}, {tuple(source.shape)}")
        return _MemoryBlocks(source if source.is_contiguous() else source.contiguous(), "<tensor>")
    if isinstance(source, (bytes, bytearray, memoryview, np.ndarray)):
        arr, name = _as_array(source)
        return _MemoryBlocks(arr, name)
    if isinstance(source, _stdio.TextIOBase):
        raise OptionTypeError("iter_csv needs a binary file object: open the file with mode 'rb'")
    if hasattr(source, "read"):
        name = "<BytesIO>" if isinstance(source, _stdio.BytesIO) else str(getattr(source, "name", "<file>"))
        return _FileBlocks(source, name, owned=False)
    raise OptionTypeError(
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
                    raise OptionValueError("iter_csv: the iterator was closed before its header was read")
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
        return ParseError(na_word_hint(message), exc.code, exc.function, line=line, column=column, offset=offset,
                          text=text)

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
    before it are yielded first, then the error is raised. A file rewritten meanwhile
    (truncated and written again, as logrotate's ``copytruncate`` does, or saved in
    place) is a NativeIOError too, never the new file's rows as if they continued the
    old: before each block the reader checks the file's size and modification time
    (one ``fstat``), and where they moved, that the bytes it had at open are still
    there (its first and last 4 KiB, and the 256 bytes before the resume point).
    Pipes, FIFOs, ``/proc``
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


def _layout_of(path: str, opts: _Options, snapshot: _Snapshot | None = None) -> _Layout:
    """The header decision and columns of a file, from its first record (of the
    snapshot's bytes, where one is given)."""
    blocks = _open_blocks(path)
    if snapshot is not None and isinstance(blocks, _FileBlocks):
        blocks.close()
        blocks = _FileBlocks(_open_source(path, "CSVDataset"), path, owned=True, snapshot=snapshot)
    head = CSVChunks(blocks, 1, opts)
    try:
        with head._lock:
            head._start()
        assert head._layout is not None
        return head._layout
    finally:
        head.close()


def _worker_range(path: str, opts: _Options, layout: _Layout, worker: int, workers: int,
                  snapshot: _Snapshot | None = None) -> tuple[int, int, int, int]:
    """Worker ``worker`` of ``workers``: its byte range [begin, end) of the data, the
    physical line at begin, and the records before it. The data is cut into equal byte
    ranges, each moved to the first record boundary at or after it as pass 1 finds it
    reading from the data start (quote-aware: a quoted field spanning lines is never
    cut), so every record is read by exactly one worker."""
    with open(path, "rb") as f:
        # the snapshot's size: every worker cuts the same bytes, however the file grew
        data = _map_file(f, 0, snapshot.size) if snapshot is not None else _map_file(f, 0)
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

    The workers agree on one snapshot of the file, taken when the dataset is made (in
    the parent process): its size, identity and first and last bytes. A file appended
    to since is read up to that size, in every worker (with a
    :class:`~tensorffi.io.FileChangedWarning`); one truncated, rewritten or replaced by
    another file since is a NativeIOError in each worker, which the DataLoader
    re-raises. ``refresh()`` takes a new snapshot (between epochs, to read a file
    that grew).

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
            raise OptionTypeError(
                "CSVDataset source must be a path or a callable returning a binary file object (a dataset is "
                f"iterated once per epoch, and a file object only once), got {type(source).__name__}"
            )
        self.chunk_rows = _chunk_rows_arg(chunk_rows)
        self.options = dict(dtype=dtype, delimiter=delimiter, header=header, skiprows=skiprows, usecols=usecols,
                            comment=comment, missing=missing, max_rows=max_rows, like=like,
                            max_record_bytes=max_record_bytes,
                            na_values=na_values if na_values is None or isinstance(na_values, (str, dict)) or not
                            hasattr(na_values, "__iter__") else list(na_values),
                            keep_default_na=keep_default_na, thousands=thousands, decimal=decimal)
        opts = _Options(**self.options)  # bad arguments fail here, not in a worker
        # picklable spellings (spawned workers): no module objects, no iterators
        self.options.update(like="numpy" if opts.want_numpy else None, usecols=opts.usecols)
        self._snapshot: _Snapshot | None = None
        if self.path is not None:
            self.refresh()

    def refresh(self) -> None:
        """Take a new snapshot of the file (its size, identity and first and last bytes):
        what every worker of the next epochs reads. Taken when the dataset is made, in
        the parent process, so that workers, which open the file one by one, agree on
        it: a file appended to since is read up to the snapshot's size (with a
        :class:`FileChangedWarning`); one truncated, rewritten or replaced since is a
        NativeIOError in the workers. Call it between epochs to read a file that grew."""
        if self.path is None:
            return
        f = _open_source(self.path, "CSVDataset")
        with f:
            self._snapshot = _Snapshot.take(f.fileno())

    def _open_checked(self) -> Any:
        """The file, checked against the dataset's snapshot."""
        assert self.path is not None
        f = _open_source(self.path, "CSVDataset")
        snap = self._snapshot
        try:
            if snap is not None:
                grew = snap.check(f.fileno(), self.path, "CSVDataset")
                if grew:
                    warnings.warn(FileChangedWarning(
                        f"{self.path}: the file grew by {grew} bytes after the CSVDataset took its snapshot: its "
                        f"workers read the {snap.size} bytes it had then (ds.refresh() reads the rest)"), stacklevel=3)
            elif _file_size(f.fileno()) > 0:
                raise NativeIOError(f"{self.path}: the file was empty when the CSVDataset was made and has data now: "
                                    f"call ds.refresh() to read it [TF_EIO]", -9, "CSVDataset")
        except BaseException:
            f.close()
            raise
        return f

    def __iter__(self) -> CSVChunks:
        info = T.utils.data.get_worker_info()
        workers = 1 if info is None else info.num_workers
        if self.path is None:
            if workers > 1:
                raise OptionValueError(
                    f"CSVDataset over a stream (from {self.opener!r}) cannot be split between {workers} DataLoader "
                    "workers: pipes and compressed streams have no byte ranges; use num_workers=1 (or 0), or a path"
                )
            assert self.opener is not None
            return iter_csv(self.opener(), self.chunk_rows, **self.options)
        snap = self._snapshot
        if workers == 1:
            f = self._open_checked()
            try:
                blocks = _FileBlocks(f, self.path, owned=True, snapshot=snap)
            except BaseException:
                f.close()
                raise
            return CSVChunks(blocks, self.chunk_rows, _Options(**self.options))
        assert info is not None
        opts = _Options(**self.options)
        f = self._open_checked()
        try:
            layout = _layout_of(self.path, opts, snap)
            if layout.empty:
                begin = end = line = rows_before = 0
            else:
                begin, end, line, rows_before = _worker_range(self.path, opts, layout, info.id, workers, snap)
            limit = -1 if opts.limit < 0 else max(0, opts.limit - rows_before)
            if layout.empty or begin >= end:
                limit = 0
            f.seek(begin)
            blocks = _FileBlocks(f, self.path, owned=True, limit=end - begin, snapshot=snap)
        except BaseException:
            f.close()
            raise
        return CSVChunks(blocks, self.chunk_rows, opts, layout=_Layout(begin, layout.ncols_in, layout.colmap,
                                                                      layout.names, layout.empty),
                         origin=begin, origin_line=line, limit=limit)

_dataset_lock = threading.Lock()


def _dataset_class() -> type:
    """``CSVDataset``: a torch ``IterableDataset``, so made when first named (importing
    torch then, not with this module: NumPy-only use never imports it)."""
    with _dataset_lock:
        cls = globals().get("CSVDataset")
        if cls is None:
            base = T.utils.data.IterableDataset
            cls = type("CSVDataset", (_CSVDatasetImpl, base), {
                "__module__": "tensorffi.io", "__qualname__": "CSVDataset", "__doc__": _CSVDatasetImpl.__doc__})
            globals()["CSVDataset"] = cls  # (later lookups find it without __getattr__)
        return cls
