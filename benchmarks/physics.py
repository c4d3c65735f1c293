# SPDX-License-Identifier: MIT
"""Benchmark: tensorffi.physics.nbody against vectorised torch steps, float32.

Peers, measured in the same run and interleaved round by round:

* torch eager, vectorised over all pairs;
* the same step compiled with ``torch.compile`` (inductor, ``dynamic=False``).

Each peer is written two ways -- a broadcast ``(N, N, 3)`` difference tensor and
per-coordinate ``(N, N)`` differences -- and the faster of the two (by median) is the
peer, so the comparison is with the best vectorised torch we could write. A step is
the same kick-drift-kick leapfrog step in all of them (two force evaluations, since a
single step carries no acceleration in), softening 0.01.

Accuracy is the largest error of the velocity change of one step from rest against a
float64 NumPy reference (same float32 inputs), relative to the largest velocity change.

Three more measurements, in a second table:

* *alternating with torch*: each of our steps follows a ``torch.compile`` step, as in a
  training loop that calls us between torch ops (torch's OpenMP threads are then still
  spinning for more work); both are timed in that alternation;
* *first call in a fresh process*: a new interpreter imports, builds the inputs, and
  times its first and second call (ours, and the eager peer's step);
* *energy*: ``tensorffi.physics.energy`` against the same sum written in eager torch.

Run: ``python benchmarks/physics.py`` (``--quick`` for a short run). Prints Markdown
tables; ``--results`` appends them with machine facts to benchmarks/RESULTS.md.
``TENSORFFI_SIMD=avx2`` caps our kernels at AVX2 (the peers are not affected).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tensorffi  # noqa: E402
from tensorffi import physics as ph  # noqa: E402

DT, G, EPS = 1e-3, 1.0, 0.01


# --------------------------------------------------------------------------- #
# Peers                                                                        #
# --------------------------------------------------------------------------- #


def accel_broadcast(pos: torch.Tensor, mass: torch.Tensor, G: float, eps2: float) -> torch.Tensor:
    d = pos.unsqueeze(-3) - pos.unsqueeze(-2)  # d[..., i, j, :] = r_j - r_i
    r2 = (d * d).sum(-1) + eps2
    w = mass.unsqueeze(-2) * torch.rsqrt(r2) ** 3
    return G * (d * w.unsqueeze(-1)).sum(-2)


def accel_coords(pos: torch.Tensor, mass: torch.Tensor, G: float, eps2: float) -> torch.Tensor:
    x, y, z = pos[..., 0], pos[..., 1], pos[..., 2]
    dx = x.unsqueeze(-2) - x.unsqueeze(-1)
    dy = y.unsqueeze(-2) - y.unsqueeze(-1)
    dz = z.unsqueeze(-2) - z.unsqueeze(-1)
    w = mass.unsqueeze(-2) * torch.rsqrt(dx * dx + dy * dy + dz * dz + eps2) ** 3
    return G * torch.stack([(w * dx).sum(-1), (w * dy).sum(-1), (w * dz).sum(-1)], -1)


def make_step(accel: Callable[..., torch.Tensor]) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    def step(pos: torch.Tensor, vel: torch.Tensor, mass: torch.Tensor, dt: float, G: float, eps2: float):
        vel = vel + (0.5 * dt) * accel(pos, mass, G, eps2)
        pos = pos + dt * vel
        vel = vel + (0.5 * dt) * accel(pos, mass, G, eps2)
        return pos, vel

    return step


FORMULATIONS = {"broadcast": make_step(accel_broadcast), "coords": make_step(accel_coords)}


# --------------------------------------------------------------------------- #
# Reference and accuracy                                                       #
# --------------------------------------------------------------------------- #


def ref_accel64(pos: np.ndarray, mass: np.ndarray, G: float, eps: float) -> np.ndarray:
    out = np.empty_like(pos)
    n = pos.shape[-2]
    for i0 in range(0, n, 256):
        i1 = min(i0 + 256, n)
        d = pos[..., None, :, :] - pos[..., i0:i1, None, :]
        r2 = (d * d).sum(-1) + eps * eps
        out[..., i0:i1, :] = G * (d * (mass[..., None, :] * r2**-1.5)[..., None]).sum(-2)
    return out


def ref_step64(pos, vel, mass):
    pos, vel, mass = (np.asarray(a, np.float64) for a in (pos, vel, mass))
    vel = vel + 0.5 * DT * ref_accel64(pos, mass, G, EPS)
    pos = pos + DT * vel
    vel = vel + 0.5 * DT * ref_accel64(pos, mass, G, EPS)
    return pos, vel


def dv_error(vel_out: Any, vel_in: np.ndarray, vel_ref: np.ndarray) -> float:
    got = np.asarray(vel_out, np.float64) - vel_in
    want = vel_ref - vel_in
    return float(np.abs(got - want).max() / np.abs(want).max())


# --------------------------------------------------------------------------- #
# Timing                                                                       #
# --------------------------------------------------------------------------- #


def system(b: int, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    shape = (b, n) if b > 1 else (n,)
    pos = rng.normal(size=shape + (3,)).astype(np.float32)
    vel = (0.1 * rng.normal(size=shape + (3,))).astype(np.float32)
    mass = (rng.uniform(0.5, 1.5, size=shape) / n).astype(np.float32)
    return pos, vel, mass


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_case(label: str, b: int, n: int, steps: int, reps: int, threads: int, eager_budget: float,
               method: str = "leapfrog") -> dict[str, Any]:
    pos, vel, mass = system(b, n)
    tp, tv, tm = (torch.from_numpy(a) for a in (pos, vel, mass))
    eps2 = EPS * EPS

    def ours():
        return ph.nbody(tp, tv, tm, dt=DT, steps=steps, G=G, softening=EPS, method=method, threads=threads)

    peers: dict[str, dict[str, Callable[[], Any]]] = {"compile": {}, "eager": {}}
    compile_s: dict[str, float] = {}
    for name, step in FORMULATIONS.items():
        if method != "leapfrog":
            continue
        compiled = torch.compile(step, dynamic=False)
        t0 = time.perf_counter()
        compiled(tp, tv, tm, DT, G, eps2)
        compile_s[name] = time.perf_counter() - t0

        def run_compiled(compiled=compiled):
            p, v = tp, tv
            for _ in range(steps):
                p, v = compiled(p, v, tm, DT, G, eps2)
            return p, v

        def run_eager(step=step):
            p, v = tp, tv
            for _ in range(steps):
                p, v = step(p, v, tm, DT, G, eps2)
            return p, v

        peers["compile"][name] = run_compiled
        peers["eager"][name] = run_eager

    # Many short rounds, the peer order rotated every round, so that the load of a
    # shared machine falls on all peers alike. In a round each peer makes one untimed
    # call (its threads and caches warm, as in a loop of calls) and `per_block` timed ones.
    runners: dict[str, Callable[[], Any]] = {"ours": ours}
    for kind, forms in peers.items():
        for name, fn in forms.items():
            runners[f"{kind}:{name}"] = fn
    one = {key: timed(fn) for key, fn in runners.items()}  # also a warm-up
    times: dict[str, list[float]] = {key: [] for key in runners}
    per_block = 3
    rounds = max(3, reps // per_block)
    keys = list(runners)
    spent = {key: 0.0 for key in runners}
    for r in range(rounds):
        for key in keys[r % len(keys):] + keys[: r % len(keys)]:
            if key.startswith("eager") and times[key] and spent[key] > eager_budget:
                continue
            if one[key] < 0.05:
                runners[key]()
            for _ in range(per_block if one[key] < 0.05 else 1):
                times[key].append(timed(runners[key]))
                spent[key] += times[key][-1]

    row: dict[str, Any] = {"label": label, "ours": statistics.median(times["ours"])}
    pairs = b * n * n * (steps + 1 if method == "leapfrog" else steps)
    row["gpairs"] = pairs / row["ours"] / 1e9
    accurate = steps == 1 and method == "leapfrog"
    if accurate:
        # From rest, so that the velocity change is not rounded against the velocity.
        zero = np.zeros_like(vel)
        tz = torch.from_numpy(zero)
        _, rv = ref_step64(pos, zero, mass)
        row["err_ours"] = dv_error(ph.nbody(tp, tz, tm, dt=DT, G=G, softening=EPS, threads=threads)[1], zero, rv)
    for kind, forms in peers.items():
        if not forms:
            continue
        best = min(forms, key=lambda name: statistics.median(times[f"{kind}:{name}"]))
        row[kind] = statistics.median(times[f"{kind}:{best}"])
        row[f"{kind}_form"] = best
        if accurate:
            step = torch.compile(FORMULATIONS[best], dynamic=False) if kind == "compile" else FORMULATIONS[best]
            row[f"err_{kind}"] = dv_error(step(tp, tz, tm, DT, G, EPS * EPS)[1].numpy(), zero, rv)
    row["compile_s"] = compile_s
    return row


def energy_torch(pos: torch.Tensor, vel: torch.Tensor, mass: torch.Tensor, G: float, eps: float) -> torch.Tensor:
    kinetic = 0.5 * (mass * (vel * vel).sum(-1)).sum(-1)
    d = pos.unsqueeze(-3) - pos.unsqueeze(-2)
    w = mass.unsqueeze(-1) * mass.unsqueeze(-2) / torch.sqrt((d * d).sum(-1) + eps * eps)
    return kinetic - G * torch.triu(w, 1).sum((-2, -1))


def bench_alternating(n: int, reps: int, threads: int) -> dict[str, Any]:
    """Our step and the compiled step, alternating (each timed), and each back to back."""
    pos, vel, mass = system(1, n)
    tp, tv, tm = (torch.from_numpy(a) for a in (pos, vel, mass))
    compiled = torch.compile(FORMULATIONS["coords"], dynamic=False)
    compiled(tp, tv, tm, DT, G, EPS * EPS)

    def ours():
        return ph.nbody(tp, tv, tm, dt=DT, G=G, softening=EPS, threads=threads)

    def theirs():
        return compiled(tp, tv, tm, DT, G, EPS * EPS)

    for _ in range(3):
        ours(), theirs()
    t = {"ours_alt": [], "compile_alt": [], "ours_b2b": [], "compile_b2b": []}
    for r in range(reps):
        for _ in range(3):  # alternating, as in a training loop
            t["compile_alt"].append(timed(theirs))
            t["ours_alt"].append(timed(ours))
        time.sleep(0.03)  # torch's threads stop spinning: a back-to-back block starts cold
        for key, fn in (("ours_b2b", ours), ("compile_b2b", theirs)) if r % 2 else (("compile_b2b", theirs), ("ours_b2b", ours)):
            fn()
            for _ in range(3):
                t[key].append(timed(fn))
    return {k: statistics.median(v) for k, v in t.items()}


FIRST_CALL = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np, torch
sys.path.insert(0, {root!r})
import tensorffi
from tensorffi import physics as ph
from benchmarks.physics import system, FORMULATIONS, DT, G, EPS
t_import = time.perf_counter() - t0
pos, vel, mass = (torch.from_numpy(a) for a in system(1, {n}))
out = {{"import": t_import}}
for k in range(2):
    t0 = time.perf_counter()
    if {peer!r} == "ours":
        ph.nbody(pos, vel, mass, dt=DT, G=G, softening=EPS, threads={threads})
    else:
        FORMULATIONS["coords"](pos, vel, mass, DT, G, EPS * EPS)
    out["call%d" % k] = time.perf_counter() - t0
print(json.dumps(out))
"""


