# SPDX-License-Identifier: MIT
"""Before/after figures of the signal kernels' cancellation work (RESULTS.md, signal:
Ctrl-C): median seconds per call of five cases, printed as JSON. Build the old tree
elsewhere and alternate runs of the two, one process each (two copies of tensorffi
cannot share a process):

    git branch wt-signal-base <start>; git archive wt-signal-base | tar -x -C /tmp/sig-before
    (cd /tmp/sig-before && python build_ffi.py)
    for i in 1 2 3 4 5 6; do for d in /tmp/sig-before $PWD; do
        (cd /tmp && PYTHONPATH=$d python $OLDPWD/benchmarks/sosfilt_cancel.py $d); done; done

The argument is the tree whose tensorffi must be imported (checked).
"""
import sys, time, json, statistics
import numpy as np, torch, scipy.signal as ss
import tensorffi, tensorffi.signal as tsig
assert tensorffi.__file__.startswith(sys.argv[1]), tensorffi.__file__
rng = np.random.default_rng(0)
sos = ss.butter(8, 0.1, output="sos")  # 4 sections
sos32 = torch.from_numpy(sos.astype(np.float32))
cases = {}
x1 = torch.from_numpy(rng.standard_normal((64, 4096), dtype=np.float32))
cases["(64,4096) f32"] = (lambda: tsig.sosfilt(sos32, x1), 0.3)
x2 = torch.from_numpy(rng.standard_normal((2, 256), dtype=np.float32)); z2 = torch.zeros(4, 2, 2)
cases["(2,256) f32 zi"] = (lambda: tsig.sosfilt(sos32, x2, zi=z2), 0.3)
x3 = rng.standard_normal((1, 256)); s64 = sos.copy()
cases["(1,256) f64"] = (lambda: tsig.sosfilt(s64, x3), 0.3)
x4 = torch.from_numpy(rng.standard_normal((16, 1_000_000), dtype=np.float32))
cases["(16,1M) f32"] = (lambda: tsig.sosfilt(sos32, x4), 1.5)
x5 = rng.standard_normal((8, 100_000))
cases["filtfilt (8,100k) f64"] = (lambda: tsig.sosfiltfilt(s64, x5), 1.0)
out = {}
for name, (fn, budget) in cases.items():
    for _ in range(3): fn()
    ts = []; t_end = time.perf_counter() + budget
    while time.perf_counter() < t_end or len(ts) < 5:
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    out[name] = statistics.median(ts)
print(json.dumps(out))
