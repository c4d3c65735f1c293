# SPDX-License-Identifier: MIT
"""tensorffi.signal's kernels as PyTorch operators (torch.ops.tensorffi.sosfilt,
sosfilt_backward, sosfiltfilt): SciPy references on fresh random inputs, opcheck,
torch.compile(fullgraph=True) forward and backward, no_grad / inference_mode."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.signal as ss
import torch
from torch.library import opcheck

import tensorffi
import tensorffi.signal as tsig

OPS = torch.ops.tensorffi


def random_sos(rng: np.random.Generator, order: int = 4) -> np.ndarray:
    """A stable Butterworth design with a random cutoff (poles away from the unit circle)."""
    return ss.butter(order, float(rng.uniform(0.15, 0.6)), output="sos")


def rel_err(got, want) -> float:
    got = got.detach().numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300))


def test_registered_with_schemas():
    ops = tensorffi.ops.operators()
    assert ops["tensorffi::sosfilt"].schema.startswith(
        "tensorffi::sosfilt(Tensor sos, Tensor x, int axis=-1, Tensor? zi=None"
    )
    assert ops["tensorffi::sosfilt"].backward is ops["tensorffi::sosfilt_backward"]
    assert "str? padtype=\"odd\"" in ops["tensorffi::sosfiltfilt"].schema


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ops_match_scipy(rng, dtype):
    sos = random_sos(rng)
    x = rng.standard_normal((3, 200, 2))
    zi = rng.standard_normal((sos.shape[0], 3, 2, 2))
    tol = 1e-12 if dtype is torch.float64 else 1e-5
    y, zf = OPS.sosfilt(torch.from_numpy(sos), torch.from_numpy(x).to(dtype), 1, torch.from_numpy(zi).to(dtype))
    y_ref, zf_ref = ss.sosfilt(sos, x.astype(dtype == torch.float32 and np.float32 or np.float64), 1,
                               zi.astype(np.float32) if dtype == torch.float32 else zi)
    assert y.dtype is dtype and zf.dtype is dtype
    assert rel_err(y, y_ref) <= tol and rel_err(zf, zf_ref) <= tol
    # without zi: zf holds the final states from zero initial conditions
    y0, zf0 = OPS.sosfilt(torch.from_numpy(sos), torch.from_numpy(x).to(dtype), 1)
    y0_ref, zf0_ref = ss.sosfilt(sos, x, 1, np.zeros_like(zi))
    assert rel_err(y0, y0_ref) <= 10 * tol and rel_err(zf0, zf0_ref) <= 10 * tol
    for padtype, padlen in [("odd", None), ("even", 7), (None, None), ("constant", 12)]:
        yf = OPS.sosfiltfilt(torch.from_numpy(sos), torch.from_numpy(x).to(dtype), 1, padtype, padlen)
        assert rel_err(yf, ss.sosfiltfilt(sos, x, 1, padtype, padlen)) <= 10 * tol


def test_transposed_input_keeps_layout(rng):
    sos = torch.from_numpy(random_sos(rng))
    x = torch.from_numpy(rng.standard_normal((50, 4))).T  # a view, not contiguous
    y, zf = OPS.sosfilt(sos, x)
    assert y.stride() == x.stride()
    assert rel_err(y, ss.sosfilt(sos.numpy(), x.numpy())) <= 1e-12


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck(rng, dtype):
    sos = torch.from_numpy(random_sos(rng, 4))  # 2 sections
    x = torch.from_numpy(rng.standard_normal((2, 30))).to(dtype)
    zi = torch.from_numpy(rng.standard_normal((2, 2, 2))).to(dtype)
    opcheck(OPS.sosfilt.default, (sos, x))
    opcheck(OPS.sosfilt.default, (sos, x, -1, zi))
    opcheck(OPS.sosfilt.default, (sos.clone().requires_grad_(), x.clone().requires_grad_(), -1,
                                  zi.clone().requires_grad_()))
    opcheck(OPS.sosfilt.default, (sos, x.T.contiguous().requires_grad_(), 0))
    gy = torch.from_numpy(rng.standard_normal((2, 30))).to(dtype)
    opcheck(OPS.sosfilt_backward.default, (sos, x, -1, zi, gy, torch.ones_like(zi)))
    opcheck(OPS.sosfilt_backward.default, (sos, x, 1, None, gy, torch.zeros_like(zi)))
    opcheck(OPS.sosfiltfilt.default, (sos, x))
    opcheck(OPS.sosfiltfilt.default, (sos, x, -1, "even", 5))
    opcheck(OPS.sosfiltfilt.default, (sos.clone().requires_grad_(), x.clone().requires_grad_(), -1, "odd", 6))


def test_meta_tensors_run_the_shape_rule():
    sos = torch.empty(3, 6, device="meta", dtype=torch.float64)
    x = torch.empty(5, 40, device="meta")
    y, zf = OPS.sosfilt(sos, x)
    assert y.shape == (5, 40) and zf.shape == (3, 5, 2) and y.dtype is torch.float32
    assert OPS.sosfiltfilt(sos, x, 0).shape == (5, 40)
    with pytest.raises(tensorffi.DTypeError):
        OPS.sosfilt(sos, x.to(torch.int64))


def test_gradients_match_gradcheck(rng):
    sos = torch.from_numpy(random_sos(rng, 2)).requires_grad_()
    x = torch.from_numpy(rng.standard_normal((2, 25))).requires_grad_()
    zi = torch.from_numpy(rng.standard_normal((1, 2, 2))).requires_grad_()

    def f(sos, x, zi):
        y, zf = OPS.sosfilt(sos, x, -1, zi)
        return y, zf

    # sos[:, 3] must stay 1: perturb the other columns only
    def g(b, a, x, zi):
        return f(torch.cat([b, torch.ones(b.shape[0], 1, dtype=b.dtype), a], 1), x, zi)

    assert torch.autograd.gradcheck(g, (sos[:, :3].detach().requires_grad_(), sos[:, 4:].detach().requires_grad_(), x, zi))
    f2 = lambda b, a, x: OPS.sosfiltfilt(torch.cat([b, torch.ones(b.shape[0], 1, dtype=b.dtype), a], 1), x, -1, "odd", 6)  # noqa: E731
    assert torch.autograd.gradcheck(f2, (sos[:, :3].detach().requires_grad_(), sos[:, 4:].detach().requires_grad_(), x))


class Smoother(torch.nn.Module):
    """A small model: learnable sections, a public-API sosfilt and the operator."""

    def __init__(self, sos: np.ndarray) -> None:
        super().__init__()
        self.b = torch.nn.Parameter(torch.from_numpy(sos[:, :3].copy()))
        self.a = torch.nn.Parameter(torch.from_numpy(sos[:, 4:].copy()))

    def forward(self, x: torch.Tensor, zi: torch.Tensor) -> torch.Tensor:
        sos = torch.cat([self.b, torch.ones_like(self.b[:, :1]), self.a], 1)
        y, zf = tsig.sosfilt(sos, torch.tanh(x), zi=zi)  # public function -> operator
        y2, _ = torch.ops.tensorffi.sosfilt(sos, y * 0.5, -1)
        return y2.square().mean() + zf.sum()


def test_compile_fullgraph_forward_and_backward(rng):
    sos = random_sos(rng, 2)
    x = torch.from_numpy(rng.standard_normal((3, 64)))
    zi = torch.from_numpy(rng.standard_normal((1, 3, 2)))
    eager, compiled_model = Smoother(sos), Smoother(sos)
    xe, zie = x.clone().requires_grad_(), zi.clone().requires_grad_()
    xc, zic = x.clone().requires_grad_(), zi.clone().requires_grad_()
    # eager gradients are validated by gradcheck (the reference for the compiled ones)
    assert torch.autograd.gradcheck(lambda x, zi: Smoother(sos)(x, zi), (x.clone().requires_grad_(), zi.clone().requires_grad_()))
    le = eager(xe, zie)
    le.backward()
    torch._dynamo.reset()
    lc = torch.compile(compiled_model, fullgraph=True, backend="aot_eager")(xc, zic)
    lc.backward()
    torch.testing.assert_close(lc, le, rtol=1e-12, atol=0)
    for ge, gc in [(xe.grad, xc.grad), (zie.grad, zic.grad), (eager.b.grad, compiled_model.b.grad),
                   (eager.a.grad, compiled_model.a.grad)]:
        torch.testing.assert_close(gc, ge, rtol=1e-10, atol=1e-12)


def test_compile_sosfiltfilt_no_graph_break(rng):
    sos = torch.from_numpy(random_sos(rng))
    x = torch.from_numpy(rng.standard_normal((2, 100)).astype(np.float32))
    torch._dynamo.reset()
    f = torch.compile(lambda s, x: tsig.sosfiltfilt(s, x) * 2.0, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(f(sos, x), tsig.sosfiltfilt(sos, x) * 2.0)


def test_no_grad_and_inference_mode(rng):
    sos = torch.from_numpy(random_sos(rng)).requires_grad_()
    x = torch.from_numpy(rng.standard_normal((2, 80))).requires_grad_()
    y = tsig.sosfilt(sos, x)
    assert y.requires_grad and y.grad_fn is not None
    assert tsig.sosfiltfilt(sos, x).requires_grad
    with torch.no_grad():
        y = tsig.sosfilt(sos, x)
        yf = OPS.sosfiltfilt(sos, x)
    assert not y.requires_grad and y.grad_fn is None and not yf.requires_grad
    assert rel_err(y, ss.sosfilt(sos.detach().numpy(), x.detach().numpy())) <= 1e-12
    with torch.inference_mode():
        xi = torch.from_numpy(rng.standard_normal((2, 80)))
        yi, zfi = OPS.sosfilt(sos.detach(), xi)
        yg = tsig.sosfilt(sos, x)  # tensors requiring grad, used inside inference mode
        yfi = tsig.sosfiltfilt(sos, xi)
    assert yi.is_inference() and zfi.is_inference() and yfi.is_inference()
    assert not yg.requires_grad
    # only inputs that require grad get gradients
    x2 = x.detach().clone().requires_grad_()
    tsig.sosfilt(sos.detach(), x2).sum().backward()
    assert x2.grad is not None
    # the backward operator has no backward itself: double backward raises, as for once_differentiable
    y = OPS.sosfilt(sos, x)[0].square().sum()
    (gx,) = torch.autograd.grad(y, x, create_graph=True)
    with pytest.raises(RuntimeError, match="not implemented"):
        gx.sum().backward()


def test_errors(rng):
    sos = torch.from_numpy(random_sos(rng))
    x = torch.from_numpy(rng.standard_normal(30))
    bad = sos.clone()
    bad[0, 3] = 2.0
    with pytest.raises(tensorffi.errors.InvalidArgumentError, match="should be all ones"):
        OPS.sosfilt(bad, x)
    with pytest.raises(tensorffi.errors.InvalidArgumentError, match="should be all ones"):
        tsig.sosfilt(bad, x)
    with pytest.raises(tensorffi.DTypeError, match="'x'"):
        OPS.sosfilt(sos, x.to(torch.int32))
    with pytest.raises(tensorffi.ShapeError, match="'zi'"):
        OPS.sosfilt(sos, x, -1, torch.zeros(1, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="padlen"):
        OPS.sosfiltfilt(sos, x, -1, "odd", 40)
    with pytest.raises(tensorffi.DeviceError):
        tsig.sosfiltfilt(sos, torch.ones(20, device="meta"))


def test_public_functions_call_the_operator_whenever_something_intercepts_it(rng):
    # plain eager calls run the operator's CPU implementation directly; a dispatch
    # mode, autograd or tracing sees the operator itself
    from torch.utils._python_dispatch import TorchDispatchMode

    class Log(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    sos = torch.from_numpy(random_sos(rng))
    x = torch.from_numpy(rng.standard_normal((3, 50)))
    zi = torch.zeros(sos.shape[0], 3, 2, dtype=torch.float64)
    plain = tsig.sosfilt(sos, x, zi=zi)
    with Log() as log:
        logged = tsig.sosfilt(sos, x, zi=zi)
    assert "tensorffi.sosfilt.default" in log.ops
    for a, b in zip(plain, logged):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    xg = x.clone().requires_grad_()
    y = tsig.sosfilt(sos, xg)
    assert y.grad_fn is not None and "sosfilt" in type(y.grad_fn).__name__
    with torch.no_grad():
        assert tsig.sosfilt(sos, xg).grad_fn is None
