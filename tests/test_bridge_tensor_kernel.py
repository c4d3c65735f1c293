# SPDX-License-Identifier: MIT
"""The bridge's tensor kernels (bridge.tensor_signature / tensor_kernel): a bound
function called on CPU tensors in operator order, the body of tensorffi.ops."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tensorffi
from tensorffi._lib import native
from tensorffi.bridge import tensor_kernel, tensor_signature


def _bound(name, contract=None):
    return native(name, contract).__wrapped_bridge__


def test_signature_of_core_functions():
    args, outs = tensor_signature(_bound("tf_core_axpy_f64", "x: [n]; y: [n]"))
    assert [(a.name, a.kind, a.dtype, a.mutated) for a in args] == [
        ("x", "tensor", "float64", False), ("y", "tensor", "float64", True), ("a", "float", None, False)]
    assert outs == []
    args, outs = tensor_signature(_bound("tf_core_iota_i64", "x: out [n]"))
    assert [(a.name, a.kind) for a in args] == [("n", "size")]
    assert [(o.name, o.dtype, len(o.shape)) for o in outs] == [("x", "int64", 1)]
    args, outs = tensor_signature(_bound("tf_core_scaled_f32", "x: [n]; y: out [n]"), ["nthreads"])
    assert [a.name for a in args] == ["x", "a"] and [o.name for o in outs] == ["y"]
    args, outs = tensor_signature(_bound("tf_cpu_count", "return: value"))
    assert args == [] and [(o.name, o.dtype, o.shape) for o in outs] == [("return", "int32", ())]


def test_signature_refuses_what_an_operator_cannot_take():
    with pytest.raises(tensorffi.ContractError, match="cannot be an operator argument"):
        tensor_signature(_bound("tf_core_span_sum", "out: out [1]"))
    with pytest.raises(tensorffi.ContractError, match="hidden names no parameter"):
        tensor_signature(_bound("tf_core_scale_f32", "x: [n]"), ["threads"])
    with pytest.raises(tensorffi.ContractError, match="filled in"):
        tensor_signature(_bound("tf_core_scale_f32", "x: [n]"), ["n"])


def test_kernel_fast_path_matches_numpy_and_bumps_version(rng):
    k = tensor_kernel(_bound("tf_core_axpy_f64", "x: [n]; y: [n]"))
    x, y0 = rng.standard_normal(33), rng.standard_normal(33)
    y = torch.from_numpy(y0.copy())
    version = y._version
    assert k(torch.from_numpy(x), y, 0.25) is None
    np.testing.assert_allclose(y.numpy(), y0 + 0.25 * x, rtol=1e-12)
    assert y._version > version


def test_kernel_allocates_outputs_and_takes_hidden_values(rng):
    seen = []

    def threads():
        seen.append(1)
        return 3

    k = tensor_kernel(_bound("tf_core_scaled_f32", "x: [n]; y: out [n]"), {"nthreads": threads})
    x = rng.standard_normal(70000).astype(np.float32)
    out = k(torch.from_numpy(x), -2.0)
    assert out.dtype == torch.float32 and out.shape == (70000,)
    np.testing.assert_allclose(out.numpy(), -2.0 * x.astype(np.float64), rtol=1e-6)
    assert seen == [1]
    assert tensor_kernel(_bound("tf_core_iota_i64", "x: out [n]"))(5).tolist() == [0, 1, 2, 3, 4]
    count = tensor_kernel(_bound("tf_cpu_count", "return: value"))()
    assert count.dim() == 0 and count.dtype == torch.int32 and int(count) >= 1


def test_kernel_general_path_copies_inputs_and_raises_bridge_errors(rng):
    k = tensor_kernel(_bound("tf_core_axpy_f64", "x: [n]; y: [n]"))
    x = torch.from_numpy(rng.standard_normal(20))[::2]  # read only: copied
    y = torch.zeros(10, dtype=torch.float64)
    k(x, y, 1.0)
    np.testing.assert_allclose(y.numpy(), x.numpy())
    with pytest.raises(tensorffi.LayoutError, match="'y'"):
        k(x, torch.zeros(20, dtype=torch.float64)[::2], 1.0)  # written: never a hidden copy
    with pytest.raises(tensorffi.DTypeError, match="'x'"):
        k(x.float(), y, 1.0)
    with pytest.raises(tensorffi.ShapeError, match="'y'"):
        k(x, torch.zeros(11, dtype=torch.float64), 1.0)
    with pytest.raises(tensorffi.ShapeError, match="dimension"):
        k(x.reshape(2, 5), y, 1.0)
    raw = tensor_kernel(_bound("tf_core_rowsum_f64"))
    with pytest.raises(tensorffi.ArgumentOverflowError, match="'rows'"):
        raw(torch.zeros(4, dtype=torch.float64), 2**70, 2, 2, torch.zeros(2, dtype=torch.float64))
    with pytest.raises(tensorffi.errors.InvalidArgumentError, match="nthreads must be >= 1"):
        tensor_kernel(_bound("tf_core_scaled_f32", "x: [n]; y: out [n]"), {"nthreads": lambda: 0})(torch.ones(3), 1.0)


def test_kernel_writes_tensors_that_require_grad_on_both_paths():
    # The operator layer decides whether such a write is allowed (under no_grad it is).
    k = tensor_kernel(_bound("tf_core_scale_f32", "x: [n]"))
    p = torch.ones(4, requires_grad=True)
    with torch.no_grad():
        k(p, 2.0)
        assert p.tolist() == [2.0] * 4
        q = torch.ones(8, requires_grad=True)
        with pytest.raises(tensorffi.LayoutError):
            k(q[::2], 2.0)  # the general path detaches, and still refuses the strided write


def test_generated_source_is_specialised_and_shows_in_tracebacks():
    import inspect
    import traceback

    k = tensor_kernel(_bound("tf_core_iota_i64", "x: out [n]"))
    py = getattr(k, "__python_path__", k)  # the native body hands what it refuses to this one
    src = py.__tensorffi_source__
    assert inspect.getsource(py) == src  # registered with linecache
    assert "_slow" not in src and "_empty" in src  # no interpreted fallback
    with pytest.raises(tensorffi.ShapeError) as err:
        k(-1)
    frames = traceback.extract_tb(err.value.__traceback__)
    # the error is raised from the generated function itself, whose line is readable
    assert frames[-1].filename.startswith("<tensorffi operator kernel: tf_core_iota_i64")
    assert "raise" in (frames[-1].line or "")
