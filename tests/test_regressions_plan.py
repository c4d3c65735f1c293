# SPDX-License-Identifier: MIT
"""Regressions a user would suffer, through the public API only.

These target code under rewrite (the bridge, the operator layer, the contract plan,
compile()), so they use nothing but ``tensorffi.compile``, ``tensorffi.ops.register``,
``tensorffi.io.read_csv``, ``torch.library.opcheck``, meta tensors and
``FakeTensorMode``: they must survive the rewrite unchanged. Each one kills a planted
bug of tests/mutation/mutants.py that the rest of the suite let through (named in
each docstring).
"""
from __future__ import annotations

import gc

import numpy as np
import pytest
import torch

import tensorffi
from tensorffi import DTypeError, ShapeError, ops

CDEF = """
void interleave(const float *a, const float *b, float *out, int64_t n);
void pair_sums(const double *x, double *y, int64_t n);
void add_reversed(const double *a, const double *b, double *out, int64_t n);
double sum_all(const double *x, int64_t count);
void twice(float *data, int size);
void scale_inplace(double *x, int64_t n, double a);
"""

SOURCE = r"""
#include <stdint.h>
/* out = a0 b0 a1 b1 ...: an output twice as long as its inputs. */
void interleave(const float *a, const float *b, float *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) { out[2 * i] = a[i]; out[2 * i + 1] = b[i]; }
}
/* y[i] = x[2i] + x[2i+1]: an input twice as long as its output. */
void pair_sums(const double *x, double *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[2 * i] + x[2 * i + 1];
}
/* out[i] = a[n-1-i] + b[i]: wrong if a's memory is reused by b or by out. */
void add_reversed(const double *a, const double *b, double *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = a[n - 1 - i] + b[i];
}
double sum_all(const double *x, int64_t count) {
    double s = 0.0;
    for (int64_t i = 0; i < count; i++) s += x[i];
    return s;
}
void twice(float *data, int size) {
    for (int i = 0; i < size; i++) data[i] *= 2.0f;
}
void scale_inplace(double *x, int64_t n, double a) {
    for (int64_t i = 0; i < n; i++) x[i] *= a;
}
"""

CONTRACTS = {
    "interleave": "a: [n]; b: [n]; out: out [2*n]",
    "pair_sums": "x: [2*n]; y: out [n]",
    "add_reversed": "a: [n]; b: [n]; out: out [n]",
    "sum_all": "x: [r, c]; count = numel(x)",
    "scale_inplace": "x: inout [n]",
    # twice: no contract, so its calls take the bridge's generated fast path
}


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    cache = tmp_path_factory.mktemp("tfcache-regressions")
    return tensorffi.compile("regressions_plan", CDEF, source=SOURCE, contracts=CONTRACTS, cache=cache)


@pytest.fixture(scope="module")
def interleave_op(lib):
    return ops.register(lib.interleave, "tfregress::interleave")


def _interleave_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty(2 * len(a), a.dtype)
    out[0::2], out[1::2] = a, b
    return out


# --------------------------------------------------------------------------- #
# An output dimension with a factor ([2*n])                                     #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("n", [1, 3, 64, 1000])
def test_factor_output_operator_eager_matches_reference(lib, interleave_op, rng, n):
    """mutant op-out-factor-dropped: the operator allocated n elements for out [2*n]
    and C wrote 2*n (a heap overflow in every user operator with a factor)."""
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    ref = _interleave_ref(a, b)
    for out in (
        lib.interleave(torch.from_numpy(a), torch.from_numpy(b)),  # the bound function
        torch.ops.tfregress.interleave(torch.from_numpy(a), torch.from_numpy(b)),  # the operator
        lib.interleave(a, b),  # NumPy in, NumPy out
    ):
        assert tuple(out.shape) == (2 * n,)
        np.testing.assert_array_equal(np.asarray(out), ref)


