# SPDX-License-Identifier: MIT
"""The quick start as a script: the tour of examples/quickstart.ipynb in plain Python.

    python examples/quickstart.py

The seed recipe, a contract, C from a string (what a %%tensorffi cell does in a
notebook), a C function as a PyTorch operator under torch.compile, IIR filtering
with streaming state, CSV with a progress bar, and n-body. Each step checks its
result against an independent reference and prints one line.
"""
from __future__ import annotations

import tempfile
from importlib import resources
from pathlib import Path

import numpy as np
import torch

import tensorffi


def seed_recipe() -> None:
    lib = tensorffi.compile("seed", source="""
void process_data(float *data, int size) {
    for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f;
}
""")
    t = torch.arange(5, dtype=torch.float32)
    lib.process_data(t, t.numel())  # in place, on t's own memory
    assert t.tolist() == [1.0, 3.0, 5.0, 7.0, 9.0]
    bad = torch.arange(5, dtype=torch.float64)
    try:
        lib.process_data(bad, bad.numel())
    except tensorffi.DTypeError as exc:
        print(f"1. seed recipe: {t.tolist()}; a float64 tensor is refused: {exc}")


def contract() -> None:
    lib = tensorffi.compile("rows", source="""
#include <stdint.h>
void row_sums(const double *x, double *out, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; i++) {
        double s = 0;
        for (int64_t j = 0; j < cols; j++) s += x[i * cols + j];
        out[i] = s;
    }
}
""", contracts={"row_sums": "x: [rows, cols]; out: out [rows]"})
    x = np.random.default_rng(0).standard_normal((4, 6))
    np.testing.assert_allclose(lib.row_sums(x), x.sum(axis=1), rtol=1e-12)
    print("2. a contract (rows, cols filled in, out allocated):")
    print(tensorffi.describe(lib.row_sums))


def operator() -> None:
    lib = tensorffi.compile("cube", source="""
#include <stdint.h>
void cube(const double *x, double *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i] * x[i];
}
void cube_backward(const double *grad_y, const double *x, double *grad_x, int64_t n) {
    for (int64_t i = 0; i < n; i++) grad_x[i] = 3.0 * x[i] * x[i] * grad_y[i];
}
""", contracts={"cube": "x: [n]; y: out [n]", "cube_backward": "grad_y: [n]; x: [n]; grad_x: out [n]"})
    if "quickstart_py::cube" not in tensorffi.ops.operators():
        tensorffi.ops.register(lib.cube, "quickstart_py::cube", backward=lib.cube_backward)

    def model(v: torch.Tensor) -> torch.Tensor:
        return torch.ops.quickstart_py.cube(v).sum()

    v = torch.linspace(-1, 2, 7, dtype=torch.float64, requires_grad=True)
    loss = torch.compile(model, backend="aot_eager", fullgraph=True)(v)
    loss.backward()
    torch.testing.assert_close(loss, (v.detach() ** 3).sum())
    torch.testing.assert_close(v.grad, 3 * v.detach() ** 2)
    print(f"3. torch.ops.quickstart_py.cube under torch.compile: loss {loss.item():.4f}, gradient from C")


def signal() -> None:
    with resources.files("tensorffi").joinpath("data/signal_ecg.npz").open("rb") as f:
        ecg = np.load(f)
        x, clean, sos = ecg["x"].astype(np.float64), ecg["clean"], ecg["sos"]
    zi = tensorffi.signal.sosfilt_zi(sos) * x[0]
    whole, _ = tensorffi.signal.sosfilt(sos, x, zi=zi)
    parts, z = [], zi
    for chunk in np.array_split(x, 10):
        y, z = tensorffi.signal.sosfilt(sos, chunk, zi=z)
        parts.append(y)
    np.testing.assert_allclose(np.concatenate(parts), whole, rtol=1e-12, atol=1e-15)

    def snr(y: np.ndarray) -> float:
        return float(10 * np.log10(np.sum(clean.astype(np.float64) ** 2) / np.sum((y - clean) ** 2.0)))

    zero_phase = tensorffi.signal.sosfiltfilt(sos, x)
    assert snr(zero_phase) > snr(x) + 5
    print(f"4. ECG: SNR {snr(x):.1f} dB -> {snr(zero_phase):.1f} dB; streamed in 10 chunks == one call")


def csv(work: Path) -> None:
    table = np.random.default_rng(2).standard_normal((100_000, 6))
    path = work / "table.csv"
    np.savetxt(path, table, fmt="%.17g", delimiter=",", header="a,b,c,d,e,f", comments="")
    t, names = tensorffi.io.read_csv(path, dtype=torch.float64, progress=True, return_names=True)
    assert names == ["a", "b", "c", "d", "e", "f"] and np.array_equal(t.numpy(), table)
    print(f"5. read_csv: {path.stat().st_size / 1e6:.1f} MB -> {tuple(t.shape)} {t.dtype}, every value exact")


def nbody() -> None:
    names, pos, vel, mass = tensorffi.physics.jovian_system()
    pos, vel, mass = map(torch.from_numpy, (pos, vel, mass))
    e0 = float(tensorffi.physics.energy(pos, vel, mass))
    p1, v1, traj = tensorffi.physics.nbody(pos, vel, mass, dt=0.01, steps=100_000, record_every=100, progress=True)
    e1 = float(tensorffi.physics.energy(p1, v1, mass))
    assert abs(e1 - e0) / abs(e0) < 1e-5
    rel = (traj[:, 1] - traj[:, 0]).numpy()
    angle = np.unwrap(np.arctan2(rel[:, 1], rel[:, 0]))
    period = (traj.shape[0] - 1) * 100 * 0.01 / ((angle[-1] - angle[0]) / (2 * np.pi))
    assert abs(period - 11.86) < 0.2
    print(f"6. n-body: 1000 years, relative energy change {abs(e1 - e0) / abs(e0):.1e}, "
          f"Jupiter's period {period:.2f} years (11.86 tabulated)")


def main() -> None:
    seed_recipe()
    contract()
    operator()
    signal()
    with tempfile.TemporaryDirectory() as tmp:
        csv(Path(tmp))
    nbody()
    print("next: the README, examples/quickstart.ipynb (%%tensorffi cells), tensorffi bench")


if __name__ == "__main__":
    main()
