# SPDX-License-Identifier: MIT
"""The bridge: every check happens before C touches memory, and names the argument."""
from __future__ import annotations

import gc
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
import torch

import tensorffi
from tensorffi import (
    ArgumentOverflowError,
    ArgumentTypeError,
    DeviceError,
    DTypeError,
    LayoutError,
    ShapeError,
    WritabilityError,
)

from conftest import as_kind, to_numpy

INT_KINDS = [
    ("add_one_i8", np.int8),
    ("add_one_u8", np.uint8),
    ("add_one_i16", np.int16),
    ("add_one_u16", np.uint16),
    ("add_one_i32", np.int32),
    ("add_one_i64", np.int64),
    ("add_one_f32", np.float32),
    ("add_one_f64", np.float64),
]


# --------------------------------------------------------------------------- #
# dtype                                                                        #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("fname, dtype", INT_KINDS)
def test_each_c_element_type_takes_its_dtype(userlib, kind, rng, fname, dtype):
    info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else None
    n = int(rng.integers(1, 300))
    if info is not None:
        ref = rng.integers(info.min, info.max, size=n, endpoint=False).astype(dtype)
    else:
        ref = rng.standard_normal(n).astype(dtype)
    x = as_kind(ref, kind)
    getattr(userlib, fname)(x, n)
    with np.errstate(over="ignore"):
        expected = (ref + dtype(1)).astype(dtype)  # wraps like C's cast
    np.testing.assert_array_equal(to_numpy(x), expected)


@pytest.mark.parametrize("fname, dtype", INT_KINDS)
def test_wrong_dtype_is_refused_and_data_untouched(userlib, kind, rng, fname, dtype):
    wrong = np.float32 if dtype != np.float32 else np.float64
    ref = rng.standard_normal(8).astype(wrong)
    x = as_kind(ref, kind)
    with pytest.raises(DTypeError) as err:
        getattr(userlib, fname)(x, 8)
    msg = str(err.value)
    assert f"{fname}(): argument 'x'" in msg
    assert "float32" in msg or "float64" in msg
    assert np.dtype(dtype).name in msg
    np.testing.assert_array_equal(to_numpy(x), ref)
    assert isinstance(err.value, TypeError)


def test_void_pointer_takes_any_dtype(userlib, kind, rng):
    for dtype in (np.float32, np.int16, np.uint8, np.float64):
        ref = (rng.integers(0, 3, size=50)).astype(dtype)
        x = as_kind(ref, kind)
        assert userlib.count_nonzero_bytes(x, ref.nbytes) == int(np.count_nonzero(ref.view(np.uint8)))


def test_bytes_like_objects_for_byte_pointers(userlib):
    data = bytes([0, 1, 2, 0, 5])
    assert userlib.count_nonzero_bytes(data, len(data)) == 3
    assert userlib.count_nonzero_bytes(memoryview(bytearray(data)), len(data)) == 3
    # Found by tests/test_fuzz_bridge.py: a strided memoryview raised a bare BufferError.
    with pytest.raises(LayoutError, match="argument 'p'"):
        userlib.count_nonzero_bytes(memoryview(bytearray(data))[::2], 3)


# --------------------------------------------------------------------------- #
# device                                                                       #
# --------------------------------------------------------------------------- #


def test_meta_tensor_is_refused(userlib):
    with pytest.raises(DeviceError, match="meta tensor"):
        userlib.process_data(torch.empty(4, device="meta"), 4)


def test_fake_tensor_is_refused_without_reading_data_ptr(userlib):
    from torch._subclasses.fake_tensor import FakeTensorMode

    from torch._subclasses.fake_tensor import FakeTensor

    with FakeTensorMode():
        fake = torch.empty(4)
    assert isinstance(fake, FakeTensor)
    with pytest.raises(DeviceError, match="fake tensor"):
        userlib.process_data(fake, 4)


