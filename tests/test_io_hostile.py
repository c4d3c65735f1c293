# SPDX-License-Identifier: MIT
"""read_csv and iter_csv on the inputs an attacker (or an unlucky shell line) hands
them: pipes, FIFOs, /dev/stdin, /dev/fd/N, /proc files whose stat size is 0,
directories, sockets, unreadable files, /dev/zero, /dev/null, and files truncated
while iter_csv streams them. Every class ends in its documented behaviour: the
table numpy.loadtxt reads from the same bytes, or a typed error; never an empty
result for data that was there, never a hang or a crash."""
from __future__ import annotations

import io
import os
import socket
import subprocess
import threading

import numpy as np
import pytest
import torch

import tensorffi
import tensorffi.io as tio
from tensorffi.errors import NativeIOError, ParseError


def random_table(rng: np.random.Generator, rows: int | None = None, cols: int | None = None) -> tuple[bytes, np.ndarray]:
    """CSV text of random float64 values and numpy.loadtxt's reading of it (the reference)."""
    rows = int(rng.integers(1, 400)) if rows is None else rows
    cols = int(rng.integers(1, 6)) if cols is None else cols
    values = rng.standard_normal((rows, cols)) * 10.0 ** rng.integers(-5, 6, (rows, cols))
    text = "".join(",".join(repr(float(v)) for v in row) + "\n" for row in values).encode()
    return text, np.loadtxt(io.BytesIO(text), delimiter=",", ndmin=2)


def writer(fd_or_path, data: bytes) -> threading.Thread:
    """A thread writing data into a pipe's write end (an fd) or a FIFO (a path) in pieces."""

    def write() -> None:
        with open(fd_or_path, "wb") as f:
            for i in range(0, len(data), 1000):
                f.write(data[i : i + 1000])

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


def check(got, want: np.ndarray) -> None:
    got = got.numpy() if isinstance(got, torch.Tensor) else got
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------- #
# unsized and non-seekable inputs are read, not taken for empty                #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("how", ["/dev/fd/N", "pipe file object", "fifo path", "fifo file object"])
@pytest.mark.parametrize("reader", ["read_csv", "iter_csv"])
def test_pipes_and_fifos_are_read(rng, tmp_path, how, reader):
    data, want = random_table(rng, rows=int(rng.integers(2000, 6000)))  # more than a pipe's 64 KiB buffer
    if how.startswith("fifo"):
        path = tmp_path / "fifo"
        os.mkfifo(path)
        thread = writer(path, data)
        source = path if how == "fifo path" else open(path, "rb")
    else:
        r, w = os.pipe()
        thread = writer(w, data)
        source = f"/dev/fd/{r}" if how == "/dev/fd/N" else open(r, "rb")
    try:
        if reader == "read_csv":
            got = tio.read_csv(source, dtype="float64")
        else:
            got = torch.cat(list(tio.iter_csv(source, 700, dtype="float64")))
        check(got, want)
    finally:
        if hasattr(source, "close"):
            source.close()
        elif how == "/dev/fd/N":
            os.close(r)
        thread.join(timeout=30)


@pytest.mark.parametrize("reader", ["read_csv", "iter_csv"])
def test_dev_stdin_is_read(rng, reader):
    """`/dev/stdin` when stdin is a pipe (`producer | python script.py`): fd 0 is
    pointed at a pipe for the test (a child process would cost an interpreter start)."""
    data, want = random_table(rng)
    r, w = os.pipe()
    saved = os.dup(0)
    os.dup2(r, 0)
    os.close(r)
    thread = writer(w, data)
    try:
        if reader == "read_csv":
            got = tio.read_csv("/dev/stdin", dtype="float64")
        else:
            got = torch.cat(list(tio.iter_csv("/dev/stdin", 50, dtype="float64")))
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        thread.join(timeout=30)
    check(got, want)


def test_stdin_of_a_subprocess_is_read(rng):
    """A child's stdin given as a file object: subprocess.Popen(...).stdout."""
    data, want = random_table(rng)
    proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    feeder = threading.Thread(target=lambda: (proc.stdin.write(data), proc.stdin.close()), daemon=True)
    feeder.start()
    check(tio.read_csv(proc.stdout, dtype="float64"), want)
    proc.stdout.close()
    assert proc.wait(timeout=30) == 0


