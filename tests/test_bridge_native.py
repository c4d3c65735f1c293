# SPDX-License-Identifier: MIT
"""The bridge's native call path (csrc/bridge_call.c) against its Python path.

The native path decides only that a call is right; anything it does not accept as it
is goes, untouched, to the Python path generated from the same plan, which explains
or copies. So the tests here check three things on fresh random inputs:

* the calls users make most (contiguous tensors and arrays of the exact dtype, Python
  numbers) run natively: no hand-over to the Python path;
* every hostile argument (a storage shrunk under a view, a lazy negative view, an
  inference tensor, a tensor that requires grad, a read-only or misaligned array,
  arguments that share memory, values beyond a C type...) is handed over, and the
  result is exactly the Python path's: the same exception and message, nothing written;
* results, version counters and outputs' kinds agree with the Python path and with a
  NumPy reference.

The bridge's whole test suite also runs with the native path off
(``TENSORFFI_BRIDGE=python``: test_bridge_python_path_passes_the_bridge_tests).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tensorffi
from tensorffi import LayoutError, TensorFFIError
from tensorffi._bridge import lower

ROOT = Path(__file__).resolve().parent.parent

SOURCE = r"""
#include <stdint.h>
#include <stddef.h>
void inc(float *x, int64_t n) { for (int64_t i = 0; i < n; i++) x[i] += 1.0f; }
double total(const double *x, int64_t n) { double s = 0; for (int64_t i = 0; i < n; i++) s += x[i]; return s; }
void twice(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = 2.0f * x[i]; }
int scaled(const double *x, double *y, int64_t rows, int64_t cols, double a, int32_t k) {
    if (k < 0) return -1;
    for (int64_t i = 0; i < rows * cols; i++) y[i] = a * x[i] + k;
    return 0;
}
void pairs(const int16_t *x, int64_t *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = x[2*i] + x[2*i + 1]; }
uint64_t bytesum(const void *p, size_t n) { uint64_t s = 0; for (size_t i = 0; i < n; i++) s += ((const unsigned char *)p)[i]; return s; }
float half(float v) { return v / 2; }
_Bool odd(uint64_t v) { return v & 1; }
"""
CONTRACTS = {
    "inc": "x: [n]",
    "total": "x: [n]",
    "twice": "x: [n]; y: out [n]",
    "scaled": "x: [rows, cols]; y: out [rows, cols]; return: status",
    "pairs": "x: [2*n]; y: out [n]",
}


@pytest.fixture(scope="module")
def lib(cache):
    return tensorffi.compile("native_path", source=SOURCE, contracts=CONTRACTS, cache=cache)


def counting(fn):
    """The function's native call, made again with a fallback that counts hand-overs."""
    bound = fn.__wrapped_bridge__
    handed: list[int] = []

    def fallback(*args, **kwargs):
        handed.append(1)
        return bound.python_call(*args, **kwargs)

    native, why = lower.lower(bound, fallback)
    assert native is not None, why
    return native, handed


def outcome(fn, *args, **kwargs):
    """(result or exception class, message) of a call."""
    try:
        return "ok", fn(*args, **kwargs)
    except TensorFFIError as exc:
        return type(exc), str(exc)
    except TypeError as exc:  # Python's own: a missing or unknown argument
        return type(exc), str(exc)


def same(a, b) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return a == b and type(a) is type(b)


def test_the_native_path_is_on_and_named():
    if os.environ.get("TENSORFFI_BRIDGE") == "python":
        pytest.skip("the native path is off in this run")
    assert tensorffi.info()["bridge"].startswith("native")
    assert tensorffi.core.scale_.__native__


