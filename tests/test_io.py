# SPDX-License-Identifier: MIT
"""tensorffi.io.read_csv against independent references.

Numbers: float64 must be bit-identical to Python's ``float()``; float32, float16 and
bfloat16 are checked against an exact rational rounding (``fractions.Fraction``),
itself checked against ``float()`` for float64. Inputs: random strings of many
shapes, exact halfway cases, subnormals, long mantissas, extreme exponents, and the
published test tables of Go's strconv and fast_float. CSV structure is checked
against Python's ``csv`` module; errors at exactly known positions, including either
side of internal chunk boundaries (the chunk size is shrunk to a few bytes).

Run ``python tests/test_io.py --write-pow5-table`` to regenerate csrc/parse_pow5.h.
"""
from __future__ import annotations

import csv
import io
import math
import os
import struct
import sys
import threading
import tracemalloc
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

import tensorffi
from tensorffi import _demo
import tensorffi.io as tio
from tensorffi import ParseError

from conftest import simd_levels

ROOT = Path(__file__).resolve().parent.parent


#: Tests whose subject does not depend on the parse path run once.
ONE_PATH = {"test_pow5_table_is_exact", "test_faults_outside_the_input_still_end_the_process", "test_demo_runs"}


def pytest_generate_tests(metafunc):
    if metafunc.function.__name__ not in ONE_PATH:
        metafunc.parametrize("parse_path", ["one-call", "passes"], indirect=True)


@pytest.fixture(autouse=True)
def parse_path(request, monkeypatch):
    """Every test runs both ways: small inputs in one native call (tf_parse_small_*),
    and the parallel count-and-fill passes that larger inputs take."""
    path = getattr(request, "param", "one-call")
    if path == "passes":
        monkeypatch.setattr(tio, "_SMALL_BYTES", -1)
    return path


# --------------------------------------------------------------------------- #
# references                                                                   #
# --------------------------------------------------------------------------- #

#: dtype -> (mantissa bits, exponent bits)
FORMATS = {
    torch.float64: (52, 11),
    torch.float32: (23, 8),
    torch.float16: (10, 5),
    torch.bfloat16: (7, 8),
}
INT_VIEW = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}


def exact_bits(text: str, mb: int, eb: int) -> int:
    """IEEE bits of the binary format (mb, eb) nearest to decimal `text` (ties to even)."""
    t = text.strip().lower()
    neg = t.startswith("-")
    body = t.lstrip("+-")
    sign = 1 << (mb + eb)
    inf = ((1 << eb) - 1) << mb
    if body in ("inf", "infinity"):
        return inf | (sign if neg else 0)
    if body == "nan":
        return inf | (1 << (mb - 1)) | (sign if neg else 0)
    mant, _, exp = body.partition("e")
    whole, _, frac = mant.partition(".")
    digits = (whole + frac).lstrip("0")
    e10 = int(exp or 0)
    if not digits or set(digits) == {"0"}:
        return sign if neg else 0
    # order of magnitude of the value, to keep Fraction away from absurd exponents
    magnitude = e10 + len(whole.lstrip("0")) if whole.lstrip("0") else e10 - (len(frac) - len(frac.lstrip("0")))
    if magnitude > 400:
        return inf | (sign if neg else 0)
    if magnitude < -400:
        return sign if neg else 0
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # long digit strings are the point here
    try:
        x = Fraction(int(whole + frac)) * Fraction(10) ** (e10 - len(frac))
    finally:
        sys.set_int_max_str_digits(limit)
    bias = (1 << (eb - 1)) - 1
    emin, emax = 1 - bias, bias
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    e = max(e, emin)
    q = x / Fraction(2) ** (e - mb)
    k = q.numerator // q.denominator
    r = q - k
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and k & 1):
        k += 1
    if k == 1 << (mb + 1):
        k >>= 1
        e += 1
    if e > emax:
        bits = inf
    elif k < 1 << mb:
        bits = k
    else:
        bits = ((e + bias) << mb) | (k - (1 << mb))
    return bits | (sign if neg else 0)


def f64_bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def parse_column(strings: list[str], dtype: torch.dtype, kind: str = "torch", **kw) -> list[int]:
    """Parse strings as a one-column CSV; the raw bits of each value."""
    data = ("\n".join(strings) + "\n").encode()
    like = "numpy" if kind == "numpy" and dtype is not torch.bfloat16 else "torch"
    out = tio.read_csv(data, dtype=dtype, header=False, like=like, **kw)
    assert out.shape == (len(strings), 1)
    t = torch.from_numpy(np.ascontiguousarray(out)) if isinstance(out, np.ndarray) else out
    mask = (1 << (sum(FORMATS[dtype]) + 1)) - 1
    return [v & mask for v in t.flatten().view(INT_VIEW[dtype]).tolist()]


def check_exact(strings: list[str], dtype: torch.dtype, kind: str = "torch") -> None:
    mb, eb = FORMATS[dtype]
    got = parse_column(strings, dtype, kind)
    for s, g in zip(strings, got):
        want = exact_bits(s, mb, eb)
        if dtype is torch.float64:
            assert want == f64_bits(float(s)), f"the reference disagrees with float() on {s[:80]!r}"
        assert g == want, f"{dtype}: {s[:100]!r} -> {g:#x}, expected {want:#x}"


def random_decimals(rng: np.random.Generator, count: int) -> list[str]:
    """Decimal strings of many shapes: repr, %e/%f/%g, long digit runs, huge and tiny."""
    out = []
    for _ in range(count):
        k = rng.integers(0, 8)
        if k == 0:
            out.append(repr(float(rng.standard_normal() * 10.0 ** rng.integers(-320, 300))))
        elif k == 1:
            x = float(rng.uniform(-1, 1)) * 10.0 ** int(rng.integers(-40, 40))
            out.append(f"{x:.{rng.integers(1, 25)}e}")
        elif k == 2:
            out.append(f"{rng.uniform(-1e6, 1e6):.{rng.integers(0, 12)}f}")
        elif k == 3:
            nd = int(rng.integers(1, 60))
            digits = "".join(str(d) for d in rng.integers(0, 10, nd))
            dot = int(rng.integers(0, nd + 1))
            out.append(digits[:dot] + "." + digits[dot:] + f"e{rng.integers(-350, 320)}")
        elif k == 4:  # float32 shortest and long forms
            f = np.float32(rng.standard_normal() * 10.0 ** rng.integers(-44, 38))
            out.append(np.format_float_scientific(f, unique=True) if rng.random() < 0.5 else f"{float(f):.30e}")
        elif k == 5:
            out.append(str(int(rng.integers(-(2**62), 2**62))) + ("." if rng.random() < 0.3 else ""))
        elif k == 6:
            out.append(("-" if rng.random() < 0.5 else "+") + "." + "".join(str(d) for d in rng.integers(0, 10, int(rng.integers(1, 30)))))
        else:
            f = np.float16(rng.standard_normal() * 10.0 ** rng.integers(-7, 5))
            out.append(repr(float(f)))
    return out