def test_non_array_arguments_are_refused(userlib):
    with pytest.raises(ArgumentTypeError, match="expects a torch tensor or a NumPy array, got list"):
        userlib.process_data([1.0, 2.0], 2)
    with pytest.raises(ArgumentTypeError, match="got None"):
        userlib.process_data(None, 2)


# --------------------------------------------------------------------------- #
# written arguments: contiguous, writable, never a hidden copy                 #
# --------------------------------------------------------------------------- #


def _views(kind: str, rng: np.random.Generator):
    base = rng.standard_normal((6, 8)).astype(np.float32)
    if kind == "torch":
        t = torch.from_numpy(base)
        return {
            "strided": t[:, ::2],
            "transposed": t.t(),
            "expanded": torch.ones(1).expand(8),
        }
    return {"strided": base[:, ::2], "transposed": base.T, "broadcast": np.broadcast_to(base[0], (6, 8))}


@pytest.mark.parametrize(
    "kind_, view",
    [("torch", "strided"), ("torch", "transposed"), ("torch", "expanded"),
     ("numpy", "strided"), ("numpy", "transposed"), ("numpy", "broadcast")],
)
def test_written_views_are_refused_not_copied(userlib, rng, kind_, view):
    x = _views(kind_, rng)[view]
    before = to_numpy(x).copy()
    with pytest.raises((LayoutError, WritabilityError)) as err:
        userlib.process_data(x, int(np.prod(x.shape)))
    assert "process_data(): argument 'data'" in str(err.value)
    np.testing.assert_array_equal(to_numpy(x), before)


def test_read_only_numpy_array_is_refused(userlib, rng):
    a = rng.standard_normal(5).astype(np.float32)
    a.flags.writeable = False
    with pytest.raises(WritabilityError, match="read-only"):
        userlib.process_data(a, 5)


def test_numpy_arrays_at_the_edges_of_the_fast_path(userlib, rng):
    # The generated call passes a plain, aligned, C-contiguous array of the exact dtype
    # straight to C; everything else must still get the general path's checks.
    ref = rng.standard_normal(6).astype(np.float32)
    view = np.ones(12, np.float32).reshape(2, 6)[1]  # a view of a view of a fresh array
    view[:] = ref
    userlib.process_data(view, 6)
    np.testing.assert_array_equal(view, 2 * ref + 1)
    buf = bytearray(ref.tobytes())  # base is not an ndarray: memory C must write through
    userlib.process_data(np.frombuffer(buf, np.float32), 6)
    np.testing.assert_array_equal(np.frombuffer(buf, np.float32), 2 * ref + 1)
    swapped = ref.astype(">f4")
    with pytest.raises(DTypeError, match="argument 'data'"):
        userlib.process_data(swapped, 6)
    raw = np.zeros(6 * 4 + 1, np.uint8)
    unaligned = raw[1:].view(np.float32)
    assert not unaligned.flags.aligned
    with pytest.raises(LayoutError, match="not aligned"):
        userlib.process_data(unaligned, 6)
    assert not raw.any()
    x64 = rng.standard_normal(7)
    assert userlib.sum_f64(x64[::-1]) == pytest.approx(x64.sum(), rel=1e-12)  # copied, not refused
    t = torch.from_numpy(ref.copy())
    through = t.numpy()[2:]  # an ndarray viewing torch memory: the general path checks its storage
    userlib.process_data(through, 4)
    np.testing.assert_array_equal(t.numpy(), np.concatenate([ref[:2], 2 * ref[2:] + 1]))
    orphan = torch.from_numpy(ref.copy()).clone()  # a storage only this tensor holds
    stale = orphan.numpy()
    orphan.set_(torch.zeros(0))
    stale.base.set_(torch.zeros(0))  # the alias NumPy holds too: the old storage is freed
    with pytest.raises(LayoutError, match="storage no longer holds it"):
        userlib.process_data(stale, 6)


