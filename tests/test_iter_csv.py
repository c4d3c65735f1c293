# SPDX-License-Identifier: MIT
"""tensorffi.io.iter_csv and CSVDataset against tensorffi.io.read_csv.

read_csv is the reference (itself checked against float(), exact rational rounding
and Python's csv module in test_io.py): the concatenated chunks must equal its result
bit for bit, and a ParseError must carry the same line, column, byte offset, text and
message, for every way of cutting the input into blocks (every byte, with the
readers below), every chunk size, and every kind of source. All inputs come from
fixed seeds.
"""
from __future__ import annotations

import gc
import gzip
import io
import os
import subprocess
import sys
import threading
import tracemalloc
import weakref
from pathlib import Path

import numpy as np
import pytest
import torch

import tensorffi
import tensorffi.io as tio
from tensorffi import ParseError

sys.path.insert(0, os.path.dirname(__file__))
from test_io import big_csv, random_csv, realistic_table, simd_levels  # noqa: E402  (read_csv's generators)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INT = {2: torch.int16, 4: torch.int32, 8: torch.int64}


# --------------------------------------------------------------------------- #
# helpers                                                                      #
# --------------------------------------------------------------------------- #


class Trickle:
    """A binary file object that hands out its bytes in pieces of the given sizes
    (the last size repeats), through read() only: block boundaries where we want them."""

    name = "<trickle>"

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data, self.sizes, self.pos, self.calls = data, list(sizes), 0, 0

    def read(self, n: int = -1) -> bytes:
        size = self.sizes[min(self.calls, len(self.sizes) - 1)]
        self.calls += 1
        if n is None or n < 0:  # read() to the end, as read_csv reads a file object
            n = size = len(self.data)
        piece = self.data[self.pos : self.pos + min(n, size)]
        self.pos += len(piece)
        return piece


class TrickleInto(Trickle):
    """The same through readinto(), as files and pipes are read."""

    def readinto(self, view) -> int:
        piece = self.read(len(view))
        view[: len(piece)] = piece
        return len(piece)


def bits(x) -> torch.Tensor:
    """The raw bits of a result, for exact comparison (NaNs included)."""
    t = torch.from_numpy(np.ascontiguousarray(x)) if isinstance(x, np.ndarray) else x
    return t.contiguous().view(INT[t.element_size()])


def collect(chunks, chunk_rows: int | None = None) -> list:
    got = list(chunks)
    for c in got:
        assert c.shape[0] > 0, "empty chunk"
        assert (c.flags.c_contiguous if isinstance(c, np.ndarray) else c.is_contiguous())
    if chunk_rows is not None:
        assert all(c.shape[0] == chunk_rows for c in got[:-1]) and (not got or got[-1].shape[0] <= chunk_rows)
    return got


def assert_same(chunks: list, want) -> None:
    """The chunks, concatenated, equal read_csv's result bit for bit."""
    rows = sum(c.shape[0] for c in chunks)
    assert rows == want.shape[0], (rows, tuple(want.shape))
    if rows == 0:
        return
    assert all(c.shape[1] == want.shape[1] and c.dtype == want.dtype and type(c) is type(want) for c in chunks)
    got = np.concatenate([bits(c).numpy() for c in chunks])
    assert np.array_equal(got, bits(want).numpy())


def outcome(fn):
    """('ok', result), ('error', line, column, offset, text, message) or, for another
    ValueError (usecols out of range after damage), ('ValueError', message) of fn()."""
    try:
        return ("ok", fn())
    except ParseError as exc:
        return ("error", exc.line, exc.column, exc.offset, exc.text, str(exc))
    except ValueError as exc:
        return ("ValueError", str(exc))


def check_against_read_csv(data: bytes, readers, chunk_sizes=(1, 2, 3, 7, 1000), **kw) -> None:
    """iter_csv over each reader (a function data -> source) and chunk size gives
    read_csv's outcome on the same bytes: the same values, or the same error."""
    for reader in readers:
        want = outcome(lambda: tio.read_csv(reader(data), **kw))
        for rows in chunk_sizes:
            got = outcome(lambda: collect(tio.iter_csv(reader(data), rows, **kw), rows))
            assert got[0] == want[0], (reader, rows, got[:5], want[:5])
            if want[0] == "ok":
                assert_same(got[1], want[1])
            else:
                assert got[1:] == want[1:], (reader, rows)


