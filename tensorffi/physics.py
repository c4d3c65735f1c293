# SPDX-License-Identifier: MIT
"""Particle simulation: batched n-body integration under softened gravity.

The acceleration of body ``i`` is ``sum_{j != i} G m_j (r_j - r_i) / (|r_j - r_i|^2 + eps^2)^{3/2}``
(``eps`` = ``softening``). States are ``pos`` and ``vel`` of shape ``(N, 3)``, or
``(B, N, 3)`` for ``B`` independent systems, and ``mass`` of shape ``(N,)`` or ``(B, N)``
(a ``(N,)`` mass is shared by all systems). float32 and float64, torch CPU tensors and
NumPy arrays; results come back in the caller's kind and dtype.

The whole run (all steps) is one C call: it releases the GIL, spreads bodies or
systems over up to ``threads`` threads (only as many as the work pays for: small calls
run on the calling thread), uses AVX2/AVX-512 force kernels when the CPU has them,
reports progress (``progress=True`` draws a tqdm bar) and stops at a step boundary on
Ctrl-C (the ``KeyboardInterrupt`` is re-raised).

A pair of bodies at exactly zero distance (possible only with ``softening=0``) exerts
no force and adds no potential energy, instead of turning every coordinate into NaN;
any other pair follows the formula (two bodies very close together without softening
still feel huge forces).

>>> import torch, tensorffi.physics as ph
>>> pos = torch.tensor([[-0.5, 0.0, 0.0], [0.5, 0.0, 0.0]], dtype=torch.float64)
>>> vel = torch.tensor([[0.0, -0.5, 0.0], [0.0, 0.5, 0.0]], dtype=torch.float64)
>>> mass = torch.tensor([0.5, 0.5], dtype=torch.float64)
>>> p, v = ph.nbody(pos, vel, mass, dt=1e-3, steps=100)
>>> round(float(ph.energy(p, v, mass)), 6) == round(float(ph.energy(pos, vel, mass)), 6)
True
"""
from __future__ import annotations

import csv
import math
import operator
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Union

import numpy as np
import torch

from ._callbacks import CallbackScope
from ._lib import native
from .core import resolve_threads, struct
from .errors import ArgumentTypeError, DTypeError, ShapeError

Array = Union[torch.Tensor, np.ndarray]

#: Integration methods and their codes in ``tf_physics_params.method``.
METHODS = {"leapfrog": 0, "symplectic_euler": 1}

_NBODY = "pos: inout [b, n, 3]; vel: inout [b, n, 3]; mass: [b, n]; traj: out [b, frames, n, 3]"
_ENERGY = "pos: [b, n, 3]; vel: [b, n, 3]; mass: [b, n]; out: out [b]"
_MOMENTUM = "vel: [b, n, 3]; mass: [b, n]; out: out [b, 3]"

_nbody_fn = {
    "float32": native("tf_physics_nbody_f32", _NBODY),
    "float64": native("tf_physics_nbody_f64", _NBODY),
}
_energy_fn = {
    "float32": native("tf_physics_energy_f32", _ENERGY),
    "float64": native("tf_physics_energy_f64", _ENERGY),
}
_momentum_fn = {
    "float32": native("tf_physics_momentum_f32", _MOMENTUM),
    "float64": native("tf_physics_momentum_f64", _MOMENTUM),
}

DATA_DIR = Path(__file__).resolve().parent / "data"


# --------------------------------------------------------------------------- #
# Argument checks                                                              #
# --------------------------------------------------------------------------- #


def _kind(x: Any) -> str | None:
    if isinstance(x, torch.Tensor):
        return "torch"
    if isinstance(x, np.ndarray):
        return "numpy"
    return None


def _dtype_name(x: Array) -> str:
    return str(x.dtype).removeprefix("torch.")


def _describe(x: Any) -> str:
    kind = _kind(x)
    if kind is None:
        return type(x).__name__
    return f"{'torch.Tensor' if kind == 'torch' else 'numpy.ndarray'}(dtype={_dtype_name(x)}, shape={tuple(x.shape)})"


