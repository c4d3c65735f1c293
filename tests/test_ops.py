# SPDX-License-Identifier: MIT
"""PyTorch operators (tensorffi.ops): tensorffi's own and a user's C library.

References are NumPy float64 (and analytic gradients); torch.compile runs with
fullgraph=True, so a graph break fails the test.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
from torch.library import opcheck

import tensorffi
from tensorffi import _demo
from tensorffi import ops
from conftest import as_kind, to_numpy

# --------------------------------------------------------------------------- #
# A small user C library: a forward and a backward function, and friends       #
# --------------------------------------------------------------------------- #

USER_CDEF = """
int wsquare(const double *x, const double *w, double *y, int64_t n);
int wsquare_backward(const double *x, const double *w, const double *grad_y,
                     double *grad_x, double *grad_w, int64_t n);
void process_data(float *data, int size);
double dot(const double *x, const double *y, int64_t n);
int rowsum_f32(const float *a, float *out, int64_t rows, int64_t cols);
int rowsum_f64(const double *a, double *out, int64_t rows, int64_t cols);
int64_t forward_calls(void);
int normalize_(double *x, double *norm, int64_t n);
int affine(const double *x, const double *b, double *y, int64_t n, double a);
int shift(const double *x, double *y, int64_t n, const double *b);
"""

USER_C = r"""
#include <stdint.h>
/* Counts real calls of wsquare: proves that tracing runs only the shape rule. The
 * user's C may keep state; tensorffi's own C may not. */
static int64_t ncalls = 0;
int64_t forward_calls(void) { return __atomic_load_n(&ncalls, __ATOMIC_SEQ_CST); }

/* y = w * x^2 */
int wsquare(const double *x, const double *w, double *y, int64_t n) {
    __atomic_add_fetch(&ncalls, 1, __ATOMIC_SEQ_CST);
    for (int64_t i = 0; i < n; i++) y[i] = w[i] * x[i] * x[i];
    return 0;
}
/* dy/dx = 2 w x, dy/dw = x^2 */
int wsquare_backward(const double *x, const double *w, const double *grad_y,
                     double *grad_x, double *grad_w, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        grad_x[i] = 2.0 * w[i] * x[i] * grad_y[i];
        grad_w[i] = x[i] * x[i] * grad_y[i];
    }
    return 0;
}
void process_data(float *data, int size) {
    for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f;
}
double dot(const double *x, const double *y, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}
int rowsum_f32(const float *a, float *out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        float s = 0.0f;
        for (int64_t c = 0; c < cols; c++) s += a[r * cols + c];
        out[r] = s;
    }
    return 0;
}
/* x /= |x| in place; norm[0] = |x| */
int normalize_(double *x, double *norm, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
    s = __builtin_sqrt(s);
    norm[0] = s;
    if (s > 0.0)
        for (int64_t i = 0; i < n; i++) x[i] /= s;
    return 0;
}
/* y = a x + b, b optional (NULL: 0) */
int affine(const double *x, const double *b, double *y, int64_t n, double a) {
    for (int64_t i = 0; i < n; i++) y[i] = a * x[i] + (b ? b[i] : 0.0);
    return 0;
}
/* y = x + b, b optional (NULL: 1) */
int shift(const double *x, double *y, int64_t n, const double *b) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] + (b ? b[i] : 1.0);
    return 0;
}
int rowsum_f64(const double *a, double *out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < cols; c++) s += a[r * cols + c];
        out[r] = s;
    }
    return 0;
}
"""

USER_CONTRACTS = {
    "wsquare": "x: [n]; w: [n]; y: out [n]; return: status",
    "wsquare_backward": "x: [n]; w: [n]; grad_y: [n]; grad_x: out [n]; grad_w: out [n]; return: status",
    "process_data": "data: [n]; size = n",
    "dot": "x: [n]; y: [n]",
    "rowsum_f32": "a: [rows, cols]; out: out [rows]; return: status",
    "rowsum_f64": "a: [rows, cols]; out: out [rows]; return: status",
    "normalize_": "x: [n]; norm: out [1]; return: status",
    "affine": "x: [n]; b: in? [n]; y: out [n]; return: status",
    "shift": "x: [n]; y: out [n]; b: in? [n]; return: status",
}


@pytest.fixture(scope="module")
def userlib(tmp_path_factory):
    cache = tmp_path_factory.mktemp("tfcache")
    return tensorffi.compile("ops_userlib", USER_CDEF, source=USER_C, contracts=USER_CONTRACTS, cache=cache)


@pytest.fixture(scope="module")
def userops(userlib):
    """The user's functions promoted to operators: a few lines each."""
    if "tftest::wsquare" not in ops.operators():
        ops.register(userlib.wsquare, "tftest::wsquare", backward=userlib.wsquare_backward)
        ops.register(userlib.process_data, "tftest::process_data")
        ops.register(userlib.dot, "tftest::dot")
        ops.register([userlib.rowsum_f32, userlib.rowsum_f64], "tftest::rowsum")
        ops.register(userlib.normalize_, "tftest::normalize_")  # in place, and a result
        ops.register(userlib.affine, "tftest::affine")  # an optional array
        ops.register(userlib.shift, "tftest::shift")  # a trailing optional array
        # The same C function as an operator with no backward.
        ops.register(tensorffi.core._scaled, "tftest::scaled_nobwd", hidden={"nthreads": 1})
    return torch.ops.tftest


