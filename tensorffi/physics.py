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
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, NamedTuple, Union

import numpy as np
import torch

from ._callbacks import CallbackScope
from ._kernels import check_int, check_real, constants, describe, eager_plain, kind_of, variants
from ._lib import struct
from ._threads import resolve_threads
from .errors import ArgumentTypeError, DTypeError, ShapeError, TensorFFIError

__all__ = ["nbody", "nbody_", "energy", "momentum", "jovian_system", "METHODS", "SOLAR_MASS", "DAYS_PER_YEAR"]

Array = Union[torch.Tensor, np.ndarray]

#: Integration methods and their codes in ``tf_physics_params.method`` (TF_PHYSICS_*).
METHODS = constants("TF_PHYSICS_")

_NBODY = "pos: inout [b, n, 3]; vel: inout [b, n, 3]; mass: [b, n]; traj: out [b, frames, n, 3]"
_ENERGY = "pos: [b, n, 3]; vel: [b, n, 3]; mass: [b, n]; out: out [b]"
_MOMENTUM = "vel: [b, n, 3]; mass: [b, n]; out: out [b, 3]"

_nbody_c = variants("tf_physics_nbody", _NBODY)
_energy_c = variants("tf_physics_energy", _ENERGY)
_momentum_c = variants("tf_physics_momentum", _MOMENTUM)
# the same C for one unbatched system (b = 1): no views to add and remove a batch axis
_energy1_c = variants("tf_physics_energy", "pos: [n, 3]; vel: [n, 3]; mass: [n]; out: out []; b = 1")
_momentum1_c = variants("tf_physics_momentum", "vel: [n, 3]; mass: [n]; out: out [3]; b = 1")
#: torch dtypes the kernels take, by name (the common case's check in _check_arrays)
_TORCH_DTYPES = {getattr(torch, name): name for name in _nbody_c if isinstance(getattr(torch, name, None), torch.dtype)}

#: torch and NumPy dtypes the kernels take -> their names
_DTYPE_NAMES: dict[Any, str] = {**_TORCH_DTYPES, **{np.dtype(name): name for name in _nbody_c}}

DATA_DIR = Path(__file__).resolve().parent / "data"


# --------------------------------------------------------------------------- #
# Argument checks                                                              #
# --------------------------------------------------------------------------- #


def _dtype_name(x: Array) -> str:
    return str(x.dtype).removeprefix("torch.")


def _check_arrays(fname: str, arrays: dict[str, Any]) -> tuple[str, str]:
    """Same kind and a float dtype for all; returns (kind, dtype name)."""
    values = list(arrays.values())
    first = values[0]
    dt = getattr(first, "dtype", None)
    if type(first) is torch.Tensor and dt in _TORCH_DTYPES:  # the common case, in one pass
        if all(type(x) is torch.Tensor and x.dtype is dt for x in values):
            return "torch", _TORCH_DTYPES[dt]
    first_name = next(iter(arrays))
    kind = kind_of(first)
    for name, x in arrays.items():
        k = kind_of(x)
        if k is None:
            raise ArgumentTypeError(f"{fname}(): {name} must be a torch tensor or a NumPy array, got {describe(x)}")
        if k != kind:
            raise ArgumentTypeError(
                f"{fname}(): {name} is a {'torch tensor' if k == 'torch' else 'NumPy array'} but {first_name} is "
                f"a {'torch tensor' if kind == 'torch' else 'NumPy array'}; pass the same kind for all"
            )
    dtype = _dtype_name(first)
    if dtype not in _nbody_c:
        raise DTypeError(f"{fname}(): {first_name} must be {' or '.join(_nbody_c)}, got {dtype}")
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


@lru_cache(maxsize=256, typed=True)
def _gravity(fname: str, G: Any, softening: Any) -> tuple[float, float]:
    """(G, softening) checked; cached, so a public call and the operator it makes
    validate once."""
    g = check_real(fname, "G", G)
    eps = check_real(fname, "softening", softening)
    if eps < 0:
        raise ValueError(f"{fname}(): softening must be finite and >= 0, got {eps}")
    return g, eps


