# SPDX-License-Identifier: MIT
"""Per-tensor checks that torch itself does not make (issue 36, items 5 and 6).

* **Autograd honesty**: a tensor that requires grad, passed where C only reads, would
  be used as if detached (the result has no history, ``w.grad`` stays None): with grad
  mode on it is a :class:`tensorffi.GradError` naming the fix (``x.detach()``, or an
  operator with a backward, ``tensorffi.ops.register``). Under ``torch.no_grad()`` and
  ``torch.inference_mode()`` it is an ordinary read; an operator's autograd handles
  grad itself.
* **Immutable memory stays immutable**: torch tensors carry no writability flag, so a
  tensor viewing ``bytes``, a read-only mmap or a read-only NumPy array (torch only
  warns) would let C write memory Python promises never changes (or SIGSEGV, for a
  read-only mapping). Where C writes, such a tensor is a :class:`WritabilityError`;
  where C only reads, it is an ordinary input.

Every case runs on the native path (``compile()``'s trampoline and ``load()``), on the
Python path generated from the same plan (``python_call``), and on the whole Python
path (``TENSORFFI_BRIDGE=python``, in a subprocess).
"""
from __future__ import annotations

import mmap
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import tensorffi
from tensorffi import GradError, WritabilityError

ROOT = Path(__file__).resolve().parent.parent

SOURCE = r"""
#include <stdint.h>
double total(const float *x, int64_t n) { double s = 0; for (int64_t i = 0; i < n; i++) s += x[i]; return s; }
void scale(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = 2.0f * x[i]; }
void fill(float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = (float)i + 0.5f; }
void cube(const double *x, double *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i] * x[i]; }
void cube_backward(const double *grad_y, const double *x, double *grad_x, int64_t n) {
    for (int64_t i = 0; i < n; i++) grad_x[i] = 3.0 * x[i] * x[i] * grad_y[i];
}
"""
CDEF = """double total(const float *x, int64_t n);
void scale(const float *x, float *y, int64_t n);
void fill(float *y, int64_t n);
void cube(const double *x, double *y, int64_t n);
void cube_backward(const double *grad_y, const double *x, double *grad_x, int64_t n);"""
CONTRACTS = {"total": "x: [n]", "scale": "x: [n]; y: [n]", "fill": "y: [n]", "cube": "x: [n]; y: out [n]",
             "cube_backward": "grad_y: [n]; x: [n]; grad_x: out [n]"}
PYTHON_PATH = os.environ.get("TENSORFFI_BRIDGE") == "python"


@pytest.fixture(scope="module")
def compiled(cache):
    return tensorffi.compile("tensor_checks", CDEF, source=SOURCE, contracts=CONTRACTS, cache=cache)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    work = tmp_path_factory.mktemp("tensor_checks")
    (work / "tc.c").write_text(SOURCE)
    so = work / "libtc.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(work / "tc.c"), "-o", str(so)], check=True)
    return tensorffi.load(so, CDEF, contracts=CONTRACTS)


@pytest.fixture(params=["compile", "load", "python_call"])
def call(request, compiled, loaded):
    """``call(name)``: the bound function on one path (native via compile() or load(),
    or the generated Python path of the compile() function)."""
    lib = loaded if request.param == "load" else compiled
    if request.param == "python_call":
        return lambda name: getattr(lib, name).__wrapped_bridge__.python_call
    return lambda name: getattr(lib, name)


def _frombuffer(buf, dtype=torch.float32):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: "The given buffer is not writable"
        return torch.frombuffer(buf, dtype=dtype)


def _from_numpy(a):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: "The given NumPy array is not writable"
        return torch.from_numpy(a)


# --------------------------------------------------------------------------- #
# Autograd honesty                                                             #
# --------------------------------------------------------------------------- #