def midpoints(rng: np.random.Generator, mb: int, eb: int, count: int) -> list[str]:
    """Exact decimal midpoints between adjacent values (normal, subnormal, near the
    overflow threshold), and values a hair above and below them."""
    bias = (1 << (eb - 1)) - 1

    def value(bits: int) -> Fraction:
        e, m = bits >> mb, bits & ((1 << mb) - 1)
        if e == 0:
            return Fraction(m) * Fraction(2) ** (1 - bias - mb)
        return Fraction(m | (1 << mb)) * Fraction(2) ** (e - bias - mb)

    out = []
    top = ((1 << eb) - 1) << mb  # infinity
    for i in range(count):
        which = i % 4
        if which == 0:
            bits = int(rng.integers(0, 1 << mb))  # subnormal
        elif which == 1:
            bits = top - 1 - int(rng.integers(0, 4))  # near the largest finite
        else:
            bits = int(rng.integers(1, top - 1))
        lo = value(bits)
        hi = value(bits + 1) if bits + 1 < top else lo + (lo - value(bits - 1))
        mid = (lo + hi) / 2
        for delta in (0, 1, -1):
            v = mid + delta * mid / (10**40)
            digits = 60 + int(rng.integers(0, 700)) if which == 3 else 60
            scaled = v * 10**digits
            text = str(scaled.numerator // scaled.denominator) + f"e-{digits}"
            if delta == 0 and scaled.denominator != 1:
                continue  # not representable in `digits` decimals
            out.append(("-" if rng.random() < 0.5 else "") + text)
    return out


# --------------------------------------------------------------------------- #
# the power-of-five table                                                      #
# --------------------------------------------------------------------------- #


def pow5_128(q: int) -> int:
    """fast_float's 128-bit power of five for exponent q (see csrc/parse_pow5.h)."""
    if q < 0:
        p5 = 5**-q
        z = p5.bit_length()
        if q >= -27:
            return 2 ** (z + 127) // p5 + 1
        c = 2 ** (2 * z + 128) // p5 + 1
        while c >= 1 << 128:
            c //= 2
        return c
    p5 = 5**q
    while p5 < 1 << 127:
        p5 *= 2
    while p5 >= 1 << 128:
        p5 //= 2
    return p5


def pow5_header() -> str:
    lines = [
        "/* SPDX-License-Identifier: MIT */",
        "/* parse_pow5.h: 128-bit truncated powers of five 5^q, q = -342 .. 308, normalised so",
        " * that the top bit is set (for q < 0 a rounded-up reciprocal), as used by the",
        " * Eisel-Lemire algorithm (fast_float). Generated by `python tests/test_io.py",
        " * --write-pow5-table`; tests/test_io.py checks it against exact integers. */",
        "#define TF_POW5_MIN (-342)",
        "#define TF_POW5_MAX 308",
        "static const uint64_t tf_pow5_128[2 * (TF_POW5_MAX - TF_POW5_MIN + 1)] = {",
    ]
    for q in range(-342, 309):
        c = pow5_128(q)
        lines.append(f"    0x{c >> 64:016x}u, 0x{c & ((1 << 64) - 1):016x}u, /* 5^{q} */")
    lines.append("};")
    return "\n".join(lines) + "\n"


def test_pow5_table_is_exact():
    path = ROOT / "csrc" / "parse_pow5.h"
    if not path.exists():
        pytest.skip("sources not available")
    assert path.read_text() == pow5_header()
    # spot checks against the published table
    assert pow5_128(-342) == (0xEEF453D6923BD65A << 64) | 0x113FAA2906A13B3F
    assert pow5_128(0) == 1 << 127
    for q in range(0, 56):  # exact powers while 5^q fits in 128 bits
        assert pow5_128(q) >> (pow5_128(q).bit_length() - (5**q).bit_length()) == 5**q


# --------------------------------------------------------------------------- #
# numbers                                                                      #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_random_decimals_round_exactly(rng, kind, dtype):
    check_exact(random_decimals(rng, 3000), dtype, kind)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_halfway_cases_round_to_even(rng, dtype):
    mb, eb = FORMATS[dtype]
    check_exact(midpoints(rng, mb, eb, 400 if dtype is torch.float64 else 800), dtype)


def test_float32_is_not_parsed_through_float64():
    # Double rounding: each of these parses to a float64 that lies exactly halfway
    # between two float32 values, so float32(float64(text)) is wrong for them.
    texts = [
        "1.00000005960464477550",   # float64 rounds to 1 + 2^-24 exactly
        "1.000000059604644775390626",
        "0.50000002980232238769531250001",
        "3.4028235677973366e38",    # just under float32 overflow threshold
        "7.006492321624085354618647916449580656401309709382578858785341419448955413429303e-46",
        "7.0064923216240861e-46",   # a hair above the smallest subnormal's half: rounds up
    ]
    got = parse_column(texts, torch.float32)
    for s, g in zip(texts, got):
        assert g == exact_bits(s, 23, 8), s
    # and at least one of them really is a double-rounding trap
    with np.errstate(over="ignore"):
        via64 = [int(np.float32(float(s)).view(np.int32)) & 0xFFFFFFFF for s in texts]
    assert via64 != [exact_bits(s, 23, 8) for s in texts]


def test_long_mantissas_and_extreme_exponents():
    one_half_ulp = "1.00000000000000011102230246251565404236316680908203125"
    texts = [
        one_half_ulp,  # exactly halfway: to even (1.0)
        one_half_ulp + "0" * 10000 + "1",  # a hair above, visible only at the end
        one_half_ulp[:-1] + "4",
        "2." + "2" * 4000 + "e+1",
        "0." + "0" * 5000 + "1e5010",
        "1" + "0" * 400 + "e-400",
        "9" * 800 + "e-800",
        "0.000000000000000000000000000000000000000000001e45",
        "123456789012345678901234567890",
        "1e-4294967296",
        "1e+4294967296",
        "1e-18446744073709551616",
        "1e+18446744073709551616",
        "0e+01234567890123456789",
        "-0.00e-01234567890123456789",
        "2e-324",
        "3e-324",
        "2.4703282292062328e-324",
        "2.4703282292062327e-324",
        "1.7976931348623158e308",
        "1.797693134862315808e308",
        "4.9406564584124654e-324",
    ]
    for dtype in FORMATS:
        check_exact(texts, dtype)


# Published tables: the decimal inputs of Go's strconv tests (src/strconv/atof_test.go,
# BSD licence) and of fast_float's tests (tests/basictest.cpp), compared with float()
# and the exact reference; their expected outputs are checked too.
GO_ATOF = [
    ("1", "1"), ("+1", "1"), ("1e23", "1e+23"), ("1E23", "1e+23"), ("100000000000000000000000", "1e+23"),
    ("1e-100", "1e-100"), ("123456700", "1.234567e+08"), ("99999999999999974834176", "9.999999999999997e+22"),
    ("100000000000000000000001", "1.0000000000000001e+23"), ("100000000000000008388608", "1.0000000000000001e+23"),
    ("100000000000000016777215", "1.0000000000000001e+23"), ("100000000000000016777216", "1.0000000000000003e+23"),
    ("-1", "-1"), ("-0.1", "-0.1"), ("-0", "-0"), ("1e-20", "1e-20"), ("625e-3", "0.625"),
    ("0", "0"), ("0e0", "0"), ("-0e0", "-0"), ("+0e0", "0"), ("0e-0", "0"), ("-0e-0", "-0"), ("0e+0", "0"),
    ("0e+01234567890123456789", "0"), ("0.00e-01234567890123456789", "0"), ("-0e+01234567890123456789", "-0"),
    ("0e291", "0"), ("0e292", "0"), ("0e347", "0"), ("0e348", "0"), ("-0e291", "-0"), ("-0e348", "-0"),
    ("nan", "nan"), ("NaN", "nan"), ("NAN", "nan"), ("inf", "inf"), ("-Inf", "-inf"), ("+INF", "inf"),
    ("-Infinity", "-inf"), ("+INFINITY", "inf"), ("Infinity", "inf"),
    ("1.7976931348623157e308", "1.7976931348623157e+308"), ("-1.7976931348623157e308", "-1.7976931348623157e+308"),
    ("1.7976931348623159e308", "inf"), ("-1.7976931348623159e308", "-inf"),
    ("1.7976931348623158e308", "1.7976931348623157e+308"), ("-1.7976931348623158e308", "-1.7976931348623157e+308"),
    ("1.797693134862315808e308", "inf"), ("-1.797693134862315808e308", "-inf"),
    ("1e308", "1e+308"), ("2e308", "inf"), ("1e309", "inf"), ("1e310", "inf"), ("-1e310", "-inf"),
    ("1e400", "inf"), ("-1e400", "-inf"), ("1e400000", "inf"), ("-1e400000", "-inf"),
    ("1e-305", "1e-305"), ("1e-306", "1e-306"), ("1e-307", "1e-307"), ("1e-308", "1e-308"), ("1e-309", "1e-309"),
    ("1e-310", "1e-310"), ("1e-322", "1e-322"), ("5e-324", "5e-324"), ("4e-324", "5e-324"), ("3e-324", "5e-324"),
    ("2e-324", "0"), ("1e-350", "0"), ("1e-400000", "0"),
    ("1e-4294967296", "0"), ("1e+4294967296", "inf"), ("1e-18446744073709551616", "0"),
    ("1e+18446744073709551616", "inf"),
    ("2.2250738585072012e-308", "2.2250738585072014e-308"), ("2.2250738585072011e-308", "2.225073858507201e-308"),
    ("4.630813248087435e+307", "4.630813248087435e+307"), ("22.222222222222222", "22.22222222222222"),
    ("2." + "2" * 4000 + "e+1", "22.22222222222222"),
    ("1.00000000000000011102230246251565404236316680908203125", "1"),
    ("1.00000000000000011102230246251565404236316680908203124", "1"),
    ("1.00000000000000011102230246251565404236316680908203126", "1.0000000000000002"),
    ("1.00000000000000011102230246251565404236316680908203125" + "0" * 10000 + "1", "1.0000000000000002"),
    ("1.00000000000000033306690738754696212708950042724609375", "1.0000000000000004"),
]
GO_ATOF32 = [
    ("1.000000059604644775390625", "1"), ("1.000000059604644775390624", "1"),
    ("1.000000059604644775390626", "1.0000001"),
    ("1.000000059604644775390625" + "0" * 10000 + "1", "1.0000001"),
    ("340282346638528859811704183484516925440", "3.4028235e+38"),
    ("-340282346638528859811704183484516925440", "-3.4028235e+38"),
    ("3.4028236e38", "inf"), ("-3.4028236e38", "-inf"), ("3.402823567e38", "3.4028235e+38"),
    ("-3.402823567e38", "-3.4028235e+38"), ("3.4028235678e38", "inf"), ("-3.4028235678e38", "-inf"),
    ("1e-38", "1e-38"), ("1e-39", "1e-39"), ("1e-40", "1e-40"), ("1e-41", "1e-41"), ("1e-42", "1e-42"),
    ("1e-43", "1e-43"), ("1e-44", "1e-44"), ("6e-45", "6e-45"), ("5e-45", "6e-45"), ("1e-45", "1e-45"),
    ("2e-45", "1e-45"), ("3e-45", "3e-45"), ("4951760157141521099596496896", "4.9517602e+27"),
]
FAST_FLOAT = [
    "9007199254740993.0", "9007199254740993.0" + "0" * 1000, "860228122.6654514319E+90",
    "10000000000000000000", "10000000000000000000000000000001000000000000",
    "10000000000000000000000000000000000000000001", "1.1920928955078125e-07",
    "1.0000000000000006661338147750939242541790008544921875", "1090544144181609348835077142190",
    "2.2250738585072013e-308", "-92666518056446206563E3", "-42823146028335318693e-128",
    "90054602635948575728E72",
    "1.00000000000000188558920870223463870174566020691753515394643550663070558368373221972569761144603605635692374830246134201063722058e-309",
    "0e9999999999999999999999999999", "-2402844368454405395.2", "2402844368454405395.2",
    "7.0420557077594588669468784357561207962098443483187940792729600000e+59",
    "-1.7339253062092163730578609458683877051596800000000000000000000000e+42",
    "-2.0972622234386619214559824785284023792871122537545728000000000000e+52",
    "-4.4900312744003159009338275160799498340862630046359789166919680000e+61", "+1",
    "1.797693134862315700000000000000001e308", "3e-324", "1.00000006e+09", "4.9406564584124653e-324",
    "4.9406564584124654e-324", "2.2250738585072009e-308", "2.2250738585072014e-308", "1.7976931348623157e308",
    "1.7976931348623158e308", "4503599627370496.5", "4503599627475352.5", "4503599627475353.5",
    "2251799813685248.25", "1125899906842624.125", "1125899906842901.875", "2251799813685803.75",
    "4503599627370497.5", "45035996.273704995", "45035996.273704985",
    "1234456789012345678901234567890e9999999999999999999999999999", "1.8e308", "2e30000000000000000", "1.9e308",
    "-2139879401095466344511101915470454744.9813888656856943E+272",
    # 32-bit cases
    "1.1754941406275178592461758986628081843312458647327962400313859427181746759860647699724722770042717456817626953125",
    "1.1754941406275178592461758986628081843312458647327962400313859427181746759860647699724722770042717456817626953125e-38",
    "1.1754941406275178592461758986628081843312458647327962400313859427181746759860647699724722770042717456817626953125" + "0" * 656,
    "1090544144181609348835077142190", "1.1754943508e-38", "30219.0830078125", "16252921.5", "5322519.25",
    "3900245.875", "1510988.3125", "782262.28125", "328381.484375", "156782.0703125", "85003.24609375",
    "7.5464513301849365", "1.1877630352973938", "0.30531780421733856", "0.21791061013936996",
    "0.09289376810193062", "0.012114629615098238", "0.004221370676532388", "0.0015924838953651488",
    "0.00036393293703440577", "1.1754947011469036e-38", "7.0064923216240854e-46", "8388614.5", "7.0060e-46",
    "3.4028234664e38", "3.4028234665e38", "3.4028234666e38", "3.5028234666e38", "2e3000",
    "4.7019774032891500318749461488889827112746622270883500860350068251e-38",
    "3.1415926535897932384626433832795028841971693993751058209749445923078164062862089986280348253421170679",
    "2.3509887016445750159374730744444913556373311135441750430175034126e-38",
    "0.000000000000000000000000000000000000011754943508222875079687365372222456778186655567720875215087517062784172594547271728515625",
    "0.00000000000000000000000000000000000000000000140129846432481707092372958328991613128026194187651577175706828388979108268586060148663818836212158203125",
    "0.00000000000000000000000000000000000002350988561514728583455765982071533026645717985517980855365926236850006129930346077117064851336181163787841796875",
]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_published_tables(dtype):
    texts = [s for s, _ in GO_ATOF] + [s for s, _ in GO_ATOF32] + FAST_FLOAT
    check_exact(texts, dtype)
    if dtype is torch.float64:
        got = parse_column([s for s, _ in GO_ATOF], dtype)
        for (s, out), g in zip(GO_ATOF, got):
            assert g == f64_bits(float(out)), (s[:60], out)
    if dtype is torch.float32:
        got = parse_column([s for s, _ in GO_ATOF32], dtype)
        for (s, out), g in zip(GO_ATOF32, got):
            assert g == exact_bits(out, 23, 8), (s[:60], out)


def test_special_values_and_signed_zero():
    texts = ["inf", "-INF", "+Infinity", "iNfInItY", "nan", "-NaN", "+nan", "-0", "+0.0", "-0e5", "-.0"]
    t = tio.read_csv(("\n".join(texts) + "\n").encode(), dtype=torch.float64, header=False).flatten().tolist()
    assert t[:4] == [math.inf, -math.inf, math.inf, math.inf]
    assert all(math.isnan(v) for v in t[4:7])
    assert [math.copysign(1, v) for v in t[4:]] == [1, -1, 1, -1, 1, -1, -1]
    assert parse_column(["-nan", "nan"], torch.float64) == [0xFFF8000000000000, 0x7FF8000000000000]


@pytest.mark.parametrize(
    "token",
    ["1e", "1e+", "1e-", ".", "-", "+", "-.", ".e1", "1.2.3", "0x10", "1_000", "++1", "--1", "1 2", "inf inity",
     "infin", "nan(1)", "1d5", "e5", "1,5e", "١", "1.5\u00a0x", "NA", "null", "1-", "5%", "$5", "0b101", "1.5f"],
)
def test_malformed_numbers_are_errors(token):
    data = f"1,2\n3,{token}\n".encode()
    with pytest.raises(ParseError) as info:
        tio.read_csv(data, header=False)
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err, tensorffi.TensorFFIError)
    assert err.line == 2
    if "," in token:  # "1,5e": the second field of the row is fine, a third one is malformed
        assert "expected 2" in str(err) or err.column == 5
    else:
        assert (err.column, err.offset) == (3, 6)
        assert err.text == token.rstrip("\u00a0 ") or err.text.startswith(token.split(" ")[0])