def wsquare_ref(x, w):
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    return w * x * x


# --------------------------------------------------------------------------- #
# Schemas                                                                     #
# --------------------------------------------------------------------------- #


def test_core_schemas_mark_mutation_and_hide_lengths():
    assert ops.get("tensorffi::scale_").schema == "tensorffi::scale_(Tensor(a!) x, float a) -> ()"
    assert ops.get("tensorffi::axpy_").schema == "tensorffi::axpy_(Tensor x, Tensor(a!) y, float a) -> ()"
    assert ops.get("tensorffi::iota").schema == "tensorffi::iota(SymInt n) -> Tensor"
    assert ops.get("tensorffi::scaled").schema == "tensorffi::scaled(Tensor x, float a) -> Tensor"
    # the schema torch sees is the same
    assert str(torch.ops.tensorffi.axpy_.default._schema) == "tensorffi::axpy_(Tensor x, Tensor(a!) y, float a) -> ()"


def test_user_schemas_derived_from_contracts(userops):
    assert ops.get("tftest::wsquare").schema == "tftest::wsquare(Tensor x, Tensor w) -> Tensor"
    assert ops.get("tftest::wsquare_backward").schema == (
        "tftest::wsquare_backward(Tensor x, Tensor w, Tensor grad_y) -> (Tensor, Tensor)"
    )
    assert ops.get("tftest::process_data").schema == "tftest::process_data(Tensor(a!) data) -> ()"
    assert ops.get("tftest::dot").schema == "tftest::dot(Tensor x, Tensor y) -> Tensor"
    assert ops.get("tftest::rowsum").schema == "tftest::rowsum(Tensor a) -> Tensor"
    assert ops.get("tftest::normalize_").schema == "tftest::normalize_(Tensor(a!) x) -> Tensor"
    assert ops.get("tftest::affine").schema == "tftest::affine(Tensor x, Tensor? b, float a) -> Tensor"
    assert ops.get("tftest::shift").schema == "tftest::shift(Tensor x, Tensor? b=None) -> Tensor"


def test_hidden_parameters_and_a_factory_operator():
    from tensorffi._lib import ffi

    # a kernel with a progress callback, registered without it: no tensor argument at all
    op = ops.register(tensorffi.core._count, "tftest::count", hidden={"fn": ffi.NULL, "handle": ffi.NULL})
    assert op.schema == "tftest::count(int total, int steps) -> Tensor"
    assert op(100, 7).tolist() == [100]
    opcheck(op.overload, (10, 3))


def test_optional_arrays_pass_null(rng, userops):
    x, b = torch.from_numpy(rng.standard_normal(9)), torch.from_numpy(rng.standard_normal(9))
    np.testing.assert_allclose(userops.affine(x, None, 2.0).numpy(), 2 * x.numpy(), rtol=1e-12)
    np.testing.assert_allclose(userops.affine(x, b, 2.0).numpy(), 2 * x.numpy() + b.numpy(), rtol=1e-12)
    np.testing.assert_allclose(userops.shift(x).numpy(), x.numpy() + 1, rtol=1e-12)
    np.testing.assert_allclose(userops.shift(x, b).numpy(), x.numpy() + b.numpy(), rtol=1e-12)
    opcheck(userops.affine.default, (x, None, 2.0))
    opcheck(userops.affine.default, (x, b, 2.0))
    opcheck(userops.shift.default, (x,))
    with pytest.raises(tensorffi.ShapeError, match="'b'"):
        userops.affine(x, b[:4], 1.0)