def bench_first_call(n: int, threads: int, runs: int) -> dict[str, Any]:
    """First and second call in fresh processes: ours, and the eager peer's step."""
    res: dict[str, list[float]] = {}
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": str(threads)}
    for r in range(runs):
        for peer in ("ours", "eager") if r % 2 == 0 else ("eager", "ours"):
            code = FIRST_CALL.format(root=str(ROOT), n=n, peer=peer, threads=threads)
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            for k, v in got.items():
                res.setdefault(f"{peer}_{k}", []).append(v)
    return {k: statistics.median(v) for k, v in res.items()}


def bench_energy(n: int, reps: int, threads: int) -> dict[str, Any]:
    pos, vel, mass = system(1, n)
    tp, tv, tm = (torch.from_numpy(a) for a in (pos, vel, mass))
    want = float(energy_torch(tp.double(), tv.double(), tm.double(), G, EPS))
    got = float(ph.energy(tp, tv, tm, G=G, softening=EPS, threads=threads))
    assert abs(got - want) <= 1e-5 * abs(want), (got, want)
    ours = lambda: ph.energy(tp, tv, tm, G=G, softening=EPS, threads=threads)  # noqa: E731
    eager = lambda: energy_torch(tp, tv, tm, G, EPS)  # noqa: E731
    t: dict[str, list[float]] = {"ours": [], "eager": []}
    for r in range(reps):
        for key, fn in (("ours", ours), ("eager", eager)) if r % 2 else (("eager", eager), ("ours", ours)):
            fn()
            t0 = time.perf_counter()
            for _ in range(100):
                fn()
            t[key].append((time.perf_counter() - t0) / 100)
    return {k: statistics.median(v) for k, v in t.items()}