def splits(data: bytes):
    """Readers that cut the input into two blocks at every byte, and into blocks of
    1, 2, 3, 5 and 64 bytes (with and without readinto)."""
    out = [lambda d, k=k: Trickle(d, [k, 1 << 30]) for k in range(1, len(data))]
    out += [lambda d, k=k: TrickleInto(d, [k]) for k in (1, 2, 3, 5, 64)]
    return out


# --------------------------------------------------------------------------- #
# values                                                                       #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt", ["%.9g", "%.17g", "%r"])
def test_realistic_data_equals_read_csv(dtype, fmt):
    data, _ = realistic_table(np.random.default_rng(7), 500, fmt)
    want = tio.read_csv(data, dtype=dtype, header=False)
    for rows in (1, 3, 64, 499, 500, 501, 65536):
        assert_same(collect(tio.iter_csv(data, rows, dtype=dtype, header=False), rows), want)
    if dtype is not torch.bfloat16:
        want_np = tio.read_csv(data, dtype=dtype, header=False, like="numpy")
        assert_same(collect(tio.iter_csv(io.BytesIO(data), 77, dtype=dtype, header=False, like="numpy")), want_np)


@pytest.mark.parametrize("simd", simd_levels())
def test_awkward_structure_at_every_block_boundary(monkeypatch, simd):
    """Quoted fields spanning lines (in a skipped text column), "" escapes, CRLF,
    blanks, blank lines, '#' inside quotes: cut into two blocks at every byte."""
    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    data, values = random_csv(np.random.default_rng(11), 12, 4, {2})
    want = tio.read_csv(data, dtype="float64", usecols=[0, 1, 3], header=False)
    assert np.array_equal(want.numpy(), values[:, [0, 1, 3]])
    check_against_read_csv(data, splits(data), chunk_sizes=(1, 5, 100), dtype="float64", usecols=[0, 1, 3],
                           header=False)


def test_mixed_line_ends_and_records_at_block_boundaries():
    data, _ = random_csv(np.random.default_rng(12), 15, 3, {1}, mixed_eol=True)
    check_against_read_csv(data, splits(data), chunk_sizes=(1, 4), dtype="float64", usecols=[0, 2], header=False)


CASES = [
    b"a,b\n1,2\n3,4\n",
    b"a,b\r\n1,2\r\n3,4",  # CRLF, no line end at the end
    b"a,b\r1,2\r3,4\r",  # CR line ends
    b"\xef\xbb\xbfx,y\r\n1,2\r\n",  # a byte order mark
    b"\xef\xbb\xbf1,2\n3,4",
    b"\xef\xbb",  # two bytes that are not a byte order mark
    b"\r\n\n  \t \r1,2\r\n\r\n3 , 4\n\n\r5,6",  # blank lines everywhere
    b'"name ""quoted""", "multi\nline" ,plain , ""\n1,2,3,4\n',  # a header spanning lines
    b'id,name,x\n1,"Smith, J.",0.5\n2,"O""Neil\r\nsecond line",2.5\n3,plain,4.5',
    b"# preamble \xc3\xa9\n  # indented\nx,y # units\n1,2#c\n#\n3,\"4\"#c\n5,6",
    b"",
    b"\n\n",
    b"   \r\n",
    b"# only\n# comments\n",
    b"a,b\n\n# c\n",
    b"1\n2\n3\n",
    b'1,"2",3\n" 4 ",5,  6  \n',
    b"1,,3\n,,\n4,5,\n",
]


@pytest.mark.parametrize("data", CASES)
@pytest.mark.parametrize("header", ["auto", True, False])
def test_structure_cases_everywhere(data, header):
    kw = dict(header=header, comment="#" if b"#" in data else None, dtype="float64")
    if b"Smith" in data:
        kw["usecols"] = [0, 2]  # not the text column
    check_against_read_csv(data, [bytes, io.BytesIO] + splits(data), chunk_sizes=(1, 2, 50), **kw)


