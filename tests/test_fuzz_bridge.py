# SPDX-License-Identifier: MIT
"""Property-based fuzzing of the bridge (hypothesis).

The promise under test: every call of a bound C function either computes the right
answer (checked against an exact or NumPy float64 reference computed here) or raises a
``tensorffi.TensorFFIError`` subclass of the right kind whose message names the
argument; the interpreter never crashes, nothing outside an argument's own elements
is read or written, and arrays that a refused call would have written are unchanged.

The C side is ``tests/clib/fuzzlib.c`` (bound twice: ``load`` of a gcc-built ``.so``
and ``compile``) plus the ``userlib`` fixture. Every generated array lives inside a
larger buffer padded with sentinel bytes (and with gaps between strided elements):
after each call the whole buffer is compared with what the call may have changed, so
an out-of-bounds write shows up as a changed sentinel and an out-of-bounds read as a
wrong hash. Bridge-allocated outputs and contiguous copies are checked for their
exact shape, and under AddressSanitizer in the slow run.

Each case's expected outcome comes from an oracle written here, independently of the
bridge: the set of (exception class, argument name) pairs a faulty call may raise, or
the result of a correct one.

    python -m pytest -q tests/test_fuzz_bridge.py              # quick (fresh inputs each run)
    python -m pytest -q -m slow tests/test_fuzz_bridge.py      # long run + AddressSanitizer

Examples per test: ``TENSORFFI_FUZZ_QUICK`` (default 80, scaled per test) for the
quick run, ``TENSORFFI_FUZZ_EXAMPLES`` (2000) for the long one,
``TENSORFFI_FUZZ_ASAN_EXAMPLES`` (150) under ASan. A failure prints the falsifying
draws, notes describing each argument (shape, strides, flags, the seed of its
values) and the oracle's verdict, and a ``@reproduce_failure`` blob.
"""
from __future__ import annotations

import array as pyarray
import ctypes
import math
import os
import subprocess
import sys
import warnings
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import tensorffi
from tensorffi import (
    ArgumentOverflowError,
    ArgumentTypeError,
    DeviceError,
    DTypeError,
    GradError,
    LayoutError,
    ShapeError,
    TensorFFIError,
    WritabilityError,
)
from tensorffi.errors import NativeError

from conftest import CLIB

QUICK = int(os.environ.get("TENSORFFI_FUZZ_QUICK", "80"))
LONG = int(os.environ.get("TENSORFFI_FUZZ_EXAMPLES", "2000"))
# A uniform draw in [0, 1) for probability knobs (st.floats(0, 1) piles up near 0 and 1).
UNIT = st.integers(0, 999).map(lambda i: i / 1000)
_COMMON = dict(
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


# --------------------------------------------------------------------------- #
# Libraries                                                                    #
# --------------------------------------------------------------------------- #

ASAN = bool(os.environ.get("TENSORFFI_FUZZ_ASAN"))
ASAN_FLAGS = ["-fsanitize=address", "-fno-omit-frame-pointer"]

DTYPES = ["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64", "b8"]
NP = {
    "i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16, "i32": np.int32,
    "u32": np.uint32, "i64": np.int64, "u64": np.uint64, "f32": np.float32, "f64": np.float64,
    "b8": np.bool_,
}
TORCH = {
    "i8": torch.int8, "u8": torch.uint8, "i16": torch.int16, "u16": torch.uint16, "i32": torch.int32,
    "u32": torch.uint32, "i64": torch.int64, "u64": torch.uint64, "f32": torch.float32,
    "f64": torch.float64, "b8": torch.bool,
}
UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

CONTRACTS = {
    "fz_scale2d": "x: [rows, cols]; y: out [rows, cols]",
    "fz_add_f32": "a: [n]; b: [n]; out: out [n]",
    "fz_dup": "x: [n]; y: out [2*n]",
    "fz_pairsum": "x: [2*n]; y: out [n]",
    "fz_outer": "a: [m]; b: [k]; c: out [m*k]",
    "fz_iota": "y: out [n]",
    "fz_iota32": "y: out [n]",
    "fz_fill": "y: out [m]; count = m",
    "fz_hash2d": "x: [r, c]; count = numel(x)",
    "fz_axpy": "x: [n]; y: [n]",
    "fz_wsum": "x: [n]; w: in? [n]",
    "fz_sqrt": "x: [n]; y: out [n]; return: status",
    "fz_norm3": "v: [3, n]; out: out [n]",
}
for _s in DTYPES:
    CONTRACTS[f"fz_chash_{_s}"] = "x: [n]"
    CONTRACTS[f"fz_cinc_{_s}"] = "x: [n]"
    CONTRACTS[f"fz_copy_{_s}"] = "x: [n]; y: out [n]"


def fuzzlib_cdef() -> str:
    text = (CLIB / "fuzzlib.h").read_text()
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


def build_fuzzlib_so(out, asan: bool = ASAN) -> None:
    """tests/clib/fuzzlib.c built by gcc into a shared library (ASan-instrumented on request)."""
    flags = ASAN_FLAGS if asan else []
    subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", *flags, str(CLIB / "fuzzlib.c"), "-o", str(out), "-lm"], check=True
    )


@pytest.fixture(scope="session", params=["load", "compile"])
def fuzzlib(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, cache):
    """tests/clib/fuzzlib.c bound in ABI mode (load) and API mode (compile)."""
    if request.param == "load":
        so = tmp_path_factory.mktemp("fuzzlib") / "libfuzz.so"
        build_fuzzlib_so(so)
        return tensorffi.load(so, fuzzlib_cdef(), CONTRACTS)
    return tensorffi.compile(
        "fuzzlib",
        fuzzlib_cdef(),
        sources=[CLIB / "fuzzlib.c"],
        preamble='#include "fuzzlib.h"',
        include_dirs=[str(CLIB)],
        depends=[CLIB / "fuzzlib.h"],
        contracts=CONTRACTS,
        libraries=["m"],
        extra_compile_args=["-O2", *ASAN_FLAGS] if ASAN else ["-O3"],
        extra_link_args=ASAN_FLAGS if ASAN else [],
        cache=cache,
    )


# --------------------------------------------------------------------------- #
# Reference computations                                                       #
# --------------------------------------------------------------------------- #

FNV_OFFSET = 1469598103934665603
FNV_PRIME = 1099511628211
MASK64 = (1 << 64) - 1


def fnv_elements(values: np.ndarray) -> int:
    """FNV-1a over the zero-extended bits of each element (fz_hash_S in C)."""
    flat = np.ascontiguousarray(values).reshape(-1)
    bits = flat.view(UINT_OF_SIZE[flat.dtype.itemsize]).astype(np.uint64).tolist()
    h = FNV_OFFSET
    for e in bits:
        h = ((h ^ e) * FNV_PRIME) & MASK64
    return h


def inc_values(values: np.ndarray) -> np.ndarray:
    """x + 1 as C computes it for its type (integers wrap, bool saturates)."""
    if values.dtype == np.bool_:
        return np.ones_like(values)
    if values.dtype.kind in "iu":
        return (values.astype(np.uint64) + np.uint64(1)).astype(values.dtype)
    with np.errstate(all="ignore"):
        return (values + values.dtype.type(1)).astype(values.dtype)


# --------------------------------------------------------------------------- #
# Generated arrays, inside sentinel-padded memory                              #
# --------------------------------------------------------------------------- #

SENTINEL = 0xA5


@dataclass
class Arr:
    """One generated array argument and everything the oracle needs to know about it."""

    obj: Any  # what is passed to the bound function
    kind: str  # "torch" | "numpy" | "bytes" | "other"
    dtype: str | None  # canonical name (DTYPES), "foreign" for an unsupported dtype, None for non-arrays
    shape: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()  # in elements
    values: np.ndarray | None = None  # the logical values in C order (what C should see)
    base: np.ndarray | None = None  # the flat memory the array lives in (a uint8 view)
    index: np.ndarray | None = None  # byte offset in base of each element, C order
    itemsize: int = 1
    contiguous: bool = True  # dense in C order (torch/numpy semantics: size-1 dims ignored)
    readonly: bool = False
    requires_grad: bool = False
    meta: bool = False  # meta or fake: no memory (DeviceError)
    sparse: bool = False
    neg: bool = False  # torch negative (or conjugate) bit: memory holds -values (or conj)
    unaligned: bool = False
    buffer_contiguous: bool = True  # bytes-likes
    desc: str = ""
    before: bytes = b""
    version: int | None = None

    def snapshot(self) -> None:
        if self.base is not None:
            self.before = self.base.tobytes()
        if isinstance(self.obj, torch.Tensor) and not self.meta and not self.sparse:
            self.version = self.obj._version

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def expect_unchanged(self, what: str) -> None:
        if self.base is not None:
            now = self.base.tobytes()
            if now != self.before:
                diff = np.flatnonzero(np.frombuffer(now, np.uint8) != np.frombuffer(self.before, np.uint8))
                raise AssertionError(f"{what}: memory of {self.desc} changed at bytes {diff[:16].tolist()}")

    def expect_memory(self, expected_elements: np.ndarray, count: int, what: str) -> None:
        """The first ``count`` elements (C order) hold ``expected_elements``; every other
        byte of the buffer (sentinels, gaps, the rest) is unchanged."""
        assert self.base is not None and self.index is not None and self.values is not None
        want = np.frombuffer(self.before, np.uint8).copy()
        vals = np.ascontiguousarray(expected_elements.reshape(-1)[:count]).view(np.uint8).reshape(count, self.itemsize)
        offs = self.index.reshape(-1)[:count]
        for b in range(self.itemsize):
            want[offs + b] = vals[:, b]
        now = self.base
        if not np.array_equal(now, want):
            diff = np.flatnonzero(now != want)
            raise AssertionError(
                f"{what}: memory of {self.desc} differs from the expected write at bytes {diff[:16].tolist()} "
                f"(element bytes {offs.tolist()[:16]}...)"
            )