def extra_table(alt: dict[str, Any], first: dict[str, Any], energy: dict[str, Any], n_alt: int, n_first: int,
                n_energy: int, threads: int, compile_s: float | None) -> str:
    lines = [
        f"| case (float32, {threads} threads) | tensorffi | peer | peer / tensorffi |",
        "|---|---:|---:|---:|",
        f"| N = {n_alt}, one step, alternating with the torch.compile step | {fmt_ms(alt['ours_alt'])} ms | "
        f"{fmt_ms(alt['compile_alt'])} ms (torch.compile, alternating) | {alt['compile_alt'] / alt['ours_alt']:.2f}x |",
        f"| N = {n_alt}, one step, back to back (same run) | {fmt_ms(alt['ours_b2b'])} ms | "
        f"{fmt_ms(alt['compile_b2b'])} ms (torch.compile) | {alt['compile_b2b'] / alt['ours_b2b']:.2f}x |",
        f"| N = {n_first}, one step, first call in a fresh process | {fmt_ms(first['ours_call0'])} ms | "
        f"{fmt_ms(first['eager_call0'])} ms (torch eager){'' if compile_s is None else f'; torch.compile: {compile_s:.1f} s'} | "
        f"{first['eager_call0'] / first['ours_call0']:.2f}x |",
        f"| N = {n_first}, one step, second call in that process | {fmt_ms(first['ours_call1'])} ms | "
        f"{fmt_ms(first['eager_call1'])} ms (torch eager) | {first['eager_call1'] / first['ours_call1']:.2f}x |",
        f"| energy, N = {n_energy} | {energy['ours'] * 1e6:.1f} µs | {energy['eager'] * 1e6:.1f} µs (torch eager) | "
        f"{energy['eager'] / energy['ours']:.1f}x |",
    ]
    return "\n".join(lines)