def test_register_without_contract_keeps_length_argument(tmp_path):
    seed = "void process_data(float *d, int n) { for (int i = 0; i < n; i++) d[i] = 2.0f * d[i] + 1.0f; }"
    lib = tensorffi.compile("ops_nocontract", "void process_data(float *data, int size);", source=seed, cache=tmp_path)
    op = ops.register(lib.process_data, "tftest_nc::process_data")
    assert op.schema == "tftest_nc::process_data(Tensor(a!) data, int size) -> ()"
    t = torch.arange(4, dtype=torch.float32)
    op(t, 4)
    assert t.tolist() == [1.0, 3.0, 5.0, 7.0]
    with pytest.raises(tensorffi.LayoutError):
        op(torch.zeros(8)[::2], 4)  # written, not contiguous, no shape to copy by


# --------------------------------------------------------------------------- #
# Results against references, torch and NumPy inputs                          #
# --------------------------------------------------------------------------- #


def test_core_ops_match_numpy(rng, kind):
    x = rng.standard_normal(37).astype(np.float32)
    a = float(rng.uniform(-3, 3))
    t = as_kind(x, kind)
    ops.get("tensorffi::scale_")(t, a)
    np.testing.assert_allclose(to_numpy(t), x.astype(np.float64) * a, rtol=1e-6)

    xd, yd = rng.standard_normal(19), rng.standard_normal(19)
    y = as_kind(yd, kind)
    ops.get("tensorffi::axpy_")(as_kind(xd, kind), y, a)
    np.testing.assert_allclose(to_numpy(y), yd + a * xd, rtol=1e-12)

    out = ops.get("tensorffi::scaled")(as_kind(x, kind), a)
    assert isinstance(out, np.ndarray if kind == "numpy" else torch.Tensor)
    np.testing.assert_allclose(to_numpy(out), x.astype(np.float64) * a, rtol=1e-6)

    assert torch.ops.tensorffi.iota(6).tolist() == list(range(6))


def test_user_ops_match_numpy(rng, kind, userops):
    x, w = rng.standard_normal(23), rng.standard_normal(23)
    y = ops.get("tftest::wsquare")(as_kind(x, kind), as_kind(w, kind))
    np.testing.assert_allclose(to_numpy(y), wsquare_ref(x, w), rtol=1e-12)

    d = ops.get("tftest::dot")(as_kind(x, kind), as_kind(w, kind))
    assert float(d) == pytest.approx(float(np.dot(x, w)), rel=1e-12)

    v = as_kind(x, kind)
    norm = ops.get("tftest::normalize_")(v)
    np.testing.assert_allclose(to_numpy(norm), [np.linalg.norm(x)], rtol=1e-12)
    np.testing.assert_allclose(to_numpy(v), x / np.linalg.norm(x), rtol=1e-12)

    for dtype, rtol in ((np.float32, 1e-5), (np.float64, 1e-12)):
        a = rng.standard_normal((5, 7)).astype(dtype)
        r = ops.get("tftest::rowsum")(as_kind(a, kind))
        assert to_numpy(r).dtype == dtype
        np.testing.assert_allclose(to_numpy(r), a.astype(np.float64).sum(axis=1), rtol=rtol, atol=1e-6)


def test_non_contiguous_inputs_are_copied_written_refused(rng):
    x = torch.from_numpy(rng.standard_normal(40).astype(np.float32))[::2]
    np.testing.assert_allclose(torch.ops.tensorffi.scaled(x, 2.0).numpy(), x.numpy().astype(np.float64) * 2, rtol=1e-6)
    with pytest.raises(tensorffi.LayoutError, match="contiguous"):
        torch.ops.tensorffi.scale_(x, 2.0)


def test_errors_name_the_argument(userops):
    with pytest.raises(tensorffi.DTypeError, match="'x'"):
        torch.ops.tensorffi.scaled(torch.ones(3, dtype=torch.float64), 2.0)
    with pytest.raises(tensorffi.ShapeError, match="'y'"):
        torch.ops.tensorffi.axpy_(torch.ones(3, dtype=torch.float64), torch.ones(4, dtype=torch.float64), 1.0)
    with pytest.raises(tensorffi.DTypeError, match="float32, torch.float64"):
        userops.rowsum(torch.ones(2, 2, dtype=torch.int32))
    with pytest.raises(tensorffi.ShapeError):
        torch.ops.tensorffi.iota(-1)
    with pytest.raises(tensorffi.WritabilityError, match="read-only"):
        a = np.ones(3, np.float32)
        a.flags.writeable = False
        ops.get("tensorffi::scale_")(a, 2.0)