def _check_arrays(fname: str, arrays: dict[str, Any]) -> tuple[str, str]:
    """Same kind and a float dtype for all; returns (kind, dtype name)."""
    first_name, first = next(iter(arrays.items()))
    kind = _kind(first)
    for name, x in arrays.items():
        k = _kind(x)
        if k is None:
            raise ArgumentTypeError(f"{fname}(): {name} must be a torch tensor or a NumPy array, got {_describe(x)}")
        if k != kind:
            raise ArgumentTypeError(
                f"{fname}(): {name} is a {'torch tensor' if k == 'torch' else 'NumPy array'} but {first_name} is "
                f"a {'torch tensor' if kind == 'torch' else 'NumPy array'}; pass the same kind for all"
            )
    dtype = _dtype_name(first)
    if dtype not in ("float32", "float64"):
        raise DTypeError(f"{fname}(): {first_name} must be float32 or float64, got {dtype}")
    for name, x in arrays.items():
        if _dtype_name(x) != dtype:
            raise DTypeError(f"{fname}(): {name} has dtype {_dtype_name(x)} but {first_name} has dtype {dtype}; they must match")
    assert kind is not None
    return kind, dtype


def _check_shapes(fname: str, pos: Array, vel: Array | None, mass: Array, pos_name: str = "pos") -> tuple[bool, int, int]:
    """(batched, B, N) from pos (N, 3) | (B, N, 3), vel like pos, mass (N,) | (B, N)."""
    shape = tuple(pos.shape)
    if len(shape) not in (2, 3) or shape[-1] != 3:
        raise ShapeError(f"{fname}(): {pos_name} must have shape (N, 3) or (B, N, 3), got {shape}")
    batched = len(shape) == 3
    b, n = (shape[0], shape[1]) if batched else (1, shape[0])
    if vel is not None and tuple(vel.shape) != shape:
        raise ShapeError(f"{fname}(): vel has shape {tuple(vel.shape)} but pos has shape {shape}; they must match")
    mshape = tuple(mass.shape)
    if mshape != shape[:-1] and not (batched and mshape == (n,)):
        want = f"({b}, {n}) or ({n},)" if batched else f"({n},)"
        raise ShapeError(f"{fname}(): mass must have shape {want} to match {pos_name} {shape}, got {mshape}")
    return batched, b, n


def _batched_mass(mass: Array, b: int, n: int) -> Array:
    if tuple(mass.shape) == (b, n):
        return mass
    if isinstance(mass, torch.Tensor):
        return mass.reshape(1, n).expand(b, n)
    return np.broadcast_to(mass.reshape(1, n), (b, n))


def _real(fname: str, name: str, value: Any) -> float:
    if isinstance(value, (bool, str, bytes)):
        raise ArgumentTypeError(f"{fname}(): {name} must be a real number, got {type(value).__name__} {value!r}")
    try:
        return float(value)
    except Exception:
        raise ArgumentTypeError(f"{fname}(): {name} must be a real number, got {type(value).__name__}") from None


