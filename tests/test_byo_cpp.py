# SPDX-License-Identifier: MIT
"""compile() of C++: extern "C" functions bound, every C++ exception raised as a typed
NativeError (never std::terminate), headers tracked, the cache and pickled handles as
for C; with g++ and with clang++."""
from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest
import torch

import tensorffi
from tensorffi import errors

COMPILERS = [c for c in ("g++", "clang++") if shutil.which(c)]

THROWERS = r"""
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

struct NotStd { int code; };
class Custom : public std::exception {
    std::string msg;
public:
    explicit Custom(std::string m) : msg(std::move(m)) {}
    const char *what() const noexcept override { return msg.c_str(); }
};
class BadShape : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

static double checked_sum(const std::vector<double> &v, int64_t upto) {
    double s = 0;
    for (int64_t i = 0; i < upto; i++) s += v.at(static_cast<size_t>(i));   // throws std::out_of_range
    return s;
}

extern "C" {
typedef struct acc { double total; int64_t count; } acc;

/* y = x * a; throws for a negative a (the native call path: array arguments) */
void scale(const double *x, double *y, int64_t n, double a) {
    if (a < 0) throw std::invalid_argument("scale: negative factor " + std::to_string(a));
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * a;
}
double sum_prefix(const double *x, int64_t n, int64_t upto) {
    std::vector<double> v(x, x + n);
    return checked_sum(v, upto);
}
int thrower(int kind) {
    switch (kind) {
    case 1: throw std::runtime_error("runtime failure");
    case 2: throw std::bad_alloc();
    case 3: throw std::overflow_error("too big");
    case 4: throw Custom("custom what()");
    case 5: throw 42;
    case 6: throw NotStd{7};
    case 7: throw BadShape("derived from invalid_argument");
    case 8: { std::vector<char> huge; huge.reserve(static_cast<size_t>(-1)); return (int)huge.capacity(); }  /* length_error */
    case 9: throw std::string("a string");
    }
    return kind * 10;
}
/* the Python path: a string argument */
int64_t name_length(const char *name) {
    std::string s(name);
    if (s.empty()) throw std::domain_error("empty name");
    return static_cast<int64_t>(s.size());
}
void acc_add(acc *a, double v) {
    if (v != v) throw std::domain_error("NaN");
    a->total += v;
    a->count++;
}
}
"""


@pytest.fixture(scope="module", params=COMPILERS)
def cxx(request):
    mp = pytest.MonkeyPatch()
    mp.setenv("CXX", request.param)
    yield request.param
    mp.undo()


@pytest.fixture(scope="module")
def throwers(cxx, tmp_path_factory):
    d = tmp_path_factory.mktemp("cpp")
    (d / "throwers.cpp").write_text(THROWERS)
    return tensorffi.compile("throwers", sources=[d / "throwers.cpp"], cache=d / "cache",
                             contracts={"scale": "x: [n]; y: out [n]", "sum_prefix": "x: [n]"})


# --------------------------------------------------------------------------- #
# What C++ throws reaches Python as a typed error                              #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("kind, cls, builtin, text", [
    (1, tensorffi.NativeError, RuntimeError, r"thrower\(\) threw std::runtime_error: runtime failure"),
    (2, errors.NativeMemoryError, MemoryError, r"thrower\(\) threw std::bad_alloc: std::bad_alloc"),
    (3, errors.NativeOverflowError, OverflowError, r"threw std::overflow_error: too big"),
    (4, tensorffi.NativeError, RuntimeError, r"threw Custom: custom what\(\)"),
    (5, tensorffi.NativeError, RuntimeError, r"thrower\(\) threw a C\+\+ exception of type int, which is not a std::exception"),
    (6, tensorffi.NativeError, RuntimeError, r"of type NotStd, which is not a std::exception"),
    (7, errors.InvalidArgumentError, ValueError, r"threw BadShape: derived from invalid_argument"),
    (9, tensorffi.NativeError, RuntimeError, r"of type std::(__cxx11::)?basic_string<"),
])
def test_every_kind_of_exception_becomes_a_typed_native_error(throwers, kind, cls, builtin, text):
    with pytest.raises(cls, match=text) as info:
        throwers.thrower(kind)
    assert isinstance(info.value, builtin) and type(info.value) is cls
    assert info.value.function == "thrower"
    # the library is unharmed: the next call returns its value
    assert throwers.thrower(0) == 0 and throwers.thrower(11) == 110