def test_tensor_requiring_grad_is_never_written(userlib):
    w = torch.ones(4, requires_grad=True)
    with pytest.raises(WritabilityError, match="requires grad"):
        userlib.process_data(w, 4)
    with torch.no_grad():
        with pytest.raises(WritabilityError):
            userlib.process_data(w, 4)
    assert w.detach().tolist() == [1.0] * 4


def test_in_place_write_bumps_version_so_autograd_notices(userlib, rng):
    x = torch.from_numpy(rng.standard_normal(5).astype(np.float32))
    w = torch.ones(5, requires_grad=True)
    loss = (w * x).sum()  # autograd saves x
    v0 = x._version
    userlib.process_data(x, 5)
    assert x._version > v0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_negative_bit_views_never_reach_c_as_stored(userlib, rng):
    # Found by tests/test_fuzz_bridge.py: z.conj().imag is a float64 view whose memory
    # holds +imag with a lazy negation; C was handed that memory and read the wrong sign.
    ref = rng.standard_normal(5)
    z = torch.complex(torch.zeros(5, dtype=torch.float64), torch.from_numpy(ref))
    neg = z.conj().imag  # values -ref, stored +ref
    assert neg.is_neg()
    assert userlib.sum_f64(neg) == pytest.approx(-ref.sum(), rel=1e-12)  # contract: resolved copy
    with pytest.raises(LayoutError, match="argument 'p'.*negative bit"):
        userlib.count_nonzero_bytes(neg, 40)  # no contract (void *): refused
    with pytest.raises(LayoutError, match="argument 'x'.*negative bit"):
        userlib.add_one_f64(neg, 5)  # written: refused, memory untouched
    np.testing.assert_array_equal(z.imag.numpy(), ref)
    with pytest.raises(LayoutError, match="conjugate bit"):
        userlib.count_nonzero_bytes(z.conj(), 80)
    resolved = z.conj().resolve_conj()
    want = int(np.count_nonzero(resolved.numpy().view(np.uint8)))
    assert want > 0 and userlib.count_nonzero_bytes(resolved, 80) == want


def test_zero_size_arrays(userlib, kind):
    x = as_kind(np.empty(0, np.float32), kind)
    userlib.process_data(x, 0)
    assert to_numpy(x).shape == (0,)
    assert userlib.sum_f64(as_kind(np.empty(0), kind)) == 0.0


def test_inference_mode_tensor_is_written(userlib):
    with torch.inference_mode():
        x = torch.zeros(3)
        userlib.process_data(x, 3)
    assert x.tolist() == [1.0, 1.0, 1.0]


# --------------------------------------------------------------------------- #
# read-only inputs: copied only where a contract declares the shape            #
# --------------------------------------------------------------------------- #


def test_non_contiguous_input_without_contract_is_refused(kind, rng):
    a = as_kind(rng.standard_normal((4, 6)), kind)[:, :3]
    out = as_kind(np.zeros(4), kind)
    with pytest.raises(LayoutError, match="declares no shape"):
        tensorffi.core.raw.tf_core_rowsum_f64(a, 4, 3, 3, out)


def test_strided_passes_a_views_own_pointer(kind, rng):
    full = rng.standard_normal((5, 7))
    a = as_kind(full, kind)[:, 1:4]
    out = as_kind(np.zeros(5), kind)
    lda = a.stride(0) if kind == "torch" else a.strides[0] // 8
    tensorffi.core.raw.tf_core_rowsum_f64(tensorffi.strided(a), 5, 3, lda, out)
    np.testing.assert_allclose(to_numpy(out), full[:, 1:4].sum(axis=1), rtol=1e-12)


def test_strided_refuses_self_overlapping_written_view(userlib):
    with pytest.raises(LayoutError, match="overlaps itself"):
        userlib.process_data(tensorffi.strided(torch.zeros(1).expand(4)), 4)


