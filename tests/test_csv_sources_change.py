# SPDX-License-Identifier: MIT
"""CSV sources that change under the reader, and iterables for usecols (issue 37).
On 36e677b: ``iter_csv`` yielded the rows of a file truncated and rewritten past its old
size (logrotate's copytruncate) as if they continued the old one; CSVDataset workers cut
byte ranges from the size each saw, so a file appended to between worker starts lost
rows with no error; ``read_csv(usecols=<generator>)`` gave a table with no columns."""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import torch

import tensorffi
import tensorffi.io as tio
from tensorffi.errors import NativeIOError


def table(rng, rows: int, cols: int = 3) -> tuple[bytes, np.ndarray]:
    values = rng.standard_normal((rows, cols)) * 10.0 ** rng.integers(-3, 4, (rows, cols))
    text = "".join(",".join(f"{v:.9g}" for v in row) + "\n" for row in values)
    want = np.array([[float(f) for f in line.split(",")] for line in text.splitlines()])
    return text.encode(), want


# --------------------------------------------------------------------------- #
# usecols: any iterable                                                        #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("make", [
    lambda cols: iter(cols), lambda cols: (c for c in cols), lambda cols: map(int, map(str, cols)),
    lambda cols: tuple(cols), lambda cols: np.array(cols)])
@pytest.mark.parametrize("size", ["small", "large"])
def test_usecols_takes_any_iterable(tmp_path, rng, make, size):
    data, want = table(rng, 20 if size == "small" else 30000, cols=5)
    path = tmp_path / "t.csv"
    path.write_bytes(data)
    cols = [int(c) for c in rng.permutation(5)[:3]]
    ref = np.loadtxt(path, delimiter=",", usecols=cols, ndmin=2)
    got = tio.read_csv(path, dtype="float64", usecols=make(cols), like="numpy")
    np.testing.assert_array_equal(got, ref)
    chunks = list(tio.iter_csv(path, 1000, dtype="float64", usecols=make(cols), like="numpy"))
    np.testing.assert_array_equal(np.concatenate(chunks), ref)
    np.testing.assert_array_equal(got, want[:, cols])


def test_usecols_names_from_a_generator(rng):
    data, want = table(rng, 12, cols=3)
    text = b"a,b,c\n" + data
    got = tio.read_csv(text, dtype="float64", usecols=(n for n in ["c", "a"]), like="numpy")
    np.testing.assert_array_equal(got, want[:, [2, 0]])


def test_usecols_that_is_not_iterable_is_a_type_error():
    with pytest.raises(TypeError, match="usecols must be a column index or name, or an iterable"):
        tio.read_csv(b"1,2\n", usecols=1.5)


# --------------------------------------------------------------------------- #
# iter_csv: a file rewritten while it streams                                  #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("how", ["copytruncate, longer", "copytruncate, same size", "rewritten in place"])
def test_a_file_rewritten_while_streaming_is_an_error(tmp_path, rng, how):
    data, want = table(rng, int(rng.integers(20000, 30000)))
    path = tmp_path / "log.csv"
    path.write_bytes(data)
    chunks = tio.iter_csv(path, 500, dtype="float64", like="numpy")
    got = [next(chunks)]
    new, _ = table(rng, int(rng.integers(40000, 50000)))
    if how == "copytruncate, longer":
        with open(path, "r+b") as f:  # logrotate copytruncate: same inode, cut to 0, then the new log
            f.truncate(0)
            f.write(new)
    elif how == "copytruncate, same size":
        with open(path, "r+b") as f:
            f.truncate(0)
            f.write(new[: len(data)])
    else:
        with open(path, "r+b") as f:  # an editor saving in place
            f.write(new[: len(data)])
        os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1_000_000))
    with pytest.raises(NativeIOError, match="rewritten while it was read"):
        for c in chunks:
            got.append(c)
    rows = np.concatenate(got)
    np.testing.assert_array_equal(rows, want[: rows.shape[0]])  # only the old file's rows, intact


def test_a_file_appended_while_streaming_is_read_to_its_size_at_open(tmp_path, rng):
    data, want = table(rng, 25000)
    path = tmp_path / "grow.csv"
    path.write_bytes(data)
    chunks = tio.iter_csv(path, 700, dtype="float64", like="numpy")
    got = [next(chunks)]
    more, _ = table(rng, 3000)
    with open(path, "ab") as f:
        f.write(more)
    got += list(chunks)
    np.testing.assert_array_equal(np.concatenate(got), want)


# --------------------------------------------------------------------------- #
# CSVDataset: one snapshot for every worker                                    #
# --------------------------------------------------------------------------- #


def _rows(loader) -> np.ndarray:
    parts = [np.asarray(c) for c in loader]
    return np.concatenate(parts) if parts else np.zeros((0, 3))


def _sorted(a: np.ndarray) -> np.ndarray:
    return a[np.lexsort(a.T[::-1])]


@pytest.mark.parametrize("workers", [0, 2])
def test_dataset_workers_read_one_snapshot_of_a_growing_file(tmp_path, rng, workers):
    data, want = table(rng, 20000)
    path = tmp_path / "d.csv"
    path.write_bytes(data)
    ds = tio.CSVDataset(path, 1000, dtype="float64")
    more, more_want = table(rng, 9000)
    with open(path, "ab") as f:  # appended after the dataset was made, before any worker started
        f.write(more)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = _rows(loader)
    np.testing.assert_array_equal(_sorted(got), _sorted(want))  # every row once, none of the appended
    if workers == 0:
        assert any(issubclass(w.category, tio.FileChangedWarning) for w in seen)
    ds.refresh()
    got = _rows(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers))
    np.testing.assert_array_equal(_sorted(got), _sorted(np.concatenate([want, more_want])))


@pytest.mark.parametrize("change", ["truncated", "replaced", "rewritten"])
def test_dataset_over_a_file_changed_since_its_snapshot_is_an_error(tmp_path, rng, change):
    data, _ = table(rng, 5000)
    path = tmp_path / "d.csv"
    path.write_bytes(data)
    ds = tio.CSVDataset(path, 1000, dtype="float64")
    new, _ = table(rng, 8000)
    if change == "truncated":
        os.truncate(path, len(data) // 2)
        match = "truncated"
    elif change == "replaced":
        other = tmp_path / "new.csv"
        other.write_bytes(new)
        os.replace(other, path)
        match = "replaced"
    else:
        with open(path, "r+b") as f:
            f.truncate(0)
            f.write(new)
        match = "rewritten"
    with pytest.raises(NativeIOError, match=match):
        list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0))
    with pytest.raises(Exception, match=match):  # from a worker: the DataLoader re-raises it
        list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))