def c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Dense in C order, the way torch and NumPy define it (size-1 dims are ignored)."""
    if any(n == 0 for n in shape):
        return True
    expected = 1
    for n, s in reversed(list(zip(shape, strides))):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def random_values(rng: np.random.Generator, dtype: np.dtype, count: int, specials: bool = True) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, count).astype(np.bool_)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, count, endpoint=True, dtype=dtype)
    vals = rng.standard_normal(count) * 10.0 ** rng.integers(-3, 4, count)
    if specials and count:
        mask = rng.random(count) < 0.05
        vals[mask] = rng.choice([np.nan, np.inf, -np.inf, -0.0, 0.0], size=int(mask.sum()))
    return vals.astype(dtype)


@st.composite
def shapes(draw, rank: int | None = None, max_dim: int = 5) -> tuple[int, ...]:
    if rank is None:
        rank = draw(st.integers(0, 3))
    dim = st.one_of(st.integers(0, max_dim), st.just(1))
    return tuple(draw(dim) for _ in range(rank))


@st.composite
def layouts(draw, shape: tuple[int, ...], kind: str, contiguous_bias: float = 0.5) -> tuple[tuple[int, ...], str]:
    """Strides (in elements) for ``shape``: contiguous, steps, transposes, expands, overlaps."""
    natural = []
    acc = 1
    for n in reversed(shape):
        natural.append(acc)
        acc *= max(n, 1)
    natural = natural[::-1]
    if not shape or draw(UNIT) < contiguous_bias:
        return tuple(natural), "contiguous"
    mode = draw(st.sampled_from(["step", "transpose", "expand", "random"]))
    if mode == "transpose" and len(shape) >= 2:
        perm = draw(st.permutations(range(len(shape))))
        pshape = [shape[p] for p in perm]
        pnat, acc = [], 1
        for n in reversed(pshape):
            pnat.append(acc)
            acc *= max(n, 1)
        pnat = pnat[::-1]
        strides = [0] * len(shape)
        for i, p in enumerate(perm):
            strides[p] = pnat[i]
        return tuple(strides), f"transpose{tuple(perm)}"
    if mode == "step":
        axis = draw(st.integers(0, len(shape) - 1))
        step = draw(st.integers(2, 3))
        strides = list(natural)
        for a in range(axis + 1):  # slicing [..., ::step] of a larger array
            strides[a] *= step
        return tuple(strides), f"step{step}@{axis}"
    if mode == "expand":
        strides = [0 if draw(st.booleans()) else s for s in natural]
        return tuple(strides), "expand"
    lo = -6 if kind == "numpy" else 0
    strides = [draw(st.integers(lo, 8)) for _ in shape]
    return tuple(strides), "as_strided"


@dataclass
class ArrayFlags:
    readonly: bool = False
    requires_grad: bool = False
    parameter: bool = False
    meta: bool = False
    fake: bool = False
    sparse: bool = False
    neg: bool = False
    unaligned: bool = False


_FAKE_MODE: list[Any] = []


def _fake_mode() -> Any:
    """One FakeTensorMode for the session (tensors as torch.compile traces them)."""
    if not _FAKE_MODE:
        from torch._subclasses.fake_tensor import FakeTensorMode

        _FAKE_MODE.append(FakeTensorMode())
    return _FAKE_MODE[0]


def build_array(
    kind: str,
    dtype: str,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    layout: str,
    flags: ArrayFlags,
    seed: int,
    nonneg: bool = False,
) -> Arr:
    """An array of ``shape`` with ``strides`` inside a sentinel-padded buffer."""
    rng = np.random.default_rng(seed)
    npd = np.dtype(NP[dtype])
    size = npd.itemsize
    desc = f"{kind} {dtype} shape={shape} strides={strides} ({layout}) {flags} seed={seed}"
    if flags.meta:
        t = torch.empty(shape, dtype=TORCH[dtype], device="meta")
        return Arr(t, kind, dtype, shape, strides, meta=True, desc=desc, contiguous=True)
    if flags.fake:
        with _fake_mode():
            t = torch.empty(shape, dtype=TORCH[dtype])
        return Arr(t, kind, dtype, shape, strides, meta=True, desc=desc, contiguous=True)  # no memory either
    numel = int(np.prod(shape, dtype=np.int64))
    if numel:
        lo = sum(min(0, s * (n - 1)) for s, n in zip(strides, shape))
        hi = sum(max(0, s * (n - 1)) for s, n in zip(strides, shape))
    else:
        lo = hi = 0
    pre, post = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    total = pre + (hi - lo + 1) + post
    start = pre - lo
    if flags.unaligned:
        raw = np.empty(total * size + 1, np.uint8)
        memory = raw[1:]
    else:
        memory = np.empty(total * size, np.uint8)
    memory[:] = SENTINEL
    typed = memory.view(npd)
    elem_index = np.full(shape, start, dtype=np.int64)
    for axis, (s, n) in enumerate(zip(strides, shape)):
        idx_shape = [1] * len(shape)
        idx_shape[axis] = n
        elem_index = elem_index + (np.arange(n, dtype=np.int64) * s).reshape(idx_shape)
    stored = random_values(rng, npd, numel)
    if nonneg and npd.kind == "f" and rng.random() < 0.85:
        stored = np.abs(stored)
    typed[elem_index.reshape(-1)] = stored  # overlapping positions: the last write wins
    values = typed[elem_index.reshape(-1)].reshape(shape).copy()
    byte_index = elem_index * size
    if kind == "numpy":
        obj = np.lib.stride_tricks.as_strided(
            typed[start:], shape=shape, strides=tuple(s * size for s in strides), writeable=True
        )
        if flags.readonly:
            obj.flags.writeable = False
    else:
        assert not flags.unaligned
        obj = torch.from_numpy(typed).as_strided(shape, strides, start)
        if flags.neg:
            obj = torch._neg_view(obj)
            values = -values
        if flags.parameter:
            obj = torch.nn.Parameter(obj)
        elif flags.requires_grad:
            obj.requires_grad_(True)
        if flags.sparse:
            obj = obj.detach().to_sparse()
    return Arr(
        obj, kind, dtype, shape, strides, values=values, base=memory, index=byte_index, itemsize=size,
        contiguous=c_contiguous(shape, strides), readonly=flags.readonly,
        requires_grad=flags.requires_grad or flags.parameter, sparse=flags.sparse, neg=flags.neg,
        unaligned=flags.unaligned and size > 1 and numel > 0, desc=desc,
    )


FOREIGN_TORCH = [torch.float16, torch.bfloat16, torch.complex64]
FOREIGN_NUMPY = [np.dtype(np.float16), np.dtype(np.complex64), np.dtype(">f8"), np.dtype(">i4"), np.dtype(object)]


@st.composite
def arrays(
    draw,
    dtype: str,
    *,
    shape: tuple[int, ...] | None = None,
    kind: str | None = None,
    written: bool = False,
    wrong_dtype: float = 0.15,
    odd: float = 0.15,
    contiguous_bias: float = 0.5,
    others: float = 0.05,
    nonneg: bool = False,
) -> Arr:
    """An argument for a parameter of element type ``dtype`` (sometimes a wrong one)."""
    if draw(UNIT) < others:
        return draw(non_arrays())
    if kind is None:
        kind = draw(st.sampled_from(["torch", "numpy"]))
    if shape is None:
        shape = draw(shapes())
    seed = draw(st.integers(0, 2**32 - 1))
    if draw(UNIT) < wrong_dtype:
        choice = draw(st.sampled_from(DTYPES + ["foreign"]))
        if choice == "foreign":
            return foreign_array(kind, shape, draw(st.integers(0, 4)), seed)
        if choice != dtype:
            dtype = choice
    strides, layout = draw(layouts(shape, kind, contiguous_bias))
    flags = ArrayFlags()
    if draw(UNIT) < odd:
        if kind == "numpy":
            which = draw(st.sampled_from(["readonly", "unaligned"]))
        else:
            which = draw(st.sampled_from(["requires_grad", "parameter", "meta", "fake", "sparse", "neg"]))
        is_float = dtype in ("f32", "f64")
        if which in ("requires_grad", "parameter", "neg") and not is_float:
            which = "meta"
        if which == "sparse" and (layout != "contiguous" or dtype in ("u16", "u32", "u64")):
            which = "meta"  # (torch has no sparse kernels for these unsigned types)
        setattr(flags, which, True)
    return build_array(kind, dtype, shape, strides, layout, flags, seed, nonneg=nonneg)


def foreign_array(kind: str, shape: tuple[int, ...], which: int, seed: int) -> Arr:
    rng = np.random.default_rng(seed)
    if kind == "torch":
        t = torch.from_numpy(rng.standard_normal(shape)).to(FOREIGN_TORCH[which % len(FOREIGN_TORCH)])
        if which == 4:  # a lazily conjugated complex view: its memory holds the unconjugated values
            t = torch.complex(t.float(), t.float()).conj()
            return Arr(t, "torch", "foreign", shape, neg=True, desc=f"torch complex64 conj view shape={shape}")
        return Arr(t, "torch", "foreign", shape, desc=f"torch {t.dtype} shape={shape}")
    dt = FOREIGN_NUMPY[which % len(FOREIGN_NUMPY)]
    a = np.empty(shape, dt)
    a[...] = rng.standard_normal(shape) if dt != np.dtype(object) else 1.0
    return Arr(a, "numpy", "object" if dt == np.dtype(object) else "foreign", shape, desc=f"numpy {dt} shape={shape}")


@st.composite
def non_arrays(draw) -> Arr:
    v = draw(st.sampled_from(["none", "list", "float", "int", "str", "tuple", "dict"]))
    obj = {"none": None, "list": [1.0, 2.0], "float": 1.5, "int": 3, "str": "abc", "tuple": (1, 2), "dict": {}}[v]
    return Arr(obj, "other", None, desc=f"{type(obj).__name__} {obj!r}")


@st.composite
def bytes_likes(draw) -> Arr:
    """bytes, bytearray and memoryviews (contiguous or not) for byte and void pointers."""
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(0, 12))
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
    which = draw(st.sampled_from(["bytes", "bytearray", "mv_bytes", "mv_bytearray", "mv_strided", "mv_doubles"]))
    if which == "bytes":
        obj: Any = data
        base = np.frombuffer(obj, np.uint8)
        return Arr(obj, "bytes", "u8", (n,), values=base.copy(), base=base, readonly=True, desc=f"bytes({n})")
    if which == "bytearray":
        obj = bytearray(data)
        base = np.frombuffer(obj, np.uint8)
        return Arr(obj, "bytes", "u8", (n,), values=base.copy(), base=base, index=np.arange(n), desc=f"bytearray({n})")
    if which == "mv_bytes":
        obj = memoryview(data)
        base = np.frombuffer(data, np.uint8)
        return Arr(obj, "bytes", "u8", (n,), values=base.copy(), base=base, readonly=True, desc=f"memoryview(bytes({n}))")
    if which == "mv_bytearray":
        ba = bytearray(data)
        obj = memoryview(ba)
        base = np.frombuffer(ba, np.uint8)
        return Arr(obj, "bytes", "u8", (n,), values=base.copy(), base=base, index=np.arange(n), desc=f"memoryview(bytearray({n}))")
    if which == "mv_strided":
        ba = bytearray(data + data)
        obj = memoryview(ba)[::2]
        base = np.frombuffer(ba, np.uint8)
        return Arr(obj, "bytes", "u8", (n,), values=base[::2].copy(), base=base, index=2 * np.arange(n), buffer_contiguous=obj.c_contiguous,
                   desc=f"memoryview(bytearray({2 * n}))[::2]")
    doubles = pyarray.array("d", rng.standard_normal(n).tolist())
    obj = memoryview(doubles)
    base = np.frombuffer(doubles, np.uint8)
    return Arr(obj, "bytes", "u8", (8 * n,), values=base.copy(), base=base, index=np.arange(8 * n),
               desc=f"memoryview(array('d', {n} items))")


# --------------------------------------------------------------------------- #
# The oracle                                                                   #
# --------------------------------------------------------------------------- #

Fault = tuple[type, str]  # (exception class, name the message must contain)


def array_faults(a: Arr, want: str, *, written: bool, may_copy: bool, wrapped: bool = False) -> set[type]:
    """The errors an array argument justifies on its own (empty: the bridge must accept it).

    ``want``: the parameter's dtype ("any" for void *); ``may_copy``: a read argument
    whose shape a contract declares; ``wrapped``: passed as tensorffi.strided(x).
    """
    if a.kind == "other":
        return {ArgumentTypeError}
    if a.kind == "bytes":
        if want not in ("u8", "i8", "any"):
            return {ArgumentTypeError}
        faults: set[type] = set()
        if not a.buffer_contiguous:
            faults.add(LayoutError)
        if written and a.readonly:
            faults.add(WritabilityError)
        return faults
    faults = set()
    if a.meta:
        faults.add(DeviceError)
    if a.sparse:
        faults.add(LayoutError)
    if want == "any":
        if a.dtype == "object":
            faults.add(DTypeError)
    elif a.dtype != want:
        faults.add(DTypeError)
    if written:
        if a.requires_grad or a.readonly:
            faults.add(WritabilityError)
        if a.unaligned or a.neg:
            faults.add(LayoutError)
        if wrapped:
            if self_overlaps(a.shape, a.strides):
                faults.add(LayoutError)
        elif not a.contiguous:
            faults.add(LayoutError)
    else:
        if a.requires_grad and torch.is_grad_enabled():
            faults.add(GradError)  # read outside autograd: its result would silently carry no gradient
        if a.neg and not may_copy:
            faults.add(LayoutError)  # its memory does not hold its values; C cannot be given it as is
        if not wrapped and not may_copy and not (a.contiguous and not a.unaligned):
            faults.add(LayoutError)
    return faults


def self_overlaps(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Exactly: do two elements of the view share memory? (brute force; strides in elements)"""
    offsets = np.zeros(1, np.int64)
    for n, s in zip(shape, strides):
        offsets = (offsets[:, None] + np.arange(n, dtype=np.int64)[None, :] * s).reshape(-1)
    return len(set(offsets.tolist())) < len(offsets)