@pytest.mark.parametrize("reader", ["read_csv", "iter_csv"])
def test_proc_files_of_stat_size_zero_are_read(reader):
    """/proc/self/statm: one line of space-separated integers, st_size 0. The reference
    reads the same file through the same process (its values barely move between reads:
    compare the fields that do not move, and the count)."""
    assert os.stat("/proc/self/statm").st_size == 0
    want = np.loadtxt("/proc/self/statm", ndmin=2)
    if reader == "read_csv":
        got = tio.read_csv("/proc/self/statm", delimiter=" ", dtype="float64", like="numpy")
    else:
        got = np.concatenate(list(tio.iter_csv("/proc/self/statm", delimiter=" ", dtype="float64", like="numpy")))
    assert got.shape == want.shape == (1, 7)
    assert got[0, 0] > 0 and np.all(got >= 0) and np.all(got == np.round(got))
    np.testing.assert_array_equal(got[:, [3, 4, 6]], want[:, [3, 4, 6]])  # text, lib, dt: stable
    stable = "/proc/sys/net/ipv4/ip_local_port_range"  # two tab-separated integers that do not move
    if os.path.exists(stable):
        assert os.stat(stable).st_size == 0
        got = tio.read_csv(stable, delimiter="\t", dtype="float64")
        check(got, np.loadtxt(stable, ndmin=2))
    with open("/proc/self/statm", "rb") as f:  # a file object of the same kind
        assert tio.read_csv(f, delimiter=" ").shape == (1, 7)


def test_stream_keeps_read_csv_options_and_errors(rng):
    """The streamed path is read_csv's: header names, usecols, max_rows (nothing after
    them is read: the writer blocks, the read still ends) and the same ParseError."""
    data, want = random_table(rng, rows=500, cols=4)
    r, w = os.pipe()
    thread = writer(w, b"a,b,c,d\n" + data)
    with open(r, "rb") as f:
        t, names = tio.read_csv(f, dtype="float64", usecols=["d", "b"], return_names=True)
    thread.join(timeout=30)
    assert names == ["d", "b"]
    check(t, want[:, [3, 1]])

    r, w = os.pipe()
    endless = threading.Thread(target=lambda: _write_forever(w, data), daemon=True)
    endless.start()
    with open(r, "rb") as f:
        check(tio.read_csv(f, dtype="float64", max_rows=123), want[:123])

    bad = data + b"1,2,x,4\n"
    expected = None
    try:
        tio.read_csv(bad)
    except ParseError as exc:
        expected = exc
    r, w = os.pipe()
    thread = writer(w, bad)
    with open(r, "rb") as f, pytest.raises(ParseError) as info:
        tio.read_csv(f)
    thread.join(timeout=30)
    assert expected is not None
    assert (info.value.line, info.value.column, info.value.offset, info.value.text) == (
        expected.line, expected.column, expected.offset, expected.text)


def _write_forever(fd: int, data: bytes) -> None:
    with open(fd, "wb") as f:
        try:
            while True:
                f.write(data)
        except (BrokenPipeError, OSError):
            pass  # the reader stopped after max_rows and closed its end


def test_stream_progress_reports_bytes_with_unknown_total(rng):
    data, want = random_table(rng, rows=3000)
    calls = []
    r, w = os.pipe()
    thread = writer(w, data)
    with open(r, "rb") as f:
        check(tio.read_csv(f, dtype="float64", progress=lambda d, t: calls.append((d, t))), want)
    thread.join(timeout=30)
    assert calls[0] == (0, None) and calls[-1] == (len(data), len(data))
    assert all(t is None for _, t in calls[:-1]) and [d for d, _ in calls] == sorted(d for d, _ in calls)


# --------------------------------------------------------------------------- #
# paths that are not tables                                                    #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("reader", [tio.read_csv, tio.iter_csv])
def test_paths_that_cannot_be_read_are_typed_errors(tmp_path, reader):
    missing = tmp_path / "missing.csv"
    with pytest.raises(FileNotFoundError) as info:
        reader(missing)
    assert isinstance(info.value, NativeIOError) and isinstance(info.value, tensorffi.TensorFFIError)
    assert "source" in str(info.value) and "missing.csv" in str(info.value)
    assert info.value.errno == 2 and info.value.filename == str(missing)

    with pytest.raises(IsADirectoryError, match="source.*is a directory") as info:
        reader(tmp_path)
    assert isinstance(info.value, NativeIOError)

    sock_path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock_path))
    try:
        with pytest.raises(NativeIOError, match="source.*is a socket") as info:
            reader(sock_path)
        assert isinstance(info.value, OSError)
    finally:
        server.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files without read permission")