from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=True), min_size=1, max_size=40),
    st.sampled_from(["repr", ".17g", ".9e", ".3f", ".25e", ".8g"]),
)
def test_hypothesis_floats_round_trip(values, form):
    texts = [repr(v) if form == "repr" else format(v, form) for v in values]
    got = parse_column(texts, torch.float64)
    assert got == [f64_bits(float(t)) for t in texts]
    got32 = parse_column(texts, torch.float32)
    assert got32 == [exact_bits(t, 23, 8) for t in texts]


def test_grammar_accepts_every_documented_form():
    texts = ["5", "-5", "+5", ".5", "5.", "-.5", "+5.", "5.5", "1e5", "1E5", "1e+05", "1E-5", "-1.5e-3", "00012",
             "0.000", "1_0"[:1]]
    out = tio.read_csv(("\n".join(texts) + "\n").encode(), dtype=torch.float64, header=False).flatten().tolist()
    assert out == [float(s) for s in texts]


def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return set()


@pytest.mark.parametrize("simd", simd_levels())
def test_parse_simd_reports_the_level_that_runs(rng, monkeypatch, simd):
    """tf_parse_simd() follows the TENSORFFI_SIMD cap (AVX-512 kernels need VBMI and
    VBMI2 too), and every level gives the same bits."""
    flags = cpu_flags()
    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    level = int(tensorffi.core.lib.tf_parse_simd())
    if simd == "avx512" and flags:
        assert level == (2 if {"avx512vbmi", "avx512_vbmi2"} <= flags else 1)
    elif flags or simd == "scalar":
        assert level == {"scalar": 0, "avx2": 1}.get(simd, level)
    data, texts = realistic_table(rng, 400, "%.17g")
    got = tio.read_csv(data, dtype=torch.float64, header=False, threads=2).numpy()
    assert got.tobytes() == np.array([[float(t) for t in row] for row in texts]).tobytes()