# --------------------------------------------------------------------------- #
# opcheck: schema, autograd registration, fake tensors, AOT dispatch           #
# --------------------------------------------------------------------------- #


def test_opcheck_core_ops(rng):
    x32 = torch.from_numpy(rng.standard_normal(16).astype(np.float32))
    x64, y64 = torch.from_numpy(rng.standard_normal(9)), torch.from_numpy(rng.standard_normal(9))
    opcheck(torch.ops.tensorffi.scale_.default, (x32.clone(), 1.5))
    opcheck(torch.ops.tensorffi.axpy_.default, (x64, y64.clone(), -0.5))
    opcheck(torch.ops.tensorffi.iota.default, (7,))
    opcheck(torch.ops.tensorffi.scaled.default, (x32, 3.0))
    opcheck(torch.ops.tensorffi.scaled.default, (x32.clone().requires_grad_(), 3.0))


def test_opcheck_user_ops(rng, userops):
    x = torch.from_numpy(rng.standard_normal(11)).requires_grad_()
    w = torch.from_numpy(rng.standard_normal(11)).requires_grad_()
    opcheck(userops.wsquare.default, (x, w))
    opcheck(userops.wsquare.default, (x.detach(), w.detach()))
    opcheck(userops.wsquare_backward.default, (x.detach(), w.detach(), torch.ones(11, dtype=torch.float64)))
    opcheck(userops.process_data.default, (torch.from_numpy(rng.standard_normal(5).astype(np.float32)),))
    opcheck(userops.dot.default, (x.detach(), w.detach()))
    opcheck(userops.rowsum.default, (torch.from_numpy(rng.standard_normal((3, 4)).astype(np.float32)),))
    opcheck(userops.normalize_.default, (torch.from_numpy(rng.standard_normal(6)),))


# --------------------------------------------------------------------------- #
# Tracing runs the shape rule only                                            #
# --------------------------------------------------------------------------- #


def test_fake_and_meta_tensors_run_the_shape_rule_only(userlib, userops):
    from torch._subclasses.fake_tensor import FakeTensorMode

    before = userlib.forward_calls()
    with FakeTensorMode():
        x = torch.empty(6, dtype=torch.float64)
        y = userops.wsquare(x, x)
        assert y.shape == (6,) and y.dtype == torch.float64
        r = userops.rowsum(torch.empty(4, 5))
        assert r.shape == (4,) and r.dtype == torch.float32
        assert torch.ops.tensorffi.iota(3).shape == (3,)
        with pytest.raises(tensorffi.ShapeError):
            userops.wsquare(x, torch.empty(5, dtype=torch.float64))
        with pytest.raises(tensorffi.DTypeError):
            userops.wsquare(x, torch.empty(6, dtype=torch.float32))
    m = torch.ops.tensorffi.scaled(torch.empty(5, device="meta"), 2.0)
    assert m.device.type == "meta" and m.shape == (5,)
    assert userlib.forward_calls() == before


# --------------------------------------------------------------------------- #
# torch.compile(fullgraph=True)                                               #
# --------------------------------------------------------------------------- #


def test_compile_fullgraph_matches_eager(rng, userops):
    torch._dynamo.reset()

    def model(x, w, buf):
        y = userops.wsquare(x, w)  # out-of-place, user op with a C backward
        z = torch.ops.tensorffi.scaled(buf, 0.5) + 1.0  # float32 core op
        torch.ops.tensorffi.scale_(buf, 3.0)  # mutates an input
        s = userops.dot(y, w)  # value result as a 0-dim tensor
        nrm = userops.normalize_(y)  # mutates an intermediate, returns a tensor
        return y * 2 + s, z, userops.rowsum(y.reshape(3, 4)), nrm

    x, w = torch.from_numpy(rng.standard_normal(12)), torch.from_numpy(rng.standard_normal(12))
    buf = torch.from_numpy(rng.standard_normal(8).astype(np.float32))
    b_eager, b_comp = buf.clone(), buf.clone()
    expect = model(x, w, b_eager)
    got = torch.compile(model, fullgraph=True)(x, w, b_comp)
    for g, e in zip(got, expect):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(b_comp, b_eager)