def test_strided_written_views_that_do_not_overlap(sizelib, kind):
    # Found by tests/test_fuzz_bridge.py: for torch, a written strided() view was
    # refused as "overlapping itself" whenever it was not dense (torch's overlap
    # check answers "too hard"), so the BLAS-style output a[:, 1:4] with its lda
    # could not be written. NumPy views were accepted.
    full = as_kind(np.zeros((5, 7)), kind)
    expected = np.zeros((5, 7))
    for pick in (lambda a: a[:, 1:4], lambda a: a[::2, ::3], lambda a: a.T[:3]):
        view = pick(full)
        st = view.stride() if kind == "torch" else tuple(s // 8 for s in view.strides)
        sizelib.strided_inc(tensorffi.strided(view), view.shape[0], view.shape[1], st[0], st[1])
        pick(expected)[...] += 1
        np.testing.assert_array_equal(to_numpy(full), expected)
    overlapping = full.as_strided((3, 3), (1, 1)) if kind == "torch" else np.lib.stride_tricks.as_strided(full, (3, 3), (8, 8))
    with pytest.raises(LayoutError, match="overlaps itself"):
        sizelib.strided_inc(tensorffi.strided(overlapping), 3, 3, 1, 1)
    np.testing.assert_array_equal(to_numpy(full), expected)


def test_unaligned_input_with_contract_is_copied_keeping_its_shape(userlib, sizelib):
    # Found by tests/test_fuzz_bridge.py: the copy was np.ascontiguousarray, which
    # returns an unaligned contiguous array as is (C got the unaligned pointer) and
    # makes a 0-d array 1-d (so it passed as 'x: [n]' with n = 1).
    raw = np.zeros(8 * 4 + 1, np.uint8)
    a = raw[1:].view(np.float64)
    a[:] = [1.0, 2.0, 3.0, 4.0]
    assert not a.flags.aligned
    assert sizelib.addr_mod8(a) == 0
    assert userlib.sum_f64(a) == 10.0
    with pytest.raises(ShapeError, match=r"argument 'x' must have 1 dimension"):
        userlib.sum_f64(a[:1].reshape(()))


def test_non_contiguous_input_with_contract_is_copied(userlib, kind, rng):
    full = rng.standard_normal((9, 4))
    x = as_kind(full, kind)[::3, 1]
    assert userlib.sum_f64(x) == pytest.approx(full[::3, 1].sum(), rel=1e-12)


# --------------------------------------------------------------------------- #
# contracts: shapes, filled lengths, outputs in the caller's kind              #
# --------------------------------------------------------------------------- #


def test_out_is_allocated_in_callers_kind(userlib, kind, rng):
    ref = rng.standard_normal((3, 5)).astype(np.float32)
    y = userlib.scale_into(as_kind(ref, kind), 2.5)
    assert isinstance(y, torch.Tensor if kind == "torch" else np.ndarray)
    assert tuple(y.shape) == (3, 5)
    np.testing.assert_allclose(to_numpy(y), 2.5 * ref, rtol=1e-6)


def test_given_out_is_checked_and_written(userlib, kind, rng):
    ref = rng.standard_normal((3, 5)).astype(np.float32)
    out = as_kind(np.zeros((3, 5), np.float32), kind)
    result = userlib.scale_into(as_kind(ref, kind), -1.0, y=out)
    assert result is out
    np.testing.assert_allclose(to_numpy(out), -ref)
    with pytest.raises(ShapeError, match=r"dimension 1 \(cols\) is 4, but cols = 5"):
        userlib.scale_into(as_kind(ref, kind), 1.0, y=as_kind(np.zeros((3, 4), np.float32), kind))


def test_wrong_rank_is_a_shape_error(userlib, kind):
    with pytest.raises(ShapeError, match=r"must have 2 dimension\(s\) \[rows, cols\], got shape \(6,\)"):
        userlib.scale_into(as_kind(np.zeros(6, np.float32), kind), 1.0)


def test_filled_length_can_be_passed_and_is_checked(userlib, kind):
    x = as_kind(np.arange(4.0), kind)
    assert userlib.sum_f64(x) == 6.0
    assert userlib.sum_f64(x, n=4) == 6.0
    with pytest.raises(ShapeError, match="argument 'n' is 5"):
        userlib.sum_f64(x, n=5)


@pytest.mark.parametrize("n", [3.0, np.float32(3), "3", [3], np.array([3, 3]), torch.tensor([3, 3]), True],
                         ids=repr)
def test_filled_length_passed_must_be_an_integer(userlib, kind, n):
    # Found by tests/test_fuzz_bridge.py: a passed length was only compared with the
    # computed one, so 3.0 was accepted, "3" was "a ShapeError: n is 3 but n = 3", and
    # a two-element array raised a bare ValueError / RuntimeError.
    x = as_kind(np.arange(3.0) if n is not True else np.ones(1), kind)
    with pytest.raises(ArgumentTypeError, match="argument 'n'"):
        userlib.sum_f64(x, n=n)


def test_filled_length_integer_likes(userlib, kind):
    x = as_kind(np.arange(3.0), kind)
    assert userlib.sum_f64(x, n=np.int64(3)) == 3.0
    assert userlib.sum_f64(x, n=torch.tensor(3)) == 3.0


@pytest.fixture(scope="module")
def sizelib(cache):
    """Small C functions for the bridge's regression tests (sizes, strides, a raw float)."""
    return tensorffi.compile(
        "sizelib",
        "void iota32(int32_t *y, int32_t n); void fill_m(double *y, int64_t count);"
        "void strided_inc(double *x, int64_t rows, int64_t cols, int64_t rs, int64_t cs);"
        "void scale_raw(float *x, int64_t n, double a);"
        "int64_t addr_mod8(const double *x, int64_t n);",
        source="void iota32(int32_t *y, int32_t n) { for (int32_t i = 0; i < n; i++) y[i] = i; }\n"
        "void fill_m(double *y, int64_t c) { for (int64_t i = 0; i < c; i++) y[i] = 1; }\n"
        "void strided_inc(double *x, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {\n"
        "    for (int64_t i = 0; i < rows; i++) for (int64_t j = 0; j < cols; j++) x[i * rs + j * cs] += 1; }\n"
        "void scale_raw(float *x, int64_t n, double a) { for (int64_t i = 0; i < n; i++) x[i] *= (float)a; }\n"
        "int64_t addr_mod8(const double *x, int64_t n) { (void)n; return (int64_t)((uintptr_t)x % 8); }",
        contracts={"iota32": "y: out [n]", "fill_m": "y: out [m]; count = m", "addr_mod8": "x: [n]"},
        cache=cache,
    )


@pytest.mark.parametrize("n", [2**63, 2**64])
def test_sizes_beyond_their_c_type_are_refused_before_allocating(sizelib, n):
    # Found by tests/test_fuzz_bridge.py: the out array was allocated from the size
    # first, and torch.empty raised a TypeError that was not a TensorFFIError.
    with pytest.raises(ArgumentOverflowError, match="argument 'n'"):
        tensorffi.core.iota(n=n)
    with pytest.raises(ArgumentOverflowError, match="argument 'n'"):
        sizelib.iota32(n=2**31)
    assert sizelib.iota32(n=3).tolist() == [0, 1, 2]


def test_size_keywords_must_be_int64(sizelib):
    for bad in (2**63, -1, 2.0, True, np.bool_(True), "2"):
        with pytest.raises(ShapeError, match="m="):
            sizelib.fill_m(m=bad)
    assert sizelib.fill_m(m=np.int32(2)).tolist() == [1.0, 1.0]
    assert sizelib.fill_m(m=torch.tensor(1)).tolist() == [1.0]


def test_status_return_raises_and_out_returns(userlib, kind):
    out = userlib.safe_sqrt(6.25)
    assert float(out[0]) == 2.5
    with pytest.raises(tensorffi.NativeError, match="safe_sqrt\\(\\) returned status -1"):
        userlib.safe_sqrt(-1.0)


def test_unknown_sizes_become_keyword_arguments():
    assert tensorffi.core.iota(n=4).tolist() == [0, 1, 2, 3]
    with pytest.raises(ShapeError, match="pass n="):
        tensorffi.core.iota()


# --------------------------------------------------------------------------- #
# scalars                                                                      #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    "call, bad",
    [
        (lambda lib: lib.add_i32(2**31, 0), "argument 'a'"),
        (lambda lib: lib.add_i32(0, -(2**31) - 1), "argument 'b'"),
        (lambda lib: lib.add_u8(256, 0), "argument 'a'"),
        (lambda lib: lib.add_u8(1, -1), "argument 'b'"),
        (lambda lib: lib.process_data(torch.zeros(2), 2**31), "argument 'size'"),
    ],
)
def test_integer_out_of_range_never_truncates(userlib, call, bad):
    with pytest.raises(ArgumentOverflowError) as err:
        call(userlib)
    assert bad in str(err.value)
    assert isinstance(err.value, OverflowError)


