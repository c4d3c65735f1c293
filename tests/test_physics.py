# SPDX-License-Identifier: MIT
"""tensorffi.physics against a float64 NumPy reference, physical invariants and the
Benchmarks Game n-body figures; bad input, threads, progress and cancellation."""
from __future__ import annotations

import math
import os
import re
import signal
import threading
import time

import numpy as np
import pytest
import torch

import tensorffi
from tensorffi import _demo
from tensorffi import physics as ph
from tensorffi.errors import ArgumentTypeError, DTypeError, LayoutError, ShapeError, WritabilityError

from conftest import as_kind, to_numpy

DTYPES = {"float32": np.float32, "float64": np.float64}
METHODS = ["leapfrog", "symplectic_euler"]


# --------------------------------------------------------------------------- #
# Reference (float64 NumPy, straight from the formulas)                        #
# --------------------------------------------------------------------------- #


def ref_accel(pos: np.ndarray, mass: np.ndarray, G: float, eps: float) -> np.ndarray:
    """a_i = sum_{j != i} G m_j (r_j - r_i) / (|r_j - r_i|^2 + eps^2)^{3/2}; (..., N, 3)."""
    d = pos[..., None, :, :] - pos[..., :, None, :]  # d[..., i, j] = r_j - r_i
    r2 = (d * d).sum(-1) + eps * eps
    n = pos.shape[-2]
    with np.errstate(divide="ignore", invalid="ignore"):
        inv3 = r2**-1.5
    inv3[..., np.arange(n), np.arange(n)] = 0.0
    return G * (d * (mass[..., None, :, None] * inv3[..., None])).sum(-2)


def ref_nbody(pos, vel, mass, *, dt, steps, G=1.0, softening=0.0, method="leapfrog"):
    pos = np.array(pos, dtype=np.float64)
    vel = np.array(vel, dtype=np.float64)
    mass = np.asarray(mass, dtype=np.float64)
    for _ in range(steps):
        if method == "leapfrog":
            vel += 0.5 * dt * ref_accel(pos, mass, G, softening)
            pos += dt * vel
            vel += 0.5 * dt * ref_accel(pos, mass, G, softening)
        else:
            vel += dt * ref_accel(pos, mass, G, softening)
            pos += dt * vel
    return pos, vel


def ref_energy(pos, vel, mass, G=1.0, softening=0.0):
    pos, vel, mass = (np.asarray(a, dtype=np.float64) for a in (pos, vel, mass))
    kinetic = 0.5 * (mass * (vel * vel).sum(-1)).sum(-1)
    d = pos[..., None, :, :] - pos[..., :, None, :]
    r = np.sqrt((d * d).sum(-1) + softening * softening)
    n = pos.shape[-2]
    iu = np.triu_indices(n, 1)
    mm = mass[..., :, None] * mass[..., None, :]
    return kinetic - G * (mm[..., iu[0], iu[1]] / r[..., iu[0], iu[1]]).sum(-1)


def random_system(rng, b, n, dtype=np.float64, batched=True, min_sep=0.0):
    """Random bodies; with ``min_sep``, no two bodies of a system closer than that (a near
    collision without softening amplifies rounding beyond any fixed tolerance: the
    comparisons that are about agreement, not about conditioning, draw without one)."""
    shape = (b, n) if batched else (n,)
    pos = rng.normal(size=shape + (3,))
    if min_sep > 0:
        systems = pos.reshape(-1, n, 3)
        for s in systems:
            while True:
                d = np.linalg.norm(s[:, None] - s[None], axis=-1) + np.eye(n) * 1e9
                close = np.argwhere(d < min_sep)
                if not len(close):
                    break
                s[close[0][0]] = rng.normal(size=3)
    vel = 0.3 * rng.normal(size=shape + (3,))
    mass = rng.uniform(0.5, 1.5, size=shape) / max(n, 1)
    return pos.astype(dtype), vel.astype(dtype), mass.astype(dtype)


def assert_close_to(got, want, scale_from, tol):
    got = to_numpy(got).astype(np.float64)
    scale = max(np.abs(scale_from).max(), 1e-300)
    err = np.abs(got - want).max() / scale
    assert err <= tol, f"max error {err:.3e} (relative to {scale:.3e}) > {tol:.1e}"


# (positions, velocity changes). float32: close encounters of random systems amplify
# rounding (typical errors are 1e-7 and 1e-6, and random draws reach 2.2e-5 in
# positions: seen in CI; a wrong kernel gives 1e-2 or more).
TOL = {"float32": (1e-4, 1e-3), "float64": (1e-13, 1e-12)}