def surely_non_overlapping(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """The easy sufficient condition: sorted by |stride|, each stride clears the extent of
    the smaller dims. A bridge must accept such written views (BLAS-style lda views)."""
    dims = sorted((abs(s), n) for s, n in zip(strides, shape) if n > 1)
    extent = 1
    for s, n in dims:
        if s < extent:
            return False
        extent = s * (n - 1) + extent
    return True


@dataclass
class Scalar:
    value: Any
    tag: str  # "int" | "bool" | "float" | "bad"
    num: Any = None  # the integer (int/bool tags) or the float value

    def __repr__(self) -> str:
        return f"Scalar({self.value!r} [{type(self.value).__name__}], {self.tag})"


def _bits(ct: Any) -> int:
    return 8 * ctypes.sizeof(ct)


def _range(bits: int, signed: bool) -> tuple[int, int]:
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


# fz_id_<suffix>: the C type's range, from ctypes (independent of cffi and the bridge).
INT_IDS: dict[str, tuple[int, int]] = {
    "i8": _range(8, True), "u8": _range(8, False), "i16": _range(16, True), "u16": _range(16, False),
    "i32": _range(32, True), "u32": _range(32, False), "i64": _range(64, True), "u64": _range(64, False),
    "schar": _range(8, True), "uchar": _range(8, False),
    "short": _range(_bits(ctypes.c_short), True), "int": _range(_bits(ctypes.c_int), True),
    "uint": _range(_bits(ctypes.c_uint), False), "long": _range(_bits(ctypes.c_long), True),
    "ulong": _range(_bits(ctypes.c_ulong), False), "llong": _range(_bits(ctypes.c_longlong), True),
    "size": _range(_bits(ctypes.c_size_t), False), "intptr": _range(_bits(ctypes.c_void_p), True),
    "uintptr": _range(_bits(ctypes.c_void_p), False), "ptrdiff": _range(_bits(ctypes.c_void_p), True),
    "bool": (0, 1),
}
FLOAT_IDS = {"float": np.float32, "double": np.float64}
INT64 = _range(64, True)
INT32 = _range(32, True)

_BOUNDS = sorted(
    {v for bits in (8, 16, 32, 64) for v in (2 ** (bits - 1), -(2 ** (bits - 1)), 2**bits)}
    | {0, 1, -1, 2**100, -(2**100), 2**1024, -(2**1024)}
)
NP_INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
TORCH_INTS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]