def test_an_exception_carries_its_type_and_what(throwers):
    with pytest.raises(errors.InvalidArgumentError) as info:
        throwers.scale(np.ones(3), -2.5)
    assert info.value.cpp_type == "std::invalid_argument"
    assert info.value.what == "scale: negative factor -2.500000"
    with pytest.raises(tensorffi.NativeError) as info:
        throwers.thrower(6)
    assert info.value.cpp_type == "NotStd" and info.value.what is None


def test_a_reserve_beyond_max_size_is_a_length_error(throwers):
    with pytest.raises(errors.InvalidArgumentError, match=r"thrower\(\) threw std::length_error: "):
        throwers.thrower(8)


def test_exceptions_on_the_native_and_the_python_paths(throwers, rng, kind):
    x = rng.standard_normal(int(rng.integers(5, 40)))
    arg = torch.from_numpy(x) if kind == "torch" else x
    y = throwers.scale(arg, 1.75)  # the native call path (arrays): it reads the guard itself
    assert getattr(throwers.scale, "__native__", False) and type(throwers.scale).__name__ == "NativeCall"
    np.testing.assert_allclose(np.asarray(y), x * 1.75, rtol=0, atol=0)
    with pytest.raises(errors.InvalidArgumentError, match="negative factor"):
        throwers.scale(arg, -1.0)
    # std::out_of_range thrown two frames down (vector::at), through C++ code
    assert throwers.sum_prefix(arg, len(x)) == pytest.approx(float(np.sum(x)), rel=1e-12)
    with pytest.raises(errors.InvalidArgumentError, match=r"sum_prefix\(\) threw std::out_of_range"):
        throwers.sum_prefix(arg, len(x) + 1)
    # the generated Python path (a string; a struct pointer)
    assert throwers.name_length("tensorffi") == 9
    with pytest.raises(errors.InvalidArgumentError, match=r"threw std::domain_error: empty name"):
        throwers.name_length("")
    a = throwers.struct("acc")
    throwers.acc_add(a, 2.5)
    with pytest.raises(errors.InvalidArgumentError, match="NaN"):
        throwers.acc_add(a, float("nan"))
    throwers.acc_add(a, 1.0)
    assert (a.total, a.count) == (3.5, 2)


def test_many_exceptions_leave_nothing_behind(throwers, rng):
    x = rng.standard_normal(16)
    for i in range(300):
        if i % 3 == 0:
            with pytest.raises(tensorffi.NativeError):
                throwers.thrower(1 + i % 7)
        else:
            np.testing.assert_array_equal(throwers.scale(x, float(i)), x * float(i))
    assert throwers.raw._tfx_pending == 0


