# SPDX-License-Identifier: MIT
"""tensorffi.signal.SOSFilter: trainable IIR filters (a0 fixed at 1, optional stable
parametrisation, streaming state), against SciPy references."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.signal as ss
import torch
from numpy.testing import assert_allclose, assert_array_equal

import tensorffi
import tensorffi.signal as tsig


def _fit(filt: tsig.SOSFilter, x: torch.Tensor, target: torch.Tensor, steps: int, lr: float,
         check=None) -> list[float]:
    opt = torch.optim.Adam(filt.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((filt(x) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if check is not None:
            check(filt)
    return losses


@pytest.mark.parametrize("stable", [False, True])
def test_training_fits_a_target_filter_from_data(rng, stable):
    torch.manual_seed(int(rng.integers(1 << 31)))
    target = ss.butter(4, float(rng.uniform(0.15, 0.35)), output="sos")
    x = torch.from_numpy(rng.standard_normal((8, 1500)))
    y = torch.from_numpy(ss.sosfilt(target, x.numpy()))
    filt = tsig.SOSFilter(n_sections=2, stable=stable, dtype=torch.float64)  # starts as the identity
    assert_array_equal(filt(x).detach().numpy(), x.numpy())
    losses = _fit(filt, x, y, steps=300, lr=0.02)
    assert losses[-1] < 0.01 * losses[0], (losses[0], losses[-1])
    # the learned filter generalises: fresh data through it matches the target filter
    x2 = rng.standard_normal((2, 1000))
    with torch.no_grad():
        out = filt(torch.from_numpy(x2)).numpy()
    ref = ss.sosfilt(target, x2)
    assert np.sqrt(np.mean((out - ref) ** 2)) < 0.1 * np.sqrt(np.mean(ref**2))  # ~0.04 measured
    assert filt.sos[:, 3].eq(1).all()  # a0 never moved


def test_stable_parametrisation_keeps_poles_inside_the_unit_circle(rng):
    # a resonator whose poles sit at radius 0.995, fitted from the identity with
    # Adam at learning rates where the unconstrained coefficients (a1, a2) step out
    # of the stability triangle: with stable=True every pole stays inside, at
    # every step, while the fit still pulls them to the circle
    r, theta = 0.995, float(rng.uniform(0.2, 1.0))
    target = np.array([[1.0, 0, 0, 1, -2 * r * np.cos(theta), r * r]])
    x = torch.from_numpy(rng.standard_normal((4, 1500)))
    y = torch.from_numpy(ss.sosfilt(target, x.numpy()))
    for lr in (0.1, 0.5):
        torch.manual_seed(int(rng.integers(1 << 31)))
        radii: list[float] = []

        def check(filt: tsig.SOSFilter) -> None:
            rad = filt.poles().abs().max().item()
            radii.append(rad)
            assert rad < 1.0, f"a pole left the unit circle: |p| = {rad}"

        filt = tsig.SOSFilter(n_sections=1, stable=True, dtype=torch.float64)
        losses = _fit(filt, x, y, steps=150, lr=lr, check=check)
        assert all(np.isfinite(losses))
        if lr == 0.1:  # it fits (Adam at this rate oscillates near the end: the best step counts)
            assert min(losses) < 0.5 * losses[0]
            assert max(radii) > 0.95  # and it did push the poles towards the circle
    # the poles reported are those of the sections' a1, a2
    filt = tsig.SOSFilter(ss.cheby1(6, 1.0, [0.1, 0.13], "bandpass", output="sos"), stable=True, dtype=torch.float64)
    a = filt.denominators().detach().numpy()
    for s in range(a.shape[0]):
        assert_allclose(np.sort(np.abs(np.roots([1, *a[s]]))), np.sort(filt.poles()[s].abs().numpy()), rtol=1e-9)
    # whatever the parameters, the sections are stable
    with torch.no_grad():
        filt.u.copy_(torch.from_numpy(rng.standard_normal(filt.u.shape) * 50))
    assert filt.poles().abs().max().item() < 1.0


def test_initial_coefficients_and_a0_normalisation(rng):
    sos = ss.ellip(6, 0.5, 40, 0.3, output="sos")
    x = rng.standard_normal((3, 400))
    for stable in (False, True):
        filt = tsig.SOSFilter(sos, stable=stable, dtype=torch.float64)
        assert_allclose(filt.sos.detach().numpy(), sos, rtol=1e-12, atol=1e-15)
        with torch.no_grad():
            assert_allclose(filt(torch.from_numpy(x)).numpy(), ss.sosfilt(sos, x), rtol=1e-9, atol=1e-12)
    scaled = sos * np.array([[2.0], [3.0], [0.5]])  # each section times a constant: same filter
    filt = tsig.SOSFilter(scaled, dtype=torch.float64)
    assert_allclose(filt.sos.detach().numpy(), sos, rtol=1e-12, atol=1e-15)
    with pytest.raises(tensorffi.errors.InvalidArgumentError, match="not stable"):
        tsig.SOSFilter(np.array([[1.0, 0, 0, 1, -2.5, 1.2]]), stable=True)
    with pytest.raises(tensorffi.errors.InvalidArgumentError, match="n_sections"):
        tsig.SOSFilter()
    with pytest.raises(tensorffi.ShapeError):
        tsig.SOSFilter(np.ones((2, 5)))


def test_gradients_reach_every_free_coefficient(rng):
    sos = ss.butter(4, 0.3, output="sos")
    x = torch.from_numpy(rng.standard_normal((2, 60)))
    for stable in (False, True):
        filt = tsig.SOSFilter(sos, stable=stable, dtype=torch.float64)
        params = list(filt.parameters())
        assert len(params) == 2
        assert torch.autograd.gradcheck(lambda *p: filt(x), params, eps=1e-6, atol=1e-6, rtol=1e-5)


def test_dtype_follows_the_parameters_and_the_data(rng):
    sos = ss.butter(4, 0.3, output="sos")
    x32 = torch.from_numpy(rng.standard_normal((2, 100)).astype(np.float32))
    filt = tsig.SOSFilter(sos)  # torch's default dtype: float32
    assert filt.b.dtype == torch.float32 and filt(x32).dtype == torch.float32
    assert filt.double()(x32).dtype == torch.float64


def test_streaming_state_carried_between_calls(rng):
    sos = ss.butter(6, 0.2, output="sos")
    x = rng.standard_normal((3, 1000))
    filt = tsig.SOSFilter(sos, stable=True, dtype=torch.float64)
    with torch.no_grad():
        whole = filt(torch.from_numpy(x)).numpy()
        parts = [filt.stream(torch.from_numpy(x[:, a:b])).numpy() for a, b in ((0, 100), (100, 101), (101, 1000))]
    assert_allclose(np.concatenate(parts, axis=1), whole, rtol=0, atol=1e-13)
    assert filt.state.shape == (3, 3, 2) and not filt.state.requires_grad
    assert_allclose(ss.sosfilt(filt.sos.detach().numpy(), x, zi=np.zeros((3, 3, 2)))[1], filt.state.numpy(),
                    rtol=1e-12, atol=1e-14)
    with pytest.raises(tensorffi.ShapeError, match="reset_state"):
        filt.stream(torch.zeros(5, 10, dtype=torch.float64))
    filt.reset_state()
    with torch.no_grad():
        assert_allclose(filt.stream(torch.from_numpy(x[:, :100])).numpy(), whole[:, :100], atol=1e-13)
    # explicit states, as sosfilt
    zi = torch.from_numpy(rng.standard_normal((3, 3, 2)))
    y, zf = filt(torch.from_numpy(x), zi=zi)
    ry, rzf = ss.sosfilt(filt.sos.detach().numpy(), x, zi=zi.numpy())
    assert_allclose(y.detach().numpy(), ry, rtol=1e-12, atol=1e-13)
    assert_allclose(zf.detach().numpy(), rzf, rtol=1e-12, atol=1e-13)
    # training through a stream: gradients flow within a chunk, states are detached between chunks
    filt.reset_state()
    opt = torch.optim.SGD(filt.parameters(), lr=1e-3)
    for a in range(0, 1000, 250):
        opt.zero_grad()
        filt.stream(torch.from_numpy(x[:, a:a + 250])).pow(2).mean().backward()
        opt.step()
    assert filt.b.grad is not None and torch.isfinite(filt.b.grad).all()


def test_module_under_torch_compile(rng):
    filt = tsig.SOSFilter(ss.butter(4, 0.3, output="sos"), stable=True, dtype=torch.float64)
    x = torch.from_numpy(rng.standard_normal((2, 200)))
    compiled = torch.compile(filt, fullgraph=True, backend="eager")
    y = compiled(x)
    assert_allclose(y.detach().numpy(), filt(x).detach().numpy(), rtol=0, atol=0)
    y.sum().backward()
    assert filt.u.grad is not None