@st.composite
def scalars(draw, ints_only: bool = False) -> Scalar:
    """Numbers and non-numbers a caller might pass to a scalar parameter, tagged."""
    kinds = ["int", "int", "int", "npint", "bool", "npbool", "t0int", "a0int", "t0bool"]
    if not ints_only:
        kinds += ["float", "float", "npfloat", "t0float", "a0float", "fraction", "decimal", "bad", "bad"]
    which = draw(st.sampled_from(kinds))
    if which == "int":
        v = draw(st.one_of(
            st.sampled_from(_BOUNDS).flatmap(lambda b: st.integers(b - 2, b + 1)),
            st.integers(-(2**70), 2**70),
            st.integers(-300, 300),
        ))
        return Scalar(v, "int", v)
    if which == "npint":
        t = draw(st.sampled_from(NP_INTS))
        info = np.iinfo(t)
        v = draw(st.one_of(st.integers(int(info.min), int(info.max)), st.sampled_from([int(info.min), int(info.max)])))
        return Scalar(t(v), "int", v)
    if which == "bool":
        b = draw(st.booleans())
        return Scalar(b, "bool", int(b))
    if which == "npbool":
        b = draw(st.booleans())
        return Scalar(np.bool_(b), "bool", int(b))
    if which == "t0bool":
        b = draw(st.booleans())
        return Scalar(torch.tensor(b), "bool", int(b))
    if which == "t0int":
        t = draw(st.sampled_from(TORCH_INTS))
        info = torch.iinfo(t)
        v = draw(st.integers(info.min, info.max))
        return Scalar(torch.tensor(v, dtype=t), "int", v)
    if which == "a0int":
        t = draw(st.sampled_from(NP_INTS))
        info = np.iinfo(t)
        v = draw(st.integers(int(info.min), int(info.max)))
        return Scalar(np.array(v, dtype=t), "int", v)
    if which == "float":
        f = draw(st.one_of(st.floats(), st.sampled_from([3.0, -0.0, 0.5, 1e300, 2.0**64, -(2.0**63)])))
        return Scalar(f, "float", f)
    if which == "npfloat":
        t, width = draw(st.sampled_from([(np.float16, 16), (np.float32, 32), (np.float64, 64), (np.longdouble, 64)]))
        f = draw(st.floats(width=width))
        return Scalar(t(f), "float", float(t(f)))
    if which == "t0float":
        t = draw(st.sampled_from([torch.float32, torch.float64]))
        f = draw(st.floats(width=32))
        v = torch.tensor(f, dtype=t)
        return Scalar(v, "float", float(v))
    if which == "a0float":
        f = draw(st.floats())
        return Scalar(np.array(f), "float", f)
    if which == "fraction":
        fr = Fraction(draw(st.integers(-50, 50)), draw(st.integers(1, 4)))
        return Scalar(fr, "float", float(fr))
    if which == "decimal":
        d = Decimal(draw(st.floats(allow_nan=False, allow_infinity=False)))
        return Scalar(d, "float", float(d))
    bad = draw(st.sampled_from(["none", "str", "bytes", "list", "tuple", "complex", "dict", "object", "array", "tensor"]))
    obj = {"none": None, "str": "3", "bytes": b"3", "list": [1], "tuple": (1,), "complex": 1j, "dict": {},
           "object": object(), "array": np.array([3, 3]), "tensor": torch.tensor([3, 3])}[bad]
    return Scalar(obj, "bad")


def expect_int(s: Scalar, lo: int, hi: int) -> tuple[type | None, int | None]:
    """(error class, None) or (None, the int C receives) for an integer parameter."""
    if s.tag in ("int", "bool"):
        return (None, s.num) if lo <= s.num <= hi else (ArgumentOverflowError, None)
    return ArgumentTypeError, None  # floats (even integral ones), strings, None: never truncated


def expect_float(s: Scalar, c_type: Any) -> tuple[type | None, float | None]:
    """(error class, None) or (None, the value C receives) for a float/double parameter."""
    if s.tag == "bad":
        return ArgumentTypeError, None
    if s.tag in ("int", "bool"):
        try:
            f = float(s.num)
        except OverflowError:
            return ArgumentOverflowError, None
    else:
        f = float(s.num)
    with np.errstate(all="ignore"):
        r = float(c_type(f))
    # A finite value the C type cannot hold (1e300 or 1e-50 for a float) is refused,
    # never turned into inf or 0; NaN and infinities pass.
    if math.isfinite(f) and (math.isinf(r) or (r == 0.0 and f != 0.0)):
        return ArgumentOverflowError, None
    return None, r