def fmt_ms(t: float | None) -> str:
    return "—" if t is None else f"{t * 1e3:.3f}" if t < 0.01 else f"{t * 1e3:.2f}" if t < 1 else f"{t * 1e3:.0f}"


def table(rows: list[dict[str, Any]], threads: int) -> str:
    lines = [
        f"| case (float32, {threads} threads) | tensorffi ms | Gpair/s | torch.compile ms | torch eager ms | "
        f"× compile | × eager | Δv error tensorffi | Δv error compile | Δv error eager |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ours = r["ours"]
        comp, eager = r.get("compile"), r.get("eager")
        err = lambda k: f"{r[k]:.1e}" if k in r else "—"  # noqa: E731
        lines.append(
            f"| {r['label']} | {fmt_ms(ours)} | {r['gpairs']:.2f} | "
            f"{fmt_ms(comp)}{' (' + r['compile_form'] + ')' if comp else ''} | "
            f"{fmt_ms(eager)}{' (' + r['eager_form'] + ')' if eager else ''} | "
            f"{comp / ours:.2f}x | {eager / ours:.1f}x | {err('err_ours')} | {err('err_compile')} | {err('err_eager')} |"
            if comp else
            f"| {r['label']} | {fmt_ms(ours)} | {r['gpairs']:.2f} | — | — | — | — | {err('err_ours')} | — | — |"
        )
    return "\n".join(lines)


def ffi_string(p: Any) -> str:
    return tensorffi.core.ffi.string(p).decode()


def machine_facts() -> str:
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if ln.startswith("Model name")), "?")
    except OSError:
        model = platform.processor() or "?"
    info = tensorffi.info()
    simd = ffi_string(tensorffi.core.lib.tf_simd_name(tensorffi.core.lib.tf_physics_simd()))
    return (
        f"CPU: {model}, {os.cpu_count()} logical CPUs; physics SIMD path: {simd}; "
        f"Python {platform.python_version()}, torch {torch.__version__}, numpy {np.__version__}, "
        f"tensorffi {info['version']} ({info['compiler']}, {info['build_flags']})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, fewer cases")
    parser.add_argument("--threads", type=int, default=None, help="threads for both (default: all CPUs)")
    parser.add_argument("--results", action="store_true", help="append the table to benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    # Every peer is the same `step` code object compiled for several shapes: without a
    # higher limit dynamo would stop compiling it and silently run it eagerly.
    torch._dynamo.config.recompile_limit = 64
    threads = args.threads or tensorffi.get_num_threads()
    torch.set_num_threads(threads)
    reps = 7 if args.quick else 25
    budget = 3.0 if args.quick else 15.0
    cases = [("N = 256", 1, 256, 1), ("N = 1024", 1, 1024, 1), ("N = 4096", 1, 4096, 1), ("B = 64, N = 64", 64, 64, 1)]
    if not args.quick:
        cases.append(("N = 1024, 100 steps", 1, 1024, 100))
    rows = []
    for label, b, n, steps in cases:
        r = reps if n * n * b * steps <= 1024 * 1024 * 4 else max(3, reps // 3)
        row = bench_case(label, b, n, steps, r, threads, budget)
        rows.append(row)
        print(f"  {label}: done (compile times {', '.join(f'{k} {v:.1f} s' for k, v in row['compile_s'].items())})",
              file=sys.stderr, flush=True)
    out = table(rows, threads)
    n_alt = 4096 if not args.quick else 2048
    alt = bench_alternating(n_alt, 12 if args.quick else 30, threads)
    print("  alternating: done", file=sys.stderr, flush=True)
    first = bench_first_call(4096, threads, 3 if args.quick else 5)
    print("  first call: done", file=sys.stderr, flush=True)
    energy = bench_energy(64, 15 if args.quick else 41, threads)
    compile_s = next((r["compile_s"].get("coords") for r in rows if r["label"] == "N = 4096"), None)
    out += "\n\n" + extra_table(alt, first, energy, n_alt, 4096, 64, threads, compile_s)
    facts = machine_facts()
    load = os.getloadavg()
    facts += f"; load average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}"
    print(out)
    print()
    print(facts)
    if args.results:
        with open(ROOT / "benchmarks" / "RESULTS.md", "a") as fh:
            fh.write(f"\n## physics\n\n`python benchmarks/physics.py{' --quick' if args.quick else ''}`; {facts}.\n\n{out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