@pytest.mark.skipif(os.environ.get("TENSORFFI_BRIDGE") == "python", reason="the native path is off")
class TestNative:
    def test_usual_calls_run_natively_and_match_the_python_path(self, lib, rng):
        n = int(rng.integers(1, 200))
        x64 = rng.standard_normal((3, n))
        for kind in ("torch", "numpy"):
            mk = torch.from_numpy if kind == "torch" else np.asarray
            calls = [
                (lib.inc, lambda: (mk(rng.standard_normal(n).astype(np.float32)),), {}),
                (lib.total, lambda: (mk(x64[0].copy()),), {}),
                (lib.twice, lambda: (mk(rng.standard_normal(n).astype(np.float32)),), {}),
                (lib.scaled, lambda: (mk(x64.copy()), 0.5, 3), {}),
                (lib.scaled, lambda: (mk(x64.copy()), 1.5, 2), {"rows": 3}),
                (lib.pairs, lambda: (mk(rng.integers(-99, 99, 2 * n).astype(np.int16)),), {}),
            ]
            for fn, make, kw in calls:
                native, handed = counting(fn)
                args = make()
                keep = [a.clone() if isinstance(a, torch.Tensor) else np.copy(a) if isinstance(a, np.ndarray) else a
                        for a in args]
                got = native(*args, **kw)
                assert handed == [], f"{fn.__name__} ({kind}) was handed to the Python path"
                want = fn.__wrapped_bridge__.python_call(*keep, **kw)
                assert same(got, want)
                assert all(same(a, k) for a, k in zip(args, keep))  # written alike
        # Python numbers of every usual kind, void * of any dtype, bool results
        h = counting(lib.half)[0]
        assert h(3) == 1.5 and h(2.0**100) == 2.0**99 and h(float("inf")) == float("inf")
        b = np.arange(10, dtype=np.int32)
        assert counting(lib.bytesum)[0](b, b.nbytes) == int(b.view(np.uint8).sum())
        assert counting(lib.odd)[0](2**64 - 1) is True and lib.odd(True) is True

    def test_outputs_in_the_callers_kind(self, lib, rng):
        x = rng.standard_normal(7).astype(np.float32)
        y = lib.twice(torch.from_numpy(x))
        assert isinstance(y, torch.Tensor) and y.dtype == torch.float32 and y.is_contiguous()
        np.testing.assert_array_equal(y.numpy(), 2 * x)
        yn = lib.twice(x)
        assert type(yn) is np.ndarray and yn.flags.c_contiguous and yn.flags.writeable
        np.testing.assert_array_equal(yn, 2 * x)
        z = lib.twice(torch.zeros(0))
        assert z.shape == (0,)
        y.add_(1)  # an ordinary tensor: writable, in autograd's view too
        y.requires_grad_()
        (y * 2).sum().backward()

    def test_version_counter_bumped_for_written_tensors_only(self, lib):
        x = torch.ones(5)
        v = x._version
        lib.inc(x)
        assert x._version == v + 1 and x.tolist() == [2.0] * 5
        a = torch.ones(4, dtype=torch.float64)
        v = a._version
        lib.total(a)
        assert a._version == v
        # autograd sees C's write to a tensor saved for backward
        w = torch.ones(5, requires_grad=True)
        saved = torch.ones(5)
        loss = (w * saved).sum()
        lib.inc(saved)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()

    @pytest.mark.parametrize("case", [
        "shrunk-storage", "freed-storage", "neg-view", "conj-view", "inference", "requires-grad", "expanded",
        "strided-written", "numpy-read-only", "numpy-unaligned", "numpy-byteswapped", "numpy-of-tensor",
        "overlap", "same-twice", "wrong-dtype", "wrong-rank", "wrong-size", "int-overflow", "float-kind",
        "np-int-scalar", "bool-size", "subclass", "unknown-keyword", "missing", "too-many", "meta", "sparse",
    ])
    def test_hostile_arguments_are_handed_over_and_refused_alike(self, lib, case, rng):
        data = rng.standard_normal(16).astype(np.float32)
        t = torch.from_numpy(data.copy())
        fn, args, kw = lib.inc, None, {}
        if case == "shrunk-storage":
            big = torch.ones(64)
            view = big[8:]
            big.untyped_storage().resize_(40)
            args = (view,)
        elif case == "freed-storage":
            gone = torch.ones(8)
            gone.untyped_storage().resize_(0)
            args = (gone,)
        elif case == "neg-view":
            args = (torch._neg_view(t),)
            fn = lib.inc
        elif case == "conj-view":
            fn, args = lib.bytesum, (torch.ones(4, dtype=torch.complex64).conj(), 32)
        elif case == "inference":
            with torch.inference_mode():
                inf = torch.ones(4)
            args = (inf,)
        elif case == "requires-grad":
            args = (torch.ones(4, requires_grad=True),)
        elif case == "expanded":
            args = (torch.ones(1).expand(4),)
        elif case == "strided-written":
            args = (t[::2],)
        elif case == "numpy-read-only":
            ro = data.copy()
            ro.flags.writeable = False
            args = (ro,)
        elif case == "numpy-unaligned":
            raw = np.zeros(4 * 16 + 1, np.uint8)
            args = (raw[1:].view(np.float32),)
        elif case == "numpy-byteswapped":
            fn, args = lib.total, (np.ones(4, dtype=">f8"),)
        elif case == "numpy-of-tensor":  # its storage is checked by the Python path
            args = (torch.ones(32).numpy()[4:],)
        elif case == "overlap":
            buf = torch.ones(8, dtype=torch.float32)
            fn, args, kw = lib.twice, (buf[:4],), {"y": buf[2:6]}
        elif case == "same-twice":
            buf = torch.ones(4)
            fn, args, kw = lib.twice, (buf,), {"y": buf}
        elif case == "wrong-dtype":
            args = (torch.ones(4, dtype=torch.float64),)
        elif case == "wrong-rank":
            fn, args = lib.scaled, (torch.ones(4, dtype=torch.float64), 1.0, 1)
        elif case == "wrong-size":
            fn, args = lib.pairs, (torch.ones(5, dtype=torch.int16),)
        elif case == "int-overflow":
            fn, args = lib.scaled, (torch.ones(2, 2, dtype=torch.float64), 1.0, 2**31)
        elif case == "float-kind":
            fn, args = lib.scaled, (torch.ones(2, 2, dtype=torch.float64), 1.0, 2.0)
        elif case == "np-int-scalar":
            fn, args = lib.scaled, (torch.ones(2, 2, dtype=torch.float64), 1.0, np.int64(2))
        elif case == "bool-size":
            fn, args, kw = lib.scaled, (torch.ones(2, 2, dtype=torch.float64), 1.0, 2), {"rows": True}
        elif case == "subclass":
            args = (torch.ones(3).as_subclass(type("Sub", (torch.Tensor,), {})),)
        elif case == "unknown-keyword":
            args, kw = (t,), {"m": 3}
        elif case == "missing":
            args = ()
        elif case == "too-many":
            args = (t, 16, 3)
        elif case == "meta":
            args = (torch.ones(4, device="meta"),)
        elif case == "sparse":
            args = (torch.ones(4).to_sparse(),)
        native, handed = counting(fn)
        before = [a.clone() if isinstance(a, torch.Tensor) and a.layout == torch.strided and a.device.type == "cpu"
                  and a.untyped_storage().nbytes() >= a.numel() * a.element_size() else None for a in args]
        got = outcome(native, *args, **kw)
        assert handed == [1], f"{case}: the native path accepted it"
        want = outcome(fn.__wrapped_bridge__.python_call, *args, **kw)
        assert got[0] == want[0] and (got[0] == "ok" or got[1] == want[1]), (got, want)
        if got[0] != "ok":
            for a, b in zip(args, before):
                if b is not None:
                    assert torch.equal(a, b)  # nothing written

    def test_strided_copy_is_what_a_declared_input_allows(self, lib, rng):
        x = torch.from_numpy(rng.standard_normal((4, 6)))
        native, handed = counting(lib.total)
        assert native(x[:, 0]) == pytest.approx(float(x[:, 0].sum()))
        assert handed == [1]  # copied by the Python path, not read through strides

    def test_status_failure_raises_the_library_error(self, lib):
        native, handed = counting(lib.scaled)
        with pytest.raises(TensorFFIError, match="scaled"):
            native(torch.ones(2, 2, dtype=torch.float64), 1.0, -1)
        assert handed == []  # refused by C, not by a check

    def test_a_storage_resized_by_another_thread_during_the_call_is_held(self, lib):
        # The storage is held for the call: set_() elsewhere cannot free what C reads.
        import threading

        x = torch.ones(1 << 20, dtype=torch.float64)
        stop = threading.Event()

        def meddle():
            while not stop.is_set():
                x.set_(torch.ones(1 << 20, dtype=torch.float64))

        th = threading.Thread(target=meddle)
        th.start()
        try:
            for _ in range(50):
                assert lib.total(x) == float(1 << 20)
        finally:
            stop.set()
            th.join()

    def test_storage_check_refuses_a_view_past_its_storage(self, lib):
        big = torch.ones(64)
        view = big[32:]
        big.untyped_storage().resize_(32 * 4 + 8)
        with pytest.raises(LayoutError, match="storage holds 136 bytes"):
            lib.inc(view)

    def test_operator_bodies_run_natively_and_match_the_python_body(self, lib, rng):
        from tensorffi.bridge import tensor_kernel

        x = torch.from_numpy(rng.standard_normal((3, 5)))
        k = tensor_kernel(lib.scaled.__wrapped_bridge__, {"k": lambda: 3})  # a hidden parameter
        assert k.__native__
        y = k(x, 0.5)
        assert torch.equal(y, k.__python_path__(x, 0.5)) and torch.equal(y, 0.5 * x + 3)
        t = tensor_kernel(lib.total.__wrapped_bridge__)  # a value result: a 0-d tensor of its type
        r = t(x[0].contiguous())
        assert r.dim() == 0 and r.dtype == torch.float64 and float(r) == pytest.approx(float(x[0].sum()))
        assert torch.equal(r, t.__python_path__(x[0].contiguous()))
        h = tensor_kernel(lib.half.__wrapped_bridge__)
        assert h(3.0).dtype == torch.float32 and float(h(3.0)) == 1.5
        # an operator may write a tensor that requires grad (it decided: no_grad); the guard refuses otherwise
        guarded = []
        inc = tensor_kernel(lib.inc.__wrapped_bridge__, grad_guard=lambda *ts: guarded.append(ts))
        p = torch.ones(3, requires_grad=True)
        with torch.no_grad():
            inc(p)
        assert p.tolist() == [2.0] * 3 and guarded == []
        inc(p)  # grad mode: the guard is asked (here it lets the write through)
        assert len(guarded) == 1 and guarded[0][0] is p

    def test_numpy_layout_probe_and_exchange_version_are_checked(self):
        # configure() is idempotent, and says what it checked
        lower.configure()
        assert lower.STATE.torch_ok and lower.STATE.numpy_ok
        assert set(lower.STATE.dtype_codes) >= {"float32", "float64", "int64", "bool", "any"}
        # the Python path names the codes as C's table does
        assert tuple(tensorffi._native.bridge_dtypes()) == lower._NAMES

    def test_python_mirror_of_the_rule_agrees_with_c(self, rng):
        """read_as_is (the Python path's reader where C cannot read tensors) accepts
        exactly what bridge_read accepts, with the same address, size and kind."""
        from tensorffi._bridge.arrays import read_as_is

        x = torch.from_numpy(rng.standard_normal(12).astype(np.float32))
        with torch.inference_mode():
            inf = torch.ones(3)
        shrunk = torch.ones(16)[4:]
        shrunk.untyped_storage().resize_(20)
        cases = [x, x.view(3, 4), x[::2], torch._neg_view(x), x.requires_grad_(False), torch.ones(2, dtype=torch.complex64).conj(),
                 inf, torch.ones(3, requires_grad=True), shrunk, torch.ones(0), x.numpy(), np.ones(4, np.float32),
                 np.ones(4, np.float32)[::2], np.frombuffer(b"abcd", np.uint8), np.ones(3, ">f4"), b"xy", None, 3]
        read = tensorffi._native.bridge_read
        for v in cases:
            for dtype in ("float32", "any", "uint8"):
                for written in (False, True):
                    c = read(v, lower._NAMES.index(dtype), written, False)
                    py = read_as_is(v, dtype, written, False)
                    if isinstance(v, (bytes, np.ndarray)) and c is not None and py is None:
                        continue  # C also takes bytes and NumPy views of bytes; Python hands them to prepare_array
                    assert (c is None) == (py is None), (v, dtype, written, c, py)
                    if c is not None:
                        assert c[0] == py[0] and c[1] == py[1] and tuple(c[2]) == tuple(py[2]) and c[4] == py[4]


def test_bridge_python_path_passes_the_bridge_tests():
    """The Python path is the native path's specification and its fallback where the
    DLPack exchange API is missing: the bridge's tests pass with the native path off."""
    if os.environ.get("TENSORFFI_BRIDGE") == "python":
        pytest.skip("already the Python path")
    env = dict(os.environ, TENSORFFI_BRIDGE="python")
    files = ["tests/test_bridge.py", "tests/test_plan.py", "tests/test_regressions_plan.py", "tests/test_errors.py",
             "tests/test_bridge_native.py", "tests/test_display.py"]
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *files],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    info = subprocess.run([sys.executable, "-c", "import tensorffi; print(tensorffi.info()['bridge'])"],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert info.stdout.startswith("Python (TENSORFFI_BRIDGE=python)")