def test_integer_scalars_in_range(userlib, rng):
    a, b = (int(v) for v in rng.integers(-(2**30), 2**30, size=2))
    assert userlib.add_i32(a, b) == a + b
    assert userlib.add_u8(200, 100) == (300 % 256)


def test_float_for_integer_parameter_is_a_type_error(userlib):
    with pytest.raises(ArgumentTypeError, match="argument 'a'"):
        userlib.add_i32(1.5, 2)


FLOAT_LIKES = [np.float32(1.5), np.float16(2.5), np.longdouble(3.5), np.float32("nan"), torch.tensor(1.7),
               np.array(2.5), Fraction(3, 2), Decimal("1.5")]


@pytest.mark.parametrize("value", FLOAT_LIKES, ids=repr)
def test_float_likes_for_integer_parameters_are_never_truncated(userlib, value):
    # Found by tests/test_fuzz_bridge.py: cffi converts anything with __int__, so
    # np.float32(1.5) reached C as 1 (and NaN raised a bare ValueError).
    with pytest.raises(ArgumentTypeError, match="argument 'a'"):
        userlib.add_i32(value, 2)
    x = torch.zeros(4, dtype=torch.int64)
    with pytest.raises(ArgumentTypeError, match="argument 'n'"):
        userlib.add_one_i64(x, value)  # the generated fast path
    assert x.tolist() == [0] * 4
    with pytest.raises(ArgumentTypeError, match="field 'n'"):
        userlib.struct("job", n=value)