def test_names_usecols_and_header_modes():
    data = b'id,name,x,y\n1,"Smith, J.",0.5,1.5\n2,"O""Neil\nsecond line",2.5,3.5\n3,plain text,4.5,5.5\n'
    it = tio.iter_csv(data, 2, usecols=["y", "x"], dtype="float64")
    assert it.names == ["y", "x"]  # read before the first chunk: the header only
    assert [c.tolist() for c in it] == [[[1.5, 0.5], [3.5, 2.5]], [[5.5, 4.5]]]
    assert it.names == ["y", "x"] and it.closed
    it = tio.iter_csv(data, 2, usecols=(i for i in (0, -1)))  # any iterable
    assert torch.cat(list(it)).tolist() == [[1, 1.5], [2, 3.5], [3, 5.5]]
    assert tio.iter_csv(b"1,2\n3,4\n").names is None
    assert tio.iter_csv(b"1,2\n3,4\n", header=True).names == ["1", "2"]
    assert tio.iter_csv(b"", header=True).names == [] and tio.iter_csv(b"").names is None
    wide = [f"c{i}" for i in range(150)]
    it = tio.iter_csv((",".join(wide) + "\n" + ",".join("1" for _ in wide) + "\n").encode(), 10)
    assert it.names == wide and [tuple(c.shape) for c in it] == [(1, 150)]
    with pytest.raises(ValueError, match="no column named"):
        next(tio.iter_csv(data, usecols=["z"]))
    with pytest.raises(ValueError, match="no header"):
        next(tio.iter_csv(b"1,2\n", usecols=["a"]))
    chunks = list(tio.iter_csv(data, 2, usecols=[]))
    assert [tuple(c.shape) for c in chunks] == [(2, 0), (1, 0)]


@pytest.mark.parametrize("delimiter", ["\t", ";", "|", " ", ":"])
def test_delimiters_skiprows_missing_max_rows(delimiter):
    rng = np.random.default_rng(5)
    rows = [[f"{v:.6g}" if rng.random() > 0.2 else "" for v in rng.standard_normal(4)] for _ in range(40)]
    if delimiter == " ":
        rows = [[f or "1" for f in r] for r in rows]  # a blank is not a field separator's neighbour there
    data = ("junk line 1\njunk, \"line\" 2\n" + "\n".join(delimiter.join(r) for r in rows) + "\n").encode()
    for kw in (dict(skiprows=2), dict(skiprows=2, missing=-7.5), dict(skiprows=2, max_rows=17),
               dict(skiprows=2, max_rows=0), dict(skiprows=50), dict(skiprows=2, max_rows=40)):
        check_against_read_csv(data, [bytes, lambda d: TrickleInto(d, [13])], chunk_sizes=(1, 6, 100),
                               delimiter=delimiter, header=False, dtype="float32", **kw)


def test_max_rows_reads_nothing_after_them():
    data = b"a,b\n1,2\n\n3,4\n5,6\nnot,numbers\n\x00"
    assert torch.cat(list(tio.iter_csv(data, 2, max_rows=3))).tolist() == [[1, 2], [3, 4], [5, 6]]
    assert list(tio.iter_csv(data, max_rows=0)) == []
    with pytest.raises(ParseError):
        list(tio.iter_csv(data, 2, max_rows=4))
    # a file object is read up to where the rows end, plus at most one block
    src = TrickleInto(data + b"9,9\n" * 100000, [1 << 30])
    assert sum(c.shape[0] for c in tio.iter_csv(src, 2, max_rows=3)) == 3
    assert src.pos < 200000


# --------------------------------------------------------------------------- #
# sources                                                                      #
# --------------------------------------------------------------------------- #