class _Run(NamedTuple):
    """The validated integration parameters of one nbody call."""

    params: Any  # the tf_physics_params struct (C only reads it, so equal ones are shared)
    steps: int
    record_every: int  # 0: no trajectory
    frames: int


@lru_cache(maxsize=256, typed=True)
def _integration(fname: str, dt: Any, steps: Any, G: Any, softening: Any, method: Any, record_every: Any) -> _Run:
    """Check nbody's scalars once (cached: the public function and the operator it
    calls share the work) and build the parameter struct."""
    step = check_real(fname, "dt", dt)
    if step == 0.0:
        raise ValueError(f"{fname}(): dt must be finite and non-zero, got {step}")
    nsteps = check_int(fname, "steps", steps, minimum=0)
    g, eps = _gravity(fname, G, softening)
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"{fname}(): unknown method {method!r}; expected one of {', '.join(map(repr, METHODS))}")
    rec = 0 if record_every is None else check_int(fname, "record_every", record_every)
    if record_every is not None and rec < 1:
        raise ValueError(f"{fname}(): record_every must be a positive integer or None, got {rec}")
    params = struct("tf_physics_params", dt=step, G=g, softening=eps, steps=nsteps, record_every=rec,
                    method=METHODS[method])
    return _Run(params, nsteps, rec, nsteps // rec if rec else 0)


def _hashable(v: Any) -> Any:
    """Scalars as cache keys (0-d tensors and arrays by value)."""
    if isinstance(v, (torch.Tensor, np.ndarray)):
        if v.ndim == 0 and not (isinstance(v, torch.Tensor) and v.requires_grad):
            return v.item()
        raise ArgumentTypeError(f"expected a number, got an array of shape {tuple(v.shape)}")
    return v


# --------------------------------------------------------------------------- #
# Integration                                                                  #
# --------------------------------------------------------------------------- #


def _integrate(
    fname: str, pos: Array, vel: Array, mass: Array, run: _Run, nthreads: int, progress: Any, copy: bool
) -> tuple[Any, Any, Any]:
    """The one implementation of nbody/nbody_ (arrays or tensors): ``(pos, vel, traj)``,
    ``traj`` with 0 frames when not recording."""
    kind, dtype = _check_arrays(fname, {"pos": pos, "vel": vel, "mass": mass})
    batched, b, n = _check_shapes(fname, pos, vel, mass)
    if copy:
        if kind == "torch":
            assert isinstance(pos, torch.Tensor) and isinstance(vel, torch.Tensor)
            pos = pos.detach().clone(memory_format=torch.contiguous_format)
            vel = vel.detach().clone(memory_format=torch.contiguous_format)
        else:
            pos = np.array(pos, order="C", copy=True)
            vel = np.array(vel, order="C", copy=True)
    elif kind == "torch":
        # The grad-mode check is the operator's (tensorffi.ops.define); under no_grad a
        # tensor that requires grad may be written, as by built-in in-place operators.
        # detach() shares the version counter, which the bridge bumps.
        assert isinstance(pos, torch.Tensor) and isinstance(vel, torch.Tensor)
        pos, vel = pos.detach(), vel.detach()
    pos3, vel3 = (pos, vel) if batched else (pos[None], vel[None])
    mass2 = _batched_mass(mass if batched else mass[None], b, n)
    with CallbackScope(progress, desc=fname, unit="step") as scope:
        traj = scope.call(
            _nbody_c[dtype], pos3, vel3, mass2, run.params, nthreads, scope.fn, scope.handle, frames=run.frames
        )
    return pos, vel, (traj if batched else traj[0])


def _nbody(
    fname: str, pos: Array, vel: Array, mass: Array, dt: Any, steps: Any, G: Any, softening: Any, method: Any,
    record_every: Any, progress: Any, threads: int | None, copy: bool,
) -> tuple[Any, ...]:
    """nbody and nbody_: scalars checked once; torch tensors (without progress) go through
    the operator, so torch.compile traces the call; everything else calls C directly."""
    if _compiling():
        # Under torch.compile scalars may be symbolic; the operator's shape rule checks them.
        rec = 0 if record_every is None else record_every
    else:
        run = _integration(fname, _hashable(dt), _hashable(steps), _hashable(G), _hashable(softening), method,
                           _hashable(record_every))
        rec = run.record_every
        nthreads = resolve_threads(threads)
        # tensors go through the operator unless the operator would only run this same
        # implementation (plain eager tensors: see eager_plain)
        if not (_all_tensors(pos, vel, mass) and progress in (None, False)) or eager_plain(pos, vel, mass):
            p, v, traj = _integrate(fname, pos, vel, mass, run, nthreads, progress, copy)
            if not copy:
                p, v = pos, vel  # the caller's own objects (written in place), not detached views
            return (p, v) if rec == 0 else (p, v, traj)
        dt, steps, G, softening = float(_hashable(dt)), run.steps, float(_hashable(G)), float(_hashable(softening))
    kw = dict(dt=dt, steps=steps, G=G, softening=softening, method=method, record_every=rec, threads=threads)
    if copy:
        pos, vel, traj = _nbody_op(pos, vel, mass, **kw)
    else:
        traj = _nbody_inplace_op(pos, vel, mass, **kw)
    return (pos, vel) if rec == 0 else (pos, vel, traj)


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
    return _nbody("nbody", pos, vel, mass, dt, steps, G, softening, method, record_every, progress, threads, True)


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
    return _nbody("nbody_", pos, vel, mass, dt, steps, G, softening, method, record_every, progress, threads, False)


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
    if not _compiling():
        G, softening = _gravity("energy", _hashable(G), _hashable(softening))
    if _all_tensors(pos, vel, mass) and not eager_plain(pos, vel, mass):
        return _energy_op(pos, vel, mass, G, softening, threads=threads)
    return _energy(pos, vel, mass, G, softening, resolve_threads(threads))


def _energy(pos: Array, vel: Array, mass: Array, g: float, eps: float, nthreads: int) -> Any:
    """The one implementation of energy (arrays or tensors; scalars already checked)."""
    kind = type(pos)
    if kind is type(vel) and kind is type(mass) and (kind is torch.Tensor or kind is np.ndarray):
        # one system of one kind: the bridge checks dtypes and shapes as the contract
        # states them; what it refuses, the checks below explain in physics' terms
        fn = _energy1_c.get(_DTYPE_NAMES.get(pos.dtype))  # type: ignore[arg-type]
        if fn is not None:
            try:
                out = fn(pos, vel, mass, g, eps, nthreads)
            except TensorFFIError:
                pass
            else:
                return out if kind is torch.Tensor else out[()]
    _, dtype = _check_arrays("energy", {"pos": pos, "vel": vel, "mass": mass})
    batched, b, n = _check_shapes("energy", pos, vel, mass)
    if not batched:
        out = _energy1_c[dtype](pos, vel, mass, g, eps, nthreads)
        return out if isinstance(out, torch.Tensor) else out[()]  # a NumPy scalar, as out[0] gives
    return _energy_c[dtype](pos, vel, _batched_mass(mass, b, n), g, eps, nthreads)


def momentum(vel: Array, mass: Array) -> Any:
    """Total momentum ``sum_i m_i v_i`` of each system: ``(B, 3)``, or ``(3,)`` for unbatched input.

    >>> import torch, tensorffi.physics as ph
    >>> ph.momentum(torch.tensor([[1.0, 0, 0], [-0.5, 0, 0]]), torch.tensor([1.0, 2.0])).tolist()
    [0.0, 0.0, 0.0]
    """
    if _all_tensors(vel, mass, mass) and not eager_plain(vel, mass):
        return _momentum_op(vel, mass)
    return _momentum(vel, mass)


def _momentum(vel: Array, mass: Array) -> Any:
    """The one implementation of momentum (arrays or tensors)."""
    _, dtype = _check_arrays("momentum", {"vel": vel, "mass": mass})
    batched, b, n = _check_shapes("momentum", vel, None, mass, pos_name="vel")
    if not batched:
        return _momentum1_c[dtype](vel, mass)
    return _momentum_c[dtype](vel, _batched_mass(mass, b, n))


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


def _op_nbody(
    fname: str, pos: Any, vel: Any, mass: Any, dt: Any, steps: Any, G: Any, softening: Any, method: Any,
    record_every: Any, threads: Any, copy: bool,
) -> Any:
    """Operator body of nbody/nbody_ (record_every=0: no trajectory, 0 frames)."""
    run = _integration(fname, dt, steps, G, softening, method, None if record_every == 0 else record_every)
    p, v, traj = _integrate(fname, pos, vel, mass, run, resolve_threads(threads), None, copy)
    return (p, v, traj) if copy else traj


def _shape_nbody(
    fname: str, pos: Any, vel: Any, mass: Any, dt: Any, steps: Any, G: Any, softening: Any, method: Any,
    record_every: Any, threads: Any, copy: bool,
) -> Any:
    """Shape rule of nbody/nbody_: the same checks, on shapes and scalars only."""
    _check_arrays(fname, {"pos": pos, "vel": vel, "mass": mass})
    batched, b, n = _check_shapes(fname, pos, vel, mass)
    run = _integration.__wrapped__(fname, dt, steps, G, softening, method, None if record_every == 0 else record_every)
    if threads is not None:
        resolve_threads(threads)
    traj = pos.new_empty((b, run.frames, n, 3) if batched else (run.frames, n, 3))
    return (pos.new_empty(pos.shape), vel.new_empty(vel.shape), traj) if copy else traj


def _op_energy(pos: Any, vel: Any, mass: Any, G: float = 1.0, softening: float = 0.0, *, threads: Any = None) -> Any:
    g, eps = _gravity("energy", G, softening)
    return _energy(pos, vel, mass, g, eps, resolve_threads(threads))


def _shape_energy(pos: Any, vel: Any, mass: Any, G: float = 1.0, softening: float = 0.0, *, threads: Any = None) -> Any:
    _check_arrays("energy", {"pos": pos, "vel": vel, "mass": mass})
    batched, b, _ = _check_shapes("energy", pos, vel, mass)
    _gravity.__wrapped__("energy", G, softening)
    if threads is not None:
        resolve_threads(threads)
    return pos.new_empty((b,) if batched else ())


def _shape_momentum(vel: Any, mass: Any) -> Any:
    _check_arrays("momentum", {"vel": vel, "mass": mass})
    batched, b, _ = _check_shapes("momentum", vel, None, mass, pos_name="vel")
    return vel.new_empty((b, 3) if batched else (3,))


def _register_ops() -> tuple[Any, ...]:
    from . import _codegen, ops

    scalars = (
        '*, float dt, int steps=1, float G=1.0, float softening=0.0, str method="leapfrog", '
        "int record_every=0, int? threads=None"
    )
    params = "pos, vel, mass, *, dt, steps=1, G=1.0, softening=0.0, method='leapfrog', record_every=0, threads=None"
    call = "pos, vel, mass, dt, steps, G, softening, method, record_every, threads"

    def make(fname: str, fn: Callable[..., Any], copy: bool) -> Callable[..., Any]:
        src = f"def _f({params}):\n    return _fn({fname!r}, {call}, {copy})\n"
        return _codegen.build(src, {"_fn": fn}, function="_f", label=f"physics: {fname}")

    nbody_op = ops.define(
        f"tensorffi::nbody(Tensor pos, Tensor vel, Tensor mass, {scalars}) -> (Tensor, Tensor, Tensor)",
        make("nbody", _op_nbody, True),
        fake=make("nbody", _shape_nbody, True),
    )
    nbody_inplace_op = ops.define(
        f"tensorffi::nbody_(Tensor(a!) pos, Tensor(b!) vel, Tensor mass, {scalars}) -> Tensor",
        make("nbody_", _op_nbody, False),
        fake=make("nbody_", _shape_nbody, False),
    )
    energy_op = ops.define(
        "tensorffi::energy(Tensor pos, Tensor vel, Tensor mass, float G=1.0, float softening=0.0, *, "
        "int? threads=None) -> Tensor",
        _op_energy,
        fake=_shape_energy,
    )
    momentum_op = ops.define("tensorffi::momentum(Tensor vel, Tensor mass) -> Tensor", _momentum, fake=_shape_momentum)
    return nbody_op.overload, nbody_inplace_op.overload, energy_op.overload, momentum_op.overload


_nbody_op, _nbody_inplace_op, _energy_op, _momentum_op = _register_ops()


def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: tab completion does not offer imports (np, torch, ...)