def _integer(fname: str, name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ArgumentTypeError(f"{fname}(): {name} must be an integer, got bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ArgumentTypeError(f"{fname}(): {name} must be an integer, got {type(value).__name__} {value!r}") from None


def _check_gravity(fname: str, G: Any, softening: Any) -> tuple[float, float]:
    g = _real(fname, "G", G)
    if not math.isfinite(g):
        raise ValueError(f"{fname}(): G must be finite, got {g}")
    eps = _real(fname, "softening", softening)
    if not math.isfinite(eps) or eps < 0:
        raise ValueError(f"{fname}(): softening must be finite and >= 0, got {eps}")
    return g, eps


def _check_integration(
    fname: str, dt: Any, steps: Any, G: Any, softening: Any, method: Any, record_every: Any
) -> tuple[float, int, float, float, int, int]:
    step = _real(fname, "dt", dt)
    if not math.isfinite(step) or step == 0.0:
        raise ValueError(f"{fname}(): dt must be finite and non-zero, got {step}")
    nsteps = _integer(fname, "steps", steps)
    if nsteps < 0:
        raise ValueError(f"{fname}(): steps must be >= 0, got {nsteps}")
    g, eps = _check_gravity(fname, G, softening)
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"{fname}(): unknown method {method!r}; expected one of {', '.join(map(repr, METHODS))}")
    if record_every is None:
        rec = 0
    else:
        rec = _integer(fname, "record_every", record_every)
        if rec < 1:
            raise ValueError(f"{fname}(): record_every must be a positive integer or None, got {rec}")
    return step, nsteps, g, eps, METHODS[method], rec


# --------------------------------------------------------------------------- #
# Integration                                                                  #
# --------------------------------------------------------------------------- #


@lru_cache(maxsize=64)
def _params(dt: float, G: float, softening: float, steps: int, record_every: int, method: int) -> Any:
    """The ``tf_physics_params`` struct (C only reads it, so equal ones are shared)."""
    return struct("tf_physics_params", dt=dt, G=G, softening=softening, steps=steps, record_every=record_every, method=method)


def _run(
    fname: str,
    pos: Array,
    vel: Array,
    mass: Array,
    dt: Any,
    steps: Any,
    G: Any,
    softening: Any,
    method: Any,
    record_every: Any,
    progress: Any,
    threads: int | None,
    copy: bool,
) -> tuple[Any, ...]:
    if (progress is None or progress is False) and _all_tensors(pos, vel, mass):
        return _run_op(fname, pos, vel, mass, dt, steps, G, softening, method, record_every, threads, copy)
    kind, dtype = _check_arrays(fname, {"pos": pos, "vel": vel, "mass": mass})
    batched, b, n = _check_shapes(fname, pos, vel, mass)
    step, nsteps, g, eps, code, rec = _check_integration(fname, dt, steps, G, softening, method, record_every)
    nthreads = resolve_threads(threads)
    if copy:
        if kind == "torch":
            pos = pos.detach().clone(memory_format=torch.contiguous_format)
            vel = vel.detach().clone(memory_format=torch.contiguous_format)
        else:
            pos = np.array(pos, order="C", copy=True)
            vel = np.array(vel, order="C", copy=True)
    pos3, vel3 = (pos, vel) if batched else (pos[None], vel[None])
    mass2 = _batched_mass(mass if batched else mass[None], b, n)
    params = _params(step, g, eps, nsteps, rec, code)
    frames = nsteps // rec if rec else 0
    with CallbackScope(progress, desc=fname, unit="step") as scope:
        traj = scope.call(
            _nbody_fn[dtype], pos3, vel3, mass2, params, nthreads, scope.fn, scope.handle, frames=frames
        )
    if rec == 0:
        return pos, vel
    return pos, vel, (traj if batched else traj[0])


def nbody(
    pos: Array,
    vel: Array,
    mass: Array,
    *,
    dt: float,
    steps: int = 1,
    G: float = 1.0,
    softening: float = 0.0,
    method: str = "leapfrog",
    record_every: int | None = None,
    progress: bool | Callable[[int, int], object] | None = None,
    threads: int | None = None,
) -> tuple[Any, ...]:
    """Advance n-body systems by ``steps`` steps of size ``dt``; returns new ``(pos, vel)``.

    Args:
        pos, vel: ``(N, 3)`` or ``(B, N, 3)`` (``B`` independent systems), float32 or
            float64, torch CPU tensors or NumPy arrays (all of the same kind and dtype).
        mass: ``(N,)`` or ``(B, N)``; ``(N,)`` with batched ``pos`` is shared by all systems.
        dt: time step, finite and non-zero (negative runs time backwards).
        steps: number of steps, ``>= 0``.
        G: gravitational constant. softening: Plummer length ``eps >= 0``.
        method: ``"leapfrog"`` (kick-drift-kick, second order; one force evaluation per
            step plus one) or ``"symplectic_euler"`` (``v += a(x) dt`` then ``x += v dt``).
        record_every: ``k`` to also return the trajectory: positions after steps
            ``k, 2k, ..., T*k`` (``T = steps // k``), shape ``(B, T, N, 3)`` (``(T, N, 3)``
            for unbatched input), allocated once and filled by C.
        progress: ``True`` for a tqdm bar, or a callable ``progress(done, total)`` in steps,
            called about every 0.1 s from the calling thread while no other thread
            touches the arrays. If it resizes or frees the storage of a tensor the call
            uses, the run stops before touching it again and raises
            :class:`tensorffi.errors.StorageChangedError`.
        threads: the most threads to use (default: :func:`tensorffi.get_num_threads`).

    Returns:
        ``(pos, vel)`` or ``(pos, vel, trajectory)``, new arrays of the caller's kind and dtype.

    A pair at exactly zero distance exerts no force (with ``softening=0``: the body
    itself, or two bodies at the same place); NaN in the state propagates.

    >>> import numpy as np, tensorffi.physics as ph
    >>> pos = np.array([[1.0, 0, 0], [-1.0, 0, 0]]); vel = np.zeros((2, 3)); mass = np.ones(2)
    >>> p, v, traj = ph.nbody(pos, vel, mass, dt=0.01, steps=10, record_every=5)
    >>> traj.shape
    (2, 2, 3)
    """
    return _run("nbody", pos, vel, mass, dt, steps, G, softening, method, record_every, progress, threads, True)


def nbody_(
    pos: Array,
    vel: Array,
    mass: Array,
    *,
    dt: float,
    steps: int = 1,
    G: float = 1.0,
    softening: float = 0.0,
    method: str = "leapfrog",
    record_every: int | None = None,
    progress: bool | Callable[[int, int], object] | None = None,
    threads: int | None = None,
) -> tuple[Any, ...]:
    """:func:`nbody`, advancing ``pos`` and ``vel`` in place; returns them (and the trajectory).

    ``pos`` and ``vel`` must be contiguous and writable (a NumPy array that is not
    read-only, a tensor that does not require grad). They are written once per step,
    when the step is complete, so a ``progress`` callback sees, and an interrupted run
    (Ctrl-C, an exception in ``progress``) leaves, the state after a whole number of
    steps (with several threads over whole systems, each system's own last step).

    >>> import torch, tensorffi.physics as ph
    >>> pos = torch.tensor([[1.0, 0, 0], [-1.0, 0, 0]]); vel = torch.zeros(2, 3)
    >>> _ = ph.nbody_(pos, vel, torch.ones(2), dt=0.01, steps=10)
    >>> bool(pos[0, 0] < 1.0)
    True
    """
    return _run("nbody_", pos, vel, mass, dt, steps, G, softening, method, record_every, progress, threads, False)


# --------------------------------------------------------------------------- #
# Diagnostics                                                                  #
# --------------------------------------------------------------------------- #


def energy(pos: Array, vel: Array, mass: Array, G: float = 1.0, softening: float = 0.0, *, threads: int | None = None) -> Any:
    """Total energy of each system: ``sum m v^2 / 2 - sum_{i<j} G m_i m_j / sqrt(r_ij^2 + eps^2)``.

    Accumulated in float64 and returned in the input dtype: shape ``(B,)`` for batched
    input, a scalar (0-d tensor, NumPy scalar) otherwise. With ``softening=0`` a pair at
    exactly zero distance is left out (as from the forces of :func:`nbody`).

    >>> import numpy as np, tensorffi.physics as ph
    >>> float(ph.energy(np.array([[0.0, 0, 0], [2.0, 0, 0]]), np.zeros((2, 3)), np.ones(2)))
    -0.5
    """
    if _all_tensors(pos, vel, mass):
        if not _compiling():
            G, softening = _check_gravity("energy", G, softening)
        return _energy_op(pos, vel, mass, G, softening, threads=threads)
    kind, dtype = _check_arrays("energy", {"pos": pos, "vel": vel, "mass": mass})
    batched, b, n = _check_shapes("energy", pos, vel, mass)
    g, eps = _check_gravity("energy", G, softening)
    pos3, vel3 = (pos, vel) if batched else (pos[None], vel[None])
    mass2 = _batched_mass(mass if batched else mass[None], b, n)
    out = _energy_fn[dtype](pos3, vel3, mass2, g, eps, resolve_threads(threads))
    return out if batched else out[0]


def momentum(vel: Array, mass: Array) -> Any:
    """Total momentum ``sum_i m_i v_i`` of each system: ``(B, 3)``, or ``(3,)`` for unbatched input.

    >>> import torch, tensorffi.physics as ph
    >>> ph.momentum(torch.tensor([[1.0, 0, 0], [-0.5, 0, 0]]), torch.tensor([1.0, 2.0])).tolist()
    [0.0, 0.0, 0.0]
    """
    if _all_tensors(vel, mass, mass):
        return _momentum_op(vel, mass)
    kind, dtype = _check_arrays("momentum", {"vel": vel, "mass": mass})
    batched, b, n = _check_shapes("momentum", vel, None, mass, pos_name="vel")
    vel3 = vel if batched else vel[None]
    mass2 = _batched_mass(mass if batched else mass[None], b, n)
    out = _momentum_fn[dtype](vel3, mass2)
    return out if batched else out[0]


# --------------------------------------------------------------------------- #
# Shipped data and the demo                                                    #
# --------------------------------------------------------------------------- #

#: Units of the Computer Language Benchmarks Game n-body problem.
SOLAR_MASS = 4 * math.pi * math.pi
DAYS_PER_YEAR = 365.24


def jovian_system(dtype: Any = np.float64) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """The Sun and the four giant planets of the Benchmarks Game n-body problem.

    Returns ``(names, pos, vel, mass)`` as NumPy arrays in its units (AU, years, masses
    with ``G = 1``: a solar mass is ``4 pi^2``), with the Sun's velocity set so that the
    total momentum is zero, exactly as the benchmark's ``offset_momentum`` does.

    >>> names, pos, vel, mass = jovian_system()
    >>> names[0], pos.shape
    ('Sun', (5, 3))
    """
    names: list[str] = []
    rows: list[list[float]] = []
    with open(DATA_DIR / "jovian_planets.csv", newline="") as fh:
        for row in csv.DictReader(line for line in fh if not line.startswith("#")):
            names.append(row["name"])
            rows.append([float(row[k]) for k in ("mass_solar", "x_au", "y_au", "z_au", "vx_au_per_day", "vy_au_per_day", "vz_au_per_day")])
    data = np.array(rows, dtype=np.float64)
    mass = data[:, 0] * SOLAR_MASS
    pos = data[:, 1:4].copy()
    vel = data[:, 4:7] * DAYS_PER_YEAR
    p = np.zeros(3)
    for i in range(len(names)):  # the benchmark's order of summation
        p += vel[i] * mass[i]
    vel[0] = -p / SOLAR_MASS
    return names, pos.astype(dtype), vel.astype(dtype), mass.astype(dtype)


def _demo(say: Callable[[str], None]) -> None:
    say("== physics: the Sun and the four giant planets (tensorffi/data/jovian_planets.csv) ==")
    names, pos, vel, mass = jovian_system()
    p, v = torch.from_numpy(pos), torch.from_numpy(vel)
    m = torch.from_numpy(mass)
    say(f"Benchmarks Game n-body, symplectic Euler, dt = 0.01, 1000 steps (reference: -0.169075164 / -0.169087605)")
    say(f"energy before: {float(energy(p, v, m)):.9f}")
    p1, v1 = nbody(p, v, m, dt=0.01, steps=1000, method="symplectic_euler")
    say(f"energy after:  {float(energy(p1, v1, m)):.9f}")

    years, dt, every = 1000.0, 0.01, 100
    steps = int(years / dt)
    t0 = time.perf_counter()
    p2, v2, traj = nbody(p, v, m, dt=dt, steps=steps, method="leapfrog", record_every=every)
    ms = (time.perf_counter() - t0) * 1e3
    e0, e1 = float(energy(p, v, m)), float(energy(p2, v2, m))
    say(f"leapfrog, {years:.0f} years in {steps} steps: {ms:.0f} ms, trajectory {tuple(traj.shape)} (a frame a year), "
        f"relative energy change {abs(e1 - e0) / abs(e0):.1e}, |momentum| {float(momentum(v2, m).norm()):.1e}")
    rel = (traj - traj[:, :1]).numpy()  # heliocentric positions
    span = (traj.shape[0] - 1) * every * dt
    periods = []
    for i, name in enumerate(names[1:], start=1):
        angle = np.unwrap(np.arctan2(rel[:, i, 1], rel[:, i, 0]))
        periods.append(f"{name} {span / ((angle[-1] - angle[0]) / (2 * np.pi)):.2f}")
    say("mean orbital periods from the trajectory (years): " + ", ".join(periods))
    say("(tabulated sidereal periods: Jupiter 11.86, Saturn 29.46, Uranus 84.0, Neptune 164.8)")

    rng = np.random.default_rng(0)
    batch = 256
    pb = np.repeat(pos[None], batch, 0).astype(np.float32)
    pb[:, 1:] *= 1 + 1e-6 * rng.standard_normal((batch, 4, 1)).astype(np.float32)
    vb = np.repeat(vel[None], batch, 0).astype(np.float32)
    t0 = time.perf_counter()
    pe, ve = nbody(pb, vb, mass.astype(np.float32), dt=0.01, steps=10_000)
    ms = (time.perf_counter() - t0) * 1e3
    spread = np.linalg.norm(pe[:, 1] - pe[:, 1].mean(0), axis=-1)
    say(f"an ensemble of {batch} copies (float32, radii perturbed by 1e-6) advanced 100 years in one call: {ms:.0f} ms; "
        f"spread of Jupiter's position {spread.std():.1e} AU")


# --------------------------------------------------------------------------- #
# PyTorch operators: torch.ops.tensorffi.nbody, nbody_, energy, momentum        #
# --------------------------------------------------------------------------- #
#
# The kernels above are also PyTorch operators (see tensorffi.ops), so that
# torch.compile(fullgraph=True), torch.library.opcheck, no_grad and inference_mode
# treat them as built-in operators:
#
#   tensorffi::nbody(Tensor pos, Tensor vel, Tensor mass, *, float dt, int steps=1,
#       float G=1.0, float softening=0.0, str method="leapfrog", int record_every=0,
#       int? threads=None) -> (Tensor pos, Tensor vel, Tensor trajectory)
#   tensorffi::nbody_(Tensor(a!) pos, Tensor(b!) vel, Tensor mass, *, <same>) -> Tensor trajectory
#   tensorffi::energy(Tensor pos, Tensor vel, Tensor mass, float G=1.0,
#       float softening=0.0, *, int? threads=None) -> Tensor
#   tensorffi::momentum(Tensor vel, Tensor mass) -> Tensor
#
# Shapes as in the functions above ((N, 3) or (B, N, 3), mass (N,) or (B, N)).
# record_every=0 means no recording: the trajectory is then empty, with 0 frames
# ((B, 0, N, 3) or (0, N, 3)); otherwise it has steps // record_every frames. The
# shape rules compute all of this from shapes and scalars only (never data_ptr()).
#
# Progress: an operator has no progress argument (a Python callable cannot be an
# operator argument nor live in a compiled graph), so no progress is reported. Ctrl-C
# still stops a long run: the kernel's callback checks only for a pending
# KeyboardInterrupt (every 0.1 s, as without progress=). ``threads=None`` is resolved
# when the operator runs (tensorffi.get_num_threads()), not when it is traced.
#
# Autograd: there is no backward for these kernels. With inputs that require grad
# the out-of-place operators run and record history, and backward() through them
# raises "the derivative for tensorffi::nbody is not implemented", as for any
# operator without a derivative. nbody_ refuses tensors that require grad while grad
# mode is on (autograd cannot see C's write); under torch.no_grad() it writes them.
#
# The public functions route torch tensors through these operators (NumPy arrays,
# and torch calls with progress=, call C directly), so torch.compile of code that
# calls tensorffi.physics.nbody/nbody_/energy/momentum traces without graph breaks.


_compiling = torch.compiler.is_compiling


def _all_tensors(a: Any, b: Any, c: Any) -> bool:
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and isinstance(c, torch.Tensor)


def _run_op(
    fname: str, pos: Any, vel: Any, mass: Any, dt: Any, steps: Any, G: Any, softening: Any, method: Any,
    record_every: Any, threads: Any, copy: bool,
) -> tuple[Any, ...]:
    """The public nbody/nbody_ on tensors without progress: through the operator.
    Scalars are checked here first, so that errors are those of the public function
    (the dispatcher would reject dt="0.1" with its own message, and take steps=True)."""
    if _compiling():
        # Under torch.compile scalars may be symbolic; the operator's shape rule checks them.
        rec = 0 if record_every is None else record_every
        kw = dict(dt=dt, steps=steps, G=G, softening=softening, method=method, record_every=rec, threads=threads)
    else:
        step, nsteps, g, eps, _, rec = _check_integration(fname, dt, steps, G, softening, method, record_every)
        if threads is not None:
            resolve_threads(threads)
        kw = dict(dt=step, steps=nsteps, G=g, softening=eps, method=method, record_every=rec, threads=threads)
    if copy:
        pos, vel, traj = _nbody_op(pos, vel, mass, **kw)
    else:
        traj = _nbody_inplace_op(pos, vel, mass, **kw)
    return (pos, vel) if rec == 0 else (pos, vel, traj)


def _op_checks(
    fname: str, pos: Any, vel: Any, mass: Any, dt: Any, steps: Any, G: Any, softening: Any, method: Any,
    record_every: Any, threads: Any,
) -> tuple[str, bool, int, int, tuple[float, int, float, float, int, int], int]:
    """Checks shared by the operators' kernels and shape rules (shapes and dtypes only)."""
    _, dtype = _check_arrays(fname, {"pos": pos, "vel": vel, "mass": mass})
    batched, b, n = _check_shapes(fname, pos, vel, mass)
    rec = None if isinstance(record_every, int) and not isinstance(record_every, bool) and record_every == 0 else record_every
    scalars = _check_integration(fname, dt, steps, G, softening, method, rec)
    nthreads = resolve_threads(threads)
    return dtype, batched, b, n, scalars, nthreads


def _nbody_kernel(
    fname: str, pos: Any, vel: Any, mass: Any, dt: Any, steps: Any, G: Any, softening: Any, method: Any,
    record_every: Any, threads: Any, copy: bool,
) -> Any:
    dtype, batched, b, n, scalars, nthreads = _op_checks(
        fname, pos, vel, mass, dt, steps, G, softening, method, record_every, threads
    )
    step, nsteps, g, eps, code, rec = scalars
    if copy:
        pos = pos.detach().clone(memory_format=torch.contiguous_format)
        vel = vel.detach().clone(memory_format=torch.contiguous_format)
    else:
        # The grad-mode check is the operator's (tensorffi.ops.define); under no_grad a
        # tensor that requires grad may be written, as by built-in in-place operators.
        # detach() shares the version counter, which the bridge bumps.
        pos, vel = pos.detach(), vel.detach()
    pos3, vel3 = (pos, vel) if batched else (pos[None], vel[None])
    mass2 = _batched_mass(mass if batched else mass[None], b, n)
    params = _params(step, g, eps, nsteps, rec, code)
    frames = nsteps // rec if rec else 0
    with CallbackScope(None) as scope:  # no progress: only Ctrl-C checks
        traj = scope.call(
            _nbody_fn[dtype], pos3, vel3, mass2, params, nthreads, scope.fn, scope.handle, frames=frames
        )
    if not batched:
        traj = traj[0]
    return (pos, vel, traj) if copy else traj


def _nbody_shape(
    fname: str, pos: Any, vel: Any, mass: Any, dt: Any, steps: Any, G: Any, softening: Any, method: Any,
    record_every: Any, threads: Any, copy: bool,
) -> Any:
    _, batched, b, n, scalars, _ = _op_checks(fname, pos, vel, mass, dt, steps, G, softening, method, record_every, threads)
    nsteps, rec = scalars[1], scalars[5]
    frames = nsteps // rec if rec else 0
    traj = pos.new_empty((b, frames, n, 3) if batched else (frames, n, 3))
    if copy:
        return pos.new_empty(pos.shape), vel.new_empty(vel.shape), traj
    return traj


def _energy_checks(pos: Any, vel: Any, mass: Any, G: Any, softening: Any, threads: Any) -> tuple[Any, ...]:
    _, dtype = _check_arrays("energy", {"pos": pos, "vel": vel, "mass": mass})
    batched, b, n = _check_shapes("energy", pos, vel, mass)
    g, eps = _check_gravity("energy", G, softening)
    return dtype, batched, b, n, g, eps, resolve_threads(threads)


def _energy_kernel(pos: Any, vel: Any, mass: Any, G: float = 1.0, softening: float = 0.0, *, threads: Any = None) -> Any:
    dtype, batched, b, n, g, eps, nthreads = _energy_checks(pos, vel, mass, G, softening, threads)
    pos3, vel3 = (pos, vel) if batched else (pos[None], vel[None])
    mass2 = _batched_mass(mass if batched else mass[None], b, n)
    out = _energy_fn[dtype](pos3, vel3, mass2, g, eps, nthreads)
    return out if batched else out[0]


def _energy_shape(pos: Any, vel: Any, mass: Any, G: float = 1.0, softening: float = 0.0, *, threads: Any = None) -> Any:
    _, batched, b, _, _, _, _ = _energy_checks(pos, vel, mass, G, softening, threads)
    return pos.new_empty((b,) if batched else ())


def _momentum_kernel(vel: Any, mass: Any) -> Any:
    _, dtype = _check_arrays("momentum", {"vel": vel, "mass": mass})
    batched, b, n = _check_shapes("momentum", vel, None, mass, pos_name="vel")
    vel3 = vel if batched else vel[None]
    out = _momentum_fn[dtype](vel3, _batched_mass(mass if batched else mass[None], b, n))
    return out if batched else out[0]


def _momentum_shape(vel: Any, mass: Any) -> Any:
    _check_arrays("momentum", {"vel": vel, "mass": mass})
    batched, b, _ = _check_shapes("momentum", vel, None, mass, pos_name="vel")
    return vel.new_empty((b, 3) if batched else (3,))


def _register_ops() -> tuple[Any, ...]:
    from . import ops

    scalars = (
        '*, float dt, int steps=1, float G=1.0, float softening=0.0, str method="leapfrog", '
        "int record_every=0, int? threads=None"
    )
    params = "pos, vel, mass, *, dt, steps=1, G=1.0, softening=0.0, method='leapfrog', record_every=0, threads=None"
    call = "pos, vel, mass, dt, steps, G, softening, method, record_every, threads"

    def make(fname: str, fn: Callable[..., Any], copy: bool) -> Callable[..., Any]:
        ns: dict[str, Any] = {"_fn": fn}
        exec(f"def _f({params}):\n    return _fn({fname!r}, {call}, {copy})\n", ns)
        return ns["_f"]

    nbody_op = ops.define(
        f"tensorffi::nbody(Tensor pos, Tensor vel, Tensor mass, {scalars}) -> (Tensor, Tensor, Tensor)",
        make("nbody", _nbody_kernel, True),
        fake=make("nbody", _nbody_shape, True),
    )
    nbody_inplace_op = ops.define(
        f"tensorffi::nbody_(Tensor(a!) pos, Tensor(b!) vel, Tensor mass, {scalars}) -> Tensor",
        make("nbody_", _nbody_kernel, False),
        fake=make("nbody_", _nbody_shape, False),
    )
    energy_op = ops.define(
        "tensorffi::energy(Tensor pos, Tensor vel, Tensor mass, float G=1.0, float softening=0.0, *, "
        "int? threads=None) -> Tensor",
        _energy_kernel,
        fake=_energy_shape,
    )
    momentum_op = ops.define("tensorffi::momentum(Tensor vel, Tensor mass) -> Tensor", _momentum_kernel, fake=_momentum_shape)
    return nbody_op.overload, nbody_inplace_op.overload, energy_op.overload, momentum_op.overload


_nbody_op, _nbody_inplace_op, _energy_op, _momentum_op = _register_ops()