def same_float(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def check_raised(err: BaseException, faults: list[Fault], fname: str) -> None:
    """``err`` must be a TensorFFIError of one of the expected kinds, naming the argument."""
    if not isinstance(err, TensorFFIError):
        raise AssertionError(f"{fname}: raised {type(err).__name__} (not a TensorFFIError): {err}; expected one of {faults}") from err
    msg = str(err)
    for cls, name in faults:
        if isinstance(err, cls) and (f"'{name}'" in msg or f"{name}=" in msg):
            return
    raise AssertionError(
        f"{fname}: raised {type(err).__name__}: {msg!r}\n  expected one of "
        + ", ".join(f"{c.__name__} naming {n!r}" for c, n in faults)
    ) from err


def call_expecting(fn: Callable[..., Any], args: tuple, kwargs: dict, faults: list[Fault], fname: str) -> tuple[bool, Any]:
    """Call; if ``faults`` is non-empty an error of one of them must be raised.
    Returns (raised, result)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = fn(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - every exception is checked
        if not faults:
            raise AssertionError(f"{fname}: raised {type(err).__name__}: {err}, but the call is valid") from err
        check_raised(err, faults, fname)
        return True, None
    if faults:
        raise AssertionError(
            f"{fname}: returned {result!r}, expected an error: "
            + ", ".join(f"{c.__name__} naming {n!r}" for c, n in faults)
        )
    return False, result


def to_numpy(x: Any) -> np.ndarray:
    return x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def check_version(a: Arr, bumped: bool) -> None:
    if a.version is None:
        return
    t = a.obj
    if bumped:
        assert t._version > a.version, f"{a.desc}: C wrote it but its version counter was not bumped"


# --------------------------------------------------------------------------- #
# 1. Scalars at and beyond the limits of each C type                           #
# --------------------------------------------------------------------------- #


@settings(max_examples=QUICK * 3, **_COMMON)
@given(data=st.data())
def test_scalar_parameters(fuzzlib, data):
    _scalar_parameters(fuzzlib, data)


@pytest.mark.slow
@settings(max_examples=LONG, **_COMMON)
@given(data=st.data())
def test_scalar_parameters_long(fuzzlib, data):
    _scalar_parameters(fuzzlib, data)


def _scalar_parameters(lib, data):
    suffix = data.draw(st.sampled_from(sorted(INT_IDS) + sorted(FLOAT_IDS)), label="fz_id_")
    s = data.draw(scalars(), label="value")
    fname = f"fz_id_{suffix}"
    if suffix in INT_IDS:
        err, want = expect_int(s, *INT_IDS[suffix])
    else:
        err, want = expect_float(s, FLOAT_IDS[suffix])
    raised, result = call_expecting(getattr(lib, fname), (s.value,), {}, [(err, "v")] if err else [], fname)
    if not raised:
        if suffix in INT_IDS:
            assert type(result) in (int, bool) and int(result) == want, f"{fname}({s!r}) returned {result!r}, C got {want}"
        else:
            assert same_float(result, want), f"{fname}({s!r}) returned {result!r}, expected {want!r}"


@settings(max_examples=QUICK * 2, **_COMMON)
@given(data=st.data())
def test_several_scalars_name_the_bad_one(fuzzlib, data):
    _several_scalars(fuzzlib, data)


@pytest.mark.slow
@settings(max_examples=LONG, **_COMMON)
@given(data=st.data())
def test_several_scalars_long(fuzzlib, data):
    _several_scalars(fuzzlib, data)


def _several_scalars(lib, data):
    # double fz_mix(int8_t a, uint32_t b, int64_t c, double d, size_t e)
    params = [("a", _range(8, True)), ("b", _range(32, False)), ("c", INT64), ("d", None), ("e", _range(64, False))]
    vals, faults, conv = [], [], []
    for name, rng_ in params:
        if data.draw(UNIT, label=f"{name} odd?") < 0.2:
            s = data.draw(scalars(), label=name)
        elif rng_ is None:
            f = data.draw(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6), label=name)
            s = Scalar(f, "float", f)
        else:
            v = data.draw(st.integers(max(rng_[0], -100), min(rng_[1], 1000)), label=name)
            s = Scalar(v, "int", v)
        vals.append(s)
        err, want = expect_float(s, np.float64) if rng_ is None else expect_int(s, *rng_)
        if err:
            faults.append((err, name))
        conv.append(want)
    raised, result = call_expecting(lib.fz_mix, tuple(s.value for s in vals), {}, faults, "fz_mix")
    if not raised:
        acc = float(conv[0])
        for v in conv[1:]:
            acc += float(v)
        assert same_float(result, acc), f"fz_mix{tuple(vals)} = {result!r}, expected {acc!r}"


# --------------------------------------------------------------------------- #
# 2. Raw functions (no contract): every dtype, view and flag                   #
# --------------------------------------------------------------------------- #


@st.composite
def lengths(draw, numel: int) -> Scalar:
    """The length argument of a raw call: numel, less, or junk; never more than numel
    (without a contract the bridge cannot know the length: that is the caller's promise)."""
    r = draw(UNIT)
    if r < 0.7:
        return Scalar(numel, "int", numel)
    if r < 0.85:
        v = draw(st.integers(-3, numel))
        return Scalar(v, "int", v)
    s = draw(scalars())
    if s.tag in ("int", "bool") and INT64[0] <= s.num <= INT64[1] and s.num > numel:
        return Scalar(numel, "int", numel)
    return s


def _run_raw(fn, fname: str, a: Arr, want: str, written: bool, n: Scalar, n_range, kind_of_op,
             xname: str = "x", pname: str = "n"):
    note(f"{fname}: {xname} = {a.desc}; {pname} = {n!r}")
    faults = [(cls, xname) for cls in array_faults(a, want, written=written, may_copy=False)]
    err, count = expect_int(n, *n_range)
    if err:
        faults.append((err, pname))
    a.snapshot()
    raised, result = call_expecting(fn, (a.obj, n.value), {}, faults, fname)
    if raised:
        a.expect_unchanged(f"{fname} refused")
        return
    count = max(0, count)
    if kind_of_op == "hash":
        assert result == fnv_elements(a.values.reshape(-1)[:count]), f"{fname}: wrong hash"
        a.expect_unchanged(f"{fname} (reads only)")
    elif kind_of_op == "sum":
        ref = 0.0
        for v in a.values.reshape(-1)[:count].tolist():
            ref += v
        assert same_float(result, ref), f"{fname}: {result!r} != {ref!r}"
        a.expect_unchanged(f"{fname} (reads only)")
    else:
        expected = kind_of_op(a.values.reshape(-1)) if callable(kind_of_op) else inc_values(a.values.reshape(-1))
        if a.base is not None and a.index is not None:
            a.expect_memory(expected, count, fname)
        check_version(a, count > 0)


@settings(max_examples=QUICK * 4, **_COMMON)
@given(data=st.data())
def test_raw_functions_every_dtype_and_view(fuzzlib, data):
    _raw_functions(fuzzlib, data)


@pytest.mark.slow
@settings(max_examples=LONG, **_COMMON)
@given(data=st.data())
def test_raw_functions_long(fuzzlib, data):
    _raw_functions(fuzzlib, data)


def _raw_functions(lib, data):
    want = data.draw(st.sampled_from(DTYPES), label="C element type")
    op = data.draw(st.sampled_from(["hash", "inc"]), label="op")
    written = op == "inc"
    if want in ("u8", "i8") and data.draw(UNIT) < 0.15:
        a = data.draw(bytes_likes(), label="x")
        if want == "i8":
            a.values = a.values.view(np.int8)
    else:
        a = data.draw(arrays(want, written=written), label="x")
    n = data.draw(lengths(a.numel if a.kind != "other" else 0), label="n")
    fname = f"fz_{op}_{want}"
    _run_raw(getattr(lib, fname), fname, a, want, written, n, INT64, op)


USERLIB_RAW = {
    # name: (dtype, written, length C type range, op, array name, length name)
    "add_one_i8": ("i8", True, INT64, "inc", "x", "n"),
    "add_one_u8": ("u8", True, INT64, "inc", "x", "n"),
    "add_one_i16": ("i16", True, INT64, "inc", "x", "n"),
    "add_one_u16": ("u16", True, INT64, "inc", "x", "n"),
    "add_one_i32": ("i32", True, INT64, "inc", "x", "n"),
    "add_one_i64": ("i64", True, INT64, "inc", "x", "n"),
    "add_one_f64": ("f64", True, INT64, "inc", "x", "n"),
    "process_data": ("f32", True, INT32, lambda v: (np.float32(2) * v + np.float32(1)).astype(np.float32), "data", "size"),
}


@settings(max_examples=QUICK * 2, **_COMMON)
@given(data=st.data())
def test_userlib_raw_functions(userlib, data):
    _userlib_raw(userlib, data)


@pytest.mark.slow
@settings(max_examples=LONG, **_COMMON)
@given(data=st.data())
def test_userlib_raw_functions_long(userlib, data):
    _userlib_raw(userlib, data)


def _userlib_raw(lib, data):
    fname = data.draw(st.sampled_from(sorted(USERLIB_RAW)), label="function")
    want, written, n_range, op, xname, pname = USERLIB_RAW[fname]
    a = data.draw(arrays(want, written=written), label="x")
    n = data.draw(lengths(a.numel if a.kind != "other" else 0), label="n")
    with np.errstate(all="ignore"):
        _run_raw(getattr(lib, fname), fname, a, want, written, n, n_range, op, xname, pname)


@settings(max_examples=QUICK, **_COMMON)
@given(data=st.data())
def test_userlib_struct_fields(userlib, data):
    _userlib_struct(userlib, data)


@pytest.mark.slow
@settings(max_examples=LONG, **_COMMON)
@given(data=st.data())
def test_userlib_struct_fields_long(userlib, data):
    _userlib_struct(userlib, data)


def _userlib_struct(lib, data):
    """struct job {const float *in; float *out; int64_t n; float gain;} and run_job(&job):
    fields are checked like arguments (named "field 'x'"), arrays kept alive, C's
    write through 'out' bumps its version."""
    a_in = data.draw(arrays("f32", shape=data.draw(shapes(rank=1), label="in shape")), label="in")
    a_out = data.draw(arrays("f32", shape=data.draw(shapes(rank=1), label="out shape"), written=True), label="out")
    room = min(a_in.numel if a_in.kind != "other" else 0, a_out.numel if a_out.kind != "other" else 0)
    n = data.draw(lengths(room), label="n")
    if data.draw(UNIT, label="gain odd?") < 0.15:
        gain = data.draw(scalars(), label="gain")
    else:
        f = data.draw(st.floats(-100, 100), label="gain")
        gain = Scalar(f, "float", f)
    note(f"job: in = {a_in.desc}; out = {a_out.desc}; n = {n!r}; gain = {gain!r}")
    faults: list[Fault] = []
    for a, name, written in ((a_in, "in", False), (a_out, "out", True)):
        if a.obj is not None:  # None is NULL for a pointer field (and n <= 0 then)
            faults += [(cls, name) for cls in array_faults(a, "f32", written=written, may_copy=False)]
    err_n, count = expect_int(n, *INT64)
    err_g, g = expect_float(gain, np.float32)
    faults += [(e, name) for e, name in ((err_n, "n"), (err_g, "gain")) if e]
    for a in (a_in, a_out):
        a.snapshot()
    raised, job = call_expecting(lambda: lib.struct("job", **{"in": a_in.obj, "out": a_out.obj, "n": n.value, "gain": gain.value}),
                                 (), {}, faults, "struct job")
    if raised:
        a_in.expect_unchanged("struct job refused")
        a_out.expect_unchanged("struct job refused")
        return
    assert lib.run_job(job) is None
    count = max(0, count)
    a_in.expect_unchanged("run_job in")
    if a_out.obj is None:
        return
    if count == 0:
        a_out.expect_unchanged("run_job out (n <= 0)")
        return
    with np.errstate(all="ignore"):
        expected = (np.float32(g) * a_in.values.reshape(-1)[:count]).astype(np.float32)
    a_out.expect_memory(expected, count, "run_job out")
    check_version(a_out, True)


# --------------------------------------------------------------------------- #
# 3. void *: any dtype, bytes-likes, cffi objects                              #
# --------------------------------------------------------------------------- #


@settings(max_examples=QUICK * 2, **_COMMON)
@given(data=st.data())
def test_void_pointer_takes_any_dense_buffer(fuzzlib, data):
    _void_pointer(fuzzlib, data)


@pytest.mark.slow
@settings(max_examples=LONG, **_COMMON)
@given(data=st.data())
def test_void_pointer_long(fuzzlib, data):
    _void_pointer(fuzzlib, data)


def _void_pointer(lib, data):
    r = data.draw(UNIT, label="which")
    if r < 0.25:
        a = data.draw(bytes_likes(), label="p")
    elif r < 0.35:
        seed = data.draw(st.integers(0, 2**32 - 1))
        a = foreign_array(data.draw(st.sampled_from(["torch", "numpy"])), data.draw(shapes()), data.draw(st.integers(0, 4)), seed)
    elif r < 0.4:
        raw = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))).integers(0, 256, 9, dtype=np.uint8)
        cdata = lib.ffi.new("uint8_t[]", raw.tolist())
        assert lib.fz_bytes(cdata, 9) == fnv_elements(raw)
        return
    else:
        a = data.draw(arrays(data.draw(st.sampled_from(DTYPES)), wrong_dtype=0, others=0.1), label="p")
    note(f"fz_bytes: p = {a.desc}")
    faults = [(cls, "p") for cls in array_faults(a, "any", written=False, may_copy=False)]
    if a.kind in ("torch", "numpy") and a.dtype == "foreign":
        nbytes = a.obj.numel() * a.obj.element_size() if a.kind == "torch" else a.obj.nbytes
        if a.kind == "numpy" and not a.obj.flags.c_contiguous:
            faults.append((LayoutError, "p"))
    elif a.kind == "other":
        nbytes = 0
    else:
        nbytes = a.numel * (a.itemsize if a.kind != "bytes" else 1)
    a.snapshot()
    raised, result = call_expecting(lib.fz_bytes, (a.obj, nbytes), {}, faults, "fz_bytes")
    if raised or a.kind == "other":
        a.expect_unchanged("fz_bytes")
        return
    if a.dtype == "foreign":
        if a.kind == "torch":
            flat = torch.empty(a.obj.numel(), dtype=a.obj.dtype).copy_(a.obj.reshape(-1))
            raw = flat.view(torch.uint8).numpy()
        else:
            raw = a.obj.reshape(-1).view(np.uint8)
        expected = fnv_elements(raw)
    else:
        expected = fnv_elements(np.ascontiguousarray(a.values).view(np.uint8).reshape(-1))
    assert result == expected, f"fz_bytes({a.desc}): wrong hash"
    a.expect_unchanged("fz_bytes")