#: Fields read by the vector reader of common numbers or sent back to the general path:
#: every documented form, with every terminator, and the lengths around its limits.
VALID_FIELDS = [
    "5", "-5", "+5", ".5", "5.", "-.5", "+5.", "5.5", "1e5", "1E5", "1e+05", "1E-5", "-1.5e-3", "00012", "0.000",
    "-0", "-0.0", "+0e7", "123456789012345678", "1234567890123456789", "12345678901234567890",
    "0.0029582824192359793", "-0.00000000000000000000000000001", "1" * 31, "1." + "2" * 29, "-1." + "2" * 28,
    "9" * 19 + ".5", "0." + "0" * 28 + "1", "3.4028236e38", "1e-45", "4.9e-324", "2.2250738585072011e-308",
    "1.7976931348623157e308", "1.8e308", "1e-400", "12345678901234567890123456789012.5", "0.1e99999999999999999999", "inf", "-nan", "1e0001",
]
BAD_FIELDS = ["1e", "1e+", "1e-", ".", "-", "+", "-.", ".e1", "1.2.3", "1..2", "0x10", "++1", "--1", "+-1", "1-",
              "1.5f", "1e5.5", "1.5e+-3", "1" * 33 + "x", "1." + "2" * 31 + "e", "5%", "NA"]


@pytest.mark.parametrize("simd", simd_levels())
@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_vector_field_reader_agrees_with_float(monkeypatch, simd, eol):
    """Each form in the middle of a long input (where the vector reader runs: it needs
    64 bytes ahead) and at its end, in the first, middle and last column."""
    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    pad = eol.join(["0.25,-1.5,7"] * 12) + eol
    for text in VALID_FIELDS:
        for col in range(3):
            row = ["1", "2", "3"]
            row[col] = text
            line = ",".join(row) + eol
            data = (pad + line + pad + line.rstrip()).encode()
            got = tio.read_csv(data, dtype=torch.float64, header=False)
            assert got.shape == (26, 3)
            for r in (12, 25):
                bits = got[r, col : col + 1].view(torch.int64).item() & (2**64 - 1)
                want = f64_bits(float(text))
                assert bits == want or (math.isnan(float(text)) and math.isnan(got[r, col].item())), (simd, text, r)
            assert got[11].tolist() == [0.25, -1.5, 7.0] and got[13].tolist() == [0.25, -1.5, 7.0]


@pytest.mark.parametrize("simd", simd_levels())
def test_vector_field_reader_rejects_malformed_numbers(monkeypatch, simd):
    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    pad = "0.25,-1.5\n" * 12
    for token in BAD_FIELDS:
        data = (pad + f"3,{token}\n" + pad).encode()
        with pytest.raises(ParseError) as info:
            tio.read_csv(data, header=False)
        assert (info.value.line, info.value.column, info.value.offset) == (13, 3, len(pad) + 2), (simd, token)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.text("0123456789.-+eE", min_size=1, max_size=36), min_size=3, max_size=3), st.sampled_from(simd_levels()))
def test_hypothesis_fields_in_the_vector_region(tokens, simd):
    """Any token over the number alphabet, read where the vector reader runs: the value
    of float() where Python accepts it (the same grammar on this alphabet), else a
    ParseError at the token."""
    os.environ["TENSORFFI_SIMD"] = simd
    try:
        pad = "0.25,-1.5,7\n" * 8
        line = ",".join(tokens) + "\n"
        data = (pad + line + pad).encode()
        try:
            want = [float(t) for t in tokens]
        except ValueError:
            bad = next(i for i, t in enumerate(tokens) if not _is_float(t))
            with pytest.raises(ParseError) as info:
                tio.read_csv(data, dtype=torch.float64, header=False)
            assert info.value.line == 9 and info.value.offset == len(pad) + sum(len(t) + 1 for t in tokens[:bad])
            return
        got = tio.read_csv(data, dtype=torch.float64, header=False)
        assert got.shape == (17, 3)
        assert got[8].view(torch.int64).tolist() == [struct.unpack("<q", struct.pack("<d", v))[0] for v in want]
        got32 = tio.read_csv(data, dtype=torch.float32, header=False)
        assert [b & 0xFFFFFFFF for b in got32[8].view(torch.int32).tolist()] == [exact_bits(t, 23, 8) for t in tokens]
    finally:
        del os.environ["TENSORFFI_SIMD"]