# --------------------------------------------------------------------------- #
# Against the reference                                                        #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("softening", [0.0, 0.05])
@pytest.mark.parametrize("batched", [True, False])
def test_matches_reference(rng, kind, dtype, method, softening, batched):
    b, n = (3, 37) if batched else (1, 161)  # below and above the row kernel's threshold (128)
    pos, vel, mass = random_system(rng, b, n, DTYPES[dtype], batched)
    rp, rv = ref_nbody(pos, vel, mass, dt=1e-2, steps=4, G=1.7, softening=softening, method=method)
    p, v = ph.nbody(as_kind(pos, kind), as_kind(vel, kind), as_kind(mass, kind), dt=1e-2, steps=4, G=1.7,
                    softening=softening, method=method)
    assert type(p) is type(as_kind(pos, kind)) and p.shape == pos.shape and str(p.dtype).endswith(dtype)
    tol_x, tol_v = TOL[dtype]
    assert_close_to(p, rp, rp, tol_x)
    assert_close_to(np.asarray(to_numpy(v), np.float64) - vel, rv - vel, rv - vel, tol_v)


@pytest.mark.parametrize("simd", ["scalar", "avx2", "avx512"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_every_simd_level_matches_reference(rng, monkeypatch, simd, dtype):
    from conftest import require_simd

    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    require_simd("physics", simd)  # the level asked for is the one that runs (skips if the CPU lacks it)
    # up to several of the pair-once kernel's L1 tiles of j (584 float32, 288 float64)
    for b, n in [(1, 1), (2, 5), (1, 33), (2, 70), (1, 128), (2, 203), (1, 1301)]:
        for softening in (0.0, 0.1):
            pos, vel, mass = random_system(rng, b, n, DTYPES[dtype])
            rp, rv = ref_nbody(pos, vel, mass, dt=1e-2, steps=3, softening=softening)
            p, v = ph.nbody(pos, vel, mass, dt=1e-2, steps=3, softening=softening)
            assert_close_to(p, rp, rp, TOL[dtype][0])
            assert_close_to(v - vel, rv - vel, rv - vel, TOL[dtype][1])
            e = ph.energy(pos, vel, mass, softening=softening)  # its vectorised row sums
            np.testing.assert_allclose(e, ref_energy(pos, vel, mass, softening=softening),
                                       rtol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("simd", ["scalar", "avx2", "avx512"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("method", METHODS)
def test_batches_side_by_side_match_the_reference_and_one_system_at_a_time(rng, monkeypatch, simd, dtype, method):
    # A batch of at least a vector's lanes of systems (AVX-512: 16 float32, 8 float64;
    # AVX2: half) runs that many systems side by side, one per lane ("lanes" kernel);
    # the systems left over run one at a time. Cases: groups and leftovers, one thread
    # and two (a group per thread), bodies below and above the row kernel's threshold,
    # two bodies per system, a trajectory, and a pair at zero distance with softening 0.
    from conftest import require_simd

    monkeypatch.setenv("TENSORFFI_SIMD", simd)
    require_simd("physics", simd)
    for b, n, softening, threads in [(37, 5, 0.0, 1), (35, 40, 0.1, 2), (33, 150, 0.0, 2), (17, 2, 0.1, 1)]:
        pos, vel, mass = random_system(rng, b, n, DTYPES[dtype], min_sep=0.05 if softening == 0 else 0.0)
        p, v, traj = ph.nbody(pos, vel, mass, dt=1e-2, steps=4, G=1.3, softening=softening, method=method,
                              record_every=2, threads=threads)
        rp, rv = ref_nbody(pos, vel, mass, dt=1e-2, steps=4, G=1.3, softening=softening, method=method)
        assert_close_to(p, rp, rp, TOL[dtype][0])
        assert_close_to(v - vel, rv - vel, rv - vel, TOL[dtype][1])
        r2, _ = ref_nbody(pos, vel, mass, dt=1e-2, steps=2, G=1.3, softening=softening, method=method)
        assert_close_to(traj[:, 0], r2, r2, TOL[dtype][0])
        np.testing.assert_array_equal(traj[:, 1], p)
    # zero distance: one system of the batch has two coincident bodies
    pos, vel, mass = random_system(rng, 40, 20, DTYPES[dtype])
    pos[21, 7] = pos[21, 3]
    p, v = ph.nbody(pos, vel, mass, dt=1e-3, steps=2, method=method, threads=1)
    assert np.isfinite(p).all() and np.isfinite(v).all()
    for s in (0, 21, 39):
        ps, vs = ph.nbody(pos[s], vel[s], mass[s], dt=1e-3, steps=2, method=method)  # alone: another kernel
        assert_close_to(p[s], ps.astype(np.float64), ps, TOL[dtype][0])
        assert_close_to(v[s] - vel[s], (vs - vel[s]).astype(np.float64), vs - vel[s], TOL[dtype][1])


@pytest.mark.parametrize("how", ["exception", "free"])
def test_a_batch_side_by_side_stops_at_a_whole_step(rng, how):
    # The lanes kernel's groups (64 systems of 64 bodies, ~30 us a step) stop like single
    # systems: at a step boundary, and never touching freed memory (tests/README.md: ASan).
    tensors = [torch.from_numpy(a).clone() for a in random_system(rng, 64, 64, np.float32)]
    pos0 = tensors[0].clone()

    def progress(done, total):
        if how == "free":
            tensors[1].untyped_storage().resize_(0)
        else:
            raise Stop

    with pytest.raises(tensorffi.errors.StorageChangedError if how == "free" else Stop):
        ph.nbody_(*tensors, dt=1e-5, steps=10**6, progress=progress, threads=2)
    if how == "exception":
        assert torch.isfinite(tensors[0]).all() and not torch.equal(tensors[0], pos0)


def test_mass_of_shape_n_is_shared_by_all_systems(rng, kind):
    pos, vel, mass = random_system(rng, 4, 20)
    m = mass[0]
    rp, rv = ref_nbody(pos, vel, np.broadcast_to(m, (4, 20)), dt=1e-3, steps=2)
    p, v = ph.nbody(as_kind(pos, kind), as_kind(vel, kind), as_kind(m, kind), dt=1e-3, steps=2)
    assert_close_to(p, rp, rp, 1e-13)


def test_inputs_are_not_modified_and_non_contiguous_inputs_work(rng, kind):
    pos, vel, mass = random_system(rng, 2, 30)
    big = np.concatenate([pos, pos], axis=-1)  # (2, 30, 6): take every other column
    pos_nc = as_kind(big, kind)[..., ::2]
    before = to_numpy(pos_nc).copy()
    rp, rv = ref_nbody(before, vel, mass, dt=1e-3, steps=2)
    p, v = ph.nbody(pos_nc, as_kind(vel, kind), as_kind(mass, kind), dt=1e-3, steps=2)
    assert np.array_equal(to_numpy(pos_nc), before)
    assert_close_to(p, rp, rp, 1e-13)


def test_read_only_numpy_inputs_are_fine_for_nbody(rng):
    pos, vel, mass = random_system(rng, 1, 10, batched=False)
    for a in (pos, vel, mass):
        a.flags.writeable = False
    p, v = ph.nbody(pos, vel, mass, dt=1e-3)
    assert p.flags.writeable and not np.shares_memory(p, pos)


# --------------------------------------------------------------------------- #
# Physics                                                                      #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_momentum_is_conserved(rng, kind, method, dtype):
    pos, vel, mass = random_system(rng, 2, 40, DTYPES[dtype])
    p0 = ph.momentum(as_kind(vel, kind), as_kind(mass, kind))
    _, v = ph.nbody(as_kind(pos, kind), as_kind(vel, kind), as_kind(mass, kind), dt=1e-3, steps=200, softening=0.05, method=method)
    p1 = ph.momentum(v, as_kind(mass, kind))
    scale = (mass[..., None] * np.abs(vel)).sum(-2).max()
    tol = 1e-5 if dtype == "float32" else 1e-13
    assert np.abs(to_numpy(p1).astype(np.float64) - to_numpy(p0)).max() <= tol * max(scale, 1.0)


def two_body_circular(dtype=np.float64):
    pos = np.array([[-0.5, 0.0, 0.0], [0.5, 0.0, 0.0]], dtype)
    vel = np.array([[0.0, -0.5, 0.0], [0.0, 0.5, 0.0]], dtype)
    mass = np.array([0.5, 0.5], dtype)
    return pos, vel, mass  # G = 1, separation 1, total mass 1: omega = 1, period 2 pi


@pytest.mark.parametrize("method", METHODS)
def test_circular_orbit_returns_after_one_period(kind, method):
    pos, vel, mass = two_body_circular()
    errors = []
    for steps in (500, 1000):
        dt = 2 * math.pi / steps
        p, v = ph.nbody(as_kind(pos, kind), as_kind(vel, kind), as_kind(mass, kind), dt=dt, steps=steps, method=method)
        err = max(np.abs(to_numpy(p) - pos).max(), np.abs(to_numpy(v) - vel).max())
        assert err < 0.5 * dt, (steps, err)  # tolerance set by dt
        errors.append(err)
    # The return error is second order in dt for both (symplectic Euler's first-order
    # error is a periodic deformation of the orbit that is back to zero after a period).
    assert 3.0 < errors[0] / errors[1] < 5.0


def test_leapfrog_energy_drift_is_bounded_and_second_order(kind):
    names, pos, vel, mass = ph.jovian_system()
    e0 = float(ph.energy(pos, vel, mass))
    worst = []
    for dt in (0.02, 0.01):
        p, v = as_kind(pos, kind), as_kind(vel, kind)
        chunk = int(round(2.0 / dt))  # report every 2 years, for 200 years
        dev = []
        for _ in range(100):
            ph.nbody_(p, v, as_kind(mass, kind), dt=dt, steps=chunk)
            dev.append(abs(float(ph.energy(p, v, as_kind(mass, kind))) - e0) / abs(e0))
        dev = np.array(dev)
        # bounded: no secular growth (the second half is no worse than twice the first)
        assert dev[50:].max() < 2 * dev[:50].max() + 1e-12
        worst.append(dev.max())
    assert worst[0] < 1e-4
    assert 2.5 < worst[0] / worst[1] < 6.0  # second order in dt


def test_permuting_the_bodies_permutes_the_result(rng, kind):
    pos, vel, mass = random_system(rng, 2, 50)
    perm = rng.permutation(50)
    p, v = ph.nbody(as_kind(pos, kind), as_kind(vel, kind), as_kind(mass, kind), dt=1e-3, steps=5, softening=0.01)
    pp, vp = ph.nbody(as_kind(pos[:, perm], kind), as_kind(vel[:, perm], kind), as_kind(mass[:, perm], kind), dt=1e-3,
                      steps=5, softening=0.01)
    np.testing.assert_allclose(to_numpy(pp), to_numpy(p)[:, perm], rtol=0, atol=1e-13)
    np.testing.assert_allclose(to_numpy(vp), to_numpy(v)[:, perm], rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_energy_and_momentum_match_reference(rng, kind, dtype):
    pos, vel, mass = random_system(rng, 3, 25, DTYPES[dtype])
    for G, eps in [(1.0, 0.0), (2.5, 0.2)]:
        e = ph.energy(as_kind(pos, kind), as_kind(vel, kind), as_kind(mass, kind), G=G, softening=eps)
        assert e.shape == (3,) and str(e.dtype).endswith(dtype)
        want = ref_energy(pos, vel, mass, G, eps)
        np.testing.assert_allclose(to_numpy(e), want, rtol=1e-6 if dtype == "float32" else 1e-13)
    mom = ph.momentum(as_kind(vel, kind), as_kind(mass, kind))
    assert mom.shape == (3, 3)
    want = (mass[..., None].astype(np.float64) * vel).sum(-2)
    np.testing.assert_allclose(to_numpy(mom), want, rtol=1e-6 if dtype == "float32" else 1e-13, atol=1e-7)
    e1 = ph.energy(as_kind(pos[0], kind), as_kind(vel[0], kind), as_kind(mass[0], kind))
    assert float(e1) == pytest.approx(ref_energy(pos[0], vel[0], mass[0]), rel=1e-6)
    assert tuple(ph.momentum(as_kind(vel[0], kind), as_kind(mass[0], kind)).shape) == (3,)


def test_energy_of_larger_system_uses_threads_consistently(rng):
    pos, vel, mass = random_system(rng, 1, 700, batched=False)
    e1 = ph.energy(pos, vel, mass, threads=1)
    e3 = ph.energy(pos, vel, mass, threads=3)
    assert e1 == pytest.approx(ref_energy(pos, vel, mass), rel=1e-12)
    assert e1 == e3  # the same partial sums, added in the same order


# --------------------------------------------------------------------------- #
# The public reference: Computer Language Benchmarks Game n-body               #
# --------------------------------------------------------------------------- #


def test_benchmarks_game_nbody_reference(kind):
    names, pos, vel, mass = ph.jovian_system()
    assert names == ["Sun", "Jupiter", "Saturn", "Uranus", "Neptune"]
    p, v, m = as_kind(pos, kind), as_kind(vel, kind), as_kind(mass, kind)
    assert f"{float(ph.energy(p, v, m)):.9f}" == "-0.169075164"
    p1, v1 = ph.nbody(p, v, m, dt=0.01, steps=1000, method="symplectic_euler")
    assert f"{float(ph.energy(p1, v1, m)):.9f}" == "-0.169087605"


# --------------------------------------------------------------------------- #
# Edge cases                                                                   #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("method", METHODS)
def test_zero_and_one_body(kind, method):
    for shape in [(0, 3), (2, 0, 3), (0, 4, 3)]:
        pos = as_kind(np.zeros(shape), kind)
        p, v, traj = ph.nbody(pos, as_kind(np.zeros(shape), kind), as_kind(np.zeros(shape[:-1]), kind), dt=0.1, steps=4,
                              method=method, record_every=2)
        assert tuple(p.shape) == shape and tuple(traj.shape) == shape[:-2] + (2,) + shape[-2:]
        assert tuple(ph.energy(pos, pos, as_kind(np.zeros(shape[:-1]), kind)).shape) == shape[:-2]
    pos = np.array([[1.0, 2.0, 3.0]])
    vel = np.array([[0.5, -1.0, 0.25]])
    p, v = ph.nbody(as_kind(pos, kind), as_kind(vel, kind), as_kind(np.array([2.0]), kind), dt=0.1, steps=10, method=method)
    np.testing.assert_allclose(to_numpy(p), pos + 1.0 * vel, rtol=1e-14)
    np.testing.assert_array_equal(to_numpy(v), vel)
    assert float(ph.energy(as_kind(pos, kind), as_kind(vel, kind), as_kind(np.array([2.0]), kind))) == pytest.approx(1.3125)


def test_zero_steps_returns_copies(rng, kind):
    pos, vel, mass = random_system(rng, 1, 5, batched=False)
    p, v, traj = ph.nbody(as_kind(pos, kind), as_kind(vel, kind), as_kind(mass, kind), dt=0.1, steps=0, record_every=1)
    np.testing.assert_array_equal(to_numpy(p), pos)
    assert tuple(traj.shape) == (0, 5, 3)


@pytest.mark.parametrize("softening", [0.0, 0.1])
def test_nan_propagates_without_a_crash(rng, kind, softening):
    pos, vel, mass = random_system(rng, 2, 40)
    pos[0, 7, 1] = np.nan
    p, v = ph.nbody(as_kind(pos, kind), as_kind(vel, kind), as_kind(mass, kind), dt=1e-3, steps=3, softening=softening)
    p, v = to_numpy(p), to_numpy(v)
    assert np.isnan(v[0]).all()  # every body of system 0 feels the NaN body
    assert np.isfinite(p[1]).all() and np.isfinite(v[1]).all()  # system 1 is independent


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("n_extra", [1, 200])  # the all-pairs kernel, and the row kernel (>= 128 bodies)
def test_a_pair_at_zero_distance_exerts_no_force(rng, dtype, n_extra):
    # Two coincident bodies and softening 0: their pair is left out of forces and
    # potential (it would be inf * 0 = NaN, and -inf); every other pair follows the formula.
    pos = rng.normal(size=(2 + n_extra, 3))
    pos[1] = pos[0]
    vel = 0.1 * rng.normal(size=pos.shape)
    mass = rng.uniform(0.5, 1.5, size=len(pos)) / len(pos)
    pos, vel, mass = pos.astype(dtype), vel.astype(dtype), mass.astype(dtype)
    p64, v64, m64 = (a.astype(np.float64) for a in (pos, vel, mass))
    d = p64[None, :, :] - p64[:, None, :]  # d[i, j] = r_j - r_i
    d2 = (d * d).sum(-1)
    w = np.where(d2 > 0, d2, np.inf) ** -1.5  # 0 for the pairs at zero distance
    want_dv = 1e-3 * (m64[None, :, None] * d * w[..., None]).sum(1)
    for threads in (1, 3):
        p, v = ph.nbody(pos, vel, mass, dt=1e-3, method="symplectic_euler", threads=threads)
        assert np.isfinite(p).all() and np.isfinite(v).all()
        # v - vel recovers dv (~1e-5) from velocities ~0.1: that subtraction alone is off by
        # a few ulps of |v|, ~1e-12 of dv in float64 (1.33e-12 was seen against 1e-12)
        cancel = 8 * np.finfo(dtype).eps * np.abs(v64).max() / np.abs(want_dv).max()
        assert_close_to(v - vel, want_dv, want_dv, TOL[dtype][1] + cancel)
    iu = np.triu_indices(len(pos), 1)
    pairs = d2[iu] > 0
    want_e = 0.5 * (m64 * (v64 * v64).sum(-1)).sum() - (
        m64[iu[0]][pairs] * m64[iu[1]][pairs] / np.sqrt(d2[iu][pairs])
    ).sum()
    assert float(ph.energy(pos, vel, mass)) == pytest.approx(want_e, rel=1e-5 if dtype == "float32" else 1e-12)
    # with softening the pair follows the formula: no force (dx = 0) and a finite energy
    p, v = ph.nbody(pos, vel, mass, dt=1e-3, softening=0.1, method="symplectic_euler")
    assert np.isfinite(v).all() and np.isfinite(ph.energy(pos, vel, mass, softening=0.1))


def test_negative_dt_runs_backwards(rng):
    pos, vel, mass = random_system(rng, 1, 20, batched=False)
    p, v = ph.nbody(pos, vel, mass, dt=1e-3, steps=50, softening=0.1)
    pb, vb = ph.nbody(p, v, mass, dt=-1e-3, steps=50, softening=0.1)
    np.testing.assert_allclose(pb, pos, atol=1e-12)  # leapfrog is time-reversible
    np.testing.assert_allclose(vb, vel, atol=1e-11)


# --------------------------------------------------------------------------- #
# In place, trajectories                                                       #
# --------------------------------------------------------------------------- #


def test_in_place_matches_copy(rng, kind):
    pos, vel, mass = random_system(rng, 2, 30)
    p, v = ph.nbody(as_kind(pos, kind), as_kind(vel, kind), as_kind(mass, kind), dt=1e-3, steps=3)
    pi, vi = as_kind(pos, kind), as_kind(vel, kind)
    out = ph.nbody_(pi, vi, as_kind(mass, kind), dt=1e-3, steps=3)
    assert out[0] is pi and out[1] is vi
    np.testing.assert_array_equal(to_numpy(pi), to_numpy(p))
    np.testing.assert_array_equal(to_numpy(vi), to_numpy(v))


def test_in_place_refuses_what_it_cannot_write(rng):
    pos, vel, mass = random_system(rng, 1, 8, batched=False)
    t = torch.from_numpy(np.concatenate([pos, pos], axis=1))[:, ::2]
    with pytest.raises(LayoutError, match="pos"):
        ph.nbody_(t, torch.from_numpy(vel), torch.from_numpy(mass), dt=0.1)
    ro = pos.copy()
    ro.flags.writeable = False
    with pytest.raises(WritabilityError, match="pos"):
        ph.nbody_(ro, vel.copy(), mass, dt=0.1)
    g = torch.from_numpy(vel.copy()).requires_grad_()
    with pytest.raises(WritabilityError, match="vel"):
        ph.nbody_(torch.from_numpy(pos.copy()), g, torch.from_numpy(mass), dt=0.1)


def test_in_place_bumps_the_version_counter(rng):
    pos, vel, mass = (torch.from_numpy(a) for a in random_system(rng, 1, 8, batched=False))
    before = pos._version, vel._version
    ph.nbody_(pos, vel, mass, dt=0.1)
    assert pos._version > before[0] and vel._version > before[1]


@pytest.mark.parametrize("method", METHODS)
def test_trajectory_frames_are_the_states_every_k_steps(rng, kind, method):
    pos, vel, mass = random_system(rng, 2, 12)
    p, v, traj = ph.nbody(as_kind(pos, kind), as_kind(vel, kind), as_kind(mass, kind), dt=1e-3, steps=11,
                          record_every=3, method=method, softening=0.1)
    assert tuple(traj.shape) == (2, 3, 12, 3) and type(traj) is type(p)
    for f in range(3):
        rp, _ = ref_nbody(pos, vel, mass, dt=1e-3, steps=3 * (f + 1), method=method, softening=0.1)
        np.testing.assert_allclose(to_numpy(traj)[:, f], rp, rtol=0, atol=1e-13)
    _, _, tr1 = ph.nbody(as_kind(pos[0], kind), as_kind(vel[0], kind), as_kind(mass[0], kind), dt=1e-3, steps=11,
                         record_every=3, method=method, softening=0.1)
    assert tuple(tr1.shape) == (3, 12, 3)
    _, _, last = ph.nbody(as_kind(pos, kind), as_kind(vel, kind), as_kind(mass, kind), dt=1e-3, steps=12,
                          record_every=4, method=method, softening=0.1)
    pe, _ = ph.nbody(as_kind(pos, kind), as_kind(vel, kind), as_kind(mass, kind), dt=1e-3, steps=12, method=method,
                     softening=0.1)
    np.testing.assert_array_equal(to_numpy(last)[:, -1], to_numpy(pe))


# --------------------------------------------------------------------------- #
# Bad input                                                                    #
# --------------------------------------------------------------------------- #


def test_bad_input_names_the_argument(rng, kind):
    pos, vel, mass = (as_kind(a, kind) for a in random_system(rng, 2, 5))
    ok = dict(dt=0.1)
    cases = [
        ((pos, vel[:, :4], mass), ok, ShapeError, "vel"),
        ((pos, vel, mass[:, :4]), ok, ShapeError, "mass"),
        ((pos[..., :2], vel[..., :2], mass), ok, ShapeError, "pos"),
        ((pos, vel, mass), dict(dt=0.0), ValueError, "dt"),
        ((pos, vel, mass), dict(dt=float("nan")), ValueError, "dt"),
        ((pos, vel, mass), dict(dt=float("inf")), ValueError, "dt"),
        ((pos, vel, mass), dict(dt="0.1"), TypeError, "dt"),
        ((pos, vel, mass), dict(dt=0.1, steps=-1), ValueError, "steps"),
        ((pos, vel, mass), dict(dt=0.1, steps=2.0), TypeError, "steps"),
        ((pos, vel, mass), dict(dt=0.1, steps=True), TypeError, "steps"),
        ((pos, vel, mass), dict(dt=0.1, method="rk4"), ValueError, "method"),
        ((pos, vel, mass), dict(dt=0.1, record_every=0), ValueError, "record_every"),
        ((pos, vel, mass), dict(dt=0.1, softening=-1.0), ValueError, "softening"),
        ((pos, vel, mass), dict(dt=0.1, G=float("nan")), ValueError, "G"),
        ((pos, vel, mass), dict(dt=0.1, threads=0), ValueError, "threads"),
        ((pos, vel, mass), dict(dt=0.1, progress="yes"), TypeError, "progress"),
    ]
    for args, kwargs, exc, word in cases:
        with pytest.raises(exc, match=word):
            ph.nbody(*args, **kwargs)
    with pytest.raises(TypeError, match="'dt'"):
        ph.nbody(pos, vel, mass)  # dt is required


def test_bad_dtypes_and_kinds(rng):
    pos, vel, mass = random_system(rng, 1, 5, batched=False)
    with pytest.raises(DTypeError, match="vel"):
        ph.nbody(pos, vel.astype(np.float32), mass, dt=0.1)
    with pytest.raises(DTypeError, match="pos"):
        ph.nbody(pos.astype(np.int64), vel, mass, dt=0.1)
    with pytest.raises(ArgumentTypeError, match="mass"):
        ph.nbody(pos, vel, torch.from_numpy(mass), dt=0.1)
    with pytest.raises(ArgumentTypeError, match="pos"):
        ph.nbody(pos.tolist(), vel, mass, dt=0.1)
    with pytest.raises(ShapeError, match="mass"):
        ph.energy(pos, vel, mass[:3])
    with pytest.raises(ShapeError, match="vel"):
        ph.momentum(vel[:, :2], mass)


# --------------------------------------------------------------------------- #
# Threads, progress, cancellation                                              #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("b,n", [(1, 600), (8, 64), (3, 300), (5, 200)])
def test_thread_count_changes_only_rounding_and_runs_are_deterministic(rng, method, b, n):
    # (1, 600): bodies split between threads; (8, 64): whole systems per thread;
    # (3, 300), (5, 200): either, depending on the count. Sums of the pair-once kernel
    # are added in another order with another split, so only rounding may differ.
    pos, vel, mass = random_system(rng, b, n, np.float32)
    p1, v1 = ph.nbody(pos, vel, mass, dt=1e-3, steps=3, method=method, threads=1)
    for threads in (2, 3, 4):
        p, v = ph.nbody(pos, vel, mass, dt=1e-3, steps=3, method=method, threads=threads)
        np.testing.assert_allclose(p, p1, rtol=0, atol=2e-6 * np.abs(p1).max())
        np.testing.assert_allclose(v - vel, v1 - vel, rtol=0, atol=3e-4 * np.abs(v1 - vel).max())
        p2, v2 = ph.nbody(pos, vel, mass, dt=1e-3, steps=3, method=method, threads=threads)
        np.testing.assert_array_equal(p2, p)
        np.testing.assert_array_equal(v2, v)


@pytest.mark.parametrize("b,n", [(1, 700), (2, 300), (3, 96)])
def test_many_more_threads_than_cores(rng, b, n):
    # Threads are preempted in the middle of phases and start late: results must not
    # depend on it (several runs are bitwise equal) and agree with one thread.
    pos, vel, mass = random_system(rng, b, n, np.float32)
    p1, v1 = ph.nbody(pos, vel, mass, dt=1e-3, steps=6, threads=1)
    runs = [ph.nbody(pos, vel, mass, dt=1e-3, steps=6, threads=9) for _ in range(4)]
    for p, v in runs:
        np.testing.assert_array_equal(p, runs[0][0])
        np.testing.assert_array_equal(v, runs[0][1])
    np.testing.assert_allclose(runs[0][0], p1, rtol=0, atol=2e-6 * np.abs(p1).max())


def test_concurrent_calls_from_python_threads(rng):
    systems = [random_system(rng, 2, 150) for _ in range(6)]
    want = [ph.nbody(*s, dt=1e-3, steps=4, threads=1) for s in systems]
    got: list = [None] * len(systems)

    def work(i):
        for _ in range(3):
            got[i] = ph.nbody(*systems[i], dt=1e-3, steps=4, threads=2)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(systems))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (wp, wv), (gp, gv) in zip(want, got):
        np.testing.assert_array_equal(gp, wp)
        np.testing.assert_array_equal(gv, wv)


def long_run_system(rng):
    return random_system(rng, 1, 1500, np.float32, batched=False)  # ~10 ms per step


def test_progress_reports_steps():
    seen = []
    names, pos, vel, mass = ph.jovian_system()
    ph.nbody(pos, vel, mass, dt=0.01, steps=50, progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1] == (50, 50)
    assert all(0 <= d <= t == 50 for d, t in seen)


def test_progress_bar(capsys):
    names, pos, vel, mass = ph.jovian_system()
    ph.nbody(pos, vel, mass, dt=0.01, steps=20, progress=True)
    assert re.search(r"20(\.0)?/20", capsys.readouterr().err)


class Stop(Exception):
    pass


@pytest.mark.parametrize("threads", [1, 2])
def test_an_exception_in_progress_stops_the_run(rng, threads):
    pos, vel, mass = long_run_system(rng)
    seen = []

    def progress(done, total):
        seen.append(done)
        raise Stop

    p, v = pos.copy(), vel.copy()
    with pytest.raises(Stop):
        ph.nbody_(p, v, mass, dt=1e-4, steps=100_000, progress=progress, threads=threads)
    assert len(seen) == 1 and seen[0] < 100_000
    assert np.isfinite(p).all() and not np.array_equal(p, pos)  # a completed step boundary


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("victim", ["pos", "vel", "mass"])
@pytest.mark.parametrize("how", ["resize_", "free"])
def test_a_callback_that_resizes_or_frees_a_storage_stops_the_run(rng, threads, victim, how):
    # The hostile-input regression: C must not write (or read) freed memory. Under
    # ASan (tests/README.md) the old code failed with heap-use-after-free here.
    tensors = dict(zip(("pos", "vel", "mass"), (torch.from_numpy(a).clone() for a in long_run_system(rng))))

    def progress(done, total):
        t = tensors[victim]
        if how == "resize_":
            t.resize_(10**6, 3)
        else:
            t.untyped_storage().resize_(0)

    with pytest.raises(tensorffi.errors.StorageChangedError, match=victim):
        ph.nbody_(tensors["pos"], tensors["vel"], tensors["mass"], dt=1e-4, steps=20_000, progress=progress,
                  threads=threads)


def test_ctrl_c_stops_promptly(rng):
    pos, vel, mass = long_run_system(rng)

    def handler(signum, frame):
        raise Stop

    old = signal.signal(signal.SIGINT, handler)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(Stop):
            ph.nbody(pos, vel, mass, dt=1e-4, steps=100_000)  # minutes if not stopped
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, old)


def test_the_gil_is_released(rng):
    """Another Python thread runs while C integrates (tests/conftest.py explains the
    proof: no timing, no sleeps)."""
    from conftest import gil_released_between_reports

    pos, vel, mass = random_system(rng, 1, 1500, np.float32, batched=False)
    seen = gil_released_between_reports(
        lambda steps, progress: ph.nbody(pos, vel, mass, dt=1e-4, steps=steps, threads=1, progress=progress),
        [50 * 2**k for k in range(7)],
    )
    assert seen[0] == 0 and seen[-1] == 1, seen


def test_demo_runs():
    lines: list[str] = []
    _demo.physics(lines.append)
    text = "\n".join(lines)
    assert "energy before: -0.169075164" in text and "energy after:  -0.169087605" in text
