# SPDX-License-Identifier: MIT
"""``tensorffi demo``: every kernel family on data shipped with the package, one step each.

Each step is ``step(say)`` (``say`` prints a line) and imports what it shows when it
runs; :data:`STEPS` lists them in demo order.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

__all__ = ["STEPS", "seed", "signal", "io", "physics", "ops"]

SEED_C = """
void process_data(float *data, int size) {
    for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f;
}
"""


def seed(say: Callable[[str], None]) -> None:
    import torch

    from .byo import compile
    from .errors import DTypeError

    say("== bring your own C: void process_data(float *data, int size) ==")
    # built in a folder of its own, removed afterwards: the demo never writes into the
    # user's cache of compiled modules
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "mylib.c"
        src.write_text(SEED_C)
        lib = compile("demo_seed", "void process_data(float *data, int size);", sources=[src],
                      cache=Path(tmp) / "cache")
        _seed_calls(say, torch, lib, DTypeError)


def _seed_calls(say: Callable[[str], None], torch: Any, lib: Any, DTypeError: type[Exception]) -> None:
    t = torch.arange(5, dtype=torch.float32)
    say(f"before: {t.tolist()}")
    lib.process_data(t, t.numel())
    say(f"after lib.process_data(t, t.numel()): {t.tolist()}   (2x+1, in place, zero-copy)")
    bad = torch.arange(5, dtype=torch.float64)
    try:
        lib.process_data(bad, bad.numel())
    except DTypeError as exc:
        say(f"a float64 tensor is refused before C runs: DTypeError: {exc}")
    else:  # pragma: no cover
        raise AssertionError("the bridge accepted a float64 tensor for float *")
    say(f"...and it is untouched: {bad.tolist()}")


def signal(say: Callable[[str], None]) -> None:
    """Clean a noisy synthetic ECG shipped with the package.

    ``data/signal_ecg.npz``: 10 s at 500 Hz of a synthetic ECG (Gaussian P, QRS
    and T waves, 72 bpm with 5 % jitter) plus 0.3 Hz baseline wander, 50 Hz hum
    and white noise (``x``, float32); ``sos`` = ``scipy.signal.butter(4, [0.5, 40],
    'bandpass', fs=500, output='sos')``; ``clean`` = the noiseless ECG through
    ``sosfiltfilt`` with that filter (the best any band-pass can do).
    """
    import math
    
    import numpy as np
    import torch
    
    from .signal import simd_level, sosfilt, sosfilt_zi, sosfiltfilt, uses_float32_arithmetic
    
    import time
    from importlib import resources

    with resources.files("tensorffi").joinpath("data/signal_ecg.npz").open("rb") as fh:
        data = np.load(fh)
        x, clean, sos, fs = data["x"], data["clean"], data["sos"], float(data["fs"])
    say(f"== signal: IIR filtering of a noisy ECG ({x.size} float32 samples at {fs:g} Hz) ==")
    say(f"filter: Butterworth band-pass 0.5-40 Hz, {sos.shape[0]} second-order sections; its poles are "
        f"near the unit circle, so float32 data is filtered in float64 arithmetic: "
        f"{not uses_float32_arithmetic(sos)}; SIMD level: {simd_level()}")

    def snr(y: np.ndarray) -> float:
        return 10 * math.log10(float(np.sum(clean.astype(np.float64) ** 2) / np.sum((y - clean) ** 2.0)))

    t0 = time.perf_counter()
    y = sosfiltfilt(sos, x, dtype=np.float32)
    dt = time.perf_counter() - t0
    say(f"sosfiltfilt: SNR {snr(x):.1f} dB -> {snr(y):.1f} dB (baseline wander, 50 Hz hum, out-of-band noise "
        f"removed, no phase shift), {y.dtype} (dtype=float32 with float64 sos), {dt * 1e3:.2f} ms")
    zi = sosfilt_zi(sos) * x[0]
    whole, _ = sosfilt(sos, x, zi=zi)
    parts, z = [], zi
    for chunk in np.array_split(x, 7):
        part, z = sosfilt(sos, chunk, zi=z)
        parts.append(part)
    say(f"streaming: sosfilt in 7 chunks (zf -> zi) vs one call: max |difference| = "
        f"{np.max(np.abs(np.concatenate(parts) - whole)):.1e}")
    batch = torch.from_numpy(np.tile(x, (64, 4)))
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        sosfilt(sos, batch, dtype=torch.float32)
        times.append(time.perf_counter() - t0)
    say(f"64 channels as one torch tensor {tuple(batch.shape)}: {batch.numel() / min(times) / 1e6:.0f} Msamples/s")
    b = torch.from_numpy(sos.copy()).requires_grad_()
    loss = ((sosfiltfilt(b, torch.from_numpy(x)) - torch.from_numpy(clean)) ** 2).mean()
    loss.backward()
    say(f"autograd through sosfiltfilt (C adjoint): loss {loss.item():.2e}, |d loss / d sos| = {b.grad.norm():.3g}")  # type: ignore[union-attr]  # set by backward()


def io(say: Callable[[str], None]) -> None:
    import numpy as np
    import torch
    
    from .io import ParseError, read_csv
    
    from importlib import resources

    say("== numeric CSV to tensors: tensorffi.io.read_csv ==")
    path = resources.files("tensorffi") / "data" / "sensors.csv"
    with resources.as_file(path) as p:
        table, names = read_csv(p, comment="#", return_names=True)
    say(f"sensors.csv -> {tuple(table.shape)} {table.dtype} tensor, columns {names}")
    finite = ~table.isnan()
    say(f"missing values (empty fields) -> NaN: {int((~finite).sum())}")
    means = [float(table[:, j][finite[:, j]].mean()) for j in range(table.shape[1])]
    say("column means: " + ", ".join(f"{nm}={m:.4g}" for nm, m in zip(names, means)))
    texts = ["0.1", "16777217", "1e-45", "3.4028236e38", "1.00000005960464477550"]
    x = read_csv(("\n".join(texts) + "\n").encode(), dtype=torch.float32).flatten().tolist()
    say("float32, rounded once straight from the text (float32(float64(text)) rounds twice):")
    with np.errstate(over="ignore"):
        for text, value in zip(texts, x):
            twice = float(np.float32(float(text)))
            note = "" if twice == value else f"   (through float64: {twice!r})"
            say(f"  {text:>24} -> {value!r}{note}")
    try:
        read_csv(b"t,v\n0.0,1.5\n0.1,2.5\n0.2,2,5\n")
    except ParseError as exc:
        say(f"a ragged row is an error with its position: ParseError: {exc}")
    try:
        read_csv(b"t,v\n0.0,1.5\n0.1,2..5\n")
    except ParseError as exc:
        say(f"so is a malformed number (line {exc.line}, column {exc.column}, offset {exc.offset}, text {exc.text!r})")


def physics(say: Callable[[str], None]) -> None:
    import time
    
    import numpy as np
    import torch
    
    from .physics import energy, jovian_system, momentum, nbody
    
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


def ops(say: Callable[[str], None]) -> None:
    """tensorffi's operators: schemas, eager vs torch.compile, autograd."""
    import torch
    
    from .ops import _operators
    
    from importlib import resources

    say("== PyTorch operators: torch.ops.tensorffi.* ==")
    for qualname in ("tensorffi::scale_", "tensorffi::axpy_", "tensorffi::iota", "tensorffi::scaled"):
        say(f"  {_operators[qualname].schema}")
    text = resources.files("tensorffi").joinpath("data", "ops_demo.txt").read_text()  # type: ignore[call-arg]  # a pathlib.Path here (several parts)
    x = torch.tensor([float(v) for v in text.split("\n") if v and not v.startswith("#")])
    say(f"data: {x.numel()} samples of a damped sine (tensorffi/data/ops_demo.txt)")

    def model(t: torch.Tensor) -> torch.Tensor:
        y: torch.Tensor = torch.ops.tensorffi.scaled(t, 0.5)
        torch.ops.tensorffi.scale_(t, 2.0)  # in place, marked (a!) in the schema
        return y.square().sum() + t.sum()

    eager = model(x.clone())
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")(x.clone())
    say(f"eager {eager.item():.6f} == torch.compile(fullgraph=True) {compiled.item():.6f}: no graph break")
    v = x.clone().requires_grad_()
    (grad,) = torch.autograd.grad(torch.ops.tensorffi.scaled(v, 0.5).square().sum(), v)
    err = (grad - 0.5 * x).abs().max().item()
    say(f"autograd through scaled: d/dx sum((x/2)^2) = x/2, max error {err:.1e}")
    with torch.inference_mode():
        out = torch.ops.tensorffi.scaled(x, 3.0)
    say(f"inference_mode: an inference tensor, requires_grad={out.requires_grad}")


#: The demo's steps, in order.
STEPS: list[Callable[[Callable[[str], None]], None]] = [seed, signal, io, physics, ops]