def _is_float(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def realistic_table(rng: np.random.Generator, rows: int, fmt: str) -> tuple[bytes, list[list[str]]]:
    """rows x 6 values as written by np.savetxt(fmt=...) from float32 or float64 data of
    mixed magnitudes, with signed zeros and subnormals mixed in."""
    x = rng.standard_normal((rows, 6)) * 10.0 ** rng.integers(-3, 4, size=(rows, 6))
    if fmt == "%.9g":
        x = x.astype(np.float32).astype(np.float64)
    specials = [-0.0, 0.0, 5e-324, -2.2250738585072014e-308, 1.4e-45, -1e-40, 3.4028235e38, 6.1e-5, -6.0e-8]
    idx = rng.integers(0, x.size, size=min(len(specials) * 3, x.size))
    x.flat[idx] = rng.choice(specials, size=len(idx))
    texts = [[fmt % v for v in row] for row in x.tolist()]
    return ("\n".join(",".join(r) for r in texts) + "\n").encode(), texts


@pytest.mark.parametrize("simd", simd_levels())
@pytest.mark.parametrize("fmt", ["%.9g", "%.17g", "%.6e", "%r"])
def test_realistic_data_rounds_exactly(rng, monkeypatch, simd, fmt):
    """float64 bit-identical to float(); float32/float16/bfloat16 rounded once from the text."""
    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    data, texts = realistic_table(rng, 300, fmt)
    flat = [t for row in texts for t in row]
    got64 = tio.read_csv(data, dtype=torch.float64, header=False, threads=2)
    assert got64.shape == (300, 6)
    assert got64.flatten().view(torch.int64).tolist() == [struct.unpack("<q", struct.pack("<d", float(t)))[0] for t in flat]
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        mb, eb = FORMATS[dtype]
        got = tio.read_csv(data, dtype=dtype, header=False)
        mask = (1 << (mb + eb + 1)) - 1
        bits = [v & mask for v in got.flatten().view(INT_VIEW[dtype]).tolist()]
        assert bits == [exact_bits(t, mb, eb) for t in flat], (dtype, simd, fmt)


# --------------------------------------------------------------------------- #
# CSV structure                                                                #
# --------------------------------------------------------------------------- #


def rows_of(result) -> list[list[float]]:
    return np.asarray(result, dtype=np.float64).tolist()


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("last_eol", [True, False])
def test_line_endings(eol, last_eol):
    text = eol.join(["a,b", "1,2", "3,4"]) + (eol if last_eol else "")
    t, names = tio.read_csv(text.encode(), return_names=True, dtype=torch.float64)
    assert names == ["a", "b"] and rows_of(t) == [[1, 2], [3, 4]]


def test_mixed_line_endings_and_blank_lines():
    text = b"\r\n\n  \t \r1,2\r\n\r\n3 , 4\n\n\r5,6"
    assert rows_of(tio.read_csv(text)) == [[1, 2], [3, 4], [5, 6]]


def test_byte_order_mark():
    t, names = tio.read_csv(b"\xef\xbb\xbfx,y\r\n1,2\r\n", return_names=True)
    assert names == ["x", "y"] and rows_of(t) == [[1, 2]]
    assert rows_of(tio.read_csv(b"\xef\xbb\xbf1,2\n")) == [[1, 2]]


def test_blanks_around_fields_and_quotes():
    data = b' 1 ,\t2\t, " 3 " ,"4",  "" ,\n5,6,7,8,9,10\n'
    t = tio.read_csv(data, dtype=torch.float64, header=False)
    assert t.shape == (2, 6)
    assert rows_of(t[1:]) == [[5, 6, 7, 8, 9, 10]]
    assert rows_of(t[0, :4].unsqueeze(0)) == [[1, 2, 3, 4]] and t[0, 4:].isnan().all()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_missing_values(dtype):
    data = b"a,b,c\n1,,3\n,,\n4,5,\n"
    t = tio.read_csv(data, dtype=dtype)
    assert t.dtype is dtype
    assert t.isnan().tolist() == [[False, True, False], [True, True, True], [False, False, True]]
    t = tio.read_csv(data, dtype=dtype, missing=-1.5)
    assert t.float().tolist() == [[1, -1.5, 3], [-1.5, -1.5, -1.5], [4, 5, -1.5]]
    t = tio.read_csv(b"1,\n", dtype=dtype, missing=math.inf)
    assert t.float().tolist() == [[1, math.inf]]


def test_header_modes():
    data = b"x,y\n1,2\n"
    assert tio.read_csv(data, return_names=True)[1] == ["x", "y"]
    t, names = tio.read_csv(b"1,2\n3,4\n", return_names=True)
    assert names is None and rows_of(t) == [[1, 2], [3, 4]]
    t, names = tio.read_csv(b"1,2\n3,4\n", header=True, return_names=True)
    assert names == ["1", "2"] and rows_of(t) == [[3, 4]]
    with pytest.raises(ParseError, match="not a number"):
        tio.read_csv(data, header=False)
    # auto: a first row mixing numbers and text is data (a typo is an error, not a header)
    with pytest.raises(ParseError) as info:
        tio.read_csv(b"1,2e\n3,4\n")
    assert (info.value.line, info.value.column, info.value.text) == (1, 3, "2e")
    t, names = tio.read_csv(b'"name ""quoted""", "multi\nline" ,plain , ""\n1,2,3,4\n', return_names=True)
    assert names == ['name "quoted"', "multi\nline", "plain", ""]
    assert rows_of(t) == [[1, 2, 3, 4]]


def test_header_and_data_must_agree():
    with pytest.raises(ParseError) as info:
        tio.read_csv(b"a,b,c\n1,2,3\n4,5\n")
    err = info.value
    assert (err.line, err.column, err.offset) == (3, 1, 12)
    assert "record has 2 fields, expected 3" in str(err)


def test_comments():
    data = b"# preamble \xc3\xa9\n  # indented\nx,y # units\n1,2#c\n#\n3,\"4#not a comment\"\n"
    with pytest.raises(ParseError):
        tio.read_csv(data, comment="#")  # the quoted field is not a number
    data = b"# preamble \xc3\xa9\n  # indented\nx,y # units\n1,2#c\n#\n3,\"4\"#c\n5,6"
    t, names = tio.read_csv(data, comment="#", return_names=True)
    assert names == ["x", "y"] and rows_of(t) == [[1, 2], [3, 4], [5, 6]]
    with pytest.raises(ParseError):
        tio.read_csv(b"1,2\n#3,4\n", comment=None)


def test_skiprows_counts_physical_lines():
    data = b"garbage \"line\nmore, garbage\na,b\n1,2\n3,x\n"
    with pytest.raises(ParseError) as info:
        tio.read_csv(data, skiprows=2)
    assert info.value.line == 5 and info.value.text == "x"
    t, names = tio.read_csv(data.replace(b"x", b"4"), skiprows=2, return_names=True)
    assert names == ["a", "b"] and rows_of(t) == [[1, 2], [3, 4]]
    assert tio.read_csv(b"1\n2\n", skiprows=5).shape == (0, 0)


@pytest.mark.parametrize("chunk", [None, 3])
def test_max_rows_stops_reading(monkeypatch, chunk):
    monkeypatch.setattr(tio, "_CHUNK_BYTES", chunk)
    data = b"a,b\n1,2\n\n3,4\n5,6\nnot,numbers\n\x00"
    assert rows_of(tio.read_csv(data, max_rows=3)) == [[1, 2], [3, 4], [5, 6]]
    assert rows_of(tio.read_csv(data, max_rows=1)) == [[1, 2]]
    assert tio.read_csv(data, max_rows=0).shape == (0, 2)
    with pytest.raises(ParseError):
        tio.read_csv(data, max_rows=4)


def test_usecols(kind):
    data = b'id,name,x,y\n1,"Smith, J.",0.5,1.5\n2,"O""Neil\nsecond line",2.5,3.5\n3,plain text,4.5,5.5\n'
    like = kind
    t, names = tio.read_csv(data, usecols=["y", "x"], return_names=True, like=like, dtype="float64")
    assert names == ["y", "x"] and rows_of(t) == [[1.5, 0.5], [3.5, 2.5], [5.5, 4.5]]
    assert rows_of(tio.read_csv(data, usecols=[0, -1], like=like)) == [[1, 1.5], [2, 3.5], [3, 5.5]]
    assert rows_of(tio.read_csv(data, usecols=2, like=like)) == [[0.5], [2.5], [4.5]]
    assert tio.read_csv(data, usecols=[], like=like).shape == (3, 0)
    with pytest.raises(ValueError, match="no column named"):
        tio.read_csv(data, usecols=["z"])
    with pytest.raises(ValueError, match="out of range"):
        tio.read_csv(data, usecols=[4])
    with pytest.raises(ValueError, match="twice"):
        tio.read_csv(data, usecols=[2, -2])
    with pytest.raises(ValueError, match="no header"):
        tio.read_csv(b"1,2\n", usecols=["a"])
    with pytest.raises(ParseError):  # the text column is not a number
        tio.read_csv(data)
    # skipped columns are still checked
    with pytest.raises(ParseError, match="never closed"):
        tio.read_csv(data + b'4,"open,6.5,7.5\n', usecols=["x"])
    with pytest.raises(ParseError, match="quote inside"):
        tio.read_csv(data + b'4,ab"c,6.5,7.5\n', usecols=["x"])
    with pytest.raises(ParseError, match="UTF-8"):
        tio.read_csv(data + b"4,\xc3\x28,6.5,7.5\n", usecols=["x"])


def test_usecols_takes_what_converts_to_an_integer(kind):
    """As NumPy's loadtxt: NumPy integers and objects with __index__ select columns,
    alone or in a sequence; a bool is refused (it is not meant as a column)."""

    class Col:
        def __index__(self) -> int:
            return 2

    data = b"1,2,3\n4,5,6\n"
    for usecols, want in ((Col(), [[3], [6]]), ([Col(), 0], [[3, 1], [6, 4]]), (np.uint8(1), [[2], [5]]),
                          ((np.int64(-1),), [[3], [6]]), (np.array([1, 0]), [[2, 1], [5, 4]])):
        assert rows_of(tio.read_csv(data, usecols=usecols, like=kind)) == want, usecols
        assert rows_of(np.concatenate(list(tio.iter_csv(data, 1, usecols=usecols, like="numpy")))) == want
    for bad in (True, [0, False]):
        with pytest.raises(TypeError, match="usecols must hold column indices or names"):
            tio.read_csv(data, usecols=bad)
    with pytest.warns(tio.EmptyDataWarning):  # an empty input: the columns usecols names
        assert tuple(tio.read_csv(b"", usecols=[Col(), 0]).shape) == (0, 2)


@pytest.mark.parametrize("delimiter", ["\t", ";", "|", " ", ":"])
def test_delimiters(delimiter):
    text = f"a{delimiter}b\n1{delimiter}2\n3{delimiter}4\n"
    t, names = tio.read_csv(text.encode(), delimiter=delimiter, return_names=True)
    assert names == ["a", "b"] and rows_of(t) == [[1, 2], [3, 4]]


def test_empty_inputs():
    for data in (b"", b"\n\n", b"   \r\n", b"# only\n# comments\n", b"\xef\xbb\xbf"):
        t, names = tio.read_csv(data, comment="#", return_names=True)
        assert t.shape == (0, 0) and names is None
        assert tio.read_csv(data, comment="#", header=True, return_names=True)[1] == []
    t, names = tio.read_csv(b"a,b\n\n# c\n", comment="#", return_names=True)
    assert t.shape == (0, 2) and names == ["a", "b"]


def test_records_ending_in_empty_fields_match_pandas(rng):
    """A last record whose last field is empty, at the end of the input with or without
    a line end (the single-pass small path once asked its row to fit before it knew the
    input had ended: TF_EINTERNAL on b","). pandas is the reference."""
    import pandas as pd

    cases = [b",", b",\n", b"1,", b" , ", b",,\r\n", b"1,2\n3,", b"1,\n,", b"1,2\n,\n\n"]
    for _ in range(20):  # and random ones: a few rows of 1-4 fields, some empty, maybe no final line end
        cols = int(rng.integers(1, 5))
        rows = [",".join("" if rng.random() < 0.4 else repr(float(rng.standard_normal())) for _ in range(cols))
                for _ in range(int(rng.integers(1, 4)))]
        cases.append(("\n".join(rows) + ("\n" if rng.random() < 0.5 else "")).encode())
    for data in cases:
        if not data.strip():
            continue  # no record at all (pandas: EmptyDataError; tensorffi: shape (0, 0), tested above)
        want = pd.read_csv(io.BytesIO(data), header=None, skipinitialspace=True).to_numpy(dtype="float64")
        for dtype in ("float64", "float32"):
            got = tio.read_csv(data, header=False, dtype=dtype, like="numpy")
            assert got.shape == want.shape, (data, got, want)
            assert np.array_equal(got, want.astype(dtype), equal_nan=True), (data, got, want)


def random_csv(
    rng: np.random.Generator, rows: int, cols: int, text_cols: set[int], mixed_eol: bool = False
) -> tuple[bytes, np.ndarray]:
    """A CSV with awkward but valid structure, and its numbers as float64."""
    values = np.empty((rows, cols))
    lines = []
    for r in range(rows):
        fields = []
        for c in range(cols):
            if c in text_cols:
                pieces = ["x", ",", '""', "\n", "\r\n", " ", "é", "#", "1.5"]
                s = "".join(rng.choice(pieces, size=int(rng.integers(0, 6))))
                fields.append('"' + s + '"')
                values[r, c] = np.nan
                continue
            x = float(rng.standard_normal() * 10.0 ** rng.integers(-5, 6))
            form = rng.integers(0, 5)
            text = repr(x) if form == 0 else f"{x:.6g}" if form == 1 else f"{x:.3e}" if form == 2 else f" {x:.5f} " if form == 3 else f'"{x}"'
            values[r, c] = float(text.strip().strip('"'))
            fields.append(text)
        lines.append(",".join(fields) + (" \t"[: int(rng.integers(0, 3))] if rng.random() < 0.1 else ""))
        if rng.random() < 0.1:
            lines.append(" " * int(rng.integers(0, 3)))  # a blank line
    if mixed_eol:
        ends = rng.choice(["\n", "\r\n", "\r"], size=len(lines))
        return "".join(line + end for line, end in zip(lines, ends)).encode(), values
    eol = "\r\n" if rng.random() < 0.5 else "\n"
    return (eol.join(lines) + eol).encode(), values


def test_against_python_csv_module(rng):
    data, values = random_csv(rng, 200, 6, {1, 4})
    rows = [r for r in csv.reader(io.StringIO(data.decode(), newline=""), skipinitialspace=True) if "".join(r).strip()]
    ref = np.array([[float(f) for i, f in enumerate(r) if i not in (1, 4)] for r in rows])
    got = tio.read_csv(data, dtype=torch.float64, usecols=[0, 2, 3, 5], header=False)
    assert np.array_equal(got.numpy(), ref)
    assert np.array_equal(ref, values[:, [0, 2, 3, 5]])


@pytest.mark.parametrize("simd", simd_levels())
def test_chunk_boundaries_everywhere(rng, monkeypatch, simd):
    """Tiny chunks put internal boundaries inside fields, quotes, CRLFs and quoted
    newlines; every size and thread count must give the single-chunk result."""
    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    data, values = random_csv(rng, 40, 4, {2})
    want = values[:, [0, 1, 3]]
    for chunk in list(range(1, 40)) + [97, 1000]:
        monkeypatch.setattr(tio, "_CHUNK_BYTES", chunk)
        for threads in (1, 3):
            got = tio.read_csv(data, dtype="float64", usecols=[0, 1, 3], header=False, threads=threads)
            assert np.array_equal(got.numpy(), want), (chunk, threads)


@pytest.mark.parametrize("text_cols", [set(), {1}])
def test_vector_and_scalar_counting_agree(rng, monkeypatch, text_cols):
    """Pass 1 counts 64 bytes at a time where the text is simple (AVX2) and line by
    line elsewhere; blank lines, trailing blanks and every line end must agree."""
    data, values = random_csv(rng, 3000, 3, text_cols, mixed_eol=True)
    numeric = [c for c in range(3) if c not in text_cols]
    results = []
    for simd in simd_levels():
        monkeypatch.setenv("TENSORFFI_SIMD", simd)
        for chunk in (None, 300, 4099):
            monkeypatch.setattr(tio, "_CHUNK_BYTES", chunk)
            results.append(tio.read_csv(data, dtype="float64", usecols=numeric, header=False, threads=2).numpy())
    for got in results:
        assert np.array_equal(got, values[:, numeric])


# --------------------------------------------------------------------------- #
# errors                                                                       #
# --------------------------------------------------------------------------- #


def test_parse_error_fields_and_message():
    data = "t,v\n0.0,1.5\n0.1,2..5\n".encode()
    with pytest.raises(ParseError) as info:
        tio.read_csv(data)
    err = info.value
    assert (err.line, err.column, err.offset, err.text) == (3, 5, 16, "2..5")
    msg = str(err)
    assert "line 3" in msg and "column 5" in msg and "byte offset 16" in msg and "2..5" in msg
    assert isinstance(err, ValueError) and isinstance(err, tensorffi.ParseError)


@pytest.mark.parametrize("simd", simd_levels())
def test_error_positions_after_quoted_newlines_are_physical_lines(monkeypatch, simd):
    """A quoted field that spans lines (text in a skipped column) still counts its
    lines: an error after it names the physical line, in the vector region too."""
    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    pad = "0.5,1.25,x\n" * 30
    data = ('a,b,c\n1,2,"multi\nline\r\ntext"\n' + pad + "3,4.5.6,y\n" + pad).encode()
    offset = data.index(b"4.5.6")
    for usecols in ([0, 1], None):
        with pytest.raises(ParseError) as info:
            tio.read_csv(data, usecols=usecols)
        err = info.value
        if usecols is None:  # column c holds text: the first data row is the error
            assert (err.line, err.column) == (2, 5)
            continue
        assert (err.line, err.column, err.offset, err.text) == (35, 3, offset, "4.5.6")


def test_error_column_counts_characters():
    data = "é,ü\n1,x\n".encode()
    with pytest.raises(ParseError) as info:
        tio.read_csv(data)
    assert (info.value.line, info.value.column, info.value.offset) == (2, 3, 8)
    data = "1,2 # ééé\n3,4 # ü  x\n5,6é\n".encode()
    with pytest.raises(ParseError) as info:
        tio.read_csv(data, comment="#")
    assert (info.value.line, info.value.column) == (3, 3)


def test_field_count_errors_name_both_counts():
    with pytest.raises(ParseError, match=r"line 3, column 1 .*record has 3 fields, expected 2"):
        tio.read_csv(b"1,2\n3,4\n5,6,7\n")
    with pytest.raises(ParseError, match=r"line 2, .*record has 1 field, expected 2"):
        tio.read_csv(b"1,2\n3\n")
    with pytest.raises(ParseError, match=r"record has 2 fields, expected 1"):
        tio.read_csv(b"1\n2,\n")


def test_unterminated_quote_points_at_its_opening(monkeypatch):
    data = b"a,b\n1,2\n3,\"4\n" + b"5,6\n" * 50
    for chunk in (None, 4, 7, 16):
        monkeypatch.setattr(tio, "_CHUNK_BYTES", chunk)
        with pytest.raises(ParseError, match="never closed") as info:
            tio.read_csv(data)
        assert (info.value.line, info.value.column, info.value.offset) == (3, 3, 10)


def test_nul_bytes_and_invalid_utf8():
    cases = [
        (b"1,2\n3,4\x00\n", 2, 4, "NUL"),
        (b"1,2\n3,\x004\n", 2, 3, "NUL"),
        (b"1,2\n\x00\n", 2, 1, "NUL"),
        (b"1,2\n3,\xff\n", 2, 3, "UTF-8"),
        (b"1,2\n3,4\n# \xc3\n", 3, 3, "UTF-8"),
        (b"a,\xed\xa0\x80\n1,2\n", 1, 3, "UTF-8"),  # a surrogate
        (b"a,\xc0\xaf\n1,2\n", 1, 3, "UTF-8"),      # an overlong form
        (b'a,"b\x00"\n1,2\n', 1, 5, "NUL"),
    ]
    for data, line, column, what in cases:
        with pytest.raises(ParseError, match=what) as info:
            tio.read_csv(data, comment="#")
        assert (info.value.line, info.value.column) == (line, column), data


def test_text_after_quotes_and_quotes_inside_fields():
    with pytest.raises(ParseError, match="after a closing quote") as info:
        tio.read_csv(b'1,"2" 3\n')
    assert info.value.column == 7
    with pytest.raises(ParseError, match="quote inside") as info:
        tio.read_csv(b"1,2\"\n")
    assert info.value.column == 4
    with pytest.raises(ParseError, match="not a number"):
        tio.read_csv(b'1,"2""3"\n')


def test_errors_either_side_of_chunk_boundaries(monkeypatch):
    """An error just before, at and just after every internal chunk boundary is
    reported at the same place as without chunks; the first error in the file wins."""
    base = [f"{i}.5,{i}.25" for i in range(30)]
    for bad_row in (3, 11, 17):
        rows = list(base)
        rows[bad_row] = f"{bad_row}.5,oops"
        rows[25] = "25.5,later"  # a second error further on
        data = ("\n".join(rows) + "\n").encode()
        expect_offset = data.index(b"oops")
        for chunk in [None] + list(range(1, 48)):
            monkeypatch.setattr(tio, "_CHUNK_BYTES", chunk)
            for threads in (1, 4):
                with pytest.raises(ParseError) as info:
                    tio.read_csv(data, header=False, threads=threads)
                err = info.value
                assert (err.line, err.offset, err.text) == (bad_row + 1, expect_offset, "oops"), (chunk, threads)


# --------------------------------------------------------------------------- #
# sources and results                                                          #
# --------------------------------------------------------------------------- #


def test_sources(tmp_path):
    data = b"a,b\n1,2\n3,4\n"
    want = [[1, 2], [3, 4]]
    path = tmp_path / "t.csv"
    path.write_bytes(data)
    assert rows_of(tio.read_csv(path)) == want
    assert rows_of(tio.read_csv(str(path))) == want
    assert rows_of(tio.read_csv(bytearray(data))) == want
    assert rows_of(tio.read_csv(memoryview(data))) == want
    assert rows_of(tio.read_csv(np.frombuffer(data, np.uint8))) == want
    assert rows_of(tio.read_csv(torch.frombuffer(bytearray(data), dtype=torch.uint8))) == want
    bio = io.BytesIO(b"skip me\n" + data)
    bio.readline()
    assert rows_of(tio.read_csv(bio)) == want
    with open(path, "rb") as f:
        assert rows_of(tio.read_csv(f)) == want
    with open(path, "rb") as f:
        f.readline()  # start after the header
        t, names = tio.read_csv(f, return_names=True)
        assert names is None and rows_of(t) == want
    with open(path, "rb", buffering=0) as f:
        assert rows_of(tio.read_csv(io.BufferedReader(f))) == want
    import gzip

    with gzip.open(tmp_path / "t.csv.gz", "wb") as g:
        g.write(data)
    with gzip.open(tmp_path / "t.csv.gz", "rb") as g:  # a file object that is not a plain file
        assert rows_of(tio.read_csv(g)) == want
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    assert tio.read_csv(empty).shape == (0, 0)
    with open(path, "r") as f, pytest.raises(TypeError, match="binary"):
        tio.read_csv(f)
    with pytest.raises(TypeError, match="source must be a path.*got int"):
        tio.read_csv(12345)
    with pytest.raises(FileNotFoundError, match="missing.csv"):
        tio.read_csv(tmp_path / "missing.csv")
    with pytest.raises(ParseError, match=str(path.name)):
        path.write_bytes(b"1,x\n")
        tio.read_csv(path)


@pytest.mark.parametrize(
    "dtype,np_dtype",
    [(torch.float32, np.float32), (torch.float64, np.float64), (torch.float16, np.float16), ("float32", np.float32),
     (np.float64, np.float64), ("double", np.float64)],
)
def test_result_kinds(dtype, np_dtype):
    data = b"1.5,2\n3,4.25\n"
    t = tio.read_csv(data, dtype=dtype)
    assert isinstance(t, torch.Tensor) and t.is_contiguous() and t.dtype == torch.from_numpy(np.zeros(1, np_dtype)).dtype
    for like in ("numpy", np, np.ndarray, np.zeros(1)):
        a = tio.read_csv(data, dtype=dtype, like=like)
        assert isinstance(a, np.ndarray) and a.dtype == np_dtype and a.flags.c_contiguous and a.flags.writeable
        assert a.tolist() == [[1.5, 2], [3, 4.25]]
    b = tio.read_csv(data, dtype=torch.bfloat16)
    assert b.dtype is torch.bfloat16 and b.tolist() == [[1.5, 2], [3, 4.25]]
    with pytest.raises(TypeError, match="bfloat16"):
        tio.read_csv(data, dtype=torch.bfloat16, like="numpy")


@pytest.mark.parametrize(
    "kwargs,exc",
    [
        ({"dtype": torch.int16}, TypeError), ({"dtype": "float8"}, TypeError), ({"delimiter": '"'}, ValueError),
        ({"delimiter": ",,"}, ValueError), ({"delimiter": "\n"}, ValueError), ({"delimiter": "1"}, ValueError),
        ({"delimiter": "é"}, ValueError), ({"comment": ","}, ValueError), ({"comment": "e"}, ValueError), ({"comment": " "}, ValueError),
        ({"header": "yes"}, ValueError), ({"skiprows": -1}, ValueError), ({"max_rows": -1}, ValueError),
        ({"max_rows": 1.5}, TypeError), ({"threads": 0}, ValueError), ({"missing": "x"}, TypeError),
        ({"like": "jax"}, ValueError), ({"usecols": [1.5]}, TypeError), ({"progress": 3}, TypeError),
    ],
)
def test_invalid_arguments(kwargs, exc):
    with pytest.raises(exc):
        tio.read_csv(b"1,2\n", **kwargs)


# --------------------------------------------------------------------------- #
# threads, progress, interruption                                              #
# --------------------------------------------------------------------------- #


def big_csv(rng: np.random.Generator, rows: int, cols: int = 8) -> tuple[bytes, np.ndarray]:
    values = rng.standard_normal((rows, cols)).astype(np.float32)
    text = "\n".join(",".join(repr(float(v)) for v in row) for row in values.tolist()) + "\n"
    return text.encode(), values


def test_threads_agree_on_a_larger_input(rng, monkeypatch):
    data, values = big_csv(rng, 5000)
    monkeypatch.setattr(tio, "_CHUNK_BYTES", 4096)
    for threads in (1, 2, 3, 8):
        t = tio.read_csv(data, threads=threads)
        assert np.array_equal(t.numpy(), values)


def test_concurrent_calls_are_thread_safe(rng, monkeypatch):
    monkeypatch.setattr(tio, "_CHUNK_BYTES", 8192)
    inputs = [big_csv(rng, 800 + 100 * i) for i in range(4)]
    bad = inputs[0][0] + b"1,2,3,4,5,6,7,oops\n"
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(5):
                data, values = inputs[i]
                assert np.array_equal(tio.read_csv(data, threads=2).numpy(), values)
                with pytest.raises(ParseError) as info:
                    tio.read_csv(bad, threads=2)
                assert info.value.line == 801 and info.value.text == "oops"
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_progress_reports_bytes_on_the_calling_thread(rng, monkeypatch):
    monkeypatch.setattr(tio, "_CHUNK_BYTES", 16384)
    monkeypatch.setattr("tensorffi.io._MIN_CHUNK", 1)
    data, values = big_csv(rng, 3000)
    seen: list[tuple[int, int, int]] = []
    t = tio.read_csv(data, threads=3, progress=lambda d, n: seen.append((d, n, threading.get_ident())))
    assert np.array_equal(t.numpy(), values)
    assert seen and all(n == len(data) for _, n, _ in seen)
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)
    assert seen[-1][0] == len(data)
    assert {ident for _, _, ident in seen} == {threading.get_ident()}