def test_sources(tmp_path):
    data, values = big_csv(np.random.default_rng(3), 3000)
    want = tio.read_csv(data)
    path = tmp_path / "t.csv"
    path.write_bytes(b"junk\n" + data)
    with gzip.open(tmp_path / "t.csv.gz", "wb") as g:
        g.write(data)

    def pipe_source():
        r, w = os.pipe()

        def write() -> None:
            with open(w, "wb") as f:
                for i in range(0, len(data), 4093):
                    f.write(data[i : i + 4093])

        threading.Thread(target=write, daemon=True).start()
        return open(r, "rb")

    sources = {
        "path": lambda: path, "str": lambda: str(path), "bytes": lambda: data, "bytearray": lambda: bytearray(data),
        "memoryview": lambda: memoryview(data), "array": lambda: np.frombuffer(data, np.uint8),
        "tensor": lambda: torch.frombuffer(bytearray(data), dtype=torch.uint8), "BytesIO": lambda: io.BytesIO(data),
        "gzip": lambda: gzip.open(tmp_path / "t.csv.gz", "rb"), "os.pipe": pipe_source,
        "unbuffered file": lambda: open(path, "rb", buffering=0),
    }
    for name, make in sources.items():
        src = make()
        kw = {"skiprows": 1} if name in ("path", "str", "unbuffered file") else {}
        for rows in (1000, 4096):
            if rows == 4096 and name in ("os.pipe", "gzip", "unbuffered file"):
                continue  # read once
            if rows == 4096:
                src = make()
            chunks = collect(tio.iter_csv(src, rows, **kw), rows)
            assert_same(chunks, want)
        if hasattr(src, "close"):
            assert not src.closed  # the caller's file object stays open
            src.close()
    # a subprocess's stdout
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    feeder = threading.Thread(target=lambda: (proc.stdin.write(data), proc.stdin.close()), daemon=True)
    feeder.start()
    assert_same(collect(tio.iter_csv(proc.stdout, 512)), want)
    proc.stdout.close()
    assert proc.wait(timeout=60) == 0
    # a file object is read from its current position
    with open(path, "rb") as f:
        f.readline()
        assert_same(collect(tio.iter_csv(f, 999)), want)

    # user-written file objects: a BufferedIOBase with read() only (its inherited
    # readinto1 raises UnsupportedOperation), a RawIOBase whose reads come short
    class ReadOnly(io.BufferedIOBase):
        def __init__(self) -> None:
            self.inner = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def read(self, n: int | None = -1) -> bytes:
            return self.inner.read(n)

    class Short(io.RawIOBase):
        def __init__(self) -> None:
            self.inner = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def readinto(self, b) -> int:
            return self.inner.readinto(memoryview(b)[:1000])

    for make in (ReadOnly, Short):
        assert_same(collect(tio.iter_csv(make(), 700), 700), want)


def test_bad_sources_and_arguments(tmp_path):
    with open(tmp_path / "t.csv", "w") as f, pytest.raises(TypeError, match="binary"):
        tio.iter_csv(f)
    with pytest.raises(TypeError):
        tio.iter_csv(12345)
    with pytest.raises(FileNotFoundError):
        tio.iter_csv(tmp_path / "missing.csv")

    class Text:
        def read(self, n):
            return "1,2\n"

    with pytest.raises(TypeError, match="read\\(\\) returned str"):
        list(tio.iter_csv(Text()))
    for kwargs, exc in [({"dtype": torch.int16}, TypeError), ({"delimiter": '"'}, ValueError),
                        ({"comment": ","}, ValueError), ({"comment": " "}, ValueError), ({"header": "yes"}, ValueError),
                        ({"skiprows": -1}, ValueError), ({"max_rows": 1.5}, TypeError), ({"missing": "x"}, TypeError),
                        ({"like": "jax"}, ValueError), ({"dtype": torch.bfloat16, "like": "numpy"}, TypeError),
                        ({"max_record_bytes": 0}, ValueError)]:
        with pytest.raises(exc):
            tio.iter_csv(b"1,2\n", **kwargs)
    for rows in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="chunk_rows"):
            tio.iter_csv(b"1,2\n", rows)


# --------------------------------------------------------------------------- #
# errors                                                                       #
# --------------------------------------------------------------------------- #


def mutate(rng: np.random.Generator, data: bytes) -> bytes:
    """One random edit that often breaks a CSV: a byte inserted, replaced or deleted."""
    pieces = [b"x", b'"', b",", b"\n", b"\r", b"\r\n", b"\x00", b"\xff", b"\xc3", b"#", b" ", b"e", b".", b"-", b'""']
    pos = int(rng.integers(0, len(data) + 1))
    op = int(rng.integers(0, 3))
    piece = pieces[int(rng.integers(0, len(pieces)))]
    if op == 0:
        return data[:pos] + piece + data[pos:]
    if op == 1:
        return data[:pos] + piece + data[pos + 1 :]
    return data[:pos] + data[pos + 1 :]


