# SPDX-License-Identifier: MIT
"""What users paste into load() (issue 40): a whole header or an #include line is a
DeclarationError that shows the compile(header=) call that reads it (on 36e677b: "?:
Invalid declaration" and a raw cffi.CDefError), and enum constants of the declarations
are attributes of the library."""
from __future__ import annotations

import ctypes.util
import math

import pytest

import tensorffi
from tensorffi import DeclarationError

LIBM = "libm.so.6"


@pytest.mark.parametrize("cdef, line, shown", [
    ("#include <math.h>\ndouble ldexp(double x, int exp);", 1, "#include <math.h>"),
    ("#ifndef MYMATH_H\n#define MYMATH_H\ndouble ldexp(double x, int exp);\n#endif\n", 1, "#ifndef MYMATH_H"),
    ("double ldexp(double x, int exp);\n  #  define TWO 2\n", 2, "#  define TWO 2"),
])
def test_preprocessor_lines_point_to_compile_header(cdef, line, shown):
    with pytest.raises(DeclarationError, match=r"preprocessor lines.*tensorffi\.compile\('m', header=") as info:
        tensorffi.load(LIBM, cdef)
    assert info.value.line == line and info.value.text == shown


def test_the_suggested_call_names_an_installed_header():
    with pytest.raises(DeclarationError, match=r"header='/usr/include/math.h'"):
        tensorffi.load(LIBM, "#include <math.h>\n")


def test_a_pasted_system_header_is_refused_and_the_suggestion_works(cache):
    path = ctypes.util.find_library("samplerate")
    if path is None:
        pytest.skip("libsamplerate is not installed (Debian: apt-get install libsamplerate0-dev)")
    text = open("/usr/include/samplerate.h").read()
    with pytest.raises(DeclarationError, match=r"compile\('samplerate', header='/usr/include/samplerate.h', "
                                               r"libraries=\['samplerate'\]\)"):
        tensorffi.load("libsamplerate.so.0", text)
    lib = tensorffi.compile("samplerate", header="/usr/include/samplerate.h", libraries=["samplerate"], cache=cache)
    assert lib.src_is_valid_ratio(2.0) == 1 and lib.src_is_valid_ratio(1e9) == 0


def test_enum_constants_are_library_attributes(rng):
    lib = tensorffi.load(LIBM, "enum rounding { DOWN = -1, NEAR = 0, UP = 1 }; double ldexp(double x, int exp);")
    assert (lib.DOWN, lib.NEAR, lib.UP) == (-1, 0, 1)
    x = float(rng.uniform(1, 2))
    assert lib.ldexp(x, lib.UP) == math.ldexp(x, 1)
    with pytest.raises(AttributeError, match="no function 'SIDEWAYS'"):
        lib.SIDEWAYS  # noqa: B018