@pytest.mark.parametrize("max_rows", [None, 7])
def test_progress_bar(rng, capsys, max_rows):
    """Integer bytes that end exactly at the total: no clamping warning, no negative
    ETA, a full last frame (even when max_rows stops the parse early)."""
    tqdm = pytest.importorskip("tqdm")
    import warnings

    data, values = big_csv(rng, 500)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tqdm.TqdmWarning)
        t = tio.read_csv(data, progress=True, max_rows=max_rows)
    assert np.array_equal(t.numpy(), values[:max_rows])
    err = capsys.readouterr().err
    last = err.replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("read_csv: 100%|"), last
    done, _, total = last.split("|")[2].split()[0].partition("/")
    assert done == total, last
    assert "-" not in last.split("<")[1].split(",")[0], last  # no negative ETA


def test_progress_reports_are_integers_ending_at_the_total(rng, monkeypatch):
    monkeypatch.setattr(tio, "_CHUNK_BYTES", 4096)
    data, _ = big_csv(rng, 2000)
    for max_rows in (None, 10):
        calls: list[tuple[int, int]] = []
        tio.read_csv(data, progress=lambda d, t: calls.append((d, t)), max_rows=max_rows)
        assert all(type(d) is int and type(t) is int and 0 <= d <= t for d, t in calls)
        assert calls[0][0] == 0 and calls[-1][0] == calls[-1][1] and len({t for _, t in calls}) == 1
        assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_small_inputs_take_one_native_call(rng, monkeypatch, parse_path):
    """Up to _SMALL_BYTES (no usecols, no progress): one call, header decision included."""
    calls = []
    for name in ("_record", "_count"):
        real = getattr(tio, name)
        monkeypatch.setattr(tio, name, lambda *a, _n=name, _f=real, **k: calls.append(_n) or _f(*a, **k))
    for kernel, real in list(tio._small.items()):
        monkeypatch.setitem(tio._small, kernel, lambda *a, _f=real, **k: calls.append("small") or _f(*a, **k))
    data, values = big_csv(rng, 100)
    got, names = tio.read_csv(b"a,b,c,d,e,f,g,h\n" + data, return_names=True, dtype="float64")
    assert np.array_equal(got.numpy(), values) and names == list("abcdefgh")
    assert calls == (["small"] if parse_path == "one-call" else ["_record", "_count"])