@pytest.mark.parametrize("value", [np.int16(5), np.uint64(5), torch.tensor(5), np.array(5, dtype=np.int8), True])
def test_integer_likes_for_integer_parameters(userlib, value):
    assert userlib.add_i32(value, 2) == int(value) + 2
    with pytest.raises(ArgumentOverflowError, match="argument 'b'"):
        userlib.add_i32(2, torch.tensor(2**40))


def test_float_parameter_errors_name_the_argument(userlib):
    with pytest.raises(ArgumentTypeError, match="argument 'x'"):
        userlib.safe_sqrt("4")  # float("4") parses, but C takes no strings
    with pytest.raises(ArgumentOverflowError, match="argument 'x'"):
        userlib.safe_sqrt(2**1100)
    with pytest.raises(ArgumentOverflowError, match="argument 'a'"):
        userlib.scale_into(torch.zeros(2, 2), 2**1100)


@pytest.mark.parametrize("value", [torch.tensor([1.0, 2.0]), np.array([1.0, 2.0]), torch.tensor(1.0, device="meta")],
                         ids=["tensor2", "array2", "meta0d"])
def test_float_parameter_conversion_errors_are_tensorffi_errors(userlib, sizelib, value):
    # Found by tests/test_fuzz_bridge.py: cffi calls __float__, and a two-element
    # tensor raises ValueError there (a meta tensor RuntimeError), which escaped bare.
    with pytest.raises(ArgumentTypeError, match="argument 'x'"):
        userlib.safe_sqrt(value)
    with pytest.raises(ArgumentTypeError, match="argument 'a'"):
        userlib.scale_into(torch.zeros(2, 2), value)
    x = torch.ones(3)
    with pytest.raises(ArgumentTypeError, match="argument 'a'"):
        sizelib.scale_raw(x, 3, value)  # the generated fast path
    assert x.tolist() == [1.0] * 3


