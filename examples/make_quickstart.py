# SPDX-License-Identifier: MIT
"""Write examples/quickstart.ipynb (unexecuted) from the cells below.

    python examples/make_quickstart.py

The notebook is generated so that its cells stay reviewable as plain text; the test
suite executes it (tests/test_notebook.py). examples/quickstart.py is the same tour
as a script.
"""
from __future__ import annotations

from pathlib import Path

import nbformat

CELLS: list[tuple[str, str]] = [
    ("md", """# tensorffi quick start

C code callable on PyTorch tensors and NumPy arrays — zero-copy and checked. This notebook walks
through the seed recipe, contracts, C written in a cell (`%%tensorffi`), tensorffi's own kernels
(IIR filtering with streaming state, CSV with a progress bar, n-body) and a C function as a PyTorch
operator under `torch.compile`. Every cell checks its result against an independent reference.

Run it top to bottom; it needs a C compiler (gcc or clang) and takes well under a minute."""),
    ("code", """import numpy as np
import torch
import tensorffi

tensorffi.info()"""),
    ("md", """## 1. The seed recipe: `void process_data(float *data, int size)`

`tensorffi.compile()` builds C out of line (cffi API mode), caches the module, and reads the
declarations from the C itself. The bound function checks every argument before C runs."""),
    ("code", """SEED = '''
void process_data(float *data, int size) {
    for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f;
}
'''
lib = tensorffi.compile("seed", source=SEED)
t = torch.arange(5, dtype=torch.float32)
lib.process_data(t, t.numel())          # in place, on t's own memory
assert t.tolist() == [1.0, 3.0, 5.0, 7.0, 9.0]
lib"""),
    ("md", "A mistake is an exception that names the function and the argument, raised before C touches memory:"),
    ("code", """bad = torch.arange(5, dtype=torch.float64)
try:
    lib.process_data(bad, bad.numel())
except tensorffi.DTypeError as exc:
    print(f"{type(exc).__name__}: {exc}")
assert bad.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]   # untouched"""),
    ("md", """## 2. A contract: shapes, filled-in lengths, outputs

Where the declaration does not say enough, one line does. `tensorffi.describe()` shows what the
bridge does with each argument."""),
    ("code", """lib2 = tensorffi.compile("rows", source='''
#include <stdint.h>
void row_sums(const double *x, double *out, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; i++) {
        double s = 0;
        for (int64_t j = 0; j < cols; j++) s += x[i * cols + j];
        out[i] = s;
    }
}
''', contracts={"row_sums": "x: [rows, cols]; out: out [rows]"})
x = np.random.default_rng(0).standard_normal((4, 6))
np.testing.assert_allclose(lib2.row_sums(x), x.sum(axis=1), rtol=1e-12)
tensorffi.describe(lib2.row_sums)"""),
    ("md", """## 3. C in a cell: `%%tensorffi`

Load the extension once; then a cell that starts with `%%tensorffi` is C. Its functions are bound
and placed in the notebook's namespace (the Library too, under the name on the magic line).
Contracts go on the magic line with `-c "FUNC: CONTRACT"`; compiler errors point at the cell's own
lines. Re-running an unchanged cell is a cache hit; an edited one is rebuilt."""),
    ("code", "%load_ext tensorffi"),
    ("code", """%%tensorffi smoothing -c "smooth3: x: [n]; y: out [n]"
#include <stdint.h>
/* a centred 3-point moving average; the ends average what they have */
void smooth3(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float s = x[i];
        int c = 1;
        if (i > 0)     { s += x[i - 1]; c++; }
        if (i + 1 < n) { s += x[i + 1]; c++; }
        y[i] = s / c;
    }
}"""),
    ("code", """noisy = torch.from_numpy(np.random.default_rng(1).standard_normal(1000).astype(np.float32))
smoothed = smooth3(noisy)
ref = np.convolve(noisy.numpy().astype(np.float64), np.ones(3) / 3, mode="same")
ref[0], ref[-1] = noisy[:2].double().mean(), noisy[-2:].double().mean()
np.testing.assert_allclose(smoothed.numpy(), ref, rtol=1e-5, atol=1e-6)
print(f"std {noisy.std():.3f} -> {smoothed.std():.3f}")"""),
    ("md", """## 4. A C function as a PyTorch operator, under `torch.compile`

`--op NS::NAME` registers a function as `torch.ops.NS.NAME` (through `tensorffi.ops.register`),
with its schema and shape rule derived from the contract; `--backward` gives it a C backward, so
autograd works through C. (`backend="aot_eager"` keeps this cell quick; inductor works too.)"""),
    ("code", """%%tensorffi -c "cube: x: [n]; y: out [n]" -c "cube_backward: grad_y: [n]; x: [n]; grad_x: out [n]" --op quickstart::cube --backward cube=cube_backward
#include <stdint.h>
void cube(const double *x, double *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i] * x[i];
}
void cube_backward(const double *grad_y, const double *x, double *grad_x, int64_t n) {
    for (int64_t i = 0; i < n; i++) grad_x[i] = 3.0 * x[i] * x[i] * grad_y[i];
}"""),
    ("code", """def model(v):
    return torch.ops.quickstart.cube(v).sum()

v = torch.linspace(-1, 2, 7, dtype=torch.float64, requires_grad=True)
compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
loss = compiled(v)
loss.backward()
torch.testing.assert_close(loss, (v.detach() ** 3).sum())
torch.testing.assert_close(v.grad, 3 * v.detach() ** 2)
print(f"loss {loss.item():.4f}, gradient {v.grad.tolist()}")"""),
    ("md", """## 5. IIR filtering with streaming state — `tensorffi.signal`

A noisy ECG and a Butterworth band-pass ship with the package. `sosfilt` follows SciPy's
semantics; filtering a signal chunk by chunk, passing each final state `zf` as the next `zi`,
gives exactly what one call gives."""),
    ("code", """from importlib import resources

with resources.files("tensorffi").joinpath("data/signal_ecg.npz").open("rb") as f:
    ecg = np.load(f)
    x, clean, sos = ecg["x"], ecg["clean"], ecg["sos"]   # float32 samples, float64 sections

x64 = x.astype(np.float64)                  # float64 states carried between chunks, as in one call
zi = tensorffi.signal.sosfilt_zi(sos) * x64[0]
whole, _ = tensorffi.signal.sosfilt(sos, x64, zi=zi)
parts, z = [], zi
for chunk in np.array_split(x64, 10):          # e.g. blocks arriving from a device
    y, z = tensorffi.signal.sosfilt(sos, chunk, zi=z)
    parts.append(y)
streamed = np.concatenate(parts)
np.testing.assert_allclose(streamed, whole, rtol=1e-12, atol=1e-15)

def snr(y):
    return 10 * np.log10(np.sum(clean.astype(np.float64) ** 2) / np.sum((y - clean) ** 2.0))

zero_phase = tensorffi.signal.sosfiltfilt(sos, x)
assert snr(zero_phase) > snr(x) + 5
print(f"SNR {snr(x):.1f} dB -> {snr(zero_phase):.1f} dB (sosfiltfilt); streamed == one call")"""),
    ("md", """## 6. Numeric CSV to tensors, with a progress bar — `tensorffi.io.read_csv`

`progress=True` draws a bar that fits where you are: a widget in Jupyter when `ipywidgets` is
installed, otherwise a quiet text bar (at most two redraws a second)."""),
    ("code", """import pathlib, tempfile

rng = np.random.default_rng(2)
table = rng.standard_normal((100_000, 6))
path = pathlib.Path(tempfile.mkdtemp()) / "table.csv"
np.savetxt(path, table, fmt="%.17g", delimiter=",", header="a,b,c,d,e,f", comments="")

t, names = tensorffi.io.read_csv(path, dtype=torch.float64, progress=True, return_names=True)
assert names == ["a", "b", "c", "d", "e", "f"]
assert np.array_equal(t.numpy(), table)      # every value exactly as float() reads it
print(f"{path.stat().st_size / 1e6:.1f} MB -> {tuple(t.shape)} {t.dtype}")"""),
    ("md", """## 7. n-body — `tensorffi.physics`

The Sun and the four giant planets (shipped data), a thousand years of leapfrog in one C call."""),
    ("code", """names, pos, vel, mass = tensorffi.physics.jovian_system()
pos, vel, mass = map(torch.from_numpy, (pos, vel, mass))
e0 = float(tensorffi.physics.energy(pos, vel, mass))
p1, v1, traj = tensorffi.physics.nbody(pos, vel, mass, dt=0.01, steps=100_000, record_every=100, progress=True)
e1 = float(tensorffi.physics.energy(p1, v1, mass))
assert abs(e1 - e0) / abs(e0) < 1e-5
rel = (traj[:, 1] - traj[:, 0]).numpy()     # Jupiter seen from the Sun, a frame a year
angle = np.unwrap(np.arctan2(rel[:, 1], rel[:, 0]))
period = (traj.shape[0] - 1) * 100 * 0.01 / ((angle[-1] - angle[0]) / (2 * np.pi))
assert abs(period - 11.86) < 0.2
print(f"relative energy change {abs(e1 - e0) / abs(e0):.1e}; Jupiter's period {period:.2f} years (11.86 tabulated)")"""),
    ("md", """## Next

* your own library: `tensorffi.load("./mylib.so", "void process_data(float *data, int size);")`;
* the README: contracts, handles and buffers C keeps, callbacks, DataLoader and dask;
* `tensorffi bench` in a terminal: how fast this is on your machine, beside SciPy, NumPy and torch;
* `%tensorffi cache` lists what `compile()` built; `%tensorffi cache clear` empties it."""),
]


def build() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for kind, text in CELLS:
        nb.cells.append(nbformat.v4.new_markdown_cell(text) if kind == "md" else nbformat.v4.new_code_cell(text))
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:02d}"
    return nb


if __name__ == "__main__":
    out = Path(__file__).resolve().parent / "quickstart.ipynb"
    nbformat.write(build(), out)
    print(f"wrote {out}")