def test_wide_headers_keep_every_name(rng, parse_path):
    names = [f"c{i}" for i in range(150)]
    values = rng.standard_normal((5, 150))
    data = (",".join(names) + "\n" + "\n".join(",".join(repr(v) for v in row) for row in values.tolist())).encode()
    got, got_names = tio.read_csv(data, dtype="float64", return_names=True)
    assert got_names == names and np.array_equal(got.numpy(), values)


def big_file(tmp_path: Path, rng: np.random.Generator, rows: int = 20000) -> Path:
    data, _ = big_csv(rng, rows)
    path = tmp_path / "big.csv"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("threads", [1, 2])
def test_file_truncated_from_a_progress_callback_is_an_error(tmp_path, rng, monkeypatch, threads):
    """The file shrinks under the memory map after the rows are counted: reading the
    lost pages raises SIGBUS, which becomes an OSError, not the end of the process."""
    monkeypatch.setattr(tio, "_CHUNK_BYTES", 64 << 10)
    path = big_file(tmp_path, rng)

    def shrink(done: int, total: int) -> None:
        if done == 0:
            os.truncate(path, 100)

    with pytest.raises(tensorffi.errors.NativeIOError) as info:
        tio.read_csv(path, progress=shrink, threads=threads)
    assert isinstance(info.value, OSError) and isinstance(info.value, tensorffi.TensorFFIError)
    assert "changed while it was read" in str(info.value)