def test_strings(userlib):
    assert userlib.greet() == "hello from C"
    assert userlib.strlen_c("héllo") == len("héllo".encode())
    assert userlib.strlen_c(b"abc") == 3


# --------------------------------------------------------------------------- #
# lifetimes: structs keep what they point to alive                             #
# --------------------------------------------------------------------------- #


def test_struct_keeps_tensors_alive_and_bumps_written(userlib, kind, rng):
    ref = rng.standard_normal(1000).astype(np.float32)
    j = userlib.struct("job", **{"in": as_kind(ref, kind)}, out=as_kind(np.zeros(1000, np.float32), kind), n=1000, gain=3.0)
    gc.collect()  # the arrays are referenced only by the struct now
    # Allocate and fill other memory so a freed buffer would be visibly reused.
    junk = [np.full(1000, 7.0, np.float32) for _ in range(20)]
    out = j.out
    v0 = out._version if kind == "torch" else None
    userlib.run_job(j)
    np.testing.assert_allclose(to_numpy(out), 3.0 * ref, rtol=1e-6)
    if kind == "torch":
        assert out._version > v0
    del junk


def test_struct_fields_are_checked_like_arguments(userlib):
    with pytest.raises(WritabilityError, match="struct job: field 'out'"):
        userlib.struct("job", out=torch.zeros(3, requires_grad=True))
    with pytest.raises(DTypeError, match="field 'in'"):
        userlib.struct("job", **{"in": torch.zeros(3, dtype=torch.float64)})
    with pytest.raises(ArgumentOverflowError, match="field 'n'"):
        userlib.struct("job", n=2**70)
    # a float field whose conversion fails otherwise than with TypeError (was a bare ValueError)
    with pytest.raises(ArgumentTypeError, match="field 'gain'"):
        userlib.struct("job", gain=torch.tensor([1.0, 2.0]))


def test_native_struct_example(rng):
    ref = rng.standard_normal(100).astype(np.float32)
    span = tensorffi.core.struct("tf_core_span", data=torch.from_numpy(ref), n=100)
    assert tensorffi.core.span_sum(span) == pytest.approx(float(ref.astype(np.float64).sum()), rel=1e-5)


# --------------------------------------------------------------------------- #
# the bridge's own kernels (contract examples)                                 #
# --------------------------------------------------------------------------- #


def test_core_examples_against_numpy(kind, rng):
    x = rng.standard_normal(33)
    y = rng.standard_normal(33)
    yk = as_kind(y, kind)
    tensorffi.core.axpy_(as_kind(x, kind), yk, 0.5)
    np.testing.assert_allclose(to_numpy(yk), y + 0.5 * x, rtol=1e-15)
    s = as_kind(x.astype(np.float32), kind)
    tensorffi.core.scale_(s, -2.0)
    np.testing.assert_allclose(to_numpy(s), -2.0 * x.astype(np.float32), rtol=1e-6)


def test_callback_progress_and_exception():
    seen: list[tuple[int, int]] = []
    assert tensorffi.core.count(1000, 10, progress=lambda d, t: seen.append((d, t))) == 1000
    assert seen == [(100 * (i + 1), 1000) for i in range(10)]

    def boom(done, total):
        if done >= 300:
            raise KeyError("stop here")

    with pytest.raises(KeyError, match="stop here"):
        tensorffi.core.count(1000, 10, progress=boom)


def test_keyboard_interrupt_in_callback_reaches_caller():
    def ctrl_c(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as info:
        tensorffi.core.count(1000, 10, progress=ctrl_c)
    assert type(info.value) is KeyboardInterrupt  # the callback's own, not a C status error