@pytest.mark.parametrize("seed", range(6))
def test_damaged_inputs_fail_like_read_csv(seed, monkeypatch):
    """Random damage (stray quotes, NULs, bad UTF-8, broken numbers, line ends, fields
    added or lost) to an awkward CSV: iter_csv, with the input cut into blocks of 1, 7
    and 1000 bytes, gives exactly read_csv's outcome (values, or the error's line,
    column, offset, text and message), on both of read_csv's paths."""
    rng = np.random.default_rng(100 + seed)
    readers = [lambda d: Trickle(d, [1]), lambda d: TrickleInto(d, [7]), lambda d: TrickleInto(d, [1000])]
    for i in range(40):
        data, _ = random_csv(rng, 8, 3, {1} if i % 2 else set(), mixed_eol=i % 3 == 0)
        for _ in range(1 + i % 3):
            data = mutate(rng, data)
        kw = dict(dtype="float64", header=[False, "auto", True][i % 3], comment="#" if i % 4 == 0 else None)
        if i % 2:
            kw["usecols"] = [0, 2]
        for path in ("one-call", "passes"):
            monkeypatch.setattr(tio, "_SMALL_BYTES", 256 << 10 if path == "one-call" else -1)
            check_against_read_csv(data, readers, chunk_sizes=(1, 3, 100), **kw)


def test_too_many_fields_are_counted_across_blocks():
    """The message counts the fields of a record with too many, through its quoted
    fields: a block boundary inside one of them must not cut the count short."""
    data = b'a,b\n1,2\n3,4,"x\ny,\r\nz",5,"6\n"\n7,8\n'
    with pytest.raises(ParseError, match="record has 5 fields, expected 2"):
        tio.read_csv(data)
    check_against_read_csv(data, splits(data), chunk_sizes=(1, 10))


def test_error_positions_are_in_the_whole_input():
    pad = "0.5,1.25,x\n" * 3000  # ~33 kB: the error lies many blocks in
    data = ('a,b,c\n1,2,"multi\nline\r\ntext"\n' + pad + "3,4.5.6,y\n" + pad).encode()
    offset = data.index(b"4.5.6")
    chunks = []
    with pytest.raises(ParseError) as info:
        for c in tio.iter_csv(TrickleInto(data, [999]), 1000, usecols=[0, 1]):
            chunks.append(c)
    err = info.value
    assert (err.line, err.column, err.offset, err.text) == (3005, 3, offset, "4.5.6")
    assert "<trickle>: line 3005, column 3 (byte offset %d)" % offset in str(err)
    assert [c.shape[0] for c in chunks] == [1000, 1000, 1000]  # the chunks before the error's chunk


def test_unterminated_quote_and_long_records():
    data = b"a,b\n1,2\n3,\"4\n" + b"5,6\n" * 50
    for reader in (bytes, lambda d: TrickleInto(d, [5])):
        with pytest.raises(ParseError, match="never closed") as info:
            list(tio.iter_csv(reader(data), 1))
        assert (info.value.line, info.value.column, info.value.offset) == (3, 3, 10)
    # beyond max_record_bytes: an error at the same quote, without reading the rest
    big = data + b"5,6\n" * 100000
    src = TrickleInto(big, [64])
    with pytest.raises(ParseError, match="not closed within 100 bytes") as info:
        list(tio.iter_csv(src, 1, max_record_bytes=100))
    assert (info.value.line, info.value.column, info.value.offset) == (3, 3, 10) and src.pos < 2000
    # a quoted field that does close is read whole, however many blocks it takes
    long_field = b"a,b\n1,\"" + b"x\n" * 5000 + b"\"\n2,3\n"
    assert torch.cat(list(tio.iter_csv(TrickleInto(long_field, [7]), 1, usecols=[0]))).tolist() == [[1], [2]]
    # a line without an end
    with pytest.raises(ParseError, match="line is longer than 50 bytes") as info:
        list(tio.iter_csv(TrickleInto(b"1,2\n" + b"3" * 1000, [16]), max_record_bytes=50))
    assert (info.value.line, info.value.column, info.value.offset) == (2, 1, 4)


def test_chunks_before_an_error_are_yielded():
    rows = [f"{i}.5,{i}" for i in range(100)]
    rows[57] = "57.5,oops"
    data = ("\n".join(rows) + "\n").encode()
    it = tio.iter_csv(data, 10)
    got = []
    with pytest.raises(ParseError) as info:
        for c in it:
            got.append(c)
    assert len(got) == 5 and info.value.line == 58 and info.value.text == "oops"
    assert it.closed and list(it) == []  # closed by the error


# --------------------------------------------------------------------------- #
# the parser handle                                                            #
# --------------------------------------------------------------------------- #