def test_factor_output_operator_shape_rule(interleave_op, rng):
    """mutant fake-factor-ignored: the derived shape rule gave out [2*n] n elements,
    so torch.compile and meta/fake tensors saw the wrong shape."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    n = int(rng.integers(2, 50))
    a, b = torch.randn(n), torch.randn(n)
    meta = torch.ops.tfregress.interleave(a.to("meta"), b.to("meta"))
    assert meta.shape == (2 * n,) and meta.device.type == "meta" and meta.dtype == torch.float32
    with FakeTensorMode() as mode:
        fa, fb = mode.from_tensor(a), mode.from_tensor(b)
        fake = torch.ops.tfregress.interleave(fa, fb)
        assert fake.shape == (2 * n,)
    torch.library.opcheck(torch.ops.tfregress.interleave.default, (a, b))

    def f(x, y):
        return torch.ops.tfregress.interleave(x, y) * 2

    compiled = torch.compile(f, fullgraph=True, backend="eager")
    np.testing.assert_array_equal(compiled(a, b).numpy(), 2 * _interleave_ref(a.numpy(), b.numpy()))


def test_factor_input_size_must_be_a_multiple(lib, rng):
    """mutant factor-multiple-unchecked: x: [2*n] with 7 elements was taken as n = 3,
    the last element silently ignored."""
    x = rng.standard_normal(8)
    np.testing.assert_allclose(lib.pair_sums(x), x[0::2] + x[1::2], rtol=1e-15)
    for bad in (7, 9, 1):
        for arg in (rng.standard_normal(bad), torch.randn(bad, dtype=torch.float64)):
            with pytest.raises(ShapeError, match="argument 'x'"):
                lib.pair_sums(arg)


# --------------------------------------------------------------------------- #
# Memory C reads                                                               #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("n", [5, 40, 300, 5000, 40000])
def test_noncontiguous_numpy_copy_stays_alive_during_the_call(lib, rng, n):
    """mutant ndarray-copy-not-kept-alive: the contiguous copy of a non-contiguous
    NumPy input was freed before C ran, so C read memory that the next copy (b's) or
    the output reused, or that was unmapped. add_reversed reads a backwards, so any
    reuse of a's memory changes the result."""
    for _ in range(3):
        big_a = rng.standard_normal(2 * n)
        big_b = rng.standard_normal(3 * n)
        a, b = big_a[::2], big_b[::3]  # both copied by the bridge
        assert not a.flags.c_contiguous and not b.flags.c_contiguous
        churn = [np.empty(k) for k in (n, n // 2 + 1, 2 * n)]  # allocator activity between calls
        out = lib.add_reversed(a, b)
        del churn
        np.testing.assert_array_equal(out, a[::-1] + b)
        gc.collect()
    # torch: the same promise
    ta, tb = torch.from_numpy(rng.standard_normal(2 * n))[::2], torch.from_numpy(rng.standard_normal(2 * n))[1::2]
    np.testing.assert_array_equal(lib.add_reversed(ta, tb).numpy(), ta.numpy()[::-1] + tb.numpy())


def test_numel_fill_counts_every_element(lib, rng):
    """mutant numel-fill-first-dim: count = numel(x) passed only x's first dimension."""
    for shape in ((3, 4), (1, 7), (5, 1), (6, 9)):
        x = rng.standard_normal(shape)
        assert lib.sum_all(x) == pytest.approx(x.sum(), rel=1e-12)
        assert lib.sum_all(torch.from_numpy(x)) == pytest.approx(x.sum(), rel=1e-12)
        # views C cannot read in place (a transpose, every other column): the bridge
        # copies them, on the path that makes copies, and counts the copy's elements
        t = torch.from_numpy(x)
        for view, tview in ((x.T, t.T), (x[:, ::2], t[:, ::2])):
            assert lib.sum_all(view) == pytest.approx(view.sum(), rel=1e-12)
            assert lib.sum_all(tview) == pytest.approx(view.sum(), rel=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.int32, torch.bfloat16])
def test_wrong_dtype_into_float_pointer_is_refused(lib, rng, dtype):
    """mutant fast-path-dtype-unchecked: the generated fast path handed a float64
    tensor to float * (C reinterpreted its bytes). A dense, contiguous tensor of the
    wrong dtype must be refused, its data untouched."""
    ref = torch.from_numpy(rng.standard_normal(16)).to(dtype)
    x = ref.clone()
    for _ in range(3):  # the first call may take another path than the next ones
        with pytest.raises(DTypeError, match="argument 'data'"):
            lib.twice(x, 16)
    assert torch.equal(x, ref)
    good = torch.from_numpy(rng.standard_normal(16).astype(np.float32))
    want = good.numpy() * 2
    for _ in range(3):
        lib.twice(good, 16)
        np.testing.assert_array_equal(good.numpy(), want)
        want = want * 2


@pytest.mark.parametrize("how", ["contract", "numpy scalar", "fast path"])
def test_in_place_write_is_seen_by_autograd(lib, rng, how):
    """mutant version-counter-not-bumped: a C write through the bridge's general path
    did not bump the tensor's version, so backward used the overwritten values
    silently. Each way of calling must leave autograd able to notice."""
    dtype = torch.float32 if how == "fast path" else torch.float64
    x = torch.from_numpy(rng.standard_normal(6)).to(dtype)
    w = torch.ones(6, dtype=dtype, requires_grad=True)
    loss = (w * x).sum()  # autograd saves x
    before = x.clone()
    if how == "contract":
        lib.scale_inplace(x, 3.0)
    elif how == "numpy scalar":
        lib.scale_inplace(x, np.float64(3.0))
    else:
        lib.twice(x, 6)  # no contract, plain arguments: the generated fast path
    assert torch.equal(x, before * (2.0 if how == "fast path" else 3.0))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


# --------------------------------------------------------------------------- #
# compile(): the cache key                                                     #
# --------------------------------------------------------------------------- #


def test_compile_cache_key_includes_define_macros(tmp_path):
    """mutant cache-key-without-define-macros: a changed -D silently reused the old
    binary from the cache."""
    cdef = "int macro_value(void);"
    src = "int macro_value(void) { return VALUE; }"
    seen = []
    for value in ("11", "22", "11"):
        lib = tensorffi.compile(
            "regress_macro", cdef, source=src, define_macros=[("VALUE", value)],
            contracts={"macro_value": "return: value"}, cache=tmp_path,
        )
        seen.append(lib.macro_value())
    assert seen == [11, 22, 11]


def test_compile_cache_key_includes_depends(tmp_path):
    """mutant cache-key-without-depends: an edited header listed in depends= silently
    reused the binary built from the old one."""
    inc = tmp_path / "inc"
    inc.mkdir()
    header = inc / "value.h"
    src = '#include "value.h"\nint header_value(void) { return HEADER_VALUE; }'
    seen = []
    for value in (5, 6):
        header.write_text(f"#define HEADER_VALUE {value}\n")
        lib = tensorffi.compile(
            "regress_depends", "int header_value(void);", source=src, include_dirs=[str(inc)], depends=[header],
            contracts={"header_value": "return: value"}, cache=tmp_path / "cache",
        )
        seen.append(lib.header_value())
    assert seen == [5, 6]


# --------------------------------------------------------------------------- #
# read_csv: error positions after quoted newlines                              #
# --------------------------------------------------------------------------- #


def _chunk_sizes():
    """The default, and tiny chunks (so pass 1 cuts inside the quoted field) where the
    parser exposes its chunk size."""
    import tensorffi.io as tio

    yield None
    if hasattr(tio, "_CHUNK_BYTES"):
        yield from (4, 7, 16)


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_parse_error_line_after_quoted_newline(monkeypatch, eol):
    """mutant parse-quote-only-right-after-delimiter: a quote after a blank did not
    open a quoted field for the record counter, so a quoted newline there ended a
    record: wrong rows, and errors reported on the wrong line. The quoted fields
    sit in a column that usecols skips (the only place data may hold text)."""
    import tensorffi.io as tio

    header = f'a, "b{eol}c",d'
    rows = [f'{i}.5, "t{eol}{i}",{i}e1' if i % 3 == 0 else f"{i}.5,u{i},{i}e1" for i in range(12)]
    ref = np.array([[i + 0.5, i * 10.0] for i in range(12)])

    def lines_before(k: int) -> int:  # physical lines before data row k (header: 2)
        return 2 + sum(2 if i % 3 == 0 else 1 for i in range(k))

    for chunk in _chunk_sizes():
        if chunk is not None:
            monkeypatch.setattr(tio, "_CHUNK_BYTES", chunk)
        good = (eol.join([header, *rows]) + eol).encode()
        table, names = tio.read_csv(good, dtype=torch.float64, usecols=[0, 2], return_names=True, threads=2)
        assert names == ["a", "d"]
        np.testing.assert_array_equal(table.numpy(), ref)
        for bad_row in (4, 7, 11):
            bad = list(rows)
            bad[bad_row] = f"{bad_row}.5,u,x{bad_row}"
            with pytest.raises(tensorffi.ParseError) as info:
                tio.read_csv((eol.join([header, *bad]) + eol).encode(), usecols=[0, 2], threads=2)
            got = (info.value.line, info.value.column, info.value.text)
            assert got == (lines_before(bad_row) + 1, len(f"{bad_row}.5,u,") + 1, f"x{bad_row}"), (chunk, got)


def _position(data: bytes, offset: int) -> tuple[int, int]:
    """Reference: 1-based line and column (in characters) of byte ``offset``; LF, CRLF
    and CR end lines; a UTF-8 byte order mark at the start is not a column."""
    before = data[:offset]
    line = 1 + before.count(b"\r\n") + before.replace(b"\r\n", b"").count(b"\n") + before.replace(b"\r\n", b"").count(b"\r")
    start = max(before.rfind(b"\n"), before.rfind(b"\r")) + 1
    text = before[start:]
    if start == 0 and text.startswith(b"\xef\xbb\xbf"):
        text = text[3:]
    return line, len(text.decode("utf-8")) + 1


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("bom", [False, True])
def test_parse_error_position_for_every_line_ending(eol, bom, rng):
    """mutants parse-crlf-counted-twice and parse-bom-is-a-column: a ParseError in a
    CRLF file named twice the real line; on the first line after a byte order mark,
    the wrong column."""
    import tensorffi.io as tio

    for bad_row in (0, 1, int(rng.integers(2, 30))):
        rows = [",".join(f"{v:.6g}" for v in rng.standard_normal(3)) for _ in range(30)]
        rows[bad_row] = rows[bad_row].rsplit(",", 1)[0] + ",1.2.3"
        data = (b"\xef\xbb\xbf" if bom else b"") + (eol.join(rows) + eol).encode()
        with pytest.raises(tensorffi.ParseError) as info:
            tio.read_csv(data, header=False)
        err = info.value
        offset = data.index(b"1.2.3")
        assert (err.line, err.column, err.offset, err.text) == (*_position(data, offset), offset, "1.2.3")
        assert err.line == bad_row + 1


# --------------------------------------------------------------------------- #
# Gradients at every SIMD level                                                #
# --------------------------------------------------------------------------- #

@pytest.mark.parametrize("simd", ["scalar", "avx2", "avx512"])
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-10), (np.float32, 2e-4)])
def test_sosfilt_gradient_at_every_simd_level(monkeypatch, rng, simd, dtype, rtol):
    """mutant signal-avx2-backward-fma-sign: the float64 forward is unfused (SciPy's
    exact order), so only the backward uses the FMA: a sign flipped there left every
    forward test green. The gradient of sum(y * g) over x is g filtered backwards in
    time (the filter is linear and causal): the reference is SciPy on reversed g."""
    import scipy.signal as ss

    import tensorffi.signal as tsig

    from conftest import require_simd

    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    require_simd("signal", simd)
    for sos in (ss.butter(6, 0.3, output="sos"), ss.cheby1(4, 1, 0.1, output="sos")):
        for shape in ((5, 300), (1, 257), (17, 64)):
            x = torch.from_numpy(rng.standard_normal(shape).astype(dtype)).requires_grad_()
            g = rng.standard_normal(shape)
            tsig.sosfilt(sos, x).backward(torch.from_numpy(g.astype(dtype)))
            ref = ss.sosfilt(sos, g[..., ::-1], axis=-1)[..., ::-1]
            err = np.abs(x.grad.numpy() - ref).max() / np.abs(ref).max()
            assert err <= rtol, (shape, err)


# --------------------------------------------------------------------------- #
# Threads: every element, whatever the thread count                            #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("threads", [2, 3, 4, 7])
def test_threaded_kernels_cover_every_element(rng, threads):
    """mutant parallel-for-drops-remainder: splitting n elements over threads lost the
    remainder (n % threads) when n is not a multiple of the thread count."""
    for n in (2**15 + 1, 2**16 + 3, 3 * 2**15 + 5, 200_003):
        x = rng.standard_normal(n).astype(np.float32)
        a = float(rng.uniform(0.5, 2.0))
        y = tensorffi.core.scaled(torch.from_numpy(x), a, threads=threads)
        np.testing.assert_array_equal(y.numpy(), (np.float32(a) * x).astype(np.float32))