# --------------------------------------------------------------------------- #
# 4. tensorffi.strided: C walks the view's own strides                         #
# --------------------------------------------------------------------------- #


@settings(max_examples=QUICK * 3, **_COMMON)
@given(data=st.data())
def test_strided_views(fuzzlib, data):
    _strided_views(fuzzlib, data)


@pytest.mark.slow
@settings(max_examples=LONG, **_COMMON)
@given(data=st.data())
def test_strided_views_long(fuzzlib, data):
    _strided_views(fuzzlib, data)


def _strided_views(lib, data):
    written = data.draw(st.booleans(), label="written")
    wrapped = data.draw(UNIT, label="wrap") < 0.8
    kind = data.draw(st.sampled_from(["torch", "numpy"]), label="kind")
    shape = data.draw(shapes(rank=2), label="shape")
    strides, layout = data.draw(layouts(shape, kind, contiguous_bias=0.2), label="strides")
    flags = ArrayFlags()
    odd = data.draw(st.sampled_from(["none"] * 8 + ["readonly" if kind == "numpy" else "requires_grad", "neg" if kind == "torch" else "none"]))
    if odd != "none":
        setattr(flags, odd, True)
    a = build_array(kind, "f64", shape, strides, layout, flags, data.draw(st.integers(0, 2**32 - 1)))
    note(f"x = {a.desc}; wrapped={wrapped}; written={written}")
    rows, cols = shape
    rs, cs = strides
    faults = [(cls, "x") for cls in array_faults(a, "f64", written=written, may_copy=False, wrapped=wrapped)]
    maybe_refused = written and wrapped and not self_overlaps(shape, strides) and not surely_non_overlapping(shape, strides)
    arg = tensorffi.strided(a.obj) if wrapped else a.obj
    fname = "fz_strided_inc" if written else "fz_strided_hash"
    a.snapshot()
    try:
        raised, result = call_expecting(getattr(lib, fname), (arg, rows, cols, rs, cs), {}, faults, fname)
    except AssertionError as exc:
        if maybe_refused and not faults and isinstance(exc.__cause__, LayoutError) and "overlaps" in str(exc.__cause__):
            a.expect_unchanged(fname)  # a conservative refusal of an interleaved view: allowed
            return
        raise
    if raised:
        a.expect_unchanged(f"{fname} refused")
        return
    if written:
        a.expect_memory(inc_values(a.values.reshape(-1)), a.numel, fname)
        check_version(a, a.numel > 0)
    else:
        assert result == fnv_elements(a.values), f"{fname}: wrong hash"
        a.expect_unchanged(fname)


# --------------------------------------------------------------------------- #
# 5. Contracts: shapes in shared symbols, products, fills, outs, optionals     #
# --------------------------------------------------------------------------- #


@dataclass
class P:
    """The test's own model of one parameter of a contracted function."""

    name: str
    role: str  # in | out | inout | opt (arrays); fill | scalar
    dtype: str = "f64"  # arrays; scalars: C type key of INT_IDS / FLOAT_IDS
    dims: tuple[str, ...] = ()  # arrays: "n", "2*n", "m*k", "3"
    expr: str | None = None  # fills: "n" (a symbol) or "numel(x)"
    nonneg: bool = False


@dataclass
class Spec:
    name: str
    params: list[P]
    ref: Callable[..., Any]  # ref(env, arrays, scalars) -> {out name: values, "return": value} or raises CFails
    returns: str = "none"  # none | value | status
    keywords: tuple[str, ...] = ()  # symbols fixed by no array or parameter: keyword arguments


def _parse_dim(d: str) -> tuple[int, tuple[str, ...]]:
    factor, syms = 1, []
    for part in d.split("*"):
        part = part.strip()
        if part.isdigit():
            factor *= int(part)
        else:
            syms.append(part)
    return factor, tuple(syms)


def _seqsum(x: np.ndarray, w: np.ndarray | None) -> float:
    s = 0.0
    for i, xi in enumerate(x.tolist()):
        s += (w[i] * xi if w is not None else xi)
    return s


class CFails(Exception):
    """Raised by a reference: C returns an error status for these inputs."""


def _sqrt_ref(env, A, S):
    x = A["x"]
    if not np.all(x >= 0):
        raise CFails("negative or NaN")
    return {"y": np.sqrt(x)}


SPECS = [
    Spec("fz_scale2d", [P("x", "in", dims=("rows", "cols")), P("y", "out", dims=("rows", "cols")),
                        P("rows", "fill", "i64", expr="rows"), P("cols", "fill", "i64", expr="cols"), P("a", "scalar", "double")],
         lambda env, A, S: {"y": S["a"] * A["x"]}),
    Spec("fz_add_f32", [P("a", "in", "f32", ("n",)), P("b", "in", "f32", ("n",)), P("out", "out", "f32", ("n",)),
                        P("n", "fill", "i64", expr="n")],
         lambda env, A, S: {"out": A["a"] + A["b"]}),
    Spec("fz_dup", [P("x", "in", dims=("n",)), P("y", "out", dims=("2*n",)), P("n", "fill", "i64", expr="n")],
         lambda env, A, S: {"y": np.repeat(A["x"], 2)}),
    Spec("fz_pairsum", [P("x", "in", dims=("2*n",)), P("y", "out", dims=("n",)), P("n", "fill", "i64", expr="n")],
         lambda env, A, S: {"y": A["x"][0::2] + A["x"][1::2]}),
    Spec("fz_outer", [P("a", "in", dims=("m",)), P("b", "in", dims=("k",)), P("c", "out", dims=("m*k",)),
                      P("m", "fill", "i64", expr="m"), P("k", "fill", "i64", expr="k")],
         lambda env, A, S: {"c": np.multiply.outer(A["a"], A["b"]).reshape(-1)}),
    Spec("fz_iota", [P("y", "out", "i64", ("n",)), P("n", "fill", "i64", expr="n")],
         lambda env, A, S: {"y": np.arange(env["n"], dtype=np.int64)}),
    Spec("fz_iota32", [P("y", "out", "i32", ("n",)), P("n", "fill", "i32", expr="n")],
         lambda env, A, S: {"y": np.arange(env["n"], dtype=np.int32)}),
    Spec("fz_fill", [P("y", "out", dims=("m",)), P("count", "fill", "i64", expr="m"), P("v", "scalar", "double")],
         lambda env, A, S: {"y": np.full(env["m"], S["v"])}, keywords=("m",)),
    Spec("fz_hash2d", [P("x", "in", dims=("r", "c")), P("count", "fill", "i64", expr="numel(x)")],
         lambda env, A, S: {"return": fnv_elements(A["x"])}, returns="value"),
    Spec("fz_axpy", [P("x", "in", dims=("n",)), P("y", "inout", dims=("n",)), P("n", "fill", "i64", expr="n"),
                     P("a", "scalar", "double")],
         lambda env, A, S: {"y": A["y"] + S["a"] * A["x"]}),
    Spec("fz_wsum", [P("x", "in", dims=("n",)), P("w", "opt", dims=("n",)), P("n", "fill", "i64", expr="n")],
         lambda env, A, S: {"return": _seqsum(A["x"], A.get("w"))}, returns="value"),
    Spec("fz_sqrt", [P("x", "in", dims=("n",), nonneg=True), P("y", "out", dims=("n",)), P("n", "fill", "i64", expr="n")],
         _sqrt_ref, returns="status"),
    Spec("fz_norm3", [P("v", "in", dims=("3", "n")), P("out", "out", dims=("n",)), P("n", "fill", "i64", expr="n")],
         lambda env, A, S: {"out": np.sqrt(A["v"][0] * A["v"][0] + A["v"][1] * A["v"][1] + A["v"][2] * A["v"][2])}),
]
GENERAL_SPECS = list(SPECS)
for _s in DTYPES:
    SPECS.append(Spec(f"fz_chash_{_s}", [P("x", "in", _s, ("n",)), P("n", "fill", "i64", expr="n")],
                      lambda env, A, S: {"return": fnv_elements(A["x"])}, returns="value"))
    SPECS.append(Spec(f"fz_cinc_{_s}", [P("x", "inout", _s, ("n",)), P("n", "fill", "i64", expr="n")],
                      lambda env, A, S: {"x": inc_values(A["x"])}))
    SPECS.append(Spec(f"fz_copy_{_s}", [P("x", "in", _s, ("n",)), P("y", "out", _s, ("n",)), P("n", "fill", "i64", expr="n")],
                      lambda env, A, S: {"y": A["x"].copy()}))
