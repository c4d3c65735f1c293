# SPDX-License-Identifier: MIT
"""read_csv against a reference parser (tests/fuzz/csvfuzz.py) on generated tables and
byte-level mutations of them: the right values for valid input, a ParseError on the
right line for invalid input, never a crash. Fixed seeds by default (a failure
reproduces); a long random-seed run is marked slow."""
from __future__ import annotations

import os

import numpy as np
import pytest

from fuzz import csvfuzz, csvopts


@pytest.mark.parametrize("seed", range(8))
def test_csv_fuzz_fixed_seeds(seed):
    counts = csvfuzz.run(seed, 60)
    assert counts["ok"] > 0 and counts["error"] > 0  # both sides of the oracle were exercised


@pytest.mark.parametrize("seed", range(6))
def test_csv_options_and_integer_fuzz_fixed_seeds(seed):
    """Integer tables at their types' edges and the reader options (thousands, decimal,
    na_values, keep_default_na, missing fills), read_csv and iter_csv alike."""
    counts = csvopts.run(1000 + seed, 60)
    assert counts["ok"] > 0 and counts["error"] > 0


def test_generated_tables_parse_exactly():
    """Unmutated tables: every value is float() of its text, bit for bit."""
    rng = np.random.default_rng(12345)
    for _ in range(150):
        case, table = csvfuzz.valid_table(rng)
        assert csvfuzz.check(case) == "ok"
        ref = csvfuzz.reference(case)
        assert ref.size == table.size == 0 or np.array_equal(ref, table, equal_nan=True), case.note


@pytest.mark.parametrize(
    "data, header, line",
    [
        (b"1,2\n3,x\n", False, 2),
        (b'a,"b\nc"\n1,2\n3,"4\n', True, 4),
        (b"1,2\r\n3,4\r\n5,6,7\r\n", False, 3),
        (b"1,2\n# c\n3,4\x00\n", False, 3),
        (b"1,2\n3,\xff\n", False, 2),
    ],
)
def test_reference_parser_agrees_on_known_errors(data, header, line):
    """The oracle itself: known inputs and the line read_csv reports for them."""
    case = csvfuzz.Case(data, header, "#")
    with pytest.raises(csvfuzz.Invalid) as info:
        csvfuzz.reference(case)
    assert csvfuzz.line_of(data, info.value.offset) == line
    assert csvfuzz.check(case) == "error"


@pytest.mark.slow
def test_csv_fuzz_random_seed():
    seed = int(os.environ.get("TENSORFFI_FUZZ_SEED", np.random.SeedSequence().entropy % 2**31))
    print(f"csv fuzz seed {seed}")
    for k in range(int(os.environ.get("TENSORFFI_FUZZ_CSV_ROUNDS", "100"))):
        csvfuzz.run(seed * 1000 + k, 100)