def counting(it: tio.CSVChunks) -> list[int]:
    """Count calls of the handle's C destructor."""
    calls: list[int] = []
    state = it._handle._state
    destroy = state.destroy
    state.destroy = lambda p: (calls.append(1), destroy(p))[1]
    return calls


def test_handle_is_freed_exactly_once():
    data, _ = big_csv(np.random.default_rng(4), 100)
    # to the end
    it = tio.iter_csv(data, 7)
    calls = counting(it)
    assert sum(c.shape[0] for c in it) == 100 and calls == [1] and it.closed
    it.close()
    assert calls == [1]
    # stopped early, closed
    it = tio.iter_csv(data, 7)
    calls = counting(it)
    next(it)
    it.close()
    it.close()
    assert calls == [1] and list(it) == []
    # stopped early, a with block
    with tio.iter_csv(data, 7) as it:
        calls = counting(it)
        for _ in it:
            break
    assert calls == [1]
    # stopped early, dropped
    it = tio.iter_csv(data, 7)
    calls = counting(it)
    next(it)
    ref = weakref.ref(it)
    del it
    gc.collect()
    assert ref() is None and calls == [1]
    # a parse error
    it = tio.iter_csv(data + b"1,x\n", 7)
    calls = counting(it)
    with pytest.raises(ParseError):
        list(it)
    assert calls == [1]

    # an error of the source
    class Broken(TrickleInto):
        def readinto(self, view):
            if self.calls > 2:
                raise OSError("disk on fire")
            return super().readinto(view)

    it = tio.iter_csv(Broken(data, [100]), 7)
    calls = counting(it)
    with pytest.raises(OSError, match="disk on fire"):
        list(it)
    assert calls == [1] and it.closed
    # the file a path opened is closed with it
    it = tio.iter_csv(data, 7)
    calls = counting(it)
    it.names
    it.close()
    assert calls == [1]


def test_paths_are_closed_with_the_iterator(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"a,b\n" + b"1,2\n" * 1000)
    it = tio.iter_csv(path, 10)
    f = it._blocks.f
    next(it)
    it.close()
    assert f.closed
    it = tio.iter_csv(path, 10)
    f = it._blocks.f
    assert sum(c.shape[0] for c in it) == 1000 and f.closed
    it = tio.iter_csv(path, 10)  # dropped unfinished: the file is closed with the parser
    f = it._blocks.f
    calls = counting(it)
    next(it)
    del it
    gc.collect()
    assert f.closed and calls == [1]


def test_the_c_buffer_holds_one_record_and_one_block():
    """Python feeds the parser only when it has no whole record left: its buffer holds
    the block and the partial record, never the input."""
    data, _ = big_csv(np.random.default_rng(9), 20000)  # ~3 MB
    it = tio.iter_csv(io.BytesIO(data), 1000)
    peak = 0
    n = 0
    for c in it:
        n += c.shape[0]
        if not it.closed:
            info = it._stream_info()
            peak = max(peak, info["peak_capacity"])
            assert info["pending"] <= it._base_block + 200
    assert n == 20000
    assert peak <= 2 * it._base_block + (64 << 10), peak  # 1000 rows x 8 x 4 bytes -> 64 KiB blocks


def test_a_buffer_grown_for_a_long_record_shrinks_back():
    """A 10 MB record grows the C buffer past 8 MiB; the short records after it
    bring it back to about a block's size, and every value is read_csv's."""
    rng = np.random.default_rng(11)
    values = rng.normal(size=(20000, 2))
    rows = [f"{float(a)!r},{float(b)!r},x" for a, b in values]
    rows[500] = rows[500][:-1] + '"' + "long text, " * 1_000_000 + '"'
    data = ("a,b,note\n" + "\n".join(rows) + "\n").encode()
    want = tio.read_csv(data, usecols=["a", "b"], dtype="float64")
    np.testing.assert_array_equal(want.numpy(), values)
    class Trickle(io.BytesIO):  # a pipe's short reads: at most 256 KiB at a time
        def readinto1(self, b) -> int:
            return self.readinto(memoryview(b)[: 256 << 10])

    it = tio.iter_csv(Trickle(data), 200, usecols=["a", "b"], dtype="float64")
    chunks, peak, last = [], 0, None
    for c in it:
        chunks.append(c)
        if not it.closed:
            info = it._stream_info()
            peak, last = max(peak, info["peak_capacity"]), info["capacity"]
    assert torch.equal(torch.cat(chunks), want)
    assert peak > 10_000_000, peak
    assert last is not None and last <= 1 << 20, last