def test_compile_gradients_match_eager_and_reference(rng, userops):
    torch._dynamo.reset()

    def loss(x, w, v):
        y = userops.wsquare(x, w)
        return (y * y).sum() + torch.ops.tensorffi.scaled(v, 2.0).square().sum()

    x = torch.from_numpy(rng.standard_normal(10)).requires_grad_()
    w = torch.from_numpy(rng.standard_normal(10)).requires_grad_()
    v = torch.from_numpy(rng.standard_normal(10).astype(np.float32)).requires_grad_()
    compiled = torch.compile(loss, fullgraph=True, dynamic=True)
    grads = torch.autograd.grad(compiled(x, w, v), (x, w, v))
    eager = torch.autograd.grad(loss(x, w, v), (x, w, v))
    for g, e in zip(grads, eager):
        torch.testing.assert_close(g, e)
    xn, wn, vn = x.detach().numpy(), w.detach().numpy(), v.detach().numpy().astype(np.float64)
    y = wn * xn * xn
    np.testing.assert_allclose(grads[0].numpy(), 2 * y * 2 * wn * xn, rtol=1e-10)
    np.testing.assert_allclose(grads[1].numpy(), 2 * y * xn * xn, rtol=1e-10)
    np.testing.assert_allclose(grads[2].numpy(), 8 * vn, rtol=1e-5)
    # dynamic=True: another size runs without error and stays right
    x2 = torch.from_numpy(rng.standard_normal(7)).requires_grad_()
    w2 = torch.from_numpy(rng.standard_normal(7))
    v2 = torch.from_numpy(rng.standard_normal(7).astype(np.float32))
    (g2,) = torch.autograd.grad(compiled(x2, w2, v2), (x2,))
    xn2, wn2 = x2.detach().numpy(), w2.numpy()
    np.testing.assert_allclose(g2.numpy(), 4 * wn2 * xn2 * wn2 * xn2 * xn2, rtol=1e-10)


# --------------------------------------------------------------------------- #
# Autograd, no_grad, inference_mode                                           #
# --------------------------------------------------------------------------- #


def test_gradcheck_user_op_with_c_backward(rng, userops):
    x = torch.from_numpy(rng.standard_normal(6)).requires_grad_()
    w = torch.from_numpy(rng.standard_normal(6)).requires_grad_()
    assert torch.autograd.gradcheck(userops.wsquare, (x, w))
    y = userops.wsquare(x, w)
    assert y.requires_grad and y.grad_fn is not None
    v = torch.from_numpy(rng.standard_normal(4).astype(np.float32)).requires_grad_()
    (g,) = torch.autograd.grad(torch.ops.tensorffi.scaled(v, -1.5), v, torch.arange(4.0))
    np.testing.assert_allclose(g.numpy(), -1.5 * np.arange(4.0), rtol=1e-6)


def test_only_inputs_that_require_grad_get_gradients(rng, userops):
    x = torch.from_numpy(rng.standard_normal(5)).requires_grad_()
    w = torch.from_numpy(rng.standard_normal(5))
    userops.wsquare(x, w).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * w.numpy() * x.detach().numpy(), rtol=1e-12)
    assert w.grad is None


def test_no_grad_and_inference_mode(rng, userops):
    x = torch.from_numpy(rng.standard_normal(5)).requires_grad_()
    w = torch.from_numpy(rng.standard_normal(5))
    with torch.no_grad():
        y = userops.wsquare(x, w)
    assert not y.requires_grad and y.grad_fn is None
    np.testing.assert_allclose(y.numpy(), wsquare_ref(x.detach(), w), rtol=1e-12)
    with torch.inference_mode():
        xi = torch.from_numpy(rng.standard_normal(5))
        yi = userops.wsquare(xi, xi)
        zi = torch.ops.tensorffi.scaled(xi.float(), 2.0)
        torch.ops.tensorffi.scale_(zi, 2.0)
        ii = torch.ops.tensorffi.iota(3)
        # a normal tensor that requires grad, used inside inference mode
        yg = userops.wsquare(x, w)
    assert yi.is_inference() and zi.is_inference() and ii.is_inference()
    assert not yg.requires_grad
    np.testing.assert_allclose(zi.numpy(), 4 * xi.float().numpy(), rtol=1e-6)


