# SPDX-License-Identifier: MIT
"""tensorffi.physics as PyTorch operators: torch.ops.tensorffi.nbody, nbody_, energy,
momentum against the float64 NumPy reference; opcheck; torch.compile(fullgraph=True);
no_grad, inference_mode and tensors that require grad."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.library import opcheck

import tensorffi
from tensorffi import physics as ph

from test_physics import TOL, assert_close_to, random_system, ref_energy, ref_nbody

DTYPES = {"float32": np.float32, "float64": np.float64}
OPS = torch.ops.tensorffi


def tensors(*arrays):
    return tuple(torch.from_numpy(np.ascontiguousarray(a).copy()) for a in arrays)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("batched", [True, False])
def test_ops_match_reference(rng, dtype, batched):
    pos, vel, mass = random_system(rng, 3, 17, DTYPES[dtype], batched)
    p, v, m = tensors(pos, vel, mass)
    rp, rv = ref_nbody(pos, vel, mass, dt=1e-2, steps=6, G=1.3, softening=0.05, method="symplectic_euler")
    got_p, got_v, traj = OPS.nbody(p, v, m, dt=1e-2, steps=6, G=1.3, softening=0.05, method="symplectic_euler",
                                   record_every=2)
    tol_x, tol_v = TOL[dtype]
    assert got_p.dtype == p.dtype and got_p.shape == p.shape
    assert_close_to(got_p, rp, rp, tol_x)
    assert_close_to(got_v.numpy().astype(np.float64) - vel, rv - vel, rv - vel, tol_v)
    assert traj.shape == ((3, 3, 17, 3) if batched else (3, 17, 3))
    torch.testing.assert_close(traj[..., -1, :, :], got_p, rtol=0, atol=0)
    np.testing.assert_array_equal(p.numpy(), pos)  # out of place
    # without recording the trajectory is empty (0 frames)
    _, _, empty = OPS.nbody(p, v, m, dt=1e-2)
    assert empty.shape == ((3, 0, 17, 3) if batched else (0, 17, 3))
    # in place: the same state, written into pos and vel
    traj2 = OPS.nbody_(p, v, m, dt=1e-2, steps=6, G=1.3, softening=0.05, method="symplectic_euler", record_every=2)
    torch.testing.assert_close(p, got_p, rtol=0, atol=0)
    torch.testing.assert_close(v, got_v, rtol=0, atol=0)
    torch.testing.assert_close(traj2, traj, rtol=0, atol=0)

    e = OPS.energy(p, v, m, 1.3, 0.05)
    assert e.shape == ((3,) if batched else ()) and e.dtype == p.dtype
    want = ref_energy(p.numpy(), v.numpy(), m.numpy(), G=1.3, softening=0.05)
    np.testing.assert_allclose(e.numpy(), want, rtol=1e-5 if dtype == "float32" else 1e-12)
    mom = OPS.momentum(v, m)
    want = (m.numpy().astype(np.float64)[..., None] * v.numpy()).sum(-2)
    assert mom.shape == want.shape
    np.testing.assert_allclose(mom.numpy(), want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)


def test_shared_mass_and_errors_name_the_argument(rng):
    pos, vel, mass = tensors(*random_system(rng, 2, 9))
    rp, _ = ref_nbody(pos.numpy(), vel.numpy(), np.broadcast_to(mass[0].numpy(), (2, 9)), dt=1e-3, steps=2)
    assert_close_to(OPS.nbody(pos, vel, mass[0], dt=1e-3, steps=2)[0], rp, rp, 1e-13)
    with pytest.raises(tensorffi.ShapeError, match="mass"):
        OPS.nbody(pos, vel, mass[:, :4], dt=0.1)
    with pytest.raises(tensorffi.DTypeError, match="vel"):
        OPS.energy(pos, vel.float(), mass)
    with pytest.raises(ValueError, match="dt"):
        OPS.nbody(pos, vel, mass, dt=0.0)
    with pytest.raises(ValueError, match="method"):
        OPS.nbody_(pos, vel, mass, dt=0.1, method="rk4")
    with pytest.raises(ValueError, match="record_every"):
        OPS.nbody(pos, vel, mass, dt=0.1, record_every=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck(rng, dtype):
    for batched in (True, False):
        pos, vel, mass = (t.to(dtype) for t in tensors(*random_system(rng, 2, 6, batched=batched)))
        kw = dict(dt=1e-2, steps=4, softening=0.1, record_every=2)
        opcheck(OPS.nbody.default, (pos, vel, mass), kw)
        opcheck(OPS.nbody.default, (pos, vel, mass), dict(dt=1e-2, steps=3))
        opcheck(OPS.nbody_.default, (pos.clone(), vel.clone(), mass), kw)
        opcheck(OPS.energy.default, (pos, vel, mass, 1.5, 0.1))
        opcheck(OPS.momentum.default, (vel, mass))
        # Inputs that require grad: the ops have no derivative, so the AOT test (which
        # calls backward) would fail as for any such operator; the others apply.
        no_backward = ("test_schema", "test_autograd_registration", "test_faketensor")
        opcheck(OPS.nbody.default, (pos.clone().requires_grad_(), vel, mass), kw, test_utils=no_backward)
        opcheck(OPS.energy.default, (pos, vel.clone().requires_grad_(), mass), test_utils=no_backward)


def test_shape_rule_reads_no_data(rng):
    pos, vel, mass = tensors(*random_system(rng, 4, 7))
    meta = [t.to("meta") for t in (pos, vel, mass)]
    p, v, traj = OPS.nbody(*meta, dt=0.1, steps=10, record_every=3)
    assert p.device.type == "meta" and p.shape == (4, 7, 3) and traj.shape == (4, 3, 7, 3)
    assert OPS.nbody_(*meta, dt=0.1, steps=10, record_every=5).shape == (4, 2, 7, 3)
    assert OPS.energy(*meta).shape == (4,)
    assert OPS.momentum(meta[1][0], meta[2][0]).shape == (3,)


def test_compile_fullgraph_matches_eager(rng):
    pos, vel, mass = tensors(*random_system(rng, 2, 11))

    def model(p, v, m):
        # the operators, and the public functions (which call them)
        p1, v1, traj = torch.ops.tensorffi.nbody(p, v, m, dt=1e-2, steps=6, softening=0.1, record_every=3)
        p2, v2 = ph.nbody(p1 * 1.0, v1, m, dt=1e-2, steps=2, softening=0.1)
        ph.nbody_(p2, v2, m, dt=1e-2, steps=1, softening=0.1)
        e = ph.energy(p2, v2, m, softening=0.1) - torch.ops.tensorffi.energy(p, v, m, 1.0, 0.1)
        return e, traj.mean(1), ph.momentum(v2, m)

    eager = model(pos, vel, mass)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")(pos, vel, mass)
    for a, b in zip(compiled, eager):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    rp, rv = ref_nbody(pos.numpy(), vel.numpy(), mass.numpy(), dt=1e-2, steps=9, softening=0.1)
    want = ref_energy(rp, rv, mass.numpy(), softening=0.1) - ref_energy(pos.numpy(), vel.numpy(), mass.numpy(), softening=0.1)
    np.testing.assert_allclose(compiled[0].numpy(), want, rtol=0, atol=1e-12)


@pytest.mark.slow
def test_compile_inductor_dynamic(rng):
    def model(p, v, m):
        p1, v1 = ph.nbody(p, v, m, dt=1e-2, steps=3)
        return ph.energy(p1, v1, m) * 2

    f = torch.compile(model, fullgraph=True, dynamic=True)
    for b, n in [(2, 5), (3, 8)]:
        args = tensors(*random_system(rng, b, n))
        torch.testing.assert_close(f(*args), model(*args), rtol=0, atol=0)


def test_no_grad_inference_mode_and_grad(rng):
    pos, vel, mass = tensors(*random_system(rng, 2, 5))
    want = OPS.nbody(pos, vel, mass, dt=1e-2, steps=3)
    pg = pos.clone().requires_grad_()
    # grad mode: the operators run and record history; backward is "not implemented"
    p, v, traj = OPS.nbody(pg, vel, mass, dt=1e-2, steps=3)
    assert p.requires_grad and p.grad_fn is not None
    torch.testing.assert_close(p.detach(), want[0], rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="derivative for tensorffi::nbody is not implemented"):
        p.sum().backward()
    e = ph.energy(pg, vel, mass)
    assert e.requires_grad
    with pytest.raises(RuntimeError, match="derivative for tensorffi::energy is not implemented"):
        e.sum().backward()
    # the in-place operator refuses tensors that require grad while grad mode is on...
    with pytest.raises(tensorffi.WritabilityError, match="'pos'"):
        OPS.nbody_(pg, vel.clone(), mass, dt=1e-2)
    with pytest.raises(tensorffi.WritabilityError, match="'pos'"):
        ph.nbody_(pg, vel.clone(), mass, dt=1e-2)
    # ...and writes them under no_grad, bumping the version counter (an optimizer-style update)
    with torch.no_grad():
        p, v, _ = OPS.nbody(pg, vel, mass, dt=1e-2, steps=3)
        assert not p.requires_grad and p.grad_fn is None
        vg = vel.clone()
        version = pg._version
        ph.nbody_(pg, vg, mass, dt=1e-2, steps=3)
        assert pg._version > version
    torch.testing.assert_close(pg.detach(), want[0], rtol=0, atol=0)
    torch.testing.assert_close(vg, want[1], rtol=0, atol=0)
    with torch.inference_mode():
        pi, vi = pos.clone(), vel.clone()
        p, v, traj = OPS.nbody(pi, vi, mass, dt=1e-2, steps=3)
        e = OPS.energy(pi, vi, mass)
        OPS.nbody_(pi, vi, mass, dt=1e-2, steps=3)
        eg = ph.energy(pos.clone().requires_grad_(), vel, mass)  # a normal tensor that requires grad
    assert p.is_inference() and e.is_inference() and not eg.requires_grad
    torch.testing.assert_close(pi, want[0], rtol=0, atol=0)


def test_public_api_keeps_progress_and_numpy(rng):
    pos, vel, mass = random_system(rng, 1, 6, batched=False)
    seen = []
    p, v = ph.nbody(*tensors(pos, vel, mass), dt=1e-2, steps=5, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (5, 5)  # progress= calls C directly (the operators report none)
    pn, vn = ph.nbody(pos, vel, mass, dt=1e-2, steps=5)
    assert isinstance(pn, np.ndarray)
    np.testing.assert_array_equal(p.numpy(), pn)
    np.testing.assert_array_equal(ph.nbody(*tensors(pos, vel, mass), dt=1e-2, steps=5)[0].numpy(), pn)