@pytest.mark.parametrize("size", [1000, 10 << 20])
def test_file_truncated_after_mapping_is_an_error(tmp_path, rng, monkeypatch, parse_path, size):
    """Every native entry point reads the input under the guard: truncate the file
    right after it is mapped (one call for small inputs, header/count/fill for large)."""
    path = big_file(tmp_path, rng, rows=200 if size == 1000 else 20000)
    import tensorffi._csv_stream as streams  # where read_csv's sources are opened and mapped

    real_map = streams._map_file

    def map_then_truncate(f, pos, *size):
        arr = real_map(f, pos, *size)
        os.truncate(path, 100)
        return arr

    monkeypatch.setattr(streams, "_map_file", map_then_truncate)
    with pytest.raises(tensorffi.errors.NativeIOError, match="changed while it was read"):
        tio.read_csv(path, threads=2)
    # a clean read afterwards: the guard left nothing behind
    assert tio.read_csv(b"1,2\n3,4\n").tolist() == [[1, 2], [3, 4]]


@pytest.mark.parametrize("how", ["resize", "free", "swap", "delete"])
def test_tensor_source_changed_from_a_progress_callback(rng, monkeypatch, how):
    """C reads a tensor source's storage, held for the call: resizing or freeing it is
    refused, and a tensor that swaps or drops its storage leaves C reading the held one."""
    monkeypatch.setattr(tio, "_CHUNK_BYTES", 4096)
    data, values = big_csv(rng, 2000)
    box = [torch.empty(len(data), dtype=torch.uint8)]
    box[0].copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    src = box[0]

    def meddle(done: int, total: int) -> None:
        if done:
            return
        if how == "resize":
            box[0].resize_(len(data) * 8)
        elif how == "free":
            box[0].untyped_storage().resize_(0)
        elif how == "swap":
            box[0].set_(torch.zeros(10, dtype=torch.uint8))
        else:
            box.clear()

    del src
    if how in ("resize", "free"):
        with pytest.raises(RuntimeError, match="not resizable"):
            tio.read_csv(box[0], progress=meddle)
        kept = torch.empty(0, dtype=torch.uint8).set_(box[0].untyped_storage())
        assert kept.numpy().tobytes() == data  # untouched
    else:
        assert np.array_equal(tio.read_csv(box[0], progress=meddle).numpy(), values)


def test_faults_outside_the_input_still_end_the_process():
    """The guard only takes faults inside the input being parsed, on a thread that is
    parsing it; any other fault keeps its usual outcome (here: death by SIGSEGV, with
    Python's faulthandler on or off)."""
    import signal
    import subprocess

    code = "import tensorffi.io as t, ctypes; t.read_csv(b'1\\n' * 10); ctypes.string_at(0)"
    env = dict(os.environ)
    if "libasan" in env.get("LD_PRELOAD", ""):
        # Under the sanitizer job: ASan's own SIGSEGV handler would report this intended
        # fault (and abort); leave SIGSEGV to the process as a user's would be.
        env["ASAN_OPTIONS"] = "detect_leaks=0:handle_segv=0:alloc_dealloc_mismatch=0"
    for flags in ([], ["-X", "faulthandler"]):
        proc = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, cwd=ROOT, timeout=120, env=env)
        assert proc.returncode == -signal.SIGSEGV, (flags, proc.returncode, proc.stderr[-500:])


def test_exception_in_progress_callback_reaches_the_caller(rng, monkeypatch):
    monkeypatch.setattr(tio, "_CHUNK_BYTES", 4096)
    data, _ = big_csv(rng, 3000)

    class Stop(Exception):
        pass

    calls = []

    def progress(done: int, total: int) -> None:
        calls.append(done)
        raise Stop("from the callback")

    with pytest.raises(Stop, match="from the callback"):
        tio.read_csv(data, progress=progress, threads=2)
    assert len(calls) == 1  # nothing after the first report


def test_ctrl_c_stops_the_parse(rng, monkeypatch):
    import _thread

    monkeypatch.setattr(tio, "_CHUNK_BYTES", 4096)
    data, _ = big_csv(rng, 3000)
    calls = []

    def progress(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) == 1:
            _thread.interrupt_main()  # what Ctrl-C does

    with pytest.raises(KeyboardInterrupt):
        tio.read_csv(data, progress=progress, threads=2)
    assert len(calls) == 1  # the interrupt ended the parse at the report that saw it


def test_gil_is_released():
    """Another Python thread runs while C parses (tests/conftest.py explains the proof:
    no timing, no skip)."""
    from conftest import gil_released_between_reports

    row = b"0.1234567,-12.5,3e-5,1234567.875,0.5,-0.25,7,8e8\n"
    seen = gil_released_between_reports(
        lambda reps, progress: tio.read_csv(row * reps, threads=1, progress=progress),
        [200_000 * 2**k for k in range(5)]  # 10 MB .. 160 MB,
    )
    assert seen[0] == 0 and seen[-1] == 1, seen


def test_no_python_objects_per_value(rng):
    data, values = big_csv(rng, 20000)  # ~3 MB, 160k values
    tracemalloc.start()
    try:
        tio.read_csv(data, threads=2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 512 * 1024, peak  # the torch output is not traced; Python-side scratch is small


def test_demo_runs(capsys):
    _demo.io(print)
    out = capsys.readouterr().out
    assert "sensors.csv" in out and "ParseError" in out


# --------------------------------------------------------------------------- #
# slow                                                                         #
# --------------------------------------------------------------------------- #


@pytest.mark.slow
def test_files_over_4_gib(tmp_path):
    """64-bit offsets: data after 4 GiB of comments, and an error beyond 2^32."""
    path = tmp_path / "big.csv"
    head = b"a,b\n" + b"".join(b"%d.5,%d\n" % (i, i) for i in range(1000))
    comment = b"#" + b"x" * 1022 + b"\n"
    block = comment * 65536  # 64 MiB
    nblocks = 66  # 4.125 GiB
    tail = b"".join(b"%d.5,%d\n" % (i, i) for i in range(1000, 2000))
    with open(path, "wb") as f:
        f.write(head)
        for _ in range(nblocks):
            f.write(block)
        f.write(tail)
        f.write(b"1,bad\n")
    size = path.stat().st_size
    assert size > 2**32 + 2**26
    expect = np.array([[i + 0.5, i] for i in range(2000)], dtype=np.float32)
    t = tio.read_csv(path, comment="#", max_rows=2000)
    assert np.array_equal(t.numpy(), expect)
    with pytest.raises(ParseError) as info:
        tio.read_csv(path, comment="#")
    err = info.value
    assert err.offset == size - 4 and err.offset > 2**32 and err.text == "bad"
    assert err.line == 1 + 1000 + nblocks * 65536 + 1000 + 1
    path.unlink()


@pytest.mark.slow
def test_sigint_interrupts_a_long_parse():
    """A real Ctrl-C (SIGINT) during a long parse raises KeyboardInterrupt in the
    caller instead of being lost while C runs."""
    import signal
    import subprocess
    import time

    script = (
        "import sys; sys.path.insert(0, %r)\n"
        "import tensorffi.io as tio\n"
        "row = b','.join(b'%%d.%%d' %% (i, i) for i in range(8)) + b'\\n'\n"
        "data = row * 40_000_000\n"  # ~1.3 GB: seconds of work on one thread
        "print('ready', flush=True)\n"
        "try:\n"
        "    tio.read_csv(data, header=False, threads=1)\n"
        "    print('finished', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    ) % str(ROOT)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert out.strip() == "interrupted"


@pytest.mark.slow
def test_long_random_fuzz(rng):
    for dtype in FORMATS:
        check_exact(random_decimals(rng, 50000), dtype)
        mb, eb = FORMATS[dtype]
        check_exact(midpoints(rng, mb, eb, 5000), dtype)


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-pow5-table"]:
        (ROOT / "csrc" / "parse_pow5.h").write_text(pow5_header())
        print("wrote csrc/parse_pow5.h")
    else:
        print(__doc__)