def test_in_place_on_tensor_requiring_grad(rng):
    p = torch.nn.Parameter(torch.from_numpy(rng.standard_normal(4).astype(np.float32)))
    before = p.detach().clone()
    with pytest.raises(tensorffi.WritabilityError, match="'x'.*grad"):
        torch.ops.tensorffi.scale_(p, 2.0)  # like a built-in: no in-place write on a leaf that requires grad
    with pytest.raises(tensorffi.WritabilityError, match="'x'"):
        torch.ops.tensorffi.axpy_(p.double(), torch.zeros(4, dtype=torch.float64), 1.0)  # y would depend on x
    torch.testing.assert_close(p.detach(), before)
    version = p._version
    with torch.no_grad():  # an optimizer-style update is allowed, as for built-ins
        torch.ops.tensorffi.scale_(p, 2.0)
    assert p._version > version
    torch.testing.assert_close(p.detach(), before * 2)


def test_in_place_operator_with_a_result_refuses_grad_inputs(rng, userops):
    x = torch.from_numpy(rng.standard_normal(5)).requires_grad_()
    with pytest.raises(tensorffi.WritabilityError, match="'x'"):
        userops.normalize_(x)
    with pytest.raises(tensorffi.WritabilityError, match="'x'"):
        userops.normalize_(x * 1.0)  # a non-leaf too: the write would be invisible to autograd
    with torch.no_grad():
        norm = userops.normalize_(x)
    assert not norm.requires_grad
    np.testing.assert_allclose(np.linalg.norm(x.detach().numpy()), 1.0, rtol=1e-12)


def test_module_training_step_with_operators(rng, userops):
    class Model(torch.nn.Module):
        def __init__(self, w):
            super().__init__()
            self.w = torch.nn.Parameter(w)

        def forward(self, x):
            return userops.wsquare(x, self.w).sum()

    x = torch.from_numpy(rng.standard_normal(6))
    w0 = rng.standard_normal(6)
    model = Model(torch.from_numpy(w0.copy()))
    model(x).backward()
    np.testing.assert_allclose(model.w.grad.numpy(), x.numpy() ** 2, rtol=1e-12)
    with torch.no_grad():  # an SGD step written with an in-place operator, as with w.add_(...)
        torch.ops.tensorffi.axpy_(model.w.grad, model.w, -0.1)
        loss = model(x)  # no history under no_grad, Parameter or not
    assert not loss.requires_grad
    np.testing.assert_allclose(model.w.detach().numpy(), w0 - 0.1 * x.numpy() ** 2, rtol=1e-12)
    compiled = torch.compile(model, fullgraph=True)
    torch.testing.assert_close(compiled(x), model(x))