class TestGrad:
    def test_read_only_input_that_requires_grad_is_refused(self, call, rng):
        w = torch.from_numpy(rng.standard_normal(7).astype(np.float32)).requires_grad_()
        with pytest.raises(GradError, match=r"total\(\).*'x'.*requires grad.*x\.detach\(\).*tensorffi\.ops\.register"):
            call("total")(w)
        y = torch.zeros(7)
        with pytest.raises(GradError, match=r"scale\(\).*'x'"):
            call("scale")(w, y)
        assert y.tolist() == [0.0] * 7  # nothing ran
        # a non-leaf view of it requires grad too, and so does a Parameter
        with pytest.raises(GradError, match="'x'"):
            call("total")(w[2:] * 1)
        with pytest.raises(GradError, match="'x'"):
            call("total")(torch.nn.Parameter(torch.ones(3)))

    def test_error_is_typed(self):
        assert issubclass(GradError, tensorffi.TensorFFIError) and issubclass(GradError, RuntimeError)
        assert tensorffi.errors.GradError is GradError

    def test_detached_or_without_grad_mode_reads_as_before(self, call, rng):
        x = rng.standard_normal(9).astype(np.float32)
        w = torch.from_numpy(x.copy()).requires_grad_()
        ref = float(np.sum(x.astype(np.float64)))
        assert call("total")(w.detach()) == pytest.approx(ref, rel=1e-12)
        with torch.no_grad():
            assert call("total")(w) == pytest.approx(ref, rel=1e-12)
            y = torch.zeros(9)
            call("scale")(w, y)
            np.testing.assert_array_equal(y.numpy(), 2 * x)
        with torch.inference_mode():
            assert call("total")(w) == pytest.approx(ref, rel=1e-12)
        with torch.enable_grad():  # back on: refused again
            with pytest.raises(GradError):
                call("total")(w)
        assert w.grad is None

    def test_written_tensor_that_requires_grad_stays_refused(self, call):
        w = torch.ones(4, requires_grad=True)
        with pytest.raises(WritabilityError, match="requires grad"):
            call("fill")(w)
        with torch.no_grad(), pytest.raises(WritabilityError, match="requires grad"):
            call("fill")(w)
        assert w.detach().tolist() == [1.0] * 4

    def test_operator_with_backward_takes_tensors_that_require_grad(self, compiled, rng):
        name = "tensor_checks_test::cube"
        op = tensorffi.ops.operators().get(name) or tensorffi.ops.register(
            compiled.cube, name, backward=compiled.cube_backward)
        x = rng.standard_normal(11)
        g = rng.standard_normal(11)
        xt = torch.from_numpy(x.copy()).requires_grad_()
        y = op(xt)
        assert y.requires_grad
        (y * torch.from_numpy(g)).sum().backward()
        ref = torch.from_numpy(x.copy()).requires_grad_()
        (ref ** 3 * torch.from_numpy(g)).sum().backward()
        torch.testing.assert_close(y.detach(), ref.detach() ** 3, rtol=1e-14, atol=0)
        torch.testing.assert_close(xt.grad, ref.grad, rtol=1e-14, atol=0)
        with torch.no_grad():
            assert not op(xt).requires_grad

    def test_tensorffi_kernels_still_train(self, rng):
        import scipy.signal as ss

        sos = ss.butter(4, 0.2, output="sos")
        x = rng.standard_normal((2, 64))
        g = rng.standard_normal((2, 64))
        xt = torch.from_numpy(x.copy()).requires_grad_()
        tensorffi.signal.sosfilt(sos, xt).backward(torch.from_numpy(g))
        ref = ss.sosfilt(sos, g[..., ::-1], axis=-1)[..., ::-1]
        np.testing.assert_allclose(xt.grad.numpy(), ref, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- #
# Immutable memory                                                             #
# --------------------------------------------------------------------------- #


def _bytes(rng, n=8):
    return rng.standard_normal(n).astype(np.float32).tobytes()


def _read_only_tensors(rng):
    """(label, tensor, the bytes it shows, what keeps its memory) for every read-only source."""
    out = []
    b = _bytes(rng)
    out.append(("bytes", _frombuffer(b), b, b))
    mv = memoryview(_bytes(rng))
    out.append(("memoryview(bytes)", _frombuffer(mv), mv.tobytes(), mv))
    mv2 = memoryview(_bytes(rng, 10))[8:]
    out.append(("memoryview(bytes)[8:]", _frombuffer(mv2), mv2.tobytes(), mv2))
    a = np.frombuffer(_bytes(rng), np.float32)
    out.append(("from_numpy(frombuffer(bytes))", _from_numpy(a), a.tobytes(), a))
    c = rng.standard_normal(8).astype(np.float32)
    c.flags.writeable = False
    out.append(("from_numpy(read-only array)", _from_numpy(c), c.tobytes(), c))
    return out


class TestImmutable:
    @pytest.mark.parametrize("view", ["whole", "slice", "numpy view"])
    def test_written_read_only_memory_is_refused(self, call, rng, view):
        for label, t, before, _keep in _read_only_tensors(rng):
            v = t if view == "whole" else t[2:6]
            if view == "numpy view":
                v = np.asarray(t)[1:5]
            with pytest.raises(WritabilityError, match=r"fill\(\).*'y'.*read-only.*clone\(\)"):
                call("fill")(v)
            x = torch.ones(v.shape[0]) if isinstance(v, torch.Tensor) else np.ones(v.shape[0], np.float32)
            with pytest.raises(WritabilityError, match=r"scale\(\).*'y'"):
                call("scale")(x, v)
            got = t.numpy().tobytes()
            assert got == before, label

    def test_original_bytes_object_is_unchanged(self, call, rng):
        b = _bytes(rng)
        copy = bytes(bytearray(b))
        t = _frombuffer(b)
        with pytest.raises(WritabilityError):
            call("fill")(t)
        assert b == copy

    def test_reading_read_only_memory_is_allowed(self, call, rng):
        for label, t, before, _keep in _read_only_tensors(rng):
            ref = float(np.frombuffer(before, np.float32).astype(np.float64).sum())
            assert call("total")(t) == pytest.approx(ref, rel=1e-12), label
            y = torch.empty(t.shape[0])
            call("scale")(t, y)
            np.testing.assert_array_equal(y.numpy(), 2 * np.frombuffer(before, np.float32))

    def test_writable_buffers_and_copies_stay_writable(self, call, rng):
        ba = bytearray(_bytes(rng))
        t = torch.frombuffer(ba, dtype=torch.float32)
        call("fill")(t)
        np.testing.assert_array_equal(np.frombuffer(ba, np.float32), np.arange(8, dtype=np.float32) + 0.5)
        for _label, ro, before, _keep in _read_only_tensors(rng):
            c = ro.clone()
            call("fill")(c)
            assert c.tolist() == [i + 0.5 for i in range(8)] and ro.numpy().tobytes() == before
        a = rng.standard_normal(8).astype(np.float32)
        call("fill")(torch.from_numpy(a))  # a writable array: its tensor is written
        np.testing.assert_array_equal(a, np.arange(8, dtype=np.float32) + 0.5)

    def test_read_only_mmap_is_read(self, call, tmp_path, rng):
        data = rng.standard_normal(16).astype(np.float32)
        path = tmp_path / "ro.bin"
        data.tofile(path)
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            t = _frombuffer(mm)
            assert call("total")(t[4:]) == pytest.approx(float(data[4:].astype(np.float64).sum()), rel=1e-12)
            y = torch.empty(16)
            call("scale")(t, y)
            np.testing.assert_array_equal(y.numpy(), 2 * data)
            del t

    def test_read_only_mmap_is_never_written(self, compiled, cache, tmp_path, rng):
        data = rng.standard_normal(16).astype(np.float32)
        path = tmp_path / "ro.bin"
        data.tofile(path)
        # in a child (compile() and its Python path): before this check existed, a SIGSEGV
        script = textwrap.dedent(f"""
            import mmap, sys, warnings, torch, tensorffi
            warnings.simplefilter("ignore", UserWarning)
            lib = tensorffi.compile("tensor_checks", {CDEF!r}, source={SOURCE!r}, contracts={CONTRACTS!r},
                                    cache={str(cache)!r})
            f = open({str(path)!r}, "rb")
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            t = torch.frombuffer(mm, dtype=torch.float32)
            for fn in (lib.fill, lib.fill.__wrapped_bridge__.python_call):
                for v in (t, t[3:9], t.view(4, 4)[1]):
                    try:
                        fn(v)
                    except tensorffi.WritabilityError as e:
                        assert "'y'" in str(e) and "read-only" in str(e), e
                    else:
                        sys.exit("written")
            print("refused")
        """)
        out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and out.stdout.strip() == "refused", (out.returncode, out.stdout, out.stderr[-2000:])
        assert np.array_equal(np.fromfile(path, np.float32), data)

    def test_memory_freed_and_reused_is_writable_again(self, call, rng):
        """The bridge's note of read-only memory lives as long as the tensor's storage."""
        from tensorffi._bridge import readonly

        n = len(readonly.ranges())
        t = _frombuffer(_bytes(rng))
        v = t[1:]
        assert len(readonly.ranges()) == n + 1
        del t
        assert len(readonly.ranges()) == n + 1  # the view still holds the storage
        del v
        assert len(readonly.ranges()) == n


@pytest.mark.skipif(PYTHON_PATH, reason="already the Python path")
def test_whole_python_path_makes_the_same_checks():
    """With the native path off (TENSORFFI_BRIDGE=python), the Python mirror of the
    native reader (read_as_is) and prepare_array make the same checks."""
    env = dict(os.environ, TENSORFFI_BRIDGE="python")
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", __file__],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