def test_an_exception_in_one_thread_is_raised_in_that_thread_only(throwers, rng):
    x = rng.standard_normal(1000)
    caught: list[BaseException] = []
    wrong: list[int] = []

    def good():
        for i in range(400):
            if not np.array_equal(throwers.scale(x, 2.0), 2.0 * x):
                wrong.append(i)

    def bad():
        for _ in range(400):
            try:
                throwers.scale(x, -1.0)
            except errors.InvalidArgumentError as exc:
                caught.append(exc)

    threads = [threading.Thread(target=good), threading.Thread(target=bad), threading.Thread(target=good)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(caught) == 400 and not wrong


def test_an_operator_over_a_cpp_function_raises_too(throwers, cxx, rng):
    name = f"cpptest::scale_{cxx.replace('+', 'p')}"
    op = tensorffi.ops.register(throwers.scale, name)
    x = torch.from_numpy(rng.standard_normal(7))
    torch.testing.assert_close(op(x, 3.0), x * 3.0, rtol=0, atol=0)
    with pytest.raises(errors.InvalidArgumentError, match="negative factor"):
        op(x, -3.0)


# --------------------------------------------------------------------------- #
# Declarations, headers, the build                                             #
# --------------------------------------------------------------------------- #

HEADER = """#pragma once
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
/* y[i] = sum of x[0..i] times SCALE */
void cumsum_scaled(const float *x, float *y, int64_t n);
#ifdef __cplusplus
}
#endif
"""
IMPL = """#include "cumsum.h"
#include "scale.hpp"
#include <numeric>
void cumsum_scaled(const float *x, float *y, int64_t n) {   // C linkage from the header's declaration
    std::partial_sum(x, x + n, y);
    for (int64_t i = 0; i < n; i++) y[i] *= detail::scale<float>();
}
int cxx_linkage_only(int v) { return v; }   // not extern "C": not bound
"""


def _scale_hpp(value: str) -> str:
    return f"namespace detail {{ template <class T> constexpr T scale() {{ return T({value}); }} }}\n"


def test_a_cpp_source_with_a_header_binds_what_has_c_linkage(tmp_path, cxx, rng):
    (tmp_path / "cumsum.h").write_text(HEADER)
    (tmp_path / "scale.hpp").write_text(_scale_hpp("2"))
    (tmp_path / "cumsum.cpp").write_text(IMPL)
    cache = tmp_path / "cache"
    contracts = {"cumsum_scaled": "x: [n]; y: out [n]"}
    with pytest.warns(tensorffi.BuildWarning, match=r'not bound: .*cxx_linkage_only\(int\) \(symbol _Z16cxx_linkage_onlyi'):
        lib = tensorffi.compile("cumsum", sources=[tmp_path / "cumsum.cpp"], contracts=contracts, cache=cache)
    assert sorted(lib.functions) == ["cumsum_scaled"]
    with pytest.raises(AttributeError, match=r'does not bind \'cxx_linkage_only\'.*without extern "C"'):
        lib.cxx_linkage_only
    x = rng.standard_normal(100).astype(np.float32)
    np.testing.assert_allclose(lib.cumsum_scaled(x), 2 * np.cumsum(x.astype(np.float64)), rtol=1e-4, atol=1e-4)
    # the same through header=
    via = tensorffi.compile("cumsum_h", sources=[tmp_path / "cumsum.cpp"], header=tmp_path / "cumsum.h",
                            contracts=contracts, cache=cache)
    np.testing.assert_array_equal(via.cumsum_scaled(x), lib.cumsum_scaled(x))
    # an edited C++ header the .cpp includes rebuilds
    (tmp_path / "scale.hpp").write_text(_scale_hpp("-0.5"))
    with pytest.warns(tensorffi.BuildWarning, match="cxx_linkage_only"):
        lib = tensorffi.compile("cumsum", sources=[tmp_path / "cumsum.cpp"], contracts=contracts, cache=cache)
    np.testing.assert_allclose(lib.cumsum_scaled(x), -0.5 * np.cumsum(x.astype(np.float64)), rtol=1e-4, atol=1e-4)


CXX_ONLY = """#include <cstdint>
namespace detail { double twice(double v) { return 2 * v; } }   // namespaced: never C's
struct Acc { double total = 0; void add(double v) { total += v; } };
void scale(float *x, int64_t n, float a) { for (int64_t i = 0; i < n; i++) x[i] *= a; }
double mean(const double *x, int64_t n) { Acc a; for (int64_t i = 0; i < n; i++) a.add(x[i]); return a.total / n; }
"""


def test_cpp_functions_without_extern_c_are_named_not_left_out(tmp_path, cxx, rng):
    """A C++ file whose functions lack extern "C" (on 36e677b: "defines no function with
    external linkage", or silently not bound beside one that has it) names each function
    as C++ spells it and its mangled symbol; with extern "C" the same file binds."""
    (tmp_path / "only.cpp").write_text(CXX_ONLY)
    cache = tmp_path / "cache"
    with pytest.raises(tensorffi.DeclarationError, match=r'no function with C linkage to bind: C\+\+ function\(s\) defined '
                       r'without extern "C": scale\(float\*, long, float\) \(symbol _Z5scalePflf, .*only\.cpp\); '
                       r'mean\(double const\*, long\) \(symbol _Z4meanPKdl, .*\)\. .*write extern "C"') as info:
        tensorffi.compile("cxx_only", sources=[tmp_path / "only.cpp"], cache=cache)
    assert "twice" not in str(info.value) and "Acc" not in str(info.value)  # not callable from C in any case
    # one of them given C linkage: it binds, the other is named where it is asked for
    (tmp_path / "only.cpp").write_text(CXX_ONLY.replace("double mean(", 'extern "C" double mean('))
    with pytest.warns(tensorffi.BuildWarning, match=r"not bound: .*scale\(float\*, long, float\)"):
        lib = tensorffi.compile("cxx_only", sources=[tmp_path / "only.cpp"], cache=cache)
    x = rng.standard_normal(33)
    assert lib.mean(x, len(x)) == pytest.approx(float(np.mean(x)), rel=1e-12)
    with pytest.raises(AttributeError, match=r"does not bind 'scale': .*_Z5scalePflf"):
        lib.scale
    with pytest.raises(tensorffi.ContractError, match=r"contracts name 'scale', which cannot be bound: .*extern \"C\""):
        tensorffi.compile("cxx_only", sources=[tmp_path / "only.cpp"], cache=cache, contracts={"scale": "x: inout [n]"})
    # a cdef declaring it as C: the definition is named, not "defined in none of"
    with pytest.raises(tensorffi.BuildError, match=r"'scale' is declared \(<cdef>:1\) as C, but defined as C\+\+: .*"
                       r"symbol _Z5scalePflf"):
        tensorffi.compile("cxx_only_cdef", "void scale(float *x, int64_t n, float a);",
                          sources=[tmp_path / "only.cpp"], cache=cache)


def test_a_source_string_in_cpp_and_mixed_c_and_cpp_files(tmp_path, cxx, rng):
    lib = tensorffi.compile("cpp_inline", language="c++", cache=tmp_path / "cache", source=textwrap.dedent("""
        #include <algorithm>
        extern "C" int64_t count_above(const double *x, int64_t n, double t) {
            return std::count_if(x, x + n, [t](double v) { return v > t; });
        }"""))
    x = rng.standard_normal(257)
    assert lib.count_above(x, len(x), 0.25) == int(np.sum(x > 0.25))
    (tmp_path / "half.c").write_text("double half(double v) { return v / 2; }\n")
    (tmp_path / "twice.cpp").write_text('extern "C" double twice(double v) { return v * 2; }\n')
    both = tensorffi.compile("mixed", sources=[tmp_path / "half.c", tmp_path / "twice.cpp"], cache=tmp_path / "cache")
    v = float(rng.standard_normal())
    assert both.half(v) == v / 2 and both.twice(v) == v * 2


def test_wrong_cpp_is_a_build_error_and_warnings_are_shown(tmp_path, cxx):
    with pytest.raises(tensorffi.BuildError, match="return"):  # a missing return: an error, as in C
        tensorffi.compile("noret", language="c++", cache=tmp_path / "cache",
                          source='extern "C" int f(int v) { if (v) return 1; }')
    with pytest.raises(tensorffi.BuildError, match="error"):
        tensorffi.compile("bad", language="c++", cache=tmp_path / "cache",
                          source='extern "C" int f(int v) { return undeclared(v); }')
    with pytest.warns(tensorffi.BuildWarning, match="unused"):
        lib = tensorffi.compile("warn", language="c++", cache=tmp_path / "cache", extra_compile_args=["-Wall"],
                                source='extern "C" int f(int v) { int unused = 3; return v + 1; }')
    assert lib.f(4) == 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # cached: not shown again
        tensorffi.compile("warn", language="c++", cache=tmp_path / "cache", extra_compile_args=["-Wall"],
                          source='extern "C" int f(int v) { int unused = 3; return v + 1; }')


def test_a_signature_c_cannot_express_is_a_declaration_error(tmp_path, cxx):
    with pytest.raises(tensorffi.DeclarationError, match=r"<source>:2:"):
        tensorffi.compile("ref", language="c++", cache=tmp_path / "cache",
                          source='#include <cstdint>\nextern "C" void bump(int64_t &v) { v++; }\n')
    with pytest.raises(tensorffi.DeclarationError, match="no function"):
        tensorffi.compile("none", language="c++", cache=tmp_path / "cache", source="int only_cxx(int v) { return v; }\n")


def test_the_language_is_checked(tmp_path):
    with pytest.raises(tensorffi.BuildError, match="language must be"):
        tensorffi.compile("lang", source="int f(void) { return 1; }", language="rust", cache=tmp_path / "cache")


# --------------------------------------------------------------------------- #
# The cache and pickled handles                                                #
# --------------------------------------------------------------------------- #

CHILD = r"""
import json, pickle, sys, time, warnings
t0 = time.perf_counter()
import tensorffi
from tensorffi import errors
t1 = time.perf_counter()
lib = tensorffi.compile("cached_cpp", sources=[sys.argv[1]], cache=sys.argv[2], verbose=True)
t2 = time.perf_counter()
print(json.dumps({"value": lib.tri(7)}))
"""


def test_a_cached_cpp_module_is_found_in_a_fresh_process(tmp_path):
    cxx = COMPILERS[0]  # (the other compiler below: four fresh processes in all, not eight)
    src = tmp_path / "tri.cpp"
    src.write_text('#include <cstdint>\nextern "C" int64_t tri(int64_t n) { return n * (n + 1) / 2; }\n')
    cache = tmp_path / "cache"
    env = dict(os.environ, CXX=cxx)
    runs = [subprocess.run([sys.executable, "-c", CHILD, str(src), str(cache)], capture_output=True, text=True,
                           env=env, timeout=300) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
        assert '"value": 28' in r.stdout
    assert "built _tf_cached_cpp_" in runs[0].stderr and "cached _tf_cached_cpp_" in runs[1].stderr
    assert len(list(cache.glob("_tf_cached_cpp_*.so"))) == 1
    # another C++ compiler is another module
    other = [c for c in COMPILERS if c != cxx]
    if other:
        r = subprocess.run([sys.executable, "-c", CHILD, str(src), str(cache)], capture_output=True, text=True,
                           env=dict(os.environ, CXX=other[0]), timeout=300)
        assert r.returncode == 0 and "built _tf_cached_cpp_" in r.stderr, r.stderr


UNPICKLE = r"""
import pickle, sys
import numpy as np
import tensorffi
from tensorffi import errors
scale, thrower = pickle.loads(open(sys.argv[1], "rb").read())
x = np.load(sys.argv[2])
np.save(sys.argv[3], scale(x, 0.5))
try:
    thrower(4)
except tensorffi.NativeError as exc:
    print("raised", type(exc).__name__, exc.what)
"""


def test_pickled_cpp_functions_rebuild_and_still_raise_in_another_process(tmp_path, cxx, rng):
    src = tmp_path / "throwers.cpp"
    src.write_text(THROWERS)
    lib = tensorffi.compile("throwers_p", sources=[src], cache=tmp_path / "origin",
                            contracts={"scale": "x: [n]; y: out [n]"})
    (tmp_path / "fns.pkl").write_bytes(pickle.dumps((lib.scale, lib.thrower)))
    src.write_text("this is not C++ any more")  # the handle carries the text it was built from
    x = rng.standard_normal(33)
    np.save(tmp_path / "x.npy", x)
    env = dict(os.environ, TENSORFFI_CACHE_DIR=str(tmp_path / "elsewhere"), CXX=cxx)
    r = subprocess.run([sys.executable, "-c", UNPICKLE, str(tmp_path / "fns.pkl"), str(tmp_path / "x.npy"),
                        str(tmp_path / "y.npy")], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), x * 0.5)
    assert "raised NativeError custom what()" in r.stdout


DEVICE = r"""
#include <cstdint>
#include <stdexcept>
extern "C" {
typedef struct dev { int64_t n; } dev;
dev *dev_open(int64_t n) { return new dev{n}; }
void dev_close(dev *d) { int64_t n = d->n; delete d; if (n < 0) throw std::runtime_error("close failed: device busy"); }
int64_t dev_twice(const dev *d) { return 2 * d->n; }
}
"""


def test_a_destructor_that_throws_raises_from_close(cache, rng):
    """What a C++ destructor throws is close()'s error (the handle is closed once), not a
    surprise for the next, unrelated call (which keeps its own result)."""
    lib = tensorffi.compile("cxx_dtor", source=DEVICE, language="c++",
                            contracts={"dev_open": "return: handle(dev_close)"})
    k = int(rng.integers(1, 1000))
    bad, good = lib.dev_open(-k), lib.dev_open(k)
    with pytest.raises(tensorffi.NativeError, match=r"dev_close\(\) threw std::runtime_error: close failed"):
        bad.close()
    assert bad.closed
    bad.close()  # once: nothing runs again
    assert lib.dev_twice(good) == 2 * k
    with pytest.raises(tensorffi.NativeError, match="close failed"):
        lib.dev_close(lib.dev_open(-1))  # the destructor called directly
    assert lib.dev_twice(good) == 2 * k
    good.close()