@pytest.mark.parametrize("like", [np.zeros(3), np.zeros((2, 2)), torch.zeros(3), "numpy", np, torch])
def test_like_takes_modules_names_and_arrays(like):
    """An array of several elements as ``like`` names its kind (no element-wise
    comparison with the names), for read_csv and iter_csv alike."""
    numpy_wanted = isinstance(like, np.ndarray) or like is np or (isinstance(like, str) and like == "numpy")
    kind = np.ndarray if numpy_wanted else torch.Tensor
    data = b"1.5,2\n3,-4e-1\n"
    got = tio.read_csv(data, like=like, dtype="float64")
    chunks = list(tio.iter_csv(data, 1, like=like, dtype="float64"))
    assert isinstance(got, kind) and all(isinstance(c, kind) for c in chunks)
    assert np.array_equal(np.asarray(got), [[1.5, 2.0], [3.0, -0.4]])
    assert np.array_equal(np.concatenate([np.asarray(c) for c in chunks]), np.asarray(got))


def test_memory_is_bounded_by_the_chunk():
    """tracemalloc sees the NumPy chunks and the read block; the C buffer's capacity
    is asked from the parser. Beyond the chunk the caller holds, < 3 chunks."""
    data, _ = big_csv(np.random.default_rng(10), 40000)  # ~6.5 MB of text, 1.3 MB of float32
    chunk_rows = 4096
    chunk_bytes = chunk_rows * 8 * 4
    it = tio.iter_csv(io.BytesIO(data), chunk_rows, like="numpy")
    cap = 0
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        n = 0
        for c in it:  # `c` keeps the yielded chunk alive while the next one is read
            n += c.shape[0]
            if not it.closed:
                cap = max(cap, it._stream_info()["peak_capacity"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n == 40000
    beyond = peak - base - chunk_bytes + cap
    assert beyond < 3 * chunk_bytes, (peak - base, cap, chunk_bytes)


def test_iterators_in_threads_share_nothing():
    inputs = [big_csv(np.random.default_rng(20 + i), 800 + 100 * i) for i in range(4)]
    bad = inputs[0][0] + b"1,2,3,4,5,6,7,oops\n"
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(5):
                data, values = inputs[i]
                got = torch.cat(list(tio.iter_csv(TrickleInto(data, [333]), 50)))
                assert np.array_equal(got.numpy(), values)
                with pytest.raises(ParseError) as info:
                    list(tio.iter_csv(TrickleInto(bad, [333]), 50))
                assert info.value.line == 801 and info.value.text == "oops"
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_one_iterator_from_two_threads_is_serialized():
    data, values = big_csv(np.random.default_rng(21), 3000)
    it = tio.iter_csv(TrickleInto(data, [100]), 10)
    got: list[list] = [[], []]

    def take(k: int) -> None:
        for c in it:
            got[k].append(c)

    threads = [threading.Thread(target=take, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = np.concatenate([c.numpy() for c in got[0] + got[1]])
    assert rows.shape == values.shape
    assert np.array_equal(np.sort(rows[:, 0]), np.sort(values[:, 0]))


# --------------------------------------------------------------------------- #
# DataLoader workers                                                           #
# --------------------------------------------------------------------------- #


def worker_file(tmp_path, rows: int = 400, seed: int = 30) -> tuple[str, np.ndarray]:
    """A file with a header, a row id in column 0 (so rows can be matched) and a text
    column of quoted newlines, CRLFs, "" and commas; blank lines and a comment line."""
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(rows), rng.standard_normal(rows) * 1000
    pieces = ["x", ",", '""', "\n", "\r\n", " ", "#", "\n\n"]
    body = []
    for r in range(rows):
        text = '"' + "".join(rng.choice(pieces, size=int(rng.integers(0, 6)))) + '"'
        body.append(f"{r},{float(x[r])!r},{text},{float(y[r])!r}")
        if r % 17 == 0:
            body.append("")  # a blank line
    path = tmp_path / f"w{seed}.csv"
    path.write_bytes(("id,x,text,y\n" + "\r\n".join(body) + "\n").encode())
    return str(path), np.stack([np.arange(rows), x, y], axis=1)


def test_worker_ranges_cover_every_row_once(tmp_path, monkeypatch):
    """Every number of workers: the ranges tile the data at record boundaries (never
    inside a quoted field), and the workers' rows are the file's rows, each once."""
    path, values = worker_file(tmp_path)
    want = tio.read_csv(path, usecols=[0, 1, 3], dtype="float64")
    assert np.array_equal(want.numpy(), values)
    ds = tio.CSVDataset(path, 16, usecols=["id", "x", "y"], dtype="float64")

    class Info:
        def __init__(self, id: int, num_workers: int) -> None:
            self.id, self.num_workers = id, num_workers

    for workers in (1, 2, 3, 5, 8, 31, 200):
        parts = []
        for w in range(workers):
            monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda w=w: Info(w, workers))
            parts.append([c.numpy() for c in ds])
        rows = np.concatenate([c for p in parts for c in p])
        assert np.array_equal(rows, values), workers  # in order, each once
        assert sum(1 for p in parts if p) >= min(workers, 2)


def test_worker_ranges_with_max_rows_and_errors(tmp_path, monkeypatch):
    path, values = worker_file(tmp_path, rows=120, seed=31)

    class Info:
        def __init__(self, id: int, num_workers: int) -> None:
            self.id, self.num_workers = id, num_workers

    for max_rows in (0, 1, 50, 119, 120, 500):
        ds = tio.CSVDataset(path, 7, usecols=[0, 1, 3], dtype="float64", max_rows=max_rows)
        parts = []
        for w in range(4):
            monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda w=w: Info(w, 4))
            parts += [c.numpy() for c in ds]
        rows = np.concatenate(parts) if parts else np.zeros((0, 3))
        assert np.array_equal(rows, values[:max_rows]), max_rows
    # an error late in the file: the worker whose range holds it raises it, with its
    # position in the whole file (as read_csv names it)
    text = Path(path).read_bytes()
    bad = text[: len(text) - 40] + b"oops" + text[len(text) - 36 :]
    bad_path = tmp_path / "bad.csv"
    bad_path.write_bytes(bad)
    with pytest.raises(ParseError) as want:
        tio.read_csv(bad_path, usecols=[0, 1, 3])
    raised = []
    for w in range(3):
        monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda w=w: Info(w, 3))
        try:
            list(tio.CSVDataset(bad_path, 5, usecols=[0, 1, 3]))
        except ParseError as exc:
            raised.append((w, exc.line, exc.column, exc.offset, exc.text, str(exc)))
    e = want.value
    assert raised == [(2, e.line, e.column, e.offset, e.text, str(e))]


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
@pytest.mark.parametrize("method,workers", [("fork", 3), ("spawn", 2)])
def test_dataloader_workers_read_every_row_once(tmp_path, method, workers):
    path, values = worker_file(tmp_path, rows=3000, seed=32)
    ds = tio.CSVDataset(path, 100, usecols=(c for c in ["id", "x", "y"]), dtype=np.float64, like=np)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers, multiprocessing_context=method,
                                         timeout=120)
    for _epoch in range(2 if method == "fork" else 1):  # a dataset is iterated again each epoch
        chunks = [c.numpy() for c in loader]
        rows = np.concatenate(chunks)
        rows = rows[np.argsort(rows[:, 0])]
        assert np.array_equal(rows, values)
        assert len(chunks) > 30 and all(c.shape[0] <= 100 for c in chunks)


def test_streams_are_not_split_between_workers(tmp_path):
    path = tmp_path / "t.csv.gz"
    with gzip.open(path, "wb") as g:
        g.write(b"a,b\n" + b"1,2\n" * 100)
    ds = tio.CSVDataset(lambda: gzip.open(path, "rb"), 30)
    assert [c.shape[0] for c in ds] == [30, 30, 30, 10]
    assert [c.shape[0] for c in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)] == [30, 30, 30, 10]
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork",
                                         timeout=120)
    with pytest.raises(ValueError, match="cannot be split between 2 DataLoader workers"):
        list(loader)
    with pytest.raises(TypeError, match="path or a callable"):
        tio.CSVDataset(io.BytesIO(b"1\n"))
    with pytest.raises(ValueError):
        tio.CSVDataset(str(path), delimiter="\n")  # checked in the main process