DTYPE_SPECS = SPECS[len(GENERAL_SPECS):]


@st.composite
def size_values(draw, true_value: int | None, c_range: tuple[int, int]) -> Scalar:
    """A value passed for a filled-in length or a size keyword: right, wrong or junk."""
    r = draw(UNIT)
    if true_value is not None and r < 0.6:
        return Scalar(true_value, "int", true_value)
    if r < 0.8:
        v = draw(st.integers(-2, 6))
        return Scalar(v, "int", v)
    if r < 0.9:
        v = draw(st.sampled_from([c_range[1] + 1, c_range[0] - 1, 2**63, 2**64, -(2**63) - 1]))
        return Scalar(v, "int", v)
    s = draw(scalars())
    if s.tag in ("int", "bool") and 0 <= s.num and s.num > 64:
        return Scalar(64, "int", 64)  # never ask for a huge allocation that is in range
    return s


@st.composite
def wrong_shapes(draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Near misses (one dim off by one, a dim more or less) and random shapes."""
    r = draw(UNIT)
    if r < 0.5 and shape:
        axis = draw(st.integers(0, len(shape) - 1))
        out = list(shape)
        out[axis] = max(0, out[axis] + draw(st.sampled_from([-1, 1])))
        return tuple(out)
    if r < 0.75:
        if shape and draw(st.booleans()):
            return shape[:-1]
        return shape + (draw(st.integers(1, 3)),)
    return draw(shapes())


def _dims(p: P, env: dict[str, int]) -> tuple[int, ...] | None:
    out = []
    for d in p.dims:
        factor, syms = _parse_dim(d)
        if any(s not in env for s in syms):
            return None
        out.append(factor * int(np.prod([env[s] for s in syms], dtype=np.int64)))
    return tuple(out)


@settings(max_examples=QUICK * 4, **_COMMON)
@given(data=st.data())
def test_contracts(fuzzlib, data):
    _contracts(fuzzlib, data)


@settings(max_examples=QUICK * 4, **_COMMON)
@given(data=st.data())
def test_contract_shapes(fuzzlib, data):
    """Only sizes go wrong (right dtypes, plain arrays, valid scalars): the shape
    logic (shared symbols, 2*n, m*k, fixed dims, lengths, keywords) in focus."""
    _contracts(fuzzlib, data, noisy=False)


@pytest.mark.slow
@settings(max_examples=LONG * 2, **_COMMON)
@given(data=st.data())
def test_contracts_long(fuzzlib, data):
    _contracts(fuzzlib, data)


@pytest.mark.slow
@settings(max_examples=LONG, **_COMMON)
@given(data=st.data())
def test_contract_shapes_long(fuzzlib, data):
    _contracts(fuzzlib, data, noisy=False)


def _contracts(lib, data, noisy: bool = True):
    # the per-dtype functions are many but alike: draw them a quarter of the time
    spec = data.draw(st.one_of(st.sampled_from(GENERAL_SPECS), st.sampled_from(GENERAL_SPECS),
                               st.sampled_from(GENERAL_SPECS), st.sampled_from(DTYPE_SPECS)), label="function")
    params = spec.params
    symbols = sorted({s for p in params for d in p.dims for s in _parse_dim(d)[1]})
    env_true = {s: data.draw(st.one_of(st.integers(1, 4), st.just(0)), label=f"true {s}") for s in symbols}
    kind = data.draw(st.sampled_from(["torch", "numpy"]), label="kind")
    mixed = data.draw(UNIT, label="mixed kinds?") < 0.1

    args: dict[str, Arr | Scalar | None] = {}
    for p in params:
        if p.role in ("in", "inout", "out", "opt"):
            present = {"in": 0.97 if noisy else 1.0, "inout": 0.97 if noisy else 1.0, "out": 0.4, "opt": 0.5}[p.role]
            if data.draw(UNIT, label=f"{p.name} given?") >= present:
                args[p.name] = None
                continue
            shape = _dims(p, env_true)
            assert shape is not None
            if data.draw(UNIT, label=f"{p.name} bad shape?") < (0.25 if p.role == "out" or not noisy else 0.12):
                shape = data.draw(wrong_shapes(shape), label=f"{p.name} shape")
            written = p.role in ("inout", "out")
            a = data.draw(arrays(
                p.dtype, shape=shape, kind=data.draw(st.sampled_from(["torch", "numpy"])) if mixed else kind,
                written=written, wrong_dtype=0.06 if noisy else 0, odd=0.08 if noisy else 0,
                contiguous_bias=0.8 if written or not noisy else 0.5, others=0.02 if noisy else 0, nonneg=p.nonneg,
            ), label=p.name)
            if a.kind == "other" and a.obj is None and p.role in ("out", "opt"):
                a = None  # None is how an out or optional array is left out
            args[p.name] = a
        elif p.role == "scalar":
            if noisy and data.draw(UNIT, label=f"{p.name} odd?") < 0.1:
                args[p.name] = data.draw(scalars(), label=p.name)
            else:
                f = data.draw(st.floats(-1e3, 1e3), label=p.name)
                args[p.name] = Scalar(f, "float", f)
    # Fills and size keywords: passed or not.
    c_range = {"i64": INT64, "i32": INT32}
    fixed_by_arrays = {s for p in params if p.role != "fill" and isinstance(args.get(p.name), Arr)
                       for d in p.dims for s in _parse_dim(d)[1]}
    for p in params:
        if p.role != "fill":
            continue
        needed = p.expr in symbols and p.expr not in fixed_by_arrays and p.expr not in spec.keywords
        if data.draw(UNIT, label=f"pass {p.name}?") < (0.9 if needed else 0.3):
            true = env_true.get(p.expr) if p.expr in env_true else None
            if p.expr and p.expr.startswith("numel("):
                x = args.get(p.expr[6:-1])
                true = x.numel if isinstance(x, Arr) and x.kind != "other" else None
            v = data.draw(size_values(true, c_range[p.dtype]), label=p.name)
            args[p.name] = None if v.value is None else v  # None is "not passed"
        else:
            args[p.name] = None
    kw_values: dict[str, Scalar | None] = {}
    for sym in spec.keywords:
        if data.draw(UNIT, label=f"pass {sym}=?") < 0.9:
            v = data.draw(size_values(env_true[sym], INT64), label=sym)
            kw_values[sym] = None if v.value is None else v
        else:
            kw_values[sym] = None

    faults, env, out_kind = contract_oracle(spec, args, kw_values)
    # The call: positional = not filled, not out, not optional (declaration order).
    pos, kw = [], {}
    for p in params:
        v = args.get(p.name)
        value = v.obj if isinstance(v, Arr) else (v.value if isinstance(v, Scalar) else None)
        if p.role in ("in", "inout", "scalar"):
            pos.append(value)
        elif v is not None:
            kw[p.name] = value
    for sym, v in kw_values.items():
        if v is not None:
            kw[sym] = v.value
    arrs = [a for a in args.values() if isinstance(a, Arr)]
    for a in arrs:
        a.snapshot()
    note(f"{spec.name}: " + "; ".join(f"{k} = {v.desc if isinstance(v, Arr) else v!r}" for k, v in args.items())
         + (f"; keywords {kw_values}" if kw_values else "") + f"\n  oracle: faults={faults} env={env}")

    expected: dict[str, Any] | None = None
    native_error = False
    if not faults:
        A = {p.name: args[p.name].values for p in params if isinstance(args.get(p.name), Arr) and p.role != "out"}
        S = {p.name: expect_float(args[p.name], np.float64)[1] for p in params if p.role == "scalar"}
        try:
            with np.errstate(all="ignore"):
                expected = spec.ref(env, A, S)
        except CFails:
            native_error = True
    fn = getattr(lib, spec.name)
    if native_error:
        try:
            fn(*pos, **kw)
        except NativeError as err:
            # a user library's status means what that library says: a NativeError with its code
            assert spec.name in str(err) and err.code == -1 and type(err) is NativeError
        else:
            raise AssertionError(f"{spec.name}: C returned an error status, but the call did not raise")
        for a in arrs:
            a.expect_unchanged(f"{spec.name} (failed in C, which writes nothing)")
        return
    raised, result = call_expecting(fn, tuple(pos), kw, faults, spec.name)
    if raised:
        for a in arrs:
            a.expect_unchanged(f"{spec.name} refused")
        return
    assert expected is not None
    check_contract_result(spec, args, env, out_kind, expected, result)


def contract_oracle(spec: Spec, args: dict[str, Any], kw_values: dict[str, Scalar | None]):
    """(faults, symbol values, kind of allocated outputs) for one contracted call."""
    faults: list[Fault] = []
    c_range = {"i64": INT64, "i32": INT32}
    params = spec.params
    names_for_shape = [p.name for p in params] + list(spec.keywords)
    symbols = {s for p in params for d in p.dims for s in _parse_dim(d)[1]}

    def shape_fault(*names: str) -> None:
        for n in names or names_for_shape:
            faults.append((ShapeError, n))

    out_kind = None
    for p in params:
        v = args.get(p.name)
        if p.role in ("in", "inout", "out", "opt"):
            if v is None:
                if p.role in ("in", "inout"):
                    faults.append((ArgumentTypeError, p.name))
                continue
            written = p.role in ("inout", "out")
            for cls in array_faults(v, p.dtype, written=written, may_copy=not written):
                faults.append((cls, p.name))
            if out_kind is None and v.kind in ("torch", "numpy", "bytes"):
                out_kind = "numpy" if v.kind != "torch" else "torch"
        elif p.role == "scalar":
            err, _ = expect_float(v, np.float64)
            if err:
                faults.append((err, p.name))

    # Symbols from the arrays, in declaration order.
    env: dict[str, int] = {}
    products: list[tuple[P, tuple[int, ...]]] = []
    for p in params:
        v = args.get(p.name)
        if p.role not in ("in", "inout", "out", "opt") or not isinstance(v, Arr) or v.kind == "other":
            continue
        if len(v.shape) != len(p.dims):
            shape_fault(p.name)
            continue
        for d, size in zip(p.dims, v.shape):
            factor, syms = _parse_dim(d)
            if not syms:
                if size != factor:
                    shape_fault(p.name)
            elif len(syms) == 1:
                s = syms[0]
                if s in env:
                    if env[s] * factor != size:
                        shape_fault(p.name)
                elif size % factor:
                    shape_fault(p.name)
                else:
                    env[s] = size // factor
            else:
                products.append((p, v.shape))
    # A length passed for a parameter filled with a single symbol (n, or count = m)
    # binds that symbol when no array did.
    for p in params:
        v = args.get(p.name)
        if p.role == "fill" and v is not None and p.expr in symbols and p.expr not in env:
            if v.tag != "int":
                faults.append((ArgumentTypeError, p.name))
            elif v.num < 0:
                faults.append((ShapeError, p.name))
            elif not c_range[p.dtype][0] <= v.num <= c_range[p.dtype][1]:
                faults.append((ArgumentOverflowError, p.name))
            else:
                env[p.expr] = v.num
    for sym, v in kw_values.items():
        if v is None:
            continue
        if v.tag != "int" or v.num < 0 or v.num > INT64[1]:
            faults.append((ShapeError, sym))
            faults.append((ArgumentOverflowError, sym))
        elif sym in env and env[sym] != v.num:
            shape_fault(sym)
        else:
            env[sym] = v.num
    for p, shape in products:
        want = _dims(p, env)
        if want is None or want != shape:
            shape_fault(p.name)
    for p in params:
        if p.role == "out" and args.get(p.name) is None and _dims(p, env) is None:
            shape_fault(p.name)
    # Every length passed must be an integer equal to what the shapes give.
    for p in params:
        v = args.get(p.name)
        if p.role != "fill" or v is None:
            continue
        if p.expr.startswith("numel("):
            x = args.get(p.expr[6:-1])
            computed = x.numel if isinstance(x, Arr) and x.kind != "other" else None
        else:
            computed = env.get(p.expr)
        if v.tag != "int":
            faults.append((ArgumentTypeError, p.name))
            continue
        if not c_range[p.dtype][0] <= v.num <= c_range[p.dtype][1]:
            faults.append((ArgumentOverflowError, p.name))
        if computed is None:
            shape_fault(p.name)
        elif v.num != computed:
            faults.append((ShapeError, p.name))
    return faults, env, out_kind or "torch"


def check_contract_result(spec: Spec, args, env, out_kind: str, expected: dict[str, Any], result: Any) -> None:
    params = spec.params
    outs = [p for p in params if p.role == "out"]
    out_values = []
    if spec.returns == "value" and outs:
        assert isinstance(result, tuple) and len(result) == 1 + len(outs), f"{spec.name} returned {result!r}"
        value, out_values = result[0], list(result[1:])
    elif spec.returns == "value":
        value = result
    else:
        value = None
        if len(outs) == 1:
            out_values = [result]
        elif outs:
            out_values = list(result)
        else:
            assert result is None, f"{spec.name} returned {result!r}"
    if "return" in expected:
        exp = expected["return"]
        if isinstance(exp, float):
            assert same_float(value, exp), f"{spec.name} returned {value!r}, expected {exp!r}"
        else:
            assert value == exp, f"{spec.name} returned {value!r}, expected {exp!r}"
    for p, got in zip(outs, out_values):
        given = args.get(p.name)
        want = expected[p.name]
        if isinstance(given, Arr):
            assert got is given.obj, f"{spec.name}: the given out '{p.name}' is not what was returned"
            given.expect_memory(want, given.numel, f"{spec.name} out '{p.name}'")
            check_version(given, given.numel > 0)
        else:
            cls = torch.Tensor if out_kind == "torch" else np.ndarray
            assert isinstance(got, cls), f"{spec.name}: out '{p.name}' is {type(got).__name__}, expected {cls.__name__}"
            assert tuple(got.shape) == _dims(p, env), f"{spec.name}: out '{p.name}' has shape {tuple(got.shape)}"
            assert to_numpy(got).dtype == np.dtype(NP[p.dtype])
            np.testing.assert_array_equal(to_numpy(got), want.reshape(got.shape), err_msg=f"{spec.name} out '{p.name}'")
    for p in params:
        a = args.get(p.name)
        if not isinstance(a, Arr) or p.role == "out":
            continue
        if p.role == "inout":
            a.expect_memory(expected[p.name], a.numel, f"{spec.name} inout '{p.name}'")
            check_version(a, a.numel > 0)
        else:
            a.expect_unchanged(f"{spec.name} input '{p.name}'")


# --------------------------------------------------------------------------- #
# 6. The same properties under AddressSanitizer (slow)                         #
# --------------------------------------------------------------------------- #


def _gcc_file(name: str) -> str | None:
    try:
        path = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return path if os.path.isabs(path) and os.path.exists(path) else None


_CANARY = """
import sys
sys.path.insert(0, {tests!r})
import numpy as np, torch, tensorffi
from test_fuzz_bridge import CONTRACTS, fuzzlib_cdef
lib = tensorffi.load({so!r}, fuzzlib_cdef(), CONTRACTS)
x = torch.zeros(5, dtype=torch.float64) if {torch_kind} else np.zeros(5)
lib.fz_hash_f64(x, 5)
print("in bounds: ok", flush=True)
lib.fz_hash_f64(x, 6)  # one element past the end: ASan must stop here
print("not detected", flush=True)
"""


@pytest.mark.slow
def test_fuzz_under_address_sanitizer(tmp_path):
    """This file's quick properties again, in a subprocess, with fuzzlib built with
    -fsanitize=address and libasan preloaded: bridge-allocated outputs and the
    bridge's contiguous copies have no sentinel padding of ours, so ASan is what
    would see C step past them. A canary (a deliberate one-past-the-end read of a
    torch and a NumPy buffer) first proves that ASan sees such reads here."""
    libasan, libstdcxx = _gcc_file("libasan.so"), _gcc_file("libstdc++.so")
    if libasan is None or libstdcxx is None:
        pytest.skip("gcc's libasan is not available")
    tests = os.path.dirname(os.path.abspath(__file__))
    so = tmp_path / "libfuzz_asan.so"
    build_fuzzlib_so(so, asan=True)
    env = dict(
        os.environ,
        TENSORFFI_FUZZ_ASAN="1",
        TENSORFFI_FUZZ_QUICK=os.environ.get("TENSORFFI_FUZZ_ASAN_EXAMPLES", "150"),
        # libstdc++ too: torch throws C++ exceptions, and ASan's __cxa_throw
        # interceptor needs the real one loaded at start-up.
        LD_PRELOAD=f"{libasan} {libstdcxx}",
        ASAN_OPTIONS=f"detect_leaks=0:exitcode=86:log_path={tmp_path / 'asan'}",
        TENSORFFI_CACHE_DIR=str(tmp_path / "cache"),
    )

    def asan_logs() -> str:
        return "".join(p.read_text() for p in sorted(tmp_path.glob("asan.*")))

    for torch_kind in (True, False):
        canary = subprocess.run([sys.executable, "-c", _CANARY.format(tests=tests, so=str(so), torch_kind=torch_kind)],
                                env=env, capture_output=True, text=True, timeout=600)
        logs = asan_logs()
        if canary.returncode != 86 or "heap-buffer-overflow" not in logs or "in bounds: ok" not in canary.stdout:
            pytest.skip(f"AddressSanitizer does not work here (canary rc={canary.returncode}): "
                        f"{(canary.stdout + canary.stderr + logs)[-2000:]}")
        for p in tmp_path.glob("asan.*"):
            p.unlink()

    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow",
         "-k", "not userlib and not address", os.path.abspath(__file__)],
        cwd=os.path.dirname(tests), env=env, capture_output=True, text=True, timeout=1800,
    )
    logs = asan_logs()
    out = proc.stdout[-6000:] + proc.stderr[-3000:] + logs[-8000:]
    assert not logs, out
    assert proc.returncode == 0, out
