# SPDX-License-Identifier: MIT
"""NumPy's and pandas' own reader tests, run with tensorffi.io.read_csv in their readers' place.

The installed NumPy's ``lib/tests/test_loadtxt.py`` (and the loadtxt tests of
``lib/tests/test_io.py``) and pandas' float, NA, usecols, skiprows, comment, quoting,
empty-input and header-name parser tests run in a fresh pytest process with
tests/csv_peers_plugin.py, which routes ``numpy.loadtxt`` and ``pandas.read_csv``
calls to ``read_csv`` wherever the options map and skips the others with the reason
(a subprocess, so that the substitution never reaches the references of the other
tests). Every selected test must pass. The tests deselected below are out of scope,
each for the reason given (tests/README.md lists the reasons).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tensorffi

np = pytest.importorskip("numpy")

#: NumPy tests out of scope: test name -> reason
NUMPY_OUT = {
    "test_exception_message_bad_values": "error wording: read_csv names line, column and byte offset",
    "test_ragged_error": "error wording: read_csv names line, column and byte offset",
    "test_bad_newline_in_iterator": "error wording: read_csv names line, column and byte offset",
    "test_ragged_usecols": "ragged records are errors (every record has the first one's field count)",
    "test_null_character": "NUL bytes are refused anywhere, so a NUL delimiter is too",
    "test_max_rows_with_read_continuation": "a file object is read to its end: max_rows does not leave it positioned "
                                            "after the rows read",
    "test_max_rows_empty_lines": "blank lines are skipped without NumPy's warning that they do not count toward "
                                 "max_rows",
    "test_exception_negative_row_limits": "error wording: the message names read_csv's argument (ValueError, as NumPy)",
    "test_exception_noninteger_row_limits": "error wording: the message names read_csv's argument (TypeError, as NumPy)",
    "test_default_float_converter_no_default_hex_conversion": "error wording: read_csv names line, column and byte offset",
    "test_default_float_converter_exception": "error wording: read_csv names line, column and byte offset",
}

#: pandas tests out of scope: test name -> reason
PANDAS_OUT = {
    "test_non_string_na_values": "numeric na_values match by text; pandas also by value (-999 vs -999.000)",
    "test_bool_and_nan_to_float": "True/False columns",
    "test_bool_and_nan_to_int": "True/False columns, and error wording (an NA word in an int64 column names its line, "
                                "column and byte offset)",
    "test_usecols_index_col_false": "ragged records are errors (pandas pads or drops fields)",
    "test_uneven_length_cols": "ragged records are errors (pandas pads or drops fields)",
    "test_uneven_lines_with_usecols": "ragged records are errors (pandas pads or drops fields)",
    "test_missing_trailing_delimiters": "ragged records are errors (pandas pads or drops fields)",
    "test_trailing_delimiters": "ragged records are errors (pandas pads or drops fields)",
    "test_no_header_two_extra_columns": "ragged records are errors (pandas pads or drops fields)",
    "test_comment_char_in_default_value": "ragged records are errors (pandas pads or drops fields)",
    "test_empty_usecols": "an empty input is an empty table with NumPy's warning, not pandas' EmptyDataError",
    "test_read_empty_with_usecols": "an empty input is an empty table with NumPy's warning, not pandas' EmptyDataError",
    "test_skiprows_past_end_of_file": "an empty input is an empty table with NumPy's warning, not pandas' EmptyDataError",
    "test_skiprows_negative": "a negative skiprows is refused, as NumPy refuses it (pandas reads 0)",
    "test_unbalanced_quoting": "error wording: read_csv names line, column and byte offset",
    "test_read_nrows_bad": "error wording: the message names read_csv's max_rows, not nrows",
    "test_mangled_unnamed_placeholders": "empty header fields stay empty names (pandas: 'Unnamed: i')",
    "test_mangle_dupe_cols_already_exists_unnamed_col": "empty header fields stay empty names (pandas: 'Unnamed: i')",
    "test_unnamed_columns": "empty header fields stay empty names (pandas: 'Unnamed: i')",
    "test_1000_sep": "thousands separators only between digits (pandas' C reader takes '2,,,5' and '-2,334,')",
    "test_thousands_digit_char": "a digit cannot be the thousands separator",
    "test_read_csv_delimiter_and_sep_no_default": "delimiter '.' is refused (a character of numbers)",
    "test_sub_character": "pandas' data files are not in its wheel",
    "test_read_csv_local": "pandas' data files are not in its wheel",
    "test_read_csv_dataframe": "pandas' data files are not in its wheel",
    "test_read_csv_no_index_name": "pandas' data files are not in its wheel",
    "test_read_csv_wrong_num_columns": "pandas' data files are not in its wheel",
}

PANDAS_FILES = ["common/test_float.py", "common/test_decimal.py", "common/test_inf.py", "common/test_ints.py",
                "common/test_common_basic.py", "test_na_values.py", "usecols/test_usecols_basic.py",
                "test_skiprows.py", "test_comment.py", "test_quoting.py", "dtypes/test_empty.py",
                "test_mangle_dupes.py"]


def _run(files: list[Path], rootdir: Path, select: str, out: dict[str, str]) -> tuple[int, str]:
    missing = [f for f in files if not f.exists()]
    if missing:
        pytest.skip(f"this install has no test files ({missing[0]} is missing)")
    env = dict(os.environ)
    paths = [str(Path(__file__).parent), str(Path(tensorffi.__file__).parents[1]), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    keep = " and ".join(f"not {name}" for name in out)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "csv_peers_plugin",
           f"--rootdir={rootdir}", *map(str, files), "-k", f"({select}) and {keep}" if select else keep]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr


def _check(rc: int, out: str, least: int) -> None:
    summary = out.strip().splitlines()[-1] if out.strip() else ""
    assert rc == 0, out[-6000:]
    assert not re.search(r"\d+ (failed|errors?)\b", summary), summary
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= least, summary


def test_numpy_loadtxt_suite_passes_with_read_csv():
    tests = Path(np.__file__).parent / "lib" / "tests"
    rc, out = _run([tests / "test_loadtxt.py", tests / "test_io.py"], tests.parents[1], "loadtxt or LoadTxt",
                   NUMPY_OUT)
    _check(rc, out, 50)  # 20 before the integer dtypes and loadtxt's default delimiter (runs of white space)


def test_pandas_parser_suite_passes_with_read_csv():
    pd = pytest.importorskip("pandas")
    parser = Path(pd.__file__).parent / "tests" / "io" / "parser"
    # the C engine's high-memory run only: the low-memory and Python engines run the
    # same tests on the same calls, which the adapter routes to read_csv all alike
    rc, out = _run([parser / f for f in PANDAS_FILES], parser.parents[3], "c_high or not (c_low or python or pyarrow)",
                   PANDAS_OUT)
    _check(rc, out, 150)