@pytest.mark.parametrize("reader", [tio.read_csv, tio.iter_csv])
def test_unreadable_file_is_a_typed_error(tmp_path, reader):
    path = tmp_path / "secret.csv"
    path.write_bytes(b"1,2\n")
    path.chmod(0)
    with pytest.raises(PermissionError, match="source.*secret.csv") as info:
        reader(path)
    assert isinstance(info.value, NativeIOError)


def test_open_errors_keep_their_builtin_class(tmp_path, monkeypatch):
    """Whatever open() raises (here, as for a file without read permission under a
    non-root user) becomes a NativeIOError that is still the builtin's subclass."""

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(args[0]))

    # Every reader opens its source through the one helper in _csv_common.
    monkeypatch.setattr(tensorffi._csv_common, "open", refuse, raising=False)
    for reader in (tio.read_csv, tio.iter_csv):
        with pytest.raises(PermissionError, match="source.*Permission denied") as info:
            reader(tmp_path / "x.csv")
        assert isinstance(info.value, NativeIOError) and info.value.errno == 13


@pytest.mark.parametrize("reader", ["read_csv", "iter_csv"])
def test_empty_header_only_null_and_zero(tmp_path, reader, rng):
    def read(src, **kw):
        if reader == "read_csv":
            return tio.read_csv(src, **kw)
        chunks = tio.iter_csv(src, **kw)
        got = list(chunks)
        return (torch.cat(got) if got else torch.empty(0, 0)), chunks

    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    for src in (empty, "/dev/null"):
        if reader == "read_csv":
            assert tio.read_csv(src).shape == (0, 0)
        else:
            assert list(tio.iter_csv(src)) == []

    cols = int(rng.integers(1, 9))
    names = [f"c{i}" for i in range(cols)]
    only = tmp_path / "header.csv"
    only.write_bytes((",".join(names) + "\n").encode())
    if reader == "read_csv":
        t, got_names = tio.read_csv(only, return_names=True)
        assert t.shape == (0, cols) and got_names == names
    else:
        chunks = tio.iter_csv(only)
        assert list(chunks) == [] and chunks.names == names

    # /dev/zero is endless NUL bytes: a ParseError once a record passes 64 MiB, not a hang
    with pytest.raises(ParseError, match="longer than") as info:
        if reader == "read_csv":
            tio.read_csv("/dev/zero")
        else:
            list(tio.iter_csv("/dev/zero"))
    assert info.value.offset == 0 and info.value.line == 1


# --------------------------------------------------------------------------- #
# files that shrink or grow while iter_csv streams them                        #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("cut", ["below what was read", "ahead of the reader", "mid-record"])
@pytest.mark.parametrize("opener", ["path", "file object"])
def test_truncation_while_streaming_is_an_error(tmp_path, rng, cut, opener):
    data, want = random_table(rng, rows=int(rng.integers(20000, 30000)), cols=3)  # several 64 KiB blocks
    path = tmp_path / "t.csv"
    path.write_bytes(data)
    source = path if opener == "path" else open(path, "rb")
    chunks = tio.iter_csv(source, 500, dtype="float64", like="numpy")
    got = [next(chunks)]
    read = chunks._stream_info()["offset"]  # bytes the parser consumed so far
    if cut == "below what was read":
        size = int(rng.integers(1, read))
    elif cut == "ahead of the reader":
        size = data.index(b"\n", read + 200_000) + 1  # at a record end, blocks beyond the reader
    else:
        size = data.index(b"\n", read + 200_000) - 3
    os.truncate(path, size)
    with pytest.raises(NativeIOError, match=f"truncated.*byte {size}\\b") as info:
        for c in chunks:
            got.append(c)
    assert isinstance(info.value, OSError) and isinstance(info.value, tensorffi.TensorFFIError)
    assert chunks.closed
    rows = np.concatenate(got)
    assert 500 <= rows.shape[0] < want.shape[0]
    check(rows, want[: rows.shape[0]])  # what was yielded is intact
    if cut != "below what was read":
        # every record that ended before the cut was yielded, none after it
        assert rows.shape[0] == data[:size].count(b"\n")
    if opener == "file object":
        source.close()


def test_growth_while_streaming_reads_the_size_at_open(tmp_path, rng):
    """A file appended to while it streams is read up to its size when it was opened,
    as read_csv reads the size it maps: a record half-written after that is not read."""
    data, want = random_table(rng, rows=20000, cols=2)
    path = tmp_path / "t.csv"
    path.write_bytes(data)
    chunks = tio.iter_csv(path, 1000, dtype="float64")
    got = [next(chunks)]
    with open(path, "ab") as f:
        f.write(b"1.5,2.5\n3.5,")  # a row and half a row
    got += list(chunks)
    check(torch.cat(got), want)