def test_version_counter_catches_writes_to_saved_tensors(rng, userops):
    x = torch.from_numpy(rng.standard_normal(4).astype(np.float32)).requires_grad_()
    y = torch.ops.tensorffi.scaled(x, 2.0)
    z = (y * y).sum()  # saves y
    with torch.no_grad():
        torch.ops.tensorffi.scale_(y, 3.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_op_without_backward_raises_on_backward_like_builtins(rng, userops):
    x = torch.from_numpy(rng.standard_normal(4).astype(np.float32)).requires_grad_()
    y = userops.scaled_nobwd(x, 2.0)
    assert y.requires_grad  # history is recorded...
    with pytest.raises(RuntimeError, match="derivative for tftest::scaled_nobwd is not implemented"):
        y.sum().backward()  # ...and backward says it is missing, instead of a silent zero


# --------------------------------------------------------------------------- #
# Bring your own .so (tensorffi.load, ABI mode)                               #
# --------------------------------------------------------------------------- #


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_loaded_library_function_as_operator(tmp_path, rng):
    src = tmp_path / "wsq.c"
    src.write_text(USER_C)
    so = tmp_path / "libwsq.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    lib = tensorffi.load(so, USER_CDEF, USER_CONTRACTS)
    op = ops.register(lib.wsquare, "tftest_abi::wsquare", backward=lib.wsquare_backward)
    x = torch.from_numpy(rng.standard_normal(8)).requires_grad_()
    w = torch.from_numpy(rng.standard_normal(8)).requires_grad_()
    np.testing.assert_allclose(op(x, w).detach().numpy(), wsquare_ref(x.detach(), w.detach()), rtol=1e-12)
    assert torch.autograd.gradcheck(op, (x, w))
    opcheck(op.overload, (x, w))


# --------------------------------------------------------------------------- #
# define(): a Python implementation with its shape rule and backward           #
# --------------------------------------------------------------------------- #


def test_define_python_impl_with_backward(rng):
    def impl(x, a=2.0):
        return torch.ops.tensorffi.scaled(x, a) + torch.ops.tensorffi.scaled(x, 1.0)

    def setup(ctx, inputs, output):
        ctx.a = inputs[1]

    def backward(ctx, g):
        return torch.ops.tensorffi.scaled(g.contiguous(), ctx.a + 1.0), None

    op = ops.define("tftest::affine2(Tensor x, float a=2.0) -> Tensor", impl,
                    fake=lambda x, a=2.0: torch.empty_like(x), backward=backward, setup_context=setup)
    x = torch.from_numpy(rng.standard_normal(5).astype(np.float32)).requires_grad_()
    y = op(x)
    np.testing.assert_allclose(y.detach().numpy(), 3 * x.detach().numpy(), rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(5, 3.0), rtol=1e-6)
    opcheck(op.overload, (x, 0.5))
    torch._dynamo.reset()
    got = torch.compile(lambda t: op(t, 0.5) * 2, fullgraph=True, backend="aot_eager")(x.detach())
    np.testing.assert_allclose(got.numpy(), 3.0 * x.detach().numpy(), rtol=1e-6)


def test_registration_errors(userlib):
    with pytest.raises(tensorffi.ContractError, match="already registered"):
        ops.register(tensorffi.core._scaled, "tensorffi::scaled", hidden={"nthreads": 1})
    with pytest.raises(tensorffi.ContractError, match="namespace::name"):
        ops.register(tensorffi.core._scaled, "scaled")
    with pytest.raises(tensorffi.ArgumentTypeError):
        ops.register(lambda x: x, "tftest::plain_python")
    with pytest.raises(tensorffi.ContractError, match="cannot be an operator argument"):
        ops.register(tensorffi.core.raw.tf_core_span_sum, "tftest::span")
    with pytest.raises(tensorffi.ContractError, match="in place cannot have a backward"):
        ops.register(userlib.process_data, "tftest::pd_bwd", backward=userlib.wsquare_backward)
    with pytest.raises(tensorffi.ContractError, match="grad_<output>"):
        ops.register(userlib.dot, "tftest::dot_bwd", backward=userlib.wsquare_backward)
    assert "tftest::pd_bwd" not in ops.operators() and "tftest::dot_bwd" not in ops.operators()


# --------------------------------------------------------------------------- #
# Threads                                                                      #
# --------------------------------------------------------------------------- #


def test_operators_are_thread_safe(rng, userops):
    xs = [rng.standard_normal(300 + i) for i in range(8)]
    ws = [rng.standard_normal(300 + i) for i in range(8)]
    errors: list[BaseException] = []

    def work(i):
        try:
            x, w = torch.from_numpy(xs[i]), torch.from_numpy(ws[i])
            for _ in range(50):
                y = userops.wsquare(x, w)
                np.testing.assert_allclose(y.numpy(), wsquare_ref(xs[i], ws[i]), rtol=1e-12)
                z = torch.ops.tensorffi.scaled(x.float(), 2.0)
                np.testing.assert_allclose(z.numpy(), 2 * xs[i].astype(np.float32), rtol=1e-6)
                xr = x.clone().requires_grad_()
                (g,) = torch.autograd.grad(userops.wsquare(xr, w).sum(), xr)
                np.testing.assert_allclose(g.numpy(), 2 * ws[i] * xs[i], rtol=1e-12)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_operator_pickles_by_name():
    import pickle

    assert pickle.loads(pickle.dumps(ops.get("tensorffi::scaled"))) is ops.get("tensorffi::scaled")


def test_registered_on_import_in_a_fresh_interpreter():
    code = "import torch, tensorffi; print(torch.ops.tensorffi.scaled(torch.ones(2), 4.0).tolist())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[4.0, 4.0]"


def test_demo_runs():
    lines: list[str] = []
    _demo.ops(lines.append)
    assert any("no graph break" in line for line in lines)
    assert any("max error 0.0e+00" in line for line in lines)
